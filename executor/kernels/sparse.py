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
* EditDistance, SetSize and the set operations walk the groups (runs of entries sharing all
  but the last coordinate) in input order, as TF's SparseTensor::group does; set results are
  sorted per group and the result's last dimension is the largest set.
* SparseSoftmax returns the values in row-major order (TF reorders its input first);
  SparseSparseMaximum/Minimum merge the two index lists in one pass, an entry missing on one
  side meeting a 0; SparseSplit keeps input order within each piece.
* SparseCross/V2/Hashed cross each batch row's features (sparse columns, then dense ones)
  in cartesian order, last column fastest; SparseCross's out_type (not hashed_output)
  picks strings joined by ``_X_`` or FingerprintCat64 hashes seeded with hash_key.
  SparseCrossHashed hashes an int64 by its low 4 bytes (TF hashes sizeof(DataType) bytes),
  except a dense int64 without strong_hash, which is used as is.

Bad indices and shape mismatches are InvalidArgumentErrors, as in TensorFlow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel
from .string import fingerprint64, siphash24

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


# --- groups of a SparseTensor: runs of entries that share their leading coordinates ----------

def _runs(keys: np.ndarray) -> list[tuple[tuple[int, ...], int, int]]:
    """(key, start, stop) for each run of consecutive rows of ``keys`` that are equal: the
    groups TF's SparseTensor::group visits (for sorted indices, one run per distinct key)."""
    n = keys.shape[0]
    if n == 0:
        return []
    if keys.shape[1] == 0:
        return [((), 0, n)]
    change = np.flatnonzero((keys[1:] != keys[:-1]).any(axis=1)) + 1
    starts = np.concatenate(([0], change)).tolist()
    stops = starts[1:] + [n]
    return [(tuple(keys[s].tolist()), s, e) for s, e in zip(starts, stops)]


def _check_sorted(idx: np.ndarray, shape: np.ndarray) -> None:
    """SparseTensor::IndicesValid: in bounds, strictly increasing in row-major order."""
    _check_bounds(idx, shape)
    if idx.shape[0] < 2 or idx.shape[1] == 0:
        if idx.shape[0] >= 2:
            raise InvalidArgumentError(f"indices[1] = {_fmt(idx[1])} is repeated")
        return
    a, b = idx[:-1], idx[1:]
    diff = b != a
    first = np.argmax(diff, axis=1)
    rows = np.arange(a.shape[0])
    equal = ~diff.any(axis=1)
    down = ~equal & (b[rows, first] < a[rows, first])
    bad = equal | down
    if bad.any():
        i = int(np.argmax(bad)) + 1
        if equal[i - 1]:
            raise InvalidArgumentError(f"indices[{i}] = {_fmt(idx[i])} is repeated")
        raise InvalidArgumentError(
            f"indices[{i}] = {_fmt(idx[i])} is out of order. Many sparse ops require sorted "
            "indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy.\n\n")


# --- EditDistance -----------------------------------------------------------------------------

def _levenshtein(s: list, t: list) -> int:
    if not s:
        return len(t)
    if not t:
        return len(s)
    prev = list(range(len(t) + 1))
    for i, a in enumerate(s, 1):
        cur = [i] + [0] * len(t)
        for j, b in enumerate(t, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (0 if a == b else 1))
        prev = cur
    return prev[-1]


