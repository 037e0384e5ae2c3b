"""Expected values for the CTC, fused-RNN and linear-algebra kernels, computed by TensorFlow 2.21
(never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_rnn_linalg/generate.py

Also writes ``refused.json``: the legacy ops TensorFlow 2.21 no longer runs (removed from the
GraphDef version, or with no CPU kernel), each with the error class TensorFlow raises; dfg
registers no kernel for them (tests/kernels/test_rnn_linalg.py checks both).
"""

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402

rawgen.begin(HERE)
rs = np.random.RandomState(1234)
c64, c128, f16 = np.complex64, np.complex128, np.float16


def randn(*shape, dtype=f32, scale=1.0):
    return (rs.randn(*shape) * scale).astype(dtype)


def crandn(*shape, dtype=c128):
    return (rs.randn(*shape) + 1j * rs.randn(*shape)).astype(dtype)


# ============================================================================================
# CTC loss
def sparse_labels(seqs):
    ind = [[b, t] for b, s in enumerate(seqs) for t in range(len(s))]
    val = [v for s in seqs for v in s]
    return np.array(ind, i64).reshape(-1, 2), np.array(val, i32)


def ctc(x, seqs, lens, note="", tol=None, **attrs):
    ind, val = sparse_labels(seqs)
    op("CTCLoss", dict(inputs=x, labels_indices=ind, labels_values=val,
                       sequence_length=np.array(lens, i32)), attrs, tol=tol, note=note)


x = randn(6, 3, 5)
ctc(x, [[0, 1], [2, 2, 1], [3]], [6, 5, 4], "basic")
ctc(x, [[0, 1], [2, 2, 1], [3]], [6, 5, 4], "collapse", preprocess_collapse_repeated=True)
ctc(x, [[0, 1], [2, 2, 1], [3]], [6, 6, 6], "no merge", ctc_merge_repeated=False)
ctc(x, [[0, 1], [2, 2, 1], [3]], [6, 6, 6], "collapse, no merge",
    preprocess_collapse_repeated=True, ctc_merge_repeated=False)
ctc(x, [[1, 1, 1], [2, 0, 2], [3, 3]], [3, 6, 2], "repeats need more time: inf loss")
ctc(x, [[0, 1, 2, 3], [2], [1]], [3, 0, 6], "longer than input ignored, empty sequence",
    ignore_longer_outputs_than_inputs=True)
ctc(x, [[0, 4, 4], [2, 4], [1]], [6, 6, 6], "trailing blanks dropped")
ctc(x.astype(f64), [[0, 1], [2, 2, 1], [3]], [6, 5, 4], "float64", tol=3e-7)
ctc(randn(20, 2, 4, scale=3.0), [[0, 1, 2, 0, 1], [2, 2, 2]], [20, 17], "long, peaked")
ctc(randn(1, 1, 3), [[0]], [1], "one step")
ctc(x, [[0, 1, 2, 3], [2], [1]], [3, 6, 6], "error: longer than input")
ctc(x, [[0, 4, 1], [2], [1]], [6, 6, 6], "error: label after blank")
ctc(x, [[0, -1], [2], [1]], [6, 6, 6], "error: negative label")
ctc(x, [[0, 1], [], [1]], [6, 6, 6], "error: empty label")
ctc(x, [[0, 1], [2], [1]], [6, 7, 6], "error: sequence_length > max_time")
ctc(x, [[0, 1], [2], [1]], [6, -1, 6], "error: negative sequence_length")
ctc(x, [[0, 1], [2], [1]], [6, 6], "error: batch mismatch")
op("CTCLoss", dict(inputs=x, labels_indices=np.array([[1, 0], [0, 0]], i64),
                   labels_values=np.array([1, 2], i32),
                   sequence_length=np.array([6, 6, 6], i32)), note="error: unordered indices")
op("CTCLoss", dict(inputs=x[0], labels_indices=np.array([[0, 0]], i64),
                   labels_values=np.array([1], i32), sequence_length=np.array([6], i32)),
   note="error: rank")


