"""Scheduling: run a plan's ready nodes until the step is done.

The thread that calls ``run`` is the scheduling thread: it owns the run's propagator (no
locks), runs cheap kernels inline and hands expensive ones to the session's worker pool, whose
threads only run kernels and post ``(tagged, outputs, error, seconds)`` back on the run's
completion queue. Whether a kernel is cheap is decided by its registration or, by default, by
its measured cost (the plan's ``PlanStats``), as TensorFlow does: a thread hop costs tens of
microseconds in Python, so only kernels slower than that go to the pool.

Every kernel runs through ``kernel_call.call``. The step's ``StepControl`` (cancel.py) is the
one cancel flag: the first kernel error, a deadline, ``Session.close()`` or SIGINT set it;
the scheduler checks it before each node and programs before each kernel; kernels already
running finish, then the step raises.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, OpError

from . import blas, kernel_call
from .asyncop import PENDING, where
from .cancel import WATCHDOG, StepControl, deadline_error
from .kernel_call import call_timed, checked_outputs, quiet
from .kernels import control_flow
from .kernels.registry import KernelContext
from .plan import CONST, FORWARD, SWITCH, NodeItem, Plan
from .programs import CONTROL_KEY
from .propagator import FramePropagator, SimplePropagator

_NONES = [[None] * n for n in range(64)]

# Kernels measured above this many microseconds go to the pool (when there is other work).
EXPENSIVE_US = 200.0
# Unmeasured kernels with an input this large are assumed expensive: ops presumed heavy
# (``OpSpec.heavy``) from 32K elements, any other op from 1M. NumPy's elementwise kernels take
# 2-9 us on 32K float32 elements and 0.1-0.3 ms on 1M here: below 1M a trip to the pool
# (tens of us) costs more than it can overlap; with 32K for every op, the first step of the
# Transformer bench sent its Mul/Add/Softmax there and took 1.4 ms more than the second.
LARGE_INPUT = 1 << 15
LARGE_ANY_INPUT = 1 << 20
# A sentinel posted on a step's completion queue to wake its scheduler when cancelled.
_WAKE = ("wake",)


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
        with quiet(all="ignore"):
            while True:
                task = self._tasks.get()
                if task is None:
                    return
                done, tagged, args, ctx, tracer = task
                try:
                    outputs, secs = _run_kernel(tagged, args, ctx, tracer)
                    done.put((tagged, outputs, None, secs))
                except BaseException as e:  # noqa: BLE001 - handed to the scheduling thread
                    done.put((tagged, None, e, 0.0))

    def close(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)


class Step:
    """One ``Session.run`` call: its propagator, contexts, cancel flag and results."""

    def __init__(self, plan: Plan, resources: Any, pool: WorkerPool | None,
                 timeout: float | None, programs: str = "auto", tracer: Any = None,
                 max_bytes: int | None = None) -> None:
        self.plan = plan
        self.tracer = tracer   # executor/trace.py's Tracer, or None: tracing off
        self.resources = resources
        self.pool = pool
        self.max_bytes = max_bytes
        self.control = StepControl(timeout)
        self.programs = programs
        self.prop = FramePropagator(plan, programs) \
            if plan.has_control_flow else SimplePropagator(plan)
        # per-run resources (TensorArrays, stacks); loop programs find the cancel flag here
        self.step_state: dict[Any, Any] = {CONTROL_KEY: self.control}
        if tracer is not None:
            from .trace import TRACE_KEY
            self.step_state[TRACE_KEY] = tracer    # loop programs find it here
        self.ctxs: list[KernelContext | None] = [None] * plan.num_ids
        self.values: list[Any] = [None] * len(plan.fetches)
        self.got: list[bool] = [False] * len(plan.fetches)
        self.dead_fetch: dict[int, NodeItem] = {}

    def ctx(self, item: NodeItem) -> KernelContext:
        if item.shared_ctx is not None:
            return item.shared_ctx
        c = self.ctxs[item.id]
        if c is None:
            c = self.ctxs[item.id] = kernel_call.context(
                item, self.resources, self.step_state, deadline=self.control.deadline,
                max_bytes=self.max_bytes)
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
        ctl = self.control
        WATCHDOG.watch(ctl)
        if self.tracer is not None:
            self.tracer.begin_step()
        try:
            with quiet(all="ignore"):
                out = self._run(feed_values)
            # the deadline rule's last check point: the step's end, in every mode
            if ctl.deadline is not None and time.monotonic() > ctl.deadline:
                ctl.cancel(deadline_error())
            ctl.raise_if_cancelled()
            return out
        except BaseException as e:
            ctl.cancel(e)        # a program's error: anything still running stops
            err = ctl.error
            if err is e:
                raise
            raise err from None
        finally:
            ctl.finish()
            if self.tracer is not None:
                self.tracer.end_step()

    def _run(self, feed_values: dict) -> list[Any]:
        prog = self.plan.program
        timed = None     # the stats that time this node-by-node step against the program
        if prog is not None and self.programs != "never" and (
                self.tracer is None or not prog.loops):   # a trace names the loops' frames
            if (self.programs == "always" or prog.runs()) and prog.ready():
                return prog.run(feed_values, self.resources, self.step_state, self.control,
                                self.max_bytes, self.tracer)
            # kept off by its kernels' costs: the two modes' step times decide (PlanStats)
            timed = self.plan.stats
            if timed.prefer_program(prog) and prog.ready():
                compiled = prog.compiled
                t0 = time.perf_counter()
                out = prog.run(feed_values, self.resources, self.step_state, self.control,
                               self.max_bytes, self.tracer)
                if compiled:   # an interpreted (first) run would misstate the program's time
                    timed.record_mode(prog, True, time.perf_counter() - t0)
                return out
        t0 = time.perf_counter()
        self._loop(feed_values)
        self.control.raise_if_cancelled()
        out = self._results()
        if timed is not None:
            timed.record_mode(prog, False, time.perf_counter() - t0)
        return out

    def _loop(self, feed_values: dict) -> None:
        prop = self.prop
        pool = self.pool
        ctl = self.control
        stats = self.plan.stats
        done: queue.SimpleQueue = queue.SimpleQueue()
        if pool is not None or self.plan.has_async:
            ctl.on_cancel(lambda: done.put(_WAKE))
        inline = deque(prop.start(feed_values))
        inflight = 0
        waiting = 0    # of inflight: async kernels (asyncop.py) waiting on something outside
        tracer = self.tracer
        # In-place updates of ref variables wait while other work is ready, so reads of the
        # buffer that are ready too (v/read's consumers) see the old value: the order TF's
        # executor gives its TF1 graphs (an update needs the gradients, reads do not).
        deferred: deque = deque()
        defer = True
        while True:
            while inline:
                tagged = inline.popleft()
                item, _f, it, is_dead = tagged
                if defer and item.writes_ref and inline:
                    deferred.append(tagged)
                    continue
                n = item.num_inputs
                if n:
                    inputs = it.inputs
                    off = item.in_offset
                    args = inputs[off:off + n]
                    # drop the references: a tensor dies with its last reader
                    inputs[off:off + n] = _NONES[n] if n < 64 else [None] * n
                else:
                    args = []
                if ctl.error is not None:
                    return  # cancelled: drop the rest of the step
                if is_dead and not item.runs_dead:
                    outputs = None
                elif item.transfer:
                    kind = item.transfer
                    if kind == FORWARD:
                        outputs = args
                    elif kind == SWITCH:
                        outputs = control_flow.switch(args[0], args[1])
                    elif kind == CONST:
                        outputs = item.const_out
                    else:
                        outputs = control_flow.merge(args)
                else:
                    if item.async_start is not None:
                        try:
                            outputs = _start_async(tagged, args, self.ctx(item), done)
                        except BaseException as e:  # noqa: BLE001
                            ctl.cancel(e)
                            return
                        if outputs is PENDING:
                            inflight += 1
                            waiting += 1
                            continue
                    elif pool is not None and (inline or inflight) and _expensive(
                            item, args, stats):
                        pool.submit(done, tagged, args, self.ctx(item), tracer)
                        inflight += 1
                        continue
                    else:
                        try:
                            outputs, secs = _run_kernel(tagged, args, self.ctx(item), tracer)
                        except BaseException as e:  # noqa: BLE001
                            ctl.cancel(e)
                            return
                        if secs >= 0:
                            stats.record(item, secs)
                if item.fetch_slots and _output_in_root(tagged):
                    self._capture(tagged, outputs)
                prop.propagate(tagged, outputs, inline)
            defer = True
            if deferred and inflight == waiting:   # a Recv may wait on this very update
                inline.extend(deferred)   # nothing else is ready: the updates run now
                deferred.clear()
                defer = False
                continue
            if not inflight:
                return
            got = done.get()
            if got is _WAKE:
                return   # cancelled; kernels still running finish and are discarded
            tagged, outputs, err, secs = got
            inflight -= 1
            if tagged[0].async_start is not None:
                waiting -= 1
            if err is not None:
                ctl.cancel(err)
                return
            item = tagged[0]
            if secs >= 0:
                stats.record(item, secs)
            if ctl.error is not None:
                return
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
        waiting = self.prop.waiting(self.plan)
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


def _start_async(tagged: tuple, args: list, ctx: KernelContext, done: queue.SimpleQueue
                 ) -> Any:
    """Start an async kernel (asyncop.py): its checked outputs now, or PENDING; its later
    completion is posted on the step's completion queue like a pool kernel's."""
    item = tagged[0]

    def finished(outputs: Any, error: BaseException | None) -> None:
        try:
            if error is not None:
                raise error
            outputs = checked_outputs(item, outputs)
        except Exception as e:  # noqa: BLE001 - handed to the scheduling thread
            error = kernel_call.kernel_error(item, e)
        done.put((tagged, outputs, error, -1.0))

    try:
        if item.deref:
            kernel_call._deref(item, args)
        out = item.async_start(ctx, args, where(tagged), finished)
        return out if out is PENDING else checked_outputs(item, out)
    except Exception as e:
        raise kernel_call.kernel_error(item, e, args) from None


def _output_in_root(tagged: tuple) -> bool:
    """Whether the outputs of this run of a node land in the root frame (fetchable)."""
    frame = tagged[1]
    if frame is None or frame.parent is None:
        return True
    return tagged[0].is_exit and frame.parent.parent is None


_GATE = blas.GATE if blas.GATED else None


def _run_kernel(tagged: tuple, args: list, ctx: KernelContext, tracer: Any) -> tuple:
    """The scheduler's kernel call (inline or on a worker): the one kernel call, or the
    tracer's timed wrapper of it; BLAS products one at a time (blas.GATE says why)."""
    if _GATE is not None and tagged[0].spec.blas:
        with _GATE:
            return _call(tagged, args, ctx, tracer)
    return _call(tagged, args, ctx, tracer)


