"""``dfg convert``: between binary, text and JSON GraphDefs."""

from __future__ import annotations

import click

from .options import graph_argument, graph_output, load, write_graph


@click.command()
@graph_argument
@graph_output
def convert(graph: str, output: str, fmt: str) -> None:
    """Convert GRAPH to .pb, .pbtxt or .json (format from FILE's extension unless --format).

    The conversion is lossless: pbtxt -> pb gives the bytes TensorFlow writes. FILE is written
    atomically, so a failure never leaves a half-written file. An extension that is not a
    graph format (.onnx, none) is refused unless --format names one; pb (binary) is never
    written to a terminal. Standard output gets pbtxt by default.

    \b
    Example:
      dfg convert model.pbtxt -o model.pb
      dfg convert model.pb --format json | jq '.node | length'
    """
    write_graph(load(graph).graph_def, output, fmt)
