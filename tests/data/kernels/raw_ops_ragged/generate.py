"""Expected values for the ragged, string (TextVectorization, unicode, ngrams, format) and
dense/anonymous lookup-table kernels, computed by TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_ragged/generate.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402

rawgen.begin(HERE)



def S(*xs):
    """A string array (object dtype) from str or bytes items."""
    out = np.empty(len(xs), dtype=object)
    out[:] = [x.encode() if isinstance(x, str) else x for x in xs]
    return out


# --- RaggedTensorToTensor ----------------------------------------------------------------------
RS, VR, FD = "ROW_SPLITS", "VALUE_ROWIDS", "FIRST_DIM_SIZE"


def r2t(shape, values, default, parts, types, note="", **kw):
    op("RaggedTensorToTensor",
       dict(shape=shape, values=values, default_value=default, row_partition_tensors=parts),
       dict(row_partition_types=types), note=note, **kw)


V5 = np.arange(1, 6, dtype=f32)
r2t(np.int64(-1), V5, np.float32(0), [np.array([0, 2, 2, 5], i64)], [RS], "splits, -1 shape")
r2t(np.array([-1, -1], i64), V5, np.float32(9), [np.array([0, 2, 2, 5], i64)], [RS])
r2t(np.array([2, 2], i32), V5, np.float32(-1), [np.array([0, 2, 2, 5], i64)], [RS],
    "truncate rows and columns, int32 shape")
r2t(np.array([5, 4], i64), V5, np.float32(7), [np.array([0, 2, 2, 5], i64)], [RS], "pad")
r2t(np.array([-1, 2], i64), V5, np.float32(0), [np.array([0, 3, 5], i32)], [RS],
    "int32 splits")
r2t(np.int64(-1), V5, np.float32(0), [np.int64(4), np.array([0, 0, 2, 2, 3], i64)], [FD, VR],
    "value_rowids, empty rows")
r2t(np.array([3, 1], i64), V5, np.float32(0), [np.int64(4), np.array([0, 0, 2, 2, 3], i64)],
    [FD, VR], "value_rowids truncated")
r2t(np.int64(-1), np.arange(4, dtype=f32), np.float32(0),
    [np.int64(3), np.array([0, 1, 0, 2], i64)], [FD, VR], "unsorted value_rowids")
r2t(np.int64(-1), np.arange(8, dtype=i32), np.int32(-1),
    [np.array([0, 2, 3], i64), np.array([0, 2, 2, 5], i64), np.array([0, 1, 3, 5, 6, 8], i64)],
    [RS, RS, RS], "ragged rank 3")
r2t(np.array([2, 2, 2, -1], i64), np.arange(8, dtype=i64), np.int64(0),
    [np.array([0, 2, 3], i64), np.array([0, 2, 2, 5], i64), np.array([0, 1, 3, 5, 6, 8], i64)],
    [RS, RS, RS], "ragged rank 3 truncated")
r2t(np.int64(-1), np.arange(6, dtype=f64), np.float64(0),
    [np.int64(2), np.array([0, 1, 1], i64), np.array([0, 0, 1, 2, 2, 2], i64)], [FD, VR, VR],
    "two value_rowids levels")
r2t(np.int64(-1), np.arange(12, dtype=f32).reshape(4, 3), np.float32(-1),
    [np.array([0, 1, 1, 4], i64)], [RS], "inner dims, scalar default")
r2t(np.int64(-1), np.arange(12, dtype=f32).reshape(4, 3), np.array([7, 8, 9], f32),
    [np.array([0, 1, 1, 4], i64)], [RS], "default broadcast along inner dim")
r2t(np.array([3, 2, 3], i64), np.arange(12, dtype=f32).reshape(2, 2, 3),
    np.array([[1], [2]], f32), [np.array([0, 2, 2], i64)], [RS], "default [2,1]")
r2t(np.int64(-1), np.zeros([2, 2, 3], f32), np.array([1, 2], f32),
    [np.array([0, 1, 2], i64)], [RS], "default not broadcastable")
r2t(np.int64(-1), np.zeros([2, 2, 3], f32), np.array([1, 2, 3], f32),
    [np.array([0, 1, 2], i64)], [RS], "default incompatible")
r2t(np.array([-1, 3, 4], i64), np.zeros([2, 2], f32), np.float32(0),
    [np.array([0, 1, 2], i64)], [RS], "shape disagrees with values")
r2t(np.array([-1], i64), V5, np.float32(0), [np.array([0, 5], i64)], [RS], "rank mismatch")
r2t(np.int64(-1), np.zeros(0, f32), np.float32(0), [np.array([0, 0, 0], i64)], [RS],
    "empty values")
r2t(np.array([2, 3], i64), np.zeros(0, f32), np.float32(4), [np.array([0], i64)], [RS],
    "no rows, fixed shape")
r2t(np.array([2, 3], i64), S("a", "b", "c"), S("z")[0], [np.array([0, 1, 3], i64)], [RS],
    "strings")
r2t(np.int64(-1), np.array([True, False, True]), np.array(False),
    [np.array([0, 3], i64)], [RS], "bool")
r2t(np.int64(3), V5, np.float32(0), [np.array([0, 5], i64)], [RS], "scalar shape not -1")
r2t(np.array([-2, 3], i64), V5, np.float32(0), [np.array([0, 5], i64)], [RS], "dim -2")
r2t(np.int64(-1), V5, np.float32(0), [np.array([0, 5], i64)], ["FOO"], "unknown type")
r2t(np.int64(-1), V5, np.float32(0), [np.array([0, 0, 0, 1, 1], i64)], [VR],
    "value_rowids first")
r2t(np.int64(-1), V5, np.float32(0), [np.array([], i64)], [RS], "empty first partition")
r2t(np.int64(-1), V5, np.float32(0), [np.array([1, 2, 5], i64)], [RS], "splits not from 0")
r2t(np.int64(-1), np.arange(3, dtype=f32), np.float32(0), [np.array([0, 2, 1, 3], i64)],
    [RS], "decreasing splits")
r2t(np.int64(-1), V5, np.float32(0), [np.int64(2), np.array([0, 1, 1, 2, 2], i64)], [FD, VR],
    "value_rowid too large")
r2t(np.int64(-1), V5, np.float32(0), [np.int64(2), np.array([-1, 0, 1, 1, 1], i64)],
    [FD, VR], "negative value_rowid")
r2t(np.int64(-1), V5, np.float32(0), [np.int64(-3), np.array([0, 0, 0, 0, 0], i64)],
    [FD, VR], "negative first dim size")
r2t(np.array([1, -1], i64), V5, np.float32(0), [np.array([0, 2, 3, 5], i64),
    ], [RS], "fewer output rows than splits rows")
r2t(np.int64(-1), V5, np.float32(0),
    [np.array([0, 2, 3], i64), np.array([0, 1, 3, 4], i64)], [RS, RS],
    "inner splits fewer values than values")

# --- RaggedRange ---------------------------------------------------------------------------
op("RaggedRange", dict(starts=np.array([0, 5, 8, 5], i32), limits=np.array([4, 5, 12, 0], i32),
                       deltas=np.array([1, 1, 2, -2], i32)))
op("RaggedRange", dict(starts=np.int64(2), limits=np.array([5, 1, 10], i64),
                       deltas=np.int64(3)), dict(Tsplits=tf.int32), note="broadcast, int32 splits")
op("RaggedRange", dict(starts=np.float32(0.1), limits=np.float32(1.0), deltas=np.float32(0.1)),
   tol=0, note="float accumulation")
op("RaggedRange", dict(starts=np.array([0.5, -1.0, 3.0], f64),
                       limits=np.array([2.0, -3.5, 3.0], f64),
                       deltas=np.array([0.3, -0.7, 1.0], f64)), tol=0)
op("RaggedRange", dict(starts=np.array([1, 2], i32), limits=np.array([3, 4, 5], i32),
                       deltas=np.int32(1)), note="size mismatch")
op("RaggedRange", dict(starts=np.array([1, 2], i32), limits=np.int32(5),
                       deltas=np.array([1, 0], i32)), note="zero delta")
op("RaggedRange", dict(starts=np.zeros((1, 1), i32), limits=np.int32(5), deltas=np.int32(1)),
   note="rank 2")
op("RaggedRange", dict(starts=np.float32(0), limits=np.float32(np.inf), deltas=np.float32(1)),
   note="infinite")
op("RaggedRange", dict(starts=np.zeros(0, i64), limits=np.zeros(0, i64), deltas=np.int64(1)),
   note="no rows")

# --- RaggedGather --------------------------------------------------------------------------
PS = [np.array([0, 2, 2, 3, 6], i64)]
PV = np.array([1, 2, 3, 4, 5, 6], f32)
op("RaggedGather", dict(params_nested_splits=PS, params_dense_values=PV,
                        indices=np.array([3, 0, 1, 3], i32)), dict(OUTPUT_RAGGED_RANK=1))
op("RaggedGather", dict(params_nested_splits=PS, params_dense_values=PV,
                        indices=np.int64(3)), dict(OUTPUT_RAGGED_RANK=0), note="scalar index")
op("RaggedGather", dict(params_nested_splits=PS, params_dense_values=PV,
                        indices=np.array([[3, 0], [1, 2], [0, 0]], i64)),
   dict(OUTPUT_RAGGED_RANK=2), note="2-d indices")
op("RaggedGather", dict(params_nested_splits=[np.array([0, 2, 3], i32),
                                              np.array([0, 1, 3, 6], i32)],
                        params_dense_values=np.arange(12, dtype=i64).reshape(6, 2),
                        indices=np.array([1, 0, 1], i32)), dict(OUTPUT_RAGGED_RANK=2),
   note="ragged rank 2, int32 splits, inner dims")
op("RaggedGather", dict(params_nested_splits=[np.array([0, 2, 3], i64),
                                              np.array([0, 1, 3, 6], i64)],
                        params_dense_values=S("a", "b", "c", "d", "e", "f"),
                        indices=np.int32(0)), dict(OUTPUT_RAGGED_RANK=1), note="strings")
op("RaggedGather", dict(params_nested_splits=PS, params_dense_values=PV,
                        indices=np.zeros(0, i32)), dict(OUTPUT_RAGGED_RANK=1), note="no indices")
op("RaggedGather", dict(params_nested_splits=PS, params_dense_values=PV,
                        indices=np.array([4], i32)), dict(OUTPUT_RAGGED_RANK=1), note="bad index")
op("RaggedGather", dict(params_nested_splits=[np.array([0, 2, 7], i64)], params_dense_values=PV,
                        indices=np.array([0], i32)), dict(OUTPUT_RAGGED_RANK=1),
   note="splits past values")
op("RaggedGather", dict(params_nested_splits=[np.array([0, 3, 2], i64)], params_dense_values=PV,
                        indices=np.array([0], i32)), dict(OUTPUT_RAGGED_RANK=1),
   note="unsorted splits")

# --- RaggedTensorToSparse ------------------------------------------------------------------
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 2, 2, 5], i64)],
                                rt_dense_values=V5))
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 2, 3], i32),
                                                  np.array([0, 0, 3, 4], i32)],
                                rt_dense_values=np.arange(8, dtype=i32).reshape(4, 2)),
   note="ragged rank 2, inner dims, empty inner row")
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 0, 0], i64)],
                                rt_dense_values=np.zeros(0, f32)), note="all rows empty")
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 1, 3], i64),
                                                  np.array([0, 1, 1, 2], i64)],
                                rt_dense_values=S("x", "y")), note="strings")
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([1, 2, 5], i64)],
                                rt_dense_values=V5), note="splits not from 0")
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 2, 4], i64)],
                                rt_dense_values=V5), note="values mismatch")
op("RaggedTensorToSparse", dict(rt_nested_splits=[np.array([0, 3, 2, 5], i64)],
                                rt_dense_values=V5), note="decreasing")

# --- RaggedCross ---------------------------------------------------------------------------


def cross(ragged=(), sparse=(), dense=(), order="", hashed=False, buckets=0, key=0,
          splits=tf.int64, note=""):
    rv = [r[0] for r in ragged]
    rs = [r[1] for r in ragged]
    op("RaggedCross",
       dict(ragged_values=rv, ragged_row_splits=rs,
            sparse_indices=[s[0] for s in sparse], sparse_values=[s[1] for s in sparse],
            sparse_shape=[s[2] for s in sparse], dense_inputs=list(dense)),
       dict(input_order=order, hashed_output=hashed, num_buckets=buckets, hash_key=key,
            out_values_type=tf.int64 if hashed else tf.string, out_row_splits_type=splits),
       note=note)


RA = (S("a", "b", "c", "dd", "long-feature-name-with-more-than-sixty-four-bytes-for-farmhash!!"),
      np.array([0, 2, 2, 5], i64))
RB = (np.array([7, -8, 9], i64), np.array([0, 1, 2, 3], i64))
RA32 = (RA[0], RA[1].astype(i32))
RB32 = (RB[0], RB[1].astype(i32))
SP = (np.array([[0, 0], [0, 1], [2, 0]], i64), S("s1", "s2", "s3"), np.array([3, 2], i64))
DN = np.array([[10], [20], [30]], i64)
DS = S("p", "q", "r", "s", "t", "u").reshape(3, 2)
cross(ragged=[RA, RB], order="RR")
cross(ragged=[RA], sparse=[SP], dense=[DN, DS], order="DRSD", note="all kinds")
cross(ragged=[RA, RB], sparse=[SP], order="RSR", hashed=True, buckets=1000, key=0,
      note="hashed, buckets")
cross(ragged=[RA32], dense=[DN, DS], order="DRD", hashed=True, buckets=0, key=123456789,
      splits=tf.int32, note="hashed, no buckets, key")
cross(ragged=[RB], dense=[DS], order="RD", hashed=True, buckets=7, key=-5, note="negative key")
cross(ragged=[RA32, RB32], order="RR", note="int32 splits", splits=tf.int32)
cross(ragged=[(RA[0], np.array([0, 2, 5], i64)), RB], order="RR", note="batch mismatch")
cross(ragged=[(RA[0], np.array([0, 2, 6, 5], i64))], order="R", note="bad splits")

# --- bincount / count ops ------------------------------------------------------------------
BS = np.array([0, 3, 3, 7], i64)
BV = np.array([1, 1, 4, 0, 2, 2, 9], i32)
op("RaggedBincount", dict(splits=BS, values=BV, size=np.int32(5), weights=np.zeros(0, f32)))
op("RaggedBincount", dict(splits=BS, values=BV.astype(i64), size=np.int64(5),
                          weights=np.array([.5, .25, 1, 2, 3, 4, 5], f64)))
op("RaggedBincount", dict(splits=BS, values=BV, size=np.int32(3), weights=np.zeros(0, i64)),
   dict(binary_output=True))
op("RaggedBincount", dict(splits=BS, values=BV, size=np.int32(0), weights=np.zeros(0, i32)))
op("RaggedBincount", dict(splits=BS, values=BV, size=np.int32(-1), weights=np.zeros(0, f32)),
   note="negative size")
op("RaggedBincount", dict(splits=np.array([0, 2, 6], i64), values=BV, size=np.int32(4),
                          weights=np.zeros(0, f32)), note="bad splits end")
op("RaggedBincount", dict(splits=BS, values=np.array([1, 1, 4, 0, -2, 2, 9], i32),
                          size=np.int32(4), weights=np.zeros(0, f32)), note="negative value")

CV = np.array([[3, 1, 1, 7], [0, 5, 3, 3]], i64)
CW = np.array([[.5, 1, 2, 4], [1, 1, .25, .5]], f32)
op("DenseCountSparseOutput", dict(values=CV, weights=np.zeros(0, i64)),
   dict(binary_output=False))
op("DenseCountSparseOutput", dict(values=CV.astype(i32), weights=CW), dict(binary_output=False))
op("DenseCountSparseOutput", dict(values=CV, weights=np.zeros(0, f64)),
   dict(binary_output=True, maxlength=5))
op("DenseCountSparseOutput", dict(values=CV, weights=np.zeros(0, f32)),
   dict(binary_output=False, maxlength=0, minlength=3), note="maxlength 0 keeps nothing")
op("DenseCountSparseOutput", dict(values=CV[0], weights=CW[0].astype(f64)),
   dict(binary_output=False, minlength=10), note="1-d")
op("DenseCountSparseOutput", dict(values=np.array([-1, 2, 2], i32), weights=np.zeros(0, i32)),
   dict(binary_output=False), note="negative skipped")
op("DenseCountSparseOutput", dict(values=np.zeros(0, i64), weights=np.zeros(0, i64)),
   dict(binary_output=False), note="empty")
op("DenseCountSparseOutput", dict(values=CV, weights=CW[0]), dict(binary_output=False),
   note="weights shape")
op("DenseCountSparseOutput", dict(values=np.zeros((2, 2, 2), i64), weights=np.zeros(0, i64)),
   dict(binary_output=False), note="rank 3")

SI = np.array([[0, 0], [0, 2], [1, 1], [3, 0], [3, 5]], i64)
SV = np.array([4, 4, 1, 0, 2], i64)
op("SparseCountSparseOutput", dict(indices=SI, values=SV, dense_shape=np.array([4, 6], i64),
                                   weights=np.zeros(0, i64)), dict(binary_output=False))
op("SparseCountSparseOutput", dict(indices=SI, values=SV.astype(i32),
                                   dense_shape=np.array([4, 6], i64),
                                   weights=np.array([1, 2, 3, 4, 5], f32)),
   dict(binary_output=False, minlength=7))
op("SparseCountSparseOutput", dict(indices=SI[:, 1:], values=SV,
                                   dense_shape=np.array([6], i64), weights=np.zeros(0, f64)),
   dict(binary_output=True), note="1-d")
op("SparseCountSparseOutput", dict(indices=SI, values=SV, dense_shape=np.array([3, 6], i64),
                                   weights=np.zeros(0, i64)), dict(binary_output=False),
   note="index out of shape")
op("SparseCountSparseOutput", dict(indices=SI, values=SV[:4], dense_shape=np.array([4, 6], i64),
                                   weights=np.zeros(0, i64)), dict(binary_output=False),
   note="values count")

op("RaggedCountSparseOutput", dict(splits=BS, values=BV.astype(i64), weights=np.zeros(0, i64)),
   dict(binary_output=False))
op("RaggedCountSparseOutput", dict(splits=BS, values=BV,
                                   weights=np.array([1, 2, 3, 4, 5, 6, 7], f64)),
   dict(binary_output=False, maxlength=4))
op("RaggedCountSparseOutput", dict(splits=BS, values=BV, weights=np.zeros(0, i32)),
   dict(binary_output=True, minlength=12))
op("RaggedCountSparseOutput", dict(splits=np.array([0], i64), values=np.zeros(0, i32),
                                   weights=np.zeros(0, i32)), dict(binary_output=False),
   note="no rows")
op("RaggedCountSparseOutput", dict(splits=np.array([1, 7], i64), values=BV,
                                   weights=np.zeros(0, i32)), dict(binary_output=False),
   note="splits start")

# --- RaggedFillEmptyRows -------------------------------------------------------------------
op("RaggedFillEmptyRows", dict(value_rowids=np.array([1, 1, 3], i64),
                               values=np.array([1.5, 2.5, 3.5], f32), nrows=np.int64(5),
                               default_value=np.float32(-1)))
op("RaggedFillEmptyRows", dict(value_rowids=np.array([0, 1, 1, 2], i64),
                               values=S("a", "b", "c", "d"), nrows=np.int64(3),
                               default_value=S("?")[0]), note="no empty rows")
op("RaggedFillEmptyRows", dict(value_rowids=np.array([2, 0, 2, 1], i64),
                               values=np.array([1, 2, 3, 4], i32), nrows=np.int64(4),
                               default_value=np.int32(0)), note="unordered")
op("RaggedFillEmptyRows", dict(value_rowids=np.zeros(0, i64), values=np.zeros(0, i64),
                               nrows=np.int64(2), default_value=np.int64(9)), note="no values")
op("RaggedFillEmptyRows", dict(value_rowids=np.zeros(0, i64), values=np.zeros(0, f64),
                               nrows=np.int64(0), default_value=np.float64(9)), note="no rows")
op("RaggedFillEmptyRows", dict(value_rowids=np.array([0, 3], i64), values=np.array([1, 2], i32),
                               nrows=np.int64(3), default_value=np.int32(0)),
   note="row id out of range")
op("RaggedFillEmptyRows", dict(value_rowids=np.array([0], i64), values=np.array([1, 2], i32),
                               nrows=np.int64(3), default_value=np.int32(0)),
   note="length mismatch")
op("RaggedFillEmptyRowsGrad", dict(reverse_index_map=np.array([1, 2, 5], i64),
                                   grad_values=np.array([1, 2, 3, 4, 5, 6], f32)))
op("RaggedFillEmptyRowsGrad", dict(reverse_index_map=np.array([0, 1], i64),
                                   grad_values=np.array([1, 2], i64)))
op("RaggedFillEmptyRowsGrad", dict(reverse_index_map=np.array([0, 7], i64),
                                   grad_values=np.array([1, 2], f64)), note="bad index")


# --- the ragged variant encoding (variants cannot be stored: run as graphs) ------------------

def flat(decoded):
    """RaggedTensorFromVariant's outputs as one list (splits..., values)."""
    return [*decoded[0], decoded[1]]


