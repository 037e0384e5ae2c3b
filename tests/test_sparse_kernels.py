"""Sparse-tensor kernels replayed against TensorFlow's outputs.

tests/data/kernels/sparse/generate.py called each op eagerly in TensorFlow 2.21 and saved the
inputs, attrs and outputs, or the error class TensorFlow raised (bad indices, shape
mismatches). Every case runs through the kernel registry's ``invoke`` and must give the same
dtype, shape and values (floats within the case's tolerance: sums of several entries may add
in another order), or raise the same error class from dfg's hierarchy.

Ops: SparseTensorDenseMatMul, SparseReshape, SparseFillEmptyRows, SparseAdd,
SparseReduceSum, SparseReduceMax, SparseReduceSumSparse, SparseReduceMaxSparse, SparseSlice,
SparseConcat, SparseReorder, SparseTensorDenseAdd, SparseDenseCwiseMul, SparseDenseCwiseAdd,
SparseDenseCwiseDiv, SerializeSparse, SerializeManySparse (TensorFlow's exact bytes),
DeserializeSparse, DeserializeManySparse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import builder as B
from dfg.graphdef import errors

DATA = Path(__file__).resolve().parent / "data" / "kernels"


def load_cases(family: str) -> tuple[list[tuple[str, dict]], Any]:
    manifest = json.loads((DATA / family / "manifest.json").read_text())
    arrays = np.load(DATA / family / "arrays.npz", allow_pickle=False)
    out, seen = [], {}
    for c in manifest:
        n = seen[c["op"]] = seen.get(c["op"], 0) + 1
        out.append((f"{c['op']}-{n}", c))
    return out, arrays


def array(arrays: Any, key: str) -> np.ndarray:
    """A stored array; strings come back as dfg's object arrays of bytes."""
    if key + "_lens" not in arrays:
        return arrays[key]
    data = arrays[key + "_bytes"].tobytes()
    ends = np.cumsum(arrays[key + "_lens"])
    out = np.empty(len(ends), dtype=object)
    out[:] = [data[e - n:e] for e, n in zip(ends.tolist(), arrays[key + "_lens"].tolist())]
    return out.reshape(tuple(arrays[key + "_shape"]))


def replay(case: dict, arrays: Any) -> None:
    """Run one recorded case through ``invoke`` and compare with TensorFlow's result."""
    flat: list[np.ndarray] = []
    for x in case["inputs"]:
        flat.extend([array(arrays, k) for k in x] if isinstance(x, list)
                    else [array(arrays, x)])
    attrs = {k: np.dtype(v["dtype"]) if isinstance(v, dict) else v
             for k, v in case["attrs"].items()}
    what = f"{case['op']} ({case['note']})"
    if "error" in case:
        with pytest.raises(errors.OpError) as info:
            invoke(case["op"], *flat, attrs=attrs)
        assert type(info.value).__name__ == case["error"], (what, info.value)
        assert str(info.value)
        return
    got = invoke(case["op"], *flat, attrs=attrs)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(case["outputs"]), what
    for i, (g, k) in enumerate(zip(got, case["outputs"])):
        want = array(arrays, k)
        g = np.asarray(g)
        if want.dtype == object:
            assert g.dtype == object and g.shape == want.shape, (what, i, g.dtype, g.shape)
            assert list(g.reshape(-1)) == list(want.reshape(-1)), (what, i)
            continue
        assert g.dtype == want.dtype, (what, i, g.dtype, want.dtype)
        assert g.shape == want.shape, (what, i, g.shape, want.shape)
        if want.dtype.kind in "fc":
            tol = case.get("tol", 1e-6 if want.dtype != np.float16 else 1e-3)
            np.testing.assert_allclose(g, want, rtol=tol, atol=tol, err_msg=f"{what} out {i}")
        else:
            np.testing.assert_array_equal(g, want, err_msg=f"{what} out {i}")


CASES, ARRAYS = load_cases("sparse")


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_sparse_case_equals_tensorflow(case: dict) -> None:
    replay(case, ARRAYS)


def test_every_sparse_kernel_has_cases() -> None:
    ops = {c["op"] for _, c in CASES}
    assert {"SparseTensorDenseMatMul", "SparseReshape", "SparseFillEmptyRows", "SparseAdd",
            "SparseReduceSum", "SparseReduceMax", "SparseReduceSumSparse",
            "SparseReduceMaxSparse", "SparseSlice", "SparseConcat", "SparseReorder",
            "SparseTensorDenseAdd", "SparseDenseCwiseMul", "SparseDenseCwiseAdd",
            "SparseDenseCwiseDiv"} <= ops
    assert sum("error" in c for _, c in CASES) >= 10


def test_sparse_matmul_in_a_graph_names_the_node() -> None:
    """Through a Session: the result is A @ B by definition, and a bad index is an
    InvalidArgumentError naming the node."""
    with B.Graph().as_default() as g:
        idx = B.placeholder(np.int64, [None, 2], name="idx")
        vals = B.placeholder(np.float32, [None], name="vals")
        b = B.placeholder(np.float32, [3, 2], name="b")
        shape = B.constant(np.array([2, 3], np.int64), name="shape")
        B.apply_op("SparseTensorDenseMatMul", [idx, vals, shape, b], name="mm")
    gd = g.as_graph_def()
    bb = np.arange(6, dtype=np.float32).reshape(3, 2)
    dense = np.array([[1, 0, 2], [0, -3, 0]], np.float32)
    i = np.argwhere(dense).astype(np.int64)
    with Session(gd, threads=1) as sess:
        got = sess.run("mm:0", {"idx:0": i, "vals:0": dense[dense != 0], "b:0": bb})
        np.testing.assert_array_equal(got, dense @ bb)
        with pytest.raises(errors.InvalidArgumentError, match="mm"):
            sess.run("mm:0", {"idx:0": np.array([[0, 5]], np.int64),
                              "vals:0": np.ones(1, np.float32), "b:0": bb})
