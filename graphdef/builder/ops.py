"""Op constructors with TensorFlow's names, attrs and default scopes, and the operator
overloading of ``Tensor``.

``apply_op`` is the one generic path (TensorFlow's ``_apply_op_helper``): it opens the op's
name scope, converts Python values to ``Const`` nodes named after the OpDef's input args
(``add/y``), infers type attrs from the tensors given, and lets the OpDef registry fill the
rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import InvalidArgumentError
from ..opdefs.registry import registry
from .core import Operation, Tensor, as_dtype, get_default_graph


def _np_value(value: Any, dtype: int | None) -> np.ndarray:
    if dtype is not None:
        return np.asarray(value, dtype=D.to_numpy(dtype))
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    arr = np.asarray(value)
    # Python numbers: TensorFlow picks float32 / int32 (int64 if it does not fit)
    if arr.dtype.kind == "f":
        return arr.astype(np.float32)
    if arr.dtype.kind in "iu":
        if arr.size and (arr.max() > 2**31 - 1 or arr.min() < -(2**31)):
            return arr.astype(np.int64)
        return arr.astype(np.int32)
    if arr.dtype.kind in "US":
        out = np.empty(arr.shape, dtype=object)
        out.reshape(-1)[:] = [str(s).encode() for s in arr.reshape(-1)]
        return out
    return arr


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const") -> Tensor:
    """A ``Const`` node (tf.constant)."""
    dt = None if dtype is None else as_dtype(dtype)
    arr = _np_value(value, dt)
    if shape is not None:
        shape = tuple(int(s) for s in shape)
        if arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape).copy()
        else:
            arr = arr.reshape(shape)
    dt = D.from_numpy(arr.dtype) if dt is None else dt
    g = get_default_graph()
    op = g.create_op("Const", [], {"value": arr, "dtype": dt}, name=name)
    return op.outputs[0]


def convert_to_tensor(value: Any, dtype: Any = None, name: str = "Const",
                      as_ref: bool = False) -> Tensor:
    if isinstance(value, Tensor):
        if dtype is not None and D.base(value.dtype) != as_dtype(dtype):
            raise InvalidArgumentError(
                f"input '{name}' (tensor {value.name}): expected {D.name(as_dtype(dtype))}, "
                f"found {D.name(value.dtype)}")
        return value
    conv = getattr(value, "_as_tensor", None)   # Variable
    if conv is not None:
        return conv(as_ref)
    dense = getattr(value, "_as_dense", None)   # a sparse gradient (IndexedSlices)
    if dense is not None:
        return dense(name)
    if isinstance(value, Operation):
        raise InvalidArgumentError(f"an Operation ({value.name}) is not a tensor")
    return constant(value, dtype=dtype, name=name)


def placeholder(dtype: Any, shape: Any = None, name: str = "Placeholder") -> Tensor:
    """A ``Placeholder`` (tf.compat.v1.placeholder); ``shape=None``: unknown rank."""
    shp = None if shape is None else tuple(None if d is None or d < 0 else int(d)
                                           for d in shape)
    op = get_default_graph().create_op(
        "Placeholder", [], {"dtype": as_dtype(dtype), "shape": shp}, name=name)
    return op.outputs[0]


def apply_op(op_type: str, inputs: list[Any], attrs: dict[str, Any] | None = None,
             name: str | None = None, default_name: str | None = None) -> Operation:
    """Build one node of ``op_type``. ``inputs`` follow the OpDef's input_args; an arg with a
    number or type-list attr takes a list."""
    g = get_default_graph()
    opdef = registry().get(op_type)
    if opdef is None:
        from ..errors import NotFoundError
        raise NotFoundError(f"op type '{op_type}' is not registered", op=op_type)
    if len(inputs) != len(opdef.input_arg):
        raise InvalidArgumentError(
            f"expected {len(opdef.input_arg)} inputs "
            f"({', '.join(a.name for a in opdef.input_arg)}), found {len(inputs)}", op=op_type)
    attrs = dict(attrs or {})
    with g.name_scope(name, default_name or op_type) as scope:
        types: dict[str, int] = {k: as_dtype(v) for k, v in attrs.items()
                                 if registry().attr_defs(op_type).get(k) is not None
                                 and registry().attr_defs(op_type)[k].type == "type"}
        # type attrs from the tensors given (first tensor wins, as in TensorFlow)
        for arg, val in zip(opdef.input_arg, inputs):
            if arg.type_attr and arg.type_attr not in types:
                vals = val if (arg.number_attr and isinstance(val, (list, tuple))) else [val]
                for v in vals:
                    if isinstance(v, Tensor):
                        types[arg.type_attr] = D.base(v.dtype)
                        break
                    dt = getattr(v, "dtype", None)
                    if (hasattr(v, "_as_tensor") or hasattr(v, "_as_dense")) and \
                            isinstance(dt, int):
                        types[arg.type_attr] = D.base(dt)
                        break
        flat: list[Tensor] = []
        for arg, val in zip(opdef.input_arg, inputs):
            want = arg.type or types.get(arg.type_attr)
            if arg.number_attr or arg.type_list_attr:
                vals = list(val)
                # list elements are named <arg>_<i> (TensorFlow: concat/values_0)
                ts = [convert_to_tensor(v, want, name=f"{arg.name}_{i}", as_ref=arg.is_ref)
                      for i, v in enumerate(vals)]
                if arg.number_attr:
                    attrs[arg.number_attr] = len(ts)
                    if arg.type_attr and arg.type_attr not in types and ts:
                        types[arg.type_attr] = D.base(ts[0].dtype)
                else:
                    attrs[arg.type_list_attr] = [D.base(t.dtype) for t in ts]
                flat.extend(ts)
            else:
                t = convert_to_tensor(val, want, name=arg.name, as_ref=arg.is_ref)
                if arg.type_attr and arg.type_attr not in types:
                    types[arg.type_attr] = D.base(t.dtype)
                flat.append(t)
        for k, v in types.items():
            attrs.setdefault(k, v)
        # an op taking a ref input is colocated with the ref's owner (op_def_library does)
        refs = [t.op for t in flat if D.is_ref(t.dtype)]
        if refs and not g._colocation:
            with g.colocate_with(refs[0]):
                return g.create_op(op_type, flat, attrs, name=scope)
        return g.create_op(op_type, flat, attrs, name=scope)


def _out(op: Operation) -> Tensor:
    return op.outputs[0]


# --- elementwise --------------------------------------------------------------------------
def _unary(op_type: str) -> Any:
    def f(x: Any, name: str | None = None) -> Tensor:
        return _out(apply_op(op_type, [x], name=name))
    f.__name__ = op_type.lower()
    f.__doc__ = f"``{op_type}`` (default name ``{op_type}``)."
    return f


def _binary(op_type: str, default: str) -> Any:
    def f(x: Any, y: Any, name: str | None = None) -> Tensor:
        return _out(apply_op(op_type, [x, y], name=name, default_name=default))
    f.__name__ = default.lower()
    f.__doc__ = f"``{op_type}`` (default name ``{default}``)."
    return f


neg = _unary("Neg")
abs = _unary("Abs")  # noqa: A001 - TensorFlow's name
exp = _unary("Exp")
log = _unary("Log")
sqrt = _unary("Sqrt")
rsqrt = _unary("Rsqrt")
square = _unary("Square")
sin = _unary("Sin")
cos = _unary("Cos")
tanh = _unary("Tanh")
sigmoid = _unary("Sigmoid")
relu = _unary("Relu")
softplus = _unary("Softplus")
reciprocal = _unary("Reciprocal")
logical_not = _unary("LogicalNot")
stop_gradient = _unary("StopGradient")
zeros_like = _unary("ZerosLike")
ones_like = _unary("OnesLike")
softmax = _unary("Softmax")
log_softmax = _unary("LogSoftmax")

add = _binary("AddV2", "Add")
subtract = _binary("Sub", "Sub")
multiply = _binary("Mul", "Mul")
divide = _binary("RealDiv", "truediv")
maximum = _binary("Maximum", "Maximum")
minimum = _binary("Minimum", "Minimum")
pow = _binary("Pow", "Pow")  # noqa: A001
less = _binary("Less", "Less")
less_equal = _binary("LessEqual", "LessEqual")
greater = _binary("Greater", "Greater")
greater_equal = _binary("GreaterEqual", "GreaterEqual")
equal = _binary("Equal", "Equal")
not_equal = _binary("NotEqual", "NotEqual")
logical_and = _binary("LogicalAnd", "LogicalAnd")
logical_or = _binary("LogicalOr", "LogicalOr")
squared_difference = _binary("SquaredDifference", "SquaredDifference")


def identity(x: Any, name: str | None = None) -> Tensor:
    return _out(apply_op("Identity", [x], name=name))


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    dt = as_dtype(dtype)
    if D.base(x.dtype) == dt:
        return x
    return _out(apply_op("Cast", [x], {"DstT": dt, "Truncate": False}, name=name,
                         default_name="Cast"))


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           name: str | None = None) -> Tensor:
    return _out(apply_op("MatMul", [a, b], {"transpose_a": transpose_a,
                                            "transpose_b": transpose_b},
                         name=name, default_name="MatMul"))


def add_n(inputs: list[Any], name: str | None = None) -> Tensor:
    if len(inputs) == 1:
        return identity(inputs[0], name=name)
    return _out(apply_op("AddN", [inputs], name=name, default_name="AddN"))


def _reduce(op_type: str) -> Any:
    def f(x: Any, axis: Any = None, keepdims: bool = False, name: str | None = None) -> Tensor:
        g = get_default_graph()
        x = convert_to_tensor(x)
        if axis is None:
            # TensorFlow builds the all-axes constant outside the op's scope ("Const")
            if x.shape is None:
                raise InvalidArgumentError("reducing all axes needs a known rank", op=op_type)
            axis_t = constant(np.arange(len(x.shape), dtype=np.int32))
            return _out(apply_op(op_type, [x, axis_t], {"keep_dims": keepdims}, name=name))
        if isinstance(axis, Tensor):
            return _out(apply_op(op_type, [x, axis], {"keep_dims": keepdims}, name=name))
        with g.name_scope(name, op_type) as scope:
            axis_t = constant(np.asarray(axis, dtype=np.int32), name="reduction_indices")
            return _out(apply_op(op_type, [x, axis_t], {"keep_dims": keepdims}, name=scope))
    f.__name__ = "reduce_" + op_type.lower()
    return f


reduce_sum = _reduce("Sum")
reduce_mean = _reduce("Mean")
reduce_max = _reduce("Max")
reduce_min = _reduce("Min")
reduce_prod = _reduce("Prod")


def reshape(x: Any, shape: Any, name: str | None = None) -> Tensor:
    return _out(apply_op("Reshape", [x, _int_arg(shape)], name=name))


def _int_arg(v: Any) -> Any:
    return v if isinstance(v, Tensor) else np.asarray(v, dtype=np.int32)


def transpose(x: Any, perm: Any = None, name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "transpose") as scope:
        x = convert_to_tensor(x)
        if perm is None:
            perm = list(range(len(x.shape) - 1, -1, -1))
        p = perm if isinstance(perm, Tensor) else constant(
            np.asarray(perm, dtype=np.int32), name="perm")
        return _out(apply_op("Transpose", [x, p], name=scope))


def concat(values: list[Any], axis: int, name: str = "concat") -> Tensor:
    if len(values) == 1:
        return identity(values[0], name=name)
    g = get_default_graph()
    with g.name_scope(name) as scope:
        a = constant(np.int32(axis), name="axis")
        return _out(apply_op("ConcatV2", [values, a], name=scope))


def zeros(shape: Any, dtype: Any = "float32", name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "zeros") as scope:
        return _const_in_scope(0, dtype, shape, scope)


def ones(shape: Any, dtype: Any = "float32", name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "ones") as scope:
        return _const_in_scope(1, dtype, shape, scope)


def _const_in_scope(v: Any, dtype: Any, shape: Any, scope: str) -> Tensor:
    # tf.zeros/ones with a static shape: one Const that takes the scope's name
    arr = np.full(tuple(shape), v, dtype=D.to_numpy(as_dtype(dtype)))
    op = get_default_graph().create_op(
        "Const", [], {"value": arr, "dtype": as_dtype(dtype)}, name=scope)
    return op.outputs[0]


def shape(x: Any, out_type: Any = "int32", name: str | None = None) -> Tensor:
    return _out(apply_op("Shape", [x], {"out_type": as_dtype(out_type)}, name=name))


def gather(params: Any, indices: Any, axis: int = 0, name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "GatherV2") as scope:
        params = convert_to_tensor(params, name="params")
        indices = convert_to_tensor(indices, name="indices")   # before axis, as TensorFlow
        a = constant(np.int32(axis), name="axis")
        return _out(apply_op("GatherV2", [params, indices, a], {"batch_dims": 0}, name=scope))


def no_op(name: str | None = None) -> Operation:
    return apply_op("NoOp", [], name=name, default_name="NoOp")


def group(*inputs: Any, name: str | None = None) -> Operation:
    """A NoOp running after ``inputs`` (tf.group, one device)."""
    from .core import as_op
    g = get_default_graph()
    deps = [as_op(i) for i in inputs]
    with g.control_dependencies(deps):
        return no_op(name=name)


def with_dependencies(deps: list[Any], output: Tensor, name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "control_dependency") as scope:
        with g.control_dependencies(deps):
            return identity(output, name=scope)


# --- slicing ------------------------------------------------------------------------------
def strided_slice_of(x: Tensor, spec: Any) -> Tensor:
    """``x[spec]`` as TensorFlow's _slice_helper builds it (StridedSlice + three stacks)."""
    if not isinstance(spec, tuple):
        spec = (spec,)
    begin, end, strides = [], [], []
    bm = em = elm = nam = sam = 0
    for i, s in enumerate(spec):
        if isinstance(s, slice):
            begin.append(0 if s.start is None else s.start)
            end.append(0 if s.stop is None else s.stop)
            strides.append(1 if s.step is None else s.step)
            if s.start is None:
                bm |= 1 << i
            if s.stop is None:
                em |= 1 << i
        elif s is Ellipsis:
            begin.append(0)
            end.append(0)
            strides.append(1)
            elm |= 1 << i
        elif s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            nam |= 1 << i
        else:
            begin.append(int(s))
            end.append(int(s) + 1)
            strides.append(1)
            sam |= 1 << i
    g = get_default_graph()
    with g.name_scope(None, "strided_slice") as scope:
        b = constant(np.asarray(begin, np.int32), name="stack")
        e = constant(np.asarray(end, np.int32), name="stack_1")
        st = constant(np.asarray(strides, np.int32), name="stack_2")
        op = apply_op("StridedSlice", [x, b, e, st],
                      {"begin_mask": bm, "end_mask": em, "ellipsis_mask": elm,
                       "new_axis_mask": nam, "shrink_axis_mask": sam}, name=scope)
    out = op.outputs[0]
    out.shape = _slice_shape(x.shape, spec)
    return out


