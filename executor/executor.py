"""Scheduling: run a plan's ready nodes until the step is done.

The thread that calls ``run`` is the scheduling thread: it owns the run's propagator (no
locks), runs cheap kernels inline and hands expensive ones to the session's worker pool, whose
threads only run kernels and post ``(tagged, outputs, error, seconds)`` back on the run's
completion queue. Whether a kernel is cheap is decided by its registration or, by default, by
its measured cost (an exponential average kept on the plan's NodeItem), as TensorFlow does: a
thread hop costs tens of microseconds in Python, so only kernels slower than that go to the
pool. The first kernel error stops scheduling; kernels already running finish, then the error
is raised naming the node.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    DeadlineExceededError,
    DfgError,
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
)

from .kernels.registry import KernelContext
from .plan import CONST, FORWARD, SWITCH, NodeItem, Plan
from .propagator import FramePropagator, SimplePropagator

_NONES = [[None] * n for n in range(64)]

# Kernels measured above this many microseconds go to the pool (when there is other work).
EXPENSIVE_US = 200.0
# Unmeasured kernels with an input this large are assumed expensive.
LARGE_INPUT = 1 << 15


class WorkerPool:
    """``n`` daemon threads running kernels for any run of one Session."""

    def __init__(self, n: int) -> None:
        self.size = n
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"dfg-worker-{i}",
                                          daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def submit(self, done: queue.SimpleQueue, tagged: tuple, args: list, ctx: Any,
               tracer: Any = None) -> None:
        self._tasks.put((done, tagged, args, ctx, tracer))

    def _work(self) -> None:
        with np.errstate(all="ignore"):
            while True:
                task = self._tasks.get()
                if task is None:
                    return
                done, tagged, args, ctx, tracer = task
                try:
                    if tracer is None:
                        outputs, secs = run_kernel(tagged[0], args, ctx)
                    else:
                        outputs, secs = tracer.run_kernel(tagged, args, ctx)
                    done.put((tagged, outputs, None, secs))
                except BaseException as e:  # noqa: BLE001 - handed to the scheduling thread
                    done.put((tagged, None, e, 0.0))

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)


def _with_node(e: DfgError, item: NodeItem) -> DfgError:
    if e.node is None:
        e.node, e.op = item.name, item.op
        e.args = (e._render(),)
    return e


def run_kernel(item: NodeItem, args: list, ctx: Any) -> tuple[Any, float]:
    """Run one kernel; return its outputs as a sequence and the seconds it took (-1 for a
    kernel registered as cheap: its cost decides nothing, so it is not measured)."""
    timed = item.cheap is None
    t0 = time.perf_counter() if timed else 0.0
    try:
        for k in item.deref:
            a = args[k]
            if a is not None:      # a Merge's dead inputs arrive as None: nothing to read
                args[k] = a.read()
        res = item.fn(ctx, *args)
    except Exception as e:
        raise kernel_error(item, e) from (None if isinstance(e, DfgError) else e)
    secs = time.perf_counter() - t0 if timed else -1.0
    return checked_outputs(item, res), secs


def kernel_error(item: NodeItem, e: Exception) -> DfgError:
    """What a kernel raised, as one error of the hierarchy naming the node."""
    if isinstance(e, DfgError):
        return _with_node(e, item)
    if isinstance(e, (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError)):
        return InvalidArgumentError(f"{type(e).__name__}: {e}", node=item.name, op=item.op)
    if isinstance(e, MemoryError):
        return ResourceExhaustedError("out of memory computing the output", node=item.name,
                                      op=item.op)
    return InternalError(f"kernel failed: {type(e).__name__}: {e}", node=item.name, op=item.op)


def checked_outputs(item: NodeItem, res: Any) -> Any:
    """A kernel's result as a sequence of outputs, each of the dtype its OpDef promises."""
    if type(res) is tuple or type(res) is list:
        outs = res
    else:
        outs = (res,)
    if len(outs) != item.num_outputs:
        raise InternalError(f"kernel returned {len(outs)} outputs, the OpDef has "
                            f"{item.num_outputs}", node=item.name, op=item.op)
    want = item.out_dtypes
    for k, o in enumerate(outs):
        w = want[k]
        if w is None or o is None:
            continue
        if type(o) is not np.ndarray or o.dtype is not w:
            fixed = _check_output(item, k, o, w)
            if fixed is not o:
                outs = list(outs)
                outs[k] = fixed
    return outs


