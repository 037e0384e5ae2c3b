"""``Session``: run a graph's fetches, with state (variables) kept across runs.

    from dfg.graphdef import load_graph
    from dfg.executor import Session
    sess = Session(load_graph("model.pbtxt"), threads=None)   # None: one thread per core
    y, = sess.run(["y:0"], feed_dict={"x:0": x})
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    CancelledError,
    DfgError,
    InvalidArgumentError,
    InvalidGraphError,
    UsageError,
)
from dfg.graphdef.graph import Graph, parse_tensor_name
from dfg.graphdef.tensors import format_shape

from . import blas, malloc, plan_cache
from .executor import Step, WorkerPool
from .kernels.fused import sweep_ops
from .plan import Plan, build_plan
from .program_compile import add_programs
from .resources import ResourceManager


def _reject_invalid(graph: Graph) -> None:
    """Refuse a graph that validation finds errors in (TensorFlow refuses it at import or at
    its first run); warnings (e.g. attrs from a newer TensorFlow) are fine."""
    from dfg.graphdef.validate import validate

    errors = [d for d in validate(graph) if d.is_error]
    if errors:
        first = errors[0]
        # unknown ops are named all at once (a DeePMD graph's three custom ops, say): the
        # user's next step is to find kernels for every one of them
        unknown: dict[str, str] = {}
        for d in errors:
            if d.code == "unknown-op" and d.op is not None:
                unknown.setdefault(d.op, d.node)
        if len(unknown) > 1:
            rest = sum(1 for d in errors if d.code != "unknown-op")
            more = f" (and {rest} other error(s); see `dfg validate`)" if rest else ""
            listed = ", ".join(f"{op} (node '{node}')" for op, node in unknown.items())
            raise InvalidGraphError(f"invalid graph: [unknown-op] {len(unknown)} op types are "
                                    f"not registered: {listed}{more}", node=first.node,
                                    op=first.op)
        more = f" (and {len(errors) - 1} more; see `dfg validate`)" if len(errors) > 1 else ""
        raise InvalidGraphError(f"invalid graph: [{first.code}] {first.message}{more}",
                                node=first.node, op=first.op)


def _same_step(graph: Graph, optimized: Graph, plan: Plan) -> bool:
    """Whether ``optimized`` would give ``plan`` (built from ``graph``) again: the optimizer
    only pruned, every node it kept is as it was, and the plan runs only kept nodes."""
    if optimized is graph:
        return True
    nodes = optimized.graph_def.node
    if len(nodes) < len(plan.items):
        return False
    for nd in nodes:
        was = graph.get(nd.name)
        if was is None or was.proto != nd:
            return False
    return all(it.name in optimized for it in plan.items)


def _tensor_key(name: str) -> tuple[str, int]:
    if not isinstance(name, str):
        raise UsageError(f"tensor names must be strings, found {type(name).__name__}")
    return parse_tensor_name(name)


def default_max_bytes() -> int:
    """The default per-allocation memory budget: half the machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


OPTIMIZE_MODES = ("auto", "eager", "lazy", "off")


def optimize_mode(value: bool | str | None = None) -> str:
    """The run-time optimization mode for a Session's ``optimize`` argument: ``None`` reads
    ``DFG_OPTIMIZE`` (unset: ``auto``); ``True``/``1``/``on`` mean ``auto``,
    ``False``/``0``/``off``/``no`` mean ``off``; else one of :data:`OPTIMIZE_MODES`."""
    source = "optimize"
    if value is None:
        value, source = os.environ.get("DFG_OPTIMIZE", "auto"), "DFG_OPTIMIZE"
    if value is True:
        return "auto"
    if value is False:
        return "off"
    v = str(value).strip().lower()
    if v in ("0", "off", "false", "no"):
        return "off"
    if v in ("", "1", "on", "true", "yes", "auto"):
        return "auto"
    if v in OPTIMIZE_MODES:
        return v
    raise UsageError(f"{source} must be one of {', '.join(OPTIMIZE_MODES)} (or 0/1), "
                     f"not {value!r}")


