"""The compiled direct convolution against the numpy path (DFG_NATIVE=0), layer by layer.

    python benchmarks/bench_native_conv.py [--rounds 5] [--full]

Prints, per Conv2D shape (the U-Net's and a few ResNet/VGG-like layers; ``--full``: the
layers of full-size VGG16, ResNet50 and InceptionV3 instead), the numpy path's
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

# full-size keras.applications layers (benchmarks/gen_full_size.py's models): x, filter,
# stride, padding
FULL = [
    ((1, 224, 224, 64), (3, 3, 64, 64), 1, "SAME"),
    ((1, 112, 112, 128), (3, 3, 128, 128), 1, "SAME"),
    ((1, 56, 56, 256), (3, 3, 256, 256), 1, "SAME"),
    ((1, 28, 28, 512), (3, 3, 512, 512), 1, "SAME"),
    ((1, 14, 14, 512), (3, 3, 512, 512), 1, "SAME"),
    ((1, 56, 56, 64), (3, 3, 64, 64), 1, "SAME"),
    ((1, 28, 28, 128), (3, 3, 128, 128), 1, "SAME"),
    ((1, 14, 14, 256), (3, 3, 256, 256), 1, "SAME"),
    ((1, 7, 7, 512), (3, 3, 512, 512), 1, "SAME"),
    ((1, 56, 56, 64), (1, 1, 64, 256), 1, "VALID"),
    ((1, 56, 56, 256), (1, 1, 256, 64), 1, "VALID"),
    ((1, 28, 28, 512), (1, 1, 512, 128), 1, "VALID"),
    ((1, 14, 14, 1024), (1, 1, 1024, 256), 1, "VALID"),
    ((1, 7, 7, 2048), (1, 1, 2048, 512), 1, "VALID"),
    ((1, 14, 14, 1024), (1, 1, 1024, 2048), 2, "VALID"),
    ((1, 73, 73, 80), (3, 3, 80, 192), 1, "VALID"),
    ((1, 17, 17, 768), (1, 7, 768, 192), 1, "SAME"),
    ((1, 17, 17, 192), (7, 1, 192, 192), 1, "SAME"),
    ((1, 35, 35, 288), (3, 3, 288, 384), 2, "VALID"),
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
    ap.add_argument("--full", action="store_true", help="full-size models' layers")
    args = ap.parse_args()
    if not _native.built():
        raise SystemExit("the native kernels are not built (no C compiler at install)")
    malloc.tune()
    os.environ["DFG_NATIVE"] = "0"     # the numpy column is the numpy path
    rng = np.random.default_rng(0)
    print(f"{'x':18} {'filter':17} {'numpy ms':>9} {'GF/s':>6} {'native ms':>10} {'GF/s':>6}"
          f" {'ratio':>6}")
    for xs, fs, stride, padding in FULL if args.full else [(*s, 1, "SAME") for s in SHAPES]:
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal(fs).astype(np.float32)
        strides = [1, stride, stride, 1]
        g = _conv.geometry(xs, "NHWC", fs[0], fs[1], strides, [1, 1, 1, 1], padding, None)
        flops = 2e-9 * g.n * g.oh * g.ow * np.prod(fs)
        runs = {"numpy": functools.partial(_conv.conv2d_nhwc, x, f, strides, padding),
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
