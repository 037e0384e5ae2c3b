"""What every optimization pass shares: options, the names that must survive, a graph editor,
static shapes, and the one way to evaluate a node with our own kernels.

A pass is a pure function ``(graph: Graph, options: PassOptions) -> GraphDef``. It starts an
:class:`Editor` (a copy-on-write view of the GraphDef with a reader index), reads nodes with
``peek``, rewrites the copies ``get`` hands out, and returns ``editor.finish()``: the input
GraphDef is never touched, and is itself the result when nothing changed.

Rules every pass keeps (the pipeline re-checks the first three after each pass):

- a fetched node, a target and a fed node keep their name, and a fetched or fed tensor keeps its
  meaning (``Protected.keeps_name``);
- Placeholders and fed nodes are never folded, merged or bypassed (``Protected.pinned``);
- the graph stays valid (validate() reports no new error);
- deadness is preserved: when a node is bypassed, its control inputs (which may carry a cond
  branch's deadness or a loop frame) move to whoever read it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtypes as D
from ..frames import CONTROL_FLOW_OPS, ENTER_OPS, EXIT_OPS, FrameAnalysis
from ..graph import CONTROL_SLOT, Graph, input_string, parse_input, parse_tensor_name
from ..op_sets import DEAD_OUTPUT_OPS, INPUT_OPS
from ..shapes import BROADCAST_OPS, SAME_SHAPE_OPS, broadcast_shapes, input_shape

DEFAULT_MAX_CONST_BYTES = 1 << 20



@dataclass(frozen=True)
class PassOptions:
    """What the caller needs from the optimized graph, and the knobs of the passes.

    ``fetches`` are tensor names that must still be computable under the same name;
    ``targets`` node names that must still run; ``feeds`` tensors that may be fed (they stay
    feedable: never folded, merged or bypassed, and their readers keep reading them).
    """

    fetches: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    feeds: tuple[str, ...] = ()
    max_const_bytes: int = DEFAULT_MAX_CONST_BYTES
    # x*0 -> 0 for floats is only right when x is never inf/NaN; integers always are finite
    assume_finite: bool = False
    # fuse_elementwise: chains anywhere ("all") or only inside while loops ("loops"), where
    # every iteration repeats the per-op cost a chain saves
    elementwise_scope: str = "all"
    # with scope "loops", chains outside loops too where every member is a float32 op of
    # this set: the ops a compiled sweep computes in one pass (the executor's list), where
    # a chain replaces k numpy passes and k kernel calls with one
    elementwise_sweep_ops: frozenset[str] = frozenset()


PassFn = Callable[[Graph, PassOptions], Any]


def _tensor_key(name: str) -> tuple[str, int]:
    return parse_tensor_name(name)


class Protected:
    """The names and tensors a pass must not lose, for one graph and one set of options."""

    def __init__(self, graph: Graph, options: PassOptions) -> None:
        self.fetches: set[tuple[str, int]] = {_tensor_key(f) for f in options.fetches}
        self.fetch_nodes = {n for n, _ in self.fetches}
        self.targets = set(options.targets)
        self.feeds: set[tuple[str, int]] = {_tensor_key(f) for f in options.feeds}
        self.fed_nodes = {n for n, _ in self.feeds}
        self.placeholders = {n.name for n in graph.nodes if n.op in INPUT_OPS}
        self._names = self.fetch_nodes | self.targets | self.fed_nodes

    def keeps_name(self, name: str) -> bool:
        """Fetched, target or fed: the node must survive under this name, same meaning."""
        return name in self._names

    def pinned(self, name: str) -> bool:
        """Never folded, merged away or bypassed: fed nodes and every Placeholder."""
        return name in self.fed_nodes or name in self.placeholders

    def is_fed(self, name: str, slot: int | None = None) -> bool:
        if slot is None:
            return name in self.fed_nodes
        return (name, slot) in self.feeds

    def fetched_slots(self, name: str) -> set[int]:
        return {s for n, s in self.fetches if n == name}


# --- the editor -----------------------------------------------------------------------------

class Editor:
    """A private, mutable view of a GraphDef with an index of who reads whom.

    Node order is kept; nodes added with ``before=`` land just before that node, others at
    the end. Inputs are always written canonically: data inputs in order, then control inputs
    without duplicates, without the node itself and without sources already read by data
    (a data edge from ``x`` already waits for ``x`` and carries its deadness).

    Copy on write: a NodeDef is copied the first time :meth:`get` hands it out (``get``'s
    result may be modified in place); :meth:`peek` reads without copying. The input's inputs
    are not parsed again (the :class:`Graph` already did), and the reader index is built on
    first use. Rewired inputs are kept parsed and spelled out into the NodeDef when it is
    next handed out (so rewiring a node with many control inputs once per removed Identity
    stays cheap). A pass that changed nothing gets the input GraphDef itself back from
    :meth:`finish` (so passes with nothing to do cost a walk, not two copies of the graph).
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        gd = graph.graph_def
        self._input = gd
        self._versions = gd.versions
        self._library = gd.library if gd.HasField("library") else None
        # name -> NodeDef: the input's own (read-only) until written, then a private copy
        self._nodes: dict[str, Any] = {}
        self._orig: dict[str, Any] = {}      # name -> the input's NodeDef, for copied nodes
        self._extra: list[Any] = []      # duplicates, kept verbatim (validation reports them)
        # parsed inputs per node (data, control), kept in step with ``input``; never
        # modified in place (the Graph's own lists are shared)
        self._parsed: dict[str, tuple[list[tuple[str, int]], list[str]]] = {}
        if not graph.duplicates:
            self._nodes = {n.name: n.proto for n in graph.nodes}
            self._parsed = {n.name: (n.inputs, n.control_inputs) for n in graph.nodes}
        else:
            nodes, parsed = self._nodes, self._parsed
            for n in graph.nodes:
                name = n.name
                if name in nodes:
                    self._extra.append(n.proto)
                    continue
                nodes[name] = n.proto
                parsed[name] = (n.inputs, n.control_inputs)
        self._order: list[str] = list(self._nodes)     # names in output order (removed skipped)
        self._before: dict[str, list[str]] = {}
        self._readers: dict[str, set[str]] | None = None
        self._taken = set(self._nodes)
        self._changed = False        # a node was added, removed or rewired
        self._stale: set[str] = set()    # nodes whose ``input`` lags behind ``_parsed``
        self._canonical: set[str] = set()    # nodes whose inputs set_inputs wrote

    # --- reading ---------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def get(self, name: str) -> Any | None:
        """The node ``name`` (None if absent), a private copy the caller may modify."""
        nd = self._nodes.get(name)
        if nd is None:
            return None
        if name in self._stale:
            return self._write_inputs(name)
        return nd if name in self._orig else self._own(name, nd)

    def peek(self, name: str) -> Any | None:
        """The node ``name`` for reading only (never modify it: it may be the input's)."""
        if name in self._stale:
            self._write_inputs(name)
        return self._nodes.get(name)

    def _write_inputs(self, name: str) -> Any:
        """Spell a rewired node's inputs out into its NodeDef (copied first if still the
        input's: a node rewired and then removed is never copied)."""
        self._stale.discard(name)
        data, ctl = self._parsed[name]
        nd = self._nodes[name]
        if name not in self._orig:
            nd = self._own(name, nd)
        del nd.input[:]
        nd.input.extend([input_string(s, k) for s, k in data] + ["^" + c for c in ctl])
        return nd

    def _own(self, name: str, nd: Any) -> Any:
        from dfg.schemas import node_def_pb2

        copy = node_def_pb2.NodeDef()
        copy.CopyFrom(nd)
        self._orig[name] = nd
        self._nodes[name] = copy
        return copy

    @property
    def nodes(self) -> dict[str, Any]:
        """Every node by name, each a private copy that may be modified."""
        for name in list(self._nodes):
            self.get(name)
        return self._nodes

    @property
    def readers(self) -> dict[str, set[str]]:
        """Source name -> the nodes reading it (by data or control)."""
        readers = self._readers
        if readers is None:
            readers = {}
            for name in self._nodes:
                data, ctl = self._parse(name)
                for s, _ in data:
                    rs = readers.get(s)
                    if rs is None:
                        readers[s] = {name}
                    else:
                        rs.add(name)
                for s in ctl:
                    rs = readers.get(s)
                    if rs is None:
                        readers[s] = {name}
                    else:
                        rs.add(name)
            self._readers = readers
        return readers

    def op(self, name: str) -> str | None:
        nd = self._nodes.get(name)
        return nd.op if nd is not None else None

    def _parse(self, name: str) -> tuple[list[tuple[str, int]], list[str]]:
        parsed = self._parsed.get(name)
        if parsed is None:
            data: list[tuple[str, int]] = []
            ctl: list[str] = []
            for s in self._nodes[name].input:
                src, slot = parse_input(s)
                if slot == CONTROL_SLOT:
                    ctl.append(src)
                else:
                    data.append((src, slot))
            parsed = self._parsed[name] = (data, ctl)
        return parsed

    def data_inputs(self, name: str) -> list[tuple[str, int]]:
        return list(self._parse(name)[0])

    def control_inputs(self, name: str) -> list[str]:
        return list(self._parse(name)[1])

    def data_readers(self, name: str, slot: int | None = None) -> list[tuple[str, int]]:
        """(reader, input index) for every data edge out of ``name`` (of ``slot`` if given)."""
        out = []
        readers = self.readers.get(name, ())
        for r in sorted(readers) if len(readers) > 1 else readers:
            for k, (src, s) in enumerate(self._parse(r)[0]):
                if src == name and (slot is None or s == slot):
                    out.append((r, k))
        return out

    def control_readers(self, name: str) -> list[str]:
        return [r for r in _in_order(self.readers.get(name, ())) if name in self._parse(r)[1]]

    def used_slots(self, name: str) -> set[int]:
        return {self._parse(r)[0][k][1] for r, k in self.data_readers(name)}

    # --- writing ---------------------------------------------------------------------------
    def set_inputs(self, name: str, data: Iterable[tuple[str, int]],
                   controls: Iterable[str] = ()) -> None:
        data = list(data)
        srcs = [s for s, _ in data]
        # controls without repeats, without the node itself or a source already read by data
        kept = dict.fromkeys(controls)
        if kept:
            kept.pop(name, None)
            for s in srcs:
                kept.pop(s, None)
        ctl = list(kept)
        old = self._parse(name)
        if old == (data, ctl):
            return
        readers = self.readers
        old_srcs = set(old[1])
        old_srcs.update([s for s, _ in old[0]])
        new_srcs = set(ctl)
        new_srcs.update(srcs)
        for src in old_srcs - new_srcs:
            rs = readers.get(src)
            if rs is not None:
                rs.discard(name)
        for src in new_srcs - old_srcs:
            readers.setdefault(src, set()).add(name)
        self._parsed[name] = (data, ctl)
        self._canonical.add(name)
        self._stale.add(name)       # ``input`` is written when the node is next read
        self._changed = True

    def replace_tensor(self, old: tuple[str, int], new: tuple[str, int],
                       controls: Iterable[str] = ()) -> None:
        """Every data reader of ``old`` reads ``new`` instead and also waits for ``controls``."""
        controls = list(controls)
        for r in _in_order(self.readers.get(old[0], ())):
            data = self._parse(r)[0]
            if old not in data:
                continue
            self.set_inputs(r, [new if t == old else t for t in data],
                            [*self._parse(r)[1], *controls])

    def replace_control(self, old: str, new: Iterable[str]) -> None:
        """Readers of ``^old`` wait for the nodes in ``new`` instead."""
        new = list(new)
        for r in self.control_readers(old):
            self._replace_one_control(r, old, new)

    def _replace_one_control(self, r: str, old: str, new: list[str]) -> None:
        """``set_inputs(r, data, ctl[:i] + new + ctl[i + 1:])`` where ``ctl[i] == old``, in
        time linear in ``new`` rather than in ``r``'s many control inputs (removing each of
        n Identities that one node waits for would be quadratic otherwise)."""
        data, ctl = self._parse(r)
        i = ctl.index(old)
        if r not in self._canonical:     # as read: may repeat itself; set_inputs cleans up
            self.set_inputs(r, data, ctl[:i] + new + ctl[i + 1:])
            return
        head, tail = ctl[:i], ctl[i + 1:]
        srcs = {s for s, _ in data}
        add: list[str] = []
        for c in new:
            # what set_inputs keeps of the concatenation: first occurrences, not r itself,
            # not a source read by data (``ctl`` is already in that form)
            if c != r and c not in srcs and c not in add and c not in head:
                add.append(c)
        if any(c in tail for c in add):
            tail = [c for c in tail if c not in add]
        readers = self.readers
        rs = readers.get(old)
        if rs is not None and old not in add:
            rs.discard(r)
        for c in add:
            readers.setdefault(c, set()).add(r)
        self._parsed[r] = (data, head + add + tail)
        self._canonical.add(r)
        self._stale.add(r)
        self._changed = True

    def bypass(self, name: str, tensor: tuple[str, int], extra_controls: Iterable[str] = ()
               ) -> bool:
        """Remove ``name``, whose output 0 equals ``tensor``: its data readers read ``tensor``,
        its control readers wait for ``tensor``'s producer; both also wait for its control
        inputs and ``extra_controls`` (so deadness and ordering survive).

        Refused (False, nothing changed) when control readers exist and the producer is a
        Switch or a _Recv (op_sets.DEAD_OUTPUT_OPS): ``^switch`` is live even when the Switch
        output read here is dead, so moving them would make a dead branch run (that Identity
        is a cond pivot, or the Identity TF's partitioner puts after a control edge's _Recv).
        """
        if self.control_readers(name) and self.op(tensor[0]) in DEAD_OUTPUT_OPS:
            return False
        carry = [*self._parse(name)[1], *extra_controls]
        self.replace_tensor((name, 0), tensor, carry)
        self.replace_control(name, [tensor[0], *carry])
        self.remove(name)
        return True

    def remove(self, name: str) -> None:
        data, ctl = self._parse(name)
        del self._parsed[name]
        del self._nodes[name]
        self._orig.pop(name, None)
        self._stale.discard(name)
        readers = self._readers
        if readers is not None:
            for s in [*(s for s, _ in data), *ctl]:
                rs = readers.get(s)
                if rs is not None:
                    rs.discard(name)
        self._changed = True

    def unique_name(self, base: str) -> str:
        cand, i = base, 1
        while cand in self._taken:
            cand = f"{base}_{i}"
            i += 1
        self._taken.add(cand)
        return cand

    def add(self, nd: Any, before: str | None = None) -> Any:
        """Insert a copy of a NodeDef (its name must come from ``unique_name``)."""
        from dfg.schemas import node_def_pb2

        copy = node_def_pb2.NodeDef()
        copy.CopyFrom(nd)
        return self._insert(copy, before)

    def _insert(self, nd: Any, before: str | None) -> Any:
        name = nd.name
        self._taken.add(name)
        self._nodes[name] = nd
        self._orig[name] = None         # ours from the start
        self._parsed.pop(name, None)
        self._canonical.discard(name)
        if before is not None and before in self._taken:
            self._before.setdefault(before, []).append(name)
        else:
            self._order.append(name)
        readers = self._readers
        if readers is not None:
            data, ctl = self._parse(name)
            for s in [*(s for s, _ in data), *ctl]:
                readers.setdefault(s, set()).add(name)
        self._changed = True
        return nd

    def make_const(self, name: str, value: np.ndarray, dtype: int, controls: Iterable[str] = (),
                   device: str = "", before: str | None = None, encode: bool = True) -> Any:
        """Add a Const. ``encode=False`` writes only its dtype and shape: the caller must
        ``set_const`` it before :meth:`finish` (a pass that may drop it again saves the
        encoding) and must not read its value from the proto meanwhile."""
        from dfg.schemas import node_def_pb2

        nd = node_def_pb2.NodeDef(name=name, op="Const", device=device)
        if encode:
            set_const(nd, value, dtype)
        else:
            set_const_header(nd, value, dtype)
        self._insert(nd, before)
        self.set_inputs(name, [], controls)
        return nd

    def unchanged(self) -> bool:
        """Nothing added, removed or rewired, and every node handed out by :meth:`get` still
        equal to the input's."""
        return not self._changed and all(
            orig is None or self._nodes.get(name) == orig for name, orig in self._orig.items())

    def finish(self) -> Any:
        """The edited GraphDef: the input itself when nothing changed and rebuilding it would
        give the same bytes (treat the result as read-only, as every GraphDef a pass gets)."""
        from dfg.schemas import graph_pb2

        for name in list(self._stale):
            self._write_inputs(name)
        gd = self._input
        if (not self._extra and gd.HasField("versions") and not gd.HasField("debug_info")
                and not gd.version and self.unchanged()):
            return gd
        out = graph_pb2.GraphDef()
        out.versions.CopyFrom(self._versions)
        if self._library is not None:
            out.library.CopyFrom(self._library)

        nodes = self._nodes
        before = self._before
        emitted: set[str] = set()
        seq: list[Any] = []

        def emit(root: str) -> None:
            # what must come before a node first, depth-first with an explicit stack (a
            # long chain of insertions is data, not recursion)
            stack = [(root, iter(before.get(root, ())))]
            while stack:
                name, pending = stack[-1]
                b = next(pending, None)
                if b is not None:
                    stack.append((b, iter(before.get(b, ()))))
                    continue
                stack.pop()
                nd = nodes.get(name)
                if nd is not None and name not in emitted:
                    emitted.add(name)
                    seq.append(nd)

        if before:
            for name in self._order:
                emit(name)
        else:
            seq = [nodes[n] for n in dict.fromkeys(self._order) if n in nodes]
        seq.extend(self._extra)
        out.node.extend(seq)
        return out


