"""Pass ``fold_batch_norm``: fold inference-mode batch norm into the weights before it.

In inference mode (``is_training: false``) FusedBatchNorm/V2/V3 computes, per channel ``c``,
``y = (x - mean) * s + offset`` with ``s = scale / sqrt(variance + epsilon)``: an affine map.
When its parameters are constants, only output 0 is read, the layout is channels-last (NHWC)
and the values are float32:

- after a ``Conv2D`` (NHWC) with a constant filter that nothing else reads, the filter's output
  channel ``c`` is multiplied by ``s[c]`` and the batch norm becomes
  ``BiasAdd(conv, offset - mean * s)`` under its own name;
- otherwise, when the input is known to be 4- or 5-dimensional (the batch norm rejects other
  ranks, and the rewrite must keep rejecting them), it becomes
  ``BiasAdd(x * s, offset - mean * s)``, when that does not add nodes.

The new constants are computed in float64 and rounded once. (MatMul cannot precede a
FusedBatchNorm in a valid graph: its output is 2-D, which the batch norm rejects.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph
from .common import (
    Editor,
    PassOptions,
    Protected,
    Shapes,
    attr,
    attr_type,
    const_value,
    is_const,
)

BN_OPS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
# ops whose output is always 4-D (NHWC or NCHW images)
RANK4_OPS = frozenset({"Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "MaxPoolV2",
                       "Conv2DBackpropInput"})
DT_FLOAT = 1


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    shapes = Shapes(ed, prot)
    for node in graph.topological_order():
        nd = ed.get(node.name)
        if nd is None or nd.op not in BN_OPS:
            continue
        params = _params(ed, prot, nd)
        if params is None:
            continue
        if not _into_conv(ed, prot, nd, params):
            _scale_shift(ed, prot, shapes, nd, params)
    return ed.finish()


class _Params:
    def __init__(self, names: list[str], s: np.ndarray, bias: np.ndarray) -> None:
        self.names = names          # the four parameter Consts
        self.s = s                  # float64 per-channel multiplier
        self.bias = bias            # float64 per-channel offset after scaling


def _params(ed: Editor, prot: Protected, nd: Any) -> _Params | None:
    name = nd.name
    if prot.pinned(name) or any(s != 0 for s in prot.fetched_slots(name)):
        return None
    training = attr(nd, "is_training")
    if training is None or training.b:
        return None  # the OpDef default is training mode
    fmt = nd.attr["data_format"].s.decode() if "data_format" in nd.attr else "NHWC"
    if fmt not in ("NHWC", "NDHWC"):
        return None
    if attr_type(nd) != DT_FLOAT or attr_type(nd, "U") not in (None, DT_FLOAT):
        return None
    if ed.used_slots(name) - {0}:
        return None
    data = ed.data_inputs(name)
    if len(data) != 5:
        return None
    vals = []
    for src, slot in data[1:]:
        if slot != 0 or not is_const(ed, prot, src):
            return None
        v = const_value(ed.get(src))
        if v is None or v.ndim != 1 or v.dtype != np.float32:
            return None
        vals.append(v.astype(np.float64))
    scale, offset, mean, var = vals
    if len({v.size for v in vals}) != 1:
        return None  # the kernel rejects it; so must the rewrite: leave it
    eps = float(np.float32(nd.attr["epsilon"].f)) if "epsilon" in nd.attr else 1e-4
    s = scale / np.sqrt(var + eps)
    return _Params([src for src, _ in data[1:]], s, offset - mean * s)


def _private(ed: Editor, prot: Protected, name: str, reader: str) -> bool:
    return (not prot.keeps_name(name) and not prot.pinned(name)
            and {r for r, _ in ed.data_readers(name)} == {reader}
            and not ed.control_readers(name))


def _param_controls(ed: Editor, p: _Params) -> list[str]:
    return list(dict.fromkeys(c for n in p.names for c in ed.control_inputs(n)))


def _into_conv(ed: Editor, prot: Protected, bn: Any, p: _Params) -> bool:
    x = ed.data_inputs(bn.name)[0]
    conv = ed.get(x[0])
    if conv is None or conv.op != "Conv2D" or x[1] != 0 or conv.device != bn.device:
        return False
    if "data_format" in conv.attr and conv.attr["data_format"].s.decode() != "NHWC":
        return False
    if attr_type(conv) != DT_FLOAT or not _private(ed, prot, conv.name, bn.name):
        return False
    w_t = ed.data_inputs(conv.name)[1]
    if w_t[1] != 0 or not is_const(ed, prot, w_t[0]):
        return False
    w = const_value(ed.get(w_t[0]))
    if w is None or w.ndim != 4 or w.shape[3] != p.s.size or w.dtype != np.float32:
        return False
    w_private = _private(ed, prot, w_t[0], conv.name)
    k_private = sum(_private(ed, prot, n, bn.name) for n in set(p.names))
    if 2 - w_private - k_private > 0:
        return False  # would add nodes
    folded = (w.astype(np.float64) * p.s).astype(np.float32)
    w_name = ed.unique_name(f"{conv.name}/_folded_filter")
    ed.make_const(w_name, folded, DT_FLOAT, ed.control_inputs(w_t[0]), conv.device,
                  before=conv.name)
    ed.set_inputs(conv.name, [ed.data_inputs(conv.name)[0], (w_name, 0)],
                  ed.control_inputs(conv.name))
    if w_private:
        ed.remove(w_t[0])
    _become_bias_add(ed, prot, bn, x, p)
    return True


def _scale_shift(ed: Editor, prot: Protected, shapes: Shapes, bn: Any, p: _Params) -> bool:
    x = ed.data_inputs(bn.name)[0]
    rank = shapes.of(x)
    producer = ed.op(x[0])
    if not (rank is not None and len(rank) in (4, 5) or producer in RANK4_OPS and x[1] == 0):
        return False
    k_private = sum(_private(ed, prot, n, bn.name) for n in set(p.names))
    if 4 > 1 + k_private:
        return False  # Mul + BiasAdd + two constants would add nodes
    from dfg.schemas import node_def_pb2

    s_name = ed.unique_name(f"{bn.name}/_scale")
    ed.make_const(s_name, p.s.astype(np.float32), DT_FLOAT, _param_controls(ed, p), bn.device,
                  before=bn.name)
    mul = node_def_pb2.NodeDef(name=ed.unique_name(f"{bn.name}/_scaled"), op="Mul",
                            device=bn.device)
    mul.attr["T"].type = DT_FLOAT
    ed.add(mul, before=bn.name)
    ed.set_inputs(mul.name, [x, (s_name, 0)])
    _become_bias_add(ed, prot, bn, (mul.name, 0), p)
    return True


def _become_bias_add(ed: Editor, prot: Protected, bn: Any, x: tuple[str, int], p: _Params
                     ) -> None:
    b_name = ed.unique_name(f"{bn.name}/_folded_bias")
    ed.make_const(b_name, p.bias.astype(np.float32), DT_FLOAT, _param_controls(ed, p),
                  bn.device, before=bn.name)
    controls = ed.control_inputs(bn.name)
    bn.op = "BiasAdd"
    bn.attr.clear()
    bn.attr["T"].type = DT_FLOAT
    bn.attr["data_format"].s = b"NHWC"
    ed.set_inputs(bn.name, [x, (b_name, 0)], controls)
    for n in set(p.names):
        if n in ed and not ed.readers.get(n) and not prot.keeps_name(n):
            ed.remove(n)
