"""Optimized graphs kept across Sessions (executor/plan_cache.py): a new Session of a graph
with the same bytes takes the optimized graph at its first step; its results are still
TensorFlow's; anything that changes the optimizer's result (the graph, the signature, the
budget) is another key; the disk cache is opt-in, checksummed and bounded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conformance import case_dirs, load_case, missing_kernels, run_case
from test_executor import VARIABLE_COUNTER
from test_session_optimize import CHAIN  # x + 1 + 1 + 1, three AddV2s

from dfg.executor import Session, plan_cache
from dfg.graphdef.io import load_graph

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _chain(one: float = 1.0):
    return load_graph(CHAIN.replace("float_val: 1 ", f"float_val: {one} ").encode(),
                      fmt="pbtxt")


def test_a_new_session_of_the_same_bytes_runs_optimized_from_its_first_step():
    with Session(_chain(), threads=1, optimize="lazy") as s1:
        assert s1.plan(["c"], ["x"]).deferred            # nothing cached yet
        for v in (2.0, 3.0):                               # the second run optimizes
            assert s1.run("c", {"x": np.float32(v)}) == np.float32(v + 3)
        optimized = s1.plan(["c"], ["x"])
        assert not optimized.deferred and len(optimized.items) < 4
    with Session(_chain(), threads=1, optimize="lazy") as s2:   # loaded again: new objects
        first = s2.plan(["c"], ["x"])
        assert not first.deferred and first.optimized is not None
        assert len(first.items) == len(optimized.items)
        assert s2.run("c", {"x": np.float32(-1)}) == np.float32(2)
    assert plan_cache.CACHE.hits >= 1


def test_what_changes_the_result_is_another_key():
    with Session(_chain(), threads=1, optimize="eager") as s:
        assert s.run("c", {"x": np.float32(0)}) == np.float32(3)
    hits = plan_cache.CACHE.hits
    # another constant: other bytes; another signature (b instead of c; x not fed but a);
    # another memory budget
    with Session(_chain(2.0), threads=1, optimize="lazy") as s:
        assert s.plan(["c"], ["x"]).deferred
        assert s.run("c", {"x": np.float32(0)}) == np.float32(6)
    with Session(_chain(), threads=1, optimize="lazy") as s:
        assert s.plan(["b"], ["x"]).deferred
        assert s.plan(["c"], ["a"]).deferred
        assert s.run("c", {"a": np.float32(0)}) == np.float32(2)
    with Session(_chain(), threads=1, optimize="lazy", max_bytes=1 << 20) as s:
        assert s.plan(["c"], ["x"]).deferred
    assert plan_cache.CACHE.hits == hits


def test_optimize_off_never_takes_an_optimized_graph():
    with Session(_chain(), threads=1, optimize="eager") as s:
        s.run("c", {"x": np.float32(0)})
    with Session(_chain(), threads=1, optimize="off") as s:
        plan = s.plan(["c"], ["x"])
        assert plan.optimized is None and len(plan.items) == 4
        assert s.run("c", {"x": np.float32(1)}) == np.float32(4)


def _runnable_cases() -> list[Path]:
    return [d for d in case_dirs() if not missing_kernels(d)]


@pytest.mark.parametrize("d", _runnable_cases(), ids=lambda d: d.name)
def test_conformance_cases_from_the_cache_give_tensorflows_values(d, monkeypatch):
    """Every conformance case run optimized before its first step, then by new Sessions of
    the graph loaded again that take each signature's optimized graph from the cache (lazy:
    without the cache they would run the graph as written): TensorFlow's values either way."""
    monkeypatch.setenv("DFG_OPTIMIZE", "eager")
    run_case(d, threads=2)
    stored = len(plan_cache.CACHE)
    assert stored >= 1 or all(not s["fetch"] and not s["target"]
                              for s in load_case(d)["steps"])
    monkeypatch.setenv("DFG_OPTIMIZE", "lazy")
    hits = plan_cache.CACHE.hits
    run_case(d, threads=2)
    assert plan_cache.CACHE.hits > hits or stored == 0
    run_case(d, threads=1, programs="never")


def test_a_loop_graph_from_the_cache():
    g = EXAMPLES / "while_counter.pbtxt"
    # eager: the loop is optimized before its first run
    with Session(load_graph(g), threads=2, optimize="eager") as s:
        assert s.run("counter/Exit", {"n": 5}) == 5   # examples/README.md: counts to n
    with Session(load_graph(g), threads=2, optimize="auto") as s:
        assert s.plan(["counter/Exit"], ["n"]).optimized is not None
        assert s.run("counter/Exit", {"n": 7}) == 7
    assert plan_cache.CACHE.hits >= 1


