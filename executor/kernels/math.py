"""Math kernels: elementwise unary/binary ops, Cast, BiasAdd, matrix products, AddN, scans,
segment reductions, fake quantization, PopulationCount and HistogramFixedWidth.

Everything follows TensorFlow's CPU semantics on numpy arrays:

* Binary ops broadcast numpy-style; incompatible shapes raise ``Incompatible shapes: [..] vs.
  [..]``. Integer arithmetic wraps silently (numpy array loops never warn on int overflow).
* Integer division and modulo by zero raise ``Integer division by zero``. ``FloorDiv`` /
  ``FloorMod`` round towards -inf (the remainder takes the divisor's sign); ``Div``,
  ``TruncateDiv``, ``TruncateMod`` and ``Mod`` use C truncation. Float division by zero gives
  inf/nan. ``INT_MIN / -1`` wraps to ``INT_MIN`` as TensorFlow's safe division does.
* ``Maximum``/``Minimum`` propagate NaN (TensorFlow >= 2.4 does).
* Every kernel returns exactly the OpDef's dtype, also for 0-d results (numpy hands back
  scalars there) and where numpy would promote.

Floating-point warnings are silenced by the caller (the executor, or ``invoke``) with
``np.errstate``: TensorFlow produces inf/nan quietly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dfg.executor import blas
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

from . import _einsum, _native
from ._select import where
from .registry import BF16_ATTRS, ArrayForm, KernelContext, ScalarForm, kernel, lookup

Array = np.ndarray

_BOOL = np.dtype(np.bool_)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_INT_KINDS = "iub"  # numpy kinds that take the integer implementation of an op


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _shape_error(shapes: Sequence[tuple[int, ...]], err: Exception) -> InvalidArgumentError:
    """Turn a numpy ValueError into TensorFlow's message (broadcast failures by far the most)."""
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return InvalidArgumentError("Incompatible shapes: " + " vs. ".join(_fmt(s) for s in shapes))
    return InvalidArgumentError(str(err))


def _as(r: Any, dtype: np.dtype) -> Array:
    """``r`` as an ndarray of ``dtype`` (numpy returns scalars for 0-d results)."""
    if r.__class__ is not np.ndarray or r.dtype != dtype:
        r = np.asarray(r, dtype=dtype)
    return r


def _check_int_divisor(x: Array, y: Array) -> None:
    # TensorFlow checks every divisor it uses; an empty broadcast result uses none.
    # (count_nonzero is several times cheaper than y.all() on small arrays.)
    if np.count_nonzero(y) != y.size and math.prod(np.broadcast_shapes(x.shape, y.shape)) > 0:
        raise InvalidArgumentError("Integer division by zero")


# --- binary elementwise functions ------------------------------------------------------------

def _true_div(x: Array, y: Array) -> Array:
    return np.true_divide(x, y)


def _trunc_div_int(x: Array, y: Array) -> Array:
    _check_int_divisor(x, y)
    # x - fmod(x, y) is an exact multiple of y between 0 and x, so floor division is exact and
    # equals C truncation; INT_MIN // -1 wraps to INT_MIN like TensorFlow.
    return np.floor_divide(x - np.fmod(x, y), y)


def _trunc_div_real(x: Array, y: Array) -> Array:
    return np.trunc(np.true_divide(x, y))


def _trunc_mod_int(x: Array, y: Array) -> Array:
    _check_int_divisor(x, y)
    return np.fmod(x, y)


def _floor_div_int(x: Array, y: Array) -> Array:
    _check_int_divisor(x, y)
    return np.floor_divide(x, y)


def _floor_div_real(x: Array, y: Array) -> Array:
    # TensorFlow computes floor(x / y); numpy's floor_divide rounds differently at times.
    return np.floor(np.true_divide(x, y))


def _floor_mod_int(x: Array, y: Array) -> Array:
    _check_int_divisor(x, y)
    if y.size == 1 and x.size >= 1024:
        # numpy divides by one integer with a precomputed reciprocal (libdivide), which its
        # remainder does not: x - (x // y) * y is the same floor modulus, about 4x faster
        q = np.floor_divide(x, y)
        np.multiply(q, y, out=q)
        return np.subtract(x, q, out=q)
    return np.remainder(x, y)


def _floor_mod_real(x: Array, y: Array) -> Array:
    # C fmod, then shifted by y when the signs differ; keeps fmod's signed zero as TF does.
    r = np.fmod(x, y)
    shift = (r != 0) & ((y < 0) != (r < 0))
    return where(shift, r + y, r)


def _mul(x: Array, y: Array) -> Array:
    if x.dtype.kind != "c":
        return np.multiply(x, y)
    # TensorFlow's complex product is the textbook one, each product and sum rounded in the
    # part's precision; numpy's SIMD loop fuses a product into the sum (FMA), which differs
    # in the last bit about half the time and compounds in a loop (z*z + c)
    xr, xi, yr, yi = x.real, x.imag, y.real, y.imag
    out = np.empty(np.broadcast_shapes(x.shape, y.shape), x.dtype)
    out.real = xr * yr - xi * yi
    out.imag = xr * yi + xi * yr
    both = np.isnan(out.real) & np.isnan(out.imag)
    if both.any():
        _mul_recover(out, both, *np.broadcast_arrays(xr, xi, yr, yi))
    return out


def _mul_recover(out: Array, where_: Array, a: Array, b: Array, c: Array, d: Array) -> None:
    """C99 Annex G's rule for a product that came out NaN + NaN i (C's complex multiply,
    which TensorFlow's std::complex uses): an infinite factor makes an infinite product."""
    a, b, c, d = (v[where_].copy() for v in (a, b, c, d))
    one, zero = a.dtype.type(1), a.dtype.type(0)

    def box(p: Array, q: Array, r: Array, s: Array, m: Array) -> None:
        # p, q infinite-ish factor -> (+-1 or +-0); NaNs of the other factor -> +-0
        p[m] = np.copysign(np.where(np.isinf(p[m]), one, zero), p[m])
        q[m] = np.copysign(np.where(np.isinf(q[m]), one, zero), q[m])
        r[m] = np.where(np.isnan(r[m]), np.copysign(zero, r[m]), r[m])
        s[m] = np.where(np.isnan(s[m]), np.copysign(zero, s[m]), s[m])

    ac, bd, ad, bc = a * c, b * d, a * d, b * c
    inf_z = np.isinf(a) | np.isinf(b)
    box(a, b, c, d, inf_z)
    inf_w = np.isinf(c) | np.isinf(d)
    box(c, d, a, b, inf_w)
    recalc = inf_z | inf_w
    over = ~recalc & (np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc))
    for v in (a, b, c, d):
        v[over] = np.where(np.isnan(v[over]), np.copysign(zero, v[over]), v[over])
    recalc |= over
    inf = a.dtype.type(np.inf)
    re = np.where(recalc, inf * (a * c - b * d), out.real[where_])
    im = np.where(recalc, inf * (a * d + b * c), out.imag[where_])
    out.real[where_] = re
    out.imag[where_] = im


def _maximum(x: Array, y: Array) -> Array:
    # TensorFlow's max (NaN propagated) is x < y ? y : x: of two equal values (-0.0 and
    # 0.0) it gives x; numpy's gives its second argument (checked in tests/test_fast_paths.py)
    return np.maximum(y, x)


def _minimum(x: Array, y: Array) -> Array:
    return np.minimum(y, x)


def _pow_int(x: Array, y: Array) -> Array:
    if np.count_nonzero(y < 0):
        raise InvalidArgumentError("Integers to negative integer powers are not allowed")
    return np.power(x, y)


def _squared_difference(x: Array, y: Array) -> Array:
    d = np.subtract(x, y)
    return d * np.conj(d) if d.dtype.kind == "c" else d * d


def _div_no_nan(x: Array, y: Array) -> Array:
    return where(y == 0, x.dtype.type(0), np.true_divide(x, y))


def _mul_no_nan(x: Array, y: Array) -> Array:
    return where(y == 0, x.dtype.type(0), np.multiply(x, y))


def _xdivy(x: Array, y: Array) -> Array:
    return where(x == 0, x.dtype.type(0), np.true_divide(x, y))


def _xlogy(x: Array, y: Array) -> Array:
    return where(x == 0, x.dtype.type(0), x * np.log(y))


