"""The ``sink_squeeze`` pass: a Conv1D's Squeeze (Keras: ExpandDims, Conv2D, Squeeze, then
BiasAdd and the activation) moves after the BiasAdd and activation, so the convolution
fuses with them. Values come from the Conv1D computed in float64 by its definition, in
every execution mode; the pass must fire on the Keras form and on a depthwise one, and leave
alone a chain whose tensors are fetched, read twice or squeezed along the channels.
"""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.session import Session
from dfg.graphdef import builder as B
from dfg.graphdef.passes.pipeline import optimize_for_signature

RNG = np.random.default_rng(5)
X = RNG.standard_normal((3, 20, 8)).astype(np.float32)       # (batch, steps, channels)
W = RNG.standard_normal((5, 8, 6)).astype(np.float32)         # (width, in, out)
BIAS = RNG.standard_normal(6).astype(np.float32)
MODES = [(p, t) for p in ("never", "auto", "always") for t in (1, 2)]


def _reference(act: str) -> np.ndarray:
    """Conv1D (VALID, stride 1) plus bias, then the activation, in float64."""
    x, w = X.astype(np.float64), W.astype(np.float64)
    steps = X.shape[1] - W.shape[0] + 1
    y = np.stack([np.tensordot(x[:, t:t + W.shape[0]], w, axes=2) for t in range(steps)], 1)
    y = y + BIAS
    return {"Relu": np.maximum(y, 0), "Tanh": np.tanh(y), None: y}[act]


def _out(act: str | None) -> np.ndarray:
    return _reference(act) ** 2


def _graph(act: str | None = "Relu", dims=(-3,), extra_reader: bool = False):
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", list(X.shape), name="x")
        y = B.apply_op("ExpandDims", [x, B.constant(np.int32(1))], name="expand").outputs[0]
        f = B.constant(W[None], name="w")                    # (1, width, in, out)
        y = B.apply_op("Conv2D", [y, f], {"strides": [1, 1, 1, 1], "padding": "VALID"},
                       name="conv").outputs[0]
        y = B.apply_op("Squeeze", [y], {"squeeze_dims": list(dims)}, name="squeeze").outputs[0]
        y = B.apply_op("BiasAdd", [y, B.constant(BIAS, name="b")], name="bias").outputs[0]
        if act is not None:
            y = B.apply_op(act, [y], name="act").outputs[0]
        # a reader that stays (an Identity would take the fetched name onto the activation)
        out = B.apply_op("Square", [y], name="out").outputs[0]
        if extra_reader:
            B.apply_op("Square", [y], name="other")
    return g.as_graph_def(), out.name


def _optimized(gd, fetches: list[str]):
    res = optimize_for_signature(gd, fetches, ["x:0"])
    assert not res.warnings
    return res.graph_def


@pytest.mark.parametrize("act", ["Relu", "Tanh", None])
def test_the_squeeze_moves_after_bias_and_activation_and_they_fuse(act) -> None:
    gd, out = _graph(act)
    opt = _optimized(gd, [out])
    fused = [n for n in opt.node if n.op == "_FusedConv2D"]
    assert len(fused) == 1
    assert [s.decode() for s in fused[0].attr["fused_ops"].list.s] == \
        ["BiasAdd"] + ([act] if act else [])
    assert not [n for n in opt.node if n.op in ("BiasAdd", "Relu", "Tanh")]
    want = _out(act)
    for programs, threads in MODES:
        for optimize in ("eager", "off"):
            with Session(gd, threads=threads, programs=programs, optimize=optimize) as s:
                for _ in range(2):
                    got = s.run([out], {"x:0": X})[0]
                    assert got.shape == want.shape
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_fetched_or_shared_tensor_or_a_channel_squeeze_stays() -> None:
    gd, out = _graph("Relu")
    # the BiasAdd fetched: its tensor keeps its meaning (3-D), so nothing moves
    opt = _optimized(gd, [out, "bias:0"])
    assert "_FusedConv2D" not in [n.op for n in opt.node]
    with Session(gd, threads=1, optimize="eager") as s:
        got_out, got_bias = s.run([out, "bias:0"], {"x:0": X})
    np.testing.assert_allclose(got_bias, _reference(None), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_out, _out("Relu"), rtol=1e-5, atol=1e-5)
    # the Squeeze fetched
    opt = _optimized(gd, [out, "squeeze:0"])
    assert "_FusedConv2D" not in [n.op for n in opt.node]
    # the activation read twice: both readers read the moved Squeeze
    gd2, out2 = _graph("Relu", extra_reader=True)
    opt = _optimized(gd2, [out2, "other:0"])
    with Session(gd2, threads=1, optimize="eager") as s:
        a, b = s.run([out2, "other:0"], {"x:0": X})
    np.testing.assert_allclose(a, _out("Relu"), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, _out("Relu"), rtol=1e-5, atol=1e-5)
