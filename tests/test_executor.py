"""Executor behaviour: differential runs against the reference interpreter, and the errors a
step must raise (deadlock, dead fetch, uninitialized variable, missing feed, kernel error)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.reference import evaluate
from dfg.graphdef.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    InvalidGraphError,
    MissingFeedError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
    UsageError,
)
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"


def graph_from_text(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def _const(name: str, value: np.ndarray) -> str:
    flat = " ".join(f"float_val: {float(v)!r}" for v in value.reshape(-1))
    dims = " ".join(f"dim {{ size: {d} }}" for d in value.shape)
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}'
            f' attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ {dims} }}'
            f" {flat} }} }} }} }}\n")


def random_dag(seed: int) -> tuple[Graph, list[str], dict[str, np.ndarray]]:
    """A random DAG of float32 [2,3] tensors: Consts and Placeholders feeding binary, unary and
    AddN ops, with some control edges; fetches are a few sinks and inner nodes."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    text = []
    names: list[str] = []
    feeds: dict[str, np.ndarray] = {}
    for i in range(rng.randint(1, 3)):
        name = f"x{i}"
        text.append(f'node {{ name: "{name}" op: "Placeholder" attr {{ key: "dtype" value {{ '
                    f'type: DT_FLOAT }} }} attr {{ key: "shape" value {{ shape {{ dim {{ size: 2 }}'
                    f' dim {{ size: 3 }} }} }} }} }}\n')
        feeds[f"{name}:0"] = nrng.standard_normal((2, 3)).astype(np.float32)
        names.append(name)
    for i in range(rng.randint(1, 3)):
        name = f"c{i}"
        text.append(_const(name, nrng.standard_normal((2, 3)).astype(np.float32)))
        names.append(name)
    for i in range(rng.randint(5, 40)):
        name = f"n{i}"
        kind = rng.choice(["AddV2", "Mul", "Sub", "Maximum", "Neg", "Tanh", "AddN", "Identity"])
        if kind in ("Neg", "Tanh", "Identity"):
            ins = [rng.choice(names)]
        elif kind == "AddN":
            ins = [rng.choice(names) for _ in range(rng.randint(1, 4))]
        else:
            ins = [rng.choice(names), rng.choice(names)]
        ctrl = [f"^{rng.choice(names)}"] if rng.random() < 0.2 else []
        attrs = 'attr { key: "T" value { type: DT_FLOAT } }'
        if kind == "AddN":
            attrs += f' attr {{ key: "N" value {{ i: {len(ins)} }} }}'
        inputs = " ".join(f'input: "{s}"' for s in ins + ctrl)
        text.append(f'node {{ name: "{name}" op: "{kind}" {inputs} {attrs} }}\n')
        names.append(name)
    inner = [n for n in names if n.startswith("n")]
    fetches = sorted(set(rng.sample(inner, k=min(len(inner), rng.randint(1, 4)))))
    return graph_from_text("".join(text)), [f"{f}:0" for f in fetches], feeds


@pytest.mark.parametrize("seed", range(300))
def test_random_dag_matches_reference(seed: int) -> None:
    graph, fetches, feeds = random_dag(seed)
    expected = evaluate(graph, fetches, feeds)
    threads = 1 + seed % 8
    for programs in ("never", "always", "auto"):
        # the executor against the oracle: the graph as written (no run-time rewrites)
        with Session(graph, threads=threads, programs=programs, optimize=False) as sess:
            for _ in range(2):  # second run uses the cached plan and measured costs
                got = sess.run(fetches, feed_dict=feeds)
                for g, e, f in zip(got, expected, fetches):
                    np.testing.assert_array_equal(
                        g, e, err_msg=f"{f} threads={threads} programs={programs}")


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "invalid").glob("*.pbtxt")
                                         if p.name != "broken_syntax.pbtxt"))
def test_every_invalid_graph_is_rejected_before_running(name: str) -> None:
    with pytest.raises(InvalidGraphError) as ei:
        Session(load_graph(DATA / "invalid" / name))
    assert ei.value.exit_code == 1 and ei.value.node


