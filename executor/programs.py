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

import heapq
import threading
import time
from typing import Any

from . import codegen, kernel_call
from .kernel_call import call
from .plan import (
    CF_PROGRAM,
    CONST,
    FORWARD,
    MERGE,
    MERGE_INDEX,
    SWITCH,
    FrameLayout,
    NodeItem,
    Plan,
    PlanStats,
)
from .trace import TRACE_KEY

# step_state key of the step's StepControl (cancel.py): programs check it before each kernel
CONTROL_KEY = "dfg.step_control"



class _Reject(Exception):
    """The frame is not of a shape programs handle: it runs node by node (the message says
    why, for debugging)."""


class _Program:
    """What both kinds share: the kernels they run, and the plan's stats, which decide
    whether they run (``PlanStats.program_runs``) and learn which kernels are slow."""

    # whether gated BLAS products may sit in it without keeping it from running (PlanStats)
    holds_serial = False

    def __init__(self, prog_id: int) -> None:
        self.id = prog_id
        self.kernels: list[NodeItem] = []
        self.stats: PlanStats | None = None   # set when the plan is assembled
        self._serial: list[NodeItem] | None = None
        self._blocking: bool | None = None

    def runs(self) -> bool:
        return self.stats.program_runs(self)

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


class If:
    """Run ``block`` when the predicate in slot ``pred`` is ``side`` (a cond's branch)."""

    __slots__ = ("pred", "side", "block")

    def __init__(self, pred: int, side: bool, block: list) -> None:
        self.pred, self.side, self.block = pred, side, block


class Select:
    """A cond's Merge: slot ``out`` gets slot ``a`` when the predicate in slot ``pred`` holds,
    else slot ``b`` (exactly one of them is live: the branch that ran)."""

    __slots__ = ("out", "pred", "a", "b")

    def __init__(self, out: int, pred: int, a: int, b: int) -> None:
        self.out, self.pred, self.a, self.b = out, pred, a, b


class LoopIR:
    """One while loop of a nest, run to completion where it stands (the top of a program, or
    a statement of its parent loop's iteration). A statement is a kernel step
    ``(item, argument slots, first output slot, stateful?, frees)``, an ``If``, a ``Select``
    or an inner ``LoopIR``."""

    __slots__ = ("frame", "index", "merges", "pre", "pred_slot", "body", "num_kernels",
                 "exit_copies", "floating")

    def __init__(self, frame: str, index: int) -> None:
        self.frame = frame
        self.index = index            # its iteration counter (n{index} in generated code)
        # per loop variable: (value slot, index slot or None when unread, first value's
        # slot, next value's slot, slot of value_index at iteration 0, slot of it later)
        self.merges: list[tuple[int, int | None, int, int, int, int]] = []
        self.pre: list = []           # every iteration, the last one included
        self.pred_slot = 0
        self.body: list = []          # while the predicate holds
        self.num_kernels = 0          # kernel steps directly in it (for cost estimates)
        # (slot the parent reads, slot of the Exit's value in the last iteration)
        self.exit_copies: list[tuple[int, int]] = []
        # some work depends on constant Enters only (see _floating)
        self.floating = False


class LoopProgram(_Program):
    """The compiled form of one frame and every loop nested in it (immutable after
    ``compile_frame``, but for the qualification cache of ``_Program``)."""

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
        self.compiled: Any = None   # codegen.compile_loop's result (False: interpret)

    def __call__(self, ctx: Any, *enter_values: Any) -> list[Any]:
        state = ctx.step
        tracer = state.get(TRACE_KEY)
        ctl = state[CONTROL_KEY]
        compiled = self.compiled
        if tracer is not None or compiled is False:
            return self._interpret(ctx, enter_values, tracer, ctl)
        if compiled is None:
            try:
                compiled = self.compiled = codegen.compile_loop(self)
            except (SyntaxError, RecursionError, MemoryError):  # too deep for CPython
                self.compiled = False
                return self._interpret(ctx, enter_values, tracer, ctl)
        fn, template, items = compiled
        contexts = [kernel_call.context(k, ctx.resources, state, max_bytes=ctx.max_bytes)
                    if k.shared_ctx is None else k.shared_ctx for k in items]
        t0 = time.perf_counter()
        out, counts = fn(template, enter_values, items, contexts, ctl)
        calls = sum(n * lp.num_kernels for n, lp in zip(counts, self.loops))
        self.stats.record_program(self, time.perf_counter() - t0, max(1, calls))
        return out

    def _interpret(self, ctx: Any, enter_values: tuple, tracer: Any, ctl: Any) -> list[Any]:
        """The nest run statement by statement with ``run_steps`` (traced: every kernel of
        every iteration recorded, under the frame of the loop it belongs to)."""
        vals = self.template[:]
        for k, slot in enumerate(self.enter_slots):
            vals[slot] = enter_values[k]
        run = _Interpreter(self, ctx, vals, tracer, ctl)
        run.loop(self.loop)
        return [vals[s] for s in self.exit_slots]


