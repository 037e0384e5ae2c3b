"""Tracing (executor/trace.py): Chrome trace-event files that follow the format, slices that
nest per thread, loop and straight-line programs' kernels visible, bounded loops, the CLI's
--trace; results with tracing on are TensorFlow's."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.executor.trace import Tracer
from dfg.graphdef import load_graph

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "conformance"
NESTED = ROOT / "examples" / "while_nested.pbtxt"
NESTED_FETCH = ["outer/Exit:0", "outer/Exit_1:0", "outer/Exit_2:0"]


def nested_case(i: int = 0) -> tuple[dict, list[np.ndarray]]:
    d = DATA / "while_nested"
    case = json.loads((d / "case.json").read_text())["steps"][i]
    feeds = {k: np.load(d / v) for k, v in case["feed"].items()}
    return feeds, [np.load(d / case["expect"][f]) for f in case["fetch"]]


# The trace-event format's required fields (Trace Event Format document, Google): every event
# has name, ph, pid, tid (ts for all but metadata); complete events add dur; the JSON object
# form holds them under traceEvents.
REQUIRED = {"X": {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"},
            "M": {"name", "ph", "pid", "tid", "args"},
            "C": {"name", "ph", "ts", "pid", "args"}}


def check_format(doc: dict) -> list[dict]:
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    json.loads(json.dumps(doc))   # plain JSON, no NaN or numpy scalars
    for e in doc["traceEvents"]:
        ph = e["ph"]
        assert ph in REQUIRED, e
        assert REQUIRED[ph] <= set(e), (ph, set(e))
        assert isinstance(e["name"], str) and isinstance(e["pid"], int)
        if "tid" in e:
            assert isinstance(e["tid"], int)
        if ph != "M":
            assert isinstance(e["ts"], (int, float)) and math.isfinite(e["ts"]) and e["ts"] >= 0
        if ph == "X":
            assert e["dur"] >= 0 and isinstance(e["args"], dict)
        if ph == "M":
            assert e["name"] in ("thread_name", "process_name") and "name" in e["args"]
        if ph == "C":
            assert all(isinstance(v, (int, float)) and v >= 0 for v in e["args"].values())
    return doc["traceEvents"]


def check_nesting(events: list[dict]) -> None:
    """On each thread, any two complete events are disjoint or one contains the other."""
    eps = 1e-3  # µs: ts and dur are ns counts / 1000 in floating point
    by_tid = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for tid, spans in by_tid.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple] = []
        for s in spans:
            while stack and stack[-1][1] <= s[0] + eps:
                stack.pop()
            if stack:
                assert s[1] <= stack[-1][1] + eps, f"tid {tid}: {s} overlaps {stack[-1]}"
            stack.append(s)


@pytest.mark.parametrize("programs", ["never", "always", "auto"])
@pytest.mark.parametrize("threads", [1, 2])
def test_while_nested_trace_is_valid_nests_and_keeps_tensorflows_results(programs, threads):
    feeds, want = nested_case(0)
    tracer = Tracer()
    with Session(load_graph(NESTED), threads=threads, programs=programs) as sess:
        for _ in range(3):
            got = sess.run(NESTED_FETCH, feeds, trace=tracer)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    events = check_format(tracer.to_chrome_json())
    check_nesting(events)
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"] == "step") == 3
    frames = {e["args"]["frame"] for e in kernels}
    # the inner loop's kernels are there whether it ran node by node or as a loop program
    assert any("inner" in f for f in frames) and "outer/while_context" in frames
    for e in kernels:
        a = e["args"]
        assert {"node", "op", "thread", "frame", "iter", "inputs", "outputs"} <= set(a)
        assert a["node"] == e["name"] and isinstance(a["iter"], int)
        assert all(isinstance(s, str) for s in a["inputs"] + a["outputs"])
    less = [e for e in kernels if e["name"] == "outer/Less"]
    # n=4: the outer predicate runs for iterations 0..4, in each of the 3 steps
    assert sorted(e["args"]["iter"] for e in less) == sorted(list(range(5)) * 3)
    assert less[0]["args"]["inputs"] == ["int32[]", "int32[]"]
    assert less[0]["args"]["outputs"] == ["bool[]"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "MainThread" in names
    assert any(e["ph"] == "C" and e["name"] == "live tensor bytes" for e in events)
    if programs == "always":
        progs = [e for e in events if e["ph"] == "X" and e["cat"] == "program"]
        assert progs
        inner = [e for e in kernels if "inner" in e["args"]["frame"]]
        # every inner-loop kernel lies inside a program slice on its own thread
        for k in inner:
            assert any(p["tid"] == k["tid"] and p["ts"] <= k["ts"] + 1e-3 and
                       k["ts"] + k["dur"] <= p["ts"] + p["dur"] + 1e-3 for p in progs)


def test_node_stats_count_every_run():
    # while_counter: i < n is tested n+1 times, i + 1 runs n times (math, not dfg's output)
    n = 50
    for programs in ("never", "always"):
        tracer = Tracer(max_iterations=3)
        with Session(load_graph(ROOT / "examples" / "while_counter.pbtxt"), threads=1,
                     programs=programs) as sess:
            assert int(sess.run("counter/Exit:0", {"n:0": n}, trace=tracer)) == n
        ops = Counter()
        for s in tracer.node_stats().values():
            ops[s.op] += s.count
        assert ops["Less"] == n + 1 and ops["AddV2"] == n, (programs, ops)


def test_long_loops_are_aggregated_so_the_file_stays_bounded():
    def slices(n: int) -> tuple[list[dict], list[dict]]:
        tracer = Tracer(max_iterations=5)
        with Session(load_graph(ROOT / "examples" / "while_counter.pbtxt"), threads=1,
                     programs="never") as sess:
            sess.run("counter/Exit:0", {"n:0": n}, trace=tracer)
        ev = check_format(tracer.to_chrome_json())
        check_nesting(ev)
        return ([e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"],
                [e for e in ev if e["ph"] == "X" and e["cat"] == "aggregate"])

    k100, agg100 = slices(100)
    k1000, agg1000 = slices(1000)
    assert len(k100) == len(k1000)          # only iterations 0..4 are recorded one by one
    assert max(e["args"]["iter"] for e in k1000) == 4
    assert len(agg100) == len(agg1000) > 0  # one summary per node
    less = next(e for e in agg1000 if e["args"]["op"] == "Less")
    assert less["args"]["count"] == 1001 - 5 and less["args"]["total_us"] >= 0


def test_straight_line_program_kernels_are_inside_its_slice():
    case = json.loads((DATA / "bench_add_chain" / "case.json").read_text())["steps"][0]
    x = np.load(DATA / "bench_add_chain" / case["feed"]["x:0"])
    want = np.load(DATA / "bench_add_chain" / case["expect"]["chain_out:0"])
    tracer = Tracer()
    with Session(load_graph(DATA / "bench_add_chain" / "graph.pbtxt"), threads=1,
                 programs="always", optimize=False) as sess:
        got = sess.run("chain_out:0", {"x:0": x}, trace=tracer)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    ev = check_format(tracer.to_chrome_json())
    check_nesting(ev)
    prog, = [e for e in ev if e["ph"] == "X" and e["cat"] == "program"]
    kernels = [e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"]
    assert len(kernels) == sum(s.count for s in tracer.node_stats().values()) >= 1000
    assert all(prog["ts"] - 1e-3 <= k["ts"] and k["ts"] + k["dur"] <= prog["ts"] + prog["dur"]
               + 1e-3 for k in kernels)


def test_live_bytes_counter_follows_allocations():
    # a (4, 1000) float64 result lives until fetched: the counter reaches at least its size
    from dfg.graphdef.tensors import from_numpy
    from dfg.schemas import graph_pb2

    gd = graph_pb2.GraphDef()
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = 2
    c = gd.node.add(name="c", op="Const")
    c.attr["dtype"].type = 2
    c.attr["value"].tensor.CopyFrom(from_numpy(np.ones((4, 1000))))
    y = gd.node.add(name="y", op="Mul", input=["x", "c"])
    y.attr["T"].type = 2
    tracer = Tracer()
    with Session(gd, threads=1) as sess:
        sess.run("y:0", {"x:0": 2.0}, trace=tracer)
    counts = [e["args"]["bytes"] for e in tracer.to_chrome_json()["traceEvents"]
              if e["ph"] == "C"]
    assert max(counts) >= 4 * 1000 * 8


def test_cli_run_and_bench_write_traces(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run.json"
    r = runner.invoke(cli, ["run", str(NESTED), "--fetch", "outer/Exit_1", "--feed", "n=4",
                            "--feed", "scale=0.5", "--steps", "2", "--trace", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["fetches"][0]["value"] == 12.5   # TensorFlow's s0_fetch_1
    ev = check_format(json.loads(out.read_text()))
    check_nesting(ev)
    assert sum(1 for e in ev if e.get("cat") == "step") == 2
    out2 = tmp_path / "bench.json"
    r = runner.invoke(cli, ["bench", str(NESTED), "--fetch", "outer/Exit", "--feed", "n=3",
                            "--feed", "scale=1", "--iters", "2", "--warmup", "0", "--trace",
                            str(out2), "--json"])
    assert r.exit_code == 0, r.output
    ev = check_format(json.loads(out2.read_text()))
    assert sum(1 for e in ev if e.get("cat") == "step") == 2


def test_perfetto_trace_processor_reads_the_file(tmp_path):
    """Optional: Perfetto's own parser (needs the perfetto package and its downloaded
    trace_processor_shell; skipped offline)."""
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    feeds, _ = nested_case(0)
    tracer = Tracer()
    with Session(load_graph(NESTED), threads=1) as sess:
        sess.run(NESTED_FETCH, feeds, trace=tracer)
    path = tmp_path / "t.json"
    tracer.write(str(path))
    try:
        tp = tp_mod.TraceProcessor(trace=str(path))
    except Exception as e:  # noqa: BLE001 - no binary (offline)
        pytest.skip(f"trace processor unavailable: {e}")
    n = next(iter(tp.query("select count(*) as n from slice"))).n
    tp.close()
    want = sum(1 for e in tracer.to_chrome_json()["traceEvents"] if e["ph"] == "X")
    assert n == want
