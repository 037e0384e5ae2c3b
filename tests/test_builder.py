"""Unit tests of dfg's graph builder: TensorFlow's naming rule, scopes, variables, Function,
control flow and the examples. Expected names are TensorFlow's (see tests/data/builder for
the node-by-node comparison); expected values come from NumPy."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef.errors import InvalidArgumentError

ROOT = Path(__file__).resolve().parents[1]


def test_unique_names_follow_tensorflow() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [2], name="x")
        a, b = x + 1.0, x + 1.0
        with B.name_scope("s"):
            c = B.add(x, x)
        with B.name_scope("s"):
            d = B.add(x, x)
        e = B.constant(1.0, name="add_1_x")   # a taken-looking name is fine
        f = B.identity(x, name="Add")          # names compare lower-cased: add is taken
    assert [t.op.name for t in (a, b, c, d, e, f)] == [
        "add", "add_1", "s/Add", "s_1/Add", "add_1_x", "Add_2"]


def test_static_shapes() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [None, 3], name="x")
        w = B.variable(np.zeros((3, 4), np.float32), name="w")
        y = B.matmul(x, w)
        assert y.shape == (None, 4)
        assert B.reduce_sum(y, axis=1).shape == (None,)
        assert B.reshape(B.zeros([2, 6]), [3, -1]).shape == (3, 4)
        assert B.concat([B.zeros([2, 3]), B.zeros([5, 3])], axis=0).shape == (7, 3)
        assert (x + B.zeros([1, 3])).shape == (None, 3)
        assert B.zeros([4, 5])[1:3].shape == (2, 5)
        assert B.placeholder("float32", None).shape is None


def test_control_dependencies_skip_ops_already_ordered() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        a = x * 2.0
        with B.control_dependencies([a]):
            b = B.identity(x)    # gets ^mul
            c = B.identity(b)    # its input b was built in the block: already after a
    assert [o.name for o in b.op.control_inputs] == ["mul"]
    assert c.op.control_inputs == []


def test_bad_inputs_are_clear_errors() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [2], name="x")
        i = B.placeholder("int32", [2], name="i")
        with pytest.raises(InvalidArgumentError, match="expected float32, found int32"):
            B.add(x, i)
        with pytest.raises(InvalidArgumentError, match="placeholders or variables"):
            B.Function([x + 1.0], x)
    with pytest.raises(TypeError, match="truth value"):
        bool(x)


def test_function_updates_run_after_outputs_and_persist() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        v = B.variable(np.float32(10.0), name="v")
        out = v * x
        f = B.Function([x], out, updates=[(v, v + 1.0)])
    # each call sees the value before its own update: 10*2, 11*2, 12*2
    assert [float(f(np.float32(2.0))) for _ in range(3)] == [20.0, 22.0, 24.0]


def test_cond_and_while_values() -> None:
    g = B.Graph()
    with g.as_default():
        p = B.placeholder("bool", [], name="p")
        n = B.placeholder("int32", [], name="n")
        y = B.cond(p, lambda: B.constant(3), lambda: B.constant(4))
        i, s = B.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + i * i), [0, 0])
    sess = Session(g.as_graph_def(), threads=1)
    assert sess.run(y.name, {"p:0": True}) == 3
    assert sess.run(y.name, {"p:0": False}) == 4
    assert sess.run([i.name, s.name], {"n:0": 6}) == [6, sum(k * k for k in range(6))]


def test_resource_variable() -> None:
    g = B.Graph()
    with g.as_default():
        w = B.variable(np.ones((2, 2), np.float32), name="W", resource=True)
        y = B.matmul(B.constant(np.eye(2, dtype=np.float32)), w)
        B.global_variables_initializer()
    names = {o.name: o.type for o in g.ops}
    assert names["W"] == "VarHandleOp" and names["W/Assign"] == "AssignVariableOp"
    assert names["MatMul/ReadVariableOp"] == "ReadVariableOp"
    sess = Session(g.as_graph_def(), threads=1)
    sess.run([], targets=["init"])
    np.testing.assert_array_equal(sess.run(y.name), np.ones((2, 2), np.float32))


def test_train_linear_reaches_least_squares(capsys) -> None:
    mod = runpy.run_path(str(ROOT / "examples" / "train_linear.py"))
    assert mod["main"](["--quiet"]) == 0
    out = capsys.readouterr().out
    err = float(out.split("=")[-1])
    assert err < 1e-3


def test_build_while_example_runs(tmp_path) -> None:
    out = tmp_path / "w.pbtxt"
    subprocess.run([sys.executable, str(ROOT / "examples" / "build_while.py"), "-o", str(out)],
                   check=True, capture_output=True)
    sess = Session(str(out), threads=1)
    for n in (0, 1, 4, 6):
        assert sess.run("outer/Exit_1:0", {"n:0": n}) == sum(i * i for i in range(n))
    # the committed copy is what the script writes
    assert out.read_text() == (ROOT / "examples" / "build_while.pbtxt").read_text()


def test_cond_branch_returning_a_loop_variable_unchanged_inside_a_while():
    """A cond branch in a while body that returns a loop variable as it is: its Switch is
    made in the loop's frame (it was built outside it, and dfg validate found a second Enter
    of the frame). a doubles while above 1, three times: 1.5 -> 12, 0.5 stays."""
    import numpy as np

    from dfg.executor import Session
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        r = B.while_loop(lambda i, a: i < 3,
                         lambda i, a: (i + 1, B.cond(a > 1.0, lambda: a * 2.0, lambda: a)),
                         [B.constant(0), x])
    gd = g.as_graph_def()
    with Session(gd) as s:
        assert s.run(r[1].name, {"x:0": np.float32(1.5)}) == 12.0
        assert s.run(r[1].name, {"x:0": np.float32(0.5)}) == 0.5
