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

from typing import Any

import numpy as np

from .. import dtypes as D
from ..frames import SWITCH_OPS
from ..graph import Graph, without_gc
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
NUMERIC = D.FLOATING | D.INTEGER | D.COMPLEX


@without_gc
def run(graph: Graph, options: PassOptions) -> Any:
    s = _Simplifier(graph, options)
    for node in graph.topological_order():
        nd = s.ed.get(node.name)
        if nd is None or s.prot.pinned(node.name):
            continue
        s.visit(nd)
    return s.ed.finish()


class _Simplifier:
    def __init__(self, graph: Graph, options: PassOptions) -> None:
        self.ed = Editor(graph)
        self.prot = Protected(graph, options)
        self.shapes = Shapes(self.ed, self.prot)
        self.options = options
        self.created: set[str] = set()   # constants this pass made (dropped once unread)

    def visit(self, nd: Any) -> None:
        op = nd.op
        t = attr_type(nd)
        if t is None or D.base(t) not in NUMERIC | {D.DT_BOOL}:
            return
        if op in ("Neg", "LogicalNot"):
            self._double_negation(nd)
        elif op in ADD_OPS:
            _ = self._neutral(nd) or self._chain(nd) or self._common_factor(nd)
        elif op == "Mul":
            _ = self._neutral(nd) or self._chain(nd) or self._times_zero(nd)
        elif op in ("Sub", "Div", "RealDiv"):
            self._neutral(nd)
        elif op == "AddN":
            self._common_factor(nd)

    # --- helpers ---------------------------------------------------------------------------
    def const(self, t: tuple[str, int]) -> np.ndarray | None:
        if t[1] != 0 or not is_const(self.ed, self.prot, t[0]):
            return None
        return const_value(self.ed.get(t[0]))

    def is_ref(self, t: tuple[str, int]) -> bool:
        types = output_types(self.ed.get(t[0]))
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
        t = nd.attr["T"].type
        nd.op = "Identity"
        nd.attr.clear()
        nd.attr["T"].type = t
        ed.set_inputs(name, [x], controls)
        return True

    def drop_if_unread(self, name: str) -> None:
        if name in self.created and name in self.ed and not self.ed.readers.get(name):
            self.ed.remove(name)

    def new_const(self, base: str, value: np.ndarray, dtype: int, controls: list[str],
                  device: str, before: str) -> str:
        name = self.ed.unique_name(base)
        self.ed.make_const(name, value, dtype, controls, device, before=before)
        self.created.add(name)
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
            if c is None or c.dtype.kind not in "iufc" or c.size == 0 or not np.all(c == unit):
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
        inner = ed.get(data[0][0])
        if inner is None or inner.op != nd.op or self.prot.is_fed(inner.name):
            return False
        x = ed.data_inputs(inner.name)
        if len(x) != 1 or self.is_ref(x[0]):
            return False
        return self.replace_with(nd, x[0], ed.control_inputs(inner.name))

    def _chain(self, nd: Any) -> bool:
        ed = self.ed
        op = nd.op
        if op not in ADD_OPS and op != "Mul":
            return False
        family = ADD_OPS if op in ADD_OPS else frozenset({"Mul"})
        data = ed.data_inputs(nd.name)
        for ai, ci in ((0, 1), (1, 0)):
            c2 = self.const(data[ci])
            a = data[ai]
            inner = ed.get(a[0])
            if c2 is None or inner is None or a[1] != 0 or inner.op not in family:
                continue
            if attr_type(inner) != attr_type(nd) or inner.device != nd.device:
                continue
            if not self.private(inner.name, nd.name):
                continue
            idata = ed.data_inputs(inner.name)
            for xi, c1i in ((0, 1), (1, 0)):
                c1 = self.const(idata[c1i])
                x = idata[xi]
                if c1 is None or self.const(x) is not None:
                    continue
                shape = broadcast_shapes(c1.shape, c2.shape)
                if shape is None:
                    continue
                size = int(np.prod(shape, dtype=np.int64)) * c1.dtype.itemsize
                if size > self.options.max_const_bytes:
                    continue
                try:
                    combined = evaluate(nd, [c1, c2])[0]
                except EvalError:
                    continue
                c1_name, c2_name = idata[c1i][0], data[ci][0]
                controls = list(dict.fromkeys([*ed.control_inputs(c1_name),
                                               *ed.control_inputs(c2_name)]))
                cname = self.new_const(f"{nd.name}/_combined", combined, nd.attr["T"].type,
                                       controls, nd.device, nd.name)
                ed.set_inputs(nd.name, [x, (cname, 0)],
                              [*ed.control_inputs(nd.name), *ed.control_inputs(inner.name)])
                ed.remove(inner.name)
                self.drop_if_unread(c1_name)
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
                total = c if total is None else evaluate(add, [total, c])[0]
        except EvalError:
            return False
        const_names = list(dict.fromkeys(e[0] for e in coefs if e is not None))
        controls = list(dict.fromkeys(c for n in const_names for c in ed.control_inputs(n)))
        cname = self.new_const(f"{nd.name}/_factor", total, t, controls, nd.device, nd.name)
        carry = [c for m in sorted(muls) for c in ed.control_inputs(m)]
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
        m = ed.get(term[0])
        if m is None or m.op != "Mul" or term[1] != 0 or attr_type(m) != attr_type(nd) \
                or m.device != nd.device:
            return None
        if self.prot.keeps_name(m.name) or self.prot.pinned(m.name) \
                or {r for r, _ in ed.data_readers(m.name)} != {nd.name} \
                or ed.control_readers(m.name):
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
            if xs is None or ed.op(x[0]) in SWITCH_OPS:
                continue
            shape = broadcast_shapes(xs, c.shape)
            if shape is None or any(d is None for d in shape):
                continue
            zeros = np.zeros(shape, dtype=D.to_numpy(t))
            if value_bytes(zeros) > self.options.max_const_bytes:
                continue
            # the zeros still wait for x's producer: its deadness and errors still apply
            controls = [*ed.control_inputs(nd.name), x[0], *ed.control_inputs(data[ci][0])]
            set_const(nd, zeros, t)
            ed.set_inputs(nd.name, [], controls)
            return True
        return False


def _binary_add(nd: Any) -> Any:
    from dfg.schemas import node_def_pb2

    add = node_def_pb2.NodeDef(name=nd.name, op="AddV2")
    add.attr["T"].type = nd.attr["T"].type
    return add
