"""Ragged tensors: RaggedRange, RaggedGather, RaggedTensorToTensor, RaggedTensorToSparse,
RaggedCross, RaggedBincount, the *CountSparseOutput ops, RaggedFillEmptyRows (and its
gradient) and the ragged variant encoding.

A ragged tensor reaches a kernel as its parts: ``nested_splits`` (one int32/int64 vector per
ragged dimension, outermost first) and ``flat_values`` (a dense tensor whose first dimension
the innermost splits index). TensorFlow's CPU semantics, as checked against its outputs
(tests/data/kernels/raw_ops_ragged):

* RaggedTensorToTensor places every value at its row's next column and pads with
  ``default_value`` (broadcast to one value's shape); dimensions given in ``shape`` truncate
  rows and columns, -1 (or a scalar -1 shape) takes the partition's widest row. Rows given by
  VALUE_ROWIDS are runs of equal ids; TF copies values in runs, so an out-of-order id writes
  at the next free slot, not at its own row (reproduced here).
* RaggedRange accumulates ``value += delta`` in the values' dtype, as TF does: float rows
  carry TF's rounding, not ``start + i * delta``.
* RaggedCross joins string features with ``_X_`` or chains FarmHash fingerprints with
  FingerprintCat64, the last feature varying fastest.
* The variant encoding (RaggedTensorToVariant / RaggedTensorFromVariant) is a
  :class:`RaggedVariant` object per element, opaque to the executor like a TensorList: a
  scalar variant is the object itself, a batch an object ndarray of them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, NotFoundError

from .registry import KernelContext, declare, kernel
from .string import fingerprint64

_I64 = np.int64
_M64 = (1 << 64) - 1


def _fmt(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _ranges(starts: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(s, l)`` for each pair (empty when ``l <= s``)."""
    starts = np.asarray(starts, dtype=_I64).reshape(-1)
    lens = np.maximum(np.asarray(limits, dtype=_I64).reshape(-1) - starts, 0)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, _I64)
    offsets = np.cumsum(lens) - lens
    return np.repeat(starts - offsets, lens) + np.arange(total, dtype=_I64)


def _row_ids(splits: np.ndarray) -> np.ndarray:
    """The row of every value a (valid) splits vector partitions."""
    s = np.asarray(splits, dtype=_I64)
    return np.repeat(np.arange(len(s) - 1, dtype=_I64), np.diff(s))


# --- RaggedTensorToTensor -------------------------------------------------------------------

_PARTITION_TYPES = ("FIRST_DIM_SIZE", "VALUE_ROWIDS", "ROW_SPLITS")


def _shape_from_tensor(t: np.ndarray) -> list[int] | None:
    """TensorFlow's TensorShapeFromTensor: scalar -1 is an unknown rank, -1 an unknown dim."""
    if t.ndim == 0:
        if int(t) != -1:
            raise InvalidArgumentError(
                "The only valid scalar shape tensor is the fully unknown shape specified as -1.")
        return None
    if t.ndim != 1:
        raise InvalidArgumentError(f"Shape must be a vector, got shape {_fmt(t.shape)}")
    dims = [int(d) for d in t]
    for d in dims:
        if d < -1:
            raise InvalidArgumentError(f"Dimension {d} must be >= -1")
    return dims


def _check_default_shape(default: tuple, values: tuple) -> None:
    """TF's ValidateDefaultValueShape (dims compared from the left, after values' first)."""
    def show(s: tuple) -> str:
        return _fmt(s)
    if len(default) >= len(values):
        raise InvalidArgumentError(
            f"default_value.shape={show(default)} and rt_input.flat_values.shape="
            f"{show(values)} are incompatible: default_value.rank = {len(default)}  must be "
            f"less than rt_input.flat_values.rank = {len(values)}")
    for i in range(min(len(default), len(values) - 1)):
        d, v = default[i], values[i + 1]
        if d != 1 and d != v:
            raise InvalidArgumentError(
                f"default_value.shape={show(default)} and rt_input.flat_values.shape="
                f"{show(values)} are incompatible: default_value.shape[{i - len(default)}] = "
                f"{d} but rt_input.flat_values.shape[{i - len(default)}] = {v}")


def _max_width(kind: str, t: np.ndarray) -> int:
    t = np.asarray(t, dtype=_I64).reshape(-1)
    if kind == "ROW_SPLITS":
        return max(int(np.diff(t).max()), 0) if len(t) > 1 else 0
    if len(t) == 0:  # VALUE_ROWIDS: the longest run of equal ids
        return 0
    starts = np.flatnonzero(np.concatenate([[True], t[1:] != t[:-1], [True]]))
    return int(np.diff(starts).max())


def _index_row_splits(splits: np.ndarray, parent: np.ndarray, mult: int,
                      size: int) -> np.ndarray:
    s = np.asarray(splits, dtype=_I64).reshape(-1)
    if len(s) - 1 > len(parent):
        raise InvalidArgumentError(
            f"Row partition size is greater than output size: {len(s) - 1} > {len(parent)}")
    if len(s) == 0:
        return np.zeros(0, _I64)
    lens = np.maximum(np.diff(s), 0)   # a decreasing split contributes no value
    if int(lens.sum()) != int(s[-1]):
        raise InvalidArgumentError("Invalid row split size.")
    rows = np.repeat(np.arange(len(lens), dtype=_I64), lens)
    col = np.arange(len(rows), dtype=_I64) - np.repeat(np.cumsum(lens) - lens, lens)
    base = parent[rows]
    return np.where((base >= 0) & (col < size), base + col * mult, -1)


def _index_value_rowids(rowids: np.ndarray, parent: np.ndarray, mult: int,
                        size: int) -> np.ndarray:
    r = np.asarray(rowids, dtype=_I64).reshape(-1)
    if len(r) == 0:
        return np.zeros(0, _I64)
    bad = (r < 0) | (r >= len(parent))
    if bad.any():
        i = int(np.argmax(bad))
        which = "current_value_rowid" if i == 0 else "next_value_rowid"
        raise InvalidArgumentError(
            f"Got {which}={int(r[i])} which is not less than {len(parent)}")
    new_run = np.concatenate([[True], r[1:] != r[:-1]])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(r)), 0))
    col = np.arange(len(r), dtype=_I64) - run_start
    base = parent[r]
    return np.where((base >= 0) & (col < size), base + col * mult, -1)


