"""Quantization: QuantizeV2, Dequantize, QuantizeAndDequantize*, per-channel fake quant,
requantization, and the eight-bit ops of TF1's quantized graphs (QuantizedMatMul,
QuantizedConv2D, QuantizedRelu/Relu6, QuantizedBiasAdd, QuantizedMaxPool/AvgPool,
QuantizedConcat, QuantizedReshape, QuantizedAdd, QuantizedMul).

A quantized tensor (qint8, quint8, qint16, quint16, qint32) is held as a numpy array of its
storage integer type (int8, uint8, int16, uint16, int32), which is what TensorFlow hands back
for one. numpy has no dtype for the quantized types, so their type attrs reach the kernels as
DataType numbers (11, 12, 13, 15, 16); :func:`qdtype` maps either form to the storage dtype.

Arithmetic follows TensorFlow's reference CPU kernels step by step in float32 (and float64
where the C++ promotes), since the rounding of each step decides the integer results:

* QuantizeV2 MIN_COMBINED rounds halves away from zero for signed types and adds 0.5 and
  truncates for unsigned ones; MIN_FIRST and SCALED round halves away from zero (SCALED also
  to even on request). Out-of-range float -> int32 conversions give INT_MIN, as on x86.
* Dequantize MIN_FIRST rescales with the zero point rounded to the quantized grid.
* Requantize/QuantizeDownAndShrinkRange from qint32 to quint8 use TensorFlow's 16-bit
  fixed-point path; other type pairs dequantize and requantize in float.
* The eight-bit ops take their zero points from FloatToQuantizedUnclamped (in double, halves
  away from zero) and accumulate exactly (int64, or float64 where that is exact), wrapping to
  int32 as gemmlowp's int32 accumulators do. Their output ranges are TF's:
  QuantizationRangeForMultiplication for matmul/conv/mul, a symmetric 2^17 (bias add) or
  2^14 (add) multiple of the largest input bound. Only the type combinations TensorFlow
  registers on CPU run (QuantizedReluX has no CPU kernel at all); others raise NotFoundError
  as eager TensorFlow does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

from . import _conv
from .array import reshaped
from .math import _fake_quant, _quant_range
from .registry import KernelContext, kernel

Array = np.ndarray
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
f32 = np.float32

# DataType number -> storage dtype (schemas/types.proto: DT_QINT8 = 11 ...).
_QTYPES = {11: np.dtype(np.int8), 12: np.dtype(np.uint8), 13: np.dtype(np.int32),
           15: np.dtype(np.int16), 16: np.dtype(np.uint16)}
_STORAGE = frozenset(_QTYPES.values())
_QNAMES = {11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16", 16: "quint16"}


def qdtype(t: Any) -> np.dtype:
    """The numpy storage dtype of a quantized type attr (a DataType number, or the storage
    dtype itself)."""
    if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
        if int(t) in _QTYPES:
            return _QTYPES[int(t)]
        raise InvalidArgumentError(f"DataType {int(t)} is not a quantized type")
    dt = np.dtype(t)
    if dt not in _STORAGE:
        raise InvalidArgumentError(f"{dt} is not a quantized type's storage")
    return dt


def _limits(dt: np.dtype) -> tuple[int, int]:
    i = np.iinfo(dt)
    return int(i.min), int(i.max)


def _to_int(v: Array, dt: np.dtype) -> Array:
    """float -> integer as C's conversion does on x86: truncation, and INT_MIN (then the
    low bits) for what does not fit in an int32."""
    v = np.asarray(v, _F64)
    bad = ~np.isfinite(v) | (v >= 2.0 ** 31) | (v < -(2.0 ** 31))
    i32 = np.where(bad, -(2 ** 31), np.trunc(np.where(bad, 0, v))).astype(np.int64)
    return i32.astype(np.int32).astype(dt)


def _round_away(v: Array) -> Array:
    """std::round: halves away from zero, exactly (v - trunc(v) is exact in floating point,
    where floor(|v| + 0.5) would round 0.49999997 up)."""
    t = np.trunc(v)
    return t + np.where(np.abs(v - t) >= 0.5, np.sign(v), v.dtype.type(0))


def _first(x: Array, what: str) -> np.float32:
    if x.size == 0:
        raise InvalidArgumentError(f"{what} must not be empty")
    return f32(x.reshape(-1)[0])


def _scalar_input(x: Array, what: str) -> np.float32:
    if x.size != 1:
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {list(x.shape)}")
    return f32(x.reshape(-1)[0])


def _slices(x: Array, axis: int) -> tuple[Array, int]:
    """``x`` as [pre, depth, post] around ``axis``."""
    pre = math.prod(x.shape[:axis])
    return x.reshape(pre, x.shape[axis], -1), x.shape[axis]


# --- QuantizeV2 -------------------------------------------------------------------------------

def _adjusted_range(lo: np.float32, hi: np.float32, ensure: np.float32
                    ) -> tuple[np.float32, np.float32]:
    """The range TF quantizes into: it includes 0 and is at least ``ensure`` wide
    (relative to the larger end)."""
    min_r = min(f32(0), lo)
    eps = max(f32(1), max(abs(lo), abs(hi))) * ensure
    return min_r, max(f32(0), max(hi, f32(min_r + eps)))


def _min_first(x: Array, lo: np.float32, hi: np.float32, dt: np.dtype) -> Array:
    """FloatToQuantizedStruct + QUANTIZE_WITH_EIGEN: all in float32."""
    bits = dt.itemsize * 8
    lowest, highest = _limits(dt)
    scale = f32(0.0) if hi == lo else f32((2.0 ** bits - 1.0) / float(f32(hi - lo)))
    min_scaled = _round_away(np.asarray(f32(lo * scale)))
    lower = max(f32(lowest), f32(-2.147483648e9))
    upper = min(f32(highest), f32(2.147483520e9))
    q = _round_away(x.astype(_F32) * scale) - f32(min_scaled - f32(lowest))
    return np.minimum(np.maximum(q, lower), upper).astype(np.int64).astype(dt)


def _quantize_slice(x: Array, in_lo: np.float32, in_hi: np.float32, dt: np.dtype, mode: str,
                    half_even: bool, narrow: bool, ensure: np.float32
                    ) -> tuple[Array, np.float32, np.float32]:
    if in_hi < in_lo:
        raise InvalidArgumentError("input_max_range must be larger than input_min_range.")
    lo, hi = _adjusted_range(in_lo, in_hi, ensure)
    qmin, qmax = _limits(dt)
    if mode == "MIN_COMBINED":
        scale = f32((float(qmax) - float(qmin)) / float(f32(hi - lo)))
        shifted = (np.maximum(np.minimum(x, hi), lo) - lo) * scale
        if qmin < 0:
            half = f32((float(qmax) - float(qmin) + 1) / 2.0)
            return _to_int(_round_away(shifted - half), dt), lo, hi
        return _to_int(shifted + f32(0.5), dt), lo, hi
    # SCALED: symmetric around zero, the side that needs the smaller scale decides it.
    out_min = qmin + (1 if narrow else 0)
    big = np.finfo(np.float32).max
    from_min = f32(f32(out_min) / lo) if f32(out_min) * lo > 0 else big
    from_max = f32(f32(qmax) / hi) if f32(qmax) * hi > 0 else big
    scale = min(from_min, from_max)
    lo, hi = f32(f32(out_min) / scale), f32(f32(qmax) / scale)
    v = np.maximum(np.minimum(x, hi), lo) * scale
    return _to_int(np.rint(v) if half_even else _round_away(v), dt), lo, hi


@kernel("QuantizeV2")
def quantize_v2(ctx: KernelContext, x: Array, min_range: Array, max_range: Array):
    a = ctx.attrs
    dt = qdtype(a["T"])
    mode = a.get("mode", "MIN_COMBINED")
    round_mode = a.get("round_mode", "HALF_AWAY_FROM_ZERO")
    if mode not in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        raise InvalidArgumentError(
            f"Mode string must be 'MIN_COMBINED', 'MIN_FIRST', or 'SCALED', is '{mode}'")
    if round_mode not in ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"):
        raise InvalidArgumentError(
            "Round mode string must be 'HALF_AWAY_FROM_ZERO' or 'HALF_TO_EVEN', is "
            f"'{round_mode}'")
    if round_mode == "HALF_TO_EVEN" and mode != "SCALED":
        raise InvalidArgumentError(
            f"Round mode 'HALF_TO_EVEN' only supported for mode 'SCALED', but mode is '{mode}'.")
    half_even = round_mode == "HALF_TO_EVEN"
    narrow = bool(a.get("narrow_range", False))
    axis = int(a.get("axis", -1))
    ensure = f32(a.get("ensure_minimum_range", 0.01))
    x = x.astype(_F32, copy=False)
    if axis >= x.ndim:
        raise InvalidArgumentError(
            "Axis is on a zero-based index, so its value must always be less than number of "
            f"input's dims, but given axis value: {axis} and input's dims: {x.ndim}")
    if axis > -1:
        n = x.shape[axis]
        for name, v in (("min_range", min_range), ("max_range", max_range)):
            if v.ndim != 1 or v.shape[0] != n:
                raise InvalidArgumentError(
                    f"If axis is specified, {name} must be a 1-D tensor whose size matches the "
                    f"axis dimension of the input and {name}, but got {name}.dims="
                    f"{v.ndim}, {name}.size={v.size}, input.dim_size(axis)={n}")
    else:
        n = 1
        for name, v in (("min_range", min_range), ("max_range", max_range)):
            if v.size != 1:
                raise InvalidArgumentError(
                    f"If axis is not specified, {name} must contain a single float element, "
                    f"but it contains {v.size} elements")
    if n == 1:
        lo, hi = f32(min_range.reshape(-1)[0]), f32(max_range.reshape(-1)[0])
        if mode == "MIN_FIRST":
            if hi < lo:
                raise InvalidArgumentError(
                    "input_max_range must be larger than input_min_range.")
            lo2, hi2 = _adjusted_range(lo, hi, ensure)
            out = _min_first(x, lo2, hi2, dt)
        else:
            out, lo2, hi2 = _quantize_slice(x, lo, hi, dt, mode, half_even, narrow, ensure)
        return out, np.asarray(lo2, _F32), np.asarray(hi2, _F32)
    if mode == "MIN_FIRST":
        raise UnimplementedError("MIN_FIRST mode is not implemented for Quantize with axis != -1.")
    x3, _ = _slices(x, axis)
    out = np.empty(x3.shape, dt)
    los = np.empty(n, _F32)
    his = np.empty(n, _F32)
    for i in range(n):
        out[:, i], los[i], his[i] = _quantize_slice(
            x3[:, i], f32(min_range[i]), f32(max_range[i]), dt, mode, half_even, narrow, ensure)
    return out.reshape(x.shape), los.reshape(min_range.shape), his.reshape(min_range.shape)


# --- Dequantize -------------------------------------------------------------------------------

def _dequantize_min_first(q: Array, lo: np.float32, hi: np.float32, dt: np.dtype) -> Array:
    """QuantizedToFloatStruct + DEQUANTIZE_WITH_EIGEN, in float32."""
    bits = dt.itemsize * 8
    lowest, _ = _limits(dt)
    scale = f32(float(f32(hi - lo)) / (2.0 ** bits - 1.0))
    zero = lo if hi == lo else f32(_round_away(np.asarray(f32(lo / scale))) * scale)
    return f32(zero - f32(lowest) * scale) + q.astype(_F32) * scale


def _dequantize_slice(q: Array, lo: np.float32, hi: np.float32, dt: np.dtype, mode: str,
                      narrow: bool) -> Array:
    qmin, qmax = _limits(dt)
    if mode == "MIN_COMBINED":
        half = f32(0) if qmin == 0 else f32((f32(qmax) - f32(qmin) + f32(1)) / f32(2))
        scale = f32((hi - lo) / (f32(qmax) - f32(qmin)))
        return (q.astype(_F32) + half) * scale + lo
    if mode == "MIN_FIRST":
        return _dequantize_min_first(q, lo, hi, dt)
    out_min = qmin + (1 if narrow else 0)
    scale = f32(hi / f32(qmax)) if qmin == 0 else \
        max(f32(lo / f32(out_min)), f32(hi / f32(qmax)))
    qf = q.astype(_F32)
    if q.dtype == np.int32:
        # TF's qint32 -> int -> float goes through float: what rounds up to 2^31 wraps
        qf = np.where(qf >= f32(2.0 ** 31), f32(-(2.0 ** 31)), qf)
    return qf * scale


@kernel("Dequantize")
def dequantize(ctx: KernelContext, q: Array, min_range: Array, max_range: Array) -> Array:
    a = ctx.attrs
    dt = qdtype(a["T"])
    mode = a.get("mode", "MIN_COMBINED")
    out_dt = a.get("dtype", _F32)
    if not (isinstance(out_dt, np.dtype) and out_dt == _F32):
        if mode != "MIN_COMBINED":
            raise InvalidArgumentError(
                f"When output type is bfloat16, Mode string must be 'MIN_COMBINED', is '{mode}'")
        raise UnimplementedError("Dequantize to bfloat16: numpy has no bfloat16")
    if mode not in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        raise InvalidArgumentError(
            f"Mode string must be 'MIN_COMBINED', 'MIN_FIRST', or 'SCALED', is '{mode}'")
    narrow = bool(a.get("narrow_range", False))
    axis = int(a.get("axis", -1))
    q = q.astype(dt, copy=False)
    if axis >= q.ndim:
        raise InvalidArgumentError(
            f"Axis must be less than input dimension({q.ndim}), got {axis}")
    n = q.shape[axis] if axis > -1 else 1
    for name, v in (("input_min_tensor", min_range), ("input_max_tensor", max_range)):
        if v.size != n:
            raise InvalidArgumentError(
                f"{name} must have as many elements as input on the dequantization axis "
                f"({axis}), got {v.size}, expected {n}")
    if n == 1:
        out = _dequantize_slice(q, f32(min_range.reshape(-1)[0]), f32(max_range.reshape(-1)[0]),
                                dt, mode, narrow)
        return np.asarray(out, _F32).reshape(q.shape)
    if mode == "MIN_FIRST":
        raise UnimplementedError(
            "MIN_FIRST mode is not implemented for Dequantize with axis != -1.")
    q3, _ = _slices(q, axis)
    out = np.empty(q3.shape, _F32)
    lo, hi = min_range.reshape(-1), max_range.reshape(-1)
    for i in range(n):
        out[:, i] = _dequantize_slice(q3[:, i], f32(lo[i]), f32(hi[i]), dt, mode, narrow)
    return out.reshape(q.shape)


# --- QuantizeAndDequantize V1-V4 ----------------------------------------------------------------

def _float_input(x: Array, op: str) -> np.dtype:
    if x.dtype == np.float16:
        # TensorFlow registers these CPU kernels for float and double only.
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op '{op}' with T=half")
    return x.dtype


def _qdq_range(signed: bool, bits: int, narrow: bool, lo: Any, hi: Any, t: type
               ) -> tuple[Any, Any, Any, Any]:
    """ComputeQuantizationRange in the input's precision ``t``: (min, max, scale, inverse)."""
    qmin = (-(1 << (bits - 1)) + (1 if narrow else 0)) if signed else 0
    qmax = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    tq_min, tq_max = t(qmin), t(qmax)
    big = np.finfo(t).max
    from_min = t(tq_min / lo) if tq_min * lo > 0 else big
    from_max = t(tq_max / hi) if tq_max * hi > 0 else big
    if from_min < from_max:
        inv = t(lo / tq_min)
        return lo, t(tq_max * inv), from_min, inv
    inv = t(hi / tq_max)
    return t(tq_min * inv), hi, from_max, inv


