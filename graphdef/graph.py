"""The read-optimized view over a GraphDef shared by every tool.

Inputs are parsed once (``name``, ``name:k``, ``^name``); edges are indexed both ways so no
tool scans the node list to find producers or consumers. A control edge has
``dst_input == CONTROL_SLOT`` (and ``src_output == CONTROL_SLOT``), as in TensorFlow.

The view is immutable by convention: passes build a new GraphDef and wrap it again.
Duplicate names and inputs naming missing nodes are recorded (``duplicates``,
``missing_inputs``) rather than raised, so that validation can report them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .errors import NotFoundError, UsageError

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


@dataclass(frozen=True, slots=True)
class Edge:
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

    def __init__(self, proto: Any, index: int) -> None:
        self.proto = proto
        self.index = index
        self.name: str = proto.name
        self.op: str = proto.op
        self.device: str = proto.device
        self.inputs: list[tuple[str, int]] = []
        self.control_inputs: list[str] = []
        for s in proto.input:
            src, slot = parse_input(s)
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
        self.graph_def = graph_def
        self.nodes: list[Node] = [Node(nd, i) for i, nd in enumerate(graph_def.node)]
        self._by_name: dict[str, Node] = {}
        self.duplicates: dict[str, int] = {}
        for n in self.nodes:
            if n.name in self._by_name:
                self.duplicates[n.name] = self.duplicates.get(n.name, 1) + 1
            else:
                self._by_name[n.name] = n
        self.missing_inputs: list[tuple[Node, str]] = []
        self._consumers: dict[tuple[str, int], list[Edge]] = {}
        self.num_control_edges = 0
        by_name = self._by_name
        for n in self.nodes:
            k = 0
            for s in n.proto.input:
                src, slot = parse_input(s)
                producer = by_name.get(src)
                if producer is None:
                    self.missing_inputs.append((n, s))
                    if slot != CONTROL_SLOT:
                        k += 1
                    continue
                if slot == CONTROL_SLOT:
                    e = Edge(src, CONTROL_SLOT, n.name, CONTROL_SLOT)
                    self.num_control_edges += 1
                else:
                    e = Edge(src, slot, n.name, k)
                    k += 1
                n.in_edges.append(e)
                producer.out_edges.append(e)
                self._consumers.setdefault((src, slot), []).append(e)
            n.in_edges.sort(key=lambda e: (e.dst_input == CONTROL_SLOT, e.dst_input))

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
        chosen = set(self._by_name) if nodes is None else set(nodes)
        indeg: dict[str, int] = {}
        for name in chosen:
            n = self._by_name[name]
            indeg[name] = sum(1 for e in n.in_edges
                              if e.src in chosen and not is_back_edge(self, e))
        ready = sorted((self._by_name[n] for n, d in indeg.items() if d == 0),
                       key=lambda n: n.index, reverse=True)
        order: list[Node] = []
        while ready:
            n = ready.pop()
            order.append(n)
            for e in n.out_edges:
                if e.dst in indeg and not is_back_edge(self, e):
                    indeg[e.dst] -= 1
                    if indeg[e.dst] == 0:
                        ready.append(self._by_name[e.dst])
        if len(order) < len(chosen):
            seen = {n.name for n in order}
            order.extend(sorted((self._by_name[n] for n in chosen if n not in seen),
                                key=lambda n: n.index))
        return order


NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})


def is_back_edge(g: Graph, e: Edge) -> bool:
    """A loop's back edge: out of a NextIteration (into its Merge)."""
    src = g.get(e.src)
    return src is not None and src.op in NEXT_ITERATION_OPS
