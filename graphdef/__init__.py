"""The static side of dfg: graph I/O, the graph view, OpDefs, validation, pruning, passes."""

from __future__ import annotations

from .io import load_graph, load_graphdef, save_graphdef

__all__ = ["load_graph", "load_graphdef", "save_graphdef"]
