"""Sparse-tensor kernels: a SparseTensor is three inputs, ``indices`` [nnz, rank] int64,
``values`` [nnz] and ``dense_shape`` [rank] int64 (SparseToDense and SparseSegment* live in
array.py and segment.py).

TensorFlow's CPU semantics, as checked against its outputs (tests/data/kernels/sparse):

* SparseAdd merges the two index lists with one two-pointer pass in lexicographic order (so
  non-canonical inputs give TF's non-canonical output); only sums of matching indices are
  dropped when ``|sum| < thresh``.
* SparseConcat, SparseReorder: output rows in canonical (row-major) order, a stable sort.
* SparseFillEmptyRows: entries grouped by row, in input order within a row; empty rows get
  ``[row, 0, ...]`` with the default value.
* SparseReduceSum/Max: reduce the entries present (duplicates included); groups with no
  entry are 0 in the dense result and absent from the sparse one (Max too: ``[-1, -2]`` in
  a row-less group gives 0, not ``max(.., 0)`` over implicit zeros).
* SparseSlice keeps entries in ``[start, start + size)`` in input order; the output shape is
  ``min(size, shape - start)`` clipped at 0.
* SparseTensorDenseMatMul accumulates A's entries into the output row by row (adjoints
  conjugate complex values).

Bad indices and shape mismatches are InvalidArgumentErrors, as in TensorFlow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel

_I64 = np.int64


def _fmt(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _sparse(indices: np.ndarray, values: np.ndarray, shape: np.ndarray,
            what: str = "input") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check one SparseTensor's three parts; indices as int64 [nnz, rank]."""
    if indices.ndim != 2:
        raise InvalidArgumentError(f"{what} indices should be a matrix but received shape "
                                   f"{_fmt(indices.shape)}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"{what} values should be a vector but received shape "
                                   f"{_fmt(values.shape)}")
    if shape.ndim != 1:
        raise InvalidArgumentError(f"{what} shape should be a vector but received shape "
                                   f"{_fmt(shape.shape)}")
    if indices.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            f"{what} indices and values have a different number of entries: "
            f"{indices.shape[0]} vs {values.shape[0]}")
    if indices.shape[1] != shape.shape[0]:
        raise InvalidArgumentError(
            f"{what} indices have rank {indices.shape[1]} but the shape has "
            f"{shape.shape[0]} dimensions")
    return indices.astype(_I64, copy=False), values, shape.astype(_I64, copy=False)


def _check_bounds(idx: np.ndarray, shape: np.ndarray, what: str = "indices") -> None:
    bad = ((idx < 0) | (idx >= shape)).any(axis=1) if idx.size else np.zeros(0, bool)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"{what}[{i}] = {_fmt(idx[i])} is out of bounds: need 0 <= "
                                   f"index < {_fmt(shape)}")


def _lex_order(idx: np.ndarray) -> np.ndarray:
    """Stable permutation sorting rows of ``idx`` lexicographically (first column first)."""
    if idx.shape[1] == 0:
        return np.arange(idx.shape[0])
    return np.lexsort(idx.T[::-1])


def _shape_out(shape: np.ndarray) -> np.ndarray:
    return np.asarray(shape, dtype=_I64)


# --- reorder, reshape, fill, slice, concat ---------------------------------------------------

@kernel("SparseReorder")
def sparse_reorder(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                   shape: np.ndarray):
    idx, vals, shp = _sparse(indices, values, shape)
    _check_bounds(idx, shp)
    order = _lex_order(idx)
    return idx[order], vals[order]


