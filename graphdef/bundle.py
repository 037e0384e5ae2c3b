"""Read TensorFlow's checkpoint bundles (``PREFIX.index`` + ``PREFIX.data-NNNNN-of-MMMMM``).

The index is a LevelDB-format table (sorted key -> value):

* the last 48 bytes are the footer: the metaindex and index BlockHandles (two varint64 each:
  offset, size), zero padding, then the magic number ``0xdb4775248b80fb57`` (little-endian);
* each block is followed by a 5-byte trailer: a compression byte (only 0, none, is written by
  TensorFlow's bundle writer) and the masked crc32c of the block contents plus that byte;
* a block holds prefix-compressed entries (varint32 shared, unshared, value length, the key
  suffix, the value), then uint32 restart offsets and their count;
* the index block's values are handles of data blocks, whose entries are the bundle: key ``""``
  maps to a ``BundleHeaderProto``, every other key (a checkpoint key) to a ``BundleEntryProto``.

A tensor is ``size`` bytes at ``offset`` in its data shard: raw little-endian C-order bytes for
numbers, and for strings the varint64 length of each element, a 4-byte masked crc32c of the
lengths, then the bytes. Every checksum is verified; a mismatch is a ``GraphLoadError`` naming
the file and the key (TensorFlow calls it data loss).

crc32c is computed with numpy (no compiled dependency): the data is cut into equal lanes whose
CRCs advance together one byte per step, and the lanes are then combined with the linear map
that "appending L zero bytes" applies to a CRC register. About 100 MB/s on one core.
"""

from __future__ import annotations

import math
import os
import struct
import threading
from pathlib import Path
from typing import Any

import numpy as np

from dfg.schemas import types_pb2

from . import dtypes as D
from . import files
from .errors import GraphLoadError, ResourceExhaustedError, UnsupportedDTypeError
from .tensors import format_shape

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5
HEADER_KEY = b""
# the dtypes a stored tensor may have (no ref types, no DT_INVALID)
_DATA_TYPES = frozenset(v for v in types_pb2.DataType.values() if 0 < v < 100)
# sanity bounds of what an index may claim (far beyond any real checkpoint)
MAX_SHARDS = 1 << 20
MAX_DIM = 1 << 62
MAX_RANK = 254
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"

# --- crc32c (Castagnoli, reflected polynomial 0x82F63B78) -----------------------------------


def _make_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table[i] = c
    return table


_TABLE = _make_table()
_TABLE_LIST = [int(x) for x in _TABLE]
_PY_MAX = 2048       # below this many bytes a plain Python loop is faster than lanes


def _advance_py(reg: int, data: bytes) -> int:
    t = _TABLE_LIST
    for b in data:
        reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


def _advance(reg: int, data: bytes | memoryview | np.ndarray) -> int:
    """The CRC register after feeding ``data`` (no initial or final inversion)."""
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    n = buf.size
    if n < _PY_MAX:
        return _advance_py(reg, buf.tobytes())
    lanes = max(2, int(math.sqrt(n * 2.5)))   # balances per-step numpy overhead vs combining
    length = n // lanes
    body = buf[: lanes * length].reshape(lanes, length).T.copy()   # row t = byte t of each lane
    # lanes start from 0; 32 extra lanes feed zeros into the basis registers, which yields the
    # columns of the linear map "advance by `length` zero bytes" needed to chain the lanes
    regs = np.zeros(lanes + 32, dtype=np.uint32)
    regs[lanes:] = np.left_shift(np.uint32(1), np.arange(32, dtype=np.uint32))
    col = np.zeros(lanes + 32, dtype=np.uint32)
    table = _TABLE
    for t in range(length):
        col[:lanes] = body[t]
        regs = table[(regs ^ col) & 0xFF] ^ (regs >> 8)
    lane_crc = regs[:lanes].tolist()
    basis = regs[lanes:].tolist()
    # the zero-advance map as four byte-indexed tables: M(r) = T0[b0] ^ T1[b1] ^ T2[b2] ^ T3[b3]
    byte_tables = []
    for k in range(4):
        tab = [0] * 256
        for v in range(1, 256):
            low = v & -v
            bit = low.bit_length() - 1
            tab[v] = tab[v ^ low] ^ basis[8 * k + bit]
        byte_tables.append(tab)
    t0, t1, t2, t3 = byte_tables
    for g in lane_crc:
        reg = t0[reg & 0xFF] ^ t1[(reg >> 8) & 0xFF] ^ t2[(reg >> 16) & 0xFF] ^ t3[reg >> 24] ^ g
    return _advance_py(reg, buf[lanes * length:].tobytes())


