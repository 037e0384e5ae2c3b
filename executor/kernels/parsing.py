"""Parsing serialized data: tf.Example / SequenceExample protos, CSV, raw bytes, serialized
tensors, JSON examples.

TensorFlow's CPU semantics, as checked against its outputs (tests/data/kernels/raw_ops_parsing):

* ParseExample, ParseExampleV2, ParseSingleExample and ParseSequenceExample(V2) follow TF's
  *fast* parser (util/example_proto_fast_parsing.cc), which reads the wire format itself
  rather than through protobuf: a feature key repeated in one Example keeps its **last**
  entry (for dense features, the last entry that has a value list); a feature with no value
  list counts as missing; nested lengths are clamped to their parent's end; the packed
  list of a FloatList/Int64List is read once (a second packed run is ignored). Errors are
  InvalidArgumentErrors with TF's messages ("... is required but could not be found.",
  "Data types don't match. ..."). With a key configured twice (say dense and sparse) TF's
  feature index stays empty: every feature reads as missing.
* Fixed-shape dense features must hold exactly the shape's number of values; a leading -1
  dim reads any multiple of the remaining dims' size and pads each batch row to the
  longest with the (one-element) default. Feature-list dense features pad with 0 / "".
* ParseSingleSequenceExample parses with protobuf itself (as TF does): the last of
  repeated map keys wins; with no key requested the input is not even parsed.
* DecodeJSONExample converts the JSON as TF's streaming JSON-to-binary converter does:
  fields in the JSON's order, repeated numbers unpacked, ``null`` skips a field, a repeated
  key in a map is an error, float values that overflow float32 are errors.
* SerializeTensor writes ``tensor_content`` for every numeric dtype (scalars too) and
  ``string_val`` for strings, as Tensor::AsProtoTensorContent does; ParseTensor reads any
  TensorProto (graphdef/tensors.py).
* DecodeCSV follows TF's field scanner (quotes doubled inside quoted fields, leading CR/LF
  skipped, a trailing delimiter adds an empty last field) and absl's number parsing
  (surrounding ASCII whitespace allowed, decimal integers only, ``inf``/``nan`` floats).
* DecodeCompressed: ZLIB stops at the end of the first stream and returns what a truncated
  stream holds; GZIP reads concatenated members; corrupt data is a DataLossError. ZSTD needs
  the ``compression.zstd`` module (Python 3.14+).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    DataLossError,
    InvalidArgumentError,
    UnimplementedError,
)

from .registry import KernelContext, kernel

_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)
_OBJ = np.dtype(object)


def _fmt(shape: Sequence[Any]) -> str:
    return "[" + ",".join("?" if d is None or int(d) < 0 else str(int(d)) for d in shape) + "]"


def _show(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _kind(dtype: Any) -> str:
    """float / int64 / string: the three Example value types (TF's DataTypeString)."""
    dt = np.dtype(dtype) if not isinstance(dtype, int) else None
    if dt == _F32:
        return "float"
    if dt == _I64:
        return "int64"
    if dt == _OBJ:
        return "string"
    name = D.name(dtype) if isinstance(dtype, int) else str(dt)
    raise InvalidArgumentError(f"Invalid config dtype: {name}")


_NP = {"float": _F32, "int64": _I64, "string": _OBJ}


def _empty(kind: str, shape: tuple = (0,)) -> np.ndarray:
    if kind == "string":
        out = np.empty(shape, dtype=object)
        out.reshape(-1)[:] = b""
        return out
    return np.zeros(shape, dtype=_NP[kind])


def _objects(vals: list, shape: tuple | None = None) -> np.ndarray:
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out if shape is None else out.reshape(shape)


def _scalar_bytes(a: np.ndarray, what: str) -> bytes:
    if a.ndim != 0:
        raise InvalidArgumentError(f"Expected {what} to be a scalar, got shape {_fmt(a.shape)}")
    v = a.item()
    return v if isinstance(v, bytes) else str(v).encode()


def _flat_bytes(a: np.ndarray) -> list[bytes]:
    return [v if isinstance(v, bytes) else str(v).encode() for v in a.reshape(-1).tolist()]


def _shape_attr(s: Any) -> tuple[int, ...] | None:
    """A shape attr as a tuple with -1 for unknown dims (None: unknown rank)."""
    if s is None:
        return None
    return tuple(-1 if d is None or int(d) < 0 else int(d) for d in s)


# --- the protobuf wire format, read as TF's fast parser reads it --------------------------

class _Bad(Exception):
    """Malformed wire data."""


class _Stream:
    """protobuf's CodedInputStream over one buffer: every pushed limit is clamped to the
    enclosing one (the buffer's end at the top), reads never cross the current limit."""

    __slots__ = ("buf", "pos", "limit")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos, self.limit = buf, pos, len(buf)

    def at_end(self) -> bool:
        return self.pos >= self.limit

    def peek(self) -> int:
        return self.buf[self.pos] if self.pos < self.limit else 0

    def expect(self, byte: int) -> bool:
        if self.pos < self.limit and self.buf[self.pos] == byte:
            self.pos += 1
            return True
        return False

    def varint(self) -> int:
        """ReadVarint64: at most 10 bytes, the value modulo 2**64."""
        result, shift, pos, buf = 0, 0, self.pos, self.buf
        while True:
            if pos >= self.limit or shift >= 70:
                raise _Bad
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        self.pos = pos
        return result & 0xFFFFFFFFFFFFFFFF

    def varint32(self) -> int:
        return self.varint() & 0xFFFFFFFF

    def push(self, n: int) -> int:
        old = self.limit
        self.limit = min(self.pos + n, old)
        return old

    def pop(self, old: int) -> None:
        self.limit = old

    def raw(self, n: int) -> bytes:
        if self.pos + n > self.limit:
            raise _Bad
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self) -> bytes:
        return self.raw(self.varint32())

    def read_tag(self) -> int:
        if self.at_end():
            return 0
        try:
            return self.varint32()
        except _Bad:
            return 0

    def skip_field(self) -> None:
        """SkipExtraneousTag: a field of any wire type but groups; a length-delimited field
        running past the end is cut short without complaint."""
        wire = self.read_tag() & 7
        if wire == 0:
            self.varint32()
        elif wire == 1:
            self.raw(8)
        elif wire == 2:
            n = self.varint32()
            self.pos = min(self.pos + n, self.limit)
        elif wire == 5:
            self.raw(4)
        else:
            raise _Bad


def _varints(region: bytes) -> np.ndarray:
    """A packed run of varints as int64 (two's complement of the low 64 bits)."""
    a = np.frombuffer(region, dtype=np.uint8)
    if a.size == 0:
        return np.zeros(0, _I64)
    term = a < 0x80
    if not term[-1]:
        raise _Bad
    ends = np.flatnonzero(term)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lens = ends - starts + 1
    if (lens > 10).any():
        raise _Bad
    pos = np.arange(a.size) - np.repeat(starts, lens)
    vals = (a & 0x7F).astype(np.uint64) << (7 * pos).astype(np.uint64)
    return np.bitwise_or.reduceat(vals, starts).view(np.int64)


def _parse_example(b: bytes) -> list[tuple[bytes, bytes]]:
    """An Example's (key, Feature bytes) map entries in wire order; unknown fields skipped,
    concatenated Examples merged, an entry's key and value in either order."""
    s, out = _Stream(b), []
    while not s.at_end():
        if not s.expect(0x0A):
            s.skip_field()
            continue
        old = s.push(s.varint32())
        while not s.at_end():
            if not s.expect(0x0A):
                raise _Bad
            old2 = s.push(s.varint32())
            key = val = b""
            for _ in range(2):
                tag = s.read_tag()
                if tag == 0x0A:
                    key = s.string()
                elif tag == 0x12:
                    val = s.string()
                else:
                    raise _Bad
            if not s.at_end():
                raise _Bad
            s.pop(old2)
            out.append((key, val))
        s.pop(old)
    return out


def _feature_kind(fb: bytes) -> str | None:
    """The value type a Feature's first byte names (None: the Feature is empty)."""
    if not fb:
        return None
    kind = {0x0A: "string", 0x12: "float", 0x1A: "int64"}.get(fb[0])
    if kind is None:
        raise InvalidArgumentError("Unsupported datatype.")
    return kind


