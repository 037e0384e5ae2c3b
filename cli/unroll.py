"""``dfg unroll``: replace a while loop by copies of its body."""

from __future__ import annotations

import click

from .options import graph_argument, graph_output, load, write_graph


@click.command()
@graph_argument
@click.option("--loop", "frame", required=True, metavar="FRAME",
              help="The loop's frame name, e.g. while/while_context (see `dfg info`).")
@click.option("--times", type=int, default=None, metavar="N",
              help="Copies of the body (default: the loop's static trip count).")
@graph_output
def unroll(graph: str, frame: str, times: int | None, output: str, fmt: str) -> None:
    """Write GRAPH with the while loop FRAME unrolled: N copies of its body chained in a
    straight line, each Exit an Identity of the last copy's value.

    Refused (exit 1, with the reason) when the trip count is not static and --times is
    not given, when --times contradicts a static count, when the body has stateful ops
    (unrolling could reorder their effects) or loops of its own (unroll the inner loop
    first).

    \b
    Examples:
      dfg unroll examples/while_counter.pbtxt --loop counter/while_context --times 5
      dfg unroll g.pbtxt --loop while/while_context -o flat.pbtxt
    """
    from dfg.graphdef.unroll import unroll as run_unroll

    write_graph(run_unroll(load(graph), frame, times), output, fmt)
