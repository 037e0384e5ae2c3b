"""``B.autograph``: Python control flow turned into graph control flow by rewriting the
function's source, the way TensorFlow's AutoGraph does.

    @B.autograph
    def collatz(n):
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        return steps

The decorator reads the function's source (``inspect``: it must live in a file), parses it
with ``ast`` and rewrites it once, at decoration:

1. ``return`` inside control flow becomes ``_ag_do_return``/``_ag_retval`` assignments, the
   statements after it guarded by ``if not _ag_do_return`` (an ``if`` whose branch always
   returns takes the rest of the block as its other branch), loops ended by the flag;
2. ``break`` becomes a flag set to True and tested by the loop, ``continue`` a flag reset at
   the start of each iteration; the statements after either are guarded by the flag;
3. every ``if``/``while``/``for`` becomes functions of the variables the statement assigns
   (found by walking the statement: its *state*), passed to an operator of
   autograph_ops.py (``if_stmt``, ``while_stmt``, ``for_stmt``) that builds ``cond``/
   ``while_loop`` when the condition or iterable is a graph tensor and runs the Python as
   written otherwise; ``range``/``enumerate`` in a ``for``, ``len``, ``and``/``or``/
   ``not``/``==``/``!=``/``x if c else y`` become operators that do the same;
4. each local variable starts as an ``Undefined`` and each read of one goes through
   ``ld``, so that a variable a graph branch or loop leaves without a value raises an
   AutographError naming it, the line and the reason when the program reads it.

In a graph loop the loop variables are the state's variables that have a value before it
(a Python number becomes a constant); those without are the iteration's temporaries and
have no value after the loop. A ``return`` inside a graph loop starts its value as zeros of
the dtype and shape a scratch build of the body gives it (when the function returns on
every path). Functions defined inside are rewritten too; functions it calls are not
(decorate them). The rewritten function runs with the original's globals and closure
cells. What it refuses (``try``, ``yield``, ``async``, ``global``/``nonlocal``, ``del`` of a
variable, ``else`` on a loop, ``match``; at run, attribute or item assignment under a tensor
condition) raises an AutographError naming the file, line and function.
``f.autograph_source`` holds the rewritten source.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types
from collections.abc import Callable
from typing import Any

from ..errors import AutographError
from . import autograph_ops

_REFUSED = {
    ast.Try: "`try` statements are not supported",
    ast.Yield: "generators (`yield`) are not supported",
    ast.YieldFrom: "generators (`yield from`) are not supported",
    ast.Await: "`await` is not supported",
    ast.AsyncFunctionDef: "`async def` is not supported",
    ast.AsyncFor: "`async for` is not supported",
    ast.AsyncWith: "`async with` is not supported",
    ast.Global: "`global` is not supported (a graph loop or branch cannot assign a global; "
                "return the value instead)",
    ast.Nonlocal: "`nonlocal` is not supported (a graph loop or branch cannot assign an "
                  "enclosing function's variable; return the value instead)",
}
if hasattr(ast, "TryStar"):
    _REFUSED[ast.TryStar] = "`try` statements are not supported"
if hasattr(ast, "Match"):
    _REFUSED[ast.Match] = "`match` statements are not supported"

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def autograph(fn: Callable | None = None, *, functional: bool | None = None) -> Any:
    """Decorator: ``@B.autograph`` or ``@B.autograph(functional=True)`` (functional
    ``If``/``While`` nodes instead of Switch/Merge; None: as the decorated function that
    calls this one, v1 at the top)."""
    if fn is None:
        return lambda f: autograph(f, functional=functional)
    if getattr(fn, "autograph_source", None) is not None:
        return fn
    converted, source = convert(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        autograph_ops.push_mode(functional)
        try:
            return converted(*args, **kwargs)
        finally:
            autograph_ops.pop_mode()

    wrapper.autograph_source = source  # type: ignore[attr-defined]
    return wrapper


def convert(fn: Callable) -> tuple[Callable, str]:
    """The rewritten function (same globals, closure cells, defaults) and its source."""
    if not inspect.isfunction(fn):
        raise AutographError(f"autograph converts Python functions, not a "
                             f"{type(fn).__name__}")
    code = fn.__code__
    where = f"{code.co_filename}:{code.co_firstlineno} (in {fn.__name__})"
    if getattr(fn, "__wrapped__", None) is not None:
        raise AutographError("autograph must be the innermost decorator: it rewrites the "
                             "source of the function it is given, and this one wraps "
                             f"'{fn.__wrapped__.__name__}'", source=where)
    if fn.__name__ == "<lambda>":
        raise AutographError("autograph cannot convert a lambda: write it with `def`",
                             source=where)
    try:
        lines, first = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or code.co_filename
    except (OSError, TypeError):
        raise AutographError("autograph reads the function's source, and it is not "
                             "available: define the function in a file",
                             source=where) from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, first - 1)
    fdef = tree.body[0]
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise AutographError("`async def` is not supported", source=where)
    if not isinstance(fdef, ast.FunctionDef):
        raise AutographError("autograph needs a function defined with `def`", source=where)
    if fdef.name != fn.__name__ and fn.__name__ == code.co_name:
        # inspect reads the file as it is now, by the line the function started at then
        raise AutographError(f"the source at this line defines '{fdef.name}': the file "
                             "changed since the function was defined", source=where)
    fdef.decorator_list = []
    # defaults and annotations were evaluated when the function was defined: the rewritten
    # one takes the original's values (evaluating them again here would miss its globals)
    fdef.args.defaults, fdef.args.kw_defaults = [], [None] * len(fdef.args.kwonlyargs)
    fdef.returns = None
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs + \
            [x for x in (fdef.args.vararg, fdef.args.kwarg) if x is not None]:
        a.annotation = None
    _Converter(filename).function(fdef, frozenset())
    freevars = list(code.co_freevars)
    factory = ast.FunctionDef(
        name="_ag_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in freevars + ["_ag"]],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    source = ast.unparse(fdef)
    ns: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(module, filename, "exec"), ns)  # noqa: S102 - the user's own function
    inner = ns["_ag_factory"](*([None] * len(freevars)), autograph_ops)
    cells = dict(zip(freevars, fn.__closure__ or ()))
    cells["_ag"] = types.CellType(autograph_ops)
    missing = [n for n in inner.__code__.co_freevars if n not in cells]
    if missing:   # the source read is not this function's (a decorator replaced it)
        raise AutographError(f"the source read for '{fn.__name__}' does not match the "
                             f"function (it needs {', '.join(missing)} from outside)",
                             source=where)
    closure = tuple(cells[n] for n in inner.__code__.co_freevars)
    new = types.FunctionType(inner.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                             closure)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__annotations__ = dict(fn.__annotations__)
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    return new, source


# --- AST helpers --------------------------------------------------------------------------
def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _ag(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name("_ag"), attr=attr, ctx=ast.Load())


def _call(fn: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=fn, args=list(args), keywords=[])


def _const(v: Any) -> ast.Constant:
    return ast.Constant(value=v)


def _assign(id_: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[_name(id_, True)], value=value)


def _lambda(body: ast.expr) -> ast.Lambda:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[],
                                         kw_defaults=[], defaults=[]), body=body)


def _tuple(names: list[str], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=[_name(n, store) for n in names],
                     ctx=ast.Store() if store else ast.Load())


def _def(name: str, params: list[str], body: list[ast.stmt]) -> ast.FunctionDef:
    return ast.FunctionDef(
        name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                      kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body or [ast.Pass()], decorator_list=[], returns=None)


def _walk_scope(node: ast.AST):
    """The nodes of ``node`` that belong to its scope (not inside a nested def, class,
    lambda or comprehension)."""
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _SCOPES):
            todo.extend(ast.iter_child_nodes(n))


def _targets(t: ast.expr, out: set[str]) -> None:
    if isinstance(t, ast.Name):
        out.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            _targets(e, out)
    elif isinstance(t, ast.Starred):
        _targets(t.value, out)


def assigned(stmts: list[ast.stmt]) -> set[str]:
    """The names a block binds in its own scope (the generated ``_agf_`` functions left
    out: they are the statement's code, not its state)."""
    out: set[str] = set()
    for s in stmts:
        for n in [s, *_walk_scope(s)]:
            if isinstance(n, (ast.Assign,)):
                for t in n.targets:
                    _targets(t, out)
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
                _targets(n.target, out)
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                _targets(n.target, out)
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                _targets(n.optional_vars, out)
            elif isinstance(n, ast.NamedExpr):
                _targets(n.target, out)
            elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    out.add(a.asname or a.name.split(".")[0])
    return {n for n in out if not n.startswith("_agf_")}


def _mutations(stmts: list[ast.stmt]) -> list[str]:
    """Attribute and item assignments in a block (``self.x = ...``, ``a[i] += ...``)."""
    out: list[str] = []
    for s in stmts:
        for n in [s, *_walk_scope(s)]:
            targets = n.targets if isinstance(n, ast.Assign) else \
                [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                for e in ([t] if not isinstance(t, (ast.Tuple, ast.List)) else t.elts):
                    if isinstance(e, (ast.Attribute, ast.Subscript)):
                        text = ast.unparse(e)
                        if text not in out:
                            out.append(text)
    return out


def _contains(stmt: ast.stmt, kind: type) -> bool:
    """Whether ``stmt`` holds a ``kind`` statement (Break/Continue: not those of a nested
    loop; they were lowered already)."""
    if isinstance(stmt, kind):
        return True
    return any(isinstance(n, kind) for n in _walk_scope(stmt))


def _always_returns(block: list[ast.stmt]) -> bool:
    for s in block:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and s.orelse and _always_returns(s.body) and \
                _always_returns(s.orelse):
            return True
        if isinstance(s, ast.With) and _always_returns(s.body):
            return True
    return False


def _not_flags(flags: list[str]) -> ast.expr:
    """``not f1 and not f2 ...``"""
    terms = [ast.UnaryOp(op=ast.Not(), operand=_name(f)) for f in flags]
    return terms[0] if len(terms) == 1 else ast.BoolOp(op=ast.And(), values=terms)


class _Converter:
    """Rewrites one decorated function (and the functions defined in it) in place."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.counter = 0      # numbers the generated functions and flags

    def where(self, node: ast.AST, fn: str) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', '?')} (in {fn})"

    def fail(self, msg: str, node: ast.AST, fn: str) -> AutographError:
        return AutographError(msg, source=self.where(node, fn))

    def fresh(self) -> int:
        self.counter += 1
        return self.counter

    # --- one function scope ---------------------------------------------------------------
    def function(self, fdef: ast.FunctionDef, outer_locals: frozenset[str]) -> None:
        fn = fdef.name
        for n in _walk_scope(fdef):
            msg = _REFUSED.get(type(n))
            if msg:
                raise self.fail(msg, n, fn)
            if isinstance(n, ast.Delete) and any(isinstance(t, ast.Name) for t in n.targets):
                raise self.fail("`del` of a variable is not supported", n, fn)
            if isinstance(n, (ast.While, ast.For)) and n.orelse:
                raise self.fail("`else` on a loop is not supported", n, fn)
        a = fdef.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        body = list(fdef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]   # the docstring
        body = self.lower_returns(body, fn)
        body = self.lower_loops(body, fn)
        local = assigned(body) - params
        # reads that may find an Undefined: variables assigned in this function or an
        # enclosing converted one (a parameter never reassigned always has its value)
        body = self.block(body, fn, outer_locals | assigned(body))
        pre = [_assign(n, _call(_ag("Undefined"), _const(n))) for n in sorted(local)]
        fdef.body = pre + body

    # --- return -------------------------------------------------------------------------
    def lower_returns(self, body: list[ast.stmt], fn: str) -> list[ast.stmt]:
        returns = [n for s in body for n in [s, *_walk_scope(s)] if isinstance(n, ast.Return)]
        if not returns or (len(returns) == 1 and body and body[-1] is returns[0]):
            return body
        # a function that returns on every path may start its return value as a stand-in
        # that a graph loop can carry (autograph_ops._with_return_placeholder)
        fill = _always_returns(body)
        new = self._guard(body, ast.Return, "_ag_do_return", fn)
        undefined = _call(_ag("UndefinedReturn"), _const("return value"))
        undefined.keywords.append(ast.keyword(arg="fill", value=_const(fill)))
        return ([_assign("_ag_do_return", _const(False)), _assign("_ag_retval", undefined)]
                + new + [ast.Return(value=_call(_ag("retval"), _name("_ag_retval")))])

    def _guard(self, stmts: list[ast.stmt], kind: type, flag: str, fn: str) -> list[ast.stmt]:
        """``stmts`` with each ``kind`` statement replaced by setting ``flag`` and the
        statements that may follow one run only while the flag is False."""
        out: list[ast.stmt] = []
        stmts = list(stmts)
        i = 0
        while i < len(stmts):
            s = stmts[i]
            rest = stmts[i + 1:]
            if isinstance(s, kind):
                out.append(ast.copy_location(_assign(flag, _const(True)), s))
                if kind is ast.Return:
                    val = s.value if s.value is not None else _const(None)
                    out.append(ast.copy_location(_assign("_ag_retval", val), s))
                return out    # the rest of the block is unreachable
            if not _contains(s, kind):
                out.append(s)
                i += 1
                continue
            if isinstance(s, ast.If):
                if kind is ast.Return and rest and _always_returns(s.body):
                    s.orelse, rest = s.orelse + rest, []
                elif kind is ast.Return and rest and s.orelse and _always_returns(s.orelse):
                    s.body, rest = s.body + rest, []
                s.body = self._guard(s.body, kind, flag, fn)
                s.orelse = self._guard(s.orelse, kind, flag, fn)
            elif isinstance(s, ast.With):
                s.body = self._guard(s.body, kind, flag, fn)
            elif isinstance(s, (ast.While, ast.For)) and kind is ast.Return:
                s.body = self._guard(s.body, kind, flag, fn)
                self._add_exit_flag(s, flag)
            out.append(s)
            if rest:
                test = ast.UnaryOp(op=ast.Not(), operand=_name(flag))
                out.append(ast.copy_location(
                    ast.If(test=test, body=self._guard(rest, kind, flag, fn), orelse=[]),
                    rest[0]))
            return out
        return out

    @staticmethod
    def _add_exit_flag(loop: ast.While | ast.For, flag: str) -> None:
        flags = loop.__dict__.setdefault("_ag_exit_flags", [])
        flags.append(flag)

    # --- break / continue ---------------------------------------------------------------
    def lower_loops(self, stmts: list[ast.stmt], fn: str) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            if isinstance(s, ast.If):
                s.body = self.lower_loops(s.body, fn)
                s.orelse = self.lower_loops(s.orelse, fn)
            elif isinstance(s, ast.With):
                s.body = self.lower_loops(s.body, fn)
            elif isinstance(s, (ast.While, ast.For)):
                s.body = self.lower_loops(s.body, fn)   # inner loops first
                k = self.fresh()
                if any(_contains(b, ast.Continue) for b in s.body):
                    flag = f"_ag_continue_{k}"
                    s.body = [ast.copy_location(_assign(flag, _const(False)), s)] + \
                        self._guard(s.body, ast.Continue, flag, fn)
                if any(_contains(b, ast.Break) for b in s.body):
                    flag = f"_ag_break_{k}"
                    out.append(ast.copy_location(_assign(flag, _const(False)), s))
                    s.body = self._guard(s.body, ast.Break, flag, fn)
                    self._add_exit_flag(s, flag)
            out.append(s)
        return out

    # --- statements ---------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt], fn: str, local: frozenset[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, fn, local))
        return out

    def stmt(self, s: ast.stmt, fn: str, local: frozenset[str]) -> list[ast.stmt]:
        ex = _Exprs(self, fn, local)
        if isinstance(s, ast.FunctionDef):
            s.decorator_list = [ex.visit(d) for d in s.decorator_list]
            s.args = ex.visit(s.args)
            _Converter.function(self, s, local)
            return [s]
        if isinstance(s, ast.ClassDef):
            return [s]
        if isinstance(s, ast.If):
            return self.if_(s, fn, local, ex)
        if isinstance(s, ast.While):
            return self.while_(s, fn, local, ex)
        if isinstance(s, ast.For):
            return self.for_(s, fn, local, ex)
        if isinstance(s, ast.With):
            s.items = [ex.visit(i) for i in s.items]
            s.body = self.block(s.body, fn, local)
            return [s]
        pre: list[ast.stmt] = []
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and \
                s.target.id in local and not s.target.id.startswith("_ag"):
            # `x += 1` reads x: the same check as any read
            pre.append(ast.copy_location(ast.Expr(value=ex.ld(s.target.id, s)), s))
        return pre + [ex.visit(s)]

    def _state(self, body_blocks: list[list[ast.stmt]], local: frozenset[str],
               extra: set[str] | None = None) -> list[str]:
        names: set[str] = set(extra or ())
        for b in body_blocks:
            names |= assigned(b)
        return sorted(n for n in names if n in local or n.startswith("_ag_"))

    def _finish(self, s: ast.stmt, defs: list[ast.stmt], call: ast.Call,
                names: list[str], mutates: list[str]) -> list[ast.stmt]:
        if mutates:
            call.keywords.append(ast.keyword(arg="mutates", value=ast.Tuple(
                elts=[_const(m) for m in mutates], ctx=ast.Load())))
        if names:
            last: ast.stmt = ast.Assign(targets=[_tuple(names, True)], value=call)
        else:
            last = ast.Expr(value=call)
        out = defs + [last]
        for n in out:
            ast.copy_location(n, s)
        return out

    def if_(self, s: ast.If, fn: str, local: frozenset[str], ex: _Exprs) -> list[ast.stmt]:
        k = self.fresh()
        mutates = _mutations(s.body + s.orelse)
        test = ex.visit(s.test)
        body = self.block(s.body, fn, local)
        orelse = self.block(s.orelse, fn, local)
        names = self._state([body, orelse], local)
        ret = ast.Return(value=_tuple(names))
        defs = [_def(f"_agf_then_{k}", names, body + [ret]),
                _def(f"_agf_else_{k}", names, orelse + [ret])]
        call = _call(_ag("if_stmt"), test, _name(f"_agf_then_{k}"), _name(f"_agf_else_{k}"),
                     _tuple(names), ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load()),
                     _const(self.where(s, fn)))
        return self._finish(s, defs, call, names, mutates)

    def while_(self, s: ast.While, fn: str, local: frozenset[str],
               ex: _Exprs) -> list[ast.stmt]:
        k = self.fresh()
        mutates = _mutations(s.body)
        flags = s.__dict__.get("_ag_exit_flags", [])
        test_src = s.test
        if flags:
            test_src = ast.BoolOp(op=ast.And(), values=[_not_flags(flags), s.test])
            ast.copy_location(test_src, s.test)
        test = ex.visit(test_src)
        body = self.block(s.body, fn, local)
        names = self._state([body], local)
        defs = [_def(f"_agf_test_{k}", names, [ast.Return(value=test)]),
                _def(f"_agf_body_{k}", names, body + [ast.Return(value=_tuple(names))])]
        call = _call(_ag("while_stmt"), _name(f"_agf_test_{k}"), _name(f"_agf_body_{k}"),
                     _tuple(names), ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load()),
                     _const(self.where(s, fn)))
        return self._finish(s, defs, call, names, mutates)

    def for_(self, s: ast.For, fn: str, local: frozenset[str], ex: _Exprs) -> list[ast.stmt]:
        k = self.fresh()
        mutates = _mutations([ast.Assign(targets=[s.target], value=_const(None))] + s.body)
        it = s.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
                it.func.id in ("range", "enumerate") and it.func.id not in local:
            it = ast.copy_location(ast.Call(func=_ag(it.func.id + "_"), args=it.args,
                                            keywords=it.keywords), it)
        it = ex.visit(it)
        flags = s.__dict__.get("_ag_exit_flags", [])
        item = f"_ag_item_{k}"
        bind = ast.copy_location(ast.Assign(targets=[s.target], value=_name(item)), s)
        body = [bind] + self.block(s.body, fn, local)
        names = self._state([body], local)
        defs: list[ast.stmt] = []
        extra: ast.expr = _const(None)
        if flags:
            defs.append(_def(f"_agf_extra_{k}", names,
                             [ast.Return(value=ex.visit(_not_flags(flags)))]))
            extra = _name(f"_agf_extra_{k}")
        defs.append(_def(f"_agf_body_{k}", [item] + names,
                         body + [ast.Return(value=_tuple(names))]))
        call = _call(_ag("for_stmt"), it, extra, _name(f"_agf_body_{k}"), _tuple(names),
                     ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load()),
                     _const(self.where(s, fn)))
        return self._finish(s, defs, call, names, mutates)


class _Exprs(ast.NodeTransformer):
    """Expressions: ``and``/``or``/``not``/``==``/``!=``/conditional expressions through
    the operators, reads of local variables through ``ld``."""

    def __init__(self, conv: _Converter, fn: str, local: frozenset[str]) -> None:
        self.conv, self.fn, self.local = conv, fn, local

    def where(self, node: ast.AST) -> ast.Constant:
        return _const(self.conv.where(node, self.fn))

    def ld(self, id_: str, node: ast.AST) -> ast.expr:
        return ast.copy_location(
            _call(_ag("ld"), _name(id_), _const(id_), self.where(node)), node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node   # converted as a scope of its own (block())

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.local and \
                not node.id.startswith("_ag"):
            return self.ld(node.id, node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "len" and \
                "len" not in self.local and len(node.args) == 1 and not node.keywords:
            node.func = ast.copy_location(_ag("len_"), node.func)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        values = [self.visit(v) for v in node.values]
        op = "and_" if isinstance(node.op, ast.And) else "or_"
        acc = values[-1]
        for v in reversed(values[:-1]):
            acc = _call(_ag(op), _lambda(v), _lambda(acc), self.where(node))
        return ast.copy_location(acc, node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        node = self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_ag("not_"), node.operand), node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        node = self.generic_visit(node)
        names = {ast.Eq: "eq", ast.NotEq: "ne"}
        if len(node.ops) == 1:
            op = names.get(type(node.ops[0]))
            if op:
                return ast.copy_location(
                    _call(_ag(op), node.left, node.comparators[0]), node)
            return node
        # a < b < c: pairwise under `and` when the middle terms can be read twice
        terms = [node.left] + node.comparators
        if not all(isinstance(t, (ast.Name, ast.Constant, ast.Call)) and
                   (not isinstance(t, ast.Call) or t.func.__dict__.get("attr") == "ld")
                   for t in terms[1:-1]):
            return node
        pairs: list[ast.expr] = []
        for a, op, b in zip(terms, node.ops, terms[1:]):
            o = names.get(type(op))
            pairs.append(_call(_ag(o), a, b) if o else
                         ast.Compare(left=a, ops=[op], comparators=[b]))
        acc = pairs[-1]
        for p in reversed(pairs[:-1]):
            acc = _call(_ag("and_"), _lambda(p), _lambda(acc), self.where(node))
        return ast.copy_location(acc, node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        node = self.generic_visit(node)
        return ast.copy_location(_call(_ag("if_exp"), node.test, _lambda(node.body),
                                       _lambda(node.orelse), self.where(node)), node)
