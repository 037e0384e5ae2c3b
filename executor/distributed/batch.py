"""Batch inference: one model over many input files, on worker processes or Ray actors.

* :class:`Model`: a SavedModel signature or a frozen graph's fetches, loaded once, run on a
  batch given as a dict of arrays (Ray's numpy batch format), returning a dict of arrays.
* :class:`Predictor`: the callable class Ray Data's ``map_batches`` takes (one Model per actor).
* :func:`run_batch`: what ``dfg batch`` does: read each input file (:mod:`.batch_inputs`), cut
  it into batches of rows, run them on an engine, and write ``OUT_DIR/<stem>.npz`` per file,
  rows in input order, atomically.

Engines:

* ``local``: worker processes on this machine (:class:`LocalPool`), each loading the model
  once. A worker that dies (killed, out of memory) loses nothing: its in-flight batch goes back
  to the queue, a new worker takes its place, and results are kept by batch id, so no row is
  written twice.
* ``ray``: Ray Data ``map_batches`` over an actor pool, one :class:`Predictor` per actor
  (:mod:`.batch_ray`); Ray restarts a dead actor and retries its batch; the driver keeps rows
  by (file, row index).

Resuming: an output file is written under a temporary name and renamed into place when the
whole file has run, so an existing ``OUT_DIR/<stem>.npz`` is a finished shard and is skipped.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dfg.graphdef.errors import DfgError, InvalidArgumentError, NotFoundError, UsageError

from . import batch_inputs
from .batch_inputs import Input

# Test scaffolding for the fault tests: when this names a path that does not exist yet, the
# first worker to start a batch creates it (writing its process id) and kills itself with
# SIGKILL, as the OOM killer or `kill -9` would, mid-batch. Only one worker ever does (the file
# is created exclusively).
EXIT_ONCE_ENV = "DFG_BATCH_EXIT_ONCE"
# how often one batch may lose its worker before its file fails
MAX_ATTEMPTS = 3
# seconds past its batch's timeout a local worker may stay silent before it is killed: the
# step's own deadline ends it cleanly unless a kernel is stuck in native code
KILL_GRACE = 5.0


# test scaffolding like EXIT_ONCE_ENV: the first local worker to create this file hangs in
# its next batch (as a kernel stuck in native code would), until the driver kills it
HANG_ONCE_ENV = "DFG_BATCH_HANG_ONCE"


def hang_once(marker: str | None) -> None:
    """Block this process for good if ``marker`` can be created (see HANG_ONCE_ENV)."""
    if not marker:
        return
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    threading.Event().wait()


def exit_once(marker: str | None) -> None:
    """Kill this process if ``marker`` can be created (see EXIT_ONCE_ENV)."""
    if not marker:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    import signal

    if hasattr(signal, "SIGKILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)


# --- the model ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """What the driver knows of a model without loading its weights."""

    inputs: list[str] | None     # signature input keys; None: a frozen graph (any tensor)
    string_inputs: list[str]     # inputs a TFRecord or image folder can feed
    outputs: list[str]           # output keys or fetch names, the output files' keys


def describe_model(model: str, signature: str | None, fetches: Sequence[str]) -> ModelSpec:
    """Check ``model`` and the signature/fetches before any worker starts (errors exit early)."""
    from dfg.graphdef import dtypes as D
    from dfg.graphdef.savedmodel import SavedModelDir, is_saved_model

    fetches = list(fetches)
    if signature is not None or is_saved_model(model):
        sig = SavedModelDir(model).signature(signature)
        unknown = [k for k in fetches if k not in sig.outputs]
        if unknown:
            raise NotFoundError(f"signature '{sig.key}' has no output "
                                f"{', '.join(repr(k) for k in unknown)} (outputs: "
                                f"{', '.join(sig.outputs)})")
        strings = [k for k, s in sig.inputs.items() if D.base(s.dtype) == D.DT_STRING]
        return ModelSpec(list(sig.inputs), strings, fetches or list(sig.outputs))
    if not fetches:
        raise UsageError(f"{model} is a graph, not a SavedModel: name the tensors to fetch "
                         "(--fetch T)")
    from dfg.graphdef.graph import parse_tensor_name
    from dfg.graphdef.io import load_graph

    g = load_graph(model)
    for f in fetches:
        name, _ = parse_tensor_name(f)
        if g.get(name) is None:
            raise NotFoundError(f"fetch '{f}': no node '{name}' in {model}")
    strings = [n.name for n in g if n.op == "Placeholder" and "dtype" in n.attr
               and D.base(n.attr["dtype"].type) == D.DT_STRING]
    return ModelSpec(None, strings, fetches)


class Model:
    """A model loaded once for batch inference.

    ``model`` is a SavedModel directory (``signature`` picks the signature, default
    ``serving_default``; ``fetches`` picks output keys, default all) or a frozen graph
    (``.pb``/``.pbtxt``; ``fetches`` are tensor names, required). :meth:`run` feeds a batch by
    column name (signature input keys, or tensor names of the graph) and returns one array per
    output, each with one row per input row.
    """

    def __init__(self, model: str, signature: str | None = None,
                 fetches: Sequence[str] | None = None, threads: int | None = None,
                 files: Any = None, timeout: float | None = None,
                 max_bytes: int | None = None) -> None:
        from dfg.graphdef.files import read_limit

        self.path = str(model)
        self.timeout = timeout   # seconds one batch may take (None: no bound)
        with read_limit(max_bytes):   # loading is held to the budget the steps get
            self._load(model, signature, fetches, threads, files, max_bytes)

    def _load(self, model: str, signature: str | None, fetches: Sequence[str] | None,
              threads: int | None, files: Any, max_bytes: int | None) -> None:
        from dfg.executor.session import optimize_mode
        from dfg.graphdef.savedmodel import is_saved_model

        fetches = list(fetches or [])
        self._loaded: Any = None
        # one signature runs batch after batch: optimize it before the first (as `dfg bench`
        # does), unless DFG_OPTIMIZE says otherwise
        mode = optimize_mode(None)
        optimize = {"off": False, "auto": "eager"}.get(mode, mode)
        if signature is not None or is_saved_model(self.path):
            from dfg.executor.savedmodel import load

            self._loaded = load(self.path, threads=threads, optimize=optimize, files=files,
                                max_bytes=max_bytes)
            sig = self._loaded.signature(signature)
            self.signature: str | None = sig.key
            self.outputs = fetches or list(sig.outputs)
            self.session = self._loaded.session
        else:
            if not fetches:
                raise UsageError(f"{self.path} is a graph, not a SavedModel: give fetches")
            from dfg.executor.session import Session
            from dfg.graphdef.io import load_graph

            self.signature = None
            self.outputs = fetches
            self.session = Session(load_graph(self.path), threads=threads, optimize=optimize,
                                   files=files, max_bytes=max_bytes)

    def run(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch: ``{column: array}`` in, ``{output: array}`` out (rows kept)."""
        if not batch:
            raise InvalidArgumentError("a batch with no columns: nothing to feed")
        rows = len(next(iter(batch.values())))
        if self._loaded is not None:
            out = self._loaded.run(self.signature, batch, self.outputs, timeout=self.timeout)
            values = [out[k] for k in self.outputs]
        else:
            values = self.session.run(list(self.outputs), feed_dict=dict(batch),
                                      timeout=self.timeout)
        result = {}
        for name, v in zip(self.outputs, values):
            arr = np.asarray(v)
            if arr.ndim == 0 or arr.shape[0] != rows:
                raise InvalidArgumentError(
                    f"output '{name}' has shape {list(arr.shape)}, not one row per input row "
                    f"({rows}): batch inference needs outputs batched along their first axis")
            result[name] = arr
        return result

    def close(self) -> None:
        self.session.close()


