"""``dfg ops``: which ops have kernels, and which a graph lacks."""

from __future__ import annotations

import click

from .options import console, emit_json, json_option, load


@click.command()
@json_option
@click.option("--missing", "graph", metavar="GRAPH", default=None,
              help="List the ops GRAPH uses that have no kernel (exit 1 if any).")
def ops(as_json: bool, graph: str | None) -> None:
    """List the ops with kernels (per device) out of the OpDef registry.

    \b
    JSON (stable): {"opdefs": N, "kernels": {"CPU": N, ...}, "ops": [{"op", "devices"}]};
    with --missing: {"graph", "missing": [{"op", "nodes", "example"}]}.

    \b
    Examples:
      dfg ops --json | jq '.kernels'
      dfg ops --missing model.pb
    """
    from dfg.executor.kernels.registry import ops_with_kernels
    from dfg.graphdef.opdefs.registry import registry

    table = ops_with_kernels()
    if graph is not None:
        g = load(graph)
        counts: dict[str, list[str]] = {}
        for n in g.nodes:
            if n.op not in table:
                counts.setdefault(n.op, []).append(n.name)
        missing = [{"op": op, "nodes": len(names), "example": names[0]}
                   for op, names in sorted(counts.items())]
        if as_json:
            emit_json({"graph": graph, "missing": missing})
        elif missing:
            con = console()
            for m in missing:
                con.print(f"{m['op']}: {m['nodes']} node(s), e.g. {m['example']}")
        else:
            console().print(f"{graph}: every op has a kernel")
        if missing:
            raise SystemExit(1)
        return
    per_device: dict[str, int] = {}
    for devs in table.values():
        for d in devs:
            per_device[d] = per_device.get(d, 0) + 1
    if as_json:
        emit_json({"opdefs": len(registry()), "kernels": per_device,
                   "ops": [{"op": op, "devices": devs} for op, devs in table.items()]})
        return
    con = console()
    con.print(f"{len(table)} ops with kernels (" + ", ".join(
        f"{d}: {n}" for d, n in sorted(per_device.items())) + f") of {len(registry())} OpDefs")
    con.print(", ".join(table))
