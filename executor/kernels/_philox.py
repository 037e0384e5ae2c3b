"""TensorFlow's random bits, reproduced with numpy: Philox4x32-10 and the number transforms.

* :func:`blocks` runs Philox4x32-10 (TensorFlow's ``PhiloxRandom``) on many counters at once.
  A generator is a 64-bit ``key`` and a 128-bit ``counter`` (Python ints); each call of TF's
  generator yields the four uint32 of one counter value and then adds one to the counter
  (128-bit), so "block ``i``" is the output for ``counter + i``.
* :func:`seed_to_key_counter` is TF's ``GenerateKey`` (the seed scrambling of the stateless
  ops); :func:`seeds_to_key_counter` is ``GuardedPhiloxRandom::Init(seed, seed2)``.
* The transforms are TF's ``random_distributions.h``: uniform floats from mantissa bits,
  Box-Muller normals in float (with glibc's ``logf`` and ``sincosf``, re-done below bit for
  bit) and in double, and the mod-based uniform integers.

glibc (2.28 and later, as on the Linux machines TensorFlow's wheels run on) computes
``logf``, ``expf`` and ``sincosf`` in double precision from small tables and polynomials; the
functions below evaluate the same tables and polynomials (the data of ARM's
optimized-routines, which glibc uses) in numpy float64, so the float results are glibc's.
Double precision ``log``/``exp``/``sin``/``cos``/``log1p``/``pow`` go through Python's
``math`` module, which calls the C library TF also calls (:func:`libm`), so float64 draws are
the platform's bits too (at the cost of one C call per element).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

U32 = np.dtype(np.uint32)
_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1

# Philox4x32-10 constants (the Random123 paper's).
_MUL_A = np.uint64(0xD2511F53)
_MUL_B = np.uint64(0xCD9E8D57)
_WEYL_A = 0x9E3779B9
_WEYL_B = 0xBB67AE85
_SH32 = np.uint64(32)
_LO32 = np.uint64(_M32)


def add128(counter: int, n: int) -> int:
    """``counter`` skipped by ``n`` blocks (PhiloxRandom::Skip), modulo 2**128."""
    return (counter + n) & _M128


def blocks(key: int, counter: int, offsets: np.ndarray | int) -> np.ndarray:
    """Philox outputs for ``counter + offsets`` (an int: the first ``offsets`` blocks).

    Returns uint32 of shape ``offsets.shape + (4,)``."""
    if isinstance(offsets, (int, np.integer)):
        offsets = np.arange(int(offsets), dtype=np.uint64)
    off = np.asarray(offsets, dtype=np.uint64)
    lo0 = np.uint64(counter & _M64)
    hi0 = np.uint64((counter >> 64) & _M64)
    lo = lo0 + off                              # wraps modulo 2**64
    hi = hi0 + (lo < off).astype(np.uint64)     # carry into the upper half
    c0, c1 = lo & _LO32, lo >> _SH32
    c2, c3 = hi & _LO32, hi >> _SH32
    k0, k1 = key & _M32, (key >> 32) & _M32
    for r in range(10):
        ka = np.uint64((k0 + r * _WEYL_A) & _M32)
        kb = np.uint64((k1 + r * _WEYL_B) & _M32)
        p0 = _MUL_A * c0                        # < 2**64: exact
        p1 = _MUL_B * c2
        c0, c1, c2, c3 = (p1 >> _SH32) ^ c1 ^ ka, p1 & _LO32, (p0 >> _SH32) ^ c3 ^ kb, p0 & _LO32
    out = np.empty(off.shape + (4,), U32)
    out[..., 0], out[..., 1], out[..., 2], out[..., 3] = c0, c1, c2, c3
    return out


def stream(key: int, counter: int, n: int) -> np.ndarray:
    """The first ``n`` uint32 of the generator, in the order TF hands them out."""
    return blocks(key, counter, (n + 3) // 4).reshape(-1)[:n]


def seed_to_key_counter(seed0: int, seed1: int) -> tuple[int, int]:
    """TF's GenerateKey: the stateless ops' scrambling of a two-int64 seed."""
    s0, s1 = seed0 & _M64, seed1 & _M64
    mix = blocks(0x02461E29_3EC8F720, s0 | (s1 << 64), 1)[0].tolist()
    return mix[0] | (mix[1] << 32), (mix[2] | (mix[3] << 32)) << 64


def seeds_to_key_counter(seed: int, seed2: int) -> tuple[int, int]:
    """GuardedPhiloxRandom::Init(seed, seed2): key from seed, counter's upper half seed2;
    both 0 means fresh random seeds, as in TF."""
    if seed == 0 and seed2 == 0:
        seed, seed2 = (int.from_bytes(os.urandom(8), "little") for _ in range(2))
    return seed & _M64, (seed2 & _M64) << 64


def key_counter_from_arrays(key: np.ndarray, counter: np.ndarray) -> tuple[int, int]:
    """A generator from the uint64 key [1] and counter [2] tensors of the V2 ops."""
    k = int(key.reshape(-1)[0])
    c = [int(x) for x in counter.reshape(-1)[:2]]
    return k, c[0] | (c[1] << 64)


# --- the C library's double precision functions, elementwise ----------------------------------

def libm(fn: Callable[..., float], *args: np.ndarray) -> np.ndarray:
    """``fn`` (a ``math`` function: the C library's) over float64 arrays; inputs where the
    C function would not return a finite result in the normal way fall back to numpy's
    ufunc of the same name (``-inf`` for log(0), ``inf`` on overflow, nan ...)."""
    arrs = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in args))
    x = arrs[0]
    out = getattr(np, _NP_NAMES[fn.__name__])(*arrs)
    with np.errstate(all="ignore"):
        ok = np.isfinite(out)
        for a in arrs:
            ok &= np.isfinite(a)
        if fn is math.log:
            ok &= x > 0
        elif fn is math.log1p:
            ok &= x > -1
        elif fn is math.pow:
            ok &= x >= 0
    if ok.all():
        vals = map(fn, *(a.ravel().tolist() for a in arrs))
        return np.fromiter(vals, np.float64, count=x.size).reshape(x.shape)
    sel = [a[ok].tolist() for a in arrs]
    out[ok] = np.fromiter(map(fn, *sel), np.float64, count=len(sel[0]))
    return out


_NP_NAMES = {"log": "log", "log1p": "log1p", "exp": "exp", "sin": "sin", "cos": "cos",
             "pow": "power"}


# --- uniform transforms -------------------------------------------------------------------

def uniform_float(x: np.ndarray) -> np.ndarray:
    """float32 in [0, 1) from the 23 low bits of each uint32 (Uint32ToFloat)."""
    return ((x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def uniform_half(x: np.ndarray) -> np.ndarray:
    """float16 in [0, 1) from the 10 low bits of each uint32 (Uint16ToHalf)."""
    h = ((x & np.uint32(0x3FF)) | np.uint32(15 << 10)).astype(np.uint16).view(np.float16)
    return h - np.float16(1)


def uniform_bfloat16(x: np.ndarray) -> np.ndarray:
    """bfloat16 in [0, 1) from the 7 low bits of each uint32 (InternalUint16ToBfloat16: the
    bits under exponent 127 give [1, 2), less one), as the float32 values dfg holds."""
    return (x & np.uint32(0x7F)).astype(np.float32) * np.float32(1 / 128)


def uniform_double(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """float64 in [0, 1) from 20 bits of ``hi`` and all of ``lo`` (Uint64ToDouble)."""
    m = ((hi & np.uint32(0xFFFFF)).astype(np.uint64) << _SH32) | lo.astype(np.uint64)
    return (m | np.uint64(1023 << 52)).view(np.float64) - 1.0


def uniform_real(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """UniformDistribution<dtype> over a uint32 stream (float64 takes two words each)."""
    if dtype == np.float64:
        return uniform_double(x[0::2], x[1::2])
    if dtype == np.float16:
        return uniform_half(x)
    return uniform_float(x)


# --- normal transforms --------------------------------------------------------------------

_TWO_PI = 2.0 * np.pi


def box_muller_float(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BoxMullerFloat: two float32 normals per pair of uint32."""
    u1 = np.maximum(uniform_float(x0), np.float32(1.0e-7))
    v1 = (_TWO_PI * uniform_float(x1).astype(np.float64)).astype(np.float32)
    u2 = np.sqrt(np.float32(-2.0) * logf(u1))
    s, c = sincosf(v1)
    return s * u2, c * u2


def box_muller_double(x0: np.ndarray, x1: np.ndarray, x2: np.ndarray,
                      x3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BoxMullerDouble: two float64 normals per four uint32."""
    u1 = np.maximum(uniform_double(x0, x1), 1.0e-7)
    v1 = _TWO_PI * uniform_double(x2, x3)
    u2 = np.sqrt(-2.0 * libm(math.log, u1))
    return libm(math.sin, v1) * u2, libm(math.cos, v1) * u2


def normal_real(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """NormalDistribution<dtype> over a uint32 stream whose length is a multiple of 4;
    float16 is the float32 result rounded."""
    if dtype == np.float64:
        q = x.reshape(-1, 4)
        d0, d1 = box_muller_double(q[:, 0], q[:, 1], q[:, 2], q[:, 3])
        return np.stack([d0, d1], 1).reshape(-1)
    p = x.reshape(-1, 2)
    f0, f1 = box_muller_float(p[:, 0], p[:, 1])
    out = np.stack([f0, f1], 1).reshape(-1)
    return out.astype(dtype) if dtype == np.float16 else out


# --- glibc's single precision logf, expf and sincosf ----------------------------------------

_h = float.fromhex
_LOGF_INVC = np.array([_h(s) for s in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010bp+0",
    "0x1.3c995b0b80385p+0", "0x1.30d190c8864a5p+0", "0x1.25e227b0b8eap+0",
    "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0", "0x1.0953f419900a7p+0", "0x1p+0",
    "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aap-1", "0x1.b2036576afce6p-1",
    "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1", "0x1.767dcf5534862p-1")])
_LOGF_LOGC = np.array([_h(s) for s in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2",
    "-0x1.b31d8a68224e9p-3", "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c81p-3",
    "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4", "-0x1.252f438e10c1ep-5", "0x0p+0",
    "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4", "0x1.526e57720db08p-3",
    "0x1.bc2860d22477p-3", "0x1.1058bc8a07ee1p-2", "0x1.4043057b6ee09p-2")])
_LOGF_A = (_h("-0x1.00ea348b88334p-2"), _h("0x1.5575b0be00b6ap-2"), _h("-0x1.ffffef20a4123p-2"))
_LN2 = _h("0x1.62e42fefa39efp-1")


def logf(x: np.ndarray) -> np.ndarray:
    """glibc's logf of float32 ``x`` (log1p polynomial around a 16-entry table)."""
    x = np.asarray(x, np.float32)
    ix = x.view(np.uint32).copy()
    sub = (ix > 0) & (ix < 0x00800000)
    if sub.any():  # subnormals: scale into the normal range first
        ix[sub] = (x[sub] * np.float32(2.0 ** 23)).view(np.uint32) - np.uint32(23 << 23)
    tmp = ix - np.uint32(0x3F330000)
    i = (tmp >> np.uint32(19)) & np.uint32(15)
    k = tmp.view(np.int32) >> np.int32(23)
    z = (ix - (tmp & np.uint32(0xFF800000))).view(np.float32).astype(np.float64)
    r = z * _LOGF_INVC[i] - 1.0
    y0 = _LOGF_LOGC[i] + k.astype(np.float64) * _LN2
    r2 = r * r
    y = _LOGF_A[1] * r + _LOGF_A[2]
    y = _LOGF_A[0] * r2 + y
    y = y * r2 + (y0 + r)
    out = y.astype(np.float32)
    # The special inputs, as glibc returns them.
    if not (ix - np.uint32(0x00800000) < np.uint32(0x7F800000 - 0x00800000)).all() \
            or (x == 1).any():
        out = np.where(x == 1, np.float32(0), out)
        out = np.where(x == 0, np.float32(-np.inf), out)
        out = np.where(x < 0, np.float32(np.nan), out)
        out = np.where(np.isnan(x) | (x == np.inf), x, out)
    return out


_EXP2F_TAB = np.array([
    0x3FF0000000000000, 0x3FEFD9B0D3158574, 0x3FEFB5586CF9890F, 0x3FEF9301D0125B51,
    0x3FEF72B83C7D517B, 0x3FEF54873168B9AA, 0x3FEF387A6E756238, 0x3FEF1E9DF51FDEE1,
    0x3FEF06FE0A31B715, 0x3FEEF1A7373AA9CB, 0x3FEEDEA64C123422, 0x3FEECE086061892D,
    0x3FEEBFDAD5362A27, 0x3FEEB42B569D4F82, 0x3FEEAB07DD485429, 0x3FEEA47EB03A5585,
    0x3FEEA09E667F3BCD, 0x3FEE9F75E8EC5F74, 0x3FEEA11473EB0187, 0x3FEEA589994CCE13,
    0x3FEEACE5422AA0DB, 0x3FEEB737B0CDC5E5, 0x3FEEC49182A3F090, 0x3FEED503B23E255D,
    0x3FEEE89F995AD3AD, 0x3FEEFF76F2FB5E47, 0x3FEF199BDD85529C, 0x3FEF3720DCEF9069,
    0x3FEF5818DCFBA487, 0x3FEF7C97337B9B5F, 0x3FEFA4AFA2A490DA, 0x3FEFD0765B6E4540],
    dtype=np.uint64)
_EXPF_C = (_h("0x1.c6af84b912394p-5") / 32 ** 3, _h("0x1.ebfce50fac4f3p-3") / 32 ** 2,
           _h("0x1.62e42ff0c52d6p-1") / 32)
_EXPF_INVLN2N = _h("0x1.71547652b82fep+0") * 32
_EXPF_SHIFT = _h("0x1.8p+52")


def expf(x: np.ndarray) -> np.ndarray:
    """glibc's expf of float32 ``x`` (2^(k/32) table times a cubic)."""
    x = np.asarray(x, np.float32)
    xd = x.astype(np.float64)
    z = _EXPF_INVLN2N * xd
    kd = z + _EXPF_SHIFT                        # rounds z to an integer (ties to even)
    ki = kd.view(np.uint64)
    kd = kd - _EXPF_SHIFT
    r = z - kd
    t = _EXP2F_TAB[ki & np.uint64(31)] + (ki << np.uint64(47))
    s = t.view(np.float64)
    zz = _EXPF_C[0] * r + _EXPF_C[1]
    r2 = r * r
    y = _EXPF_C[2] * r + 1
    y = zz * r2 + y
    out = (y * s).astype(np.float32)
    big = np.abs(x) >= np.float32(88.0)
    if big.any() or np.isnan(x).any():  # overflow, underflow, inf and nan as glibc has them
        out = np.where(x > np.float32(_h("0x1.62e42ep6")), np.float32(np.inf), out)
        out = np.where(x < np.float32(_h("-0x1.9fe368p6")), np.float32(0), out)
        out = np.where(np.isnan(x), x, out)
    return out


# sincosf: cos polynomial c0..c4, sin polynomial s1..s3 (the second table negates cos).
_SC_C = (1.0, _h("-0x1.ffffffd0c621cp-2"), _h("0x1.55553e1068f19p-5"),
         _h("-0x1.6c087e89a359dp-10"), _h("0x1.99343027bf8c3p-16"))
_SC_S = (_h("-0x1.555545995a603p-3"), _h("0x1.1107605230bc4p-7"), _h("-0x1.994eb3774cf24p-13"))
_HPI_INV = _h("0x1.45F306DC9C883p+23")     # 2/pi * 2**24
_HPI = _h("0x1.921FB54442D18p0")


def _abstop12(v: float) -> int:
    return (int(np.float32(v).view(np.uint32)) >> 20) & 0x7FF


def sincosf(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """glibc's sincosf of float32 ``y``, for |y| < 120 (all Box-Muller needs)."""
    y = np.asarray(y, np.float32)
    top = (y.view(np.uint32) >> np.uint32(20)) & np.uint32(0x7FF)
    if (top >= _abstop12(120.0)).any():
        raise ValueError("sincosf emulation covers |y| < 120 only")
    x = y.astype(np.float64)
    small = top < _abstop12(_h("0x1.921FB54442D18p-1"))
    n = np.zeros(x.shape, np.int64)
    mid = ~small
    if mid.any():
        r = x[mid] * _HPI_INV
        n[mid] = (np.trunc(r).astype(np.int64) + 0x800000) >> 24
        x = np.where(mid, x - n * _HPI, x)
    sign = np.where((n & 3) == 1, -1.0, np.where((n & 3) == 2, -1.0, 1.0))
    neg = np.where(n & 2, -1.0, 1.0)            # the second table: cosine negated
    xs = x * sign
    x2 = x * x
    x3 = x2 * xs
    x4 = x2 * x2
    c2 = neg * _SC_C[3] + x2 * (neg * _SC_C[4])
    s1 = _SC_S[1] + x2 * _SC_S[2]
    c1 = neg * _SC_C[0] + x2 * (neg * _SC_C[1])
    x5 = x3 * x2
    x6 = x4 * x2
    s = xs + x3 * _SC_S[0]
    c = c1 + x4 * (neg * _SC_C[2])
    sp = (s + x5 * s1).astype(np.float32)
    cp = (c + x6 * c2).astype(np.float32)
    odd = (n & 1) == 1
    sin_out = np.where(odd, cp, sp)
    cos_out = np.where(odd, sp, cp)
    tiny = top < _abstop12(2.0 ** -12)
    if tiny.any():
        sin_out = np.where(tiny, y, sin_out)
        cos_out = np.where(tiny, np.float32(1), cos_out)
    return sin_out, cos_out
