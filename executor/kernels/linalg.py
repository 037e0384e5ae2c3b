"""Linear algebra kernels: inverses, determinants, decompositions, solvers, diagonals, and the
matrix square root and logarithm (through a complex Schur form computed here).

Matrices are the two innermost dimensions; everything outside them is a batch (numpy's
``linalg`` functions batch the same way). Decompositions come from LAPACK through numpy, as
TensorFlow's come from Eigen: results agree to rounding, but where a factor is only defined up
to signs (Qr, Svd, eigenvectors) the signs may differ from TensorFlow's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, NotFoundError

from .registry import KernelContext, kernel


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _square(x: np.ndarray, what: str = "Input") -> None:
    if x.ndim < 2:
        raise InvalidArgumentError(f"{what} must have rank >= 2, got {x.ndim}")
    if x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError(
            f"{what} matrices must be squares, got {x.shape[-2]} != {x.shape[-1]}")


def _adj(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


@kernel("MatrixInverse", heavy=True)
def matrix_inverse(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    _square(x)
    if ctx.attrs.get("adjoint", False):
        x = _adj(x)
    if x.size == 0:
        return x.copy()
    try:
        inv = np.linalg.inv(x)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError("Input is not invertible.") from None
    if not np.all(np.isfinite(inv)):
        raise InvalidArgumentError("Input is not invertible.")
    return inv.astype(x.dtype)


@kernel("MatrixDeterminant")
def matrix_determinant(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    _square(x)
    return np.asarray(np.linalg.det(x), dtype=x.dtype) if x.shape[-1] else \
        np.ones(x.shape[:-2], x.dtype)


@kernel("LogMatrixDeterminant")
def log_matrix_determinant(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _square(x)
    sign, logdet = np.linalg.slogdet(x)
    return np.asarray(sign, dtype=x.dtype), np.asarray(logdet, dtype=x.dtype)


@kernel("Cholesky", heavy=True)
def cholesky(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    _square(x)
    if x.size == 0:
        return x.copy()
    # np.linalg.cholesky reads the lower triangle, as TF does. On a matrix that is not
    # positive definite TF does not fail: it logs and fills the lower triangle with NaN (its
    # upper triangle is left unspecified); do that for the whole matrix of that batch entry.
    flat = x.reshape((-1,) + x.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        try:
            out[i] = np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            out[i] = np.nan
    return out.reshape(x.shape)


@kernel("Qr", heavy=True)
def qr(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if x.ndim < 2:
        raise InvalidArgumentError(f"input must have rank >= 2, got {x.ndim}")
    mode = "complete" if ctx.attrs.get("full_matrices", False) else "reduced"
    q, r = np.linalg.qr(x, mode=mode)
    return q.astype(x.dtype), r.astype(x.dtype)


@kernel("Svd", heavy=True)
def svd(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if x.ndim < 2:
        raise InvalidArgumentError(f"input must have rank >= 2, got {x.ndim}")
    real = np.finfo(x.dtype).dtype if x.dtype.kind == "c" else x.dtype
    if not ctx.attrs.get("compute_uv", True):
        s = np.linalg.svd(x, compute_uv=False)
        # TF hands back unspecified 0-d tensors for u and v here.
        empty = np.zeros((), x.dtype)
        return s.astype(real), empty, empty
    u, s, vh = np.linalg.svd(x, full_matrices=ctx.attrs.get("full_matrices", False))
    return s.astype(real), u.astype(x.dtype), _adj(vh).astype(x.dtype)


@kernel("SelfAdjointEigV2", heavy=True)
def self_adjoint_eig_v2(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _square(x)
    real = np.finfo(x.dtype).dtype if x.dtype.kind == "c" else x.dtype
    if not ctx.attrs.get("compute_v", True):
        return np.linalg.eigvalsh(x).astype(real), np.zeros((), x.dtype)  # v unspecified
    e, v = np.linalg.eigh(x)
    return e.astype(real), v.astype(x.dtype)


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError("Input matrix is not invertible.") from None
    if not np.all(np.isfinite(x)) and np.all(np.isfinite(a)) and np.all(np.isfinite(b)):
        raise InvalidArgumentError("Input matrix is not invertible.")
    return x


@kernel("MatrixSolve", heavy=True)
def matrix_solve(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    _square(a)
    if b.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise InvalidArgumentError(
            f"Input matrix and right-hand side must have the same number of rows: "
            f"{_fmt(a.shape)} vs. {_fmt(b.shape)}")
    if ctx.attrs.get("adjoint", False):
        a = _adj(a)
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    return _solve(a, b).astype(b.dtype)


@kernel("MatrixTriangularSolve")
def matrix_triangular_solve(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    _square(a)
    if b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise InvalidArgumentError(
            f"Input matrix and right-hand side must have the same number of rows: "
            f"{_fmt(a.shape)} vs. {_fmt(b.shape)}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise InvalidArgumentError(
            f"Incompatible batch shapes: {_fmt(a.shape)} vs. {_fmt(b.shape)}") from None
    tri = np.tril(a) if ctx.attrs.get("lower", True) else np.triu(a)
    if ctx.attrs.get("adjoint", False):
        tri = _adj(tri)
    tri = np.broadcast_to(tri, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    if tri.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    # A zero on the diagonal makes the system singular; TF's back-substitution then yields
    # inf/nan instead of failing, so do the same instead of raising.
    with np.errstate(all="ignore"):
        try:
            return np.linalg.solve(tri, b).astype(b.dtype)
        except np.linalg.LinAlgError:
            return _substitute(tri, b).astype(b.dtype)


def _substitute(tri: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Forward or back substitution by rows (for singular triangular systems)."""
    n = tri.shape[-1]
    lower = np.allclose(np.triu(tri, 1), 0)
    x = np.zeros(b.shape, np.result_type(tri, b))
    rows = range(n) if lower else range(n - 1, -1, -1)
    for i in rows:
        acc = b[..., i, :] - np.einsum("...k,...kj->...j", tri[..., i, :], x)
        x[..., i, :] = acc / tri[..., i, i][..., None]
    return x