@kernel("EditDistance")
def edit_distance(ctx: KernelContext, h_indices: np.ndarray, h_values: np.ndarray,
                  h_shape: np.ndarray, t_indices: np.ndarray, t_values: np.ndarray,
                  t_shape: np.ndarray) -> np.ndarray:
    for name, v in (("hypothesis_indices", h_indices), ("truth_indices", t_indices)):
        if v.ndim != 2:
            raise InvalidArgumentError(f"{name} should be a matrix, but got shape: "
                                       f"{_fmt(v.shape)}")
    for name, v in (("hypothesis_values", h_values), ("truth_values", t_values),
                    ("hypothesis_shape", h_shape), ("truth_shape", t_shape)):
        if v.ndim != 1:
            raise InvalidArgumentError(f"{name} should be a vector, but got shape: "
                                       f"{_fmt(v.shape)}")
    for what, idx, vals, shp in (("hypothesis", h_indices, h_values, h_shape),
                                 ("truth", t_indices, t_values, t_shape)):
        if vals.shape[0] != idx.shape[0]:
            raise InvalidArgumentError(
                f"Expected {what}_values.NumElements == #rows({what}_indices), their shapes "
                f"are: {_fmt(vals.shape)} and {_fmt(idx.shape)}")
        if shp.shape[0] != idx.shape[1]:
            raise InvalidArgumentError(
                f"Expected {what}_shape.NumElements == #cols({what}_indices), their shapes "
                f"are: {_fmt(shp.shape)} and {_fmt(idx.shape)}")
    if t_shape.shape[0] < 2:
        raise InvalidArgumentError(
            f"Input SparseTensors must have rank at least 2, but truth_shape rank is: "
            f"{t_shape.shape[0]}")
    if t_shape.shape[0] != h_shape.shape[0]:
        raise InvalidArgumentError(
            f"Expected truth and hypothesis to have matching ranks, but their shapes are: "
            f"{_fmt(t_shape.shape)} and {_fmt(h_shape.shape)}")
    for what, shp in (("hypothesis", h_shape), ("truth", t_shape)):
        if (shp < 0).any():
            raise InvalidArgumentError(f"{what}_shape has a negative dimension: {_fmt(shp)}")
    normalize = bool(ctx.attrs.get("normalize", True))
    out_shape = np.maximum(h_shape[:-1], t_shape[:-1]).astype(_I64)
    out = np.zeros(out_shape.tolist(), np.float32)
    flat = out.reshape(-1)
    strides = np.ones(len(out_shape), _I64)
    if len(out_shape) > 1:
        strides[:-1] = np.cumprod(out_shape[::-1])[::-1][1:]

    def loc(key: tuple) -> int:
        p = int(np.dot(np.asarray(key, _I64), strides)) if key else 0
        if not 0 <= p < flat.size:
            raise InvalidArgumentError(
                f"Got an inner product {p} which would require writing to outside of the "
                f"buffer for the output tensor (max elements {flat.size})")
        return p

    hi, ti = h_indices.astype(_I64), t_indices.astype(_I64)
    hruns, truns = _runs(hi[:, :-1]), _runs(ti[:, :-1])
    hv, tv = h_values.tolist(), t_values.tolist()
    i = j = 0
    while i < len(hruns) or j < len(truns):
        hk = hruns[i][0] if i < len(hruns) else None
        tk = truns[j][0] if j < len(truns) else None
        if hk is not None and tk is not None and hk == tk:
            _, hs, he = hruns[i]
            _, ts, te = truns[j]
            d = float(_levenshtein(tv[ts:te], hv[hs:he]))
            flat[loc(tk)] = d / (te - ts) if normalize else d
            i += 1
            j += 1
        elif tk is None or (hk is not None and tk > hk):   # a hypothesis with no truth
            _, hs, he = hruns[i]
            n = he - hs
            flat[loc(hk)] = np.inf if normalize and n else n
            i += 1
        else:                                              # a truth with no hypothesis
            _, ts, te = truns[j]
            flat[loc(tk)] = 1.0 if normalize else te - ts
            j += 1
    return out


# --- sets -------------------------------------------------------------------------------------

def _set_op(ctx: KernelContext) -> str:
    op = str(ctx.attrs["set_operation"])
    if op not in ("a-b", "b-a", "intersection", "union"):
        raise InvalidArgumentError(f"Invalid set_operation {op}.")
    return op


def _group_shape(shape: list[int], what: str) -> list[int]:
    if len(shape) < 2:
        raise InvalidArgumentError(f"Invalid {what} rank {len(shape)}, must be >= 2.")
    return shape[:-1]


def _sparse_set(indices: np.ndarray, values: np.ndarray, shape: np.ndarray, validate: bool
                ) -> tuple[list, list, list[int]]:
    """A sparse set input: its groups as (key, sorted-unique-able values) runs, and shape."""
    idx, vals, shp = _sparse(indices, values, shape)
    dims = shp.tolist()
    if validate:
        _check_sorted(idx, shp)
    runs = _runs(idx[:, :-1]) if idx.shape[1] else []
    v = vals.tolist()
    return [(k, set(v[s:e])) for k, s, e in runs], v, dims


def _apply_set(a: set, b: set, op: str) -> set:
    if op == "a-b":
        return a - b
    if op == "b-a":
        return b - a
    if op == "intersection":
        return a & b
    return a | b


def _set_output(groups: dict, group_shape: list[int], dtype: np.dtype):
    """OutputSparseTensor: groups in row-major order, each set's values in sorted order."""
    keys = sorted(groups)
    widest = max((len(groups[k]) for k in keys), default=0)
    rows, vals = [], []
    for k in keys:
        for j, v in enumerate(sorted(groups[k])):
            rows.append(list(k) + [j])
            vals.append(v)
    idx = np.array(rows, _I64).reshape(len(rows), len(group_shape) + 1)
    out_vals = np.array(vals, dtype=dtype) if dtype.kind != "O" else \
        np.array(vals + [None], dtype=object)[:-1]
    return idx, out_vals.reshape(len(vals)), np.array(group_shape + [widest], _I64)


