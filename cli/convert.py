"""``dfg convert``: between binary, text and JSON GraphDefs."""

from __future__ import annotations

import click

from .options import graph_argument, load, output_option, to_option


@click.command()
@graph_argument
@output_option
@to_option
def convert(graph: str, output: str, to: str | None) -> None:
    """Convert GRAPH to .pb, .pbtxt or .json (format from OUT's extension unless --to).

    The conversion is lossless: pbtxt -> pb gives the bytes TensorFlow writes. OUT is written
    atomically, so a failure never leaves a half-written file.

    \b
    Example:
      dfg convert model.pbtxt -o model.pb
      dfg convert model.pb --to pbtxt | less
    """
    from dfg.graphdef.io import format_from_path, save_graphdef

    gd = load(graph).graph_def
    save_graphdef(gd, output, to or format_from_path(output, "pbtxt"))
