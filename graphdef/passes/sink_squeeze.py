"""Pass ``sink_squeeze``: a convolution's Squeeze moves after its BiasAdd and activation.

Keras writes ``Conv1D`` as ``ExpandDims``, a ``Conv2D`` over a height of 1, then
``Squeeze(squeeze_dims=[-3])`` and only then the layer's ``BiasAdd`` and activation, so
``fuse_conv_bias_act`` (which fuses a convolution its BiasAdd reads directly) leaves the
bias and the activation as passes of their own over the output (a text CNN's
(32, 196, 128) Conv1D: 180 us of its 3.5 ms). Adding a bias along the channels and an
elementwise activation commute with dropping a spatial axis of size 1 (the same values,
each computed once as before), so here the BiasAdd, then the activation after it, reads the
convolution's 4-D output and the Squeeze comes last, and the fusion takes the chain.

Matched: a ``Squeeze`` of a ``Conv2D`` or ``DepthwiseConv2dNative`` output (4-D, NHWC) that
drops only spatial axes (``squeeze_dims`` within 1, 2, -3, -2), read by exactly one node, an
NHWC ``BiasAdd`` of the same dtype and device (then, the same way, one activation of
``fuse_conv_bias_act``'s reading that BiasAdd through the moved Squeeze). None of the moved
nodes may be fetched, fed, a target or kept by name, or have control readers: their
tensors change rank (the BiasAdd's and activation's become 4-D) and their readers read the
Squeeze, which now produces what they produced.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from .common import Editor, PassOptions, Protected, attr, attr_type
from .fuse_conv_bias_act import ACTIVATION_OPS

CONVS = frozenset({"Conv2D", "DepthwiseConv2dNative"})
SPATIAL = frozenset({1, 2, -3, -2})


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    if not any(n.op == "Squeeze" for n in graph.nodes) \
            or not any(n.op in CONVS for n in graph.nodes):
        return ed.finish()
    prot = Protected(graph, options)
    for node in graph.nodes:
        nd = ed.peek(node.name)
        if nd is None or nd.op != "Squeeze" or not _of_conv(ed, prot, nd):
            continue
        moved = _sink(ed, prot, nd.name, "BiasAdd")
        if moved:
            _sink(ed, prot, nd.name, ACTIVATION_OPS)
    return ed.finish()


def _format(nd: Any) -> str:
    fmt = attr(nd, "data_format")
    return fmt.s.decode("utf-8", "replace") if fmt is not None and fmt.s else "NHWC"


def _of_conv(ed: Editor, prot: Protected, sq: Any) -> bool:
    data = ed.data_inputs(sq.name)
    dims = attr(sq, "squeeze_dims")
    if len(data) != 1 or dims is None or not dims.list.i \
            or not set(dims.list.i) <= SPATIAL or prot.pinned(sq.name) \
            or prot.keeps_name(sq.name):
        return False
    src = ed.peek(data[0][0])
    return src is not None and src.op in CONVS and data[0][1] == 0 and _format(src) == "NHWC"


def _sink(ed: Editor, prot: Protected, sq: str, ops: str | frozenset[str]) -> bool:
    """Swap Squeeze ``sq`` with its one reader when that is an op of ``ops`` (reading the
    Squeeze as its first input); True when it moved."""
    readers = ed.data_readers(sq)
    if len(readers) != 1 or readers[0][1] != 0 or ed.control_readers(sq):
        return False
    name = readers[0][0]
    nd, sq_nd = ed.peek(name), ed.peek(sq)
    wanted = nd is not None and (nd.op == ops if isinstance(ops, str) else nd.op in ops)
    if not wanted or nd.device != sq_nd.device or attr_type(nd) != attr_type(sq_nd) \
            or (nd.op == "BiasAdd" and _format(nd) != "NHWC") \
            or prot.pinned(name) or prot.keeps_name(name) or ed.control_readers(name):
        return False
    source = ed.data_inputs(sq)[0]
    rest = ed.data_inputs(name)[1:]
    # the readers of the moved node read the Squeeze; it reads the moved node
    for reader in dict.fromkeys(r for r, _slot in ed.data_readers(name)):
        inputs = ed.data_inputs(reader)
        ed.set_inputs(reader, [(sq, 0) if t == (name, 0) else t for t in inputs],
                      ed.control_inputs(reader))
    ed.set_inputs(name, [source, *rest], ed.control_inputs(name))
    ed.set_inputs(sq, [(name, 0)], ed.control_inputs(sq))
    return True
