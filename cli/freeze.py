"""``dfg freeze``: a SavedModel signature, or a graph with its TF1 checkpoint, as one
self-contained GraphDef."""

from __future__ import annotations

import json
import sys

import click

from .options import (
    FileGrants,
    fetch_option,
    file_options,
    file_policy,
    graph_output,
    limited,
    max_memory_option,
    write_graph,
)


@click.command()
@click.argument("saved_model", metavar="DIR|GRAPH", type=str)
@fetch_option(help="GRAPH: tensor or node to keep (repeatable, or comma-separated).")
@click.option("--checkpoint", default=None, metavar="PREFIX",
              help="GRAPH: the TF1 checkpoint (default: the one beside a model.ckpt.meta).")
@click.option("--signature", default=None, metavar="KEY",
              help="Signature to freeze (default: serving_default, or the only one).")
@click.option("--tags", default=None, metavar="T[,T...]",
              help="MetaGraphDef tag set (default: serve, or the only one).")
@graph_output
@click.option("--json", "as_json", is_flag=True,
              help="Print the feed/fetch names as JSON on standard output (stderr if -o -).")
@click.option("--timeout", type=float, default=None, metavar="SECONDS",
              help="Seconds the whole command may take (loading, restoring, freezing).")
@max_memory_option
@file_options
@limited
def freeze(saved_model: str, fetches: tuple[str, ...], checkpoint: str | None,
           signature: str | None, tags: str | None, output: str, fmt: str,
           as_json: bool, timeout: float | None = None, max_memory: int | None = None,
           grants: FileGrants | None = None) -> None:
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

    A GRAPH with a TF1 checkpoint (what TF1's freeze_graph.py takes: model.ckpt.meta and
    the checkpoint beside it, or any graph and --checkpoint) is pruned to --fetch and its
    variables, restored by name, become Consts. JSON: {"fetches", "variables",
    "constant_bytes", "nodes"}.

    \b
    Examples:
      dfg freeze saved_model_dir -o frozen.pb
      dfg run frozen.pb --feed serving_default_x=@x.npy --fetch output_0
      dfg freeze model.ckpt.meta --fetch probs -o frozen.pb
    """
    from dfg.graphdef.savedmodel import is_saved_model

    if not is_saved_model(saved_model):
        _freeze_checkpoint(saved_model, fetches, checkpoint, output, fmt, as_json)
        return
    from dfg.executor.savedmodel import freeze as freeze_model
    from dfg.executor.savedmodel import load
    tag_set = [t.strip() for t in tags.split(",") if t.strip()] if tags else None
    with load(saved_model, tags=tag_set, threads=1, max_bytes=max_memory,
              files=file_policy(grants, saved_model)) as model:
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


def _freeze_checkpoint(graph: str, fetches: tuple[str, ...], checkpoint: str | None,
                       output: str, fmt: str, as_json: bool) -> None:
    from dfg.executor.checkpoint import default_prefix
    from dfg.executor.checkpoint import freeze as freeze_graph
    from dfg.graphdef.errors import UsageError

    from .options import load

    names = list(fetches)
    if not names:
        raise UsageError("freezing a graph needs --fetch (what to keep)")
    prefix = checkpoint or default_prefix(graph)
    if prefix is None:
        raise UsageError(f"{graph}: no checkpoint beside it: give --checkpoint PREFIX")
    frozen, info = freeze_graph(load(graph), prefix, names)
    write_graph(frozen, output, fmt)
    stream = sys.stderr if output == "-" else sys.stdout
    if as_json:
        stream.write(json.dumps(info, indent=2) + "\n")
        return
    stream.write(f"froze {', '.join(names)}: {info['nodes']} nodes, {info['variables']} "
                 f"variables as constants ({info['constant_bytes']:,} bytes)\n")
