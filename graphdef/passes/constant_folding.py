"""Pass ``constant_folding``: evaluate nodes whose inputs are all constant, with our kernels.

A node folds when every data input is a constant (a Const, or a node folded earlier in this
pass), its op is stateless per its OpDef and not a random, placeholder or control-flow op, all
its inputs and outputs are plain values (no refs, resources, variants), it is not fed, and its
kernel runs without error (a node whose evaluation raises is left alone, so the run still fails
the same way). The result is a Const with the node's name; the Const waits for the node's
control inputs and for those of the constants it read, because a Const inside a cond branch or
a loop gets its deadness and its frame only from such control edges.

Output ``k > 0`` of a multi-output node becomes ``node/_folded_k`` and its readers are rewired.
A fetched slot ``k > 0`` cannot keep its name that way, so such nodes are left alone.

Shape, Rank, Size and ShapeN of a tensor whose static shape is known (Const, a Placeholder's
``shape`` attr, ``_output_shapes``) fold too; their Const keeps a control edge from the input's
producer (deadness, frame, and errors upstream still apply).

Nothing is folded into a Const larger than ``max_const_bytes``; ops that can build huge outputs
from small inputs (Fill, Tile, Range, BroadcastTo, OneHot, Pad ...) are sized before running.

Values are encoded into their Consts at the end of the pass, and only for the Consts still
read (or kept by name): a chain folds into one Const, and a node that was read only by nodes
folded after it goes (it is dead). Encoding every link of a chain of 4 MB tensors cost more
than evaluating it (issue #12). A node nothing read before the pass stays, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as D
from ..frames import analyze_frames
from ..graph import Graph, without_gc
from ..op_sets import DEAD_OUTPUT_OPS, INPUT_OPS
from .common import (
    Editor,
    EvalError,
    PassOptions,
    Protected,
    Shapes,
    const_value,
    evaluate,
    input_types,
    is_control_flow,
    is_stateful,
    output_types,
    plain_types,
    set_const,
    set_const_header,
    value_bytes,
)

SHAPE_OPS = frozenset({"Shape", "ShapeN", "Rank", "Size"})
NEVER_FOLD = INPUT_OPS | frozenset({"Const", "NoOp", "HostConst"})


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    fa = analyze_frames(graph)
    shapes = Shapes(ed, prot)
    # constant node -> its output values; an input Const is decoded when a reader needs it
    values = _Values(ed)
    deps: dict[str, list[str]] = {}       # constant node -> control inputs a fold must keep
    # folded node -> its dtype, while its value (in ``values``) is not yet encoded into its
    # Const (encoded at the end)
    pending: dict[str, int] = {}
    read_before: set[str] = set()     # what the input graph reads, filled on first use

    def dead(name: str) -> bool:
        """A folded node read by nothing now (data or control), keeping no fetched, fed or
        target name, that something read before the pass or that the pass made: folding
        made it dead. A node nothing read before stays (graph outputs often are such)."""
        if ed.readers.get(name) or prot.keeps_name(name):
            return False
        if not read_before:
            read_before.update(e.src for n in graph.nodes for e in n.in_edges)
        return name not in graph or name in read_before

    for node in graph.topological_order():
        name = node.name
        nd = ed.peek(name)     # read-only: _become_consts takes its own copy
        if nd is None:
            continue
        if nd.op == "Const":
            if not prot.is_fed(name):
                values.consts.add(name)
                deps[name] = ed.control_inputs(name)
            continue
        if name not in fa.node_frame and node.in_edges:
            continue  # unreachable (a broken cycle): leave it to validation
        if _foldable(ed, prot, nd, values):
            data = ed.data_inputs(name)
            if _fold(ed, prot, nd, values, deps, options.max_const_bytes, pending):
                # what it read may be dead now: drop it at once, so a chain of big
                # tensors does not hold every link in memory
                for src in dict.fromkeys(s for s, _ in data):
                    if src in pending and dead(src):
                        _drop(ed, src, values, pending)
        elif nd.op in SHAPE_OPS:
            _fold_shape(ed, prot, nd, shapes, values, deps, pending)
    # encode what is still read or named; drop the rest (reverse order: a drop can orphan
    # what the dropped node read)
    for name in reversed(list(pending)):
        if dead(name):
            _drop(ed, name, values, pending)
        else:
            set_const(ed.get(name), values[name][0], pending[name])
    return ed.finish()


def _drop(ed: Editor, name: str, values: dict[str, list[Any]], pending: dict[str, int]
          ) -> None:
    ed.remove(name)
    pending.pop(name, None)
    values.pop(name, None)


def _foldable(ed: Editor, prot: Protected, nd: Any, values: _Values) -> bool:
    if nd.op in NEVER_FOLD or is_control_flow(nd.op) or prot.pinned(nd.name):
        return False
    data = ed.data_inputs(nd.name)
    if not data or not all(values.may_hold(src) for src, _ in data):
        return False    # (checked first: it is cheap and rules out most nodes)
    if is_stateful(nd.op):
        return False
    for src, slot in data:
        if src not in values or prot.is_fed(src, slot) or slot >= len(values[src]):
            return False
    if not plain_types(input_types(nd)) or not plain_types(output_types(nd)):
        return False
    # a fetched output k > 0 would lose its name ("node:k" cannot name a Const's output)
    return all(s == 0 for s in prot.fetched_slots(nd.name))


def _fold(ed: Editor, prot: Protected, nd: Any, values: dict[str, list[Any]],
          deps: dict[str, list[str]], limit: int, pending: dict[str, int]) -> bool:
    """Fold ``nd`` if its value can be computed within ``limit``; whether it was."""
    name = nd.name
    data = ed.data_inputs(name)
    args = [values[src][slot] for src, slot in data]
    out_types = output_types(nd) or []
    predicted = _predicted_bytes(nd, args, out_types)
    if predicted is not None and predicted > limit:
        return False
    try:
        # a budget well above the limit (estimates are upper bounds) stops AsString(width=2e9)
        outs = evaluate(nd, args, max_bytes=64 * limit + (1 << 16))
    except EvalError:
        return False
    used = ed.used_slots(name) | {0}
    if any(k >= len(outs) or outs[k] is None for k in used):
        return False
    if any(value_bytes(outs[k]) > limit for k in used):
        return False
    controls = list(ed.control_inputs(name))
    for src, _slot in data:
        controls.extend(deps.get(src, ()))
    _become_consts(ed, nd, outs, out_types, list(dict.fromkeys(controls)), values, deps,
                   pending)
    return True


def _fold_shape(ed: Editor, prot: Protected, nd: Any, shapes: Shapes,
                values: dict[str, list[Any]], deps: dict[str, list[str]],
                pending: dict[str, int]) -> None:
    """Shape/Rank/Size/ShapeN of statically known shapes."""
    name = nd.name
    if prot.pinned(name) or not plain_types(output_types(nd)):
        return
    if any(s != 0 for s in prot.fetched_slots(name)):
        return
    data = ed.data_inputs(name)
    if not data:
        return
    out_types = output_types(nd) or []
    out_dtype = D.to_numpy(D.base(out_types[0]))
    vals: list[Any] = []
    for t in data:
        if ed.op(t[0]) in DEAD_OUTPUT_OPS:
            return  # ^Switch is live even when this output is dead: deadness would be lost
        if nd.op == "Rank":
            s = shapes.of(t)
            if s is None:
                return
            vals.append(len(s))
            continue
        s = shapes.fully_known(t)
        if s is None:
            return
        vals.append(int(np.prod(s, dtype=np.int64)) if nd.op == "Size" else list(s))
    if nd.op != "ShapeN":
        vals = vals[:1]
    big = np.iinfo(out_dtype).max if out_dtype.kind in "iu" else None
    if big is not None and any(np.any(np.asarray(v, np.int64) > big) for v in vals):
        return  # the kernel would fail on the overflow: leave that to it
    outs = [np.asarray(v, dtype=out_dtype) for v in vals]
    # the Const waits for what produced the input: its deadness, frame and errors still apply
    controls = list(dict.fromkeys([*ed.control_inputs(name), *(src for src, _ in data)]))
    _become_consts(ed, nd, outs, out_types, controls, values, deps, pending)


def _become_consts(ed: Editor, nd: Any, outs: list[Any], out_types: list[int],
                   controls: list[str], values: dict[str, list[Any]],
                   deps: dict[str, list[str]], pending: dict[str, int]) -> None:
    """``nd`` becomes a Const of output 0; each other used output gets a Const of its own.
    All wait on ``controls`` so deadness, frames and errors upstream still apply. The values
    are left in ``pending``: the Consts hold dtype and shape until the pass encodes them."""
    name = nd.name
    for k in sorted(ed.used_slots(name) - {0}):
        const = ed.make_const(ed.unique_name(f"{name}/_folded_{k}"), outs[k], out_types[k],
                              controls, nd.device, before=name, encode=False)
        ed.replace_tensor((name, k), (const.name, 0))
        values[const.name] = [outs[k]]          # its readers come later in the order
        deps[const.name] = ed.control_inputs(const.name)
        pending[const.name] = out_types[k]
    nd = ed.get(name)
    set_const_header(nd, outs[0], out_types[0])
    pending[name] = out_types[0]
    ed.set_inputs(name, [], controls)
    values[name] = [outs[0]]
    deps[name] = ed.control_inputs(name)


class _Values(dict):
    """Constant node -> its output values. The graph's own Consts (``consts``) are decoded on
    first lookup: most are never read by a foldable node (weights read by a Conv2D of a
    placeholder), and decoding them all is most of a pass's time on a large model."""

    def __init__(self, ed: Editor) -> None:
        super().__init__()
        self.ed = ed
        self.consts: set[str] = set()

    def may_hold(self, name: str) -> bool:
        """Whether ``name`` is or may be (not yet decoded) a constant node here."""
        return dict.__contains__(self, name) or name in self.consts

    def __missing__(self, name: str) -> list[Any]:
        if name in self.consts:
            self.consts.discard(name)
            v = const_value(self.ed.peek(name))
            if v is not None:
                self[name] = [v]
                return self[name]
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        if dict.__contains__(self, name):
            return True
        try:
            self[name]
        except KeyError:
            return False
        return True


