"""The IR of programs (programs.py): what the compilers (program_compile.py) produce and both
the interpreter (program_interp.py) and the code generator (codegen.py) read.

A program's body is a list of statements over value slots (indices into one list of values):

* ``KernelStep(item, args, out, stateful, frees)``: call ``item``'s kernel on the values in
  slots ``args``; its outputs go to slots ``out``, ``out + 1`` ...; ``stateful``: it needs the
  run's context (else the item's shared one); ``frees``: slots to clear after it (their last
  reader, straight-line programs);
* ``If(pred, side, block)``: a cond's branch, run when the predicate's slot is ``side``;
* ``Select(out, pred, a, b)``: a cond's Merge, the taken branch's value;
* ``LoopIR``: a while loop (of a nest) run to completion where it stands.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple


class KernelStep(NamedTuple):
    item: Any              # the NodeItem whose kernel runs
    args: tuple            # argument slots
    out: int               # first output slot
    stateful: bool         # needs the run's context (no shared one)
    frees: tuple           # slots cleared after it


class If:
    """Run ``block`` when the predicate in slot ``pred`` is ``side`` (a cond's branch)."""

    __slots__ = ("pred", "side", "block")

    def __init__(self, pred: int, side: bool, block: list) -> None:
        self.pred, self.side, self.block = pred, side, block


class Select:
    """A cond's Merge: slot ``out`` gets slot ``a`` when the predicate in slot ``pred`` holds,
    else slot ``b`` (exactly one of them is live: the branch that ran)."""

    __slots__ = ("out", "pred", "a", "b")

    def __init__(self, out: int, pred: int, a: int, b: int) -> None:
        self.out, self.pred, self.a, self.b = out, pred, a, b


class LoopIR:
    """One while loop of a nest, run to completion where it stands (the top of a program, or
    a statement of its parent loop's iteration). A statement is a ``KernelStep``, an ``If``,
    a ``Select`` or an inner ``LoopIR``."""

    __slots__ = ("frame", "index", "merges", "pre", "pred_slot", "body", "num_kernels",
                 "exit_copies", "floating")

    def __init__(self, frame: str, index: int) -> None:
        self.frame = frame
        self.index = index            # its iteration counter (n{index} in generated code)
        # per loop variable: (value slot, index slot or None when unread, first value's
        # slot, next value's slot, slot of value_index at iteration 0, slot of it later)
        self.merges: list[tuple[int, int | None, int, int, int, int]] = []
        self.pre: list = []           # every iteration, the last one included
        self.pred_slot = 0
        self.body: list = []          # while the predicate holds
        self.num_kernels = 0          # kernel steps directly in it (for cost estimates)
        # (slot the parent reads, slot of the Exit's value in the last iteration)
        self.exit_copies: list[tuple[int, int]] = []
        # some work depends on constant Enters only (see _floating)
        self.floating = False


def kernel_steps(stmts: list) -> Iterator[KernelStep]:
    """Every kernel step in ``stmts``, in order, through Ifs and nested loops."""
    for st in stmts:
        if type(st) is KernelStep:
            yield st
        elif type(st) is If:
            yield from kernel_steps(st.block)
        elif type(st) is LoopIR:
            yield from kernel_steps(st.pre)
            yield from kernel_steps(st.body)
