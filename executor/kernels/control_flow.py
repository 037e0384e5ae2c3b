"""Control-flow kernels. The executor's propagator does the frame and deadness bookkeeping;
these only move values: Switch routes its input to one output (the other is dead), Merge
forwards the live input it was given and its index."""

from __future__ import annotations

import numpy as np

from .registry import kernel

_INDEX = [np.asarray(i, dtype=np.int32) for i in range(8)]


@kernel("Switch", "RefSwitch", cheap=True)
def switch(ctx, data, pred):
    return (None, data) if pred else (data, None)


@kernel("Merge", "RefMerge", cheap=True)
def merge(ctx, *inputs):
    # the executor passes the first live input at its slot and None elsewhere
    for i, x in enumerate(inputs):
        if x is not None:
            return x, (_INDEX[i] if i < 8 else np.asarray(i, dtype=np.int32))
    raise AssertionError("Merge ran without a live input")  # the executor never does this


@kernel("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
        "LoopCond", cheap=True)
def forward(ctx, x):
    return x
