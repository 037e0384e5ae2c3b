"""Whole loop nests as one program: loops whose body holds a cond or another loop.

A frame with a ``tf.cond`` in its body, or with an inner ``tf.while_loop``, compiles to one
loop program (executor/programs.py) and runs as one generated function (executor/codegen.py).
Expected values are TensorFlow's (the conformance data, made by TensorFlow) and the reference
interpreter's (executor/reference.py), or follow from arithmetic; never dfg's own output.
"""

from __future__ import annotations

import ast
import io
import json
import keyword
import tokenize
from pathlib import Path

import numpy as np
import pytest
from graphgen import _ref_in_context, control_flow_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_random_graphs import AS_WRITTEN, CONFIGS, _check, _settings

from dfg.executor import Session
from dfg.executor import programs as P
from dfg.executor.reference import Reference
from dfg.graphdef import builder as B
from dfg.graphdef.errors import DeadlineExceededError, InvalidArgumentError
from dfg.graphdef.io import load_graph

DATA = Path(__file__).resolve().parent / "data"

# (case folder, what the outermost loop holds)
CASES = [
    ("tf2/tf2_if_in_while", "cond"),
    ("conformance/while_with_cond", "cond"),
    ("conformance/while_nested", "loop"),
    ("tf2/tf2_nested_while", "loop"),
    ("tf2/tf2_keras_gru_lowered", ""),
    ("tf2/tf2_keras_lstm_lowered", ""),
    ("tf2/tf2_keras_bidirectional_lstm_lowered", ""),
    ("models/layer_gru", ""),
    ("models/layer_lstm", ""),
]


def _case(name: str) -> tuple[Path, dict]:
    d = DATA / name
    return d, json.loads((d / "case.json").read_text())


def _graph(d: Path):
    return load_graph(d / "graph.pbtxt" if (d / "graph.pbtxt").exists() else d / "graph.pb")


def _outer_programs(plan) -> list:
    """The programs of the loops that the root frame enters (the outermost ones)."""
    outer = {it.enter_frame for it in plan.items if it.is_enter and it.frame == ""}
    return [plan.frames[f].program for f in sorted(outer)]


def _statements(lp: P.LoopIR) -> list:
    out = []

    def walk(stmts: list) -> None:
        for x in stmts:
            out.append(x)
            if type(x) is P.If:
                walk(x.block)
            elif type(x) is P.LoopIR:
                walk(x.pre)
                walk(x.body)

    walk(lp.pre)
    walk(lp.body)
    return out


