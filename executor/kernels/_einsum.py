"""Two-operand einsum as one batched matmul, planned once per (equation, shapes).

``np.einsum(optimize=True)`` re-plans on every call (90-165 us on a Transformer's attention
equations), and an equation with batch labels (``BTNH,BSNH->BNTS``) never reaches BLAS: numpy's
``tensordot`` has no batch dimensions, so it falls to the C loop. Every two-operand equation
without a repeated label inside one operand is a batched matmul after transposes:

* batch labels (both operands and the output), contracted labels (both, not the output),
  free labels of either side (one operand and the output), and labels of one operand that the
  output drops (summed away first).

The plan lists the axis permutations and shapes; running it is a sum, two transposes/reshapes,
one ``np.matmul`` and a final transpose. Anything else (diagonals, broadcasting between named
or ellipsis dimensions, one operand) returns ``None`` and the caller keeps ``np.einsum``.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import NamedTuple

import numpy as np

from dfg.executor import blas


class EinsumPlan(NamedTuple):
    a_sum: tuple[int, ...]         # axes of operand a summed away first
    a_perm: tuple[int, ...] | None  # then transposed to (batch, free_a, contract)
    a_shape: tuple[int, int, int]  # and reshaped to (B, M, K)
    b_sum: tuple[int, ...]
    b_perm: tuple[int, ...] | None  # (batch, contract, free_b)
    b_shape: tuple[int, int, int]  # (B, K, N)
    out_shape: tuple[int, ...]     # (batch..., free_a..., free_b...)
    out_perm: tuple[int, ...] | None  # to the equation's output order


def _expand(sub: str, rank: int, fill: str) -> str | None:
    """``sub`` with ``...`` spelled out as ``rank - len(named)`` labels from ``fill``."""
    if "..." not in sub:
        return sub if len(sub) == rank else None
    head, _, tail = sub.partition("...")
    if "." in head or "." in tail:
        return None
    n = rank - len(head) - len(tail)
    if not 0 <= n <= len(fill):
        return None
    return head + fill[len(fill) - n:] + tail


def _perm(order: list[int]) -> tuple[int, ...] | None:
    return None if order == sorted(order) else tuple(order)


@lru_cache(maxsize=512)
def plan(equation: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> EinsumPlan | None:
    """The matmul plan for ``equation`` on these shapes, or ``None`` to use ``np.einsum``."""
    lhs, _, out = equation.partition("->")
    subs = lhs.split(",")
    if len(subs) != 2:
        return None
    # Ellipsis dimensions become labels no equation uses (einsum labels are letters only);
    # they must have equal sizes in both operands (no broadcasting here), and are aligned
    # from the right as numpy and TensorFlow align them.
    fill = "".join(chr(c) for c in range(0x100, 0x100 + 32))
    sa = _expand(subs[0], len(a_shape), fill)
    sb = _expand(subs[1], len(b_shape), fill)
    if sa is None or sb is None:
        return None
    if "..." in out:
        n = max(len(s) - len(sub.replace("...", "")) for s, sub in zip((sa, sb), subs))
        out = out.replace("...", fill[len(fill) - n:] if n else "")
    if "." in out or any(len(set(s)) != len(s) for s in (sa, sb, out)):
        return None
    size: dict[str, int] = {}
    for labels, shape in ((sa, a_shape), (sb, b_shape)):
        for lab, d in zip(labels, shape):
            if size.setdefault(lab, d) != d:
                return None  # broadcasting between sizes: np.einsum's rules apply
    if any(lab not in size for lab in out):
        return None
    batch = [lab for lab in out if lab in sa and lab in sb]
    free_a = [lab for lab in out if lab in sa and lab not in sb]
    free_b = [lab for lab in out if lab in sb and lab not in sa]
    contract = [lab for lab in sa if lab in sb and lab not in out]
    a_keep = [lab for lab in sa if lab in out or lab in sb]
    b_keep = [lab for lab in sb if lab in out or lab in sa]
    a_sum = tuple(i for i, lab in enumerate(sa) if lab not in a_keep)
    b_sum = tuple(i for i, lab in enumerate(sb) if lab not in b_keep)
    nb, m, k, n = (prod(size[lab] for lab in g) for g in (batch, free_a, contract, free_b))
    pre = batch + free_a + free_b
    return EinsumPlan(
        a_sum, _perm([a_keep.index(lab) for lab in batch + free_a + contract]), (nb, m, k),
        b_sum, _perm([b_keep.index(lab) for lab in batch + contract + free_b]), (nb, k, n),
        tuple(size[lab] for lab in pre), _perm([pre.index(lab) for lab in out]))


def run(p: EinsumPlan, a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Run plan ``p``; the result has ``dtype`` (the inputs' common dtype)."""
    if p.a_sum:
        a = a.sum(axis=p.a_sum, dtype=dtype)
    if p.b_sum:
        b = b.sum(axis=p.b_sum, dtype=dtype)
    if p.a_perm is not None:
        a = a.transpose(p.a_perm)
    if p.b_perm is not None:
        b = b.transpose(p.b_perm)
    if p.a_shape[0] == 1:   # one matrix each: a 2-D product (blas.matmul decides its threads)
        r = blas.matmul(a.reshape(p.a_shape[1:]), b.reshape(p.b_shape[1:]))
    else:
        r = np.matmul(a.reshape(p.a_shape), b.reshape(p.b_shape))
    r = r.reshape(p.out_shape)
    if p.out_perm is not None:
        r = np.ascontiguousarray(r.transpose(p.out_perm))
    return r