def _xlog1py(x: Array, y: Array) -> Array:
    return where(x == 0, x.dtype.type(0), x * np.log1p(y))


def _clamped_shift(y: Array, x: Array) -> Array:
    # TensorFlow clamps the shift amount to [0, bits - 1] instead of leaving it undefined.
    return np.clip(y, 0, x.dtype.itemsize * 8 - 1).astype(x.dtype, copy=False)


def _left_shift(x: Array, y: Array) -> Array:
    return np.left_shift(x, _clamped_shift(y, x))


def _right_shift(x: Array, y: Array) -> Array:
    return np.right_shift(x, _clamped_shift(y, x))


# op -> (function for floats/complex/strings, function for ints/bools)
_BINARY: dict[str, tuple[Callable[[Array, Array], Any], Callable[[Array, Array], Any]]] = {
    "Add": (np.add, np.add),
    "AddV2": (np.add, np.add),
    "Sub": (np.subtract, np.subtract),
    "Mul": (_mul, np.multiply),
    "Div": (_true_div, _trunc_div_int),
    "RealDiv": (_true_div, _trunc_div_int),
    "TruncateDiv": (_trunc_div_real, _trunc_div_int),
    "FloorDiv": (_floor_div_real, _floor_div_int),
    "FloorMod": (_floor_mod_real, _floor_mod_int),
    "TruncateMod": (np.fmod, _trunc_mod_int),
    "Mod": (np.fmod, _trunc_mod_int),
    "Pow": (np.power, _pow_int),
    "Maximum": (_maximum, np.maximum),
    "Minimum": (_minimum, np.minimum),
    "SquaredDifference": (_squared_difference, _squared_difference),
    "DivNoNan": (_div_no_nan, _div_no_nan),
    "MulNoNan": (_mul_no_nan, _mul_no_nan),
    "Xdivy": (_xdivy, _xdivy),
    "Xlogy": (_xlogy, _xlogy),
    "Xlog1py": (_xlog1py, _xlog1py),
    "Atan2": (np.arctan2, np.arctan2),
    "BitwiseAnd": (np.bitwise_and, np.bitwise_and),
    "BitwiseOr": (np.bitwise_or, np.bitwise_or),
    "BitwiseXor": (np.bitwise_xor, np.bitwise_xor),
    "LeftShift": (_left_shift, _left_shift),
    "RightShift": (_right_shift, _right_shift),
}

# op -> function; the result is bool.
_COMPARE: dict[str, Callable[[Array, Array], Any]] = {
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}


def _split_f32(op: str, fn: Callable[[Array, Array], Any]) -> Callable[[Array, Array], Any]:
    """``fn`` (numpy's sum, difference, product or quotient), but on float32 operands the
    compiled chain of this one op (``_native.chain_on``) where it is faster: from
    CHAIN_SPLIT_WORK elements, split on the native pool (a sweep bound by memory is twice
    as fast on two cores: a 1024x1024 product by a scalar 294 -> 150 us, a sum 458 -> 222),
    and from _native.BROADCAST_MIN with an operand broadcast along rows. Each element is the same
    one IEEE single operation, so the bits are numpy's."""
    code = _native.binary_code(op)
    big = _native.CHAIN_SPLIT_WORK

    def run(x: Array, y: Array) -> Any:
        if x.dtype is _F32 and y.dtype is _F32:
            n, m = x.size, y.size
            if n >= big or m >= big or (n != m and min(n, m) > 1
                                          and max(n, m) >= _native.BROADCAST_MIN):
                r = _native.chain_on(code, (x, y))
                if r is not None:
                    return r
        return fn(x, y)

    return run


for _op in ("Add", "AddV2", "Sub", "Mul", "Div", "RealDiv"):
    _BINARY[_op] = (_split_f32(_op, _BINARY[_op][0]), _BINARY[_op][1])


def _binary_kernel(fns: tuple[Callable, Callable]) -> Callable[..., Array]:
    real_fn, int_fn = fns

    def run(ctx: KernelContext, x: Array, y: Array) -> Array:
        fn = int_fn if x.dtype.kind in _INT_KINDS else real_fn
        try:
            r = fn(x, y)
        except ValueError as e:
            raise _shape_error((x.shape, y.shape), e) from None
        return _as(r, x.dtype)

    return run


def _compare_kernel(fn: Callable) -> Callable[..., Array]:
    def run(ctx: KernelContext, x: Array, y: Array) -> Array:
        try:
            r = fn(x, y)
        except ValueError as e:
            raise _shape_error((x.shape, y.shape), e) from None
        return _as(r, _BOOL)

    return run


# Scalar forms for compiled programs (registry.ScalarForm): on NumPy scalars of one of the
# listed dtypes these operators compute what the kernels compute on 0-d arrays (same dtype,
# same rounding, integer wrap-around), at a tenth of the cost. Not bfloat16 (held as float32,
# rounded by the kernel call only), complex (numpy's scalar product is not TF's) nor strings;
# division and powers are absent: their integer semantics differ from TensorFlow's (the
# integer floor modulus is numpy's %).
_REAL = frozenset({D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE, D.DT_INT8, D.DT_INT16, D.DT_INT32,
                   D.DT_INT64, D.DT_UINT8, D.DT_UINT16, D.DT_UINT32, D.DT_UINT64})
_SIGNED = _REAL - {D.DT_UINT8, D.DT_UINT16, D.DT_UINT32, D.DT_UINT64}
_BOOLS = frozenset({D.DT_BOOL})


def _cast_forms() -> dict[tuple[int, int], str]:
    """Cast's scalar forms by (source, destination) dtype, cheaper than NumPy's scalar astype
    (~1.4 us): a value that a Python float holds exactly (a float, an integer of up to 32
    bits, a bool) becomes the destination float by adding it to that type's -0.0 (NumPy
    converts the Python float rounding once, as the kernel's cast does, and -0.0 + v is v,
    signed zeros included); a cast to bool is ``!= 0`` (NaN is true), as the kernel's."""
    small_ints = {D.DT_INT8, D.DT_INT16, D.DT_INT32, D.DT_UINT8, D.DT_UINT16, D.DT_UINT32,
                  D.DT_BOOL}
    floats = {D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE}
    out: dict[tuple[int, int], str] = {}
    for src in _REAL | _BOOLS:
        for dst in _REAL | _BOOLS:
            if src == dst:
                out[(src, dst)] = "{0}"   # the kernel returns its input
            elif dst == D.DT_BOOL:
                out[(src, dst)] = "({0} != 0)"
            elif dst in floats and (src in floats or src in small_ints):
                out[(src, dst)] = "({nz_out} + float({0}))"
    return out


SCALAR_FORMS = {
    "Add": ScalarForm("{0} + {1}", _REAL), "AddV2": ScalarForm("{0} + {1}", _REAL),
    "Sub": ScalarForm("{0} - {1}", _REAL), "Mul": ScalarForm("{0} * {1}", _REAL),
    "Less": ScalarForm("{0} < {1}", _REAL), "LessEqual": ScalarForm("{0} <= {1}", _REAL),
    "Greater": ScalarForm("{0} > {1}", _REAL),
    "GreaterEqual": ScalarForm("{0} >= {1}", _REAL),
    "Equal": ScalarForm("{0} == {1}", _REAL | _BOOLS),
    "NotEqual": ScalarForm("{0} != {1}", _REAL | _BOOLS),
    "LogicalAnd": ScalarForm("{0} & {1}", _BOOLS), "LogicalOr": ScalarForm("{0} | {1}", _BOOLS),
    "LogicalNot": ScalarForm("~{0}", _BOOLS),
    # numpy's integer % is the kernel's np.remainder (the floor modulus); a zero divisor
    # takes the kernel call, which raises the node's error
    "FloorMod": ScalarForm("({0} % {1} if {1} else {kernel})", D.INTEGER),
    "Neg": ScalarForm("-{0}", _SIGNED),
    "Cast": ScalarForm("{0}.astype({out})", _REAL | _BOOLS, _REAL | _BOOLS,
                       holds=lambda attrs: not attrs.get("Truncate") and not (
                           attrs.get("DstT") == _F16 and attrs.get("SrcT") not in (_F32, _F16)),
                       by_types=_cast_forms()),
}
# Array forms for compiled programs (registry.ArrayForm): on float arrays these kernels are
# their float function and the result's dtype (a 0-d result comes back a NumPy scalar, which
# the form's caller sends to the kernel); the RNN cells' elementwise work
_FLOATS = frozenset({D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE})
_ARRAY_BINARY = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum",
                 "SquaredDifference")
