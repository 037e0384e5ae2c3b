"""Output-size limits: refuse a kernel run whose output would exceed the step's memory budget,
before the kernel allocates it.

Most ops' outputs are about as large as their inputs, which already exist: they need no
check. The few whose output can be far larger than their inputs (Fill, Tile, Range,
BroadcastTo, string widths and joins, ...) register an estimator here: ``fn(k, args) ->
bytes``, from the input shapes and values and the bound attrs. ``kernel_call.call`` runs it
when the step has a budget (``KernelContext.max_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dfg.graphdef.errors import ResourceExhaustedError

# op -> estimator(k, args) -> bytes the outputs will need (an upper bound is fine)
ESTIMATORS: dict[str, Callable[[Any, list], int]] = {}


def estimator(op: str) -> Callable[[Any, list], int] | None:
    return ESTIMATORS.get(op)


def check(k: Any, args: list, max_bytes: int) -> None:
    need = k.size_check(k, args)
    if need > max_bytes:
        raise ResourceExhaustedError(
            f"output would need {need:,} bytes, over the step's memory budget of "
            f"{max_bytes:,} bytes (Session(max_bytes=...), --max-memory)")
