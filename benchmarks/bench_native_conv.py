"""The compiled direct convolution against the numpy path (DFG_NATIVE=0), layer by layer.

    python benchmarks/bench_native_conv.py [--rounds 5]

Prints, per Conv2D shape (the U-Net's and a few ResNet/VGG-like layers), the numpy path's
and the native kernel's time (25th percentile of the rounds' medians) and GFLOP/s, each
with BLAS's/the pool's default threads. Kernel timings only: whole-model steps also pay
for OpenBLAS's idle threads spinning next to the native ones (see
executor/kernels/_native.py), which this does not show.
"""

# ruff: noqa: I001
from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

# dfg before numpy: it limits OpenBLAS's idle spinning (dfg/executor/__init__.py), which
# would otherwise take a core from the native column's second thread
from dfg.executor import malloc
import numpy as np

from dfg.executor.kernels import _conv, _native

SHAPES = [  # x (NHWC), filter (KH, KW, C, OC)
    ((4, 64, 64, 3), (3, 3, 3, 16)), ((4, 64, 64, 16), (3, 3, 16, 16)),
    ((4, 32, 32, 16), (3, 3, 16, 32)), ((4, 32, 32, 32), (3, 3, 32, 32)),
    ((4, 16, 16, 64), (3, 3, 64, 64)), ((4, 32, 32, 64), (3, 3, 64, 32)),
    ((4, 64, 64, 32), (3, 3, 32, 16)), ((1, 56, 56, 64), (3, 3, 64, 64)),
    ((1, 112, 112, 32), (3, 3, 32, 64)), ((4, 16, 16, 128), (3, 3, 128, 64)),
    ((4, 8, 8, 64), (3, 3, 64, 128)), ((4, 32, 32, 32), (3, 3, 32, 128)),
    ((4, 16, 16, 64), (3, 3, 64, 128)), ((1, 14, 14, 256), (3, 3, 256, 256)),
]


def _time(fn, n: int = 10) -> float:
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not _native.built():
        raise SystemExit("the native kernels are not built (no C compiler at install)")
    malloc.tune()
    os.environ["DFG_NATIVE"] = "0"     # the numpy column is the numpy path
    rng = np.random.default_rng(0)
    print(f"{'x':18} {'filter':17} {'numpy ms':>9} {'GF/s':>6} {'native ms':>10} {'GF/s':>6}"
          f" {'ratio':>6}")
    for xs, fs in SHAPES:
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal(fs).astype(np.float32)
        flops = 2e-9 * np.prod(xs[:3]) * np.prod(fs)
        g = _conv.geometry(xs, "NHWC", fs[0], fs[1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME",
                           None)
        runs = {"numpy": functools.partial(_conv.conv2d_nhwc, x, f, [1, 1, 1, 1], "SAME"),
                "native": functools.partial(_native.conv2d_nhwc_f32, x, f, g)}
        res: dict[str, list[float]] = {"numpy": [], "native": []}
        for r in range(args.rounds):      # alternating rounds: drift hits both alike
            for name in ("numpy", "native") if r % 2 == 0 else ("native", "numpy"):
                res[name].append(_time(runs[name]))
        a, b = (float(np.percentile(res[m], 25)) for m in ("numpy", "native"))
        print(f"{str(xs):18} {str(fs):17} {a * 1e3:9.3f} {flops / a:6.1f} {b * 1e3:10.3f} "
              f"{flops / b:6.1f} {b / a:6.2f}")


if __name__ == "__main__":
    main()
