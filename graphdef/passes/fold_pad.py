"""Pass ``fold_pad``: a zero ``Pad`` before a convolution becomes the convolution's own padding.

Keras writes ``ZeroPadding2D`` then a ``VALID`` convolution (ResNet's stem, every stride-2
block of ResNetV2, EfficientNet's stem): a ``Pad`` copies the whole feature map into a larger
one only for the convolution to read it. ``Conv2D`` takes the same padding itself
(``padding="EXPLICIT"`` with ``explicit_paddings``), reading zeros outside the input without
making the padded copy; the values are the same (the padded zeros enter the same sums as the
same products).

Matched: a ``Conv2D`` (padding ``VALID``, or ``EXPLICIT`` already: the pads add up) whose
input is a ``Pad``, or a ``PadV2`` with constant value +0, whose paddings are a constant
``[4, 2]`` of non-negative integers that pad only the spatial dimensions (of the
convolution's ``data_format``), of the same dtype and device, read by nothing else and
neither fetched, fed nor kept by name. The convolution then reads the Pad's input, with the
Pad's control inputs; the Pad goes.

A ``DepthwiseConv2dNative`` (MobileNet's and EfficientNet's stride-2 blocks, NASNet's
separable convolutions) takes it too, unless a BiasAdd reads it: its fused form
(``_FusedDepthwiseConv2dNative``, which takes the BiasAdd and the activation) has no explicit
padding, and that fusion is worth more than the Pad.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph
from .common import Editor, PassOptions, Protected, attr, attr_type, const_value

PADS = frozenset({"Pad", "PadV2"})
CONVS = frozenset({"Conv2D", "DepthwiseConv2dNative"})


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    if not any(n.op in PADS for n in graph.nodes):
        return ed.finish()
    prot = Protected(graph, options)
    for node in graph.nodes:
        nd = ed.peek(node.name)
        if nd is None or nd.op not in CONVS:
            continue
        pads = _match(ed, prot, nd)
        if pads is not None:
            _rewrite(ed, nd.name, *pads)
    return ed.finish()


def _const(ed: Editor, t: tuple[str, int]) -> np.ndarray | None:
    nd = ed.peek(t[0])
    return const_value(nd) if nd is not None and nd.op == "Const" and t[1] == 0 else None


def _match(ed: Editor, prot: Protected, conv: Any) -> tuple[str, list[int]] | None:
    """(the Pad's name, the convolution's new explicit paddings) or None."""
    padding = attr(conv, "padding")
    padding = padding.s.decode("utf-8", "replace") if padding is not None else ""
    data = ed.data_inputs(conv.name)
    if padding not in ("VALID", "EXPLICIT") or len(data) != 2 or data[0][1] != 0 \
            or prot.pinned(conv.name):
        return None
    if conv.op == "DepthwiseConv2dNative" and any(
            ed.op(r) == "BiasAdd" for r, _k in ed.data_readers(conv.name)):
        return None     # fuse_conv_bias_act's to take, which needs SAME or VALID
    pad = ed.peek(data[0][0])
    if pad is None or pad.op not in PADS or pad.device != conv.device \
            or attr_type(pad) != attr_type(conv) or prot.pinned(pad.name) \
            or prot.keeps_name(pad.name) or ed.control_readers(pad.name) \
            or ed.data_readers(pad.name) != [(conv.name, 0)]:
        return None
    p_in = ed.data_inputs(pad.name)
    if len(p_in) != (3 if pad.op == "PadV2" else 2):
        return None
    if pad.op == "PadV2":
        v = _const(ed, p_in[2])
        # +0 only: a padded -0.0 could turn the sign of a zero sum
        if v is None or v.shape != () or v != 0 or np.signbit(v):
            return None
    p = _const(ed, p_in[1])
    if p is None or p.shape != (4, 2) or p.dtype.kind not in "iu" or (p < 0).any():
        return None
    fmt = attr(conv, "data_format")
    fmt = fmt.s.decode("utf-8", "replace") if fmt is not None and fmt.s else "NHWC"
    if fmt not in ("NHWC", "NCHW"):
        return None
    channel = 3 if fmt == "NHWC" else 1
    if p[0].any() or p[channel].any():
        return None     # batch and channel padding: not a convolution's
    explicit = [0] * 8
    if padding == "EXPLICIT":
        old = attr(conv, "explicit_paddings")
        if old is None or len(old.list.i) != 8:
            return None
        explicit = [int(v) for v in old.list.i]
    return pad.name, [a + int(b) for a, b in zip(explicit, p.reshape(-1))]


def _rewrite(ed: Editor, name: str, pad: str, explicit: list[int]) -> None:
    conv = ed.get(name)
    data = ed.data_inputs(name)
    source = ed.data_inputs(pad)[0]
    controls = [*ed.control_inputs(name), *ed.control_inputs(pad)]
    conv.attr["padding"].s = b"EXPLICIT"
    conv.attr["explicit_paddings"].list.Clear()
    conv.attr["explicit_paddings"].list.i.extend(explicit)
    ed.set_inputs(name, [source, data[1]], controls)
    if not ed.data_readers(pad) and not ed.control_readers(pad):
        ed.remove(pad)