_ARRAY_UNARY = ("Neg", "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Tanh", "Sigmoid")


def _float_form(op: str, table: dict) -> ArrayForm | None:
    if op not in _ARRAY_BINARY + _ARRAY_UNARY:
        return None
    real_fn = table[op][0]
    return ArrayForm(lambda attrs: real_fn, _FLOATS)


def _register(op: str, fn: Callable[..., Array], array: ArrayForm | None = None) -> None:
    # Named after the op so profiles and tracebacks tell the generated kernels apart.
    fn.__name__ = fn.__qualname__ = op
    kernel(op, scalar=SCALAR_FORMS.get(op), array=array)(fn)


for _op, _fns in _BINARY.items():
    _register(_op, _binary_kernel(_fns), _float_form(_op, _BINARY))
for _op, _fn in _COMPARE.items():
    _register(_op, _compare_kernel(_fn))


def _equality_kernel(fn: Callable, incompatible_result: bool) -> Callable[..., Array]:
    def run(ctx: KernelContext, x: Array, y: Array) -> Array:
        try:
            return _as(fn(x, y), _BOOL)
        except ValueError as e:
            # With incompatible_shape_error=false TensorFlow answers one scalar for the whole
            # comparison instead of failing.
            if not ctx.attrs.get("incompatible_shape_error", True):
                try:
                    np.broadcast_shapes(x.shape, y.shape)
                except ValueError:
                    return np.array(incompatible_result)
            raise _shape_error((x.shape, y.shape), e) from None

    return run


_register("Equal", _equality_kernel(np.equal, False))
_register("NotEqual", _equality_kernel(np.not_equal, True))


@kernel("ApproximateEqual")
def approximate_equal(ctx: KernelContext, x: Array, y: Array) -> Array:
    if x.shape != y.shape:
        raise InvalidArgumentError(
            f"x and y must be of the same shape. x shape: {_fmt(x.shape)}. "
            f"y shape: {_fmt(y.shape)}")
    # The tolerance is converted to T first (so it is 0 for integer types), as TensorFlow does.
    tol = x.dtype.type(ctx.attrs.get("tolerance", 1e-5))
    return _as(np.abs(np.subtract(x, y)) < tol, _BOOL)


@kernel("ClipByValue")
def clip_by_value(ctx: KernelContext, t: Array, lo: Array, hi: Array) -> Array:
    for name, v in (("clip_value_min", lo), ("clip_value_max", hi)):
        if v.ndim != 0 and v.shape != t.shape:
            raise InvalidArgumentError(
                f"{name} must be either a scalar or have the same shape as the input t. "
                f"t.shape = {_fmt(t.shape)}, {name}.shape = {_fmt(v.shape)}")
    # TensorFlow's order: min with the upper bound first, then max with the lower bound.
    return _as(np.maximum(np.minimum(t, hi), lo), t.dtype)


def _select(cond: Array, t: Array, e: Array) -> Array:
    """Select (v1): the kernel, and its array form (an error raised: the kernel call says
    it, naming the node)."""
    if t.shape != e.shape:
        raise InvalidArgumentError(
            "'then' and 'else' must have the same size.  but received: "
            f"{_fmt(t.shape)} vs. {_fmt(e.shape)}")
    if cond.ndim == 0:
        return t if cond else e
    if cond.ndim == 1 and t.ndim != 1:
        # TF v1 Select: a vector condition picks whole rows along the first dimension.
        if t.ndim == 0:
            raise InvalidArgumentError(
                f"'then' must be at least a vector, but saw shape: {_fmt(t.shape)}")
        if t.shape[0] != cond.shape[0]:
            raise InvalidArgumentError(
                "Number of batches of 'then' must match size of 'cond', but saw: "
                f"{t.shape[0]} vs. {cond.shape[0]}")
        cond = cond.reshape(cond.shape + (1,) * (t.ndim - 1))
    elif cond.shape != t.shape:
        raise InvalidArgumentError(
            "'condition' and 'then' must have the same size.  but received: "
            f"{_fmt(cond.shape)} vs. {_fmt(t.shape)}")
    return _as(where(cond, t, e), t.dtype)


def _select_v2(cond: Array, t: Array, e: Array) -> Array:
    """SelectV2: the kernel, and its array form (a recurrent layer's mask picks each step's
    state with three of them an iteration)."""
    try:
        r = where(cond, t, e)
    except ValueError:
        raise InvalidArgumentError(
            f"condition {_fmt(cond.shape)}, then {_fmt(t.shape)}, and else {_fmt(e.shape)} "
            "must be broadcastable") from None
    return _as(r, t.dtype)


# what the Selects' array forms take: the condition (bool) and values of these types (not
# bfloat16: ArrayForm; not strings: object arrays stay with the kernel)
_SELECT_TYPES = _REAL | _BOOLS | frozenset({D.DT_COMPLEX64, D.DT_COMPLEX128})


@kernel("Select", array=ArrayForm(lambda attrs: _select, _SELECT_TYPES))
def select(ctx: KernelContext, cond: Array, t: Array, e: Array) -> Array:
    return _select(cond, t, e)


@kernel("SelectV2", array=ArrayForm(lambda attrs: _select_v2, _SELECT_TYPES))
def select_v2(ctx: KernelContext, cond: Array, t: Array, e: Array) -> Array:
    return _select_v2(cond, t, e)


# --- unary elementwise functions -------------------------------------------------------------

def _rsqrt(x: Array) -> Array:
    return np.reciprocal(np.sqrt(x))


def _tanh(x: Array) -> Array:
    if (r := native_activation(x, _native.TANH)) is not None:
        return r
    return np.tanh(x)


def _reciprocal_int(x: Array) -> Array:
    if np.count_nonzero(x) != x.size:
        raise InvalidArgumentError("Integer division by zero")
    return np.reciprocal(x)  # C truncation: 1/x is 0 unless |x| == 1


def _identity(x: Array) -> Array:
    return x


def native_activation(x: Array, kind: int, out: Array | None = None) -> Array | None:
    """Sigmoid or tanh of a float32 array (0-d too) in one compiled pass
    (executor/native/elementwise.c: in float32 arithmetic, within 2 ulps), or None when the
    compiled kernels are not built or refused. The kernels, their array forms and the fused
    ops' activations (``out``: into that float32 array of x's shape, x itself allowed) all
    come here, so every path gives the same bits."""
    if x.dtype != _F32 or not _native.enabled():
        return None
    if out is not None and not (out.__class__ is np.ndarray and out.dtype == _F32
                                and out.shape == x.shape
                                and (f := out.flags).c_contiguous and f.writeable):
        return None     # (a ufunc's result may be in Fortran order) numpy writes it
    return _native.activation_f32(x, kind, out)


def _sigmoid(x: Array) -> Array:
    if (r := native_activation(x, _native.SIGMOID)) is not None:
        return r
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    if x.dtype.itemsize >= 4:
        # 1 / (1 + e^-x) in place, four passes: an RNN cell calls this on small tensors,
        # where each numpy call is microseconds (2.4-3.5x faster than the select below, from
        # 10 to 100k floats). e^-x overflows only where the answer is below the smallest
        # normal float (x < -87 in float32), which comes out 0 (TensorFlow's CPU threads
        # flush such subnormals to zero too); kernels run with floating-point warnings off.
        e = np.negative(x, out=np.empty_like(x))
        np.exp(e, out=e)
        np.add(e, 1, out=e)
        return np.reciprocal(e, out=e)
    # half precision: e^-x would overflow from x < -11, where the answer is still a normal
    # float16. e^-|x| never overflows; the sign picks 1/(1+e) or e/(1+e).
    e = np.abs(x, out=np.empty_like(x))
    np.negative(e, out=e)
    np.exp(e, out=e)
    num = where(x >= 0, e.dtype.type(1), e)
    d = np.add(e, 1, out=e)
    return np.divide(num, d, out=d)


_SQRT_PI = math.sqrt(math.pi)
_ERF_SPLIT = 2.0  # below: power series for erf; above: continued fraction for erfc
_ERF_SERIES_TERMS = 32
_ERFC_FRACTION_TERMS = 40


