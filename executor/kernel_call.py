"""The one way to run a kernel.

Every caller (the scheduler, straight-line and loop programs, the reference interpreter,
``kernels.invoke`` and the optimizer's constant folding) binds a node once with :func:`bind`
into a :class:`BoundKernel`, makes its context with :func:`context`, and runs it with
:func:`call` (or :func:`call_timed`). That one function does, in order:

1. dereference ref inputs the kernel reads as values (``BoundKernel.deref``);
2. check the output size the inputs and attrs imply against the step's memory budget, for the
   few ops whose output can be far larger than their inputs (``limits.py``);
3. call the kernel;
4. map what it raised to the error hierarchy, naming node, op and input shapes;
5. check the number and dtypes of the outputs against the OpDef.

NumPy's floating-point error state is the caller's: run calls inside :func:`quiet` (inf and
nan are results, not warnings) once per step or thread, not once per kernel.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.attrs import to_python
from dfg.graphdef.errors import (
    DfgError,
    InternalError,
    InvalidArgumentError,
    ResourceExhaustedError,
    UnimplementedError,
)
from dfg.graphdef.opdefs.registry import SignatureError, registry

from . import limits
from .kernels import registry as kernels
from .kernels.registry import BF16_ATTRS, KernelContext

quiet = np.errstate  # ``with quiet(all="ignore"):`` around a step's kernel calls


class BoundKernel:
    """A node bound to its kernel: everything :func:`call` needs, nothing about scheduling.

    Immutable once bound. ``spec`` is the op's registry record (``OpSpec``: every per-op
    fact); ``fn``, ``cheap`` and ``size_check`` are its kernel, cost class and estimator,
    copied for the hot paths. ``deref`` lists the inputs that may arrive as ref objects (a
    ``VariableRef``) and must be read first; ``size_check`` is the op's output-size estimator
    (None for ops whose outputs cannot outgrow their inputs by much)."""

    __slots__ = ("name", "op", "spec", "fn", "cheap", "attrs", "num_inputs", "num_outputs",
                 "input_dtypes", "out_types", "out_dtypes", "deref", "stateful", "size_check",
                 "bf16_out")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.op})"


# What binding derives from a node's op and the attrs its OpDef declares, by (device, op,
# those attrs' bytes): nodes alike (the same op with the same T, strides, padding ...) bind
# once. Binding was most of a plan's build (~9 us per node, ResNet-style bench: 3.3 of 4.6
# ms), and a plan's build is most of the first step the Session runs as written. Tensor
# attrs (a Const's value) are left out of the key and decoded for each node. Bounded:
# cleared when full.
_BOUND: dict[tuple, tuple] = {}
_BOUND_MAX = 1 << 14
# op -> (its OpDef's attr names but tensors, its tensor attr names)
_KEY_ATTRS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _key_attrs(opdef: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = _KEY_ATTRS.get(opdef.name)
    if names is None:
        tensor = ("tensor", "list(tensor)")
        defs = _attr_defs(opdef, None)
        names = _KEY_ATTRS[opdef.name] = (
            tuple(name for name, kind, _ad in defs if kind not in tensor),
            tuple(name for name, kind, _ad in defs if kind in tensor))
    return names


def bind(node: Any, device: str = kernels.CPU, into: BoundKernel | None = None
         ) -> BoundKernel:
    """Bind ``node`` (a ``graph.Node`` or a ``NodeDef``) to its kernel on ``device`` (or, by
    soft placement, the CPU's). ``into``: fill this object (a NodeItem) instead of a new one.
    ``deref`` is every non-ref input; the plan narrows it to inputs fed by ref outputs."""
    reg = registry()
    proto = getattr(node, "proto", node)
    opdef = reg.get(proto.op)
    if opdef is None:
        raise UnimplementedError(f"op type '{proto.op}' is not registered", node=proto.name,
                                 op=proto.op)
    plain, tensors = _key_attrs(opdef)
    attr = proto.attr
    # a key's bytes need not be canonical (no deterministic=, a third of the key's cost):
    # the same attrs written in another order only miss the cache; equal bytes are always
    # equal attrs
    key = (device, proto.op, *[attr[n].SerializeToString() if n in attr else None
                               for n in plain])
    bound = _BOUND.get(key)
    if bound is None:
        bound = _bind_signature(proto, opdef, device)
        if len(_BOUND) >= _BOUND_MAX:
            _BOUND.clear()
        _BOUND[key] = bound
    k = into if into is not None else BoundKernel()
    k.name = proto.name
    (k.op, k.spec, k.fn, k.cheap, attrs, k.num_inputs, k.num_outputs, k.input_dtypes, k.out_types,
     k.out_dtypes, k.deref, k.stateful, k.size_check, k.bf16_out) = bound
    attrs = dict(attrs)      # a node's own dict: what one kernel does to it stays there
    if tensors:
        attrs.update(bind_attrs(opdef, proto, tensors))
    k.attrs = attrs
    return k


def _bind_signature(proto: Any, opdef: Any, device: str) -> tuple:
    """The binding of ``proto`` but its name, as :func:`bind` unpacks it."""
    reg = registry()
    try:
        in_types = reg.input_types(proto, opdef)
        out_types = reg.output_types(proto, opdef)
    except SignatureError as e:
        raise InvalidArgumentError(str(e), node=proto.name, op=proto.op) from None
    kd = kernels.lookup(proto.op, device) or kernels.lookup(proto.op)
    if kd is None:
        raise UnimplementedError(f"no {device} kernel for op {proto.op}", node=proto.name,
                                 op=proto.op)
    return (
        proto.op, kd, kd.fn, kd.cheap, bind_attrs(opdef, proto, _key_attrs(opdef)[0]),
        len(in_types), len(out_types),
        in_types, out_types, [numpy_dtype(t) for t in out_types],
        tuple(i for i, t in enumerate(in_types) if not D.is_ref(t)),
        # ops on refs (V1 queues, TensorArrays, stacks, Assign ...) act on state: they get
        # the run's context (cancel flag, step state) as stateful ops do
        bool(opdef.is_stateful) or any(D.is_ref(t) for t in in_types),
        kd.estimate,
        # bfloat16 outputs (held as float32) are rounded after the kernel: see dtypes._NP
        tuple(i for i, t in enumerate(out_types) if D.base(t) == D.DT_BFLOAT16
              and not D.is_ref(t)))


def bind_op(op: str, attrs: dict[str, Any], device: str = kernels.CPU) -> BoundKernel:
    """Bind an op with attrs given as the kernel sees them, outside any graph (kernel unit
    tests, ``kernels.invoke``). Output count and dtypes are not checked: :func:`call` returns
    what the kernel returned."""
    kd = kernels.lookup(op, device)
    if kd is None:
        raise KeyError(f"no {device} kernel for op {op}")
    opdef = registry().get(op)
    k = BoundKernel()
    k.name = k.op = op
    k.spec, k.fn, k.cheap, k.attrs = kd, kd.fn, kd.cheap, attrs
    k.num_inputs, k.num_outputs = -1, None
    k.input_dtypes, k.out_types, k.out_dtypes = [], [], []
    k.deref = ()
    k.stateful = bool(opdef is not None and opdef.is_stateful)
    k.size_check = kd.estimate
    k.bf16_out = ()
    return k


# (op, names) -> (its OpDef, ((attr name, attr type, AttrDef), ...) of those names): the
# OpDef's fields read once (each upb field access costs a call), checked by the OpDef's
# identity so a registry that replaced it is read again
_ATTR_DEFS: dict[tuple[str, Any], tuple[Any, tuple]] = {}


def _attr_defs(opdef: Any, names: Any) -> tuple:
    key = (opdef.name, names if names is None else tuple(names))
    hit = _ATTR_DEFS.get(key)
    if hit is None or hit[0] is not opdef:
        if len(_ATTR_DEFS) >= _BOUND_MAX:
            _ATTR_DEFS.clear()
        hit = _ATTR_DEFS[key] = (opdef, tuple(
            (ad.name, ad.type, ad) for ad in opdef.attr if names is None or ad.name in names))
    return hit[1]


def bind_attrs(opdef: Any, node: Any, names: Any = None) -> dict[str, Any]:
    """A node's attrs as its kernel sees them: plain Python values, OpDef defaults filled
    (``names``: only these)."""
    attrs: dict[str, Any] = {}
    bf16: list[str] = []
    given = node.attr
    for name, kind, ad in _attr_defs(opdef, names):
        if name in given:
            av = given[name]
            if kind == "type" and D.base(av.type) == D.DT_BFLOAT16:
                bf16.append(name)
            try:
                attrs[name] = to_python(av, numpy_types=True)
            except DfgError as e:   # a Const too large to decode, say: name the node
                if e.node is None:
                    e.node, e.op = node.name, node.op
                    e.args = (e._render(),)
                raise
        elif ad.HasField("default_value"):
            attrs[name] = to_python(ad.default_value, numpy_types=True)
        else:
            raise InvalidArgumentError(f"missing required attr '{name}'", node=node.name,
                                       op=node.op)
    if bf16:
        attrs[BF16_ATTRS] = tuple(bf16)
    return attrs


def numpy_dtype(t: int) -> np.dtype | None:
    """The dtype an output array must have; None where the value is not a plain array."""
    if D.is_ref(t) or D.base(t) in (D.DT_RESOURCE, D.DT_VARIANT):
        return None
    if not D.is_numpy_compatible(t):
        return None
    return D.to_numpy(t)


def context(k: BoundKernel, resources: Any = None, step: Any = None,
            deadline: float | None = None, frame: Any = None,
            max_bytes: int | None = None) -> KernelContext:
    """The one KernelContext factory. A stateless kernel's context may be shared by every
    run of a plan (no resources, no step); a stateful one gets the step's."""
    return KernelContext(k.name, k.op, k.attrs, k.out_dtypes, k.input_dtypes, resources,
                         {} if step is None and resources is not None else step,
                         frame=frame, deadline=deadline, max_bytes=max_bytes)


def call(k: BoundKernel, args: list, ctx: KernelContext) -> Any:
    """Run ``k`` on ``args``: its outputs as a sequence, one entry per output slot."""
    try:
        if k.deref:
            _deref(k, args)
        size_check = k.size_check
        if size_check is not None and ctx.max_bytes is not None:
            if getattr(size_check, "shapes_only", False):
                # asked once per input shapes and budget (a convolution's estimate is a
                # few microseconds, a tenth of a small one's run)
                key = ([getattr(a, "shape", None) for a in args], ctx.max_bytes)
                if key != ctx.fits:
                    limits.check(k, args, ctx.max_bytes)
                    ctx.fits = key
            else:
                limits.check(k, args, ctx.max_bytes)
        res = k.fn(ctx, *args)
    except Exception as e:
        raise kernel_error(k, e, args) from (None if isinstance(e, DfgError) else e)
    if k.bf16_out:
        res = _round_bf16(k, res)
    if type(res) is np.ndarray and k.num_outputs == 1 and res.dtype is k.out_dtypes[0]:
        return (res,)
    return checked_outputs(k, res)


def fits(k: BoundKernel, args: list, ctx: KernelContext) -> bool:
    """Whether ``k``'s outputs on ``args`` fit the step's memory budget (what :func:`call`
    checks first, for a caller that runs the kernel's core itself: codegen's array forms);
    when not, :func:`call` raises the error."""
    return ctx.max_bytes is None or k.size_check(k, args) <= ctx.max_bytes


def _round_bf16(k: BoundKernel, res: Any) -> Any:
    """The kernel's float results in bfloat16 slots rounded to bfloat16 (kept as float32)."""
    single = type(res) is not tuple and type(res) is not list
    outs = [res] if single else list(res)
    for i in k.bf16_out:
        if i < len(outs) and outs[i] is not None:
            o = np.asarray(outs[i])
            if o.dtype.kind in "fiub":
                outs[i] = D.round_bfloat16(o)
    return outs[0] if single else outs


def call_op(ctx: KernelContext | None, op: str, args: list, attrs: dict | None = None) -> Any:
    """A kernel calling another op's kernel (``ResourceGatherNd`` gathering with GatherNd,
    a variant's ZerosLike of its elements): bound by op name (attrs as the kernel sees them;
    type attrs left out are taken from ``args``), through :func:`call`, with a context from
    :func:`context` carrying the caller's resources, step state, deadline and budget. Errors
    name the calling node. The result is what the kernel returned."""
    from .kernels.registry import complete_attrs

    args = list(args)
    k = bind_op(op, complete_attrs(op, dict(attrs or {}), args))
    if ctx is None:
        return call(k, args, context(k))
    k.name = ctx.node
    return call(k, args, context(k, ctx.resources, ctx.step, deadline=ctx.deadline,
                                 frame=ctx.frame, max_bytes=ctx.max_bytes))


def call_timed(k: BoundKernel, args: list, ctx: KernelContext) -> tuple[Any, float]:
    """:func:`call`, and the seconds it took (-1 for a kernel registered cheap or not: its
    cost decides nothing, so it is not measured)."""
    if k.cheap is not None:
        return call(k, args, ctx), -1.0
    t0 = time.perf_counter()
    out = call(k, args, ctx)
    return out, time.perf_counter() - t0


def _deref(k: BoundKernel, args: list) -> None:
    for i in k.deref:
        a = args[i]
        # a Merge's dead inputs arrive as None: nothing to read
        if a is not None and type(a) is not np.ndarray and hasattr(a, "read"):
            args[i] = a.read()


def kernel_error(k: BoundKernel, e: Exception, args: Any = None) -> DfgError:
    """What a kernel raised, as one error of the hierarchy naming the node, its op and (for
    errors the kernel did not word itself) the inputs it got."""
    if isinstance(e, DfgError):
        if e.node is None:
            e.node, e.op = k.name, k.op
            e.args = (e._render(),)
        return e
    got = f" (inputs: {describe_inputs(args)})" if args else ""
    if isinstance(e, (ValueError, IndexError, TypeError, ZeroDivisionError, OverflowError)):
        return InvalidArgumentError(f"{type(e).__name__}: {e}{got}", node=k.name, op=k.op)
    if isinstance(e, MemoryError):
        return ResourceExhaustedError(f"out of memory computing the output{got}", node=k.name,
                                      op=k.op)
    if isinstance(e, RecursionError):
        return ResourceExhaustedError(f"recursion too deep{got}", node=k.name, op=k.op)
    return InternalError(f"kernel failed: {type(e).__name__}: {e}{got}", node=k.name, op=k.op)


def describe_inputs(args: Any) -> str:
    parts = []
    for a in list(args)[:8]:
        if a is None:
            parts.append("dead")
        elif isinstance(a, np.ndarray):
            parts.append(f"{a.dtype}{list(a.shape)}")
        else:
            parts.append(type(a).__name__)
    if len(args) > 8:
        parts.append(f"... {len(args)} in all")
    return ", ".join(parts)


def checked_outputs(k: BoundKernel, res: Any) -> Any:
    """A kernel's result as a sequence of outputs, each of the dtype its OpDef promises
    (for a kernel bound by ``bind_op``: the result as the kernel gave it)."""
    if k.num_outputs is None:
        return res
    if type(res) is tuple or type(res) is list:
        outs = res
    else:
        outs = (res,)
    if len(outs) != k.num_outputs:
        raise InternalError(f"kernel returned {len(outs)} outputs, the OpDef has "
                            f"{k.num_outputs}", node=k.name, op=k.op)
    want = k.out_dtypes
    for i, o in enumerate(outs):
        w = want[i]
        if w is None or o is None:
            continue
        if type(o) is not np.ndarray or o.dtype is not w:
            fixed = _check_output(k, i, o, w)
            if fixed is not o:
                outs = list(outs)
                outs[i] = fixed
    return outs


def _check_output(k: BoundKernel, i: int, o: Any, want: np.dtype) -> np.ndarray:
    arr = o if isinstance(o, np.ndarray) else np.asarray(o)
    if arr.dtype == want:
        # an equal descriptor that is not NumPy's own instance ("<f4", unpickled) becomes it,
        # so it does not travel on into every result computed from this one
        return arr if arr.dtype is want else arr.view(want)
    if want.kind == "O" and arr.dtype.kind in "SU":
        return np.asarray(arr.tolist() if arr.dtype.kind == "S" else
                          np.char.encode(arr).tolist(), dtype=object).reshape(arr.shape)
    raise InternalError(f"kernel produced {arr.dtype} for output {i}, the OpDef says {want}",
                        node=k.name, op=k.op)


def run_once(k: BoundKernel, args: list, ctx: KernelContext) -> Any:
    """:func:`call` for a caller outside a step (one-off evaluation): with NumPy quiet."""
    with quiet(all="ignore"):
        return call(k, list(args), ctx)
