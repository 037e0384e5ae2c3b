"""Functional control flow, as TensorFlow 2 writes it: ``cond(..., functional=True)`` emits one
``StatelessIf`` (``If`` when a branch has a stateful op) and ``while_loop(...,
functional=True)`` one ``StatelessWhile`` (``While``), their branches, condition and body as
FunctionDefs in the GraphDef's library. dfg's Session lowers them to Switch/Merge and loop
frames (graphdef/lowering.py), TensorFlow imports and runs them as they are.

Each function is traced in a graph of its own: a tensor of an outer graph used inside is
*captured*, i.e. passed in as an extra input of the If/While (the same captures, in the same
order, for both branches of a cond, and passed through unchanged by a while body), as
TensorFlow's cond_v2/while_v2 do. Differences from TensorFlow, on purpose: no
``loop_counter``/``maximum_iterations`` loop variables (the While carries only the user's
variables and the captures), function names ``<scope>_true_<n>`` / ``_false_<n>`` /
``_cond_<n>`` / ``_body_<n>`` numbered per graph, argument names ``arg<i>``, and no
``_read_only_resource_inputs``/``_construction_context`` bookkeeping attrs.

Gradients (``if_grad``, ``while_grad``) trace the branches or the body again rather than
rewriting the forward node to output its intermediates as TensorFlow does: the same values,
other nodes. An If/While the builder did not trace (an imported one) has no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..opdefs.registry import registry
from .core import Graph, Tensor, get_default_graph
from .ops import apply_op, convert_to_tensor


def _flat(x: Any) -> tuple[list, bool]:
    if isinstance(x, (list, tuple)):
        return list(x), True
    return [x], False


def _out_arg_names(op: Any) -> list[str]:
    """``<output arg name>:<index within it>`` for each flat output of ``op``."""
    opdef = registry().get(op.type)
    names: list[str] = []
    for arg in opdef.output_arg:
        if arg.number_attr:
            n = op.get_attr(arg.number_attr)
        elif arg.type_list_attr:
            n = len(op.get_attr(arg.type_list_attr))
        else:
            n = 1
        names.extend(f"{arg.name}:{k}" for k in range(n))
    return names


class _Trace:
    """One function being traced: its own Graph sharing the outer graph's library."""

    def __init__(self, outer: Graph, arg_tensors: list[Tensor]) -> None:
        self.outer = outer
        self.graph = Graph()
        self.graph.library = outer.__dict__.setdefault("library", {})
        self.graph._fn_counter = outer.__dict__.setdefault("_fn_counter", [0])
        # the loop variables (While) come in as Placeholders of the traced graph
        self.args: list[Tensor] = []
        self.outputs: list[Tensor] = []
        with self.graph.as_default():
            for i, t in enumerate(arg_tensors):
                shp = t.shape
                p = self.graph.create_op("Placeholder", [], {
                    "dtype": t.dtype, "shape": shp}, name=f"arg{i}")
                p.outputs[0].shape = shp
                self.args.append(p.outputs[0])

    def run(self, fn: Callable, *args: Any) -> tuple[list[Tensor], bool]:
        """The function's results (flat) and whether it returned a list/tuple."""
        with self.graph.as_default():
            res = fn(*args)
            if res is None:
                raise InvalidArgumentError("a cond branch or loop body must return tensors")
            flat, packed = _flat(res)
            self.outputs = [convert_to_tensor(v) for v in flat]
            return self.outputs, packed

    def captures(self) -> list[Tensor]:
        """Outer tensors used by the traced ops or returned as they are, in first-use
        order."""
        seen: dict[int, Tensor] = {}
        used = [t for op in self.graph.ops for t in op.inputs] + list(self.outputs)
        for t in used:
            if t.op.graph is not self.graph and id(t) not in seen:
                seen[id(t)] = t
        return list(seen.values())

    def function_def(self, name: str, outputs: list[Tensor], captured: list[Tensor]) -> Any:
        """The FunctionDef: inputs = the Placeholders' args then ``captured``; one Identity
        per output so that every ``ret`` names a node output."""
        from dfg.schemas import function_pb2
        g = self.graph
        arg_of: dict[int, str] = {}
        fd = function_pb2.FunctionDef()
        fd.signature.name = name
        n_args = len(self.args)
        for i, t in enumerate(self.args):
            arg_of[id(t)] = f"arg{i}"
        for j, t in enumerate(captured):
            arg_of[id(t)] = f"arg{n_args + j}"
        for k, t in enumerate(self.args + captured):
            a = fd.signature.input_arg.add(name=f"arg{k}")
            a.type = t.dtype
        with g.as_default():
            outs = [apply_op("Identity", [t], name=f"output_{i}").outputs[0]
                    for i, t in enumerate(outputs)]
        arg_ops = {id(t.op) for t in self.args}
        for op in g.ops:
            if id(op) in arg_ops:
                continue
            nd = fd.node_def.add(name=op.name, op=op.type, device=op.device)
            for t in op.inputs:
                if id(t) in arg_of:
                    nd.input.append(arg_of[id(t)])
                else:
                    nd.input.append(f"{t.op.name}:{_out_arg_names(t.op)[t.value_index]}")
            nd.input.extend("^" + c.name for c in op.control_inputs
                            if id(c) not in arg_ops)
            for k, v in op.attrs.items():
                nd.attr[k].CopyFrom(v)
        for i, t in enumerate(outs):
            o = fd.signature.output_arg.add(name=f"output_{i}")
            o.type = t.dtype
            fd.ret[f"output_{i}"] = f"{t.op.name}:output:0"
        return fd

    def stateful(self) -> bool:
        return any(registry().get(op.type) is not None and registry().get(op.type).is_stateful
                   for op in self.graph.ops)


