"""Random kernels with TensorFlow's exact bits (Philox4x32-10, see ``_philox.py``).

The same values as TensorFlow 2.21's CPU kernels, bit for bit (checked against TF for every op
and dtype in tests/data/kernels/raw_ops_random/):

* Stateless ops (V1 with a ``seed`` pair, V2 with ``key``/``counter``/``alg``): uniform,
  normal, truncated normal, uniform and full-range integers, multinomial, binomial, Poisson,
  gamma, parameterized truncated normal and shuffle, with TF's seed scrambling, counter
  layout and per-output use of the 128-bit blocks. ``alg`` 1 (Philox) and 3 (auto-select,
  Philox on CPU) are accepted; TF's CPU kernels reject ThreeFry (2) and so do these.
* Seeded stateful ops (``seed`` or ``seed2`` nonzero): the node keeps TF's
  ``GuardedPhiloxRandom`` state in ``ctx.resources`` for the session's lifetime, so its n-th
  execution gives TF's n-th draw. Called outside a session (``invoke`` without resources) a
  seeded op returns its first draw every time. With ``seed == seed2 == 0`` TF picks random
  seeds: so do these kernels (values differ from session to session).
* ``tf.random.Generator`` ops read and advance the int64 state variable as TF does
  (``[counter_lo, counter_hi, key]``; ``StatefulStandardNormal`` has the algorithm first),
  rebinding the variable's value. ``NonDeterministicInts`` draws from the OS.

The floating-point math is TF's too: glibc's ``logf``/``expf``/``sincosf`` (which TF's float
Box-Muller and samplers call) are re-done bit for bit in numpy, and double precision
``log``/``exp``/``sin``/``cos``/``log1p``/``pow`` go through Python's ``math`` module, i.e. the
C library TF calls. TF runs its kernels with subnormals flushed to zero; so do these where it
shows (gamma draws of tiny alpha). bfloat16 (held as float32) is drawn as TF draws it: uniform
values from 7 bits, normals rounded from float32.

Where TF splits one op over its thread pool with shard-dependent streams (Multinomial,
ParameterizedTruncatedNormal), the shards are TF's (Eigen's ``parallelFor`` blocks for
:data:`TF_THREADS` intra-op threads, by default this machine's usable cores as in TF), so
large draws match a TF running with as many threads.

Known differences: inputs on which TF never accepts a draw (a NaN gamma alpha, Poisson rate or
binomial count) give NaN here instead of spinning forever; and TF's StatefulRandomBinomial
loses its state update while the variable's buffer is shared with the constant it was
assigned from (it writes to the buffer it read before copying it), which dfg does not mimic.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

from . import _philox as P
from .registry import BF16_ATTRS, KernelContext, kernel

_CONTAINER = "__dfg_random__"
_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)
_U32, _U64 = np.dtype(np.uint32), np.dtype(np.uint64)
_U64MAX = (1 << 64) - 1
_RESERVED = 256          # TF reserves 256 Philox blocks per output of a variable-length draw


def _dims(shape: Any) -> str:
    return "[" + ",".join(str(d) for d in np.shape(shape)) + "]"


# --- argument checks (TF's messages) --------------------------------------------------------

def _shape(shape: np.ndarray) -> tuple[int, ...]:
    """tensor::MakeShape: a vector of int32/int64, no negative dimension."""
    s = np.asarray(shape)
    if s.ndim != 1 or s.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"shape must be a vector of {{int32,int64}}, got shape {_dims(s)}")
    dims = tuple(int(d) for d in s.tolist())
    for d in dims:
        if d < 0:
            raise InvalidArgumentError(f"Dimension {d} must be >= 0")
    return dims


def _float_dtype(ctx: KernelContext, name: str = "dtype") -> np.dtype:
    dt = ctx.attrs.get(name)
    if not isinstance(dt, np.dtype) or dt not in (_F16, _F32, _F64):
        raise NotFoundError(f"No CPU kernel for {ctx.op} with {name}={dt}")
    return dt


# A uniform draw's dtype when the op's is bfloat16: float32 for everything but the draw,
# which takes 7 bits per value, not float32's 23 (only identity tells it from _F32)
_BF16 = np.dtype(np.float32, metadata={"dfg": "bfloat16"})


def _uniform_dtype(ctx: KernelContext) -> np.dtype:
    dt = _float_dtype(ctx)
    return _BF16 if "dtype" in ctx.attrs.get(BF16_ATTRS, ()) else dt


def _seed(seed: np.ndarray) -> tuple[int, int]:
    """A V1 stateless op's seed pair, scrambled into (key, counter)."""
    s = np.asarray(seed)
    if s.shape != (2,):
        raise InvalidArgumentError(f"seed must have shape [2], not {_dims(s)}")
    return P.seed_to_key_counter(int(s[0]), int(s[1]))


def _key_counter_alg(key: np.ndarray, counter: np.ndarray, alg: np.ndarray,
                     alg_index: int = 3) -> tuple[int, int, int]:
    """GetKeyCounterAlgFromInputs: (key, counter, algorithm); the caller rejects algorithms
    other than Philox (:func:`_philox_only`) where TF's kernel does."""
    a = np.asarray(alg)
    if a.ndim != 0:
        raise InvalidArgumentError(
            f"input {alg_index} (0-based) must have shape [], not {_dims(a)}")
    if a.dtype != _I32:
        raise InvalidArgumentError(
            f"dtype of input {alg_index} (0-based) must be int32, not {a.dtype}")
    algo = int(a)
    if algo == 3:  # RNG_ALG_AUTO_SELECT: Philox on CPU
        algo = 1
    k, c = np.asarray(key), np.asarray(counter)
    if k.shape != (1,):
        raise InvalidArgumentError(
            f"key must have shape [1], not {_dims(k)}. (Note that batched keys are not "
            "supported yet.)")
    # TF checks the counter against the algorithm id (1 for Philox) rather than its size.
    if c.ndim != 1 or c.shape[0] < max(algo, 0):
        raise InvalidArgumentError(
            f"counter must be a vector with length at least {algo}; got shape: {_dims(c)}. "
            "(Note that batched counters are not supported yet.)")
    words = [int(x) for x in c.astype(np.uint64).reshape(-1)[:2]] + [0]
    return int(k.astype(np.uint64)[0]), words[0] | (words[1] << 64), algo


def _philox_only(algo: int) -> None:
    if algo != 1:
        raise InvalidArgumentError(f"Unsupported algorithm id: {algo}")


def _scalar(v: np.ndarray, name: str) -> Any:
    if np.ndim(v) != 0:
        raise InvalidArgumentError(f"{name} must be 0-D, got shape {_dims(v)}")
    return np.asarray(v)[()]


def _ends_with(shape: tuple[int, ...], suffix: tuple[int, ...]) -> bool:
    return len(suffix) <= len(shape) and tuple(shape[len(shape) - len(suffix):]) == suffix


# --- TF's work sharding (Shard -> Eigen parallelFor), for the shard-dependent streams --------

# TF's intra-op thread count, which decides how the shard-dependent draws split: None means
# this machine's usable cores (TF's default).
TF_THREADS: int | None = None


