"""Each optimization pass on small hand-built graphs (text-format GraphDefs below), the
pipeline's safety net, and --verify's comparison.

Expected values are worked out by hand from the graphs (or with numpy from the formula the
graph spells out), never taken from the optimizer's own output.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.graphdef.errors import InvalidArgumentError, OpError
from dfg.graphdef.graph import Graph
from dfg.graphdef.passes import DEFAULT_PASSES, PASSES, PassInfo, PassOptions, get_pass
from dfg.graphdef.passes.pipeline import optimize
from dfg.graphdef.passes.verify import random_feeds, verify
from dfg.graphdef.tensors import to_numpy
from dfg.graphdef.validate import validate
from dfg.schemas import graph_pb2

# --- text-format building blocks ---------------------------------------------------------------

DTYPE = {np.dtype(np.float32): "DT_FLOAT", np.dtype(np.int32): "DT_INT32",
         np.dtype(np.bool_): "DT_BOOL", np.dtype(np.float64): "DT_DOUBLE"}
FIELD = {"DT_FLOAT": "float_val", "DT_INT32": "int_val", "DT_BOOL": "bool_val",
         "DT_DOUBLE": "double_val"}


def _inputs(inputs) -> str:
    return " ".join(f'input: "{i}"' for i in inputs)


def ph(name: str, dtype: str = "DT_FLOAT", shape=None) -> str:
    """A Placeholder; ``shape`` None for unknown rank, -1 for an unknown dimension."""
    shape_attr = ""
    if shape is not None:
        dims = " ".join(f"dim {{ size: {d} }}" for d in shape)
        shape_attr = f'attr {{ key: "shape" value {{ shape {{ {dims} }} }} }}'
    return (f'node {{ name: "{name}" op: "Placeholder" '
            f'attr {{ key: "dtype" value {{ type: {dtype} }} }} {shape_attr} }}')


def const(name: str, value, dtype: str | None = None, inputs=()) -> str:
    arr = np.asarray(value)
    if dtype is None:   # Python floats and ints mean float32 and int32, as in TensorFlow
        dtype = {"f": "DT_FLOAT", "i": "DT_INT32"}.get(arr.dtype.kind) \
            if arr.dtype in (np.float64, np.int64) else DTYPE[arr.dtype]
    field = FIELD[dtype]
    dims = " ".join(f"dim {{ size: {d} }}" for d in arr.shape)
    vals = " ".join(f"{field}: {str(v).lower() if dtype == 'DT_BOOL' else v}"
                    for v in arr.reshape(-1).tolist())
    return (f'node {{ name: "{name}" op: "Const" {_inputs(inputs)} '
            f'attr {{ key: "dtype" value {{ type: {dtype} }} }} '
            f'attr {{ key: "value" value {{ tensor {{ dtype: {dtype} '
            f'tensor_shape {{ {dims} }} {vals} }} }} }} }}')


def op(name: str, op_type: str, *inputs: str, T: str | None = "DT_FLOAT", attrs: str = "",
       device: str = "") -> str:
    t = f'attr {{ key: "T" value {{ type: {T} }} }}' if T else ""
    dev = f'device: "{device}"' if device else ""
    return f'node {{ name: "{name}" op: "{op_type}" {dev} {_inputs(inputs)} {t} {attrs} }}'


def graph(*nodes: str) -> graph_pb2.GraphDef:
    gd = graph_pb2.GraphDef()
    text_format.Parse("\n".join(nodes), gd)
    assert not [d for d in validate(Graph(gd)) if d.is_error], validate(Graph(gd))
    return gd


def run_pass(name: str, gd, fetch=(), feed=(), target=(), **kw):
    """Run one pass; check it left its input alone and produced a valid graph."""
    before = gd.SerializeToString(deterministic=True)
    out = get_pass(name)(Graph(gd), PassOptions(tuple(fetch), tuple(target), tuple(feed), **kw))
    assert gd.SerializeToString(deterministic=True) == before, "the pass mutated its input"
    errors = [d for d in validate(Graph(out)) if d.is_error]
    assert not errors, errors
    return out


def nodes(gd) -> dict:
    return {n.name: n for n in gd.node}


def value(gd, name: str) -> np.ndarray:
    nd = nodes(gd)[name]
    assert nd.op == "Const", f"{name} is a {nd.op}, not a Const"
    return to_numpy(nd.attr["value"].tensor)


def run(gd, fetches, feeds=None, targets=()):
    with Session(gd, threads=1) as sess:
        return sess.run(list(fetches), feed_dict=feeds or {}, targets=list(targets))


X2 = np.array([[1.5, -2.0], [0.25, 4.0]], np.float32)


def loop_with(invariant: str, dtype: str = "DT_FLOAT") -> list[str]:
    """``acc = 0; for i in range(n): acc += <invariant>`` where ``invariant`` (named
    ``loop/ws``) reads the constant Enters ``loop/Enter_w`` (w = 3) and ``loop/Enter_s``
    (s = 2)."""
    np_t = np.float32 if dtype == "DT_FLOAT" else np.int32
    frame = 'attr { key: "frame_name" value { s: "loop" } }'
    const_enter = frame + ' attr { key: "is_constant" value { b: true } }'
    return [
        ph("n", "DT_INT32", shape=[]), const("w", np_t(3)), const("s", np_t(2)),
        const("i0", 0, "DT_INT32"), const("acc0", np_t(0)),
        op("loop/Enter_i", "Enter", "i0", T="DT_INT32", attrs=frame),
        op("loop/Enter_acc", "Enter", "acc0", T=dtype, attrs=frame),
        op("loop/Enter_n", "Enter", "n", T="DT_INT32", attrs=const_enter),
        op("loop/Enter_w", "Enter", "w", T=dtype, attrs=const_enter),
        op("loop/Enter_s", "Enter", "s", T=dtype, attrs=const_enter),
        op("loop/Merge_i", "Merge", "loop/Enter_i", "loop/NextIteration_i", T="DT_INT32",
           attrs='attr { key: "N" value { i: 2 } }'),
        op("loop/Merge_acc", "Merge", "loop/Enter_acc", "loop/NextIteration_acc", T=dtype,
           attrs='attr { key: "N" value { i: 2 } }'),
        op("loop/Less", "Less", "loop/Merge_i", "loop/Enter_n", T="DT_INT32"),
        op("loop/LoopCond", "LoopCond", "loop/Less", T=None),
        op("loop/Switch_i", "Switch", "loop/Merge_i", "loop/LoopCond", T="DT_INT32"),
        op("loop/Switch_acc", "Switch", "loop/Merge_acc", "loop/LoopCond", T=dtype),
        op("loop/Identity_i", "Identity", "loop/Switch_i:1", T="DT_INT32"),
        op("loop/Identity_acc", "Identity", "loop/Switch_acc:1", T=dtype),
        const("loop/one", 1, "DT_INT32", inputs=["^loop/Identity_i"]),
        op("loop/add_i", "AddV2", "loop/Identity_i", "loop/one", T="DT_INT32"),
        invariant,
        op("loop/add_acc", "AddV2", "loop/Identity_acc", "loop/ws", T=dtype),
        op("loop/NextIteration_i", "NextIteration", "loop/add_i", T="DT_INT32"),
        op("loop/NextIteration_acc", "NextIteration", "loop/add_acc", T=dtype),
        op("loop/Exit_i", "Exit", "loop/Switch_i", T="DT_INT32"),
        op("loop/Exit_acc", "Exit", "loop/Switch_acc", T=dtype),
    ]


LOOP = loop_with(op("loop/ws", "Mul", "loop/Enter_w", "loop/Enter_s"))


# --- the table -------------------------------------------------------------------------------

def test_table_lists_every_pass_once_with_a_reason():
    assert list(PASSES)[:2] == ["lower_functional", "prune"]
    for name, info in PASSES.items():
        assert info.name == name and info.reason and callable(info.fn)
    assert "debug_strip" not in DEFAULT_PASSES     # opt-in
    # opt-in too: the run-time fusions write ops TensorFlow's CPU kernels do not all take,
    # and sink_squeeze only serves them (it reorders a Conv1D's nodes for fuse_conv_bias_act)
    fusions = {"fuse_conv_bias_act", "fuse_matmul_bias_act", "fuse_elementwise",
               "sink_squeeze"}
    assert set(DEFAULT_PASSES) == set(PASSES) - {"debug_strip"} - fusions


# --- prune -------------------------------------------------------------------------------------

def test_prune_keeps_what_fetches_need_plus_feeds_and_placeholders():
    gd = graph(ph("x"), ph("unused_input"), const("two", 2.0),
               op("y", "Mul", "x", "two"), op("z", "Neg", "x"), op("w", "Neg", "z"))
    out = run_pass("prune", gd, fetch=["y"], feed=["z:0"])
    # y needs x and two; z is fed (stays feedable, with what computes it); w is not needed;
    # every Placeholder stays so that feeding it still works
    assert set(nodes(out)) == {"x", "unused_input", "two", "y", "z"}
    y, = run(out, ["y"], {"x": X2, "unused_input": 1.0})
    np.testing.assert_array_equal(y, X2 * 2)


# --- constant folding --------------------------------------------------------------------------

def test_folding_evaluates_constant_subgraphs_and_keeps_names():
    gd = graph(ph("x"), const("a", [1.0, 2.0]), const("b", [3.0, 5.0]),
               op("s", "AddV2", "a", "b"), op("p", "Mul", "s", "s"), op("y", "Mul", "x", "p"))
    out = run_pass("constant_folding", gd, fetch=["y"])
    assert "s" not in nodes(out)        # read only by p, which folded too: the chain is one
    np.testing.assert_array_equal(value(out, "p"), [16.0, 49.0])    # (1+3)^2, (2+5)^2
    assert nodes(out)["y"].op == "Mul"                               # reads a Placeholder
    y, = run(out, ["y"], {"x": np.array([1.0, -1.0], np.float32)})
    np.testing.assert_array_equal(y, [16.0, -49.0])


def test_folding_keeps_the_control_dependencies_of_node_and_inputs():
    # a Const inside a cond branch gets its deadness from its control input: keep it
    gd = graph(ph("x"), op("gate", "NoOp", "^x", T=None), const("c", 3.0, inputs=["^gate"]),
               op("n", "Neg", "c"), const("d", 1.0), op("m", "Neg", "d", "^x"))
    out = run_pass("constant_folding", gd, fetch=["n", "m"])
    assert list(nodes(out)["n"].input) == ["^gate"] and value(out, "n") == -3.0
    assert list(nodes(out)["m"].input) == ["^x"] and value(out, "m") == -1.0


def test_folding_never_touches_feeds_placeholders_or_their_readers():
    gd = graph(const("base", [1.0, 2.0]),
               op("maybe", "PlaceholderWithDefault", "base", T=None,
                  attrs='attr { key: "dtype" value { type: DT_FLOAT } } '
                        'attr { key: "shape" value { shape { dim { size: 2 } } } }'),
               const("two", 2.0), op("doubled", "Mul", "maybe", "two"),
               const("a", 1.0), const("b", 2.0), op("fed", "AddV2", "a", "b"),
               op("after_fed", "Neg", "fed"))
    out = run_pass("constant_folding", gd, fetch=["doubled", "after_fed"], feed=["fed:0"])
    n = nodes(out)
    assert n["maybe"].op == "PlaceholderWithDefault" and n["doubled"].op == "Mul"
    assert n["fed"].op == "AddV2" and n["after_fed"].op == "Neg"
    # both still work: fed and not fed
    d, f = run(out, ["doubled", "after_fed"])
    np.testing.assert_array_equal(d, [2.0, 4.0])
    assert f == -3.0
    d, f = run(out, ["doubled", "after_fed"], {"maybe": [5.0, 6.0], "fed": 10.0})
    np.testing.assert_array_equal(d, [10.0, 12.0])
    assert f == -10.0


def test_folding_leaves_nodes_whose_evaluation_fails():
    gd = graph(const("x", [7, -7], "DT_INT32"), const("zero", 0, "DT_INT32"),
               op("q", "FloorDiv", "x", "zero", T="DT_INT32"))
    out = run_pass("constant_folding", gd, fetch=["q"])
    assert nodes(out)["q"].op == "FloorDiv"
    with pytest.raises(InvalidArgumentError):
        run(out, ["q"])          # still fails at run time, as TensorFlow does


def test_folding_never_creates_a_const_above_the_limit():
    # Fill of [2^20, 2^20] floats would be 4 TiB: it must be refused without being built
    gd = graph(const("dims", [1 << 20, 1 << 20], "DT_INT32"), const("one", 1.0),
               op("huge", "Fill", "dims", "one", T="DT_FLOAT",
                  attrs='attr { key: "index_type" value { type: DT_INT32 } }'),
               const("row", np.arange(1000, dtype=np.float32)),
               const("reps", [1000], "DT_INT32"),
               op("tiled", "Tile", "row", "reps",
                  attrs='attr { key: "Tmultiples" value { type: DT_INT32 } }'),
               const("small_dims", [2, 3], "DT_INT32"),
               op("small", "Fill", "small_dims", "one",
                  attrs='attr { key: "index_type" value { type: DT_INT32 } }'))
    t0 = time.process_time()
    out = run_pass("constant_folding", gd, fetch=["huge", "tiled", "small"])
    assert time.process_time() - t0 < 5
    n = nodes(out)
    assert n["huge"].op == "Fill"          # 4 TiB
    assert n["tiled"].op == "Tile"         # 1e6 floats = 4 MB > 1 MiB default limit
    np.testing.assert_array_equal(value(out, "small"), np.ones((2, 3), np.float32))
    limit = 1 << 20
    for nd in out.node:
        if nd.op == "Const":
            assert to_numpy(nd.attr["value"].tensor).nbytes <= limit
    # with a larger limit the Tile folds; with a tiny one even the small Fill stays
    big = run_pass("constant_folding", gd, fetch=["tiled"], max_const_bytes=8 << 20)
    np.testing.assert_array_equal(value(big, "tiled"), np.tile(np.arange(1000), 1000))
    tiny = run_pass("constant_folding", gd, fetch=["small"], max_const_bytes=16)
    assert nodes(tiny)["small"].op == "Fill"     # 24 bytes > 16


def test_folding_multi_output_node_rewires_readers_of_other_outputs():
    gd = graph(const("axis", 0, "DT_INT32"), const("v", [1.0, 2.0, 3.0, 4.0]),
               op("split", "Split", "axis", "v",
                  attrs='attr { key: "num_split" value { i: 2 } }'),
               ph("x"), op("a", "Mul", "x", "split"), op("b", "Mul", "x", "split:1"))
    out = run_pass("constant_folding", gd, fetch=["a", "b"])
    np.testing.assert_array_equal(value(out, "split"), [1.0, 2.0])
    np.testing.assert_array_equal(value(out, "split/_folded_1"), [3.0, 4.0])
    assert list(nodes(out)["b"].input) == ["x", "split/_folded_1"]
    a, b = run(out, ["a", "b"], {"x": 2.0})
    np.testing.assert_array_equal(a, [2.0, 4.0])
    np.testing.assert_array_equal(b, [6.0, 8.0])


def test_folding_keeps_a_multi_output_node_whose_second_output_is_fetched():
    gd = graph(const("v", [[1.0, 2.0], [3.0, 4.0]]),
               op("rows", "Unpack", "v", attrs='attr { key: "num" value { i: 2 } }'))
    out = run_pass("constant_folding", gd, fetch=["rows:1"])
    assert nodes(out)["rows"].op == "Unpack"      # "rows:1" must keep naming row 1


def test_folding_shape_rank_size_of_static_shapes():
    gd = graph(ph("x", shape=[2, 3]), ph("y", shape=[-1, 3]),
               op("sx", "Shape", "x", attrs='attr { key: "out_type" value { type: DT_INT32 } }'),
               op("nx", "Size", "x", attrs='attr { key: "out_type" value { type: DT_INT32 } }'),
               op("ry", "Rank", "y"),
               op("sy", "Shape", "y", attrs='attr { key: "out_type" value { type: DT_INT32 } }'))
    out = run_pass("constant_folding", gd, fetch=["sx", "nx", "ry", "sy"])
    np.testing.assert_array_equal(value(out, "sx"), [2, 3])
    assert value(out, "nx") == 6 and value(out, "ry") == 2
    assert nodes(out)["sy"].op == "Shape"       # batch dimension unknown
    # the Const still waits for its input's producer (an unfed x must still fail)
    assert list(nodes(out)["sx"].input) == ["^x"]


def test_folding_skips_stateful_and_random_ops():
    gd = graph(const("shape", [2], "DT_INT32"),
               op("r", "RandomUniform", "shape", T="DT_INT32",
                  attrs='attr { key: "dtype" value { type: DT_FLOAT } }'),
               op("n", "Neg", "r"))
    out = run_pass("constant_folding", gd, fetch=["n"])
    assert nodes(out)["r"].op == "RandomUniform" and nodes(out)["n"].op == "Neg"


# --- cse ---------------------------------------------------------------------------------------

def test_cse_merges_identical_and_commuted_nodes_not_different_ones():
    gd = graph(ph("a"), ph("b"),
               op("m1", "Mul", "a", "b"), op("m2", "Mul", "b", "a"),      # commutative
               op("s1", "Sub", "a", "b"), op("s2", "Sub", "b", "a"),      # not
               op("t1", "Tanh", "m1"), op("t2", "Tanh", "m2"),            # equal after merge
               op("out", "AddN", "t1", "t2", "s1", "s2",
                  attrs='attr { key: "N" value { i: 4 } }'))
    out = run_pass("cse", gd, fetch=["out"])
    n = nodes(out)
    assert len({"m1", "m2"} & set(n)) == 1 and len({"t1", "t2"} & set(n)) == 1
    assert "s1" in n and "s2" in n
    tanh = ({"t1", "t2"} & set(n)).pop()
    assert list(n["out"].input) == [tanh, tanh, "s1", "s2"]
    a, b = np.float32(0.5), np.float32(2.0)
    got, = run(out, ["out"], {"a": a, "b": b})
    assert got == pytest.approx(2 * np.tanh(1.0) + (a - b) + (b - a))


def test_cse_keeps_fetched_names_and_never_merges_feeds_or_stateful_ops():
    gd = graph(ph("a"), op("n1", "Neg", "a"), op("n2", "Neg", "a"), op("n3", "Neg", "a"),
               op("f1", "Exp", "a"), op("f2", "Exp", "a"),
               const("shape", [2], "DT_INT32"),
               op("r1", "RandomUniform", "shape", T="DT_INT32",
                  attrs='attr { key: "dtype" value { type: DT_FLOAT } }'),
               op("r2", "RandomUniform", "shape", T="DT_INT32",
                  attrs='attr { key: "dtype" value { type: DT_FLOAT } }'),
               op("use", "AddN", "n1", "n3", "f1", "f2",
                  attrs='attr { key: "N" value { i: 4 } }'))
    out = run_pass("cse", gd, fetch=["n2", "use", "r1", "r2"], feed=["f2:0"])
    n = nodes(out)
    # n2 is fetched: it absorbs n1 and n3 (a fetched node is never the one removed)
    assert "n1" not in n and "n3" not in n and "n2" in n
    assert list(n["use"].input)[:2] == ["n2", "n2"]
    # f2 may be fed: neither f1 nor f2 may be merged into the other
    assert "f1" in n and "f2" in n and list(n["use"].input)[2:] == ["f1", "f2"]
    assert "r1" in n and "r2" in n                        # two random draws stay two



def test_cse_large_consts_merge_only_when_every_byte_is_equal():
    # above cse.SAMPLE_ABOVE bytes a Const's key hashes a sample of its bytes: values equal in
    # the sample but not elsewhere must still stay two nodes
    from dfg.graphdef.passes.cse import SAMPLE_ABOVE
    from dfg.graphdef.tensors import from_numpy

    a = np.arange(SAMPLE_ABOVE // 2, dtype=np.float32)        # 128 KiB
    c = a.copy()
    c[1] = -7.0             # bytes 4..7: between the sampled bytes and not in the tail
    gd = graph_pb2.GraphDef()
    for name, arr in (("ca", a), ("cb", a.copy()), ("cc", c)):
        nd = gd.node.add(name=name, op="Const")
        nd.attr["dtype"].type = 1
        from_numpy(arr, 1, nd.attr["value"].tensor)
    text_format.Parse(op("s1", "AddV2", "ca", "cb") + op("s2", "AddV2", "ca", "cc"), gd)
    out = run_pass("cse", gd, fetch=["s1", "s2"])
    n = nodes(out)
    assert len({"ca", "cb"} & set(n)) == 1 and "cc" in n
    s1, s2 = run(out, ["s1", "s2"])
    np.testing.assert_array_equal(s1, a + a)
    np.testing.assert_array_equal(s2, a + c)


# --- identity removal --------------------------------------------------------------------------

def test_identity_removal_rewires_and_keeps_control_dependencies():
    gd = graph(ph("x"), ph("other"), op("first", "Exp", "other"),
               op("i1", "Identity", "x", "^first"), op("i2", "StopGradient", "i1"),
               op("i3", "Snapshot", "i2"), op("y", "Neg", "i3"),
               op("after", "NoOp", "^i3", T=None), op("z", "Neg", "x", "^after"),
               op("nothing", "NoOp", T=None), op("w", "Neg", "x", "^nothing"))
    out = run_pass("identity_removal", gd, fetch=["y", "z", "w"])
    n = nodes(out)
    assert not {"i1", "i2", "i3"} & set(n)
    assert list(n["y"].input) == ["x", "^first"]       # still runs after 'first'
    # 'after' had one control input and one reader: removed, its reader waits for x, first
    assert "after" not in n and list(n["z"].input) == ["x", "^first"]
    # a NoOp without inputs is always ready: waiting for it means nothing
    assert "nothing" not in n and list(n["w"].input) == ["x"]
    with pytest.raises(OpError):
        run(out, ["y"], {"x": 3.0})                     # 'other' must still be fed
    y, z, w = run(out, ["y", "z", "w"], {"x": 3.0, "other": 0.0})
    assert y == -3.0 and z == -3.0 and w == -3.0


def test_fetched_identity_stays_and_absorbs_its_producer():
    gd = graph(ph("x"), op("sm", "Softmax", "x"), op("Identity", "Identity", "sm"))
    out = run_pass("identity_removal", gd, fetch=["Identity"])
    n = nodes(out)
    assert "sm" not in n and n["Identity"].op == "Softmax" and list(n["Identity"].input) == ["x"]
    got, = run(out, ["Identity"], {"x": np.array([[0.0, np.log(3.0)]], np.float32)})
    np.testing.assert_allclose(got, [[0.25, 0.75]], rtol=1e-6)


VARIABLE = """
node { name: "w" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } }
node { name: "w/read" op: "Identity" input: "w" attr { key: "T" value { type: DT_FLOAT } } }
"""


def test_identity_removal_keeps_variable_reads_cond_pivots_and_device_moves():
    gd = graph(VARIABLE, op("y", "Neg", "w/read"),
               ph("p", "DT_BOOL"), ph("x"),
               op("sw", "Switch", "x", "p"), op("pivot", "Identity", "sw:1"),
               const("c", 2.0, inputs=["^pivot"]), op("branch", "Mul", "pivot", "c"),
               op("moved", "Identity", "x", device="/device:CPU:1"), op("m", "Neg", "moved"))
    out = run_pass("identity_removal", gd, fetch=["y", "branch", "m"])
    n = nodes(out)
    assert "w/read" in n                                  # the read of the variable
    assert "pivot" in n and list(n["c"].input) == ["^pivot"]   # live only on the true side
    assert "moved" in n


def test_identity_removal_bypasses_a_single_reader_ref_read_but_not_a_variable_read():
    gd = graph(VARIABLE, const("init_value", 4.0),
               op("init", "Assign", "w", "init_value"), ph("p", "DT_BOOL"),
               op("rs", "RefSwitch", "w", "p"), op("r", "Identity", "rs:1"),
               op("y", "Neg", "r"), op("z", "Neg", "w/read"))
    out = run_pass("identity_removal", gd, fetch=["y", "z"], target=["init"])
    n = nodes(out)
    assert "r" not in n and list(n["y"].input) == ["rs:1"]   # one reader: same schedule
    assert "w/read" in n                                      # the variable's own read
    with Session(out, threads=1) as sess:
        sess.run([], targets=["init"])
        y, z = sess.run(["y", "z"], feed_dict={"p": True})
    assert y == -4.0 and z == -4.0


def test_identity_removal_keeps_targets_and_useful_noops():
    gd = graph(ph("x"), op("a", "Neg", "x"), op("b", "Neg", "x"), op("c", "Neg", "x"),
               op("hub", "NoOp", "^a", "^b", "^c", T=None),
               op("r1", "Neg", "x", "^hub"), op("r2", "Exp", "x", "^hub"),
               op("r3", "Abs", "x", "^hub"),
               op("init", "NoOp", "^a", T=None))
    out = run_pass("identity_removal", gd, fetch=["r1", "r2", "r3"], target=["init"])
    n = nodes(out)
    assert "init" in n                    # a target
    assert "hub" in n                     # 3 in x 3 out: 9 edges instead of 6


# --- arithmetic --------------------------------------------------------------------------------

def test_arithmetic_neutral_elements_and_double_negation():
    gd = graph(ph("x", shape=[2, 2]), const("zero", 0.0), const("one", 1.0),
               op("a", "AddV2", "x", "zero"), op("b", "Mul", "one", "a"),
               op("c", "Sub", "b", "zero"), op("d", "RealDiv", "c", "one"),
               op("e", "Neg", "d"), op("f", "Neg", "e"), op("y", "Exp", "f"))
    out = run_pass("arithmetic", gd, fetch=["y"])
    n = nodes(out)
    assert list(n["y"].input) == ["x"]
    assert not {"a", "b", "c", "d", "f"} & set(n)
    y, = run(out, ["y"], {"x": X2})
    np.testing.assert_allclose(y, np.exp(X2), rtol=1e-6)


def test_arithmetic_respects_broadcasting():
    zeros = np.zeros((2, 2), np.float32)
    gd = graph(ph("unknown"), ph("known", shape=[2, 2]), const("zeros", zeros),
               op("u", "AddV2", "unknown", "zeros"), op("k", "AddV2", "known", "zeros"),
               op("y", "AddN", "u", "k", attrs='attr { key: "N" value { i: 2 } }'))
    out = run_pass("arithmetic", gd, fetch=["y"])
    n = nodes(out)
    assert n["u"].op == "AddV2"        # a scalar fed to 'unknown' becomes [2,2] through zeros
    assert "k" not in n and list(n["y"].input) == ["u", "known"]
    y, = run(out, ["y"], {"unknown": np.float32(1.0), "known": X2})
    np.testing.assert_array_equal(y, 1.0 + X2)


def test_arithmetic_times_zero_only_when_finite():
    gd = graph(ph("f", shape=[2]), ph("i", "DT_INT32", shape=[2]),
               const("fz", 0.0), const("iz", 0, "DT_INT32"),
               op("ff", "Mul", "f", "fz"), op("ii", "Mul", "i", "iz", T="DT_INT32"))
    out = run_pass("arithmetic", gd, fetch=["ff", "ii"])
    assert nodes(out)["ff"].op == "Mul"                  # NaN * 0 is NaN
    np.testing.assert_array_equal(value(out, "ii"), [0, 0])
    ff, ii = run(out, ["ff", "ii"], {"f": np.array([np.nan, 1.0], np.float32), "i": [5, 6]})
    assert np.isnan(ff[0]) and ff[1] == 0.0
    fin = run_pass("arithmetic", gd, fetch=["ff"], assume_finite=True)
    np.testing.assert_array_equal(value(fin, "ff"), [0.0, 0.0])


def test_arithmetic_chain_of_1000_adds_becomes_one_add():
    chain = [ph("x"), const("half", 0.5), op("add_0", "AddV2", "x", "half")]
    chain += [op(f"add_{i}", "AddV2", f"add_{i - 1}", "half") for i in range(1, 1000)]
    gd = graph(*chain)
    out = run_pass("arithmetic", gd, fetch=["add_999"])
    out = run_pass("prune", out, fetch=["add_999"])
    n = nodes(out)
    assert len(n) == 3 and n["add_999"].op == "AddV2"
    const_name = [k for k, v in n.items() if v.op == "Const"][0]
    assert value(out, const_name) == 500.0
    y, = run(out, ["add_999"], {"x": 0.25})
    assert y == 500.25


def test_arithmetic_common_factor_of_addn():
    gd = graph(ph("x"), const("c1", 2.0), const("c2", -3.0), const("c3", 0.5),
               op("m1", "Mul", "x", "c1"), op("m2", "Mul", "c2", "x"),
               op("m3", "Mul", "x", "c3"),
               op("s", "AddN", "m1", "m2", "m3", "x", attrs='attr { key: "N" value { i: 4 } }'))
    out = run_pass("arithmetic", gd, fetch=["s"])
    n = nodes(out)
    assert n["s"].op == "Mul" and not {"m1", "m2", "m3"} & set(n)
    factor = [v for v in n.values() if v.op == "Const" and v.name.startswith("s/")][0]
    assert value(out, factor.name) == 2.0 - 3.0 + 0.5 + 1.0
    s, = run(out, ["s"], {"x": 4.0})
    assert s == 4.0 * 0.5


# --- dead branches -----------------------------------------------------------------------------

COND = [ph("x"), const("pred", True),
        op("sw", "Switch", "x", "pred"),
        op("t", "Identity", "sw:1"), op("f", "Identity", "sw"),
        const("two", 2.0, inputs=["^t"]), op("tv", "Mul", "t", "two"),
        const("three", 3.0, inputs=["^f"]), op("fv", "Mul", "f", "three"),
        op("merge", "Merge", "fv", "tv", attrs='attr { key: "N" value { i: 2 } }'),
        op("y", "Neg", "merge")]


def test_dead_branches_keeps_only_the_taken_side():
    gd = graph(*COND)
    out = run_pass("dead_branches", gd, fetch=["y"])
    n = nodes(out)
    assert not {"f", "three", "fv"} & set(n)             # the false branch is gone
    assert n["merge"].op == "Identity" and list(n["merge"].input) == ["tv"]
    assert n["sw"].op == "Identity"
    y, = run(out, ["y"], {"x": 5.0})
    assert y == -10.0


def test_dead_branches_leaves_a_cond_whose_dead_side_is_fetched():
    gd = graph(*COND)
    out = run_pass("dead_branches", gd, fetch=["y", "fv"])
    assert nodes(out)["sw"].op == "Switch"               # fetching fv must still fail


def test_dead_branches_never_touches_loop_switches():
    gd = graph(*LOOP)
    out = run_pass("constant_folding", gd, fetch=["loop/Exit_acc"])
    out = run_pass("dead_branches", out, fetch=["loop/Exit_acc"])
    assert [n.name for n in out.node if n.op == "Switch"] == ["loop/Switch_i", "loop/Switch_acc"]


def test_dead_branches_removes_a_loop_on_the_untaken_side():
    """cond_with_while with its predicate made a constant: the untaken branch's while loop
    goes whole; results are TensorFlow's for the steps that fed that predicate value."""
    import json

    from conformance import DATA

    from dfg.graphdef.io import load_graphdef
    from dfg.graphdef.tensors import from_numpy

    d = DATA / "cond_with_while"
    case = json.loads((d / "case.json").read_text())
    for step in case["steps"]:
        p = np.load(d / step["feed"]["p:0"])
        gd = load_graphdef(d / "graph.pbtxt")
        pnode = nodes(gd)["p"]
        pnode.op = "Const"
        pnode.attr.clear()
        pnode.attr["dtype"].type = 10
        from_numpy(p, 10, pnode.attr["value"].tensor)
        result = optimize(gd, PassOptions(("choose/Merge:0",), (), ("n:0",)))
        assert not result.warnings
        names = set(nodes(result.graph_def))
        gone, kept = ("pow_loop", "sum_loop") if p else ("sum_loop", "pow_loop")
        assert not any(gone in n for n in names) and any(kept in n for n in names)
        assert not any(n.op == "Switch" and "loop" not in n.name for n in result.graph_def.node)
        got, = run(result.graph_def, ["choose/Merge:0"],
                   {"n:0": np.load(d / step["feed"]["n:0"])})
        np.testing.assert_array_equal(got, np.load(d / step["expect"]["choose/Merge:0"]))