def _register(g: Graph, fd: Any) -> str:
    g.__dict__.setdefault("library", {})[fd.signature.name] = fd
    return fd.signature.name


def _next_id(g: Graph) -> int:
    c = g.__dict__.setdefault("_fn_counter", [0])
    c[0] += 1
    return c[0]


def _shape_list(ts: list[Tensor]) -> list:
    return [t.shape for t in ts]


def functional_cond(pred: Any, true_fn: Callable, false_fn: Callable,
                    name: str | None = None) -> Any:
    g = get_default_graph()
    with g.name_scope(name, "cond") as scope:
        pred = convert_to_tensor(pred)
        tt, tf_ = _Trace(g, []), _Trace(g, [])
        out_t, packed = tt.run(true_fn)
        out_f, _ = tf_.run(false_fn)
        if len(out_t) != len(out_f):
            raise InvalidArgumentError(
                f"cond branches return different structures: {len(out_t)} vs {len(out_f)}",
                node=scope[:-1], op="If")
        for a, b in zip(out_t, out_f):
            if a.dtype != b.dtype:
                raise InvalidArgumentError("cond branches return different dtypes",
                                           node=scope[:-1], op="If")
        caps: list[Tensor] = []
        for t in tt.captures() + tf_.captures():
            if all(t is not c for c in caps):
                caps.append(t)
        k = _next_id(g)
        base = scope[:-1].replace("/", "_")
        then_name = _register(g, tt.function_def(f"{base}_true_{k}", out_t, caps))
        else_name = _register(g, tf_.function_def(f"{base}_false_{k}", out_f, caps))
        op_type = "If" if tt.stateful() or tf_.stateful() else "StatelessIf"
        shapes = [a.shape if a.shape == b.shape else None for a, b in zip(out_t, out_f)]
        op = g.create_op(op_type, [pred] + caps, {
            "Tcond": pred.dtype, "Tin": [c.dtype for c in caps],
            "Tout": [t.dtype for t in out_t], "then_branch": then_name,
            "else_branch": else_name, "output_shapes": shapes,
            "_lower_using_switch_merge": True}, name=scope)
        # what the gradient needs (if_grad): the traced branches and what they capture
        op._cond_traces = (tt, tf_, caps)
        outs = []
        for t, s in zip(op.outputs, shapes):
            t.shape = s
            outs.append(apply_op("Identity", [t]).outputs[0])
    return outs if packed else outs[0]


