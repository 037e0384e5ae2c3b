"""``gradients(ys, xs, grad_ys=None)``: the backward graph by reverse accumulation, node for
node as TensorFlow 2.21's ``tf.compat.v1.gradients`` builds it (graph mode, control flow v1).

The walk is TensorFlow's: the ops between ``xs`` and ``ys`` are visited from the ys in a
queue ordered by pending counts, each op's incoming gradients summed with ``AddN``
(colocated with the first term) and its gradient function run in the scope
``gradients/<op>_grad``. The gradient functions follow TensorFlow's, static-shape shortcuts
included (``Shape`` folded to a ``Const``, reduction axes computed at build time), so the node
names, ops and inputs equal TensorFlow's for the same forward graph; this is checked on the
programs in ``tests/data/builder`` (``grad_*``).

Differences from TensorFlow, each deliberate:

- ``StridedSlice``: TensorFlow emits ``StridedSliceGrad``, which dfg has no kernel for; the
  builder pads the gradient back with ``Pad`` (static shapes, unit strides).
- Sparse gradients (``GatherV2``) are ``IndexedSlices`` inside the walk, as in TensorFlow, and
  become dense (``UnsortedSegmentSum``) where they meet a dense op, exactly as TensorFlow's
  conversion does; but a gradient returned for an ``x`` is always dense (TensorFlow returns
  the IndexedSlices), converted in ``gradients/``.
- ``while_loop``: differentiated as TensorFlow 1.x does it, for any trip count known only at
  run time (control_flow_grad.py: a forward counter, stacks of the forward values, a
  backward loop popping them, accumulators for loop invariants), node for node as
  TensorFlow builds it (checked on tests/data/while_grad). A sparse (``IndexedSlices``)
  gradient of a loop invariant is made dense before it is accumulated (TensorFlow keeps it
  sparse: an accumulator of indices and values). Second-order gradients through a loop are
  refused, as TensorFlow refuses them. ``unroll_loops`` (importer.py) still unrolls a loop
  with a static trip count first, when a graph without stacks is wanted.
- ``cond``: handled as TensorFlow does (Merge -> Switch on the cond's pred named
  ``cond_grad``, Switch -> Merge, zeros for an unused branch made on that branch only; in a
  loop the pred of each iteration comes back from a stack); in an unrolled loop the cond
  contexts are gone and Switch/Merge get TensorFlow's context-free gradients (Switch ->
  Switch+Merge, Merge -> Equal(value_index) + Switch).
- Functional ``If`` (``cond(functional=True)``): an ``If`` over the branches' gradient
  functions, named as TensorFlow names it (``gradients/<cond>_grad/StatelessIf``); each
  gradient branch computes its forward branch again where TensorFlow rewrites the forward
  ``If`` to output the intermediates as optionals. Functional ``While``: the forward loop
  run again recording each iteration's loop variables in TensorLists, then a backward
  ``While`` popping them and differentiating that iteration's body built again (TensorFlow's
  while_v2 rewrites the forward ``While`` to accumulate every intermediate): same values,
  different nodes (``gradients/<while>_grad/forward`` and ``.../backward``).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import InvalidArgumentError, UnimplementedError
from .core import Operation, Tensor, get_default_graph
from .ops import (
    add_n,
    apply_op,
    cast,
    constant,
    reduce_sum,
    reshape,
    shape,
    transpose,
)
from .shapes import const_value

_TRAINABLE = {D.from_name(n) for n in ("float16", "bfloat16", "float32", "float64",
                                       "complex64", "complex128", "resource", "variant")}


def _o(op: Operation) -> Tensor:
    return op.outputs[0]


def _trainable(t: Tensor) -> bool:
    return D.base(t.dtype) in _TRAINABLE


def _static(t: Tensor) -> tuple | None:
    """The fully known static shape, or None."""
    s = t.shape
    return None if s is None or None in s else tuple(s)


# --- sparse gradients ------------------------------------------------------------------------
class IndexedSlices:
    """A sparse gradient (``values`` rows at ``indices`` of a tensor of ``dense_shape``), as
    TensorFlow's gather gradient makes; converted to a dense tensor the way TensorFlow's
    conversion function does (``UnsortedSegmentSum`` named after the consuming argument)."""

    def __init__(self, values: Tensor, indices: Tensor, dense_shape: Tensor) -> None:
        self.values, self.indices, self.dense_shape = values, indices, dense_shape
        self.dtype = values.dtype

    def _as_dense(self, name: str = "Const") -> Tensor:
        n = self.dense_shape[0]
        t = _o(apply_op("UnsortedSegmentSum", [self.values, self.indices, n], name=name))
        t.shape = const_value(self.dense_shape)
        if t.shape is not None:
            t.shape = tuple(int(d) for d in t.shape)
        return t


def _dense(g: Any, name: str = "Const") -> Tensor:
    return g._as_dense(name) if isinstance(g, IndexedSlices) else g


# --- helpers mirroring TensorFlow's array_ops/math_ops in graph mode -------------------------
def _shape_of(x: Tensor, name: str = "Shape") -> Tensor:
    """``array_ops.shape``: a Const when the static shape is fully known."""
    s = _static(x)
    if s is not None:
        return constant(np.asarray(s, np.int32), name=name)
    return shape(x, name=name)


def _infer_reduction_axes(xs: tuple | None, ys: tuple | None) -> tuple:
    """TensorFlow's _InferGradientReductionAxes: (x_axes, y_axes) or (None, None)."""
    if xs is None or ys is None:
        return None, None
    rank = max(len(xs), len(ys))
    xa, ya = [], []
    for axis in range(rank):
        xd = 1 if axis < rank - len(xs) else xs[axis - (rank - len(xs))]
        yd = 1 if axis < rank - len(ys) else ys[axis - (rank - len(ys))]
        if xd == 1 and yd != 1:
            xa.append(axis)
        elif yd == 1 and xd != 1:
            ya.append(axis)
        elif xd is None or yd is None:
            return None, None
    return xa, ya


