"""``where(cond, t, e)``: ``np.where`` for one dtype, bit for bit, by masks instead of branches.

numpy's ``where`` (and any ufunc's ``where=``) branches per element: on a random mask it runs
at 3-4 ns per element, 25x a multiply. Selecting by bits costs four bitwise passes,
``e ^ ((t ^ e) & m)`` with ``m`` all ones where ``cond`` holds, and keeps every bit of the
chosen value (NaN payloads, -0.0, infinities), which ``t * m + e * (1 - m)`` would not.
Measured on 131,072 float32 with a random mask: 470 against 65 us.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_BOOL = np.dtype(bool)
# Below this many elements np.where's one call costs less than five.
_MIN_SIZE = 4096
_ARRAYS = (np.ndarray, np.generic)


def where(cond: Any, t: Any, e: Any) -> np.ndarray:
    """``np.where(cond, t, e)`` (broadcasting alike; ValueError on shapes that do not)."""
    # Only arrays and numpy scalars take the bitwise path: a Python number is "weak" in
    # numpy's type promotion, and np.where must see it as it is to pick the result's dtype.
    if not (isinstance(t, _ARRAYS) and isinstance(e, _ARRAYS) and isinstance(cond, np.ndarray)):
        return np.where(cond, t, e)
    ta, ea = np.asarray(t), np.asarray(e)
    dt = ta.dtype
    u = _UINT.get(dt.itemsize)
    if u is None or ea.dtype != dt or cond.dtype != _BOOL or dt.hasobject \
            or dt.kind not in "biufcV" or max(cond.size, ta.size, ea.size) < _MIN_SIZE:
        return np.where(cond, t, e)
    shape = np.broadcast_shapes(cond.shape, ta.shape, ea.shape)
    m = np.negative(cond.view(np.uint8), dtype=u)   # True -> all ones, False -> 0
    ev = ea.view(u)
    r = np.bitwise_xor(ta.view(u), ev)
    r = np.bitwise_and(r, m, out=r if r.shape == shape else None)
    np.bitwise_xor(r, ev, out=r)
    return r.view(dt)
