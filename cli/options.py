"""Options and helpers shared by the commands: graph input, --json, -o, output formatting."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from dfg.graphdef.io import FORMATS

graph_argument = click.argument("graph", metavar="GRAPH", type=str)
graphs_argument = click.argument("graphs", metavar="GRAPH...", nargs=-1, required=True,
                                 type=str)
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print stable, documented JSON instead of a table.")
output_option = click.option("-o", "--output", "output", default="-", show_default=True,
                             metavar="OUT", help="Output file; '-' is standard output.")
to_option = click.option("--to", "to", type=click.Choice(FORMATS), default=None,
                         help="Output format (default: from OUT's extension; pbtxt on stdout).")


def fetch_option(required: bool = False, help: str = "Tensor to fetch (repeatable).") -> Callable:
    return click.option("--fetch", "fetches", multiple=True, required=required,
                        metavar="T", help=help)


def target_option(help: str = "Node to run for its effect in every step (repeatable)."
                  ) -> Callable:
    return click.option("--target", "targets", multiple=True, metavar="N", help=help)


def init_option(help: str = "Node to run once before the steps, e.g. 'init' (repeatable)."
                ) -> Callable:
    return click.option("--init", "inits", multiple=True, metavar="N", help=help)


def names(values: tuple[str, ...]) -> list[str]:
    """Repeated options that also take comma-separated lists (names never hold commas)."""
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def tensor_selection(command: str, fetches: tuple[str, ...], feeds: tuple[str, ...],
                     targets: tuple[str, ...]) -> tuple[list[str], list[str], list[str]]:
    """--fetch/--feed/--target of prune and optimize: names only, and something to keep."""
    from dfg.graphdef.errors import UsageError

    fetch_list, feed_list, target_list = names(fetches), names(feeds), names(targets)
    for f in feed_list:
        if "=" in f:
            raise UsageError(f"--feed '{f}': {command} takes tensor names only, not values "
                             f"(try --feed {f.split('=', 1)[0]})")
    if not fetch_list and not target_list:
        raise UsageError(f"nothing to {command} for: give at least one --fetch or --target")
    return fetch_list, feed_list, target_list


def load(graph: str):
    """Load GRAPH ('-' for stdin) into a Graph view; errors surface as one line, exit 2."""
    from dfg.graphdef.io import load_graph

    return load_graph(graph)


def emit_json(obj: Any) -> None:
    """Stable JSON on stdout: fixed key order as built, two-space indent, trailing newline."""
    sys.stdout.write(json.dumps(obj, indent=2, default=_json_default) + "\n")


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, bytes):
        return o.decode("utf-8", "replace")
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def console(stderr: bool = False):
    """A rich Console: colour only on a terminal, never with NO_COLOR set."""
    from rich.console import Console

    return Console(stderr=stderr, no_color="NO_COLOR" in os.environ or None,
                   highlight=False, soft_wrap=False)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
