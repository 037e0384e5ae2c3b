"""``dfg batch``: run a model over many input files, on worker processes or a Ray cluster."""

from __future__ import annotations

import click

from .options import fetch_option, file_options, file_policy, json_option, max_memory_option


@click.command()
@click.argument("model", metavar="MODEL", type=str)
@click.option("--signature", default=None, metavar="KEY",
              help="MODEL is a SavedModel dir: run this signature (default serving_default).")
@fetch_option(help="Tensor to fetch from a frozen graph (repeatable, or comma-separated); "
                   "with a SavedModel, the output keys to keep (default: all).")
@click.option("--input", "inputs", multiple=True, required=True, metavar="PATH",
              help="An input: .npz, a TFRecord file (.tfrecord/.tfrecords/.tfr) or a folder "
                   "of images (repeatable).")
@click.option("--input-key", default=None, metavar="NAME",
              help="The string input that TFRecord records and images feed (default: the "
                   "model's only input, or its only string placeholder).")
@click.option("-o", "--output", "out_dir", required=True, metavar="OUT_DIR",
              help="Folder for the outputs: OUT_DIR/<input stem>.npz per input.")
@click.option("--engine", type=click.Choice(("local", "ray")), default="local",
              show_default=True,
              help="local: worker processes on this machine; ray: a Ray Data actor pool.")
@click.option("--address", default=None, metavar="ADDR",
              help="With --engine ray: join this Ray cluster (e.g. 10.0.0.1:6379 or 'auto'); "
                   "default: start a local Ray instance for this command. The inputs are "
                   "read here and shipped through Ray; MODEL must be at the same path on "
                   "every node (shared storage).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes or Ray actors (default: one per core, at most 4).")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True,
              help="Rows per batch; a batch never spans two input files.")
@click.option("--batch-timeout", "batch_timeout", type=float, default=None, metavar="SECONDS",
              help="Seconds one batch may take: past it the batch's input fails (a local "
                   "worker still silent a few seconds later is killed and replaced; the "
                   "other inputs go on).")
@max_memory_option
@json_option
@file_options
def batch(model: str, signature: str | None, fetches: tuple[str, ...],
          inputs: tuple[str, ...], input_key: str | None, out_dir: str, engine: str,
          address: str | None, workers: int | None, batch_size: int,
          batch_timeout: float | None, max_memory: int | None, as_json: bool,
          grants=None) -> None:
    """Run MODEL over every --input and write OUT_DIR/<input stem>.npz for each.

    MODEL is a SavedModel directory (--signature, default serving_default) or a frozen graph
    (.pb/.pbtxt, with --fetch), as `dfg run` takes them. Inputs:

    \b
      .npz           each key a feed name (a signature input key, or a tensor name of the
                     graph); the first axis of every array is the batch
      TFRecord       each record (a serialized tf.Example) is one row of the string input
                     named by --input-key
      a folder       its .png/.jpg/.jpeg/.gif/.bmp files, in file-name order, each one row
                     of encoded bytes fed to the string input
    Anything else is refused (exit 2).

    Each output file holds one array per output (the signature's output keys, or the
    --fetch names), rows in input order, and is written atomically when the whole input has
    run. A rerun skips inputs whose output file exists (an existing file is a finished one:
    it only appears, by a rename, once complete), so an interrupted run resumes where it
    stopped. A worker process or actor that dies loses nothing: its batch runs again on
    another one, and no row is written twice. An input that cannot be read or whose rows
    fail names itself in its error; the other inputs still finish; the exit status is 1 if
    any input failed.

    \b
    JSON (--json, stable):
      {"rows": int,               rows written in this run (skipped inputs not counted)
       "seconds": float,          wall time of the run
       "rows_per_s": float|null,  rows / seconds
       "files": [{"input": str, "output": str, "rows": int,
                  "status": "done"|"skipped"|"failed", "error": str|null}],
       "workers": {id: int}}      rows each worker ran ("pid-N" for a local worker
                                  process, "actor-ID" for a Ray actor)
    Without --json a table of the files is printed, and a progress bar on a terminal.

    \b
    Files: as for `dfg run`, the model's ops that touch files may read only the model's own
    files unless --allow-read/--allow-write PATH or --allow-files grant more (the inputs
    and OUT_DIR are dfg's to read and write, not the model's).

    \b
    Examples:
      dfg batch model.pb --fetch probs --input shards/*.npz -o out/
      dfg batch saved_model --signature serving_default --input data.tfrecord \\
          --input-key examples -o out/ --workers 4
      dfg batch saved_model --input photos/ -o out/ --engine ray --address auto --json
    """
    from dfg.executor.distributed.batch import run_batch

    from .main import error_line
    from .options import emit_json
    from .progress import progress

    with progress("rows", None, enabled=not as_json) as advance:
        report = run_batch(model, inputs, out_dir, signature=signature, fetches=fetches,
                           engine=engine, address=address, workers=workers,
                           batch_size=batch_size, input_key=input_key, progress=advance,
                           on_total=lambda n: advance(0, total=n),
                           files=file_policy(grants, model), timeout=batch_timeout,
                           max_bytes=max_memory)
    if as_json:
        emit_json(report)
    else:
        _table(report)
    failed = [f for f in report["files"] if f["status"] == "failed"]
    for f in failed:
        click.echo(error_line(f["error"] or f"{f['input']}: failed"), err=True)
    if failed:
        raise click.exceptions.Exit(1)


def _table(report: dict) -> None:
    from rich.table import Table

    from .options import console

    table = Table()
    for col in ("input", "output", "rows", "status"):
        table.add_column(col)
    for f in report["files"]:
        table.add_row(f["input"], f["output"], str(f["rows"]), f["status"])
    con = console()
    con.print(table)
    rate = report["rows_per_s"]
    con.print(f"{report['rows']} rows in {report['seconds']:.2f} s"
              + (f" ({rate:.1f} rows/s)" if rate else "")
              + f" on {len(report['workers'])} worker(s)")
