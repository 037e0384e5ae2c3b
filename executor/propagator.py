"""Per-run state: where values wait, what is pending, which frames and iterations are alive.

A tagged node is a tuple ``(item, frame, iteration, is_dead)``; the scheduler takes a node's
inputs from ``iteration.inputs`` (and clears them, so a tensor dies with its last reader).
Propagators are touched only by the scheduling thread of their run (workers just run
kernels), so they need no locks.

``SimplePropagator`` serves graphs without control flow: one pending-count array, one input
array, no deadness. ``FramePropagator`` models TensorFlow's frames: a frame instance is created
on the first Enter of (parent frame, parent iteration, frame_name); each iteration has its own
pending counts, dead counts and input slots; NextIteration starts the next iteration (at most
``parallel_iterations`` alive, later ones deferred); constant Enters are visible to every
iteration; Exit returns to the parent; a finished iteration or frame is freed.
"""

from __future__ import annotations

from typing import Any

from dfg.graphdef.frames import ROOT

from .plan import CF_ENTER, CF_EXIT, CF_NONE, CF_PROGRAM, FrameLayout, NodeItem, Plan


class SimplePropagator:
    """No frames, no dead tensors: the fast path."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.it = IterationState(0, plan.frames[ROOT])  # the one and only iteration

    def start(self, feed_values: dict) -> list[tuple]:
        it = self.it
        for key, edges in self.plan.feed_edges.items():
            v = feed_values[key]
            for item, k in edges:
                it.inputs[item.in_offset + k] = v
        return [(item, None, it, False) for item in self.plan.initial_ready]

    def propagate(self, tagged: tuple, outputs: Any, ready: Any) -> None:
        """Deliver ``outputs`` (None: dead) to consumers; append newly ready ones to ``ready``."""
        item = tagged[0]
        it = tagged[2]
        pending = it.pending
        inputs = it.inputs
        for dst, idx, slot in item.out_data:
            inputs[idx] = outputs[slot]
            lid = dst.local_id
            p = pending[lid] - 1
            pending[lid] = p
            if not p:
                ready.append((dst, None, it, False))
        for dst in item.out_control:
            lid = dst.local_id
            p = pending[lid] - 1
            pending[lid] = p
            if not p:
                ready.append((dst, None, it, False))

    def waiting(self, plan: Plan) -> list[tuple[NodeItem, list[str]]]:
        """Items that never became ready, with the inputs each still waits for."""
        return _waiting(plan, plan.frames[ROOT], self.it.pending, self.it.inputs)


def _waiting(plan: Plan, lay: FrameLayout, pending: list[int], inputs: list[Any]
             ) -> list[tuple[NodeItem, list[str]]]:
    """Items of ``lay`` whose pending count never reached zero, each with its inputs that
    come from other stuck items and never arrived (linear: the plan's in-edges)."""
    stuck_ids = {it.id for it in lay.items if pending[it.local_id] > 0}
    out = []
    for it in lay.items:
        if it.id not in stuck_ids:
            continue
        waits = []
        for k, src in enumerate(plan.inputs.get(it.id, ())):
            if src is not None and src[0].id in stuck_ids and inputs[it.in_offset + k] is None:
                waits.append(f"{src[0].name}:{src[1]}")
        waits += [f"^{c.name}" for c in plan.controls.get(it.id, ()) if c.id in stuck_ids]
        out.append((it, waits))
    return out


class IterationState:
    __slots__ = ("iter_num", "pending", "dead", "inputs", "outstanding_ops",
                 "outstanding_frames")

    def __init__(self, iter_num: int, lay: FrameLayout) -> None:
        self.iter_num = iter_num
        self.pending = lay.pending_template[:]
        self.dead = [0] * len(lay.items)
        self.inputs: list[Any] = [None] * lay.num_inputs
        self.outstanding_ops = 0
        self.outstanding_frames = 0


class FrameState:
    __slots__ = ("key", "layout", "parent", "parent_iter", "iterations", "iteration_count",
                 "num_outstanding_iterations", "max_parallel", "num_pending_inputs",
                 "inv_values", "next_iter_roots", "dead_exits", "live_exits", "children",
                 "program_enters")

    def __init__(self, key: Any, layout: FrameLayout, parent: FrameState | None,
                 parent_iter: IterationState | None) -> None:
        self.key = key
        self.layout = layout
        self.parent = parent
        self.parent_iter = parent_iter
        self.iterations: dict[int, IterationState] = {0: IterationState(0, layout)}
        self.iteration_count = 0
        self.num_outstanding_iterations = 1
        self.max_parallel = layout.parallel_iterations if parent is not None else 1
        self.num_pending_inputs = layout.num_enters
        self.inv_values: list[tuple[NodeItem, Any]] = []
        self.next_iter_roots: list[tuple[NodeItem, Any]] = []
        self.dead_exits: set[int] = set()
        self.live_exits: set[int] = set()
        self.children: dict[tuple[int, str], FrameState] = {}
        # when the frame runs as its loop program: the Enters that arrived, as
        # (item, outputs, is_dead), until all have; else None
        self.program_enters: list[tuple[NodeItem, Any, bool]] | None = None


class FramePropagator:
    """Frames and iterations, TensorFlow's way (see the module docstring).

    ``programs``: whether a frame instance with a compiled loop nest runs as its loop program
    (programs.py): "auto" when all its kernels are known to be cheap (so running it as one
    unit costs no parallelism), "always", or "never"."""

    def __init__(self, plan: Plan, programs: str = "auto") -> None:
        self.plan = plan
        self.programs = programs
        self.root = FrameState(ROOT, plan.frames[ROOT], None, None)
        self.live_frames: set[int] = set()

    def start(self, feed_values: dict) -> list[tuple]:
        it = self.root.iterations[0]
        for key, edges in self.plan.feed_edges.items():
            v = feed_values[key]
            for item, k in edges:
                it.inputs[item.in_offset + k] = v
        ready = [(item, self.root, it, False) for item in self.plan.initial_ready]
        it.outstanding_ops += len(ready)
        return ready

    # --- activation -----------------------------------------------------------------------
    def _activate(self, item: NodeItem, outputs: Any, frame: FrameState,
                  it: IterationState, is_dead: bool, ready: Any) -> None:
        pending, dead, inputs = it.pending, it.dead, it.inputs
        added = 0
        for dst, idx, slot in item.out_data:
            value = None if is_dead else outputs[slot]
            lid = dst.local_id
            if dst.is_merge:
                if value is not None:
                    p = pending[lid]
                    if p & 1:  # first live data input: take it
                        inputs[idx] = value
                        p -= 1
                        pending[lid] = p
                        if p == 0:
                            ready.append((dst, frame, it, False))
                            added += 1
                else:
                    d = dead[lid] + 1
                    dead[lid] = d
                    # a dead Enter kills the loop's Merge: a loop on an untaken cond branch
                    if (d == dst.num_inputs or item.is_enter) and pending[lid] == 1:
                        pending[lid] = -1  # fired (dead); nothing may fire it again
                        ready.append((dst, frame, it, True))
                        added += 1
            else:
                if value is None:
                    dead[lid] += 1
                else:
                    inputs[idx] = value
                p = pending[lid] - 1
                pending[lid] = p
                if p == 0:
                    ready.append((dst, frame, it, dead[lid] > 0 and not dst.is_control_trigger))
                    added += 1
        for dst in item.out_control:
            lid = dst.local_id
            if dst.is_merge:
                p = pending[lid] - 2
                pending[lid] = p
                if p == 0 or (p == 1 and dead[lid] == dst.num_inputs):
                    ready.append((dst, frame, it, p == 1))
                    added += 1
            else:
                if is_dead:
                    dead[lid] += 1
                p = pending[lid] - 1
                pending[lid] = p
                if p == 0:
                    ready.append((dst, frame, it, dead[lid] > 0 and not dst.is_control_trigger))
                    added += 1
        it.outstanding_ops += added

    def propagate(self, tagged: tuple, outputs: Any, ready: Any) -> None:
        item, frame, it, is_dead = tagged
        kind = item.cf_kind
        if kind == CF_NONE:
            self._activate(item, outputs, frame, it, is_dead, ready)
        elif kind == CF_ENTER:
            child = self._child_frame(frame, it, item)
            if child.program_enters is not None:
                child.program_enters.append((item, outputs, is_dead))
                child.num_pending_inputs -= 1
                if child.num_pending_inputs == 0:
                    self._start_program(child, ready)
            else:
                self._enter(child, item, outputs, is_dead, ready)
                child.num_pending_inputs -= 1
                if child.num_pending_inputs == 0:
                    # every Enter arrived: iteration 0 may already be complete (all dead)
                    self._cleanup(child, child.iterations[0], ready)
        elif kind == CF_PROGRAM:
            # the program ran the whole loop: the Exits forward its results to the parent
            added = 0
            for exit_item, value in zip(frame.layout.program.exits, outputs):
                it.inputs[exit_item.in_offset] = value
                ready.append((exit_item, frame, it, False))
                added += 1
            it.outstanding_ops += added
        elif kind == CF_EXIT:
            if is_dead:
                frame.dead_exits.add(item.id)
            else:
                frame.live_exits.add(item.id)
                self._activate(item, outputs, frame.parent, frame.parent_iter, False, ready)
        elif not is_dead:  # NextIteration
            if it.iter_num == frame.iteration_count \
                    and frame.num_outstanding_iterations >= frame.max_parallel:
                frame.next_iter_roots.append((item, outputs))
            else:
                if it.iter_num == frame.iteration_count:
                    self._increment_iteration(frame, ready)
                nxt = frame.iterations[it.iter_num + 1]
                self._activate(item, outputs, frame, nxt, False, ready)
        it.outstanding_ops -= 1
        if it.outstanding_ops == 0:
            self._cleanup(frame, it, ready)

    def _enter(self, child: FrameState, item: NodeItem, outputs: Any, is_dead: bool,
               ready: Any) -> None:
        if item.is_constant_enter:
            value = None if is_dead else outputs
            child.inv_values.append((item, value))
            for citer in list(child.iterations.values()):
                self._activate(item, value, child, citer, is_dead, ready)
        else:
            self._activate(item, outputs, child, child.iterations[0], is_dead, ready)

    def _start_program(self, child: FrameState, ready: Any) -> None:
        """Every Enter of a program frame arrived: run the program, or if any Enter is dead
        (a loop on an untaken cond branch), replay them into the node-by-node machinery."""
        arrived, child.program_enters = child.program_enters or [], None
        cit = child.iterations[0]
        if any(dead for _i, _o, dead in arrived):
            for item, outputs, dead in arrived:
                self._enter(child, item, outputs, dead, ready)
            self._cleanup(child, cit, ready)
            return
        prog = child.layout.program
        pos = {e.id: k for k, e in enumerate(prog.enters)}
        for item, outputs, _dead in arrived:
            cit.inputs[prog.item.in_offset + pos[item.id]] = outputs[0]
        ready.append((prog.item, child, cit, False))
        cit.outstanding_ops += 1

    # --- frames and iterations --------------------------------------------------------------
    def _child_frame(self, frame: FrameState, it: IterationState, enter: NodeItem) -> FrameState:
        key = (it.iter_num, enter.enter_frame)
        child = frame.children.get(key)
        if child is None:
            lay = self.plan.frames[enter.enter_frame]
            child = FrameState(key, lay, frame, it)
            child.max_parallel = enter.parallel_iterations
            prog = lay.program
            if prog is not None and (self.programs == "always" or (
                    self.programs == "auto" and prog.runs())):
                child.program_enters = []
            frame.children[key] = child
            it.outstanding_frames += 1
            self.live_frames.add(id(child))
        return child

    def _increment_iteration(self, frame: FrameState, ready: Any) -> None:
        frame.iteration_count += 1
        n = frame.iteration_count
        it = frame.iterations[n] = IterationState(n, frame.layout)
        frame.num_outstanding_iterations += 1
        if frame.next_iter_roots:
            roots, frame.next_iter_roots = frame.next_iter_roots, []
            for item, outputs in roots:
                self._activate(item, outputs, frame, it, False, ready)
        for item, value in frame.inv_values:
            self._activate(item, value, frame, it, value is None, ready)

    def _iteration_done(self, frame: FrameState, it: IterationState) -> bool:
        if it.outstanding_ops or it.outstanding_frames:
            return False
        if it.iter_num == 0:
            return frame.num_pending_inputs == 0
        return (it.iter_num - 1) not in frame.iterations

    def _cleanup(self, frame: FrameState, it: IterationState, ready: Any) -> None:
        if frame.parent is None:
            return  # the root frame lives as long as the run
        cur = it.iter_num
        while cur <= frame.iteration_count and self._iteration_done(frame, it):
            del frame.iterations[cur]
            frame.num_outstanding_iterations -= 1
            cur += 1
            if frame.next_iter_roots:
                self._increment_iteration(frame, ready)
            if cur > frame.iteration_count or cur not in frame.iterations:
                break
            it = frame.iterations[cur]
        if frame.num_pending_inputs == 0 and frame.num_outstanding_iterations == 0:
            self._delete_frame(frame, ready)

    def _delete_frame(self, frame: FrameState, ready: Any) -> None:
        parent, pit = frame.parent, frame.parent_iter
        # Exits that only ever saw dead values tell the parent their outputs are dead
        # (how a loop on the untaken branch of a cond finishes).
        for item in frame.layout.exits:
            if item.id in frame.dead_exits and item.id not in frame.live_exits:
                self._activate(item, None, parent, pit, True, ready)
        del parent.children[frame.key]
        self.live_frames.discard(id(frame))
        pit.outstanding_frames -= 1
        if pit.outstanding_ops == 0 and pit.outstanding_frames == 0:
            self._cleanup(parent, pit, ready)

    def waiting(self, plan: Plan) -> list[tuple[NodeItem, list[str]]]:
        it = self.root.iterations[0]
        return _waiting(plan, plan.frames[ROOT], it.pending, it.inputs)