@kernel("SparseReshape")
def sparse_reshape(ctx: KernelContext, indices: np.ndarray, shape: np.ndarray,
                   new_shape: np.ndarray):
    if indices.ndim != 2:
        raise InvalidArgumentError(f"Input indices should be a matrix but received shape "
                                   f"{_fmt(indices.shape)}")
    if shape.ndim != 1 or new_shape.ndim != 1:
        raise InvalidArgumentError("Input shape and target shape should be vectors")
    if indices.shape[1] != shape.shape[0]:
        raise InvalidArgumentError(
            f"Input tensor rank must match input shape length, got {indices.shape[1]} and "
            f"{shape.shape[0]}")
    idx = indices.astype(_I64, copy=False)
    dims = [int(d) for d in shape]
    target = [int(d) for d in new_shape]
    dense = int(np.prod(dims, dtype=object)) if dims else 1
    unknown = [i for i, d in enumerate(target) if d == -1]
    if len(unknown) > 1:
        raise InvalidArgumentError(f"only one output dimension may be -1, not both "
                                   f"{unknown[0]} and {unknown[1]}")
    for i, d in enumerate(target):
        if d < -1:
            raise InvalidArgumentError(f"size {i} must be non-negative, not {d}")
    known = int(np.prod([d for d in target if d != -1], dtype=object)) if target else 1
    if unknown:
        if known == 0 or dense % known:
            raise InvalidArgumentError(
                f"Input to reshape is a SparseTensor with {dense} dense values, but the "
                f"requested shape requires a multiple of {known}. inputShape={_fmt(dims)} "
                f"outputShape={_fmt(target)}")
        target[unknown[0]] = dense // known
    elif known != dense:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {dense} dense values, but the requested "
            f"shape has {known}. inputShape={_fmt(dims)} outputShape={_fmt(target)}")
    out_shape = np.array(target, dtype=_I64)
    if not idx.shape[0]:
        return np.zeros((0, len(target)), _I64), out_shape
    # row-major linear position, then the new shape's coordinates (int64, like TF's strides)
    lin = np.zeros(idx.shape[0], _I64)
    for k, d in enumerate(dims):
        lin = lin * d + idx[:, k]
    out = np.zeros((idx.shape[0], len(target)), _I64)
    for k in range(len(target) - 1, -1, -1):
        d = target[k]
        out[:, k] = lin % d if d else 0
        lin = lin // d if d else lin
    return out, out_shape


@kernel("SparseFillEmptyRows")
def sparse_fill_empty_rows(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                           dense_shape: np.ndarray, default_value: np.ndarray):
    if default_value.ndim != 0:
        raise InvalidArgumentError(f"default_value must be a scalar, saw: "
                                   f"{_fmt(default_value.shape)}")
    if dense_shape.ndim != 1 or dense_shape.shape[0] == 0:
        raise InvalidArgumentError(f"dense_shape must be a non-empty vector, saw: "
                                   f"{_fmt(dense_shape.shape)}")
    idx, vals, shp = _sparse(indices, values, dense_shape)
    rows = int(shp[0])
    r = idx[:, 0]
    bad = (r < 0) | (r >= rows)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"indices({i}, 0) is invalid: {int(r[i])} >= {rows}"
                                   if r[i] >= 0 else f"indices({i}, 0) is invalid: {int(r[i])}"
                                   " < 0")
    counts = np.bincount(r, minlength=rows) if rows else np.zeros(0, _I64)
    empty = counts == 0
    per_row = np.where(empty, 1, counts)
    start = np.concatenate([[0], np.cumsum(per_row)[:-1]]).astype(_I64)
    total = int(per_row.sum())
    out_idx = np.zeros((total, idx.shape[1]), _I64)
    out_vals = np.empty(total, dtype=vals.dtype)
    # stable by row: the k-th entry of a row (input order) goes to start[row] + k
    order = np.argsort(r, kind="stable")
    rank = np.empty(idx.shape[0], _I64)
    if idx.shape[0]:
        sorted_rows = r[order]
        first = np.searchsorted(sorted_rows, sorted_rows, side="left")
        rank[order] = np.arange(idx.shape[0]) - first
    reverse = (start[r] + rank) if idx.shape[0] else np.zeros(0, _I64)
    out_idx[reverse] = idx
    out_vals[reverse] = vals
    er = np.flatnonzero(empty)
    out_idx[start[er], 0] = er
    out_vals[start[er]] = default_value
    return out_idx, out_vals, empty, reverse.astype(_I64)


