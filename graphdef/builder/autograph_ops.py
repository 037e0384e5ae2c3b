"""The operators ``B.autograph``'s transformed code calls (autograph.py writes the calls).

Each decides when the Python runs, at graph-building time: a graph tensor condition or
iterable builds graph control flow (``cond``/``while_loop``, v1 or functional), a Python value
runs the statement as Python (a loop unrolls). The statement's body comes as a function of
the variables it modifies, returning their new values (the *state*, in a fixed order of
names); a variable with no value yet is an ``Undefined`` that raises, naming the variable and
the line, when the program reads it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import AutographError
from . import control_flow as _cf
from . import ops as _ops
from .core import Graph, Tensor, get_default_graph

# the options of the innermost decorated call running on this thread (functional or v1)
_local = threading.local()


def functional_mode() -> bool:
    stack = getattr(_local, "stack", None)
    return bool(stack and stack[-1])


def push_mode(functional: bool | None) -> None:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    # None: inherit from the decorated function that calls this one
    stack.append(functional_mode() if functional is None else bool(functional))


def pop_mode() -> None:
    _local.stack.pop()


class Undefined:
    """A variable with no value at this point of the program. ``why`` says how it came to
    have none (first assigned inside a tensor loop, in only one branch of a tensor ``if``,
    with the line); reading it raises an AutographError naming the read's line."""

    __slots__ = ("name", "why")

    def __init__(self, name: str, why: str = "") -> None:
        self.name, self.why = name, why

    def error(self, where: str | None = None) -> AutographError:
        if self.why:
            return AutographError(f"'{self.name}' has no value here: {self.why}",
                                  source=where)
        return AutographError(f"'{self.name}' is read before it is assigned", source=where)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)   # Python's protocols ask; only a real use fails
        raise self.error()

    def __repr__(self) -> str:
        return f"<Undefined {self.name}>"


def _raise_undefined(self: Undefined, *args: Any) -> Any:
    raise self.error()


for _m in ("add sub mul truediv floordiv mod pow matmul and or xor lt le gt ge eq ne "
           "lshift rshift").split():
    setattr(Undefined, f"__{_m}__", _raise_undefined)
    if _m not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Undefined, f"__r{_m}__", _raise_undefined)
for _m in "neg pos abs invert bool len iter getitem call index float int array".split():
    setattr(Undefined, f"__{_m}__", _raise_undefined)
Undefined.__hash__ = object.__hash__  # type: ignore[method-assign]


class UndefinedReturn(Undefined):
    """The function's return value before a ``return`` ran: the function returns None.
    ``fill``: the function returns on every path, so a graph loop may carry a stand-in."""

    __slots__ = ("fill",)

    def __init__(self, name: str, why: str = "", fill: bool = False) -> None:
        super().__init__(name, why)
        self.fill = fill


def ld(value: Any, name: str, where: str) -> Any:
    """A read of a local variable: its value, or an AutographError naming the variable, the
    line of the read (``where``) and why it has no value."""
    if isinstance(value, Undefined):
        raise Undefined(name, value.why).error(where)
    return value


def retval(value: Any) -> Any:
    if isinstance(value, UndefinedReturn) and not value.why:
        return None
    if isinstance(value, Undefined):
        raise value.error()
    return value


def _line(where: str) -> str:
    """``at line 12`` from ``path:12 (in f)``."""
    head = where.rsplit(" (in ", 1)[0]
    return f"at line {head.rsplit(':', 1)[-1]}"


# --- what counts as a graph value -------------------------------------------------------
def is_tensor(x: Any) -> bool:
    if isinstance(x, Undefined):
        return False
    return isinstance(x, Tensor) or hasattr(x, "_as_tensor")


def _number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, np.number, np.bool_, np.ndarray))


def _bool_tensor(x: Any, what: str, where: str) -> Tensor:
    t = _ops.convert_to_tensor(x)
    if D.base(t.dtype) != D.from_name("bool"):
        raise AutographError(
            f"the condition of the {what} is a {D.name(D.base(t.dtype))} tensor; "
            f"expected a bool tensor (compare it, e.g. `x > 0`)", source=where)
    return t


