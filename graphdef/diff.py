"""Structural diff of two GraphDefs (with their function libraries) or two checkpoints.

Nodes are matched by name first. The nodes left over on each side are matched by structure:
a node of A and a node of B with the same op, device, attributes and inputs (each input's
producer mapped through the matches found so far) are the same node renamed. Matching runs
as a worklist in dependency order, so a whole renamed layer is found producer first, each
node once: linear in the size of the graphs (plus a hash per attribute). Loop back edges
(inputs from NextIteration) are left out of the structure, or a renamed loop would never
become ready.

Every matched pair whose NodeDefs differ is compared field by field: op, inputs (rewired:
data inputs in order, control inputs as a set, producers mapped through renames),
attributes (a constant's ``value`` with the largest absolute difference), device.

Functions are matched by name, then by name with TensorFlow's uniquifying number taken off
(``__inference_call_123`` and ``__inference_call_456``), and their bodies diffed the same
way; a function's new name is mapped everywhere it is referred to (``f`` attributes, ops
naming a function), so a renamed function does not make every caller look changed.

Checkpoints (and a SavedModel's variables) are diffed per key: added, removed, dtype or
shape changed, value changed (with the largest absolute difference); an entry whose
checksum (crc32c) and size are unchanged is not read.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as D
from .tensors import format_shape, shape_from_proto

# The checkpoint key of the object graph: bookkeeping, not a variable.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_BACK_EDGE_OPS = frozenset({"NextIteration", "RefNextIteration"})
_CONST_OPS = frozenset({"Const", "HostConst"})
# TensorFlow makes function names unique with a trailing number
_UNIQUIFIER = re.compile(r"_\d+$")


@dataclass
class NodeDiff:
    """What changed between two lists of nodes (a graph or one function body)."""

    added: list[dict[str, Any]] = field(default_factory=list)     # {name, op}
    removed: list[dict[str, Any]] = field(default_factory=list)   # {name, op}
    renamed: list[dict[str, Any]] = field(default_factory=list)   # {name, before, after, op}
    changed: list[dict[str, Any]] = field(default_factory=list)   # {name, what, before, after}
    # A name -> B name of every matched node (not reported: how inputs are compared)
    mapping: dict[str, str] = field(default_factory=dict, repr=False)

    def empty(self) -> bool:
        return not (self.added or self.removed or self.renamed or self.changed)

    def as_dict(self) -> dict[str, Any]:
        return {"added": self.added, "removed": self.removed, "renamed": self.renamed,
                "changed": self.changed}


@dataclass
class Diff:
    """The whole report; ``as_dict`` is what ``dfg diff --json`` prints."""

    kind: str                                   # "graph" | "checkpoint"
    nodes: NodeDiff = field(default_factory=NodeDiff)
    functions: dict[str, Any] = field(default_factory=lambda: {
        "added": [], "removed": [], "renamed": [], "changed": []})
    variables: NodeDiff | None = None           # a SavedModel's checkpoint
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        f = self.functions
        return (self.nodes.empty() and not any(f[k] for k in f)
                and (self.variables is None or self.variables.empty()))

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "same": self.same}
        out.update(self.nodes.as_dict())
        out["functions"] = self.functions
        if self.variables is not None:
            out["variables"] = self.variables.as_dict()
        return out

    def marks(self) -> dict[str, str]:
        """Node name (B's name; A's for removed nodes) -> added/removed/renamed/changed,
        what the pictures colour."""
        out: dict[str, str] = {}
        for rec in self.nodes.added:
            out[rec["name"]] = "added"
        for rec in self.nodes.removed:
            out[rec["name"]] = "removed"
        for rec in self.nodes.renamed:
            out[rec["name"]] = "renamed"
        for rec in self.nodes.changed:
            out[rec["name"]] = "changed"
        return out


# ------------------------------------------------------------------------------------------
# Values


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def tensor_summary(arr: Any, dtype: int | None = None) -> str:
    """``float32 [3,3]``, with the values when there are at most four."""
    import numpy as np

    name = D.name(dtype) if dtype is not None else str(arr.dtype)
    text = f"{name} {format_shape(tuple(arr.shape))}"
    if arr.size <= 4 and arr.dtype != object:
        vals = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                         for v in np.asarray(arr).reshape(-1).tolist())
        text += f" = [{vals}]" if arr.ndim else f" = {vals}"
    return text


def max_abs_diff(a: Any, b: Any) -> float | None:
    """Largest |a - b| of two numeric arrays of one shape (NaN when either holds NaN at a
    place), else None (strings, different shapes)."""
    import numpy as np

    if a.shape != b.shape or a.dtype == object or b.dtype == object:
        return None
    try:
        if a.dtype.kind == "b":
            a, b = a.astype(np.int8), b.astype(np.int8)
        if a.size == 0:
            return 0.0
        d = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                   - b.astype(np.complex128 if b.dtype.kind == "c" else np.float64))
        return float(np.max(d))
    except (TypeError, ValueError):
        return None


def _attr_json(av: Any) -> Any:
    """An AttrValue as plain JSON: dtypes by name, shapes as lists (null: unknown), a tensor
    as its summary, functions by name."""
    from .attrs import to_python

    kind = av.WhichOneof("value")
    try:
        v = to_python(av)
    except Exception:  # undecodable tensors
        return f"<{kind}>"
    if kind == "type":
        return D.name(v)
    if kind == "tensor":
        return tensor_summary(v, av.tensor.dtype)
    if kind == "list":
        lv = av.list
        if len(lv.type):
            return [D.name(t) for t in v]
        if len(lv.shape):
            return [None if s is None else list(s) for s in v]
        if len(lv.tensor):
            return [tensor_summary(x) for x in v]
        return [x if not isinstance(x, bytes) else repr(x) for x in v]
    if kind == "shape":
        return None if v is None else list(v)
    if isinstance(v, bytes):
        return repr(v)
    return v


# ------------------------------------------------------------------------------------------
# Nodes


def _producer(inp: str) -> str:
    # "^x", "x", "x:1", function bodies' "x:output:0": the producing node (or argument)
    return inp[1:] if inp.startswith("^") else inp.split(":", 1)[0]


def _remap(inp: str, mapping: dict[str, str]) -> str:
    ctrl = inp.startswith("^")
    body = inp[1:] if ctrl else inp
    name, sep, rest = body.partition(":")
    name = mapping.get(name, name)
    return ("^" if ctrl else "") + name + sep + rest


def _inputs(nd: Any, mapping: dict[str, str] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(data inputs in order, control inputs sorted), producers mapped A -> B names."""
    data: list[str] = []
    ctrl: list[str] = []
    for inp in nd.input:
        if mapping is not None:
            inp = _remap(inp, mapping)
        (ctrl if inp.startswith("^") else data).append(inp)
    return tuple(data), tuple(sorted(ctrl))


