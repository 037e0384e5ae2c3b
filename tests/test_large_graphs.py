"""Large graphs: loading, validation, pruning and optimization stay linear in the graph.

Sanity bounds on CPU time (not wall time, which depends on the machine's load), plus scaling
checks: four times the nodes must cost well under sixteen times the work, which a pass
quadratic in chain length would (for the static tools the work is counted in Python lines
executed, which no machine load changes). benchmarks/bench_large_graphs.py prints the real
numbers for 100k- and 1M-node graphs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cputime import cpu_seconds

from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph, serialize
from dfg.graphdef.passes import PassOptions
from dfg.graphdef.passes.pipeline import optimize
from dfg.graphdef.prune import prune
from dfg.graphdef.summary import summarize
from dfg.graphdef.validate import validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_large_graphs import build_chain, build_loop, build_model  # noqa: E402

sys.path.pop(0)


def cpu(fn, *args, **kw):
    with cpu_seconds() as spent:
        out = fn(*args, **kw)
    return out, spent.seconds


def test_chain_of_20k_identities_optimizes_in_seconds() -> None:
    g = Graph(build_chain(20_000))
    result, seconds = cpu(optimize, g, PassOptions(("y",), (), ()))
    # every Identity between the Placeholder and the fetched y goes; y computes x's value
    assert [n.name for n in result.graph_def.node] == ["x", "y"]
    assert list(result.graph_def.node[1].input) == ["x"]
    assert seconds < 30, seconds


def test_optimize_time_grows_linearly_with_chain_length() -> None:
    small, t_small = cpu(optimize, Graph(build_chain(2_500)), PassOptions(("y",), (), ()))
    big, t_big = cpu(optimize, Graph(build_chain(10_000)), PassOptions(("y",), (), ()))
    assert len(small.graph_def.node) == len(big.graph_def.node) == 2
    # 4x the nodes: linear is ~4x; quadratic would be ~16x
    assert t_big < 8 * t_small, (t_small, t_big)


@pytest.fixture(scope="module")
def model_50k() -> Graph:
    return load_graph(serialize(build_model(50_000), "pb"))


def test_50k_node_graph_validates_prunes_and_summarizes_within_bounds(model_50k) -> None:
    g = model_50k
    layers = (50_000 - 2) // 6                 # Placeholder + 6-node layers + output
    assert len(g) == 2 + 6 * layers
    diags, t_validate = cpu(validate, g)
    assert diags == []
    pruned, t_prune = cpu(prune, g, ["output"])
    assert len(pruned.node) == len(g)          # everything feeds the output
    half = f"block_{layers // 2 // 100:05d}/dense_{layers // 2 % 100}/residual"
    assert 0 < len(prune(g, [half]).node) < len(g) // 2 + 10
    info, t_info = cpu(summarize, g)
    assert info["nodes"] == len(g) and info["op_types"]["Const"] == 2 * layers
    # generous bounds: a quiet machine does each in a fraction of these
    assert t_validate < 5 and t_prune < 5 and t_info < 10, (t_validate, t_prune, t_info)


def test_validation_reports_the_same_on_shared_and_unshared_attrs() -> None:
    """Nodes with identical (op, attrs) share their attr checks: an error on one such
    combination is still reported on every node that has it, with its own name."""
    from dfg.schemas import types_pb2

    gd = build_model(200)
    for nd in gd.node:
        if nd.op == "Relu":
            nd.attr["T"].type = types_pb2.DT_STRING     # not allowed for Relu
    g = Graph(gd)
    relus = [n.name for n in g.nodes if n.op == "Relu"]
    found = [(d.code, d.node) for d in validate(g) if d.code == "attr-not-allowed"]
    assert found == [("attr-not-allowed", r) for r in relus]
    # and the edges into each (float in, string expected) are checked per node too
    assert len(relus) > 10


def _lines_run(fn, *args) -> int:
    """How many Python lines ``fn(*args)`` executes (dfg's and the standard library's): a
    count of work done, the same on a fast or a busy machine."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("build", [build_chain, build_model, build_loop],
                         ids=["chain", "model", "while-loop"])
def test_static_tools_execute_lines_in_proportion_to_the_graph(build) -> None:
    """Four times the nodes, about four times the Python lines executed, for building the
    view and for each static tool: a loop over all nodes nested in a loop over nodes (a
    pass quadratic in chain length, or in a loop's Enters) would run ~16 times as many.
    Counting lines, not seconds, keeps this exact on a loaded machine (work done inside C
    calls, such as a membership test on a list, is not counted)."""
    from dfg.graphdef.frames import analyze_frames

    def tools(gd):
        g = Graph(gd)
        fetch = g.nodes[-1].name
        return [("Graph", Graph, gd), ("validate", validate, g), ("prune", prune, g, [fetch]),
                ("summarize", summarize, g), ("analyze_frames", analyze_frames, g),
                ("topological_order", Graph.topological_order, g)]

    small, big = tools(build(1_000)), tools(build(4_000))
    assert len(big[1][2]) > 3.9 * len(small[1][2])
    for (name, fn, *args), (_, _, *big_args) in zip(small, big):
        lines_small, lines_big = _lines_run(fn, *args), _lines_run(fn, *big_args)
        assert lines_big < 5 * lines_small, (name, lines_small, lines_big)
