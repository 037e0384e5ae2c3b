"""``dfg run``: run a graph's fetches and print them."""

from __future__ import annotations

import io
import json
import math

import click

from dfg.graphdef.errors import UsageError
from dfg.graphdef.text import printable

from .feeds import check_feeds, feed_option, parse_feeds
from .options import (
    checkpoint_option,
    command_limits,
    console,
    fetch_option,
    file_options,
    file_policy,
    graph_argument,
    init_option,
    json_option,
    load,
    max_memory_option,
    optimize_option,
    refuse_binary_tty,
    resolve_format,
    restore_checkpoint,
    session_optimize,
    stdout_is_tty,
    stdout_to,
    target_option,
    time_left,
    timeout_option,
)
from .progress import new_tracer, trace_option

FORMATS = ("table", "json", "npz", "npy")
# -o FILE's extension -> format; .txt is the table as plain text
EXTENSIONS = {".json": "json", ".npz": "npz", ".npy": "npy", ".txt": "table"}
# the old meaning of --output (a format word), kept working as a hidden alias of --format
OLD_OUTPUT_WORDS = ("table", "json", "npz")


@click.command()
@graph_argument
@fetch_option(help="Tensor to fetch (repeatable, or comma-separated); with --signature, an "
                   "output key.")
@feed_option()
@click.option("--signature", default=None, metavar="KEY",
              help="GRAPH is a SavedModel dir: run this signature (default serving_default); "
                   "--feed/--fetch name its input/output keys.")
@click.option("--function", "function", default=None, metavar="PATH",
              help="GRAPH is a SavedModel dir: call this concrete function of its object "
                   "graph (__call__, sub.shift; PATH#K: its K-th trace), for models saved "
                   "without signatures; --feed/--fetch name its inputs and output keys "
                   "(dfg info DIR lists them).")
@click.option("--graph", "below", is_flag=True,
              help="GRAPH is a SavedModel dir: run its graph below the signatures, variables "
                   "restored and its init op run; --feed/--fetch/--target name any tensor or "
                   "node.")
