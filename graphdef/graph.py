"""The read-optimized view over a GraphDef shared by every tool.

Inputs are parsed once (``name``, ``name:k``, ``^name``); edges are indexed both ways so no
tool scans the node list to find producers or consumers. A control edge has
``dst_input == CONTROL_SLOT`` (and ``src_output == CONTROL_SLOT``), as in TensorFlow.

The view is immutable by convention: passes build a new GraphDef and wrap it again.
Duplicate names and inputs naming missing nodes are recorded (``duplicates``,
``missing_inputs``) rather than raised, so that validation can report them all; so are the
edges that do not run forward in file order (``backward_edges``: loops' back edges, or a file
not in topological order).

Building the view is linear in nodes plus edges and reads each NodeDef field once; the
consumer index behind ``consumers()`` is built on first use.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

from .errors import NotFoundError, UsageError
from .op_sets import NEXT_ITERATION_OPS

CONTROL_SLOT = -1


def parse_input(s: str) -> tuple[str, int]:
    """``"^x"`` -> ("x", -1); ``"x:2"`` -> ("x", 2); ``"x"`` -> ("x", 0)."""
    if s.startswith("^"):
        return s[1:], CONTROL_SLOT
    name, sep, slot = s.rpartition(":")
    if sep and slot.isdigit():
        return name, int(slot)
    return s, 0


def parse_tensor_name(s: str) -> tuple[str, int]:
    """A fetch/feed name: ``"y"`` means ``y:0``; control names are not tensors."""
    if not s or s.startswith("^"):
        raise UsageError(f"'{s}' is not a tensor name (expected node or node:index)")
    return parse_input(s)


def tensor_name(node: str, slot: int) -> str:
    return f"^{node}" if slot == CONTROL_SLOT else f"{node}:{slot}"


def input_string(node: str, slot: int) -> str:
    """How a NodeDef's ``input`` field spells an edge (slot 0 without ``:0``)."""
    if slot == CONTROL_SLOT:
        return f"^{node}"
    return node if slot == 0 else f"{node}:{slot}"


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cycle collector while building many objects that all stay alive.

    Each collection scans every live container; building a 1M-node view triggers thousands of
    them, which made loading superlinear (half the time of a 100k-node graph). Nothing built
    here forms cycles that need the collector; it resumes (if it was on) afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_F = TypeVar("_F", bound=Callable[..., Any])


