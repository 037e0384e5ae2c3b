"""The ``hoist_projection`` pass: a recurrent layer's input projection as one product.

On TensorFlow-made Keras models (LSTM, GRU, SimpleRNN, Bidirectional; functional While and
TensorFlow's own lowering) the pass must fire once per layer direction and the optimized
Session must still give TensorFlow's values. On builder graphs the values come from the
recurrence computed in float64, in every execution mode, for sequences run to the end, run
part way, and not at all; the pass must leave alone what it cannot prove invariant.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.session import Session
from dfg.graphdef import builder as B
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import DfgError
from dfg.graphdef.frames import ROOT, analyze_frames
from dfg.graphdef.graph import Graph
from dfg.graphdef.passes.pipeline import optimize_for_signature

DATA = Path(__file__).parent / "data"
STEPS, BATCH, K, UNITS = 6, 3, 5, 4
RNG = np.random.default_rng(7)
XS = RNG.standard_normal((STEPS, BATCH, K)).astype(np.float32)
W = (RNG.standard_normal((K, UNITS)) / 2).astype(np.float32)
U = (RNG.standard_normal((UNITS, UNITS)) / 2).astype(np.float32)


def _projections(gd) -> list[str]:
    return [n.name for n in gd.node if n.op == "Einsum"]


def _matmuls_of_list_items(gd) -> list[str]:
    """MatMuls inside a loop that multiply a TensorListGetItem (what the pass removes)."""
    frames = analyze_frames(Graph(gd)).node_frame
    ops = {n.name: n.op for n in gd.node}
    return [n.name for n in gd.node if n.op == "MatMul" and frames.get(n.name, ROOT) != ROOT
            and ops.get(n.input[0].split(":")[0]) == "TensorListGetItem"]


# --- TensorFlow's Keras models ------------------------------------------------------------------

KERAS = {"tf2/tf2_keras_lstm": 1, "tf2/tf2_keras_lstm_lowered": 1, "tf2/tf2_keras_gru": 1,
         "tf2/tf2_keras_gru_lowered": 1, "tf2/tf2_keras_simple_rnn": 1,
         "tf2/tf2_keras_simple_rnn_lowered": 1, "tf2/tf2_keras_bidirectional_lstm": 2,
         "tf2/tf2_keras_bidirectional_lstm_lowered": 2, "bench/bench_lstm_classifier": 1}


@pytest.mark.parametrize("case", sorted(KERAS))
def test_each_keras_rnn_layer_direction_gets_one_projection_and_tensorflows_values(case):
    d = DATA / case
    spec = json.loads((d / "case.json").read_text())
    step = spec["steps"][0]
    graph = d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt"
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    res = optimize_for_signature(str(graph), step["fetch"], list(feed), elementwise="loops")
    assert len(_projections(res.graph_def)) == KERAS[case]
    assert not _matmuls_of_list_items(res.graph_def)
    for threads in (1, 2):
        with Session(str(graph), threads=threads, optimize="eager") as s:
            for _ in range(2):      # the second run of a signature runs compiled
                got = s.run(step["fetch"], feed)
                for name, value in zip(step["fetch"], got):
                    np.testing.assert_allclose(value, np.load(d / step["expect"][name]),
                                               rtol=spec["rtol"], atol=spec["atol"])
            assert any(it.op == "Einsum" for it in s.plan(step["fetch"], list(feed)).items)


# --- builder graphs, values from the recurrence ---------------------------------------------

def _rnn(functional: bool, *, element_shape=(-1, K), transpose_a=False, transpose_b=False,
         w=W, write_list=False):
    """h_{t+1} = tanh(x_t W + h_t U) over a TensorList of the steps of ``xs``, ``n`` steps
    from ``h0``."""
    g = B.Graph()
    with g.as_default():
        xs = B.placeholder("float32", [None, None, w.shape[0]], name="xs")
        n = B.placeholder("int32", [], name="n")
        wt = B.constant(w.T.copy() if transpose_b else w, name="w")
        u = B.constant(U, name="u")
        es = np.array(element_shape, np.int32)
        lst = B.apply_op("TensorListFromTensor", [xs, B.constant(es)],
                         attrs={"element_dtype": D.DT_FLOAT}, name="steps").outputs[0]

        def item(lst, i):
            return B.apply_op("TensorListGetItem", [lst, i, B.constant(es)],
                              attrs={"element_dtype": D.DT_FLOAT}, name="x_t").outputs[0]

        def step(x_t, h):     # transpose_a: square steps [K, K], each transposed
            p = B.matmul(x_t, wt, transpose_a=transpose_a, transpose_b=transpose_b,
                         name="proj")
            return B.tanh(B.add(p, B.matmul(h, u, name="recur")))

        h0 = B.placeholder("float32", [None, UNITS], name="h0")
        if write_list:      # the list is a loop variable the body writes: not invariant
            def body(i, h, lst):
                h2 = step(item(lst, i), h)
                lst2 = B.apply_op("TensorListSetItem", [lst, i, item(lst, i)],
                                  attrs={"element_dtype": D.DT_FLOAT}).outputs[0]
                return [B.add(i, 1), h2, lst2]
            vars0 = [B.constant(0), h0, lst]
        else:
            def body(i, h):
                return [B.add(i, 1), step(item(lst, i), h)]
            vars0 = [B.constant(0), h0]
        out = B.while_loop(lambda i, h, *_: B.less(i, n), body, vars0, name="rnn",
                           functional=functional)
        B.identity(out[1], name="h")
    return g.as_graph_def()


H0 = (RNG.standard_normal((BATCH, UNITS)) / 2).astype(np.float32)


def _feed(xs: np.ndarray, n: int, **more) -> dict:
    return {"xs": xs, "n": np.int32(n), "h0": H0[:xs.shape[1]], **more}


def _exact(xs: np.ndarray, n: int, w=W) -> np.ndarray:
    h = H0[:xs.shape[1]].astype(np.float64)
    for t in range(n):
        h = np.tanh(xs[t].astype(np.float64) @ w.astype(np.float64) + h @ U.astype(np.float64))
    return h


def _optimized(gd):
    return optimize_for_signature(gd, ["h:0"], ["xs:0", "n:0", "h0:0"]).graph_def


MODES = [(p, t) for p in ("never", "auto", "always") for t in (1, 2)]


@pytest.mark.parametrize("functional", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_an_rnn_over_a_tensorlist_is_projected_once_with_the_recurrences_values(
        functional, transpose_b):
    gd = _rnn(functional, transpose_b=transpose_b)
    opt = _optimized(gd)
    assert len(_projections(opt)) == 1 and not _matmuls_of_list_items(opt)
    for programs, threads in MODES:
        for mode in ("eager", "off"):
            with Session(gd, threads=threads, programs=programs, optimize=mode) as s:
                for n in (STEPS, 2, 0, STEPS):
                    for _ in range(2):
                        got = s.run("h", _feed(XS, n))
                        np.testing.assert_allclose(got, _exact(XS, n), rtol=1e-5, atol=1e-6)


def test_an_empty_sequence_and_a_step_past_its_end_behave_as_written():
    gd = _rnn(False)
    empty = np.zeros((0, BATCH, K), np.float32)
    for mode in ("eager", "off"):
        with Session(gd, threads=1, optimize=mode) as s:
            np.testing.assert_array_equal(s.run("h", _feed(empty, 0)), H0)
            with pytest.raises(DfgError):       # step 6 of a 6-step list
                s.run("h", _feed(XS, STEPS + 1))
            # a sequence whose steps are not [?, K]: the list refuses it, before the loop
            with pytest.raises(DfgError):
                s.run("h", _feed(np.zeros((STEPS, BATCH, K + 1), np.float32), 0))


@pytest.mark.parametrize("functional", [False, True])
def test_what_the_pass_cannot_prove_is_left_in_the_loop(functional):
    # the list is written inside the loop
    assert _matmuls_of_list_items(_optimized(_rnn(functional, write_list=True)))
    # the element shape does not fix K: a product could fail where the loop's would not
    assert _matmuls_of_list_items(_optimized(_rnn(functional, element_shape=-1)))
    assert _matmuls_of_list_items(_optimized(_rnn(functional, element_shape=(-1, -1))))
    # the product transposes the step (the rows of the product are not the steps' rows)
    assert _matmuls_of_list_items(_optimized(_rnn(functional, transpose_a=True)))
    # one feature projected to 100 columns would hold 100 times the sequence
    wide = RNG.standard_normal((1, 100)).astype(np.float32)
    gd = _rnn(functional, element_shape=(-1, 1), w=wide)
    assert not _projections(_optimized(gd))


def test_fed_weights_are_not_hoisted_and_give_the_fed_values():
    gd = _rnn(False)
    res = optimize_for_signature(gd, ["h:0"], ["xs:0", "n:0", "h0:0", "w:0"])
    assert not _projections(res.graph_def)
    w2 = (W * 3).astype(np.float32)
    with Session(gd, threads=1, optimize="eager") as s:
        for _ in range(2):
            got = s.run("h", _feed(XS, STEPS, w=w2))
            np.testing.assert_allclose(got, _exact(XS, STEPS, w2), rtol=1e-5, atol=1e-6)
