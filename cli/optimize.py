"""``dfg optimize``: rewrite a graph so the same fetches come out with less work."""

from __future__ import annotations

import re

import click

from .feeds import _split_feed_specs, check_feeds, parse_feeds
from .options import (
    console,
    emit_json,
    feed_names_option,
    fetch_option,
    graph_argument,
    graph_output,
    json_option,
    load,
    names,
    target_option,
    tensor_selection,
    write_graph,
)

_SIZE = re.compile(r"(\d+)\s*([kmg]i?b?|b)?", re.IGNORECASE)


def _bytes(value: str) -> int:
    """``1048576``, ``512k``, ``1MiB``, ``2M``: binary multiples."""
    from dfg.graphdef.errors import UsageError

    m = _SIZE.fullmatch(value.strip())
    if m is None:
        raise UsageError(f"--max-const-bytes '{value}' is not a size (e.g. 1048576, 512KiB, 1M)")
    unit = (m.group(2) or "b").lower()[0]
    return int(m.group(1)) * {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit]


@click.command()
@graph_argument
@fetch_option(help="Tensor that must still be computable under its name (repeatable or "
                   "comma-separated).")
@target_option("Node that must still run, e.g. an init op (repeatable, or comma-separated).")
@feed_names_option("Tensor that may be fed: it stays feedable and is never folded, merged or "
                   "bypassed; unlike dfg prune --feed it does not cut the graph (repeatable, "
                   "or comma-separated).")
@graph_output
@click.option("--passes", "passes", metavar="a,b,c",
              help="Run only these passes (always in the order listed above).")
@click.option("--skip", "skip", multiple=True, metavar="P",
              help="Do not run this pass (repeatable or comma-separated).")
@click.option("--max-const-bytes", "max_const_bytes", default="1MiB", show_default=True,
              metavar="N", help="Largest constant folding may create (bytes; k/M/G suffixes).")
@click.option("--max-rounds", "max_rounds", type=click.IntRange(1, 1000), default=10,
              show_default=True, help="Repeat the passes at most this many times.")
@click.option("--report", is_flag=True,
              help="Print a table of what each pass did on standard error.")
@json_option
@click.option("--verify", "do_verify", is_flag=True,
              help="Run original and optimized graph on random inputs and compare the fetches.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random inputs of --verify.")
@click.option("--verify-feed", "verify_feeds", multiple=True, metavar="NAME=VALUE",
              callback=_split_feed_specs,
              help="A real value for --verify to feed (as dfg run --feed: a literal, "
                   "@file.npy, @file.npz:key ...; the tensor stays feedable); other "
                   "Placeholders get random values (repeatable).")
