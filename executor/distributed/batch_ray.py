"""The Ray engine of ``dfg batch``: Ray Data ``map_batches`` over an actor pool, one
:class:`~.batch.Predictor` (one dfg Session, built once) per actor.

The driver reads the input files one at a time and cuts them into batches; each batch becomes
one Arrow block in the object store (a block of the Ray dataset) with two extra columns, the
file's index and the row's index in it, which the Predictor passes through. ``map_batches``
runs with ``batch_size=None`` so that a block is one call: a batch never mixes two files, and
a model error fails only the file it came from (the Predictor returns the error as a column
instead of raising, which would stop the whole dataset). Ray may still cut a large output
block in pieces: the driver keeps rows, not batches.

Faults: ``max_restarts``/``max_task_retries`` make Ray restart an actor that died and run its
batch again on a live one; the driver keeps rows by (file, row index), so a batch that comes
back twice is kept once, and a file is written only when every one of its rows is back.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef.errors import DfgError, UsageError

from . import prepare_local_ray
from .batch import MAX_ATTEMPTS, BatchRun, Predictor, _threads_per_worker

SHARD = "__dfg_file"
ROW = "__dfg_row"
WORKER = "__dfg_worker"
ERROR = "__dfg_error"


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'dfg[ray]' (ray[data])") from None
    return ray


def run_ray(run: BatchRun, n: int, address: str | None, marker: str | None,
            progress: Callable[[int], None] | None,
            on_total: Callable[[int], None] | None) -> None:
    ray = _import_ray()
    if all(s.status != "pending" for s in run.shards):
        return                   # every output already there: no Ray to start
    started = not ray.is_initialized()
    if started:
        prepare_local_ray()
        try:
            # "local": without --address our own instance, even when RAY_ADDRESS or a
            # `ray start` cluster is around (Ray would join those on None)
            ray.init(address=address or "local", include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise UsageError(f"cannot start or join Ray at {address or 'a local instance'}: "
                             f"{e}") from None
    # Ray's own notices (deprecations, "execution finished") are not the command's output
    quiet = [logging.getLogger(name) for name in ("ray", "ray.data")]
    levels = [q.level for q in quiet]
    for q in quiet:
        q.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refs = _put_blocks(ray, run, on_total)
            if refs:
                _run(ray, run, refs, n, marker, progress)
    finally:
        for q, level in zip(quiet, levels):
            q.setLevel(level)
        if started:
            ray.shutdown()


def _put_blocks(ray: Any, run: BatchRun, on_total: Callable[[int], None] | None) -> list:
    """Read the inputs one at a time into the object store, one Arrow block per batch (the
    driver holds about one file at a time)."""
    from ray.data.block import BlockAccessor

    from .batch import _tasks_of  # the local engine's reader: pending shards, one at a time

    refs = []
    for t in _tasks_of(run, on_total):
        feeds = dict(t.feeds)
        feeds[SHARD] = np.full(t.stop - t.start, t.shard, dtype=np.int64)
        feeds[ROW] = np.arange(t.start, t.stop, dtype=np.int64)
        refs.append(ray.put(BlockAccessor.batch_to_block(feeds)))
    return refs


def _run(ray: Any, run: BatchRun, refs: list, n: int, marker: str | None,
         progress: Callable[[int], None] | None) -> None:
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False       # dfg draws its own bar, on a terminal only
    ctx.print_on_execution_start = False
    cpus = float(ray.cluster_resources().get("CPU", 1))
    ds = ray.data.from_arrow_refs(refs)    # block for block: one batch each
    threads = _threads_per_worker(n) if cpus >= n else 1
    out = ds.map_batches(
        Predictor, batch_size=None, batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=n),
        fn_constructor_kwargs=dict(run.model_kwargs(), passthrough=[SHARD, ROW],
                                   worker_column=WORKER, error_column=ERROR, exit_once=marker,
                                   threads=threads),
        # an actor per worker, sharing the CPUs when asked for more workers than there are
        num_cpus=min(1.0, cpus / n),
        max_restarts=MAX_ATTEMPTS, max_task_retries=MAX_ATTEMPTS)
    try:
        for batch in out.iter_batches(batch_size=None, batch_format="numpy"):
            _collect(run, batch, progress)
    except DfgError:
        raise
    except Exception as e:   # Ray gave up (an actor died more than MAX_ATTEMPTS times ...)
        message = _ray_error(e)
        for i, s in enumerate(run.shards):
            if s.status == "running":
                run.fail(i, f"the Ray job failed: {message}")


def _ray_error(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[-1] if text else ''}"


def _collect(run: BatchRun, batch: dict[str, np.ndarray],
             progress: Callable[[int], None] | None) -> None:
    """Keep one returned batch's rows, by (file, row index)."""
    shards, rows = batch[SHARD], batch[ROW]
    if not len(shards):
        return
    shard, start = int(shards[0]), int(rows[0])
    if ERROR in batch:
        run.fail(shard, f"rows {start}-{int(rows[-1])}: {batch[ERROR][0]}")
        return
    worker = str(batch[WORKER][0]) if WORKER in batch else "ray"
    outputs = {k: batch[k] for k in run.spec.outputs}
    expected = np.arange(start, start + len(rows))
    if (shards != shard).any() or not np.array_equal(rows, expected):
        # a block holds consecutive rows of one file (a batch or a piece of one): anything
        # else would misplace rows
        run.fail(shard, "a batch came back with its rows out of order")
        return
    if run.add(shard, start, outputs, worker) and progress is not None:
        progress(len(rows))
