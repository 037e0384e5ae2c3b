"""``dfg profile``: where a step's time goes, per op type and per node."""

from __future__ import annotations

import click

from .feeds import feed_option, parse_feeds
from .options import (
    FileGrants,
    checkpoint_option,
    console,
    data_output,
    emit_json,
    fetch_option,
    file_options,
    file_policy,
    graph_argument,
    init_option,
    json_option,
    limited,
    load,
    max_memory_option,
    names,
    optimize_option,
    restore_checkpoint,
    session_optimize,
    target_option,
    time_left,
    timeout_option,
)
from .progress import progress, trace_option

SORTS = ("total", "mean", "count", "name")


@click.command()
@graph_argument
@fetch_option(required=True)
@feed_option()
@target_option()
@init_option("Node to run once before profiling (repeatable).")
@checkpoint_option()
@click.option("--warmup", type=click.IntRange(min=0), default=2, show_default=True,
              help="Untraced steps first (plans are built and costs measured here).")
@click.option("--iters", type=click.IntRange(min=1), default=10, show_default=True,
              help="Traced steps.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Executor threads (default: one per core; 1 makes totals add up to the "
                   "wall time).")
@click.option("--sort", "sort", type=click.Choice(SORTS), default="total", show_default=True,
              help="Order of both tables.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many nodes to list.")
@trace_option
@json_option
@data_output
@optimize_option
@timeout_option
@max_memory_option
@file_options
@limited
def profile(graph: str, fetches: tuple[str, ...], feeds: tuple[str, ...],
            targets: tuple[str, ...], inits: tuple[str, ...], warmup: int, iters: int,
            threads: int | None, sort: str, top: int, trace_path: str | None,
            as_json: bool, no_optimize: bool = False, timeout: float | None = None,
        max_memory: int | None = None, checkpoint: str | None = None,
        grants: FileGrants | None = None) -> None:
    """Run GRAPH's step --iters times with tracing and show where the time goes.

    Like TensorFlow's benchmark_model --show_summary: a table per op type (kernel runs,
    total ms, mean µs per run, share of all kernel time, peak bytes of one node's outputs)
    and the top nodes. Only kernels are timed: Identity, Switch, Merge, Enter, Exit,
    NextIteration and Const are resolved by the scheduler (their cost is the difference
    between the wall time and the kernel total, printed as "kernels ... of the wall time").
    The tracer's own recording (work an untraced step does not do) is measured and left out
    of that share, and shown. With several threads kernels overlap, so their total may
    exceed the wall time.

    \b
    JSON keys (stable): graph, fetches, threads, steps, wall_s, tracing_s (the tracer's own
    share of wall_s), kernel_s, ops [{op, count,
    total_s, mean_us, share, peak_bytes}], nodes [{node, op, count, total_s, mean_us,
    share, peak_bytes}] (the top --top nodes).

    \b
    Examples:
      dfg profile tests/data/conformance/bench_cnn/graph.pbtxt --fetch probs \\
          --feed images=@tests/data/conformance/bench_cnn/s0_feed_0.npy --threads 1
      dfg profile model.pb --fetch logits --sort mean --top 20 --json | jq '.ops[0]'
    """
    import time

    from dfg.executor import Session
    from dfg.executor.trace import Tracer, op_stats

    feed_dict = parse_feeds(feeds)
    g = load(graph)
    fetch_list, target_list = names(fetches), names(targets)
    tracer = Tracer()
    wall = 0.0
    with Session(g, threads=threads, optimize=session_optimize(no_optimize, repeated=True),
                 max_bytes=max_memory, files=file_policy(grants, graph, checkpoint)) as sess:
        restore_checkpoint(sess, graph, checkpoint)
        if inits:
            sess.run([], feed_dict, targets=list(inits), timeout=time_left())
        for _ in range(warmup):
            sess.run(fetch_list, feed_dict, target_list, timeout=time_left())
        with progress("steps", iters, enabled=not as_json) as advance:
            for _ in range(iters):
                t0 = time.perf_counter()
                sess.run(fetch_list, feed_dict, target_list, trace=tracer,
                         timeout=time_left())
                wall += time.perf_counter() - t0
                advance()
        used = sess.threads
    if trace_path is not None:
        tracer.write(trace_path)
    nodes = tracer.node_stats()
    ops = op_stats(nodes)
    kernel_s = sum(s.total_s for s in nodes.values())
    tracing_s = min(sum(tracer.own_seconds), wall)

    def row(s, key: str) -> dict:
        return {key: s.name, **({"op": s.op} if key == "node" else {}), "count": s.count,
                "total_s": s.total_s, "mean_us": s.mean_s * 1e6,
                "share": s.total_s / kernel_s if kernel_s else 0.0, "peak_bytes": s.peak_bytes}

    op_rows = [row(s, "op") for s in _sorted(ops.values(), sort)]
    node_rows = [row(s, "node") for s in _sorted(nodes.values(), sort)[:top]]
    if as_json:
        emit_json({"graph": graph, "fetches": fetch_list, "threads": used, "steps": iters,
                   "wall_s": wall, "tracing_s": tracing_s, "kernel_s": kernel_s,
                   "ops": op_rows, "nodes": node_rows})
        return
    _print(graph, used, iters, wall, tracing_s, kernel_s, op_rows, node_rows)


def _sorted(stats, sort: str) -> list:
    if sort == "name":
        return sorted(stats, key=lambda s: s.name)
    key = {"total": lambda s: s.total_s, "mean": lambda s: s.mean_s,
           "count": lambda s: s.count}[sort]
    return sorted(stats, key=lambda s: (-key(s), s.name))


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _print(graph: str, threads: int, steps: int, wall: float, tracing: float,
           kernel_s: float, op_rows: list[dict], node_rows: list[dict]) -> None:
    from rich.table import Table

    con = console()
    untraced = wall - tracing
    con.print(f"{graph}: {steps} step(s) on {threads} thread(s): wall {wall * 1e3:.3f} ms "
              f"({wall / steps * 1e3:.3f} ms/step, {tracing * 1e3:.3f} ms of it tracing); "
              f"kernels {kernel_s * 1e3:.3f} ms "
              f"({kernel_s / untraced * 100 if untraced > 0 else 0:.1f}% of the wall time "
              "without tracing)")
    for title, rows, key in (("per op type", op_rows, "op"), ("top nodes", node_rows, "node")):
        table = Table(title=title, title_justify="left")
        cols = [key] + (["op"] if key == "node" else []) + ["count", "total ms", "mean µs",
                                                            "share %", "peak bytes"]
        for c in cols:
            table.add_column(c, justify="left" if c in ("op", "node") else "right")
        for r in rows:
            cells = [r[key]] + ([r["op"]] if key == "node" else [])
            cells += [str(r["count"]), f"{r['total_s'] * 1e3:.3f}", f"{r['mean_us']:.1f}",
                      f"{r['share'] * 100:.1f}", _bytes(r["peak_bytes"])]
            table.add_row(*cells)
        con.print(table)
