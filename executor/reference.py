"""The reference interpreter: the oracle the threaded executor is tested against.

Evaluates the nodes a fetch needs in topological order, with the same kernels, one at a time,
freeing each value after its last use. No control flow, no threads, no scheduling: small
enough to be obviously right.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import UnimplementedError
from dfg.graphdef.frames import CONTROL_FLOW_OPS
from dfg.graphdef.graph import Graph, parse_tensor_name
from dfg.graphdef.opdefs.registry import registry
from dfg.graphdef.prune import dependencies

from .kernels.registry import KernelContext, lookup
from .plan import bind_attrs
from .resources import ResourceManager


def evaluate(graph: Graph, fetches: list[str], feed_dict: dict[str, Any] | None = None
             ) -> list[np.ndarray]:
    feeds = {parse_tensor_name(k): np.asarray(v) for k, v in (feed_dict or {}).items()}
    keys = [parse_tensor_name(f) for f in fetches]
    order = graph.topological_order(dependencies(graph, keys, feeds=feeds))
    uses: dict[str, int] = {}
    for node in order:
        for src, _ in node.inputs:
            uses[src] = uses.get(src, 0) + 1
    values: dict[str, Any] = {}
    resources, step = ResourceManager(), {}
    for node in order:
        if node.op in CONTROL_FLOW_OPS:
            raise UnimplementedError("the reference interpreter has no control flow",
                                     node=node.name, op=node.op)
        args = []
        for src, slot in node.inputs:
            args.append(feeds[(src, slot)] if (src, slot) in feeds else values[src][slot])
            uses[src] -= 1
            if not uses[src] and src not in {n for n, _ in keys}:
                values.pop(src, None)  # last use: free it
        ctx = KernelContext(node.name, node.op, bind_attrs(registry().get(node.op), node),
                            resources=resources, step=step)
        res = lookup(node.op).fn(ctx, *args)
        values[node.name] = res if isinstance(res, (tuple, list)) else (res,)
    return [feeds[k] if k in feeds else np.asarray(values[k[0]][k[1]]) for k in keys]
