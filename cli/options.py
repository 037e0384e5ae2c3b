"""The CLI vocabulary, defined once: every command takes its words from here.

* ``GRAPH`` arguments: a path or ``-`` (standard input).
* ``-o/--output FILE``: always the output file, ``-`` (the default) standard output; the
  format comes from FILE's extension and ``--format`` overrides it; an extension that names
  no format the command writes is refused (exit 2) unless ``--format`` is given.
* ``--json``: stable JSON instead of a table, wherever the output is data.
* ``--fetch/--feed/--target/--init``: repeatable, and comma lists (``--fetch a,b`` is
  ``--fetch a --fetch b``); TensorFlow node names never hold commas.
* Binary formats are never written to a terminal; human-readable output never wraps when
  standard output is not a terminal, has colour only on one, never with ``NO_COLOR``, and
  shows control characters of names escaped (:func:`dfg.graphdef.text.printable`).
"""

from __future__ import annotations

import functools
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from dfg.graphdef.io import FORMATS

graph_argument = click.argument("graph", metavar="GRAPH", type=str)
graphs_argument = click.argument("graphs", metavar="GRAPH...", nargs=-1, required=True,
                                 type=str)
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print stable, documented JSON instead of a table.")

# formats that are bytes, not text: never written to a terminal
BINARY_FORMATS = frozenset({"pb", "npz", "npy", "png", "pdf"})
# graph files: extension -> format (dfg.graphdef.io reads the same ones)
GRAPH_EXTENSIONS = {".pb": "pb", ".graphdef": "pb", ".pbtxt": "pbtxt", ".txt": "pbtxt",
                    ".prototxt": "pbtxt", ".json": "json"}
# reports (info, validate, bench ...): extension -> format
REPORT_EXTENSIONS = {".json": "json", ".txt": "text"}
# console width when standard output is not a terminal: wide enough that nothing wraps,
# so a node name is never split across lines for grep
_NO_WRAP_WIDTH = 100_000


# --- names: --fetch, --target, --init, and --feed of prune/optimize ----------------------

def names(values: tuple[str, ...] | list[str]) -> list[str]:
    """Repeated options that also take comma-separated lists (names never hold commas)."""
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def _split_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
                 ) -> tuple[str, ...]:
    return tuple(names(value))


def names_option(flag: str, dest: str, metavar: str, help: str, required: bool = False
                 ) -> Callable:
    """A repeatable option of node or tensor names that also takes comma lists."""
    return click.option(flag, dest, multiple=True, required=required, metavar=metavar,
                        callback=_split_names, help=help)


def fetch_option(required: bool = False,
                 help: str = "Tensor to fetch (repeatable, or comma-separated).") -> Callable:
    return names_option("--fetch", "fetches", "T", help, required)


def target_option(help: str = "Node to run for its effect in every step (repeatable, or "
                              "comma-separated).") -> Callable:
    return names_option("--target", "targets", "N", help)


def init_option(help: str = "Node to run once before the steps, with the --feed values, "
                            "e.g. 'init' or 'save/restore_all' (repeatable, or "
                            "comma-separated).") -> Callable:
    return names_option("--init", "inits", "N", help)


def checkpoint_option() -> Callable:
    return click.option(
        "--checkpoint", "checkpoint", default=None, metavar="PREFIX",
        help="Restore the variables from this TF1 checkpoint (prefix, its .index file, or a "
             "directory with a 'checkpoint' file), by variable name, before anything runs. "
             "Default for GRAPH.meta: the checkpoint beside it, if there is one.")


def restore_checkpoint(sess: Any, graph: str, checkpoint: str | None) -> None:
    """--checkpoint, or the checkpoint beside a ``model.ckpt.meta`` GRAPH."""
    from dfg.executor.checkpoint import default_prefix, restore

    prefix = checkpoint or default_prefix(graph)
    if prefix is not None:
        restore(sess, prefix)


