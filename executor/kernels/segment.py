"""Sparse segment reductions: SparseSegmentSum/Mean/SqrtN, with or without num_segments, their
gradients (SparseSegmentXxxGrad and the V2 forms that return only the touched rows), and the
SegmentXxxV2 reductions.

TensorFlow has no CPU kernel for SegmentSumV2/ProdV2/MaxV2/MinV2: they run compiled by XLA
(``jit_compile``), as scatters into ``num_segments`` rows. dfg follows XLA's results: ids need
not be sorted, rows whose id is outside [0, num_segments) are dropped, and an empty segment
holds 0 (sum), 1 (prod), or the lowest / highest finite value (max / min)."""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel


def _check_sorted(ids: np.ndarray) -> None:
    if ids.size and np.any(np.diff(ids.astype(np.int64)) < 0):
        raise InvalidArgumentError("segment ids are not increasing")
    if ids.size and ids[0] < 0:
        raise InvalidArgumentError(f"segment ids must be >= 0, found {ids[0]}")


def _sparse_segment(ctx: KernelContext, data: np.ndarray, indices: np.ndarray,
                    ids: np.ndarray, num: int | None, how: str) -> np.ndarray:
    if indices.ndim != 1 or ids.ndim != 1:
        raise InvalidArgumentError(
            f"indices and segment_ids should be vectors, got {list(indices.shape)} and "
            f"{list(ids.shape)}")
    if indices.shape != ids.shape:
        raise InvalidArgumentError(
            f"segment_ids and indices should have same size. segment_ids.shape = "
            f"{list(ids.shape)} indices.shape = {list(indices.shape)}")
    _check_sorted(ids)
    n_out = num if num is not None else (int(ids[-1]) + 1 if ids.size else 0)
    if ids.size and ids[-1] >= n_out:
        raise InvalidArgumentError(f"segment ids must be < num_segments = {n_out}, found "
                                   f"{ids[-1]}")
    bad = (indices < 0) | (indices >= data.shape[0])
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(
            f"Bad: indices[{i}] == {indices[i]} out of range [0, {data.shape[0]})")
    work = data.astype(np.float32) if data.dtype == np.float16 else data
    out = np.zeros((n_out,) + data.shape[1:], dtype=work.dtype)
    np.add.at(out, ids.astype(np.int64), work[indices])
    if how != "sum":
        counts = np.bincount(ids.astype(np.int64), minlength=n_out).astype(work.dtype)
        scale = counts if how == "mean" else np.sqrt(counts)
        scale = np.where(counts == 0, 1, scale).reshape((n_out,) + (1,) * (data.ndim - 1))
        out = out / scale
    return out.astype(data.dtype)


def _num(x: np.ndarray) -> int:
    if x.ndim != 0:
        raise InvalidArgumentError(f"num_segments should be a scalar, got {list(x.shape)}")
    return int(x)


def _sparse_segment_kernels(how: str) -> None:
    def plain(ctx, data, indices, ids):
        return _sparse_segment(ctx, data, indices, ids, None, how.lower())

    def with_num(ctx, data, indices, ids, num):
        return _sparse_segment(ctx, data, indices, ids, _num(num), how.lower())

    kernel(f"SparseSegment{how}")(plain)
    kernel(f"SparseSegment{how}WithNumSegments")(with_num)


for _how in ("Sum", "Mean", "SqrtN"):
    _sparse_segment_kernels(_how)


def _segment_v2(data: np.ndarray, ids: np.ndarray, num: np.ndarray, how: str) -> np.ndarray:
    if ids.ndim != 1:
        raise InvalidArgumentError(f"segment_ids should be a vector, got {list(ids.shape)}")
    if data.ndim < 1 or data.shape[0] != ids.shape[0]:
        raise InvalidArgumentError(
            f"segment_ids should be the same size as dimension 0 of input, got "
            f"{list(ids.shape)} and {list(data.shape)}")
    rows = _num(num)
    if rows < 0:
        raise InvalidArgumentError(f"num_segments must be >= 0, got {rows}")
    dt = data.dtype
    lim = np.finfo(dt) if dt.kind in "fc" else np.iinfo(dt)
    init = {"sum": 0, "prod": 1, "max": lim.min, "min": lim.max}[how]
    out = np.full((rows,) + data.shape[1:], init, dtype=dt)
    i64 = ids.astype(np.int64)
    keep = (i64 >= 0) & (i64 < rows)
    ufunc = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[how]
    ufunc.at(out, i64[keep], data[keep])
    return out


