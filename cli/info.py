"""``dfg info``: what a graph contains, at a glance."""

from __future__ import annotations

import click

from .options import console, data_output, emit_json, graph_argument, json_option, load


@click.command()
@graph_argument
@json_option
@click.option("--nodes", "node_outputs", is_flag=True,
              help="Also list every node's outputs with static dtype and shape.")
@data_output
def info(graph: str, as_json: bool, node_outputs: bool) -> None:
    """Summarize GRAPH: likely inputs and outputs, op histogram, constants, variables, loops,
    library functions.

    Dtypes and shapes are static: from _output_shapes, attrs (Placeholder shape, Const
    value, While/If output_shapes, function signatures) and simple shape rules; "?" (null
    in JSON) where they cannot be told without running the graph.

    \b
    JSON keys (stable; shapes are lists, null for an unknown dimension or rank): file,
    nodes, inputs[{name,op,dtype,shape}],
    outputs[{name,op,dtype,shape}], op_types{op:count},
    constants{count,parameters,bytes}, variables[{name,op,dtype,shape}], control_edges,
    frames[{name,parent,depth,parallel_iterations,nodes}], devices,
    versions{producer,min_consumer}, library_functions,
    functions[{name,inputs[{name,dtype}],outputs[{name,dtype}],nodes,callers,depth}]
    (callers: top-level nodes running it, directly or through other functions; depth: 1
    when a top-level node calls it, 2 when only depth-1 functions do ..., null when
    nothing does), and with --nodes tensors[{name,op,dtype,shape}] (every node output).

    \b
    Example:
      dfg info examples/while_counter.pbtxt
      dfg info model.pb --json | jq '.inputs'
      dfg info model.pb -o summary.json      # the same JSON, written atomically
      dfg info saved_model_dir     # a SavedModel: tags, signatures, variables

    \b
    A SavedModel directory (or its saved_model.pb): JSON keys (stable): path, kind
    ("saved_model"), tag_sets, tags, tensorflow_version, signatures{key: {key, method_name,
    inputs{key: {name,dtype,shape}}, outputs{...}}}, variables{count, bytes,
    items[{name,dtype,shape,trainable,checkpoint_key,bytes}]} (a TF1 model's variable nodes
    of every kind, each part of a partitioned variable with its whole variable's key),
    checkpoint{prefix,keys,shards,bytes} (null without variables), graph{nodes, functions,
    function_nodes, op_types{op:count}}, saver{filename_tensor,restore_op,save_tensor},
    init_op, assets[filename], functions[{path, concrete_function, inputs[{name,dtype,shape}],
    outputs[{key,dtype,shape}], captures}] (the object graph's concrete functions: run one
    with dfg run DIR --function PATH). Shapes are lists, null where unknown.
    """
    from dfg.graphdef.savedmodel import is_saved_model
    from dfg.graphdef.summary import summarize

    if is_saved_model(graph):
        from .savedmodel_view import show_saved_model

        show_saved_model(graph, as_json)
        return

    from dfg.graphdef.graph import gc_paused

    # the collector stays paused until the graph view is freed (right after summarize
    # returns): resuming while it lives costs a full collection that scans every node
    with gc_paused():
        s = {"file": graph, **summarize(load(graph), node_outputs=node_outputs)}
    if as_json:
        emit_json(s)
        return
    _print_table(s)


def _print_table(s: dict) -> None:
    from rich.table import Table

    con = console()
    con.print(f"{s['file']}: {s['nodes']} nodes, {len(s['op_types'])} op types, "
              f"{s['control_edges']} control edges, producer {s['versions']['producer']}")
    io = Table(title="Inputs and outputs", title_justify="left")
    for col in ("kind", "name", "op", "dtype", "shape"):
        io.add_column(col)
    for i in s["inputs"]:
        io.add_row("input", i["name"], i["op"], i["dtype"] or "?", _shape(i["shape"]))
    for o in s["outputs"]:
        io.add_row("output", o["name"], o["op"], o["dtype"] or "?", _shape(o["shape"]))
    con.print(io)
    c = s["constants"]
    con.print(f"Constants: {c['count']} nodes, {c['parameters']:,} parameters, "
              f"{c['bytes']:,} bytes")
    if s["variables"]:
        con.print("Variables: " + ", ".join(
            f"{v['name']} ({v['dtype'] or 'resource'} {_shape(v['shape'], '')})".rstrip()
            for v in s["variables"]))
    if s["frames"]:
        fr = Table(title="While-loop frames", title_justify="left")
        for col in ("frame", "parent", "parallel_iterations", "nodes"):
            fr.add_column(col)
        for f in s["frames"]:
            fr.add_row(f["name"], f["parent"] or "<root>", str(f["parallel_iterations"]),
                       str(f["nodes"]))
        con.print(fr)
    if s["devices"]:
        con.print("Devices: " + ", ".join(s["devices"]))
    if s["functions"]:
        fn = Table(title="Library functions", title_justify="left")
        for col in ("function", "inputs -> outputs", "nodes", "called by", "depth"):
            fn.add_column(col, overflow="fold")

        def args(items: list[dict]) -> str:
            # dtypes only, runs counted (int32 x3): --json has the argument names
            runs: list[list] = []
            for a in items:
                t = a["dtype"] or "?"
                if runs and runs[-1][0] == t:
                    runs[-1][1] += 1
                else:
                    runs.append([t, 1])
            return ", ".join(t if k == 1 else f"{t} x{k}" for t, k in runs)

        for f in s["functions"]:
            callers = f["callers"]
            shown = ", ".join(callers[:3]) + (f" +{len(callers) - 3}" if len(callers) > 3
                                              else "")
            fn.add_row(f["name"], f"({args(f['inputs'])}) -> ({args(f['outputs'])})",
                       str(f["nodes"]), shown or "-",
                       str(f["depth"]) if f["depth"] is not None else "unused")
        con.print(fn)
    if "tensors" in s:
        ts = Table(title="Node outputs", title_justify="left")
        for col in ("tensor", "op", "dtype", "shape"):
            ts.add_column(col)
        for t in s["tensors"]:
            ts.add_row(t["name"], t["op"], t["dtype"] or "?", _shape(t["shape"]))
        con.print(ts)
    ops = Table(title="Op types", title_justify="left")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for op, n in s["op_types"].items():
        ops.add_row(op, str(n))
    con.print(ops)


def _shape(shape: list | None, unknown: str = "?") -> str:
    """A JSON shape (list, None for an unknown dim; None for an unknown rank) as info shows
    it: [4,?,3]."""
    if shape is None:
        return unknown
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
