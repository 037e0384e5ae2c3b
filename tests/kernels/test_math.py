"""Tests of the math kernel family (executor/kernels/math.py).

Expected values come from TensorFlow's conformance files (copied into tests/data/kernels/math)
or are worked out by hand / from Python's ``math`` module; never from the kernels themselves.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfg.executor.kernels.registry import invoke, lookup
from dfg.graphdef.attrs import to_python
from dfg.graphdef.errors import InvalidArgumentError, OpError, UnimplementedError
from dfg.graphdef.io import load_graphdef

# TensorFlow computes inf/nan silently; so must the kernels (numpy would warn).
pytestmark = pytest.mark.filterwarnings("error")

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "math"

I8, I32, I64 = np.int8, np.int32, np.int64
U8 = np.uint8
F16, F32, F64 = np.float16, np.float32, np.float64
C64, C128 = np.complex64, np.complex128
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def a(values: Any, dtype: Any) -> np.ndarray:
    return np.array(values, dtype=dtype)


def run(op: str, *inputs: Any, **attrs: Any) -> Any:
    return invoke(op, *inputs, attrs=attrs)


def check(actual: Any, expected: np.ndarray, rtol: float = 0.0, atol: float = 0.0) -> None:
    """dtype and shape exactly; ints and bools exactly; floats within tolerance, NaN == NaN."""
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


# --- registration ------------------------------------------------------------------------------

REQUIRED_OPS = """
Add AddV2 Sub Mul Div RealDiv FloorDiv FloorMod TruncateDiv TruncateMod Mod Pow Maximum Minimum
SquaredDifference DivNoNan MulNoNan Xdivy Xlogy Xlog1py Atan2 BitwiseAnd BitwiseOr BitwiseXor
LeftShift RightShift Equal NotEqual Less LessEqual Greater GreaterEqual LogicalAnd LogicalOr
ApproximateEqual ClipByValue Select SelectV2
Abs Neg Exp Expm1 Log Log1p Sqrt Rsqrt Square Reciprocal Inv Sign Floor Ceil Round Rint Sin Cos
Tan Asin Acos Atan Sinh Cosh Tanh Asinh Acosh Atanh Sigmoid Erf Erfc Lgamma Digamma IsNan IsInf
IsFinite LogicalNot Invert Real Imag Conj ComplexAbs
AddN AccumulateNV2 Cast BiasAdd BiasAddV1 MatMul BatchMatMul BatchMatMulV2 BatchMatMulV3 Einsum
Cumsum Cumprod
""".split()


@pytest.mark.parametrize("op", REQUIRED_OPS)
def test_op_is_registered_by_the_math_family(op: str) -> None:
    kd = lookup(op)
    assert kd is not None
    assert kd.fn.__module__.endswith("kernels.math")


# --- TensorFlow conformance cases ----------------------------------------------------------------

# Ops this family implements that the conformance graphs use; other nodes are left unevaluated.
MATH_OPS = {
    "Cast", "AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "TruncateDiv",
    "TruncateMod", "Exp", "Log", "Sqrt", "Rsqrt", "Tanh", "Sigmoid", "Abs", "Neg", "Square",
    "Pow", "Maximum", "Minimum", "SquaredDifference", "Equal", "NotEqual", "Less", "LessEqual",
    "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "Select", "SelectV2",
    "BatchMatMulV2", "MatMul", "Cumsum",
}

# case -> the fetches computable from math kernels alone (None: every fetch).
CASES: dict[str, list[str] | None] = {
    "dag_basic": None,
    "dtypes_cast": None,
    "int_div_mod": None,
    "elementwise_math": [
        "exp:0", "log:0", "sqrt:0", "rsqrt:0", "tanh:0", "sigmoid:0", "abs:0", "neg:0",
        "square:0", "pow:0", "maximum:0", "minimum:0", "realdiv:0", "squared_difference:0"],
    "compare_select_where": [
        "eq:0", "ne:0", "lt:0", "le:0", "gt:0", "ge:0", "land:0", "lor:0", "lnot:0", "select:0",
        "select_v2:0"],
    "batch_matmul": None,
    "mlp": ["fc1:0", "gram:0", "both_t:0"],
    "reductions": ["cumsum:0", "cumsum_excl_rev:0"],
    "error_int_div_zero": None,
}


def _evaluate(case: str, feed: dict[str, str]) -> dict[str, Any]:
    """Run the graph's nodes in file order (TensorFlow writes them topologically) with invoke;
    a kernel's OpError becomes the value of its node and of everything depending on it."""
    graph = load_graphdef(str(DATA / case / "graph.pbtxt"))
    values: dict[str, Any] = {k: np.load(DATA / case / f, allow_pickle=False)
                              for k, f in feed.items()}
    for node in graph.node:
        key = node.name + ":0"
        if key in values:
            continue
        if node.op == "Const":
            values[key] = to_python(node.attr["value"])
            continue
        inputs = [i if ":" in i else i + ":0" for i in node.input if not i.startswith("^")]
        if node.op not in MATH_OPS or any(i not in values for i in inputs):
            continue
        args = [values[i] for i in inputs]
        failed = [x for x in args if isinstance(x, OpError)]
        if failed:
            values[key] = failed[0]
            continue
        attrs = {k: to_python(v, numpy_types=True) for k, v in node.attr.items()
                 if not k.startswith("_")}
        try:
            values[key] = invoke(node.op, *args, attrs=attrs)
        except OpError as e:
            values[key] = e
    return values


def _steps() -> list[Any]:
    out = []
    for case in CASES:
        spec = json.loads((DATA / case / "case.json").read_text())
        for i, step in enumerate(spec["steps"]):
            out.append(pytest.param(case, step, spec["rtol"], spec["atol"], id=f"{case}-s{i}"))
    return out


