"""Large float32 sums, differences, products and quotients run as a one-op compiled chain
split on the native pool (kernels/math.py ``_split_f32``): each element is one IEEE single
operation, so the result must be numpy's, bit for bit, whatever the layout, the split and
the special values; and the kernel gives the same bits as a graph run in every mode."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels import _native
from dfg.executor.kernels.registry import invoke

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")

BIG = _native.CHAIN_SPLIT_WORK
OPS = {"Add": np.add, "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply,
       "RealDiv": np.true_divide, "Div": np.true_divide}


def _values(shape: tuple, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(1e3)
    flat = x.reshape(-1)
    # special values where any split cuts: zeros of both signs, infinities, NaN, subnormals
    flat[:: max(1, flat.size // 97)] = np.float32(0.0)
    flat[1:: max(1, flat.size // 89)] = np.float32(-0.0)
    flat[2:: max(1, flat.size // 83)] = np.inf
    flat[3:: max(1, flat.size // 79)] = -np.inf
    flat[4:: max(1, flat.size // 73)] = np.nan
    flat[5:: max(1, flat.size // 71)] = np.float32(1e-40)
    return x


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    g, w = got.view(np.uint32), want.view(np.uint32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(g[~nan], w[~nan])


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shapes", [
    ((1024, 1024), (1024, 1024)),   # same shape: rows the pool shares
    ((512, 1024), ()),              # a scalar
    ((), (512, 1024)),
    ((1, 1), (600, 700)),           # one element, broadcast up
    ((256, 1024), (1024,)),         # a row
    ((BIG + 3,), (BIG + 3,)),       # no row split divides it: one long row
    ((4, 256, 257), (4, 256, 257)),
])
def test_split_binary_ops_give_numpys_bits(op: str, shapes: tuple) -> None:
    x = _values(shapes[0], 1)
    y = _values(shapes[1], 2)
    if op in ("RealDiv", "Div"):
        y = np.where(y == 0, np.float32(3.0), y).astype(np.float32)   # and some zeros below
        y.reshape(-1)[7:: 101] = 0.0
    with np.errstate(all="ignore"):
        want = OPS[op](x, y)
        got = invoke(op, x, y)
        # the compiled chain itself, as the kernel calls it: it takes these layouts
        code = np.array([_native.CHAIN_OPS[op], 0, 1], np.int32).tobytes()
        direct = _native.chain_on(code, (x, y))
    assert direct is not None
    _same_bits(np.asarray(got), np.asarray(want, np.float32))
    _same_bits(direct, np.asarray(want, np.float32))


def test_large_chains_are_cut_into_rows_the_pool_can_share() -> None:
    shape, kinds, rows, cols, _layout = _native.chain_layout(((1024, 1024), ()))
    assert (shape, kinds, rows * cols) == ((1024, 1024), bytes([0, 2]), 1024 * 1024)
    assert rows >= 2
    # small ones stay one long row (one call of the inner loop)
    assert _native.chain_layout(((64, 64), (64, 64)))[2] == 1


def test_strided_operand_is_read_right() -> None:
    base = _values((1024, 2048), 3)
    x = base[:, ::2]                # not contiguous: copied, then split
    y = _values((1024, 1024), 4)
    with np.errstate(all="ignore"):
        _same_bits(invoke("Mul", x, y), np.multiply(x, y))


def test_other_dtypes_and_small_sizes_keep_numpy() -> None:
    x = np.arange(BIG, dtype=np.float64)
    assert invoke("Mul", x, x).dtype == np.float64
    np.testing.assert_array_equal(invoke("Mul", x, x), x * x)
    small = np.ones((8, 8), np.float32)
    np.testing.assert_array_equal(invoke("AddV2", small, small), small + small)


def test_graph_modes_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Node by node, programs and the native kernels refused all give numpy's bits."""
    from dfg.executor import Session
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        a = B.placeholder("float32", [512, 1024], name="a")
        s = B.placeholder("float32", [], name="s")
        B.identity((a * s - a) / s, name="q")
    av, sv = _values((512, 1024), 5), np.float32(1.7)
    with np.errstate(all="ignore"):
        want = np.true_divide(np.subtract(np.multiply(av, sv), av), sv)
    for programs in ("never", "always"):
        for threads in (1, 2):
            with Session(g.as_graph_def(), threads=threads, programs=programs) as sess:
                for _ in range(3):
                    _same_bits(sess.run("q", {"a": av, "s": sv}), want)
    monkeypatch.setenv("DFG_NATIVE", "0")
    with Session(g.as_graph_def(), threads=2) as sess:
        _same_bits(sess.run("q", {"a": av, "s": sv}), want)


@pytest.mark.parametrize("shape", [(4, 64, 64, 16), (4, 32, 32, 32), (3, 5, 7, 3),
                                   (2, 128, 96, 80)])
