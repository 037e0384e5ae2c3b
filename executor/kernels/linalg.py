"""Linear algebra kernels: inverses, determinants, decompositions, solvers, diagonals.

Matrices are the two innermost dimensions; everything outside them is a batch (numpy's
``linalg`` functions batch the same way). Decompositions come from LAPACK through numpy, as
TensorFlow's come from Eigen: results agree to rounding, but where a factor is only defined up
to signs (Qr, Svd, eigenvectors) the signs may differ from TensorFlow's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

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


@kernel("MatrixInverse")
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


@kernel("Cholesky")
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


@kernel("Qr")
def qr(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if x.ndim < 2:
        raise InvalidArgumentError(f"input must have rank >= 2, got {x.ndim}")
    mode = "complete" if ctx.attrs.get("full_matrices", False) else "reduced"
    q, r = np.linalg.qr(x, mode=mode)
    return q.astype(x.dtype), r.astype(x.dtype)


@kernel("Svd")
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


@kernel("SelfAdjointEigV2")
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


@kernel("MatrixSolve")
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