def _qdq_one(x: Array, signed: bool, bits: int, range_given: bool, lo: Any, hi: Any,
             half_even: bool, narrow: bool) -> Array:
    t = x.dtype.type
    if not range_given:
        if x.size == 0:
            return x.copy()
        lo, hi = t(x.min()), t(x.max())
    lo, hi, scale, inv = _qdq_range(signed, bits, narrow, t(lo), t(hi), t)
    # Only a given range clamps (TF may have moved one end of it, see _qdq_range).
    v = np.maximum(np.minimum(x, hi), lo) if range_given else x
    s = v * scale
    r = np.rint(s) if half_even else np.floor(s + t(0.5))
    return (r * inv).astype(x.dtype, copy=False)


def _qdq(ctx: KernelContext, x: Array, lo: Array | None, hi: Array | None, bits: int,
         half_even: bool, narrow: bool) -> Array:
    a = ctx.attrs
    signed = bool(a.get("signed_input", True))
    range_given = bool(a.get("range_given", False))
    axis = int(a.get("axis", -1))
    if not (0 < bits < (62 if signed else 63)):
        raise InvalidArgumentError(
            f"num_bits is out of range: {bits} with signed_input_ {str(signed).lower()}")
    if axis < -1:
        raise InvalidArgumentError(f"Axis must be at least -1. Found {axis}")
    if axis != -1 and axis >= x.ndim:
        raise InvalidArgumentError(
            f"Shape must be at least rank {axis + 1} but is rank {x.ndim}")
    if axis == -1:
        if range_given:
            assert lo is not None and hi is not None
            for name, v in (("input_min", lo), ("input_max", hi)):
                if v.ndim != 0:
                    raise InvalidArgumentError(
                        f"{name} must be a scalar if axis is unspecified, got shape "
                        f"{list(v.shape)}")
            if not lo <= hi:
                raise InvalidArgumentError(f"Invalid range: input_min {lo} > input_max {hi}")
            return _qdq_one(x, signed, bits, True, lo[()], hi[()], half_even, narrow)
        return _qdq_one(x, signed, bits, False, None, None, half_even, narrow)
    depth = x.shape[axis]
    if range_given:
        assert lo is not None and hi is not None
        for name, v in (("input_min_tensor", lo), ("input_max_tensor", hi)):
            if v.ndim != 1:
                raise InvalidArgumentError(
                    f"Shape must be rank 1 for {name} when the axis is specified")
            if v.shape[0] != depth:
                raise InvalidArgumentError(
                    f"{name} has incorrect size, was {v.shape[0]} expected {depth} to match "
                    f"dim {axis} of the input {list(v.shape)}")
        if ctx.op != "QuantizeAndDequantizeV3":
            # TF 2.21's V2/V4 kernels then also require scalar ranges, so a given
            # per-channel range is always rejected there.
            raise InvalidArgumentError("input_min must be a scalar.")
    x3, _ = _slices(x, axis)
    out = np.empty(x3.shape, x.dtype)
    for i in range(depth):
        out[:, i] = _qdq_one(x3[:, i], signed, bits, range_given,
                             lo[i] if range_given else None, hi[i] if range_given else None,
                             half_even, narrow)
    return out.reshape(x.shape)