def _in_order(names: set[str] | tuple) -> list[str]:
    """``sorted(names)`` (a deterministic order), without sorting one name."""
    return sorted(names) if len(names) > 1 else list(names)


def set_const(nd: Any, value: np.ndarray, dtype: int) -> None:
    """Make ``nd`` a Const holding ``value`` (device and name kept, every other attr dropped)."""
    from ..tensors import from_numpy

    nd.op = "Const"
    nd.attr.clear()
    nd.attr["dtype"].type = D.base(dtype)
    from_numpy(np.asarray(value), D.base(dtype), nd.attr["value"].tensor)


def set_const_header(nd: Any, value: Any, dtype: int) -> None:
    """Make ``nd`` a Const with ``value``'s dtype and shape but no values yet: the caller
    must :func:`set_const` it before the graph leaves the pass (encoding is deferred)."""
    nd.op = "Const"
    nd.attr.clear()
    nd.attr["dtype"].type = D.base(dtype)
    tensor = nd.attr["value"].tensor
    tensor.dtype = D.base(dtype)
    for d in np.shape(value):
        tensor.tensor_shape.dim.add(size=d)


# --- facts about nodes ------------------------------------------------------------------------

_opdefs: Any = None     # the module graphdef.opdefs.registry, imported on first use


def _opdefs_module() -> Any:
    # an import statement inside a function costs microseconds per call: passes ask for
    # the registry several times per node
    global _opdefs
    if _opdefs is None:
        from ..opdefs import registry as module

        _opdefs = module
    return _opdefs


