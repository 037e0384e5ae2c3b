"""A batch of rows times a constant matrix as a 1x1 convolution on the native pool
(executor/kernels/_native.py's ``matmul_plan``): the rule (more than 32 rows of float32, a
frozen float32 matrix, up to MATMUL_MAX_FLOPS), its values against the float64 definition,
the MatMul kernel and its array form agreeing bit for bit, _FusedMatMul's bias and
activation applied in registers with the bits of the product followed by BiasAdd and the
activation as separate ops, and a whole Dense layer in every Session mode giving the same
bits. Values are checked against float64 math, never against another path's output."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from dfg.executor import Session
from dfg.executor.kernel_call import bind_op, call, context
from dfg.executor.kernels import _native
from dfg.executor.kernels.registry import complete_attrs, specs
from dfg.graphdef import builder as B
from dfg.graphdef.tensors import from_numpy, to_numpy

pytestmark = pytest.mark.skipif(not _native.dense_conv(),
                                reason="the direct kernel does not run on this CPU")


def _const(a: np.ndarray) -> np.ndarray:
    """``a`` as a Const's value is decoded: a read-only view of the proto's bytes."""
    return to_numpy(from_numpy(a))


def _rand(shape: tuple, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _bound(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray]:
    """The float64 product (plus bias) and the error a float32 sum of K terms may have."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    if bias is not None:
        want, scale = want + bias, scale + np.abs(bias)
    return want, (a.shape[1] + 1) * np.finfo(np.float32).eps * scale + 1e-30


def _run(op: str, attrs: dict, *args: np.ndarray) -> np.ndarray:
    k = bind_op(op, complete_attrs(op, dict(attrs), list(args)))
    out = call(k, list(args), context(k))
    return out if isinstance(out, np.ndarray) else out[0]


@pytest.mark.parametrize("m,k,n", [(64, 300, 512), (33, 100, 70), (100, 64, 10),
                                   (36, 128, 128), (63, 200, 64), (256, 48, 130)])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_batch_products_take_the_native_kernel_with_the_definitions_values(
        m: int, k: int, n: int, transpose_b: bool) -> None:
    a, b = _rand((m, k), 1), _rand((k, n), 2)
    frozen_b = _const(np.ascontiguousarray(b.T) if transpose_b else b)
    assert _native.small_matmul_f32(a, frozen_b, transpose_b) is None
    assert _native.matmul_plan(a, frozen_b, transpose_b) is not None, "the rule takes it"
    got = _run("MatMul", {"transpose_b": transpose_b}, a, frozen_b)
    want, err = _bound(a, b)
    assert got.dtype == np.float32 and got.shape == (m, n)
    assert (np.abs(got - want) <= err).all()
    k_ = bind_op("MatMul", complete_attrs("MatMul", {"transpose_b": transpose_b}, [a, frozen_b]))
    form = specs()["MatMul"].array.make(k_.attrs)(a, frozen_b)
    assert np.array_equal(form, got)


@pytest.mark.parametrize("case", ["fed matrix", "float64", "transposed a", "strided a",
                                  "too large", "few rows"])
def test_what_the_rule_leaves_to_blas_or_the_small_kernel(case: str) -> None:
    a, b = _rand((64, 64), 5), _const(_rand((64, 96), 6))
    if case == "fed matrix":
        b = np.array(b)                                         # writeable: not frozen
    elif case == "float64":
        a, b = a.astype(np.float64), _const(_rand((64, 96), 6).astype(np.float64))
    elif case == "transposed a":
        a = np.asfortranarray(a)
    elif case == "strided a":
        a = _rand((64, 128), 5)[:, ::2]
    elif case == "too large":
        a, b = _rand((512, 160), 5), _const(_rand((160, 8192), 6))
        assert 2.0 * 512 * 160 * 8192 > _native.MATMUL_MAX_FLOPS
    elif case == "few rows":
        a = _rand((32, 64), 5)
    assert _native.matmul_plan(a, b, False) is None
    got = _run("MatMul", {}, a, b)
    want, err = _bound(a.astype(np.float32), b.astype(np.float32))
    assert (np.abs(got - want) <= err).all()


