"""Assertions the kernel tests share: dtype and shape exact, values exact or within a
tolerance."""

from __future__ import annotations

import numpy as np


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Exact dtype, shape and values (NaN meets NaN)."""
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """The conformance comparison: dtype and shape exact, values within rtol/atol."""
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
