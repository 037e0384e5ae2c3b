"""The ``hoist_concat_projection`` pass: a TF1 cell's product of ``[x_t, h]``, its input part
for every step before the loop.

On TensorFlow's own ``dynamic_rnn`` graph (tests/data/bench/bench_dynamic_rnn_lstm, a
BasicLSTMCell's math in a v1 while loop over TensorArrays) the optimized Session must give
TensorFlow's values in every mode. Variants of that graph that compute the same function
(the step second in the concatenation with the kernel's row blocks swapped, a transposed
kernel, the kernel entered from outside the loop or fed) must be rewritten and still give
them; sequences of other lengths are checked against the LSTM recurrence in float64. What
the pass cannot prove (a concatenation read twice, an array written in the loop) stays.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.session import Session
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import DfgError
from dfg.graphdef.frames import ROOT, analyze_frames
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.passes.common import const_value, set_const
from dfg.graphdef.passes.pipeline import optimize_for_signature

CASE = Path(__file__).parent / "data" / "bench" / "bench_dynamic_rnn_lstm"
SPEC = json.loads((CASE / "case.json").read_text())
STEP = SPEC["steps"][0]
FETCH = STEP["fetch"]
FEED = {k: np.load(CASE / v) for k, v in STEP["feed"].items()}
EXPECT = [np.load(CASE / STEP["expect"][f]) for f in FETCH]
FRAME = "rnn/while/while_context"
MATMUL, CONCAT, KERNEL, BIAS = "rnn/while/MatMul", "rnn/while/concat", "rnn/while/Const", \
    "rnn/while/Const_1"
FEATURES = 32
MODES = [(p, t) for p in ("never", "auto", "always") for t in (1, 2)]


def _graph():
    return copy.deepcopy(load_graph(CASE / "graph.pb").graph_def)


def _node(gd, name):
    return next(n for n in gd.node if n.name == name)


def _kernel(gd) -> np.ndarray:
    return const_value(_node(gd, KERNEL))


def _in_loop(gd, op: str) -> list[str]:
    frames = analyze_frames(Graph(gd)).node_frame
    return [n.name for n in gd.node if n.op == op and frames.get(n.name, ROOT) != ROOT]


def _hoisted(gd) -> bool:
    return bool([n for n in gd.node if n.op == "Einsum"]) and not _in_loop(gd, "ConcatV2")


def _check(gd, feed=FEED, expect=EXPECT, fetch=FETCH, rewritten=True, modes=MODES):
    res = optimize_for_signature(gd, fetch, list(feed), elementwise="loops")
    assert _hoisted(res.graph_def) == rewritten, res.summary()
    assert not res.warnings
    for programs, threads in modes:
        with Session(gd, threads=threads, programs=programs, optimize="eager") as s:
            for _ in range(2):      # the second run of a signature runs compiled
                got = s.run(fetch, feed)
                for name, value, want in zip(fetch, got, expect):
                    np.testing.assert_allclose(value, want, rtol=SPEC["rtol"],
                                               atol=SPEC["atol"], err_msg=name)


# --- TensorFlow's graph and variants computing the same function --------------------------------

def test_tensorflows_dynamic_rnn_is_rewritten_and_gives_tensorflows_values():
    _check(_graph())


def _swapped(gd):
    """The state first in the concatenation, the kernel's row blocks swapped to match."""
    concat = _node(gd, CONCAT)
    concat.input[0], concat.input[1] = concat.input[1], concat.input[0]
    w = _kernel(gd)
    set_const(_node(gd, KERNEL), np.concatenate([w[FEATURES:], w[:FEATURES]]), D.DT_FLOAT)
    return gd


def _transposed(gd):
    """MatMul(concat, W.T, transpose_b=True)."""
    w = _kernel(gd)
    set_const(_node(gd, KERNEL), np.ascontiguousarray(w.T), D.DT_FLOAT)
    _node(gd, MATMUL).attr["transpose_b"].b = True
    return gd


def _entered(gd, fed: bool = False):
    """The kernel outside the loop (a Const, or a fed Placeholder) through a constant Enter,
    as a frozen or a variable's kernel reaches a TF1 cell."""
    w = _kernel(gd)
    outer = gd.node.add(name="kernel_outer", op="Placeholder" if fed else "Const")
    if fed:
        outer.attr["dtype"].type = D.DT_FLOAT
        outer.attr["shape"].shape.dim.add(size=w.shape[0])
        outer.attr["shape"].shape.dim.add(size=w.shape[1])
    else:
        set_const(outer, w, D.DT_FLOAT)
    enter = gd.node.add(name="rnn/while/kernel_enter", op="Enter", input=["kernel_outer"])
    enter.attr["T"].type = D.DT_FLOAT
    enter.attr["frame_name"].s = FRAME.encode()
    enter.attr["is_constant"].b = True
    enter.attr["parallel_iterations"].i = 32
    _node(gd, MATMUL).input[1] = enter.name
    return gd, w


@pytest.mark.parametrize("variant", ["swapped", "transposed"])
def test_the_same_function_written_otherwise_is_rewritten_with_the_same_values(variant):
    _check({"swapped": _swapped, "transposed": _transposed}[variant](_graph()))


