"""Pass ``identity_removal``: drop forwarding nodes and control edges that do nothing.

- Identity, StopGradient, Snapshot and IdentityN: readers read the forwarded tensor directly
  and also wait for the node's control inputs (deadness and ordering survive); its control
  readers wait for the forwarded tensor's producer instead. Kept when the node's name is
  fetched, a target or fed; when it reads a variable's ref (``w/read`` on a VariableV2 is *the*
  read of the variable) or reads any other ref and has more than one reader (each reader would
  then read the variable at its own time: values the graph could not produce before); when
  it crosses a frame or a device; when it reads a Switch output and has control readers
  (the pivot of a cond: ``^switch`` would be live on the untaken side, ``^pivot`` is not);
  and when it reads a fed tensor and has control readers (they would make the producer the
  feed cut off run).
- A fetched Identity whose input has no other reader takes over its producer: the producer's
  computation moves under the fetched name (one node instead of two).
- NoOp (not a target): its control readers wait for its control inputs instead, when that
  does not add edges (fan-in x fan-out <= fan-in + fan-out).
- A control edge from a Const without inputs is dropped: such a Const is in the root frame,
  never dead and never fails, so waiting for it means nothing.
"""

from __future__ import annotations

from typing import Any

from .. import dtypes as D
from ..frames import analyze_frames
from ..graph import Graph, without_gc
from ..op_sets import REF_VARIABLE_OPS
from .common import (
    Editor,
    PassOptions,
    Protected,
    is_control_flow,
    is_stateful,
    output_types,
    tensor_frame,
)

FORWARD_OPS = frozenset({"Identity", "StopGradient", "Snapshot"})


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    fa = analyze_frames(graph)
    for node in graph.topological_order():
        name = node.name
        nd = ed.peek(name)     # read-only: _absorb_producer takes its own copy
        if nd is None:
            continue
        _drop_constant_controls(ed, name)
        if nd.op in FORWARD_OPS:
            if prot.keeps_name(name):
                if name in prot.fetch_nodes and not prot.is_fed(name):
                    _absorb_producer(ed, prot, fa, nd)
            else:
                data = ed.data_inputs(name)
                # its control readers would wait for the producer of a fed tensor, which
                # the feed cut off: it would have to run after all (a fed _Recv would wait)
                if len(data) == 1 and _removable(ed, fa, nd, data) and not (
                        prot.is_fed(*data[0]) and ed.control_readers(name)):
                    ed.bypass(name, data[0])
        elif nd.op == "IdentityN" and not prot.keeps_name(name):
            _remove_identity_n(ed, fa, nd)
        elif nd.op == "NoOp" and not prot.keeps_name(name):
            _remove_noop(ed, name)
    return ed.finish()


def _drop_constant_controls(ed: Editor, name: str) -> None:
    ctl = ed.control_inputs(name)
    if not ctl:
        return
    keep = [c for c in ctl if not (ed.op(c) == "Const" and not ed.peek(c).input)]
    if len(keep) != len(ctl):
        ed.set_inputs(name, ed.data_inputs(name), keep)


def _removable(ed: Editor, fa: Any, nd: Any, inputs: list[tuple[str, int]]) -> bool:
    """Whether a forwarding node may be bypassed (see the module docstring)."""
    if not inputs:
        return False
    for src, slot in inputs:
        prod = ed.peek(src)
        if prod is None:
            return False
        types = output_types(prod)
        if types is None or slot >= len(types) or D.base(types[slot]) == D.DT_RESOURCE:
            return False
        if D.is_ref(types[slot]):
            # one reader dereferencing the ref instead of the Identity is a schedule the graph
            # already allowed (the Identity running just before it); two readers are not
            readers = ed.data_readers(nd.name)
            if prod.op in REF_VARIABLE_OPS or nd.op == "IdentityN" or ed.control_readers(nd.name) \
                    or len(readers) != 1:
                return False
        # a device change is what an Identity is for in a placed graph
        if nd.device and nd.device != prod.device:
            return False
        if fa.node_frame.get(nd.name) != tensor_frame(fa, prod):
            return False
    return True


def _remove_identity_n(ed: Editor, fa: Any, nd: Any) -> None:
    name = nd.name
    data = ed.data_inputs(name)
    if not data or not _removable(ed, fa, nd, data):
        return
    if ed.control_readers(name):
        return  # which input's producer would they wait for? keep it simple: keep the node
    carry = ed.control_inputs(name)
    for k, t in enumerate(data):
        ed.replace_tensor((name, k), t, carry)
    ed.remove(name)


def _absorb_producer(ed: Editor, prot: Protected, fa: Any, nd: Any) -> None:
    """Fetched ``y = Identity(p)``, p read by nothing else: compute p's op under y's name."""
    data = ed.data_inputs(nd.name)
    if len(data) != 1 or data[0][1] != 0:
        return
    src = data[0][0]
    prod = ed.peek(src)
    if prod is None or prot.keeps_name(src) or prot.pinned(src):
        return
    if is_control_flow(prod.op) or is_stateful(prod.op) or prod.op == "Const":
        return
    types = output_types(prod)
    if types is None or len(types) != 1 or D.is_ref(types[0]) \
            or D.base(types[0]) == D.DT_RESOURCE:
        return
    if ed.control_readers(src) or len(ed.data_readers(src)) != 1:
        return
    if nd.device and prod.device and nd.device != prod.device:
        return
    if fa.node_frame.get(nd.name) != fa.node_frame.get(src):
        return
    nd = ed.get(nd.name)        # the copy to rewrite
    controls = [*ed.control_inputs(src), *ed.control_inputs(nd.name)]
    p_data = ed.data_inputs(src)
    name, device = nd.name, nd.device or prod.device
    ed.remove(src)
    ed.set_inputs(name, p_data, controls)     # keeps the editor's reader index right
    inputs = list(ed.peek(name).input)     # as the editor spells them (it writes them lazily)
    nd.CopyFrom(prod)
    nd.name = name
    nd.device = device
    del nd.input[:]
    nd.input.extend(inputs)


def _remove_noop(ed: Editor, name: str) -> None:
    readers = ed.control_readers(name)
    ins = ed.control_inputs(name)
    if readers and len(ins) * len(readers) > len(ins) + len(readers):
        return
    ed.replace_control(name, ins)
    ed.remove(name)