@kernel("SparseSlice")
def sparse_slice(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                 shape: np.ndarray, start: np.ndarray, size: np.ndarray):
    idx, vals, shp = _sparse(indices, values, shape)
    if start.ndim != 1 or size.ndim != 1:
        raise InvalidArgumentError(f"Input start and size should be vectors, got shapes "
                                   f"{_fmt(start.shape)} and {_fmt(size.shape)}")
    rank = shp.shape[0]
    if start.shape[0] != rank or size.shape[0] != rank:
        raise InvalidArgumentError(
            f"Expected start and size to be of length {rank} but got {start.shape[0]} and "
            f"{size.shape[0]}")
    st = start.astype(_I64)
    sz = size.astype(_I64)
    if (st < 0).any() or (sz < 0).any():
        raise InvalidArgumentError("start and size must be non-negative")
    end = st + sz
    keep = ((idx >= st) & (idx < end)).all(axis=1) if idx.size else np.ones(idx.shape[0], bool)
    out_shape = np.maximum(np.minimum(st + sz, shp) - st, 0)
    return idx[keep] - st, vals[keep], out_shape.astype(_I64)


@kernel("SparseConcat")
def sparse_concat(ctx: KernelContext, *args: np.ndarray):
    n = len(args) // 3
    inds, vals, shapes = args[:n], args[n:2 * n], args[2 * n:]
    if n < 2:
        raise InvalidArgumentError(f"Must have at least 2 inputs, got {n}")
    parts = [_sparse(i, v, s, f"input {k}") for k, (i, v, s) in
             enumerate(zip(inds, vals, shapes))]
    rank = parts[0][2].shape[0]
    dim = int(ctx.attrs["concat_dim"])
    if not -rank <= dim < rank:
        raise InvalidArgumentError(f"Concat dimension must be in range [{-rank}, {rank}), got "
                                   f"{dim}")
    dim %= rank
    out_shape = parts[0][2].copy()
    offset = 0
    all_idx, all_vals = [], []
    for k, (idx, v, shp) in enumerate(parts):
        if shp.shape[0] != rank:
            raise InvalidArgumentError(
                f"Ranks of all input tensors must match: expected {rank} but got "
                f"{shp.shape[0]} at position {k}")
        other = np.arange(rank) != dim
        if (shp[other] != out_shape[other]).any():
            raise InvalidArgumentError(
                f"All dimensions except {dim} must match. Input {k} has shape {_fmt(shp)} "
                f"and doesn't match input 0 with shape {_fmt(parts[0][2])}.")
        shifted = idx.copy()
        shifted[:, dim] += offset
        offset += int(shp[dim])
        all_idx.append(shifted)
        all_vals.append(v)
    out_shape[dim] = offset
    idx = np.concatenate(all_idx, axis=0)
    v = np.concatenate(all_vals)
    order = _lex_order(idx)
    return idx[order], v[order], out_shape


# --- arithmetic -------------------------------------------------------------------------------

@kernel("SparseAdd")
def sparse_add(ctx: KernelContext, a_indices: np.ndarray, a_values: np.ndarray,
               a_shape: np.ndarray, b_indices: np.ndarray, b_values: np.ndarray,
               b_shape: np.ndarray, thresh: np.ndarray):
    ai, av, ash = _sparse(a_indices, a_values, a_shape, "a")
    bi, bv, bsh = _sparse(b_indices, b_values, b_shape, "b")
    if thresh.ndim != 0:
        raise InvalidArgumentError(f"The magnitude threshold must be a scalar: got shape "
                                   f"{_fmt(thresh.shape)}")
    if ash.shape != bsh.shape or (ash != bsh).any():
        raise InvalidArgumentError(f"Operands do not have the same ranks or shapes; got "
                                   f"shapes: {_fmt(ash)} and {_fmt(bsh)}")
    thr = thresh.item()
    # TF's one merge pass: compare rows lexicographically; equal rows add (kept only when
    # thresh <= |sum|), the rest are copied as they are.
    a_rows, b_rows = ai.tolist(), bi.tolist()
    src: list[tuple[int, int]] = []   # (0, i): a[i]; (1, j): b[j]; (2, i*?): sum of a[i], b[j]
    sums: list[tuple[int, int]] = []
    i = j = 0
    na, nb = len(a_rows), len(b_rows)
    while i < na and j < nb:
        ra, rb = a_rows[i], b_rows[j]
        if ra < rb:
            src.append((0, i))
            i += 1
        elif rb < ra:
            src.append((1, j))
            j += 1
        else:
            s = av[i] + bv[j]
            if thr <= abs(s):
                src.append((2, len(sums)))
                sums.append((i, j))
            i += 1
            j += 1
    src.extend((0, k) for k in range(i, na))
    src.extend((1, k) for k in range(j, nb))
    dtype = np.result_type(av.dtype, bv.dtype)
    out_idx = np.zeros((len(src), ai.shape[1]), _I64)
    out_vals = np.zeros(len(src), dtype)
    for k, (which, p) in enumerate(src):
        if which == 0:
            out_idx[k], out_vals[k] = ai[p], av[p]
        elif which == 1:
            out_idx[k], out_vals[k] = bi[p], bv[p]
        else:
            ia, jb = sums[p]
            out_idx[k], out_vals[k] = ai[ia], av[ia] + bv[jb]
    return out_idx, out_vals.astype(av.dtype, copy=False), ash.copy()


