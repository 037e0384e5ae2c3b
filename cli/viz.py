"""``dfg viz``: draw a graph with Graphviz (DOT text, or SVG/PNG/PDF through ``dot``)."""

from __future__ import annotations

from pathlib import Path

import click

from .options import fetch_option, graph_argument, load, output_option, refuse_binary_tty

FORMATS = ("dot", "svg", "png", "pdf", "html")
_EXT = {".dot": "dot", ".gv": "dot", ".svg": "svg", ".png": "png", ".pdf": "pdf",
        ".html": "html", ".htm": "html"}


class CollapseType(click.ParamType):
    """``--collapse``: a depth >= 1, ``none`` (every node a box), ``auto`` or ``layers``."""

    name = "DEPTH|none|auto|layers"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if isinstance(value, int) and not isinstance(value, bool):
            depth = value
        else:
            text = str(value).strip().lower()
            if text in ("none", "auto", "layers"):
                return None if text == "none" else text
            try:
                depth = int(text)
            except ValueError:
                self.fail(f"'{value}' is not a depth (a positive integer), 'none', 'auto' "
                          "or 'layers'", param, ctx)
        if depth < 1:
            self.fail(f"depth must be at least 1, not {depth}", param, ctx)
        return depth


def output_format(output: str, fmt: str | None) -> str:
    """--format, else OUT's extension, else DOT for standard output."""
    from dfg.graphdef.errors import UsageError

    if fmt:
        return fmt
    if output == "-":
        return "dot"
    ext = Path(output).suffix.lower()
    if ext not in _EXT:
        raise UsageError(f"cannot tell the picture format from '{output}'; use --format "
                         f"{'|'.join(FORMATS)} or an extension .dot, .gv, .svg, .png, .pdf, "
                         ".html")
    return _EXT[ext]


@click.command()
@graph_argument
@output_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Picture format (default: from OUT's extension; DOT on stdout). "
                   "svg/png/pdf need Graphviz's 'dot' program.")
@fetch_option(help="Highlight what this tensor needs, grey the rest (repeatable, or "
                   "comma-separated).")
@click.option("--collapse", type=CollapseType(), default="auto", show_default=True,
              metavar="DEPTH|none|auto|layers",
              help="Draw each name scope at this depth as one box ('none': every node). "
                   "layers: the model's layers (the scopes under the prefix most nodes "
                   "share, a layer holding most of the model opened). auto: layers when "
                   "the graph has them, else the deepest depth that keeps the picture "
                   "within --max-boxes boxes, grouping numbered siblings (add_1, add_2 "
                   "...) if scopes are not enough.")
@click.option("--expand", "expand", multiple=True, metavar="NAME",
              help="Open this collapsed name scope, functional node (While, If, Case, "
                   "call) or library function (repeatable).")
@click.option("--rankdir", type=click.Choice(["TB", "LR"], case_sensitive=False),
              default="TB", show_default=True, metavar="[TB|LR]",
              help="Top to bottom or left to right.")
@click.option("--no-consts", "no_consts", is_flag=True,
              help="Hide the constant annotations on their consumers.")
@click.option("--max-boxes", type=click.IntRange(min=1), default=None, metavar="N",
              help="Box budget of --collapse auto (default 250).")
@click.option("--signature", default=None, metavar="KEY",
              help="SavedModel: draw the function this signature runs (default: "
                   "serving_default, or the only one).")
@click.option("--function", "function", default=None, metavar="NAME",
              help="Draw this library function's body ('main': the graph itself; a "
                   "SavedModel's default is its signature's model function).")
@click.option("--profile", "profile", default=None, metavar="PROFILE.json",
              help="Colour nodes and boxes by their share of the time in this "
                   "'dfg profile --json' output and label the top ones with it.")