# CTC greedy decoder
def greedy(x, lens, note="", **attrs):
    op("CTCGreedyDecoder", dict(inputs=x, sequence_length=np.array(lens, i32)), attrs,
       note=note)


xg = randn(7, 3, 4)
xg[2, 0] = xg[1, 0]  # a repeat of the same class in consecutive steps
greedy(xg, [7, 5, 0], "default")
greedy(xg, [7, 5, 0], "merge", merge_repeated=True)
greedy(xg, [7, 7, 7], "blank 0", blank_index=0)
greedy(xg, [7, 7, 7], "blank -2, merge", blank_index=-2, merge_repeated=True)
greedy(xg.astype(f64), [7, 3, 1], "float64", merge_repeated=True)
xn = xg.copy()
xn[0, 0, 2] = np.nan
xn[1, 1, 0] = np.nan
greedy(xn, [7, 7, 7], "NaN")
greedy(np.zeros((3, 2, 4), f32), [3, 3], "ties: first max")
greedy(xg, [7, 5, 0], "error: blank_index", blank_index=4)
greedy(xg, [7, 8, 0], "error: sequence_length > max_time")
greedy(xg, [7, 5], "error: batch mismatch")
greedy(np.zeros((0, 2, 4), f32), [0, 0], "error: empty")


# CTC beam search decoder
def beam(x, lens, width, top, note="", tol=None, **attrs):
    op("CTCBeamSearchDecoder", dict(inputs=x, sequence_length=np.array(lens, i32)),
       dict(beam_width=width, top_paths=top, **attrs), tol=tol, note=note)


xb = randn(8, 3, 5, scale=2.0)
beam(xb, [8, 6, 3], 4, 2, "merge")
beam(xb, [8, 6, 3], 4, 3, "no merge", merge_repeated=False)
beam(xb, [8, 8, 8], 1, 1, "width 1")
beam(xb, [8, 8, 8], 10, 3, "wide")
beam(randn(12, 1, 6, scale=1.5), [12], 20, 2, "wider than 16 (introsort)")
beam(xb.astype(f64), [8, 6, 3], 3, 2, "float64", tol=1e-12)
beam(np.zeros((4, 2, 3), f32), [4, 2], 3, 3, "ties: uniform")
beam(np.zeros((5, 1, 4), f32), [5], 20, 4, "ties: uniform, wide")
beam(np.round(randn(6, 2, 4)), [6, 6], 5, 3, "ties: rounded logits")
beam(xb, [8, 0, 3], 4, 1, "empty sequence")
beam(xb, [8, 0, 3], 4, 2, "error: fewer leaves than paths")
beam(xb, [8, 6, 3], 2, 3, "error: more paths than beam width")
beam(xb, [8, 9, 3], 2, 1, "error: sequence_length > max_time")


# ============================================================================================
# Fused RNN cells (cases share their inputs where they can, to keep arrays.npz small)
def lstm_params(batch, inp, cell, dtype=f32):
    return dict(cs_prev=randn(batch, cell, dtype=dtype), h_prev=randn(batch, cell, dtype=dtype),
                w=randn(inp + cell, 4 * cell, dtype=dtype, scale=0.5),
                wci=randn(cell, dtype=dtype), wcf=randn(cell, dtype=dtype),
                wco=randn(cell, dtype=dtype), b=randn(4 * cell, dtype=dtype, scale=0.5))


p = dict(x=randn(3, 2), **lstm_params(3, 2, 3))
op("LSTMBlockCell", p, note="defaults (cell_clip 3)")
op("LSTMBlockCell", p, dict(use_peephole=True, cell_clip=-1.0, forget_bias=0.5),
   note="peephole, no clip, forget_bias 0.5")
