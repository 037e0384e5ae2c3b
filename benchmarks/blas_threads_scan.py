"""Where BLAS's threads lose: float32 products timed with BLAS's own thread count and with one.

    python benchmarks/blas_threads_scan.py [--rows 256,512,1024,2048,4096]
                                           [--depth 16,32,64,128,256,576]
                                           [--cols 16,32,64,128,256,512,1024] [--reps 21]

executor/blas.py runs a product between 2^18 and 3M multiply-adds on the calling thread
alone (``THREADED_MACS``, ``ALONE_MAX_MACS``), a rule read from shapes only, so a step's bits
never depend on timing. This scan shows, on the machine it runs on, every shape where the
threaded product is the slower one: what a change of those bounds would rest on. It prints
one line per shape (median ms of ``--reps`` back-to-back products each way, the ratio
threaded / one thread) and marks the shapes where one thread wins by more than 10%.

Seen on a 2-core AMD EPYC (AVX-512, numpy's OpenBLAS 0.3.31 SkylakeX kernels), 2026-12-02:
threads win 1.2-2x from about 1M multiply-adds, except at 256 rows by 512 columns: in one
scan the threaded product took 0.36-0.47 ms whatever the depth (32, 64, 128) against
0.11-0.34 ms on one thread, while 512 x 64 x 512 (twice the work) took 0.25 threaded; in a
scan right after, only depth 32 lost (0.27 against 0.10 ms). One shape, and not even
steadily: not a size rule, so dfg keeps its rule.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _median_ms(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=_ints, default=_ints("256,512,1024,2048,4096"))
    ap.add_argument("--depth", type=_ints, default=_ints("16,32,64,128,256,576"))
    ap.add_argument("--cols", type=_ints, default=_ints("16,32,64,128,256,512,1024"))
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--min-macs", type=float, default=float(1 << 18))
    ap.add_argument("--max-macs", type=float, default=64e6)
    args = ap.parse_args()
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        sys.exit("needs threadpoolctl: pip install 'dfg[blas]'")
    import dfg.executor  # noqa: F401 - the BLAS environment a Session runs with

    for info in threadpool_info():
        if info.get("user_api") == "blas":
            print(f"# {info.get('internal_api')} {info.get('version')} "
                  f"{info.get('architecture')} threads={info.get('num_threads')}")
    rng = np.random.default_rng(0)
    print(f"{'M':>6} {'K':>5} {'N':>5} {'MACs':>8} {'threaded':>9} {'one':>9} {'ratio':>6}")
    for m in args.rows:
        for k in args.depth:
            for n in args.cols:
                macs = m * k * n
                if not args.min_macs <= macs <= args.max_macs:
                    continue
                a = rng.standard_normal((m, k), dtype=np.float32)
                b = rng.standard_normal((k, n), dtype=np.float32)
                product = functools.partial(np.matmul, a, b)
                threaded = _median_ms(product, args.reps)
                with threadpool_limits(1, user_api="blas"):
                    one = _median_ms(product, args.reps)
                mark = "  one thread wins" if threaded > 1.1 * one else ""
                print(f"{m:>6} {k:>5} {n:>5} {macs / 1e6:>7.1f}M {threaded:>8.3f}  "
                      f"{one:>8.3f} {threaded / one:>6.2f}{mark}")


if __name__ == "__main__":
    main()