def _tf_threads() -> int:
    if TF_THREADS:
        return TF_THREADS
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _shards(total: int, cost: int) -> list[tuple[int, int]]:
    """The [start, limit) ranges TF's Shard hands its work function (one per block)."""
    if total <= 0:
        return []
    threads = _tf_threads()
    want = int(((total * cost) - 100000) / 100000 + 0.9)
    if total == 1 or threads == 1 or min(threads, max(1, want)) == 1:
        return [(0, total)]
    size_f = 40000.0 / cost if cost > 0 else float("inf")
    block = min(total, max(-(-total // (4 * threads)), int(min(size_f, 2.0 ** 62))))
    max_block = min(total, 2 * block)
    count = -(-total // block)
    best = count / (-(-count // threads) * threads)
    prev = count
    while best < 1.0 and prev > 1:
        coarser = -(-total // (prev - 1))
        if coarser > max_block:
            break
        ccount = -(-total // coarser)
        prev = ccount
        eff = ccount / (-(-ccount // threads) * threads)
        if eff + 0.01 >= best:
            block, count = coarser, ccount
            best = max(best, eff)
    return [(s, min(s + block, total)) for s in range(0, total, block)]


# --- generators: stateless, GuardedPhiloxRandom (seeded nodes), Generator variables ----------

class _Guarded:
    """A node's GuardedPhiloxRandom; the lock keeps concurrent executions' draws disjoint."""

    __slots__ = ("key", "counter", "lock")

    def __init__(self, seed: int, seed2: int) -> None:
        self.key, self.counter = P.seeds_to_key_counter(seed, seed2)
        self.lock = threading.Lock()

    def reserve(self, nblocks: int) -> tuple[int, int]:
        with self.lock:
            c = self.counter
            self.counter = P.add128(c, nblocks & _U64MAX)
            return self.key, c


def _guarded(ctx: KernelContext) -> _Guarded:
    seed = int(ctx.attrs.get("seed", 0) or 0)
    seed2 = int(ctx.attrs.get("seed2", 0) or 0)
    res = ctx.resources
    if res is None or not hasattr(res, "lookup_or_create"):
        return _Guarded(seed, seed2)
    return res.lookup_or_create((_CONTAINER, ctx.node), lambda: _Guarded(seed, seed2))


def _reserve(ctx: KernelContext, nblocks: int) -> tuple[int, int]:
    return _guarded(ctx).reserve(nblocks)


# --- the fixed-size distributions (FillPhiloxRandom) ----------------------------------------

_MAX_ROUNDS = 1 << 16


def _rounds():
    """Round counter for the rejection loops: TF would spin forever on inputs that never
    accept (a NaN parameter, say); dfg stops with an error instead."""
    yield from range(_MAX_ROUNDS)
    raise InternalError("random sampler did not accept a sample (invalid parameters?)")


def _per_block(dt: np.dtype) -> int:
    """Outputs per Philox block of the float distributions (kResultElementCount)."""
    return 2 if dt == _F64 else 4


def _uniform(key: int, counter: int, n: int, dt: np.dtype) -> np.ndarray:
    nb = -(-n // _per_block(dt))
    x = P.blocks(key, counter, nb).reshape(-1)
    return (P.uniform_bfloat16(x) if dt is _BF16 else P.uniform_real(x, dt))[:n]


def _normal(key: int, counter: int, n: int, dt: np.dtype) -> np.ndarray:
    nb = -(-n // _per_block(dt))
    return P.normal_real(P.blocks(key, counter, nb).reshape(-1), dt)[:n]


def _truncated(key: int, counter: int, n: int, dt: np.dtype) -> np.ndarray:
    """TruncatedNormalDistribution: each group of outputs starts at its own reserved block
    range and rejects Box-Muller normals outside two standard deviations."""
    group = _per_block(dt)
    ngroups = -(-n // group)
    stride = np.uint64(group * _RESERVED // 4)
    wide = _F64 if dt == _F64 else _F32
    out = np.zeros((ngroups, group), wide)
    filled = np.zeros(ngroups, np.int64)
    active = np.arange(ngroups)
    for j in _rounds():
        if not active.size:
            break
        b = P.blocks(key, counter, active.astype(np.uint64) * stride + np.uint64(j))
        if dt == _F64:
            cand = np.stack(P.box_muller_double(b[:, 0], b[:, 1], b[:, 2], b[:, 3]), 1)
        else:
            f0, f1 = P.box_muller_float(b[:, 0], b[:, 1])
            g0, g1 = P.box_muller_float(b[:, 2], b[:, 3])
            cand = np.stack([f0, f1, g0, g1], 1)
        ok = np.abs(cand) < 2
        pos = filled[active][:, None] + np.cumsum(ok, 1) - 1
        take = ok & (pos < group)
        out[np.broadcast_to(active[:, None], ok.shape)[take], pos[take]] = cand[take]
        filled[active] = np.minimum(filled[active] + ok.sum(1), group)
        active = active[filled[active] < group]
    return out.reshape(-1)[:n].astype(dt, copy=False)


def _words64(key: int, counter: int, n: int) -> np.ndarray:
    x = P.blocks(key, counter, -(-n // 2)).reshape(-1)[:2 * n].astype(np.uint64)
    return x[0::2] | (x[1::2] << np.uint64(32))


def _uniform_int(key: int, counter: int, n: int, lo: int, hi: int, dt: np.dtype) -> np.ndarray:
    """UniformDistribution<int>: lo + bits % (hi - lo), the range taken unsigned."""
    if dt.itemsize == 4:
        span = np.uint32((hi - lo) & 0xFFFFFFFF)
        r = P.stream(key, counter, n) % span
        return (np.uint32(lo & 0xFFFFFFFF) + r).view(dt)
    span = np.uint64((hi - lo) & _U64MAX)
    return (np.uint64(lo & _U64MAX) + _words64(key, counter, n) % span).view(dt)


def _full_int(key: int, counter: int, n: int, dt: np.dtype) -> np.ndarray:
    if dt.itemsize == 4:
        return P.stream(key, counter, n).view(dt)
    return _words64(key, counter, n).view(dt)


def _fill(kind: str, key: int, counter: int, dims: tuple[int, ...], dt: np.dtype,
          lo: int = 0, hi: int = 0) -> np.ndarray:
    n = math.prod(dims)
    if n == 0:
        return np.zeros(dims, _F32 if dt is _BF16 else dt)
    if kind == "uniform":
        out = _uniform(key, counter, n, dt)
    elif kind == "normal":
        out = _normal(key, counter, n, dt)
    elif kind == "truncated":
        out = _truncated(key, counter, n, dt)
    elif kind == "int":
        out = _uniform_int(key, counter, n, lo, hi, dt)
    else:
        out = _full_int(key, counter, n, dt)
    return out.reshape(dims)


def _int_range(minval: np.ndarray, maxval: np.ndarray) -> tuple[int, int]:
    lo, hi = int(_scalar(minval, "minval")), int(_scalar(maxval, "maxval"))
    return lo, hi


def _check_range(lo: int, hi: int) -> None:
    if lo >= hi:
        raise InvalidArgumentError(f"Need minval < maxval, got {lo} >= {hi}")


# --- seeded stateful ops ------------------------------------------------------------------

def _stateful_fill(ctx: KernelContext, kind: str, shape: np.ndarray, dt: np.dtype,
                   lo: int = 0, hi: int = 0) -> np.ndarray:
    dims = _shape(shape)
    key, counter = _reserve(ctx, math.prod(dims) * _RESERVED)
    return _fill(kind, key, counter, dims, dt, lo, hi)


@kernel("RandomUniform")
def random_uniform(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    return _stateful_fill(ctx, "uniform", shape, _uniform_dtype(ctx))


@kernel("RandomStandardNormal")
def random_standard_normal(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    return _stateful_fill(ctx, "normal", shape, _float_dtype(ctx))


@kernel("TruncatedNormal")
def truncated_normal(ctx: KernelContext, shape: np.ndarray) -> np.ndarray:
    return _stateful_fill(ctx, "truncated", shape, _float_dtype(ctx))


@kernel("RandomUniformInt")
def random_uniform_int(ctx: KernelContext, shape: np.ndarray, minval: np.ndarray,
                       maxval: np.ndarray) -> np.ndarray:
    lo, hi = _int_range(minval, maxval)
    dims = _shape(shape)
    dt = minval.dtype
    if math.prod(dims) == 0:
        return np.zeros(dims, dt)
    _check_range(lo, hi)
    return _stateful_fill(ctx, "int", shape, dt, lo, hi)


# --- stateless ops ----------------------------------------------------------------------------

def _stateless_v1(kind: str, shape: np.ndarray, seed: np.ndarray, dt: np.dtype,
                  minval: np.ndarray | None = None, maxval: np.ndarray | None = None):
    dims = _shape(shape)
    key, counter = _seed(seed)
    if math.prod(dims) == 0:
        return np.zeros(dims, _F32 if dt is _BF16 else dt)
    lo = hi = 0
    if kind == "int":
        lo, hi = _int_range(minval, maxval)
        _check_range(lo, hi)
    return _fill(kind, key, counter, dims, dt, lo, hi)


def _stateless_v2(kind: str, shape: np.ndarray, key: np.ndarray, counter: np.ndarray,
                  alg: np.ndarray, dt: np.dtype, minval: np.ndarray | None = None,
                  maxval: np.ndarray | None = None):
    k, c, algo = _key_counter_alg(key, counter, alg)
    dims = _shape(shape)
    if math.prod(dims) == 0:
        return np.zeros(dims, _F32 if dt is _BF16 else dt)
    _philox_only(algo)
    lo = hi = 0
    if kind == "int":
        lo, hi = _int_range(minval, maxval)
        _check_range(lo, hi)
    return _fill(kind, k, c, dims, dt, lo, hi)


def _int_dtype(ctx: KernelContext, allowed: tuple[np.dtype, ...]) -> np.dtype:
    dt = ctx.attrs.get("dtype")
    if dt not in allowed:
        raise NotFoundError(f"No CPU kernel for {ctx.op} with dtype={dt}")
    return dt


@kernel("StatelessRandomUniform")
def stateless_random_uniform(ctx: KernelContext, shape, seed):
    return _stateless_v1("uniform", shape, seed, _uniform_dtype(ctx))


@kernel("StatelessRandomNormal")
def stateless_random_normal(ctx: KernelContext, shape, seed):
    return _stateless_v1("normal", shape, seed, _float_dtype(ctx))


@kernel("StatelessTruncatedNormal")
def stateless_truncated_normal(ctx: KernelContext, shape, seed):
    return _stateless_v1("truncated", shape, seed, _float_dtype(ctx))


@kernel("StatelessRandomUniformInt")
def stateless_random_uniform_int(ctx: KernelContext, shape, seed, minval, maxval):
    return _stateless_v1("int", shape, seed, _int_dtype(ctx, (_I32, _I64)), minval, maxval)


@kernel("StatelessRandomUniformFullInt")
def stateless_random_uniform_full_int(ctx: KernelContext, shape, seed):
    return _stateless_v1("full", shape, seed, _int_dtype(ctx, (_I32, _I64, _U32, _U64)))


@kernel("StatelessRandomUniformV2")
def stateless_random_uniform_v2(ctx: KernelContext, shape, key, counter, alg):
    return _stateless_v2("uniform", shape, key, counter, alg, _uniform_dtype(ctx))


@kernel("StatelessRandomNormalV2")
def stateless_random_normal_v2(ctx: KernelContext, shape, key, counter, alg):
    return _stateless_v2("normal", shape, key, counter, alg, _float_dtype(ctx))


@kernel("StatelessTruncatedNormalV2")
def stateless_truncated_normal_v2(ctx: KernelContext, shape, key, counter, alg):
    return _stateless_v2("truncated", shape, key, counter, alg, _float_dtype(ctx))


@kernel("StatelessRandomUniformIntV2")
def stateless_random_uniform_int_v2(ctx: KernelContext, shape, key, counter, alg, minval,
                                    maxval):
    # TF registers CPU kernels for int32 and int64 only.
    return _stateless_v2("int", shape, key, counter, alg, _int_dtype(ctx, (_I32, _I64)),
                         minval, maxval)


@kernel("StatelessRandomUniformFullIntV2")
def stateless_random_uniform_full_int_v2(ctx: KernelContext, shape, key, counter, alg):
    return _stateless_v2("full", shape, key, counter, alg,
                         _int_dtype(ctx, (_I32, _I64, _U32, _U64)))


def _key_counter_outputs(seed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(seed)
    if s.shape != (2,):
        raise InvalidArgumentError(f"seed must have shape [2], not {_dims(s)}")
    key, counter = P.seed_to_key_counter(int(s[0]), int(s[1]))
    return (np.array([key], np.uint64),
            np.array([counter & _U64MAX, counter >> 64], np.uint64))


@kernel("StatelessRandomGetKeyCounter", cheap=True)
def stateless_random_get_key_counter(ctx: KernelContext, seed):
    return _key_counter_outputs(seed)


@kernel("StatelessRandomGetKeyCounterAlg", cheap=True)
def stateless_random_get_key_counter_alg(ctx: KernelContext, seed):
    key, counter = _key_counter_outputs(seed)
    return key, counter, np.array(1, np.int32)


@kernel("StatelessRandomGetAlg", cheap=True)
def stateless_random_get_alg(ctx: KernelContext):
    return np.array(1, np.int32)


# --- Multinomial --------------------------------------------------------------------------

def _multinomial_draw(ctx: KernelContext, logits: np.ndarray, num_samples: np.ndarray,
                      reserve) -> np.ndarray:
    if logits.ndim != 2:
        raise InvalidArgumentError(f"logits should be a matrix, got shape {_dims(logits)}")
    if np.ndim(num_samples) != 0:
        raise InvalidArgumentError(
            f"num_samples should be a scalar, got shape {_dims(num_samples)}")
    n = int(num_samples)
    if n < 0:
        raise InvalidArgumentError(f"num_samples should be non-negative, got {n}")
    batch, classes = logits.shape
    if classes <= 0:
        raise InvalidArgumentError(f"num_classes should be positive, got {classes}")
    if logits.dtype not in (_F16, _F32, _F64):
        raise NotFoundError(f"No CPU kernel for {ctx.op} with T={logits.dtype}")
    out_dt = np.dtype(ctx.attrs.get("output_dtype") or np.int64)
    out = np.zeros((batch, n), out_dt)
    if batch * n == 0:
        return out
    # CPU draws doubles: two uint32 per sample, 256 blocks reserved per word group.
    key, counter = reserve(batch * (-(-n // 4) * 4) * 2 * _RESERVED)
    finite = np.isfinite(logits)
    lowest = np.finfo(logits.dtype).min
    top = np.where(finite, logits, lowest).max(axis=1).astype(np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(logits.astype(np.float64) - top[:, None])
    cdf = np.cumsum(np.where(finite, e, 0.0), axis=1)
    total = cdf[:, -1]
    cost = int(50 * (n * math.log(classes) / math.log(2) + classes))
    for start, limit in _shards(batch, cost):
        # Each shard starts (start_row * (n + 3) / 4) blocks in and reads rows in turn.
        c = P.add128(counter, start * (n + 3) // 4)
        w = P.stream(key, c, (limit - start) * n * 2)
        u = P.uniform_double(w[0::2], w[1::2]).reshape(limit - start, n)
        for r in range(start, limit):
            out[r] = np.searchsorted(cdf[r], u[r - start] * total[r], side="right")
    return out


@kernel("Multinomial")
def multinomial(ctx: KernelContext, logits: np.ndarray, num_samples: np.ndarray) -> np.ndarray:
    return _multinomial_draw(ctx, logits, num_samples, lambda nb: _reserve(ctx, nb))


@kernel("StatelessMultinomial")
def stateless_multinomial(ctx: KernelContext, logits, num_samples, seed):
    key, counter = _seed(seed)
    return _multinomial_draw(ctx, logits, num_samples, lambda nb: (key, counter))


# --- per-output samplers: gamma, Poisson, binomial ----------------------------------------------

class _Lanes:
    """Independent per-output generators (each at ``counter + stride * output_index``) read
    block by block, with TF's buffered uniform/normal doubles (the last of a block first)."""

    def __init__(self, key: int, counter: int, index: np.ndarray, stride: int) -> None:
        self.key, self.counter = key, counter
        self.base = index.astype(np.uint64) * np.uint64(stride)
        n = index.shape[0]
        self.cursor = np.zeros(n, np.uint64)
        self.urem = np.zeros(n, np.int64)
        self.ubuf = np.zeros((n, 2))
        self.nrem = np.zeros(n, np.int64)
        self.nbuf = np.zeros((n, 2))

    def _next(self, lanes: np.ndarray) -> np.ndarray:
        b = P.blocks(self.key, self.counter, self.base[lanes] + self.cursor[lanes])
        self.cursor[lanes] += np.uint64(1)
        return b

    def uniform(self, lanes: np.ndarray) -> np.ndarray:
        """The next UniformDistribution<double> value of each lane."""
        empty = lanes[self.urem[lanes] == 0]
        if empty.size:
            b = self._next(empty)
            self.ubuf[empty, 0] = P.uniform_double(b[:, 0], b[:, 1])
            self.ubuf[empty, 1] = P.uniform_double(b[:, 2], b[:, 3])
            self.urem[empty] = 2
        self.urem[lanes] -= 1
        return self.ubuf[lanes, self.urem[lanes]]

    def normal(self, lanes: np.ndarray) -> np.ndarray:
        """The next NormalDistribution<double> value of each lane."""
        empty = lanes[self.nrem[lanes] == 0]
        if empty.size:
            b = self._next(empty)
            d0, d1 = P.box_muller_double(b[:, 0], b[:, 1], b[:, 2], b[:, 3])
            self.nbuf[empty, 0], self.nbuf[empty, 1] = d0, d1
            self.nrem[empty] = 2
        self.nrem[lanes] -= 1
        return self.nbuf[lanes, self.nrem[lanes]]


def _log(x: np.ndarray) -> np.ndarray:
    return P.libm(math.log, x)


def _ftz(x: np.ndarray) -> np.ndarray:
    """Flush subnormals to zero, as TF's CPU threads run (ScopedFlushDenormal)."""
    return np.where(np.abs(x) < np.finfo(x.dtype).tiny, x * 0, x)


def _to_output(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """static_cast from double under flush-to-zero; Eigen's half goes through float."""
    with np.errstate(all="ignore"):
        if dt.kind in "iu":
            return _trunc_int(x, dt)
        if dt == _F64:
            return _ftz(x)
        f = _ftz(x.astype(np.float32))
        return f if dt == _F32 else f.astype(_F16)


def _trunc_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """C's double-to-int conversion as x86 does it (out of range gives INT_MIN)."""
    info = np.iinfo(dt)
    bad = ~np.isfinite(x) | (x >= 2.0 ** (info.bits - 1)) | (x < -(2.0 ** (info.bits - 1)))
    out = np.where(bad, 0, x).astype(dt)
    return np.where(bad, info.min, out).astype(dt)


def _gamma_values(key: int, counter: int, alpha: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Marsaglia-Tsang gamma draws in float64, one independent generator per output."""
    n = alpha.shape[0]
    lanes = _Lanes(key, counter, index, _RESERVED)
    res = np.zeros(n)
    one = np.nonzero(alpha == 1.0)[0]
    if one.size:  # exponential: -log1p(-u) with the block's second uniform
        b = lanes._next(one)
        res[one] = -P.libm(math.log1p, -P.uniform_double(b[:, 2], b[:, 3]))
    res[np.isnan(alpha)] = np.nan          # TF never accepts a draw there
    active = np.nonzero((alpha != 1.0) & ~np.isnan(alpha))[0]
    a = alpha
    small = a < 1
    d = a + np.where(small, 2.0 / 3, -1.0 / 3)
    with np.errstate(all="ignore"):
        c = (1.0 / 3) / np.sqrt(d)
    for _ in _rounds():
        if not active.size:
            break
        x = lanes.normal(active)
        v = 1 + c[active] * x
        ok = v > 0
        act, x, v = active[ok], x[ok], v[ok]
        v = v * v * v
        u = lanes.uniform(act)
        with np.errstate(all="ignore"):
            acc = (u < 1 - 0.0331 * (x * x) * (x * x)) | \
                (_log(u) < 0.5 * x * x + d[act] * (1 - v + _log(v)))
        done = act[acc]
        r = d[done] * v[acc]
        need_b = small[done]
        if need_b.any():
            bl = done[need_b]
            r[need_b] *= _ftz(P.libm(math.pow, lanes.uniform(bl), 1 / a[bl]))
        res[done] = _ftz(r)
        finished = np.zeros(n, bool)
        finished[done] = True
        active = active[~finished[active]]
    return res


def _gamma_fill(key: int, counter: int, alpha: np.ndarray, samples_per_alpha: int,
                dt: np.dtype) -> np.ndarray:
    num_alphas = alpha.size
    total = num_alphas * samples_per_alpha
    idx = np.arange(total, dtype=np.int64)
    vals = _gamma_values(key, counter, alpha.reshape(-1).astype(np.float64)[
        idx // samples_per_alpha], idx)
    out = np.empty(total, dt)
    out[(idx % samples_per_alpha) * num_alphas + idx // samples_per_alpha] = _to_output(vals, dt)
    return out


@kernel("RandomGamma")
def random_gamma(ctx: KernelContext, shape: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    dims = _shape(shape)
    spa = math.prod(dims)
    out_dims = dims + alpha.shape
    dt = _float_dtype(ctx, "T")
    if math.prod(out_dims) == 0:
        return np.zeros(out_dims, dt)
    key, counter = _reserve(ctx, spa * alpha.size * _RESERVED)
    return _gamma_fill(key, counter, alpha, spa, dt).reshape(out_dims)


def _stateless_gamma(shape, key: int, counter: int, alpha: np.ndarray, dt: np.dtype,
                     algo: int = 1):
    dims = _shape(shape)
    if math.prod(dims) == 0:
        return np.zeros(dims, dt)
    if not _ends_with(dims, alpha.shape):
        raise InvalidArgumentError("Shape passed in must end with broadcasted shape.")
    if alpha.size == 0:
        raise InvalidArgumentError(
            f"Input alpha should have non-zero element count, got: {alpha.size}")
    _philox_only(algo)
    return _gamma_fill(key, counter, alpha, math.prod(dims) // alpha.size, dt).reshape(dims)


@kernel("StatelessRandomGammaV2")
def stateless_random_gamma_v2(ctx: KernelContext, shape, seed, alpha):
    dt = _float_dtype(ctx)
    _shape(shape)
    key, counter = _seed(seed)
    return _stateless_gamma(shape, key, counter, alpha, dt)


@kernel("StatelessRandomGammaV3")
def stateless_random_gamma_v3(ctx: KernelContext, shape, key, counter, alg, alpha):
    dt = _float_dtype(ctx)
    k, c, algo = _key_counter_alg(key, counter, alg)
    return _stateless_gamma(shape, k, c, alpha, dt, algo)


def _highest(dt: np.dtype) -> float:
    return float(np.finfo(dt).max) if dt.kind == "f" else float(np.iinfo(dt).max)


def _poisson_values(key: int, counter: int, rate: np.ndarray, index: np.ndarray,
                    dt: np.dtype) -> np.ndarray:
    """Knuth's method below rate 10, Hormann's transformed rejection above (float64)."""
    n = rate.shape[0]
    lanes = _Lanes(key, counter, index, _RESERVED)
    res = np.zeros(n)
    top = _highest(dt)
    with np.errstate(all="ignore"):
        small = np.nonzero(rate < 10)[0]
        if small.size:
            limit = P.libm(math.exp, -rate[small])
            prod = np.ones(small.size)
            x = np.zeros(small.size)
            live = np.arange(small.size)
            for _ in _rounds():
                if not live.size:
                    break
                prod[live] = prod[live] * lanes.uniform(small[live])
                hit = (prod[live] <= limit[live]) & (x[live] <= top)
                res[small[live[hit]]] = x[live[hit]]
                x[live[~hit]] += 1
                live = live[~hit]
        # NumTraits<U>::infinity(): inf for floats, 0 for integers.
        res[np.isinf(rate) & (rate > 0)] = np.inf if dt.kind == "f" else 0
        res[np.isnan(rate)] = np.nan       # TF never accepts a draw there
        big = np.nonzero((rate >= 10) & ~np.isinf(rate))[0]
        if big.size:
            r = rate[big]
            log_rate = _log(r)
            b = 0.931 + 2.53 * np.sqrt(r)
            a = -0.059 + 0.02483 * b
            inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
            v_r = 0.9277 - 3.6224 / (b - 2)
            live = np.arange(big.size)
            for _ in _rounds():
                if not live.size:
                    break
                u = lanes.uniform(big[live]) - 0.5
                v = lanes.uniform(big[live])
                us = 0.5 - np.abs(u)
                al, bl, rl = a[live], b[live], r[live]
                k = np.floor((2 * al / us + bl) * u + rl + 0.43)
                retry = k > top
                quick = ~retry & (us >= 0.07) & (v <= v_r[live])
                skip = retry | quick | (k < 0) | ((us < 0.013) & (v > us))
                slow = ~skip
                acc = quick.copy()
                if slow.any():
                    s = _log(v[slow] * inv_alpha[live[slow]]
                               / (al[slow] / (us[slow] * us[slow]) + bl[slow]))
                    ks = k[slow]
                    t = -rl[slow] + ks * log_rate[live[slow]] - _lgamma(ks + 1)
                    acc[np.nonzero(slow)[0][s <= t]] = True
                res[big[live[acc]]] = k[acc]
                live = live[~acc]
    return res


def _lgamma(x: np.ndarray) -> np.ndarray:
    """lgamma of integer-valued doubles (few distinct values: one math.lgamma each)."""
    vals, inv = np.unique(x, return_inverse=True)
    return np.array([math.lgamma(v) for v in vals.tolist()])[inv.reshape(-1)].reshape(x.shape)


def _poisson_fill(key: int, counter: int, rate: np.ndarray, samples_per_rate: int,
                  dt: np.dtype) -> np.ndarray:
    num_rate = rate.size
    total = num_rate * samples_per_rate
    idx = np.arange(total, dtype=np.int64)
    r = rate.reshape(-1).astype(np.float64)[idx // samples_per_rate]
    vals = _poisson_values(key, counter, r, idx, dt)
    out = np.empty(total, dt)
    out[(idx % samples_per_rate) * num_rate + idx // samples_per_rate] = _to_output(vals, dt)
    return out


def _poisson_stateful(ctx: KernelContext, shape, rate, dt: np.dtype) -> np.ndarray:
    dims = _shape(shape)
    out_dims = dims + rate.shape
    nsamp = math.prod(dims)
    if nsamp == 0:
        return np.zeros(out_dims, dt)
    key, counter = _reserve(ctx, nsamp * rate.size * _RESERVED)
    return _poisson_fill(key, counter, rate, nsamp, dt).reshape(out_dims)


_POISSON_TYPES = (_F16, _F32, _F64, _I32, _I64)


@kernel("RandomPoisson")
def random_poisson(ctx: KernelContext, shape, rate):
    return _poisson_stateful(ctx, shape, rate, _float_dtype(ctx))


@kernel("RandomPoissonV2")
def random_poisson_v2(ctx: KernelContext, shape, rate):
    return _poisson_stateful(ctx, shape, rate, _int_dtype(ctx, _POISSON_TYPES))


@kernel("StatelessRandomPoisson")
def stateless_random_poisson(ctx: KernelContext, shape, seed, lam):
    dt = _int_dtype(ctx, _POISSON_TYPES)
    dims = _shape(shape)
    key, counter = _seed(seed)
    if math.prod(dims) == 0:
        return np.zeros(dims, dt)
    if not _ends_with(dims, lam.shape):
        raise InvalidArgumentError("Shape passed in must end with broadcasted shape.")
    return _poisson_fill(key, counter, lam, math.prod(dims) // lam.size, dt).reshape(dims)


_STIRLING = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                      0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                      0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                      0.00833056343336287])


def _stirling_tail(k: np.ndarray) -> np.ndarray:
    kp1sq = (k + 1) * (k + 1)
    far = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    near = _STIRLING[np.clip(k, 0, 9).astype(np.int64)]
    return np.where(k <= 9, near, far)


def _binomial_inversion(lanes: _Lanes, sel: np.ndarray, count: np.ndarray,
                        prob: np.ndarray) -> np.ndarray:
    """Sum geometric variables until they pass ``count``; how many fit is the draw."""
    out = np.zeros(sel.size)
    geom_sum = np.zeros(sel.size)
    denom = P.libm(math.log1p, -prob)
    live = np.arange(sel.size)
    for _ in _rounds():
        if not live.size:
            break
        u = lanes.uniform(sel[live])
        geom_sum[live] += np.ceil(_log(u) / denom[live])
        over = geom_sum[live] > count[live]
        out[live[~over]] += 1
        live = live[~over]
    return out


def _btrs(lanes: _Lanes, sel: np.ndarray, count: np.ndarray, prob: np.ndarray) -> np.ndarray:
    """Hormann's BTRS transformed rejection (TF's variant)."""
    out = np.zeros(sel.size)
    stddev = np.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = np.floor((count + 1) * prob)
    live = np.arange(sel.size)
    for _ in _rounds():
        if not live.size:
            break
        u = lanes.uniform(sel[live])
        v = lanes.uniform(sel[live])
        u = u - 0.5
        us = 0.5 - np.abs(u)
        al, bl, nl, ml, rl = a[live], b[live], count[live], m[live], r[live]
        k = np.floor((2 * al / us + bl) * u + c[live])
        quick = (us >= 0.07) & (v <= v_r[live])
        slow = ~quick & ~((k < 0) | (k > nl))
        acc = quick.copy()
        if slow.any():
            j = np.nonzero(slow)[0]
            kk, n_, m_, r_, u2 = k[j], nl[j], ml[j], rl[j], us[j]
            vv = _log(v[j] * alpha[live[j]] / (al[j] / (u2 * u2) + bl[j]))
            upper = ((m_ + 0.5) * _log((m_ + 1) / (r_ * (n_ - m_ + 1)))
                     + (n_ + 1) * _log((n_ - m_ + 1) / (n_ - kk + 1))
                     + (kk + 0.5) * _log(r_ * (n_ - kk + 1) / (kk + 1))
                     + _stirling_tail(m_) + _stirling_tail(n_ - m_)
                     - _stirling_tail(kk) - _stirling_tail(n_ - kk))
            acc[j[vv <= upper]] = True
        out[live[acc]] = k[acc]
        live = live[~acc]
    return out


def _binomial_batch_shape(counts: np.ndarray, probs: np.ndarray) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(counts.shape, probs.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"counts and probs must have compatible batch dimensions: {_dims(counts)} vs. "
            f"{_dims(probs)}") from None


def _binomial(key: int, counter: int, dims: tuple[int, ...], counts: np.ndarray,
              probs: np.ndarray, dt: np.dtype) -> np.ndarray:
    bshape = _binomial_batch_shape(counts, probs)
    if not _ends_with(dims, bshape):
        raise InvalidArgumentError("Shape passed in must end with broadcasted shape.")
    num_batches = math.prod(bshape)
    total = math.prod(dims)
    out = np.zeros(total, dt)
    if total == 0:
        return out.reshape(dims)
    spb = total // num_batches
    t = counts.dtype
    cnt_t = np.broadcast_to(counts, bshape).reshape(-1)
    prb_t = np.broadcast_to(probs, bshape).reshape(-1)
    idx = np.arange(total, dtype=np.int64)
    bi = idx // spb
    c_t, p_t = cnt_t[bi], prb_t[bi]
    dcount = c_t.astype(np.float64)
    vals = np.full(total, np.nan)
    with np.errstate(all="ignore"):
        zero = (dcount <= 0) | (p_t <= 0)
        nan_count = np.isnan(dcount) & ~zero   # TF never stops drawing there
        full = ~zero & (p_t >= 1)
        low = ~zero & ~full & (p_t <= t.type(0.5))
        high = ~zero & ~full & (p_t > t.type(0.5))
        vals[zero] = 0.0
        vals[full] = dcount[full]
        q_t = (t.type(1) - p_t).astype(t)
        for mask, pp, flip in ((low, p_t, False), (high, q_t, True)):
            big = mask & ((c_t * pp).astype(t) >= t.type(10))
            for sel, stride, fn in ((mask & ~big, 42, _binomial_inversion),
                                    (big, _RESERVED, _btrs)):
                ii = np.nonzero(sel & ~nan_count)[0]
                if ii.size == 0:
                    continue
                lanes = _Lanes(key, counter, ii, stride)
                got = fn(lanes, np.arange(ii.size), dcount[ii], pp[ii].astype(np.float64))
                vals[ii] = dcount[ii] - got if flip else got
    res = _to_output(vals, dt)
    if dt.kind in "iu":  # TF's static_cast of its NaN to an integer is undefined: 0 here
        res[np.isnan(vals)] = 0
    out[(idx % spb) * num_batches + bi] = res
    return out.reshape(dims)


def _vector_shape(shape: np.ndarray) -> tuple[int, ...]:
    s = np.asarray(shape)
    if s.ndim != 1:
        raise InvalidArgumentError(f"Input shape should be a vector, got shape: {_dims(s)}")
    return _shape(shape)


@kernel("StatelessRandomBinomial")
def stateless_random_binomial(ctx: KernelContext, shape, seed, counts, probs):
    s = np.asarray(seed)
    if s.shape != (2,):
        raise InvalidArgumentError(f"seed must have shape [2], not {_dims(s)}")
    dims = _vector_shape(shape)
    dt = _int_dtype(ctx, _POISSON_TYPES)
    key, counter = _seed(seed)
    return _binomial(key, counter, dims, counts, probs, dt)


# --- ParameterizedTruncatedNormal --------------------------------------------------------------

_MAX_ITER = 1000


def _t_exp(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt == _F64:
        return P.libm(math.exp, x)
    return P.expf(x.astype(np.float32)).astype(dt)


def _t_log(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt == _F64:
        return _log(x)
    return P.logf(x.astype(np.float32)).astype(dt)


def _t_sqrt(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    return np.sqrt(x.astype(np.float32)).astype(dt) if dt == _F16 else np.sqrt(x)


class _Sequential:
    """One generator read block after block (a shard's ``gen_copy``)."""

    def __init__(self, key: int, counter: int) -> None:
        self.key, self.counter, self.pos = key, counter, 0

    def peek(self, nblocks: int) -> np.ndarray:
        return P.blocks(self.key, P.add128(self.counter, self.pos), nblocks)


def _ptn_batch(gen: _Sequential, need: int, mean, stddev, minval, maxval,
               dt: np.dtype) -> np.ndarray:
    """One batch of ParameterizedTruncatedNormal: ``need`` samples, consuming ``gen``."""
    T = dt.type
    if not (stddev > T(0) and minval < maxval and (np.isfinite(minval) or np.isfinite(maxval))):
        raise InvalidArgumentError("Invalid parameters")
    if need == 0:
        return np.zeros(0, dt)
    if (np.isinf(minval) and minval < T(0)) or maxval < mean:
        minval, maxval, stddev = maxval, minval, -stddev
    norm_min = T((minval - mean) / stddev)
    norm_max = T((maxval - mean) / stddev)
    one = np.array([norm_min], dt)
    sqrt_factor = _t_sqrt((one * one + T(4)).astype(dt), dt)[0]
    cutoff = T(T(2) * _t_exp(np.array([T(0.5) + (norm_min * (norm_min - sqrt_factor)) / T(4)],
                                      dt), dt)[0] / (norm_min + sqrt_factor))
    diff = T(norm_max - norm_min)
    per = _per_block(dt)
    randn = (norm_min < T(-1.3) and norm_max >= T(0)) or (norm_max > T(1.3) and norm_min <= T(0))
    if randn:
        kind, blocks_per_iter = "randn", 1
    elif diff < cutoff:
        kind, blocks_per_iter = "uniform", 2
        plus = T(0) if norm_min < T(0) else T(norm_min * norm_min)
    else:
        kind, blocks_per_iter = "exp", 1
        alpha = T((norm_min + _t_sqrt(np.array([norm_min * norm_min + T(4)], dt), dt)[0]) / T(2))
    chunk = max(4, 2 * need // per + 4) * blocks_per_iter
    while True:
        b = gen.peek(chunk).reshape(-1, blocks_per_iter * 4)
        with np.errstate(all="ignore"):
            if kind == "randn":
                z = P.normal_real(b.reshape(-1), dt).reshape(b.shape[0], per)
                ok = (z >= norm_min) & (z <= norm_max)
                val = z * stddev + mean
            elif kind == "uniform":
                r = P.uniform_real(b[:, :4].reshape(-1), dt).reshape(-1, per)
                u = P.uniform_real(b[:, 4:].reshape(-1), dt).reshape(-1, per)
                z = (r * diff + norm_min).astype(dt)
                g = ((plus - z * z) / T(2)).astype(dt)
                ok = u <= _t_exp(g, dt)
                val = z * stddev + mean
            else:
                r = P.uniform_real(b.reshape(-1), dt).reshape(-1, per // 2, 2)
                z = ((-_t_log(r[..., 0], dt)) / alpha + norm_min).astype(dt)
                x = (alpha - z) if norm_min < alpha else np.full(z.shape, norm_min - alpha, dt)
                g = _t_exp(((-x * x) / T(2)).astype(dt), dt)
                ok = (r[..., 1] <= g) & (z < norm_max)
                val = z * stddev + mean
        flat_ok = ok.reshape(-1)
        hits = np.flatnonzero(flat_ok)
        # TF gives up after kMaxIterations rejections in a row.
        gaps = np.diff(np.concatenate([[-1], hits[:need]])) - 1
        limit = _MAX_ITER + (1 if kind == "randn" else 0)
        if gaps.size and gaps.max() >= limit or (hits.size < need and (
                flat_ok.size - (hits[-1] + 1 if hits.size else 0)) >= limit):
            raise InternalError(
                f"TruncatedNormal {kind} rejection sampler failed to accept a sample.")
        if hits.size >= need:
            last = hits[need - 1]
            gen.pos += int(last // ok[0].size + 1) * blocks_per_iter
            return val.reshape(-1)[hits[:need]].astype(dt)
        chunk *= 2


def _ptn_params(vals: list[np.ndarray], n: int) -> list[np.ndarray]:
    return [np.broadcast_to(v.reshape(-1), (n,)) if v.size == 1 else v.reshape(-1) for v in vals]


@kernel("ParameterizedTruncatedNormal")
def parameterized_truncated_normal(ctx: KernelContext, shape, means, stdevs, minvals, maxvals):
    s = np.asarray(shape)
    if s.ndim != 1:
        raise InvalidArgumentError(f"Input shape should be a vector, got shape: {_dims(s)}")
    if s.size == 0:
        raise InvalidArgumentError("Shape tensor must not be empty, got Tensor<type: int32 "
                                   "shape: [0] values: >")
    dims = _shape(shape)
    dt = _float_dtype(ctx)
    num_batches = dims[0]
    spb = math.prod(dims[1:])
    total = num_batches * spb
    if total > 2 ** 31 - 1:
        raise InvalidArgumentError("ParameterizedTruncatedNormal does not support output "
                                   "shapes with more than 2**31 - 1 elements.")
    names = ("means", "stddevs", "minvals", "maxvals")
    params = (means, stdevs, minvals, maxvals)
    for nm, p in zip(names, params):
        if p.ndim > 1:
            raise InvalidArgumentError(
                f"Input {nm} should be a scalar or vector, got shape: {_dims(p)}")
    if all(p.ndim == 0 or p.shape[0] == 1 for p in params[:2]) and \
            all(p.ndim == 0 for p in params[2:]):
        # Shared parameters: TF re-batches into batches of 100 samples.
        num_batches, spb = -(-total // 100), 100
    else:
        for nm, p in zip(names, params):
            if not (p.ndim == 0 or p.shape[0] in (1, num_batches)):
                raise InvalidArgumentError(
                    f"Input {nm} should have length 1 or shape[0], got shape: {_dims(p)}")
    key, counter = _reserve(ctx, num_batches * 2 * _MAX_ITER * (spb + 3) // 4)
    out = np.zeros(total, dt)
    if num_batches == 0:
        return out.reshape(dims)
    mu, sd, lo, hi = _ptn_params([p.astype(dt) for p in params], num_batches)
    for start, limit in _shards(num_batches, _ptn_cost(dt, spb)):
        gen = _Sequential(key, P.add128(counter, start * 2 * _MAX_ITER * (spb + 3) // 4))
        for b in range(start, limit):
            s0, s1 = b * spb, min((b + 1) * spb, total)
            out[s0:max(s0, s1)] = _ptn_batch(gen, max(0, s1 - s0), mu[b], sd[b], lo[b], hi[b],
                                             dt)
    return out.reshape(dims)


def _ptn_cost(dt: np.dtype, samples: int | None) -> int:
    """TF's cost estimate for a batch (V1, ``samples`` per batch) or an output (V2)."""
    exp_cost = 34 if dt == _F32 else (51 if dt == _F64 else 43)
    sqrt_cost = 28 if dt == _F64 else 8
    init = 4 + 2 + sqrt_cost + 4 + exp_cost + 1
    per_round = 33 + exp_cost
    return init + per_round * 2 * (samples if samples is not None else 1)


@kernel("StatelessParameterizedTruncatedNormal")
def stateless_parameterized_truncated_normal(ctx: KernelContext, shape, seed, means, stddevs,
                                             minvals, maxvals):
    dt = _float_dtype(ctx)
    sd = np.asarray(seed)
    if sd.shape != (2,):
        raise InvalidArgumentError(f"seed must have shape [2], not {_dims(sd)}")
    params = (means, stddevs, minvals, maxvals)
    try:
        bshape = np.broadcast_shapes(*(p.shape for p in params))
    except ValueError:
        raise InvalidArgumentError(
            "means, stddevs, minvals, maxvals must have compatible batch dimensions: "
            + " vs. ".join(_dims(p) for p in params)) from None
    if np.ndim(shape) != 1:
        raise InvalidArgumentError(f"Input shape should be a vector, got shape: {_dims(shape)}")
    dims = _shape(shape)
    if not _ends_with(dims, bshape):
        raise InvalidArgumentError("Shape passed in must end with broadcasted shape.")
    num_batches = math.prod(bshape)
    total = math.prod(dims)
    if total > 2 ** 31 - 1:
        raise InvalidArgumentError("ParameterizedTruncatedNormal does not support output "
                                   "shapes with more than 2**31 - 1 elements.")
    key, counter = _seed(seed)
    out = np.zeros(total, dt)
    if total == 0:
        return out.reshape(dims)
    spb = total // num_batches
    mu, sdv, lo, hi = (np.broadcast_to(p.astype(dt), bshape).reshape(-1) for p in params)
    per = _per_block(dt)
    for start, limit in _shards(total, _ptn_cost(dt, None)):
        gen = _Sequential(key, P.add128(counter, (start * 2 * _MAX_ITER + per - 1) // per))
        o = start
        while o < limit:
            b = o // spb
            take = min(spb - o % spb, limit - o)
            vals = _ptn_batch(gen, take, mu[b], sdv[b], lo[b], hi[b], dt)
            j = np.arange(o % spb, o % spb + take)
            out[j * num_batches + b] = vals
            o += take
    return out.reshape(dims)


# --- shuffles ---------------------------------------------------------------------------------

def _shuffle(value: np.ndarray, rng) -> np.ndarray:
    """TF's Fisher-Yates: swap i with i + (next uint32 % (n - i)), rows for >= 2-D."""
    if value.size <= 1 or value.ndim == 0 or value.shape[0] <= 1:
        return value
    n = value.shape[0]
    key, counter = rng(n - 1)
    draws = (P.stream(key, counter, n - 1).astype(np.int64) % np.arange(n, 1, -1)).tolist()
    perm = list(range(n))
    for i, d in enumerate(draws):
        j = i + d
        perm[i], perm[j] = perm[j], perm[i]
    return value[np.asarray(perm)]


@kernel("RandomShuffle")
def random_shuffle(ctx: KernelContext, value: np.ndarray) -> np.ndarray:
    return _shuffle(value, lambda samples: _reserve(ctx, (samples + 3) // 4))


@kernel("StatelessShuffle")
def stateless_shuffle(ctx: KernelContext, value, key, counter, alg):
    k, c, algo = _key_counter_alg(key, counter, alg)
    _philox_only(algo)
    return _shuffle(value, lambda samples: (k, c))


# --- tf.random.Generator state ops -----------------------------------------------------------

def _state_var(ctx: KernelContext, handle: Any):
    from .state import _var

    var = _var(ctx, handle)
    v = var.value
    if v.dtype != _I64:
        raise InvalidArgumentError(f"dtype of RNG state variable must be int64, not {v.dtype}")
    if v.ndim != 1:
        raise InvalidArgumentError(
            f"RNG state must have one and only one dimension, not {v.ndim}")
    return var


def _get_alg(alg: np.ndarray, index: int, dtype: np.dtype) -> int:
    a = np.asarray(alg)
    if a.ndim != 0:
        raise InvalidArgumentError(f"input {index} (0-based) must have shape [], not {_dims(a)}")
    if a.dtype != dtype:
        raise InvalidArgumentError(
            f"dtype of input {index} (0-based) must be {dtype}, not {a.dtype}")
    return int(a)


def _advance(ctx: KernelContext, handle: Any, alg: int | None, nblocks: int,
             threefry_unimplemented: bool = True) -> tuple[int, int, np.ndarray]:
    """Read a Philox state (after an algorithm tag when ``alg`` is None), store it skipped by
    ``nblocks`` and return the generator as read, with the state array it was read from."""
    var = _state_var(ctx, handle)
    with var.lock:
        state = var.value
        skip = 0
        if alg is None:
            if state.size < 1:
                raise InvalidArgumentError("Size of tensor must be at least 1")
            alg, skip = int(state[0]), 1
        elif alg == 3:   # RNG_ALG_AUTO_SELECT (Generator(alg="auto_select")): Philox on CPU
            alg = 1
        if alg == 2 and threefry_unimplemented:
            raise UnimplementedError("Non-XLA devices don't support the ThreeFry algorithm.")
        if alg != 1:
            raise InvalidArgumentError(f"Unsupported algorithm id: {alg}")
        if state.size < skip + 3:
            raise InvalidArgumentError(
                f"For the Philox algorithm, the size of state must be at least {skip + 3}; got "
                f"{state.size}")
        w = state[skip:skip + 3].view(np.uint64).tolist()
        key, counter = w[2], w[0] | (w[1] << 64)
        new = P.add128(counter, nblocks & _U64MAX)
        fresh = state.copy()
        fresh[skip:skip + 2] = np.array([new & _U64MAX, new >> 64], np.uint64).view(np.int64)
        var.value = fresh
    return key, counter, state


def _generator_fill(ctx: KernelContext, kind: str, resource, algorithm, shape, dt: np.dtype,
                    lo: int = 0, hi: int = 0, alg_input: bool = True) -> np.ndarray:
    alg = _get_alg(algorithm, 1, _I64) if alg_input else None
    dims = _shape(shape)
    key, counter, _ = _advance(ctx, resource, alg, math.prod(dims) * _RESERVED)
    return _fill(kind, key, counter, dims, dt, lo, hi)


@kernel("StatefulUniform")
def stateful_uniform(ctx: KernelContext, resource, algorithm, shape):
    return _generator_fill(ctx, "uniform", resource, algorithm, shape, _uniform_dtype(ctx))


@kernel("StatefulStandardNormalV2")
def stateful_standard_normal_v2(ctx: KernelContext, resource, algorithm, shape):
    return _generator_fill(ctx, "normal", resource, algorithm, shape, _float_dtype(ctx))


@kernel("StatefulStandardNormal")
def stateful_standard_normal(ctx: KernelContext, resource, shape):
    return _generator_fill(ctx, "normal", resource, None, shape, _float_dtype(ctx),
                           alg_input=False)


@kernel("StatefulTruncatedNormal")
def stateful_truncated_normal(ctx: KernelContext, resource, algorithm, shape):
    return _generator_fill(ctx, "truncated", resource, algorithm, shape, _float_dtype(ctx))


@kernel("StatefulUniformInt")
def stateful_uniform_int(ctx: KernelContext, resource, algorithm, shape, minval, maxval):
    dt = _int_dtype(ctx, (_I32, _I64))
    alg = _get_alg(algorithm, 1, _I64)
    lo, hi = _int_range(minval, maxval)
    _check_range(lo, hi)
    dims = _shape(shape)
    key, counter, _ = _advance(ctx, resource, alg, math.prod(dims) * _RESERVED)
    return _fill("int", key, counter, dims, dt, lo, hi)


@kernel("StatefulUniformFullInt")
def stateful_uniform_full_int(ctx: KernelContext, resource, algorithm, shape):
    return _generator_fill(ctx, "full", resource, algorithm, shape,
                           _int_dtype(ctx, (_I32, _I64, _U32, _U64)))


@kernel("StatefulRandomBinomial")
def stateful_random_binomial(ctx: KernelContext, resource, algorithm, shape, counts, probs):
    dt = _int_dtype(ctx, _POISSON_TYPES)
    bshape = _binomial_batch_shape(counts, probs)
    dims = _vector_shape(shape)
    if not _ends_with(dims, bshape):
        raise InvalidArgumentError("Shape passed in must end with broadcasted shape.")
    a = np.asarray(algorithm)
    if a.ndim != 0:
        raise InvalidArgumentError(f"algorithm must be of shape [], not {_dims(a)}")
    nb = math.prod(bshape)
    spb = math.prod(dims[:len(dims) - len(bshape)])
    # TF advances the state by 256 blocks per unit of this estimate.
    key, counter, _ = _advance(ctx, resource, int(a),
                               nb * 2 * 100 * (spb + 3) // 4 * _RESERVED,
                               threefry_unimplemented=False)
    return _binomial(key, counter, dims, counts, probs, dt)


@kernel("RngSkip")
def rng_skip(ctx: KernelContext, resource, algorithm, delta):
    alg = _get_alg(algorithm, 1, _I64)
    d = _get_alg(delta, 2, _I64)
    _advance(ctx, resource, alg, (d & _U64MAX) * _RESERVED)
    return ()


@kernel("RngReadAndSkip")
def rng_read_and_skip(ctx: KernelContext, resource, alg, delta):
    a = _get_alg(alg, 1, _I32)
    d = _get_alg(delta, 2, _U64)
    return _advance(ctx, resource, a, (d & _U64MAX) * _RESERVED)[2][:3].copy()


@kernel("NonDeterministicInts")
def non_deterministic_ints(ctx: KernelContext, shape):
    dims = _shape(shape)
    dt = _int_dtype(ctx, (_I32, _I64, _U32, _U64))
    n = math.prod(dims)
    words = np.frombuffer(os.urandom(8 * n), np.uint64) if n else np.zeros(0, np.uint64)
    return words.astype(dt).reshape(dims)