def variant_graph():
    steps = []
    s1 = np.array([0, 2, 2, 5], i64)
    s2 = np.array([0, 1, 3, 3, 4, 6], i64)
    vals = np.arange(12, dtype=f32).reshape(6, 2)
    # unbatched round trip
    enc = raw.RaggedTensorToVariant(rt_nested_splits=[s1, s2], rt_dense_values=vals,
                                    batched_input=False)
    dec = raw.RaggedTensorFromVariant(encoded_ragged=enc, input_ragged_rank=2,
                                      output_ragged_rank=2, Tvalues=tf.float32,
                                      Tsplits=tf.int64)
    steps.append((flat(dec), []))
    # batched: rows of a ragged rank 2 tensor, stacked back (ragged rank 1 each)
    encb = raw.RaggedTensorToVariant(rt_nested_splits=[s1, s2], rt_dense_values=vals,
                                     batched_input=True)
    decb = raw.RaggedTensorFromVariant(encoded_ragged=encb, input_ragged_rank=1,
                                       output_ragged_rank=2, Tvalues=tf.float32,
                                       Tsplits=tf.int64)
    steps.append((flat(decb), []))
    decb_inf = raw.RaggedTensorFromVariant(encoded_ragged=encb, input_ragged_rank=-1,
                                           output_ragged_rank=2, Tvalues=tf.float32,
                                           Tsplits=tf.int64)
    steps.append((flat(decb_inf), []))
    # each row decoded on its own (a 0-d element of the batch)
    for i in range(3):
        row = raw.RaggedTensorFromVariant(encoded_ragged=encb[i], input_ragged_rank=1,
                                          output_ragged_rank=1, Tvalues=tf.float32,
                                          Tsplits=tf.int64)
        steps.append((flat(row), []))
    # ragged rank 1 batched (rows are dense), int32 splits, strings
    sv = S("a", "b", "c", "d")
    e1 = raw.RaggedTensorToVariant(rt_nested_splits=[np.array([0, 1, 1, 4], i32)],
                                   rt_dense_values=sv, batched_input=True)
    d1 = raw.RaggedTensorFromVariant(encoded_ragged=e1, input_ragged_rank=0,
                                     output_ragged_rank=1, Tvalues=tf.string,
                                     Tsplits=tf.int32)
    steps.append((flat(d1), []))
    r1 = raw.RaggedTensorFromVariant(encoded_ragged=e1[2], input_ragged_rank=0,
                                     output_ragged_rank=0, Tvalues=tf.string, Tsplits=tf.int32)
    steps.append((flat(r1), []))
    # ragged rank 0 batched: a dense tensor split along dim 0, stacked as ragged rank 1
    e0 = raw.RaggedTensorToVariant(rt_nested_splits=[], rt_dense_values=vals[:3],
                                   batched_input=True)
    d0 = raw.RaggedTensorFromVariant(encoded_ragged=e0, input_ragged_rank=0,
                                     output_ragged_rank=1, Tvalues=tf.float32,
                                     Tsplits=tf.int64)
    steps.append((flat(d0), []))
    # 2-d batch of encoded rows (reshaped variant tensor)
    e2 = tf.reshape(raw.RaggedTensorToVariant(
        rt_nested_splits=[np.array([0, 1, 3, 3, 4], i64)], rt_dense_values=np.arange(4, dtype=i32),
        batched_input=True), [2, 2])
    d2 = raw.RaggedTensorFromVariant(encoded_ragged=e2, input_ragged_rank=0,
                                     output_ragged_rank=2, Tvalues=tf.int32, Tsplits=tf.int64)
    steps.append((flat(d2), []))
    # empty batch
    ee = raw.RaggedTensorToVariant(rt_nested_splits=[np.array([0], i64)],
                                   rt_dense_values=np.zeros(0, f32), batched_input=True)
    de = raw.RaggedTensorFromVariant(encoded_ragged=ee, input_ragged_rank=0,
                                     output_ragged_rank=1, Tvalues=tf.float32,
                                     Tsplits=tf.int64)
    steps.append((flat(de), []))
    # errors: wrong ragged rank, wrong dtype
    bad1 = raw.RaggedTensorFromVariant(encoded_ragged=encb, input_ragged_rank=0,
                                       output_ragged_rank=1, Tvalues=tf.float32,
                                       Tsplits=tf.int64)
    steps.append((flat(bad1), []))
    bad2 = raw.RaggedTensorFromVariant(encoded_ragged=enc, input_ragged_rank=2,
                                       output_ragged_rank=2, Tvalues=tf.int32,
                                       Tsplits=tf.int64)
    steps.append((flat(bad2), []))
    # the gradient: per-row values concatenated
    grad = raw.RaggedTensorToVariantGradient(
        encoded_ragged_grad=raw.RaggedTensorToVariant(
            rt_nested_splits=[s2], rt_dense_values=vals * 10, batched_input=True),
        row_splits=s2, dense_values_shape=np.array([6, 2], i32), Tvalues=tf.float32)
    steps.append(([grad], []))
    grad1 = raw.RaggedTensorToVariantGradient(
        encoded_ragged_grad=enc, row_splits=np.array([0, 6], i64),
        dense_values_shape=np.array([6, 2], i32), Tvalues=tf.float32)
    steps.append(([grad1], []))
    return steps