def crc32c(data: bytes | memoryview | np.ndarray, crc: int = 0) -> int:
    """crc32c of ``data``, extending ``crc`` (the CRC of what came before; 0 to start)."""
    return _advance(crc ^ 0xFFFFFFFF, data) ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """LevelDB's masked CRC, as stored in files (a CRC of data holding CRCs stays strong)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


# --- LevelDB table --------------------------------------------------------------------------


def _varint(buf: bytes, pos: int, source: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise GraphLoadError("truncated or bad varint in the bundle index", source=source)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _read_block(data: bytes, offset: int, size: int, source: str) -> bytes:
    end = offset + size
    if offset < 0 or end + BLOCK_TRAILER_SIZE > len(data):
        raise GraphLoadError(f"block at {offset} (+{size}) runs past the end of the index "
                             f"({len(data)} bytes)", source=source)
    kind = data[end]
    stored = struct.unpack_from("<I", data, end + 1)[0]
    actual = mask(crc32c(data[offset:end + 1]))
    if stored != actual:
        raise GraphLoadError(f"checksum mismatch in the index block at offset {offset}: stored "
                             f"{stored:#010x}, computed {actual:#010x} (corrupt file)",
                             source=source)
    if kind != 0:
        raise GraphLoadError(f"index block at offset {offset} is compressed (type {kind}); "
                             "only uncompressed blocks (type 0, what TensorFlow writes) are "
                             "supported", source=source)
    return data[offset:end]


def _block_entries(block: bytes, source: str) -> list[tuple[bytes, bytes]]:
    if len(block) < 4:
        raise GraphLoadError("index block too short", source=source)
    num_restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    limit = len(block) - 4 - 4 * num_restarts
    if limit < 0:
        raise GraphLoadError(f"index block claims {num_restarts} restart points", source=source)
    out: list[tuple[bytes, bytes]] = []
    pos, key = 0, b""
    while pos < limit:
        shared, pos = _varint(block, pos, source)
        unshared, pos = _varint(block, pos, source)
        vlen, pos = _varint(block, pos, source)
        if shared > len(key) or pos + unshared + vlen > limit:
            raise GraphLoadError("bad entry in an index block", source=source)
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        out.append((key, block[pos:pos + vlen]))
        pos += vlen
    return out


def read_table(path: str | os.PathLike[str]) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table file, in key order, checksums verified."""
    source = str(path)
    data = files.read_file(path, what="the checkpoint index")
    if len(data) < FOOTER_SIZE:
        raise GraphLoadError(f"too short for a table ({len(data)} bytes, the footer alone is "
                             f"{FOOTER_SIZE})", source=source)
    footer = data[-FOOTER_SIZE:]
    magic = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)[0]
    if magic != TABLE_MAGIC:
        raise GraphLoadError(f"not a checkpoint index: bad magic {magic:#018x}, expected "
                             f"{TABLE_MAGIC:#018x}", source=source)
    pos = 0
    _meta_off, pos = _varint(footer, pos, source)
    _meta_size, pos = _varint(footer, pos, source)
    index_off, pos = _varint(footer, pos, source)
    index_size, pos = _varint(footer, pos, source)
    entries: list[tuple[bytes, bytes]] = []
    for _sep, handle in _block_entries(_read_block(data, index_off, index_size, source), source):
        off, p = _varint(handle, 0, source)
        size, _ = _varint(handle, p, source)
        entries.extend(_block_entries(_read_block(data, off, size, source), source))
    return entries