def _check_output(item: NodeItem, k: int, o: Any, want: np.dtype) -> np.ndarray:
    arr = o if isinstance(o, np.ndarray) else np.asarray(o)
    if arr.dtype == want:
        return arr
    if want.kind == "O" and arr.dtype.kind in "SU":
        return np.asarray(arr.tolist() if arr.dtype.kind == "S" else
                          np.char.encode(arr).tolist(), dtype=object).reshape(arr.shape)
    raise InternalError(f"kernel produced {arr.dtype} for output {k}, the OpDef says {want}",
                        node=item.name, op=item.op)


class Step:
    """One ``Session.run`` call: its propagator, contexts, results and first error."""

    def __init__(self, plan: Plan, resources: Any, pool: WorkerPool | None,
                 timeout: float | None, programs: str = "auto", tracer: Any = None) -> None:
        self.plan = plan
        self.tracer = tracer   # executor/trace.py's Tracer, or None: tracing off
        self.resources = resources
        self.pool = pool
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.programs = programs
        self.prop = FramePropagator(plan, programs) \
            if plan.has_control_flow else SimplePropagator(plan)
        self.step_state: dict[Any, Any] = {}       # per-run resources (TensorArrays, stacks)
        if tracer is not None:
            from .trace import TRACE_KEY
            self.step_state[TRACE_KEY] = tracer    # loop programs find it here
        self.ctxs: list[KernelContext | None] = [None] * plan.num_ids
        self.values: list[Any] = [None] * len(plan.fetches)
        self.got: list[bool] = [False] * len(plan.fetches)
        self.dead_fetch: dict[int, NodeItem] = {}
        self.error: BaseException | None = None

    def ctx(self, item: NodeItem) -> KernelContext:
        if item.shared_ctx is not None:
            return item.shared_ctx
        c = self.ctxs[item.id]
        if c is None:
            c = self.ctxs[item.id] = KernelContext(
                item.name, item.op, item.attrs, item.out_dtypes, item.input_dtypes,
                self.resources, self.step_state, deadline=self.deadline)
        return c

    def _capture(self, tagged: tuple, outputs: Any) -> None:
        item = tagged[0]
        for i, slot in item.fetch_slots:
            v = None if outputs is None else outputs[slot]
            if v is None:
                self.dead_fetch[i] = item
                continue
            if hasattr(v, "read"):
                v = v.read()
            self.values[i] = v
            self.got[i] = True

    def run(self, feed_values: dict) -> list[Any]:
        if self.tracer is None:
            return self._run(feed_values)
        self.tracer.begin_step()
        try:
            return self._run(feed_values)
        finally:
            self.tracer.end_step()

    def _run(self, feed_values: dict) -> list[Any]:
        prog = self.plan.program
        if prog is not None and self.programs != "never" and (
                self.programs == "always" or prog.qualifies()):
            with np.errstate(all="ignore"):
                return prog.run(feed_values, self.resources, self.step_state, self.deadline,
                                self.tracer)
        with np.errstate(all="ignore"):
            self._loop(feed_values)
        if self.error is not None:
            raise self.error
        return self._results()

    def _loop(self, feed_values: dict) -> None:
        prop = self.prop
        pool = self.pool
        done: queue.SimpleQueue = queue.SimpleQueue()
        inline = deque(prop.start(feed_values))
        inflight = 0
        count = 0
        deadline = self.deadline
        tracer = self.tracer
        while True:
            while inline:
                tagged = inline.popleft()
                item, _f, it, is_dead = tagged
                n = item.num_inputs
                if n:
                    inputs = it.inputs
                    off = item.in_offset
                    args = inputs[off:off + n]
                    # drop the references: a tensor dies with its last reader
                    inputs[off:off + n] = _NONES[n] if n < 64 else [None] * n
                else:
                    args = []
                if self.error is not None:
                    continue  # aborting: drop the rest of the step
                if is_dead:
                    outputs = None
                elif item.transfer:
                    kind = item.transfer
                    if kind == FORWARD:
                        outputs = args
                    elif kind == SWITCH:
                        outputs = (None, args[0]) if args[1] else (args[0], None)
                    elif kind == CONST:
                        outputs = item.const_out
                    else:
                        outputs = _merge(args)
                else:
                    if pool is not None and (inline or inflight) and _expensive(item, args):
                        pool.submit(done, tagged, args, self.ctx(item), tracer)
                        inflight += 1
                        continue
                    try:
                        if tracer is None:
                            outputs, secs = run_kernel(item, args, self.ctx(item))
                        else:
                            outputs, secs = tracer.run_kernel(tagged, args, self.ctx(item))
                    except BaseException as e:  # noqa: BLE001
                        self.error = e
                        continue
                    if secs >= 0:
                        c = item.cost_us
                        item.cost_us = secs * 1e6 if c < 0 else 0.8 * c + 0.2e6 * secs
                if item.fetch_slots and _output_in_root(tagged):
                    self._capture(tagged, outputs)
                prop.propagate(tagged, outputs, inline)
                count += 1
                if deadline is not None and not count & 255 and time.monotonic() > deadline:
                    self.error = DeadlineExceededError("step timed out")
            if not inflight:
                break
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                tagged, outputs, err, secs = done.get(timeout=wait)
            except queue.Empty:
                self.error = self.error or DeadlineExceededError("step timed out")
                # kernels already running cannot be interrupted; their results are discarded
                return
            inflight -= 1
            if err is not None:
                if self.error is None:
                    self.error = err
                continue
            item = tagged[0]
            if secs >= 0:
                c = item.cost_us
                item.cost_us = secs * 1e6 if c < 0 else 0.8 * c + 0.2e6 * secs
            if self.error is not None:
                continue
            if item.fetch_slots and _output_in_root(tagged):
                self._capture(tagged, outputs)
            prop.propagate(tagged, outputs, inline)

    def _results(self) -> list[Any]:
        plan = self.plan
        for i in plan.fetched_feeds:
            self.got[i] = True
        missing = [i for i, g in enumerate(self.got) if not g]
        if missing:
            dead = [i for i in missing if i in self.dead_fetch]
            if dead:
                i = dead[0]
                item = self.dead_fetch[i]
                sw = _killing_switch(plan, item)
                name = f"{plan.fetches[i][0]}:{plan.fetches[i][1]}"
                raise InvalidArgumentError(
                    f"fetch '{name}' is dead: it is on the untaken side of "
                    + (f"Switch '{sw}'" if sw else "a Switch")
                    + " (fetch the Merge of the cond instead)", node=item.name, op=item.op)
            raise self._stuck_error(missing)
        return self.values

    def _stuck_error(self, missing: list[int]) -> OpError:
        waiting = self.prop.waiting()
        names = ", ".join(f"{self.plan.fetches[i][0]}:{self.plan.fetches[i][1]}"
                          for i in missing)
        parts = []
        for item, waits in waiting[:10]:
            parts.append(f"'{item.name}' ({item.op}) waits for "
                         + (", ".join(waits) if waits else "inputs that never arrive"))
        more = f" and {len(waiting) - 10} more" if len(waiting) > 10 else ""
        return InvalidArgumentError(
            f"the step cannot make progress before computing {names}: "
            f"{len(waiting)} node(s) are stuck: " + "; ".join(parts) + more
            + " (a cycle without NextIteration, or a missing loop input)")