class _AttrKeys:
    """Comparable forms of attributes, functions named by their B names."""

    def __init__(self, fmap: dict[str, str]) -> None:
        self.fmap = fmap

    def one(self, av: Any) -> Any:
        kind = av.WhichOneof("value")
        if kind == "func":
            return ("func", self.fmap.get(av.func.name, av.func.name),
                    _digest(av.func.SerializeToString(deterministic=True))
                    if len(av.func.attr) else b"")
        if kind == "list" and len(av.list.func):
            return ("funcs",) + tuple(self.fmap.get(f.name, f.name) for f in av.list.func)
        data = av.SerializeToString(deterministic=True)
        # big tensors: a digest, so keys stay small
        return _digest(data) if len(data) > 64 else data

    def node(self, nd: Any) -> tuple:
        return tuple(sorted((k, self.one(v)) for k, v in nd.attr.items()))


def diff_nodes(a_nodes: Iterable[Any], b_nodes: Iterable[Any],
               fmap: dict[str, str] | None = None,
               fixed: dict[str, str] | None = None) -> NodeDiff:
    """Diff two lists of NodeDefs. ``fmap``: function names A -> B. ``fixed``: names that
    are the same thing on both sides without being nodes (a function's arguments)."""
    fmap = fmap or {}
    keys = _AttrKeys(fmap)
    a = {nd.name: nd for nd in a_nodes}
    b = {nd.name: nd for nd in b_nodes}
    amap: dict[str, str] = {n: n for n in a if n in b}
    if fixed:
        for k, v in fixed.items():
            amap.setdefault(k, v)
    out = NodeDiff()
    a_left = sorted(n for n in a if n not in b)
    b_left = sorted(n for n in b if n not in a)
    if a_left and b_left:
        by_rule: set[str] = set()
        renamed = _match_renamed(a, b, a_left, b_left, amap, keys, fmap, by_rule)
        for an, bn in sorted(renamed.items(), key=lambda kv: kv[1]):
            out.renamed.append({"name": bn, "before": an, "after": bn, "op": b[bn].op})
            if an in by_rule:
                # matched by a scope rename, not structure: it may have changed as well
                out.changed.extend(_compare(bn, a[an], b[bn], amap, keys, fmap))
        done_b = set(renamed.values())
        a_left = [n for n in a_left if n not in renamed]
        b_left = [n for n in b_left if n not in done_b]
    out.added = [{"name": n, "op": b[n].op} for n in b_left]
    out.removed = [{"name": n, "op": a[n].op} for n in a_left]
    for n in sorted(a.keys() & b.keys()):
        x, y = a[n], b[n]
        if x == y and not _has_mapped_refs(x, amap, fmap):
            continue
        out.changed.extend(_compare(n, x, y, amap, keys, fmap))
    out.mapping = amap
    return out