def _worker_id() -> str:
    """The Ray actor's id inside an actor, else this process's id."""
    try:
        import sys

        if "ray" in sys.modules:
            import ray

            if ray.is_initialized():
                actor = ray.get_runtime_context().get_actor_id()
                if actor:
                    return f"actor-{actor[:12]}"
    except Exception:   # not in a Ray worker after all: a process id names it well enough
        pass
    return f"pid-{os.getpid()}"


class Predictor:
    """A callable class for ``ray.data.Dataset.map_batches``: one dfg :class:`Model` per actor,
    built once in the constructor, then called on each batch (a dict of numpy arrays) and
    returning a dict of numpy arrays, one row per input row::

        ds.map_batches(Predictor, fn_constructor_kwargs={"model": "saved_model_dir",
                       "signature": "serving_default"}, concurrency=2, batch_size=64)

    Every column is fed (by signature input key, or by tensor name for a frozen graph with
    ``fetches``) except the ``passthrough`` columns, which are copied to the output as they are
    (row ids, file names). ``worker_column`` adds a column naming the actor that ran the batch;
    with ``error_column``, a batch that fails returns the passthrough columns and that column
    (the error's message per row) instead of raising, so one bad batch does not stop a dataset.
    ``exit_once`` is test scaffolding (see ``EXIT_ONCE_ENV``).
    """

    def __init__(self, model: str, signature: str | None = None,
                 fetches: Sequence[str] | None = None, *, passthrough: Sequence[str] = (),
                 threads: int | None = None, worker_column: str | None = None,
                 error_column: str | None = None, exit_once: str | None = None,
                 files: Any = None, timeout: float | None = None,
                 max_bytes: int | None = None) -> None:
        self.model = Model(model, signature, fetches, threads, files, timeout, max_bytes)
        self.passthrough = list(passthrough)
        self.worker_column = worker_column
        self.error_column = error_column
        self.exit_once = exit_once
        self.worker = _worker_id()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        exit_once(self.exit_once)
        kept = {c: batch[c] for c in self.passthrough if c in batch}
        feeds = {k: v for k, v in batch.items() if k not in kept}
        rows = len(next(iter(batch.values()))) if batch else 0
        try:
            out = self.model.run(feeds)
        except DfgError as e:
            if self.error_column is None:
                raise
            out = {self.error_column: np.array([str(e)] * rows, dtype=object)}
        out.update(kept)
        if self.worker_column is not None:
            out[self.worker_column] = np.array([self.worker] * rows, dtype=object)
        return out