def _check_match(g1: list[int], g2: list[int]) -> None:
    if g1 != g2:
        raise InvalidArgumentError(f"Mismatched shapes {_fmt(g1)} vs {_fmt(g2)}.")


def _dense_groups(x: np.ndarray) -> list[set]:
    return [set(r) for r in x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1]).tolist()]


@kernel("SetSize")
def set_size(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
             shape: np.ndarray) -> np.ndarray:
    groups, _, dims = _sparse_set(indices, values, shape,
                                  bool(ctx.attrs.get("validate_indices", True)))
    gshape = _group_shape(dims, "input")
    out = np.zeros(gshape, np.int32)
    flat = out.reshape(-1)
    strides = np.cumprod([1] + gshape[::-1])[::-1][1:]
    for key, vals in groups:   # a key seen in two runs (unsorted input): the last one counts
        flat[int(np.dot(key, strides))] = len(vals)
    return out


@kernel("DenseToDenseSetOperation")
def dense_to_dense_set_operation(ctx: KernelContext, set1: np.ndarray, set2: np.ndarray):
    op = _set_op(ctx)
    g1 = _group_shape(list(set1.shape), "set1")
    g2 = _group_shape(list(set2.shape), "set2")
    _check_match(g1, g2)
    a, b = _dense_groups(set1), _dense_groups(set2)
    groups = {}
    for flat_i, key in enumerate(np.ndindex(*g1)):
        r = _apply_set(a[flat_i], b[flat_i], op)
        if r:
            groups[key] = r
    return _set_output(groups, g1, set1.dtype)


@kernel("DenseToSparseSetOperation")
def dense_to_sparse_set_operation(ctx: KernelContext, set1: np.ndarray, indices: np.ndarray,
                                  values: np.ndarray, shape: np.ndarray):
    op = _set_op(ctx)
    sgroups, _, dims = _sparse_set(indices, values, shape,
                                   bool(ctx.attrs.get("validate_indices", True)))
    g1 = _group_shape(list(set1.shape), "set1")
    g2 = _group_shape(dims, "set2")
    _check_match(g1, g2)
    a = _dense_groups(set1)
    groups = {}
    pos = 0
    for flat_i, key in enumerate(np.ndindex(*g1)):
        b: set = set()
        # TF walks set2's groups alongside the dense ones: a group that does not match the
        # current key waits (sorted input: each group is met exactly at its key)
        if pos < len(sgroups) and sgroups[pos][0] == key:
            b = sgroups[pos][1]
            pos += 1
        r = _apply_set(a[flat_i], b, op)
        if r:
            groups[key] = r
    return _set_output(groups, g1, set1.dtype)


@kernel("SparseToSparseSetOperation")
def sparse_to_sparse_set_operation(ctx: KernelContext, i1: np.ndarray, v1: np.ndarray,
                                   s1: np.ndarray, i2: np.ndarray, v2: np.ndarray,
                                   s2: np.ndarray):
    op = _set_op(ctx)
    validate = bool(ctx.attrs.get("validate_indices", True))
    a, _, d1 = _sparse_set(i1, v1, s1, validate)
    b, _, d2 = _sparse_set(i2, v2, s2, validate)
    g1 = _group_shape(d1, "set1")
    g2 = _group_shape(d2, "set2")
    _check_match(g1, g2)
    groups: dict = {}
    i = j = 0
    while i < len(a) or j < len(b):
        ka = a[i][0] if i < len(a) else None
        kb = b[j][0] if j < len(b) else None
        if ka is not None and kb is not None and ka == kb:
            key, r = ka, _apply_set(a[i][1], b[j][1], op)
            i += 1
            j += 1
        elif kb is None or (ka is not None and ka < kb):
            key, r = ka, _apply_set(a[i][1], set(), op)
            i += 1
        else:
            key, r = kb, _apply_set(set(), b[j][1], op)
            j += 1
        if r:
            groups[key] = r
    return _set_output(groups, g1, v1.dtype)


# --- SparseSoftmax, SparseSparseMaximum/Minimum, SparseSplit, SparseBincount -------------------

