"""XLA's operations as TensorFlow graph ops: the Xla* family that jax2tf writes when it
exports without native serialization (``jax2tf.convert(f, native_serialization=False)``).

TensorFlow runs these ops only compiled by XLA (``jit_compile``); dfg runs them as numpy
kernels following XLA's operation semantics (openxla.org/xla/operation_semantics): DotGeneral,
DynamicSlice/DynamicUpdateSlice (start indices clamped into range), Gather/Scatter with their
dimension numbers (batching dimensions included), Pad (negative edges crop, interior padding),
Reduce, ReduceWindow, SelectAndScatter, ConvGeneralDilated and Sort.

Dimension numbers arrive as serialized ``xla`` protos (``xla_data.proto``): a few repeated
int64 fields each, read by :func:`_proto_ints` rather than a generated module.

Reductions, scatters, select-and-scatter and sorts apply a *computation*, a function of the
graph's library named by a func attr. Its body reaches the kernel inside that attr
(``graphdef.functions.attach_bodies``, done by the Session before binding) and runs as a
:class:`Computation`: applied to whole arrays at once (XLA computations are scalar functions
of scalars, and their ops are elementwise), each body node through the one kernel call
(``kernel_call.call``); a body with control flow or calls runs in the reference interpreter.
A body whose vectorized result does not have the arguments' shape is run element by element.

``XlaCallModule`` (native serialization: a StableHLO module) is refused: dfg does not run
StableHLO.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

from .registry import KernelContext, kernel

# --- xla protos --------------------------------------------------------------------------------


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise InvalidArgumentError("truncated varint in an XLA dimension-numbers proto")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise InvalidArgumentError("varint too long in an XLA dimension-numbers proto")


def _proto_ints(data: Any) -> dict[int, tuple[int, ...]]:
    """Field number -> its int64 values, for a message of int64 fields (packed or not).

    A node's attribute bytes never change, so each distinct message is parsed once, not per
    kernel call (loops call these kernels every iteration)."""
    buf = data.encode("utf-8") if isinstance(data, str) else bytes(data or b"")
    return _parse_proto_ints(buf)


@functools.lru_cache(maxsize=1024)
def _parse_proto_ints(buf: bytes) -> dict[int, tuple[int, ...]]:
    out: dict[int, list[int]] = {}

    def signed(v: int) -> int:
        return v - (1 << 64) if v >= 1 << 63 else v

    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            out.setdefault(field, []).append(signed(v))
        elif wire == 2:
            n, i = _varint(buf, i)
            chunk, i = buf[i:i + n], i + n
            j = 0
            while j < len(chunk):
                v, j = _varint(chunk, j)
                out.setdefault(field, []).append(signed(v))
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise InvalidArgumentError(f"unexpected wire type {wire} in an XLA dimension-numbers "
                                       "proto")
    # tuples: the cached result is shared by every caller, so it must not be mutable
    return {k: tuple(v) for k, v in out.items()}


def _one(fields: dict[int, list[int]], n: int) -> int:
    v = fields.get(n)
    return v[-1] if v else 0


def _vec(x: np.ndarray, what: str, n: int | None = None) -> list[int]:
    x = np.asarray(x)
    if x.ndim != 1 or (n is not None and x.shape[0] != n):
        want = f"a vector of {n}" if n is not None else "a vector"
        raise InvalidArgumentError(f"{what} must be {want}, got shape {list(x.shape)}")
    return [int(v) for v in x]


def _axis(d: int, rank: int, what: str) -> int:
    if not 0 <= d < rank:
        raise InvalidArgumentError(f"{what} {d} is out of range for rank {rank}")
    return d


# --- computations ------------------------------------------------------------------------------


class Computation:
    """A library function (a scalar XLA computation) applied to arrays elementwise.

    Built once per (function, library) and shared by every node naming it; immutable after
    construction but for ``_ref``, the reference interpreter a body with control flow runs in,
    which ``_lock`` serializes (it keeps per-run state)."""

    def __init__(self, name: str, library: bytes, interpret: bool = False) -> None:
        """``interpret``: run the body in the reference interpreter even when it is straight
        line (tests compare the two paths)."""
        from dfg.graphdef.frames import CONTROL_FLOW_OPS
        from dfg.graphdef.functions import (
            ARG_OP,
            COMPUTATION_OPS,
            FUNCTIONAL_OPS,
            RETVAL_OP,
            Library,
            instantiate,
        )
        from dfg.graphdef.graph import parse_input
        from dfg.graphdef.opdefs.registry import registry
        from dfg.schemas import function_pb2

        from ..kernel_call import bind, context, numpy_dtype
        from .registry import lookup

        self.name = name
        proto = function_pb2.FunctionDefLibrary.FromString(library)
        lib = Library(proto)
        body = instantiate(lib.function(name), None, lib)
        args = sorted((nd for nd in body.node if nd.op == ARG_OP), key=lambda n: n.attr["index"].i)
        rets = sorted((nd for nd in body.node if nd.op == RETVAL_OP),
                      key=lambda n: n.attr["index"].i)
        self.num_args, self.num_results = len(args), len(rets)
        self.arg_dtypes = [numpy_dtype(nd.attr["T"].type) for nd in args]
        inner = [nd for nd in body.node if nd.op not in (ARG_OP, RETVAL_OP)]
        reg = registry()
        # straight line: no control flow, no calls, no state, and no node that applies a
        # function itself (the interpreter's graph hands those their bodies)
        straight = all(
            nd.op not in CONTROL_FLOW_OPS and nd.op not in FUNCTIONAL_OPS and nd.op not in lib
            and nd.op not in COMPUTATION_OPS
            and reg.get(nd.op) is not None and not reg.get(nd.op).is_stateful
            and lookup(nd.op) is not None for nd in inner)
        self._lock = threading.Lock()   # guards _ref (the interpreter keeps per-run state)
        self._ref = None
        self.direct = straight and not interpret
        if self.direct:
            # a straight-line body: its nodes in dependency order, each bound once
            self._slots = {nd.name: i for i, nd in enumerate(args)}
            data = {nd.name: [parse_input(s) for s in nd.input if not s.startswith("^")]
                    for nd in inner}
            order: list[Any] = []
            done = set(self._slots)
            pending = list(inner)
            while pending:
                ready = [nd for nd in pending if all(s in done for s, _ in data[nd.name])]
                if not ready:
                    raise InvalidArgumentError(f"function '{name}' has a cycle or an input "
                                               "naming nothing")
                for nd in ready:
                    done.add(nd.name)
                order.extend(ready)
                pending = [nd for nd in pending if nd.name not in done]
            self._steps = []
            for nd in order:
                k = bind(nd)
                self._steps.append((nd.name, k, context(k), data[nd.name]))
            self._rets = [parse_input(r.input[0]) for r in rets]
        else:
            from dfg.graphdef.functions import attach_bodies, needs_bodies
            from dfg.graphdef.lowering import lower_functional, needs_lowering
            from dfg.schemas import graph_pb2

            from ..reference import Reference

            gd = graph_pb2.GraphDef()
            gd.library.CopyFrom(proto)
            for nd in body.node:
                new = gd.node.add()
                new.CopyFrom(nd)
                if nd.op == ARG_OP:
                    new.op = "Placeholder"
                    del new.input[:]
                    new.attr.clear()
                    new.attr["dtype"].type = nd.attr["T"].type
                elif nd.op == RETVAL_OP:
                    new.op = "Identity"
                    new.attr.clear()
                    new.attr["T"].type = nd.attr["T"].type
            if needs_lowering(gd):
                gd = lower_functional(gd, keep_library=True)
            if needs_bodies(gd):
                gd = attach_bodies(gd)
            self._ref = Reference(gd)
            self._feeds = [f"{nd.name}:0" for nd in args]
            self._fetches = [f"{nd.name}:0" for nd in rets]

    def __call__(self, *args: np.ndarray) -> list[np.ndarray]:
        """The function's results for ``args`` (arrays broadcast together), one array each."""
        if len(args) != self.num_args:
            raise InvalidArgumentError(f"function '{self.name}' takes {self.num_args} "
                                       f"arguments, got {len(args)}")
        shape = np.broadcast_shapes(*(np.shape(a) for a in args)) if args else ()
        if not shape:
            return self._run(args)
        try:
            outs = self._run(args)
            if all(np.shape(o) == shape for o in outs):
                return outs
        except InvalidArgumentError:
            pass
        # not elementwise on arrays: run it on each element, as XLA does
        full = [np.broadcast_to(a, shape) for a in args]
        results: list[np.ndarray] | None = None
        for idx in np.ndindex(*shape):
            one = self._run([a[idx][()] if a.ndim else a for a in full])
            one = [np.asarray(o) for o in one]
            if results is None:
                results = [np.empty(shape, dtype=o.dtype) for o in one]
            for r, o in zip(results, one):
                r[idx] = o
        return results if results is not None else self._run([a.reshape(shape) for a in full])

    def _run(self, args: Any) -> list[np.ndarray]:
        from ..kernel_call import call

        args = [np.asarray(a) for a in args]
        if self._ref is not None:
            with self._lock:
                out = self._ref.run(self._fetches, dict(zip(self._feeds, args)))
            return [np.asarray(o) for o in out]
        vals: dict[str, Any] = {name: (args[i],) for name, i in self._slots.items()}
        for name, k, ctx, ins in self._steps:
            vals[name] = call(k, [vals[s][slot] for s, slot in ins], ctx)
        return [np.asarray(vals[s][slot]) for s, slot in self._rets]


