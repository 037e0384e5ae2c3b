"""Queues: FIFOQueue, PaddingFIFOQueue, PriorityQueue and RandomShuffleQueue (V1 ref handles
and V2 resource handles) and the Queue* ops that fill, drain, close and measure them.

A queue is a session-lifetime resource (like a lookup table): the op that creates it stores a
:class:`Queue` in the session's ResourceManager under (container, shared_name or node name),
checks that a queue already there was made with the same attrs (TensorFlow's
``MatchesNodeDef``), and outputs a handle (V2) or the queue itself (V1's ``Ref(string)``).

Semantics follow TensorFlow's ``QueueBase``: every enqueue (and a plain close) and every
dequeue is an *attempt* appended to one of two FIFO lists; after each change the fronts of
both lists are retried until neither makes progress. So attempts complete in order (a
DequeueMany waiting for five elements holds back a later Dequeue), EnqueueMany and
DequeueMany move elements one at a time as room or elements appear (a DequeueMany larger
than the capacity completes while another step enqueues), a closed queue hands out what it
holds and then raises OutOfRangeError, and a close without ``cancel_pending_enqueues`` waits
behind the enqueues already pending.

Blocking: an attempt that cannot complete waits on the queue's condition variable until
another step's attempt makes progress, or until the step is cancelled: its deadline
(``Session.run(timeout=...)``, via the step's watchdog: DeadlineExceededError),
``Session.close()`` or SIGINT (CancelledError). A wait with no step to cancel it (a kernel
called outside a Session) would never end, so it fails at once with DeadlineExceededError.
TensorFlow blocks for good in both cases. Kernels that may block are registered not cheap,
so that in a multi-threaded Session they run on a worker while the step's other kernels
(an enqueue feeding the dequeue, say) go on; a step whose only way forward is through a
blocked kernel waits for its deadline, as in TensorFlow. The V1 ops (ref handles) are not
stateful in their OpDefs, so the executor may run them with a context shared by every run,
which has no cancel flag: a V1 wait then fails at once with DeadlineExceededError rather than
risk a wait nothing could end.

RandomShuffleQueue draws its indexes from TensorFlow's Philox4x32-10 generator seeded with
(seed, seed2), one uint32 per dequeued element (``index = draw % size``, the element swapped
with the last one), so for nonzero seeds the order is TensorFlow's; seeds (0, 0) take random
seeds, as TensorFlow does. PriorityQueue keeps one binary heap ordered by priority only,
updated with the sift-up / sift-down steps of libstdc++'s ``std::push_heap``/``pop_heap``
(what TensorFlow's ``std::priority_queue`` runs), so that elements of equal priority come out
in TensorFlow's order too.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    CancelledError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
    OpError,
    OutOfRangeError,
    UnimplementedError,
)

from ..resources import ResourceHandle
from ._stdalgo import StdHeap
from .registry import KernelContext, kernel

UNBOUNDED = 2**31 - 1   # TensorFlow's QueueBase::kUnbounded (INT32_MAX)

# What an attempt's step function reports (TensorFlow's RunResult).
NO_PROGRESS, PROGRESS, COMPLETE = 0, 1, 2

FIFO, PADDING, PRIORITY, SHUFFLE = "FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", \
    "RandomShuffleQueue"

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1

# How long one wait sleeps at most before it looks at the step's cancel flag again (the flag
# also wakes it; this only bounds the cost of a lost wake-up).
_WAIT_SLICE = 0.25


# --- dtypes and shapes ---------------------------------------------------------------------

def _dt_key(dt: Any) -> Any:
    """A dtype as something comparable: every string representation is one."""
    try:
        d = np.dtype(dt)
    except TypeError:
        return dt
    return np.dtype(object) if d.kind in "OSU" else d


def _dt_name(dt: Any) -> str:
    try:
        return D.name(D.from_numpy(dt))
    except Exception:  # noqa: BLE001 - only for messages
        return D.name(dt) if isinstance(dt, int) else str(dt)


def _dt_list(dts: list) -> str:
    return ", ".join(_dt_name(d) for d in dts)


def _fmt(shape: tuple | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _fmt_list(shapes: list) -> str:
    return "[" + ", ".join(_fmt(s) for s in shapes) + "]"


def _compatible(partial: tuple | None, shape: tuple) -> bool:
    if partial is None:
        return True
    return len(partial) == len(shape) and all(p is None or p == d
                                              for p, d in zip(partial, shape))


def _shapes_compatible(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _zeros(dtype: Any, shape: tuple) -> np.ndarray:
    if np.dtype(dtype).kind in "OSU":   # TensorFlow's zero string is empty
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype=dtype)


# --- the random generator of RandomShuffleQueue ----------------------------------------------

class _Philox:
    """TensorFlow's ``SingleSampleAdapter<PhiloxRandom>``: Philox4x32-10 with key = seed and
    the upper counter half = seed2, handing out the four words of each block in turn."""

    __slots__ = ("key", "counter", "buf")

    def __init__(self, seed: int, seed2: int) -> None:
        s, s2 = seed & _M64, seed2 & _M64
        self.key = (s & _M32, s >> 32)
        self.counter = s2 << 64          # 128-bit counter; words 2, 3 hold seed2
        self.buf: list[int] = []

    def _block(self) -> list[int]:
        v = self.counter
        c0, c1, c2, c3 = v & _M32, (v >> 32) & _M32, (v >> 64) & _M32, (v >> 96) & _M32
        k0, k1 = self.key
        for _ in range(10):
            p0 = 0xD2511F53 * c0
            p1 = 0xCD9E8D57 * c2
            c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & _M32, p1 & _M32, \
                ((p0 >> 32) ^ c3 ^ k1) & _M32, p0 & _M32
            k0, k1 = (k0 + 0x9E3779B9) & _M32, (k1 + 0xBB67AE85) & _M32
        self.counter = (v + 1) & ((1 << 128) - 1)
        return [c0, c1, c2, c3]

    def __call__(self) -> int:
        if not self.buf:
            self.buf = self._block()[::-1]
        return self.buf.pop()


# --- libstdc++'s binary heap, ordered by priority only -----------------------------------------
# The comparator is TensorFlow's ComparePriorityTensorPair (lhs.first > rhs.first): the
# smallest priority is on top.
_PRIORITY = StdHeap(lambda a, b: a[0] > b[0])


def _heap_push(h: list, value: tuple) -> None:
    h.append(value)
    _PRIORITY.push(h, len(h))


def _heap_pop(h: list) -> tuple:
    _PRIORITY.pop(h, len(h))
    return h.pop()


# --- the queue -----------------------------------------------------------------------------

class _Spec:
    """What a creation node asks for, validated (TensorFlow's kernel construction and
    ``Initialize`` checks)."""

    __slots__ = ("kind", "capacity", "dtypes", "shapes", "min_after", "seeds")

    def __init__(self, ctx: KernelContext, kind: str) -> None:
        a = ctx.attrs
        cap = int(a.get("capacity", -1))
        self.kind = kind
        self.capacity = UNBOUNDED if cap < 0 else cap
        self.min_after = 0
        self.seeds = (0, 0)
        if kind == SHUFFLE:
            self.min_after = int(a.get("min_after_dequeue", 0))
            if self.min_after < 0:
                raise InvalidArgumentError(f"min_after_dequeue {self.min_after} must be >= 0")
            if self.min_after >= self.capacity:
                raise InvalidArgumentError(f"min_after_dequeue {self.min_after} must be < "
                                           f"capacity {self.capacity}")
            self.seeds = (int(a.get("seed", 0)), int(a.get("seed2", 0)))
        shapes = list(a.get("shapes") or [])
        for s in shapes:
            if s is None:
                if kind != PADDING:
                    raise InvalidArgumentError("Unknown rank in a queue's shapes: a "
                                               f"{kind}'s component shapes must be known")
                raise InvalidArgumentError("shape <unknown> must have known rank.")
            if kind != PADDING and any(d is None for d in s):
                raise InvalidArgumentError("Dimension -1 must be >= 0")
        dtypes = list(a.get("component_types") or [])
        if kind == PRIORITY:
            dtypes = [np.dtype(np.int64)] + dtypes
            if shapes:
                shapes = [()] + shapes
        if not dtypes:
            raise InvalidArgumentError(f"Empty component types for queue {ctx.node}")
        if shapes and len(shapes) != len(dtypes):
            raise InvalidArgumentError(
                f"Different number of component types.  Types: {_dt_list(dtypes)}, Shapes: "
                f"{_fmt_list(shapes)}")
        if kind == PADDING and len(shapes) != len(dtypes):
            raise InvalidArgumentError(
                f"Shapes must be provided for all components, but received {len(dtypes)} "
                f"dtypes and {len(shapes)} shapes.")
        if kind == PRIORITY and not shapes:
            # TensorFlow's queue keeps no shapes, then fails its own MatchesNodeDef (which
            # compares against [[]] + shapes): a PriorityQueue needs its shapes
            raise InvalidArgumentError(
                f"Shared queue '{ctx.node}' has component shapes [] but requested component "
                "shapes were [[]]")
        self.dtypes = dtypes
        self.shapes = [tuple(s) for s in shapes]


class _Attempt:
    """One enqueue, dequeue or close waiting its turn. Guarded by the queue's lock."""

    __slots__ = ("left", "step", "done", "cancelled", "error", "result", "taken")

    def __init__(self, left: int, step: Callable[[_Attempt], int]) -> None:
        self.left = left              # elements still to move
        self.step = step              # tries to make progress; returns NO_PROGRESS ...
        self.done = False
        self.cancelled = False
        self.error: OpError | None = None
        self.result: Any = None
        self.taken: list[tuple] = []  # elements a DequeueMany holds so far


