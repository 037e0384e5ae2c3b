"""The static side of dfg: graph I/O, the graph view, OpDefs, validation, pruning, passes."""

from __future__ import annotations

# First, before anything imports numpy: dfg.executor sets OpenBLAS's thread timeout, which
# OpenBLAS reads only when numpy loads it (see dfg/executor/__init__.py). Cheap: the
# package's own module is a few lines; the executor itself loads lazily.
import dfg.executor  # noqa: F401, I001

from .io import load_graph, load_graphdef, save_graphdef

__all__ = ["load_graph", "load_graphdef", "save_graphdef"]
