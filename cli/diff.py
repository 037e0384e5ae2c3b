"""``dfg diff``: what changed between two graphs, SavedModels or checkpoints, node by node."""

from __future__ import annotations

import os
from typing import Any

import click

from .options import emit_json, json_option, style

_PICTURES = {".svg": "svg", ".html": "html", ".htm": "html", ".dot": "dot", ".gv": "dot",
             ".png": "png", ".pdf": "pdf"}


class _Side:
    """One side of a diff: a GraphDef (a SavedModel's too) and/or a checkpoint."""

    def __init__(self, path: str) -> None:
        from dfg.graphdef.errors import DfgError, GraphLoadError

        self.path = path
        self.graph_def: Any = None
        self.bundle: Any = None
        self.saved_model: Any = None
        self.kind = "graph"
        try:
            self._open(path)
        except GraphLoadError:
            raise
        except DfgError as e:    # a missing checkpoint is unreadable input here: exit 2
            raise GraphLoadError(e.message, source=e.source or path) from None

    def _open(self, path: str) -> None:
        from dfg.graphdef.savedmodel import SavedModelDir, is_saved_model

        if path != "-" and is_saved_model(path):
            sm = self.saved_model = SavedModelDir(path)
            self.kind = "saved_model"
            self.graph_def = sm.graph_def
            self.bundle = sm.bundle()
            return
        if path != "-" and (path.endswith(".index") or os.path.isfile(path + ".index")
                            or os.path.isfile(os.path.join(path, "checkpoint"))):
            from dfg.executor.checkpoint import resolve_prefix
            from dfg.graphdef.bundle import BundleReader

            self.kind = "checkpoint"
            self.bundle = BundleReader(resolve_prefix(path))
            return
        from dfg.graphdef.io import load_graphdef

        self.graph_def = load_graphdef(path)


def _describe(rec: dict[str, Any]) -> str:
    what = rec.get("what", "")
    if what == "attr":
        what = f"attr {rec['attr']}"
    line = f"{what}: {rec.get('before')} -> {rec.get('after')}"
    if rec.get("max_abs_diff") is not None:
        line += f" (max |diff| {rec['max_abs_diff']:.6g})"
    return line


def _print_nodes(d: dict[str, Any], pad: str = "") -> None:
    from dfg.graphdef.text import printable

    for rec in d["removed"]:
        extra = rec.get("op") or rec.get("what")
        click.echo(style(f"{pad}- {printable(rec['name'])} ({extra})", fg="red"))
    for rec in d["added"]:
        extra = rec.get("op") or rec.get("what")
        click.echo(style(f"{pad}+ {printable(rec['name'])} ({extra})", fg="green"))
    for line in _renamed_lines(d["renamed"]):
        click.echo(style(f"{pad}> {line}", fg="blue"))
    for rec in d["changed"]:
        click.echo(style(f"{pad}~ {printable(rec['name'])}: ", fg="yellow")
                   + printable(_describe(rec)))


def _renamed_lines(renamed: list[dict[str, Any]]) -> list[str]:
    """Renames a scope rename explains, one line per scope ("scope dense_1 -> head: 7
    nodes"); the others one per node."""
    from dfg.graphdef.diff import _segment_renames
    from dfg.graphdef.text import printable

    pairs = {r["before"]: r["after"] for r in renamed if "before" in r}
    rules = _segment_renames(pairs)
    by_rule: dict[tuple[tuple[str, str], ...], int] = {}
    single = []
    for rec in renamed:
        parts = rec["before"].split("/")
        used = tuple(sorted({(p, rules[p]) for p in parts if p in rules}))
        if used and "/".join(rules.get(p, p) for p in parts) == rec["after"]:
            by_rule[used] = by_rule.get(used, 0) + 1
        else:
            single.append(f"{printable(rec['before'])} -> {printable(rec['after'])} "
                          f"({rec['op']})")
    lines = []
    for used, count in sorted(by_rule.items()):
        if count == 1 and len(renamed) < 20:
            continue
        what = ", ".join(f"{printable(a)} -> {printable(b)}" for a, b in used)
        lines.append(f"scope {what}: {count} node{'s' if count > 1 else ''}")
    for rec in renamed:   # the scope renames of one node, when the list is short
        parts = rec["before"].split("/")
        used = tuple(sorted({(p, rules[p]) for p in parts if p in rules}))
        if by_rule.get(used) == 1 and len(renamed) < 20 and "/".join(
                rules.get(p, p) for p in parts) == rec["after"]:
            single.append(f"{printable(rec['before'])} -> {printable(rec['after'])} "
                          f"({rec['op']})")
    return lines + sorted(single)


def _print_report(rep: dict[str, Any], a: str, b: str) -> None:
    from dfg.graphdef.text import printable

    click.echo(f"--- {printable(a)}\n+++ {printable(b)}")
    _print_nodes(rep)
    f = rep.get("functions") or {}
    for name in f.get("removed", []):
        click.echo(style(f"- function {printable(name)}", fg="red"))
    for name in f.get("added", []):
        click.echo(style(f"+ function {printable(name)}", fg="green"))
    for rec in f.get("renamed", []):
        click.echo(style(f"> function {printable(rec['before'])} -> "
                         f"{printable(rec['after'])}", fg="blue"))
    for rec in f.get("changed", []):
        click.echo(style(f"~ function {printable(rec['name'])}:", fg="yellow"))
        _print_nodes(rec, "    ")
    if "variables" in rep:
        v = rep["variables"]
        if any(v[k] for k in v):
            click.echo("variables:")
            _print_nodes(v, "    ")
    if rep["same"]:
        click.echo("no differences")


