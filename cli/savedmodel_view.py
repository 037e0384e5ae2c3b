"""How ``dfg info`` shows a SavedModel directory (the data comes from
:func:`dfg.graphdef.savedmodel.describe`)."""

from __future__ import annotations

from typing import Any

from .options import console, emit_json


def show_saved_model(path: str, as_json: bool, tags: Any = None) -> None:
    """Print ``describe(path)`` as JSON or as tables."""
    from dfg.graphdef.savedmodel import describe

    d = describe(path, tags)
    if as_json:
        emit_json(d)
        return
    render(d)


def _shape(shape: list | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if s is None else str(s) for s in shape) + "]"


def render(d: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    tf = f", written by TensorFlow {d['tensorflow_version']}" if d["tensorflow_version"] else ""
    con.print(f"{d['path']}: SavedModel, tags {','.join(d['tags']) or '<none>'}"
              f" (tag sets: {'; '.join(','.join(t) for t in d['tag_sets'])}){tf}")
    sigs = Table(title="Signatures", title_justify="left")
    for col in ("signature", "kind", "key", "tensor", "dtype", "shape"):
        sigs.add_column(col)
    for key, s in d["signatures"].items():
        first = True
        for kind in ("inputs", "outputs"):
            for k, spec in s[kind].items():
                sigs.add_row(key if first else "", kind[:-1], k, spec["name"], spec["dtype"],
                             _shape(spec["shape"]))
                first = False
    con.print(sigs)
    v = d["variables"]
    con.print(f"Variables: {v['count']}, {v['bytes']:,} bytes"
              + (f" (checkpoint: {d['checkpoint']['keys']} keys in "
                 f"{d['checkpoint']['shards']} shard(s))" if d["checkpoint"] else ""))
    g = d["graph"]
    con.print(f"Graph: {g['nodes']} nodes, {g['functions']} functions with "
              f"{g['function_nodes']} nodes, {len(g['op_types'])} op types")
    if d["saver"]:
        con.print(f"Restore: run {d['saver']['restore_op']} fed "
                  f"{d['saver']['filename_tensor']} the variables prefix")
    if d["assets"]:
        con.print("Assets: " + ", ".join(d["assets"]))
    if d.get("functions"):
        fns = Table(title="Functions (dfg run DIR --function PATH)", title_justify="left")
        for col in ("path", "kind", "name", "dtype", "shape"):
            fns.add_column(col)
        for f in d["functions"]:
            first = True
            for kind, key in (("inputs", "name"), ("outputs", "key")):
                for spec in f[kind]:
                    fns.add_row(f["path"] if first else "", kind[:-1], spec[key],
                                spec["dtype"], _shape(spec["shape"]))
                    first = False
            if first:
                fns.add_row(f["path"], "", "", "", "")
        con.print(fns)


def run_graph(path: str, fetches: tuple[str, ...], feeds: dict[str, Any],
              targets: tuple[str, ...], threads: int | None, steps: int = 1,
              files: Any = None, max_bytes: int | None = None) -> tuple[list[str], list[Any]]:
    """``dfg run DIR --graph``: the SavedModel's graph below its signatures, variables
    restored and the init op run as for a signature; fetch, feed and target any tensor or
    node (a TF1 signature reading a tf.data iterator runs fed the iterator's outputs)."""
    from dfg.executor.savedmodel import load
    from dfg.graphdef.errors import UsageError

    from .feeds import check_feeds
    from .options import names, time_left

    fetch_list, target_list = names(fetches), names(targets)
    if not fetch_list and not target_list:
        raise UsageError("--graph needs --fetch (a tensor of the SavedModel's graph) or "
                         "--target")
    with load(path, threads=threads, files=files, max_bytes=max_bytes) as model:
        check_feeds(model.session.graph, feeds)
        values: list[Any] = []
        for _ in range(steps):
            values = model.session.run(fetch_list, feed_dict=feeds, targets=target_list,
                                       timeout=time_left())
    return fetch_list, values


def run_signature(path: str, signature: str | None, fetches: tuple[str, ...],
                  feeds: dict[str, Any], threads: int | None, timeout: float | None,
                  steps: int = 1, function: str | None = None, files: Any = None,
                  max_bytes: int | None = None) -> tuple[list[str], list[Any]]:
    """``dfg run DIR --signature S``: restore the variables, feed by input key, fetch by output
    key (default: every output). Returns the output keys and their values. ``function``: an
    object-graph concrete function's path instead (``dfg run DIR --function PATH``), fed by
    its input names. ``timeout`` None: each step gets what is left of the command's --timeout
    (options.time_left); ``files``: the Session's FilePolicy."""
    from dfg.executor.savedmodel import load, load_function
    from dfg.graphdef.errors import InvalidArgumentError

    from .options import names, time_left

    kw = {"threads": threads, "files": files, "max_bytes": max_bytes}
    with (load_function(path, function, **kw) if function is not None
          else load(path, **kw)) as model:
        sig = model.signature(signature)
        from dfg.graphdef import dtypes as D

        from .feeds import batch_of_one, check_literal, string_literal

        for k in list(feeds):
            if k in sig.inputs:
                if D.base(sig.inputs[k].dtype) == D.DT_STRING:
                    string_literal(feeds, k)
                check_literal(k, feeds[k], sig.inputs[k].dtype)
                shape = sig.inputs[k].shape
                batch_of_one(feeds, k, None if shape is None else len(shape))
        keys = names(fetches) or list(sig.outputs)
        unknown = [k for k in feeds if k not in sig.inputs]
        if unknown:   # a misspelt key first: "needs x" would hide that "nope" was wrong
            raise InvalidArgumentError(
                f"signature '{sig.key}' has no input {', '.join(repr(k) for k in unknown)} "
                f"(inputs: {', '.join(sig.inputs) or 'none'})")
        missing = [k for k in sig.inputs if k not in feeds]
        if missing:
            hints = " ".join(f"--feed {k}=... ({_spec(sig.inputs[k])})"
                             for k in missing)
            raise InvalidArgumentError(f"signature '{sig.key}' needs: {hints}")
        values = None
        for _ in range(steps):
            out = model.run(sig.key, feeds, keys,
                            timeout=timeout if timeout is not None else time_left())
            values = [out[k] for k in keys]
    return keys, values


def _spec(spec: Any) -> str:
    from dfg.graphdef.savedmodel import format_spec

    return format_spec(spec)
