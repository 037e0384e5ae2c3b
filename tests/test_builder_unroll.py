"""``unroll`` / ``dfg unroll``: every loop in the conformance corpus is either unrolled with
TensorFlow's expected outputs kept (the case's own expected values) or refused with a reason;
loops with static trip counts built with the builder unroll to the values NumPy computes."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from conformance import DATA, case_dirs, run_case

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef import load_graph
from dfg.graphdef.errors import DfgError, InvalidArgumentError, UnimplementedError
from dfg.graphdef.frames import analyze_frames
from dfg.graphdef.unroll import unroll


def _loops() -> list[tuple[str, str]]:
    out = []
    for d in case_dirs():
        if not (d / "graph.pbtxt").exists():
            continue
        fa = analyze_frames(load_graph(d / "graph.pbtxt"))
        out.extend((d.name, f.name) for f in fa.loop_frames())
    return out


LOOPS = _loops()


@pytest.mark.parametrize("case,frame", LOOPS)
def test_conformance_loops_unroll_or_are_refused(case: str, frame: str) -> None:
    g = load_graph(DATA / case / "graph.pbtxt")
    try:
        gd = unroll(g, frame)
    except (InvalidArgumentError, UnimplementedError) as e:
        assert ("not static" in str(e) or "stateful" in str(e) or "loops inside" in str(e)), e
        return
    assert not any(n.op in ("Enter", "Exit", "NextIteration") and
                   n.attr["frame_name"].s.decode() == frame for n in gd.node)
    run_case(DATA / case, threads=1, graph=load_graph(gd))


def test_some_conformance_loop_unrolls() -> None:
    unrolled = 0
    for case, frame in LOOPS:
        try:
            unroll(load_graph(DATA / case / "graph.pbtxt"), frame)
            unrolled += 1
        except DfgError:
            pass
    assert unrolled >= 1


def test_given_times_on_a_fed_counter() -> None:
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    for n in (0, 1, 5):
        gd = unroll(g, "counter/while_context", times=n)
        assert Session(gd, threads=1).run("counter/Exit:0", {"n:0": np.int32(n)}) == n


def _static_loops() -> B.Graph:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [3], name="x")
        B.while_loop(lambda i, a: i < 10, lambda i, a: (i + 1, a * 0.5 + x),
                     [0, B.zeros([3])], name="a")
        B.while_loop(lambda i, s: i >= 1, lambda i, s: (i - 3, s + i), [20, 0], name="b")
        B.while_loop(lambda i, s: i <= 6, lambda i, s: (
            i + 2, B.cond(s > 5.0, lambda: s - 1.0, lambda: s * 3.0 + 1.0)),
            [0, B.constant(1.0)], name="c")
        B.while_loop(lambda i: i < 0, lambda i: i + 1, [5], name="d")   # zero trips
    return g


def _numpy_loops(x: np.ndarray) -> dict[str, object]:
    a = np.zeros(3, np.float32)
    for _ in range(10):
        a = a * np.float32(0.5) + x
    i, s = 20, 0
    while i >= 1:
        i, s = i - 3, s + i
    j, t = 0, np.float32(1.0)
    while j <= 6:
        j, t = j + 2, (t - 1 if t > 5 else t * 3 + 1)
    return {"a/Exit_1:0": a, "b/Exit_1:0": s, "b/Exit:0": i, "c/Exit_1:0": t,
            "d/Exit:0": 5}


@pytest.mark.parametrize("frame,times", [("a/while_context", 10), ("b/while_context", 7),
                                         ("c/while_context", 4), ("d/while_context", 0)])
def test_static_trip_counts_unroll_to_numpy_values(frame: str, times: int) -> None:
    gd = _static_loops().as_graph_def()
    x = np.array([1.0, -2.0, 0.25], np.float32)
    want = _numpy_loops(x)
    un = unroll(gd, frame)
    assert sum(n.name.endswith("/unroll_0") for n in un.node) >= (1 if times else 0)
    assert not any(n.name.endswith(f"/unroll_{times}") for n in un.node)
    got = Session(un, threads=1).run(list(want), {"x:0": x})
    for (name, w), v in zip(want.items(), got):
        np.testing.assert_allclose(v, w, rtol=1e-6, err_msg=name)
    with pytest.raises(InvalidArgumentError, match="not 3"):
        unroll(gd, frame, times=3) if times != 3 else None


def test_cli_unroll(tmp_path) -> None:
    src = tmp_path / "g.pbtxt"
    _static_loops().save(str(src))
    r = CliRunner().invoke(cli, ["unroll", str(src), "--loop", "a/while_context",
                                 "-o", str(tmp_path / "u.pbtxt")])
    assert r.exit_code == 0, r.output
    assert Session(str(tmp_path / "u.pbtxt"), threads=1).run(
        "d/Exit:0") == 5
    r = CliRunner().invoke(cli, ["unroll", str(DATA / "while_counter" / "graph.pbtxt"),
                                 "--loop", "counter/while_context"])
    assert r.exit_code == 1 and "not static" in r.output
    r = CliRunner().invoke(cli, ["unroll", str(src), "--loop", "nope"])
    assert r.exit_code == 1 and "a/while_context" in r.output
