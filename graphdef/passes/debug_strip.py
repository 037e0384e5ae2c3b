"""Pass ``debug_strip`` (opt-in: not in the default list): remove Assert, CheckNumerics,
Print and PrintV2.

These only check or log; without them a failing Assert no longer fails the run, which is the
point, and why the pass must be asked for. Readers of a forwarding node's output 0 (Print,
CheckNumerics) read its input 0 instead; everything that waited for the node (control
readers) waits for the producers of its inputs and for its control inputs, so ordering and
deadness survive.

A control edge from a Switch is live even when the Switch output read is dead, so when an
input comes from a Switch (an Assert inside a cond guard) and something still depends on the
node, it becomes an ``IdentityN`` of its inputs instead: it forwards, is dead exactly when the
original was, and never fails. A fetched or target node also becomes that ``IdentityN``, keeping
its name.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes as D
from ..graph import Graph, without_gc
from ..op_sets import DEAD_OUTPUT_OPS
from .common import Editor, PassOptions, Protected, input_types

DEBUG_OPS = frozenset({"Assert", "CheckNumerics", "CheckNumericsV2", "Print", "PrintV2"})
FORWARDS = frozenset({"CheckNumerics", "CheckNumericsV2", "Print"})   # output 0 = input 0


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    for node in graph.topological_order():
        nd = ed.get(node.name)
        if nd is None or nd.op not in DEBUG_OPS or prot.pinned(nd.name):
            continue
        _strip(ed, prot, nd)
    return ed.finish()


def _strip(ed: Editor, prot: Protected, nd: Any) -> None:
    name = nd.name
    data = ed.data_inputs(name)
    controls = ed.control_inputs(name)
    types = input_types(nd)
    if types is None or any(D.is_ref(t) for t in types) or len(types) != len(data):
        return
    srcs = [src for src, _ in data]
    extra = srcs[1:] if nd.op in FORWARDS else srcs      # deadness the readers must inherit
    needed = bool(ed.control_readers(name)) or bool(extra) and bool(ed.data_readers(name))
    from_switch = any(ed.op(s) in DEAD_OUTPUT_OPS for s in (extra if not ed.control_readers(name)
                                                         else srcs))
    if prot.keeps_name(name) or (needed and from_switch) or not data and ed.readers.get(name):
        _to_identity_n(ed, nd, data, controls, types)
        return
    if nd.op in FORWARDS:
        ed.replace_tensor((name, 0), data[0], [*controls, *extra])
    ed.replace_control(name, [*srcs, *controls])
    ed.remove(name)


def _to_identity_n(ed: Editor, nd: Any, data: list[tuple[str, int]], controls: list[str],
                   types: list[int]) -> None:
    if not data:
        nd.op = "NoOp"
        nd.attr.clear()
    else:
        nd.op = "IdentityN"
        nd.attr.clear()
        nd.attr["T"].list.type.extend(D.base(t) for t in types)
    ed.set_inputs(nd.name, data, controls)
