"""Array kernels against TensorFlow's conformance outputs and hand-computed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from checks import same
from hypothesis import given, settings
from hypothesis import strategies as st

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "array"

i32 = np.int32
i64 = np.int64
f32 = np.float32


def load(name: str) -> np.ndarray:
    return np.load(DATA / f"{name}.npy", allow_pickle=False)


def a(values, dtype=i32) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


# --- conformance: strided_slice -------------------------------------------------------------

SS_CASES = {
    # name: (begin, end, strides, begin_mask, end_mask, ellipsis, new_axis, shrink)
    "rows": ([1], [3], [1], 0, 0, 0, 0, 0),
    "step_shrink": ([0, 0, -1], [0, 0, 0], [1, 2, 1], 3, 3, 0, 0, 4),
    "ellipsis": ([0, 1], [0, 4], [1, 1], 0, 0, 1, 0, 0),
    "newaxis_rev": ([0, 0, 0, 0], [0, 1, 0, 0], [1, 1, 1, -1], 8, 8, 4, 1, 2),
    "negative_stride": ([-1, 2, 0], [0, 0, 3], [-2, 1, 1], 4, 2, 0, 0, 0),
    "scalar": ([1, 2, 3], [2, 3, 4], [1, 1, 1], 0, 0, 0, 0, 7),
    "clamped": ([0, 3], [0, 100], [1, 1], 1, 1, 0, 0, 0),
    "python_index_strided_slice": ([0, 0, 1], [0, 0, 0], [1, 1, 2], 0, 4, 1, 2, 0),
}


@pytest.mark.parametrize("name", sorted(SS_CASES))
def test_strided_slice_conformance(name):
    b, e, s, bm, em, el, na, sh = SS_CASES[name]
    got = invoke("StridedSlice", load("strided_slice__x"), a(b), a(e), a(s),
                 attrs={"begin_mask": bm, "end_mask": em, "ellipsis_mask": el,
                        "new_axis_mask": na, "shrink_axis_mask": sh})
    same(got, load(f"strided_slice__{name}"))


def ss(x, b, e, s, **masks):
    return invoke("StridedSlice", x, a(b), a(e), a(s), attrs=masks)


def test_strided_slice_full_reverse_and_negative_strides():
    x = np.arange(10, dtype=f32)
    same(ss(x, [0], [0], [-1], begin_mask=1, end_mask=1), x[::-1])
    same(ss(x, [8], [1], [-3]), np.array([8, 5, 2], f32))
    # an end below -dim clamps to "before the first element" for negative strides
    same(ss(x, [-1], [-100], [-4]), np.array([9, 5, 1], f32))
    # a begin past the end clamps to the last element when walking backwards
    same(ss(x, [100], [6], [-1]), np.array([9, 8, 7], f32))


def test_strided_slice_empty_and_clamped_ranges():
    x = np.arange(12, dtype=i64).reshape(3, 4)
    same(ss(x, [2], [1], [1]), np.zeros((0, 4), i64))           # begin > end, stride +
    same(ss(x, [1], [2], [-1]), np.zeros((0, 4), i64))          # begin < end, stride -
    same(ss(x, [-100, 1], [100, 100], [1, 2]), x[:, 1::2])      # both ends clamp
    same(ss(np.zeros((0, 3), f32), [0], [5], [1]), np.zeros((0, 3), f32))


def test_strided_slice_shrink_negative_index_and_scalar_result():
    x = np.arange(24, dtype=f32).reshape(2, 3, 4)
    same(ss(x, [-1], [0], [1], shrink_axis_mask=1), x[1])
    got = ss(x, [1, -1, 2], [0, 0, 0], [1, 1, 1], shrink_axis_mask=7)
    same(got, np.array(22, f32))  # x[1, 2, 2] = 12 + 8 + 2


def test_strided_slice_new_axis_on_scalar_and_ellipsis_only():
    same(ss(np.array(5, i32), [0], [0], [1], new_axis_mask=1), np.array([5], i32))
    x = np.arange(6, dtype=f32).reshape(2, 3)
    same(ss(x, [0], [0], [1], ellipsis_mask=1), x)
    # new axis after the ellipsis: x[..., None]
    same(ss(x, [0, 0], [0, 0], [1, 1], ellipsis_mask=1, new_axis_mask=2), x[:, :, None])


def test_strided_slice_errors():
    x = np.zeros((2, 3), f32)
    with pytest.raises(InvalidArgumentError, match="out of bounds"):
        ss(x, [2], [3], [1], shrink_axis_mask=1)
    with pytest.raises(InvalidArgumentError, match="non-zero"):
        ss(x, [0], [1], [0])
    with pytest.raises(InvalidArgumentError, match="Multiple ellipses"):
        ss(x, [0, 0], [0, 0], [1, 1], ellipsis_mask=3)
    with pytest.raises(InvalidArgumentError, match="Index out of range"):
        ss(x, [0, 0, 0], [1, 1, 1], [1, 1, 1])
    with pytest.raises(InvalidArgumentError, match="1D equal size"):
        invoke("StridedSlice", x, a([0]), a([1, 1]), a([1]))
    with pytest.raises(InvalidArgumentError, match="only stride 1"):
        ss(x, [0], [1], [-1], shrink_axis_mask=1)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_strided_slice_matches_python_indexing(data):
    """Random specs against numpy's own indexing of the same Python subscript."""
    shape = tuple(data.draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))
    x = np.arange(int(np.prod(shape)), dtype=i32).reshape(shape)
    use_ellipsis = data.draw(st.booleans())
    n_real = data.draw(st.integers(0, len(shape)))
    kinds = [data.draw(st.sampled_from(["slice", "int", "new"])) for _ in range(n_real)]
    kinds += ["new"] * data.draw(st.integers(0, 1))
    if use_ellipsis:
        kinds.insert(data.draw(st.integers(0, len(kinds))), "ellipsis")
    # dims consumed left to right (after an ellipsis they come from the right end)
    consumed = sum(k in ("slice", "int") for k in kinds)
    if consumed > len(shape):
        return
    key, begin, end, strides = [], [], [], []
    masks = dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                 shrink_axis_mask=0)
    dim = 0
    after = sum(k in ("slice", "int") for k in kinds[kinds.index("ellipsis") + 1:]) \
        if use_ellipsis else 0
    for i, k in enumerate(kinds):
        bit = 1 << i
        if k == "ellipsis":
            key.append(Ellipsis)
            masks["ellipsis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
            dim = len(shape) - after
        elif k == "new":
            key.append(None)
            masks["new_axis_mask"] |= bit
            begin.append(0), end.append(0), strides.append(1)
        elif k == "int":
            if shape[dim] == 0:
                return
            v = data.draw(st.integers(-shape[dim], shape[dim] - 1))
            key.append(v)
            masks["shrink_axis_mask"] |= bit
            begin.append(v), end.append(v + 1), strides.append(1)
            dim += 1
        else:
            b = data.draw(st.one_of(st.none(), st.integers(-8, 8)))
            e = data.draw(st.one_of(st.none(), st.integers(-8, 8)))
            s = data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
            key.append(slice(b, e, s))
            if b is None:
                masks["begin_mask"] |= bit
            if e is None:
                masks["end_mask"] |= bit
            begin.append(b or 0), end.append(e or 0), strides.append(s)
            dim += 1
    want = np.asarray(x[tuple(key)])
    got = ss(x, a(begin, i64), a(end, i64), a(strides, i64), **masks)
    same(got, want)


# --- conformance: shape_ops -----------------------------------------------------------------

def test_shape_ops_conformance():
    x = load("shape_ops__x")
    same(invoke("Shape", x), load("shape_ops__shape"))
    same(invoke("Shape", x, attrs={"out_type": np.dtype(i64)}), load("shape_ops__shape64"))
    same(invoke("Size", x), load("shape_ops__size"))
    same(invoke("Rank", load("shape_ops__anything")), load("shape_ops__rank"))
    flat = invoke("Reshape", x, a([-1, 4]))
    same(flat, load("shape_ops__flat"))
    same(invoke("Transpose", x, a([2, 0, 1])), load("shape_ops__perm"))
    same(invoke("ConcatV2", x, x * f32(2), a(-1)), load("shape_ops__cat_last"))
    same(invoke("ConcatV2", x, x, a(0)), load("shape_ops__cat_first"))
    same(invoke("Pack", flat, flat + f32(1), attrs={"axis": 1}), load("shape_ops__packed"))
    cols = invoke("Unpack", x, attrs={"axis": 1, "num": 3})
    assert isinstance(cols, tuple) and len(cols) == 3
    for got, name in zip(cols, ["cols", "cols_1", "cols_2"]):
        same(got, load(f"shape_ops__{name}"))
    halves = invoke("Split", a(2), x, attrs={"num_split": 2})
    same(halves[0], load("shape_ops__halves"))
    same(halves[1], load("shape_ops__halves_1"))
    parts = invoke("SplitV", x, a([1, -1]), a(1), attrs={"num_split": 2})
    same(parts[0], load("shape_ops__parts"))
    same(parts[1], load("shape_ops__parts_1"))
    squeezed = invoke("Squeeze", parts[0], attrs={"squeeze_dims": [1]})
    same(squeezed, load("shape_ops__squeezed"))
    same(invoke("ExpandDims", squeezed, a(-1)), load("shape_ops__expanded"))


# --- conformance: shape_builders ------------------------------------------------------------

def test_shape_builders_conformance():
    def feed(n):
        return load(f"shape_builders__{n}")

    def want(n):
        return load(f"shape_builders__{n}")

    same(invoke("Fill", feed("dims"), np.array(7.5, f32)), want("filled"))
    same(invoke("Range", a(0), feed("n"), a(3)), want("range_int"))
    same(invoke("Range", feed("start"), feed("limit"), feed("delta"),
                attrs={"Tidx": np.dtype(f32)}), want("range_float"))
    tiled = invoke("Tile", feed("x"), a([2, 3]))
    same(tiled, want("tiled"))
    same(invoke("Pad", feed("x"), a([[1, 0], [2, 1]])), want("padded"))
    same(invoke("Slice", tiled, a([1, 2]), a([2, -1])), want("sliced"))
    same(invoke("GatherV2", feed("params"), feed("idx"), a(0)), want("gather_rows"))
    same(invoke("GatherV2", feed("params"), a([[0, 3], [1, 1]]), a(1)), want("gather_cols"))
    same(invoke("OneHot", feed("labels"), a(5), np.array(1, f32), np.array(0, f32)),
         want("onehot"))
    same(invoke("OneHot", feed("labels"), a(3), a(5), a(-1), attrs={"axis": 0}),
         want("onehot_axis0"))
    same(invoke("ZerosLike", feed("x")), want("zeros"))
    same(invoke("OnesLike", feed("x")), want("ones"))


# --- conformance: Where, ArgMax, ArgMin -----------------------------------------------------

def test_where_conformance():
    same(invoke("Where", load("compare_select_where__mask")),
         load("compare_select_where__coords"))


def test_argmax_argmin_conformance():
    x = load("reductions__x")
    same(invoke("ArgMax", x, a(-1)), load("reductions__argmax"))
    same(invoke("ArgMin", x, a(0), attrs={"output_type": np.dtype(i32)}),
         load("reductions__argmin"))


# --- Reshape / Squeeze / ExpandDims ---------------------------------------------------------

def test_reshape_infers_and_returns_view():
    x = np.arange(12, dtype=f32)
    y = invoke("Reshape", x, a([3, -1]))
    assert y.shape == (3, 4) and np.shares_memory(x, y)
    same(invoke("Reshape", x, a([-1], i64)), x)
    same(invoke("Reshape", np.array([7], i32), a([], i32)), np.array(7, i32))


def test_reshape_zero_sized():
    # With a zero in the requested shape, TF infers -1 from the non-zero input dims.
    assert invoke("Reshape", np.zeros((0, 4), f32), a([-1, 0])).shape == (4, 0)
    assert invoke("Reshape", np.zeros((2, 0, 3), f32), a([0, -1])).shape == (0, 6)
    assert invoke("Reshape", np.zeros((0, 3), f32), a([-1, 3])).shape == (0, 3)
    assert invoke("Reshape", np.zeros((0,), f32), a([5, 0])).shape == (5, 0)


def test_reshape_errors_name_both_shapes():
    x = np.zeros((2, 3), f32)
    with pytest.raises(InvalidArgumentError, match=r"6 values.*has 4.*\[2,3\].*\[4\]"):
        invoke("Reshape", x, a([4]))
    with pytest.raises(InvalidArgumentError, match=r"multiple of 4.*\[2,3\].*\[-1,4\]"):
        invoke("Reshape", x, a([-1, 4]))
    with pytest.raises(InvalidArgumentError, match="Only one input size may be -1"):
        invoke("Reshape", x, a([-1, -1]))
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        invoke("Reshape", x, a([-2, -3]))
    with pytest.raises(InvalidArgumentError, match="6 values"):
        invoke("Reshape", x, a([0, -1]))


def test_squeeze():
    x = np.zeros((1, 2, 1, 3, 1), f32)
    assert invoke("Squeeze", x).shape == (2, 3)
    assert invoke("Squeeze", x, attrs={"squeeze_dims": [-1, 0]}).shape == (2, 1, 3)
    with pytest.raises(InvalidArgumentError, match="expected a dimension of 1, got 2"):
        invoke("Squeeze", x, attrs={"squeeze_dims": [1]})
    with pytest.raises(InvalidArgumentError, match="squeeze dim index 5"):
        invoke("Squeeze", x, attrs={"squeeze_dims": [5]})
    y = invoke("Squeeze", x)
    assert np.shares_memory(x, y)


def test_expand_dims():
    x = np.arange(6, dtype=i32).reshape(2, 3)
    assert invoke("ExpandDims", x, a(0)).shape == (1, 2, 3)
    assert invoke("ExpandDims", x, a(-1)).shape == (2, 3, 1)
    assert invoke("ExpandDims", x, a(-3)).shape == (1, 2, 3)
    assert invoke("ExpandDims", x, a([2], i64)).shape == (2, 3, 1)
    assert invoke("ExpandDims", np.array(3.0, f32), a(0)).shape == (1,)
    with pytest.raises(InvalidArgumentError, match="expand dim index 3"):
        invoke("ExpandDims", x, a(3))
    with pytest.raises(InvalidArgumentError, match="expand dim index -4"):
        invoke("ExpandDims", x, a(-4))


# --- Shape family ---------------------------------------------------------------------------

def test_shape_size_rank_dtypes_and_empty():
    x = np.zeros((3, 0, 2), np.float16)
    same(invoke("Shape", x), a([3, 0, 2]))
    same(invoke("Size", x, attrs={"out_type": np.dtype(i64)}), np.array(0, i64))
    same(invoke("Rank", x), np.array(3, i32))
    same(invoke("Shape", np.array(1.0, f32)), np.zeros(0, i32))
    same(invoke("Size", np.array(1.0, f32)), np.array(1, i32))
    s = invoke("ShapeN", np.zeros((2,), f32), np.zeros((4, 5), f32),
               attrs={"out_type": np.dtype(i64)})
    assert isinstance(s, tuple)
    same(s[0], a([2], i64))
    same(s[1], a([4, 5], i64))


# --- Transpose ------------------------------------------------------------------------------

def test_transpose_and_conjugate():
    x = np.arange(24, dtype=i64).reshape(2, 3, 4)
    got = invoke("Transpose", x, a([1, 2, 0], i64))
    assert got.shape == (3, 4, 2) and got[2, 1, 1] == x[1, 2, 1]
    z = np.array([[1 + 2j, 3 - 1j]], np.complex64)
    same(invoke("ConjugateTranspose", z, a([1, 0])), np.array([[1 - 2j], [3 + 1j]], np.complex64))
    with pytest.raises(InvalidArgumentError, match="vector of size 3"):
        invoke("Transpose", x, a([1, 0]))
    with pytest.raises(InvalidArgumentError, match="duplicated"):
        invoke("Transpose", x, a([0, 0, 1]))
    with pytest.raises(InvalidArgumentError, match="out of range"):
        invoke("Transpose", x, a([0, 1, 3]))


def test_invert_permutation():
    same(invoke("InvertPermutation", a([3, 4, 0, 2, 1])), a([2, 4, 3, 0, 1]))
    same(invoke("InvertPermutation", a([], i64)), a([], i64))
    with pytest.raises(InvalidArgumentError, match="duplicated"):
        invoke("InvertPermutation", a([0, 0, 1]))
    with pytest.raises(InvalidArgumentError, match="not between 0 and 3"):
        invoke("InvertPermutation", a([0, 3, 1]))


# --- Concat / Pack / Unpack / Split ---------------------------------------------------------

def test_concat_variants():
    x = np.arange(6, dtype=f32).reshape(2, 3)
    e = np.zeros((2, 0), f32)
    same(invoke("ConcatV2", x, e, x, a(-1)),
         np.array([[0, 1, 2, 0, 1, 2], [3, 4, 5, 3, 4, 5]], f32))
    same(invoke("Concat", a(0), x, x[:1]), np.array([[0, 1, 2], [3, 4, 5], [0, 1, 2]], f32))
    same(invoke("ConcatV2", x, a(1)), x)
    with pytest.raises(InvalidArgumentError, match="Dimension 0 in both shapes must be equal"):
        invoke("ConcatV2", x, np.zeros((3, 3), f32), a(1))
    with pytest.raises(InvalidArgumentError, match="Ranks of all input tensors"):
        invoke("ConcatV2", x, np.zeros(3, f32), a(0))
    with pytest.raises(InvalidArgumentError, match="range"):
        invoke("ConcatV2", x, x, a(2))
    with pytest.raises(InvalidArgumentError, match="scalars"):
        invoke("ConcatV2", np.array(1, i32), np.array(2, i32), a(0))


def test_pack_unpack():
    x = np.array([1, 2], i32)
    y = np.array([3, 4], i32)
    same(invoke("Pack", x, y, attrs={"axis": -1}), np.array([[1, 3], [2, 4]], i32))
    same(invoke("Pack", np.array(1.5, f32)), np.array([1.5], f32))
    with pytest.raises(InvalidArgumentError, match="Shapes of all inputs must match"):
        invoke("Pack", x, np.zeros(3, i32))
    m = np.arange(6, dtype=i32).reshape(2, 3)
    parts = invoke("Unpack", m, attrs={"axis": -1, "num": 3})
    same(parts[2], np.array([2, 5], i32))
    one = invoke("Unpack", np.array([7], i32), attrs={"num": 1})
    assert isinstance(one, tuple) and len(one) == 1
    same(one[0], np.array(7, i32))
    with pytest.raises(InvalidArgumentError, match="must equal 4"):
        invoke("Unpack", m, attrs={"axis": 0, "num": 4})


def test_split_and_splitv():
    x = np.arange(12, dtype=f32).reshape(2, 6)
    parts = invoke("Split", a(-1), x, attrs={"num_split": 3})
    same(parts[1], np.array([[2, 3], [8, 9]], f32))
    one = invoke("Split", a(0), x, attrs={"num_split": 1})
    assert isinstance(one, tuple) and len(one) == 1
    same(one[0], x)
    with pytest.raises(InvalidArgumentError, match="evenly divide"):
        invoke("Split", a(1), x, attrs={"num_split": 4})
    v = invoke("SplitV", x, a([1, -1, 2], i64), a(1), attrs={"num_split": 3})
    assert [p.shape for p in v] == [(2, 1), (2, 3), (2, 2)]
    same(v[2], np.array([[4, 5], [10, 11]], f32))
    z = invoke("SplitV", x, a([0, 6]), a(1), attrs={"num_split": 2})
    assert z[0].shape == (2, 0)
    with pytest.raises(InvalidArgumentError, match="Determined shape"):
        invoke("SplitV", x, a([2, 2]), a(1), attrs={"num_split": 2})
    with pytest.raises(InvalidArgumentError, match="only be one -1"):
        invoke("SplitV", x, a([-1, -1]), a(1), attrs={"num_split": 2})


# --- Slice ----------------------------------------------------------------------------------

def test_slice():
    x = np.arange(20, dtype=i64).reshape(4, 5)
    same(invoke("Slice", x, a([1, 3]), a([-1, 2])), np.array([[8, 9], [13, 14], [18, 19]], i64))
    same(invoke("Slice", x, a([4, 0]), a([0, 5])), np.zeros((0, 5), i64))
    with pytest.raises(InvalidArgumentError, match=r"size\[1\] in \[0, 2\]"):
        invoke("Slice", x, a([0, 3]), a([1, 3]))
    with pytest.raises(InvalidArgumentError, match=r"begin\[0\] in \[0, 4\]"):
        invoke("Slice", x, a([5, 0]), a([0, 1]))
    with pytest.raises(InvalidArgumentError, match="1-D tensors of size 2"):
        invoke("Slice", x, a([0]), a([1]))


# --- builders -------------------------------------------------------------------------------

def test_fill():
    same(invoke("Fill", a([2, 0], i64), np.array(3, np.int8)), np.zeros((2, 0), np.int8))
    same(invoke("Fill", a([], i32), np.array(True)), np.array(True))
    with pytest.raises(InvalidArgumentError, match="scalar"):
        invoke("Fill", a([2]), np.array([1.0, 2.0], f32))
    with pytest.raises(InvalidArgumentError, match="must be >= 0"):
        invoke("Fill", a([2, -1]), np.array(1.0, f32))


def test_range_sizes_and_errors():
    same(invoke("Range", a(1), a(10), a(4)), a([1, 5, 9]))
    same(invoke("Range", a(10, i64), a(1, i64), a(-4, i64)), a([10, 6, 2], i64))
    same(invoke("Range", a(3), a(3), a(1)), a([], i32))
    # float size = ceil((limit - start) / delta) = ceil(2.5) = 3
    same(invoke("Range", a(0, f32), a(1, f32), a(0.4, f32)),
         np.array([0, 0.4, np.float32(0.4) + np.float32(0.4)], f32))
    with pytest.raises(InvalidArgumentError, match="delta != 0"):
        invoke("Range", a(0), a(5), a(0))
    with pytest.raises(InvalidArgumentError, match="start <= limit when delta > 0"):
        invoke("Range", a(5), a(1), a(1))
    with pytest.raises(InvalidArgumentError, match="start >= limit when delta < 0"):
        invoke("Range", a(1, f32), a(5, f32), a(-1, f32))
    with pytest.raises(InvalidArgumentError, match="scalar"):
        invoke("Range", a([0, 1]), a(5), a(1))


def test_range_float_accumulates_like_tf():
    # TF's CPU kernel adds delta repeatedly in float32; model that loop by hand.
    want = []
    v = np.float32(0.0)
    for _ in range(30):
        want.append(v)
        v = np.float32(v + np.float32(0.1))
    got = invoke("Range", a(0, f32), a(2.95, f32), a(0.1, f32))
    same(got, np.array(want, f32))


def test_tile():
    x = np.array([[1, 2]], i32)
    same(invoke("Tile", x, a([2, 2])), np.array([[1, 2, 1, 2], [1, 2, 1, 2]], i32))
    same(invoke("Tile", x, a([0, 3], i64)), np.zeros((0, 6), i32))
    same(invoke("Tile", np.array(4.0, f32), a([], i32)), np.array(4.0, f32))
    with pytest.raises(InvalidArgumentError, match="vector of length 2"):
        invoke("Tile", x, a([2]))
    with pytest.raises(InvalidArgumentError, match=r"multiples\[1\] >= 0"):
        invoke("Tile", x, a([1, -1]))


def test_pad_variants():
    x = np.array([[1, 2, 3], [4, 5, 6]], i32)
    same(invoke("PadV2", x, a([[0, 1], [1, 0]]), np.array(9, i32)),
         np.array([[9, 1, 2, 3], [9, 4, 5, 6], [9, 9, 9, 9]], i32))
    same(invoke("MirrorPad", x, a([[1, 1], [2, 2]]), attrs={"mode": "REFLECT"}),
         np.array([[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1],
                   [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]], i32))
    same(invoke("MirrorPad", x, a([[1, 1], [2, 2]]), attrs={"mode": "SYMMETRIC"}),
         np.array([[2, 1, 1, 2, 3, 3, 2], [2, 1, 1, 2, 3, 3, 2],
                   [5, 4, 4, 5, 6, 6, 5], [5, 4, 4, 5, 6, 6, 5]], i32))
    same(invoke("Pad", np.zeros((0, 2), f32), a([[1, 1], [0, 0]])), np.zeros((2, 2), f32))
    with pytest.raises(InvalidArgumentError, match="less than the dimension size"):
        invoke("MirrorPad", x, a([[2, 0], [0, 0]]), attrs={"mode": "REFLECT"})
    with pytest.raises(InvalidArgumentError, match="no greater than"):
        invoke("MirrorPad", x, a([[3, 0], [0, 0]]), attrs={"mode": "SYMMETRIC"})
    with pytest.raises(InvalidArgumentError, match="non-negative"):
        invoke("Pad", x, a([[0, -1], [0, 0]]))
    with pytest.raises(InvalidArgumentError, match="rank of inputs"):
        invoke("Pad", x, a([[0, 1]]))


def test_zeros_ones_like_keep_dtype():
    same(invoke("ZerosLike", np.array([True, False])), np.array([False, False]))
    same(invoke("OnesLike", np.zeros((2, 0), np.uint8)), np.zeros((2, 0), np.uint8))
    same(invoke("OnesLike", np.array([1 + 1j], np.complex128)), np.array([1], np.complex128))


def test_broadcast_to_and_args():
    x = np.array([1, 2, 3], f32)
    same(invoke("BroadcastTo", x, a([2, 3])), np.array([[1, 2, 3], [1, 2, 3]], f32))
    same(invoke("BroadcastTo", x, a([0, 3], i64)), np.zeros((0, 3), f32))
    with pytest.raises(InvalidArgumentError, match="Unable to broadcast"):
        invoke("BroadcastTo", x, a([2, 4]))
    with pytest.raises(InvalidArgumentError, match="Rank of input"):
        invoke("BroadcastTo", np.zeros((1, 1, 3), f32), a([2, 3]))
    same(invoke("BroadcastArgs", a([2, 1, 3]), a([4, 1])), a([2, 4, 3]))
    same(invoke("BroadcastArgs", a([0, 1], i64), a([5], i64)), a([0, 5], i64))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        invoke("BroadcastArgs", a([2, 3]), a([4, 3]))


def test_reverse_v2():
    x = np.arange(6, dtype=i32).reshape(2, 3)
    same(invoke("ReverseV2", x, a([-1])), np.array([[2, 1, 0], [5, 4, 3]], i32))
    same(invoke("ReverseV2", x, a([0, 1], i64)), np.array([[5, 4, 3], [2, 1, 0]], i32))
    same(invoke("ReverseV2", x, a([], i32)), x)
    with pytest.raises(InvalidArgumentError, match="more than once"):
        invoke("ReverseV2", x, a([1, -1]))
    with pytest.raises(InvalidArgumentError, match="out of valid range"):
        invoke("ReverseV2", x, a([2]))


# --- gather / scatter / one_hot / where -----------------------------------------------------

def test_gather_v2_negative_axis_and_scalar_index():
    p = np.arange(12, dtype=f32).reshape(3, 4)
    same(invoke("GatherV2", p, a([3, 0]), a(-1)), np.array([[3, 0], [7, 4], [11, 8]], f32))
    same(invoke("GatherV2", p, a(2), a(0)), np.array([8, 9, 10, 11], f32))
    same(invoke("GatherV2", np.array([5, 6], i64), a(1), a(0)), np.array(6, i64))
    same(invoke("GatherV2", p, a([], i64), a(0)), np.zeros((0, 4), f32))
    same(invoke("Gather", p, a([[2], [0]])), np.array([[[8, 9, 10, 11]], [[0, 1, 2, 3]]], f32))


def test_gather_v2_batch_dims():
    # params [2, 3, 2], indices [2, 2], batch_dims=1, axis=1:
    # out[b, j, k] = params[b, indices[b, j], k]
    p = np.arange(12, dtype=i32).reshape(2, 3, 2)
    idx = a([[2, 0], [1, 1]])
    want = np.array([[[4, 5], [0, 1]], [[8, 9], [8, 9]]], i32)
    same(invoke("GatherV2", p, idx, a(1), attrs={"batch_dims": 1}), want)
    same(invoke("GatherV2", p, idx, a(1), attrs={"batch_dims": -1}), want)
    # axis 2 with batch_dims 1: out[b, o, j] = params[b, o, indices[b, j]]
    idx2 = a([[1, 0], [0, 0]])
    want2 = np.array([[[1, 0], [3, 2], [5, 4]], [[6, 6], [8, 8], [10, 10]]], i32)
    same(invoke("GatherV2", p, idx2, a(-1), attrs={"batch_dims": 1}), want2)
    with pytest.raises(InvalidArgumentError, match="less than or equal to axis"):
        invoke("GatherV2", p, idx, a(0), attrs={"batch_dims": 1})
    with pytest.raises(InvalidArgumentError, match="should be equal to"):
        invoke("GatherV2", p, a([[0], [0], [0]]), a(1), attrs={"batch_dims": 1})


def test_gather_out_of_range_is_an_error():
    p = np.arange(5, dtype=f32)
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = 5 is not in \[0, 5\)"):
        invoke("GatherV2", p, a([0, 5]), a(0))
    with pytest.raises(InvalidArgumentError, match=r"indices\[0,1\] = -1"):
        invoke("GatherV2", p, a([[0, -1]]), a(0))
    with pytest.raises(InvalidArgumentError, match="is not in"):
        invoke("Gather", p, a([7], i64))
    with pytest.raises(InvalidArgumentError, match=r"indices\[1,0\] = -3 is not in \[0, 5\)"):
        invoke("GatherV2", p, a([[0], [-3]], i64), a(0))
    # int32 indices seen as unsigned by the gather's own bounds check: -1 is out of range
    idx = np.array([[4, -1, 0]], np.int32)[:, ::2]          # strided, [4, 0]: in range
    same(invoke("GatherV2", p, idx, a(0)), np.array([[4, 0]], f32))
    with pytest.raises(InvalidArgumentError, match=r"indices\[0,0\] = -1"):
        invoke("GatherV2", p, np.array([[4, -1, 0]], np.int32)[:, 1:], a(0))
    with pytest.raises(InvalidArgumentError, match=r"indices\[0\] = 0 is not in \[0, 0\)"):
        invoke("GatherV2", np.zeros((0, 2), f32), a([0]), a(0))


def test_gather_nd():
    p = np.arange(12, dtype=i32).reshape(2, 3, 2)
    same(invoke("GatherNd", p, a([[1, 2], [0, 1]])), np.array([[10, 11], [2, 3]], i32))
    same(invoke("GatherNd", p, a([[1, 2, 1]])), np.array([11], i32))
    same(invoke("GatherNd", p, a([[[1]]])), p[1][None, None])
    with pytest.raises(InvalidArgumentError, match="does not index into param shape"):
        invoke("GatherNd", p, a([[2, 0]]))


def test_scatter_nd_duplicates_add():
    got = invoke("ScatterNd", a([[1], [3], [1]]), np.array([1.5, 2.0, 4.0], f32), a([5]))
    same(got, np.array([0, 5.5, 0, 2.0, 0], f32))
    got = invoke("ScatterNd", a([[0, 1], [0, 1]], i64), np.array([[1, 2], [3, 4]], i64),
                 a([1, 2, 2], i64))
    same(got, np.array([[[0, 0], [4, 6]]], i64))
    with pytest.raises(InvalidArgumentError, match="does not index into shape"):
        invoke("ScatterNd", a([[5]]), np.array([1.0], f32), a([4]))
    with pytest.raises(InvalidArgumentError, match="Updates shape"):
        invoke("ScatterNd", a([[1]]), np.array([1.0, 2.0], f32), a([4]))


def test_one_hot_out_of_range_and_axes():
    labels = np.array([[0, 3], [-1, 1]], np.int64)
    got = invoke("OneHot", labels, a(3), np.array(5, i32), np.array(-2, i32))
    want = np.array([[[5, -2, -2], [-2, -2, -2]], [[-2, -2, -2], [-2, 5, -2]]], i32)
    same(got, want)
    got1 = invoke("OneHot", labels, a(3), np.array(1.0, f32), np.array(0.0, f32),
                  attrs={"axis": 1})
    assert got1.shape == (2, 3, 2)
    same(got1[:, :, 1], np.array([[0, 0, 0], [0, 1, 0]], f32))
    same(invoke("OneHot", np.array(2, np.uint8), a(4), np.array(True), np.array(False)),
         np.array([False, False, True, False]))
    same(invoke("OneHot", np.zeros(0, i32), a(2), np.array(1.0, f32), np.array(0.0, f32)),
         np.zeros((0, 2), f32))
    with pytest.raises(InvalidArgumentError, match="depth must be non-negative"):
        invoke("OneHot", labels, a(-1), np.array(1, i32), np.array(0, i32))
    with pytest.raises(InvalidArgumentError, match="Expected axis"):
        invoke("OneHot", labels, a(2), np.array(1, i32), np.array(0, i32), attrs={"axis": 3})


def test_where_edge_cases():
    same(invoke("Where", np.array(True)), np.zeros((1, 0), i64))
    same(invoke("Where", np.array(False)), np.zeros((0, 0), i64))
    same(invoke("Where", np.zeros((2, 0, 3), bool)), np.zeros((0, 3), i64))
    same(invoke("Where", np.array([0.0, np.nan, -1.0], f32)), np.array([[1], [2]], i64))


# --- sorting and indexing -------------------------------------------------------------------

def test_argmax_ties_nan_and_types():
    x = np.array([[1, 3, 3], [2, 2, 0]], np.uint8)
    same(invoke("ArgMax", x, a(1)), np.array([1, 0], i64))
    same(invoke("ArgMin", x, a(0), attrs={"output_type": np.dtype(i32)}), a([0, 1, 1]))
    # TF's CPU reducer never selects a NaN; an all-NaN row gives index 0.
    y = np.array([[np.nan, 1.0, 5.0], [np.nan, np.nan, np.nan], [-np.inf, np.nan, -np.inf]],
                 np.float32)
    same(invoke("ArgMax", y, a(1)), np.array([2, 0, 0], i64))
    same(invoke("ArgMin", y, a(1)), np.array([1, 0, 0], i64))
    same(invoke("ArgMax", np.array([False, True, True]), a(0)), np.array(1, i64))
    with pytest.raises(InvalidArgumentError, match="empty"):
        invoke("ArgMax", np.zeros((0, 3), f32), a(0))
    with pytest.raises(InvalidArgumentError, match="range"):
        invoke("ArgMin", np.zeros((2, 3), f32), a(2))


def test_top_k_v2():
    x = np.array([[1, 5, 3, 5, 2], [0, -1, 7, 7, 7]], i32)
    v, i = invoke("TopKV2", x, a(3))
    same(v, np.array([[5, 5, 3], [7, 7, 7]], i32))
    same(i, np.array([[1, 3, 2], [2, 3, 4]], i32))
    v, i = invoke("TopKV2", np.array([np.iinfo(i64).min, 4], i64), a(2),
                  attrs={"index_type": np.dtype(i64)})
    same(v, np.array([4, np.iinfo(i64).min], i64))
    same(i, np.array([1, 0], i64))
    v, i = invoke("TopKV2", np.ones((2, 3), f32), a(0))
    assert v.shape == (2, 0) and i.dtype == i32
    with pytest.raises(InvalidArgumentError, match="at least k columns"):
        invoke("TopKV2", x, a(6))
    with pytest.raises(InvalidArgumentError, match="k >= 0"):
        invoke("TopKV2", x, a(-1))


def test_unique():
    y, idx = invoke("Unique", np.array([4, 1, 4, 2, 1, 7], i64))
    same(y, np.array([4, 1, 2, 7], i64))
    same(idx, a([0, 1, 0, 2, 1, 3]))
    y, idx = invoke("Unique", np.array([b"b", b"a", b"b"], object),
                    attrs={"out_idx": np.dtype(i64)})
    assert y.tolist() == [b"b", b"a"] and idx.dtype == i64 and idx.tolist() == [0, 1, 0]
    y, idx = invoke("Unique", np.zeros(0, f32))
    assert y.shape == (0,) and idx.shape == (0,) and idx.dtype == i32
    y, idx, cnt = invoke("UniqueWithCounts", np.array([3, 3, 1], i32))
    same(cnt, a([2, 1]))
    with pytest.raises(InvalidArgumentError, match="1D"):
        invoke("Unique", np.zeros((2, 2), f32))


# --- matrices and space/depth ---------------------------------------------------------------

def test_matrix_diag_and_band_part():
    same(invoke("MatrixDiag", np.array([[1, 2], [3, 4]], i32)),
         np.array([[[1, 0], [0, 2]], [[3, 0], [0, 4]]], i32))
    same(invoke("MatrixDiagPart", np.arange(6, dtype=f32).reshape(2, 3)), np.array([0, 4], f32))
    x = np.arange(1, 17, dtype=f32).reshape(4, 4)
    got = invoke("MatrixBandPart", x, a(1, i64), a(-1, i64))
    want = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [0, 10, 11, 12], [0, 0, 15, 16]], f32)
    same(got, want)
    same(invoke("MatrixBandPart", x, a(0, i64), a(0, i64)), np.diag(np.diag(x)))
    with pytest.raises(InvalidArgumentError, match="num_lower"):
        invoke("MatrixBandPart", x, a(5, i64), a(0, i64))


