"""``dfg prune``: keep only what some fetches and targets need."""

from __future__ import annotations

import click

from .options import (
    feed_names_option,
    fetch_option,
    graph_argument,
    graph_output,
    load,
    target_option,
    tensor_selection,
    write_graph,
)


@click.command()
@graph_argument
@fetch_option(help="Tensor to keep, node or node:index (repeatable, or comma-separated).")
@feed_names_option("Tensor that will be fed: it becomes a Placeholder and cuts the graph "
                   "(repeatable, or comma-separated).")
@target_option("Node to keep for its effects, e.g. an init op (repeatable, or "
               "comma-separated).")
@graph_output
def prune(graph: str, fetches: tuple[str, ...], feeds: tuple[str, ...],
          targets: tuple[str, ...], output: str, fmt: str) -> None:
    """Write the part of GRAPH that the fetches and targets need.

    Keeps exactly the nodes reachable backwards from the fetches and targets through data
    and control inputs (loop back edges included: loops stay whole) and colocation hints
    (_class "loc:@w" keeps w), as TensorFlow's extract_sub_graph does; node order and
    versions are kept. Of the function library, exactly the functions the kept nodes run
    stay (While/If/Case/PartitionedCall function attrs, ops naming a function, and what
    those bodies call, plus their gradient functions); the rest, and the gradients
    entries of dropped functions, go.

    \b
    A fed tensor cuts the graph, as TensorFlow's strip_unused does:
      --feed x (or x:0)  node x becomes a Placeholder named x with x's dtype and the shape
                         known from _output_shapes / its shape attr / a Const's value;
                         whatever only x needed is dropped.
      --feed x:k, k > 0  a Placeholder named x/feed_k replaces x:k for its readers (a
                         Placeholder has one output); x stays only if still needed. Same
                         for x:0 when x must still run (a control edge on it).
    Tensors inside a while loop cannot be fed. Fetching a fed tensor is allowed when the
    name still holds it (x:0 with x replaced).

    \b
    Output: pbtxt, pb or json from --format, else from FILE's extension; pbtxt on standard
    output ('-', the default), so it pipes into other commands.
    Exit status: 1 when a fetch, feed or target names no node (with a did-you-mean);
    2 for a malformed tensor name or an unreadable GRAPH.

    \b
    Examples:
      dfg prune model.pb --fetch logits -o small.pb
      dfg prune model.pb --fetch y --feed hidden:0 | dfg info -
      dfg prune vars.pbtxt --fetch w/read,total --target init --format json
    """
    from dfg.graphdef.graph import gc_paused
    from dfg.graphdef.prune import prune as run_prune

    fetch_list, feed_list, target_list = tensor_selection("prune", fetches, feeds, targets)
    # the collector stays paused until the graph view is freed (right after run_prune
    # returns): resuming while it lives costs a full collection that scans every node
    with gc_paused():
        graph_def = run_prune(load(graph), fetch_list, feeds=feed_list, targets=target_list)
    write_graph(graph_def, output, fmt)