_COMPUTATIONS: dict[tuple[str, bytes], Computation] = {}
_COMPUTATIONS_MAX = 256
_computations_lock = threading.Lock()   # guards _COMPUTATIONS


def computation(ctx: KernelContext, attr: str) -> Computation:
    """The computation the node's func attr ``attr`` names (built once, then cached)."""
    ref = ctx.attrs.get(attr)
    library = getattr(ref, "library", None)
    if library is None:
        raise UnimplementedError(
            f"attr '{attr}' names function '{ref}', whose body the node does not carry "
            "(graphdef.functions.attach_bodies gives it; a dfg Session does this)")
    key = (str(ref), library)
    with _computations_lock:
        comp = _COMPUTATIONS.get(key)
    if comp is None:
        comp = Computation(str(ref), library)
        with _computations_lock:
            if len(_COMPUTATIONS) >= _COMPUTATIONS_MAX:
                _COMPUTATIONS.clear()
            _COMPUTATIONS[key] = comp
    return comp


def _seq_reduce(comp: Computation, xs: list[np.ndarray], inits: list[np.ndarray]
                ) -> list[np.ndarray]:
    """Reduce axis 0 of each of ``xs`` (all the same shape) with ``comp``: the accumulators
    start at the initial values and take the elements in order, acc = comp(acc, x), as XLA's
    CPU backend does (a reducer need be neither associative nor commutative: jax2tf's
    ``lax.reduce(x, 0, lambda a, b: a + b * b)`` depends on it). One call per element of the
    reduced dims, over all outputs at once."""
    out_shape = xs[0].shape[1:]
    acc = [np.array(np.broadcast_to(i, out_shape), dtype=x.dtype) for i, x in zip(inits, xs)]
    for r in range(xs[0].shape[0]):
        acc = _fold(comp, acc, [x[r] for x in xs])
    return [a.reshape(out_shape) for a in acc]


