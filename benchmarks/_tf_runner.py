"""Times one case's first fetching step (graph.pbtxt, else graph.pb) with TensorFlow (run by the
scripts in benchmarks/ with the Python of an environment where tensorflow is installed; never
imported by dfg).

    _tf_runner.py CASE_DIR WARMUP ITERS THREADS [FEEDS.npz FETCH,FETCH...]

With the last two arguments, the step feeds the arrays of FEEDS.npz (keys are tensor names)
and fetches the given tensors instead of the case's first step."""

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf
from bench_cases import time_steps, timed_step  # stdlib and numpy only: no dfg needed
from google.protobuf import text_format

case_dir, warmup, iters, threads = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4])
fetch, feed, setup = timed_step(case_dir)
gd = tf.compat.v1.GraphDef()
if (case_dir / "graph.pbtxt").exists():
    text_format.Parse((case_dir / "graph.pbtxt").read_text(), gd)
else:  # the model zoo keeps binary graphs
    gd.ParseFromString((case_dir / "graph.pb").read_bytes())
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.import_graph_def(gd, name="")
config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=threads)
with tf.compat.v1.Session(graph=graph, config=config) as sess:
    for targets, f in setup:
        sess.run(targets, f)
    if len(sys.argv) > 6:
        with np.load(sys.argv[5]) as z:
            feed = {k: z[k] for k in z.files}
        fetch = sys.argv[6].split(",")
    # the first step of the Session (Grappler, executor and kernel creation), as dfg's is timed
    t0 = time.perf_counter()
    sess.run(fetch, feed)
    first = time.perf_counter() - t0
    times = time_steps(sess, fetch, feed, warmup, iters)
print(json.dumps({"median_s": statistics.median(times), "min_s": min(times), "first_s": first}))
