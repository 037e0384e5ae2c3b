"""Write TensorFlow checkpoint bundles (``PREFIX.index`` + ``PREFIX.data-00000-of-00001``), the
format :mod:`dfg.graphdef.bundle` reads, as TensorFlow's SaveV2 writes it.

* The data shard holds the tensors in the order given, unaligned: numbers as little-endian
  C-order bytes; strings as the varint64 length of each element, the masked crc32c of those
  lengths (each extended as a uint32 LE), then the bytes.
* The index is a LevelDB-format table without compression: data blocks of sorted entries
  (prefix-compressed, a restart point every 16 entries, closed near 256 KiB as TensorFlow's
  table options say), an empty metaindex block, an index block (one entry per data block:
  its last key and its BlockHandle, restart interval 1), each block followed by its type byte
  (0) and masked crc32c, and the 48-byte footer ending in the table magic.
* Key ``""`` holds the BundleHeaderProto (one shard, little-endian, version producer 1); every
  other key a BundleEntryProto (dtype, shape, shard 0, offset, size, masked crc32c).

Files are written to temporary names and renamed, so a reader never sees half a bundle.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from . import dtypes as D
from .bundle import FOOTER_SIZE, TABLE_MAGIC, crc32c, mask
from .errors import InvalidArgumentError

BLOCK_SIZE = 262144          # TensorFlow's table::Options block_size
RESTART_INTERVAL = 16
BUNDLE_VERSION = 1           # kTensorBundleVersion (producer)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


class _Block:
    """A LevelDB block being built: prefix-compressed entries and restart points."""

    def __init__(self, restart_interval: int) -> None:
        self.buf = bytearray()
        self.restarts = [0]
        self.count = 0
        self.last = b""
        self.interval = restart_interval

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.count < self.interval:
            n = min(len(key), len(self.last))
            while shared < n and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buf))
            self.count = 0
        self.buf += _varint(shared) + _varint(len(key) - shared) + _varint(len(value))
        self.buf += key[shared:] + value
        self.last = key
        self.count += 1

    def size(self) -> int:
        return len(self.buf) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        tail = b"".join(struct.pack("<I", r) for r in self.restarts)
        return bytes(self.buf) + tail + struct.pack("<I", len(self.restarts))


def _separator(start: bytes, limit: bytes) -> bytes:
    """LevelDB's bytewise FindShortestSeparator: a short key in [start, limit)."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n and start[i] < 0xFF and start[i] + 1 < limit[i]:
        return start[:i] + bytes([start[i] + 1])
    return start


def _successor(key: bytes) -> bytes:
    """LevelDB's bytewise FindShortSuccessor: a short key >= ``key``."""
    for i, b in enumerate(key):
        if b != 0xFF:
            return key[:i] + bytes([b + 1])
    return key


def table_bytes(entries: Iterable[tuple[bytes, bytes]]) -> bytes:
    """A LevelDB-format table of ``entries`` (keys strictly increasing), laid out as
    LevelDB's TableBuilder does (an index entry is added when the next block's first key is
    known, so it can be the shortest separator)."""
    out = bytearray()
    index = _Block(1)

    def put(block: bytes) -> bytes:
        handle = _varint(len(out)) + _varint(len(block))
        out.extend(block)
        trailer_type = b"\x00"
        out.extend(trailer_type + struct.pack("<I", mask(crc32c(block + trailer_type))))
        return handle

    block = _Block(RESTART_INTERVAL)
    prev = None
    pending = None     # handle of the last flushed block, indexed once the next key is known
    for key, value in entries:
        if prev is not None and key <= prev:
            raise ValueError(f"table keys must increase: {key!r} after {prev!r}")
        if pending is not None:
            index.add(_separator(prev, key), pending)
            pending = None
        block.add(key, value)
        prev = key
        if block.size() >= BLOCK_SIZE:
            pending = put(block.finish())
            block = _Block(RESTART_INTERVAL)
    if len(block.buf):
        pending = put(block.finish())
    elif pending is None and not index.count:
        pending = put(block.finish())      # an empty table still has one (empty) data block
    if pending is not None:
        index.add(_successor(prev or b""), pending)
    meta = put(_Block(RESTART_INTERVAL).finish())
    idx = put(index.finish())
    footer = meta + idx
    footer += bytes(FOOTER_SIZE - 8 - len(footer)) + struct.pack("<Q", TABLE_MAGIC)
    out.extend(footer)
    return bytes(out)


