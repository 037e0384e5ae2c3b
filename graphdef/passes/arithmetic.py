"""Pass ``arithmetic``: algebraic simplifications that remove nodes or work.

- Neutral elements: ``x+0``, ``0+x``, ``x-0``, ``x*1``, ``1*x``, ``x/1`` become ``x``, but only
  when broadcasting cannot change the shape: the constant is a scalar, or ``x``'s static shape
  is known to absorb it (``x + zeros([3])`` with ``x`` of unknown shape may broadcast ``x``).
- Double negation: ``Neg(Neg(x))`` and ``LogicalNot(LogicalNot(x))`` become ``x``.
- Constant chains: ``(x + c1) + c2`` becomes ``x + (c1 + c2)`` and ``(x * c1) * c2`` becomes
  ``x * (c1 * c2)`` when the inner node has no other reader, so a chain of 1000 ``+ 0.5`` is one
  add. Integer arithmetic wraps, so this is exact for integers; for floats it rounds once
  instead of n times (as TensorFlow's Grappler also does).
- Common factor: ``AddN(x*c1, x*c2, ...)`` (or a two-input Add) becomes ``x * (c1+c2+...)``
  when every term is a Mul of the same ``x`` by a constant of one shape, read only there.
- ``x * 0`` becomes zeros only when ``x`` cannot be inf or NaN (integers, or
  ``assume_finite``) and its shape is statically known: ``NaN * 0`` is NaN.

A node whose name is fetched or a target becomes ``Identity(x)`` instead of disappearing;
otherwise its readers read ``x`` and wait for its control inputs and those of the constant it
used (deadness survives). Operands that are refs (a VariableV2 read straight into an op) are
left alone: rewiring would move the read of the variable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as D
from ..graph import Graph, without_gc
from ..op_sets import DEAD_OUTPUT_OPS
from .common import (
    Editor,
    EvalError,
    PassOptions,
    Protected,
    Shapes,
    attr_type,
    broadcast_keeps,
    broadcast_shapes,
    const_value,
    evaluate,
    is_const,
    output_types,
    set_const,
    value_bytes,
)

ADD_OPS = frozenset({"Add", "AddV2"})
FAMILY = {"Add": ADD_OPS, "AddV2": ADD_OPS, "Mul": frozenset({"Mul"})}   # ops a chain mixes
NUMERIC = D.FLOATING | D.INTEGER | D.COMPLEX


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    s = _Simplifier(graph, options)
    # numpy quiet as in kernel_call.run_once (inf from folding overflows is the value)
    with np.errstate(all="ignore"):
        for node in graph.topological_order():
            nd = s.ed.peek(node.name)     # read-only: a rule that rewrites it takes a copy
            if nd is None or s.prot.pinned(node.name):
                continue
            s.visit(nd)
        return s.finish()


class _Simplifier:
    def __init__(self, graph: Graph, options: PassOptions) -> None:
        self.ed = Editor(graph)
        self.prot = Protected(graph, options)
        # a shape query must see a folded chain as it is: rewrite it first
        self.shapes = Shapes(self.ed, self.prot, before=self.settle)
        self.options = options
        self.created: set[str] = set()   # constants this pass made (dropped once unread)
        # decoded constants by node name: a chain reads the same Const at every link
        self.values: dict[str, np.ndarray | None] = {}
        # constants made here, encoded once at the end: folding a chain of n links makes n
        # of them and drops all but the last
        self.pending: dict[str, tuple[np.ndarray, int]] = {}
        self.kernel_ok: set[tuple[str, int]] = set()   # (op, T) our kernel evaluated
        # chain links folded but not yet rewritten (see _Fold): node -> its fold
        self.folds: dict[str, _Fold] = {}

    def finish(self) -> Any:
        for name in list(self.folds):
            self.settle(name)
        for name, (value, dtype) in self.pending.items():
            if name in self.ed:
                set_const(self.ed.get(name), value, dtype)
        return self.ed.finish()

    def visit(self, nd: Any) -> None:
        pending = [s for s, _ in self.ed.data_inputs(nd.name) if s in self.folds] \
            if self.folds else ()
        if pending:
            # only the next link of a chain (_chain) may read a fold before it is rewritten
            family = FAMILY.get(nd.op)
            for s in pending:
                if family is None or self.folds[s].op not in family or len(pending) > 1:
                    self.settle(s)
        self._visit(nd)
        for s in pending:
            self.settle(s)

    def _visit(self, nd: Any) -> None:
        op = nd.op
        t = attr_type(nd)
        if t is None or D.base(t) not in NUMERIC | {D.DT_BOOL}:
            return
        if op in ("Neg", "LogicalNot"):
            self._double_negation(nd)
        elif op in ADD_OPS:
            _ = self._neutral(nd) or self._chain(nd) or self._settled(nd) \
                or self._common_factor(nd)
        elif op == "Mul":
            _ = self._neutral(nd) or self._chain(nd) or self._settled(nd) \
                or self._times_zero(nd)
        elif op in ("Sub", "Div", "RealDiv"):
            self._neutral(nd)
        elif op == "AddN":
            self._common_factor(nd)

    # --- helpers ---------------------------------------------------------------------------
    def const(self, t: tuple[str, int]) -> np.ndarray | None:
        if t[1] != 0 or not is_const(self.ed, self.prot, t[0]):
            return None
        name = t[0]
        if name in self.values:
            return self.values[name]
        v = self.values[name] = const_value(self.ed.peek(name))
        return v

    def combine(self, nd: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """What ``nd``'s kernel (Add, AddV2 or Mul) gives for constants ``a`` and ``b``: numpy
        directly once the kernel has accepted this op and dtype (it is the same ufunc, result
        cast to the input dtype), else the kernel itself (EvalError: do not fold)."""
        key = (nd.op, D.base(nd.attr["T"].type))
        if key in self.kernel_ok and a.dtype == b.dtype and a.dtype.kind in "fiuc" \
                and a.dtype == D.to_numpy(key[1]):
            r = (np.multiply if nd.op == "Mul" else np.add)(a, b)   # numpy quiet: see run
            return np.asarray(r, dtype=a.dtype)
        r = evaluate(nd, [a, b])[0]
        self.kernel_ok.add(key)
        return r

    def is_ref(self, t: tuple[str, int]) -> bool:
        types = output_types(self.ed.peek(t[0]))
        return types is None or t[1] >= len(types) or D.is_ref(types[t[1]])

    def private(self, name: str, reader: str) -> bool:
        """``name`` may be rewritten away: not protected, read once (by ``reader``), by data."""
        ed = self.ed
        return (not self.prot.keeps_name(name) and not self.prot.pinned(name)
                and [r for r, _ in ed.data_readers(name)] == [reader]
                and not ed.control_readers(name))

    def replace_with(self, nd: Any, x: tuple[str, int], extra: list[str]) -> bool:
        """``nd`` computes ``x``: drop it (readers read x) or, if its name must stay, make it
        ``Identity(x)``."""
        ed = self.ed
        name = nd.name
        if not self.prot.keeps_name(name) and ed.bypass(name, x, extra):
            return True
        controls = [*ed.control_inputs(name), *extra]
        nd = ed.get(name)
        t = nd.attr["T"].type
        nd.op = "Identity"
        nd.attr.clear()
        nd.attr["T"].type = t
        ed.set_inputs(name, [x], controls)
        return True

    def drop_if_unread(self, name: str) -> None:
        if name in self.created and name in self.ed and not self.ed.readers.get(name):
            self.ed.remove(name)
            self.pending.pop(name, None)

    def new_const(self, base: str, value: np.ndarray, dtype: int, controls: list[str],
                  device: str, before: str) -> str:
        name = self.ed.unique_name(base)
        self.ed.make_const(name, value, dtype, controls, device, before=before, encode=False)
        self.created.add(name)
        self.values[name] = value
        self.pending[name] = (value, dtype)
        return name

    # --- rules -----------------------------------------------------------------------------
    def _neutral(self, nd: Any) -> bool:
        data = self.ed.data_inputs(nd.name)
        if len(data) != 2:
            return False
        op = nd.op
        if op in ADD_OPS:
            pairs, unit = [(0, 1), (1, 0)], 0
        elif op == "Sub":
            pairs, unit = [(0, 1)], 0
        elif op == "Mul":
            pairs, unit = [(0, 1), (1, 0)], 1
        else:  # Div, RealDiv: x / 1
            pairs, unit = [(0, 1)], 1
        for xi, ci in pairs:
            c = self.const(data[ci])
            if c is None or c.dtype.kind not in "iufc" or c.size == 0 or not (c == unit).all():
                continue
            x = data[xi]
            if self.is_ref(x) or not broadcast_keeps(self.shapes.of(x), c.shape):
                continue
            return self.replace_with(nd, x, self.ed.control_inputs(data[ci][0]))
        return False

    def _double_negation(self, nd: Any) -> bool:
        ed = self.ed
        data = ed.data_inputs(nd.name)
        if len(data) != 1:
            return False
        inner = ed.peek(data[0][0])
        if inner is None or inner.op != nd.op or self.prot.is_fed(inner.name):
            return False
        x = ed.data_inputs(inner.name)
        if len(x) != 1 or self.is_ref(x[0]):
            return False
        return self.replace_with(nd, x[0], ed.control_inputs(inner.name))

    def settle(self, name: str) -> None:
        """Rewrite the folded chain ending at ``name`` (if any) as ``x + c`` (``x * c``), as
        folding it link by link would have left it."""
        f = self.folds.pop(name, None)
        if f is None:
            return
        ed = self.ed
        nd = ed.peek(name)
        cname = self.new_const(f"{name}/_combined", f.value, nd.attr["T"].type,
                               f.const_controls, nd.device, name)
        ed.set_inputs(name, [f.x, (cname, 0)], f.controls)
        for link in f.links:
            ed.remove(link)
        self.drop_if_unread(f.c0)

    def _settled(self, nd: Any) -> bool:
        """Settle the folds ``nd`` reads before the rules that look through them; False."""
        if self.folds:
            for s, _ in self.ed.data_inputs(nd.name):
                self.settle(s)
        return False

    def _chain(self, nd: Any) -> bool:
        """``(x + c1) + c2`` -> ``x + (c1 + c2)`` (Mul alike), the inner node read only here.

        Not rewritten at once: ``nd`` is recorded as a fold (:class:`_Fold`) that the next
        link extends, so a chain of n links costs n cheap steps and one rewrite (by
        :meth:`settle`, before anything else looks at it) instead of n rewrites."""
        ed = self.ed
        op = nd.op
        if op not in ADD_OPS and op != "Mul":
            return False
        family = FAMILY[op]
        data = ed.data_inputs(nd.name)
        for ai, ci in ((0, 1), (1, 0)):
            c2 = self.const(data[ci])
            a = data[ai]
            inner = ed.peek(a[0])
            if c2 is None or inner is None or a[1] != 0 or inner.op not in family:
                continue
            if attr_type(inner) != attr_type(nd) or inner.device != nd.device:
                continue
            if not self.private(inner.name, nd.name):
                continue
            fold = self.folds.get(inner.name)
            if fold is not None:
                # inner is x + c1 already (once settled): that is the one way to read it
                candidates = [(fold.x, fold.value, "")]
            else:
                idata = ed.data_inputs(inner.name)
                candidates = [(idata[xi], self.const(idata[c1i]), idata[c1i][0])
                              for xi, c1i in ((0, 1), (1, 0))]
            for x, c1, c1_name in candidates:
                if c1 is None or self.const(x) is not None:
                    continue
                shape = broadcast_shapes(c1.shape, c2.shape)
                if shape is None:
                    continue
                size = math.prod(shape) * c1.dtype.itemsize
                if size > self.options.max_const_bytes:
                    continue
                try:
                    combined = self.combine(nd, c1, c2)
                except EvalError:
                    continue
                c2_controls = ed.control_inputs(data[ci][0])
                own_controls = ed.control_inputs(nd.name)
                if fold is None:
                    fold = _Fold(op, x, combined, [], ed.control_inputs(inner.name), [],
                                 c1_name)
                    c2_controls = [*ed.control_inputs(c1_name), *c2_controls]
                else:     # the inner fold grows by one link (in place: n links, O(n) in all)
                    del self.folds[inner.name]
                    fold.op, fold.value = op, combined
                fold.links.append(inner.name)
                for c in c2_controls:       # the Const's controls, each once, in order
                    if c not in fold.const_seen:
                        fold.const_seen.add(c)
                        fold.const_controls.append(c)
                if own_controls or nd.name in fold.controls or x[0] in fold.controls:
                    # what set_inputs would keep: no self, no data source, no repeats
                    fold.controls = [c for c in dict.fromkeys([*own_controls, *fold.controls])
                                     if c != nd.name and c != x[0]]
                self.folds[nd.name] = fold
                return True
        return False

    def _common_factor(self, nd: Any) -> bool:
        """``AddN(x*c1, x*c2, x, ...)`` -> ``x * (c1 + c2 + 1 + ...)``; a bare ``x`` counts as
        ``x*1`` and a term may repeat."""
        ed = self.ed
        data = ed.data_inputs(nd.name)
        if len(data) < 2:
            return False
        t = nd.attr["T"].type
        x: tuple[str, int] | None = None
        coefs: list[tuple[str, np.ndarray] | None] = []     # None: the term is x itself
        muls: set[str] = set()
        for term in data:
            as_mul = self._mul_by_const(nd, term, x)
            if as_mul is not None:
                xm, cname, c = as_mul
                x = xm if x is None else x
                coefs.append((cname, c))
                muls.add(term[0])
                continue
            if x is None:
                x = term
            if term != x:
                return False
            coefs.append(None)
        if x is None or not muls and len(data) < 2 or self.is_ref(x) or self.const(x) is not None:
            return False
        shapes = {c.shape for e in coefs if e is not None for c in (e[1],)}
        if len(shapes) > 1:
            return False
        shape = shapes.pop() if shapes else ()
        one = np.ones(shape, dtype=D.to_numpy(t))
        add = _binary_add(nd)
        total = None
        try:
            for e in coefs:
                c = one if e is None else e[1]
                total = c if total is None else self.combine(add, total, c)
        except EvalError:
            return False
        const_names = list(dict.fromkeys(e[0] for e in coefs if e is not None))
        controls = list(dict.fromkeys(c for n in const_names for c in ed.control_inputs(n)))
        cname = self.new_const(f"{nd.name}/_factor", total, t, controls, nd.device, nd.name)
        carry = [c for m in sorted(muls) for c in ed.control_inputs(m)]
        nd = ed.get(nd.name)
        nd.op = "Mul"
        nd.attr.clear()
        nd.attr["T"].type = t
        ed.set_inputs(nd.name, [x, (cname, 0)], [*ed.control_inputs(nd.name), *carry])
        for m in muls:
            ed.remove(m)
        for n in const_names:
            self.drop_if_unread(n)
        return True

    def _mul_by_const(self, nd: Any, term: tuple[str, int], x: tuple[str, int] | None
                      ) -> tuple[tuple[str, int], str, np.ndarray] | None:
        """``term`` = ``Mul(x, c)`` (either order), read only by ``nd``: (x, c's name, c)."""
        ed = self.ed
        m = ed.peek(term[0])
        if m is None or m.op != "Mul" or term[1] != 0 or attr_type(m) != attr_type(nd) \
                or m.device != nd.device:
            return None
        # read only by nd, and by data (no control reader): scanning nd's inputs for every
        # term (data_readers) would be quadratic in an AddN's width
        if self.prot.keeps_name(m.name) or self.prot.pinned(m.name) \
                or ed.readers.get(m.name) != {nd.name} or ed.control_readers(m.name):
            return None
        mdata = ed.data_inputs(m.name)
        for xi, ci in ((0, 1), (1, 0)):
            c = self.const(mdata[ci])
            if c is None or self.const(mdata[xi]) is not None:
                continue
            if x is None or mdata[xi] == x:
                return mdata[xi], mdata[ci][0], c
        return None

    def _times_zero(self, nd: Any) -> bool:
        if nd.op != "Mul":
            return False
        t = D.base(nd.attr["T"].type)
        if not (t in D.INTEGER or self.options.assume_finite and t in D.FLOATING):
            return False
        ed = self.ed
        data = ed.data_inputs(nd.name)
        for xi, ci in ((0, 1), (1, 0)):
            c = self.const(data[ci])
            x = data[xi]
            if c is None or c.size == 0 or not np.all(c == 0):
                continue
            xs = self.shapes.fully_known(x)
            if xs is None or ed.op(x[0]) in DEAD_OUTPUT_OPS:
                continue
            shape = broadcast_shapes(xs, c.shape)
            if shape is None or any(d is None for d in shape):
                continue
            zeros = np.zeros(shape, dtype=D.to_numpy(t))
            if value_bytes(zeros) > self.options.max_const_bytes:
                continue
            # the zeros still wait for x's producer: its deadness and errors still apply
            controls = [*ed.control_inputs(nd.name), x[0], *ed.control_inputs(data[ci][0])]
            nd = ed.get(nd.name)
            set_const(nd, zeros, t)
            self.values[nd.name] = zeros
            ed.set_inputs(nd.name, [], controls)
            return True
        return False


@dataclass
class _Fold:
    """A chain link folded but not yet rewritten: it computes ``x op value``. Settling it
    adds the Const (``const_controls``), makes the link read ``x`` and it (waiting for
    ``controls``), removes the ``links`` folded into it and drops ``c0`` (the first link's
    constant) if this pass made it and nothing reads it any more."""

    op: str
    x: tuple[str, int]
    value: np.ndarray
    const_controls: list[str]
    controls: list[str]
    links: list[str]
    c0: str
    const_seen: set[str] = field(default_factory=set)


def _binary_add(nd: Any) -> Any:
    from dfg.schemas import node_def_pb2

    add = node_def_pb2.NodeDef(name=nd.name, op="AddV2")
    add.attr["T"].type = nd.attr["T"].type
    return add