def _slice_shape(s: Any, spec: tuple) -> Any:
    if s is None or Ellipsis in spec or any(x is None for x in spec) or len(spec) > len(s):
        return None
    out = []
    for i, d in enumerate(s):
        if i >= len(spec):
            out.append(d)
            continue
        sp = spec[i]
        if isinstance(sp, slice):
            out.append(None if d is None else len(range(*sp.indices(d))))
        # an int index drops the dim
    return tuple(out)


# --- operator overloading -----------------------------------------------------------------
def _binop(op_type: str, scope: str, reverse: bool = False) -> Any:
    def f(self: Tensor, other: Any) -> Tensor:
        g = get_default_graph()
        with g.name_scope(None, scope) as name:
            if reverse:
                x = convert_to_tensor(other, D.base(self.dtype), name="x")
                return _out(apply_op(op_type, [x, self], name=name))
            y = convert_to_tensor(other, D.base(self.dtype), name="y")
            return _out(apply_op(op_type, [self, y], name=name))
    return f


def _logical_xor(x: Any, y: Any, name: str | None = None) -> Tensor:
    g = get_default_graph()
    with g.name_scope(name, "xor") as scope:
        o = logical_or(x, y)
        a = logical_not(logical_and(x, y))
        return _out(apply_op("LogicalAnd", [o, a], name=scope))