@kernel("RaggedTensorToTensor")
def ragged_tensor_to_tensor(ctx: KernelContext, shape: np.ndarray, values: np.ndarray,
                            default_value: np.ndarray, *partitions: np.ndarray) -> np.ndarray:
    types = [_str(t) for t in ctx.attrs.get("row_partition_types") or []]
    for t in types:
        if t not in _PARTITION_TYPES:
            raise InvalidArgumentError(f"Unknown string for partition info type: {t}")
    if not types:
        raise InvalidArgumentError("No row_partition_types given.")
    fds = types[0] == "FIRST_DIM_SIZE"
    ragged_rank = len(types) - 1 if fds else len(types)
    if len(partitions) < len(types):
        raise InvalidArgumentError(
            f"Expected {len(types)} row partition tensors, got {len(partitions)}")

    def part(dim: int) -> tuple[str, np.ndarray]:   # the partition between dim and dim + 1
        k = dim + 1 if fds else dim
        return types[k], partitions[k]

    first = partitions[0]
    if first.size == 0:
        raise InvalidArgumentError(
            "Invalid first partition input. Tensor requires at least one element.")
    if types[0] == "VALUE_ROWIDS":
        raise InvalidArgumentError("Cannot handle VALUE_ROWIDS in first dimension.")
    first_dim = int(first.reshape(-1)[0]) if fds else first.shape[0] - 1

    # the output shape: `shape` combined with the values' inner dimensions
    dims = _shape_from_tensor(shape)
    vshape = values.shape
    _check_default_shape(default_value.shape, vshape)
    if dims is None:
        dims = [-1] * (ragged_rank + len(vshape))
    if ragged_rank + len(vshape) != len(dims):
        raise InvalidArgumentError(
            f"rt_input.shape and shape={_fmt(dims)} are incompatible: rt_input.rank = "
            f"{ragged_rank + len(vshape)} but shape.rank = {len(dims)}")
    for i in range(1, len(vshape)):
        j = len(dims) - len(vshape) + i
        if dims[j] >= 0 and dims[j] != vshape[i]:
            raise InvalidArgumentError(
                f"rt_input.shape and shape={_fmt(dims)} are incompatible: rt_input.shape["
                f"{i + ragged_rank}] = {vshape[i]} but shape[{i + ragged_rank}] = {dims[j]}")
        dims[j] = vshape[i]
    if dims[0] == -1:
        dims[0] = first_dim
    for i in range(1, ragged_rank + 1):
        if dims[i] < 0:
            dims[i] = _max_width(*part(i - 1))
    for d in dims:
        if d < 0:
            raise InvalidArgumentError(f"Dimension {d} must be >= 0")

    mult = [1] * (ragged_rank + 1)
    for i in range(ragged_rank - 1, -1, -1):
        mult[i] = mult[i + 1] * dims[i + 1]
    elem_shape = tuple(dims[ragged_rank + 1:])
    elem = int(np.prod(elem_shape, dtype=_I64))

    # the default value as one value's worth of elements
    if default_value.size == 1:
        fill = default_value.reshape(())
    elif default_value.size == elem:
        fill = default_value.reshape(elem_shape)
    else:
        try:
            fill = np.broadcast_to(default_value, elem_shape)
        except ValueError:
            raise InvalidArgumentError("Error broadcasting default_value") from None
    out = np.empty((int(np.prod(dims[:ragged_rank + 1], dtype=_I64)),) + elem_shape,
                   dtype=values.dtype)
    out[...] = fill
    if out.shape[0] == 0:   # TF checks the partitions only when some row is kept
        return out.reshape(dims)

    # where each value's row starts in the output (-1: cut off by `shape`)
    n0 = min(first_dim, dims[0])
    index = np.concatenate([np.arange(max(n0, 0), dtype=_I64) * mult[0],
                            np.full(max(first_dim - max(n0, 0), 0), -1, _I64)])
    for i in range(1, ragged_rank + 1):
        kind, t = part(i - 1)
        fn = _index_row_splits if kind == "ROW_SPLITS" else _index_value_rowids
        index = fn(t, index, mult[i], dims[i])

    keep = np.flatnonzero(index >= 0)
    nvals = values.shape[0] if values.ndim else 0
    if len(keep) and keep[-1] >= nvals:   # TF would read past the values
        raise InvalidArgumentError(
            f"The row partitions index {len(index)} values but flat_values has {nvals}")
    dst = index[keep]
    if len(dst) and (np.diff(dst) <= 0).any():
        # TF copies runs of values: a value whose slot is not past the previous one goes to
        # the next free slot (values past the end are dropped)
        rank = np.arange(len(dst), dtype=_I64)
        dst = rank + np.maximum.accumulate(dst - rank)
        ok = dst < out.shape[0]
        keep, dst = keep[ok], dst[ok]
    if out.size:
        out[dst] = values.reshape((nvals,) + elem_shape)[keep]
    return out.reshape(dims)


# --- RaggedRange ----------------------------------------------------------------------------

