"""Random kernels: RandomUniform, RandomStandardNormal, TruncatedNormal, RandomUniformInt,
Multinomial.

TensorFlow draws from Philox streams that are not reproduced here bit for bit. These kernels
draw from a numpy ``Generator`` instead, with TensorFlow's distribution, shape and dtype:

* With ``seed`` and ``seed2`` both 0 the op is nondeterministic (fresh OS entropy), as in TF.
* Otherwise the generator is seeded from ``(seed, seed2)`` and lives as long as the session
  (kept in ``ctx.resources`` under the node's name): the n-th execution of a node gives the
  same values in every session, and successive executions give fresh values, just as TF's
  per-kernel generator does. Called outside a session (``invoke`` without resources) a seeded
  op returns its first draw every time.

Value ranges follow TF: uniform floats in [0, 1), integers in [minval, maxval), truncated
normals within two standard deviations, Multinomial classes in [0, num_classes) drawn from
softmax(logits) (non-finite logits never drawn; a row with no finite logit gives num_classes).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel

_CONTAINER = "__dfg_random__"
_U64 = 1 << 64


class _NodeGenerator:
    """A node's seeded generator; the lock keeps concurrent executions' draws disjoint."""

    __slots__ = ("gen", "lock")

    def __init__(self, seed: int, seed2: int) -> None:
        self.gen = np.random.default_rng([seed % _U64, seed2 % _U64])
        self.lock = threading.Lock()


def _generator(ctx: KernelContext) -> tuple[np.random.Generator, Any]:
    seed = int(ctx.attrs.get("seed", 0) or 0)
    seed2 = int(ctx.attrs.get("seed2", 0) or 0)
    if seed == 0 and seed2 == 0:
        return np.random.default_rng(), None
    res = ctx.resources
    if res is None or not hasattr(res, "lookup_or_create"):
        return _NodeGenerator(seed, seed2).gen, None
    ng = res.lookup_or_create((_CONTAINER, ctx.node), lambda: _NodeGenerator(seed, seed2))
    return ng.gen, ng.lock


def _draw(ctx: KernelContext, fn: Any) -> np.ndarray:
    gen, lock = _generator(ctx)
    if lock is None:
        return fn(gen)
    with lock:
        return fn(gen)


def _shape(shape: np.ndarray) -> tuple[int, ...]:
    s = np.asarray(shape)
    if s.ndim != 1 or s.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"shape must be a vector of {{int32,int64}}, got shape "
            f"[{','.join(map(str, s.shape))}]")
    dims = tuple(int(d) for d in s.tolist())
    for d in dims:
        if d < 0:
            raise InvalidArgumentError(f"Dimension {d} must be >= 0")
    return dims


def _float_dtype(ctx: KernelContext) -> np.dtype:
    dt = ctx.attrs.get("dtype")
    if not isinstance(dt, np.dtype) or dt.kind != "f":
        raise InvalidArgumentError(f"dtype must be half, float or double, found {dt}")
    return dt


def _uniform(gen: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    if dt == np.float16:
        # 10 random mantissa bits: every half in [0, 1) on TF's grid, never rounding up to 1.
        return (gen.integers(0, 1 << 10, size=shape) * 2.0 ** -10).astype(dt)
    return gen.random(size=shape, dtype=np.float64 if dt == np.float64 else np.float32) \
        .astype(dt, copy=False)


def _normal(gen: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    wide = np.float64 if dt == np.float64 else np.float32
    return gen.standard_normal(size=shape, dtype=wide).astype(dt, copy=False)


def _truncated(gen: np.random.Generator, shape: tuple[int, ...], dt: np.dtype) -> np.ndarray:
    wide = np.dtype(np.float64 if dt == np.float64 else np.float32)
    out = gen.standard_normal(size=shape, dtype=wide)
    # Redraw everything outside two standard deviations (about 4.6% per round).
    bad = np.abs(out) > 2
    while bad.any():
        out[bad] = gen.standard_normal(size=int(bad.sum()), dtype=wide)
        bad = np.abs(out) > 2
    return out.astype(dt, copy=False)


@kernel("RandomUniform")
def random_uniform(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    dims, dt = _shape(shape), _float_dtype(ctx)
    return _draw(ctx, lambda g: _uniform(g, dims, dt))


@kernel("RandomStandardNormal")
def random_standard_normal(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    dims, dt = _shape(shape), _float_dtype(ctx)
    return _draw(ctx, lambda g: _normal(g, dims, dt))


@kernel("TruncatedNormal")
def truncated_normal(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    dims, dt = _shape(shape), _float_dtype(ctx)
    return _draw(ctx, lambda g: _truncated(g, dims, dt))


@kernel("RandomUniformInt")
def random_uniform_int(ctx: KernelContext, shape: np.ndarray, minval: np.ndarray,
                       maxval: np.ndarray) -> np.ndarray:
    dims = _shape(shape)
    for name, v in (("minval", minval), ("maxval", maxval)):
        if v.ndim != 0:
            raise InvalidArgumentError(
                f"{name} must be 0-D, got shape [{','.join(map(str, v.shape))}]")
    dt = minval.dtype
    n = int(np.prod(dims, dtype=np.int64))
    lo, hi = int(minval), int(maxval)
    if n == 0:
        return np.zeros(dims, dt)
    if lo >= hi:
        raise InvalidArgumentError(f"Need minval < maxval, got {lo} >= {hi}")
    return _draw(ctx, lambda g: g.integers(lo, hi, size=dims, dtype=dt))


@kernel("Multinomial")
def multinomial(ctx: KernelContext, logits: np.ndarray, num_samples: np.ndarray) -> np.ndarray:
    if logits.ndim != 2:
        raise InvalidArgumentError(
            f"logits should be a matrix, got shape [{','.join(map(str, logits.shape))}]")
    if np.ndim(num_samples) != 0:
        raise InvalidArgumentError(
            f"num_samples should be a scalar, got shape {list(np.shape(num_samples))}")
    n = int(num_samples)
    if n < 0:
        raise InvalidArgumentError(f"num_samples should be non-negative, got {n}")
    batch, classes = logits.shape
    if classes <= 0:
        raise InvalidArgumentError(f"num_classes should be positive, got {classes}")
    out_dt = np.dtype(ctx.attrs.get("output_dtype") or np.int64)
    if batch == 0 or n == 0:
        return np.zeros((batch, n), out_dt)
    lg = logits.astype(np.float64)
    finite = np.isfinite(lg)
    top = np.max(np.where(finite, lg, -np.inf), axis=1, keepdims=True)
    weights = np.where(finite, np.exp(lg - np.where(np.isfinite(top), top, 0)), 0.0)
    cdf = np.cumsum(weights, axis=1)
    total = cdf[:, -1:]
    u = _draw(ctx, lambda g: g.random((batch, n)))
    # One batched search: row r's CDF (normalised to [0, 1]) is shifted by 2r so every row
    # occupies its own interval of one sorted array.
    norm = np.where(total > 0, cdf / np.where(total > 0, total, 1), 2.0)
    offs = 2.0 * np.arange(batch)[:, None]
    pos = np.searchsorted((norm + offs).ravel(), (u + offs).ravel(), side="right")
    cls = pos.reshape(batch, n) - classes * np.arange(batch)[:, None]
    cls = np.where(total > 0, np.minimum(cls, classes - 1), classes)
    return cls.astype(out_dt)