def test_cycle_without_next_iteration_reports_stuck_nodes() -> None:
    # with validation off, the executor itself must notice it cannot finish (never hang)
    g = load_graph(DATA / "invalid" / "cycle_without_nextiteration.pbtxt")
    with Session(g, threads=2, validate=False) as sess:
        fetch = [n.name for n in g.nodes if n.op not in ("Placeholder", "Const")][-1]
        feeds = {f"{n.name}:0": np.ones((2,), np.float32)
                 for n in g.nodes if n.op == "Placeholder"}
        with pytest.raises(InvalidArgumentError) as ei:
            sess.run([fetch], feed_dict=feeds, timeout=10)
    msg = str(ei.value)
    assert "cannot make progress" in msg
    assert "'c'" in msg and "'e'" in msg and "waits for" in msg


def test_dead_fetch_names_the_switch() -> None:
    g = load_graph(DATA / "cond_basic" / "graph.pbtxt")
    with Session(g, threads=1) as sess:
        feeds = {"p:0": np.array(False), "x:0": np.ones((3,), np.float32)}
        with pytest.raises(InvalidArgumentError) as ei:
            sess.run(["branch/Mul:0"], feed_dict=feeds)  # true branch, predicate is false
    assert "dead" in str(ei.value)
    assert "Switch 'branch/" in str(ei.value)


@pytest.mark.parametrize("programs", ["never", "always"])
def test_uninitialized_ref_variable_is_failed_precondition_naming_it(programs: str) -> None:
    g = load_graph(DATA / "variables_ref" / "graph.pbtxt")
    reads = [n.name for n in g.nodes if n.name.endswith("/read")]
    with Session(g, programs=programs) as sess, pytest.raises(FailedPreconditionError) as ei:
        sess.run([reads[0]])
    var = reads[0][: -len("/read")]
    assert f"uninitialized value {var}" in str(ei.value)
    assert reads[0] in str(ei.value)


def test_uninitialized_resource_variable() -> None:
    g = load_graph(DATA / "variables_resource" / "graph.pbtxt")
    read = next(n.name for n in g.nodes if n.op == "ReadVariableOp")
    with Session(g) as sess, pytest.raises(FailedPreconditionError):
        sess.run([read])


def test_missing_feed_names_placeholder_dtype_and_shape() -> None:
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: -1 } dim { size: 3 } } } } }
node { name: "y" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
''')
    with Session(g) as sess, pytest.raises(MissingFeedError) as ei:
        sess.run(["y"])
    assert "placeholder 'x' (float32, shape [?,3]) must be fed" in str(ei.value)
    assert ei.value.tf_name == "InvalidArgumentError"


@pytest.mark.parametrize("programs", ["never", "always"])
def test_kernel_error_names_node_and_session_stays_usable(programs: str) -> None:
    g = graph_from_text('''
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "q" op: "FloorDiv" input: "a" input: "b" attr { key: "T" value { type: DT_INT32 } } }
''')
    with Session(g, threads=2, programs=programs) as sess:
        with pytest.raises(InvalidArgumentError) as ei:
            sess.run("q", {"a": np.array([7], np.int32), "b": np.array([0], np.int32)})
        assert "node 'q' (FloorDiv)" in str(ei.value)
        assert sess.run("q", {"a": np.array([-7], np.int32), "b": np.array([2], np.int32)}) \
            .tolist() == [-4]  # floor(-3.5)


@pytest.mark.parametrize("programs", ["never", "always"])
def test_feeding_an_intermediate_cuts_its_producer(programs: str) -> None:
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "m" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "y" op: "Square" input: "m" attr { key: "T" value { type: DT_FLOAT } } }
''')
    with Session(g, programs=programs) as sess:
        # x is never fed: feeding m:0 makes it unnecessary
        assert sess.run("y", {"m:0": np.float32(3)}) == np.float32(9)
        assert sess.run("m:0", {"m:0": np.float32(3)}) == np.float32(3)


def test_unknown_fetch_suggests_close_name() -> None:
    g = load_graph(DATA / "dag_basic" / "graph.pbtxt")
    with Session(g) as sess, pytest.raises(NotFoundError) as ei:
        sess.run(["cc:0"])
    assert "did you mean" in str(ei.value)


