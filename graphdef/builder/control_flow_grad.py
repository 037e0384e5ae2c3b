"""Gradients through ``while_loop`` (control flow v1) whose trip count is a run-time value,
built as TensorFlow 1.x builds them (its control_flow_state.py and control_flow_grad.py).

For each forward loop on the path from xs to ys, ``gradients`` makes a ``GradLoopState``:

- a forward loop counter added to the forward loop (``gradients/f_count``: Enter, Merge,
  Switch, ``Add``, NextIteration, Exit) that counts its iterations;
- a backward loop in its own frame (``gradients/<loop>/while_context``) whose counter
  (``gradients/b_count``) starts at that count and runs down to 0: one backward iteration
  per forward iteration, 0 for a loop that ran 0 times;
- for each forward value a gradient needs, a stack (``StackV2 f_acc``): the forward loop
  pushes the value every iteration (``StackPushV2``, ordered before the counter's next
  iteration), the backward loop pops it (``StackPopV2``, ordered after the backward
  counter's step, and before its next one through ``b_sync``). A loop invariant (a constant
  ``Enter``) needs no stack: the backward loop enters the same outside value; a ``Const``
  is copied into the backward loop;
- for each loop invariant that gets a gradient, an accumulator loop variable in the backward
  loop (``b_acc``) summing the per-iteration gradients.

The gradient rules of the frame ops turn the loop around: an ``Exit``'s gradient enters the
backward loop (``b_exit``), a loop ``Switch``'s gradient is a ``Merge`` (``b_switch``) whose
back edge is set when the gradient from the body arrives, a ``Merge``'s gradient is a
``Switch`` on the backward loop's predicate, ``NextIteration`` passes its gradient on, and a
loop variable's ``Enter`` gets an ``Exit`` of the backward loop. A ``cond`` inside the loop
keeps its predicate in a stack too, so the backward ``Switch`` picks the branch that ran.

Nested loops nest the same way: the inner loop's counter (and any inner value) is pushed by
the outer forward loop and popped by the outer backward loop once per outer iteration.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import UnimplementedError
from .control_flow import (
    CondContext,
    WhileContext,
    _switch_colocated,
    is_loop_constant_enter,
    is_loop_exit,
    merge,
    output_context,
    switch,
)
from .core import Operation, Tensor, get_default_graph
from .ops import apply_op, constant
from .shapes import const_value


def _o(op: Operation) -> Tensor:
    return op.outputs[0]


def while_context_of(op: Operation) -> WhileContext | None:
    return op.ctxt.while_context() if op.ctxt is not None else None


def is_loop_switch(op: Operation) -> bool:
    return op.type in ("Switch", "RefSwitch") and isinstance(op.ctxt, WhileContext)


def _static(t: Tensor) -> tuple | None:
    s = t.shape
    return None if s is None or None in s else tuple(s)


def _loop_constant_enter(t: Tensor) -> Operation | None:
    """The constant Enter ``t`` comes from through identities and switches, or None."""
    op = t.op
    while op.type in ("Switch", "RefSwitch", "Identity", "RefIdentity"):
        op = op.inputs[0].op
    return op if is_loop_constant_enter(op) else None


def _zeros_const(shape: tuple, dtype: int, name: str = "Const") -> Tensor:
    return constant(np.zeros(shape, D.to_numpy(D.base(dtype))), name=name)


def _zeros_of_shape(shape_t: Tensor, dtype: int) -> Tensor:
    """``array_ops.zeros(shape_tensor)``: ``Fill`` named ``zeros``."""
    g = get_default_graph()
    with g.name_scope(None, "zeros") as scope:
        z = constant(np.zeros((), D.to_numpy(D.base(dtype))))
        return _o(apply_op("Fill", [shape_t, z], name=scope))


def _shape(t: Tensor) -> Tensor:
    """``shape_internal(optimize=False)``: always a ``Shape`` op."""
    return _o(apply_op("Shape", [t], {"out_type": D.from_name("int32")}))


def _control_trigger(name: str) -> Operation:
    """Made in no context, as TensorFlow's ``control_dependencies(None)`` leaves it."""
    g = get_default_graph()
    saved, g._ctxt = g._ctxt, None
    try:
        with g.control_dependencies(None):
            return apply_op("ControlTrigger", [], name=name)
    finally:
        g._ctxt = saved


def _next_iteration(v: Tensor) -> Tensor:
    return _o(apply_op("NextIteration", [v], default_name="NextIteration"))