def registry():  # the OpDef registry, imported lazily
    return (_opdefs or _opdefs_module()).registry()


def output_types(nd: Any) -> list[int] | None:
    """DataTypes of a NodeDef's outputs, or None when the op or its attrs do not say."""
    module = _opdefs or _opdefs_module()
    reg = module.registry()
    if nd.op not in reg:
        return None
    try:
        return reg.output_types(nd)
    except (module.SignatureError, KeyError, ValueError):
        return None


def input_types(nd: Any) -> list[int] | None:
    module = _opdefs or _opdefs_module()
    reg = module.registry()
    if nd.op not in reg:
        return None
    try:
        return reg.input_types(nd)
    except (module.SignatureError, KeyError, ValueError):
        return None


def is_stateful(op: str) -> bool:
    """Whether ``op`` may have effects or read mutable state: stateful per its OpDef, taking a
    ref input (Assign, AssignAdd, ScatterAdd, CountUpTo, IsVariableInitialized are not marked
    stateful but mutate or observe a variable), a random op, or unknown (assumed effectful)."""
    opdef = registry().get(op)
    if opdef is None or opdef.is_stateful or "Random" in op and "Stateless" not in op:
        return True
    return any(a.is_ref for a in opdef.input_arg)


def plain_types(types: Iterable[int] | None) -> bool:
    """Every type is a value numpy can hold (no refs, resources, variants, bfloat16 ...)."""
    if types is None:
        return False
    # bfloat16 runs (as float32) but passes leave it alone: fusing or folding would skip
    # the per-op rounding the executor applies to bfloat16 outputs
    return all(not D.is_ref(t) and D.is_numpy_compatible(t) and D.base(t) != D.DT_BFLOAT16
               for t in types)


