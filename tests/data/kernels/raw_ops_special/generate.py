"""Expected values for the special-function kernels (Bessel functions, incomplete gamma and
beta, erfinv/ndtri, polygamma, zeta, Dawson, Ei, Fresnel, Spence, NextAfter), computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_special/generate.py

Inputs cover small, moderate and large arguments (each algorithm's branch points: Bessel at
2, 5, 8; Igamma's switch from its series to its continued fraction at x = max(1, a)), zeros,
negative arguments, NaN and +-inf. TensorFlow's CPU kernels run with denormals flushed to
zero, which shows in a few edge values (K0(100) in float32 is 0).

Tolerances (``tol``, used as rtol and atol): float32 cases 1e-6, float64 1e-12 (TensorFlow
and dfg take the same float or double steps; seen: below 3e-7 and 2e-16, most values equal to
the bit), float16 the default 1e-2. The incomplete gamma and beta functions hinge on glibc's
lgamma/lgammaf, which dfg reproduces (fdlibm's algorithm, glibc <= 2.40): with a correctly
rounded lgamma (newer glibc) TensorFlow's float results move by up to ~1e-5 at a, b ~ 30 and
1e-4 at a ~ 1000, which these cases would see. Half types raise NotFoundError where
TensorFlow has no kernel (everything but the Bessel functions).
"""

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, op, raw, write  # noqa: E402

rawgen.begin(HERE)
f16 = np.float16
inf, nan = np.inf, np.nan
T32, T64 = 1e-6, 1e-12

# --- unary ops --------------------------------------------------------------------------------
# Bessel: 1e-3, 1, 30, 700 and each branch point; negatives, zeros, inf, NaN.
BESSEL_X = [-700, -30, -8.5, -2.5, -1, -1e-3, -0.0, 0, 1e-6, 1e-3, 0.5, 1, 1.9, 2, 2.1, 4.9, 5,
            5.1, 7.9, 8, 8.1, 15, 30, 80, 100, 700, 1e4, inf, -inf, nan]
for name in ["BesselI0", "BesselI0e", "BesselI1", "BesselI1e", "BesselJ0", "BesselJ1",
             "BesselK0", "BesselK0e", "BesselK1", "BesselK1e", "BesselY0", "BesselY1"]:
    op(name, dict(x=np.array(BESSEL_X, f32)), tol=T32, note="float32")
    op(name, dict(x=np.array(BESSEL_X, f64)), tol=T64, note="float64")
    op(name, dict(x=np.array(BESSEL_X[:-4], f16).reshape(2, 13)), note="float16, 2-D")
op("BesselI0e", dict(x=np.zeros((0, 3), f32)), note="empty")
op("BesselJ0", dict(x=np.array(2.5, f64)), tol=T64, note="scalar")

UNARY_X = [-1e10, -30, -6.3, -3.3, -1, -1e-3, -0.0, 0, 1e-3, 0.5, 1, 1.5, 1.7, 2, 2.5, 3.2,
           3.3, 4, 6.2, 6.3, 8, 16, 32, 64, 88, 100, 700, 4e4, 1e10, inf, -inf, nan]
for name in ["Dawsn", "Expint", "FresnelCos", "FresnelSin", "Spence"]:
    op(name, dict(x=np.array(UNARY_X, f32)), tol=T32, note="float32")
    op(name, dict(x=np.array(UNARY_X, f64)), tol=T64, note="float64")
    op(name, dict(x=np.array([0.5, 1], f16)), note="float16: no kernel")

P = [0, 1e-300, 1e-30, 1e-10, 0.01, 0.1, 0.13533528323661269, 0.2, 0.5, 0.8,
     0.86466471676338731, 0.9, 0.999, 1 - 1e-9, 1, -0.5, 1.5, inf, nan]
op("Ndtri", dict(x=np.array(P, f64)), tol=T64, note="float64, 0 and 1 give -inf/inf")
op("Ndtri", dict(x=np.array(P[2:], f32)), tol=T32, note="float32")
op("Ndtri", dict(x=np.array([0.5], f16)), note="float16: no kernel")
E = [-1, -0.999999, -0.99, -0.5, -1e-3, 0, 1e-8, 0.3, 0.5, 0.9, 0.99, 0.999999, 1, -1.5, 1.5,
     inf, nan]