def _has_mapped_refs(nd: Any, amap: dict[str, str], fmap: dict[str, str]) -> bool:
    # equal protos can still differ in meaning when a producer they name was renamed
    # (A's x is B's y, and B's own x is another node)
    if any(amap.get(_producer(i), _producer(i)) != _producer(i) for i in nd.input):
        return True
    return bool(fmap) and (nd.op in fmap and fmap[nd.op] != nd.op)


def _match_renamed(a: dict[str, Any], b: dict[str, Any], a_left: list[str],
                   b_left: list[str], amap: dict[str, str], keys: _AttrKeys,
                   fmap: dict[str, str], by_rule: set[str]) -> dict[str, str]:
    """A name -> B name of the leftover nodes that are the same node renamed (see the module
    docstring). ``amap`` gains the matches, ``by_rule`` the A names matched by a scope
    rename rather than by structure.

    Two rules, the first preferred: the same structure (op, device, attributes, inputs
    mapped), found in dependency order; and, once that finds nothing more, the scope
    renames it found (``dense_1`` -> ``classifier`` wherever a path segment was renamed)
    applied to the remaining names, for nodes of the same op, so that a renamed layer whose
    weights also changed is reported as renamed and changed, not as all new."""
    sides = []
    for nodes, left in ((a, a_left), (b, b_left)):
        left_set = set(left)
        pending: dict[str, int] = {}
        consumers: dict[str, list[str]] = defaultdict(list)
        for n in left:
            prods = {_producer(i) for i in nodes[n].input
                     if not _is_back_edge(nodes, i)}
            waiting = [p for p in prods if p in left_set]
            pending[n] = len(waiting)
            for p in waiting:
                consumers[p].append(n)
        sides.append((nodes, pending, consumers))
    renamed: dict[str, str] = {}
    matched: list[set[str]] = [set(), set()]
    buckets: list[dict[tuple, deque[str]]] = [defaultdict(deque), defaultdict(deque)]
    ready: list[deque[str]] = [deque(n for n in a_left if sides[0][1][n] == 0),
                               deque(n for n in b_left if sides[1][1][n] == 0)]

    def key(side: int, n: str) -> tuple:
        nodes = sides[side][0]
        nd = nodes[n]
        op = fmap.get(nd.op, nd.op) if side == 0 else nd.op
        data: list[str] = []
        ctrl: list[str] = []
        for inp in nd.input:
            if _is_back_edge(nodes, inp):
                inp = "<next>" + inp.partition(":")[1:][1]   # which slot, not whose
            elif side == 0:
                inp = _remap(inp, amap)
            (ctrl if inp.startswith("^") else data).append(inp)
        return (op, nd.device, keys.node(nd), tuple(data), tuple(sorted(ctrl)))

    def resolve(side: int, n: str) -> None:
        _nodes, pending, consumers = sides[side]
        for c in consumers.get(n, ()):
            pending[c] -= 1
            if pending[c] == 0:
                ready[side].append(c)

    def pair(an: str, bn: str) -> None:
        renamed[an] = bn
        amap[an] = bn
        matched[0].add(an)
        matched[1].add(bn)
        resolve(0, an)
        resolve(1, bn)

    def drain() -> None:
        while ready[0] or ready[1]:
            side = 0 if ready[0] else 1
            n = ready[side].popleft()
            if n in matched[side]:
                continue
            k = key(side, n)
            other = buckets[1 - side].get(k)
            while other and other[0] in matched[1 - side]:
                other.popleft()
            if other:
                m = other.popleft()
                pair(*((n, m) if side == 0 else (m, n)))
            else:
                buckets[side][k].append(n)

    b_left_set = set(b_left)
    while True:
        drain()
        rules = _segment_renames(renamed)
        if not rules:
            break
        progress = False
        for an in a_left:
            if an in matched[0]:
                continue
            parts = an.split("/")
            bn = "/".join(rules.get(p, p) for p in parts)
            if (bn != an and bn in b_left_set and bn not in matched[1]
                    and fmap.get(a[an].op, a[an].op) == b[bn].op):
                pair(an, bn)
                by_rule.add(an)
                progress = True
        if not progress:
            break
    return renamed