def _round_mode(ctx: KernelContext) -> bool:
    m = ctx.attrs.get("round_mode", "HALF_TO_EVEN")
    if m not in ("HALF_UP", "HALF_TO_EVEN"):
        raise InvalidArgumentError(
            f"Round mode string must be 'HALF_UP' or 'HALF_TO_EVEN', is '{m}'")
    return m == "HALF_TO_EVEN"


@kernel("QuantizeAndDequantize")
def quantize_and_dequantize(ctx: KernelContext, x: Array) -> Array:
    _float_input(x, ctx.op)
    a = ctx.attrs
    signed = bool(a.get("signed_input", True))
    bits = int(a.get("num_bits", 8))
    if not (0 < bits < (62 if signed else 63)):
        raise InvalidArgumentError(
            f"num_bits is out of range: {bits} with signed_input_ {str(signed).lower()}")
    lo, hi = f32(a.get("input_min", 0.0)), f32(a.get("input_max", 0.0))
    range_given = bool(a.get("range_given", False))
    if range_given and not lo <= hi:
        raise InvalidArgumentError(f"Invalid range: input_min {lo:g} > input_max {hi:g}")
    t = x.dtype.type
    return _qdq_one(x, signed, bits, range_given, t(lo), t(hi), True, False)


@kernel("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4")
def quantize_and_dequantize_v2(ctx: KernelContext, x: Array, input_min: Array,
                               input_max: Array) -> Array:
    _float_input(x, ctx.op)
    return _qdq(ctx, x, input_min, input_max, int(ctx.attrs.get("num_bits", 8)),
                _round_mode(ctx), bool(ctx.attrs.get("narrow_range", False)))


@kernel("QuantizeAndDequantizeV3")
def quantize_and_dequantize_v3(ctx: KernelContext, x: Array, input_min: Array,
                               input_max: Array, num_bits: Array) -> Array:
    _float_input(x, ctx.op)
    if num_bits.ndim != 0:
        raise InvalidArgumentError(
            f"Invalid shape. The `num_bits` tensor should be a scalar. Got dimensions: "
            f"{num_bits.ndim}")
    return _qdq(ctx, x, input_min, input_max, int(num_bits), True,
                bool(ctx.attrs.get("narrow_range", False)))


# --- per-channel fake quantization --------------------------------------------------------------

@kernel("FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_with_min_max_vars_per_channel(ctx: KernelContext, x: Array, min_: Array,
                                             max_: Array) -> Array:
    if x.ndim < 1:
        raise InvalidArgumentError("inputs must be at least rank 1")
    depth = x.shape[-1]
    for name, v in (("min", min_), ("max", max_)):
        if v.ndim != 1 or v.shape[0] != depth:
            raise InvalidArgumentError(
                f"`{name}` has incorrect size, expected {depth} was "
                f"{v.shape[0] if v.ndim else 1}")
    qmin, qmax = _quant_range(ctx)
    out = np.empty(x.shape, _F32)
    for i in range(depth):
        lo, hi = f32(min_[i]), f32(max_[i])
        # as FakeQuantWithMinMaxVars: an all-zero range gives zeros
        out[..., i] = 0 if lo == 0 and hi == 0 else \
            _fake_quant(x[..., i], lo, hi, qmin, qmax, use_inverse=False)
    return out


