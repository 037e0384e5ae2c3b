"""Shared runner for the TensorFlow conformance cases under tests/data/conformance.

Each case's steps run in one Session, in order; expected values and error classes are
TensorFlow's own (see tests/data/conformance/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "conformance"


def case_dirs(root: Path = DATA) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/case.json"))


def load_case(d: Path) -> dict[str, Any]:
    return json.loads((d / "case.json").read_text())


def missing_kernels(d: Path) -> list[str]:
    """Ops of the case's graph with no CPU kernel (found from the registry, not by running;
    function bodies included, as a Session runs them)."""
    from dfg.executor.session import missing_kernels as lacking

    return list(lacking(d / "graph.pbtxt"))


def assert_close(actual: Any, expected: np.ndarray, rtol: float, atol: float, what: str) -> None:
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        a = actual.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
        e = expected.astype(a.dtype)
        nan_ok = np.isnan(a) == np.isnan(e)
        assert nan_ok.all(), f"{what}: NaN positions differ"
        fin = np.isfinite(e)
        assert (a[~fin & ~np.isnan(e)] == e[~fin & ~np.isnan(e)]).all(), f"{what}: inf differ"
        ok = np.abs(a[fin] - e[fin]) <= atol + rtol * np.abs(e[fin])
        assert ok.all(), f"{what}: max abs diff {np.max(np.abs(a[fin] - e[fin]))}"
    else:
        assert np.array_equal(actual, expected), f"{what}: values differ"


def run_case(d: Path, threads: int, graph: Any = None, programs: str = "auto") -> None:
    """Run every step of case ``d``; ``graph`` overrides the case's graph (e.g. optimized);
    ``programs`` is the Session's choice of running steps and simple loops as programs."""
    from dfg.executor import Session
    from dfg.graphdef.errors import OpError
    from dfg.graphdef.io import load_graph

    case = load_case(d)
    sess = Session(graph if graph is not None else load_graph(d / "graph.pbtxt"),
                   threads=threads, programs=programs)
    try:
        for i, step in enumerate(case["steps"]):
            feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
            fetch = step["fetch"]
            if step["expect_error"]:
                try:
                    sess.run(fetch, feed_dict=feed, targets=step["target"])
                except OpError as e:
                    assert e.tf_name == step["expect_error"], (
                        f"step {i}: raised {e.tf_name} ({e}), TensorFlow raised "
                        f"{step['expect_error']}")
                else:
                    raise AssertionError(f"step {i}: expected {step['expect_error']}")
                continue
            out = sess.run(fetch, feed_dict=feed, targets=step["target"])
            for name, value in zip(fetch, out):
                expected = np.load(d / step["expect"][name], allow_pickle=False)
                assert_close(value, expected, case["rtol"], case["atol"], f"step {i} {name}")
    finally:
        sess.close()