@pytest.mark.parametrize("case,step,rtol,atol", _steps())
def test_conformance_case(case: str, step: dict, rtol: float, atol: float) -> None:
    values = _evaluate(case, step["feed"])
    wanted = CASES[case]
    fetches = [f for f in step["fetch"] if wanted is None or f in wanted]
    assert fetches
    if step["expect_error"]:
        errors = [values.get(f) for f in fetches]
        assert any(isinstance(e, OpError) and e.tf_name == step["expect_error"] for e in errors)
        assert any("Integer division by zero" in str(e) for e in errors)
        return
    for f in fetches:
        assert f in values, f"{f} was not computed"
        assert not isinstance(values[f], OpError), values[f]
        expected = np.load(DATA / case / step["expect"][f], allow_pickle=False)
        check(values[f], expected, rtol, atol)


# --- binary arithmetic ---------------------------------------------------------------------------

def test_int32_add_overflow_wraps() -> None:
    check(run("AddV2", a(INT32_MAX, I32), a(1, I32)), a(INT32_MIN, I32))
    check(run("Add", a([INT32_MIN], I32), a([-1], I32)), a([INT32_MAX], I32))
    check(run("Mul", a([65536], I32), a([65536], I32)), a([0], I32))
    check(run("Sub", a(2**63 - 1, I64), a(-1, I64)), a(-(2**63), I64))


def test_uint8_and_int8_wrap_around() -> None:
    check(run("AddV2", a([250, 3], U8), a(10, U8)), a([4, 13], U8))
    check(run("Sub", a([3], U8), a([5], U8)), a([254], U8))
    check(run("Mul", a([250, 128], U8), a(3, U8)), a([238, 128], U8))
    check(run("Mul", a([100], I8), a([2], I8)), a([-56], I8))


def test_broadcasting_with_rank_mismatch() -> None:
    x = a([[[0, 1, 2]], [[10, 11, 12]]], F32)  # (2, 1, 3)
    y = a([[100], [200], [300], [400]], F32)  # (4, 1)
    r = run("AddV2", x, y)
    assert r.shape == (2, 4, 3) and r.dtype == F32
    for i in range(2):
        for j in range(4):
            for k in range(3):
                assert r[i, j, k] == x[i, 0, k] + y[j, 0]
    check(run("Mul", a(2, I32), a([[1, 2, 3]], I32)), a([[2, 4, 6]], I32))


def test_incompatible_shapes_raise_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes: \[2,3\] vs. \[4\]"):
        run("AddV2", np.zeros((2, 3), F32), np.zeros(4, F32))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        run("Less", np.zeros(2, F32), np.zeros(3, F32))
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        run("FloorDiv", np.ones(2, I32), np.ones(3, I32))


def test_empty_and_zero_size_tensors() -> None:
    check(run("AddV2", np.zeros((0, 3), F32), a([1, 2, 3], F32)), np.zeros((0, 3), F32))
    check(run("Less", np.zeros((2, 0), I32), a(1, I32)), np.zeros((2, 0), bool))
    check(run("Exp", np.zeros((0,), F16)), np.zeros((0,), F16))
    check(run("Cast", np.zeros((3, 0), F32), DstT=np.dtype(I64)), np.zeros((3, 0), I64))


def test_scalar_results_are_arrays_of_the_input_dtype() -> None:
    check(run("AddV2", a(1.5, F16), a(2.0, F16)), a(3.5, F16))
    check(run("Mul", a(3, I8), a(5, I8)), a(15, I8))
    check(run("Neg", a(3, I64)), a(-3, I64))
    check(run("Greater", a(3, I64), a(2, I64)), a(True, bool))
    check(run("IsNan", a(np.nan, F32)), a(True, bool))


def test_string_add_concatenates() -> None:
    x = np.array([b"ab", b"c"], dtype=object)
    r = run("Add", x, np.array(b"!", dtype=object))
    assert r.dtype == object and list(r) == [b"ab!", b"c!"]


# --- division and modulo -------------------------------------------------------------------------

# (x, y, floordiv, floormod, truncatediv, truncatemod), worked out by hand.
INT_DIV_TABLE = [
    (7, 3, 2, 1, 2, 1),
    (-7, 3, -3, 2, -2, -1),
    (7, -3, -3, -2, -2, 1),
    (-7, -3, 2, -1, 2, -1),
    (6, -3, -2, 0, -2, 0),
    (0, -5, 0, 0, 0, 0),
]


@pytest.mark.parametrize("dtype", [I8, I32, I64])
def test_integer_division_and_modulo_signs(dtype: Any) -> None:
    x, y = (a([row[i] for row in INT_DIV_TABLE], dtype) for i in (0, 1))
    floordiv, floormod, truncdiv, truncmod = (
        a([row[i] for row in INT_DIV_TABLE], dtype) for i in (2, 3, 4, 5))
    check(run("FloorDiv", x, y), floordiv)
    check(run("FloorMod", x, y), floormod)
    check(run("TruncateDiv", x, y), truncdiv)
    check(run("TruncateMod", x, y), truncmod)
    check(run("Mod", x, y), truncmod)
    check(run("Div", x, y), truncdiv)  # integer Div is C truncation (safe_div) in TensorFlow