def test_bias_add_gives_numpys_bits(shape: tuple) -> None:
    x = _values(shape, 6)
    b = _values((shape[-1],), 7)
    with np.errstate(all="ignore"):
        _same_bits(invoke("BiasAdd", x, b), np.add(x, b))
        # and a row broadcast of a binary op, either side
        _same_bits(invoke("Mul", x, b), np.multiply(x, b))
        _same_bits(invoke("Sub", b, x), np.subtract(b, x))


@pytest.mark.parametrize("widths", [(16, 16), (64, 32, 3), (1, 7), (300, 17), (64, 64)])
@pytest.mark.parametrize("outer", [1, 5, 4096, 16384])
def test_concat_rows_split_copies_every_row(widths: tuple, outer: int) -> None:
    """The inline 16-byte copy (rows of up to 256 bytes), memcpy otherwise, and the split
    on the pool (from 256 KB) all give np.concatenate's result."""
    values = [np.arange(outer * w, dtype=np.float32).reshape(outer, w) + 1000 * j
              for j, w in enumerate(widths)]
    want = np.concatenate(values, axis=1)
    got = invoke("ConcatV2", *values, np.array(1, np.int32))
    np.testing.assert_array_equal(got, want)
    ext = _native.extension()
    for chunks, threads in ((1, 1), (3, 2), (16, 4)):
        out = np.empty_like(want)
        ext.concat_rows(tuple(values), out, outer, chunks, threads)
        np.testing.assert_array_equal(out, want)


def test_transposed_conv_keeps_only_a_frozen_filter() -> None:
    """Conv2DBackpropInput's W^T is kept for a filter that cannot change; a writable filter
    changed between runs of one node gives the new product."""
    from dfg.executor import Session
    from dfg.graphdef import builder as B

    rng = np.random.default_rng(8)
    fv = rng.standard_normal((2, 2, 3, 5)).astype(np.float32)
    dy = rng.standard_normal((1, 4, 4, 5)).astype(np.float32)

    def expect(f: np.ndarray) -> np.ndarray:
        # each input pixel takes one tap of one output pixel's window (kernel == stride)
        out = np.zeros((1, 8, 8, 3), np.float64)
        for i in range(4):
            for j in range(4):
                for a in range(2):
                    for b in range(2):
                        out[0, 2 * i + a, 2 * j + b] = f[a, b].astype(np.float64) @ dy[0, i, j]
        return out

    g = B.Graph()
    with g.as_default():
        f = B.placeholder("float32", [2, 2, 3, 5], name="f")
        d = B.placeholder("float32", [1, 4, 4, 5], name="dy")
        sizes = B.constant(np.array([1, 8, 8, 3], np.int32))
        g.create_op("Conv2DBackpropInput", [sizes, f, d],
                    {"strides": [1, 2, 2, 1], "padding": "VALID", "T": "float32"}, "t")
    with Session(g.as_graph_def(), threads=2) as sess:
        for scale in (1.0, -2.0, 0.5):
            got = sess.run("t", {"f": fv * np.float32(scale), "dy": dy})
            np.testing.assert_allclose(got, expect(fv * np.float32(scale)), rtol=1e-5,
                                       atol=1e-5)
    # a Const filter (frozen: its W^T kept by the node) gives the same product every run
    g = B.Graph()
    with g.as_default():
        d = B.placeholder("float32", [1, 4, 4, 5], name="dy")
        g.create_op("Conv2DBackpropInput",
                    [B.constant(np.array([1, 8, 8, 3], np.int32)), B.constant(fv), d],
                    {"strides": [1, 2, 2, 1], "padding": "VALID", "T": "float32"}, "t")
    with Session(g.as_graph_def(), threads=2) as sess:
        for scale in (1.0, 3.0):
            got = sess.run("t", {"dy": dy * np.float32(scale)})
            want = expect(fv) * scale
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pool_rest_then_split_work_and_products() -> None:
    """blas.rest puts the native pool's polling workers to sleep (before a large BLAS
    product); the next split job wakes them and still computes numpy's bits, and the
    product itself is numpy's."""
    from dfg.executor import blas

    x, y = _values((1024, 1024), 9), _values((1024, 1024), 10)
    a = np.linspace(-1, 1, 256 * 512, dtype=np.float32).reshape(256, 512)
    b = np.linspace(2, -2, 512 * 512, dtype=np.float32).reshape(512, 512)
    assert a.shape[0] * a.shape[1] * b.shape[1] >= blas.REST_MACS
    with np.errstate(all="ignore"):
        want = np.multiply(x, y)
        for _ in range(5):
            _native.extension().pool_rest()
            _same_bits(invoke("Mul", x, y), want)
            np.testing.assert_allclose(blas.matmul(a, b), a.astype(np.float64) @ b,
                                       rtol=1e-4, atol=1e-3)
            _same_bits(invoke("AddV2", x, y), np.add(x, y))