@target_option("Node to run for its effect (repeatable, or comma-separated).")
@init_option()
@checkpoint_option()
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the step K times (state carries over); print the last.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Executor threads (default: one per core).")
@click.option("-o", "--output", "outputs", multiple=True, metavar="FILE",
              help="Write the fetched values here: .npz (one array per fetch), .npy (one "
                   "fetch), .json, .txt (the table); '-' (default) is standard output.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="table, json, npz or npy (default: from FILE's extension; on standard "
                   "output a table on a terminal, else JSON).")
@json_option
@timeout_option
@trace_option
@optimize_option
@max_memory_option
@click.option("--cluster", type=click.Choice(["ray"]), default=None,
              help="Run GRAPH partitioned by task (its devices), one Ray actor per task "
                   "(see `dfg partition`).")
@click.option("--address", default=None, metavar="ADDR",
              help="With --cluster: the Ray cluster to join (default: a local Ray that "
                   "starts and stops with the command).")
@file_options
def run(graph: str, fetches: tuple[str, ...], feeds: tuple[str, ...], targets: tuple[str, ...],
        inits: tuple[str, ...], steps: int, threads: int | None, outputs: tuple[str, ...],
        fmt: str | None, as_json: bool, timeout: float | None, trace_path: str | None,
        signature: str | None = None, no_optimize: bool = False,
        max_memory: int | None = None, checkpoint: str | None = None,
        cluster: str | None = None, address: str | None = None,
        function: str | None = None, below: bool = False, grants=None) -> None:
    """Run GRAPH and print the fetched tensors.

    \b
    JSON (stable; --json, --format json, a .json FILE, or the default when standard output
    is not a terminal):
      {"fetches": [{"name": str, "dtype": str, "shape": [int], "value": nested lists}],
       "steps": K}
    in fetch order; non-finite floats are the strings "nan", "inf", "-inf"; strings are
    decoded as UTF-8; complex numbers are [real, imag] pairs; variants are their repr.
    npz: one array per fetch, keyed by tensor name; npy: the one fetch's array. Binary
    formats are never written to a terminal (exit 2).

    \b
    Examples:
      dfg run examples/while_counter.pbtxt --fetch counter/Exit --feed n=5
      dfg run model.pb --fetch logits,probs --feed images=@batch.npy --json | jq .
      dfg run model.pb --fetch logits --feed images=@batch.npy -o logits.npy
      dfg run train.pbtxt --init init --target train_op --steps 100 --fetch loss
      dfg run model.ckpt.meta --fetch probs --feed x=@x.npy   # variables from model.ckpt
      dfg run saved_model_dir --signature serving_default --feed x=@x.npy
      dfg run module_dir --function model.__call__ --feed x=@x.npy   # no signatures
      dfg run tf1_dir --graph --feed IteratorGetNext=@x.npy --fetch y  # below signatures
      dfg run examples/while_nested.pbtxt --fetch outer/Exit --feed n=4,scale=0.5 \\
          --trace trace.json     # open in https://ui.perfetto.dev
      dfg run ps_mlp.pbtxt --cluster ray --init init --target train --steps 6 \\
          --fetch loss --feed x=@x.npy,y=@y.npy   # one Ray actor per task
      dfg run untrusted.pb --fetch y --timeout 10 --max-memory 1G   # bounded

    \b
    A model you did not write may loop forever or allocate without end: --timeout SECONDS
    bounds the whole command, --max-memory SIZE every allocation and every file it loads.
    Files: its ops that touch files (SaveV2, RestoreV2, MergeV2Checkpoints, tables from
    text files) may read only the model's own files (the SavedModel directory, the
    checkpoint given or beside a .meta) and what --allow-read PATH grants, and write only
    under --allow-write PATH (repeatable; symlinks and '..' resolved first); --allow-files
    allows everything, as TensorFlow does. A refusal is one line naming the op, the node,
    the path and the flag (exit 1).

    \b
    --cluster ray: each task's partition (`dfg partition`) runs in its own Ray actor,
    values crossing tasks carried by Ray; the same values as without it. Variables live on
    their task across --steps. A task that dies fails the run (exit 1) naming the task.
    Without --address a local Ray starts and stops with the command. Not with --signature,
    --checkpoint or --trace.
    """
    with command_limits(timeout, max_memory):
        _run(graph, fetches, feeds, targets, inits, steps, threads, outputs, fmt, as_json,
             trace_path, signature, no_optimize, max_memory, checkpoint,
             file_policy(grants, graph, checkpoint), cluster, address, function, below)


def _run(graph, fetches, feeds, targets, inits, steps, threads, outputs, fmt, as_json,
         trace_path, signature, no_optimize, max_memory, checkpoint, files, cluster, address,
         function, below) -> None:
    from dfg.executor import Session
    from dfg.graphdef.errors import FailedPreconditionError, MissingFeedError

    from .progress import progress

    out, fmt = _output(outputs, fmt, as_json)
    if fmt == "npy" and len(fetches) > 1:
        raise UsageError(f"npy holds one array but {len(fetches)} tensors are fetched: use "
                         ".npz (one array per fetch)")
    feed_dict = parse_feeds(feeds)
    from dfg.graphdef.savedmodel import is_saved_model

    if cluster is not None:
        from dfg.executor.checkpoint import default_prefix

        bad = [f for f, v in (("--signature", signature), ("--trace", trace_path),
                              ("a checkpoint", checkpoint or default_prefix(graph)))
               if v is not None]
        if bad or is_saved_model(graph):
            raise UsageError(f"--cluster does not go with {', '.join(bad) or 'a SavedModel'}")
    elif address is not None:
        raise UsageError("--address needs --cluster ray")
    saved = is_saved_model(graph)
    if (below or function is not None) and not saved:
        raise UsageError(f"--{'graph' if below else 'function'} runs a SavedModel directory; "
                         f"{graph} is not one")
    if below and (function is not None or signature is not None):
        raise UsageError("--graph runs below the signatures: not with --signature or "
                         "--function")
    if below:
        from .savedmodel_view import run_graph

        keys, values = run_graph(graph, fetches, feed_dict, targets, threads, steps,
                                 files=files, max_bytes=max_memory)
        _emit(fmt, keys, values, steps, out)
        return
    if signature is not None or function is not None or saved:
        if signature is not None and function is not None:
            raise UsageError("--signature and --function both name what to run: give one")
        from .savedmodel_view import run_signature

        keys, values = run_signature(graph, signature, fetches, feed_dict, threads, None,
                                     steps, function=function, files=files,
                                     max_bytes=max_memory)
        _emit(fmt, keys, values, steps, out)
        return
    if not fetches:
        raise click.UsageError("Missing option '--fetch'.")
    g = load(graph)
    check_feeds(g, feed_dict)
    tracer = new_tracer(trace_path)
    more = {} if cluster is None else {"cluster": cluster, "address": address}
    with Session(g, threads=threads, optimize=session_optimize(no_optimize),
                 max_bytes=max_memory, files=files, **more) as sess:
        try:
            restore_checkpoint(sess, graph, checkpoint)
            if inits:
                sess.run([], feed_dict, targets=list(inits), timeout=time_left())
            values = None
            with progress("steps", steps, enabled=steps > 1 and fmt != "json") as advance:
                for _ in range(steps):
                    values = sess.run(list(fetches), feed_dict=feed_dict,
                                      targets=list(targets), timeout=time_left(),
                                      **({} if tracer is None else {"trace": tracer}))
                    advance()
        except MissingFeedError as e:
            e.args = (f"{e}: --feed {e.placeholder}=...",)
            raise
        except FailedPreconditionError as e:
            found = table_initializers(g) if "Table not initialized" in str(e) else []
            if found and not inits:
                e.args = (f"{e}; the graph's table initializer runs first with --init "
                          f"{found[0]}",)
            raise
    if tracer is not None:
        tracer.write(trace_path)
    _emit(fmt, list(fetches), values, steps, out)


# Ops that fill a lookup table: a node running only these (by control edges) initializes the
# graph's tables, whatever exporters named it.
_TABLE_INIT_OPS = {"InitializeTable", "InitializeTableV2", "InitializeTableFromTextFile",
                   "InitializeTableFromTextFileV2", "LookupTableImportV2",
                   "InitializeTableFromDataset"}


def table_initializers(g) -> list[str]:
    """Nodes that initialize a frozen graph's tables, best first: ``init_all_tables`` as TF1's
    exporters name it (with the trailing underscores some add to keep it unique, e.g.
    ``init_all_tables_``), ``legacy_init_op``/``*tables_initializer``, then any NoOp whose
    control inputs are all table initializers."""
    import re

    named = re.compile(r"^(init_all_tables|legacy_init_op|(.*/)?(init_)?tables_initializer)_*$")
    by_name = [n.name for n in g.nodes if n.op == "NoOp" and named.match(n.name)]
    grouped = [n.name for n in g.nodes if n.op == "NoOp" and n.control_inputs
               and n.name not in by_name
               and all(g.node(c).op in _TABLE_INIT_OPS for c in n.control_inputs
                       if c in g)]
    return sorted(by_name, key=lambda n: (not n.startswith("init_all_tables"), n)) + grouped


def _output(outputs: tuple[str, ...], fmt: str | None, as_json: bool) -> tuple[str, str]:
    """(FILE, format) from -o/--output, --format and --json; ``--output json`` (a format word)
    is the old spelling of --format json."""
    files = [o for o in outputs if o not in OLD_OUTPUT_WORDS]
    words = [o for o in outputs if o in OLD_OUTPUT_WORDS]
    if len(files) > 1:
        raise UsageError(f"-o/--output given {len(files)} times: {', '.join(files)}")
    chosen = {f for f in (fmt, "json" if as_json else None, *words) if f}
    if len(chosen) > 1:
        raise UsageError(f"contradicting formats: {', '.join(sorted(chosen))}")
    out = files[0] if files else "-"
    default = "table" if stdout_is_tty() else "json"
    fmt = resolve_format(out, chosen.pop() if chosen else None, EXTENSIONS, default)
    refuse_binary_tty(out, fmt)
    return out, fmt


def _emit(fmt: str, names: list[str], values: list, steps: int, out: str) -> None:
    from dfg.graphdef.io import write_bytes_atomic

    if fmt in ("npz", "npy"):
        import numpy as np

        buf = io.BytesIO()
        if fmt == "npy":
            if len(values) != 1:
                raise UsageError(f"npy holds one array but there are {len(values)} outputs "
                                 f"({', '.join(names)}): use .npz")
            np.save(buf, _array(names[0], values[0]), allow_pickle=False)
        else:
            np.savez(buf, **{n: _array(n, v) for n, v in zip(names, values)})
        write_bytes_atomic(out, buf.getvalue())
        return
    if fmt == "json":
        doc = {"fetches": [describe(n, v) for n, v in zip(names, values)], "steps": steps}
        write_bytes_atomic(out, (json.dumps(doc, indent=2) + "\n").encode())
        return
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for col in ("fetch", "dtype", "shape", "value"):
        table.add_column(col)
    for n, v in zip(names, values):
        d = describe(n, v)
        # the value is multi-line (numpy's layout): a Text, which the console's one-line
        # escaping of str cells leaves alone; numpy shows strings as b'...' reprs
        table.add_row(n, d["dtype"], str(d["shape"]), Text(summarize(v)))
    with stdout_to(out):
        console().print(table)


def _array(name: str, v):
    """A value as an array numpy saves without pickling (strings as bytes arrays)."""
    import numpy as np

    if hasattr(v, "__dfg_resource__"):
        raise UsageError(f"'{printable(name)}' is a variant/resource value, which .npz/.npy "
                         "cannot hold: use --json")
    arr = np.asarray(v)
    if arr.dtype.kind == "O":
        # string tensors are object arrays of bytes: as fixed-width bytes they load back
        # with allow_pickle=False
        arr = np.array([x if isinstance(x, bytes) else str(x).encode() for x in arr.ravel()],
                       dtype=bytes).reshape(arr.shape) if arr.size else arr.astype(bytes)
    return arr


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
