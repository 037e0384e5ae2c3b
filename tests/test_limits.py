"""Output-size estimators (executor/limits.py) and the Const-size rule (graphdef/tensors.py).

Each estimator is checked against the real output of its kernel on ordinary inputs: the
bound must be at least what the kernel produced (counted independently here: ``nbytes`` of
numeric arrays, the bytes of each string plus its 8-byte pointer), and not so loose that an
ordinary graph would be refused. Then a Session with a budget refuses the hostile sizes
before allocating, naming the node, and runs the ordinary ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from cputime import cpu_seconds

from dfg.executor import Session
from dfg.executor.kernel_call import bind_op, context, run_once
from dfg.executor.kernels.registry import complete_attrs
from dfg.graphdef import tensors
from dfg.graphdef.errors import InvalidArgumentError, ResourceExhaustedError
from dfg.schemas import graph_pb2, types_pb2

S = np.array  # short


def strs(*vals: bytes | str, shape: tuple | None = None) -> np.ndarray:
    a = np.empty(len(vals), dtype=object)
    a[:] = [v.encode() if isinstance(v, str) else v for v in vals]
    return a.reshape(shape) if shape is not None else a


def true_bytes(out: Any) -> int:
    """What the outputs hold: numeric bytes, or one pointer per string element plus the
    bytes of each distinct string object."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    n = 0
    for o in outs:
        if not isinstance(o, np.ndarray):
            continue
        if o.dtype.kind == "O":
            objs = {id(v): v for v in o.reshape(-1).tolist()}
            n += sum(len(v) for v in objs.values()) + 8 * o.size
        else:
            n += o.nbytes
    return n


def bound_and_true(op: str, *inputs: Any, **attrs: Any) -> tuple[int, int]:
    args = [x if isinstance(x, np.ndarray) else np.asarray(x) for x in inputs]
    k = bind_op(op, complete_attrs(op, dict(attrs), args))
    assert k.size_check is not None, f"{op} has no estimator"
    bound = k.size_check(k, list(args))
    out = run_once(k, list(args), context(k, None, {}))
    return bound, true_bytes(out)


def xla_proto(fields: dict[int, list[int]]) -> bytes:
    """An xla dimension-numbers proto of packed int64 fields, as tf2xla serializes it."""
    def varint(v: int) -> bytes:
        v &= (1 << 64) - 1
        out = b""
        while True:
            byte, v = v & 0x7F, v >> 7
            out += bytes([byte | (0x80 if v else 0)])
            if not v:
                return out

    buf = b""
    for field, vals in fields.items():
        body = b"".join(varint(v) for v in vals)
        buf += varint(field << 3 | 2) + varint(len(body)) + body
    return buf


def _window_max():
    """The max computation of the jax2tf CNN case, as a Session hands it to its kernel."""
    from pathlib import Path

    from dfg.graphdef.attrs import to_python
    from dfg.graphdef.functions import attach_bodies
    from dfg.graphdef.io import load_graph

    gd = attach_bodies(load_graph(Path(__file__).resolve().parent / "data" / "jax2tf"
                                  / "jax2tf_cnn" / "graph.pbtxt").graph_def)
    nd = next(n for n in gd.node if n.op == "XlaReduceWindow")
    return to_python(nd.attr["computation"])


F = np.float32
I32 = np.int32
I64 = np.int64

