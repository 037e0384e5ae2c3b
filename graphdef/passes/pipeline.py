"""Run optimization passes safely: in table order, repeated until nothing changes (bounded).

After every pass the result is checked before it replaces the current graph:

- the pass must not raise;
- ``validate()`` must report no error the graph before it did not already have;
- every fetched, target and fed node must still exist;
- the pass must not have modified its input (passes are pure).

A pass failing any check is skipped: the previous graph is kept, a warning naming the pass is
recorded, and the pass does not run again. So the output is never a corrupted graph; at
worst it is the input, pruned by whatever passes did work.

Each run of a pass is recorded (nodes and edges before and after, whether it changed
anything, seconds) and logged on the ``dfg.optimize`` logger.

``run_passes(..., check="end")`` validates once at the end instead of after every pass (a
new error there re-runs everything with every pass checked). It also checks purity once, on
the caller's graph at the end (a mutated input is restored and the run repeated with every
check), and takes a pass's result as a change unless the pass handed back its input (a pass
with nothing to do does, ``Editor.finish``), without serializing either: serializing the
whole graph twice per pass cost more than the passes once folded constants are megabytes
(issue #12). ``optimize_for_signature`` is
the Session's entry point: the passes safe for one (fetches, feeds, targets) signature, then
the run-time fusions, fast enough for the first step of each new signature.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import NotFoundError, UsageError
from ..graph import Graph, parse_tensor_name
from .common import PassOptions

log = logging.getLogger("dfg.optimize")
log.addHandler(logging.NullHandler())   # a library logs; the application decides where to

DEFAULT_MAX_ROUNDS = 10


@dataclass
class PassRecord:
    """One run of one pass. ``status``: ok | failed (raised) | rejected (bad result)."""

    name: str
    round: int
    nodes_before: int
    nodes_after: int
    edges_before: int
    edges_after: int
    changed: bool
    seconds: float
    status: str = "ok"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 6)
        return d


@dataclass
class PipelineResult:
    graph_def: Any
    passes: list[str]
    records: list[PassRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)   # choices made, not problems
    rounds: int = 0
    converged: bool = False
    nodes_before: int = 0
    edges_before: int = 0
    nodes_after: int = 0
    edges_after: int = 0
    seconds: float = 0.0   # wall time, set by optimize_for_signature
    # the index of graph_def the pipeline built last (None when it built none); a caller
    # running the result uses it rather than indexing the same GraphDef again
    graph: Graph | None = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        """One line: nodes before and after, the passes that changed something, time."""
        changed = list(dict.fromkeys(r.name for r in self.records if r.changed))
        return (f"optimized {self.nodes_before} -> {self.nodes_after} nodes"
                f"{f' in {self.seconds:.3f} s' if self.seconds else ''}"
                f" ({', '.join(changed) if changed else 'nothing changed'})"
                f"{f'; {len(self.warnings)} warning(s)' if self.warnings else ''}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report (the graph itself is not included)."""
        return {
            "passes": list(self.passes),
            "rounds": self.rounds,
            "converged": self.converged,
            "nodes": {"before": self.nodes_before, "after": self.nodes_after},
            "edges": {"before": self.edges_before, "after": self.edges_after},
            "records": [r.to_dict() for r in self.records],
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }


def count_edges(graph: Graph) -> int:
    """Data and control edges: every entry of every node's ``input``, from the index's parsed
    inputs (4x faster than reading each NodeDef's ``input`` through upb again)."""
    return sum(len(n.inputs) + len(n.control_inputs) for n in graph.nodes)


def resolve_options(graph: Graph, options: PassOptions) -> PassOptions:
    """Check that every fetch, target and feed names something (NotFoundError with a
    did-you-mean otherwise) and spell tensors canonically (``y`` -> ``y:0``)."""
    from dataclasses import replace

    from ..prune import resolve_target, resolve_tensor

    if not options.fetches and not options.targets:
        raise UsageError("nothing to optimize for: give at least one fetch or target")
    fetch_keys = [resolve_tensor(graph, f, "fetch") for f in options.fetches]
    feed_keys = [resolve_tensor(graph, f, "feed") for f in options.feeds]
    for (name, slot), what in [*((k, "fetch") for k in fetch_keys),
                               *((k, "feed") for k in feed_keys)]:
        n = _num_outputs(graph, name)
        if n is not None and slot >= n:
            raise NotFoundError(f"{what} '{name}:{slot}' does not exist: {graph.node(name).op} "
                                f"'{name}' has {n} output{'s' if n != 1 else ''}",
                                node=name, op=graph.node(name).op)
    fetches = tuple(f"{n}:{s}" for n, s in fetch_keys)
    feeds = tuple(f"{n}:{s}" for n, s in feed_keys)
    targets = tuple(resolve_target(graph, t) for t in options.targets)
    if options.max_const_bytes < 0:
        raise UsageError("the constant size limit must be >= 0 bytes")
    return replace(options, fetches=tuple(dict.fromkeys(fetches)),
                   feeds=tuple(dict.fromkeys(feeds)), targets=tuple(dict.fromkeys(targets)))


