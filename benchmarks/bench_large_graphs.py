"""Benchmark dfg on large graphs: load, info, validate, prune, optimize, pbtxt read-back.

Builds (with plain protobuf, no TensorFlow) a model-like graph of N nodes (dense layers in
name scopes: Const kernel/bias -> MatMul -> BiasAdd -> Relu, with residual AddV2s), an
Identity chain of C nodes and optionally a while loop with a long body, writes them to a
temporary folder and times the real ``dfg`` commands as subprocesses, printing wall seconds and
peak RSS of each::

    python benchmarks/bench_large_graphs.py                    # 100k model, 100k chain
    python benchmarks/bench_large_graphs.py --nodes 1000000   # the 1M-node case
    python benchmarks/bench_large_graphs.py --pbtxt            # also pbtxt write + read-back
    python benchmarks/bench_large_graphs.py --chain 0          # skip the chain optimize
    python benchmarks/bench_large_graphs.py --loop 100000      # also a 100k-node while loop
    PYTHONPATH=/path/to/other/checkout python benchmarks/...   # e.g. time an older dfg

CPU seconds (user + sys of the dfg process) are printed beside wall seconds: on a busy
machine they are the fairer comparison.

The chain's optimize time must grow linearly: ``--chain 25000`` then ``--chain 100000``
should take about 4x longer, not 16x.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dfg.schemas import graph_pb2, types_pb2

FLOAT = types_pb2.DT_FLOAT


def _typed(g, name: str, op: str, inputs: list[str]) -> None:
    n = g.node.add(name=name, op=op)
    n.input.extend(inputs)
    n.attr["T"].type = FLOAT


def _const(g, name: str, dims: tuple[int, ...]) -> None:
    n = g.node.add(name=name, op="Const")
    n.attr["dtype"].type = FLOAT
    t = n.attr["value"].tensor
    t.dtype = FLOAT
    for d in dims:
        t.tensor_shape.dim.add().size = d
    t.float_val.append(0.5)


def build_model(nodes: int) -> graph_pb2.GraphDef:
    """About ``nodes`` nodes: 6-node dense layers in scopes of 100 layers; output 'output'."""
    g = graph_pb2.GraphDef()
    x = g.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = FLOAT
    for d in (-1, 8):
        x.attr["shape"].shape.dim.add().size = d
    cur = "input"
    layer = 0
    while len(g.node) + 6 <= nodes - 1:
        p = f"block_{layer // 100:05d}/dense_{layer % 100}"
        _const(g, f"{p}/kernel", (8, 8))
        _const(g, f"{p}/bias", (8,))
        _typed(g, f"{p}/MatMul", "MatMul", [cur, f"{p}/kernel"])
        _typed(g, f"{p}/BiasAdd", "BiasAdd", [f"{p}/MatMul", f"{p}/bias"])
        _typed(g, f"{p}/Relu", "Relu", [f"{p}/BiasAdd"])
        _typed(g, f"{p}/residual", "AddV2", [f"{p}/Relu", cur])
        cur = f"{p}/residual"
        layer += 1
    _typed(g, "output", "Identity", [cur])
    return g


def build_chain(length: int) -> graph_pb2.GraphDef:
    """Placeholder 'x' -> ``length`` Identity nodes -> 'y' (Identity)."""
    g = graph_pb2.GraphDef()
    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = FLOAT
    prev = "x"
    for i in range(length):
        _typed(g, f"id_{i}", "Identity", [prev])
        prev = f"id_{i}"
    _typed(g, "y", "Identity", [prev])
    return g


def build_loop(body: int) -> graph_pb2.GraphDef:
    """A v1 while loop (frame 'loop') whose body is ``body`` nodes: a chain alternating
    Identity and AddV2 of a loop invariant, each invariant its own Enter of 'x' (so the frame
    has about body/2 Enters); the counter runs while it is below 'limit'. Fetch 'y'."""
    g = graph_pb2.GraphDef()

    def node(name: str, op: str, inputs: list[str], **attrs: object) -> None:
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        for key, value in attrs.items():
            if key == "T":
                n.attr["T"].type = FLOAT
            elif isinstance(value, bool):
                n.attr[key].b = value
            elif isinstance(value, int):
                n.attr[key].i = value
            else:
                n.attr[key].s = str(value).encode()

    x = g.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = FLOAT
    _const(g, "limit", ())
    _const(g, "start", ())
    enter = {"frame_name": "loop", "parallel_iterations": 10}
    node("loop/Enter", "Enter", ["start"], T=1, is_constant=False, **enter)
    node("loop/Merge", "Merge", ["loop/Enter", "loop/NextIteration"], T=1, N=2)
    node("loop/limit", "Enter", ["limit"], T=1, is_constant=True, **enter)
    node("loop/Less", "Less", ["loop/Merge", "loop/limit"], T=1)
    node("loop/LoopCond", "LoopCond", ["loop/Less"])
    node("loop/Switch", "Switch", ["loop/Merge", "loop/LoopCond"], T=1)
    node("loop/Exit", "Exit", ["loop/Switch"], T=1)
    prev = "loop/Switch:1"
    for i in range(body):
        if i % 2:
            node(f"loop/x_{i}", "Enter", ["x"], T=1, is_constant=True, **enter)
            node(f"loop/body_{i}", "AddV2", [prev, f"loop/x_{i}"], T=1)
        else:
            node(f"loop/body_{i}", "Identity", [prev], T=1)
        prev = f"loop/body_{i}"
    node("loop/NextIteration", "NextIteration", [prev], T=1)
    node("y", "Identity", ["loop/Exit"], T=1)
    return g


def run(argv: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, CPU seconds, peak RSS (MB) and exit status of one dfg command."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([sys.executable, "-m", "dfg.cli.main", *argv],
                             stdout=subprocess.DEVNULL, stderr=err)
        # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN would be the max of all)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        dt = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            err.seek(0)
            print(f"   ! {' '.join(argv)}: exit {p.returncode}: "
                  f"{err.read().decode(errors='replace')[-300:]}")
    return dt, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, p.returncode


def report(label: str, argv: list[str]) -> None:
    dt, cpu, rss, rc = run(argv)
    print(f"{label:<34} {dt:7.2f} s wall {cpu:7.2f} s CPU  peak RSS {rss:7.0f} MB  exit {rc}",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000, help="model graph size (0: skip)")
    ap.add_argument("--chain", type=int, default=100_000, help="Identity chain (0: skip)")
    ap.add_argument("--loop", type=int, default=0,
                    help="also a while loop with a body of this many nodes (0: skip)")
    ap.add_argument("--pbtxt", action="store_true", help="also write and read back pbtxt")
    ap.add_argument("--keep", metavar="DIR", help="write the graphs here instead of a temp dir")
    args = ap.parse_args(argv)

    from google.protobuf.internal import api_implementation

    print(f"protobuf backend: {api_implementation.Type()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.nodes:
            t0 = time.perf_counter()
            gd = build_model(args.nodes)
            pb = folder / f"model_{args.nodes}.pb"
            pb.write_bytes(gd.SerializeToString())
            print(f"model: {len(gd.node)} nodes, {pb.stat().st_size / 1e6:.1f} MB .pb "
                  f"(built in {time.perf_counter() - t0:.1f} s)")
            del gd
            report("info", ["info", str(pb)])
            report("validate", ["validate", str(pb)])
            report("prune --fetch output", ["prune", str(pb), "--fetch", "output",
                                            "-o", str(folder / "pruned.pb")])
            if args.pbtxt:
                txt = folder / f"model_{args.nodes}.pbtxt"
                report("convert -> .pbtxt", ["convert", str(pb), "-o", str(txt)])
                print(f"  .pbtxt: {txt.stat().st_size / 1e6:.1f} MB")
                report("convert .pbtxt -> .pb (read back)",
                       ["convert", str(txt), "-o", str(folder / "back.pb")])
                back = graph_pb2.GraphDef.FromString((folder / "back.pb").read_bytes())
                same = back == graph_pb2.GraphDef.FromString(pb.read_bytes())
                print(f"  read-back GraphDef equal to the original: {same}")
        if args.loop:
            gd = build_loop(args.loop)
            pb = folder / f"loop_{args.loop}.pb"
            pb.write_bytes(gd.SerializeToString())
            print(f"loop: {len(gd.node)} nodes")
            report("info (loop)", ["info", str(pb)])
            report("validate (loop)", ["validate", str(pb)])
            report("prune --fetch y (loop)", ["prune", str(pb), "--fetch", "y",
                                              "-o", str(folder / "loop_pruned.pb")])
        if args.chain:
            gd = build_chain(args.chain)
            pb = folder / f"chain_{args.chain}.pb"
            pb.write_bytes(gd.SerializeToString())
            print(f"chain: {len(gd.node)} nodes")
            report("optimize --fetch y", ["optimize", str(pb), "--fetch", "y",
                                          "-o", str(folder / "chain_opt.pb")])
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
