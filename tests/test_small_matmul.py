"""A few rows times a constant matrix through the compiled direct kernel
(executor/kernels/_native.py's ``small_matmul_f32``): the rule that sends a MatMul there
(1 to 32 rows, up to 4.5e6 FLOPs and one row up to SMALL_GEMV_MAX_FLOPS, a frozen float32
matrix, no transposed first operand),
its values against the float64 definition, the kernel and its array form agreeing bit for
bit, and a fed or variable matrix (not frozen) staying with BLAS, so changing it changes the
next result. Values are checked against float64 math, never against another path's output."""

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


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """float32 products of K terms: within K ulps of the float64 sum's size."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert (np.abs(got - want) <= a.shape[1] * np.finfo(np.float32).eps * scale + 1e-30).all()


def _matmul(attrs: dict, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The MatMul kernel's result and its array form's, for the same operands."""
    k = bind_op("MatMul", complete_attrs("MatMul", dict(attrs), [a, b]))
    kernel = call(k, [a, b], context(k))
    kernel = kernel if isinstance(kernel, np.ndarray) else kernel[0]
    form = specs()["MatMul"].array.make(k.attrs)(a, b)
    return kernel, form


@pytest.mark.parametrize("m,k,n", [(16, 64, 256), (2, 128, 512), (4, 128, 256), (7, 100, 80),
                                   (16, 16, 200), (32, 128, 384), (4, 8, 16), (2, 3, 20),
                                   (1, 64, 256), (1, 100, 70), (1, 3, 20), (1, 256, 1024)])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_small_products_take_the_direct_kernel_with_the_definitions_values(
        m: int, k: int, n: int, transpose_b: bool) -> None:
    a = _rand((m, k), 1)
    b = _rand((k, n), 2)
    frozen_b = _const(np.ascontiguousarray(b.T) if transpose_b else b)
    direct = _native.small_matmul_f32(a, frozen_b, transpose_b)
    assert direct is not None, "the rule should take this product"
    _close(direct, a, b)
    kernel, form = _matmul({"transpose_b": transpose_b}, a, frozen_b)
    assert np.array_equal(kernel, direct) and np.array_equal(form, direct)


