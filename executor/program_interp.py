"""The program interpreter: a program's statements (program_ir.py) run one by one over a list
of values, every kernel through the one kernel call. The readable definition generated code
(codegen.py) must agree with, and the mode used when a step is traced or a program cannot be
compiled."""

from __future__ import annotations

import time
from typing import Any

from . import kernel_call
from .kernel_call import call
from .plan import PlanStats
from .program_ir import If, KernelStep, LoopIR, Select


class Interpreter:
    """One interpreted run of a loop program's statements over ``vals``."""

    def __init__(self, prog: Any, ctx: Any, vals: list[Any], tracer: Any,
                 ctl: Any) -> None:
        self.vals, self.tracer, self.ctl, self.stats = vals, tracer, ctl, prog.stats
        self.bound: dict[int, tuple] = {}   # id of a step -> the step with its context
        self.ctx = ctx
        self.place = tracer._place if tracer is not None else None

    def step(self, st: tuple) -> tuple:
        b = self.bound.get(id(st))
        if b is None:
            c = self.ctx
            b = self.bound[id(st)] = bind_steps([st], c.resources, c.step, c.max_bytes)[0]
        return b

    def block(self, stmts: list, iteration: int) -> None:
        vals = self.vals
        for st in stmts:
            if type(st) is KernelStep:
                if self.tracer is None:
                    run_steps([self.step(st)], vals, self.stats, self.ctl)
                else:
                    run_steps_traced([self.step(st)], vals, self.stats, self.ctl,
                                     self.tracer, iteration)
            elif type(st) is If:
                if bool(vals[st.pred]) == st.side:
                    self.block(st.block, iteration)
            elif type(st) is Select:
                vals[st.out] = vals[st.a] if vals[st.pred] else vals[st.b]
            else:
                place = self.place
                if place is None:
                    self.loop(st)
                    continue
                # an inner loop's kernels are traced under its own frame; only the first
                # iterations of the outer one are recorded one by one
                saved = place.frame, place.outer_ok
                place.outer_ok = saved[1] and iteration < self.tracer.max_iterations
                place.frame = st.frame
                try:
                    self.loop(st)
                finally:
                    place.frame, place.outer_ok = saved

    def loop(self, lp: LoopIR) -> None:
        vals, ctl = self.vals, self.ctl
        for vs, ix, init, _nx, i0, _i1 in lp.merges:
            vals[vs] = vals[init]
            if ix is not None:
                vals[ix] = vals[i0]
        n = 0
        while True:
            if ctl.error is not None:
                raise ctl.error
            self.block(lp.pre, n)
            if not vals[lp.pred_slot]:
                break
            self.block(lp.body, n)
            nxt = [vals[m[3]] for m in lp.merges]
            for m, v in zip(lp.merges, nxt):
                vals[m[0]] = v
                if m[1] is not None:
                    vals[m[1]] = vals[m[5]]
            n += 1
        for dst, src in lp.exit_copies:
            vals[dst] = vals[src]


def run_steps(steps: list[tuple], vals: list[Any], stats: PlanStats, ctl: Any) -> None:
    """Run ``(item, argument slots, first output slot, context, slots to clear)`` steps over
    ``vals`` with ``kernel_call.call``, checking the step's cancel flag before each. A kernel
    slower than ``PlanStats.PROGRAM_ENTER_US`` is recorded in the plan's stats (which decide
    whether the program runs next time)."""
    clock = time.perf_counter
    slow_us = stats.PROGRAM_ENTER_US
    for item, args, out, ictx, frees in steps:
        if ctl.error is not None:
            raise ctl.error
        t0 = clock()
        res = call(item, [vals[a] for a in args], ictx)
        us = (clock() - t0) * 1e6
        if us > slow_us:
            stats.record(item, us / 1e6)   # the same average the scheduler keeps
        if item.num_outputs == 1:
            vals[out] = res[0]
        else:
            vals[out:out + len(res)] = res
        for s in frees:
            vals[s] = None


def run_steps_traced(steps: list[tuple], vals: list[Any], stats: PlanStats, ctl: Any,
                     tracer: Any, iteration: int) -> None:
    """``run_steps`` with every kernel call recorded by ``tracer`` (executor/trace.py)."""
    now, origin = time.perf_counter_ns, tracer._origin
    for step in steps:
        item, out = step[0], step[2]
        ins = [vals[a] for a in step[1]]    # before the step clears the slots it last reads
        t0 = now() - origin
        run_steps([step], vals, stats, ctl)
        t1 = now() - origin
        tracer.program_kernel(item, iteration, t0, t1, ins, vals[out:out + item.num_outputs])
        del ins


def bind_steps(steps: list[tuple], resources: Any, step_state: Any,
               max_bytes: int | None) -> list[tuple]:
    """Steps with their kernel contexts: the shared one of a stateless kernel, a per-run one
    (the step's resources) for a stateful kernel."""
    out = []
    for item, args, base, stateful, frees in steps:
        ctx = kernel_call.context(item, resources, step_state, max_bytes=max_bytes) \
            if stateful else item.shared_ctx
        out.append((item, args, base, ctx, frees))
    return out