# op, inputs, attrs: ordinary uses of every estimated op
CASES: list[tuple[str, tuple, dict]] = [
    ("Fill", (S([2, 3], I32), S(1.5, F)), {}),
    ("Complex", (np.ones((3, 1), F), np.ones((1, 4), F)), {"Tout": np.dtype(np.complex64)}),
    ("FFTND", (np.ones((2, 3), np.complex64), S([4, 6], I32), S([0, 1], I32)), {}),
    ("IFFTND", (np.ones((2, 3), np.complex64), S([5], I32), S([-1], I32)), {}),
    ("RFFTND", (np.ones((2, 8), F), S([4], I32), S([-1], I32)),
     {"Tcomplex": np.dtype(np.complex64)}),
    ("IRFFTND", (np.ones((2, 5), np.complex64), S([8], I32), S([-1], I32)),
     {"Treal": np.dtype(F)}),
    ("AudioSpectrogram", (np.ones((40, 2), F),), {"window_size": 8, "stride": 1,
                                                  "magnitude_squared": False}),
    ("Fill", (S([4], I32), S(b"abc", dtype=object)), {}),
    ("BroadcastTo", (S([1.0, 2.0, 3.0], F), S([4, 3], I32)), {}),
    ("Tile", (S([[1, 2]], I32), S([3, 2], I32)), {}),
    ("Tile", (strs("ab", "c"), S([5], I32)), {}),
    ("Range", (S(0, I32), S(10, I32), S(3, I32)), {}),
    ("Range", (S(1.0, F), S(0.0, F), S(-0.25, F)), {}),
    ("LinSpace", (S(0.0, F), S(1.0, F), S(7, I32)), {}),
    ("Pad", (np.ones((2, 3), F), S([[1, 2], [0, 3]], I32)), {}),
    ("PadV2", (np.ones((2, 3), F), S([[1, 1], [2, 2]], I32), S(0.5, F)), {}),
    ("MirrorPad", (np.ones((3, 3), F), S([[1, 2], [2, 1]], I32)), {"mode": "REFLECT"}),
    ("SpaceToBatchND", (np.ones((1, 4, 4, 1), F), S([2, 2], I32), S([[1, 1], [1, 1]], I32)),
     {}),
    ("OneHot", (S([0, 2, 1], I32), S(5, I32), S(1.0, F), S(0.0, F)), {"axis": -1}),
    ("RandomUniform", (S([3, 4], I32),), {"dtype": np.dtype(F), "seed": 1, "seed2": 2}),
    ("RandomStandardNormal", (S([5], I32),), {"dtype": np.dtype(np.float64), "seed": 1,
                                              "seed2": 2}),
    ("TruncatedNormal", (S([2, 2], I32),), {"dtype": np.dtype(F), "seed": 1, "seed2": 2}),
    ("RandomUniformInt", (S([6], I32), S(0, I64), S(9, I64)), {"seed": 1, "seed2": 2}),
    ("Multinomial", (np.zeros((2, 3), F), S(4, I32)), {"seed": 1, "seed2": 2,
                                                     "output_dtype": np.dtype(I64)}),
    ("SparseToDense", (S([[0, 1], [2, 3]], I64), S([3, 4], I64), S([5.0, 6.0], F), S(0.0, F)),
     {}),
    ("ScatterNd", (S([[1], [3]], I32), S([9.0, 10.0], F), S([6], I32)), {}),
    ("UnsortedSegmentSum", (np.ones((4, 2), F), S([0, 2, 2, 5], I32), S(7, I32)), {}),
    ("SparseSegmentSumWithNumSegments",
     (np.ones((3, 2), F), S([0, 1, 2], I32), S([0, 0, 3], I32), S(6, I32)), {}),
    ("Bincount", (S([1, 1, 4], I32), S(8, I32), np.zeros(0, F)), {}),
    ("DenseBincount", (S([[1, 2], [0, 0]], I32), S(5, I32), np.zeros(0, F)), {}),
    ("MatrixDiag", (np.ones((2, 3), F),), {}),
    ("Diag", (np.ones((2, 2), F),), {}),
    ("MatrixDiagV3", (np.ones((2, 3), F), S(1, I32), S(-1, I32), S(-1, I32), S(0.0, F)), {}),
    ("MatrixDiagV3", (np.ones((2, 3), F), S([-1, 0], I32), S(4, I32), S(3, I32), S(0.0, F)),
     {}),
    ("Gather", (np.ones((5, 3), F), S([0, 4, 4, 1], I32)), {}),
    ("GatherV2", (np.ones((5, 3), F), S([[0, 2], [1, 1]], I32), S(1, I32)), {}),
    ("GatherNd", (np.ones((4, 5, 6), F), S([[0, 1], [3, 4], [2, 2]], I32)), {}),
    ("MatMul", (np.ones((3, 4), F), np.ones((5, 4), F)), {"transpose_b": True}),
    ("BatchMatMulV2", (np.ones((2, 1, 3, 4), F), np.ones((5, 4, 2), F)), {}),
    ("Einsum", (np.ones((3, 4), F), np.ones((4, 5), F)), {"equation": "ij,jk->ik"}),
    ("Einsum", (np.ones((2, 3, 4), F), np.ones((2, 4, 5), F)), {"equation": "...ij,...jk->...ik"}),
    ("Einsum", (np.ones(3, F), np.ones(4, F)), {"equation": "i,j->ij"}),
    ("AddV2", (np.ones((4, 1), F), np.ones((1, 5), F)), {}),
    ("Less", (np.ones((4, 1), F), np.ones((3, 1, 5), F)), {}),
    ("SelectV2", (np.ones((4, 1), bool), np.ones((1, 5), F), S(0.0, F)), {}),
    ("ResizeBilinear", (np.ones((1, 2, 3, 2), F), S([5, 7], I32)), {}),
    ("ResizeNearestNeighbor", (np.ones((1, 2, 3, 2), np.uint8), S([4, 4], I32)), {}),
    ("ResizeBicubic", (np.ones((1, 4, 4, 1), F), S([6, 3], I32)), {}),
    ("ResizeArea", (np.ones((2, 4, 4, 1), F), S([2, 3], I32)), {}),
    ("CropAndResize", (np.ones((1, 4, 4, 2), F), S([[0, 0, 1, 1], [0.2, 0.2, .8, .8]], F),
                       S([0, 0], I32), S([3, 5], I32)), {}),
    ("SparseTensorDenseMatMul", (S([[0, 1], [2, 0]], I64), S([1.0, 2.0], F), S([3, 2], I64),
                                 np.ones((2, 4), F)), {}),
    ("Conv2D", (np.ones((1, 5, 5, 2), F), np.ones((3, 3, 2, 4), F)),
     {"strides": [1, 1, 1, 1], "padding": "SAME"}),
    ("Conv2D", (np.ones((1, 5, 5, 2), F), np.ones((3, 3, 2, 4), F)),
     {"strides": [1, 2, 2, 1], "padding": "EXPLICIT",
      "explicit_paddings": [0, 0, 2, 3, 1, 4, 0, 0]}),
    ("DepthwiseConv2dNative", (np.ones((1, 4, 4, 2), F), np.ones((2, 2, 2, 3), F)),
     {"strides": [1, 1, 1, 1], "padding": "VALID"}),
    ("AsString", (S([1.5, -2.25, 1e30, np.inf], F),), {}),
    ("AsString", (S([3, -40000], I64),), {"width": 12, "fill": "0"}),
    ("AsString", (S([1 + 2j], np.complex64),), {"precision": 3}),
    ("AsString", (S([1e300, -5.0], np.float64),), {"scientific": True}),
    ("AsString", (S([True, False]),), {}),
    ("AsString", (strs("a", "bcd"),), {"width": 9}),
    ("StringJoin", (strs("a", "bb", "ccc"), strs("x", shape=()), strs("1", "22", "333")),
     {"separator": "--", "N": 3}),
    ("StringJoin", (strs("ab", shape=()), strs("c", "de")), {"separator": "", "N": 2}),
    ("Substr", (strs("hello", "world!"), S([1, 2], I32), S([3, 10], I32)), {}),
    ("Substr", (strs("hello", shape=()), S([0, 1, 2], I32), S([5, 1, 2], I32)), {}),
    ("StringSplit", (strs("a b c", "", "d"), strs(" ", shape=())), {}),
    ("StringSplit", (strs("abc", "de"), strs("", shape=())), {}),
    ("StringSplitV2", (strs("a,b,,c", "x"), strs(",", shape=())), {}),
    ("ReduceJoin", (strs("a", "bc", "d", "ef", shape=(2, 2)), S([1], I32)), {"separator": "+"}),
    ("UnsortedSegmentJoin", (strs("a", "bc", "d"), S([0, 3, 0], I32), S(5, I32)),
     {"separator": ", "}),
    ("TensorListReserve", (S([2], I32), S(6, I32)), {"element_dtype": np.dtype(F)}),
    ("XlaPad", (np.ones((3, 4), F), S(0.5, F), S([1, -1], I64), S([2, 0], I64),
                S([1, 2], I64)), {}),
    ("XlaGather", (np.ones((5, 4), F), S([[0], [3], [1]], I32), S([1, 4], I64)),
     {"dimension_numbers": xla_proto({1: [1], 2: [0], 3: [0], 4: [1]}),
      "indices_are_sorted": False}),
    ("XlaDotV2", (np.ones((2, 3, 4), F), np.ones((2, 4, 5), F)),
     {"dimension_numbers": xla_proto({1: [2], 2: [1], 3: [0], 4: [0]}),
      "precision_config": "", "preferred_element_type": np.dtype(F)}),
    ("XlaReduceWindow", (np.ones((1, 6, 6, 4), F), S(-np.inf, F), S([1, 2, 2, 1], I32),
                         S([1, 2, 2, 1], I32), S([1, 1, 1, 1], I32), S([1, 1, 1, 1], I32),
                         S([[0, 0], [1, 1], [0, 1], [0, 0]], I32)),
     {"computation": _window_max()}),
    ("XlaConvV2", (np.ones((1, 5, 5, 2), F), np.ones((3, 3, 2, 4), F), S([1, 1], I32),
                   S([[1, 1], [1, 1]], I32), S([1, 1], I32), S([1, 1], I32), S(1, I32)),
     {"dimension_numbers": xla_proto({7: [0], 8: [3], 11: [1, 2], 6: [0, 1], 3: [2], 4: [3],
                                      9: [0], 10: [3], 12: [1, 2]}),
      "precision_config": "", "preferred_element_type": np.dtype(F), "batch_group_count": 1}),
]