def _erf_series(a: Array) -> Array:
    """erf(a) for 0 <= a < 2: 2/sqrt(pi) e^(-a^2) sum_k (2a^2)^k a / (1*3*...*(2k+1)).

    Every term is positive, so nothing cancels; 32 terms reach double precision below 2.
    """
    a2 = a * a
    term = a.copy()
    total = a.copy()
    for k in range(1, _ERF_SERIES_TERMS):
        term *= (2.0 * a2) / (2 * k + 1)
        total += term
    return (2.0 / _SQRT_PI) * np.exp(-a2) * total


def _erfc_fraction(a: Array) -> Array:
    """erfc(a) for a >= 2 from the continued fraction e^(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a +
    (3/2)/(a + ...)))), evaluated bottom-up with a fixed depth (relative error ~1e-14)."""
    f = a.copy()
    for k in range(_ERFC_FRACTION_TERMS, 0, -1):
        f = a + (0.5 * k) / f
    return np.exp(-a * a) / (_SQRT_PI * f)


def _erf_parts(x: Array) -> tuple[Array, Array, Array, Array]:
    """(|x| in float64, mask of |x| < split, erf on that part, erfc on the rest)."""
    a = np.abs(np.asarray(x, dtype=_F64))
    small = a < _ERF_SPLIT  # NaN goes to the fraction side and stays NaN
    return a, small, _erf_series(a[small]), _erfc_fraction(a[~small])


def _poly(coeffs: Sequence[Any], t: Array) -> Array:
    """sum_k coeffs[k] t^k by Horner's rule, in one buffer of ``t``'s dtype."""
    acc = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= t
        acc += c
    return acc


# Single precision (float16/32, bfloat16) runs in float32: erfc(a) = t exp(-a^2 + P(t)),
# t = 1 / (1 + a/2), a >= 0, a Chebyshev fit with fractional error below 1.2e-7 everywhere
# (Numerical Recipes' erfcc). exp(-a^2) is taken as exp(-z^2) exp((z - a)(z + a)) with z = a
# cut to 12 significant bits, so z^2 is exact in float32 (as fdlibm's erfcf does): measured
# relative error at most 5.2e-7 for every float32 in [-12, 12], against 1.2e-7 of the
# double-precision series, in a pass 13x cheaper (0.86 against 11.8 ms on 131k elements).
_ERFC_CHEB = tuple(np.float32(c) for c in (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
    1.48851587, -0.82215223, 0.17087277))
_ERF_TAYLOR_SPLIT = 0.5     # below: erf's Taylor series (1 - erfc would lose its digits)
# erf(a) = 2/sqrt(pi) sum_k (-1)^k a^(2k+1) / (k! (2k+1)); 8 terms: below 1e-12 for a < 0.5
_ERF_TAYLOR = tuple(np.float32(2 / _SQRT_PI * (-1) ** k / (math.factorial(k) * (2 * k + 1)))
                    for k in range(8))
_HIGH_BITS = np.uint32(0xFFFFF000)


def _erfc_single(a: Array) -> Array:
    """erfc of float32 ``a >= 0`` (NaN stays NaN), computed in place of fresh buffers."""
    t = a * np.float32(0.5)
    t += 1
    np.reciprocal(t, out=t)
    p = _poly(_ERFC_CHEB, t)
    z = (a.view(np.uint32) & _HIGH_BITS).view(np.float32)
    p += (z - a) * (z + a)
    np.exp(p, out=p)
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    p *= z
    p *= t
    return p


def _erf_taylor(a: Array) -> Array:
    s = _poly(_ERF_TAYLOR, a * a)
    s *= a
    return s


def _single(x: Array) -> bool:
    """Whether ``x`` is a float of at most single precision (float16/32, bfloat16)."""
    return x.dtype.kind == "f" and x.dtype.itemsize <= 4 or x.dtype.name == "bfloat16"


def _abs32(x: Array) -> Array:
    """|x| in float32, at most 11 (erfc(11) is 0 in float32; inf - inf would be NaN)."""
    a = np.abs(x.astype(_F32, copy=False))
    return np.minimum(a, np.float32(11), out=a)     # NaN stays NaN


def _native_erf(x: Array, complement: bool) -> Array | None:
    """erf/erfc of single-precision ``x`` in one compiled pass (executor/native/
    elementwise.c), or None when the kernels are not built, refused, or not worth the call."""
    if x.size < _native.MIN_ELEMENTS or not _native.enabled():
        return None
    return _native.erf_f32(x, complement).astype(x.dtype, copy=False)


def _erf(x: Array) -> Array:
    if _single(x):
        if (r := _native_erf(x, False)) is not None:
            return r
        a = _abs32(x)
        r = _erfc_single(a)
        np.subtract(1, r, out=r)
        small = a < _ERF_TAYLOR_SPLIT
        if small.any():     # the series on every element: cheaper than gathering the small
            r = where(small, _erf_taylor(a), r)
        return np.copysign(r, x.astype(_F32, copy=False)).astype(x.dtype, copy=False)
    a, small, erf_small, erfc_big = _erf_parts(x)
    r = np.empty_like(a)
    r[small] = erf_small
    r[~small] = 1.0 - erfc_big
    return np.copysign(r, x).astype(x.dtype, copy=False)


def _erfc(x: Array) -> Array:
    if _single(x):
        if (r := _native_erf(x, True)) is not None:
            return r
        r = _erfc_single(_abs32(x))
        return where(np.signbit(x), 2 - r, r).astype(x.dtype, copy=False)
    a, small, erf_small, erfc_big = _erf_parts(x)
    r = np.empty_like(a)
    r[small] = 1.0 - erf_small
    r[~small] = erfc_big
    return where(np.signbit(x), 2.0 - r, r).astype(x.dtype, copy=False)


# Stirling series for lgamma: B_2k / (2k (2k - 1)), k = 1..7.
_LGAMMA_SERIES = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
# Asymptotic series for digamma: B_2k / (2k), k = 1..7 (subtracted, in powers of 1/z^2).
_DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
_SHIFT = 10  # arguments below this are shifted up by the recurrence before the series


def _lgamma_pos(z: Array) -> Array:
    """lgamma for z > 0: recurrence up to z >= 10, then Stirling's series (error < 1e-15)."""
    low = z < _SHIFT
    prod = np.ones_like(z)
    for k in range(_SHIFT):
        prod = where(low, prod * (z + k), prod)
    w = where(low, z + _SHIFT, z)
    inv = 1.0 / w
    series = inv * _poly(_LGAMMA_SERIES, inv * inv)
    return (w - 0.5) * np.log(w) - w + 0.5 * math.log(2 * math.pi) + series - np.log(prod)


def _nearest_int_offset(x: Array) -> Array:
    # x - round(x) is exact, so sin/cos/tan(pi * offset) stay accurate next to the poles.
    return x - np.round(x)


def _lgamma(x: Array) -> Array:
    v = np.asarray(x, dtype=_F64)
    pole = (v <= 0) & (v == np.floor(v))
    neg = v < 0
    r = _lgamma_pos(where(neg, 1.0 - v, v))
    # Reflection: lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x) for x < 0.
    sin_pi = np.abs(np.sin(np.pi * _nearest_int_offset(v)))
    r = where(neg, np.log(np.pi / sin_pi) - r, r)
    r = where(pole | np.isinf(v), np.inf, r)
    r = where((v == 1) | (v == 2), 0.0, r)  # exact zeros, which the series misses by ~1e-15
    return r.astype(x.dtype, copy=False)


def _digamma_pos(z: Array) -> Array:
    low = z < _SHIFT
    acc = np.zeros_like(z)
    for k in range(_SHIFT):
        acc = where(low, acc + 1.0 / (z + k), acc)
    w = where(low, z + _SHIFT, z)
    inv2 = 1.0 / (w * w)
    return np.log(w) - 0.5 / w - inv2 * _poly(_DIGAMMA_SERIES, inv2) - acc


def _digamma(x: Array) -> Array:
    v = np.asarray(x, dtype=_F64)
    pole = (v <= 0) & (v == np.floor(v))
    neg = v < 0
    r = _digamma_pos(where(neg, 1.0 - v, v))
    # Reflection: digamma(x) = digamma(1 - x) - pi / tan(pi x) for x < 0.
    r = where(neg, r - np.pi / np.tan(np.pi * _nearest_int_offset(v)), r)
    r = where(pole, np.nan, r)
    r = where(v == np.inf, np.inf, r)
    return r.astype(x.dtype, copy=False)