def optimize(graph: str, fetches: tuple[str, ...], targets: tuple[str, ...],
             feeds: tuple[str, ...], output: str, fmt: str, passes: str | None,
             skip: tuple[str, ...], max_const_bytes: str, max_rounds: int, report: bool,
             as_json: bool, do_verify: bool, seed: int,
             verify_feeds: tuple[str, ...] = ()) -> None:
    """Optimize GRAPH for the given fetches and targets and write the result.

    Fetched tensors keep their names and values, targets still run, every tensor named by
    --feed and every Placeholder stays feedable. Each pass returns a new graph; after each
    one the graph is validated, and a pass that fails or breaks the graph is skipped with a
    warning (the output is never a corrupted graph). The passes repeat until nothing changes.

    \b
    Passes (in the order they run; * = not run unless named in --passes):
      lower_functional  inline function calls, lower If/Case/While to v1 control flow; for
                        a TF2 graph kept only if the result is no larger than without it
      prune             drop every node the fetches and targets do not need
      debug_strip *     remove Assert/CheckNumerics/Print (a failing Assert stops failing)
      constant_folding  evaluate nodes whose inputs are constants, with dfg's own kernels
                        (stateless ops only; never beyond --max-const-bytes; never a node
                        whose evaluation fails, so errors stay errors); Shape/Rank/Size of
                        statically known shapes
      dead_branches     a cond with a constant predicate keeps only the branch it takes
      arithmetic        x*1, x+0, x-0, x/1, --x; (x+c1)+c2 -> x+(c1+c2); AddN of x*c_i
                        -> x*sum(c_i); respects broadcasting; never x*0 on floats (NaN*0)
      fold_batch_norm   inference FusedBatchNorm folded into the Conv2D filter + BiasAdd
      fold_pad          a zero Pad before a Conv2D (Keras ZeroPadding2D) becomes its
                        padding="EXPLICIT" (no padded copy of the feature map)
      sink_squeeze *    a Conv1D's Squeeze after its BiasAdd and activation, so
                        fuse_conv_bias_act takes them into the convolution
      loop_invariant    values computed only from a loop's constant inputs move out of it
      hoist_projection  an RNN's input projection (step t of a TensorList times a loop
                        constant) for every step as one Einsum before the loop
      hoist_concat_projection  a TF1 cell's MatMul of concat([x_t, h]): x's rows of the
                        kernel times every step as one Einsum before the loop, h's in it
      cse               identical computations computed once
      identity_removal  Identity/StopGradient/Snapshot/IdentityN/NoOp removed (control
                        dependencies kept); never a variable read or a cond pivot
      fuse_conv_bias_act *   Conv2D/DepthwiseConv2dNative + BiasAdd + activation as one
                        _FusedConv2D (what the Session does at run time)
      fuse_matmul_bias_act * MatMul + BiasAdd + activation as one _FusedMatMul
      fuse_elementwise *     a chain of elementwise ops as one dfg-private
                        _DfgElementwiseChain node (TensorFlow cannot run it)

    \b
    Output: the graph goes to FILE (-o; default standard output as pbtxt; format from
    --format or FILE's extension), written atomically. --report prints a table (pass, nodes
    and edges before/after, changed, time) on standard error, so standard output stays the
    graph.
    --json prints a JSON report on standard output instead, so the graph must go to a file
    with -o. JSON keys: input, output, graph{nodes_before, nodes_after, edges_before,
    edges_after}, passes, rounds, converged, records[{name, round, nodes_before,
    nodes_after, edges_before, edges_after, changed, seconds, status, message}], warnings,
    verify ({ok, message, first_difference, fed, compared, nothing_compared} or null).

    \b
    --verify runs the original and the optimized graph once each (fresh sessions) with the
    --verify-feed values and random values for every other Placeholder the fetches need
    (seeded by --seed, unknown dimensions as 2) and compares every fetch (rtol 1e-5, atol
    1e-6). Its verdict is always
    printed: in the --report table or the --json report if asked for, else as one line on
    standard error when standard output carries the graph, on standard output if not. If they
    differ, or nothing could be compared (both graphs fail the same way, so no fetch ran),
    the graph is not written and the exit status is 1.

    \b
    Exit status: 0 ok; 1 GRAPH is invalid, a name is not in it, or --verify found a
    difference or could verify nothing; 2 bad usage or unreadable GRAPH.

    \b
    Examples:
      dfg optimize model.pb --fetch logits -o model.opt.pb --report
      dfg optimize model.pbtxt --fetch y --feed x --verify > opt.pbtxt
      dfg optimize train.pbtxt --fetch loss --target init --skip loop_invariant
      dfg optimize model.pb --fetch y -o opt.pb --json | jq '.graph'
    """
    from dfg.graphdef.errors import DfgError, InvalidGraphError, UsageError
    from dfg.graphdef.passes import PassOptions
    from dfg.graphdef.passes.pipeline import optimize as run_pipeline
    from dfg.graphdef.validate import validate

    fetch_list, feed_list, target_list = tensor_selection("optimize", fetches, feeds, targets)
    verify_values = parse_feeds(verify_feeds)
    if verify_values and not do_verify:
        raise UsageError("--verify-feed gives values to --verify: add --verify")
    # a tensor given a value stays feedable, as if named by --feed
    feed_list += [n for n in verify_values if n not in feed_list]
    if as_json and output == "-":
        raise UsageError("--json prints the report on standard output: write the graph to a "
                         "file with -o OUT")
    pass_list = names((passes,)) if passes is not None else None
    options = PassOptions(tuple(fetch_list), tuple(target_list), tuple(feed_list),
                          _bytes(max_const_bytes))
    g = load(graph)
    errors = [d for d in validate(g) if d.is_error]
    if errors:
        raise InvalidGraphError(f"the graph is not valid ({len(errors)} error"
                                f"{'s' if len(errors) != 1 else ''}; first: {errors[0]}); "
                                "see `dfg validate`", source=graph)
    result = run_pipeline(g, options, pass_list, skip=names(skip), max_rounds=max_rounds)
    from dfg.graphdef.text import printable

    for w in result.warnings:
        click.echo(f"dfg: warning: {printable(w)}", err=True)

    verdict = None
    if do_verify:
        from dfg.graphdef.passes.verify import verify

        from .progress import progress

        with progress("verify", None, enabled=not as_json):
            if verify_values:
                check_feeds(g, verify_values)
            verdict = verify(g, result.graph_def, fetch_list, target_list, seed=seed,
                             feeds=dict(verify_values) or None)
    if report:
        _print_report(result, verdict, fetch_list)
    if as_json:
        emit_json({
            "input": graph,
            "output": output,
            "graph": {"nodes_before": result.nodes_before, "nodes_after": result.nodes_after,
                      "edges_before": result.edges_before, "edges_after": result.edges_after},
            "passes": result.passes,
            "rounds": result.rounds,
            "converged": result.converged,
            "records": [r.to_dict() for r in result.records],
            "warnings": result.warnings,
            "verify": None if verdict is None else {
                **verdict.to_dict(), "nothing_compared": verified_nothing(verdict, fetch_list)},
        })
    if verdict is not None:
        if not report and not as_json:    # (both carry the verdict themselves)
            click.echo(f"dfg optimize: verify: {_label(verdict, fetch_list)}: "
                       f"{verdict.message}", err=output == "-")
        if not verdict.ok:
            raise DfgError(f"--verify: the optimized graph differs from the original: "
                           f"{verdict.message} (graph not written)")
        if verified_nothing(verdict, fetch_list):
            raise DfgError(f"--verify could not compare anything: {verdict.message} (graph "
                           "not written; fix the graph or the fetches first)")
    write_graph(result.graph_def, output, fmt)