def test_missing_kernel_fails_before_running_anything() -> None:
    g = graph_from_text('''
node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } }
node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "init" op: "Assign" input: "v" input: "one"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "s" op: "MatrixExponential" input: "init" attr { key: "T" value { type: DT_FLOAT } } }
''')
    with Session(g) as sess:
        with pytest.raises(UnimplementedError) as ei:
            sess.run(["s:0"])
        assert "MatrixExponential" in str(ei.value)
        # nothing ran: the Assign the step needed did not initialize v
        with pytest.raises(FailedPreconditionError):
            sess.run(["v:0"])


# a float variable v, set to 0 by init and counted up by one by inc (tests/test_plan_cache.py
# adds a seeded random op to it)
VARIABLE_COUNTER = '''
node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0 } } } }
node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "init" op: "Assign" input: "v" input: "zero"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "inc" op: "AssignAdd" input: "v" input: "one"
       attr { key: "T" value { type: DT_FLOAT } } }
'''


@pytest.mark.parametrize("programs", ["never", "always"])
def test_variables_persist_across_runs_and_steps(programs: str) -> None:
    g = graph_from_text(VARIABLE_COUNTER)
    with Session(g, threads=2, programs=programs) as sess:
        sess.run([], targets=["init"])
        for k in range(1, 6):
            assert sess.run("inc:0") == np.float32(k)


def test_timeout_is_deadline_exceeded() -> None:
    # a 10k-iteration loop with a timeout far too short to finish
    g = load_graph(DATA / "bench_while_10k" / "graph.pbtxt")
    with Session(g, threads=1) as sess, pytest.raises(DeadlineExceededError):
        sess.run(["loop/Exit:0"], {"n:0": np.int32(10_000_000)}, timeout=0.05)


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_parallel_iterations_bound_does_not_change_results(threads: int) -> None:
    # parallel_iterations=1 and =10 loops: TF's results are the same; ours must match TF's
    import json
    for case in ("while_sum_squares", "while_parallel"):
        d = DATA / case
        spec = json.loads((d / "case.json").read_text())
        step = spec["steps"][0]
        feed = {k: np.load(d / v) for k, v in step["feed"].items()}
        with Session(load_graph(d / "graph.pbtxt"), threads=threads) as sess:
            out = sess.run(step["fetch"], feed)
        for name, value in zip(step["fetch"], out):
            np.testing.assert_allclose(value, np.load(d / step["expect"][name]),
                                       rtol=spec["rtol"], atol=spec["atol"])


@pytest.mark.parametrize("programs", ["never", "always"])
def test_feeding_one_output_and_fetching_another_keeps_the_producer(programs: str) -> None:
    g = graph_from_text('''
node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4 } }
       float_val: 1 float_val: 2 float_val: 3 float_val: 4 } } } }
node { name: "s" op: "Unpack" input: "x" attr { key: "T" value { type: DT_FLOAT } }
       attr { key: "num" value { i: 4 } } }
''')
    with Session(g, programs=programs) as sess:
        # s:0 is fed; s:1 still has to be computed by running s
        assert sess.run("s:1", {"s:0": np.float32(9)}) == np.float32(2)


def test_tensor_too_large_to_materialize_is_resource_exhausted() -> None:
    g = graph_from_text('''
node { name: "dims" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
       attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { dim { size: 3 } }
       int64_val: 1000000 int64_val: 1000000 int64_val: 1000000 } } } }
node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
node { name: "f" op: "Fill" input: "dims" input: "v" attr { key: "T" value { type: DT_FLOAT } }
       attr { key: "index_type" value { type: DT_INT64 } } }
''')
    with Session(g) as sess, pytest.raises((ResourceExhaustedError, InvalidArgumentError)) as ei:
        sess.run("f")
    assert "node 'f' (Fill)" in str(ei.value)


@pytest.mark.parametrize("threads", [1, 2])
def test_merge_reading_a_ref_switch_dereferences_only_the_live_input(threads: int) -> None:
    # Merge(T=float) reads RefSwitch's float_ref directly, as Grappler's rewrites leave it;
    # on the untaken side that input is dead and must not be read.
    g = graph_from_text('''
node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } }
node { name: "seven" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 7 } } } }
node { name: "minus" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: -1 } } } }
node { name: "init" op: "Assign" input: "v" input: "seven"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "rs" op: "RefSwitch" input: "v" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "s" op: "Switch" input: "minus" input: "p" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "m" op: "Merge" input: "s" input: "rs:1"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
''')
    with Session(g, threads=threads) as sess:
        sess.run([], targets=["init"])
        assert sess.run(["m:0", "m:1"], {"p": np.array(True)}) == [7.0, 1]
        assert sess.run(["m:0", "m:1"], {"p": np.array(False)}) == [-1.0, 0]