def _exit(v: Tensor, name: str | None = None) -> Tensor:
    return _o(apply_op("Exit", [v], name=name, default_name="Exit"))


def _exit_result(ctxt: WhileContext, results: list[Tensor]) -> None:
    if ctxt.outer is not None:
        for r in results:
            ctxt.outer.values.add(r.name)


class GradLoopState:
    """The backward loop of one forward loop, and what connects them (stacks, counters)."""

    def __init__(self, forward_ctxt: WhileContext, outer_grad_state: GradLoopState | None
                 ) -> None:
        g = get_default_graph()
        self.outer_grad_state = outer_grad_state
        self.forward_context = forward_ctxt
        self.history_map: dict[str, Tensor] = {}
        self.switch_map: dict[int, Tensor] = {}   # id(forward loop Switch) -> b_switch Merge
        self.unused_exits: list[Tensor] = []
        self.deferred_exits: list[Tensor] = []
        self.forward_loop_exits = list(forward_ctxt.exits)
        self.pending_exits_count = len(forward_ctxt.exits)
        self._forward_sync: Operation | None = None
        self._grad_sync: Operation | None = None
        outer_forward = (outer_grad_state.forward_context if outer_grad_state is not None
                         else forward_ctxt.outer)
        if outer_forward is not None:
            outer_forward.enter()
        try:
            cnt, self.forward_index = _add_forward_loop_counter(forward_ctxt,
                                                                outer_grad_state)
        finally:
            if outer_forward is not None:
                outer_forward.exit()
        name = g.unique_name(forward_ctxt.name)
        if outer_grad_state is not None:
            # a nested loop: the count of every run of it is pushed by the outer loop
            outer_forward.values.add(cnt.name)
            history_cnt = outer_grad_state.add_forward_accumulator(cnt)
            outer_grad_ctxt = outer_grad_state.grad_context
            outer_grad_ctxt.enter()
            try:
                self.grad_context = WhileContext(name, forward_ctxt.parallel_iterations,
                                                 grad_state=self)
                real_cnt = outer_grad_state.add_backprop_accumulated_value(history_cnt, cnt)
                self.grad_index = _add_backprop_loop_counter(self.grad_context, real_cnt,
                                                             outer_grad_state)
            finally:
                outer_grad_ctxt.exit()
        else:
            if outer_forward is not None:
                outer_forward.enter()
            try:
                self.grad_context = WhileContext(name, forward_ctxt.parallel_iterations,
                                                 grad_state=self)
                self.grad_index = _add_backprop_loop_counter(self.grad_context, cnt, None)
            finally:
                if outer_forward is not None:
                    outer_forward.exit()

    # --- sync points -----------------------------------------------------------------------
    @property
    def forward_sync(self) -> Operation:
        """Orders pushes made inside a cond branch before the forward counter's next step."""
        if self._forward_sync is None:
            self._forward_sync = _control_trigger("f_sync")
            self._forward_sync.ctxt = self.forward_context
            self.forward_index.op._add_control_input(self._forward_sync)
        return self._forward_sync

    @property
    def grad_sync(self) -> Operation:
        """Orders every pop of one backward iteration before the counter's next step."""
        if self._grad_sync is None:
            self._grad_sync = _control_trigger("b_sync")
            self._grad_sync.ctxt = self.grad_context
            self.grad_index.op._add_control_input(self._grad_sync)
            if self.grad_context.outer is not None:
                self.grad_context.outer.add_inner_op(self._grad_sync)
        return self._grad_sync

    # --- stacks ----------------------------------------------------------------------------
    def add_forward_accumulator(self, value: Tensor, dead_branch: bool = False) -> Tensor:
        """A stack the forward loop pushes ``value`` onto every iteration (``f_acc``)."""
        g = get_default_graph()
        with g.control_dependencies(None):
            with g.colocate_with(value.op):
                max_size = constant(np.int32(-1))
                acc = _o(apply_op("StackV2", [max_size], {
                    "elem_type": D.base(value.dtype), "stack_name": ""}, name="f_acc"))
            enter_acc = self.forward_context.add_value(acc)
            value_ctxt = output_context(value.op)
            if value_ctxt is self.forward_context:
                self.forward_context.enter()
                try:
                    push = apply_op("StackPushV2", [enter_acc, value], {"swap_memory": False})
                finally:
                    self.forward_context.exit()
                self.forward_index.op._add_control_input(push)
            else:
                if not isinstance(value_ctxt, CondContext):
                    raise UnimplementedError(
                        f"gradient through a while loop: the value {value.name} lives in "
                        "neither the loop nor a cond inside it", node=value.op.name,
                        op=value.op.type)
                if dead_branch:
                    # zeros for the branch that did not run: pushed outside the branch
                    value_ctxt.outer.enter()
                    try:
                        push = apply_op("StackPushV2", [enter_acc, value],
                                        {"swap_memory": False})
                    finally:
                        value_ctxt.outer.exit()
                    push.ctxt = value_ctxt
                else:
                    value_ctxt.enter()
                    try:
                        push = apply_op("StackPushV2", [enter_acc, value],
                                        {"swap_memory": False})
                    finally:
                        value_ctxt.exit()
                self.forward_sync._add_control_input(push)
            # after the counter's increment: the pushes of one iteration stay in order
            push._add_control_input(self.forward_index.op.inputs[0].op)
        return acc

    def add_backprop_accumulated_value(self, history: Tensor, value: Tensor,
                                       dead_branch: bool = False) -> Tensor:
        """The pop, in the backward loop, of the stack ``history`` keeps ``value`` in."""
        g = get_default_graph()
        history_ctxt = history.op.ctxt
        cond_ctxt = None
        value_ctxt = value.op.ctxt
        while value_ctxt is not None and value_ctxt is not history_ctxt:
            if isinstance(value_ctxt, CondContext):
                cond_ctxt = value_ctxt
                break
            value_ctxt = value_ctxt.outer
        with g.control_dependencies(None):
            self.grad_context.enter()
            try:
                if cond_ctxt is not None:
                    # a value of a cond branch was pushed only when the branch ran
                    state, pred = self, None
                    while pred is None and state is not None:
                        pred = state.history_map.get(cond_ctxt.pred.name)
                        state = state.outer_grad_state
                    if pred is None:
                        pred = cond_ctxt.pred
                    branch = (1 - cond_ctxt.branch) if dead_branch else cond_ctxt.branch
                    history = _switch_colocated(history, pred)[branch]
                pop = _o(apply_op("StackPopV2", [history], {"elem_type": D.base(value.dtype)}))
                pop.shape = value.shape
            finally:
                self.grad_context.exit()
        if self.grad_context.parallel_iterations > 1:
            self.grad_sync._add_control_input(pop.op)
        return pop

    def get_real_value(self, value: Tensor) -> Tensor:
        """What stands for the forward ``value`` in the backward loop (TF's GetRealValue)."""
        real = self.history_map.get(value.name)
        if real is not None:
            return real
        cur_value, cur_state = value, self
        history = None
        while True:
            enter_op = _loop_constant_enter(cur_value)
            if enter_op is not None:
                cur_value = enter_op.inputs[0]
                cur_state = cur_state.outer_grad_state
                if cur_state is None:
                    # invariant of every loop being differentiated: enter it as it is
                    real = self.grad_context.add_value(cur_value)
                    break
            elif cur_value.op.type == "Const":
                real = constant(const_value(cur_value), dtype=D.base(cur_value.dtype))
                break
            else:
                self.grad_context.exit()
                try:
                    history = cur_state.add_forward_accumulator(cur_value)
                finally:
                    self.grad_context.enter()
                break
        if real is None:
            real = cur_state.add_backprop_accumulated_value(history, cur_value)
            if cur_state is not self:
                real = self.grad_context.add_value(real)
        self.history_map[value.name] = real
        return real


