"""Lookup tables: HashTable / MutableHashTable (V1 ref handles and V2 resource handles),
MutableHashTableOfTensors, and the LookupTable* ops that read and change them.

A table is a session-lifetime resource (like a variable): the op that creates it stores a
:class:`Table` in the session's ResourceManager under (container, shared_name or node name)
and outputs a handle (V2) or the table itself (V1's ``Ref(string)`` handle). Values are
plain Python dicts keyed by the key's Python value (bytes for strings), guarded by a lock.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from dfg.graphdef.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

from ..resources import ResourceHandle
from .registry import KernelContext, kernel


class Table:
    """One lookup table. ``lock`` guards ``data`` and ``initialized``."""

    __dfg_resource__ = True

    def __init__(self, name: str, key_dtype: Any, value_dtype: Any, value_shape: tuple,
                 mutable: bool) -> None:
        self.name = name
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self.value_shape = value_shape
        self.mutable = mutable
        self.initialized = mutable  # mutable tables start empty and usable
        self.data: dict[Any, Any] = {}
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Table({self.name!r})"


def _create(ctx: KernelContext, mutable: bool, value_shape: tuple = ()) -> tuple:
    a = ctx.attrs
    name = a.get("shared_name") or ""
    if not name:
        # use_node_name_sharing, or TF's per-kernel private table: either way one table per
        # node for the session's life
        name = ctx.node
    key = (a.get("container") or "", name)
    table = ctx.resources.lookup_or_create(
        key, lambda: Table(name, a.get("key_dtype"), a.get("value_dtype"), value_shape, mutable))
    return key, table


@kernel("HashTableV2", cheap=True)
def hash_table_v2(ctx: KernelContext):
    key, _ = _create(ctx, False)
    return ResourceHandle(key[0], key[1])


@kernel("HashTable", cheap=True)
def hash_table(ctx: KernelContext):
    return _create(ctx, False)[1]


@kernel("MutableHashTableV2", cheap=True)
def mutable_hash_table_v2(ctx: KernelContext):
    key, _ = _create(ctx, True)
    return ResourceHandle(key[0], key[1])


@kernel("MutableHashTable", cheap=True)
def mutable_hash_table(ctx: KernelContext):
    return _create(ctx, True)[1]


def _shape_attr(ctx: KernelContext) -> tuple:
    shape = ctx.attrs.get("value_shape") or ()
    return tuple(int(d) for d in shape)


@kernel("MutableHashTableOfTensorsV2", cheap=True)
def mutable_hash_table_of_tensors_v2(ctx: KernelContext):
    key, _ = _create(ctx, True, _shape_attr(ctx))
    return ResourceHandle(key[0], key[1])


@kernel("MutableHashTableOfTensors", cheap=True)
def mutable_hash_table_of_tensors(ctx: KernelContext):
    return _create(ctx, True, _shape_attr(ctx))[1]


def _table(ctx: KernelContext, handle: Any) -> Table:
    if isinstance(handle, Table):
        return handle
    table = ctx.resources.lookup(handle.key) if isinstance(handle, ResourceHandle) else None
    if table is None:
        raise NotFoundError(f"Resource {getattr(handle, 'name', handle)} does not exist: "
                            f"the table was not created in this session")
    return table


def _check_types(table: Table, keys: np.ndarray, values: np.ndarray | None) -> None:
    if table.key_dtype is not None and keys.dtype != table.key_dtype:
        raise InvalidArgumentError(
            f"Conflicting key type: table {table.name} has keys of {table.key_dtype}, got "
            f"{keys.dtype}")
    if values is not None and table.value_dtype is not None \
            and values.dtype != table.value_dtype:
        raise InvalidArgumentError(
            f"Conflicting value type: table {table.name} has values of {table.value_dtype}, "
            f"got {values.dtype}")


def _rows(table: Table, keys: np.ndarray, values: np.ndarray) -> list[tuple[Any, Any]]:
    vs = table.value_shape
    if values.shape != keys.shape + vs:
        raise InvalidArgumentError(
            f"Expected shape {list(keys.shape + vs)} for value, got {list(values.shape)}")
    flat_v = values.reshape((keys.size,) + vs)
    return [(k, (v.copy() if vs else v)) for k, v in
            zip(keys.reshape(-1).tolist(), list(flat_v) if vs else flat_v.tolist())]


def _initialize(ctx: KernelContext, handle: Any, keys: np.ndarray, values: np.ndarray):
    table = _table(ctx, handle)
    _check_types(table, keys, values)
    if keys.shape != values.shape:
        raise InvalidArgumentError(
            f"Expected shape {list(keys.shape)} for values, got {list(values.shape)}")
    with table.lock:
        if table.initialized:
            # TF: a second initialization with the same contents is a no-op
            return ()
        data: dict[Any, Any] = {}
        for k, v in _rows(table, keys, values):
            if k in data and data[k] != v:
                raise FailedPreconditionError(
                    f"HashTable has different value for same key. Key {k!r} has {data[k]!r} "
                    f"and trying to add value {v!r}")
            data[k] = v
        table.data = data
        table.initialized = True
    return ()


kernel("InitializeTableV2", "InitializeTable")(_initialize)


@kernel("InitializeTableFromTextFileV2", "InitializeTableFromTextFile")
def initialize_table_from_text_file(ctx: KernelContext, handle: Any, filename: np.ndarray):
    table = _table(ctx, handle)
    a = ctx.attrs
    key_index, value_index = int(a.get("key_index")), int(a.get("value_index"))
    vocab_size, offset = int(a.get("vocab_size", -1)), int(a.get("offset", 0))
    delim = a.get("delimiter", "\t")
    delim = delim.encode() if isinstance(delim, str) else delim
    path = filename.item()
    path = path.decode() if isinstance(path, bytes) else str(path)
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError as e:
        raise NotFoundError(f"{path}; {e.strerror}") from None
    if lines and lines[-1] == b"":
        lines.pop()
    if vocab_size != -1:
        if len(lines) < vocab_size:
            raise InvalidArgumentError(
                f"Invalid vocab_size in {path}: expected {vocab_size} lines, got {len(lines)}")
        lines = lines[:vocab_size]

    def column(line: bytes, lineno: int, index: int, dtype: Any) -> Any:
        if index == -2:  # the whole line
            field = line
        elif index == -1:  # the line number
            return lineno + offset
        else:
            parts = line.split(delim)
            if index >= len(parts):
                raise InvalidArgumentError(
                    f"Invalid number of columns in {path} line {lineno} ({_show(line)}) : "
                    f"expected at least {index + 1}, got {len(parts)}")
            field = parts[index]
        if dtype is None or np.dtype(dtype) == object:
            return field
        try:
            return np.dtype(dtype).type(field.decode()).item()
        except ValueError:
            raise InvalidArgumentError(
                f"Field {_show(field)} in line {lineno} is not a valid {np.dtype(dtype)}") \
                from None

    data = {}
    for i, line in enumerate(lines):
        data[column(line, i, key_index, table.key_dtype)] = \
            column(line, i, value_index, table.value_dtype)
    with table.lock:
        if not table.initialized:
            table.data = data
            table.initialized = True
    return ()


def _show(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _ready(table: Table) -> None:
    if not table.initialized:
        raise FailedPreconditionError(f"Table not initialized: {table.name}")


@kernel("LookupTableFindV2", "LookupTableFind")
def lookup_table_find(ctx: KernelContext, handle: Any, keys: np.ndarray,
                      default: np.ndarray) -> np.ndarray:
    table = _table(ctx, handle)
    _check_types(table, keys, default)
    _ready(table)
    vs = table.value_shape
    dt = table.value_dtype if table.value_dtype is not None else default.dtype
    if vs:
        if default.shape != vs:
            raise InvalidArgumentError(
                f"Expected shape {list(vs)} for default value, got {list(default.shape)}")
        out = np.empty((keys.size,) + vs, dtype=dt)
        with table.lock:
            for i, k in enumerate(keys.reshape(-1).tolist()):
                out[i] = table.data.get(k, default)
        return out.reshape(keys.shape + vs)
    if default.ndim != 0 and default.shape != keys.shape:
        raise InvalidArgumentError(
            f"Expected shape {list(keys.shape)} or [] for default value, got "
            f"{list(default.shape)}")
    dflt = np.broadcast_to(default, keys.shape).reshape(-1).tolist()
    with table.lock:
        got = [table.data.get(k, d) for k, d in zip(keys.reshape(-1).tolist(), dflt)]
    out = np.empty(len(got), dtype=dt)
    out[:] = got
    return out.reshape(keys.shape)


@kernel("LookupTableInsertV2", "LookupTableInsert")
def lookup_table_insert(ctx: KernelContext, handle: Any, keys: np.ndarray, values: np.ndarray):
    table = _table(ctx, handle)
    _check_types(table, keys, values)
    if not table.mutable:
        raise _immutable(table)
    rows = _rows(table, keys, values)
    with table.lock:
        table.data.update(rows)
    return ()


def _immutable(table: Table) -> UnimplementedError:
    return UnimplementedError(f"Table {table.name} is not mutable")


@kernel("LookupTableRemoveV2")
def lookup_table_remove(ctx: KernelContext, handle: Any, keys: np.ndarray):
    table = _table(ctx, handle)
    _check_types(table, keys, None)
    if not table.mutable:
        raise _immutable(table)
    with table.lock:
        for k in keys.reshape(-1).tolist():
            table.data.pop(k, None)
    return ()


@kernel("LookupTableImportV2", "LookupTableImport")
def lookup_table_import(ctx: KernelContext, handle: Any, keys: np.ndarray, values: np.ndarray):
    table = _table(ctx, handle)
    _check_types(table, keys, values)
    rows = _rows(table, keys, values)
    with table.lock:
        if not table.mutable and table.initialized:
            return ()
        table.data = dict(rows)  # import replaces the whole content
        table.initialized = True
    return ()


@kernel("LookupTableSizeV2", "LookupTableSize", cheap=True)
def lookup_table_size(ctx: KernelContext, handle: Any) -> np.ndarray:
    table = _table(ctx, handle)
    with table.lock:
        return np.asarray(len(table.data) if table.initialized else 0, dtype=np.int64)


@kernel("LookupTableExportV2", "LookupTableExport")
def lookup_table_export(ctx: KernelContext, handle: Any) -> tuple[np.ndarray, np.ndarray]:
    """Keys and values in insertion order (TF's order is its hash map's: unspecified)."""
    table = _table(ctx, handle)
    with table.lock:
        items = list(table.data.items())
    kd = ctx.attrs.get("Tkeys") or table.key_dtype
    vd = ctx.attrs.get("Tvalues") or table.value_dtype
    keys = np.empty(len(items), dtype=kd)
    keys[:] = [k for k, _ in items]
    vs = table.value_shape
    values = np.empty((len(items),) + vs, dtype=vd)
    for i, (_, v) in enumerate(items):
        values[i] = v
    return keys, values