def _num_outputs(graph: Graph, name: str) -> int | None:
    from .common import output_types

    node = graph.get(name)
    types = output_types(node.proto) if node is not None else None
    return None if types is None else len(types)


def select_passes(passes: list[str] | None = None, skip: list[str] | None = None,
                  table: dict[str, Any] | None = None) -> list[str]:
    """The passes to run, in table order: ``passes`` (default: the default list) minus
    ``skip``. UsageError names an unknown pass and lists the known ones."""
    from . import PASSES

    table = PASSES if table is None else table
    chosen = [n for n, p in table.items() if p.default] if passes is None else list(passes)
    for n in [*chosen, *(skip or [])]:
        if n not in table:
            raise UsageError(f"unknown pass '{n}' (passes: {', '.join(table)})")
    wanted = set(chosen) - set(skip or [])
    return [n for n in table if n in wanted]


def total_nodes(graph_def: Any) -> int:
    """Nodes of the graph and of its function library."""
    return len(graph_def.node) + sum(len(f.node_def) for f in graph_def.library.function)


def optimize(graph: Any, options: PassOptions, passes: list[str] | None = None, *,
             skip: list[str] | None = None, table: dict[str, Any] | None = None,
             max_rounds: int = DEFAULT_MAX_ROUNDS) -> PipelineResult:
    """Optimize ``graph``; see :func:`run_passes`. A TF2 graph (functional ops) given the
    default pass list is optimized both with and without ``lower_functional``, and the result
    with fewer nodes (function bodies counted) wins, the lowered one on a tie: lowering opens
    bodies to every pass, but costs a few nodes per call and loop variable."""
    from ..io import load_graph
    from ..lowering import needs_lowering

    g = load_graph(graph)
    auto = (passes is None and table is None and "lower_functional" not in (skip or ())
            and needs_lowering(g.graph_def))
    lowered = run_passes(g, options, passes, skip=skip, table=table, max_rounds=max_rounds)
    if not auto:
        return lowered
    kept = run_passes(g, options, passes, skip=[*(skip or []), "lower_functional"],
                      table=table, max_rounds=max_rounds)
    n_low, n_kept = total_nodes(lowered.graph_def), total_nodes(kept.graph_def)
    if n_low <= n_kept:
        return lowered
    kept.notes.append(f"kept the function calls: lowering them gave {n_low} nodes, "
                         f"not lowering {n_kept} (pass lower_functional to force it)")
    return kept


def run_passes(graph: Any, options: PassOptions, passes: list[str] | None = None, *,
               skip: list[str] | None = None, table: dict[str, Any] | None = None,
               max_rounds: int = DEFAULT_MAX_ROUNDS, check: str = "each") -> PipelineResult:
    """Optimize ``graph`` (a Graph, GraphDef or path) for ``options``; see the module doc.

    ``passes`` selects pass names (default: the table's default list), ``skip`` removes
    some; ``table`` replaces the pass table (tests use it to plant a failing pass).
    ``check="end"`` validates once, after the last pass, instead of after every pass (names,
    fetched slots and purity are still checked after each): faster, and when the end result
    has a new validation error the whole run is repeated with ``check="each"``, so the
    result is as safe either way.
    """
    if check not in ("each", "end"):
        raise UsageError(f"check must be 'each' or 'end', not {check!r}")
    if check == "end":
        fast = _run_passes(graph, options, passes, skip, table, max_rounds, False)
        if fast.graph_def is _input_graph_def(graph) or not _new_errors(graph, fast.graph_def):
            return fast
        safe = _run_passes(graph, options, passes, skip, table, max_rounds, True)
        safe.notes.append("an unchecked run gave an invalid graph: every pass was re-run "
                          "with its result validated")
        return safe
    return _run_passes(graph, options, passes, skip, table, max_rounds, True)


def _input_graph_def(graph: Any) -> Any:
    return graph.graph_def if isinstance(graph, Graph) else None