def _reduce_gradient_args(x: Tensor, y: Tensor, gx: Any, gy: Any) -> tuple:
    """Sum broadcast gradients back to the shapes of x and y (SmartBroadcastGradientArgs)."""
    if gx is None and gy is None:
        return gx, gy
    sx, sy = _shape_of(x), _shape_of(y)
    xa, ya = _infer_reduction_axes(x.shape, y.shape)
    if xa is None or ya is None:
        xa, ya = apply_op("BroadcastGradientArgs", [sx, sy]).outputs
        xm = ym = True
    else:
        xm = bool(xa) or len(x.shape) < len(y.shape)
        ym = bool(ya) or len(y.shape) < len(x.shape)

    def red(g: Any, s: Tensor, axes: Any, must: bool) -> Any:
        if g is None or not must:
            return g
        g = reduce_sum(_dense(g), axes if isinstance(axes, Tensor) else list(axes),
                       keepdims=True)
        return reshape(g, s)
    return red(gx, sx, xa, xm), red(gy, sy, ya, ym)


def _same_static(x: Tensor, y: Tensor, g: Any) -> bool:
    return (isinstance(g, Tensor) and _static(x) is not None and x.shape == y.shape
            and x.shape == g.shape)


def _mul(a: Any, b: Any) -> Tensor:
    return _o(apply_op("Mul", [a, b]))


def _binop(op_type: str, scope: str, a: Any, b: Any) -> Tensor:
    """An operator (``a * b`` ...): TensorFlow names it after the Python operator."""
    return _o(apply_op(op_type, [a, b], default_name=scope))


# --- gradient functions ----------------------------------------------------------------------
def _add(op: Operation, g: Any) -> Any:
    x, y = op.inputs
    if _same_static(x, y, g):
        return [g, g]
    return list(_reduce_gradient_args(x, y, g, g))


def _sub(op: Operation, g: Any) -> Any:
    x, y = op.inputs
    if _same_static(x, y, g):
        return [g, _o(apply_op("Neg", [g]))]
    return list(_reduce_gradient_args(x, y, g, _o(apply_op("Neg", [_dense(g)]))))


def _mul_grad(op: Operation, g: Any) -> Any:
    x, y = op.inputs
    if _same_static(x, y, g) and D.base(g.dtype) in (D.from_name("int32"),
                                                       D.from_name("float32")):
        return [_mul(g, y), _mul(g, x)]
    return list(_reduce_gradient_args(x, y, _mul(g, y), _mul(x, g)))


def _realdiv(op: Operation, g: Any) -> Any:
    x, y = op.inputs
    gx = _o(apply_op("RealDiv", [g, y]))
    q = _o(apply_op("RealDiv", [_o(apply_op("RealDiv", [_o(apply_op("Neg", [x])), y])), y]))
    gy = _binop("Mul", "mul", g, q)
    return list(_reduce_gradient_args(x, y, gx, gy))


def _max_min(op: Operation, g: Any, selector: str) -> Any:
    x, y = op.inputs
    g = _dense(g)
    if _static(g) is not None:   # array_ops.zeros_like folds a static shape into a Const
        zeros = constant(np.zeros(_static(g), D.to_numpy(D.base(g.dtype))),
                         name="zeros_like")
    else:
        zeros = _o(apply_op("ZerosLike", [g], default_name="zeros_like"))
    mask = _o(apply_op(selector, [x, y]))
    gx = _o(apply_op("SelectV2", [mask, g, zeros]))
    gy = _o(apply_op("SelectV2", [mask, zeros, g]))
    return list(_reduce_gradient_args(x, y, gx, gy))


