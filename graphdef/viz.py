"""Graphviz pictures of a GraphDef: ``to_dot`` builds DOT text, ``render`` runs ``dot``.

What the picture shows:

- Every node is a box labelled with its name and op, shaped by kind (placeholder, variable,
  const, op, control flow). Data edges carry the dtype and, when known, the shape (from
  ``_output_shapes``, the producer's attrs, or a small static inference); edges out of a slot
  other than 0 name the slot; control edges are dashed; Switch outputs are marked F (slot 0)
  and T (slot 1) in red and green.
- Every while-loop frame is a cluster, nested as the loops nest.
- Name scopes (``a/b/c``) collapse into one box per scope and frame at depth DEPTH, so that
  big graphs stay readable and fast to lay out; ``expand`` opens chosen scopes. Edges between
  boxes are merged, one per pair with a count. Automatic collapse picks the deepest depth
  whose picture stays within ``max_boxes`` and an estimate of Graphviz's work; when name
  scopes alone cannot get there, numbered siblings (``add``, ``add_1``, ``add_2`` ...) are
  grouped into series boxes too. Costly pictures get cheaper layout settings.
- Constants are drawn as small annotations next to each consumer (TensorBoard style).
- With ``fetches``, what they need is highlighted and the rest greyed.

The output is deterministic: boxes, clusters and edges are emitted in sorted order and ids
are derived from names, so the DOT of two versions of a graph diffs meaningfully.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from . import dtypes as D
from .errors import DfgError, UsageError
from .frames import CONTROL_FLOW_OPS, ROOT, SWITCH_OPS, analyze_frames
from .functions import (
    FUNCTIONAL_OPS,
    RETVAL_OP,
    WHILE_OPS,
    Library,
    call_sites,
    called_functions,
    instantiate_checked,
    signature,
)
from .graph import Edge, Graph, Node, is_back_edge
from .op_sets import CONST_OPS, INPUT_OPS, REF_VARIABLE_OPS, VARIABLE_OPS
from .shapes import BROADCAST_OPS, SAME_SHAPE_OPS, Shape, broadcast_shapes
from .tensors import format_shape, shape_from_proto

# "A few hundred boxes": dot lays this out in about a second, and it is still readable.
DEFAULT_MAX_BOXES = 250
# Estimates of dot's work (ranks spanned by all edges, see _layout_cost). Above FAST, edge
# labels become xlabels (placed after layout instead of being layout nodes) and positioning
# is capped; above FASTEST, crossing minimisation is cut short and edges are straight lines
# (spline routing dominates then). Measured on 2 cores: cost 6,000 renders in 0.8 s fast
# (50 s plain), 72,000 in 2 s fastest (20 s fast), 106,000 in 16 s fastest. Every
# conformance graph costs < 600. Automatic collapse avoids views above MAX (about 8 s).
FAST_LAYOUT_COST = 2_500
FASTEST_LAYOUT_COST = 25_000
MAX_LAYOUT_COST = 60_000
_SPEED_ATTRS = ("", ", nslimit=2", ", nslimit=0.2, mclimit=0.05, splines=line")
# Fewer numbered siblings than this are not worth a series box.
SERIES_MIN = 3
RANKDIRS = ("TB", "LR")
RENDER_FORMATS = ("svg", "png", "pdf")
OUTPUT_FORMATS = ("dot",) + RENDER_FORMATS
INSTALL_HINT = ("install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew "
                "install graphviz), or write DOT text with --format dot")


Collapse = int | None | Literal["auto", "layers"]
# Longest label line drawn (the full name is in the tooltip)
MAX_LABEL = 40
# A scope prefix is the model's when this share of the nodes in scopes sits under it
PREFIX_SHARE = 0.95
# Opening a layer that holds most of the model stops before the picture has more boxes
READABLE_BOXES = 80
# Scopes TensorFlow 2 and Keras wrap a model's nodes in: not worth a label's room
_WRAPPER = re.compile(r"(StatefulPartitionedCall|PartitionedCall)(_\d+)?|__inference_.*")


def group_path(name: str) -> str:
    """The path a node is grouped by: ``Func/a/b/input/_3`` (a boundary node of a call
    TensorFlow inlined) goes with ``a/b``'s nodes."""
    return name[5:] if name.startswith("Func/") and name.count("/") > 1 else name


def model_prefix(names: Iterable[str]) -> list[str]:
    """The scopes the nodes share (``functional_1_1``, or ``StatefulPartitionedCall/
    functional_1``): the longest path that at least PREFIX_SHARE of the nodes in a scope
    sit under (nodes in no scope, a model's inputs and outputs, do not count)."""
    candidates = [n.split("/")[:-1] for n in names if "/" in n]
    if not candidates:
        return []
    need = max(2, math.ceil(PREFIX_SHARE * len(candidates)))
    prefix: list[str] = []
    while True:
        k = len(prefix)
        counts = Counter(c[k] for c in candidates if len(c) > k and c[:k] == prefix)
        if not counts:
            return prefix
        seg, count = counts.most_common(1)[0]
        if count < need:
            return prefix
        prefix.append(seg)


def short_name(name: str, prefix: Sequence[str] = (), limit: int = MAX_LABEL) -> str:
    """``name`` for a label: the model's prefix and wrapper scopes left out, then cut to
    ``limit`` characters from the left at a scope boundary (``.../lstm_cell/MatMul``)."""
    parts = name.split("/")
    if prefix and parts[:len(prefix)] == list(prefix) and len(parts) > len(prefix):
        parts = parts[len(prefix):]
    while len(parts) > 1 and _WRAPPER.fullmatch(parts[0]):
        parts = parts[1:]
    text = "/".join(parts)
    if len(text) <= limit:
        return text
    text = parts[-1]
    if len(text) + 2 > limit:
        return text[:limit - 1] + "\u2026"
    for seg in reversed(parts[:-1]):
        if len(seg) + len(text) + 3 > limit:
            break
        text = seg + "/" + text
    return "\u2026/" + text


class GraphvizNotFoundError(UsageError):
    """The ``dot`` binary is not installed (exit 2, like any unusable environment)."""


# ------------------------------------------------------------------------------------------
# DOT quoting


# XML 1.0 allows no C0 control but tab/newline/CR, no U+FFFE/U+FFFF, no lone surrogates; SVG
# is XML, and Graphviz copies names into it, so such characters never reach DOT raw
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff\ud800-\udfff]")
# an '&' that Graphviz would take for an entity and copy into SVG as is (any other '&' it
# writes as &amp; itself). Escaping exactly these is one-to-one: every '&amp;' in the result
# was such an '&', since a name's own "&amp;" is itself entity-like and gets escaped.
_ENTITY_AMP = re.compile(r"&(?=[A-Za-z][A-Za-z0-9]*;|#[0-9]+;|#[xX][0-9A-Fa-f]+;)")


def _xml_safe(s: str) -> str:
    """``s`` for a DOT label: characters XML cannot hold shown as ``\\xNN``/``\\uNNNN``
    (as :func:`dfg.graphdef.text.printable` shows them), and ``&`` as ``&amp;``: Graphviz
    reads ``&name;`` in any string as an entity and copies it into SVG as is, where an
    unknown entity makes the file invalid XML (see :data:`_ENTITY_AMP`)."""
    s = _NOT_XML.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                else f"\\u{ord(m.group()):04x}"), s)
    return _ENTITY_AMP.sub("&amp;", s)


def _id_char(m: re.Match[str]) -> str:
    # a character reference Graphviz copies into SVG: the control's picture (U+2400 block),
    # U+FFFD for the rest. No name yields it, since a name's own '&#x...;' becomes '&amp;#x...;'
    c = ord(m.group())
    code = 0x2400 + c if c < 0x20 else 0x2421 if c == 0x7F else 0xFFFD
    return f"&#x{code:x};" if c < 0x80 or c > 0x9F else m.group()  # C1 is valid XML 1.0


def quote(s: str) -> str:
    """A DOT double-quoted string for a label.

    Backslash and quote are escaped for the DOT lexer; newlines become ``\\n``. The record
    characters ``{}|<>`` are escaped too, which Graphviz renders literally in every shape, so
    a name can never be parsed as record fields should a shape ever become a record. Control
    characters show as ``\\xNN`` and ``&`` as itself (see :func:`_xml_safe`), so the SVG
    Graphviz writes is valid XML whatever the names hold.
    """
    out = []
    for ch in _xml_safe(s.replace("\r", "")):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch in "{}|<>":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def quote_id(s: str) -> str:
    """A DOT double-quoted id: ids are never split into record fields, so only the lexer's
    characters need escaping, plus what XML cannot hold (see :func:`_id_char`, an entity-like
    ``&`` as ``&amp;``); the mapping stays one-to-one."""
    s = _NOT_XML.sub(_id_char, _ENTITY_AMP.sub("&amp;", s))
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _label(*lines: str) -> str:
    # join escaped lines with DOT's centred line break
    return '"' + "\\n".join(quote(x)[1:-1] for x in lines) + '"'