@pytest.mark.parametrize("op,inputs,attrs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bound_covers_the_real_output(op: str, inputs: tuple, attrs: dict) -> None:
    bound, true = bound_and_true(op, *inputs, **attrs)
    if bound == 0:  # "no larger than an input": no check needed
        assert true <= max(true_bytes(list(inputs)), 1), (op, true)
        return
    assert bound >= true, (op, bound, true)
    # loose enough to be safe, tight enough that ordinary graphs are never refused
    assert bound <= 64 * true + 4096, (op, bound, true)


def test_every_estimated_op_has_a_kernel_and_a_case() -> None:
    from dfg.executor.kernels.registry import declared_without_kernel, specs

    tested = {c[0] for c in CASES}
    assert declared_without_kernel() == []
    estimators = {op: s.estimate for op, s in specs().items() if s.estimate is not None}
    # every non-elementwise estimator is checked against its kernel above
    elementwise = {op for op, fn in estimators.items()
                   if fn.__name__ in ("_broadcast2", "_broadcast3", "_broadcast_n")}
    untested = set(estimators) - elementwise - tested
    # these share an estimator with a tested op (same inputs, same output rule)
    siblings = {"Conv2DBackpropInput", "Conv3DBackpropInputV2", "AvgPoolGrad",
                "Conv2DBackpropFilter", "UnsortedSegmentMax", "UnsortedSegmentMin",
                "UnsortedSegmentProd", "SparseSegmentMeanWithNumSegments",
                "SparseSegmentSqrtNWithNumSegments", "ResourceGather", "BatchMatMul",
                "BatchMatMulV3", "MatrixDiagV2", "ScaleAndTranslate", "TensorListResize",
                "TensorArrayV3", "SparseFillEmptyRows", "CombinedNonMaxSuppression",
                "XlaDot", "XlaConv"}
    assert untested <= siblings, sorted(untested - siblings)


def test_elementwise_same_shape_is_not_estimated_as_growth() -> None:
    # equal shapes and scalars cannot grow: the estimator says 0 (no check needed)
    k = bind_op("AddV2", {"T": np.dtype(F)})
    assert k.size_check(k, [np.ones((3, 3), F), np.ones((3, 3), F)]) == 0
    assert k.size_check(k, [np.ones((3, 3), F), np.ones((), F)]) == 0


# --- hostile sizes are refused before the kernel allocates ------------------------------------

def shared(n: int, value: bytes) -> np.ndarray:
    """``n`` references to one string (as Fill makes them; np.full would copy each)."""
    a = np.empty(n, dtype=object)
    a.fill(value)
    return a


HOSTILE: list[tuple[str, tuple, dict, int]] = [
    ("Fill", (S([1 << 20, 1 << 20], I64), S(1.0, F)), {}, 4 << 40),
    ("Tile", (S([1.0], F), S([1 << 40], I64)), {}, 4 << 40),
    ("Range", (S(0, I64), S(1 << 50, I64), S(1, I64)), {}, 8 << 50),
    ("BroadcastTo", (S([1.0], F), S([1 << 30, 1 << 10], I64)), {}, 4 << 40),
    ("OneHot", (np.zeros(1000, I32), S(1 << 30, I32), S(1.0, F), S(0.0, F)), {}, 4000 << 30),
    ("AsString", (np.ones(1000, F),), {"width": 2_000_000_000}, 2_000_000_000_000),
    ("StringJoin", (shared(100_000, b"x" * (1 << 20)),) * 2, {"N": 2}, 200_000 << 20),
    ("MatMul", (np.ones((100_000, 1), F), np.ones((1, 100_000), F)), {}, 40_000_000_000),
    ("AddV2", (np.ones((100_000, 1), F), np.ones((1, 100_000), F)), {}, 40_000_000_000),
    ("GatherV2", (np.ones((1, 1_000_000), F), np.zeros(1_000_000, I32), S(0, I32)), {},
     4_000_000_000_000),
    ("UnsortedSegmentSum", (np.ones((1, 1000), F), S([0], I32), S(1 << 40, I64)), {},
     4000 << 40),
    ("Diag", (np.ones(1_000_000, F),), {}, 4_000_000_000_000),
    ("Conv2D", (np.ones((1, 1000, 1000, 1), F), np.ones((1, 1, 1, 1_000_000), F)),
     {"strides": [1, 1, 1, 1], "padding": "VALID"}, 4_000_000_000_000),
    ("ResizeBilinear", (np.ones((1, 2, 2, 3), F), S([1 << 20, 1 << 20], I32)), {}, 12 << 40),
    ("TensorListReserve", (S([], I32), S(1 << 40, I64)), {"element_dtype": np.dtype(F)},
     8 << 40),
    ("XlaPad", (np.ones(1000, F), S(0, F), S([0], I64), S([0], I64), S([1 << 30], I64)), {},
     3900 << 30),
]


@pytest.mark.parametrize("op,inputs,attrs,at_least", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_sizes_are_refused_fast(op: str, inputs: tuple, attrs: dict,
                                        at_least: int) -> None:
    from dfg.executor.kernel_call import call

    args = list(inputs)
    k = bind_op(op, complete_attrs(op, dict(attrs), args))
    with cpu_seconds() as spent:
        assert k.size_check(k, args) >= at_least
        with pytest.raises(ResourceExhaustedError, match="memory budget") as e:
            call(k, args, context(k, None, {}, max_bytes=1 << 30))
    # refused before any allocation: milliseconds; filling a GiB would take seconds
    assert spent.seconds < 3.0, spent.seconds
    assert e.value.node == op  # bind_op names the kernel after its op


# --- through a Session: the budget, the node named, ordinary graphs unaffected ----------------

def graph(*nodes: tuple) -> graph_pb2.GraphDef:
    """(name, op, inputs, attrs) tuples; attrs: dtype ints as ('type', v), tensors as arrays."""
    g = graph_pb2.GraphDef()
    for name, op, inputs, attrs in nodes:
        n = g.node.add(name=name, op=op)
        n.input.extend(inputs)
        for key, v in attrs.items():
            if isinstance(v, tuple) and v[0] == "type":
                n.attr[key].type = v[1]
            elif isinstance(v, bool):
                n.attr[key].b = v
            elif isinstance(v, int):
                n.attr[key].i = v
            elif isinstance(v, str):
                n.attr[key].s = v.encode()
            else:
                tensors.from_numpy(v, proto=n.attr[key].tensor)
    return g


def const(name: str, value: np.ndarray) -> tuple:
    from dfg.graphdef import dtypes as D

    return (name, "Const", [], {"dtype": ("type", D.from_numpy(value.dtype)), "value": value})


T_F = ("type", types_pb2.DT_FLOAT)
T_I32 = ("type", types_pb2.DT_INT32)


def test_session_budget_refuses_fill_and_names_the_node() -> None:
    g = graph(const("dims", S([1 << 16, 1 << 16], I32)), const("v", S(1.0, F)),
              ("big", "Fill", ["dims", "v"], {"T": T_F, "index_type": T_I32}))
    sess = Session(g, max_bytes=1 << 30)
    with cpu_seconds() as spent:
        with pytest.raises(ResourceExhaustedError) as e:
            sess.run("big")
    assert spent.seconds < 3.0, spent.seconds
    assert e.value.node == "big" and e.value.op == "Fill"
    assert "17,179,869,184 bytes" in str(e.value) and "1,073,741,824" in str(e.value)


def test_session_budget_zero_means_unlimited_and_ordinary_graphs_run() -> None:
    # v is fed, so nothing here is folded into a Const before the step
    g = graph(const("dims", S([300, 200], I32)),
              ("v", "Placeholder", [], {"dtype": T_F}),
              ("f", "Fill", ["dims", "v"], {"T": T_F, "index_type": T_I32}),
              const("m", S([2, 1], I32)),
              ("t", "Tile", ["f", "m"], {"T": T_F, "Tmultiples": T_I32}))
    for budget in (0, None, 1 << 20):  # the Tile's 480,000 bytes fit all three
        out = Session(g, max_bytes=budget).run("t", {"v": S(2.0, F)})
        assert out.shape == (600, 200) and float(out.sum()) == 2.0 * 600 * 200
    with pytest.raises(ResourceExhaustedError) as e:
        Session(g, max_bytes=400_000).run("t", {"v": S(2.0, F)})
    assert e.value.node == "t" and "480,000 bytes" in str(e.value)


def test_as_string_width_in_a_session_is_refused() -> None:
    x = np.ones(1000, F)
    g = graph(const("x", x), ("s", "AsString", ["x"], {"T": T_F, "width": 2_000_000_000}))
    with pytest.raises(ResourceExhaustedError) as e:
        Session(g).run("s")  # the default budget: half the physical memory
    assert e.value.node == "s"


# --- the Const-size rule ----------------------------------------------------------------------

def huge_const_proto(n: int) -> Any:
    from dfg.schemas import tensor_pb2

    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    t.tensor_shape.dim.add().size = n
    t.float_val.append(1.0)
    return t


def test_const_limit_is_the_context_budget() -> None:
    t = huge_const_proto(1 << 20)                       # 4 MiB when decoded
    assert tensors.to_numpy(t).shape == (1 << 20,)      # the default: 8 GiB per tensor
    with tensors.materialize_limit(1 << 20):
        with pytest.raises(ResourceExhaustedError, match="4,194,304 bytes"):
            tensors.to_numpy(t)
    with tensors.materialize_limit(4 << 20):            # exactly the size: allowed
        assert float(tensors.to_numpy(t).sum()) == float(1 << 20)
    assert tensors.to_numpy(t).size == 1 << 20          # the limit ends with the block


def test_const_shape_product_cannot_wrap_around() -> None:
    from dfg.schemas import tensor_pb2

    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    t.tensor_shape.dim.add().size = 1 << 40
    t.tensor_shape.dim.add().size = 1 << 40    # 2^80 elements: int64 would wrap to 0
    t.float_val.append(1.0)
    with pytest.raises(ResourceExhaustedError, match="refusing to materialize"):
        tensors.to_numpy(t)


def test_const_over_the_session_budget_names_the_const() -> None:
    """The issue's 535-byte graph is a Const of 2^31 floats, summed (tests/data/
    hostile_kernels/const_2g_floats.pbtxt, run under a cap by test_hostile_kernels). Here
    2^26 floats (256 MiB) against a 1 MiB budget: decoding a Const is bound by the Session's
    budget (``plan._make_item`` binds under ``tensors.materialize_limit(max_bytes)``) and the
    error names the Const (``kernel_call.bind_attrs``)."""
    from dfg.schemas import attr_value_pb2

    g = graph_pb2.GraphDef()
    n = g.node.add(name="big", op="Const")
    n.attr["dtype"].type = types_pb2.DT_FLOAT
    n.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=huge_const_proto(1 << 26)))
    g.node.extend(graph(const("axis", S([0], I32)),
                        ("total", "Sum", ["big", "axis"],
                         {"T": T_F, "Tidx": T_I32, "keep_dims": False})).node)
    with cpu_seconds() as spent:
        with pytest.raises(ResourceExhaustedError) as e:
            Session(g, max_bytes=1 << 20).run("total")
    assert spent.seconds < 3.0, spent.seconds
    assert e.value.node == "big" and "268,435,456 bytes" in str(e.value)
    assert "1,048,576" in str(e.value)


