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
arrays. A value copied between slots (a loop variable's next value, a cond's Merge, an Exit)
is converted where it is computed, never on the copy: a loop's back edge costs an assignment.

A kernel registered ``prepared`` (the convolutions) may leave its node's context a kept call
(``KernelContext.fast``: its packed filter run directly); generated code calls that first and
the kernel call when it declines (None) or raises.

Arrays are kept cheap too: a kernel with an array form (``registry.ArrayForm``: the kernel's
own core, ``np.add`` for a float AddV2, the cell's MatMul, BiasAdd, Sigmoid, Tanh) is called
directly on the slots, its result taken when it is an ndarray of the output's dtype; anything
else falls back to the kernel call. An RNN cell's step is then a dozen NumPy calls, without
the kernel call's bookkeeping around each (about a microsecond apiece).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from . import recurrent
from .kernel_call import call, fits
from .program_ir import If, KernelStep, LoopIR, Select, kernel_steps

# NumPy scalar types the scalar forms handle (numeric and bool; not strings or objects)
SCALAR_TYPES = frozenset(np.dtype(c).type for c in "?bBhHiIlLqQefd")
# what a scalar form's ``{out}`` becomes: the output's NumPy scalar type by name (T_float32),
# bound in generated code's globals as FORM_ENV says
FORM_ENV = {f"T_{np.dtype(c).name}": np.dtype(c).type for c in "?bBhHiIlLqQefd"}
FORM_ENV.update({f"NZ_{np.dtype(c).name}": np.dtype(c).type(-0.0) for c in "efd"})

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
    if form is None or not form.applies(item.input_dtypes, item.out_types, item.attrs):
        return None
    expr = form.text(item.input_dtypes, item.out_types, item.attrs)
    if "{out}" in expr or "{nz_out}" in expr:
        name = item.out_dtypes[0].name
        expr = expr.replace("{out}", f"T_{name}").replace("{nz_out}", f"NZ_{name}")
    return expr


def array_form(item: Any) -> Callable[..., Any] | None:
    """The function generated code calls on ``item``'s input arrays instead of its kernel
    call (``OpSpec.array``, ``ArrayForm.function``), if the op has one for the node's input
    dtypes and attrs and the kernel call would add nothing to it: outputs of known dtypes,
    not bfloat16 (rounded by the call), no input that may be a ref (dereferenced by the
    call), stateless. Its result is taken only when it is an ndarray of the output's dtype
    (several outputs: a tuple of one each); else the kernel runs (and gives the result, or
    the error naming the node)."""
    form = item.spec.array if item.num_outputs else None
    if form is None or item.bf16_out or item.deref or item.stateful \
            or any(d is None for d in item.out_dtypes):
        return None
    return form.function(item.input_dtypes, item.attrs)


class Emitter:
    """Source lines of one function, with the constants it closes over."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.kernels: list[Any] = []    # K[i]: the i-th kernel step's item
        self.env: dict[str, Any] = {}   # further globals: array forms, output dtypes
        # slots that always hold a NumPy scalar of SCALAR_TYPES: 0-d constants converted at
        # compile time, never written by the function (a scalar form reading one needs no
        # type test for it)
        self.scalar_consts: set[int] = set()
        # slots that may hold a NumPy scalar (None: any): a kernel reading any other needs no
        # conversion to an array (``A``)
        self.maybe_scalar: set[int] | None = None
        # kernel steps whose budget test keeps the shapes and budget it last passed (``fits``)
        self.fit_memos: list[int] = []

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def arg(self, slot: int) -> str:
        """A slot as a kernel's argument: an array."""
        if self.maybe_scalar is not None and slot not in self.maybe_scalar:
            return f"s{slot}"
        return f"A(s{slot})"

    def steps(self, depth: int, steps: list[KernelStep], scalar_read: set[int],
              free: bool) -> None:
        """The code of kernel steps (program_ir.KernelStep).
        ``scalar_read``: slots some scalar form reads (outputs written there are converted);
        ``free``: clear each slot after its last reader (straight-line programs)."""
        for item, args, out, _stateful, frees in steps:
            i = len(self.kernels)
            self.kernels.append(item)
            names = [f"s{a}" for a in args]
            generic = f"call(K[{i}], [{', '.join(self.arg(a) for a in args)}], C[{i}])"
            form = scalar_form(item)
            fn = array_form(item) if args else None
            conv = "S" if out in scalar_read else ""
            if form is not None and args:
                guard = " and ".join(f"{n}.__class__ in SC" for n, a in zip(names, args)
                                     if a not in self.scalar_consts)
                # ``{kernel}``: the values the form leaves to the kernel call
                text = form.format(*names, kernel=f"S({generic}[0])")
                if "{kernel}" in form:
                    self.line(depth, "if ctl.error is not None: raise ctl.error")
                if not guard:
                    self.line(depth, f"s{out} = {text}")
                    continue
                if fn is None:
                    self.line(depth, f"s{out} = ({text}) if {guard} else "
                                     f"{conv}({generic}[0])")
                    continue
                # scalars take the form, arrays the array form (the kernel otherwise)
                self.line(depth, f"if {guard}:")
                self.line(depth + 1, f"s{out} = {text}")
                self.line(depth, "else:")
                self.array_step(depth + 1, i, item, args, out, fn, f"{conv}({generic}[0])")
                continue
            if fn is not None and item.num_outputs > 1:
                self.array_steps(depth, i, item, args, out, fn, generic, scalar_read)
            elif fn is not None:
                self.array_step(depth, i, item, args, out, fn, f"{conv}({generic}[0])")
            elif item.num_outputs == 1 and item.spec.prepared and not item.stateful:
                # the kernel's kept call (KernelContext.fast), else the kernel call
                self.line(depth, "if ctl.error is not None: raise ctl.error")
                self.line(depth, f"_f = C[{i}].fast")
                self.line(depth, "try:")
                self.line(depth + 1, f"_o = None if _f is None else "
                                     f"_f({', '.join(self.arg(a) for a in args)})")
                self.line(depth, "except Exception:")
                self.line(depth + 1, "_o = None")
                self.line(depth, f"s{out} = _o if _o is not None else {conv}({generic}[0])")
            elif item.num_outputs == 1:
                self.line(depth, "if ctl.error is not None: raise ctl.error")
                self.line(depth, f"s{out} = {conv}({generic}[0])")
            elif item.num_outputs == 0:
                self.line(depth, "if ctl.error is not None: raise ctl.error")
                self.line(depth, generic)
            else:
                self.line(depth, "if ctl.error is not None: raise ctl.error")
                self.line(depth, f"_r = {generic}")
                for k in range(item.num_outputs):
                    c = "S" if out + k in scalar_read else ""
                    self.line(depth, f"s{out + k} = {c}(_r[{k}])")
            if free:
                for s in frees:
                    self.line(depth, f"s{s} = None")

    def array_step(self, depth: int, i: int, item: Any, args: tuple, out: int,
                   fn: Callable[..., Any], fallback: str) -> None:
        """Kernel step ``i`` as its array form ``fn`` on the arrays, its result taken when it
        is an ndarray of the output dtype (the memory budget checked first, as the kernel
        call does), else ``fallback`` (the kernel call)."""
        self.env[f"OD{i}"] = item.out_dtypes[0]
        self.form_call(depth, i, item, args, fn)
        # the dtype by identity first (NumPy's own instance), then by value: an equal
        # descriptor that is another instance (unpickled, or "<f4" on a little-endian host)
        # is the same type
        self.line(depth, f"s{out} = _o if _o.__class__ is ND and (_o.dtype is OD{i} or "
                         f"_o.dtype == OD{i}) else {fallback}")

    def form_call(self, depth: int, i: int, item: Any, args: tuple,
                  fn: Callable[..., Any]) -> None:
        """``_o = `` the array form ``fn`` of kernel step ``i`` on the slots (None when the
        budget test fails or the form raises: the kernel call runs then), after the cancel
        check the kernel call would make."""
        self.env[f"AF{i}"] = fn
        # a NumPy scalar among them is taken as its 0-d array would be (NumPy's scalars
        # keep their dtype; tests/test_fast_paths.py checks the forms on both)
        core = f"AF{i}({', '.join(f's{a}' for a in args)})"
        if item.size_check is not None:
            core = f"{core} if {self.fits(i, item, args)} else None"
        self.line(depth, "if ctl.error is not None: raise ctl.error")
        self.line(depth, "try:")
        self.line(depth + 1, f"_o = {core}")
        self.line(depth, "except Exception:")
        self.line(depth + 1, "_o = None")

    def fits(self, i: int, item: Any, args: tuple) -> str:
        """The test that kernel step ``i``'s outputs fit the memory budget (``FITS``, what
        the kernel call checks first). An estimator that reads only shapes
        (``shapes_only``) is asked once per input shapes and budget: the last pair it passed
        is kept in the function's ``FM`` (one tuple per step, replaced whole), so a loop's
        MatMul asks once, not every iteration of every run."""
        sized = ", ".join(self.arg(a) for a in args)
        check = f"FITS(K[{i}], [{sized}], C[{i}])"
        if getattr(item.size_check, "shapes_only", False):
            m = len(self.fit_memos)
            self.fit_memos.append(i)
            key = "(" + "".join(f"s{a}.shape, " for a in args) + f"C[{i}].max_bytes)"
            check = f"((_z := {key}) == FM[{m}] or {check} and FM.__setitem__({m}, _z) is None)"
        if getattr(item.size_check, "alike_inputs_fit", False) and len(args) > 1:
            # the estimator's own first test, without the call (an RNN cell's elementwise
            # ops all have alike inputs)
            alike = " and ".join(f"s{args[0]}.shape == s{a}.shape" for a in args[1:])
            check = f"({alike} or {check})"
        return check

    def array_steps(self, depth: int, i: int, item: Any, args: tuple, out: int,
                    fn: Callable[..., Any], generic: str, scalar_read: set[int]) -> None:
        """Kernel step ``i`` of several outputs as its array form ``fn``: its tuple taken
        when it holds one ndarray of each output's dtype (NumPy's own instance), else the
        kernel call; the memory budget checked first, as for one output."""
        n = item.num_outputs
        for k in range(n):
            self.env[f"OD{i}_{k}"] = item.out_dtypes[k]
        self.form_call(depth, i, item, args, fn)
        taken = " and ".join(f"_o[{k}].__class__ is ND and _o[{k}].dtype is OD{i}_{k}"
                             for k in range(n))
        self.line(depth, f"if _o.__class__ is not tuple or len(_o) != {n} or not ({taken}):")
        self.line(depth + 1, f"_o = {generic}")
        for k in range(n):
            c = "S" if out + k in scalar_read else ""
            self.line(depth, f"s{out + k} = {c}(_o[{k}])")

    def compile(self, name: str, params: str) -> Callable:
        src = f"def {name}({params}):\n" + "\n".join(self.lines) + "\n"
        env = {"call": call, "A": to_array, "S": to_scalar, "SC": SCALAR_TYPES,
               "ND": np.ndarray, "FITS": fits, "FM": [None] * len(self.fit_memos),
               **FORM_ENV, **self.env}
        exec(_compiled(name, src), env)  # noqa: S102 - our own source
        fn = env[name]
        fn.source = src
        return fn


# source -> its code object, across plans and Sessions: a program's source names its
# kernels, contexts and constants only by index (its values are the env's), so a plan of
# the same graph in a new Session (the plan cache's hit, a worker's next Session) compiles
# it again to the same code; Python's compile() is most of compiling a program (an LSTM
# classifier's loop: 2 of 3 ms). Code objects are immutable; each compile still makes its
# own function in its own env. Bounded by total source size: the oldest go first.
_CODE: dict[tuple[str, str], Any] = {}
_CODE_MAX_CHARS = 8 << 20
_code_chars = 0                      # the sources' total length; with _CODE, under _CODE_LOCK
_CODE_LOCK = threading.Lock()


def _compiled(name: str, src: str) -> Any:
    global _code_chars
    key = (name, src)
    code = _CODE.get(key)
    if code is None:
        code = compile(src, f"<dfg {name}>", "exec")
        if len(src) <= _CODE_MAX_CHARS:
            with _CODE_LOCK:
                while _CODE and _code_chars + len(src) > _CODE_MAX_CHARS:
                    old = next(iter(_CODE))
                    _code_chars -= len(old[1])
                    del _CODE[old]
                if key not in _CODE:
                    _CODE[key] = code
                    _code_chars += len(src)
    return code


def scalar_reads(steps: list[KernelStep]) -> set[int]:
    """Slots read by kernels that have a scalar form."""
    out: set[int] = set()
    for item, args, _o, _s, _f in steps:
        if scalar_form(item) is not None:
            out.update(args)
    return out


def _copies(loops: list[LoopIR]) -> list[tuple[int, int]]:
    """(destination, source) of every copy between slots in a loop nest: a loop variable's
    first and next values (and value_index), the two sides of a cond's Merge, an Exit's last
    value."""
    copies: list[tuple[int, int]] = []

    def selects(stmts: list) -> None:
        for st in stmts:
            if type(st) is Select:
                copies.extend([(st.out, st.a), (st.out, st.b)])
            elif type(st) is If:
                selects(st.block)

    for lp in loops:
        for vs, ix, init, nx, i0, i1 in lp.merges:
            copies += [(vs, init), (vs, nx)]
            if ix is not None:
                copies += [(ix, i0), (ix, i1)]
        copies += lp.exit_copies
        selects(lp.pre)
        selects(lp.body)
    return copies


def _close(slots: set[int], edges: list[tuple[int, int]]) -> None:
    """Add to ``slots`` every ``b`` of an edge ``(a, b)`` whose ``a`` is in it,
    transitively."""
    grew = True
    while grew:
        grew = False
        for a, b in edges:
            if a in slots and b not in slots:
                slots.add(b)
                grew = True


def template_line(em: Emitter, slots: list[Any], scalar_read: set[int]) -> list[Any]:
    """Prologue assigning every slot from T (constants; None elsewhere); 0-d constants read by
    scalar forms are stored as scalars. Returns T."""
    t = [to_scalar(v) if k in scalar_read and v is not None else v
         for k, v in enumerate(slots)]
    for k in range(len(slots)):
        em.line(1, f"s{k} = T[{k}]")
    em.scalar_consts = {k for k, v in enumerate(t) if v.__class__ in SCALAR_TYPES}
    return t


def compile_straight_line(prog: Any) -> tuple[Callable, list[Any], list[Any]] | None:
    """``fn(T, F, C, ctl) -> fetched values`` for a straight-line program (F: the fed
    values by feed slot order), its template T and kernel items K; None when too large."""
    if len(prog.steps) > MAX_COMPILED_STEPS:
        return None
    em = Emitter()
    reads = scalar_reads(prog.steps)
    t = template_line(em, prog.template, reads)
    em.maybe_scalar = reads | {st.out for st in prog.steps if scalar_form(st.item)}
    for j, slot in enumerate(prog.feed_slots.values()):
        em.line(1, f"s{slot} = {'S' if slot in reads else ''}(F[{j}])")
    em.steps(1, prog.steps, reads, free=True)
    outs = ", ".join("None" if s is None else f"A(s{s})" for s in prog.fetch_slots)
    em.line(1, f"return [{outs}]")
    fn = em.compile("straight_line", "T, F, K, C, ctl")
    return fn, t, em.kernels


def _written(stmts: list) -> set[int]:
    """Every slot ``stmts`` write, through Ifs and inner loops."""
    out: set[int] = set()
    for st in stmts:
        if type(st) is KernelStep:
            out.update(range(st.out, st.out + st.item.num_outputs))
        elif type(st) is If:
            out |= _written(st.block)
        elif type(st) is Select:
            out.add(st.out)
        else:
            out |= _written(st.pre) | _written(st.body)
            out.update(m[0] for m in st.merges)
            out.update(m[1] for m in st.merges if m[1] is not None)
            out.update(dst for dst, _src in st.exit_copies)
    return out


def invariant_steps(lp: LoopIR) -> set[int]:
    """The kernel steps at the top of ``lp``'s iteration (``id`` of each) that compute the
    same value in every iteration of one run of the loop: stateless, and reading only what
    the iteration does not change (constants, the parent's values, loop variables whose next
    value is their value, invariant steps' outputs). TF2's functional While passes a layer's
    weights as loop variables, so a Keras GRU splits and squeezes its bias every step.
    Generated code runs them in the first iteration only: the same kernel calls on the same
    values, and an error where it would have arisen, but once (a loop that never iterates
    never runs its body's)."""
    variant = {vs for vs, _ix, _init, nx, _i0, _i1 in lp.merges if nx != vs}
    variant.update(ix for _vs, ix, *_rest in lp.merges if ix is not None)
    once: set[int] = set()
    for st in [*lp.pre, *lp.body]:
        if type(st) is KernelStep:
            if not st.stateful and st.args and not any(a in variant for a in st.args):
                once.add(id(st))
                continue
            variant.update(range(st.out, st.out + st.item.num_outputs))
        else:
            variant |= _written([st])
    return once


def compile_loop(prog: Any) -> tuple[Callable, list[Any], list[Any]]:
    """``fn(T, E, K, C, ctl) -> (exit values, iterations per loop)`` for a loop program (E:
    the Enters' values): its loop, the loops nested in it and the conds in their bodies, as
    nested ``while``/``if`` statements of one function."""
    em = Emitter()
    steps = list(kernel_steps([prog.loop]))
    reads = scalar_reads(steps)
    copies = _copies(prog.loops)
    _close(reads, [(dst, src) for dst, src in copies])
    # a value written where a scalar form reads it is converted on the way in: by the step
    # that computes it (or the template, or the program's entry), so copies between slots
    # (a loop variable's next value, a cond's Merge, an Exit) never convert
    t = template_line(em, prog.template, reads)
    assigned = {st.out + k for st in steps for k in range(st.item.num_outputs)}
    assigned.update(prog.enter_slots)
    for lp in prog.loops:
        assigned.update(m[0] for m in lp.merges)
        assigned.update(m[1] for m in lp.merges if m[1] is not None)
        assigned.update(dst for dst, _src in lp.exit_copies)
    em.scalar_consts -= assigned
    # what may hold a scalar: what is converted, what scalar forms compute, copies of those
    em.maybe_scalar = reads | {st.out for st in steps if scalar_form(st.item)}
    _close(em.maybe_scalar, [(src, dst) for dst, src in copies])
    for k, slot in enumerate(prog.enter_slots):
        em.line(1, f"s{slot} = {'S' if slot in reads else ''}(E[{k}])")
    for lp in prog.loops:
        em.line(1, f"n{lp.index} = 0")

    def block(depth: int, stmts: list, once: set[int] = frozenset(), flag: str = "") -> None:
        if not stmts:
            em.line(depth, "pass")
        for st in stmts:
            if type(st) is KernelStep:
                if id(st) in once:
                    em.line(depth, f"if {flag}:")
                    em.steps(depth + 1, [st], reads, free=False)
                    continue
                em.steps(depth, [st], reads, free=False)
            elif type(st) is If:
                em.line(depth, f"if {'' if st.side else 'not '}s{st.pred}:")
                block(depth + 1, st.block)
            elif type(st) is Select:
                em.line(depth, f"s{st.out} = s{st.a} if s{st.pred} else s{st.b}")
            else:
                loop(depth, st)

    def native(depth: int, lp: LoopIR, runner: Any) -> None:
        em.line(depth, f"_r = RC{lp.index}(ctl, C[0].max_bytes, "
                       f"{', '.join(f's{s}' for s in runner.reads)})")
        em.line(depth, "if _r is not None:")
        em.line(depth + 1, f"n{lp.index} += _r[0]")
        em.line(depth + 1, f"{', '.join(f's{s}' for s in runner.writes)}, = _r[1]")

    def loop(depth: int, lp: LoopIR) -> None:
        for vs, ix, init, _nx, i0, _i1 in lp.merges:
            em.line(depth, f"s{vs} = s{init}")
            if ix is not None:
                em.line(depth, f"s{ix} = s{i0}")
        once = invariant_steps(lp)
        flag = f"h{lp.index}"
        if once:    # set on each entry: an inner loop's invariants are its parent's values
            em.line(depth, f"{flag} = True")
        runner = recurrent.match(lp, once)
        asked = f"q{lp.index}"
        if runner is not None:
            # a recurrent layer's loop: its iterations in compiled code when this run's
            # values allow (recurrent.py), the loop below running what it leaves; asked where
            # the loop starts, or after its first iteration when that computes invariants
            em.env[f"RC{lp.index}"] = runner
            if once:
                em.line(depth, f"{asked} = True")
            else:
                native(depth, lp, runner)
        em.line(depth, "while True:")
        if runner is not None and once:
            em.line(depth + 1, f"if {asked} and not {flag}:")
            em.line(depth + 2, f"{asked} = False")
            native(depth + 2, lp, runner)
        em.line(depth + 1, "if ctl.error is not None: raise ctl.error")
        em.line(depth + 1, f"n{lp.index} += 1")
        block(depth + 1, lp.pre, once, flag)
        em.line(depth + 1, f"if not s{lp.pred_slot}: break")
        block(depth + 1, lp.body, once, flag)
        if once:
            em.line(depth + 1, f"{flag} = False")
        if lp.merges:
            lhs = ", ".join(f"s{m[0]}" for m in lp.merges)
            rhs = ", ".join(f"s{m[3]}" for m in lp.merges)
            em.line(depth + 1, f"{lhs}, = {rhs},")
            for _vs, ix, _init, _nx, _i0, i1 in lp.merges:
                if ix is not None:
                    em.line(depth + 1, f"s{ix} = s{i1}")
        for dst, src in lp.exit_copies:
            em.line(depth, f"s{dst} = s{src}")

    loop(1, prog.loop)
    outs = ", ".join(f"A(s{s})" for s in prog.exit_slots)
    counts = ", ".join(f"n{lp.index}" for lp in prog.loops)
    em.line(1, f"return [{outs}], ({counts},)")
    fn = em.compile("loop", "T, E, K, C, ctl")
    return fn, t, em.kernels
