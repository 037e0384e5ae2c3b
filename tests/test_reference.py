"""The reference interpreter (executor/reference.py) is right: it reproduces TensorFlow's
outputs on every conformance case (v1 control flow and TF2 cases, steps in one Reference so
variables carry over), and hand-made graphs give what math says, including the corners of
TensorFlow's control-flow rules (dead branches, dead loops, loop constants, Merge, control
edges from dead nodes, ControlTrigger). Graphs that cannot finish are reported quickly, by the
reference and by ``Session.run``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conformance import DATA, assert_close, case_dirs, load_case, missing_kernels
from cputime import cpu_seconds

from dfg.executor import Session
from dfg.executor.reference import Reference, evaluate
from dfg.graphdef import builder as B
from dfg.graphdef.errors import InvalidArgumentError, OpError
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.schemas import graph_pb2

TF2 = DATA.parent / "tf2"
CASES = case_dirs() + case_dirs(TF2)


@pytest.mark.parametrize("case", CASES, ids=[f"{d.parent.name}/{d.name}" for d in CASES])
def test_reference_reproduces_tensorflow(case: Path) -> None:
    missing = missing_kernels(case)
    if missing:
        pytest.skip("no kernel for " + ", ".join(missing))
    spec = load_case(case)
    ref = Reference(load_graph(case / "graph.pbtxt"))
    for i, step in enumerate(spec["steps"]):
        feed = {k: np.load(case / v, allow_pickle=False) for k, v in step["feed"].items()}
        if step["expect_error"]:
            with pytest.raises(OpError) as ei:
                ref.run(step["fetch"], feed, step["target"])
            assert ei.value.tf_name == step["expect_error"], f"step {i}: {ei.value}"
            continue
        out = ref.run(step["fetch"], feed, step["target"])
        for name, value in zip(step["fetch"], out):
            assert isinstance(value, np.ndarray), f"step {i} {name}: {type(value).__name__}"
            expected = np.load(case / step["expect"][name], allow_pickle=False)
            assert_close(value, expected, spec["rtol"], spec["atol"], f"step {i} {name}")


# --- hand-made graphs, expected values from math ------------------------------------------

def test_nested_loops_count_pairs() -> None:
    # sum over i < n of (number of j < i) = n (n - 1) / 2; the inner bound is the outer counter
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def outer(i, total):
            _, inner = B.while_loop(lambda j, t: j < i, lambda j, t: [j + 1, t + 1],
                                    [B.constant(np.int32(0)), total])
            return [i + 1, inner]

        _, total = B.while_loop(lambda i, t: i < n, outer,
                                [B.constant(np.int32(0)), B.constant(np.int32(0))])
    ref = Reference(g.as_graph_def())
    for k in (0, 1, 2, 5, 9):
        assert int(ref.run(total.name, {"n:0": k})) == k * (k - 1) // 2


def test_loop_constant_is_seen_in_every_iteration() -> None:
    g = B.Graph()
    with g.as_default():
        c = B.placeholder("float64", [2], name="c")
        _, acc = B.while_loop(lambda i, a: i < 5, lambda i, a: [i + 1, a + c],
                              [B.constant(np.int32(0)), B.zeros([2], "float64")])
    got = evaluate(_dfg_graph(g), [acc.name], {"c:0": np.array([1.5, -2.0])})[0]
    np.testing.assert_array_equal(got, [7.5, -10.0])


def _dfg_graph(g: B.Graph) -> Graph:
    return Graph(g.as_graph_def())


def test_loop_on_the_untaken_branch_is_dead_and_the_merge_takes_the_other() -> None:
    # the Enters of the loop get dead inputs: the loop's Merges are dead (TensorFlow's dead
    # Enter rule), its Exits dead, and the cond's Merge takes the taken branch
    g = B.Graph()
    with g.as_default():
        p = B.placeholder("bool", [], name="p")
        x = B.placeholder("int32", [], name="x")

        def looping():
            return B.while_loop(lambda i: i < 10, lambda i: i + x, [x])

        out = B.cond(p, looping, lambda: x * 100)
    ref = Reference(g.as_graph_def())
    assert int(ref.run(out.name, {"p:0": False, "x:0": 3})) == 300
    assert int(ref.run(out.name, {"p:0": True, "x:0": 3})) == 12     # 3, 6, 9, 12
    assert int(ref.run(out.name, {"p:0": True, "x:0": 11})) == 11    # zero iterations
    # the dead loop finishes (dead, not stuck): its Exit is a dead fetch
    exit_name = next(n.name for n in g.as_graph_def().node if n.op == "Exit")
    for runner in (ref, Session(g.as_graph_def(), threads=2)):
        with pytest.raises(InvalidArgumentError, match="is dead"):
            runner.run(exit_name, {"p:0": False, "x:0": 3})


def test_dead_fetch_is_an_error_naming_it() -> None:
    g = B.Graph()
    with g.as_default():
        p = B.placeholder("bool", [], name="p")
        x = B.placeholder("float32", [], name="x")
        _f, t = B.switch(x, p)
        B.identity(t, name="y")
    ref = Reference(g.as_graph_def())
    assert float(ref.run("y", {"p:0": True, "x:0": 2.0})) == 2.0
    with pytest.raises(InvalidArgumentError, match="fetch 'y:0' is dead"):
        ref.run("y", {"p:0": False, "x:0": 2.0})


def _node(gd: graph_pb2.GraphDef, name: str, op: str, inputs=(), **attrs) -> None:
    n = gd.node.add()
    n.name, n.op = name, op
    n.input.extend(inputs)
    for k, v in attrs.items():
        if k in ("T", "dtype"):
            n.attr[k].type = v
        elif k == "N":
            n.attr[k].i = v
        elif k == "float":
            n.attr["value"].tensor.dtype = 1
            n.attr["value"].tensor.float_val.append(v)
        elif k == "bool":
            n.attr["value"].tensor.dtype = 10
            n.attr["value"].tensor.bool_val.append(v)


def _dead_control_graph() -> graph_pb2.GraphDef:
    gd = graph_pb2.GraphDef()
    _node(gd, "x", "Const", dtype=1, float=2.0)
    _node(gd, "p", "Const", dtype=10, bool=False)
    _node(gd, "s", "Switch", ["x", "p"], T=1)          # s:1 is dead (p is false)
    _node(gd, "t", "Identity", ["s:1"], T=1)           # dead
    _node(gd, "after_dead", "Const", ["^t"], dtype=1, float=5.0)     # dead: control from t
    _node(gd, "after_switch", "Const", ["^s"], dtype=1, float=6.0)   # live: s itself ran
    _node(gd, "trigger", "ControlTrigger", ["^t"])                    # never dead
    _node(gd, "after_trigger", "Const", ["^trigger"], dtype=1, float=7.0)
    _node(gd, "m", "Merge", ["t", "s:0"], T=1, N=2)    # first live input: s:0, index 1
    _node(gd, "all_dead", "Merge", ["t", "t"], T=1, N=2)
    return gd


def test_control_edges_carry_deadness_except_into_control_trigger_and_merge_picks_live() -> None:
    ref = Reference(_dead_control_graph())
    with pytest.raises(InvalidArgumentError, match="dead"):
        ref.run("after_dead")
    with pytest.raises(InvalidArgumentError, match="dead"):
        ref.run("all_dead")
    v, idx, a, b = ref.run(["m:0", "m:1", "after_switch", "after_trigger"])
    assert float(v) == 2.0 and int(idx) == 1 and idx.dtype == np.int32
    assert float(a) == 6.0 and float(b) == 7.0


def test_session_agrees_on_the_dead_control_corners() -> None:
    with Session(_dead_control_graph(), threads=2) as sess:
        v, idx, a, b = sess.run(["m:0", "m:1", "after_switch", "after_trigger"])
        assert (float(v), int(idx), float(a), float(b)) == (2.0, 1, 6.0, 7.0)
        for dead in ("after_dead", "all_dead"):
            with pytest.raises(InvalidArgumentError, match="dead"):
                sess.run(dead)


def test_variables_live_across_runs_and_a_fetched_ref_is_its_value() -> None:
    g = B.Graph()
    with g.as_default():
        v = B.variable(np.array([1, 2], np.int32), name="v")
        n = B.placeholder("int32", [], name="n")

        def body(i):
            add = B.apply_op("AssignAdd", [_ref_enter(v), B.constant(np.array([10, 20],
                                                                                np.int32))],
                             {"use_locking": True}).outputs[0]
            return B.with_dependencies([add], i + 1)

        done = B.while_loop(lambda i: i < n, body, [B.constant(np.int32(0))])
        init = B.global_variables_initializer()
    gd = g.as_graph_def()
    ref = Reference(gd)
    ref.run([], targets=[init.name])
    for _ in range(3):
        ref.run(done.name, {"n:0": 2})
    value = ref.run("v:0")       # the VariableV2 itself: a ref, fetched as its value
    assert isinstance(value, np.ndarray)
    np.testing.assert_array_equal(value, [1 + 60, 2 + 120])
    with Session(gd, threads=8) as sess:    # the Session run the same number of times
        sess.run([], targets=[init.name])
        for _ in range(3):
            sess.run(done.name, {"n:0": 2})
        np.testing.assert_array_equal(sess.run("v:0"), value)


def _ref_enter(v: B.Variable):
    from graphgen import _ref_in_context

    return _ref_in_context(v._ref)


def test_feeding_an_intermediate_tensor_cuts_what_computes_it() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        y = B.multiply(x, 3.0, name="y")
        z = B.add(y, 1.0, name="z")
    assert float(evaluate(_dfg_graph(g), [z.name], {"y:0": np.float32(10)})[0]) == 11.0


# --- graphs that cannot finish --------------------------------------------------------------

def _stuck_chain(kind: str, n: int = 4000) -> graph_pb2.GraphDef:
    """A chain of ``n`` nodes closed into a cycle with no NextIteration (``cycle``), or
    behind a Merge whose one live input is the chain's own end (``merge``)."""
    gd = graph_pb2.GraphDef()
    _node(gd, "c", "Const", dtype=1, float=1.0)
    if kind == "cycle":
        _node(gd, "n0", "AddV2", ["c", f"n{n - 1}"], T=1)
    else:
        _node(gd, "p", "Const", dtype=10, bool=True)
        _node(gd, "s", "Switch", ["c", "p"], T=1)            # s:0 dead
        _node(gd, "m", "Merge", ["s:0", f"n{n - 1}"], T=1, N=2)
        _node(gd, "n0", "Identity", ["m"], T=1)
    for i in range(1, n):
        _node(gd, f"n{i}", "Identity", [f"n{i - 1}"], T=1)
    return gd


