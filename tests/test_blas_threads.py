"""A mid-sized product on the calling thread alone (executor/blas.py's ``matmul``): its values
against the float64 definition, the choice made by the shapes only (the same bits whatever
ran before, in a Session's kernel and in its compiled loop alike), and OpenBLAS's thread count
for the calling thread left as it was, also when the product fails. Values are checked
against float64 math, never against another path's output."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor import Session, blas
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import builder as B


def _rand(shape: tuple, seed: int, dtype: type = np.float32) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """A product of K terms: within K ulps of the float64 sum of absolute values."""
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert got.dtype == a.dtype and got.shape == want.shape
    assert (np.abs(got - want) <= a.shape[1] * np.finfo(a.dtype).eps * scale + 1e-30).all()


def _local_count() -> int:
    """OpenBLAS's thread count for this thread, read by setting it and putting it back."""
    setter = blas._find_set_local()
    before = setter(3)
    setter(before)
    return before


# below, inside and above the range that runs alone (2^18 < M*K*N <= 3e6), and odd sizes
SHAPES = [(8, 64, 64), (16, 128, 512), (32, 128, 384), (33, 257, 129), (128, 64, 1000),
          (512, 128, 256)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_products_equal_the_definition_and_do_not_depend_on_what_ran_before(shape, dtype):
    m, k, n = shape
    a, b = _rand((m, k), 1, dtype), _rand((k, n), 2, dtype)
    first = blas.matmul(a, b)
    _close(first, a, b)
    # a large product just before (OpenBLAS's workers awake) and a pause do not change bits
    big = _rand((256, 256), 3, dtype)
    big @ big
    assert np.array_equal(blas.matmul(a, b), first)
    out = np.empty_like(first)
    assert blas.matmul(a, b, out=out) is out and np.array_equal(out, first)


def test_the_thread_count_is_restored_after_a_product_and_after_a_failed_one():
    if not blas._find_set_local():
        pytest.skip("numpy's BLAS has no thread-local thread count (not OpenBLAS 0.3.27+)")
    before = _local_count()
    a, b = _rand((32, 128), 1), _rand((128, 384), 2)    # 1.6M multiply-adds: alone
    blas.matmul(a, b)
    assert _local_count() == before
    with pytest.raises(ValueError):
        blas.matmul(a, b, out=np.empty((3, 3), np.float32))
    assert _local_count() == before


def test_an_einsum_of_one_matrix_each_equals_the_definition():
    """The hoisted projection of a recurrent layer: (time, batch, features) by a matrix."""
    x, w = _rand((40, 16, 32), 4), _rand((32, 64), 5)      # 1.3M multiply-adds: alone
    got = invoke("Einsum", x, w, attrs={"equation": "abk,kn->abn"})
    assert got.shape == (40, 16, 64)
    _close(got.reshape(640, 64), x.reshape(640, 32), w)


def test_a_recurrent_product_gives_the_definitions_values_in_every_mode():
    """A loop multiplying its 40-row state by a Const matrix (BLAS, not the few-rows kernel),
    node by node and compiled, optimized or not: within the float64 recurrence's bounds and
    the same bits in every mode."""
    u = (_rand((128, 128), 6) / 12).astype(np.float32)     # 40x128x128: 0.65M, alone
    h0 = _rand((40, 128), 7)
    g = B.Graph()
    with g.as_default():
        h = B.placeholder("float32", [40, 128], name="h")
        out = B.while_loop(lambda i, s: B.less(i, 4),
                           lambda i, s: [B.add(i, 1), B.tanh(B.matmul(s, B.constant(u)))],
                           [B.constant(0), h])
        B.identity(out[1], name="y")
    graph = g.as_graph_def()
    want = h0.astype(np.float64)
    for _ in range(4):
        want = np.tanh(want @ u.astype(np.float64))
    results = []
    for programs in ("never", "always"):
        for optimize in ("off", "eager"):
            with Session(graph, programs=programs, optimize=optimize) as sess:
                for _ in range(3):
                    got = sess.run("y:0", {"h:0": h0})
                    assert np.allclose(got, want, rtol=1e-5, atol=1e-5), (programs, optimize)
                    results.append(got)
    assert all(np.array_equal(r, results[0]) for r in results)
