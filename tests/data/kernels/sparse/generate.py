"""Expected values for tests/test_sparse_kernels.py, computed by TensorFlow.

Run (never in CI; needs TensorFlow 2.21 CPU in a separate venv)::

    /tmp/tfvenv/bin/python tests/data/kernels/sparse/generate.py

Each case calls ``tf.raw_ops.<Op>`` eagerly on small deterministic inputs and records, in
``manifest.json``, the op, its input keys, attrs and output keys, or the TensorFlow error class
(bad indices, shape mismatches); ``arrays.npz`` holds every array (no pickles; a string
array KEY as KEY_bytes, KEY_lens and KEY_shape; a type attr as {"dtype": name}). Its
``Recorder`` also serves tests/data/kernels/detection/generate.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
raw = tf.raw_ops
f16, f32, f64, i32, i64 = np.float16, np.float32, np.float64, np.int32, np.int64


class Recorder:
    def __init__(self) -> None:
        self.cases: list[dict] = []
        self.arrays: dict[str, np.ndarray] = {}

    def _store(self, v) -> str:
        a = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
        key = f"a{len(self.arrays)}"
        if a.dtype == object:
            # strings (serialized protos may end in NUL bytes, which an "S" array drops): the
            # bytes concatenated, each element's length, and the shape
            items = [bytes(x) for x in a.reshape(-1)]
            self.arrays[key + "_bytes"] = np.frombuffer(b"".join(items), np.uint8)
            self.arrays[key + "_lens"] = np.array([len(x) for x in items], np.int64)
            self.arrays[key + "_shape"] = np.array(a.shape, np.int64)
        self.arrays[key] = a if a.dtype != object else np.zeros(0)
        return key

    def op(self, name: str, inputs: dict, attrs: dict | None = None, note: str = "",
           tol: float | None = None, list_inputs: tuple = ()) -> None:
        """One eager call; inputs in OpDef order; ``list_inputs`` names list-valued ones."""
        attrs = attrs or {}
        entry: dict = {"op": name, "note": note,
                       "attrs": {k: {"dtype": v.name} if isinstance(v, tf.DType) else v
                                 for k, v in attrs.items()}}
        if tol is not None:
            entry["tol"] = tol
        entry["inputs"] = [[self._store(x) for x in v] if k in list_inputs else self._store(v)
                           for k, v in inputs.items()]
        tf_in = {k: ([tf.constant(x) for x in v] if k in list_inputs else tf.constant(v))
                 for k, v in inputs.items()}
        try:
            r = getattr(raw, name)(**tf_in, **attrs)
            outs = list(r) if isinstance(r, (tuple, list)) else [r]
            entry["outputs"] = [self._store(x) for x in outs]
        except tf.errors.OpError as e:
            entry["error"] = type(e).__name__
            msg = e.message.split("}} ", 1)[-1] if e.message.startswith("{{") else e.message
            entry["message"] = msg.splitlines()[0][:200]
        self.cases.append(entry)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "manifest.json").write_text(json.dumps(self.cases, indent=1) + "\n")
        np.savez_compressed(folder / "arrays.npz", **self.arrays)
        print(f"{folder}: {len(self.cases)} cases, {len(self.arrays)} arrays")


def sparse_cases(R: Recorder) -> None:
    rng = np.random.default_rng(7)

    def sp(shape, nnz, dtype=f32, canonical=True, seed=None):
        g = np.random.default_rng(seed) if seed is not None else rng
        flat = g.choice(int(np.prod(shape)), nnz, replace=False)
        if canonical:
            flat = np.sort(flat)
        idx = np.stack(np.unravel_index(flat, shape), axis=1).astype(i64)
        if np.dtype(dtype).kind == "f":
            vals = g.standard_normal(nnz).astype(dtype)
        else:
            vals = g.integers(-9, 10, nnz).astype(dtype)
        return idx, vals, np.array(shape, i64)

    # SparseTensorDenseMatMul
    for adj_a, adj_b, dt in ((False, False, f32), (True, False, f32), (False, True, f64),
                             (True, True, f32), (False, False, i32)):
        idx, v, s = sp((4, 5), 7, dt)
        b_shape = (5, 3) if not adj_a else (4, 3)
        b = rng.standard_normal(b_shape[::-1] if adj_b else b_shape)
        b = b.astype(dt) if np.dtype(dt).kind == "f" else rng.integers(-5, 5, b.shape).astype(dt)
        R.op("SparseTensorDenseMatMul", {"a_indices": idx, "a_values": v, "a_shape": s, "b": b},
             {"adjoint_a": adj_a, "adjoint_b": adj_b}, f"adj {adj_a} {adj_b} {dt.__name__}")
    idx, v, s = sp((4, 5), 6)
    R.op("SparseTensorDenseMatMul", {"a_indices": idx.astype(i32), "a_values": v, "a_shape": s,
                                     "b": rng.standard_normal((5, 2)).astype(f32)},
         note="int32 indices")
    dup = np.array([[0, 1], [0, 1], [2, 0]], i64)
    R.op("SparseTensorDenseMatMul", {"a_indices": dup, "a_values": np.array([1, 2, 3], f32),
                                     "a_shape": np.array([3, 2], i64),
                                     "b": np.arange(6, dtype=f32).reshape(2, 3)},
         note="repeated index adds up")
    R.op("SparseTensorDenseMatMul", {"a_indices": idx, "a_values": v, "a_shape": s,
                                     "b": np.ones((4, 2), f32)}, note="inner mismatch")
    bad = idx.copy()
    bad[2, 1] = 9
    R.op("SparseTensorDenseMatMul", {"a_indices": bad, "a_values": v, "a_shape": s,
                                     "b": np.ones((5, 2), f32)}, note="column out of bounds")
    bad = idx.copy()
    bad[1, 0] = 7
    R.op("SparseTensorDenseMatMul", {"a_indices": bad, "a_values": v, "a_shape": s,
                                     "b": np.ones((5, 2), f32)}, note="row out of bounds")

    # SparseReshape
    idx, v, s = sp((2, 3, 4), 9)
    for new in ([6, 4], [4, -1], [-1], [2, 2, 3, 2]):
        R.op("SparseReshape", {"input_indices": idx, "input_shape": s,
                               "new_shape": np.array(new, i64)}, note=str(new))
    R.op("SparseReshape", {"input_indices": idx, "input_shape": s,
                           "new_shape": np.array([5, -1], i64)}, note="not divisible")
    R.op("SparseReshape", {"input_indices": idx, "input_shape": s,
                           "new_shape": np.array([-1, -1], i64)}, note="two -1")
    R.op("SparseReshape", {"input_indices": idx, "input_shape": s,
                           "new_shape": np.array([5, 5], i64)}, note="size mismatch")
    R.op("SparseReshape", {"input_indices": np.zeros((0, 2), i64),
                           "input_shape": np.array([0, 3], i64),
                           "new_shape": np.array([3, 0], i64)}, note="empty")

    # SparseFillEmptyRows
    fi = np.array([[3, 1], [0, 0], [3, 0], [1, 2]], i64)
    fv = np.array([1, 2, 3, 4], f32)
    R.op("SparseFillEmptyRows", {"indices": fi, "values": fv,
                                 "dense_shape": np.array([6, 3], i64),
                                 "default_value": np.float32(-1)}, note="unordered rows")
    idx, v, s = sp((5, 4), 6, i64)
    R.op("SparseFillEmptyRows", {"indices": idx, "values": v, "dense_shape": s,
                                 "default_value": np.int64(42)}, note="int64 values")
    R.op("SparseFillEmptyRows", {"indices": np.zeros((0, 2), i64), "values": np.zeros(0, f32),
                                 "dense_shape": np.array([3, 2], i64),
                                 "default_value": np.float32(7)}, note="all empty")
    R.op("SparseFillEmptyRows", {"indices": np.array([[5, 0]], i64),
                                 "values": np.array([1], f32),
                                 "dense_shape": np.array([3, 2], i64),
                                 "default_value": np.float32(0)}, note="row out of range")

    # SparseSegment* already exist: real graphs (embedding_lookup_sparse) are covered there.

    # SparseAdd
    a = sp((4, 4), 6, seed=1)
    b = sp((4, 4), 5, seed=2)
    R.op("SparseAdd", {"a_indices": a[0], "a_values": a[1], "a_shape": a[2],
                       "b_indices": b[0], "b_values": b[1], "b_shape": b[2],
                       "thresh": np.float32(0)}, note="canonical")
    bv = -a[1][:3].copy()
    bv[0] += np.float32(0.05)
    R.op("SparseAdd", {"a_indices": a[0], "a_values": a[1], "a_shape": a[2],
                       "b_indices": a[0][:3], "b_values": bv, "b_shape": a[2],
                       "thresh": np.float32(0.1)}, note="cancelling sums under thresh")
    R.op("SparseAdd", {"a_indices": a[0][::-1].copy(), "a_values": a[1][::-1].copy(),
                       "a_shape": a[2], "b_indices": b[0], "b_values": b[1],
                       "b_shape": b[2], "thresh": np.float32(0)}, note="non-canonical a")
    ai = sp((3, 3), 4, i32, seed=3)
    bi = sp((3, 3), 4, i32, seed=4)
    R.op("SparseAdd", {"a_indices": ai[0], "a_values": ai[1], "a_shape": ai[2],
                       "b_indices": bi[0], "b_values": bi[1], "b_shape": bi[2],
                       "thresh": np.int32(0)}, note="int32")
    R.op("SparseAdd", {"a_indices": a[0], "a_values": a[1], "a_shape": a[2],
                       "b_indices": b[0], "b_values": b[1], "b_shape": np.array([4, 5], i64),
                       "thresh": np.float32(0)}, note="shape mismatch")

    # SparseReduceSum / Max (+Sparse)
    idx, v, s = sp((3, 4, 2), 10)
    idx2 = np.concatenate([idx, idx[:2]])
    v2 = np.concatenate([v, v[:2] * 2])
    for axes, keep in (([1], False), ([0, 2], True), ([-1], False), ([0, 1, 2], False),
                       ([], False)):
        for op in ("SparseReduceSum", "SparseReduceMax", "SparseReduceSumSparse",
                   "SparseReduceMaxSparse"):
            R.op(op, {"input_indices": idx, "input_values": v, "input_shape": s,
                      "reduction_axes": np.array(axes, i32)}, {"keep_dims": keep},
                 note=f"axes {axes} keep {keep}", tol=1e-6)
    R.op("SparseReduceSum", {"input_indices": idx2, "input_values": v2, "input_shape": s,
                             "reduction_axes": np.array([0], i32)}, note="duplicates",
         tol=1e-6)
    R.op("SparseReduceMax", {"input_indices": idx[::-1].copy(), "input_values": v[::-1].copy(),
                             "input_shape": s, "reduction_axes": np.array([2], i32)},
         note="unordered")
    R.op("SparseReduceSum", {"input_indices": idx, "input_values": v, "input_shape": s,
                             "reduction_axes": np.array([3], i32)}, note="bad axis")

    # SparseSlice
    idx, v, s = sp((5, 6), 12)
    for start, size in (([1, 2], [3, 3]), ([0, 0], [5, 6]), ([3, 4], [9, 9]), ([5, 0], [2, 2])):
        R.op("SparseSlice", {"indices": idx, "values": v, "shape": s,
                             "start": np.array(start, i64), "size": np.array(size, i64)},
             note=f"{start} {size}")

    # SparseConcat
    p1 = sp((2, 3), 3, seed=5)
    p2 = sp((2, 4), 4, seed=6)
    p3 = sp((2, 2), 2, seed=7)
    R.op("SparseConcat", {"indices": [p1[0], p2[0], p3[0]], "values": [p1[1], p2[1], p3[1]],
                          "shapes": [p1[2], p2[2], p3[2]]}, {"concat_dim": 1},
         list_inputs=("indices", "values", "shapes"), note="dim 1")
    q1 = sp((3, 2), 3, seed=8)
    q2 = sp((1, 2), 1, seed=9)
    R.op("SparseConcat", {"indices": [q1[0], q2[0]], "values": [q1[1], q2[1]],
                          "shapes": [q1[2], q2[2]]}, {"concat_dim": -2},
         list_inputs=("indices", "values", "shapes"), note="dim -2")
    R.op("SparseConcat", {"indices": [p1[0][::-1].copy(), p2[0]],
                          "values": [p1[1][::-1].copy(), p2[1]], "shapes": [p1[2], p2[2]]},
         {"concat_dim": 1}, list_inputs=("indices", "values", "shapes"), note="unordered")
    R.op("SparseConcat", {"indices": [p1[0], q1[0]], "values": [p1[1], q1[1]],
                          "shapes": [p1[2], q1[2]]}, {"concat_dim": 1},
         list_inputs=("indices", "values", "shapes"), note="mismatched other dim")

    # SparseReorder, SparseTensorDenseAdd, SparseDenseCwise*
    idx, v, s = sp((3, 4), 6, canonical=False)
    R.op("SparseReorder", {"input_indices": idx, "input_values": v, "input_shape": s})
    dense = rng.standard_normal((3, 4)).astype(f32)
    R.op("SparseTensorDenseAdd", {"a_indices": idx, "a_values": v, "a_shape": s, "b": dense})
    R.op("SparseTensorDenseAdd", {"a_indices": idx, "a_values": v, "a_shape": s,
                                  "b": dense[:, :3].copy()}, note="shape mismatch")
    for op in ("SparseDenseCwiseMul", "SparseDenseCwiseAdd", "SparseDenseCwiseDiv"):
        R.op(op, {"sp_indices": idx, "sp_values": v, "sp_shape": s, "dense": dense})
        R.op(op, {"sp_indices": idx, "sp_values": v, "sp_shape": s,
                  "dense": dense[:1, :].copy()}, note="broadcast row")
        R.op(op, {"sp_indices": idx, "sp_values": v, "sp_shape": s,
                  "dense": np.float32(2.5)}, note="scalar")
    R.op("SparseDenseCwiseMul", {"sp_indices": idx, "sp_values": v, "sp_shape": s,
                                 "dense": dense[:2].copy()}, note="incompatible")

    # SerializeSparse / SerializeManySparse / DeserializeSparse / DeserializeManySparse
    idx, v, s = sp((3, 4), 5)
    R.op("SerializeSparse", {"sparse_indices": idx, "sparse_values": v, "sparse_shape": s})
    si, sv, ss = sp((2, 3), 3, i32)
    R.op("SerializeSparse", {"sparse_indices": si, "sparse_values": sv, "sparse_shape": ss},
         note="int32 values")
    R.op("SerializeSparse", {"sparse_indices": np.zeros((0, 2), i64),
                             "sparse_values": np.zeros(0, f64),
                             "sparse_shape": np.array([0, 5], i64)}, note="empty")
    idx3, v3, s3 = sp((3, 2, 4), 7)
    R.op("SerializeManySparse", {"sparse_indices": idx3, "sparse_values": v3,
                                 "sparse_shape": s3})
    one = raw.SerializeSparse(sparse_indices=idx, sparse_values=v, sparse_shape=s).numpy()
    many = raw.SerializeManySparse(sparse_indices=idx3, sparse_values=v3,
                                   sparse_shape=s3).numpy()
    R.op("DeserializeSparse", {"serialized_sparse": one}, {"dtype": tf.float32})
    R.op("DeserializeSparse", {"serialized_sparse": many}, {"dtype": tf.float32},
         note="minibatch of 3")
    R.op("DeserializeSparse", {"serialized_sparse": many.reshape(3, 1, 3)},
         {"dtype": tf.float32}, note="two leading dims")
    R.op("DeserializeManySparse", {"serialized_sparse": many}, {"dtype": tf.float32})
    R.op("DeserializeSparse", {"serialized_sparse": one}, {"dtype": tf.int32},
         note="dtype mismatch")


def main() -> None:
    r = Recorder()
    sparse_cases(r)
    r.write(HERE)


if __name__ == "__main__":
    main()