def _branch_out(v: Any) -> Tensor:
    """A v1 cond branch's output, made inside the branch: a tensor from outside returned as
    it is gets an Identity (control_flow.cond would Switch it outside the enclosing loop's
    frame: an Enter from the wrong frame, which validation rejects)."""
    t = _ops.convert_to_tensor(v)
    ctx = get_default_graph()._ctxt
    if ctx is not None and t.name not in ctx.values:
        return _ops.identity(t)
    return t


# --- expressions ------------------------------------------------------------------------
def not_(x: Any) -> Any:
    if is_tensor(x):
        return _ops.logical_not(x)
    return not x


def and_(a_fn: Callable[[], Any], b_fn: Callable[[], Any], where: str = "") -> Any:
    """``a and b``: b is evaluated only when a holds (a tensor a: a cond, so that b's ops
    run only then, as Python's short circuit)."""
    a = a_fn()
    if is_tensor(a):
        a = _bool_tensor(a, "`and`", where)
        return _cf.cond(a, lambda: _branch_out(_bool_tensor(b_fn(), "`and`", where)),
                        lambda: _branch_out(a), functional=functional_mode())
    return a and b_fn()


def or_(a_fn: Callable[[], Any], b_fn: Callable[[], Any], where: str = "") -> Any:
    a = a_fn()
    if is_tensor(a):
        a = _bool_tensor(a, "`or`", where)
        return _cf.cond(a, lambda: _branch_out(a),
                        lambda: _branch_out(_bool_tensor(b_fn(), "`or`", where)),
                        functional=functional_mode())
    return a or b_fn()


def eq(a: Any, b: Any) -> Any:
    if is_tensor(a) or is_tensor(b):
        return _ops.equal(a, b) if is_tensor(a) else _ops.equal(b, a)
    return a == b


def ne(a: Any, b: Any) -> Any:
    if is_tensor(a) or is_tensor(b):
        return _ops.not_equal(a, b) if is_tensor(a) else _ops.not_equal(b, a)
    return a != b


def len_(x: Any) -> Any:
    """``len(x)``: a tensor's first dimension (a Python int when the shape knows it)."""
    if not is_tensor(x):
        return len(x)
    t = _ops.convert_to_tensor(x)
    if t.shape is not None and len(t.shape) > 0 and t.shape[0] is not None:
        return t.shape[0]
    return _ops.strided_slice_of(_ops.shape(t), 0)


def if_exp(test: Any, a_fn: Callable[[], Any], b_fn: Callable[[], Any], where: str) -> Any:
    """``a if test else b``."""
    if is_tensor(test):
        test = _bool_tensor(test, "conditional expression", where)
        return _cf.cond(test, lambda: _branch_out(a_fn()), lambda: _branch_out(b_fn()),
                        functional=functional_mode())
    return a_fn() if test else b_fn()


# --- if ---------------------------------------------------------------------------------
def if_stmt(test: Any, then_fn: Callable, else_fn: Callable, state: tuple,
            names: tuple[str, ...], where: str, mutates: tuple[str, ...] = ()) -> tuple:
    """``if test: ... else: ...`` over the variables ``names`` (their values ``state``).
    ``mutates``: attributes and items the branches assign (``self.x``), which a graph
    branch cannot carry."""
    if not is_tensor(test):
        return tuple(then_fn(*state) if test else else_fn(*state))
    test = _bool_tensor(test, "`if`", where)
    _refuse_mutations(mutates, "an `if` with a tensor condition", where)
    return _tensor_if(test, then_fn, else_fn, tuple(state), names, where)