def const_value(nd: Any) -> np.ndarray | None:
    """The value of a Const NodeDef (None if it cannot be decoded)."""
    from ..tensors import to_numpy

    if nd is None or nd.op != "Const" or "value" not in nd.attr:
        return None
    try:
        return to_numpy(nd.attr["value"].tensor)
    except Exception:  # noqa: BLE001 - an undecodable Const is simply not known
        return None


def const_shape(nd: Any) -> tuple[int, ...] | None:
    from ..tensors import shape_from_proto

    if nd is None or nd.op != "Const" or "value" not in nd.attr:
        return None
    s = shape_from_proto(nd.attr["value"].tensor.tensor_shape)
    if s is None or any(d is None for d in s):
        return None
    return s  # type: ignore[return-value]


def attr(nd: Any, key: str) -> Any | None:
    """The AttrValue ``key`` of a NodeDef, or None. (Indexing ``nd.attr[key]`` would *add* an
    empty entry to the proto: never do that on a node you only read.)"""
    return nd.attr[key] if key in nd.attr else None


def attr_type(nd: Any, key: str = "T") -> int | None:
    av = attr(nd, key)
    return av.type if av is not None and av.WhichOneof("value") == "type" else None


def is_const(ed: Editor, prot: Protected, name: str) -> bool:
    nd = ed.peek(name)
    return nd is not None and nd.op == "Const" and not prot.is_fed(name)