def _fold(comp: Computation, acc: list[np.ndarray], xs: list[np.ndarray]) -> list[np.ndarray]:
    res = comp(*acc, *xs)
    return [np.asarray(r, dtype=a.dtype) for r, a in zip(res, acc)]


def _rounds(flat: np.ndarray) -> list[np.ndarray]:
    """Positions of ``flat`` (targets, in order) split into rounds with no target twice in a
    round; round k holds each target's k-th occurrence, so applying rounds in order applies
    every target's updates in their order."""
    if flat.size == 0:
        return []
    # no target twice (windows that do not overlap, distinct scatter rows): one round
    if flat.min() >= 0 and flat.max() < 8 * flat.size + 1024 and \
            np.bincount(flat).max() == 1:
        return [np.arange(flat.size)]
    order = np.argsort(flat, kind="stable")
    sorted_t = flat[order]
    start = np.r_[True, sorted_t[1:] != sorted_t[:-1]]
    group_start = np.maximum.accumulate(np.where(start, np.arange(flat.size), 0))
    occurrence = np.empty(flat.size, dtype=np.int64)
    occurrence[order] = np.arange(flat.size) - group_start
    return [np.flatnonzero(occurrence == k) for k in range(int(occurrence.max()) + 1)]


# --- plain ops ---------------------------------------------------------------------------------


