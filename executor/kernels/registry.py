"""The one kernel registry: op type (and device) -> kernel function.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# The one explicit list of kernel families (one module per family under this package).
FAMILIES = (
    "basic", "control_flow", "state", "math", "array", "reduction", "nn", "grad",
    "tensor_array", "image", "random", "string", "tensor_list", "io",
    "losses", "training", "linalg", "lookup", "segment", "sparse", "detection", "fused",
    "spectral", "special", "ragged", "parsing", "formats", "quantization", "rnn",
    "queue", "summary", "optional",
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
    (``kernel_call.call``); tests/test_fast_paths.py checks every declared dtype."""

    expr: str
    dtypes: frozenset[int]

    def __post_init__(self) -> None:
        from dfg.graphdef import dtypes as D

        bad = self.dtypes & {D.DT_BFLOAT16, D.DT_STRING, D.DT_COMPLEX64, D.DT_COMPLEX128,
                             D.DT_RESOURCE, D.DT_VARIANT}
        if bad:
            raise RuntimeError(f"scalar form {self.expr!r} cannot honour dtypes {sorted(bad)}")

    def applies(self, input_types: Any) -> bool:
        """Whether it computes the kernel's result for a node with these input types."""
        return bool(input_types) and all(t % 100 in self.dtypes for t in input_types)


@dataclass(frozen=True)
class KernelDef:
    op: str
    fn: Callable[..., Any]
    device: str = CPU
    # True: always run inline on the scheduling thread; False: always dispatch to the pool;
    # None: let the executor decide from the measured cost.
    cheap: bool | None = None
    # the kernel's scalar form and the dtypes it is valid for (ScalarForm); None: none
    scalar: ScalarForm | None = None


_KERNELS: dict[tuple[str, str], KernelDef] = {}
_loaded = False


def kernel(*ops: str, device: str = CPU, cheap: bool | None = None,
           scalar: ScalarForm | None = None) -> Callable:
    """Register the decorated function as the kernel of each op in ``ops`` (``scalar``: its
    scalar form, see KernelDef)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            key = (op, device)
            if key in _KERNELS and _KERNELS[key].fn is not fn:
                raise RuntimeError(f"two kernels registered for {op} on {device}")
            _KERNELS[key] = KernelDef(op, fn, device, cheap, scalar)
        return fn

    return deco


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
    from .. import devices  # noqa: F401  optional devices register their kernels

    _loaded = True


def lookup(op: str, device: str = CPU) -> KernelDef | None:
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


class KernelContext:
    """What a kernel may know about its node and run. Built by the executor per node."""

    __slots__ = ("node", "op", "attrs", "output_dtypes", "input_dtypes", "resources", "step",
                 "frame", "deadline", "max_bytes")

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
