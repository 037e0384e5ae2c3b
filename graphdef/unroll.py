"""Unroll a while loop: replace its frame by N copies of its body chained in a straight line.

``unroll(graph, frame, times=None)`` works on the innermost loops of the v1 shape
(Enter -> Merge -> Switch -> Identity ... NextIteration, Exit): copy ``k`` of body node ``n``
is ``n/unroll_k``; its loop variables are copy ``k-1``'s next values (the Enters' inputs for
``k = 0``); loop constants (constant Enters) become their outer tensors; each Exit becomes an
Identity of the same name reading the last copy, so every consumer is unchanged.

Refused, with the reason: a frame that is not there, a frame with loops inside its body, a
body with stateful ops (assignments, random numbers, TensorArrays: unrolling could reorder
them), and a trip count that is neither static nor given. The trip count is static when the
predicate is ``i < limit`` / ``i <= limit`` / ``i > limit`` / ``i >= limit`` / ``i != limit``
with ``i`` starting at a Const, stepping by a Const, and ``limit`` a Const.
"""

from __future__ import annotations

import math
from typing import Any

from . import attrs as A
from .errors import InvalidArgumentError, NotFoundError, UnimplementedError
from .frames import CONTROL_FLOW_OPS, ENTER_OPS, EXIT_OPS, SWITCH_OPS, analyze_frames
from .graph import Graph, input_string, parse_input
from .opdefs.registry import registry


def _const(g: Graph, name: str) -> Any:
    """The scalar value of a Const (seen through Identity and constant Enters), else None."""
    seen = 0
    node = g.get(name)
    while node is not None and seen < 16:
        if node.op == "Const":
            v = A.to_python(node.attr["value"])
            return v.item() if getattr(v, "size", 0) == 1 else None
        if node.op in ("Identity", *ENTER_OPS) and node.inputs:
            if node.op in ENTER_OPS and not node.attr["is_constant"].b:
                return None
            node = g.get(node.inputs[0][0])
            seen += 1
            continue
        return None
    return None


def static_trip_count(g: Graph, frame: Any, loop: list[dict]) -> tuple[int | None, str]:
    """(count, why-not) for the loop's predicate."""
    if len(frame.loop_conds) != 1:
        return None, "the frame has no single LoopCond"
    pred = g.node(g.node(frame.loop_conds[0]).inputs[0][0])
    ops = {"Less": lambda a, b: a < b, "LessEqual": lambda a, b: a <= b,
           "Greater": lambda a, b: a > b, "GreaterEqual": lambda a, b: a >= b,
           "NotEqual": lambda a, b: a != b}
    if pred.op not in ops or len(pred.inputs) != 2:
        return None, f"the predicate is {pred.op}, not a comparison of a counter"
    by_merge = {v["merge"]: v for v in loop}
    (a, a_slot), (b, _) = pred.inputs
    var = by_merge.get(a) if a_slot == 0 else None
    if var is None:
        return None, "the predicate does not compare a loop variable"
    limit = _const(g, b)
    init = _const(g, g.node(var["enter"]).inputs[0][0])
    nxt = g.node(g.node(var["next"]).inputs[0][0])
    step = None
    if nxt.op in ("Add", "AddV2", "Sub") and len(nxt.inputs) == 2:
        src = g.node(nxt.inputs[0][0])
        if (src.op == "Identity" and src.inputs and src.inputs[0] == (var["switch"], 1)) or \
                nxt.inputs[0] == (var["switch"], 1):
            step = _const(g, nxt.inputs[1][0])
            if step is not None and nxt.op == "Sub":
                step = -step
    if limit is None or init is None or step is None:
        return None, "the counter's start, step or limit is not a constant"
    cmp = ops[pred.op]
    if step == 0 or not all(isinstance(x, (int, float)) for x in (limit, init, step)):
        return None, "the counter does not move"
    # count iterations arithmetically, then confirm at the boundary (cheap, exact for ints)
    n = max(0, math.ceil((limit - init) / step)) if pred.op in ("Less", "Greater",
                                                               "NotEqual") else \
        max(0, math.floor((limit - init) / step) + 1)
    if not (all(cmp(init + k * step, limit) for k in (0, n - 1)) if n else True) or \
            cmp(init + n * step, limit):
        return None, "the counter never reaches the limit"
    return n, ""


