"""The builder's graph model: ``Graph``, ``Operation``, ``Tensor``, and the scopes TensorFlow
keeps while a graph is written (name scopes, control dependencies, devices, colocation,
control-flow contexts).

Names follow TensorFlow's rule (``Graph.unique_name``): names are compared lower-cased; the
second ``add`` becomes ``add_1``, and a name scope reserves its name like an op does. Attrs
are checked and completed with the OpDef registry, so output dtypes and defaults come from
the same OpDefs every dfg tool reads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .. import dtypes as D
from ..errors import InvalidArgumentError, NotFoundError, UsageError
from ..opdefs.registry import registry
from ..tensors import format_shape
from . import attrs as A

Shape = tuple  # of int | None; None instead of a tuple: unknown rank


class Tensor:
    """Output ``index`` of ``op``. ``dtype`` is a DataType number (ref types for VariableV2);
    ``shape`` the static shape TensorFlow would infer, None when unknown."""

    __array_priority__ = 100  # numpy defers `ndarray + Tensor` to Tensor.__radd__

    def __init__(self, op: Operation, index: int, dtype: int) -> None:
        self.op = op
        self.value_index = index
        self.dtype = dtype
        self.shape: Shape | None = None

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    @property
    def graph(self) -> Graph:
        return self.op.graph

    def _input_string(self) -> str:
        return self.op.name if self.value_index == 0 else self.name

    def get_shape(self) -> Shape | None:
        return self.shape

    def __repr__(self) -> str:
        return (f"<Tensor {self.name} shape={format_shape(self.shape)} "
                f"dtype={D.name(self.dtype)}>")

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        # TensorFlow refuses too: a Python `if` would pick one branch at build time
        raise TypeError("a graph Tensor has no truth value; use builder.cond for a branch")

    def __iter__(self) -> Any:
        # without it Python iterates through __getitem__ (a StridedSlice per index) forever
        raise TypeError("a graph Tensor is not iterable in Python; loop over it with "
                        "builder.while_loop or in a function decorated with builder.autograph")

    # operator overloading lives in ops.py (installed on this class there)


class Operation:
    """One node. ``inputs`` may be rewritten by control-flow contexts (a tensor from outside a
    cond branch goes through a Switch) before the graph is exported."""

    def __init__(self, graph: Graph, name: str, op_type: str, inputs: list[Tensor],
                 attrs: dict[str, Any], output_types: list[int]) -> None:
        self.graph = graph
        self.name = name
        self.type = op_type
        self.inputs = list(inputs)
        self.control_inputs: list[Operation] = []
        self.attrs = attrs            # attr name -> AttrValue proto
        self.device = ""
        self.outputs = [Tensor(self, i, t) for i, t in enumerate(output_types)]
        self.ctxt: Any = None         # the control-flow context the op was built in

    def __repr__(self) -> str:
        return f"<Operation {self.name} ({self.type})>"

    def _add_control_input(self, op: Operation) -> None:
        if op not in self.control_inputs:
            self.control_inputs.append(op)

    def get_attr(self, name: str) -> Any:
        from ..attrs import to_python
        return to_python(self.attrs[name])

    def colocation_groups(self) -> list[str]:
        if "_class" in self.attrs:
            return [s.decode() for s in self.attrs["_class"].list.s]
        return [f"loc:@{self.name}"]

    def node_def(self) -> Any:
        from dfg.schemas import node_def_pb2
        nd = node_def_pb2.NodeDef(name=self.name, op=self.type, device=self.device)
        nd.input.extend(t._input_string() for t in self.inputs)
        # sorted by name, as TensorFlow writes a node's control inputs
        nd.input.extend(sorted("^" + c.name for c in self.control_inputs))
        for k, v in self.attrs.items():
            nd.attr[k].CopyFrom(v)
        return nd


class _Controller:
    """One ``control_dependencies`` block: the ops it adds, and the ops built inside it (an
    op with a data input built inside needs no extra edge: it is already ordered)."""

    def __init__(self, control_inputs: list[Operation]) -> None:
        self.control_inputs = control_inputs
        self.seen: set[int] = set()


_default = threading.local()


def get_default_graph() -> Graph:
    stack = getattr(_default, "stack", None)
    if not stack:
        g = getattr(_default, "global_graph", None)
        if g is None:
            g = _default.global_graph = Graph()
        return g
    return stack[-1]


def reset_default_graph() -> None:
    _default.global_graph = Graph()


class Graph:
    """A graph under construction. ``with Graph().as_default():`` makes it the graph the
    builder's functions add to."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        self._controllers: list[_Controller] = []
        self._devices: list[str] = []
        self._colocation: list[Operation] = []
        self._ctxt: Any = None            # current control-flow context (control_flow.py)
        self.variables: list[Any] = []    # Variable objects, in creation order
        self._attr_scope: dict[str, Any] = {}

    # --- default graph ------------------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        stack = getattr(_default, "stack", None)
        if stack is None:
            stack = _default.stack = []
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # --- names --------------------------------------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """TensorFlow's rule: prefix the name scope; if the lower-cased name is taken, append
        ``_1``, ``_2`` ... skipping names that are taken as well."""
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name: str | None, default_name: str | None = None) -> Iterator[str]:
        """Yields the scope (ending in ``/``). A name ending in ``/`` is taken as is (an
        absolute scope, as when re-entering one); ``""`` resets to the top."""
        if name is None:
            name = default_name
        old = self._name_stack
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield new + "/" if new else ""
        finally:
            self._name_stack = old

    def get_operation_by_name(self, name: str) -> Operation:
        try:
            return self._by_name[name]
        except KeyError:
            raise NotFoundError(f"no operation named '{name}' in the graph") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        op_name, _, idx = name.rpartition(":")
        if not op_name:
            op_name, idx = name, "0"
        return self.get_operation_by_name(op_name).outputs[int(idx)]

    # --- scopes -------------------------------------------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Any) -> Iterator[None]:
        """Ops built inside run after ``control_inputs``; ``None`` clears the outer blocks."""
        if control_inputs is None:
            saved, self._controllers = self._controllers, []
            try:
                yield
            finally:
                self._controllers = saved
            return
        current = {id(c) for ctl in self._controllers for c in ctl.control_inputs}
        ops: list[Operation] = []
        for c in control_inputs:
            c = as_op(c)
            if id(c) not in current:
                ops.append(c)
                current.add(id(c))
        ctl = _Controller(ops)
        self._controllers.append(ctl)
        try:
            yield
        finally:
            self._controllers.remove(ctl)

    @contextlib.contextmanager
    def device(self, name: str | None) -> Iterator[None]:
        self._devices.append(canonical_device(name or ""))
        try:
            yield
        finally:
            self._devices.pop()

    @contextlib.contextmanager
    def colocate_with(self, op: Any, ignore_existing: bool = False) -> Iterator[None]:
        saved = self._colocation
        if op is None:
            self._colocation = []
        else:
            self._colocation = ([] if ignore_existing else list(saved)) + [as_op(op)]
        try:
            yield
        finally:
            self._colocation = saved

    # --- ops ----------------------------------------------------------------------------
    def create_op(self, op_type: str, inputs: list[Tensor], attrs: dict[str, Any],
                  name: str, shape_fn: Any = None) -> Operation:
        """Add a node. ``name`` ending in ``/`` is a scope already made unique (the op takes
        it without the slash); otherwise it is made unique. ``attrs`` holds AttrValues or
        plain values (converted with the OpDef's attr types); missing ones get the OpDef's
        defaults, as TensorFlow's op_def_library does."""
        opdef = registry().get(op_type)
        if opdef is None:
            raise NotFoundError(f"op type '{op_type}' is not registered", op=op_type)
        name = name[:-1] if name.endswith("/") else self.unique_name(name)
        avs = A.to_attr_values(op_type, attrs)
        from dfg.schemas import node_def_pb2
        nd = node_def_pb2.NodeDef(name=name, op=op_type)
        for k, v in avs.items():
            nd.attr[k].CopyFrom(v)
        registry().fill_defaults(nd)
        try:
            in_types = registry().input_types(nd, opdef)
            out_types = registry().output_types(nd, opdef)
        except ValueError as e:
            raise InvalidArgumentError(str(e), node=name, op=op_type) from None
        if len(in_types) != len(inputs):
            raise InvalidArgumentError(
                f"expected {len(in_types)} inputs, found {len(inputs)}", node=name, op=op_type)
        for i, (t, want) in enumerate(zip(inputs, in_types)):
            ok = t.dtype == want or (not D.is_ref(want) and D.base(t.dtype) == want)
            if not ok:
                raise InvalidArgumentError(
                    f"input {i} ('{t.name}') expected {D.name(want)}, found {D.name(t.dtype)}",
                    node=name, op=op_type)
        op = Operation(self, name, op_type, inputs, dict(nd.attr), out_types)
        op.device = self._devices[-1] if self._devices else ""
        if self._colocation:
            groups = sorted({g for c in self._colocation for g in c.colocation_groups()})
            op.attrs["_class"] = A.to_attr_value(
                [g.encode() for g in groups], "list(string)")
            if self._colocation[-1].device:
                op.device = self._colocation[-1].device
        for k, v in self._attr_scope.items():
            op.attrs[k] = v
        # control dependencies (TensorFlow's _control_dependencies_for_inputs)
        input_ops = {id(t.op) for t in inputs}
        for ctl in self._controllers:
            if any(i in ctl.seen for i in input_ops):
                continue
            for c in ctl.control_inputs:
                if id(c) not in input_ops:
                    op._add_control_input(c)
        for ctl in self._controllers:
            ctl.seen.add(id(op))
        self.ops.append(op)
        self._by_name[name] = op
        if shape_fn is None:
            from .shapes import infer
            shape_fn = infer
        try:
            shapes = shape_fn(op)
        except Exception:  # a shape rule never blocks building: the shape stays unknown
            shapes = None
        if shapes is not None:
            for t, s in zip(op.outputs, shapes):
                t.shape = s
        if self._ctxt is not None:
            op.ctxt = self._ctxt
            self._ctxt.add_op(op)
        return op

    # --- export -------------------------------------------------------------------------
    def as_graph_def(self) -> Any:
        """The GraphDef (nodes in creation order, producer version of TensorFlow 2.21)."""
        from dfg.schemas import graph_pb2
        gd = graph_pb2.GraphDef()
        for op in self.ops:
            gd.node.add().CopyFrom(op.node_def())
        # FunctionDefs of functional If/While (functional.py), in creation order
        for fd in getattr(self, "library", {}).values():
            gd.library.function.add().CopyFrom(fd)
        gd.versions.producer = 2474
        return gd

    def save(self, path: str) -> None:
        from ..io import save_graphdef
        save_graphdef(self.as_graph_def(), path)


def canonical_device(spec: str) -> str:
    """TensorFlow's device string form: ``/cpu:0`` -> ``/device:CPU:0``, fields ordered
    job, replica, task, device."""
    fields: dict[str, str] = {}
    for part in spec.strip("/").split("/"):
        if not part:
            continue
        key, _, rest = part.partition(":")
        low = key.lower()
        if low in ("job", "replica", "task"):
            fields[low] = rest
        elif low == "device":
            typ, _, idx = rest.partition(":")
            fields["device"] = f"{typ.upper()}:{idx or '*'}"
        elif low in ("cpu", "gpu", "tpu"):
            fields["device"] = f"{low.upper()}:{rest or '*'}"
        else:
            raise UsageError(f"unknown device spec '{spec}'")
    return "".join(f"/{k}:{fields[k]}" for k in ("job", "replica", "task", "device")
                   if k in fields)


def as_op(x: Any) -> Operation:
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    op = getattr(x, "op", None)   # a Variable
    if isinstance(op, Operation):
        return op
    raise UsageError(f"expected an Operation or Tensor, found {type(x).__name__}")


def as_dtype(dtype: Any) -> int:
    """A DataType number from an int, a name ('float32'), or a numpy dtype."""
    if dtype is None:
        raise UsageError("dtype is required")
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return dtype
    if isinstance(dtype, str):
        return D.from_name(dtype)
    return D.from_numpy(dtype)
