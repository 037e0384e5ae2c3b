"""Per-step overhead of a graph partitioned by task on Ray (``Session(cluster="ray")``) against
the same graph in one process (``Session``), with the number of Send/Recv pairs.

    python benchmarks/bench_partition.py [--steps N] [--threads T] [--address ADDR]

Graphs: the TF1 test graphs of tests/data/partition (PS MLP training step, a while loop with
its body on two tasks, a cond with branches on other tasks) and synthetic chains that hop
between two workers K times (K pairs, each a scalar or a 1 MiB float32 array). Each is timed
for N steps after 3 warm-up steps; the table gives the median step in ms and the overhead per
pair run. Without --address a local Ray starts (all actors on this machine: the transfer cost
is Ray's actor call and object store, not a network)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
DATA = os.path.join(HERE, "..", "tests", "data", "partition")


def chain(hops: int, size: int):
    """x -> +1 on worker 0 -> +1 on worker 1 -> ... : ``hops`` edges between tasks."""
    from google.protobuf import text_format

    from dfg.schemas import graph_pb2

    shape = "" if size == 1 else f"dim {{ size: {size} }}"
    lines = [f'node {{ name: "x" op: "Placeholder" device: "/job:worker/task:0" '
             f'attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
             f'attr {{ key: "shape" value {{ shape {{ {shape} }} }} }} }}',
             'node { name: "one" op: "Const" device: "/job:worker/task:0" '
             'attr { key: "dtype" value { type: DT_FLOAT } } '
             'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} '
             'float_val: 1 } } } }']
    prev = "x"
    for k in range(hops + 1):
        lines.append(f'node {{ name: "s{k}" op: "AddV2" input: "{prev}" input: "one" '
                     f'device: "/job:worker/task:{k % 2}" '
                     f'attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}')
        prev = f"s{k}"
    gd = text_format.Parse("\n".join(lines), graph_pb2.GraphDef())
    return gd, prev, {"x": np.zeros(size if size > 1 else (), np.float32)}


def cases():
    with np.load(os.path.join(DATA, "ps_mlp.npz")) as d:
        mlp = (os.path.join(DATA, "ps_mlp.pbtxt"), ["loss"], {"x": d["x"], "y": d["y"]},
               ["train"], ["init"])
    with np.load(os.path.join(DATA, "loop.npz")) as d:
        loop = (os.path.join(DATA, "loop.pbtxt"), ["out"], {"x0": d["x0"], "n": 5}, [],
                ["init"])
    with np.load(os.path.join(DATA, "cond.npz")) as d:
        cond = (os.path.join(DATA, "cond.pbtxt"), ["out"], {"x": d["x"], "p": True}, [], [])
    yield "ps_mlp train step", *mlp
    yield "while loop n=5 (2 tasks)", *loop
    yield "cond (3 tasks)", *cond
    for hops, size in ((1, 1), (8, 1), (32, 1), (8, 1 << 18)):
        gd, out, feeds = chain(hops, size)
        what = "scalar" if size == 1 else "1 MiB"
        yield f"chain {hops} hops, {what}", gd, [out], feeds, [], []


def time_steps(sess, fetches, feeds, targets, steps: int) -> float:
    for _ in range(3):
        sess.run(fetches, feeds, targets=targets)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        sess.run(fetches, feeds, targets=targets)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--address", default=None)
    args = ap.parse_args()
    import ray

    from dfg.executor import Session
    from dfg.executor.distributed import prepare_local_ray
    from dfg.graphdef.partition import partition

    if args.address is None:
        prepare_local_ray()
    ray.init(address=args.address, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    print(f"ray {ray.__version__}, {os.cpu_count()} cpus, {args.threads} thread(s) per "
          f"task, median of {args.steps} steps")
    print(f"{'graph':28} {'tasks':>5} {'pairs':>5} {'1 process ms':>13} {'ray ms':>9} "
          f"{'overhead ms':>12} {'per pair ms':>12}")
    for name, graph, fetches, feeds, targets, inits in cases():
        p = partition(graph)
        pairs = len(p.transfers)
        with Session(graph, threads=args.threads) as one:
            if inits:
                one.run([], targets=inits)
            local = time_steps(one, fetches, feeds, targets, args.steps)
        with Session(graph, cluster="ray", threads=args.threads) as sess:
            if inits:
                sess.run([], targets=inits)
            dist = time_steps(sess, fetches, feeds, targets, args.steps)
        over = dist - local
        print(f"{name:28} {len(p.graphs):5d} {pairs:5d} {local:13.3f} {dist:9.2f} "
              f"{over:12.2f} {over / max(pairs, 1):12.3f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
