"""Kernels added for atrous convs, segment reductions, fake quantization, 3-D conv/pooling,
detection (NMS, CropAndResize), resizing, random ops and strings.

Expected values are TensorFlow 2.21's outputs saved under tests/data/kernels/extra (see the
README there for the call behind each file) or small cases worked out by hand here.
"""

from __future__ import annotations

from pathlib import Path

import checks
import numpy as np
import pytest
from checks import same
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError, OutOfRangeError, UnimplementedError
from dfg.graphdef.graph import Graph
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "extra"

f32 = np.float32
f64 = np.float64
i32 = np.int32
i64 = np.int64


def load(case: str, name: str) -> np.ndarray:
    a = np.load(DATA / f"{case}__{name}.npy", allow_pickle=False)
    return a.astype(object) if a.dtype.kind == "S" else a


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    checks.close(got, want, rtol, atol)


def strs(*values: bytes) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


# =============================================================================================
# array
# =============================================================================================


def test_space_to_batch_nd_with_padding_then_batch_to_space_round_trip() -> None:
    x = load("s2b_pad", "x")
    out = invoke("SpaceToBatchND", x, np.array([2, 3], i32), np.array([[1, 0], [0, 1]], i32))
    same(out, load("s2b_pad", "out"))
    back = invoke("BatchToSpaceND", out, np.array([2, 3], i32), np.array([[1, 0], [0, 1]], i32))
    same(back, load("s2b_pad", "back"))
    same(back, x)


def test_space_to_batch_nd_one_block_dim_int64_args() -> None:
    x = load("s2b_1d", "x")
    same(invoke("SpaceToBatchND", x, np.array([2], i64), np.array([[1, 0]], i64)),
         load("s2b_1d", "out"))


def test_space_to_batch_nd_by_hand() -> None:
    # [1, 2, 2, 1] with 2x2 blocks: each pixel becomes its own batch entry, row-major.
    x = np.arange(4, dtype=f32).reshape(1, 2, 2, 1)
    out = invoke("SpaceToBatchND", x, np.array([2, 2], i32), np.zeros((2, 2), i32))
    same(out, np.arange(4, dtype=f32).reshape(4, 1, 1, 1))
    # No block dims: the input is returned unchanged.
    same(invoke("SpaceToBatchND", x, np.zeros(0, i32), np.zeros((0, 2), i32)), x)


def test_batch_to_space_nd_crops() -> None:
    x = load("b2s_crop", "x")
    same(invoke("BatchToSpaceND", x, np.array([2, 2], i32), np.array([[1, 0], [0, 2]], i32)),
         load("b2s_crop", "out"))


def test_batch_to_space_nd_full_crop_gives_empty_dim() -> None:
    out = invoke("BatchToSpaceND", np.ones((4, 2, 2, 1), f32), np.array([2, 2], i32),
                 np.array([[2, 2], [0, 0]], i32))
    assert out.shape == (1, 0, 4, 1) and out.dtype == f32


@pytest.mark.parametrize("op,args,msg", [
    ("SpaceToBatchND", (np.zeros((1, 3, 4, 1), f32), [2, 2], [[0, 0], [0, 0]]),
     "padded_shape[0]=3 is not divisible by block_shape[0]=2"),
    ("SpaceToBatchND", (np.zeros((1, 3, 4, 1), f32), [2, 2], [[-1, 0], [0, 0]]),
     "Paddings must be non-negative"),
    ("SpaceToBatchND", (np.zeros((1, 3, 4, 1), f32), [0, 2], [[1, 0], [0, 0]]),
     "All values in block_shape must be positive, got value, 0 at index 0."),
    ("SpaceToBatchND", (np.zeros(12, f32), [2, 2], [[1, 0], [0, 0]]),
     "input rank should be >= 3 instead of 1"),
    ("SpaceToBatchND", (np.zeros((1, 3, 4, 1), f32), [2, 2], [[1, 0, 0], [0, 0, 0]]),
     "paddings should have shape [2, 2] instead of [2,3]"),
    ("BatchToSpaceND", (np.zeros((3, 2, 2, 1), f32), [2, 2], [[0, 0], [0, 0]]),
     "Input batch dimension (3) is not divisible by product of block sizes (4)"),
    ("BatchToSpaceND", (np.zeros((4, 2, 2, 1), f32), [2, 2], [[-1, 0], [0, 0]]),
     "Crops must be non-negative"),
    ("BatchToSpaceND", (np.zeros((4, 2, 2, 1), f32), [2, 2], [[3, 2], [0, 0]]),
     "cropped_shape[0]=-1 must be non-negative"),
    ("BatchToSpaceND", (np.zeros((4, 2, 2, 1), f32), [0, 2], [[0, 0], [0, 0]]),
     "Product of block sizes must be positive, got 0"),
])
def test_space_batch_errors(op: str, args: tuple, msg: str) -> None:
    x, block, pads = args
    with pytest.raises(InvalidArgumentError) as ei:
        invoke(op, x, np.array(block, i32), np.array(pads, i32))
    assert msg in str(ei.value)


def test_lin_space() -> None:
    same(invoke("LinSpace", f32(-3.3), f32(7.1), i32(17)), load("linspace", "f32"))
    same(invoke("LinSpace", f64(5), f64(-2), i64(11)), load("linspace", "f64"))
    # By hand: the last value is exactly stop, one value is just start.
    same(invoke("LinSpace", f32(0), f32(1), i32(5)), np.array([0, .25, .5, .75, 1], f32))
    same(invoke("LinSpace", f32(1), f32(2), i32(1)), np.array([1], f32))