def _matmul_op(self: Tensor, other: Any) -> Tensor:
    return matmul(self, other, name="matmul")


def _rmatmul_op(self: Tensor, other: Any) -> Tensor:
    return matmul(other, self, name="matmul")


def _install() -> None:
    T = Tensor
    for dunder, op_type, scope in [
            ("add", "AddV2", "add"), ("sub", "Sub", "sub"), ("mul", "Mul", "mul"),
            ("truediv", "RealDiv", "truediv"), ("floordiv", "FloorDiv", "floordiv"),
            ("mod", "FloorMod", "mod"), ("pow", "Pow", "pow")]:
        setattr(T, f"__{dunder}__", _binop(op_type, scope))
        setattr(T, f"__r{dunder}__", _binop(op_type, scope, reverse=True))
    T.__and__ = _binop("LogicalAnd", "and")
    T.__rand__ = _binop("LogicalAnd", "and", reverse=True)
    T.__or__ = _binop("LogicalOr", "or")
    T.__ror__ = _binop("LogicalOr", "or", reverse=True)
    T.__xor__ = lambda self, o: _logical_xor(self, o)
    T.__rxor__ = lambda self, o: _logical_xor(o, self)
    T.__invert__ = lambda self: logical_not(self)
    T.__neg__ = lambda self: neg(self)
    T.__abs__ = lambda self: abs(self)
    T.__lt__ = lambda self, o: less(self, o)
    T.__le__ = lambda self, o: less_equal(self, o)
    T.__gt__ = lambda self, o: greater(self, o)
    T.__ge__ = lambda self, o: greater_equal(self, o)
    T.__matmul__ = _matmul_op
    T.__rmatmul__ = _rmatmul_op
    T.__getitem__ = strided_slice_of


