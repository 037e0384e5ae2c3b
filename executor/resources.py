"""Session-lifetime state: variables (ref and resource) and the manager that owns them.

A ref variable (VariableV2) flows through the graph as its ``VariableRef``; consumers whose
OpDef input is not a ref receive the dereferenced value (the executor does that). Values are
never mutated in place: an assignment rebinds ``value`` to a new array, so a tensor read
earlier in a step keeps the value it had when it was read.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from dfg.graphdef.errors import FailedPreconditionError


def node_resource_key(node: Any) -> tuple[str, str]:
    """The session key of the resource a VariableV2 / VarHandleOp / table NodeDef names:
    (container, shared_name or the node's name), as its kernel computes it from its attrs."""
    attr = node.attr
    container = attr["container"].s.decode() if "container" in attr else ""
    shared = attr["shared_name"].s.decode() if "shared_name" in attr else ""
    return container, shared or node.name


class VariableRef:
    """A variable's storage. ``lock`` guards read-modify-write updates (use_locking)."""

    __dfg_resource__ = True
    __slots__ = ("name", "dtype", "shape", "value", "lock")

    def __init__(self, name: str, dtype: np.dtype | None, shape: tuple | None) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.value: np.ndarray | None = None   # None until initialized
        self.lock = threading.Lock()

    def read(self) -> np.ndarray:
        v = self.value
        if v is None:
            raise FailedPreconditionError(
                f"Attempting to use uninitialized value {self.name}")
        return v

    def __repr__(self) -> str:
        return f"VariableRef({self.name!r})"


class ResourceHandle:
    """What a VarHandleOp outputs: the key of a resource in the session's manager."""

    __dfg_resource__ = True
    __slots__ = ("container", "name", "dtype", "shape")

    def __init__(self, container: str, name: str, dtype: Any = None, shape: Any = None) -> None:
        self.container = container
        self.name = name
        self.dtype = dtype
        self.shape = shape

    @property
    def key(self) -> tuple[str, str]:
        return (self.container, self.name)

    def __repr__(self) -> str:
        return f"ResourceHandle({self.container!r}, {self.name!r})"


class ResourceManager:
    """Resources living as long as the Session: ``(container, name) -> object``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()          # guards _items
        self._items: dict[tuple[str, str], Any] = {}

    def lookup_or_create(self, key: tuple[str, str], factory: Any) -> Any:
        with self._lock:
            obj = self._items.get(key)
            if obj is None:
                obj = self._items[key] = factory()
            return obj

    def lookup(self, key: tuple[str, str]) -> Any | None:
        return self._items.get(key)

    def delete(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None

    def variables(self) -> dict[tuple[str, str], Any]:
        with self._lock:
            return dict(self._items)