def _add_forward_loop_counter(ctxt: WhileContext, outer_grad_state: GradLoopState | None
                              ) -> tuple[Tensor, Tensor]:
    """Count the forward loop's iterations: (the count's Exit, the counter's NextIteration)."""
    n = constant(np.int32(0), name="f_count")
    if outer_grad_state is not None:
        # the pushes of one run of an inner loop stay before those of the next run
        n.op._add_control_input(outer_grad_state.forward_index.op.inputs[0].op)
    ctxt.enter()
    try:
        ctxt.values.add(n.name)
        enter_n = ctxt._enter(n, False, name="f_count")
        ctxt.enters.append(enter_n)
        merge_n = merge([enter_n, enter_n])[0]
        switch_n = switch(merge_n, ctxt.pivot)
        index = _o(apply_op("AddV2", [switch_n[1], np.int32(1)], name="Add"))
        next_n = _next_iteration(index)
        merge_n.op.inputs[1] = next_n
        total = _exit(switch_n[0], name="f_count")
        ctxt.exits.append(total)
        _exit_result(ctxt, [total])
    finally:
        ctxt.exit()
    return total, next_n


def _add_backprop_loop_counter(ctxt: WhileContext, count: Tensor,
                               outer_grad_state: GradLoopState | None) -> Tensor:
    """The backward loop's own frame: run ``count`` times; returns the counter's
    NextIteration (what the per-iteration pops are ordered before)."""
    one = constant(np.int32(1), name="b_count")
    ctxt.enter()
    try:
        ctxt.values.add(count.name)
        enter_count = ctxt._enter(count, False, name="b_count")
        ctxt.enters.append(enter_count)
        merge_count = merge([enter_count, enter_count])[0]
        ctxt.pivot_for_pred = merge_count
        pred = _o(apply_op("GreaterEqual", [merge_count, one]))
        ctxt.pivot = _o(apply_op("LoopCond", [pred], name="b_count"))
        switch_count = switch(merge_count, ctxt.pivot)
        index = _o(apply_op("Sub", [switch_count[1], one]))
        ctxt.pivot_for_body = index
        next_count = _next_iteration(index)
        merge_count.op.inputs[1] = next_count
        final_zero = _exit(switch_count[0], name="b_count")
        ctxt.exits.append(final_zero)
        if outer_grad_state is not None:
            outer_grad_state.grad_sync._add_control_input(final_zero.op)
        _exit_result(ctxt, [final_zero])
    finally:
        ctxt.exit()
    return next_count