op("LSTMBlockCell", p, dict(use_peephole=True, cell_clip=0.1), note="tight clip")
p16 = {k: v.astype(f16) for k, v in p.items()}
op("LSTMBlockCell", p16, dict(use_peephole=True), note="float16")
op("LSTMBlockCell", dict(x=randn(1, 0), **lstm_params(1, 0, 2)), note="no input features")
op("LSTMBlockCell", dict(p, w=p["w"][:, :-1]), note="error: w columns")
op("LSTMBlockCell", dict(p, h_prev=p["h_prev"][:2]), note="error: h_prev batch")
op("LSTMBlockCell", dict(p, b=p["b"][None]), note="error: b rank")
op("LSTMBlockCell", dict(p, x=p["x"][:0], cs_prev=p["cs_prev"][:0], h_prev=p["h_prev"][:0]),
   note="error: empty batch")

fw = raw.LSTMBlockCell(**p, use_peephole=True, cell_clip=-1.0)
g = dict(p, **{k: v.numpy() for k, v in zip(("i", "cs", "f", "o", "ci", "co"), fw[:6])})
g["cs_grad"] = randn(3, 3)
g["h_grad"] = randn(3, 3)
op("LSTMBlockCellGrad", g, dict(use_peephole=False), note="no peephole")
op("LSTMBlockCellGrad", g, dict(use_peephole=True), note="peephole")
op("LSTMBlockCellGrad", {k: v.astype(f16) for k, v in g.items()}, dict(use_peephole=True),
   note="float16")
op("LSTMBlockCellGrad", dict(g, ci=g["ci"][:, :2]), dict(use_peephole=False),
   note="error: ci shape")

# BlockLSTM / BlockLSTMV2: one set of inputs, attrs varied
time_, batch_, inp_, cell_ = 4, 2, 2, 3
pb = dict(seq_len_max=np.int64(time_), x=randn(time_, batch_, inp_),
          **lstm_params(batch_, inp_, cell_))
pb16 = {k: (v.astype(f16) if k != "seq_len_max" else v) for k, v in pb.items()}
for ver in ("BlockLSTM", "BlockLSTMV2"):
    op(ver, pb, note="defaults")
    op(ver, pb, dict(use_peephole=True, cell_clip=0.5), note="peephole, clip 0.5")
    # past seq_len_max TF leaves i, f, o, ci, co uninitialized
    op(ver, dict(pb, seq_len_max=np.int64(2)), dict(use_peephole=True),
       note="seq_len_max 2 of 4", unspecified=(0, 2, 3, 4, 5))
    op(ver, dict(pb, seq_len_max=np.int64(0)), note="seq_len_max 0",
       unspecified=(0, 2, 3, 4, 5))
    op(ver, pb16, dict(use_peephole=True), note="float16")
    op(ver, dict(pb, x=pb["x"][:, :0], cs_prev=pb["cs_prev"][:0], h_prev=pb["h_prev"][:0]),
       note="empty batch")
    op(ver, dict(pb, x=pb["x"][:0], seq_len_max=np.int64(0)), note="no time steps")
    if ver == "BlockLSTM":
        op(ver, pb, dict(forget_bias=0.0, cell_clip=-1.0), note="forget_bias 0, no clip")
    else:
        op(ver, pb, dict(cell_clip=1.0), note="clip 1")
    op(ver, dict(pb, wci=pb["wci"][:2]), note="error: wci length")
    op(ver, dict(pb, seq_len_max=np.array([4], i64)), note="error: seq_len_max rank")


def grad_name(ver):
    return "BlockLSTMGradV2" if ver == "BlockLSTMV2" else "BlockLSTMGrad"


names = ("i", "cs", "f", "o", "ci", "co", "h")
for ver in ("BlockLSTM", "BlockLSTMV2"):
    fw = getattr(raw, ver)(**pb, use_peephole=True, cell_clip=-1.0 if ver == "BlockLSTM" else 0.0)
    g = dict(pb, **{k: v.numpy() for k, v in zip(names, fw)})
    g["cs_grad"] = randn(time_, batch_, cell_)
    g["h_grad"] = randn(time_, batch_, cell_)
    op(grad_name(ver), g, dict(use_peephole=False), note="no peephole")
    op(grad_name(ver), g, dict(use_peephole=True), note="peephole")
    op(grad_name(ver), dict(g, seq_len_max=np.int64(2)), dict(use_peephole=True),
       note="seq_len_max 2 of 4")
    op(grad_name(ver), dict(g, seq_len_max=np.int64(0)), dict(use_peephole=False),
       note="seq_len_max 0")
    op(grad_name(ver), {k: (v.astype(f16) if k != "seq_len_max" else v) for k, v in g.items()},
       dict(use_peephole=True), note="float16")
    op(grad_name(ver), dict(g, w=g["w"][:, :-2]), dict(use_peephole=False),
       note="error: w columns")


