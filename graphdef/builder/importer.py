"""A GraphDef back into a builder ``Graph`` (``import_graph_def``), and ``unroll_loops``: the
same program with every while loop of static trip count unrolled, so that ``gradients`` can
differentiate it.

Why unrolling, not TensorFlow's backward loop: TensorFlow v1 differentiates a while loop by
building a second loop that pops the forward values from stacks pushed by the first. For a
loop whose trip count is known when the graph is built, unrolling gives the same values with
a straight-line backward graph (no stacks, no second frame), which every dfg tool can read and
the executor runs without frames. Limits: only loops ``graphdef/unroll.py`` accepts (innermost
loops of static trip count, no stateful body ops; an outer loop is unrolled once its inner
loops are); the node names of the backward graph are not TensorFlow's (its backward loop has
no counterpart); loops with a data-dependent trip count are refused with the unroll error.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..graph import CONTROL_SLOT, parse_input
from .core import Graph, Operation


def import_graph_def(graph_def: Any, graph: Graph | None = None) -> Graph:
    """Rebuild ``graph_def``'s nodes (names, inputs, attrs, devices kept) in a builder Graph;
    static shapes are inferred again. Nodes may come in any order (loops included)."""
    g = graph or Graph()
    nodes = {n.name: n for n in graph_def.node}
    made: dict[str, Operation] = {}
    pending_back: list[tuple[Operation, int, str]] = []
    visiting: set[str] = set()

    def make(name: str) -> Operation:
        if name in made:
            return made[name]
        if name not in nodes:
            raise InvalidArgumentError(f"input '{name}' names no node", node=name)
        n = nodes[name]
        visiting.add(name)
        inputs, controls = [], []
        back: list[tuple[int, str]] = []
        for i, s in enumerate(n.input):
            src, idx = parse_input(s)
            if idx == CONTROL_SLOT:
                controls.append(src)
                continue
            # a loop's back edge (Merge <- NextIteration) is wired once its source exists
            if n.op in ("Merge", "RefMerge") and src in nodes and \
                    nodes[src].op in ("NextIteration", "RefNextIteration") and src not in made:
                back.append((i, s))
                inputs.append(None)
                continue
            inputs.append(make(src).outputs[idx])
        # until then the Merge reads its Enter twice (same dtype)
        filler = next(t for t in inputs if t is not None) if back else None
        op = g.create_op(n.op, [t if t is not None else filler for t in inputs],
                         dict(n.attr), name=n.name + "/")
        op.device = n.device
        g._names_in_use[n.name.lower()] = 1
        for i, s in back:
            pending_back.append((op, i, s))
        made[name] = op
        visiting.discard(name)
        for c in controls:
            op._add_control_input(make(c))
        return op

    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * len(nodes) + 1000))   # one frame per chain link
    try:
        for n in graph_def.node:
            make(n.name)
    finally:
        sys.setrecursionlimit(limit)
    for op, i, s in pending_back:
        src, idx = parse_input(s)
        op.inputs[i] = made[src].outputs[idx]
    # keep the GraphDef's node order (create_op appended in dependency order)
    order = {n.name: k for k, n in enumerate(graph_def.node)}
    g.ops.sort(key=lambda o: order.get(o.name, len(order)))
    return g


def unroll_loops(graph: Graph) -> Graph:
    """A new builder Graph: ``graph`` with every while loop unrolled to its static trip
    count (innermost first), via ``graphdef/unroll.py``. Tensors keep their names (an Exit
    becomes an Identity of the same name), so ``new.get_tensor_by_name(t.name)`` finds them."""
    from ..frames import analyze_frames
    from ..graph import Graph as GView
    from ..unroll import unroll
    gd = graph.as_graph_def()
    while True:
        fa = analyze_frames(GView(gd))
        loops = [f for f in fa.loop_frames() if not f.children]
        if not loops:
            break
        gd = unroll(gd, loops[-1].name)
    return import_graph_def(gd)


__all__ = ["import_graph_def", "unroll_loops"]