def _new_errors(before: Any, after_def: Any) -> list[str]:
    from ..io import load_graph

    after = _error_keys(Graph(after_def))
    if not after:       # the usual case: no need to validate the input as well
        return []
    old = _error_keys(load_graph(before))
    return [msg for k, msg in after.items() if k not in old]


def _run_passes(graph: Any, options: PassOptions, passes: list[str] | None,
                skip: list[str] | None, table: dict[str, Any] | None, max_rounds: int,
                validate_each: bool, own_input: bool = False) -> PipelineResult:
    """``own_input``: the graph is the pipeline's own intermediate, nobody else holds it (with
    ``validate_each`` off, its purity is not checked)."""
    from ..io import load_graph
    from . import PASSES

    table = PASSES if table is None else table
    g = load_graph(graph)
    options = resolve_options(g, options)
    names = select_passes(passes, skip, table)
    result = PipelineResult(g.graph_def, names)
    result.nodes_before = len(g.graph_def.node)
    result.edges_before = current_edges = count_edges(g)

    current = g
    # validate_each: every check after every pass; else purity is checked once, on the
    # caller's graph at the end, and current_bytes is computed only when needed
    input_bytes = None if own_input and not validate_each \
        else g.graph_def.SerializeToString(deterministic=True)
    current_bytes: bytes | None = input_bytes
    current_errors = _error_keys(current) if validate_each else {}
    must_exist = {parse_tensor_name(f)[0] for f in (*options.fetches, *options.feeds)} \
        | set(options.targets)
    fetch_keys = [parse_tensor_name(f) for f in options.fetches]
    disabled: set[str] = set()
    for rnd in range(1, max_rounds + 1):
        result.rounds = rnd
        changed_any = False
        for name in names:
            if name in disabled:
                continue
            rec = PassRecord(name, rnd, len(current.graph_def.node), 0, current_edges, 0,
                             False, 0.0)
            t0 = time.perf_counter()
            problem = None
            out = None
            try:
                out = table[name].fn(current, options)
            except Exception as e:  # noqa: BLE001 - a broken pass must not break the output
                problem = ("failed", f"pass '{name}' raised {type(e).__name__}: {e}")
            rec.seconds = time.perf_counter() - t0
            if validate_each and \
                    current.graph_def.SerializeToString(deterministic=True) != current_bytes:
                # the pass mutated its input: restore it from the bytes kept aside
                from dfg.schemas import graph_pb2

                restored = graph_pb2.GraphDef()
                restored.ParseFromString(current_bytes)
                current = Graph(restored)
                problem = problem or ("rejected", f"pass '{name}' modified its input graph")
            new_graph = new_bytes = new_errors = None
            changed = False
            if problem is None:
                # a pass that changed nothing may hand back its input (Editor.finish)
                if out is current.graph_def:
                    new_bytes = current_bytes
                elif validate_each:
                    new_bytes = out.SerializeToString(deterministic=True)
                    changed = new_bytes != current_bytes
                else:
                    changed = True              # a new graph: taken as a change, unserialized
                if changed:                     # an unchanged graph needs no checking
                    new_graph = Graph(out)
                    new_errors = _error_keys(new_graph) if validate_each else {}
                    fresh = [msg for k, msg in new_errors.items() if k not in current_errors]
                    problem = _check(name, new_graph, fresh, must_exist, fetch_keys)
            if problem is not None:
                rec.status, rec.message = problem
                rec.nodes_after, rec.edges_after = rec.nodes_before, rec.edges_before
                disabled.add(name)
                warning = f"{rec.message}; kept the graph from before it"
                result.warnings.append(warning)
                log.warning(warning)
                result.records.append(rec)
                continue
            rec.changed = changed
            rec.nodes_after = len(out.node)
            rec.edges_after = count_edges(new_graph) if rec.changed else rec.edges_before
            log.info("round %d %s: nodes %d -> %d, edges %d -> %d%s (%.3fs)", rnd, name,
                     rec.nodes_before, rec.nodes_after, rec.edges_before, rec.edges_after,
                     "" if rec.changed else ", unchanged", rec.seconds)
            result.records.append(rec)
            if rec.changed:
                changed_any = True
                current, current_bytes, current_errors = new_graph, new_bytes, new_errors
                current_edges = rec.edges_after
        if not changed_any:
            result.converged = True
            break
    if input_bytes is not None and not validate_each \
            and g.graph_def.SerializeToString(deterministic=True) != input_bytes:
        # a pass modified the caller's graph: restore it, and find the pass with every check
        g.graph_def.ParseFromString(input_bytes)
        g.reindex()
        return _run_passes(g, options, passes, skip, table, max_rounds, True)
    result.graph_def = current.graph_def
    result.graph = current
    result.nodes_after = len(current.graph_def.node)
    result.edges_after = current_edges
    return result


