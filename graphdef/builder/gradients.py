"""``gradients(ys, xs, grad_ys=None)``: the backward graph by reverse accumulation, as
``tf.gradients`` builds it for graphs without control flow.

Nodes live under ``gradients/`` and each op's gradient under ``gradients/<op>_grad/`` (the
scheme TensorFlow uses; the individual helper nodes are not named node for node as
TensorFlow's are). Broadcasting binary ops reduce their gradients with
``BroadcastGradientArgs`` + ``Sum`` + ``Reshape`` so that dynamic shapes work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import UnimplementedError
from .core import Operation, Tensor, get_default_graph
from .ops import (
    add_n,
    apply_op,
    cast,
    constant,
    matmul,
    reduce_sum,
    reshape,
    shape,
    transpose,
    zeros_like,
)


def _o(op: Operation) -> Tensor:
    return op.outputs[0]


def _reduce_to(g: Tensor, x: Tensor, y: Tensor, gy: Tensor | None = None) -> tuple:
    """Sum a broadcast gradient back to the shapes of x and y."""
    sx, sy = shape(x), shape(y)
    rx, ry = apply_op("BroadcastGradientArgs", [sx, sy]).outputs
    gx = reshape(reduce_sum(g, rx), sx)
    gy_ = reshape(reduce_sum(g if gy is None else gy, ry), sy)
    return gx, gy_


def _add(op: Operation, g: Tensor) -> list:
    return list(_reduce_to(g, *op.inputs))


def _sub(op: Operation, g: Tensor) -> list:
    return list(_reduce_to(g, *op.inputs, gy=-g))


def _mul(op: Operation, g: Tensor) -> list:
    x, y = op.inputs
    return list(_reduce_to(g * y, x, y, gy=x * g))


def _div(op: Operation, g: Tensor) -> list:
    x, y = op.inputs
    return list(_reduce_to(g / y, x, y, gy=g * (-x / (y * y))))


def _maximum(op: Operation, g: Tensor, less: bool = False) -> list:
    x, y = op.inputs
    pick = _o(apply_op("LessEqual" if less else "GreaterEqual", [x, y]))
    z = zeros_like(g)
    gx = _o(apply_op("SelectV2", [pick, g, z]))
    gy = _o(apply_op("SelectV2", [pick, z, g]))
    return list(_reduce_to(gx, x, y, gy=gy))


def _squared_difference(op: Operation, g: Tensor) -> list:
    x, y = op.inputs
    d = g * (2.0 * (x - y))
    return list(_reduce_to(d, x, y, gy=-d))


def _matmul(op: Operation, g: Tensor) -> list:
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if not ta and not tb:
        return [matmul(g, b, transpose_b=True), matmul(a, g, transpose_a=True)]
    if not ta and tb:
        return [matmul(g, b), matmul(g, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, g, transpose_b=True), matmul(a, g)]
    return [matmul(b, g, transpose_a=True, transpose_b=True),
            matmul(g, a, transpose_a=True, transpose_b=True)]


def _reduction_grad(op: Operation, g: Tensor) -> Tensor:
    x, axes = op.inputs
    from .shapes import const_value
    ax = const_value(axes)
    if x.shape is None or ax is None:
        raise UnimplementedError("gradient of a reduction needs a known rank and constant "
                                 "axes", node=op.name, op=op.type)
    rank = len(x.shape)
    keep = np.ones(rank, np.int32)
    for a in np.ravel(ax):
        keep[int(a) % rank] = 0
    sx = shape(x)
    kept = sx * constant(keep) + constant(1 - keep)
    return _o(apply_op("BroadcastTo", [reshape(g, kept), sx]))


def _sum(op: Operation, g: Tensor) -> list:
    return [_reduction_grad(op, g), None]


def _mean(op: Operation, g: Tensor) -> list:
    x = op.inputs[0]
    full = _reduction_grad(op, g)
    n = cast(_o(apply_op("Size", [x])), D.base(x.dtype))
    m = cast(_o(apply_op("Size", [op.outputs[0]])), D.base(x.dtype))
    return [full / (n / m), None]


def _unary(fn: Callable[[Operation, Tensor], Tensor]) -> Callable:
    return lambda op, g: [fn(op, g)]


def _transpose(op: Operation, g: Tensor) -> list:
    inv = _o(apply_op("InvertPermutation", [op.inputs[1]]))
    return [transpose(g, inv), None]


def _concat(op: Operation, g: Tensor) -> list:
    vals, axis = op.inputs[:-1], op.inputs[-1]
    offsets = apply_op("ConcatOffset", [axis, [shape(v) for v in vals]]).outputs
    return [_o(apply_op("Slice", [g, off, shape(v)])) for v, off in zip(vals, offsets)] + [None]


def _strided_slice(op: Operation, g: Tensor) -> list:
    """Zero-pad the gradient back to the input's shape (static shapes, unit strides, no
    ellipsis/new axes: what the builder's ``x[...]`` makes from ints and slices)."""
    from .shapes import const_value
    x = op.inputs[0]
    b, e, st = (const_value(t) for t in op.inputs[1:])
    masks = {k: op.get_attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                         "new_axis_mask", "shrink_axis_mask")}
    if (x.shape is None or None in x.shape or b is None or e is None or st is None
            or np.any(st != 1) or masks["ellipsis_mask"] or masks["new_axis_mask"]):
        raise UnimplementedError("gradient of a strided slice needs static shapes, constant "
                                 "bounds and unit strides", node=op.name, op=op.type)
    pads, kept = [], []
    for i, d in enumerate(x.shape):
        if i < len(b):
            lo = 0 if masks["begin_mask"] >> i & 1 else int(b[i])
            hi = d if masks["end_mask"] >> i & 1 else int(e[i])
            lo, hi = lo % d if lo < 0 else min(lo, d), hi % d if hi < 0 else min(hi, d)
            if masks["shrink_axis_mask"] >> i & 1:
                hi = lo + 1
        else:
            lo, hi = 0, d
        pads.append([lo, d - hi])
        kept.append(hi - lo)
    g = reshape(g, kept)
    return [_o(apply_op("Pad", [g, constant(np.asarray(pads, np.int32))])), None, None, None]


