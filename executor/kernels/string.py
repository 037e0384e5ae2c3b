"""String kernels: StringToNumber, AsString, StringJoin, Substr, the regex ops, splitting and
joining, hashing, StringFormat, StringNGrams and the Unicode ops.

Strings are numpy object arrays of ``bytes``. Text work has no numpy vectorization, so these
kernels map a function over the flattened elements. Semantics follow TensorFlow's CPU
kernels:

* StringToNumber accepts surrounding whitespace and an optional sign; floats also take
  ``inf``/``infinity``/``nan`` in any case and hex numbers (``0x1A``, ``0x1.8p3``), overflow
  to inf;
  integers must be plain decimal digits within the type's range. Anything else is an
  InvalidArgumentError naming the string.
* AsString builds a printf format from width, fill (one of `` +-0#``), precision and
  scientific/shortest (%f by default for floats), prints bools as true/false and complex
  values as ``(re,im)``.
* Substr takes byte or UTF-8 character positions (a UTF-8 character starts at every byte that
  is not a continuation byte); negative ``pos`` counts from the end, a negative ``len`` takes
  the rest.
* StaticRegexReplace follows RE2's rewrite syntax (``\\0``-``\\9``, ``\\\\``) and its global
  replace, which skips an empty match right after the previous match (one UTF-8 character
  ahead). Every pattern runs on RE2 (``google-re2``), as in TensorFlow: linear time on any
  input, byte strings matched as UTF-8, and the patterns RE2 rejects (backreferences,
  lookaround) rejected with TensorFlow's ``Invalid pattern: P, error: E``.
* StringFormat renders each input as TF's Tensor::SummarizeValue does for tf.print:
  ``summarize`` elements at each end of every dimension, floats as ``%.6g`` (``%.15g``)
  widened to ``%.9g`` (``%.17g``) when that would not read back exactly, denormals as 0
  (TF's threads flush them), strings C-escaped in quotes, complex values as ``?``.
* StringToHashBucket hashes with TF's Hash64 (MurmurHash2-64 style), StringToHashBucketFast
  and Fingerprint with farmhash's Fingerprint64.
* The Unicode ops follow ICU's converters: one U+FFFD per maximal invalid UTF-8 subsequence,
  per unpaired UTF-16 surrogate or invalid UTF-32 unit, per truncated tail; "ignore" drops
  them (offsets still count their bytes), "strict" fails. Input encodings: UTF-8,
  UTF-16/32 BE/LE, ISO-8859-1, US-ASCII (others ICU knows are UnimplementedError).
  UnicodeScript knows the blocks of the common scripts only (see its table).
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import re2

from dfg.graphdef.errors import InvalidArgumentError, OutOfRangeError, UnimplementedError

from .registry import KernelContext, kernel


def _fmt(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _map(fn: Callable[[Any], Any], x: np.ndarray, dtype: Any = object) -> np.ndarray:
    """``fn`` over every element of ``x``, keeping its shape."""
    flat = [fn(v) for v in x.reshape(-1).tolist()]
    out = np.empty(len(flat), dtype=dtype)
    out[:] = flat
    return out.reshape(x.shape)


def _as_bytes(v: Any) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode()


def _show(b: bytes) -> str:
    return b.decode("utf-8", "replace")


# --- StringToNumber ---------------------------------------------------------------------------

# RE2 (linear time), like every pattern here: a backtracking engine is quadratic on a long run
# of digits that fails at its end
_FLOAT_RE = re2.compile(
    rb"(?i)[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|nan)")
_HEX_RE = re2.compile(rb"(?i)[+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?\d+)?")
_INT_RE = re2.compile(rb"[+-]?\d+")
_B64_RE = re2.compile(rb"[A-Za-z0-9_-]*")


def _parse_float(text: bytes) -> float | None:
    t = text.strip()
    if _HEX_RE.fullmatch(t):
        try:
            return float.fromhex(t.decode())
        except OverflowError:
            return -math.inf if t.startswith(b"-") else math.inf
    if not _FLOAT_RE.fullmatch(t):
        return None
    return float(t)


def _parse_int(text: bytes, dt: np.dtype) -> int | None:
    t = text.strip()
    if not _INT_RE.fullmatch(t) or (dt.kind == "u" and t.startswith(b"-")):
        return None
    v = int(t)
    info = np.iinfo(dt)
    return v if info.min <= v <= info.max else None


@kernel("StringToNumber")
def string_to_number(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    dt = np.dtype(ctx.attrs.get("out_type") or np.float32)
    is_float = dt.kind == "f"

    def conv(v: Any) -> Any:
        s = _as_bytes(v)
        r = _parse_float(s) if is_float else _parse_int(s, dt)
        if r is None:
            raise InvalidArgumentError(
                f"StringToNumberOp could not correctly convert string: {_show(s)}")
        return r

    with np.errstate(over="ignore"):  # out-of-range floats become inf, as in TF
        return _map(conv, x).astype(dt)


# --- AsString ---------------------------------------------------------------------------------

def _c_special(v: float, flags: str, width: int) -> str:
    """printf's rendering of inf/nan: sign, no zero padding."""
    sign = "-" if math.copysign(1.0, v) < 0 else ("+" if "+" in flags else
                                                  (" " if " " in flags else ""))
    body = sign + ("nan" if math.isnan(v) else "inf")
    return body.ljust(width) if "-" in flags else body.rjust(width)