@kernel("XlaSharding", cheap=True)
def xla_sharding(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    # one device: a sharding annotation changes nothing
    return x


@kernel("XlaOptimizationBarrier", cheap=True)
def xla_optimization_barrier(ctx: KernelContext, *xs: Any) -> tuple:
    return tuple(xs)


@kernel("XlaCallModule")
def xla_call_module(ctx: KernelContext, *args: Any) -> Any:
    raise UnimplementedError(
        "the StableHLO module this op holds (jax2tf's native serialization) is not "
        "supported: dfg does not run StableHLO; export with jax2tf.convert(..., "
        "native_serialization=False) to get TensorFlow ops")


@kernel("XlaDotV2", "XlaDot")
def xla_dot(ctx: KernelContext, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    f = _proto_ints(ctx.attrs.get("dimension_numbers"))
    lc, rc, lb, rb = list(f.get(1, ())), list(f.get(2, ())), list(f.get(3, ())), list(f.get(4, ()))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise InvalidArgumentError(f"dot dimension numbers do not pair up: contracting {lc} "
                                   f"vs {rc}, batch {lb} vs {rb}")
    for a, b in zip(lc + lb, rc + rb):
        _axis(a, lhs.ndim, "lhs dimension")
        _axis(b, rhs.ndim, "rhs dimension")
        if lhs.shape[a] != rhs.shape[b]:
            raise InvalidArgumentError(f"lhs dimension {a} (size {lhs.shape[a]}) and rhs "
                                       f"dimension {b} (size {rhs.shape[b]}) must match")
    out = ctx.output_dtypes[0] if ctx.output_dtypes else np.result_type(lhs, rhs)
    lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    work = out if out.kind in "fciu" else np.float64
    a = lhs.astype(work, copy=False).transpose(lb + lf + lc)
    b = rhs.astype(work, copy=False).transpose(rb + rc + rf)
    bshape = [lhs.shape[d] for d in lb]
    fl = [lhs.shape[d] for d in lf]
    fr = [rhs.shape[d] for d in rf]
    k = int(np.prod([lhs.shape[d] for d in lc], dtype=np.int64))
    nb = int(np.prod(bshape, dtype=np.int64))
    a3 = a.reshape(nb, int(np.prod(fl, dtype=np.int64)), k)
    b3 = b.reshape(nb, k, int(np.prod(fr, dtype=np.int64)))
    if work.kind in "iu" and work.itemsize < 8:
        res = np.matmul(a3.astype(np.int64), b3.astype(np.int64)).astype(work)
    else:
        res = np.matmul(a3, b3)
    return res.reshape(bshape + fl + fr).astype(out, copy=False)


@kernel("XlaDynamicSlice")
def xla_dynamic_slice(ctx: KernelContext, x: np.ndarray, starts: np.ndarray,
                      sizes: np.ndarray) -> np.ndarray:
    st = _vec(starts, "start_indices", x.ndim)
    sz = _vec(sizes, "size_indices", x.ndim)
    sl = []
    for d, (s, n) in enumerate(zip(st, sz)):
        if not 0 <= n <= x.shape[d]:
            raise InvalidArgumentError(f"slice size {n} of dimension {d} is out of range for "
                                       f"size {x.shape[d]}")
        s = min(max(s, 0), x.shape[d] - n)    # XLA clamps the start into range
        sl.append(slice(s, s + n))
    return x[tuple(sl)].copy()


@kernel("XlaDynamicUpdateSlice")
def xla_dynamic_update_slice(ctx: KernelContext, x: np.ndarray, update: np.ndarray,
                             indices: np.ndarray) -> np.ndarray:
    st = _vec(indices, "indices", x.ndim)
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise InvalidArgumentError(f"update of shape {list(update.shape)} does not fit input "
                                   f"of shape {list(x.shape)}")
    out = x.copy()
    sl = []
    for d, s in enumerate(st):
        s = min(max(s, 0), x.shape[d] - update.shape[d])
        sl.append(slice(s, s + update.shape[d]))
    out[tuple(sl)] = update
    return out


@kernel("XlaPad")
def xla_pad(ctx: KernelContext, x: np.ndarray, value: np.ndarray, low: np.ndarray,
            high: np.ndarray, interior: np.ndarray) -> np.ndarray:
    lo = _vec(low, "padding_low", x.ndim)
    hi = _vec(high, "padding_high", x.ndim)
    inner = _vec(interior, "padding_interior", x.ndim)
    if np.ndim(value) != 0:
        raise InvalidArgumentError(f"padding_value must be a scalar, got {list(np.shape(value))}")
    if any(i < 0 for i in inner):
        raise InvalidArgumentError(f"interior padding must not be negative: {inner}")
    # interior padding first, then edges (a negative edge crops)
    shape = [0 if n == 0 else n + (n - 1) * i for n, i in zip(x.shape, inner)]
    full = [lo_ + s + hi_ for lo_, s, hi_ in zip(lo, shape, hi)]
    if any(f < 0 for f in full):
        raise InvalidArgumentError(f"padding gives a negative size: {full}")
    out = np.full(full, value, dtype=x.dtype)
    src: list[slice] = []
    dst: list[slice] = []
    for d in range(x.ndim):
        step = inner[d] + 1
        # positions of the input's elements in the padded dimension: lo + j*step
        j0 = _first_at_least(lo[d], step, 0)
        j1 = _last_below(lo[d], step, full[d], x.shape[d])
        if j1 < j0:
            return out
        src.append(slice(j0, j1 + 1))
        dst.append(slice(lo[d] + j0 * step, lo[d] + j1 * step + 1, step))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _first_at_least(lo: int, step: int, bound: int) -> int:
    """The first j >= 0 with lo + j*step >= bound."""
    if lo >= bound:
        return 0
    return -((lo - bound) // step)


def _last_below(lo: int, step: int, size: int, n: int) -> int:
    """The last j < n with lo + j*step < size (-1 if none)."""
    if n == 0:
        return -1
    j = (size - 1 - lo) // step
    return min(j, n - 1)


# --- gather / scatter --------------------------------------------------------------------------


def _index_vectors(indices: np.ndarray, ivd: int) -> tuple[np.ndarray, list[int]]:
    """Indices as [batch..., index vector] with the batch dims in order, and the batch dims'
    positions in ``indices`` (an index vector dim equal to the rank means vectors of 1)."""
    if ivd == indices.ndim:
        indices = indices[..., None]
    if not 0 <= ivd < indices.ndim:
        raise InvalidArgumentError(f"index_vector_dim {ivd} is out of range for indices of "
                                   f"rank {indices.ndim}")
    batch_dims = [d for d in range(indices.ndim) if d != ivd]
    return np.moveaxis(indices, ivd, -1), batch_dims


@kernel("XlaGather")
def xla_gather(ctx: KernelContext, operand: np.ndarray, indices: np.ndarray,
               slice_sizes: np.ndarray) -> np.ndarray:
    f = _proto_ints(ctx.attrs.get("dimension_numbers"))
    offset_dims, collapsed, start_map = list(f.get(1, ())), list(f.get(2, ())), list(f.get(3, ()))
    ivd = _one(f, 4)
    op_batch, idx_batch = list(f.get(5, ())), list(f.get(6, ()))
    sizes = _vec(slice_sizes, "slice_sizes", operand.ndim)
    for d, s in enumerate(sizes):
        if not 0 <= s <= operand.shape[d]:
            raise InvalidArgumentError(f"slice size {s} of dimension {d} is out of range for "
                                       f"operand dimension {operand.shape[d]}")
    vecs, batch_dims = _index_vectors(np.asarray(indices, dtype=np.int64), ivd)
    if vecs.shape[-1] != len(start_map):
        raise InvalidArgumentError(f"index vectors have {vecs.shape[-1]} entries, "
                                   f"start_index_map has {len(start_map)}")
    bshape = vecs.shape[:-1]
    nb = int(np.prod(bshape, dtype=np.int64))
    flat = vecs.reshape(nb, len(start_map))
    starts = np.zeros((nb, operand.ndim), dtype=np.int64)
    for k, d in enumerate(start_map):
        starts[:, _axis(d, operand.ndim, "start_index_map entry")] = flat[:, k]
    if op_batch:
        grid = np.indices(bshape).reshape(len(bshape), nb) if bshape else np.zeros((0, nb))
        for od, idd in zip(op_batch, idx_batch):
            starts[:, od] = grid[batch_dims.index(idd)]
    hi = np.array([operand.shape[d] - sizes[d] for d in range(operand.ndim)], dtype=np.int64)
    starts = np.clip(starts, 0, hi)
    # every element of every slice: starts[b] + window offset, window in row-major order
    r = operand.ndim
    idx = [starts[:, d].reshape((nb,) + (1,) * r)
           + np.arange(sizes[d]).reshape((1,) * (d + 1) + (sizes[d],) + (1,) * (r - d - 1))
           for d in range(r)]
    got = operand[tuple(idx)] if operand.ndim else np.broadcast_to(operand, (nb,))
    dropped = sorted(set(collapsed) | set(op_batch))
    got = got.reshape((nb,) + tuple(s for d, s in enumerate(sizes) if d not in dropped))
    got = got.reshape(bshape + got.shape[1:])
    # output: offset dims at the positions offset_dims names, batch dims elsewhere in order
    rank = len(bshape) + len(offset_dims)
    if sorted(offset_dims) != list(offset_dims) or any(not 0 <= d < rank for d in offset_dims):
        raise InvalidArgumentError(f"offset_dims {offset_dims} must be sorted and within the "
                                   f"output rank {rank}")
    batch_pos = [d for d in range(rank) if d not in offset_dims]
    src_of = {}
    for i, d in enumerate(batch_pos):
        src_of[d] = i
    for i, d in enumerate(offset_dims):
        src_of[d] = len(bshape) + i
    return np.ascontiguousarray(got.transpose([src_of[d] for d in range(rank)]))


@kernel("XlaScatter")
def xla_scatter(ctx: KernelContext, operand: np.ndarray, indices: np.ndarray,
                updates: np.ndarray) -> np.ndarray:
    f = _proto_ints(ctx.attrs.get("dimension_numbers"))
    window_dims, inserted, to_operand = list(f.get(1, ())), list(f.get(2, ())), list(f.get(3, ()))
    ivd = _one(f, 4)
    in_batch, idx_batch = list(f.get(5, ())), list(f.get(6, ()))
    comp = computation(ctx, "update_computation")
    vecs, batch_dims = _index_vectors(np.asarray(indices, dtype=np.int64), ivd)
    if vecs.shape[-1] != len(to_operand):
        raise InvalidArgumentError(f"index vectors have {vecs.shape[-1]} entries, "
                                   f"scatter_dims_to_operand_dims has {len(to_operand)}")
    scatter_dims = [d for d in range(updates.ndim) if d not in window_dims]
    bshape = vecs.shape[:-1]
    if tuple(updates.shape[d] for d in scatter_dims) != tuple(bshape):
        got = [updates.shape[d] for d in scatter_dims]
        raise InvalidArgumentError(f"updates' scatter dims {got} do not match the indices' "
                                   f"batch shape {list(bshape)}")
    nb = int(np.prod(bshape, dtype=np.int64))
    starts = np.zeros((nb, operand.ndim), dtype=np.int64)
    flat = vecs.reshape(nb, len(to_operand))
    for k, d in enumerate(to_operand):
        starts[:, _axis(d, operand.ndim, "scatter_dims_to_operand_dims entry")] = flat[:, k]
    if in_batch:
        grid = np.indices(bshape).reshape(len(bshape), nb)
        for od, idd in zip(in_batch, idx_batch):
            starts[:, od] = grid[batch_dims.index(idd)]
    # window sizes per operand dim: the updates' window dims in order, 1 where inserted
    win_dims_op = [d for d in range(operand.ndim) if d not in inserted and d not in in_batch]
    if len(win_dims_op) != len(window_dims):
        raise InvalidArgumentError(f"update_window_dims {window_dims} do not match the operand's "
                                   f"window dims {win_dims_op}")
    wsize = [1] * operand.ndim
    for od, ud in zip(win_dims_op, window_dims):
        wsize[od] = updates.shape[ud]
    # an update whose window does not fit the operand is skipped, as XLA's CPU backend does
    ok = np.all((starts >= 0) & (starts <= np.array(operand.shape) - np.array(wsize)), axis=1)
    upd = updates.transpose(scatter_dims + list(window_dims)).reshape(
        (nb,) + tuple(updates.shape[d] for d in window_dims))
    wn = int(np.prod(wsize, dtype=np.int64))
    offs = np.stack([g.reshape(-1) for g in np.indices(wsize)], axis=1) if operand.ndim else \
        np.zeros((1, 0), dtype=np.int64)
    pos = starts[ok][:, None, :] + offs[None, :, :]                      # [n, wn, rank]
    target = np.ravel_multi_index(tuple(pos.reshape(-1, operand.ndim).T), operand.shape) \
        if operand.ndim else np.zeros(pos.shape[0] * wn, dtype=np.int64)
    vals = upd[ok].reshape(-1)      # window elements in row-major order, as ``offs``
    out = operand.copy().reshape(-1)
    for r in _rounds(target):
        t = target[r]
        out[t] = _fold(comp, [out[t]], [vals[r]])[0]
    return out.reshape(operand.shape)


# --- reductions --------------------------------------------------------------------------------


def _reduce(ctx: KernelContext, xs: list[np.ndarray], inits: list[np.ndarray]
            ) -> list[np.ndarray]:
    dims = [int(d) for d in ctx.attrs.get("dimensions_to_reduce", [])]
    comp = computation(ctx, "reducer")
    shape = xs[0].shape
    for x in xs:
        if x.shape != shape:
            raise InvalidArgumentError(f"inputs of shapes {[list(a.shape) for a in xs]} must be "
                                       "alike")
    for i in inits:
        if np.ndim(i) != 0:
            raise InvalidArgumentError(f"init values must be scalars, got {list(np.shape(i))}")
    for d in dims:
        _axis(d, len(shape), "dimension to reduce")
    if len(set(dims)) != len(dims):
        raise InvalidArgumentError(f"dimensions_to_reduce repeats a dimension: {dims}")
    keep = [d for d in range(len(shape)) if d not in dims]
    n = int(np.prod([shape[d] for d in dims], dtype=np.int64))
    moved = [x.transpose(dims + keep).reshape((n,) + tuple(shape[d] for d in keep)) for x in xs]
    return _seq_reduce(comp, moved, [np.asarray(i, dtype=x.dtype) for i, x in zip(inits, xs)])


@kernel("XlaReduce")
def xla_reduce(ctx: KernelContext, x: np.ndarray, init: np.ndarray) -> np.ndarray:
    return _reduce(ctx, [x], [init])[0]


@kernel("XlaVariadicReduceV2")
def xla_variadic_reduce_v2(ctx: KernelContext, *args: np.ndarray) -> list[np.ndarray]:
    n = len(args) // 2
    return _reduce(ctx, list(args[:n]), list(args[n:]))


@kernel("XlaVariadicReduce")
def xla_variadic_reduce(ctx: KernelContext, *args: np.ndarray) -> list[np.ndarray]:
    n = len(args) // 2
    return _reduce(ctx, list(args[:n]), list(args[n:]))


def _window_params(x: np.ndarray, wdims: np.ndarray, strides: np.ndarray,
                   padding: np.ndarray, base_dil: Any = None, win_dil: Any = None) -> Any:
    r = x.ndim
    w = _vec(wdims, "window_dimensions", r)
    s = _vec(strides, "window_strides", r)
    pad = np.asarray(padding)
    if pad.shape != (r, 2):
        raise InvalidArgumentError(f"padding must have shape [{r}, 2], got {list(pad.shape)}")
    bd = _vec(base_dil, "base_dilations", r) if base_dil is not None else [1] * r
    wd = _vec(win_dil, "window_dilations", r) if win_dil is not None else [1] * r
    if any(v < 1 for v in w + s + bd + wd) and not any(v == 0 for v in w):
        raise InvalidArgumentError(f"window sizes, strides and dilations must be positive: "
                                   f"{w}, {s}, {bd}, {wd}")
    return w, s, [(int(a), int(b)) for a, b in pad], bd, wd


def _window_grid(shape: tuple, w: list[int], s: list[int], pad: list[tuple[int, int]],
                 bd: list[int], wd: list[int]) -> tuple[list[int], list[int]]:
    """(padded base sizes, output sizes)."""
    base = [0 if n == 0 else (n - 1) * b + 1 for n, b in zip(shape, bd)]
    padded = [b + lo + hi for b, (lo, hi) in zip(base, pad)]
    span = [(k - 1) * d + 1 for k, d in zip(w, wd)]
    out = [max(0, (p - sp) // st + 1) if p >= sp else 0 for p, sp, st in zip(padded, span, s)]
    return padded, out


def _padded_base(x: np.ndarray, fill: Any, pad: list[tuple[int, int]], bd: list[int],
                 padded: list[int], want_mask: bool = False
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """``x`` dilated and padded with ``fill`` (negative padding crops), and with
    ``want_mask`` a mask of the positions holding ``x`` (else None)."""
    out = np.full(padded, fill, dtype=x.dtype)
    mask = np.zeros(padded, dtype=bool) if want_mask else None
    dst, src = [], []
    for d in range(x.ndim):
        lo, step = pad[d][0], bd[d]
        # element j lands at lo + j*step: keep those inside [0, padded)
        j0 = _first_at_least(lo, step, 0)
        j1 = _last_below(lo, step, padded[d], x.shape[d])
        if j1 < j0:
            return out, mask
        dst.append(slice(lo + j0 * step, lo + j1 * step + 1, step))
        src.append(slice(j0, j1 + 1))
    out[tuple(dst)] = x[tuple(src)]
    if mask is not None:
        mask[tuple(dst)] = True
    return out, mask


@kernel("XlaReduceWindow")
def xla_reduce_window(ctx: KernelContext, x: np.ndarray, init: np.ndarray, wdims: np.ndarray,
                      strides: np.ndarray, base_dil: np.ndarray, win_dil: np.ndarray,
                      padding: np.ndarray) -> np.ndarray:
    w, s, pad, bd, wd = _window_params(x, wdims, strides, padding, base_dil, win_dil)
    if np.ndim(init) != 0:
        raise InvalidArgumentError(f"init_value must be a scalar, got {list(np.shape(init))}")
    comp = computation(ctx, "computation")
    init = np.asarray(init, dtype=x.dtype)
    padded, out_shape = _window_grid(x.shape, w, s, pad, bd, wd)
    base, _ = _padded_base(x, init, pad, bd, padded)
    acc = np.full(out_shape, init, dtype=x.dtype)
    if acc.size == 0:
        return acc
    # one call per window element, in the window's row-major order, over all windows at once
    for k in itertools.product(*[range(n) for n in w]):
        sl = tuple(slice(k[d] * wd[d], k[d] * wd[d] + (out_shape[d] - 1) * s[d] + 1, s[d])
                   for d in range(x.ndim))
        acc = _fold(comp, [acc], [base[sl]])[0]
    return acc


@kernel("XlaSelectAndScatter")
def xla_select_and_scatter(ctx: KernelContext, operand: np.ndarray, wdims: np.ndarray,
                           strides: np.ndarray, padding: np.ndarray, source: np.ndarray,
                           init: np.ndarray) -> np.ndarray:
    w, s, pad, bd, wd = _window_params(operand, wdims, strides, padding)
    select = computation(ctx, "select")
    scatter = computation(ctx, "scatter")
    padded, out_shape = _window_grid(operand.shape, w, s, pad, bd, wd)
    if list(source.shape) != out_shape:
        raise InvalidArgumentError(f"source has shape {list(source.shape)}, the windows give "
                                   f"{out_shape}")
    base, mask = _padded_base(operand, np.zeros((), operand.dtype), pad, bd, padded,
                              want_mask=True)
    # flat index into the operand of each padded position (-1 in the padding)
    where = np.full(padded, -1, dtype=np.int64)
    where[mask] = np.arange(operand.size)
    sel_val = np.zeros(out_shape, dtype=operand.dtype)
    sel_idx = np.full(out_shape, -1, dtype=np.int64)
    # walk each window in order: the first element is selected, then an element replaces the
    # selection unless select(selected, element) holds; padding is never selected
    for k in itertools.product(*[range(n) for n in w]):
        sl = tuple(slice(k[d], k[d] + (out_shape[d] - 1) * s[d] + 1, s[d])
                   for d in range(operand.ndim))
        cand, cidx = base[sl], where[sl]
        valid = cidx >= 0
        have = sel_idx >= 0
        keep = np.asarray(select(sel_val, cand)[0], dtype=bool) if have.any() else \
            np.zeros(out_shape, dtype=bool)
        take = valid & (~have | ~keep)
        sel_val = np.where(take, cand, sel_val)
        sel_idx = np.where(take, cidx, sel_idx)
    out = np.full(operand.size, np.asarray(init, dtype=operand.dtype), dtype=operand.dtype)
    chosen = sel_idx.reshape(-1)
    vals = source.reshape(-1).astype(operand.dtype, copy=False)
    live = chosen >= 0
    chosen, vals = chosen[live], vals[live]
    for r in _rounds(chosen):
        t = chosen[r]
        out[t] = _fold(scatter, [out[t]], [vals[r]])[0]
    return out.reshape(operand.shape)


# --- convolution -------------------------------------------------------------------------------


@kernel("XlaConvV2", "XlaConv")
def xla_conv(ctx: KernelContext, lhs: np.ndarray, rhs: np.ndarray, strides: np.ndarray,
             padding: np.ndarray, lhs_dil: np.ndarray, rhs_dil: np.ndarray,
             groups: np.ndarray) -> np.ndarray:
    f = _proto_ints(ctx.attrs.get("dimension_numbers"))
    ib, ifd, isp = _one(f, 7), _one(f, 8), list(f.get(11, ()))
    kif, kof, ksp = _one(f, 3), _one(f, 4), list(f.get(6, ()))
    ob, ofd, osp = _one(f, 9), _one(f, 10), list(f.get(12, ()))
    nsp = len(isp)
    if len(ksp) != nsp or len(osp) != nsp or lhs.ndim != nsp + 2 or rhs.ndim != nsp + 2:
        raise InvalidArgumentError(f"convolution dimension numbers do not fit inputs of rank "
                                   f"{lhs.ndim} and {rhs.ndim}")
    st = _vec(strides, "window_strides", nsp)
    pad = np.asarray(padding)
    if pad.shape != (nsp, 2):
        raise InvalidArgumentError(f"padding must have shape [{nsp}, 2], got {list(pad.shape)}")
    ld = _vec(lhs_dil, "lhs_dilation", nsp)
    rd = _vec(rhs_dil, "rhs_dilation", nsp)
    fg = int(groups)
    bg = int(ctx.attrs.get("batch_group_count", 1) or 1)
    out_t = ctx.output_dtypes[0] if ctx.output_dtypes else np.result_type(lhs, rhs)
    work = out_t if out_t.kind in "fc" else np.int64
    x = lhs.transpose([ib, ifd] + list(isp)).astype(work, copy=False)    # N C S...
    k = rhs.transpose([kof, kif] + list(ksp)).astype(work, copy=False)   # O I K...
    n, c = x.shape[:2]
    o, i_per = k.shape[:2]
    if fg < 1 or bg < 1 or c != i_per * fg or o % fg or o % bg or n % bg:
        raise InvalidArgumentError(
            f"feature_group_count {fg} / batch_group_count {bg} do not fit input features {c}, "
            f"kernel input features {i_per}, output features {o}, batch {n}")
    # lhs dilation and padding (negative padding crops)
    sp = list(x.shape[2:])
    dil = [0 if s_ == 0 else (s_ - 1) * d + 1 for s_, d in zip(sp, ld)]
    full = [dl + int(lo) + int(hi) for dl, (lo, hi) in zip(dil, pad)]
    if any(v < 0 for v in full):
        raise InvalidArgumentError(f"padding gives a negative size: {full}")
    base = np.zeros((n, c, *full), dtype=work)
    dst, src = [], []
    for d in range(nsp):
        pos = int(pad[d][0]) + np.arange(sp[d]) * ld[d]
        keep = (pos >= 0) & (pos < full[d])
        dst.append(pos[keep])
        src.append(np.flatnonzero(keep))
    if all(len(p) for p in dst):
        both = (slice(None), slice(None))
        base[both + np.ix_(*dst)] = x[both + np.ix_(*src)]
    ks = list(k.shape[2:])
    span = [(kk - 1) * d + 1 for kk, d in zip(ks, rd)]
    outs = [max(0, (fl - sp_) // s_ + 1) if fl >= sp_ else 0 for fl, sp_, s_ in zip(full, span, st)]
    # batch groups split the batch; feature groups split the features; both split outputs
    g = fg * bg
    nb = n // bg
    xg = base.reshape(bg, nb, fg, c // fg, *full)
    kg = k.reshape(bg * fg, o // g, i_per, *ks).reshape(bg, fg, o // g, i_per, *ks) if bg > 1 \
        else k.reshape(1, fg, o // fg, i_per, *ks)
    res = np.zeros((bg, nb, fg, o // g, *outs), dtype=work)
    for off in itertools.product(*[range(v) for v in ks]):
        sl = tuple(slice(off[d] * rd[d], off[d] * rd[d] + (outs[d] - 1) * st[d] + 1, st[d])
                   for d in range(nsp))
        patch = xg[(slice(None),) * 4 + sl]                        # bg nb fg I S...
        kk = kg[(slice(None),) * 4 + tuple(off)]                   # bg fg O I
        res += np.einsum("bngi...,bgoi->bngo...", patch, kk)
    # batch groups' outputs go to the feature dim, group-major
    res = res.transpose(1, 0, 2, 3, *range(4, 4 + nsp)).reshape(nb, o, *outs)
    perm = [0] * (nsp + 2)
    perm[ob], perm[ofd] = 0, 1
    for j, d in enumerate(osp):
        perm[d] = 2 + j
    return np.ascontiguousarray(res.transpose(perm)).astype(out_t, copy=False)


# --- sorting -----------------------------------------------------------------------------------


@kernel("XlaSort")
def xla_sort(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:
        return x.copy()
    return np.sort(x, axis=-1, kind="stable")


@kernel("XlaKeyValueSort")
def xla_key_value_sort(ctx: KernelContext, keys: np.ndarray, values: np.ndarray) -> tuple:
    if keys.shape != values.shape:
        raise InvalidArgumentError(f"keys {list(keys.shape)} and values {list(values.shape)} "
                                   "must have the same shape")
    if keys.ndim == 0:
        return keys.copy(), values.copy()
    order = np.argsort(keys, axis=-1, kind="stable")
    return np.take_along_axis(keys, order, -1), np.take_along_axis(values, order, -1)


# Rows at most this long sort by comparing all pairs at once (n*n comparator results per
# row); longer rows sort one by one with the comparator as a key function.
_PAIRWISE_MAX = 1024


def _pairs(lhs: list[Any], rhs: list[Any]) -> list[Any]:
    """A comparator's arguments: operand i's left and right values at 2i and 2i+1."""
    return [v for pair in zip(lhs, rhs) for v in pair]


def _merge_order(comp: Computation, rows: list[np.ndarray]) -> np.ndarray:
    """The stable sorting permutation of each row by ``comp`` (a strict weak order): a
    bottom-up merge sort of all rows at once. Merging runs A and B (each sorted) puts a_i at
    i + #{b < a_i} and b_j at j + #{a <= b_j}; both counts are binary searches in the other
    run, one vectorized comparator call per step: log2(n)^2 calls in all."""
    m, n = rows[0].shape
    perm = np.tile(np.arange(n, dtype=np.int64), (m, 1))
    pos = np.arange(n, dtype=np.int64)
    row_ix = np.arange(m, dtype=np.int64)[:, None]
    width = 1
    while width < n:
        start = pos - pos % (2 * width)                  # the pair of runs each position is in
        left = pos - start < width
        mid = np.minimum(start + width, n)
        own = np.where(left, pos - start, pos - mid)      # index within its own run
        lo = np.where(left, mid, start)                   # the other run: [lo, hi)
        hi = np.where(left, np.minimum(start + 2 * width, n), mid)
        base = lo.copy()
        lo = np.broadcast_to(lo, (m, n)).copy()
        hi = np.broadcast_to(hi, (m, n)).copy()
        vals = [np.take_along_axis(r, perm, 1) for r in rows]   # values in current order
        while True:
            active = lo < hi
            if not active.any():
                break
            probe = np.where(active, (lo + hi) // 2, 0)
            other = [v[row_ix, probe] for v in vals]
            # left elements count the right run's b < a; right ones the left run's a <= b
            b_lt_a = np.asarray(comp(*_pairs(other, vals))[0], dtype=bool)   # other < self
            self_lt_other = np.asarray(comp(*_pairs(vals, other))[0], dtype=bool)
            go_right = np.where(left[None, :], b_lt_a, ~self_lt_other)
            lo = np.where(active & go_right, probe + 1, lo)
            hi = np.where(active & ~go_right, probe, hi)
        dest = start[None, :] + own[None, :] + (lo - base[None, :])
        new = np.empty_like(perm)
        new[row_ix, dest] = perm
        perm = new
        width *= 2
    return perm


@kernel("XlaVariadicSort")
def xla_variadic_sort(ctx: KernelContext, *args: np.ndarray) -> list[np.ndarray]:
    xs, dim = list(args[:-1]), int(args[-1])
    comp = computation(ctx, "comparator")
    shape = xs[0].shape
    if any(x.shape != shape for x in xs):
        raise InvalidArgumentError(f"inputs of shapes {[list(x.shape) for x in xs]} must be "
                                   "alike")
    if not shape:
        return [x.copy() for x in xs]
    dim = _axis(dim, len(shape), "dimension")
    rows = [np.moveaxis(x, dim, -1).reshape(-1, shape[dim]) for x in xs]
    m, n = rows[0].shape
    if n <= _PAIRWISE_MAX and m * n * n <= (1 << 24):
        # rank = how many elements come before: those less, and equal ones earlier (stable)
        a = [r[:, :, None] for r in rows]
        b = [r[:, None, :] for r in rows]
        less = np.asarray(comp(*_pairs(b, a))[0], dtype=bool)     # less[r, i, j]: x_j < x_i
        greater = np.asarray(comp(*_pairs(a, b))[0], dtype=bool)  # x_i < x_j
        tie = ~less & ~greater
        earlier = np.tri(n, n, -1, dtype=bool)[None]            # earlier[., i, j]: j < i
        rank = less.sum(axis=2) + (tie & earlier).sum(axis=2)
        order = np.argsort(rank, axis=1, kind="stable")
    else:
        order = _merge_order(comp, rows)
    out = []
    for x, r in zip(xs, rows):
        s = np.take_along_axis(r, order, 1)
        moved = list(np.moveaxis(x, dim, -1).shape)
        out.append(np.ascontiguousarray(np.moveaxis(s.reshape(moved), -1, dim)))
    return out