def add_backprop_accumulator(ctxt: WhileContext, op: Operation, grad: Tensor) -> Tensor:
    """A loop invariant's gradient: the sum over the backward iterations (``b_acc``)."""
    ctxt.exit()
    try:
        shape = _static(grad)
        if shape is not None:
            if ctxt.outer is not None:
                ctxt.outer.enter()
            try:
                acc = _zeros_const(shape, grad.dtype, name="b_acc")
            finally:
                if ctxt.outer is not None:
                    ctxt.outer.exit()
        else:
            value = op.inputs[0]
            outer = ctxt.outer
            if isinstance(outer, WhileContext) and outer.grad_state is not None:
                # nested: the shape of the invariant in each outer iteration
                fwd = ctxt.grad_state.forward_context
                fwd.outer.enter()
                try:
                    zeros_shape = _shape(value)
                finally:
                    fwd.outer.exit()
                outer_state = ctxt.grad_state.outer_grad_state
                history = outer_state.add_forward_accumulator(zeros_shape)
                outer.enter()
                try:
                    real_shape = outer_state.add_backprop_accumulated_value(history,
                                                                            zeros_shape)
                    acc = _zeros_of_shape(real_shape, grad.dtype)
                finally:
                    outer.exit()
            else:
                if outer is not None:
                    outer.enter()
                try:
                    acc = _zeros_of_shape(_shape(value), grad.dtype)
                finally:
                    if outer is not None:
                        outer.exit()
    finally:
        ctxt.enter()
    ctxt.values.add(acc.name)
    enter_acc = ctxt._enter(acc, False, name="b_acc")
    ctxt.enters.append(enter_acc)
    merge_acc = merge([enter_acc, enter_acc], name="b_acc")[0]
    sw_false, sw_true = switch(merge_acc, ctxt.pivot)
    add_acc = _o(apply_op("AddV2", [sw_true, grad], name="Add"))
    merge_acc.op.inputs[1] = _next_iteration(add_acc)
    result = _exit(sw_false, name="b_acc")
    ctxt.exits.append(result)
    _exit_result(ctxt, [result])
    return result


