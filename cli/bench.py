"""``dfg bench``: time a step, like TensorFlow's benchmark_model."""

from __future__ import annotations

import click

from .feeds import check_feeds, feed_option, parse_feeds
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
    optimize_option,
    restore_checkpoint,
    session_optimize,
    target_option,
    time_left,
    timeout_option,
)
from .progress import new_tracer, progress, trace_option


@click.command()
@graph_argument
@fetch_option(required=True)
@feed_option()
@target_option()
@init_option("Node to run once before timing (repeatable).")
@checkpoint_option()
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True,
              help="Untimed steps first (plans are built and costs measured here).")
@click.option("--iters", type=click.IntRange(min=1), default=None,
              help="Timed steps (default: as many as fit in --seconds).")
@click.option("--seconds", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="Time budget when --iters is not given.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Executor threads (default: one per core).")
@json_option
@trace_option
@data_output
@optimize_option
@timeout_option
@max_memory_option
@file_options
@limited
def bench(graph: str, fetches: tuple[str, ...], feeds: tuple[str, ...], targets: tuple[str, ...],
          inits: tuple[str, ...], warmup: int, iters: int | None, seconds: float,
          threads: int | None, as_json: bool, trace_path: str | None,
          no_optimize: bool = False, timeout: float | None = None,
        max_memory: int | None = None, checkpoint: str | None = None,
        grants: FileGrants | None = None) -> None:
    """Run GRAPH's step repeatedly in one process and print seconds per step.

    \b
    JSON keys (stable): graph, fetches, threads, iters, min_s, median_s, mean_s, max_s,
    native (whether dfg's compiled kernels ran: built, and not turned off with DFG_NATIVE=0).

    --trace FILE records the timed steps (tracing slows them: time without it).

    \b
    Example:
      dfg bench examples/while_counter.pbtxt --fetch counter/Exit --feed n=1000 --iters 50
      dfg bench model.pb --fetch logits,probs --feed x=@x.npy -o timing.json
    """
    import statistics
    import time

    from dfg.executor import Session
    from dfg.executor.kernels import _native

    feed_dict = parse_feeds(feeds)
    g = load(graph)
    check_feeds(g, feed_dict)
    tracer = new_tracer(trace_path)
    with Session(g, threads=threads, optimize=session_optimize(no_optimize, repeated=True),
                 max_bytes=max_memory, files=file_policy(grants, graph, checkpoint)) as sess:
        restore_checkpoint(sess, graph, checkpoint)
        if inits:
            sess.run([], feed_dict, targets=list(inits), timeout=time_left())
        step = (list(fetches), feed_dict, list(targets))
        for _ in range(warmup):
            sess.run(*step, timeout=time_left())
        times: list[float] = []
        t_end = time.perf_counter() + seconds
        with progress("steps", iters, enabled=not as_json) as advance:
            while (len(times) < iters) if iters else (time.perf_counter() < t_end or not times):
                t0 = time.perf_counter()
                sess.run(*step, trace=tracer, timeout=time_left())
                times.append(time.perf_counter() - t0)
                advance()
        used = sess.threads
    if tracer is not None:
        tracer.write(trace_path)
    res = {"graph": graph, "fetches": list(fetches), "threads": used, "iters": len(times),
           "min_s": min(times), "median_s": statistics.median(times),
           "mean_s": statistics.fmean(times), "max_s": max(times),
           "native": _native.enabled()}
    if as_json:
        emit_json(res)
        return
    console().print(
        f"{graph}: {res['iters']} steps on {used} thread(s): "
        f"min {_ms(res['min_s'])}  median {_ms(res['median_s'])}  "
        f"mean {_ms(res['mean_s'])}  max {_ms(res['max_s'])}  "
        f"(compiled kernels: {_native.status()})")


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"