graph("ragged_variant", variant_graph,
      ["RaggedTensorToVariant", "RaggedTensorFromVariant", "RaggedTensorToVariantGradient"])


def map_fn_graph():
    """tf.map_fn over a ragged tensor: the encoding TF writes for it, end to end."""
    rt = tf.RaggedTensor.from_row_splits(
        tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), tf.constant([0, 2, 2, 5, 6], tf.int64))
    out = tf.map_fn(lambda r: r * 2.0 + tf.reduce_sum(r), rt,
                    fn_output_signature=tf.RaggedTensorSpec([None], tf.float32, 0,
                                                            tf.int64))
    dense = out.to_tensor(default_value=-1.0)
    return [([dense, out.row_splits, out.flat_values], [])]


# (replayed by tests/kernels/test_ragged.py: it needs TensorListFromTensor to keep the variant
# element dtype, see there)
graph("ragged_map_fn", map_fn_graph, ["RaggedTensorToVariant", "RaggedTensorFromVariant"])
EXTRA = [rawgen.CASES.pop()]

# --- StringFormat ----------------------------------------------------------------------------


def fmt(inputs, note="", **attrs):
    op("StringFormat", dict(inputs=list(inputs)), attrs, note=note)


fmt([np.float32(1.5)])
fmt([np.array([0.1, 1 / 3, 1e10, 1e-5, 123456789.0, np.nan, -np.inf, -0.0, 2.5e-38, 1e-40,
               1e16], f32)], summarize=-1, note="float32 rendering, denormal")