# --- the driver -----------------------------------------------------------------------------

@dataclass
class Task:
    """Rows [start, stop) of one input file, to run as one batch."""

    id: int
    shard: int
    start: int
    stop: int
    feeds: dict[str, np.ndarray]
    attempts: int = 0    # how many workers died while running it


@dataclass
class Shard:
    """One input file's progress. Guarded by the driver thread only (engines call back on it)."""

    input: Input
    output: str
    status: str = "pending"         # pending | running | done | skipped | failed
    rows: int = 0
    error: str | None = None
    parts: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # start -> outputs
    got: np.ndarray | None = None   # which rows are in parts (bool per row)

    def report(self) -> dict[str, Any]:
        return {"input": self.input.path, "output": self.output, "rows": self.rows,
                "status": self.status, "error": self.error}


def _npz_array(v: np.ndarray) -> np.ndarray:
    """An array numpy saves without pickling: string (object) arrays as fixed-width bytes."""
    if v.dtype.kind != "O":
        return v
    flat = [x if isinstance(x, bytes) else str(x).encode() for x in v.ravel()]
    return np.array(flat, dtype=bytes).reshape(v.shape) if flat else v.astype(bytes)


def _finished_rows(path: str) -> int:
    """Rows of an output file already written (0 when it holds no arrays)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return int(z[z.files[0]].shape[0]) if z.files else 0
    except Exception:   # unreadable: still finished (written atomically); rows unknown
        return 0


class BatchRun:
    """One ``dfg batch`` run: shards, their batches, and the assembly of results."""

    def __init__(self, model: str, signature: str | None, fetches: Sequence[str],
                 inputs: Sequence[str], out_dir: str, batch_size: int,
                 input_key: str | None = None, files: Any = None,
                 timeout: float | None = None, max_bytes: int | None = None) -> None:
        if batch_size < 1:
            raise UsageError(f"--batch-size must be at least 1, not {batch_size}")
        self.model, self.signature, self.fetches = model, signature, list(fetches)
        self.files = files   # the workers' FilePolicy (graphdef/files.py); None: permissive
        self.timeout = timeout       # seconds one batch may take (None: no bound)
        self.max_bytes = max_bytes   # each worker's memory budget (Session(max_bytes=))
        self.spec = describe_model(model, signature, fetches)
        self.batch_size = batch_size
        classified = [batch_inputs.classify(p) for p in inputs]
        seen: dict[str, str] = {}
        for inp in classified:
            if inp.stem in seen:
                raise UsageError(f"--input {seen[inp.stem]} and {inp.path} would both be "
                                 f"written to {inp.stem}.npz: rename one")
            seen[inp.stem] = inp.path
        self.string_key = self._string_key(input_key, classified)
        self.out_dir = out_dir
        self.shards = [Shard(inp, inp.output(out_dir)) for inp in classified]
        self.workers: dict[str, int] = {}
        self._next_task = 0

    def _string_key(self, input_key: str | None, inputs: list[Input]) -> str | None:
        if not any(i.kind != "npz" for i in inputs):
            return input_key
        if input_key is not None:
            if self.spec.inputs is not None and input_key not in self.spec.inputs:
                raise UsageError(f"--input-key {input_key}: the signature has no such input "
                                 f"(inputs: {', '.join(self.spec.inputs)})")
            return input_key
        candidates = self.spec.inputs if self.spec.inputs is not None else \
            self.spec.string_inputs
        if len(candidates) == 1:
            return candidates[0]
        raise UsageError("give --input-key: the input TFRecord records or images feed (string "
                         f"inputs: {', '.join(self.spec.string_inputs) or 'none'})")

    def model_kwargs(self) -> dict[str, Any]:
        return {"model": self.model, "signature": self.signature,
                "fetches": self.fetches or None, "files": self.files,
                "timeout": self.timeout, "max_bytes": self.max_bytes}

    def skip_finished(self) -> None:
        """Mark shards whose output exists as skipped (resuming a run)."""
        for s in self.shards:
            if os.path.exists(s.output):
                s.status, s.rows = "skipped", _finished_rows(s.output)

    def load(self, shard: int) -> dict[str, np.ndarray] | None:
        """Read one shard's rows (None, and the shard failed, if it cannot be read)."""
        s = self.shards[shard]
        try:
            columns = batch_inputs.read(s.input, self.string_key)
            if self.spec.inputs is not None:
                unknown = [k for k in columns if k not in self.spec.inputs]
                if unknown:
                    raise InvalidArgumentError(
                        f"array {', '.join(repr(k) for k in unknown)} is not an input of the "
                        f"signature (inputs: {', '.join(self.spec.inputs)})",
                        source=s.input.path)
        except DfgError as e:
            self.fail(shard, str(e))
            return None
        s.rows = batch_inputs.rows_of(columns)
        s.status = "running"
        return columns

    def tasks(self, shard: int, columns: dict[str, np.ndarray]) -> list[Task]:
        s = self.shards[shard]
        starts = list(range(0, s.rows, self.batch_size)) or [0]   # 0 rows: one empty batch
        out = []
        for start in starts:
            stop = min(start + self.batch_size, s.rows)
            out.append(Task(self._next_task, shard, start, stop,
                            {k: v[start:stop] for k, v in columns.items()}))
            self._next_task += 1
        return out

    def fail(self, shard: int, message: str) -> None:
        s = self.shards[shard]
        if s.status in ("failed", "done"):
            return
        path = s.input.path
        s.status, s.error, s.parts, s.got = "failed", message if path in message else \
            f"{path}: {message}", {}, None

    def add(self, shard: int, start: int, outputs: dict[str, np.ndarray], worker: str) -> bool:
        """Keep the outputs of rows [start, start + n) of a shard; rows already kept are not
        kept again (a batch run twice, after its worker died, comes back twice). Writes the
        file when every row is in. Returns whether the rows were new."""
        s = self.shards[shard]
        if s.status != "running":
            return False
        n = len(next(iter(outputs.values()))) if outputs else 0
        if s.got is None:
            s.got = np.zeros(s.rows, dtype=bool)
        if start in s.parts or s.got[start:start + n].any():
            return False
        s.parts[start] = outputs
        s.got[start:start + n] = True
        self.workers[worker] = self.workers.get(worker, 0) + n
        if s.got.all() and (s.rows or s.parts):   # 0 rows: done once its empty batch is back
            self._write(shard)
        return True

    def _write(self, shard: int) -> None:
        from dfg.graphdef.io import write_bytes_atomic

        s = self.shards[shard]
        parts = [s.parts[k] for k in sorted(s.parts)]
        try:
            arrays = {name: _npz_array(np.concatenate([p[name] for p in parts]))
                      for name in self.spec.outputs}
            got = len(next(iter(arrays.values()))) if arrays else s.rows
            if got != s.rows:    # the engine lost or doubled rows: never write such a file
                raise InvalidArgumentError(f"{got} output rows for {s.rows} input rows")
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            os.makedirs(self.out_dir, exist_ok=True)
            write_bytes_atomic(s.output, buf.getvalue())
        except (DfgError, ValueError, OSError) as e:
            self.fail(shard, f"cannot write {s.output}: {e}")
            return
        s.status, s.parts, s.got = "done", {}, None

    def report(self, seconds: float) -> dict[str, Any]:
        rows = sum(s.rows for s in self.shards if s.status == "done")
        return {"rows": rows, "seconds": round(seconds, 3),
                "rows_per_s": round(rows / seconds, 3) if seconds > 0 else None,
                "files": [s.report() for s in self.shards],
                "workers": dict(sorted(self.workers.items()))}