# op -> (function for floats/complex, function for ints/bools); the result has the input dtype.
_UNARY: dict[str, tuple[Callable[[Array], Any], Callable[[Array], Any]]] = {
    "Abs": (np.abs, np.abs),
    "Neg": (np.negative, np.negative),
    "Exp": (np.exp, np.exp),
    "Expm1": (np.expm1, np.expm1),
    "Log": (np.log, np.log),
    "Log1p": (np.log1p, np.log1p),
    "Sqrt": (np.sqrt, np.sqrt),
    "Rsqrt": (_rsqrt, _rsqrt),
    "Square": (np.square, np.square),
    "Reciprocal": (np.reciprocal, _reciprocal_int),
    "Inv": (np.reciprocal, _reciprocal_int),
    "Sign": (np.sign, np.sign),
    "Floor": (np.floor, _identity),
    "Ceil": (np.ceil, _identity),
    "Round": (np.rint, _identity),  # rint rounds halves to even, as TensorFlow's Round does
    "Rint": (np.rint, _identity),
    "Sin": (np.sin, np.sin),
    "Cos": (np.cos, np.cos),
    "Tan": (np.tan, np.tan),
    "Asin": (np.arcsin, np.arcsin),
    "Acos": (np.arccos, np.arccos),
    "Atan": (np.arctan, np.arctan),
    "Sinh": (np.sinh, np.sinh),
    "Cosh": (np.cosh, np.cosh),
    "Tanh": (_tanh, _tanh),
    "Asinh": (np.arcsinh, np.arcsinh),
    "Acosh": (np.arccosh, np.arccosh),
    "Atanh": (np.arctanh, np.arctanh),
    "Sigmoid": (_sigmoid, _sigmoid),
    "Erf": (_erf, _erf),
    "Erfc": (_erfc, _erfc),
    "Lgamma": (_lgamma, _lgamma),
    "Digamma": (_digamma, _digamma),
    "Invert": (np.invert, np.invert),
    "Conj": (np.conj, _identity),
}

# op -> function; the result is bool.
_PREDICATE: dict[str, Callable[[Array], Any]] = {
    "IsNan": np.isnan,
    "IsInf": np.isinf,
    "IsFinite": np.isfinite,
    "LogicalNot": np.logical_not,
}

# op -> function; complex in, real (attr Tout) out.
_COMPLEX_PART: dict[str, Callable[[Array], Any]] = {
    "Real": np.real,
    "Imag": np.imag,
    "ComplexAbs": np.abs,
}


def _unary_kernel(fns: tuple[Callable, Callable]) -> Callable[..., Array]:
    real_fn, int_fn = fns

    def run(ctx: KernelContext, x: Array) -> Array:
        fn = int_fn if x.dtype.kind in _INT_KINDS else real_fn
        r = fn(x)
        return _as(r, x.dtype)

    return run


def _predicate_kernel(fn: Callable) -> Callable[..., Array]:
    def run(ctx: KernelContext, x: Array) -> Array:
        return _as(fn(x), _BOOL)

    return run


def _complex_part_kernel(fn: Callable) -> Callable[..., Array]:
    def run(ctx: KernelContext, x: Array) -> Array:
        out = ctx.attrs.get("Tout")
        return _as(fn(x), np.dtype(out) if out is not None else x.real.dtype)

    return run


for _op, _ufns in _UNARY.items():
    _register(_op, _unary_kernel(_ufns), _float_form(_op, _UNARY))
for _op, _fn in _PREDICATE.items():
    _register(_op, _predicate_kernel(_fn))
for _op, _fn in _COMPLEX_PART.items():
    _register(_op, _complex_part_kernel(_fn))


# --- AddN -------------------------------------------------------------------------------------

@kernel("AddN", "AccumulateNV2")
def add_n(ctx: KernelContext, *xs: Array) -> Array:
    if not xs:
        raise InvalidArgumentError("AddN needs at least one input, found none")
    if not isinstance(xs[0], np.ndarray):  # variant values: their family's handler (OpSpec)
        return lookup("AddN").on_variant(ctx, *xs)
    first = xs[0]
    for i, x in enumerate(xs[1:], 1):
        if x.shape != first.shape:
            raise InvalidArgumentError(
                f"inputs[0] and inputs[{i}] must have the same shape: "
                f"{_fmt(first.shape)} vs. {_fmt(x.shape)}")
    if len(xs) == 1:
        return first
    # Left to right, rounding after each addition, as TensorFlow's chained adds do.
    out = np.add(first, xs[1], out=np.empty_like(first))
    for x in xs[2:]:
        np.add(out, x, out=out)
    return out


# --- Cast -------------------------------------------------------------------------------------

_MANTISSA_BITS = {_F16: 10, _F32: 23, _F64: 52}
_UINT_OF_SIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _dtype_name(dt: Any) -> str:
    from dfg.graphdef import dtypes

    try:
        return dtypes.name(dtypes.from_numpy(dt))
    except Exception:
        return str(dt)


def _truncate_mantissa(x: Array, dst: np.dtype) -> Array:
    """Zero the mantissa bits ``dst`` cannot hold, so the cast truncates instead of rounding
    (TensorFlow's Cast with Truncate=true)."""
    drop = _MANTISSA_BITS[x.dtype] - _MANTISSA_BITS[dst]
    utype = _UINT_OF_SIZE[x.dtype.itemsize]
    mask = utype(~((1 << drop) - 1) & ((1 << (8 * x.dtype.itemsize)) - 1))
    return (np.ascontiguousarray(x).view(utype) & mask).view(x.dtype)


@kernel("Cast", scalar=SCALAR_FORMS["Cast"])
def cast(ctx: KernelContext, x: Array) -> Array:
    dst = ctx.attrs.get("DstT")
    if not isinstance(dst, np.dtype):
        raise UnimplementedError(
            f"Cast {_dtype_name(x.dtype)} to {dst} is not supported: no numpy dtype")
    src = x.dtype
    if ctx.attrs.get("Truncate") and src.kind == "f" \
            and "DstT" in ctx.attrs.get(BF16_ATTRS, ()):
        # to bfloat16 (held as float32): keep the high 16 bits, NaN stays NaN; the rounding
        # every bfloat16 output gets after the kernel leaves these values as they are
        x32 = np.ascontiguousarray(x, dtype=_F32)
        cut = (x32.view(np.uint32) & np.uint32(0xFFFF0000)).view(_F32)
        return np.where(np.isnan(x32), x32, cut)
    if src == dst:
        return x
    if src.kind in "OSU" or dst.kind in "OSU":
        raise UnimplementedError(
            f"Cast {_dtype_name(src)} to {_dtype_name(dst)} is not supported")
    if dst.kind == "b":
        return _as(x != 0, _BOOL)  # NaN is != 0, so it casts to true
    if src.kind == "c" and dst.kind != "c":
        x = x.real  # TensorFlow (like numpy) drops the imaginary part
        src = x.dtype
    if (ctx.attrs.get("Truncate") and src in _MANTISSA_BITS and dst in _MANTISSA_BITS
            and _MANTISSA_BITS[dst] < _MANTISSA_BITS[src]):
        x = _truncate_mantissa(x, dst)
    if dst == _F16 and src != _F32:
        x = x.astype(_F32)  # TensorFlow converts to half through float (double rounding)
    # Float -> int truncates toward zero; NaN and out-of-range values give what the x86
    # conversion gives (INT_MIN for int32/int64), the same as TensorFlow's CPU kernel.
    return _as(x.astype(dst), dst)


# --- BiasAdd ----------------------------------------------------------------------------------