# --- requantization ---------------------------------------------------------------------------

def _quantized_to_float(q: int, lo: np.float32, hi: np.float32, dt: np.dtype) -> np.float32:
    """QuantizedToFloat for one value (doubles where TF's scalar helper uses them)."""
    if lo == hi:
        return lo
    bits = dt.itemsize * 8
    steps = 2.0 ** bits
    rng = float(f32(hi - lo)) * (steps / (steps - 1.0))
    scale = rng / steps
    lowest, _ = _limits(dt)
    s32 = f32(scale)
    zero = float(f32(_round_away(np.asarray(f32(lo / s32))) * s32))
    return f32(zero + (float(q) - lowest) * scale)


def _actual_range(q: Array, lo: np.float32, hi: np.float32, dt: np.dtype
                  ) -> tuple[np.float32, np.float32]:
    qmin, qmax = _limits(dt)
    amin = int(q.min()) if q.size else qmax
    amax = int(q.max()) if q.size else qmin
    return (min(f32(0), _quantized_to_float(amin, lo, hi, dt)),
            _quantized_to_float(amax, lo, hi, dt))


def _requantize(q: Array, in_dt: np.dtype, lo: np.float32, hi: np.float32,
                out_lo: np.float32, out_hi: np.float32, out_dt: np.dtype) -> Array:
    if q.size == 0:
        return np.zeros(q.shape, out_dt)
    if in_dt == np.int32 and out_dt == np.uint8:
        # TF's 16-bit fixed-point path for the common qint32 -> quint8 case.
        shift = 16
        in_range = f32(hi - lo)
        out_range = f32(out_hi - out_lo)
        recip = f32(0.0) if out_range == 0 else f32(255.0 / float(out_range))
        rezero = f32(float(f32(lo + hi)) / 2.0)
        scale_fp = 0 if out_range == 0 else \
            int(255.0 * (1 << shift) * float(in_range) / float(out_range))
        in_off = int(f32(f32(rezero * recip) * f32(1 << shift)))
        out_off = 0 if out_range == 0 else \
            int((1 << shift) * (float(out_lo) * 255.0) / float(out_range))
        v = q.astype(np.int64)
        fp = ((v * np.int64(scale_fp)) >> 32) + np.int64(in_off - out_off + (1 << (shift - 1)))
        return np.clip(fp >> shift, 0, 255).astype(np.uint8)
    as_float = _dequantize_min_first(q, lo, hi, in_dt)
    return _min_first(as_float, out_lo, out_hi, out_dt)


def _range_inputs(*xs: Array) -> list[np.float32]:
    return [_first(x, n) for x, n in zip(xs, ("input_min", "input_max",
                                              "requested_output_min",
                                              "requested_output_max"))]


@kernel("Requantize")
def requantize(ctx: KernelContext, q: Array, input_min: Array, input_max: Array,
               requested_min: Array, requested_max: Array):
    in_dt, out_dt = qdtype(ctx.attrs["Tinput"]), qdtype(ctx.attrs["out_type"])
    for name, v in (("input_min", input_min), ("input_max", input_max),
                    ("requested_output_min", requested_min),
                    ("requested_output_max", requested_max)):
        if v.ndim != 0:
            raise InvalidArgumentError(f"`{name}` must be rank 0 but is rank {v.ndim}")
    lo, hi, rlo, rhi = _range_inputs(input_min, input_max, requested_min, requested_max)
    if not rlo <= 0:
        raise InvalidArgumentError(f"requested_output_min must be <= 0, but got {rlo:g}")
    if not rhi >= rlo:
        raise InvalidArgumentError(
            f"requested_output_max must be >= requested_output_min, but got {rhi:g} and "
            f"{rlo:g}")
    out = _requantize(q.astype(in_dt, copy=False), in_dt, lo, hi, rlo, rhi, out_dt)
    return out, np.asarray(rlo, _F32), np.asarray(rhi, _F32)


@kernel("RequantizationRange")
def requantization_range(ctx: KernelContext, q: Array, input_min: Array, input_max: Array):
    dt = qdtype(ctx.attrs["Tinput"])
    for name, v in (("input_min", input_min), ("input_max", input_max)):
        if v.ndim != 0:
            raise InvalidArgumentError(f"`{name}` must be rank 0 but is rank {v.ndim}")
    lo, hi = _range_inputs(input_min, input_max)
    amin, amax = _actual_range(q.astype(dt, copy=False), lo, hi, dt)
    return np.asarray(amin, _F32), np.asarray(amax, _F32)


@kernel("QuantizeDownAndShrinkRange")
def quantize_down_and_shrink_range(ctx: KernelContext, q: Array, input_min: Array,
                                   input_max: Array):
    in_dt, out_dt = qdtype(ctx.attrs["Tinput"]), qdtype(ctx.attrs["out_type"])
    for name, v in (("input_min", input_min), ("input_max", input_max)):
        if v.ndim != 0:
            raise InvalidArgumentError(f"`{name}` must be rank 0 but is rank {v.ndim}")
    lo, hi = _range_inputs(input_min, input_max)
    q = q.astype(in_dt, copy=False)
    amin, amax = _actual_range(q, lo, hi, in_dt)
    out = _requantize(q, in_dt, lo, hi, amin, amax, out_dt)
    return out, np.asarray(amin, _F32), np.asarray(amax, _F32)


@kernel("RequantizationRangePerChannel")
def requantization_range_per_channel(ctx: KernelContext, q: Array, input_min: Array,
                                     input_max: Array):
    qdtype(ctx.attrs.get("T", 13))
    depth = input_max.size
    if input_min.ndim < 1 or input_min.shape[0] != depth:
        raise InvalidArgumentError(
            f"input_min has incorrect size, expected {depth} was "
            f"{input_min.shape[0] if input_min.ndim else 1}")
    if input_max.ndim < 1 or input_max.shape[0] != depth:
        raise InvalidArgumentError(
            f"input_max has incorrect size, expected {depth} was "
            f"{input_max.shape[0] if input_max.ndim else 1}")
    if q.size == 0:
        raise InvalidArgumentError("input must not be empty")
    if q.ndim != 4:
        raise InvalidArgumentError("input must be in NHWC format")
    if q.shape[3] != depth:
        raise InvalidArgumentError(
            f"input must have same number of channels as length of input_min: {q.shape[3]} vs "
            f"{depth}")
    flat = q.reshape(-1, depth).astype(np.int64)
    cmin, cmax = flat.min(axis=0), flat.max(axis=0)
    # std::abs on int32: |INT_MIN| stays INT_MIN
    abs_max = np.maximum(np.abs(cmin), np.abs(cmax)).astype(np.int32)
    scale = np.maximum(np.abs(input_min.astype(_F32)), np.abs(input_max.astype(_F32)))
    ranges = scale * abs_max.astype(_F32) / f32(2.0 ** 31)
    # The running maximum starts at FLT_MIN (the smallest normal float), not at 0.
    top = max(f32(np.finfo(np.float32).tiny), f32(ranges.max()))
    clip = f32(ctx.attrs["clip_value_max"])
    if top > clip:
        top = clip
    lo = f32(0.0) if (cmin >= 0).all() else f32(-top)
    return np.asarray(lo, _F32), np.asarray(top, _F32)