def verified_nothing(verdict, fetches: list[str]) -> bool:
    """An 'ok' that compared no fetch: both graphs failed the same way (or no fetch ran)."""
    if not verdict.ok:
        return False
    if fetches:
        return not verdict.compared
    return "fail" in verdict.message     # targets only: ok unless both failed


def _label(verdict, fetches: list[str]) -> str:
    if not verdict.ok:
        return "DIFFERENT"
    return "NOTHING COMPARED" if verified_nothing(verdict, fetches) else "ok"


def _print_report(result, verdict, fetches: list[str]) -> None:
    from rich.table import Table

    con = console(stderr=True)
    table = Table(title="dfg optimize", title_justify="left")
    for col, just in (("round", "right"), ("pass", "left"), ("nodes", "right"),
                      ("edges", "right"), ("changed", "left"), ("time", "right")):
        table.add_column(col, justify=just)
    for r in result.records:
        changed = {"ok": "yes" if r.changed else "", "failed": "FAILED (skipped)",
                   "rejected": "REJECTED (skipped)"}[r.status]
        table.add_row(str(r.round), r.name, f"{r.nodes_before} -> {r.nodes_after}",
                      f"{r.edges_before} -> {r.edges_after}", changed,
                      f"{r.seconds * 1000:.1f} ms")
    table.add_row("", "total", f"{result.nodes_before} -> {result.nodes_after}",
                  f"{result.edges_before} -> {result.edges_after}",
                  "converged" if result.converged else "round limit",
                  f"{sum(r.seconds for r in result.records) * 1000:.1f} ms")
    con.print(table)
    if verdict is not None:
        con.print(f"verify: {_label(verdict, fetches)}: {verdict.message}")