def _softmax(op: Operation, g: Tensor) -> list:
    y = op.outputs[0]
    s = reduce_sum(g * y, axis=-1, keepdims=True)
    return [(g - s) * y]


def _cast(op: Operation, g: Tensor) -> list:
    src = op.get_attr("SrcT")
    if D.base(src) not in D.FLOATING:
        return [None]
    return [cast(g, src)]


GRADIENTS: dict[str, Callable] = {
    "Identity": lambda op, g: [g],
    "Snapshot": lambda op, g: [g],
    "AddV2": _add, "Add": _add, "Sub": _sub, "Mul": _mul, "RealDiv": _div,
    "Maximum": _maximum, "Minimum": lambda op, g: _maximum(op, g, less=True),
    "SquaredDifference": _squared_difference,
    "Neg": _unary(lambda op, g: -g),
    "Square": _unary(lambda op, g: g * (2.0 * op.inputs[0])),
    "Exp": _unary(lambda op, g: g * op.outputs[0]),
    "Log": _unary(lambda op, g: g / op.inputs[0]),
    "Sqrt": _unary(lambda op, g: _o(apply_op("SqrtGrad", [op.outputs[0], g]))),
    "Tanh": _unary(lambda op, g: _o(apply_op("TanhGrad", [op.outputs[0], g]))),
    "Sigmoid": _unary(lambda op, g: _o(apply_op("SigmoidGrad", [op.outputs[0], g]))),
    "Relu": _unary(lambda op, g: _o(apply_op("ReluGrad", [g, op.outputs[0]]))),
    "Abs": _unary(lambda op, g: g * _o(apply_op("Sign", [op.inputs[0]]))),
    "MatMul": _matmul,
    "Sum": _sum, "Mean": _mean,
    "Reshape": lambda op, g: [reshape(g, shape(op.inputs[0])), None],
    "Transpose": _transpose,
    "ConcatV2": _concat,
    "Softmax": _softmax,
    "StridedSlice": _strided_slice,
    "Cast": _cast,
}


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients") -> list:
    """d(sum of ys)/d(each x), one tensor (or None when x does not reach ys) per x."""
    g = get_default_graph()
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    xs = [x._as_tensor(True) if hasattr(x, "_as_tensor") else x for x in xs]
    if grad_ys is not None and not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    # ops between xs and ys
    consumers: dict[int, list[Operation]] = {}
    for op in g.ops:
        for t in op.inputs:
            consumers.setdefault(id(t.op), []).append(op)
    fwd: set[int] = set()
    stack = [x.op for x in xs]
    while stack:
        op = stack.pop()
        if id(op) in fwd:
            continue
        fwd.add(id(op))
        stack.extend(consumers.get(id(op), []))
    between: set[int] = set()
    stack = [y.op for y in ys]
    while stack:
        op = stack.pop()
        if id(op) in between or id(op) not in fwd:
            continue
        between.add(id(op))
        stack.extend(t.op for t in op.inputs)
    acc: dict[int, list[Tensor]] = {}
    x_ids = {id(x) for x in xs}
    with g.name_scope(None, name):
        for i, y in enumerate(ys):
            if grad_ys is not None and grad_ys[i] is not None:
                gy = grad_ys[i]
            else:
                gy = _o(apply_op("Fill", [shape(y), constant(np.ones((), D.to_numpy(
                    D.base(y.dtype))), name=f"grad_ys_{i}")]))
            acc.setdefault(id(y), []).append(gy)
        for op in reversed(g.ops):
            if id(op) not in between:
                continue
            outs = [acc.get(id(t)) for t in op.outputs]
            if not any(outs) or all(id(t) in x_ids for t in op.outputs) and op.inputs == []:
                continue
            fn = GRADIENTS.get(op.type)
            if fn is None:
                if not op.inputs or all(id(t.op) not in between for t in op.inputs):
                    continue
                raise UnimplementedError(f"no gradient for op {op.type}", node=op.name,
                                         op=op.type)
            with g.name_scope(op.name + "_grad"):
                out_grads = [_sum_grads(v, t) for v, t in zip(outs, op.outputs)]
                in_grads = fn(op, *out_grads)
            for t, gi in zip(op.inputs, in_grads):
                if gi is not None and (id(t.op) in between or id(t) in x_ids):
                    acc.setdefault(id(t), []).append(gi)
        return [_sum_grads(acc.get(id(x)), x) if acc.get(id(x)) else None for x in xs]


def _sum_grads(gs: list[Tensor] | None, t: Tensor) -> Tensor:
    if not gs:
        return zeros_like(t)
    return gs[0] if len(gs) == 1 else add_n(gs)