def without_gc(fn: _F) -> _F:
    """Run ``fn`` with the cycle collector paused (see :func:`gc_paused`): for functions
    that build a graph's worth of objects, such as optimization passes."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        with gc_paused():
            return fn(*args, **kw)

    return wrapper  # type: ignore[return-value]


class Edge(NamedTuple):
    """One edge; a tuple (several times cheaper to build than a frozen dataclass)."""

    src: str
    src_output: int
    dst: str
    dst_input: int

    @property
    def is_control(self) -> bool:
        return self.dst_input == CONTROL_SLOT


class Node:
    """One NodeDef with its inputs parsed. ``inputs`` are the data inputs in order."""

    __slots__ = ("name", "op", "index", "proto", "inputs", "control_inputs", "device",
                 "in_edges", "out_edges")

    def __init__(self, proto: Any, index: int, parsed: list[tuple[str, int]] | None = None
                 ) -> None:
        self.proto = proto
        self.index = index
        self.name: str = proto.name
        self.op: str = proto.op
        self.device: str = proto.device
        self.inputs: list[tuple[str, int]] = []
        self.control_inputs: list[str] = []
        for src, slot in (parsed if parsed is not None else map(parse_input, proto.input)):
            if slot == CONTROL_SLOT:
                self.control_inputs.append(src)
            else:
                self.inputs.append((src, slot))
        self.in_edges: list[Edge] = []   # data edges in dst_input order, then control edges
        self.out_edges: list[Edge] = []

    @property
    def attr(self) -> Any:
        return self.proto.attr

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.op})"


class Graph:
    """Indexed view of a GraphDef: nodes by name, edges both ways, tensor consumers."""

    def __init__(self, graph_def: Any) -> None:
        with gc_paused():
            self._build(graph_def)

    def reindex(self) -> None:
        """Index ``graph_def`` again after its content was replaced in place (ParseFromString,
        CopyFrom): the index holds the NodeDefs it had."""
        with gc_paused():
            self._build(self.graph_def)

    def _build(self, graph_def: Any) -> None:
        # One pass reads each NodeDef's fields once (upb field access is the slow part) and
        # parses its inputs; a second pass, with every name known, makes the edges (from the
        # parsed data inputs; a node with control inputs, rarer, parses its inputs again to
        # keep their order). Nodes are filled in here rather than through Node.__init__ (a
        # Python call per node) and edges are made with tuple.__new__ (Edge(...) runs a
        # Python-level __new__): on 1M-node graphs these calls were a third of the build.
        self.graph_def = graph_def
        # derived once per index (passes and the Session ask for them again and again): the
        # whole topological order and frames.analyze_frames' result; reindex drops them
        self._order: list[Node] | None = None
        self.frame_analysis: Any = None
        new_node = Node.__new__
        intern = sys.intern
        nodes: list[Node] = []
        by_name: dict[str, Node] = {}
        duplicates: dict[str, int] = {}
        has_control: list[bool] = []   # by node index: some ^input (edges made the slow way)
        index = 0
        for nd in graph_def.node:
            n = new_node(Node)
            n.proto = nd
            n.index = index
            index += 1
            name = n.name = nd.name
            # one string per op type, not per node: less memory, and its hash (set and dict
            # lookups by op everywhere) is computed once
            n.op = intern(nd.op)
            n.device = nd.device
            n.in_edges = []
            n.out_edges = []
            data: list[tuple[str, int]] = []
            control: list[str] = []
            # a slice is one call that makes a plain list (iterating the repeated field
            # itself costs a call per element); most inputs are a bare node name: no parse
            for s in nd.input[:]:
                if ":" in s or s[:1] == "^":
                    src, slot = parse_input(s)
                    if slot == CONTROL_SLOT:
                        control.append(src)
                        continue
                    data.append((src, slot))
                else:
                    data.append((s, 0))
            n.inputs = data
            n.control_inputs = control
            has_control.append(bool(control))
            nodes.append(n)
            if name in by_name:
                duplicates[name] = duplicates.get(name, 1) + 1
            else:
                by_name[name] = n
        self.nodes = nodes
        self._by_name = by_name
        self.duplicates = duplicates
        self.missing_inputs: list[tuple[Node, str]] = []
        # indexes of nodes whose inputs need a closer look by validation: a missing
        # producer, or a control input listed before a data input
        self.irregular_inputs: set[int] = set()
        # edges whose source is not before their destination in file order: a loop's
        # NextIteration -> Merge, or a graph not written in topological order (none means
        # the file order is a topological order)
        self.backward_edges: list[Edge] = []
        # (node, slot) -> edges reading it: built on first use (few callers need it)
        self._consumers_index: dict[tuple[str, int], list[Edge]] | None = None
        missing = self.missing_inputs
        backward = self.backward_edges
        irregular = self.irregular_inputs
        edge = tuple.__new__
        get = by_name.get
        controls = 0
        for n, ctl in zip(nodes, has_control):
            name = n.name
            index = n.index
            in_edges = n.in_edges
            if not ctl:
                # data inputs only: input j is dst_input j
                k = 0
                inputs = n.inputs
                for src, slot in inputs:
                    producer = get(src)
                    if producer is None:
                        missing.append((n, n.proto.input[k]))
                        irregular.add(n.index)
                    else:
                        # the producer's own name object, not the parsed copy: later dict
                        # lookups by it then match by identity, without comparing the
                        # characters (which on big graphs means a cache miss per lookup)
                        src = producer.name
                        inputs[k] = (src, slot)
                        e = edge(Edge, (src, slot, name, k))
                        in_edges.append(e)
                        producer.out_edges.append(e)
                        if producer.index >= index:
                            backward.append(e)
                    k += 1
                continue
            k = 0
            seen_control = False
            for s in n.proto.input:
                src, slot = parse_input(s)
                producer = get(src)
                if producer is None:
                    missing.append((n, s))
                    irregular.add(n.index)
                    if slot != CONTROL_SLOT:
                        k += 1
                    continue
                if slot == CONTROL_SLOT:
                    e = edge(Edge, (src, CONTROL_SLOT, name, CONTROL_SLOT))
                    controls += 1
                    seen_control = True
                else:
                    if seen_control:
                        irregular.add(n.index)
                    e = edge(Edge, (src, slot, name, k))
                    k += 1
                in_edges.append(e)
                producer.out_edges.append(e)
                if producer.index >= index:
                    backward.append(e)
            if seen_control:
                # data edges first (already in order when no control came before them)
                in_edges.sort(key=lambda e: (e.dst_input == CONTROL_SLOT, e.dst_input))
        self.num_control_edges = controls

    @property
    def _consumers(self) -> dict[tuple[str, int], list[Edge]]:
        """(node, slot) -> the edges reading it, in node order then input order."""
        index = self._consumers_index
        if index is None:
            index = {}
            with gc_paused():
                for n in self.nodes:
                    for e in n.in_edges:
                        key = (e.src, e.src_output)
                        lst = index.get(key)
                        if lst is None:
                            index[key] = [e]
                        else:
                            lst.append(e)
            self._consumers_index = index
        return index

    # --- lookup -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Node | None:
        return self._by_name.get(name)

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFoundError(f"no node named '{name}' in the graph") from None

    @property
    def names(self) -> Iterable[str]:
        return self._by_name.keys()

    @property
    def by_name(self) -> Mapping[str, Node]:
        """Name -> node (the first of duplicates), the mapping behind get(): for loops that
        look up every edge (``by_name.get`` saves a Python call per lookup). Read only."""
        return self._by_name

    def consumers(self, node: str, slot: int = 0) -> list[Edge]:
        """Edges reading tensor ``node:slot`` (slot -1: control edges out of ``node``)."""
        return self._consumers.get((node, slot), [])

    def producers(self, name: str) -> list[str]:
        """Names of nodes ``name`` reads from (data and control), existing ones only."""
        return [e.src for e in self.node(name).in_edges]

    @property
    def library(self) -> Any:
        return self.graph_def.library

    @property
    def versions(self) -> Any:
        return self.graph_def.versions

    # --- traversal ----------------------------------------------------------------------
    def topological_order(self, nodes: Iterable[str] | None = None) -> list[Node]:
        """Kahn order over ``nodes`` (default all), ignoring NextIteration back edges.

        Nodes left in an illegal cycle are appended at the end in file order, so callers
        always get every node once; validation reports the cycle itself.
        """
        if nodes is None and not self.duplicates:
            if self._order is None:
                self._order = self._whole_order()
            return list(self._order)
        by_name = self._by_name
        chosen: Any = by_name if nodes is None else set(nodes)
        indeg: dict[str, int] = {}
        for name in chosen:
            d = 0
            for e in by_name[name].in_edges:
                # an edge out of a NextIteration is a loop's back edge: not an ordering
                if e.src in chosen and by_name[e.src].op not in NEXT_ITERATION_OPS:
                    d += 1
            indeg[name] = d
        ready = sorted((by_name[n] for n, d in indeg.items() if d == 0),
                       key=lambda n: n.index, reverse=True)
        order: list[Node] = []
        while ready:
            n = ready.pop()
            order.append(n)
            if n.op in NEXT_ITERATION_OPS:
                continue   # all its out edges are back edges
            for e in n.out_edges:
                left = indeg.get(e.dst)
                if left is not None:
                    indeg[e.dst] = left - 1
                    if left == 1:
                        ready.append(by_name[e.dst])
        if len(order) < len(chosen):
            seen = {n.name for n in order}
            order.extend(sorted((by_name[n] for n in chosen if n not in seen),
                                key=lambda n: n.index))
        return order

    def _whole_order(self) -> list[Node]:
        """topological_order() of the whole graph when every name is unique: the same order
        with less bookkeeping (every edge's source is in the graph; nodes are already in
        index order)."""
        nodes = self.nodes
        by_name = self._by_name
        back = {n.name for n in nodes if n.op in NEXT_ITERATION_OPS}
        if back:
            indeg = {n.name: sum(1 for e in n.in_edges if e.src not in back) for n in nodes}
        else:
            indeg = {n.name: len(n.in_edges) for n in nodes}
        ready = [n for n in reversed(nodes) if not indeg[n.name]]
        order: list[Node] = []
        pop, push, append = ready.pop, ready.append, order.append
        while ready:
            n = pop()
            append(n)
            if back and n.name in back:
                continue   # all its out edges are back edges
            for e in n.out_edges:
                dst = e.dst
                left = indeg[dst] - 1
                indeg[dst] = left
                if not left:
                    push(by_name[dst])
        if len(order) < len(nodes):
            seen = {n.name for n in order}
            order.extend(n for n in nodes if n.name not in seen)
        return order


def is_back_edge(g: Graph, e: Edge) -> bool:
    """A loop's back edge: out of a NextIteration (into its Merge)."""
    src = g.get(e.src)
    return src is not None and src.op in NEXT_ITERATION_OPS
