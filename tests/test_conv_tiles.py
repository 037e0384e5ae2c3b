"""The direct convolution's wide tiles (conv.c: 6 pixels by four blocks of 16 output
channels on AVX-512) and pair tiles (12 or 8 pixels by two blocks) against float64 math
and against the same convolution computed a block of 16 channels at a time (the 8-pixel
block path): each output's sum runs over the taps and channels in the same order and form,
so the bits must be equal, epilogue included, whatever the row's last partial tile, the
channel tail, strides, dilation and padding."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels import _conv, _native

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")


def _frozen(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), a.dtype).reshape(a.shape)


def _conv_native(x, f, strides, padding, dilations, scale=None, shift=None, res=None,
                 act=_native.ACT_NONE):
    p = _conv.conv2d_plan(x.shape, f.shape, 4, strides, padding, dilations)
    ep = None if scale is None and shift is None and res is None and act == _native.ACT_NONE \
        else _native.Epilogue(scale, shift, res, act)
    return _native.conv2d_nhwc_f32(x, f, p.g, ep)


def _direct_f64(x, f, strides, padding, dilations):
    return _conv.conv2d_nhwc(x.astype(np.float64), f.astype(np.float64), strides, padding,
                             dilations)


GEOMETRIES = [
    # x shape, filter shape, strides, padding, dilations
    ((1, 14, 14, 64), (3, 3, 64, 128), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),
    ((2, 7, 9, 32), (3, 3, 32, 80), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),       # tail block
    ((1, 15, 13, 16), (3, 3, 16, 64), (1, 2, 2, 1), "VALID", (1, 1, 1, 1)),
    ((1, 9, 11, 8), (3, 3, 8, 64), (1, 1, 1, 1), "SAME", (1, 2, 2, 1)),        # dilated
    ((1, 5, 5, 24), (1, 1, 24, 192), (1, 1, 1, 1), "VALID", (1, 1, 1, 1)),
    ((1, 3, 3, 40), (5, 5, 40, 64), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),       # mostly padding
    ((1, 1, 7, 64), (1, 3, 64, 128), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),
    ((3, 8, 13, 20), (3, 3, 20, 200), (1, 1, 2, 1), "SAME", (1, 1, 1, 1)),     # 3 tiles + tail
    # pair tiles (two blocks of 16: 32 channels left): rows of 12 and 8 pixels
    ((2, 9, 13, 16), (3, 3, 16, 32), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),      # 8 + 8
    ((1, 6, 30, 8), (3, 3, 8, 32), (1, 1, 1, 1), "VALID", (1, 1, 1, 1)),       # 12 + 8 + 8
    ((1, 5, 40, 3), (3, 3, 3, 32), (1, 1, 1, 1), "SAME", (1, 1, 1, 1)),        # 12 x 3 + 8
    ((2, 6, 7, 12), (2, 2, 12, 160), (1, 1, 1, 1), "VALID", (1, 1, 1, 1)),     # 2 wide + pair
    ((1, 20, 25, 4), (5, 5, 4, 48), (1, 1, 2, 1), "SAME", (1, 1, 1, 1)),       # pair + block
    ((1, 9, 11, 8), (3, 3, 8, 32), (1, 1, 1, 1), "SAME", (1, 2, 2, 1)),        # dilated
]


@pytest.mark.parametrize("xs,fs,strides,padding,dil", GEOMETRIES)
def test_wide_tiles_match_math_and_the_block_path(xs, fs, strides, padding, dil) -> None:
    rng = np.random.default_rng(sum(xs) + sum(fs))
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen(rng.standard_normal(fs).astype(np.float32))
    got = _conv_native(x, f, strides, padding, dil)
    want = _direct_f64(x, f, strides, padding, dil)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    blocks = [_conv_native(x, _frozen(f[..., i:i + 16]), strides, padding, dil)
              for i in range(0, fs[3], 16)]
    assert np.array_equal(np.concatenate(blocks, axis=-1).view(np.uint32), got.view(np.uint32))


@pytest.mark.parametrize("act", [_native.ACT_NONE, _native.ACT_RELU, _native.ACT_RELU6])
def test_wide_tiles_epilogue_matches_the_block_path(act: int) -> None:
    rng = np.random.default_rng(7)
    xs, fs = (2, 10, 11, 24), (3, 3, 24, 96)
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen(rng.standard_normal(fs).astype(np.float32))
    scale = _frozen(rng.standard_normal(96).astype(np.float32))
    shift = _frozen(rng.standard_normal(96).astype(np.float32) * 4)
    res = rng.standard_normal((2, 10, 11, 96)).astype(np.float32)
    args = ((1, 1, 1, 1), "SAME", (1, 1, 1, 1))
    got = _conv_native(x, f, *args, scale, shift, res, act)
    blocks = [_conv_native(x, _frozen(f[..., i:i + 16]), *args, _frozen(scale[i:i + 16]),
                           _frozen(shift[i:i + 16]), np.ascontiguousarray(res[..., i:i + 16]),
                           act) for i in range(0, 96, 16)]
    assert np.array_equal(np.concatenate(blocks, axis=-1).view(np.uint32), got.view(np.uint32))
    y = _direct_f64(x, f, *args) * scale + shift + res
    if act == _native.ACT_RELU:
        y = np.maximum(y, 0)
    elif act == _native.ACT_RELU6:
        y = np.clip(y, 0, 6)
    np.testing.assert_allclose(got, y, rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("act", ["Relu", "Relu6", None])
@pytest.mark.parametrize("residual", [False, True])
def test_blas_path_epilogue_in_one_compiled_pass(monkeypatch: pytest.MonkeyPatch, act,
                                                 residual: bool) -> None:
    """A 1x1 convolution (BLAS's GEMM) with bias, residual and activation: its epilogue
    runs as one compiled chain (fused._chain_epilogue); the values must be the numpy
    passes' (DFG_NATIVE=0), NaN where they have NaN, and the math's."""
    from dfg.executor import Session
    from dfg.graphdef import builder as B

    rng = np.random.default_rng(11)
    xv = rng.standard_normal((2, 12, 12, 64)).astype(np.float32)
    xv[0, 0, 0, :] = np.nan
    fv = rng.standard_normal((1, 1, 64, 128)).astype(np.float32)
    bv = rng.standard_normal(128).astype(np.float32)
    rv = rng.standard_normal((2, 12, 12, 128)).astype(np.float32) * 3
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [2, 12, 12, 64], name="x")
        r = B.placeholder("float32", [2, 12, 12, 128], name="r")
        y = B.conv2d(x, B.constant(fv), 1, "VALID")
        y = g.create_op("BiasAdd", [y, B.constant(bv)], {"T": "float32"},
                        "bias").outputs[0]
        if residual:
            y = y + r
        if act is not None:
            y = g.create_op(act, [y], {"T": "float32"}, "act").outputs[0]
        B.identity(y, name="out")
    feed = {"x": xv, "r": rv}
    with Session(g.as_graph_def(), threads=2, optimize="eager") as sess:
        got = sess.run("out", feed)
    monkeypatch.setenv("DFG_NATIVE", "0")
    with Session(g.as_graph_def(), threads=2, optimize="eager") as sess:
        want = sess.run("out", feed)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got).any()
    assert np.array_equal(np.nan_to_num(got), np.nan_to_num(want))
    math = np.einsum("nhwc,co->nhwo", xv.astype(np.float64), fv[0, 0].astype(np.float64)) + bv
    if residual:
        math = math + rv
    if act == "Relu":
        math = np.maximum(math, 0)
    elif act == "Relu6":
        math = np.clip(math, 0, 6)
    ok = ~np.isnan(math)
    np.testing.assert_allclose(got[ok], math[ok], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,fs", [((2, 5, 52, 8), (3, 3, 8, 16)),      # 24 + 24 + 2
                                   ((1, 4, 33, 20), (2, 3, 20, 48)),     # pair, then 24 + 7
                                   ((1, 3, 27, 5), (1, 2, 5, 80))])      # wide, then 24 + 2
def test_long_tiles_match_math_and_narrow_rows(xs, fs) -> None:
    """Long tiles (24 pixels by one block of 16 channels) against float64 math and the
    same convolution computed 8 output columns at a time (rows too short for a long tile:
    the 8-pixel blocks), each from the input columns its windows read (VALID, stride 1)."""
    rng = np.random.default_rng(sum(xs) + sum(fs))
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen(rng.standard_normal(fs).astype(np.float32))
    args = ((1, 1, 1, 1), "VALID", (1, 1, 1, 1))
    got = _conv_native(x, f, *args)
    want = _direct_f64(x, f, *args)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    ow, kw = got.shape[2], fs[1]
    parts = [_conv_native(np.ascontiguousarray(x[:, :, a:min(a + 8, ow) + kw - 1]), f, *args)
             for a in range(0, ow, 8)]
    assert np.array_equal(np.concatenate(parts, axis=2).view(np.uint32), got.view(np.uint32))
