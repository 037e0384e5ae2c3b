"""Static shapes of the builder's ops, where TensorFlow infers them; ``None`` elsewhere.

Uses the shared rules in ``graphdef/shapes.py`` (same-shape and broadcasting ops) and adds the
ops whose shape depends on an attr or a constant input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import shapes as S


def const_value(t: Any) -> np.ndarray | None:
    """The value of a tensor made by a Const node (possibly through Identity), else None."""
    op = t.op
    while op.type == "Identity" and op.inputs:
        op = op.inputs[0].op
    if op.type != "Const":
        return None
    return op.get_attr("value")


def _matmul(op: Any) -> list:
    a, b = op.inputs[0].shape, op.inputs[1].shape
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return [None]
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    return [(a[1] if ta else a[0], b[0] if tb else b[1])]


def _reduce(op: Any) -> list:
    s, axes = op.inputs[0].shape, const_value(op.inputs[1])
    if s is None or axes is None:
        return [None]
    axes = {int(a) % len(s) for a in np.ravel(axes)} if len(s) else set()
    keep = op.get_attr("keep_dims")
    return [tuple(1 if i in axes else d for i, d in enumerate(s) if keep or i not in axes)]


def _reshape(op: Any) -> list:
    v = const_value(op.inputs[1])
    if v is None:
        return [None]
    dims = [int(d) for d in np.ravel(v)]
    if -1 in dims:
        s = op.inputs[0].shape
        if s is None or None in s:
            return [tuple(None if d == -1 else d for d in dims)]
        known = int(np.prod([d for d in dims if d != -1]))
        total = int(np.prod(s))
        dims = [total // known if d == -1 and known else d for d in dims]
    return [tuple(dims)]


def _transpose(op: Any) -> list:
    s, p = op.inputs[0].shape, const_value(op.inputs[1])
    if s is None or p is None:
        return [None]
    return [tuple(s[int(i)] for i in np.ravel(p))]


def _concat(op: Any) -> list:
    vals, axis = op.inputs[:-1], const_value(op.inputs[-1])
    shapes = [t.shape for t in vals]
    if axis is None or any(s is None for s in shapes):
        return [None]
    ax = int(axis) % len(shapes[0])
    out = list(shapes[0])
    sizes = [s[ax] for s in shapes]
    out[ax] = None if None in sizes else sum(sizes)
    return [tuple(out)]


RULES = {
    "Placeholder": lambda op: [op.get_attr("shape")],
    "PlaceholderWithDefault": lambda op: [op.get_attr("shape")],
    "Const": lambda op: [tuple(np.shape(op.get_attr("value")))],
    "VariableV2": lambda op: [op.get_attr("shape")],
    "Assign": lambda op: [op.inputs[1].shape],
    "AssignAdd": lambda op: [op.inputs[0].shape],
    "AssignSub": lambda op: [op.inputs[0].shape],
    "MatMul": _matmul,
    "Sum": _reduce, "Mean": _reduce, "Max": _reduce, "Min": _reduce, "Prod": _reduce,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "ConcatV2": _concat,
    "Switch": lambda op: [op.inputs[0].shape, op.inputs[0].shape],
    "Merge": lambda op: [op.inputs[0].shape, ()],
    "Shape": lambda op: [None if op.inputs[0].shape is None else (len(op.inputs[0].shape),)],
    "Size": lambda op: [()],
    "Rank": lambda op: [()],
    "AddN": lambda op: [op.inputs[0].shape],
    "Fill": lambda op: [None if const_value(op.inputs[0]) is None
                        else tuple(int(d) for d in const_value(op.inputs[0]))],
}


def infer(op: Any) -> list | None:
    rule = RULES.get(op.type)
    if rule is not None:
        return rule(op)
    if op.type in S.SAME_SHAPE_OPS and op.inputs:
        return [op.inputs[0].shape] * len(op.outputs)
    if op.type in S.BROADCAST_OPS and len(op.inputs) == 2:
        return [S.broadcast_shapes(op.inputs[0].shape, op.inputs[1].shape)]
    return None