def feed_names_option(help: str) -> Callable:
    """--feed of prune and optimize: tensor names only (run's --feed takes values)."""
    return names_option("--feed", "feeds", "T", help)


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


# --- output files and formats --------------------------------------------------------------

def resolve_format(output: str, fmt: str | None, extensions: dict[str, str],
                   stdout_default: str | None, override: str | None = None) -> str:
    """The format to write: --format if given (it overrides the extension), else from
    OUTPUT's extension, else ``stdout_default`` for ``-``. An unknown extension is exit 2."""
    from dfg.graphdef.errors import UsageError

    if fmt:
        return fmt
    if output == "-":
        if stdout_default is None:
            raise UsageError("give an output file with -o FILE")
        return stdout_default
    ext = os.path.splitext(output)[1].lower()
    if ext not in extensions:
        known = ", ".join(sorted(extensions))
        what = f"extension '{ext}'" if ext else "no extension"
        if override is None:
            override = "--format " + "|".join(dict.fromkeys(extensions.values()))
        raise UsageError(f"cannot tell the output format of '{output}' ({what}; known: "
                         f"{known}); rename it or give {override}")
    return extensions[ext]


def refuse_binary_tty(output: str, fmt: str) -> None:
    """Binary bytes on a terminal garble it: refuse, before any work is done."""
    from dfg.graphdef.errors import UsageError

    if output == "-" and fmt in BINARY_FORMATS and stdout_is_tty():
        raise UsageError("refusing to write binary to a terminal; use -o FILE or pipe it")


