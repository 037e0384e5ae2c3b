"""The Session's run-time optimization switch: on by default, off with optimize=False or
DFG_OPTIMIZE=0 (how CI runs the suite a second time), and an empty step needs none."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor import Session
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
