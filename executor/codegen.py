"""Compiled programs: a program's steps turned into the source of one Python function.

Interpreting a program (``program_interp.run_steps``) costs, per kernel, a loop turn, list indexing
for every argument and result, and the bookkeeping around them. Generated code keeps every
value in a local variable named after its slot (``s12``: node names never become code), calls
the one kernel call (``kernel_call.call``) with the arguments written out, and checks the
step's cancel flag before every kernel call and every loop iteration. A loop program is one
function for its whole nest: each loop a ``while True:`` (an inner loop nested in its
parent's iteration, run to completion there), each cond branch an ``if`` on its predicate's
slot (the untaken side's nodes never run: dead values need no sentinel), each cond Merge a
conditional expression picking the taken side's value.

0-d values are kept cheap: a kernel with a scalar form valid for the node's dtypes
(``registry.ScalarForm``: AddV2's is ``{0} + {1}`` for real numbers, never bfloat16) is
written as that expression guarded by a type test, so on NumPy scalars it costs a tenth of a
ufunc call on 0-d arrays; on anything else the guard falls back to the kernel. Scalars come
from 0-d constants (converted once, at compile time), from 0-d inputs at program entry and
from 0-d kernel outputs read by scalar forms; they are turned back into 0-d arrays (``A``)
before any other kernel sees them and on the way out, so kernels and callers only ever see
arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .kernel_call import call
from .program_ir import If, KernelStep, LoopIR, Select, kernel_steps

# NumPy scalar types the scalar forms handle (numeric and bool; not strings or objects)
SCALAR_TYPES = frozenset(np.dtype(c).type for c in "?bBhHiIlLqQefd")

# Above this many steps a straight-line program stays interpreted: compiling a function
# with tens of thousands of locals costs more than it saves on one step.
MAX_COMPILED_STEPS = 4000


def to_array(v: Any) -> Any:
    """A NumPy scalar as a 0-d array; anything else as it is."""
    return np.asarray(v) if v.__class__ in SCALAR_TYPES else v


def to_scalar(v: Any) -> Any:
    """A 0-d numeric array as a NumPy scalar; anything else as it is."""
    if v.__class__ is np.ndarray and v.ndim == 0 and v.dtype.kind in "biuf":
        return v[()]
    return v


def scalar_form(item: Any) -> str | None:
    """The expression generated code computes ``item`` with on NumPy scalars, if its kernel has
    a scalar form valid for the node's input dtypes (``ScalarForm.applies``); else None."""
    form = item.spec.scalar if item.num_outputs == 1 else None
    return form.expr if form is not None and form.applies(item.input_dtypes) else None


