"""Tracing: what ran, where, when, on what shapes; as a Chrome trace-event file and as stats.

    from dfg.executor import Session
    from dfg.executor.trace import Tracer
    tracer = Tracer()
    y, = sess.run(["y:0"], feed_dict={"x:0": x}, trace=tracer)
    tracer.write("trace.json")          # open in https://ui.perfetto.dev or chrome://tracing
    tracer.node_stats()                  # per node: op, runs, total seconds, peak output bytes

A ``Tracer`` collects every step run with it (pass the same one to several ``run`` calls).
The file is the JSON object form of the trace-event format: ``{"traceEvents": [...],
"displayTimeUnit": "ms"}`` with

- one complete event (``ph: "X"``, ``cat: "kernel"``) per kernel run, on the thread that
  ran it (the scheduling thread runs cheap kernels inline, pool threads the expensive ones);
  ``args`` hold node, op, thread, frame (``""`` is the root), iteration, and the inputs' and
  outputs' dtypes and shapes as ``"float32[8,64]"`` strings. Ops the scheduler resolves
  without a kernel (Identity, Switch, Merge, Enter, Exit, NextIteration, Const) have none.
- one ``cat: "step"`` slice per ``Session.run`` step on the calling thread, and a ``cat:
  "program"`` slice around a straight-line or loop program (executor/programs.py), with the
  program's kernels nested inside it, so programs are as visible as node-by-node runs;
- a counter track (``ph: "C"``, ``"live tensor bytes"``): bytes of the arrays kernels
  produced that are still alive, updated when one is made or freed (arrays that own their
  memory only, so a view is not counted twice; feeds and constants are not counted; at most
  ``2 * max_slices`` updates are kept);
- thread-name and process-name metadata (``ph: "M"``).

Bounding loops: a kernel run inside while-loop frames is recorded as its own slice only when
its iteration, and the iteration of every enclosing frame, is below ``max_iterations``
(default 10), and while fewer than ``max_slices`` slices are stored. Every other run is
aggregated: per step, one summary slice per (node, frame) with ``cat: "aggregate"`` and
``args`` count, total_us, first_ts, last_end, laid end to end on a separate track
("aggregated runs"), so the file grows with the graph, not with the trip count.
``node_stats()`` counts every run, recorded or aggregated.

Tracing is off unless a tracer is passed: the executor tests ``tracer is None`` once per
kernel (per iteration in loop programs, per chunk in straight-line programs).
"""

from __future__ import annotations

import json
import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .kernel_call import call_timed

# step_state key under which a step hands its tracer to loop programs (never a string, so it
# cannot collide with the step resources kernels keep there)
TRACE_KEY = ("dfg.trace",)

_AGG_TID = 0          # the track of aggregated runs
COUNTER = "live tensor bytes"


@dataclass
class NodeStats:
    """Every traced run of one node: how many, how long in total, the largest output."""

    name: str
    op: str
    count: int = 0
    total_s: float = 0.0
    peak_bytes: int = 0   # the largest total size of its outputs in one run

    @property
    def mean_s(self) -> float:
        return self.total_s / self.count if self.count else 0.0


def describe(v: Any) -> str:
    """``"float32[2,3]"`` for an array; the type name for anything else (handles, dead)."""
    if type(v) is np.ndarray:
        return f"{v.dtype.name if v.dtype.kind != 'O' else 'string'}" \
               f"[{','.join(map(str, v.shape))}]"
    if v is None:
        return "dead"
    if isinstance(v, np.generic):
        return f"{v.dtype.name}[]"
    return type(v).__name__


def _raw(vals: Any) -> tuple:
    """What ``describe`` needs of each value, without formatting: (dtype, shape) of an
    array, else the value's type (or None for a dead one)."""
    return tuple([(v.dtype, v.shape) if type(v) is np.ndarray else
                  None if v is None else type(v) for v in vals])


def _describe_raw(r: Any) -> str:
    if r is None:
        return "dead"
    if type(r) is tuple:
        dt, shape = r
        return f"{dt.name if dt.kind != 'O' else 'string'}[{','.join(map(str, shape))}]"
    if issubclass(r, np.generic):
        return f"{np.dtype(r).name}[]"
    return r.__name__


def _worded(args: dict) -> dict:
    if "inputs" in args and type(args["inputs"]) is tuple:
        args = dict(args)
        args["inputs"] = [_describe_raw(r) for r in args["inputs"]]
        args["outputs"] = [_describe_raw(r) for r in args["outputs"]]
    return args


def _nbytes(outputs: Any) -> int:
    n = 0
    for o in outputs or ():
        if type(o) is np.ndarray:
            n += o.nbytes
    return n


class _Place(threading.local):
    # where the kernels this thread runs now live: (frame name, ancestors' iterations all
    # below the bound, iteration); set while a loop program runs
    frame = ""
    outer_ok = True