op("Erfinv", dict(x=np.array(E, f64)), tol=T64, note="float64, +-1 give +-inf")
op("Erfinv", dict(x=np.array(E, f32).reshape(1, 17)), tol=T32, note="float32")
op("Erfinv", dict(x=np.array([0.5], f16)), note="float16: no kernel")

# --- incomplete gamma ---------------------------------------------------------------------------
# a down a column, x across: both sides of x = max(1, a) where the series hands over to the
# continued fraction, plus x = 0, a <= 0, x < 0, infinities and NaN.
GA = np.array([0.01, 0.5, 1, 2.5, 3, 10, 30], f64).reshape(-1, 1)
GX = np.array([0, 1e-3, 0.5, 0.99, 1, 1.01, 2.9, 3, 3.1, 9.5, 10.5, 29, 31, 60], f64)
EA = np.array([0, -1, -0.5, 1, 1, 1, inf, nan, 2, 0, -1, inf], f64)
EX = np.array([1, 1, 0, -1, inf, nan, 5, 1, 0, 0, 0, inf], f64)
BIG_A = np.array([100, 500, 1000, 1000, 5000, 50, 200], f64)
BIG_X = np.array([90, 520, 950, 1100, 5050, 150, 180], f64)
for name in ["Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad"]:
    a_, x_ = ("alpha", "sample") if name == "RandomGammaGrad" else ("a", "x")
    op(name, {a_: GA.astype(f32), x_: GX.astype(f32)}, tol=T32, note="float32, broadcast grid")
    op(name, {a_: GA, x_: GX}, tol=T64, note="float64, broadcast grid")
    op(name, {a_: EA.astype(f32), x_: EX.astype(f32)}, tol=T32, note="float32 edges")
    op(name, {a_: EA, x_: EX}, tol=T64, note="float64 edges")
    op(name, {a_: BIG_A, x_: BIG_X}, tol=T64, note="float64, large a")
    op(name, {a_: BIG_A.astype(f32), x_: BIG_X.astype(f32)}, tol=T32, note="float32, large a")
    op(name, {a_: np.ones(2, f64), x_: np.ones(3, f64)}, note="incompatible shapes")
op("Igamma", dict(a=np.array(2.0, f32), x=np.zeros((0,), f32)), note="empty")
op("Igamma", dict(a=np.array([1], f16), x=np.array([1], f16)), note="float16: no kernel")
op("Igammac", dict(a=np.array([1], f16), x=np.array([1], f16)), note="float16: no kernel")

# --- zeta, polygamma ----------------------------------------------------------------------------
ZX = np.array([0.5, 1, 1.0001, 1.5, 2, 3, 4.5, 10, 50, inf, nan], f64).reshape(-1, 1)
ZQ = np.array([1e-3, 0.5, 1, 2.5, 9, 30, 1e4, 0, -1, -2.5, -20.5, inf, nan], f64)
op("Zeta", dict(x=ZX, q=ZQ), tol=T64, note="float64 grid: x < 1, q <= 0")
op("Zeta", dict(x=ZX.astype(f32), q=ZQ[:10].astype(f32)), tol=T32, note="float32 grid")
op("Zeta", dict(x=np.array([2, 3, 4], f64), q=np.array([-100.5, -1000.25, -3.75], f64)),
   tol=T64, note="float64, q far below 0 (long direct sum)")
op("Zeta", dict(x=np.ones(2, f32), q=np.ones(3, f32)), note="incompatible shapes")
PN = np.array([0, 1, 2, 3, 6, 0.5, -1, nan], f64).reshape(-1, 1)
PX = np.array([0.25, 1, 1.5, 3.5, 10, 100, 0, -1, -2.5, -0.3, inf, nan], f64)
op("Polygamma", dict(a=PN, x=PX), tol=T64, note="float64 grid: non-integer and negative order")
op("Polygamma", dict(a=PN.astype(f32), x=PX.astype(f32)), tol=T32, note="float32 grid")
op("Polygamma", dict(a=np.array([1, 2], f16), x=np.array([1, 2], f16)),
   note="float16: not an allowed type")

