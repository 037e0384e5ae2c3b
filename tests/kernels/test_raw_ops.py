"""Kernels replayed against TensorFlow's own outputs.

``tests/data/kernels/raw_ops/generate.py`` called each op in TensorFlow 2.21 (eagerly with
``tf.raw_ops``, or in a small TF1 graph for ops on variables and tables) and saved inputs,
attrs and outputs (or the error class). Every case runs here through the kernel registry's
``invoke`` (or dfg's Session for the graphs) and must give the same dtype, shape and values
(floats within a tolerance), or raise the same error class.

The ops these cases exercise count as covered in ``dfg ops --json`` (see ``cli/ops.py``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import errors, load_graph

KERNELS = Path(__file__).resolve().parent.parent / "data" / "kernels"
# raw_ops/ and one raw_ops_<family>/ per later kernel family, each with its own generator
DIRS = tuple(sorted(d for d in KERNELS.glob("raw_ops*") if (d / "manifest.json").is_file()))


@cache
def manifest() -> list[dict]:
    """Every case of every folder; ``_dir`` says which folder's arrays and graphs it uses."""
    out = []
    for d in DIRS:
        for c in json.loads((d / "manifest.json").read_text()):
            out.append({**c, "_dir": d.name})
    return out


@cache
def arrays(folder: str) -> Any:
    return np.load(KERNELS / folder / "arrays.npz", allow_pickle=False)


def arr(key: str, folder: str = "raw_ops") -> np.ndarray:
    a = arrays(folder)[key]
    if a.dtype.kind == "S":  # dfg's strings are object arrays of bytes
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [bytes(x) for x in a.reshape(-1)]
        return out
    return a


def attr(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"dtype"}:
        return np.dtype(object) if v["dtype"] == "string" else np.dtype(v["dtype"])
    if isinstance(v, list):
        return [attr(x) for x in v]
    return v


def compare(got: Any, want: np.ndarray, tol: float | None, what: str) -> None:
    assert isinstance(got, np.ndarray), (what, type(got))
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if want.dtype == object:
        assert got.dtype == object, (what, got.dtype)
        assert got.reshape(-1).tolist() == want.reshape(-1).tolist(), (what, got, want)
        return
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        rtol = tol if tol is not None else (1e-2 if want.dtype == np.float16 else 1e-5)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def eager_cases() -> list[tuple[str, dict]]:
    out, seen = [], {}
    for c in manifest():
        if "op" in c:
            n = seen[c["op"]] = seen.get(c["op"], 0) + 1
            out.append((f"{c['op']}-{n}", c))
    return out


def graph_cases() -> list[tuple[str, dict]]:
    return [(Path(c["graph"]).stem, c) for c in manifest() if "graph" in c]


@pytest.mark.parametrize("case", [c for _, c in eager_cases()], ids=[i for i, _ in eager_cases()])
def test_eager_case(case: dict) -> None:
    d = case["_dir"]
    inputs = [[arr(k, d) for k in x] if isinstance(x, list) else arr(x, d) for x in case["inputs"]]
    flat: list = []
    for x in inputs:
        flat.extend(x if isinstance(x, list) else [x])
    attrs = {k: attr(v) for k, v in case["attrs"].items()}
    if "error" in case:
        with pytest.raises(errors.OpError) as info:
            invoke(case["op"], *flat, attrs=attrs)
        assert type(info.value).__name__ == case["error"]
        return
    got = invoke(case["op"], *flat, attrs=attrs)
    want = case["outputs"]
    if not isinstance(got, (tuple, list)):
        got = [got]
    assert len(got) == len(want)
    for i, (g, k) in enumerate(zip(got, want)):
        what = f"{case['op']} output {i} ({case['note']})"
        if k is None:  # a placeholder output TF documents as unused
            continue
        if isinstance(k, dict):  # TF leaves the values unspecified: dtype and shape only
            assert (g.dtype.name, list(g.shape)) == (k["dtype"], k["shape"]), what
        elif i in case.get("signs", ()):  # defined up to each column's sign
            compare(np.abs(g), np.abs(arr(k, d)), case.get("tol"), what)
        else:
            compare(g, arr(k, d), case.get("tol"), what)


@pytest.mark.parametrize("case", [c for _, c in graph_cases()], ids=[i for i, _ in graph_cases()])
def test_graph_case(case: dict) -> None:
    d = case["_dir"]
    sess = Session(load_graph(str(KERNELS / d / case["graph"])))
    try:
        for n, step in enumerate(case["steps"]):
            targets = [t.split(":")[0] for t in step["targets"]]
            feeds = {t: str(KERNELS / d / f) for t, f in step.get("files", {}).items()}
            if "error" in step:
                with pytest.raises(errors.OpError) as info:
                    sess.run(step["fetches"], feeds, targets=targets)
                assert type(info.value).__name__ == step["error"], n
                continue
            got = sess.run(step["fetches"], feeds, targets=targets)
            want = [arr(k, d) for k in step["outputs"]]
            if "sort" in step:  # TF's order is unspecified (a hash map's): sort both by one
                got = [g[np.argsort(got[step["sort"]], kind="stable")] for g in got]
                want = [w[np.argsort(want[step["sort"]], kind="stable")] for w in want]
            for name, g, w in zip(step["fetches"], got, want):
                compare(g, w, case.get("tol"), f"step {n} {name}")
    finally:
        sess.close()


def covered_ops() -> set[str]:
    """The ops these cases run (what ``dfg ops --json`` credits to this file)."""
    return {c["op"] for c in manifest() if "op" in c} | {
        o for c in manifest() if "graph" in c for o in c["ops"]}


def test_every_cpu_kernel_is_covered_and_there_are_at_least_450() -> None:
    """Coverage as ``dfg ops --json`` reports it (found from the tests, see cli/ops.py)."""
    from dfg.cli.ops import test_coverage
    from dfg.executor.kernels.registry import ops_with_kernels

    ops = set(ops_with_kernels("CPU"))
    found = test_coverage(ops)
    assert found is not None
    assert covered_ops() <= set(found)
    assert sorted(ops - set(found)) == []
    assert len(ops) >= 450, len(ops)