def _predicted_bytes(nd: Any, args: list[Any], out_types: list[int]) -> int | None:
    """Output bytes of ops whose output size is set by an input *value* (or that are costly
    to run only to be thrown away, like a big MatMul), computed before running them, so
    folding a Fill of [1e6, 1e6] never tries to allocate it. None: not predicted (the output
    is checked after running), or the op will fail anyway."""
    op = nd.op
    try:
        itemsize = D.to_numpy(D.base(out_types[0])).itemsize if out_types else 8
        itemsize = max(itemsize, 1)
        if op == "Fill" or op == "BroadcastTo" and len(args) == 2:
            shape = args[0] if op == "Fill" else args[1]
            return _elements(np.asarray(shape).reshape(-1)) * itemsize
        if op == "Tile":
            return int(np.asarray(args[0]).size) * _elements(np.asarray(args[1]).reshape(-1)) \
                * itemsize
        if op == "Range":
            start, limit, delta = (float(np.asarray(a)) for a in args)
            if delta == 0:
                return None
            return max(0, int(np.ceil((limit - start) / delta))) * itemsize
        if op == "OneHot":
            return int(np.asarray(args[0]).size) * max(int(np.asarray(args[1])), 0) * itemsize
        if op in ("Pad", "PadV2", "MirrorPad"):
            x = np.asarray(args[0])
            pads = np.asarray(args[1]).reshape(-1, 2)
            dims = [int(d) + int(a) + int(b) for d, (a, b) in zip(x.shape, pads)]
            return _elements(np.asarray(dims)) * itemsize
        if op == "MatMul":
            a, b = np.asarray(args[0]), np.asarray(args[1])
            ta = "transpose_a" in nd.attr and nd.attr["transpose_a"].b
            tb = "transpose_b" in nd.attr and nd.attr["transpose_b"].b
            return a.shape[1 if ta else 0] * b.shape[0 if tb else 1] * itemsize
    except (TypeError, ValueError, OverflowError, IndexError):
        return None  # malformed: the kernel will reject it and we will not fold
    return None


def _elements(dims: np.ndarray) -> int:
    n = 1
    for d in dims.tolist():
        n *= max(int(d), 0)   # Python ints: no overflow on absurd shapes
    return n