def gru_params(batch, inp, cell):
    return dict(x=randn(batch, inp), h_prev=randn(batch, cell),
                w_ru=randn(inp + cell, 2 * cell, scale=0.5), w_c=randn(inp + cell, cell, scale=0.5),
                b_ru=randn(2 * cell, scale=0.5), b_c=randn(cell, scale=0.5))


p = gru_params(3, 2, 3)
op("GRUBlockCell", p, note="basic")
op("GRUBlockCell", gru_params(1, 2, 1), note="one unit")
op("GRUBlockCell", dict(p, x=p["x"][:0], h_prev=p["h_prev"][:0]), note="empty batch")
op("GRUBlockCell", dict(p, w_c=p["w_c"][:, :2]), note="error: w_c shape")
op("GRUBlockCell", dict(p, b_ru=p["b_ru"][:-1]), note="error: b_ru shape")
op("GRUBlockCell", dict(p, x=p["x"][0]), note="error: x rank")
fw = raw.GRUBlockCell(**p)
g = dict(p, r=fw[0].numpy(), u=fw[1].numpy(), c=fw[2].numpy(), d_h=randn(3, 3))
op("GRUBlockCellGrad", g, note="basic")
op("GRUBlockCellGrad", dict(g, d_h=g["d_h"][:, :2]), note="error: d_h shape")


# ============================================================================================
# Linear algebra
def spd(n, dtype=f64):
    m = rs.randn(n, n)
    return (m @ m.T + n * np.eye(n)).astype(dtype)


# Lu: TF's packed LU and row permutation (P A = L U, A[p] = L U)
op("Lu", dict(input=randn(4, 4)), note="float32")
op("Lu", dict(input=randn(2, 2, 4, 4, dtype=f64)), tol=1e-12, note="float64 batch")
op("Lu", dict(input=crandn(3, 4, 4, dtype=c64)), note="complex64")
op("Lu", dict(input=crandn(5, 5)), dict(output_idx_type=tf.int64), tol=1e-12,
   note="complex128, int64 indices")
op("Lu", dict(input=np.array([[1., 2, 3], [4, 5, 6], [7, 8, 10]])), tol=1e-12, note="pivoting")
op("Lu", dict(input=np.zeros((0, 0), f32)), note="empty matrix")
op("Lu", dict(input=np.zeros((0, 3, 3), f64)), note="empty batch")
op("Lu", dict(input=np.ones((3, 3))), note="error: singular")
op("Lu", dict(input=np.stack([np.eye(2), np.ones((2, 2))])), note="error: one singular")
op("Lu", dict(input=np.ones((2, 3))), note="error: not square")
op("Lu", dict(input=np.eye(2, dtype=f16)), note="error: no float16 kernel")

# TridiagonalMatMul
for dt, tol in ((f32, None), (f64, 1e-12), (c64, None), (c128, 1e-12)):
    gen = crandn if dt in (c64, c128) else randn
    bt = (2,) if dt == f32 else ()
    op("TridiagonalMatMul", dict(superdiag=gen(*bt, 1, 4, dtype=dt),
                                 maindiag=gen(*bt, 1, 4, dtype=dt),
                                 subdiag=gen(*bt, 1, 4, dtype=dt), rhs=gen(*bt, 4, 2, dtype=dt)),
       tol=tol, note=np.dtype(dt).name)
op("TridiagonalMatMul", dict(superdiag=randn(1, 1), maindiag=randn(1, 1), subdiag=randn(1, 1),
                             rhs=randn(1, 2)), note="1x1")
op("TridiagonalMatMul", dict(superdiag=randn(1, 0), maindiag=randn(1, 0), subdiag=randn(1, 0),
                             rhs=randn(0, 2)), note="empty")