def tensor_bytes(value: np.ndarray) -> tuple[bytes, int]:
    """(bytes as the data shard stores them, masked crc32c for the entry)."""
    if value.dtype == object or value.dtype.kind in "SU":
        items = [x if isinstance(x, bytes) else str(x).encode() for x in value.reshape(-1)]
        lengths = b"".join(_varint(len(x)) for x in items)
        crc = 0
        for x in items:
            crc = crc32c(struct.pack("<I", len(x) & 0xFFFFFFFF), crc)
        check = struct.pack("<I", mask(crc))
        body = b"".join(items)
        crc = crc32c(body, crc32c(check, crc))
        return lengths + check + body, mask(crc)
    raw = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
    return raw, mask(crc32c(raw))


def _atomic_write(path: str, data: bytes) -> None:
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tempstate", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# A slice of a partitioned variable: the whole tensor's shape and (start, length) per
# dimension, length -1 for a whole dimension (TensorFlow's TensorSlice)
Slice = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]


def _ordered_num(v: int) -> bytes:
    """OrderedCode::WriteNumIncreasing: a length byte, then the big-endian bytes."""
    body = v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""
    return bytes([len(body)]) + body


def _ordered_signed(v: int) -> bytes:
    """OrderedCode::WriteSignedNumIncreasing: the length as leading 1 bits of the first
    byte(s), then the two's-complement value (what bundle.decode_slice_key reads)."""
    x = ~v if v < 0 else v
    n = x.bit_length() // 7 + 1            # bytes, length header included
    raw = bytearray((v & ((1 << (8 * n)) - 1)).to_bytes(n, "big"))
    header = ((0xFF << (8 - n)) & 0xFF) if n < 8 else 0xFF
    raw[0] ^= header
    if n >= 9:   # longer than 8 bytes: the header spills into the second byte
        raw[1] ^= (0xFF << (16 - n)) & 0xFF
    return bytes(raw)


def encode_slice_key(name: str, extents: Iterable[tuple[int, int]]) -> bytes:
    """TensorFlow's EncodeTensorNameSlice: the bundle key a slice's data is stored under."""
    out = bytearray(_ordered_num(0))
    for b in name.encode("utf-8"):   # OrderedCode::WriteString
        out += b"\x00\xff" if b == 0 else b"\xff\x00" if b == 0xFF else bytes([b])
    out += b"\x00\x01"
    ext = list(extents)
    out += _ordered_num(len(ext))
    for start, length in ext:
        out += _ordered_signed(start) + _ordered_signed(length)
    return bytes(out)


def _is_full(full: tuple[int, ...], extents: tuple[tuple[int, int], ...]) -> bool:
    return all(length == -1 or (start == 0 and length == size)
               for (start, length), size in zip(extents, full))


def write_bundle(prefix: str | os.PathLike[str], tensors: dict[str, Any] |
                 Iterable[tuple[str, Any] | tuple[str, Any, Slice | None]]) -> list[str]:
    """Write ``tensors`` (checkpoint key -> array) as the bundle ``prefix``; returns the files
    written. Data are stored in the order given; the index lists the keys sorted. Duplicate
    keys are an InvalidArgumentError (TensorFlow's "Adding duplicate key").

    An item ``(key, array, (full_shape, extents))`` is one slice of a partitioned variable
    (BundleWriter::AddSlice): its data go under the slice's own key, and ``key``'s entry
    holds the whole tensor's dtype and shape and the list of its slices."""
    from dfg.schemas import tensor_bundle_pb2

    from .tensors import shape_to_proto

    items = list(tensors.items() if isinstance(tensors, dict) else tensors)
    prefix = str(prefix)
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    data = bytearray()
    entries: dict[bytes, bytes] = {}
    wholes: dict[bytes, Any] = {}   # sliced tensors' entries, filled slice by slice
    for key, value, *more in items:
        sl = more[0] if more else None
        arr = np.asarray(value)
        dt = D.DT_STRING if arr.dtype == object or arr.dtype.kind in "SU" else \
            D.from_numpy(arr.dtype)
        k = key.encode("utf-8")
        if not k:
            raise InvalidArgumentError("a checkpoint key must not be empty")
        if sl is not None and not _is_full(*sl):
            full, extents = sl
            whole = wholes.get(k)
            if whole is None:
                if k in entries:
                    raise InvalidArgumentError(f"Adding duplicate key: {key}")
                whole = wholes[k] = tensor_bundle_pb2.BundleEntryProto(dtype=dt)
                whole.shape.SetInParent()
                shape_to_proto(tuple(full), whole.shape)
            proto = whole.slices.add()
            for start, length in extents:
                e = proto.extent.add()
                if length != -1:   # a whole dimension is an empty extent
                    e.start, e.length = start, length
            k = encode_slice_key(key, extents)   # the slice's data go under their own key
        if k in entries or k in wholes:
            raise InvalidArgumentError(f"Adding duplicate key: {key}")
        raw, crc = tensor_bytes(arr)
        e = tensor_bundle_pb2.BundleEntryProto(dtype=dt, shard_id=0, offset=len(data),
                                               size=len(raw), crc32c=crc)
        e.shape.SetInParent()   # written even for scalars, as TensorFlow does
        shape_to_proto(arr.shape, e.shape)
        data += raw
        entries[k] = e.SerializeToString()
    entries.update((k, e.SerializeToString()) for k, e in wholes.items())
    header = tensor_bundle_pb2.BundleHeaderProto(num_shards=1, endianness=0)
    header.version.producer = BUNDLE_VERSION
    table = [(b"", header.SerializeToString())] + sorted(entries.items())
    data_path = f"{prefix}.data-00000-of-00001"
    _atomic_write(data_path, bytes(data))
    _atomic_write(prefix + ".index", table_bytes(table))
    return [prefix + ".index", data_path]