def tensor_frame(fa: FrameAnalysis, nd: Any) -> str | None:
    """The frame a node's outputs live in: an Enter's go to the frame its ``frame_name``
    opens, an Exit's to the loop's parent; None for a node frame analysis did not reach."""
    frame = fa.node_frame.get(nd.name)
    if frame is None:
        return None
    if nd.op in EXIT_OPS:
        return fa.frames[frame].parent or ""
    if nd.op in ENTER_OPS:
        return nd.attr["frame_name"].s.decode("utf-8", "replace") if "frame_name" in nd.attr \
            else None
    return frame


def make_constant_enter(ed: Editor, fa: FrameAnalysis, nd: Any, dtype: int, frame: str) -> None:
    """Make ``nd`` (a NodeDef the caller got from ``ed``) a constant Enter of loop ``frame``
    for a value of ``dtype``, with the parallel_iterations of the frame's first Enter; the
    caller wires its one input."""
    enters = fa.frames[frame].enters
    first = ed.peek(enters[0]) if enters else None
    par = attr(first, "parallel_iterations") if first is not None else None
    nd.op = "Enter"
    nd.attr.clear()
    nd.attr["T"].type = dtype
    nd.attr["frame_name"].s = frame.encode()
    nd.attr["is_constant"].b = True
    if par is not None:
        nd.attr["parallel_iterations"].i = par.i