class Emitter:
    """Source lines of one function, with the constants it closes over."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.kernels: list[Any] = []    # K[i]: the i-th kernel step's item

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def steps(self, depth: int, steps: list[KernelStep], scalar_read: set[int],
              free: bool) -> None:
        """The code of kernel steps (program_ir.KernelStep).
        ``scalar_read``: slots some scalar form reads (outputs written there are converted);
        ``free``: clear each slot after its last reader (straight-line programs)."""
        for item, args, out, _stateful, frees in steps:
            i = len(self.kernels)
            self.kernels.append(item)
            names = [f"s{a}" for a in args]
            generic = f"call(K[{i}], [{', '.join(f'A({n})' for n in names)}], C[{i}])"
            form = scalar_form(item)
            conv = "S" if out in scalar_read else ""
            if form is not None and args:
                guard = " and ".join(f"{n}.__class__ in SC" for n in names)
                self.line(depth, f"s{out} = ({form.format(*names)}) if {guard} else "
                                 f"{conv}({generic}[0])")
                continue
            self.line(depth, "if ctl.error is not None: raise ctl.error")
            if item.num_outputs == 1:
                self.line(depth, f"s{out} = {conv}({generic}[0])")
            elif item.num_outputs == 0:
                self.line(depth, generic)
            else:
                self.line(depth, f"_r = {generic}")
                for k in range(item.num_outputs):
                    c = "S" if out + k in scalar_read else ""
                    self.line(depth, f"s{out + k} = {c}(_r[{k}])")
            if free:
                for s in frees:
                    self.line(depth, f"s{s} = None")

    def compile(self, name: str, params: str) -> Callable:
        src = f"def {name}({params}):\n" + "\n".join(self.lines) + "\n"
        env = {"call": call, "A": to_array, "S": to_scalar, "SC": SCALAR_TYPES}
        exec(compile(src, f"<dfg {name}>", "exec"), env)  # noqa: S102 - our own source
        fn = env[name]
        fn.source = src
        return fn


def scalar_reads(steps: list[KernelStep]) -> set[int]:
    """Slots read by kernels that have a scalar form."""
    out: set[int] = set()
    for item, args, _o, _s, _f in steps:
        if scalar_form(item) is not None:
            out.update(args)
    return out


def template_line(em: Emitter, slots: list[Any], scalar_read: set[int]) -> list[Any]:
    """Prologue assigning every slot from T (constants; None elsewhere); 0-d constants read by
    scalar forms are stored as scalars. Returns T."""
    t = [to_scalar(v) if k in scalar_read and v is not None else v
         for k, v in enumerate(slots)]
    for k in range(len(slots)):
        em.line(1, f"s{k} = T[{k}]")
    return t


def compile_straight_line(prog: Any) -> tuple[Callable, list[Any], list[Any]] | None:
    """``fn(T, F, C, ctl) -> fetched values`` for a straight-line program (F: the fed
    values by feed slot order), its template T and kernel items K; None when too large."""
    if len(prog.steps) > MAX_COMPILED_STEPS:
        return None
    em = Emitter()
    reads = scalar_reads(prog.steps)
    t = template_line(em, prog.template, reads)
    for j, slot in enumerate(prog.feed_slots.values()):
        em.line(1, f"s{slot} = {'S' if slot in reads else ''}(F[{j}])")
    em.steps(1, prog.steps, reads, free=True)
    outs = ", ".join("None" if s is None else f"A(s{s})" for s in prog.fetch_slots)
    em.line(1, f"return [{outs}]")
    fn = em.compile("straight_line", "T, F, K, C, ctl")
    return fn, t, em.kernels


def compile_loop(prog: Any) -> tuple[Callable, list[Any], list[Any]]:
    """``fn(T, E, K, C, ctl) -> (exit values, iterations per loop)`` for a loop program (E:
    the Enters' values): its loop, the loops nested in it and the conds in their bodies, as
    nested ``while``/``if`` statements of one function."""
    em = Emitter()
    reads = scalar_reads(list(kernel_steps([prog.loop])))
    # a value written where a scalar form reads it is converted on the way in
    t = template_line(em, prog.template, reads)
    for k, slot in enumerate(prog.enter_slots):
        em.line(1, f"s{slot} = {'S' if slot in reads else ''}(E[{k}])")
    for lp in prog.loops:
        em.line(1, f"n{lp.index} = 0")

    def block(depth: int, stmts: list) -> None:
        if not stmts:
            em.line(depth, "pass")
        for st in stmts:
            if type(st) is KernelStep:
                em.steps(depth, [st], reads, free=False)
            elif type(st) is If:
                em.line(depth, f"if {'' if st.side else 'not '}s{st.pred}:")
                block(depth + 1, st.block)
            elif type(st) is Select:
                conv = "S" if st.out in reads else ""
                em.line(depth, f"s{st.out} = {conv}(s{st.a} if s{st.pred} else s{st.b})")
            else:
                loop(depth, st)

    def loop(depth: int, lp: LoopIR) -> None:
        for vs, ix, init, _nx, i0, _i1 in lp.merges:
            em.line(depth, f"s{vs} = {'S' if vs in reads else ''}(s{init})")
            if ix is not None:
                em.line(depth, f"s{ix} = s{i0}")
        em.line(depth, "while True:")
        em.line(depth + 1, "if ctl.error is not None: raise ctl.error")
        em.line(depth + 1, f"n{lp.index} += 1")
        block(depth + 1, lp.pre)
        em.line(depth + 1, f"if not s{lp.pred_slot}: break")
        block(depth + 1, lp.body)
        if lp.merges:
            lhs = ", ".join(f"s{m[0]}" for m in lp.merges)
            rhs = ", ".join(f"{'S' if m[0] in reads else ''}(s{m[3]})" for m in lp.merges)
            em.line(depth + 1, f"{lhs}, = {rhs},")
            for _vs, ix, _init, _nx, _i0, i1 in lp.merges:
                if ix is not None:
                    em.line(depth + 1, f"s{ix} = s{i1}")
        for dst, src in lp.exit_copies:
            em.line(depth, f"s{dst} = {'S' if dst in reads else ''}(s{src})")

    loop(1, prog.loop)
    outs = ", ".join(f"A(s{s})" for s in prog.exit_slots)
    counts = ", ".join(f"n{lp.index}" for lp in prog.loops)
    em.line(1, f"return [{outs}], ({counts},)")
    fn = em.compile("loop", "T, E, K, C, ctl")
    return fn, t, em.kernels
