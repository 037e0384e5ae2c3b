"""Control flow v1: what Switch, Merge, Enter, Exit, NextIteration and LoopCond do to values,
defined once. Every driver uses these functions (the scheduler's inline transfers in
executor.py, the reference interpreter, these kernels); the frame and deadness bookkeeping
around them is the propagator's (propagator.py) and the reference's, and compiled programs
resolve them at plan time into slots, ``If`` blocks and ``Select``s (programs.py) that take
the branch ``switch`` would make live and the value ``merge`` would pick.

* ``switch(data, pred)``: outputs (false side, true side); the untaken side is dead (None).
* ``merge(inputs)``: the first live input and its index (int32); dead inputs are None. The
  scheduler runs a Merge once one data input is live, or dead once all are.
* Enter, Exit, NextIteration and LoopCond forward their one input (their frame moves are
  the propagator's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .registry import FORWARD, MERGE, SWITCH, kernel

# a Merge's value_index output for its first 64 inputs, made once
MERGE_INDEX = [np.asarray(i, dtype=np.int32) for i in range(64)]


def switch(data: Any, pred: Any) -> tuple[Any, Any]:
    """Switch's outputs: ``data`` on the side ``pred`` picks, dead (None) on the other."""
    return (None, data) if pred else (data, None)


def merge(inputs: Any) -> tuple[Any, np.ndarray]:
    """Merge's outputs: its first live input and that input's index."""
    for i, x in enumerate(inputs):
        if x is not None:
            return x, (MERGE_INDEX[i] if i < 64 else np.asarray(i, dtype=np.int32))
    from dfg.graphdef.errors import InternalError

    raise InternalError("Merge ran without a live input")


@kernel("Switch", "RefSwitch", cheap=True, transfer=SWITCH)
def switch_kernel(ctx, data, pred):
    return switch(data, pred)


@kernel("Merge", "RefMerge", cheap=True, transfer=MERGE)
def merge_kernel(ctx, *inputs):
    return merge(inputs)


@kernel("Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "RefNextIteration",
        "LoopCond", cheap=True, transfer=FORWARD)
def forward(ctx, x):
    return x