_install()

__all__ = [
    "apply_op", "constant", "convert_to_tensor", "placeholder", "identity", "cast", "matmul",
    "add_n", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reshape",
    "transpose", "concat", "zeros", "ones", "shape", "gather", "no_op", "group",
    "with_dependencies", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "square", "sin", "cos",
    "tanh", "sigmoid", "relu", "softplus", "reciprocal", "logical_not", "stop_gradient",
    "zeros_like", "ones_like", "softmax", "log_softmax", "add", "subtract", "multiply",
    "divide", "maximum", "minimum", "pow", "less", "less_equal", "greater", "greater_equal",
    "equal", "not_equal", "logical_and", "logical_or", "squared_difference",
]


# --- neural-network ops (tf.nn names and attrs) ---------------------------------------------
def _four(v: Any, name: str) -> list[int]:
    """An int or list for the spatial dims of NHWC -> the 4-element list TensorFlow stores."""
    if isinstance(v, int):
        return [1, v, v, 1]
    v = [int(i) for i in v]
    if len(v) == 1:
        return [1, v[0], v[0], 1]
    if len(v) == 2:
        return [1, v[0], v[1], 1]
    if len(v) == 4:
        return v
    raise InvalidArgumentError(f"{name} must have 1, 2 or 4 elements, found {len(v)}")