_i32 = st.integers(INT32_MIN + 1, INT32_MAX)
_nonzero_i32 = _i32.filter(lambda v: v != 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_i32, _nonzero_i32), min_size=1, max_size=20))
def test_integer_division_against_python_ints(pairs: list[tuple[int, int]]) -> None:
    x = a([p[0] for p in pairs], I32)
    y = a([p[1] for p in pairs], I32)
    # Python's // and % are floor division; C truncation is the sign times |x| // |y|.
    check(run("FloorDiv", x, y), a([p // q for p, q in pairs], I32))
    check(run("FloorMod", x, y), a([p % q for p, q in pairs], I32))
    trunc = [(abs(p) // abs(q)) * (1 if (p < 0) == (q < 0) else -1) for p, q in pairs]
    check(run("TruncateDiv", x, y), a(trunc, I32))
    check(run("TruncateMod", x, y), a([p - t * q for (p, q), t in zip(pairs, trunc)], I32))


@settings(max_examples=100, deadline=None)
@given(st.lists(_i32, min_size=1024, max_size=1100), _nonzero_i32)
def test_floor_mod_of_a_large_tensor_by_one_divisor_against_python_ints(
        xs: list[int], q: int) -> None:
    # a large x and one divisor take the kernel's x - (x // y) * y path
    check(run("FloorMod", a(xs, I32), a(q, I32)), a([p % q for p in xs], I32))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-2.0e9, 2.0e9, allow_nan=False), min_size=1, max_size=20))
def test_cast_float64_to_int32_against_math_trunc(values: list[float]) -> None:
    check(cast(a(values, F64), I32), a([math.trunc(v) for v in values], I32))


def test_int_min_divided_by_minus_one_wraps() -> None:
    x, y = a([INT32_MIN], I32), a([-1], I32)
    check(run("FloorDiv", x, y), a([INT32_MIN], I32))
    check(run("TruncateDiv", x, y), a([INT32_MIN], I32))
    check(run("FloorMod", x, y), a([0], I32))
    check(run("TruncateMod", x, y), a([0], I32))


@pytest.mark.parametrize("op", ["FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod",
                                "Div", "RealDiv"])
@pytest.mark.parametrize("dtype", [I32, I64, U8])
def test_integer_division_by_zero_is_an_error(op: str, dtype: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
        run(op, a([7, -7 if dtype != U8 else 7], dtype), a([2, 0], dtype))


def test_zero_divisor_unused_by_an_empty_result_is_fine() -> None:
    check(run("FloorDiv", np.zeros((0, 2), I32), a([1, 0], I32)), np.zeros((0, 2), I32))


def test_float_division_by_zero_gives_inf_and_nan() -> None:
    check(run("RealDiv", a([1, -1, 0], F32), a([0, 0, 0], F32)), a([np.inf, -np.inf, np.nan], F32))
    check(run("Div", a([1.0], F64), a([-0.0], F64)), a([-np.inf], F64))
    check(run("FloorDiv", a([1, -1], F32), a([0, 0], F32)), a([np.inf, -np.inf], F32))
    check(run("FloorMod", a([1.0], F32), a([0.0], F32)), a([np.nan], F32))


def test_float_floor_div_is_floor_of_the_quotient() -> None:
    # 1 / 0.1 rounds to exactly 10 in float64, so TensorFlow gives 10 (Python's // gives 9).
    check(run("FloorDiv", a([1.0], F64), a([0.1], F64)), a([10.0], F64))
    check(run("FloorDiv", a([5.5, -5.5, 5.5, -5.5], F32), a([2, 2, -2, -2], F32)),
          a([2, -3, -3, 2], F32))


def test_float_floor_mod_and_fmod() -> None:
    check(run("FloorMod", a([5.5, -5.5, 5.5, -5.5], F32), a([2, 2, -2, -2], F32)),
          a([1.5, 0.5, -0.5, -1.5], F32))
    r = run("FloorMod", a([-3.0, 3.0], F32), a([1.5, -1.5], F32))
    # fmod's zero keeps the dividend's sign, and TensorFlow keeps it too.
    assert list(np.signbit(r)) == [True, False] and not r.any()
    check(run("Mod", a([-5.5, 5.5], F64), a([2, -2], F64)), a([-1.5, 1.5], F64))
    check(run("TruncateMod", a([-7.0], F32), a([3.0], F32)), a([-1.0], F32))


def test_pow() -> None:
    check(run("Pow", a([2, -3, 5], I32), a([10, 3, 0], I32)), a([1024, -27, 1], I32))
    check(run("Pow", a([2], I32), a([31], I32)), a([INT32_MIN], I32))  # wraps
    check(run("Pow", a([4.0, 0.0, -8.0], F32), a([0.5, -1.0, 1 / 3], F32)),
          a([2.0, np.inf, np.nan], F32))
    with pytest.raises(InvalidArgumentError, match="negative integer powers"):
        run("Pow", a([3, 2], I64), a([1, -1], I64))


def test_maximum_minimum_propagate_nan() -> None:
    x = a([np.nan, 1.0, 2.0, -np.inf], F32)
    y = a([1.0, np.nan, 3.0, 0.0], F32)
    check(run("Maximum", x, y), a([np.nan, np.nan, 3.0, 0.0], F32))
    check(run("Minimum", x, y), a([np.nan, np.nan, 2.0, -np.inf], F32))
    check(run("Maximum", a([-5, 7], I8), a([3, -9], I8)), a([3, 7], I8))


def test_squared_difference() -> None:
    check(run("SquaredDifference", a([1, 5], I32), a([4, 5], I32)), a([9, 0], I32))
    check(run("SquaredDifference", a([1 + 2j], C64), a([0], C64)), a([5 + 0j], C64))


def test_no_nan_variants_and_x_ops() -> None:
    check(run("DivNoNan", a([1.0, 0.0, np.nan, 6.0], F32), a([0.0, 0.0, 0.0, 3.0], F32)),
          a([0, 0, 0, 2], F32))
    check(run("MulNoNan", a([np.inf, np.nan, 2.0], F64), a([0.0, 0.0, 3.0], F64)),
          a([0, 0, 6], F64))
    check(run("Xdivy", a([0.0, 1.0, 6.0], F32), a([0.0, 0.0, 3.0], F32)),
          a([0.0, np.inf, 2.0], F32))
    check(run("Xlogy", a([0.0, 0.0, 2.0], F64), a([0.0, np.nan, math.e], F64)),
          a([0.0, 0.0, 2.0], F64), rtol=1e-15)
    check(run("Xlog1py", a([0.0, 3.0], F64), a([-1.0, math.e - 1], F64)), a([0.0, 3.0], F64),
          rtol=1e-15)


def test_atan2() -> None:
    r = run("Atan2", a([1.0, 0.0, -1.0], F64), a([-1.0, -0.0, 0.0], F64))
    check(r, a([3 * math.pi / 4, math.pi, -math.pi / 2], F64), rtol=1e-15)


def test_bitwise_and_shifts() -> None:
    check(run("BitwiseAnd", a([0b1100], U8), a([0b1010], U8)), a([0b1000], U8))
    check(run("BitwiseOr", a([0b1100], U8), a([0b1010], U8)), a([0b1110], U8))
    check(run("BitwiseXor", a([0b1100], U8), a([0b1010], U8)), a([0b0110], U8))
    check(run("LeftShift", a([1, 3], I8), a([7, 1], I8)), a([-128, 6], I8))
    # Shift amounts are clamped to [0, bits - 1].
    check(run("LeftShift", a([1, 5], I32), a([40, -3], I32)), a([INT32_MIN, 5], I32))
    check(run("RightShift", a([-8, -1, 64], I32), a([1, 100, -2], I32)), a([-4, -1, 64], I32))
    check(run("RightShift", a([255], U8), a([9], U8)), a([1], U8))


# --- comparisons, logic, select ------------------------------------------------------------------

def test_comparisons() -> None:
    x, y = a([1, 2, 3], I64), a([2, 2, 2], I64)
    check(run("Less", x, y), a([True, False, False], bool))
    check(run("LessEqual", x, y), a([True, True, False], bool))
    check(run("Greater", x, y), a([False, False, True], bool))
    check(run("GreaterEqual", x, y), a([False, True, True], bool))
    check(run("Equal", x, y), a([False, True, False], bool))
    check(run("NotEqual", x, y), a([True, False, True], bool))
    n = a([np.nan], F32)
    check(run("Equal", n, n), a([False], bool))
    check(run("NotEqual", n, n), a([True], bool))


def test_equal_incompatible_shape_error_attr() -> None:
    x, y = np.zeros(2, F32), np.zeros(3, F32)
    check(run("Equal", x, y, incompatible_shape_error=False), a(False, bool))
    check(run("NotEqual", x, y, incompatible_shape_error=False), a(True, bool))
    with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes: \[2\] vs. \[3\]"):
        run("Equal", x, y, incompatible_shape_error=True)
    # Broadcastable shapes still compare elementwise.
    check(run("Equal", a([[1], [2]], I32), a([1, 2], I32), incompatible_shape_error=False),
          a([[True, False], [False, True]], bool))


def test_equal_on_strings() -> None:
    x = np.array([b"a", b"bc"], dtype=object)
    y = np.array([b"a", b"b"], dtype=object)
    check(run("Equal", x, y), a([True, False], bool))


def test_logical_ops_broadcast() -> None:
    x = a([[True], [False]], bool)
    y = a([True, False], bool)
    check(run("LogicalAnd", x, y), a([[True, False], [False, False]], bool))
    check(run("LogicalOr", x, y), a([[True, True], [True, False]], bool))
    check(run("LogicalNot", y), a([False, True], bool))


def test_approximate_equal() -> None:
    x = a([1.0, 1.0, 1.0], F32)
    y = a([1.000001, 1.1, 0.999995], F32)
    check(run("ApproximateEqual", x, y), a([True, False, True], bool))
    check(run("ApproximateEqual", x, y, tolerance=0.5), a([True, True, True], bool))
    with pytest.raises(InvalidArgumentError, match="same shape"):
        run("ApproximateEqual", x, np.zeros(2, F32))


def test_clip_by_value() -> None:
    t = a([-2.0, 0.5, 3.0, np.nan], F32)
    check(run("ClipByValue", t, a(0, F32), a(1, F32)), a([0, 0.5, 1, np.nan], F32))
    check(run("ClipByValue", a([1, 5, 9], I32), a([2, 2, 2], I32), a(6, I32)), a([2, 5, 6], I32))
    with pytest.raises(InvalidArgumentError, match="clip_value_min"):
        run("ClipByValue", a([1, 5, 9], I32), a([2, 2], I32), a(6, I32))


def test_select_v1_forms() -> None:
    t = a([[1, 2], [3, 4], [5, 6]], I32)
    e = a([[-1, -2], [-3, -4], [-5, -6]], I32)
    check(run("Select", a(True, bool), t, e), t)
    check(run("Select", a(False, bool), t, e), e)
    # A vector condition picks whole rows.
    check(run("Select", a([True, False, True], bool), t, e), a([[1, 2], [-3, -4], [5, 6]], I32))
    same = a([[True, False], [False, True], [True, True]], bool)
    check(run("Select", same, t, e), a([[1, -2], [-3, 4], [5, 6]], I32))
    with pytest.raises(InvalidArgumentError, match="Number of batches"):
        run("Select", a([True, False], bool), t, e)
    with pytest.raises(InvalidArgumentError, match="'then' and 'else'"):
        run("Select", a(True, bool), t, e[:2])
    with pytest.raises(InvalidArgumentError, match="'condition' and 'then'"):
        run("Select", np.ones((2, 2), bool), t, e)


def test_select_v2_broadcasts() -> None:
    cond = a([[True], [False]], bool)
    t = a([[1.0, 2.0, 3.0]], F32)
    check(run("SelectV2", cond, t, a(0.0, F32)), a([[1, 2, 3], [0, 0, 0]], F32))
    with pytest.raises(InvalidArgumentError, match="must be broadcastable"):
        run("SelectV2", np.ones(2, bool), np.ones(3, F32), np.ones(3, F32))


# --- unary ---------------------------------------------------------------------------------------

def test_round_is_bankers_rounding_and_ints_unchanged() -> None:
    x = a([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.0], F32)
    expected = a([0, 2, 2, -0.0, -2, 2, -3, 3], F32)
    check(run("Round", x), expected)
    check(run("Rint", x.astype(F64)), expected.astype(F64))
    check(run("Round", a([-3, 7], I32)), a([-3, 7], I32))


def test_floor_ceil_sign() -> None:
    x = a([-1.5, -0.0, 0.2, 2.0], F64)
    check(run("Floor", x), a([-2, -0.0, 0, 2], F64))
    check(run("Ceil", x), a([-1, -0.0, 1, 2], F64))
    check(run("Sign", a([-3, 0, 2], I32)), a([-1, 0, 1], I32))
    check(run("Sign", a([-0.5, 0.0, 3.0], F32)), a([-1, 0, 1], F32))


def test_reciprocal() -> None:
    check(run("Reciprocal", a([1, -1, 2, -2], I32)), a([1, -1, 0, 0], I32))
    check(run("Inv", a([4.0, 0.0], F32)), a([0.25, np.inf], F32))
    with pytest.raises(InvalidArgumentError, match="Integer division by zero"):
        run("Reciprocal", a([1, 0], I64))


def test_sqrt_rsqrt_log_of_bad_values_are_silent_nan_inf() -> None:
    check(run("Sqrt", a([4.0, -1.0], F32)), a([2.0, np.nan], F32))
    check(run("Rsqrt", a([4.0, 0.0], F32)), a([0.5, np.inf], F32))
    check(run("Log", a([0.0, -1.0, 1.0], F64)), a([-np.inf, np.nan, 0.0], F64))
    check(run("Exp", a([1000.0], F32)), a([np.inf], F32))


MATH_REFERENCE = [
    ("Exp", math.exp, [-3.0, 0.0, 0.5, 10.0]),
    ("Expm1", math.expm1, [-1e-10, 1e-10, 0.5]),
    ("Log", math.log, [1e-5, 0.5, 7.0]),
    ("Log1p", math.log1p, [-0.5, 1e-12, 3.0]),
    ("Sin", math.sin, [-2.0, 0.0, 1.0]),
    ("Cos", math.cos, [-2.0, 0.0, 1.0]),
    ("Tan", math.tan, [-1.0, 0.3]),
    ("Asin", math.asin, [-1.0, 0.25, 1.0]),
    ("Acos", math.acos, [-1.0, 0.25, 1.0]),
    ("Atan", math.atan, [-5.0, 0.0, 2.0]),
    ("Sinh", math.sinh, [-2.0, 0.5]),
    ("Cosh", math.cosh, [-2.0, 0.5]),
    ("Tanh", math.tanh, [-20.0, -0.5, 0.0, 3.0]),
    ("Asinh", math.asinh, [-2.0, 0.5]),
    ("Acosh", math.acosh, [1.0, 2.5]),
    ("Atanh", math.atanh, [-0.5, 0.9]),
    ("Sqrt", math.sqrt, [0.0, 2.0, 1e10]),
    ("Abs", abs, [-2.5, 0.0, 3.0]),
    ("Neg", lambda v: -v, [-2.5, 3.0]),
    ("Square", lambda v: v * v, [-3.0, 1.5]),
]


@pytest.mark.parametrize("op,ref,xs", MATH_REFERENCE, ids=[r[0] for r in MATH_REFERENCE])
def test_unary_against_python_math(op: str, ref: Any, xs: list[float]) -> None:
    check(run(op, a(xs, F64)), a([ref(v) for v in xs], F64), rtol=1e-14, atol=1e-300)
    check(run(op, a(xs, F32)), a([ref(v) for v in xs], F32), rtol=1e-6, atol=1e-30)


def test_unary_keeps_half_and_small_int_dtypes() -> None:
    check(run("Exp", a([0.0, 1.0], F16)), a([1.0, math.e], F16), rtol=1e-3)
    check(run("Abs", a([-128, -5], I8)), a([-128, 5], I8))  # |INT8_MIN| wraps
    check(run("Neg", a([INT32_MIN], I32)), a([INT32_MIN], I32))
    check(run("Square", a([65536], I32)), a([0], I32))


def test_sigmoid_is_numerically_stable() -> None:
    check(run("Sigmoid", a([-1000.0, 0.0, 1000.0], F32)), a([0.0, 0.5, 1.0], F32))
    check(run("Sigmoid", a([-50.0, 2.0], F64)),
          a([math.exp(-50) / (1 + math.exp(-50)), 1 / (1 + math.exp(-2))], F64), rtol=1e-14)


def test_erf_and_erfc_match_python_math() -> None:
    xs = np.concatenate([np.linspace(-6, 6, 2401), [-0.0, 1e-300, 1.99999, 2.0, 2.00001, 26.0]])
    erf = run("Erf", xs)
    erfc = run("Erfc", xs)
    ref_erf = np.array([math.erf(v) for v in xs])
    ref_erfc = np.array([math.erfc(v) for v in xs])
    assert erf.dtype == F64 and erfc.dtype == F64
    np.testing.assert_allclose(erf, ref_erf, rtol=1e-7, atol=1e-300)
    np.testing.assert_allclose(erfc, ref_erfc, rtol=1e-7, atol=1e-300)
    assert np.signbit(run("Erf", a(-0.0, F64)))
    check(run("Erf", a([np.inf, -np.inf, np.nan], F32)), a([1, -1, np.nan], F32))
    check(run("Erfc", a([np.inf, -np.inf, np.nan], F32)), a([0, 2, np.nan], F32))
    check(run("Erf", a([0.5], F32)), a([math.erf(0.5)], F32), rtol=1e-6)


def test_single_precision_erf_and_erfc_are_within_6e_7_of_python_math() -> None:
    # float32 runs its own one-pass form (math.py): relative error at most 5.2e-7 on [-12, 12]
    xs = np.concatenate([np.linspace(-12, 12, 48001), [-0.0, 1e-30, 1e-8, 0.49999, 0.5,
                                                        0.50001, 10.9, 11.0, 11.5, 30.0]])
    xs = xs.astype(F32)
    erf, erfc = run("Erf", xs), run("Erfc", xs)
    assert erf.dtype == F32 and erfc.dtype == F32
    ref_erf = np.array([math.erf(v) for v in xs.astype(F64)])
    ref_erfc = np.array([math.erfc(v) for v in xs.astype(F64)])
    np.testing.assert_allclose(erf, ref_erf, rtol=6e-7, atol=1e-45)
    # below float32's normal range the result is a subnormal: absolute error only
    normal = ref_erfc > np.finfo(F32).tiny
    np.testing.assert_allclose(erfc[normal], ref_erfc[normal], rtol=6e-7)
    np.testing.assert_allclose(erfc[~normal], ref_erfc[~normal], rtol=0, atol=2e-38)
    h = xs.astype(np.float16)                   # float16 runs in float32 too
    half = run("Erfc", h)
    assert half.dtype == np.float16
    ref_half = np.array([math.erfc(v) for v in h.astype(F64)]).astype(np.float16)
    np.testing.assert_allclose(half, ref_half, rtol=1e-3, atol=1e-7)


def test_lgamma_matches_python_math() -> None:
    xs = [0.5, 1.0, 2.0, 3.5, 1e-300, 10.0, 171.5, 1e300, -0.5, -2.5, -7.25, -1e5 + 0.5]
    r = run("Lgamma", a(xs, F64))
    np.testing.assert_allclose(r, [math.lgamma(v) for v in xs], rtol=1e-12, atol=1e-14)
    check(run("Lgamma", a([0.0, -1.0, -3.0, np.inf, -np.inf, np.nan], F32)),
          a([np.inf, np.inf, np.inf, np.inf, np.inf, np.nan], F32))


def test_digamma_known_values() -> None:
    euler = 0.5772156649015329
    xs = a([1.0, 0.5, 2.0, 0.25, -0.5, 100.0], F64)
    expected = [-euler, -euler - 2 * math.log(2), 1 - euler,
                -euler - math.pi / 2 - 3 * math.log(2),  # Gauss's digamma theorem
                -euler - 2 * math.log(2) + 2,  # psi(1 - x) - pi cot(pi x) at x = -0.5
                4.600161852738087]
    np.testing.assert_allclose(run("Digamma", xs), expected, rtol=1e-12)
    r = run("Digamma", a([0.0, -2.0], F32))
    assert r.dtype == F32 and np.isnan(r).all()


def test_float_predicates() -> None:
    x = a([np.nan, np.inf, -np.inf, 1.0], F32)
    check(run("IsNan", x), a([True, False, False, False], bool))
    check(run("IsInf", x), a([False, True, True, False], bool))
    check(run("IsFinite", x), a([False, False, False, True], bool))


def test_invert() -> None:
    check(run("Invert", a([0, 5], U8)), a([255, 250], U8))
    check(run("Invert", a([5, -1], I8)), a([-6, 0], I8))


def test_complex_parts() -> None:
    z = a([3 + 4j, -1 - 2j], C64)
    check(run("Real", z, Tout=np.dtype(F32)), a([3, -1], F32))
    check(run("Imag", z, Tout=np.dtype(F32)), a([4, -2], F32))
    check(run("ComplexAbs", z, Tout=np.dtype(F32)), a([5, math.sqrt(5)], F32), rtol=1e-6)
    check(run("Conj", z), a([3 - 4j, -1 + 2j], C64))
    check(run("Real", z.astype(C128), Tout=np.dtype(F64)), a([3, -1], F64))


# --- AddN ----------------------------------------------------------------------------------------

def test_add_n() -> None:
    x = a([[1, 2], [3, 4]], F32)
    check(run("AddN", x, x, a([[0.5, 0], [0, 0]], F32)), a([[2.5, 4], [6, 8]], F32))
    check(run("AddN", x), x)
    check(run("AddN", a(INT32_MAX, I32), a(1, I32), a(1, I32)), a(INT32_MIN + 1, I32))
    check(run("AccumulateNV2", a([1, 2], I64), a([3, 4], I64), shape=(2,)), a([4, 6], I64))
    with pytest.raises(InvalidArgumentError, match="same shape"):
        run("AddN", x, np.zeros(2, F32))


def test_add_n_large_fan_in() -> None:
    xs = [a([i, 2 * i], I64) for i in range(1000)]
    check(run("AddN", *xs), a([499500, 999000], I64))


def test_kernels_do_not_modify_their_inputs() -> None:
    x = a([1.0, 2.0, 3.0], F32)
    keep = x.copy()
    run("Cumsum", x, a(0, I32), exclusive=True, reverse=True)
    run("AddN", x, x, x)
    run("Erf", x)
    run("Cast", x, DstT=np.dtype(F16), Truncate=True)
    check(x, keep)


# --- Cast ----------------------------------------------------------------------------------------

def cast(x: np.ndarray, dst: Any, truncate: bool = False) -> Any:
    return run("Cast", x, SrcT=x.dtype, DstT=np.dtype(dst), Truncate=truncate)


def test_cast_float_to_int_truncates_toward_zero() -> None:
    check(cast(a([-2.75, 2.75, -0.5, 3.9], F32), I32), a([-2, 2, 0, 3], I32))
    check(cast(a([-2.75, 1e12], F64), I64), a([-2, 10**12], I64))


def test_cast_nan_and_out_of_range_to_int32() -> None:
    # TensorFlow's CPU kernel gives INT_MIN here (the x86 conversion result).
    check(cast(a([np.nan, 3e9, -3e9], F32), I32), a([INT32_MIN] * 3, I32))


def test_cast_bool_and_to_bool() -> None:
    check(cast(a([True, False], bool), F32), a([1.0, 0.0], F32))
    check(cast(a([True, False], bool), I64), a([1, 0], I64))
    check(cast(a([0.0, -0.0, 0.1, np.nan, -np.inf], F32), bool),
          a([False, False, True, True, True], bool))
    check(cast(a([0, 7, -1], I32), bool), a([False, True, True], bool))


def test_cast_int_narrowing_wraps() -> None:
    check(cast(a([300, -1, 255], I32), U8), a([44, 255, 255], U8))
    check(cast(a([2**32 + 5, -(2**31) - 1], I64), I32), a([5, INT32_MAX], I32))
    check(cast(a([250], U8), I8), a([-6], I8))


def test_cast_complex_drops_imaginary_part() -> None:
    check(cast(a([1.5 + 2j, -3 - 1j], C64), F32), a([1.5, -3], F32))
    check(cast(a([2.7 + 9j], C128), I32), a([2], I32))
    check(cast(a([1.5, -2], F32), C64), a([1.5 + 0j, -2 + 0j], C64))


def test_cast_double_to_half_rounds_through_float() -> None:
    # 1 + 2^-11 + 2^-40 rounds to the float 1 + 2^-11, a tie that half rounds to even (1.0).
    # Rounding the double straight to half would give 1 + 2^-10.
    check(cast(a([1 + 2**-11 + 2**-40], F64), F16), a([1.0], F16))


def test_cast_truncate_attr_drops_mantissa_bits() -> None:
    x = a([1 + 2**-11 + 2**-20, -(1 + 2**-11 + 2**-20)], F32)
    check(cast(x, F16), a([1 + 2**-10, -(1 + 2**-10)], F16))
    check(cast(x, F16, truncate=True), a([1.0, -1.0], F16))
    y = a([1 + 2**-24 + 2**-40], F64)
    check(cast(y, F32), a([1 + 2**-23], F32))
    check(cast(y, F32, truncate=True), a([1.0], F32))


def test_cast_same_type_and_strings() -> None:
    x = a([1.5, 2.5], F32)
    check(cast(x, F32), x)
    with pytest.raises(UnimplementedError):
        cast(np.array([b"1"], dtype=object), I32)
    with pytest.raises(UnimplementedError):
        cast(a([1], I32), object)


# --- BiasAdd -------------------------------------------------------------------------------------

def test_bias_add_nhwc_and_nchw() -> None:
    bias = a([1, 2, 3], F32)
    r = run("BiasAdd", np.zeros((1, 2, 2, 3), F32), bias)
    check(r, np.broadcast_to(a([1, 2, 3], F32), (1, 2, 2, 3)).copy())
    r = run("BiasAdd", np.zeros((2, 3, 2, 2), F32), bias, data_format="NCHW")
    assert r.shape == (2, 3, 2, 2) and r.dtype == F32
    for c in range(3):
        assert (r[:, c] == c + 1).all()
    r = run("BiasAdd", np.zeros((1, 3, 4), I32), a([5, 6, 7], I32), data_format="NCHW")
    check(r[0, :, 0], a([5, 6, 7], I32))
    check(run("BiasAdd", a([[1, 1, 1]], F64), a([1, 2, 3], F64)), a([[2, 3, 4]], F64))
    check(run("BiasAddV1", np.zeros((2, 2), F32), a([1, 2], F32)), a([[1, 2], [1, 2]], F32))


def test_bias_add_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="at least 2D"):
        run("BiasAdd", np.zeros(3, F32), np.zeros(3, F32))
    with pytest.raises(InvalidArgumentError, match="Biases must be 1D"):
        run("BiasAdd", np.zeros((2, 3), F32), np.zeros((1, 3), F32))
    with pytest.raises(InvalidArgumentError, match="as many biases"):
        run("BiasAdd", np.zeros((2, 3), F32), np.zeros(2, F32))
    with pytest.raises(InvalidArgumentError, match="as many biases"):
        run("BiasAdd", np.zeros((2, 3, 4), F32), np.zeros(4, F32), data_format="NCHW")


# --- matrix products -----------------------------------------------------------------------------

def test_matmul_transpose_flags() -> None:
    x = a([[1, 2], [3, 4]], F32)
    y = a([[5, 6], [7, 8]], F32)
    check(run("MatMul", x, y), a([[19, 22], [43, 50]], F32))
    check(run("MatMul", x, y, transpose_a=True), a([[26, 30], [38, 44]], F32))
    check(run("MatMul", x, y, transpose_b=True), a([[17, 23], [39, 53]], F32))
    check(run("MatMul", x, y, transpose_a=True, transpose_b=True), a([[23, 31], [34, 46]], F32))


def test_matmul_ints_half_and_empty() -> None:
    check(run("MatMul", a([[1, 2, 3]], I32), a([[4], [5], [6]], I32)), a([[32]], I32))
    check(run("MatMul", a([[65536]], I32), a([[65536]], I32)), a([[0]], I32))
    check(run("MatMul", a([[1.5, 2]], F16), a([[2], [0.25]], F16)), a([[3.5]], F16))
    check(run("MatMul", np.zeros((2, 0), F32), np.zeros((0, 3), F32)), np.zeros((2, 3), F32))
    check(run("MatMul", np.zeros((0, 2), F64), np.ones((2, 3), F64)), np.zeros((0, 3), F64))


def test_matmul_errors() -> None:
    with pytest.raises(InvalidArgumentError, match=r"Matrix size-incompatible: In\[0\]: \[2,3\]"):
        run("MatMul", np.zeros((2, 3), F32), np.zeros((2, 3), F32))
    with pytest.raises(InvalidArgumentError, match="not a matrix"):
        run("MatMul", np.zeros(3, F32), np.zeros((3, 3), F32))


def test_batch_matmul_v1_needs_equal_batch_dims() -> None:
    x = np.stack([np.eye(2, dtype=F32), 2 * np.eye(2, dtype=F32)])
    y = a([[[1, 2], [3, 4]], [[1, 0], [0, 1]]], F32)
    check(run("BatchMatMul", x, y), a([[[1, 2], [3, 4]], [[2, 0], [0, 2]]], F32))
    with pytest.raises(InvalidArgumentError, match="batch dimensions"):
        run("BatchMatMul", np.zeros((2, 2, 2), F32), np.zeros((1, 2, 2), F32))
    with pytest.raises(InvalidArgumentError, match="ndims must be >= 2"):
        run("BatchMatMulV2", np.zeros(2, F32), np.zeros((2, 2), F32))


def test_batch_matmul_v2_broadcasts_and_adjoints() -> None:
    x = a([[[1, 2]], [[3, 4]]], F64)  # (2, 1, 2)
    y = a([[1], [1]], F64)  # (2, 1): broadcast over the batch
    check(run("BatchMatMulV2", x, y), a([[[3]], [[7]]], F64))
    z = a([[[1j]]], C64)
    check(run("BatchMatMulV2", z, z), a([[[-1 + 0j]]], C64))
    check(run("BatchMatMulV2", z, z, adj_x=True), a([[[1 + 0j]]], C64))  # conj(i) * i
    with pytest.raises(InvalidArgumentError, match="compatible batch dimensions"):
        run("BatchMatMulV2", np.zeros((2, 1, 1), F32), np.zeros((3, 1, 1), F32))
    with pytest.raises(InvalidArgumentError, match="size-incompatible"):
        run("BatchMatMulV2", np.zeros((2, 1, 3), F32), np.zeros((2, 2, 1), F32))


def test_batch_matmul_v3_output_type() -> None:
    x = a([[[100, 100]]], I8)
    y = a([[[100], [100]]], I8)
    check(run("BatchMatMulV3", x, y, Tout=np.dtype(I32)), a([[[20000]]], I32))


def test_einsum() -> None:
    x = a([[1, 2], [3, 4]], F32)
    y = a([[5, 6], [7, 8]], F32)
    check(run("Einsum", x, y, equation="ij,jk->ik"), a([[19, 22], [43, 50]], F32))
    check(run("Einsum", x, equation="ij->ji"), a([[1, 3], [2, 4]], F32))
    check(run("Einsum", x, equation="ii->i"), a([1, 4], F32))
    check(run("Einsum", a([1, 2, 3], I32), a([4, 5, 6], I32), equation="i,i->"), a(32, I32))
    b = np.stack([x, y])
    check(run("Einsum", b, y, equation="...ij,jk->...ik"),
          a([[[19, 22], [43, 50]], [[67, 78], [91, 106]]], F32))
    with pytest.raises(InvalidArgumentError, match="->"):
        run("Einsum", x, y, equation="ij,jk")
    with pytest.raises(InvalidArgumentError):
        run("Einsum", x, np.zeros((3, 3), F32), equation="ij,jk->ik")


# --- scans ---------------------------------------------------------------------------------------

def test_cumsum_axes_and_flags() -> None:
    x = a([[1, 2, 3], [4, 5, 6]], I32)
    check(run("Cumsum", x, a(-1, I32)), a([[1, 3, 6], [4, 9, 15]], I32))
    check(run("Cumsum", x, a(0, I64)), a([[1, 2, 3], [5, 7, 9]], I32))
    v = a([1, 2, 3], F32)
    check(run("Cumsum", v, a(0, I32), exclusive=True), a([0, 1, 3], F32))
    check(run("Cumsum", v, a(0, I32), reverse=True), a([6, 5, 3], F32))
    check(run("Cumsum", v, a(0, I32), exclusive=True, reverse=True), a([5, 3, 0], F32))


def test_cumprod() -> None:
    v = a([1, 2, 3, 4], I64)
    check(run("Cumprod", v, a(0, I32)), a([1, 2, 6, 24], I64))
    check(run("Cumprod", v, a(-1, I32), exclusive=True), a([1, 1, 2, 6], I64))
    check(run("Cumprod", v, a(0, I32), reverse=True), a([24, 24, 12, 4], I64))


def test_cumsum_keeps_small_int_dtype_and_wraps() -> None:
    check(run("Cumsum", a([100, 100], I8), a(0, I32)), a([100, -56], I8))


def test_cumsum_empty_and_errors() -> None:
    check(run("Cumsum", np.zeros((0, 3), F32), a(0, I32), exclusive=True), np.zeros((0, 3), F32))
    with pytest.raises(InvalidArgumentError, match=r"range \[-2, 2\), but got 2"):
        run("Cumsum", np.zeros((2, 2), F32), a(2, I32))
    with pytest.raises(InvalidArgumentError, match="scalar"):
        run("Cumsum", np.zeros((2, 2), F32), a([0], I32))
