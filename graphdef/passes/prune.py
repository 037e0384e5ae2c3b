"""Pass ``prune``: keep only what the fetches and targets need (graphdef.prune does the walk).

Fed tensors do not cut the graph here, unlike ``dfg prune --feed``: a tensor named by
``--feed`` *may* be fed, so whatever computes it when it is not fed must stay. Fed nodes and
every Placeholder are kept as extra roots, so feeding them still finds them (a caller that
feeds every input of a model must not fail because one input turned out to be unused;
TensorFlow's Grappler keeps them too).
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph, parse_tensor_name, without_gc
from ..op_sets import INPUT_OPS
from ..prune import prune
from .common import PassOptions


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    fed_nodes = [parse_tensor_name(f)[0] for f in options.feeds]
    placeholders = [n.name for n in graph.nodes if n.op in INPUT_OPS]
    targets = list(dict.fromkeys([*options.targets, *(n for n in fed_nodes if n in graph),
                                  *placeholders]))
    out = prune(graph, list(options.fetches), feeds=(), targets=targets)
    gd = graph.graph_def
    # Nothing pruned: hand back the input, as a pass with nothing to do does (the pipeline
    # then knows it unchanged without comparing bytes). prune keeps node order and only
    # drops nodes and unused functions; it copies versions and library and nothing else.
    if len(out.node) == len(gd.node) and not graph.duplicates \
            and {f.name for f, _v in gd.ListFields()} <= {"node", "versions", "library"} \
            and out.library == gd.library:
        return gd
    return out