def test_nan_and_inf_propagate_as_in_a_product() -> None:
    a = _rand((8, 64), 3)
    b = _rand((64, 256), 4)
    a[1, 5] = np.nan
    a[2, 7] = np.inf
    b[9, 3] = np.inf
    out = _native.small_matmul_f32(a, _const(b), False)
    assert out is not None
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.isnan(out[1]).all()
    assert np.array_equal(np.isnan(out), np.isnan(want))
    finite = np.isfinite(want)
    assert np.array_equal(np.isinf(out), np.isinf(want))
    assert np.array_equal(np.sign(out[np.isinf(out)]), np.sign(want[np.isinf(want)]))
    assert np.allclose(out[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_one_row_has_the_bits_of_a_row_among_several() -> None:
    """The one-row product (conv.c's one-pixel path, several channel blocks at a time) sums
    each output as the several-row blocks do: the bits of that row in a larger product, for
    widths with and without a partial last block, and a fused bias and ReLU."""
    for k, n in ((64, 256), (37, 200), (5, 16), (128, 72)):
        a, b = _rand((3, k), 11), _const(_rand((k, n), 12))
        for row in range(3):
            one = _native.small_matmul_f32(a[row:row + 1].copy(), b, False)
            many = _native.small_matmul_f32(a, b, False)
            assert one is not None and many is not None
            assert one.tobytes() == many[row:row + 1].tobytes(), (k, n, row)
        bias = _const(_rand((n,), 13))
        attrs = {"fused_ops": ["BiasAdd", "Relu"], "num_args": 1}
        k1 = bind_op("_FusedMatMul", complete_attrs("_FusedMatMul", dict(attrs),
                                                    [a[:1], b, bias]))
        one = np.asarray(call(k1, [a[:1].copy(), b, bias], context(k1)))
        km = bind_op("_FusedMatMul", complete_attrs("_FusedMatMul", dict(attrs), [a, b, bias]))
        many = np.asarray(call(km, [a, b, bias], context(km)))
        assert one.shape == (1, n) and one.tobytes() == many[:1].tobytes()


@pytest.mark.parametrize("case", ["one long row", "large", "many rows", "fed matrix",
                                  "float64", "transposed a", "strided a"])
def test_what_the_rule_leaves_to_blas(case: str) -> None:
    a, b = _rand((16, 64), 5), _const(_rand((64, 256), 6))
    if case == "one long row":       # past SMALL_GEMV_MAX_FLOPS: BLAS's two threads
        a, b = _rand((1, 512), 5), _const(_rand((512, 2048), 6))
    elif case == "large":
        b = _const(_rand((64, 2560), 6))                        # 5.2 MFLOP
    elif case == "many rows":
        a = _rand((33, 64), 5)
    elif case == "fed matrix":
        b = np.array(b)                                         # writeable: not frozen
    elif case == "float64":
        a, b = a.astype(np.float64), _const(_rand((64, 256), 6).astype(np.float64))
    elif case == "transposed a":
        a = np.asfortranarray(a)
    elif case == "strided a":
        a = _rand((16, 128), 5)[:, ::2]
    assert _native.small_matmul_f32(a, b, False) is None
    kernel, form = _matmul({}, a, b)
    assert np.array_equal(kernel, form)
    _close(kernel.astype(np.float32), a.astype(np.float32), b.astype(np.float32))


def test_a_fed_matrix_changed_in_place_changes_the_next_product() -> None:
    a = _rand((16, 64), 7)
    b = _rand((64, 256), 8)
    first, _ = _matmul({}, a, b)
    _close(first, a, b)
    b *= 2
    second, _ = _matmul({}, a, b)
    _close(second, a, b)
    assert not np.array_equal(first, second)


def test_native_off_takes_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _rand((16, 64), 9), _const(_rand((64, 256), 10))
    assert _native.small_matmul_f32(a, b, False) is not None
    monkeypatch.setenv("DFG_NATIVE", "0")
    assert _native.small_matmul_f32(a, b, False) is None
    kernel, _ = _matmul({}, a, b)
    _close(kernel, a, b)


def test_the_memo_drops_a_matrix_that_is_gone() -> None:
    a = _rand((16, 64), 11)
    b = _const(_rand((64, 256), 12))
    assert _native.small_matmul_f32(a, b, False) is not None
    key = (id(b), a.shape, False)
    assert key in _native._SMALL
    del b
    gc.collect()
    assert key not in _native._SMALL


def test_a_recurrent_product_in_every_mode_has_the_definitions_values() -> None:
    """A loop multiplying its state by a Const matrix each iteration (an RNN's recurrent
    product), in every mode: each mode's result within the float64 recurrence's bounds, and
    all modes the same bits (the rule reads shapes and frozenness, which no mode changes)."""
    w = (_rand((64, 64), 13) / 8).astype(np.float32)
    x0 = _rand((16, 64), 14)
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [16, 64], name="x")
        wc = B.constant(w, name="w")
        out = B.while_loop(lambda i, h: B.less(i, 5),
                           lambda i, h: [B.add(i, 1), B.tanh(B.matmul(h, wc))],
                           [B.constant(0), x])
        B.identity(out[1], name="y")
    graph = g.as_graph_def()
    want = x0.astype(np.float64)
    for _ in range(5):
        want = np.tanh(want @ w.astype(np.float64))
    results = []
    _native._SMALL.clear()
    for programs in ("never", "always"):
        for optimize in ("off", "eager"):
            with Session(graph, programs=programs, optimize=optimize) as sess:
                for _ in range(3):
                    got = sess.run("y:0", {"x:0": x0})
            assert got.dtype == np.float32
            assert np.allclose(got, want, rtol=1e-5, atol=1e-5), (programs, optimize)
            results.append(got)
    assert all(np.array_equal(r, results[0]) for r in results)
    # the products went through the direct kernel (a memo entry with packed blocks)
    assert any(key[1] == (16, 64) and entry[1] is not None
               for key, entry in list(_native._SMALL.items()))


@pytest.mark.parametrize("transpose_b", [False, True])
def test_a_fused_product_with_bias_and_relu_takes_it_too(transpose_b: bool) -> None:
    """_FusedMatMul (a recurrent product with its bias, as the fusion pass writes it)."""
    a = _rand((16, 64), 15)
    b = _rand((64, 192), 16)
    bias = _const(_rand((192,), 17))
    frozen_b = _const(np.ascontiguousarray(b.T) if transpose_b else b)
    attrs = {"fused_ops": ["BiasAdd", "Relu"], "num_args": 1, "transpose_b": transpose_b}
    k = bind_op("_FusedMatMul", complete_attrs("_FusedMatMul", attrs, [a, frozen_b, bias]))
    _native._SMALL.clear()
    got = call(k, [a, frozen_b, bias], context(k))
    got = got if isinstance(got, np.ndarray) else got[0]
    assert any(key[1] == (16, 64) and entry[1] is not None
               for key, entry in list(_native._SMALL.items()))
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64) + np.abs(bias)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert (np.abs(got - want) <= 65 * np.finfo(np.float32).eps * scale + 1e-30).all()