# --- loop invariant ---------------------------------------------------------------------------

def test_loop_invariant_hoists_a_product_of_constant_enters():
    gd = graph(*LOOP)
    out = run_pass("loop_invariant", gd, fetch=["loop/Exit_acc"])
    n = nodes(out)
    assert n["loop/ws"].op == "Enter" and n["loop/ws"].attr["is_constant"].b
    hoisted = n["loop/ws/_hoisted"]
    assert hoisted.op == "Mul" and list(hoisted.input) == ["w", "s"]   # outside the loop
    # acc += w*s, n times: w=3, s=2
    assert run(out, ["loop/Exit_acc"], {"n": np.int32(4)})[0] == 24.0
    assert run(out, ["loop/Exit_acc"], {"n": np.int32(0)})[0] == 0.0


def test_loop_invariant_never_hoists_integer_division():
    gd = graph(*loop_with(op("loop/ws", "FloorDiv", "loop/Enter_w", "loop/Enter_s", T="DT_INT32"),
                          dtype="DT_INT32"))
    out = run_pass("loop_invariant", gd, fetch=["loop/Exit_acc"])
    assert nodes(out)["loop/ws"].op == "FloorDiv"


# --- fold batch norm ---------------------------------------------------------------------------

SCALE = np.array([1.0, 0.5], np.float32)
OFFSET = np.array([0.0, 0.1], np.float32)
MEAN = np.array([0.1, -0.2], np.float32)
VAR = np.array([1.0, 2.0], np.float32)
EPS = 0.001
W1x1 = np.array([[[[1.0, -1.0], [2.0, 0.5], [0.0, 3.0]]]], np.float32)   # HWIO 1x1x3x2


