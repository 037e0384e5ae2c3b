"""Control flow v1 as TensorFlow 1.x builds it: ``cond`` (Switch/Merge with ``switch_t``,
``switch_f`` and ``pred_id``) and ``while_loop`` (Enter/Merge/Switch/LoopCond/Identity/
NextIteration/Exit in a frame), nested freely.

Contexts work as TensorFlow's CondContext and WhileContext do: each keeps the names of the
tensors built inside it; an op built in a context whose input comes from outside gets that
input through a Switch (cond) or a constant Enter (while), made once per context and
reused; an op with no inputs gets a control edge from the context's pivot so that it runs
only when the branch or iteration does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .. import dtypes as D
from ..errors import InvalidArgumentError
from .core import Operation, Tensor, get_default_graph
from .ops import apply_op, convert_to_tensor, identity


def switch(data: Any, pred: Any, name: str | None = None) -> tuple[Tensor, Tensor]:
    """``Switch``: (output_false, output_true); ``RefSwitch`` for a ref (a VariableV2 a
    branch assigns to), as TensorFlow's _SwitchRefOrTensor."""
    op_type = "RefSwitch" if isinstance(data, Tensor) and D.is_ref(data.dtype) else "Switch"
    op = apply_op(op_type, [data, pred], name=name, default_name="Switch")
    return op.outputs[0], op.outputs[1]


def _switch_colocated(data: Tensor, pred: Tensor) -> tuple[Tensor, Tensor]:
    g = get_default_graph()
    with g.colocate_with(data.op, ignore_existing=True):
        return switch(data, pred)


def merge(inputs: list[Any], name: str | None = None) -> tuple[Tensor, Tensor]:
    """``Merge``: (output, value_index)."""
    op = apply_op("Merge", [list(inputs)], name=name, default_name="Merge")
    return op.outputs[0], op.outputs[1]


class _Context:
    def __init__(self) -> None:
        g = get_default_graph()
        self.graph = g
        self.outer = g._ctxt
        self.values: set[str] = set()
        self.external: dict[str, Tensor] = {}
        self._saved: list[Any] = []   # the contexts current before each enter(), a stack

    def enter(self) -> None:
        self._saved.append(self.graph._ctxt)
        self.graph._ctxt = self

    def exit(self) -> None:
        self.graph._ctxt = self._saved.pop()

    def while_context(self) -> WhileContext | None:
        """The innermost while loop this context is in (itself for a loop)."""
        return self.outer.while_context() if self.outer is not None else None

    def add_inner_op(self, op: Operation) -> None:
        for t in op.outputs:
            self.values.add(t.name)
        if self.outer is not None:
            self.outer.add_inner_op(op)

    def control_pivot(self) -> Tensor | None:
        return None

    @contextmanager
    def outside(self, control_deps: bool = False) -> Iterator[None]:
        """Build ops in no context (a Switch or Enter lives outside what it feeds), without
        the caller's control dependencies unless ``control_deps``."""
        g = self.graph
        saved, g._ctxt = g._ctxt, None
        try:
            if control_deps:
                yield
            else:
                with g.control_dependencies(None):
                    yield
        finally:
            g._ctxt = saved

    def adopt_external(self, val: Tensor, made: Tensor) -> Tensor:
        """``made`` (a Switch or Enter output built outside) stands for ``val`` in here."""
        made.op.ctxt = self
        if self.outer is not None:
            self.outer.add_inner_op(made.op)
        self.values.add(made.name)
        self.external[val.name] = made
        return made