def is_control_flow(op: str) -> bool:
    return op in CONTROL_FLOW_OPS or op in ("RefSelect",)


# --- static shapes ---------------------------------------------------------------------------

Shape = tuple[int | None, ...] | None


class Shapes:
    """Static shapes known without running: Const values, Placeholder ``shape`` attrs (a feed
    is checked against them), ``_output_shapes``, passed through a few shape-preserving ops.
    A fed non-Placeholder tensor has no known shape: the feed may have any shape."""

    def __init__(self, ed: Editor, prot: Protected,
                 before: Callable[[str], None] | None = None) -> None:
        self.ed = ed
        self.prot = prot
        self.before = before     # called with a node's name before its inputs are read
        self._memo: dict[tuple[str, int], Shape] = {}
        self._pending: set[tuple[str, int]] = set()

    def of(self, t: tuple[str, int]) -> Shape:
        """The static shape of tensor ``t`` (None: unknown rank). Iterative, so a chain of
        thousands of shape-preserving ops does not exhaust Python's recursion limit."""
        memo = self._memo
        if t in memo:
            return memo[t]
        stack = [t]
        while stack:
            cur = stack[-1]
            if cur in memo:
                stack.pop()
                continue
            shape, rule, inputs = self._direct(cur)
            if rule is None:
                memo[cur] = shape
                stack.pop()
                continue
            missing = [i for i in inputs if i not in memo]
            if missing and cur not in self._pending:
                self._pending.add(cur)      # come back once the inputs are known
                stack.extend(missing)
                continue
            self._pending.discard(cur)
            # an input still missing here is on a cycle (a loop): unknown
            known = [memo.get(i) for i in inputs]
            memo[cur] = known[0] if rule == "same" else broadcast_shapes(known[0], known[1])
            stack.pop()
        return memo[t]

    def _direct(self, t: tuple[str, int]) -> tuple[Shape, str | None, list[tuple[str, int]]]:
        """(shape, None, []) when known from the node alone; (None, rule, inputs) when it
        follows from input shapes by ``rule`` ("same" or "broadcast")."""
        from ..attrs import to_python

        name, slot = t
        if self.before is not None:
            self.before(name)
        nd = self.ed.peek(name)
        if nd is None:
            return None, None, []
        if self.prot.is_fed(name, slot) and nd.op not in INPUT_OPS:
            return None, None, []
        if nd.op == "Const":
            return (const_shape(nd) if slot == 0 else None), None, []
        if nd.op in INPUT_OPS and slot == 0 and "shape" in nd.attr:
            return input_shape(nd, self.ed._versions.producer), None, []
        if "_output_shapes" in nd.attr:
            shapes = to_python(nd.attr["_output_shapes"])
            if isinstance(shapes, list) and slot < len(shapes):
                return shapes[slot], None, []
        if slot != 0:
            return None, None, []
        data = self.ed.data_inputs(name)
        if nd.op in SAME_SHAPE_OPS and data:
            return None, "same", data[:1]
        if nd.op in BROADCAST_OPS and len(data) == 2:
            return None, "broadcast", data
        return None, None, []

    def fully_known(self, t: tuple[str, int]) -> tuple[int, ...] | None:
        s = self.of(t)
        if s is None or any(d is None for d in s):
            return None
        return s  # type: ignore[return-value]


