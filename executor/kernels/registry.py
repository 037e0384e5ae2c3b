"""The one kernel registry: op type (and device) -> its record (``OpSpec``): the kernel function
and every fact the rest of dfg needs about the op.

A kernel is a plain function ``fn(ctx, *inputs)``:

* ``inputs`` are numpy arrays (0-d arrays for scalars; strings as object arrays of ``bytes``),
  or resource/ref objects for resource- and ref-typed inputs. A non-ref input fed from a ref
  output arrives already dereferenced.
* ``ctx`` is a :class:`KernelContext`: ``ctx.attrs`` holds the node's attrs as plain Python
  values with OpDef defaults filled in (type attrs as ``numpy.dtype`` where numpy has one,
  shapes as tuples with None for unknown dims, tensors as arrays, ``s`` as ``str``);
  ``ctx.output_dtypes`` the numpy dtypes the OpDef says the outputs have; ``ctx.node`` /
  ``ctx.op`` name the node; ``ctx.resources`` is session-lifetime state (variables);
  ``ctx.step`` is per-run state (TensorArrays, stacks).
* It returns one array for a one-output op, or a tuple/list with one entry per output slot
  (also for variable-output ops such as Split with num_split=1). ``None`` in a slot means the
  output is not produced (dead), as Switch does for its untaken side.
* It raises ``dfg.graphdef.errors.InvalidArgumentError`` (or another ``OpError``) for bad
  inputs; the executor adds the node name and op. Any other exception becomes an
  ``InternalError`` naming the node.
* It never sees protos. The executor checks the number and dtypes of outputs centrally.

Register with the decorator; family modules are listed once in :data:`FAMILIES`::

    @kernel("Relu")
    def relu(ctx, x):
        return np.maximum(x, x.dtype.type(0))
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

# The one explicit list of kernel families (one module per family under this package).
FAMILIES = (
    "basic", "control_flow", "state", "math", "array", "reduction", "nn", "grad",
    "tensor_array", "image", "random", "string", "tensor_list", "io",
    "losses", "training", "linalg", "lookup", "segment", "sparse", "detection", "fused",
    "spectral", "special", "ragged", "parsing", "formats", "quantization", "rnn",
    "queue", "summary", "optional", "sendrecv", "xla",
)

CPU = "CPU"
# The bound attr naming a node's type attrs that are bfloat16 (a tuple; absent when none
# is). A bfloat16 type attr binds as float32 (dtypes._NP), which is all most kernels need;
# the few whose bits depend on it (uniform random draws) look here.
BF16_ATTRS = "_bfloat16_attrs"


@dataclass(frozen=True)
class ScalarForm:
    """A kernel's scalar form, for compiled programs (codegen.py): a Python expression over
    ``{0}``, ``{1}`` ... that gives bit for bit the kernel's result when every input is a
    NumPy scalar (np.generic) of one of ``dtypes`` (TensorFlow DataType enums), e.g.
    ``"{0} + {1}"`` for AddV2. A node whose inputs have another dtype runs its kernel. Never
    bfloat16: it binds as float32, and only the kernel call rounds its results
    (``kernel_call.call``); tests/test_fast_paths.py checks every declared dtype.

    ``{kernel}`` in the expression stands for the node's kernel call, for operand values the
    expression leaves to it (FloorMod's zero divisor: the kernel raises the node's error).
    ``{out}`` in the expression names the NumPy scalar type of the node's output (Cast's
    ``{0}.astype({out})``), ``{nz_out}`` that type's -0.0 (the identity of addition);
    ``out_dtypes``, when given, are the output dtypes it holds for (else the inputs' rule
    covers the output too); ``by_types`` maps (input dtype, output dtype) to a cheaper
    expression for that pair; ``holds(attrs)``, when given, says whether it holds for a node
    with these attrs (as the kernel sees them: Cast's Truncate).

    ``compose(attrs, input_types, out_types)``, when given, writes the expression for one node
    (None: no form for it): an op whose arithmetic is in its attrs (``_DfgElementwiseChain``'s
    program, composed from its member ops' own forms) has no one expression."""

    expr: str
    dtypes: frozenset[int]
    out_dtypes: frozenset[int] | None = None
    holds: Callable[[Mapping[str, Any]], bool] | None = None
    by_types: Mapping[tuple[int, int], str] = field(default_factory=dict)
    compose: Callable[[Mapping[str, Any], Any, Any], str | None] | None = None

    def __post_init__(self) -> None:
        from dfg.graphdef import dtypes as D

        never = {D.DT_BFLOAT16, D.DT_STRING, D.DT_COMPLEX64, D.DT_COMPLEX128, D.DT_RESOURCE,
                 D.DT_VARIANT}
        bad = (self.dtypes | (self.out_dtypes or frozenset())) & never
        if bad:
            raise RuntimeError(f"scalar form {self.expr!r} cannot honour dtypes {sorted(bad)}")

    def applies(self, input_types: Any, out_types: Any = (), attrs: Any = None) -> bool:
        """Whether it computes the kernel's result for a node with these input types (and
        output types and attrs, for a form that declares rules on them)."""
        if not input_types or not all(t % 100 in self.dtypes for t in input_types):
            return False
        if self.out_dtypes is not None and not (
                out_types and all(t % 100 in self.out_dtypes for t in out_types)):
            return False
        if self.compose is not None:
            return attrs is not None and self.compose(attrs, input_types, out_types) is not None
        return self.holds is None or (attrs is not None and self.holds(attrs))

    def text(self, input_types: Any, out_types: Any, attrs: Any = None) -> str:
        """The expression for a node with these input and output types and attrs
        (``applies``)."""
        if self.compose is not None:
            return self.compose(attrs, input_types, out_types)
        if self.by_types and input_types and out_types:
            return self.by_types.get((input_types[0] % 100, out_types[0] % 100), self.expr)
        return self.expr


@dataclass(frozen=True)
class ArrayForm:
    """A kernel's core on arrays, for compiled programs (codegen.py): ``make(attrs)`` (the
    node's attrs as the kernel sees them) gives a function of the node's input arrays whose
    result, when it is an ndarray of the node's output dtype, is the kernel's result bit for
    bit; anything else it returns (None, a NumPy scalar, another dtype) or raises means: run
    the kernel, which gives the result or the error naming the node. ``make`` may answer
    None: no form for these attrs. The function is the kernel's own core (the fast path shares
    the slow path's code), for inputs of ``dtypes`` only; never bfloat16 (rounded by the
    kernel call only). An op of several outputs (Split) answers a tuple of one such ndarray
    per output. tests/test_fast_paths.py checks every declared dtype."""

    make: Callable[[Mapping[str, Any]], Callable[..., Any] | None]
    dtypes: frozenset[int]

    def __post_init__(self) -> None:
        from dfg.graphdef import dtypes as D

        if D.DT_BFLOAT16 in self.dtypes:
            raise RuntimeError("an array form cannot honour bfloat16")

    def function(self, input_types: Any, attrs: Any) -> Callable[..., Any] | None:
        """The function for a node with these input types and attrs, or None."""
        if not input_types or not all(t % 100 in self.dtypes for t in input_types):
            return None
        return self.make(attrs)


# How the scheduler treats an op without calling its kernel (OpSpec.transfer): 1 forwards its
# one input, 2 is a Switch, 3 a Merge (control_flow.py defines both), 4 a Const (its value,
# bound at plan time). 0: the kernel runs.
FORWARD, SWITCH, MERGE, CONST = 1, 2, 3, 4


@dataclass(frozen=True)
class OpSpec:
    """Everything dfg knows about one op's kernel on one device: the one record the plan,
    programs, codegen, limits and the scheduler ask (nothing else keeps per-op facts).

    Facts about the kernel are declared where it registers (``kernel(...)``); facts computed
    elsewhere are attached to the record by name (``declare``: limits.py's size estimators,
    a variant family's handlers). Frozen; records are replaced, never changed, and only while
    ``load_all`` imports the families."""

    op: str
    fn: Callable[..., Any] | None
    device: str = CPU
    # True: always run inline on the scheduling thread; False: always dispatch to the pool;
    # None: let the executor decide from the measured cost
    cheap: bool | None = None
    # presumed expensive until measured (convolutions, products, decompositions): a plan's
    # first step runs node by node, and from 32K input elements the op goes to the pool
    heavy: bool = False
    # the kernel's scalar form and the dtypes it is valid for (ScalarForm); None: none
    scalar: ScalarForm | None = None
    # the kernel's core on arrays, which compiled programs call directly (ArrayForm)
    array: ArrayForm | None = None
    # runs on BLAS's own threads: one at a time (blas.GATE), left out of a straight-line
    # program's mean cost (plan.PlanStats)
    blas: bool = False
    # the output-size estimator ``fn(bound kernel, args) -> bytes`` (limits.py); None: the
    # outputs cannot outgrow the inputs by much
    estimate: Callable[[Any, list], int] | None = None
    # FORWARD/SWITCH/MERGE/CONST: moved by the scheduler without a kernel call; 0: not
    transfer: int = 0
    # updates a ref variable's buffer in place, when the node has a ref input (the executor
    # runs it after other ready work; programs keep such a step node by node)
    writes_ref: bool = False
    # type of a variant value (TensorList, Optional, ragged) -> handler(ctx, *inputs): what
    # the op does when its first input is one (ZerosLike, AddN)
    variants: Mapping[type, Callable[..., Any]] = field(default_factory=dict)
    # whether the kernel touches the file system: "read", "write" or "read,write"; such a
    # kernel passes every path through the file gate (dfg.graphdef.files.check) first.
    # None: it touches no file (tests/test_file_gate.py scans the kernels' source for it)
    files: str | None = None
    # an asynchronous kernel's ``start(ctx, args, where, done)`` (executor/asyncop.py: it may
    # finish later, as a _Recv does); the scheduler calls it instead of ``fn``, and a plan
    # holding one runs node by node. None: the kernel is synchronous
    start: Callable[..., Any] | None = None
    # runs even when its inputs are dead (Send/Recv: a dead value crosses as dead)
    runs_dead: bool = False
    # the kernel may keep a prepared call in its node's context (KernelContext.fast) that
    # compiled programs call instead of the kernel call while it accepts the inputs
    prepared: bool = False

    def on_variant(self, ctx: Any, *inputs: Any) -> Any:
        """Run the handler the first input's variant family declared for this op."""
        fn = self.variants.get(type(inputs[0]))
        if fn is None:
            from dfg.graphdef.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"{self.op} is not defined for a {type(inputs[0]).__name__} (variant kinds it "
                f"takes: {', '.join(sorted(t.__name__ for t in self.variants)) or 'none'})")
        return fn(ctx, *inputs)


KernelDef = OpSpec   # the name kernel tests and benchmarks know

_KERNELS: dict[tuple[str, str], OpSpec] = {}
# facts declared (``declare``) for ops whose kernel has not registered yet
_PENDING: dict[str, dict[str, Any]] = {}
_loaded = False


def kernel(*ops: str, device: str = CPU, cheap: bool | None = None,
           scalar: ScalarForm | None = None, array: ArrayForm | None = None,
           heavy: bool = False, blas: bool = False,
           transfer: int = 0, writes_ref: bool = False, files: str | None = None,
           start: Callable[..., Any] | None = None, runs_dead: bool = False,
           prepared: bool = False) -> Callable:
    """Register the decorated function as the kernel of each op in ``ops``, with the facts
    of its record (see OpSpec)."""
    if files not in (None, "read", "write", "read,write"):
        raise ValueError(f"files must be None, 'read', 'write' or 'read,write', not {files!r}")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            key = (op, device)
            if key in _KERNELS and _KERNELS[key].fn is not fn:
                raise RuntimeError(f"two kernels registered for {op} on {device}")
            spec = OpSpec(op, fn, device, cheap, heavy, scalar, array, blas, transfer=transfer,
                          writes_ref=writes_ref, files=files, start=start,
                          runs_dead=runs_dead, prepared=prepared)
            pending = _PENDING.get(op)
            _KERNELS[key] = replace(spec, **pending) if pending else spec
        return fn

    return deco


def declare(*ops: str, estimate: Callable[[Any, list], int] | None = None,
            variant: tuple[type, Callable[..., Any]] | None = None) -> None:
    """Attach a fact computed outside the kernel's family to the records of ``ops`` (on every
    device): an output-size estimator (limits.py), or a ``(variant type, handler)``."""
    for op in ops:
        pending = _PENDING.setdefault(op, {})
        if estimate is not None:
            pending["estimate"] = estimate
        if variant is not None:
            pending["variants"] = {**pending.get("variants", {}), variant[0]: variant[1]}
        for key, spec in _KERNELS.items():
            if key[0] == op:
                _KERNELS[key] = replace(spec, **pending)


def declared_without_kernel() -> list[str]:
    """Ops a fact was declared for that have no kernel (a misspelt name, say)."""
    load_all()
    have = {op for op, _dev in _KERNELS}
    return sorted(op for op in _PENDING if op not in have)


def specs(device: str = CPU) -> dict[str, OpSpec]:
    """op -> its record on ``device``."""
    load_all()
    return {op: s for (op, dev), s in _KERNELS.items() if dev == device}


def load_all() -> None:
    """Import every family module (registration happens at import)."""
    global _loaded
    if _loaded:
        return
    for fam in FAMILIES:
        try:
            importlib.import_module(f"{__package__}.{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{fam}":
                raise
    from .. import (
        devices,  # noqa: F401  optional devices register their kernels
        limits,  # noqa: F401  size estimators are declared on the records
    )

    _loaded = True


def lookup(op: str, device: str = CPU) -> OpSpec | None:
    load_all()
    return _KERNELS.get((op, device))


def has_kernel(op: str, device: str = CPU) -> bool:
    return lookup(op, device) is not None


def ops_with_kernels(device: str | None = None) -> dict[str, list[str]]:
    """op -> sorted devices having a kernel for it (only ``device`` if given)."""
    load_all()
    out: dict[str, list[str]] = {}
    for op, dev in _KERNELS:
        if device is None or dev == device:
            out.setdefault(op, []).append(dev)
    return {k: sorted(v) for k, v in sorted(out.items())}


def file_ops(device: str | None = None) -> dict[str, str]:
    """op -> the file access its kernel declares (``files=``): the ops behind the file gate,
    from the registry itself."""
    load_all()
    return {op: kd.files for (op, dev), kd in sorted(_KERNELS.items())
            if kd.files and (device is None or dev == device)}


class KernelContext:
    """What a kernel may know about its node and run. Built by the executor per node."""

    __slots__ = ("node", "op", "attrs", "output_dtypes", "input_dtypes", "resources", "step",
                 "frame", "deadline", "max_bytes", "memo", "fits", "fast")

    def __init__(self, node: str, op: str, attrs: dict[str, Any],
                 output_dtypes: list[Any] | None = None, input_dtypes: list[Any] | None = None,
                 resources: Any = None, step: Any = None, frame: Any = None,
                 deadline: float | None = None, max_bytes: int | None = None) -> None:
        self.node = node
        self.op = op
        self.attrs = attrs
        self.output_dtypes = output_dtypes or []   # numpy dtypes (None for resource/variant)
        self.input_dtypes = input_dtypes or []
        self.resources = resources  # session-lifetime ResourceManager (variables ...)
        self.step = step            # per-run dict for step resources (TensorArrays, stacks)
        self.frame = frame          # (frame name, iteration) the node runs in, if any
        self.deadline = deadline    # time.monotonic() the step must end by, if any
        self.max_bytes = max_bytes  # the step's memory budget (executor/limits.py), if any
        # what the kernel derived from its attrs and its inputs' shapes and dtypes, and from
        # the values of inputs that cannot change (a Const's frozen array, tensors.frozen,
        # kept by identity with the array itself): a stateless node's context serves every
        # run of a plan, so a kernel that keeps its plan here (a convolution's geometry, its
        # filter packed for the compiled kernel) redoes it only when the shapes or those
        # arrays change. Replaced whole, never mutated: concurrent steps see one plan or
        # the other.
        self.memo: Any = None
        # (input shapes, budget) the memory budget last admitted, for an estimator that reads
        # only shapes (kernel_call.call); replaced whole, as memo
        self.fits: Any = None
        # a kernel registered ``prepared`` may leave here ``fast(*inputs)``: its kept work
        # (a convolution's packed filter) run directly, giving the kernel's output, or None
        # when the inputs are not those it was kept for (other shapes, another filter, the
        # compiled kernels refused). Compiled programs call it first and the kernel call on
        # None or on any error (which the call then raises, naming the node). Set only
        # after the kernel ran on such inputs, within the budget; replaced whole, as memo.
        self.fast: Any = None


def invoke(op: str, *inputs: Any, attrs: dict[str, Any] | None = None,
           device: str = CPU, resources: Any = None, step: Any = None) -> Any:
    """Call ``op``'s kernel directly, outside any graph (for kernel unit tests and folding).

    ``attrs`` are given as the kernel sees them (plain Python values); inputs are converted
    with ``np.asarray`` when they are not already arrays or objects the kernel expects.
    """
    from ..kernel_call import bind_op, context, run_once

    args = [x if isinstance(x, np.ndarray) or _is_opaque(x) else np.asarray(x) for x in inputs]
    k = bind_op(op, complete_attrs(op, dict(attrs or {}), args), device)
    return run_once(k, args, context(k, resources, step if step is not None else {}))


def complete_attrs(op: str, attrs: dict[str, Any], args: list[Any]) -> dict[str, Any]:
    """Fill attrs a test left out: type/number attrs from the inputs, then OpDef defaults."""
    from dfg.graphdef.attrs import to_python
    from dfg.graphdef.opdefs.registry import registry

    opdef = registry().get(op)
    if opdef is None:
        return attrs
    k = 0
    for arg in opdef.input_arg:
        if arg.number_attr:
            n = attrs.get(arg.number_attr)
            if n is None:
                n = attrs[arg.number_attr] = len(args) - k - (len(opdef.input_arg) - 1)
            if arg.type_attr and arg.type_attr not in attrs and k < len(args):
                attrs[arg.type_attr] = np.asarray(args[k]).dtype
            k += n
        elif arg.type_list_attr:
            rest = len(args) - k - (len(opdef.input_arg) - 1)
            if arg.type_list_attr not in attrs:
                attrs[arg.type_list_attr] = [np.asarray(a).dtype for a in args[k:k + rest]]
            k += rest
        else:
            if arg.type_attr and arg.type_attr not in attrs and k < len(args) \
                    and isinstance(args[k], np.ndarray):
                attrs[arg.type_attr] = args[k].dtype
            k += 1
    for ad in opdef.attr:
        if ad.name not in attrs and ad.HasField("default_value"):
            attrs[ad.name] = to_python(ad.default_value, numpy_types=True)
    return attrs


def _is_opaque(x: Any) -> bool:
    return hasattr(x, "__dfg_resource__")
