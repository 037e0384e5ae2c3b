"""Pass ``lower_functional``: inline function calls and lower If/Case/While to v1 dataflow.

The rewrite itself lives in ``graphdef/lowering.py`` (the Session applies the same one before
running a TF2 graph). As a pass it lets the others see through function boundaries: constants
fold across calls, dead branches of a lowered If with a constant predicate go, loop-invariant
code moves out of a lowered While. The pipeline keeps its result only when the optimized graph
is no larger (nodes in function bodies counted) than optimizing without it (see
``pipeline.optimize``), unless the pass is asked for by name.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph, without_gc
from ..lowering import lower_functional, needs_lowering
from .common import PassOptions


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    gd = graph.graph_def
    if not gd.HasField("library") and not needs_lowering(gd):
        return gd               # nothing to do: the input itself, as every pass hands back
    return lower_functional(gd)
