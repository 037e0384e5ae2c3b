"""Gradient kernels: expected values are hand-computed or TensorFlow's own conformance outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

CONFORMANCE = Path("/work/shared/conformance")


def bga(s0, s1, dtype=np.int32):
    r0, r1 = invoke("BroadcastGradientArgs", np.array(s0, dtype), np.array(s1, dtype))
    return r0, r1


# --- BroadcastGradientArgs ------------------------------------------------------------------

@pytest.mark.parametrize("s0,s1,r0,r1", [
    ([2, 3, 1], [3, 5], [2], [0]),          # rank mismatch + size-1 dims on both sides
    ([3, 5], [2, 3, 1], [0], [2]),
    ([2, 3], [2, 3], [], []),               # identical: nothing to reduce
    ([2, 1], [2, 1], [], []),               # identical, even with size-1 dims
    ([2, 1], [1], [1], [0, 1]),             # an all-ones axis is reduced for both
    ([1, 1], [1], [0, 1], [0, 1]),
    ([], [4, 5], [0, 1], []),               # scalar against a matrix
    ([4, 5], [], [], [0, 1]),
    ([3, 2], [3, 1], [], [1]),              # the conformance case's z = h * col
    ([0], [1], [], [0]),                    # size 0 broadcasts against 1
    ([5, 1, 3], [1, 4, 1], [1], [0, 2]),
])
def test_broadcast_gradient_args(s0, s1, r0, r1):
    g0, g1 = bga(s0, s1)
    assert g0.dtype == np.int32 and g1.dtype == np.int32
    assert g0.tolist() == r0 and g1.tolist() == r1


def test_broadcast_gradient_args_int64():
    g0, g1 = bga([2, 3, 1], [3, 5], np.int64)
    assert g0.dtype == np.int64 and g1.dtype == np.int64
    assert g0.tolist() == [2] and g1.tolist() == [0]


def test_broadcast_gradient_args_errors():
    with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes: \[2,3\] vs. \[4\]"):
        bga([2, 3], [4])
    with pytest.raises(InvalidArgumentError, match="must be a vector"):
        invoke("BroadcastGradientArgs", np.array(3, np.int32), np.array([3], np.int32))


# --- activation gradients --------------------------------------------------------------------

F = np.float32


def test_relu_grad():
    g = np.array([1.0, 2.0, 3.0, np.inf], F)
    f = np.array([-1.0, 0.0, 0.5, -2.0], F)
    out = invoke("ReluGrad", g, f)
    # zero feature gets no gradient; inf * 0 is nan (TF multiplies by the mask)
    np.testing.assert_array_equal(out[:3], np.array([0.0, 0.0, 3.0], F))
    assert np.isnan(out[3])
    assert out.dtype == F


def test_relu_grad_int():
    out = invoke("ReluGrad", np.array([5, 6], np.int32), np.array([1, -1], np.int32))
    assert out.tolist() == [5, 0] and out.dtype == np.int32


def test_relu6_grad():
    g = np.array([1, 2, 3, 4, 5], F)
    f = np.array([-1, 0, 3, 6, 7], F)
    np.testing.assert_array_equal(invoke("Relu6Grad", g, f), np.array([0, 0, 3, 0, 0], F))


def test_leaky_relu_grad():
    g = np.array([10, 10, 10], F)
    f = np.array([-1, 0, 2], F)
    np.testing.assert_allclose(invoke("LeakyReluGrad", g, f, attrs={"alpha": 0.25}),
                               [2.5, 2.5, 10])
    np.testing.assert_allclose(invoke("LeakyReluGrad", g, f), [2.0, 2.0, 10])  # default 0.2


def test_elu_grad():
    g = np.array([2, 2, 2], F)
    y = np.array([-0.5, 0.0, 1.5], F)  # outputs of Elu
    np.testing.assert_allclose(invoke("EluGrad", g, y), [2 * 0.5, 2, 2])


def test_selu_grad():
    scale, scale_alpha = 1.0507009873554805, 1.7580993408473766
    g = np.array([2, 3], np.float64)
    y = np.array([-1.0, 4.0], np.float64)
    np.testing.assert_allclose(invoke("SeluGrad", g, y),
                               [2 * (-1 + scale_alpha), 3 * scale], rtol=1e-15)


def test_softplus_grad():
    g = np.array([1, 4, 2, 3], F)
    f = np.array([0, np.log(3), -200, 200], F)
    # g * sigmoid(f): sigmoid(0)=1/2, sigmoid(ln 3)=3/4; exp overflow gives 0 and 1
    np.testing.assert_allclose(invoke("SoftplusGrad", g, f), [0.5, 3.0, 0.0, 3.0], rtol=1e-6)


def test_softsign_grad():
    g = np.array([9, 8], F)
    f = np.array([2, -1], F)
    np.testing.assert_allclose(invoke("SoftsignGrad", g, f), [9 / 9, 8 / 4])


def test_activation_grad_shape_mismatch():
    with pytest.raises(InvalidArgumentError, match="same size"):
        invoke("ReluGrad", np.ones(3, F), np.ones(2, F))


# --- (y, dy) gradients -----------------------------------------------------------------------

def test_tanh_grad():
    y = np.array([0.0, 0.5, -0.5, 1.0], F)
    dy = np.array([2.0, 4.0, 1.0, 3.0], F)
    np.testing.assert_array_equal(invoke("TanhGrad", y, dy), np.array([2.0, 3.0, 0.75, 0.0], F))


def test_tanh_grad_shape_mismatch():
    with pytest.raises(InvalidArgumentError, match="same size and shape"):
        invoke("TanhGrad", np.ones((2, 2), F), np.ones(4, F))


def test_sigmoid_grad():
    y = np.array([0.5, 0.25], F)
    dy = np.array([4.0, 16.0], F)
    np.testing.assert_array_equal(invoke("SigmoidGrad", y, dy), np.array([1.0, 3.0], F))


def test_sqrt_grad():
    y = np.array([2.0, 0.5, 0.0, 0.0], F)       # y = sqrt(x)
    dy = np.array([8.0, 1.0, 0.0, 1.0], F)
    out = invoke("SqrtGrad", y, dy)
    # dy / (2y); a zero dy gives exactly 0 even where y == 0
    np.testing.assert_array_equal(out, np.array([2.0, 1.0, 0.0, np.inf], F))


def test_rsqrt_grad():
    y = np.array([2.0, 0.5, np.inf], F)          # y = 1/sqrt(x)
    dy = np.array([1.0, 4.0, 0.0], F)
    # -0.5 * dy * y^3
    np.testing.assert_array_equal(invoke("RsqrtGrad", y, dy), np.array([-4.0, -0.25, 0.0], F))


@pytest.mark.parametrize("op", ["ReciprocalGrad", "InvGrad"])
def test_reciprocal_grad(op):
    y = np.array([2.0, -0.5, np.inf], F)
    dy = np.array([3.0, 8.0, 0.0], F)
    # -dy * y^2; zero dy gives 0 even for infinite y
    np.testing.assert_array_equal(invoke(op, y, dy), np.array([-12.0, -2.0, 0.0], F))


def test_reciprocal_grad_complex_conjugates():
    y = np.array([1j], np.complex64)
    dy = np.array([1.0], np.complex64)
    # -conj(y)^2 * dy = -(-j)^2 = 1
    np.testing.assert_allclose(invoke("ReciprocalGrad", y, dy), [1.0 + 0j])


def test_half_precision_keeps_dtype():
    y = np.array([0.5], np.float16)
    out = invoke("TanhGrad", y, np.array([1.0], np.float16))
    assert out.dtype == np.float16 and out[0] == np.float16(0.75)


# --- BiasAddGrad -----------------------------------------------------------------------------

def test_bias_add_grad_nhwc():
    g = np.arange(24, dtype=F).reshape(2, 3, 4)
    expect = [sum(g[i, j, c] for i in range(2) for j in range(3)) for c in range(4)]
    np.testing.assert_array_equal(invoke("BiasAddGrad", g), np.array(expect, F))


def test_bias_add_grad_nchw():
    g = np.arange(24, dtype=F).reshape(2, 3, 4)   # channels on axis 1
    out = invoke("BiasAddGrad", g, attrs={"data_format": "NCHW"})
    expect = [sum(g[i, c, k] for i in range(2) for k in range(4)) for c in range(3)]
    np.testing.assert_array_equal(out, np.array(expect, F))


def test_bias_add_grad_matrix_and_errors():
    np.testing.assert_array_equal(invoke("BiasAddGrad", np.array([[1, 2], [3, 4]], F)),
                                  np.array([4, 6], F))
    with pytest.raises(InvalidArgumentError, match="at least 2D"):
        invoke("BiasAddGrad", np.ones(3, F))


# --- pooling gradients -----------------------------------------------------------------------

def pool_attrs(k, s, padding="VALID", data_format="NHWC"):
    if data_format == "NHWC":
        return {"ksize": [1, k[0], k[1], 1], "strides": [1, s[0], s[1], 1],
                "padding": padding, "data_format": data_format}
    return {"ksize": [1, 1, k[0], k[1]], "strides": [1, 1, s[0], s[1]],
            "padding": padding, "data_format": data_format}


def nhwc(a):
    return np.array(a, F)[None, :, :, None]


def max_pool_grad(x, grad, attrs):
    out_dummy = np.zeros_like(grad)  # TF's CPU kernel recomputes the max from orig_input
    return invoke("MaxPoolGrad", x, out_dummy, grad, attrs=attrs)


def test_max_pool_grad_valid():
    x = nhwc(np.arange(1, 17).reshape(4, 4))
    out = max_pool_grad(x, nhwc([[10, 20], [30, 40]]), pool_attrs((2, 2), (2, 2)))
    expect = np.zeros((4, 4), F)
    expect[1, 1], expect[1, 3], expect[3, 1], expect[3, 3] = 10, 20, 30, 40
    np.testing.assert_array_equal(out[0, :, :, 0], expect)


def test_max_pool_grad_ties_take_first_and_overlaps_accumulate():
    ties = max_pool_grad(nhwc(np.ones((2, 2))), nhwc([[7]]), pool_attrs((2, 2), (2, 2)))
    np.testing.assert_array_equal(ties[0, :, :, 0], [[7, 0], [0, 0]])
    both = max_pool_grad(nhwc([[1, 5, 2]]), nhwc([[1, 2]]), pool_attrs((1, 2), (1, 1)))
    np.testing.assert_array_equal(both[0, :, :, 0], [[0, 3, 0]])
    split = max_pool_grad(nhwc([[3, 1, 3]]), nhwc([[1, 2]]), pool_attrs((1, 2), (1, 1)))
    np.testing.assert_array_equal(split[0, :, :, 0], [[1, 0, 2]])


def test_max_pool_grad_same_padding_never_selects_padding():
    x = nhwc(np.arange(1, 10).reshape(3, 3))
    out = max_pool_grad(x, nhwc([[1, 2], [3, 4]]), pool_attrs((2, 2), (2, 2), "SAME"))
    np.testing.assert_array_equal(out[0, :, :, 0], [[0, 0, 0], [0, 1, 2], [0, 3, 4]])
    neg = max_pool_grad(nhwc(-np.ones((3, 3))), nhwc([[1, 2], [3, 4]]),
                        pool_attrs((2, 2), (2, 2), "SAME"))
    # all equal: each window's first in-bounds element; the corner window has only (2,2)
    np.testing.assert_array_equal(neg[0, :, :, 0], [[1, 0, 2], [0, 0, 0], [3, 0, 4]])


def test_max_pool_grad_nchw_and_channels():
    x = np.zeros((1, 2, 2, 2), F)   # NHWC, two channels with different maxima
    x[0, 0, 1, 0] = 5
    x[0, 1, 0, 1] = 5
    g = np.array([[[[1, 2]]]], F)
    out = max_pool_grad(x, g, pool_attrs((2, 2), (2, 2)))
    assert out[0, 0, 1, 0] == 1 and out[0, 1, 0, 1] == 2 and out.sum() == 3
    out_nchw = max_pool_grad(x.transpose(0, 3, 1, 2), g.transpose(0, 3, 1, 2),
                             pool_attrs((2, 2), (2, 2), data_format="NCHW"))
    np.testing.assert_array_equal(out_nchw, out.transpose(0, 3, 1, 2))


def test_max_pool_grad_errors():
    x = nhwc(np.ones((4, 4)))
    with pytest.raises(InvalidArgumentError, match="Expected grad shape"):
        max_pool_grad(x, nhwc(np.ones((3, 3))), pool_attrs((2, 2), (2, 2)))
    with pytest.raises(UnimplementedError):
        max_pool_grad(x, nhwc(np.ones((2, 2))),
                      {"ksize": [2, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"})


def test_avg_pool_grad_same_counts_only_inside_cells():
    out = invoke("AvgPoolGrad", np.array([1, 3, 3, 1], np.int32), nhwc([[4, 2], [6, 5]]),
                 attrs=pool_attrs((2, 2), (2, 2), "SAME"))
    np.testing.assert_array_equal(out[0, :, :, 0], [[1, 1, 1], [1, 1, 1], [3, 3, 5]])


def test_avg_pool_grad_overlapping_and_nchw():
    out = invoke("AvgPoolGrad", np.array([1, 1, 3, 1], np.int32), nhwc([[2, 4]]),
                 attrs=pool_attrs((1, 2), (1, 1)))
    np.testing.assert_array_equal(out[0, :, :, 0], [[1, 3, 2]])
    out_nchw = invoke("AvgPoolGrad", np.array([1, 1, 1, 3], np.int32),
                      np.array([[[[2, 4]]]], F),
                      attrs=pool_attrs((1, 2), (1, 1), data_format="NCHW"))
    np.testing.assert_array_equal(out_nchw, [[[[1, 3, 2]]]])


# --- FusedBatchNormGrad ----------------------------------------------------------------------

def test_fused_batch_norm_grad_v3_inference():
    x = np.array([1, 2, 3, 4], F).reshape(1, 1, 2, 2)       # rows [1,2] and [3,4]
    dy = np.array([1, 1, 2, -1], F).reshape(1, 1, 2, 2)
    scale, mean, var = np.array([2, 3], F), np.array([1, 2], F), np.array([3, 0], F)
    outs = invoke("FusedBatchNormGradV3", dy, x, scale, mean, var, np.zeros(0, F),
                  attrs={"epsilon": 1.0, "is_training": False})
    x_bp, scale_bp, offset_bp, r4, r5 = outs
    # rsqrt(var + 1) = [0.5, 1]; x_bp = dy * scale * rsqrt
    np.testing.assert_array_equal(x_bp.reshape(2, 2), [[1, 3], [2, -3]])
    np.testing.assert_array_equal(scale_bp, [2, -2])     # sum(dy * (x - mean)) * rsqrt
    np.testing.assert_array_equal(offset_bp, [3, 0])     # sum(dy)
    assert r4.shape == (0,) and r5.shape == (0,) and r4.dtype == np.float32


def textbook_bn_backward(x, dy, scale, eps):
    """Standard batch-norm backward with batch statistics, in float64 (N, C layout)."""
    n = x.shape[0]
    mu = x.mean(0)
    var = x.var(0)
    inv = 1 / np.sqrt(var + eps)
    xhat = (x - mu) * inv
    dx = scale * inv / n * (n * dy - dy.sum(0) - xhat * (dy * xhat).sum(0))
    return dx, (dy * xhat).sum(0), dy.sum(0), mu, var


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_fused_batch_norm_grad_training(data_format):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 3, 4)).astype(F)     # NHWC
    dy = rng.normal(size=(2, 3, 3, 4)).astype(F)
    scale = rng.normal(size=4).astype(F)
    flat_x = x.reshape(-1, 4).astype(np.float64)
    dx, dscale, doffset, mu, var = textbook_bn_backward(
        flat_x, dy.reshape(-1, 4).astype(np.float64), scale.astype(np.float64), 0.001)
    xin, dyin = x, dy
    if data_format == "NCHW":
        xin, dyin = x.transpose(0, 3, 1, 2), dy.transpose(0, 3, 1, 2)
    x_bp, s_bp, o_bp, _, _ = invoke(
        "FusedBatchNormGradV3", dyin, xin, scale, mu.astype(F), var.astype(F), np.zeros(0, F),
        attrs={"epsilon": 0.001, "is_training": True, "data_format": data_format})
    if data_format == "NCHW":
        x_bp = x_bp.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(x_bp.reshape(-1, 4), dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(s_bp, dscale, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(o_bp, doffset, rtol=1e-5, atol=1e-5)


def test_fused_batch_norm_grad_v2_has_five_outputs():
    x = np.ones((1, 1, 1, 2), F)
    outs = invoke("FusedBatchNormGradV2", x, x, np.ones(2, F), np.ones(2, F), np.ones(2, F),
                  attrs={"is_training": False})
    assert len(outs) == 5


# --- TensorFlow's gradients conformance case, replayed ---------------------------------------

@pytest.mark.skipif(not (CONFORMANCE / "gradients").is_dir(), reason="no conformance data")
def test_gradients_conformance_case():
    """Replay tf.gradients' graph: BroadcastGradientArgs and TanhGrad through our kernels,
    plain math with numpy; compare with what TensorFlow fetched."""
    case = CONFORMANCE / "gradients"
    step = json.loads((case / "case.json").read_text())["steps"][0]
    feed = {k.split(":")[0]: np.load(case / v) for k, v in step["feed"].items()}
    want = {k: np.load(case / v) for k, v in step["expect"].items()}
    x, w, b, col, t = (feed[k] for k in ("x", "w", "b", "col", "t"))

    h = np.tanh(x @ w + b)
    z = h * col
    sub = z - t
    mean_grad = np.full(sub.shape, 1, F) / F(sub.size)
    sq_grad = mean_grad * (sub * F(2))

    r0, r1 = bga(z.shape, t.shape)
    sub_grad = np.sum(sq_grad, axis=tuple(r0)).reshape(z.shape)
    r0, r1 = bga(h.shape, col.shape)
    z_grad_h = np.sum(sub_grad * col, axis=tuple(r0)).reshape(h.shape)
    z_grad_col = np.sum(h * sub_grad, axis=tuple(r1)).reshape(col.shape)
    tanh_grad = invoke("TanhGrad", h, z_grad_h)
    add_grad_b = np.sum(tanh_grad, axis=0).reshape(b.shape)
    matmul_grad_x = tanh_grad @ w.T
    w_grad = F(0.1) * w + F(0.1) * w + x.T @ tanh_grad

    def close(name, got):
        ref = want[name]
        assert got.dtype == ref.dtype and got.shape == ref.shape, name
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=name)

    close("grads/z_grad/Reshape_1:0", z_grad_col)
    close("grads/add_grad/Reshape:0", add_grad_b)
    close("grads/MatMul_grad/MatMul:0", matmul_grad_x)
    close("grads/AddN:0", w_grad)


def test_max_pool_grad_v2_takes_window_as_inputs():
    x = nhwc(np.arange(1, 17).reshape(4, 4))
    out = invoke("MaxPoolGradV2", x, np.zeros((1, 2, 2, 1), F), nhwc([[10, 20], [30, 40]]),
                 np.array([1, 2, 2, 1], np.int32), np.array([1, 2, 2, 1], np.int32),
                 attrs={"padding": "VALID"})
    assert out[0, 1, 1, 0] == 10 and out[0, 3, 3, 0] == 40 and out.sum() == 100


def naive_pool_grads(x, g, k, s, padding):
    """Straight loops over windows (TF's documented pooling rules), one image, one channel."""
    h, w = x.shape
    if padding == "VALID":
        oh, ow, top, left = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1, 0, 0
    else:
        oh, ow = -(-h // s[0]), -(-w // s[1])
        top = max((oh - 1) * s[0] + k[0] - h, 0) // 2
        left = max((ow - 1) * s[1] + k[1] - w, 0) // 2
    mx = np.zeros((h, w), np.float64)
    av = np.zeros((h, w), np.float64)
    for i in range(oh):
        for j in range(ow):
            cells = [(r, c) for r in range(i * s[0] - top, i * s[0] - top + k[0])
                     for c in range(j * s[1] - left, j * s[1] - left + k[1])
                     if 0 <= r < h and 0 <= c < w]
            best = cells[0]
            for cell in cells[1:]:
                if x[best] < x[cell]:       # strictly greater replaces: ties keep the first
                    best = cell
            mx[best] += g[i, j]
            for cell in cells:
                av[cell] += g[i, j] / len(cells)
    return mx, av


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("k,s", [((2, 2), (2, 2)), ((3, 3), (1, 1)), ((3, 2), (2, 3)),
                                 ((1, 1), (2, 2))])
def test_pool_grads_match_naive_loops(padding, k, s):
    rng = np.random.default_rng([len(padding), *k, *s])
    x = rng.integers(0, 4, size=(5, 7)).astype(F)     # small ints: plenty of ties
    h, w = x.shape
    if padding == "VALID":
        oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    else:
        oh, ow = -(-h // s[0]), -(-w // s[1])
    g = rng.integers(1, 9, size=(oh, ow)).astype(F)
    mx, av = naive_pool_grads(x, g, k, s, padding)
    attrs = pool_attrs(k, s, padding)
    got_mx = max_pool_grad(nhwc(x), nhwc(g), attrs)[0, :, :, 0]
    got_av = invoke("AvgPoolGrad", np.array([1, h, w, 1], np.int32), nhwc(g),
                    attrs=attrs)[0, :, :, 0]
    np.testing.assert_array_equal(got_mx, mx)
    np.testing.assert_allclose(got_av, av, rtol=1e-6)
