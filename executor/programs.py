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

import numpy as np

from dfg.graphdef.errors import DeadlineExceededError, DfgError

from .executor import EXPENSIVE_US, MERGE_INDEX, checked_outputs, kernel_error, run_kernel
from .kernels.registry import KernelContext
from .plan import CF_PROGRAM, CONST, FORWARD, FrameLayout, NodeItem
from .trace import TRACE_KEY

# class of a node in a simple frame
_COND, _BODY, _SWITCH, _EXIT, _NEXT = range(5)


class _Reject(Exception):
    """The frame is not of the simple shape: it runs node by node."""


def in_edges(items: list[NodeItem]) -> tuple[dict[int, list[Any]], dict[int, list[NodeItem]]]:
    """Per item id: its data inputs as (producer, slot) by input index (None where nothing in
    ``items`` produces it: fed or pruned) and its control inputs; from the plan's out-edges."""
    inputs: dict[int, list[Any]] = {it.id: [None] * it.num_inputs for it in items}
    controls: dict[int, list[NodeItem]] = {it.id: [] for it in items}
    for src in items:
        for dst, idx, slot in src.out_data:
            inputs[dst.id][idx - dst.in_offset] = (src, slot)
        for dst in src.out_control:
            controls[dst.id].append(src)
    return inputs, controls


def _cheap(item: NodeItem, expensive_us: float) -> bool:
    # registered cheap, or measured at most expensive_us (unmeasured: not known to be cheap)
    return bool(item.cheap) or (item.cheap is None and 0 <= item.cost_us <= expensive_us)


class _Program:
    """What both kinds share: the kernels they run and whether they qualify to run.

    ``qualified`` caches a passed cost check until a run finds a slow kernel; ``blocker`` is
    the kernel that failed the last check, tried first next time, so a program that does
    not qualify costs one test per step, not one per kernel. Both are written by whichever
    thread runs a step; a stale read only changes which path a step takes."""

    def __init__(self) -> None:
        self.kernels: list[NodeItem] = []
        self.qualified = False
        self.blocker: NodeItem | None = None

    def qualifies(self, expensive_us: float = EXPENSIVE_US) -> bool:
        if self.qualified:
            return True
        b = self.blocker
        if b is not None and not _cheap(b, expensive_us):
            return False
        for item in self.kernels:
            if not _cheap(item, expensive_us):
                self.blocker = item
                return False
        self.qualified, self.blocker = True, None
        return True


class LoopProgram(_Program):
    """The compiled form of one frame (immutable after ``compile_frame``, but for the
    qualification cache of ``_Program``)."""

    def __init__(self) -> None:
        super().__init__()
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

    def __call__(self, ctx: KernelContext, *enter_values: Any) -> list[Any]:
        vals = self.template[:]
        for k, slot in self.invariant_slots.items():
            vals[slot] = enter_values[k]
        cur = [enter_values[k] for k in self.merge_init]
        merge_slots, merge_index = self.merge_slots, self.merge_index
        first = True
        deadline = ctx.deadline
        tracer = ctx.step.get(TRACE_KEY) if ctx.step else None
        steps = bind_steps(self.cond_steps, ctx.resources, ctx.step, deadline)
        body = bind_steps(self.body_steps, ctx.resources, ctx.step, deadline)
        limit = EXPENSIVE_US
        pred, next_slots = self.pred_slot, self.next_slots
        n = 0
        while True:
            for j, (vs, ix) in enumerate(merge_slots):
                vals[vs] = cur[j]
                vals[ix] = merge_index[j][0 if first else 1]
            if (run_steps(steps, vals, limit) if tracer is None
                    else run_steps_traced(steps, vals, limit, tracer, n)):
                self.qualified = False
            if not vals[pred]:
                break
            if (run_steps(body, vals, limit) if tracer is None
                    else run_steps_traced(body, vals, limit, tracer, n)):
                self.qualified = False
            cur = [vals[s] for s in next_slots]
            first = False
            n += 1
            if deadline is not None and not n & 255 and time.monotonic() > deadline:
                raise DeadlineExceededError("step timed out", node=self.exits[0].name
                                            if self.exits else None)
        return [vals[s] for s in self.exit_slots]


def run_steps(steps: list[tuple], vals: list[Any], expensive_us: float) -> bool:
    """Run ``(item, argument slots, first output slot, context, slots to clear)`` steps over
    ``vals``: run_kernel's work, inlined (the call, error naming, output checks). A kernel
    slower than ``expensive_us`` records its cost, so the program stops qualifying; the result
    says whether there was one."""
    clock = time.perf_counter
    slow = False
    for item, args, out, ictx, frees in steps:
        t0 = clock()
        try:
            res = item.fn(ictx, *[vals[a] for a in args]) if not item.deref else \
                run_kernel(item, [vals[a] for a in args], ictx)[0]
        except Exception as e:
            raise kernel_error(item, e) from (None if isinstance(e, DfgError) else e)
        us = (clock() - t0) * 1e6
        if us > expensive_us:
            item.cost_us = us
            slow = True
        if type(res) is np.ndarray and item.num_outputs == 1 and res.dtype is item.out_dtypes[0]:
            vals[out] = res
        else:
            outs = checked_outputs(item, res)
            vals[out:out + len(outs)] = outs
        for s in frees:
            vals[s] = None
    return slow