def test_nan_and_inf_propagate_as_in_a_product() -> None:
    a, b = _rand((40, 64), 3), _rand((64, 128), 4)
    a[1, 5], a[2, 7], b[9, 3] = np.nan, np.inf, np.inf
    got = _run("MatMul", {}, a, _const(b))
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(np.sign(got[np.isinf(got)]), np.sign(want[np.isinf(want)]))
    finite = np.isfinite(want)
    assert np.allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("act", ["Relu", "Relu6", None, "LeakyRelu"])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_fused_bias_and_activation_have_the_separate_ops_bits(act: str | None,
                                                              transpose_b: bool) -> None:
    """The bias added to each float32 sum, then the activation, in registers (LeakyRelu: in
    one compiled pass over the product): one rounding each, as the product followed by
    BiasAdd and the activation computes them."""
    a, b, bias = _rand((96, 144), 7), _rand((144, 200), 8), _const(_rand((200,), 9))
    frozen_b = _const(np.ascontiguousarray(b.T) if transpose_b else b)
    ops = ["BiasAdd"] + ([act] if act else [])
    fused = _run("_FusedMatMul", {"fused_ops": ops, "num_args": 1, "transpose_b": transpose_b},
                 a, frozen_b, bias)
    if act != "LeakyRelu":      # LeakyRelu: a compiled pass over the product (_epilogue)
        assert _native.matmul_plan(a, frozen_b, transpose_b, bias,
                                   {None: 0, "Relu": 1, "Relu6": 2}[act]) is not None
    product = _run("MatMul", {"transpose_b": transpose_b}, a, frozen_b)
    separate = _run("BiasAdd", {}, product, bias)
    if act:
        separate = _run(act, {}, separate)
    assert fused.tobytes() == separate.tobytes()
    want, err = _bound(a, b, bias)
    if act == "Relu":
        want = np.maximum(want, 0)
    elif act == "Relu6":
        want = np.clip(want, 0, 6)
    elif act == "LeakyRelu":    # alpha 0.2, both ops' default; the error scales down too
        want = np.where(want > 0, want, np.float32(0.2) * want)
    assert (np.abs(fused - want) <= err).all()


@pytest.mark.parametrize("act", ["Sigmoid", "Tanh"])
def test_fused_smooth_activations_have_the_definitions_values(act: str) -> None:
    a, b, bias = _rand((48, 80), 10), _rand((80, 64), 11), _const(_rand((64,), 12))
    got = _run("_FusedMatMul", {"fused_ops": ["BiasAdd", act], "num_args": 1},
               a, _const(b), bias)
    want, err = _bound(a, b, bias)
    want = 1 / (1 + np.exp(-want)) if act == "Sigmoid" else np.tanh(want)
    # both have slopes of at most 1: the sum's error, plus a few ulps of the function
    assert got.dtype == np.float32
    assert (np.abs(got - want) <= err + 4 * np.finfo(np.float32).eps).all()


def test_the_memo_drops_a_matrix_that_is_gone() -> None:
    a = _rand((64, 32), 13)
    b = _const(_rand((32, 64), 14))
    assert _native.matmul_plan(a, b, False) is not None
    key = (id(b), a.shape, False, None, _native.ACT_NONE)
    assert key in _native._PRODUCTS
    del b
    gc.collect()
    assert key not in _native._PRODUCTS


def test_a_dense_layer_in_every_mode_has_the_same_bits() -> None:
    """MatMul, BiasAdd and Relu on a batch of 64 (a Dense layer as Keras writes it): the
    fused product of the optimized graph and the separate ops of the graph as written, node
    by node and as a compiled program, all the same bits, within the float64 bounds."""
    x0 = _rand((64, 120), 15)
    w, bias = _rand((120, 192), 16), _rand((192,), 17)
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [64, 120], name="x")
        y = B.apply_op("BiasAdd", [B.matmul(x, B.constant(w, name="w")),
                                   B.constant(bias, name="b")]).outputs[0]
        B.identity(B.relu(y), name="y")
    graph = g.as_graph_def()
    want, err = _bound(x0, w, bias)
    want = np.maximum(want, 0)
    results = []
    for programs in ("never", "always"):
        for optimize in ("off", "eager"):
            with Session(graph, programs=programs, optimize=optimize) as sess:
                for _ in range(2):
                    got = sess.run("y:0", {"x:0": x0})
            assert got.dtype == np.float32 and (np.abs(got - want) <= err).all()
            results.append(got)
    assert all(r.tobytes() == results[0].tobytes() for r in results)
