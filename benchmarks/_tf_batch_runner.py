"""Batch inference with TensorFlow in one process, for bench_batch.py (run with the Python of
an environment where tensorflow is installed; never imported by dfg).

    _tf_batch_runner.py GRAPH.pb FEED FETCH BATCH THREADS SHARD.npz...

Runs every shard's rows through one tf.compat.v1.Session in batches of BATCH (the FEED key of
each npz) and prints JSON: rows, the seconds to import TensorFlow and load the graph, and the
seconds of the inference loop."""

import json
import sys
import time

t0 = time.perf_counter()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

graph_path, feed, fetch, batch, threads = sys.argv[1:6]
batch, threads = int(batch), int(threads)
gd = tf.compat.v1.GraphDef()
with open(graph_path, "rb") as f:
    gd.ParseFromString(f.read())
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.import_graph_def(gd, name="")
config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=threads)
sess = tf.compat.v1.Session(graph=graph, config=config)
startup = time.perf_counter() - t0
t1 = time.perf_counter()
rows = 0
for shard in sys.argv[6:]:
    with np.load(shard) as z:
        x = z[feed]
    outs = [sess.run(fetch, {feed: x[i:i + batch]}) for i in range(0, len(x), batch)]
    rows += sum(len(o) for o in outs)
seconds = time.perf_counter() - t1
print(json.dumps({"rows": rows, "startup_s": startup, "seconds": seconds}))