@pytest.mark.parametrize("args,msg", [
    ((f32(0), f32(1), i32(0)), "Requires num > 0: 0"),
    ((np.array([1], f32), f32(2), i32(3)), "start must be a scalar, not shape [1]"),
])
def test_lin_space_errors(args: tuple, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("LinSpace", *args)
    assert msg in str(ei.value)


def test_concat_offset() -> None:
    # Offsets along dim 1 are the running sum of the earlier inputs' sizes there (by hand).
    outs = invoke("ConcatOffset", i32(1), np.array([2, 3, 4], i32), np.array([2, 5, 4], i32),
                  np.array([2, 1, 4], i32))
    for got, want in zip(outs, ([0, 0, 0], [0, 3, 0], [0, 8, 0])):
        same(got, np.array(want, i32))
    outs = invoke("ConcatOffset", i32(-1), np.array([2, 3], i64), np.array([2, 7], i64))
    same(outs[1], np.array([0, 3], i64))


@pytest.mark.parametrize("dim,shapes,msg", [
    (1, ([2, 3, 4], [3, 5, 4]), "All dimensions except 1 must match. Input 1 has shape [3 5 4] "
                                "and doesn't match input 0 with shape [2 3 4]."),
    (1, ([2, 3, 4], [3, 5]), "input 1 should contain 3 elements, but got 2"),
    (3, ([2, 3, 4], [2, 5, 4]), "Concat dim is out of range: 3 vs. 3"),
    (-4, ([2, 3, 4], [2, 5, 4]), "Concat dim is out of range: -4 vs. 3"),
])
def test_concat_offset_errors(dim: int, shapes: tuple, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("ConcatOffset", i32(dim), *(np.array(s, i32) for s in shapes))
    assert msg in str(ei.value)


@pytest.mark.parametrize("op", ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub",
                                "TensorScatterMax", "TensorScatterMin"])
def test_tensor_scatter_with_duplicates(op: str) -> None:
    t = load("tscatter", "t")
    same(invoke(op, t, load("tscatter", "idx1"), load("tscatter", "upd1")),
         load("tscatter", f"{op}_rows"))
    same(invoke(op, t, load("tscatter", "idx2"), load("tscatter", "upd2")),
         load("tscatter", f"{op}_elems"))


def test_tensor_scatter_by_hand() -> None:
    t = np.array([1, 5, 2, 0], i32)
    idx = np.array([[1], [2], [2]], i32)
    # The last duplicate wins for Update; the others combine every duplicate.
    same(invoke("TensorScatterUpdate", t, idx, np.array([3, 7, 4], i32)),
         np.array([1, 3, 4, 0], i32))
    same(invoke("TensorScatterSub", t, idx, np.array([3, 7, -4], i32)),
         np.array([1, 2, -1, 0], i32))
    same(invoke("TensorScatterMax", t, idx, np.array([3, 7, 4], i32)),
         np.array([1, 5, 7, 0], i32))
    s = invoke("TensorScatterUpdate", strs(b"a", b"b"), np.array([[1]], i32), strs(b"z"))
    assert s.tolist() == [b"a", b"z"]
    # The input is never modified in place.
    assert t.tolist() == [1, 5, 2, 0]


def test_tensor_scatter_ignore_policy_and_empty() -> None:
    out = invoke("TensorScatterUpdate", np.zeros(4, f32), np.array([[1], [4]], i32),
                 np.array([5, 6], f32), attrs={"bad_indices_policy": "IGNORE"})
    same(out, np.array([0, 5, 0, 0], f32))
    same(invoke("TensorScatterAdd", np.zeros(0, f32), np.zeros((0, 1), i32), np.zeros(0, f32)),
         np.zeros(0, f32))


@pytest.mark.parametrize("tensor,indices,updates,msg", [
    (np.zeros(4, f32), [[1], [4]], [5., 6.], "indices[1] = [4] does not index into shape [4]"),
    (np.zeros(4, f32), [[-1]], [5.], "indices[0] = [-1] does not index into shape [4]"),
    (np.zeros(4, f32), [[1], [3]], [5., 6., 7.],
     "Outer dimensions of indices and update must match. Indices shape: [2,1], updates "
     "shape:[3]"),
    (np.zeros((4, 2), f32), [[1], [3]], [[5., 6., 7.], [1., 2., 3.]],
     "The inner 1 dimensions of output.shape=[4,2] must match the inner 1 dimensions of "
     "updates.shape=[2,3]"),
    (np.zeros(4, f32), [[1, 1]], [5.], "Inner dimensions of output shape must match inner "
                                        "dimensions of updates shape. Output: [4] updates: [1]"),
    (np.zeros(0, f32), [[0]], [5.], "Indices and updates specified for empty output shape"),
])
def test_tensor_scatter_errors(tensor: np.ndarray, indices: list, updates: list,
                               msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("TensorScatterUpdate", tensor, np.array(indices, i32), np.array(updates, f32))
    assert msg in str(ei.value)


def test_sparse_to_dense() -> None:
    # By hand: values land at their indices, the rest is default_value.
    out = invoke("SparseToDense", np.array([[0, 1], [1, 2]], i32), np.array([2, 3], i32),
                 np.array([5, 6], i32), i32(-1))
    same(out, np.array([[-1, 5, -1], [-1, -1, 6]], i32))
    out = invoke("SparseToDense", np.array([[0, 1], [1, 2]], i64), np.array([2, 3], i64),
                 f32(7), f32(0))
    same(out, np.array([[0, 7, 0], [0, 0, 7]], f32))
    same(invoke("SparseToDense", np.array([0, 3], i32), np.array([5], i32),
                np.array([1., 2.], f32), f32(0)), np.array([1, 0, 0, 2, 0], f32))
    same(invoke("SparseToDense", i32(3), np.array([5], i32), f32(1), f32(0)),
         np.array([0, 0, 0, 1, 0], f32))
    s = invoke("SparseToDense", np.array([1], i32), np.array([3], i32), strs(b"x"),
               np.array(b"d", dtype=object))
    assert s.tolist() == [b"d", b"x", b"d"]


def test_sparse_to_dense_without_validation() -> None:
    idx = np.array([[1, 2], [0, 1], [0, 1]], i32)  # unsorted and repeated: the last one wins
    out = invoke("SparseToDense", idx, np.array([2, 3], i32), np.array([5, 6, 8], i32), i32(-1),
                 attrs={"validate_indices": False})
    same(out, np.array([[-1, 8, -1], [-1, -1, 5]], i32))


@pytest.mark.parametrize("indices,validate,msg", [
    ([[1, 2], [0, 1]], True, "indices[1] = [0,1] is out of order. Many sparse ops require "
                             "sorted indices."),
    ([[0, 1], [0, 1]], True, "indices[1] = [0,1] is repeated"),
    ([[0, 1], [2, 1]], True, "indices[1] = [2,1] is out of bounds: need 0 <= index < [2,3]"),
    ([[0, -1], [1, 1]], True, "indices[0] = [0,-1] is out of bounds: need 0 <= index < [2,3]"),
    ([[0, 1], [2, 1]], False, "Indices are not valid (out of bounds).  Shape: [2,3]"),
])
def test_sparse_to_dense_errors(indices: list, validate: bool, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("SparseToDense", np.array(indices, i32), np.array([2, 3], i32),
               np.array([5, 6], i32), i32(-1), attrs={"validate_indices": validate})
    assert msg in str(ei.value)


def test_sparse_to_dense_shape_errors() -> None:
    with pytest.raises(InvalidArgumentError, match=r"sparse_values has incorrect shape \[3\]"):
        invoke("SparseToDense", np.array([[0, 1], [1, 2]], i32), np.array([2, 3], i32),
               np.array([5, 6, 7], i32), i32(-1))
    with pytest.raises(InvalidArgumentError, match="output_shape has incorrect number"):
        invoke("SparseToDense", np.array([[0, 1, 1]], i32), np.array([2, 3], i32),
               np.array([5], i32), i32(-1))


def test_bucketize() -> None:
    same(invoke("Bucketize", load("bucketize", "xf"),
                attrs={"boundaries": [-2.0, -0.5, 0.0, 0.1, 1.0, 3.0]}), load("bucketize", "of"))
    # Integers are compared as floats: 33554435 rounds up onto the boundary 33554436.
    same(invoke("Bucketize", load("bucketize", "xi"),
                attrs={"boundaries": [0.0, 1.0, 10.0, 33554436.0]}), load("bucketize", "oi"))
    # By hand: a value equal to a boundary goes above it; NaN lands past every boundary.
    same(invoke("Bucketize", np.array([[-5., 0., np.nan], [1., 10., 1e9]], f32),
                attrs={"boundaries": [0., 1., 10.]}), np.array([[0, 1, 3], [2, 3, 3]], i32))
    same(invoke("Bucketize", np.array([1, 2], i32), attrs={"boundaries": []}),
         np.zeros(2, i32))
    with pytest.raises(InvalidArgumentError, match="Expected sorted boundaries"):
        invoke("Bucketize", np.array([1.], f32), attrs={"boundaries": [1., 0.]})


# =============================================================================================
# math
# =============================================================================================


@pytest.mark.parametrize("op", ["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin",
                                "SegmentProd"])
def test_sorted_segments_with_empty_segments(op: str) -> None:
    close(invoke(op, load("segment", "data"), load("segment", "ids")), load("segment", op),
          rtol=1e-6, atol=1e-6)


def test_sorted_segments_by_hand() -> None:
    data = np.array([1., 2., 5.], f32)
    ids = np.array([0, 0, 2], i32)
    # Segment 1 is empty: 0 for every reducer but Prod, which gives 1.
    same(invoke("SegmentSum", data, ids), np.array([3, 0, 5], f32))
    same(invoke("SegmentMax", data, ids), np.array([2, 0, 5], f32))
    same(invoke("SegmentMin", data, ids), np.array([1, 0, 5], f32))
    same(invoke("SegmentProd", data, ids), np.array([2, 1, 5], f32))
    same(invoke("SegmentMean", data, ids), np.array([1.5, 0, 5], f32))
    # Integer means truncate toward zero.
    same(invoke("SegmentMean", load("segment", "idata"), load("segment", "iids")),
         load("segment", "imean"))
    same(invoke("SegmentMean", np.array([-1, -2, 6], i32), ids), np.array([-1, 0, 6], i32))
    same(invoke("SegmentSum", np.zeros((0, 2), f32), np.zeros(0, i32)), np.zeros((0, 2), f32))


def test_segment_max_min_nan_follow_tf_loop() -> None:
    d, ids = load("segment_nan", "ndata"), load("segment_nan", "nids")
    same(invoke("SegmentMax", d, ids), load("segment_nan", "max"))
    same(invoke("SegmentMin", d, ids), load("segment_nan", "min"))
    same(invoke("UnsortedSegmentMax", d, ids, i32(5)), load("segment_nan", "umax"))


@pytest.mark.parametrize("ids,msg", [
    ([0, 2, 1], "segment ids are not increasing"),
    ([-1, 0, 1], "Segment id -1 out of range [0, 2), possibly because 'segment_ids' input is "
                 "not sorted."),
    ([0, 1], "segment_ids should be the same size as dimension 0 of input."),
    ([[0, 1, 1]], "segment_ids should be a vector."),
])
def test_sorted_segment_errors(ids: list, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("SegmentSum", np.array([1., 2., 5.], f32), np.array(ids, i32))
    assert msg in str(ei.value)


@pytest.mark.parametrize("op", ["UnsortedSegmentSum", "UnsortedSegmentMax",
                                "UnsortedSegmentMin", "UnsortedSegmentProd"])
def test_unsorted_segments_with_empty_and_dropped(op: str) -> None:
    got = invoke(op, load("unsorted_segment", "udata"), load("unsorted_segment", "uids"),
                 i32(6))
    close(got, load("unsorted_segment", op), rtol=1e-6, atol=1e-6)


def test_unsorted_segment_identities() -> None:
    # Empty segments hold the reducer's identity: lowest finite value for Max (not -inf),
    # highest for Min, 0 for Sum, 1 for Prod.
    data, ids = np.array([1., 2.], f32), np.array([0, 0], i32)
    lo, hi = np.finfo(f32).min, np.finfo(f32).max
    same(invoke("UnsortedSegmentMax", data, ids, i32(3)), np.array([2, lo, lo], f32))
    same(invoke("UnsortedSegmentMin", data, ids, i64(3)), np.array([1, hi, hi], f32))
    same(invoke("UnsortedSegmentSum", data, ids, i32(2)), np.array([3, 0], f32))
    same(invoke("UnsortedSegmentProd", data, np.array([0, -1], i32), i32(2)),
         np.array([1, 1], f32))
    same(invoke("UnsortedSegmentMax", load("unsorted_segment", "uidata"),
                load("unsorted_segment", "uiids"), i32(4)), load("unsorted_segment", "imax"))
    same(invoke("UnsortedSegmentMin", load("unsorted_segment", "uidata"),
                load("unsorted_segment", "uiids"), i32(4)), load("unsorted_segment", "imin"))


@pytest.mark.parametrize("ids,num,msg", [
    ([0, 5], 3, "segment_ids[1] = 5 is out of range [0, 3)"),
    ([0, 1, 1], 3, "data.shape = [2] does not start with segment_ids.shape = [3]"),
    ([0, 1], -1, "Input num_segments == -1 must not be negative."),
])
def test_unsorted_segment_errors(ids: list, num: int, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("UnsortedSegmentSum", np.array([1., 2.], f32), np.array(ids, i32), i32(num))
    assert msg in str(ei.value)


FQ_CONFIGS = [(-6.0, 6.0, 8, False), (-0.1, 0.25, 8, False), (0.5, 2.0, 8, False),
              (-2.0, -0.5, 4, True), (-1.3, 3.7, 16, True), (-10.1, 0.3, 2, False)]


@pytest.mark.parametrize("i", range(len(FQ_CONFIGS)))
def test_fake_quant_matches_tf_nudging(i: int) -> None:
    lo, hi, bits, narrow = FQ_CONFIGS[i]
    x = load("fake_quant", "x")
    same(invoke("FakeQuantWithMinMaxArgs", x,
                attrs={"min": lo, "max": hi, "num_bits": bits, "narrow_range": narrow}),
         load("fake_quant", f"args{i}"))
    same(invoke("FakeQuantWithMinMaxVars", x, f32(lo), f32(hi),
                attrs={"num_bits": bits, "narrow_range": narrow}),
         load("fake_quant", f"vars{i}"))


def test_fake_quant_nudging_by_hand() -> None:
    # [1, 3] with 8 bits: scale 2/255, the zero point -127.5 is clamped to 0, so the range is
    # nudged to [0, 2] and 1.0 becomes 128 * 2/255.
    out = invoke("FakeQuantWithMinMaxArgs", np.array([1.0, -1.0, 5.0], f32),
                 attrs={"min": 1.0, "max": 3.0})
    same(out, np.array([128, 0, 255], f32) * (f32(2) / f32(255)))
    # Vars with min == max == 0 gives zeros.
    same(invoke("FakeQuantWithMinMaxVars", np.array([1., -3.], f32), f32(0), f32(0)),
         np.zeros(2, f32))


def test_fake_quant_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="min has to be smaller than max"):
        invoke("FakeQuantWithMinMaxArgs", np.array([1.], f32), attrs={"min": 1.0, "max": 0.0})
    with pytest.raises(InvalidArgumentError, match="num_bits must be between 2 and 16"):
        invoke("FakeQuantWithMinMaxArgs", np.array([1.], f32), attrs={"num_bits": 1})
    with pytest.raises(InvalidArgumentError, match="`min` must be rank 0 but is rank 1"):
        invoke("FakeQuantWithMinMaxVars", np.array([1.], f32), np.array([0.], f32), f32(1))


def test_l2_loss() -> None:
    # sum(x^2) / 2 by hand; float16 squares overflow to inf as in TF.
    same(invoke("L2Loss", np.array([[1., 2.], [3., 4.]], f32)), np.array(15, f32))
    same(invoke("L2Loss", np.array([1., 2.], f64)), np.array(2.5, f64))
    same(invoke("L2Loss", np.array([1., 400.], np.float16)), np.array(np.inf, np.float16))


# =============================================================================================
# nn
# =============================================================================================


def conv3d_attrs(strides: list, padding: str, dilations: list | None = None) -> dict:
    return {"strides": strides, "padding": padding, "dilations": dilations or [1] * 5}


@pytest.mark.parametrize("name,attrs", [
    ("same_s2", conv3d_attrs([1, 2, 2, 1, 1], "SAME")),
    ("valid_s1", conv3d_attrs([1, 1, 1, 1, 1], "VALID")),
    ("valid_s3", conv3d_attrs([1, 1, 3, 2, 1], "VALID")),
    ("dil_same", conv3d_attrs([1] * 5, "SAME", [1, 2, 1, 2, 1])),
])
def test_conv3d(name: str, attrs: dict) -> None:
    got = invoke("Conv3D", load("conv3d", "x"), load("conv3d", "w"), attrs=attrs)
    close(got, load("conv3d", name), rtol=1e-5, atol=1e-5)


def test_conv3d_by_hand() -> None:
    # A 1x1x1 filter scales the channels; a 2x2x2 all-ones filter on VALID sums each cube.
    x = np.arange(2 * 2 * 2 * 2, dtype=f32).reshape(1, 2, 2, 2, 2)
    w = np.array([[[[[2.0], [1.0]]]]], f32)
    same(invoke("Conv3D", x, w, attrs=conv3d_attrs([1] * 5, "VALID")),
         (x[..., :1] * 2 + x[..., 1:]).astype(f32))
    ones = np.ones((2, 2, 2, 2, 1), f32)
    same(invoke("Conv3D", x, ones, attrs=conv3d_attrs([1] * 5, "VALID")),
         np.array(x.sum(), f32).reshape(1, 1, 1, 1, 1))


@pytest.mark.parametrize("op,name,ksize,strides,padding", [
    ("MaxPool3D", "maxpool_same", [1, 2, 3, 2, 1], [1, 2, 2, 1, 1], "SAME"),
    ("MaxPool3D", "maxpool_valid", [1, 3, 2, 2, 1], [1, 1, 2, 2, 1], "VALID"),
    ("AvgPool3D", "avgpool_same", [1, 2, 3, 2, 1], [1, 2, 2, 1, 1], "SAME"),
    ("AvgPool3D", "avgpool_valid", [1, 3, 2, 2, 1], [1, 1, 2, 2, 1], "VALID"),
])
def test_pool3d(op: str, name: str, ksize: list, strides: list, padding: str) -> None:
    got = invoke(op, load("conv3d", "x"),
                 attrs={"ksize": ksize, "strides": strides, "padding": padding})
    close(got, load("conv3d", name), rtol=1e-6, atol=1e-6)


def test_avg_pool3d_excludes_padding_by_hand() -> None:
    # 3x3x3 ramp, 2x2x2 SAME windows: the last window holds only the corner element 26.
    x = np.arange(27, dtype=f32).reshape(1, 3, 3, 3, 1)
    out = invoke("AvgPool3D", x, attrs={"ksize": [1, 2, 2, 2, 1], "strides": [1] * 5,
                                        "padding": "SAME"})
    assert out[0, 2, 2, 2, 0] == 26
    assert out[0, 0, 0, 0, 0] == np.mean([0, 1, 3, 4, 9, 10, 12, 13])


@pytest.mark.parametrize("op,x,f,attrs,err,msg", [
    ("Conv3D", (1, 1, 3, 3, 3), (2, 2, 2, 1, 1),
     {"strides": [1] * 5, "padding": "SAME", "data_format": "NCDHW"}, InvalidArgumentError,
     "only supports the NHWC tensor format"),
    ("Conv3D", (1, 3, 3, 3, 4), (2, 2, 2, 2, 4), {"strides": [1] * 5, "padding": "SAME"},
     InvalidArgumentError, "Number of channels in filter (2) must match last dimension of "
                           "input (4)"),
    ("Conv3D", (1, 3, 3, 3, 1), (2, 2, 2, 1, 1), {"strides": [2, 1, 1, 1, 1], "padding": "SAME"},
     InvalidArgumentError, "does not yet support strides in the batch and depth dimensions"),
    ("MaxPool3D", (1, 3, 3, 3, 2), None,
     {"ksize": [1, 1, 1, 1, 2], "strides": [1, 1, 1, 1, 2], "padding": "SAME"},
     UnimplementedError, "Pooling is not yet supported on the depth dimension."),
    ("AvgPool3D", (1, 1, 3, 3, 3), None,
     {"ksize": [1, 1, 2, 2, 2], "strides": [1] * 5, "padding": "SAME",
      "data_format": "NCDHW"}, InvalidArgumentError,
     "Default Pooling3DOp only supports NDHWC on device type CPU"),
])
def test_3d_errors(op: str, x: tuple, f: tuple | None, attrs: dict, err: type,
                   msg: str) -> None:
    args = [np.zeros(x, f32)] + ([np.zeros(f, f32)] if f else [])
    with pytest.raises(err) as ei:
        invoke(op, *args, attrs=attrs)
    assert msg in str(ei.value)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_in_top_k(k: int) -> None:
    same(invoke("InTopKV2", load("in_top_k", "pred"), load("in_top_k", "tgt"), i32(k)),
         load("in_top_k", f"k{k}"))


def test_in_top_k_by_hand() -> None:
    # Ties count in the target's favour (only strictly larger predictions outrank it); a bad
    # target, a non-finite row or k <= 0 give false.
    pred = np.array([[1., 2., 2., 0.], [1., np.inf, 0., 0.], [1., 2., 3., 4.]], f32)
    same(invoke("InTopKV2", pred, np.array([2, 0, 7], i32), i32(1)),
         np.array([True, False, False]))
    same(invoke("InTopKV2", pred, np.array([3, 0, 3], i64), i64(0)), np.zeros(3, bool))
    with pytest.raises(InvalidArgumentError, match="must match length of targets"):
        invoke("InTopKV2", pred, np.array([0, 1], i32), i32(1))


# =============================================================================================
# image
# =============================================================================================


def test_nms_v3_score_threshold() -> None:
    b, s = load("nms", "boxes"), load("nms", "scores")
    same(invoke("NonMaxSuppressionV3", b, s, i32(6), f32(0.5), f32(0.55)), load("nms", "v3"))


def test_nms_v3_by_hand() -> None:
    b = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 10, 1, 11], [1, 1, 0, 0]], f32)
    # Box 3 is box 0 with its corners swapped, so it is suppressed; box 1 overlaps box 0
    # with IoU 0.9/1.1; equal scores keep the lower index first.
    same(invoke("NonMaxSuppressionV3", b, np.array([.5, .5, .5, .5], f32), i32(4), f32(0.5),
                f32(0)), np.array([0, 2], i32))
    # Only scores strictly above the threshold take part.
    same(invoke("NonMaxSuppressionV3", b, np.array([.9, .8, .5, .1], f32), i32(4), f32(0.5),
                f32(0.5)), np.array([0], i32))
    # IoU equal to the threshold does not suppress (boxes touching at a corner have IoU 0).
    touching = np.array([[0, 0, 1, 1], [1, 1, 2, 2], [.5, .5, 1.5, 1.5]], f32)
    same(invoke("NonMaxSuppressionV3", touching, np.array([.9, .8, .7], f32), i32(3), f32(0),
                f32(-1)), np.array([0, 1], i32))
    same(invoke("NonMaxSuppressionV3", b, np.array([.9, .8, .5, .1], f32), i32(0), f32(0.5),
                f32(0)), np.zeros(0, i32))


def test_nms_v4_pads() -> None:
    b, s = load("nms", "boxes"), load("nms", "scores")
    idx, valid = invoke("NonMaxSuppressionV4", b, s, i32(7), f32(0.5), f32(0.4),
                        attrs={"pad_to_max_output_size": True})
    same(idx, load("nms", "v4_0"))
    same(valid, load("nms", "v4_1"))


def test_nms_v5_hard_and_soft() -> None:
    b, s = load("nms", "boxes"), load("nms", "scores")
    got = invoke("NonMaxSuppressionV5", b, s, i32(5), f32(0.5), f32(0.0), f32(0.0))
    for j, g in enumerate(got):
        same(g, load("nms", f"v5hard_{j}"))
    got = invoke("NonMaxSuppressionV5", b, s, i32(8), f32(0.5), f32(0.1), f32(0.5),
                 attrs={"pad_to_max_output_size": True})
    for j, g in enumerate(got):
        same(g, load("nms", f"v5soft_{j}"))


def test_nms_many_ties() -> None:
    b, s = load("nms", "rboxes"), load("nms", "rscores")
    same(invoke("NonMaxSuppressionV3", b, s, i32(20), f32(0.3), f32(0.2)),
         load("nms", "rand_v3"))
    got = invoke("NonMaxSuppressionV5", b, s, i32(30), f32(0.3), f32(0.05), f32(1.0))
    for j, g in enumerate(got):
        same(g, load("nms", f"rand_v5soft_{j}"))


@pytest.mark.parametrize("args,msg", [
    ((np.zeros((2, 4), f32), np.zeros(2, f32), i32(1), f32(1.5), f32(0)),
     "iou_threshold must be in [0, 1]"),
    ((np.zeros((2, 4), f32), np.zeros(2, f32), i32(-1), f32(0.5), f32(0)),
     "output size must be non-negative"),
    ((np.zeros((2, 3), f32), np.zeros(2, f32), i32(1), f32(0.5), f32(0)),
     "boxes must have 4 columns"),
    ((np.zeros((2, 4), f32), np.zeros(3, f32), i32(1), f32(0.5), f32(0)),
     "scores has incompatible shape"),
    ((np.zeros((2, 4), f32), np.zeros(2, f32), np.array([1], i32), f32(0.5), f32(0)),
     "max_output_size must be 0-D, got shape [1]"),
])
def test_nms_errors(args: tuple, msg: str) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("NonMaxSuppressionV3", *args)
    assert msg in str(ei.value)
    with pytest.raises(InvalidArgumentError, match="soft_nms_sigma_val must be >= 0"):
        invoke("NonMaxSuppressionV5", np.zeros((2, 4), f32), np.zeros(2, f32), i32(1),
               f32(0.5), f32(0), f32(-0.5))


@pytest.mark.parametrize("name,size,attrs,image", [
    ("bilinear", [3, 4], {"extrapolation_value": -1.0}, "img"),
    ("nearest", [4, 3], {"method": "nearest", "extrapolation_value": 7.0}, "img"),
    ("one", [1, 1], {}, "img"),
    ("u8", [2, 3], {}, "u8"),
])
def test_crop_and_resize_boxes_partly_outside(name: str, size: list, attrs: dict,
                                              image: str) -> None:
    img = load("crop_and_resize", "img")
    if image == "u8":
        img = img.astype(np.uint8)
    got = invoke("CropAndResize", img, load("crop_and_resize", "cboxes"),
                 load("crop_and_resize", "bind"), np.array(size, i32), attrs=attrs)
    same(got, load("crop_and_resize", name))


def test_crop_and_resize_by_hand() -> None:
    img = np.arange(9, dtype=f32).reshape(1, 3, 3, 1)
    # The whole image at its own size reproduces it; a box reaching past the right edge takes
    # extrapolation_value there.
    got = invoke("CropAndResize", img, np.array([[0, 0, 1, 1], [0, 0, 1, 2]], f32),
                 np.array([0, 0], i32), np.array([3, 3], i32),
                 attrs={"extrapolation_value": -5.0})
    same(got[0], img[0])
    same(got[1, :, :, 0], np.array([[0, 2, -5], [3, 5, -5], [6, 8, -5]], f32))
    empty = invoke("CropAndResize", img, np.zeros((0, 4), f32), np.zeros(0, i32),
                   np.array([2, 2], i32))
    assert empty.shape == (0, 2, 2, 1) and empty.dtype == f32


def test_crop_and_resize_errors() -> None:
    img = np.zeros((2, 4, 5, 1), f32)
    box = np.array([[0.1, 0.2, 0.7, 0.9]], f32)
    with pytest.raises(OutOfRangeError, match=r"box_index has values outside \[0, batch_size\)"):
        invoke("CropAndResize", img, box, np.array([2], i32), np.array([1, 1], i32))
    with pytest.raises(InvalidArgumentError, match="crop dimensions must be positive"):
        invoke("CropAndResize", img, box, np.array([1], i32), np.array([0, 1], i32))
    with pytest.raises(InvalidArgumentError, match="box_index has incompatible shape"):
        invoke("CropAndResize", img, box, np.array([1, 0], i32), np.array([1, 1], i32))


@pytest.mark.parametrize("name,attrs", [
    ("cubic_legacy", {}),
    ("cubic_align", {"align_corners": True}),
    ("cubic_half", {"half_pixel_centers": True}),
])
def test_resize_bicubic(name: str, attrs: dict) -> None:
    same(invoke("ResizeBicubic", load("resize", "rimg"), np.array([9, 4], i32), attrs=attrs),
         load("resize", name))


def test_resize_bicubic_uint8_single_column() -> None:
    # One input column: TF falls back to in/out scaling even with align_corners.
    same(invoke("ResizeBicubic", load("resize", "u8img"), np.array([3, 9], i32),
                attrs={"align_corners": True}), load("resize", "cubic_u8"))


def test_resize_bicubic_identity_by_hand() -> None:
    # Same size, legacy mode: every sample sits on a pixel, whose weight is exactly 1.
    x = np.arange(12, dtype=f32).reshape(1, 3, 4, 1)
    same(invoke("ResizeBicubic", x, np.array([3, 4], i32)), x)


@pytest.mark.parametrize("name,size,attrs", [
    ("area_down", [2, 3], {}),
    ("area_up", [8, 11], {}),
    ("area_align", [3, 4], {"align_corners": True}),
])
def test_resize_area(name: str, size: list, attrs: dict) -> None:
    same(invoke("ResizeArea", load("resize", "rimg"), np.array(size, i32), attrs=attrs),
         load("resize", name))


def test_resize_area_by_hand() -> None:
    # Halving averages 2x2 blocks.
    x = np.arange(16, dtype=f32).reshape(1, 4, 4, 1)
    want = np.array([[2.5, 4.5], [10.5, 12.5]], f32).reshape(1, 2, 2, 1)
    same(invoke("ResizeArea", x, np.array([2, 2], i32)), want)
    with pytest.raises(InvalidArgumentError, match="output dimensions must be positive"):
        invoke("ResizeBicubic", x, np.array([0, 2], i32))


# =============================================================================================
# random (shapes, ranges and moments; TF's exact bits: test_random.py, data/kernels/raw_ops_random)
# =============================================================================================


def rand(op: str, *args: np.ndarray, seed: int = 0, seed2: int = 0, **attrs: object) -> np.ndarray:
    return invoke(op, *args, attrs={"seed": seed, "seed2": seed2, **attrs})


@pytest.mark.parametrize("dt", [np.float16, f32, f64])
def test_random_uniform(dt: type) -> None:
    x = rand("RandomUniform", np.array([200, 50], i32), seed=3, seed2=4, dtype=np.dtype(dt))
    assert x.dtype == dt and x.shape == (200, 50)
    assert x.min() >= 0 and x.max() < 1
    assert abs(float(x.astype(f64).mean()) - 0.5) < 0.02
    assert abs(float(x.astype(f64).var()) - 1 / 12) < 0.01


def test_random_normal_and_truncated() -> None:
    x = rand("RandomStandardNormal", np.array([20000], i64), seed=1, dtype=np.dtype(f32))
    assert x.dtype == f32 and x.shape == (20000,)
    assert abs(float(x.mean())) < 0.05 and abs(float(x.std()) - 1) < 0.05
    t = rand("TruncatedNormal", np.array([100, 200], i32), seed=1, dtype=np.dtype(f64))
    assert t.dtype == f64 and t.shape == (100, 200)
    assert np.abs(t).max() <= 2
    # The standard normal truncated to [-2, 2] has standard deviation 0.8796.
    assert abs(float(t.mean())) < 0.03 and abs(float(t.std()) - 0.8796) < 0.03


def test_random_uniform_int() -> None:
    x = rand("RandomUniformInt", np.array([5000], i32), i64(-3), i64(4), seed=9)
    assert x.dtype == i64 and x.shape == (5000,)
    assert set(np.unique(x).tolist()) == set(range(-3, 4))
    same(rand("RandomUniformInt", np.array([0], i32), i32(3), i32(3)), np.zeros(0, i32))
    with pytest.raises(InvalidArgumentError, match="Need minval < maxval, got 3 >= 3"):
        rand("RandomUniformInt", np.array([5], i32), i32(3), i32(3))
    with pytest.raises(InvalidArgumentError, match=r"minval must be 0-D, got shape \[1\]"):
        rand("RandomUniformInt", np.array([5], i32), np.array([3], i32), i32(5))


def test_multinomial() -> None:
    logits = np.log(np.array([[0.2, 1.0, 0.8], [1.0, 1.0, 2.0]], f64))
    logits[0, 1] = -np.inf
    x = rand("Multinomial", logits, i32(4000), seed=5)
    assert x.dtype == i64 and x.shape == (2, 4000)
    assert not (x[0] == 1).any()  # a -inf logit is never drawn
    assert abs(float((x[0] == 2).mean()) - 0.8) < 0.03
    assert abs(float((x[1] == 2).mean()) - 0.5) < 0.03
    # A row without a finite logit yields num_classes, as TF does.
    dead = rand("Multinomial", np.full((1, 3), -np.inf, f32), i32(5), seed=5,
                output_dtype=np.dtype(i32))
    same(dead, np.full((1, 5), 3, i32))
    with pytest.raises(InvalidArgumentError, match="num_samples should be non-negative"):
        rand("Multinomial", np.zeros((1, 2), f32), i32(-1))
    with pytest.raises(InvalidArgumentError, match="logits should be a matrix"):
        rand("Multinomial", np.zeros(2, f32), i32(1))


def test_random_seeds_deterministic() -> None:
    shape = np.array([8], i32)
    a = rand("RandomUniform", shape, seed=7, seed2=3, dtype=np.dtype(f32))
    b = rand("RandomUniform", shape, seed=7, seed2=3, dtype=np.dtype(f32))
    c = rand("RandomUniform", shape, seed=7, seed2=4, dtype=np.dtype(f32))
    same(a, b)
    assert not np.array_equal(a, c)
    # Unseeded draws differ from call to call.
    u1 = rand("RandomStandardNormal", shape, dtype=np.dtype(f32))
    u2 = rand("RandomStandardNormal", shape, dtype=np.dtype(f32))
    assert not np.array_equal(u1, u2)


def test_random_seeded_stream_per_session_node() -> None:
    # In a session the node keeps one generator: the n-th run gives the same values in every
    # session, successive runs differ.
    text = """
    node { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
           int_val: 4 } } } }
    node { name: "r" op: "RandomUniform" input: "shape"
           attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "T" value { type: DT_INT32 } }
           attr { key: "seed" value { i: 7 } } attr { key: "seed2" value { i: 3 } } }
    """
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    with Session(Graph(gd)) as s1, Session(Graph(gd)) as s2:
        a1, a2 = s1.run(["r:0"])[0], s1.run(["r:0"])[0]
        b1, b2 = s2.run(["r:0"])[0], s2.run(["r:0"])[0]
    assert a1.dtype == f32 and a1.shape == (4,)
    same(a1, b1)
    same(a2, b2)
    assert not np.array_equal(a1, a2)


def test_random_shape_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="Dimension -3 must be >= 0"):
        rand("RandomUniform", np.array([2, -3], i32), dtype=np.dtype(f32))
    with pytest.raises(InvalidArgumentError, match="shape must be a vector"):
        rand("RandomUniform", np.array([[2, 3]], i32), dtype=np.dtype(f32))
    assert rand("RandomUniform", np.zeros(0, i32), dtype=np.dtype(f32)).shape == ()