def run_batch(model: str, inputs: Sequence[str], out_dir: str, *,
              signature: str | None = None, fetches: Sequence[str] = (),
              engine: str = "local", address: str | None = None, workers: int | None = None,
              batch_size: int = 64, input_key: str | None = None,
              progress: Callable[[int], None] | None = None,
              on_total: Callable[[int], None] | None = None,
              files: Any = None, timeout: float | None = None,
              max_bytes: int | None = None) -> dict[str, Any]:
    """Run ``model`` over every input file and write ``OUT_DIR/<stem>.npz`` per file; returns
    the report ``dfg batch --json`` prints. ``progress(rows)`` is called as rows finish;
    ``on_total(rows)`` once the number of rows to run is known (after reading the inputs for
    Ray, as the local engine reads them: it may be called several times with the total so far).
    ``files``: the FilePolicy every worker's Session gets (None: permissive). ``timeout``:
    seconds one batch may take; past it the batch's file fails (a local worker that does not
    answer by then plus :data:`KILL_GRACE` is killed and replaced). ``max_bytes``: each
    worker's memory budget, loading included.
    """
    if timeout is not None and timeout <= 0:
        raise UsageError(f"--batch-timeout must be positive, not {timeout}")
    if engine not in ("local", "ray"):
        raise UsageError(f"--engine {engine}: local or ray")
    if address is not None and engine != "ray":
        raise UsageError("--address joins a Ray cluster: give --engine ray too")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    run = BatchRun(model, signature, fetches, inputs, out_dir, batch_size, input_key, files,
                   timeout, max_bytes)
    run.skip_finished()
    n = workers or max(1, min(os.cpu_count() or 1, 4))
    marker = os.environ.get(EXIT_ONCE_ENV) or None
    t0 = time.perf_counter()
    if engine == "local":
        _run_local(run, n, marker, progress, on_total)
    else:
        from .batch_ray import run_ray

        run_ray(run, n, address, marker, progress, on_total)
    for s in run.shards:   # an engine that ended with rows missing: the file failed
        if s.status == "running":
            run.fail(run.shards.index(s), "some rows never came back from the workers")
    return run.report(time.perf_counter() - t0)


