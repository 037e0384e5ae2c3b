"""``dfg compare``: run two graphs on the same feeds and compare the fetches."""

from __future__ import annotations

import click

from .feeds import check_feeds, feed_option, parse_feeds
from .options import (
    console,
    data_output,
    emit_json,
    fetch_option,
    file_options,
    file_policy,
    json_option,
    limited,
    load,
    max_memory_option,
    names,
    target_option,
    time_left,
    timeout_option,
)


@click.command()
@click.argument("graph_a", metavar="A", type=str)
@click.argument("graph_b", metavar="B", type=str)
@fetch_option(required=True, help="Tensor to compare (repeatable or comma-separated).")
@feed_option(help="NAME=VALUE fed to both graphs (repeatable); other placeholders get seeded "
                  "random values.")
@target_option("Node both graphs run for its effect (repeatable, or comma-separated).")
@click.option("--rtol", type=float, default=1e-5, show_default=True,
              help="Relative tolerance for floats.")
@click.option("--atol", type=float, default=1e-6, show_default=True,
              help="Absolute tolerance for floats.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Executor threads of both sessions.")
@click.option("--no-optimize", "no_optimize", is_flag=True,
              help="Run node by node, without the executor's straight-line and loop programs.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the random feeds.")
@click.option("--bisect", "do_bisect", is_flag=True,
              help="Also find the first node (in A's topological order) whose output differs.")
@click.option("--batch", type=click.IntRange(min=1), default=64, show_default=True,
              help="Tensors fetched per run while bisecting (bounds memory).")
@timeout_option
@max_memory_option
@json_option
@data_output
@file_options
@limited
def compare(graph_a: str, graph_b: str, fetches: tuple[str, ...], feeds: tuple[str, ...],
            targets: tuple[str, ...], rtol: float, atol: float, threads: int,
            no_optimize: bool, seed: int, do_bisect: bool, batch: int,
            timeout: float | None, max_memory: int | None, as_json: bool,
            grants=None) -> None:
    """Run graphs A and B one step each on the same feeds and compare the fetched tensors.

    Feeds are the --feed values plus, for every other Placeholder the fetches need, a seeded
    random value (dtype and shape from the placeholder; unknown dimensions 2). Per fetch it
    reports the max absolute and relative difference and whether B is within atol + rtol *
    |A|. Both graphs failing with the same TensorFlow error class is agreement ("ok" in
    JSON) but nothing was compared: reported as NOTHING COMPARED, exit 1.

    \b
    --bisect: fetch the outputs of the nodes both graphs share (same name, op and output
    count) in A's topological order, --batch tensors per run, and name the first that
    differs (a changed constant is named itself). Nodes inside while loops cannot be
    fetched: they are skipped and counted.

    \b
    JSON keys (stable): a, b, ok, nothing_compared, message, rtol, atol, fed {tensor: shape},
    fetches [{name, ok, dtype, shape, max_abs, max_rel, problem}], error_a, error_b, bisect
    ({first, op, diff, candidates, checked, runs, skipped_in_loops, skipped_failing} or null).

    \b
    Exit status: 0 the fetches agree, 1 they differ, both graphs fail (nothing compared) or a
    graph is invalid, 2 bad usage.

    \b
    Examples:
      dfg compare model.pb model.opt.pb --fetch logits
      dfg compare a.pbtxt b.pbtxt --fetch probs --feed x=@batch.npy --bisect --json | jq .bisect
    """
    from dfg.executor.compare import compare_graphs

    from .progress import progress

    feed_dict = parse_feeds(feeds)
    ga, gb = load(graph_a), load(graph_b)
    check_feeds(ga, feed_dict)
    check_feeds(gb, feed_dict)
    with progress("bisect", None, enabled=do_bisect and not as_json) as advance:
        seen = [0]

        def step(done: int, total: int) -> None:
            advance(done - seen[0])
            seen[0] = done

        res = compare_graphs(ga, gb, names(fetches), feed_dict, names(targets), rtol, atol,
                             threads, threads, programs="never" if no_optimize else "auto",
                             seed=seed, bisect=do_bisect, batch=batch, progress=step,
                             files=file_policy(grants, (graph_a, graph_b)),
                             max_bytes=max_memory, timeout=time_left)
    # both failing alike agrees, but no value was compared: not a pass
    nothing = res.ok and res.error_a is not None and res.error_b is not None
    if as_json:
        d = _ordered(res.to_dict())
        emit_json({"a": graph_a, "b": graph_b, "ok": d.pop("ok"), "nothing_compared": nothing,
                   **d, "rtol": rtol, "atol": atol})
    else:
        _print(res, nothing)
    if not res.ok or nothing:
        raise click.exceptions.Exit(1)


def _ordered(d: dict) -> dict:
    return {k: d[k] for k in ("ok", "message", "fed", "fetches", "error_a", "error_b",
                              "bisect")}


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.3g}"


def _print(res, nothing: bool = False) -> None:
    from rich.table import Table

    con = console()
    if res.fetches:
        table = Table()
        for col, just in (("fetch", "left"), ("dtype", "left"), ("shape", "left"),
                          ("max abs", "right"), ("max rel", "right"), ("agrees", "left")):
            table.add_column(col, justify=just)
        for f in res.fetches:
            table.add_row(f.name, f.dtype or "", str(f.shape), _num(f.max_abs),
                          _num(f.max_rel), "yes" if f.ok else f"NO: {f.problem}")
        con.print(table)
    verdict = "NOTHING COMPARED" if nothing else "equal" if res.ok else "DIFFERENT"
    con.print(f"{verdict}: {res.message}")
    b = res.bisect
    if b is None:
        return
    if b.first is not None:
        con.print(f"first differing node: {b.first} ({b.op}): {b.diff.name}: {b.diff.problem}")
    else:
        con.print("bisect: no shared node differs")
    extra = f"; {b.skipped_in_loops} node(s) inside while loops skipped" \
        if b.skipped_in_loops else ""
    failing = f"; {len(b.skipped_failing)} failing in both skipped" if b.skipped_failing else ""
    con.print(f"bisect: compared {b.checked} of {b.candidates} shared node(s) in {b.runs} "
              f"run(s){extra}{failing}")