def _tensor_if(test: Tensor, then_fn: Callable, else_fn: Callable, state: tuple,
               names: tuple[str, ...], where: str) -> tuple:
    n = len(state)
    # which positions the true branch gives as cond outputs, and their dtypes: the false
    # branch (built second) gives the same positions, padding those it leaves undefined
    plan: dict[str, Any] = {}
    results: dict[str, list] = {}

    def entry_dtype(k: int) -> int | None:
        return D.base(_ops.convert_to_tensor(state[k]).dtype) if is_tensor(state[k]) else None

    def branch(fn: Callable, side: str) -> list:
        outs = list(fn(*state))
        results[side] = outs
        flat: list[Tensor] = []
        if side == "true":
            positions = []
            for k, v in enumerate(outs):
                if isinstance(v, Undefined):
                    continue
                if is_tensor(v) or _number(v):
                    t = _branch_out(v) if is_tensor(v) else \
                        _ops.convert_to_tensor(v, entry_dtype(k))
                    positions.append(k)
                    flat.append(t)
                elif v is not state[k]:
                    raise _not_a_tensor(names[k], v, "an `if` with a tensor condition", where)
            plan["positions"] = positions
            plan["dtypes"] = [D.base(t.dtype) for t in flat]
            plan["shapes"] = [t.shape for t in flat]
            return flat
        for k, dt, shp in zip(plan["positions"], plan["dtypes"], plan["shapes"]):
            v = outs[k]
            if isinstance(v, Undefined):
                # a stand-in: the variable has no value after the `if` (see below)
                flat.append(_ops.zeros(shp if shp and None not in shp else [], dt))
                continue
            if not (is_tensor(v) or _number(v)):
                raise _not_a_tensor(names[k], v, "an `if` with a tensor condition", where)
            t = _branch_out(v) if is_tensor(v) else _ops.convert_to_tensor(v, dt)
            if D.base(t.dtype) != dt:
                raise AutographError(
                    f"'{names[k]}' is {D.name(dt)} in the true branch of the `if` and "
                    f"{D.name(D.base(t.dtype))} in the false branch; both branches must "
                    f"give it the same dtype", source=where)
            flat.append(t)
        for k, v in enumerate(outs):
            if k in plan["positions"] or isinstance(v, Undefined):
                continue
            if v is not state[k] and not (is_tensor(v) or _number(v)):
                raise _not_a_tensor(names[k], v, "an `if` with a tensor condition", where)
        return flat

    merged = _cf.cond(test, lambda: branch(then_fn, "true"), lambda: branch(else_fn, "false"),
                      functional=functional_mode())
    merged = list(merged) if isinstance(merged, (list, tuple)) else [merged]
    by_pos = dict(zip(plan["positions"], merged))
    out: list[Any] = []
    for k in range(n):
        t_val, f_val = results["true"][k], results["false"][k]
        t_undef, f_undef = isinstance(t_val, Undefined), isinstance(f_val, Undefined)
        if t_undef and f_undef:
            out.append(t_val)
        elif t_undef or f_undef:
            if names[k] == "_ag_retval" and getattr(_local, "probing", 0):
                # probing a loop body for the return value's dtype (_probe_return)
                out.append(by_pos.get(k, f_val))
                continue
            if isinstance(state[k], UndefinedReturn) and state[k].why:
                raise AutographError(state[k].why, source=where)
            if isinstance(state[k], UndefinedReturn) or names[k] == "_ag_retval":
                raise AutographError(
                    "a `return` under an `if` with a tensor condition needs a value on "
                    "both paths: return in both branches, or return after the `if`",
                    source=where)
            side = "false" if t_undef else "true"
            out.append(Undefined(
                names[k], f"it is assigned only in the {side} branch of the `if` with a "
                f"tensor condition {_line(where)}; assign it in both branches or before the "
                "`if`"))
        elif k in by_pos:
            out.append(by_pos[k])
        elif t_val is state[k] and f_val is state[k]:
            out.append(state[k])
        else:
            # the true branch kept a Python object the false branch changed
            raise _not_a_tensor(names[k], f_val, "an `if` with a tensor condition", where)
    return tuple(out)


def _refuse_mutations(mutates: tuple[str, ...], what: str, where: str) -> None:
    if mutates:
        raise AutographError(
            f"assigning {', '.join(f'`{m}`' for m in mutates)} inside {what} is not supported "
            "(both paths of a graph branch are built, a graph loop body once); assign a local "
            "variable and store it after", source=where)


def _not_a_tensor(name: str, v: Any, what: str, where: str) -> AutographError:
    kind = "a tensor" if is_tensor(v) else f"a Python {type(v).__name__}"
    return AutographError(
        f"'{name}' becomes {kind} on one path of {what} and not on the other; a graph "
        "branch can give a variable only tensors and numbers", source=where)


