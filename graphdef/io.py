"""Load and save GraphDefs: binary (.pb), text (.pbtxt) and JSON; files, stdin/stdout, bytes.

The format is detected from the content (binary wire data, protobuf text, or a JSON object),
the extension only breaking ties. Every failure is one ``GraphLoadError`` naming the source
and what was wrong (line and column for text). Files are written atomically: a temporary file
in the target's folder, then a rename, so a failed write never clobbers the old file.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .errors import GraphLoadError, UsageError

FORMATS = ("pb", "pbtxt", "json")
_EXT = {".pb": "pb", ".graphdef": "pb", ".pbtxt": "pbtxt", ".txt": "pbtxt",
        ".prototxt": "pbtxt", ".json": "json"}


def format_from_path(path: str | os.PathLike[str] | None, default: str | None = None) -> str | None:
    if path is None or str(path) == "-":
        return default
    return _EXT.get(Path(str(path)).suffix.lower(), default)


def detect_format(data: bytes, hint: str | None = None) -> str:
    """Guess pb / pbtxt / json from the bytes; ``hint`` (from the extension) breaks ties."""
    head = data[:4096].lstrip()
    if head.startswith(b"{"):
        return "json"
    if not data.strip():
        return hint or "pbtxt"
    try:
        head.decode("utf-8")
        texty = all(b >= 0x20 or b in (9, 10, 13) for b in head)
    except UnicodeDecodeError:
        # a multi-byte character may be cut at 4096; decide on the characters before it
        texty = False
    if texty:
        return "pbtxt"
    return "pb"


def read_source(source: str | os.PathLike[str]) -> tuple[bytes, str]:
    """Bytes of a path or ``-`` (stdin), and the name to use in messages."""
    if str(source) == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    path = Path(source)
    try:
        return path.read_bytes(), str(path)
    except FileNotFoundError:
        raise GraphLoadError("no such file", source=str(path)) from None
    except IsADirectoryError:
        raise GraphLoadError("is a directory, not a graph file", source=str(path)) from None
    except OSError as e:
        raise GraphLoadError(f"cannot read: {e.strerror}", source=str(path)) from None


def parse_graphdef(data: bytes, fmt: str | None = None, source: str = "<bytes>") -> Any:
    """Parse bytes into a GraphDef proto; ``fmt`` None means detect."""
    from google.protobuf import json_format, message, text_format

    from dfg.schemas import graph_pb2

    fmt = fmt or detect_format(data)
    gd = graph_pb2.GraphDef()
    if fmt == "pb":
        try:
            gd.ParseFromString(data)
        except message.DecodeError as e:
            raise GraphLoadError(f"not a valid binary GraphDef ({e})", source=source) from None
        return gd
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphLoadError(f"not UTF-8 text at byte {e.start}", source=source) from None
    if fmt == "json":
        try:
            json_format.Parse(text, gd)
        except (json_format.ParseError, ValueError) as e:
            raise GraphLoadError(f"not a valid JSON GraphDef: {e}", source=source) from None
        return gd
    try:
        text_format.Parse(text, gd, allow_unknown_extension=False)
    except text_format.ParseError as e:
        line, col = e.GetLine(), e.GetColumn()
        msg = str(e)
        # ParseError's text repeats "line:col : " in front; keep just the explanation
        prefix = f"{line}:{col} : "
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
        where = f"line {line}, column {col}: " if line is not None else ""
        raise GraphLoadError(f"{where}not a valid text GraphDef: {msg}", source=source) from None
    return gd


def load_graphdef(source: Any, fmt: str | None = None) -> Any:
    """A GraphDef from a path, ``-`` (stdin), bytes, or a GraphDef (returned as is)."""
    from dfg.schemas import graph_pb2

    if isinstance(source, graph_pb2.GraphDef):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return parse_graphdef(data, fmt or detect_format(data), "<bytes>")
    if not isinstance(source, (str, os.PathLike)):
        raise UsageError(f"cannot load a graph from {type(source).__name__}")
    from .savedmodel import saved_model_hint

    if (hint := saved_model_hint(source)) is not None:
        raise GraphLoadError(hint, source=str(source))
    data, name = read_source(source)
    if fmt is None:
        fmt = detect_format(data, format_from_path(source))
    return parse_graphdef(data, fmt, name)


def load_graph(source: Any, fmt: str | None = None):  # -> Graph
    """A :class:`~dfg.graphdef.graph.Graph` view from anything :func:`load_graphdef` takes."""
    from .graph import Graph

    if isinstance(source, Graph):
        return source
    return Graph(load_graphdef(source, fmt))


def serialize(graph_def: Any, fmt: str) -> bytes:
    from google.protobuf import json_format, text_format

    if fmt == "pb":
        # deterministic: map entries (attrs) sorted by key, as TensorFlow writes them
        return graph_def.SerializeToString(deterministic=True)
    if fmt == "pbtxt":
        return text_format.MessageToString(graph_def).encode("utf-8")
    if fmt == "json":
        return (json_format.MessageToJson(graph_def, indent=1, sort_keys=True) + "\n").encode()
    raise UsageError(f"unknown graph format '{fmt}' (choose from {', '.join(FORMATS)})")


def write_bytes_atomic(dest: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``dest`` (``-``: stdout) through a temp file and a rename."""
    if str(dest) == "-":
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
        return
    path = Path(dest)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise UsageError(f"cannot write: {e.strerror}", source=str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_graphdef(graph_def: Any, dest: str | os.PathLike[str], fmt: str | None = None) -> None:
    """Save as ``fmt`` (default: from ``dest``'s extension, pbtxt for stdout/unknown)."""
    fmt = fmt or format_from_path(dest, "pbtxt")
    write_bytes_atomic(dest, serialize(graph_def, fmt))