def conv2d(x: Any, filters: Any, strides: Any = 1, padding: str = "VALID",
           dilations: Any = 1, name: str | None = None) -> Tensor:
    """``tf.nn.conv2d`` (NHWC): a ``Conv2D`` node named ``Conv2D``."""
    return _out(apply_op("Conv2D", [x, filters], {
        "strides": _four(strides, "strides"), "padding": padding, "data_format": "NHWC",
        "dilations": _four(dilations, "dilations"), "explicit_paddings": [],
        "use_cudnn_on_gpu": True}, name=name, default_name="Conv2D"))


def max_pool2d(x: Any, ksize: Any, strides: Any, padding: str,
               name: str | None = None) -> Tensor:
    """``tf.nn.max_pool2d`` (NHWC): a ``MaxPool`` node named ``MaxPool2d``."""
    return _out(apply_op("MaxPool", [x], {
        "ksize": _four(ksize, "ksize"), "strides": _four(strides, "strides"),
        "padding": padding, "data_format": "NHWC", "explicit_paddings": []},
        name=name, default_name="MaxPool2d"))


def avg_pool2d(x: Any, ksize: Any, strides: Any, padding: str,
               name: str | None = None) -> Tensor:
    """``tf.nn.avg_pool2d`` (NHWC): an ``AvgPool`` node named ``AvgPool2D``."""
    return _out(apply_op("AvgPool", [x], {
        "ksize": _four(ksize, "ksize"), "strides": _four(strides, "strides"),
        "padding": padding, "data_format": "NHWC"}, name=name, default_name="AvgPool2D"))


