"""``gradients`` through ``while_loop`` (control flow v1) whose trip counts are fed at run
time: the values equal TensorFlow's ``tf.compat.v1.gradients`` for trip counts 0, 1 and many
(tests/data/while_grad/<program>/runs.json, written by generate.py), the backward graph is
TensorFlow's node for node (names, ops, inputs, attrs), and the gradients pass central
finite differences in float64 (computed here with dfg forward runs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef.errors import UnimplementedError
from dfg.graphdef.graph import Graph as IndexedGraph
from dfg.graphdef.validate import validate

DATA = Path(__file__).parent / "data" / "while_grad"
sys.path.insert(0, str(DATA))
from test_builder_corpus import _load, _node_summary  # noqa: E402
from while_grad_programs import PROGRAMS  # noqa: E402


def _build(name: str):
    g = B.Graph()
    with g.as_default():
        loss, xs, fd = PROGRAMS[name]["dfg"](B)
        n_forward = len(g.ops)
        grads = B.gradients(loss, xs)
        init = B.global_variables_initializer() if g.variables else None
    return g, loss, grads, fd, init, n_forward


def _feeds(run: dict) -> dict:
    out = {}
    for k, v in run["feeds"].items():
        a = np.asarray(v)
        out[k + ":0"] = a.astype(np.int32) if a.dtype.kind == "i" else a.astype(np.float64)
    return out


def _session(g, init):
    sess = Session(g.as_graph_def())
    if init is not None:
        sess.run([], targets=[init.name])
    return sess


@pytest.mark.parametrize("name", sorted(
    n for n in PROGRAMS if not (PROGRAMS[n].get("functional")
                                or PROGRAMS[n].get("values_only"))))
def test_backward_graph_is_tensorflows_node_for_node(name: str) -> None:
    """Every node (the forward loop, its f_count counter and stack pushes, the backward
    loop gradients/.../while_context with its b_count counter, pops, b_acc accumulators)
    has the name, op, inputs, control inputs and attrs TensorFlow gave it."""
    g, _, _, _, _, n_forward = _build(name)
    ref = json.loads((DATA / name / "runs.json").read_text())
    assert n_forward == ref["forward_nodes"]
    # both sides' initializer "init" is built after the gradients: left out
    ours = {n.name: _node_summary(n) for n in g.as_graph_def().node if n.name != "init"}
    theirs = {n.name: _node_summary(n) for n in _load(DATA / name / "tf_graph.pbtxt").node
              if n.name != "init"}
    assert sorted(ours) == sorted(theirs)
    for n in theirs:
        assert ours[n] == theirs[n], n


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_equal_tensorflows_for_fed_trip_counts(name: str) -> None:
    """Trip counts 0, 1 and many (nested: 0, 1 and many of each loop) fed to one graph."""
    g, loss, grads, _, init, _ = _build(name)
    ref = json.loads((DATA / name / "runs.json").read_text())
    assert len(ref["runs"]) >= 3
    for run in ref["runs"]:
        sess = _session(g, init)
        got = sess.run([loss.name] + [t.name for t in grads], _feeds(run))
        assert got[0] == pytest.approx(run["loss"], rel=1e-12, abs=1e-13), run["feeds"]
        for a, b in zip(got[1:], run["grads"]):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gradients_pass_finite_differences(name: str) -> None:
    """Central differences of the loss along a random direction, per trip count."""
    g, loss, grads, fd, init, _ = _build(name)
    ref = json.loads((DATA / name / "runs.json").read_text())
    rng = np.random.default_rng(7)
    eps = 1e-6
    for run in ref["runs"]:
        sess = _session(g, init)
        feeds = _feeds(run)
        base = dict(zip(fd, sess.run(fd, feeds)))   # a variable's value: its snapshot
        got = sess.run([t.name for t in grads], feeds)
        dirs = {k: rng.normal(size=np.shape(v)) for k, v in base.items()}

        def f(sign: float, sess=sess, feeds=feeds, base=base, dirs=dirs) -> float:
            moved = dict(feeds)
            moved.update({k: v + sign * eps * dirs[k] for k, v in base.items()})
            return float(sess.run(loss.name, moved))
        numeric = (f(1.0) - f(-1.0)) / (2 * eps)
        analytic = sum(float(np.sum(a * dirs[k])) for a, k in zip(got, fd))
        assert abs(numeric - analytic) <= 1e-6 * (1 + abs(analytic)), run["feeds"]


def test_zero_trips_give_the_initial_values_gradient() -> None:
    """n = 0: the loop returns p0 untouched, so d sum(p)/d p0 = 1 and d/dx = 0 (math)."""
    g, _, grads, _, init, _ = _build("pow")
    got = _session(g, init).run([t.name for t in grads],
                                {"n:0": np.int32(0), "x:0": np.ones(3), "p0:0": np.ones(3)})
    np.testing.assert_array_equal(got[0], np.zeros(3))
    np.testing.assert_array_equal(got[1], np.ones(3))


def test_every_program_validates() -> None:
    for name in PROGRAMS:
        g, *_ = _build(name)
        assert [str(d) for d in validate(IndexedGraph(g.as_graph_def()))] == []


def test_a_variable_assigned_in_a_loop_enters_by_reference() -> None:
    """A VariableV2 an op in the loop assigns to enters with RefEnter (TensorFlow's
    _Enter of a ref): the graph validates and the loop's AssignAdds reach the variable."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")
        v = B.variable(np.float32(1.0), name="v")
        r = B.while_loop(lambda i: i < n,
                         lambda i: B.with_dependencies([v.assign_add(2.0)], i + 1), [0])
        init = B.global_variables_initializer()
    gd = g.as_graph_def()
    enters = [nd for nd in gd.node if nd.input and nd.input[0] == "v"]
    assert [nd.op for nd in enters if nd.op.endswith("Enter")] == ["RefEnter"]
    assert validate(IndexedGraph(gd)) == []
    sess = Session(gd)
    sess.run([], targets=[init.name])
    assert sess.run(r.name, {"n:0": np.int32(4)}) == 4
    assert sess.run("v:0") == pytest.approx(9.0)   # 1 + 4 * 2