# --- while ------------------------------------------------------------------------------
def while_stmt(test_fn: Callable, body_fn: Callable, state: tuple, names: tuple[str, ...],
               where: str, mutates: tuple[str, ...] = ()) -> tuple:
    """``while test: body``. A Python test runs the loop as Python; once the test is a
    tensor (at the start, or after Python iterations made a variable a tensor) the rest of
    the loop is one graph loop over the current values."""
    state = tuple(state)
    while True:
        # the test is tried in a scratch graph: a tensor test is built again inside the
        # loop, and its first try would otherwise stay in the graph, unused
        with Graph().as_default():
            t = test_fn(*state)
        if is_tensor(t):
            _refuse_mutations(mutates, "a `while` loop with a tensor condition", where)
            return _tensor_loop(test_fn, None, body_fn, state, names, where, "`while`")
        if not t:
            return state
        state = tuple(body_fn(*state))


def _loop_vars(state: tuple) -> tuple[list[int], list[Tensor]]:
    """Split the state of a tensor loop: positions carried as loop variables (tensors and
    numbers, numbers made constants), and the rest passed to the body as they are."""
    carried: list[int] = []
    init: list[Tensor] = []
    for k, v in enumerate(state):
        if isinstance(v, Undefined):
            continue
        if is_tensor(v) or _number(v):
            carried.append(k)
            init.append(_ops.convert_to_tensor(v))
    return carried, init


def _tensor_loop(test_fn: Callable | None, extra_fn: Callable | None, body_fn: Callable,
                 state: tuple, names: tuple[str, ...], where: str, what: str,
                 iteration: Any = None) -> tuple:
    """One graph while loop. ``iteration``: None for a while statement; for a for
    statement ``(start, limit_test, next_fn, item_fn)`` over an index carried first."""
    state = _with_return_placeholder(body_fn, state, names, iteration, what, where)
    carried, init = _loop_vars(state)
    dtypes = [D.base(t.dtype) for t in init]
    n_idx = 0 if iteration is None else 1
    if iteration is not None:
        init = [iteration[0]] + init

    def full(ts: tuple) -> list:
        cur = list(state)
        for k, t in zip(carried, ts[n_idx:]):
            cur[k] = t
        for k, v in enumerate(cur):
            if type(v) is Undefined and k not in carried:
                # first assigned inside the loop: a temporary of each iteration
                cur[k] = Undefined(names[k], f"it is first assigned inside the {what} loop "
                                   f"with a tensor condition {_line(where)}, and read before "
                                   "that assignment; give it a value before the loop")
        return cur

    def cond(*ts: Tensor) -> Tensor:
        parts = []
        if iteration is not None:
            parts.append(iteration[1](ts[0]))
        if test_fn is not None:
            parts.append(test_fn(*full(ts)))
        if extra_fn is not None:
            parts.append(extra_fn(*full(ts)))
        c = None
        for p in parts:
            p = _bool_tensor(p, f"{what} loop", where) if is_tensor(p) else \
                _ops.constant(bool(p))
            c = p if c is None else _ops.logical_and(c, p)
        return c

    def body(*ts: Tensor) -> list:
        cur = full(ts)
        if iteration is None:
            outs = list(body_fn(*cur))
        else:
            outs = list(body_fn(iteration[3](ts[0]), *cur))
        new: list[Tensor] = [] if iteration is None else [iteration[2](ts[0])]
        for k, dt in zip(carried, dtypes):
            v = outs[k]
            if isinstance(v, Undefined):
                raise AutographError(f"loop variable '{names[k]}' has no value at the end of "
                                     f"the {what} loop's body", source=where)
            if not (is_tensor(v) or _number(v)):
                raise AutographError(
                    f"loop variable '{names[k]}' enters the {what} loop as a "
                    f"{D.name(dt)} tensor and leaves its body as a Python "
                    f"{type(v).__name__}", source=where)
            if not is_tensor(v) and np.asarray(v).dtype.kind == "f" and \
                    np.dtype(D.to_numpy(dt)).kind in "iub":
                raise AutographError(
                    f"loop variable '{names[k]}' enters the {what} loop as {D.name(dt)} and "
                    f"its body makes it a Python float ({v!r})", source=where)
            t = _ops.convert_to_tensor(v) if is_tensor(v) else _ops.convert_to_tensor(v, dt)
            if D.base(t.dtype) != dt:
                raise AutographError(
                    f"loop variable '{names[k]}' enters the {what} loop as {D.name(dt)} and "
                    f"leaves its body as {D.name(D.base(t.dtype))}; a loop variable keeps "
                    "its dtype (start it as the dtype it will have, e.g. 0.0 for a float)",
                    source=where)
            new.append(t)
        for k, v in enumerate(outs):
            if k in carried or isinstance(state[k], Undefined):
                continue
            if v is not state[k]:
                raise AutographError(
                    f"'{names[k]}' holds a Python {type(state[k]).__name__} that the {what} "
                    "loop with a tensor condition changes; a graph loop can carry only "
                    "tensors and numbers", source=where)
        return new

    if not init:
        raise AutographError(f"the {what} loop with a tensor condition changes no variable "
                             "that has a value before it: it would have no loop variable",
                             source=where)
    exits = _cf.while_loop(cond, body, list(init), functional=functional_mode())
    exits = list(exits) if isinstance(exits, (list, tuple)) else [exits]
    out = list(state)
    for k, t in zip(carried, exits[n_idx:]):
        out[k] = t
    for k, v in enumerate(state):
        if isinstance(v, Undefined) and k not in carried:
            if isinstance(v, UndefinedReturn) or names[k] == "_ag_retval":
                out[k] = v if v.why else UndefinedReturn(
                    names[k], f"a `return` inside the {what} loop with a tensor condition "
                    f"{_line(where)} could not be given a value before the loop (its dtype "
                    "and shape must be known when the loop is built)")
                continue
            out[k] = Undefined(names[k], f"it is first assigned inside the {what} loop with a "
                               f"tensor condition {_line(where)} (which may run zero times); "
                               "give it a value before the loop to use it after")
    return tuple(out)


