"""Pass ``cse``: common subexpression elimination.

Two nodes are the same computation when they have the same op, device, attrs (hints starting
with ``_`` aside), data inputs (in any order for ops whose OpDef says ``is_commutative``) and
set of control inputs; Consts compare by dtype, shape and value. One survives and takes the
other's readers. Nodes are visited in topological order, so once two producers merge, their
readers compare equal too and a whole duplicated subgraph collapses in one pass.

Control flow: two Switches of the same tensor on the same predicate (a cond reading ``x`` in
two places makes one each) have identical outputs and deadness and merge, as do two constant
Enters of the same tensor into the same frame. Other control-flow ops (Merge, Exit, loop
Enters, NextIteration, LoopCond) each carry their own loop or branch state and never merge.

Never merged: stateful ops (two reads of a variable or two random draws are different
events), Placeholders and fed nodes (a fed node's readers must keep reading
the fed value, and the others must not start to), nodes reading or producing refs or
resources. A node whose name is fetched or a target may absorb others but is never removed;
two such nodes both stay.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..graph import Graph, without_gc
from .common import (
    Editor,
    PassOptions,
    Protected,
    attr,
    attr_type,
    const_value,
    input_types,
    is_control_flow,
    is_stateful,
    output_types,
    plain_types,
    registry,
)


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    seen: dict[tuple, str] = {}
    alias: dict[str, str] = {}   # merged-away node -> its survivor (rewired once, at the end)
    # (op, attrs) -> eligible: it depends on nothing else but the name (pinned), and asking
    # the OpDef registry for each node's types was most of the pass
    eligible: dict[tuple, bool] = {}
    # Consts are compared by value, but decoding and hashing every weight is costly and most
    # are alone of their dtype and shape: (device, dtype, dims, controls) -> the first such
    # Const, not yet decoded (None once a second one came and both went into ``seen``)
    lonely: dict[tuple, tuple[str, Any, frozenset] | None] = {}
    for node in graph.topological_order():
        name = node.name
        nd = ed.peek(name)     # read-only: merging rewires readers through the editor
        if nd is None or prot.pinned(name):
            continue
        attrs = None if nd.op == "Const" else _attrs(nd)
        ok = eligible.get((nd.op, attrs))
        if ok is None:
            ok = eligible[(nd.op, attrs)] = _eligible(prot, nd)
        if not ok:
            continue
        if attrs is None:
            value = attr(nd, "value")
            if value is None:
                continue
            controls = frozenset(_find(alias, c) for c in ed.control_inputs(name))
            pre = (nd.device, attr_type(nd, "dtype"),
                   tuple(d.size for d in value.tensor.tensor_shape.dim), controls)
            if pre not in lonely:
                lonely[pre] = (name, nd, controls)
                continue
            first = lonely[pre]
            if first is not None:
                lonely[pre] = None
                first_key = _const_key(first[1], first[2])
                if first_key is not None and first_key not in seen:
                    seen[first_key] = first[0]
            key = _const_key(nd, controls)
        else:
            key = _key(ed, nd, alias, attrs)
        if key is None:
            continue
        other = seen.get(key)
        if other is None:
            seen[key] = name
            continue
        if key[0] == "Const" and key[4][0] == "sampled" and not _same_value(ed, name, other):
            continue   # equal samples, different values: both stay (rare)
        if prot.keeps_name(name) and prot.keeps_name(other):
            continue
        if prot.keeps_name(name):
            survivor, victim = name, other
            seen[key] = name
        else:
            survivor, victim = other, name
        # a survivor may itself be merged later: alias links form chains that _find follows
        # (rewriting every earlier entry here instead was quadratic in the merges)
        alias[victim] = survivor
    if alias:
        for r in sorted({r for v in alias for r in ed.readers.get(v, ())} - set(alias)):
            ed.set_inputs(r, [(_find(alias, s), k) for s, k in ed.data_inputs(r)],
                          [_find(alias, c) for c in ed.control_inputs(r)])
        for v in alias:
            ed.remove(v)
    return ed.finish()


def _find(alias: dict[str, str], name: str) -> str:
    """The node ``name`` was finally merged into (itself if none), shortening the chain."""
    root = name
    while root in alias:
        root = alias[root]
    while name != root:
        nxt = alias[name]
        alias[name] = root
        name = nxt
    return root


def _eligible(prot: Protected, nd: Any) -> bool:
    if prot.pinned(nd.name) or is_stateful(nd.op):
        return False
    if is_control_flow(nd.op) and not (
            nd.op == "Switch" or nd.op == "Enter" and _is_constant_enter(nd)):
        return False
    if nd.op == "Const":
        return True
    return plain_types(input_types(nd)) and plain_types(output_types(nd))


def _is_constant_enter(nd: Any) -> bool:
    av = attr(nd, "is_constant")
    return av is not None and av.b


def _attrs(nd: Any) -> tuple:
    return tuple(sorted((k, v.SerializeToString(deterministic=True))
                        for k, v in nd.attr.items() if not k.startswith("_")))


# Above this many bytes a Const's key hashes an evenly spaced sample of its bytes (a full
# hash of every weight cost more than the rest of the pass: 16 MB of folded constants took
# 17 ms); a key match is then confirmed by comparing the whole values (_same_value).
SAMPLE_ABOVE = 1 << 16
_SAMPLES = 4096


def _const_key(nd: Any, controls: frozenset) -> tuple | None:
    v = const_value(nd)
    if v is None:
        return None
    if v.dtype.kind == "O":
        digest = ("full", hashlib.sha256(repr(v.tolist()).encode()).hexdigest())
    elif v.nbytes > SAMPLE_ABOVE:
        raw = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
        sample = raw[::raw.size // _SAMPLES]
        digest = ("sampled", hashlib.sha256(sample.tobytes() + raw[-64:].tobytes()).hexdigest())
    else:
        digest = ("full", hashlib.sha256(v.tobytes()).hexdigest())
    return ("Const", nd.device, attr_type(nd, "dtype"), v.shape, digest, controls)


def _same_value(ed: Editor, a: str, b: str) -> bool:
    """Whether Consts ``a`` and ``b`` hold the same bytes (NaNs with the same bits are equal,
    as a byte hash would have it)."""
    va, vb = const_value(ed.peek(a)), const_value(ed.peek(b))
    if va is None or vb is None or va.shape != vb.shape or va.dtype != vb.dtype:
        return False
    return np.array_equal(np.ascontiguousarray(va).reshape(-1).view(np.uint8),
                          np.ascontiguousarray(vb).reshape(-1).view(np.uint8))


def _key(ed: Editor, nd: Any, alias: dict[str, str], attrs: tuple) -> tuple | None:
    controls = frozenset(_find(alias, c) for c in ed.control_inputs(nd.name))
    data: tuple = tuple((_find(alias, s), k) for s, k in ed.data_inputs(nd.name))
    opdef = registry().get(nd.op)
    if opdef is not None and opdef.is_commutative:
        data = tuple(sorted(data))
    return (nd.op, nd.device, attrs, data, controls)