def if_grad(op: Any, *grads: Any) -> list:
    """The gradient of a functional ``If``: an ``If`` on the same predicate whose branches
    are the gradient functions of the forward branches (TensorFlow's _IfGrad). Each gradient
    branch takes the output gradients, then what it captures; it computes its forward branch
    again (TensorFlow instead rewrites the forward ``If`` to output the intermediates, wrapped
    in optionals) and returns the gradient of every captured input (zeros when the branch
    does not use it)."""
    from .gradients import _trainable, gradients
    from .ops import zeros_like
    traces = getattr(op, "_cond_traces", None)
    if traces is None:
        from ..errors import UnimplementedError
        raise UnimplementedError("gradient of an If the builder did not trace (imported): "
                                 "its branches are not known as builder graphs",
                                 node=op.name, op=op.type)
    g = get_default_graph()
    tt, tf_, caps = traces
    grads = tuple(gy if gy is not None else zeros_like(t) for gy, t in zip(grads, op.outputs))
    targets = [c for c in caps if _trainable(c)]
    k = _next_id(g)
    base = op.name.replace("/", "_")
    branch_outs: list[list[Tensor]] = []
    grad_traces = []
    for trace in (tt, tf_):
        # the gradient function is traced in the forward branch's graph: its forward ops
        # are there already; the output gradients come in as new arguments
        gt = _Trace.__new__(_Trace)
        gt.outer, gt.graph = g, trace.graph
        gt.args, gt.outputs = [], list(trace.outputs)
        with gt.graph.as_default():
            for i, gy in enumerate(grads):
                p = gt.graph.create_op("Placeholder", [], {"dtype": gy.dtype,
                                                           "shape": gy.shape},
                                       name=f"grad_arg{i}")
                p.outputs[0].shape = gy.shape
                gt.args.append(p.outputs[0])
            dx = gradients(trace.outputs, targets, grad_ys=gt.args) if targets else []
            outs = [d if d is not None else zeros_like(c) for d, c in zip(dx, targets)]
        branch_outs.append(outs)
        grad_traces.append(gt)
    gcaps: list[Tensor] = []
    for gt in grad_traces:
        for t in gt.captures():
            if all(t is not c for c in gcaps):
                gcaps.append(t)
    gt_t, gt_f = grad_traces
    then_name = _register(g, gt_t.function_def(f"{base}_grad_true_{k}", branch_outs[0],
                                               gcaps))
    else_name = _register(g, gt_f.function_def(f"{base}_grad_false_{k}", branch_outs[1],
                                               gcaps))
    gys = [convert_to_tensor(gy) for gy in grads]
    ins = gys + gcaps
    op_type = "If" if gt_t.stateful() or gt_f.stateful() else "StatelessIf"
    shapes = [c.shape for c in targets]
    gop = g.create_op(op_type, [op.inputs[0]] + ins, {
        "Tcond": op.inputs[0].dtype, "Tin": [t.dtype for t in ins],
        "Tout": [c.dtype for c in targets], "then_branch": then_name,
        "else_branch": else_name, "output_shapes": shapes,
        "_lower_using_switch_merge": True}, name=op_type)
    by_cap = {}
    for t, c, s in zip(gop.outputs, targets, shapes):
        t.shape = s
        by_cap[id(c)] = apply_op("Identity", [t]).outputs[0]
    return [None] + [by_cap.get(id(c)) for c in caps]


def functional_while(cond: Callable, body: Callable, loop_vars: list[Tensor],
                     parallel_iterations: int = 10, name: str | None = None) -> list[Tensor]:
    g = get_default_graph()
    with g.name_scope(name, "while") as scope:
        loop_vars = [convert_to_tensor(v) for v in loop_vars]
        n = len(loop_vars)
        ct, bt = _Trace(g, loop_vars), _Trace(g, loop_vars)
        c_out, _ = ct.run(cond, *ct.args)
        if len(c_out) != 1:
            raise InvalidArgumentError("a while_loop condition returns one boolean",
                                       node=scope[:-1], op="While")
        b_out, _ = bt.run(body, *bt.args)
        if len(b_out) != n:
            raise InvalidArgumentError(
                f"while_loop body returns {len(b_out)} values for {n} loop variables",
                node=scope[:-1], op="While")
        caps: list[Tensor] = []
        for t in ct.captures() + bt.captures():
            if all(t is not c for c in caps):
                caps.append(t)
        k = _next_id(g)
        base = scope[:-1].replace("/", "_")
        cname = _register(g, ct.function_def(f"{base}_cond_{k}", c_out, caps))
        # the captures are loop variables the body passes through unchanged
        bname = _register(g, bt.function_def(f"{base}_body_{k}", list(b_out) + caps, caps))
        op_type = "While" if ct.stateful() or bt.stateful() else "StatelessWhile"
        shapes = [v.shape if v.shape == o.shape else None
                  for v, o in zip(loop_vars, b_out)] + [c.shape for c in caps]
        ins = loop_vars + caps
        op = g.create_op(op_type, ins, {
            "T": [t.dtype for t in ins], "cond": cname, "body": bname,
            "output_shapes": shapes, "parallel_iterations": parallel_iterations,
            "_lower_using_switch_merge": True}, name=scope)
        op._while_fns = (cond, body, n)   # what while_grad needs
        outs = []
        for t, s in zip(op.outputs[:n], shapes):
            t.shape = s
            outs.append(apply_op("Identity", [t]).outputs[0])
    return outs



