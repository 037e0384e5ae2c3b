"""The program compilers: a plan's straight-line step, or a while-loop frame and the loops
nested in it, turned into the IR of program_ir.py (the shapes handled and the rules are in
programs.py's docstring). Anything else raises ``_Reject`` and runs node by node."""

from __future__ import annotations

import heapq
from typing import Any

from .kernels import control_flow
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
from .program_ir import If, KernelStep, LoopIR, Select, kernel_steps
from .programs import LoopProgram, StraightLineProgram


class _Reject(Exception):
    """The frame is not of a shape programs handle: it runs node by node (the message says
    why, for debugging)."""


def add_programs(plan: Plan) -> Plan:
    """Compile ``plan``'s programs: one per while-loop frame of a shape it compiles (a loop
    nest), and the straight-line program of a plan without control flow. Each gets an item
    id after the plan's items; the plan's stats are sized for them."""
    from dfg.graphdef.frames import ROOT

    if plan.has_async:
        return plan   # programs call kernels synchronously; an async one runs node by node
    for lay in plan.frames.values():
        if lay.name == ROOT:
            continue
        enters = [it for it in plan.items if it.is_enter and it.enter_frame == lay.name]
        lay.program = compile_frame(lay, enters, plan.inputs, plan.controls, plan.num_ids,
                                   plan.frames)
        if lay.program is not None:
            plan.num_ids += 1
    if not plan.has_control_flow or _loops_only(plan):
        plan.program = compile_straight_line(plan, plan.num_ids)
        plan.num_ids += 1
    plan.stats = PlanStats(plan.num_ids)
    for prog in [lay.program for lay in plan.frames.values()] + [plan.program]:
        if prog is not None:
            prog.stats = plan.stats
    return plan


def _loops_only(plan: Plan) -> bool:
    """Whether the plan's control flow is while loops at its top level only, each compiled
    into a loop program (no cond outside a loop): its root frame can run as a straight-line
    program that runs each loop as one step."""
    from dfg.graphdef.frames import ROOT

    root = plan.frames.get(ROOT)
    if root is None:
        return False
    tops = {it.enter_frame for it in root.items if it.is_enter}
    return bool(tops) and all(plan.frames[f].program is not None for f in tops) and all(
        not it.transfer or it.transfer == CONST or (it.transfer == FORWARD
                                                    and it.num_inputs == 1)
        for it in root.items)


def compile_straight_line(plan: Any, prog_id: int) -> StraightLineProgram | None:
    """The program of a plan without control flow, or of one whose control flow is loops at
    its top level that compiled into loop programs (each runs as one step of this one);
    None when some node cannot be part of one (a transfer other than a Const or a one-input
    forward). Its steps are built when it first runs (``ready``: False for an input that
    comes later in the order, a cycle in an unvalidated graph)."""
    from dfg.graphdef.frames import ROOT

    prog = StraightLineProgram(prog_id, plan, _build_straight_line)
    items = plan.frames[ROOT].items if plan.has_control_flow else plan.items
    for it in items:
        if it.writes_ref:   # as loops (compile_frame): 0-d reads would be copies
            return None
        if it.is_enter:
            if it.transfer != FORWARD or it.num_inputs != 1:
                return None   # a RefEnter: the loop reads a variable
            continue
        if not it.transfer:
            prog.kernels.append(it)
        elif not (it.transfer == CONST or it.transfer == FORWARD and it.num_inputs == 1):
            return None
    if plan.has_control_flow:
        tops = dict.fromkeys(it.enter_frame for it in items if it.is_enter)
        prog.loops = [plan.frames[f].program for f in tops]
    return prog


