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

Batch norm written out as arithmetic (Keras 3 freezes ``BatchNormalization`` as ``x * a +
b`` with per-channel constants, and so does this pass's scale-shift form) is folded too:
after a ``Conv2D``, ``DepthwiseConv2dNative``, ``Conv2DBackpropInput`` (NHWC; a transposed
convolution's output channels are its filter's third axis) or ``MatMul`` whose constant
filter nothing else reads, a chain of single-reader float32
``BiasAdd``/``Add``/``AddV2``/``Sub`` (``x - c``)/``Mul``/``RealDiv`` (``x / c``) nodes with
constant per-channel (or scalar) operands is an affine map per output channel, ``y = x * s +
t``: the filter's output channel ``c`` is multiplied by ``s[c]`` and the chain becomes one
``BiasAdd(conv, t)`` under the last node's name. A constant operand must broadcast without
changing the output's shape (every dimension 1 but the last, which is 1 or the channel
count, rank at most the output's).
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
    const_shape,
    const_value,
    is_const,
)
from .fuse_conv_bias_act import DATA_INPUTS

BN_OPS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})
# ops whose output is always 4-D (NHWC or NCHW images)
RANK4_OPS = frozenset({"Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool", "MaxPoolV2",
                       "Conv2DBackpropInput"})
DT_FLOAT = 1


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    if not any(n.op in BN_OPS or n.op in CONTRACTIONS for n in graph.nodes):
        return ed.finish()      # nothing to fold (most graphs): no need to order them
    prot = Protected(graph, options)
    shapes = Shapes(ed, prot)
    for node in graph.topological_order():
        if ed.op(node.name) not in BN_OPS:
            continue
        nd = ed.get(node.name)
        params = _params(ed, prot, nd)
        if params is None:
            continue
        if not _into_conv(ed, prot, nd, params):
            _scale_shift(ed, prot, shapes, nd, params)
    for node in graph.topological_order():
        if ed.op(node.name) in CONTRACTIONS:
            _fold_affine(ed, prot, ed.get(node.name))
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


# --- affine chains after a contraction -------------------------------------------------------

# contraction op -> rank of its output
CONTRACTIONS = {"Conv2D": 4, "DepthwiseConv2dNative": 4, "MatMul": 2, "Conv2DBackpropInput": 4}
_AFFINE_OPS = frozenset({"BiasAdd", "Add", "AddV2", "Sub", "Mul", "RealDiv"})


def _nhwc(nd: Any) -> bool:
    return "data_format" not in nd.attr or nd.attr["data_format"].s.decode() == "NHWC"


def _channels(op: str, nd: Any, shape: tuple[int, ...]) -> int | None:
    """The number of output channels of contraction ``nd`` with a filter of ``shape``."""
    if len(shape) == 4 and op == "Conv2D":
        return shape[3]
    if len(shape) == 4 and op == "DepthwiseConv2dNative":
        return shape[2] * shape[3]
    if len(shape) == 4 and op == "Conv2DBackpropInput":
        return shape[2]             # the gradient's channels: the filter's input depth
    if len(shape) == 2 and op == "MatMul":
        tb = attr(nd, "transpose_b")
        return shape[0] if tb is not None and tb.b else shape[1]
    return None


