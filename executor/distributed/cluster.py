"""A graph partitioned by task, each partition run by its own Ray actor.

    from dfg.executor import Session
    with Session("ps_mlp.pbtxt", cluster="ray", threads=2) as sess:   # address=... joins
        sess.run([], targets=["init"])
        loss, = sess.run(["loss"], {"x": x, "y": y}, targets=["train"])

How it maps onto Ray (design doc, principle 18):

- **Partitions.** ``graphdef/partition.py`` splits the graph by the task of each node's
  ``device``, once per Session. Each task gets one threaded Ray actor (``_TaskActor``) that
  holds one ordinary dfg ``Session`` over its partition for the ClusterSession's life, so the
  variables placed on a task live there across steps and runs, as on a TensorFlow worker.
- **Steps.** The driver gives every step an id and sends each actor that has work in it its
  fetches, feeds and targets (TensorFlow's master does the same with RunGraph). Per signature
  it works out which ``_Send`` nodes must run: those whose ``_Recv`` some task needs (a
  fixpoint over the partitions, feeds cutting the walk); a fed tensor is fed on its own task
  and to its ``_Recv`` on every other task. The driver waits for all actors with the step's
  deadline.
- **Rendezvous.** A ``_Send`` on task A is an actor call ``B.deliver.remote(step, key, value,
  is_dead)`` (Ray carries the value; arrays go through its object store); ``_Recv`` on B waits
  on B's mailbox and completes asynchronously (executor/asyncop.py), so it holds no thread.
  The key is TensorFlow's ``send_device;incarnation;recv_device;tensor_name;frame:iteration``
  plus the step id: frames and iterations of a while loop that spans tasks stay apart, and a
  late value from an aborted step never meets a later step.
  Values are pushed when the Send runs (TensorFlow's receiver pulls them when its Recv
  runs): a ref variable read on another task (not through its colocated ``w/read``) and
  ordered after an update only by a control edge on the reading task may get the value from
  before the update.
- **Faults.** An error on one task aborts the step on every task (their Recvs stop waiting).
  An actor that dies during a step fails it with ``UnavailableError`` naming the task; the next
  run replaces the actor (its variables must be initialised again, which the error says).
  A deadline or ``cancel()`` aborts the step on every task.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    CancelledError,
    DeadlineExceededError,
    DfgError,
    InvalidGraphError,
    UnavailableError,
    UsageError,
)
from dfg.graphdef.graph import Graph, parse_tensor_name
from dfg.graphdef.partition import RECV_OPS, Partitioning, Task, partition

from . import prepare_local_ray

CLUSTERS = ("ray",)
# How long an aborted step's remaining actor calls get to return before the next step may
# start (they only need to notice the abort); longer is a stuck actor, reported as such.
_ABORT_GRACE = 30.0
# How often the driver looks up from waiting for a step's actors: cancel() and the deadline
# are noticed within this (the actors enforce the deadline themselves as well).
_POLL = 0.2


class Mailbox:
    """One task's end of the rendezvous: values that arrived before their Recv, and Recvs
    waiting for their value, by (step id, key). ``_lock`` guards every field; callbacks run
    outside it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[int, dict[str, tuple[Any, bool]]] = {}
        self._waiters: dict[int, dict[str, Callable]] = {}
        self._closed: dict[int, BaseException | None] = {}   # ended or aborted steps
        self._closed_order: deque = deque()

    def put(self, step: int, key: str, value: Any, is_dead: bool) -> None:
        with self._lock:
            if step in self._closed:
                return          # a late value of an ended or aborted step
            cb = self._waiters.get(step, {}).pop(key, None)
            if cb is None:
                self._values.setdefault(step, {})[key] = (value, is_dead)
                return
        cb(value, is_dead, None)

    def get(self, step: int, key: str, cb: Callable) -> None:
        with self._lock:
            if step in self._closed:
                err = self._closed[step] or CancelledError("the step has ended")
            else:
                got = self._values.get(step, {}).pop(key, None)
                if got is None:
                    self._waiters.setdefault(step, {})[key] = cb
                    return
                err = None
        if err is not None:
            cb(None, False, err)
        else:
            cb(got[0], got[1], None)

    def close(self, step: int, error: BaseException | None = None) -> None:
        """End a step (``error``: abort it): waiting Recvs get ``error``, values are dropped."""
        with self._lock:
            if step not in self._closed:
                self._closed[step] = error
                self._closed_order.append(step)
                while len(self._closed_order) > 1024:
                    self._closed.pop(self._closed_order.popleft(), None)
            elif error is not None and self._closed[step] is None:
                self._closed[step] = error
            self._values.pop(step, None)
            waiters = self._waiters.pop(step, {})
        err = error or CancelledError("the step has ended")
        for cb in waiters.values():
            cb(None, False, err)