@kernel("RequantizePerChannel")
def requantize_per_channel(ctx: KernelContext, q: Array, input_min: Array, input_max: Array,
                           requested_min: Array, requested_max: Array):
    qdtype(ctx.attrs.get("T", 13))
    out_t = ctx.attrs.get("out_type", 12)
    out_dt = qdtype(out_t)
    if out_dt not in (np.dtype(np.int8), np.dtype(np.uint8)):
        raise InvalidArgumentError(
            f"out_type must be qint8 or quint8, but got: {_QNAMES.get(out_t, out_t)}")
    depth = input_min.size
    if input_max.size != depth:
        raise InvalidArgumentError(
            f"input_max has incorrect size, expected {depth} was {input_max.size}")
    if requested_min.size != 1:
        raise InvalidArgumentError("requested_output_min must be a scalar")
    if requested_max.size != 1:
        raise InvalidArgumentError("requested_output_max must be a scalar")
    rlo, rhi = f32(requested_min.reshape(())), f32(requested_max.reshape(()))
    if out_dt == np.int8 and not rlo < 0:
        raise InvalidArgumentError(
            f"If out_type is QINT8, requested_output_max must be non negative, got {rlo:g}")
    if q.ndim not in (4, 5) or q.shape[-1] != depth:
        raise InvalidArgumentError(
            f"input must be 4-D or 5-D with {depth} channels, got shape {list(q.shape)}")
    factor = f32(127.0) if out_dt == np.int8 else f32(255.0)
    req = max(abs(rlo), abs(rhi))
    mm = np.maximum(np.abs(input_min.reshape(-1).astype(_F32)),
                    np.abs(input_max.reshape(-1).astype(_F32)))
    scales = factor * (mm / req / f32(2.0 ** 31))
    # oneDNN's reorder: scale in float, round to nearest even, saturate
    v = np.rint(q.astype(_F32) * scales)
    lo_q, hi_q = _limits(out_dt)
    out = np.clip(v, lo_q, hi_q).astype(out_dt)
    return out, np.asarray(rlo, _F32), np.asarray(rhi, _F32)


# --- eight-bit ops of quantized graphs (quantize_graph's eightbit mode) -------------------------

_U8, _I32 = np.dtype(np.uint8), np.dtype(np.int32)
_NUM = {dt: num for num, dt in _QTYPES.items()}


def _type_num(v: Any) -> int | None:
    """A type attr as its DataType number: given as one, or as the storage dtype a graph's
    quantized type binds as (None for other types)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    try:
        return _NUM.get(np.dtype(v))
    except TypeError:
        return None


def _registered(ctx: KernelContext, combos: tuple[tuple[int, ...], ...], *names: str
                ) -> tuple[np.dtype, ...]:
    """The storage dtypes of type attrs ``names``, which must be one of the combinations
    TensorFlow registers a CPU kernel for (DataType numbers)."""
    got = tuple(_type_num(ctx.attrs.get(n)) for n in names)
    if got not in combos:
        desc = ", ".join(f"{n}={_QNAMES.get(g, g) if g is not None else ctx.attrs.get(n)}"
                         for n, g in zip(names, got))
        raise NotFoundError(f"Could not find device for node: {ctx.op}[{desc}]: no CPU kernel "
                            "is registered for these types")
    return tuple(_QTYPES[g] for g in got)  # type: ignore[index]


def _cround(v: float) -> float:
    """std::round on a double: halves away from zero."""
    t = math.trunc(v)
    return float(t + (math.copysign(1.0, v) if abs(v - t) >= 0.5 else 0.0))


def _f2q_unclamped(v: Any, lo: np.float32, hi: np.float32, dt: np.dtype) -> int:
    """FloatToQuantizedUnclamped: where ``v`` falls on ``dt``'s grid over [lo, hi]."""
    if lo == hi:
        return 0
    steps = float(1 << (dt.itemsize * 8))
    scale = steps / (float(f32(hi - lo)) * (steps / (steps - 1.0)))
    return int(_cround(float(f32(v)) * scale) - _cround(float(lo) * scale)) + _limits(dt)[0]


def _f2q(v: Any, lo: np.float32, hi: np.float32, dt: np.dtype) -> int:
    """FloatToQuantized: the same, clamped to ``dt``."""
    qmin, qmax = _limits(dt)
    return min(max(_f2q_unclamped(v, lo, hi, dt), qmin), qmax)


def _one_level(lo: np.float32, hi: np.float32, dt: np.dtype) -> np.float32:
    """FloatForOneQuantizedLevel, in float32."""
    qmin, qmax = _limits(dt)
    return f32(f32(hi - lo) / f32(qmax - qmin))


def _range_for_mul(lo_a: np.float32, hi_a: np.float32, dta: np.dtype, lo_b: np.float32,
                   hi_b: np.float32, dtb: np.dtype, dtc: np.dtype) -> tuple[Array, Array]:
    """QuantizationRangeForMultiplication: one level of the product, times dtc's limits."""
    c = f32(_one_level(lo_a, hi_a, dta) * _one_level(lo_b, hi_b, dtb))
    qmin, qmax = _limits(dtc)
    return np.asarray(f32(c * f32(qmin)), _F32), np.asarray(f32(c * f32(qmax)), _F32)


def _rank0(v: Array, msg: str) -> np.float32:
    if v.ndim != 0:
        raise InvalidArgumentError(msg.format(rank=v.ndim, shape=_shape_str(v.shape)))
    return f32(v.reshape(-1)[0])


def _shape_str(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _exact_matmul(a: Array, b: Array) -> Array:
    """The exact int64 product of int64 matrices, wrapped to int32 (gemmlowp's int32
    accumulators wrap the same way, and so does the reference path)."""
    k = a.shape[1]
    bound = (int(np.abs(a).max(initial=0)) * int(np.abs(b).max(initial=0))) * max(k, 1)
    if bound < 2 ** 53:  # float64 (BLAS) is exact here
        out = (a.astype(_F64) @ b.astype(_F64)).astype(np.int64)
    else:
        out = a @ b
    return out.astype(np.int32)


@kernel("QuantizedMatMul")
def quantized_mat_mul(ctx: KernelContext, a: Array, b: Array, min_a: Array, max_a: Array,
                      min_b: Array, max_b: Array):
    dta, dtb, dtc = _registered(ctx, ((12, 12, 13),), "T1", "T2", "Toutput")
    if min_a.ndim != 0:
        raise InvalidArgumentError(
            f"min_a must be a scalar, but got shape{_shape_str(min_a.shape)}")
    lo_a = f32(min_a.reshape(-1)[0])
    vals = []
    for name, v in (("max_a", max_a), ("min_b", min_b), ("max_b", max_b)):
        if v.size != 1:
            raise InvalidArgumentError(
                f"{name} must be a scalar, but got shape{_shape_str(v.shape)}")
        vals.append(f32(v.reshape(-1)[0]))
    hi_a, lo_b, hi_b = vals
    if not hi_a > lo_a:
        raise InvalidArgumentError("max_a must be larger than min_a.")
    if not hi_b > lo_b:
        raise InvalidArgumentError("max_b must be larger than min_b.")
    off_a = _f2q_unclamped(0.0, lo_a, hi_a, dta)
    off_b = _f2q_unclamped(0.0, lo_b, hi_b, dtb)
    if a.ndim != 2:
        raise InvalidArgumentError("In[0] is not a matrix")
    if b.ndim != 2:
        raise InvalidArgumentError("In[1] is not a matrix")
    am = a.T if ctx.attrs.get("transpose_a", False) else a
    bm = b.T if ctx.attrs.get("transpose_b", False) else b
    if am.shape[1] != bm.shape[0]:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {_shape_str(a.shape)}, In[1]: "
            f"{_shape_str(b.shape)}")
    out = _exact_matmul(am.astype(np.int64) - off_a, bm.astype(np.int64) - off_b)
    lo_c, hi_c = _range_for_mul(lo_a, hi_a, dta, lo_b, hi_b, dtb, dtc)
    return out, lo_c, hi_c


