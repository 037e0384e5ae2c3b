"""String kernels: StringToNumber, AsString, StringJoin, Substr, StaticRegexReplace.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import re2

from dfg.graphdef.errors import InvalidArgumentError, OutOfRangeError

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
        s = b.decode("utf-8", "surrogateescape")
        return (s.upper() if upper else s.lower()).encode("utf-8", "surrogateescape")

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
            out[s, j] = sep.join(parts[s][j])
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