def broadcast_keeps(x: Shape, c: tuple[int, ...]) -> bool:
    """Whether broadcasting a tensor of static shape ``x`` against a constant of shape ``c``
    surely leaves ``x``'s shape unchanged (a scalar constant always does)."""
    if len(c) == 0:
        return True
    if x is None or len(c) > len(x):
        return False
    for xd, cd in zip(x[len(x) - len(c):], c):
        if cd != 1 and xd != cd:
            return False
    return True


# --- evaluating a node with our kernels -------------------------------------------------------

class EvalError(Exception):
    """The node could not be evaluated (kernel error, missing kernel ...): leave it."""


def evaluate(nd: Any, inputs: list[np.ndarray], max_bytes: int | None = None) -> list[Any]:
    """Run ``nd``'s kernel on ``inputs`` as the executor does (``kernel_call``: attrs bound
    with OpDef defaults, outputs checked against the dtypes the OpDef promises). Outside any
    graph and session, so only for stateless ops on plain values. Any failure raises
    EvalError ("do not fold")."""
    from dfg.executor.kernel_call import bind, context, run_once

    try:
        k = bind(nd)
        # max_bytes: refuse (executor/limits.py) an output too big to keep, before allocating
        res = run_once(k, list(inputs), context(k, None, {}, max_bytes=max_bytes))
    except Exception as e:  # noqa: BLE001 - any failure means "do not fold"
        raise EvalError(f"{type(e).__name__}: {e}") from e
    # outputs were checked against the OpDef by kernel_call (count and dtypes)
    return [None if o is None else np.asarray(o) for o in res]


def value_bytes(v: Any) -> int:
    arr = np.asarray(v)
    if arr.dtype.kind == "O":
        return sum(len(x) if isinstance(x, (bytes, str)) else 8 for x in arr.reshape(-1))
    return int(arr.nbytes)