@kernel("SparseSoftmax")
def sparse_softmax(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                   shape: np.ndarray) -> np.ndarray:
    if indices.ndim != 2:
        raise InvalidArgumentError(
            f"Input should be a matrix but received shape: {_fmt(indices.shape)}")
    if values.ndim != 1 or shape.ndim != 1:
        raise InvalidArgumentError(
            f"Inputs sp_values and sp_shape should be vectors but received shapes: "
            f"{_fmt(values.shape)} and {_fmt(shape.shape)}")
    if shape.shape[0] < 2:
        raise InvalidArgumentError(
            f"Input should have rank >= 2, but received shape: {_fmt(shape)}")
    if values.shape[0] != indices.shape[0]:
        raise InvalidArgumentError(
            f"Expected values.dim_size(0) == indices.dim_size(0), got {values.shape[0]} and "
            f"{indices.shape[0]}")
    if indices.shape[1] != shape.shape[0]:
        raise InvalidArgumentError(
            f"Expected indices.dim_size(1) == shape.NumElements(), got {indices.shape[1]} and "
            f"{shape.shape[0]}")
    n = values.shape[0]
    if n == 0:
        return values.copy()
    # TF reorders the entries into row-major order and returns the values in that order,
    # each softmaxed over the entries sharing all but the last coordinate
    order = _lex_order(indices.astype(_I64))
    indices, values = indices[order], values[order]
    work = values.astype(np.float32) if values.dtype == np.float16 else values
    keys = indices[:, :-1]
    starts = np.concatenate(([0], np.flatnonzero((keys[1:] != keys[:-1]).any(axis=1)) + 1))
    run = np.cumsum(np.isin(np.arange(n), starts)) - 1
    e = np.exp(work - np.maximum.reduceat(work, starts)[run])
    return (e / np.add.reduceat(e, starts)[run]).astype(values.dtype)


def _sparse_sparse(ctx: KernelContext, ai: np.ndarray, av: np.ndarray, ash: np.ndarray,
                   bi: np.ndarray, bv: np.ndarray, bsh: np.ndarray, ufunc: np.ufunc):
    if ai.ndim != 2 or bi.ndim != 2:
        raise InvalidArgumentError(
            f"Inputs a_indices and b_indices should be matrices but received shapes: "
            f"{_fmt(ai.shape)}, {_fmt(bi.shape)}")
    if av.ndim != 1 or bv.ndim != 1:
        raise InvalidArgumentError(
            f"Inputs a_values and b_values should be vectors but received shapes: "
            f"{_fmt(av.shape)} and {_fmt(bv.shape)}")
    if ash.ndim != 1 or bsh.ndim != 1:
        raise InvalidArgumentError(
            f"Input shapes should be a vector but received shapes {_fmt(ash.shape)} and "
            f"{_fmt(bsh.shape)}")
    for what, i, v in (("a", ai, av), ("b", bi, bv)):
        if v.shape[0] != i.shape[0]:
            raise InvalidArgumentError(
                f"Expected {what}_values and {what}_indices to have the same number of "
                f"entries, got {v.shape[0]} and {i.shape[0]}")
    if ash.shape != bsh.shape:
        raise InvalidArgumentError(f"Operands do not have the same ranks; got shapes: "
                                   f"{_fmt(ash)} and {_fmt(bsh)}")
    for d in range(ash.shape[0]):
        if ash[d] != bsh[d]:
            raise InvalidArgumentError(f"Operands' shapes do not match: got {ash[d]} and "
                                       f"{bsh[d]} for dimension {d}")
    for what, i in (("a", ai), ("b", bi)):
        if i.shape[1] != ash.shape[0]:
            raise InvalidArgumentError(
                f"Expected {what}_indices to have {ash.shape[0]} columns, got {i.shape[1]}")
    # TF's one merge pass in row-major order; an entry missing on one side meets a 0
    a_rows, b_rows = ai.tolist(), bi.tolist()
    pick: list[tuple[int, int, int]] = []   # (index source 0=a/1=b, a position or -1, b ...)
    i = j = 0
    while i < len(a_rows) and j < len(b_rows):
        if a_rows[i] < b_rows[j]:
            pick.append((0, i, -1))
            i += 1
        elif a_rows[i] == b_rows[j]:
            pick.append((0, i, j))
            i += 1
            j += 1
        else:
            pick.append((1, -1, j))
            j += 1
    pick.extend((0, k, -1) for k in range(i, len(a_rows)))
    pick.extend((1, -1, k) for k in range(j, len(b_rows)))
    src = np.array([p[0] for p in pick], np.int64)
    pa = np.array([p[1] for p in pick], np.int64)
    pb = np.array([p[2] for p in pick], np.int64)
    zero = np.zeros((), av.dtype)
    a_aug = np.where(pa >= 0, av[np.maximum(pa, 0)] if av.size else zero, zero)
    b_aug = np.where(pb >= 0, bv[np.maximum(pb, 0)] if bv.size else zero, zero)
    rank = ai.shape[1]
    idx = np.where((src == 0)[:, None], ai[np.maximum(pa, 0)] if ai.size else
                   np.zeros((len(pick), rank), _I64),
                   bi[np.maximum(pb, 0)] if bi.size else np.zeros((len(pick), rank), _I64))
    return (idx.astype(_I64).reshape(len(pick), rank),
            ufunc(a_aug, b_aug).astype(av.dtype).reshape(len(pick)))