class Queue:
    """One queue. ``cond`` (a re-entrant lock) guards every other mutable field."""

    __dfg_resource__ = True

    def __init__(self, name: str, spec: _Spec) -> None:
        self.name = name
        self.kind = spec.kind
        self.capacity = spec.capacity
        self.dtypes = spec.dtypes
        self.shapes = spec.shapes      # [] : unspecified (padding: partial shapes)
        self.min_after = spec.min_after
        self.seeds = spec.seeds
        self.rng: _Philox | None = None
        if self.kind == SHUFFLE:
            seed, seed2 = spec.seeds
            if seed == 0 and seed2 == 0:   # TF: completely random seeds
                seed, seed2 = (int.from_bytes(os.urandom(8), "little") for _ in range(2))
            self.rng = _Philox(seed, seed2)
        self.cond = threading.Condition(threading.RLock())
        self.closed = False
        self.items: Any = [] if self.kind in (PRIORITY, SHUFFLE) else deque()
        self.enqueues: deque[_Attempt] = deque()
        self.dequeues: deque[_Attempt] = deque()

    def __repr__(self) -> str:
        return f"Queue({self.kind}, {self.name!r})"

    # -- checks at (re)creation -------------------------------------------------------------

    def check_matches(self, spec: _Spec, node: str, op: str) -> None:
        """TensorFlow's MatchesNodeDef: a shared queue must be what the node asks for."""
        if spec.kind != self.kind:
            raise InvalidArgumentError(f"Expected {self.kind}, found {op}")
        if spec.capacity != self.capacity:
            raise InvalidArgumentError(
                f"Shared queue '{self.name}' has capacity {self.capacity} but requested "
                f"capacity was {spec.capacity}")
        if self.kind == SHUFFLE:
            if spec.min_after != self.min_after:
                raise InvalidArgumentError(
                    f"Shared queue '{self.name}' has min_after_dequeue {self.min_after} but "
                    f"requested min_after_dequeue was {spec.min_after}.")
            if spec.seeds != (0, 0) and spec.seeds != self.seeds:
                raise InvalidArgumentError(
                    f"Shared queue '{self.name}' has random seeds {self.seeds} but requested "
                    f"seeds are {spec.seeds}.")
        if [_dt_key(d) for d in spec.dtypes] != [_dt_key(d) for d in self.dtypes]:
            raise InvalidArgumentError(
                f"Shared queue '{self.name}' has component types {_dt_list(self.dtypes)} but "
                f"requested component types were {_dt_list(spec.dtypes)}")
        same = (len(spec.shapes) == len(self.shapes) and all(
            _shapes_compatible(a, b) for a, b in zip(spec.shapes, self.shapes))) \
            if self.kind == PADDING else spec.shapes == self.shapes
        if not same:
            raise InvalidArgumentError(
                f"Shared queue '{self.name}' has component shapes {_fmt_list(self.shapes)} but "
                f"requested component shapes were {_fmt_list(spec.shapes)}")

    # -- validation of what is enqueued and asked for ----------------------------------------

    def check_signature(self, dtypes: list, inputs: bool, op: str) -> None:
        """TensorFlow's MatchSignature: the op's component dtypes are the queue's."""
        if [_dt_key(d) for d in dtypes] != [_dt_key(d) for d in self.dtypes]:
            handle = "resource" if op.endswith("V2") else "string_ref"
            have, want = _dt_list(dtypes), _dt_list(self.dtypes)
            if inputs:
                raise InvalidArgumentError(f"Signature mismatch, have: {handle}, {have}-> "
                                           f"expected: {handle}, {want}->")
            raise InvalidArgumentError(f"Signature mismatch, have: {handle}->{have} "
                                       f"expected: {handle}->{want}")

    def validate(self, comps: list[np.ndarray]) -> None:
        """TensorFlow's ValidateTuple (one element)."""
        for i, c in enumerate(comps):
            if self.kind == PADDING:
                if not _compatible(self.shapes[i], c.shape):
                    raise InvalidArgumentError(
                        f"Shape mismatch in tuple component {i}. Expected "
                        f"{_fmt(self.shapes[i])}, got {_fmt(c.shape)}")
            elif self.shapes and c.shape != self.shapes[i]:
                raise InvalidArgumentError(
                    f"Shape mismatch in tuple component {i}. Expected {_fmt(self.shapes[i])}, "
                    f"got {_fmt(c.shape)}")

    def validate_many(self, comps: list[np.ndarray]) -> int:
        """TensorFlow's ValidateManyTuple; returns the batch size."""
        for i, c in enumerate(comps):
            if c.ndim == 0:   # TensorFlow reads dim 0 of a scalar: undefined
                raise InvalidArgumentError(
                    f"EnqueueMany requires every component to be at least a vector, but "
                    f"component {i} is a scalar")
        batch = comps[0].shape[0]
        for i, c in enumerate(comps):
            if self.kind == PADDING:
                want: tuple | None = (batch,) + self.shapes[i]
                ok = _compatible(want, c.shape)
            elif self.shapes:
                want = (batch,) + self.shapes[i]
                ok = c.shape == want
            else:
                if i and c.shape[0] != batch:
                    raise InvalidArgumentError(
                        "All input tensors must have the same size in the 0th dimension. "
                        f"Component {i} has {c.shape[0]}, and should have {batch}")
                continue
            if not ok:
                raise InvalidArgumentError(f"Shape mismatch in tuple component {i}. Expected "
                                           f"{_fmt(want)}, got {_fmt(c.shape)}")
        return batch

    # -- storage ----------------------------------------------------------------------------

    def _push(self, elem: tuple) -> None:
        if self.kind == PRIORITY:
            _heap_push(self.items, (int(elem[0]), elem))
        else:
            self.items.append(elem)

    def _pop(self) -> tuple:
        if self.kind == PRIORITY:
            return _heap_pop(self.items)[1]
        if self.kind == SHUFFLE:
            items = self.items
            i = self.rng() % len(items)
            elem = items[i]
            items[i] = items[-1]
            items.pop()
            return elem
        return self.items.popleft()

    def _restore(self, taken: list[tuple]) -> None:
        """Give back what a DequeueMany held when the queue turned out too short."""
        for elem in reversed(taken):
            if self.kind == SHUFFLE:
                self.items.append(elem)
            else:
                self.items.appendleft(elem)

    def size(self) -> int:
        with self.cond:
            return len(self.items)

    def is_closed(self) -> bool:
        with self.cond:
            return self.closed

    # -- attempts ---------------------------------------------------------------------------

    def _try(self, attempts: deque[_Attempt]) -> bool:
        progress = False
        while attempts:
            a = attempts[0]
            if a.cancelled:
                attempts.popleft()
                continue
            try:
                r = a.step(a)
            except OpError as e:
                a.error, r = e, COMPLETE
            if r == NO_PROGRESS:
                break
            progress = True
            if r == PROGRESS:
                break
            a.done = True
            attempts.popleft()
        return progress

    def _flush(self) -> None:
        """Retry the fronts of both lists until neither moves (lock held)."""
        moved = False
        while True:
            changed = self._try(self.enqueues)
            changed = self._try(self.dequeues) or changed
            if not changed:
                break
            moved = True
        if moved:
            self.cond.notify_all()

    def _wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def run(self, ctx: KernelContext, attempts: deque[_Attempt], a: _Attempt,
            what: str) -> Any:
        """Queue ``a``, make what progress there is, and wait until it completes or the step
        is cancelled."""
        with self.cond:
            attempts.append(a)
            self._flush()
            if not a.done:
                self._wait(ctx, a, what)
        if a.error is not None:
            raise a.error
        return a.result

    def _wait(self, ctx: KernelContext, a: _Attempt, what: str) -> None:
        from ..programs import CONTROL_KEY

        ctl = ctx.step.get(CONTROL_KEY) if isinstance(ctx.step, dict) else None
        deadline = ctx.deadline if ctl is None else None   # with a step: its watchdog's
        if ctl is None and deadline is None:
            a.cancelled = True
            self._flush()
            raise DeadlineExceededError(
                f"{what} on {self.kind} '{self.name}' would wait forever (the queue has "
                f"{len(self.items)} element(s), capacity {self.capacity}"
                f"{', closed' if self.closed else ''}) and nothing can end the wait: run it "
                "in a Session step")
        if ctl is not None:
            ctl.on_cancel(self._wake)
        while not a.done:
            err = ctl.error if ctl is not None else None
            left = None if deadline is None else deadline - time.monotonic()
            if err is None and left is not None and left <= 0:
                err = DeadlineExceededError("step timed out")
            if err is not None:
                a.cancelled = True      # TF's Cancel: what it held is dropped
                self._flush()
                cls = DeadlineExceededError if isinstance(err, DeadlineExceededError) \
                    else CancelledError
                raise cls(f"{what} on {self.kind} '{self.name}' was cancelled while waiting "
                          f"({err.message if isinstance(err, OpError) else err})")
            self.cond.wait(_WAIT_SLICE if left is None else min(_WAIT_SLICE, left))

    # -- the operations ---------------------------------------------------------------------

    def _refuse_closed(self, a: _Attempt) -> bool:
        """An enqueue on a closed queue fails (CancelledError, as TF's)."""
        if self.closed:
            a.error = CancelledError(f"{self.kind} '{self.name}' is closed.")
        return self.closed

    def _try_push(self, a: _Attempt, elem: tuple) -> bool:
        """Push ``elem``, or fail ``a`` when a PriorityQueue's priority is not a scalar."""
        if self.kind == PRIORITY and elem[0].ndim != 0:
            a.error = InvalidArgumentError(
                "Expected the priority element to be a scalar, but received shape: "
                f"{_fmt(elem[0].shape)}")
            return False
        self._push(elem)
        return True

    def enqueue(self, ctx: KernelContext, comps: list[np.ndarray]) -> None:
        elem = tuple(comps)

        def step(a: _Attempt) -> int:
            if self._refuse_closed(a):
                return COMPLETE
            if len(self.items) < self.capacity:
                self._try_push(a, elem)   # done either way: pushed, or failed
                return COMPLETE
            return NO_PROGRESS

        self.run(ctx, self.enqueues, _Attempt(1, step), "Enqueue")

    def enqueue_many(self, ctx: KernelContext, comps: list[np.ndarray], batch: int) -> None:
        if batch == 0:   # TF: done at once, even on a closed queue
            return

        def step(a: _Attempt) -> int:
            if self._refuse_closed(a):
                return COMPLETE
            result = NO_PROGRESS
            while len(self.items) < self.capacity:
                result = PROGRESS
                i = batch - a.left
                elem = tuple(c[i, ...] for c in comps)
                if not self._try_push(a, elem):
                    return COMPLETE
                a.left -= 1
                if a.left == 0:
                    return COMPLETE
            return result

        self.run(ctx, self.enqueues, _Attempt(batch, step), "EnqueueMany")

    def dequeue(self, ctx: KernelContext) -> tuple:
        def step(a: _Attempt) -> int:
            size = len(self.items)
            if self.closed and size == 0:
                a.error = self._insufficient(1, 0)
                return COMPLETE
            if self.kind == SHUFFLE and not self.closed:
                size -= self.min_after
            if size > 0:
                a.result = self._pop()
                return COMPLETE
            return NO_PROGRESS

        return self.run(ctx, self.dequeues, _Attempt(1, step), "Dequeue")

    def _insufficient(self, requested: int, size: int) -> OutOfRangeError:
        return OutOfRangeError(
            f"{self.kind} '{self.name}' is closed and has insufficient elements (requested "
            f"{requested}, current size {size})")

    def dequeue_many(self, ctx: KernelContext, n: int, small: bool) -> list[np.ndarray]:
        if self.kind != PADDING and not self.shapes:
            if self.kind == PRIORITY:
                raise InvalidArgumentError("PriorityQueue's DequeueMany requires the "
                                           "components to have specified shapes.")
            raise InvalidArgumentError(f"{self.kind}'s DequeueMany and DequeueUpTo require the "
                                       "components to have specified shapes.")
        if n == 0:
            return [_zeros(dt, (0,) + tuple(0 if d is None else d for d in shape))
                    for dt, shape in zip(self.dtypes, self.shapes)]
        step = self._priority_many_step(small) if self.kind == PRIORITY \
            else self._many_step(small)
        taken = self.run(ctx, self.dequeues, _Attempt(n, step),
                         "DequeueUpTo" if small else "DequeueMany")
        return self._batch(taken)

    def _many_step(self, small: bool) -> Callable[[_Attempt], int]:
        """TensorFlow's FIFOQueue / PaddingFIFOQueue / RandomShuffleQueue TryDequeueMany."""

        def step(a: _Attempt) -> int:
            size = len(self.items)
            if self.closed and size < a.left:
                if a.taken:
                    self._restore(a.taken)
                    a.taken = []
                if small and self.items:
                    size = a.left = len(self.items)
                else:
                    if small and self.enqueues:
                        return PROGRESS   # pending enqueues may still add elements
                    a.error = self._insufficient(a.left, size)
                    return COMPLETE
            if self.kind == SHUFFLE and not self.closed:
                size -= self.min_after
            return self._take(a, size)

        return step

    def _priority_many_step(self, small: bool) -> Callable[[_Attempt], int]:
        """TensorFlow's PriorityQueue TryDequeueMany, as it is: elements are taken only when
        all of them are there, but a DequeueUpTo on a closed queue holding fewer than asked
        takes them and then fails with OutOfRangeError (they are lost), as TF 2.21 does."""

        def step(a: _Attempt) -> int:
            s = len(self.items)
            if self.closed and (s == 0 or (not small and s < a.left)):
                a.error = self._insufficient(a.left, s)
                return COMPLETE
            if s < a.left and (s == 0 or not (self.closed and small)):
                return NO_PROGRESS
            return self._take(a, s)

        return step

    def _take(self, a: _Attempt, available: int) -> int:
        """Pop up to ``available`` elements into ``a`` until it has all it asked for."""
        result = NO_PROGRESS
        while available > 0:
            result = PROGRESS
            a.taken.append(self._pop())
            a.left -= 1
            if a.left == 0:
                a.result, a.taken = a.taken, []
                return COMPLETE
            available -= 1
        return result

    def _batch(self, taken: list[tuple]) -> list[np.ndarray]:
        """The dequeued elements stacked per component (PaddingFIFOQueue: padded with zeros to
        the largest size of each unknown dimension)."""
        out = []
        k = len(taken)
        for i, dt in enumerate(self.dtypes):
            parts = [e[i] for e in taken]
            partial = self.shapes[i] if self.kind == PADDING else None
            if partial is None or all(d is not None for d in partial):
                out.append(np.stack(parts).astype(dt, copy=False))
                continue
            if len(partial) > 4:
                raise UnimplementedError(f"CopyElementToLargerSlice Unhandled rank: "
                                         f"{len(partial)}")
            dims = tuple(d if d is not None else max(p.shape[j] for p in parts)
                         for j, d in enumerate(partial))
            arr = _zeros(dt, (k,) + dims)
            for j, p in enumerate(parts):
                arr[(j,) + tuple(slice(0, s) for s in p.shape)] = p
            out.append(arr)
        return out

    def close(self, ctx: KernelContext, cancel_pending: bool) -> None:
        if cancel_pending:
            with self.cond:
                self.closed = True
                for a in self.enqueues:
                    if not a.cancelled and not a.done:
                        a.cancelled = a.done = True
                        a.error = CancelledError("Enqueue operation was cancelled")
                self.cond.notify_all()
                self._flush()
            return

        def step(a: _Attempt) -> int:
            if self.closed:
                a.error = CancelledError(f"Queue '{self.name}' is already closed.")
            else:
                self.closed = True
            return COMPLETE

        self.run(ctx, self.enqueues, _Attempt(0, step), "Close")


