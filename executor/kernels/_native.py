"""dfg's optional compiled kernels (``executor/native/*.c``), in numpy terms.

``pip install`` builds them into the extension module ``dfg.executor._native`` when a C
compiler is present (``setup.py``), and then they run by default; ``DFG_NATIVE=0`` in the
environment keeps every kernel on its numpy path, which computes the same values
(tests/test_native.py checks both against the definition). Without the build the numpy
paths run. :func:`status` says which.

* erf/erfc of single precision: one vectorized pass instead of twenty numpy passes.
* Softmax/LogSoftmax of single precision: one sweep per row instead of five numpy passes.
* Sigmoid and Tanh of float32 (the kernels, their array forms in compiled loops and the fused
  ops' activations): one vectorized pass, where numpy's sigmoid is four passes and its tanh
  is not vectorized; a recurrent cell's gates are their main users.
* Chains of float32 elementwise ops (``_DfgElementwiseChain``: arithmetic, sqrt, sigmoid,
  tanh) in one sweep per block of 256 elements, one call for the chain where numpy makes one
  per op; the bits equal the numpy chain's.
* Depthwise convolutions of float32 NHWC (depth multiplier 1): each output pixel's channels
  accumulate tap by tap in L1, where numpy makes two passes over the output per tap.
* The direct convolution, for KxK float32 convolutions whose GEMM would be skinny
  (``_conv._native_pays`` says which), with _FusedConv2D's epilogue applied in registers:
  2-3x faster than the numpy path's GEMMs per layer (``benchmarks/bench_native_conv.py``).
  1x1 and non-overlapping windows stay with BLAS (2-4x faster there). Next to BLAS it
  relies on OpenBLAS's idle threads not spinning long (dfg/executor/__init__.py).

Each function's signature is declared once, in ``executor/native/module.c``, which checks
every array's dtype, contiguity and length against the geometry (a mismatch is a TypeError
or ValueError, not a stray write) and runs the kernel without the GIL. A kernel's rows are
split on a small pool of native threads (executor/native/threadpool.c: the caller works
too, idle workers spin a few tens of microseconds before sleeping; a Python pool's hand-over
cost 56 us per call) with as many threads as BLAS would use: ``DFG_BLAS_THREADS`` when set,
else the usable cores. Convolutions are BLAS ops to the scheduler (executor/blas.py), which
runs them one at a time; a second caller that finds the pool busy runs its kernel on its
own thread.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from dfg.executor import blas
from dfg.graphdef.errors import ResourceExhaustedError

try:
    from dfg.executor import _native as _ext
except ImportError:       # not built (no C compiler at install)
    _ext: ModuleType | None = None  # type: ignore[no-redef]

_F32 = np.dtype(np.float32)
# Below this many elements an elementwise kernel's numpy passes cost less than the call.
MIN_ELEMENTS = 512
_VW = 16                      # output channels per vector block (native.h's DFG_VW)
# A thread's share below this costs more to hand over than to run: measured with the native
# pool, (8,32,32,16) by 3x3x16 (38 MFLOP) 395 -> 238 us split in two, (4,16,16,32) by 3x3x32
# 187 -> 121 us, while 2.4 MFLOP stays even.
_MIN_CHUNK_FLOPS = 2e6


# DFG_NATIVE is read on every call (a test or a user may set it at any time), but an RNN
# step asks several times per iteration and os.environ.get is five Python calls: the raw
# bytes are looked up in os.environ's own dict (CPython's POSIX os._Environ keeps it as
# ``_data``, which setenv through os.environ updates) and the parsed answer is memoized.
_ENV_DATA = getattr(os.environ, "_data", None)
try:
    _ENV_KEY = os.environ.encodekey("DFG_NATIVE")     # type: ignore[attr-defined]
except AttributeError:
    _ENV_DATA = None
_PARSED: dict[Any, str] = {}       # raw value -> "off", "on" or "" (the default)


def _setting() -> str:
    """DFG_NATIVE as "off" (0/off/no/false), "on" (1/on/yes/true) or "" (unset, other)."""
    raw = _ENV_DATA.get(_ENV_KEY) if _ENV_DATA is not None else os.environ.get("DFG_NATIVE")
    hit = _PARSED.get(raw)
    if hit is None:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else (raw or "")
        text = text.strip().lower()
        hit = _PARSED[raw] = ("off" if text in ("0", "off", "no", "false") else
                              "on" if text in ("1", "on", "yes", "true") else "")
    return hit


def _refused() -> bool:
    return _setting() == "off"


def built() -> bool:
    """Whether the compiled kernels were built and load."""
    return _ext is not None


def extension() -> Any:
    """The compiled module when its kernels run (``enabled``), else None: for a hot caller
    that calls it directly (module.c checks every argument)."""
    return None if _ext is None or _refused() else _ext


def enabled() -> bool:
    """Whether the compiled kernels run: built, loadable, and not refused (``DFG_NATIVE=0``)."""
    return not _refused() and _ext is not None


def _cpu_features() -> set[str]:
    """The CPU's vector features dfg's kernels care about: NumPy's own CPU detection, else
    /proc/cpuinfo's flags."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
        return {k for k in ("AVX512F", "AVX2", "FMA3") if features.get(k)}
    except ImportError:
        try:
            with open("/proc/cpuinfo") as f:
                flags = f.read().split()
        except OSError:
            return set()
        return {k for k, flag in (("AVX512F", "avx512f"), ("AVX2", "avx2"), ("FMA3", "fma"))
                if flag in flags}