def graph_output(fn: Callable) -> Callable:
    """``-o/--output FILE`` and ``--format pb|pbtxt|json`` of commands that write a graph
    (``--to`` is the old spelling of --format, hidden). The command gets ``output`` and the
    resolved ``fmt`` (pbtxt on standard output)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        from dfg.graphdef.errors import UsageError

        to, fmt = kw.pop("to"), kw.pop("fmt")
        if to and fmt and to != fmt:
            raise UsageError(f"--to {to} contradicts --format {fmt} (--to is the old name of "
                             "--format)")
        kw["fmt"] = resolve_format(kw["output"], fmt or to, GRAPH_EXTENSIONS, "pbtxt")
        refuse_binary_tty(kw["output"], kw["fmt"])
        return fn(*args, **kw)

    wrapper = click.option("--to", "to", type=click.Choice(FORMATS), default=None,
                           hidden=True, help="Deprecated: the old name of --format.")(wrapper)
    wrapper = click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                           help="Graph format (default: from FILE's extension .pb, .pbtxt, "
                                ".json; pbtxt on standard output).")(wrapper)
    return output_option(wrapper)


def output_option(fn: Callable) -> Callable:
    return click.option("-o", "--output", "output", default="-", show_default=True,
                        metavar="FILE", help="Output file; '-' is standard output.")(fn)


def write_graph(graph_def: Any, output: str, fmt: str) -> None:
    """Save a GraphDef atomically (``-``: standard output) in ``fmt``."""
    from dfg.graphdef.io import save_graphdef

    refuse_binary_tty(output, fmt)
    save_graphdef(graph_def, output, fmt)


def data_output(fn: Callable) -> Callable:
    """``-o/--output FILE`` of commands that print a report (a table or, with --json or a
    .json FILE, JSON): whatever would go to standard output is written to FILE atomically,
    also when the command then fails (validate's report of an invalid graph), but a failure
    before any output leaves FILE untouched."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        from dfg.graphdef.errors import UsageError

        output = kw.pop("output")
        if output != "-":
            fmt = resolve_format(output, "json" if kw.get("as_json") else None,
                                 REPORT_EXTENSIONS, None, "--json")
            if kw.get("as_json") and os.path.splitext(output)[1].lower() == ".txt":
                raise UsageError(f"--json contradicts '{output}' (.txt is a table)")
            if "as_json" in kw:
                kw["as_json"] = fmt == "json"
        with stdout_to(output):
            return fn(*args, **kw)

    return click.option("-o", "--output", "output", default="-", show_default=True,
                        metavar="FILE",
                        help="Write the output here instead of standard output (.json: "
                             "JSON, .txt: text); written atomically.")(wrapper)


@contextmanager
def stdout_to(output: str) -> Iterator[None]:
    """Capture standard output while inside and write it to ``output`` atomically."""
    if output == "-":
        yield
        return
    from dfg.graphdef.io import write_bytes_atomic

    buf, old = io.StringIO(), sys.stdout
    sys.stdout = buf
    try:
        yield
    except BaseException:
        sys.stdout = old
        if buf.getvalue():        # a report followed by a failing exit status: keep it
            write_bytes_atomic(output, buf.getvalue().encode())
        raise
    finally:
        sys.stdout = old
    write_bytes_atomic(output, buf.getvalue().encode())


# --- loading and printing ------------------------------------------------------------------

def load(graph: str, saved_model_ok: bool = False):
    """Load GRAPH ('-' for stdin) into a Graph view; errors surface as one line, exit 2.
    ``saved_model_ok``: a SavedModel directory (or its saved_model.pb) gives the GraphDef of
    its default MetaGraphDef (tags 'serve', or the only one), function library included."""
    from dfg.graphdef.io import load_graph

    if saved_model_ok:
        from dfg.graphdef.savedmodel import SavedModelDir, is_saved_model

        if is_saved_model(graph):
            from dfg.graphdef.graph import Graph

            return Graph(SavedModelDir(graph).graph_def)
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


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # a closed or replaced stream
        return False


def stdout_is_tty() -> bool:
    return _isatty(sys.stdout)


def colour(stderr: bool = False) -> bool:
    """Whether to colour: on a terminal only, never with NO_COLOR set (any value)."""
    return "NO_COLOR" not in os.environ and _isatty(sys.stderr if stderr else sys.stdout)


def style(text: str, stderr: bool = False, **kw: Any) -> str:
    """click.style when colour is wanted, else the text as is."""
    return click.style(text, **kw) if colour(stderr) else text


def console(stderr: bool = False):
    """A rich Console: colour only on a terminal, never with NO_COLOR set; no wrapping and no
    styles when not on a terminal; no markup or emoji codes read from user text, control
    characters escaped: every str printed or put in a table cell is one line (pass a
    rich Text for a cell that must span lines)."""
    from rich.console import Console

    from dfg.graphdef.text import printable

    class _SafeConsole(Console):
        def render_str(self, text: str, **kw: Any):  # type: ignore[override]
            return super().render_str(printable(text), **kw)

        def on_broken_pipe(self) -> None:
            # rich exits 1 here; dfg treats a reader that stopped early (| head) as success,
            # like click.echo output: the CLI's BrokenPipeError handler exits 0
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError, io.UnsupportedOperation):
                pass
            finally:
                os.close(devnull)
            raise BrokenPipeError

    tty = _isatty(sys.stderr if stderr else sys.stdout)
    return _SafeConsole(stderr=stderr, no_color="NO_COLOR" in os.environ or None,
                        color_system="auto" if colour(stderr) else None,
                        width=None if tty else _NO_WRAP_WIDTH, highlight=False,
                        markup=False, emoji=False, soft_wrap=False)


# the Session's run-time optimization (executor/session.py), on by default as in TensorFlow
optimize_option = click.option(
    "--no-optimize", "no_optimize", is_flag=True,
    help="Run the graph as written: no run-time optimization of the step's subgraph "
         "(folding, fusions).")


def session_optimize(no_optimize: bool, repeated: bool = False) -> bool | str | None:
    """The Session's ``optimize`` for a command: off with --no-optimize; for commands that
    time repeated steps (bench, profile) eager, so warm-up steps are all optimized ones;
    else the Session's default (``DFG_OPTIMIZE``, or auto: lazy)."""
    if no_optimize:
        return False
    if repeated:
        from dfg.executor.session import optimize_mode

        return "eager" if optimize_mode(None) != "off" else False
    return None


