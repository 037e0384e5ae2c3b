"""``dfg run``: run a graph's fetches and print them."""

from __future__ import annotations

import io
import json
import math

import click

from .feeds import feed_option, parse_feeds
from .options import console, fetch_option, graph_argument, init_option, load, target_option
from .progress import new_tracer, trace_option

OUTPUTS = ("table", "json", "npz")


@click.command()
@graph_argument
@fetch_option(help="Tensor to fetch (repeatable); with --signature, an output key.")
@feed_option()
@click.option("--signature", default=None, metavar="KEY",
              help="GRAPH is a SavedModel dir: run this signature (default serving_default); "
                   "--feed/--fetch name its input/output keys.")
@target_option("Node to run for its effect (repeatable).")
@init_option()
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the step K times (state carries over); print the last.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Executor threads (default: one per core).")
@click.option("--output", "fmt", type=click.Choice(OUTPUTS), default=None,
              help="table (default on a terminal), json (default otherwise), or npz.")
@click.option("-o", "out", default="-", metavar="OUT", show_default=True,
              help="Write the output here ('-' is standard output).")
@click.option("--timeout", type=float, default=None, help="Seconds before a step is aborted.")
@trace_option
def run(graph: str, fetches: tuple[str, ...], feeds: tuple[str, ...], targets: tuple[str, ...],
        inits: tuple[str, ...], steps: int, threads: int | None, fmt: str | None, out: str,
        timeout: float | None, trace_path: str | None, signature: str | None = None) -> None:
    """Run GRAPH and print the fetched tensors.

    \b
    JSON (stable): {"fetches": [{"name", "dtype", "shape", "value"}], "steps": K}; non-finite
    floats are the strings "nan", "inf", "-inf"; strings are decoded as UTF-8; complex
    numbers are [real, imag] pairs. npz: one array per fetch, keyed by tensor name.

    \b
    Examples:
      dfg run examples/while_counter.pbtxt --fetch counter/Exit --feed n=5
      dfg run model.pb --fetch logits --feed images=@batch.npy --output json | jq .
      dfg run train.pbtxt --init init --target train_op --steps 100 --fetch loss
      dfg run saved_model_dir --signature serving_default --feed x=@x.npy
      dfg run examples/while_nested.pbtxt --fetch outer/Exit --feed n=4 --feed scale=0.5 \
          --trace trace.json     # open in https://ui.perfetto.dev
    """
    from dfg.executor import Session
    from dfg.graphdef.errors import MissingFeedError

    from .progress import progress

    feed_dict = parse_feeds(feeds)
    from dfg.graphdef.savedmodel import is_saved_model

    if signature is not None or is_saved_model(graph):
        from .options import stdout_is_tty
        from .savedmodel_view import run_signature

        keys, values = run_signature(graph, signature, fetches, feed_dict, threads, timeout,
                                     steps)
        fmt = fmt or ("table" if out == "-" and stdout_is_tty() else "json")
        _emit(fmt, keys, values, steps, out)
        return
    if not fetches:
        raise click.UsageError("Missing option '--fetch'.")
    g = load(graph)
    tracer = new_tracer(trace_path)
    with Session(g, threads=threads) as sess:
        try:
            if inits:
                sess.run([], targets=list(inits), timeout=timeout)
            values = None
            with progress("steps", steps, enabled=steps > 1 and fmt != "json") as advance:
                for _ in range(steps):
                    values = sess.run(list(fetches), feed_dict=feed_dict,
                                      targets=list(targets), timeout=timeout, trace=tracer)
                    advance()
        except MissingFeedError as e:
            e.args = (f"{e}: --feed {e.placeholder}=...",)
            raise
    from .options import stdout_is_tty

    if tracer is not None:
        tracer.write(trace_path)
    fmt = fmt or ("table" if out == "-" and stdout_is_tty() else "json")
    _emit(fmt, list(fetches), values, steps, out)


def _emit(fmt: str, names: list[str], values: list, steps: int, out: str) -> None:
    from dfg.graphdef.io import write_bytes_atomic

    if fmt == "npz":
        import numpy as np

        buf = io.BytesIO()
        np.savez(buf, **{n: v for n, v in zip(names, values)})
        write_bytes_atomic(out, buf.getvalue())
        return
    if fmt == "json":
        doc = {"fetches": [describe(n, v) for n, v in zip(names, values)], "steps": steps}
        write_bytes_atomic(out, (json.dumps(doc, indent=2) + "\n").encode())
        return
    from rich.table import Table

    table = Table()
    for col in ("fetch", "dtype", "shape", "value"):
        table.add_column(col)
    for n, v in zip(names, values):
        d = describe(n, v)
        table.add_row(n, d["dtype"], str(d["shape"]), summarize(v))
    if out == "-":
        console().print(table)
    else:
        from rich.console import Console

        buf = io.StringIO()
        Console(file=buf, width=120, no_color=True).print(table)
        write_bytes_atomic(out, buf.getvalue().encode())


def describe(name: str, v) -> dict:
    import numpy as np

    from dfg.graphdef import dtypes as D

    if hasattr(v, "__dfg_resource__"):  # a variant or resource value (a TensorList ...)
        return {"name": name, "dtype": "variant", "shape": [], "value": repr(v)}
    arr = np.asarray(v)
    return {"name": name, "dtype": D.name(D.from_numpy(arr.dtype)), "shape": list(arr.shape),
            "value": _jsonable(arr)}


def _jsonable(arr):
    if arr.dtype.kind == "O":
        return _map(arr.tolist(), lambda s: s.decode("utf-8", "replace")
                    if isinstance(s, bytes) else s)
    if arr.dtype.kind == "c":
        return _map(arr.tolist(), lambda c: [_num(c.real), _num(c.imag)])
    if arr.dtype.kind == "f":
        return _map(arr.tolist(), _num)
    return arr.tolist()


def _num(x: float):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _map(x, fn):
    if isinstance(x, list):
        return [_map(i, fn) for i in x]
    return fn(x)


def summarize(v) -> str:
    import numpy as np

    if hasattr(v, "__dfg_resource__"):
        return repr(v)
    arr = np.asarray(v)
    return np.array2string(arr, threshold=20, edgeitems=3, precision=6, max_line_width=70)
