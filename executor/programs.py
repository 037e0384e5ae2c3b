"""Programs: parts of a plan run as one sequential list of kernel calls instead of node by node.

Both kinds resolve forwarding ops (Identity, Const, and in loops IdentityN, Switch, LoopCond,
NextIteration, NoOp) at plan time into where their values live, and then only call kernels, in a
topological order. They are used when every kernel in them is measured cheap: the scheduler
would run all of those inline on one thread anyway, so nothing is lost but the bookkeeping.
A kernel found slow while a program runs marks its cost, and the next step goes node by node.

Straight-line programs: a step without control flow (``StraightLineProgram``): the values
are a list of slots; a slot is cleared after its last reader, as the executor drops tensors.

Loop programs: a while-loop frame with the conds and loops nested in its body (a loop nest).

The frame propagator runs a loop node by node: every Merge, Switch, Identity and NextIteration
of every iteration is a tagged node with pending counts, deadness and a trip through the
scheduler. For the shapes ``tf.while_loop`` and ``tf.cond`` emit (and TF2's While/If after
lowering), all of that is known statically. Each node of an iteration gets a *guard*: the
chain of (predicate slot, side) under which it is live. A Switch's output k is live when its
inputs are and its predicate is k; a Merge that joins the two sides of one cond is live when
that cond is reached; any other node is live when all its inputs, data and control, are (its
guard is the longest of theirs, which must be prefixes of one another: two unrelated conds
are rejected). Control inputs add their node's guard and order the node after them; a Switch
seen through a control edge is live on both sides. The loop itself is the first cond: with
LoopCond's predicate P, nodes guarded (P, true) are the body, nodes without P run every
iteration, the last included (the *pre* part: the loop condition and what it reads), and
output 0 of P's Switches may feed only Exits. Also required:

- each loop Merge joins one non-constant Enter (iteration 0) and one NextIteration (later
  ones), whose value is guarded exactly (P, true): live whenever the loop goes on;
- one LoopCond, its predicate computed in every iteration (guard empty);
- a cond Merge joins exactly the two sides of one cond (its control inputs only order it:
  TensorFlow ignores their deadness); a loop Merge has no control inputs;
- an inner loop (a child frame: its Enters are this frame's items, its Exits feed it) runs
  as one statement, to completion, under the guard of its Enters: loop-variable Enters share
  one guard, constant Enters may have a shorter one only when nothing in the inner loop hangs
  off constant Enters alone (TensorFlow would run that even with the loop variables dead);
- every input comes from the frame, its Enters, or an inner loop's Exits; no
  ControlTrigger; no op that reads a ref variable where a plain value moves.

Anything else raises ``_Reject`` and the frame runs node by node. One iteration is then: the
pre part in a topological order, the predicate, and if it holds the body; each part is nested
``If`` blocks (a branch's nodes run only when its cond took that side, so a dead value is
never computed nor read), ``Select``s for cond Merges (the taken branch's value; its
value_index), and inner ``LoopIR``s. The order keeps a branch's nodes together and stateful
kernels in the plan's order where their dependencies allow. Exits get the last iteration's
values. This is one valid schedule of the frame (iterations in order, which TensorFlow's
``parallel_iterations`` permits), so results are the node-by-node run's.

A program is a pseudo node (op ``LoopProgram``) of its frame: its inputs are the frame's
Enters, its outputs the Exits' values. The propagator decides per frame instance whether to
use it (``FramePropagator``); a frame that is not of these shapes has no program (an inner
loop also has its own program, used when its parent runs node by node).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from . import codegen, kernel_call
from .plan import NodeItem, PlanStats
from .program_interp import Interpreter, bind_steps, run_steps, run_steps_traced
from .program_ir import If, KernelStep, LoopIR, Select  # noqa: F401 (the IR, read here too)
from .trace import TRACE_KEY

# step_state key of the step's StepControl (cancel.py): programs check it before each kernel
CONTROL_KEY = "dfg.step_control"
# step_state key of the kernel calls the step's loop programs made so far: a straight-line
# program that runs loops counts them in its mean kernel cost (its own few kernels alone
# would make one preempted run look like slow kernels)
LOOP_CALLS_KEY = "dfg.loop_calls"


class _Program:
    """What both kinds share: the kernels they run, and the plan's stats, which decide
    whether they run (``PlanStats.program_runs``) and learn which kernels are slow."""

    # whether gated BLAS products may sit in it without keeping it from running (PlanStats)
    holds_serial = False
    # whether it may run before its heavy kernels were measured (PlanStats.program_runs)
    unmeasured_heavy_ok = False

    def __init__(self, prog_id: int) -> None:
        self.id = prog_id
        self.kernels: list[NodeItem] = []
        self.stats: PlanStats | None = None   # set when the plan is assembled
        self._serial: list[NodeItem] | None = None
        self._blocking: bool | None = None

    def runs(self) -> bool:
        return self.stats.program_runs(self)

    @property
    def compiled(self) -> Any:
        """Its compiled code (codegen's result; None: not yet; False: it stays interpreted),
        kept in the plan's runtime."""
        return self.stats.compiled.get(self.id)

    def blocking_kernels(self) -> bool:
        """Whether a kernel is registered to run on the pool (``cheap=False``: it may block,
        waiting for a kernel the program would run after it)."""
        if self._blocking is None:
            self._blocking = any(k.cheap is False for k in self.kernels)
        return self._blocking

    def serial_kernels(self) -> list[NodeItem]:
        """Its BLAS products (found once; ``kernels`` is complete when a program runs)."""
        if self._serial is None:
            self._serial = [k for k in self.kernels if k.spec.blas]
        return self._serial


class LoopProgram(_Program):
    """The compiled form of one frame and every loop nested in it (immutable after
    ``compile_frame``, but for the qualification cache of ``_Program``)."""

    unmeasured_heavy_ok = True

    def __init__(self, prog_id: int) -> None:
        super().__init__(prog_id)
        self.item: NodeItem                       # the pseudo node the scheduler runs
        self.enters: list[NodeItem] = []          # program input k is Enter k's value
        self.exits: list[NodeItem] = []           # program output k is Exit k's value
        self.template: list[Any] = []             # the value slots, constants filled in
        self.enter_slots: list[int] = []          # Enter k's value is put in this slot
        self.exit_slots: list[int] = []
        self.loop: LoopIR                         # the frame's loop
        self.loops: list[LoopIR] = []             # every loop of the nest, by index

    def __call__(self, ctx: Any, *enter_values: Any) -> list[Any]:
        state = ctx.step
        tracer = state.get(TRACE_KEY)
        ctl = state[CONTROL_KEY]
        compiled = self.compiled
        if tracer is not None or compiled is False:
            return self._interpret(ctx, enter_values, tracer, ctl)
        if compiled is None:
            compiled = self.stats.compile_once(self, _compile_loop)
            if compiled is False:
                return self._interpret(ctx, enter_values, tracer, ctl)
        fn, template, items = compiled
        contexts = [kernel_call.context(k, ctx.resources, state, max_bytes=ctx.max_bytes)
                    if k.shared_ctx is None else k.shared_ctx for k in items]
        t0 = time.perf_counter()
        out, counts = fn(template, enter_values, items, contexts, ctl)
        calls = sum(n * lp.num_kernels for n, lp in zip(counts, self.loops))
        self.stats.record_program(self, time.perf_counter() - t0, max(1, calls))
        state[LOOP_CALLS_KEY] = state.get(LOOP_CALLS_KEY, 0) + calls
        return out

    def _interpret(self, ctx: Any, enter_values: tuple, tracer: Any, ctl: Any) -> list[Any]:
        """The nest run statement by statement with ``run_steps`` (traced: every kernel of
        every iteration recorded, under the frame of the loop it belongs to)."""
        vals = self.template[:]
        for k, slot in enumerate(self.enter_slots):
            vals[slot] = enter_values[k]
        run = Interpreter(self, ctx, vals, tracer, ctl)
        run.loop(self.loop)
        return [vals[s] for s in self.exit_slots]


def _compile_loop(prog: LoopProgram) -> Any:
    try:
        return codegen.compile_loop(prog)
    except (SyntaxError, RecursionError, MemoryError):  # too deep for CPython
        return False


class StraightLineProgram(_Program):
    """A step without control flow as one list of kernel calls (see the module docstring),
    or a step whose control flow is loops at its top level only: each loop (``loops``, its
    ``LoopProgram``) is one step of the list, its pseudo item called on its Enters' inputs,
    its outputs its Exits' values. Such a program runs when every loop runs as its program
    too; it leaves a traced step node by node (the trace names every loop's frame)."""

    holds_serial = True

    def __init__(self, prog_id: int, plan: Any = None, build: Any = None) -> None:
        super().__init__(prog_id)
        self.loops: list[LoopProgram] = []   # the loops it runs as steps (plan order)
        self.template: list[Any] = []
        self.feed_slots: dict[tuple[str, int], int] = {}
        self.fetch_slots: list[int | None] = []   # None: a fed tensor (the session has it)
        self.steps: list[KernelStep] = []
        # The steps are built from the plan when the program first runs (ready): the first
        # step of a plan holding unmeasured heavy kernels runs node by node, and a lazily
        # optimized plan (session.py) is replaced after its first step; building them up
        # front was 0.4 ms of the Transformer bench's 6 ms first step. _build_lock guards
        # _plan and _built (None: not built yet; False: cannot be, a cycle).
        self._plan = plan
        self._build = build   # program_compile's step builder: (program, plan) -> bool
        self._built: bool | None = None if plan is not None else True
        self._build_lock = threading.Lock()
        # Compiled on the second run (PlanStats.compiled): the first one interprets the steps,
        # as compiling costs more than running once (Python's compile() of a 1000-kernel
        # function: ~30 ms against ~2 ms to interpret it; the compiled step then takes 0.02 ms)

    def runs(self) -> bool:
        return self.stats.program_runs(self) and all(lp.runs() for lp in self.loops)

    def blocking_kernels(self) -> bool:
        return super().blocking_kernels() or any(lp.blocking_kernels() for lp in self.loops)

    def _record(self, secs: float, step_state: Any) -> None:
        """Its mean kernel cost, over its loops' kernel calls too (each loop also keeps its
        own, which decides whether it runs)."""
        calls = len(self.kernels) + (step_state.pop(LOOP_CALLS_KEY, 0) if self.loops else 0)
        self.stats.record_program(self, secs, max(1, calls))

    def ready(self) -> bool:
        """Whether the program can run, its steps built on first call."""
        if self._built is None:
            with self._build_lock:
                if self._built is None:
                    self._built = self._build(self, self._plan)
                    self._plan = None
        return self._built

    def run(self, feed_values: dict, resources: Any, step_state: Any, ctl: Any,
            max_bytes: int | None, tracer: Any = None) -> list[Any]:
        if tracer is None:
            compiled = self.compiled
            if compiled is None and self.id in self.stats.interpreted:
                compiled = self.stats.compile_once(
                    self, lambda p: codegen.compile_straight_line(p) or False)
            self.stats.interpreted.add(self.id)
            if compiled:
                fn, template, items = compiled
                contexts = [kernel_call.context(k, resources, step_state, max_bytes=max_bytes)
                            if k.shared_ctx is None else k.shared_ctx for k in items]
                t0 = time.perf_counter()
                out = fn(template, [feed_values[key] for key in self.feed_slots], items,
                         contexts, ctl)
                self._record(time.perf_counter() - t0, step_state)
                return [v.read() if hasattr(v, "read") else v for v in out]
        vals = self.template[:]
        for key, slot in self.feed_slots.items():
            vals[slot] = feed_values[key]
        steps = bind_steps(self.steps, resources, step_state, max_bytes)
        if tracer is None:
            t0 = time.perf_counter()
            run_steps(steps, vals, self.stats, ctl)
            # interpreted or compiled, a slow run is noticed at once by the program's mean
            self._record(time.perf_counter() - t0, step_state)
        else:
            t0 = tracer._now()
            run_steps_traced(steps, vals, self.stats, ctl, tracer, 0)
            tracer.program("straight-line program", t0, tracer._now())
        out = [None if s is None else vals[s] for s in self.fetch_slots]
        # a fetched ref (a variable, Assign's output) is fetched as its value
        return [v.read() if hasattr(v, "read") else v for v in out]