def merge_bundles(prefixes: list[str], destination: str, delete_old_dirs: bool = True,
                  allow_missing_files: bool = False,
                  gate: Callable[[str, str], object] | None = None) -> None:
    """TensorFlow's MergeV2Checkpoints: one bundle at ``destination`` holding every entry of
    ``prefixes`` (shards renumbered in order, data files moved, old indexes removed).
    ``gate(mode, path)``: called before each file is touched ("read,write" for what is moved
    or removed, "write" for what is written); it raises to refuse (graphdef/files.py)."""
    from dfg.schemas import tensor_bundle_pb2

    from .bundle import BundleReader, read_table
    from .errors import NotFoundError

    def check(mode: str, path: str) -> None:
        if gate is not None:
            gate(mode, path)

    readers = []
    for p in prefixes:
        check("read,write", p + ".index")
        if not os.path.exists(p + ".index"):
            if allow_missing_files:
                continue
            raise NotFoundError(f"{p}.index not found (merging checkpoints)")
        readers.append(BundleReader(p))
    if not readers:
        raise InvalidArgumentError("no checkpoint to merge" if prefixes else
                                   "MergeV2Checkpoints needs at least one prefix")
    total = sum(max(1, r.header.num_shards) for r in readers)
    entries: dict[bytes, bytes] = {}
    moves = []
    base = 0
    for r in readers:
        # every entry of the table, slices' own keys included (the reader's ``entries`` are
        # the named tensors only)
        for k, value in read_table(r.index_path):
            if not k:
                continue   # the header
            if k in entries:
                key = k.decode("utf-8", "replace")
                raise InvalidArgumentError(f"Duplicate tensor keyed by {key} encountered, when "
                                           "merging prefix: " + r.prefix)
            ne = tensor_bundle_pb2.BundleEntryProto.FromString(value)
            if not len(ne.slices):   # a sliced tensor's entry holds no data of its own
                ne.shard_id += base
            entries[k] = ne.SerializeToString()
        for s in range(max(1, r.header.num_shards)):
            moves.append((r.shard_path(s), f"{destination}.data-{base + s:05d}-of-{total:05d}"))
        base += max(1, r.header.num_shards)
    for src, dst in moves:
        check("read,write", src)
        check("write", dst)
    check("write", destination + ".index")
    if delete_old_dirs:
        for r in readers:
            check("write", os.path.dirname(r.prefix) or ".")
    Path(destination).parent.mkdir(parents=True, exist_ok=True)
    for src, dst in moves:
        if os.path.exists(src):
            os.replace(src, dst)
    header = tensor_bundle_pb2.BundleHeaderProto(num_shards=total, endianness=0)
    header.version.producer = BUNDLE_VERSION
    _atomic_write(destination + ".index",
                  table_bytes([(b"", header.SerializeToString())] + sorted(entries.items())))
    for r in readers:
        if os.path.abspath(r.index_path) != os.path.abspath(destination + ".index"):
            os.unlink(r.index_path)
        if delete_old_dirs:
            try:   # only an emptied directory goes, as in TensorFlow
                os.rmdir(os.path.dirname(r.prefix))
            except OSError:
                pass