def _bias_add(value: Array, bias: Array, channels_first: bool) -> Array:
    if value.ndim < 2:
        raise InvalidArgumentError(f"Input tensor must be at least 2D: {_fmt(value.shape)}")
    if bias.ndim != 1:
        raise InvalidArgumentError(f"Biases must be 1D: {_fmt(bias.shape)}")
    axis = 1 if channels_first else value.ndim - 1
    if value.shape[axis] != bias.shape[0]:
        raise InvalidArgumentError(
            "Must provide as many biases as the channel dimension of the input tensor: "
            f"{_fmt(bias.shape)} vs. {_fmt(value.shape)}")
    if axis != value.ndim - 1:
        bias = bias.reshape(bias.shape + (1,) * (value.ndim - 2))
    elif value.dtype is _F32 and bias.dtype is _F32 and value.size >= _native.BROADCAST_MIN:
        # a row per pixel: the compiled chain (a U-Net's (4, 64, 64, 16) 132 -> 23 us)
        r = _native.chain_on(_ADD_CODE, (value, bias))
        if r is not None:
            return r
    return _as(np.add(value, bias), value.dtype)


_ADD_CODE = _native.binary_code("BiasAdd")


def _bias_add_last(value: Array, bias: Array) -> Array:
    return _bias_add(value, bias, False)


def _bias_add_first(value: Array, bias: Array) -> Array:
    return _bias_add(value, bias, True)


@kernel("BiasAdd", array=ArrayForm(
    lambda attrs: _bias_add_first if attrs.get("data_format", "NHWC") == "NCHW"
    else _bias_add_last, _FLOATS))
def bias_add(ctx: KernelContext, value: Array, bias: Array) -> Array:
    return _bias_add(value, bias, ctx.attrs.get("data_format", "NHWC") == "NCHW")


@kernel("BiasAddV1")
def bias_add_v1(ctx: KernelContext, value: Array, bias: Array) -> Array:
    return _bias_add(value, bias, False)


# --- matrix products --------------------------------------------------------------------------

def _matmul(a: Array, b: Array, out: np.dtype) -> Array:
    if a.dtype != out:
        a = a.astype(out)
    if b.dtype != out:
        b = b.astype(out)
    if out == _F16:
        # numpy's half matmul has no BLAS path and is very slow; accumulate in float instead.
        return blas.matmul(a.astype(_F32), b.astype(_F32)).astype(_F16)
    return _as(blas.matmul(a, b), out)


def _matmul_2d(a: Array, b: Array, ta: bool, tb: bool) -> Array:
    """MatMul's product of two matrices whose shapes fit: float32 rows by a constant matrix
    through the compiled kernels where they are faster (a few rows:
    ``_native.small_matmul_f32``; more: ``_native.matmul_plan``), else BLAS."""
    if not ta and a.dtype is _F32:
        out = _native.small_matmul_f32(a, b, tb)
        if out is not None:
            return out
        prep = _native.matmul_plan(a, b, tb)
        if prep is not None:
            return _native.matmul_f32(a, prep)
    return _matmul(a.T if ta else a, b.T if tb else b, a.dtype)


def _matmul_form(attrs: Any) -> Callable[[Array, Array], Array | None]:
    """MatMul of two float32/float64 matrices, as the kernel computes it (None for other
    ranks: the kernel says what is wrong)."""
    ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))

    def mm(a: Array, b: Array) -> Array | None:
        if a.ndim != 2 or b.ndim != 2:
            return None
        return _matmul_2d(a, b, ta, tb)

    return mm


@kernel("MatMul", heavy=True, blas=True, array=ArrayForm(
    _matmul_form, frozenset({D.DT_FLOAT, D.DT_DOUBLE})))
def matmul(ctx: KernelContext, a: Array, b: Array) -> Array:
    for i, m in enumerate((a, b)):
        if m.ndim != 2:
            raise InvalidArgumentError(
                f"In[{i}] is not a matrix. Instead it has shape {_fmt(m.shape)}")
    ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
    if a.shape[0 if ta else 1] != b.shape[1 if tb else 0]:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {_fmt(a.shape)}, In[1]: {_fmt(b.shape)}")
    return _matmul_2d(a, b, ta, tb)


def _adjoint(m: Array) -> Array:
    t = np.swapaxes(m, -1, -2)
    return np.conj(t) if t.dtype.kind == "c" else t


def _batch_matmul(ctx: KernelContext, x: Array, y: Array, broadcast: bool,
                  out: np.dtype) -> Array:
    for i, m in enumerate((x, y)):
        if m.ndim < 2:
            raise InvalidArgumentError(f"In[{i}] ndims must be >= 2: {m.ndim}")
    if not broadcast:
        if x.ndim != y.ndim:
            raise InvalidArgumentError(
                f"In[0] and In[1] has different ndims: {_fmt(x.shape)} vs. {_fmt(y.shape)}")
        if x.shape[:-2] != y.shape[:-2]:
            raise InvalidArgumentError(
                "In[0] and In[1] must have the same batch dimensions: "
                f"{_fmt(x.shape)} vs. {_fmt(y.shape)}")
    else:
        try:
            np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
        except ValueError:
            raise InvalidArgumentError(
                "In[0] and In[1] must have compatible batch dimensions: "
                f"{_fmt(x.shape)} vs. {_fmt(y.shape)}") from None
    xa = _adjoint(x) if ctx.attrs.get("adj_x") else x
    ya = _adjoint(y) if ctx.attrs.get("adj_y") else y
    if xa.shape[-1] != ya.shape[-2]:
        raise InvalidArgumentError(
            f"Matrix size-incompatible: In[0]: {_fmt(x.shape)}, In[1]: {_fmt(y.shape)}")
    return _matmul(xa, ya, out)


@kernel("BatchMatMul", heavy=True, blas=True)
def batch_matmul(ctx: KernelContext, x: Array, y: Array) -> Array:
    return _batch_matmul(ctx, x, y, False, x.dtype)


@kernel("BatchMatMulV2", heavy=True, blas=True)
def batch_matmul_v2(ctx: KernelContext, x: Array, y: Array) -> Array:
    return _batch_matmul(ctx, x, y, True, x.dtype)


@kernel("BatchMatMulV3", heavy=True, blas=True)
def batch_matmul_v3(ctx: KernelContext, x: Array, y: Array) -> Array:
    out = ctx.attrs.get("Tout")
    out = np.dtype(out) if out is not None else np.result_type(x, y)
    return _batch_matmul(ctx, x, y, True, out)


@kernel("Einsum", heavy=True, blas=True)
def einsum(ctx: KernelContext, *inputs: Array) -> Array:
    equation = str(ctx.attrs.get("equation", "")).replace(" ", "")
    lhs, arrow, rest = equation.partition("->")
    # The op itself (not tf.einsum) takes only explicit equations with one or two inputs.
    if not arrow or "->" in rest:
        raise InvalidArgumentError(
            f"Expecting exactly one '->' in einsum equation: {equation}")
    n = len(lhs.split(","))
    if n not in (1, 2) or n != len(inputs):
        raise InvalidArgumentError(
            f"Expecting 1 or 2 input subscripts matching the {len(inputs)} inputs in "
            f"equation, but got: {n}")
    if n == 2 and inputs[0].dtype == inputs[1].dtype and inputs[0].dtype.kind in "fciu":
        p = _einsum.plan(equation, inputs[0].shape, inputs[1].shape)
        if p is not None:
            return _einsum.run(p, inputs[0], inputs[1], inputs[0].dtype)
    try:
        r = np.einsum(equation, *inputs, optimize=len(inputs) > 1)
    except ValueError as e:
        raise InvalidArgumentError(f"Einsum equation {equation} does not fit the inputs "
                                   f"{', '.join(_fmt(x.shape) for x in inputs)}: {e}") from None
    return _as(r, inputs[0].dtype)


# --- scans ------------------------------------------------------------------------------------

def _scan_axis(x: Array, axis: Array) -> int:
    """A scan's axis input as a non-negative axis of ``x`` (TF's checks and messages)."""
    if axis.ndim != 0:
        raise InvalidArgumentError(f"axis must be a scalar, but got shape {_fmt(axis.shape)}")
    a = int(axis)
    if not -x.ndim <= a < x.ndim:
        raise InvalidArgumentError(
            f"Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {a}")
    a %= x.ndim
    return a


def _scan(ctx: KernelContext, x: Array, axis: Array, ufunc: np.ufunc, identity: int) -> Array:
    a = _scan_axis(x, axis)
    reverse = ctx.attrs.get("reverse", False)
    if reverse:
        x = np.flip(x, a)
    if ctx.attrs.get("exclusive", False):
        # Shift by one: the first slot holds the identity, the rest the running result
        # without the last element.
        r = np.empty_like(x)
        head = [slice(None)] * x.ndim
        tail = list(head)
        head[a] = slice(0, 1)
        tail[a] = slice(1, None)
        r[tuple(head)] = identity
        body = list(head)
        body[a] = slice(0, -1)
        ufunc.accumulate(x[tuple(body)], axis=a, dtype=x.dtype, out=r[tuple(tail)])
    else:
        r = ufunc.accumulate(x, axis=a, dtype=x.dtype)
    if reverse:
        r = np.flip(r, a)
    return r


