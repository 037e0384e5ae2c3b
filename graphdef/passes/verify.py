"""``--verify``: run the original and the optimized graph on the same random inputs and compare.

Every Placeholder the fetches and targets need gets a random value from a seeded generator:
its dtype from the ``dtype`` attr, its shape from the ``shape`` attr with unknown dimensions
as 2 (an unknown rank as a scalar). Floats are standard normal, integers 1..4 (no division by
zero on a random draw), booleans fair coins, strings ``b"dfg"``. PlaceholderWithDefault is not
fed (its default is part of what is checked).

Both graphs run one step in a fresh Session each. They agree when both fail with the same
TensorFlow error class, or both succeed and every fetch has the same dtype and shape, equal
integers/booleans/strings, and floats within ``atol + rtol * |expected|`` (NaN where NaN,
infinities of the same sign).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as D
from ..graph import Graph

UNKNOWN_DIM = 2
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6


@dataclass
class VerifyResult:
    ok: bool
    message: str
    first_difference: str | None = None         # the fetch (or target) that differs
    fed: dict[str, list[int]] = field(default_factory=dict)   # tensor -> shape fed
    compared: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message,
                "first_difference": self.first_difference, "fed": self.fed,
                "compared": self.compared}


def random_feeds(graph: Graph, fetches: list[str], targets: list[str] = (), seed: int = 0
                 ) -> dict[str, np.ndarray]:
    """A value for every Placeholder the fetches and targets need (see the module doc)."""
    from ..attrs import to_python
    from ..prune import dependencies

    rng = np.random.default_rng(seed)
    needed = dependencies(graph, fetches, targets=targets)
    feeds: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        if node.name not in needed or node.op not in ("Placeholder", "PlaceholderV2"):
            continue
        dtype = node.attr["dtype"].type if "dtype" in node.attr else D.DT_FLOAT
        shape = to_python(node.attr["shape"]) if "shape" in node.attr else None
        dims = () if shape is None else tuple(UNKNOWN_DIM if d is None else d for d in shape)
        feeds[f"{node.name}:0"] = _random(rng, dtype, dims)
    return feeds


def _random(rng: np.random.Generator, dtype: int, shape: tuple[int, ...]) -> np.ndarray:
    b = D.base(dtype)
    if b == D.DT_STRING:
        out = np.empty(shape, dtype=object)
        out.fill(b"dfg")
        return out
    np_dtype = D.to_numpy(b)
    if b == D.DT_BOOL:
        return rng.random(shape) < 0.5
    if b in D.INTEGER:
        return rng.integers(1, 5, size=shape).astype(np_dtype)
    if b in D.COMPLEX:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)


def _run(graph: Any, fetches: list[str], targets: list[str], feeds: dict[str, np.ndarray],
         threads: int) -> tuple[list[Any] | None, Any]:
    from dfg.executor import Session

    from ..errors import DfgError

    sess = Session(graph, threads=threads)
    try:
        return sess.run(list(fetches), feed_dict=feeds, targets=list(targets)), None
    except DfgError as e:
        return None, e
    finally:
        sess.close()


def verify(original: Any, optimized: Any, fetches: list[str], targets: list[str] = (),
           seed: int = 0, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
           threads: int = 1) -> VerifyResult:
    """Compare one step of ``original`` and ``optimized`` (Graphs, GraphDefs or paths)."""
    from ..io import load_graph

    g0, g1 = load_graph(original), load_graph(optimized)
    feeds = random_feeds(g0, list(fetches), list(targets), seed)
    fed = {k: list(v.shape) for k, v in feeds.items()}
    # a Placeholder the optimizer found unneeded is not in the optimized graph: do not feed it
    feeds1 = {k: v for k, v in feeds.items() if k.rpartition(":")[0] in g1}
    out0, err0 = _run(g0, fetches, targets, feeds, threads)
    out1, err1 = _run(g1, fetches, targets, feeds1, threads)
    first = fetches[0] if fetches else (targets[0] if targets else None)
    if err0 is not None or err1 is not None:
        name0 = getattr(err0, "tf_name", type(err0).__name__) if err0 else None
        name1 = getattr(err1, "tf_name", type(err1).__name__) if err1 else None
        if err0 is not None and err1 is not None and name0 == name1:
            return VerifyResult(True, f"both graphs fail the same way ({name0})", None, fed)
        if err1 is None:
            msg = f"the original fails ({err0}) but the optimized graph does not"
        elif err0 is None:
            msg = f"the optimized graph fails ({err1}) but the original does not"
        else:
            msg = f"the original fails with {name0}, the optimized graph with {name1}"
        return VerifyResult(False, msg, first, fed)
    compared = []
    for name, a, b in zip(fetches, out0, out1):
        problem = compare(np.asarray(a), np.asarray(b), rtol, atol)
        compared.append(name)
        if problem is not None:
            return VerifyResult(False, f"fetch '{name}' differs: {problem}", name, fed, compared)
    return VerifyResult(True, f"{len(compared)} fetch(es) agree", None, fed, compared)


def compare(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float) -> str | None:
    """Why ``actual`` does not match ``expected``, or None."""
    if expected.dtype != actual.dtype:
        return f"dtype {actual.dtype} instead of {expected.dtype}"
    if expected.shape != actual.shape:
        return f"shape {list(actual.shape)} instead of {list(expected.shape)}"
    if expected.dtype.kind in "fc":
        e = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
        a = actual.astype(e.dtype)
        if not np.array_equal(np.isnan(e), np.isnan(a)):
            return "NaN in different places"
        inf = np.isinf(e) | np.isinf(a)
        if not np.array_equal(e[inf], a[inf]):
            return "infinities differ"
        fin = ~np.isnan(e) & ~inf
        diff = np.abs(a[fin] - e[fin])
        bad = diff > atol + rtol * np.abs(e[fin])
        if bad.any():
            return f"max abs difference {float(diff.max()):.3g} (rtol {rtol}, atol {atol})"
        return None
    if not np.array_equal(expected, actual):
        return "values differ"
    return None