def _bn_graph(is_training: str = "false", fetch_conv: bool = False) -> graph_pb2.GraphDef:
    conv_attrs = ('attr { key: "strides" value { list { i: 1 i: 1 i: 1 i: 1 } } } '
                  'attr { key: "padding" value { s: "VALID" } }')
    bn_attrs = (f'attr {{ key: "U" value {{ type: DT_FLOAT }} }} '
                f'attr {{ key: "epsilon" value {{ f: {EPS} }} }} '
                f'attr {{ key: "is_training" value {{ b: {is_training} }} }}')
    return graph(ph("img", shape=[1, 2, 2, 3]), const("w", W1x1),
                 op("conv", "Conv2D", "img", "w", attrs=conv_attrs),
                 const("scale", SCALE), const("offset", OFFSET), const("mean", MEAN),
                 const("var", VAR),
                 op("bn", "FusedBatchNormV3", "conv", "scale", "offset", "mean", "var",
                    attrs=bn_attrs),
                 op("relu", "Relu", "bn"))


def _bn_expected(img: np.ndarray) -> np.ndarray:
    conv = img.astype(np.float64) @ W1x1[0, 0].astype(np.float64)    # a 1x1 conv: matmul
    return (conv - MEAN) / np.sqrt(VAR + np.float32(EPS)) * SCALE + OFFSET