def _squared_difference(op: Operation, g: Any) -> Any:
    x, y = op.inputs
    gr = get_default_graph()
    g = _dense(g)
    with gr.control_dependencies([g]):
        two = constant(np.asarray(2.0, D.to_numpy(D.base(g.dtype))), name="scalar")
        sm = _mul(two, g)
        xg = _binop("Mul", "mul", sm, _binop("Sub", "sub", x, y))
    if _same_static(x, y, g):
        return [xg, _o(apply_op("Neg", [xg]))]
    return list(_reduce_gradient_args(x, y, xg, _o(apply_op("Neg", [xg]))))


def _with_grad_dep(g: Any, fn: Callable[[], Tensor]) -> Tensor:
    """TensorFlow builds some gradients under ``control_dependencies([grad])``."""
    with get_default_graph().control_dependencies([g]):
        return fn()


def _square(op: Operation, g: Any) -> Any:
    x = op.inputs[0]

    def f() -> Tensor:
        two = constant(np.asarray(2.0, D.to_numpy(D.base(x.dtype))))
        return _mul(g, _mul(x, two))
    return [_with_grad_dep(g, f)]


def _matmul(op: Operation, g: Any) -> Any:
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")

    def mm(p: Tensor, q: Tensor, t_a: bool, t_b: bool, which: str) -> Tensor:
        return _o(apply_op("MatMul", [p, q], {"transpose_a": t_a, "transpose_b": t_b,
                                              which: True}))
    g = _dense(g)
    if not ta and not tb:
        return [mm(g, b, False, True, "grad_a"), mm(a, g, True, False, "grad_b")]
    if not ta and tb:
        return [mm(g, b, False, False, "grad_a"), mm(g, a, True, False, "grad_b")]
    if ta and not tb:
        return [mm(b, g, False, True, "grad_a"), mm(a, g, False, False, "grad_b")]
    return [mm(b, g, True, True, "grad_a"), mm(g, a, True, True, "grad_b")]