@kernel("QuantizedConv2D")
def quantized_conv2d(ctx: KernelContext, x: Array, f: Array, min_input: Array,
                     max_input: Array, min_filter: Array, max_filter: Array):
    a = ctx.attrs
    strides = [int(v) for v in a.get("strides") or []]
    if len(strides) != 4:
        raise InvalidArgumentError("Sliding window strides field must specify 4 dimensions")
    if strides[1] != strides[2]:
        raise InvalidArgumentError(
            "Current implementation only supports equal length strides in the row and "
            "column dimensions.")
    if strides[0] != 1 or strides[3] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support strides in the batch and depth "
            "dimensions.")
    dil = [int(v) for v in a.get("dilations") or [1, 1, 1, 1]]
    if len(dil) != 4:
        raise InvalidArgumentError("Dilations field must specify 4 dimensions")
    if dil[1] != 1 or dil[2] != 1:
        raise InvalidArgumentError(
            "Current implementation only supports dilated rate as 1 in the row and column "
            "dimensions.")
    if dil[0] != 1 or dil[3] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support dilations in the batch and depth "
            "dimensions.")
    padding = a.get("padding")
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"padding must be SAME or VALID, found {padding!r}")
    combo = (_type_num(a.get("Tinput")), _type_num(a.get("Tfilter")),
             _type_num(a.get("out_type")))
    if combo == (12, 11, 13):
        # registered by oneDNN builds only as a placeholder for its graph rewrite
        raise UnimplementedError(
            "QuantizedConv2D with a qint8 filter runs only as oneDNN's fused rewrite")
    dtx, dtf, _ = _registered(ctx, ((12, 12, 13),), "Tinput", "Tfilter", "out_type")
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional{_shape_str(x.shape)}")
    if f.ndim != 4:
        raise InvalidArgumentError(f"filter must be 4-dimensional: {_shape_str(f.shape)}")
    lo_x, hi_x, lo_f, hi_f = (
        _rank0(v, f"{n} must be rank 0 but is rank {{rank}}")
        for v, n in ((min_input, "min_input"), (max_input, "max_input"),
                     (min_filter, "min_filter"), (max_filter, "max_filter")))
    off_x = _f2q_unclamped(0.0, lo_x, hi_x, dtx)
    off_f = _f2q_unclamped(0.0, lo_f, hi_f, dtf)
    n, h, w, c = x.shape
    kh, kw, fc, oc = f.shape
    if c != fc:
        raise InvalidArgumentError(
            f"input and filter must have the same depth: {c} vs {fc}")
    s = strides[1]
    oh, top = _conv.window(h, kh, 1, s, padding, None)
    ow, left = _conv.window(w, kw, 1, s, padding, None)
    if min(n, oh, ow, oc) <= 0:
        # TensorFlow CHECK-fails (aborts the process) here
        raise InvalidArgumentError(
            f"QuantizedConv2D needs a non-empty output, got [{n},{oh},{ow},{oc}]")
    g = _conv.Geom(n, h, w, c, kh, kw, s, s, 1, 1, oh, ow, top, left)
    idx, fill_row = _conv._gather_index(g)
    # Outside the input the im2col buffer holds the zero point stored as quint8 (so it is
    # exact only when that lies in [0, 255]); a negative zero point takes TF's reference
    # path, which reads zeros (after the offset) there.
    fill = (off_x & 0xFF) - off_x if off_x >= 0 else 0
    xs = x.astype(np.int64) - off_x
    cols = _conv._gather(xs, idx, fill_row, fill).reshape(n * oh * ow, kh * kw * c)
    out = _exact_matmul(cols, f.reshape(kh * kw * c, oc).astype(np.int64) - off_f)
    lo_o, hi_o = _range_for_mul(lo_x, hi_x, dtx, lo_f, hi_f, dtf, _I32)
    return out.reshape(n, oh, ow, oc), lo_o, hi_o


def _relu(ctx: KernelContext, x: Array, min_features: Array, max_features: Array,
          top: float | None):
    dt, _ = _registered(ctx, ((12, 12), (13, 13)), "Tinput", "out_type")
    lo = _rank0(min_features, "`min_input` must be rank 0 but is rank {rank}")
    hi = _rank0(max_features, "`max_input` must be rank 0 but is rank {rank}")
    x = x.astype(dt, copy=False)
    out = np.maximum(x, dt.type(_f2q(0.0, lo, hi, dt)))
    if top is not None:
        out = np.minimum(out, dt.type(_f2q(top, lo, hi, dt)))
    return out, np.asarray(lo, _F32), np.asarray(hi, _F32)


@kernel("QuantizedRelu")
def quantized_relu(ctx: KernelContext, x: Array, min_features: Array, max_features: Array):
    return _relu(ctx, x, min_features, max_features, None)


@kernel("QuantizedRelu6")
def quantized_relu6(ctx: KernelContext, x: Array, min_features: Array, max_features: Array):
    return _relu(ctx, x, min_features, max_features, 6.0)


def _add_in_total_space(big: Array, lo_b: np.float32, hi_b: np.float32, small: Array,
                        lo_s: np.float32, hi_s: np.float32, out_lo: np.float32,
                        out_hi: np.float32) -> Array:
    """QuantizedAddUsingEigen: both inputs dequantized and requantized into the int32 output
    range (in float32), the smaller repeated along the larger, plus the output's zero."""
    zero = _f2q(0.0, out_lo, out_hi, _I32)
    big_t = _min_first(_dequantize_min_first(big, lo_b, hi_b, big.dtype), out_lo, out_hi, _I32)
    small_t = _min_first(_dequantize_min_first(small, lo_s, hi_s, small.dtype), out_lo,
                         out_hi, _I32)
    reps = big.size // small.size if small.size else 0
    total = big_t.reshape(-1).astype(np.int64) + (np.tile(small_t.reshape(-1), reps) + zero)
    return total.astype(np.int32).reshape(big.shape)