class _Interpreter:
    """One interpreted run of a loop program's statements over ``vals``."""

    def __init__(self, prog: LoopProgram, ctx: Any, vals: list[Any], tracer: Any,
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
            if type(st) is tuple:
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


class StraightLineProgram(_Program):
    """A step without control flow as one list of kernel calls (see the module docstring)."""

    holds_serial = True

    def __init__(self, prog_id: int, plan: Any = None) -> None:
        super().__init__(prog_id)
        self.template: list[Any] = []
        self.feed_slots: dict[tuple[str, int], int] = {}
        self.fetch_slots: list[int | None] = []   # None: a fed tensor (the session has it)
        self.steps: list[tuple] = []               # (item, args, first out, stateful?, frees)
        # The steps are built from the plan when the program first runs (ready): the first
        # step of a plan holding unmeasured heavy kernels runs node by node, and a lazily
        # optimized plan (session.py) is replaced after its first step; building them up
        # front was 0.4 ms of the Transformer bench's 6 ms first step. _build_lock guards
        # _plan and _built (None: not built yet; False: cannot be, a cycle).
        self._plan = plan
        self._built: bool | None = None if plan is not None else True
        self._build_lock = threading.Lock()
        self.compiled: Any = None   # codegen.compile_straight_line's result, or False
        # Compiled on the second run: the first one interprets the steps, as compiling costs
        # more than running once (Python's compile() of a 1000-kernel function: ~30 ms
        # against ~2 ms to interpret it; the compiled step then takes 0.02 ms)
        self.interpreted = False

    def ready(self) -> bool:
        """Whether the program can run, its steps built on first call."""
        if self._built is None:
            with self._build_lock:
                if self._built is None:
                    self._built = _build_straight_line(self, self._plan)
                    self._plan = None
        return self._built

    def run(self, feed_values: dict, resources: Any, step_state: Any, ctl: Any,
            max_bytes: int | None, tracer: Any = None) -> list[Any]:
        if tracer is None:
            compiled = self.compiled
            if compiled is None and self.interpreted:
                compiled = self.compiled = codegen.compile_straight_line(self) or False
            self.interpreted = True
            if compiled:
                fn, template, items = compiled
                contexts = [kernel_call.context(k, resources, step_state, max_bytes=max_bytes)
                            if k.shared_ctx is None else k.shared_ctx for k in items]
                t0 = time.perf_counter()
                out = fn(template, [feed_values[key] for key in self.feed_slots], items,
                         contexts, ctl)
                self.stats.record_program(self, time.perf_counter() - t0,
                                          max(1, len(self.kernels)))
                return [v.read() if hasattr(v, "read") else v for v in out]
        vals = self.template[:]
        for key, slot in self.feed_slots.items():
            vals[slot] = feed_values[key]
        steps = bind_steps(self.steps, resources, step_state, max_bytes)
        if tracer is None:
            t0 = time.perf_counter()
            run_steps(steps, vals, self.stats, ctl)
            # interpreted or compiled, a slow run is noticed at once by the program's mean
            self.stats.record_program(self, time.perf_counter() - t0,
                                      max(1, len(self.kernels)))
        else:
            t0 = tracer._now()
            run_steps_traced(steps, vals, self.stats, ctl, tracer, 0)
            tracer.program("straight-line program", t0, tracer._now())
        out = [None if s is None else vals[s] for s in self.fetch_slots]
        # a fetched ref (a variable, Assign's output) is fetched as its value
        return [v.read() if hasattr(v, "read") else v for v in out]


def add_programs(plan: Plan) -> Plan:
    """Compile ``plan``'s programs: one per while-loop frame of a shape it compiles (a loop
    nest), and the straight-line program of a plan without control flow. Each gets an item
    id after the plan's items; the plan's stats are sized for them."""
    from dfg.graphdef.frames import ROOT

    for lay in plan.frames.values():
        if lay.name == ROOT:
            continue
        enters = [it for it in plan.items if it.is_enter and it.enter_frame == lay.name]
        lay.program = compile_frame(lay, enters, plan.inputs, plan.controls, plan.num_ids,
                                   plan.frames)
        if lay.program is not None:
            plan.num_ids += 1
    if not plan.has_control_flow:
        plan.program = compile_straight_line(plan, plan.num_ids)
        plan.num_ids += 1
    plan.stats = PlanStats(plan.num_ids)
    for prog in [lay.program for lay in plan.frames.values()] + [plan.program]:
        if prog is not None:
            prog.stats = plan.stats
    return plan


def compile_straight_line(plan: Any, prog_id: int) -> StraightLineProgram | None:
    """The program of a plan without control flow, or None when some node cannot be part of
    one (a transfer other than a Const or a one-input forward). Its steps are built when it
    first runs (``ready``: False for an input that comes later in the order, a cycle in an
    unvalidated graph)."""
    prog = StraightLineProgram(prog_id, plan)
    for it in plan.items:
        if it.writes_ref:   # as loops (compile_frame): 0-d reads would be copies
            return None
        if not it.transfer:
            prog.kernels.append(it)
        elif not (it.transfer == CONST or it.transfer == FORWARD and it.num_inputs == 1):
            return None
    return prog


def _build_straight_line(prog: StraightLineProgram, plan: Any) -> bool:
    """Fill ``prog``'s slots and steps from ``plan``; False when an input comes later in the
    order or a fetched tensor has no slot."""
    slots = prog.template
    inputs = {i: [None if x is None else (x[0].id, x[1]) for x in ins]
              for i, ins in plan.inputs.items()}
    for key, edges in plan.feed_edges.items():
        slots.append(None)
        prog.feed_slots[key] = len(slots) - 1
        for dst, k in edges:
            inputs[dst.id][k] = ("feed", key)
    where: dict[Any, int] = {("feed", k): s for k, s in prog.feed_slots.items()}
    steps: list[list[Any]] = []
    for it in plan.items:
        try:
            args = tuple(where[src] for src in inputs[it.id])
        except KeyError:
            return False
        if it.transfer == CONST:
            slots.append(it.const_out[0])
            where[(it.id, 0)] = len(slots) - 1
        elif it.transfer:     # FORWARD of one input (compile_straight_line checked)
            where[(it.id, 0)] = args[0]
        else:
            base = len(slots)
            for k in range(it.num_outputs):
                slots.append(None)
                where[(it.id, k)] = base + k
            steps.append([it, args, base, it.shared_ctx is None, ()])
    fetched = set()
    for i, (node, slot) in enumerate(plan.fetches):
        if i in plan.fetched_feeds:
            prog.fetch_slots.append(None)
            continue
        s = where.get((plan.by_name[node].id, slot))
        if s is None:
            return False
        prog.fetch_slots.append(s)
        fetched.add(s)
    # clear each computed or fed value after its last reader, unless it is fetched
    last: dict[int, int] = {}
    for i, step in enumerate(steps):
        for a in step[1]:
            last[a] = i
    frees: dict[int, list[int]] = {}
    consts = {s for s, v in enumerate(slots) if v is not None}
    for s, i in last.items():
        if s not in fetched and s not in consts:
            frees.setdefault(i, []).append(s)
    for i, step in enumerate(steps):
        step[4] = tuple(frees.get(i, ()))
    prog.steps = [tuple(s) for s in steps]
    return True


def compile_frame(lay: FrameLayout, enters: list[NodeItem], all_inputs: dict,
                  all_controls: dict, item_id: int,
                  frames: dict[str, FrameLayout] | None = None) -> LoopProgram | None:
    """The program of frame ``lay`` (entered by ``enters``) and the loops nested in it, or
    None when some part is not of a shape programs handle (see the module docstring).
    ``all_inputs``/``all_controls``: the plan's in-edges by item id; ``item_id`` is the id
    its pseudo node gets; ``frames``: the plan's frame layouts (to find nested loops)."""
    nest = _Nest(all_inputs, all_controls, frames or {lay.name: lay})
    try:
        prog = LoopProgram(item_id)
        prog.enters = list(enters)
        prog.enter_slots = [nest.new_slot() for _e in enters]
        slots = {e.id: s for e, s in zip(enters, prog.enter_slots)}
        prog.loop = _compile_loop(nest, lay, enters, slots)
    except _Reject:
        return None
    # a ref variable's in-place update (OpSpec.writes_ref) keeps the loop node by node: its
    # readers (v/read entered into the loop) must see the buffer change, and a program's
    # slots hold 0-d values as scalars, copies
    if any(k.writes_ref for k in nest.kernels):
        return None
    prog.exits = list(lay.exits)
    prog.exit_slots = [dst for dst, _src in prog.loop.exit_copies]
    prog.kernels = nest.kernels
    prog.template = nest.slots
    prog.loops = nest.loops
    prog.item = _program_item(prog, lay, item_id)
    return prog


class _Unit:
    """A node of one iteration's schedule: an item, or a whole inner loop."""

    __slots__ = ("key", "order", "guard", "deps", "stmt", "stateful")

    def __init__(self, key: Any, order: int, guard: tuple, stmt: Any, stateful: bool) -> None:
        self.key, self.order, self.guard, self.stmt = key, order, guard, stmt
        self.stateful = stateful
        self.deps: set = set()


class _Nest:
    """What the loops of one program share while it is compiled: one slot array, where each
    (item id, output slot) lives, the kernels, the loops."""

    def __init__(self, all_inputs: dict, all_controls: dict,
                 frames: dict[str, FrameLayout]) -> None:
        self.inputs, self.controls, self.frames = all_inputs, all_controls, frames
        self.slots: list[Any] = []
        self.where: dict[tuple[int, int], int] = {}
        self.kernels: list[NodeItem] = []
        self.loops: list[LoopIR] = []
        self.exit_src: dict[int, int] = {}     # Exit item id -> its value's slot (last iter.)
        self.index_slots: dict[int, int] = {}  # a Merge's value_index k -> its constant slot

    def new_slot(self, value: Any = None) -> int:
        self.slots.append(value)
        return len(self.slots) - 1

    def index_slot(self, k: int) -> int:
        s = self.index_slots.get(k)
        if s is None:
            s = self.index_slots[k] = self.new_slot(MERGE_INDEX[k])
        return s

    def slot_of(self, src: NodeItem, slot: int) -> int:
        try:
            return self.where[(src.id, slot)]
        except KeyError:
            raise _Reject(f"no value for {src.name}:{slot}") from None


def _chain(guards: list[tuple]) -> tuple:
    """The conjunction of guards that are prefixes of one another: the longest. Guards that
    branch apart (two unrelated conds) are not a shape programs handle."""
    out: tuple = ()
    for g in guards:
        if len(g) > len(out):
            g, out = out, g
        if out[:len(g)] != g:
            raise _Reject("a node reads two unrelated cond branches")
    return out


def _compile_loop(nest: _Nest, lay: FrameLayout, enters: list[NodeItem],
                  enter_slots: dict[int, int]) -> LoopIR:
    """The ``LoopIR`` of frame ``lay``; ``enter_slots``: where each Enter's value is (for the
    top loop, the program's inputs; for an inner one, its parent's slots)."""
    lp = LoopIR(lay.name, len(nest.loops))
    nest.loops.append(lp)
    where = nest.where
    members = {it.id for it in lay.items}
    enter_ids = {e.id for e in enters}
    # the loops nested directly in this one: their Enters are items of this frame
    child_enters: dict[str, list[NodeItem]] = {}
    for it in lay.items:
        if it.is_enter:
            child_enters.setdefault(it.enter_frame, []).append(it)
    child_of_exit: dict[int, str] = {}
    for name in child_enters:
        clay = nest.frames.get(name)
        if clay is None:
            raise _Reject(f"no layout for frame {name}")
        for x in clay.exits:
            child_of_exit[x.id] = name
    inputs = nest.inputs
    controls = nest.controls
    for i in members:
        srcs = [src for src, _s in filter(None, inputs[i])] + controls[i]
        if any(s.id not in members and s.id not in enter_ids and s.id not in child_of_exit
               for s in srcs):
            raise _Reject("an input from outside the frame")
    for e in enters:
        if not e.is_constant_enter and (e.out_control or
                                        any(not d.is_merge for d, _i, _s in e.out_data)):
            raise _Reject("a loop variable's first value goes to a Merge only")
    loop_conds = [it for it in lay.items if it.op == "LoopCond"]
    if len(loop_conds) != 1:
        raise _Reject("not one LoopCond")
    loop_cond = loop_conds[0]

    guard: dict[int, tuple] = {}                # item id -> when it runs (live)
    cond_of: dict[int, int] = {}                # Switch item id -> its predicate's slot
    child_units: dict[str, _Unit] = {}
    units: dict[Any, _Unit] = {}
    merges: list[NodeItem] = []
    for e in enters:
        if e.is_constant_enter:
            where[(e.id, 0)] = enter_slots[e.id]

    def unit_of(src: NodeItem) -> Any:
        if src.id in enter_ids:
            return None
        if src.id in child_of_exit:
            return child(child_of_exit[src.id]).key
        if src.is_enter:
            return ("loop", src.enter_frame)
        return src.id

    def out_guard(src: NodeItem, slot: int) -> tuple:
        if src.id in enter_ids:
            return ()
        if src.id in child_of_exit:
            return child(child_of_exit[src.id]).guard
        try:
            g = guard[src.id]
        except KeyError:
            raise _Reject("a back edge other than NextIteration -> Merge") from None
        if slot >= 0 and src.id in cond_of:
            return g + ((cond_of[src.id], slot == 1),)
        return g

    def child(name: str) -> _Unit:
        """The inner loop ``name`` as one unit, compiled when first needed."""
        u = child_units.get(name)
        if u is not None:
            return u
        ents = child_enters[name]
        if any(e.id not in guard for e in ents):
            raise _Reject("an inner loop's output is read before all its Enters")
        gs = {guard[e.id] for e in ents}
        g = _chain(list(gs))
        if len(gs) != 1 and any(guard[e.id] != g and not e.is_constant_enter for e in ents):
            raise _Reject("an inner loop's Enters are live under different conds")
        slots = {}
        deps: set = set()
        for e in ents:
            (src, s), = inputs[e.id]
            slots[e.id] = nest.slot_of(src, s)
            deps.update(unit_of(x) for x in [src] + controls[e.id])
        inner = _compile_loop(nest, nest.frames[name], ents, slots)
        stateful = any(k.stateful for k in _loop_kernels(inner))
        if len(gs) != 1 and inner.floating:
            # when the loop variables' Enters are dead and the constant ones live, TF still
            # runs the inner nodes that hang off constant Enters only
            raise _Reject("an inner loop whose Enters may be partly dead runs nodes anyway")
        u = child_units[name] = units[("loop", name)] = _Unit(
            ("loop", name), min(e.id for e in ents), g, inner, stateful)
        u.deps = deps - {None}
        return u

    order = _frame_order(lay, members, child_enters, child_of_exit, inputs, controls)
    try:
        for it in order:
            ins = inputs[it.id]
            ctl = controls[it.id]
            if any(x is None for x in ins):
                raise _Reject("an input the step does not compute (fed or pruned)")
            if it.is_control_trigger:
                raise _Reject("ControlTrigger's deadness rule")
            if it.is_enter:    # an inner loop's Enter: it runs with the inner loop
                if it.transfer != FORWARD or len(ins) != 1:
                    raise _Reject("an Enter that reads a variable")
                guard[it.id] = _chain([out_guard(s, k) for s, k in ins]
                                      + [out_guard(c, -1) for c in ctl])
                continue
            if it.is_next_iteration:
                (src, slot), = ins
                if it.out_control or any(not d.is_merge for d, _i, _s in it.out_data):
                    raise _Reject("a NextIteration with control outputs")
                if it.transfer != FORWARD:
                    raise _Reject("a NextIteration that reads a variable")
                # the next value must be live in every iteration that continues (its
                # control inputs only order it: it is read after the whole body)
                g = _chain([out_guard(src, slot)] + [out_guard(c, -1) for c in ctl])
                if g != ((nest.slot_of(*inputs[loop_cond.id][0]), True),):
                    raise _Reject("a loop variable's next value under a cond")
                where[(it.id, 0)] = nest.slot_of(src, slot)
                continue
            if it.is_exit:
                (src, slot), = ins
                if ctl or not src.is_switch or slot != 0 or src.id not in members \
                        or inputs[src.id][1][0] is not loop_cond or guard.get(src.id) != ():
                    raise _Reject("an Exit not fed by the loop's Switch (on every iteration)")
                nest.exit_src[it.id] = nest.slot_of(src, slot)
                continue
            if it.is_merge:
                _merge(nest, lp, it, ins, ctl, enter_ids, members, enter_slots, guard, units,
                       out_guard, unit_of, merges)
                continue
            g = _chain([out_guard(s, k) for s, k in ins] + [out_guard(c, -1) for c in ctl])
            guard[it.id] = g
            deps = {unit_of(s) for s, _k in ins} | {unit_of(c) for c in ctl}
            stmt = None
            if it.is_switch:
                if it.transfer != SWITCH:
                    raise _Reject("a Switch that reads a variable")
                (data, dslot), (pred, pslot) = ins
                c = nest.slot_of(pred, pslot)
                if any(cc == c for cc, _side in g):
                    raise _Reject("a Switch inside a branch of its own predicate")
                cond_of[it.id] = c
                where[(it.id, 0)] = where[(it.id, 1)] = nest.slot_of(data, dslot)
            elif (it.transfer == FORWARD and it.num_inputs == 1) or (
                    it.op == "IdentityN" and not it.deref and it.transfer == 0):
                for k, (s, sk) in enumerate(ins):
                    where[(it.id, k)] = nest.slot_of(s, sk)
            elif it.transfer == CONST:
                where[(it.id, 0)] = nest.new_slot(it.const_out[0])
            elif it.op == "NoOp" and not ins:
                pass   # orders nothing: control edges only carry deadness, in the guards
            elif it.transfer:
                raise _Reject(f"transfer op {it.op}")
            else:
                if not ins and not ctl:
                    raise _Reject("a kernel without inputs in a frame")
                base = len(nest.slots)
                for s in range(it.num_outputs):
                    where[(it.id, s)] = nest.new_slot()
                stmt = (it, tuple(nest.slot_of(s, k) for s, k in ins), base,
                        it.shared_ctx is None, ())
                nest.kernels.append(it)
                lp.num_kernels += 1
            u = units[it.id] = _Unit(it.id, it.id, g, stmt, stmt is not None and it.stateful)
            u.deps = deps - {None}
        for name in child_enters:
            child(name)   # an inner loop whose Exits nothing here reads (its side effects)
    except (KeyError, ValueError, IndexError):  # an arity surprise
        raise _Reject("unexpected arity") from None

    if guard.get(loop_cond.id) != () or loop_cond.transfer != FORWARD:
        raise _Reject("the loop predicate under a cond")
    lp.pred_slot = nest.slot_of(*inputs[loop_cond.id][0])
    for m in merges:
        nxt = [src for src, _s in inputs[m.id] if src.is_next_iteration]
        if len(nxt) != 1 or nxt[0].id not in members:
            raise _Reject("a Merge without its NextIteration")
    nexts = [next(x for x in inputs[m.id] if x[0].is_next_iteration) for m in merges]
    lp.merges = [(vs, ix, init, nest.slot_of(*nx), i0, i1)
                 for nx, (vs, ix, init, _n, i0, i1) in zip(nexts, lp.merges)]
    # Exits' values: what the loop's Switches passed in the last iteration
    for x in lay.exits:
        if x.id not in nest.exit_src:
            raise _Reject("an Exit without its Switch")
        out = nest.new_slot()
        where[(x.id, 0)] = out
        lp.exit_copies.append((out, nest.exit_src[x.id]))

    lp.floating = _floating(order, members, child_enters, child_of_exit, inputs, controls,
                            units, child_units)
    loop_slot = lp.pred_slot
    pre = {k: u for k, u in units.items() if not u.guard or u.guard[0][0] != loop_slot}
    body = {k: u for k, u in units.items() if k not in pre}
    for u in body.values():
        if u.guard[0] != (loop_slot, True):
            raise _Reject("a node on the loop's exit side other than an Exit")
        u.guard = u.guard[1:]
    for u in units.values():
        if any(c == loop_slot for c, _side in u.guard):
            raise _Reject("the loop's predicate steers a cond inside its body")
    lp.pre = _blocks(_schedule(pre))
    lp.body = _blocks(_schedule(body))
    return lp


def _frame_order(lay: FrameLayout, members: set[int], child_enters: dict[str, list],
                 child_of_exit: dict[int, str], inputs: dict, controls: dict
                 ) -> list[NodeItem]:
    """The frame's items in a topological order of one iteration (NextIteration -> Merge is
    the next iteration's edge) in which every Enter of an inner loop comes before anything
    that reads the loop's Exits; the plan's order where it allows."""
    by_id = {it.id: it for it in lay.items}
    users: dict[int, list[int]] = {}
    indeg = dict.fromkeys(by_id, 0)

    def dep(src: NodeItem, dst: NodeItem) -> None:
        if src.id in members:
            if dst.is_merge and src.is_next_iteration:
                return
            srcs = [src.id]
        elif src.id in child_of_exit:
            srcs = [e.id for e in child_enters[child_of_exit[src.id]]]
        else:
            return
        for s in srcs:
            users.setdefault(s, []).append(dst.id)
            indeg[dst.id] += 1

    for it in lay.items:
        for x in inputs[it.id]:
            if x is not None:
                dep(x[0], it)
        for c in controls[it.id]:
            dep(c, it)
    heap = [i for i, n in indeg.items() if not n]
    heapq.heapify(heap)
    out = []
    while heap:
        i = heapq.heappop(heap)
        out.append(by_id[i])
        for j in users.get(i, ()):
            indeg[j] -= 1
            if not indeg[j]:
                heapq.heappush(heap, j)
    if len(out) != len(by_id):
        raise _Reject("a cycle inside an iteration")
    return out


def _floating(order: list[NodeItem], members: set[int], child_enters: dict,
              child_of_exit: dict, inputs: dict, controls: dict, units: dict,
              child_units: dict) -> bool:
    """Whether some work of the frame does not depend on its Merges (only on constant
    Enters): TensorFlow runs it even when every loop variable's Enter is dead."""
    anchored: set[int] = set()
    for it in order:
        srcs = [x[0] for x in inputs[it.id] if x is not None] + controls[it.id]
        if (it.is_merge and any(s.is_next_iteration for s in srcs)) or any(
                s.id in anchored or (s.id in child_of_exit and any(
                    e.id in anchored for e in child_enters[child_of_exit[s.id]]))
                for s in srcs):
            anchored.add(it.id)
    for key, u in units.items():
        if u.stmt is None:
            continue
        if type(key) is int:
            if key not in anchored:
                return True
            continue
        ents = child_enters[key[1]]
        loose = [e for e in ents if e.id not in anchored]
        if len(loose) == len(ents) or (loose and child_units[key[1]].stmt.floating):
            return True
    return False


def _merge(nest: _Nest, lp: LoopIR, it: NodeItem, ins: list, ctl: list, enter_ids: set,
           members: set, enter_slots: dict, guard: dict, units: dict, out_guard: Any,
           unit_of: Any, merges: list) -> None:
    """A loop variable's Merge (an Enter and a NextIteration) or a cond's Merge (the two
    branches of one cond)."""
    if len(ins) != 2 or it.transfer != MERGE:
        raise _Reject("a Merge of not two inputs")
    where = nest.where
    vs = where[(it.id, 0)] = nest.new_slot()
    ix = where[(it.id, 1)] = nest.new_slot()
    read_ix = any(s == 1 for _d, _i, s in it.out_data)
    e_idx = next((i for i, (s, _k) in enumerate(ins)
                  if s.id in enter_ids and not s.is_constant_enter), None)
    n_idx = next((i for i, (s, _k) in enumerate(ins)
                  if s.is_next_iteration and s.id in members), None)
    if e_idx is not None or n_idx is not None:
        if e_idx is None or n_idx is None or ctl:
            raise _Reject("a loop Merge without an Enter and a NextIteration")
        guard[it.id] = ()
        units[it.id] = _Unit(it.id, it.id, (), None, False)
        merges.append(it)
        lp.merges.append((vs, ix if read_ix else None, enter_slots[ins[e_idx][0].id], -1,
                          nest.index_slot(e_idx), nest.index_slot(n_idx)))
        return
    ga, gb = (out_guard(s, k) for s, k in ins)
    if not ga or len(ga) != len(gb) or ga[:-1] != gb[:-1] or ga[-1][0] != gb[-1][0] \
            or ga[-1][1] == gb[-1][1]:
        raise _Reject("a Merge that is not the join of one cond's two branches")
    pred = ga[-1][0]
    a, b = (nest.slot_of(*ins[0]), nest.slot_of(*ins[1]))
    t, f = (a, b) if ga[-1][1] else (b, a)
    g = guard[it.id] = ga[:-1]
    stmts = [Select(vs, pred, t, f)]
    if read_ix:
        i_t, i_f = (nest.index_slot(0), nest.index_slot(1)) if ga[-1][1] else \
            (nest.index_slot(1), nest.index_slot(0))
        stmts.append(Select(ix, pred, i_t, i_f))
    u = units[it.id] = _Unit(it.id, it.id, g, stmts, False)
    # a Merge's control inputs only order it (TensorFlow ignores their deadness)
    u.deps = {unit_of(s) for s, _k in ins} | {unit_of(c) for c in ctl}
    u.deps.discard(None)


def _loop_kernels(lp: LoopIR) -> list[NodeItem]:
    out = []

    def walk(stmts: list) -> None:
        for st in stmts:
            if type(st) is tuple:
                out.append(st[0])
            elif type(st) is If:
                walk(st.block)
            elif type(st) is LoopIR:
                walk(st.pre)
                walk(st.body)

    walk(lp.pre)
    walk(lp.body)
    return out


def _schedule(units: dict[Any, _Unit]) -> list[_Unit]:
    """A topological order of ``units`` (dependencies outside them are done already) that
    keeps the nodes of one branch together, so a cond is one ``if`` where it can be, and
    keeps stateful kernels in the plan's order where the dependencies allow."""
    users: dict[Any, list[_Unit]] = {}
    indeg: dict[Any, int] = {}
    for u in units.values():
        deps = [d for d in u.deps if d in units and d != u.key]
        indeg[u.key] = len(deps)
        for d in deps:
            users.setdefault(d, []).append(u)
    free: list = []                              # code-free units: any time
    ready: dict[tuple, list] = {}                # guard -> heap of stateless units
    ready_stateful: list = []                    # heap of stateful units
    pending_stateful = sorted(u.order for u in units.values() if u.stateful)
    done_stateful: set[int] = set()

    def push(u: _Unit) -> None:
        item = (u.order, id(u), u)
        if u.stmt is None:
            heapq.heappush(free, item)
        elif u.stateful:
            heapq.heappush(ready_stateful, item)
        else:
            heapq.heappush(ready.setdefault(u.guard, []), item)

    for u in units.values():
        if not indeg[u.key]:
            push(u)
    out: list[_Unit] = []
    cur: tuple = ()
    nxt_stateful = 0
    while True:
        if free:
            u = heapq.heappop(free)[2]
        else:
            while nxt_stateful < len(pending_stateful) and \
                    pending_stateful[nxt_stateful] in done_stateful:
                nxt_stateful += 1
            best = None
            for g, heap in ready.items():
                if not heap:
                    continue
                n = 0
                while n < min(len(g), len(cur)) and g[n] == cur[n]:
                    n += 1
                score = (len(cur) - n, len(g) - n, heap[0][0])
                if best is None or score < best[0]:
                    best = (score, heap)
            if ready_stateful:
                top = ready_stateful[0]
                turn = nxt_stateful < len(pending_stateful) and \
                    top[0] == pending_stateful[nxt_stateful]
                if turn or best is None:
                    best = (None, ready_stateful)
            if best is None:
                break
            u = heapq.heappop(best[1])[2]
            cur = u.guard
            if u.stateful:
                done_stateful.add(u.order)
        out.append(u)
        for v in users.get(u.key, ()):
            indeg[v.key] -= 1
            if not indeg[v.key]:
                push(v)
    if len(out) != len(units):
        raise _Reject("a cycle inside an iteration")
    return out


def _blocks(order: list[_Unit]) -> list:
    """Statements in ``order``, each inside the ``If``s of its guard (nested as the conds
    are; consecutive statements of one branch share one ``If``)."""
    root: list = []
    stack: list[tuple[list, tuple]] = [(root, ())]
    for u in order:
        if u.stmt is None:
            continue
        g = u.guard
        while g[:len(stack[-1][1])] != stack[-1][1]:
            stack.pop()
        while len(stack[-1][1]) < len(g):
            depth = len(stack[-1][1])
            pred, side = g[depth]
            blk: list = []
            stack[-1][0].append(If(pred, side, blk))
            stack.append((blk, g[:depth + 1]))
        if type(u.stmt) is list:
            stack[-1][0].extend(u.stmt)
        else:
            stack[-1][0].append(u.stmt)
    return root


def _program_item(prog: LoopProgram, lay: FrameLayout, item_id: int) -> NodeItem:
    """The pseudo node: inputs are the Enters' values (slots appended to the frame's input
    array), outputs the Exits' values; per-run context (it runs stateful kernels)."""
    item = NodeItem.pseudo(item_id, f"{lay.name} (loop program)", "LoopProgram", prog,
                           [e.out_types[0] for e in prog.enters],
                           [x.out_types[0] for x in prog.exits], lay.name)
    item.in_offset = lay.num_inputs
    lay.num_inputs += item.num_inputs
    item.cf_kind = CF_PROGRAM
    return item