def _real_values(ctx: KernelContext, v: np.ndarray) -> None:
    # TF's CPU kernels cover the real numeric types only (the OpDef also allows complex and
    # quantized types for SparseSparseMinimum): a graph with another fails to run.
    if v.dtype.kind == "c" or not isinstance(ctx.attrs.get("T", v.dtype), np.dtype):
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op '{ctx.op}' with T={v.dtype}")


@kernel("SparseSparseMaximum")
def sparse_sparse_maximum(ctx: KernelContext, ai, av, ash, bi, bv, bsh):
    _real_values(ctx, av)
    return _sparse_sparse(ctx, ai, av, ash, bi, bv, bsh, np.maximum)


@kernel("SparseSparseMinimum")
def sparse_sparse_minimum(ctx: KernelContext, ai, av, ash, bi, bv, bsh):
    _real_values(ctx, av)
    return _sparse_sparse(ctx, ai, av, ash, bi, bv, bsh, np.minimum)


@kernel("SparseSplit")
def sparse_split(ctx: KernelContext, split_dim: np.ndarray, indices: np.ndarray,
                 values: np.ndarray, shape: np.ndarray):
    num = int(ctx.attrs["num_split"])
    if split_dim.size != 1:
        raise InvalidArgumentError(f"split_dim must be a scalar, got shape "
                                   f"{_fmt(split_dim.shape)}")
    if indices.ndim != 2:
        raise InvalidArgumentError(f"Input indices should be a matrix but received shape "
                                   f"{_fmt(indices.shape)}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"Input values should be a vector but received shape "
                                   f"{_fmt(values.shape)}")
    if shape.ndim != 1:
        raise InvalidArgumentError(f"Input shape should be a vector but received shape "
                                   f"{_fmt(shape.shape)}")
    idx, vals, shp = _sparse(indices, values, shape)
    rank = shp.shape[0]
    ax_in = int(split_dim.reshape(()))
    ax = ax_in + rank if ax_in < 0 else ax_in
    if not 0 <= ax < rank:
        raise InvalidArgumentError(
            f"Input axis should be in range [{-rank}, {rank}), got {ax_in}")
    dim = int(shp[ax])
    if not 1 <= num <= dim:
        raise InvalidArgumentError(f"Input num_split should be between 1 and {dim}, got {num}")
    _check_bounds(idx, shp)
    size, extra = divmod(dim, num)
    # the first `extra` slices are one longer
    cut = extra * (size + 1)
    d = idx[:, ax]
    slice_of = np.where(d < cut, d // (size + 1), extra + (d - cut) // max(size, 1))
    offset = np.where(slice_of < extra, slice_of * (size + 1),
                      cut + (slice_of - extra) * size)
    out_i, out_v, out_s = [], [], []
    for k in range(num):
        sel = slice_of == k
        ik = idx[sel].copy()
        ik[:, ax] -= offset[sel]
        out_i.append(ik)
        out_v.append(vals[sel])
        sk = shp.copy()
        sk[ax] = size + (1 if k < extra else 0)
        out_s.append(sk)
    return tuple(out_i + out_v + out_s)


@kernel("SparseBincount")
def sparse_bincount(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                    dense_shape: np.ndarray, size: np.ndarray, weights: np.ndarray) -> np.ndarray:
    if size.ndim != 0:
        raise InvalidArgumentError(f"Shape must be rank 0 but is rank {size.ndim} for size")
    n = int(size)
    if n < 0:
        raise InvalidArgumentError(f"size ({n}) must be non-negative")
    binary = bool(ctx.attrs.get("binary_output", False))
    has_w = weights.size > 0
    if has_w and weights.shape != values.shape:
        raise InvalidArgumentError(
            f"Weights and values must have the same shape. Weight shape: "
            f"{_fmt(weights.shape)}; values shape: {_fmt(values.shape)}")
    if indices.ndim != 2 or indices.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            f"indices should be a matrix with one row per value, got {_fmt(indices.shape)} "
            f"and {_fmt(values.shape)}")
    out_dt = weights.dtype
    vals = values.astype(np.int64)
    is_1d = dense_shape.size == 1
    if is_1d and vals.size and vals.min() < 0:
        raise InvalidArgumentError("Input arr must be non-negative!")
    keep = (vals >= 0) & (vals < n)   # the batched form skips negative values
    w = weights.astype(out_dt)[keep] if has_w else None
    if is_1d:
        out = np.zeros(n, out_dt)
        rows = None
    else:
        # every rank above 1 counts per row of the first dimension
        num_rows = int(dense_shape[0])
        batch = indices[:, 0].astype(np.int64)
        bad = batch >= num_rows
        if bad.any():
            b = int(batch[np.argmax(bad)])
            raise InvalidArgumentError(
                f"Index out of bound. `batch` ({b}) must be less than the dimension size "
                f"({num_rows}).")
        out = np.zeros((num_rows, n), out_dt)
        rows = batch[keep]
    cols = vals[keep]
    target = (cols,) if rows is None else (rows, cols)
    if binary:
        out[target] = 1
    else:
        np.add.at(out, target, w if w is not None else out_dt.type(1))
    return out