op("TridiagonalMatMul", dict(superdiag=randn(1, 4), maindiag=randn(1, 3), subdiag=randn(1, 4),
                             rhs=randn(4, 2)), note="error: main diagonal length")
op("TridiagonalMatMul", dict(superdiag=randn(1, 4), maindiag=randn(1, 4), subdiag=randn(1, 4),
                             rhs=randn(2, 4, 2)), note="error: ranks differ")


# TridiagonalSolve (compact format [..., 3, n]; the sequence and matrix formats are Python-side)
def tri(n, dt=f64, batch=(), dominant=True):
    if dt in (c64, c128):
        d = crandn(*batch, 3, n, dtype=dt)
    else:
        d = randn(*batch, 3, n, dtype=dt)
    if dominant:
        d[..., 1, :] += (4 if dt in (f32, f64) else 4 + 1j)
    return d


for dt, tol in ((f32, None), (f64, 1e-12), (c64, None), (c128, 1e-12)):
    name = np.dtype(dt).name
    rgen = crandn if dt in (c64, c128) else randn
    args = dict(diagonals=tri(5, dt, (2,)), rhs=rgen(2, 5, 2, dtype=dt))
    op("TridiagonalSolve", args, tol=tol, note=name + " pivoting")
    op("TridiagonalSolve", args, dict(partial_pivoting=False), tol=tol, note=name + " Thomas")
d = tri(7, f64, dominant=False)
d[1, 0] = 0.0
rhs = randn(7, 2, dtype=f64)
op("TridiagonalSolve", dict(diagonals=d, rhs=rhs), tol=1e-12, note="needs pivoting")
op("TridiagonalSolve", dict(diagonals=d, rhs=rhs), dict(partial_pivoting=False),
   note="Thomas fails: NaN")
op("TridiagonalSolve", dict(diagonals=np.ones((3, 4)), rhs=np.ones((4, 2))), note="ones")
op("TridiagonalSolve", dict(diagonals=np.array([[1., 1], [0, 0], [1, 1]]), rhs=np.ones((2, 1))),
   note="pivoting, singular: NaN")
op("TridiagonalSolve", dict(diagonals=np.array([[[1.], [2], [3]], [[1.], [0], [3]]]),
                            rhs=np.ones((2, 1, 2))), note="n = 1, one singular")
op("TridiagonalSolve", dict(diagonals=np.array([[[1.], [2], [3]], [[1.], [0], [3]]]),
                            rhs=np.ones((2, 1, 2))), dict(partial_pivoting=False),
   note="n = 1, Thomas")
sing = np.array([[1., 2, 1, 5], [2, 4, 2, 3], [3, 1, 1, 1]])  # singular tridiagonal
op("TridiagonalSolve", dict(diagonals=sing, rhs=randn(4, 2, dtype=f64)),
   dict(perturb_singular=True), tol=1e-12, note="perturb singular")
op("TridiagonalSolve", dict(diagonals=tri(5, f64), rhs=randn(5, 2, dtype=f64)),
   dict(perturb_singular=True), tol=1e-12, note="perturb, regular")
op("TridiagonalSolve", dict(diagonals=tri(5, f32), rhs=randn(5, 2)),
   dict(perturb_singular=True), note="perturb, float32")
op("TridiagonalSolve", dict(diagonals=np.array([[0.], [0], [0]]), rhs=np.ones((1, 2))),
   dict(perturb_singular=True), note="perturb, 1x1 zero")
op("TridiagonalSolve", dict(diagonals=np.ones((3, 0)), rhs=np.ones((0, 2))), note="empty")
op("TridiagonalSolve", dict(diagonals=np.ones((3, 4)), rhs=np.ones((4, 0))), note="no rhs")
op("TridiagonalSolve", dict(diagonals=np.ones((2, 4)), rhs=np.ones((4, 2))),
   note="error: 2 rows")
op("TridiagonalSolve", dict(diagonals=np.ones((3, 4)), rhs=np.ones((3, 2))),
   note="error: sizes")