fmt([np.array([0.1, 1 / 3, 1e10, 1e-5, 123456789.0, np.nan, -np.nan, np.inf, 1e16, 1e17,
               5e-324, 2.0 ** 70], f64)], summarize=-1, note="float64 rendering")
fmt([np.arange(10, dtype=i32)], note="summarized vector")
fmt([np.arange(24, dtype=i64).reshape(2, 3, 4)], summarize=1, note="rank 3, summarize 1")
fmt([np.arange(24, dtype=i64).reshape(2, 3, 4)], summarize=2)
fmt([np.arange(120, dtype=i32).reshape(2, 3, 4, 5)], summarize=2, note="rank 4")
fmt([np.arange(6, dtype=i64).reshape(2, 3)], summarize=0, note="summarize 0")
fmt([np.int64(5)], summarize=0, note="scalar, summarize 0")
fmt([np.zeros((2, 0), f32)], note="[2,0]")
fmt([np.zeros((0,), f32)], note="[0]")
fmt([np.zeros((0, 3), f32)], note="[0,3]")
fmt([np.array([True, False])], note="bool")
fmt([S("a\n\"b'\t\r", b"\xc3\xa9\xff\x01\x7f\\", "")], note="string escapes")
fmt([np.array([1 + 2j], np.complex64)], note="complex")
fmt([np.array([1, 2, 3, 4], np.complex128).reshape(2, 2)], summarize=1, note="complex summarized")
fmt([np.complex64(3)], note="complex scalar")
fmt([np.array([1.5, 2, 0.1], np.float16)], note="half")
fmt([np.array([200, 255], np.uint8), np.array([-5], np.int8)], template="{} and {}",
    placeholder="{}")