# =============================================================================================
# string
# =============================================================================================


def test_string_to_number() -> None:
    s = load("string_to_number", "s")
    same(invoke("StringToNumber", s, attrs={"out_type": np.dtype(f32)}),
         load("string_to_number", "f32"))
    same(invoke("StringToNumber", s, attrs={"out_type": np.dtype(f64)}),
         load("string_to_number", "f64"))
    si = load("string_to_number", "si")
    for name, dt in (("i32", i32), ("i64", i64)):
        same(invoke("StringToNumber", si, attrs={"out_type": np.dtype(dt)}),
             load("string_to_number", name))


@pytest.mark.parametrize("text,dt", [
    (b"abc", f32), (b"1.5abc", f32), (b"", f32), (b" ", f64), (b"1_000", f64), (b"1 2", f32),
    (b"1e", f32), (b"+-1", f32), (b"0x1g", f64), (b"1.5", i32), (b"2147483648", i32),
    (b"-1", np.uint32), (b"0x1A", i64),
])
def test_string_to_number_rejects(text: bytes, dt: type) -> None:
    with pytest.raises(InvalidArgumentError) as ei:
        invoke("StringToNumber", strs(text), attrs={"out_type": np.dtype(dt)})
    assert "StringToNumberOp could not correctly convert string: " + text.decode() \
        in str(ei.value)


