"""TensorProto <-> numpy for every numpy-holdable dtype, both encodings, and TF's rule that a
short typed value list repeats its last value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import ResourceExhaustedError, UnsupportedDTypeError
from dfg.graphdef.io import load_graph
from dfg.graphdef.tensors import from_numpy, to_numpy
from dfg.schemas import tensor_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]


def proto(text: str) -> tensor_pb2.TensorProto:
    t = tensor_pb2.TensorProto()
    text_format.Parse(text, t)
    return t


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
def test_round_trip_every_dtype(dtype, shape) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 100)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x[::-1] if x.ndim else x + 1j
    arr = np.asarray(x).astype(dtype)
    back = to_numpy(from_numpy(arr))
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)
    # NumPy's own dtype instance, not an equal "<f4" descriptor: results computed from a
    # decoded Const carry its instance on, and the compiled programs' fast paths compare
    # output dtypes by identity first (each array-form result was computed twice before)
    assert back.dtype is np.dtype(dtype)


def test_strings_round_trip_as_bytes_objects() -> None:
    arr = np.array([[b"a", b""], [b"\xff\x00", b"long string"]], dtype=object)
    back = to_numpy(from_numpy(arr))
    assert back.dtype == object and back.tolist() == arr.tolist()


@pytest.mark.parametrize("npy", sorted((DATA / "dtypes_cast").glob("*.npy")),
                         ids=lambda p: p.name)
def test_round_trip_tensorflow_written_values(npy: Path) -> None:
    arr = np.load(npy)
    back = to_numpy(from_numpy(arr))
    assert back.dtype == arr.dtype
    np.testing.assert_array_equal(back, arr)


def test_repeat_last_value_rule_in_tensorflow_graph() -> None:
    # TensorFlow wrote tf.zeros([3]) in the scan case as float_val: 0 with shape [3]
    g = load_graph(DATA / "scan" / "graph.pbtxt")
    t = g.node("zeros").attr["value"].tensor
    assert len(t.float_val) == 1
    np.testing.assert_array_equal(to_numpy(t), np.zeros(3, np.float32))


@pytest.mark.parametrize("text,expected", [
    ("dtype: DT_FLOAT tensor_shape { dim { size: 4 } } float_val: 1 float_val: 2",
     np.array([1, 2, 2, 2], np.float32)),
    ("dtype: DT_INT64 tensor_shape { dim { size: 2 } dim { size: 2 } } int64_val: 7",
     np.full((2, 2), 7, np.int64)),
    ("dtype: DT_BOOL tensor_shape { dim { size: 3 } } bool_val: true",
     np.array([True, True, True])),
    ("dtype: DT_INT32 tensor_shape { dim { size: 3 } }", np.zeros(3, np.int32)),
    ("dtype: DT_UINT8 tensor_shape { dim { size: 2 } } int_val: 255", np.array([255, 255],
                                                                                np.uint8)),
    ("dtype: DT_HALF tensor_shape { dim { size: 2 } } half_val: 15360",  # 0x3C00 == 1.0
     np.array([1.0, 1.0], np.float16)),
    ("dtype: DT_COMPLEX64 tensor_shape { dim { size: 2 } } scomplex_val: 1 scomplex_val: -2",
     np.array([1 - 2j, 1 - 2j], np.complex64)),
    ("dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: 'ab'",
     np.array([b"ab", b"ab"], dtype=object)),
    ("dtype: DT_DOUBLE tensor_shape { } double_val: 2.5", np.array(2.5)),
])
def test_typed_fields_and_repeat_rule(text: str, expected: np.ndarray) -> None:
    got = to_numpy(proto(text))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tolist() == expected.tolist()


def test_tensor_content_little_endian() -> None:
    t = proto('dtype: DT_INT32 tensor_shape { dim { size: 2 } } '
              'tensor_content: "\\001\\000\\000\\000\\377\\377\\377\\377"')
    assert to_numpy(t).tolist() == [1, -1]


def test_a_dtype_numpy_cannot_hold_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedDTypeError, match="float8_e5m2"):
        to_numpy(proto("dtype: DT_FLOAT8_E5M2 tensor_shape { } half_val: 0"))


def test_bfloat16_is_held_as_float32_of_bfloat16_values() -> None:
    # bit patterns: 0x3F80 = 1.0, 0x4049 = 3.140625, 0xC000 = -2.0 (the float32 high halves)
    t = proto("dtype: DT_BFLOAT16 tensor_shape { dim { size: 4 } } half_val: 16256 "
              "half_val: 16457 half_val: 49152")
    got = to_numpy(t)
    assert got.dtype == np.float32
    assert got.tolist() == [1.0, 3.140625, -2.0, -2.0]   # the last value repeats
    content = proto("dtype: DT_BFLOAT16 tensor_shape { dim { size: 2 } } "
                    "tensor_content: '\\x80\\x3f\\x49\\x40'")
    assert to_numpy(content).tolist() == [1.0, 3.140625]
    # encoding rounds to nearest, ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7
    vals = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, 3.14159, -np.inf], np.float32)
    back = to_numpy(from_numpy(vals, D.DT_BFLOAT16))
    assert back.tolist() == [1.0, 1 + 2.0**-6, 3.140625, -np.inf]
    assert np.isnan(to_numpy(from_numpy(np.float32(np.nan), D.DT_BFLOAT16)))


def test_huge_repeat_is_refused_not_materialized() -> None:
    t = proto("dtype: DT_FLOAT tensor_shape { dim { size: 100000 } dim { size: 100000 } } "
              "float_val: 0")
    with pytest.raises(ResourceExhaustedError):
        to_numpy(t)


def test_shapes_with_unknown_dims() -> None:
    from dfg.graphdef.tensors import format_shape, shape_from_proto, shape_to_proto

    s = shape_from_proto(shape_to_proto((None, 3)))
    assert s == (None, 3) and format_shape(s) == "[?,3]"
    assert shape_from_proto(shape_to_proto(None)) is None


def test_dtype_names() -> None:
    assert D.name(D.DT_FLOAT) == "float32" and D.name(101) == "float32_ref"
    assert D.from_name("DT_INT64") == D.DT_INT64 and D.from_name("half") == D.DT_HALF


def test_fetched_const_is_the_callers_own_array() -> None:
    """A Const's value is decoded as a read-only view of the graph's bytes; a fetch still
    hands out a writeable array, and changing it changes nothing in the graph."""
    from dfg.executor import Session
    from dfg.graphdef.graph import Graph
    from dfg.schemas import graph_pb2

    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    gd = graph_pb2.GraphDef()
    c = gd.node.add(name="c", op="Const")
    c.attr["dtype"].type = D.DT_FLOAT
    c.attr["value"].tensor.CopyFrom(from_numpy(value))
    i = gd.node.add(name="i", op="Identity", input=["c"])
    i.attr["T"].type = D.DT_FLOAT
    sess = Session(Graph(gd), optimize="off")
    for name in ("c", "i"):
        got = sess.run(name)
        assert got.flags.writeable
        got += 100
        np.testing.assert_array_equal(sess.run(name), value)


def _ref_variable_session(value: np.ndarray, extra: tuple = (), **session_kw):
    """A Session over: ref variable ``v`` (VariableV2) of ``value``'s shape, Const ``c`` =
    ``value``, ``init`` = Assign(v, c), ``add`` = AssignAdd(v, c), ``read`` = Identity(v)
    (v/read), plus ``extra`` nodes (name, op, inputs) of T=float; ``init`` has run."""
    from dfg.executor import Session
    from dfg.graphdef.graph import Graph
    from dfg.schemas import graph_pb2

    gd = graph_pb2.GraphDef()
    v = gd.node.add(name="v", op="VariableV2")
    v.attr["dtype"].type = D.DT_FLOAT
    v.attr["shape"].shape.SetInParent()
    for d in value.shape:
        v.attr["shape"].shape.dim.add().size = d
    c = gd.node.add(name="c", op="Const")
    c.attr["dtype"].type = D.DT_FLOAT
    c.attr["value"].tensor.CopyFrom(from_numpy(value))
    for name, op, inputs in (("init", "Assign", ["v", "c"]), ("add", "AssignAdd", ["v", "c"]),
                             ("read", "Identity", ["v"]), *extra):
        gd.node.add(name=name, op=op, input=inputs).attr["T"].type = D.DT_FLOAT
    sess = Session(Graph(gd), **session_kw)
    sess.run([], targets=["init"])
    return sess


def test_fetched_ref_variable_is_a_snapshot() -> None:
    """A ref variable's buffer is updated in place (resources.VariableRef.store), as
    TensorFlow's is; what a fetch handed out earlier keeps the value it had."""
    sess = _ref_variable_session(np.array([1.0, 2.0], np.float32), optimize="off")
    a, b = sess.run(["v", "read"])
    sess.run([], targets=["add"])
    np.testing.assert_array_equal(a, [1, 2])
    np.testing.assert_array_equal(b, [1, 2])
    np.testing.assert_array_equal(sess.run("read"), [2, 4])
    # the Const the variable was assigned from is untouched by the in-place update
    np.testing.assert_array_equal(sess.run("c"), [1, 2])