# --- incomplete beta ----------------------------------------------------------------------------
BA = np.array([0.1, 0.5, 1, 2, 5, 20, 0.5, 30, 3, 1, 0, -1, 1, 1, 2, nan, 1, 1], f64)
BB = np.array([0.2, 0.5, 3, 2, 0.5, 25, 30, 2, 30, 1, 1, 1, 0, 1, 2, 1, nan, 1], f64)
BX = np.array([0.3, 0.5, 0.9, 0.2, 0.99, 0.45, 0.01, 0.97, 0.05, 0, 0.5, 0.5, 0.5, 1, 1.5,
               0.5, 0.5, nan], f64)
op("Betainc", dict(a=BA, b=BB, x=BX), tol=T64, note="float64: branches and domain edges")
op("Betainc", dict(a=BA.astype(f32), b=BB.astype(f32), x=BX.astype(f32)), tol=T32,
   note="float32")
op("Betainc", dict(a=np.array([200, 1000, 50], f64), b=np.array([300, 900, 5000], f64),
                   x=np.array([0.4, 0.52, 0.01], f64)), tol=T64, note="float64, large a, b")
op("Betainc", dict(a=np.array([200, 1000, 50, 30], f32), b=np.array([300, 900, 5000, 25], f32),
                   x=np.array([0.4, 0.52, 0.01, 0.55], f32)), tol=T32, note="float32, large a, b")
op("Betainc", dict(a=np.array(2.0, f32), b=np.array(3.0, f32),
                   x=np.linspace(0, 1, 12, dtype=f32).reshape(3, 4)), tol=T32,
   note="scalar a, b broadcast")
op("Betainc", dict(a=np.array([1.0, 2.0], f64).reshape(2, 1), b=np.array(3.0, f64),
                   x=np.full((2, 1), 0.3, f64)), tol=T64, note="scalar b")
op("Betainc", dict(a=np.ones(3, f32), b=np.ones(3, f32), x=np.ones(2, f32)),
   note="x shape differs")
op("Betainc", dict(a=np.ones((3, 1), f64), b=np.ones(3, f64), x=np.array(0.5, f64)),
   note="a and b shapes differ (no broadcasting)")

# --- NextAfter ----------------------------------------------------------------------------------
NA = np.array([0, -0.0, 1, 1, -1, 1e-45, 3.4e38, inf, -inf, nan, 1, 2.5], f64)
NB = np.array([1, -1, 2, 0, -2, 0, inf, 0, 0, 1, nan, 2.5], f64)
op("NextAfter", dict(x1=NA.astype(f32), x2=NB.astype(f32)), tol=0, note="float32 (subnormals kept)")
op("NextAfter", dict(x1=NA, x2=NB), tol=0, note="float64")
op("NextAfter", dict(x1=np.array([1, 2, 3], f32).reshape(3, 1), x2=np.array([0, 5], f32)), tol=0,
   note="broadcast")
op("NextAfter", dict(x1=np.ones(2, f64), x2=np.ones(3, f64)), note="incompatible shapes")



# --- a small TF1 graph through dfg's Session ----------------------------------------------------
def special_chain():
    import tensorflow as tf

    a = tf.constant(np.array([0.5, 2.0, 10.0, 30.0], f32))
    x = tf.constant(np.array([0.3, 2.5, 9.0, 31.0], f32))
    p = raw.Igamma(a=a, x=x)
    z = raw.Erfinv(x=raw.Sub(x=raw.Mul(x=p, y=tf.constant(1.9, f32)), y=tf.constant(0.95, f32)))
    i1 = raw.BesselI1e(x=z)
    b = raw.Betainc(a=a, b=tf.constant(3.0, f32), x=p)
    g = raw.Zeta(x=raw.AddV2(x=a, y=tf.constant(1.5, f32)), q=x)
    return [([p, z, i1, b, g], [])]


graph("special_chain", special_chain, ["Igamma", "Erfinv", "BesselI1e", "Betainc", "Zeta"],
      tol=T32)

if __name__ == "__main__":
    write()