class Tracer:
    """Collects kernel runs of the steps it is passed to (see the module docstring)."""

    def __init__(self, max_iterations: int = 10, max_slices: int = 200_000) -> None:
        self.max_iterations = max_iterations
        self.max_slices = max_slices
        self.pid = os.getpid()
        self._origin = time.perf_counter_ns()
        self._lock = threading.Lock()   # guards the counter and the thread table
        # slices: (tid, t0_ns, t1_ns, name, cat, args); list.append is atomic, so worker
        # threads add theirs without the lock
        self._slices: list[tuple] = []
        self._agg: dict[tuple[str, str], list] = {}   # this step's aggregated runs
        self._agg_slices: list[tuple] = []
        self._agg_cursor = 0
        self._stats: dict[str, NodeStats] = {}
        self._threads: dict[int, tuple[int, str]] = {}   # ident -> (tid, name)
        self._live = 0
        self._counter: list[tuple[int, int]] = []   # (t_ns, live bytes)
        self._tracked: dict[int, Any] = {}           # id(array) -> its finalizer
        self._refs: dict[int, tuple[int, int]] = {}  # id(its weakref) -> (id(array), bytes)
        self._place = _Place()
        self._steps = 0
        self._step_t0 = 0
        self._active = False
        self.step_seconds: list[float] = []          # wall time of each traced step
        # of each step's wall time, what the tracer's own recording took (kernel records,
        # live-byte tracking: work an untraced step does not do); _own_ns accumulates it,
        # added to from any thread without a lock (an estimate: a lost update loses a record's
        # microseconds)
        self.own_seconds: list[float] = []
        self._own_ns = 0

    # --- clock and threads -----------------------------------------------------------------
    def _now(self) -> int:
        return time.perf_counter_ns() - self._origin

    def _tid(self) -> int:
        ident = threading.get_ident()
        t = self._threads.get(ident)
        if t is None:
            with self._lock:
                t = self._threads.get(ident)
                if t is None:
                    t = self._threads[ident] = (len(self._threads) + 1,
                                                threading.current_thread().name)
        return t[0]

    # --- steps -------------------------------------------------------------------------------
    def begin_step(self) -> None:
        self._active = True
        self._own_ns = 0
        self._step_t0 = self._now()
        self._step_tid = self._tid()

    def end_step(self) -> None:
        t1 = self._now()
        t0 = self._step_t0
        self._slices.append((self._step_tid, t0, t1, f"step {self._steps}", "step",
                             {"step": self._steps}))
        self.step_seconds.append((t1 - t0) / 1e9)
        self.own_seconds.append(min(self._own_ns, t1 - t0) / 1e9)
        # lay this step's aggregated runs end to end on their own track
        cur = max(t0, self._agg_cursor)
        for (node, frame), (op, count, total, first, last) in self._agg.items():
            self._agg_slices.append((_AGG_TID, cur, cur + total, node, "aggregate", {
                "node": node, "op": op, "frame": frame, "count": count,
                "total_us": total / 1e3, "first_ts": first / 1e3, "last_end": last / 1e3,
                "step": self._steps}))
            cur += total
        self._agg_cursor = cur
        self._agg = {}
        self._steps += 1
        self._active = False

    # --- kernel runs -------------------------------------------------------------------------
    def run_kernel(self, tagged: tuple, args: list, ctx: Any) -> tuple[Any, float]:
        """``kernel_call.call_timed`` of a scheduled node, recorded."""
        item, frame, it = tagged[0], tagged[1], tagged[2]
        name, full = "", True
        if frame is not None and frame.parent is not None:
            name = frame.layout.name
            bound = self.max_iterations
            full = it.iter_num < bound
            f = frame
            while full and f.parent is not None:
                full = f.parent_iter.iter_num < bound
                f = f.parent
        iteration = it.iter_num if it is not None else 0
        program = item.op == "LoopProgram"
        place = self._place
        if program:
            saved = place.frame, place.outer_ok
            place.frame, place.outer_ok = name, full
        t0 = self._now()
        try:
            outputs, secs = call_timed(item, args, ctx)
        finally:
            t1 = self._now()
            if program:
                place.frame, place.outer_ok = saved
        if program:
            self._slices.append((self._tid(), t0, t1, item.name, "program",
                                 {"node": item.name, "op": item.op, "frame": name}))
        else:
            self.kernel(item, name, iteration, full, t0, t1, args, outputs)
        return outputs, secs

    def kernel(self, item: Any, frame: str, iteration: int, full: bool, t0: int, t1: int,
               args: Any, outputs: Any) -> None:
        """Record one kernel run that took [t0, t1] (ns since the tracer's origin)."""
        start = time.perf_counter_ns()
        try:
            self._record(item, frame, iteration, full, t0, t1, args, outputs)
        finally:
            self._own_ns += time.perf_counter_ns() - start

    def _record(self, item: Any, frame: str, iteration: int, full: bool, t0: int, t1: int,
                args: Any, outputs: Any) -> None:
        nb = self._track(outputs)
        with self._lock:   # pool threads may run iterations of one node at the same time
            st = self._stats.get(item.name)
            if st is None:
                st = self._stats[item.name] = NodeStats(item.name, item.op)
            st.count += 1
            st.total_s += (t1 - t0) / 1e9
            if nb > st.peak_bytes:
                st.peak_bytes = nb
            if not (full and len(self._slices) < self.max_slices):
                key = (item.name, frame)
                a = self._agg.get(key)
                if a is None:
                    self._agg[key] = [item.op, 1, t1 - t0, t0, t1]
                else:
                    a[1] += 1
                    a[2] += t1 - t0
                    a[4] = max(a[4], t1)
                return
        t = self._threads.get(threading.get_ident())
        if t is None:
            self._tid()
            t = self._threads[threading.get_ident()]
        self._slices.append((t[0], t0, t1, item.name, "kernel", {
            "node": item.name, "op": item.op, "thread": t[1], "frame": frame, "iter": iteration,
            # shapes and dtypes are kept raw and worded when the trace is written: the
            # step pays for a tuple, not for formatting strings
            "inputs": _raw(args), "outputs": _raw(outputs or ())}))

    def program_kernel(self, item: Any, iteration: int, t0: int, t1: int, args: Any,
                       outputs: Any) -> None:
        """A kernel run inside a program on this thread (frame from the running program)."""
        place = self._place
        self.kernel(item, place.frame, iteration,
                    place.outer_ok and iteration < self.max_iterations, t0, t1, args, outputs)

    def program(self, name: str, t0: int, t1: int) -> None:
        """A straight-line program's slice (its kernels are recorded inside it)."""
        self._slices.append((self._tid(), t0, t1, name, "program",
                             {"node": name, "op": "StraightLineProgram", "frame": ""}))

    # --- live bytes ----------------------------------------------------------------------------
    def _track(self, outputs: Any) -> int:
        total = 0
        for o in outputs or ():
            if type(o) is not np.ndarray:
                continue
            n = o.nbytes
            total += n
            # count memory once: arrays owning their buffer, each once
            if not o.flags.owndata or id(o) in self._tracked or not self._active:
                continue
            with self._lock:
                self._live += n
                if len(self._counter) < 2 * self.max_slices:   # bounded like the slices
                    self._counter.append((self._now(), self._live))
                # a weak reference's callback (cheaper than weakref.finalize) tells when the
                # array is freed; the dict keeps the reference, and the array's id and size,
                # alive until then (one bound callback for all: no closure per array)
                ref = weakref.ref(o, self._on_free)
                self._tracked[id(o)] = ref
                self._refs[id(ref)] = (id(o), n)
        return total

    def _on_free(self, ref: Any) -> None:
        start = time.perf_counter_ns()
        key, n = self._refs.pop(id(ref), (None, 0))
        if key is not None:
            self._freed(key, n)
        self._own_ns += time.perf_counter_ns() - start

    def _freed(self, key: int, n: int) -> None:
        with self._lock:
            self._tracked.pop(key, None)
            self._live -= n
            if len(self._counter) < 2 * self.max_slices:
                self._counter.append((self._now(), self._live))

    # --- results -------------------------------------------------------------------------------
    def node_stats(self) -> dict[str, NodeStats]:
        """Per node name: every run of its kernel in the traced steps."""
        return dict(self._stats)

    @property
    def steps(self) -> int:
        return self._steps

    def to_chrome_json(self) -> dict[str, Any]:
        """The trace as the trace-event format's JSON object (see the module docstring)."""
        pid = self.pid
        ev: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
             "args": {"name": "dfg"}}]
        threads = sorted(self._threads.values())
        for tid, name in threads:
            ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": name}})
        if self._agg_slices:
            ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": _AGG_TID,
                       "args": {"name": f"aggregated runs (iterations >= "
                                        f"{self.max_iterations})"}})
        for tid, t0, t1, name, cat, args in self._slices + self._agg_slices:
            ev.append({"name": name, "cat": cat, "ph": "X", "ts": t0 / 1e3,
                       "dur": (t1 - t0) / 1e3, "pid": pid, "tid": tid, "args": _worded(args)})
        with self._lock:
            counter = list(self._counter)
        for t, live in counter:
            ev.append({"name": COUNTER, "cat": "memory", "ph": "C", "ts": t / 1e3, "pid": pid,
                       "tid": 0, "args": {"bytes": live}})
        return {"traceEvents": ev, "displayTimeUnit": "ms",
                "otherData": {"generator": "dfg", "max_iterations": self.max_iterations,
                              "steps": self._steps}}

    def write(self, path: str) -> None:
        """Write the Chrome trace JSON to ``path`` ('-' is standard output), atomically."""
        from dfg.graphdef.io import write_bytes_atomic

        write_bytes_atomic(path, json.dumps(self.to_chrome_json()).encode())


def op_stats(stats: dict[str, NodeStats]) -> dict[str, NodeStats]:
    """Per op type: the runs of all its nodes (peak_bytes: the largest of any one node)."""
    out: dict[str, NodeStats] = {}
    for s in stats.values():
        o = out.get(s.op)
        if o is None:
            o = out[s.op] = NodeStats(s.op, s.op)
        o.count += s.count
        o.total_s += s.total_s
        o.peak_bytes = max(o.peak_bytes, s.peak_bytes)
    return out
