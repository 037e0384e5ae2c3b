"""Quantization: QuantizeV2, Dequantize, QuantizeAndDequantize*, per-channel fake quant,
requantization.

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
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    InvalidArgumentError,
    UnimplementedError,
)

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