fmt([np.array([2 ** 64 - 1], np.uint64), np.array([2 ** 32 - 1], np.uint32),
     np.array([-3], np.int16), np.array([60000], np.uint16)], template="%s %s %s %s")
fmt([np.int32(1)], template="a%sb%sc", note="too many placeholders")
fmt([np.int32(1), np.int32(2)], template="x", placeholder="", note="empty placeholder")
fmt([np.int32(1)], template="ab", placeholder="")
fmt([], template="", note="no inputs")
fmt([np.array([[1.5]], f64)], template="v=%s!")
fmt([np.arange(30, dtype=f32).reshape(5, 6) / 7], summarize=2, note="float matrix")
fmt([np.arange(5, dtype=i32), S("x", "y")], template="{{a}} {{b}}", placeholder="{{a}}",
    note="placeholder inside text")

# --- StringNGrams ----------------------------------------------------------------------------
TOK = S("a", "b", "c", "d", "e", "f")
TSP = np.array([0, 4, 4, 5, 6], i64)


def ngrams(data, splits, widths, sep=" ", lpad="<", rpad=">", pad=-1, short=False, note=""):
    op("StringNGrams", dict(data=data, data_splits=splits),
       dict(separator=sep, ngram_widths=widths, left_pad=lpad, right_pad=rpad, pad_width=pad,
            preserve_short_sequences=short), note=note)


ngrams(TOK, TSP, [2], pad=0, note="bigrams, no padding")
ngrams(TOK, TSP, [1, 3], pad=-1, note="full padding")
ngrams(TOK, TSP, [3], sep="|", pad=1, note="pad width 1")
ngrams(TOK, TSP, [5], pad=0, short=True, note="preserve short")
ngrams(TOK, TSP, [5], pad=1, short=True, note="preserve short, padded")
ngrams(TOK, TSP.astype(i32), [2, 4], pad=2, lpad="", rpad="", note="int32 splits, empty pads")
ngrams(TOK, TSP, [4], pad=-1, short=True, note="short, dynamic padding")
ngrams(np.zeros(0, "S1"), np.array([0], i64), [2], pad=0, note="no data")
ngrams(TOK, np.array([0, 2, 6], i64), [3], pad=5, note="pad wider than width")
ngrams(TOK, np.array([0, 0, 6], i64), [6], pad=3, note="empty row with padding")
ngrams(S("x"), np.array([0, 1], i64), [3], pad=2, note="one token, padding only ngrams")
ngrams(TOK, np.array([1, 6], i64), [2], pad=0, note="splits not from 0")
ngrams(TOK, np.array([0, 7], i64), [2], pad=0, note="splits past data")
ngrams(TOK, TSP, [0], pad=0, note="zero width")

