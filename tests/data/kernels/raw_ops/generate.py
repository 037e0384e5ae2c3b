"""Expected values for tests/kernels/test_raw_ops.py, computed by TensorFlow.

Run (never in CI; needs TensorFlow 2.21 CPU, e.g. in a separate venv):

    /tmp/tfvenv/bin/python tests/data/kernels/raw_ops/generate.py

It calls each op eagerly with ``tf.raw_ops.<Op>`` on small deterministic inputs and writes

* ``manifest.json``: one entry per case: op, input keys, attrs (type attrs as
  ``{"dtype": name}``), output keys or the TensorFlow error class name;
* ``arrays.npz``: every input and output array (strings as fixed-width bytes, no pickles);
* ``graphs/<name>.pbtxt``: small TF1 graphs for ops on variables and tables, run in a TF
  Session; their manifest entries list the steps (targets, fetches) and the fetched values.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402,F401

HERE = Path(__file__).resolve().parent
rawgen.begin(HERE)


# =============================================================================================
v1 = tf.compat.v1


def refvar(value, name):
    """A VariableV2 and its Assign initializer (ref variables, as TF1 graphs have them)."""
    value = np.asarray(value)
    v = raw.VariableV2(shape=value.shape, dtype=tf.as_dtype(value.dtype), name=name)
    return v, raw.Assign(ref=v, value=value).op


def scatter_ref_graph():
    steps = []
    base = np.arange(12, dtype=f32).reshape(4, 3) + 1
    idx = np.array([2, 0, 2], i32)
    upd = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], f32)
    for how in ("Update", "Add", "Sub", "Mul", "Div", "Min", "Max"):
        v, init = refvar(base, f"v{how}")
        out = getattr(raw, f"Scatter{how}")(ref=v, indices=idx, updates=upd)
        steps += [([], [init]), ([out], [])]
    vi, init = refvar(np.arange(6, dtype=i32).reshape(3, 2) - 3, "vint")
    outi = raw.ScatterDiv(ref=vi, indices=np.array([1, 1, 2], i32),
                          updates=np.array([[2, -2], [1, 2], [-2, 3]], i32))
    steps += [([], [init]), ([outi], [])]
    vb, init = refvar(base, "vbad")
    bad = raw.ScatterUpdate(ref=vb, indices=np.array([4], i32), updates=upd[:1])
    steps += [([], [init]), ([bad], [])]
    vs, init = refvar(base, "vscalar")
    sc = raw.ScatterAdd(ref=vs, indices=np.array([[1, 3]], i64), updates=np.float32(10))
    steps += [([], [init]), ([sc], [])]
    nd_idx = np.array([[0, 1], [3, 2], [0, 1]], i32)
    nd_upd = np.array([5, 6, 7], f32)
    for how in ("Update", "Add", "Sub", "Min", "Max"):
        v, init = refvar(base, f"nd{how}")
        out = getattr(raw, f"ScatterNd{how}")(ref=v, indices=nd_idx, updates=nd_upd)
        steps += [([], [init]), ([out], [])]
    vn, init = refvar(base, "ndrows")
    outn = raw.ScatterNdAdd(ref=vn, indices=np.array([[1], [1]], i32), updates=upd[:2])
    steps += [([], [init]), ([outn], [])]
    cnt, init = refvar(np.int32(1), "counter")
    cu = raw.CountUpTo(ref=cnt, limit=3)
    steps += [([], [init]), ([cu], []), ([cu], []), ([cu], [])]
    return steps


def scatter_resource_graph():
    steps = []
    base = np.arange(12, dtype=f32).reshape(4, 3) + 1
    idx = np.array([2, 0, 2], i32)
    upd = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], f32)
    for how in ("Update", "Add", "Sub", "Mul", "Div", "Min", "Max"):
        v = raw.VarHandleOp(dtype=tf.float32, shape=[4, 3], shared_name=f"r{how}", name=f"r{how}")
        init = raw.AssignVariableOp(resource=v, value=base)
        op_ = getattr(raw, f"ResourceScatter{how}")(resource=v, indices=idx, updates=upd)
        with tf.control_dependencies([op_]):
            read = raw.ReadVariableOp(resource=v, dtype=tf.float32)
        steps += [([], [init]), ([read], [])]
    nd_idx = np.array([[0, 1], [3, 2], [0, 1]], i32)
    nd_upd = np.array([5, 6, 7], f32)
    for how in ("Update", "Add", "Sub", "Min", "Max"):
        v = raw.VarHandleOp(dtype=tf.float32, shape=[4, 3], shared_name=f"n{how}", name=f"n{how}")
        init = raw.AssignVariableOp(resource=v, value=base)
        op_ = getattr(raw, f"ResourceScatterNd{how}")(ref=v, indices=nd_idx, updates=nd_upd)
        with tf.control_dependencies([op_]):
            read = raw.ReadVariableOp(resource=v, dtype=tf.float32)
        steps += [([], [init]), ([read], [])]
    v = raw.VarHandleOp(dtype=tf.float32, shape=[4, 3], shared_name="g", name="g")
    init = raw.AssignVariableOp(resource=v, value=base)
    gnd = raw.ResourceGatherNd(resource=v, indices=np.array([[1, 2], [3, 0]], i32),
                               dtype=tf.float32)
    gnd_rows = raw.ResourceGatherNd(resource=v, indices=np.array([[3], [1]], i64),
                                    dtype=tf.float32)
    bad = raw.ResourceScatterAdd(resource=v, indices=np.array([-1], i32), updates=upd[:1])
    c = raw.VarHandleOp(dtype=tf.int64, shape=[], shared_name="c", name="c")
    cinit = raw.AssignVariableOp(resource=c, value=np.int64(5))
    cu = raw.ResourceCountUpTo(resource=c, limit=6, T=tf.int64)
    steps += [([], [init, cinit]), ([gnd, gnd_rows], []), ([], [bad]), ([cu], []), ([cu], [])]
    return steps


graph("scatter_ref", scatter_ref_graph,
      ["ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMin",
       "ScatterMax", "ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "ScatterNdMin",
       "ScatterNdMax", "CountUpTo"])
graph("scatter_resource", scatter_resource_graph,
      ["ResourceScatterUpdate", "ResourceScatterAdd", "ResourceScatterSub",
       "ResourceScatterMul", "ResourceScatterDiv", "ResourceScatterMin", "ResourceScatterMax",
       "ResourceScatterNdUpdate", "ResourceScatterNdAdd", "ResourceScatterNdSub",
       "ResourceScatterNdMin", "ResourceScatterNdMax", "ResourceGatherNd",
       "ResourceCountUpTo"])


from tensorflow.python.framework import op_def_registry  # noqa: E402

HYPER = {"lr": 0.1, "alpha": 0.1, "momentum": 0.9, "epsilon": 1e-3, "rho": 0.9, "beta1": 0.9,
         "beta2": 0.999, "beta1_power": 0.81, "beta2_power": 0.998, "sign_decay": 0.5,
         "beta": 0.8, "logbase": float(np.log(2.0)), "l1": 0.05, "l2": 0.02, "lr_power": -0.5,
         "l2_shrinkage": 0.01}
# optimizer -> (slots, sparse forms exist, ref forms exist, extra attrs)
OPTIMIZERS = {
    "GradientDescent": (1, False, True, {}), "Momentum": (2, True, True, {"use_nesterov": True}),
    "KerasMomentum": (2, True, False, {}), "Adagrad": (2, True, True, {}),
    "AdagradV2": (2, True, True, {}), "Adam": (3, False, True, {}),
    "AdamWithAmsgrad": (4, False, False, {}), "AdaMax": (3, False, True, {}),
    "RMSProp": (3, True, True, {}), "CenteredRMSProp": (4, True, True, {}),
    "Adadelta": (3, True, True, {}), "AddSign": (2, False, True, {}),
    "PowerSign": (2, False, True, {}), "ProximalGradientDescent": (1, True, True, {}),
    "ProximalAdagrad": (2, True, True, {}),
    # FTRL: lr_power -0.5 takes square roots, others pow ("_hyper" overrides HYPER)
    "Ftrl": (3, True, True, {}),
    "FtrlV2": (3, True, True, {"multiply_linear_by_lr": True, "_hyper": {"lr_power": -0.7}}),
    "AdagradDA": (3, True, True, {}),
}
VAR0 = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0], [2.0, 1.5, -0.5]], f32)
GRAD = np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9]], f32)
SPARSE_IDX = np.array([2, 0, 2], i32)


def optimizer_graph():
    steps = []
    names = []
    for name, (n_slots, has_sparse, has_ref, extra) in OPTIMIZERS.items():
        forms = [("ResourceApply", False)] + ([("Apply", False)] if has_ref else [])
        if has_sparse:
            forms += [("ResourceSparseApply", True)] + ([("SparseApply", True)] if has_ref else [])
        for prefix, _sparse in forms:
            op = prefix + name
            names.append(op)
            opdef = op_def_registry.get(op)
            slot_names = [a.name for a in opdef.input_arg[:n_slots]]
            inits, handles, reads = [], [], []
            for k, sn in enumerate(slot_names):
                val = VAR0 if k == 0 else np.abs(VAR0) * 0.3 + 0.1 * (k + 1)
                if sn == "mg":
                    val = VAR0 * 0.05
                if prefix.startswith("Resource"):
                    h = raw.VarHandleOp(dtype=tf.float32, shape=val.shape,
                                        shared_name=f"{op}_{sn}", name=f"{op}_{sn}")
                    inits.append(raw.AssignVariableOp(resource=h, value=val))
                    reads.append((h, None))
                else:
                    h, init = refvar(val, f"{op}_{sn}")
                    inits.append(init)
                    reads.append((h, h))
                handles.append(h)
            kwargs = dict(zip(slot_names, handles))
            for a in opdef.input_arg[n_slots:]:
                if a.name in ("grad", "delta"):
                    kwargs[a.name] = GRAD
                elif a.name == "indices":
                    kwargs[a.name] = SPARSE_IDX
                elif a.name == "global_step":
                    kwargs[a.name] = np.int64(3)
                else:
                    kwargs[a.name] = np.float32(1.0 if (name, a.name) == ("AddSign", "alpha")
                                                else extra.get("_hyper", {}).get(
                                                    a.name, HYPER[a.name]))
            attrs = {k: v for k, v in extra.items() if k in [x.name for x in opdef.attr]}
            apply = getattr(raw, op)(**kwargs, **attrs, name=op)
            apply = apply if isinstance(apply, tf.Operation) else apply.op
            fetch = []
            with tf.control_dependencies([apply]):
                for h, ref in reads:
                    fetch.append(raw.ReadVariableOp(resource=h, dtype=tf.float32)
                                 if ref is None else tf.identity(ref))
            fetch_again = [tf.identity(ref) if r is not None else
                           raw.ReadVariableOp(resource=h, dtype=tf.float32) for h, r in reads]
            steps += [([], inits), ([], [apply]), (fetch, []), (fetch_again, [])]
    return steps, names


_opt_names: list[str] = []


def _optimizers():
    steps, names = optimizer_graph()
    _opt_names.extend(names)
    return steps


graph("optimizers", _optimizers, [], tol=1e-5)
rawgen.CASES[-1]["ops"] = _opt_names


# --- losses ----------------------------------------------------------------------------------
LOGITS = np.array([[2.0, 1.0, 0.1, -1.0], [0.5, 0.5, 3.0, 0.0], [-2.0, 4.0, 1.0, 1.0]], f32)
PROBS = np.array([[0.7, 0.2, 0.1, 0.0], [0.0, 0.0, 1.0, 0.0], [0.25, 0.25, 0.25, 0.25]], f32)
op("SoftmaxCrossEntropyWithLogits", dict(features=LOGITS, labels=PROBS))
op("SoftmaxCrossEntropyWithLogits",
   dict(features=LOGITS.astype(f64), labels=PROBS[1:2].astype(f64)), note="labels broadcast")
op("SoftmaxCrossEntropyWithLogits", dict(features=LOGITS * 100, labels=PROBS), note="large logits")
op("SoftmaxCrossEntropyWithLogits", dict(features=LOGITS[0], labels=PROBS[0]), note="1-D")
op("SparseSoftmaxCrossEntropyWithLogits", dict(features=LOGITS, labels=np.array([0, 2, 1], i32)))
op("SparseSoftmaxCrossEntropyWithLogits",
   dict(features=LOGITS.astype(f64) * 50, labels=np.array([3, 0, 1], i64)))
op("SparseSoftmaxCrossEntropyWithLogits", dict(features=LOGITS, labels=np.array([0, 4, 1], i32)),
   note="label out of range")

# --- segments --------------------------------------------------------------------------------
SDATA = np.arange(20, dtype=f32).reshape(5, 4) - 7
for how in ("Sum", "Mean", "SqrtN"):
    op(f"SparseSegment{how}", dict(data=SDATA, indices=np.array([0, 3, 3, 1, 4], i32),
                                   segment_ids=np.array([0, 0, 2, 2, 2], i32)))
    op(f"SparseSegment{how}WithNumSegments",
       dict(data=SDATA, indices=np.array([4, 0, 1], i64), segment_ids=np.array([1, 1, 3], i32),
            num_segments=np.int32(5)))
op("SparseSegmentSum", dict(data=SDATA, indices=np.array([0, 5], i32),
                            segment_ids=np.array([0, 1], i32)), note="index out of range")
op("SparseSegmentMean", dict(data=SDATA, indices=np.array([0, 1], i32),
                             segment_ids=np.array([1, 0], i32)), note="unsorted ids")
op("SparseSegmentSum", dict(data=np.arange(6, dtype=i32), indices=np.array([5, 1, 2], i32),
                            segment_ids=np.array([0, 0, 1], i64)))

# --- linalg ----------------------------------------------------------------------------------
rng = np.random.RandomState(7)
SPD = rng.randn(2, 3, 3).astype(f64)
SPD = SPD @ SPD.transpose(0, 2, 1) + 3 * np.eye(3)
GEN = rng.randn(2, 3, 3).astype(f32) + 2 * np.eye(3, dtype=f32)
RHS = rng.randn(2, 3, 2).astype(f32)
op("MatrixInverse", dict(input=GEN))
op("MatrixInverse", dict(input=SPD), dict(adjoint=True))
op("MatrixInverse", dict(input=np.ones((2, 2), f32)), note="singular")
op("MatrixDeterminant", dict(input=GEN))
op("MatrixDeterminant", dict(input=SPD))
op("LogMatrixDeterminant", dict(input=GEN.astype(f64) - 2 * np.eye(3)))
op("Cholesky", dict(input=SPD))
op("Cholesky", dict(input=SPD.astype(f32)[0]))
op("MatrixSolve", dict(matrix=GEN, rhs=RHS), tol=1e-4)
op("MatrixSolve", dict(matrix=GEN, rhs=RHS), dict(adjoint=True), tol=1e-4)
op("MatrixSolve", dict(matrix=GEN, rhs=RHS[:, :2]), note="row mismatch")
op("MatrixTriangularSolve", dict(matrix=GEN, rhs=RHS), dict(lower=True, adjoint=False), tol=1e-4)
op("MatrixTriangularSolve", dict(matrix=GEN, rhs=RHS), dict(lower=False, adjoint=True), tol=1e-4)
op("MatrixTriangularSolve", dict(matrix=GEN[0].astype(f64), rhs=RHS.astype(f64)),
   dict(lower=False), note="broadcast batch")
op("MatrixSolveLs", dict(matrix=rng.randn(4, 2).astype(f64), rhs=rng.randn(4, 3).astype(f64),
                         l2_regularizer=np.float64(0.0)))
op("MatrixSolveLs", dict(matrix=rng.randn(2, 4).astype(f64), rhs=rng.randn(2, 1).astype(f64),
                         l2_regularizer=np.float64(0.5)))
op("Cross", dict(a=rng.randn(2, 3).astype(f32), b=rng.randn(2, 3).astype(f32)))
op("Cross", dict(a=np.arange(6, dtype=i32).reshape(2, 3), b=np.array([[1, 0, 2], [3, -1, 0]], i32)))
op("SelfAdjointEigV2", dict(input=SPD), dict(compute_v=False), unspecified=(1,))
op("Svd", dict(input=rng.randn(2, 4, 3).astype(f64)), dict(compute_uv=False),
   unspecified=(1, 2))
op("Svd", dict(input=rng.randn(2, 4, 3).astype(f32)), dict(compute_uv=True), signs=(1, 2),
   tol=1e-4)
op("SelfAdjointEigV2", dict(input=SPD), dict(compute_v=True), signs=(1,))
op("Qr", dict(input=np.triu(rng.randn(3, 3)) + 5 * np.eye(3)), dict(full_matrices=False),
   note="upper triangular with a positive diagonal: the factors are unique")
op("Svd", dict(input=np.diag([3.0, 1.0, 2.0]) @ np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1.0]])),
   dict(compute_uv=True, full_matrices=False), note="a permutation times a diagonal",
   signs=(1, 2))
op("SelfAdjointEigV2", dict(input=np.diag([3.0, -1.0, 2.0]).astype(f32)), dict(compute_v=True))
op("Diag", dict(diagonal=np.arange(1, 5, dtype=f32).reshape(2, 2)))
op("DiagPart", dict(input=np.arange(16, dtype=i32).reshape(2, 2, 2, 2)))
M34 = np.arange(1, 25, dtype=f32).reshape(2, 3, 4)
for align in ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"):
    op("MatrixDiagPartV3", dict(input=M34, k=np.array([-1, 2], i32), padding_value=np.float32(9)),
       dict(align=align))
    op("MatrixDiagV3", dict(diagonal=np.arange(1, 13, dtype=f32).reshape(3, 4),
                            k=np.array([-1, 1], i32), num_rows=np.int32(-1),
                            num_cols=np.int32(-1), padding_value=np.float32(0)), dict(align=align))
    op("MatrixSetDiagV3", dict(input=M34, diagonal=np.arange(2 * 2 * 3, dtype=f32).reshape(2, 2, 3)
                               - 20, k=np.array([0, 1], i32)), dict(align=align))
op("MatrixDiagPartV3", dict(input=M34, k=np.int32(1), padding_value=np.float32(0)))
op("MatrixDiagPartV3", dict(input=M34, k=np.int32(5), padding_value=np.float32(0)),
   note="k out of range")
op("MatrixDiagPartV2", dict(input=M34, k=np.array([-2, 0], i32), padding_value=np.float32(-1)))
op("MatrixDiagV3", dict(diagonal=np.array([[1, 2], [3, 4]], i32), k=np.int32(-1),
                        num_rows=np.int32(-1), num_cols=np.int32(4),
                        padding_value=np.int32(7)))
op("MatrixDiagV2", dict(diagonal=np.array([1, 2, 3], f64), k=np.int32(1), num_rows=np.int32(-1),
                        num_cols=np.int32(-1), padding_value=np.float64(0)))
op("MatrixSetDiag", dict(input=M34, diagonal=np.zeros((2, 3), f32)))
op("MatrixSetDiagV2", dict(input=M34, diagonal=np.ones((2, 3), f32), k=np.int32(-1)))
op("MatrixSetDiagV2", dict(input=M34, diagonal=np.ones((2, 4), f32), k=np.int32(0)),
   note="wrong diagonal shape")


# --- strings ---------------------------------------------------------------------------------
def S(*v):
    a = np.empty(len(v), dtype=object)
    a[:] = [x if isinstance(x, bytes) else x.encode() for x in v]
    return a


ALPHA = bytes(range(33, 127)) * 3
HASH_IN = np.empty(len(range(0, 200, 3)) + 2, dtype=object)
HASH_IN[:] = [ALPHA[i % 7:i % 7 + n] for i, n in enumerate(range(0, 200, 3))] + [
    "héllo wörld".encode(), b"\x01\x02\xff end"]
op("StringToHashBucketFast", dict(input=HASH_IN), dict(num_buckets=2**62 + 7),
   note="lengths 0..198 (every farmhash branch)")
op("StringToHashBucketFast", dict(input=S("a", "b", "hello", "").reshape(2, 2)),
   dict(num_buckets=10))
op("StringToHashBucketStrong", dict(input=HASH_IN), dict(num_buckets=2**62 + 7, key=[1, 2]))
op("StringToHashBucketStrong", dict(input=S("x", "yz", "")), dict(num_buckets=1000,
                                                                   key=[2**62 + 5, 77]))
op("Fingerprint", dict(data=HASH_IN[:9], method=S("farmhash64")[0]))
op("Fingerprint", dict(data=np.arange(12, dtype=i32).reshape(3, 4), method=S("farmhash64")[0]))
op("Fingerprint", dict(data=S("ab", "cd", "ef", "gh").reshape(2, 2),
                       method=S("farmhash64")[0]), note="rows of several strings")
TXT = S("  Hello World  ", "a,b,,c", "", "\tTab\nNL ", "ÀÉÎ ñ", "x")
op("StringStrip", dict(input=TXT))
op("StringLower", dict(input=TXT))
op("StringUpper", dict(input=TXT))
op("StringLower", dict(input=TXT), dict(encoding="utf-8"))
op("StringUpper", dict(input=TXT), dict(encoding="utf-8"))
op("StringLength", dict(input=TXT))
op("StringLength", dict(input=TXT), dict(unit="UTF8_CHAR"))
B64 = S("", "a", "ab", "abc", "abcd", "\xff\xfe?>", "hello world!?")
op("EncodeBase64", dict(input=B64))
op("EncodeBase64", dict(input=B64), dict(pad=True))
op("DecodeBase64", dict(input=S("", "YQ", "YWI=", "YWJj", "w7_DvsO_", "aGVsbG8gd29ybGQhPw==")))
op("DecodeBase64", dict(input=S("a$b")), note="bad character")
op("StringSplit", dict(input=S("a b c", "", "d,e  f", " lead"), delimiter=S(" ,")[0]))
op("StringSplit", dict(input=S("a b c", "", "d,e  f"), delimiter=S(" ")[0]),
   dict(skip_empty=False))
op("StringSplit", dict(input=S("abc", "de"), delimiter=S("")[0]))
op("StringSplitV2", dict(input=S("a b  c", "", "  d\te\n ", "x"), sep=S("")[0]))
op("StringSplitV2", dict(input=S("a<>b<><>c", "", "<>", "q"), sep=S("<>")[0]))
op("StringSplitV2", dict(input=S("a b c d", " x y"), sep=S("")[0]), dict(maxsplit=1))
op("StringSplitV2", dict(input=S("1,2,3,4", ",,"), sep=S(",")[0]), dict(maxsplit=2))
op("RegexReplace", dict(input=TXT, pattern=S("[aeiou]")[0], rewrite=S("<\\0>")[0]))
op("RegexReplace", dict(input=TXT, pattern=S("(l+)")[0], rewrite=S("[\\1]")[0]),
   dict(replace_global=False))
op("RegexReplace", dict(input=TXT, pattern=S("(")[0], rewrite=S("")[0]), note="bad pattern")
op("RegexFullMatch", dict(input=TXT, pattern=S(".*[A-Z].*")[0]))
op("StaticRegexFullMatch", dict(input=TXT), dict(pattern="[a-z,]*"))
GRID = S("a", "b", "c", "d", "e", "f").reshape(2, 3)
op("ReduceJoin", dict(inputs=GRID, reduction_indices=np.int32(1)), dict(separator="-"))
op("ReduceJoin", dict(inputs=GRID, reduction_indices=np.array([0], i32)),
   dict(keep_dims=True))
op("ReduceJoin", dict(inputs=GRID, reduction_indices=np.array([], i32)), dict(separator="."))
op("ReduceJoin", dict(inputs=GRID, reduction_indices=np.array([-1, 0], i32)),
   dict(separator="+"))
op("ReduceJoin", dict(inputs=GRID, reduction_indices=np.int32(2)), note="bad axis")
op("UnsortedSegmentJoin", dict(inputs=GRID.T, segment_ids=np.array([1, 0, 1], i32),
                               num_segments=np.int32(3)), dict(separator=":"))
op("UnsortedSegmentJoin", dict(inputs=GRID, segment_ids=np.array([[0, 1, 0], [1, 1, -1]], i64),
                               num_segments=np.int64(2)), note="negative id")
op("UnsortedSegmentJoin", dict(inputs=GRID, segment_ids=np.array([[0, 1, 0], [1, 1, 0]], i64),
                               num_segments=np.int64(2)))
# the separator comes only once the joined string is non-empty (tf.strings.split then
# reduce_join on a ragged row that starts with empty tokens)
op("UnsortedSegmentJoin", dict(inputs=np.array([b"", b"a", b"", b"", b"", b"b", b"", b"c"],
                                               dtype=object),
                               segment_ids=np.array([0, 0, 0, 1, 1, 1, 2, 2], i32),
                               num_segments=np.int32(4)), dict(separator="|"),
   note="leading empty strings")
op("StringLower", dict(input=np.array([b"AB\xffCD", b"X\xe2\x82", b"\xc0\xafQ", "ÄÖ".encode()],
                                      dtype=object)), dict(encoding="utf-8"),
   note="ill-formed UTF-8")
op("StringUpper", dict(input=np.array([b"ab\xffcd", b"x\xe2\x82", "straße".encode()],
                                      dtype=object)), dict(encoding="utf-8"),
   note="ill-formed UTF-8, ß")

# --- lookup tables ---------------------------------------------------------------------------
(HERE / "vocab.txt").write_text("the\t7\nquick\t-3\nbrown\t12\nfox\t0\n")


def tables_graph():
    steps = []
    t = raw.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name="words")
    init = raw.InitializeTableV2(table_handle=t, keys=S("a", "b", "c"),
                                 values=np.array([10, 20, 30], i64))
    q = tf.constant(S("b", "z", "a", "c").reshape(2, 2))
    find = raw.LookupTableFindV2(table_handle=t, keys=q, default_value=np.int64(-1))
    size = raw.LookupTableSizeV2(table_handle=t)
    exp = raw.LookupTableExportV2(table_handle=t, Tkeys=tf.string, Tvalues=tf.int64)
    steps += [([find], []), ([size], []), ([], [init]), ([find, size], []), ([], [init]),
              ([find], []), (list(exp), [], {"sort": 0})]
    # V1: ref handles
    t1 = raw.HashTable(key_dtype=tf.int64, value_dtype=tf.string, name="v1table")
    init1 = raw.InitializeTable(table_handle=t1, keys=np.array([3, 1, 4], i64),
                                values=S("three", "one", "four"))
    find1 = raw.LookupTableFind(table_handle=t1, keys=np.array([1, 2, 3, 4], i64),
                                default_value=S("?")[0])
    size1 = raw.LookupTableSize(table_handle=t1)
    steps += [([], [init1]), ([find1, size1], [])]
    # mutable
    m = raw.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.float32, shared_name="m")
    keys = np.array([5, 6, 7], i64)
    ins = raw.LookupTableInsertV2(table_handle=m, keys=keys,
                                  values=np.array([0.5, 0.6, 0.7], f32))
    ins2 = raw.LookupTableInsertV2(table_handle=m, keys=np.array([6, 9], i64),
                                   values=np.array([-6.0, 9.0], f32))
    rem = raw.LookupTableRemoveV2(table_handle=m, keys=np.array([5, 42], i64))
    mfind = raw.LookupTableFindV2(table_handle=m, keys=np.array([5, 6, 7, 9, 8], i64),
                                  default_value=np.float32(-1))
    msize = raw.LookupTableSizeV2(table_handle=m)
    mexp = raw.LookupTableExportV2(table_handle=m, Tkeys=tf.int64, Tvalues=tf.float32)
    imp = raw.LookupTableImportV2(table_handle=m, keys=np.array([1, 2], i64),
                                  values=np.array([1.5, 2.5], f32))
    bad = raw.LookupTableInsertV2(table_handle=m, keys=np.array([1, 2], i64),
                                  values=np.array([1.5], f32))
    steps += [([mfind, msize], []), ([], [ins]), ([mfind, msize], []), ([], [ins2]),
              ([mfind], []), ([], [rem]), ([mfind, msize], []), (list(mexp), [], {"sort": 0}),
              ([], [imp]), ([mfind, msize], []), ([], [bad])]
    # a table of vectors
    mt = raw.MutableHashTableOfTensorsV2(key_dtype=tf.string, value_dtype=tf.float32,
                                         value_shape=[2], shared_name="mt")
    tins = raw.LookupTableInsertV2(table_handle=mt, keys=S("x", "y"),
                                   values=np.array([[1, 2], [3, 4]], f32))
    tfind = raw.LookupTableFindV2(table_handle=mt, keys=S("y", "q", "x"),
                                  default_value=np.array([0, -1], f32))
    steps += [([], [tins]), ([tfind], [])]
    # from a text file (the path is fed)
    path = v1.placeholder(tf.string, [], name="vocab_path")
    vt = raw.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name="vocab")
    vinit = raw.InitializeTableFromTextFileV2(table_handle=vt, filename=path, key_index=-2,
                                              value_index=-1, delimiter="\t")
    vt2 = raw.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64, shared_name="vocab2")
    vinit2 = raw.InitializeTableFromTextFileV2(table_handle=vt2, filename=path, key_index=0,
                                               value_index=1, delimiter="\t", vocab_size=3)
    words = S("fox", "quick", "dog", "the", "brown")
    vfind = raw.LookupTableFindV2(table_handle=vt, keys=words, default_value=np.int64(-1))
    vfind2 = raw.LookupTableFindV2(table_handle=vt2, keys=words, default_value=np.int64(-1))
    steps += [([], [vinit, vinit2], {"files": {path: "vocab.txt"}}), ([vfind, vfind2], [])]
    # V1 mutable tables and the V1 forms of the other table ops
    m1 = raw.MutableHashTable(key_dtype=tf.string, value_dtype=tf.int64, name="m1")
    m1ins = raw.LookupTableInsert(table_handle=m1, keys=S("k1", "k2"),
                                  values=np.array([1, 2], i64))
    m1exp = raw.LookupTableExport(table_handle=m1, Tkeys=tf.string, Tvalues=tf.int64)
    m1imp = raw.LookupTableImport(table_handle=m1, keys=S("k9"), values=np.array([9], i64))
    m1find = raw.LookupTableFind(table_handle=m1, keys=S("k1", "k9"),
                                 default_value=np.int64(0))
    mt1 = raw.MutableHashTableOfTensors(key_dtype=tf.int64, value_dtype=tf.int32,
                                        value_shape=[3], name="mt1")
    mt1ins = raw.LookupTableInsert(table_handle=mt1, keys=np.array([4], i64),
                                   values=np.array([[1, 2, 3]], i32))
    mt1find = raw.LookupTableFind(table_handle=mt1, keys=np.array([[4], [5]], i64),
                                  default_value=np.array([0, 0, -1], i32))
    f1 = raw.HashTable(key_dtype=tf.int64, value_dtype=tf.string, name="f1")
    f1init = raw.InitializeTableFromTextFile(table_handle=f1, filename=path, key_index=-1,
                                             value_index=0, delimiter="\t")
    f1find = raw.LookupTableFind(table_handle=f1, keys=np.array([0, 3, 4], i64),
                                 default_value=S("UNK")[0])
    steps += [([], [m1ins]), (list(m1exp), [], {"sort": 0}), ([], [m1imp]), ([m1find], []),
              ([], [mt1ins]), ([mt1find], []),
              ([], [f1init], {"files": {path: "vocab.txt"}}), ([f1find], [])]
    return steps


graph("tables", tables_graph,
      ["HashTableV2", "InitializeTableV2", "LookupTableFindV2", "LookupTableSizeV2",
       "LookupTableExportV2", "HashTable", "InitializeTable", "LookupTableFind",
       "LookupTableSize", "MutableHashTableV2", "LookupTableInsertV2", "LookupTableRemoveV2",
       "LookupTableImportV2", "MutableHashTableOfTensorsV2", "InitializeTableFromTextFileV2",
       "MutableHashTable", "LookupTableInsert", "LookupTableExport", "LookupTableImport",
       "MutableHashTableOfTensors", "InitializeTableFromTextFile"])


def misc_graph():
    """Ops whose kernels other files hold but that no other test ran."""
    steps = []
    v, init = refvar(np.array([5.0, 6.0], f32), "plain")
    sub = raw.AssignSub(ref=v, value=np.array([1.0, 4.0], f32))
    ident = raw.RefIdentity(input=v)
    steps += [([], [init]), ([sub], []), ([tf.identity(ident)], [])]
    h = raw.VarHandleOp(dtype=tf.float32, shape=[3, 2], shared_name="rv", name="rv")
    hinit = raw.AssignVariableOp(resource=h, value=np.arange(6, dtype=f32).reshape(3, 2))
    shape = raw.VariableShape(input=h, out_type=tf.int64)
    gather = raw.ResourceGather(resource=h, indices=np.array([2, 0], i32), dtype=tf.float32)
    destroy = raw.DestroyResourceOp(resource=h, ignore_lookup_error=False)
    steps += [([], [hinit]), ([shape, gather], []), ([], [destroy]), ([], [destroy])]
    x = tf.constant(np.array([[1.0, 2.0], [3.0, 4.0]], f32))
    ens = raw.EnsureShape(input=x, shape=[2, None])
    xu = v1.placeholder_with_default(x, [None, None])  # shape unknown when the graph is built
    bad = raw.EnsureShape(input=xu, shape=[3, 2])
    pg = raw.PreventGradient(input=x, message="no")
    cn = raw.CheckNumericsV2(tensor=x, message="finite")
    rev = raw.Reverse(tensor=x, dims=[True, False])
    trig = raw.ControlTrigger()
    printed = raw.Print(input=x, data=[x], message="x = ")
    print2 = raw.PrintV2(input=tf.constant("hello"), output_stream="stderr")
    steps += [([ens, pg, cn, rev, printed], [trig, print2]), ([bad], [])]
    return steps


graph("misc", misc_graph,
      ["AssignSub", "RefIdentity", "VariableShape", "ResourceGather", "DestroyResourceOp",
       "EnsureShape", "PreventGradient", "CheckNumericsV2", "Reverse", "Print", "PrintV2",
       "ControlTrigger"])

# --- Cast with Truncate: the mantissa cut, not rounded (to bfloat16 as well) -----------------
TRUNC_X = np.array([65519.0, 1.0078125, -2.984375, 1.99999, -0.3333333, np.nan, np.inf,
                    3.0e38, 1.0e-40], f32)


def cast_truncate_graph():
    x = tf.constant(TRUNC_X)
    outs = [tf.cast(raw.Cast(x=x, DstT=tf.bfloat16, Truncate=True), tf.float32),
            tf.cast(raw.Cast(x=x, DstT=tf.bfloat16, Truncate=False), tf.float32),
            tf.cast(raw.Cast(x=x, DstT=tf.float16, Truncate=True), tf.float32),
            raw.Cast(x=tf.constant(TRUNC_X.astype(np.float64) * (1 + 1e-9)), DstT=tf.float32,
                     Truncate=True)]
    return [(outs, [])]


graph("cast_truncate", cast_truncate_graph, ["Cast"])

# --- array -----------------------------------------------------------------------------------
A34 = np.arange(12, dtype=f32).reshape(3, 4)
# TopKV2 of whole rows holding NaN (tf.sort, tf.argsort): NaN compares false both ways, so
# where it lands is std::sort's doing (insertion sort up to 16 columns, introsort above)
NAN_ROWS = np.array([[3, np.nan, -1, np.inf, -np.inf], [np.nan, 2, 2, np.nan, 0.5]], f32)
op("TopKV2", dict(input=NAN_ROWS, k=np.int32(5)), note="NaN, short rows")
op("TopKV2", dict(input=np.where(np.arange(40) % 7 == 3, np.nan,
                                 np.round(np.sin(np.arange(40.0)) * 4)).astype(f32)
                  .reshape(1, 40), k=np.int32(40)), note="NaN and ties, introsort")
op("TopKV2", dict(input=-NAN_ROWS.astype(np.float64), k=np.int32(5)), note="NaN, float64")
NAN40 = np.where(np.arange(80) % 5 == 2, np.nan, np.round(np.cos(np.arange(80.0)) * 3)) \
    .astype(f32).reshape(2, 40)
op("TopKV2", dict(input=NAN_ROWS, k=np.int32(3)), note="NaN, k < n: TF's TopN heap")
op("TopKV2", dict(input=NAN40, k=np.int32(7)), note="NaN and ties, k < n")
op("TopKV2", dict(input=NAN40, k=np.int32(7)), dict(sorted=False), note="NaN, unsorted")
op("Roll", dict(input=A34, shift=np.int32(1), axis=np.int32(1)))
op("Roll", dict(input=A34, shift=np.array([-1, 5], i64), axis=np.array([0, -1], i64)))
op("Roll", dict(input=A34, shift=np.array([1, 2], i32), axis=np.array([0, 1, 1], i32)),
   note="size mismatch")
op("UniqueV2", dict(x=np.array([3, 1, 3, 2, 1], i64), axis=np.array([0], i32)))
op("UniqueV2", dict(x=np.array([2.5, 2.5, -1.0], f32), axis=np.array([], i64)),
   dict(out_idx=tf.int64))
U = np.array([[1, 2, 1, 3], [0, 5, 0, 5], [1, 2, 1, 3]], i32)
op("UniqueV2", dict(x=U, axis=np.array([1], i32)), note="columns")
op("UniqueV2", dict(x=U, axis=np.array([-2], i64)), dict(out_idx=tf.int64), note="rows")
op("UniqueV2", dict(x=U, axis=np.array([2], i32)), note="axis out of range")
op("UniqueV2", dict(x=U, axis=np.array([], i32)), note="no axis needs a vector")
op("DynamicPartition", dict(data=A34, partitions=np.array([1, 0, 1], i32)),
   dict(num_partitions=3))
op("DynamicPartition", dict(data=A34, partitions=np.array([[0, 1, 1, 0], [2, 2, 0, 1],
                                                           [1, 1, 1, 1]], i32)),
   dict(num_partitions=3))
op("DynamicPartition", dict(data=A34, partitions=np.array([1, 3, 0], i32)),
   dict(num_partitions=3), note="partition out of range")
for stitch in ("DynamicStitch", "ParallelDynamicStitch"):
    op(stitch, dict(indices=[np.array([0, 2], i32), np.array([[1], [4]], i32)],
                    data=[np.array([[1, 2], [3, 4]], f32), np.array([[[5, 6]], [[7, 8]]], f32)]))
op("DynamicStitch", dict(indices=[np.array([1, 0], i32), np.array([1], i32)],
                         data=[np.array([10, 20], i64), np.array([30], i64)]),
   note="a later piece wins")
op("Bincount", dict(arr=np.array([1, 1, 3, 0, 7], i32), size=np.int32(5),
                    weights=np.array([], f32)))
op("Bincount", dict(arr=np.array([1, 1, 3, 0], i32), size=np.int32(4),
                    weights=np.array([0.5, 1.0, 2.0, 3.0], f64)))
op("Bincount", dict(arr=np.array([1, -1], i32), size=np.int32(4), weights=np.array([], f32)),
   note="negative value")
op("DenseBincount", dict(input=np.array([[1, 2, 2], [0, 4, 9]], i64), size=np.int64(5),
                         weights=np.array([], i32)))
op("DenseBincount", dict(input=np.array([1, 2, 2, 3], i32), size=np.int32(4),
                         weights=np.array([1.0, 2.0, 3.0, 4.0], f32)))
op("DenseBincount", dict(input=np.array([1, 2, 2, 3], i32), size=np.int32(4),
                         weights=np.array([], f32)), dict(binary_output=True))
SORTED = np.array([[1, 3, 3, 7], [0, 0, 5, 9]], f32)
VALS = np.array([[3, 0, 8], [0, 5, 10]], f32)
op("LowerBound", dict(sorted_inputs=SORTED, values=VALS))
op("UpperBound", dict(sorted_inputs=SORTED, values=VALS), dict(out_type=tf.int64))

# --- ops other files hold that no other test ran ---------------------------------------------
op("FusedBatchNormGrad", dict(y_backprop=np.ones((1, 2, 2, 3), f32) * 0.5,
                              x=np.arange(12, dtype=f32).reshape(1, 2, 2, 3) / 7,
                              scale=np.array([1.0, 2.0, 0.5], f32),
                              reserve_space_1=np.array([0.7, 0.8, 0.9], f32),
                              reserve_space_2=np.array([0.3, 0.2, 0.1], f32)),
   dict(epsilon=0.001, is_training=False), tol=1e-4, ignore=(3, 4))
# ---------------------------------------------------------------------------------------------
if __name__ == "__main__":
    write()