@kernel("RaggedRange")
def ragged_range(ctx: KernelContext, starts: np.ndarray, limits: np.ndarray,
                 deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    for name, t in (("starts", starts), ("limits", limits), ("deltas", deltas)):
        if t.ndim > 1:
            raise InvalidArgumentError(f"{name} must be a scalar or vector")
    sizes = {t.shape[0] for t in (starts, limits, deltas) if t.ndim == 1}
    if len(sizes) > 1:
        raise InvalidArgumentError("starts, limits, and deltas must have the same shape")
    nrows = sizes.pop() if sizes else 1
    dt = starts.dtype
    st, li, de = (np.broadcast_to(t.reshape(-1), (nrows,)) if t.ndim == 0 else t
                  for t in (starts, limits, deltas))
    if (de == 0).any():
        raise InvalidArgumentError("Requires delta != 0")
    empty = ((de > 0) & (li < st)) | ((de < 0) & (li > st))
    if dt.kind in "iu":
        a, lim, d = st.astype(object), li.astype(object), de.astype(object)
        counts = [0 if e else -(-abs(y - x) // abs(z)) for x, y, z, e in zip(a, lim, d, empty)]
    else:
        with np.errstate(all="ignore"):
            q = np.ceil(np.abs((li - st) / de)).astype(dt)   # in the values' dtype, as TF
        counts = []
        for e, v in zip(empty, q.tolist()):
            if e:
                counts.append(0)
                continue
            if not v <= 9.223372036854775807e18:
                raise InvalidArgumentError(
                    "Requires ((limit - start) / delta) <= 9223372036854775807")
            counts.append(int(v))
    splits = np.zeros(nrows + 1, dtype=ctx.attrs.get("Tsplits") or _I64)
    splits[1:] = np.cumsum(counts, dtype=_I64)
    if dt.kind in "iu":
        rows = np.repeat(np.arange(nrows), counts)
        pos = np.arange(len(rows), dtype=_I64) - np.repeat(np.cumsum(counts) - counts, counts)
        with np.errstate(over="ignore"):
            vals = (st[rows].astype(_I64) + pos * de[rows].astype(_I64)).astype(dt)
        return splits, vals
    parts = []
    for x, z, n in zip(st, de, counts):
        seq = np.full(n, z, dtype=dt)
        if n:
            seq[0] = x
        with np.errstate(over="ignore", invalid="ignore"):
            parts.append(np.add.accumulate(seq, dtype=dt))   # sequential, as TF's loop
    return splits, (np.concatenate(parts) if parts else np.zeros(0, dt))


# --- RaggedGather ---------------------------------------------------------------------------

def _check_splits(splits: list[np.ndarray], nvals: int) -> None:
    for d, s in enumerate(splits):
        last = nvals if d == len(splits) - 1 else len(splits[d + 1])
        if len(s) == 0:
            raise InvalidArgumentError("Ragged splits may not be empty")
        if s[0] < 0:
            raise InvalidArgumentError("Ragged splits must be non-negative")
        if s[-1] > last:
            raise InvalidArgumentError("Ragged splits must not point past values")
        if (np.diff(s) < 0).any():
            raise InvalidArgumentError("Ragged splits must be sorted")


@kernel("RaggedGather")
def ragged_gather(ctx: KernelContext, *args: np.ndarray) -> list[np.ndarray]:
    splits = [np.asarray(s) for s in args[:-2]]
    values, indices = args[-2], args[-1]
    sdt = splits[0].dtype
    num_params = len(splits[0]) - 1
    flat_idx = indices.reshape(-1).astype(_I64)
    bad = (flat_idx < 0) | (flat_idx >= num_params)
    if bad.any():
        i = int(np.argmax(bad))
        pos = np.unravel_index(i, indices.shape) if indices.ndim else ()
        where = "[" + ",".join(str(int(p)) for p in pos) + "]" if indices.ndim else ""
        raise InvalidArgumentError(
            f"indices{where} = {int(flat_idx[i])} is not in [0, {num_params})")
    if values.ndim == 0:
        raise InvalidArgumentError("params.rank must be nonzero")
    _check_splits(splits, values.shape[0])
    out: list[np.ndarray] = []
    # uniform splits for the dimensions of `indices` but its last
    nrows = 1
    for d in range(indices.ndim - 1):
        nrows *= indices.shape[d]
        out.append(np.arange(nrows + 1, dtype=sdt) * indices.shape[d + 1])
    start, limit = flat_idx, flat_idx + 1
    for d, s in enumerate(splits):
        s64 = s.astype(_I64)
        if d + indices.ndim - 1 >= 0:
            rows = _ranges(start, limit)
            lens = s64[rows + 1] - s64[rows]
            out.append(np.concatenate([[0], np.cumsum(lens)]).astype(sdt))
        start, limit = s64[start], s64[limit]
    want = int(ctx.attrs.get("OUTPUT_RAGGED_RANK", len(out)))
    if want != len(out):
        raise InvalidArgumentError(
            f"OUTPUT_RAGGED_RANK is {want} but indices.rank - 1 + PARAMS_RAGGED_RANK is "
            f"{len(out)}")
    out.append(values[_ranges(start, limit)])
    return out


# --- RaggedTensorToSparse -------------------------------------------------------------------

@kernel("RaggedTensorToSparse")
def ragged_tensor_to_sparse(ctx: KernelContext, *args: np.ndarray):
    splits = [np.asarray(s, dtype=_I64).reshape(-1) for s in args[:-1]]
    values = args[-1]
    if not splits:
        raise InvalidArgumentError("rt_nested_splits must be non empty")
    for i, s in enumerate(splits):
        if len(s) == 0:
            raise InvalidArgumentError("ragged splits may not be empty.")
        if s[0] != 0:
            raise InvalidArgumentError("First value of ragged splits must be 0.")
        d = np.diff(s)
        if (d < 0).any():
            j = int(np.argmax(d < 0)) + 1
            raise InvalidArgumentError(
                f"Ragged splits should be non decreasing, but we got {s[j - 1]} followed by "
                f"{s[j]}")
        if i > 0 and len(s) != splits[i - 1][-1] + 1:
            raise InvalidArgumentError(
                "Final value of ragged splits must match the length the corresponding ragged "
                "values.")
    if (values.shape[0] if values.ndim else 1) != splits[-1][-1]:
        raise InvalidArgumentError(
            "Final value of ragged splits must match the length the corresponding ragged "
            "values.")
    nvals = int(splits[-1][-1])
    inner = values.shape[1:]
    # the ragged part of each value's index, innermost first
    row = _row_ids(splits[-1])
    cols = [np.arange(nvals, dtype=_I64) - splits[-1][row]]
    for s in reversed(splits[:-1]):
        parent = _row_ids(s)[row] if len(row) else row
        cols.append(row - s[parent])
        row = parent
    cols.append(row)
    ragged = np.stack(cols[::-1], axis=1) if nvals else np.zeros((0, len(cols)), _I64)
    nin = int(np.prod(inner, dtype=_I64))
    suffix = np.indices(inner, dtype=_I64).reshape(len(inner), nin).T   # row-major
    idx = np.concatenate([np.repeat(ragged, nin, axis=0), np.tile(suffix, (nvals, 1))],
                         axis=1)
    shape = [len(splits[0]) - 1] + [max(int(np.diff(s).max()), 0) if len(s) > 1 else 0
                                    for s in splits] + list(inner)
    return idx, values.reshape(-1), np.asarray(shape, dtype=_I64)


# --- RaggedCross ----------------------------------------------------------------------------

_KMUL = 0xC6A4A7935BD1E995


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's FingerprintCat64: two 64-bit fingerprints combined into one."""
    def shift_mix(v: int) -> int:
        return v ^ (v >> 47)
    result = fp1 ^ _KMUL
    result ^= (shift_mix((fp2 * _KMUL) & _M64) * _KMUL) & _M64
    result = (result * _KMUL) & _M64
    result = (shift_mix(result) * _KMUL) & _M64
    return shift_mix(result)


def _verify_splits(s: np.ndarray, nvals: int) -> None:
    """TF's RaggedTensorVerifySplits with the last-element check."""
    if s.ndim != 1:
        raise InvalidArgumentError(
            f"Invalid ragged splits: ragged splits must be rank 1 but is rank {s.ndim}")
    if s.size < 1:
        raise InvalidArgumentError(
            "Invalid ragged splits: ragged splits must have at least one splits, but is empty")
    if s[0] != 0:
        raise InvalidArgumentError(
            f"Invalid ragged splits: first element of ragged splits  must be 0 but is {s[0]}")
    d = np.diff(s)
    if (d < 0).any():
        i = int(np.argmax(d < 0)) + 1
        raise InvalidArgumentError(
            f"Invalid ragged splits: ragged splits must be monotonically increasing, but "
            f"ragged_splits[{i}]={s[i]} is smaller than row_splits[{i - 1}]={s[i - 1]}")
    if s[-1] != nvals:
        raise InvalidArgumentError(
            f"Invalid ragged splits: last element of ragged splits must be the number of "
            f"ragged values({nvals}) but is {s[-1]}")


@kernel("RaggedCross")
def ragged_cross(ctx: KernelContext, *args: np.ndarray):
    a = ctx.attrs
    order = _str(a.get("input_order", ""))
    # the input counts, from input_order (the list attrs say the same in any valid node)
    nr, ns, nd = order.count("R"), order.count("S"), order.count("D")
    if 2 * nr + 3 * ns + nd != len(args):
        raise InvalidArgumentError("Invalid length for input_order")
    rv, rs = args[:nr], args[nr:2 * nr]
    si, sv = args[2 * nr:2 * nr + ns], args[2 * nr + ns:2 * nr + 2 * ns]
    sh, dense = args[2 * nr + 2 * ns:2 * nr + 3 * ns], args[2 * nr + 3 * ns:]
    sdt = np.dtype(a.get("out_row_splits_type") or _I64)
    for v, s in zip(rv, rs):
        if s.dtype != sdt:   # TF reads them as the output's splits type (and aborts)
            raise InvalidArgumentError(
                f"ragged_row_splits must be {_dtype_name(sdt)} like out_row_splits_type, got "
                f"{_dtype_name(s.dtype)}")
        if v.ndim != 1 or s.ndim != 1:
            raise InvalidArgumentError("tf.ragged.cross only supports inputs with rank=2.")
        _verify_splits(s, v.shape[0])
    for i in range(ns):
        if si[i].ndim != 2 or sv[i].ndim != 1 or sh[i].ndim != 1:
            raise InvalidArgumentError(f"Invalid SparseTensor {i}")
        if sh[i].size != 2:
            raise InvalidArgumentError("tf.ragged.cross only supports inputs with rank=2.")
    for d in dense:
        if d.ndim != 2:
            raise InvalidArgumentError("tf.ragged.cross only supports inputs with rank=2.")
    batch = (len(rs[0]) - 1 if nr else dense[0].shape[0] if nd else int(sh[0][0]) if ns
             else 0)
    if any(len(s) - 1 != batch for s in rs) or any(int(s[0]) != batch for s in sh) \
            or any(d.shape[0] != batch for d in dense):
        raise InvalidArgumentError("inputs must all have the same batch dimension size.")

    # every feature as (values, row splits)
    feats: list[tuple[np.ndarray, np.ndarray]] = []
    it_r, it_s, it_d = iter(range(nr)), iter(range(ns)), iter(range(nd))
    for c in order:
        if c == "R":
            i = next(it_r)
            feats.append((rv[i], rs[i].astype(_I64)))
        elif c == "S":
            i = next(it_s)
            rows = si[i][:, 0] if si[i].shape[0] else np.zeros(0, _I64)
            # TF walks the (sorted) indices: row b ends at the first index with row > b
            ends = np.searchsorted(np.maximum.accumulate(rows) if len(rows) else rows,
                                   np.arange(batch), side="right")
            ends = np.minimum(ends, sv[i].shape[0])
            feats.append((sv[i], np.concatenate([[0], ends]).astype(_I64)))
        elif c == "D":
            i = next(it_d)
            d = dense[i]
            feats.append((d.reshape(-1), np.arange(batch + 1, dtype=_I64) * d.shape[1]))
        else:
            raise InvalidArgumentError("Unexpected input_order value.")

    hashed = np.dtype(a.get("out_values_type") or object) != np.dtype(object)
    buckets = int(a.get("num_buckets", 0))
    key = int(a.get("hash_key", 0)) & _M64

    def as_text(v: Any) -> bytes:
        return v if isinstance(v, bytes) else str(int(v)).encode()

    def as_hash(v: Any) -> int:
        return fingerprint64(v) if isinstance(v, bytes) else int(v) & _M64

    conv = as_hash if hashed else as_text
    cols = [[conv(v) for v in f[0].tolist()] for f in feats]
    out: list[Any] = []
    splits = [0]
    for b in range(batch):
        per = [col[int(f[1][b]):int(f[1][b + 1])] for col, f in zip(cols, feats)]
        for combo in (itertools.product(*per) if per else ()):
            if hashed:
                h = key
                for fp in combo:
                    h = fingerprint_cat64(h, fp)
                out.append(h % buckets if buckets > 0 else h % 0x7FFFFFFFFFFFFFFF)
            else:
                out.append(b"_X_".join(combo))
        splits.append(len(out))
    if hashed:
        vals = np.asarray(out, dtype=_I64).reshape(-1)
    else:
        vals = np.empty(len(out), dtype=object)
        vals[:] = out
    return vals, np.asarray(splits, dtype=sdt)


# --- bincount and the *CountSparseOutput ops ------------------------------------------------

@kernel("RaggedBincount")
def ragged_bincount(ctx: KernelContext, splits: np.ndarray, values: np.ndarray,
                    size: np.ndarray, weights: np.ndarray) -> np.ndarray:
    if size.ndim != 0:
        raise InvalidArgumentError(f"Shape must be rank 0 but is rank {size.ndim}")
    n = int(size)
    if n < 0:
        raise InvalidArgumentError(f"size ({n}) must be non-negative")
    s = splits.reshape(-1).astype(_I64)
    vals = values.reshape(-1).astype(_I64)
    if len(s) == 0:
        raise InvalidArgumentError("Splits must start with 0, not with <empty>")
    if s[0] != 0:
        raise InvalidArgumentError(f"Splits must start with 0, not with {s[0]}")
    if s[-1] != len(vals):
        raise InvalidArgumentError(
            f"Splits must end with the number of values, got {s[-1]} instead of {len(vals)}")
    rows = _walk_rows(s, len(vals))
    if (vals < 0).any():
        raise InvalidArgumentError("Input must be non-negative")
    w = weights.reshape(-1)
    if w.size and w.size < len(vals):
        raise InvalidArgumentError(
            f"weights has {w.size} values, fewer than the {len(vals)} values")
    dt = ctx.attrs.get("T") or weights.dtype
    out = np.zeros((len(s) - 1, n), dtype=dt)
    m = vals < n
    if bool(ctx.attrs.get("binary_output", False)):
        out[rows[m], vals[m]] = 1
    elif w.size:   # extra weights are ignored, as TF reads only the first len(values)
        np.add.at(out, (rows[m], vals[m]), w[:len(vals)][m])
    else:
        np.add.at(out, (rows[m], vals[m]), 1)
    return out


def _walk_rows(s: np.ndarray, nvals: int) -> np.ndarray:
    """The row of each value as TF's count kernels find it: value ``i`` belongs to the row
    before the first split (walking forward from the last row found) greater than ``i``."""
    if (np.diff(s) >= 0).all():
        return np.searchsorted(s, np.arange(nvals), side="right") - 1
    rows = np.empty(nvals, _I64)
    b = 0
    for i in range(nvals):
        while b < len(s) and i >= s[b]:
            b += 1
        if b >= len(s):
            raise InvalidArgumentError(f"Splits are not sorted: value {i} has no row")
        rows[i] = b - 1
    return rows


def _count_output(ctx: KernelContext, batch: np.ndarray, vals: np.ndarray, nbatch: int,
                  weights: np.ndarray | None, is_1d: bool):
    """TF's OutputSparse: per-batch counts of each value, sorted by value."""
    a = ctx.attrs
    maxlength, minlength = int(a.get("maxlength", -1)), int(a.get("minlength", -1))
    dt = np.dtype(a.get("output_type") or np.int64)
    if (vals < 0).any():
        raise InvalidArgumentError("Input values must all be non-negative")
    # maxlength -1 is no limit (0 keeps nothing)
    keep = (vals < maxlength) if maxlength >= 0 else np.ones(len(vals), bool)
    b, v = batch[keep], vals[keep]
    max_value = int(v.max()) if len(v) else 0
    size = maxlength if maxlength >= 0 else max(max_value + 1, minlength)
    order = np.lexsort((v, b)) if len(v) else np.zeros(0, _I64)
    b, v = b[order], v[order]
    first = np.concatenate([[True], (b[1:] != b[:-1]) | (v[1:] != v[:-1])]) if len(v) \
        else np.zeros(0, bool)
    group = np.cumsum(first) - 1
    ngroups = int(first.sum())
    counts = np.zeros(ngroups, dtype=dt)
    if bool(a.get("binary_output", False)):
        counts[:] = 1
    elif weights is not None:
        # per (batch, value) in input order, as TF's running sums
        np.add.at(counts, group, weights[keep][order])
    else:
        np.add.at(counts, group, 1)
    ub, uv = b[first], v[first]
    idx = uv.reshape(-1, 1) if is_1d else np.stack([ub, uv], axis=1)
    shape = [size] if is_1d else [nbatch, size]
    return (idx.astype(_I64).reshape(-1, 1 if is_1d else 2), counts,
            np.asarray(shape, dtype=_I64))


def _weights(w: np.ndarray, like: np.ndarray, what: str) -> np.ndarray | None:
    if w.size == 0:
        return None
    if w.shape != like.shape:
        raise InvalidArgumentError(
            f"Weights and {what} must have the same shape. Weight shape: {_fmt(w.shape)}; "
            f"{what} shape: {_fmt(like.shape)}")
    return w.reshape(-1)


@kernel("DenseCountSparseOutput")
def dense_count_sparse_output(ctx: KernelContext, values: np.ndarray, weights: np.ndarray):
    if values.ndim not in (1, 2):
        raise InvalidArgumentError(
            f"Input must be a 1 or 2-dimensional tensor. Got: {_fmt(values.shape)}")
    w = _weights(weights, values, "data")
    if values.ndim == 2 and values.shape[0] == 0:
        raise InvalidArgumentError("Invalid input: Shapes dimension cannot be 0.")
    nbatch = values.shape[0] if values.ndim == 2 else 1
    per = values.shape[-1]
    batch = np.repeat(np.arange(nbatch, dtype=_I64), per)
    return _count_output(ctx, batch, values.reshape(-1).astype(_I64), nbatch, w,
                         values.ndim == 1)


@kernel("SparseCountSparseOutput")
def sparse_count_sparse_output(ctx: KernelContext, indices: np.ndarray, values: np.ndarray,
                               dense_shape: np.ndarray, weights: np.ndarray):
    if indices.ndim != 2:
        raise InvalidArgumentError(
            f"Input indices must be a 2-dimensional tensor. Got: {_fmt(indices.shape)}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"Input values must be a vector. Got: {_fmt(values.shape)}")
    if dense_shape.ndim != 1:
        raise InvalidArgumentError(
            f"Input shape must be a vector. Got: {_fmt(dense_shape.shape)}")
    if values.shape[0] != indices.shape[0]:
        raise InvalidArgumentError(
            f"Number of values must match first dimension of indices.Got {values.shape[0]} "
            f"values, indices shape: {_fmt(indices.shape)}")
    if dense_shape.shape[0] != indices.shape[1]:
        raise InvalidArgumentError(
            f"Number of dimensions must match second dimension of indices.Got "
            f"{dense_shape.shape[0]} dimensions, indices shape: {_fmt(indices.shape)}")
    if dense_shape.size == 0:
        raise InvalidArgumentError("The shape argument requires at least one element.")
    shp = dense_shape.astype(_I64)
    bad = (indices < 0) | (indices >= shp)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InvalidArgumentError(
            f"Invalid index value at {i}: dimension {j} has value {indices[i, j]} which is "
            f"not in [0, {shp[j]}) (as given by dense shape {_fmt(shp)}")
    w = _weights(weights, values, "values")
    is_1d = dense_shape.size == 1
    nbatch = 1 if is_1d else int(shp[0])
    if not 0 < nbatch < 2**31 - 1:
        raise InvalidArgumentError(
            f"Cannot allocate {nbatch} batches, is the dense shape too wide?")
    batch = np.zeros(values.shape[0], _I64) if is_1d else indices[:, 0].astype(_I64)
    return _count_output(ctx, batch, values.astype(_I64), nbatch, w, is_1d)


@kernel("RaggedCountSparseOutput")
def ragged_count_sparse_output(ctx: KernelContext, splits: np.ndarray, values: np.ndarray,
                               weights: np.ndarray):
    w = _weights(weights, values, "values")
    s = splits.reshape(-1).astype(_I64)
    vals = values.reshape(-1).astype(_I64)
    nbatch = len(s) - 1
    if nbatch <= 0:
        raise InvalidArgumentError("Must provide at least 2 elements for the splits argument")
    if s[0] != 0:
        raise InvalidArgumentError(f"Splits must start with 0, not with {s[0]}")
    if s[-1] != len(vals):
        raise InvalidArgumentError(
            f"Splits must end with the number of values, got {s[-1]} instead of {len(vals)}")
    return _count_output(ctx, _walk_rows(s, len(vals)), vals, nbatch, w, False)


# --- RaggedFillEmptyRows ---------------------------------------------------------------------

@kernel("RaggedFillEmptyRows")
def ragged_fill_empty_rows(ctx: KernelContext, value_rowids: np.ndarray, values: np.ndarray,
                           nrows: np.ndarray, default_value: np.ndarray):
    if nrows.ndim != 0:
        raise InvalidArgumentError(f"nrows must be a scalar, saw: {_fmt(nrows.shape)}")
    if value_rowids.ndim != 1:
        raise InvalidArgumentError(
            f"value_rowids must be a vector, saw: {_fmt(value_rowids.shape)}")
    if values.ndim != 1:
        raise InvalidArgumentError(f"values must be a vector, saw: {_fmt(values.shape)}")
    if value_rowids.shape[0] != values.shape[0]:
        raise InvalidArgumentError(
            f"The length of `values` ({values.shape[0]}) must match the first dimension of "
            f"`value_rowids` ({value_rowids.shape[0]}).")
    if default_value.ndim != 0:
        raise InvalidArgumentError(
            f"default_value must be a scalar, saw: {_fmt(default_value.shape)}")
    n = int(nrows)
    r = value_rowids.astype(_I64)
    count = len(r)
    if n == 0:
        if count:
            raise InvalidArgumentError(
                f"Received RaggedTensor with nrows = 0 but va.shape[0] = {count}")
        # (TF gives the row ids shape [0, 1] here)
        return (np.zeros((0, 1), _I64), np.zeros(0, values.dtype), np.zeros(0, bool),
                np.zeros(0, _I64))
    bad = (r < 0) | (r >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"value_rowids({i}, 0) is invalid: {r[i]} >= {n}")
    per_row = np.bincount(r, minlength=n)
    empty = per_row == 0
    ordered = bool((np.diff(r) >= 0).all())
    if not empty.any() and ordered:
        return value_rowids, values, empty, np.arange(count, dtype=_I64)
    filled = np.maximum(per_row, 1)
    start = np.cumsum(filled) - filled
    order = np.argsort(r, kind="stable")
    rank = np.empty(count, _I64)   # each value's position among its row's values
    rank[order] = np.arange(count) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    rev = start[r] + rank
    total = int(filled.sum())
    out_ids = np.repeat(np.arange(n, dtype=_I64), filled)
    out_vals = np.empty(total, dtype=values.dtype)
    out_vals[rev] = values
    out_vals[start[empty]] = default_value
    return out_ids, out_vals, empty, rev.astype(_I64)


@kernel("RaggedFillEmptyRowsGrad")
def ragged_fill_empty_rows_grad(ctx: KernelContext, reverse_index_map: np.ndarray,
                                grad_values: np.ndarray):
    if reverse_index_map.ndim != 1:
        raise InvalidArgumentError(
            f"reverse_index_map must be a vector, saw: {_fmt(reverse_index_map.shape)}")
    if grad_values.ndim != 1:
        raise InvalidArgumentError(
            f"grad_values must be a vector, saw: {_fmt(grad_values.shape)}")
    if grad_values.dtype.kind in "OSUb":   # TF registers it for number types only
        raise NotFoundError(
            f"No registered 'RaggedFillEmptyRowsGrad' OpKernel for CPU devices with T="
            f"{_dtype_name(grad_values.dtype)}")
    rev = reverse_index_map.astype(_I64)
    full = grad_values.shape[0]
    bad = (rev < 0) | (rev >= full)
    if bad.any():
        raise InvalidArgumentError(
            f"Elements in reverse index must be in [0, {full}) but got {rev[np.argmax(bad)]}")
    d_values = grad_values[rev]
    visited = np.zeros(full, bool)
    visited[rev] = True
    rest = grad_values[~visited]
    # TF adds the unvisited gradients one by one, starting from zero
    acc = np.add.accumulate(np.concatenate([np.zeros(1, grad_values.dtype), rest]),
                            dtype=grad_values.dtype)
    return d_values, np.asarray(acc[-1], dtype=grad_values.dtype)


# --- the ragged variant encoding -------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RaggedVariant:
    """One encoded ragged tensor (TF's RaggedTensorVariant): its splits and flat values.

    Opaque to the executor (``__dfg_resource__``), like a TensorList; never mutated.
    """

    __dfg_resource__: ClassVar[bool] = True
    nested_splits: tuple[np.ndarray, ...]
    values: np.ndarray

    @property
    def ragged_rank(self) -> int:
        return len(self.nested_splits)

    def __repr__(self) -> str:
        return (f"RaggedVariant(ragged_rank={self.ragged_rank}, values={self.values.dtype}"
                f"{_fmt(self.values.shape)})")


def _variant_array(x: Any) -> np.ndarray:
    """A variant input as an object ndarray (a bare RaggedVariant is a scalar)."""
    if isinstance(x, np.ndarray):
        return x
    a = np.empty((), dtype=object)
    a[()] = x
    return a


def _unbatch(splits: list[np.ndarray], values: np.ndarray) -> list[RaggedVariant]:
    """Split a ragged tensor along its outermost dimension into its rows."""
    if not splits:
        if values.ndim < 1:
            raise InvalidArgumentError("Can't unbatch rank-0 tensor.")
        return [RaggedVariant((), values[i]) for i in range(values.shape[0])]
    top = splits[0].astype(_I64)
    if len(top) - 1 < 0:
        raise InvalidArgumentError("Invalid split argument.")
    out = []
    for i in range(len(top) - 1):
        lo, hi = int(top[i]), int(top[i + 1])
        comp = []
        for s in splits[1:]:
            piece = s[lo:hi + 1]
            comp.append((piece - piece[0]).astype(s.dtype) if len(piece) else
                        np.zeros(1, s.dtype))
            lo, hi = int(s[lo]), int(s[hi])
        out.append(RaggedVariant(tuple(comp), values[lo:hi]))
    return out


@kernel("RaggedTensorToVariant")
def ragged_tensor_to_variant(ctx: KernelContext, *args: np.ndarray) -> Any:
    splits, values = list(args[:-1]), args[-1]
    if not bool(ctx.attrs.get("batched_input", False)):
        return RaggedVariant(tuple(splits), values)
    comps = _unbatch(splits, values)
    out = np.empty(len(comps), dtype=object)
    for i, c in enumerate(comps):
        out[i] = c
    return out


def _dtype_name(dt: Any) -> str:
    try:
        from dfg.graphdef import dtypes

        return dtypes.name(dtypes.from_numpy(np.dtype(dt)))
    except Exception:  # noqa: BLE001 - only for messages
        return str(dt)


@kernel("RaggedTensorFromVariant")
def ragged_tensor_from_variant(ctx: KernelContext, encoded: Any) -> list[np.ndarray]:
    a = ctx.attrs
    enc = _variant_array(encoded)
    out_rank = int(a.get("output_ragged_rank", 0))
    in_rank = int(a.get("input_ragged_rank", -1))
    if in_rank == -1:
        in_rank = out_rank - enc.ndim
        if out_rank == 0 and in_rank < 0:
            in_rank = 0
        if in_rank < 0:
            raise InvalidArgumentError(
                f"Inferred input_ragged_rank (output_ragged_rank - encoded_variant.dims()) "
                f"must be >= 0, found output_ragged_rank: {out_rank}, encoded_variant.dims(): "
                f"{enc.ndim}, inferred input_ragged_rank: {in_rank}")
    if not ((out_rank == 0 and in_rank == 0) or out_rank == enc.ndim + in_rank):
        raise InvalidArgumentError(
            f"output_ragged_rank must be equal to input_ragged_rank + encoded_ragged.dims(); "
            f"output_ragged_rank: {out_rank}, input_ragged_rank: {in_rank}, "
            f"encoded_variant.dims(): {enc.ndim}.")
    vdt = np.dtype(a.get("Tvalues") or object)
    sdt = np.dtype(a.get("Tsplits") or _I64)
    comps: list[RaggedVariant] = []
    for i, v in enumerate(enc.reshape(-1).tolist()):
        if not isinstance(v, RaggedVariant):
            raise InvalidArgumentError(
                f"Input Variant element at index {i} doesn't hold a RaggedTensorVariant: {v!r}")
        if v.ragged_rank != in_rank:
            raise InvalidArgumentError(
                f"Encoded input RaggedTensorVariant has ragged_rank={v.ragged_rank}.  Expected "
                f"ragged_rank={in_rank}.")
        if v.values.dtype != vdt:
            raise InvalidArgumentError(
                f"Expected values Tensor dtype: {_dtype_name(vdt)}, found: "
                f"{_dtype_name(v.values.dtype)}")
        if v.values.ndim < 1 and out_rank != 0:
            raise InvalidArgumentError(
                f"Ragged values must have rank >= 1; encoded scalar element at index {i} has "
                f"values Tensor: {v.values!r}")
        for s in v.nested_splits:
            if s.dtype != sdt:
                raise InvalidArgumentError(
                    f"Expected row_splits Tensor dtype: {_dtype_name(sdt)}, found: "
                    f"{_dtype_name(s.dtype)}")
            if s.ndim != 1:
                raise InvalidArgumentError(
                    f"Ragged splits must have rank 1; encoded scalar element at index {i} has "
                    f"splits Tensor {s!r}")
        comps.append(v)
    if enc.ndim == 0:
        return [*comps[0].nested_splits, comps[0].values]
    if out_rank == 0:   # stack dense components (TF flattens any encoded rank)
        if not comps:
            return [np.zeros(0, vdt)]
        shape0 = comps[0].values.shape
        for i, c in enumerate(comps):
            if c.values.shape != shape0:
                raise InvalidArgumentError(
                    f"All flat_values must have compatible shapes.  Shape at index 0: "
                    f"{_fmt(shape0)}.  Shape at index {i}: {_fmt(c.values.shape)}")
        return [np.stack([c.values for c in comps]).astype(vdt, copy=False)]
    out: list[np.ndarray] = []
    dims = enc.shape
    for i in range(len(dims) - 1):   # uniform splits for the encoded dimensions
        out.append((np.arange(dims[i] + 1, dtype=_I64) * dims[i + 1]).astype(sdt))
    lens = [c.values.shape[0] if in_rank == 0 or not c.nested_splits
            else len(c.nested_splits[0]) - 1 for c in comps]
    out.append(np.concatenate([[0], np.cumsum(lens, dtype=_I64)]).astype(sdt))
    for level in range(in_rank):
        parts, last = [np.zeros(1, _I64)], 0
        for c in comps:
            s = c.nested_splits[level].astype(_I64)
            if len(s) > 1:
                parts.append(s[1:] + last)
                last = int(parts[-1][-1])
        out.append(np.concatenate(parts).astype(sdt))
    first = comps[0].values.shape if comps else (0,)
    for i, c in enumerate(comps[1:], 1):
        if c.values.ndim != len(first):
            raise InvalidArgumentError(
                f"Rank of values must match for all components; values shape at index 0: "
                f"{_fmt(first)}, values shape at index {i}: {_fmt(c.values.shape)}")
    for i, c in enumerate(comps):
        if c.values.shape[1:] != first[1:]:
            raise InvalidArgumentError(
                f"All flat_values must have compatible shapes.  Shape at index 0: "
                f"{_fmt(first[1:])}.  Shape at index {i}: {_fmt(c.values.shape[1:])}.  If you "
                f"are using tf.map_fn, then you may need to specify an explicit "
                f"fn_output_signature with appropriate ragged_rank, and/or convert output "
                f"tensors to RaggedTensors.")
    values = (np.concatenate([c.values for c in comps]) if comps
              else np.zeros((0,) + tuple(first[1:]), vdt))
    out.append(values.astype(vdt, copy=False))
    return out


@kernel("RaggedTensorToVariantGradient")
def ragged_tensor_to_variant_gradient(ctx: KernelContext, encoded_grad: Any,
                                      row_splits: np.ndarray,
                                      dense_values_shape: np.ndarray) -> np.ndarray:
    dt = np.dtype(ctx.attrs.get("Tvalues") or np.float32)
    shape = tuple(int(d) for d in np.asarray(dense_values_shape).reshape(-1))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"Dimension {min(shape)} must be >= 0")
    splits = row_splits.reshape(-1).astype(_I64)
    pieces = []
    for i, v in enumerate(_variant_array(encoded_grad).reshape(-1).tolist()):
        if isinstance(v, RaggedVariant):
            pieces.append(v.values)
        else:
            # a missing gradient: zeros for this row's values
            if i + 1 >= len(splits):
                raise InvalidArgumentError(
                    f"row_splits has {len(splits)} entries; gradient {i} has no row")
            n = int(splits[i + 1] - splits[i])
            pieces.append(np.zeros((n,) + shape[1:], dtype=dt))
    if len(pieces) == 1:
        return pieces[0]
    flat = (np.concatenate([p.reshape(-1) for p in pieces]) if pieces
            else np.zeros(0, dt))
    if flat.size != int(np.prod(shape, dtype=_I64)):
        raise InvalidArgumentError(
            f"The gradients have {flat.size} values but dense_values_shape is {_fmt(shape)}")
    return flat.astype(dt, copy=False).reshape(shape)


# ZerosLike and AddN of encoded ragged tensors (TF registers both for RaggedTensorVariant; the
# gradients of tf.map_fn over ragged tensors use them). The ZerosLike and AddN kernels hand
# variant values to these.

def _each_variant(x: Any, fn: Any) -> Any:
    if isinstance(x, RaggedVariant):
        return fn(x)
    out = np.empty(x.shape, dtype=object)
    for pos in np.ndindex(*x.shape):
        v = x[pos]
        out[pos] = fn(v[()] if isinstance(v, np.ndarray) else v)
    return out


def is_ragged_variant(x: Any) -> bool:
    """Whether ``x`` is an encoded ragged tensor or an object array of them."""
    if isinstance(x, RaggedVariant):
        return True
    return isinstance(x, np.ndarray) and x.dtype == object and x.size > 0 and \
        isinstance(x.reshape(-1)[0], RaggedVariant)


def zeros_like_ragged(x: Any) -> Any:
    """ZerosLike of encoded ragged tensors: the same splits, zero values."""
    def one(v: RaggedVariant) -> RaggedVariant:
        if v.values.dtype.kind in "OSU":
            return RaggedVariant(v.nested_splits, np.full(v.values.shape, b"", dtype=object))
        return RaggedVariant(v.nested_splits, np.zeros_like(v.values))
    return _each_variant(x, one)


def add_ragged(a: Any, b: Any) -> Any:
    """The sum of two encoded ragged tensors with equal splits (element by element for
    arrays of them)."""
    def one(x: RaggedVariant, y: RaggedVariant) -> RaggedVariant:
        if x.values.dtype != y.values.dtype:
            raise InvalidArgumentError(
                f"Can't add RaggedTensorVariants of different dtypes. One is "
                f"{_dtype_name(x.values.dtype)} and the other is {_dtype_name(y.values.dtype)}")
        if x.ragged_rank != y.ragged_rank:
            raise InvalidArgumentError(
                f"Can't add RaggedTensorVariants of different ragged rank. One is "
                f"{x.ragged_rank} and the other is {y.ragged_rank}")
        for i, (sx, sy) in enumerate(zip(x.nested_splits, y.nested_splits)):
            if sx.dtype != sy.dtype or sx.shape != sy.shape or not np.array_equal(sx, sy):
                raise InvalidArgumentError(
                    f"Can't add RaggedTensorVariants with different row_splits (dimension "
                    f"{i + 1})")
        if x.values.shape != y.values.shape:
            raise InvalidArgumentError(
                f"Can't add RaggedTensorVariants with values of shapes "
                f"{_fmt(x.values.shape)} and {_fmt(y.values.shape)}")
        return RaggedVariant(x.nested_splits, x.values + y.values)
    if isinstance(a, RaggedVariant) and isinstance(b, RaggedVariant):
        return one(a, b)
    a, b = _variant_array(a), _variant_array(b)
    if a.shape != b.shape:
        raise InvalidArgumentError(
            f"Can't add variant tensors of shapes {_fmt(a.shape)} and {_fmt(b.shape)}")
    out = np.empty(a.shape, dtype=object)
    for pos in np.ndindex(*a.shape):
        out[pos] = one(a[pos], b[pos])
    return out


def _add_n_ragged(ctx: KernelContext, *xs: Any) -> Any:
    acc = xs[0]
    for x in xs[1:]:
        acc = add_ragged(acc, x)
    return acc


declare("ZerosLike", variant=(RaggedVariant, lambda ctx, x: zeros_like_ragged(x)))
declare("AddN", "AccumulateNV2", variant=(RaggedVariant, _add_n_ragged))
