"""Per-signature optimization on the Keras zoo and the `bench` conformance cases: node counts
before and after ``optimize_for_signature``, its time, and the warm step time of the original
and the optimized graph, with the largest difference between their outputs.

    OPENBLAS_NUM_THREADS=1 python benchmarks/fusion_bench.py [--iters N] [--threads T]
        [--no-fuse] [--elementwise] [--against-unfused] [--batch-repeat R] [--json] [CASE ...]

``--against-unfused``: the "before" graph is the optimized one without fusions (what the
fusions alone gain), instead of the graph as written.

Step times are medians of wall time and of process CPU time; the two sessions alternate step
by step in the same run, so load from other processes hits both alike. On a loaded machine
the CPU time is the figure to trust (wall time then mostly measures the scheduler); with
OPENBLAS_NUM_THREADS=1 it is not inflated by BLAS threads spinning. ``--batch-repeat R``
feeds each input repeated R times along the batch axis (larger tensors).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "data" / "models"
CONFORMANCE = ROOT / "tests" / "data" / "conformance"


def cases(names: list[str]) -> list[Path]:
    out = [p.parent for p in sorted(ZOO.glob("*/case.json")) if not p.parent.name.startswith(
        "layer_")]
    for p in sorted(CONFORMANCE.glob("*/case.json")):
        if "bench" in json.loads(p.read_text()).get("features", []):
            out.append(p.parent)
    return [d for d in out if not names or d.name in names]


def graph_file(d: Path) -> Path:
    return d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt"


def measure(d: Path, iters: int, threads: int, fuse: bool, elementwise: bool = False,
            repeat: int = 1, against_unfused: bool = False) -> dict:
    from dfg.executor import Session
    from dfg.graphdef.io import load_graph
    from dfg.graphdef.passes.pipeline import optimize_for_signature

    step = json.loads((d / "case.json").read_text())["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    if repeat > 1:
        feed = {k: np.repeat(v, repeat, axis=0) if v.ndim else v for k, v in feed.items()}
    fetch = list(step["fetch"])
    g = load_graph(graph_file(d))
    feeds = [k if ":" in k else f"{k}:0" for k in feed]
    kw = {"fuse": fuse, "elementwise": elementwise}
    optimize_for_signature(g, fetch, feeds, **kw)        # warm imports and caches
    opt_times, opt_cpu = [], []
    for _ in range(3):
        c0 = time.process_time()
        res = optimize_for_signature(g, fetch, feeds, **kw)
        opt_cpu.append(time.process_time() - c0)
        opt_times.append(res.seconds)
    before = optimize_for_signature(g, fetch, feeds, fuse=False).graph_def \
        if against_unfused else g
    # optimize=False: each session runs its graph as given (a Session optimizes by default)
    with Session(before, threads=threads, optimize=False) as a, \
            Session(res.graph_def, threads=threads, optimize=False) as b:
        out_a = a.run(fetch, feed)
        out_b = b.run(fetch, feed)
        for _ in range(2):
            a.run(fetch, feed)
            b.run(fetch, feed)
        ta, tb, ca, cb = [], [], [], []
        for _ in range(iters):
            for sess, times, cpu in ((a, ta, ca), (b, tb, cb)):
                c0 = time.process_time()
                t0 = time.perf_counter()
                sess.run(fetch, feed)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
    diff = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
               if np.asarray(x).size else 0.0 for x, y in zip(out_a, out_b))
    return {"case": d.name, "nodes_before": res.nodes_before, "nodes_after": res.nodes_after,
            "optimize_ms": 1e3 * statistics.median(opt_times),
            "optimize_cpu_ms": 1e3 * statistics.median(opt_cpu),
            "step_ms_before": 1e3 * statistics.median(ta),
            "step_ms_after": 1e3 * statistics.median(tb),
            "step_cpu_ms_before": 1e3 * statistics.median(ca),
            "step_cpu_ms_after": 1e3 * statistics.median(cb), "max_abs_diff": diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-fuse", action="store_true")
    ap.add_argument("--elementwise", action="store_true", help="add the opt-in chains")
    ap.add_argument("--batch-repeat", type=int, default=1)
    ap.add_argument("--against-unfused", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    if not args.json:
        print(f"{'case':22} {'nodes':>11} {'opt ms (cpu)':>13} {'wall step ms':>15} "
              f"{'cpu step ms':>15} {'cpu gain':>8} {'max diff':>9}")
    for d in cases(args.cases):
        r = measure(d, args.iters, args.threads, not args.no_fuse, args.elementwise,
                    args.batch_repeat, args.against_unfused)
        rows.append(r)
        if not args.json:
            print(f"{r['case']:22} {r['nodes_before']:5d}->{r['nodes_after']:<5d} "
                  f"{r['optimize_ms']:6.0f} ({r['optimize_cpu_ms']:4.0f}) "
                  f"{r['step_ms_before']:7.2f}->{r['step_ms_after']:<7.2f} "
                  f"{r['step_cpu_ms_before']:7.2f}->{r['step_cpu_ms_after']:<7.2f} "
                  f"{r['step_cpu_ms_before'] / max(r['step_cpu_ms_after'], 1e-9):7.2f}x "
                  f"{r['max_abs_diff']:9.2e}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
