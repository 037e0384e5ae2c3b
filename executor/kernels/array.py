"""Array kernels: shapes, reshaping, slicing, joining, gathering and index builders (and
Bitcast, ReverseSequence, Inplace*, ListDiff, UnravelIndex, NthElement, DataFormat*, ApproxTopK).

Every kernel follows TensorFlow's CPU semantics, including which inputs are errors. Shape-only
ops (Reshape, ExpandDims, Squeeze, Shape ...) are cheap and return views where numpy allows.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError
from dfg.graphdef.tensors import frozen

from . import _native
from .registry import ArrayForm, KernelContext, kernel, lookup

_INT32_MAX = 2**31 - 1


# --- helpers -------------------------------------------------------------------------------

def _fmt(shape: Sequence[int]) -> str:
    """A shape as TensorFlow prints it: ``[2,3]``."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _as_array(v: Any, dtype: np.dtype) -> np.ndarray:
    # Indexing can hand back a numpy scalar (or a bare bytes object for strings); kernels
    # must return arrays of the exact dtype.
    return v if isinstance(v, np.ndarray) else np.asarray(v, dtype=dtype)


def _scalar(x: np.ndarray, what: str) -> int:
    """An integer scalar input; TF also accepts the legacy one-element vector."""
    if x.__class__ is np.ndarray and x.ndim == 0:
        return int(x)
    a = np.asarray(x)
    if not (a.ndim == 0 or (a.ndim == 1 and a.shape[0] == 1)):
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {_fmt(a.shape)}")
    return int(a.reshape(()))


def _vector(x: np.ndarray, what: str) -> list[int]:
    a = np.asarray(x)
    if a.ndim != 1:
        raise InvalidArgumentError(f"{what} must be a 1-D vector, got shape {_fmt(a.shape)}")
    return [int(v) for v in a.tolist()]


def _axis(axis: int, rank: int, what: str = "axis") -> int:
    """Normalize ``axis`` into [0, rank), accepting [-rank, rank)."""
    if not -rank <= axis < rank:
        raise InvalidArgumentError(
            f"Expected {what} in the range [{-rank}, {rank}), but got {axis}")
    return axis + rank if axis < 0 else axis


def _drop(x: np.ndarray, axis: int, i: int) -> np.ndarray:
    """``x`` indexed at ``i`` along ``axis`` as an array view (never a numpy scalar)."""
    idx = (slice(None),) * axis + (slice(i, i + 1),)
    return x[idx].reshape(x.shape[:axis] + x.shape[axis + 1:])