def test_invalid_inputs_still_reach_the_kernel_error() -> None:
    # an estimator never words errors: a negative dim is the kernel's InvalidArgumentError
    k = bind_op("Fill", {"T": np.dtype(F), "index_type": np.dtype(I32)})
    args = [S([-1, 3], I32), S(1.0, F)]
    assert k.size_check(k, args) == 0
    from dfg.executor.kernel_call import call

    with pytest.raises(InvalidArgumentError):
        call(k, args, context(k, None, {}, max_bytes=1 << 30))


def test_cli_max_memory_bounds_a_kernel_output(tmp_path):
    """`--max-memory` is the Session's budget: a 4 KiB Fill runs under 1M, is refused
    (exit 1, one line naming the node) under 1K; a size that is not one is a usage error."""
    from click.testing import CliRunner

    from dfg.cli.main import cli
    from dfg.graphdef import builder as B
    from dfg.graphdef.io import save_graphdef

    g = B.Graph()
    with g.as_default():
        # dims fed, so nothing can fold the Fill away before it runs
        B.apply_op("Fill", [B.placeholder("int32", [1], name="dims"),
                            B.constant(1.0, "float32")], name="big")
    path = tmp_path / "fill.pbtxt"
    save_graphdef(g.as_graph_def(), str(path))
    run = CliRunner().invoke
    args = ["run", str(path), "--fetch", "big", "--feed", "dims=[1024]"]
    ok = run(cli, [*args, "--json", "--max-memory", "1M"])
    assert ok.exit_code == 0, ok.output
    bad = run(cli, [*args, "--max-memory", "1K"])
    assert bad.exit_code == 1
    assert "'big'" in bad.output and "memory budget of 1,024 bytes" in bad.output
    assert run(cli, [*args, "--max-memory", "lots"]).exit_code == 2