def test_a_variable_assigned_in_a_cond_branch_switches_by_reference() -> None:
    """A VariableV2 a cond branch assigns to goes through RefSwitch (TensorFlow's
    _SwitchRefOrTensor): the graph validates and only the branch taken assigns."""
    g = B.Graph()
    with g.as_default():
        p = B.placeholder("bool", [], name="p")
        v = B.variable(np.float32(1.0), name="v")
        r = B.cond(p, lambda: B.with_dependencies([v.assign_add(2.0)], B.constant(1.0)),
                   lambda: B.constant(0.0))
        init = B.global_variables_initializer()
    gd = g.as_graph_def()
    assert [nd.op for nd in gd.node if nd.input and nd.input[0] == "v"
            and "Switch" in nd.op] == ["RefSwitch"]
    assert validate(IndexedGraph(gd)) == []
    sess = Session(gd)
    sess.run([], targets=[init.name])
    assert sess.run(r.name, {"p:0": False}) == 0.0
    assert sess.run("v:0") == pytest.approx(1.0)
    assert sess.run(r.name, {"p:0": True}) == 1.0
    assert sess.run("v:0") == pytest.approx(3.0)


def test_second_order_gradient_through_a_loop_is_refused() -> None:
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")
        x = B.placeholder("float64", [], name="x")
        p = B.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, p * x),
                         [B.constant(0), B.constant(1.0, "float64")])[1]
        (gx,) = B.gradients(p, [x])
        with pytest.raises(UnimplementedError, match="second-order"):
            B.gradients(gx, [x])


def test_train_dynamic_rnn_example_matches_tensorflow(capsys) -> None:
    """examples/train_dynamic_rnn.py: 40 SGD steps over fed lengths give TensorFlow's losses
    and weights (train_dynamic_rnn_tf.json) within float32 rounding, and the eval loss drops."""
    import runpy
    mod = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "train_dynamic_rnn.py"))
    assert mod["main"](["--quiet"]) == 0
    out = capsys.readouterr().out
    assert "worst relative loss difference" in out


def test_functional_if_gradient_is_an_if_over_the_branch_gradients() -> None:
    """The backward node of a functional cond is one StatelessIf on the same predicate, named
    as TensorFlow names it, whose branches are library functions."""
    g, *_ = _build("functional_if")
    gd = g.as_graph_def()
    node = next(n for n in gd.node if n.name == "gradients/cond_grad/StatelessIf")
    assert node.input[0] == "Greater"
    fns = {f.signature.name for f in gd.library.function}
    assert {node.attr["then_branch"].func.name, node.attr["else_branch"].func.name} <= fns


def test_functional_while_gradient_records_then_runs_backward() -> None:
    """The gradient of a functional While: the forward loop again, recording each
    iteration's loop variables in TensorLists, then a backward While popping them; both
    are While/StatelessWhile nodes in the gradient's scope, and the graph validates."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")
        x = B.placeholder("float64", [], name="x")
        p = B.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, p * x),
                         [B.constant(0), B.constant(1.0, "float64")], functional=True)[1]
        (gx,) = B.gradients(p, [x])
    gd = g.as_graph_def()
    loops = sorted(nd.name for nd in gd.node if nd.op.endswith("While"))
    assert loops == ["gradients/while_grad/backward", "gradients/while_grad/forward", "while"]
    assert validate(IndexedGraph(gd)) == []
    for k in (0, 1, 5):   # d x^k / dx = k x^(k-1)
        got = Session(gd).run(gx.name, {"n:0": np.int32(k), "x:0": 1.5})
        assert got == pytest.approx(k * 1.5 ** (k - 1) if k else 0.0)


def test_gradient_through_an_imported_loop_asks_for_unrolling() -> None:
    """An imported GraphDef has no loop contexts to build a backward loop from."""
    tf_gd = _load(Path(__file__).parent / "data" / "builder" / "while" / "tf_graph.pbtxt")
    g = B.import_graph_def(tf_gd)
    exits = [op for op in g.ops if op.type == "Exit" and op.outputs[0].dtype != 3]
    xs = [op.outputs[0] for op in g.ops if op.type == "Placeholder"]
    with g.as_default(), pytest.raises(UnimplementedError, match="unroll_loops") as e:
        B.gradients([x.outputs[0] for x in exits], xs)
    assert e.value.op == "Exit"
