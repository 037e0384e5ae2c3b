"""The benchmark cases of tests/data/bench (issue #12's nested loops, MLP, ResNet-style CNN,
Transformer encoder and U-Net; issue #32's scalar while with a Cast, TF1 dynamic_rnn LSTM and
Keras LSTM classifier; made by its generate.py with TensorFlow) run in dfg and give
TensorFlow's outputs.

For every case: ``dfg ops --missing`` finds no op without a kernel; the graph gives
TensorFlow's outputs within the case's rtol/atol with 1, 2 and 8 threads (default,
optimizing Session), with ``Session(optimize=False)`` (the graph as written) and with
``programs="never"`` (node by node: the nested loops otherwise run as one compiled program).
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

DATA = Path(__file__).resolve().parent / "data" / "bench"
CASES = sorted(p.parent for p in DATA.glob("*/case.json"))
IDS = [d.name for d in CASES]


def _case(d: Path) -> dict:
    return json.loads((d / "case.json").read_text())


def _graph_file(d: Path) -> Path:
    return d / "graph.pbtxt" if (d / "graph.pbtxt").exists() else d / "graph.pb"


@cache
def _graph(d: Path):
    from dfg.graphdef.io import load_graph

    return load_graph(_graph_file(d))


def _check(d: Path, threads: int, optimize: bool = True, programs: str = "auto") -> None:
    from dfg.executor import Session

    case = _case(d)
    with Session(_graph(d), threads=threads, optimize=optimize, programs=programs) as sess:
        for step in case["steps"]:
            feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
            out = sess.run(step["fetch"], feed_dict=feed)
            for name, value in zip(step["fetch"], out):
                expected = np.load(d / step["expect"][name], allow_pickle=False)
                assert_close(value, expected, case["rtol"], case["atol"], f"{d.name} {name}")


def test_cases_are_present():
    names = {d.name for d in CASES}
    assert names >= {"bench_nested_while_100x100", "bench_mlp", "bench_resnet_style",
                     "bench_transformer_encoder", "bench_unet", "bench_while_cast_10k",
                     "bench_dynamic_rnn_lstm", "bench_lstm_classifier"}, names
    for d in CASES:
        assert "bench" in _case(d)["features"], d.name


@pytest.mark.parametrize("d", CASES, ids=IDS)
def test_no_missing_ops(d: Path):
    r = CliRunner().invoke(cli, ["ops", "--missing", str(_graph_file(d)), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["missing"] == []


@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("d", CASES, ids=IDS)
def test_equals_tensorflow(d: Path, threads: int):
    _check(d, threads)


@pytest.mark.parametrize("d", CASES, ids=IDS)
def test_unoptimized_equals_tensorflow(d: Path):
    _check(d, 2, optimize=False)


@pytest.mark.parametrize("d", CASES, ids=IDS)
def test_node_by_node_equals_tensorflow(d: Path):
    _check(d, 2, programs="never")
