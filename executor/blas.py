"""BLAS threads versus the executor's threads.

numpy's BLAS (OpenBLAS in the wheels) starts one thread per core for every large enough
matrix product. When the executor already runs kernels on several threads, each concurrent
product then wakes its own BLAS threads: more busy threads than cores, and OpenBLAS's
threads spin while they wait. Measured on 2 cores with ``threads=2`` (the full-size Keras
zoo at 32x32, benchmarks/zoo_table.py): steps 5-20x slower with BLAS on 2 threads than on
1 under load from other processes; the small zoo is unchanged (its products are too small
for OpenBLAS to thread). So a Session that runs kernels in parallel asks BLAS for one thread
per product, and a single-threaded Session leaves BLAS its default (all cores for a large
product that runs alone).

Setting BLAS's thread count needs ``threadpoolctl`` (a dependency); without
it nothing changes. ``DFG_BLAS_THREADS=N`` in the environment fixes the count whatever the
Session's threads (``0``: never touch BLAS). The count is process-wide: the last Session
created decides, which only matters for speed, never for results.
"""

from __future__ import annotations

import os
import threading
from typing import Any

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
    BLAS's own default)."""
    env = os.environ.get("DFG_BLAS_THREADS", "").strip()
    if env:
        n = int(env)
        return n if n > 0 else None
    return 1 if executor_threads > 1 else None


def configure(executor_threads: int) -> int | None:
    """Set BLAS's thread count for a Session with ``executor_threads`` threads.

    Returns the count BLAS now uses, or None when it was left alone (threadpoolctl missing,
    no BLAS found, or ``DFG_BLAS_THREADS=0``). Cheap when nothing changes.
    """
    global _current
    if os.environ.get("DFG_BLAS_THREADS", "").strip() == "0":
        return None
    n = wanted_threads(executor_threads)
    with _lock:
        ctl = _blas()
        if not ctl:
            return None
        if n != _current:
            for lc, default in zip(ctl.lib_controllers, _defaults):
                lc.set_num_threads(n if n is not None else default)
            _current = n
        return min(lc.get_num_threads() for lc in ctl.lib_controllers)


def current() -> list[dict[str, Any]]:
    """The BLAS libraries found and their thread counts now ([] without threadpoolctl)."""
    with _lock:
        ctl = _blas()
        return [{"library": lc.internal_api, "version": lc.version,
                 "threads": lc.get_num_threads()} for lc in ctl.lib_controllers] if ctl else []
