"""The TensorFlow 2 conformance cases (tests/data/tf2, written by its generate.py): function
libraries, PartitionedCall/StatefulPartitionedCall, If/Case/While in their stateful and
stateless forms, calls by function name, TensorLists and frozen Keras RNNs.

Every case runs with 1, 2 and 8 threads, and again after the optimizer pipeline (as in
tests/test_optimize_conformance.py), against TensorFlow's own outputs. No case is skipped for a
missing kernel: a case fails until the execution side supports it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conformance import case_dirs, load_case, run_case

from dfg.cli.main import cli
from dfg.graphdef.io import load_graph
from dfg.graphdef.passes import PassOptions
from dfg.graphdef.passes.pipeline import optimize

TF2 = Path(__file__).resolve().parent / "data" / "tf2"
CASES = case_dirs(TF2)
IDS = [d.name for d in CASES]


def test_the_corpus_is_there() -> None:
    # 8 Keras cases plus at least one case per functional op and semantic corner.
    assert len(CASES) >= 30, [d.name for d in CASES]


@pytest.mark.parametrize("programs", ["auto", "never", "always"])
@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tf2_case(case: Path, threads: int, programs: str) -> None:
    run_case(case, threads, programs=programs)


def _unique(xs) -> tuple[str, ...]:
    return tuple(dict.fromkeys(xs))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tf2_case_after_optimizing(case: Path) -> None:
    """Optimized for everything its steps fetch, run and feed, the graph still gives
    TensorFlow's values, variables across steps and error classes."""
    steps = load_case(case)["steps"]
    options = PassOptions(_unique(f for s in steps for f in s["fetch"]),
                          _unique(t for s in steps for t in s["target"]),
                          _unique(k for s in steps for k in s["feed"]))
    result = optimize(case / "graph.pbtxt", options)
    assert not result.warnings, result.warnings       # no pass failed or was rejected
    assert result.converged
    # Inlining moves function bodies into the graph: count library nodes too.
    before = load_graph(case / "graph.pbtxt").graph_def
    assert _all_nodes(result.graph_def) <= _all_nodes(before)
    run_case(case, threads=2, graph=result.graph_def)


def _all_nodes(graph_def) -> int:
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def _ops_missing(case: Path) -> tuple[int, list[str]]:
    r = CliRunner().invoke(cli, ["ops", "--json", "--missing", str(case / "graph.pbtxt")])
    doc = json.loads(r.output)
    return r.exit_code, [m["op"] for m in doc["missing"]]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ops_missing_runs(case: Path, record_property) -> None:
    """``dfg ops --missing`` reads every case and reports consistently: exit 0 exactly when it
    lists nothing (1 otherwise, by its documented contract)."""
    code, missing = _ops_missing(case)
    record_property("missing_ops", ",".join(missing))
    assert code == (1 if missing else 0), (code, missing)


def _library_ops_without_kernel(case: Path) -> list[str]:
    """Op types used inside the case's library functions with no kernel, from the registry
    (an independent check of ``dfg ops --missing``, which reads the lowered graph); functional
    ops are lowered, not run by a kernel."""
    from dfg.executor.kernels.registry import lookup
    from dfg.graphdef.functions import FUNCTIONAL_OPS

    lib = load_graph(case / "graph.pbtxt").graph_def.library
    names = {f.signature.name for f in lib.function}
    return sorted({n.op for f in lib.function for n in f.node_def
                   if n.op not in names and n.op not in FUNCTIONAL_OPS
                   and lookup(n.op) is None})


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_ops_missing_reports_nothing(case: Path) -> None:
    code, missing = _ops_missing(case)
    assert (code, missing) == (0, [])
    assert _library_ops_without_kernel(case) == []
