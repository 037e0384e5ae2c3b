"""``--feed NAME=VALUE`` parsing shared by run, bench, profile and compare.

VALUE is a JSON-ish literal (``3``, ``2.5``, ``true``, ``[[1,2],[3,4]]``; anything else is a
string), ``@file.npy`` or ``@file.npz:key``, or ``@FILE`` of any other file: its bytes as one
string (an encoded image, a serialized tf.Example), which a rank-1 string input takes as a
batch of one; ``@a.jpg,@b.jpg`` is a batch of two. The dtype comes from the fed tensor (the
Session converts), so ``--feed x=3`` feeds a float32 placeholder 3.0; an integer literal out
of the placeholder's range is refused (exit 2) rather than wrapped. Several feeds may share
one option: ``--feed a=1,b=[1,2]`` (a comma starts a new feed only outside brackets and
quotes and when ``NAME=`` follows it). Files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
from typing import Any

import click

from dfg.graphdef.errors import UsageError

# what starts a new feed after a comma: a TensorFlow tensor name and '='
_NEXT_FEED = re.compile(r"\s*[A-Za-z0-9.][A-Za-z0-9_.\-/>]*(:\d+)?=")


def split_feeds(spec: str) -> list[str]:
    """``a=1,b=[1,2]`` -> ``["a=1", "b=[1,2]"]``; ``s=x,y`` stays one (a string with a comma)."""
    parts: list[str] = []
    depth, quote, start = 0, "", 0
    for i, ch in enumerate(spec):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0 and _NEXT_FEED.match(spec, i + 1):
            parts.append(spec[start:i])
            start = i + 1
    parts.append(spec[start:])
    return [p.strip() for p in parts if p.strip()]


def _split_feed_specs(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
                      ) -> tuple[str, ...]:
    return tuple(p for v in value for p in split_feeds(v))


def _read(path: str) -> bytes:
    """A feed file's bytes: a regular file only (a FIFO or device is refused, not waited
    on), read within the command's --max-memory (graphdef/files.py)."""
    from dfg.graphdef.errors import DfgError
    from dfg.graphdef.files import read_file

    try:
        return read_file(path, what="the feed file")
    except DfgError as e:
        if e.exit_code == 2:
            raise UsageError(f"cannot read {path}: {e.message}") from None
        raise


def _npy(data: bytes, path: str) -> Any:
    """The array of .npy bytes, its header's claim (shape x dtype) checked against the bytes
    there before numpy allocates it; object arrays (pickles) are refused."""
    import numpy as np

    fmt = np.lib.format
    fp = io.BytesIO(data)
    try:
        version = fmt.read_magic(fp)
        if version == (1, 0):
            shape, _fortran, dtype = fmt.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _fortran, dtype = fmt.read_array_header_2_0(fp)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except (ValueError, EOFError, OSError) as e:
        raise UsageError(f"cannot read {path}: not a valid .npy array ({e})") from None
    if dtype.hasobject:
        # an object array needs unpickling, which can run code: never for a feed
        raise UsageError(f"cannot read {path}: it holds pickled (object) data, which dfg "
                         "does not load; save a numeric or string array")
    need = math.prod(shape) * dtype.itemsize
    have = len(data) - fp.tell()
    if need != have:
        raise UsageError(f"cannot read {path}: its header claims shape {list(shape)} of "
                         f"{dtype} ({need:,} bytes) but {have:,} bytes follow")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise UsageError(f"cannot read {path}: {e}") from None


def _load_array(path: str, key: str) -> Any:
    data = _read(path)
    if not (path.endswith(".npz") or key):
        if not data.startswith(b"\x93NUMPY"):
            raise UsageError(f"cannot read {path}: not a .npy or .npz file")
        return _npy(data, path)
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        if data.startswith(b"\x93NUMPY"):
            raise UsageError(f"{path} is a .npy array, not an .npz archive (drop "
                             f":{key})") from None
        raise UsageError(f"cannot read {path}: not a .npy or .npz file") from None
    with z:
        members = {n[:-4] if n.endswith(".npy") else n: n for n in z.namelist()}
        if not key:
            if len(members) != 1:
                raise UsageError(f"{path} holds {len(members)} arrays; name one "
                                 f"with @{path}:KEY (keys: {', '.join(members)})")
            key = next(iter(members))
        if key not in members:
            raise UsageError(f"{path} has no array '{key}' (keys: {', '.join(members)})")
        info = z.getinfo(members[key])
        from dfg.graphdef.files import current_read_limit

        limit = current_read_limit()
        if limit is not None and info.file_size > limit:
            raise UsageError(f"cannot read {path}:{key}: {info.file_size:,} bytes, more than "
                             f"the memory budget of {limit:,} bytes (--max-memory)")
        try:
            member = z.read(members[key])
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError) as e:
            raise UsageError(f"cannot read {path}:{key}: {e}") from None
    return _npy(member, f"{path}:{key}")