op("TridiagonalSolve", dict(diagonals=np.ones((1, 3, 4)), rhs=np.ones((2, 4, 2))),
   note="error: batch")
op("TridiagonalSolve", dict(diagonals=np.ones((3, 4)), rhs=np.ones((4, 2))),
   dict(partial_pivoting=False, perturb_singular=True), note="error: perturb without pivoting")


# BandedTriangularSolve
def band(bands, n, dt, batch=(), lower=True):
    gen = crandn if dt in (c64, c128) else randn
    m = gen(*batch, bands, n, dtype=dt)
    m[..., 0 if lower else bands - 1, :] += 3
    return m


for dt, tol in ((f32, None), (f64, 1e-12), (c64, None), (c128, 1e-12)):
    gen = crandn if dt in (c64, c128) else randn
    rhs = gen(2, 4, 2, dtype=dt)
    for lower in (True, False):
        m = band(3, 4, dt, (2,), lower)
        for adj in (False, True):
            op("BandedTriangularSolve", dict(matrix=m, rhs=rhs), dict(lower=lower, adjoint=adj),
               tol=tol, note=f"{np.dtype(dt).name} lower={lower} adjoint={adj}")
op("BandedTriangularSolve", dict(matrix=band(2, 4, f64, (2, 1)), rhs=randn(3, 4, 1, dtype=f64)),
   tol=1e-12, note="batch broadcast")
op("BandedTriangularSolve", dict(matrix=band(6, 3, f64), rhs=randn(3, 2, dtype=f64)),
   tol=1e-12, note="more bands than rows")
op("BandedTriangularSolve", dict(matrix=band(6, 3, f64, lower=False), rhs=randn(3, 2, dtype=f64)),
   dict(lower=False), tol=1e-12, note="upper, more bands than rows")
op("BandedTriangularSolve", dict(matrix=np.array([[[1., 1, 1]], [[1, 0, 1]]]),
                                 rhs=np.ones((3, 1))), note="zero pivot after the first matrix")
op("BandedTriangularSolve", dict(matrix=np.array([[1., 0, 1]]), rhs=np.ones((3, 1))),
   note="error: not invertible")
op("BandedTriangularSolve", dict(matrix=np.ones((2, 0)), rhs=np.ones((0, 1))),
   note="error: empty")
op("BandedTriangularSolve", dict(matrix=np.ones((2, 3)), rhs=np.ones((4, 1))),
   note="error: sizes")
op("BandedTriangularSolve", dict(matrix=np.ones((2, 2, 3)), rhs=np.ones((3, 3, 1))),
   note="error: batch")
op("BandedTriangularSolve", dict(matrix=np.ones((2, 3), f16), rhs=np.ones((3, 1), f16)),
   note="error: no float16 kernel")

# Eig: eigenvalue order and eigenvector phases are implementation details (Eigen's in TF,
# LAPACK's in dfg), so the cases use matrices whose order both agree on and record v as
# unspecified; tests/kernels/test_rnn_linalg.py compares sorted eigenvalues and A v = lambda v.
op("Eig", dict(input=np.diag([3., -1, 2]).astype(f32)), dict(Tout=tf.complex64),
   note="diagonal", unspecified=(1,))
op("Eig", dict(input=np.triu(randn(4, 4, dtype=f64)) + np.diag([5., 1, 3, -2])),
   dict(Tout=tf.complex128), tol=1e-12, note="triangular", unspecified=(1,))
op("Eig", dict(input=np.diag([1j, 2, -3]).astype(c64)), dict(Tout=tf.complex64),
   note="complex diagonal", unspecified=(1,))
op("Eig", dict(input=np.diag([2., 1]).astype(f64)), dict(Tout=tf.complex128, compute_v=False),
   note="compute_v false", unspecified=(1,))
op("Eig", dict(input=np.zeros((0, 0), f32)), dict(Tout=tf.complex64), note="empty")
op("Eig", dict(input=np.zeros((2, 0, 0), f64)), dict(Tout=tf.complex128), note="empty batch")
op("Eig", dict(input=np.array([[np.nan, 1], [1, 1]])), dict(Tout=tf.complex128),
   note="error: NaN")
