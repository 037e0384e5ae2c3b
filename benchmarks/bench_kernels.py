"""Time the convolution and pooling kernels alone on shapes taken from the Keras zoo
(tests/data/models and the full-size models of its generate.py --full), numpy only.

    python benchmarks/bench_kernels.py [--rounds 5] [--only Conv2D] [--json]
                                       [--against /path/to/old/pkg] [--threads-blas N]

Each case calls the registered kernel directly (attrs bound once, as the executor does) and
reports the median over rounds of the best-of-a-batch microseconds per call. ``--against
DIR`` times another dfg too (DIR holds a ``dfg`` package, e.g. built from ``git archive`` of
an older commit with ``dfg/executor`` etc. linked in): each round runs both in fresh
subprocesses, alternating, so that load from other processes hits both alike; the table then
shows old, new and old/new. ``--threads-blas N`` limits BLAS to N threads (threadpoolctl, if
installed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

S1 = [1, 1, 1, 1]
S2 = [1, 2, 2, 1]
# (op, input shape, filter shape or None, attrs); from the zoo's Conv2D/pool nodes.
CASES: list[tuple[str, tuple, tuple | None, dict]] = [
    # small zoo (width-reduced, batch 2)
    ("Conv2D", (2, 7, 7, 20), (1, 1, 20, 4), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 3, 3, 68), (1, 1, 68, 12), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 7, 7, 4), (3, 3, 4, 4), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 4, 4, 16), (3, 3, 16, 4), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 3, 3, 8), (1, 7, 8, 10), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 38, 38, 3), (7, 7, 3, 8), {"strides": S2, "padding": "VALID"}),
    ("Conv2D", (2, 75, 75, 3), (3, 3, 3, 4), {"strides": S2, "padding": "VALID"}),
    # full-size zoo models at 32x32 (batch 2)
    ("Conv2D", (2, 8, 8, 128), (3, 3, 128, 32), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 2, 2, 1024), (1, 1, 1024, 512), {"strides": S1, "padding": "VALID"}),
    ("Conv2D", (2, 8, 8, 256), (1, 1, 256, 128), {"strides": S1, "padding": "VALID"}),
    ("Conv2D", (2, 16, 16, 64), (3, 3, 64, 64), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 16, 16, 64), (1, 1, 64, 128), {"strides": S2, "padding": "VALID"}),
    # ImageNet-sized layers (224x224 ResNet50 / MobileNet)
    ("Conv2D", (2, 56, 56, 64), (3, 3, 64, 64), {"strides": S1, "padding": "SAME"}),
    ("Conv2D", (2, 56, 56, 64), (1, 1, 64, 256), {"strides": S1, "padding": "VALID"}),
    ("Conv2D", (2, 230, 230, 3), (7, 7, 3, 64), {"strides": S2, "padding": "VALID"}),
    ("DepthwiseConv2dNative", (2, 8, 8, 32), (3, 3, 32, 1), {"strides": S1, "padding": "SAME"}),
    ("DepthwiseConv2dNative", (2, 2, 2, 512), (3, 3, 512, 1), {"strides": S1,
                                                                "padding": "SAME"}),
    ("DepthwiseConv2dNative", (2, 17, 17, 64), (3, 3, 64, 1), {"strides": S2,
                                                                "padding": "VALID"}),
    ("DepthwiseConv2dNative", (2, 112, 112, 32), (3, 3, 32, 1), {"strides": S1,
                                                                  "padding": "SAME"}),
    ("DepthwiseConv2dNative", (2, 56, 56, 128), (3, 3, 128, 1), {"strides": S2,
                                                                  "padding": "SAME"}),
    ("MaxPool", (2, 18, 18, 8), None, {"ksize": [1, 3, 3, 1], "strides": S2,
                                       "padding": "VALID"}),
    ("MaxPool", (2, 3, 3, 68), None, {"ksize": [1, 3, 3, 1], "strides": S2,
                                      "padding": "VALID"}),
    ("MaxPool", (2, 112, 112, 64), None, {"ksize": [1, 3, 3, 1], "strides": S2,
                                          "padding": "SAME"}),
    ("AvgPool", (2, 7, 7, 12), None, {"ksize": [1, 3, 3, 1], "strides": S1,
                                      "padding": "SAME"}),
    ("AvgPool", (2, 8, 8, 128), None, {"ksize": [1, 2, 2, 1], "strides": S2,
                                       "padding": "VALID"}),
    ("AvgPool", (2, 35, 35, 192), None, {"ksize": [1, 3, 3, 1], "strides": S1,
                                         "padding": "SAME"}),
]


def _label(case: tuple) -> str:
    op, xs, fs, at = case
    shapes = "x".join(str(d) for d in xs) + (" * " + "x".join(str(d) for d in fs) if fs else "")
    k = at.get("ksize")
    extra = f" k{k[1]}x{k[2]}" if k else ""
    return f"{op} {shapes}{extra} s{at['strides'][1]} {at['padding']}"


def run_cases(only: str | None, blas_threads: int | None) -> dict[str, float]:
    """Seconds per call of each case, best of a few batches (one round)."""
    import numpy as np

    from dfg.executor.kernels.registry import KernelContext, complete_attrs, lookup

    limiter = None
    if blas_threads:
        try:
            from threadpoolctl import threadpool_limits
            limiter = threadpool_limits(blas_threads, user_api="blas")
        except ImportError:
            print("threadpoolctl is not installed: BLAS threads not limited", file=sys.stderr)
    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for case in CASES:
        op, xs, fs, at = case
        if only and op not in only.split(","):
            continue
        args = [rng.standard_normal(xs).astype(np.float32)]
        if fs:
            args.append(rng.standard_normal(fs).astype(np.float32))
        kd = lookup(op)
        ctx = KernelContext(op, op, complete_attrs(op, dict(at), args))

        def call(fn=kd.fn, ctx=ctx, args=args) -> None:
            fn(ctx, *args)

        t0 = timeit.timeit(call, number=1)  # warm up (plans, caches)
        number = max(1, min(2000, int(0.02 / max(t0, 1e-7))))
        best = min(timeit.repeat(call, number=number, repeat=3)) / number
        out[_label(case)] = best
    del limiter
    return out


def _round(pkg: str | None, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--worker"]
    if args.only:
        cmd += ["--only", args.only]
    if args.threads_blas:
        cmd += ["--threads-blas", str(args.threads_blas)]
    env = dict(os.environ)
    if pkg:
        env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                         cwd=pkg or str(ROOT))
    return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", help="comma-separated op names")
    ap.add_argument("--against", help="folder holding another dfg package to compare with")
    ap.add_argument("--threads-blas", type=int)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_cases(args.only, args.threads_blas)))
        return
    new: dict[str, list[float]] = {}
    old: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for k, v in _round(None, args).items():
            new.setdefault(k, []).append(v)
        if args.against:
            for k, v in _round(args.against, args).items():
                old.setdefault(k, []).append(v)
    rows = []
    for k, vs in new.items():
        row = {"case": k, "new_us": statistics.median(vs) * 1e6}
        if k in old:
            row["old_us"] = statistics.median(old[k]) * 1e6
            row["speedup"] = row["old_us"] / row["new_us"]
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'case':<62} {'old µs':>10} {'new µs':>10} {'old/new':>8}")
    for r in rows:
        o = f"{r['old_us']:10.1f}" if "old_us" in r else f"{'-':>10}"
        s = f"{r['speedup']:8.2f}" if "speedup" in r else f"{'-':>8}"
        print(f"{r['case']:<62} {o} {r['new_us']:10.1f} {s}")


if __name__ == "__main__":
    sys.exit(main())