AS_STRING_CASES = {
    "f_default": ("fv", {}),
    "f_sci": ("fv", {"scientific": True}),
    "f_short": ("fv", {"shortest": True}),
    "f_prec_w": ("fv", {"precision": 2, "width": 9, "fill": "0"}),
    "f_left": ("fv", {"width": 11, "fill": "-"}),
    "i_default": ("iv", {}),
    "i_w": ("iv", {"width": 6, "fill": "+"}),
}


@pytest.mark.parametrize("name", list(AS_STRING_CASES))
def test_as_string(name: str) -> None:
    src, attrs = AS_STRING_CASES[name]
    got = invoke("AsString", load("as_string", src), attrs=attrs)
    assert got.dtype == object
    assert got.tolist() == load("as_string", name).tolist()


def test_as_string_bool_complex_and_errors() -> None:
    assert invoke("AsString", np.array([True, False])).tolist() == \
        load("as_string", "b").tolist()
    assert invoke("AsString", np.array([1 + 2j], np.complex64)).tolist() == \
        load("as_string", "c").tolist()
    assert invoke("AsString", np.array(2.5, f32)).tolist() == b"2.500000"
    with pytest.raises(InvalidArgumentError, match="Cannot select both scientific and shortest"):
        invoke("AsString", np.array([1.], f32), attrs={"scientific": True, "shortest": True})
    with pytest.raises(InvalidArgumentError, match="precision not supported for datatype int32"):
        invoke("AsString", np.array([1], i32), attrs={"precision": 2})
    with pytest.raises(InvalidArgumentError, match='Fill argument not supported: "x"'):
        invoke("AsString", np.array([1.], f32), attrs={"width": 4, "fill": "x"})


