"""Session-lifetime state: variables (ref and resource) and the manager that owns them.

A ref variable (VariableV2) flows through the graph as its ``VariableRef``; consumers whose
OpDef input is not a ref receive the dereferenced value (the executor does that): the
variable's buffer itself, as in TensorFlow. Its updates (Assign, AssignAdd, scatters, the
Apply* optimizers, CountUpTo) write into that buffer (:meth:`VariableRef.store`), so a
tensor read from it earlier, such as ``v/read`` entering a while loop, sees them, as TF1
graphs expect. The buffer is the variable's own (copied on its first store, or when the
shape changes); ``Session.run`` hands out copies of it. Resource variables keep values
that are never mutated in place: TF2's reads are snapshots.
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

    def store(self, new: np.ndarray) -> None:
        """Give the variable ``new``: copied into its buffer when the shape and dtype allow
        (TF's AssignOp and DenseUpdate write in place), else into a buffer of its own."""
        old = self.value
        if old is new:
            return
        if old is not None and old.shape == np.shape(new) and old.dtype == np.asarray(
                new).dtype and old.flags.writeable:
            np.copyto(old, new)
        else:
            self.value = np.array(new, copy=True)

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

    def __init__(self, files: Any = None) -> None:
        self._lock = threading.Lock()          # guards _items
        self._items: dict[tuple[str, str], Any] = {}
        # the Session's file policy (dfg.graphdef.files.FilePolicy), which file-touching
        # kernels consult through files.check; None: everything allowed. Set once, read-only.
        self.files = files

    def lookup_or_create(self, key: tuple[str, str], factory: Any) -> Any:
        with self._lock:
            obj = self._items.get(key)
            if obj is None:
                obj = self._items[key] = factory()
            return obj

    def lookup(self, key: tuple[str, str]) -> Any | None:
        return self._items.get(key)

    def ref_buffers(self) -> set[int]:
        """The ids of the ref variables' buffers (what a fetch must copy: they change in
        place)."""
        return {id(v.value) for v in list(self._items.values())
                if type(v) is VariableRef and v.value is not None}

    def delete(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None

    def variables(self) -> dict[tuple[str, str], Any]:
        with self._lock:
            return dict(self._items)
