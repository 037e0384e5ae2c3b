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


def run_signature(path: str, signature: str | None, fetches: tuple[str, ...],
                  feeds: dict[str, Any], threads: int | None, timeout: float | None,
                  steps: int = 1, files: Any = None, max_bytes: int | None = None
                  ) -> tuple[list[str], list[Any]]:
    """``dfg run DIR --signature S``: restore the variables, feed by input key, fetch by output
    key (default: every output). Returns the output keys and their values. ``timeout`` None:
    each step gets what is left of the command's --timeout (options.time_left); ``files``:
    the Session's FilePolicy."""
    from dfg.executor.savedmodel import load
    from dfg.graphdef.errors import InvalidArgumentError

    from .options import names, time_left

    with load(path, threads=threads, files=files, max_bytes=max_bytes) as model:
        sig = model.signature(signature)
        from .feeds import batch_of_one, check_literal

        for k, v in list(feeds.items()):
            if k in sig.inputs:
                check_literal(k, v, sig.inputs[k].dtype)
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