def test_the_memory_cache_is_bounded_least_recently_used_first():
    c = plan_cache.PlanCache(max_entries=2, max_bytes=100)
    for k in "abc":
        c.put((k,), plan_cache.Entry(None, None, 10))
    assert len(c) == 2 and c.get(("a",)) is None and c.get(("c",)) is not None
    assert not c.may_hold("a") and c.may_hold("b") and c.may_hold("c")
    c.get(("b",))                                       # b is now the most recent
    c.put(("d",), plan_cache.Entry(None, None, 10))
    assert c.get(("c",)) is None and c.get(("b",)) is not None
    c.put(("big",), plan_cache.Entry(None, None, 101))  # larger than the whole budget
    assert c.get(("big",)) is None and len(c) == 2
    c.put(("e",), plan_cache.Entry(None, None, 95))     # the bytes bound drops the rest
    assert len(c) == 1 and c.get(("e",)) is not None
    assert [k for k in "abcde" if c.may_hold(k)] == ["e"]


def test_a_graph_no_entry_could_match_is_not_hashed(monkeypatch):
    """The outline (node count, first and last names) rules a graph out before hashing."""
    hashed = []
    digest = plan_cache.graph_digest
    monkeypatch.setattr(plan_cache, "graph_digest", lambda gd: hashed.append(1) or digest(gd))
    with Session(_chain(), threads=1, optimize="lazy") as s:
        s.run("c", {"x": np.float32(0)})
        assert not hashed                       # an empty cache: nothing to look up
        s.run("c", {"x": np.float32(0)})        # optimizes, stores: hashed once
        assert len(hashed) == 1
    with Session(_chain(2.0), threads=1, optimize="lazy") as s:
        assert s.plan(["c"], ["x"]).deferred     # the same outline: hashed, then a miss
        assert len(hashed) == 2


def test_the_disk_cache_carries_an_optimized_graph_to_another_process(tmp_path):
    cache = tmp_path / "plans"
    with Session(_chain(), threads=1, optimize="eager", plan_cache_dir=cache) as s:
        assert s.run("c", {"x": np.float32(0)}) == np.float32(3)
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].suffix == ".pb"
    plan_cache.clear()                                  # as a new process would start
    with Session(_chain(), threads=1, optimize="lazy", plan_cache_dir=cache) as s:
        plan = s.plan(["c"], ["x"])
        assert not plan.deferred and len(plan.items) < 4
        assert any("plan cache" in n for n in plan.optimized.notes)
        assert s.run("c", {"x": np.float32(5)}) == np.float32(8)
    assert [p.name for p in cache.iterdir()] == [files[0].name]   # nothing else written


def test_the_disk_cache_is_read_from_dfg_plan_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DFG_PLAN_CACHE", str(tmp_path))
    with Session(_chain(), threads=1, optimize="eager") as s:
        s.run("c", {"x": np.float32(0)})
    assert len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_a_damaged_cache_file_is_a_miss_and_is_rewritten(tmp_path, damage):
    with Session(_chain(), threads=1, optimize="eager", plan_cache_dir=tmp_path) as s:
        s.run("c", {"x": np.float32(0)})
    (f,) = tmp_path.iterdir()
    data = f.read_bytes()
    f.write_bytes({"flip": data[:-1] + bytes([data[-1] ^ 0xFF]), "truncate": data[:-3],
                   "garbage": b"\x0a\xff\xff\xff\xff\x0f" * 20, "empty": b""}[damage])
    plan_cache.clear()
    with Session(_chain(), threads=1, optimize="lazy", plan_cache_dir=tmp_path) as s:
        assert s.plan(["c"], ["x"]).deferred               # the file was not believed
        for v in (1.0, 2.0):
            assert s.run("c", {"x": np.float32(v)}) == np.float32(v + 3)
    assert f.read_bytes() == data                          # the second run stored it again


def test_a_checksummed_file_that_does_not_parse_is_a_miss(tmp_path):
    """A file with a right checksum but a payload that is no GraphDef (someone else wrote
    it): the loader's error is a miss, not a failed run."""
    import hashlib

    with Session(_chain(), threads=1, optimize="eager", plan_cache_dir=tmp_path) as s:
        s.run("c", {"x": np.float32(0)})
    (f,) = tmp_path.iterdir()
    payload = b"\x0a\x05\x0a\x03\xff\xff\xff"               # a node whose name is not UTF-8
    f.write_bytes(plan_cache._MAGIC + hashlib.sha256(payload).digest() + payload)
    plan_cache.clear()
    with Session(_chain(), threads=1, optimize="lazy", plan_cache_dir=tmp_path) as s:
        assert s.plan(["c"], ["x"]).deferred
        assert s.run("c", {"x": np.float32(1)}) == np.float32(4)


