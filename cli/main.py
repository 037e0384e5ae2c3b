"""The ``dfg`` command: a click group over a table of subcommands, one module each.

Command modules are imported only when their command runs (or when ``--help`` lists them), and
import heavy libraries (numpy, rich, the executor) inside their functions, so that start-up
stays fast. Errors become one line on stderr and an exit code: 0 ok, 1 invalid graph or failed
run, 2 bad usage or unreadable input, 130 interrupted; ``--debug`` shows the traceback instead.
Usage errors (unknown option, missing argument, bad value) are one line too:
``dfg: error: no such option: --bogus (see 'dfg run --help')``.
"""

from __future__ import annotations

import importlib
import sys

import click

from dfg.graphdef.errors import DfgError

# The one command table: name -> "module:function" under dfg.cli.
COMMANDS = {
    "info": "info:info",
    "convert": "convert:convert",
    "validate": "validate:validate",
    "prune": "prune:prune",
    "partition": "partition:partition",
    "run": "run:run",
    "bench": "bench:bench",
    "ops": "ops:ops",
    "viz": "viz:viz",
    "optimize": "optimize:optimize",
    "unroll": "unroll:unroll",
    "freeze": "freeze:freeze",
    "profile": "profile:profile",
    "compare": "compare:compare",
    "batch": "batch:batch",
    "diff": "diff:diff",
}


def error_line(message: str, kind: str = "error") -> str:
    """One line for stderr: control characters (newlines too) escaped as \\xNN."""
    from dfg.graphdef.text import printable

    return f"dfg: {kind}: " + printable(message)


def _usage_line(e: click.UsageError) -> str:
    """click's three-line usage error as one line naming the command's --help."""
    text = e.format_message().strip().rstrip(".")
    if text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]    # "No such option" -> "no such option"
    where = e.ctx.command_path if e.ctx is not None else "dfg"
    return error_line(f"{text} (see '{where} --help')")


class DfgGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self._load(name) is not None]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._load(name)

    @staticmethod
    def _load(name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        try:
            mod = importlib.import_module(f"dfg.cli.{module}")
        except ModuleNotFoundError as e:
            if e.name == f"dfg.cli.{module}":
                return None  # not built yet
            raise
        return getattr(mod, attr)

    def main(self, args=None, prog_name=None, complete_var=None,  # type: ignore[override]
             standalone_mode: bool = True, **extra):
        """click's main, with every error one line on stderr: usage errors exit 2, an
        interrupt exits 130 (click itself prints usage, hint and message on three lines)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:   # bare `dfg`: the help, as click does
            click.echo(e.ctx.get_help() if e.ctx is not None else e.format_message(),
                       err=True)
            sys.exit(e.exit_code)
        except click.UsageError as e:
            click.echo(_usage_line(e), err=True)
            sys.exit(2)
        except click.ClickException as e:
            click.echo(error_line(e.format_message()), err=True)
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("dfg: interrupted", err=True)
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except DfgError as e:
            if ctx.meta.get("dfg.debug"):
                raise
            click.echo(error_line(str(e)), err=True)
            ctx.exit(e.exit_code)
        except BrokenPipeError:
            # downstream closed the pipe (dfg ... | head): not an error worth a traceback
            sys.stderr.close()
            ctx.exit(0)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None
        except Exception as e:  # a bug: still one line, unless --debug
            if ctx.meta.get("dfg.debug"):
                raise
            click.echo(error_line(f"{type(e).__name__}: {e} (rerun with --debug for the "
                                  "traceback)", "internal error"), err=True)
            ctx.exit(1)


@click.group(name="dfg", cls=DfgGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dfg", prog_name="dfg")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """dfg: inspect, validate, prune, optimize, visualize and run TensorFlow GraphDefs.

    GRAPH arguments take .pb, .pbtxt or .json files (the format is detected from the
    content) or '-' for standard input. Exit status: 0 ok, 1 the graph is invalid or the run
    failed, 2 bad usage or unreadable input, 130 interrupted. -o FILE is always the output
    file (format from its extension, --format to override), --json prints data as JSON,
    --fetch/--feed/--target take repeats or comma lists.

    \b
    Examples:
      dfg info model.pb
      dfg run model.pbtxt --fetch y --feed x=[[1,2]]
      dfg prune model.pb --fetch logits | dfg viz - -o g.svg
      dfg validate *.pbtxt --json | jq
    """
    ctx.meta["dfg.debug"] = debug


def main() -> None:
    from . import options

    options.hard_exit_allowed = True   # a real process: --timeout may end it (options.py)
    cli(prog_name="dfg")


if __name__ == "__main__":
    main()
