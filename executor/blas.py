"""BLAS threads versus the executor's threads.

numpy's BLAS (OpenBLAS in the wheels) starts one thread per core for every large enough
matrix product. When the executor also runs kernels on several threads, both can want the
cores. Which wins depends on the machine: on this 2-core machine, idle, leaving BLAS alone was
faster with ``threads=2`` (bench_matmul_branches 34 ms against 59 ms with BLAS held to one
thread, bench_cnn 3.1 ms against 4.3 ms: two single-threaded products side by side are
slower than one two-threaded product after the other), while under load from other
processes one BLAS thread per product was far faster (full-size ResNet50 708 -> 83 ms). So
BLAS keeps its default, and ``DFG_BLAS_THREADS=N`` in the environment sets its thread count
for every Session (needs ``threadpoolctl``: ``pip install 'dfg[blas]'``; ``0`` or unset:
BLAS's default). The count is process-wide, which only matters for speed, never for results.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

try:   # the compiled kernels' module (its thread pool), when built
    from dfg.executor import _native as _ext
except ImportError:
    _ext = None

_lock = threading.Lock()
# Guarded by _lock: the threadpoolctl controller of the BLAS libraries (False: threadpoolctl
# is missing or found none), their thread counts before dfg changed them, the count set last.
_controller: Any = None
_defaults: list[int] = []
_current: int | None = None


def _blas() -> Any:
    global _controller, _defaults
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
            return _controller
        ctl = ThreadpoolController().select(user_api="blas")
        _controller = ctl if ctl.lib_controllers else False
        if _controller:
            _defaults = [lc.get_num_threads() for lc in _controller.lib_controllers]
    return _controller


def wanted_threads(executor_threads: int) -> int | None:
    """BLAS threads for an executor running ``executor_threads`` kernels at once (None:
    BLAS's own default): ``DFG_BLAS_THREADS`` if set above 0 (see the module docstring)."""
    env = os.environ.get("DFG_BLAS_THREADS", "").strip()
    try:
        n = int(env) if env else 0
    except ValueError:
        return None   # not a number: leave BLAS alone rather than fail a Session
    return n if n > 0 else None


def configure(executor_threads: int) -> int | None:
    """Set BLAS's thread count for a Session with ``executor_threads`` threads.

    Returns the count BLAS now uses, or None when BLAS is left at its default untouched (or
    threadpoolctl or a BLAS library is missing). Cheap when nothing changes.
    """
    global _current
    n = wanted_threads(executor_threads)
    with _lock:
        if n is None and _current is None:
            return None   # BLAS never touched: nothing to import, nothing to restore
        ctl = _blas()
        if not ctl:
            return None
        if n != _current:
            for lc, default in zip(ctl.lib_controllers, _defaults):
                lc.set_num_threads(n if n is not None else default)
            _current = n
        return min(lc.get_num_threads() for lc in ctl.lib_controllers)


# Products that run on BLAS's own thread pool (their records say so: ``OpSpec.blas``). With
# more than one BLAS thread, two of them at once oversubscribe the cores (each spins up a full
# pool); the scheduler runs them one at a time through GATE while other kernels go on in
# parallel, as TensorFlow shares one intra-op pool among its kernels.
GATE = threading.Lock()


def gated() -> bool:
    """Whether BLAS products should run one at a time: not when BLAS is held to one thread
    (``DFG_BLAS_THREADS=1``), nor with ``DFG_BLAS_GATE=0``."""
    if wanted_threads(0) == 1:
        return False
    return os.environ.get("DFG_BLAS_GATE", "1").strip() not in ("0", "off", "no", "false")


# The process's answer, read once: the scheduler gates products by it (executor._GATE) and
# the plan's program decisions must agree with the scheduler (reading the environment on
# every step was 4 lookups, a fifth of a small graph's step)
GATED = gated()


def current() -> list[dict[str, Any]]:
    """The BLAS libraries found and their thread counts now ([] without threadpoolctl)."""
    with _lock:
        ctl = _blas()
        return [{"library": lc.internal_api, "version": lc.version,
                 "threads": lc.get_num_threads()} for lc in ctl.lib_controllers] if ctl else []


# --- one product, on how many threads -------------------------------------------------------
# OpenBLAS threads a product of more than 2^18 multiply-adds (its interface/gemm.c: M*N*K above
# SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD), waking its workers, which sleep a few
# microseconds after each product (OPENBLAS_THREAD_TIMEOUT, dfg/executor/__init__.py). Waking
# them costs more than they save up to a few million multiply-adds. Measured on this 2-core
# machine, numpy alone, a float32 product after 20 us of other work (a recurrent cell's gates
# between two of its products), threaded against on the calling thread alone:
# 32x128 @ 128x384 52.6 / 36.8 us, 16x128 @ 128x512 48.4 / 29.3, 128x64 @ 64x256 61.5 / 45.7,
# 256x64 @ 64x256 91.1 / 86.5; above that threads win (128x128 @ 128x512 140 / 173). Only
# right after another product, its workers still spinning, do threads win at these sizes
# (32x128 @ 128x384 24.2 / 38.0), which the shape alone cannot tell; the choice must not
# depend on timing, though: a threaded product's bits can differ from the one-thread
# product's (128x64 @ 64x1000 float32 by an ulp), and a step's values must not.
THREADED_MACS = 1 << 18
ALONE_MAX_MACS = 3_000_000

# OpenBLAS's thread-local thread count (0.3.27+; numpy's wheels bundle it): None until looked
# up, False where it is missing (another BLAS, an older OpenBLAS) or the count is set by
# DFG_BLAS_THREADS (the user's choice stands)
_set_local: Any = None


def _find_set_local() -> Any:
    global _set_local
    if _set_local is None:
        _set_local = False
        if wanted_threads(0) is None:
            _set_local = _openblas_symbol("openblas_set_num_threads_local") or False
    return _set_local


def _openblas_symbol(name: str) -> Any:
    """``name`` from the OpenBLAS numpy has loaded (found among the process's mapped
    libraries), as a ctypes function of one int returning an int; None if not there."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None     # not Linux: the products keep OpenBLAS's own choice
    for path in sorted(paths):
        if not path.startswith("/") or ".so" not in path:
            continue
        try:
            fn = getattr(ctypes.CDLL(path), name)
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``np.matmul(a, b, out=out)``; a mid-sized 2-D product (see ALONE_MAX_MACS) on the
    calling thread alone. Decided by the shapes only, so a product's bits never depend on
    what ran before it. Before a threaded product the native pool's polling workers sleep
    (``rest``)."""
    if a.ndim == 2 and b.ndim == 2:
        macs = a.shape[0] * a.shape[1] * b.shape[1]
        if THREADED_MACS < macs <= ALONE_MAX_MACS:
            setter = _set_local if _set_local is not None else _find_set_local()
            if setter:
                before = setter(1)
                try:
                    return np.matmul(a, b, out=out)
                finally:
                    setter(before)
        if macs >= REST_MACS:
            rest()
    elif b.ndim and a.size * b.shape[-1] >= REST_MACS:
        rest()
    return np.matmul(a, b, out=out)


# From this many multiply-adds (a third of a millisecond or more on two cores) a product's
# BLAS threads are worth the pool's workers sleeping first: below it, the next split job
# waking them cost more than the poll took (the Transformer bench's 8M-MAC products 1.06x
# slower with ``rest`` before each; two 1024^3 products 0.94x).
REST_MACS = 1 << 25


def rest() -> None:
    """Before a product on BLAS's threads: the native pool's idle workers, polling for a
    next job with sched_yield for half a millisecond (native/threadpool.c), sleep at once.
    A yielding poller still takes turns on its core with BLAS's thread there: two 1024x1024
    products after split elementwise work took 19.4-20.2 ms, 17.5 with no poll at all."""
    if _ext is not None:
        _ext.pool_rest()
