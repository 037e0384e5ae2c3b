"""Lookup tables: HashTable / MutableHashTable (V1 ref handles and V2 resource handles),
MutableHashTableOfTensors, MutableDenseHashTableV2, the Anonymous* tables, and the
LookupTable* ops that read and change them.

A table is a session-lifetime resource (like a variable): the op that creates it stores a
:class:`Table` in the session's ResourceManager under (container, shared_name or node name)
and outputs a handle (V2) or the table itself (V1's ``Ref(string)`` handle). Values are
plain Python dicts keyed by the key's Python value (bytes for strings), guarded by a lock.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any

import numpy as np

from dfg.graphdef import files
from dfg.graphdef.errors import (
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    UnimplementedError,
)

from ..resources import ResourceHandle
from .registry import KernelContext, kernel
from .string import hash64


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


def _table(ctx: KernelContext, handle: Any) -> Any:
    if isinstance(handle, Table):
        return handle
    if isinstance(handle, AnonymousTableHandle):
        return handle.table
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


@kernel("InitializeTableFromTextFileV2", "InitializeTableFromTextFile", files="read")
def initialize_table_from_text_file(ctx: KernelContext, handle: Any, filename: np.ndarray):
    table = _table(ctx, handle)
    a = ctx.attrs
    key_index, value_index = int(a.get("key_index")), int(a.get("value_index"))
    vocab_size, offset = int(a.get("vocab_size", -1)), int(a.get("offset", 0))
    delim = a.get("delimiter", "\t")
    delim = delim.encode() if isinstance(delim, str) else delim
    path = filename.item()
    path = path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else str(path)
    real = files.check(ctx, "read", path)
    if not os.path.exists(real):
        raise NotFoundError(f"{path}; No such file or directory")
    # a regular file only, its size within the step's memory budget before it is read
    with files.read_limit(ctx.max_bytes):
        lines = files.read_file(real, source=path, what="the table file").split(b"\n")
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
    if isinstance(table, DenseTable):
        return table.find(keys, default)
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
    if isinstance(table, DenseTable):
        table.insert(keys, values)
        return ()
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
    if isinstance(table, DenseTable):
        table.remove(keys)
        return ()
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
    if isinstance(table, DenseTable):
        table.import_(keys, values)
        return ()
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
    if isinstance(table, DenseTable):
        return np.asarray(table.size(), dtype=np.int64)
    with table.lock:
        return np.asarray(len(table.data) if table.initialized else 0, dtype=np.int64)


@kernel("LookupTableExportV2", "LookupTableExport")
def lookup_table_export(ctx: KernelContext, handle: Any) -> tuple[np.ndarray, np.ndarray]:
    """Keys and values in insertion order (TF's order is its hash map's: unspecified)."""
    table = _table(ctx, handle)
    if isinstance(table, DenseTable):
        return table.export()
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


# --- MutableDenseHashTable: TF's open-addressing table, bucket for bucket ---------------------

_M64 = (1 << 64) - 1


def _hash_scalar(k: Any) -> int:
    """TF's HashScalar: an integer key is its own hash (as uint64), a string's is Hash64."""
    return hash64(k) if isinstance(k, bytes) else int(k) & _M64


def _hash_key(row: tuple) -> int:
    if len(row) == 1:
        return _hash_scalar(row[0])
    h = 0
    for k in row:   # TF's Hash64Combine
        h = (h ^ ((_hash_scalar(k) + 0x9E3779B97F4A7800 + (h << 10) + (h >> 4)) & _M64)) & _M64
    return h


class DenseTable:
    """TF's MutableDenseHashTable: ``num_buckets`` (a power of 2) key rows and value rows,
    quadratic probing from ``hash & (num_buckets - 1)``, ``empty_key`` in free buckets and
    ``deleted_key`` in removed ones; it doubles when an insert could pass ``max_load_factor``.
    Keys and values are stored flattened to rows of ``key_size``/``value_size`` elements, and
    exported so, exactly as TF exports them. ``lock`` guards the buckets and the count."""

    __dfg_resource__ = True

    def __init__(self, name: str, key_dtype: Any, value_dtype: Any, value_shape: tuple,
                 empty_key: np.ndarray, deleted_key: np.ndarray, num_buckets: int,
                 max_load_factor: float) -> None:
        if not 0 < max_load_factor < 1:
            raise InvalidArgumentError(
                f"max_load_factor must be between 0 and 1, got: {max_load_factor}")
        if len(value_shape) > 1:
            raise InvalidArgumentError(
                f"Empty value must be a scalar or a vector, got shape {list(value_shape)}")
        if empty_key.ndim > 1:
            raise InvalidArgumentError(
                f"Empty key must be a scalar or a vector, got shape {list(empty_key.shape)}")
        if deleted_key.shape != empty_key.shape:
            raise InvalidArgumentError(
                f"Empty and deleted keys must have same shape, got shapes: "
                f"{list(empty_key.shape)} and {list(deleted_key.shape)}")
        if not isinstance(value_dtype, np.dtype) or value_dtype.kind in "OSUV":
            # TF also allows variant and resource values, which have no numpy dtype here
            raise UnimplementedError(
                f"MutableDenseHashTable with values of type {value_dtype} is not supported")
        self.name = name
        self.key_dtype = np.dtype(key_dtype) if key_dtype is not None else empty_key.dtype
        self.value_dtype = value_dtype
        self.key_shape = tuple(empty_key.shape)
        self.value_shape = tuple(int(d) for d in value_shape)
        self.key_size = int(empty_key.size)
        self.value_size = int(np.prod(self.value_shape, dtype=np.int64))
        self.empty = tuple(empty_key.reshape(-1).tolist())
        self.deleted = tuple(deleted_key.reshape(-1).tolist())
        if self.empty == self.deleted:
            raise InvalidArgumentError("Empty and deleted keys cannot be equal")
        self.max_load_factor = float(np.float32(max_load_factor))
        self.mutable = True
        self.initialized = True
        self.lock = threading.Lock()
        self._allocate(num_buckets)

    def __repr__(self) -> str:
        return f"DenseTable({self.name!r}, buckets={self.num_buckets})"

    def _allocate(self, n: int) -> None:
        if n < 4 or n & (n - 1):
            raise InvalidArgumentError(
                f"Number of buckets must be at least 4 and a power of 2, got: {n}")
        self.num_buckets = n
        self.num_entries = 0
        self.keys: list[tuple] = [self.empty] * n
        self.values = np.zeros((n, self.value_size), dtype=self.value_dtype)

    # key rows of an input tensor, checked as TF does
    def _rows(self, keys: np.ndarray) -> list[tuple]:
        if keys.dtype != self.key_dtype and not (keys.dtype.kind in "OSU"
                                                 and self.key_dtype.kind in "OSU"):
            raise InvalidArgumentError(
                f"Key must be type {self.key_dtype} but got {keys.dtype}")
        n = 1 if keys.ndim == 0 else keys.shape[0]
        if keys.shape[max(keys.ndim - len(self.key_shape), 0):] != self.key_shape or \
                keys.ndim < len(self.key_shape):
            raise InvalidArgumentError(
                f"Input key shape {list(keys.shape)} must end with the table's key shape "
                f"{list(self.key_shape)}")
        if keys.size != n * self.key_size:
            raise InvalidArgumentError(
                f"Expected key shape {[n, *self.key_shape]} got {list(keys.shape)}")
        flat = keys.reshape(n, self.key_size).tolist()
        rows = [tuple(r) for r in flat]
        for r in rows:
            if r == self.empty:
                raise InvalidArgumentError(
                    "Using the empty_key as a table key is not allowed")
            if r == self.deleted:
                raise InvalidArgumentError(
                    "Using the deleted_key as a table key is not allowed")
        return rows

    def _check_values(self, keys: np.ndarray, values: np.ndarray) -> None:
        if self.value_dtype is not None and values.dtype != self.value_dtype:
            raise InvalidArgumentError(
                f"Value must be type {self.value_dtype} but got {values.dtype}")
        want = keys.shape[:keys.ndim - len(self.key_shape)] + self.value_shape
        if values.shape != want:
            raise InvalidArgumentError(
                f"Expected shape {list(want)} for value, got {list(values.shape)}")

    def _probe(self, row: tuple) -> int:
        """The bucket holding ``row``, or the empty bucket that ends its probe sequence."""
        mask = self.num_buckets - 1
        b = _hash_key(row) & mask
        for probes in range(1, self.num_buckets + 1):
            k = self.keys[b]
            if k == row or k == self.empty:
                return b
            b = (b + probes) & mask
        raise InternalError("Internal error in MutableDenseHashTable lookup")

    def _insert_rows(self, rows: list[tuple], values: np.ndarray) -> None:
        mask = self.num_buckets - 1
        for row, val in zip(rows, values):
            b = _hash_key(row) & mask
            for probes in range(1, self.num_buckets + 1):
                k = self.keys[b]
                if k == row:
                    self.values[b] = val
                    break
                if k == self.empty or k == self.deleted:
                    self.num_entries += 1
                    self.keys[b] = row
                    self.values[b] = val
                    break
                b = (b + probes) & mask
            else:
                raise InternalError("Internal error in MutableDenseHashTable insert")

    def find(self, keys: np.ndarray, default: np.ndarray) -> np.ndarray:
        rows = self._rows(keys)
        full = keys.shape[:keys.ndim - len(self.key_shape)] + self.value_shape
        if default.shape != self.value_shape and default.shape != full:
            raise InvalidArgumentError(
                f"Expected shape {list(self.value_shape)} or {list(full)} for default value, "
                f"got {list(default.shape)}")
        out = np.empty((len(rows), self.value_size), dtype=self.value_dtype)
        # TF takes the first value's worth of a full-size default for every key
        dflt = default.reshape(-1)[:self.value_size]
        with self.lock:
            for i, row in enumerate(rows):
                b = self._probe(row)
                out[i] = self.values[b] if self.keys[b] == row else dflt
        return out.reshape(keys.shape[:keys.ndim - len(self.key_shape)] + self.value_shape)

    def insert(self, keys: np.ndarray, values: np.ndarray) -> None:
        self._check_values(keys, values)
        rows = self._rows(keys)
        vals = values.reshape(len(rows), self.value_size)
        with self.lock:
            # TF grows as if every key were new
            pending = self.num_entries + len(rows)
            if pending > self.num_buckets * self.max_load_factor:
                n = self.num_buckets
                while True:
                    n <<= 1
                    if not pending > n * self.max_load_factor:
                        break
                old = [(k, v) for k, v in zip(self.keys, self.values)
                       if k != self.empty and k != self.deleted]
                self._allocate(n)
                if old:
                    self._insert_rows([k for k, _ in old], np.stack([v for _, v in old]))
            self._insert_rows(rows, vals)

    def remove(self, keys: np.ndarray) -> None:
        rows = self._rows(keys)
        with self.lock:
            for row in rows:
                b = self._probe(row)
                if self.keys[b] == row:
                    self.num_entries -= 1
                    self.keys[b] = self.deleted

    def size(self) -> int:
        with self.lock:
            return self.num_entries

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        with self.lock:
            keys = np.empty((self.num_buckets, self.key_size), dtype=self.key_dtype)
            keys[:] = self.keys
            return keys, self.values.copy()

    def import_(self, keys: np.ndarray, values: np.ndarray) -> None:
        if keys.dtype != self.key_dtype and not (keys.dtype.kind in "OSU"
                                                 and self.key_dtype.kind in "OSU"):
            raise InvalidArgumentError(
                f"Key must be type {self.key_dtype} but got {keys.dtype}")
        if self.value_dtype is not None and values.dtype != self.value_dtype:
            raise InvalidArgumentError(
                f"Value must be type {self.value_dtype} but got {values.dtype}")
        kshape = self.key_shape or (1,)
        vshape = self.value_shape or (1,)
        if keys.ndim < len(kshape) or keys.shape[keys.ndim - len(kshape):] != kshape \
                or keys.ndim != len(kshape) + 1:
            raise InvalidArgumentError(
                f"Expected keys of shape [num_buckets, {', '.join(map(str, kshape))}], got "
                f"{list(keys.shape)}")
        want = keys.shape[:1] + vshape
        if values.shape != want:
            raise InvalidArgumentError(
                f"Expected shape {list(want)} for value, got {list(values.shape)}")
        n = keys.shape[0]
        with self.lock:
            # TF takes the buckets as they are (no power-of-2 check)
            self.num_buckets = n
            self.keys = [tuple(r) for r in keys.reshape(n, self.key_size).tolist()]
            self.values = values.reshape(n, self.value_size).copy()
            self.num_entries = sum(1 for k in self.keys
                                   if k != self.empty and k != self.deleted)


def _dense_table(ctx: KernelContext, name: str, empty_key: np.ndarray,
                 deleted_key: np.ndarray) -> DenseTable:
    a = ctx.attrs
    return DenseTable(name, a.get("key_dtype"), a.get("value_dtype"), _shape_attr(ctx),
                      empty_key, deleted_key, int(a.get("initial_num_buckets", 131072)),
                      float(a.get("max_load_factor", 0.8)))


@kernel("MutableDenseHashTableV2", cheap=True)
def mutable_dense_hash_table_v2(ctx: KernelContext, empty_key: np.ndarray,
                                deleted_key: np.ndarray):
    a = ctx.attrs
    name = a.get("shared_name") or ctx.node
    key = (a.get("container") or "", name)
    ctx.resources.lookup_or_create(key, lambda: _dense_table(ctx, name, empty_key, deleted_key))
    return ResourceHandle(key[0], key[1])


# --- anonymous tables: a new table each time the op runs --------------------------------------

class AnonymousTableHandle(ResourceHandle):
    """The handle of an anonymous table: it holds the table itself (no name in the session's
    resource manager), so the table lives as long as its handle, as in TF."""

    __slots__ = ("table",)

    def __init__(self, name: str, table: Any) -> None:
        super().__init__("", name)
        self.table = table


_anonymous_count = itertools.count()


def _anonymous(ctx: KernelContext, make: Any) -> AnonymousTableHandle:
    name = f"{ctx.node}/anonymous_table_{next(_anonymous_count)}"
    return AnonymousTableHandle(name, make(name))


@kernel("AnonymousHashTable")
def anonymous_hash_table(ctx: KernelContext):
    a = ctx.attrs
    return _anonymous(ctx, lambda n: Table(n, a.get("key_dtype"), a.get("value_dtype"), (),
                                           False))


@kernel("AnonymousMutableHashTable")
def anonymous_mutable_hash_table(ctx: KernelContext):
    a = ctx.attrs
    return _anonymous(ctx, lambda n: Table(n, a.get("key_dtype"), a.get("value_dtype"), (),
                                           True))


@kernel("AnonymousMutableHashTableOfTensors")
def anonymous_mutable_hash_table_of_tensors(ctx: KernelContext):
    a = ctx.attrs
    return _anonymous(ctx, lambda n: Table(n, a.get("key_dtype"), a.get("value_dtype"),
                                           _shape_attr(ctx), True))


@kernel("AnonymousMutableDenseHashTable")
def anonymous_mutable_dense_hash_table(ctx: KernelContext, empty_key: np.ndarray,
                                       deleted_key: np.ndarray):
    return _anonymous(ctx, lambda n: _dense_table(ctx, n, empty_key, deleted_key))