def _call(tagged: tuple, args: list, ctx: KernelContext, tracer: Any) -> tuple:
    if tracer is None:
        return call_timed(tagged[0], args, ctx)
    return tracer.run_kernel(tagged, args, ctx)


def _expensive(item: NodeItem, args: list, stats: Any) -> bool:
    """Whether ``item`` goes to the pool. Never a gated BLAS product: they run one at a time
    anyway (blas.GATE), and OpenBLAS's threads serve a worker thread badly. Measured here
    (2 cores, numpy alone, 64x784 @ 784x256): 10 of 100 calls from a fresh thread stalled
    4-28 ms, in whole scheduler ticks, against 2 of 100 from the main thread; the MLP bench's
    first step stalled past 5 ms in 12 of 25 new Sessions (median 2.7 ms), and in none with
    its products inline (median 1.1 ms). Warm steps were equal within noise."""
    if _GATE is not None and item.spec.blas:
        return False
    if item.cheap is not None:
        return not item.cheap
    c = stats.cost_us[item.id]
    if c >= 0:
        return c > EXPENSIVE_US
    large = LARGE_INPUT if item.spec.heavy else LARGE_ANY_INPUT
    for a in args:
        if type(a) is np.ndarray and a.size >= large:
            return True
    return False


def _killing_switch(plan: Plan, item: NodeItem) -> str | None:
    """The nearest Switch upstream of ``item`` (breadth-first over its inputs)."""
    def producers(i: int) -> list[NodeItem]:
        return [x[0] for x in plan.inputs.get(i, ()) if x is not None] + plan.controls.get(i, [])

    seen = {item.id}
    frontier = [item]
    while frontier:
        nxt = []
        for it in frontier:
            if it.is_switch:
                return it.name
            for p in producers(it.id):
                if p.id not in seen:
                    seen.add(p.id)
                    nxt.append(p)
        frontier = nxt
    return None