@pytest.mark.parametrize("name,holds", CASES)
def test_the_loop_nest_compiles_runs_as_a_program_and_gives_tensorflows_values(name, holds):
    d, case = _case(name)
    ref = Reference(_graph(d))
    with Session(_graph(d), threads=1, programs="always") as sess:
        for i, step in enumerate(case["steps"]):
            feed = {k: np.load(d / v) for k, v in step["feed"].items()}
            plan = sess.plan(step["fetch"], list(step["feed"]), step["target"])
            progs = _outer_programs(plan)
            assert progs and all(p is not None for p in progs), name
            stmts = [x for p in progs for x in _statements(p.loop)]
            if holds == "cond":
                assert any(type(x) is P.If for x in stmts)
                assert any(type(x) is P.Select for x in stmts)
            elif holds == "loop":
                assert any(type(x) is P.LoopIR for x in stmts)
            out = sess.run(step["fetch"], feed, targets=step["target"])
            # each outermost program ran as its generated function (which records its cost)
            for p in progs:
                assert p.compiled and p.stats.program_cost.get(p.id) is not None
            want_ref = ref.run(step["fetch"], feed, step["target"])
            for f, got, r in zip(step["fetch"], out, want_ref):
                want = np.load(d / step["expect"][f])   # TensorFlow's value
                assert got.dtype == want.dtype and got.shape == want.shape, (name, i, f)
                np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"],
                                           err_msg=f"{name} step {i} {f}")
                np.testing.assert_allclose(got, r, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,holds", CASES[:4])
def test_auto_mode_runs_the_nest_as_one_program_once_warm(name, holds):
    d, case = _case(name)
    step = case["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    with Session(_graph(d), threads=2, programs="auto") as sess:
        for _ in range(3):
            out = sess.run(step["fetch"], feed, targets=step["target"])
        plan = sess.plan(step["fetch"], list(step["feed"]), step["target"])
        for p in _outer_programs(plan):
            assert p.runs() and p.stats.program_cost.get(p.id) is not None
    for f, got in zip(step["fetch"], out):
        np.testing.assert_allclose(got, np.load(d / step["expect"][f]), rtol=case["rtol"],
                                   atol=case["atol"])


@pytest.mark.parametrize("name", ["tf2/tf2_keras_lstm_lowered", "models/layer_gru"])
def test_a_loop_holding_unmeasured_products_runs_as_its_program_in_the_first_step(name):
    """A loop's iterations run one after the other either way: its first step need not go
    node by node to measure the cell's MatMul first (presumed heavy until measured)."""
    d, case = _case(name)
    step = case["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    # optimize="off": the plan looked at is the one the first step runs
    with Session(_graph(d), threads=2, programs="auto", optimize="off") as sess:
        plan = sess.plan(step["fetch"], list(step["feed"]), step["target"])
        progs = _outer_programs(plan)
        assert progs and any(k.spec.heavy for p in progs for k in p.kernels)
        assert all(p.stats.cost_us[k.id] < 0 for p in progs for k in p.kernels)
        out = sess.run(step["fetch"], feed, targets=step["target"])
        for p in progs:       # each ran as its program (which records its mean kernel cost)
            assert p.stats.program_cost.get(p.id) is not None
    for f, got in zip(step["fetch"], out):
        np.testing.assert_allclose(got, np.load(d / step["expect"][f]), rtol=case["rtol"],
                                   atol=case["atol"])


def test_a_loop_program_found_slow_in_its_first_step_goes_node_by_node_next():
    """The product of a loop's body is measured by the program's first run: found slow (its
    mean kernel cost above PROGRAM_LEAVE_US), the next step runs the loop node by node."""
    n, size = 3, 700
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [size, size], name="x")
        out = B.while_loop(lambda i, m: B.less(i, n),
                           lambda i, m: [B.add(i, 1), B.multiply(B.matmul(m, x), 0.5)],
                           [B.constant(0), x])
        B.identity(out[1], name="y")
    gd = g.as_graph_def()
    xv = np.full((size, size), 1.0 / size, np.float32)
    want = xv * 0.5 ** n             # (J/size)^k = J/size: each product leaves x as it is
    with Session(gd, threads=2, programs="auto", optimize="off") as sess:
        prog, = _outer_programs(sess.plan(["y"], ["x"]))
        np.testing.assert_allclose(sess.run("y", {"x": xv}), want, rtol=1e-5)
        # it ran as the program, which measured its kernels' mean: a product of 343M
        # multiply-adds (milliseconds on any CPU; a busy one only adds) among four cheap
        # kernels per iteration is far above PROGRAM_LEAVE_US
        assert prog.stats.program_cost[prog.id] > prog.stats.PROGRAM_LEAVE_US
        assert not prog.runs()
        np.testing.assert_allclose(sess.run("y", {"x": xv}), want, rtol=1e-5)


def test_generated_code_names_slots_only_never_nodes():
    d, case = _case("tf2/tf2_if_in_while")
    step = case["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    with Session(_graph(d), threads=1, programs="always", optimize="eager") as sess:
        sess.run(step["fetch"], feed)
        plan = sess.plan(step["fetch"], list(step["feed"]), step["target"])
        prog, = _outer_programs(plan)
        src = prog.compiled[0].source
    assert "if s" in src or "if not s" in src      # the cond is an if statement
    assert src.count("while True:") == 1
    # no node name is an identifier or a string of the code (a node may be named "while":
    # the keyword is not its name)
    tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    idents = {t.string for t in tokens
              if t.type == tokenize.NAME and not keyword.iskeyword(t.string)}
    strings = {ast.literal_eval(t.string) for t in tokens if t.type == tokenize.STRING}
    for it in plan.items:
        assert it.name not in idents and it.name not in strings, it.name
        if "/" in it.name:
            assert it.name not in src, it.name


# --- graphs built here: values from arithmetic and from the reference ------------------------

def _collatz_steps(n: int) -> int:
    k = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


def _cond_in_loop_graph():
    """Collatz steps of n: a cond in the body, its Merge's value_index summed too."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def body(x, k, evens):
            is_even = B.equal(B.apply_op("FloorMod", [x, B.constant(2)]).outputs[0],
                              B.constant(0))
            nxt = B.cond(is_even,
                         lambda: B.apply_op("FloorDiv", [x, B.constant(2)]).outputs[0],
                         lambda: B.add(B.multiply(x, 3), 1))
            # the Merge's value_index: 0 when its first input (the false branch) ran
            idx = nxt.op.outputs[1]
            return [nxt, B.add(k, 1), B.add(evens, B.subtract(B.constant(1), idx))]

        out = B.while_loop(lambda x, k, e: B.not_equal(x, 1), body,
                           [n, B.constant(0), B.constant(0)])
        B.identity(out[1], name="steps")
        B.identity(out[2], name="odd_steps")
    return g.as_graph_def()


def test_a_cond_in_the_body_follows_the_branch_taken_in_each_iteration():
    gd = _cond_in_loop_graph()
    ref = Reference(gd)
    for mode in ("always", "never"):
        with Session(gd, threads=1, programs=mode) as sess:
            plan = sess.plan(["steps", "odd_steps"], ["n"])
            assert plan.frames[_outer_name(plan)].program is not None
            for n in (1, 6, 27):
                steps, odd = sess.run(["steps", "odd_steps"], {"n": n})
                assert int(steps) == _collatz_steps(n)
                want = ref.run(["steps", "odd_steps"], {"n:0": np.int32(n)})
                assert int(odd) == int(want[1]) and int(steps) == int(want[0])


def _outer_name(plan) -> str:
    return next(it.enter_frame for it in plan.items if it.is_enter and it.frame == "")


def _triple_nest_graph():
    """sum over i < a of (sum over j < i of (j if j even else the count of k < j)): a loop
    in a cond in a loop in a loop."""
    g = B.Graph()
    with g.as_default():
        a = B.placeholder("int32", [], name="a")

        def outer(i, acc):
            def inner(j, s):
                def odd():
                    return B.while_loop(lambda k, c: B.less(k, j),
                                        lambda k, c: [B.add(k, 1), B.add(c, 1)],
                                        [B.constant(0), B.constant(0)])[1]
                v = B.cond(B.equal(B.apply_op("FloorMod", [j, B.constant(2)]).outputs[0],
                                   B.constant(0)), lambda: B.identity(j), odd)
                return [B.add(j, 1), B.add(s, v)]
            s = B.while_loop(lambda j, s: B.less(j, i), inner,
                             [B.constant(0), B.constant(0)])[1]
            return [B.add(i, 1), B.add(acc, s)]

        out = B.while_loop(lambda i, acc: B.less(i, a), outer, [B.constant(0), B.constant(0)])
        B.identity(out[1], name="total")
    return g.as_graph_def()


def test_a_loop_in_a_cond_in_a_loop_in_a_loop_is_one_program():
    gd = _triple_nest_graph()
    with Session(gd, threads=2, programs="always") as sess:
        plan = sess.plan(["total"], ["a"])
        prog = plan.frames[_outer_name(plan)].program
        assert prog is not None and len(prog.loops) == 3
        for a in (0, 1, 5, 9):
            # every j < i contributes j (whether j is even or odd: the count of k < j is j)
            want = sum(j for i in range(a) for j in range(i))
            assert int(sess.run("total", {"a": a})) == want
        assert prog.stats.program_cost.get(prog.id) is not None   # it ran compiled


def test_assign_add_in_a_branch_in_a_loop_counts_the_iterations_that_took_it():
    g = B.Graph()
    with g.as_default():
        v = B.variable(np.int32(0), name="v")
        n = B.placeholder("int32", [], name="n")

        def body(i):
            def bump():
                return B.with_dependencies(
                    [B.apply_op("AssignAdd", [_ref_in_context(v._ref), B.constant(1)],
                                {"use_locking": True})], B.identity(i))
            j = B.cond(B.equal(B.apply_op("FloorMod", [i, B.constant(3)]).outputs[0],
                               B.constant(0)), bump, lambda: B.identity(i))
            return [B.add(j, 1)]

        out = B.while_loop(lambda i: B.less(i, n), body, [B.constant(0)])
        B.identity(out, name="out")
        init = B.global_variables_initializer()
    gd = g.as_graph_def()
    for mode in ("always", "never", "auto"):
        with Session(gd, threads=2, programs=mode) as sess:
            sess.run([], targets=[init.name])
            assert int(sess.run("out", {"n": 10})) == 10
            assert int(sess.run("v:0")) == 4          # i = 0, 3, 6, 9


def test_a_next_value_under_a_cond_without_its_merge_runs_node_by_node():
    # not a structured cond: the loop variable's next value comes straight from a Switch
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def body(i):
            sw = B.apply_op("Switch", [B.add(i, 1), B.less(i, 100)])
            return [sw.outputs[1]]

        B.identity(B.while_loop(lambda i: B.less(i, n), body, [B.constant(0)]), name="out")
    gd = g.as_graph_def()
    with Session(gd, threads=1, programs="always") as sess:
        plan = sess.plan(["out"], ["n"])
        assert plan.frames[_outer_name(plan)].program is None
        assert int(sess.run("out", {"n": 7})) == 7
    assert int(Reference(gd).run("out", {"n:0": np.int32(7)})) == 7


# --- cancellation: the same rule in every mode -------------------------------------------

MODES = [(p, t) for p in ("never", "always", "auto") for t in (1, 2)]


def _long_nest(fail_at: int | None):
    """An outer loop of n iterations; its body holds a cond and an inner loop of 3 whose body
    asserts i < fail_at."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def body(i, acc):
            def inner(j, s):
                deps = []
                if fail_at is not None:
                    deps = [B.apply_op("Assert", [B.less(i, fail_at), [i]], name="check")]
                with B.control_dependencies(deps):
                    return [B.add(j, 1), B.add(s, j)]
            s = B.while_loop(lambda j, s: B.less(j, 3), inner, [B.constant(0), B.constant(0)])
            t = B.cond(B.less(i, 5), lambda: B.identity(s[1]), lambda: B.multiply(s[1], 2))
            return [B.add(i, 1), B.add(acc, t)]

        out = B.while_loop(lambda i, acc: B.less(i, n), body, [B.constant(0), B.constant(0)])
        B.identity(out[1], name="result")
    return g.as_graph_def()


@pytest.mark.parametrize("programs,threads", MODES)
def test_an_error_in_the_first_iteration_of_a_long_nest_surfaces_at_once(programs, threads):
    # 2**31 - 1 iterations would take hours: the step ends with the Assert's error, not with
    # the deadline, only if the error stops the nest at once (however busy the machine)
    with Session(_long_nest(fail_at=1), threads=threads, programs=programs) as sess:
        with pytest.raises(InvalidArgumentError) as e:
            sess.run("result", {"n": 2**31 - 1}, timeout=120)
    assert "check" in str(e.value)


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_timeout_in_a_nest_is_the_same_outcome_in_every_mode(programs, threads):
    with Session(_long_nest(None), threads=threads, programs=programs) as sess:
        # hours of iterations: only the deadline ends the step
        with pytest.raises(DeadlineExceededError):
            sess.run("result", {"n": 2**31 - 1}, timeout=0.05)
        # 3 per iteration below 5, 6 from there on: 5 * 3 + 5 * 6 for n = 10
        assert int(sess.run("result", {"n": 10}, timeout=30)) == 45


def test_a_cond_in_the_loop_condition_runs_in_every_iteration_the_last_included():
    # the limit depends on the parity of i, through a cond in the loop's condition function:
    # x doubles while x < (100 if i is even else 50)
    g = B.Graph()
    with g.as_default():
        x0 = B.placeholder("int32", [], name="x0")

        def cond_fn(i, x):
            even = B.equal(B.apply_op("FloorMod", [i, B.constant(2)]).outputs[0], B.constant(0))
            return B.cond(even, lambda: B.less(x, 100), lambda: B.less(x, 50))

        out = B.while_loop(cond_fn, lambda i, x: [B.add(i, 1), B.multiply(x, 2)],
                           [B.constant(0), x0])
        B.identity(out[0], name="i")
        B.identity(out[1], name="x")
    gd = g.as_graph_def()

    def want(x: int) -> tuple[int, int]:
        i = 0
        while x < (100 if i % 2 == 0 else 50):
            i, x = i + 1, x * 2
        return i, x

    ref = Reference(gd)
    with Session(gd, threads=1, programs="always") as sess:
        plan = sess.plan(["i", "x"], ["x0"])
        prog = plan.frames[_outer_name(plan)].program
        assert prog is not None and any(type(x) is P.If for x in prog.loop.pre)
        for x0 in (1, 3, 7, 60, 200):
            got = [int(v) for v in sess.run(["i", "x"], {"x0": x0})]
            assert tuple(got) == want(x0)
            assert got == [int(v) for v in ref.run(["i", "x"], {"x0:0": np.int32(x0)})]


def test_tf2_functional_while_with_an_if_inside_compiles_after_lowering():
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def body(i, acc):
            even = B.equal(B.apply_op("FloorMod", [i, B.constant(2)]).outputs[0], B.constant(0))
            t = B.cond(even, lambda: B.multiply(i, 10), lambda: B.identity(i), functional=True)
            return [B.add(i, 1), B.add(acc, t)]

        out = B.while_loop(lambda i, acc: B.less(i, n), body, [B.constant(0), B.constant(0)],
                           functional=True)
        B.identity(out[1], name="acc")
    gd = g.as_graph_def()
    ref = Reference(gd)
    with Session(gd, threads=1, programs="always") as sess:
        plan = sess.plan(["acc"], ["n"])
        prog = plan.frames[_outer_name(plan)].program
        assert prog is not None and any(type(x) is P.Select for x in _statements(prog.loop))
        for n in (0, 1, 6, 11):
            want = sum(10 * i if i % 2 == 0 else i for i in range(n))
            assert int(sess.run("acc", {"n": n})) == want
            assert int(ref.run("acc", {"n:0": np.int32(n)})) == want


# --- random TF2 functional graphs (lowered If/While nests) against the reference -----------

@_settings(0.1)
@given(control_flow_graphs(functional=True), st.sampled_from(CONFIGS))
def test_random_functional_graphs_match_the_reference(case, config):
    # DFG_HYPOTHESIS_EXAMPLES sets the count, as for tests/test_random_graphs.py (a tenth)
    _check(case, [config], **AS_WRITTEN)


def test_the_functional_generator_nests_ifs_and_whiles():
    seen: set[str] = set()

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(control_flow_graphs(functional=True))
    def collect(case):
        seen.update(case.features)

    collect()
    assert {"functional-cond", "functional-while", "nested"} <= seen, seen


def test_a_nest_deeper_than_python_allows_in_one_function_is_interpreted_with_the_same_value():
    # CPython refuses more than 20 nested loops in one function: the program falls back to
    # running its statements one by one
    def nest(depth: int, trips: int):
        g = B.Graph()
        with g.as_default():
            n = B.placeholder("int32", [], name="n")

            def build(d: int, x):
                if d == 0:
                    return B.add(x, 1)
                return B.while_loop(lambda i, v: B.less(i, trips),
                                    lambda i, v: [B.add(i, 1), B.add(build(d - 1, v), 1)],
                                    [B.constant(0), x])[1]

            B.identity(build(depth, n), name="out")
        return g.as_graph_def()

    def value(depth: int, trips: int, x: int) -> int:
        # what each level does: run the level inside, then add one, ``trips`` times
        if depth == 0:
            return x + 1
        for _ in range(trips):
            x = value(depth - 1, trips, x) + 1
        return x

    for depth, trips, compiled in ((3, 2, True), (22, 1, False)):
        with Session(nest(depth, trips), threads=1, programs="always") as sess:
            plan = sess.plan(["out"], ["n"])
            prog = plan.frames[_outer_name(plan)].program
            assert prog is not None and len(prog.loops) == depth
            assert int(sess.run("out", {"n": 5})) == value(depth, trips, 5)
            assert bool(prog.compiled) == compiled


@pytest.mark.parametrize("name,holds", CASES[:4])
def test_a_traced_nest_runs_interpreted_gives_tensorflows_values_and_names_inner_frames(
        name, holds):
    from dfg.executor.trace import Tracer

    d, case = _case(name)
    tracer = Tracer()
    with Session(_graph(d), threads=1, programs="always") as sess:
        for step in case["steps"]:
            feed = {k: np.load(d / v) for k, v in step["feed"].items()}
            out = sess.run(step["fetch"], feed, targets=step["target"], trace=tracer)
            for f, got in zip(step["fetch"], out):
                np.testing.assert_allclose(got, np.load(d / step["expect"][f]),
                                           rtol=case["rtol"], atol=case["atol"])
        plan = sess.plan(step["fetch"], list(step["feed"]), step["target"])
        prog, = _outer_programs(plan)
        assert not prog.compiled      # traced runs never compile
    events = [e for e in tracer.to_chrome_json()["traceEvents"]
              if e.get("cat") == "kernel"]
    frames = {e["args"]["frame"] for e in events}
    assert prog.loop.frame in frames
    if holds == "loop":   # the inner loop's kernels are recorded under the inner frame
        assert {lp.frame for lp in prog.loops} <= frames


def _loop_in_cond_in_loop(floating: bool):
    """An outer loop whose body runs an inner loop on the true side of a cond; the inner
    loop's invariant ``cap`` is rewired to bypass the cond's Switch (as an optimizer that
    drops a Switch of a loop invariant would leave it), so it is live when the cond is not
    taken. ``floating``: the inner body computes cap + cap from that Enter alone."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")
        cap = B.placeholder("int32", [], name="cap")

        def outer(i, acc):
            def inner():
                def body(j, s):
                    return [B.add(j, 1), B.add(s, B.add(cap, cap)) if floating
                            else B.add(B.add(s, cap), cap)]
                return B.while_loop(lambda j, s: B.less(j, 2), body,
                                    [B.constant(0), acc])[1]
            even = B.equal(B.apply_op("FloorMod", [i, B.constant(2)]).outputs[0],
                           B.constant(0))
            return [B.add(i, 1), B.cond(even, inner, lambda: B.identity(acc))]

        out = B.while_loop(lambda i, a: B.less(i, n), outer, [B.constant(0), B.constant(0)])
        B.identity(out[1], name="out")
    gd = g.as_graph_def()
    nodes = {nd.name: nd for nd in gd.node}
    rewired = 0
    for nd in gd.node:
        # the inner frame's constant Enter of cap reads Switch:1 of the cond: read the
        # Switch's data (the outer frame's Enter of cap) instead
        if nd.op == "Enter" and nd.attr["is_constant"].b and nd.input[0].endswith(":1"):
            sw = nodes[nd.input[0][:-2]]
            if sw.op == "Switch" and nodes[sw.input[0]].op == "Enter":
                nd.input[0] = sw.input[0]
                rewired += 1
                enter = nd.name
    assert rewired == 1
    if floating:   # cap + cap: drop the control edge from the loop's pivot the builder adds
        for nd in gd.node:
            keep = [x for x in nd.input if not x.startswith("^")]
            if keep and all(x == enter for x in keep):
                del nd.input[:]
                nd.input.extend(keep)
    return gd


@pytest.mark.parametrize("floating", [False, True])
def test_an_inner_loop_with_an_invariant_live_outside_its_cond(floating):
    gd = _loop_in_cond_in_loop(floating)
    ref = Reference(gd)
    with Session(gd, threads=1, programs="always", optimize=False) as sess:   # as written
        plan = sess.plan(["out"], ["n", "cap"])
        prog = plan.frames[_outer_name(plan)].program
        # with work hanging off the invariant alone, TensorFlow would run that work even on
        # the untaken side: the nest is left to the node-by-node executor
        assert (prog is None) == floating
        for n, cap in ((0, 3), (1, 3), (5, -2)):
            want = sum(4 * cap for i in range(n) if i % 2 == 0)
            got = int(sess.run("out", {"n": n, "cap": cap}))
            assert got == want
            assert got == int(ref.run("out", {"n:0": np.int32(n), "cap:0": np.int32(cap)}))


def _invariant_nest_graph():
    """An inner loop whose loop variable ``w`` is passed through unchanged (TF2's functional
    While passes weights that way), so ``w * 2`` is the same in each of its iterations, while
    the outer loop changes ``w`` between the inner loop's runs: sum over i < a of
    (sum over j < 3 of (2 * (1 + 3i) + j)) = 9a + 9a(a - 1)."""
    g = B.Graph()
    with g.as_default():
        a = B.placeholder("int32", [], name="a")

        def outer(i, w, acc):
            def inner(j, w_in, s):
                t = B.apply_op("Mul", [w_in, B.constant(2)], name="twice").outputs[0]
                return [B.add(j, 1), w_in, B.add(s, B.add(t, j))]
            s = B.while_loop(lambda j, w_in, s: B.less(j, 3), inner,
                             [B.constant(0), w, B.constant(0)], name="inner")[2]
            return [B.add(i, 1), B.add(w, 3), B.add(acc, s)]

        out = B.while_loop(lambda i, w, acc: B.less(i, a), outer,
                           [B.constant(0), B.constant(1), B.constant(0)], name="outer")
        B.identity(out[2], name="total")
    return g.as_graph_def()


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_loop_invariant_is_computed_once_per_run_of_its_loop(programs, threads):
    from dfg.executor.codegen import invariant_steps

    gd = _invariant_nest_graph()
    with Session(gd, threads=threads, programs=programs) as sess:
        for a in (0, 1, 2, 5, 0, 4):
            for _ in range(2):   # the second run of a signature is compiled
                assert int(sess.run("total", {"a": a})) == 9 * a + 9 * a * (a - 1)
        plan = sess.plan(["total"], ["a"])
        prog = plan.frames[_outer_name(plan)].program
    inner = next(x for x in _statements(prog.loop) if type(x) is P.LoopIR)
    once = [st.item.op for st in inner.body if id(st) in invariant_steps(inner)]
    assert once == ["Mul"]                       # w * 2; j + 1 and s + t change
    assert not invariant_steps(prog.loop)        # the outer loop changes everything it reads


def _invariant_that_fails_graph():
    """``x`` passed through unchanged and reshaped to 3 elements in the body: an error in
    the first iteration, none when the loop never iterates."""
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")
        x = B.placeholder("float32", [2], name="x")

        def body(i, x, acc):
            y = B.apply_op("Reshape", [x, B.constant(np.array([3], np.int32))],
                           name="bad_reshape").outputs[0]
            s = B.apply_op("Sum", [y, B.constant(np.array([0], np.int32))],
                           attrs={"keep_dims": False}).outputs[0]
            return [B.add(i, 1), x, B.add(acc, s)]

        out = B.while_loop(lambda i, x, acc: B.less(i, n), body,
                           [B.constant(0), x, B.constant(np.float32(0))], name="loop")
        B.identity(out[2], name="total")
    return g.as_graph_def()


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_failing_loop_invariant_fails_only_when_the_loop_iterates(programs, threads):
    gd = _invariant_that_fails_graph()
    x = np.array([1.0, 2.0], np.float32)
    with Session(gd, threads=threads, programs=programs) as sess:
        for _ in range(3):
            assert float(sess.run("total", {"n": 0, "x": x})) == 0.0
            with pytest.raises(InvalidArgumentError) as e:
                sess.run("total", {"n": 3, "x": x})
            assert "bad_reshape" in str(e.value)