def _root_order(plan: Any) -> list[Any]:
    """The root frame's items and its loops (a loop program: its pseudo item) in a
    topological order, the plan's order where it allows: a loop after its Enters' inputs,
    the readers of its Exits after it. None when an edge makes a cycle."""
    from dfg.graphdef.frames import ROOT

    items = plan.frames[ROOT].items
    loop_of: dict[int, Any] = {}    # Enter and Exit item ids -> the loop's pseudo item
    for lay in plan.frames.values():
        if lay.name != ROOT and lay.program is not None:
            for x in lay.exits:
                loop_of[x.id] = lay.program.item
    for it in items:
        if it.is_enter:
            loop_of[it.id] = plan.frames[it.enter_frame].program.item
    unit_of = {it.id: loop_of.get(it.id, it) for it in items}
    units: dict[int, Any] = {}
    for u in unit_of.values():
        units[u.id] = u
    order_key = {it.id: it.id for it in items}
    for it in items:
        if it.is_enter:
            u = unit_of[it.id]
            order_key[u.id] = min(order_key.get(u.id, it.id), it.id)
    deps: dict[int, set[int]] = {uid: set() for uid in units}
    for it in items:
        u = unit_of[it.id]
        srcs = [x[0] for x in plan.inputs[it.id] if x is not None] + plan.controls[it.id]
        for src in srcs:
            su = loop_of.get(src.id, src)
            if su.id != u.id:
                if su.id not in units:
                    return None   # an input from inside a loop other than an Exit
                deps[u.id].add(su.id)
    users: dict[int, list[int]] = {}
    for uid, ds in deps.items():
        for d in ds:
            users.setdefault(d, []).append(uid)
    indeg = {uid: len(ds) for uid, ds in deps.items()}
    heap = [(order_key[uid], uid) for uid, n in indeg.items() if not n]
    heapq.heapify(heap)
    out = []
    while heap:
        _k, uid = heapq.heappop(heap)
        out.append(units[uid])
        for v in users.get(uid, ()):
            indeg[v] -= 1
            if not indeg[v]:
                heapq.heappush(heap, (order_key[v], v))
    return out if len(out) == len(units) else None


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
    order = plan.items
    if prog.loops:
        order = _root_order(plan)
        if order is None:
            return False
    loops = {lp.item.id: lp for lp in prog.loops}
    for it in order:
        if it.id in loops:
            # a loop: one step of its program's pseudo item, on its Enters' inputs, its
            # outputs its Exits' values
            lp = loops[it.id]
            try:
                args = tuple(where[src] for e in lp.enters for src in inputs[e.id])
            except KeyError:
                return False
            base = len(slots)
            for k, x in enumerate(lp.exits):
                slots.append(None)
                where[(x.id, 0)] = base + k
            steps.append([it, args, base, True, ()])
            continue
        if it.is_enter:
            continue   # its loop's step reads its input
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
    prog.steps = [KernelStep(*s) for s in steps]
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


# A guard is the conds a node runs under: (predicate slot, side) pairs, outermost first. It is
# the static side of v1 control flow, derived here from control_flow's definitions rather
# than restated: a Switch's output k is live under the predicate values for which
# control_flow.switch puts the data there (_SWITCH_SIDE), and a cond's Merge becomes the
# Select of what control_flow.merge picks from the inputs live under each predicate value
# (_merge). tests/test_fast_paths.py checks the If/Select a cond compiles to against those
# functions.
_SWITCH_SIDE = {k: p for p in (False, True)
                for k, v in enumerate(control_flow.switch(True, p)) if v is not None}


def merge_select(slots: tuple[int, int], sides: tuple[bool, bool]
                 ) -> tuple[tuple[int, int], tuple[int, int]]:
    """A cond's Merge of inputs in ``slots``, live when the predicate is ``sides``: for the
    predicate true and false, the slot control_flow.merge takes and its value_index."""
    def picked(p: bool) -> tuple[int, int]:
        slot, index = control_flow.merge([s if side == p else None
                                          for s, side in zip(slots, sides)])
        return slot, int(index)

    return picked(True), picked(False)


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
            return g + ((cond_of[src.id], _SWITCH_SIDE[slot]),)
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
        stateful = any(st.item.stateful for st in kernel_steps([inner]))
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
                stmt = KernelStep(it, tuple(nest.slot_of(s, k) for s, k in ins), base,
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
    (t, k_t), (f, k_f) = merge_select((nest.slot_of(*ins[0]), nest.slot_of(*ins[1])),
                                      (ga[-1][1], gb[-1][1]))
    g = guard[it.id] = ga[:-1]
    stmts = [Select(vs, pred, t, f)]
    if read_ix:
        stmts.append(Select(ix, pred, nest.index_slot(k_t), nest.index_slot(k_f)))
    u = units[it.id] = _Unit(it.id, it.id, g, stmts, False)
    # a Merge's control inputs only order it (TensorFlow ignores their deadness)
    u.deps = {unit_of(s) for s, _k in ins} | {unit_of(c) for c in ctl}
    u.deps.discard(None)


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