def test_fold_batch_norm_into_conv_weights():
    img = np.random.default_rng(1).standard_normal((1, 2, 2, 3)).astype(np.float32)
    out = run_pass("fold_batch_norm", _bn_graph(), fetch=["relu"])
    n = nodes(out)
    assert n["bn"].op == "BiasAdd" and n["conv"].op == "Conv2D"
    assert not {"scale", "offset", "mean", "var", "w"} & set(n)
    got, = run(out, ["relu"], {"img": img})
    np.testing.assert_allclose(got, np.maximum(_bn_expected(img), 0), rtol=1e-5, atol=1e-6)


def test_fold_batch_norm_without_foldable_conv_becomes_scale_and_shift():
    img = np.random.default_rng(2).standard_normal((1, 2, 2, 3)).astype(np.float32)
    out = run_pass("fold_batch_norm", _bn_graph(), fetch=["relu", "conv"])   # conv fetched
    n = nodes(out)
    assert n["conv"].op == "Conv2D" and list(n["conv"].input) == ["img", "w"]
    assert n["bn"].op == "BiasAdd" and n[n["bn"].input[0]].op == "Mul"
    got, = run(out, ["relu"], {"img": img})
    np.testing.assert_allclose(got, np.maximum(_bn_expected(img), 0), rtol=1e-5, atol=1e-6)