@kernel("QuantizedBiasAdd")
def quantized_bias_add(ctx: KernelContext, x: Array, bias: Array, min_input: Array,
                       max_input: Array, min_bias: Array, max_bias: Array):
    dtx, _, _ = _registered(ctx, ((11, 11, 13), (12, 12, 13)), "T1", "T2", "out_type")
    lo_x, hi_x, lo_b, hi_b = (
        _rank0(v, f"`{n}` must be rank 0 but is rank {{rank}}")
        for v, n in ((min_input, "min_input"), (max_input, "max_input"),
                     (min_bias, "min_bias"), (max_bias, "max_bias")))
    if x.ndim < 2:
        raise InvalidArgumentError(f"Input tensor must be at least 2D: {_shape_str(x.shape)}")
    if bias.ndim != 1:
        raise InvalidArgumentError(f"Biases must be 1D: {_shape_str(bias.shape)}")
    if x.shape[-1] != bias.shape[0]:
        raise InvalidArgumentError(
            "Must provide as many biases as the last dimension of the input tensor: "
            f"{_shape_str(bias.shape)} vs. {_shape_str(x.shape)}")
    top = f32(max(hi_x, max(-lo_x, max(hi_b, -lo_b))) * f32(1 << 17))
    out_lo = f32(-top)
    if x.size == 0:
        out = np.zeros(x.shape, np.int32)
    else:
        out = _add_in_total_space(x.astype(dtx, copy=False), lo_x, hi_x,
                                  bias.astype(dtx, copy=False), lo_b, hi_b, out_lo, top)
    return out, np.asarray(out_lo, _F32), np.asarray(top, _F32)


def _pool_ranges(ctx: KernelContext, min_input: Array, max_input: Array
                 ) -> tuple[Array, Array]:
    lo, hi = (_rank0(v, f"{n} shape must be rank 0 but is rank {{rank}}, received shape: "
                        "{shape}")
              for v, n in ((min_input, "min_input"), (max_input, "max_input")))
    return np.asarray(lo, _F32), np.asarray(hi, _F32)


def _pool_attrs(ctx: KernelContext) -> tuple[list[int], list[int]]:
    a = ctx.attrs
    ksize = [int(v) for v in a.get("ksize") or []]
    strides = [int(v) for v in a.get("strides") or []]
    if len(ksize) != 4:
        raise InvalidArgumentError("Sliding window ksize field must specify 4 dimensions")
    if len(strides) != 4:
        raise InvalidArgumentError("Sliding window strides field must specify 4 dimensions")
    if ksize[0] != 1 or strides[0] != 1:
        raise UnimplementedError("Pooling is not yet supported on the batch dimension.")
    return ksize, strides


@kernel("QuantizedMaxPool")
def quantized_max_pool(ctx: KernelContext, x: Array, min_input: Array, max_input: Array):
    (dt,) = _registered(ctx, ((11,), (12,)), "T")
    ksize, strides = _pool_attrs(ctx)
    lo, hi = _pool_ranges(ctx, min_input, max_input)
    if x.ndim != 4:
        raise InvalidArgumentError(
            f"tensor_in_shape must have 2 spatial dimensions. {x.ndim} {max(x.ndim - 3, 0)}")
    out = _conv.max_pool(x.astype(dt, copy=False), ksize, strides, ctx.attrs.get("padding"))
    return out, lo, hi


@kernel("QuantizedAvgPool")
def quantized_avg_pool(ctx: KernelContext, x: Array, min_input: Array, max_input: Array):
    (dt,) = _registered(ctx, ((11,), (12,)), "T")
    ksize, strides = _pool_attrs(ctx)
    lo, hi = _pool_ranges(ctx, min_input, max_input)
    if x.ndim != 4:
        raise InvalidArgumentError(
            f"tensor_in_shape must have 2 spatial dimensions. {x.ndim} {max(x.ndim - 3, 0)}")
    if ksize[3] != 1 or strides[3] != 1:
        if x.shape[3] % ksize[3] or ksize[3] != strides[3]:
            raise UnimplementedError(
                "Depthwise max pooling requires the depth window to evenly divide the input "
                "depth")
        raise UnimplementedError("Non-spatial pooling is not yet supported. Volunteers? :)")
    # the sum over each window's real elements in int32, divided (truncating) by their count
    mean = _conv.avg_pool(x.astype(np.int32), ksize, strides, ctx.attrs.get("padding"))
    qmin, qmax = _limits(dt)
    return np.clip(mean, qmin, qmax).astype(dt), lo, hi


@kernel("QuantizedConcat")
def quantized_concat(ctx: KernelContext, concat_dim: Array, *rest: Array):
    (dt,) = _registered(ctx, ((12,), (13,)), "T")
    n = len(rest) // 3
    values, mins, maxes = rest[:n], rest[n:2 * n], rest[2 * n:]
    if concat_dim.ndim != 0:
        raise InvalidArgumentError(
            "Concat dim tensor should be a scalar integer, but got shape "
            f"{_shape_str(concat_dim.shape)}")
    axis = int(concat_dim)
    for name, vs in (("input_mins", mins), ("input_maxes", maxes)):
        for i, v in enumerate(vs):
            if v.size != 1:
                raise InvalidArgumentError(
                    f"{name} each tensor's num elements must be 1, given num elements "
                    f"{v.size} in index {i}")
    lows = [f32(v.reshape(-1)[0]) for v in mins]
    highs = [f32(v.reshape(-1)[0]) for v in maxes]
    lo = min(f32(0), min(lows))
    hi = max(highs)
    if dt.kind == "i":  # signed: symmetric around zero
        hi = max(abs(lo), abs(hi))
        lo = f32(-hi)
    first = values[0]
    if not 0 <= axis < first.ndim:
        raise InvalidArgumentError(
            f"ConcatOp : Expected concatenating dimensions in the range [0, {first.ndim}), "
            f"but got {axis}")
    for i, v in enumerate(values[1:], 1):
        if v.ndim != first.ndim:
            raise InvalidArgumentError(
                "ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{_shape_str(first.shape)} vs. shape[{i}] = {_shape_str(v.shape)}")
        if any(v.shape[j] != first.shape[j] for j in range(first.ndim) if j != axis):
            raise InvalidArgumentError(
                "ConcatOp : Dimensions of inputs should match: shape[0] = "
                f"{_shape_str(first.shape)} vs. shape[{i}] = {_shape_str(v.shape)}")
    parts = []
    for v, vlo, vhi in zip(values, lows, highs):
        v = v.astype(dt, copy=False)
        if (vlo == lo and vhi == hi) or v.size == 0:
            parts.append(v)
        else:
            parts.append(_min_first(_dequantize_min_first(v, vlo, vhi, dt), lo, hi, dt))
    return np.concatenate(parts, axis=axis), np.asarray(lo, _F32), np.asarray(hi, _F32)


@kernel("QuantizedReshape")
def quantized_reshape(ctx: KernelContext, x: Array, shape: Array, input_min: Array,
                      input_max: Array):
    (dt,) = _registered(ctx, ((12,), (13,)), "T")
    for name, v in (("input_min", input_min), ("input_max", input_max)):
        if not (v.ndim == 0 or (v.ndim == 1 and v.shape[0] == 1)):
            raise InvalidArgumentError(f"{name} must be a scalar or a vector of 1 element")
    out = reshaped(x.astype(dt, copy=False), shape)
    return (out, np.asarray(f32(input_min.reshape(-1)[0]), _F32),
            np.asarray(f32(input_max.reshape(-1)[0]), _F32))