def _bytes(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """'512M', '4G', '1000000' -> bytes; '0' -> 0 (no limit); None -> the Session's default."""
    if value is None:
        return None
    text = value.strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        n = float(digits)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a size like 512M or 4G") from None
    if n < 0:
        raise click.BadParameter("a size cannot be negative")
    return int(n * scale)


# the memory budget a kernel's output may not exceed (Session(max_bytes=), executor/limits.py)
max_memory_option = click.option(
    "--max-memory", "max_memory", default=None, callback=_bytes, metavar="SIZE",
    help="Refuse a kernel output larger than SIZE (e.g. 512M, 4G; 0: no limit) before it is "
         "allocated. Default: half the physical memory.")


# the whole command's time bound (command_limits); with @limited the command honours it
timeout_option = click.option(
    "--timeout", type=float, default=None, metavar="SECONDS",
    help="Seconds the whole command may take: loading, validation, optimization and every "
         "step (exit 1 past it). Bounds a model that may loop forever.")


# --- file access and whole-command limits ------------------------------------------------

class FileGrants:
    """What --allow-read / --allow-write / --allow-files granted (see :func:`file_options`)."""

    __slots__ = ("read", "write", "all")

    def __init__(self, read: tuple[str, ...] = (), write: tuple[str, ...] = (),
                 all: bool = False) -> None:
        self.read, self.write, self.all = tuple(read), tuple(write), bool(all)


FILE_ACCESS_HELP = """\b
Files: a graph is data from a stranger. Its ops that touch files (SaveV2, RestoreV2,
MergeV2Checkpoints, tables from text files) may read only the model's own files (the
SavedModel directory, the checkpoint given or beside a .meta) and what --allow-read PATH
grants, and write only under --allow-write PATH (both repeatable; a folder grants what is
under it, symlinks and '..' resolved first); --allow-files allows everything, as TensorFlow
does. A refused access is one line naming the op, the node, the path and the flag."""


def file_options(fn: Callable) -> Callable:
    """``--allow-read PATH``, ``--allow-write PATH`` (repeatable) and ``--allow-files`` of
    commands that run a graph (run, bench, profile, compare, freeze; batch applies it too).
    The command receives ``grants`` (a :class:`FileGrants`) and builds its Session's policy
    with :func:`file_policy`; a command adds :data:`FILE_ACCESS_HELP` to its docstring."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        kw["grants"] = FileGrants(kw.pop("allow_read"), kw.pop("allow_write"),
                                  kw.pop("allow_files"))
        return fn(*args, **kw)

    wrapper = click.option(
        "--allow-files", "allow_files", is_flag=True,
        help="Let the graph's ops read and write any file (as TensorFlow does).")(wrapper)
    wrapper = click.option(
        "--allow-write", "allow_write", multiple=True, metavar="PATH",
        help="Let the graph's ops write (and read) PATH, a file or a folder (repeatable)."
    )(wrapper)
    return click.option(
        "--allow-read", "allow_read", multiple=True, metavar="PATH",
        help="Let the graph's ops read PATH, a file or a folder, beyond the model's own "
             "files (repeatable).")(wrapper)


def file_policy(grants: FileGrants | None, graph: str | tuple[str, ...] | None = None,
                checkpoint: str | None = None):
    """The FilePolicy of a command that runs GRAPH (or several): closed but for the model's
    own files (a SavedModel directory, the --checkpoint prefix or the one beside a .meta)
    and what ``grants`` adds; everything with --allow-files (or ``grants`` None)."""
    from dfg.graphdef.files import FilePolicy

    if grants is None or grants.all:
        return FilePolicy.permissive()
    read, prefixes = list(grants.read), []
    for g in (graph,) if isinstance(graph, str) or graph is None else graph:
        if not g or g == "-":
            continue
        from dfg.graphdef.savedmodel import is_saved_model, saved_model_file

        if is_saved_model(g):
            read.append(str(saved_model_file(g).parent))
        else:
            from dfg.executor.checkpoint import default_prefix

            prefix = default_prefix(g)
            if prefix is not None:
                prefixes.append(prefix)
    if checkpoint:
        from dfg.executor.checkpoint import resolve_prefix
        from dfg.graphdef.errors import DfgError

        try:
            prefixes.append(resolve_prefix(checkpoint))
        except DfgError:
            pass     # restoring reports it
    return FilePolicy(read, grants.write, read_prefixes=prefixes)


class _Deadline:
    """The whole command's --timeout: loading, validation, optimization and the steps."""

    def __init__(self, timeout: float | None) -> None:
        import time

        self.end = None if timeout is None else time.monotonic() + timeout
        self.timeout = timeout

    def left(self) -> float | None:
        """Seconds left for the next step (None: no timeout); at least a millisecond, so an
        expired deadline fails the step with DeadlineExceededError."""
        import time

        if self.end is None:
            return None
        return max(self.end - time.monotonic(), 1e-3)


_deadline = _Deadline(None)
# set by main() in a real dfg process: past the deadline plus this grace, a command stuck in
# native code (one long numpy call) is ended from a watchdog thread
HARD_EXIT_GRACE = 2.0
ALARM_GRACE = 0.25
hard_exit_allowed = False


def time_left() -> float | None:
    """The step timeout that keeps a step within the command's --timeout."""
    return _deadline.left()


@contextmanager
def command_limits(timeout: float | None, max_memory: int | None = None) -> Iterator[None]:
    """Run a command within --timeout (from now, for everything it does) and read its model
    files within --max-memory (graphdef/files.py read_limit).

    The steps get what is left (:func:`time_left`); the work before them (loading,
    validation, the run-time optimizer) is interrupted by SIGALRM at the deadline, raising
    DeadlineExceededError, when the command runs on the main thread; in a real ``dfg``
    process a watchdog ends it (exit 1, one line) if it is still running
    :data:`HARD_EXIT_GRACE` seconds later, stuck in native code."""
    global _deadline
    import signal
    import threading

    from dfg.graphdef.files import read_limit

    if timeout is not None and timeout <= 0:
        from dfg.graphdef.errors import UsageError

        raise UsageError(f"--timeout must be positive, not {timeout}")
    old_deadline, _deadline = _deadline, _Deadline(timeout)
    alarm = timeout is not None and threading.current_thread() is threading.main_thread() \
        and hasattr(signal, "setitimer")
    old_handler = None
    done = threading.Event()
    if alarm:
        def on_alarm(signum: int, frame: Any) -> None:
            from dfg.graphdef.errors import DeadlineExceededError

            raise DeadlineExceededError(f"--timeout of {timeout:g} s exceeded")

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        # a little after the deadline: a step running then fails by its own timeout, cleanly
        signal.setitimer(signal.ITIMER_REAL, timeout + ALARM_GRACE)
    if timeout is not None and hard_exit_allowed:
        def watchdog() -> None:
            if not done.wait(timeout + HARD_EXIT_GRACE):
                sys.stderr.write(f"dfg: error: --timeout of {timeout:g} s exceeded\n")
                sys.stderr.flush()
                os._exit(1)

        threading.Thread(target=watchdog, name="dfg-timeout", daemon=True).start()
    try:
        with read_limit(max_memory):
            yield
    finally:
        done.set()
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        _deadline = old_deadline


def limited(fn: Callable) -> Callable:
    """Run the command within :func:`command_limits` of its own ``timeout`` and
    ``max_memory`` parameters (absent: none), from its first line to its last."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        with command_limits(kw.get("timeout"), kw.get("max_memory")):
            return fn(*args, **kw)

    return wrapper