def _segment_renames(renamed: dict[str, str]) -> dict[str, str]:
    """Path segments renamed consistently: ``x/dense_1/MatMul`` -> ``x/head/MatMul`` gives
    dense_1 -> head; a segment renamed two ways is no rule."""
    rules: dict[str, str] = {}
    bad: set[str] = set()
    for an, bn in renamed.items():
        pa, pb = an.split("/"), bn.split("/")
        if len(pa) != len(pb):
            continue
        diffs = [(x, y) for x, y in zip(pa, pb) if x != y]
        for x, y in diffs:
            if rules.setdefault(x, y) != y:
                bad.add(x)
    for x in bad:
        del rules[x]
    return rules


def _is_back_edge(nodes: dict[str, Any], inp: str) -> bool:
    p = nodes.get(_producer(inp))
    return p is not None and p.op in _BACK_EDGE_OPS


def _compare(name: str, x: Any, y: Any, amap: dict[str, str], keys: _AttrKeys,
             fmap: dict[str, str]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    if fmap.get(x.op, x.op) != y.op:
        recs.append({"name": name, "what": "op", "before": x.op, "after": y.op})
    if _inputs(x, amap) != _inputs(y, None):
        recs.append({"name": name, "what": "inputs", "before": list(x.input),
                     "after": list(y.input)})
    for k in sorted(set(x.attr) | set(y.attr)):
        xa = x.attr[k] if k in x.attr else None
        ya = y.attr[k] if k in y.attr else None
        if xa is not None and ya is not None and keys.one(xa) == keys.one(ya):
            continue
        if (k == "value" and x.op in _CONST_OPS and y.op in _CONST_OPS
                and xa is not None and ya is not None):
            recs.append(_value_record(name, xa.tensor, ya.tensor))
            continue
        recs.append({"name": name, "what": "attr", "attr": k,
                     "before": None if xa is None else _attr_json(xa),
                     "after": None if ya is None else _attr_json(ya)})
    if x.device != y.device:
        recs.append({"name": name, "what": "device", "before": x.device, "after": y.device})
    return recs


def _value_record(name: str, ta: Any, tb: Any) -> dict[str, Any]:
    from .tensors import to_numpy

    try:
        va, vb = to_numpy(ta), to_numpy(tb)
    except Exception:  # undecodable or too big to materialize: say what we can
        return {"name": name, "what": "value",
                "before": f"{D.name(ta.dtype)} {format_shape(shape_from_proto(ta.tensor_shape))}",
                "after": f"{D.name(tb.dtype)} {format_shape(shape_from_proto(tb.tensor_shape))}",
                "max_abs_diff": None}
    return {"name": name, "what": "value", "before": tensor_summary(va, ta.dtype),
            "after": tensor_summary(vb, tb.dtype), "max_abs_diff": max_abs_diff(va, vb)}


# ------------------------------------------------------------------------------------------
# Functions


def _function_digest(fdef: Any) -> bytes:
    # what a function does, without its name: the ops of its body and its arguments' types
    sig = fdef.signature
    parts = [",".join(sorted(nd.op for nd in fdef.node_def)),
             ",".join(str(a.type) for a in sig.input_arg),
             ",".join(str(a.type) for a in sig.output_arg)]
    return _digest("|".join(parts).encode())


def match_functions(fa: dict[str, Any], fb: dict[str, Any]) -> dict[str, str]:
    """A name -> B name: same names, then names equal but for TensorFlow's uniquifying
    number, paired by what their bodies hold, then in name order."""
    fmap = {n: n for n in fa if n in fb}
    stems: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for n in sorted(fa):
        if n not in fb:
            stems[_UNIQUIFIER.sub("", n)][0].append(n)
    for n in sorted(fb):
        if n not in fa:
            stems[_UNIQUIFIER.sub("", n)][1].append(n)
    for left, right in stems.values():
        if not left or not right:
            continue
        by_digest: dict[bytes, list[str]] = defaultdict(list)
        for n in right:
            by_digest[_function_digest(fb[n])].append(n)
        rest_a: list[str] = []
        for n in left:
            cands = by_digest.get(_function_digest(fa[n]))
            if cands:
                fmap[n] = cands.pop(0)
            else:
                rest_a.append(n)
        taken = set(fmap.values())
        rest_b = [n for n in right if n not in taken]
        for x, y in zip(rest_a, rest_b):
            fmap[x] = y
    return fmap


def _signature_records(fname: str, x: Any, y: Any) -> list[dict[str, Any]]:
    # argument types in order: TensorFlow puts the function's own name into argument
    # names, so a re-export renames them all; names are no difference
    def args(sig_args: Any) -> list[str]:
        return [D.name(a.type) if a.type else (a.type_attr or a.type_list_attr)
                for a in sig_args]

    recs = []
    for what, xa, ya in (("inputs", x.signature.input_arg, y.signature.input_arg),
                         ("outputs", x.signature.output_arg, y.signature.output_arg)):
        if args(xa) != args(ya):
            recs.append({"name": fname, "what": f"signature {what}", "before": args(xa),
                         "after": args(ya)})
    return recs


def diff_libraries(lib_a: Any, lib_b: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(the ``functions`` report, A -> B function names)."""
    fa = {f.signature.name: f for f in lib_a.function}
    fb = {f.signature.name: f for f in lib_b.function}
    fmap = match_functions(fa, fb)
    matched_b = set(fmap.values())
    report: dict[str, Any] = {
        "added": sorted(n for n in fb if n not in matched_b),
        "removed": sorted(n for n in fa if n not in fmap),
        "renamed": [{"name": b, "before": a, "after": b}
                    for a, b in sorted(fmap.items(), key=lambda kv: kv[1]) if a != b],
        "changed": [],
    }
    for an, bn in sorted(fmap.items(), key=lambda kv: kv[1]):
        x, y = fa[an], fb[bn]
        if an == bn and x == y:
            continue
        # arguments correspond by position
        args = {p.name: q.name for p, q in zip(x.signature.input_arg, y.signature.input_arg)}
        nd = diff_nodes(x.node_def, y.node_def, fmap, fixed=args)
        sig = _signature_records(bn, x, y)
        ret_x = [_remap(x.ret.get(o.name, ""), nd.mapping) for o in x.signature.output_arg]
        ret_y = [y.ret.get(o.name, "") for o in y.signature.output_arg]
        if ret_x != ret_y:
            sig.append({"name": bn, "what": "results", "before": list(x.ret.values()),
                        "after": list(y.ret.values())})
        if nd.empty() and not sig:
            continue
        rec = {"name": bn}
        if an != bn:
            rec["before"] = an
        rec.update(nd.as_dict())
        rec["changed"] = sig + rec["changed"]
        report["changed"].append(rec)
    return report, fmap


# ------------------------------------------------------------------------------------------
# Graphs and checkpoints


def diff_graphs(a: Any, b: Any) -> Diff:
    """Diff two GraphDefs, their function libraries too."""
    functions, fmap = diff_libraries(a.library, b.library)
    d = Diff("graph", diff_nodes(a.node, b.node, fmap), functions)
    d.sizes = {"a_nodes": len(a.node), "b_nodes": len(b.node),
               "a_functions": len(a.library.function), "b_functions": len(b.library.function)}
    return d


def diff_bundles(a: Any, b: Any) -> NodeDiff:
    """Diff two checkpoints (``BundleReader``s) per key; the object graph is left out."""
    out = NodeDiff()
    ka = {k for k in a.keys() if k != _OBJECT_GRAPH_KEY}
    kb = {k for k in b.keys() if k != _OBJECT_GRAPH_KEY}

    def desc(r: Any, k: str) -> str:
        e = r.entry(k)
        return f"{D.name(e.dtype)} {format_shape(shape_from_proto(e.shape))}"

    out.added = [{"name": k, "what": desc(b, k)} for k in sorted(kb - ka)]
    out.removed = [{"name": k, "what": desc(a, k)} for k in sorted(ka - kb)]
    for k in sorted(ka & kb):
        ea, eb = a.entry(k), b.entry(k)
        if ea.dtype != eb.dtype or shape_from_proto(ea.shape) != shape_from_proto(eb.shape):
            out.changed.append({"name": k, "what": "type", "before": desc(a, k),
                                "after": desc(b, k)})
            continue
        if (ea.crc32c == eb.crc32c and ea.size == eb.size and not len(ea.slices)
                and not len(eb.slices)):
            continue   # same checksum and size: the same bytes, not worth reading
        va, vb = a.read(k), b.read(k)
        if va.dtype == object:
            if va.shape == vb.shape and list(va.reshape(-1)) == list(vb.reshape(-1)):
                continue
        else:
            import numpy as np

            if np.array_equal(va, vb, equal_nan=va.dtype.kind in "fc"):
                continue
        out.changed.append({"name": k, "what": "value", "before": tensor_summary(va, ea.dtype),
                            "after": tensor_summary(vb, eb.dtype),
                            "max_abs_diff": max_abs_diff(va, vb)})
    return out


def diff_checkpoints(a: Any, b: Any) -> Diff:
    d = Diff("checkpoint", diff_bundles(a, b))
    d.sizes = {"a_variables": len(a.keys()), "b_variables": len(b.keys())}
    return d


def merged_graph(a: Any, b: Any, result: Diff) -> tuple[Any, dict[str, str]]:
    """What the diff pictures draw: B's graph plus A's removed nodes (their inputs named as
    in B where the producer was matched), and the mark of each node that differs."""
    from dfg.schemas import graph_pb2

    from .graph import Graph

    merged = graph_pb2.GraphDef()
    merged.CopyFrom(b)
    mapping = result.nodes.mapping
    a_nodes = {nd.name: nd for nd in a.node}
    for rec in result.nodes.removed:
        nd = merged.node.add()
        nd.CopyFrom(a_nodes[rec["name"]])
        for i, inp in enumerate(nd.input):
            nd.input[i] = _remap(inp, mapping)
    return Graph(merged), result.marks()
