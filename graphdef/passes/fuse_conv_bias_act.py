"""Pass ``fuse_conv_bias_act``: a convolution, its BiasAdd and its activation as one node.

As Grappler's remapper does, ``Conv2D`` (or ``DepthwiseConv2dNative``) followed by
``BiasAdd``, optionally an ``Add``/``AddV2`` of another tensor (a residual connection:
``"Add"``, as oneDNN builds of TensorFlow name it) and optionally one activation becomes
TensorFlow's ``_FusedConv2D`` (or ``_FusedDepthwiseConv2dNative``) with ``fused_ops`` such as
``["BiasAdd"]``, ``["BiasAdd", act]`` or ``["BiasAdd", "Add", act]``;
its kernel (``executor/kernels/fused.py``) adds the bias and applies the activation in place
on the convolution's output, so the chain allocates one tensor instead of two or three and
costs one scheduling step.

Activations: Relu, Relu6, Elu, LeakyRelu, Tanh, Sigmoid, and swish written out as
``Mul(x, Sigmoid(x))`` (Keras' ``swish``/``silu``), fused as ``_MklSwish`` (the name oneDNN
builds of TensorFlow use). The chain fuses only when every node but the last has exactly one
reader, no control readers, is neither fetched, fed nor a target, and all share device and
dtype (float32 or float64). The fused node takes the last node's name, so a fetch of that
node still means the same tensor; control inputs of every fused node move to it.

A transposed convolution (``Conv2DBackpropInput``: Keras's ``Conv2DTranspose``, a decoder's
upsampling) fuses the same way into dfg's own ``_DfgFusedConv2DBackpropInput``, whose kernel
applies the bias and activation to each phase of the result as it is computed.

The fused ops are TensorFlow's, but TensorFlow's CPU kernels do not take every combination
(Tanh and Sigmoid after a convolution, for instance): the pass is for dfg's own runs (the
Session's per-signature optimization) and is not in ``dfg optimize``'s default list.
``fuse_matmul_bias_act`` does the same for ``MatMul``.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from .common import Editor, PassOptions, Protected, attr, attr_type, registry

DT_FLOAT, DT_DOUBLE = 1, 2

# contraction op -> (fused op, dtypes its fused kernel takes)
CONV_FUSIONS = {
    "Conv2D": ("_FusedConv2D", frozenset({DT_FLOAT, DT_DOUBLE})),
    "DepthwiseConv2dNative": ("_FusedDepthwiseConv2dNative", frozenset({DT_FLOAT, DT_DOUBLE})),
    # dfg's own: TensorFlow has no fused transposed convolution
    "Conv2DBackpropInput": ("_DfgFusedConv2DBackpropInput", frozenset({DT_FLOAT, DT_DOUBLE})),
}
# data inputs of each contraction before its fused arguments (the transposed convolution's
# input_sizes, filter and gradient; the others' input and filter)
DATA_INPUTS = {"Conv2DBackpropInput": 3}
ACTIVATION_OPS = frozenset({"Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid"})
SWISH = "_MklSwish"


def run(graph: Graph, options: PassOptions) -> Any:
    return fuse(graph, options, CONV_FUSIONS)


def fuse(graph: Graph, options: PassOptions,
         table: dict[str, tuple[str, frozenset[int]]]) -> Any:
    """Fuse every contraction of ``table`` with its BiasAdd and activation."""
    ed = Editor(graph)
    if not any(n.op in table for n in graph.nodes):
        return ed.finish()
    prot = Protected(graph, options)
    for node in graph.nodes:
        op = ed.op(node.name)
        if op in table:
            _fuse_one(ed, prot, ed.get(node.name), *table[op])
    return ed.finish()


def _fmt(nd: Any) -> str:
    return nd.attr["data_format"].s.decode() if "data_format" in nd.attr else "NHWC"


def _sole_reader(ed: Editor, prot: Protected, name: str) -> Any | None:
    """The one node reading ``name`` (one data edge, from output 0, no control readers), when
    ``name`` may disappear into a fusion; else None."""
    if prot.keeps_name(name) or prot.pinned(name) or ed.control_readers(name):
        return None
    readers = ed.data_readers(name)
    if len(readers) != 1 or ed.used_slots(name) != {0}:
        return None
    return ed.get(readers[0][0])


def _like(ed: Editor, prot: Protected, nd: Any, root: Any) -> bool:
    return (nd.device == root.device and attr_type(nd) == attr_type(root)
            and not prot.pinned(nd.name))


def _fuse_one(ed: Editor, prot: Protected, root: Any, fused_op: str, dtypes: frozenset[int]
              ) -> bool:
    if attr_type(root) not in dtypes:
        return False
    data = ed.data_inputs(root.name)
    if len(data) != DATA_INPUTS.get(root.op, 2):
        return False
    if fused_op == "_FusedDepthwiseConv2dNative" and "padding" in root.attr \
            and root.attr["padding"].s.decode() not in ("SAME", "VALID"):
        return False    # the fused op has no explicit padding
    bias = _sole_reader(ed, prot, root.name)
    if bias is None or bias.op != "BiasAdd" or not _like(ed, prot, bias, root):
        return False
    b_data = ed.data_inputs(bias.name)
    if len(b_data) != 2 or b_data[0] != (root.name, 0) or b_data[1][0] == root.name:
        return False
    if _fmt(bias) != (_fmt(root) if root.op != "MatMul" else "NHWC"):
        return False
    chain = [root.name, bias.name]
    ops = ["BiasAdd"]
    args = [b_data[1]]
    alpha = None
    add = _residual_add(ed, prot, bias, root)
    if add is not None:
        chain.append(add[0])
        ops.append("Add")
        args.append(add[1])
    act = _activation(ed, prot, ed.get(chain[-1]), root)
    if act is not None:
        kind, nodes = act
        ops.append(kind)
        chain.extend(nodes)
        if kind == "LeakyRelu":
            a = attr(ed.get(nodes[-1]), "alpha")
            alpha = a.f if a is not None else 0.2
    last = ed.get(chain[-1])
    controls = [c for n in chain for c in ed.control_inputs(n)]
    keep_shapes = attr(last, "_output_shapes")
    keep_shapes = None if keep_shapes is None else keep_shapes.SerializeToString()
    attrs = {k: v for k, v in root.attr.items() if not k.startswith("_")}
    opdef = registry().get(fused_op)
    known = {a.name for a in opdef.attr}
    last.op = fused_op
    last.attr.clear()
    for k, v in attrs.items():
        if k in known:
            last.attr[k].CopyFrom(v)
    if keep_shapes is not None:
        last.attr["_output_shapes"].ParseFromString(keep_shapes)
    t = attr_type(root)
    last.attr["fused_ops"].list.s.extend(op.encode() for op in ops)
    last.attr["num_args"].i = len(args)
    last.attr["epsilon"].f = 0.0
    if alpha is not None:
        last.attr["leakyrelu_alpha"].f = alpha
    if "TArgs" in known:
        last.attr["TArgs"].list.type.extend([t] * len(args))
        last.attr["num_host_args"].i = 0
    for n in chain[:-1]:
        ed.remove(n)
    ed.set_inputs(last.name, [*data, *args], controls)
    return True


def _residual_add(ed: Editor, prot: Protected, bias: Any, root: Any
                  ) -> tuple[str, tuple[str, int]] | None:
    """(Add node, the other addend) when the BiasAdd's one reader adds it to another tensor
    (a residual connection), else None. Nothing else reads the BiasAdd, so the addend cannot
    depend on it: the fused node creates no cycle."""
    add = _sole_reader(ed, prot, bias.name)
    if add is None or add.op not in ("Add", "AddV2") or not _like(ed, prot, add, root):
        return None
    data = ed.data_inputs(add.name)
    if len(data) != 2 or data.count((bias.name, 0)) != 1:
        return None
    return add.name, data[1 - data.index((bias.name, 0))]


def _activation(ed: Editor, prot: Protected, bias: Any, root: Any
                ) -> tuple[str, list[str]] | None:
    """(fused_ops name, nodes) of the activation reading ``bias``, or None."""
    name = bias.name
    if prot.keeps_name(name) or prot.pinned(name) or ed.control_readers(name) \
            or ed.used_slots(name) != {0}:
        return None
    readers = ed.data_readers(name)
    if len(readers) == 1:
        act = ed.get(readers[0][0])
        if act.op in ACTIVATION_OPS and _like(ed, prot, act, root) \
                and ed.data_inputs(act.name) == [(name, 0)]:
            return act.op, [act.name]
        return None
    if len(readers) != 2 or len({r for r, _ in readers}) != 2:
        return None
    # swish: Mul(x, Sigmoid(x)) in either order
    nodes = {ed.get(r).op: ed.get(r) for r, _ in readers}
    sig, mul = nodes.get("Sigmoid"), nodes.get("Mul")
    if sig is None or mul is None or not _like(ed, prot, sig, root) \
            or not _like(ed, prot, mul, root):
        return None
    if ed.data_inputs(sig.name) != [(name, 0)] \
            or sorted(ed.data_inputs(mul.name)) != sorted([(name, 0), (sig.name, 0)]):
        return None
    if _sole_reader(ed, prot, sig.name) is not mul:
        return None
    return SWISH, [sig.name, mul.name]
