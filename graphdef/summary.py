"""What ``dfg info`` reports about a graph (like TensorFlow's summarize_graph), as plain data."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from . import dtypes as D
from .frames import analyze_frames
from .graph import Graph, gc_paused
from .op_sets import ENTER_OPS, INPUT_OPS, VARIABLE_OPS
from .tensors import shape_from_proto

# never "likely outputs": they are plumbing or run only for their effect
NOT_OUTPUT_OPS = frozenset({"Const", "NoOp", "Assign", "AssignAdd", "AssignSub",
                            "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
                            "Assert", "SaveV2", "RestoreV2"})


def _attr_type(node: Any, key: str) -> str | None:
    return D.name(node.attr[key].type) if key in node.attr else None


def _shape_list(shape: Any) -> list[int | None] | None:
    """A static shape as JSON gives it: a list (None for an unknown dim), None for an unknown
    rank (``--json`` shapes are lists, as a SavedModel's are)."""
    return None if shape is None else [None if d is None or d < 0 else int(d) for d in shape]


def _attr_shape(node: Any, key: str) -> list[int | None] | None:
    return _shape_list(shape_from_proto(node.attr[key].shape)) if key in node.attr else None


def summarize(graph: Graph, node_outputs: bool = False) -> dict[str, Any]:
    """A JSON-ready summary; key order is part of the stable ``--json`` format.

    Dtypes and shapes of outputs are static (``_output_shapes``, attrs, and the shape rules
    of :class:`dfg.graphdef.viz.TensorFacts`); None where they cannot be told. With
    ``node_outputs`` a last key ``tensors`` lists every output of every node."""
    with gc_paused():
        return _summarize(graph, node_outputs)


def _summarize(graph: Graph, node_outputs: bool) -> dict[str, Any]:
    from .functions import Library, signature
    from .opdefs.registry import SignatureError, registry
    from .viz import TensorFacts

    reg = registry()
    lib = Library(graph.library)
    facts = TensorFacts(graph)

    def num_outputs(n: Any) -> int:
        if n.op in lib:
            return len(signature(lib.function(n.op)).outputs)
        try:
            return reg.num_outputs(n.proto) if n.op in reg else 1
        except SignatureError:
            return 1

    def tensor(n: Any, slot: int) -> dict[str, Any]:
        dt = facts.dtype(n.name, slot)
        shape = facts.shape(n.name, slot)
        return {"name": f"{n.name}:{slot}", "op": n.op,
                "dtype": D.name(dt) if dt else None,
                "shape": _shape_list(shape)}

    ops = Counter(n.op for n in graph.nodes)
    # one pass over the nodes for every per-node fact (each list stays in node order)
    inputs = []
    variables = []
    ends = []                               # likely outputs: nothing reads them
    devices_seen: set[str] = set()
    params = nbytes = consts = 0
    itemsizes: dict[int, int] = {}          # dtype -> bytes per element (0: not fixed)
    for n in graph.nodes:
        op = n.op
        if n.device:
            devices_seen.add(n.device)
        if not n.out_edges and op not in NOT_OUTPUT_OPS:
            ends.append(n)
        if op in INPUT_OPS:
            inputs.append({"name": n.name, "op": op, "dtype": _attr_type(n, "dtype"),
                           "shape": _attr_shape(n, "shape")})
        elif op in VARIABLE_OPS:
            variables.append({"name": n.name, "op": op, "dtype": _attr_type(n, "dtype"),
                              "shape": _attr_shape(n, "shape")})
        elif op == "Const":
            attr = n.proto.attr
            if "value" not in attr:
                continue
            consts += 1
            t = attr["value"].tensor
            shape = t.tensor_shape
            # unknown rank counts as a scalar, an unknown dim as 0 elements
            count = 1 if shape.unknown_rank else math.prod(max(d.size, 0) for d in shape.dim)
            params += count
            dtype = t.dtype
            itemsize = itemsizes.get(dtype)
            if itemsize is None:
                try:
                    itemsize = D.to_numpy(dtype).itemsize if D.base(dtype) != D.DT_STRING \
                        else 0
                except Exception:
                    itemsize = 0
                itemsizes[dtype] = itemsize
            nbytes += count * itemsize if itemsize else len(t.tensor_content) or sum(
                len(s) for s in t.string_val)
    outputs = [tensor(n, slot) for n in ends for slot in range(num_outputs(n))]
    frames = []
    if not ENTER_OPS.isdisjoint(ops):   # only an Enter opens a loop frame
        frames = [{"name": f.name, "parent": f.parent or None, "depth": f.depth,
                   "parallel_iterations": f.parallel_iterations, "nodes": len(f.nodes)}
                  for f in analyze_frames(graph).loop_frames()]
    devices = sorted(devices_seen)
    v = graph.graph_def.versions
    out = {
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
        "functions": functions(graph),
    }
    if node_outputs:
        out["tensors"] = [tensor(n, k) for n in graph.nodes for k in range(num_outputs(n))]
    return out


def functions(graph: Graph) -> list[dict[str, Any]]:
    """One entry per library function, in library order: name, inputs and outputs
    ([{name, dtype}], dtype None where a caller's attr decides it), nodes (body size),
    callers (top-level nodes that run it, directly or through other functions) and depth
    (1: a top-level node calls it; 2: only functions of depth 1 do ...; None: unreachable)."""
    from .functions import Library, call_depths, called_functions, reachable_in, signature

    lib = Library(graph.library)
    if not len(lib):
        return []
    depths = call_depths(graph.graph_def)
    # what each called function reaches, walked once per function rather than once per
    # calling node (thousands of calls of one function would walk its bodies thousands of
    # times)
    reach: dict[str, set[str]] = {}

    def reached(fname: str) -> set[str]:
        found = reach.get(fname)
        if found is None:
            body = lib.get(fname)
            found = reach[fname] = {fname} | (reachable_in(lib, body.node_def)
                                              if body is not None else set())
        return found

    callers: dict[str, list[str]] = {}
    for n in graph.nodes:
        called = called_functions(n.proto, lib)
        if called:
            for fname in sorted(set().union(*(reached(f) for _, f in called))):
                callers.setdefault(fname, []).append(n.name)
    out = []
    seen: set[str] = set()
    for f in graph.graph_def.library.function:
        name = f.signature.name
        if name in seen:
            continue  # a duplicate name: the library keeps one (validate reports it)
        seen.add(name)
        sig = signature(lib.function(name))
        out.append({
            "name": name,
            "inputs": [{"name": a, "dtype": D.name(t) if t else None} for a, t in sig.inputs],
            "outputs": [{"name": a, "dtype": D.name(t) if t else None}
                        for a, t in sig.outputs],
            "nodes": len(lib.function(name).node_def),
            "callers": callers.get(name, []),
            "depth": depths.get(name),
        })
    return out