def test_an_unwritable_cache_directory_does_not_fail_a_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with Session(_chain(), threads=1, optimize="eager", plan_cache_dir=blocker / "x") as s:
        assert s.run("c", {"x": np.float32(0)}) == np.float32(3)
    assert blocker.read_text() == "not a directory"



def test_a_new_sessions_programs_reuse_compiled_code():
    """A program's source names its kernels and constants by index, so a Session that builds
    its own plan of a graph compiled before (here: another thread count, so not the other
    Session's plan) compiles the same source: Python's compile() runs once
    (executor/codegen.py), each plan still gets its own function over its own kernels."""
    g = EXAMPLES / "while_counter.pbtxt"

    def loop_code(s: Session, n: int):
        assert s.run("counter/Exit", {"n": n}) == n     # examples/README.md: counts to n
        assert s.run("counter/Exit", {"n": n + 1}) == n + 1
        stats = s.plan(["counter/Exit"], ["n"]).stats
        fns = [c[0] for c in stats.compiled.values() if c]
        assert fns, "the loop ran as a compiled program"
        return fns

    with Session(load_graph(g), threads=1) as s1, Session(load_graph(g), threads=2) as s2:
        first, second = loop_code(s1, 5), loop_code(s2, 9)
        assert s1.plan(["counter/Exit"], ["n"]) is not s2.plan(["counter/Exit"], ["n"])
        assert len(first) == len(second)
        assert all(a.__code__ is b.__code__ and a is not b
                   and a.__globals__ is not b.__globals__ for a, b in zip(first, second))
        assert s1.run("counter/Exit", {"n": 3}) == 3 and s2.run("counter/Exit", {"n": 4}) == 4