@kernel("SparseTensorDenseAdd")
def sparse_tensor_dense_add(ctx: KernelContext, a_indices: np.ndarray, a_values: np.ndarray,
                            a_shape: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a_indices.ndim != 2 or a_values.ndim != 1 or a_shape.ndim != 1:
        raise InvalidArgumentError(
            f"Inputs must be a matrix of indices, a vector of values and a vector shape; got "
            f"{_fmt(a_indices.shape)}, {_fmt(a_values.shape)} and {_fmt(a_shape.shape)}")
    if a_indices.shape[0] != a_values.shape[0]:
        raise InvalidArgumentError(
            f"Expected a_values.shape[0] == a_indices.shape[0]; got {a_values.shape[0]} and "
            f"{a_indices.shape[0]}")
    shp = a_shape.astype(_I64)
    if tuple(int(d) for d in shp) != b.shape:
        raise InvalidArgumentError(
            f"Dimension mismatch: a_shape {_fmt(shp)} and b shape {_fmt(b.shape)}")
    idx = a_indices.astype(_I64)
    _check_bounds(idx, shp, "a_indices")
    out = b.copy()
    if idx.shape[0]:
        np.add.at(out, tuple(idx.T), a_values)
    return out


@kernel("SparseTensorDenseMatMul")
def sparse_tensor_dense_mat_mul(ctx: KernelContext, a_indices: np.ndarray,
                                a_values: np.ndarray, a_shape: np.ndarray,
                                b: np.ndarray) -> np.ndarray:
    adj_a = bool(ctx.attrs.get("adjoint_a", False))
    adj_b = bool(ctx.attrs.get("adjoint_b", False))
    if a_indices.ndim != 2 or a_indices.shape[1] != 2:
        raise InvalidArgumentError(f"Tensor 'a_indices' is not a matrix of two columns: "
                                   f"{_fmt(a_indices.shape)}")
    if a_values.ndim != 1 or a_values.shape[0] != a_indices.shape[0]:
        raise InvalidArgumentError(
            f"Number of rows of a_indices does not match number of entries in a_values: "
            f"{a_indices.shape[0]} vs {_fmt(a_values.shape)}")
    if a_shape.shape != (2,):
        raise InvalidArgumentError(f"Tensor 'a_shape' is not a vector of 2 elements: "
                                   f"{_fmt(a_shape.shape)}")
    if b.ndim != 2:
        raise InvalidArgumentError(f"Tensor 'b' is not a matrix: {_fmt(b.shape)}")
    rows_a, cols_a = (int(d) for d in a_shape)
    out_rows, inner_a = (cols_a, rows_a) if adj_a else (rows_a, cols_a)
    bb = np.conj(b.T) if adj_b else b
    if inner_a != bb.shape[0]:
        raise InvalidArgumentError(
            f"Cannot multiply A and B because inner dimension does not match: {inner_a} vs. "
            f"{bb.shape[0]}.  Did you forget a transpose?  Dimensions of A: "
            f"[{rows_a}, {cols_a}).  Dimensions of B: {_fmt(b.shape)}")
    idx = a_indices.astype(_I64)
    r, c = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
    vals = np.conj(a_values) if adj_a else a_values
    for what, v, lim in (("k", c, inner_a), ("i", r, out_rows)):
        bad = (v < 0) | (v >= lim)
        if bad.any():
            n = int(np.argmax(bad))
            raise InvalidArgumentError(
                f"{what} ({int(v[n])}) from index[{n},{1 if (what == 'k') != adj_a else 0}] "
                f"out of bounds (>={lim})")
    out = np.zeros((out_rows, bb.shape[1]), dtype=b.dtype)
    if idx.shape[0]:
        np.add.at(out, r, vals[:, None] * bb[c])
    return out


# --- reductions -------------------------------------------------------------------------------

def _reduce_groups(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                   shape: np.ndarray, axes: np.ndarray, how: str):
    """(out dense shape with keep_dims, group coordinates of every entry in the kept dims,
    unique groups, inverse, reduced values per unique group)."""
    idx, vals, shp = _sparse(indices, values, shape)
    rank = shp.shape[0]
    ax = np.asarray(axes, dtype=_I64).reshape(-1)
    bad = (ax < -rank) | (ax >= rank)
    if bad.any():
        raise InvalidArgumentError(f"Invalid reduction dimension {int(ax[np.argmax(bad)])}, "
                                   f"for input with {rank} dimensions.")
    red = set(int(a) % rank for a in ax)
    kept = [d for d in range(rank) if d not in red]
    keys = idx[:, kept]
    if keys.shape[0]:
        groups, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
    else:
        groups, inverse = np.zeros((0, len(kept)), _I64), np.zeros(0, _I64)
    if how == "sum":
        red_vals = np.zeros(groups.shape[0], vals.dtype)
        np.add.at(red_vals, inverse, vals)
    else:
        red_vals = np.full(groups.shape[0], _lowest(vals.dtype), vals.dtype)
        np.maximum.at(red_vals, inverse, vals)
    keep_dims = bool(ctx.attrs.get("keep_dims", False))
    return shp, kept, red, groups, red_vals, keep_dims


def _lowest(dt: np.dtype) -> Any:
    return np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min


def _dense_reduce(ctx: KernelContext, indices, values, shape, axes, how: str) -> np.ndarray:
    shp, kept, red, groups, red_vals, keep_dims = _reduce_groups(ctx, indices, values, shape,
                                                                 axes, how)
    out = np.zeros([int(shp[d]) for d in kept], dtype=values.dtype)
    if groups.shape[0] and kept:
        out[tuple(groups.T)] = red_vals
    elif groups.shape[0]:
        out[()] = red_vals[0]   # every axis reduced: one group
    if keep_dims:
        out = out.reshape([1 if d in red else int(shp[d]) for d in range(shp.shape[0])])
    return out


def _sparse_reduce(ctx: KernelContext, indices, values, shape, axes, how: str):
    shp, kept, red, groups, red_vals, keep_dims = _reduce_groups(ctx, indices, values, shape,
                                                                 axes, how)
    if keep_dims:
        full = np.zeros((groups.shape[0], shp.shape[0]), _I64)
        full[:, kept] = groups
        out_shape = np.array([1 if d in red else int(shp[d]) for d in range(shp.shape[0])],
                             _I64)
        return full, red_vals, out_shape
    return groups.astype(_I64), red_vals, shp[kept].astype(_I64)


@kernel("SparseReduceSum")
def sparse_reduce_sum(ctx, input_indices, input_values, input_shape, reduction_axes):
    return _dense_reduce(ctx, input_indices, input_values, input_shape, reduction_axes, "sum")


@kernel("SparseReduceMax")
def sparse_reduce_max(ctx, input_indices, input_values, input_shape, reduction_axes):
    return _dense_reduce(ctx, input_indices, input_values, input_shape, reduction_axes, "max")


@kernel("SparseReduceSumSparse")
def sparse_reduce_sum_sparse(ctx, input_indices, input_values, input_shape, reduction_axes):
    return _sparse_reduce(ctx, input_indices, input_values, input_shape, reduction_axes, "sum")


@kernel("SparseReduceMaxSparse")
def sparse_reduce_max_sparse(ctx, input_indices, input_values, input_shape, reduction_axes):
    return _sparse_reduce(ctx, input_indices, input_values, input_shape, reduction_axes, "max")


# --- sparse (op) dense, elementwise -----------------------------------------------------------

def _cwise(ctx: KernelContext, sp_indices: np.ndarray, sp_values: np.ndarray,
           sp_shape: np.ndarray, dense: np.ndarray, fn) -> np.ndarray:
    idx, vals, shp = _sparse(sp_indices, sp_values, sp_shape)
    rank = shp.shape[0]
    if dense.ndim > rank:
        raise InvalidArgumentError(f"Dense tensor has rank {dense.ndim} greater than the sparse "
                                   f"tensor's {rank}")
    # the dense side broadcasts to the sparse shape (TF allows only that direction)
    dshape = (1,) * (rank - dense.ndim) + dense.shape
    for a, b in zip(dshape, shp.tolist()):
        if a not in (1, b):
            raise InvalidArgumentError(
                f"SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible "
                f"shapes: {_fmt(shp)} vs. {_fmt(dense.shape)}")
    _check_bounds(idx, shp)
    d = dense.reshape(dshape)
    pick = tuple(np.where(np.array(dshape)[None, :] == 1, 0, idx).T) if idx.shape[0] else \
        tuple(np.zeros((rank, 0), _I64))
    return fn(vals, d[pick]).astype(sp_values.dtype, copy=False)


@kernel("SparseDenseCwiseMul")
def sparse_dense_cwise_mul(ctx, sp_indices, sp_values, sp_shape, dense):
    return _cwise(ctx, sp_indices, sp_values, sp_shape, dense, np.multiply)


@kernel("SparseDenseCwiseAdd")
def sparse_dense_cwise_add(ctx, sp_indices, sp_values, sp_shape, dense):
    return _cwise(ctx, sp_indices, sp_values, sp_shape, dense, np.add)


@kernel("SparseDenseCwiseDiv")
def sparse_dense_cwise_div(ctx, sp_indices, sp_values, sp_shape, dense):
    def div(a, b):
        if a.dtype.kind in "iu":
            if (b == 0).any():
                raise InvalidArgumentError("Integer division by zero")
            q = np.abs(a) // np.abs(b)    # C++ integer division truncates toward zero
            return np.where((a < 0) != (b < 0), -q, q)
        return a / b
    return _cwise(ctx, sp_indices, sp_values, sp_shape, dense, div)


# --- serialization (out_type string; a variant out_type is refused) --------------------------

def _proto_bytes(a: np.ndarray) -> bytes:
    # TF's Tensor::AsProtoTensorContent: dtype, shape, raw little-endian tensor_content
    from dfg.graphdef.tensors import from_numpy

    return from_numpy(a).SerializeToString()


def _serialize_one(idx: np.ndarray, vals: np.ndarray, shape: np.ndarray) -> list[bytes]:
    return [_proto_bytes(idx.astype(_I64, copy=False)), _proto_bytes(vals),
            _proto_bytes(shape.astype(_I64, copy=False))]


def _string_out(ctx: KernelContext) -> None:
    out = ctx.attrs.get("out_type")
    if out is not None and np.dtype(out) != np.dtype(object):
        from dfg.graphdef.errors import UnimplementedError
        raise UnimplementedError("serializing sparse tensors to variant is not supported "
                                 "(out_type must be string)")


@kernel("SerializeSparse")
def serialize_sparse(ctx: KernelContext, sparse_indices: np.ndarray, sparse_values: np.ndarray,
                     sparse_shape: np.ndarray) -> np.ndarray:
    _string_out(ctx)
    idx, vals, shp = _sparse(sparse_indices, sparse_values, sparse_shape)
    out = np.empty(3, dtype=object)
    out[:] = _serialize_one(idx, vals, shp)
    return out


@kernel("SerializeManySparse")
def serialize_many_sparse(ctx: KernelContext, sparse_indices: np.ndarray,
                          sparse_values: np.ndarray, sparse_shape: np.ndarray) -> np.ndarray:
    _string_out(ctx)
    idx, vals, shp = _sparse(sparse_indices, sparse_values, sparse_shape)
    if shp.shape[0] < 2:
        raise InvalidArgumentError(f"Rank of input SparseTensor should be > 1, but saw rank: "
                                   f"{shp.shape[0]}")
    n = int(shp[0])
    bad = (idx[:, 0] < 0) | (idx[:, 0] >= n) if idx.shape[0] else np.zeros(0, bool)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"indices[{i}] = {_fmt(idx[i])} is out of bounds: need 0 <= "
                                   f"index < {_fmt(shp)}")
    out = np.empty((n, 3), dtype=object)
    for b in range(n):
        rows = idx[:, 0] == b        # each minibatch entry keeps its entries in input order
        out[b] = _serialize_one(idx[rows, 1:], vals[rows], shp[1:])
    return out