def test_fold_batch_norm_leaves_training_mode_alone():
    out = run_pass("fold_batch_norm", _bn_graph(is_training="true"), fetch=["relu"])
    assert nodes(out)["bn"].op == "FusedBatchNormV3"


# --- debug strip -------------------------------------------------------------------------------

def test_debug_strip_removes_asserts_and_checks():
    gd = graph(ph("x"), const("zero", 0.0), op("pos", "Greater", "x", "zero"),
               op("check", "Assert", "pos", "x", T=None,
                  attrs='attr { key: "T" value { list { type: DT_FLOAT } } }'),
               op("num", "CheckNumerics", "x", attrs='attr { key: "message" value { s: "m" } }'),
               op("y", "Sqrt", "num", "^check"))
    with pytest.raises(OpError):
        run(gd, ["y"], {"x": -4.0})
    out = run_pass("debug_strip", gd, fetch=["y"])
    n = nodes(out)
    assert "check" not in n and "num" not in n
    assert list(n["y"].input) == ["x", "^pos"]          # still waits for the check's inputs
    y, = run(out, ["y"], {"x": -4.0})
    assert np.isnan(y)


def test_debug_strip_is_off_by_default_so_failing_asserts_still_fail():
    from conformance import DATA, run_case

    d = DATA / "error_assert"
    result = optimize(d / "graph.pbtxt", PassOptions(("y:0",), (), ("x:0",)))
    assert any(n.op == "Assert" for n in result.graph_def.node)
    run_case(d, threads=2, graph=result.graph_def)     # step 1 still raises, as in TF
    stripped = optimize(d / "graph.pbtxt", PassOptions(("y:0",), (), ("x:0",)),
                        passes=[*DEFAULT_PASSES, "debug_strip"])
    assert not any(n.op == "Assert" for n in stripped.graph_def.node)
    y, = run(stripped.graph_def, ["y"], {"x": np.array([4.0, -1.0, 9.0], np.float32)})
    assert y[0] == 2.0 and np.isnan(y[1]) and y[2] == 3.0


