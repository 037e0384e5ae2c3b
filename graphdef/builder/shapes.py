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


def _pool_out(n: int | None, k: int, st: int, padding: str) -> int | None:
    if n is None:
        return None
    return -(-n // st) if padding == "SAME" else (n - k) // st + 1


def _window(op: Any, kshape: Any) -> list:
    """Conv2D / MaxPool / AvgPool output shape (NHWC)."""
    s = op.inputs[0].shape
    if s is None or len(s) != 4 or op.get_attr("data_format") not in ("NHWC", b"NHWC"):
        return [None]
    padding = op.get_attr("padding")
    padding = padding.decode() if isinstance(padding, bytes) else padding
    if padding not in ("SAME", "VALID") or kshape is None:
        return [None]
    st = op.get_attr("strides")
    dil = op.get_attr("dilations") if "dilations" in op.attrs else [1, 1, 1, 1]
    kh, kw, cout = kshape
    eh, ew = (kh - 1) * dil[1] + 1, (kw - 1) * dil[2] + 1
    return [(s[0], _pool_out(s[1], eh, st[1], padding), _pool_out(s[2], ew, st[2], padding),
             s[3] if cout is None else cout)]


def _conv(op: Any) -> list:
    f = op.inputs[1].shape
    if f is None or len(f) != 4 or None in f[:2]:
        return [None]
    return _window(op, (f[0], f[1], f[3]))


def _pool(op: Any) -> list:
    k = op.get_attr("ksize")
    return _window(op, (k[1], k[2], None))


def _gather(op: Any) -> list:
    p, i, ax = op.inputs[0].shape, op.inputs[1].shape, const_value(op.inputs[2])
    if p is None or i is None or ax is None or op.get_attr("batch_dims"):
        return [None]
    a = int(ax) % len(p)
    return [tuple(p[:a]) + tuple(i) + tuple(p[a + 1:])]


def _expand_dims(op: Any) -> list:
    s, ax = op.inputs[0].shape, const_value(op.inputs[1])
    if s is None or ax is None:
        return [None]
    a = int(ax)
    a = a % (len(s) + 1) if a < 0 else a
    return [tuple(s[:a]) + (1,) + tuple(s[a:])]


def _xent(op: Any) -> list:
    s = op.inputs[0].shape
    if s is None or len(s) != 2:
        return [None, None]
    return [(s[0],), tuple(s)]


def _tile(op: Any) -> list:
    s, m = op.inputs[0].shape, const_value(op.inputs[1])
    if s is None or m is None:
        return [None]
    return [tuple(None if d is None else d * int(k) for d, k in zip(s, np.ravel(m)))]


RULES = {
    "Conv2D": _conv, "MaxPool": _pool, "AvgPool": _pool, "GatherV2": _gather,
    "ExpandDims": _expand_dims, "Tile": _tile,
    "SoftmaxCrossEntropyWithLogits": _xent, "SparseSoftmaxCrossEntropyWithLogits": _xent,
    "Conv2DBackpropInput": lambda op: [None if const_value(op.inputs[0]) is None else
                                       tuple(int(d) for d in const_value(op.inputs[0]))],
    "MaxPoolGrad": lambda op: [op.inputs[0].shape],

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