def _feature_values(fb: bytes, kind: str) -> list | np.ndarray:
    """The values of a Feature known to hold ``kind`` (its first byte already checked)."""
    s = _Stream(fb, 1)
    s.push(s.varint32())
    if kind == "string":
        out = []
        while not s.at_end():
            if not s.expect(0x0A):
                raise _Bad
            out.append(s.string())
        return out
    if s.at_end():
        return np.zeros(0, _NP[kind])
    tag = s.peek()
    if kind == "float":
        if tag == 0x0A:  # packed: read once, a ragged tail of 1-3 bytes ignored
            s.pos += 1
            n = s.varint32()
            s.push(n)
            return np.frombuffer(s.raw(n // 4 * 4), dtype="<f4").astype(_F32)
        if tag != 0x0D:
            raise _Bad
        parts = []
        while not s.at_end():
            if not s.expect(0x0D):
                raise _Bad
            parts.append(s.raw(4))
        return np.frombuffer(b"".join(parts), dtype="<f4").astype(_F32)
    if tag == 0x0A:
        s.pos += 1
        n = s.varint32()
        s.push(n)
        return _varints(s.raw(min(n, s.limit - s.pos)))
    if tag != 0x08:
        raise _Bad
    vals = []
    while not s.at_end():
        if not s.expect(0x08):
            raise _Bad
        vals.append(s.varint())
    return np.array(vals, dtype=np.uint64).view(np.int64) if vals else np.zeros(0, _I64)


def _as_array(vals: list | np.ndarray, kind: str) -> np.ndarray:
    return _objects(vals) if kind == "string" else np.asarray(vals, dtype=_NP[kind])


# --- ParseExample / ParseExampleV2 / ParseSingleExample ---------------------------------

class _Dense:
    __slots__ = ("key", "kind", "shape", "default", "varlen", "stride")

    def __init__(self, key: bytes, kind: str, shape: tuple, default: np.ndarray) -> None:
        self.key, self.kind, self.shape, self.default = key, kind, shape, default
        self.varlen = len(shape) > 0 and shape[0] == -1
        self.stride = math.prod(shape[1:] if self.varlen else shape)


def _dense_configs(keys: list[bytes], types: list, shapes: list, defaults: list
                   ) -> list[_Dense]:
    """Check dense_shapes (GetDenseShapes) and the defaults (CheckInputShapes)."""
    out = []
    for d, (key, t, s) in enumerate(zip(keys, types, shapes)):
        shape = _shape_attr(s)
        if shape is None or any(x < 0 for x in shape[1:]):
            raise InvalidArgumentError(
                f"dense_shapes[{d}] has unknown rank or unknown inner dimensions: "
                f"{'<unknown>' if shape is None else _fmt(shape)}")
        cfg = _Dense(key, _kind(t), shape, defaults[d])
        dv = defaults[d]
        if cfg.varlen:
            if dv.size != 1:
                raise InvalidArgumentError(
                    f"dense_shape[{d}] is a variable length shape: {_fmt(shape)}, therefore "
                    f"def_value[{d}] must contain a single element (the padding element).  "
                    f"But its shape is: {_fmt(dv.shape)}")
        elif dv.size > 0 and tuple(dv.shape) != shape:
            raise InvalidArgumentError(
                f"def_value[{d}].shape() == {_fmt(dv.shape)} is not compatible with "
                f"dense_shapes_[{d}] == {_fmt(shape)}")
        if _kind(dv.dtype) != cfg.kind:
            raise InvalidArgumentError(
                f"dense_defaults[{d}].dtype() == {_kind(dv.dtype)} != dense_types_[{d}] == "
                f"{cfg.kind}")
        out.append(cfg)
    return out


def _index(dense: list[_Dense], sparse: list, ragged: list) -> dict[bytes, tuple[str, int]]:
    index: dict[bytes, tuple[str, int]] = {}
    for typ, cfgs in (("dense", dense), ("sparse", sparse), ("ragged", ragged)):
        for d, c in enumerate(cfgs):
            key = c.key if typ == "dense" else c[0]
            if key in index:
                # TF's cuckoo map cannot hold a key twice: it gives up and stays empty, so
                # every feature of every Example reads as missing
                return {}
            index[key] = (typ, d)
    return index


_TYPE_STR = {"float": "float", "int64": "int64", "string": "bytes"}


def _parse_batch(serialized: list[bytes], names: list[bytes], dense: list[_Dense],
                 sparse: list[tuple[bytes, str]], ragged: list[tuple[bytes, str, Any]]
                 ) -> tuple[list, list, list]:
    """FastParseExample over a vector: (dense values, sparse (indices, values, shape),
    ragged (values, row_splits))."""
    index = _index(dense, sparse, ragged)
    nb = len(serialized)
    fixed = [None if c.varlen else _empty(c.kind, (nb, *c.shape)) for c in dense]
    rows: dict[str, list[list]] = {
        "dense": [[None] * nb for _ in dense], "sparse": [[None] * nb for _ in sparse],
        "ragged": [[None] * nb for _ in ragged]}
    for e, ser in enumerate(serialized):
        name = _show(names[e]) if names else "<unknown>"
        try:
            entries = _parse_example(ser)
        except _Bad:
            raise InvalidArgumentError(
                f"Could not parse example input, value: '{_show(ser)}'") from None
        seen: dict[tuple[str, int], bool] = {}
        for key, fb in reversed(entries):  # the last entry of a key wins
            hit = index.get(key)
            if hit is None:
                continue
            typ, d = hit
            where = f"Name: {name}, Key: {_show(key)}, Index: {e}.  "
            kind = _feature_kind(fb)
            if typ == "dense":
                c = dense[d]
                if kind is None or seen.get(hit):
                    continue
                seen[hit] = True
                if kind != c.kind:
                    raise InvalidArgumentError(
                        f"{where}Data types don't match. Data type: {kind} but expected type: "
                        f"{c.kind}")
                vals = _values(fb, kind, where)
                if not c.varlen:
                    if len(vals) != c.stride:
                        raise InvalidArgumentError(
                            f"{where}Number of {_TYPE_STR[kind]} values != expected.  Values "
                            f"size: {len(vals)} but output shape: {_fmt(c.shape)}")
                    fixed[d][e, ...] = _as_array(vals, kind).reshape(c.shape)
                else:
                    if c.stride and len(vals) % c.stride:
                        raise InvalidArgumentError(
                            f"{where}Number of {_TYPE_STR[kind]} values is not a multiple of "
                            f"stride length. Saw {len(vals)} values but output shape is: "
                            f"{_fmt(c.shape)}")
                    rows["dense"][d][e] = vals
            else:
                if seen.get(hit):
                    continue
                seen[hit] = True
                want = sparse[d][1] if typ == "sparse" else ragged[d][1]
                if kind is not None and kind != want:
                    raise InvalidArgumentError(
                        f"{where}Data types don't match. Expected type: {want}, Actual type: "
                        f"{kind}")
                rows[typ][d][e] = _values(fb, kind, where) if kind is not None else []
        for d, c in enumerate(dense):
            if c.varlen or seen.get(("dense", d)):
                continue
            if c.default.size == 0:
                raise InvalidArgumentError(
                    f"Name: {name}, Feature: {_show(c.key)} (data type: {c.kind}) is required "
                    "but could not be found.")
            fixed[d][e, ...] = c.default.reshape(c.shape)
    dense_out = []
    for d, c in enumerate(dense):
        if not c.varlen:
            dense_out.append(fixed[d])
            continue
        lens = [0 if r is None else len(r) for r in rows["dense"][d]]
        most = max(lens, default=0) // c.stride if c.stride else 0
        out = np.empty((nb, most * c.stride), dtype=_NP[c.kind])
        out[...] = c.default.reshape(-1)[0]
        for e, r in enumerate(rows["dense"][d]):
            if r is not None and len(r):
                out[e, :len(r)] = _as_array(r, c.kind)
        dense_out.append(out.reshape(nb, most, *c.shape[1:]))
    sparse_out = []
    for d, (_, kind) in enumerate(sparse):
        vals, lens = _concat(rows["sparse"][d], kind)
        idx = np.stack([np.repeat(np.arange(nb, dtype=_I64), lens),
                        _ranges(lens)], axis=1) if vals.size else np.zeros((0, 2), _I64)
        sparse_out.append((idx, vals, np.array([nb, max(lens, default=0)], dtype=_I64)))
    ragged_out = []
    for d, (_, kind, split_t) in enumerate(ragged):
        vals, lens = _concat(rows["ragged"][d], kind)
        splits = np.concatenate(([0], np.cumsum(lens))).astype(split_t)
        ragged_out.append((vals, splits))
    return dense_out, sparse_out, ragged_out


def _values(fb: bytes, kind: str, where: str) -> list | np.ndarray:
    try:
        return _feature_values(fb, kind)
    except _Bad:
        raise InvalidArgumentError(f"{where}Can't parse serialized Example.") from None


def _concat(rows: list, kind: str) -> tuple[np.ndarray, list[int]]:
    lens = [0 if r is None else len(r) for r in rows]
    if kind == "string":
        flat: list = []
        for r in rows:
            if r is not None and len(r):
                flat.extend(r)
        return _objects(flat), lens
    parts = [np.asarray(r, dtype=_NP[kind]) for r in rows if r is not None and len(r)]
    return (np.concatenate(parts) if parts else np.zeros(0, _NP[kind])), lens


def _ranges(lens: list[int]) -> np.ndarray:
    """0..n-1 for each n in ``lens``, concatenated."""
    total = sum(lens)
    if not total:
        return np.zeros(0, _I64)
    starts = np.repeat(np.cumsum([0, *lens[:-1]]), lens)
    return np.arange(total, dtype=_I64) - starts


def _parse_single(ser: bytes, dense: list[_Dense], sparse: list[tuple[bytes, str]],
                  ragged: list[tuple[bytes, str, Any]]) -> tuple[list, list, list]:
    """FastParseSingleExample: one Example, no batch dimension."""
    index = _index(dense, sparse, ragged)
    try:
        entries = _parse_example(ser)
    except _Bad:
        raise InvalidArgumentError(
            f"Could not parse example input, value: '{_show(ser)}'") from None
    dense_out: list = [None] * len(dense)
    sparse_vals: list = [None] * len(sparse)
    ragged_vals: list = [None] * len(ragged)
    seen: set = set()
    for key, fb in reversed(entries):
        hit = index.get(key)
        if hit is None:
            continue
        typ, d = hit
        kind = _feature_kind(fb)
        if kind is None or hit in seen:
            continue
        seen.add(hit)
        where = f"Key: {_show(key)}.  "
        want = dense[d].kind if typ == "dense" else (sparse if typ == "sparse" else ragged)[d][1]
        if kind != want:
            if typ == "dense":
                raise InvalidArgumentError(
                    f"{where}Data types don't match. Data type: {kind} but expected type: "
                    f"{want}")
            raise InvalidArgumentError(
                f"{where}Data types don't match. Expected type: {want}, Actual type: {kind}")
        try:
            vals = _feature_values(fb, kind)
        except _Bad:
            raise InvalidArgumentError(
                f"{where}Can't parse serialized Example: Parsing "
                f"{'bytes' if kind == 'string' else kind}_list failed.") from None
        arr = _as_array(vals, kind)
        if typ == "dense":
            c = dense[d]
            if not c.varlen:
                if arr.size != c.stride:
                    raise InvalidArgumentError(
                        f"{where}Can't parse serialized Example: Some "
                        f"{'bytes' if kind == 'string' else kind}_list slice was not parsed.")
                dense_out[d] = arr.reshape(c.shape)
                continue
            if c.stride and arr.size % c.stride:
                raise InvalidArgumentError(
                    f"Error while parsing feature with key {_show(key)}: number of elements "
                    f"should be divisible by {c.stride}, found {arr.size} instead")
            dense_out[d] = arr.reshape(arr.size // c.stride if c.stride else 0, *c.shape[1:])
        elif typ == "sparse":
            sparse_vals[d] = arr
        else:
            ragged_vals[d] = arr
    for d, c in enumerate(dense):
        if dense_out[d] is not None:
            continue
        if c.varlen:
            dense_out[d] = _empty(c.kind, (0, *c.shape[1:]))
        elif c.default.size == 0:
            raise InvalidArgumentError(
                f"Feature: {_show(c.key)} (data type: {c.kind}) is required but could not be "
                "found.")
        else:
            dense_out[d] = c.default
    sparse_out = []
    for d, (_, kind) in enumerate(sparse):
        v = sparse_vals[d] if sparse_vals[d] is not None else _empty(kind)
        sparse_out.append((np.arange(v.size, dtype=_I64).reshape(-1, 1), v,
                           np.array([v.size], dtype=_I64)))
    ragged_out = []
    for d, (_, kind, split_t) in enumerate(ragged):
        v = ragged_vals[d] if ragged_vals[d] is not None else _empty(kind)
        ragged_out.append((v, np.zeros(0, dtype=split_t)))  # no splits for one Example
    return dense_out, sparse_out, ragged_out


def _example_outputs(dense_out: list, sparse_out: list, ragged_out: list | None) -> list:
    outs = [s[0] for s in sparse_out] + [s[1] for s in sparse_out] + [s[2] for s in sparse_out]
    outs += dense_out
    if ragged_out is not None:
        outs += [r[0] for r in ragged_out] + [r[1] for r in ragged_out]
    return outs


@kernel("ParseExample")
def parse_example(ctx: KernelContext, *args: np.ndarray) -> list:
    a = ctx.attrs
    ns, nd = int(a["Nsparse"]), int(a["Ndense"])
    serialized, names = args[0], args[1]
    sparse_keys, dense_keys = args[2:2 + ns], args[2 + ns:2 + ns + nd]
    defaults = list(args[2 + ns + nd:])
    if len(a["sparse_types"]) != ns:
        raise InvalidArgumentError("len(sparse_keys) != len(sparse_types)")
    if len(a["Tdense"]) != nd or len(a["dense_shapes"]) != nd:
        raise InvalidArgumentError("len(dense_keys) != len(dense_types)")
    if serialized.ndim != 1:
        raise InvalidArgumentError(
            f"Expected serialized to be a vector, got shape: {_fmt(serialized.shape)}")
    name_list = _check_names(names, serialized)
    dense = _dense_configs([_scalar_bytes(k, "dense_keys") for k in dense_keys], a["Tdense"],
                           a["dense_shapes"], defaults)
    sparse = [(_scalar_bytes(k, "sparse_keys"), _kind(t))
              for k, t in zip(sparse_keys, a["sparse_types"])]
    d, s, _ = _parse_batch(_flat_bytes(serialized), name_list, dense, sparse, [])
    return _example_outputs(d, s, None)


def _check_names(names: np.ndarray, serialized: np.ndarray) -> list[bytes]:
    if names.size > 0 and names.shape != serialized.shape:
        raise InvalidArgumentError(
            f"Expected names have the same shape as serialized: name.shape={_fmt(names.shape)}"
            f", serialized.shape={_fmt(serialized.shape)}")
    return _flat_bytes(names) if names.size else []


@kernel("ParseExampleV2")
def parse_example_v2(ctx: KernelContext, serialized: np.ndarray, names: np.ndarray,
                     sparse_keys: np.ndarray, dense_keys: np.ndarray, ragged_keys: np.ndarray,
                     *defaults: np.ndarray) -> list:
    a = ctx.attrs
    ns = int(a["num_sparse"])
    if len(a["sparse_types"]) != ns:
        raise InvalidArgumentError(
            f"num_sparse ({ns}) must match the size of sparse_keys ({ns}) and sparse_types "
            f"({len(a['sparse_types'])})")
    if len(a["ragged_value_types"]) != len(a["ragged_split_types"]):
        raise InvalidArgumentError("len(ragged_value_types) != len(ragged_split_types)")
    if len(a["Tdense"]) != len(a["dense_shapes"]):
        raise InvalidArgumentError("len(dense_keys) != len(dense_shapes)")
    if serialized.ndim > 1:
        raise InvalidArgumentError(
            f"Expected serialized to be a scalar or vector, got shape: "
            f"{_fmt(serialized.shape)}")
    name_list = _check_names(names, serialized)
    nd, nr = len(a["Tdense"]), len(a["ragged_value_types"])
    checks = ((dense_keys, nd, "dense_keys) == len(dense_types"),
              (sparse_keys, ns, "sparse_keys) == num_sparse"),
              (ragged_keys, nr, "ragged_keys) == len(ragged_value_types"))
    for keys, n, what in checks:
        if keys.size != n:
            raise InvalidArgumentError(f"Expected len({what} but got: {keys.size} vs. {n}")
    if len(defaults) != nd:
        raise InvalidArgumentError(
            f"Expected len(dense_defaults) == len(dense_keys) but got: {len(defaults)} vs. "
            f"{nd}")
    dense = _dense_configs(_flat_bytes(dense_keys), a["Tdense"], a["dense_shapes"],
                           list(defaults))
    sparse = [(k, _kind(t)) for k, t in zip(_flat_bytes(sparse_keys), a["sparse_types"])]
    ragged = []
    for k, t, st in zip(_flat_bytes(ragged_keys), a["ragged_value_types"],
                        a["ragged_split_types"]):
        if np.dtype(st) not in (np.dtype(np.int32), _I64):
            raise InvalidArgumentError(f"Invalid ragged_split_type: {st}")
        ragged.append((k, _kind(t), np.dtype(st)))
    if serialized.ndim == 1:
        d, s, r = _parse_batch(_flat_bytes(serialized), name_list, dense, sparse, ragged)
    else:
        d, s, r = _parse_single(_scalar_bytes(serialized, "serialized"), dense, sparse, ragged)
    return _example_outputs(d, s, r)


@kernel("ParseSingleExample")
def parse_single_example(ctx: KernelContext, serialized: np.ndarray, *defaults: np.ndarray
                         ) -> list:
    a = ctx.attrs
    skeys = [k.encode() if isinstance(k, str) else bytes(k) for k in a["sparse_keys"]]
    dkeys = [k.encode() if isinstance(k, str) else bytes(k) for k in a["dense_keys"]]
    if len(skeys) != len(a["sparse_types"]) or len(skeys) != int(a["num_sparse"]):
        raise InvalidArgumentError("len(sparse_keys) != len(sparse_types)")
    if len(dkeys) != len(a["Tdense"]):
        raise InvalidArgumentError("len(dense_keys) != len(dense_types)")
    if len(dkeys) != len(a["dense_shapes"]):
        raise InvalidArgumentError("len(dense_keys) != len(dense_shapes)")
    if serialized.ndim != 0:
        raise InvalidArgumentError(
            f"Expected serialized to be a scalar, got shape: {_fmt(serialized.shape)}")
    if len(defaults) != len(dkeys):
        raise InvalidArgumentError(
            f"Expected len(dense_defaults) == len(dense_keys) but got: {len(defaults)} vs. "
            f"{len(dkeys)}")
    dense = _dense_configs(dkeys, a["Tdense"], a["dense_shapes"], list(defaults))
    sparse = [(k, _kind(t)) for k, t in zip(skeys, a["sparse_types"])]
    d, s, _ = _parse_single(_scalar_bytes(serialized, "serialized"), dense, sparse, [])
    return _example_outputs(d, s, None)


# --- ParseSequenceExample / ParseSequenceExampleV2 (TF's fast sequence parser) ------------

_SEQ_TAG = {"string": 0x0A, "float": 0x12, "int64": 0x1A}


def _seq_values(s: _Stream, kind: str) -> list | np.ndarray | None:
    """ParseBytes/Float/Int64Feature: one Feature's values, None if it holds another type or
    is malformed."""
    try:
        if not s.expect(_SEQ_TAG[kind]):
            return None
        n = s.varint32()
        if n == 0:
            return [] if kind == "string" else np.zeros(0, _NP[kind])
        old = s.push(n)
        if kind == "string":
            out: Any = []
            while not s.at_end():
                if not s.expect(0x0A):
                    return None
                out.append(s.string())
        else:
            tag = s.peek()
            if tag == 0x0A:  # packed
                s.pos += 1
                old2 = s.push(s.varint32())
                if kind == "float":
                    m = s.limit - s.pos
                    if m % 4:
                        return None
                    out = np.frombuffer(s.raw(m), dtype="<f4").astype(_F32)
                else:
                    out = _varints(s.raw(s.limit - s.pos))
                s.pop(old2)
            elif tag == (0x0D if kind == "float" else 0x08):
                vals = []
                while not s.at_end():
                    if not s.expect(tag):
                        return None
                    vals.append(s.raw(4) if kind == "float" else s.varint())
                if kind == "float":
                    out = np.frombuffer(b"".join(vals), dtype="<f4").astype(_F32)
                else:
                    out = np.array(vals, dtype=np.uint64).view(np.int64)
            else:
                return None
        s.pop(old)
        return out
    except _Bad:
        return None


class _SeqFeature:
    __slots__ = ("kind", "type", "protos", "length", "num_rows")

    def __init__(self, n: int) -> None:
        self.kind, self.type = "", "dense"
        self.protos: list[bytes | None] = [None] * n
        self.length = self.num_rows = 0


def _example_name(names: list[bytes], e: int) -> str:
    return _show(names[e]) if names else "<unknown>"


def _seq_features(n: int, sparse: list, ragged: list, dense: list, what: str
                  ) -> dict[bytes, _SeqFeature]:
    feats: dict[bytes, _SeqFeature] = {}
    for key, kind in sparse:
        f = feats.setdefault(key, _SeqFeature(n))
        f.kind, f.type = kind, "sparse"
    for key, kind, _ in ragged:
        f = feats.setdefault(key, _SeqFeature(n))
        if f.type == "sparse":
            raise InvalidArgumentError(f"{what} feature {_show(key)} cannot be both ragged and "
                                       "sparse")
        f.kind, f.type = kind, "ragged"
    for c in dense:
        key, kind = c[0], c[1]
        f = feats.setdefault(key, _SeqFeature(n))
        if f.type != "dense":
            raise InvalidArgumentError(f"{what} feature {_show(key)} cannot be both dense and "
                                       "sparse")
        f.kind = kind
        if what == "Context":
            shape, default = c[2], c[3]
            if default.size > 0 and (shape is None or len(shape) != default.ndim or any(
                    s >= 0 and s != x for s, x in zip(shape, default.shape))):
                raise InvalidArgumentError(
                    f"Default value for context feature {_show(key)} has an incorrect shape: "
                    f"saw {_fmt(default.shape)} but expected {_fmt(shape or ())}")
            f.length = default.size
    return feats


def _extract_sequence(examples: list[bytes], names: list[bytes],
                      context: dict[bytes, _SeqFeature], lists: dict[bytes, _SeqFeature]
                      ) -> None:
    for e, ex in enumerate(examples):
        s = _Stream(ex)
        bad = InvalidArgumentError(
            f"Invalid protocol message input, example id: {_example_name(names, e)}")
        try:
            while not s.at_end():
                if s.expect(0x0A):
                    feats = context
                elif s.expect(0x12):
                    feats = lists
                else:
                    s.skip_field()
                    continue
                old = s.push(s.varint32())
                while not s.at_end():
                    if not s.expect(0x0A):
                        raise bad
                    old2 = s.push(s.varint32())
                    if not s.expect(0x0A):
                        raise bad
                    key = s.string()
                    if not s.expect(0x12):
                        raise bad
                    value = s.string()
                    if not s.at_end():
                        raise bad
                    s.pop(old2)
                    f = feats.get(key)
                    if f is not None:
                        f.protos[e] = value
                s.pop(old)
        except _Bad:
            raise bad from None


def _rows(proto: bytes, key: bytes, kind: str, name: str) -> list:
    """A FeatureList's rows (each a value list), checked as GetSequenceFeatureLengths does."""
    s = _Stream(proto)
    rows: list = []
    while not s.at_end():
        try:
            if not s.expect(0x0A):
                raise _Bad
            n = s.varint32()
        except _Bad:
            raise InvalidArgumentError(
                f"Error in sequence feature {_show(key)} in example {name}") from None
        mismatch = InvalidArgumentError(
            f"Name: {name}, Feature list: {_show(key)}, Index: {len(rows)}.  Data types don't "
            f"match. Expected type: {kind}")
        if n > 2:
            old = s.push(n)
            vals = _seq_values(s, kind)
            if vals is None:
                raise mismatch
            s.pop(old)
        elif n == 2:
            try:
                ok = s.expect(_SEQ_TAG[kind]) and s.varint32() == 0
            except _Bad:
                ok = False
            if not ok:
                raise mismatch
            vals = []
        elif n == 1:
            raise InvalidArgumentError(
                f"Error in sequence feature {_show(key)} in example {name}")
        else:
            vals = []
        rows.append(vals)
    return rows


def _parse_sequence(examples: list[bytes], names: list[bytes], is_batch: bool,
                    ctx_dense: list, ctx_sparse: list, ctx_ragged: list,
                    fl_dense: list, fl_sparse: list, fl_ragged: list) -> dict[str, list]:
    """FastParseSequenceExample. Context configs: dense (key, kind, shape, default), sparse
    (key, kind), ragged (key, kind, split dtype); feature-list dense configs are (key, kind,
    shape, missing_assumed_empty)."""
    n = len(examples)
    if names and len(names) != n:
        raise InvalidArgumentError(
            "example_names must be empty or have the correct number of elements")
    context = _seq_features(n, ctx_sparse, ctx_ragged, ctx_dense, "Context")
    lists = _seq_features(n, fl_sparse, fl_ragged, fl_dense, "Sequence")
    _extract_sequence(examples, names, context, lists)
    # context value lists, checked for their type
    ctx_vals: dict[bytes, list] = {}
    for key, f in context.items():
        vals_e: list = [None] * n
        for e, proto in enumerate(f.protos):
            if not proto:
                continue
            vals = _seq_values(_Stream(proto), f.kind)
            if vals is None:
                raise InvalidArgumentError(
                    f"Name: {_example_name(names, e)}, Context feature: {_show(key)}.  Data "
                    f"types don't match. Expected type: {f.kind}")
            vals_e[e] = vals
            f.length = f.length + len(vals) if f.type != "dense" else max(f.length, len(vals))
        ctx_vals[key] = vals_e
    list_rows: dict[bytes, list] = {}
    for key, f in lists.items():
        rows_e: list = [None] * n
        for e, proto in enumerate(f.protos):
            if not proto:
                continue
            rows = _rows(proto, key, f.kind, _example_name(names, e))
            rows_e[e] = rows
            total = sum(len(r) for r in rows)
            if f.type == "dense":
                f.length = max(f.length, total)
            else:
                f.length += total
                f.num_rows += len(rows)
        list_rows[key] = rows_e
    batch = (n,) if is_batch else ()
    out: dict[str, list] = {k: [] for k in (
        "ctx_dense", "ctx_sparse", "ctx_ragged", "fl_dense", "fl_lengths", "fl_sparse",
        "fl_ragged")}
    for key, kind, shape, default in ctx_dense:
        f = context[key]
        numel = math.prod(shape) if shape is not None and all(d >= 0 for d in shape) else -1
        if f.length != numel:
            raise InvalidArgumentError(
                f"Inconsistent max number of elements for feature {_show(key)}: expected "
                f"{numel}, but found {f.length}")
        rows_out = []
        for e in range(n):
            if f.protos[e] is None:
                if default.size == 0:
                    raise InvalidArgumentError(
                        f"Feature: {_show(key)} (data type: {kind}) is required but could "
                        "not be found.")
                v = _as_array(list(default.reshape(-1)) if kind == "string"
                              else default.reshape(-1), kind)
            else:
                vals = ctx_vals[key][e]
                v = _as_array(vals if vals is not None else [], kind)
            if v.size != f.length:
                raise InvalidArgumentError(
                    f"Unexpected number of elements in example {_example_name(names, e)}")
            rows_out.append(v)
        flat = (np.concatenate(rows_out) if rows_out else _empty(kind, (0,))).astype(_NP[kind])
        out["ctx_dense"].append(flat.reshape(*batch, *shape))
    for key, kind in ctx_sparse:
        vals_e = [v if v is not None else [] for v in ctx_vals[key]]
        vals, lens = _concat(vals_e, kind)
        cols = _ranges(lens)
        idx = (np.stack([np.repeat(np.arange(n, dtype=_I64), lens), cols], axis=1)
               if is_batch else cols.reshape(-1, 1))
        most = max(lens, default=0)
        out["ctx_sparse"].append((idx.reshape(-1, 2 if is_batch else 1), vals,
                                  np.array([n, most] if is_batch else [most], dtype=_I64)))
    for key, kind, split_t in ctx_ragged:
        vals_e = [v if v is not None else [] for v in ctx_vals[key]]
        vals, lens = _concat(vals_e, kind)
        splits = (np.concatenate(([0], np.cumsum(lens))).astype(split_t) if is_batch
                  else np.zeros((), dtype=split_t))  # unused (uninitialized in TF) for one
        out["ctx_ragged"].append((vals, splits))
    for key, kind, shape, missing_ok in fl_dense:
        f = lists[key]
        row_numel = (math.prod(shape) if shape is not None and all(d >= 0 for d in shape)
                     else -1)
        if row_numel <= 0 or f.length % row_numel:
            if row_numel != 0 or f.length:
                raise InvalidArgumentError(
                    f"Feature list '{_show(key)}' has an unexpected number of values.  Total "
                    f"values size: {f.length} is not consistent with output shape: "
                    f"{_fmt((-1, *(shape or ())))}")
        max_rows = f.length // row_numel if row_numel > 0 else 0
        data = _empty(kind, (n, max_rows * max(row_numel, 0)))
        lengths = np.zeros(n, dtype=_I64)
        for e in range(n):
            rows = list_rows[key][e]
            if f.protos[e] is None and not missing_ok:
                raise InvalidArgumentError(
                    f"Name: {_example_name(names, e)}, Feature list '{_show(key)}' is required "
                    "but could not be found.  Did you mean to include it in "
                    "feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?")
            pos = 0
            for r, vals in enumerate(rows or []):
                if len(vals) != row_numel:
                    raise InvalidArgumentError(
                        f"Name: {_example_name(names, e)}, Key: {_show(key)}, Index: {r}.  "
                        f"Number of values != expected.  values size: {len(vals)} but output "
                        f"shape: {_fmt(shape)}")
                if len(vals):
                    data[e, pos:pos + len(vals)] = _as_array(vals, kind)
                pos += len(vals)
            lengths[e] = len(rows or [])
        values = data.reshape(n, max_rows, *shape)
        out["fl_dense"].append(values if is_batch else values.reshape(max_rows, *shape))
        out["fl_lengths"].append(lengths if is_batch else lengths.reshape(()))
    for key, kind in fl_sparse:
        vals_all: list = []
        idx_rows: list = []
        most_rows = most_cols = 0
        for e in range(n):
            rows = list_rows[key][e]
            if not rows:
                continue
            most_rows = max(most_rows, len(rows))
            for r, vals in enumerate(rows):
                most_cols = max(most_cols, len(vals))
                for i in range(len(vals)):
                    idx_rows.append((e, r, i) if is_batch else (r, i))
                vals_all.append(vals)
        vals, _ = _concat(vals_all, kind)
        width = 3 if is_batch else 2
        idx = np.array(idx_rows, dtype=_I64).reshape(-1, width)
        shp = [n, most_rows, most_cols] if is_batch else [most_rows, most_cols]
        out["fl_sparse"].append((idx, vals, np.array(shp, dtype=_I64)))
    for key, kind, split_t in fl_ragged:
        row_vals: list = []
        outer = [0]
        for e in range(n):
            rows = list_rows[key][e] or []
            row_vals.extend(rows)
            outer.append(outer[-1] + len(rows))
        vals, lens = _concat(row_vals, kind)
        inner = np.concatenate(([0], np.cumsum(lens))).astype(split_t)
        outer_a = (np.array(outer).astype(split_t) if is_batch
                   else np.zeros((), dtype=split_t))  # unused (uninitialized in TF) for one
        out["fl_ragged"].append((vals, outer_a, inner))
    return out


def _str_list(v: Any) -> list[bytes]:
    return [x.encode() if isinstance(x, str) else bytes(x) for x in (v or [])]


def _sequence_outputs(r: dict[str, list], v2: bool) -> list:
    cs, fs = r["ctx_sparse"], r["fl_sparse"]
    outs = [x[0] for x in cs] + [x[1] for x in cs] + [x[2] for x in cs] + r["ctx_dense"]
    if v2:
        outs += [x[0] for x in r["ctx_ragged"]] + [x[1] for x in r["ctx_ragged"]]
    outs += [x[0] for x in fs] + [x[1] for x in fs] + [x[2] for x in fs]
    outs += r["fl_dense"] + r["fl_lengths"]
    if v2:
        fr = r["fl_ragged"]
        outs += [x[0] for x in fr] + [x[1] for x in fr] + [x[2] for x in fr]
    return outs


def _check_ctx_defaults(defaults: Sequence[np.ndarray], shapes: list, types: list) -> None:
    if len(defaults) != len(types):
        raise InvalidArgumentError(
            f"Expected len(context_dense_defaults) == len(context_dense_keys) but got: "
            f"{len(defaults)} vs. {len(types)}")
    for d, dv in enumerate(defaults):
        if dv.size == 0:
            continue
        shape = _shape_attr(shapes[d])
        if shape is None or tuple(dv.shape) != shape:
            raise InvalidArgumentError(
                f"default_value[{d}].shape() == {_fmt(dv.shape)} != context_dense_shapes[{d}] "
                f"== {_fmt(shape or ())}")
        if _kind(dv.dtype) != _kind(types[d]):
            raise InvalidArgumentError(
                f"context_dense_defaults[{d}].dtype() == {_kind(dv.dtype)} != "
                f"context_dense_types[{d}] == {_kind(types[d])}")


def _serialized_list(serialized: np.ndarray) -> tuple[list[bytes], bool]:
    if serialized.ndim > 1:
        raise InvalidArgumentError(
            f"Expected serialized to be a scalar or vector, got shape: "
            f"{_fmt(serialized.shape)}")
    return _flat_bytes(serialized), serialized.ndim == 1


@kernel("ParseSequenceExample")
def parse_sequence_example(ctx: KernelContext, serialized: np.ndarray, debug_name: np.ndarray,
                           *defaults: np.ndarray) -> list:
    a = ctx.attrs
    groups = (("context_sparse", "Ncontext_sparse", "context_sparse_types"),
              ("context_dense", "Ncontext_dense", "Tcontext_dense"),
              ("feature_list_sparse", "Nfeature_list_sparse", "feature_list_sparse_types"),
              ("feature_list_dense", "Nfeature_list_dense", "feature_list_dense_types"))
    for what, n_attr, t_attr in groups:
        n = int(a[n_attr])
        if len(a[f"{what}_keys"] or []) != n or len(a[t_attr]) != n:
            raise InvalidArgumentError(
                f"num_{what} ({n}) must match the size of {what}_keys "
                f"({len(a[f'{what}_keys'] or [])}) and {what}_types ({len(a[t_attr])})")
    examples, is_batch = _serialized_list(serialized)
    _check_ctx_defaults(defaults, a["context_dense_shapes"], a["Tcontext_dense"])
    missing = set(_str_list(a["feature_list_dense_missing_assumed_empty"]))
    r = _parse_sequence(
        examples, _flat_bytes(debug_name), is_batch,
        [(k, _kind(t), _shape_attr(s), dv) for k, t, s, dv in zip(
            _str_list(a["context_dense_keys"]), a["Tcontext_dense"],
            a["context_dense_shapes"], defaults)],
        [(k, _kind(t)) for k, t in zip(_str_list(a["context_sparse_keys"]),
                                       a["context_sparse_types"])],
        [],
        [(k, _kind(t), _shape_attr(s), k in missing) for k, t, s in zip(
            _str_list(a["feature_list_dense_keys"]), a["feature_list_dense_types"],
            a["feature_list_dense_shapes"])],
        [(k, _kind(t)) for k, t in zip(_str_list(a["feature_list_sparse_keys"]),
                                       a["feature_list_sparse_types"])],
        [])
    return _sequence_outputs(r, False)


@kernel("ParseSequenceExampleV2")
def parse_sequence_example_v2(ctx: KernelContext, serialized: np.ndarray,
                              debug_name: np.ndarray, context_sparse_keys: np.ndarray,
                              context_dense_keys: np.ndarray, context_ragged_keys: np.ndarray,
                              feature_list_sparse_keys: np.ndarray,
                              feature_list_dense_keys: np.ndarray,
                              feature_list_ragged_keys: np.ndarray,
                              feature_list_dense_missing_assumed_empty: np.ndarray,
                              *defaults: np.ndarray) -> list:
    a = ctx.attrs
    n_cs, n_fs, n_fd = (int(a["Ncontext_sparse"]), int(a["Nfeature_list_sparse"]),
                        int(a["Nfeature_list_dense"]))
    n_cd, n_cr, n_fr = (len(a["Tcontext_dense"]), len(a["context_ragged_value_types"]),
                        len(a["feature_list_ragged_value_types"]))
    if len(a["context_sparse_types"]) != n_cs:
        raise InvalidArgumentError("len(context_sparse_types) != Ncontext_sparse")
    if len(a["context_dense_shapes"]) != n_cd:
        raise InvalidArgumentError("len(context_dense_shapes) != len(Tcontext_dense)")
    if len(a["context_ragged_split_types"]) != n_cr:
        raise InvalidArgumentError(
            "len(context_ragged_split_types) != len(context_ragged_value_types)")
    if len(a["feature_list_sparse_types"]) != n_fs:
        raise InvalidArgumentError("len(feature_list_sparse_types) != Nfeature_list_sparse")
    if len(a["feature_list_dense_types"]) != n_fd or len(a["feature_list_dense_shapes"]) != n_fd:
        raise InvalidArgumentError("len(feature_list_dense_types) != Nfeature_list_dense")
    if len(a["feature_list_ragged_split_types"]) != n_fr:
        raise InvalidArgumentError(
            "len(feature_list_ragged_split_types) != len(feature_list_ragged_value_types)")
    examples, is_batch = _serialized_list(serialized)
    checks = ((context_dense_keys, n_cd, "context_dense_keys) to match len(Tcontext_dense)"),
              (context_sparse_keys, n_cs, "context_sparse_keys) to match Ncontext_sparse"),
              (context_ragged_keys, n_cr,
               "context_ragged_keys) to match len(context_ragged_value_types)"),
              (feature_list_dense_keys, n_fd,
               "feature_list_dense_keys) to match Nfeature_list_dense"),
              (feature_list_dense_missing_assumed_empty, n_fd,
               "feature_list_dense_missing_assumed_empty to match Nfeature_list_dense"),
              (feature_list_sparse_keys, n_fs,
               "feature_list_sparse_keys) to match Nfeature_list_sparse"),
              (feature_list_ragged_keys, n_fr,
               "feature_list_ragged_keys) to match len(feature_list_ragged_value_types)"))
    for keys, n, what in checks:
        if keys.size != n:
            raise InvalidArgumentError(f"Expected len({what}")
    _check_ctx_defaults(defaults, a["context_dense_shapes"], a["Tcontext_dense"])
    missing = [bool(x) for x in feature_list_dense_missing_assumed_empty.reshape(-1)]

    def ragged(keys: np.ndarray, vt: str, st: str) -> list:
        out = []
        for k, t, s in zip(_flat_bytes(keys), a[vt], a[st]):
            if np.dtype(s) not in (np.dtype(np.int32), _I64):
                raise InvalidArgumentError(f"Invalid ragged_split_type: {s}")
            out.append((k, _kind(t), np.dtype(s)))
        return out

    r = _parse_sequence(
        examples, _flat_bytes(debug_name), is_batch,
        [(k, _kind(t), _shape_attr(s), dv) for k, t, s, dv in zip(
            _flat_bytes(context_dense_keys), a["Tcontext_dense"], a["context_dense_shapes"],
            defaults)],
        [(k, _kind(t)) for k, t in zip(_flat_bytes(context_sparse_keys),
                                       a["context_sparse_types"])],
        ragged(context_ragged_keys, "context_ragged_value_types", "context_ragged_split_types"),
        [(k, _kind(t), _shape_attr(s), m) for k, t, s, m in zip(
            _flat_bytes(feature_list_dense_keys), a["feature_list_dense_types"],
            a["feature_list_dense_shapes"], missing)],
        [(k, _kind(t)) for k, t in zip(_flat_bytes(feature_list_sparse_keys),
                                       a["feature_list_sparse_types"])],
        ragged(feature_list_ragged_keys, "feature_list_ragged_value_types",
               "feature_list_ragged_split_types"))
    return _sequence_outputs(r, True)


# --- ParseSingleSequenceExample (protobuf's own parser, as TF uses) ----------------------

def _pb_kind(f: Any) -> str | None:
    return {"bytes_list": "string", "float_list": "float", "int64_list": "int64"}.get(
        f.WhichOneof("kind"))


def _pb_values(f: Any, kind: str) -> np.ndarray:
    if kind == "string":
        return _objects(list(f.bytes_list.value))
    lst = f.float_list if kind == "float" else f.int64_list
    return np.array(lst.value, dtype=_NP[kind]) if len(lst.value) else np.zeros(0, _NP[kind])


def _pb_debug(f: Any) -> str:
    from google.protobuf import text_format
    return text_format.MessageToString(f, as_one_line=True)


@kernel("ParseSingleSequenceExample")
def parse_single_sequence_example(ctx: KernelContext, serialized: np.ndarray,
                                  missing_assumed_empty: np.ndarray, *args: np.ndarray) -> list:
    from google.protobuf.message import DecodeError

    from dfg.schemas import example_pb2

    a = ctx.attrs
    n_cs, n_cd = int(a["Ncontext_sparse"]), int(a["Ncontext_dense"])
    n_fs, n_fd = int(a["Nfeature_list_sparse"]), int(a["Nfeature_list_dense"])
    if len(a["context_sparse_types"]) != n_cs:
        raise InvalidArgumentError("len(context_sparse_keys) != len(context_sparse_types)")
    if len(a["Tcontext_dense"]) != n_cd:
        raise InvalidArgumentError("len(context_dense_keys) != len(context_dense_types)")
    if len(a["context_dense_shapes"]) != n_cd:
        raise InvalidArgumentError("len(context_dense_keys) != len(context_dense_shapes)")
    if len(a["feature_list_sparse_types"]) != n_fs:
        raise InvalidArgumentError(
            "len(feature_list_sparse_keys) != len(feature_list_sparse_types)")
    if len(a["feature_list_dense_types"]) != n_fd:
        raise InvalidArgumentError(
            "len(feature_list_dense_keys) != len(feature_list_dense_types)")
    pos = 0
    groups = []
    for n in (n_cs, n_cd, n_fs, n_fd):
        groups.append(args[pos:pos + n])
        pos += n
    defaults, debug_name = args[pos:pos + n_cd], args[pos + n_cd]
    names = ("context_sparse_keys", "context_dense_keys", "feature_list_sparse_keys",
             "feature_list_dense_keys")
    cs_keys, cd_keys, fs_keys, fd_keys = (
        [_scalar_bytes(k, f"{nm}[{i}]") for i, k in enumerate(g)]
        for nm, g in zip(names, groups))
    if missing_assumed_empty.ndim != 1:
        raise InvalidArgumentError(
            "Expected feature_list_dense_missing_assumed_empty to be a vector, got shape: "
            f"{_fmt(missing_assumed_empty.shape)}")
    allowed_missing = set(_flat_bytes(missing_assumed_empty))
    if debug_name.size > 0 and debug_name.ndim != 0:
        raise InvalidArgumentError(
            f"Expected debug_name to be a scalar, got shape: {_fmt(debug_name.shape)}")
    name = _show(_scalar_bytes(debug_name, "debug_name")) if debug_name.size else "<unknown>"
    ser = _scalar_bytes(serialized, "serialized")
    if len(defaults) != n_cd:
        raise InvalidArgumentError(
            f"Expected len(context_dense_defaults) == len(context_dense_keys) but got: "
            f"{len(defaults)} vs. {n_cd}")
    cd_shapes = [_shape_attr(s) for s in a["context_dense_shapes"]]
    for d, dv in enumerate(defaults):
        if dv.size > 0:
            if cd_shapes[d] is None or tuple(dv.shape) != cd_shapes[d]:
                raise InvalidArgumentError(
                    f"def_value[{d}].shape() == {_fmt(dv.shape)} != context_dense_shapes_[{d}]"
                    f" == {_fmt(cd_shapes[d] or ())}")
            if _kind(dv.dtype) != _kind(a["Tcontext_dense"][d]):
                raise InvalidArgumentError(
                    f"context_dense_defaults[{d}].dtype() == {_kind(dv.dtype)} != "
                    f"context_dense_types_[{d}] == {_kind(a['Tcontext_dense'][d])}")
    if not (n_cs or n_cd or n_fs or n_fd):
        return []  # nothing requested: TF does not even parse the input
    try:
        ex = example_pb2.SequenceExample.FromString(ser)
    except DecodeError:
        raise InvalidArgumentError(
            f"Could not parse example input, value: '{_show(ser)}'") from None
    ctx_map, fl_map = ex.context.feature, ex.feature_lists.feature_list

    def dense_copy(f: Any, key: bytes, kind: str, shape: tuple, index: int) -> np.ndarray:
        vals = _pb_values(f, kind)
        numel = math.prod(shape)
        if vals.size != numel:
            sep = " " if kind == "string" else ": "
            raise InvalidArgumentError(
                f"Name: {name}, Key{sep}{_show(key)}, Index: {index}.  Number of "
                f"{_TYPE_STR[kind]} values != expected.  values size: {vals.size} but output "
                f"shape: {_fmt(shape)}")
        return vals.reshape(shape)

    def mismatch(what: str, key: bytes, kind: str, f: Any) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"Name: {name}, {what}: {_show(key)}.  Data types don't match. Expected type: "
            f"{kind}  Feature is: {_pb_debug(f)}")

    ctx_dense_out = []
    for d, key in enumerate(cd_keys):
        kind, shape = _kind(a["Tcontext_dense"][d]), cd_shapes[d]
        if shape is None or any(x < 0 for x in shape):
            raise InvalidArgumentError(f"context_dense_shapes[{d}] is not fully defined")
        k = key.decode("utf-8", "surrogateescape")
        if k not in ctx_map:
            if defaults[d].size == 0:
                raise InvalidArgumentError(
                    f"Name: {name}, Context feature '{_show(key)}' is required but could not "
                    "be found.")
            ctx_dense_out.append(defaults[d].reshape(shape))
            continue
        f = ctx_map[k]
        if _pb_kind(f) != kind:
            raise mismatch("Context feature", key, kind, f)
        ctx_dense_out.append(dense_copy(f, key, kind, shape, 0))
    ctx_sparse_out = []
    for d, key in enumerate(cs_keys):
        kind = _kind(a["context_sparse_types"][d])
        k = key.decode("utf-8", "surrogateescape")
        f = ctx_map[k] if k in ctx_map else None
        if f is not None and _pb_kind(f) is not None:
            if _pb_kind(f) != kind:
                raise mismatch("Context feature", key, kind, f)
            v = _pb_values(f, kind)
        else:
            v = _empty(kind)
        ctx_sparse_out.append((np.arange(v.size, dtype=_I64).reshape(-1, 1), v,
                               np.array([v.size], dtype=_I64)))
    fl_dense_out = []
    for d, key in enumerate(fd_keys):
        kind = _kind(a["feature_list_dense_types"][d])
        shape = _shape_attr(a["feature_list_dense_shapes"][d])
        if shape is None or any(x < 0 for x in shape):
            raise InvalidArgumentError(f"feature_list_dense_shapes[{d}] is not fully defined")
        k = key.decode("utf-8", "surrogateescape")
        if k not in fl_map and key not in allowed_missing:
            raise InvalidArgumentError(
                f"Name: {name}, Feature list '{_show(key)}' is required but could not be "
                "found.  Did you mean to include it in feature_list_dense_missing_assumed_empty "
                "or feature_list_dense_defaults?")
        feats = list(fl_map[k].feature) if k in fl_map else []
        rows = []
        for t, f in enumerate(feats):
            if _pb_kind(f) != kind:
                raise mismatch("Feature list", key, kind, f).__class__(
                    f"Name: {name}, Feature list: {_show(key)}, Index: {t}.  Data types don't "
                    f"match. Expected type: {kind}  Feature is: {_pb_debug(f)}")
            rows.append(dense_copy(f, key, kind, shape, t))
        fl_dense_out.append(np.stack(rows) if rows else _empty(kind, (0, *shape)))
    fl_sparse_out = []
    for d, key in enumerate(fs_keys):
        kind = _kind(a["feature_list_sparse_types"][d])
        k = key.decode("utf-8", "surrogateescape")
        feats = list(fl_map[k].feature) if k in fl_map else []
        vals_all = []
        for t, f in enumerate(feats):
            if _pb_kind(f) is not None and _pb_kind(f) != kind:
                raise InvalidArgumentError(
                    f"Name: {name}, Feature List: {_show(key)}, Index: {t}.  Data types don't "
                    f"match. Expected type: {kind}  Feature is: {_pb_debug(f)}")
            vals_all.append(_pb_values(f, kind) if _pb_kind(f) is not None else _empty(kind))
        vals, lens = _concat(vals_all, kind)
        idx = np.stack([np.repeat(np.arange(len(feats), dtype=_I64), lens), _ranges(lens)],
                       axis=1) if vals.size else np.zeros((0, 2), _I64)
        fl_sparse_out.append((idx, vals, np.array([len(feats), max(lens, default=0)],
                                                  dtype=_I64)))
    cs, fs = ctx_sparse_out, fl_sparse_out
    return ([x[0] for x in cs] + [x[1] for x in cs] + [x[2] for x in cs] + ctx_dense_out
            + [x[0] for x in fs] + [x[1] for x in fs] + [x[2] for x in fs] + fl_dense_out)


# --- DecodeRaw / DecodePaddedRaw ---------------------------------------------------------

def _raw_dtype(ctx: KernelContext, little_endian: bool) -> np.dtype:
    t = ctx.attrs["out_type"]
    if isinstance(t, int):  # bfloat16: numpy cannot hold it
        raise UnimplementedError(f"{ctx.op} to {D.name(t)} is not supported (numpy cannot "
                                 "hold it)")
    dt = np.dtype(t)
    return dt.newbyteorder("<" if little_endian else ">") if dt.itemsize > 1 else dt


@kernel("DecodeRaw")
def decode_raw(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    dt = _raw_dtype(ctx, bool(ctx.attrs["little_endian"]))
    flat = _flat_bytes(data)
    size = len(flat[0]) if flat else 0
    for i, s in enumerate(flat):
        if len(s) != size:
            raise InvalidArgumentError(
                f"DecodeRaw requires input strings to all be the same size, but element {i} "
                f"has size {len(s)} != {size}")
    if size == 0:
        return np.zeros((*data.shape, 0), dtype=np.dtype(ctx.attrs["out_type"]))
    if size % dt.itemsize:
        raise InvalidArgumentError(
            f"Input to DecodeRaw has length {size} that is not a multiple of {dt.itemsize}, "
            f"the size of {D.name(D.from_numpy(dt.newbyteorder('=')))}")
    # NumPy's own instance of the type, not an equal byte-ordered descriptor (fast paths
    # compare dtypes by identity)
    out = np.frombuffer(b"".join(flat), dtype=dt).astype(np.dtype(ctx.attrs["out_type"]))
    return out.reshape(*data.shape, size // dt.itemsize)


@kernel("DecodePaddedRaw")
def decode_padded_raw(ctx: KernelContext, data: np.ndarray, fixed_length: np.ndarray
                      ) -> np.ndarray:
    dt = _raw_dtype(ctx, bool(ctx.attrs["little_endian"]))
    if fixed_length.ndim != 0:
        raise InvalidArgumentError(f"k must be scalar, got shape {_fmt(fixed_length.shape)}")
    n = int(fixed_length)
    if n % dt.itemsize:
        raise InvalidArgumentError(
            f"fixed_length ({n}) must be a multiple of the size of out_type ({dt.itemsize})")
    if n <= 0:
        raise InvalidArgumentError(f"fixed_length ({n}) must be greater than zero.")
    buf = b"".join(s[:n].ljust(n, b"\0") for s in _flat_bytes(data))
    out = np.frombuffer(buf, dtype=dt).astype(np.dtype(ctx.attrs["out_type"]))
    return out.reshape(*data.shape, n // dt.itemsize)


# --- DecodeCSV ---------------------------------------------------------------------------

_WS = b" \t\n\v\f\r"
_INT_RE = re.compile(rb"[+-]?[0-9]+")
_FLOAT_RE = re.compile(
    rb"-?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?)",
    re.IGNORECASE)


def _atoi(s: bytes, bits: int) -> int | None:
    """absl::SimpleAtoi: optional sign, decimal digits, surrounding whitespace allowed."""
    s = s.strip(_WS)
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def _atof(s: bytes, f32: bool) -> float | None:
    """absl::SimpleAtof / SimpleAtod (from_chars, general format): one optional leading +,
    overflow gives +-inf."""
    s = s.strip(_WS)
    if s.startswith(b"+"):
        s = s[1:]
        if s.startswith(b"-"):
            return None
    if not _FLOAT_RE.fullmatch(s):
        return None
    low = s.lower().lstrip(b"-")
    neg = s.startswith(b"-")
    if low.startswith(b"nan"):
        return -math.nan if neg else math.nan
    v = float(s.replace(b"inity", b"").decode())
    if not f32:
        return v
    return float(_f32_exact(s.decode(), v))


def _f32_exact(text: str, d: float) -> np.float32:
    """A decimal string rounded once to float32 (float32(float(text)) rounds twice)."""
    with np.errstate(over="ignore"):
        f = np.float32(d)
    if not np.isfinite(f) or float(f) == d:
        return f
    lo, hi = sorted((f, np.nextafter(f, np.float32(np.inf) if float(f) < d
                                     else np.float32(-np.inf))))
    mid = (float(lo) + float(hi)) / 2
    if mid != d:  # not a tie in double: the double rounding agreed
        return f
    from fractions import Fraction
    exact = Fraction(text)
    return lo if exact < Fraction(mid) else hi if exact > Fraction(mid) else f


def _csv_fields(ctx: KernelContext, rec: bytes, delim: int, quote: bool,
                select: list[int]) -> list[bytes]:
    """TF's ExtractFields: the selected fields of one record."""
    out: list[bytes] = []
    pos = nparsed = sel = 0
    n = len(rec)
    if not rec:
        return out
    while pos < n:
        if rec[pos] in (10, 13):
            pos += 1
            continue
        include = not select or select[sel] == nparsed
        field = bytearray()
        if quote and rec[pos] == 34:
            pos += 1
            while pos < n - 1 and (rec[pos] != 34 or rec[pos + 1] != delim):
                if rec[pos] != 34:
                    field.append(rec[pos])
                    pos += 1
                else:
                    if rec[pos + 1] != 34:
                        raise InvalidArgumentError(
                            "Quote inside a string has to be escaped by another quote")
                    field.append(34)
                    pos += 2
            if not (pos < n and rec[pos] == 34 and (pos == n - 1 or rec[pos + 1] == delim)):
                raise InvalidArgumentError(
                    "Quoted field has to end with quote followed by delim or end")
            pos += 2
        else:
            while pos < n and rec[pos] != delim:
                c = rec[pos]
                if (quote and c == 34) or c in (10, 13):
                    raise InvalidArgumentError(
                        "Unquoted fields cannot have quotes/CRLFs inside")
                field.append(c)
                pos += 1
            pos += 1
        nparsed += 1
        if include:
            out.append(bytes(field))
            sel += 1
            if select and sel == len(select):
                return out
    include = not select or select[sel] == nparsed
    if include and rec[-1] == delim:
        out.append(b"")
    return out


@kernel("DecodeCSV")
def decode_csv(ctx: KernelContext, records: np.ndarray, *defaults: np.ndarray) -> list:
    a = ctx.attrs
    types = [np.dtype(t) for t in a["OUT_TYPE"]]
    select = [int(x) for x in a["select_cols"] or []]
    delim_s = a["field_delim"]
    delim_b = delim_s.encode() if isinstance(delim_s, str) else bytes(delim_s)
    if select and len(select) != len(types):
        raise InvalidArgumentError("select_cols should match output size")
    if any(x >= y for x, y in zip(select, select[1:])):
        raise InvalidArgumentError("select_cols should be strictly increasing indices")
    if select and select[0] < 0:
        raise InvalidArgumentError("select_cols should be non-negative indices")
    if len(delim_b) != 1:
        raise InvalidArgumentError("field_delim should be only 1 char")
    na = a["na_value"]
    na_b = na.encode() if isinstance(na, str) else bytes(na)
    for i, dv in enumerate(defaults):
        if dv.ndim > 1:
            raise InvalidArgumentError("Each record default should be at most rank 1")
        if dv.size >= 2:
            raise InvalidArgumentError(
                f"There should only be 1 default per field but field {i} has {dv.size}")
    recs = _flat_bytes(records)
    cols: list[list] = [[] for _ in types]
    quote = bool(a["use_quote_delim"])
    for i, rec in enumerate(recs):
        fields = _csv_fields(ctx, rec, delim_b[0], quote, select)
        if len(fields) != len(types):
            raise InvalidArgumentError(
                f"Expect {len(types)} fields but have {len(fields)} in record {i}")
        for f, (field, dt) in enumerate(zip(fields, types)):
            if not field or field == na_b:
                if defaults[f].size != 1:
                    raise InvalidArgumentError(
                        f"Field {f} is required but missing in record {i}!")
                cols[f].append(defaults[f].reshape(-1)[0])
                continue
            if dt == _OBJ:
                cols[f].append(field)
                continue
            if dt.kind == "i":
                v: Any = _atoi(field, dt.itemsize * 8)
                what = "int32" if dt.itemsize == 4 else "int64"
            else:
                v = _atof(field, dt == _F32)
                what = "float" if dt == _F32 else "double"
            if v is None:
                raise InvalidArgumentError(
                    f"Field {f} in record {i} is not a valid {what}: {_show(field)}")
            cols[f].append(v)
    outs = []
    for f, dt in enumerate(types):
        if dt == _OBJ:
            outs.append(_objects(cols[f], records.shape))
        else:
            outs.append(np.array(cols[f], dtype=dt).reshape(records.shape))
    return outs


# --- SerializeTensor / ParseTensor -------------------------------------------------------

def _pb_varint(v: int) -> bytes:
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _pb_field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + _pb_varint(len(payload)) + payload


@kernel("SerializeTensor")
def serialize_tensor(ctx: KernelContext, tensor: np.ndarray) -> np.ndarray:
    # Tensor::AsProtoTensorContent, serialized: dtype, shape, then tensor_content (every
    # numeric dtype, scalars included) or string_val.
    dt = D.from_numpy(tensor.dtype)
    dims = b"".join(_pb_field(0x12, b"\x08" + _pb_varint(d) if d else b"")
                    for d in tensor.shape)
    out = b"\x08" + _pb_varint(dt) + _pb_field(0x12, dims)
    if tensor.dtype == _OBJ:
        out += b"".join(_pb_field(0x42, v) for v in _flat_bytes(tensor))
    elif tensor.size:
        le = tensor.dtype.newbyteorder("<") if tensor.dtype.itemsize > 1 else tensor.dtype
        out += _pb_field(0x22, np.ascontiguousarray(tensor, dtype=le).tobytes())
    return np.array(out, dtype=object)


@kernel("ParseTensor")
def parse_tensor(ctx: KernelContext, serialized: np.ndarray) -> np.ndarray:
    from google.protobuf.message import DecodeError

    from dfg.graphdef.tensors import to_numpy
    from dfg.schemas import tensor_pb2

    if serialized.ndim != 0:
        raise InvalidArgumentError(
            f"Expected `serialized` to be a scalar, got shape: {_fmt(serialized.shape)}")
    data = _scalar_bytes(serialized, "serialized")
    try:
        proto = tensor_pb2.TensorProto.FromString(data)
    except DecodeError:
        raise InvalidArgumentError(
            f"Could not parse `serialized` as TensorProto: '{_show(data)}'") from None
    want = ctx.attrs["out_type"]
    want_id = want if isinstance(want, int) else D.from_numpy(np.dtype(want))
    if not D.is_numpy_compatible(proto.dtype) or any(d.size < 0 for d in
                                                      proto.tensor_shape.dim):
        if proto.dtype == 0 or any(d.size < 0 for d in proto.tensor_shape.dim) \
                or proto.tensor_shape.unknown_rank:
            raise InvalidArgumentError(
                f"Cannot parse tensor from proto: {_show(data)}")
        raise UnimplementedError(
            f"ParseTensor of a {D.name(proto.dtype)} tensor is not supported (numpy cannot "
            "hold it)")
    if proto.tensor_shape.unknown_rank:
        raise InvalidArgumentError(f"Cannot parse tensor from proto: {_show(data)}")
    try:
        value = to_numpy(proto)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"Cannot parse tensor from proto: {e.message}") from None
    if D.base(proto.dtype) != want_id:
        raise InvalidArgumentError(
            f"Type mismatch between parsed tensor ({D.name(D.base(proto.dtype))}) and dtype "
            f"({D.name(want_id)})")
    return value


# --- DecodeJSONExample -------------------------------------------------------------------

class _Obj(tuple):
    """A JSON object: its (key, value) pairs in order (duplicates kept)."""


class _JsonError(Exception):
    pass


def _json_fields(obj: Any, fields: dict[str, tuple[str, ...]], where: str
                 ) -> list[tuple[str, Any]]:
    """An object's (field, value) pairs in order, field names (JSON or proto spelling)
    mapped to the proto name; unknown fields are errors."""
    if not isinstance(obj, _Obj):
        raise _JsonError(f"{where}: expected an object")
    out = []
    for k, v in obj:
        name = next((f for f, spellings in fields.items() if k in spellings), None)
        if name is None:
            raise _JsonError(f"{where}: no such field: '{k}'")
        out.append((name, v))  # a repeated field is written again, as TF streams it
    return out


def _json_int64(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise _JsonError(f"{where}: expected an integer")
    if v is None:
        return 0
    if isinstance(v, str):
        try:
            v = int(v, 10) if re.fullmatch(r"-?[0-9]+", v) else float(v)
        except ValueError:
            raise _JsonError(f"{where}: invalid integer '{v}'") from None
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise _JsonError(f"{where}: expected integer, but JSON number had fractional part")
        v = int(v)
    if not -(1 << 63) <= v < (1 << 63):
        raise _JsonError(f"{where}: JSON number out of range for int64")
    return v


def _json_float(v: Any, where: str) -> np.float32:
    if isinstance(v, bool):
        raise _JsonError(f"{where}: expected a number")
    if v is None:
        return np.float32(0)
    if isinstance(v, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if v in special:
            return np.float32(special[v])
        try:
            v = float(v)
        except ValueError:
            raise _JsonError(f"{where}: invalid number '{v}'") from None
        if not math.isfinite(v):
            raise _JsonError(f"{where}: invalid number")
    with np.errstate(over="ignore"):
        f = np.float32(v)
    if math.isinf(f) and math.isfinite(v):
        raise _JsonError(f"{where}: float out of range")
    return f


def _json_bytes(v: Any, where: str) -> bytes:
    if v is None:
        return b""
    if not isinstance(v, str):
        raise _JsonError(f"{where}: expected a base64 string")
    s = v.replace("-", "+").replace("_", "/")
    s += "=" * (-len(s) % 4)
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise _JsonError(f"{where}: invalid base64") from None


_LISTS = {"bytes_list": ("bytesList", "bytes_list"), "float_list": ("floatList", "float_list"),
          "int64_list": ("int64List", "int64_list")}


def _json_list(obj: Any, kind: str, where: str) -> bytes:
    out = bytearray()
    for _, vals in _json_fields(obj, {"value": ("value",)}, where):
        if vals is None:
            continue
        for i, v in enumerate(vals if isinstance(vals, list) else [vals]):
            at = f"{where}.value[{i}]"
            if kind == "bytes_list":
                out += _pb_field(0x0A, _json_bytes(v, at))
            elif kind == "float_list":
                out += b"\x0d" + np.float32(_json_float(v, at)).astype("<f4").tobytes()
            else:
                out += b"\x08" + _pb_varint(_json_int64(v, at))
    return bytes(out)


def _json_feature(obj: Any, where: str) -> bytes:
    out = bytearray()
    chosen = None
    for name, v in _json_fields(obj, _LISTS, where):
        if v is None:
            continue
        if chosen is not None:
            raise _JsonError(f"{where}: more than one field of oneof 'kind'")
        chosen = name
        tag = {"bytes_list": 0x0A, "float_list": 0x12, "int64_list": 0x1A}[name]
        out += _pb_field(tag, _json_list(v, name, f"{where}.{name}"))
    return bytes(out)


def _json_example(text: bytes) -> bytes:
    def reject(c: str) -> Any:
        raise _JsonError(f"invalid JSON token {c}")

    try:
        obj = json.loads(text.decode("utf-8"), object_pairs_hook=_Obj, parse_constant=reject)
    except (ValueError, UnicodeDecodeError) as e:
        raise _JsonError(str(e)) from None
    out = bytearray()
    for _, features in _json_fields(obj, {"features": ("features",)}, "Example"):
        if features is None:
            continue
        body = bytearray()
        for _, fmap in _json_fields(features, {"feature": ("feature",)}, "features"):
            if fmap is None:
                continue
            if not isinstance(fmap, _Obj):
                raise _JsonError("features.feature: expected an object")
            keys = set()
            for key, feat in fmap:
                if key in keys:
                    raise _JsonError(f"features.feature: duplicate map key '{key}'")
                keys.add(key)
                entry = _pb_field(0x0A, key.encode("utf-8", "surrogatepass"))
                if feat is not None:
                    entry += _pb_field(0x12, _json_feature(feat, f"features.feature[{key}]"))
                body += _pb_field(0x0A, entry)
        out += _pb_field(0x0A, bytes(body))
    return bytes(out)


@kernel("DecodeJSONExample")
def decode_json_example(ctx: KernelContext, json_examples: np.ndarray) -> np.ndarray:
    out = []
    for text in _flat_bytes(json_examples):
        try:
            out.append(_json_example(text))
        except _JsonError as e:
            raise InvalidArgumentError(f"Error while parsing JSON: {e}") from None
    return _objects(out, json_examples.shape)


# --- DecodeCompressed --------------------------------------------------------------------

_MAX_DECOMPRESSED = 1 << 30  # TF's cap on one decompressed string


def _inflate(data: bytes, gzip: bool) -> bytes:
    out = bytearray()
    while True:
        d = zlib.decompressobj(31 if gzip else 15)
        try:
            out += d.decompress(data, _MAX_DECOMPRESSED + 1 - len(out))
        except zlib.error as e:
            msg = str(e).split(": ", 1)[-1]
            code = re.search(r"Error (-?\d+)", str(e))
            raise DataLossError(
                f"inflate() failed with error {code.group(1) if code else -3}: {msg}") from None
        if len(out) > _MAX_DECOMPRESSED:
            raise InvalidArgumentError("Decompressed size exceeds 1GB limit")
        # a truncated stream gives what it holds; gzip members may follow one another
        if not (gzip and d.eof and d.unused_data):
            return bytes(out)
        data = d.unused_data


@kernel("DecodeCompressed")
def decode_compressed(ctx: KernelContext, data: np.ndarray) -> np.ndarray:
    kind = ctx.attrs["compression_type"]
    if kind not in ("", "ZLIB", "GZIP", "ZSTD"):
        raise InvalidArgumentError("Only ZLIB, ZSTD, GZIP or NONE are supported compressions")
    vals = _flat_bytes(data)
    if kind == "":
        out = vals
    elif kind == "ZSTD":
        out = [_zstd(v) for v in vals]
    else:
        out = [_inflate(v, kind == "GZIP") for v in vals]
    return _objects(out, data.shape)


def _zstd(v: bytes) -> bytes:
    try:
        from compression import zstd  # type: ignore[import-not-found]
    except ImportError:
        raise UnimplementedError(
            "DecodeCompressed with compression_type ZSTD needs Python 3.14's compression.zstd"
        ) from None
    try:
        info = zstd.get_frame_info(v)
    except zstd.ZstdError:
        raise InvalidArgumentError("Failed to determine decompressed size") from None
    size = info.decompressed_size
    if size is None:
        raise InvalidArgumentError("Failed to determine decompressed size")
    if size > _MAX_DECOMPRESSED:
        raise InvalidArgumentError("Decompressed size exceeds 1GB limit")
    try:
        return zstd.decompress(v)
    except zstd.ZstdError as e:
        raise InvalidArgumentError(f"Failed to decompress zstd input: {e}") from None