def while_grad(op: Any, *grads: Any) -> list:
    """The gradient of a functional ``While``: the forward loop run again with one
    ``TensorList`` per loop variable recording its value at the start of every iteration,
    then a backward ``While`` running as many iterations (the lists' length) that pops
    them, builds that iteration's body again on the popped values and takes its gradient
    (the loop variables' gradients carried, the captured inputs' summed). TensorFlow's
    while_v2 rewrites the forward ``While`` to accumulate every intermediate instead; the
    values are the same, the forward body runs twice here."""
    from .. import dtypes as D
    from ..errors import UnimplementedError
    from .gradients import _trainable, gradients
    from .ops import zeros_like
    fns = getattr(op, "_while_fns", None)
    if fns is None:
        raise UnimplementedError("gradient of a While the builder did not trace (imported): "
                                 "its body is not known as a builder function",
                                 node=op.name, op=op.type)
    cond, body, n = fns
    vars0 = list(op.inputs[:n])
    caps = list(op.inputs[n:])
    if any(D.base(v.dtype) in (D.from_name("resource"), D.from_name("variant"))
           for v in vars0):
        raise UnimplementedError("gradient of a While carrying a resource or variant",
                                 node=op.name, op=op.type)
    grads = [gy if gy is not None else (zeros_like(t) if _trainable(t) else None)
             for gy, t in zip(grads, op.outputs)]
    fl = [k for k, v in enumerate(vars0) if _trainable(v)]
    tc = [c for c in caps if _trainable(c)]
    variant = D.from_name("variant")

    def push_all(lists: list, vs: list) -> list:
        return [apply_op("TensorListPushBack", [lst, v], {"element_dtype": D.base(v.dtype)}
                         ).outputs[0] for lst, v in zip(lists, vs)]

    def fwd_cond(*a: Any) -> Any:
        return cond(*a[:n])

    def fwd_body(*a: Any) -> Any:
        outs, _ = _flat(body(*a[:n]))
        return list(outs) + push_all(list(a[n:]), list(a[:n]))

    empties = [apply_op("EmptyTensorList", [np.int32(-1), np.int32(-1)],
                        {"element_dtype": D.base(v.dtype)}).outputs[0] for v in vars0]
    for e in empties:
        e.dtype = variant
    rec = functional_while(fwd_cond, fwd_body, vars0 + empties,
                           parallel_iterations=op.get_attr("parallel_iterations"),
                           name="forward")
    lists = rec[n:]
    count = apply_op("TensorListLength", [lists[0]]).outputs[0]
    nf, nc = len(fl), len(tc)

    def bwd_cond(cnt: Any, *rest: Any) -> Any:
        return cnt > 0

    def bwd_body(cnt: Any, *rest: Any) -> Any:
        gs, accs, ls = list(rest[:nf]), list(rest[nf:nf + nc]), list(rest[nf + nc:])
        popped, new_ls = [], []
        for lst, v in zip(ls, vars0):
            h, t = apply_op("TensorListPopBack", [lst, np.int32(-1)],
                            {"element_dtype": D.base(v.dtype)}).outputs
            t.shape = v.shape
            popped.append(t)
            new_ls.append(h)
        outs, _ = _flat(body(*popped))
        outs = [convert_to_tensor(o) for o in outs]
        xs = [popped[k] for k in fl] + tc
        dx = gradients([outs[k] for k in fl], xs, grad_ys=gs) if fl else [None] * len(xs)
        dx = [d if d is not None else zeros_like(x) for d, x in zip(dx, xs)]
        new_gs = dx[:nf]
        new_accs = [a + d for a, d in zip(accs, dx[nf:])]
        return [cnt - 1] + new_gs + new_accs + new_ls

    init = [count] + [grads[k] for k in fl] + [zeros_like(c) for c in tc] + list(lists)
    res = functional_while(bwd_cond, bwd_body, init,
                           parallel_iterations=op.get_attr("parallel_iterations"),
                           name="backward")
    out: list = [None] * len(op.inputs)
    for j, k in enumerate(fl):
        out[k] = res[1 + j]
    by_cap = {id(c): res[1 + nf + j] for j, c in enumerate(tc)}
    for i, c in enumerate(caps):
        d = by_cap.get(id(c))
        if d is not None and grads[n + i] is not None:   # a gradient of the passed-through copy
            d = d + grads[n + i]
        out[n + i] = d
    return out