def expand_dims(x: Any, axis: int, name: str | None = None) -> Tensor:
    return _out(apply_op("ExpandDims", [x, np.int32(axis)], name=name))


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any,
                                             name: str | None = None) -> Tensor:
    """``tf.nn.sparse_softmax_cross_entropy_with_logits`` for rank-2 logits with a static
    shape: the loss per row (output 0 of the op; output 1 is the backprop)."""
    g = get_default_graph()
    with g.name_scope(name, "SparseSoftmaxCrossEntropyWithLogits"):
        labels = convert_to_tensor(labels)
        logits = convert_to_tensor(logits)
        # TensorFlow checks the labels' static shape with a Shape it leaves in the graph
        constant(np.asarray(labels.shape, np.int32), name="Shape")
        return _out(apply_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels],
                             default_name="SparseSoftmaxCrossEntropyWithLogits"))


def softmax_cross_entropy_with_logits(labels: Any, logits: Any,
                                      name: str | None = None) -> Tensor:
    """``tf.nn.softmax_cross_entropy_with_logits`` (TF2's, gradients reach the labels too)
    for rank-2 inputs with static shapes, with TensorFlow's flatten-and-restore nodes."""
    g = get_default_graph()
    with g.name_scope(name, "softmax_cross_entropy_with_logits") as scope:
        labels = convert_to_tensor(labels)
        logits = convert_to_tensor(logits)
        if logits.shape is None or None in logits.shape or len(logits.shape) != 2:
            raise InvalidArgumentError("softmax_cross_entropy_with_logits needs rank-2 "
                                       "logits with a static shape",
                                       op="SoftmaxCrossEntropyWithLogits")
        i32 = np.int32
        rank = constant(i32(2), name="Rank")
        shp = constant(np.asarray(logits.shape, i32), name="Shape")

        def flatten(t: Tensor, k: str) -> Tensor:
            rk = constant(i32(2), name="Rank" + k)
            s = constant(np.asarray(t.shape, i32), name="Shape" + k)
            r = _out(apply_op("Sub", [rk, i32(1)]))
            begin = _out(apply_op("Pack", [[r]], {"axis": 0}, name="Slice" + sfx(k) +
                                  "/begin"))
            sl = _out(apply_op("Slice", [s, begin, np.asarray([1], i32)],
                               name="Slice" + sfx(k)))
            with g.name_scope("concat" + sfx(k)) as cs:
                vals = constant(np.asarray([-1], i32), name="values_0")
                ax = constant(i32(0), name="axis")
                c = _out(apply_op("ConcatV2", [[vals, sl], ax], name=cs))
            out = reshape(t, c)
            out.shape = t.shape   # TensorFlow folds the flattening shape: rank 2 stays
            return out

        def sfx(k: str) -> str:
            return {"_1": "", "_2": "_1"}[k]
        flat_logits = flatten(logits, "_1")
        flat_labels = flatten(labels, "_2")
        xent = _out(apply_op("SoftmaxCrossEntropyWithLogits", [flat_logits, flat_labels],
                             name=scope))
        r = _out(apply_op("Sub", [rank, i32(1)]))
        with g.name_scope("Slice_2") as ss:
            begin = constant(np.asarray([0], i32), name="begin")
            size = _out(apply_op("Pack", [[r]], {"axis": 0}, name="size"))
            sl = _out(apply_op("Slice", [shp, begin, size], name=ss))
        out = reshape(xent, sl)
        out.shape = (logits.shape[0],)
        return out


__all__ += ["conv2d", "max_pool2d", "avg_pool2d", "expand_dims",
            "sparse_softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits"]
