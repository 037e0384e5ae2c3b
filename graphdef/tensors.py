"""TensorProto <-> numpy, and TensorShapeProto <-> Python shapes.

Reading follows TensorFlow's rules: ``tensor_content`` holds the raw little-endian bytes;
otherwise the typed ``*_val`` field holds the values, and a list shorter than the shape is
filled by repeating its last value (an empty list means zeros). ``half_val`` stores float16 bit
patterns in int32s; complex values are stored as (real, imag) pairs.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from . import dtypes as D
from .errors import InvalidArgumentError, ResourceExhaustedError

# Refuse to materialize a constant bigger than this (bytes): a 1-element proto can claim a
# shape of billions of elements through the repeat-last-value rule. It applies to each tensor
# alone; inside :func:`materialize_limit` (a Session binding its nodes) the limit is the
# step's memory budget instead.
MAX_MATERIALIZE_BYTES = 8 << 30

# the byte limit of to_numpy in this thread/context; None: MAX_MATERIALIZE_BYTES
_limit: ContextVar[int | None] = ContextVar("dfg_materialize_limit", default=None)


@contextmanager
def materialize_limit(max_bytes: int | None) -> Iterator[None]:
    """Decode tensors with ``max_bytes`` as the limit of each one (None: the default
    :data:`MAX_MATERIALIZE_BYTES`), in this thread only, while the block runs."""
    token = _limit.set(max_bytes)
    try:
        yield
    finally:
        _limit.reset(token)

# DataType -> name of the typed value field and the numpy dtype it is read as.
_VAL_FIELD = {
    D.DT_FLOAT: "float_val", D.DT_DOUBLE: "double_val",
    D.DT_INT32: "int_val", D.DT_INT16: "int_val", D.DT_INT8: "int_val", D.DT_UINT8: "int_val",
    D.DT_UINT16: "int_val",
    D.DT_INT64: "int64_val", D.DT_UINT32: "uint32_val", D.DT_UINT64: "uint64_val",
    D.DT_BOOL: "bool_val", D.DT_HALF: "half_val", D.DT_STRING: "string_val",
    D.DT_COMPLEX64: "scomplex_val", D.DT_COMPLEX128: "dcomplex_val",
    D.DT_QINT8: "int_val", D.DT_QUINT8: "int_val", D.DT_QINT16: "int_val",
    D.DT_QUINT16: "int_val", D.DT_QINT32: "int_val",
}

Shape = tuple  # of int | None; None for the whole shape when the rank is unknown


def shape_from_proto(shape: Any) -> tuple[int | None, ...] | None:
    """TensorShapeProto -> tuple with None for unknown dims, or None for unknown rank."""
    if shape.unknown_rank:
        return None
    dims = tuple([d.size for d in shape.dim])
    return dims if min(dims, default=0) >= 0 else tuple(None if d < 0 else d for d in dims)


def shape_to_proto(shape: tuple[int | None, ...] | None, proto: Any = None) -> Any:
    if proto is None:
        from dfg.schemas import tensor_shape_pb2
        proto = tensor_shape_pb2.TensorShapeProto()
    if shape is None:
        proto.unknown_rank = True
        return proto
    for d in shape:
        proto.dim.add().size = -1 if d is None else int(d)
    return proto


def format_shape(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


# dtypes whose tensor_content is the array's own bytes on this host (little-endian: the
# format's byte order); bfloat16 and strings decode their own way
_CONTENT_AS_IS: dict[int, np.dtype] = {} if sys.byteorder != "little" else {
    dt: D.to_numpy(dt) for dt in (*D.FLOATING, *D.INTEGER, *D.COMPLEX, D.DT_BOOL, D.DT_QINT8,
                                  D.DT_QUINT8, D.DT_QINT16, D.DT_QUINT16, D.DT_QINT32)
    if dt != D.DT_BFLOAT16}


def to_numpy(t: Any) -> np.ndarray:
    """Decode a TensorProto into a numpy array (strings as an object array of bytes)."""
    dtype = t.dtype     # each upb field read is a call: read once
    np_dtype = D.to_numpy(dtype)
    shape = shape_from_proto(t.tensor_shape) or ()
    if None in shape:
        raise InvalidArgumentError(f"tensor has a partially unknown shape {format_shape(shape)}")
    # Python ints: a product of hostile dims must not wrap around to a small number
    n = math.prod(shape) if shape else 1
    limit = _limit.get()
    limit = MAX_MATERIALIZE_BYTES if limit is None else limit
    if n * max(np_dtype.itemsize, 1) > limit:
        raise ResourceExhaustedError(
            f"tensor of shape {format_shape(shape)} and dtype {D.name(dtype)} would need "
            f"{n * np_dtype.itemsize:,} bytes; refusing to materialize more than "
            f"{limit:,}")
    base = D.base(dtype)
    if base == D.DT_BFLOAT16:   # 2-byte patterns (tensor_content or half_val), held as float32
        if t.tensor_content:
            if len(t.tensor_content) != n * 2:
                raise InvalidArgumentError(
                    f"tensor_content holds {len(t.tensor_content)} bytes, shape "
                    f"{format_shape(shape)} of bfloat16 needs {n * 2}")
            bits = np.frombuffer(t.tensor_content, dtype="<u2")
        else:
            bits = np.asarray(t.half_val[:], dtype=np.uint16)
            if bits.size > n:
                raise InvalidArgumentError(
                    f"half_val holds {bits.size} values, more than shape "
                    f"{format_shape(shape)} takes ({n})")
            if bits.size < n:  # TensorFlow's rule: repeat the last value (zeros if none)
                last = bits[-1] if bits.size else np.uint16(0)
                bits = np.concatenate([bits, np.full(n - bits.size, last, np.uint16)])
        return D.bfloat16_from_bits(bits).reshape(shape)
    content = t.tensor_content    # upb copies a bytes field on every access: read it once
    if content and base != D.DT_STRING:
        size = np_dtype.itemsize
        if len(content) != n * size:
            raise InvalidArgumentError(
                f"tensor_content holds {len(content)} bytes, shape "
                f"{format_shape(shape)} of {D.name(base)} needs {n * size}")
        # A read-only view of the bytes, not a copy: a model's weights are decoded once per
        # plan, before its first step (MLP bench: 1.8 MB, 150 us -> 35 us). Kernels never
        # write into their inputs (a fed array may be read-only too). As np_dtype itself,
        # NumPy's own instance: results computed from it carry it on, and fast paths test
        # output dtypes by identity ("<f4" equals float32 without being that instance)
        as_is = _CONTENT_AS_IS.get(base)
        if as_is is not None:
            return np.frombuffer(content, dtype=as_is).reshape(shape)
        # a big-endian host converts from the format's little-endian bytes
        arr = np.frombuffer(content, dtype=np_dtype.newbyteorder("<"))
        return arr.astype(np_dtype).reshape(shape)
    # a slice is a plain list: numpy reads a upb container element by element (2.9 us for a
    # scalar against 0.5)
    vals = getattr(t, _VAL_FIELD[base])[:]
    if base == D.DT_HALF:
        flat = np.asarray(vals, dtype=np.uint16).view(np.float16)
    elif base == D.DT_STRING:
        flat = np.empty(len(vals), dtype=object)
        flat[:] = list(vals)
    elif base in D.COMPLEX:
        pairs = np.asarray(vals, dtype=np.float32 if base == D.DT_COMPLEX64 else np.float64)
        flat = pairs[0::2] + 1j * pairs[1::2] if pairs.size else pairs
        flat = np.asarray(flat, dtype=np_dtype)
    else:
        flat = np.asarray(vals).astype(np_dtype) if len(vals) else np.zeros(0, np_dtype)
    if flat.size == n:
        return _frozen_small(flat).reshape(shape)
    if flat.size > n:
        raise InvalidArgumentError(
            f"{_VAL_FIELD[base]} holds {flat.size} values, more than shape "
            f"{format_shape(shape)} takes ({n})")
    # TensorFlow's rule: fill up with the last value given (zeros / b"" when none is).
    fill = flat[-1] if flat.size else (b"" if base == D.DT_STRING else np.zeros((), np_dtype))
    try:
        out = np.empty(n, dtype=np_dtype)
    except MemoryError:  # under the limit, but more than this process may map
        raise ResourceExhaustedError(
            f"tensor of shape {format_shape(shape)} and dtype {D.name(t.dtype)}: out of "
            f"memory allocating {n * np_dtype.itemsize:,} bytes") from None
    out[: flat.size] = flat
    out[flat.size:] = fill
    return _frozen_small(out).reshape(shape)


# Values decoded from a TensorProto's value fields (a shape's constants, a slice spec, an
# axis) up to this many bytes end as read-only views of bytes, as tensor_content's do: their
# values can never change (``frozen``), so a kept call may know them by identity
_FROZEN_MAX = 1 << 16


def _frozen_small(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "biufc" and a.nbytes <= _FROZEN_MAX:
        return np.frombuffer(a.tobytes(), dtype=a.dtype)
    return a


def frozen(a: Any) -> bool:
    """Whether ``a``'s values can never change: a read-only array whose memory is, through
    read-only views, a ``bytes`` object. A Const's value is such a view of the graph's bytes
    (:func:`to_numpy`); a variable's buffer, a fed array or a kernel's output is not."""
    while a.__class__ is np.ndarray:
        if a.flags.writeable:
            return False
        a = a.base
    return a.__class__ is bytes


def from_numpy(value: Any, dtype: int | None = None, proto: Any = None) -> Any:
    """Encode an array as a TensorProto (numeric data in ``tensor_content``, as TF does)."""
    if proto is None:
        from dfg.schemas import tensor_pb2
        proto = tensor_pb2.TensorProto()
    if dtype is None:
        arr = np.asarray(value)
        dtype = D.from_numpy(arr.dtype)
    else:
        arr = np.asarray(value, dtype=D.to_numpy(dtype))
    base = D.base(dtype)
    proto.dtype = base
    shape_to_proto(arr.shape, proto.tensor_shape)
    if base == D.DT_BFLOAT16:
        bits = D.bfloat16_bits(arr)
        if arr.ndim == 0:
            proto.half_val.extend(int(b) for b in bits.reshape(-1))
        else:
            proto.tensor_content = np.ascontiguousarray(bits).astype("<u2").tobytes()
        return proto
    if base == D.DT_STRING:
        proto.string_val.extend(
            v if isinstance(v, bytes) else str(v).encode() for v in arr.reshape(-1))
    elif arr.size == 1 and arr.ndim == 0:
        # scalars go into the typed field, as TensorFlow's make_tensor_proto writes them
        _set_vals(proto, base, arr.reshape(-1))
    else:
        proto.tensor_content = np.ascontiguousarray(arr).astype(
            arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return proto


def _set_vals(proto: Any, base: int, flat: np.ndarray) -> None:
    field = getattr(proto, _VAL_FIELD[base])
    if base == D.DT_HALF:
        field.extend(int(x) for x in flat.astype(np.float16).view(np.uint16))
    elif base in D.COMPLEX:
        for c in flat:
            field.extend([float(c.real), float(c.imag)])
    elif base == D.DT_BOOL:
        field.extend(bool(x) for x in flat)
    elif base in (D.DT_FLOAT, D.DT_DOUBLE):
        field.extend(float(x) for x in flat)
    else:
        field.extend(int(x) for x in flat)


def num_bytes(t: Any) -> int:
    """Bytes the decoded tensor takes, computed from the proto without decoding it."""
    shape = shape_from_proto(t.tensor_shape) or ()
    n = int(np.prod([d or 0 for d in shape], dtype=np.int64)) if shape else 1
    if D.base(t.dtype) == D.DT_STRING:
        return sum(len(s) for s in t.string_val)
    if D.base(t.dtype) == D.DT_BFLOAT16:
        return n * 4   # held as float32
    try:
        return n * D.to_numpy(t.dtype).itemsize
    except Exception:
        return len(t.tensor_content)