def _int_const(name: str, value: int, ctl: str = "") -> str:
    inp = f' input: "^{ctl}"' if ctl else ""
    return (f'node {{ name: "{name}" op: "Const"{inp} '
            f'attr {{ key: "dtype" value {{ type: DT_INT32 }} }}'
            f' attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }}'
            f' int_val: {value} }} }} }} }}\n')


def _while_graph(body: str, step: int = 1) -> Graph:
    """``i = 0; while i < n: y = body(i); i = i + step`` with the frame's usual TF shape;
    ``body`` is pbtxt nodes reading ``w/Identity`` (the live i), whose result feeds Exit
    ``w/Exit_1`` through a second loop variable ``acc``."""
    t = 'attr { key: "T" value { type: DT_INT32 } }'
    enter = ('attr { key: "frame_name" value { s: "w" } } '
             'attr { key: "parallel_iterations" value { i: 10 } }')
    text = (
        'node { name: "n" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }\n'
        + _int_const("zero", 0)
        + f'node {{ name: "w/Enter" op: "Enter" input: "zero" {t} {enter} }}\n'
        + f'node {{ name: "w/Enter_1" op: "Enter" input: "zero" {t} {enter} }}\n'
        + f'node {{ name: "w/n" op: "Enter" input: "n" {t} {enter} '
          'attr { key: "is_constant" value { b: true } } }\n'
        + f'node {{ name: "w/Merge" op: "Merge" input: "w/Enter" input: "w/NextIteration" {t} '
          'attr { key: "N" value { i: 2 } } }\n'
        + f'node {{ name: "w/Merge_1" op: "Merge" input: "w/Enter_1" input: "w/NextIteration_1" '
          f'{t} attr {{ key: "N" value {{ i: 2 }} }} }}\n'
        + f'node {{ name: "w/Less" op: "Less" input: "w/Merge" input: "w/n" {t} }}\n'
        + 'node { name: "w/LoopCond" op: "LoopCond" input: "w/Less" }\n'
        + f'node {{ name: "w/Switch" op: "Switch" input: "w/Merge" input: "w/LoopCond" {t} }}\n'
        + f'node {{ name: "w/Switch_1" op: "Switch" input: "w/Merge_1" input: "w/LoopCond" {t} }}\n'
        + f'node {{ name: "w/Identity" op: "Identity" input: "w/Switch:1" {t} }}\n'
        + _int_const("w/step", step, ctl="w/Identity")
        + f'node {{ name: "w/add" op: "AddV2" input: "w/Identity" input: "w/step" {t} }}\n'
        + body
        + f'node {{ name: "w/NextIteration" op: "NextIteration" input: "w/add" {t} }}\n'
        + f'node {{ name: "w/NextIteration_1" op: "NextIteration" input: "w/y" {t} }}\n'
        + f'node {{ name: "w/Exit" op: "Exit" input: "w/Switch" {t} }}\n'
        + f'node {{ name: "w/Exit_1" op: "Exit" input: "w/Switch_1" {t} }}\n')
    return graph_from_text(text)


_SQUARE_BODY = ('node { name: "w/y" op: "Mul" input: "w/Identity" input: "w/Identity" '
                'attr { key: "T" value { type: DT_INT32 } } }\n')
# 12 // (3 - i): integer division by zero when i reaches 3
_DIV_BODY = (_int_const("w/three", 3, ctl="w/Identity")
             + _int_const("w/twelve", 12, ctl="w/Identity")
             + 'node { name: "w/d" op: "Sub" input: "w/three" input: "w/Identity" '
               'attr { key: "T" value { type: DT_INT32 } } }\n'
             + 'node { name: "w/y" op: "FloorDiv" input: "w/twelve" input: "w/d" '
               'attr { key: "T" value { type: DT_INT32 } } }\n')