def _scaled_filter(op: str, nd: Any, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    w64 = w.astype(np.float64)
    if op == "DepthwiseConv2dNative":
        out = (w64.reshape(w.shape[0], w.shape[1], -1) * s).reshape(w.shape)
    elif op == "MatMul" and attr(nd, "transpose_b") is not None and nd.attr["transpose_b"].b:
        out = w64 * s[:, None]
    elif op == "Conv2DBackpropInput":
        out = w64 * s[:, None]      # (KH, KW, C, OC): C, the output's channels
    else:
        out = w64 * s
    return out.astype(np.float32)


def _per_channel(v: np.ndarray | None, rank: int, c: int) -> np.ndarray | None:
    """``v`` as a float64 vector of ``c`` channels, when broadcasting it against the output
    cannot change the output's shape; else None."""
    if v is None or v.dtype != np.float32 or v.ndim > rank:
        return None
    if v.ndim == 0:
        return np.full(c, float(v), np.float64)
    if any(d != 1 for d in v.shape[:-1]) or v.shape[-1] not in (1, c):
        return None
    return np.broadcast_to(v.reshape(-1).astype(np.float64), (c,)).copy()


def _affine_step(ed: Editor, prot: Protected, cur: str, nd: Any, rank: int, c: int
                 ) -> tuple[str, np.ndarray | None, str] | None:
    """How reader ``nd`` of ``cur:0`` acts: (kind, per-channel constant, const name), kind in
    add | sub | mul | div; None when it is not an affine step."""
    if nd.op not in _AFFINE_OPS or attr_type(nd) != DT_FLOAT:
        return None
    data = ed.data_inputs(nd.name)
    if len(data) != 2 or data.count((cur, 0)) != 1:
        return None
    k = data.index((cur, 0))
    other, slot = data[1 - k]
    if slot != 0 or not is_const(ed, prot, other):
        return None
    if nd.op == "BiasAdd":
        if k != 0 or not _nhwc(nd):
            return None
        v = const_value(ed.get(other))
        if v is None or v.ndim != 1 or v.shape[0] != c or v.dtype != np.float32:
            return None
        return "add", v.astype(np.float64), other
    if nd.op in ("Sub", "RealDiv") and k != 0:
        return None   # c - x, c / x: not x * s + t
    v = _per_channel(const_value(ed.get(other)), rank, c)
    if v is None or nd.op == "RealDiv" and not np.all(v != 0):
        return None
    kind = {"Add": "add", "AddV2": "add", "Sub": "sub", "Mul": "mul", "RealDiv": "div"}[nd.op]
    return kind, v, other


def _fold_affine(ed: Editor, prot: Protected, p: Any) -> bool:
    """Fold the affine chain after contraction ``p`` into its filter (see the module doc)."""
    rank = CONTRACTIONS[p.op]
    if attr_type(p) != DT_FLOAT or rank == 4 and not _nhwc(p):
        return False
    if prot.keeps_name(p.name) or prot.pinned(p.name):
        return False
    data = ed.data_inputs(p.name)
    # the filter is data input 1 of each (a transposed convolution's of three)
    if len(data) != DATA_INPUTS.get(p.op, 2) or data[1][1] != 0 \
            or not is_const(ed, prot, data[1][0]):
        return False
    w_name = data[1][0]
    if not _private(ed, prot, w_name, p.name):
        return False
    # the filter's shape and dtype come from the header: decoding a weight is only worth it
    # once a chain to fold is found (most contractions have none after fusion-free graphs)
    w_nd = ed.get(w_name)
    w_shape = const_shape(w_nd)
    if w_shape is None or attr_type(w_nd, "dtype") != DT_FLOAT:
        return False
    c = _channels(p.op, p, w_shape)
    if c is None:
        return False
    scale = np.ones(c)
    shift = np.zeros(c)
    chain: list[str] = []
    consts: list[str] = []
    cur = p.name
    while True:
        readers = ed.data_readers(cur)
        if len(readers) != 1 or ed.control_readers(cur) or ed.used_slots(cur) != {0}:
            break
        if cur != p.name and (prot.keeps_name(cur) or prot.pinned(cur)):
            break
        nd = ed.get(readers[0][0])
        if nd.device != p.device or prot.pinned(nd.name):
            break
        step = _affine_step(ed, prot, cur, nd, rank, c)
        if step is None:
            break
        kind, v, const_name = step
        if kind == "add":
            shift = shift + v
        elif kind == "sub":
            shift = shift - v
        elif kind == "mul":
            scale, shift = scale * v, shift * v
        else:
            scale, shift = scale / v, shift / v
        chain.append(nd.name)
        consts.append(const_name)
        cur = nd.name
    scaled = not np.all(scale == 1)
    if not chain or len(chain) == 1 and not scaled and ed.op(chain[0]) == "BiasAdd":
        return False
    if not np.all(np.isfinite(scale)) or not np.all(np.isfinite(shift)):
        return False
    w = const_value(w_nd) if scaled else None
    if scaled and (w is None or w.dtype != np.float32 or w.shape != w_shape):
        return False
    last = ed.get(chain[-1])
    controls = [ctl for n in chain for ctl in ed.control_inputs(n)]
    const_controls = list(dict.fromkeys(ctl for n in consts for ctl in ed.control_inputs(n)))
    if scaled:
        new_w = ed.unique_name(f"{p.name}/_folded_filter")
        ed.make_const(new_w, _scaled_filter(p.op, p, w, scale), DT_FLOAT,
                      ed.control_inputs(w_name), p.device, before=p.name)
        ed.set_inputs(p.name, [data[0], (new_w, 0), *data[2:]], ed.control_inputs(p.name))
        ed.remove(w_name)
    b_name = ed.unique_name(f"{last.name}/_folded_bias")
    ed.make_const(b_name, shift.astype(np.float32), DT_FLOAT, const_controls, p.device,
                  before=last.name)
    for n in chain[:-1]:
        ed.remove(n)
    last.op = "BiasAdd"
    last.attr.clear()
    last.attr["T"].type = DT_FLOAT
    last.attr["data_format"].s = b"NHWC"
    ed.set_inputs(last.name, [(p.name, 0), (b_name, 0)], controls)
    for n in set(consts):
        if n in ed and not ed.readers.get(n) and not prot.keeps_name(n):
            ed.remove(n)
    return True
