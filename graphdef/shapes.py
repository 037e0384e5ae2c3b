"""Static shape rules shared by the tools that reason about a graph without running it
(``viz`` labels edges with them, the optimizer's passes fold and simplify with them).

A shape is a tuple of dims, ``None`` for an unknown dim; ``None`` instead of a tuple means
the rank is unknown. The rules claim nothing they are unsure of.
"""

from __future__ import annotations

from typing import Any

Shape = tuple[int | None, ...]

# One data input; output 0 has input 0's shape. (Assign and friends are left out: with
# validate_shape=false the variable takes the value's shape.)
SAME_SHAPE_OPS = frozenset({
    "Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics", "Enter",
    "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration", "LoopCond", "Cast",
    "Neg", "Abs", "Sign", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "Sigmoid",
    "Tanh", "Exp", "Expm1", "Log", "Log1p", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Inv",
    "Floor", "Ceil", "Round", "Rint", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh",
    "Cosh", "Erf", "Erfc", "IsNan", "IsInf", "IsFinite", "LogicalNot", "Invert", "Softmax",
    "LogSoftmax", "ZerosLike", "OnesLike", "BiasAdd", "LeakyRelu", "Cumsum", "Cumprod",
    "RefIdentity", "ClipByValue", "Real", "Imag", "ComplexAbs", "Conj", "BitwiseNot",
})

# Two inputs, NumPy/TensorFlow broadcasting.
BROADCAST_OPS = frozenset({
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv", "FloorMod",
    "TruncateDiv", "TruncateMod", "Mod", "Maximum", "Minimum", "Pow", "SquaredDifference",
    "Atan2", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
    "LogicalAnd", "LogicalOr", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
    "RightShift", "Xdivy", "Xlogy", "MulNoNan",
})


# At GraphDef producer versions up to this, a Placeholder's scalar (or empty) shape attr
# means an unknown shape (TensorFlow's Placeholder shape function): old frozen graphs wrote
# ``shape {}`` for placeholders fed with any shape.
LEGACY_PLACEHOLDER_PRODUCER = 21


def input_shape(node_def: Any, producer: int) -> Shape | None:
    """The shape a graph input (Placeholder, PlaceholderWithDefault) declares, None when
    unknown (no shape attr, unknown rank, or a legacy Placeholder's scalar shape)."""
    from .attrs import to_python

    if "shape" not in node_def.attr:
        return None
    shape = to_python(node_def.attr["shape"])
    if shape == () and node_def.op == "Placeholder" and producer <= LEGACY_PLACEHOLDER_PRODUCER:
        return None
    return shape


def broadcast_shapes(a: Shape | None, b: Shape | None) -> Shape | None:
    """Broadcasting of two static shapes; None when either rank is unknown or they are
    incompatible (the run would fail: claim nothing)."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out: list[int | None] = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)   # the known one (> 1), or the graph is invalid
        else:
            return None
    return tuple(out)
