"""Programs: parts of a plan run as one sequential list of kernel calls instead of node by node.

Both kinds resolve forwarding ops (Identity, Const, and in loops Switch, LoopCond,
NextIteration) at plan time into where their values live, and then only call kernels, in a
topological order. They are used when every kernel in them is measured cheap: the scheduler
would run all of those inline on one thread anyway, so nothing is lost but the bookkeeping.
A kernel found slow while a program runs marks its cost, and the next step goes node by node.

Straight-line programs: a step without control flow (``StraightLineProgram``): the values
are a list of slots; a slot is cleared after its last reader, as the executor drops tensors.

Loop programs: a while-loop frame of the common simple shape.

The frame propagator runs a loop node by node: every Merge, Switch, Identity and NextIteration
of every iteration is a tagged node with pending counts, deadness and a trip through the
scheduler. For a frame shaped like what ``tf.while_loop`` emits with no conds or loops inside
its body, all of that is known statically:

- each Merge joins one non-constant Enter (iteration 0) and one NextIteration (later ones);
- one LoopCond; every Switch is steered by it, passes a value computed in the iteration
  (output 1 into the body, output 0 only to Exits);
- every other node is either *cond-side* (depends only on Merges, constant Enters and other
  cond-side nodes: live in every iteration, the last included) or *body-side* (depends on a
  Switch's output 1: live exactly while the predicate holds); NextIterations are body-side.

Then one iteration is: cond-side kernels in topological order, the predicate, and if it holds
the body-side kernels. The Exits get the last iteration's values.
This runs one valid schedule of the frame (iterations in order, which TensorFlow's
``parallel_iterations`` permits), so results are the node-by-node run's.

A program is a pseudo node (op ``LoopProgram``) of its frame: its inputs are the frame's
Enters, its outputs the Exits' values. The propagator decides per frame instance whether to
use it (``FramePropagator``); a frame that is not of this shape has no program.
"""

from __future__ import annotations

import time
from typing import Any

from . import codegen, kernel_call
from .kernel_call import call
from .plan import (
    CF_PROGRAM,
    CONST,
    FORWARD,
    MERGE_INDEX,
    FrameLayout,
    NodeItem,
    Plan,
    PlanStats,
)
from .trace import TRACE_KEY

# step_state key of the step's StepControl (cancel.py): programs check it before each kernel
CONTROL_KEY = "dfg.step_control"

# class of a node in a simple frame
_COND, _BODY, _SWITCH, _EXIT, _NEXT = range(5)


class _Reject(Exception):
    """The frame is not of the simple shape: it runs node by node."""


class _Program:
    """What both kinds share: the kernels they run, and the plan's stats, which decide
    whether they run (``PlanStats.program_runs``) and learn which kernels are slow."""

    def __init__(self, prog_id: int) -> None:
        self.id = prog_id
        self.kernels: list[NodeItem] = []
        self.stats: PlanStats | None = None   # set when the plan is assembled

    def runs(self) -> bool:
        return self.stats.program_runs(self)


