"""Cancellation, deadlines and concurrency: one rule in every mode (issue #14).

Every test runs the same graph with programs never/always/auto and 1 or 2 threads: the
outcome (values or which error) must not depend on the mode.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from cputime import cpu_seconds

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef.errors import CancelledError, DeadlineExceededError, InvalidArgumentError

MODES = [(p, t) for p in ("never", "always", "auto") for t in (1, 2)]


def _long_loop(fail_at: int | None, n: int = 1_000_000):
    """A counting loop of ``n`` iterations; with ``fail_at``, an Assert in the body fails when
    the counter reaches it."""
    g = B.Graph()
    with g.as_default():
        limit = B.placeholder("int32", [], name="n")

        def body(i, acc):
            deps = []
            if fail_at is not None:
                deps = [B.apply_op("Assert", [B.less(i, fail_at), [i]], name="check")]
            with B.control_dependencies(deps):
                return [B.add(i, 1), B.add(acc, B.multiply(i, 2))]

        out = B.while_loop(lambda i, acc: B.less(i, limit), body,
                           [B.constant(0, name="i0"), B.constant(0, name="a0")])
        B.identity(out[1], name="result")
    return g.as_graph_def()


@pytest.mark.parametrize("programs,threads", MODES)
def test_an_error_in_the_first_iteration_of_a_long_loop_surfaces_at_once(programs, threads):
    gd = _long_loop(fail_at=1)
    # 2**31 - 1 iterations would take hours: the step ends with the Assert's error, not with
    # the deadline, only if the error stops the loop at once (however busy the machine)
    with Session(gd, threads=threads, programs=programs) as sess:
        with pytest.raises(InvalidArgumentError) as e:
            sess.run("result", {"n": 2**31 - 1}, timeout=120)
    assert "check" in str(e.value)


@pytest.mark.parametrize("programs,threads", MODES)
def test_the_loop_gives_the_same_value_in_every_mode(programs, threads):
    with Session(_long_loop(None), threads=threads, programs=programs) as sess:
        assert int(sess.run("result", {"n": 1000})) == 999 * 1000   # sum of 2i, i < 1000


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_timeout_is_the_same_outcome_in_every_mode(programs, threads):
    gd = _long_loop(None)
    with Session(gd, threads=threads, programs=programs) as sess:
        # far too short for 2**31 - 1 iterations (hours): only the deadline ends the step
        with pytest.raises(DeadlineExceededError):
            sess.run("result", {"n": 2**31 - 1}, timeout=0.05)
        # far too long to matter: every mode gives the value
        assert int(sess.run("result", {"n": 100}, timeout=30)) == 99 * 100


@pytest.mark.parametrize("programs", ["never", "always"])
def test_close_during_a_run_cancels_it(programs):
    sess = Session(_long_loop(None), threads=2, programs=programs)
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = sess.run("result", {"n": 10_000_000})
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)
    sess.close()
    t.join(2.0)
    assert not t.is_alive(), "close() left the run blocked"
    assert isinstance(box.get("error"), CancelledError)
    with pytest.raises(CancelledError):
        sess.run("result", {"n": 3})


def test_cancel_keeps_the_session_usable():
    with Session(_long_loop(None), threads=2) as sess:
        # cancel until the run has started and stopped (a busy machine may take longer than
        # any fixed delay to start it); 2**31 - 1 iterations would take hours
        stop = threading.Event()

        def canceller() -> None:
            while not stop.wait(0.05):
                sess.cancel()

        t = threading.Thread(target=canceller)
        t.start()
        try:
            with pytest.raises(CancelledError):
                sess.run("result", {"n": 2**31 - 1})
        finally:
            stop.set()
            t.join()
        assert int(sess.run("result", {"n": 10})) == 90


def test_eight_threads_share_one_session_on_a_loop_graph():
    with Session(_long_loop(None), threads=2) as sess:
        errors: list = []

        def worker(k: int) -> None:
            for r in range(500):
                n = (k * 7 + r) % 40
                got = int(sess.run("result", {"n": n}))
                if got != n * (n - 1):
                    errors.append((k, r, got))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_eight_threads_add_to_one_variable_exactly():
    g = B.Graph()
    with g.as_default():
        v = B.variable(B.constant(0, "int64"), name="counter")
        B.apply_op("AssignAdd", [v._ref, B.constant(1, "int64")], {"use_locking": True},
                   name="bump")
        init = B.global_variables_initializer()
    with Session(g.as_graph_def(), threads=2) as sess:
        sess.run([], targets=[init.name])

        def worker() -> None:
            for _ in range(500):
                sess.run([], targets=["bump"])

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert int(sess.run("counter/read")) == 8 * 500


def test_a_stuck_chain_is_reported_quickly():
    # 12,000 nodes waiting on a Merge that can never fire. The report is linear (about 0.1 s
    # of CPU); a quadratic walk would be 144M steps, minutes of Python. The bound is a
    # hundredfold margin so a busy machine cannot fail it; the collector
    # is off while timing (tests/cputime.py).
    from dfg.graphdef.io import load_graph

    n = 12_000
    last = f"c{n - 1}"
    lines = [f'node {{ name: "m" op: "Merge" input: "{last}" input: "{last}" '
             'attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }']
    prev = "m"
    for i in range(n):
        lines.append(f'node {{ name: "c{i}" op: "Identity" input: "{prev}" '
                     'attr { key: "T" value { type: DT_FLOAT } } }')
        prev = f"c{i}"
    g = load_graph("\n".join(lines).encode(), fmt="pbtxt")
    with Session(g, validate=False) as sess:
        sess.plan([last])          # building the plan is not what is timed
        with cpu_seconds() as spent:
            with pytest.raises(InvalidArgumentError,
                               match=f"{n + 1} node\\(s\\) are stuck") as err:
                sess.run(last)
    assert "'c0' (Identity) waits for m:0" in str(err.value)
    assert spent.seconds < 10.0, spent.seconds


def test_results_do_not_depend_on_the_mode_for_an_int_overflowing_loop():
    gd = _long_loop(None)
    want = None
    for programs, threads in MODES:
        with Session(gd, threads=threads, programs=programs) as sess:
            got = np.asarray(sess.run("result", {"n": 70_000}))
        want = got if want is None else want
        assert got == want   # int32 wraps the same way in every mode