# --- kernels -------------------------------------------------------------------------------

def _create(ctx: KernelContext, kind: str) -> tuple[tuple[str, str], Queue]:
    spec = _Spec(ctx, kind)
    a = ctx.attrs
    name = a.get("shared_name") or ctx.node   # TF: a private queue per kernel: per node here
    key = (a.get("container") or "", name)
    q = ctx.resources.lookup_or_create(key, lambda: Queue(name, spec))
    if not isinstance(q, Queue):
        raise InvalidArgumentError(f"Resource {key[0]}/{name} exists and is not a queue")
    q.check_matches(spec, ctx.node, ctx.op)
    return key, q


def _creation(kind: str, v2: bool) -> Callable:
    def run(ctx: KernelContext) -> Any:
        key, q = _create(ctx, kind)
        return ResourceHandle(key[0], key[1]) if v2 else q

    return run


for _kind in (FIFO, PADDING, PRIORITY, SHUFFLE):
    kernel(_kind, cheap=True)(_creation(_kind, False))
    kernel(_kind + "V2", cheap=True)(_creation(_kind, True))


def _queue(ctx: KernelContext, handle: Any) -> Queue:
    if isinstance(handle, Queue):
        return handle
    q = ctx.resources.lookup(handle.key) if isinstance(handle, ResourceHandle) else None
    if q is None:
        raise NotFoundError(f"Resource {getattr(handle, 'name', handle)} does not exist: the "
                            "queue was not created in this session")
    if not isinstance(q, Queue):
        raise InvalidArgumentError(f"Resource {handle.name} is not a queue")
    return q


