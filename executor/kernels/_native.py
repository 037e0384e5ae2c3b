"""dfg's optional compiled kernels (``executor/native/*.c``), called through ctypes.

``pip install`` builds them into ``dfg.executor._native`` when a C compiler is present
(``setup.py``), and then they run by default; ``DFG_NATIVE=0`` in the environment keeps
every kernel on its numpy path, which computes the same values (tests/test_native.py checks
both against the definition). Without the build the numpy paths run. :func:`status` says
which.

* erf/erfc of single precision: one vectorized pass instead of twenty numpy passes.
* Softmax/LogSoftmax of single precision: one sweep per row instead of five numpy passes.
* Depthwise convolutions of float32 NHWC (depth multiplier 1): each output pixel's channels
  accumulate tap by tap in L1, where numpy makes two passes over the output per tap.
* The direct convolution, for KxK float32 convolutions whose GEMM would be skinny
  (``_conv._native_pays`` says which), with _FusedConv2D's epilogue applied in registers:
  2-3x faster than the numpy path's GEMMs per layer (``benchmarks/bench_native_conv.py``).
  1x1 and non-overlapping windows stay with BLAS (2-4x faster there). Next to BLAS it
  relies on OpenBLAS's idle threads not spinning long (dfg/executor/__init__.py).

ctypes releases the GIL for the length of a call, and a kernel's rows are split on a small
pool of native threads (executor/native/pool.c: the caller works too, idle workers spin a
few tens of microseconds before sleeping; a Python pool's hand-over cost 56 us per call) with
as many threads as BLAS would use: ``DFG_BLAS_THREADS`` when set, else the usable cores.
Convolutions are BLAS ops to the scheduler (executor/blas.py), which runs them one at a
time; a second caller that finds the pool busy runs its kernel on its own thread.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, NamedTuple

import numpy as np

from dfg.executor import blas
from dfg.graphdef.errors import ResourceExhaustedError

_F32 = np.dtype(np.float32)
# Below this many elements an elementwise kernel's numpy passes cost less than the ctypes call.
MIN_ELEMENTS = 512
_VW = 16                      # output channels per vector block (conv.c's VW)
# A thread's share below this costs more to hand over than to run: measured with the native
# pool, (8,32,32,16) by 3x3x16 (38 MFLOP) 395 -> 238 us split in two, (4,16,16,32) by 3x3x32
# 187 -> 121 us, while 2.4 MFLOP stays even.
_MIN_CHUNK_FLOPS = 2e6

# Loaded once; guarded by _lock: the library (False: not built or not loadable).
_lock = threading.Lock()
_lib: Any = None


def _load() -> Any:
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                try:
                    from dfg.executor import _native as module
                    lib = ctypes.CDLL(module.__file__)
                    fn = lib.dfg_conv2d_nhwc_f32_mt
                    erf = lib.dfg_erf_f32
                    softmax = lib.dfg_softmax_f32
                    depthwise = lib.dfg_depthwise_nhwc_f32_mt
                except (ImportError, OSError, AttributeError):
                    _lib = False
                else:
                    fn.restype = ctypes.c_int
                    fn.argtypes = ([ctypes.c_void_p] * 3 + [ctypes.c_long] * 14
                                   + [ctypes.c_void_p] * 3 + [ctypes.c_int]
                                   + [ctypes.c_long] * 2 + [ctypes.c_int])
                    erf.restype = None
                    erf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
                    depthwise.restype = ctypes.c_int
                    depthwise.argtypes = ([ctypes.c_void_p] * 3 + [ctypes.c_long] * 15
                                          + [ctypes.c_int])
                    softmax.restype = None
                    softmax.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long,
                                        ctypes.c_long, ctypes.c_int]
                    _lib = lib
    return _lib


def _refused() -> bool:
    return os.environ.get("DFG_NATIVE", "").strip().lower() in ("0", "off", "no", "false")


def built() -> bool:
    """Whether the compiled kernels were built and load."""
    return bool(_load())


def enabled() -> bool:
    """Whether the compiled kernels run: built, loadable, and not refused (``DFG_NATIVE=0``)."""
    return not _refused() and bool(_load())


def status() -> str:
    if not _load():
        return "not built (no C compiler at install): numpy kernels"
    return "built, off (DFG_NATIVE=0)" if _refused() else "on (DFG_NATIVE=0 turns it off)"


def erf_f32(x: np.ndarray, complement: bool) -> np.ndarray:
    """erfc (``complement``) or erf of float32 ``x``, in one compiled pass."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    _load().dfg_erf_f32(x.ctypes.data, out.ctypes.data, x.size, int(complement))
    return out


def _threads() -> int:
    """As many threads as BLAS would use: DFG_BLAS_THREADS when set, else the usable cores."""
    n = blas.wanted_threads(0)
    if n is not None:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:     # not Linux
        return max(1, os.cpu_count() or 1)


