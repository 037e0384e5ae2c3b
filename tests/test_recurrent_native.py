"""A recurrent layer's loop run in compiled code (executor/recurrent.py, native/recurrent.c).

The models are Keras layers frozen by TensorFlow (tests/data/rnn, its generator beside them;
and the LSTM classifier of tests/data/bench): the expected values are TensorFlow's. The loop
run compiled must also give the generated loop's bits (the same kernels on the same
operands), in every program mode, in chunks of any size, and decline (the generated loop then
runs) whatever it does not take.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session, plan_cache, recurrent
from dfg.executor.kernels import _native
from dfg.graphdef.errors import ResourceExhaustedError
from dfg.graphdef.io import load_graph

DATA = Path(__file__).resolve().parent / "data"
CASES = ["rnn/rnn_lstm_sequences", "rnn/rnn_bilstm", "rnn/rnn_simple", "rnn/rnn_gru",
         "rnn/rnn_lstm_long", "bench/bench_lstm_classifier", "rnn/rnn_lstm_masked",
         "rnn/rnn_gru_masked", "rnn/rnn_bilstm_masked", "rnn/rnn_lstm_b1"]

needs_native = pytest.mark.skipif(not _native.enabled(), reason="native kernels not built")


def _case(name: str) -> tuple[Path, dict, dict, list, list]:
    d = DATA / name
    case = json.loads((d / "case.json").read_text())
    step = case["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    expect = [np.load(d / step["expect"][f]) for f in step["fetch"]]
    return d, case, feed, step["fetch"], expect


def _run(name: str, steps: int = 2, **kw) -> list:
    """The fetched values of ``steps`` steps of a new Session (no plan shared with another:
    each Session here compiles its own loop)."""
    d, _case_doc, feed, fetch, _expect = _case(name)
    plan_cache.clear()
    with Session(load_graph(d / "graph.pb"), threads=2, optimize="eager", **kw) as sess:
        return [sess.run(fetch, feed) for _ in range(steps)]


@pytest.fixture
def counted(monkeypatch):
    """The iterations the compiled loop ran (the real runner, counted)."""
    ran = []
    real = recurrent.run

    def run(r, ctl, max_bytes, values):
        out = real(r, ctl, max_bytes, values)
        if out is not None:
            ran.append(out[0])
        return out
    monkeypatch.setattr(recurrent, "run", run)
    return ran


@needs_native
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("programs", ["auto", "always"])
def test_the_loop_runs_compiled_with_tensorflows_values(name, programs, counted):
    _d, case, _feed, _fetch, expect = _case(name)
    for values in _run(name, programs=programs):
        for got, want in zip(values, expect):
            np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"])
    # the loop ran compiled: every iteration of each step (a GRU's first one aside, which
    # computes its invariants)
    assert counted and sum(counted) >= len(counted) * 10


@needs_native
@pytest.mark.parametrize("name", CASES)
def test_the_compiled_loop_gives_the_generated_loops_bits(name, monkeypatch, counted):
    compiled = _run(name)
    assert counted
    monkeypatch.setattr(recurrent, "match", lambda lp, once: None)
    generated = _run(name)
    for a_step, b_step in zip(compiled, generated):
        for a, b in zip(a_step, b_step):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@needs_native
@pytest.mark.parametrize("name", ["rnn/rnn_lstm_long", "rnn/rnn_bilstm", "rnn/rnn_gru",
                                  "rnn/rnn_bilstm_masked", "rnn/rnn_gru_masked"])
def test_node_by_node_gives_the_same_bits(name, counted):
    compiled = _run(name)
    assert counted
    by_node = _run(name, programs="never")
    for a_step, b_step in zip(compiled, by_node):
        for a, b in zip(a_step, b_step):
            assert np.array_equal(a, b)


@needs_native
@pytest.mark.parametrize("chunk", [1, 7, 299])
def test_any_chunk_of_iterations_gives_the_same_bits(chunk, monkeypatch, counted):
    whole = _run("rnn/rnn_lstm_long")
    monkeypatch.setattr(recurrent, "CHUNK", chunk)
    chunked = _run("rnn/rnn_lstm_long")
    for a, b in zip(whole, chunked):
        assert np.array_equal(a[0], b[0])
    assert counted


def test_without_the_native_kernels_the_generated_loop_gives_tensorflows_values(
        monkeypatch, counted):
    monkeypatch.setenv("DFG_NATIVE", "0")
    _d, case, _feed, _fetch, expect = _case("rnn/rnn_bilstm")
    for values in _run("rnn/rnn_bilstm"):
        for got, want in zip(values, expect):
            np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"])
    assert not counted


@needs_native
def test_a_budget_below_an_output_fails_as_the_kernels_do(monkeypatch, counted):
    # 16 rows of 32 units: each cell output is 2 KiB, the step's other tensors larger
    with pytest.raises(ResourceExhaustedError) as compiled:
        _run("rnn/rnn_lstm_sequences", steps=1, max_bytes=1024)
    monkeypatch.setattr(recurrent, "match", lambda lp, once: None)
    with pytest.raises(ResourceExhaustedError) as generated:
        _run("rnn/rnn_lstm_sequences", steps=1, max_bytes=1024)
    assert type(compiled.value) is type(generated.value)


@needs_native
def test_the_native_loop_computes_the_recurrence_and_checks_its_buffers():
    """h_{t+1} = h_t @ W + x_t by the compiled loop, against numpy in float64 on values
    whose float32 sums are exact; then module.c refuses a call whose buffers do not fit its
    geometry (a ValueError or TypeError, never a stray read or write)."""
    ext = _native.extension()
    f32 = np.float32
    rng = np.random.default_rng(0)
    wm = rng.integers(-2, 3, (4, 4)).astype(f32)
    w = np.zeros((1, 1, 1, 4, 16), f32)      # (blocks, KH, KW, C, 16): the packed matrix
    w[0, 0, 0, :, :4] = wm
    geometry = (1, 1, 2, 4, 1, 1, 4, 1, 2, 1, 1, 1, 1, 0, 0)    # 2 rows of 4 by 4 x 4
    product = np.zeros((2, 4), f32)
    code = np.array([0, 0, 1], np.int32).tobytes()           # the product plus the row
    roles = np.array([-3, -2], np.int32).tobytes()
    outs = np.array([0], np.int32).tobytes()
    xs = tuple(rng.integers(-3, 4, (2, 4)).astype(f32) for _ in range(3))
    h0 = rng.integers(-1, 2, (2, 4)).astype(f32)

    def call(rows=xs, items=None, init=(h0,), roles=roles, outs=outs, item_out=0):
        items = np.zeros((3, 2, 4), f32) if items is None else items
        where = ext.recurrent_f32(rows, w, geometry, product, 0, roles, bytes([0, 0]), None,
                                  (None, None), code, 2, 4, None, outs, item_out, items,
                                  init, (None,), (None,))
        return where, items

    where, items = call()
    h = h0.astype(np.float64)
    for t in range(3):
        h = h @ wm.astype(np.float64) + xs[t]
        np.testing.assert_array_equal(items[t], h)
    assert where == (3,)        # the state's last value: the last output row
    with pytest.raises(ValueError):
        call(items=np.zeros((2, 2, 4), f32))
    with pytest.raises(ValueError):
        call(roles=np.array([-3, 5], np.int32).tobytes())
    with pytest.raises(ValueError):
        call(rows=(np.ones((2, 3), f32),) * 3)
    with pytest.raises(TypeError):
        call(rows=(np.ones((2, 4), np.float64),) * 3)
    with pytest.raises(ValueError):
        call(init=(np.ones((2, 5), f32),))
    with pytest.raises(ValueError):
        call(outs=np.array([-1], np.int32).tobytes(), item_out=-1)


@needs_native
def test_the_native_loop_keeps_a_masked_rows_state():
    """A masked layer: h_{t+1} = where(mask_t, h_t @ W + x_t, h_t) row by row (the layer's
    Select), the output row h_{t+1}; against numpy in float64 on exact values. Then module.c
    refuses masks that are not one byte a row, and a masked call without its buffers."""
    ext = _native.extension()
    f32 = np.float32
    rng = np.random.default_rng(1)
    wm = rng.integers(-2, 3, (4, 4)).astype(f32)
    w = np.zeros((1, 1, 1, 4, 16), f32)
    w[0, 0, 0, :, :4] = wm
    geometry = (1, 1, 3, 4, 1, 1, 4, 1, 3, 1, 1, 1, 1, 0, 0)    # 3 rows of 4 by 4 x 4
    product = np.zeros((3, 4), f32)
    code = np.array([0, 0, 1], np.int32).tobytes()
    roles = np.array([-3, -2], np.int32).tobytes()
    xs = tuple(rng.integers(-3, 4, (3, 4)).astype(f32) for _ in range(4))
    masks = tuple(np.array(m, bool).reshape(3, 1) for m in
                  ([1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 1]))
    h0 = rng.integers(-1, 2, (3, 4)).astype(f32)
    one = np.array([0], np.int32).tobytes()
    chosen = np.array([1], np.int32).tobytes()

    def call(masks=masks, sel=chosen, tmp=None):
        items = np.zeros((4, 3, 4), f32)
        tmp = (np.empty((3, 4), f32),) if tmp is None else tmp
        where = ext.recurrent_f32(xs, w, geometry, product, 0, roles, bytes([0, 0]), None,
                                  (None, None), code, 3, 4, None, one, 0, items, (h0,),
                                  (None,), (None,), masks, one, sel, 0, tmp)
        return where, items

    where, items = call()
    h = h0.astype(np.float64)
    for t in range(4):
        h = np.where(masks[t], h @ wm.astype(np.float64) + xs[t], h)
        np.testing.assert_array_equal(items[t], h)
    assert where == (3,)
    # state_sel 0: the chain's output on every row, as without a mask
    _where, items = call(sel=np.array([0], np.int32).tobytes())
    h = h0.astype(np.float64)
    for t in range(4):
        h = h @ wm.astype(np.float64) + xs[t]
        np.testing.assert_array_equal(items[t], h)
    with pytest.raises(ValueError):
        call(masks=tuple(np.ones((3, 2), bool) for _ in range(4)))
    with pytest.raises(ValueError):
        call(masks=masks[:3])
    with pytest.raises(ValueError):
        call(tmp=(np.empty((2, 4), f32),))
    with pytest.raises(ValueError):
        call(sel=np.array([2], np.int32).tobytes())


@needs_native
def test_the_pool_spin_is_set_and_read_and_bounded():
    ext = _native.extension()
    old = ext.pool_spin()
    try:
        assert ext.pool_spin(0) == old and ext.pool_spin() == 0
        # a convolution split on the pool gives the same bits whether its workers slept
        x = np.random.default_rng(0).standard_normal((4, 32, 32, 16)).astype(np.float32)
        f = np.random.default_rng(1).standard_normal((3, 3, 16, 32)).astype(np.float32)
        from dfg.executor.kernels import _conv

        plan = _conv.conv2d_plan(x.shape, f.shape, 4, [1, 1, 1, 1], "SAME")
        asleep = _conv.conv2d_planned(x, f, plan)
        ext.pool_spin(500)
        awake = [_conv.conv2d_planned(x, f, plan) for _ in range(3)]
        assert all(np.array_equal(asleep, a) for a in awake)
        with pytest.raises(ValueError):
            ext.pool_spin(2_000_000)
    finally:
        ext.pool_spin(old)
