"""Time the Conv2D nodes of the `bench_cnn` conformance case alone, with dfg and with
TensorFlow in the same run when it is available, and print the ratio.

    python benchmarks/conv2d_bench_cnn.py [--tf-python /path/to/tf-venv/bin/python] [--iters N]

Each Conv2D is fed its real input (computed once by running the graph) and its filter, so the
step is the three convolutions and nothing else, in both runtimes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_cases import CASES, find_tf_python, time_tf

from dfg.executor import Session
from dfg.graphdef.io import load_graph

CASE = CASES / "bench_cnn"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    graph = load_graph(CASE / "graph.pbtxt")
    convs = sorted(n.name for n in graph.nodes if n.op == "Conv2D")
    inputs = sorted({f"{src}:{slot}" for c in convs for src, slot in graph.node(c).inputs})
    images = np.load(CASE / "s0_feed_0.npy")
    with Session(graph, threads=args.threads) as sess:
        values = sess.run(inputs, {"images:0": images})
        feed = dict(zip(inputs, values))
        fetch = [f"{c}:0" for c in convs]
        for _ in range(args.warmup):
            sess.run(fetch, feed)
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            sess.run(fetch, feed)
            times.append(time.perf_counter() - t0)
    ours = statistics.median(times)
    shapes = ", ".join(f"{c} {tuple(feed[graph.node(c).inputs[0][0] + ':0'].shape)}"
                       f"*{tuple(feed[graph.node(c).inputs[1][0] + ':0'].shape)}" for c in convs)
    print(f"bench_cnn Conv2D nodes, threads={args.threads}: {shapes}")
    print(f"dfg  median {ours * 1e3:8.3f} ms  (min {min(times) * 1e3:.3f})")
    tf_py = find_tf_python(args.tf_python)
    if tf_py is None:
        print("tensorflow not found: pass --tf-python")
        return
    with tempfile.TemporaryDirectory() as tmp:
        npz = Path(tmp) / "feeds.npz"
        np.savez(npz, **feed)
        tf = time_tf(tf_py, CASE, args.warmup, args.iters, args.threads,
                     extra=[str(npz), ",".join(fetch)])
    print(f"tf   median {tf['median_s'] * 1e3:8.3f} ms  (min {tf['min_s'] * 1e3:.3f})")
    print(f"dfg/tf {ours / tf['median_s']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
