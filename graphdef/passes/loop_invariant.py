"""Pass ``loop_invariant``: compute loop-invariant values once, outside the loop.

A node inside a while-loop frame whose data inputs all come from constant Enters of that frame
(``is_constant: true``, the loop reading an outer tensor) or from nodes hoisted before it, and
which has no control input, computes the same value in every iteration. A copy of it
(``node/_hoisted``) is placed in the parent frame reading the outer tensors directly, and the
node itself becomes a constant Enter of that copy, so its in-loop readers are unchanged. A
hoisted node read only by other hoisted nodes disappears.

Such a node has no control input and reads only constant Enters, so it is live in every
iteration, like the Enter replacing it: deadness does not change. Only stateless, single-output
ops on plain values move, and never integer division or modulo (a loop that runs zero times must
not start failing on a division by zero it never did). Otherwise a hoisted node runs once even
when the loop runs zero times, as with TensorFlow's loop optimizer.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes as D
from ..frames import ROOT, analyze_frames
from ..graph import Graph, without_gc
from .common import (
    Editor,
    PassOptions,
    Protected,
    attr,
    input_types,
    is_control_flow,
    is_stateful,
    make_constant_enter,
    output_types,
    plain_types,
)

INT_DIVISION = frozenset({"Div", "FloorDiv", "FloorMod", "TruncateDiv", "TruncateMod", "Mod",
                          "DivNoNan", "Reciprocal", "Inv", "Pow"})


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    from dfg.schemas import node_def_pb2

    ed = Editor(graph)
    prot = Protected(graph, options)
    # in-loop tensor -> (frame it lives in, the outer tensor with the same value)
    outer: dict[tuple[str, int], tuple[str, tuple[str, int]]] = {}
    for node in graph.nodes:
        const_attr, frame_attr = attr(node.proto, "is_constant"), attr(node.proto, "frame_name")
        if node.op == "Enter" and const_attr is not None and const_attr.b \
                and frame_attr is not None and len(node.inputs) == 1 \
                and not node.control_inputs and not prot.is_fed(node.name):
            frame = frame_attr.s.decode("utf-8", "replace")
            outer[(node.name, 0)] = (frame, node.inputs[0])
    if not outer:
        return ed.finish()      # no constant Enter: nothing can be hoisted
    fa = analyze_frames(graph)
    hoisted: list[tuple[str, str]] = []     # (node, frame), in topological order
    for node in graph.topological_order():
        name = node.name
        nd = ed.get(name)
        frame = fa.node_frame.get(name)
        if nd is None or frame in (None, ROOT) or not _movable(prot, nd):
            continue
        data = ed.data_inputs(name)
        if not data or ed.control_inputs(name):
            continue
        if not all(outer.get(t, ("",))[0] == frame for t in data):
            continue
        copy = node_def_pb2.NodeDef()
        copy.CopyFrom(nd)
        copy.name = ed.unique_name(f"{name}/_hoisted")
        del copy.input[:]
        ed.add(copy, before=name)
        ed.set_inputs(copy.name, [outer[t][1] for t in data])
        outer[(name, 0)] = (frame, (copy.name, 0))
        hoisted.append((name, frame))
    # latest first: a hoisted node read only by hoisted nodes goes, the others become Enters
    for name, frame in reversed(hoisted):
        if not ed.readers.get(name):
            ed.remove(name)
            continue
        nd = ed.get(name)
        make_constant_enter(ed, fa, nd, (output_types(nd) or [D.DT_INVALID])[0], frame)
        ed.set_inputs(name, [outer[(name, 0)][1]])
    return ed.finish()


def _movable(prot: Protected, nd: Any) -> bool:
    if prot.keeps_name(nd.name) or prot.pinned(nd.name):
        return False
    if is_control_flow(nd.op) or is_stateful(nd.op) or nd.op in ("Const", "NoOp"):
        return False
    types = output_types(nd)
    if types is None or len(types) != 1 or not plain_types(types):
        return False
    ins = input_types(nd)
    if not plain_types(ins):
        return False
    if nd.op in INT_DIVISION and any(D.base(t) in D.INTEGER for t in ins or ()):
        return False
    return True