# --- SparseCross, SparseCrossV2, SparseCrossHashed ---------------------------------------------
#
# TF's sparse_cross_op.cc: every input is a column of a batch (a 2-D SparseTensor, whose entries
# are taken row by row in input order, or a [batch, k] dense matrix). Row b's crosses are the
# cartesian product of the row's features over the columns (sparse columns first, then dense;
# the last column varies fastest), written as [b, 0..count) entries of the output. A row in
# which some column has no feature has no cross.

_DT_ENUM = {np.dtype(np.int64): 9, np.dtype(object): 7}   # TF prints DataTypes as numbers
_KMUL = np.uint64(0xC6A4A7935BD1E995)
_INT64_MAX = np.uint64((1 << 63) - 1)


def _fingerprint_cat64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TF's FingerprintCat64 of two uint64 arrays (element-wise, wrapping)."""
    r = a ^ _KMUL
    t = b * _KMUL
    r ^= (t ^ (t >> np.uint64(47))) * _KMUL
    r = r * _KMUL
    r = (r ^ (r >> np.uint64(47))) * _KMUL
    return r ^ (r >> np.uint64(47))


def _cross_lists(ctx: KernelContext, args: tuple, extra: int):
    """Split the flat inputs into (indices, values, shapes, dense, trailing inputs)."""
    n = int(ctx.attrs.get("N", 0))
    nv = len(ctx.attrs.get("sparse_types", []) or [])
    nd = len(args) - extra - 2 * n - nv
    inds, vals = list(args[:n]), list(args[n:n + nv])
    shapes = list(args[n + nv:2 * n + nv])
    dense = list(args[2 * n + nv:2 * n + nv + nd])
    return inds, vals, shapes, dense, list(args[len(args) - extra:])


def _validate_cross(inds: list, vals: list, shapes: list, dense: list,
                    internal: np.dtype | None) -> int:
    """TF's ValidateInput; returns the batch size. ``internal`` is SparseCross's
    internal_type (the only op that checks value types)."""
    n = len(inds)
    for i, x in enumerate(inds):
        if x.ndim != 2:
            raise InvalidArgumentError(f"Input indices should be a matrix but received shape "
                                       f"{_fmt(x.shape)} at position {i}")
        if x.shape[1] != 2:
            raise InvalidArgumentError(f"Expected D2 of index to be 2 got {x.shape[1]} at "
                                       f"position {i}")
    if len(vals) != n:
        raise InvalidArgumentError(f"Expected {n} input values, got {len(vals)}")
    string_internal = internal is not None and internal == np.dtype(object)
    for i, v in enumerate(vals):
        if string_internal and v.dtype == np.int64:
            raise InvalidArgumentError("Input values should be of internal type 7 but "
                                       "received 9")
        if v.ndim != 1:
            raise InvalidArgumentError(f"Input values should be a vector but received shape "
                                       f"{_fmt(v.shape)} at position {i}")
        if inds[i].shape[0] != v.shape[0]:
            raise InvalidArgumentError(f"Expected size of values to be {inds[i].shape[0]} got "
                                       f"{v.shape[0]} at position {i}")
    if len(shapes) != n:
        raise InvalidArgumentError(f"Expected {n} input shapes, got {len(shapes)}")
    for i, s in enumerate(shapes):
        if s.ndim != 1:
            raise InvalidArgumentError(f"Input shapes should be a vector but received shape "
                                       f"{_fmt(s.shape)} at position {i}")
        if s.shape[0] != 2:
            raise InvalidArgumentError(f"shape should imply a 2D tensor, but got "
                                       f"{_fmt(s.shape)} at position {i}")
    for i, d in enumerate(dense):
        if string_internal and d.dtype == np.int64:
            raise InvalidArgumentError("Dense inputs should be of internal type 7 but "
                                       "received 9")
        if d.ndim != 2:
            raise InvalidArgumentError(f"Dense inputs should be a matrix but received shape "
                                       f"{_fmt(d.shape)} at position {i}")
    batch = int(shapes[0][0]) if shapes else int(dense[0].shape[0]) if dense else 0
    for i, s in enumerate(shapes):
        if int(s[0]) != batch:
            raise InvalidArgumentError(f"Expected batch size {batch} got {int(s[0])} at "
                                       f"position {i}")
    for i, d in enumerate(dense):
        if d.shape[0] != batch:
            raise InvalidArgumentError(f"Expected batch size {batch} got {d.shape[0]} at dense "
                                       f"tensor {i}")
    if batch < 0:  # TF fails allocating its per-row table
        raise InvalidArgumentError(f"Expected a non-negative batch size, got {batch}")
    return batch