class LoopProgram(_Program):
    """The compiled form of one frame (immutable after ``compile_frame``, but for the
    qualification cache of ``_Program``)."""

    def __init__(self, prog_id: int) -> None:
        super().__init__(prog_id)
        self.item: NodeItem                       # the pseudo node the scheduler runs
        self.enters: list[NodeItem] = []          # program input k is Enter k's value
        self.exits: list[NodeItem] = []           # program output k is Exit k's value
        self.template: list[Any] = []             # the value slots, constants filled in
        self.invariant_slots: dict[int, int] = {}  # enter index -> slot (constant Enters)
        self.merge_init: list[int] = []           # merge j starts from enter index
        self.merge_slots: list[tuple[int, int]] = []  # merge j -> (value slot, index slot)
        self.merge_index: list[tuple[Any, Any]] = []  # merge j -> (index at 0, index later)
        self.next_slots: list[int] = []           # merge j's next value comes from this slot
        self.pred_slot = 0
        self.exit_slots: list[int] = []
        # (item, argument slots, first output slot, stateful?, frees) in topological order
        self.cond_steps: list[tuple] = []
        self.body_steps: list[tuple] = []
        self.compiled: Any = None   # codegen.compile_loop's result, made on first use

    def __call__(self, ctx: Any, *enter_values: Any) -> list[Any]:
        state = ctx.step
        tracer = state.get(TRACE_KEY)
        ctl = state[CONTROL_KEY]
        if tracer is not None:
            return self._interpret(ctx, enter_values, tracer, ctl)
        compiled = self.compiled
        if compiled is None:
            compiled = self.compiled = codegen.compile_loop(self)
        fn, template, items = compiled
        contexts = [kernel_call.context(k, ctx.resources, state, max_bytes=ctx.max_bytes)
                    if k.shared_ctx is None else k.shared_ctx for k in items]
        t0 = time.perf_counter()
        out, n = fn(template, enter_values, items, contexts, ctl, self.merge_index)
        self.stats.record_program(self, time.perf_counter() - t0,
                                  (n + 1) * max(1, len(self.kernels)))
        return out

    def _interpret(self, ctx: Any, enter_values: tuple, tracer: Any, ctl: Any) -> list[Any]:
        """The loop run step by step with ``run_steps_traced`` (a traced run shows every
        kernel of every iteration)."""
        vals = self.template[:]
        for k, slot in self.invariant_slots.items():
            vals[slot] = enter_values[k]
        cur = [enter_values[k] for k in self.merge_init]
        state = ctx.step
        steps = bind_steps(self.cond_steps, ctx.resources, state, ctx.max_bytes)
        body = bind_steps(self.body_steps, ctx.resources, state, ctx.max_bytes)
        n = 0
        while True:
            for j, (vs, ix) in enumerate(self.merge_slots):
                vals[vs] = cur[j]
                vals[ix] = self.merge_index[j][0 if n == 0 else 1]
            run_steps_traced(steps, vals, self.stats, ctl, tracer, n)
            if not vals[self.pred_slot]:
                break
            run_steps_traced(body, vals, self.stats, ctl, tracer, n)
            cur = [vals[s] for s in self.next_slots]
            n += 1
            if ctl.error is not None:
                raise ctl.error
        return [vals[s] for s in self.exit_slots]


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

    def __init__(self, prog_id: int) -> None:
        super().__init__(prog_id)
        self.template: list[Any] = []
        self.feed_slots: dict[tuple[str, int], int] = {}
        self.fetch_slots: list[int | None] = []   # None: a fed tensor (the session has it)
        self.steps: list[tuple] = []               # (item, args, first out, stateful?, frees)
        self.compiled: Any = None   # codegen.compile_straight_line's result, or False

    def run(self, feed_values: dict, resources: Any, step_state: Any, ctl: Any,
            max_bytes: int | None, tracer: Any = None) -> list[Any]:
        if tracer is None:
            compiled = self.compiled
            if compiled is None:
                compiled = self.compiled = codegen.compile_straight_line(self) or False
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
            run_steps(steps, vals, self.stats, ctl)
        else:
            t0 = tracer._now()
            run_steps_traced(steps, vals, self.stats, ctl, tracer, 0)
            tracer.program("straight-line program", t0, tracer._now())
        out = [None if s is None else vals[s] for s in self.fetch_slots]
        # a fetched ref (a variable, Assign's output) is fetched as its value
        return [v.read() if hasattr(v, "read") else v for v in out]