def test_a_simple_while_loop_and_one_with_a_cond_compile_to_loop_programs() -> None:
    with Session(_while_graph(_SQUARE_BODY), threads=1) as sess:
        assert sess.plan(["w/Exit_1:0"], ["n:0"]).frames["w"].program is not None
    g = load_graph(DATA / "while_with_cond" / "graph.pbtxt")
    with Session(g, threads=1) as sess:
        fetch = load_case_json("while_with_cond")["steps"][0]
        plan = sess.plan(fetch["fetch"], list(fetch["feed"]), fetch["target"])
        assert all(lay.program is not None for name, lay in plan.frames.items() if name)


def load_case_json(name: str) -> dict:
    import json

    return json.loads((DATA / name / "case.json").read_text())


@pytest.mark.parametrize("mode", ["never", "always", "auto"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_loop_program_results_equal_the_math(mode: str, n: int) -> None:
    with Session(_while_graph(_SQUARE_BODY), threads=2, programs=mode) as sess:
        for _ in range(3):   # auto: the first run measures costs, later ones use the program
            i, last = sess.run(["w/Exit:0", "w/Exit_1:0"], {"n": np.int32(n)})
            assert i == n
            assert last == ((n - 1) ** 2 if n else 0)


@pytest.mark.parametrize("mode", ["never", "always"])
def test_kernel_error_inside_a_loop_program_names_the_node(mode: str) -> None:
    with Session(_while_graph(_DIV_BODY), threads=1, programs=mode) as sess:
        assert sess.run("w/Exit_1:0", {"n": np.int32(3)}) == 12 // (3 - 2)
        with pytest.raises(InvalidArgumentError) as ei:
            sess.run("w/Exit_1:0", {"n": np.int32(5)})
    assert ei.value.node == "w/y" and ei.value.op == "FloorDiv"
    assert "division by zero" in str(ei.value)


@pytest.mark.parametrize("mode", ["never", "always"])
def test_endless_loop_program_times_out(mode: str) -> None:
    with Session(_while_graph(_SQUARE_BODY, step=0), threads=1, programs=mode) as sess, \
            pytest.raises(DeadlineExceededError):
        sess.run("w/Exit:0", {"n": np.int32(1)}, timeout=0.2)


def test_programs_option_is_checked() -> None:
    with pytest.raises(UsageError):
        Session(_while_graph(_SQUARE_BODY), programs="sometimes")


def random_loop(seed: int) -> tuple[Graph, list[str], dict[str, np.ndarray], list[np.ndarray]]:
    """A random while loop of float32 [3] loop variables and its result computed in NumPy.

    ``i = 0; while i < n: v_j = f_j(v, invariants); i += 1``, in TensorFlow's frame shape;
    each Switch passes either the Merge itself or a cond-side function of it (``g_j``, so the
    Exits see ``g_j`` of the last values). Expected values come from running the same
    arithmetic in NumPy, not from the executor."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    f32 = 'attr { key: "T" value { type: DT_FLOAT } }'
    i32 = 'attr { key: "T" value { type: DT_INT32 } }'
    frame = ('attr { key: "frame_name" value { s: "L" } } attr { key: "parallel_iterations" '
             'value { i: ' + str(rng.choice([1, 2, 10])) + ' } }')
    const_enter = 'attr { key: "is_constant" value { b: true } }'
    m = rng.randint(1, 3)
    k = rng.randint(0, 2)
    n_iter = rng.randint(0, 6)
    init = [nrng.uniform(-1, 1, 3).astype(np.float32) for _ in range(m)]
    inv = [nrng.uniform(-1, 1, 3).astype(np.float32) for _ in range(k)]
    text = ['node { name: "n" op: "Placeholder" '
            'attr { key: "dtype" value { type: DT_INT32 } } }\n',
            _int_const("zero", 0),
            f'node {{ name: "L/i/Enter" op: "Enter" input: "zero" {i32} {frame} }}\n',
            f'node {{ name: "L/n" op: "Enter" input: "n" {i32} {frame} {const_enter} }}\n',
            f'node {{ name: "L/i/Merge" op: "Merge" input: "L/i/Enter" input: "L/i/Next" {i32} '
            'attr { key: "N" value { i: 2 } } }\n',
            f'node {{ name: "L/Less" op: "Less" input: "L/i/Merge" input: "L/n" {i32} }}\n',
            'node { name: "L/LoopCond" op: "LoopCond" input: "L/Less" }\n',
            f'node {{ name: "L/i/Switch" op: "Switch" input: "L/i/Merge" '
            f'input: "L/LoopCond" {i32} }}\n',
            f'node {{ name: "L/i/Id" op: "Identity" input: "L/i/Switch:1" {i32} }}\n',
            _int_const("L/one", 1, ctl="L/i/Id"),
            f'node {{ name: "L/i/add" op: "AddV2" input: "L/i/Id" input: "L/one" {i32} }}\n',
            f'node {{ name: "L/i/Next" op: "NextIteration" input: "L/i/add" {i32} }}\n',
            f'node {{ name: "L/i/Exit" op: "Exit" input: "L/i/Switch" {i32} }}\n']
    feeds = {"n:0": np.int32(n_iter)}
    for j in range(m):
        text.append(_const(f"v{j}/init", init[j]))
        text.append(f'node {{ name: "L/v{j}/Enter" op: "Enter" input: "v{j}/init" {f32} '
                    f'{frame} }}\n')
        text.append(f'node {{ name: "L/v{j}/Merge" op: "Merge" input: "L/v{j}/Enter" '
                    f'input: "L/v{j}/Next" {f32} attr {{ key: "N" value {{ i: 2 }} }} }}\n')
    for j in range(k):
        text.append(_const(f"c{j}", inv[j]))
        text.append(f'node {{ name: "L/c{j}" op: "Enter" input: "c{j}" {f32} {frame} '
                    f'{const_enter} }}\n')
    # cond side: g_j = Tanh(Merge) or the Merge itself
    g_tanh = [rng.random() < 0.4 for _ in range(m)]
    for j in range(m):
        src = f"L/v{j}/Merge"
        if g_tanh[j]:
            text.append(f'node {{ name: "L/v{j}/g" op: "Tanh" input: "{src}" {f32} }}\n')
            src = f"L/v{j}/g"
        text.append(f'node {{ name: "L/v{j}/Switch" op: "Switch" input: "{src}" '
                    f'input: "L/LoopCond" {f32} }}\n')
        text.append(f'node {{ name: "L/v{j}/Id" op: "Identity" input: "L/v{j}/Switch:1" '
                    f'{f32} }}\n')
        text.append(f'node {{ name: "L/v{j}/Exit" op: "Exit" input: "L/v{j}/Switch" {f32} }}\n')
    # body: a few ops over the live values and the invariants; each v_j's next is one of them
    ops = {"AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum,
           "Minimum": np.minimum}
    pool = [f"L/v{j}/Id" for j in range(m)] + [f"L/c{j}" for j in range(k)]
    body: list[tuple[str, str, str, str]] = []
    for b in range(rng.randint(1, 5)):
        op = rng.choice([*ops, "Tanh"])
        a, c = rng.choice(pool), rng.choice(pool)
        name = f"L/b{b}"
        ins = f'input: "{a}"' + ("" if op == "Tanh" else f' input: "{c}"')
        if a.startswith("L/c") and (op == "Tanh" or c.startswith("L/c")):
            # as TensorFlow's while_loop does for ops of loop invariants only: wait for the
            # pivot, or the op would feed NextIteration on the last iteration too
            ins += ' input: "^L/i/Id"'
        text.append(f'node {{ name: "{name}" op: "{op}" {ins} {f32} }}\n')
        body.append((name, op, a, c))
        pool.append(name)
    nexts = [rng.choice([p for p in pool if p.startswith("L/b")]) for _ in range(m)]
    for j in range(m):
        text.append(f'node {{ name: "L/v{j}/Next" op: "NextIteration" input: "{nexts[j]}" '
                    f'{f32} }}\n')

    # NumPy: the same loop
    v = [x.copy() for x in init]

    def g(j: int, x: np.ndarray) -> np.ndarray:
        return np.tanh(x) if g_tanh[j] else x

    for _ in range(n_iter):
        env = {f"L/v{j}/Id": g(j, v[j]) for j in range(m)}
        env.update({f"L/c{j}": inv[j] for j in range(k)})
        for name, op, a, c in body:
            env[name] = np.tanh(env[a]) if op == "Tanh" else ops[op](env[a], env[c])
        v = [env[nexts[j]] for j in range(m)]
    expected = [np.int32(n_iter)] + [g(j, v[j]) for j in range(m)]
    fetches = ["L/i/Exit:0"] + [f"L/v{j}/Exit:0" for j in range(m)]
    return graph_from_text("".join(text)), fetches, feeds, expected


@pytest.mark.parametrize("seed", range(200))
def test_random_loops_equal_numpy_node_by_node_and_as_programs(seed: int) -> None:
    graph, fetches, feeds, expected = random_loop(seed)
    for mode in ("never", "always"):
        with Session(graph, threads=1 + seed % 3, programs=mode) as sess:
            if mode == "always":
                assert sess.plan(fetches, list(feeds)).frames["L"].program is not None
            out = sess.run(fetches, feeds)
        for got, want in zip(out, expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_straight_line_program_is_used_only_while_every_kernel_is_cheap(monkeypatch) -> None:
    # BLAS products not gated (run side by side node by node): they count like any kernel
    monkeypatch.setenv("DFG_BLAS_GATE", "0")
    # the rule by costs alone: no trial of the program by measured step times (tested below)
    from dfg.executor.plan import PlanStats

    monkeypatch.setattr(PlanStats, "MODE_SETTLE_RUNS", 1 << 30)
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "MatMul" input: "x" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
''')
    small = np.eye(2, dtype=np.float32)
    big = np.ones((1500, 1500), np.float32)   # a matmul of ~3.4 GFLOP: far above 200 µs
    # eager: the plan (and its program) held here is the one every run uses; lazy, the
    # second run would replace it with the optimized one
    with Session(g, threads=2, optimize="eager") as sess:
        prog = sess.plan(["y"], ["x"]).program
        assert prog is not None and not prog.runs()     # MatMul: presumed heavy until measured
        # node by node until measured cheap (a few runs: one sample on a busy machine can be
        # slow, and the cost is an average)
        for _ in range(20):
            sess.run("y", {"x": small})
            if prog.runs():
                break
        assert prog.runs()
        np.testing.assert_array_equal(sess.run("y", {"x": big}), np.full((1500, 1500), 1500.0,
                                                                         np.float32))
        assert not prog.runs()                                     # the slow run noticed


def test_gated_blas_products_do_not_keep_a_straight_line_program_from_running(
        monkeypatch) -> None:
    """Gated, BLAS products run one at a time node by node as well, each on every core: once
    measured (the first step, node by node), a program holding a slow one runs, and its mean
    kernel cost leaves the product out."""
    monkeypatch.delenv("DFG_BLAS_GATE", raising=False)
    monkeypatch.delenv("DFG_BLAS_THREADS", raising=False)
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "w" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "MatMul" input: "x" input: "w" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "z" op: "Relu" input: "y" attr { key: "T" value { type: DT_FLOAT } } }
''')
    x = np.ones((4000, 1500), np.float32)         # reads 24 MB: far above 400 us
    w = np.full((1500, 4), -1.0, np.float32)
    with Session(g, threads=2) as sess:
        prog = sess.plan(["z"], ["x", "w"]).program
        assert prog is not None and not prog.runs()     # MatMul: unmeasured, presumed heavy
        sess.run("z", {"x": x, "w": w})
        matmul = next(k for k in prog.kernels if k.op == "MatMul")
        relu = next(k for k in prog.kernels if k.op == "Relu")
        assert prog.stats.cost_us[matmul.id] >= 0      # measured by the first step
        # the costs a machine measures: the product slow, the Relu cheap (pinned, so that a
        # busy machine's slow Relu cannot keep the program off)
        prog.stats.pin(matmul, 5000.0)
        prog.stats.pin(relu, 10.0)
        assert prog.runs()
        np.testing.assert_array_equal(sess.run("z", {"x": x, "w": w}),
                                      np.zeros((4000, 4), np.float32))
        assert prog.stats.program_cost.get(prog.id) is not None    # it ran as a program
        # its mean kernel cost leaves the product's measured cost out (set here: on a busy
        # machine one slow product could cross PROGRAM_LEAVE_US, and the next step would
        # simply run node by node and measure again)
        stats = prog.stats
        stats.pin(matmul, 1000.0)
        stats.program_cost.pop(prog.id)
        stats.record_program(prog, 1.05e-3, 2)      # 1050 us for the MatMul and the Relu
        assert stats.program_cost[prog.id] == pytest.approx(50.0)
        assert prog.runs()


def test_kernel_cost_estimate_shrugs_off_one_slow_run_but_follows_a_lasting_change() -> None:
    """PlanStats.record: the first run sets a kernel's cost; a faster run halves the gap; a
    slower one moves a fifth of the way, counted at most 4x the average (+1 us), so one
    preempted run does not turn a cheap kernel expensive, while a kernel that stays slow is
    followed within a few runs."""
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
''')
    with Session(g, threads=1) as sess:
        prog = sess.plan(["y"], ["x"]).program
        stats, item = prog.stats, prog.kernels[0]
        stats.cost_us[item.id] = -1.0
        stats.record(item, 5e-6)
        assert stats.cost_us[item.id] == pytest.approx(5.0)
        stats.record(item, 15e-3)                        # one 15 ms hiccup
        assert stats.cost_us[item.id] == pytest.approx(0.8 * 5 + 0.2 * 21)     # 8.2 us
        assert stats.cost_us[item.id] < stats.PROGRAM_ENTER_US
        stats.record(item, 1e-6)
        assert stats.cost_us[item.id] == pytest.approx((8.2 + 1) / 2)
        runs = 0
        while stats.cost_us[item.id] <= stats.PROGRAM_LEAVE_US:   # now 2 ms every run
            stats.record(item, 2e-3)
            runs += 1
        # each run multiplies the estimate by 0.8 + 0.2 * 4 = 1.6 at most (plus the 1 us)
        assert 6 <= runs <= 10


def test_program_kept_off_by_costs_is_chosen_by_measured_step_times() -> None:
    """PlanStats.prefer_program: no choice before node by node has run MODE_SETTLE_RUNS
    timed steps; then the program is tried; then the faster mode runs (the program only when
    at least 3% faster), and the other is tried again every MODE_PROBE_EVERY steps."""
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
''')
    with Session(g, threads=1) as sess:
        prog = sess.plan(["y"], ["x"]).program
        stats = prog.stats
        assert not stats.prefer_program(prog)          # node by node not timed yet
        for _ in range(stats.MODE_SETTLE_RUNS):        # its kernels' costs settle first
            assert not stats.prefer_program(prog)
            stats.record_mode(prog, False, 2e-3)
        assert stats.prefer_program(prog)              # the program untried: try it
        stats.record_mode(prog, True, 1e-3)
        every = stats.MODE_PROBE_EVERY
        picks = [stats.prefer_program(prog) for _ in range(2 * every)]
        assert picks.count(False) == 2 and not picks[every - 1] and not picks[2 * every - 1]
        # the program slower now (EMAs): node by node, and the program probed now and then
        for _ in range(20):
            stats.record_mode(prog, True, 5e-3)
        picks = [stats.prefer_program(prog) for _ in range(2 * every)]
        assert picks.count(True) == 2
        # within the 3% margin, node by node stays
        stats.mode_s[prog.id] = [1e-3, 0.99e-3]
        stats.mode_asked[prog.id] = 1
        assert not stats.prefer_program(prog)


def test_a_plan_whose_program_is_kept_off_gives_the_same_values_in_either_mode() -> None:
    """An expensive kernel (Exp of 2M elements: milliseconds, far above PROGRAM_LEAVE_US)
    keeps the program off by cost; the measured choice tries it, and both modes give
    -exp(x)."""
    g = graph_from_text('''
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Exp" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "z" op: "Neg" input: "y" attr { key: "T" value { type: DT_FLOAT } } }
''')
    x = np.linspace(-2, 2, 1 << 21, dtype=np.float32)
    want = -np.exp(x.astype(np.float64))
    with Session(g, threads=2) as sess:
        for _ in range(8):
            np.testing.assert_allclose(sess.run("z", {"x": x}), want, rtol=2e-6)
        prog = sess.plan(["z"], ["x"]).program
        assert not prog.runs()                     # Exp measured expensive
        times = prog.stats.mode_s[prog.id]
        assert None not in times                   # both modes ran and were timed
