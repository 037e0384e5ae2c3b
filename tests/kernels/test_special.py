"""Tests of the special-function kernels (executor/kernels/special.py) beyond the replayed
TensorFlow cases in tests/data/kernels/raw_ops_special: values known from mathematics
(Python's ``math`` module, closed forms, published constants), identities between the ops,
and that every kernel stays vectorized on large inputs.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke

pytestmark = pytest.mark.filterwarnings("error")

F32, F64 = np.float32, np.float64
PI2_6 = math.pi ** 2 / 6


def run(op: str, *xs: object, dtype: type = F64) -> np.ndarray:
    return invoke(op, *(np.asarray(x, dtype=dtype) for x in xs))


@pytest.mark.parametrize("op, x, want", [
    ("BesselI0e", [0.0], [1.0]),
    ("BesselJ0", [2.404825557695773], [0.0]),             # first zero of J0
    ("BesselJ1", [3.8317059702075125], [0.0]),            # first zero of J1
    ("BesselI0", [1.0], [1.2660658777520082]),            # Abramowitz & Stegun table 9.8
    ("BesselK0", [1.0], [0.42102443824070834]),
    ("BesselY0", [1.0], [0.08825696421567696]),
    ("BesselY1", [1.0], [-0.7812128213002887]),
    ("Ndtri", [0.975, 0.5], [1.959963984540054, 0.0]),
    ("Expint", [1.0], [1.8951178163559368]),              # Ei(1)
    ("Dawsn", [1.0], [0.5380795069127684]),
    ("Spence", [1.0, 0.0, 2.0], [0.0, PI2_6, -PI2_6 / 2]),  # Li2(1 - x): 0, pi^2/6, -pi^2/12
    ("FresnelSin", [1e6, -1e6], [0.5, -0.5]),
    ("FresnelCos", [1e6, -1e6], [0.5, -0.5]),
])
def test_known_values(op: str, x: list, want: list) -> None:
    np.testing.assert_allclose(run(op, x), want, rtol=1e-14, atol=1e-15)


def test_erfinv_inverts_math_erf() -> None:
    x = np.linspace(-3, 3, 61)
    y = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(run("Erfinv", y), x, rtol=1e-12, atol=1e-12)


def test_incomplete_gamma_closed_forms() -> None:
    x = np.array([0.0, 0.1, 0.9, 1.0, 1.5, 7.0, 40.0])
    np.testing.assert_allclose(run("Igamma", np.ones_like(x), x), -np.expm1(-x), rtol=1e-13)
    # P(1/2, x) = erf(sqrt(x)), on both sides of the series / continued fraction switch
    np.testing.assert_allclose(run("Igamma", np.full_like(x, 0.5), x),
                               [math.erf(math.sqrt(v)) for v in x], rtol=1e-13)
    a, xx = np.meshgrid([0.3, 2.0, 15.0, 150.0], [0.2, 2.5, 16.0, 170.0])
    np.testing.assert_allclose(run("Igamma", a, xx) + run("Igammac", a, xx), 1.0, rtol=1e-13)


def test_incomplete_gamma_derivatives_against_differences() -> None:
    a = np.array([0.5, 2.0, 7.5, 30.0])
    x = np.array([0.7, 3.0, 6.0, 33.0])
    h = 1e-6
    fd = (run("Igamma", a + h, x) - run("Igamma", a - h, x)) / (2 * h)
    np.testing.assert_allclose(run("IgammaGradA", a, x), fd, rtol=1e-7)
    # d sample / d alpha at fixed CDF: -(dP/da) / (dP/dx), dP/dx the gamma density
    pdf = np.exp((a - 1) * np.log(x) - x - np.array([math.lgamma(v) for v in a]))
    np.testing.assert_allclose(run("RandomGammaGrad", a, x), -fd / pdf, rtol=1e-7)


def test_zeta_and_polygamma_closed_forms() -> None:
    np.testing.assert_allclose(run("Zeta", [2.0, 4.0], [1.0, 1.0]), [PI2_6, math.pi ** 4 / 90],
                               rtol=1e-15)
    np.testing.assert_allclose(run("Polygamma", [1.0, 0.0], [1.0, 1.0]),
                               [PI2_6, -0.5772156649015329], rtol=1e-14)   # -Euler's gamma
    # zeta(2, q) = trigamma(q); q far below 0 sums 1e5 terms directly (blocks, not a loop per
    # term): trigamma(q) = pi^2 / sin^2(pi q) - trigamma(1 - q), trigamma(z) ~ 1/z + 1/2z^2 ...
    q = -100000.5
    z = 1 - q
    want = math.pi ** 2 - (1 / z + 1 / (2 * z * z) + 1 / (6 * z ** 3))
    t = time.process_time()
    got = run("Zeta", [2.0], [q])
    assert time.process_time() - t < 5
    np.testing.assert_allclose(got, [want], rtol=1e-10)


def test_betainc_closed_forms_and_symmetry() -> None:
    x = np.linspace(0, 1, 11)
    np.testing.assert_allclose(run("Betainc", 1.0, 1.0, x), x, rtol=1e-15, atol=1e-16)
    np.testing.assert_allclose(run("Betainc", 2.0, 1.0, x), x * x, rtol=1e-14, atol=1e-16)
    a, b, xs = np.array([0.5, 3.0, 40.0]), np.array([2.0, 0.7, 35.0]), np.array([0.3, 0.6, 0.52])
    np.testing.assert_allclose(run("Betainc", a, b, xs) + run("Betainc", b, a, 1 - xs), 1.0,
                               rtol=1e-13)


def test_float32_and_float16_follow_float64() -> None:
    x = np.array([1e-3, 0.5, 1.0, 3.0, 9.0, 30.0])
    for op in ("BesselI1e", "BesselK1", "BesselY0"):
        want = run(op, x)
        np.testing.assert_allclose(run(op, x, dtype=F32), want, rtol=2e-6)
        got16 = run(op, x, dtype=np.float16)
        assert got16.dtype == np.float16
        np.testing.assert_allclose(got16, want, rtol=2e-3, atol=1e-4)


def _inputs(op: str, n: int, rng: np.random.Generator) -> tuple:
    u = rng.uniform(0, 30, n).astype(F32)
    if op == "Betainc":
        return u, u[::-1].copy(), rng.uniform(0, 1, n).astype(F32)
    if op in ("Ndtri",):
        return (rng.uniform(0, 1, n).astype(F32),)
    if op == "Erfinv":
        return (rng.uniform(-1, 1, n).astype(F32),)
    if op in ("Zeta",):
        return u + 1, u[::-1].copy()
    if op == "Polygamma":
        return np.floor(u / 6), u - 5
    if op in ("Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad", "NextAfter"):
        return u + 0.1, u[::-1].copy()
    return (u - 15,)


@pytest.mark.parametrize("op", [
    "BesselI0", "BesselI0e", "BesselI1", "BesselI1e", "BesselJ0", "BesselJ1", "BesselK0",
    "BesselK0e", "BesselK1", "BesselK1e", "BesselY0", "BesselY1", "Igamma", "Igammac",
    "IgammaGradA", "RandomGammaGrad", "Betainc", "Erfinv", "Ndtri", "Polygamma", "Zeta",
    "Dawsn", "Expint", "FresnelCos", "FresnelSin", "Spence", "NextAfter"])
def test_large_inputs_stay_vectorized(op: str) -> None:
    """100k floats in well under a second: a per-element Python loop would take minutes."""
    xs = _inputs(op, 100_000, np.random.default_rng(0))
    invoke(op, *xs)
    t = time.process_time()
    r = invoke(op, *xs)
    assert time.process_time() - t < 1.0
    assert r.shape == (100_000,) and r.dtype == F32