class CondContext(_Context):
    def __init__(self, pred: Tensor, pivot: Tensor, branch: int) -> None:
        super().__init__()
        self.pred, self.pivot, self.branch = pred, pivot, branch
        self.values.update({pred.name, pivot.name})
        self.external[pred.name] = pred
        pivot.op.ctxt = self

    def control_pivot(self) -> Tensor:
        return self.pivot

    def add_value(self, val: Tensor) -> Tensor:
        if val.name in self.values:
            return self.external.get(val.name, val)
        self.values.add(val.name)
        result = val
        if self.outer is not None:
            result = self.outer.add_value(val)
            self.values.add(result.name)
            self.external[result.name] = result
        with self.outside():   # the Switch itself lives outside the branch
            made = _switch_colocated(result, self.pred)[self.branch]
        return self.adopt_external(val, made)

    def add_op(self, op: Operation) -> None:
        self._add_op_internal(op)

    def _add_op_internal(self, op: Operation) -> None:
        if not op.inputs:
            if not op.control_inputs or not any(c.ctxt is self for c in op.control_inputs):
                op._add_control_input(self.pivot.op)
        else:
            for i, x in enumerate(op.inputs):
                real = self.add_value(x)
                if real is not x:
                    op.inputs[i] = real
        for t in op.outputs:
            self.values.add(t.name)
        if self.outer is not None:
            self.outer.add_inner_op(op)

    def build_branch(self, fn: Callable[[], Any]) -> Any:
        res = fn()
        if res is None:
            raise InvalidArgumentError("a cond branch must return tensors")
        flat, pack = _flatten(res)
        out = []
        for v in flat:
            if isinstance(v, Operation):
                from .ops import with_dependencies
                out.append(with_dependencies([v], self.pivot))
                continue
            v = convert_to_tensor(v)
            out.append(self._process_output(v))
        return out, pack

    def _process_output(self, v: Tensor) -> Tensor:
        if v.name not in self.values:
            self.values.add(v.name)
            real = v
            if self.outer is not None:
                real = self.outer.add_value(v)
            with self.outside(control_deps=True):
                real = _switch_colocated(real, self.pred)[self.branch]
            # the Switch belongs to the enclosing context (a loop's frame): registered there,
            # as an op built inside it, it gets the loop's Enter for outside inputs
            real.op.ctxt = self.outer
            if self.outer is not None:
                self.outer.add_inner_op(real.op)
            self.external[v.name] = real
            return real
        return self.external.get(v.name, v)


def _flatten(x: Any) -> tuple[list[Any], Any]:
    if isinstance(x, (list, tuple)):
        return list(x), type(x)
    return [x], None


def _pack(flat: list[Any], pack: Any) -> Any:
    if pack is None:
        return flat[0]
    return pack(flat)


def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any],
         name: str | None = None, functional: bool = False) -> Any:
    """``tf.compat.v1.cond`` (control flow v1): both branches are built; Merge picks the
    value of the branch that ran. ``functional=True``: one ``StatelessIf``/``If`` node with
    the branches as library functions, as TensorFlow 2 builds it (functional.py)."""
    if functional:
        from .functional import functional_cond
        return functional_cond(pred, true_fn, false_fn, name=name)
    g = get_default_graph()
    with g.name_scope(name, "cond") as scope:
        pred = convert_to_tensor(pred)
        p_2, p_1 = switch(pred, pred)
        pivot_1 = identity(p_1, name="switch_t")
        pivot_2 = identity(p_2, name="switch_f")
        pred_id = identity(pred, name="pred_id")
        ctx_t = CondContext(pred_id, pivot_1, 1)
        ctx_t.enter()
        try:
            res_t, pack_t = ctx_t.build_branch(true_fn)
        finally:
            ctx_t.exit()
        ctx_f = CondContext(pred_id, pivot_2, 0)
        ctx_f.enter()
        try:
            res_f, pack_f = ctx_f.build_branch(false_fn)
        finally:
            ctx_f.exit()
        if len(res_t) != len(res_f):
            raise InvalidArgumentError(
                f"cond branches return different structures: {len(res_t)} vs {len(res_f)}",
                node=scope[:-1], op="Merge")
        merges = [merge([f, t])[0] for f, t in zip(res_f, res_t)]
        return _pack(merges, pack_t)