def _no_timeout(ctx: KernelContext) -> None:
    if int(ctx.attrs.get("timeout_ms", -1)) != -1:
        raise InvalidArgumentError("Timeout not supported yet.")


def _count(n: np.ndarray, op: str) -> int:
    if n.size == 0:   # TensorFlow reads element 0 of whatever it gets
        raise InvalidArgumentError(f"{op} needs the number of elements, got an empty tensor")
    k = int(n.reshape(-1)[0])
    if k < 0:
        raise InvalidArgumentError(f"{op} requested {k} < 0 elements")
    return k


# Enqueues run inline: they block only on a full queue, and a step that both enqueues and
# dequeues then keeps its scheduling thread free for the enqueue.
@kernel("QueueEnqueueV2", "QueueEnqueue", cheap=True)
def queue_enqueue(ctx: KernelContext, handle: Any, *components: np.ndarray) -> tuple:
    _no_timeout(ctx)
    q = _queue(ctx, handle)
    comps = list(components)
    q.check_signature([c.dtype for c in comps], True, ctx.op)
    q.validate(comps)
    q.enqueue(ctx, comps)
    return ()


@kernel("QueueEnqueueManyV2", "QueueEnqueueMany", cheap=True)
def queue_enqueue_many(ctx: KernelContext, handle: Any, *components: np.ndarray) -> tuple:
    _no_timeout(ctx)
    q = _queue(ctx, handle)
    comps = list(components)
    q.check_signature([c.dtype for c in comps], True, ctx.op)
    batch = q.validate_many(comps)
    q.enqueue_many(ctx, comps, batch)
    return ()