def _contiguous(y: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray would turn a 0-d array into shape (1,).
    return y if y.flags.c_contiguous else y.copy(order="C")


def _attr_dtype(ctx: KernelContext, name: str, default: Any) -> np.dtype:
    v = ctx.attrs.get(name)
    return np.dtype(default if v is None else v)


def _check_dims(shape: Sequence[int]) -> tuple[int, ...]:
    for i, d in enumerate(shape):
        if d < 0:
            raise InvalidArgumentError(f"Dimension {d} must be >= 0 (dims[{i}])")
    return tuple(shape)


# --- shape queries --------------------------------------------------------------------------

def _shape_of(x: np.ndarray, out_type: np.dtype) -> np.ndarray:
    if out_type == np.int32:
        for i, d in enumerate(x.shape):
            if d > _INT32_MAX:
                raise InvalidArgumentError(
                    f"Shape output type is 32-bit but dim {i} is {d}")
    return np.array(x.shape, dtype=out_type)


@kernel("Shape", cheap=True, prepared=True)
def shape(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    out = _run_kept(ctx, (x,))
    if out is not None:
        return out
    out = _shape_of(x, np.dtype(ctx.attrs["out_type"]))
    if x.__class__ is np.ndarray:
        ctx.fast = _kept_shape(x.shape, out)
    return out


def _kept_shape(shape: tuple, out: np.ndarray) -> Any:
    """A Shape node's ``ctx.fast``: the vector it made, read-only, for an array of the same
    shape again (None for anything else). Keras asks a tensor's shape to reshape it with its
    batch size (a squeeze-excite gate, a Flatten, Tensordot): a new vector each step cost
    3.5 us, a tenth of such a layer. Read-only: a reader cannot change what the next step
    gets (a fetch of it is copied, as a Const's is)."""
    out.flags.writeable = False
    _KEPT_SHAPES[id(out)] = out

    def fast(x: Any) -> np.ndarray | None:
        return out if x.__class__ is np.ndarray and x.shape == shape else None
    return fast


# The vectors kept Shape nodes answer, and the small results computed from them and Consts
# alone (a batch size sliced out, a target shape packed): no code changes them (read-only,
# never handed out: a fetch is copied), so a reader may know one by identity, as it knows a
# Const's frozen array. id -> the array (an entry goes with its array).
_KEPT_SHAPES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_SMALL_VECTOR = 64      # shape arithmetic: vectors up to this long are remembered


def _immutable(a: Any) -> bool:
    """Whether ``a``'s values can never change: a Const's frozen array, or a kept one (both
    read-only: a writable array, the common case, is answered at once)."""
    return a.__class__ is np.ndarray and not a.flags.writeable \
        and (_KEPT_SHAPES.get(id(a)) is a or frozen(a))


def _kept_value(a: np.ndarray) -> np.ndarray:
    """``a`` (computed from immutable arrays alone) made read-only and known as kept."""
    a.flags.writeable = False
    _KEPT_SHAPES[id(a)] = a
    return a


@kernel("ShapeN", cheap=True)
def shape_n(ctx: KernelContext, *xs: np.ndarray) -> tuple[np.ndarray, ...]:
    out_type = np.dtype(ctx.attrs["out_type"])
    return tuple(_shape_of(x, out_type) for x in xs)


@kernel("Size", cheap=True)
def size(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    out_type = np.dtype(ctx.attrs["out_type"])
    if out_type == np.int32 and x.size > _INT32_MAX:
        raise InvalidArgumentError(
            "Number of elements was larger than representable by 32-bit output type")
    return np.array(x.size, dtype=out_type)


@kernel("Rank", cheap=True)
def rank(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.array(x.ndim, dtype=np.int32)


# --- reshaping ------------------------------------------------------------------------------

def _reshape_target(in_shape: tuple[int, ...], sizes: list[int]) -> tuple[int, ...]:
    """TF's Reshape shape inference: one -1 dim, zero-sized dims handled like TF."""
    unknown = -1
    product = 1
    has_zero = False
    for d, s in enumerate(sizes):
        if s == -1:
            if unknown != -1:
                raise InvalidArgumentError(
                    f"Only one input size may be -1, not both {unknown} and {d}")
            unknown = d
        elif s < 0:
            raise InvalidArgumentError(f"Size {d} must be non-negative, not {s}")
        elif s == 0:
            has_zero = True  # excluded from product so the -1 dim can still be inferred
        else:
            product *= s
    out = list(sizes)
    n_in = math.prod(in_shape)
    if unknown != -1:
        # TF leaves zero input dims out when the requested shape has a zero dim too.
        count = 1
        in_has_zero = False
        for d in in_shape:
            if d > 0 or not has_zero:
                count *= d
            else:
                in_has_zero = True
        missing = count // product
        if not in_has_zero and missing * product != count:
            raise InvalidArgumentError(
                f"Input to reshape is a tensor with {n_in} values, but the requested shape "
                f"requires a multiple of {product} (input shape {_fmt(in_shape)}, "
                f"requested shape {_fmt(sizes)})")
        out[unknown] = missing
    n_out = math.prod(out)
    if n_out != n_in:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {n_in} values, but the requested shape has "
            f"{n_out} (input shape {_fmt(in_shape)}, requested shape {_fmt(sizes)})")
    return tuple(out)


@kernel("Reshape", cheap=True, prepared=True)
def reshape(ctx: KernelContext, tensor: np.ndarray, shape: np.ndarray) -> np.ndarray:
    out = _run_kept(ctx, (tensor, shape))
    if out is not None:
        return out
    out = reshaped(tensor, shape)
    if tensor.__class__ is np.ndarray and shape.__class__ is np.ndarray and shape.ndim == 1:
        ctx.fast = _kept_reshape(tensor.shape, shape, out.shape)
    return out


def _kept_reshape(in_shape: tuple, sizes: np.ndarray, target: tuple) -> Any:
    """A Reshape node's ``ctx.fast``: the view of ``target`` shape it computed, for an array
    of ``in_shape`` and a sizes vector of the same dtype and values (the same array object
    answered at once when its values cannot change: a Const's, or a kept Shape's); None for
    anything else (the kernel checks and words what is wrong). Its checks and the -1's
    inference cost 5 us a call."""
    dt, n, values = sizes.dtype, sizes.shape, sizes.tolist()
    # the sizes array known by identity (one that cannot change: a Const's, a kept one)
    same = [sizes if _immutable(sizes) else None]

    def fast(x: Any, s: Any) -> np.ndarray | None:
        if x.__class__ is not np.ndarray or x.shape != in_shape:
            return None
        if s is not same[0]:
            if s.__class__ is not np.ndarray or s.dtype is not dt or s.shape != n \
                    or s.tolist() != values:
                return None
            if _immutable(s):      # a packed target shape kept from the second step on
                same[0] = s
        return x.reshape(target)
    return fast


def reshaped(tensor: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """``tensor`` in ``shape`` (a vector, -1 for one inferred size), as Reshape makes it."""
    s = np.asarray(shape)
    if s.ndim > 1:  # TF still accepts a scalar shape (legacy), not a matrix
        raise InvalidArgumentError(f"sizes input must be 1-D, not {_fmt(s.shape)}")
    target = _reshape_target(tensor.shape, [int(v) for v in s.reshape(-1).tolist()])
    return tensor.reshape(target)


@kernel("Squeeze", cheap=True)
def squeeze(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    m = ctx.memo      # (input shape, output shape) last time: a loop squeezes alike
    if m is not None and m[0] == x.shape:
        return x.reshape(m[1])
    out = _squeeze(ctx, x)
    ctx.memo = (x.shape, out.shape)
    return out


def _squeeze(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    dims = list(ctx.attrs.get("squeeze_dims") or [])
    r = x.ndim
    if not dims:
        return x.reshape(tuple(d for d in x.shape if d != 1))
    drop = set()
    for d in dims:
        if not -r <= d < r:
            raise InvalidArgumentError(
                f"Tried to squeeze dim index {d} for tensor with {r} dimensions.")
        d = d + r if d < 0 else d
        if x.shape[d] != 1:
            raise InvalidArgumentError(
                f"Can not squeeze dim[{d}], expected a dimension of 1, got {x.shape[d]}")
        drop.add(d)
    return x.reshape(tuple(s for i, s in enumerate(x.shape) if i not in drop))


@kernel("ExpandDims", cheap=True)
def expand_dims(ctx: KernelContext, x: np.ndarray, dim: np.ndarray) -> np.ndarray:
    d = np.asarray(dim)
    if d.size != 1:
        raise InvalidArgumentError(
            f"'dim' must be a tensor with a single value, got shape {_fmt(d.shape)}")
    a = int(d.reshape(()))
    r = x.ndim
    if not -1 - r <= a <= r:
        raise InvalidArgumentError(
            f"Tried to expand dim index {a} for tensor with {r} dimensions.")
    a = a + r + 1 if a < 0 else a
    return x.reshape(x.shape[:a] + (1,) + x.shape[a:])


def _perm(perm: np.ndarray, rank: int) -> list[int]:
    p = _vector(perm, "perm")
    if len(p) != rank:
        raise InvalidArgumentError(
            f"transpose expects a vector of size {rank}. But input(1) is a vector of size "
            f"{len(p)}")
    seen = [False] * rank
    for d in p:
        if not 0 <= d < rank:
            raise InvalidArgumentError(f"{d} is out of range [0 .. {rank})")
        if seen[d]:
            raise InvalidArgumentError(f"{d} is duplicated in perm {_fmt(p)}")
        seen[d] = True
    return p


@kernel("Transpose")
def transpose(ctx: KernelContext, x: np.ndarray, perm: np.ndarray) -> np.ndarray:
    # Materialized like TF so consumers see ordinary contiguous memory.
    return _contiguous(np.transpose(x, _perm(perm, x.ndim)))


@kernel("ConjugateTranspose")
def conjugate_transpose(ctx: KernelContext, x: np.ndarray, perm: np.ndarray) -> np.ndarray:
    y = np.transpose(x, _perm(perm, x.ndim))
    return _contiguous(np.conj(y) if np.iscomplexobj(y) else y)


@kernel("InvertPermutation")
def invert_permutation(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    if x.ndim != 1:
        raise InvalidArgumentError(
            f"invert_permutation expects a 1D vector, got shape {_fmt(x.shape)}")
    n = x.shape[0]
    v = x.astype(np.int64)
    bad = (v < 0) | (v >= n)
    if bad.any():
        raise InvalidArgumentError(f"{int(v[bad][0])} is not between 0 and {n}")
    y = np.full(n, -1, dtype=x.dtype)
    y[v] = np.arange(n, dtype=x.dtype)
    if n and (y < 0).any():
        counts = np.bincount(v, minlength=n)
        raise InvalidArgumentError(f"{int(np.argmax(counts > 1))} is duplicated in the input.")
    return y


# --- joining and splitting ------------------------------------------------------------------

def _concat(values: Sequence[np.ndarray], axis: int) -> np.ndarray:
    first = values[0]
    r = first.ndim
    if r == 0:
        raise InvalidArgumentError("ConcatOp : Can't concatenate scalars (use tf.stack instead)")
    if not -r <= axis < r:
        raise InvalidArgumentError(
            f"ConcatOp : Expected concatenating dimensions in the range [{-r}, {r}), but got "
            f"{axis}")
    a = axis + r if axis < 0 else axis
    # the shapes beside the axis at once (a DenseNet concatenates 58 times a step); the
    # loop below words what is wrong
    lead, tail = first.shape[:a], first.shape[a + 1:]
    if all(v.ndim == r and v.shape[:a] == lead and v.shape[a + 1:] == tail
           for v in values[1:]):
        if len(values) == 1:
            return first
        return _joined(values, a, lead, tail)
    for i, v in enumerate(values[1:], 1):
        if v.ndim != r:
            raise InvalidArgumentError(
                f"ConcatOp : Ranks of all input tensors should match: shape[0] = "
                f"{_fmt(first.shape)} vs. shape[{i}] = {_fmt(v.shape)}")
        for d in range(r):
            if d != a and v.shape[d] != first.shape[d]:
                raise InvalidArgumentError(
                    f"ConcatOp : Dimension {d} in both shapes must be equal: shape[0] = "
                    f"{_fmt(first.shape)} vs. shape[{i}] = {_fmt(v.shape)}")
    if len(values) == 1:
        return first
    return np.concatenate(values, axis=a)


def _joined(values: Sequence[np.ndarray], a: int, lead: tuple, tail: tuple) -> np.ndarray:
    """``values`` (checked: shapes equal beside axis ``a``) concatenated along ``a``: by the
    compiled row copy (numpy's concatenate copies short rows through a strided loop: 5.5
    against 2.8 us for a DenseNet block's (2,8,8,64) and (2,8,8,32)), else by numpy."""
    out = _rows_copied(values, (*lead, sum(v.shape[a] for v in values), *tail),
                       math.prod(lead))
    return np.concatenate(values, axis=a) if out is None else out


def _rows_copied(values: Sequence[np.ndarray], shape: tuple, outer: int) -> np.ndarray | None:
    """An array of ``shape`` whose row o of ``outer`` is each value's row o in turn, by the
    compiled row copy, for numeric C-contiguous values of one dtype (ConcatV2 and Pack);
    None where it does not apply (the caller's numpy path runs)."""
    ext = _native.extension()
    dt = values[0].dtype
    if ext is None or dt.kind not in "biufc" or not outer or len(values) > 1024 or not all(
            v.__class__ is np.ndarray and v.dtype == dt and v.flags.c_contiguous
            for v in values):
        return None
    out = np.empty(shape, dt)
    if not out.size:
        return None
    ext.concat_rows(tuple(values), out, outer, *_native.copy_split(out.nbytes))
    return out


def _kept_rows(shapes: tuple, dt: np.dtype, shape: tuple, outer: int,
               axis: np.ndarray | None) -> Any:
    """A node's ``ctx.fast`` for a join the compiled row copy made (ConcatV2, Pack): the same
    copy (``_rows_copied``'s) for values of exactly ``shapes`` and dtype ``dt`` (and, for
    ConcatV2, a 0-d axis of ``axis``'s dtype and value), giving ``shape``; None for anything
    else (the kernel runs, and words what is wrong). The kernel's checks and shape
    arithmetic are what a DenseNet's 58 small concatenations a step paid for (10 us each, 2
    of them the copy)."""
    n = len(shapes)
    adt, av = (None, None) if axis is None else (axis.dtype, int(axis))
    # (the arguments, the result) when every argument is an array that cannot change: a
    # target shape packed from a kept batch size and Consts is the same every step
    known: list = [None]

    def fast(*args: Any) -> np.ndarray | None:
        k = known[0]
        if k is not None and len(args) == len(k[0]):
            for a, b in zip(args, k[0]):
                if a is not b:
                    break
            else:
                return k[1]
        if adt is None:
            if len(args) != n:
                return None
        elif len(args) != n + 1 or (x := args[n]).__class__ is not np.ndarray or \
                x.shape != () or x.dtype is not adt or int(x) != av:
            return None
        for v, s in zip(args, shapes):
            if v.__class__ is not np.ndarray or v.dtype is not dt or v.shape != s:
                return None
        ext = _native.extension()
        if ext is None:
            return None
        out = np.empty(shape, dt)
        # (the copy refuses a value that is not C-contiguous: the caller runs the kernel)
        ext.concat_rows(args[:n], out, outer, *_native.copy_split(out.nbytes))
        if out.size <= _SMALL_VECTOR and all(_immutable(a) for a in args):
            known[0] = (args, _kept_value(out))
        return out
    return fast


def _keep_rows(ctx: KernelContext, values: Sequence[np.ndarray], out: np.ndarray,
               a: int, axis: np.ndarray | None = None) -> None:
    """Offer the row copy that joins ``values`` into ``out`` along ``out``'s axis ``a`` as
    the node's kept call (``_kept_rows``), where ``_rows_copied`` would make it: numeric
    values of ``out``'s dtype, two or more, nothing empty; ConcatV2's axis a 0-d array."""
    dt = out.dtype
    if not 1 < len(values) <= 1024 or dt.kind not in "biufc" or not out.size or (
            axis is not None and (axis.__class__ is not np.ndarray or axis.shape != ())):
        return
    if not all(v.__class__ is np.ndarray and v.dtype is dt for v in values):
        return
    outer = math.prod(out.shape[:a])
    if outer:
        ctx.fast = _kept_rows(tuple(v.shape for v in values), dt, out.shape, outer, axis)


def _run_kept(ctx: KernelContext, args: tuple) -> np.ndarray | None:
    """The node's kept call on ``args`` (None: none kept, or not for these inputs)."""
    fast = ctx.fast
    if fast is None:
        return None
    try:
        return fast(*args)
    except (TypeError, ValueError):
        return None


@kernel("ConcatV2", prepared=True)
def concat_v2(ctx: KernelContext, *args: np.ndarray) -> np.ndarray:
    out = _run_kept(ctx, args)
    if out is not None:
        return out
    values, axis = args[:-1], args[-1]
    a = _scalar(axis, "Concat dim tensor")
    out = _concat(values, a)
    if out.ndim:
        _keep_rows(ctx, values, out, a % out.ndim, axis)
    return out


@kernel("Concat")
def concat(ctx: KernelContext, concat_dim: np.ndarray, *values: np.ndarray) -> np.ndarray:
    return _concat(values, _scalar(concat_dim, "Concat dim tensor"))


@kernel("Pack", prepared=True)
def pack(ctx: KernelContext, *values: np.ndarray) -> np.ndarray:
    out = _run_kept(ctx, values)
    if out is not None:
        return out
    first = values[0]
    r = first.ndim + 1
    axis = int(ctx.attrs.get("axis", 0))
    if not -r <= axis < r:
        raise InvalidArgumentError(f"axis = {axis} not in [{-r}, {r})")
    for i, v in enumerate(values[1:], 1):
        if v.shape != first.shape:
            raise InvalidArgumentError(
                f"Shapes of all inputs must match: values[0].shape = {_fmt(first.shape)} != "
                f"values[{i}].shape = {_fmt(v.shape)}")
    a = axis + r if axis < 0 else axis
    out = stacked(values, a)
    _keep_rows(ctx, values, out, a)
    return out


def stacked(values: Sequence[np.ndarray], axis: int) -> np.ndarray:
    """``values`` stacked along a new ``axis`` (0 <= axis <= their rank): numeric
    C-contiguous arrays of one dtype and shape by the compiled row copy (np.stack is a Python
    function of several numpy calls: a recurrent layer's five steps took 8 us), anything else
    by np.stack."""
    shape = np.shape(values[0])
    out = None
    if all(v.__class__ is np.ndarray and v.shape == shape for v in values):
        out = _rows_copied(values, (*shape[:axis], len(values), *shape[axis:]),
                           math.prod(shape[:axis]))
    return np.stack(values, axis=axis) if out is None else out


@kernel("Unpack")
def unpack(ctx: KernelContext, value: np.ndarray) -> tuple[np.ndarray, ...]:
    r = value.ndim
    axis = int(ctx.attrs.get("axis", 0))
    if not -r <= axis < r:
        raise InvalidArgumentError(f"axis = {axis} not in [{-r}, {r})")
    axis = axis + r if axis < 0 else axis
    num = ctx.attrs.get("num")
    n = value.shape[axis]
    if num is not None and num != n:
        raise InvalidArgumentError(
            f"Input shape axis {axis} must equal {num}, got shape {_fmt(value.shape)}")
    return tuple(_drop(value, axis, i) for i in range(n))


def _split_index(axis: int, sizes: Sequence[int]) -> list[tuple]:
    """The index tuple of each piece of a split along ``axis`` into ``sizes``."""
    lead = (slice(None),) * axis
    out, start = [], 0
    for n in sizes:
        out.append(lead + (slice(start, start + n),))
        start += n
    return out


def _split_at(value: np.ndarray, axis: int, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    return tuple(value[ix] for ix in _split_index(axis, sizes))


def _split_plan(split_dim: Any, value: np.ndarray, num: int) -> list[tuple]:
    """The index tuple of each of Split's ``num`` pieces of ``value`` along ``split_dim``,
    after the kernel's checks (TensorFlow's messages)."""
    r = value.ndim
    d = _scalar(split_dim, "split_dim")
    if not -r <= d < r:
        raise InvalidArgumentError(
            f"-input rank(-{r}) <= split_dim < input rank ({r}), but got {d}")
    d = d + r if d < 0 else d
    n = value.shape[d]
    if num <= 0 or n % num:
        raise InvalidArgumentError(
            f"Number of ways to split should evenly divide the split dimension, but got "
            f"split_dim {d} (size = {n}) and num_split {num}")
    return _split_index(d, [n // num] * num)


def _split_key(split_dim: Any, value: np.ndarray) -> tuple | None:
    """What a split's index tuples depend on: the value's shape and the axis's bytes, dtype
    and shape (a recurrent cell splits its gates alike every step)."""
    try:
        return (value.shape, split_dim.tobytes(), split_dim.dtype.char, split_dim.shape)
    except AttributeError:
        return None


def _split_form(attrs: Any) -> Any:
    """Split's array form (compiled programs call it without the kernel call): the kernel's
    own plan and pieces, memoized in the form (one tuple, replaced whole, so two threads
    running one program never see half of it)."""
    num = int(attrs.get("num_split") or 0)
    memo: list = [None]

    def split_pieces(split_dim: Any, value: np.ndarray) -> tuple[np.ndarray, ...]:
        key = _split_key(split_dim, value)
        m = memo[0]
        if m is None or key is None or m[0] != key:
            m = memo[0] = (key, _split_plan(split_dim, value, num))
        return tuple(value[ix] for ix in m[1])

    return split_pieces


# every dtype a Split or StridedSlice moves alike (views of the value), bfloat16 but (ArrayForm
# refuses it)
_SPLIT_TYPES = frozenset({
    D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE, D.DT_INT8, D.DT_UINT8, D.DT_INT16, D.DT_UINT16,
    D.DT_INT32, D.DT_UINT32, D.DT_INT64, D.DT_UINT64, D.DT_COMPLEX64, D.DT_COMPLEX128,
    D.DT_BOOL, D.DT_STRING})


@kernel("Split", array=ArrayForm(_split_form, _SPLIT_TYPES))
def split(ctx: KernelContext, split_dim: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, ...]:
    # the last split's index tuples (KernelContext.memo)
    key = _split_key(split_dim, value)
    m = ctx.memo
    if m is None or key is None or m[0] != key:
        m = (key, _split_plan(split_dim, value, int(ctx.attrs["num_split"])))
        if key is not None:
            ctx.memo = m
    return tuple(value[ix] for ix in m[1])


@kernel("SplitV")
def split_v(ctx: KernelContext, value: np.ndarray, size_splits: np.ndarray,
            split_dim: np.ndarray) -> tuple[np.ndarray, ...]:
    num = int(ctx.attrs["num_split"])
    r = value.ndim
    d = _scalar(split_dim, "split_dim")
    if not -r <= d < r:
        raise InvalidArgumentError(
            f"-input rank(-{r}) <= split_dim < input rank ({r}), but got {d}")
    d = d + r if d < 0 else d
    sizes = _vector(size_splits, "size_splits")
    if len(sizes) != num:
        raise InvalidArgumentError(
            f"Number of split sizes ({len(sizes)}) must equal num_split ({num})")
    n = value.shape[d]
    unknown = [i for i, s in enumerate(sizes) if s == -1]
    if len(unknown) > 1:
        raise InvalidArgumentError("There can only be one -1 in the input.")
    for i, s in enumerate(sizes):
        if s < -1:
            raise InvalidArgumentError(f"Split size at index {i} must be >= 0. Got: {s}")
    known = sum(s for s in sizes if s != -1)
    if (not unknown and known != n) or (unknown and known > n):
        raise InvalidArgumentError(
            "Determined shape must either match input shape along split_dim exactly if fully "
            "specified, or be less than the size of the input along split_dim if not fully "
            f"specified.  Got: {known}")
    if unknown:
        sizes[unknown[0]] = n - known
    return _split_at(value, d, sizes)


# --- slicing --------------------------------------------------------------------------------

@kernel("Slice")
def slice_(ctx: KernelContext, x: np.ndarray, begin: np.ndarray, size: np.ndarray) -> np.ndarray:
    b = np.asarray(begin)
    s = np.asarray(size)
    r = x.ndim
    if b.ndim != 1 or s.ndim != 1 or b.shape[0] != r or s.shape[0] != r:
        raise InvalidArgumentError(
            f"Expected begin and size arguments to be 1-D tensors of size {r}, but got shapes "
            f"{_fmt(b.shape)} and {_fmt(s.shape)} instead.")
    idx = []
    for i, (bi, si) in enumerate(zip(b.tolist(), s.tolist())):
        dim = x.shape[i]
        if si == -1:
            si = dim - bi
        if dim == 0:
            if bi != 0 or si != 0:
                raise InvalidArgumentError(
                    f"Expected begin[{i}] == 0 (got {bi}) and size[{i}] == 0 (got {si}) when "
                    f"input.dim_size({i}) == 0")
        else:
            if not 0 <= bi <= dim:
                raise InvalidArgumentError(f"Expected begin[{i}] in [0, {dim}], but got {bi}")
            if not (0 <= si and bi + si <= dim):
                raise InvalidArgumentError(
                    f"Expected size[{i}] in [0, {dim - bi}], but got {si}")
        idx.append(slice(bi, bi + si))
    return x[tuple(idx)] if idx else x


_NEW_AXIS = -1
_SHRINK = -2


def strided_slice_plan(shape: tuple[int, ...], begin: Sequence[int], end: Sequence[int],
                       strides: Sequence[int], begin_mask: int = 0, end_mask: int = 0,
                       ellipsis_mask: int = 0, new_axis_mask: int = 0,
                       shrink_axis_mask: int = 0) -> tuple[tuple[slice, ...], tuple[int, ...]]:
    """Resolve a StridedSlice spec against ``shape``.

    Returns the per-input-dim python slices and the final output shape (after new axes are
    inserted and shrunk axes removed), following TF's sparse -> dense spec expansion.
    """
    n = len(begin)
    rank = len(shape)
    # Count new axes after the ellipsis: they shorten what the ellipsis covers.
    seen = False
    add_after = 0
    for i in range(n):
        if seen and (new_axis_mask >> i) & 1:
            add_after += 1
        if (ellipsis_mask >> i) & 1:
            if seen:
                raise InvalidArgumentError("Multiple ellipses in slice spec not allowed")
            seen = True
    sparse_dims = n
    if not seen:  # an implicit trailing ellipsis covers the dims the spec leaves out
        ellipsis_mask |= 1 << n
        sparse_dims = n + 1

    d_begin = [0] * rank
    d_end = [0] * rank
    d_stride = [1] * rank
    d_bmask = [False] * rank
    d_emask = [False] * rank
    d_shrink = [False] * rank
    final: list[int] = []
    full = 0
    for i in range(sparse_dims):
        if (ellipsis_mask >> i) & 1:
            nxt = min(rank - (sparse_dims - i) + 1 + add_after, rank)
            while full < nxt:
                d_bmask[full] = d_emask[full] = True
                final.append(full)
                full += 1
        elif (new_axis_mask >> i) & 1:
            final.append(_NEW_AXIS)
        else:
            if full == rank:
                if rank == 0:
                    raise InvalidArgumentError("Attempting to slice scalar input.")
                raise InvalidArgumentError(
                    f"Index out of range using input dim {full}; input has only {rank} dims")
            d_begin[full] = int(begin[i])
            d_end[full] = int(end[i])
            d_stride[full] = int(strides[i])
            d_bmask[full] = bool((begin_mask >> i) & 1)
            d_emask[full] = bool((end_mask >> i) & 1)
            if (shrink_axis_mask >> i) & 1:
                d_shrink[full] = True
                final.append(_SHRINK)
            else:
                final.append(full)
            full += 1

    slices: list[slice] = []
    proc: list[int] = []
    for d in range(rank):
        b, e, s, dim = d_begin[d], d_end[d], d_stride[d], shape[d]
        if s == 0:
            raise InvalidArgumentError(f"strides[{d}] must be non-zero")
        if d_shrink[d]:
            if s <= 0:
                raise InvalidArgumentError("only stride 1 allowed on non-range indexing.")
            bf = b + dim if b < 0 else b
            if not 0 <= bf < dim:
                raise InvalidArgumentError(f"slice index {b} of dimension {d} out of bounds.")
            slices.append(slice(bf, bf + 1))
            proc.append(1)
            continue
        lo, hi = (0, dim) if s > 0 else (-1, dim - 1)
        if d_bmask[d]:
            b = lo if s > 0 else hi
        else:
            b = b + dim if b < 0 else b
            b = min(max(b, lo), hi)
        if d_emask[d]:
            e = hi if s > 0 else lo
        else:
            e = e + dim if e < 0 else e
            e = min(max(e, lo), hi)
        interval = e - b
        if interval == 0 or (interval < 0) != (s < 0):
            n_out = 0
        else:
            n_out = (abs(interval) + abs(s) - 1) // abs(s)
        proc.append(n_out)
        if n_out == 0:
            slices.append(slice(0, 0))
        else:
            # Python slices wrap negative stops, so "before index 0" becomes None.
            stop = b + (n_out - 1) * s + (1 if s > 0 else -1)
            slices.append(slice(b, stop if stop >= 0 else None, s))
    out_shape = tuple(1 if f == _NEW_AXIS else proc[f] for f in final if f != _SHRINK)
    return tuple(slices), out_shape


# A loop body slices the same way every iteration (Keras RNNs: 16 StridedSlices per step):
# resolving the spec costs ~10 us of Python, the cached lookup ~1 us. Errors are not cached.
_strided_slice_plan_cached = functools.lru_cache(maxsize=1024)(strided_slice_plan)


def _strided_slice_key(x: Any, begin: Any, end: Any, strides: Any) -> tuple | None:
    """What a StridedSlice's resolved spec depends on: the input's shape and the spec's
    bytes, dtypes and shapes (never the identity of arrays a caller may change); None when
    they are not arrays (the general path converts them)."""
    try:
        return (x.shape, begin.tobytes(), end.tobytes(), strides.tobytes(), begin.dtype.char,
                end.dtype.char, strides.dtype.char, begin.shape, end.shape, strides.shape)
    except AttributeError:
        return None


def _strided_slice_masks(attrs: Any) -> tuple[int, ...]:
    return tuple(int(attrs.get(m, 0)) for m in (
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"))


def _strided_slice_spec(x: Any, begin: Any, end: Any, strides: Any,
                        masks: tuple[int, ...]) -> tuple:
    """(index, output shape) of a StridedSlice, after the kernel's checks."""
    b, e, s = np.asarray(begin), np.asarray(end), np.asarray(strides)
    if b.ndim != 1 or e.shape != b.shape or s.shape != b.shape:
        raise InvalidArgumentError(
            f"Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{_fmt(b.shape)}, {_fmt(e.shape)}, and {_fmt(s.shape)} instead.")
    return _strided_slice_plan_cached(x.shape, tuple(b.tolist()), tuple(e.tolist()),
                                      tuple(s.tolist()), *masks)


def _strided_slice_form(attrs: Any) -> Any:
    """StridedSlice's array form: the kernel's spec and slicing, the last spec memoized in
    the form (one tuple, replaced whole)."""
    masks = _strided_slice_masks(attrs)
    memo: list = [None]
    known: list = [None]    # (x, begin, end, strides, result) of values that cannot change

    def strided_slice_of(x: np.ndarray, begin: Any, end: Any, strides: Any) -> np.ndarray:
        k = known[0]
        if k is not None and x is k[0] and begin is k[1] and end is k[2] and strides is k[3]:
            return k[4]
        key = _strided_slice_key(x, begin, end, strides)
        m = memo[0]
        if m is None or key is None or m[0] != key:
            m = memo[0] = (key, _strided_slice_spec(x, begin, end, strides, masks))
        slices, out_shape = m[1]
        out = (x[slices] if slices else x).reshape(out_shape)
        if x.ndim == 1 and x.size <= _SMALL_VECTOR and _immutable(x) and _immutable(begin) \
                and _immutable(end) and _immutable(strides):
            known[0] = (x, begin, end, strides, _kept_value(out))
        return out

    return strided_slice_of


@kernel("StridedSlice", array=ArrayForm(_strided_slice_form, _SPLIT_TYPES))
def strided_slice(ctx: KernelContext, x: np.ndarray, begin: np.ndarray, end: np.ndarray,
                  strides: np.ndarray) -> np.ndarray:
    # The node's last resolved spec (KernelContext.memo): a loop body slices alike every
    # iteration, and the resolution is ~3 of the kernel's ~4 us.
    key = _strided_slice_key(x, begin, end, strides)
    m = ctx.memo
    if m is None or key is None or m[0] != key:
        m = (key, _strided_slice_spec(x, begin, end, strides,
                                      _strided_slice_masks(ctx.attrs)))
        if key is not None:
            ctx.memo = m
    slices, out_shape = m[1]
    # x[()] on a 0-d array would give a numpy scalar, not an array.
    return (x[slices] if slices else x).reshape(out_shape)


@kernel("ReverseV2")
def reverse_v2(ctx: KernelContext, tensor: np.ndarray, axis: np.ndarray) -> np.ndarray:
    r = tensor.ndim
    axes = []
    for i, a in enumerate(_vector(axis, "axis")):
        if not -r <= a < r:
            raise InvalidArgumentError(
                f"'axis'[{i}] = {a} is out of valid range [0, {r - 1}]")
        a = a + r if a < 0 else a
        if a in axes:
            raise InvalidArgumentError(f"axis {a} specified more than once.")
        axes.append(a)
    return np.flip(tensor, axis=tuple(axes)) if axes else tensor


@kernel("Reverse")
def reverse(ctx: KernelContext, tensor: np.ndarray, dims: np.ndarray) -> np.ndarray:
    d = np.asarray(dims)
    if d.ndim != 1 or d.shape[0] != tensor.ndim:
        raise InvalidArgumentError(
            f"'dims' must have the same number of values as 'input' has dimensions. 'input' "
            f"has {tensor.ndim}'dims' has {d.size} values")
    axes = tuple(int(i) for i in np.flatnonzero(d))
    return np.flip(tensor, axis=axes) if axes else tensor


# --- builders -------------------------------------------------------------------------------

@kernel("Fill")
def fill(ctx: KernelContext, dims: np.ndarray, value: np.ndarray) -> np.ndarray:
    d = np.asarray(dims)
    if d.ndim != 1:
        raise InvalidArgumentError(f"dims must be a vector, got shape {_fmt(d.shape)}")
    if value.ndim != 0:
        raise InvalidArgumentError(f"value must be a scalar, got shape {_fmt(value.shape)}")
    return np.full(_check_dims(d.tolist()), value, dtype=value.dtype)


@kernel("ZerosLike")
def zeros_like(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    if not isinstance(x, np.ndarray):  # a variant value: its family's handler (OpSpec)
        return lookup("ZerosLike").on_variant(ctx, x)
    if x.dtype == object:
        return np.full(x.shape, b"", dtype=object)
    return np.zeros(x.shape, dtype=x.dtype)


@kernel("OnesLike")
def ones_like(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.ones(x.shape, dtype=x.dtype)


def _range_scalar(x: np.ndarray, what: str) -> np.generic:
    a = np.asarray(x)
    if not (a.ndim == 0 or (a.ndim == 1 and a.shape[0] == 1)):
        raise InvalidArgumentError(f"{what} must be a scalar, not shape {_fmt(a.shape)}")
    return a.reshape(())[()]


@kernel("Range")
def range_(ctx: KernelContext, start: np.ndarray, limit: np.ndarray,
           delta: np.ndarray) -> np.ndarray:
    dt = _attr_dtype(ctx, "Tidx", np.asarray(start).dtype)
    st = dt.type(_range_scalar(start, "start"))
    li = dt.type(_range_scalar(limit, "limit"))
    de = dt.type(_range_scalar(delta, "delta"))
    if not de != 0:
        raise InvalidArgumentError(f"Requires delta != 0: {de}")
    if de > 0:
        if not st <= li:
            raise InvalidArgumentError(f"Requires start <= limit when delta > 0: {st}/{li}")
    elif not st >= li:
        raise InvalidArgumentError(f"Requires start >= limit when delta < 0: {st}/{li}")
    if dt.kind in "iu":
        n = (abs(int(li) - int(st)) + abs(int(de)) - 1) // abs(int(de))
    else:
        with np.errstate(all="ignore"):
            q = np.ceil(np.abs((li - st) / de))  # in the op's own precision, like TF
        if not q <= 2**63 - 1:
            raise InvalidArgumentError(f"Requires ((limit - start) / delta) <= {2**63 - 1}")
        n = int(q)
    if n == 0:
        return np.empty(0, dtype=dt)
    if dt.kind in "iu":
        # every value lies between start and limit, so start + i * delta is exact in the
        # dtype (what TF's running sum gives) and numpy fills it in a vector loop (a running
        # sum of 1M int32 took 2.5 ms, this 0.4)
        out = np.arange(n, dtype=dt)
        out *= de
        out += st
        return out
    # TF's CPU kernel accumulates (val += delta), so floats carry its rounding; a running sum
    # in the op's dtype reproduces it exactly.
    out = np.full(n, de, dtype=dt)
    out[0] = st
    with np.errstate(all="ignore"):
        return np.cumsum(out, dtype=dt, out=out)


def _tile(x: np.ndarray, multiples: np.ndarray) -> np.ndarray:
    """Tile: the kernel, and its array form (a recurrent layer's mask is tiled to the state's
    width every iteration)."""
    m = np.asarray(multiples)
    if m.ndim != 1 or m.shape[0] != x.ndim:
        raise InvalidArgumentError(
            f"Expected multiples argument to be a vector of length {x.ndim} but got length "
            f"{m.size}")
    reps = m.tolist()
    for i, v in enumerate(reps):
        if v < 0:
            raise InvalidArgumentError(f"Expected multiples[{i}] >= 0, but got {v}")
    if x.ndim == 0:
        return np.array(x)
    return np.tile(x, reps)


@kernel("Tile", array=ArrayForm(lambda attrs: _tile, _SPLIT_TYPES - {D.DT_STRING}))
def tile(ctx: KernelContext, x: np.ndarray, multiples: np.ndarray) -> np.ndarray:
    return _tile(x, multiples)


def _paddings(x: np.ndarray, paddings: np.ndarray) -> list[tuple[int, int]]:
    p = np.asarray(paddings)
    if p.ndim != 2 or p.shape[1] != 2:
        raise InvalidArgumentError(
            f"paddings must be a matrix with 2 columns: {_fmt(p.shape)}")
    if p.shape[0] != x.ndim:
        raise InvalidArgumentError(
            f"The first dimension of paddings must be the rank of inputs{_fmt(p.shape)}, "
            f"{_fmt(x.shape)}")
    pads = [(int(a), int(b)) for a, b in p.tolist()]
    for a, b in pads:
        if a < 0 or b < 0:
            raise InvalidArgumentError(f"Paddings must be non-negative: {a} {b}")
    return pads


# From this many output elements a constant pad writes its border (each padded axis's two
# slabs) and the input, where np.full (or np.zeros' fresh pages) wrote every element once
# more: ResNet50's (1,112,112,64) stem pad before its MaxPool, caches cold, 532 -> 383 us
_PAD_BORDER_MIN = 1 << 16


def _pad_layout(shape: tuple, pads: list[tuple[int, int]]) -> tuple[tuple, tuple, tuple]:
    """(output shape, the input's place in it, the border's slabs: per padded axis, the
    index of its leading and trailing pads over the whole extent of the other axes)."""
    out_shape = tuple(d + a + b for d, (a, b) in zip(shape, pads))
    inner = tuple(slice(a, a + d) for d, (a, _) in zip(shape, pads))
    everything = (slice(None),) * len(shape)
    slabs = tuple(everything[:k] + (s,) + everything[k + 1:]
                  for k, (d, (a, b)) in enumerate(zip(shape, pads))
                  for s in ((slice(0, a),) if a else ()) + ((slice(a + d, None),) if b else ()))
    return out_shape, inner, slabs


def _padded(x: np.ndarray, layout: tuple, value: Any) -> np.ndarray:
    out_shape, inner, slabs = layout
    if math.prod(out_shape) < _PAD_BORDER_MIN or x.dtype == object:
        out = np.full(out_shape, value, dtype=x.dtype)
    else:
        out = np.empty(out_shape, dtype=x.dtype)
        for s in slabs:
            out[s] = value
    out[inner] = x
    return out


def _pad_constant(x: np.ndarray, pads: list[tuple[int, int]], value: Any) -> np.ndarray:
    return _padded(x, _pad_layout(x.shape, pads), value)


@kernel("Pad")
def pad(ctx: KernelContext, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    m = ctx.memo
    if m is not None and m[0] is paddings and m[1] == x.shape and m[2] is x.dtype:
        # the output's layout, kept while the paddings are the same Const (frozen) and x's
        # shape and dtype the same
        return _padded(x, m[3], 0)
    pads = _paddings(x, paddings)
    if x.dtype == object:
        return _pad_constant(x, pads, b"")
    layout = _pad_layout(x.shape, pads)
    if frozen(paddings):
        ctx.memo = (paddings, x.shape, x.dtype, layout)
    return _padded(x, layout, 0)


@kernel("PadV2")
def pad_v2(ctx: KernelContext, x: np.ndarray, paddings: np.ndarray,
           constant_values: np.ndarray) -> np.ndarray:
    pads = _paddings(x, paddings)
    if np.ndim(constant_values) != 0:
        raise InvalidArgumentError(
            f"constant_values must be a scalar. Found: {_fmt(np.shape(constant_values))}")
    return _pad_constant(x, pads, np.asarray(constant_values).reshape(())[()])


@kernel("MirrorPad")
def mirror_pad(ctx: KernelContext, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    mode = str(ctx.attrs.get("mode", "")).upper()
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise InvalidArgumentError(f"mode must be either REFLECT or SYMMETRIC, not {mode}")
    pads = _paddings(x, paddings)
    offset = 1 if mode == "REFLECT" else 0
    for d, (a, b) in zip(x.shape, pads):
        if max(a, b) > d - offset:
            if offset:
                raise InvalidArgumentError(
                    f"paddings must be less than the dimension size: {a}, {b} not less than "
                    f"{d}")
            raise InvalidArgumentError(
                f"paddings must be no greater than the dimension size: {a}, {b} greater than "
                f"{d}")
    if not any(a or b for a, b in pads):
        return x
    return np.pad(x, pads, mode="reflect" if offset else "symmetric")


@kernel("MirrorPadGrad")
def mirror_pad_grad(ctx: KernelContext, dy: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    """The gradient of MirrorPad: each padded element's gradient added back to the element it
    mirrors, then the padding cut off."""
    mode = str(ctx.attrs.get("mode", "")).upper()
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise InvalidArgumentError(f"mode must be either REFLECT or SYMMETRIC, not {mode}")
    pads = _paddings(dy, paddings)
    offset = 1 if mode == "REFLECT" else 0
    out = dy
    for axis, (a, b) in enumerate(pads):
        n = out.shape[axis] - a - b
        if n < 0 or max(a, b) > n - offset:
            raise InvalidArgumentError(
                f"paddings {a}, {b} do not fit dimension {axis} of size {out.shape[axis]} "
                f"in {mode} mode")
        if not (a or b):
            continue
        moved = np.moveaxis(out, axis, 0)
        grad = moved[a:a + n].copy()
        # padded[j] = orig[a - j - 1 + offset] on the left, orig[n - 1 - offset - k] right
        np.add.at(grad, a - np.arange(a) - 1 + offset, moved[:a])
        np.add.at(grad, n - 1 - offset - np.arange(b), moved[a + n:])
        out = np.moveaxis(grad, 0, axis)
    return np.ascontiguousarray(out)


@kernel("BroadcastTo")
def broadcast_to(ctx: KernelContext, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    target = _check_dims(_vector(shape, "shape"))
    if x.ndim > len(target):
        raise InvalidArgumentError(
            f"Rank of input ({x.ndim}) must be no greater than rank of output shape "
            f"({len(target)}).")
    if x.shape == target:
        return x
    try:
        y = np.broadcast_to(x, target)
    except ValueError:
        raise InvalidArgumentError(
            f"Unable to broadcast tensor of shape {_fmt(x.shape)} to tensor of shape "
            f"{_fmt(target)}") from None
    # A real array: zero-stride read-only views surprise consumers that expect TF buffers.
    return np.array(y)


@kernel("BroadcastArgs", cheap=True)
def broadcast_args(ctx: KernelContext, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    for i, s in enumerate((s0, s1)):
        if s.ndim != 1:
            raise InvalidArgumentError(f"In[{i}] must be a vector.{_fmt(s.shape)}")
    a, b = s0.tolist(), s1.tolist()
    try:
        out = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        raise InvalidArgumentError(f"Incompatible shapes: {_fmt(a)} vs. {_fmt(b)}") from None
    return np.array(out, dtype=s0.dtype)


# --- gathering and scattering ---------------------------------------------------------------

def _check_indices(idx: np.ndarray, limit: int) -> None:
    """Raise TF's CPU error for the first index outside [0, limit)."""
    if idx.size == 0:
        return
    bad = (idx < 0) | (idx >= limit)
    if bad.any():
        pos = np.unravel_index(int(np.argmax(bad.reshape(-1))), idx.shape)
        where = _fmt(pos) if idx.ndim else ""
        raise InvalidArgumentError(
            f"indices{where} = {int(idx[pos])} is not in [0, {limit})")


def _gather(params: np.ndarray, indices: np.ndarray, axis: int, batch_dims: int) -> np.ndarray:
    if params.ndim < 1:
        raise InvalidArgumentError("params must be at least 1 dimensional")
    axis = _axis(axis, params.ndim)
    if batch_dims != 0:
        ir = indices.ndim
        if not -ir <= batch_dims <= ir:
            raise InvalidArgumentError(
                f"Expected batch_dims in the range [{-ir}, {ir}], but got {batch_dims}")
        if batch_dims < 0:
            batch_dims += ir
        if batch_dims >= params.ndim:
            raise InvalidArgumentError(
                f"batch_dims ({batch_dims}) must be less than rank(params) ({params.ndim}).")
        if axis < batch_dims:
            raise InvalidArgumentError(
                f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis}).")
        for i in range(batch_dims):
            if params.shape[i] != indices.shape[i]:
                raise InvalidArgumentError(
                    f"params.shape[{i}]: {params.shape[i]} should be equal to "
                    f"indices.shape[{i}]: {indices.shape[i]}")
    limit = params.shape[axis]
    if batch_dims == 0:
        # np.take checks the bounds itself (mode "raise"); a negative int32 index, seen as
        # unsigned, is out of them too. Only then are the indices looked at for TF's error:
        # checking first cost as much as the gather (an embedding's (16, 40) ids: 14.7 ->
        # 6 us)
        ix = indices.view(np.uint32) if indices.dtype == np.int32 else None
        if ix is None:
            _check_indices(indices, limit)
            ix = indices.astype(np.intp, copy=False)
        try:
            out = np.take(params, ix, axis=axis)
        except IndexError:
            _check_indices(indices, limit)
            raise
        return _as_array(out, params.dtype)
    _check_indices(indices, limit)
    # Fold into [batch, outer, gathered, inner] so one fancy-index does every batch.
    bshape = params.shape[:batch_dims]
    oshape = params.shape[batch_dims:axis]
    ishape = params.shape[axis + 1:]
    jshape = indices.shape[batch_dims:]
    nb = math.prod(bshape)
    no = math.prod(oshape)
    nj = math.prod(jshape)
    ni = math.prod(ishape)
    p = params.reshape(nb, no, limit, ni)
    ix = indices.reshape(nb, nj).astype(np.intp, copy=False)
    res = p[np.arange(nb)[:, None, None], np.arange(no)[None, :, None], ix[:, None, :]]
    return res.reshape(bshape + oshape + jshape + ishape)


def _same_scalar(x: Any, dt: np.dtype, v: int) -> bool:
    """Whether ``x`` is a 0-d array of dtype ``dt`` holding ``v``."""
    return x.__class__ is np.ndarray and x.shape == () and x.dtype is dt and int(x) == v


def _kept_gather(params: np.ndarray, indices: np.ndarray, axis: np.ndarray,
                 a: int) -> Any:
    """A GatherV2 node's ``ctx.fast`` after the kernel gathered ``indices`` (checked in
    bounds) from ``params`` along ``a``: the same ``np.take`` for params of that shape and
    dtype, the same indices (the frozen array itself, or a 0-d one of the same value) and a
    0-d axis of the same value and dtype; None for anything else. Keras's Tensordot gathers
    from shape vectors twice a Dense layer on images (ConvNeXt: 20 a step, 11 us each, most
    of it checking indices that cannot change)."""
    shape, dt, adt, av = params.shape, params.dtype, axis.dtype, int(axis)
    ix = indices.astype(np.intp)
    scalar = indices.shape == ()
    idt, iv = (indices.dtype, int(indices)) if scalar else (None, 0)

    def fast(p: Any, i: Any, x: Any) -> np.ndarray | None:
        if p.__class__ is not np.ndarray or p.dtype is not dt or p.shape != shape or (
                i is not indices and not (scalar and _same_scalar(i, idt, iv))) or \
                not _same_scalar(x, adt, av):
            return None
        return _as_array(np.take(p, ix, axis=a), dt)
    return fast


@kernel("GatherV2", prepared=True)
def gather_v2(ctx: KernelContext, params: np.ndarray, indices: np.ndarray,
              axis: np.ndarray) -> np.ndarray:
    out = _run_kept(ctx, (params, indices, axis))
    if out is not None:
        return out
    a = _scalar(axis, "axis")
    batch_dims = int(ctx.attrs.get("batch_dims", 0))
    out = _gather(params, indices, a, batch_dims)
    if batch_dims == 0 and params.__class__ is np.ndarray and indices.__class__ is np.ndarray \
            and axis.__class__ is np.ndarray and axis.shape == () and \
            (indices.shape == () or frozen(indices)):
        ctx.fast = _kept_gather(params, indices, axis, _axis(a, params.ndim))
    return out


@kernel("Gather")
def gather(ctx: KernelContext, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return _gather(params, indices, 0, 0)


def _nd_indices(ctx: KernelContext, indices: np.ndarray, shape: tuple[int, ...],
                what: str) -> tuple[np.ndarray, np.ndarray]:
    """GatherNd/ScatterNd indices as rows of int64 and a mask of the rows outside ``shape``;
    an out-of-range row is an error unless bad_indices_policy is IGNORE."""
    lead, k = indices.shape[:-1], indices.shape[-1]
    idx = indices.reshape(math.prod(lead), k).astype(np.int64, copy=False)
    bad = ((idx < 0) | (idx >= np.array(shape[:k], dtype=np.int64))).any(axis=1)
    if bad.any() and str(ctx.attrs.get("bad_indices_policy", "") or "") != "IGNORE":
        i = int(np.argmax(bad))
        pos = np.unravel_index(i, lead) if lead else ()
        raise InvalidArgumentError(
            f"indices{_fmt(pos)} = {_fmt(idx[i])} does not index into {what} {_fmt(shape)}")
    return idx, bad


@kernel("GatherNd")
def gather_nd(ctx: KernelContext, params: np.ndarray, indices: np.ndarray) -> np.ndarray:
    if params.ndim < 1:
        raise InvalidArgumentError(f"params must be at least a vector: {_fmt(params.shape)}")
    if indices.ndim < 1:
        raise InvalidArgumentError(f"indices must be at least a vector: {_fmt(indices.shape)}")
    k = indices.shape[-1]
    if k > params.ndim:
        raise InvalidArgumentError(
            f"index innermost dimension length must be <= params rank; saw: {k} vs. "
            f"{params.ndim}")
    lead = indices.shape[:-1]
    rest = params.shape[k:]
    n = math.prod(lead)
    if k == 0:
        if n and params.size == 0:
            raise InvalidArgumentError(
                f"Requested more than 0 entries, but params is empty.  Params shape: "
                f"{_fmt(params.shape)}")
        return np.array(np.broadcast_to(params, lead + params.shape))
    idx, bad = _nd_indices(ctx, indices, params.shape, "param shape")
    slots = math.prod(params.shape[:k])
    if slots == 0:  # every index is out of range here, so only IGNORE gets this far
        return np.zeros(lead + rest, dtype=params.dtype)
    flat = params.reshape((slots,) + rest)
    if bad.any():  # IGNORE policy: gather a valid row, then zero it
        idx = np.where(bad[:, None], 0, idx)
    out = flat[np.ravel_multi_index(tuple(idx.T), params.shape[:k])]
    if bad.any():
        out[bad] = 0
    return out.reshape(lead + rest)


@kernel("ScatterNd")
def scatter_nd(ctx: KernelContext, indices: np.ndarray, updates: np.ndarray,
               shape: np.ndarray) -> np.ndarray:
    out_shape = _check_dims(_vector(shape, "Shape"))
    if indices.ndim < 1:
        raise InvalidArgumentError(f"Indices shape must have rank at least one. Found: "
                                   f"{_fmt(indices.shape)}")
    k = indices.shape[-1]
    if k > len(out_shape):
        raise InvalidArgumentError(
            f"Output must have rank at least {k} (the last dimension of indices), but got "
            f"shape {_fmt(out_shape)}")
    lead = indices.shape[:-1]
    expect = lead + out_shape[k:]
    if updates.shape != expect:
        raise InvalidArgumentError(
            f"Updates shape {_fmt(updates.shape)} must equal indices.shape[:-1] + "
            f"shape[indices.shape[-1]:] = {_fmt(expect)} (indices shape "
            f"{_fmt(indices.shape)}, output shape {_fmt(out_shape)})")
    n = math.prod(lead)
    if n and math.prod(out_shape) == 0:
        raise InvalidArgumentError(
            f"Indices and updates specified for empty output shape {_fmt(out_shape)}")
    idx, bad = _nd_indices(ctx, indices, out_shape, "shape")
    inner = math.prod(out_shape[k:])
    slots = math.prod(out_shape[:k])
    out = np.zeros((slots, inner), dtype=updates.dtype)
    if n:
        keep = ~bad
        lin = np.ravel_multi_index(tuple(idx[keep].T), out_shape[:k]) if k else \
            np.zeros(int(keep.sum()), dtype=np.int64)
        upd = updates.reshape(n, inner)[keep]
        # Duplicate indices accumulate, like TF's ScatterNd.
        if out.dtype == np.bool_:
            np.logical_or.at(out, lin, upd)
        else:
            np.add.at(out, lin, upd)
    return out.reshape(out_shape)


@kernel("OneHot")
def one_hot(ctx: KernelContext, indices: np.ndarray, depth: np.ndarray, on_value: np.ndarray,
            off_value: np.ndarray) -> np.ndarray:
    axis = int(ctx.attrs.get("axis", -1))
    out_rank = indices.ndim + 1
    if axis != -1 and not 0 <= axis < out_rank:
        raise InvalidArgumentError(
            f"Expected axis to be -1 or between [0, {out_rank}).  But received: {axis}")
    if np.ndim(depth) != 0:
        raise InvalidArgumentError(f"depth must be a scalar, but got: {_fmt(np.shape(depth))}")
    if np.ndim(on_value) != 0:
        raise InvalidArgumentError(
            f"on_value must be a scalar, but got: {_fmt(np.shape(on_value))}")
    if np.ndim(off_value) != 0:
        raise InvalidArgumentError(
            f"off_value must be a scalar, but got: {_fmt(np.shape(off_value))}")
    n = int(depth)
    if n < 0:
        raise InvalidArgumentError(f"depth must be non-negative, got: {n}")
    a = indices.ndim if axis == -1 else axis
    # Compare in the output layout directly; labels outside [0, depth) match nothing.
    lab = np.expand_dims(indices, a)
    ks = np.arange(n).reshape((1,) * a + (n,) + (1,) * (out_rank - a - 1))
    return np.where(lab == ks, on_value, off_value).astype(on_value.dtype, copy=False)


@kernel("Where")
def where(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.argwhere(x).astype(np.int64, copy=False)


# --- sorting and indexing -------------------------------------------------------------------

def _arg_reduce(x: np.ndarray, dimension: np.ndarray, out_type: np.dtype, is_max: bool,
                ) -> np.ndarray:
    a = np.asarray(dimension)
    if a.ndim != 0:
        raise InvalidArgumentError(
            f"dim must be a scalar, but received tensor of shape: {_fmt(a.shape)}")
    axis = _axis(int(a), x.ndim, "dimension")
    if x.shape[axis] == 0:
        raise InvalidArgumentError(f"Reduction axis {axis} is empty in shape {_fmt(x.shape)}")
    if x.dtype.kind == "f":
        # TF's CPU reducer starts from (index 0, lowest finite) and only replaces on a strict
        # improvement, so NaNs never win and values beyond the finite range tie with index 0.
        # Clamping NaN and +-inf to that bound reproduces it while numpy keeps first-wins ties.
        fi = np.finfo(x.dtype)
        x = np.fmax(x, fi.min) if is_max else np.fmin(x, fi.max)
    r = np.argmax(x, axis=axis) if is_max else np.argmin(x, axis=axis)
    return np.asarray(r).astype(out_type, copy=False)


@kernel("ArgMax")
def arg_max(ctx: KernelContext, x: np.ndarray, dimension: np.ndarray) -> np.ndarray:
    return _arg_reduce(x, dimension, np.dtype(ctx.attrs["output_type"]), True)


@kernel("ArgMin")
def arg_min(ctx: KernelContext, x: np.ndarray, dimension: np.ndarray) -> np.ndarray:
    return _arg_reduce(x, dimension, np.dtype(ctx.attrs["output_type"]), False)


@kernel("TopKV2")
def top_k_v2(ctx: KernelContext, x: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if np.ndim(k) != 0:
        raise InvalidArgumentError(f"k must be scalar, got shape {_fmt(np.shape(k))}")
    kk = int(k)
    if kk < 0:
        raise InvalidArgumentError(f"Need k >= 0, got {kk}")
    if x.ndim < 1:
        raise InvalidArgumentError(f"input must be >= 1-D, got shape {_fmt(x.shape)}")
    n = x.shape[-1]
    if n < kk:
        raise InvalidArgumentError(
            f"input must have at least k columns. Had {n}, needed {kk}")
    idx_type = _attr_dtype(ctx, "index_type", np.int32)
    # Stable ascending sort of the reversed row, read backwards: descending order with ties
    # broken towards the lower index, for every dtype (no negation overflow for ints).
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :kk]
    idx = (n - 1) - order
    if kk > 1 and x.dtype.kind == "f" and x.size:
        # NaN compares false both ways: where it lands is the algorithm's doing
        rows = x.reshape(-1, n)
        nan_rows = np.flatnonzero(np.isnan(rows).any(axis=1))
        if nan_rows.size:
            flat_idx = idx.reshape(-1, kk)
            keep_order = bool(ctx.attrs.get("sorted", True))
            for r in nan_rows.tolist():
                row = rows[r].tolist()
                flat_idx[r] = (_sorted_like_tf(row) if kk == n
                               else _top_n_like_tf(row, kk, keep_order))
    vals = np.take_along_axis(x, idx, axis=-1)
    return vals, idx.astype(idx_type)


def _top_n_like_tf(row: list, k: int, keep_order: bool) -> list[int]:
    """TopKV2's k < n indices of a row as TensorFlow's CPU kernel picks them: gtl::TopN of
    the indices under 'greater value, or equal and lower index' (_stdalgo.TopN)."""
    from ._stdalgo import TopN

    top = TopN(k, lambda a, b: row[b] < row[a] or (not row[b] > row[a] and a < b))
    for c in range(len(row)):
        top.push(c)
    return top.extract() if keep_order else list(top.elements)


def _sorted_like_tf(row: list) -> list[int]:
    """TopKV2's order of a whole row as TensorFlow's CPU kernel makes it: std::sort of the
    indices by value, descending (libstdc++'s introsort, _stdalgo), then each run of equal
    values put in index order."""
    from ._stdalgo import StdHeap

    order = list(range(len(row)))
    StdHeap(lambda a, b: row[b] < row[a]).sort(order)
    i = 0
    while i < len(order) - 1:
        j = i + 1
        while j < len(order) and row[order[j]] == row[order[i]]:
            j += 1
        if j - i > 1:
            order[i:j] = sorted(order[i:j])
        i = j
    return order


@kernel("TopK")
def top_k(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from ..kernel_call import call_op

    return tuple(call_op(ctx, "TopKV2", [x, np.asarray(int(ctx.attrs["k"]), np.int32)],
                         {"sorted": ctx.attrs.get("sorted", True), "index_type": np.int32}))


def _unique(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if x.ndim != 1:
        raise InvalidArgumentError(f"unique expects a 1D vector, got shape {_fmt(x.shape)}")
    if x.size == 0:
        e = np.zeros(0, dtype=np.int64)
        return x.copy(), e, e
    kw = {"equal_nan": False} if x.dtype.kind in "fc" else {}
    # np.unique sorts; TF keeps first-occurrence order, so renumber by first index.
    vals, first, inv, counts = np.unique(x, return_index=True, return_inverse=True,
                                         return_counts=True, **kw)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    return x[first[order]], rank_of[inv.reshape(-1)], counts[order]


@kernel("Unique")
def unique(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y, idx, _ = _unique(x)
    return y, idx.astype(_attr_dtype(ctx, "out_idx", np.int32))


@kernel("UniqueWithCounts")
def unique_with_counts(ctx: KernelContext, x: np.ndarray,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, idx, cnt = _unique(x)
    out_idx = _attr_dtype(ctx, "out_idx", np.int32)
    return y, idx.astype(out_idx), cnt.astype(out_idx)


# --- matrices and space/depth ---------------------------------------------------------------

@kernel("MatrixDiag")
def matrix_diag(ctx: KernelContext, diagonal: np.ndarray) -> np.ndarray:
    if diagonal.ndim < 1:
        raise InvalidArgumentError(
            f"input must be at least 1-dim, received shape: {_fmt(diagonal.shape)}")
    n = diagonal.shape[-1]
    out = np.zeros(diagonal.shape + (n,), dtype=diagonal.dtype)
    i = np.arange(n)
    out[..., i, i] = diagonal
    return out


@kernel("MatrixDiagPart")
def matrix_diag_part(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    if x.ndim < 2:
        raise InvalidArgumentError(
            f"input must be at least 2-dim, received shape: {_fmt(x.shape)}")
    return np.diagonal(x, axis1=-2, axis2=-1).copy()


@kernel("MatrixBandPart")
def matrix_band_part(ctx: KernelContext, x: np.ndarray, num_lower: np.ndarray,
                     num_upper: np.ndarray) -> np.ndarray:
    if x.ndim < 2:
        raise InvalidArgumentError(
            f"input must be at least 2-dim, received shape: {_fmt(x.shape)}")
    rows, cols = x.shape[-2:]
    for name, v in (("num_lower", num_lower), ("num_upper", num_upper)):
        if np.ndim(v) != 0:
            raise InvalidArgumentError(f"{name} must be scalar, got shape {_fmt(np.shape(v))}")
    lo, up = int(num_lower), int(num_upper)
    if lo > rows:
        raise InvalidArgumentError(
            f"num_lower must be negative or less or equal to number of rows ({rows}) got: {lo}")
    if up > cols:
        raise InvalidArgumentError(
            f"num_upper must be negative or less or equal to number of columns ({cols}) got: "
            f"{up}")
    diff = np.arange(rows)[:, None] - np.arange(cols)[None, :]  # i - j
    keep = np.ones((rows, cols), dtype=bool)
    if lo >= 0:
        keep &= diff <= lo
    if up >= 0:
        keep &= -diff <= up
    return np.where(keep, x, np.zeros((), dtype=x.dtype))


def _nhwc_block(ctx: KernelContext, x: np.ndarray) -> int:
    fmt = str(ctx.attrs.get("data_format", "NHWC") or "NHWC")
    if fmt != "NHWC":
        raise InvalidArgumentError(f"Only NHWC data_format supported on CPU. Got {fmt}")
    if x.ndim != 4:
        raise InvalidArgumentError(f"Input rank should be: 4 instead of: {x.ndim}")
    b = int(ctx.attrs["block_size"])
    if b < 2:
        raise InvalidArgumentError(
            f"Value for attr 'block_size' of {b} must be at least minimum 2")
    return b


@kernel("SpaceToDepth")
def space_to_depth(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    b = _nhwc_block(ctx, x)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise InvalidArgumentError(
            f"Image width {w} and height {h} should be divisible by block_size: {b}")
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h // b, w // b, b * b * c)


@kernel("DepthToSpace")
def depth_to_space(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    b = _nhwc_block(ctx, x)
    n, h, w, c = x.shape
    if c % (b * b):
        raise InvalidArgumentError(
            f"Input depth dimension {c} should be divisible by: {b * b}")
    oc = c // (b * b)
    y = x.reshape(n, h, w, b, b, oc).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * b, w * b, oc)


# --- space/batch with blocks (atrous convolution) -------------------------------------------

def _block_args(x: np.ndarray, block_shape: np.ndarray, pads: np.ndarray,
                what: str) -> tuple[list[int], np.ndarray]:
    """Validated block sizes and the [M, 2] paddings (or crops) of the *ToBatchND ops."""
    bs = np.asarray(block_shape)
    if bs.ndim != 1:
        raise InvalidArgumentError(f"block_shape rank should be 1 instead of {bs.ndim}")
    m = bs.shape[0]
    p = np.asarray(pads)
    if p.shape != (m, 2):
        raise InvalidArgumentError(
            f"{what} should have shape [{m}, 2] instead of {_fmt(p.shape)}")
    if x.ndim < 1 + m:
        raise InvalidArgumentError(f"input rank should be >= {1 + m} instead of {x.ndim}")
    return [int(b) for b in bs.tolist()], p.astype(np.int64).reshape(m, 2)


@kernel("SpaceToBatchND")
def space_to_batch_nd(ctx: KernelContext, x: np.ndarray, block_shape: np.ndarray,
                      paddings: np.ndarray) -> np.ndarray:
    block, pads = _block_args(x, block_shape, paddings, "paddings")
    m = len(block)
    for i, b in enumerate(block):
        if b < 1:
            raise InvalidArgumentError(
                f"All values in block_shape must be positive, got value, {b} at index {i}.")
    if (pads < 0).any():
        raise InvalidArgumentError("Paddings must be non-negative")
    padded = [x.shape[1 + i] + int(pads[i, 0]) + int(pads[i, 1]) for i in range(m)]
    for i, (p, b) in enumerate(zip(padded, block)):
        if p % b:
            raise InvalidArgumentError(
                f"padded_shape[{i}]={p} is not divisible by block_shape[{i}]={b}")
    if pads.any():
        x = np.pad(x, [(0, 0)] + [tuple(r) for r in pads.tolist()]
                   + [(0, 0)] * (x.ndim - 1 - m))
    n, rest = x.shape[0], x.shape[1 + m:]
    # Split each padded dim into (outer, block), then move every block axis in front of the
    # batch: the output batch index is block_offset * batch + b, row-major over the blocks.
    split = [n] + [d for p, b in zip(padded, block) for d in (p // b, b)] + list(rest)
    perm = ([2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
            + list(range(1 + 2 * m, 1 + 2 * m + len(rest))))
    out_shape = (n * math.prod(block),) + tuple(p // b for p, b in zip(padded, block)) + rest
    return _contiguous(x.reshape(split).transpose(perm)).reshape(out_shape)


def _square_block(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """block_shape [b, b] of SpaceToBatch/BatchToSpace (attr block_size, 4-D input)."""
    block = int(ctx.attrs.get("block_size", 0))
    if block < 2:
        raise InvalidArgumentError(f"Block size should be > 1: {block}")
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional, found rank {x.ndim}")
    return np.array([block, block], np.int64)


@kernel("SpaceToBatch")
def space_to_batch(ctx: KernelContext, x: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    """The 4-D form of SpaceToBatchND with a square block."""
    return space_to_batch_nd(ctx, x, _square_block(ctx, x), paddings)


@kernel("BatchToSpace")
def batch_to_space(ctx: KernelContext, x: np.ndarray, crops: np.ndarray) -> np.ndarray:
    """The 4-D form of BatchToSpaceND with a square block."""
    return batch_to_space_nd(ctx, x, _square_block(ctx, x), crops)


@kernel("BatchToSpaceND")
def batch_to_space_nd(ctx: KernelContext, x: np.ndarray, block_shape: np.ndarray,
                      crops: np.ndarray) -> np.ndarray:
    block, cr = _block_args(x, block_shape, crops, "crops")
    m = len(block)
    prod = math.prod(block)
    if prod <= 0:
        raise InvalidArgumentError(f"Product of block sizes must be positive, got {prod}")
    for i, b in enumerate(block):
        if b < 1:
            raise InvalidArgumentError(
                f"All values in block_shape must be positive, got value, {b} at index {i}.")
    if (cr < 0).any():
        raise InvalidArgumentError("Crops must be non-negative")
    if x.shape[0] % prod:
        raise InvalidArgumentError(
            f"Input batch dimension ({x.shape[0]}) is not divisible by product of block "
            f"sizes ({prod})")
    n = x.shape[0] // prod
    spatial, rest = x.shape[1:1 + m], x.shape[1 + m:]
    full = [s * b for s, b in zip(spatial, block)]
    for i in range(m):
        c = full[i] - int(cr[i, 0]) - int(cr[i, 1])
        if c < 0:
            raise InvalidArgumentError(f"cropped_shape[{i}]={c} must be non-negative")
    # The inverse of SpaceToBatchND's layout: interleave each block axis after its spatial one.
    y = x.reshape(tuple(block) + (n,) + spatial + rest)
    perm = ([m] + [a for i in range(m) for a in (m + 1 + i, i)]
            + list(range(2 * m + 1, 2 * m + 1 + len(rest))))
    y = y.transpose(perm).reshape((n,) + tuple(full) + rest)
    idx = (slice(None),) + tuple(slice(int(cr[i, 0]), full[i] - int(cr[i, 1]))
                                 for i in range(m))
    return _contiguous(y[idx])


# --- sequences and concat offsets -------------------------------------------------------------

@kernel("LinSpace")
def lin_space(ctx: KernelContext, start: np.ndarray, stop: np.ndarray,
              num: np.ndarray) -> np.ndarray:
    for name, v in (("start", start), ("stop", stop), ("num", num)):
        if np.ndim(v) != 0:
            raise InvalidArgumentError(
                f"{name} must be a scalar, not shape {_fmt(np.shape(v))}")
    n = int(num)
    if n <= 0:
        raise InvalidArgumentError(f"Requires num > 0: {n}")
    dt = start.dtype
    t = dt.type
    out = np.empty(n, dtype=dt)
    if n == 1:
        out[0] = start
        return out
    # TF's arithmetic in T: start + step * i for all but the last, which is exactly stop.
    step = (stop - start) / t(n - 1)
    out[:-1] = start + step * np.arange(n - 1).astype(dt)
    out[-1] = stop
    return out


@kernel("ConcatOffset", cheap=True)
def concat_offset(ctx: KernelContext, concat_dim: np.ndarray,
                  *shapes: np.ndarray) -> tuple[np.ndarray, ...]:
    if np.ndim(concat_dim) != 0:
        raise InvalidArgumentError(
            f"Concat dim tensor should be a scalar integer, but got shape "
            f"{_fmt(np.shape(concat_dim))}")
    first = shapes[0]
    if first.ndim != 1:
        raise InvalidArgumentError(
            f"input 0 should be a vector, but got shape {_fmt(first.shape)}")
    rank = first.shape[0]
    for i, s in enumerate(shapes[1:], 1):
        if s.ndim != 1 or s.shape[0] != rank:
            raise InvalidArgumentError(
                f"input {i} should contain {rank} elements, but got {s.size}")
    axis = int(concat_dim)
    if not -rank <= axis < rank:
        raise InvalidArgumentError(f"Concat dim is out of range: {axis} vs. {rank}")
    if axis < 0:
        axis += rank
    table = np.stack(shapes)                      # [N, rank]
    other = np.delete(table, axis, axis=1)
    bad = (other != other[0]).any(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(
            f"All dimensions except {axis} must match. Input {i} has shape "
            f"[{' '.join(map(str, table[i].tolist()))}] and doesn't match input 0 with shape "
            f"[{' '.join(map(str, table[0].tolist()))}].")
    offsets = np.zeros_like(table)
    offsets[1:, axis] = np.cumsum(table[:-1, axis])
    return tuple(offsets[i] for i in range(len(shapes)))


# --- TensorScatter* -----------------------------------------------------------------------------

def _tensor_scatter(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                    updates: np.ndarray, combine: Any) -> np.ndarray:
    """Copy of ``tensor`` with ``updates`` combined into the slices ``indices`` name.

    ``combine`` is None for a plain assignment (the last duplicate wins, as TF's serial CPU
    loop does) or a ufunc whose ``at`` applies duplicates one after the other.
    """
    if indices.ndim < 1:
        raise InvalidArgumentError(
            f"Indices shape must have rank at least one. Found:{_fmt(indices.shape)}")
    if updates.ndim < 1:
        raise InvalidArgumentError(
            f"Updates shape must have rank at least one. Found:{_fmt(updates.shape)}")
    if not ((indices.size == 0 and updates.size == 0)
            or (tensor.size and indices.size and updates.size)):
        raise InvalidArgumentError("Indices and updates specified for empty output shape")
    if tensor.ndim < 1:
        raise InvalidArgumentError(
            f"Output must be at least 1-D, got shape: {_fmt(tensor.shape)}")
    outer = indices.ndim - 1
    if indices.shape[:outer] != updates.shape[:outer]:
        raise InvalidArgumentError(
            f"Outer dimensions of indices and update must match. Indices shape: "
            f"{_fmt(indices.shape)}, updates shape:{_fmt(updates.shape)}")
    k = indices.shape[-1]
    if updates.ndim - outer != tensor.ndim - k:
        raise InvalidArgumentError(
            f"Inner dimensions of output shape must match inner dimensions of updates shape. "
            f"Output: {_fmt(tensor.shape)} updates: {_fmt(updates.shape)}")
    if updates.shape[outer:] != tensor.shape[k:]:
        n_in = tensor.ndim - k
        raise InvalidArgumentError(
            f"The inner {n_in} dimensions of output.shape={_fmt(tensor.shape)} must match the "
            f"inner {n_in} dimensions of updates.shape={_fmt(updates.shape)}")
    out = tensor.copy()
    lead = indices.shape[:-1]
    n = math.prod(lead)
    if n == 0:
        return out
    idx = indices.reshape(n, k).astype(np.int64, copy=False)
    dims = np.array(tensor.shape[:k], dtype=np.int64)
    bad = ((idx < 0) | (idx >= dims)).any(axis=1)
    if bad.any() and str(ctx.attrs.get("bad_indices_policy", "") or "") != "IGNORE":
        i = int(np.argmax(bad))
        pos = np.unravel_index(i, lead) if lead else ()
        raise InvalidArgumentError(
            f"indices{_fmt(pos)} = {_fmt(idx[i])} does not index into shape "
            f"{_fmt(tensor.shape)}")
    keep = ~bad
    lin = np.ravel_multi_index(tuple(idx[keep].T), tensor.shape[:k]) if k else \
        np.zeros(int(keep.sum()), dtype=np.int64)
    flat = out.reshape((math.prod(tensor.shape[:k]), -1))
    upd = updates.reshape(n, -1)[keep]
    if combine is None:
        flat[lin] = upd
    else:
        combine.at(flat, lin, upd)
    return out


@kernel("TensorScatterUpdate")
def tensor_scatter_update(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                          updates: np.ndarray) -> np.ndarray:
    return _tensor_scatter(ctx, tensor, indices, updates, None)


@kernel("TensorScatterAdd")
def tensor_scatter_add(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                       updates: np.ndarray) -> np.ndarray:
    return _tensor_scatter(ctx, tensor, indices, updates,
                           np.logical_or if tensor.dtype == np.bool_ else np.add)


@kernel("TensorScatterSub")
def tensor_scatter_sub(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                       updates: np.ndarray) -> np.ndarray:
    return _tensor_scatter(ctx, tensor, indices, updates, np.subtract)


@kernel("TensorScatterMax")
def tensor_scatter_max(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                       updates: np.ndarray) -> np.ndarray:
    return _tensor_scatter(ctx, tensor, indices, updates, np.maximum)


@kernel("TensorScatterMin")
def tensor_scatter_min(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                       updates: np.ndarray) -> np.ndarray:
    return _tensor_scatter(ctx, tensor, indices, updates, np.minimum)


# --- SparseToDense and Bucketize ------------------------------------------------------------

@kernel("SparseToDense")
def sparse_to_dense(ctx: KernelContext, sparse_indices: np.ndarray, output_shape: np.ndarray,
                    sparse_values: np.ndarray, default_value: np.ndarray) -> np.ndarray:
    idx = np.asarray(sparse_indices)
    if idx.ndim > 2:
        raise InvalidArgumentError(
            f"sparse_indices should be a scalar, vector, or matrix, got shape "
            f"{_fmt(idx.shape)}")
    if np.ndim(output_shape) != 1:
        raise InvalidArgumentError(
            f"output_shape must be rank 1, got shape {_fmt(np.shape(output_shape))}")
    n = idx.shape[0] if idx.ndim > 0 else 1
    nd = idx.shape[1] if idx.ndim > 1 else 1
    if not (sparse_values.ndim == 0 or sparse_values.shape == (n,)):
        raise InvalidArgumentError(
            f"sparse_values has incorrect shape {_fmt(sparse_values.shape)}, should be [] or "
            f"[{n}]")
    if default_value.ndim != 0:
        raise InvalidArgumentError("default_value should be a scalar.")
    shape = [int(d) for d in output_shape.tolist()]
    if len(shape) != nd:
        raise InvalidArgumentError(
            f"output_shape has incorrect number of elements: {len(shape)} should be: {nd}")
    _check_dims(shape)
    idx = idx.reshape(n, nd).astype(np.int64, copy=False)
    dims = np.array(shape, dtype=np.int64)
    oob = ((idx < 0) | (idx >= dims)).any(axis=1)
    if ctx.attrs.get("validate_indices", True) and n:
        # Row-major linear positions order the rows lexicographically (rows before the first
        # bad one are in bounds, which is all the order check needs).
        lin = np.ravel_multi_index(tuple(np.clip(idx, 0, np.maximum(dims - 1, 0)).T),
                                   tuple(max(d, 1) for d in shape)) if nd else \
            np.zeros(n, dtype=np.int64)
        back = np.zeros(n, dtype=bool)
        same_ = np.zeros(n, dtype=bool)
        back[1:] = lin[1:] < lin[:-1]
        same_[1:] = lin[1:] == lin[:-1]
        bad = oob | back | same_
        if bad.any():
            i = int(np.argmax(bad))
            where = f"indices[{i}] = {_fmt(idx[i])}"
            if oob[i]:
                raise InvalidArgumentError(
                    f"{where} is out of bounds: need 0 <= index < {_fmt(shape)}")
            if back[i]:
                raise InvalidArgumentError(
                    f"{where} is out of order. Many sparse ops require sorted indices.\n"
                    "    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n")
            raise InvalidArgumentError(f"{where} is repeated")
    elif oob.any():
        raise InvalidArgumentError(
            f"Indices are not valid (out of bounds).  Shape: {_fmt(shape)}")
    out = np.full(shape, default_value, dtype=sparse_values.dtype)
    if n:
        vals = np.broadcast_to(sparse_values, (n,))
        if nd == 0:  # a scalar output: every entry writes it, the last one stays
            out[()] = vals[-1]
        else:
            # Duplicates (only possible without validation): the last wins, as TF's loop.
            out[tuple(idx.T)] = vals
    return out


@kernel("Bucketize")
def bucketize(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    bounds = np.asarray(ctx.attrs.get("boundaries") or [], dtype=np.float32)
    if (bounds[1:] < bounds[:-1]).any():
        raise InvalidArgumentError("Expected sorted boundaries")
    # TF compares each value with float boundaries in C++: integers convert to float (and
    # may round), doubles see the boundaries widened from float.
    v = x.astype(np.float64 if x.dtype == np.float64 else np.float32, copy=False)
    b = bounds.astype(v.dtype)
    return np.searchsorted(b, v, side="right").astype(np.int32)


# --- Roll, UniqueV2, DynamicPartition/Stitch, Bincount, searchsorted ---------------------------

@kernel("Roll")
def roll(ctx: KernelContext, x: np.ndarray, shift: np.ndarray, axis: np.ndarray) -> np.ndarray:
    s, a = np.asarray(shift).reshape(-1), np.asarray(axis).reshape(-1)
    if s.shape != a.shape:
        raise InvalidArgumentError(
            f"shift and axis must have the same size, got {s.size} and {a.size}")
    if np.asarray(shift).ndim > 1 or np.asarray(axis).ndim > 1:
        raise InvalidArgumentError("shift and axis must be scalars or vectors")
    for v in a.tolist():
        if not -x.ndim <= v < x.ndim:
            raise InvalidArgumentError(f"axis {v} is out of range for a tensor of rank {x.ndim}")
    return np.roll(x, s.tolist(), [v % x.ndim for v in a.tolist()]) if x.ndim else x.copy()


@kernel("UniqueV2")
def unique_v2(ctx: KernelContext, x: np.ndarray, axis: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    # TensorFlow's one UniqueOp serves both: the same slices along ``axis``, no counts
    y, idx, _ = unique_with_counts_v2(ctx, x, axis)
    return y, idx


@kernel("DynamicPartition")
def dynamic_partition(ctx: KernelContext, data: np.ndarray,
                      partitions: np.ndarray) -> tuple[np.ndarray, ...]:
    n = int(ctx.attrs["num_partitions"])
    if data.shape[:partitions.ndim] != partitions.shape:
        raise InvalidArgumentError(
            f"data.shape must start with partitions.shape, got data.shape = "
            f"{_fmt(data.shape)}, partitions.shape = {_fmt(partitions.shape)}")
    bad = (partitions < 0) | (partitions >= n)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise InvalidArgumentError(
            f"partitions[{i}] = {partitions.reshape(-1)[i]} is not in [0, {n})")
    flat_p = partitions.reshape(-1)
    rows = data.reshape((flat_p.size,) + data.shape[partitions.ndim:])
    return tuple(rows[flat_p == k] for k in range(n))


def _stitch(ctx: KernelContext, args: tuple) -> np.ndarray:
    n = len(args) // 2
    indices, data = args[:n], args[n:]
    inner = None
    size = 0
    for i, (idx, d) in enumerate(zip(indices, data)):
        if d.shape[:idx.ndim] != idx.shape:
            raise InvalidArgumentError(
                f"data[{i}].shape = {_fmt(d.shape)} does not start with indices[{i}].shape = "
                f"{_fmt(idx.shape)}")
        rest = d.shape[idx.ndim:]
        if inner is not None and rest != inner:
            raise InvalidArgumentError(
                f"Need data[0].shape[1:] = data[{i}].shape[{idx.ndim}:], got "
                f"{_fmt(inner)} and {_fmt(rest)}")
        inner = rest
        if idx.size:
            if idx.min() < 0:
                raise InvalidArgumentError(f"indices[{i}] has a negative index {idx.min()}")
            size = max(size, int(idx.max()) + 1)
    dtype = data[0].dtype if data else np.dtype(np.float32)
    out = np.zeros((size,) + (inner or ()), dtype=dtype)
    for idx, d in zip(indices, data):  # later pieces win, as TF's serial merge does
        out[idx.reshape(-1)] = d.reshape((idx.size,) + (inner or ()))
    return out


@kernel("DynamicStitch")
def dynamic_stitch(ctx: KernelContext, *args: np.ndarray) -> np.ndarray:
    return _stitch(ctx, args)


@kernel("ParallelDynamicStitch")
def parallel_dynamic_stitch(ctx: KernelContext, *args: np.ndarray) -> np.ndarray:
    return _stitch(ctx, args)


def _bincount(arr: np.ndarray, size: int, weights: np.ndarray | None, binary: bool,
              out_dtype: np.dtype) -> np.ndarray:
    if size < 0:
        raise InvalidArgumentError(f"size ({size}) must be non-negative")
    if arr.size and arr.min() < 0:
        raise InvalidArgumentError(f"Input arr must be non-negative, got {arr.min()}")
    keep = arr < size
    a = arr[keep].astype(np.int64)
    if binary:
        out = np.zeros(size, out_dtype)
        out[a] = 1
        return out
    w = None if weights is None or weights.size == 0 else weights[keep]
    return np.bincount(a, weights=w, minlength=size)[:size].astype(out_dtype)


@kernel("Bincount")
def bincount(ctx: KernelContext, arr: np.ndarray, size: np.ndarray,
             weights: np.ndarray) -> np.ndarray:
    if weights.size and weights.shape != arr.shape:
        raise InvalidArgumentError(
            f"weights must be the same shape as arr or an empty vector: {_fmt(weights.shape)}"
            f" vs {_fmt(arr.shape)}")
    return _bincount(arr.reshape(-1), int(size), weights.reshape(-1), False, weights.dtype)


@kernel("DenseBincount")
def dense_bincount(ctx: KernelContext, x: np.ndarray, size: np.ndarray,
                   weights: np.ndarray) -> np.ndarray:
    binary = bool(ctx.attrs.get("binary_output", False))
    n = int(size)
    if weights.size and weights.shape != x.shape:
        raise InvalidArgumentError(
            f"weights and input must have the same shape: {_fmt(weights.shape)} vs "
            f"{_fmt(x.shape)}")
    if x.ndim <= 1:
        return _bincount(x.reshape(-1), n, weights.reshape(-1) if weights.size else None,
                         binary, weights.dtype)
    if x.ndim != 2:
        raise InvalidArgumentError(f"input must be at most 2-D, got {_fmt(x.shape)}")
    return np.stack([_bincount(row, n, weights[i] if weights.size else None, binary,
                               weights.dtype) for i, row in enumerate(x)]) if len(x) else \
        np.zeros((0, n), weights.dtype)


def _search(ctx: KernelContext, sorted_: np.ndarray, values: np.ndarray, side: str):
    if sorted_.ndim != 2 or values.ndim != 2 or sorted_.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            f"sorted_inputs and values must be 2-D with the same number of rows, got "
            f"{_fmt(sorted_.shape)} and {_fmt(values.shape)}")
    out = np.stack([np.searchsorted(s, v, side=side) for s, v in zip(sorted_, values)]) \
        if len(values) else np.zeros(values.shape, np.int64)
    return out.reshape(values.shape).astype(_attr_dtype(ctx, "out_type", np.int32))


@kernel("LowerBound")
def lower_bound(ctx: KernelContext, sorted_: np.ndarray, values: np.ndarray) -> np.ndarray:
    return _search(ctx, sorted_, values, "left")


@kernel("UpperBound")
def upper_bound(ctx: KernelContext, sorted_: np.ndarray, values: np.ndarray) -> np.ndarray:
    return _search(ctx, sorted_, values, "right")


# --- Bitcast ----------------------------------------------------------------------------------

def _bit_dtype(t: Any) -> np.dtype:
    """A Bitcast type attr as a numpy dtype; quantized types (DataType numbers) as their
    storage integers."""
    if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
        from .quantization import qdtype

        try:
            return qdtype(t)
        except InvalidArgumentError:
            from dfg.graphdef.errors import UnimplementedError

            raise UnimplementedError(f"Bitcast of DataType {int(t)}: numpy cannot hold it") \
                from None
    return np.dtype(t)


@kernel("Bitcast", cheap=True)
def bitcast(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    src = _bit_dtype(ctx.attrs["T"]) if ctx.attrs.get("T") is not None else x.dtype
    dst = _bit_dtype(ctx.attrs["type"])
    a, b = src.itemsize, dst.itemsize
    if a == b:
        shape = x.shape
    elif a > b:
        shape = x.shape + (a // b,)
    else:
        if x.ndim == 0 or x.shape[-1] != b // a:
            raise InvalidArgumentError(
                f"Cannot bitcast from {src} to {dst}: shape {_fmt(x.shape)} must end in "
                f"{b // a}")
        shape = x.shape[:-1]
    flat = np.ascontiguousarray(x.astype(src, copy=False)).reshape(-1)
    return flat.view(dst).reshape(shape)


# --- ReverseSequence --------------------------------------------------------------------------

@kernel("ReverseSequence")
def reverse_sequence(ctx: KernelContext, x: np.ndarray, seq_lengths: np.ndarray) -> np.ndarray:
    seq_dim = int(ctx.attrs["seq_dim"])
    batch_dim = int(ctx.attrs.get("batch_dim", 0))
    r = x.ndim
    if seq_dim == batch_dim:
        raise InvalidArgumentError(f"seq_dim == batch_dim == {seq_dim}")
    if not 0 <= seq_dim < r:
        raise InvalidArgumentError(f"seq_dim must be < input rank and >= 0: {seq_dim} vs. {r}")
    if not 0 <= batch_dim < r:
        raise InvalidArgumentError(
            f"batch_dim must be < input rank and >= 0: {batch_dim} vs. {r}")
    if seq_lengths.ndim != 1:
        raise InvalidArgumentError(
            f"seq_lengths must be 1-dim, not {seq_lengths.ndim}")
    if seq_lengths.shape[0] != x.shape[batch_dim]:
        raise InvalidArgumentError(
            f"Length of seq_lengths != input.dims({batch_dim}), ({seq_lengths.shape[0]} vs. "
            f"{x.shape[batch_dim]})")
    lens = seq_lengths.astype(np.int64)
    n = x.shape[seq_dim]
    bad = (lens < 0) | (lens > n)
    if bad.any():
        d = int(np.argmax(bad))
        if lens[d] < 0:
            raise InvalidArgumentError(f"seq_lens({d}) < 0")
        raise InvalidArgumentError(
            f"seq_lens({d}) > input.dims({seq_dim}), ({lens[d]} vs. {n})")
    # Source position along seq_dim for each (batch, position): reversed inside the prefix.
    pos = np.arange(n)[None, :]
    src = np.where(pos < lens[:, None], lens[:, None] - 1 - pos, pos)   # [batch, n]
    shape = [1] * r
    shape[batch_dim], shape[seq_dim] = src.shape
    src = src if batch_dim < seq_dim else src.T
    idx = np.broadcast_to(src.reshape(shape), x.shape)
    return np.take_along_axis(x, idx, axis=seq_dim)


# --- InplaceAdd / InplaceSub / InplaceUpdate --------------------------------------------------

def _inplace(ctx: KernelContext, x: np.ndarray, i: np.ndarray, v: np.ndarray,
             how: str) -> np.ndarray:
    if i.ndim != 1:
        raise InvalidArgumentError(f"i must be a vector. {_fmt(i.shape)}")
    if x.ndim != v.ndim:
        raise InvalidArgumentError(
            f"x and v shape doesn't match (ranks differ): {_fmt(x.shape)} vs. {_fmt(v.shape)}")
    for d in range(1, x.ndim):
        if x.shape[d] != v.shape[d]:
            raise InvalidArgumentError(
                f"x and v shape doesn't match at index {d} : {_fmt(x.shape)} vs. "
                f"{_fmt(v.shape)}")
    if i.shape[0] != v.shape[0]:
        raise InvalidArgumentError(
            f"i and x shape doesn't match at index 0 : {_fmt(i.shape)} vs. {_fmt(v.shape)}")
    n = x.shape[0]
    if n == 0 and i.size:
        raise InvalidArgumentError("x has no rows to update")
    # TF guards the index range by wrapping: row (i % n + n) % n
    rows = i.astype(np.int64) % n if n else i.astype(np.int64)
    if how != "update" and x.dtype.kind in "bOSU":
        raise InvalidArgumentError(
            f"Unsupported data type: {'bool' if x.dtype.kind == 'b' else 'string'}")
    y = x.copy()
    if how == "update":
        y[rows] = v   # duplicates: the last one wins, as TF's row-by-row copy
    else:
        (np.add if how == "add" else np.subtract).at(y, rows, v)
    return y


@kernel("InplaceAdd")
def inplace_add(ctx: KernelContext, x: np.ndarray, i: np.ndarray, v: np.ndarray) -> np.ndarray:
    return _inplace(ctx, x, i, v, "add")


@kernel("InplaceSub")
def inplace_sub(ctx: KernelContext, x: np.ndarray, i: np.ndarray, v: np.ndarray) -> np.ndarray:
    return _inplace(ctx, x, i, v, "sub")


@kernel("InplaceUpdate")
def inplace_update(ctx: KernelContext, x: np.ndarray, i: np.ndarray,
                   v: np.ndarray) -> np.ndarray:
    return _inplace(ctx, x, i, v, "update")


# --- ListDiff, UnravelIndex, NthElement ---------------------------------------------------------

@kernel("ListDiff")
def list_diff(ctx: KernelContext, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    for name, v in (("x", x), ("y", y)):
        if v.ndim != 1:
            raise InvalidArgumentError(f"{name} should be a 1D vector.  Got shape "
                                       f"{_fmt(v.shape)}")
    if x.dtype.kind in "bc":
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op 'ListDiff' with T={x.dtype}")
    keep = ~np.isin(x, y) if x.size and y.size else np.ones(x.shape, bool)
    idx = np.flatnonzero(keep)
    return x[idx], idx.astype(_attr_dtype(ctx, "out_idx", np.int32))


def _c_div_mod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C's truncating / and % (for the negative indices TF does not reject)."""
    q = np.abs(a) // np.abs(b) * np.sign(a) * np.sign(b)
    return q, a - q * b


@kernel("UnravelIndex")
def unravel_index(ctx: KernelContext, indices: np.ndarray, dims: np.ndarray) -> np.ndarray:
    if indices.ndim > 1:
        raise InvalidArgumentError(
            f'The indices can only be scalar or vector, got "{_fmt(indices.shape)}"')
    if dims.ndim != 1:
        raise InvalidArgumentError(f'The indices can only be 1-D, got "{_fmt(dims.shape)}"')
    if indices.size == 0:
        raise InvalidArgumentError(f"received empty tensor indices: {_fmt(indices.shape)}")
    dt = indices.dtype
    limit = float(np.iinfo(dt).max)
    prod = 1.0
    for k, d in enumerate(dims.tolist()):
        if d == 0:
            raise InvalidArgumentError(
                f"Input dims cannot contain a dim of zero, but dims contains zero at index {k}")
        if d < 0:
            raise InvalidArgumentError(f"Input dims cannot be negative. Got dim = {d} at index {k}")
        if prod > limit // d:
            raise InvalidArgumentError(
                f"Input dims product is causing integer overflow: ({dims.tolist()})")
        prod *= d
    d64 = dims.astype(np.int64)
    total = int(np.prod(d64)) if d64.size else 1
    if indices.size and (indices >= total).any():
        raise InvalidArgumentError("index is out of bound as with dims")
    strides = np.ones(d64.shape, np.int64)
    if d64.size > 1:
        strides[:-1] = np.cumprod(d64[::-1])[::-1][1:]
    flat = indices.reshape(1, -1).astype(np.int64)
    q, _ = _c_div_mod(flat, strides[:, None])
    _, out = _c_div_mod(q, d64[:, None])
    out = out.astype(dt)
    return out.reshape(-1) if indices.ndim == 0 else out


@kernel("NthElement")
def nth_element(ctx: KernelContext, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    if n.ndim != 0:
        raise InvalidArgumentError(f"N must be scalar but has rank {n.ndim}")
    k = int(n)
    if k < 0:
        raise InvalidArgumentError(f"n must be non-negative but is {k}")
    if x.ndim < 1:
        raise InvalidArgumentError(f"Input must be >= 1-D but is {x.ndim}-D")
    last = x.shape[-1]
    if last <= k:
        raise InvalidArgumentError(f"Input must have last dimension > n = {k}")
    if ctx.attrs.get("reverse", False):
        k = last - k - 1
    if x.size == 0:
        return np.zeros(x.shape[:-1], x.dtype)
    return np.partition(x, k, axis=-1)[..., k]


# --- DataFormatDimMap / DataFormatVecPermute --------------------------------------------------

def _formats(ctx: KernelContext) -> tuple[str, str]:
    src = str(ctx.attrs.get("src_format", "NHWC"))
    dst = str(ctx.attrs.get("dst_format", "NCHW"))
    if len(src) not in (4, 5):
        raise InvalidArgumentError(
            f"Source format must be of length 4 or 5, received src_format = {src}")
    if len(dst) not in (4, 5):
        raise InvalidArgumentError(
            f"Destination format must be of length 4 or 5, received dst_format = {dst}")
    if sorted(src) != sorted(dst) or len(set(src)) != len(src):
        raise InvalidArgumentError(
            f"Destination and source format must determine a permutation, got {src} and {dst}")
    return src, dst


@kernel("DataFormatDimMap")
def data_format_dim_map(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    src, dst = _formats(ctx)
    n = len(src)
    table = np.array([dst.index(c) for c in src], dtype=x.dtype)
    # TF: m = (x + n) % n in C (truncating), then a select chain on m == 0, 1, ...: every m
    # outside [0, n - 1) (so also what x outside [-n, n) gives) picks the last entry
    m = np.fmod(x.astype(np.int64) + n, n)
    m = np.where((m >= 0) & (m < n - 1), m, n - 1)
    return np.asarray(table[m], dtype=x.dtype)


@kernel("DataFormatVecPermute")
def data_format_vec_permute(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    src, dst = _formats(ctx)
    full = len(src)
    spatial = full - 2
    if x.ndim not in (1, 2):
        raise InvalidArgumentError(
            f"input must be a vector or 2D tensor, but got shape {_fmt(x.shape)}")
    if x.ndim == 1 and x.shape[0] not in (spatial, full):
        raise InvalidArgumentError(
            f"1D input must be of size {spatial} or {full}, but got shape {_fmt(x.shape)}")
    if x.ndim == 2:
        if x.shape[0] not in (spatial, full):
            raise InvalidArgumentError(
                f"First dimension of 2D input must be of size {spatial} or {full}, but got "
                f"shape {_fmt(x.shape)}")
        if x.shape[1] != 2:
            raise InvalidArgumentError(
                f"Second dimension of 2D input must be of size 2, but got shape "
                f"{_fmt(x.shape)}")
    if x.shape[0] == spatial:
        # only the spatial dimensions are given: permute them among themselves
        src = "".join(c for c in src if c not in "NC")
        dst = "".join(c for c in dst if c not in "NC")
        if len(src) != spatial or len(dst) != spatial:
            raise InvalidArgumentError(
                f"Format specifier must contain H and W for 2D case, got {src} and {dst}")
    return x[[src.index(c) for c in dst]]


# --- UniqueWithCountsV2 -----------------------------------------------------------------------

def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique rows of a 2-D array in first-occurrence order: (first index of each unique row,
    the unique row of each row, counts)."""
    n = rows.shape[0]
    if rows.dtype == object or rows.shape[1] == 0:
        seen: dict = {}
        inv = np.empty(n, np.int64)
        for j in range(n):
            inv[j] = seen.setdefault(tuple(rows[j].tolist()), len(seen))
        first = np.full(len(seen), n, np.int64)
        np.minimum.at(first, inv, np.arange(n))
        return first, inv, np.bincount(inv, minlength=len(seen))
    # equal rows compare equal bytewise, except -0.0 / +0.0 (== in TF), so normalize zeros
    r = rows + rows.dtype.type(0) if rows.dtype.kind in "fc" else rows
    _, first, inv, cnt = np.unique(np.ascontiguousarray(r).view(
        np.dtype((np.void, r.dtype.itemsize * r.shape[1]))).reshape(-1),
        return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return first[order], rank[inv.reshape(-1)], cnt[order]


@kernel("UniqueWithCountsV2")
def unique_with_counts_v2(ctx: KernelContext, x: np.ndarray, axis: np.ndarray,
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    out_idx = _attr_dtype(ctx, "out_idx", np.int32)
    if x.dtype.kind == "c":
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op '{ctx.op}' with T={x.dtype}")
    if axis.ndim != 1:
        raise InvalidArgumentError(f"axis expects a 1D vector, got {_fmt(axis.shape)}")
    if axis.size > 1:
        raise InvalidArgumentError(
            f"axis does not support input tensors larger than 1 elements, got {axis.size}")
    if axis.size == 0:
        if x.ndim != 1:
            raise InvalidArgumentError(
                f"unique expects a 1D vector, got {_fmt(x.shape)}")
        y, idx, cnt = _unique(x)
        return y, idx.astype(out_idx), cnt.astype(out_idx)
    ax = int(axis[0])
    if not -x.ndim <= ax < x.ndim:
        raise InvalidArgumentError(
            f"axis has to be between [{-x.ndim}, {x.ndim}), got {ax}")
    ax %= x.ndim
    moved = np.moveaxis(x, ax, 0)
    rows = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
    if rows.shape[0] == 0:
        e = np.zeros(0, out_idx)
        return x.copy(), e, e
    first, inv, cnt = _unique_rows(rows)
    y = np.moveaxis(moved[first], 0, ax)
    return np.ascontiguousarray(y), inv.astype(out_idx), cnt.astype(out_idx)


# --- ApproxTopK -------------------------------------------------------------------------------

@kernel("ApproxTopK")
def approx_top_k(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # On CPU both TF's kernel (largest k along the last dim) and XLA's fallback (any dim, either
    # end) are exact: sorted top k, ties to the lower index. Every setting gives k results
    # (aggregate_to_topk, recall_target and the size override change nothing here).
    a = ctx.attrs
    k = int(a["k"])
    if x.ndim == 0:
        raise InvalidArgumentError("ApproxTopK operands must have rank 1+.")
    dim = int(a.get("reduction_dimension", -1))
    dim = dim + x.ndim if dim < 0 else dim
    if not 0 <= dim < x.ndim:
        raise InvalidArgumentError(f"reduction_dim should range in [0,{x.ndim})")
    n = x.shape[dim]
    if k < 0:
        raise InvalidArgumentError(f"Need k >= 0, got {k}")
    if n < k:
        raise InvalidArgumentError(f"input must have at least k columns. Had {n}, needed {k}")
    moved = np.moveaxis(x, dim, -1)
    if a.get("is_max_k", True):
        # stable ascending sort of the reversed row, read backwards (NaN counts as largest)
        order = (n - 1) - np.argsort(moved[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    else:
        order = np.argsort(moved, axis=-1, kind="stable")
    order = order[..., :k]
    vals = np.take_along_axis(moved, order, axis=-1)
    return (np.ascontiguousarray(np.moveaxis(vals, -1, dim)),
            np.ascontiguousarray(np.moveaxis(order, -1, dim)).astype(np.int32))


# --- Empty ------------------------------------------------------------------------------------

@kernel("Empty")
def empty(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    if shape.ndim != 1:
        raise InvalidArgumentError(f"shape must be a vector of int32, got shape "
                                   f"{_fmt(shape.shape)}")
    dims = _check_dims(shape.tolist())
    dt = np.dtype(ctx.attrs["dtype"])
    # TF leaves the values uninitialized unless init; zeros (empty strings) are one choice
    if dt.kind == "O":
        return np.full(dims, b"", dtype=object)
    return np.zeros(dims, dt)
