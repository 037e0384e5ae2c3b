"""``dfg optimize`` on every TensorFlow conformance case.

1. Optimized for everything its steps fetch, run and feed (the union over steps), the graph
   still gives TensorFlow's expected outputs at every step: values, variables carried across
   steps, and the same error classes (tests/conformance.py ``run_case``).
2. Optimized for the fetch set TensorFlow's Grappler was given (``grappler_nodes`` in
   case.json counts the nodes Grappler kept when fetching the first step's fetches, or its
   targets if it fetches nothing), it has no more nodes than Grappler's result, and the first
   step still gives TensorFlow's values on it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conformance import assert_close, case_dirs, load_case, run_case

from dfg.graphdef.passes import PassOptions
from dfg.graphdef.passes.pipeline import PipelineResult, optimize

CASES = case_dirs()

# Where we knowingly keep more nodes than Grappler, and why (none today).
ABOVE_GRAPPLER: dict[str, str] = {}


def _unique(xs) -> tuple[str, ...]:
    return tuple(dict.fromkeys(xs))


def union_options(case: dict) -> PassOptions:
    steps = case["steps"]
    return PassOptions(_unique(f for s in steps for f in s["fetch"]),
                       _unique(t for s in steps for t in s["target"]),
                       _unique(k for s in steps for k in s["feed"]))


def grappler_options(case: dict) -> PassOptions:
    first = case["steps"][0]
    return PassOptions(tuple(first["fetch"]), () if first["fetch"] else tuple(first["target"]),
                       tuple(first["feed"]))


def _optimize(d: Path, options: PassOptions) -> PipelineResult:
    result = optimize(d / "graph.pbtxt", options)
    assert not result.warnings, result.warnings       # no pass failed or was rejected
    assert result.converged
    return result


def run_first_step(d: Path, graph_def) -> None:
    """Step 0 of case ``d`` against TensorFlow's expected values (or its error class)."""
    from dfg.executor import Session
    from dfg.graphdef.errors import OpError

    case = load_case(d)
    step = case["steps"][0]
    feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
    target = [] if step["fetch"] else step["target"]
    with Session(graph_def, threads=2) as sess:
        if step["expect_error"]:
            with pytest.raises(OpError) as e:
                sess.run(step["fetch"], feed_dict=feed, targets=target)
            assert e.value.tf_name == step["expect_error"]
            return
        out = sess.run(step["fetch"], feed_dict=feed, targets=target)
    for name, value in zip(step["fetch"], out):
        expected = np.load(d / step["expect"][name], allow_pickle=False)
        assert_close(value, expected, case["rtol"], case["atol"], f"step 0 {name}")


@pytest.mark.parametrize("d", CASES, ids=[d.name for d in CASES])
def test_optimized_graph_gives_tensorflows_results_at_every_step(d: Path):
    case = load_case(d)
    result = _optimize(d, union_options(case))
    assert result.nodes_after <= result.nodes_before
    run_case(d, threads=2, graph=result.graph_def)


def _grappler_params():
    out = []
    for d in CASES:
        if load_case(d)["grappler_nodes"] is None:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=ABOVE_GRAPPLER[d.name])] \
            if d.name in ABOVE_GRAPPLER else []
        out.append(pytest.param(d, marks=marks, id=d.name))
    return out


@pytest.mark.parametrize("d", _grappler_params())
def test_node_count_at_most_grapplers(d: Path):
    case = load_case(d)
    result = _optimize(d, grappler_options(case))
    run_first_step(d, result.graph_def)
    assert result.nodes_after <= case["grappler_nodes"], (
        f"{result.nodes_after} nodes, Grappler keeps {case['grappler_nodes']}")


def test_where_all_steps_use_grapplers_fetches_the_full_optimization_is_as_small():
    """For cases whose steps fetch, run and feed nothing beyond the first step, the graph of
    test 1 is the graph Grappler was compared with: it must be as small too."""
    checked = 0
    for d in CASES:
        case = load_case(d)
        if case["grappler_nodes"] is None or d.name in ABOVE_GRAPPLER:
            continue
        union, first = union_options(case), grappler_options(case)
        if (set(union.fetches), set(union.targets), set(union.feeds)) != \
                (set(first.fetches), set(first.targets), set(first.feeds)):
            continue
        assert _optimize(d, union).nodes_after <= case["grappler_nodes"], d.name
        checked += 1
    assert checked >= 20