def _attrs(d: dict[str, str]) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in d.items()) + "]"


# ------------------------------------------------------------------------------------------
# Static facts about tensors: dtypes and shapes

_REDUCE_OPS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm"})




def _attr_shape(node: Node, key: str) -> Shape | None:
    if key in node.attr and node.attr[key].HasField("shape"):
        return shape_from_proto(node.attr[key].shape)
    return None


def _const_array(node: Node | None, max_elems: int = 64) -> Any | None:
    """The value of a small Const as numpy, or None (not a Const, too big, undecodable)."""
    if node is None or node.op not in CONST_OPS or "value" not in node.attr:
        return None
    t = node.attr["value"].tensor
    shape = shape_from_proto(t.tensor_shape)
    if shape is None or any(d is None for d in shape) or math.prod(shape) > max_elems:
        return None
    try:
        from .tensors import to_numpy

        return to_numpy(t)
    except Exception:  # quantized dtypes and malformed protos: just no value
        return None


class TensorFacts:
    """Dtypes and shapes of tensors, computed on demand and cached.

    Shapes come from ``_output_shapes`` when the graph has them, else from the producer's
    attrs (Placeholder/Variable ``shape``, Const ``value``), else from a forward pass of
    simple rules (elementwise, broadcasting, MatMul, reductions, Reshape by a constant ...).
    Anything uncertain is None: a missing label beats a wrong one.
    """

    def __init__(self, graph: Graph) -> None:
        from .functions import Library

        self.graph = graph
        self.library = Library(graph.library)
        self._dtypes: dict[str, list[int] | None] = {}
        self._shapes: dict[str, list[Shape | None]] | None = None

    def dtype(self, node: str, slot: int) -> int | None:
        if node not in self._dtypes:
            n = self.graph.get(node)
            if n is not None and n.op in self.library:
                from .functions import signature

                # a call by op name: the function's signature gives the types
                sig = signature(self.library.function(n.op), dict(n.attr))
                self._dtypes[node] = [t or None for _, t in sig.outputs]  # type: ignore
            else:
                self._dtypes[node] = self._node_dtypes(n)
        types = self._dtypes[node]
        return types[slot] if types is not None and 0 <= slot < len(types) else None

    @staticmethod
    def _node_dtypes(n: Node | None) -> list[int] | None:
        if n is None:
            return None
        from .opdefs.registry import registry

        reg = registry()
        if n.op in reg:
            try:
                return reg.output_types(n.proto)
            except Exception:  # attrs do not determine the signature: fall back below
                pass
        for key in ("T", "dtype"):
            if key in n.attr and n.attr[key].WhichOneof("value") == "type":
                return [n.attr[key].type]
        return None

    def shape(self, node: str, slot: int) -> Shape | None:
        if self._shapes is None:
            self._shapes = self._infer_all()
        shapes = self._shapes.get(node)
        return shapes[slot] if shapes is not None and 0 <= slot < len(shapes) else None

    def _infer_all(self) -> dict[str, list[Shape | None]]:
        # One pass in topological order (loop back edges ignored): each node sees its
        # producers' shapes, without recursion, so a 10,000-node chain is no problem.
        out: dict[str, list[Shape | None]] = {}
        for n in self.graph.topological_order():
            if self.graph.get(n.name) is not n:
                continue
            ins: list[Shape | None] = []
            for src, slot in n.inputs:
                known = out.get(src)
                ins.append(known[slot] if known is not None and slot < len(known) else None)
            try:
                out[n.name] = self._infer(n, ins)
            except Exception:  # malformed attrs: no shapes for this node
                out[n.name] = []
        return out

    def _infer(self, n: Node, ins: list[Shape | None]) -> list[Shape | None]:
        op = n.op
        if "_output_shapes" in n.attr:
            return [shape_from_proto(s) for s in n.attr["_output_shapes"].list.shape]
        if op in INPUT_OPS or op in REF_VARIABLE_OPS:
            if op == "PlaceholderWithDefault" and "shape" not in n.attr:
                return [ins[0] if ins else None]
            return [_attr_shape(n, "shape")]
        if op in CONST_OPS:
            return [shape_from_proto(n.attr["value"].tensor.tensor_shape)
                    if "value" in n.attr else None]
        if op in SWITCH_OPS:
            s = ins[0] if ins else None
            return [s, s]
        if op in ("Merge", "RefMerge"):
            # equal known shapes only; a back edge not yet seen leaves it unknown
            known = set(ins)
            return [ins[0] if len(known) == 1 else None, ()]
        if op in SAME_SHAPE_OPS:
            return [ins[0] if ins else None]
        if op in FUNCTIONAL_OPS and "output_shapes" in n.attr:
            # While/If/Case record their results' shapes (empty list: not recorded)
            shapes = n.attr["output_shapes"].list.shape
            return [shape_from_proto(sh) for sh in shapes]
        if op in BROADCAST_OPS and len(ins) == 2:
            return [broadcast_shapes(ins[0], ins[1])]
        if op in ("AddN", "AccumulateNV2"):
            return [next((s for s in ins if s is not None), None)]
        if op in ("Select", "SelectV2") and len(ins) == 3:
            if op == "Select":
                return [ins[1] if ins[1] is not None else ins[2]]
            return [broadcast_shapes(broadcast_shapes(ins[0], ins[1]), ins[2])]
        if op == "MatMul" and len(ins) == 2:
            a, b = ins
            if a is None or b is None or len(a) != 2 or len(b) != 2:
                return [None]
            ta = n.attr["transpose_a"].b if "transpose_a" in n.attr else False
            tb = n.attr["transpose_b"].b if "transpose_b" in n.attr else False
            return [(a[1] if ta else a[0], b[0] if tb else b[1])]
        if op in ("Shape", "ShapeN"):
            return [None if s is None else (len(s),) for s in ins]
        if op in ("Size", "Rank"):
            return [()]
        if op == "Reshape" and len(ins) == 2:
            return [self._reshape(ins[0], self.graph.get(n.inputs[1][0]))]
        if op in _REDUCE_OPS and len(ins) == 2:
            return [self._reduce(n, ins[0])]
        rule = _SHAPE_RULES.get(op)
        if rule is not None:
            consts = [self.graph.get(src) for src, _ in n.inputs]
            return rule(n, ins, consts)
        return []

    @staticmethod
    def _reshape(src: Shape | None, shape_node: Node | None) -> Shape | None:
        v = _const_array(shape_node)
        if v is None or v.ndim > 1:
            return None
        dims = [int(d) for d in v.reshape(-1)]
        if dims.count(-1) > 1:
            return None
        if -1 in dims:
            if src is None or any(d is None for d in src):
                return tuple(None if d == -1 else d for d in dims)
            rest = math.prod(d for d in dims if d != -1)
            total = math.prod(src)  # type: ignore[arg-type]
            if rest == 0 or total % rest:
                return None
            return tuple(total // rest if d == -1 else d for d in dims)
        return tuple(dims)

    def _reduce(self, n: Node, src: Shape | None) -> Shape | None:
        keep = n.attr["keep_dims"].b if "keep_dims" in n.attr else False
        axes = _const_array(self.graph.get(n.inputs[1][0]))
        if src is None or axes is None:
            return None
        rank = len(src)
        try:
            picked = {int(a) % rank for a in axes.reshape(-1)} if rank else set()
        except (TypeError, ValueError):
            return None
        if keep:
            return tuple(1 if i in picked else d for i, d in enumerate(src))
        return tuple(d for i, d in enumerate(src) if i not in picked)

    def edge_label(self, e: Edge) -> str:
        dt = self.dtype(e.src, e.src_output)
        if dt is None:
            return ""
        s = self.shape(e.src, e.src_output)
        return D.name(dt) if s is None else f"{D.name(dt)} {format_shape(s)}"


# --- shape rules of the ops Keras models are made of: (node, input shapes, input
# producers) -> output shapes; anything unsure is None


def _ints(node: Node | None) -> list[int] | None:
    v = _const_array(node, max_elems=16)
    if v is None or v.dtype.kind not in "iu" or v.ndim > 1:
        return None
    return [int(x) for x in v.reshape(-1)]


def _attr_ints(n: Node, key: str, default: list[int] | None = None) -> list[int] | None:
    if key not in n.attr:
        return default
    return list(n.attr[key].list.i)


def _window_dim(size: int | None, k: int, stride: int, padding: str) -> int | None:
    if size is None or stride <= 0:
        return None
    if padding == "SAME":
        return -(-size // stride)
    if padding == "VALID":
        return (size - k) // stride + 1 if size >= k else None
    return None


def _windowed(n: Node, x: Shape | None, kh: int | None, kw: int | None,
              cout: int | None) -> list[Shape | None]:
    """Conv2D/DepthwiseConv2dNative/MaxPool/AvgPool in NHWC (NCHW and explicit padding:
    unknown)."""
    fmt = n.attr["data_format"].s.decode() if "data_format" in n.attr else "NHWC"
    pad = n.attr["padding"].s.decode() if "padding" in n.attr else ""
    st = _attr_ints(n, "strides")
    dil = _attr_ints(n, "dilations", [1, 1, 1, 1]) or [1, 1, 1, 1]
    if (x is None or len(x) != 4 or fmt != "NHWC" or not st or len(st) != 4
            or kh is None or kw is None or len(dil) != 4):
        return [None]
    eh, ew = (kh - 1) * dil[1] + 1, (kw - 1) * dil[2] + 1
    return [(x[0], _window_dim(x[1], eh, st[1], pad), _window_dim(x[2], ew, st[2], pad),
             cout)]


def _conv2d(n: Node, ins: list, consts: list) -> list[Shape | None]:
    f = ins[1] if len(ins) > 1 else None
    if f is None or len(f) != 4:
        return [None]
    return _windowed(n, ins[0], f[0], f[1], f[3])


def _depthwise(n: Node, ins: list, consts: list) -> list[Shape | None]:
    f, x = (ins[1] if len(ins) > 1 else None), ins[0]
    if f is None or len(f) != 4 or x is None or len(x) != 4:
        return [None]
    cout = None if f[2] is None or f[3] is None else f[2] * f[3]
    return _windowed(n, x, f[0], f[1], cout)


def _pool2d(n: Node, ins: list, consts: list) -> list[Shape | None]:
    k = _attr_ints(n, "ksize")
    x = ins[0] if ins else None
    if not k or len(k) != 4 or x is None or len(x) != 4:
        return [None]
    return _windowed(n, x, k[1], k[2], x[3])


def _concat_v2(n: Node, ins: list, consts: list) -> list[Shape | None]:
    axis = _ints(consts[-1]) if consts else None
    parts = ins[:-1]
    if axis is None or len(axis) != 1 or not parts or any(p is None for p in parts):
        return [None]
    rank = len(parts[0])
    if rank == 0 or any(len(p) != rank for p in parts):
        return [None]
    ax = axis[0] % rank
    out = [next((p[d] for p in parts if p[d] is not None), None) for d in range(rank)]
    sizes = [p[ax] for p in parts]
    out[ax] = None if None in sizes else sum(sizes)
    return [tuple(out)]


def _transpose_rule(n: Node, ins: list, consts: list) -> list[Shape | None]:
    perm = _ints(consts[1]) if len(consts) > 1 else None
    x = ins[0] if ins else None
    if x is None or perm is None or sorted(perm) != list(range(len(x))):
        return [None]
    return [tuple(x[i] for i in perm)]


def _expand(n: Node, ins: list, consts: list) -> list[Shape | None]:
    ax = _ints(consts[1]) if len(consts) > 1 else None
    x = ins[0] if ins else None
    if x is None or ax is None or len(ax) != 1:
        return [None]
    a = ax[0] % (len(x) + 1)
    return [tuple(x[:a]) + (1,) + tuple(x[a:])]


def _squeeze(n: Node, ins: list, consts: list) -> list[Shape | None]:
    x = ins[0] if ins else None
    if x is None:
        return [None]
    dims = {d % len(x) for d in _attr_ints(n, "squeeze_dims", []) or []} if x else set()
    if not dims:
        if None in x:
            return [None]
        return [tuple(d for d in x if d != 1)]
    return [tuple(d for i, d in enumerate(x) if i not in dims)]


def _pack(n: Node, ins: list, consts: list) -> list[Shape | None]:
    if not ins or any(s is None or s != ins[0] for s in ins):
        return [None]
    axis = n.attr["axis"].i if "axis" in n.attr else 0
    a = axis % (len(ins[0]) + 1)
    return [tuple(ins[0][:a]) + (len(ins),) + tuple(ins[0][a:])]


def _batch_matmul(n: Node, ins: list, consts: list) -> list[Shape | None]:
    if len(ins) != 2 or ins[0] is None or ins[1] is None or min(len(ins[0]), len(ins[1])) < 2:
        return [None]
    a, b = ins
    adj_a = n.attr["adj_x"].b if "adj_x" in n.attr else False
    adj_b = n.attr["adj_y"].b if "adj_y" in n.attr else False
    batch = broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    if batch is None:
        return [None]
    return [tuple(batch) + (a[-1] if adj_a else a[-2], b[-2] if adj_b else b[-1])]


def _pad_rule(n: Node, ins: list, consts: list) -> list[Shape | None]:
    v = _const_array(consts[1]) if len(consts) > 1 else None
    x = ins[0] if ins else None
    if x is None or v is None or v.shape != (len(x), 2):
        return [None]
    return [tuple(None if d is None else d + int(p[0]) + int(p[1]) for d, p in zip(x, v))]


def _fused_bn(n: Node, ins: list, consts: list) -> list[Shape | None]:
    c = ins[1] if len(ins) > 1 else None
    return [ins[0] if ins else None] + [c] * 5


_SHAPE_RULES = {
    "Conv2D": _conv2d, "DepthwiseConv2dNative": _depthwise, "MaxPool": _pool2d,
    "AvgPool": _pool2d, "ConcatV2": _concat_v2, "Transpose": _transpose_rule,
    "ExpandDims": _expand, "Squeeze": _squeeze, "Pack": _pack,
    "BatchMatMul": _batch_matmul, "BatchMatMulV2": _batch_matmul,
    "BatchMatMulV3": _batch_matmul, "Pad": _pad_rule, "MirrorPad": _pad_rule,
    "FusedBatchNorm": _fused_bn, "FusedBatchNormV2": _fused_bn, "FusedBatchNormV3": _fused_bn,
}


def _const_summary(node: Node) -> str:
    """``y = 1.5`` for small constants, ``w float32 [3,3]`` for the rest (at most
    MAX_LABEL characters)."""
    text = _const_text(node)
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "\u2026"


def _const_text(node: Node) -> str:
    leaf = node.name.rsplit("/", 1)[-1]
    v = _const_array(node, max_elems=4)
    if v is not None and v.dtype != object:
        if v.ndim == 0:
            text = _fmt_scalar(v.item())
        else:
            text = "[" + ",".join(_fmt_scalar(x) for x in v.reshape(-1).tolist()) + "]"
        return f"{leaf} = {text}"
    t = node.attr["value"].tensor if "value" in node.attr else None
    if t is None:
        return leaf
    return f"{leaf} {D.name(t.dtype)} {format_shape(shape_from_proto(t.tensor_shape))}"


# Ops named last in a box's op list: they move or hold values, the others compute.
_PLUMBING = frozenset({
    "Identity", "IdentityN", "NoOp", "_Arg", "_Retval", "ReadVariableOp", "Enter", "Exit",
    "Merge", "Switch", "NextIteration", "LoopCond", "Shape", "StridedSlice", "Pack",
    "Unpack", "Fill", "Reshape", "Cast", "Squeeze", "ExpandDims", "Placeholder"})


def _op_count_line(count: int, ops: Counter[str]) -> str:
    """``12 ops: MatMul, BiasAdd +3``, within the label width."""
    names = [op for op, _ in sorted(ops.items(),
                                    key=lambda kv: (kv[0] in _PLUMBING, -kv[1], kv[0]))
             if op not in CONST_OPS]
    head = f"{count} ops"
    if not names:
        return head
    text = head + ": " + names[0]
    shown = 1
    for op in names[1:]:
        more = len(names) - shown - 1
        cand = f"{text}, {op}"
        if len(cand) + (len(f" +{more}") if more else 0) > MAX_LABEL:
            break
        text, shown = cand, shown + 1
    if len(text) > MAX_LABEL:
        return head
    return text + (f" +{len(names) - shown}" if len(names) > shown else "")


def _fmt_scalar(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


# ------------------------------------------------------------------------------------------
# The view: which box each node goes to


@dataclass
class Box:
    """One drawn box: a node, a collapsed name scope, or a series of numbered siblings."""

    id: str
    kind: str          # "node" | "scope" | "series"
    frame: str         # frame the box is drawn in ("" = root)
    path: str          # node name, scope path, or series stem path
    members: list[str] = field(default_factory=list)


@dataclass
class View:
    """What ``to_dot`` draws, decided once: boxes, where each node went, const annotations."""

    boxes: dict[str, Box]
    node_box: dict[str, str]                 # node name -> box id (annotations: absent)
    annotations: list[tuple[str, str]]       # (const node, consumer box id), sorted
    edges: list[tuple[str, str, list[Edge]]]  # (src box, dst box, graph edges drawn as one)
    depth: int | None                        # name-scope collapse depth; None = no collapse
    series: bool                             # numbered siblings grouped
    auto: bool                               # depth chosen automatically
    frames: Any                              # FrameAnalysis
    cost: int = 0                            # estimate of dot's work, see _layout_cost
    open_calls: set[str] = field(default_factory=set)      # functional nodes drawn open
    open_functions: set[str] = field(default_factory=set)  # functions drawn open everywhere
    layers: bool = False                     # boxes are the model's layers (auto)
    prefix: list[str] = field(default_factory=list)  # scopes every label leaves out

    @property
    def size(self) -> int:
        """Boxes plus const annotations: what the layout has to place."""
        return len(self.boxes) + len(self.annotations)


def _key_id(kind: str, frame: str, path: str) -> str:
    where = f"@{frame}" if frame else ""
    if kind == "node":
        return f"n:{path}"
    if kind == "scope":
        return f"s:{path}/{where}"
    return f"r:{path}_*{where}"


class _Planner:
    """Groups nodes into boxes for a given collapse depth; cheap enough to try several."""

    def __init__(self, graph: Graph, expand: Sequence[str], show_consts: bool) -> None:
        self.graph = graph
        self.show_consts = show_consts
        self.nodes = [n for n in graph.nodes if graph.get(n.name) is n]  # skip duplicates
        self.fa = analyze_frames(graph)
        self.frame = {n.name: self.fa.node_frame.get(n.name, ROOT) for n in self.nodes}
        # An Enter runs in its producer's frame but opens the loop: draw it inside the
        # loop's cluster, as its entrance, the way an Exit is drawn as the loop's exit.
        for f in self.fa.frames.values():
            for enter in f.enters:
                if enter in self.frame:
                    self.frame[enter] = f.name
        # where a node is grouped: its name, but the boundary nodes TensorFlow adds when it
        # inlines a call (Func/SCOPE/...) go with SCOPE's nodes
        self.path = {n.name: group_path(n.name) for n in self.nodes}
        scopes: set[str] = set()
        self.max_depth = 0
        for n in self.nodes:
            parts = self.path[n.name].split("/")
            self.max_depth = max(self.max_depth, len(parts) - 1)
            for i in range(1, len(parts)):
                scopes.add("/".join(parts[:i]))
        self.open: set[str] = set()
        # functional nodes (While/If/Case/calls) and functions whose bodies are drawn
        self.library = Library(graph.library)
        self.open_calls: set[str] = set()
        self.open_functions: set[str] = set()
        for s in expand:
            if s in self.library:
                self.open_functions.add(s)
                continue
            node = graph.get(s)
            if node is not None and called_functions(node.proto, self.library):
                self.open_calls.add(s)
                parts = s.split("/")[:-1]   # its scopes open too, so it is drawn as a box
            else:
                s = s.strip("/")
                if s not in scopes:
                    raise UsageError(f"--expand {s}: no name scope '{s}' in the graph, nor "
                                     "a functional node or library function of that name")
                parts = s.split("/")
            # opening a scope opens its ancestors too, else it would stay hidden inside them
            self.open.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        # Constants drawn as annotations on their consumers rather than as boxes: data
        # consumers only (a control dependency on a constant deserves a real box). Their own
        # control inputs (the frame pivot of a constant inside a loop) are not drawn.
        # A function's resource arguments (the variables it captures) are drawn the same
        # way: one per variable, they would otherwise line the picture's top edge.
        self.annotatable = {
            n.name for n in self.nodes
            if (n.op in CONST_OPS or (n.op == "_Arg" and "T" in n.attr
                                      and n.attr["T"].type == D.DT_RESOURCE))
            and n.out_edges and not any(e.is_control for e in n.out_edges)}
        self.prefix = model_prefix(self.path[n.name] for n in self.nodes
                                   if n.op not in ("_Arg", RETVAL_OP))

    def layer_view(self, max_boxes: int) -> View | None:
        """Keras layers (the name scopes right under the model's prefix) as boxes, or None
        when the graph has no such structure (no prefix most nodes share, or fewer than two
        scopes under it). A box holding most of the graph's work is opened, one level at a
        time, while it is made of two or more big parts (a Bidirectional layer
        shows its two LSTMs, a model wrapped in another model its layers): the level comes
        from the structure, not from a count of boxes."""
        if not self.prefix:
            return None
        depth = len(self.prefix) + 1
        split = [self.path[n.name].split("/") for n in self.nodes]
        under = {p[len(self.prefix)] for p in split
                 if len(p) > depth and p[:len(self.prefix)] == self.prefix}
        if len(under) < 2:
            return None
        user_open = set(self.open)
        work = sum(1 for n in self.nodes if n.name not in self.annotatable) or 1
        view = self.plan(depth, False, True)
        for _ in range(self.max_depth):
            big = max((b for b in view.boxes.values() if b.kind == "scope"),
                      key=lambda b: len(b.members), default=None)
            if big is None or 2 * sum(1 for m in big.members
                                      if m not in self.annotatable) <= work:
                break
            # open it when it is made of big parts, two or more with a fifth of its work
            # each (a Bidirectional's two LSTMs), not of one part and small pieces around
            # it (an LSTM: its cell, its loop)
            k = len(big.path.split("/"))
            inner = Counter(self.path[m].split("/")[k] for m in big.members
                            if len(self.path[m].split("/")) > k + 1
                            and m not in self.annotatable)
            own = sum(1 for m in big.members if m not in self.annotatable)
            if sum(1 for c in inner.values() if 5 * c >= own) < 2:
                break
            self.open.add(big.path)
            opened = self.plan(depth, False, True)
            if opened.size > min(max_boxes, READABLE_BOXES):
                self.open.discard(big.path)
                break
            view = opened
        self.open = user_open | (self.open - user_open)
        if view.size > max_boxes or view.cost > MAX_LAYOUT_COST:
            return None
        view.layers = True
        return view

    def plan(self, depth: int | None, series: bool, isolated: bool = False) -> View:
        """The boxes for ``depth``; ``series``: numbered siblings grouped; ``isolated``:
        only numbered siblings with no edges at all grouped (the unused_control_flow_input_N
        placeholders TensorFlow leaves when it lowers control flow)."""
        key: dict[str, tuple[str, str, str]] = {}
        for n in self.nodes:
            fr = self.frame[n.name]
            if depth is None:
                key[n.name] = ("node", fr, n.name)
                continue
            parts = self.path[n.name].split("/")
            level = depth
            while level < len(parts) and "/".join(parts[:level]) in self.open:
                level += 1
            if level >= len(parts):
                key[n.name] = ("node", fr, n.name)
            else:
                key[n.name] = ("scope", fr, "/".join(parts[:level]))
        # A "collapsed" scope of one node is just that node. A scope holding nothing but
        # constants (a loop's maximum_iterations, say) is no box either: its constants go
        # where their consumers are, as annotations or absorbed into the consumer's box.
        sizes = Counter(key.values())
        computing = Counter(k for name, k in key.items() if name not in self.annotatable)
        for name, k in key.items():
            if k[0] == "scope" and (sizes[k] == 1 or computing[k] == 0):
                key[name] = ("node", k[1], name)
        if series:
            self._group_series(key)
        elif isolated:
            self._group_series(key, {n.name for n in self.nodes
                                     if not n.in_edges and not n.out_edges})
        self._absorb_consts(key)

        boxes: dict[str, Box] = {}
        node_box: dict[str, str] = {}
        for n in self.nodes:
            kind, fr, path = key[n.name]
            if kind == "node" and n.name in self.annotatable:
                continue
            bid = _key_id(kind, fr, path)
            box = boxes.get(bid)
            if box is None:
                box = boxes[bid] = Box(bid, kind, fr, path)
            box.members.append(n.name)
            node_box[n.name] = bid
        annotations: set[tuple[str, str]] = set()
        if self.show_consts:
            for c in self.annotatable:
                if c in node_box:
                    continue
                for e in self.graph.node(c).out_edges:
                    bid = node_box.get(e.dst)
                    if bid is not None:
                        annotations.add((c, bid))
        edges = self._edge_groups(boxes, node_box)
        view = View(boxes, node_box, sorted(annotations), edges, depth, series, False, self.fa,
                    open_calls=self.open_calls, open_functions=self.open_functions)
        view.cost = _layout_cost(self.graph, view)
        return view

    def _edge_groups(self, boxes: dict[str, Box], node_box: dict[str, str]
                     ) -> list[tuple[str, str, list[Edge]]]:
        """The edges to draw: node to node each on its own (they carry slots and labels),
        any edge touching a collapsed box merged into one per pair of boxes."""
        groups: list[tuple[str, str, list[Edge]]] = []
        merged: dict[tuple[str, str], list[Edge]] = defaultdict(list)
        for n in self.nodes:
            dst_box = node_box.get(n.name)
            if dst_box is None:
                continue  # an annotated constant: its control inputs are not drawn
            for e in n.in_edges:
                src_box = node_box.get(e.src)
                if src_box is None:
                    continue  # from an annotated constant: drawn as the annotation
                if src_box == dst_box and boxes[src_box].kind != "node":
                    continue  # inside a collapsed box
                if boxes[src_box].kind == "node" and boxes[dst_box].kind == "node":
                    groups.append((src_box, dst_box, [e]))
                else:
                    merged[(src_box, dst_box)].append(e)
        for (src_box, dst_box), edges in merged.items():
            edges.sort(key=lambda e: (e.src, e.src_output, e.dst, e.dst_input))
            groups.append((src_box, dst_box, edges))
        return groups

    def _group_series(self, key: dict[str, tuple[str, str, str]],
                      only: set[str] | None = None) -> None:
        # Items are the boxes so far (annotated constants excluded: they are not boxes).
        # Siblings in one frame and scope named stem, stem_1, stem_2 ... form a series.
        # ``only``: just these nodes take part (each drawn as itself so far).
        items: dict[tuple[str, str, str], list[tuple[str, str, str]]] = defaultdict(list)
        numbered: set[tuple[str, str, str]] = set()
        seen: set[tuple[str, str, str]] = set()
        for name, k in key.items():
            if k in seen or (k[0] == "node" and name in self.annotatable):
                continue
            if only is not None and (k[0] != "node" or name not in only):
                continue
            seen.add(k)
            parent, _, leaf = k[2].rpartition("/")
            m = re.fullmatch(r"(.+?)_(\d+)", leaf)
            skey = (k[1], parent, m.group(1) if m else leaf)
            items[skey].append(k)
            if m:
                numbered.add(skey)
        merged: dict[tuple[str, str, str], tuple[str, str, str]] = {}
        for skey, ks in items.items():
            if skey in numbered and len(ks) >= SERIES_MIN:
                fr, parent, stem = skey
                target = ("series", fr, f"{parent}/{stem}" if parent else stem)
                merged.update((k, target) for k in ks)
        for name, k in key.items():
            if k in merged:
                key[name] = merged[k]

    def _absorb_consts(self, key: dict[str, tuple[str, str, str]]) -> None:
        # A constant whose consumers all sit in one collapsed box is part of that box's
        # computation: count it there instead of hanging an annotation on the box.
        for c in self.annotatable:
            if key[c][0] != "node":
                continue
            targets = {key[e.dst] for e in self.graph.node(c).out_edges}
            if len(targets) == 1:
                (t,) = targets
                if t[0] != "node":
                    key[c] = t



def _layout_cost(graph: Graph, view: View) -> int:
    """Estimate of dot's work: how many ranks the drawn edges span, summed.

    dot turns an edge spanning k ranks into a chain of k virtual nodes, and its crossing
    minimisation, positioning and spline routing all grow faster than linearly in those, so
    this predicts layout time far better than a count of boxes. Ranks are estimated as
    longest paths over the boxes, leaving out loop back edges as the DOT does.
    """
    succ: dict[str, list[str]] = defaultdict(list)
    indeg: Counter[str] = Counter()
    for s, d, edges in view.edges:
        if s != d and not all(is_back_edge(graph, e) for e in edges):
            succ[s].append(d)
            indeg[d] += 1
    rank: dict[str, int] = {}
    ready = [b for b in view.boxes if indeg[b] == 0]
    for b in ready:
        rank[b] = 0
    while ready:
        b = ready.pop()
        for d in succ[b]:
            rank[d] = max(rank.get(d, 0), rank[b] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    # boxes on a cycle between collapsed scopes keep the rank reached so far: an estimate
    spans = sum(max(1, abs(rank.get(d, 0) - rank.get(s, 0))) for s, d, _ in view.edges)
    return spans + 2 * len(view.annotations)


def fits(view: View, max_boxes: int = DEFAULT_MAX_BOXES) -> bool:
    """Whether ``view`` is within the budget automatic collapse aims for."""
    return view.size <= max_boxes and view.cost <= MAX_LAYOUT_COST


def _choose(planner: _Planner, max_boxes: int) -> View:
    """The view for automatic collapse: the deepest depth that fits.

    A view fits with at most ``max_boxes`` boxes and a layout cost dot handles in seconds
    (MAX_LAYOUT_COST). No collapse if the whole graph fits; else scope depths 1, 2 ... while
    they fit (more depth never means fewer boxes in practice, so the scan stops at the first
    misfit); if not even depth 1 fits, the same again with numbered siblings grouped into
    series; if nothing fits, the cheapest picture found.
    """
    full = planner.plan(None, False)
    if fits(full, max_boxes):
        return full
    candidates = [full]
    for series in (False, True):
        best: View | None = None
        previous = None
        # None last: with series on, "no scope collapse" is the deepest level to try
        levels: list[int | None] = list(range(1, planner.max_depth + 1))
        if series:
            levels.append(None)
        for depth in levels:
            v = planner.plan(depth, series)
            candidates.append(v)
            if fits(v, max_boxes):
                best = v
            elif best is not None or (previous is not None and v.size >= previous):
                break  # past the deepest fit, or getting worse without ever fitting
            previous = v.size
        if best is not None:
            return best
    return min(candidates, key=lambda v: (v.size > max_boxes, v.cost, v.size))


def build_view(graph: Graph, *, collapse: Collapse = "auto", expand: Iterable[str] = (),
               show_consts: bool = True, max_boxes: int = DEFAULT_MAX_BOXES) -> View:
    """Decide the boxes: collapse ``"auto"``, a depth >= 1, or None (every node a box)."""
    planner = _Planner(graph, list(expand), show_consts)
    if collapse in ("auto", "layers"):
        view = None
        if collapse == "auto":
            # every node, when that is already a picture one reads at a glance
            full = planner.plan(None, False)
            if full.size <= min(READABLE_BOXES, max_boxes) and full.cost <= FAST_LAYOUT_COST:
                view = full
        if view is None:
            view = planner.layer_view(max_boxes)
        if view is None:
            if collapse == "layers":
                raise UsageError("the graph has no layers to draw as boxes (no name scope "
                                 "most nodes share with scopes under it); try --collapse auto")
            view = _choose(planner, max_boxes)
        view.auto = True
    elif collapse is not None and (isinstance(collapse, bool) or not isinstance(collapse, int)
                                   or collapse < 1):
        raise UsageError(f"collapse depth must be a positive integer, 'none', 'auto' or "
                         f"'layers', not {collapse!r}")
    else:
        view = planner.plan(collapse, False)
    view.prefix = planner.prefix
    return view


# ------------------------------------------------------------------------------------------
# DOT


_STYLE_BY_KIND = {
    "placeholder": {"shape": "invhouse", "fillcolor": '"#dbeafe"'},
    "variable": {"shape": "cylinder", "fillcolor": '"#fde68a"'},
    "const": {"shape": "box", "style": '"filled"', "fillcolor": '"#e5e7eb"'},
    "op": {},  # the node defaults
    "control": {"shape": "octagon", "fillcolor": '"#fce7f3"'},
    "scope": {"shape": "box3d", "fillcolor": '"#dcfce7"'},
    "series": {"shape": "folder", "fillcolor": '"#e0f2fe"'},
    "arg": {"shape": "oval", "fillcolor": '"#ccfbf1"'},   # a function's _Arg/_Retval
}
_LOOP_COLOR = '"#7c3aed"'   # loop-carried values of a functional While
_SWITCH_MARK = {0: ("F", '"#dc2626"'), 1: ("T", '"#16a34a"')}  # output_false, output_true
_GREY = '"#c0c0c0"'
_GREY_TEXT = '"#a0a0a0"'
_GREY_FILL = '"#f5f5f5"'
_FETCH_COLOR = '"#2563eb"'


def node_kind(op: str) -> str:
    if op in INPUT_OPS:
        return "placeholder"
    if op in VARIABLE_OPS:
        return "variable"
    if op in CONST_OPS:
        return "const"
    if op in CONTROL_FLOW_OPS:
        return "control"
    return "op"


def cluster_name(frame: str) -> str:
    """The subgraph name of a frame's cluster (Graphviz needs the ``cluster`` prefix)."""
    return f"cluster_{frame}"


def to_dot(graph: Graph, *, fetches: Sequence[str] = (), collapse: Collapse = "auto",
           expand: Iterable[str] = (), rankdir: str = "TB", show_consts: bool = True,
           max_boxes: int = DEFAULT_MAX_BOXES, view: View | None = None,
           marks: dict[str, str] | None = None,
           profile: dict[str, float] | None = None) -> str:
    """DOT text for ``graph``; see the module docstring for what it shows.

    ``collapse``: "auto" (default), a name-scope depth >= 1, or None for no collapse.
    ``view`` (from ``build_view``) skips deciding the boxes again. ``marks``: node name ->
    added/removed/renamed/changed (``dfg diff``), coloured, and counted on scope boxes.
    ``profile``: node name -> share of the run time (``dfg profile``): boxes coloured white
    to red by their nodes' total, the top ones labelled with it.
    """
    if rankdir not in RANKDIRS:
        raise UsageError(f"rankdir must be one of {', '.join(RANKDIRS)}, not '{rankdir}'")
    if view is None:
        view = build_view(graph, collapse=collapse, expand=expand, show_consts=show_consts,
                          max_boxes=max_boxes)
    return _DotWriter(graph, view, list(fetches), rankdir, marks, profile).write()


def _fetch_closure(graph: Graph, fetches: list[str]) -> tuple[set[str] | None, set[str]]:
    """(nodes the fetches need, fetched nodes); (None, empty) without fetches.

    Names resolve and the walk runs exactly as in ``dfg prune``, so both commands agree on
    what a fetch needs, and a misspelt fetch gets the same message (with a did-you-mean).
    """
    if not fetches:
        return None, set()
    from .prune import dependencies, resolve_tensor

    fetched = {resolve_tensor(graph, f, "fetch")[0] for f in fetches}
    return set(dependencies(graph, fetches)), fetched


# dfg profile: the boxes labelled with their share of the time
PROFILE_TOP = 12
PROFILE_MIN_SHARE = 0.02


def heat_color(share: float) -> str:
    """White to red by a share of the time (square root: small shares still show)."""
    t = min(1.0, math.sqrt(max(share, 0.0)))
    g = int(255 - 200 * t)
    return f"#ff{g:02x}{g:02x}"


# dfg diff's marks: (fill, border), and the order a mixed scope box takes its colour in
MARK_COLORS = {"changed": ('"#fde68a"', '"#b45309"'), "added": ('"#bbf7d0"', '"#15803d"'),
               "removed": ('"#fecaca"', '"#b91c1c"'), "renamed": ('"#bfdbfe"', '"#1d4ed8"')}
_MARK_SIGN = {"added": "+", "removed": "-", "changed": "~", "renamed": ">"}


class _DotWriter:
    def __init__(self, graph: Graph, view: View, fetches: list[str], rankdir: str,
                 marks: dict[str, str] | None = None,
                 profile: dict[str, float] | None = None) -> None:
        self.graph = graph
        self.marks = marks or {}
        # profile: each box's share of the time, and the boxes labelled with it
        self.shares: dict[str, float] = defaultdict(float)
        for name, share in (profile or {}).items():
            bid = view.node_box.get(name)
            if bid is None and graph.get(name) is not None and graph.node(name).out_edges:
                bid = view.node_box.get(graph.node(name).out_edges[0].dst)
            if bid is not None:
                self.shares[bid] += share
        ranked = sorted(self.shares.items(), key=lambda kv: -kv[1])
        self.top = {b for b, v in ranked[:PROFILE_TOP] if v >= PROFILE_MIN_SHARE}
        self.view = view
        self.rankdir = rankdir
        self.needed, self.fetch_nodes = _fetch_closure(graph, fetches)
        self.facts = TensorFacts(graph)
        self.library = self.facts.library
        # costly pictures get cheaper layout settings (see FAST_LAYOUT_COST)
        self.speed = (2 if view.cost > FASTEST_LAYOUT_COST
                      else 1 if view.cost > FAST_LAYOUT_COST else 0)

    # --- pieces ---------------------------------------------------------------------------
    def short(self, name: str) -> str:
        return short_name(name, self.view.prefix, MAX_LABEL - 1)

    def _is_needed(self, names: Iterable[str]) -> bool:
        return self.needed is None or any(n in self.needed for n in names)

    def _box_line(self, box: Box) -> str:
        a: dict[str, str] = {}
        if box.kind == "node":
            n = self.graph.node(box.path)
            a["label"] = _label(self.short(n.name), n.op)
            a.update(_STYLE_BY_KIND[node_kind(n.op)])
            tip = [f"{n.name} ({n.op})"]
            note = self._call_note(n)
            if note is not None:
                # runs library functions: drawn closed unless --expand opens it
                a["label"] = _label(self.short(n.name), n.op, short_name(note))
                a["peripheries"] = "2"
                if not self._is_open(n, True):
                    tip.append(f"--expand {n.name} draws its functions")
            if n.device:
                tip.append(f"device: {n.device}")
            a["tooltip"] = _label(*tip)
        else:
            count = len(box.members)
            head = box.path + ("/" if box.kind == "scope" else "_*")
            ops = Counter(self.graph.node(m).op for m in box.members)
            lines = [self.short(box.path) + ("/" if box.kind == "scope" else "_*"),
                     _op_count_line(count, ops)]
            if self.needed is not None:
                k = sum(1 for m in box.members if m in self.needed)
                if 0 < k < count:
                    lines.append(f"{k} needed")
            a["label"] = _label(*lines)
            a.update(_STYLE_BY_KIND[box.kind])
            top = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
            tip = [f"{head}: {count} nodes"] + [f"{op} x{c}" for op, c in top[:12]]
            if len(top) > 12:
                tip.append(f"... {len(top) - 12} more ops")
            a["tooltip"] = _label(*tip)
        share = self.shares.get(box.id)
        if share:
            a["fillcolor"] = quote(heat_color(share))
            a["tooltip"] = a["tooltip"][:-1] + f"\\n{100 * share:.1f}% of the time" + '"'
            if box.id in self.top:
                a["label"] = a["label"][:-1] + f"\\n{100 * share:.1f}% of the time" + '"'
                a["penwidth"] = "2"
        if self.marks:
            self._mark(box, a)
        if not self._is_needed(box.members):
            a.update(color=_GREY, fontcolor=_GREY_TEXT, fillcolor=_GREY_FILL)
        elif self.fetch_nodes.intersection(box.members):
            a.update(color=_FETCH_COLOR, penwidth="2.5")
        return f"{quote_id(box.id)} {_attrs(a)};"

    def _mark(self, box: Box, a: dict[str, str]) -> None:
        """Colour a box by what ``dfg diff`` found in it; a scope also counts it."""
        found = Counter(self.marks[m] for m in box.members if m in self.marks)
        if not found:
            return
        kind = next(k for k in MARK_COLORS if k in found)
        fill, border = MARK_COLORS[kind]
        a.update(fillcolor=fill, color=border, penwidth="2")
        if kind == "removed" and len(found) == 1:
            a["style"] = '"rounded,filled,dashed"'
        if box.kind != "node":
            counts = " ".join(f"{_MARK_SIGN[k]}{found[k]}" for k in MARK_COLORS if k in found)
            a["label"] = a["label"][:-1] + "\\n" + counts + '"'
        else:
            a["tooltip"] = a["tooltip"][:-1] + "\\n" + kind + '"'

    def _annotation_lines(self, const: str, bid: str) -> list[str]:
        aid = f"c:{const}>{bid}"
        a = {"label": quote(_const_summary(self.graph.node(const))), "shape": "plaintext",
             "style": '""', "fontsize": "8", "width": "0", "height": "0", "margin": "0.02",
             "tooltip": _label(f"{const} (Const)")}
        e = {"arrowsize": "0.4", "penwidth": "0.6", "color": '"#9ca3af"'}
        mark = self.marks.get(const)
        if mark is not None:   # a changed weight: say so on the annotation itself
            a["label"] = quote(f"{_MARK_SIGN[mark]} {_const_summary(self.graph.node(const))}")
            a["fontcolor"] = e["color"] = MARK_COLORS[mark][1]
        if not self._is_needed([const]) or not self._is_needed(self.view.boxes[bid].members):
            a["fontcolor"] = _GREY_TEXT
            e["color"] = _GREY
        return [f"{quote_id(aid)} {_attrs(a)};", f"{quote_id(aid)} -> {quote_id(bid)} {_attrs(e)};"]

    def _edge_line(self, src_box: str, dst_box: str, edges: list[Edge]) -> str:
        boxes = self.view.boxes
        merged = boxes[src_box].kind != "node" or boxes[dst_box].kind != "node"
        a: dict[str, str] = {}
        parts: list[str] = []
        src = self.graph.node(edges[0].src)
        control = all(e.is_control for e in edges)
        slots = {e.src_output for e in edges}
        if control:
            a["style"] = "dashed"
            a["color"] = '"#6b7280"'
            if self.view.layers:
                # layer pictures follow the data; control edges (mostly into the one NoOp
                # a function ends with) would stretch them
                a["constraint"] = "false"
        elif src.op in SWITCH_OPS and boxes[src_box].kind == "node" and len(slots) == 1:
            mark = _SWITCH_MARK.get(next(iter(slots)))
            if mark is not None:
                parts.append(mark[0])
                a["color"] = a["fontcolor"] = mark[1]
        elif len(slots) == 1 and boxes[src_box].kind == "node" and edges[0].src_output > 0:
            parts.append(f":{edges[0].src_output}")
        if not control:
            labels = {self.facts.edge_label(e) for e in edges if not e.is_control}
            if len(labels) == 1:
                parts.append(labels.pop())
        if merged and len(edges) > 1:
            parts.append(f"\u00d7{len(edges)}")
            a["penwidth"] = f"{min(1 + math.log2(len(edges)) / 2, 4):.2f}"
        text = " ".join(p for p in parts if p)
        if text:
            # xlabels are placed after layout; plain labels become layout nodes, which on
            # long edges costs dot minutes on big pictures
            a["xlabel" if self.speed else "label"] = quote(text)
        if all(is_back_edge(self.graph, e) for e in edges):
            # loop back edges: drawn, but not allowed to push Merge below the loop body
            a["constraint"] = "false"
        if self.needed is not None and not any(
                e.src in self.needed and e.dst in self.needed for e in edges):
            a["color"] = _GREY
            a["fontcolor"] = _GREY_TEXT
        line = f"{quote_id(src_box)} -> {quote_id(dst_box)}"
        return f"{line} {_attrs(a)};" if a else f"{line};"

    # --- function bodies ------------------------------------------------------------------
    def _calls(self, node: Node) -> list[tuple[str, str, dict[str, Any]]]:
        return call_sites(node.proto, self.library) if len(self.library) else []

    def _is_open(self, node: Node, top_level: bool) -> bool:
        return ((top_level and node.name in self.view.open_calls)
                or any(fn in self.view.open_functions for _a, fn, _b in self._calls(node)))

    def _call_note(self, node: Node) -> str | None:
        """``body: while_body, cond: while_cond`` for a node that runs functions."""
        calls = self._calls(node)
        if not calls:
            return None
        by_attr: dict[str, list[str]] = {}
        for a, fn, _ in calls:
            by_attr.setdefault(a or "function", []).append(fn)
        return ", ".join(f"{a}: {' | '.join(fns)}" for a, fns in by_attr.items())

    def _loop_edge(self, node: Node, nid: str) -> str | None:
        """A collapsed While's loop-carried values: a self-loop labelled with their dtypes
        (from the body's signature)."""
        if node.op not in WHILE_OPS:
            return None
        body = next((fn for a, fn, _ in self._calls(node) if a == "body"), None)
        fdef = self.library.get(body) if body else None
        if fdef is None:
            return None
        attrs = next(b for a, _fn, b in self._calls(node) if a == "body")
        types = [D.name(t) if t else "?" for _, t in signature(fdef, attrs).inputs]
        runs: list[list[Any]] = []   # int32, int32, float32 -> int32 x2, float32
        for t in types:
            if runs and runs[-1][0] == t:
                runs[-1][1] += 1
            else:
                runs.append([t, 1])
        text = ", ".join(t if k == 1 else f"{t} \u00d7{k}" for t, k in runs)
        text = "loop: " + text
        if len(text) > MAX_LABEL:
            text = text[:MAX_LABEL - 1] + "\u2026"
        a = {"label": quote(text), "tooltip": quote("loop-carried: " + text[6:]),
             "color": _LOOP_COLOR,
             "fontcolor": _LOOP_COLOR, "style": "bold", "constraint": "false"}
        return f"{quote_id(nid)} -> {quote_id(nid)} {_attrs(a)};"

    def _call_cluster(self, node: Node, nid: str, box_line: str, prefix: str,
                      stack: tuple[str, ...], edges: list[str], pad: str) -> str:
        """A functional node drawn open: a cluster holding its box and one sub-cluster per
        function it runs, with the body's nodes and edges. The caller's tensors flow into
        each function's arguments, results flow back (into the caller, or for a While body
        into the next iteration's arguments: the loop-carried values, bold, with dtypes)."""
        lines = [f"subgraph {quote_id('cluster_call:' + prefix + node.name)} {{",
                 f"  label={_label(f'{node.op} {node.name}')};",
                 '  style="rounded,dashed"; color="#0d9488"; fontcolor="#0f766e"; labeljust=l;',
                 f"  {box_line}"]
        is_while = node.op in WHILE_OPS
        for attr, fname, fattrs in self._calls(node):
            fdef = self.library.get(fname)
            where = f"{prefix}{node.name}>{attr}:{fname}>"
            title = f"{attr or 'call'}: {fname}"
            if fdef is None or fname in stack:
                continue  # a missing function or recursion: validate reports it
            try:
                body, _problems = instantiate_checked(fdef, fattrs, self.library)
            except DfgError:
                continue  # list-valued arguments: drawn closed
            bg = Graph(body)
            facts = TensorFacts(bg)
            sig = signature(fdef, fattrs)
            inner = [f"  subgraph {quote_id('cluster_fn:' + where)} {{",
                     f"    label={_label(title)};",
                     '    style="rounded,filled"; color="#14b8a6"; fillcolor="#f0fdfa"; '
                     'fontcolor="#0f766e"; labeljust=l;']
            for n in bg.nodes:
                if bg.get(n.name) is not n:
                    continue
                bid = "f:" + where + n.name
                a = {"label": _label(n.name, n.op), "tooltip": _label(f"{n.name} ({n.op})")}
                a.update(_STYLE_BY_KIND["arg" if n.op in ("_Arg", RETVAL_OP)
                                        else node_kind(n.op)])
                note = self._call_note(n)
                if note is not None:
                    a["label"] = _label(self.short(n.name), n.op, short_name(note))
                    a["peripheries"] = "2"
                line = f"{quote_id(bid)} {_attrs(a)};"
                if note is not None and self._is_open(n, False):
                    sub = self._call_cluster(n, bid, line, where, stack + (fname,), edges,
                                             pad + "    ")
                    inner.append("    " + sub)
                else:
                    inner.append(f"    {line}")
                for e in n.in_edges:
                    ea: dict[str, str] = {}
                    if e.is_control:
                        ea.update(style="dashed", color='"#6b7280"')
                    else:
                        text = facts.edge_label(e)
                        if e.src_output > 0:
                            text = f":{e.src_output} {text}".strip()
                        if text:
                            ea["label"] = quote(text)
                    src = quote_id("f:" + where + e.src)
                    edges.append(f"{src} -> {quote_id(bid)}" + (f" {_attrs(ea)};" if ea else ";"))
            inner.append("  }")
            lines.extend(inner)
            # the caller's side: arguments in, results out
            first_arg = 1 if node.op in ("If", "StatelessIf", "Case", "StatelessCase") else 0
            for k, (arg, t) in enumerate(sig.inputs):
                a = {"label": quote(D.name(t) if t else "?"), "color": '"#0d9488"'}
                if k + first_arg < len(node.inputs) or attr == "":
                    edges.append(f"{quote_id(nid)} -> {quote_id('f:' + where + arg)} "
                                 f"{_attrs(a)};")
            for arg, t in sig.outputs:
                ret = quote_id("f:" + where + arg + "_RetVal")
                dt = D.name(t) if t else "?"
                if is_while and attr == "body":
                    # loop-carried: result j becomes argument j of the next iteration
                    k = [o for o, _ in sig.outputs].index(arg)
                    if k < len(sig.inputs):
                        a = {"label": quote(f"next: {dt}"), "color": _LOOP_COLOR,
                             "fontcolor": _LOOP_COLOR, "style": "bold",
                             "constraint": "false"}
                        target = quote_id("f:" + where + sig.inputs[k][0])
                        edges.append(f"{ret} -> {target} {_attrs(a)};")
                else:
                    a = {"label": quote(dt), "color": '"#0d9488"'}
                    if is_while:
                        a["constraint"] = "false"   # cond's predicate goes back up
                    edges.append(f"{ret} -> {quote_id(nid)} {_attrs(a)};")
        lines.append("}")
        return ("\n" + pad).join(lines)

    # --- whole graph ----------------------------------------------------------------------
    def write(self) -> str:
        view, graph = self.view, self.graph
        by_frame: dict[str, list[str]] = defaultdict(list)
        edge_lines: list[str] = []
        for bid in sorted(view.boxes):
            box = view.boxes[bid]
            line = self._box_line(box)
            node = self.graph.node(box.path) if box.kind == "node" else None
            if node is not None and self._calls(node):
                if self._is_open(node, True):
                    pad = "  " * (1 + self.view.frames.frames[box.frame].depth)
                    line = self._call_cluster(node, bid, line, "", (), edge_lines, pad)
                else:
                    loop = self._loop_edge(node, bid)
                    if loop is not None:
                        edge_lines.append(loop)
            by_frame[box.frame].append(line)
        for const, bid in view.annotations:
            node_line, edge_line = self._annotation_lines(const, bid)
            by_frame[view.boxes[bid].frame].append(node_line)
            edge_lines.append(edge_line)

        edge_lines.extend(self._edge_line(s, d, edges) for s, d, edges in view.edges)
        edge_lines.sort()

        fa = view.frames
        if view.depth is None:
            collapse = "none"
        else:
            collapse = f"depth {view.depth}"
        if view.series:
            collapse += " + series"
        if view.auto:
            collapse += " (auto)"
        nodes = sum(1 for n in graph.nodes if graph.get(n.name) is n)
        out = [
            f"// dfg viz: {nodes} nodes, {len(view.boxes)} boxes, "
            f"{len(view.annotations)} const annotations, {len(fa.frames) - 1} loop frames; "
            f"collapse: {collapse}" + ("", "; fast layout", "; fastest layout")[self.speed],
            "digraph dfg {",
            f"  graph [rankdir={self.rankdir}, fontname=\"Helvetica\", fontsize=10, "
            f"nodesep=0.25, ranksep={0.3 if view.layers else 0.4}, newrank=true"
            + _SPEED_ATTRS[self.speed] + "];",
            '  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", '
            'fillcolor="#ffffff", height=0.3];',
            '  edge [fontname="Helvetica", fontsize=8, arrowsize=0.7];',
        ]
        out.extend("  " + line for line in sorted(by_frame.get(ROOT, [])))
        self._clusters(ROOT, by_frame, out, 1)
        out.extend("  " + line for line in edge_lines)
        out.append("}")
        return "\n".join(out) + "\n"

    def _clusters(self, parent: str, by_frame: dict[str, list[str]], out: list[str],
                  level: int) -> None:
        fa = self.view.frames
        pad = "  " * level
        for name in sorted(fa.frames[parent].children):
            f = fa.frames[name]
            pi = "?" if f.parallel_iterations is None else str(f.parallel_iterations)
            out.append(f"{pad}subgraph {quote_id(cluster_name(name))} {{")
            title = _label("while " + self.short(name), f"parallel_iterations={pi}")
            out.append(f"{pad}  label={title};")
            out.append(f"{pad}  tooltip={_label(f'while {name}')};")
            out.append(f'{pad}  style="rounded,filled"; color="#6366f1"; '
                       f'fillcolor="{_frame_fill(f.depth)}"; fontcolor="#4338ca"; '
                       'labeljust=l;')
            out.extend(f"{pad}  {line}" for line in sorted(by_frame.get(name, [])))
            self._clusters(name, by_frame, out, level + 1)
            out.append(f"{pad}}}")


def _frame_fill(depth: int) -> str:
    # deeper loops a little darker, so nesting reads at a glance
    shades = ["#f5f3ff", "#ede9fe", "#ddd6fe", "#c4b5fd"]
    return shades[min(depth - 1, len(shades) - 1)]


# ------------------------------------------------------------------------------------------
# Rendering


def find_dot() -> str:
    """Path of the Graphviz ``dot`` binary, or GraphvizNotFoundError with the install hint."""
    path = shutil.which("dot")
    if path is None:
        raise GraphvizNotFoundError(f"the Graphviz 'dot' program was not found on PATH; "
                                    f"{INSTALL_HINT}")
    return path


def render(dot: str, fmt: str, timeout: float | None = None) -> bytes:
    """Lay out ``dot`` with Graphviz and return the ``fmt`` (svg, png, pdf) bytes.

    ``fmt == "dot"`` returns the text itself, so callers need no special case.
    """
    if fmt == "dot":
        return dot.encode("utf-8")
    if fmt not in RENDER_FORMATS:
        raise UsageError(f"unknown picture format '{fmt}' "
                         f"(choose from {', '.join(OUTPUT_FORMATS)})")
    exe = find_dot()
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=dot.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise DfgError(f"Graphviz 'dot' did not finish within {timeout:g} s; try a "
                       "smaller --collapse depth or --fetch") from None
    except OSError as e:
        raise GraphvizNotFoundError(f"cannot run Graphviz 'dot' ({exe}): {e.strerror}; "
                                    f"{INSTALL_HINT}") from None
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DfgError(f"Graphviz 'dot' failed (exit {proc.returncode}): "
                       + (msg[-1] if msg else "no message"))
    return proc.stdout


# ------------------------------------------------------------------------------------------
# What to draw of a TensorFlow 2 model: the model's function, not the wrappers around it

# Ops a wrapper function holds besides its one call: plumbing, no computation.
_PLUMBING_OPS = frozenset({"_Arg", "_Retval", "Identity", "IdentityN", "NoOp", "Const"})
_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


def unwrap_function(library: Any, fname: str) -> str:
    """The function doing the work behind ``fname``: while a function's body is one call
    (PartitionedCall/StatefulPartitionedCall) and plumbing (Identity, NoOp, Const, its
    arguments and results), the called function; the signature wrapper a SavedModel serves
    through is such a function, and so is Keras's own call wrapper."""
    lib = Library(library)
    seen = {fname}
    while True:
        fdef = lib.get(fname)
        if fdef is None:
            return fname
        calls = [nd for nd in fdef.node_def if nd.op not in _PLUMBING_OPS]
        if len(calls) != 1 or calls[0].op not in _CALL_OPS or "f" not in calls[0].attr:
            return fname
        nxt = calls[0].attr["f"].func.name
        if nxt in seen or nxt not in lib:
            return fname
        seen.add(nxt)
        fname = nxt


def function_graph(graph_def: Any, fname: str) -> Graph:
    """A library function's body as a graph to draw (its arguments and results as _Arg and
    _Retval nodes), with the library, so the calls inside it can be opened."""
    lib = Library(graph_def.library)
    fdef = lib.function(fname)
    body, _problems = instantiate_checked(fdef, {}, lib)
    body.library.CopyFrom(graph_def.library)
    body.versions.CopyFrom(graph_def.versions)
    return Graph(body)


def saved_model_function(sm: Any, signature: str | None = None) -> str | None:
    """The function a SavedModel's signature (default: serving_default, or the only one)
    runs, unwrapped (:func:`unwrap_function`); None when the signature's outputs do not
    come from one function call (a TF1 model)."""
    sig = sm.signature(signature)
    gd = sm.graph_def
    nodes = {nd.name: nd for nd in gd.node}
    called: set[str] = set()
    for spec in sig.outputs.values():
        nd = nodes.get(spec.name.split(":")[0])
        while nd is not None and nd.op in ("Identity", "IdentityN") and nd.input:
            nd = nodes.get(nd.input[0].split(":")[0].lstrip("^"))
        if nd is None or nd.op not in _CALL_OPS or "f" not in nd.attr:
            return None
        called.add(nd.attr["f"].func.name)
    if len(called) != 1:
        return None
    return unwrap_function(gd.library, called.pop())