@kernel("AsString")
def as_string(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    a = ctx.attrs
    precision = int(a.get("precision", -1))
    scientific = bool(a.get("scientific", False))
    shortest = bool(a.get("shortest", False))
    width = int(a.get("width", -1))
    fill = a.get("fill", "") or ""
    fill = fill.decode("latin-1") if isinstance(fill, bytes) else fill
    dt = x.dtype
    name = _dtype_name(dt)
    if scientific and shortest:
        raise InvalidArgumentError("Cannot select both scientific and shortest notation")
    if len(fill) > 1:
        raise InvalidArgumentError("Fill string must be one or fewer characters")
    if fill and fill not in " +-0#":
        raise InvalidArgumentError(f'Fill argument not supported: "{fill}"')
    is_float = dt.kind in "fc"
    if dt.kind in "biu" and precision > -1:
        raise InvalidArgumentError(f"precision not supported for datatype {name}")
    if dt.kind in "biu" and (scientific or shortest):
        raise InvalidArgumentError(
            f"scientific and shortest format not supported for datatype {name}")
    spec = "%" + fill + (str(width) if width > -1 else "") + \
        (f".{precision}" if precision > -1 else "")
    w = max(width, 0)
    if dt == np.bool_:
        return _map(lambda v: b"true" if v else b"false", x)
    if dt.kind in "OSU":
        if width < 0:
            return _map(_as_bytes, x)  # TF formats strings only when a width is given
        fmt_s = (spec + "s").encode()  # bytes formatting: widths count bytes, as in C
        return _map(lambda v: fmt_s % _as_bytes(v), x)
    if not is_float:
        # %u ignores the sign flags; Python's %d would print them for unsigned values.
        flags = fill.replace("+", "").replace(" ", "") if dt.kind == "u" else fill
        fmt_d = "%" + flags + (str(width) if width > -1 else "") + "d"
        return _map(lambda v: (fmt_d % v).encode(), x)
    fmt_f = spec + ("g" if shortest else "e" if scientific else "f")

    def real(v: float) -> str:
        return fmt_f % v if math.isfinite(v) else _c_special(v, fill, w)

    if dt.kind == "c":
        return _map(lambda v: f"({real(v.real)},{real(v.imag)})".encode(), x)
    return _map(lambda v: real(float(v)).encode(), x)


def _dtype_name(dt: np.dtype) -> str:
    try:
        from dfg.graphdef import dtypes

        return dtypes.name(dtypes.from_numpy(dt))
    except Exception:
        return str(dt)


# --- StringJoin -------------------------------------------------------------------------------

@kernel("StringJoin")
def string_join(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    sep = ctx.attrs.get("separator", "") or ""
    sep_b = sep if isinstance(sep, bytes) else sep.encode()
    shape: tuple[int, ...] | None = None
    for x in inputs:
        if x.ndim == 0:
            continue
        if shape is None:
            shape = x.shape
        elif x.shape != shape:
            raise InvalidArgumentError(
                f"Input shapes do not match: {_fmt(shape)} vs. {_fmt(x.shape)}")
    shape = shape or ()
    cols = [np.broadcast_to(x, shape).reshape(-1).tolist() for x in inputs]
    joined = [sep_b.join(_as_bytes(v) for v in row) for row in zip(*cols)]
    out = np.empty(len(joined), dtype=object)
    out[:] = joined
    return out.reshape(shape)


# --- Substr -----------------------------------------------------------------------------------

def _char_starts(s: bytes) -> list[int]:
    return [i for i, c in enumerate(s) if c & 0xC0 != 0x80]


@kernel("Substr")
def substr(ctx: KernelContext, x: np.ndarray, pos: np.ndarray, length: np.ndarray) -> np.ndarray:
    if pos.shape != length.shape:
        raise InvalidArgumentError(
            f"pos and len should have the same shape, got: {_fmt(pos.shape)} vs. "
            f"{_fmt(length.shape)}")
    utf8 = (ctx.attrs.get("unit", "BYTE") or "BYTE") == "UTF8_CHAR"
    try:
        shape = np.broadcast_shapes(x.shape, pos.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"Incompatible shapes: {_fmt(x.shape)} vs. {_fmt(pos.shape)}") from None
    strs = np.broadcast_to(x, shape).reshape(-1).tolist()
    ps = np.broadcast_to(pos, shape).reshape(-1).tolist()
    ls = np.broadcast_to(length, shape).reshape(-1).tolist()
    out = np.empty(len(strs), dtype=object)
    for i, (v, p, n) in enumerate(zip(strs, ps, ls)):
        s = _as_bytes(v)
        starts = _char_starts(s) if utf8 else None
        size = len(starts) if starts is not None else len(s)
        if abs(p) > size:
            shown = "" if utf8 else f"b'{_show(s)}'"
            raise InvalidArgumentError(f"pos {p} out of range for string{shown and ' '}{shown}"
                                       f" at index {i}")
        if p < 0:
            p += size
        # A negative len takes the rest of the string in bytes, nothing in UTF-8 characters.
        end = (p if utf8 else size) if n < 0 else min(size, p + n)
        if starts is not None:
            starts.append(len(s))
            out[i] = s[starts[p]:starts[end]]
        else:
            out[i] = s[p:end]
    return out.reshape(shape)


# --- StaticRegexReplace / RegexReplace / RegexFullMatch (RE2) ---------------------------------

# RE2's default options, as TensorFlow's kernels build ``RE2(pattern)``: UTF-8, Perl syntax,
# 8 MiB of program memory; errors are raised here, not logged to stderr.
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def _compile(pattern: str | bytes) -> Any:
    """``pattern`` compiled by RE2 (linear time: a backtracking engine would let a pattern
    such as ``(a+)+$`` run for hours), or TensorFlow's InvalidArgumentError."""
    pb = pattern if isinstance(pattern, bytes) else pattern.encode("utf-8", "surrogateescape")
    try:
        return re2.compile(pb, _RE2_OPTIONS)
    except re2.error as e:
        msg = e.args[0] if e.args else e
        msg = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
        raise InvalidArgumentError(
            f"Invalid pattern: {_show(pb)}, error: {msg}") from None


def _rewrite_parts(rewrite: bytes) -> tuple[list[bytes | int], int, bool]:
    """RE2's rewrite string: (literal pieces and group numbers up to the first malformed
    escape, the highest group named anywhere, whether a malformed escape was found).
    ``\\0``-``\\9`` name groups and ``\\\\`` is a backslash; anything else after a backslash
    (also a backslash at the end) is malformed."""
    parts: list[bytes | int] = []
    lit = bytearray()
    top, bad, i = 0, False, 0
    while i < len(rewrite):
        c = rewrite[i]
        if c != 0x5C:  # backslash
            if not bad:
                lit.append(c)
            i += 1
            continue
        nxt = rewrite[i + 1] if i + 1 < len(rewrite) else -1
        if 0x30 <= nxt <= 0x39:
            top = max(top, nxt - 0x30)   # RE2's MaxSubmatch scans past a malformed escape
            if not bad:
                if lit:
                    parts.append(bytes(lit))
                    lit = bytearray()
                parts.append(nxt - 0x30)
        elif nxt == 0x5C:
            if not bad:
                lit.append(0x5C)
        else:
            bad = True
        i += 2
    if lit:
        parts.append(bytes(lit))
    return parts, top, bad


def _utf8_step(b: bytes, p: int) -> int:
    """Bytes of the UTF-8 character at ``p`` (1 for an invalid or truncated sequence), as
    RE2's GlobalReplace steps over a character after an empty match."""
    c = b[p]
    n = 1 if c < 0x80 else 2 if 0xC2 <= c < 0xE0 else 3 if 0xE0 <= c < 0xF0 else \
        4 if 0xF0 <= c < 0xF5 else 1
    if n == 1 or p + n > len(b):
        return 1
    try:
        b[p:p + n].decode("utf-8")
    except UnicodeDecodeError:
        return 1
    return n


def _replace_all(ctx: KernelContext, x: np.ndarray, pattern: str | bytes,
                 rewrite: str | bytes, global_: bool) -> np.ndarray:
    """RE2::GlobalReplace (or RE2::Replace) on every element of ``x``."""
    rx = _compile(pattern)
    rw = rewrite if isinstance(rewrite, bytes) else rewrite.encode("utf-8", "surrogateescape")
    parts, top, bad = _rewrite_parts(rw)
    # RE2 leaves the text unchanged when the rewrite names a group the pattern lacks, and
    # Replace (not GlobalReplace) also when the rewrite is malformed
    unchanged = top > rx.groups or (bad and not global_)
    ngroups = top + 1

    def expand(m: Any, out: list[bytes]) -> None:
        for q in parts:
            if type(q) is int:
                g = m.group(q) if q < ngroups else None
                if g:
                    out.append(g)
            else:
                out.append(q)

    def replace(v: Any) -> bytes:
        b = _as_bytes(v)
        if unchanged:
            return b
        out: list[bytes] = []
        n = len(b)
        p, last_end, count = 0, -1, 0
        while p <= n:
            m = rx.search(b, p)  # the whole text is the context: ^ and \b see before p
            if m is None:
                break
            s, e = m.span()
            out.append(b[p:s])
            if s == e == last_end:
                # RE2 never takes an empty match where the previous match ended: step over
                # one character
                step = _utf8_step(b, p) if p < n else 1
                out.append(b[p:p + step])
                p += step
                continue
            expand(m, out)
            p = last_end = e
            count += 1
            if not global_:
                break
        if count == 0:
            return b
        out.append(b[p:])
        return b"".join(out)

    return _map(replace, x)


@kernel("StaticRegexReplace")
def static_regex_replace(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    a = ctx.attrs
    return _replace_all(ctx, x, a.get("pattern", ""), a.get("rewrite", ""),
                        bool(a.get("replace_global", True)))


def _scalar(x: np.ndarray, what: str) -> bytes:
    if x.ndim != 0:
        raise InvalidArgumentError(f"{what} must be scalar, but received {_fmt(x.shape)}")
    return _as_bytes(x.item())


@kernel("RegexReplace")
def regex_replace(ctx: KernelContext, x: np.ndarray, pattern: np.ndarray,
                  rewrite: np.ndarray) -> np.ndarray:
    p = _scalar(pattern, "Pattern")
    _compile(p)  # TF checks the pattern before it looks at the rewrite
    return _replace_all(ctx, x, p, _scalar(rewrite, "Rewrite"),
                        bool(ctx.attrs.get("replace_global", True)))


def _full_match(x: np.ndarray, pattern: str | bytes) -> np.ndarray:
    rx = _compile(pattern)
    return _map(lambda v: rx.fullmatch(_as_bytes(v)) is not None, x, dtype=np.bool_)


@kernel("RegexFullMatch")
def regex_full_match(ctx: KernelContext, x: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    return _full_match(x, _scalar(pattern, "Pattern"))


@kernel("StaticRegexFullMatch")
def static_regex_full_match(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _full_match(x, ctx.attrs.get("pattern", ""))


# --- simple per-string functions ----------------------------------------------------------------

_ASCII_SPACE = b" \t\n\v\f\r"


@kernel("StringStrip")
def string_strip(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _map(lambda v: _as_bytes(v).strip(_ASCII_SPACE), x)


def _case(ctx: KernelContext, x: np.ndarray, upper: bool) -> np.ndarray:
    enc = (ctx.attrs.get("encoding") or "").lower().replace("-", "")
    if enc not in ("", "utf8"):
        raise InvalidArgumentError(f"encoding must be '' or 'utf-8', got {enc!r}")

    def fn(v: Any) -> bytes:
        b = _as_bytes(v)
        if not enc:  # ASCII letters only, every other byte untouched
            return b.upper() if upper else b.lower()
        # ICU's UTF-8 reading, as TF's kernel: each ill-formed sequence becomes U+FFFD
        # (maximal subparts, as Python's "replace" handler)
        s = b.decode("utf-8", "replace")
        return (s.upper() if upper else s.lower()).encode("utf-8")

    return _map(fn, x)


@kernel("StringLower")
def string_lower(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _case(ctx, x, False)


@kernel("StringUpper")
def string_upper(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _case(ctx, x, True)


@kernel("StringLength")
def string_length(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    if ctx.attrs.get("unit", "BYTE") == "UTF8_CHAR":
        # every byte that is not a UTF-8 continuation byte (10xxxxxx) starts a character
        return _map(lambda v: sum((c & 0xC0) != 0x80 for c in _as_bytes(v)), x, np.int32)
    return _map(lambda v: len(_as_bytes(v)), x, np.int32)


# --- base64 (web-safe alphabet, as TensorFlow) --------------------------------------------------

@kernel("EncodeBase64")
def encode_base64(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    import base64

    pad = bool(ctx.attrs.get("pad", False))
    return _map(lambda v: base64.urlsafe_b64encode(_as_bytes(v)) if pad else
                base64.urlsafe_b64encode(_as_bytes(v)).rstrip(b"="), x)


@kernel("DecodeBase64")
def decode_base64(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    import base64
    import binascii

    def fn(v: Any) -> bytes:
        b = _as_bytes(v)
        body = b.rstrip(b"=")
        if len(b) - len(body) > 2 or len(body) % 4 == 1 or \
                _B64_RE.fullmatch(body) is None:
            raise InvalidArgumentError(f"Invalid character found in base64: {_show(b)}")
        try:
            return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(f"Invalid base64: {_show(b)}") from None

    return _map(fn, x)


# --- splitting and joining ----------------------------------------------------------------------

def _sparse_out(rows: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx = [(i, j) for i, r in enumerate(rows) for j in range(len(r))]
    vals = np.empty(len(idx), dtype=object)
    vals[:] = [t for r in rows for t in r]
    width = max((len(r) for r in rows), default=0)
    return (np.asarray(idx, dtype=np.int64).reshape(-1, 2), vals,
            np.asarray([len(rows), width], dtype=np.int64))


def _one_separator(delim: bytes) -> bytes:
    """A translation table mapping every byte of ``delim`` to its first byte."""
    table = bytearray(range(256))
    for c in delim:
        table[c] = delim[0]
    return bytes(table)


@kernel("StringSplit")
def string_split(ctx: KernelContext, x: np.ndarray, delimiter: np.ndarray):
    if x.ndim != 1:
        raise InvalidArgumentError(f"input must be a vector, got shape: {_fmt(x.shape)}")
    if delimiter.ndim != 0:
        raise InvalidArgumentError(f"delimiter must be a scalar, got shape: "
                                   f"{_fmt(delimiter.shape)}")
    delim = _as_bytes(delimiter.item())
    skip_empty = bool(ctx.attrs.get("skip_empty", True))
    rows = []
    for v in x.tolist():
        b = _as_bytes(v)
        if not delim:  # an empty delimiter splits into single bytes
            parts = [b[i:i + 1] for i in range(len(b))]
        else:  # every byte of the delimiter is a separator on its own
            parts = b.translate(_one_separator(delim)).split(delim[:1]) if b else [b""]
        # an empty string yields no token, also when empty tokens are kept
        rows.append([p for p in parts if p or not skip_empty] if b else [])
    return _sparse_out(rows)


@kernel("StringSplitV2")
def string_split_v2(ctx: KernelContext, x: np.ndarray, sep: np.ndarray):
    if x.ndim != 1:
        raise InvalidArgumentError(f"input must be a vector, got shape: {_fmt(x.shape)}")
    if sep.ndim != 0:
        raise InvalidArgumentError(f"sep must be a scalar, got shape: {_fmt(sep.shape)}")
    s = _as_bytes(sep.item())
    maxsplit = int(ctx.attrs.get("maxsplit", -1))
    rows = []
    for v in x.tolist():
        b = _as_bytes(v)
        if not s:  # runs of ASCII whitespace separate, empty pieces dropped (Python's split)
            rows.append(b.split(None, maxsplit))
        else:
            rows.append(b.split(s, maxsplit))
    return _sparse_out(rows)


@kernel("ReduceJoin")
def reduce_join(ctx: KernelContext, x: np.ndarray, axes: np.ndarray) -> np.ndarray:
    sep = _as_bytes(ctx.attrs.get("separator", "") or b"")
    keep = bool(ctx.attrs.get("keep_dims", False))
    ax = [int(a) for a in np.asarray(axes).reshape(-1)]
    for a in ax:
        if not -x.ndim <= a < x.ndim:
            raise OutOfRangeError(
                f"Invalid reduction dimension {a} for input with {x.ndim} dimensions.")
    ax = sorted({a % x.ndim for a in ax})  # an empty list reduces nothing
    rest = [d for d in range(x.ndim) if d not in ax]
    moved = np.transpose(x, rest + ax).reshape([x.shape[d] for d in rest] + [-1])
    out = _map(lambda _v: b"", np.empty(moved.shape[:-1], dtype=object))
    flat_in = moved.reshape(-1, moved.shape[-1]) if moved.size or moved.shape[-1] else \
        moved.reshape(-1, 0)
    out.reshape(-1)[:] = [sep.join(_as_bytes(v) for v in row) for row in flat_in.tolist()]
    if keep:
        out = out.reshape([1 if d in ax else x.shape[d] for d in range(x.ndim)])
    return out


@kernel("UnsortedSegmentJoin")
def unsorted_segment_join(ctx: KernelContext, x: np.ndarray, ids: np.ndarray,
                          num: np.ndarray) -> np.ndarray:
    sep = _as_bytes(ctx.attrs.get("separator", "") or b"")
    n = int(num)
    if x.shape[:ids.ndim] != ids.shape:
        raise InvalidArgumentError(
            f"segment_ids.shape = {_fmt(ids.shape)} is not a prefix of input.shape = "
            f"{_fmt(x.shape)}")
    inner = x.shape[ids.ndim:]
    rows = x.reshape((ids.size, -1))
    parts: list[list[list[bytes]]] = [[[] for _ in range(rows.shape[1])] for _ in range(n)]
    for i, sid in enumerate(ids.reshape(-1).tolist()):
        if sid >= n:
            raise InvalidArgumentError(f"segment_ids[{i}] = {sid} is out of range [0, {n})")
        if sid < 0:
            raise InvalidArgumentError(f"segment_ids[{i}] = {sid} is negative")
        for j, v in enumerate(rows[i].tolist()):
            parts[sid][j].append(_as_bytes(v))
    out = np.empty((n, rows.shape[1]), dtype=object)
    for s in range(n):
        for j in range(rows.shape[1]):
            # TF appends the separator only once the joined string is non-empty: a
            # segment's leading empty strings leave no separator ("", "a", "" -> "a|")
            acc = b""
            for part in parts[s][j]:
                acc = acc + sep + part if acc else part
            out[s, j] = acc
    return out.reshape((n,) + inner)


# --- hashing: farmhash Fingerprint64 and SipHash-2-4 ---------------------------------------------

_M64 = (1 << 64) - 1
_K0, _K1, _K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i:i + 4], "little")


def _rot(v: int, r: int) -> int:
    return v if r == 0 else ((v >> r) | (v << (64 - r))) & _M64


def _mix(v: int) -> int:
    return v ^ (v >> 47)


def _h16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _h0to16(s: bytes, n: int) -> int:
    if n >= 8:
        mul = _K2 + n * 2
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _h16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _h16(n + (_f32(s, 0) << 3), _f32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_mix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _h17to32(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _h16((_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
                (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)


def _h33to64(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _h16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _h16((_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
                (e + _rot((f + a) & _M64, 18) + g) & _M64, mul)


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """farmhash's Fingerprint64 (farmhashna::Hash64), which TensorFlow hashes strings with."""
    n = len(s)
    if n <= 16:
        return _h0to16(s, n)
    if n <= 32:
        return _h17to32(s, n)
    if n <= 64:
        return _h33to64(s, n)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_mix((y * _K2 + 113) & _M64) * _K2) & _M64
    v = (0, 0)
    w = (0, 0)
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    p = 0
    while True:
        x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * _K1) & _M64
        x ^= w[1]
        y = (y + v[0] + _f64(s, p + 40)) & _M64
        z = (_rot((z + w[0]) & _M64, 33) * _K1) & _M64
        v = _weak32(s, p, (v[1] * _K1) & _M64, (x + w[0]) & _M64)
        w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
        z, x = x, z
        p += 64
        if p == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    p = last64
    w = ((w[0] + ((n - 1) & 63)) & _M64, w[1])
    v = ((v[0] + w[0]) & _M64, v[1])
    w = ((w[0] + v[0]) & _M64, w[1])
    x = (_rot((x + y + v[0] + _f64(s, p + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v[1] + _f64(s, p + 48)) & _M64, 42) * mul) & _M64
    x ^= (w[1] * 9) & _M64
    y = (y + v[0] * 9 + _f64(s, p + 40)) & _M64
    z = (_rot((z + w[0]) & _M64, 33) * mul) & _M64
    v = _weak32(s, p, (v[1] * mul) & _M64, (x + w[0]) & _M64)
    w = _weak32(s, p + 32, (z + w[1]) & _M64, (y + _f64(s, p + 16)) & _M64)
    z, x = x, z
    return _h16((_h16(v[0], w[0], mul) + _mix(y) * _K0 + z) & _M64,
                (_h16(v[1], w[1], mul) + x) & _M64, mul)


def _sipround(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _M64
    v1 = _rot(v1, 64 - 13) ^ v0
    v0 = _rot(v0, 64 - 32)
    v2 = (v2 + v3) & _M64
    v3 = _rot(v3, 64 - 16) ^ v2
    v0 = (v0 + v3) & _M64
    v3 = _rot(v3, 64 - 21) ^ v0
    v2 = (v2 + v1) & _M64
    v1 = _rot(v1, 64 - 17) ^ v2
    v2 = _rot(v2, 64 - 32)
    return v0, v1, v2, v3


def siphash24(k0: int, k1: int, s: bytes) -> int:
    """SipHash-2-4 with the 128-bit key (k0, k1): StringToHashBucketStrong's hash."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573
    n = len(s)
    tail = s[n - n % 8:] + bytes(7 - n % 8) + bytes([n & 0xFF])
    for i in range(0, n - n % 8, 8):
        m = _f64(s, i)
        v3 ^= m
        for _ in range(2):
            v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
        v0 ^= m
    m = int.from_bytes(tail, "little")
    v3 ^= m
    for _ in range(2):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    v0 ^= m
    v2 ^= 0xFF
    for _ in range(4):
        v0, v1, v2, v3 = _sipround(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def _buckets(ctx: KernelContext) -> int:
    n = int(ctx.attrs.get("num_buckets", 1))
    if n <= 0:
        raise InvalidArgumentError(f"num_buckets must be positive, got {n}")
    return n


@kernel("StringToHashBucketFast")
def string_to_hash_bucket_fast(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    n = _buckets(ctx)
    return _map(lambda v: fingerprint64(_as_bytes(v)) % n, x, np.int64)


@kernel("StringToHashBucketStrong")
def string_to_hash_bucket_strong(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    n = _buckets(ctx)
    key = [int(k) for k in ctx.attrs.get("key", [])]
    if len(key) != 2:
        raise InvalidArgumentError(f"Key must have 2 elements, got {len(key)}")
    k0, k1 = key[0] & _M64, key[1] & _M64
    return _map(lambda v: siphash24(k0, k1, _as_bytes(v)) % n, x, np.int64)


@kernel("Fingerprint")
def fingerprint(ctx: KernelContext, data: np.ndarray, method: np.ndarray) -> np.ndarray:
    m = _as_bytes(method.item()) if method.ndim == 0 else b""
    if m != b"farmhash64":
        raise InvalidArgumentError(f"Unsupported fingerprint method: {_show(m)}")
    if data.ndim < 1:
        raise InvalidArgumentError("data must have rank at least one")
    rows = data.reshape(data.shape[0], -1)
    out = np.zeros((data.shape[0], 8), dtype=np.uint8)
    for i, row in enumerate(rows):
        if data.dtype == object:
            if row.size == 1:
                fp = fingerprint64(_as_bytes(row[0]))
            else:  # each string's fingerprint, then the fingerprint of those bytes
                fp = fingerprint64(b"".join(
                    fingerprint64(_as_bytes(v)).to_bytes(8, "little") for v in row))
        else:
            fp = fingerprint64(np.ascontiguousarray(row).astype(
                row.dtype.newbyteorder("<"), copy=False).tobytes())
        out[i] = np.frombuffer(fp.to_bytes(8, "little"), dtype=np.uint8)
    return out


# --- StringToHashBucket (legacy): TensorFlow's own Hash64 ------------------------------------

_HASH_MUL = 0xC6A4A7935BD1E995


def hash64(s: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's Hash64 (a MurmurHash2-64 variant, tensorflow/core/platform/hash.cc):
    the legacy StringToHashBucket hash and the string-key hash of MutableDenseHashTable."""
    n = len(s)
    h = (seed ^ (n * _HASH_MUL)) & _M64
    end = n - n % 8
    for i in range(0, end, 8):
        k = (_f64(s, i) * _HASH_MUL) & _M64
        k ^= k >> 47
        h = ((h ^ ((k * _HASH_MUL) & _M64)) * _HASH_MUL) & _M64
    if n % 8:
        h = ((h ^ int.from_bytes(s[end:], "little")) * _HASH_MUL) & _M64
    h ^= h >> 47
    h = (h * _HASH_MUL) & _M64
    return h ^ (h >> 47)


@kernel("StringToHashBucket")
def string_to_hash_bucket(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    # the legacy op hashes with Hash64, not with the Fingerprint64 of StringToHashBucketFast
    n = _buckets(ctx)
    return _map(lambda v: hash64(_as_bytes(v)) % n, x, np.int64)


# --- StringFormat: TensorFlow's Tensor::SummarizeValue(summarize, print_v2=true) -------------

_FLT_MIN, _DBL_MIN = 1.1754943508222875e-38, 2.2250738585072014e-308


def _format_real(v: float, single: bool) -> str:
    """TF's FloatToBuffer / DoubleToBuffer: %.6g (%.15g for doubles) when that reads back as
    the same value, else %.9g (%.17g). TF's threads flush denormals, so they print as 0."""
    if math.isnan(v):
        return "-nan" if math.copysign(1.0, v) < 0 else "nan"
    if v != 0 and abs(v) < (_FLT_MIN if single else _DBL_MIN):
        v = math.copysign(0.0, v)
    if single:
        s = format(v, ".6g")
        return s if np.float32(float(s)) == np.float32(v) else format(v, ".9g")
    s = format(v, ".15g")
    return s if math.isinf(v) or float(s) == v else format(v, ".17g")


_C_ESCAPES = {0x0A: b"\\n", 0x0D: b"\\r", 0x09: b"\\t", 0x22: b'\\"', 0x27: b"\\'",
              0x5C: b"\\\\"}


def _c_escape(b: bytes) -> bytes:
    """absl::Utf8SafeCEscape: C escapes and octal for ASCII control bytes; bytes >= 0x80 are
    kept as they are."""
    out = bytearray()
    for c in b:
        esc = _C_ESCAPES.get(c)
        if esc is not None:
            out += esc
        elif c < 0x20 or c == 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    return bytes(out)


def _element_printer(dt: np.dtype) -> Callable[[Any], bytes] | None:
    """How TF prints one element of ``dt`` (None: dtypes TF prints as ``?``)."""
    if dt.kind in "OSU":
        return lambda v: b'"' + _c_escape(_as_bytes(v)) + b'"'
    if dt == np.bool_:
        return lambda v: b"1" if v else b"0"
    if dt.kind in "iu":
        return lambda v: str(int(v)).encode()
    if dt.kind == "f" and dt.itemsize <= 4 or dt.name == "bfloat16":
        return lambda v: _format_real(float(v), True).encode()
    if dt == np.float64:
        return lambda v: _format_real(float(v), False).encode()
    return None


def _dim_spacing(out: list[bytes], dim: int, ndims: int) -> None:
    if dim == ndims - 1:
        out.append(b" ")
    else:
        out.append(b"\n" * (ndims - dim - 1) + b" " * (dim + 1))


def summarize_value(x: np.ndarray, summarize: int) -> bytes:
    """TF's Tensor::SummarizeValue(summarize, print_v2=true): ``summarize`` elements at each
    end of every dimension, ``...`` between them (a negative ``summarize`` prints all)."""
    flat = x.reshape(-1)
    n = flat.size
    max_entries = n if summarize < 0 else summarize
    limit = min(max_entries, n)
    show = _element_printer(x.dtype)
    if show is None:   # complex and the other irregular dtypes
        body = b" ".join([b"?"] * limit) + (b"..." if max_entries < n else b"")
        return b"[" + body + b"]" if x.ndim else body
    if x.ndim == 0:
        return b" ".join(show(flat[i]) for i in range(limit)) + (b"..." if n > limit else b"")
    shape = x.shape
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(x.ndim)]
    out: list[bytes] = []

    def dim_v2(dim: int, start: int) -> None:
        if dim == x.ndim:
            out.append(show(flat[start]))
            return
        out.append(b"[")
        count = shape[dim]
        for i in range(min(limit, count)):
            if i > 0:
                _dim_spacing(out, dim, x.ndim)
            dim_v2(dim + 1, start + strides[dim] * i)
        if count > 2 * limit:
            _dim_spacing(out, dim, x.ndim)
            out.append(b"...")
        for i in range(max(limit, count - limit), count):
            _dim_spacing(out, dim, x.ndim)
            dim_v2(dim + 1, start + strides[dim] * i)
        out.append(b"]")

    dim_v2(0, 0)
    return b"".join(out)


def summarize_value_v1(x: np.ndarray, summarize: int) -> bytes:
    """TF's Tensor::SummarizeValue(summarize) as Print (v1) and Assert call it: the first
    ``summarize`` elements in row-major order, each row bracketed, ``...`` where it stops;
    strings escaped but unquoted."""
    flat = x.reshape(-1)
    n = flat.size
    limit = n if summarize < 0 else min(summarize, n)
    if x.dtype.kind in "OSU":
        show = lambda v: _c_escape(_as_bytes(v))  # noqa: E731
    else:
        show = _element_printer(x.dtype)
    if show is None:   # complex and the other irregular dtypes
        return b" ".join([b"?"] * limit) + (b"..." if n > limit else b"")
    if x.ndim == 0:
        return b" ".join(show(flat[i]) for i in range(limit)) + (b"..." if n > limit else b"")
    out: list[bytes] = []
    index = 0

    def one_dim(dim: int) -> None:   # TF's PrintOneDim
        nonlocal index
        if index >= limit:
            return
        if dim == x.ndim - 1:
            for i in range(x.shape[dim]):
                if index >= limit:
                    if dim:
                        out.append(b"...")
                    return
                if i:
                    out.append(b" ")
                out.append(show(flat[index]))
                index += 1
            return
        for _ in range(x.shape[dim]):
            opened = index < limit
            if opened:
                out.append(b"[")
            one_dim(dim + 1)
            if index < limit or opened:
                out.append(b"]")

    one_dim(0)
    if n > limit:
        out.append(b"...")
    return b"".join(out)


def _attr_bytes(v: Any) -> bytes:
    if v is None:
        return b""
    return v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")


@kernel("StringFormat")
def string_format(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    a = ctx.attrs
    template = _attr_bytes(a.get("template", "%s"))
    placeholder = _attr_bytes(a.get("placeholder", "%s"))
    summarize = int(a.get("summarize", 3))
    # absl::StrSplit: an empty placeholder splits between every character
    pieces = template.split(placeholder) if placeholder else \
        [template[i:i + 1] for i in range(len(template))] or [b""]
    if len(pieces) - 1 != len(inputs):
        raise InvalidArgumentError(
            f"num placeholders in template and num inputs must match: {len(pieces) - 1} vs. "
            f"{len(inputs)}")
    pieces = [p.split(b"\0")[0] for p in pieces]   # TF appends each piece's c_str()
    out = [pieces[0]]
    for x, piece in zip(inputs, pieces[1:]):
        out.append(summarize_value(np.asarray(x), summarize))
        out.append(piece)
    return np.array(b"".join(out), dtype=object)


# --- StringNGrams ---------------------------------------------------------------------------

@kernel("StringNGrams")
def string_ngrams(ctx: KernelContext, data: np.ndarray,
                  data_splits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = ctx.attrs
    sep = _attr_bytes(a.get("separator"))
    lpad, rpad = _attr_bytes(a.get("left_pad")), _attr_bytes(a.get("right_pad"))
    widths = [int(w) for w in a.get("ngram_widths") or []]
    pad_width = int(a.get("pad_width", 0))
    preserve = bool(a.get("preserve_short_sequences", False))
    for w in widths:
        if w <= 0:
            raise InvalidArgumentError("ngram_widths must contain positive values")
    tokens = [_as_bytes(v) for v in data.reshape(-1).tolist()]
    splits = [int(s) for s in data_splits.reshape(-1)]
    size = len(tokens)
    if splits:
        if splits[0] != 0:
            raise InvalidArgumentError(f"First split value must be 0, got {splits[0]}")
        prev = 0
        for s in splits[1:]:
            if not prev <= s <= size:
                raise InvalidArgumentError(
                    f"Invalid split value {s}, must be in [{prev}, {size}]")
            prev = s
        if prev != size:
            raise InvalidArgumentError(
                f"Last split value must be data size. Expected {size}, got {prev}")
    out_splits = np.zeros(data_splits.shape, dtype=data_splits.dtype)
    if size == 0 or not splits:
        return np.full(data.shape, b"", dtype=object), out_splits

    def pad_of(width: int) -> int:
        return min(width - 1 if pad_width < 0 else pad_width, width - 1)

    def count(length: int, width: int) -> int:
        return max(0, length + 2 * pad_of(width) - width + 1)

    def make(row: list[bytes], num: int, width: int, out: list[bytes]) -> None:
        pad = pad_of(width)
        for k in range(num):
            left = max(0, pad - k)
            right = max(0, pad - (num - (k + 1)))
            ntok = width - (left + right)
            first = 0 if left > 0 else k - pad
            parts = [lpad] * left + row[first:first + ntok] + [rpad] * right
            out.append(sep.join(parts))

    grams: list[bytes] = []
    for i in range(len(splits) - 1):
        row = tokens[splits[i]:splits[i + 1]]
        before = len(grams)
        for w in widths:
            make(row, count(len(row), w), w, grams)
        if preserve and len(grams) == before and row:
            if pad_width < 0:
                raise InvalidArgumentError(
                    f"Pad width should be >= 0 when preserve_short_sequences is True and "
                    f"ngram_widths are not provided, got {pad_width}")
            make(row, 1, len(row) + 2 * pad_width, grams)
        out_splits[i + 1] = len(grams)
    out = np.empty(len(grams), dtype=object)
    out[:] = grams
    return out, out_splits


# --- Unicode: decode, encode, transcode (the ICU converters TF uses) --------------------------

# ICU converter names (compared without case, '-', '_' and spaces) -> Python codecs whose
# malformed-input handling is ICU's: one U+FFFD per maximal invalid subsequence (UTF-8), per
# unpaired surrogate or invalid unit (UTF-16/32), per truncated tail, per byte >= 0x80 (ASCII)
_CODECS = {
    "utf8": "utf-8",
    "utf16be": "utf-16-be", "utf16bigendian": "utf-16-be",
    "utf16le": "utf-16-le", "utf16littleendian": "utf-16-le",
    "utf32be": "utf-32-be", "utf32bigendian": "utf-32-be",
    "utf32le": "utf-32-le", "utf32littleendian": "utf-32-le",
    "iso88591": "latin-1", "latin1": "latin-1", "l1": "latin-1", "ibm819": "latin-1",
    "cp819": "latin-1", "csisolatin1": "latin-1", "isoir100": "latin-1",
    "usascii": "ascii", "ascii": "ascii", "ansix341968": "ascii", "iso646us": "ascii",
    "us": "ascii", "cp367": "ascii", "ibm367": "ascii", "csascii": "ascii",
}


def _codec(name: Any) -> str:
    n = _attr_bytes(name).decode("utf-8", "replace")
    key = "".join(c for c in n.lower() if c not in "-_ ")
    codec = _CODECS.get(key)
    if codec is not None:
        return codec
    try:
        codecs.lookup(n)
    except LookupError:
        raise InvalidArgumentError(
            f"Could not create converter for input encoding: {n}") from None
    raise UnimplementedError(
        f"input encoding {n!r} is not supported (only UTF-8, UTF-16/32 BE/LE, ISO-8859-1 and "
        f"US-ASCII)")


def _mark_error(e: UnicodeDecodeError) -> tuple[str, int]:
    # a lone surrogate (never a decoded character) that says how many bytes were invalid
    return chr(0xDC00 + e.end - e.start), e.end


codecs.register_error("dfg.unicode_mark", _mark_error)


def _decode_chars(b: bytes, codec: str) -> list[tuple[int, int, bool]]:
    """(code point, bytes consumed, malformed) for each character ICU reads from ``b``."""
    out = []
    for ch in b.decode(codec, "dfg.unicode_mark"):
        c = ord(ch)
        if 0xD800 <= c <= 0xDFFF:
            out.append((0xFFFD, c - 0xDC00, True))
        elif codec == "utf-8":
            out.append((c, 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4,
                        False))
        elif codec.startswith("utf-16"):
            out.append((c, 2 if c < 0x10000 else 4, False))
        else:
            out.append((c, 4 if codec.startswith("utf-32") else 1, False))
    return out


class _ErrorOptions:
    """TF's ErrorOptions: the ``errors`` policy, replacement and control-character flags."""

    def __init__(self, ctx: KernelContext) -> None:
        a = ctx.attrs
        policy = _attr_bytes(a.get("errors", "replace")).decode()
        if policy not in ("replace", "ignore", "strict"):
            raise InvalidArgumentError(
                "errors policy must be one of 'strict', 'replace', or 'ignore'")
        self.ignore = policy == "ignore"
        self.strict = policy == "strict"
        self.subst = int(a.get("replacement_char", 0xFFFD))
        if not 0 <= self.subst <= 0x10FFFF:
            raise InvalidArgumentError("replacement_char out of unicode codepoint range")
        self.control = bool(a.get("replace_control_characters", False))


_ENCODE_NAMES = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-32-BE": "utf-32-be"}


def _output_encoding(ctx: KernelContext) -> str:
    name = _attr_bytes(ctx.attrs.get("output_encoding")).decode("utf-8", "replace")
    if name not in _ENCODE_NAMES:
        raise InvalidArgumentError(f"Invalid encoding \"{name}\"")
    return _ENCODE_NAMES[name]


def _encode_code_points(cps: list[int], encoding: str) -> bytes:
    """ICU's UnicodeString of ``cps`` written out as TF's Encode does: UTF-8 (an unpaired
    surrogate becomes U+FFFD), or big-endian UTF-16 units / UTF-32 code points."""
    units = bytearray()
    for c in cps:
        if c >= 0x10000:
            c -= 0x10000
            units += (0xD800 | (c >> 10)).to_bytes(2, "big")
            units += (0xDC00 | (c & 0x3FF)).to_bytes(2, "big")
        else:
            units += c.to_bytes(2, "big")
    if encoding == "utf-16-be":
        return bytes(units)
    # adjacent surrogates pair up as they would in the UnicodeString
    s = bytes(units).decode("utf-16-be", "surrogatepass")
    if encoding == "utf-32-be":
        return b"".join(ord(ch).to_bytes(4, "big") for ch in s)
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in s).encode()


def _unicode_decode(ctx: KernelContext, x: np.ndarray, with_offsets: bool):
    opts = _ErrorOptions(ctx)
    codec = _codec(ctx.attrs.get("input_encoding"))
    splits, chars, offsets = [0], [], []
    for v in x.reshape(-1).tolist():
        pos = 0
        for cp, n, bad in _decode_chars(_as_bytes(v), codec):
            if bad and opts.strict:
                raise InvalidArgumentError("Invalid formatting on input string")
            if bad or (opts.control and cp <= 0x1F):
                if opts.ignore:
                    pos += n
                    continue
                cp = opts.subst
            chars.append(cp)
            offsets.append(pos)
            pos += n
        splits.append(len(chars))
    sdt = ctx.attrs.get("Tsplits") or np.int64
    out = [np.asarray(splits, dtype=sdt), np.asarray(chars, dtype=np.int32)]
    if with_offsets:
        out.append(np.asarray(offsets, dtype=np.int64))
    return tuple(out)


@kernel("UnicodeDecode")
def unicode_decode(ctx: KernelContext, x: np.ndarray):
    return _unicode_decode(ctx, x, False)


@kernel("UnicodeDecodeWithOffsets")
def unicode_decode_with_offsets(ctx: KernelContext, x: np.ndarray):
    return _unicode_decode(ctx, x, True)


@kernel("UnicodeTranscode")
def unicode_transcode(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    opts = _ErrorOptions(ctx)
    out_enc = _output_encoding(ctx)
    codec = _codec(ctx.attrs.get("input_encoding"))
    found = False

    def one(v: Any) -> bytes:
        nonlocal found
        cps = []
        for cp, _n, bad in _decode_chars(_as_bytes(v), codec):
            if bad or (opts.control and cp <= 0x1F):
                found = True   # control characters count as errors for "strict" here
                if opts.ignore:
                    continue
                cp = opts.subst
            cps.append(cp)
        return _encode_code_points(cps, out_enc)

    out = _map(one, x)
    if opts.strict and found:
        raise InvalidArgumentError("Invalid formatting on input string")
    return out


@kernel("UnicodeEncode")
def unicode_encode(ctx: KernelContext, values: np.ndarray, splits: np.ndarray) -> np.ndarray:
    opts = _ErrorOptions(ctx)
    enc = _output_encoding(ctx)
    cps = values.reshape(-1).tolist()
    s = [int(v) for v in splits.reshape(-1)]
    if not s:
        raise InvalidArgumentError(
            f"Input_splits should contain elements, but given input_values has {len(cps)} "
            f"elements")
    if s[0] != 0:
        raise InvalidArgumentError("First value in input_splits must be zero.")
    if any(b < a for a, b in zip(s, s[1:])):
        raise InvalidArgumentError(
            "Values in input_splits must be equal or in ascending order.")
    if s[-1] != len(cps):
        raise InvalidArgumentError(
            "Last value in input_splits must be equal to length of input_tensor.")
    out = np.empty(len(s) - 1, dtype=object)
    for i in range(1, len(s)):
        row = []
        for c in cps[s[i - 1]:s[i]]:
            if c < 0 or c > 0x10FFFF or 0xD800 <= c <= 0xDFFF:
                if opts.strict:
                    raise InvalidArgumentError(
                        "Code point is out of range for Unicode, or is a surrogate.")
                if opts.ignore:
                    continue
                c = opts.subst
            row.append(c)
        out[i - 1] = _encode_code_points(row, enc)
    return out


# --- UnicodeScript --------------------------------------------------------------------------

_SCRIPTS: tuple[np.ndarray, np.ndarray] | None = None   # (run starts, UScriptCode)


def _script_table() -> tuple[np.ndarray, np.ndarray]:
    """ICU's script runs over every code point, as TF 2.21's UnicodeScript gives them
    (_unicode_scripts.py, written by tests/data/kernels/unicode_script/generate.py); parsed
    on first use."""
    global _SCRIPTS
    if _SCRIPTS is None:
        from ._unicode_scripts import RUNS

        pairs = [tok.split(":") for tok in RUNS.split()]
        _SCRIPTS = (np.asarray([int(a, 16) for a, _ in pairs], np.int64),
                    np.asarray([int(b) for _, b in pairs], np.int32))
    return _SCRIPTS


@kernel("UnicodeScript")
def unicode_script(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    starts, codes = _script_table()
    cp = x.astype(np.int64)
    valid = (cp >= 0) & (cp <= 0x10FFFF)   # others: -1 (USCRIPT_INVALID_CODE)
    code = codes[np.searchsorted(starts, np.where(valid, cp, 0), side="right") - 1]
    return np.where(valid, code, -1).astype(np.int32)
