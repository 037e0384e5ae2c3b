"""The Keras model zoo (tests/data/models, made by its generate.py with TensorFlow) runs in dfg
and gives TensorFlow's outputs.

For every case: ``dfg ops --missing`` finds no op without a kernel (call ops aside: Keras
wraps grouped convolutions in an XLA function, which dfg inlines; the inlined graph must then
have every kernel); the frozen graph gives TensorFlow's outputs within the case's rtol/atol
(case.json: rtol 1e-4, atol 1e-4 times the largest expected magnitude, at least 1e-4) with 1,
2 and 8 threads (graphs above BIG_NODES nodes: 2 threads only; today every case is below it;
the whole file takes about 30-45 s on 2 cores); and again after ``dfg optimize`` (the default
pass pipeline) for the case's fetches and feeds.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conformance import assert_close

from dfg.cli.main import cli

DATA = Path(__file__).resolve().parent / "data" / "models"
CASES = sorted(p.parent for p in DATA.glob("*/case.json"))

# Graphs above this many nodes run with 2 threads only (1 and 8 threads cover small ones).
BIG_NODES = 6000


def _case(d: Path) -> dict:
    return json.loads((d / "case.json").read_text())


@cache
def _graph(d: Path):
    from dfg.graphdef.io import load_graph

    return load_graph(d / "graph.pb")


def _check(d: Path, graph, threads: int) -> None:
    from dfg.executor import Session

    case = _case(d)
    step = case["steps"][0]
    feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
    with Session(graph, threads=threads) as sess:
        out = sess.run(step["fetch"], feed_dict=feed)
    for name, value in zip(step["fetch"], out):
        expected = np.load(d / step["expect"][name], allow_pickle=False)
        assert_close(value, expected, case["rtol"], case["atol"], f"{d.name} {name}")


def _params():
    out = []
    for d in CASES:
        big = _case(d).get("nodes", 0) > BIG_NODES
        for t in ((2,) if big else (1, 2, 8)):
            out.append(pytest.param(d, t, id=f"{d.name}-t{t}"))
    return out


def test_zoo_is_present():
    assert len(CASES) >= 20, f"only {len(CASES)} cases under {DATA}"


@pytest.mark.parametrize("d", CASES, ids=[d.name for d in CASES])
def test_no_missing_ops(d: Path):
    # function bodies count (Keras wraps grouped convs in an XLA function the Session inlines)
    r = CliRunner().invoke(cli, ["ops", "--missing", str(d / "graph.pb"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["missing"] == []


@pytest.mark.parametrize("d,threads", _params())
def test_equals_tensorflow(d: Path, threads: int):
    _check(d, _graph(d), threads)


@pytest.mark.parametrize("d", CASES, ids=[d.name for d in CASES])
def test_optimized_equals_tensorflow(d: Path):
    from dfg.graphdef.passes import PassOptions
    from dfg.graphdef.passes.pipeline import optimize

    step = _case(d)["steps"][0]
    result = optimize(_graph(d), PassOptions(tuple(step["fetch"]), (), tuple(step["feed"])))
    assert not result.warnings, result.warnings
    assert result.nodes_after <= result.nodes_before
    _check(d, result.graph_def, 2)
