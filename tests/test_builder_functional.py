"""``cond``/``while_loop`` with ``functional=True``: one StatelessIf/If or StatelessWhile/While
node with its functions in the GraphDef's library, as TensorFlow 2 builds them; dfg's Session
runs them (by lowering) to the values NumPy computes, and the GraphDef passes validation."""

from __future__ import annotations

import numpy as np

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef import load_graph
from dfg.graphdef.validate import validate

X = np.array([0.5, -1.0, 2.0], np.float32)


def _build():
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [3], name="x")
        p = B.placeholder("bool", [], name="p")
        y = B.cond(p, lambda: B.tanh(x) * 2.0, lambda: x + 1.0, functional=True)
        pair = B.cond(p, lambda: (x, B.reduce_sum(x)), lambda: (-x, B.constant(7.0)),
                      functional=True)
        i, a = B.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x),
                            [B.constant(0), x], functional=True)

        def outer(j, acc):   # a functional loop inside a functional loop's body
            _, acc2 = B.while_loop(lambda k, b: k < j, lambda k, b: (k + 1, b + x), [0, acc],
                                   functional=True)
            return j + 1, acc2
        _, n = B.while_loop(lambda j, acc: j < 4, outer, [B.constant(0), B.zeros([3])],
                            functional=True)
    return g, [y, pair[0], pair[1], i, a, n]


def test_functional_nodes_and_library() -> None:
    g, _ = _build()
    gd = g.as_graph_def()
    ops = [n.op for n in gd.node]
    assert ops.count("StatelessIf") == 2 and ops.count("StatelessWhile") == 2
    assert not {"Switch", "Merge", "Enter", "Exit"} & set(ops)
    names = {f.signature.name for f in gd.library.function}
    for n in gd.node:
        for key in ("then_branch", "else_branch", "cond", "body"):
            if key in n.attr and n.attr[key].WhichOneof("value") == "func":
                assert n.attr[key].func.name in names
    errors = [d for d in validate(load_graph(gd)) if d.severity == "error"]
    assert errors == []


def test_functional_control_flow_runs_to_numpy_values() -> None:
    g, outs = _build()
    sess = Session(g.as_graph_def(), threads=1)
    got = sess.run([t.name for t in outs], {"x:0": X, "p:0": True})
    np.testing.assert_allclose(got[0], np.tanh(X) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(got[1], X)
    np.testing.assert_allclose(got[2], X.sum(), rtol=1e-6)
    assert got[3] == 3
    np.testing.assert_allclose(got[4], X ** 4, rtol=1e-6)
    np.testing.assert_allclose(got[5], (0 + 1 + 2 + 3) * X, rtol=1e-6)
    got = sess.run([t.name for t in outs[:3]], {"x:0": X, "p:0": False})
    np.testing.assert_allclose(got[0], X + 1.0)
    np.testing.assert_allclose(got[1], -X)
    assert got[2] == 7.0


def test_tensorflow_ran_the_functional_graph_to_dfgs_values() -> None:
    """tests/data/builder/functional: the builder's GraphDef (unchanged since TensorFlow ran
    it: same bytes as today's build) and TensorFlow's values for it (generate.py)."""
    import json
    import sys
    from pathlib import Path

    from test_builder_corpus import _load
    data = Path(__file__).parent / "data" / "builder"
    sys.path.insert(0, str(data))
    from programs import FUNCTIONAL_PROGRAMS
    prog = FUNCTIONAL_PROGRAMS["functional"]
    g = B.Graph()
    with g.as_default():
        fetched = prog["dfg"](B)
    gd = g.as_graph_def()
    assert gd == _load(data / "functional" / "builder_graph.pbtxt")
    fetch = json.loads((data / "functional" / "fetch.json").read_text())
    assert [t.name for t in fetched] == fetch
    exp = np.load(data / "functional" / "expected.npz")
    got = Session(gd, threads=1).run(fetch, {f"{k}:0": exp[f"feed_{k}"] for k in prog["feeds"]})
    for i, v in enumerate(got):
        want = exp[f"tf_{i}"]
        assert v.dtype == want.dtype and v.shape == want.shape
        np.testing.assert_allclose(v, want, rtol=1e-6)
