"""The few-channel convolution (conv.c's dfg_conv_narrow_f32: at most 4 output channels,
each output a dot product along its window's rows of taps, 8 pixels at a time where their
windows lie inside the input) against float64 math: padding that clips windows, strides, a
row of taps that is not a whole number of vectors, 1 to 4 outputs, a small pointwise layer
taken as one row of pixels, and the fused epilogue (scale, shift, residual, every
activation); and the rule that takes it."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels import _conv, _native

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")


def _frozen(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), a.dtype).reshape(a.shape)


GEOMETRIES = [
    # x, filter, stride, padding
    ((2, 28, 28, 32), (3, 3, 32, 1), 1, "SAME"),        # an autoencoder's output layer
    ((1, 17, 19, 16), (3, 3, 16, 3), 1, "SAME"),        # RGB out, rows of 19: 8 + 8 + 3
    ((2, 12, 13, 6), (5, 5, 6, 2), 2, "SAME"),          # 30 values a row: 3 vectors + 6
    ((1, 9, 40, 8), (3, 3, 8, 4), 1, "VALID"),
    ((1, 6, 6, 64), (1, 1, 64, 1), 1, "VALID"),         # pointwise: one row of 36 pixels
    ((3, 1, 1, 20), (1, 1, 20, 2), 1, "VALID"),         # three single pixels
    ((1, 10, 10, 4), (4, 4, 4, 1), 3, "SAME"),          # 16 values a row, stride 3
]


@pytest.mark.parametrize("xs,fs,s,padding", GEOMETRIES, ids=str)
def test_the_few_channel_kernel_equals_math(xs, fs, s, padding) -> None:
    rng = np.random.default_rng(sum(xs) + sum(fs))
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen(rng.standard_normal(fs).astype(np.float32))
    p = _conv.conv2d_plan(xs, fs, 4, (1, s, s, 1), padding)
    prep = _native.prepare_conv(f, p.g)
    if prep.flat != _native.CONV_NARROW:    # under NARROW_MIN_FLOPS: asked for directly
        prep = prep._replace(flat=_native.CONV_NARROW, weights=_native._narrow_filter(f))
    want = _conv.conv2d_nhwc(x.astype(np.float64), f.astype(np.float64), (1, s, s, 1),
                             padding)
    for got in (_native.conv2d_prepared(x, prep), _native.runner(prep)(x)):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("act", [_native.ACT_NONE, _native.ACT_RELU, _native.ACT_RELU6,
                                 _native.ACT_SIGMOID, _native.ACT_TANH, _native.ACT_SWISH])
def test_the_few_channel_kernels_epilogue(act: int) -> None:
    rng = np.random.default_rng(11 + act)
    xs, fs = (2, 11, 14, 16), (3, 3, 16, 3)
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen((rng.standard_normal(fs) * 0.3).astype(np.float32))
    scale = _frozen(rng.standard_normal(3).astype(np.float32))
    shift = _frozen(rng.standard_normal(3).astype(np.float32))
    res = rng.standard_normal((2, 11, 14, 3)).astype(np.float32)
    g = _conv.conv2d_plan(xs, fs, 4, (1, 1, 1, 1), "SAME").g
    ep = _native.Epilogue(scale, shift, res, act)
    prep = _native.prepare_conv(f, g, ep)._replace(flat=_native.CONV_NARROW,
                                                  weights=_native._narrow_filter(f))
    got = _native.conv2d_prepared(x, prep, res)
    y = _conv.conv2d_nhwc(x.astype(np.float64), f.astype(np.float64), (1, 1, 1, 1), "SAME")
    y = y * scale + shift + res
    y = {_native.ACT_NONE: y, _native.ACT_RELU: np.maximum(y, 0),
         _native.ACT_RELU6: np.clip(y, 0, 6), _native.ACT_SIGMOID: 1 / (1 + np.exp(-y)),
         _native.ACT_TANH: np.tanh(y), _native.ACT_SWISH: y / (1 + np.exp(-y))}[act]
    np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5 * np.abs(y).max())


def test_the_rule_takes_few_outputs_with_rows_of_taps_long_enough() -> None:
    def kernel(xs: tuple, fs: tuple, dil: int = 1) -> int:
        p = _conv.conv2d_plan(xs, fs, 4, (1, 1, 1, 1), "SAME", (1, dil, dil, 1))
        return _native.prepare_conv(np.zeros(fs, np.float32), p.g).flat

    assert kernel((4, 32, 32, 32), (3, 3, 32, 4)) == _native.CONV_NARROW
    assert kernel((1, 8, 8, 32), (3, 3, 32, 4)) != _native.CONV_NARROW     # 0.15 MFLOP
    assert kernel((4, 32, 32, 32), (3, 3, 32, 5)) != _native.CONV_NARROW   # 5 outputs
    assert kernel((64, 32, 32, 3), (3, 3, 3, 1)) != _native.CONV_NARROW    # rows of 9
    assert kernel((4, 32, 32, 32), (3, 3, 32, 1), dil=2) != _native.CONV_NARROW