@pytest.mark.parametrize("op", ["chain", "matmul"])
def test_a_loop_whose_outputs_outgrow_the_budget_is_refused_where_they_do(op: str) -> None:
    """Compiled loops ask a shapes-only estimator once per input shapes in a run
    (codegen.Emitter.fits): a column that doubles every iteration makes an outer sum (a
    fused elementwise chain) or outer product (MatMul) that fits for 64..256 rows and not for
    512 (1 MiB of float32 over a 600 KB budget); the loop stops there, naming the node, in
    every mode. The same loop under a larger budget runs to the end."""
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [None, 1], name="x")

        def body(i, col, acc):
            col = B.concat([col, col], 0)
            row = B.transpose(col)
            if op == "chain":
                outer = B.apply_op("_DfgElementwiseChain", [[col, row]],
                                   {"program": ["AddV2 i0 i1", "Neg r0"]}, name="outer").outputs[0]
            else:
                outer = B.matmul(col, row, name="outer")
            return i + 1, col, acc + B.reduce_sum(outer, [0, 1])

        _, _, total = B.while_loop(lambda i, col, acc: i < 4, body,
                                   [B.constant(0), x, B.constant(0.0)], name="loop")
        B.identity(total, name="total")
    gd = g.as_graph_def()
    feed = {"x:0": np.ones((32, 1), F)}
    want = sum((-2.0 if op == "chain" else 1.0) * (32 << k) ** 2 for k in range(1, 5))
    for programs in ("always", "never"):
        with Session(gd, max_bytes=600_000, programs=programs, optimize="off") as sess:
            for _ in range(2):      # the second run is the compiled program's
                with pytest.raises(ResourceExhaustedError) as e:
                    sess.run("total:0", feed)
                assert e.value.node == "loop/outer", (programs, e.value)
        with Session(gd, max_bytes=8 << 20, programs=programs, optimize="off") as sess:
            for _ in range(2):
                assert float(sess.run("total:0", feed)) == want


def test_a_convolution_asked_once_per_shapes_is_still_refused_when_they_grow() -> None:
    """A convolution's estimate reads only shapes and attrs (``shapes_only``): the kernel call
    asks it once per input shapes and budget (KernelContext.fits). Runs alternating a small
    input (64 KiB out) and a large one (1 MiB out, over a 600 KB budget) are each admitted or
    refused as if asked every time, in every mode."""
    from dfg.graphdef import builder as B

    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [None, None, None, 2], name="x")
        B.conv2d(x, B.constant(np.ones((1, 1, 2, 256), F)), name="conv")
    gd = g.as_graph_def()
    small, large = np.ones((1, 8, 8, 2), F), np.ones((1, 32, 32, 2), F)
    for programs in ("always", "never"):
        with Session(gd, max_bytes=600_000, programs=programs, optimize="off") as sess:
            for _ in range(2):
                assert sess.run("conv:0", {"x:0": small}).shape == (1, 8, 8, 256)
                with pytest.raises(ResourceExhaustedError) as e:
                    sess.run("conv:0", {"x:0": large})
                assert e.value.node == "conv"
