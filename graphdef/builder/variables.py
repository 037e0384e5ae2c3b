"""Variables as TensorFlow 1.x creates them.

Ref variables (the default): ``VariableV2`` ``W``, its initializer ``W/Assign`` and the
snapshot ``W/read`` (an Identity), both colocated with ``W`` (``_class: loc:@W``). Resource
variables (``resource=True``): ``VarHandleOp`` ``W``, ``W/IsInitialized/VarIsInitializedOp``,
``W/Assign`` (AssignVariableOp) and ``W/Read/ReadVariableOp``; each use reads afresh
(``MatMul/ReadVariableOp``).
"""

from __future__ import annotations

from typing import Any

from .. import dtypes as D
from ..errors import InvalidArgumentError
from .core import Operation, Tensor, as_dtype, get_default_graph
from .ops import apply_op, convert_to_tensor, group


class Variable:
    def __init__(self, initial_value: Any, name: str | None = None, dtype: Any = None,
                 trainable: bool = True, resource: bool = False,
                 validate_shape: bool = True) -> None:
        g = get_default_graph()
        self.graph = g
        self.resource = resource
        self.trainable = trainable
        with g.control_dependencies(None), g.name_scope(name, "Variable") as scope:
            init = convert_to_tensor(initial_value, dtype, name="initial_value")
            self.initial_value = init
            dt = D.base(init.dtype)
            self.dtype = dt
            shape = init.shape if validate_shape else None
            if resource:
                self.op = g.create_op("VarHandleOp", [], {
                    "dtype": dt, "shape": shape, "shared_name": scope[:-1],
                    "allowed_devices": []}, name=scope)
                self.handle = self.op.outputs[0]
                with g.name_scope("IsInitialized"):
                    apply_op("VarIsInitializedOp", [self.handle])
                with g.colocate_with(self.op):
                    self.initializer = apply_op("AssignVariableOp", [self.handle, init],
                                                {"dtype": dt, "validate_shape": False},
                                                name="Assign")
                    with g.name_scope("Read"):
                        self._snapshot = apply_op("ReadVariableOp", [self.handle],
                                                  {"dtype": dt}).outputs[0]
            else:
                self.op = g.create_op("VariableV2", [], {
                    "dtype": dt, "shape": shape, "container": "", "shared_name": ""},
                    name=scope)
                self._ref = self.op.outputs[0]
                with g.colocate_with(self.op):
                    self.initializer = apply_op(
                        "Assign", [self._ref, init],
                        {"validate_shape": validate_shape, "use_locking": True},
                        name="Assign")
                    self._snapshot = apply_op("Identity", [self._ref], name="read").outputs[0]
            self._snapshot.shape = init.shape
        self.shape = init.shape
        g.variables.append(self)

    @property
    def name(self) -> str:
        return self.op.name + ":0"

    def __repr__(self) -> str:
        return f"<Variable {self.op.name} dtype={D.name(self.dtype)}>"

    def _as_tensor(self, as_ref: bool = False) -> Tensor:
        if self.resource:
            if as_ref:
                return self.handle
            return self.read_value()
        return self._ref if as_ref else self._snapshot

    def value(self) -> Tensor:
        return self._snapshot

    def read_value(self) -> Tensor:
        if not self.resource:
            return self._snapshot
        return apply_op("ReadVariableOp", [self.handle], {"dtype": self.dtype}).outputs[0]

    def assign(self, value: Any, name: str | None = None) -> Operation | Tensor:
        if self.resource:
            return apply_op("AssignVariableOp", [self.handle, value],
                            {"dtype": self.dtype, "validate_shape": False}, name=name,
                            default_name="AssignVariableOp")
        return apply_op("Assign", [self._ref, value], {"use_locking": False,
                                                      "validate_shape": True},
                        name=name).outputs[0]

    def assign_add(self, value: Any, name: str | None = None) -> Any:
        if self.resource:
            return apply_op("AssignAddVariableOp", [self.handle, value],
                            {"dtype": self.dtype}, name=name)
        return apply_op("AssignAdd", [self._ref, value], {"use_locking": False},
                        name=name).outputs[0]

    def assign_sub(self, value: Any, name: str | None = None) -> Any:
        if self.resource:
            return apply_op("AssignSubVariableOp", [self.handle, value],
                            {"dtype": self.dtype}, name=name)
        return apply_op("AssignSub", [self._ref, value], {"use_locking": False},
                        name=name).outputs[0]

    def initialized_value(self) -> Tensor:
        """The value once initialized: ``cond(IsVariableInitialized(W), W/read, initial)``
        as TensorFlow 2.x's v1 variables build it."""
        from .control_flow import cond
        g = self.graph
        with g.control_dependencies(None):
            if self.resource:
                inited = apply_op("VarIsInitializedOp", [self.handle]).outputs[0]
            else:
                inited = apply_op("IsVariableInitialized", [self._ref],
                                  {"dtype": self.dtype}).outputs[0]
            return cond(inited, self.read_value, lambda: self.initial_value)


def _forward(name: str) -> Any:
    def f(self: Variable, *args: Any) -> Any:
        return getattr(Tensor, name)(self._as_tensor(), *args)
    return f


for _n in ["__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
           "__truediv__", "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__neg__",
           "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__matmul__", "__rmatmul__",
           "__getitem__"]:
    setattr(Variable, _n, _forward(_n))


def variable(initial_value: Any, name: str | None = None, dtype: Any = None,
             trainable: bool = True, resource: bool = False) -> Variable:
    """A variable (tf.compat.v1.Variable); ``resource=True`` for a resource variable."""
    if dtype is not None:
        dtype = as_dtype(dtype)
    return Variable(initial_value, name=name, dtype=dtype, trainable=trainable,
                    resource=resource)


def global_variables(graph: Any = None) -> list[Variable]:
    return list((graph or get_default_graph()).variables)


def trainable_variables(graph: Any = None) -> list[Variable]:
    return [v for v in global_variables(graph) if v.trainable]


def variables_initializer(var_list: list[Variable], name: str = "init") -> Operation:
    if not var_list:
        return apply_op("NoOp", [], name=name)
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    """A NoOp ``init`` with a control input on every variable's initializer."""
    vs = global_variables()
    if not vs:
        raise InvalidArgumentError("the graph has no variables to initialize")
    return variables_initializer(vs)
