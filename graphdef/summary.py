"""What ``dfg info`` reports about a graph (like TensorFlow's summarize_graph), as plain data."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from . import dtypes as D
from .frames import analyze_frames
from .graph import Graph
from .tensors import format_shape, shape_from_proto

PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
VARIABLE_OPS = frozenset({"VariableV2", "Variable", "VarHandleOp", "TemporaryVariable"})
# never "likely outputs": they are plumbing or run only for their effect
NOT_OUTPUT_OPS = frozenset({"Const", "NoOp", "Assign", "AssignAdd", "AssignSub",
                            "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
                            "Assert", "SaveV2", "RestoreV2"})


def _attr_type(node: Any, key: str) -> str | None:
    return D.name(node.attr[key].type) if key in node.attr else None


def _attr_shape(node: Any, key: str) -> str | None:
    return format_shape(shape_from_proto(node.attr[key].shape)) if key in node.attr else None


def summarize(graph: Graph) -> dict[str, Any]:
    """A JSON-ready summary; key order is part of the stable ``--json`` format."""
    from .opdefs.registry import SignatureError, registry

    reg = registry()
    ops = Counter(n.op for n in graph.nodes)
    inputs = []
    for n in graph.nodes:
        if n.op in PLACEHOLDER_OPS:
            dtype = _attr_type(n, "dtype")
            shape = _attr_shape(n, "shape")
            inputs.append({"name": n.name, "op": n.op, "dtype": dtype, "shape": shape})
    outputs = []
    for n in graph.nodes:
        if n.out_edges or n.op in NOT_OUTPUT_OPS:
            continue
        try:
            count = reg.num_outputs(n.proto) if n.op in reg else 1
        except SignatureError:
            count = 1
        for slot in range(count):
            outputs.append({"name": f"{n.name}:{slot}", "op": n.op})
    params = nbytes = consts = 0
    for n in graph.nodes:
        if n.op == "Const" and "value" in n.attr:
            consts += 1
            t = n.attr["value"].tensor
            shape = shape_from_proto(t.tensor_shape) or ()
            count = math.prod(d or 0 for d in shape)
            params += count
            try:
                itemsize = D.to_numpy(t.dtype).itemsize if D.base(t.dtype) != D.DT_STRING else 0
            except Exception:
                itemsize = 0
            nbytes += count * itemsize if itemsize else len(t.tensor_content) or sum(
                len(s) for s in t.string_val)
    variables = [{"name": n.name, "op": n.op,
                  "dtype": _attr_type(n, "dtype"), "shape": _attr_shape(n, "shape")}
                 for n in graph.nodes if n.op in VARIABLE_OPS]
    fa = analyze_frames(graph)
    frames = [{"name": f.name, "parent": f.parent or None, "depth": f.depth,
               "parallel_iterations": f.parallel_iterations, "nodes": len(f.nodes)}
              for f in fa.loop_frames()]
    devices = sorted({n.device for n in graph.nodes if n.device})
    v = graph.graph_def.versions
    return {
        "nodes": len(graph.nodes),
        "inputs": inputs,
        "outputs": outputs,
        "op_types": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))),
        "constants": {"count": consts, "parameters": params, "bytes": nbytes},
        "variables": variables,
        "control_edges": graph.num_control_edges,
        "frames": frames,
        "devices": devices,
        "versions": {"producer": v.producer, "min_consumer": v.min_consumer},
        "library_functions": len(graph.graph_def.library.function),
    }
