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
from ..errors import UnsupportedDTypeError
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
        if not D.is_numpy_compatible(dtype):
            # a resource or variant input (a lookup table's handle left as a Placeholder by
            # TF's freezing): there is no random value for it
            raise UnsupportedDTypeError(
                f"no random value for Placeholder '{node.name}' of dtype {D.name(dtype)}: "
                "the graph needs it fed by its owner (a TF-frozen lookup table's handle?)",
                node=node.name, op=node.op)
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


def verify(original: Any, optimized: Any, fetches: list[str], targets: list[str] = (),
           seed: int = 0, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
           threads: int = 1, feeds: dict[str, Any] | None = None) -> VerifyResult:
    """Compare one step of ``original`` and ``optimized`` (Graphs, GraphDefs or paths), with
    ``dfg.executor.compare.compare_graphs``: ``feeds`` (tensor -> value) and, for the other
    Placeholders, its ``random_feeds``."""
    from dfg.executor.compare import compare_graphs

    res = compare_graphs(original, optimized, list(fetches), feeds, list(targets), rtol, atol,
                         threads, threads, seed=seed)
    message = res.message.replace("A fails", "the original fails").replace(
        "B fails", "the optimized graph fails").replace(", B with", ", the optimized graph with")
    first = res.first_difference
    if not res.ok and first is None:   # one of them failed: name what was asked for
        first = fetches[0] if fetches else (targets[0] if targets else None)
    return VerifyResult(res.ok, message, first, res.fed, [f.name for f in res.fetches])


def compare(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float) -> str | None:
    """Why ``actual`` does not match ``expected``, or None."""
    from dfg.executor.compare import diff_tensors

    return diff_tensors("", expected, actual, rtol, atol).problem