@pytest.mark.parametrize("programs", ["never", "always"])
def test_a_read_of_a_ref_variable_sees_a_later_update(programs: str) -> None:
    """v/read shares the variable's buffer (as in TensorFlow): a consumer that runs after an
    AssignAdd (control dependency) sees the new value, programs or not."""
    sess = _ref_variable_session(np.float32(1.0), [("y", "Identity", ["read", "^add"])],
                                 programs=programs)
    assert [sess.run("y").item() for _ in range(3)] == [2.0, 3.0, 4.0]


def test_reads_ready_beside_an_update_run_first() -> None:
    """y = v/read * c and AssignAdd(v) in one step, unordered: the update waits while other
    work is ready (TF's executor gives TF1 graphs that order: sess.run([loss, train_op])
    reads the weights before updating them), so y uses the old value."""
    for threads in (1, 2):
        sess = _ref_variable_session(np.array([1.0, 2.0], np.float32),
                                     [("y", "Mul", ["read", "c"])], threads=threads)
        np.testing.assert_array_equal(sess.run("y", targets=["add"]), [1, 4])
        np.testing.assert_array_equal(sess.run("y"), [2, 8])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_tensor_content_decodes_as_a_read_only_view_of_its_dtype(dtype) -> None:
    """tensor_content is decoded straight from the bytes (little-endian, the format's order):
    the array has numpy's own dtype instance (fast paths compare output dtypes by identity),
    the proto's shape, and cannot be written (a Const's value is shared by every run)."""
    arr = (np.arange(6) * 3 - 7).astype(dtype).reshape(2, 3)
    t = tensor_pb2.TensorProto(dtype=D.from_numpy(arr.dtype),
                               tensor_content=arr.astype(arr.dtype.newbyteorder("<")).tobytes())
    for size in arr.shape:
        t.tensor_shape.dim.add().size = size
    back = to_numpy(t)
    assert back.dtype is np.dtype(dtype) and back.shape == (2, 3)
    assert not back.flags.writeable
    np.testing.assert_array_equal(back, arr)


