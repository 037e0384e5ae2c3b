"""Optional values (``tf.experimental.Optional``): OptionalFromValue, OptionalNone,
OptionalHasValue, OptionalGetValue, and the ZerosLike / AddN of optionals that gradients use.

TensorFlow 2's cond gradient (cond_v2) passes the forward branch's intermediates to the
gradient through Optionals: the taken branch wraps them with OptionalFromValue, the other
returns OptionalNone, and the gradient branch unwraps them with OptionalGetValue. So any
``GradientTape`` over a ``tf.cond`` inside a ``tf.function`` writes these ops.

An optional is a variant value: an :class:`OptionalValue` holding a tuple of tensors or
nothing, opaque to the executor (``__dfg_resource__``) and never mutated.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, declare, kernel


class OptionalValue:
    """One optional: ``components`` (a tuple of tensors) or None when it has no value."""

    __dfg_resource__: ClassVar[bool] = True
    __slots__ = ("components",)

    def __init__(self, components: tuple | None) -> None:
        self.components = components

    @property
    def has_value(self) -> bool:
        return self.components is not None

    def __repr__(self) -> str:
        n = "none" if self.components is None else f"{len(self.components)} components"
        return f"OptionalValue({n})"


def is_optional(x: Any) -> bool:
    return isinstance(x, OptionalValue)


def _optional(ctx: KernelContext, x: Any) -> OptionalValue:
    if not isinstance(x, OptionalValue):
        raise InvalidArgumentError(
            f"Input tensor to {ctx.op} must be an Optional variant tensor, found "
            f"{type(x).__name__}")
    return x


def _tname(dt: Any) -> str:
    try:
        return D.name(D.from_numpy(np.dtype(dt)))
    except Exception:  # noqa: BLE001 - only for messages
        return str(dt)


@kernel("OptionalFromValue", cheap=True)
def optional_from_value(ctx: KernelContext, *components: Any) -> OptionalValue:
    return OptionalValue(tuple(components))


@kernel("OptionalNone", cheap=True)
def optional_none(ctx: KernelContext) -> OptionalValue:
    return OptionalValue(None)


@kernel("OptionalHasValue", cheap=True)
def optional_has_value(ctx: KernelContext, optional: Any) -> np.ndarray:
    return np.asarray(_optional(ctx, optional).has_value)


@kernel("OptionalGetValue", cheap=True)
def optional_get_value(ctx: KernelContext, optional: Any) -> tuple:
    opt = _optional(ctx, optional)
    if opt.components is None:
        raise InvalidArgumentError("The optional does not have a value.")
    types = list(ctx.attrs.get("output_types") or [])
    shapes = list(ctx.attrs.get("output_shapes") or [])
    comps = opt.components
    if len(comps) != len(types):
        raise InvalidArgumentError(
            f"The expected number of components is {len(types)}, but the actual number of "
            f"components is {len(comps)}.")
    for i, (c, want) in enumerate(zip(comps, types)):
        have = getattr(c, "dtype", None)
        if isinstance(want, np.dtype) and isinstance(have, np.dtype) and have != want:
            raise InvalidArgumentError(
                f"Input {i} to OptionalGetValue has type {_tname(have)}, but the expected "
                f"type is {_tname(want)}.")
        shape = shapes[i] if i < len(shapes) else None
        if shape is not None and isinstance(c, np.ndarray) and (
                len(shape) != c.ndim
                or any(d is not None and d != s for d, s in zip(shape, c.shape))):
            raise InvalidArgumentError(
                f"Component {i} of the optional has shape {list(c.shape)}, which is not "
                f"compatible with the expected shape {list(shape)}.")
    return tuple(comps)


# --- variant support for gradients (called from the ZerosLike and AddN kernels) -------------

def zeros_like_optional(x: OptionalValue) -> OptionalValue:
    """OptionalZerosLike: none stays none; else zeros of each component (variants by their
    own family's ZerosLike)."""
    if x.components is None:
        return x
    from ..kernel_call import call_op

    return OptionalValue(tuple(call_op(None, "ZerosLike", [c]) for c in x.components))


def add_n_optionals(xs: Any) -> OptionalValue:
    """OptionalBinaryAdd over the inputs, pairwise from the left."""
    from ..kernel_call import call_op

    acc = xs[0]
    for x in xs[1:]:
        if not isinstance(acc, OptionalValue) or not isinstance(x, OptionalValue):
            raise InvalidArgumentError("AddN of an Optional with a value of another kind")
        if acc.has_value != x.has_value:
            raise InvalidArgumentError(
                "Cannot add optionals because one has a value and the other doesn't.")
        if acc.components is None:
            continue
        if len(acc.components) != len(x.components):
            raise InvalidArgumentError(
                "Cannot add optionals because they have different numbers of components ("
                f"{len(acc.components)} vs. {len(x.components)}).")
        acc = OptionalValue(tuple(call_op(None, "AddN", [a, b])
                                  for a, b in zip(acc.components, x.components)))
    return acc


declare("ZerosLike", variant=(OptionalValue, lambda ctx, x: zeros_like_optional(x)))
declare("AddN", "AccumulateNV2", variant=(OptionalValue, lambda ctx, *xs: add_n_optionals(xs)))