def viz(graph: str, output: str, fmt: str | None, fetches: tuple[str, ...],
        collapse: int | str | None, expand: tuple[str, ...], rankdir: str, no_consts: bool,
        max_boxes: int | None, signature: str | None, function: str | None,
        profile: str | None) -> None:
    """Draw GRAPH as a Graphviz picture.

    Nodes show name and op, shaped by kind; data edges show dtype and shape, control edges
    are dashed; while-loop frames are nested clusters; Switch outputs are marked T/F.
    Name scopes collapse into boxes with a node count (edges between boxes merged), so big
    graphs stay readable; --expand opens chosen scopes. Constants appear as small
    annotations on their consumers. The DOT text is deterministic. GRAPH may be a
    SavedModel directory: its MetaGraphDef's graph (tags 'serve') is drawn.

    Function libraries (TensorFlow 2): a node that runs functions (While/If/Case cond,
    body and branches, PartitionedCall's f, an op naming a function) is a double-bordered
    box naming them; a While shows its loop-carried dtypes on a bold self-loop.
    --expand NODE draws it as a cluster holding each function's body (_Arg/_Retval ovals;
    arguments in, results out, a While body's results feeding its arguments as bold
    "next" edges); --expand FUNCTION opens every call of that function, nested ones too.

    -o FILE.html writes the interactive viewer: one self-contained page (no network
    access) where scopes open and close on a click, the wheel zooms, dragging pans, a
    search box finds any node and a panel shows a node's op, attributes, inputs and
    outputs with dtypes and shapes, and constant values. Its layout is Graphviz's, made
    here (it needs 'dot' too).

    --profile PROFILE.json (from 'dfg profile GRAPH --json --top N'): nodes and boxes are
    coloured from white to red by their share of the kernel time, the top ones labelled
    with it, in pictures and in the viewer.

    Without -o (or with -o -) DOT text goes to standard output. Other formats are rendered
    by Graphviz's 'dot' (apt-get install graphviz); without it only DOT works (exit 2).
    PNG and PDF are never written to a terminal (exit 2): use -o FILE or pipe them.

    \b
    Examples:
      dfg viz model.pbtxt -o model.svg
      dfg viz model.pb --collapse 2 --expand encoder/layer_0 -o g.pdf
      dfg viz tf2_model.pbtxt --expand while -o loop.svg
      dfg prune model.pb --fetch y | dfg viz - -o y.svg
      dfg viz model.pb --fetch logits --rankdir LR | dot -Tpng > g.png
    """
    from dfg.graphdef import viz as V
    from dfg.graphdef.io import write_bytes_atomic

    fmt = output_format(output, fmt)
    if fmt != "dot":
        V.find_dot()  # fail before the work, with the install hint
    refuse_binary_tty(output, fmt)
    shares = _read_profile(profile) if profile else None
    g, what = _graph_to_draw(graph, signature, function)
    if what:
        click.echo(f"dfg viz: drawing {what}", err=True)
    if fmt == "html":
        from dfg.graphdef.viewer import to_html

        title = f"dfg viz {Path(graph).name}" if graph != "-" else "dfg viz"
        write_bytes_atomic(output, to_html(g, profile=shares, title=title).encode("utf-8"))
        return
    budget = max_boxes or V.DEFAULT_MAX_BOXES
    view = V.build_view(g, collapse=collapse, expand=expand, show_consts=not no_consts,
                        max_boxes=budget)
    if view.layers:
        click.echo(f"dfg viz: {len(g)} nodes drawn as {view.size} boxes (one per layer; "
                   "--collapse none shows every node, --expand SCOPE opens one)", err=True)
    elif view.auto and (view.depth is not None or view.series):
        how = f"name scopes at depth {view.depth}" if view.depth is not None else ""
        if view.series:
            how = (how + " and " if how else "") + "numbered series"
        click.echo(f"dfg viz: {len(g)} nodes drawn as {view.size} boxes ({how} collapsed; "
                   "--collapse none shows every node)", err=True)
    if not V.fits(view, budget):
        click.echo(f"dfg viz: a large picture ({view.size} boxes, {len(view.edges)} edges); "
                   "Graphviz may take a while: --fetch, --collapse or dfg prune cut it down",
                   err=True)
    text = V.to_dot(g, fetches=fetches, rankdir=rankdir.upper(), view=view, profile=shares)
    write_bytes_atomic(output, V.render(text, fmt))


def _graph_to_draw(graph: str, signature: str | None, function: str | None):
    """(the Graph to draw, what it is when not GRAPH's own graph): a SavedModel's signature
    function unwrapped to the model's own (TF1 SavedModels: the graph), --function's body."""
    from dfg.graphdef import viz as V
    from dfg.graphdef.errors import UsageError
    from dfg.graphdef.graph import Graph
    from dfg.graphdef.savedmodel import SavedModelDir, is_saved_model

    if graph != "-" and is_saved_model(graph):
        sm = SavedModelDir(graph)
        gd = sm.graph_def
        if function is None:
            function = V.saved_model_function(sm, signature)
            if function is None:
                return Graph(gd), None
    else:
        if signature is not None:
            raise UsageError("--signature is for SavedModel directories")
        g = load(graph)
        gd = g.graph_def
        if function is None:
            return g, None
    if function == "main":
        return Graph(gd), None
    names = {f.signature.name for f in gd.library.function}
    if function not in names:
        raise UsageError(f"--function {function}: no such function in the library"
                         + (f" (it has {len(names)}; dfg info lists them)" if names else
                            " (the graph has no function library)"))
    return V.function_graph(gd, function), f"function {function} (--function main: the graph)"


def _read_profile(path: str) -> dict[str, float]:
    """node name -> share of the kernel time, from ``dfg profile --json``'s ``nodes``."""
    import json

    from dfg.graphdef.errors import UsageError

    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        rows = data["nodes"]
        return {str(r["node"]): float(r["share"]) for r in rows}
    except OSError as e:
        raise UsageError(f"--profile {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"--profile {path}: not the JSON of 'dfg profile --json' (a "
                         "'nodes' list of {node, share})") from None
