"""Pass ``dead_branches``: a cond whose predicate is a constant keeps only its live side.

For a ``Switch(data, pred)`` with a constant ``pred`` (a Const that is not fed; a loop's Switch
reads a LoopCond and never qualifies), the untaken output is dead on every run. The Switches
reading one predicate (one cond) are resolved together. Deadness is
propagated forward exactly as the executor does: a node with a dead data or control input is
dead, except a Merge, which is dead only when all its data inputs are dead (and ignores the
deadness of control inputs). Every dead node is deleted; a surviving Merge loses its dead inputs
and, left with one, becomes an Identity of it; the Switch becomes ``Identity(data)`` waiting
for the predicate's producer, and readers of its live output read that Identity.

A while loop on the dead side is dead as a whole when every one of its Enters is: all of it
(nested loops too) goes, and deadness continues from its Exits. The rewrite is skipped when the
dead region reaches a fetched, target, fed or Placeholder node (a fetch of a dead tensor must
keep failing; a feed would revive it), a loop only some of whose Enters are dead, or a Merge
whose ``value_index`` output is read (dropping inputs renumbers it).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from ..frames import (
    ENTER_OPS,
    EXIT_OPS,
    LOOP_COND_OPS,
    MERGE_OPS,
    NEXT_ITERATION_OPS,
    FrameAnalysis,
    analyze_frames,
)
from ..graph import Graph, without_gc
from .common import Editor, PassOptions, Protected, attr_type, const_value, is_const

LOOP_OPS = ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS | LOOP_COND_OPS


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    if not any(n.op == "Switch" for n in graph.nodes):
        return ed.finish()      # no cond: nothing to resolve (and no frames to analyze)
    prot = Protected(graph, options)
    fa = analyze_frames(graph)
    # the Switches of one cond share its predicate: resolve them together (a loop in a branch
    # is dead only when all its Enters are, and they hang off different Switches)
    groups: dict[str, list[tuple[str, int]]] = {}
    for node in graph.topological_order():
        nd = ed.get(node.name)
        if nd is None or nd.op != "Switch" or prot.keeps_name(nd.name) \
                or attr_type(nd) is None:
            continue
        data = ed.data_inputs(nd.name)
        if len(data) != 2 or data[1][1] != 0 or not is_const(ed, prot, data[1][0]):
            continue
        pred = const_value(ed.get(data[1][0]))
        if pred is None or pred.dtype != np.bool_ or pred.shape != ():   # the kernel's rule
            continue
        groups.setdefault(data[1][0], []).append((nd.name, 1 if bool(pred) else 0))
    for switches in groups.values():
        if not _resolve(ed, prot, fa, switches):
            for one in switches:
                _resolve(ed, prot, fa, [one])
    return ed.finish()


def _resolve(ed: Editor, prot: Protected, fa: FrameAnalysis, switches: list[tuple[str, int]]
             ) -> bool:
    switches = [(sw, live) for sw, live in switches if ed.op(sw) == "Switch"]
    if not switches:
        return False
    plan = _dead_region(ed, prot, fa, [(sw, 1 - live) for sw, live in switches])
    if plan is None:
        return False
    dead, merge_dead = plan
    # surviving Merges drop their dead inputs
    for m, ks in merge_dead.items():
        if m in dead:
            continue
        data = [t for k, t in enumerate(ed.data_inputs(m)) if k not in ks]
        controls = [c for c in ed.control_inputs(m) if c not in dead]
        nd = ed.get(m)
        if len(data) == 1:
            t = attr_type(nd)
            nd.op = "Identity"
            nd.attr.clear()
            nd.attr["T"].type = t
        else:
            nd.attr["N"].i = len(data)
        ed.set_inputs(m, data, controls)
    # control edges from dead nodes into live Merges just go away (a Merge ignores them)
    for name in dead:
        for r in ed.control_readers(name):
            if r not in dead:
                ed.set_inputs(r, ed.data_inputs(r), [c for c in ed.control_inputs(r)
                                                     if c not in dead])
    for name in dead:
        ed.remove(name)
    # each Switch forwards its data; readers of the live side read that
    for sw_name, live in switches:
        if sw_name in dead:
            continue
        sw = ed.get(sw_name)
        data, pred = ed.data_inputs(sw_name)
        ed.replace_tensor((sw_name, live), (sw_name, 0))
        t = attr_type(sw)
        sw.op = "Identity"
        sw.attr.clear()
        sw.attr["T"].type = t
        ed.set_inputs(sw_name, [data], [*ed.control_inputs(sw_name), pred[0]])
    return True


def _dead_region(ed: Editor, prot: Protected, fa: FrameAnalysis,
                 seeds: list[tuple[str, int]]) -> tuple[set[str], dict[str, set[int]]] | None:
    """Nodes dead on every run, and for each Merge reached the data inputs that are dead;
    None when the rewrite must not happen."""
    dead: set[str] = set()
    merge_dead: dict[str, set[int]] = {}
    dead_enters: dict[str, set[str]] = {}    # loop frame -> its Enters found dead
    queue: deque[str] = deque()

    def kill(name: str, whole_loop: bool = False) -> bool:
        if name in dead:
            return True
        nd = ed.get(name)
        if nd is None or prot.keeps_name(name) or prot.pinned(name):
            return False
        if nd.op in LOOP_OPS and not whole_loop:
            if nd.op not in ENTER_OPS or "frame_name" not in nd.attr:
                return False
            # the loop dies only if every one of its Enters does: decided below
            dead.add(name)
            dead_enters.setdefault(nd.attr["frame_name"].s.decode(), set()).add(name)
            return True
        dead.add(name)
        queue.append(name)
        return True

    def dead_data_edge(reader: str, k: int) -> bool:
        if ed.op(reader) in MERGE_OPS:
            ks = merge_dead.setdefault(reader, set())
            ks.add(k)
            if len(ks) == len(ed.data_inputs(reader)):
                return kill(reader)
            return True
        return kill(reader)

    def drain() -> bool:
        while queue:
            name = queue.popleft()
            for r, k in ed.data_readers(name):
                if not dead_data_edge(r, k):
                    return False
            for r in ed.control_readers(name):
                if ed.op(r) in MERGE_OPS:
                    continue  # a Merge ignores the deadness of its control inputs
                if not kill(r):
                    return False
        return True

    for switch, dead_slot in seeds:
        for r, k in ed.data_readers(switch, dead_slot):
            if not dead_data_edge(r, k):
                return None
    if not drain():
        return None
    # a loop all of whose Enters are dead never runs: all of it, nested loops included, is
    # dead, and so is whatever reads its Exits
    done: set[str] = set()
    while set(dead_enters) - done:
        for frame in sorted(set(dead_enters) - done):
            done.add(frame)
            f = fa.frames.get(frame)
            if f is None or any(e in ed and e not in dead for e in f.enters):
                return None
            for member in _frame_nodes(fa, frame):
                if member in ed and not kill(member, whole_loop=True):
                    return None
        if not drain():
            return None
    for m in merge_dead:
        if m not in dead and ed.data_readers(m, 1):
            return None  # value_index is read: dropping inputs would renumber it
        if m not in dead and ed.get(m).op != "Merge":
            return None  # RefMerge: leave refs alone
    return dead, merge_dead


def _frame_nodes(fa: FrameAnalysis, frame: str) -> list[str]:
    """Every node scheduled in ``frame`` or in a loop nested in it."""
    f = fa.frames[frame]
    out = list(f.nodes)
    for child in f.children:
        out.extend(_frame_nodes(fa, child))
    return out