def test_a_kernel_entered_from_outside_the_loop_is_split_there():
    gd, _w = _entered(_graph())
    _check(gd, modes=[("auto", 2)])


def test_a_fed_kernel_is_sliced_at_run_time_and_gives_the_fed_values():
    gd, w = _entered(_graph(), fed=True)
    feed = {**FEED, "kernel_outer:0": w}
    _check(gd, feed=feed, modes=[("never", 1), ("auto", 2)])
    res = optimize_for_signature(gd, FETCH, list(feed), elementwise="loops")
    assert any(n.op == "Slice" for n in res.graph_def.node)
    # another kernel fed: its values, not the graph's
    w2 = (w * np.float32(0.5)).astype(np.float32)
    with Session(gd, optimize="eager") as s:
        got = s.run(FETCH, {**FEED, "kernel_outer:0": w2})
    want = _lstm(FEED["x:0"], w2, const_value(_node(gd, BIAS)))
    for value, exp in zip(got, want):
        np.testing.assert_allclose(value, exp, rtol=1e-4, atol=1e-5)


# --- other sequence lengths, against the recurrence in float64 ----------------------------------

def _lstm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """BasicLSTMCell over x [batch, steps, features] in float64: outputs, final c, final h."""
    x, w, b = (np.asarray(a, np.float64) for a in (x, w, b))
    batch, units = x.shape[0], w.shape[1] // 4
    c, h = np.zeros((batch, units)), np.zeros((batch, units))
    sig = lambda v: 1 / (1 + np.exp(-v))   # noqa: E731
    outs = []
    for t in range(x.shape[1]):
        i, j, f, o = np.split(np.concatenate([x[:, t], h], 1) @ w + b, 4, axis=1)
        c = c * sig(f + 1.0) + sig(i) * np.tanh(j)
        h = np.tanh(c) * sig(o)
        outs.append(h)
    out = np.stack(outs, 1) if outs else np.zeros((batch, 0, units))
    return [out, c, h]


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_other_lengths_give_the_recurrences_values(steps):
    gd = _graph()
    # the input's time axis unknown, so sequences of any length may be fed; TensorFlow
    # wrote the known length into the graph as constants: Shape ops instead
    x = _node(gd, "x")
    x.attr["shape"].shape.dim[1].size = -1
    for name in ("rnn/Shape", "rnn/TensorArrayUnstack/Shape"):
        nd = _node(gd, name)
        nd.op = "Shape"
        nd.attr.clear()
        nd.attr["T"].type = D.DT_FLOAT
        nd.attr["out_type"].type = D.DT_INT32
        nd.input.append("rnn/transpose")
    feed = {"x:0": np.random.default_rng(steps).standard_normal((16, steps, FEATURES))
            .astype(np.float32)}
    _check(gd, feed=feed, expect=_lstm(feed["x:0"], _kernel(gd), const_value(_node(gd, BIAS))),
           modes=[("never", 1), ("auto", 2)])


# --- what the pass leaves alone -----------------------------------------------------------------

def test_a_concatenation_something_else_reads_stays():
    gd = _graph()
    gd.node.add(name="rnn/while/concat_reader", op="Identity", input=[CONCAT]) \
        .attr["T"].type = D.DT_FLOAT
    # kept by the loop (a control input of the counter's NextIteration), so pruning keeps it
    _node(gd, "rnn/while/NextIteration_1").input.append("^rnn/while/concat_reader")
    _check(gd, rewritten=False, modes=[("auto", 2)])


def test_an_array_written_in_the_loop_is_not_hoisted():
    gd = _graph()
    # the input array is also written inside the loop (step t overwritten after its read:
    # the flow of that write is not read, so the values stay TensorFlow's)
    handle = _node(gd, "rnn/while/TensorArrayReadV3/Enter")
    write = gd.node.add(name="rnn/while/overwrite", op="TensorArrayWriteV3",
                        input=[handle.name, "rnn/while/Identity_1", "rnn/while/TensorArrayReadV3",
                               "rnn/while/TensorArrayReadV3/Enter_1"])
    write.attr["T"].type = D.DT_FLOAT
    _node(gd, "rnn/while/NextIteration_1").input.append("^" + write.name)
    res = optimize_for_signature(gd, FETCH, list(FEED), elementwise="loops")
    assert not _hoisted(res.graph_def)


def test_a_state_of_other_rows_fails_as_the_concatenation_did():
    gd = _graph()
    # the initial state has 1 row where the input has 16: ConcatV2 refuses, and so must
    # the rewritten loop (an AddV2 there would broadcast it)
    for name in ("zeros", "zeros_1"):
        shape = _node(gd, f"{name}/shape_as_tensor")
        set_const(shape, np.array([1, 64], np.int32), D.DT_INT32)
    res = optimize_for_signature(gd, FETCH, list(FEED), elementwise="loops")
    assert _hoisted(res.graph_def)
    for optimize in (False, "eager"):
        with Session(gd, optimize=optimize) as s, pytest.raises(DfgError):
            s.run(FETCH, FEED)