def _with_return_placeholder(body_fn: Callable, state: tuple, names: tuple[str, ...],
                             iteration: Any, what: str, where: str) -> tuple:
    """A ``return`` inside a tensor loop: the return value must be a loop variable from the
    start, so it starts as zeros of the dtype and shape the body gives it (found by building
    the body once in a scratch graph, as TensorFlow's AutoGraph does; the scratch graph is
    dropped). The value is read only when the loop's ``return`` ran."""
    if "_ag_retval" not in names:
        return state
    k = names.index("_ag_retval")
    if not isinstance(state[k], UndefinedReturn) or state[k].why:
        return state
    if not state[k].fill:
        state = list(state)
        state[k] = UndefinedReturn(names[k], f"a `return` inside the {what} loop with a "
                                   f"tensor condition {_line(where)} needs the function to end "
                                   "with a `return` on every path (a graph cannot return None "
                                   "on some runs)")
        return tuple(state)
    scratch = Graph()
    _local.probing = getattr(_local, "probing", 0) + 1
    try:
        with scratch.as_default():
            cur = list(state)
            if iteration is None:
                outs = body_fn(*cur)
            else:
                outs = body_fn(iteration[3](iteration[0]), *cur)
    except AutographError:
        return state       # the real build raises it, where it belongs
    finally:
        _local.probing -= 1
    v = outs[k]
    if not (is_tensor(v) or _number(v)):
        return state
    t = v if is_tensor(v) else None
    dt = D.base(_ops.convert_to_tensor(t).dtype) if t is not None else \
        D.from_numpy(np.asarray(v).dtype)
    shape = t.shape if t is not None else np.shape(v)
    if shape is None or None in shape:
        return state
    state = list(state)
    state[k] = _ops.zeros(list(shape), dt)
    return tuple(state)


# --- for --------------------------------------------------------------------------------
class TensorRange:
    """``range(start, stop, step)`` with a tensor among its arguments."""

    def __init__(self, start: Any, stop: Any, step: Any) -> None:
        self.start, self.stop, self.step = start, stop, step


def range_(*args: Any) -> Any:
    """``range`` in a ``for``: Python's when every argument is a Python int."""
    if not any(is_tensor(a) for a in args):
        return range(*args)
    if len(args) == 1:
        return TensorRange(0, args[0], 1)
    if len(args) == 2:
        return TensorRange(args[0], args[1], 1)
    return TensorRange(*args)


class TensorEnumerate:
    """``enumerate(x)`` of a tensor: (index, row) pairs along its first dimension."""

    def __init__(self, x: Any, start: Any) -> None:
        self.x, self.start = x, start


def enumerate_(x: Any, start: Any = 0) -> Any:
    """``enumerate`` in a ``for``: Python's unless ``x`` is a tensor."""
    if is_tensor(x):
        return TensorEnumerate(x, start)
    if isinstance(x, TensorRange):
        raise AutographError("enumerate() of a range with tensor bounds is not supported: "
                             "loop over the range itself")
    return enumerate(x, start)


