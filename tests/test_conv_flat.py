"""The direct convolution's pixels as the rows of one product (conv.c's dfg_conv_flat_f32, on
AVX-512 for each whole tile column of 64 output channels, the row kernel's last pass for the
channels past them: _native.flat_conv) against float64 math and
against the row kernel: each output is the same sum of float32 FMAs over the taps and
channels in the same order (a padded tap adds a zero product the row kernel skips: equal
for finite values), read in place from the input or its padded copy and cut into blocks of
at most FLAT_KB values within a window's contiguous runs, whose partial sums wait in the
output as they are, so the bits must equal the row kernel's, epilogue included, on any
thread split."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels import _conv, _native

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")


def _frozen(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), a.dtype).reshape(a.shape)


def _run(x: np.ndarray, f: np.ndarray, g, flat: bool, split: tuple, ep=None) -> np.ndarray:
    prep = _native.prepare_conv(f, g, ep)
    out = np.empty(prep.out_shape, np.float32)
    res = None if ep is None else ep.residual
    _native.extension().conv2d_nhwc_f32(x, prep.weights, out, prep.geometry, prep.scale,
                                        prep.shift, res, prep.act, *split, flat)
    return out


GEOMETRIES = [
    # x shape, filter shape, strides, padding, dilations
    ((1, 7, 7, 96), (3, 3, 96, 128), 1, "SAME", 1),         # 49 pixels: a partial tile
    ((1, 14, 14, 40), (1, 1, 40, 64), 1, "VALID", 1),        # 1x1: the input is the matrix
    ((2, 9, 9, 300), (1, 1, 300, 128), 2, "VALID", 1),       # strided 1x1; K = 300: 2 passes
    ((1, 6, 5, 70), (3, 3, 70, 64), 1, "VALID", 1),          # K = 630: 3 passes
    ((3, 5, 7, 16), (3, 3, 16, 192), 1, "SAME", 2),          # dilated, batch of 3
    ((1, 11, 13, 24), (1, 7, 24, 64), 1, "SAME", 1),         # InceptionV3's 1x7
    ((1, 12, 12, 32), (3, 3, 32, 64), 2, "SAME", 1),
    ((1, 1, 1, 512), (1, 1, 512, 256), 1, "VALID", 1),       # one pixel
    ((1, 10, 10, 200), (3, 3, 200, 64), 1, "SAME", 1),       # rows of 600: 128s and 88
    ((2, 9, 11, 64), (5, 5, 64, 128), 2, "SAME", 1),         # padding on every side
    ((1, 12, 12, 80), (3, 3, 80, 64), 2, "VALID", 1),        # windows inside: no copy
    ((1, 9, 9, 48), (2, 2, 48, 64), 2, "VALID", 1),          # windows do not overlap
    ((4, 3, 3, 130), (3, 3, 130, 128), 1, "SAME", 1),        # tiles across images
    # channels past the last whole tile column: the row kernel's pair, long and block tiles
    ((1, 9, 9, 80), (1, 1, 80, 100), 1, "VALID", 1),         # 64 + 36
    ((2, 5, 5, 64), (3, 3, 64, 200), 1, "SAME", 1),          # 192 + 8
    ((1, 19, 19, 96), (1, 1, 96, 152), 1, "VALID", 1),       # 128 + 24 (Xception's 728)
    ((1, 1, 1, 300), (1, 1, 300, 72), 1, "VALID", 1),        # one pixel: 64 + 8
    ((3, 4, 6, 70), (3, 3, 70, 96), 2, "SAME", 1),           # 64 + 32, strided, padded
]


@pytest.mark.parametrize("xs,fs,stride,padding,dil", GEOMETRIES)
def test_the_flat_product_matches_math_and_the_row_kernel(xs, fs, stride, padding, dil
                                                            ) -> None:
    rng = np.random.default_rng(sum(xs) + sum(fs))
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen((rng.standard_normal(fs) * 0.1).astype(np.float32))
    strides, dilations = (1, stride, stride, 1), (1, dil, dil, 1)
    g = _conv.conv2d_plan(xs, fs, 4, strides, padding, dilations).g
    rows = g.n * g.oh
    want = _conv.conv2d_nhwc(x.astype(np.float64), f.astype(np.float64), strides, padding,
                             dilations)
    row = _run(x, f, g, False, (1, 1))
    for split in ((1, 1), (2, 2), (7, 2), (rows, 2)):
        got = _run(x, f, g, True, split)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
        assert np.array_equal(got.view(np.uint32), row.view(np.uint32)), split


@pytest.mark.parametrize("act", [_native.ACT_NONE, _native.ACT_RELU, _native.ACT_RELU6])
@pytest.mark.parametrize("oc", [128, 152])     # 152: 24 channels past the tile columns
def test_the_flat_products_epilogue_matches_the_row_kernel(act: int, oc: int) -> None:
    rng = np.random.default_rng(11)
    xs, fs = (2, 5, 7, 272), (3, 3, 272, oc)      # 70 pixels, K = 2448: ten passes
    x = rng.standard_normal(xs).astype(np.float32)
    f = _frozen((rng.standard_normal(fs) * 0.05).astype(np.float32))
    scale = _frozen(rng.standard_normal(oc).astype(np.float32))
    shift = _frozen(rng.standard_normal(oc).astype(np.float32) * 4)
    res = rng.standard_normal((2, 5, 7, oc)).astype(np.float32)
    g = _conv.conv2d_plan(xs, fs, 4, (1, 1, 1, 1), "SAME").g
    ep = _native.Epilogue(scale, shift, res, act)
    row = _run(x, f, g, False, (1, 1), ep)
    got = _run(x, f, g, True, (3, 2), ep)
    assert np.array_equal(got.view(np.uint32), row.view(np.uint32))
    y = _conv.conv2d_nhwc(x.astype(np.float64), f.astype(np.float64), (1, 1, 1, 1),
                          "SAME") * scale + shift + res
    if act == _native.ACT_RELU:
        y = np.maximum(y, 0)
    elif act == _native.ACT_RELU6:
        y = np.clip(y, 0, 6)
    np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-4 * np.abs(y).max())


def test_the_rule_takes_whole_tile_columns_with_long_enough_segments() -> None:
    def plan(xs: tuple, fs: tuple, stride: int = 1, dil: int = 1):
        p = _conv.conv2d_plan(xs, fs, 4, [1, stride, stride, 1], "SAME", [1, dil, dil, 1])
        return p, _native.flat_conv(p.g, fs[3])

    wide = _native.wide_vectors()
    for xs, fs in [((1, 7, 7, 512), (3, 3, 512, 512)), ((1, 14, 14, 256), (3, 3, 256, 256)),
                   ((1, 56, 56, 64), (1, 1, 64, 256)), ((1, 56, 56, 64), (3, 3, 64, 64)),
                   ((1, 112, 112, 128), (3, 3, 128, 128))]:
        p, flat = plan(xs, fs)
        assert p.native == p.native_fused == wide     # every such layer: the wide tiles
        assert flat == (wide and xs[1] < 112)         # large maps: the row kernel
    # whole tile columns and the channels past them (the row kernel's last pass), but not
    # fewer than one tile column
    assert plan((1, 7, 7, 512), (3, 3, 512, 500))[1] == wide
    assert plan((1, 19, 19, 728), (1, 1, 728, 728))[1] == wide
    assert not plan((1, 7, 7, 512), (3, 3, 512, 48))[1]
    # past FLAT_MAX_PIXELS output pixels a 1x1 window of stride 1, read in place, or rows
    # the row kernel's 6-pixel tiles fill badly (13 columns: 18 computed)
    assert not plan((64, 30, 30, 64), (3, 3, 64, 64))[1]
    assert plan((64, 30, 30, 64), (1, 1, 64, 64))[1] == wide
    assert plan((64, 13, 13, 64), (3, 3, 64, 64))[1] == wide
    assert plan((512, 7, 7, 512), (3, 3, 512, 512))[1] == wide
    # a segment (a row of taps, KW * C; one tap's C when dilated) under 64 values: rows
    assert not plan((1, 224, 224, 3), (3, 3, 3, 64))[1]
    assert not plan((1, 56, 56, 32), (1, 1, 32, 64))[1]
    assert plan((1, 56, 56, 32), (3, 3, 32, 64))[1] == wide       # 3 * 32 = 96
    assert not plan((1, 56, 56, 32), (3, 3, 32, 64), dil=2)[1]    # 32 per tap


def test_a_layer_through_the_kernels_runner_takes_the_flat_product() -> None:
    """The prepared call (a fused node's kept kernel) passes the flat flag: same bits as the
    plain call, which decides it the same way."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 7, 7, 64)).astype(np.float32)
    f = _frozen((rng.standard_normal((3, 3, 64, 128)) * 0.1).astype(np.float32))
    g = _conv.conv2d_plan(x.shape, f.shape, 4, (1, 1, 1, 1), "SAME").g
    prep = _native.prepare_conv(f, g)
    assert prep.flat == _native.flat_conv(g, 128)
    a = _native.runner(prep)(x)
    b = _native.conv2d_prepared(x, prep)
    c = _run(x, f, g, False, (1, 1))
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert np.array_equal(a.view(np.uint32), c.view(np.uint32))