def _numpy_file(path: str) -> bool:
    """Whether the file starts like a .npy array or a zip (.npz) archive (a FIFO, device or
    missing file is not one; reading it refuses it)."""
    from dfg.graphdef.errors import DfgError
    from dfg.graphdef.files import open_regular

    try:
        fd, _size = open_regular(path)
    except DfgError:
        return False
    try:
        head = os.read(fd, 6)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.startswith((b"\x93NUMPY", b"PK\x03\x04", b"PK\x05\x06"))


class Feeds(dict):
    """Parsed feeds by name; ``file_bytes`` names those fed one file's raw bytes (a 0-d
    string), which :func:`batch_of_one` makes a batch of one for a rank-1 input."""

    def __init__(self) -> None:
        super().__init__()
        self.file_bytes: set[str] = set()
        self.texts: dict[str, str] = {}   # a literal's text as typed (string inputs use it)


def _file_bytes(text: str) -> Any:
    """``@FILE`` or ``@A,@B`` of files that are not numpy's: their bytes as strings (0-d for
    one file, 1-D for several); None when it is a .npy/.npz reference."""
    import numpy as np

    paths = text[1:].split(",@")
    if len(paths) == 1:
        path = paths[0]
        if path.endswith((".npy", ".npz")) or ":" in path or _numpy_file(path):
            return None
    out = []
    for path in paths:
        if _numpy_file(path):
            raise UsageError(f"@{path} in a list of files is a .npy/.npz array: feed it alone")
        out.append(_read(path))
    arr = np.empty(len(out) if len(paths) > 1 else (), dtype=object)
    if len(paths) > 1:
        arr[:] = out
    else:
        arr[()] = out[0]
    return arr


def batch_of_one(feeds: dict[str, Any], name: str, rank: int | None) -> None:
    """A file's bytes, or a bare string literal, fed to a rank-1 input become a batch of
    one."""
    if rank != 1:
        return
    if name in getattr(feeds, "file_bytes", ()) and feeds[name].ndim == 0:
        feeds[name] = feeds[name].reshape(1)
    elif isinstance(feeds[name], str):
        feeds[name] = [feeds[name]]


def string_literal(feeds: dict[str, Any], name: str) -> None:
    """A literal fed to a string input is the text as typed: ``--feed s=true`` is the string
    "true" (JSON would make it the bool True), ``s=42`` the string "42"; JSON lists and
    strings stay as they are."""
    text = getattr(feeds, "texts", {}).get(name)
    if text is not None and not isinstance(feeds[name], (str, list)):
        feeds[name] = text


def parse_value(text: str) -> Any:
    if text.startswith("@"):
        raw = _file_bytes(text)
        if raw is not None:
            return raw
        path, _, key = text[1:].partition(":")
        if key == "example":
            return examples_from_json(path)
        return _load_array(path, key)
    lowered = {"true": "true", "false": "false", "True": "true", "False": "false"}
    try:
        return json.loads(lowered.get(text, text))
    except json.JSONDecodeError:
        return text  # a string tensor
    except RecursionError:
        raise UsageError(f"--feed value nested too deeply: {text[:40]}...") from None


def examples_from_json(path: str) -> Any:
    """``@rows.json:example``: a JSON list of rows, each {feature: value or list of values},
    as serialized tf.train.Example protos (a 1-D string tensor, one per row), as
    saved_model_cli's --input_examples builds them: ints become an int64_list, numbers with a
    fraction a float_list, strings a bytes_list (UTF-8)."""
    import numpy as np

    from dfg.schemas import example_pb2

    try:
        with open(path, "rb") as f:
            rows = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise UsageError(f"{path}: not JSON ({e})") from None
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{path}: tf.Example rows must be a JSON list of objects "
                         "({feature: value or [values]})")
    out = np.empty(len(rows), dtype=object)
    for i, row in enumerate(rows):
        ex = example_pb2.Example()
        for name, value in row.items():
            values = value if isinstance(value, list) else [value]
            feat = ex.features.feature[name]
            if all(isinstance(v, str) for v in values):
                feat.bytes_list.value.extend(v.encode("utf-8") for v in values)
            elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                try:
                    feat.int64_list.value.extend(values)
                except ValueError:
                    raise UsageError(f"{path}: row {i} feature '{name}': an integer out of "
                                     "int64 range") from None
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                feat.float_list.value.extend(float(v) for v in values)
            else:
                raise UsageError(f"{path}: row {i} feature '{name}' must hold strings or "
                                 f"numbers (one kind), found {value!r:.60}")
        out[i] = ex.SerializeToString()
    return out