@kernel("Cumsum")
def cumsum(ctx: KernelContext, x: Array, axis: Array) -> Array:
    return _scan(ctx, x, axis, np.add, 0)


@kernel("Cumprod")
def cumprod(ctx: KernelContext, x: Array, axis: Array) -> Array:
    return _scan(ctx, x, axis, np.multiply, 1)


# --- segment reductions -----------------------------------------------------------------------

def _lowest(dt: np.dtype) -> Any:
    # numeric_limits<T>::lowest(): the most negative finite value (not -inf).
    return np.finfo(dt).min if dt.kind in "fc" else np.iinfo(dt).min


def _highest(dt: np.dtype) -> Any:
    return np.finfo(dt).max if dt.kind in "fc" else np.iinfo(dt).max


def _trunc_mean(total: Array, count: Array, dtype: np.dtype) -> Array:
    """``total / count`` in ``dtype``; integers truncate toward zero like C++ division."""
    if dtype.kind in "iu":
        q = np.abs(total) // count
        return _as(where(total < 0, -q, q), dtype)
    return _as(total / count.astype(dtype), dtype)


def _ordered_extreme(data: Array, ids: Array, rows: int, how: str, init: Any) -> Array:
    """Per-segment max/min of [n, inner] ``data`` as TF's scalar loop computes it.

    TF updates ``acc = acc if x < acc else x`` (mirrored for min) row by row from ``init``,
    so a NaN replaces the accumulator and the next number replaces the NaN: the result is NaN
    when a segment's last value is NaN, else the extreme of the values after its last NaN
    (of all values and ``init`` when it has none).
    """
    dt = data.dtype
    ufunc = np.maximum if how == "max" else np.minimum
    out = np.full((rows, data.shape[1]), init, dtype=dt)
    if dt.kind not in "fc":
        ufunc.at(out, ids, data)
        return out
    worst = dt.type(-np.inf if how == "max" else np.inf)
    pos = np.arange(data.shape[0])
    last_nan = np.full(out.shape, -1, dtype=np.int64)
    np.maximum.at(last_nan, ids, where(np.isnan(data), pos[:, None], -1))
    last_row = np.full(rows, -1, dtype=np.int64)
    np.maximum.at(last_row, ids, pos)
    after = pos[:, None] > last_nan[ids]
    best = np.full(out.shape, worst, dtype=dt)
    ufunc.at(best, ids, where(after, data, worst))
    has_nan = last_nan >= 0
    res = where(has_nan, best, ufunc(best, out))
    return where(has_nan & (last_nan == last_row[:, None]), dt.type(np.nan), res).astype(dt)


def _sorted_segment(data: Array, segment_ids: Array, how: str) -> Array:
    if segment_ids.ndim != 1:
        raise InvalidArgumentError("segment_ids should be a vector.")
    if data.ndim < 1 or data.shape[0] != segment_ids.shape[0]:
        raise InvalidArgumentError(
            "segment_ids should be the same size as dimension 0 of input.")
    rest = data.shape[1:]
    n = segment_ids.shape[0]
    if n == 0:
        return np.zeros((0,) + rest, dtype=data.dtype)
    ids = segment_ids.astype(np.int64, copy=False)
    rows = int(ids[-1]) + 1
    if rows <= 0:
        raise InvalidArgumentError("segment ids must be >= 0")
    down = np.zeros(n, dtype=bool)
    down[1:] = ids[1:] < ids[:-1]
    bad = (ids < 0) | down
    if bad.any():
        i = int(np.argmax(bad))
        if ids[i] < 0:
            raise InvalidArgumentError(
                f"Segment id {int(ids[i])} out of range [0, {rows}), possibly because "
                "'segment_ids' input is not sorted.")
        raise InvalidArgumentError("segment ids are not increasing")
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    seg = ids[starts]
    dt = data.dtype
    # Gaps (ids with no rows) hold TF's default value: 1 for Prod, 0 for every other reducer.
    out = np.full((rows,) + rest, 1 if how == "prod" else 0, dtype=dt)
    if how in ("sum", "mean"):
        r = np.add.reduceat(data, starts, axis=0, dtype=dt)
        if how == "mean":
            cnt = np.diff(np.append(starts, n)).reshape((-1,) + (1,) * len(rest))
            r = _trunc_mean(r, cnt, dt)
    elif how == "prod":
        r = np.multiply.reduceat(data, starts, axis=0, dtype=dt)
    else:
        # Eigen's max/min reducers start from -inf/+inf for floats.
        local = np.cumsum(np.concatenate(([0], ids[1:] != ids[:-1])))
        init = (-np.inf if how == "max" else np.inf) if dt.kind == "f" else \
            (_lowest(dt) if how == "max" else _highest(dt))
        r = _ordered_extreme(data.reshape(n, math.prod(rest)), local, starts.size, how, init)
        r = r.reshape((starts.size,) + rest)
    out[seg] = r
    return out


def _unsorted_segment(data: Array, segment_ids: Array, num_segments: Array, how: str) -> Array:
    if np.ndim(num_segments) != 0:
        raise InvalidArgumentError(
            f"num_segments should be a scalar, not shape {_fmt(np.shape(num_segments))}")
    rows = int(num_segments)
    if rows < 0:
        raise InvalidArgumentError(f"Input num_segments == {rows} must not be negative.")
    k = segment_ids.ndim
    if data.shape[:k] != segment_ids.shape:
        raise InvalidArgumentError(
            f"data.shape = {_fmt(data.shape)} does not start with segment_ids.shape = "
            f"{_fmt(segment_ids.shape)}")
    rest = data.shape[k:]
    dt = data.dtype
    init = {"sum": 0, "prod": 1, "max": _lowest(dt), "min": _highest(dt)}[how]
    out = np.full((rows,) + rest, init, dtype=dt)
    ids = segment_ids.reshape(-1).astype(np.int64, copy=False)
    too_big = ids >= rows
    if too_big.any():
        i = int(np.argmax(too_big))
        pos = np.unravel_index(i, segment_ids.shape) if k else ()
        raise InvalidArgumentError(
            f"segment_ids{_fmt(pos)} = {int(ids[i])} is out of range [0, {rows})")
    keep = ids >= 0  # negative ids drop their rows, as TF's CPU kernel does
    vals = data.reshape((ids.size,) + rest)[keep]
    if how in ("max", "min"):
        out = _ordered_extreme(vals.reshape(vals.shape[0], math.prod(rest)), ids[keep], rows,
                              how, init)
        return out.reshape((rows,) + rest)
    (np.add if how == "sum" else np.multiply).at(out, ids[keep], vals)
    return out


@kernel("SegmentSum")
def segment_sum(ctx: KernelContext, data: Array, segment_ids: Array) -> Array:
    return _sorted_segment(data, segment_ids, "sum")


@kernel("SegmentMean")
def segment_mean(ctx: KernelContext, data: Array, segment_ids: Array) -> Array:
    return _sorted_segment(data, segment_ids, "mean")


@kernel("SegmentProd")
def segment_prod(ctx: KernelContext, data: Array, segment_ids: Array) -> Array:
    return _sorted_segment(data, segment_ids, "prod")


@kernel("SegmentMax")
def segment_max(ctx: KernelContext, data: Array, segment_ids: Array) -> Array:
    return _sorted_segment(data, segment_ids, "max")


@kernel("SegmentMin")
def segment_min(ctx: KernelContext, data: Array, segment_ids: Array) -> Array:
    return _sorted_segment(data, segment_ids, "min")


@kernel("UnsortedSegmentSum")
def unsorted_segment_sum(ctx: KernelContext, data: Array, segment_ids: Array,
                         num_segments: Array) -> Array:
    return _unsorted_segment(data, segment_ids, num_segments, "sum")


@kernel("UnsortedSegmentProd")
def unsorted_segment_prod(ctx: KernelContext, data: Array, segment_ids: Array,
                          num_segments: Array) -> Array:
    return _unsorted_segment(data, segment_ids, num_segments, "prod")