def for_stmt(iterable: Any, extra_fn: Callable | None, body_fn: Callable, state: tuple,
             names: tuple[str, ...], where: str, mutates: tuple[str, ...] = ()) -> tuple:
    """``for target in iterable: body`` (body_fn takes the item first). ``extra_fn``: the
    flags of ``break``/``return`` that end the loop early."""
    state = tuple(state)
    if isinstance(iterable, (TensorRange, TensorEnumerate)) or is_tensor(iterable):
        _refuse_mutations(mutates, "a `for` loop over a tensor", where)
    if isinstance(iterable, TensorRange):
        return _tensor_range_loop(iterable, extra_fn, body_fn, state, names, where)
    if is_tensor(iterable):
        return _tensor_items_loop(_ops.convert_to_tensor(iterable), extra_fn, body_fn, state,
                                  names, where)
    if isinstance(iterable, TensorEnumerate):
        return _tensor_items_loop(_ops.convert_to_tensor(iterable.x), extra_fn, body_fn, state,
                                  names, where, iterable.start)
    for item in iterable:
        if extra_fn is not None:
            go = extra_fn(*state)
            if is_tensor(go):
                # a break under a tensor condition: each later iteration runs under it
                go = _bool_tensor(go, "`for`", where)
                _refuse_mutations(mutates, "a `for` loop ended by a tensor condition", where)
                state = _tensor_if(go, lambda *s, item=item: body_fn(item, *s),
                                   lambda *s: s, state, names, where)
                continue
            if not go:
                break
        state = tuple(body_fn(item, *state))
    return state


def _tensor_range_loop(r: TensorRange, extra_fn: Callable | None, body_fn: Callable,
                       state: tuple, names: tuple[str, ...], where: str) -> tuple:
    ts = [a for a in (r.start, r.stop, r.step) if is_tensor(a)]
    dt = max((D.base(_ops.convert_to_tensor(t).dtype) for t in ts),
             key=lambda d: np.dtype(D.to_numpy(d)).itemsize)
    for a in ts:
        if np.dtype(D.to_numpy(D.base(_ops.convert_to_tensor(a).dtype))).kind not in "iu":
            raise AutographError("range() in a `for` takes integer tensors", source=where)

    def as_t(v: Any) -> Tensor:
        t = _ops.convert_to_tensor(v, None if is_tensor(v) else dt)
        return _ops.cast(t, dt) if D.base(t.dtype) != dt else t

    start, stop, step = as_t(r.start), as_t(r.stop), r.step
    if is_tensor(step):
        step = as_t(step)

        def limit(i: Tensor) -> Tensor:
            up = _ops.logical_and(_ops.greater(step, 0), _ops.less(i, stop))
            down = _ops.logical_and(_ops.less(step, 0), _ops.greater(i, stop))
            return _ops.logical_or(up, down)
    elif step > 0:
        def limit(i: Tensor) -> Tensor:
            return _ops.less(i, stop)
    elif step < 0:
        def limit(i: Tensor) -> Tensor:
            return _ops.greater(i, stop)
    else:
        raise AutographError("range() arg 3 must not be zero", source=where)
    return _tensor_loop(None, extra_fn, body_fn, state, names, where, "`for`",
                        (start, limit, lambda i: i + step, lambda i: i))


def _tensor_items_loop(x: Tensor, extra_fn: Callable | None, body_fn: Callable, state: tuple,
                       names: tuple[str, ...], where: str, start: Any = None) -> tuple:
    """``for row in x``: the rows along x's first dimension; with ``start`` (enumerate)
    the items are ``(start + i, row)``."""
    if x.shape is not None and len(x.shape) == 0:
        raise AutographError("cannot iterate over a scalar tensor", source=where)
    n = _ops.strided_slice_of(_ops.shape(x), 0)

    def item(i: Tensor) -> Any:
        row = _ops.gather(x, i)
        if start is None:
            return row
        return (i + start if not (isinstance(start, int) and start == 0) else i), row
    return _tensor_loop(None, extra_fn, body_fn, state, names, where, "`for`",
                        (_ops.constant(0), lambda i: _ops.less(i, n), lambda i: i + 1, item))
