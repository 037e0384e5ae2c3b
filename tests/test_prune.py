"""dfg.graphdef.prune: the node set equals TensorFlow's extract_sub_graph on every conformance
case; feeds cut the graph into Placeholders as strip_unused does; loops stay whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    InvalidArgumentError,
    InvalidGraphError,
    NotFoundError,
    UsageError,
)
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.prune import dependencies, prune
from dfg.graphdef.tensors import shape_from_proto
from dfg.graphdef.validate import validate
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"
CASES = sorted(p.parent.name for p in DATA.glob("*/case.json"))


def make(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def ph(name: str, dtype: str = "DT_FLOAT") -> str:
    return (f'node {{ name: "{name}" op: "Placeholder" '
            f'attr {{ key: "dtype" value {{ type: {dtype} }} }} }}')


def op(name: str, kind: str, *inputs: str, t: str = "DT_FLOAT", extra: str = "") -> str:
    ins = " ".join(f'input: "{i}"' for i in inputs)
    return (f'node {{ name: "{name}" op: "{kind}" {ins} '
            f'attr {{ key: "T" value {{ type: {t} }} }} {extra} }}')


def names(gd) -> list[str]:
    return [n.name for n in gd.node]


def node(gd, name: str):
    (n,) = [n for n in gd.node if n.name == name]
    return n


def clean(gd) -> None:
    """The pruned graph validates with no errors."""
    errors = [d for d in validate(Graph(gd)) if d.is_error]
    assert errors == []


# a, b -> c = a*b, d = a+b -> e = c+d; f reads e; g is unrelated; t runs after d
DAG = (ph("a") + ph("b") + op("c", "Mul", "a", "b") + op("d", "AddV2", "a", "b")
       + op("e", "AddV2", "c", "d") + op("f", "Identity", "e") + ph("g")
       + 'node { name: "t" op: "NoOp" input: "^d" }')


# --- TensorFlow's extract_sub_graph -------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_same_nodes_as_extract_sub_graph(case):
    spec = json.loads((DATA / case / "case.json").read_text())["prune"]
    g = load_graph(DATA / case / "graph.pbtxt")
    assert dependencies(g, spec["fetch"]) == set(spec["nodes"])
    gd = prune(g, spec["fetch"])
    assert sorted(names(gd)) == spec["nodes"]
    # file order is kept, versions and library too, and the result is a valid graph
    order = {n.name: n.index for n in g.nodes}
    assert [order[n] for n in names(gd)] == sorted(order[n] for n in names(gd))
    assert gd.versions == g.graph_def.versions
    assert gd.library == g.graph_def.library
    clean(gd)


def test_some_cases_actually_drop_nodes():
    # guards the test above against a prune that keeps everything
    dropped = 0
    for case in CASES:
        spec = json.loads((DATA / case / "case.json").read_text())["prune"]
        g = load_graph(DATA / case / "graph.pbtxt")
        dropped += len(g) > len(spec["nodes"])
    assert dropped >= 5


# --- small graphs ------------------------------------------------------------------------------

def test_keeps_exactly_the_ancestors():
    g = make(DAG)
    assert dependencies(g, ["e"]) == {"a", "b", "c", "d", "e"}
    assert dependencies(g, ["e:0"]) == {"a", "b", "c", "d", "e"}
    assert dependencies(g, ["c"]) == {"a", "b", "c"}
    gd = prune(g, ["c", "g"])
    assert names(gd) == ["a", "b", "c", "g"]


def test_targets_and_control_edges():
    g = make(DAG)
    assert dependencies(g, [], targets=["t"]) == {"t", "d", "a", "b"}
    assert names(prune(g, ["c"], targets=["t"])) == ["a", "b", "c", "d", "t"]


def test_versions_and_library_are_kept():
    g = make(DAG + 'versions { producer: 27 min_consumer: 12 } '
             'library { function { signature { name: "fn" } } }')
    gd = prune(g, ["c"])
    assert (gd.versions.producer, gd.versions.min_consumer) == (27, 12)
    # no kept node calls fn: the library keeps only reachable functions (test_functions.py)
    assert [f.signature.name for f in gd.library.function] == []


def test_missing_input_only_matters_when_needed():
    g = make(DAG + op("bad", "Identity", "ghost"))
    assert names(prune(g, ["c"])) == ["a", "b", "c"]
    with pytest.raises(InvalidGraphError, match="ghost"):
        prune(g, ["bad"])


# --- feeds --------------------------------------------------------------------------------------

def test_feed_replaces_producer_with_placeholder_of_same_name():
    g = make(DAG)
    gd = prune(g, ["e"], feeds=["c"])
    # c is an input now; a and b are still needed by d
    assert names(gd) == ["a", "b", "c", "d", "e"]
    c = node(gd, "c")
    assert c.op == "Placeholder" and list(c.input) == []
    assert c.attr["dtype"].type == D.DT_FLOAT
    assert c.attr["shape"].shape.unknown_rank
    assert list(node(gd, "e").input) == ["c", "d"]
    clean(gd)
    # feeding both operands of e drops everything upstream
    gd = prune(g, ["e"], feeds=["c:0", "d"])
    assert names(gd) == ["c", "d", "e"]
    assert dependencies(g, ["e"], feeds=["c", "d"]) == {"e"}
    clean(gd)


def test_feed_dtype_comes_from_opdef_and_attrs():
    g = make(ph("i", "DT_INT32") + 'node { name: "f" op: "Cast" input: "i" '
             'attr { key: "SrcT" value { type: DT_INT32 } } '
             'attr { key: "DstT" value { type: DT_HALF } } }'
             + op("y", "Neg", "f", t="DT_HALF"))
    gd = prune(g, ["y"], feeds=["f"])
    assert node(gd, "f").attr["dtype"].type == D.DT_HALF
    assert names(gd) == ["f", "y"]
    clean(gd)


def test_feed_shape_sources():
    shapes = ('attr { key: "_output_shapes" value { list { shape { dim { size: 2 } '
              'dim { size: -1 } } } } }')
    const = ('node { name: "k" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
             'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { '
             'dim { size: 3 } } float_val: 1 } } } }')
    pwd = ('node { name: "p" op: "PlaceholderWithDefault" input: "k" '
           'attr { key: "dtype" value { type: DT_FLOAT } } '
           'attr { key: "shape" value { shape { dim { size: -1 } } } } }')
    g = make(ph("a") + op("s", "Relu", "a", extra=shapes) + const + pwd
             + op("x", "Neg", "s") + op("y", "Neg", "k") + op("z", "Neg", "p"))
    gd = prune(g, ["x", "y", "z"], feeds=["s", "k", "p"])
    assert shape_from_proto(node(gd, "s").attr["shape"].shape) == (2, None)
    assert shape_from_proto(node(gd, "s").attr["_output_shapes"].list.shape[0]) == (2, None)
    assert shape_from_proto(node(gd, "k").attr["shape"].shape) == (3,)
    assert shape_from_proto(node(gd, "p").attr["shape"].shape) == (None,)
    assert all(node(gd, n).op == "Placeholder" for n in "skp")
    assert names(gd) == ["s", "k", "p", "x", "y", "z"]
    clean(gd)


def test_feed_output_k_gets_its_own_placeholder():
    split = ('node { name: "s" op: "Split" input: "dim" input: "x" '
             'attr { key: "num_split" value { i: 2 } } '
             'attr { key: "T" value { type: DT_FLOAT } } }')
    g = make(ph("dim", "DT_INT32") + ph("x") + split
             + op("y", "Neg", "s:1") + op("z", "Neg", "s"))
    # only s:1 is needed and it is fed: s and its inputs go
    gd = prune(g, ["y"], feeds=["s:1"])
    assert names(gd) == ["s/feed_1", "y"]
    assert list(node(gd, "y").input) == ["s/feed_1"]
    assert node(gd, "s/feed_1").attr["dtype"].type == D.DT_FLOAT
    clean(gd)
    # s:0 is still needed: s stays, its readers of s:1 move to the Placeholder
    gd = prune(g, ["y", "z"], feeds=["s:1"])
    assert names(gd) == ["dim", "x", "s/feed_1", "s", "y", "z"]
    assert list(node(gd, "z").input) == ["s"]
    assert dependencies(g, ["y", "z"], feeds=[("s", 1)]) == {"dim", "x", "s", "y", "z"}
    clean(gd)
    with pytest.raises(UsageError, match="s:1"):
        prune(g, ["s:1"], feeds=["s:1"])


def test_placeholder_name_does_not_collide():
    split = ('node { name: "s" op: "Split" input: "dim" input: "x" '
             'attr { key: "num_split" value { i: 2 } } '
             'attr { key: "T" value { type: DT_FLOAT } } }')
    g = make(ph("dim", "DT_INT32") + ph("x") + split + ph("s/feed_1") + op("y", "Neg", "s:1"))
    gd = prune(g, ["y", "s/feed_1"], feeds=["s:1"])
    assert list(node(gd, "y").input) == ["s/feed_1_1"]
    clean(gd)


def test_control_edge_keeps_a_fed_node_running():
    # TensorFlow still runs a fed node that something depends on by control
    g = make(DAG + 'node { name: "after_c" op: "NoOp" input: "^c" }')
    assert dependencies(g, ["e"], feeds=["c"], targets=["after_c"]) == {
        "a", "b", "c", "d", "e", "after_c"}
    gd = prune(g, ["e"], feeds=["c"], targets=["after_c"])
    assert node(gd, "c").op == "Mul"
    assert list(node(gd, "e").input) == ["c/feed_0", "d"]
    assert node(gd, "c/feed_0").op == "Placeholder"
    clean(gd)


def test_control_edge_on_fed_placeholder_needs_nothing():
    # TensorFlow moves a fed Placeholder's control edges to the feed
    g = make(ph("a") + 'node { name: "t" op: "NoOp" input: "^a" }')
    assert dependencies(g, [], feeds=["a"], targets=["t"]) == {"t"}
    gd = prune(g, [], feeds=["a"], targets=["t"])
    assert names(gd) == ["a", "t"]
    clean(gd)


def test_fetching_a_fed_tensor_keeps_just_its_placeholder():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    gd = prune(g, ["counter/Exit"], feeds=["counter/Exit"])
    assert names(gd) == ["counter/Exit"]
    assert node(gd, "counter/Exit").op == "Placeholder"
    assert node(gd, "counter/Exit").attr["dtype"].type == D.DT_INT32


def test_feeding_a_const_before_a_loop_keeps_the_loop():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    gd = prune(g, ["counter/Exit"], feeds=["start", "n:0"])
    assert sorted(names(gd)) == sorted(n.name for n in g.nodes)
    start = node(gd, "start")
    assert start.op == "Placeholder" and start.attr["dtype"].type == D.DT_INT32
    assert shape_from_proto(start.attr["shape"].shape) == ()
    assert node(gd, "n") == g.get("n").proto  # a fed Placeholder stays as it was
    clean(gd)


def test_cannot_feed_inside_a_loop():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    with pytest.raises(InvalidArgumentError, match="counter/while_context"):
        prune(g, ["counter/Exit"], feeds=["counter/Add"])
    with pytest.raises(InvalidArgumentError):
        dependencies(g, ["counter/Exit"], feeds=[("counter/Identity", 0)])


def test_ref_feeds():
    g = load_graph(DATA / "variables_ref" / "graph.pbtxt")
    # a ref read as a value: the Placeholder holds the plain dtype and the variable's shape
    gd = prune(g, ["w/read"], feeds=["w"])
    assert names(gd) == ["w", "w/read"]
    w = node(gd, "w")
    assert w.op == "Placeholder" and w.attr["dtype"].type == D.DT_FLOAT
    assert w.attr["shape"].shape == g.get("w").attr["shape"].shape
    clean(gd)
    # AssignAdd needs the variable itself: a fed value cannot stand in for it
    with pytest.raises(InvalidArgumentError, match="ref"):
        prune(g, ["w_after_add"], feeds=["w"])


# --- loops stay whole ------------------------------------------------------------------------

def test_in_loop_fetch_pulls_in_the_loop_condition():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    everything_but_exit = {n.name for n in g.nodes} - {"counter/Exit"}
    # Less/Enter alone would be n and the Enter; the loop needs its condition to run
    assert dependencies(g, ["counter/Less/Enter"]) == everything_but_exit
    # the body reaches the whole loop through the NextIteration back edge
    assert dependencies(g, ["counter/Add/y"]) == everything_but_exit
    clean(prune(g, ["counter/Less/Enter"]))


def test_one_exit_of_a_multi_variable_loop():
    g = load_graph(DATA / "while_sum_squares" / "graph.pbtxt")
    kept = dependencies(g, ["sumsq/Exit"])
    assert "sumsq/LoopCond" in kept
    # every Merge kept has both its Enter and its NextIteration
    for name in kept:
        n = g.get(name)
        if n.op == "Merge":
            assert {src for src, _ in n.inputs} <= kept
    clean(prune(g, ["sumsq/Exit"]))


# --- errors --------------------------------------------------------------------------------------

def test_missing_fetch_suggests_a_name():
    g = make(DAG)
    with pytest.raises(NotFoundError, match="did you mean 'e'"):
        prune(g, ["ee"])
    with pytest.raises(NotFoundError, match="ghost"):
        dependencies(g, ["e"], feeds=["ghost:0"])
    with pytest.raises(NotFoundError, match="did you mean 't'"):
        prune(g, ["e"], targets=["tt"])


@pytest.mark.parametrize("bad", ["", "^e", "e:x", "e:-1", "a b"])
def test_malformed_tensor_names_are_usage_errors(bad):
    with pytest.raises(UsageError):
        prune(make(DAG), [bad])


def test_output_index_out_of_range():
    with pytest.raises(NotFoundError, match="1 output"):
        prune(make(DAG), ["e:1"])
    with pytest.raises(NotFoundError):
        prune(make(DAG), ["e"], feeds=["c:2"])


def test_target_must_be_a_node_name_and_something_must_be_kept():
    with pytest.raises(UsageError, match="try 't'"):
        prune(make(DAG), [], targets=["t:0"])
    with pytest.raises(UsageError):
        prune(make(DAG), [])