@click.command()
@click.argument("a", metavar="A", type=str)
@click.argument("b", metavar="B", type=str)
@json_option
@click.option("-o", "--output", "picture", default=None, metavar="FILE",
              help="Also draw B with the differences coloured: FILE.svg (Graphviz), "
                   "FILE.html (the interactive viewer), FILE.dot.")
def diff(a: str, b: str, as_json: bool, picture: str | None) -> None:
    """Show what changed from A to B, structurally: nodes added, removed, renamed, rewired,
    attributes and constants changed, functions changed; for checkpoints, variables.

    A and B are both graphs (.pb, .pbtxt, .json, .meta, '-' for one of them, or SavedModel
    directories, whose functions are diffed one by one and whose variables are diffed too),
    or both checkpoints (a prefix, its .index file, or a directory with a 'checkpoint' file).
    Nodes are matched by name; nodes whose names changed are matched by structure (same op,
    attributes, and inputs once renamed producers are mapped) and reported as renamed.
    Functions TensorFlow renamed (__inference_f_123 -> __inference_f_456) are matched too.
    Exit status: 0 the same, 1 different, 2 bad usage or unreadable input (as diff(1)).

    \b
    JSON keys (stable): kind ("graph" | "checkpoint"), same (bool),
      added [{name, op}], removed [{name, op}] (checkpoints: {name, what: dtype and shape}),
      renamed [{name, before, after, op}] (name is B's),
      changed [{name, what, before, after}]: what is "op", "inputs" (rewired: before and
        after are the input lists), "attr" (with "attr": its key; values as JSON),
        "value" (a constant or variable; before/after summarize it, plus max_abs_diff,
        null when the shapes differ), "type" (a variable's dtype or shape), "device";
      functions {added [name], removed [name], renamed [{name, before, after}],
        changed [{name, before (if renamed), added, removed, renamed, changed}]} (changed
        may hold what "signature inputs", "signature outputs", "results");
      variables {added, removed, renamed, changed} (SavedModels only, by checkpoint key).

    \b
    Examples:
      dfg diff old.pb new.pb
      dfg diff model_v1/ model_v2/ --json | jq '.changed[] | select(.what=="value")'
      dfg diff old.pb new.pb -o diff.svg
      dfg diff run1/model.ckpt-100 run1/model.ckpt-200
    """
    from dfg.graphdef import diff as G
    from dfg.graphdef.errors import UsageError

    if a == "-" and b == "-":
        raise UsageError("only one of A and B can be standard input ('-')")
    fmt = None
    if picture is not None:
        fmt = _PICTURES.get(os.path.splitext(picture)[1].lower())
        if fmt is None:
            raise UsageError(f"cannot tell the picture format of '{picture}'; use an "
                             f"extension {', '.join(sorted(_PICTURES))}")
        if fmt not in ("dot", "html"):
            from dfg.graphdef.viz import find_dot

            find_dot()
    sa, sb = _Side(a), _Side(b)
    if (sa.kind == "checkpoint") != (sb.kind == "checkpoint"):
        raise UsageError(f"cannot diff a {sa.kind.replace('_', ' ')} ({a}) against a "
                         f"{sb.kind.replace('_', ' ')} ({b}): give two graphs or two "
                         "checkpoints")
    if sa.kind == "checkpoint":
        if picture is not None:
            raise UsageError("checkpoints have no graph to draw: leave out -o")
        result = G.diff_checkpoints(sa.bundle, sb.bundle)
    else:
        result = G.diff_graphs(sa.graph_def, sb.graph_def)
        if sa.bundle is not None and sb.bundle is not None:
            result.variables = G.diff_bundles(sa.bundle, sb.bundle)
    rep = result.as_dict()
    if picture is not None:
        from dfg.graphdef.io import write_bytes_atomic

        write_bytes_atomic(picture, _picture(sa, sb, result, fmt))
    if as_json:
        emit_json(rep)
    else:
        _print_report(rep, a, b)
    if not result.same:
        raise click.exceptions.Exit(1)


def _picture(sa: _Side, sb: _Side, result: Any, fmt: str) -> bytes:
    """B drawn with the differences marked; two SavedModels: their model functions (what
    dfg viz draws of them), diffed as graphs."""
    from dfg.graphdef import diff as G
    from dfg.graphdef import viz as V

    a, b = sa.graph_def, sb.graph_def
    if sa.saved_model is not None and sb.saved_model is not None:
        fa = V.saved_model_function(sa.saved_model)
        fb = V.saved_model_function(sb.saved_model)
        if fa is not None and fb is not None:
            a = V.function_graph(a, fa).graph_def
            b = V.function_graph(b, fb).graph_def
            result = G.diff_graphs(a, b)
    g, marks = G.merged_graph(a, b, result)
    if fmt == "html":
        from dfg.graphdef.viewer import to_html

        return to_html(g, marks=marks, title="dfg diff").encode("utf-8")
    view = V.build_view(g)
    return V.render(V.to_dot(g, view=view, marks=marks), fmt)
