"""NN kernels against TensorFlow's conformance outputs, hand-computed values and direct-loop
reference formulas over tiny inputs (written here, independent of the kernels)."""

from __future__ import annotations

from pathlib import Path

import checks
import numpy as np
import pytest
from checks import same
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "nn"

f32 = np.float32
i32 = np.int32


def load(name: str) -> np.ndarray:
    return np.load(DATA / f"{name}.npy", allow_pickle=False)


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    checks.close(got, want, rtol, atol)


def conv_attrs(strides=(1, 1, 1, 1), padding="SAME", dilations=(1, 1, 1, 1),
               data_format="NHWC", explicit_paddings=()) -> dict:
    return {"strides": list(strides), "padding": padding, "dilations": list(dilations),
            "data_format": data_format, "explicit_paddings": list(explicit_paddings)}


def rand(shape, seed=0, dtype=f32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------------------------
# Direct-loop references (NHWC). ``pads`` are ((top, bottom), (left, right)), written by hand
# in each test from TensorFlow's documented SAME rule.


def out_size(size, k, stride, dil, before, after):
    return (size + before + after - ((k - 1) * dil + 1)) // stride + 1


def ref_conv(x, w, strides=(1, 1), dil=(1, 1), pads=((0, 0), (0, 0)), depthwise=False):
    n, h, wd, c = x.shape
    kh, kw, fc, oc = w.shape
    oh = out_size(h, kh, strides[0], dil[0], *pads[0])
    ow = out_size(wd, kw, strides[1], dil[1], *pads[1])
    groups = 1 if depthwise else c // fc
    cout = c * oc if depthwise else oc
    out = np.zeros((n, oh, ow, cout), np.float64)
    for b in range(n):
        for y in range(oh):
            for z in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        iy = y * strides[0] + i * dil[0] - pads[0][0]
                        iz = z * strides[1] + j * dil[1] - pads[1][0]
                        if not (0 <= iy < h and 0 <= iz < wd):
                            continue
                        v = x[b, iy, iz].astype(np.float64)
                        if depthwise:
                            out[b, y, z] += (v[:, None] * w[i, j]).reshape(-1)
                            continue
                        for g in range(groups):
                            ocg = oc // groups
                            out[b, y, z, g * ocg:(g + 1) * ocg] += \
                                v[g * fc:(g + 1) * fc] @ w[i, j, :, g * ocg:(g + 1) * ocg]
    return out


def ref_input_grad(x_shape, w, dy, strides, pads):
    """d(sum(conv(x, w) * dy)) / dx, accumulated output position by output position."""
    n, h, wd, c = x_shape
    kh, kw, _, oc = w.shape
    dx = np.zeros(x_shape)
    for b in range(n):
        for y in range(dy.shape[1]):
            for z in range(dy.shape[2]):
                for i in range(kh):
                    for j in range(kw):
                        iy = y * strides[0] + i - pads[0][0]
                        iz = z * strides[1] + j - pads[1][0]
                        if 0 <= iy < h and 0 <= iz < wd:
                            dx[b, iy, iz] += w[i, j] @ dy[b, y, z]
    return dx


def ref_filter_grad(x, w_shape, dy, strides, pads):
    n, h, wd, c = x.shape
    kh, kw, _, oc = w_shape
    dw = np.zeros(w_shape)
    for b in range(n):
        for y in range(dy.shape[1]):
            for z in range(dy.shape[2]):
                for i in range(kh):
                    for j in range(kw):
                        iy = y * strides[0] + i - pads[0][0]
                        iz = z * strides[1] + j - pads[1][0]
                        if 0 <= iy < h and 0 <= iz < wd:
                            dw[i, j] += np.outer(x[b, iy, iz], dy[b, y, z])
    return dw


def ref_pool(x, k, s, pads, kind):
    n, h, wd, c = x.shape
    oh = out_size(h, k[0], s[0], 1, *pads[0])
    ow = out_size(wd, k[1], s[1], 1, *pads[1])
    out = np.zeros((n, oh, ow, c), np.float64)
    for y in range(oh):
        for z in range(ow):
            y0, z0 = y * s[0] - pads[0][0], z * s[1] - pads[1][0]
            win = x[:, max(y0, 0):min(y0 + k[0], h), max(z0, 0):min(z0 + k[1], wd)]
            win = win.reshape(n, win.shape[1] * win.shape[2], c).astype(np.float64)
            out[:, y, z] = win.max(axis=1) if kind == "max" else win.mean(axis=1)
    return out


# ----------------------------------------------------------------------------------------------
# TensorFlow conformance: the "cnn" case's intermediate fetches


BN_PARAMS = [np.array(v, f32) for v in ([1.0, 0.5, 2.0, 1.5], [0.0, 0.1, -0.2, 0.3],
                                        [0.1, -0.2, 0.0, 0.5], [1.0, 2.0, 0.5, 4.0])]


def test_cnn_conv_same_stride1():
    got = invoke("Conv2D", load("cnn_images"), load("cnn_w1"), attrs=conv_attrs())
    close(got, load("cnn_conv1"))


def test_cnn_fused_batch_norm_v3_inference():
    out = invoke("FusedBatchNormV3", load("cnn_conv1"), *BN_PARAMS,
                 attrs={"epsilon": 0.001, "is_training": False, "data_format": "NHWC"})
    assert len(out) == 6
    close(out[0], load("cnn_bn1"))
    # Inference passes the population statistics through.
    same(out[1], BN_PARAMS[2])
    same(out[2], BN_PARAMS[3])
    assert out[5].dtype == f32


def test_cnn_max_pool_valid():
    relu1 = np.maximum(load("cnn_bn1"), 0)
    got = invoke("MaxPool", relu1, attrs={"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                                          "padding": "VALID"})
    close(got, load("cnn_pool1"))


def test_cnn_conv_same_stride2():
    relu1 = np.maximum(load("cnn_bn1"), 0)
    got = invoke("Conv2D", relu1, load("cnn_w3"), attrs=conv_attrs(strides=(1, 2, 2, 1)))
    close(got, load("cnn_conv3"))


def test_cnn_avg_pool_same():
    got = invoke("AvgPool", load("cnn_conv3"), attrs={"ksize": [1, 3, 3, 1],
                                                     "strides": [1, 1, 1, 1],
                                                     "padding": "SAME"})
    close(got, load("cnn_avgpool"))


def test_cnn_conv_valid_then_spatial_mean():
    conv2 = invoke("Conv2D", load("cnn_pool1"), load("cnn_w2"), attrs=conv_attrs(padding="VALID"))
    assert conv2.shape == (2, 2, 2, 6)
    gap = invoke("Mean", invoke("Relu", conv2), np.array([1, 2], i32),
                 attrs={"keep_dims": False})
    close(gap, load("cnn_gap"))


def test_bench_cnn_end_to_end():
    """The bench_cnn graph (8x64x64x3, three SAME convs) reproduces TF's logits and probs.

    BiasAdd and MatMul are not kernels of this family; numpy stands in for them."""
    x = load("bench_cnn_images")
    pool = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    for i in range(3):
        x = invoke("Conv2D", x, load(f"bench_cnn_w{i}"), attrs=conv_attrs())
        x = invoke("Relu", x + load(f"bench_cnn_b{i}"))
        x = invoke("MaxPool", x, attrs=pool)
    gap = invoke("Mean", x, np.array([1, 2], i32), attrs={"keep_dims": False})
    logits = gap @ load("bench_cnn_fc")
    close(logits, load("bench_cnn_logits"))
    close(invoke("Softmax", load("bench_cnn_logits")), load("bench_cnn_probs"))


def test_mlp_softmax_and_log_softmax():
    logits = load("mlp_logits")
    close(invoke("Softmax", logits), load("mlp_probs"), 1e-5, 1e-6)
    close(invoke("LogSoftmax", logits), load("mlp_log_probs"), 1e-5, 1e-6)


@pytest.mark.parametrize("op,name", [("Relu", "relu"), ("Relu6", "relu6"),
                                     ("Softplus", "softplus")])
def test_elementwise_math_activations(op, name):
    close(invoke(op, load("elementwise_x")), load(f"elementwise_{name}"), 1e-5, 1e-6)


# ----------------------------------------------------------------------------------------------
# Conv2D: hand-computed values and direct-loop references


def test_conv2d_hand_valid():
    x = np.arange(1, 10, dtype=f32).reshape(1, 3, 3, 1)
    w = np.ones((2, 2, 1, 1), f32)
    got = invoke("Conv2D", x, w, attrs=conv_attrs(padding="VALID"))
    same(got, np.array([12, 16, 24, 28], f32).reshape(1, 2, 2, 1))


def test_conv2d_hand_same_stride2_pads_after():
    # 3x3 input, 2x2 filter, stride 2: out 2x2, total padding 1, all of it after.
    x = np.arange(1, 10, dtype=f32).reshape(1, 3, 3, 1)
    w = np.ones((2, 2, 1, 1), f32)
    got = invoke("Conv2D", x, w, attrs=conv_attrs(strides=(1, 2, 2, 1)))
    same(got, np.array([1 + 2 + 4 + 5, 3 + 6, 7 + 8, 9], f32).reshape(1, 2, 2, 1))


# (input HxW, filter KHxKW, strides, dilations, padding, explicit, expected pads by hand)
GEOMETRIES = [
    ((7, 6), (3, 3), (2, 2), (1, 1), "SAME", (), ((1, 1), (0, 1))),
    ((7, 6), (3, 3), (2, 2), (1, 1), "VALID", (), ((0, 0), (0, 0))),
    ((5, 5), (2, 2), (2, 2), (1, 1), "SAME", (), ((0, 1), (0, 1))),
    ((5, 4), (4, 1), (3, 1), (1, 1), "SAME", (), ((1, 1), (0, 0))),
    ((8, 7), (3, 2), (1, 1), (2, 3), "SAME", (), ((2, 2), (1, 2))),
    ((8, 7), (3, 2), (2, 1), (2, 2), "VALID", (), ((0, 0), (0, 0))),
    ((5, 6), (3, 3), (2, 1), (1, 1), "EXPLICIT", (0, 0, 2, 1, 0, 3, 0, 0), ((2, 1), (0, 3))),
    ((4, 4), (2, 3), (1, 2), (2, 1), "EXPLICIT", (0, 0, 1, 0, 4, 0, 0, 0), ((1, 0), (4, 0))),
    ((6, 6), (1, 1), (2, 2), (1, 1), "VALID", (), ((0, 0), (0, 0))),
    ((5, 5), (1, 1), (2, 3), (1, 1), "SAME", (), ((0, 0), (0, 0))),
]


@pytest.mark.parametrize("hw,k,s,d,padding,explicit,pads", GEOMETRIES)
@pytest.mark.parametrize("cin", [3, 10])
def test_conv2d_matches_direct_loops(hw, k, s, d, padding, explicit, pads, cin):
    x = rand((2, *hw, cin), seed=1)
    w = rand((*k, cin, 4), seed=2)
    got = invoke("Conv2D", x, w, attrs=conv_attrs((1, *s, 1), padding, (1, *d, 1),
                                                  explicit_paddings=explicit))
    want = ref_conv(x, w, s, d, pads).astype(f32)
    close(got, want, 1e-5, 1e-5)


@pytest.mark.parametrize("hw,k,s,d,padding,explicit,pads", GEOMETRIES[:7])
def test_conv2d_nchw_equals_nhwc_transposed(hw, k, s, d, padding, explicit, pads):
    x = rand((2, *hw, 3), seed=3)
    w = rand((*k, 3, 5), seed=4)
    want = ref_conv(x, w, s, d, pads).astype(f32).transpose(0, 3, 1, 2)
    # strides, dilations and explicit paddings are given in NCHW order
    ex = () if not explicit else tuple(explicit[i] for i in (0, 1, 6, 7, 2, 3, 4, 5))
    got = invoke("Conv2D", x.transpose(0, 3, 1, 2), w,
                 attrs=conv_attrs((1, 1, *s), padding, (1, 1, *d), "NCHW", ex))
    close(got, want, 1e-5, 1e-5)
    assert got.flags["C_CONTIGUOUS"]


def test_conv2d_grouped():
    x = rand((1, 5, 5, 6), seed=5)
    w = rand((3, 3, 2, 9), seed=6)  # 3 groups of 2 input channels -> 3 output channels each
    got = invoke("Conv2D", x, w, attrs=conv_attrs())
    close(got, ref_conv(x, w, pads=((1, 1), (1, 1))).astype(f32), 1e-5, 1e-5)


def test_conv2d_empty_batch_and_empty_output():
    w = rand((3, 3, 3, 4))
    same(invoke("Conv2D", np.zeros((0, 5, 5, 3), f32), w, attrs=conv_attrs()),
         np.zeros((0, 5, 5, 4), f32))
    # VALID with a 2-row input and a 3-row filter: (2 - 3 + 1) // 1 = 0 rows.
    same(invoke("Conv2D", np.ones((1, 2, 5, 3), f32), w, attrs=conv_attrs(padding="VALID")),
         np.zeros((1, 0, 3, 4), f32))
    same(invoke("Conv2D", np.ones((1, 4, 4, 3), f32), np.zeros((3, 3, 3, 0), f32),
                attrs=conv_attrs()), np.zeros((1, 4, 4, 0), f32))


def test_conv2d_negative_output_size_is_an_error():
    with pytest.raises(InvalidArgumentError, match="negative"):
        invoke("Conv2D", np.ones((1, 1, 5, 3), f32), rand((3, 3, 3, 4)),
               attrs=conv_attrs(padding="VALID"))


@pytest.mark.parametrize("dt", [np.float16, np.float64, np.int32])
def test_conv2d_dtypes(dt):
    x = np.arange(2 * 4 * 4 * 2).reshape(2, 4, 4, 2) % 5
    w = (np.arange(3 * 3 * 2 * 3).reshape(3, 3, 2, 3) % 3) - 1
    got = invoke("Conv2D", x.astype(dt), w.astype(dt), attrs=conv_attrs())
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), pads=((1, 1), (1, 1)))
    same(got, want.astype(dt))  # small integers: exact in every dtype


@pytest.mark.parametrize("attrs,msg", [
    (conv_attrs(strides=(2, 1, 1, 1)), "strides"),
    (conv_attrs(strides=(1, 1, 1)), "4 dimensions"),
    (conv_attrs(dilations=(1, 1, 1, 2)), "dilations"),
    (conv_attrs(strides=(1, 0, 1, 1)), "strides"),
    (conv_attrs(padding="EXPLICIT", explicit_paddings=(0, 0, 1, 1)), "8 values"),
    (conv_attrs(padding="EXPLICIT", explicit_paddings=(1, 0, 1, 1, 1, 1, 0, 0)), "batch"),
    (conv_attrs(padding="EXPLICIT", explicit_paddings=(0, 0, -1, 1, 1, 1, 0, 0)),
     "nonnegative"),
    (conv_attrs(padding="SAME", explicit_paddings=(0, 0, 1, 1, 1, 1, 0, 0)), "empty"),
])
def test_conv2d_bad_attrs(attrs, msg):
    with pytest.raises(InvalidArgumentError, match=msg):
        invoke("Conv2D", np.ones((1, 4, 4, 3), f32), np.ones((2, 2, 3, 1), f32), attrs=attrs)


def test_conv2d_bad_shapes():
    with pytest.raises(InvalidArgumentError, match="divisible"):
        invoke("Conv2D", np.ones((1, 4, 4, 3), f32), np.ones((2, 2, 2, 1), f32),
               attrs=conv_attrs())
    with pytest.raises(InvalidArgumentError, match="4-dimensional"):
        invoke("Conv2D", np.ones((4, 4, 3), f32), np.ones((2, 2, 3, 1), f32),
               attrs=conv_attrs())


# ----------------------------------------------------------------------------------------------
# DepthwiseConv2dNative


@pytest.mark.parametrize("s,padding,pads", [((2, 2), "SAME", ((1, 1), (0, 1))),
                                            ((1, 1), "VALID", ((0, 0), (0, 0)))])
def test_depthwise_matches_direct_loops(s, padding, pads):
    x = rand((2, 7, 6, 3), seed=7)
    w = rand((3, 3, 3, 2), seed=8)
    want = ref_conv(x, w, s, (1, 1), pads, depthwise=True).astype(f32)
    got = invoke("DepthwiseConv2dNative", x, w, attrs=conv_attrs((1, *s, 1), padding))
    close(got, want, 1e-5, 1e-5)
    got_nchw = invoke("DepthwiseConv2dNative", x.transpose(0, 3, 1, 2), w,
                      attrs=conv_attrs((1, 1, *s), padding, data_format="NCHW"))
    close(got_nchw, want.transpose(0, 3, 1, 2), 1e-5, 1e-5)


def test_depthwise_hand_and_errors():
    # Channel 0 doubled, channel 1 negated, 1x1 filter: out channels (c0*m0, c0*m1, c1*m0 ...).
    x = np.array([[[[1, 2]]]], f32)
    w = np.array([[[[2, 3], [-1, 0]]]], f32)
    same(invoke("DepthwiseConv2dNative", x, w, attrs=conv_attrs()),
         np.array([[[[2, 3, -2, 0]]]], f32))
    with pytest.raises(InvalidArgumentError, match="same depth"):
        invoke("DepthwiseConv2dNative", x, np.ones((1, 1, 3, 1), f32), attrs=conv_attrs())


# ----------------------------------------------------------------------------------------------
# Conv2DBackpropInput / Conv2DBackpropFilter


GRAD_GEOMS = [
    ((7, 6), (3, 3), (2, 2), "SAME", ((1, 1), (0, 1))),
    ((7, 6), (3, 2), (2, 2), "VALID", ((0, 0), (0, 0))),  # last input row is never read
    ((5, 5), (3, 3), (1, 1), "SAME", ((1, 1), (1, 1))),
]


@pytest.mark.parametrize("hw,k,s,padding,pads", GRAD_GEOMS)
def test_conv2d_backprop_input_matches_loops(hw, k, s, padding, pads):
    w = rand((*k, 3, 4), seed=10)
    oh = out_size(hw[0], k[0], s[0], 1, *pads[0])
    ow = out_size(hw[1], k[1], s[1], 1, *pads[1])
    dy = rand((2, oh, ow, 4), seed=11)
    want = ref_input_grad((2, *hw, 3), w.astype(np.float64), dy.astype(np.float64), s,
                                pads)
    got = invoke("Conv2DBackpropInput", np.array([2, *hw, 3], i32), w, dy,
                 attrs=conv_attrs((1, *s, 1), padding))
    close(got, want.astype(f32), 1e-5, 1e-5)
    # NCHW, with input_sizes in NCHW order
    got = invoke("Conv2DBackpropInput", np.array([2, 3, *hw], i32), w, dy.transpose(0, 3, 1, 2),
                 attrs=conv_attrs((1, 1, *s), padding, data_format="NCHW"))
    close(got, want.astype(f32).transpose(0, 3, 1, 2), 1e-5, 1e-5)


def test_conv2d_backprop_input_spatial_sizes_only():
    w = rand((3, 3, 2, 4), seed=12)
    dy = rand((1, 3, 3, 4), seed=13)
    full = invoke("Conv2DBackpropInput", np.array([1, 5, 5, 2], i32), w, dy,
                  attrs=conv_attrs((1, 2, 2, 1)))
    short = invoke("Conv2DBackpropInput", np.array([5, 5], i32), w, dy,
                   attrs=conv_attrs((1, 2, 2, 1)))
    same(short, full)
    with pytest.raises(InvalidArgumentError, match="out_backprop"):
        invoke("Conv2DBackpropInput", np.array([1, 6, 6, 2], i32), w, dy,
               attrs=conv_attrs((1, 1, 1, 1)))


@pytest.mark.parametrize("hw,k,s,padding,pads", GRAD_GEOMS)
def test_conv2d_backprop_filter_matches_loops(hw, k, s, padding, pads):
    x = rand((2, *hw, 3), seed=14)
    oh = out_size(hw[0], k[0], s[0], 1, *pads[0])
    ow = out_size(hw[1], k[1], s[1], 1, *pads[1])
    dy = rand((2, oh, ow, 4), seed=15)
    want = ref_filter_grad(x.astype(np.float64), (*k, 3, 4), dy.astype(np.float64), s, pads)
    got = invoke("Conv2DBackpropFilter", x, np.array([*k, 3, 4], i32), dy,
                 attrs=conv_attrs((1, *s, 1), padding))
    close(got, want.astype(f32), 1e-5, 1e-5)
    got = invoke("Conv2DBackpropFilter", x.transpose(0, 3, 1, 2), np.array([*k, 3, 4], i32),
                 dy.transpose(0, 3, 1, 2),
                 attrs=conv_attrs((1, 1, *s), padding, data_format="NCHW"))
    close(got, want.astype(f32), 1e-5, 1e-5)


def test_conv2d_backprop_filter_empty_batch():
    got = invoke("Conv2DBackpropFilter", np.zeros((0, 4, 4, 2), f32),
                 np.array([3, 3, 2, 5], i32), np.zeros((0, 4, 4, 5), f32),
                 attrs=conv_attrs())
    same(got, np.zeros((3, 3, 2, 5), f32))


# ----------------------------------------------------------------------------------------------
# Pooling


def pool_attrs(k, s, padding, data_format="NHWC", explicit=()):
    return {"ksize": list(k), "strides": list(s), "padding": padding,
            "data_format": data_format, "explicit_paddings": list(explicit)}


def test_pools_hand_same_edges():
    # 3x3 input, 2x2 window, stride 2, SAME: padding (0, 1) on both axes.
    x = np.arange(1, 10, dtype=f32).reshape(1, 3, 3, 1)
    a = pool_attrs((1, 2, 2, 1), (1, 2, 2, 1), "SAME")
    same(invoke("MaxPool", x, attrs=a), np.array([5, 6, 8, 9], f32).reshape(1, 2, 2, 1))
    # AvgPool divides by the number of real elements: 4, 2, 2 and 1.
    same(invoke("AvgPool", x, attrs=a), np.array([3, 4.5, 7.5, 9], f32).reshape(1, 2, 2, 1))


def test_avg_pool_same_3x3_counts_only_valid_elements():
    x = np.arange(1, 10, dtype=f32).reshape(1, 3, 3, 1)
    got = invoke("AvgPool", x, attrs=pool_attrs((1, 3, 3, 1), (1, 1, 1, 1), "SAME"))
    want = np.array([(1 + 2 + 4 + 5) / 4, (1 + 2 + 3 + 4 + 5 + 6) / 6, (2 + 3 + 5 + 6) / 4,
                     (1 + 2 + 4 + 5 + 7 + 8) / 6, 5, (2 + 3 + 5 + 6 + 8 + 9) / 6,
                     (4 + 5 + 7 + 8) / 4, (4 + 5 + 6 + 7 + 8 + 9) / 6, (5 + 6 + 8 + 9) / 4], f32)
    close(got, want.reshape(1, 3, 3, 1), 1e-6, 1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("hw,k,s,padding,pads", [
    ((7, 6), (3, 3), (2, 2), "SAME", ((1, 1), (0, 1))),
    ((7, 6), (3, 2), (2, 3), "VALID", ((0, 0), (0, 0))),
    ((5, 5), (2, 4), (1, 3), "SAME", ((0, 1), (1, 2))),
])
def test_pools_match_loops_and_nchw(kind, hw, k, s, padding, pads):
    x = rand((2, *hw, 3), seed=16)
    op = "MaxPool" if kind == "max" else "AvgPool"
    want = ref_pool(x, k, s, pads, kind).astype(f32)
    close(invoke(op, x, attrs=pool_attrs((1, *k, 1), (1, *s, 1), padding)), want, 1e-6, 1e-6)
    got = invoke(op, x.transpose(0, 3, 1, 2),
                 attrs=pool_attrs((1, 1, *k), (1, 1, *s), padding, "NCHW"))
    close(got, want.transpose(0, 3, 1, 2), 1e-6, 1e-6)


def test_max_pool_explicit_padding():
    x = rand((1, 4, 5, 2), seed=17)
    a = pool_attrs((1, 2, 2, 1), (1, 2, 2, 1), "EXPLICIT", explicit=(0, 0, 1, 1, 0, 1, 0, 0))
    close(invoke("MaxPool", x, attrs=a), ref_pool(x, (2, 2), (2, 2), ((1, 1), (0, 1)),
                                                  "max").astype(f32))


def test_max_pool_v2_takes_tensors():
    x = rand((1, 5, 5, 2), seed=18)
    got = invoke("MaxPoolV2", x, np.array([1, 3, 3, 1], i32), np.array([1, 2, 2, 1], i32),
                 attrs={"padding": "VALID", "data_format": "NHWC"})
    close(got, ref_pool(x, (3, 3), (2, 2), ((0, 0), (0, 0)), "max").astype(f32))


def test_max_pool_nan_and_ints():
    # a NaN never wins a window (TensorFlow's kernel: acc < x ? x : acc from the lowest
    # finite value; raw_ops_image holds TF's own answers, all-NaN and signed zeros included)
    x = np.array([[1, np.nan], [3, 4]], f32).reshape(1, 2, 2, 1)
    got = invoke("MaxPool", x, attrs=pool_attrs((1, 2, 2, 1), (1, 2, 2, 1), "VALID"))
    assert got.shape == (1, 1, 1, 1) and got.item() == 4
    xi = np.array([[-5, -7], [-9, -6]], np.int8).reshape(1, 2, 2, 1)
    same(invoke("MaxPool", xi, attrs=pool_attrs((1, 2, 2, 1), (1, 1, 1, 1), "SAME")),
         np.array([[-5, -6], [-6, -6]], np.int8).reshape(1, 2, 2, 1))


def test_pools_empty_batch_and_dtype():
    a = pool_attrs((1, 2, 2, 1), (1, 2, 2, 1), "SAME")
    same(invoke("MaxPool", np.zeros((0, 5, 5, 3), f32), attrs=a), np.zeros((0, 3, 3, 3), f32))
    same(invoke("AvgPool", np.zeros((0, 5, 5, 3), f32), attrs=a), np.zeros((0, 3, 3, 3), f32))
    h = invoke("AvgPool", np.ones((1, 3, 3, 1), np.float16), attrs=a)
    same(h, np.ones((1, 2, 2, 1), np.float16))


def test_max_pool_over_depth():
    x = np.array([1, 5, 2, 3, 9, 0], f32).reshape(1, 1, 1, 6)
    got = invoke("MaxPool", x, attrs=pool_attrs((1, 1, 1, 3), (1, 1, 1, 3), "VALID"))
    same(got, np.array([5, 9], f32).reshape(1, 1, 1, 2))


def test_pool_errors():
    x = np.ones((2, 4, 4, 1), f32)
    with pytest.raises(InvalidArgumentError, match="batch"):
        invoke("MaxPool", x, attrs=pool_attrs((2, 2, 2, 1), (1, 1, 1, 1), "VALID"))
    with pytest.raises(InvalidArgumentError, match="4 dimensions"):
        invoke("AvgPool", x, attrs=pool_attrs((2, 2), (1, 1), "VALID"))
    with pytest.raises(InvalidArgumentError, match="negative"):
        invoke("MaxPool", np.ones((1, 1, 1, 1), f32),
               attrs=pool_attrs((1, 3, 3, 1), (1, 1, 1, 1), "VALID"))


# ----------------------------------------------------------------------------------------------
# FusedBatchNorm


def test_batch_norm_inference_by_hand():
    x = np.array([1.0, 3.0, -1.0, 0.5], f32).reshape(1, 2, 1, 2)  # two channels
    scale, offset = np.array([2.0, 1.0], f32), np.array([0.5, -1.0], f32)
    mean, var = np.array([1.0, 0.0], f32), np.array([3.0, 0.25], f32)
    out = invoke("FusedBatchNormV3", x, scale, offset, mean, var,
                 attrs={"epsilon": 1.0, "is_training": False})
    # channel 0: (x - 1) / sqrt(4) * 2 + 0.5; channel 1: x / sqrt(1.25) - 1
    want = np.array([0.5, 3 / np.sqrt(1.25) - 1, -1.5, 0.5 / np.sqrt(1.25) - 1], f32)
    close(out[0], want.reshape(1, 2, 1, 2), 1e-6, 1e-6)
    same(out[1], mean)
    same(out[2], var)
    assert out[5].shape == () and out[5].dtype == f32


def test_batch_norm_training_bessel_and_running_average():
    x = np.array([1, 2, 3, 4], f32).reshape(1, 2, 2, 1)
    ones, zeros = np.ones(1, f32), np.zeros(1, f32)
    out = invoke("FusedBatchNormV3", x, ones, zeros, np.zeros(0, f32), np.zeros(0, f32),
                 attrs={"epsilon": 0.0, "is_training": True})
    close(out[0], ((np.array([1, 2, 3, 4]) - 2.5) / np.sqrt(1.25)).astype(f32).reshape(x.shape),
          1e-6, 1e-6)
    close(out[1], np.array([2.5], f32))
    close(out[2], np.array([5 / 3], f32))  # unbiased: 5 / (4 - 1)
    close(out[3], np.array([2.5], f32))
    close(out[4], np.array([1.25], f32))   # biased variance is what is saved
    avg = invoke("FusedBatchNormV3", x, ones, zeros, np.array([0.5], f32), np.array([1.0], f32),
                 attrs={"epsilon": 0.0, "is_training": True, "exponential_avg_factor": 0.25})
    close(avg[1], np.array([0.75 * 0.5 + 0.25 * 2.5], f32))
    close(avg[2], np.array([0.75 * 1.0 + 0.25 * 5 / 3], f32))


def test_batch_norm_nchw_v1_v2_and_half():
    x = rand((2, 3, 4, 5), seed=19)
    p = [np.abs(rand(3, seed=s)) + 0.5 for s in (20, 21, 22, 23)]
    a = {"epsilon": 0.01, "is_training": False}
    nhwc = invoke("FusedBatchNorm", x.transpose(0, 2, 3, 1), *p, attrs=a)
    assert len(nhwc) == 5
    want = ((x.transpose(0, 2, 3, 1) - p[2]) / np.sqrt(p[3] + 0.01) * p[0] + p[1]).astype(f32)
    close(nhwc[0], want)
    nchw = invoke("FusedBatchNormV2", x, *p, attrs={**a, "data_format": "NCHW"})
    close(nchw[0], want.transpose(0, 3, 1, 2))
    half = invoke("FusedBatchNormV3", x.astype(np.float16), *p, attrs=a | {"data_format": "NCHW"})
    assert half[0].dtype == np.float16 and half[1].dtype == f32
    close(half[0].astype(f32), want.transpose(0, 3, 1, 2), 1e-2, 1e-2)


def test_batch_norm_empty_input_gives_nan_statistics():
    out = invoke("FusedBatchNormV3", np.zeros((0, 2, 2, 3), f32), *[np.ones(3, f32)] * 4,
                 attrs={"is_training": True})
    same(out[0], np.zeros((0, 2, 2, 3), f32))
    assert np.isnan(out[1]).all() and np.isnan(out[2]).all() and out[1].shape == (3,)


def test_batch_norm_errors():
    x = np.ones((1, 2, 2, 3), f32)
    with pytest.raises(InvalidArgumentError, match="scale"):
        invoke("FusedBatchNormV3", x, np.ones(2, f32), *[np.ones(3, f32)] * 3,
               attrs={"is_training": False})
    with pytest.raises(InvalidArgumentError, match="mean"):
        invoke("FusedBatchNormV3", x, *[np.ones(3, f32)] * 2, np.ones(0, f32), np.ones(3, f32),
               attrs={"is_training": False})
    with pytest.raises(InvalidArgumentError, match="4 or 5"):
        invoke("FusedBatchNormV3", np.ones((2, 3), f32), *[np.ones(3, f32)] * 4,
               attrs={"is_training": False})


# ----------------------------------------------------------------------------------------------
# Softmax and activations


def test_softmax_is_stable_and_on_last_axis():
    x = np.array([[1000, 1000], [-1000, 0]], f32)
    same(invoke("Softmax", x), np.array([[0.5, 0.5], [0, 1]], f32))
    same(invoke("LogSoftmax", np.array([1000, 0], f32)), np.array([0, -1000], f32))
    y = invoke("Softmax", rand((2, 3, 4), seed=24))
    close(y.sum(axis=-1), np.ones((2, 3), f32), 1e-6, 1e-6)
    lg = invoke("LogSoftmax", np.array([0, np.log(3)], f32))
    close(lg, np.log(np.array([0.25, 0.75])).astype(f32), 1e-6, 1e-6)
    same(invoke("Softmax", np.zeros((0, 3), f32)), np.zeros((0, 3), f32))
    assert invoke("Softmax", np.ones(3, np.float16)).dtype == np.float16
    with pytest.raises(InvalidArgumentError):
        invoke("Softmax", np.float32(1))


def test_activations_by_hand():
    x = np.array([-2, -0.5, 0, 0.5, 7], f32)
    e = np.exp(np.array([-2, -0.5], np.float64)) - 1
    same(invoke("Relu", x), np.array([0, 0, 0, 0.5, 7], f32))
    same(invoke("Relu6", x), np.array([0, 0, 0, 0.5, 6], f32))
    close(invoke("Elu", x), np.array([e[0], e[1], 0, 0.5, 7], f32), 1e-6, 1e-7)
    sa, sc = 1.6732632423543772, 1.0507009873554805
    close(invoke("Selu", x), np.array([sc * sa * e[0], sc * sa * e[1], 0, sc * 0.5, sc * 7], f32),
          1e-6, 1e-7)
    close(invoke("Softsign", x), np.array([-2 / 3, -1 / 3, 0, 1 / 3, 7 / 8], f32), 1e-6, 1e-7)
    same(invoke("LeakyRelu", x, attrs={"alpha": 0.25}), np.array([-0.5, -0.125, 0, 0.5, 7], f32))
    same(invoke("LeakyRelu", x), (x * np.where(x > 0, 1, f32(0.2))).astype(f32))


def test_softplus_extremes():
    x = np.array([-100, -20, 0, 20, 100, 1e30], f32)
    got = invoke("Softplus", x)
    want = np.array([np.exp(-100), np.exp(-20), np.log(2), 20 + np.log1p(np.exp(-20)), 100, 1e30])
    close(got, want.astype(f32), 1e-6, 0)
    assert np.isfinite(got).all()


def test_relu_family_ints_and_nan():
    same(invoke("Relu", np.array([-3, 4], np.int8)), np.array([0, 4], np.int8))
    same(invoke("Relu6", np.array([-3, 4, 9], i32)), np.array([0, 4, 6], i32))
    same(invoke("Relu", np.array([np.nan, -1], f32)), np.array([np.nan, 0], f32))
    same(invoke("Relu6", np.array([np.nan], f32)), np.array([np.nan], f32))
    assert invoke("Elu", np.ones(2, np.float16)).dtype == np.float16


# ----------------------------------------------------------------------------------------------
# LRN and resizing


def test_lrn_by_hand():
    x = np.array([1, 2, 3], f32).reshape(1, 1, 1, 3)
    got = invoke("LRN", x, attrs={"depth_radius": 1, "bias": 1.0, "alpha": 1.0, "beta": 1.0})
    # squared sums over windows {0,1}, {0,1,2}, {1,2}: 5, 14, 13
    close(got, np.array([1 / 6, 2 / 15, 3 / 14], f32).reshape(1, 1, 1, 3), 1e-6, 1e-7)
    got = invoke("LRN", x, attrs={"depth_radius": 5, "bias": 2.0, "alpha": 0.5, "beta": 0.5})
    close(got, (np.array([1, 2, 3]) / np.sqrt(2 + 0.5 * 14)).astype(f32).reshape(1, 1, 1, 3),
          1e-6, 1e-7)


def resize(op, img, size, align=False, half=False):
    return invoke(op, img, np.array(size, i32),
                  attrs={"align_corners": align, "half_pixel_centers": half})


IMG = np.array([[0, 1], [2, 3]], np.int32).reshape(1, 2, 2, 1)


@pytest.mark.parametrize("align,half,coords", [
    (False, False, [0, 0.5, 1, 1]),        # legacy: i * in/out
    (True, False, [0, 1 / 3, 2 / 3, 1]),   # corners aligned: i * (in-1)/(out-1)
    (False, True, [0, 0.25, 0.75, 1]),     # half-pixel, clamped at the borders
])
def test_resize_bilinear_by_hand(align, half, coords):
    got = resize("ResizeBilinear", IMG, [4, 4], align, half)
    c = np.array(coords)
    want = (2 * c[:, None] + c[None, :]).astype(f32).reshape(1, 4, 4, 1)
    close(got, want, 1e-6, 1e-6)  # int32 images resize to float32


@pytest.mark.parametrize("in_size,out_size,align,half,idx", [
    (3, 2, False, False, [0, 1]),
    (3, 2, False, True, [0, 2]),
    (3, 2, True, False, [0, 2]),
    (4, 3, True, False, [0, 2, 3]),   # 1.5 rounds away from zero
    (4, 3, False, False, [0, 1, 2]),
    (4, 3, False, True, [0, 2, 3]),
    (2, 5, False, True, [0, 0, 1, 1, 1]),
])
def test_resize_nearest_by_hand(in_size, out_size, align, half, idx):
    img = np.arange(in_size * in_size, dtype=np.uint8).reshape(1, in_size, in_size, 1)
    got = resize("ResizeNearestNeighbor", img, [out_size, out_size], align, half)
    same(got, img[:, idx][:, :, idx])


def test_resize_errors():
    with pytest.raises(InvalidArgumentError, match="half_pixel_centers"):
        resize("ResizeBilinear", IMG, [3, 3], True, True)
    with pytest.raises(InvalidArgumentError, match="positive"):
        resize("ResizeNearestNeighbor", IMG, [0, 3])
    with pytest.raises(InvalidArgumentError, match="2 elements"):
        resize("ResizeBilinear", IMG, [3, 3, 3])


# ----------------------------------------------------------------------------------------------
# Randomised geometry: Conv2D, DepthwiseConv2dNative and pools against the direct loops


def tf_same_pads(size, k, stride, dil):
    """TensorFlow's documented SAME rule: ceil(size/stride) outputs, extra padding after."""
    eff = (k - 1) * dil + 1
    out = -(-size // stride)
    need = max(0, (out - 1) * stride + eff - size)
    return need // 2, need - need // 2


geometry = st.fixed_dictionaries({
    "n": st.integers(0, 2), "h": st.integers(1, 7), "w": st.integers(1, 7),
    "c": st.integers(1, 4), "kh": st.integers(1, 4), "kw": st.integers(1, 4),
    "sh": st.integers(1, 3), "sw": st.integers(1, 3), "dh": st.integers(1, 2),
    "dw": st.integers(1, 2), "padding": st.sampled_from(["SAME", "VALID", "EXPLICIT"]),
    "pads": st.tuples(*[st.integers(0, 3)] * 4), "nchw": st.booleans(),
})


def _pads_for(g, dil=True):
    dh, dw = (g["dh"], g["dw"]) if dil else (1, 1)
    if g["padding"] == "SAME":
        return (tf_same_pads(g["h"], g["kh"], g["sh"], dh),
                tf_same_pads(g["w"], g["kw"], g["sw"], dw))
    if g["padding"] == "EXPLICIT":
        return (g["pads"][0], g["pads"][1]), (g["pads"][2], g["pads"][3])
    return (0, 0), (0, 0)


def _layout_attrs(g, pads, dil=True):
    d = (g["dh"], g["dw"]) if dil else (1, 1)
    if g["nchw"]:
        ex = (0, 0, 0, 0, *pads[0], *pads[1]) if g["padding"] == "EXPLICIT" else ()
        return conv_attrs((1, 1, g["sh"], g["sw"]), g["padding"], (1, 1, *d), "NCHW", ex)
    ex = (0, 0, *pads[0], *pads[1], 0, 0) if g["padding"] == "EXPLICIT" else ()
    return conv_attrs((1, g["sh"], g["sw"], 1), g["padding"], (1, *d, 1), "NHWC", ex)


def _feasible(g, pads, dil=True):
    dh, dw = (g["dh"], g["dw"]) if dil else (1, 1)
    return (g["h"] + sum(pads[0]) >= (g["kh"] - 1) * dh + 1
            and g["w"] + sum(pads[1]) >= (g["kw"] - 1) * dw + 1)


@settings(max_examples=80, deadline=None)
@given(g=geometry, depthwise=st.booleans())
def test_conv_random_geometry(g, depthwise):
    pads = _pads_for(g)
    assume(_feasible(g, pads))
    x = rand((g["n"], g["h"], g["w"], g["c"]), seed=g["h"] * 7 + g["w"])
    w = rand((g["kh"], g["kw"], g["c"], 2), seed=g["kh"] * 5 + g["kw"])
    want = ref_conv(x, w, (g["sh"], g["sw"]), (g["dh"], g["dw"]), pads, depthwise).astype(f32)
    xin = x.transpose(0, 3, 1, 2) if g["nchw"] else x
    got = invoke("DepthwiseConv2dNative" if depthwise else "Conv2D", xin, w,
                 attrs=_layout_attrs(g, pads))
    close(got, want.transpose(0, 3, 1, 2) if g["nchw"] else want, 1e-5, 1e-5)


@settings(max_examples=60, deadline=None)
@given(g=geometry, kind=st.sampled_from(["max", "avg"]))
def test_pool_random_geometry(g, kind):
    if kind == "avg" and g["padding"] == "EXPLICIT":
        g = {**g, "padding": "SAME"}  # AvgPool has no EXPLICIT padding
    pads = _pads_for(g, dil=False)
    assume(_feasible(g, pads, dil=False))
    # a window made only of padding has no elements: not a case TF pools over
    assume(max(pads[0]) < g["kh"] and max(pads[1]) < g["kw"])
    x = rand((g["n"], g["h"], g["w"], g["c"]), seed=g["c"] + 11)
    want = ref_pool(x, (g["kh"], g["kw"]), (g["sh"], g["sw"]), pads, kind).astype(f32)
    a = _layout_attrs(g, pads, dil=False)
    k = (1, 1, g["kh"], g["kw"]) if g["nchw"] else (1, g["kh"], g["kw"], 1)
    attrs = {"ksize": list(k), "strides": a["strides"], "padding": a["padding"],
             "data_format": a["data_format"]}
    if kind == "max":
        attrs["explicit_paddings"] = a["explicit_paddings"]
    got = invoke("MaxPool" if kind == "max" else "AvgPool",
                 x.transpose(0, 3, 1, 2) if g["nchw"] else x, attrs=attrs)
    close(got, want.transpose(0, 3, 1, 2) if g["nchw"] else want, 1e-5, 1e-6)