def _sum(op: Operation, g: Any) -> Any:
    x, axes_t = op.inputs
    xs, axes = x.shape, const_value(axes_t)
    g = _dense(g)
    if xs is not None and axes is not None:
        rank = len(xs)
        if np.array_equal(axes, np.arange(rank)):
            g = reshape(g, [1] * rank)
            s = (constant(np.asarray(xs, np.int32)) if None not in xs
                 else shape(x))
            return [_o(apply_op("Tile", [g, s])), None]
        if None not in xs:
            ax = {int(a) % rank for a in np.ravel(axes)}
            kept = [1 if i in ax else d for i, d in enumerate(xs)]
            scale = [d // max(k, 1) for d, k in zip(xs, kept)]
            # TensorFlow computes the tile scaling with ops (constant-folded, left in the
            # graph) the first time a (shape, axes) pair is seen in a graph, then caches it
            gr = get_default_graph()
            cache = gr.__dict__.setdefault("_reduced_shape_cache", set())
            key = (tuple(xs), tuple(int(a) for a in np.ravel(axes)))
            if key not in cache:
                cache.add(key)
                m = _o(apply_op("Maximum", [np.asarray(kept, np.int32), np.int32(1)]))
                _o(apply_op("FloorDiv", [np.asarray(xs, np.int32), m],
                            default_name="floordiv"))
            g = reshape(g, kept)
            return [_o(apply_op("Tile", [g, np.asarray(scale, np.int32)])), None]
    # shapes not static: TensorFlow's reduced_shape + BroadcastTo
    gr = get_default_graph()
    input_shape = _shape_of(x)
    if not op.get_attr("keep_dims"):
        with gr.colocate_with(input_shape.op):
            kept = _reduced_shape(input_shape, axes_t)
        g = reshape(g, kept)
    return [_o(apply_op("BroadcastTo", [g, input_shape])), None]


def _size_of(t: Tensor) -> Tensor:
    """``array_ops.size``: a Const when the static shape is fully known."""
    s = _static(t)
    if s is not None:
        return constant(np.int32(int(np.prod(s))), name="Size")
    return _o(apply_op("Size", [t], {"out_type": D.from_name("int32")}))


def _range(limit: Tensor) -> Tensor:
    """``math_ops.range(limit)``: Range(0, limit, 1) in the scope ``range``."""
    gr = get_default_graph()
    with gr.name_scope("range") as scope:
        start = constant(np.int32(0), name="start")
        delta = constant(np.int32(1), name="delta")
        return _o(apply_op("Range", [start, limit, delta], name=scope))


def _reduced_shape(input_shape: Tensor, axes: Tensor) -> Any:
    """``math_ops.reduced_shape``: the input shape with the reduced axes set to 1."""
    cs, ca = const_value(input_shape), const_value(axes)
    if cs is not None and ca is not None:
        out = np.array(cs, np.int32)
        out[np.asarray(ca, np.int32)] = 1
        return out
    gr = get_default_graph()
    rank = _size_of(input_shape)
    ax = _binop("FloorMod", "mod", _binop("AddV2", "add", axes, rank), rank)
    ax_shape = _shape_of(ax)
    r = _range(rank)
    with gr.name_scope("ones") as scope:
        one = constant(np.int32(1))
        ones = _o(apply_op("Fill", [ax_shape, one], name=scope))
    return _o(apply_op("DynamicStitch", [[r, ax], [input_shape, ones]]))


def _min_max(op: Operation, g: Any) -> Any:
    """Max/Min: the gradient split evenly between the entries equal to the result."""
    x, axes = op.inputs
    g = _dense(g)
    input_shape = _shape_of(x)
    y = op.outputs[0]
    if not op.get_attr("keep_dims"):
        kept = _reduced_shape(input_shape, axes)
        y = reshape(y, kept)
        g = reshape(g, kept)
    else:
        kept = _shape_of(y)
    ind = cast(_o(apply_op("Equal", [y, x])), D.base(g.dtype))
    n = reshape(_o(apply_op("Sum", [ind, axes], {"keep_dims": False})), kept)
    return [_binop("Mul", "mul", _binop("RealDiv", "truediv", ind, n), g), None]


def _mean(op: Operation, g: Any) -> Any:
    sum_grad = _sum(op, g)[0]
    xs, ys = _static(op.inputs[0]), _static(op.outputs[0])
    dt = D.base(sum_grad.dtype)
    if xs is not None and ys is not None:
        factor = int(np.prod(xs)) // max(int(np.prod(ys)), 1)
        f = constant(np.asarray(factor, D.to_numpy(dt)))
    else:
        from .ops import gather, reduce_prod
        input_shape = shape(op.inputs[0])
        rank = _size_of(input_shape)
        axes = _binop("FloorMod", "mod", _binop("AddV2", "add", op.inputs[1], rank), rank)
        picked = gather(input_shape, axes)
        if picked.shape:   # reduce_prod over all axes: a Const when the rank is known, > 0
            f = reduce_prod(picked)
        else:
            rk = (constant(np.int32(0), name="Rank") if picked.shape == ()
                  else _o(apply_op("Rank", [picked])))
            f = _o(apply_op("Prod", [picked, _range(rk)], {"keep_dims": False}))
        f = cast(f, dt)
    return [_o(apply_op("RealDiv", [sum_grad, f], default_name="truediv")), None]


def _transpose(op: Operation, g: Any) -> Any:
    inv = _o(apply_op("InvertPermutation", [op.inputs[1]]))
    return [transpose(_dense(g), inv), None]


def _reshape(op: Operation, g: Any) -> Any:
    x = op.inputs[0]
    s = x.shape
    if s is not None and None in s:
        dims = list(s)
        if dims.count(None) == 1 and 0 not in dims:
            dims[dims.index(None)] = -1
            return [reshape(_dense(g), dims), None]
    return [reshape(_dense(g), _shape_of(x)), None]


def _reshape_to_input(op: Operation, g: Any) -> Tensor:
    return reshape(_dense(g), _shape_of(op.inputs[0]))


def _concat(op: Operation, g: Any) -> Any:
    vals, axis = op.inputs[:-1], op.inputs[-1]
    if len(op.inputs) == 2:
        return [g, None]
    g = _dense(g)
    if vals[0].shape is not None:
        rank = constant(np.int32(len(vals[0].shape)), name="Rank")
    else:
        rank = _o(apply_op("Rank", [vals[0]]))
    dim = _o(apply_op("FloorMod", [axis, rank], default_name="mod"))
    sizes = []
    for v in vals:
        s = _shape_of(v)
        if s.op.type != "Const":
            sizes = apply_op("ShapeN", [list(vals)], {"out_type": D.from_name("int32")}).outputs
            break
        sizes.append(s)
    offsets = apply_op("ConcatOffset", [dim, sizes]).outputs
    return [_o(apply_op("Slice", [g, off, s])) for off, s in zip(offsets, sizes)] + [None]


def _strided_slice(op: Operation, g: Any) -> Any:
    """Zero-pad the gradient back to the input's shape (static shapes, unit strides, no
    ellipsis/new axes): dfg has no StridedSliceGrad kernel, which TensorFlow emits here."""
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
    g = reshape(_dense(g), kept)
    return [_o(apply_op("Pad", [g, constant(np.asarray(pads, np.int32))])), None, None, None]


def _softmax(op: Operation, g: Any) -> Any:
    y = op.outputs[0]
    g = _dense(g)
    s = reduce_sum(_binop("Mul", "mul", g, y), -1, keepdims=True)
    return [_binop("Mul", "mul", _binop("Sub", "sub", g, s), y)]


def _log_softmax(op: Operation, g: Any) -> Any:
    g = _dense(g)
    sm = _o(apply_op("Exp", [op.outputs[0]]))
    return [_binop("Sub", "sub", g, _binop("Mul", "mul", reduce_sum(g, -1, keepdims=True),
                                             sm))]


def _cast(op: Operation, g: Any) -> Any:
    floats = {D.from_name(n) for n in ("float16", "float32", "float64", "bfloat16",
                                       "complex64", "complex128")}
    src = D.base(op.inputs[0].dtype)
    if src not in floats or D.base(g.dtype) not in floats:
        return [None]
    return [cast(_dense(g), src)]


def _unary_dep(fn: Callable[[Operation, Tensor], Tensor]) -> Callable:
    """A unary gradient built under ``control_dependencies([grad])``."""
    return lambda op, g: [_with_grad_dep(_dense(g), lambda: fn(op, _dense(g)))]


def _unary(fn: Callable[[Operation, Tensor], Tensor]) -> Callable:
    return lambda op, g: [fn(op, _dense(g))]


def _expand(vec: Tensor, mat: Tensor) -> Tensor:
    """TensorFlow's _BroadcastMul: vec[:, None] * mat."""
    v = _o(apply_op("ExpandDims", [vec, np.int32(-1)]))
    return _binop("Mul", "mul", v, mat)


def _xent(op: Operation, g_loss: Any, g_grad: Any) -> Any:
    if g_grad is not None and not getattr(g_grad, "_is_zeros", False):
        raise UnimplementedError("second-order gradient of a softmax cross-entropy",
                                 node=op.name, op=op.type)
    g_loss = _dense(g_loss)
    grad = _expand(g_loss, op.outputs[1])
    if op.type == "SparseSoftmaxCrossEntropyWithLogits":
        return [grad, None]
    neg = _o(apply_op("Neg", [_o(apply_op("LogSoftmax", [op.inputs[0]]))]))
    return [grad, _expand(g_loss, neg)]


def _conv_attrs(op: Operation, keys: tuple) -> dict:
    return {k: op.attrs[k] for k in keys if k in op.attrs}


def _conv2d(op: Operation, g: Any) -> Any:
    g = _dense(g)
    s0, s1 = apply_op("ShapeN", [[op.inputs[0], op.inputs[1]]],
                      {"out_type": D.from_name("int32")}).outputs
    keys = ("dilations", "strides", "padding", "explicit_paddings", "use_cudnn_on_gpu",
            "data_format")
    a = _conv_attrs(op, keys)
    return [_o(apply_op("Conv2DBackpropInput", [s0, op.inputs[1], g], dict(a))),
            _o(apply_op("Conv2DBackpropFilter", [op.inputs[0], s1, g], dict(a)))]


def _max_pool(op: Operation, g: Any) -> Any:
    a = _conv_attrs(op, ("ksize", "strides", "padding", "explicit_paddings", "data_format"))
    return [_o(apply_op("MaxPoolGrad", [op.inputs[0], op.outputs[0], _dense(g)], a))]


def _avg_pool(op: Operation, g: Any) -> Any:
    a = _conv_attrs(op, ("ksize", "strides", "padding", "data_format"))
    return [_o(apply_op("AvgPoolGrad", [_shape_of(op.inputs[0]), _dense(g)], a))]


def _gather(op: Operation, g: Any) -> Any:
    params, indices, axis = op.inputs
    if const_value(axis) is None or int(const_value(axis)) != 0 or op.get_attr("batch_dims"):
        raise UnimplementedError("gradient of a gather needs axis 0 and batch_dims 0",
                                 node=op.name, op=op.type)
    gr = get_default_graph()
    with gr.colocate_with(params.op):
        pshape = _shape_of(params)
    if indices.shape is not None and None not in indices.shape:
        size = constant(np.int32(int(np.prod(indices.shape))), name="Size")
    else:
        size = _o(apply_op("Size", [indices], {"out_type": D.from_name("int32")}))
    isize = _o(apply_op("ExpandDims", [size, np.int32(0)]))
    tail = pshape[1:]
    from .ops import concat
    vshape = concat([isize, tail], 0)
    values = reshape(_dense(g), vshape)
    idx = reshape(indices, isize)
    values.shape = None
    if g.shape is not None and indices.shape is not None:
        n = int(np.prod(indices.shape)) if None not in indices.shape else None
        values.shape = (n,) + tuple(g.shape[len(indices.shape):])
    return [IndexedSlices(values, idx, pshape), None, None]


def _switch(op: Operation, g0: Any, g1: Any) -> Any:
    from .control_flow import CondContext, WhileContext
    ctxt = op.ctxt
    if isinstance(ctxt, WhileContext):
        from .control_flow_grad import loop_switch_grad
        return loop_switch_grad(op, None if g0 is None else _dense(g0),
                                None if g1 is None else _dense(g1))
    if isinstance(ctxt, CondContext):
        zero = (g0, g1)[1 - ctxt.branch]
        if zero is None:
            return [None, None]
        from .control_flow import merge
        return [merge([_dense(g0), _dense(g1)], name="cond_grad")[0], None]
    from .control_flow import merge, switch
    f = switch(_dense(g0), op.inputs[1])[0]
    t = switch(_dense(g1), op.inputs[1])[1]
    return [merge([f, t])[0], None]


def _merge(op: Operation, g: Any, _unused: Any = None) -> Any:
    from .control_flow import CondContext, WhileContext, output_context, switch
    ctxt = output_context(op.inputs[0].op)
    g = _dense(g)
    if isinstance(ctxt, WhileContext):
        from .control_flow_grad import loop_merge_grad
        return loop_merge_grad(op, g)
    if isinstance(ctxt, CondContext):
        from .control_flow_grad import cond_pred_in_loop
        pred = cond_pred_in_loop(ctxt.pred)
        gr = get_default_graph()
        with gr.colocate_with(g.op, ignore_existing=True):
            return list(switch(g, pred, name="cond_grad"))
    outs = []
    for i in range(len(op.inputs)):
        c = _o(apply_op("Equal", [op.outputs[1], np.int32(i)]))
        outs.append(switch(g, c)[1])
    return outs


def _enter(op: Operation, g: Any) -> Any:
    from .control_flow_grad import enter_grad
    return enter_grad(op, _dense(g))


def _exit(op: Operation, g: Any) -> Any:
    from .control_flow_grad import exit_grad
    return exit_grad(op, _dense(g))


def _functional(name: str) -> Callable:
    from . import functional
    return getattr(functional, name)


GRADIENTS: dict[str, Callable] = {
    "Identity": lambda op, g: [g],
    "Snapshot": lambda op, g: [g],
    "AddV2": _add, "Add": _add, "Sub": _sub, "Mul": _mul_grad, "RealDiv": _realdiv,
    "AddN": lambda op, g: [g] * len(op.inputs),
    "Maximum": lambda op, g: _max_min(op, g, "GreaterEqual"),
    "Minimum": lambda op, g: _max_min(op, g, "LessEqual"),
    "SquaredDifference": _squared_difference,
    "Neg": _unary(lambda op, g: _o(apply_op("Neg", [g]))),
    "Square": lambda op, g: _square(op, _dense(g)),
    "Exp": _unary_dep(lambda op, g: _binop("Mul", "mul", g, op.outputs[0])),
    "Log": _unary_dep(lambda op, g: _binop(
        "Mul", "mul", g, _o(apply_op("Reciprocal", [op.inputs[0]])))),
    "Sqrt": _unary(lambda op, g: _o(apply_op("SqrtGrad", [op.outputs[0], g]))),
    "Rsqrt": _unary(lambda op, g: _o(apply_op("RsqrtGrad", [op.outputs[0], g]))),
    "Reciprocal": _unary(lambda op, g: _o(apply_op("ReciprocalGrad", [op.outputs[0], g]))),
    "Tanh": _unary_dep(lambda op, g: _o(apply_op("TanhGrad", [op.outputs[0], g]))),
    "Sigmoid": _unary_dep(lambda op, g: _o(apply_op("SigmoidGrad", [op.outputs[0], g]))),
    "Relu": _unary(lambda op, g: _o(apply_op("ReluGrad", [g, op.outputs[0]]))),
    "Abs": _unary(lambda op, g: _binop("Mul", "mul", g, _o(apply_op("Sign", [op.inputs[0]])))),
    "Sin": _unary_dep(lambda op, g: _binop("Mul", "mul", g, _o(apply_op("Cos",
                                                                         [op.inputs[0]])))),
    "MatMul": _matmul,
    "Sum": _sum, "Mean": _mean, "Max": _min_max, "Min": _min_max,
    "Reshape": _reshape,
    "ExpandDims": lambda op, g: [_reshape_to_input(op, g), None],
    "Squeeze": lambda op, g: [_reshape_to_input(op, g)],
    "Transpose": _transpose,
    "ConcatV2": _concat,
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "StridedSlice": _strided_slice,
    "Cast": _cast,
    "Conv2D": _conv2d,
    "MaxPool": _max_pool,
    "AvgPool": _avg_pool,
    "GatherV2": _gather,
    "SoftmaxCrossEntropyWithLogits": _xent,
    "SparseSoftmaxCrossEntropyWithLogits": _xent,
    "Switch": _switch, "RefSwitch": _switch,
    "Merge": _merge, "RefMerge": _merge,
    "Enter": _enter, "RefEnter": _enter, "Exit": _exit, "RefExit": _exit,
    "NextIteration": lambda op, g: [g], "RefNextIteration": lambda op, g: [g],
    "If": lambda op, *g: _functional("if_grad")(op, *g),
    "StatelessIf": lambda op, *g: _functional("if_grad")(op, *g),
    "While": lambda op, *g: _functional("while_grad")(op, *g),
    "StatelessWhile": lambda op, *g: _functional("while_grad")(op, *g),
}
# ops with no gradient (TensorFlow's NotDifferentiable): the walk passes None through them
NOT_DIFFERENTIABLE = frozenset({
    "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "Shape", "ShapeN",
    "Size", "Rank", "ZerosLike", "OnesLike", "StopGradient", "FloorDiv", "Sign", "Floor",
    "Round", "ArgMax", "ArgMin", "InvertPermutation", "BroadcastGradientArgs", "Const",
    "Placeholder", "VariableV2", "Range", "Fill",
})


def _zeros_for(op: Operation, i: int) -> Tensor:
    """TensorFlow's ZerosLike for an output with no gradient: on a cond Switch, zeros made
    only on the branch that runs."""
    from .control_flow import CondContext, switch
    val = op.outputs[i]
    if op.type == "Switch" and isinstance(op.ctxt, CondContext):
        gr = get_default_graph()
        ctxt = op.ctxt
        sv = switch(op.inputs[0], ctxt.pred)[1 - ctxt.branch]
        pivot = _o(apply_op("Identity", [sv]))
        zs = shape(sv)
        with gr.control_dependencies([pivot]):
            with gr.name_scope(None, "zeros") as scope:
                z = _o(apply_op("Const", [], {"value": np.zeros((), D.to_numpy(
                    D.base(val.dtype))), "dtype": D.base(val.dtype)}, name="Const"))
                out = _o(apply_op("Fill", [zs, z], name=scope))
    else:
        out = _o(apply_op("ZerosLike", [val], default_name="zeros_like"))
    out._is_zeros = True
    return out


def gradients(ys: Any, xs: Any, grad_ys: Any = None, name: str = "gradients",
              stop_gradients: Any = None) -> list:
    """d(sum of ys)/d(each x), one tensor (or None when x does not reach ys) per x, built as
    ``tf.compat.v1.gradients`` builds it (see the module docstring for the differences)."""
    g = get_default_graph()
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    xs = [x._as_tensor(True) if hasattr(x, "_as_tensor") else x for x in xs]
    ys = [y._as_tensor(False) if hasattr(y, "_as_tensor") else y for y in ys]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    elif not isinstance(grad_ys, (list, tuple)):
        grad_ys = [grad_ys]
    if len(grad_ys) != len(ys):
        raise InvalidArgumentError(f"{len(grad_ys)} grad_ys for {len(ys)} ys")
    stops = [t.op for t in (stop_gradients or [])]
    consumers: dict[int, list[Operation]] = {}
    for op in g.ops:
        for t in op.inputs:
            consumers.setdefault(id(t), []).append(op)
    with g.name_scope(None, name):
        g.unique_name("uid")   # TensorFlow reserves the name of its gradient uid
        new_grad_ys = []
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                s = _shape_of(y)
                with g.name_scope(f"grad_ys_{i}") as scope:
                    one = constant(np.ones((), D.to_numpy(D.base(y.dtype))))
                    gy = _o(apply_op("Fill", [s, one], name=scope))
            else:
                from .ops import convert_to_tensor
                gy = convert_to_tensor(gy, D.base(y.dtype))
            new_grad_ys.append(gy)
        # ops reachable from xs through trainable tensors
        reached: set[int] = set()
        queue = collections.deque(x.op for x in xs)
        while queue:
            op = queue.popleft()
            if id(op) in reached:
                continue
            reached.add(id(op))
            for t in op.outputs:
                if _trainable(t):
                    queue.extend(consumers.get(id(t), []))
        to_ops = [y.op for y in ys]
        reachable_to = {id(op) for op in to_ops if id(op) in reached}
        between: set[int] = set()
        between_list: list[Operation] = []
        queue = collections.deque(to_ops)
        while queue:
            op = queue.popleft()
            if id(op) in reached:
                between.add(id(op))
                between_list.append(op)
                reached.discard(id(op))
                queue.extend(t.op for t in op.inputs)
        from .control_flow import is_loop_exit
        from .control_flow_grad import build_state, is_loop_switch
        # the forward loops between: their counters, backward loops and every exit
        loop_state = build_state(between_list, between)
        pending: dict[int, int] = collections.defaultdict(int)
        for op in between_list:
            for t in op.inputs:
                if id(t.op) in between:
                    pending[id(t.op)] += 1
        grads: dict[int, list] = {}

        def set_grad(t: Tensor, gv: Any) -> None:
            og = grads.setdefault(id(t.op), [[] for _ in t.op.outputs])
            slot = og[t.value_index]
            if isinstance(slot, list):
                slot.append(gv)
            else:   # aggregated already (a loop Switch seen from its Exit): gets more
                og[t.value_index] = [gv] if slot is None else [slot, gv]

        def has_grads(op: Operation) -> bool:
            og = grads.get(id(op))
            return og is not None and any(
                (v if isinstance(v, list) else v is not None) for v in og)

        for y, gy in zip(ys, new_grad_ys):
            set_grad(y, gy)
        queue = collections.deque()
        seen_to: set[int] = set()
        for op in to_ops:
            if pending[id(op)] == 0 and id(op) not in seen_to and id(op) in reachable_to:
                seen_to.add(id(op))
                queue.append(op)
        if loop_state is not None:
            for y in loop_state.process_unused_loop_exits(pending, seen_to):
                if _trainable(y):
                    set_grad(y, loop_state.zeros_like_for_exit(y))
                    queue.append(y.op)
        from_ops = [x.op for x in xs]
        stop_ops = {id(op) for op in from_ops
                    if all(pending[id(t.op)] <= 0 for t in op.inputs)}
        stop_ops.update(id(op) for op in stops)
        while queue:
            op = queue.popleft()
            if loop_state is not None:
                loop_state.enter_grad_context(op, before=True)
            out_grads = _aggregate(grads, op, g)
            if loop_state is not None:
                loop_state.exit_grad_context(op, before=True)
            has = any(v is not None for v in out_grads)
            fn = None
            if has and id(op) not in stop_ops:
                fn = GRADIENTS.get(op.type)
                if fn is None and op.type not in NOT_DIFFERENTIABLE:
                    raise UnimplementedError(f"no gradient for op {op.type}", node=op.name,
                                             op=op.type)
            if loop_state is not None:
                loop_state.enter_grad_context(op, before=False)
            try:
                if fn is not None and has:
                    for i, v in enumerate(out_grads):
                        if v is None and _trainable(op.outputs[i]):
                            out_grads[i] = (_zeros_for(op, i) if loop_state is None
                                            else loop_state.zeros_like(op, i, _zeros_for))
                    with g.name_scope(op.name + "_grad"):
                        in_grads = list(fn(op, *out_grads))
                    if len(in_grads) != len(op.inputs):
                        raise InvalidArgumentError(
                            f"gradient of {op.type} returned {len(in_grads)} values for "
                            f"{len(op.inputs)} inputs", node=op.name, op=op.type)
                else:
                    in_grads = [None] * len(op.inputs)
                for t_in, gi in zip(op.inputs, in_grads):
                    if gi is None:
                        continue
                    if isinstance(gi, Tensor) and gi.shape is None and t_in.shape is not None:
                        gi.shape = t_in.shape
                    set_grad(t_in, gi)
            finally:
                if loop_state is not None:
                    loop_state.exit_grad_context(op, before=False)
            # TensorFlow's _UpdatePendingAndEnqueueReady
            for t in op.inputs:
                x = t.op
                pending[id(x)] -= 1
                ready = pending[id(x)] == 0
                if loop_state is not None and not ready:
                    # a loop Switch is visited twice: from its Exit, then from the body
                    ready = pending[id(x)] > 0 and is_loop_switch(x)
                if not ready:
                    continue
                if loop_state is not None and is_loop_exit(x):
                    # a loop's exits are visited together, once all of them are ready
                    state = loop_state.get_grad_state(x, before=False)
                    state.deferred_exits.append(t)
                    state.pending_exits_count -= 1
                    if state.pending_exits_count == 0:
                        used = False
                        for y in state.deferred_exits:
                            if has_grads(y.op):
                                used = True
                                queue.append(y.op)
                            else:
                                state.unused_exits.append(y)
                        for y in state.unused_exits:
                            if used and _trainable(y):
                                set_grad(y, loop_state.zeros_like_for_exit(y))
                            queue.append(y.op)
                else:
                    queue.append(x)
        out = []
        for x in xs:
            og = grads.get(id(x.op))
            v = None if not og else og[x.value_index]
            if isinstance(v, list):   # never processed (x feeds nothing between): sum here
                v = _aggregate_list(v, g) if v else None
            out.append(_dense(v) if v is not None else None)
    if loop_state is not None:
        # outside the gradients scope, as TensorFlow does it (its nodes: Const, NextIteration)
        loop_state.post_processing()
    return out


def _aggregate_list(ts: list, g: Any) -> Any:
    if len(ts) == 1:
        return ts[0]
    if all(isinstance(t, Tensor) for t in ts):
        with g.colocate_with(ts[0].op, ignore_existing=True):
            return add_n(ts)
    return add_n(ts)   # IndexedSlices among them: converted as inputs_<i>, as TensorFlow does


def _aggregate(grads: dict, op: Operation, g: Any) -> list:
    og = grads.get(id(op))
    if og is None:
        return [None] * len(op.outputs)
    for i, ts in enumerate(og):
        if isinstance(ts, list):
            og[i] = _aggregate_list(ts, g) if ts else None
    return og


__all__ = ["gradients", "GRADIENTS", "NOT_DIFFERENTIABLE", "IndexedSlices"]