op("Eig", dict(input=np.ones((2, 3), f32)), dict(Tout=tf.complex64), note="error: not square")
op("Eig", dict(input=np.eye(2)), dict(Tout=tf.complex64), note="error: Tout precision")

# MatrixSquareRoot
op("MatrixSquareRoot", dict(input=spd(4, f32)), note="float32 spd")
op("MatrixSquareRoot", dict(input=np.stack([spd(3), spd(3)])), tol=1e-12, note="float64 batch")
op("MatrixSquareRoot", dict(input=np.array([[2., 1], [-1, 2]])), tol=1e-12,
   note="complex eigenvalue pair")
op("MatrixSquareRoot", dict(input=np.array([[1., 1], [0, 1]])), tol=1e-12, note="Jordan block")
op("MatrixSquareRoot", dict(input=np.array([[0., 0], [0, 1]])), tol=1e-12, note="singular")
op("MatrixSquareRoot", dict(input=randn(5, 5, dtype=f64) + 6 * np.eye(5)), tol=1e-12,
   note="nonsymmetric")
op("MatrixSquareRoot", dict(input=np.array([[-1., 0], [0, 4]])), note="negative eigenvalue: NaN")
op("MatrixSquareRoot", dict(input=np.array([[4., 1, 0], [1, -3, 1], [0, 1, 2]])),
   note="negative eigenvalue, dense: NaN")
op("MatrixSquareRoot", dict(input=np.array([[4., 1, 0], [1, -3, 1], [0, 1, 2]], c128)),
   tol=1e-12, note="complex with negative eigenvalue")
op("MatrixSquareRoot", dict(input=crandn(2, 4, 4, dtype=c64)), note="complex64")
op("MatrixSquareRoot", dict(input=crandn(6, 6)), tol=1e-12, note="complex128")
op("MatrixSquareRoot", dict(input=np.zeros((2, 0, 0), f32)), note="empty")
op("MatrixSquareRoot", dict(input=np.ones((2, 3))), note="error: not square")
op("MatrixSquareRoot", dict(input=np.eye(2, dtype=f16)), note="error: no float16 kernel")

# MatrixLogarithm (complex only)
op("MatrixLogarithm", dict(input=spd(4, c64)), note="complex64 spd")
op("MatrixLogarithm", dict(input=crandn(5, 5) + 3 * np.eye(5)), tol=1e-12, note="complex128")
op("MatrixLogarithm", dict(input=crandn(2, 3, 3, dtype=c64)), note="complex64 batch")
op("MatrixLogarithm", dict(input=np.array([[1., 1], [0, 1]], c128)), tol=1e-12,
   note="Jordan block")
op("MatrixLogarithm", dict(input=np.array([[-1., 0], [0, 4]], c128)), tol=1e-12,
   note="negative eigenvalue")
op("MatrixLogarithm", dict(input=np.array([[1., 2, 3], [0, -4, 5], [0, 0, 6]], c128)),
   tol=1e-12, note="triangular")
op("MatrixLogarithm", dict(input=np.array([[0., 0], [0, 1]], c128)), note="singular: NaN")
op("MatrixLogarithm", dict(input=np.zeros((0, 0), c64)), note="empty")
op("MatrixLogarithm", dict(input=np.ones((2, 3), c64)), note="error: not square")


# Eig on general matrices (complex-conjugate pairs, complex input, a batch): TF's eigenvalues
# and eigenvectors for tests/kernels/test_rnn_linalg.py, which compares the eigenvalues as a
# multiset and checks A v = lambda v for dfg's eigenvectors.
def eig_data():
    mats = {"real4": randn(4, 4, dtype=f64), "real_batch": randn(2, 3, 3),
            "complex3": crandn(3, 3), "rotation": np.array([[0., -1], [1, 0]])}
    out = {}
    for name, a in mats.items():
        tout = tf.complex64 if a.dtype in (f32, c64) else tf.complex128
        e, v = raw.Eig(input=a, Tout=tout)
        out[name + "_input"] = a
        out[name + "_e"] = e.numpy()
        out[name + "_v"] = v.numpy()
    np.savez_compressed(HERE / "eig.npz", **out)