@kernel("QueueDequeueV2", "QueueDequeue", cheap=False)
def queue_dequeue(ctx: KernelContext, handle: Any) -> list[np.ndarray]:
    _no_timeout(ctx)
    q = _queue(ctx, handle)
    q.check_signature(list(ctx.attrs.get("component_types") or []), False, ctx.op)
    return list(q.dequeue(ctx))


def _dequeue_many(small: bool) -> Callable:
    def run(ctx: KernelContext, handle: Any, n: np.ndarray) -> list[np.ndarray]:
        _no_timeout(ctx)
        q = _queue(ctx, handle)
        k = _count(n, "DequeueUpToOp" if small else "DequeueManyOp")
        q.check_signature(list(ctx.attrs.get("component_types") or []), False, ctx.op)
        return q.dequeue_many(ctx, k, small)

    return run


kernel("QueueDequeueManyV2", "QueueDequeueMany", cheap=False)(_dequeue_many(False))
kernel("QueueDequeueUpToV2", "QueueDequeueUpTo", cheap=False)(_dequeue_many(True))


@kernel("QueueCloseV2", "QueueClose", cheap=True)
def queue_close(ctx: KernelContext, handle: Any) -> tuple:
    _queue(ctx, handle).close(ctx, bool(ctx.attrs.get("cancel_pending_enqueues", False)))
    return ()


@kernel("QueueSizeV2", "QueueSize", cheap=True)
def queue_size(ctx: KernelContext, handle: Any) -> np.ndarray:
    return np.asarray(_queue(ctx, handle).size(), dtype=np.int32)


@kernel("QueueIsClosedV2", "QueueIsClosed", cheap=True)
def queue_is_closed(ctx: KernelContext, handle: Any) -> np.ndarray:
    return np.asarray(_queue(ctx, handle).is_closed())