def _at_once(work, args: list) -> None:
    """Run ``work(*a)`` for each ``a`` of ``args``, each on its own thread, all at once."""
    import threading

    threads = [threading.Thread(target=work, args=a) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# --- plans shared by Sessions of the same bytes (plan_cache.Entry.plans) -------------------

def test_a_new_session_of_the_same_bytes_runs_the_plan_another_built():
    """The plan is immutable per-graph state: a second Session of the graph loaded again
    takes the first one's (bound kernels, compiled programs, measured costs) at its first
    step (optimized: the first Session optimized eagerly); another device, thread count or
    programs setting builds its own."""
    g = EXAMPLES / "while_counter.pbtxt"
    with Session(load_graph(g), threads=1, optimize="eager") as s1:
        assert s1.run("counter/Exit", {"n": 5}) == 5      # examples/README.md: counts to n
        plan = s1.plan(["counter/Exit"], ["n"])
    # s1 is closed: its plan outlives it, for the next Session
    with Session(load_graph(g), threads=1, optimize="auto") as s2:
        assert s2.plan(["counter/Exit"], ["n"]) is plan
        assert s2.run("counter/Exit", {"n": 8}) == 8
    for kw in ({"threads": 2}, {"threads": 1, "programs": "never"}):
        with Session(load_graph(g), optimize="auto", **kw) as s3:
            assert s3.plan(["counter/Exit"], ["n"]) is not plan
            assert s3.run("counter/Exit", {"n": 4}) == 4
    with Session(load_graph(g), threads=1, optimize="off") as s4:
        assert s4.plan(["counter/Exit"], ["n"]) is not plan


def test_a_lazy_sessions_optimized_plan_is_shared_from_the_next_sessions_first_step():
    with Session(_chain(), threads=1, optimize="lazy") as s1:
        for v in (2.0, 3.0):                               # the second run optimizes
            assert s1.run("c", {"x": np.float32(v)}) == np.float32(v + 3)
        optimized = s1.plan(["c"], ["x"])
    with Session(_chain(), threads=1, optimize="lazy") as s2:
        assert s2.plan(["c"], ["x"]) is optimized
        assert s2.run("c", {"x": np.float32(-1)}) == np.float32(2)


# a variable counted up by one each run, and a seeded random draw: per-Session state
STATEFUL = VARIABLE_COUNTER + """
node { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
  int_val: 4 } } } }
node { name: "r" op: "RandomUniform" input: "shape" attr { key: "T" value { type: DT_INT32 } }
  attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "seed" value { i: 7 } }
  attr { key: "seed2" value { i: 3 } } }
"""


def test_sessions_sharing_a_plan_keep_their_own_variables_and_random_streams():
    """Variables and a seeded random op's stream are the Session's (its ResourceManager),
    not the plan's: a Session that takes another's plan starts from its own initial state."""
    def session() -> Session:
        s = Session(load_graph(STATEFUL.encode(), fmt="pbtxt"), threads=1,
                    optimize="eager")
        s.run([], targets=["init"])
        return s

    with session() as s1:
        counts = [float(s1.run("inc")) for _ in range(3)]
        draws = [s1.run("r") for _ in range(2)]
        inc_plan = s1.plan(["inc:0"], [])
    assert counts == [1.0, 2.0, 3.0]
    assert not np.array_equal(draws[0], draws[1])        # the stream moves on each run
    with session() as s2, session() as s3:
        assert s2.plan(["inc:0"], []) is inc_plan
        assert [float(s2.run("inc")) for _ in range(2)] == [1.0, 2.0]
        assert float(s3.run("inc")) == 1.0                # its own variable, not s2's
        assert float(s2.run("inc")) == 3.0
        # TensorFlow restarts a seeded op's stream in each new Session
        np.testing.assert_array_equal(s2.run("r"), draws[0])
        np.testing.assert_array_equal(s3.run("r"), draws[0])
        np.testing.assert_array_equal(s2.run("r"), draws[1])


def test_a_shared_plan_counts_against_the_caches_byte_budget():
    c = plan_cache.PlanCache(max_entries=4, max_bytes=100)
    c.put(("a",), plan_cache.Entry(None, None, 10))
    c.add_plan(("a",), ("CPU", 1, "auto"), "plan-a", 30)
    assert c.plan(("a",), ("CPU", 1, "auto")) == "plan-a"
    assert c.plan(("a",), ("GPU", 1, "auto")) is None
    c.add_plan(("gone",), ("CPU", 1, "auto"), "plan-x", 1)     # no entry: nothing kept
    assert c.plan(("gone",), ("CPU", 1, "auto")) is None
    c.add_plan(("a",), ("CPU", 2, "auto"), "too-big", 70)      # 40 + 70 > 100: not kept
    assert c.plan(("a",), ("CPU", 2, "auto")) is None
    c.put(("b",), plan_cache.Entry(None, None, 50))            # 40 + 50: both fit
    assert len(c) == 2
    c.put(("c",), plan_cache.Entry(None, None, 20))            # 110: the oldest, a, goes
    assert c.get(("a",)) is None and c.plan(("a",), ("CPU", 1, "auto")) is None


def test_sessions_sharing_a_plan_run_it_at_once_from_several_threads():
    """Two Sessions of one graph share its plan; four threads run steps through them at the
    same time (a loop graph: each step's frames and iterations are its own), every result the
    count the loop makes (examples/README.md: counts to n)."""
    g = EXAMPLES / "while_counter.pbtxt"
    sessions = [Session(load_graph(g), threads=2, optimize="eager") for _ in range(2)]
    try:
        assert sessions[0].run("counter/Exit", {"n": 3}) == 3
        assert sessions[1].plan(["counter/Exit"], ["n"]) is \
            sessions[0].plan(["counter/Exit"], ["n"])
        wrong: list = []

        def work(s: Session, base: int) -> None:
            for k in range(30):
                n = base + k
                got = s.run("counter/Exit", {"n": n})
                if got != n:
                    wrong.append((n, got))

        _at_once(work, [(sessions[i % 2], 10 * i) for i in range(4)])
        assert not wrong
    finally:
        for s in sessions:
            s.close()


def test_a_shared_straight_line_plan_runs_at_once_from_several_threads():
    """The MLP's optimized plan (a straight-line program, its products and fused bias adds)
    shared by two Sessions, run by four threads at once on different inputs: each result
    is the reference interpreter's for that input."""
    from dfg.executor.reference import Reference

    g = EXAMPLES / "mlp.pbtxt"
    x = np.load(EXAMPLES / "mlp_x.npy")
    rng = np.random.default_rng(2)
    inputs = [(x + rng.standard_normal(x.shape)).astype(x.dtype) for _ in range(4)]
    want = [Reference(load_graph(g).graph_def).run(["probs:0"], {"x:0": v})[0]
            for v in inputs]
    sessions = [Session(load_graph(g), threads=2, optimize="eager") for _ in range(2)]
    try:
        sessions[0].run("probs", {"x": inputs[0]})
        assert sessions[1].plan(["probs:0"], ["x:0"]) is sessions[0].plan(["probs:0"], ["x:0"])
        wrong: list = []

        def work(i: int) -> None:
            for _ in range(40):
                got = sessions[i % 2].run("probs", {"x": inputs[i]})
                if not np.allclose(got, want[i], rtol=1e-5, atol=1e-6):
                    wrong.append(i)

        _at_once(work, [(i,) for i in range(4)])
        assert not wrong
    finally:
        for s in sessions:
            s.close()