class ControlFlowState:
    """Every forward loop between xs and ys, with its GradLoopState."""

    def __init__(self) -> None:
        self.map: dict[int, GradLoopState] = {}

    def get_grad_state(self, op: Operation, before: bool) -> GradLoopState | None:
        if before and is_loop_exit(op):
            fwd = op.ctxt.outer
            fwd = fwd.while_context() if fwd is not None else None
        else:
            fwd = while_context_of(op)
        return self.map.get(id(fwd)) if fwd is not None else None

    def add_while_context(self, op: Operation, between_list: list[Operation],
                          between: set[int]) -> None:
        fwd = while_context_of(op)
        if id(fwd) in self.map:
            return
        outer_fwd = fwd.outer.while_context() if fwd.outer is not None else None
        outer_state = self.map.get(id(outer_fwd)) if outer_fwd is not None else None
        state = GradLoopState(fwd, outer_state)
        self.map[id(fwd)] = state
        # every exit of the loop takes part in the backward pass
        for e in state.forward_loop_exits:
            if id(e.op) not in between:
                between.add(id(e.op))
                between_list.append(e.op)

    def enter_grad_context(self, op: Operation, before: bool) -> None:
        state = self.get_grad_state(op, before)
        if state is not None:
            state.grad_context.enter()

    def exit_grad_context(self, op: Operation, before: bool) -> None:
        state = self.get_grad_state(op, before)
        if state is not None:
            state.grad_context.exit()

    def process_unused_loop_exits(self, pending: dict[int, int], to_ops: set[int]
                                  ) -> list[Tensor]:
        exits: list[Tensor] = []
        for state in self.map.values():
            for y in state.forward_loop_exits:
                if pending[id(y.op)] == 0:
                    state.pending_exits_count -= 1
                    if id(y.op) not in to_ops:
                        state.unused_exits.append(y)
                    if state.pending_exits_count == 0:
                        exits.extend(state.unused_exits)
            # a loop variable's Enter is visited even when nothing reaches it, so that the
            # backward loop gets its Exit (TensorFlow does, for higher-order gradients)
            for y in state.forward_context.enters:
                if pending[id(y.op)] == 0:
                    pending[id(y.op)] = 1
        return exits

    def zeros_like_for_exit(self, val: Tensor) -> Tensor:
        fwd = val.op.ctxt
        outer_fwd = fwd.outer.while_context() if fwd.outer is not None else None
        outer_state = self.map.get(id(outer_fwd)) if outer_fwd is not None else None
        shape = _static(val)
        if outer_state is not None:
            if shape is not None:
                outer_state.grad_context.enter()
                try:
                    return _zeros_const(shape, val.dtype, name="zeros")
                finally:
                    outer_state.grad_context.exit()
            fwd.outer.enter()
            try:
                s = _shape(val)
            finally:
                fwd.outer.exit()
            history = outer_state.add_forward_accumulator(s)
            outer_state.grad_context.enter()
            try:
                real = outer_state.add_backprop_accumulated_value(history, s)
                return _zeros_of_shape(real, val.dtype)
            finally:
                outer_state.grad_context.exit()
        if shape is not None:
            return _zeros_const(shape, val.dtype, name="zeros")
        return _o(apply_op("ZerosLike", [val], default_name="zeros_like"))

    def zeros_like(self, op: Operation, index: int, plain: Any) -> Tensor | None:
        """Zeros for output ``index`` of ``op`` that got no gradient, made in the backward
        loop (``plain(op, index)``: the rule outside loops)."""
        if is_loop_switch(op):
            return None
        dead_branch = op.type == "Switch"
        state = self.map.get(id(while_context_of(op))) if op.ctxt is not None else None
        if state is None:
            return plain(op, index)
        op_ctxt = op.ctxt
        val = op.outputs[index]
        shape = _static(val)
        if shape is not None:
            result = _zeros_const(shape, val.dtype)
            if dead_branch:
                pred = state.history_map.get(op_ctxt.pred.name)
                result = _switch_colocated(result, pred)[1 - op_ctxt.branch]
            return result
        if dead_branch:
            pred, branch = op_ctxt.pred, op_ctxt.branch
            op_ctxt.outer.enter()
            try:
                val = _switch_colocated(op.inputs[0], pred)[1 - branch]
                zeros_shape = _shape(val)
            finally:
                op_ctxt.outer.exit()
            val.op.ctxt = op_ctxt
            zeros_shape.op.ctxt = op_ctxt
        else:
            op_ctxt.enter()
            try:
                zeros_shape = _shape(val)
            finally:
                op_ctxt.exit()
        state.grad_context.exit()
        try:
            history = state.add_forward_accumulator(zeros_shape, dead_branch=dead_branch)
        finally:
            state.grad_context.enter()
        real = state.add_backprop_accumulated_value(history, zeros_shape, dead_branch)
        return _zeros_of_shape(real, val.dtype)

    def post_processing(self) -> None:
        """A loop variable whose next value does not depend on its current one: zeros
        flow back for the iterations after the first."""
        for state in self.map.values():
            for b_merge in state.switch_map.values():
                m = b_merge.op
                if m.inputs[0] is not m.inputs[1]:
                    continue
                first = m.inputs[0]
                shape = _static(first)
                if shape is not None:
                    state.grad_context.enter()
                    try:
                        nxt = _next_iteration(_zeros_const(shape, first.dtype))
                    finally:
                        state.grad_context.exit()
                else:
                    outer = state.grad_context.outer
                    if outer is not None:
                        outer.enter()
                    try:
                        z = _zeros_of_shape(_shape(first.op.inputs[0]), first.dtype)
                    finally:
                        if outer is not None:
                            outer.exit()
                    state.grad_context.enter()
                    try:
                        nxt = _next_iteration(z)
                    finally:
                        state.grad_context.exit()
                m.inputs[1] = nxt


