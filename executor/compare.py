"""Run two graphs on the same feeds and compare what comes out; find the first node that differs.

    from dfg.executor.compare import compare_graphs
    res = compare_graphs("model.pb", "model.opt.pb", ["logits:0"], bisect=True)
    res.ok, [f.max_abs for f in res.fetches], res.bisect.first

Feeds: the ones given, and for every other Placeholder the fetches need a seeded random value
(``dfg.graphdef.passes.verify.random_feeds``: dtype and shape from the attrs, unknown
dimensions 2). Graph B is fed only the tensors whose node it has.

Agreement (``diff_tensors``): same dtype and shape; integers, booleans and strings equal;
floats within ``atol + rtol * |a|`` elementwise, NaN where NaN, infinities of the same sign.
Both runs failing with the same TensorFlow error class also counts as agreement.

Bisecting: the candidates are the nodes the fetches need, in A's topological order, that B
has under the same name with the same op and output count, that run in the root frame (a
node inside a while loop runs once per iteration and cannot be fetched: skipped and counted),
and that are not Placeholders (their values are the feeds). Their outputs are fetched from
both graphs in batches of at most ``batch`` tensors (so memory stays bounded), in order, and
the first output that differs names the node; this is exact (the first in topological order,
not just some differing node) and costs one pair of runs per batch up to that node. A
corrupted constant is found as the Const itself: it is a node like any other. A batch that
fails (e.g. a tensor on the untaken side of a cond is dead) is retried node by node; a node
that fails in both graphs is skipped, one that fails in one graph only is the difference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6
DEFAULT_BATCH = 64


@dataclass
class TensorDiff:
    """How one tensor of B compares with the same tensor of A."""

    name: str
    ok: bool
    dtype: str | None = None
    shape: list[int] | None = None
    max_abs: float | None = None   # over finite elements; None when not numeric
    max_rel: float | None = None   # |b - a| / |a| over finite elements with a != 0
    problem: str | None = None     # why it does not agree

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BisectResult:
    """The first node (in A's topological order) whose output differs, if any."""

    first: str | None = None          # node name
    op: str | None = None
    diff: TensorDiff | None = None    # the first differing output
    candidates: int = 0               # nodes that could be compared
    checked: int = 0                  # nodes compared before stopping
    runs: int = 0                     # pairs of runs made
    skipped_in_loops: int = 0         # nodes in while-loop frames (not fetchable)
    skipped_failing: list[str] = field(default_factory=list)   # failed in both graphs

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["diff"] = self.diff.to_dict() if self.diff else None
        return d


@dataclass
class CompareResult:
    ok: bool
    message: str
    fetches: list[TensorDiff] = field(default_factory=list)
    error_a: str | None = None
    error_b: str | None = None
    fed: dict[str, list[int]] = field(default_factory=dict)   # tensor -> shape fed
    bisect: BisectResult | None = None

    @property
    def first_difference(self) -> str | None:
        return next((f.name for f in self.fetches if not f.ok), None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message,
                "fetches": [f.to_dict() for f in self.fetches], "error_a": self.error_a,
                "error_b": self.error_b, "fed": self.fed,
                "bisect": self.bisect.to_dict() if self.bisect else None}


def _dtype_name(a: np.ndarray) -> str:
    from dfg.graphdef import dtypes as D

    try:
        return D.name(D.from_numpy(a.dtype))
    except Exception:   # noqa: BLE001 - a dtype TensorFlow has no name for
        return str(a.dtype)


def diff_tensors(name: str, a: Any, b: Any, rtol: float = DEFAULT_RTOL,
                 atol: float = DEFAULT_ATOL) -> TensorDiff:
    """Compare ``b`` with the expected ``a`` (see the module docstring)."""
    a, b = np.asarray(a), np.asarray(b)
    d = TensorDiff(name, True, _dtype_name(a), list(a.shape))
    if a.dtype != b.dtype:
        d.ok, d.problem = False, f"dtype {_dtype_name(b)} instead of {d.dtype}"
        return d
    if a.shape != b.shape:
        d.ok, d.problem = False, f"shape {list(b.shape)} instead of {list(a.shape)}"
        return d
    if a.dtype.kind not in "fc":
        if a.dtype.kind in "iub":
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64)) if a.size else \
                np.zeros(0)
            d.max_abs = float(diff.max()) if diff.size else 0.0
        if not np.array_equal(a, b):
            d.ok, d.problem = False, "values differ"
        return d
    e = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    x = b.astype(e.dtype)
    nan_e, nan_x = np.isnan(e), np.isnan(x)
    inf = np.isinf(e) | np.isinf(x)
    fin = ~nan_e & ~nan_x & ~inf
    diff = np.abs(x[fin] - e[fin])
    ref = np.abs(e[fin])
    d.max_abs = float(diff.max()) if diff.size else 0.0
    nz = ref > 0
    d.max_rel = float((diff[nz] / ref[nz]).max()) if nz.any() else 0.0
    if not np.array_equal(nan_e, nan_x):
        d.ok, d.problem = False, "NaN in different places"
    elif not np.array_equal(e[inf], x[inf]):
        d.ok, d.problem = False, "infinities differ"
    elif (diff > atol + rtol * ref).any():
        d.ok = False
        d.problem = f"max abs difference {d.max_abs:.3g} (rtol {rtol}, atol {atol})"
    return d