def _bcast_dims(xs: tuple[int, ...], ys: tuple[int, ...]) -> int | None:
    """How many dimensions TF's BCast reduces the pair of shapes to (None: incompatible):
    dimensions of size 1 in both drop out, runs with the same broadcast pattern merge."""
    r = max(len(xs), len(ys))
    xs = (1,) * (r - len(xs)) + tuple(xs)
    ys = (1,) * (r - len(ys)) + tuple(ys)
    dims, prev = 0, None
    for xi, yi in zip(reversed(xs), reversed(ys)):
        if xi == yi:
            if xi == 1:
                continue
            cur = "same"
        elif xi == 1:
            cur = "x"
        elif yi == 1:
            cur = "y"
        else:
            return None
        if cur != prev:
            dims += 1
        prev = cur
    return max(dims, 1)


def _binary_setup(ctx: KernelContext, x: Array, y: Array) -> tuple[int, tuple[int, ...]]:
    _registered(ctx, ((12, 12, 13),), "T1", "T2", "Toutput")
    nd = _bcast_dims(x.shape, y.shape)
    if nd is None:
        raise InvalidArgumentError(
            f"Incompatible shapes: {_shape_str(x.shape)} vs. {_shape_str(y.shape)}")
    return nd, np.broadcast_shapes(x.shape, y.shape)


def _vector_tensor(x: Array, y: Array, fx, fy, out_shape: tuple[int, ...], empty_msg: str
                   ) -> Array:
    """TF's ndims == 2 case: the input with fewer elements (y on a tie) is repeated along the
    other's flat order; outputs past the larger input's size are left at 0 (TF leaves them
    unset)."""
    if x.size < y.size:
        vec, ten, fv, ft = x, y, fx, fy
    else:
        vec, ten, fv, ft = y, x, fy, fx
    if vec.size == 0:
        raise InvalidArgumentError(empty_msg)
    reps = -(-ten.size // vec.size)
    v = np.tile(fv(vec.reshape(-1)), reps)[:ten.size]
    total = (v + ft(ten.reshape(-1))).astype(np.int32)
    out = np.zeros(math.prod(out_shape), np.int32)
    out[:min(total.size, out.size)] = total[:out.size]
    return out.reshape(out_shape)


def _elementwise(nd: int, x: Array, y: Array, fx, fy, out_shape: tuple[int, ...],
                 empty_msg: str) -> Array:
    if nd <= 1:
        if x.size == 1:
            v = fx(x.reshape(-1))[0] + fy(y.reshape(-1))
        elif y.size == 1:
            v = fx(x.reshape(-1)) + fy(y.reshape(-1))[0]
        else:
            v = fx(x.reshape(-1)) + fy(y.reshape(-1))
        return v.astype(np.int32).reshape(out_shape)
    if nd == 2:
        return _vector_tensor(x, y, fx, fy, out_shape, empty_msg)
    raise UnimplementedError(
        f"Broadcast between {_shape_str(x.shape)} and {_shape_str(y.shape)} is not supported "
        "yet.")


@kernel("QuantizedAdd")
def quantized_add(ctx: KernelContext, x: Array, y: Array, min_x: Array, max_x: Array,
                  min_y: Array, max_y: Array):
    lo_x, hi_x, lo_y, hi_y = (
        _rank0(v, f"`{n}` must be rank 0 but is rank {{rank}}")
        for v, n in ((min_x, "min_x"), (max_x, "max_x"), (min_y, "min_y"), (max_y, "max_y")))
    nd, out_shape = _binary_setup(ctx, x, y)
    if not hi_x > lo_x:
        raise InvalidArgumentError("max_x must be larger than min_x.")
    if not hi_y > lo_y:
        raise InvalidArgumentError("max_y must be larger than min_y.")
    biggest = max(abs(min(lo_x, lo_y)), abs(max(hi_x, hi_y)))
    top = f32(biggest * f32(1 << 14))
    lo_z = f32(-top)

    def into_z(lo: np.float32, hi: np.float32):
        # each quint8 value mapped linearly (in int64, clamped to int32) from where its
        # 0 and 1 land in the output range
        zero = _f2q_unclamped(_quantized_to_float(0, lo, hi, _U8), lo_z, top, _I32)
        one = _f2q_unclamped(_quantized_to_float(1, lo, hi, _U8), lo_z, top, _I32)
        mult = int(np.int64(one - zero).astype(np.int32))
        return lambda q: np.clip(zero + q.astype(np.int64) * mult, -(2 ** 31), 2 ** 31 - 1)

    fx, fy = into_z(lo_x, hi_x), into_z(lo_y, hi_y)
    if nd <= 1 and (x.size == 1 or y.size == 1):
        # a scalar side goes through RequantizeInNewRange (QuantizedToFloat, then
        # FloatToQuantized, clamped); x is the scalar when both are
        sx, slo, shi = (x, lo_x, hi_x) if x.size == 1 else (y, lo_y, hi_y)
        sval = _f2q(_quantized_to_float(int(sx.reshape(-1)[0]), slo, shi, _U8), lo_z, top,
                    _I32)

        def scalar(q: Array) -> Array:
            return np.full(q.shape, sval, np.int64)

        if x.size == 1:
            fx = scalar
        else:
            fy = scalar
    out = _elementwise(nd, x.astype(_U8, copy=False), y.astype(_U8, copy=False), fx, fy,
                       out_shape, "Must have some elements to add")
    return out, np.asarray(lo_z, _F32), np.asarray(top, _F32)


@kernel("QuantizedMul")
def quantized_mul(ctx: KernelContext, x: Array, y: Array, min_x: Array, max_x: Array,
                  min_y: Array, max_y: Array):
    lo_x, hi_x, lo_y, hi_y = (
        _rank0(v, f"{n} must be a scalar")
        for v, n in ((min_x, "min_x"), (max_x, "max_x"), (min_y, "min_y"), (max_y, "max_y")))
    nd, out_shape = _binary_setup(ctx, x, y)
    if not hi_x > lo_x:
        raise InvalidArgumentError("max_x must be larger than min_a.")
    if not hi_y > lo_y:
        raise InvalidArgumentError("max_x must be larger than min_b.")
    off_x = _f2q_unclamped(0.0, lo_x, hi_x, _U8)
    off_y = _f2q_unclamped(0.0, lo_y, hi_y, _U8)
    xs = x.astype(np.int64) - off_x
    ys = y.astype(np.int64) - off_y
    out = _mul_elementwise(nd, xs, ys, out_shape)
    lo_z, hi_z = _range_for_mul(lo_x, hi_x, _U8, lo_y, hi_y, _U8, _I32)
    return out, lo_z, hi_z


def _mul_elementwise(nd: int, x: Array, y: Array, out_shape: tuple[int, ...]) -> Array:
    if nd <= 1:
        if x.size == 1:
            v = x.reshape(-1)[0] * y.reshape(-1)
        elif y.size == 1:
            v = x.reshape(-1) * y.reshape(-1)[0]
        else:
            v = x.reshape(-1) * y.reshape(-1)
        return v.astype(np.int32).reshape(out_shape)
    if nd != 2:
        raise UnimplementedError(
            f"Broadcast between {_shape_str(x.shape)} and {_shape_str(y.shape)} is not "
            "supported yet.")
    vec, ten = (x, y) if x.size < y.size else (y, x)
    if vec.size == 0:
        raise InvalidArgumentError("vector must have at least 1 element")
    reps = -(-ten.size // vec.size)
    total = (np.tile(vec.reshape(-1), reps)[:ten.size] * ten.reshape(-1)).astype(np.int32)
    out = np.zeros(math.prod(out_shape), np.int32)
    out[:min(total.size, out.size)] = total[:out.size]
    return out.reshape(out_shape)