# a Merge's value_index output for its first 64 inputs, made once
MERGE_INDEX = [np.asarray(i, dtype=np.int32) for i in range(64)]


def _merge(args: list) -> tuple:
    """A Merge: its first live input and that input's index (int32)."""
    for i, x in enumerate(args):
        if x is not None:
            return (x, MERGE_INDEX[i] if i < 64 else np.asarray(i, dtype=np.int32))
    raise InternalError("Merge ran without a live input")


def _output_in_root(tagged: tuple) -> bool:
    """Whether the outputs of this run of a node land in the root frame (fetchable)."""
    frame = tagged[1]
    if frame is None or frame.parent is None:
        return True
    return tagged[0].is_exit and frame.parent.parent is None


def _expensive(item: NodeItem, args: list) -> bool:
    if item.cheap is not None:
        return not item.cheap
    if item.cost_us >= 0:
        return item.cost_us > EXPENSIVE_US
    for a in args:
        if type(a) is np.ndarray and a.size >= LARGE_INPUT:
            return True
    return False


def _killing_switch(plan: Plan, item: NodeItem) -> str | None:
    """The nearest Switch upstream of ``item`` (breadth-first over its inputs)."""
    producers: dict[int, list[NodeItem]] = {}
    for it in plan.items:
        for dst, _k, _s in it.out_data:
            producers.setdefault(dst.id, []).append(it)
        for dst in it.out_control:
            producers.setdefault(dst.id, []).append(it)
    seen = {item.id}
    frontier = [item]
    while frontier:
        nxt = []
        for it in frontier:
            if it.is_switch:
                return it.name
            for p in producers.get(it.id, []):
                if p.id not in seen:
                    seen.add(p.id)
                    nxt.append(p)
        frontier = nxt
    return None

