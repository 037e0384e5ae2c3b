"""The kernels' bitwise select equals numpy's where bit for bit, and the kernels built on it
keep their special values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dfg.executor.kernels._select import where
from dfg.executor.kernels.registry import invoke

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint16, bool,
          np.complex64]
SHAPES = [((96, 96), (96, 96), (96, 96)), ((96, 96), (96, 1), ()), ((1, 96), (96, 96), (96, 1)),
          ((), (8192,), (8192,)), ((64, 128), (128,), (64, 1)), ((5,), (5,), (5,))]


def _special(a: np.ndarray) -> None:
    """NaN with a payload, signed zeros and infinities, where the dtype has them."""
    if a.dtype.kind == "f" and a.size >= 5:
        flat = a.reshape(-1)
        flat[:4] = [np.inf, -np.inf, -0.0, 0.0]
        bits = flat[4:5].view(np.uint16 if a.dtype.itemsize == 2 else
                              np.uint32 if a.dtype.itemsize == 4 else np.uint64)
        bits[0] = {2: 0x7E01, 4: 0x7FC00123, 8: 0x7FF8000000000123}[a.dtype.itemsize]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_where_equals_numpy_bit_for_bit(dtype, shapes) -> None:
    rng = np.random.default_rng(7)
    cs, ts, es = shapes
    cond = rng.random(cs) < 0.5
    t = (rng.standard_normal(ts) * 50).astype(dtype)
    e = (rng.standard_normal(es) * 50).astype(dtype)
    _special(t)
    got, want = where(cond, t, e), np.where(cond, t, e)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_where_on_strided_views_and_numpy_scalars() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 256)).astype(np.float32)[:, ::2]
    cond = x > 0
    assert where(cond, x, -x).tobytes() == np.where(cond, x, -x).tobytes()
    got = where(cond, x, np.float32(-1))
    assert got.tobytes() == np.where(cond, x, np.float32(-1)).tobytes()


def test_python_numbers_keep_numpys_promotion() -> None:
    # A Python float is "weak": with float32 the result stays float32, as np.where gives.
    x = np.linspace(-1, 1, 10000, dtype=np.float32)
    assert where(x > 0, x, 0.0).dtype == np.float32
    assert where(x > 0, x, np.float64(0)).dtype == np.float64


def test_where_reports_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(ValueError):
        where(np.ones(5000, bool), np.ones(4000, np.float32), np.float32(0))


def _run(op: str, x: np.ndarray, **attrs) -> np.ndarray:
    return invoke(op, x, attrs={"T": x.dtype, **attrs})


def test_activations_keep_nan_signed_zero_and_infinities_on_large_inputs() -> None:
    # Large enough for the bitwise path; expected values from the definitions in math.
    x = np.tile(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -1.5, 2.0, -30.0],
                         np.float32), 1024)
    with np.errstate(all="ignore"):
        elu = _run("Elu", x)
        lrelu = _run("LeakyRelu", x, alpha=0.25)
        sig = _run("Sigmoid", x)
        erfc = _run("Erfc", x)
    head = slice(0, 8)
    assert np.isnan(elu[0]) and np.isnan(lrelu[0]) and np.isnan(sig[0]) and np.isnan(erfc[0])
    np.testing.assert_array_equal(elu[head][1:], np.float32(
        [-0.0, 0.0, np.inf, -1.0, math.expm1(-1.5), 2.0, math.expm1(-30.0)]))
    assert math.copysign(1, elu[1]) == -1 and math.copysign(1, lrelu[1]) == -1
    np.testing.assert_array_equal(lrelu[head][1:], np.float32(
        [-0.0, 0.0, np.inf, -np.inf, -0.375, 2.0, -7.5]))
    np.testing.assert_allclose(sig[head][1:], np.float32(
        [0.5, 0.5, 1.0, 0.0, 1 / (1 + math.exp(1.5)), 1 / (1 + math.exp(-2.0)),
         1 / (1 + math.exp(30.0))]), rtol=1e-6)
    np.testing.assert_allclose(erfc[head][1:], np.float32(
        [1.0, 1.0, 0.0, 2.0, math.erfc(-1.5), math.erfc(2.0), 2.0]), rtol=6e-7)
    # every copy of the pattern got the same answer
    for r in (elu, lrelu, sig, erfc):
        assert r.reshape(1024, 8)[:, 1:].tobytes() == np.tile(r[1:8], 1024).tobytes()


@pytest.mark.parametrize("alpha", [0.2, 1.0, 1e-30, 0.0, -0.5, 2.0])
@pytest.mark.parametrize("n", [64, 128])     # 128: past BROADCAST_MIN, one compiled pass
def test_leaky_relu_is_the_select_of_its_definition(alpha: float, n: int) -> None:
    """x > 0 ? x : x * alpha bit for bit (max(x, x * alpha) where 0 < alpha <= 1), specials
    included, alone and fused into a MatMul's epilogue."""
    x = np.tile(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -1.5, 2.0, -1e-45],
                         np.float32), n * n // 8).reshape(n, n)
    a = np.float32(alpha)
    with np.errstate(all="ignore"):
        want = np.where(x > 0, x, x * a)
        got = _run("LeakyRelu", x, alpha=alpha)
        eye = np.eye(n, dtype=np.float32)
        fused = invoke("_FusedMatMul", eye, x, np.zeros(n, np.float32),
                       attrs={"T": np.float32, "fused_ops": ["BiasAdd", "LeakyRelu"],
                              "num_args": 1, "leakyrelu_alpha": alpha})
    assert got.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
    finite = np.isfinite(x)     # the product turns the row's specials into NaNs
    np.testing.assert_array_equal(fused[:, finite.all(axis=0)], want[:, finite.all(axis=0)])