def _segment_v2_kernel(how: str) -> None:
    def run(ctx, data, segment_ids, num_segments):
        return _segment_v2(data, segment_ids, num_segments, how.lower())

    kernel(f"Segment{how}V2")(run)


for _how in ("Sum", "Prod", "Max", "Min"):
    _segment_v2_kernel(_how)


# --- gradients of the sparse segment reductions --------------------------------------------
#
# TF's CPU kernels: output row indices[i] += grad[segment_ids[i]] * scale[segment_ids[i]]
# (scale 1, 1/count or 1/sqrt(count) of the segment, computed in double and cast to T), in
# the order of i, in T. Segment ids need not be sorted. The V2 ops return only the rows that
# some index names: (values for the sorted unique indices, those indices).


def _sparse_segment_grad(grad: np.ndarray, indices: np.ndarray, ids: np.ndarray,
                         dim0: np.ndarray, how: str, v2: bool) -> tuple[np.ndarray, ...]:
    name = "dense_output_dim0" if v2 else "output_dim0"
    if np.ndim(dim0) != 0:
        raise InvalidArgumentError(f"{name} should be a scalar.")
    if indices.ndim != 1 or ids.ndim != 1:
        raise InvalidArgumentError("indices and segment_ids should be vectors.")
    if indices.shape != ids.shape:
        raise InvalidArgumentError("segment_ids and indices should have same size.")
    if grad.ndim < 1:
        raise InvalidArgumentError("grad must be at least 1-D")
    m, n0 = int(dim0), grad.shape[0]
    i64, s64 = indices.astype(np.int64), ids.astype(np.int64)
    bad = (s64 < 0) | (s64 >= n0)
    if bad.any():
        raise InvalidArgumentError(
            f"Segment id {int(s64[bad][0])} out of range [0, {n0}).")
    bad = (i64 < 0) | (i64 >= m)
    if bad.any():
        raise InvalidArgumentError(f"Index {int(i64[bad][0])} out of range [0, {m}).")
    rows = grad[s64]
    if how != "sum":
        count = np.maximum(np.bincount(s64, minlength=n0).astype(np.float64), 1.0)
        scale = 1.0 / (count if how == "mean" else np.sqrt(count))
        rows = rows * scale.astype(grad.dtype)[s64].reshape((-1,) + (1,) * (grad.ndim - 1))
    if v2:
        uniq, pos = np.unique(i64, return_inverse=True)
        out = np.zeros((uniq.size,) + grad.shape[1:], grad.dtype)
        np.add.at(out, pos.reshape(-1), rows)
        return out, uniq.astype(indices.dtype)
    out = np.zeros((m,) + grad.shape[1:], grad.dtype)
    np.add.at(out, i64, rows)
    return (out,)


def _sparse_segment_grad_kernels(how: str) -> None:
    def v1(ctx, grad, indices, segment_ids, output_dim0):
        return _sparse_segment_grad(grad, indices, segment_ids, output_dim0, how.lower(),
                                    False)[0]

    def v2(ctx, grad, indices, segment_ids, dense_output_dim0):
        return _sparse_segment_grad(grad, indices, segment_ids, dense_output_dim0,
                                    how.lower(), True)

    kernel(f"SparseSegment{how}Grad")(v1)
    kernel(f"SparseSegment{how}GradV2")(v2)


for _how in ("Sum", "Mean", "SqrtN"):
    _sparse_segment_grad_kernels(_how)