# --- the bundle -----------------------------------------------------------------------------


def bundle_prefix(path: str | os.PathLike[str]) -> str:
    """The checkpoint prefix of a SavedModel dir, a variables dir, an .index file or a prefix."""
    p = Path(path)
    if p.is_dir():
        if (p / "variables" / "variables.index").exists():
            return str(p / "variables" / "variables")
        if (p / "variables.index").exists():
            return str(p / "variables")
        raise GraphLoadError("no variables.index in this directory", source=str(p))
    s = str(p)
    return s[: -len(".index")] if s.endswith(".index") else s


class BundleReader:
    """A checkpoint bundle: ``keys()``, ``entry(key)``, ``read(key)`` -> numpy array.

    The index is read and verified when the reader is made; tensors are read (and their
    checksums verified) when asked for.
    """

    def __init__(self, prefix: str | os.PathLike[str]) -> None:
        from dfg.schemas import tensor_bundle_pb2

        self.prefix = bundle_prefix(prefix)
        self.index_path = self.prefix + ".index"
        self.entries: dict[str, Any] = {}
        # partitioned variables: (name, ((start, length) per dim)) -> the slice's entry; the
        # entry under the name itself lists the slices and holds no data
        self.slice_entries: dict[tuple[str, tuple], Any] = {}
        self.header = tensor_bundle_pb2.BundleHeaderProto()
        # distinct keys read so far and their bytes: the total is held to the context's read
        # limit, as index entries may all point at one big range of the data file (each read
        # alone fits the file and the budget; together they would not). Guarded by _lock: a
        # reader is shared by the RestoreV2 kernels of concurrent steps.
        self._lock = threading.Lock()
        self._loaded: dict[tuple[str, int], int] = {}
        self._loaded_total = 0
        seen_header = False
        for key, value in read_table(self.index_path):
            try:
                if key == HEADER_KEY:
                    self.header.ParseFromString(value)
                    seen_header = True
                    continue
                entry = tensor_bundle_pb2.BundleEntryProto()
                entry.ParseFromString(value)
            except Exception as e:  # protobuf's DecodeError and friends
                raise GraphLoadError(f"bad entry for key {key!r}: {e}",
                                     source=self.index_path) from None
            if key[:1] == b"\0":   # one stored slice of a partitioned variable
                name, extents = decode_slice_key(key, self.index_path)
                self.slice_entries[(name, extents)] = entry
                continue
            self.entries[key.decode("utf-8", "replace")] = entry
        if not seen_header:
            raise GraphLoadError("the index has no bundle header (key '')",
                                 source=self.index_path)
        if self.header.endianness != 0:
            # a model dfg cannot read: unreadable input (exit 2), like a corrupt one
            raise GraphLoadError("bad bundle header: endianness is big-endian, which dfg does "
                                 "not read (only little-endian checkpoints)",
                                 source=self.index_path)
        if not 0 <= self.header.num_shards <= MAX_SHARDS:
            raise GraphLoadError(f"bad bundle header: num_shards is {self.header.num_shards} "
                                 f"(0 to {MAX_SHARDS})", source=self.index_path)
        for key, e in self._all_entries():
            if len(e.slices) == 0 and not 0 <= e.shard_id < max(1, self.header.num_shards):
                raise GraphLoadError(f"bad entry for key {key}: shard_id {e.shard_id} of "
                                     f"{self.header.num_shards} shards", source=self.index_path)

    def _all_entries(self) -> list[tuple[str, Any]]:
        return [*self.entries.items(),
                *((f"{n} slice {ext}", e) for (n, ext), e in self.slice_entries.items())]

    def files_of(self, key: str) -> list[str]:
        """The data shard files reading ``key`` opens (for the file gate)."""
        entry = self.entry(key)
        if not len(entry.slices):
            return [self.shard_path(entry.shard_id)]
        ids = {e.shard_id for (n, _), e in self.slice_entries.items() if n == key}
        return [self.shard_path(i) for i in sorted(ids)]

    def keys(self) -> list[str]:
        return list(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self.entries

    def entry(self, key: str) -> Any:
        try:
            return self.entries[key]
        except KeyError:
            from .errors import NotFoundError

            near = ", ".join(sorted(self.entries)[:8])
            raise NotFoundError(f"key {key} not found in checkpoint {self.prefix} (keys: "
                                f"{near}{' ...' if len(self.entries) > 8 else ''})") from None

    def shape(self, key: str) -> tuple[int, ...]:
        return self._shape(key, self.entry(key))

    def _shape(self, key: str, entry: Any) -> tuple[int, ...]:
        """The entry's shape, every dimension checked: a stored tensor has a known rank and
        dimensions from 0 to 2**62 (a claim of -2**63 is a corrupt index, not a crash)."""
        proto = entry.shape
        if proto.unknown_rank or any(not 0 <= d.size <= MAX_DIM for d in proto.dim) \
                or len(proto.dim) > MAX_RANK:
            dims = "unknown rank" if proto.unknown_rank else \
                "[" + ",".join(str(d.size) for d in proto.dim[:MAX_RANK + 1]) + "]"
            raise GraphLoadError(f"bad entry for key {key}: shape {dims} (dimensions must be "
                                 f"0 to 2**62, rank at most {MAX_RANK})",
                                 source=self.index_path)
        return tuple(int(d.size) for d in proto.dim)

    def dtype(self, key: str) -> int:
        dt = int(self.entry(key).dtype)
        if dt not in _DATA_TYPES:
            raise GraphLoadError(f"bad entry for key {key}: dtype {dt} is not a TensorFlow "
                                 "value dtype", source=self.index_path)
        return dt

    def shard_path(self, shard_id: int) -> str:
        return f"{self.prefix}.data-{shard_id:05d}-of-{self.header.num_shards:05d}"

    def _raw(self, key: str, entry: Any) -> bytes:
        path = self.shard_path(entry.shard_id)
        if not os.path.lexists(path):
            raise GraphLoadError(f"missing data shard for key {key}", source=path)
        # the file's length is checked before the entry's claimed size is allocated, then the
        # reader's running total
        what = f"key {key}"
        return files.read_range(path, int(entry.offset), int(entry.size), what=what,
                                reserve=lambda n: self._account((key, id(entry)), what, n))

    def read(self, key: str) -> np.ndarray:
        """The tensor stored under ``key``, checksum verified. The distinct keys this reader
        has read, this one included, may not total more than the context's read limit
        (--max-memory): ResourceExhaustedError before anything more is read."""
        entry = self.entry(key)
        if len(entry.slices):
            return self._assemble(key, entry)
        return self._read_entry(key, entry, self.shape(key))

    def _account(self, ident: tuple[str, int], what: str, size: int) -> None:
        """Count ``size`` bytes of ``what`` against the context's read limit, once per
        distinct ``ident`` (a key and its entry: a partitioned variable has one per slice)."""
        limit = files.current_read_limit()
        with self._lock:
            if ident in self._loaded:
                return
            if limit is not None and self._loaded_total + size > limit:
                raise ResourceExhaustedError(
                    f"reading {what} ({size:,} bytes) would bring this checkpoint's tensors "
                    f"to {self._loaded_total + size:,} bytes, more than the memory budget of "
                    f"{limit:,} bytes (--max-memory)", source=self.index_path)
            self._loaded[ident] = size
            self._loaded_total += size

    def _assemble(self, key: str, entry: Any) -> np.ndarray:
        """A partitioned variable's whole value, from the slices it was saved as."""
        shape = self.shape(key)
        parts = [_extents(sl, shape, key, self.index_path) for sl in entry.slices]
        # the slices must tile the shape before its buffer is allocated: each slice's read is
        # bounded by its shard's size, so the whole is too
        if sum(math.prod(n for _, n in ext) for ext in parts) != math.prod(shape):
            raise GraphLoadError(f"bad entry for key {key}: its slices do not cover its shape "
                                 f"{format_shape(shape)}", source=self.index_path)
        out: np.ndarray | None = None
        for sl, extents in zip(entry.slices, parts):
            part = self.slice_entries.get((key, extents))
            if part is None:   # a whole dimension may be keyed as start -1, length -1
                whole = tuple((-1, -1) if not ext.HasField("length") else e
                              for e, ext in zip(extents, sl.extent))
                part = self.slice_entries.get((key, whole))
            if part is None:
                raise GraphLoadError(f"key {key}: slice {extents} is listed but not stored",
                                     source=self.index_path)
            value = self._read_entry(key, part, tuple(n for _, n in extents))
            if out is None:
                out = np.zeros(shape, dtype=value.dtype) if value.dtype != object \
                    else np.full(shape, b"", dtype=object)
            out[tuple(slice(a, a + n) for a, n in extents)] = value
        assert out is not None
        return out

    def _read_entry(self, key: str, entry: Any, shape: tuple[int, ...]) -> np.ndarray:
        dt = int(entry.dtype)
        if dt not in _DATA_TYPES:
            raise GraphLoadError(f"bad entry for key {key}: dtype {dt} is not a TensorFlow "
                                 "value dtype", source=self.index_path)
        try:
            np_dtype = D.to_numpy(dt)
        except UnsupportedDTypeError as e:
            raise UnsupportedDTypeError(f"key {key} of {self.prefix}: {e}") from None
        raw = self._raw(key, entry)
        path = self.shard_path(entry.shard_id)
        n = math.prod(shape)
        if dt == D.DT_STRING:
            return self._strings(key, raw, n, shape, entry, path)
        size = 2 if dt == D.DT_BFLOAT16 else np_dtype.itemsize  # bfloat16: held as float32
        if len(raw) != n * size:
            raise GraphLoadError(f"key {key}: {len(raw)} bytes for shape {format_shape(shape)} "
                                 f"of {D.name(dt)} (needs {n * size})", source=path)
        got = mask(crc32c(raw))
        if got != entry.crc32c:
            raise GraphLoadError(f"checksum mismatch for key {key}: stored {entry.crc32c:#010x}, "
                                 f"computed {got:#010x} (corrupt data)", source=path)
        if dt == D.DT_BFLOAT16:
            return D.bfloat16_from_bits(np.frombuffer(raw, dtype="<u2")).reshape(shape)
        arr = np.frombuffer(raw, dtype=np_dtype.newbyteorder("<"))
        return arr.astype(np_dtype, copy=True).reshape(shape)

    @staticmethod
    def _strings(key: str, raw: bytes, n: int, shape: tuple[int, ...], entry: Any,
                 path: str) -> np.ndarray:
        # lengths as varint64, then mask(crc of the lengths as uint32 LE), then the bytes; the
        # entry's crc32c continues over the 4 checksum bytes and the string bytes
        lengths, pos, crc = [], 0, 0
        for _ in range(n):
            ln, pos = _varint(raw, pos, path)
            lengths.append(ln)
            crc = crc32c(struct.pack("<I", ln & 0xFFFFFFFF), crc)
        if pos + 4 > len(raw):
            raise GraphLoadError(f"key {key}: string tensor truncated", source=path)
        stored_len_crc = struct.unpack_from("<I", raw, pos)[0]
        if stored_len_crc != mask(crc):
            raise GraphLoadError(f"checksum mismatch in the string lengths of key {key} "
                                 "(corrupt data)", source=path)
        crc = crc32c(raw[pos:pos + 4], crc)
        pos += 4
        if pos + sum(lengths) != len(raw):
            raise GraphLoadError(f"key {key}: string lengths add up to {sum(lengths)} bytes, "
                                 f"{len(raw) - pos} are stored", source=path)
        crc = crc32c(raw[pos:], crc)
        if mask(crc) != entry.crc32c:
            raise GraphLoadError(f"checksum mismatch for key {key}: stored {entry.crc32c:#010x}, "
                                 f"computed {mask(crc):#010x} (corrupt data)", source=path)
        out = np.empty(n, dtype=object)
        for i, ln in enumerate(lengths):
            out[i] = raw[pos:pos + ln]
            pos += ln
        return out.reshape(shape)

    def read_all(self, include_object_graph: bool = False) -> dict[str, np.ndarray]:
        return {k: self.read(k) for k in self.entries
                if include_object_graph or k != OBJECT_GRAPH_KEY}

    def object_graph(self) -> Any | None:
        """The checkpoint's TrackableObjectGraph (None when the bundle has none)."""
        from dfg.schemas import trackable_object_graph_pb2

        if OBJECT_GRAPH_KEY not in self.entries:
            return None
        g = trackable_object_graph_pb2.TrackableObjectGraph()
        g.ParseFromString(bytes(self.read(OBJECT_GRAPH_KEY).reshape(-1)[0]))
        return g

    def num_bytes(self) -> int:
        """Bytes of the tensors' values (strings: their stored size), the object graph aside."""
        return sum(int(e.size) for k, e in self.entries.items() if k != OBJECT_GRAPH_KEY)


def read_bundle(prefix: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """checkpoint key -> value of every tensor of a bundle (the object graph left out)."""
    return BundleReader(prefix).read_all()


def _extents(sl: Any, shape: tuple[int, ...], key: str = "", source: str = ""
             ) -> tuple[tuple[int, int], ...]:
    """(start, length) per dimension of a TensorSliceProto (a missing length: the whole
    dimension), checked to lie inside ``shape``."""
    if len(sl.extent) != len(shape):
        raise GraphLoadError(f"bad entry for key {key}: a slice of rank {len(sl.extent)} of "
                             f"shape {format_shape(shape)}", source=source)
    out = []
    for d, ext in enumerate(sl.extent):
        if ext.HasField("length"):
            start, length = int(ext.start), int(ext.length)
        else:
            start, length = 0, shape[d]
        if start < 0 or length < 0 or start + length > shape[d]:
            raise GraphLoadError(f"bad entry for key {key}: slice extent ({start}, {length}) "
                                 f"is outside dimension {d} of {format_shape(shape)}",
                                 source=source)
        out.append((start, length))
    return tuple(out)


def decode_slice_key(key: bytes, source: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The tensor name and (start, length) per dimension a slice's bundle key encodes
    (TensorFlow's EncodeTensorNameSlice: OrderedCode 0, the name, the rank, then start and
    length per dimension, signed; -1 for a whole dimension is kept as -1)."""
    pos = 0

    def fail() -> GraphLoadError:
        return GraphLoadError(f"bad slice key {key!r}", source=source)

    def num() -> int:   # ReadNumIncreasing: a length byte, then big-endian bytes
        nonlocal pos
        if pos >= len(key):
            raise fail()
        n = key[pos]
        if pos + 1 + n > len(key) or n > 8:
            raise fail()
        v = int.from_bytes(key[pos + 1:pos + 1 + n], "big")
        pos += 1 + n
        return v

    def signed() -> int:   # ReadSignedNumIncreasing, for lengths up to 7 bytes
        nonlocal pos
        if pos >= len(key):
            raise fail()
        neg = not key[pos] & 0x80
        flip = 0xFF if neg else 0
        first = key[pos] ^ flip
        n = 0
        while n < 8 and first & (0x80 >> n):
            n += 1
        if n == 0 or n >= 8 or pos + n > len(key):
            raise fail()
        v = first & (0xFF >> (n + 1))
        for i in range(1, n):
            v = (v << 8) | (key[pos + i] ^ flip)
        pos += n
        return ~v if neg else v

    def string() -> str:   # ReadString: \0\xff is \0, \xff\0 is \xff, \0\1 ends it
        nonlocal pos
        out = bytearray()
        while pos + 1 < len(key):
            b, c = key[pos], key[pos + 1]
            if b == 0 and c == 1:
                pos += 2
                return out.decode("utf-8", "replace")
            if b == 0 and c == 0xFF or b == 0xFF and c == 0:
                out.append(b)
                pos += 2
            else:
                out.append(b)
                pos += 1
        raise fail()

    if num() != 0:
        raise fail()
    name = string()
    rank = num()
    extents = tuple((signed(), signed()) for _ in range(rank))
    return name, extents