@kernel("MatrixSolveLs")
def matrix_solve_ls(ctx: KernelContext, a: np.ndarray, b: np.ndarray,
                    l2: np.ndarray) -> np.ndarray:
    if a.ndim < 2 or b.ndim < 2 or a.shape[-2] != b.shape[-2]:
        raise InvalidArgumentError(
            f"Input matrix and right-hand side must have the same number of rows: "
            f"{_fmt(a.shape)} vs. {_fmt(b.shape)}")
    m, n = a.shape[-2:]
    reg = float(l2)
    ah = _adj(a)
    if m >= n:  # normal equations: (A^H A + l2 I) x = A^H b
        gram = ah @ a + reg * np.eye(n, dtype=a.dtype)
        return _chol_solve(gram, ah @ b).astype(b.dtype)
    gram = a @ ah + reg * np.eye(m, dtype=a.dtype)
    return (ah @ _chol_solve(gram, b)).astype(b.dtype)


def _chol_solve(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    try:
        np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError(
            "Matrix is singular or not positive definite in MatrixSolveLs") from None
    return np.linalg.solve(gram, rhs)


@kernel("Cross")
def cross(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.shape != b.shape:
        raise InvalidArgumentError(
            f"a and b must be the same shape: {_fmt(a.shape)} vs {_fmt(b.shape)}")
    if a.ndim < 1 or a.shape[-1] != 3:
        raise InvalidArgumentError(
            f"Cross: a and b must have the last dimension of size 3, got {_fmt(a.shape)}")
    return np.cross(a, b).astype(a.dtype)


# --- diagonals --------------------------------------------------------------------------------

@kernel("Diag")
def diag(ctx: KernelContext, d: np.ndarray) -> np.ndarray:
    if d.ndim < 1:
        raise InvalidArgumentError(f"Input must be at least rank 1, got {d.ndim}")
    n = d.size
    out = np.zeros((n, n), d.dtype)
    out[np.arange(n), np.arange(n)] = d.reshape(-1)
    return out.reshape(d.shape + d.shape)


@kernel("DiagPart")
def diag_part(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    k = x.ndim // 2
    if x.ndim % 2 or x.ndim == 0 or x.shape[:k] != x.shape[k:]:
        raise InvalidArgumentError(
            f"Invalid shape {_fmt(x.shape)}: dimensions must be even and the two halves equal")
    n = int(np.prod(x.shape[:k]))
    return x.reshape(n, n)[np.arange(n), np.arange(n)].reshape(x.shape[:k])


def _k_range(k: np.ndarray) -> tuple[int, int]:
    flat = [int(v) for v in np.asarray(k).reshape(-1)]
    if not 1 <= len(flat) <= 2:
        raise InvalidArgumentError(f"diag_index must be a scalar or a vector of size 2, got "
                                   f"{len(flat)} values")
    lo, hi = flat[0], flat[-1]
    if lo > hi:
        raise InvalidArgumentError(
            f"lower_diag_index must not be larger than upper_diag_index: {lo} > {hi}")
    return lo, hi


def _diag_len(m: int, n: int, d: int) -> int:
    return min(m + min(0, d), n - max(0, d))


def _offset(align: str, d: int, length: int, max_len: int) -> int:
    """Where diagonal d starts inside its padded row of the packed diagonals."""
    sup, sub = align.split("_") if "_" in align else ("LEFT", "LEFT")
    side = sup if d >= 0 else sub
    return max_len - length if side == "RIGHT" else 0


def _diag_coords(m: int, n: int, lo: int, hi: int, align: str):
    """For each diagonal d (hi first): (row in the packed array, its d, rows, cols, slots)."""
    max_len = max(_diag_len(m, n, d) for d in range(lo, hi + 1))
    out = []
    for row, d in enumerate(range(hi, lo - 1, -1)):
        ln = max(0, _diag_len(m, n, d))
        i = np.arange(ln)
        r, c = (i, i + d) if d >= 0 else (i - d, i)
        out.append((row, r, c, i + _offset(align, d, ln, max_len)))
    return max_len, out


def _check_k(m: int, n: int, lo: int, hi: int) -> None:
    if (lo != 0 and not -m < lo < n) or (hi != 0 and not -m < hi < n):
        raise InvalidArgumentError(
            f"The diagonal indices must be in (-{m}, {n}) (or 0), got [{lo}, {hi}]")


def _diag_part(x: np.ndarray, k: np.ndarray, pad: np.ndarray | int, align: str) -> np.ndarray:
    if x.ndim < 2:
        raise InvalidArgumentError(f"input must be at least 2-dim, received shape: "
                                   f"{_fmt(x.shape)}")
    m, n = x.shape[-2:]
    lo, hi = _k_range(k)
    _check_k(m, n, lo, hi)
    max_len, coords = _diag_coords(m, n, lo, hi, align)
    out = np.full(x.shape[:-2] + (hi - lo + 1, max_len), np.asarray(pad, dtype=x.dtype))
    for row, r, c, slot in coords:
        out[..., row, slot] = x[..., r, c]
    return out[..., 0, :] if lo == hi else out


def _set_diag(x: np.ndarray, diagonal: np.ndarray, k: np.ndarray, align: str) -> np.ndarray:
    if x.ndim < 2:
        raise InvalidArgumentError(f"input must be at least a matrix, received shape: "
                                   f"{_fmt(x.shape)}")
    m, n = x.shape[-2:]
    lo, hi = _k_range(k)
    _check_k(m, n, lo, hi)
    max_len, coords = _diag_coords(m, n, lo, hi, align)
    want = x.shape[:-2] + ((max_len,) if lo == hi else (hi - lo + 1, max_len))
    if diagonal.shape != want:
        raise InvalidArgumentError(
            f"diagonal must have shape {_fmt(want)}, received shape: {_fmt(diagonal.shape)}")
    packed = diagonal[..., None, :] if lo == hi else diagonal
    out = x.copy()
    for row, r, c, slot in coords:
        out[..., r, c] = packed[..., row, slot]
    return out


def _make_diag(diagonal: np.ndarray, k: np.ndarray, rows: int, cols: int, pad: np.ndarray,
               align: str) -> np.ndarray:
    lo, hi = _k_range(k)
    if diagonal.ndim < 1:
        raise InvalidArgumentError("diagonal must be at least 1-dim")
    if lo != hi and (diagonal.ndim < 2 or diagonal.shape[-2] != hi - lo + 1):
        raise InvalidArgumentError(
            f"The number of diagonals provided in the input does not match the lower_diag_index"
            f" and upper_diag_index range. Expected {hi - lo + 1}, got shape "
            f"{_fmt(diagonal.shape)}")
    max_len = diagonal.shape[-1]
    min_rows = max_len - min(hi, 0)
    min_cols = max_len + max(lo, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    if rows < min_rows or cols < min_cols or (rows != min_rows and cols != min_cols):
        raise InvalidArgumentError(
            f"The number of rows or columns is not consistent with the specified d_lower, "
            f"d_upper, and diagonal: num_rows {rows}, num_cols {cols}, diagonal "
            f"{_fmt(diagonal.shape)}")
    batch = diagonal.shape[:-1] if lo == hi else diagonal.shape[:-2]
    base = np.full(batch + (rows, cols), np.asarray(pad, dtype=diagonal.dtype))
    packed = diagonal[..., None, :] if lo == hi else diagonal
    _, coords = _diag_coords(rows, cols, lo, hi, align)
    for row, r, c, slot in coords:
        base[..., r, c] = packed[..., row, slot]
    return base


@kernel("MatrixDiagPartV2")
def matrix_diag_part_v2(ctx: KernelContext, x: np.ndarray, k: np.ndarray,
                        pad: np.ndarray) -> np.ndarray:
    return _diag_part(x, k, pad, "LEFT_LEFT")


@kernel("MatrixDiagPartV3")
def matrix_diag_part_v3(ctx: KernelContext, x: np.ndarray, k: np.ndarray,
                        pad: np.ndarray) -> np.ndarray:
    return _diag_part(x, k, pad, ctx.attrs.get("align", "RIGHT_LEFT"))


@kernel("MatrixSetDiag")
def matrix_set_diag(ctx: KernelContext, x: np.ndarray, diagonal: np.ndarray) -> np.ndarray:
    return _set_diag(x, diagonal, np.asarray(0), "LEFT_LEFT")


@kernel("MatrixSetDiagV2")
def matrix_set_diag_v2(ctx: KernelContext, x: np.ndarray, diagonal: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    return _set_diag(x, diagonal, k, "LEFT_LEFT")


@kernel("MatrixSetDiagV3")
def matrix_set_diag_v3(ctx: KernelContext, x: np.ndarray, diagonal: np.ndarray,
                       k: np.ndarray) -> np.ndarray:
    return _set_diag(x, diagonal, k, ctx.attrs.get("align", "RIGHT_LEFT"))


@kernel("MatrixDiagV2")
def matrix_diag_v2(ctx: KernelContext, diagonal: np.ndarray, k: np.ndarray, rows: np.ndarray,
                   cols: np.ndarray, pad: np.ndarray) -> np.ndarray:
    return _make_diag(diagonal, k, int(rows), int(cols), pad, "LEFT_LEFT")


@kernel("MatrixDiagV3")
def matrix_diag_v3(ctx: KernelContext, diagonal: np.ndarray, k: np.ndarray, rows: np.ndarray,
                   cols: np.ndarray, pad: np.ndarray) -> np.ndarray:
    return _make_diag(diagonal, k, int(rows), int(cols), pad,
                      ctx.attrs.get("align", "RIGHT_LEFT"))


# --- LU, tridiagonal and banded solvers ---------------------------------------------------------

def _no_half_kernel(x: np.ndarray, op: str) -> None:
    """TF registers these linear-algebra kernels for float32/64 and complex only."""
    if x.dtype == np.float16:
        raise NotFoundError(
            f"Could not find device for node: {op} = {op}[T=DT_HALF]: no CPU kernel for half")


@kernel("Lu")
def lu(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _no_half_kernel(x, "Lu")
    if x.ndim < 2:
        raise InvalidArgumentError(f"Input tensor must have rank >= 2, got {x.ndim}")
    if x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError("Input matrix must be square.")
    n = x.shape[-1]
    idx_dt = ctx.attrs.get("output_idx_type", np.dtype(np.int32))
    batch = x.shape[:-2]
    a = x.reshape((int(np.prod(batch)), n, n)).copy()
    m = a.shape[0]
    perm = np.tile(np.arange(n), (m, 1))
    rows = np.arange(m)
    # Eigen's PartialPivLU: the pivot is the first entry of largest magnitude in the column;
    # rows are swapped whole, the column below is divided by the pivot (skipped for a zero
    # pivot), then the trailing block gets the rank-1 update.
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(n):
            p = k + np.argmax(np.abs(a[:, k:, k]), axis=1)
            a[rows, k], a[rows, p] = a[rows, p].copy(), a[rows, k].copy()
            perm[rows, k], perm[rows, p] = perm[rows, p].copy(), perm[rows, k].copy()
            piv = a[:, k, k]
            nz = piv != 0
            a[:, k + 1:, k] = np.where(nz[:, None], a[:, k + 1:, k] / np.where(nz, piv, 1)[:, None],
                                       a[:, k + 1:, k])
            a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:]
    if m and n and not (np.abs(np.diagonal(a, axis1=1, axis2=2)).min() > 0):
        raise InvalidArgumentError("Input is not invertible.")
    return a.reshape(x.shape), perm.reshape(batch + (n,)).astype(idx_dt)


def _linalg_op_inputs(*xs: np.ndarray) -> None:
    """TF's LinearAlgebraOp checks: every input of rank >= 2, equal ranks and batch dims."""
    for k, x in enumerate(xs):
        if x.ndim < 2:
            raise InvalidArgumentError(f"Input tensor {k} must have rank >= 2, got {x.ndim}")
    if any(x.ndim != xs[0].ndim for x in xs):
        raise InvalidArgumentError("All input tensors must have the same rank.")
    if any(x.shape[:-2] != xs[0].shape[:-2] for x in xs):
        raise InvalidArgumentError("All input tensors must have the same outer dimensions.")


@kernel("TridiagonalMatMul")
def tridiagonal_mat_mul(ctx: KernelContext, superdiag: np.ndarray, maindiag: np.ndarray,
                        subdiag: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    _linalg_op_inputs(superdiag, maindiag, subdiag, rhs)
    m = rhs.shape[-2]
    for d, what in ((superdiag, "superdiagonal"), (maindiag, "main diagonal"),
                    (subdiag, "subdiagonal")):
        if d.shape[-2:] != (1, m):
            raise InvalidArgumentError(f"Invalid {what} shape.")
    sup, main, sub = superdiag[..., 0, :, None], maindiag[..., 0, :, None], subdiag[..., 0, :, None]
    out = rhs * main
    out[..., 1:, :] += rhs[..., :-1, :] * sub[..., 1:, :]
    out[..., :-1, :] += rhs[..., 1:, :] * sup[..., :-1, :]
    return out


@kernel("TridiagonalSolve")
def tridiagonal_solve(ctx: KernelContext, diagonals: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    pivoting = bool(ctx.attrs.get("partial_pivoting", True))
    perturb = bool(ctx.attrs.get("perturb_singular", False))
    if perturb and not pivoting:
        raise InvalidArgumentError(
            "Setting perturb_singular requires also setting partial_pivoting.")
    _linalg_op_inputs(diagonals, rhs)
    if diagonals.shape[-2] != 3:
        raise InvalidArgumentError(
            f"Expected diagonals to be provided as a matrix with 3 rows, got "
            f"{diagonals.shape[-2]} rows.")
    n = diagonals.shape[-1]
    if n != rhs.shape[-2]:
        raise InvalidArgumentError(
            f"Expected the same number of left-hand sides and right-hand sides, got {n} and "
            f"{rhs.shape[-2]}.")
    if n == 0 or rhs.size == 0:
        return np.zeros(rhs.shape, rhs.dtype)
    k = rhs.shape[-1]
    d = diagonals.reshape((-1, 3, n))
    b = rhs.reshape((-1, n, k))
    if perturb:
        out = np.stack([_tridiag_perturbed(d[j, 0], d[j, 1], d[j, 2], b[j])
                        for j in range(d.shape[0])])
    else:
        with np.errstate(all="ignore"):
            solve = _tridiag_pivoting if pivoting else _tridiag_thomas
            out, failed = solve(d[:, 0], d[:, 1], d[:, 2], b) if n > 1 else \
                (b / d[:, 1, :, None], d[:, 1, 0] == 0)
        # TF logs "not invertible" and fills that system's solution with NaN
        out[failed] = np.nan
    return out.reshape(rhs.shape).astype(rhs.dtype)


def _tridiag_thomas(sup, diag, sub, rhs):
    """Thomas algorithm, batched: (x, failed) where a zero pivot marks a failed system."""
    n = diag.shape[1]
    u = np.zeros(diag.shape, diag.dtype)
    x = np.zeros(rhs.shape, rhs.dtype)
    failed = diag[:, 0] == 0
    u[:, 0] = sup[:, 0] / diag[:, 0]
    x[:, 0] = rhs[:, 0] / diag[:, 0, None]
    for i in range(1, n):
        denom = diag[:, i] - sub[:, i] * u[:, i - 1]
        failed |= denom == 0
        u[:, i] = sup[:, i] / denom
        x[:, i] = (rhs[:, i] - sub[:, i, None] * x[:, i - 1]) / denom[:, None]
    for i in range(n - 2, -1, -1):
        x[:, i] -= u[:, i, None] * x[:, i + 1]
    return x, failed


def _tridiag_pivoting(sup, diag, sub, rhs):
    """Gaussian elimination with partial pivoting (TF's take on LAPACK gtsv), batched."""
    n = diag.shape[1]
    u0 = np.zeros(diag.shape, diag.dtype)
    u1 = np.zeros(diag.shape, diag.dtype)
    u2 = np.zeros(diag.shape, diag.dtype)
    x = np.zeros(rhs.shape, rhs.dtype)
    u0[:, 0], u1[:, 0], x[:, 0] = diag[:, 0], sup[:, 0], rhs[:, 0]
    failed = np.zeros(diag.shape[0], bool)
    for i in range(n - 1):
        keep = np.abs(u0[:, i]) >= np.abs(sub[:, i + 1])
        failed |= keep & (u0[:, i] == 0)
        # no interchange
        f1 = sub[:, i + 1] / u0[:, i]
        a_u0_next = diag[:, i + 1] - f1 * u1[:, i]
        a_x_next = rhs[:, i + 1] - f1[:, None] * x[:, i]
        # interchange rows i and i + 1
        f2 = u0[:, i] / sub[:, i + 1]
        b_u0_next = u1[:, i] - f2 * diag[:, i + 1]
        b_x_next = x[:, i] - f2[:, None] * rhs[:, i + 1]
        kc = keep[:, None]
        u0[:, i] = np.where(keep, u0[:, i], sub[:, i + 1])
        u0[:, i + 1] = np.where(keep, a_u0_next, b_u0_next)
        x_i = np.where(kc, x[:, i], rhs[:, i + 1])
        x[:, i + 1] = np.where(kc, a_x_next, b_x_next)
        x[:, i] = x_i
        u1_i = np.where(keep, u1[:, i], diag[:, i + 1])
        if i != n - 2:
            u1[:, i + 1] = np.where(keep, sup[:, i + 1], -f2 * sup[:, i + 1])
            u2[:, i] = np.where(keep, 0, sup[:, i + 1])
        u1[:, i] = u1_i
    failed |= u0[:, n - 1] == 0
    x[:, n - 1] /= u0[:, n - 1, None]
    x[:, n - 2] = (x[:, n - 2] - u1[:, n - 2, None] * x[:, n - 1]) / u0[:, n - 2, None]
    for i in range(n - 3, -1, -1):
        x[:, i] = (x[:, i] - u1[:, i, None] * x[:, i + 1] - u2[:, i, None] * x[:, i + 2]) \
            / u0[:, i, None]
    return x, failed


def _perturb_pivot(perturb, pivot, row: np.ndarray):
    """Nudge a tiny pivot (or scale it and the row up) so that ``row / pivot`` cannot
    overflow, as TF's MaybePerturbPivot (after LAPACK xLAGTS). Returns (pivot, row)."""
    real = np.finfo(row.dtype).dtype.type
    one = real(1)
    safemin = real(np.finfo(real).tiny)
    bignum = one / safemin
    abs_pivot = real(abs(pivot))
    if abs_pivot >= one:
        return pivot, row
    perturb = real(np.copysign(max(real(abs(perturb)), safemin), np.real(pivot)))
    max_factor = real(np.abs(row).max()) if row.size else real(0)
    while abs_pivot < one:
        if abs_pivot < safemin:
            if abs_pivot == 0 or max_factor * safemin > abs_pivot:
                pivot = pivot + perturb
                perturb = perturb * real(2)
            else:
                return pivot * bignum, row * bignum
        elif max_factor > abs_pivot * bignum:
            pivot = pivot + perturb
            perturb = perturb * real(2)
        else:
            break
        abs_pivot = real(abs(pivot))
    return pivot, row


def _tridiag_perturbed(sup: np.ndarray, diag: np.ndarray, sub: np.ndarray,
                       rhs: np.ndarray) -> np.ndarray:
    """One system by pivoted elimination that perturbs tiny pivots (TF's
    SolveWithGaussianEliminationWithPivotingAndPerturbSingular, after xLAGTF + xLAGTS)."""
    n = diag.shape[0]
    t = diag.dtype.type
    real = np.finfo(diag.dtype).dtype.type
    eps = real(np.finfo(real).eps)
    one = t(1)
    with np.errstate(all="ignore"):
        if n == 1:
            denom, row = _perturb_pivot(eps * real(abs(diag[0])), diag[0], rhs[0].copy())
            return (row * (one / denom))[None]
        u = np.zeros((n, 3), diag.dtype)
        x = np.zeros(rhs.shape, rhs.dtype)
        u[0, 0], u[0, 1] = diag[0], sup[0]
        max_u = max(real(abs(u[0, 0])), real(abs(u[0, 1])))
        scale1 = real(abs(u[0, 0])) + real(abs(u[0, 1]))
        x[0] = rhs[0]
        for k in range(n - 1):
            u[k + 1, 0] = diag[k + 1]
            scale2 = real(abs(sub[k + 1])) + real(abs(u[k + 1, 0]))
            if k < n - 2:
                scale2 += real(abs(sup[k + 1]))
            if sub[k + 1] == 0:
                scale1 = scale2
                u[k + 1, 1] = sup[k + 1]
                u[k, 2] = 0
                x[k + 1] = rhs[k + 1]
            else:
                piv1 = real(0) if u[k, 0] == 0 else real(abs(u[k, 0])) / scale1
                piv2 = real(abs(sub[k + 1])) / scale2
                if piv2 <= piv1:
                    scale1 = scale2
                    f = sub[k + 1] / u[k, 0]
                    u[k + 1, 0] = diag[k + 1] - f * u[k, 1]
                    u[k + 1, 1] = sup[k + 1]
                    u[k, 2] = 0
                    x[k + 1] = rhs[k + 1] - f * x[k]
                else:
                    f = u[k, 0] / sub[k + 1]
                    u[k, 0] = sub[k + 1]
                    u[k + 1, 0] = u[k, 1] - f * diag[k + 1]
                    u[k, 1] = diag[k + 1]
                    if k < n - 2:
                        u[k, 2] = sup[k + 1]
                        u[k + 1, 1] = -f * sup[k + 1]
                    x[k + 1] = x[k] - f * rhs[k + 1]
                    x[k] = rhs[k + 1]
            if k < n - 2:
                max_u = max(max_u, *(real(abs(v)) for v in u[k]))
        max_u = max(max_u, real(abs(u[n - 1, 0])))
        tol = eps * max_u
        denom, row = _perturb_pivot(tol, u[n - 1, 0], x[n - 1].copy())
        x[n - 1] = row * (one / denom)
        for k in range(n - 2, -1, -1):
            row = x[k] - u[k, 1] * x[k + 1]
            if k < n - 2:
                row = row - u[k, 2] * x[k + 2]
            denom, row = _perturb_pivot(tol, u[k, 0], row)
            x[k] = row * (one / denom)
    return x


@kernel("BandedTriangularSolve")
def banded_triangular_solve(ctx: KernelContext, matrix: np.ndarray,
                            rhs: np.ndarray) -> np.ndarray:
    _no_half_kernel(matrix, "BandedTriangularSolve")
    lower = bool(ctx.attrs.get("lower", True))
    adjoint = bool(ctx.attrs.get("adjoint", False))
    if matrix.ndim < 2:
        raise InvalidArgumentError(f"In[0] ndims must be >= 2: {matrix.ndim}")
    if rhs.ndim < 2:
        raise InvalidArgumentError(f"In[1] ndims must be >= 2: {rhs.ndim}")
    if matrix.size == 0:
        raise InvalidArgumentError(f"In[0] must not be an empty tensor: {_fmt(matrix.shape)}")
    if rhs.size == 0:
        raise InvalidArgumentError(f"In[1] must not be an empty tensor: {_fmt(rhs.shape)}")
    try:
        batch = np.broadcast_shapes(matrix.shape[:-2], rhs.shape[:-2])
    except ValueError:
        raise InvalidArgumentError(
            f"In[0] and In[1] must have compatible batch dimensions: {_fmt(matrix.shape)} vs. "
            f"{_fmt(rhs.shape)}") from None
    bands, n = matrix.shape[-2:]
    if n != rhs.shape[-2]:
        raise InvalidArgumentError(
            f"In[0] mismatch In[1] shape: {n} vs. {rhs.shape[-2]}: {_fmt(matrix.shape)} "
            f"{_fmt(rhs.shape)} {int(lower)} {int(adjoint)}")
    # TF checks the diagonal of the first matrix of the batch only.
    first = matrix.reshape((-1, bands, n))[0]
    if not np.abs(first[0 if lower else bands - 1]).min() > 0:
        raise InvalidArgumentError("Input matrix is not invertible.")
    band = np.broadcast_to(matrix, batch + (bands, n))
    b = np.broadcast_to(rhs, batch + rhs.shape[-2:])
    if adjoint:
        band = np.conj(band)
    x = np.zeros(b.shape, np.result_type(matrix, rhs))
    # Band storage: lower keeps A[i, i - d] at band[d, i]; upper keeps A[i, i + d] at
    # band[bands - 1 - d, i]. The adjoint solves with the conjugated transpose.
    diag_row = 0 if lower else bands - 1
    forward = lower != adjoint
    order = range(n) if forward else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            acc = b[..., i, :].copy()
            for d in range(1, min(bands, n)):
                j = i - d if forward else i + d
                if not 0 <= j < n:
                    break
                if not adjoint:
                    coef = band[..., d, i] if lower else band[..., bands - 1 - d, i]
                else:
                    coef = band[..., d, j] if lower else band[..., bands - 1 - d, j]
                acc = acc - coef[..., None] * x[..., j, :]
            x[..., i, :] = acc / band[..., diag_row, i, None]
    return x.astype(rhs.dtype)


# --- eigenvalues, matrix functions ------------------------------------------------------------

@kernel("Eig")
def eig(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _square(x)
    want = np.dtype(np.complex128 if x.dtype in (np.float64, np.complex128) else np.complex64)
    out = np.dtype(ctx.attrs.get("Tout", want))
    if out != want:
        raise InvalidArgumentError(f"Invalid output dtype {out} for input {x.dtype}")
    compute_v = bool(ctx.attrs.get("compute_v", True))
    if x.size == 0:
        e = np.zeros(x.shape[:-1], out)
        return e, (np.zeros(x.shape, out) if compute_v else np.zeros((), out))
    if not np.all(np.isfinite(x)):
        raise InvalidArgumentError(
            "Eigen decomposition was not successful. The input might not be valid.")
    # Eigenvalue order and eigenvector phases are LAPACK's here, Eigen's in TF: TF documents
    # neither (each eigenvector has unit norm in both).
    a = x.astype(np.complex128)
    if compute_v:
        e, v = np.linalg.eig(a)
        return e.astype(out), v.astype(out)
    return np.linalg.eigvals(a).astype(out), np.zeros((), out)


def _schur(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Complex Schur form of one square matrix: (T, Z) with ``a = Z T Z^H``, T upper
    triangular; None if the QR iteration does not converge. Householder reduction to
    Hessenberg form, then single-shift QR steps with Givens rotations and Wilkinson shifts."""
    h = np.array(a, dtype=np.complex128)
    n = h.shape[0]
    z = np.eye(n, dtype=np.complex128)
    for k in range(n - 2):
        col = h[k + 1:, k]
        norm = np.linalg.norm(col)
        if norm == 0:
            continue
        phase = col[0] / abs(col[0]) if col[0] != 0 else 1
        v = col.copy()
        v[0] += phase * norm
        v /= np.linalg.norm(v)
        h[k + 1:, :] -= 2 * np.outer(v, v.conj() @ h[k + 1:, :])
        h[:, k + 1:] -= 2 * np.outer(h[:, k + 1:] @ v, v.conj())
        z[:, k + 1:] -= 2 * np.outer(z[:, k + 1:] @ v, v.conj())
    eps = np.finfo(np.float64).eps
    hi = n - 1
    its = 0
    total = 0
    while hi > 0:
        lo = hi
        while lo > 0:
            s = abs(h[lo - 1, lo - 1]) + abs(h[lo, lo])
            if abs(h[lo, lo - 1]) <= eps * (s if s else 1.0):
                h[lo, lo - 1] = 0
                break
            lo -= 1
        if lo == hi:
            hi -= 1
            its = 0
            continue
        its += 1
        total += 1
        if total > 100 * n:
            return None
        if its % 10 == 0:  # exceptional shift against cycling
            mu = h[hi, hi] + abs(h[hi, hi - 1].real) + abs(h[hi - 1, hi - 2].real if hi > 1
                                                          else 0)
        else:
            a11, a12, a21, a22 = h[hi - 1, hi - 1], h[hi - 1, hi], h[hi, hi - 1], h[hi, hi]
            half = (a11 - a22) / 2
            root = np.sqrt(half * half + a12 * a21)
            d1, d2 = a22 + half + root, a22 + half - root  # eigenvalues of the 2x2 block
            mu = d1 if abs(d1 - a22) < abs(d2 - a22) else d2
        x, y = h[lo, lo] - mu, h[lo + 1, lo]
        for k in range(lo, hi):
            rho = np.hypot(abs(x), abs(y))
            if rho == 0:
                g = np.eye(2, dtype=np.complex128)
            else:
                g = np.array([[np.conj(x), np.conj(y)], [-y, x]]) / rho
            c0 = max(lo, k - 1)
            h[k:k + 2, c0:] = g @ h[k:k + 2, c0:]
            r1 = min(k + 3, hi + 1)
            h[:r1, k:k + 2] = h[:r1, k:k + 2] @ g.conj().T
            z[:, k:k + 2] = z[:, k:k + 2] @ g.conj().T
            if k < hi - 1:
                x, y = h[k + 1, k], h[k + 2, k]
        # keep the part below the subdiagonal exactly zero
        for k in range(lo, hi - 1):
            h[k + 2, k] = 0
    return np.triu(h), z


def _sqrtm_tri(t: np.ndarray) -> np.ndarray:
    """Principal square root of an upper triangular matrix (Björck-Hammarling), one
    superdiagonal at a time."""
    n = t.shape[0]
    r = np.zeros_like(t)
    idx = np.arange(n)
    r[idx, idx] = np.sqrt(np.diagonal(t))
    with np.errstate(all="ignore"):
        for d in range(1, n):
            i = idx[:n - d]
            j = i + d
            if d > 1:
                mid = i[:, None] + np.arange(1, d)
                inner = (r[i[:, None], mid] * r[mid, j[:, None]]).sum(axis=1)
            else:
                inner = 0
            r[i, j] = (t[i, j] - inner) / (r[i, i] + r[j, j])
    return r


# Gauss-Legendre nodes and weights on [0, 1] for the Pade approximant of log(1 + x).
_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_GL_X, _GL_W = (_GL_X + 1) / 2, _GL_W / 2


def _logm_tri(t: np.ndarray) -> np.ndarray:
    """Principal logarithm of a nonsingular upper triangular matrix by inverse scaling and
    squaring: square roots until near I, then log(I + X) as sum_j w_j X (I + x_j X)^-1."""
    n = t.shape[0]
    eye = np.eye(n, dtype=t.dtype)
    s = 0
    cur = t
    while np.abs(cur - eye).sum(axis=0).max() > 0.25 and s < 60:
        cur = _sqrtm_tri(cur)
        s += 1
    x = cur - eye
    out = np.zeros_like(t)
    for node, weight in zip(_GL_X, _GL_W):
        out += weight * np.linalg.solve(eye + node * x, x)
    out *= 2.0 ** s
    out = np.triu(out)
    idx = np.arange(n)
    out[idx, idx] = np.log(np.diagonal(t))
    return out


def _matrix_function(x: np.ndarray, fn, real_ok: bool) -> np.ndarray:
    """Apply ``fn`` (upper triangular -> upper triangular) through the complex Schur form of
    each matrix of the batch, in double precision."""
    _square(x)
    out = np.empty(x.shape, np.complex128)
    flat = x.reshape((int(np.prod(x.shape[:-2])),) + x.shape[-2:])
    res = out.reshape(flat.shape)
    for k, m in enumerate(flat):
        if m.size == 0:
            continue
        sz = _schur(m)
        if sz is None or not np.all(np.isfinite(m)):
            res[k] = np.nan
            continue
        t, z = sz
        res[k] = z @ fn(t) @ z.conj().T
    if x.dtype.kind != "c":
        return out.real.astype(x.dtype) if real_ok else out.astype(x.dtype)
    return out.astype(x.dtype)


@kernel("MatrixSquareRoot")
def matrix_square_root(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    _no_half_kernel(x, "MatrixSquareRoot")
    _square(x)
    out = _matrix_function(x, _sqrtm_tri, True)
    if x.dtype.kind != "c" and x.size:
        # TF works in the real Schur form: a negative real eigenvalue has no real square
        # root, and the NaN it produces spreads over the whole matrix.
        ev = np.linalg.eigvals(np.nan_to_num(x.astype(np.float64)))
        bad = ((ev.imag == 0) & (ev.real < 0)).any(axis=-1)
        out[bad] = np.nan
    return out


@kernel("MatrixLogarithm")
def matrix_logarithm(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    def log_tri(t: np.ndarray) -> np.ndarray:
        if np.any(np.diagonal(t) == 0):  # singular: TF's result is NaN throughout
            return np.full(t.shape, np.nan, t.dtype)
        return _logm_tri(t)

    return _matrix_function(x, log_tri, False)
