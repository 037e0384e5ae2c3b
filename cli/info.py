"""``dfg info``: what a graph contains, at a glance."""

from __future__ import annotations

import click

from .options import console, emit_json, graph_argument, json_option, load


@click.command()
@graph_argument
@json_option
def info(graph: str, as_json: bool) -> None:
    """Summarize GRAPH: likely inputs and outputs, op histogram, constants, variables, loops.

    \b
    JSON keys (stable): file, nodes, inputs[{name,op,dtype,shape}], outputs[{name,op}],
    op_types{op:count}, constants{count,parameters,bytes}, variables[{name,op,dtype,shape}],
    control_edges, frames[{name,parent,depth,parallel_iterations,nodes}], devices,
    versions{producer,min_consumer}, library_functions.

    \b
    Example:
      dfg info examples/while_counter.pbtxt
      dfg info model.pb --json | jq '.inputs'
    """
    from dfg.graphdef.summary import summarize

    s = {"file": graph, **summarize(load(graph))}
    if as_json:
        emit_json(s)
        return
    _print_table(s)


def _print_table(s: dict) -> None:
    from rich.table import Table

    con = console()
    con.print(f"[bold]{s['file']}[/bold]: {s['nodes']} nodes, {len(s['op_types'])} op types, "
              f"{s['control_edges']} control edges, producer {s['versions']['producer']}")
    io = Table(title="Inputs and outputs", title_justify="left")
    for col in ("kind", "name", "op", "dtype", "shape"):
        io.add_column(col)
    for i in s["inputs"]:
        io.add_row("input", i["name"], i["op"], i["dtype"] or "?", i["shape"] or "?")
    for o in s["outputs"]:
        io.add_row("output", o["name"], o["op"], "", "")
    con.print(io)
    c = s["constants"]
    con.print(f"Constants: {c['count']} nodes, {c['parameters']:,} parameters, "
              f"{c['bytes']:,} bytes")
    if s["variables"]:
        con.print("Variables: " + ", ".join(
            f"{v['name']} ({v['dtype'] or 'resource'} {v['shape'] or ''})".rstrip()
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
    ops = Table(title="Op types", title_justify="left")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for op, n in s["op_types"].items():
        ops.add_row(op, str(n))
    con.print(ops)