# --- the local engine -----------------------------------------------------------------------

def _threads_per_worker(n: int) -> int:
    return max(1, (os.cpu_count() or 1) // n)


def _worker_main(conn: Any, model_kwargs: dict[str, Any], marker: str | None) -> None:
    """A local worker: load the model once, then run batches until told to stop (None)."""
    import signal

    # Ctrl-C reaches the whole process group: the driver stops the workers, which would
    # otherwise each print a KeyboardInterrupt traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # workers side by side: BLAS gets this worker's share of the cores, not every core
    # (as Ray sets OMP_NUM_THREADS for its workers); the user's DFG_BLAS_THREADS wins
    os.environ.setdefault("DFG_BLAS_THREADS", str(model_kwargs.get("threads") or 0))
    try:
        model = Model(**model_kwargs)
    except BaseException as e:   # the driver reports it; a traceback here would be noise
        conn.send(("init_error", str(e) if isinstance(e, DfgError) else
                   f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", f"pid-{os.getpid()}"))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        task_id, feeds = msg
        exit_once(marker)
        hang_once(os.environ.get(HANG_ONCE_ENV) or None)
        try:
            conn.send((task_id, "ok", model.run(feeds)))
        except DfgError as e:
            conn.send((task_id, "error", str(e)))
        except Exception as e:   # a kernel bug: fail the batch's file, keep the worker
            conn.send((task_id, "error", f"internal error: {type(e).__name__}: {e}"))


class _Worker:
    """One worker process and its pipe. ``task`` is the batch it is running (None: idle);
    ``ready`` turns true when it has loaded the model. Driver thread only."""

    def __init__(self, ctx: Any, model_kwargs: dict[str, Any], marker: str | None) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, model_kwargs, marker),
                                daemon=True)
        self.proc.start()
        child.close()
        self.task: Task | None = None
        self.sent = 0.0          # time.monotonic() when ``task`` was sent
        self.ready = False
        self.id = ""

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()


def _tasks_of(run: BatchRun, on_total: Callable[[int], None] | None) -> Iterator[Task]:
    """Shards read one at a time as workers need rows (memory: about one file)."""
    total = 0
    for i, s in enumerate(run.shards):
        if s.status != "pending":
            continue
        columns = run.load(i)
        if columns is None:
            continue
        total += s.rows
        if on_total is not None:
            on_total(total)
        yield from run.tasks(i, columns)


def _run_local(run: BatchRun, n: int, marker: str | None,
               progress: Callable[[int], None] | None,
               on_total: Callable[[int], None] | None) -> None:
    import multiprocessing as mp
    from multiprocessing.connection import wait

    # spawn: a fresh interpreter per worker (the driver may hold threads a fork would copy
    # mid-lock); each loads the model once
    ctx = mp.get_context("spawn")
    kwargs = dict(run.model_kwargs(), threads=_threads_per_worker(n))
    source = _tasks_of(run, on_total)
    retry: deque[Task] = deque()
    exhausted = False

    def next_task() -> Task | None:
        nonlocal exhausted
        while retry:
            t = retry.popleft()
            if run.shards[t.shard].status == "running":
                return t
        while not exhausted:
            t = next(source, None)
            if t is None:
                exhausted = True
            elif run.shards[t.shard].status == "running":
                return t
        return None

    pool: list[_Worker] = []
    restarts = 0
    try:
        first = next_task()
        if first is None:
            return               # every file skipped or unreadable: start no worker
        retry.append(first)
        pool = [_Worker(ctx, kwargs, marker) for _ in range(n)]
        while True:
            for w in pool:       # every idle worker that has loaded the model gets a batch
                if w.ready and w.task is None:
                    w.task = next_task()
                    if w.task is None:
                        break
                    w.sent = time.monotonic()
                    try:
                        w.conn.send((w.task.id, w.task.feeds))
                    except OSError:
                        pass     # it just died: its sentinel says so below
            if exhausted and not retry and all(w.task is None for w in pool):
                break
            ready = set(wait([w.conn for w in pool] + [w.proc.sentinel for w in pool],
                             timeout=_until_overdue(run, pool)))
            for w in _overdue(run, pool):   # hung past its deadline: stop it, fail its file
                t = w.task
                assert t is not None
                run.fail(t.shard, f"rows {t.start}-{t.stop - 1}: no result within the batch "
                         f"timeout of {run.timeout:g} s (the worker was stopped)")
                w.task = None
                w.proc.kill()
                w.proc.join()
                pool.remove(w)
                w.conn.close()
                ready.discard(w.conn)
                ready.discard(w.proc.sentinel)
                pool.append(_Worker(ctx, kwargs, marker))
            for w in list(pool):
                if w.conn in ready:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        msg = None   # the pipe closed: the process is gone (or going)
                    if msg is not None:
                        _handle(run, w, msg, progress)
                        continue
                elif w.proc.sentinel not in ready:
                    continue
                w.proc.join()
                pool.remove(w)
                w.conn.close()
                lost = w.task
                if lost is not None:     # its batch runs again elsewhere; never kept twice
                    lost.attempts += 1
                    if lost.attempts >= MAX_ATTEMPTS:
                        run.fail(lost.shard, f"rows {lost.start}-{lost.stop - 1}: the worker "
                                 f"running them died {lost.attempts} times (exit status "
                                 f"{w.proc.exitcode})")
                    else:
                        retry.appendleft(lost)
                if not w.ready:
                    raise DfgError(f"a batch worker exited while loading {run.model} (exit "
                                   f"status {w.proc.exitcode})")
                restarts += 1
                if restarts > n * MAX_ATTEMPTS + len(run.shards):
                    raise DfgError("batch workers keep dying: giving up")
                pool.append(_Worker(ctx, kwargs, marker))
    finally:
        for w in pool:
            w.stop()


def _until_overdue(run: BatchRun, pool: list[_Worker]) -> float | None:
    """Seconds until the first busy worker is overdue (None: no timeout, or none busy)."""
    if run.timeout is None:
        return None
    ends = [w.sent + run.timeout + KILL_GRACE for w in pool if w.task is not None]
    return max(0.0, min(ends) - time.monotonic()) if ends else None


def _overdue(run: BatchRun, pool: list[_Worker]) -> list[_Worker]:
    if run.timeout is None:
        return []
    now = time.monotonic()
    return [w for w in pool
            if w.task is not None and now >= w.sent + run.timeout + KILL_GRACE]


def _handle(run: BatchRun, w: _Worker, msg: tuple, progress: Callable[[int], None] | None
            ) -> None:
    if msg[0] == "ready":
        w.ready, w.id = True, msg[1]
        run.workers.setdefault(w.id, 0)
        return
    if msg[0] == "init_error":
        raise DfgError(f"a batch worker could not load {run.model}: {msg[1]}")
    task_id, status, payload = msg
    t, w.task = w.task, None
    if t is None or t.id != task_id:
        return                   # not the batch it was given: nothing to keep
    if status == "ok":
        if run.add(t.shard, t.start, payload, w.id) and progress is not None:
            progress(t.stop - t.start)
    else:
        run.fail(t.shard, f"rows {t.start}-{t.stop - 1}: {payload}")