def is_loop_constant_enter(op: Operation) -> bool:
    return op.type in ("Enter", "RefEnter") and bool(op.get_attr("is_constant"))


def is_loop_exit(op: Operation) -> bool:
    return op.type in ("Exit", "RefExit")


def output_context(op: Operation) -> Any:
    """The context an op's outputs live in: a loop Exit's outputs are outside its loop."""
    ctxt = op.ctxt
    if ctxt is not None and is_loop_exit(op):
        ctxt = ctxt.outer
    return ctxt


class WhileContext(_Context):
    """One while loop's frame. ``grad_state`` is set on the backward loop that
    ``gradients`` builds for a forward loop (control_flow_grad.py): a forward value used in
    there is then read back from a stack, one entry per forward iteration."""

    def __init__(self, name: str, parallel_iterations: int, grad_state: Any = None) -> None:
        super().__init__()
        self.grad_state = grad_state
        self.name = name
        self.parallel_iterations = parallel_iterations
        self.pivot: Tensor | None = None
        self.pivot_for_pred: Tensor | None = None
        self.pivot_for_body: Tensor | None = None
        self.enters: list[Tensor] = []
        self.exits: list[Tensor] = []

    def while_context(self) -> WhileContext:
        return self

    def control_pivot(self) -> Tensor | None:
        return self.pivot_for_body if self.pivot_for_body is not None else self.pivot_for_pred

    def _enter(self, x: Tensor, is_constant: bool, name: str | None = None) -> Tensor:
        # a ref (a VariableV2 an op in the loop assigns to) enters as a ref, as TensorFlow's
        # _Enter does: a plain Enter would hand the loop a copy, and Assign needs the ref
        op_type = "RefEnter" if D.is_ref(x.dtype) else "Enter"
        return apply_op(op_type, [x], {"frame_name": self.name, "is_constant": is_constant,
                                       "parallel_iterations": self.parallel_iterations},
                        name=name, default_name="Enter").outputs[0]

    def add_value(self, val: Tensor) -> Tensor:
        if val.name in self.values or val.op.ctxt is self:
            return self.external.get(val.name, val)
        self.values.add(val.name)
        # in a backward loop, a value of its forward loop is that iteration's value, kept
        # in a stack by the forward loop (TensorFlow's GetRealValue)
        cur = self.graph._ctxt
        cur = cur.while_context() if cur is not None else None
        if cur is not None and cur.grad_state is not None:
            fwd = val.op.ctxt.while_context() if val.op.ctxt is not None else None
            if fwd is not None and is_loop_exit(val.op):
                fwd = fwd.outer.while_context() if fwd.outer is not None else None
            if fwd is not None and fwd is cur.grad_state.forward_context:
                real = cur.grad_state.get_real_value(val)
                self.external[val.name] = real
                return real
        result = val
        if self.outer is not None:
            result = self.outer.add_value(val)
        with self.outside():
            enter = self._enter(result, True)
        return self.adopt_external(val, enter)

    def add_op(self, op: Operation) -> None:
        # a Shape, Size or Rank built in a backward loop, of a value of its forward loop, is
        # moved to the forward loop: the stack then keeps the shape, not the value
        # (TensorFlow's WhileContext.AddOp)
        if op.type in ("Shape", "Size", "Rank") and op.inputs:
            cur = self.graph._ctxt
            cur = cur.while_context() if cur is not None else None
            src = op.inputs[0].op.ctxt
            if (cur is not None and cur.grad_state is not None and src is not None
                    and src.while_context() is cur.grad_state.forward_context):
                op.ctxt = src
                src._add_op_internal(op)
                return
        self._add_op_internal(op)

    def _add_op_internal(self, op: Operation) -> None:
        if not op.inputs:
            if not op.control_inputs:
                op._add_control_input(self.control_pivot().op)
        else:
            for i, x in enumerate(op.inputs):
                real = self.add_value(x)
                if real is not x:
                    op.inputs[i] = real
            # an op whose inputs are all loop constants would run once, outside the
            # iterations: tie it to the pivot (TensorFlow's _MaybeAddControlDependency)
            free = not op.control_inputs and all(
                is_loop_constant_enter(t.op) for t in op.inputs)
            if free:
                op._add_control_input(self.control_pivot().op)
        for t in op.outputs:
            self.values.add(t.name)
        if self.outer is not None:
            self.outer.add_inner_op(op)

    def build_loop(self, cond_fn: Callable, body: Callable, loop_vars: list[Tensor]) -> list:
        g = self.graph
        self.values = {x.name for x in loop_vars}
        real_vars = loop_vars
        if self.outer is not None:
            real_vars = [self.outer.add_value(x) for x in loop_vars]
        with self.outside():
            enters = [self._enter(x, False) for x in real_vars]
        for e in enters:
            e.op.ctxt = self
            if self.outer is not None:
                self.outer.add_inner_op(e.op)
        # Enters of loop constants inside an outer loop or branch run with its pivot
        outer, pivot = self.outer, None
        while outer is not None and pivot is None:
            pivot = outer.control_pivot()
            outer = outer.outer
        if pivot is not None:
            for e in enters:
                src = e.op.inputs[0].op
                if is_loop_constant_enter(src):
                    e.op._add_control_input(pivot.op)
        self.values = {x.name for x in enters}
        self.enters = enters
        merges = [merge([x, x])[0] for x in enters]
        self.pivot_for_pred = merges[0]
        c = convert_to_tensor(cond_fn(*merges))
        self.pivot = apply_op("LoopCond", [c], name="LoopCond").outputs[0]
        switches = []
        for m in merges:
            with g.colocate_with(m.op, ignore_existing=True):
                switches.append(switch(m, self.pivot))
        body_vars = [identity(s[1]) for s in switches]
        self.pivot_for_body = body_vars[0]
        res = body(*body_vars)
        flat, _ = _flatten(res)
        if len(flat) != len(merges):
            raise InvalidArgumentError(
                f"while_loop body returns {len(flat)} values for {len(merges)} loop variables",
                node=self.name)
        for m, v in zip(merges, flat):
            v = convert_to_tensor(v)
            nxt = apply_op("NextIteration", [v], default_name="NextIteration").outputs[0]
            m.op.inputs[1] = nxt
        exits = [apply_op("Exit", [s[0]], default_name="Exit").outputs[0] for s in switches]
        self.exits = exits
        if self.outer is not None:
            for e in exits:
                self.outer.values.add(e.name)
        return exits