# --- the pipeline ------------------------------------------------------------------------------

FOLDABLE = [ph("x"), const("a", 2.0), const("b", 3.0), op("ab", "Mul", "a", "b"),
            op("i", "Identity", "ab"), op("y", "Mul", "x", "i")]


def _with(name: str, fn, default: bool = True) -> dict:
    table = dict(PASSES)
    table[name] = PassInfo(name, fn, default, "test pass")
    return table


def test_a_pass_that_raises_is_skipped_with_a_warning_and_the_output_is_valid():
    calls = []

    def boom(graph, options):
        calls.append(1)
        raise RuntimeError("kaboom")

    result = optimize(graph(*FOLDABLE), PassOptions(("y",)), table=_with("boom", boom))
    assert calls == [1]                                   # never retried in later rounds
    assert any("'boom'" in w and "kaboom" in w for w in result.warnings)
    rec = [r for r in result.records if r.name == "boom"][0]
    assert rec.status == "failed" and rec.nodes_after == rec.nodes_before
    out = result.graph_def
    assert not [d for d in validate(Graph(out)) if d.is_error]
    # the other passes still did their work: a*b folded, the Identity gone
    n = nodes(out)
    assert not any(nd.op == "Identity" for nd in n.values())
    assert value(out, n["y"].input[1]) == 6.0 and len(n) == 3     # x, 6.0, y
    assert run(out, ["y"], {"x": 2.0})[0] == 12.0