def _error_keys(graph: Graph) -> dict[tuple[str, str | None], str]:
    """Validation errors of ``graph``: (code, node) -> the rendered diagnostic."""
    from ..validate import validate

    return {(d.code, d.node): str(d) for d in validate(graph) if d.is_error}


def _check(name: str, graph: Graph, new_errors: Any, must_exist: set[str],
           fetches: list[tuple[str, int]]) -> tuple[str, str] | None:
    """Why the result of pass ``name`` cannot be used (new validation errors, a lost name, a
    fetched output that no longer exists), or None."""
    if new_errors:
        return ("rejected", f"pass '{name}' produced an invalid graph ({new_errors[0]})")
    lost = sorted(n for n in must_exist if n not in graph)
    if lost:
        return ("rejected", f"pass '{name}' removed '{lost[0]}', which is fetched, fed or a "
                            "target")
    for node, slot in fetches:
        n = _num_outputs(graph, node)
        if n is not None and slot >= n:
            return ("rejected", f"pass '{name}' left fetched '{node}' without output {slot}")
    return None


# --- the Session's per-signature optimization -------------------------------------------------

# What a Session runs on each new (fetches, feeds, targets) signature, as TensorFlow's
# Session runs Grappler: the default passes that keep a graph's meaning for its signature
# (every one honours PassOptions: fed tensors are opaque inputs never folded or bypassed,
# fetched/fed/target nodes keep their names, stateful nodes are never folded, merged or
# reordered), in an order that gets in one round what the table's order needs two or three
# for (forwarding Identities go first so folding sees the constants behind them; batch norm
# folds once its arithmetic is constant), then the fusions, once, on the result (a fusion
# run before fold_batch_norm would swallow a conv whose following arithmetic could still
# fold into it), then prune again to drop what folding left unread.
SIGNATURE_PASSES: tuple[str, ...] = (
    "lower_functional", "prune", "identity_removal", "constant_folding", "dead_branches",
    "arithmetic", "fold_batch_norm", "fold_pad", "sink_squeeze", "loop_invariant",
    "hoist_projection",
    "hoist_concat_projection", "cse")
FUSION_PASSES: tuple[str, ...] = ("fuse_conv_bias_act", "fuse_matmul_bias_act",
                                  "fuse_elementwise", "prune")
# Fusions left out unless asked for: on the Keras zoo, elementwise chains the numpy code runs
# gave no step-time gain beyond noise (CPU time per step within +-3%, see
# benchmarks/fusion_bench.py); a Session asks for chains in loops and for those the compiled
# sweep runs whole (optimize_for_signature's ``sweep_ops``)
OPT_IN_FUSIONS: tuple[str, ...] = ("fuse_elementwise",)
# passes with nothing to do in a graph without control flow (and a measurable cost)
_CONTROL_FLOW_PASSES = ("dead_branches", "loop_invariant", "hoist_projection",
                        "hoist_concat_projection")
# Above this many nodes (function bodies counted) only the linear-time passes run: the
# first step of a huge graph should not wait for the whole pipeline.
SIGNATURE_MAX_NODES = 50_000
_LINEAR_PASSES = ("lower_functional", "prune", "identity_removal")
# One round: with the order above a second round mostly confirms (measured on the Keras zoo:
# the same compute nodes; cse and folding leave dead constants, which the last prune drops).
SIGNATURE_MAX_ROUNDS = 1
# What a Session folds: TensorFlow's session folds constants up to 10 MiB
# (OptimizerOptions.max_folded_constant_in_bytes, 0 = its default of 10 MiB). The folded value
# lives in memory only; `dfg optimize` writes files and keeps the smaller
# DEFAULT_MAX_CONST_BYTES.
SIGNATURE_MAX_CONST_BYTES = 10 << 20


def _fusion_roots(names: list[str]) -> frozenset[str] | None:
    """The ops the fusion passes among ``names`` start from (None: any op may start one)."""
    from .fuse_conv_bias_act import CONV_FUSIONS
    from .fuse_matmul_bias_act import MATMUL_FUSIONS

    roots: set[str] = set()
    for name in names:
        if name == "fuse_conv_bias_act":
            roots |= set(CONV_FUSIONS)
        elif name == "fuse_matmul_bias_act":
            roots |= set(MATMUL_FUSIONS)
        elif name != "prune":
            return None
    return frozenset(roots)


