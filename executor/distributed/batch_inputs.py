"""The inputs ``dfg batch`` reads: each one a table of rows (a dict of arrays sharing the first
axis), and the name of the output file it becomes.

* ``.npz``: each key is a feed name (a signature input key, or a tensor of a frozen graph); the
  first axis of every array is the batch. Read with ``allow_pickle=False``; the archive's
  declared sizes are checked against a bound before anything is decompressed.
* TFRecord (``.tfrecord``, ``.tfrecords``, ``.tfr``): each record (a serialized ``tf.Example``)
  is one row of the string input named by ``--input-key`` (default: the model's only input).
* a folder: its image files (``.png``, ``.jpg``, ``.jpeg``, ``.gif``, ``.bmp``), in file-name
  order, each one row of encoded bytes fed to the string input, as ``dfg run --feed x=@a.png``
  does; other files in the folder are not read.

Anything else is refused (:class:`UsageError`, exit 2) before any work starts. A file of a
known kind that cannot be read fails that file only, with an error naming it.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dfg.graphdef.errors import DataLossError, DfgError, InvalidArgumentError, UsageError

TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords", ".tfr")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
# an input file (or folder of images) larger than this is refused before it is read: inputs
# are held in memory while their rows run
MAX_INPUT_BYTES = 4 << 30


@dataclass(frozen=True)
class Input:
    """One input and the output file it becomes."""

    path: str
    kind: str          # "npz" | "tfrecord" | "images"
    stem: str          # OUT_DIR/<stem>.npz

    def output(self, out_dir: str) -> str:
        return os.path.join(out_dir, self.stem + ".npz")


def classify(path: str) -> Input:
    """What kind of input ``path`` is; anything else is a UsageError naming it."""
    p = Path(path)
    if p.is_dir():
        return Input(path, "images", p.name or p.resolve().name)
    if not p.exists():
        raise UsageError(f"--input {path}: no such file or folder")
    ext = p.suffix.lower()
    if ext == ".npz":
        return Input(path, "npz", p.stem)
    if ext in TFRECORD_EXTENSIONS:
        return Input(path, "tfrecord", p.stem)
    raise UsageError(f"--input {path}: not an input dfg batch reads (.npz; TFRecord: "
                     f"{', '.join(TFRECORD_EXTENSIONS)}; a folder of "
                     f"{'/'.join(e[1:] for e in IMAGE_EXTENSIONS)} images)")


def read(inp: Input, string_key: str | None) -> dict[str, np.ndarray]:
    """The rows of ``inp`` as columns; ``string_key`` is the feed TFRecords and images go to.
    Any failure is a DfgError whose message names the file."""
    try:
        if inp.kind == "npz":
            return _read_npz(inp.path)
        if string_key is None:
            raise UsageError("give --input-key: the string input its records feed")
        if inp.kind == "tfrecord":
            from dfg.graphdef.tfrecord import read_records

            return {string_key: _strings(read_records(inp.path, MAX_INPUT_BYTES))}
        return {string_key: _strings(_read_images(inp.path))}
    except DfgError as e:
        if e.source is None and inp.path not in str(e):
            e.source = inp.path
            e.args = (e._render(),)
        raise
    except OSError as e:
        raise DataLossError(f"cannot read: {e.strerror or e}", source=inp.path) from None


def _strings(items: list[bytes]) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr


def _read_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with zipfile.ZipFile(path) as z:
            declared = sum(i.file_size for i in z.infolist())
        if declared > MAX_INPUT_BYTES:
            raise DataLossError(f"its arrays take {declared:,} bytes, more than the "
                                f"{MAX_INPUT_BYTES:,} read at most", source=path)
        with np.load(path, allow_pickle=False) as z:
            columns = {k: z[k] for k in z.files}
    except DfgError:
        raise
    except (zipfile.BadZipFile, ValueError, EOFError, KeyError) as e:
        if "pickle" in str(e):
            raise DataLossError("holds pickled (object) arrays, which dfg does not load",
                                source=path) from None
        raise DataLossError(f"not a readable .npz archive ({e})", source=path) from None
    if not columns:
        raise InvalidArgumentError("holds no arrays", source=path)
    rows = {k: (v.shape[0] if v.ndim else None) for k, v in columns.items()}
    if None in rows.values():
        scalar = next(k for k, n in rows.items() if n is None)
        raise InvalidArgumentError(f"array '{scalar}' is a scalar: every array needs a first "
                                   "(batch) axis", source=path)
    if len(set(rows.values())) > 1:
        sizes = ", ".join(f"{k}: {n}" for k, n in rows.items())
        raise InvalidArgumentError(f"arrays differ in their first (batch) axis ({sizes})",
                                   source=path)
    return columns


def _read_images(folder: str) -> list[bytes]:
    names = sorted(e.name for e in os.scandir(folder)
                   if e.is_file() and not e.name.startswith(".")
                   and os.path.splitext(e.name)[1].lower() in IMAGE_EXTENSIONS)
    if not names:
        raise InvalidArgumentError(f"no image files ({', '.join(IMAGE_EXTENSIONS)}) in the "
                                   "folder", source=folder)
    out, total = [], 0
    for name in names:
        path = os.path.join(folder, name)
        size = os.path.getsize(path)
        total += size
        if total > MAX_INPUT_BYTES:
            raise DataLossError(f"its images take more than the {MAX_INPUT_BYTES:,} bytes "
                                "read at most", source=folder)
        with open(path, "rb") as f:
            out.append(f.read(size))   # as big as it was when counted
    return out


def rows_of(columns: dict[str, np.ndarray]) -> int:
    return int(next(iter(columns.values())).shape[0]) if columns else 0