def _parse_tensor(data: bytes, what: str) -> np.ndarray:
    from dfg.graphdef.tensors import to_numpy
    from dfg.schemas import tensor_pb2

    t = tensor_pb2.TensorProto()
    try:
        t.ParseFromString(bytes(data))
    except Exception:   # protobuf's DecodeError
        raise InvalidArgumentError(f"Could not parse {what} as a TensorProto") from None
    return to_numpy(t)


def _deserialize(ctx: KernelContext, serialized: np.ndarray):
    dtype = np.dtype(ctx.attrs["dtype"])
    if serialized.ndim < 1 or serialized.shape[-1] != 3:
        raise InvalidArgumentError(f"Serialized sparse should have 3 as the last dimension "
                                   f"{_fmt(serialized.shape)}")
    lead = serialized.shape[:-1]
    flat = serialized.reshape(-1, 3)
    parts = []
    for k, (si, sv, ss) in enumerate(flat):
        idx = _parse_tensor(si, f"serialized_sparse[{k}, 0]")
        vals = _parse_tensor(sv, f"serialized_sparse[{k}, 1]")
        shp = _parse_tensor(ss, f"serialized_sparse[{k}, 2]")
        if vals.dtype != dtype:
            raise InvalidArgumentError(
                f"Requested SparseTensor of type {dtype} but SparseTensor[{k}].values.dtype() "
                f"== {vals.dtype}")
        parts.append(_sparse(idx, vals, shp, f"SparseTensor[{k}]"))
    if not lead:
        return parts[0]
    rank = parts[0][2].shape[0] if parts else 0
    for k, (_, _, shp) in enumerate(parts):
        if shp.shape[0] != rank:
            raise InvalidArgumentError(
                f"Inconsistent shape across SparseTensors: rank prior to SparseTensor[{k}] was: "
                f"{rank} but rank of SparseTensor[{k}] is: {shp.shape[0]}")
    # leading dims become the first index columns; other dims take the max over inputs
    dims = np.max(np.stack([p[2] for p in parts]), axis=0) if parts else np.zeros(0, _I64)
    pos = np.array(np.unravel_index(np.arange(len(parts)), lead)).T if parts else \
        np.zeros((0, len(lead)), _I64)
    idx = np.concatenate([np.concatenate([np.broadcast_to(pos[k], (p[0].shape[0], len(lead))),
                                          p[0]], axis=1) for k, p in enumerate(parts)],
                         axis=0).astype(_I64) if parts else np.zeros((0, len(lead)), _I64)
    vals = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, dtype)
    return idx, vals, np.concatenate([np.array(lead, _I64), dims]).astype(_I64)


@kernel("DeserializeSparse")
def deserialize_sparse(ctx: KernelContext, serialized_sparse: np.ndarray):
    return _deserialize(ctx, serialized_sparse)


@kernel("DeserializeManySparse")
def deserialize_many_sparse(ctx: KernelContext, serialized_sparse: np.ndarray):
    if serialized_sparse.ndim != 2 or serialized_sparse.shape[1] != 3:
        raise InvalidArgumentError(f"Serialized sparse should be a matrix with 3 columns, got "
                                   f"{_fmt(serialized_sparse.shape)}")
    return _deserialize(ctx, serialized_sparse)