class Session:
    """Runs steps of one graph. Thread-safe: ``run`` may be called from several threads.

    ``max_bytes``: the memory budget a kernel's output may not exceed (checked before it
    allocates, for ops whose outputs can outgrow their inputs: executor/limits.py); None
    means half the physical memory, 0 no limit.

    ``optimize``: as TensorFlow's Session runs Grappler for every new signature, each plan's
    subgraph is optimized for its fetches, feeds and targets
    (``passes.pipeline.optimize_for_signature``: pruning, folding of what is not fed,
    fusions such as Conv2D+BiasAdd+Relu, stateful nodes kept in order); the report is
    ``plan.optimized``. When (:data:`OPTIMIZE_MODES`):

    - ``"eager"``: before the signature's first run, as Grappler does;
    - ``"lazy"``: when the signature runs a second time; its first run uses the graph as
      written (pruned to the step). A one-shot step does not pay for an optimization that
      cannot pay back: in a step without loops every node runs once, so folding a node costs
      as much as running it, and the optimizer's Python work per node is many times a small
      kernel's (ResNet-style bench: 18 ms of optimizing against a 1.7 ms step). As XLA's
      lazy compilation, the first run's results may differ from later ones in the last
      bits (a folded batch norm rounds differently), never beyond TensorFlow's tolerance;
    - ``"auto"`` (``True``, the default): lazy. Loops included: a step's iterations repeat
      the work optimizing removes, but rarely enough of them to pay for it within the step
      (first step, eager -> lazy: bench_while_10k 3.5 -> 2.1 ms, warm 1.3; nested while
      9.2 -> 5.9, warm 4.1; an LSTM classifier 22.6 -> 10.0, warm 1.0; TF2 scan 17.0 ->
      4.9, warm 0.16). A single long step of a loop whose body optimizing speeds up (an
      LSTM's runs 1.6x faster optimized) is the case for ``"eager"``;
    - ``"off"`` (``False``, or ``validate=False``): the graph as written, always.

    ``None`` reads ``DFG_OPTIMIZE`` (0/off, 1/auto, eager or lazy; unset: auto), which is
    how CI runs the whole suite once per mode.

    ``files``: a :class:`dfg.graphdef.files.FilePolicy`, what the graph's file-touching ops
    (SaveV2, RestoreV2, MergeV2Checkpoints, table initializers from text files: the kernels
    registered with ``files=``) may read and write; they fail with PermissionDeniedError
    outside it. None (the default for library users) allows everything, as TensorFlow
    does; give ``FilePolicy(read=[...])`` to run a graph you did not write.

    Optimized graphs are kept across Sessions (executor/plan_cache.py): a signature of a
    graph with the same bytes optimized before, by any Session of this process, runs
    optimized from its first step, in every mode but ``"off"``, and with the same device,
    threads and ``programs`` runs the plan that Session built (plan_cache.Entry.plans).
    ``plan_cache_dir`` (else ``DFG_PLAN_CACHE``): a directory that also keeps optimized
    graphs across processes (opt in)."""

    def __new__(cls, *args: Any, cluster: str | None = None, **kw: Any) -> Any:
        # ``cluster="ray"`` (and ``address``, ``default_task``): the graph partitioned by
        # task, one Ray actor per task, the same API (executor/distributed/cluster.py)
        if cluster is not None and cls is Session:
            from .distributed.cluster import ClusterSession

            return ClusterSession(*args, cluster=cluster, **kw)
        return super().__new__(cls)

    def __init__(self, graph: Any, threads: int | None = None, device: str = "CPU",
                 validate: bool = True, programs: str = "auto",
                 max_bytes: int | None = None, optimize: bool | str | None = None,
                 cluster: None = None, files: Any = None,
                 plan_cache_dir: str | os.PathLike[str] | None = None) -> None:
        from dfg.graphdef.io import load_graph

        self.graph: Graph = load_graph(graph)
        if validate:
            _reject_invalid(self.graph)
        # TF2 graphs: calls inlined and If/Case/While lowered to v1 frames, once, so the
        # executor runs one dataflow model (graphdef/lowering.py says why)
        from dfg.graphdef.lowering import lower_functional, needs_lowering

        if needs_lowering(self.graph.graph_def):
            self.graph = Graph(lower_functional(self.graph.graph_def))
        # XLA reducers and the like apply a library function inside their kernel: hand it
        # to them (graphdef/functions.py, attach_bodies)
        from dfg.graphdef.functions import attach_bodies, needs_bodies

        if needs_bodies(self.graph.graph_def):
            self.graph = Graph(attach_bodies(self.graph.graph_def))
        self.threads = max(1, threads if threads is not None else (os.cpu_count() or 1))
        self.device = device
        if programs not in ("auto", "always", "never"):
            raise UsageError(f"programs must be auto, always or never, not {programs!r}")
        # "auto": a step without control flow, or a while-loop nest (programs.py), whose
        # kernels are all measured cheap runs as one sequential program (executor/programs.py)
        # instead of node by node
        self.programs = programs
        self.max_bytes = default_max_bytes() if max_bytes is None else (max_bytes or None)
        from dfg.graphdef.files import PERMISSIVE, FilePolicy

        if files is not None and not isinstance(files, FilePolicy):
            raise UsageError(f"files must be a FilePolicy or None, not {type(files).__name__}")
        self.files = files if files is not None else PERMISSIVE
        # variables live here across runs; kernels find the file policy here (ctx.resources)
        self.resources = ResourceManager(self.files)
        self._lock = threading.Lock()        # guards _plans, _frames, _active and _closed
        self._active: set = set()            # StepControls of runs in flight
        self._closed = False
        self._plans: dict[tuple, Plan] = {}
        # the plan cache's view of self.graph: its outline now, its SHA-256 when first needed
        self._outline = plan_cache.cheap_key(self.graph.graph_def)
        self._digest: str | None = None
        self._disk_cache = plan_cache.disk_dir(plan_cache_dir)
        self._frames = None
        # only a graph validation accepted is rewritten: an unvalidated one runs as written
        mode = optimize_mode(optimize) if validate else "off"
        if mode == "auto":
            mode = "lazy"
        self.optimize_mode = mode
        self.optimize = mode != "off"
        # the calling thread schedules and runs cheap kernels; the pool the expensive ones
        self._pool = WorkerPool(self.threads - 1) if self.threads > 1 else None
        blas.configure(self.threads)   # BLAS threads vs the executor's (executor/blas.py)
        malloc.tune()                  # freed outputs' memory reused, not faulted in again

    # --- plans ----------------------------------------------------------------------------
    def _plan(self, fetches: list[str], feeds: list[str], targets: list[str]) -> Plan:
        """The cached plan of a signature, built on its first use; a deferred (lazy) plan
        that has run is replaced by the optimized one."""
        key = (tuple(fetches), tuple(sorted(feeds)), tuple(targets))
        plan = self._plans.get(key)
        if plan is None or plan.ran and plan.deferred:
            with self._lock:
                plan = self._plans.get(key)
                if plan is None or plan.ran and plan.deferred:
                    plan = self._build_plan(fetches, feeds, targets, plan)
                    self._plans[key] = plan
        return plan

    def _build_plan(self, fetches: list[str], feeds: list[str], targets: list[str],
                    deferred: Plan | None = None) -> Plan:
        """The plan of a signature; ``deferred``: its unoptimized plan, whose optimization
        is due now (kept, with its measured costs and compiled programs, when optimizing
        leaves the graph as it is)."""
        from dfg.graphdef.graph import gc_paused
        from dfg.graphdef.tensors import materialize_limit

        # Consts decoded while optimizing and binding obey the step's memory budget. The
        # cycle collector waits until the plan is built: its objects all stay alive, and
        # each collection on the way scanned them again (NASNetMobile's plan: a quarter of
        # its build; the passes pause it too, and resumed it after each one)
        with materialize_limit(self.max_bytes), gc_paused():
            return self._build_plan_within_budget(fetches, feeds, targets, deferred)

    def _build_plan_within_budget(self, fetches: list[str], feeds: list[str],
                                  targets: list[str], deferred: Plan | None) -> Plan:
        from dfg.graphdef.frames import analyze_frames

        graph, frames, report = self.graph, None, None
        optimize = self.optimize and bool(fetches or targets)  # an empty step: nothing to do
        # a signature optimized before (this graph's bytes, by any Session): nothing to defer
        hit = self._cached(fetches, feeds, targets) if optimize else None
        slot = plan_cache.plan_slot(self.device, self.threads, self.programs)
        if hit is not None:
            # and its plan, built and warmed by another Session (plan_cache.Entry.plans)
            shared = plan_cache.CACHE.plan(self._cache_key(fetches, feeds, targets), slot)
            if shared is not None:
                return shared
        defer = optimize and hit is None and deferred is None \
            and self.optimize_mode == "lazy"   # auto is lazy too (the docstring says why)
        if optimize and not defer:
            graph, report = hit if hit is not None else self._optimized(fetches, feeds, targets)
            if deferred is not None and _same_step(self.graph, graph, deferred):
                deferred.stats.optimized, deferred.stats.deferred = report, False
                self._share(fetches, feeds, targets, slot, deferred, graph)
                return deferred
            if graph is not self.graph:
                frames = analyze_frames(graph)
        if frames is None:
            if self._frames is None:
                self._frames = analyze_frames(self.graph)
            frames = self._frames
        plan = add_programs(build_plan(graph, frames, fetches, feeds, targets, self.device,
                                       self.max_bytes))
        plan.stats.optimized = report
        plan.stats.deferred = defer
        if optimize and not defer:
            self._share(fetches, feeds, targets, slot, plan, graph)
        return plan

    def _share(self, fetches: list[str], feeds: list[str], targets: list[str], slot: tuple,
               plan: Plan, graph: Graph) -> None:
        """Keep an optimized signature's plan with its plan-cache entry (if it has one: an
        optimizer that failed left none) for the next Session of the same bytes."""
        if self._digest is None:
            return     # the signature was never looked up nor remembered: no entry
        # what the plan holds of its own, about: its constants and their packed forms
        nbytes = graph.graph_def.ByteSize()
        plan_cache.CACHE.add_plan(self._cache_key(fetches, feeds, targets), slot, plan, nbytes)

    def _optimized(self, fetches: list[str], feeds: list[str], targets: list[str]
                   ) -> tuple[Graph, Any]:
        """The graph optimized for one signature, or the graph itself when optimizing fails
        (the failure is the report's note: running the graph as written is always right)."""
        from dfg.graphdef.passes.pipeline import optimize_for_signature

        try:
            # dead_branches is left to `dfg optimize`: removing an untaken branch can orphan
            # a loop whose stateful nodes must still run (tests/test_random_graphs.py)
            # elementwise chains inside loops (passes/fuse_elementwise.py says why); on
            # scalars a chain runs as its members' scalar forms composed, so a loop of
            # scalar arithmetic keeps its inline expressions. Outside loops only chains the
            # compiled sweep computes whole (a DenseNet's batch norm and ReLU: one pass and
            # one call for three)
            res = optimize_for_signature(self.graph, fetches, feeds, targets,
                                         elementwise="loops", sweep_ops=sweep_ops(),
                                         skip=["dead_branches"])
        except DfgError:
            raise                       # unknown fetch/feed names: the user's error
        except Exception as e:  # noqa: BLE001 - an optimizer bug must not stop a run
            return self.graph, {"error": f"{type(e).__name__}: {e}"}
        if res.graph_def is self.graph.graph_def:
            self._remember(fetches, feeds, targets, None, res)
            return self.graph, res
        graph = res.graph if res.graph is not None and res.graph.graph_def is res.graph_def \
            else Graph(res.graph_def)
        self._remember(fetches, feeds, targets, graph, res)
        return graph, res

    # --- optimized graphs across Sessions (executor/plan_cache.py) ------------------------
    def _cache_key(self, fetches: list[str], feeds: list[str], targets: list[str]) -> tuple:
        if self._digest is None:   # once per Session: hashing the graph costs a serialization
            self._digest = plan_cache.graph_digest(self.graph.graph_def)
        # what shapes the optimizer's result besides the graph and the signature
        options = (tuple(sorted(sweep_ops())), self.max_bytes)
        return plan_cache.signature_key(self._outline, self._digest, fetches, feeds, targets,
                                        options)

    def _cached(self, fetches: list[str], feeds: list[str], targets: list[str]
                ) -> tuple[Graph, Any] | None:
        """The optimized graph and report of a signature from the plan cache, or None."""
        if self._disk_cache is None and not plan_cache.CACHE.may_hold(self._outline):
            return None        # no entry of a graph with this outline: no need to hash
        key = self._cache_key(fetches, feeds, targets)
        entry = plan_cache.CACHE.get(key)
        if entry is None and self._disk_cache is not None:
            found = plan_cache.load(self._disk_cache, key)
            if found is None:
                return None
            from dfg.graphdef.passes.pipeline import PipelineResult

            same = found is plan_cache.UNCHANGED
            report = PipelineResult(self.graph.graph_def if same else found, [])
            report.notes.append(f"read from the plan cache in {self._disk_cache}")
            entry = plan_cache.Entry.of(None if same else Graph(found), report)
            plan_cache.CACHE.put(key, entry)
        if entry is None:
            return None
        return (self.graph if entry.graph is None else entry.graph), entry.report

    def _remember(self, fetches: list[str], feeds: list[str], targets: list[str],
                  graph: Graph | None, report: Any) -> None:
        key = self._cache_key(fetches, feeds, targets)
        plan_cache.CACHE.put(key, plan_cache.Entry.of(graph, report))
        if self._disk_cache is not None:
            plan_cache.store(self._disk_cache, key, None if graph is None else graph.graph_def)

    def plan(self, fetches: list[str], feed_names: list[str] = (), targets: list[str] = ()
             ) -> Plan:
        """Build (or fetch from the cache) the plan of a step without running it: the plan
        its next run would use."""
        fetches = [f"{n}:{s}" for n, s in map(_tensor_key, fetches)]
        feeds = [f"{n}:{s}" for n, s in map(_tensor_key, feed_names)]
        return self._plan(fetches, feeds, list(targets))

    # --- running --------------------------------------------------------------------------
    def run(self, fetches: Any, feed_dict: dict | None = None, targets: Any = None,
            timeout: float | None = None, trace: Any = None, rendezvous: Any = None) -> Any:
        """Run one step. ``fetches``: a tensor name or a list of them (``"y"`` means
        ``y:0``); returns one array or a list in fetch order. ``feed_dict`` maps tensor names to
        values (any tensor may be fed); ``targets`` are node names run for their effects.
        ``trace``: a ``dfg.executor.trace.Tracer`` that records this step's kernel runs.
        ``rendezvous``: where this step's ``_Send``/``_Recv`` meet their other ends (a
        partitioned run: executor/distributed/cluster.py; kernels/sendrecv.py)."""
        single = isinstance(fetches, str)
        fetch_list = [fetches] if single else list(fetches or [])
        if isinstance(targets, str):
            targets = [targets]
        targets = list(targets or [])
        fetch_keys = [_tensor_key(f) for f in fetch_list]
        feed_items = [(_tensor_key(k), v) for k, v in (feed_dict or {}).items()]
        fetch_names = [f"{n}:{s}" for n, s in fetch_keys]
        feed_names = [f"{n}:{s}" for (n, s), _v in feed_items]
        if len(set(feed_names)) != len(feed_names):
            raise UsageError("the same tensor is fed twice")
        plan = self._plan(fetch_names, feed_names, targets)
        values = {key: self._convert_feed(plan, key, v) for key, v in feed_items}
        step = Step(plan, self.resources, self._pool, timeout, self.programs, trace,
                    self.max_bytes)
        if rendezvous is not None:
            from .kernels.sendrecv import RENDEZVOUS_KEY

            step.step_state[RENDEZVOUS_KEY] = rendezvous
        plan.stats.ran = True
        with self._lock:
            if self._closed:
                raise CancelledError("the session is closed")
            self._active.add(step.control)
        if rendezvous is not None and hasattr(rendezvous, "attach"):
            rendezvous.attach(step.control)   # its cancellation reaches this step from now
        try:
            out = step.run(values)
        except DfgError as e:
            self._name_function(e)
            raise
        finally:
            with self._lock:
                self._active.discard(step.control)
        refs = self.resources.ref_buffers() if plan.reads_ref_variables else ()
        for i, v in enumerate(out):
            # the caller gets arrays of its own, as TensorFlow's fetches are: a Const's value
            # is a read-only view of the graph's bytes (tensors.to_numpy), and a ref
            # variable's buffer changes in place (resources.VariableRef.store)
            if type(v) is np.ndarray and (not v.flags.writeable or id(v) in refs):
                out[i] = v.copy()
        for i, key in plan.fetched_feeds.items():
            out[i] = values[key]
        return out[0] if single else list(out)

    def _name_function(self, e: DfgError) -> None:
        """An error in a node inlined from a function names the function and its node."""
        from dfg.graphdef.lowering import FUNCTION_ATTR, NODE_ATTR

        node = self.graph.get(e.node) if e.node and e.function is None else None
        if node is not None and FUNCTION_ATTR in node.attr:
            e.in_function(node.attr[FUNCTION_ATTR].s.decode(errors="replace"),
                          node.attr[NODE_ATTR].s.decode(errors="replace"))

    @staticmethod
    def _convert_feed(plan: Plan, key: tuple[str, int], value: Any) -> np.ndarray:
        dt = plan.feed_dtypes.get(key, D.DT_INVALID)
        name = f"{key[0]}:{key[1]}"
        if dt == D.DT_INVALID or not D.is_numpy_compatible(dt):
            arr = np.asarray(value)
        elif D.base(dt) == D.DT_STRING:
            arr = np.asarray(value, dtype=object)
            arr = np.vectorize(lambda s: s if isinstance(s, bytes) else str(s).encode(),
                               otypes=[object])(arr) if arr.size else arr
        else:
            want = D.to_numpy(dt)
            src = np.asarray(value)
            if src.dtype != want and src.dtype.kind in "fc" and want.kind in "iub":
                raise InvalidArgumentError(
                    f"cannot feed {src.dtype} values to '{name}', which is {D.name(dt)}")
            if want.kind in "iu" and src.dtype.kind in "iuO" and src.size:
                info = np.iinfo(want)
                lo, hi = (int(src.min()), int(src.max())) if src.dtype.kind != "O" else (
                    min(map(int, src.flat)), max(map(int, src.flat)))
                if lo < info.min or hi > info.max:
                    raise InvalidArgumentError(
                        f"cannot feed '{name}': {lo if lo < info.min else hi} is out of range "
                        f"for {D.name(dt)} ({info.min}..{info.max})")
            try:
                arr = np.asarray(value, dtype=want)
            except (ValueError, TypeError, OverflowError) as e:
                raise InvalidArgumentError(
                    f"cannot feed '{name}' ({D.name(dt)}): {e}") from None
            if arr.dtype is not want:   # an equal descriptor (unpickled, "<f4"): NumPy's own
                arr = arr.view(want)
            if D.base(dt) == D.DT_BFLOAT16:   # held as float32 of bfloat16 values
                arr = D.round_bfloat16(arr)
        shape = plan.feed_shapes.get(key)
        if shape is not None and (arr.ndim != len(shape) or any(
                d is not None and d != s for d, s in zip(shape, arr.shape))):
            raise InvalidArgumentError(
                f"cannot feed a value of shape {list(arr.shape)} to '{name}', which has "
                f"shape {format_shape(shape)}")
        return arr

    # --- lifetime -------------------------------------------------------------------------
    def cancel(self, error: BaseException | None = None) -> None:
        """Cancel every run in flight (they raise ``error``, by default CancelledError);
        the session stays usable."""
        with self._lock:
            active = list(self._active)
        for ctl in active:
            ctl.cancel(error or CancelledError("the step was cancelled"))

    def close(self) -> None:
        """Cancel runs in flight (they raise CancelledError) and release the worker threads;
        later runs raise CancelledError."""
        with self._lock:
            self._closed = True
            active = list(self._active)
        for ctl in active:
            ctl.cancel(CancelledError("the session was closed during the step"))
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def missing_kernels(graph: Any, device: str = "CPU") -> dict[str, list[str]]:
    """Op -> names of the nodes a Session could not run for lack of a kernel (on ``device``
    or, by soft placement, the CPU). Function bodies count, as the Session inlines them;
    functional ops themselves (If, While, calls ...) need no kernel."""
    from dfg.graphdef.io import load_graph
    from dfg.graphdef.lowering import lower_functional, needs_lowering

    from .kernels.registry import lookup

    gd = load_graph(graph).graph_def
    if needs_lowering(gd):
        gd = lower_functional(gd)
    out: dict[str, list[str]] = {}
    for nd in gd.node:
        if lookup(nd.op, device) is None and lookup(nd.op) is None:
            out.setdefault(nd.op, []).append(nd.name)
    return dict(sorted(out.items()))