def test_space_to_depth_and_back():
    x = np.arange(16, dtype=i32).reshape(1, 4, 4, 1)
    y = invoke("SpaceToDepth", x, attrs={"block_size": 2})
    assert y.shape == (1, 2, 2, 4)
    # the top-left 2x2 block [0, 1, 4, 5] becomes the depth vector of output pixel (0, 0)
    same(y[0, 0, 0], a([0, 1, 4, 5]))
    same(y[0, 1, 1], a([10, 11, 14, 15]))
    same(invoke("DepthToSpace", y, attrs={"block_size": 2}), x)
    with pytest.raises(InvalidArgumentError, match="divisible"):
        invoke("SpaceToDepth", np.zeros((1, 3, 4, 1), f32), attrs={"block_size": 2})


def test_one_node_follows_changing_specs_and_shapes_between_runs():
    # StridedSlice, Split and Squeeze keep their last resolution in the node's context (a
    # loop runs them alike every iteration); one Session node fed a different spec, the same
    # array changed in place, and inputs of other shapes must give numpy's own answers
    from dfg.executor import Session
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", None, name="x")
        b = B.placeholder("int32", None, name="b")
        e = B.placeholder("int32", None, name="e")
        s = B.placeholder("int32", None, name="s")
        B.identity(B.apply_op("StridedSlice", [x, b, e, s], name="ss").outputs[0], name="y")
        axis = B.placeholder("int32", None, name="axis")
        parts = B.apply_op("Split", [axis, x], attrs={"num_split": 2}, name="split").outputs
        B.identity(parts[1], name="second")
        B.identity(B.apply_op("Squeeze", [x], name="sq").outputs[0], name="squeezed")
    x1 = np.arange(24, dtype=f32).reshape(4, 6)
    begin = a([1, 0])
    with Session(g.as_graph_def(), threads=1) as sess:
        for _ in range(2):
            got = sess.run("y", {"x": x1, "b": begin, "e": a([3, 6]), "s": a([1, 2])})
            same(got, x1[1:3, 0:6:2])
        begin[0] = 2                       # the same array, changed in place
        got = sess.run("y", {"x": x1, "b": begin, "e": a([3, 6]), "s": a([1, 2])})
        same(got, x1[2:3, 0:6:2])
        x2 = np.arange(30, dtype=f32).reshape(5, 6)
        got = sess.run("y", {"x": x2, "b": begin, "e": a([3, 6]), "s": a([1, 2])})
        same(got, x2[2:3, 0:6:2])
        got = sess.run("y", {"x": x2, "b": a([0]), "e": a([5]), "s": a([2])})
        same(got, x2[0:5:2])
        with pytest.raises(InvalidArgumentError, match="1D equal size"):
            sess.run("y", {"x": x2, "b": a([0, 0]), "e": a([[5, 6]]), "s": a([1, 1])})
        for xx, ax, want in ((x1, 1, x1[:, 3:]), (x1, 1, x1[:, 3:]), (x1, 0, x1[2:]),
                             (x2, 1, x2[:, 3:]), (x1, i64(-1), x1[:, 3:])):
            same(sess.run("second", {"x": xx, "axis": np.asarray(ax)}), want)
        for xx in (np.ones((1, 3), f32), np.ones((1, 3), f32), np.ones((2, 1), f32),
                   np.ones((1, 1, 4), f32)):
            same(sess.run("squeezed", {"x": xx}), np.squeeze(xx))