# --- StringToHashBucket (legacy Hash64) ------------------------------------------------------
HASH_STRS = S(*[bytes(range(i)) + b"x" * (i % 5) for i in range(0, 40, 1)])
op("StringToHashBucket", dict(string_tensor=HASH_STRS), dict(num_buckets=2 ** 63 - 1),
   note="bit exactness, lengths 0-43")
op("StringToHashBucket", dict(string_tensor=S("hello", "", "world", "émoji 😀").reshape(2, 2)),
   dict(num_buckets=10))
op("StringToHashBucketFast", dict(input=S(*[b"y" * i for i in range(0, 140, 7)])),
   dict(num_buckets=2 ** 63 - 1), note="Fingerprint64 bit exactness, long strings")

# --- Unicode ---------------------------------------------------------------------------------
BAD = S(b"ab\xff", b"\xe2\x82a", b"\xed\xa0\x80", b"\xc0\x80", b"\xf0\x90\x80",
        b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"a\x00\x01\x1fb",
        b"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x81", b"\xe0\x80\xaf", b"\x80\x80x", b"")
U16 = S(b"\x00a\xd8\x00\x00b\xdc\x00\xd8\x3d\xde\x00\x41", b"\x00h\x00i")
U32 = S(b"\x00\x00\x00a\x00\x11\x00\x00\x00\x00\xd8\x00\xff\xff\xff\xff\x00\x41",
        b"\x00\x01\xf6\x01")
for errors in ("replace", "ignore", "strict"):
    op("UnicodeDecodeWithOffsets", dict(input=BAD), dict(input_encoding="UTF-8", errors=errors),
       note=errors)
    op("UnicodeDecode", dict(input=BAD), dict(input_encoding="UTF-8", errors=errors), note=errors)
op("UnicodeDecode", dict(input=BAD[8:10]), dict(input_encoding="UTF-8", errors="strict"),
   note="strict, valid input")
op("UnicodeDecode", dict(input=BAD.reshape(13, 1)[:6].reshape(2, 3)),
   dict(input_encoding="utf8", replacement_char=63, Tsplits=tf.int32),
   note="2-d input, replacement, int32 splits")
op("UnicodeDecodeWithOffsets", dict(input=BAD),
   dict(input_encoding="UTF-8", replace_control_characters=True, replacement_char=0x2A),
   note="control characters")
op("UnicodeDecodeWithOffsets", dict(input=BAD),
   dict(input_encoding="UTF-8", replace_control_characters=True, errors="ignore"),
   note="control characters ignored")
op("UnicodeDecodeWithOffsets", dict(input=U16), dict(input_encoding="UTF-16-BE"))
op("UnicodeDecodeWithOffsets", dict(input=U16), dict(input_encoding="UTF-16LE"))
op("UnicodeDecodeWithOffsets", dict(input=U32), dict(input_encoding="UTF-32-BE"))
op("UnicodeDecodeWithOffsets", dict(input=S(b"ab\x80\xe9\x01")), dict(input_encoding="US-ASCII"))
op("UnicodeDecode", dict(input=S(b"ab\x80\xe9\x01")), dict(input_encoding="ISO-8859-1"))
op("UnicodeDecode", dict(input=S("x")), dict(input_encoding="no-such-encoding"),
   note="unknown encoding")
op("UnicodeDecode", dict(input=S("x")), dict(input_encoding="UTF-8", replacement_char=-1),
   note="bad replacement")
for enc in ("UTF-8", "UTF-16-BE", "UTF-32-BE"):
    for errors in ("replace", "ignore"):
        op("UnicodeTranscode", dict(input=BAD), dict(input_encoding="UTF-8", output_encoding=enc,
                                                     errors=errors), note=f"{enc} {errors}")
op("UnicodeTranscode", dict(input=BAD[8:10]), dict(input_encoding="UTF-8",
                                                   output_encoding="UTF-16-BE",
                                                   errors="strict"), note="strict, valid")
op("UnicodeTranscode", dict(input=BAD), dict(input_encoding="UTF-8", output_encoding="UTF-8",
                                             errors="strict"), note="strict")
op("UnicodeTranscode", dict(input=BAD[8:10]), dict(input_encoding="UTF-8",
                                                   output_encoding="UTF-8", errors="strict",
                                                   replace_control_characters=True),
   note="strict, control characters")
op("UnicodeTranscode", dict(input=BAD.reshape(13, 1)[8:12]),
   dict(input_encoding="UTF-8", output_encoding="UTF-8", replace_control_characters=True,
        replacement_char=0xD800), note="surrogate replacement into UTF-8")
op("UnicodeTranscode", dict(input=BAD[:4]), dict(input_encoding="UTF-8",
                                                 output_encoding="UTF-32-BE",
                                                 replacement_char=0xDFFF),
   note="surrogate replacement into UTF-32")
op("UnicodeTranscode", dict(input=U16), dict(input_encoding="UTF-16-BE", output_encoding="UTF-8"))
op("UnicodeTranscode", dict(input=U32), dict(input_encoding="UTF-32-BE",
                                             output_encoding="UTF-16-BE"))
op("UnicodeTranscode", dict(input=S(b"ab\x80\xe9\x01")),
   dict(input_encoding="latin1", output_encoding="UTF-8"))
op("UnicodeTranscode", dict(input=S(b"ab\x80\xe9\x01")),
   dict(input_encoding="ascii", output_encoding="UTF-16-BE", errors="ignore"))
CPS = np.array([0x48, 0xE9, 0x4E2D, 0x1F601, 0xD83D, 0xDE01, 0xD800, 0, 97, -1, 0x110000],
               i32)
for enc in ("UTF-8", "UTF-16-BE", "UTF-32-BE"):
    op("UnicodeEncode", dict(input_values=CPS, input_splits=np.array([0, 4, 4, 11], i64)),
       dict(output_encoding=enc), note=enc)
    op("UnicodeEncode", dict(input_values=CPS, input_splits=np.array([0, 2, 11], i32)),
       dict(output_encoding=enc, errors="ignore"), note=f"{enc} ignore")
op("UnicodeEncode", dict(input_values=CPS, input_splits=np.array([0, 11], i64)),
   dict(output_encoding="UTF-32-BE", replacement_char=0xD801), note="surrogate replacement")
