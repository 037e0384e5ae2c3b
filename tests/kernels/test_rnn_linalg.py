"""What the raw-op manifest cannot express for the CTC, fused-RNN and linear-algebra kernels.

* Eig: TensorFlow documents neither the order of the eigenvalues nor the phase of the
  eigenvectors (Eigen's in TF, LAPACK's here), so TF's eigenvalues (stored by
  ``tests/data/kernels/raw_ops_rnn_linalg/generate.py`` in ``eig.npz``) are compared as a
  multiset, and dfg's eigenvectors are checked by ``A v = lambda v`` with unit norm.
* The legacy ops TF 2.21 refuses (``refused.json``, written by the same generator) have no
  dfg kernel, and a graph using one fails as it does in TensorFlow.
* Matrix square root and logarithm on larger matrices, checked against their definitions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.executor.kernels.registry import has_kernel, invoke
from dfg.graphdef import errors, load_graph

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "raw_ops_rnn_linalg"


def _sorted(e: np.ndarray) -> np.ndarray:
    """Eigenvalues in a canonical order (conjugate pairs share their real part)."""
    return e[np.lexsort((e.imag, np.round(e.real, 4)))]


@pytest.mark.parametrize("name", ["real4", "real_batch", "complex3", "rotation"])
def test_eig_matches_tensorflow_up_to_order_and_phase(name: str) -> None:
    data = np.load(DATA / "eig.npz")
    a, e_tf = data[name + "_input"], data[name + "_e"]
    tout = e_tf.dtype
    e, v = invoke("Eig", a, attrs={"Tout": tout})
    assert e.dtype == tout and v.dtype == tout
    assert e.shape == e_tf.shape and v.shape == a.shape
    tol = 1e-4 if tout == np.complex64 else 1e-10
    flat_e = e.reshape(-1, e.shape[-1])
    flat_tf = e_tf.reshape(-1, e.shape[-1])
    for got, want in zip(flat_e, flat_tf):
        np.testing.assert_allclose(_sorted(got), _sorted(want), rtol=tol, atol=tol)
    ac = a.astype(tout)
    np.testing.assert_allclose(ac @ v, v * e[..., None, :], rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=tol)


def test_refused_ops_have_no_kernel() -> None:
    refused = json.loads((DATA / "refused.json").read_text())
    assert len(refused) == 17
    for op, what in refused.items():
        assert what is not None, op  # TF 2.21 refused every one of them
        assert what["error"] in ("UnimplementedError", "NotFoundError"), (op, what)
        assert not has_kernel(op), op


def test_removed_op_fails_in_a_graph_as_in_tensorflow(tmp_path: Path) -> None:
    refused = json.loads((DATA / "refused.json").read_text())
    path = tmp_path / "g.pbtxt"
    path.write_text("""
node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 }
  dim { size: 2 } } float_val: 1 float_val: 0 float_val: 0 float_val: 1 } } } }
node { name: "s" op: "BatchSvd" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
""")
    with pytest.raises(errors.OpError) as info:
        sess = Session(load_graph(str(path)))
        try:
            sess.run(["s:0"])
        finally:
            sess.close()
    assert type(info.value).__name__ == refused["BatchSvd"]["error"]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_matrix_square_root_definition(dtype) -> None:
    rs = np.random.RandomState(7)
    n = 12
    a = rs.randn(n, n) + (1j * rs.randn(n, n) if dtype == np.complex128 else 0)
    a = (a @ a.conj().T + n * np.eye(n)).astype(dtype) if dtype != np.float64 else \
        (a + 2 * n ** 0.5 * np.eye(n)).astype(dtype)
    r = invoke("MatrixSquareRoot", a)
    assert r.dtype == a.dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(r @ r, a, rtol=tol, atol=tol * np.abs(a).max())
    # the principal root: every eigenvalue in the right half plane
    assert np.linalg.eigvals(r.astype(np.complex128)).real.min() > 0


def test_matrix_logarithm_definition() -> None:
    rs = np.random.RandomState(8)
    n = 10
    a = (rs.randn(n, n) + 1j * rs.randn(n, n)) + 4 * np.eye(n)
    got = invoke("MatrixLogarithm", a)
    w, v = np.linalg.eig(a)  # distinct eigenvalues: log A = V log(W) V^-1
    want = v @ np.diag(np.log(w)) @ np.linalg.inv(v)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_block_lstm_zeroes_state_past_seq_len_max() -> None:
    rs = np.random.RandomState(3)
    t, b, i, c = 4, 2, 3, 2
    args = [np.int64(2), rs.randn(t, b, i).astype(np.float32),
            rs.randn(b, c).astype(np.float32), rs.randn(b, c).astype(np.float32),
            rs.randn(i + c, 4 * c).astype(np.float32)] + \
        [rs.randn(c).astype(np.float32) for _ in range(3)] + [rs.randn(4 * c).astype(np.float32)]
    out = invoke("BlockLSTM", *args, attrs={"use_peephole": True})
    cs, h = out[1], out[6]
    assert not cs[2:].any() and not h[2:].any()
    assert cs[:2].all() and h[:2].all()