_FEATURES = _cpu_features()
# AVX-512: 32 registers of 16 floats, the direct convolution's 8-pixel blocks (conv.c).
_WIDE = "AVX512F" in _FEATURES
# AVX2 with FMA: 16 registers of 8 floats, its 6-pixel blocks. Without either (baseline x86-64,
# other architectures) the blocks spill and the numpy/BLAS path is faster.
_VECTOR = _WIDE or {"AVX2", "FMA3"} <= _FEATURES


def dense_conv() -> bool:
    """Whether the compiled direct convolution (Conv2D) runs: enabled, and on a CPU with
    AVX-512 or AVX2+FMA unless ``DFG_NATIVE=1`` asks for it anywhere. Which convolutions it
    takes is :func:`~dfg.executor.kernels._conv._native_pays`'s rule for the CPU.
    The depthwise kernel keeps one vector per channel block and is on wherever enabled."""
    if not enabled():
        return False
    return _setting() == "on" or _VECTOR


def wide_vectors() -> bool:
    """Whether the CPU has AVX-512 (the direct convolution's rule differs: ``_conv``)."""
    return _WIDE


def status() -> str:
    if _ext is None:
        return "not built (no C compiler at install): numpy kernels"
    return "built, off (DFG_NATIVE=0)" if _refused() else "on (DFG_NATIVE=0 turns it off)"