def optimize_for_signature(graph: Any, fetches: list[str], feeds: list[str] = (),
                           targets: list[str] = (), *, fuse: bool = True,
                           elementwise: bool | str = False,
                           sweep_ops: frozenset[str] = frozenset(), skip: list[str] = (),
                           max_nodes: int = SIGNATURE_MAX_NODES,
                           max_rounds: int = SIGNATURE_MAX_ROUNDS,
                           max_const_bytes: int = SIGNATURE_MAX_CONST_BYTES) -> PipelineResult:
    """The graph a Session should run for one signature: ``graph`` pruned to what
    ``fetches`` and ``targets`` need given ``feeds`` (tensor names ``node:slot``), optimized
    by :data:`SIGNATURE_PASSES` and then fused by :data:`FUSION_PASSES` (``fuse=False``:
    not; ``elementwise=True`` adds the opt-in elementwise chains, ``"loops"`` only inside
    while loops and, outside, float32 chains of ``sweep_ops``; ``skip``: pass names left out).
    Deterministic: the same input gives the same bytes.

    Safe for the signature: what is fed is never folded or removed, and its node keeps its
    name; a fetched node keeps its name and the meaning of its fetched output (no fusion
    swallows it); targets still run; stateful nodes and their control order are kept. Each
    pass's result is checked for lost names; the end result is validated once (a new
    validation error re-runs every pass with its result validated, see :func:`run_passes`).

    The result's ``notes`` say what was skipped; :meth:`PipelineResult.summary` is a
    one-line report; ``seconds`` is the wall time spent.
    """
    from ..frames import CONTROL_FLOW_OPS
    from ..io import load_graph
    from . import PASSES

    t0 = time.perf_counter()
    g = load_graph(graph)
    options = PassOptions(fetches=tuple(fetches), feeds=tuple(feeds), targets=tuple(targets),
                          max_const_bytes=max_const_bytes,
                          elementwise_scope="loops" if elementwise == "loops" else "all",
                          elementwise_sweep_ops=frozenset(sweep_ops))
    size = total_nodes(g.graph_def)
    select_passes(list(skip), None)       # UsageError for an unknown name
    names = [n for n in SIGNATURE_PASSES if n not in skip]
    notes = []
    if size > max_nodes:
        names = [n for n in names if n in _LINEAR_PASSES]
        notes.append(f"{size} nodes (above {max_nodes}): only {', '.join(names)} ran")
    if not any(n.op in CONTROL_FLOW_OPS for n in g.graph_def.node) \
            and not g.graph_def.library.function:
        names = [n for n in names if n not in _CONTROL_FLOW_PASSES]
    last = [n for n in FUSION_PASSES if (fuse or n == "prune") and n not in skip
            and (elementwise or n not in OPT_IN_FUSIONS)]

    def both(validate_each: bool) -> PipelineResult:
        res = _run_passes(g, options, names, None, {n: PASSES[n] for n in names}, max_rounds,
                          validate_each)
        if not any(r.changed for r in res.records) and not fusable(res.graph_def):
            return res      # the tail (fusions, then prune) would find nothing to do
        tail = _run_passes(res.graph if res.graph is not None else Graph(res.graph_def),
                           options, last, None,
                           {n: PASSES[n] for n in last}, 1, validate_each,
                           own_input=res.graph_def is not g.graph_def)
        res.passes = [*res.passes, *tail.passes]
        res.records.extend(tail.records)
        res.warnings.extend(tail.warnings)
        res.graph_def, res.graph = tail.graph_def, tail.graph
        res.nodes_after, res.edges_after = tail.nodes_after, tail.edges_after
        return res

    roots = _fusion_roots(last)

    def fusable(gd: Any) -> bool:
        """Whether a fusion of ``last`` may apply: fuse_elementwise looks at any op, the
        others only at their root ops (a convolution, a MatMul)."""
        if roots is None:
            return True
        return any(nd.op in roots for nd in gd.node)

    # validated once, at the end (see run_passes' check="end")
    result = both(False)
    if result.graph_def is not g.graph_def and _new_errors(g, result.graph_def):
        result = both(True)
        result.notes.append("an unchecked run gave an invalid graph: every pass was re-run "
                            "with its result validated")
    result.notes[:0] = notes
    result.seconds = time.perf_counter() - t0
    return result
