"""The ``fold_pad`` pass: a zero Pad before a Conv2D becomes the convolution's own padding.

Values come from the convolution computed in float64 by its definition (the padded input's
windows times the filter), in every execution mode; the pass must fire on Keras's
ZeroPadding2D + VALID convolution and on TensorFlow's own ResNet50V2 (the zoo's, checked
against TensorFlow's outputs), and leave alone what is not the same computation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.session import Session
from dfg.graphdef import builder as B
from dfg.graphdef.passes.pipeline import optimize_for_signature

RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)
W = RNG.standard_normal((3, 3, 3, 5)).astype(np.float32)
MODES = [(p, t) for p in ("never", "auto", "always") for t in (1, 2)]


def _reference(x: np.ndarray, w: np.ndarray, pads: list, strides: int = 1,
               depthwise: bool = False) -> np.ndarray:
    """NHWC convolution (``depthwise``: each channel by its own filter, multiplier 1) of x
    zero-padded by ``pads`` ([[top, bottom], [left, right]]), VALID, in float64."""
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)])
    kh, kw = w.shape[:2]
    oh = (xp.shape[1] - kh) // strides + 1
    ow = (xp.shape[2] - kw) // strides + 1
    out = np.zeros((x.shape[0], oh, ow, x.shape[3] if depthwise else w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, i * strides:i * strides + kh, j * strides:j * strides + kw, :]
            out[:, i, j] = (win * w[:, :, :, 0]).sum(axis=(1, 2)) if depthwise \
                else np.tensordot(win, w.astype(np.float64), axes=3)
    return out


def _graph(pads, *, op="Pad", value=0.0, padding="VALID", explicit=(), fmt="NHWC",
           strides=1, conv="Conv2D", bias=False, w=W):
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", list(X.shape), name="x")
        if fmt == "NCHW":
            x = B.transpose(x, B.constant(np.array([0, 3, 1, 2], np.int32)), name="to_nchw")
        p = B.constant(np.array(pads, np.int32), name="paddings")
        ins = [x, p] + ([B.constant(np.float32(value), name="value")] if op == "PadV2" else [])
        y = B.apply_op(op, ins, name="pad").outputs[0]
        s = [1, 1, strides, strides] if fmt == "NCHW" else [1, strides, strides, 1]
        if conv == "Conv2D":
            y = B.apply_op("Conv2D", [y, B.constant(w, name="w")], {
                "strides": s, "padding": padding, "data_format": fmt,
                "dilations": [1, 1, 1, 1], "explicit_paddings": list(explicit)},
                name="conv").outputs[0]
        else:
            y = B.apply_op("DepthwiseConv2dNative", [y, B.constant(w[:, :, :, :1], name="w")],
                           {"strides": s, "padding": padding, "data_format": fmt},
                           name="conv").outputs[0]
        if bias:
            n = w.shape[3] if conv == "Conv2D" else X.shape[3]
            y = B.relu(B.apply_op("BiasAdd", [y, B.constant(np.float32([0.5] * n))],
                                  name="bias").outputs[0], name="out")
        if fmt == "NCHW":
            y = B.transpose(y, B.constant(np.array([0, 2, 3, 1], np.int32)), name="to_nhwc")
    return g.as_graph_def(), y.name


def _ops(gd) -> list[str]:
    return [n.op for n in gd.node]


def _folded(gd, fetch) -> bool:
    res = optimize_for_signature(gd, [fetch], ["x:0"])
    assert not res.warnings
    return "Pad" not in _ops(res.graph_def) and "PadV2" not in _ops(res.graph_def)


def _values(gd, fetch, want, modes=MODES):
    for programs, threads in modes:
        with Session(gd, threads=threads, programs=programs, optimize="eager") as s:
            for _ in range(2):
                got = s.run([fetch], {"x:0": X})[0]
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


SPATIAL = [[0, 0], [1, 2], [2, 0], [0, 0]]


@pytest.mark.parametrize("case", ["valid", "explicit", "strided", "padv2", "nchw", "fused",
                                  "depthwise"])
def test_a_zero_pad_before_a_conv_is_its_padding_with_the_same_values(case):
    kw: dict = {}
    pads = [[1, 2], [2, 0]]
    if case == "explicit":      # the conv's own padding adds to the Pad's
        kw = {"padding": "EXPLICIT", "explicit": [0, 0, 1, 0, 0, 1, 0, 0]}
        pads = [[2, 2], [2, 1]]
    elif case == "strided":
        kw = {"strides": 2}
    elif case == "padv2":
        kw = {"op": "PadV2", "value": 0.0}
    elif case == "nchw":
        kw = {"fmt": "NCHW"}
    elif case == "fused":
        kw = {"bias": True}
    elif case == "depthwise":
        kw = {"conv": "DepthwiseConv2dNative"}
    paddings = [[0, 0], [0, 0], *SPATIAL[1:3]] if case == "nchw" else SPATIAL
    gd, fetch = _graph(paddings, **kw)
    assert _folded(gd, fetch)
    want = _reference(X, W, pads, kw.get("strides", 1), depthwise=case == "depthwise")
    if case == "fused":
        want = np.maximum(want + 0.5, 0)
        res = optimize_for_signature(gd, [fetch], ["x:0"])
        fused = [n for n in res.graph_def.node if n.op == "_FusedConv2D"]
        assert len(fused) == 1 and fused[0].attr["padding"].s == b"EXPLICIT"
    _values(gd, fetch, want)


@pytest.mark.parametrize("case", ["batch", "channel", "nonzero", "negative_zero", "same",
                                  "depthwise_bias", "two_readers", "fetched"])
def test_what_is_not_the_same_convolution_keeps_its_pad(case):
    pads = SPATIAL
    kw: dict = {}
    if case == "batch":
        pads = [[1, 0], [1, 2], [2, 0], [0, 0]]
    elif case == "channel":
        pads = [[0, 0], [1, 2], [2, 0], [0, 1]]
    elif case == "nonzero":
        kw = {"op": "PadV2", "value": 1.0}
    elif case == "negative_zero":
        kw = {"op": "PadV2", "value": -0.0}
    elif case == "same":
        kw = {"padding": "SAME"}
    elif case == "depthwise_bias":     # the fused depthwise op (no explicit padding) takes it
        kw = {"conv": "DepthwiseConv2dNative", "bias": True}
    if case == "channel":   # the filter takes the padded channel
        kw = {"w": RNG.standard_normal((3, 3, 4, 5)).astype(np.float32)}
    gd, fetch = _graph(pads, **kw)
    fetches = [fetch]
    if case == "two_readers":
        extra = gd.node.add(name="pad_reader", op="Identity", input=["pad"])
        extra.attr["T"].type = 1
        fetches.append("pad_reader:0")
    if case == "fetched":
        fetches.append("pad:0")
    res = optimize_for_signature(gd, fetches, ["x:0"])
    assert {"Pad", "PadV2"} & set(_ops(res.graph_def)), case
    # the pad stayed, the values are still the convolution's
    if case == "nonzero":
        xp = np.pad(X.astype(np.float64), [(0, 0), (1, 2), (2, 0), (0, 0)], constant_values=1)
        _values(gd, fetch, _reference(xp, W, [[0, 0], [0, 0]]), modes=[("auto", 2)])
    elif case in ("negative_zero", "two_readers", "fetched"):
        _values(gd, fetch, _reference(X, W, [[1, 2], [2, 0]]), modes=[("auto", 2)])


def test_keras_resnet50_v2_loses_its_pads_and_keeps_tensorflows_values():
    d = Path(__file__).parent / "data" / "models" / "resnet50_v2"
    spec = json.loads((d / "case.json").read_text())
    step = spec["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    res = optimize_for_signature(str(d / "graph.pb"), step["fetch"], list(feed))
    convs = [n for n in res.graph_def.node if n.op in ("Conv2D", "_FusedConv2D")]
    assert sum(n.attr["padding"].s == b"EXPLICIT" for n in convs) == 17
    # the one Pad left feeds a MaxPool (a pool's padding is not zeros)
    assert _ops(res.graph_def).count("Pad") == 1
    with Session(str(d / "graph.pb"), optimize="eager") as s:
        got = s.run(step["fetch"], feed)
    for name, value in zip(step["fetch"], got):
        np.testing.assert_allclose(value, np.load(d / step["expect"][name]),
                                   rtol=spec["rtol"], atol=spec["atol"])