@kernel("UnsortedSegmentMax")
def unsorted_segment_max(ctx: KernelContext, data: Array, segment_ids: Array,
                         num_segments: Array) -> Array:
    return _unsorted_segment(data, segment_ids, num_segments, "max")


@kernel("UnsortedSegmentMin")
def unsorted_segment_min(ctx: KernelContext, data: Array, segment_ids: Array,
                         num_segments: Array) -> Array:
    return _unsorted_segment(data, segment_ids, num_segments, "min")


# --- fake quantization ------------------------------------------------------------------------

def _quant_range(ctx: KernelContext) -> tuple[int, int]:
    bits = int(ctx.attrs.get("num_bits", 8))
    if not 2 <= bits <= 16:
        raise InvalidArgumentError("num_bits must be between 2 and 16, inclusive")
    return (1 if ctx.attrs.get("narrow_range", False) else 0), (1 << bits) - 1


def _nudge(lo: np.float32, hi: np.float32, qmin: int,
           qmax: int) -> tuple[np.float32, np.float32, np.float32]:
    """TF's nudging (all float32): move [lo, hi] so that 0.0 is exactly a quantized value.

    Returns (nudged_min, nudged_max, scale).
    """
    f = np.float32
    qlo, qhi = f(qmin), f(qmax)
    scale = (hi - lo) / (qhi - qlo)
    zp_from_min = qlo - lo / scale
    if zp_from_min < qlo:
        zp = qmin
    elif zp_from_min > qhi:
        zp = qmax
    else:
        zp = int(np.floor(np.abs(zp_from_min) + f(0.5)))  # std::round: halves away from 0
        zp = (zp if zp_from_min >= 0 else -zp) & 0xFFFF   # stored as uint16
    return (qlo - f(zp)) * scale, (qhi - f(zp)) * scale, scale


def _fake_quant(x: Array, lo: np.float32, hi: np.float32, qmin: int, qmax: int,
                use_inverse: bool) -> Array:
    f = np.float32
    nmin, nmax, scale = _nudge(lo, hi, qmin, qmax)
    # Clamp as TF does, min with the top first (that order decides when min > max).
    shifted = np.maximum(np.minimum(x, nmax), nmin) - nmin
    # TF rounds in the quantized domain relative to the zero point, then rescales. The Args
    # kernel multiplies by (qmax - qmin) / (max - min) from its attrs; the Vars kernel
    # divides by the nudged scale.
    if use_inverse:
        inv = (f(qmax) - f(qmin)) / (hi - lo)
        q, q_zero = shifted * inv, np.floor(-nmin * inv + f(0.5))
    else:
        q, q_zero = shifted / scale, np.floor(-nmin / scale + f(0.5))
    return _as(np.floor(q - q_zero + f(0.5)) * scale, _F32)


@kernel("FakeQuantWithMinMaxArgs")
def fake_quant_with_min_max_args(ctx: KernelContext, x: Array) -> Array:
    lo = np.float32(ctx.attrs.get("min", -6.0))
    hi = np.float32(ctx.attrs.get("max", 6.0))
    if not lo < hi:
        raise InvalidArgumentError(
            f"min has to be smaller than max, was: {float(lo):g} >= {float(hi):g}")
    qmin, qmax = _quant_range(ctx)
    return _fake_quant(x, lo, hi, qmin, qmax, use_inverse=True)


@kernel("FakeQuantWithMinMaxVars")
def fake_quant_with_min_max_vars(ctx: KernelContext, x: Array, min_: Array,
                                 max_: Array) -> Array:
    for name, v in (("min", min_), ("max", max_)):
        if v.ndim != 0:
            raise InvalidArgumentError(f"`{name}` must be rank 0 but is rank {v.ndim}")
    qmin, qmax = _quant_range(ctx)
    lo, hi = np.float32(min_), np.float32(max_)
    if lo == 0 and hi == 0:
        return np.zeros(x.shape, _F32)  # TF's special case: an all-zero range gives zeros
    return _fake_quant(x, lo, hi, qmin, qmax, use_inverse=False)


# --- L2Loss -----------------------------------------------------------------------------------

@kernel("L2Loss")
def l2_loss(ctx: KernelContext, t: Array) -> Array:
    # (t^2 * 0.5) summed, in T: float16 overflows in the square exactly as TF's does.
    half = np.square(t) * t.dtype.type(0.5)
    return _as(np.sum(half, dtype=t.dtype), t.dtype)


# --- PopulationCount, CumulativeLogsumexp, HistogramFixedWidth, SparseMatMul -------------------

_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


@kernel("PopulationCount")
def population_count(ctx: KernelContext, x: Array) -> Array:
    # bits of the two's-complement representation, counted a byte at a time
    b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    counts = _POPCOUNT8[b].reshape(x.size, x.dtype.itemsize).sum(axis=1, dtype=np.uint8)
    return counts.reshape(x.shape)


@kernel("CumulativeLogsumexp")
def cumulative_logsumexp(ctx: KernelContext, x: Array, axis: Array) -> Array:
    a = _scan_axis(x, axis)
    work = np.moveaxis(x.astype(_F32) if x.dtype == _F16 else x, a, 0)
    if ctx.attrs.get("reverse", False):
        work = work[::-1]
    out = np.empty_like(work)
    acc = np.full(work.shape[1:], -np.inf, dtype=work.dtype)
    lowest = np.finfo(work.dtype).min
    exclusive = bool(ctx.attrs.get("exclusive", False))
    for i in range(work.shape[0]):
        if exclusive:
            out[i] = acc
        # TF's reducer: max + log1p(exp(min - max)); a running -inf stays -inf. Its max and
        # min are std::max(acc, x) / std::min(acc, x): a NaN x compares false and yields acc.
        hi = where(acc < work[i], work[i], acc)
        lo = where(work[i] < acc, work[i], acc)
        acc = where(hi < lowest, hi, np.log1p(np.exp(lo - hi)) + hi)
        if not exclusive:
            out[i] = acc
    if ctx.attrs.get("reverse", False):
        out = out[::-1]
    return np.ascontiguousarray(np.moveaxis(out, 0, a)).astype(x.dtype, copy=False)


@kernel("HistogramFixedWidth")
def histogram_fixed_width(ctx: KernelContext, values: Array, value_range: Array,
                          nbins: Array) -> Array:
    if value_range.ndim != 1:
        raise InvalidArgumentError("value_range should be a vector.")
    if value_range.size != 2:
        raise InvalidArgumentError("value_range should be a vector of 2 elements.")
    if nbins.ndim != 0:
        raise InvalidArgumentError("nbins should be a scalar.")
    n = int(nbins)
    if n <= 0:
        raise InvalidArgumentError(f"nbins should be a positive number, but got '{n}'")
    lo, hi = value_range[0], value_range[1]
    if not lo < hi:
        raise InvalidArgumentError(
            f"value_range should satisfy value_range[0] < value_range[1], but got '[{lo}, {hi}]'")
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise InvalidArgumentError("Histogram values must not contain NaN")
    out_dt = np.dtype(ctx.attrs.get("dtype", np.int32))
    # TF: ((max(v, lo) - lo) in T, as double) / step, capped at nbins - 1, truncated
    step = float(_as(hi - lo, values.dtype)) / float(n)
    shifted = (np.maximum(values, lo) - lo).astype(values.dtype, copy=False)
    pos = np.minimum(shifted.astype(np.float64) / step, float(n - 1))
    bins = pos.astype(np.int64).reshape(-1)
    return np.bincount(bins, minlength=n)[:n].astype(out_dt)


@kernel("SparseMatMul")
def sparse_mat_mul(ctx: KernelContext, a: Array, b: Array) -> Array:
    # The sparsity hints only pick TF's algorithm; the product is the dense one.
    for name, m in (("a", a), ("b", b)):
        if m.ndim != 2:
            raise InvalidArgumentError(f"{name} is not a matrix")
    if ctx.attrs.get("transpose_a", False):
        a = a.T
    if ctx.attrs.get("transpose_b", False):
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise InvalidArgumentError(
            f"Matrix size incompatible: a: {_fmt(a.shape)}, b: {_fmt(b.shape)}")
    return _matmul(a.astype(_F32, copy=False), b.astype(_F32, copy=False), _F32)
