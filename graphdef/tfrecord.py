"""Reading TFRecord files (the record format of ``tf.io.TFRecordWriter``), every checksum checked.

A file is a sequence of records, each::

    uint64 length            (little-endian)
    uint32 masked crc32c of those 8 length bytes
    byte   data[length]
    uint32 masked crc32c of the data

(crc32c and LevelDB's mask as in checkpoints: :mod:`dfg.graphdef.bundle`). Only uncompressed
files are read (TensorFlow's default; a GZIP/ZLIB file fails its first length check).

Reading is bounded: the length is checked against its crc and against the bytes left in the
file before anything is allocated, so a record claiming a huge length is refused, and
``max_bytes`` bounds a whole file. A damaged record is a :class:`DataLossError` naming the
file, the record's index and its byte offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

from .bundle import crc32c, mask
from .errors import DataLossError

HEADER = 12   # uint64 length + uint32 crc of it
FOOTER = 4    # uint32 crc of the data
# a file larger than this is refused before it is read (records are held in memory)
DEFAULT_MAX_BYTES = 4 << 30


def iter_records(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES
                 ) -> Iterator[bytes]:
    """Yield the data of each record of the TFRecord file at ``path``, in order."""
    source = os.fspath(path)
    with open(source, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise DataLossError(f"{size:,} bytes, more than the {max_bytes:,} read at most",
                                source=source)
        offset, index = 0, 0
        while offset < size:
            header = f.read(HEADER)
            where = f"record {index} at byte {offset}"
            if len(header) < HEADER:
                raise DataLossError(f"{where}: truncated header ({len(header)} of {HEADER} "
                                    "bytes): not a TFRecord file, or cut short", source=source)
            length, length_crc = struct.unpack("<QI", header)
            if mask(crc32c(header[:8])) != length_crc:
                raise DataLossError(f"{where}: the length's checksum does not match: not an "
                                    "uncompressed TFRecord file, or damaged", source=source)
            left = size - offset - HEADER - FOOTER
            if length > left:
                raise DataLossError(f"{where}: claims {length:,} bytes but only {max(left, 0):,} "
                                    "are left in the file", source=source)
            data = f.read(length)
            footer = f.read(FOOTER)
            if len(data) < length or len(footer) < FOOTER:   # the file shrank while read
                raise DataLossError(f"{where}: truncated", source=source)
            if mask(crc32c(data)) != struct.unpack("<I", footer)[0]:
                raise DataLossError(f"{where}: the data's checksum does not match (damaged)",
                                    source=source)
            yield data
            offset += HEADER + length + FOOTER
            index += 1


def read_records(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES
                 ) -> list[bytes]:
    """Every record of the TFRecord file at ``path``."""
    return list(iter_records(path, max_bytes))


def encode_record(data: bytes) -> bytes:
    """One record as a TFRecord file stores it (for writing test files and tools)."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", mask(crc32c(length))) + data
            + struct.pack("<I", mask(crc32c(data))))