def test_string_join() -> None:
    out = invoke("StringJoin", strs(b"a", b"b"), np.array(b"x", dtype=object),
                 strs(b"1", b"22"), attrs={"separator": "-"})
    assert out.dtype == object and out.tolist() == [b"a-x-1", b"b-x-22"]
    out = invoke("StringJoin", np.array(b"a", dtype=object), np.array(b"x", dtype=object))
    assert out.shape == () and out.tolist() == b"ax"
    with pytest.raises(InvalidArgumentError, match=r"Input shapes do not match: \[2\] vs. \[3\]"):
        invoke("StringJoin", strs(b"a", b"b"), strs(b"x", b"y", b"z"))


SUBSTR_CASES = {
    "byte": (1, 4, "BYTE"),
    "byte_neg": (-3, 2, "BYTE"),
    "byte_rest": (2, -1, "BYTE"),
    "utf8": (1, 4, "UTF8_CHAR"),
    "utf8_neg": (-3, 2, "UTF8_CHAR"),
}


@pytest.mark.parametrize("name", list(SUBSTR_CASES))
def test_substr(name: str) -> None:
    pos, length, unit = SUBSTR_CASES[name]
    got = invoke("Substr", load("substr", "words"), i32(pos), i32(length), attrs={"unit": unit})
    assert got.tolist() == load("substr", name).tolist()