class _StepRendezvous:
    """What one task's step gives its Send/Recv kernels (kernels/sendrecv.py), and the
    step's cancellation: Session.run attaches the step's control once it is registered, so
    an abort that arrives while the step is still being planned is not lost."""

    __slots__ = ("actor", "step")

    def __init__(self, actor: _TaskActor, step: int) -> None:
        self.actor, self.step = actor, step

    def send(self, key: str, dst_device: str, value: Any, is_dead: bool) -> None:
        self.actor.route(self.step, key, dst_device, value, is_dead)

    def recv(self, key: str, cb: Callable) -> None:
        self.actor.mailbox.get(self.step, key, cb)

    def attach(self, control: Any) -> None:
        self.actor.attach(self.step, control)


class _TaskActor:
    """The body of one task's Ray actor (threaded: ``deliver`` and ``abort`` run while a
    step does). ``peers``: recv device -> actor handle, set by the driver."""

    def __init__(self, task: str, graph_def: bytes, threads: int | None,
                 options: dict[str, Any]) -> None:
        from dfg.executor.session import Session
        from dfg.schemas import graph_pb2

        gd = graph_pb2.GraphDef()
        gd.ParseFromString(graph_def)
        self.task = task
        self.session = Session(gd, threads=threads, **options)
        self.mailbox = Mailbox()
        self.peers: dict[str, Any] = {}
        self.device = task + "/device:CPU:0"
        self._count_lock = threading.Lock()
        # guarded by _count_lock: steps in run_step now -> their StepControl once Session.run
        # has registered it (None before), and aborts of those steps that came first
        self._steps: dict[int, Any] = {}
        self._aborted: dict[int, BaseException] = {}

    def ready(self) -> int:
        import os

        return os.getpid()

    def running(self) -> int:
        """How many steps this task is running now (tools and tests look)."""
        with self._count_lock:
            return len(self._steps)

    def set_peers(self, peers: dict[str, Any]) -> None:
        self.peers = dict(peers)

    def route(self, step: int, key: str, dst_device: str, value: Any, is_dead: bool) -> None:
        if dst_device == self.device:
            self.mailbox.put(step, key, value, is_dead)
            return
        peer = self.peers.get(dst_device)
        if peer is None:
            raise UnavailableError(f"no task for recv_device '{dst_device}'")
        # fire and forget: a lost delivery shows as the receiver's step failing
        peer.deliver.remote(step, key, value, is_dead)

    def deliver(self, step: int, key: str, value: Any, is_dead: bool) -> None:
        self.mailbox.put(step, key, value, is_dead)

    def run_step(self, step: int, fetches: list[str], feeds: dict[str, Any],
                 targets: list[str], timeout: float | None) -> list[Any]:
        with self._count_lock:
            self._steps[step] = None
        try:
            return self.session.run(fetches, feeds, targets, timeout=timeout,
                                    rendezvous=_StepRendezvous(self, step))
        finally:
            self.mailbox.close(step)
            with self._count_lock:
                self._steps.pop(step, None)
                self._aborted.pop(step, None)

    def attach(self, step: int, control: Any) -> None:
        """Session.run registered ``step``'s control: cancel it now if the step was aborted
        while it was being planned (Session.cancel reaches only registered steps)."""
        with self._count_lock:
            if step in self._steps:
                self._steps[step] = control
            err = self._aborted.get(step)
        if err is not None:
            control.cancel(err)

    def abort(self, step: int, message: str) -> None:
        err = CancelledError(message)
        self.mailbox.close(step, err)
        # only that step: an abort arriving late must not cancel the next one (the lock
        # keeps the step from ending in between; the driver starts no other step on this
        # task while it runs)
        with self._count_lock:
            if step not in self._steps:
                return
            self._aborted[step] = err
            control = self._steps[step]
        if control is not None:
            control.cancel(err)


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - the extra is in dev
        raise UsageError("--cluster ray needs Ray: pip install 'dfg[ray]'") from None
    return ray