def erf_f32(x: np.ndarray, complement: bool) -> np.ndarray:
    """erfc (``complement``) or erf of float32 ``x``, in one compiled pass."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    _ext.erf_f32(x, out, complement)
    return out


SIGMOID, TANH = 0, 1
_ACT_BLOCK = 4096          # native.h's DFG_ACT_BLOCK: the elements of one pool row


def activation_f32(x: np.ndarray, kind: int, out: np.ndarray | None = None) -> np.ndarray:
    """sigmoid (``kind`` SIGMOID) or tanh (TANH) of float32 ``x`` in one compiled pass,
    into ``out`` (a new array by default; ``x`` itself allowed), split on the native pool
    from a few blocks of 4096 elements (a thread's share below that costs more to hand
    over)."""
    if x.__class__ is not np.ndarray:
        x = np.asarray(x, _F32)               # a NumPy scalar: a 0-d array
    elif not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)           # (a Split's output is a strided view)
    if out is None:
        out = np.empty(x.shape, _F32)
    if x.size < 8 * _ACT_BLOCK:               # one thread: an RNN gate's usual case
        _ext.activation_f32(x, out, kind, 1, 1)
        return out
    blocks = -(-x.size // _ACT_BLOCK)
    threads = max(1, min(_threads(), blocks // 4))
    _ext.activation_f32(x, out, kind, min(blocks, 4 * threads) if threads > 1 else 1, threads)
    return out


def chain_f32(inputs: tuple, kinds: bytes, code: bytes, out: np.ndarray, rows: int,
              cols: int, layout: bytes | None = None) -> None:
    """A chain of float32 elementwise ops into ``out`` (executor/native/module.c's
    ``chain_f32`` says how ``inputs``, ``kinds``, ``code`` and ``layout`` are laid out)."""
    _ext.chain_f32(inputs, kinds, code, out, rows, cols, layout)


def _threads() -> int:
    """As many threads as BLAS would use: DFG_BLAS_THREADS when set, else the usable cores."""
    n = blas.wanted_threads(0)
    if n is not None:
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:     # not Linux
        return max(1, os.cpu_count() or 1)


def _split(rows: int, flops: float) -> tuple[int, int]:
    """(chunks, threads) for a ``*_mt`` kernel over ``rows`` rows: up to _threads() threads,
    this one included, a few chunks each (a thread slowed by other work takes fewer of
    them). A share below _MIN_CHUNK_FLOPS is not worth a thread."""
    k = int(min(rows, max(1, flops // _MIN_CHUNK_FLOPS)))
    if k > 1:
        k = min(k, _threads())
    return (min(rows, 4 * k) if k > 1 else 1), max(k, 1)


def softmax_f32(x: np.ndarray, as_log: bool) -> np.ndarray:
    """Softmax (or log-softmax) over the last axis of float32 ``x`` (size > 0), one sweep
    per row."""
    x = np.ascontiguousarray(x, _F32)
    out = np.empty_like(x)
    cols = x.shape[-1]
    _ext.softmax_f32(x, out, x.size // cols, cols, as_log)
    return out


def depthwise_nhwc_f32(x: np.ndarray, f: np.ndarray, g: Any,
                       epilogue: Epilogue | None = None) -> np.ndarray:
    """DepthwiseConv2dNative of NHWC float32 ``x`` with (KH, KW, C, 1) ``f`` (depth
    multiplier 1) for geometry ``g`` (a ``_conv.Geom``): (N, OH, OW, C) float32, with
    ``epilogue``'s scale, shift and activation applied to each pixel as it is computed (no
    residual: ValueError)."""
    x = np.ascontiguousarray(x, _F32)
    fk = np.ascontiguousarray(f.reshape(f.shape[0], f.shape[1], f.shape[2]), _F32)
    out = np.empty((g.n, g.oh, g.ow, g.c), _F32)
    scale = shift = None
    act = ACT_NONE
    if epilogue is not None:
        if epilogue.residual is not None:
            raise ValueError("the depthwise kernel adds no residual")
        scale, shift = (None if v is None else np.ascontiguousarray(v, _F32)
                        for v in (epilogue.scale, epilogue.shift))
        act = epilogue.act
    geometry = (g.n, g.h, g.w, g.c, g.kh, g.kw, g.oh, g.ow, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl)
    _ext.depthwise_nhwc_f32(x, fk, out, geometry, scale, shift, act,
                            *_split(g.n * g.oh, 2.0 * out.size * g.kh * g.kw))
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
    geometry = (g.n, g.h, g.w, c, kh, kw, oc, g.oh, g.ow, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl)
    try:
        _ext.conv2d_nhwc_f32(x, wb, out, geometry, scale, shift, res, ep.act,
                             *_split(g.n * g.oh, 2.0 * out.size * kh * kw * c))
    except MemoryError:
        raise ResourceExhaustedError("native Conv2D: out of memory for its row buffer") from None
    return out
