"""Reduction kernels: Sum, Mean, Max, Min, Prod, All, Any, EuclideanNorm.

All take ``(input, reduction_indices)`` and a ``keep_dims`` attr. Semantics follow TensorFlow:

* ``reduction_indices`` is a scalar or vector of int32/int64, negative values count from the
  end, duplicates are allowed, an empty list reduces nothing (the input is returned as a copy).
* The output dtype is the input dtype; integer sums wrap around like the C++ accumulator does.
  An integer Mean sums in 64 bits (as TF does) and truncates toward zero.
* Reducing over an empty axis yields the reducer's identity: 0 for Sum, 1 for Prod, the
  dtype's lowest value for Max (``-inf`` for floats), its highest for Min, True for All, False
  for Any, NaN for a floating Mean (0 for an integer one).
* NaN propagates through Max and Min.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError
from dfg.graphdef.tensors import frozen

from . import _native
from .registry import KernelContext, kernel

_HALF = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def reduction_axes(x: np.ndarray, indices: np.ndarray) -> tuple[int, ...]:
    """Normalise ``reduction_indices`` to sorted, unique, non-negative axes of ``x``."""
    idx = np.asarray(indices)
    if idx.dtype not in (np.int32, np.int64):
        raise InvalidArgumentError(
            f"reduction_indices must be int32 or int64, found {idx.dtype}")
    if idx.ndim > 1:
        raise InvalidArgumentError(
            f"reduction_indices must be a scalar or vector, found shape {list(idx.shape)}")
    rank = x.ndim
    axes = set()
    for a in idx.reshape(-1).tolist():
        if not -rank <= a < rank:
            raise InvalidArgumentError(
                f"Invalid reduction dimension {a}: expected a value in [{-rank}, {rank}) "
                f"for an input of rank {rank}")
        axes.add(a % rank)
    return tuple(sorted(axes))


def _finish(ctx: KernelContext, x: np.ndarray, out: Any, axes: tuple[int, ...]) -> np.ndarray:
    """Cast to the input dtype and restore reduced axes as size 1 when keep_dims is set."""
    out = np.asarray(out).astype(x.dtype, copy=False)
    if ctx.attrs.get("keep_dims", False):
        out = out.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out


def _axes(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> tuple[int, ...]:
    """:func:`reduction_axes`, kept in the node's memo while ``indices`` is the same frozen
    array (a Const's) and ``x`` has the same rank."""
    m = ctx.memo
    if m is not None and m[0] is indices and m[1] == x.ndim:
        return m[2]
    axes = reduction_axes(x, indices)
    if frozen(indices):
        ctx.memo = (indices, x.ndim, axes)
    return axes


def _reduce(ctx: KernelContext, x: np.ndarray, indices: np.ndarray, fn: Any) -> np.ndarray:
    axes = _axes(ctx, x, indices)
    if not axes:
        # Nothing to reduce: TensorFlow forwards the input unchanged.
        return np.array(x, copy=True)
    return _finish(ctx, x, fn(x, axes), axes)


def _count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _last_axis_sum(ctx: KernelContext, x: np.ndarray, axes: tuple[int, ...]
                   ) -> np.ndarray | None:
    """The float32 sums over ``x``'s last axis alone (a layer norm's mean and variance), by
    the compiled row sum that adds in numpy's order (kept dims restored); None elsewhere."""
    if x.dtype is not _F32 or len(axes) != 1 or axes[0] != x.ndim - 1:
        return None
    s = _native.row_sum_f32(x)
    if s is not None and ctx.attrs.get("keep_dims", False):
        s = s.reshape(*x.shape[:-1], 1)
    return s


def _mid_dims(shape: tuple, axes: tuple[int, ...]) -> tuple[int, int, int]:
    """(outer, mid, inner): the sizes before, in and after the run of ``axes``."""
    outer = mid = inner = 1
    for i, d in enumerate(shape):
        if i < axes[0]:
            outer *= d
        elif i <= axes[-1]:
            mid *= d
        else:
            inner *= d
    return outer, mid, inner


def _middle_axes_sum(ctx: KernelContext, x: np.ndarray, axes: tuple[int, ...],
                     count: int) -> np.ndarray | None:
    """The float32 sums over a run of axes before the last (a global average pool's (1, 2)
    of NHWC), divided by ``count`` when it is above 0 (a mean), by the compiled sum that
    adds in numpy's order (kept dims as asked); None elsewhere."""
    if x.dtype is not _F32 or not axes or axes[-1] >= x.ndim - 1 \
            or axes != tuple(range(axes[0], axes[-1] + 1)):
        return None
    shape = x.shape
    outer, mid, inner = _mid_dims(shape, axes)
    s = _native.mid_sum_f32(x, outer, mid, inner, count)
    if s is None:
        return None
    if ctx.attrs.get("keep_dims", False):
        return s.reshape(tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return s.reshape(shape[:axes[0]] + shape[axes[-1] + 1:])


@kernel("Sum")
def sum_(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    if x.__class__ is np.ndarray and x.dtype is _F32:
        axes = _axes(ctx, x, indices)
        s = _last_axis_sum(ctx, x, axes)
        if s is None:
            s = _middle_axes_sum(ctx, x, axes, 0)
        if s is not None:
            return s

    def fn(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        # float16 accumulates in float32: closer to the exact sum than TF's half-precision
        # accumulation, whose order numpy cannot reproduce anyway. Every other dtype
        # accumulates in itself so integer overflow wraps exactly as in C++.
        acc = np.float32 if v.dtype == _HALF else v.dtype
        return np.sum(v, axis=axes, dtype=acc)

    return _reduce(ctx, x, indices, fn)


def _kept_mean(shape: tuple, indices: np.ndarray, dims: tuple, out_shape: tuple) -> Any:
    """A Mean node's ``ctx.fast`` after the compiled sum over middle axes ran: the same for
    a float32 array of ``shape`` and the same frozen ``indices`` (a Const's); None for
    anything else (the kernel runs)."""
    outer, mid, inner = dims
    count = mid

    def fast(x: Any, ind: Any) -> np.ndarray | None:
        if ind is not indices or x.__class__ is not np.ndarray or x.dtype is not _F32 \
                or x.shape != shape:
            return None
        s = _native.mid_sum_f32(x, outer, mid, inner, count)
        return None if s is None else s.reshape(out_shape)
    return fast


@kernel("Mean", prepared=True)
def mean(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" and x.dtype != _HALF and x.__class__ is np.ndarray:
        # float32/float64, what fn below computes without its wrappers (a global average
        # pool or squeeze-excite mean is a few microseconds of arithmetic): the same
        # reduction in the input's dtype, then one division by the count
        axes = _axes(ctx, x, indices)
        n = _count(x, axes)
        if axes and n:
            s = _middle_axes_sum(ctx, x, axes, n) if x.dtype is _F32 else None
            if s is not None:
                if frozen(indices):     # the pool of a squeeze-excite gate, every step
                    ctx.fast = _kept_mean(x.shape, indices, _mid_dims(x.shape, axes),
                                          s.shape)
                return s        # divided by n already, as below
            s = _last_axis_sum(ctx, x, axes)
            if s is None:
                s = np.add.reduce(x, axis=axes, dtype=x.dtype,
                                  keepdims=bool(ctx.attrs.get("keep_dims", False)))
            if s.__class__ is np.ndarray:
                return np.true_divide(s, x.dtype.type(n), out=s)
            return np.asarray(s / x.dtype.type(n))

    def fn(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        n = _count(v, axes)
        if v.dtype.kind in "iu":
            # TF sums integers in 64 bits (no overflow below int64), then divides with C++
            # truncation toward zero; numpy's // floors, so divide magnitudes.
            wide = np.int64 if v.dtype.kind == "i" else np.uint64
            s = np.sum(v, axis=axes, dtype=wide)
            if n == 0:
                return np.zeros(s.shape, v.dtype)
            if v.dtype.kind == "u":
                return s // wide(n)
            q = np.abs(s) // n
            return np.where(s < 0, -q, q)
        acc = np.float32 if v.dtype == _HALF else v.dtype
        s = np.sum(v, axis=axes, dtype=acc)
        if n == 0:
            return np.full_like(s, np.nan)
        return s / np.asarray(n, dtype=acc)

    return _reduce(ctx, x, indices, fn)


@kernel("Prod")
def prod(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return _reduce(ctx, x, indices, lambda v, axes: np.prod(v, axis=axes, dtype=v.dtype))


def _lowest(dt: np.dtype) -> Any:
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _highest(dt: np.dtype) -> Any:
    return np.inf if dt.kind == "f" else np.iinfo(dt).max


@kernel("Max")
def max_(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    # ``initial`` supplies the identity for empty axes; np.max propagates NaN like TF.
    return _reduce(ctx, x, indices,
                   lambda v, axes: np.max(v, axis=axes, initial=_lowest(v.dtype)))


@kernel("Min")
def min_(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return _reduce(ctx, x, indices,
                   lambda v, axes: np.min(v, axis=axes, initial=_highest(v.dtype)))


def _check_bool(x: np.ndarray) -> None:
    if x.dtype != np.bool_:
        raise InvalidArgumentError(f"expected a bool input, found {x.dtype}")


@kernel("All")
def all_(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    _check_bool(x)
    return _reduce(ctx, x, indices, lambda v, axes: np.all(v, axis=axes))


@kernel("Any")
def any_(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    _check_bool(x)
    return _reduce(ctx, x, indices, lambda v, axes: np.any(v, axis=axes))


@kernel("EuclideanNorm")
def euclidean_norm(ctx: KernelContext, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    def fn(v: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if v.dtype.kind == "c":
            s = np.sum(v * np.conj(v), axis=axes, dtype=v.dtype)
            return np.sqrt(s)
        if v.dtype.kind in "iu":
            # Square-sum in the dtype (wrapping like C++), then an integer square root.
            s = np.sum(v * v, axis=axes, dtype=v.dtype)
            return np.floor(np.sqrt(s.astype(np.float64)))
        acc = np.float32 if v.dtype == _HALF else v.dtype
        w = v.astype(acc, copy=False)
        return np.sqrt(np.sum(w * w, axis=axes, dtype=acc))

    return _reduce(ctx, x, indices, fn)