def while_loop(cond: Callable, body: Callable, loop_vars: Any, parallel_iterations: int = 10,
               name: str | None = None, functional: bool = False) -> Any:
    """``tf.compat.v1.while_loop`` (control flow v1). ``loop_vars`` is a list or tuple (a
    one-element list gives a single tensor back, as TensorFlow does) or one tensor.
    ``functional=True``: one ``StatelessWhile``/``While`` node with the condition and body as
    library functions, as TensorFlow 2 builds it (functional.py)."""
    g = get_default_graph()
    single = not isinstance(loop_vars, (list, tuple))
    flat = [loop_vars] if single else list(loop_vars)
    if not flat:
        raise InvalidArgumentError("while_loop needs at least one loop variable")
    if functional:
        from .functional import functional_while
        exits = functional_while(cond, body, flat, parallel_iterations, name=name)
        if single or len(exits) == 1:
            return exits[0]
        return type(loop_vars)(exits) if isinstance(loop_vars, tuple) else exits
    with g.name_scope(name, "while") as scope:
        flat = [convert_to_tensor(v) for v in flat]
        ctx = WhileContext(scope + "while_context", parallel_iterations)
        ctx.enter()
        try:
            exits = ctx.build_loop(cond, body, flat)
        finally:
            ctx.exit()
    if single or len(exits) == 1:
        return exits[0]
    return type(loop_vars)(exits) if isinstance(loop_vars, tuple) else exits