@pytest.mark.parametrize("kind", ["cycle", "merge"])
def test_a_4000_node_chain_that_cannot_finish_is_reported_quickly(kind: str) -> None:
    gd = _stuck_chain(kind)
    first = "m" if kind == "merge" else "n0"
    with pytest.raises(InvalidArgumentError, match="cannot make progress") as ei:
        Reference(gd).run("n3999")
    assert first in str(ei.value)
    with Session(gd, threads=2, validate=False) as sess:
        sess.plan(["n3999:0"])     # building the plan is not what is measured
        with cpu_seconds() as spent:
            with pytest.raises(InvalidArgumentError, match="cannot make progress") as ei:
                sess.run("n3999", timeout=30)
    # linear is a few hundredths of a second; the bound only has to catch a hang or a blow-up
    assert spent.seconds < 5.0, f"{spent.seconds:.2f} s to report a stuck step"
    assert f"'{first}'" in str(ei.value) and "waits for" in str(ei.value)


def test_reference_reports_the_invalid_cycle_case() -> None:
    g = load_graph(DATA / "invalid" / "cycle_without_nextiteration.pbtxt")
    fetch = [n.name for n in g.nodes if n.op not in ("Placeholder", "Const")][-1]
    feeds = {f"{n.name}:0": np.ones((2,), np.float32) for n in g.nodes if n.op == "Placeholder"}
    with pytest.raises(InvalidArgumentError, match="cannot make progress"):
        Reference(g).run([fetch], feeds)
