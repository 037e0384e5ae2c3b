"""The Einsum kernel's matmul plans against the definition (a float64 sum of products)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dfg.executor.kernels import _einsum
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError


def _definition(equation: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sum over every label assignment, written out with explicit loops over labels."""
    lhs, out = equation.split("->")
    sa, sb = lhs.split(",")
    assert "..." not in equation
    size = dict(zip(sa, a.shape)) | dict(zip(sb, b.shape))
    labels = sorted(size)
    res = np.zeros([size[c] for c in out], np.result_type(a.dtype, np.float64))
    for vals in itertools.product(*(range(size[c]) for c in labels)):
        v = dict(zip(labels, vals))
        res[tuple(v[c] for c in out)] += (a[tuple(v[c] for c in sa)].item()
                                          * b[tuple(v[c] for c in sb)].item())
    return res


# (equation, shape of a, shape of b): attention, dense layers, outer products, transposes,
# summed-away labels on either side, scalar outputs, batch-only and size-0 dimensions.
CASES = [
    ("BTNH,BSNH->BNTS", (2, 3, 2, 4), (2, 5, 2, 4)),
    ("BNTS,BSNH->BTNH", (2, 2, 3, 5), (2, 5, 2, 4)),
    ("abc,cde->abde", (2, 3, 4), (4, 2, 3)),
    ("abcd,cde->abe", (2, 3, 2, 4), (2, 4, 5)),
    ("ij,jk->ik", (3, 4), (4, 5)),
    ("ij,kj->ki", (3, 4), (5, 4)),
    ("i,j->ij", (3,), (4,)),
    ("i,i->", (5,), (5,)),
    ("ij,ij->i", (3, 4), (3, 4)),
    ("ij,ij->ji", (3, 4), (3, 4)),
    ("bij,bjk->bki", (2, 3, 4), (2, 4, 3)),
    ("ijk,k->ij", (2, 3, 4), (4,)),
    ("ijk,l->il", (2, 3, 4), (5,)),
    ("ij,jk->", (3, 4), (4, 2)),
    ("abc,b->ac", (2, 0, 3), (0,)),
    ("ab,bc->ac", (0, 3), (3, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
@pytest.mark.parametrize("equation,sa,sb", CASES)
def test_two_operand_equations_match_the_definition(equation, sa, sb, dtype):
    rng = np.random.default_rng(len(equation))
    a = rng.integers(-3, 4, sa).astype(dtype)
    b = rng.integers(-3, 4, sb).astype(dtype)
    assert _einsum.plan(equation, sa, sb) is not None
    got = invoke("Einsum", a, b, attrs={"equation": equation})
    assert got.dtype == np.dtype(dtype)
    # Small integers: every product and sum is exact in every dtype tested.
    np.testing.assert_array_equal(got, _definition(equation, a, b).astype(dtype))


@pytest.mark.parametrize("equation,sa,sb,expect", [
    ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5), (2, 3, 5)),
    ("...ij,...jk->...ik", (2, 2, 3, 4), (2, 2, 4, 5), (2, 2, 3, 5)),
    ("b...i,bi->b...", (2, 3, 4, 5), (2, 5), (2, 3, 4)),
    ("...ij,jk->...ik", (2, 3, 3, 4), (4, 5), (2, 3, 3, 5)),
])
def test_ellipsis_equations_take_a_plan_and_match_numpy(equation, sa, sb, expect):
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, sa).astype(np.float64)
    b = rng.integers(-3, 4, sb).astype(np.float64)
    assert _einsum.plan(equation, sa, sb) is not None
    got = invoke("Einsum", a, b, attrs={"equation": equation})
    assert got.shape == expect
    # np.einsum without optimize is numpy's direct loop, independent of the plan.
    np.testing.assert_array_equal(got, np.einsum(equation, a, b))


@pytest.mark.parametrize("equation,sa,sb", [
    ("ii,ij->j", (3, 3), (3, 4)),           # a diagonal
    ("...ij,...jk->...ik", (1, 3, 4), (2, 4, 5)),  # ellipsis dims broadcast
    ("ij,jk->ik", (3, 1), (4, 5)),           # a named label broadcast
])
def test_equations_without_a_plan_still_run(equation, sa, sb):
    rng = np.random.default_rng(1)
    a = rng.integers(-3, 4, sa).astype(np.float64)
    b = rng.integers(-3, 4, sb).astype(np.float64)
    assert _einsum.plan(equation, sa, sb) is None
    try:
        expect = np.einsum(equation, a, b)
    except ValueError:
        with pytest.raises(InvalidArgumentError):
            invoke("Einsum", a, b, attrs={"equation": equation})
        return
    got = invoke("Einsum", a, b, attrs={"equation": equation})
    np.testing.assert_array_equal(got, expect)


def test_float32_attention_matches_float64_definition_closely():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 16, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 16, 4, 8)).astype(np.float32)
    got = invoke("Einsum", q, k, attrs={"equation": "BTNH,BSNH->BNTS"})
    expect = np.einsum("btnh,bsnh->bnts", q.astype(np.float64), k.astype(np.float64))
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