def _session(graph: Any, threads: int, programs: str, files: Any = None,
             max_bytes: int | None = None) -> Any:
    from .session import Session

    return Session(graph, threads=threads, programs=programs, files=files, max_bytes=max_bytes)


def _run(sess: Any, fetches: list[str], feeds: dict, targets: list[str],
         timeout: Callable[[], float | None] | None = None) -> tuple[list[Any] | None, Any]:
    from dfg.graphdef.errors import DeadlineExceededError, DfgError

    try:
        return sess.run(list(fetches), feed_dict=feeds, targets=list(targets),
                        timeout=timeout() if timeout else None), None
    except DeadlineExceededError:
        raise       # the comparison's own time ran out: not a result of either graph
    except DfgError as e:
        return None, e


def _err_name(e: Any) -> str:
    return getattr(e, "tf_name", type(e).__name__)


def _norm(name: str) -> str:
    from dfg.graphdef.graph import parse_tensor_name

    n, s = parse_tensor_name(name)
    return f"{n}:{s}"


def make_feeds(graph: Any, fetches: list[str], targets: list[str] = (),
               feeds: dict[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """The given feeds (names normalized to ``node:slot``) plus a seeded random value for
    every other Placeholder the fetches and targets need."""
    from dfg.graphdef.passes.verify import random_feeds

    given = {_norm(k): v for k, v in (feeds or {}).items()}
    out = {k: v for k, v in random_feeds(graph, list(fetches), list(targets), seed).items()
           if k not in given}
    out.update(given)
    return out


def compare_graphs(a: Any, b: Any, fetches: list[str], feeds: dict[str, Any] | None = None,
                   targets: list[str] = (), rtol: float = DEFAULT_RTOL,
                   atol: float = DEFAULT_ATOL, threads_a: int = 1, threads_b: int = 1,
                   programs: str = "auto", seed: int = 0, bisect: bool = False,
                   batch: int = DEFAULT_BATCH,
                   progress: Callable[[int, int], None] | None = None,
                   files: Any = None, max_bytes: int | None = None,
                   timeout: Callable[[], float | None] | None = None) -> CompareResult:
    """Run one step of ``a`` and of ``b`` (Graphs, GraphDefs or paths) on the same feeds and
    compare every fetch; with ``bisect``, also find the first differing node
    (``progress(done, total)`` is called as bisecting goes). ``files``: both Sessions'
    FilePolicy (None: everything allowed); ``max_bytes``: both Sessions' output budget;
    ``timeout()``: the seconds each run may take (None: no bound), asked before each run."""
    from dfg.graphdef.io import load_graph

    ga, gb = load_graph(a), load_graph(b)
    shown = list(fetches)     # results name the fetches as given
    fetches = [_norm(f) for f in fetches]
    targets = list(targets)
    fa = make_feeds(ga, fetches, targets, feeds, seed)
    # a Placeholder that B does not have (e.g. optimized away) is not fed to it
    fb = {k: v for k, v in fa.items() if k.rpartition(":")[0] in gb}
    fed = {k: list(np.shape(v)) for k, v in fa.items()}
    sa = _session(ga, threads_a, programs, files, max_bytes)
    sb = _session(gb, threads_b, programs, files, max_bytes)
    try:
        out_a, err_a = _run(sa, fetches, fa, targets, timeout)
        out_b, err_b = _run(sb, fetches, fb, targets, timeout)
        res = _verdict(shown, out_a, err_a, out_b, err_b, rtol, atol, fed)
        if bisect:
            res.bisect = _bisect(ga, gb, sa, sb, fetches, fa, fb, rtol, atol, batch,
                                 progress, timeout)
        return res
    finally:
        sa.close()
        sb.close()


def _verdict(fetches: list[str], out_a: Any, err_a: Any, out_b: Any, err_b: Any,
             rtol: float, atol: float, fed: dict) -> CompareResult:
    if err_a is not None or err_b is not None:
        ea = str(err_a) if err_a is not None else None
        eb = str(err_b) if err_b is not None else None
        if err_a is not None and err_b is not None and _err_name(err_a) == _err_name(err_b):
            return CompareResult(True, f"both graphs fail the same way ({_err_name(err_a)})",
                                 [], ea, eb, fed)
        if err_b is None:
            msg = f"A fails ({err_a}) but B does not"
        elif err_a is None:
            msg = f"B fails ({err_b}) but A does not"
        else:
            msg = f"A fails with {_err_name(err_a)}, B with {_err_name(err_b)}"
        return CompareResult(False, msg, [], ea, eb, fed)
    diffs = [diff_tensors(n, x, y, rtol, atol) for n, x, y in zip(fetches, out_a, out_b)]
    bad = [d for d in diffs if not d.ok]
    if bad:
        return CompareResult(False, f"fetch '{bad[0].name}' differs: {bad[0].problem}",
                             diffs, None, None, fed)
    return CompareResult(True, f"{len(diffs)} fetch(es) agree", diffs, None, None, fed)


def bisect_candidates(ga: Any, gb: Any, fetches: list[str], feeds: list[str]
                      ) -> tuple[list[tuple[str, str, int]], int]:
    """(node, op, output count) of the nodes bisecting compares, in A's topological order,
    and how many were skipped for being inside a while loop (see the module docstring)."""
    from dfg.graphdef.frames import ROOT, analyze_frames
    from dfg.graphdef.opdefs.registry import registry
    from dfg.graphdef.prune import dependencies

    reg = registry()
    needed = dependencies(ga, fetches, feeds)
    frames = analyze_frames(ga)
    fed_nodes = {f.rpartition(":")[0] for f in feeds}
    out: list[tuple[str, str, int]] = []
    in_loops = 0
    for node in ga.topological_order(needed):
        other = gb.get(node.name)
        if other is None or other.op != node.op or node.op in ("Placeholder", "PlaceholderV2") \
                or node.name in fed_nodes:
            continue
        if frames.node_frame.get(node.name, ROOT) != ROOT:
            in_loops += 1
            continue
        try:
            n = reg.num_outputs(node.proto)
            if n != reg.num_outputs(other.proto):
                continue
        except Exception:   # noqa: BLE001 - an op without an OpDef: not comparable
            continue
        if n:
            out.append((node.name, node.op, n))
    return out, in_loops


def _bisect(ga: Any, gb: Any, sa: Any, sb: Any, fetches: list[str], fa: dict, fb: dict,
            rtol: float, atol: float, batch: int,
            progress: Callable[[int, int], None] | None,
            timeout: Callable[[], float | None] | None = None) -> BisectResult:
    cands, in_loops = bisect_candidates(ga, gb, fetches, list(fa))
    res = BisectResult(candidates=len(cands), skipped_in_loops=in_loops)
    # batches of whole nodes holding at most `batch` tensors (a node with more is alone)
    groups: list[list[tuple[str, str, int]]] = []
    cur: list[tuple[str, str, int]] = []
    size = 0
    for c in cands:
        if cur and size + c[2] > batch:
            groups.append(cur)
            cur, size = [], 0
        cur.append(c)
        size += c[2]
    if cur:
        groups.append(cur)
    done = 0
    for group in groups:
        hit = _check(group, sa, sb, fa, fb, rtol, atol, res, timeout)
        if hit is not None:
            res.first, res.op, res.diff = hit
            res.checked = done + next(i for i, c in enumerate(group) if c[0] == hit[0]) + 1
            if progress:
                progress(len(cands), len(cands))
            return res
        done += len(group)
        res.checked = done
        if progress:
            progress(done, len(cands))
    return res


def _check(group: list[tuple[str, str, int]], sa: Any, sb: Any, fa: dict, fb: dict,
           rtol: float, atol: float, res: BisectResult,
           timeout: Callable[[], float | None] | None = None
           ) -> tuple[str, str, TensorDiff] | None:
    """The first node of ``group`` whose output differs, as (node, op, diff), or None."""
    names = [f"{n}:{k}" for n, _op, c in group for k in range(c)]
    res.runs += 1
    out_a, err_a = _run(sa, names, fa, [], timeout)
    out_b, err_b = _run(sb, names, fb, [], timeout)
    if err_a is None and err_b is None:
        i = 0
        for n, op, c in group:
            for _k in range(c):
                if _numeric(out_a[i], out_b[i]):
                    d = diff_tensors(names[i], out_a[i], out_b[i], rtol, atol)
                    if not d.ok:
                        return n, op, d
                i += 1
        return None
    if len(group) > 1:
        for c in group:   # retry node by node: which one fails?
            hit = _check([c], sa, sb, fa, fb, rtol, atol, res)
            if hit is not None:
                return hit
        return None
    n, op, _c = group[0]
    if err_a is not None and err_b is not None:
        res.skipped_failing.append(n)
        return None
    which = "A" if err_a is not None else "B"
    return n, op, TensorDiff(f"{n}:0", False,
                             problem=f"fails in {which} only: {err_a or err_b}")


def _numeric(x: Any, y: Any) -> bool:
    # resource handles and other objects are not values to compare
    return isinstance(x, (np.ndarray, np.generic)) and isinstance(y, (np.ndarray, np.generic))
