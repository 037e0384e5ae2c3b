"""A convolution node keeps its plan in its context (``KernelContext.memo``) across runs: a
node whose input shapes change between runs must be planned again, and a fused convolution's
memo must not be taken for the plain convolution's it falls back to. Expected values: direct
float64 evaluation of the definitions (tests/test_conv_kernels_fast.py's references)."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor import kernel_call
from tests.test_conv_kernels_fast import _attrs, _ref_conv, _ref_depthwise

rng = np.random.default_rng(11)


def _node(op: str, attrs: dict) -> tuple:
    k = kernel_call.bind_op(op, attrs)
    return k, kernel_call.context(k)     # one context for every run, as a plan's node has


def _run(node: tuple, *args: np.ndarray) -> np.ndarray:
    k, ctx = node
    out = kernel_call.call(k, list(args), ctx)    # bound by op name: the kernel's result
    return out if isinstance(out, np.ndarray) else out[0]


def _nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("native", ["0", ""])
@pytest.mark.parametrize("ks", [1, 3])
def test_a_conv_node_replans_when_its_input_shapes_change(ks, native, monkeypatch) -> None:
    monkeypatch.setenv("DFG_NATIVE", native)
    a = {**_attrs((1, 1)), "T": np.dtype(np.float32)}
    node = _node("Conv2D", a)
    f = rng.standard_normal((ks, ks, 6, 5)).astype(np.float32)
    shapes = [(2, 9, 9, 6), (1, 4, 7, 6), (2, 9, 9, 6), (3, 1, 1, 6)]
    for xs in shapes:
        x = rng.standard_normal(xs).astype(np.float32)
        got = _run(node, x, f)
        np.testing.assert_allclose(got, _ref_conv(x, f), rtol=1e-4, atol=1e-4)
    # a new filter shape too
    f2 = rng.standard_normal((ks, ks, 6, 3)).astype(np.float32)
    x = rng.standard_normal((2, 9, 9, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(node, x, f2), _ref_conv(x, f2), rtol=1e-4, atol=1e-4)
    # and a new dtype: float64 in, float64 out
    x64, f64 = x.astype(np.float64), f.astype(np.float64)
    got = _run(_node("Conv2D", {**a, "T": np.dtype(np.float64)}), x64, f64)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _ref_conv(x64, f64), rtol=1e-10)


@pytest.mark.parametrize("native", ["0", ""])
def test_a_depthwise_node_replans_when_its_input_shapes_change(native, monkeypatch) -> None:
    monkeypatch.setenv("DFG_NATIVE", native)
    node = _node("DepthwiseConv2dNative", {**_attrs((1, 1)), "T": np.dtype(np.float32)})
    for xs, mult in [((2, 8, 8, 4), 1), ((1, 5, 3, 4), 1), ((2, 8, 8, 4), 2)]:
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal((3, 3, 4, mult)).astype(np.float32)
        np.testing.assert_allclose(_run(node, x, f), _ref_depthwise(x, f), rtol=1e-4,
                                   atol=1e-4)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("ks", [1, 3])
def test_a_fused_conv_node_replans_and_keeps_its_epilogue(ks, fmt) -> None:
    """_FusedConv2D (BiasAdd, Relu; then BiasAdd, Add) over changing shapes: the 1x1 path
    (matmul, bias, activation in place) and the general one, in both formats (NCHW takes the
    plain Conv2D kernel with the same context)."""
    base = {**_attrs((1, 1), fmt=fmt), "T": np.dtype(np.float32), "num_args": 1,
            "fused_ops": ["BiasAdd", "Relu"], "epsilon": 0.0}
    relu = _node("_FusedConv2D", base)
    add = _node("_FusedConv2D", {**base, "num_args": 2, "fused_ops": ["BiasAdd", "Add"]})
    f = rng.standard_normal((ks, ks, 6, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for xs in [(2, 7, 7, 6), (1, 3, 5, 6), (2, 7, 7, 6)]:
        x = rng.standard_normal(xs).astype(np.float32)
        conv = _ref_conv(x, f) + b
        xin = x if fmt == "NHWC" else _nchw(x)
        got = _run(relu, xin, f, b)
        if fmt == "NCHW":
            got = got.transpose(0, 2, 3, 1)
        np.testing.assert_allclose(got, np.maximum(conv, 0), rtol=1e-4, atol=1e-4)
        res = rng.standard_normal(conv.shape).astype(np.float32)
        got = _run(add, xin, f, b, res if fmt == "NHWC" else _nchw(res))
        if fmt == "NCHW":
            got = got.transpose(0, 2, 3, 1)
        np.testing.assert_allclose(got, conv + res, rtol=1e-4, atol=1e-4)


def test_the_1x1_fused_path_gives_the_bits_of_the_general_epilogue() -> None:
    """The 1x1 fast path (matmul, bias and Relu in place) against the same kernel with the
    fast path unavailable (a bias of another shape would fail; a float64 bias given as a
    list is taken through _epilogue): same bits."""
    f = rng.standard_normal((1, 1, 16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    x = rng.standard_normal((2, 5, 5, 16)).astype(np.float32)
    x[0, 0, 0, :] = np.nan
    a = {**_attrs((1, 1)), "T": np.dtype(np.float32), "num_args": 1,
         "fused_ops": ["BiasAdd", "Relu"]}
    fast = _run(_node("_FusedConv2D", a), x, f, b)
    k, ctx = _node("_FusedConv2D", a)
    from dfg.executor.kernels import fused

    general = fused._epilogue(ctx, _ref_plain(x, f), (b,), "BiasAdd", False, "Relu")
    np.testing.assert_array_equal(fast, general)
    assert np.isnan(fast[0, 0, 0]).all()


def _ref_plain(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The 1x1 convolution as its one matmul (float32), the product the kernel makes."""
    return (x.reshape(-1, x.shape[-1]) @ f.reshape(f.shape[2], f.shape[3])).reshape(
        x.shape[:3] + (f.shape[3],))
