"""Load and save GraphDefs: binary (.pb), text (.pbtxt) and JSON; files, stdin/stdout, bytes.

The format is detected from the content (binary wire data, protobuf text, or a JSON object),
the extension only breaking ties. Every failure is one ``GraphLoadError`` naming the source
and what was wrong (line and column for text), quoting at most a short piece of the input.

Hostile and huge input: an empty file is an error, not an empty graph; files that are other
model formats (SavedModel, ONNX, TensorFlow Lite, Keras H5 or .keras zip) are named as such
before protobuf tries to parse them; nesting deeper than protobuf's limit (100 messages, the
limit TensorFlow's parsers and upb apply) is refused on reading and on writing, so whatever
dfg writes it can read back. Text is parsed one batch of top-level fields (``node { ... }``)
at a time, so reading a .pbtxt costs memory in proportion to the graph, not to the text
parser's token lists for the whole file. Files are written atomically by
:mod:`dfg.graphdef.atomic`.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from .atomic import write_atomic
from .errors import GraphLoadError, InvalidGraphError, ResourceExhaustedError, UsageError

FORMATS = ("pb", "pbtxt", "json")
_EXT = {".pb": "pb", ".graphdef": "pb", ".pbtxt": "pbtxt", ".txt": "pbtxt",
        ".prototxt": "pbtxt", ".json": "json"}
# protobuf's (upb's and TensorFlow's) default recursion limit, in messages: GraphDef is 1
MAX_DEPTH = 100
# longest piece of the input an error message quotes
_QUOTE = 200
# a text batch holds top-level fields until it is at least this long
_BATCH = 1 << 20


def format_from_path(path: str | os.PathLike[str] | None, default: str | None = None) -> str | None:
    if path is None or str(path) == "-":
        return default
    return _EXT.get(Path(str(path)).suffix.lower(), default)


# all whitespace (a match stops at the first other byte: no copy of a big input, as strip makes)
_BLANK = re.compile(rb"[ \t\r\n\f\v]*\Z")


def detect_format(data: bytes, hint: str | None = None) -> str:
    """Guess pb / pbtxt / json from the bytes; ``hint`` (from the extension) breaks ties."""
    head = data[:4096].lstrip()
    if head.startswith(b"{"):
        return "json"
    if _BLANK.match(data):
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
    from .files import current_read_limit, read_file

    if str(source) == "-":
        limit = current_read_limit()
        data = sys.stdin.buffer.read() if limit is None else sys.stdin.buffer.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise ResourceExhaustedError(f"more than the memory budget of {limit:,} bytes "
                                         "(--max-memory)", source="<stdin>")
        return data, "<stdin>"
    path = Path(source)
    if path.is_dir():
        raise GraphLoadError("is a directory, not a graph file", source=str(path))
    try:
        # a regular file only (a FIFO or /dev/urandom is refused, not read forever), its
        # size within --max-memory before it is read
        return read_file(path, what="the graph file"), str(path)
    except MemoryError:
        raise GraphLoadError("too large to read into memory", source=str(path)) from None


_LONG_WORD = re.compile(r"\S{81,}")


def _shorten(m: re.Match[str]) -> str:
    return f"{m.group()[:60]}...({len(m.group()):,} characters)"


def _quote(text: str) -> str:
    """A piece of input fit for a one-line message: control characters escaped, long tokens
    and the whole cut short."""
    from .text import printable

    text = _LONG_WORD.sub(_shorten, printable(text))
    return text if len(text) <= _QUOTE else text[:_QUOTE] + f"... ({len(text):,} characters)"


# --- recognising what is not a GraphDef ----------------------------------------------------

def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _top_fields(data: bytes, limit: int = 16) -> list[tuple[int, int]]:
    """(field number, wire type) of the first ``limit`` top-level fields; stops at junk."""
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < len(data) and len(out) < limit:
            key, pos = _varint(data, pos)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, pos = _varint(data, pos)
            elif wire == 1:
                pos += 8
            elif wire == 2:
                n, pos = _varint(data, pos)
                pos += n
            elif wire == 5:
                pos += 4
            else:
                break
            if pos > len(data) or field == 0:
                break
            out.append((field, wire))
    except ValueError:
        pass
    return out


_DFG_SAVEDMODEL = ("use the directory with `dfg info DIR`, `dfg run DIR --signature KEY` or "
                   "`dfg freeze DIR -o frozen.pb` (then use frozen.pb here)")


def foreign_format(data: bytes, name: str = "") -> str | None:
    """Why ``data`` is some other model format, not a GraphDef (None: it may be one)."""
    suffix = Path(name).suffix.lower() if name and name != "<stdin>" else ""
    # a flatbuffer starts with its root table's offset (small: bytes 2..4 zero), then the
    # file identifier; a GraphDef's byte 2 is never zero (a tag follows the first length)
    if data[4:8] == b"TFL3" and data[2:4] == b"\0\0":
        return "this is a TensorFlow Lite model (a .tflite flatbuffer), not a GraphDef"
    if data.startswith(b"\x89HDF\r\n\x1a\n"):
        return ("this is an HDF5 file (a Keras .h5 model?), not a GraphDef: save the model "
                "with TensorFlow as a SavedModel and use `dfg freeze`")
    if data.startswith(b"PK\x03\x04"):
        return ("this is a zip archive (a Keras .keras model?), not a GraphDef: save the model "
                "with TensorFlow as a SavedModel and use `dfg freeze`")
    if suffix == ".onnx":
        return "this is an ONNX model (.onnx), not a TensorFlow GraphDef"
    fields = _top_fields(data)
    if fields[:1] == [(1, 0)]:
        # GraphDef's field 1 is its nodes (a message); a number there is another format
        numbers = {f for f, w in fields if w == 2}
        if len(fields) >= 2 and fields[1] == (2, 2) and numbers <= {2}:
            return f"this is a SavedModel (saved_model.pb), not a GraphDef: {_DFG_SAVEDMODEL}"
        if numbers & {7, 8}:
            return "this is an ONNX model (ModelProto), not a TensorFlow GraphDef"
        return "not a GraphDef: its first field is a number where GraphDef has its nodes"
    return None


def _text_foreign(text: str) -> str | None:
    """The same for text: a SavedModel or MetaGraphDef written as protobuf text."""
    m = re.match(r"\s*(?:#[^\n]*\n\s*)*([A-Za-z_]\w*)", text)
    if m and m.group(1) in ("saved_model_schema_version", "meta_graphs"):
        return f"this is a SavedModel in text form, not a GraphDef: {_DFG_SAVEDMODEL}"
    if m and m.group(1) in ("meta_info_def", "graph_def", "signature_def", "saver_def"):
        return "this is a MetaGraphDef, not a GraphDef (its graph_def field holds one)"
    return None


# --- parsing -------------------------------------------------------------------------------

def _too_deep(where: str = "") -> GraphLoadError:
    return GraphLoadError(f"nested deeper than protobuf's limit of {MAX_DEPTH} messages"
                          f"{where}: no protobuf reader (TensorFlow's included) accepts it")


def parse_graphdef(data: bytes, fmt: str | None = None, source: str = "<bytes>") -> Any:
    """Parse bytes into a GraphDef proto; ``fmt`` None means detect."""
    try:
        return _parse(data, fmt, source)
    except GraphLoadError as e:
        if e.source is None:
            e.source = source
            e.args = (e._render(),)
        raise
    except RecursionError:
        raise GraphLoadError("nested too deeply to parse", source=source) from None
    except MemoryError:
        raise GraphLoadError("out of memory while parsing", source=source) from None


def _parse(data: bytes, fmt: str | None, source: str) -> Any:
    from google.protobuf import message

    from dfg.schemas import graph_pb2

    if _BLANK.match(data):
        what = "empty (0 bytes)" if not data else "empty (only whitespace)"
        raise GraphLoadError(f"the file is {what}: not a graph", source=source)
    fmt = fmt or detect_format(data)
    if (why := foreign_format(data, source)) is not None:
        raise GraphLoadError(why, source=source)
    gd = graph_pb2.GraphDef()
    if fmt == "pb":
        if source.endswith(".meta") and (inner := _meta_graph_def(data)) is not None:
            return inner
        try:
            gd.ParseFromString(data)
        except message.DecodeError as e:
            if "MaxDepth" in str(e):
                raise _too_deep() from None
            if (inner := _meta_graph_def(data)) is not None:
                return inner
            raise GraphLoadError(f"not a valid binary GraphDef ({_quote(str(e))})") from None
        if not gd.node and not gd.library.function and not gd.HasField("versions") \
                and not gd.version:
            raise GraphLoadError(f"not a GraphDef: {len(data):,} bytes, but no GraphDef "
                                 "field in them")
        return gd
    if fmt == "json":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise GraphLoadError(f"not UTF-8 text at byte {e.start}") from None
        return _parse_json(text, gd)
    if (why := _text_foreign(data[:4096].decode("utf-8", "replace"))) is not None:
        if why.startswith("this is a MetaGraphDef"):
            return _meta_graph_def(data, text=True)
        raise GraphLoadError(why)
    _parse_text(data, gd)
    return gd


def _meta_graph_def(data: bytes, text: bool = False) -> Any:
    """The GraphDef inside a MetaGraphDef (what tf.train.Saver writes as ``model.ckpt.meta``),
    or None when ``data`` is not a binary MetaGraphDef holding a graph (text: an error)."""
    from google.protobuf import message, text_format

    from dfg.schemas import meta_graph_pb2

    mg = meta_graph_pb2.MetaGraphDef()
    try:
        if text:
            text_format.Parse(data.decode("utf-8"), mg)
        else:
            mg.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        if text:
            raise GraphLoadError(f"not a valid MetaGraphDef ({_quote(str(e))})") from None
        return None
    if not mg.graph_def.node and not mg.graph_def.library.function:
        if text:
            raise GraphLoadError("a MetaGraphDef without a graph")
        return None
    if too_deep(mg.graph_def):
        raise _too_deep()
    return mg.graph_def


def _parse_json(text: str, gd: Any) -> Any:
    from google.protobuf import json_format

    try:
        json_format.Parse(text, gd)
    except (json_format.ParseError, ValueError) as e:
        raise GraphLoadError(f"not a valid JSON GraphDef: {_quote(str(e))}") from None
    if too_deep(gd):
        raise _too_deep()
    return gd


# braces and angle brackets nest; strings and comments may hold them and do not
# String literals as an unrolled loop with possessive quantifiers: the plain alternation
# ``(?:[^"\\]|\\.)*`` keeps backtracking state per character, 90 bytes of memory for each
# byte of a long literal (that, in google.protobuf's own tokenizer, is why reading a big
# tensor_content took ~100 times its size)
_DQ = rb'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_SQ = rb"'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'"
if sys.version_info < (3, 11):  # no possessive quantifiers: the unrolled loop alone
    _DQ, _SQ = _DQ.replace(b"*+", b"*"), _SQ.replace(b"*+", b"*")
_TEXT_TOKENS = re.compile(rb"[{}<>]|" + _DQ + rb"|" + _SQ + rb"|#[^\n]*")


def _parse_text(data: bytes, gd: Any) -> None:
    """Parse protobuf text into ``gd`` a batch of whole top-level fields at a time.

    google.protobuf's text parser is pure Python even with the upb backend and keeps token
    lists of everything it is given; batches of about 1 MB keep that overhead bounded, and
    only a batch at a time is decoded to ``str``. A scan of the bytes for braces (outside
    strings and comments) finds the batch boundaries and the nesting depth, which is
    refused beyond protobuf's limit before the parser recurses.
    """
    from dfg.schemas import graph_pb2

    depth = 0
    start = 0
    line_base = 0  # newlines before ``start``
    for m in _TEXT_TOKENS.finditer(data):
        c = data[m.start()]
        if c in b"{<":
            depth += 1
            if depth >= MAX_DEPTH:  # GraphDef itself is one level: depth+1 messages here
                line = data.count(b"\n", 0, m.start()) + 1
                raise _too_deep(f" (line {line} opens level {depth + 1})")
        elif c in b"}>":
            depth -= 1
            if depth == 0 and m.end() - start >= _BATCH:
                _parse_batch(data, start, m.end(), line_base, gd, graph_pb2)
                line_base += data.count(b"\n", start, m.end())
                start = m.end()
    _parse_batch(data, start, len(data), line_base, gd, graph_pb2)


def _parse_batch(data: bytes, start: int, end: int, line_base: int, gd: Any, pb2: Any) -> None:
    from google.protobuf import text_format

    raw = data[start:end]
    big: dict[str, bytes] = {}
    if len(raw) > _BIG_LITERAL:
        raw, big = _take_big_literals(raw)
    try:
        chunk = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphLoadError(f"not UTF-8 text at byte {start + e.start}") from None
    del raw
    part = gd if start == 0 and end == len(data) and not big else pb2.GraphDef()
    try:
        text_format.Parse(chunk, part, allow_unknown_extension=False)
    except text_format.ParseError as e:
        line, col = e.GetLine(), e.GetColumn()
        msg = str(e)
        # ParseError's text repeats "line:col : " in front; keep just the explanation
        prefix = f"{line}:{col} : "
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
        where = ""
        if line is not None:
            if line == 1 and col is not None:
                # the batch's first line may start mid-line: count the characters before it
                line_start = data.rfind(b"\n", 0, start) + 1
                col += len(data[line_start:start].decode("utf-8", "replace"))
            where = f"line {line + line_base}, column {col}: "
        raise GraphLoadError(f"{where}not a valid text GraphDef: {_quote(msg)}") from None
    if big:
        _put_big_literals(part, big)
    if part is not gd:
        gd.MergeFrom(part)


# string literals longer than this (a tensor_content of a big weight) are unescaped by us:
# google.protobuf's tokenizer needs about 100 times a literal's length in memory (see _DQ)
_BIG_LITERAL = 1 << 16
_STRING_LITERAL = re.compile(_DQ + rb"|" + _SQ)
_SPACE = re.compile(rb"\s*")


def _take_big_literals(raw: bytes) -> tuple[bytes, dict[str, bytes]]:
    """``raw`` with every big string literal replaced by a unique short marker, and the
    markers' unescaped values (a literal followed by another is left alone: text format
    concatenates adjacent literals)."""
    import secrets

    from google.protobuf import text_encoding

    tag = secrets.token_hex(8)
    big: dict[str, bytes] = {}
    pieces: list[bytes] = []
    pos = 0
    for m in _STRING_LITERAL.finditer(raw):
        if m.end() - m.start() < _BIG_LITERAL:
            continue
        after = _SPACE.match(raw, m.end()).end()
        if raw[after:after + 1] in (b'"', b"'") or raw[m.start() - 1:m.start()] in (b'"', b"'"):
            continue
        marker = f"dfg-literal-{tag}-{len(big)}"
        try:
            big[marker] = text_encoding.CUnescape(m.group()[1:-1].decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue  # leave it to the parser, which reports it
        pieces += [raw[pos:m.start()], b'"', marker.encode(), b'"']
        pos = m.end()
    if not big:
        return raw, big
    pieces.append(raw[pos:])
    return b"".join(pieces), big


def _put_big_literals(msg: Any, big: dict[str, bytes]) -> None:
    """Replace the markers of :func:`_take_big_literals` by their values, wherever the parser
    put them (bytes or string fields, repeated or not, at any depth)."""
    for fd, value in msg.ListFields():
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry:
                vfd = fd.message_type.fields_by_name["value"]
                if vfd.message_type is not None:
                    for sub in value.values():
                        _put_big_literals(sub, big)
                else:
                    for k in list(value):
                        if isinstance(value[k], (str, bytes)):
                            value[k] = _unmark(value[k], big, vfd)
            elif fd.is_repeated:
                for sub in value:
                    _put_big_literals(sub, big)
            else:
                _put_big_literals(value, big)
        elif isinstance(value, (str, bytes)) and not fd.is_repeated:
            setattr(msg, fd.name, _unmark(value, big, fd))
        elif fd.is_repeated and value and isinstance(value[0], (str, bytes)):
            value[:] = [_unmark(v, big, fd) for v in value]


def _unmark(value: str | bytes, big: dict[str, bytes], fd: Any) -> str | bytes:
    key = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if key not in big:
        return value
    data = big[key]
    if isinstance(value, bytes):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise GraphLoadError(f"field '{fd.name}' is not valid UTF-8 text") from None


def too_deep(graph_def: Any) -> bool:
    """Whether ``graph_def`` nests deeper than protobuf's binary readers accept.

    Decided by the reader itself: serialize and parse back with upb, whose depth limit is
    the one TensorFlow's C++ protobuf applies (100). That costs about half a serialization,
    several times less than walking the attrs in Python."""
    from google.protobuf import message

    from dfg.schemas import graph_pb2

    try:
        graph_pb2.GraphDef.FromString(graph_def.SerializeToString())
    except message.DecodeError as e:
        return "MaxDepth" in str(e)
    return False


# --- loading -------------------------------------------------------------------------------

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


# --- saving --------------------------------------------------------------------------------

def serialize(graph_def: Any, fmt: str) -> bytes:
    """The bytes of ``graph_def`` in ``fmt``; refuses a graph no protobuf parser could read
    back (nested deeper than :data:`MAX_DEPTH`)."""
    from google.protobuf import json_format, message, text_format

    if fmt not in FORMATS:
        raise UsageError(f"unknown graph format '{fmt}' (choose from {', '.join(FORMATS)})")
    from dfg.schemas import graph_pb2

    try:
        # deterministic: map entries (attrs) sorted by key, as TensorFlow writes them
        data = graph_def.SerializeToString(deterministic=True)
        graph_pb2.GraphDef.FromString(data)   # what no reader can load back is not written
    except message.DecodeError as e:
        if "MaxDepth" in str(e):
            raise InvalidGraphError(f"not written: the graph nests deeper than protobuf's "
                                    f"limit of {MAX_DEPTH} messages, so no reader "
                                    "(TensorFlow's or dfg's) could load it back") from None
        raise InvalidGraphError(f"cannot write the graph: {_quote(str(e))}") from None
    try:
        if fmt == "pb":
            return data
        del data
        if fmt == "pbtxt":
            return text_format.MessageToString(graph_def).encode("utf-8")
        return (json_format.MessageToJson(graph_def, indent=1, sort_keys=True) + "\n").encode()
    except (message.DecodeError, RecursionError) as e:
        raise InvalidGraphError(f"cannot write the graph as {fmt}: {_quote(str(e))}") from None


def write_bytes_atomic(dest: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``dest`` (``-``: stdout) through a temp file, fsync and a rename."""
    write_atomic(dest, data)


def save_graphdef(graph_def: Any, dest: str | os.PathLike[str], fmt: str | None = None) -> None:
    """Save as ``fmt`` (default: from ``dest``'s extension, pbtxt for stdout/unknown)."""
    fmt = fmt or format_from_path(dest, "pbtxt")
    write_atomic(dest, serialize(graph_def, fmt))