def parse_feeds(specs: tuple[str, ...]) -> Feeds:
    feeds = Feeds()
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise UsageError(f"--feed expects NAME=VALUE, found '{spec}'")
        if name in feeds:
            raise UsageError(f"--feed {name} given twice")
        feeds[name] = parse_value(value)
        if not value.startswith("@"):
            feeds.texts[name] = value
        if value.startswith("@") and getattr(feeds[name], "dtype", None) is not None \
                and feeds[name].dtype.kind == "O" and feeds[name].ndim == 0:
            feeds.file_bytes.add(name)
    return feeds


def feed_option(help: str = "NAME=VALUE: a literal, @file.npy, @file.npz:key, @FILE (its "
                            "bytes as a string; @a.jpg,@b.jpg a batch) or @rows.json:example "
                            "(tf.train.Example rows from JSON) (repeatable, or "
                            "comma-separated: a=1,b=[1,2])."):
    return click.option("--feed", "feeds", multiple=True, metavar="NAME=VALUE",
                        callback=_split_feed_specs, help=help)


def _int_extremes(value: Any) -> tuple[int, int] | None:
    """(min, max) of the Python ints in a literal (nested lists), or None if there are none."""
    lo = hi = None
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            lo = v if lo is None else min(lo, v)
            hi = v if hi is None else max(hi, v)
    return None if lo is None else (lo, hi)


def check_literal(name: str, value: Any, dtype: int | None) -> None:
    """Refuse an integer literal that does not fit the fed tensor's dtype (numpy would raise
    OverflowError or wrap it silently). ``dtype`` None (unknown): at least int64."""
    import numpy as np

    from dfg.graphdef import dtypes as D

    if isinstance(value, np.ndarray):
        return  # from a file: the array has its own dtype
    ext = _int_extremes(value)
    if ext is None:
        return
    if dtype is None or not D.is_numpy_compatible(dtype):
        np_dtype, label = np.dtype(np.int64), "int64"
    else:
        base = D.base(dtype)
        if base not in D.INTEGER:
            return  # floats take any int (rounded, as TensorFlow does); others fail later
        np_dtype, label = D.to_numpy(base), D.name(base)
    info = np.iinfo(np_dtype)
    lo, hi = ext
    if lo < info.min or hi > info.max:
        bad = hi if hi > info.max else lo
        raise UsageError(f"--feed {name}: {bad} is out of range for {label} "
                         f"({info.min}..{info.max})")


def check_feeds(graph: Any, feeds: dict[str, Any]) -> None:
    """:func:`check_literal` every literal feed against its tensor's dtype: a Placeholder's
    (or Const's) ``dtype`` attr, else the static dtype dfg infers (unknown: int64)."""
    import numpy as np

    from dfg.graphdef import dtypes as D
    from dfg.graphdef.attrs import to_python
    from dfg.graphdef.graph import parse_tensor_name

    for name in list(feeds):
        node = graph.get(name.split(":")[0])
        if node is None or node.op not in ("Placeholder", "PlaceholderWithDefault"):
            continue
        dt = node.attr["dtype"].type if "dtype" in node.attr else None
        if dt is not None and D.base(dt) == D.DT_STRING:
            string_literal(feeds, name)
        if "shape" in node.attr and (name in getattr(feeds, "file_bytes", ())
                                     or dt is not None and D.base(dt) == D.DT_STRING):
            shape = to_python(node.attr["shape"])
            batch_of_one(feeds, name, None if shape is None else len(shape))
    facts = None
    for name, value in feeds.items():
        if isinstance(value, np.ndarray) or _int_extremes(value) is None:
            continue
        try:
            node_name, slot = parse_tensor_name(name)
        except Exception:     # a malformed name: the Session reports it
            continue
        node = graph.get(node_name)
        dtype = None
        if node is not None and slot == 0 and "dtype" in node.attr:
            dtype = node.attr["dtype"].type
        elif node is not None:
            if facts is None:
                from dfg.graphdef.viz import TensorFacts

                facts = TensorFacts(graph)
            dtype = facts.dtype(node_name, slot) or None
        check_literal(name, value, dtype)