def _row_features(indices: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: how many entries a sparse column has and where they start.

    TF walks the entries once, taking for row b = 0, 1, ... the run of consecutive entries
    whose row index is b; so runs out of increasing row order (or outside [0, batch)) stop
    the walk, and they and everything after them are ignored."""
    counts = np.zeros(batch, _I64)
    starts = np.zeros(batch, _I64)
    rows = indices[:, 0].astype(_I64, copy=False)
    if rows.size == 0 or batch == 0:
        return counts, starts
    rstart = np.concatenate([[0], np.flatnonzero(rows[1:] != rows[:-1]) + 1])
    rlen = np.diff(np.append(rstart, rows.size))
    rval = rows[rstart]
    ok = (rval >= 0) & (rval < batch)
    ok[1:] &= rval[1:] > rval[:-1]
    k = rval.size if ok.all() else int(np.argmin(ok))
    counts[rval[:k]] = rlen[:k]
    starts[rval[:k]] = rstart[:k]
    return counts, starts


def _cross_plan(inds: list, dense: list, batch: int):
    """The output's indices and shape, and for each column the flat position of the feature
    every cross takes from it (into the column's values, or the dense matrix raveled)."""
    counts, starts = [], []
    for x in inds:
        c, s = _row_features(x, batch)
        counts.append(c)
        starts.append(s)
    for d in dense:
        counts.append(np.full(batch, d.shape[1], _I64))
        starts.append(np.arange(batch, dtype=_I64) * d.shape[1])
    per_row = np.ones(batch, _I64)
    for c in counts:
        per_row *= c
    total = int(per_row.sum())
    row = np.repeat(np.arange(batch, dtype=_I64), per_row)
    first = np.cumsum(per_row) - per_row
    k = np.arange(total, dtype=_I64) - first[row]
    out_idx = np.stack([row, k], axis=1) if total else np.zeros((0, 2), _I64)
    out_shape = np.array([batch, int(per_row.max()) if batch else 0], _I64)
    picks: list[np.ndarray] = [np.zeros(0, _I64)] * len(counts)
    rest = k.copy()
    for i in range(len(counts) - 1, -1, -1):   # mixed radix, last column fastest
        c = counts[i][row]
        picks[i] = starts[i][row] + rest % np.maximum(c, 1)
        rest //= np.maximum(c, 1)
    return out_idx, out_shape, picks


def _column_values(vals: list, dense: list) -> list[np.ndarray]:
    """Each column's features, flat: a sparse column's values, a dense matrix raveled."""
    return list(vals) + [d.reshape(-1) for d in dense]


def _as_text(x: np.ndarray) -> np.ndarray:
    """A column's features as bytes (int64 values in decimal, as std::to_string)."""
    if x.dtype == object:
        return np.array([v if isinstance(v, bytes) else str(v).encode() for v in x]
                        + [b""], dtype=object)[:-1]
    return np.array([str(int(v)).encode() for v in x] + [b""], dtype=object)[:-1]


def _string_cross(inds: list, vals: list, dense: list, batch: int, sep: bytes):
    idx, shape, picks = _cross_plan(inds, dense, batch)
    cols = [_as_text(c)[p] for c, p in zip(_column_values(vals, dense), picks)]
    out = np.empty(idx.shape[0], dtype=object)
    out[:] = [sep.join(t) for t in zip(*cols)] if cols else []
    return idx, out, shape


def _bucket(h: np.ndarray, num_buckets: int) -> np.ndarray:
    m = np.uint64(num_buckets) if num_buckets > 0 else _INT64_MAX
    return (h % m).astype(_I64)


def _u64(x: np.ndarray) -> np.ndarray:
    return x.astype(_I64, copy=False).view(np.uint64)


def _hash_strings(x: np.ndarray, fn) -> np.ndarray:
    return np.array([fn(v if isinstance(v, bytes) else str(v).encode()) for v in x],
                    dtype=np.uint64).reshape(x.shape)


def _low4(x: np.ndarray) -> list[bytes]:
    """Each int64's first 4 bytes in memory: TF hashes sizeof(DataType) bytes of it."""
    return [int(v & 0xFFFFFFFF).to_bytes(4, "little") for v in _u64(x)]


@kernel("SparseCross")
def sparse_cross(ctx: KernelContext, *args: np.ndarray):
    inds, vals, shapes, dense, _ = _cross_lists(ctx, args, 0)
    internal = ctx.attrs.get("internal_type")
    batch = _validate_cross(inds, vals, shapes, dense,
                            np.dtype(internal) if internal is not None else None)
    out_type = ctx.attrs.get("out_type", np.dtype(np.int64))
    if np.dtype(out_type) == np.dtype(object):   # out_type, not hashed_output, decides
        return _string_cross(inds, vals, dense, batch, b"_X_")
    idx, shape, picks = _cross_plan(inds, dense, batch)
    h = np.full(idx.shape[0], int(ctx.attrs.get("hash_key", 0)) & ((1 << 64) - 1), np.uint64)
    for c, p in zip(_column_values(vals, dense), picks):   # each feature hashed once
        f = _hash_strings(c, fingerprint64) if c.dtype == object else _u64(c)
        h = _fingerprint_cat64(h, f[p])
    return idx, _bucket(h, int(ctx.attrs.get("num_buckets", 0))), shape


def _sep_text(sep: np.ndarray) -> str:
    items = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
             for v in sep.reshape(-1)[:3]]
    more = "..." if sep.size > 3 else ""
    return f"Tensor<type: string shape: {_fmt(sep.shape)} values: {' '.join(items)}{more}>"


@kernel("SparseCrossV2")
def sparse_cross_v2(ctx: KernelContext, *args: np.ndarray):
    inds, vals, shapes, dense, (sep,) = _cross_lists(ctx, args, 1)
    batch = _validate_cross(inds, vals, shapes, dense, None)
    if sep.ndim != 0:
        raise InvalidArgumentError("Input separator should be a scalar. Received: "
                                   + _sep_text(sep))
    s = sep.item()
    return _string_cross(inds, vals, dense, batch, s if isinstance(s, bytes) else str(s).encode())


@kernel("SparseCrossHashed")
def sparse_cross_hashed(ctx: KernelContext, *args: np.ndarray):
    inds, vals, shapes, dense, (num_buckets, strong_hash, salt) = _cross_lists(ctx, args, 3)
    batch = _validate_cross(inds, vals, shapes, dense, None)
    nb = int(num_buckets.reshape(-1)[0])
    strong = bool(strong_hash.reshape(-1)[0])
    if salt.size != 2:
        raise InvalidArgumentError(f'Input "salt" must have length 2 but has length '
                                   f"{salt.size}")
    k0, k1 = (int(v) for v in _u64(salt.reshape(-1)))
    strong_fn = lambda b: siphash24(k0, k1, b)  # noqa: E731
    idx, shape, picks = _cross_plan(inds, dense, batch)
    h = None
    for i, (c, p) in enumerate(zip(_column_values(vals, dense), picks)):
        if c.dtype == object:
            f = _hash_strings(c, strong_fn if strong else fingerprint64)
        elif strong:
            f = np.array([strong_fn(b) for b in _low4(c)], dtype=np.uint64)
        elif i < len(vals):   # a sparse int64 column: Fingerprint64 of its 4 low bytes
            f = np.array([fingerprint64(b) for b in _low4(c)], dtype=np.uint64)
        else:                 # a dense int64 column: the value itself
            f = _u64(c)
        h = f[p] if h is None else _fingerprint_cat64(h, f[p])
    if h is None:
        h = np.zeros(idx.shape[0], np.uint64)
    return idx, _bucket(h, nb), shape