def test_a_pass_producing_an_invalid_graph_is_rejected():
    def breaks(graph, options):
        out = graph_pb2.GraphDef()
        out.CopyFrom(graph.graph_def)
        out.node[-1].input.append("no_such_node")
        return out

    result = optimize(graph(*FOLDABLE), PassOptions(("y",)), table=_with("breaks", breaks))
    rec = [r for r in result.records if r.name == "breaks"][0]
    assert rec.status == "rejected" and "invalid graph" in rec.message
    assert not [d for d in validate(Graph(result.graph_def)) if d.is_error]


def test_a_pass_losing_a_fetch_or_mutating_its_input_is_rejected():
    def drops_fetch(graph, options):
        out = graph_pb2.GraphDef()
        out.CopyFrom(graph.graph_def)
        keep = [n for n in out.node if n.name != "y"]
        del out.node[:]
        out.node.extend(keep)
        return out

    def mutates(graph, options):
        graph.graph_def.node[0].name = "renamed"
        return graph.graph_def

    for name, fn, words in (("drops", drops_fetch, "removed 'y'"),
                            ("mutates", mutates, "modified its input")):
        result = optimize(graph(*FOLDABLE), PassOptions(("y",)), table=_with(name, fn))
        assert any(words in w for w in result.warnings), result.warnings
        assert "y" in nodes(result.graph_def) and "x" in nodes(result.graph_def)
        assert run(result.graph_def, ["y"], {"x": 1.0})[0] == 6.0


def test_check_end_restores_an_input_a_pass_mutated_and_reruns_with_every_check():
    from dfg.graphdef.passes.pipeline import run_passes

    def mutates(graph, options):
        graph.graph_def.node[0].name = "renamed"
        return graph.graph_def

    gd = graph(*FOLDABLE)
    before = gd.SerializeToString(deterministic=True)
    g = Graph(gd)
    result = run_passes(g, PassOptions(("y",)), table=_with("mutates", mutates), check="end")
    assert gd.SerializeToString(deterministic=True) == before      # the caller's graph
    assert "x" in g and "renamed" not in g                          # and its index
    assert any("modified its input" in w for w in result.warnings), result.warnings
    assert run(result.graph_def, ["y"], {"x": 1.0})[0] == 6.0


@pytest.mark.parametrize("case", ["cond_nested", "while_with_cond", "keras_frozen_cnn", "map_fn",
                                  "gradients", "bench_add_chain"])
def test_check_end_records_the_same_changes_as_check_each(case):
    # check="end" takes a new graph as a change without comparing bytes: every pass must
    # hand back its input when it has nothing to do, or the records would differ
    import json
    from pathlib import Path

    from dfg.graphdef.io import load_graph
    from dfg.graphdef.passes.pipeline import run_passes

    d = Path(__file__).parent / "data" / "conformance" / case
    fetches = json.loads((d / "case.json").read_text())["steps"][-1]["fetch"]
    runs = {check: run_passes(load_graph(d / "graph.pbtxt"), PassOptions(tuple(fetches)),
                              check=check) for check in ("each", "end")}
    each, end = ([(r.round, r.name, r.changed) for r in runs[k].records] for k in runs)
    assert each == end
    assert any(changed for _r, _n, changed in each)
    assert runs["each"].graph_def.SerializeToString(deterministic=True) == \
        runs["end"].graph_def.SerializeToString(deterministic=True)


def test_pipeline_repeats_until_nothing_changes_and_records_counts():
    result = optimize(graph(*FOLDABLE), PassOptions(("y",)))
    assert result.converged and result.rounds >= 2
    last = [r for r in result.records if r.round == result.rounds]
    assert last and not any(r.changed for r in last)
    first = result.records[1]   # records[0]: lower_functional, a no-op without functions
    assert (first.name, first.nodes_before, first.edges_before) == ("prune", 6, 5)
    assert result.nodes_after == 3 and result.edges_after == 2     # x, 6.0, y
    bounded = optimize(graph(*FOLDABLE), PassOptions(("y",)), max_rounds=1)
    assert bounded.rounds == 1