def _run_split(fn: Any, args: tuple, rows: int, flops: float) -> None:
    """``fn(*args, rows, chunks, threads)``: a ``*_mt`` kernel, which splits [0, rows) into
    chunks on dfg's native thread pool (executor/native/pool.c) with up to _threads()
    threads, this one included; raises when a chunk fails (the C code returns -1 when out of
    memory). A share below _MIN_CHUNK_FLOPS is not worth a thread."""
    k = int(min(rows, max(1, flops // _MIN_CHUNK_FLOPS)))
    if k > 1:
        k = min(k, _threads())
    # a few chunks per thread: a thread slowed by other work takes fewer of them
    chunks = min(rows, 4 * k) if k > 1 else 1
    if fn(*args, rows, chunks, k):
        raise ResourceExhaustedError("native Conv2D: out of memory for its row buffer")


def softmax_f32(x: np.ndarray, as_log: bool) -> np.ndarray:
    """Softmax (or log-softmax) over the last axis of float32 ``x`` (size > 0), one sweep
    per row."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    cols = x.shape[-1]
    _load().dfg_softmax_f32(x.ctypes.data, out.ctypes.data, x.size // cols, cols, int(as_log))
    return out


def depthwise_nhwc_f32(x: np.ndarray, f: np.ndarray, g: Any) -> np.ndarray:
    """DepthwiseConv2dNative of NHWC float32 ``x`` with (KH, KW, C, 1) ``f`` (depth
    multiplier 1) for geometry ``g`` (a ``_conv.Geom``): (N, OH, OW, C) float32."""
    x = np.ascontiguousarray(x, _F32)
    fk = np.ascontiguousarray(f.reshape(f.shape[0], f.shape[1], f.shape[2]), _F32)
    out = np.empty((g.n, g.oh, g.ow, g.c), _F32)
    _run_split(_load().dfg_depthwise_nhwc_f32_mt,
               (x.ctypes.data, fk.ctypes.data, out.ctypes.data, g.h, g.w, g.c, g.kh, g.kw,
                g.oh, g.ow, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl), g.n * g.oh,
               2.0 * out.size * g.kh * g.kw)
    return out


class Epilogue(NamedTuple):
    """What _FusedConv2D applies after the convolution, in this order: out * scale + shift
    (per output channel, float32, each None to skip), + residual (None, or a float32 tensor
    of the output's shape), then the activation (ACT_NONE, ACT_RELU, ACT_RELU6)."""
    scale: np.ndarray | None
    shift: np.ndarray | None
    residual: np.ndarray | None
    act: int


ACT_NONE, ACT_RELU, ACT_RELU6 = 0, 1, 2


def _per_channel(v: np.ndarray | None, oc: int, blocks: int) -> np.ndarray | None:
    """``v`` (OC,) as float32 padded with zeros to whole blocks (the kernel loads vectors)."""
    if v is None:
        return None
    full = np.zeros(blocks * _VW, _F32)
    full[:oc] = v
    return full


def conv2d_nhwc_f32(x: np.ndarray, f: np.ndarray, g: Any,
                    epilogue: Epilogue | None = None) -> np.ndarray:
    """Conv2D of NHWC float32 ``x`` with (KH, KW, C, OC) ``f`` for geometry ``g`` (the
    numpy path's :class:`~dfg.executor.kernels._conv.Geom`): (N, OH, OW, OC) float32, with
    ``epilogue`` applied while each block is in registers."""
    lib = _load()
    kh, kw, c, oc = f.shape
    x = np.ascontiguousarray(x, _F32)
    blocks = -(-oc // _VW)
    if oc % _VW:
        full = np.zeros((kh, kw, c, blocks * _VW), _F32)
        full[..., :oc] = f
    else:
        full = f
    # (blocks, KH, KW, C, 16): each block's filter is one contiguous stream (no copy for 16)
    wb = np.ascontiguousarray(full.reshape(kh, kw, c, blocks, _VW).transpose(3, 0, 1, 2, 4),
                              _F32)
    out = np.empty((g.n, g.oh, g.ow, oc), _F32)
    ep = epilogue or Epilogue(None, None, None, ACT_NONE)
    scale, shift = (_per_channel(v, oc, blocks) for v in (ep.scale, ep.shift))
    res = None if ep.residual is None else np.ascontiguousarray(ep.residual, _F32)
    if res is not None and res.shape != out.shape:
        raise ValueError(f"residual of shape {res.shape} for an output of {out.shape}")
    args = (x.ctypes.data, wb.ctypes.data, out.ctypes.data, g.h, g.w, c, kh, kw, oc,
            g.oh, g.ow, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl,
            *(None if a is None else a.ctypes.data for a in (scale, shift, res)), ep.act)
    flops = 2.0 * out.size * kh * kw * c
    _run_split(lib.dfg_conv2d_nhwc_f32_mt, args, g.n * g.oh, flops)
    return out
