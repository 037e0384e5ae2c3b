"""The Session's run-time optimization switch: on by default, off with optimize=False or
DFG_OPTIMIZE=0; eager (before a signature's first run), lazy (on its second run) or auto
(lazy, loops included); CI runs the suite once per mode. An empty step needs none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session, plan_cache
from dfg.graphdef.errors import UsageError
from dfg.graphdef.io import load_graph

CHAIN = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
node { name: "a" op: "AddV2" input: "x" input: "one" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "b" op: "AddV2" input: "a" input: "one" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "AddV2" input: "b" input: "one" attr { key: "T" value { type: DT_FLOAT } } }
"""


def _graph():
    return load_graph(CHAIN.encode(), fmt="pbtxt")


@pytest.mark.parametrize("env, optimize, expect_optimized", [
    (None, None, True), ("0", None, False), ("off", None, False), ("1", None, True),
    ("0", True, True), (None, False, False),
])
def test_optimize_default_follows_dfg_optimize(monkeypatch, env, optimize, expect_optimized):
    if env is None:
        monkeypatch.delenv("DFG_OPTIMIZE", raising=False)
    else:
        monkeypatch.setenv("DFG_OPTIMIZE", env)
    with Session(_graph(), threads=1, optimize=optimize) as sess:
        assert sess.run("c", {"x": np.float32(2)}) == np.float32(5)   # 2 + 1 + 1 + 1
        plan = sess.plan(["c"], ["x"])
        assert (plan.optimized is not None) == expect_optimized
        # optimized, the chain of constant adds is one add of a folded 3
        assert (len(plan.items) < 4) == expect_optimized


def test_an_empty_step_runs_with_optimization_on():
    with Session(_graph(), threads=1, optimize=True) as sess:
        assert sess.run([]) == []


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_lazy_runs_the_first_step_as_written_and_optimizes_the_second():
    with Session(_graph(), threads=1, optimize="lazy") as sess:
        first = sess.plan(["c"], ["x"])
        assert first.deferred and first.optimized is None and len(first.items) == 4
        assert sess.run("c", {"x": np.float32(2)}) == np.float32(5)
        assert sess.run("c", {"x": np.float32(3)}) == np.float32(6)   # optimized now
        second = sess.plan(["c"], ["x"])
        assert second is not first and not second.deferred
        assert second.optimized is not None and len(second.items) < 4
        assert sess.run("c", {"x": np.float32(-1)}) == np.float32(2)
        assert sess.plan(["c"], ["x"]) is second


def test_eager_optimizes_before_the_first_step():
    with Session(_graph(), threads=1, optimize="eager") as sess:
        plan = sess.plan(["c"], ["x"])
        assert not plan.deferred and plan.optimized is not None and len(plan.items) < 4
        assert sess.run("c", {"x": np.float32(2)}) == np.float32(5)
        assert sess.plan(["c"], ["x"]) is plan


def test_auto_is_lazy_with_loops_too(monkeypatch):
    monkeypatch.delenv("DFG_OPTIMIZE", raising=False)
    with Session(_graph(), threads=1) as sess:           # no loops at all
        assert sess.optimize_mode == "lazy"
    plan_cache.clear()     # another test's Session of the graph: optimized at once
    with Session(load_graph(EXAMPLES / "while_counter.pbtxt"), threads=1) as sess:
        assert sess.optimize_mode == "lazy"
        # the loop counts from start (0) to n: 5 (examples/README.md); its first run takes
        # the graph as written, its second the optimized one
        assert sess.plan(["counter/Exit"], ["n"]).deferred
        assert sess.run("counter/Exit", {"n": 5}) == 5
        assert sess.run("counter/Exit", {"n": 6}) == 6
        plan = sess.plan(["counter/Exit"], ["n"])
        assert not plan.deferred and plan.optimized is not None
        assert sess.run("counter/Exit", {"n": 3}) == 3


def test_a_deferred_plan_that_optimizing_leaves_alone_is_kept():
    """Nothing to fold or fuse: the plan of the first run stays, with what it measured."""
    g = load_graph(b"""
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
versions { producer: 1 }
""", fmt="pbtxt")
    with Session(g, threads=1, optimize="lazy") as sess:
        plan = sess.plan(["y"], ["x"])
        for v in (-1.0, 2.0, -3.0):
            assert sess.run("y", {"x": np.float32(v)}) == np.float32(max(v, 0.0))
        assert sess.plan(["y"], ["x"]) is plan
        assert not plan.deferred and plan.optimized is not None


def test_a_straight_line_program_is_compiled_on_its_second_run():
    with Session(_graph(), threads=1, optimize=False, programs="always") as sess:
        prog = sess.plan(["c"], ["x"]).program
        assert sess.run("c", {"x": np.float32(1)}) == np.float32(4)
        assert prog.compiled is None          # the first run interprets its kernel calls
        assert sess.run("c", {"x": np.float32(2)}) == np.float32(5)
        assert prog.compiled                  # the second compiles them into one function
        assert sess.run("c", {"x": np.float32(3)}) == np.float32(6)


@pytest.mark.parametrize("env, optimize", [(None, "sometimes"), ("later", None)])
def test_an_unknown_mode_is_a_usage_error(monkeypatch, env, optimize):
    monkeypatch.setenv("DFG_OPTIMIZE", env) if env else monkeypatch.delenv("DFG_OPTIMIZE",
                                                                           raising=False)
    with pytest.raises(UsageError, match="eager, lazy"):
        Session(_graph(), threads=1, optimize=optimize)