op("UnicodeEncode", dict(input_values=CPS, input_splits=np.array([0, 11], i64)),
   dict(output_encoding="UTF-8", replacement_char=0xDC00), note="surrogate replacement UTF-8")
op("UnicodeEncode", dict(input_values=CPS, input_splits=np.array([0, 11], i64)),
   dict(output_encoding="UTF-8", errors="strict"), note="strict")
op("UnicodeEncode", dict(input_values=CPS[:4], input_splits=np.array([0, 4], i64)),
   dict(output_encoding="UTF-8", errors="strict"), note="strict, valid")
op("UnicodeEncode", dict(input_values=CPS[:4], input_splits=np.array([1, 4], i64)),
   dict(output_encoding="UTF-8"), note="splits not from 0")
op("UnicodeEncode", dict(input_values=CPS[:4], input_splits=np.array([0, 3], i64)),
   dict(output_encoding="UTF-8"), note="splits end")
op("UnicodeEncode", dict(input_values=CPS[:0], input_splits=np.array([0], i64)),
   dict(output_encoding="UTF-8"), note="no strings")
op("UnicodeEncode", dict(input_values=CPS[:4], input_splits=np.array([0, 3, 1, 4], i64)),
   dict(output_encoding="UTF-8"), note="decreasing splits")
SCRIPT_CPS = np.array([0x41, 0x3B1, 0x416, 0x627, 0x5D0, 0x4E2D, 0x3042, 0x30A2, 0xAC00, 0xE01,
                       0x915, 0x20, 0x300, 0x1F600, 0x30FC, 0x3000, 0x2E80, 0x20000, 0xFF21,
                       0x378, 0x964, -1, 0x110000, 0, 0x10FFFF + 1, 0xE0100], i32)
op("UnicodeScript", dict(input=SCRIPT_CPS[SCRIPT_CPS != 0x964]), note="common scripts")
op("UnicodeScript", dict(input=SCRIPT_CPS[:6].reshape(2, 3)), note="2-d")
op("UnicodeScript", dict(input=np.arange(0, 0x530, 7, dtype=i32)), note="Latin to Cyrillic")
op("UnicodeScript", dict(input=np.arange(0x590, 0x700, 3, dtype=i32)), note="Hebrew, Arabic")


# --- MutableDenseHashTableV2 and the anonymous tables ----------------------------------------

def dense_table_graph():
    steps = []
    t = raw.MutableDenseHashTableV2(empty_key=np.int64(-1), deleted_key=np.int64(-2),
                                    value_dtype=tf.float32, initial_num_buckets=8,
                                    max_load_factor=0.5, shared_name="dense")
    find = raw.LookupTableFindV2(table_handle=t, keys=np.array([5, 13, 21, 7, 100], i64),
                                 default_value=np.float32(-1))
    size = raw.LookupTableSizeV2(table_handle=t)
    exp = raw.LookupTableExportV2(table_handle=t, Tkeys=tf.int64, Tvalues=tf.float32)
    # 5, 13 and 21 collide in 8 buckets: quadratic probing
    ins = raw.LookupTableInsertV2(table_handle=t, keys=np.array([5, 13, 21], i64),
                                  values=np.array([0.5, 1.3, 2.1], f32))
    ins2 = raw.LookupTableInsertV2(table_handle=t, keys=np.array([13, 7], i64),
                                   values=np.array([-13, 0.7], f32))
    rem = raw.LookupTableRemoveV2(table_handle=t, keys=np.array([5, 99], i64))
    ins3 = raw.LookupTableInsertV2(table_handle=t, keys=np.array([29, -7], i64),
                                   values=np.array([2.9, -0.7], f32))
    grow = raw.LookupTableInsertV2(table_handle=t, keys=np.arange(40, 46, dtype=i64),
                                   values=np.arange(6, dtype=f32))
    bad_empty = raw.LookupTableInsertV2(table_handle=t, keys=np.array([-1], i64),
                                        values=np.array([1], f32))
    bad_deleted = raw.LookupTableFindV2(table_handle=t, keys=np.array([-2], i64),
                                        default_value=np.float32(0))
    bad_default = raw.LookupTableFindV2(table_handle=t, keys=np.array([1], i64),
                                        default_value=np.array([0], f32))
    steps += [([find, size] + list(exp), []), ([], [ins]), ([find, size] + list(exp), []),
              ([], [ins2]), ([], [rem]), ([find, size] + list(exp), []), ([], [ins3]),
              ([find, size] + list(exp), []), ([], [grow]), ([find, size] + list(exp), []),
              ([], [bad_empty]), ([bad_deleted], []), ([bad_default], [])]
    # vector values, string keys
    s = raw.MutableDenseHashTableV2(empty_key=S("")[0], deleted_key=S("<deleted>")[0],
                                    value_dtype=tf.int64, value_shape=[2],
                                    initial_num_buckets=4, shared_name="dense_str")
    sins = raw.LookupTableInsertV2(table_handle=s, keys=S("a", "bb", "a long key of 20 b"),
                                   values=np.array([[1, 2], [3, 4], [5, 6]], i64))
    sfind = raw.LookupTableFindV2(table_handle=s, keys=S("bb", "zz", "a"),
                                  default_value=np.array([-1, -1], i64))
    sexp = raw.LookupTableExportV2(table_handle=s, Tkeys=tf.string, Tvalues=tf.int64)
    ssize = raw.LookupTableSizeV2(table_handle=s)
    srem = raw.LookupTableRemoveV2(table_handle=s, keys=S("bb"))
    steps += [([], [sins]), ([sfind, ssize] + list(sexp), []), ([], [srem]),
              ([sfind, ssize] + list(sexp), [])]
    # vector keys (int32), int32 values of shape [1], import
    v = raw.MutableDenseHashTableV2(empty_key=np.array([0, 0], i32),
                                    deleted_key=np.array([-1, -1], i32),
                                    value_dtype=tf.int32, value_shape=[1],
                                    initial_num_buckets=16, shared_name="dense_vec")
    vins = raw.LookupTableInsertV2(table_handle=v, keys=np.array([[1, 2], [3, 4], [1, 3]], i32),
                                   values=np.array([[1], [0], [-1]], i32))
    vfind = raw.LookupTableFindV2(table_handle=v, keys=np.array([[1, 2], [2, 1], [1, 3]], i32),
                                  default_value=np.array([9], i32))
    vexp = raw.LookupTableExportV2(table_handle=v, Tkeys=tf.int32, Tvalues=tf.int32)
    # (unknown shapes: the shape function rejects what the kernel wants here)
    vimp = raw.LookupTableImportV2(
        table_handle=v,
        keys=tf.compat.v1.placeholder_with_default(
            np.array([[0, 0], [7, 7], [0, 0], [-1, -1]], i32), shape=None),
        values=tf.compat.v1.placeholder_with_default(
            np.array([[0], [77], [0], [0]], i32), shape=None))
    vsize = raw.LookupTableSizeV2(table_handle=v)
    vfind2 = raw.LookupTableFindV2(table_handle=v, keys=np.array([[7, 7], [1, 2]], i32),
                                   default_value=np.array([9], i32))
    steps += [([], [vins]), ([vfind, vsize] + list(vexp), []), ([], [vimp]),
              ([vfind2, vsize] + list(vexp), [])]
    # creation errors
    bad = raw.MutableDenseHashTableV2(empty_key=np.int64(3), deleted_key=np.int64(3),
                                      value_dtype=tf.float32, shared_name="same_keys")
    bad_size = raw.LookupTableSizeV2(table_handle=bad)
    bad2 = raw.MutableDenseHashTableV2(empty_key=np.int64(0), deleted_key=np.int64(1),
                                       value_dtype=tf.float32, initial_num_buckets=6,
                                       shared_name="bad_buckets")
    bad2_size = raw.LookupTableSizeV2(table_handle=bad2)
    steps += [([bad_size], []), ([bad2_size], [])]
    return steps