def test_pipeline_rejects_unknown_names():
    from dfg.graphdef.errors import NotFoundError, UsageError

    with pytest.raises(NotFoundError, match="did you mean 'y'"):
        optimize(graph(*FOLDABLE), PassOptions(("yy",)))
    with pytest.raises(UsageError, match="unknown pass 'nope'"):
        optimize(graph(*FOLDABLE), PassOptions(("y",)), passes=["nope"])
    with pytest.raises(UsageError):
        optimize(graph(*FOLDABLE), PassOptions())


@pytest.mark.parametrize("name", list(PASSES))
def test_every_pass_is_pure_and_keeps_fetched_names(name):
    # a cond, a loop and foldable arithmetic in one graph; run_pass checks the input is
    # untouched and the output valid
    gd = graph(*COND, *LOOP, const("a", 2.0), const("b", 3.0), op("ab", "Mul", "a", "b"),
               op("i", "Identity", "ab"), op("out", "Mul", "y", "i"))
    fetches = ["out", "ab", "loop/Exit_acc"]
    out = run_pass(name, gd, fetch=fetches)
    assert {"out", "ab", "loop/Exit_acc"} <= set(nodes(out))
    got = run(out, fetches, {"x": 5.0, "n": np.int32(2)})
    assert [float(v) for v in got] == [-60.0, 6.0, 12.0]


# --- verify ------------------------------------------------------------------------------------

def test_random_feeds_follow_dtype_and_shape():
    gd = graph(ph("x", shape=[-1, 3]), ph("n", "DT_INT32", shape=[]), ph("free"),
               op("y", "Mul", "x", "x"), op("m", "Neg", "n", T="DT_INT32"))
    feeds = random_feeds(Graph(gd), ["y", "m"])
    assert set(feeds) == {"x:0", "n:0"}             # 'free' is not needed
    assert feeds["x:0"].shape == (2, 3) and feeds["x:0"].dtype == np.float32
    assert feeds["n:0"].shape == () and feeds["n:0"].dtype == np.int32
    assert 1 <= feeds["n:0"] <= 4
    again = random_feeds(Graph(gd), ["y", "m"])
    np.testing.assert_array_equal(feeds["x:0"], again["x:0"])    # seeded


def test_verify_accepts_equivalent_graphs_and_names_the_first_difference():
    gd = graph(*FOLDABLE)
    good = optimize(gd, PassOptions(("y",))).graph_def
    assert verify(gd, good, ["y"]).ok
    bad = graph(ph("x"), const("k", 6.5), op("y", "Mul", "x", "k"))
    res = verify(gd, bad, ["y"])
    assert not res.ok and res.first_difference == "y" and "differs" in res.message


# --- random graphs: the optimized graph computes what the original does ----------------------

def _random_graph(seed: int) -> tuple[graph_pb2.GraphDef, list[str], list[str], dict]:
    """Placeholders (one of unknown shape), constants (0, 1 and random, some repeated),
    elementwise ops, AddN, Identity/StopGradient, control edges; some fetches and one fed
    intermediate (fed in half of the runs)."""
    import random

    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    text = [ph("x0", shape=[2, 3]), ph("x1")]
    names = ["x0", "x1"]
    for i in range(rng.randint(2, 5)):
        v = rng.choice([np.zeros((2, 3)), np.ones((2, 3)), np.float32(0), np.float32(1),
                        nrng.standard_normal((2, 3)), nrng.standard_normal(3)])
        text.append(const(f"c{i}", np.asarray(v, np.float32)))
        names.append(f"c{i}")
    for i in range(rng.randint(5, 30)):
        kind = rng.choice(["AddV2", "Mul", "Sub", "Maximum", "Neg", "Tanh", "AddN", "Identity",
                           "StopGradient", "RealDiv"])
        if kind in ("Neg", "Tanh", "Identity", "StopGradient"):
            ins = [rng.choice(names)]
        elif kind == "AddN":
            ins = [rng.choice(names)] * rng.randint(1, 3)     # AddN needs equal shapes
        elif kind == "RealDiv":
            ins = [rng.choice(names), rng.choice([n for n in names if n.startswith("c")])]
        else:
            ins = [rng.choice(names), rng.choice(names)]
        ctrl = [f"^{rng.choice(names)}"] if rng.random() < 0.2 else []
        extra = f'attr {{ key: "N" value {{ i: {len(ins)} }} }}' if kind == "AddN" else ""
        text.append(op(f"n{i}", kind, *ins, *ctrl, attrs=extra))
        names.append(f"n{i}")
    inner = [n for n in names if n.startswith("n")]
    fetches = sorted(set(rng.sample(inner, k=min(len(inner), rng.randint(1, 4)))))
    fed = [rng.choice(inner)] if rng.random() < 0.5 else []
    feeds = {"x0:0": nrng.standard_normal((2, 3)).astype(np.float32),
             "x1:0": nrng.standard_normal(3).astype(np.float32)}
    gd = graph_pb2.GraphDef()
    text_format.Parse("\n".join(text), gd)
    return gd, [f"{f}:0" for f in fetches], [f"{f}:0" for f in fed], feeds


@pytest.mark.parametrize("seed", range(150))
def test_optimized_random_graphs_compute_the_same_values(seed: int):
    from dfg.executor.reference import evaluate

    gd, fetches, fed, feeds = _random_graph(seed)
    result = optimize(gd, PassOptions(tuple(fetches), (), tuple(fed)))
    assert not result.warnings, result.warnings
    for extra in ({}, {f: np.full((2, 3), 0.5, np.float32) for f in fed}):
        all_feeds = {**feeds, **extra}
        try:
            with np.errstate(all="ignore"):     # x/0 is inf, as in TensorFlow
                expected = evaluate(Graph(gd), fetches, all_feeds)   # the reference interpreter
        except OpError as e:      # then the optimized graph must fail the same way
            with pytest.raises(OpError) as again:
                run(result.graph_def, fetches, all_feeds)
            assert again.value.tf_name == e.tf_name
            continue
        except ValueError:
            continue   # a raw kernel error in the reference interpreter: nothing to compare
        got = run(result.graph_def, fetches, all_feeds)
        for f, g, e in zip(fetches, got, expected):
            assert np.asarray(g).shape == np.asarray(e).shape, f
            assert np.asarray(g).dtype == np.asarray(e).dtype, f
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=f)
