"""``dfg freeze``: a SavedModel signature as one self-contained GraphDef."""

from __future__ import annotations

import json
import sys

import click

from .options import graph_output, write_graph


@click.command()
@click.argument("saved_model", metavar="DIR", type=str)
@click.option("--signature", default=None, metavar="KEY",
              help="Signature to freeze (default: serving_default, or the only one).")
@click.option("--tags", default=None, metavar="T[,T...]",
              help="MetaGraphDef tag set (default: serve, or the only one).")
@graph_output
@click.option("--json", "as_json", is_flag=True,
              help="Print the feed/fetch names as JSON on standard output (stderr if -o -).")
def freeze(saved_model: str, signature: str | None, tags: str | None, output: str,
           fmt: str, as_json: bool) -> None:
    """Freeze a signature of the SavedModel DIR into one GraphDef that runs in dfg and in
    TensorFlow: variables restored from DIR/variables and turned into Consts, function calls
    inlined and If/While lowered to v1 control flow, pruned to the signature's outputs, no
    function library.

    Inputs stay the signature's Placeholders (the tensor names `dfg info DIR` lists, e.g.
    serving_default_x:0). Each output gets an Identity node named after its output key
    (KEY:0; KEY_1:0 if a node already has that name). The names are printed after writing:
    on standard output, or on standard error when the graph goes there (-o -, the default).

    A signature that reads lookup tables keeps their initializers (asset files by their path
    in DIR/assets) under one NoOp, init_all_tables: run it first, as a TF1 user runs
    tables_initializer (dfg run frozen.pb --init init_all_tables ...).

    \b
    JSON (--json, stable): {"signature", "inputs": {key: {name, dtype, shape}},
    "outputs": {key: {name, dtype, shape, source}}, "variables", "constant_bytes", "nodes",
    and "init" (the NoOp to run first) when the graph reads tables}.

    \b
    Example:
      dfg freeze saved_model_dir -o frozen.pb
      dfg run frozen.pb --feed serving_default_x=@x.npy --fetch output_0
    """
    from dfg.executor.savedmodel import freeze as freeze_model
    from dfg.executor.savedmodel import load
    tag_set = [t.strip() for t in tags.split(",") if t.strip()] if tags else None
    with load(saved_model, tags=tag_set, threads=1) as model:
        frozen, info = freeze_model(model, signature)
    write_graph(frozen, output, fmt)
    stream = sys.stderr if output == "-" else sys.stdout
    if as_json:
        stream.write(json.dumps(info, indent=2) + "\n")
        return
    from dfg.graphdef.text import printable

    lines = [f"froze signature '{info['signature']}': {info['nodes']} nodes, "
             f"{info['variables']} variables as constants ({info['constant_bytes']:,} bytes)"]
    for key, spec in info["inputs"].items():
        lines.append(f"  feed  {printable(spec['name']):<32} input {printable(key)} "
                     f"({spec['dtype']})")
    for key, spec in info["outputs"].items():
        lines.append(f"  fetch {printable(spec['name']):<32} output {printable(key)} "
                     f"({spec['dtype']})")
    if info.get("init"):
        lines.append(f"  init  {printable(info['init']):<32} run it first (--init): it fills "
                     "the lookup tables")
    stream.write("\n".join(lines) + "\n")