# A small TF1 graph through dfg's Session: a BlockLSTMV2 layer, a projection, then CTC loss and
# both decoders, as a speech-style model would wire them.
def ctc_model():
    time, batch, inp, cell, classes = 5, 2, 3, 4, 4
    x = tf.constant(randn(time, batch, inp))
    zeros = tf.constant(np.zeros((batch, cell), f32))
    w = randn(inp + cell, 4 * cell, scale=0.5)
    peep = tf.constant(np.zeros(cell, f32))
    lstm = raw.BlockLSTMV2(seq_len_max=tf.constant(np.int64(time)), x=x, cs_prev=zeros,
                           h_prev=zeros, w=w, wci=peep, wcf=peep, wco=peep,
                           b=randn(4 * cell, scale=0.5), cell_clip=0.0, use_peephole=False)
    h = tf.reshape(lstm.h, [time * batch, cell])
    logits = tf.reshape(tf.matmul(h, tf.constant(randn(cell, classes))), [time, batch, classes])
    ind, val = sparse_labels([[0, 1], [2]])
    lens = tf.constant(np.array([5, 4], i32))
    loss, grad = raw.CTCLoss(inputs=logits, labels_indices=ind, labels_values=val,
                             sequence_length=lens)
    beam_out = raw.CTCBeamSearchDecoder(inputs=logits, sequence_length=lens, beam_width=3,
                                        top_paths=2)
    greedy_out = raw.CTCGreedyDecoder(inputs=logits, sequence_length=lens, merge_repeated=True)
    fetches = [loss, grad, beam_out.decoded_indices[1], beam_out.decoded_values[0],
               beam_out.log_probability, greedy_out.decoded_values, greedy_out.log_probability]
    return [(fetches, [])]


graph("ctc_model", ctc_model, ["BlockLSTMV2", "CTCLoss", "CTCBeamSearchDecoder",
                               "CTCGreedyDecoder"])


# ============================================================================================
# Ops TF 2.21 refuses on CPU (removed from the GraphDef version or without a CPU kernel)
def refused():
    a = np.array([[4., 1], [1, 3]], f32)
    b = np.array([[1.], [2]], f32)
    calls = {
        "BatchMatrixBandPart": dict(input=a, num_lower=np.int64(0), num_upper=np.int64(-1)),
        "BatchMatrixDeterminant": dict(input=a),
        "BatchMatrixDiag": dict(diagonal=np.ones(2, f32)),
        "BatchMatrixDiagPart": dict(input=a),
        "BatchMatrixInverse": dict(input=a),
        "BatchMatrixSetDiag": dict(input=a, diagonal=np.ones(2, f32)),
        "BatchMatrixSolve": dict(matrix=a, rhs=b),
        "BatchMatrixSolveLs": dict(matrix=a, rhs=b, l2_regularizer=np.float64(0)),
        "BatchMatrixTriangularSolve": dict(matrix=a, rhs=b),
        "BatchCholesky": dict(input=a),
        "BatchSelfAdjointEig": dict(input=a),
        "BatchSelfAdjointEigV2": dict(input=a),
        "BatchSvd": dict(input=a),
        "BatchCholeskyGrad": dict(l=a, grad=a),
        "SelfAdjointEig": dict(input=a),
        "MatrixExponential": dict(input=a),
        "CTCLossV2": dict(inputs=np.zeros((2, 1, 3), f32), labels_indices=np.zeros((1, 2), i64),
                          labels_values=np.ones(1, i32), sequence_length=np.array([2], i32)),
    }
    out = {}
    for name, args in calls.items():
        try:
            getattr(raw, name)(**args)
            out[name] = None
        except tf.errors.OpError as e:
            msg = e.message.split("}} ", 1)[-1].split(" [Op:")[0]
            out[name] = {"error": type(e).__name__, "message": msg}
    (HERE / "refused.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    eig_data()
    refused()
    write()