def test_tensor_content_that_does_not_fit_its_shape_is_refused() -> None:
    from dfg.graphdef.errors import InvalidArgumentError

    content = np.arange(6, dtype="<f4").tobytes()
    # one byte short, one value too many, an unknown dim: each named, none decoded
    for dims, data, match in (([2, 3], content[:-1], "holds 23 bytes"),
                              ([5], content, "holds 24 bytes"),
                              ([2, -1], content, "partially unknown shape")):
        t = tensor_pb2.TensorProto(dtype=D.DT_FLOAT, tensor_content=data)
        for size in dims:
            t.tensor_shape.dim.add().size = size
        with pytest.raises(InvalidArgumentError, match=match):
            to_numpy(t)
    # no dims at all: a scalar, so one float's bytes and not six
    t = tensor_pb2.TensorProto(dtype=D.DT_FLOAT, tensor_content=content[:4])
    assert to_numpy(t).shape == () and to_numpy(t) == 0.0
    t.tensor_content = content
    with pytest.raises(InvalidArgumentError, match="holds 24 bytes"):
        to_numpy(t)


def test_tensor_content_over_the_limit_is_refused() -> None:
    from dfg.graphdef import tensors

    t = tensor_pb2.TensorProto(dtype=D.DT_INT32,
                               tensor_content=np.arange(256, dtype="<i4").tobytes())
    t.tensor_shape.dim.add().size = 256
    with tensors.materialize_limit(1023):
        with pytest.raises(ResourceExhaustedError, match="1,024 bytes"):
            to_numpy(t)
    with tensors.materialize_limit(1024):
        assert to_numpy(t)[-1] == 255