graph("dense_table", dense_table_graph,
      ["MutableDenseHashTableV2", "LookupTableFindV2", "LookupTableInsertV2",
       "LookupTableRemoveV2", "LookupTableSizeV2", "LookupTableExportV2", "LookupTableImportV2"])


def anonymous_tables_graph():
    steps = []
    h = raw.AnonymousHashTable(key_dtype=tf.string, value_dtype=tf.int64)
    init = raw.InitializeTableV2(table_handle=h, keys=S("a", "b"), values=np.array([1, 2], i64))
    with tf.control_dependencies([init]):
        hfind = raw.LookupTableFindV2(table_handle=h, keys=S("b", "c", "a"),
                                      default_value=np.int64(-1))
    steps.append(([hfind], []))
    m = raw.AnonymousMutableHashTable(key_dtype=tf.int64, value_dtype=tf.float64)
    mins = raw.LookupTableInsertV2(table_handle=m, keys=np.array([3, 4], i64),
                                   values=np.array([0.3, 0.4], f64))
    with tf.control_dependencies([mins]):
        mfind = raw.LookupTableFindV2(table_handle=m, keys=np.array([4, 5], i64),
                                      default_value=np.float64(0))
        msize = raw.LookupTableSizeV2(table_handle=m)
    # each run makes a new table: the size is 2 both times
    steps += [([mfind, msize], []), ([mfind, msize], [])]
    t = raw.AnonymousMutableHashTableOfTensors(key_dtype=tf.string, value_dtype=tf.int32,
                                               value_shape=[3])
    tins = raw.LookupTableInsertV2(table_handle=t, keys=S("x"),
                                   values=np.array([[1, 2, 3]], i32))
    with tf.control_dependencies([tins]):
        tfind = raw.LookupTableFindV2(table_handle=t, keys=S("x", "y"),
                                      default_value=np.zeros(3, i32))
    steps.append(([tfind], []))
    d = raw.AnonymousMutableDenseHashTable(empty_key=np.int64(0), deleted_key=np.int64(-1),
                                           value_dtype=tf.int64, initial_num_buckets=4)
    dins = raw.LookupTableInsertV2(table_handle=d, keys=np.array([1, 2, 3, 4], i64),
                                   values=np.array([10, 20, 30, 40], i64))
    with tf.control_dependencies([dins]):
        dfind = raw.LookupTableFindV2(table_handle=d, keys=np.array([4, 1, 9], i64),
                                      default_value=np.int64(-1))
        dexp = raw.LookupTableExportV2(table_handle=d, Tkeys=tf.int64, Tvalues=tf.int64)
    steps.append(([dfind] + list(dexp), []))
    return steps


graph("anonymous_tables", anonymous_tables_graph,
      ["AnonymousHashTable", "AnonymousMutableHashTable", "AnonymousMutableHashTableOfTensors",
       "AnonymousMutableDenseHashTable"])


# --- a Keras TextVectorization SavedModel, end to end (tests/kernels/test_ragged.py) ----------

def keras_text_model():
    import keras

    vocab = ["the", "quick", "brown", "fox", "jumps", "the quick", "ünïcode"]
    layers = {
        "int": keras.layers.TextVectorization(max_tokens=20, output_mode="int", ngrams=2,
                                              output_sequence_length=6, vocabulary=vocab),
        "ragged": keras.layers.TextVectorization(output_mode="int", ragged=True,
                                                 vocabulary=vocab),
        "hot": keras.layers.TextVectorization(output_mode="multi_hot", ngrams=(1, 2),
                                              vocabulary=vocab, split="character",
                                              standardize="lower"),
        "tf_idf": keras.layers.TextVectorization(output_mode="tf_idf", vocabulary=vocab,
                                                 idf_weights=np.linspace(0.5, 2, 7)),
    }

    class Text(tf.Module):
        def __init__(self):
            super().__init__()
            self.layers = layers

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, x):
            out = {k: v(x) for k, v in self.layers.items() if k != "ragged"}
            r = self.layers["ragged"](x)
            out["ragged_values"], out["ragged_splits"] = r.flat_values, r.row_splits
            out["chars"] = tf.strings.unicode_decode(x, "UTF-8").to_tensor(-1)
            out["ngrams"] = tf.strings.ngrams(tf.strings.split(x), 2, pad_values=("<", ">"))\
                .to_tensor("")
            out["format"] = tf.strings.format("{} / {}", (tf.shape(x), x))
            return out

    module = Text()
    x = S("The quick brown FOX!", "", "jumps over the lazy dog", "Ünïcode the quick",
          b"bad \xff bytes")
    want = {k: v.numpy() for k, v in module.serve(tf.constant(x.tolist())).items()}
    path = HERE / "keras_text"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    EXTRA.append({"savedmodel": "keras_text", "inputs": {"x": rawgen._store(x)},
                  "outputs": {k: rawgen._store(v) for k, v in sorted(want.items())}})


keras_text_model()


if __name__ == "__main__":
    write()
    (HERE / "extra.json").write_text(json.dumps(EXTRA, indent=0) + "\n")