def unroll(graph: Any, frame_name: str, times: int | None = None) -> Any:
    """A new GraphDef with the loop ``frame_name`` unrolled ``times`` times (default: its
    static trip count)."""
    from dfg.schemas import graph_pb2
    g = graph if isinstance(graph, Graph) else Graph(graph)
    fa = analyze_frames(g)
    frames = [f.name for f in fa.loop_frames()]
    if frame_name not in fa.frames or frame_name == "":
        raise NotFoundError(f"no while-loop frame named '{frame_name}' (frames: "
                            f"{', '.join(frames) or 'none'})")
    frame = fa.frames[frame_name]
    if frame.children:
        raise UnimplementedError(
            f"frame '{frame_name}' has loops inside its body ({', '.join(frame.children)}); "
            "unroll those first")
    in_frame = set(frame.nodes)
    for n in frame.nodes:
        node = g.node(n)
        opdef = registry().get(node.op)
        if node.op not in CONTROL_FLOW_OPS and opdef is not None and opdef.is_stateful:
            raise UnimplementedError(
                f"frame '{frame_name}' has a stateful op in its body: unrolling could "
                "reorder its effects", node=n, op=node.op)
    loop: list[dict] = []
    enters = set(frame.enters)
    for m in frame.merges:
        merge = g.node(m)
        if len(merge.inputs) != 2 or not any(s in enters for s, _ in merge.inputs):
            continue   # a cond's Merge inside the body: part of the body
        enter = merge.inputs[0][0]
        nxt = merge.inputs[1][0]
        if enter not in enters:
            enter, nxt = nxt, enter
        sw = [e.dst for e in g.consumers(m) if g.node(e.dst).op in SWITCH_OPS]
        if len(sw) != 1:
            raise UnimplementedError(f"loop variable '{m}' is not of the v1 while shape",
                                     node=m, op=merge.op)
        exits = [e.dst for e in g.consumers(sw[0], 0) if g.node(e.dst).op in EXIT_OPS]
        loop.append({"merge": m, "enter": enter, "next": nxt, "switch": sw[0],
                     "exit": exits[0] if exits else None})
    count, why = static_trip_count(g, frame, loop)
    if times is None:
        if count is None:
            raise InvalidArgumentError(
                f"the trip count of '{frame_name}' is not static ({why}); give --times")
        times = count
    elif count is not None and count != times:
        raise InvalidArgumentError(
            f"'{frame_name}' runs {count} times, not {times}: unrolling would change it")
    if times < 0:
        raise InvalidArgumentError(f"times must be >= 0, found {times}")

    # body: frame nodes that some NextIteration needs, but the loop's own structure
    structure = {v[k] for v in loop for k in ("merge", "switch", "next", "exit")}
    structure |= set(frame.loop_conds)
    body: set[str] = set()
    stack = [g.node(v["next"]).inputs[0][0] for v in loop]
    while stack:
        n = stack.pop()
        if n in body or n not in in_frame or n in structure:
            continue
        body.add(n)
        node = g.node(n)
        stack.extend(s for s, _ in node.inputs)
        stack.extend(node.control_inputs)
    order = [n.name for n in g.topological_order(body)]
    const_enters = {e: input_string(*g.node(e).inputs[0]) for e in frame.enters
                    if g.node(e).attr["is_constant"].b}
    cur = {v["merge"]: input_string(*g.node(v["enter"]).inputs[0]) for v in loop}
    out = graph_pb2.GraphDef()
    drop = in_frame | set(frame.enters)
    exits = {v["exit"]: v for v in loop if v["exit"]}
    for nd in g.graph_def.node:
        if nd.name not in drop:
            out.node.add().CopyFrom(nd)
    for k in range(times):
        # this iteration's loop variables, as read through Merge, Switch:1 or Identity
        vals: dict[tuple[str, int], str] = {}
        for v in loop:
            vals[(v["merge"], 0)] = cur[v["merge"]]
            vals[(v["switch"], 1)] = cur[v["merge"]]
        for e, t in const_enters.items():
            vals[(e, 0)] = t
        names = {n: f"{n}/unroll_{k}" for n in order}
        for n in order:
            nd = out.node.add()
            nd.CopyFrom(g.node(n).proto)
            nd.name = names[n]
            nd.attr.pop("_class", None)
            del nd.input[:]
            for s in g.node(n).proto.input:
                src, slot = parse_input(s)
                if slot < 0:
                    if src in names:
                        nd.input.append("^" + names[src])
                    elif src not in drop:
                        nd.input.append(s)
                    # a pivot edge (^while/Identity): ordering is now given by the data
                    continue
                if src in names:
                    nd.input.append(input_string(names[src], slot))
                elif (src, slot) in vals:
                    nd.input.append(vals[(src, slot)])
                elif src in drop:
                    raise UnimplementedError(
                        f"body node reads '{s}', which unrolling cannot map", node=n)
                else:
                    nd.input.append(s)
        new = {}
        for v in loop:
            src, slot = g.node(v["next"]).inputs[0]
            if src in names:
                new[v["merge"]] = input_string(names[src], slot)
            else:
                new[v["merge"]] = vals.get((src, slot), input_string(src, slot))
        cur = new
    for ex, v in exits.items():
        nd = out.node.add()
        nd.name = ex
        nd.op = "Identity"
        nd.device = g.node(ex).device
        nd.input.append(cur[v["merge"]])
        nd.attr["T"].CopyFrom(g.node(ex).attr["T"])
    out.versions.CopyFrom(g.graph_def.versions)
    if g.graph_def.HasField("library"):
        out.library.CopyFrom(g.graph_def.library)
    return out
