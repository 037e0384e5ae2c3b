"""Pad and PadV2 against numpy's np.pad (the definition: the constant around the input) on
both sides of the size from which the kernel writes only the border and the input
(array.py's _PAD_BORDER_MIN), for several dtypes, pads on one side only, none, and a kept
layout (a Const's paddings: the node's memo) used again."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernel_call import bind_op, call, context
from dfg.executor.kernels import array
from dfg.executor.kernels.registry import complete_attrs
from dfg.graphdef.tensors import from_numpy, to_numpy

SHAPES = [((2, 130, 130, 3), [[0, 0], [1, 2], [3, 0], [0, 1]]),     # past the threshold
          ((1, 112, 112, 64), [[0, 0], [1, 1], [1, 1], [0, 0]]),    # ResNet's stem
          ((3, 4, 5), [[1, 0], [0, 2], [2, 2]]),                     # under it
          ((300, 300), [[0, 0], [0, 0]]),                            # nothing to pad
          ((0, 300, 300), [[1, 1], [0, 0], [2, 0]])]                 # an empty input


def _const(a: np.ndarray) -> np.ndarray:
    return to_numpy(from_numpy(a))


def _node(op: str, *args: np.ndarray):
    k = bind_op(op, complete_attrs(op, {}, list(args)))
    return k, context(k)


def _call(k, args: list, ctx) -> np.ndarray:
    out = call(k, args, ctx)
    return out if isinstance(out, np.ndarray) else out[0]


@pytest.mark.parametrize("shape,pads", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64])
def test_pad_is_the_input_surrounded_by_zeros(shape: tuple, pads: list, dtype: type) -> None:
    x = (np.random.default_rng(1).standard_normal(shape) * 10).astype(dtype)
    paddings = _const(np.array(pads, np.int32))
    k, ctx = _node("Pad", x, paddings)
    want = np.pad(x, pads)
    for _ in range(2):          # the second run takes the node's kept layout
        got = _call(k, [x, paddings], ctx)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("shape,pads", SHAPES[:3])
@pytest.mark.parametrize("value", [np.nan, -3.5, 0.0])
def test_padv2_surrounds_with_its_constant(shape: tuple, pads: list, value: float) -> None:
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    args = [x, np.array(pads, np.int64), np.array(value, np.float32)]
    k, ctx = _node("PadV2", *args)
    got = _call(k, args, ctx)
    want = np.pad(x, pads, constant_values=np.float32(value))
    assert got.tobytes() == want.tobytes()


def test_the_border_path_is_taken_past_the_threshold() -> None:
    layout = array._pad_layout((2, 130, 130, 3), [(0, 0), (1, 2), (3, 0), (0, 1)])
    assert np.prod(layout[0]) >= array._PAD_BORDER_MIN
    assert len(layout[2]) == 4         # a slab per padded side
