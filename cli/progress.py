"""A progress bar on standard error for work that can take a while, on a terminal only.

    with progress("steps", total=steps, enabled=not as_json) as advance:
        for _ in range(steps):
            ...
            advance()

The bar is drawn only when standard error is a terminal (never into a pipe or a file, so
scripts and logs stay clean) and ``enabled`` (commands pass ``not as_json``); ``NO_COLOR``
removes its colour, not the bar. It is transient: it disappears when the work is done.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click


def _noop(n: float = 1, total: float | None = None) -> None:
    pass


def wanted(enabled: bool = True) -> bool:
    """Whether a bar would be drawn: enabled and standard error a terminal."""
    try:
        return enabled and sys.stderr.isatty()
    except (AttributeError, ValueError):   # a closed or replaced stderr
        return False


@contextmanager
def progress(description: str, total: float | None, enabled: bool = True
             ) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1, total=None)``; draw a bar of ``total`` units (None: unknown) while
    inside. ``advance(0, total=T)`` sets the total when it is learnt along the way."""
    if not wanted(enabled):
        yield _noop
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from .options import console

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn()]
    with Progress(*columns, console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: float = 1, total: float | None = None) -> None:
            if total is not None:
                bar.update(task, total=total)
            bar.advance(task, n)

        yield advance


# --trace of run, bench and profile: a Chrome trace-event file of the timed steps
trace_option = click.option(
    "--trace", "trace_path", default=None, metavar="FILE",
    help="Write a Chrome trace-event JSON of the steps (open in ui.perfetto.dev).")


def new_tracer(path: str | None):
    """A Tracer when --trace was given, else None (tracing off)."""
    if path is None:
        return None
    from dfg.executor.trace import Tracer

    return Tracer()
