"""Random graphs with control flow: the Session equals the reference interpreter.

Hypothesis draws graphs (tests/graphgen.py) with nested while loops (depth <= 3), conds
inside loop bodies and loops inside branches, and ref variables updated by AssignAdd in loops
and branches. Each runs in one Session per drawn (programs, optimize, threads) configuration, as the
reference does: the variables' initializer, the fetches twice (the second run uses the cached
plan and measured costs, and sees the variables the first one updated), then the variables.
Integers and booleans must be equal; floats (float64) equal to rounding (rtol 1e-9).

``DFG_HYPOTHESIS_EXAMPLES`` sets the number of examples in all (default 200, about 20 s here;
a nightly run sets thousands). Examples are derandomized (the same every run) unless
``DFG_HYPOTHESIS_RANDOM=1``; a failure is shrunk only with ``DFG_HYPOTHESIS_SHRINK=1``.

Configurations are drawn from every mode: programs never/always/auto x the Session's
per-signature optimizer off/auto/eager x 1, 2 or 8 threads. The deeply nested graphs run as
written (``optimize=False``): the executor against the oracle. The optimizer is checked the
same way (it once dropped AssignAdds in loops; the test at the end pins that case).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import numpy as np
from graphgen import Case, _ref_in_context, control_flow_graphs
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dfg.executor import Session
from dfg.executor.reference import Reference
from dfg.graphdef import builder as B

EXAMPLES = int(os.environ.get("DFG_HYPOTHESIS_EXAMPLES", "200"))
RANDOM = os.environ.get("DFG_HYPOTHESIS_RANDOM") == "1"
# shrinking a failure can take minutes on these graphs: only when asked
SHRINK = os.environ.get("DFG_HYPOTHESIS_SHRINK") == "1"
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else [])
# every mode: programs x the per-signature optimizer x threads
CONFIGS = [(m, o, t) for m in ("never", "always", "auto") for o in ("off", "auto", "eager")
           for t in (1, 2, 8)]
# the executor itself, not the per-signature optimizer in front of it (tested apart below)
AS_WRITTEN = {"optimize": False} if "optimize" in inspect.signature(Session).parameters else {}


def _settings(share: float) -> settings:
    return settings(max_examples=max(1, int(EXAMPLES * share)), deadline=None,
                    derandomize=not RANDOM, database=None, phases=PHASES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _steps(runner: Reference | Session, case: Case) -> list[list[np.ndarray]]:
    """The same sequence of steps for the reference and a Session."""
    if case.init:
        runner.run([], targets=[case.init])
    out = [runner.run(case.fetches, feed_dict=case.feeds) for _ in range(2)]
    if case.variables:
        out.append(runner.run(case.variables))
    return out


def _check(case: Case, configs: list[tuple[str, str, int]], **session_kw: Any) -> None:
    expected = _steps(Reference(case.graph_def), case)
    for programs, optimize, threads in configs:
        kw = {"optimize": optimize, **session_kw}
        with Session(case.graph_def, threads=threads, programs=programs, **kw) as sess:
            got = _steps(sess, case)
        for step, (want, have) in enumerate(zip(expected, got)):
            names = case.variables if step == 2 else case.fetches
            for name, w, h in zip(names, want, have):
                what = (f"{name} (step {step}, programs={programs}, optimize={optimize}, "
                        f"threads={threads})")
                h = np.asarray(h)
                assert h.dtype == w.dtype and h.shape == w.shape, what
                if w.dtype.kind == "f":
                    # the Session may rewrite arithmetic (its per-signature optimizer):
                    # float64 results agree to rounding
                    np.testing.assert_allclose(h, w, rtol=1e-9, atol=1e-9, err_msg=what)
                else:
                    np.testing.assert_array_equal(h, w, err_msg=what)


@_settings(0.75)
@given(control_flow_graphs(), st.lists(st.sampled_from(CONFIGS), min_size=2, max_size=2,
                                       unique=True))
def test_random_control_flow_graphs_match_the_reference(case: Case, configs: list) -> None:
    _check(case, configs)


@_settings(0.25)
@given(control_flow_graphs(max_depth=3, max_flow=8), st.sampled_from(CONFIGS))
def test_deeply_nested_random_graphs_match_the_reference(case: Case, config: tuple) -> None:
    _check(case, [config], **AS_WRITTEN)


# the Session with its per-signature optimizer on against the oracle too
@_settings(0.25)
@given(control_flow_graphs(), st.sampled_from([c for c in CONFIGS if c[1] != "off"]))
def test_random_graphs_through_the_optimizing_session_match_the_reference(
        case: Case, config: tuple) -> None:
    _check(case, [config])


def test_the_generator_makes_every_kind_of_nesting() -> None:
    # guard against a generator change that silently stops nesting: over a few dozen drawn
    # graphs, every feature appears
    seen: set[str] = set()

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(control_flow_graphs())
    def collect(case: Case) -> None:
        seen.update(case.features)

    collect()
    assert {"while", "cond", "nested", "nested-while", "while-in-cond", "variable-in-loop",
            "variable-in-cond"} <= seen, seen


def _loop_feeding_a_constant_false_branch() -> tuple[Any, str, str]:
    """A while loop with AssignAdd(v, 1) in its body whose result only feeds the untaken
    branch of a cond with a constant predicate. As written, the cond's Switch waits for the
    loop's Exit, so the loop (and its AssignAdds) runs every step."""
    g = B.Graph()
    with g.as_default():
        v = B.variable(np.zeros(2, np.int32), name="v")
        x = B.placeholder("float64", [2], name="x")

        def body(i):
            add = B.apply_op("AssignAdd", [_ref_in_context(v._ref), B.constant(np.ones(2,
                                                                                   np.int32))],
                             {"use_locking": True}).outputs[0]
            return B.with_dependencies([add], i + 1)

        trips = B.while_loop(lambda i: i < 2, body, [B.constant(np.int32(0))])
        out = B.cond(B.constant(False), lambda: B.cast(trips, "float64") + x, lambda: x * 2.0)
        init = B.global_variables_initializer()
    return g.as_graph_def(), out.name, init.name


def test_reference_runs_a_loop_that_only_feeds_an_untaken_constant_branch() -> None:
    gd, out, init = _loop_feeding_a_constant_false_branch()
    ref = Reference(gd)
    ref.run([], targets=[init])
    for _ in range(3):
        np.testing.assert_array_equal(ref.run(out, {"x:0": np.array([1.0, 2.0])}), [2.0, 4.0])
    np.testing.assert_array_equal(ref.run("v:0"), [6, 6])   # 3 steps x 2 iterations


# the Session's optimizer once removed the dead branch of a constant cond and then pruned the
# while loop that fed it, dropping the loop's AssignAdd (v stayed [0, 0])
def test_session_runs_a_loop_that_only_feeds_an_untaken_constant_branch() -> None:
    gd, out, init = _loop_feeding_a_constant_false_branch()
    with Session(gd, threads=1) as sess:
        sess.run([], targets=[init])
        for _ in range(3):
            np.testing.assert_array_equal(sess.run(out, {"x:0": np.array([1.0, 2.0])}),
                                          [2.0, 4.0])
        np.testing.assert_array_equal(sess.run("v:0"), [6, 6])