def add_programs(plan: Plan) -> Plan:
    """Compile ``plan``'s programs: one per while-loop frame of the simple shape, and the
    straight-line program of a plan without control flow. Each gets an item id after the
    plan's items; the plan's stats are sized for them."""
    from dfg.graphdef.frames import ROOT

    for lay in plan.frames.values():
        if lay.name == ROOT:
            continue
        enters = [it for it in plan.items if it.is_enter and it.enter_frame == lay.name]
        lay.program = compile_frame(lay, enters, plan.inputs, plan.controls, plan.num_ids)
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
    one (an input that comes later in the order: a cycle in an unvalidated graph)."""
    prog = StraightLineProgram(prog_id)
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
            return None
        if it.transfer == CONST:
            slots.append(it.const_out[0])
            where[(it.id, 0)] = len(slots) - 1
        elif it.transfer == FORWARD and it.num_inputs == 1:
            where[(it.id, 0)] = args[0]
        elif it.transfer:
            return None
        else:
            base = len(slots)
            for k in range(it.num_outputs):
                slots.append(None)
                where[(it.id, k)] = base + k
            steps.append([it, args, base, it.shared_ctx is None, ()])
            prog.kernels.append(it)
    fetched = set()
    for i, (node, slot) in enumerate(plan.fetches):
        if i in plan.fetched_feeds:
            prog.fetch_slots.append(None)
            continue
        s = where.get((plan.by_name[node].id, slot))
        if s is None:
            return None
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
    return prog


def compile_frame(lay: FrameLayout, enters: list[NodeItem], all_inputs: dict,
                  all_controls: dict, item_id: int) -> LoopProgram | None:
    """The program of frame ``lay`` (entered by ``enters``), or None when the frame is not of
    the simple shape. ``all_inputs``/``all_controls``: the plan's in-edges by item id;
    ``item_id`` is the id its pseudo node gets."""
    try:
        return _compile(lay, enters, all_inputs, all_controls, item_id)
    except _Reject:
        return None


def _compile(lay: FrameLayout, enters: list[NodeItem], all_inputs: dict, all_controls: dict,
             item_id: int) -> LoopProgram:
    members = {it.id for it in lay.items}
    enter_pos = {e.id: k for k, e in enumerate(enters)}
    inputs = {i: all_inputs[i] for i in members}
    controls = {i: all_controls[i] for i in members}
    # nothing enters the frame but through its Enters
    for i in members:
        srcs = [src for src, _s in filter(None, inputs[i])] + controls[i]
        if any(src.id not in members and src.id not in enter_pos for src in srcs):
            raise _Reject
    for e in enters:
        if not e.is_constant_enter and (e.out_control or
                                        any(not d.is_merge for d, _i, _s in e.out_data)):
            raise _Reject  # a loop variable's first value goes to a Merge only
    for it in lay.items:
        if any(i is None for i in inputs[it.id]):
            raise _Reject  # an input the step does not compute (fed or pruned)
        if it.is_enter or it.is_control_trigger:
            raise _Reject  # a nested frame; or a ControlTrigger's deadness rule

    loop_conds = [it for it in lay.items if it.op == "LoopCond"]
    if len(loop_conds) != 1:
        raise _Reject
    loop_cond = loop_conds[0]

    cls: dict[int, int] = {}

    def source_class(src: NodeItem, slot: int) -> int:
        if src.id in enter_pos:
            if not src.is_constant_enter:
                raise _Reject
            return _COND
        c = cls[src.id]  # KeyError: a back edge other than NextIteration -> Merge
        if c == _SWITCH:
            if slot != 1:
                raise _Reject  # the untaken side feeds only Exits
            return _BODY
        if c in (_EXIT, _NEXT):
            raise _Reject
        return c

    prog = LoopProgram(item_id)
    prog.enters = list(enters)
    slots: list[Any] = []

    def new_slot(value: Any = None) -> int:
        slots.append(value)
        return len(slots) - 1

    out_base: dict[int, int] = {}
    where: dict[tuple[int, int], int] = {}      # (item id, slot) -> value slot
    merges: list[NodeItem] = []

    for k, e in enumerate(enters):
        if e.is_constant_enter:
            prog.invariant_slots[k] = where[(e.id, 0)] = new_slot()

    def slot_of(src: NodeItem, slot: int) -> int:
        try:
            return where[(src.id, slot)]
        except KeyError:
            raise _Reject from None

    kernels: list[tuple[NodeItem, int]] = []
    try:
        for it in lay.items:
            ins = inputs[it.id]
            ctl = controls[it.id]
            if it.is_merge:
                if ctl or len(ins) != 2:
                    raise _Reject
                kinds = [(src.id in enter_pos and not src.is_constant_enter, src.is_next_iteration
                          and src.id in members) for src, _s in ins]
                e_idx = next((i for i, (is_e, _n) in enumerate(kinds) if is_e), None)
                n_idx = next((i for i, (_e, is_n) in enumerate(kinds) if is_n), None)
                if e_idx is None or n_idx is None:
                    raise _Reject
                cls[it.id] = _COND
                merges.append(it)
                vs, ix = new_slot(), new_slot()
                where[(it.id, 0)], where[(it.id, 1)] = vs, ix
                prog.merge_slots.append((vs, ix))
                prog.merge_init.append(enter_pos[ins[e_idx][0].id])
                prog.merge_index.append((MERGE_INDEX[e_idx], MERGE_INDEX[n_idx]))
            elif it.is_switch:
                (data, dslot), (pred, _ps) = ins
                if ctl or it.out_control or pred is not loop_cond \
                        or source_class(data, dslot) != _COND:
                    raise _Reject
                for dst, _idx, slot in it.out_data:
                    if slot == 0 and not dst.is_exit:
                        raise _Reject
                cls[it.id] = _SWITCH
                where[(it.id, 0)] = where[(it.id, 1)] = slot_of(data, dslot)
            elif it.is_exit:
                (src, slot), = ins
                if ctl or not src.is_switch or slot != 0 or src.id not in members:
                    raise _Reject
                cls[it.id] = _EXIT
            elif it.is_next_iteration:
                (src, slot), = ins
                if ctl or it.out_control or source_class(src, slot) != _BODY \
                        or any(not d.is_merge for d, _i, _s in it.out_data):
                    raise _Reject
                cls[it.id] = _NEXT
                where[(it.id, 0)] = slot_of(src, slot)
            else:
                if not ins and not ctl:
                    raise _Reject
                if any(s.is_switch for s in ctl):
                    raise _Reject  # ^Switch is live on both sides
                classes = [source_class(s, k) for s, k in ins]
                classes += [source_class(s, 0) for s in ctl]
                c = _BODY if _BODY in classes else _COND
                cls[it.id] = c
                if it is loop_cond and c != _COND:
                    raise _Reject
                if it.transfer == FORWARD and it.num_inputs == 1:
                    where[(it.id, 0)] = slot_of(*ins[0])
                elif it.transfer == CONST:
                    where[(it.id, 0)] = new_slot(it.const_out[0])
                elif it.transfer:
                    raise _Reject
                else:
                    base = out_base[it.id] = len(slots)
                    for s in range(it.num_outputs):
                        where[(it.id, s)] = new_slot()
                    kernels.append((it, base))
    except (KeyError, ValueError):  # a back edge not through a Merge; an arity surprise
        raise _Reject from None

    # every Merge's NextIteration must be this frame's and feed that Merge
    for m in merges:
        nxt = [src for src, _s in inputs[m.id] if src.is_next_iteration]
        prog.next_slots.append(slot_of(nxt[0], 0))
    prog.pred_slot = slot_of(*inputs[loop_cond.id][0])
    prog.exits = list(lay.exits)
    prog.exit_slots = [slot_of(*inputs[x.id][0]) for x in lay.exits]
    for it, base in kernels:
        step = (it, tuple(slot_of(s, k) for s, k in inputs[it.id]), base, it.shared_ctx is None,
                ())
        (prog.body_steps if cls[it.id] == _BODY else prog.cond_steps).append(step)
    prog.kernels = [it for it, _b in kernels]
    prog.template = slots
    prog.item = _program_item(prog, lay, item_id)
    return prog


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
