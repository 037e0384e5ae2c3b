"""Conv2DBackpropInput (a transposed convolution: Keras's Conv2DTranspose) by phases: one
compiled stride-1 convolution per phase of the input (executor/kernels/_conv.py
transposed_phases, nn.py _transposed_native), checked against the operation's definition in
float64 and against the GEMM and scatter path (DFG_NATIVE=0) on strides 1-3, kernels 1-5,
SAME, VALID and explicit padding, kernels smaller than their stride (phases no tap reaches,
gradients cropped), a frozen filter kept across runs and a filter that changes."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernel_call import bind_op, call, context
from dfg.executor.kernels import _conv, _native
from dfg.executor.kernels.registry import complete_attrs
from dfg.graphdef.tensors import from_numpy, to_numpy

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")


def _definition(dy: np.ndarray, f: np.ndarray, g: _conv.Geom) -> np.ndarray:
    """dx[n, oy*s - pt + i, ox*s - pl + j, c] += dy[n, oy, ox, o] * f[i, j, c, o], float64."""
    dx = np.zeros((g.n, g.h + 2 * g.kh + g.sh * g.oh, g.w + 2 * g.kw + g.sw * g.ow, g.c))
    off = g.kh + g.kw               # room for windows outside the input, cut off below
    d64, f64 = dy.astype(np.float64), f.astype(np.float64)
    for i in range(g.kh):
        for j in range(g.kw):
            contrib = d64 @ f64[i, j].T                       # (n, oh, ow, c)
            y0, x0 = off - g.pt + i, off - g.pl + j
            dx[:, y0:y0 + g.sh * g.oh:g.sh, x0:x0 + g.sw * g.ow:g.sw] += contrib
    return dx[:, off:off + g.h, off:off + g.w]


def _run(dy: np.ndarray, f: np.ndarray, sizes: list[int], attrs: dict, runs: int = 1,
         frozen: bool = True) -> list[np.ndarray]:
    fa = to_numpy(from_numpy(f)) if frozen else f
    sz = np.array(sizes, np.int32)
    a = complete_attrs("Conv2DBackpropInput", dict(attrs), [sz, fa, dy])
    k = bind_op("Conv2DBackpropInput", a)
    ctx = context(k)
    return [call(k, [sz, fa, dy], ctx) for _ in range(runs)]


GEOMETRIES = [
    # (N, H, W, C), k, stride, padding, OC
    ((2, 14, 14, 32), 3, 2, "SAME", 64),      # the Keras autoencoder's decoder
    ((1, 28, 28, 16), 3, 2, "SAME", 32),
    ((2, 9, 9, 8), 3, 2, "VALID", 16),
    ((1, 10, 11, 8), 5, 2, "SAME", 24),
    ((1, 12, 12, 8), 4, 2, "SAME", 16),       # kernel a multiple of the stride, padded
    ((2, 8, 8, 8), 3, 1, "SAME", 16),         # one phase: a flipped convolution
    ((1, 13, 13, 4), 3, 3, "VALID", 8),       # kernel == stride, not tiling (13 = 4*3 + 1)
    ((1, 12, 12, 4), 4, 3, "SAME", 8),
    ((1, 10, 10, 4), 1, 2, "SAME", 8),        # kernel < stride: phases no tap reaches
    ((1, 11, 11, 4), 2, 3, "VALID", 8),
    ((1, 7, 9, 3), 3, 2, [[0, 0], [2, 0], [0, 3], [0, 0]], 5),   # explicit, lopsided
    ((1, 7, 9, 3), 3, 2, [[0, 0], [0, 2], [1, 1], [0, 0]], 5),
]


@pytest.mark.parametrize("native", ["default", "0"])
@pytest.mark.parametrize("xs,k,s,padding,oc", GEOMETRIES, ids=str)
def test_transposed_convolution_equals_its_definition(xs, k, s, padding, oc, native,
                                                      monkeypatch) -> None:
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    explicit = isinstance(padding, list)
    g = _conv.geometry(xs, "NHWC", k, k, [1, s, s, 1], [1, 1, 1, 1],
                       "EXPLICIT" if explicit else padding,
                       [p for pair in padding for p in pair] if explicit else None)
    rng = np.random.default_rng(sum(xs) + 7 * k + s)
    dy = rng.standard_normal((g.n, g.oh, g.ow, oc)).astype(np.float32)
    f = rng.standard_normal((k, k, xs[3], oc)).astype(np.float32)
    attrs = {"strides": [1, s, s, 1], "padding": "EXPLICIT" if explicit else padding}
    if explicit:
        attrs["explicit_paddings"] = [p for pair in padding for p in pair]
    want = _definition(dy, f, g)
    for got in _run(dy, f, list(xs), attrs, runs=2):
        assert got.dtype == np.float32 and got.shape == xs
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.sqrt(k * k * oc))


def test_phases_and_the_gemm_path_agree_and_a_new_filter_is_not_served_the_old_one(
        monkeypatch) -> None:
    xs, k, s = (2, 14, 14, 32), 3, 2
    rng = np.random.default_rng(3)
    dy = rng.standard_normal((2, 7, 7, 48)).astype(np.float32)
    f1 = rng.standard_normal((k, k, 32, 48)).astype(np.float32)
    f2 = rng.standard_normal((k, k, 32, 48)).astype(np.float32)
    attrs = {"strides": [1, s, s, 1], "padding": "SAME"}
    sz = np.array(xs, np.int32)
    a = complete_attrs("Conv2DBackpropInput", dict(attrs), [sz, f1, dy])
    kern = bind_op("Conv2DBackpropInput", a)
    ctx = context(kern)
    fa, fb = to_numpy(from_numpy(f1)), to_numpy(from_numpy(f2))
    first = call(kern, [sz, fa, dy], ctx)
    second = call(kern, [sz, fb, dy], ctx)      # same node, another (frozen) filter
    monkeypatch.setenv("DFG_NATIVE", "0")
    ref1 = _run(dy, f1, list(xs), attrs)[0]
    ref2 = _run(dy, f2, list(xs), attrs)[0]
    np.testing.assert_allclose(first, ref1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(second, ref2, rtol=1e-4, atol=1e-4)
    assert not np.allclose(first, second)


def _decoder_graph(act: str | None, bn: bool, residual: bool, k: int = 3, s: int = 2):
    """x (2, 7, 7, 16) -> Conv2DTranspose(8, k, strides=s, SAME) as TensorFlow writes it
    (Conv2DBackpropInput of a Const filter), its BiasAdd, then optionally Keras 3's frozen
    batch norm (x * a + b), a residual Add and the activation."""
    from dfg.graphdef import builder as B

    rng = np.random.default_rng(9)
    f = rng.standard_normal((k, k, 8, 16)).astype(np.float32) * 0.3
    bias = rng.standard_normal(8).astype(np.float32)
    a, b = (rng.uniform(0.5, 1.5, 8).astype(np.float32),
            rng.standard_normal(8).astype(np.float32))
    res = rng.standard_normal((2, 7 * s, 7 * s, 8)).astype(np.float32)
    with B.Graph().as_default() as gr:
        x = B.placeholder("float32", [2, 7, 7, 16], name="x")
        y = B.apply_op("Conv2DBackpropInput",
                       [B.constant(np.array([2, 7 * s, 7 * s, 8], np.int32)),
                        B.constant(f, name="w"), x],
                       {"strides": [1, s, s, 1], "padding": "SAME"}, name="deconv").outputs[0]
        y = B.apply_op("BiasAdd", [y, B.constant(bias, name="b")], name="bias").outputs[0]
        if bn:
            y = B.apply_op("Mul", [y, B.constant(a, name="bn_a")], name="bn_mul").outputs[0]
            y = B.apply_op("AddV2", [y, B.constant(b, name="bn_b")], name="bn_add").outputs[0]
        if residual:
            y = B.apply_op("AddV2", [y, B.constant(res, name="res")], name="skip").outputs[0]
        if act == "LeakyRelu":
            y = B.apply_op("LeakyRelu", [y], {"alpha": 0.3}, name="act").outputs[0]
        elif act is not None:
            y = B.apply_op(act, [y], name="act").outputs[0]
        out = B.apply_op("Square", [y], name="out").outputs[0]
    g = _conv.geometry((2, 7 * s, 7 * s, 8), "NHWC", k, k, [1, s, s, 1], [1, 1, 1, 1],
                       "SAME", None)
    xin = rng.standard_normal((2, 7, 7, 16)).astype(np.float32)
    want = _definition(xin, f, g) + bias
    if bn:
        want = want * a + b
    if residual:
        want = want + res
    want = {None: want, "Relu": np.maximum(want, 0), "Sigmoid": 1 / (1 + np.exp(-want)),
            "LeakyRelu": np.where(want > 0, want, 0.3 * want), "Tanh": np.tanh(want)}[act]
    return gr.as_graph_def(), out.name, xin, want ** 2


@pytest.mark.parametrize("act,bn,residual,k,s", [
    ("Relu", False, False, 3, 2), ("Sigmoid", True, False, 3, 2),
    ("LeakyRelu", True, False, 5, 2), (None, False, True, 3, 2), ("Tanh", False, False, 4, 2),
    ("Relu", False, False, 3, 1), ("Relu", False, False, 1, 2)])
def test_a_transposed_convolution_fuses_its_batch_norm_bias_and_activation(
        act, bn, residual, k, s) -> None:
    """Conv2DTranspose + BiasAdd (+ batch norm) + activation: the batch norm folds into the
    filter and bias, the rest fuses into _DfgFusedConv2DBackpropInput (the compiled phases
    apply the bias and a compiled activation as they compute; LeakyRelu, a residual or a
    phase no tap reaches take the epilogue after), equal to the definition in every mode."""
    from dfg.executor.session import Session
    from dfg.graphdef.passes.pipeline import optimize_for_signature

    gd, out, xin, want = _decoder_graph(act, bn, residual, k, s)
    opt = optimize_for_signature(gd, [out], ["x:0"]).graph_def
    ops = [n.op for n in opt.node]
    assert "_DfgFusedConv2DBackpropInput" in ops and "BiasAdd" not in ops
    assert "Mul" not in ops and (act is None or act not in ops)
    for programs in ("never", "auto", "always"):
        for threads in (1, 2):
            for optimize in ("eager", "off"):
                with Session(gd, threads=threads, programs=programs,
                             optimize=optimize) as sess:
                    for _ in range(2):
                        got = sess.run([out], {"x:0": xin})[0]
                        np.testing.assert_allclose(got, want, rtol=1e-4,
                                                   atol=1e-4 * np.abs(want).max())