# --- gradient rules of the frame ops inside a backward loop -------------------------------------
def current_grad_context() -> WhileContext | None:
    ctxt = get_default_graph()._ctxt
    return ctxt.while_context() if ctxt is not None else None


def _refuse_imported(op: Operation) -> None:
    if not isinstance(op.ctxt, WhileContext):
        raise UnimplementedError(
            "gradient through a loop frame the builder did not build (an imported graph "
            "has no loop contexts): unroll it first (builder.unroll_loops(graph)) or build "
            "the loop with builder.while_loop", node=op.name, op=op.type)


def exit_grad(op: Operation, grad: Any) -> list:
    _refuse_imported(op)
    grad_ctxt = current_grad_context()
    if op.ctxt.grad_state is not None:
        raise UnimplementedError("second-order gradient of a while loop", node=op.name,
                                 op=op.type)
    if not isinstance(grad, Tensor):
        raise UnimplementedError("a sparse gradient leaving a while loop", node=op.name,
                                 op=op.type)
    grad_ctxt.values.add(grad.name)
    result = grad_ctxt._enter(grad, False, name="b_exit")
    grad_ctxt.enters.append(result)
    return [result]


def enter_grad(op: Operation, grad: Any) -> list:
    _refuse_imported(op)
    grad_ctxt = current_grad_context()
    if grad_ctxt is None or grad_ctxt.grad_state is None:
        return [grad]
    if op.get_attr("is_constant"):
        return [add_backprop_accumulator(grad_ctxt, op, grad)]
    result = _exit(grad)
    grad_ctxt.exits.append(result)
    _exit_result(grad_ctxt, [result])
    return [result]


def loop_switch_grad(op: Operation, g0: Any, g1: Any) -> list:
    grad_ctxt = current_grad_context()
    state = grad_ctxt.grad_state
    merge_grad = state.switch_map.get(id(op))
    if merge_grad is not None:
        # second visit, from the body: the gradient of the next iteration's value
        if g1 is not None:
            merge_grad.op.inputs[1] = _next_iteration(g1)
        return [None, None]
    if g0 is not None:
        # first visit, from the Exit: the back edge is set on the second visit
        merge_grad = merge([g0, g0], name="b_switch")[0]
        state.switch_map[id(op)] = merge_grad
        return [merge_grad, None]
    return [None, None]


def loop_merge_grad(op: Operation, grad: Tensor) -> list:
    return list(_switch_colocated(grad, current_grad_context().pivot))


def cond_pred_in_loop(pred: Tensor) -> Tensor:
    """A cond's predicate as the backward loop sees it: its value in the matching forward
    iteration, from a stack."""
    grad_ctxt = current_grad_context()
    if grad_ctxt is None or grad_ctxt.grad_state is None:
        return pred
    state = grad_ctxt.grad_state
    real = state.history_map.get(pred.name)
    if real is None:
        grad_ctxt.exit()
        try:
            history = state.add_forward_accumulator(pred)
        finally:
            grad_ctxt.enter()
        real = state.add_backprop_accumulated_value(history, pred)
        state.history_map[pred.name] = real
    return real


def build_state(between_list: list[Operation], between: set[int]) -> ControlFlowState | None:
    """TensorFlow's MaybeCreateControlFlowState: a state when a loop Exit is between."""
    state = None
    for op in between_list:   # grows while walked: a loop's other exits join it
        if is_loop_exit(op) and isinstance(op.ctxt, WhileContext):
            if state is None:
                state = ControlFlowState()
            state.add_while_context(op, between_list, between)
    return state