def test_substr_vector_and_broadcast() -> None:
    got = invoke("Substr", load("substr", "words"), np.array([0, 3, 5], i32),
                 np.array([2, 1, 9], i32), attrs={"unit": "UTF8_CHAR"})
    assert got.tolist() == load("substr", "vec").tolist()
    # By hand: one string against vectors of positions.
    got = invoke("Substr", np.array(b"hello", dtype=object), np.array([0, 1], i32),
                 np.array([1, 2], i32))
    assert got.tolist() == [b"h", b"el"]
    with pytest.raises(InvalidArgumentError, match="pos 3 out of range for string b'wo' at "
                                                   "index 1"):
        invoke("Substr", strs(b"hello", b"wo"), i32(3), i32(1))
    with pytest.raises(InvalidArgumentError, match="pos and len should have the same shape"):
        invoke("Substr", strs(b"hello"), np.array([0, 1], i32), np.array([1], i32))


REGEX_CASES = {
    "vowels": ("[aeiou]", "<\\0>", True),
    "swap": (r"(\w+) (\w+)", r"\2, \1", True),
    "empty": ("x*", "-", True),
    "first": (r"\d+", "#", False),
    "bad_group": ("(o)", r"\2", True),
}


@pytest.mark.parametrize("name", list(REGEX_CASES))
def test_static_regex_replace(name: str) -> None:
    pattern, rewrite, glob = REGEX_CASES[name]
    got = invoke("StaticRegexReplace", load("regex", "rx"),
                 attrs={"pattern": pattern, "rewrite": rewrite, "replace_global": glob})
    assert got.dtype == object
    assert got.tolist() == load("regex", name).tolist()


def test_static_regex_replace_invalid_pattern() -> None:
    with pytest.raises(InvalidArgumentError, match="Invalid pattern"):
        invoke("StaticRegexReplace", strs(b"abc"), attrs={"pattern": "(", "rewrite": "-"})