class ClusterSession:
    """``Session(graph, cluster="ray", address=None)``: the Session API (``run``, ``cancel``,
    ``close``, a context manager) over one Ray actor per task of the graph.

    ``address``: a Ray cluster to join (``ray.init(address=...)``); None uses the Ray this
    process already joined, or starts a local one that stops with :meth:`close`.
    ``threads``: threads of each task's Session. ``default_task``: where nodes without a task
    run (graphdef/partition.py's rule when None). Other arguments are the Session's, given to
    every task's Session."""

    def __init__(self, graph: Any, threads: int | None = None, device: str = "CPU",
                 validate: bool = True, programs: str = "auto",
                 max_bytes: int | None = None, optimize: bool | str | None = None,
                 cluster: str = "ray", address: str | None = None,
                 default_task: str | None = None, files: Any = None,
                 plan_cache_dir: str | None = None) -> None:
        from dfg.graphdef.io import load_graph

        if cluster not in CLUSTERS:
            raise UsageError(f"cluster must be one of {', '.join(CLUSTERS)}, not {cluster!r}")
        self.graph: Graph = load_graph(graph)
        if validate:
            from dfg.executor.session import _reject_invalid

            _reject_invalid(self.graph)
        self.partitioning: Partitioning = partition(self.graph, default_task)
        self._parts = {t: Graph(gd) for t, gd in self.partitioning.graphs.items()}
        self._recv_of = {(tr.recv_task, tr.recv): tr for tr in self.partitioning.transfers}
        self._options = dict(device=device, validate=validate, programs=programs,
                             max_bytes=max_bytes, optimize=optimize, files=files,
                             # each task's Session keeps its optimized partition there too
                             # (a directory every worker can reach: this machine's, by default)
                             plan_cache_dir=None if plan_cache_dir is None
                             else str(plan_cache_dir))
        self.threads = threads
        self._lock = threading.Lock()      # one step at a time; guards the fields below
        self._signatures: dict[tuple, dict[Task, tuple]] = {}
        self._step_ids = itertools.count(1)
        self._cancel: BaseException | None = None   # set by cancel() for the running step
        self._closed = False
        self._dead: dict[Task, str] = {}   # tasks whose actor died -> why, until replaced
        ray = _ray()
        self._owns_ray = False
        if not ray.is_initialized():
            if address is None:
                prepare_local_ray()
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            self._owns_ray = address is None
        self._actors: dict[Task, Any] = {}
        try:
            for t in self.partitioning.tasks:
                self._actors[t] = self._start(t)
            self._connect()
        except BaseException:
            self.close()
            raise

    # --- actors ----------------------------------------------------------------------------
    def _start(self, task: Task) -> Any:
        ray = _ray()
        cls = ray.remote(_TaskActor)
        # threaded: deliver/abort run beside run_step; num_cpus=0: an actor mostly waits
        return cls.options(max_concurrency=32, num_cpus=0, max_restarts=0).remote(
            task.name, self.partitioning.graphs[task].SerializeToString(), self.threads,
            self._options)

    def _connect(self) -> None:
        """Wait for every actor to be up (its partition loaded) and tell each of the others."""
        ray = _ray()
        tasks = list(self._actors)
        try:
            ray.get([self._actors[t].ready.remote() for t in tasks])
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, DfgError) else None
            raise (cause or InvalidGraphError(
                f"a task could not load its partition: {e}")) from None
        peers = {t.device: a for t, a in self._actors.items()}
        ray.get([a.set_peers.remote(peers) for a in self._actors.values()])

    def _revive(self) -> None:
        """Replace the actors that died (a new actor starts with fresh variables)."""
        ray = _ray()
        for t in list(self._dead):
            try:
                ray.kill(self._actors[t])
            except Exception:  # noqa: BLE001 - it is dead already
                pass
            self._actors[t] = self._start(t)
        self._dead.clear()
        self._connect()

    def actor(self, task: str | Task) -> Any:
        """The Ray actor running ``task`` (for tools and tests: e.g. ``ray.kill`` it)."""
        from dfg.graphdef.partition import parse_task

        t = task if isinstance(task, Task) else parse_task(task)
        return self._actors[t]

    # --- signatures ------------------------------------------------------------------------
    def _signature(self, fetches: list[tuple[str, int]], feeds: list[tuple[str, int]],
                   targets: list[str]) -> dict[Task, tuple]:
        """Task -> (fetch indices, fetch names, feed map (name -> global feed name),
        targets) for every task with work in the step."""
        from dfg.graphdef.prune import dependencies, resolve_target, resolve_tensor

        key = (tuple(fetches), tuple(sorted(feeds)), tuple(targets))
        sig = self._signatures.get(key)
        if sig is not None:
            return sig
        place = self.partitioning.placement
        fetches = [resolve_tensor(self.graph, f, "fetch") for f in fetches]
        feeds = [resolve_tensor(self.graph, f, "feed") for f in feeds]
        targets = [resolve_target(self.graph, t) for t in targets]
        fetch_of: dict[Task, list[int]] = {}
        for i, (n, _s) in enumerate(fetches):
            fetch_of.setdefault(place[n], []).append(i)
        target_of: dict[Task, list[str]] = {}
        for t in targets:
            target_of.setdefault(place[t], []).append(t)
        feed_of: dict[Task, dict[str, str]] = {}
        for n, s in feeds:
            name = f"{n}:{s}"
            feed_of.setdefault(place[n], {})[name] = name
            for task, recv in self.partitioning.recvs_of(name).items():
                feed_of.setdefault(task, {})[f"{recv}:0"] = name
        sends: dict[Task, set[str]] = {}
        changed = True
        needed: dict[Task, set[str]] = {}
        while changed:     # a Recv some task needs makes its Send needed on the other task
            changed = False
            for task, g in self._parts.items():
                roots = [fetches[i] for i in fetch_of.get(task, [])]
                tg = target_of.get(task, []) + sorted(sends.get(task, ()))
                fed = list(feed_of.get(task, {}))
                nodes = dependencies(g, roots, feeds=fed, targets=tg)
                if nodes == needed.get(task):
                    continue
                needed[task] = nodes
                for name in nodes:
                    tr = self._recv_of.get((task, name))
                    if tr is not None and g.node(name).op in RECV_OPS \
                            and tr.send not in sends.get(tr.send_task, ()):
                        sends.setdefault(tr.send_task, set()).add(tr.send)
                        changed = True
        sig = {}
        for task in self._parts:
            idx = fetch_of.get(task, [])
            tg = target_of.get(task, []) + sorted(sends.get(task, ()))
            if idx or tg:
                sig[task] = (idx, [f"{fetches[i][0]}:{fetches[i][1]}" for i in idx],
                             feed_of.get(task, {}), tg)
        self._signatures[key] = sig
        return sig

    # --- running ---------------------------------------------------------------------------
    def run(self, fetches: Any, feed_dict: dict | None = None, targets: Any = None,
            timeout: float | None = None) -> Any:
        """One step over every task, as ``Session.run``."""
        single = isinstance(fetches, str)
        fetch_list = [fetches] if single else list(fetches or [])
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        fetch_keys = [parse_tensor_name(f) for f in fetch_list]
        feeds = {f"{n}:{s}": v for (n, s), v in
                 ((parse_tensor_name(k), v) for k, v in (feed_dict or {}).items())}
        if len(feeds) != len(feed_dict or {}):
            raise UsageError("the same tensor is fed twice")
        with self._lock:
            if self._closed:
                raise CancelledError("the session is closed")
            if self._dead:
                self._revive()
            sig = self._signature(fetch_keys, [parse_tensor_name(k) for k in feeds],
                                  targets)
            self._cancel = None
            out = self._step(sig, feeds, len(fetch_keys), timeout)
        return out[0] if single else out

    def _step(self, sig: dict[Task, tuple], feeds: dict[str, Any], n_fetches: int,
              timeout: float | None) -> list[Any]:
        ray = _ray()
        step = next(self._step_ids)
        deadline = None if timeout is None else time.monotonic() + timeout
        calls: dict[Any, Task] = {}
        for task, (_idx, names, feed_map, tg) in sig.items():
            fd = {local: np.asarray(feeds[name]) if not isinstance(feeds[name], np.ndarray)
                  else feeds[name] for local, name in feed_map.items()}
            ref = self._actors[task].run_step.remote(step, names, fd, tg, timeout)
            calls[ref] = task
        values: list[Any] = [None] * n_fetches
        pending = list(calls)
        try:
            while pending:
                wait = _POLL if deadline is None else max(0.0, min(
                    _POLL, deadline - time.monotonic()))
                ready, pending = ray.wait(pending, num_returns=1, timeout=wait)
                for ref in ready:
                    task = calls[ref]
                    got = self._get(ref, task)
                    for i, v in zip(sig[task][0], got):
                        values[i] = v
                if self._cancel is not None:
                    raise self._cancel
                if pending and deadline is not None and time.monotonic() >= deadline:
                    raise DeadlineExceededError(
                        f"the step did not finish within its {timeout:g} s deadline")
        except BaseException as e:
            self._abort(step, pending, calls, f"the step was aborted: {e}")
            raise
        return values

    def _get(self, ref: Any, task: Task) -> list[Any]:
        """One task's results; its failure as dfg's error (an actor death names the task)."""
        ray = _ray()
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as e:
            if isinstance(e.cause, BaseException):
                raise e.cause from None
            raise
        except ray.exceptions.RayActorError as e:
            why = getattr(e, "error_msg", None) or str(e).splitlines()[0]
            self._dead[task] = why
            raise UnavailableError(
                f"task {task} died during the step ({why.strip()[:200]}); the next run "
                "starts it again, and the variables it holds need initialising again "
                "(run their initializer)") from None

    def _abort(self, step: int, pending: list[Any], calls: dict[Any, Task],
               message: str) -> None:
        """Abort ``step`` on every task and wait (bounded) for their calls to return, so the
        next step does not overlap this one on an actor's Session."""
        ray = _ray()
        for task, a in self._actors.items():
            if task not in self._dead:
                a.abort.remote(step, message)
        if pending:
            done, rest = ray.wait(pending, num_returns=len(pending), timeout=_ABORT_GRACE)
            for ref in done:
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    self._dead[calls[ref]] = str(e).splitlines()[0]
                except Exception:  # noqa: BLE001 - the step's first error is reported
                    pass
            for ref in rest:   # stuck past the grace: start that task afresh next run
                self._dead[calls[ref]] = "did not stop after the step was aborted"

    def cancel(self, error: BaseException | None = None) -> None:
        """Cancel the step in flight on every task (it raises ``error``, by default
        CancelledError); the session stays usable."""
        self._cancel = error or CancelledError("the step was cancelled")

    def close(self) -> None:
        """Cancel a step in flight, stop the actors, and the local Ray this session
        started."""
        if self._closed:
            return
        self._closed = True
        self.cancel(CancelledError("the session was closed during the step"))
        ray = _ray()
        with self._lock:
            for a in self._actors.values():
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            self._actors.clear()
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()

    def __enter__(self) -> ClusterSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