def run_steps_traced(steps: list[tuple], vals: list[Any], expensive_us: float, tracer: Any,
                     iteration: int) -> bool:
    """``run_steps`` with every kernel call recorded by ``tracer`` (executor/trace.py); kept
    apart so that the untraced loop stays as it is."""
    now, origin = time.perf_counter_ns, tracer._origin
    slow = False
    for step in steps:
        item, out = step[0], step[2]
        ins = [vals[a] for a in step[1]]    # before the step clears the slots it last reads
        t0 = now() - origin
        slow |= run_steps([step], vals, expensive_us)
        t1 = now() - origin
        tracer.program_kernel(item, iteration, t0, t1, ins, vals[out:out + item.num_outputs])
        del ins
    return slow


def bind_steps(steps: list[tuple], resources: Any, step_state: Any,
               deadline: float | None) -> list[tuple]:
    """Steps with their kernel contexts: the shared one of a stateless kernel, a per-run one
    (the step's resources) for a stateful kernel."""
    out = []
    for item, args, base, stateful, frees in steps:
        if stateful:
            ctx = KernelContext(item.name, item.op, item.attrs, item.out_dtypes,
                                item.input_dtypes, resources, step_state, deadline=deadline)
        else:
            ctx = item.shared_ctx
        out.append((item, args, base, ctx, frees))
    return out


class StraightLineProgram(_Program):
    """A step without control flow as one list of kernel calls (see the module docstring)."""

    CHUNK = 256  # steps between deadline checks

    def __init__(self) -> None:
        super().__init__()
        self.template: list[Any] = []
        self.feed_slots: dict[tuple[str, int], int] = {}
        self.fetch_slots: list[int | None] = []   # None: a fed tensor (the session has it)
        self.steps: list[tuple] = []               # (item, args, first out, stateful?, frees)

    def run(self, feed_values: dict, resources: Any, step_state: Any,
            deadline: float | None, tracer: Any = None) -> list[Any]:
        vals = self.template[:]
        for key, slot in self.feed_slots.items():
            vals[slot] = feed_values[key]
        steps = bind_steps(self.steps, resources, step_state, deadline)
        slow = False
        t0 = 0 if tracer is None else tracer._now()
        for i in range(0, len(steps), self.CHUNK):
            chunk = steps[i:i + self.CHUNK]
            slow |= run_steps(chunk, vals, EXPENSIVE_US) if tracer is None else \
                run_steps_traced(chunk, vals, EXPENSIVE_US, tracer, 0)
            if deadline is not None and time.monotonic() > deadline:
                raise DeadlineExceededError("step timed out")
        if slow:
            self.qualified = False
        if tracer is not None:
            tracer.program("straight-line program", t0, tracer._now())
        out = [None if s is None else vals[s] for s in self.fetch_slots]
        # a fetched ref (a variable, Assign's output) is fetched as its value
        return [v.read() if hasattr(v, "read") else v for v in out]


def compile_straight_line(plan: Any) -> StraightLineProgram | None:
    """The program of a plan without control flow, or None when some node cannot be part of
    one (an input that comes later in the order: a cycle in an unvalidated graph)."""
    prog = StraightLineProgram()
    slots = prog.template
    inputs = {i: [None if x is None else (x[0].id, x[1]) for x in ins]
              for i, ins in in_edges(plan.items)[0].items()}
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


def compile_frame(lay: FrameLayout, enters: list[NodeItem], all_items: list[NodeItem],
                  item_id: int) -> LoopProgram | None:
    """The program of frame ``lay`` (entered by ``enters``), or None when the frame is not of
    the simple shape. ``item_id`` is the id its pseudo node gets."""
    try:
        return _compile(lay, enters, all_items, item_id)
    except _Reject:
        return None


def _compile(lay: FrameLayout, enters: list[NodeItem], all_items: list[NodeItem],
             item_id: int) -> LoopProgram:
    members = {it.id for it in lay.items}
    enter_pos = {e.id: k for k, e in enumerate(enters)}
    all_inputs, all_controls = in_edges(all_items)
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

    prog = LoopProgram()
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
    item = NodeItem()
    item.id = item_id
    item.name = f"{lay.name} (loop program)"
    item.op = "LoopProgram"
    item.fn = prog
    item.attrs = {}
    item.num_inputs = len(prog.enters)
    item.num_outputs = len(prog.exits)
    item.input_dtypes = [e.out_types[0] for e in prog.enters]
    item.out_types = [x.out_types[0] for x in prog.exits]
    item.out_dtypes = [None] * len(prog.exits)   # the Exits' own runs check nothing either
    item.deref = ()
    item.out_data = []
    item.out_control = []
    item.frame = lay.name
    item.local_id = -1
    item.in_offset = lay.num_inputs
    lay.num_inputs += item.num_inputs
    item.num_control_inputs = 0
    item.is_merge = item.is_switch = item.is_enter = item.is_exit = False
    item.is_next_iteration = item.is_constant_enter = item.is_control_trigger = False
    item.enter_frame = None
    item.parallel_iterations = 0
    item.cheap = None
    item.stateful = True
    item.shared_ctx = None
    item.transfer = 0
    item.const_out = None
    item.cf_kind = CF_PROGRAM
    return item
