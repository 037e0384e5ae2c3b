"""Pass ``fuse_elementwise``: a chain of elementwise ops as one ``_DfgElementwiseChain`` node.

A connected group of float32/float64 elementwise nodes (arithmetic, Relu, Relu6, Sigmoid,
Tanh, ...: :data:`CHAIN_OPS`) in which every node but the last has exactly one reader, inside
the group, becomes one node of dfg's private op (``graphdef/opdefs/dfg_op_defs.pbtxt``). Its
``program`` lists the ops in order; its kernel (``executor/kernels/fused.py``) writes each
result into the buffer of an operand that dies there, so a chain of k ops costs one
scheduling step and about one allocation instead of k. Typical chains: hard-swish
``x * relu6(x + 3) / 6`` (MobileNetV3), batch norm + ReLU before a convolution (DenseNet,
ResNetV2), layer normalization's arithmetic (ConvNeXt), squeeze-excite gates.

The group's nodes must share device and dtype; none but the last may be fetched, fed or a
target, or have control readers. The fused node takes the last node's name (a fetch of it
keeps its meaning) and every control input of the group. Tensors from outside the group,
read any number of times, become its inputs. TensorFlow cannot run the private op: the
pass is only for dfg's own per-signature optimization and not in ``dfg optimize``'s
default list. ``PassOptions.elementwise_scope="loops"`` forms chains inside while loops only:
there each iteration repeats the per-op cost a chain saves (an LSTM cell's gate arithmetic
is two chains, 5-11% fewer instructions per step); on the Keras zoo's straight-line graphs
chains gave no gain beyond noise. A Session asks for it. In a loop of scalar arithmetic
(a counter, an accumulator) compiled programs write a chain as its members' scalar forms
composed into one expression (the chain's record, ``ScalarForm.compose``), so the
arithmetic stays inline as it was before fusing; on arrays they call the chain's array
form, the kernel's own core, without the kernel call around it.
"""

from __future__ import annotations

from typing import Any

from ..frames import ROOT, analyze_frames
from ..graph import Graph
from .common import Editor, PassOptions, Protected, attr, attr_type

FUSED_OP = "_DfgElementwiseChain"
DT_FLOAT, DT_DOUBLE = 1, 2
# op -> number of operands; the kernel's CHAIN_OPS has the same keys (a test checks it)
CHAIN_OPS: dict[str, int] = {
    **dict.fromkeys(("Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum",
                     "SquaredDifference"), 2),
    **dict.fromkeys(("Neg", "Abs", "Exp", "Log", "Sqrt", "Square", "Tanh", "Reciprocal",
                     "Rsqrt", "Relu", "Relu6", "Sigmoid"), 1),
}
MIN_NODES = 2


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    order = graph.topological_order()
    rank = {n.name: i for i, n in enumerate(order)}
    taken: set[str] = set()
    in_loop = None
    if options.elementwise_scope == "loops":
        node_frame = analyze_frames(graph).node_frame
        in_loop = {n for n, f in node_frame.items() if f != ROOT}
        if not in_loop:
            return ed.finish()
    for node in reversed(order):
        root = ed.get(node.name)
        if root is None or root.name in taken or not _eligible(ed, prot, root) \
                or in_loop is not None and root.name not in in_loop:
            continue
        members = _grow(ed, prot, root, taken)
        if len(members) < MIN_NODES:
            continue
        taken.update(members)
        _rewrite(ed, root, sorted(members, key=rank.__getitem__))
    return ed.finish()


def _eligible(ed: Editor, prot: Protected, nd: Any) -> bool:
    arity = CHAIN_OPS.get(nd.op)
    return (arity is not None and attr_type(nd) in (DT_FLOAT, DT_DOUBLE)
            and not prot.pinned(nd.name) and len(ed.data_inputs(nd.name)) == arity)


def _grow(ed: Editor, prot: Protected, root: Any, taken: set[str]) -> set[str]:
    """The nodes that can join ``root``'s chain: producers whose only reader is in it."""
    members = {root.name}
    work = [root.name]
    while work:
        m = work.pop()
        for src, slot in ed.data_inputs(m):
            if src in members or src in taken or slot != 0:
                continue
            c = ed.get(src)
            if c is None or not _eligible(ed, prot, c) or c.device != root.device \
                    or attr_type(c) != attr_type(root) or prot.keeps_name(src) \
                    or ed.control_readers(src) or ed.used_slots(src) != {0}:
                continue
            readers = ed.data_readers(src)
            if len(readers) != 1 or readers[0][0] != m:
                continue
            members.add(src)
            work.append(src)
    return members


def _rewrite(ed: Editor, root: Any, members: list[str]) -> None:
    """``members`` in topological order, ``root`` last."""
    index = {n: k for k, n in enumerate(members)}
    inputs: list[tuple[str, int]] = []
    program = []
    for n in members:
        nd = ed.get(n)
        args = []
        for t in ed.data_inputs(n):
            if t[0] in index:
                args.append(f"r{index[t[0]]}")
            else:
                if t not in inputs:
                    inputs.append(t)
                args.append(f"i{inputs.index(t)}")
        program.append(" ".join([nd.op, *args]))
    controls = [c for n in members for c in ed.control_inputs(n)]
    t = attr_type(root)
    shapes = attr(root, "_output_shapes")
    shapes = None if shapes is None else shapes.SerializeToString()
    for n in members[:-1]:
        ed.remove(n)
    root.op = FUSED_OP
    root.attr.clear()
    root.attr["T"].type = t
    root.attr["N"].i = len(inputs)
    root.attr["program"].list.s.extend(p.encode() for p in program)
    if shapes is not None:
        root.attr["_output_shapes"].ParseFromString(shapes)
    ed.set_inputs(root.name, inputs, controls)
