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
  replace, which skips an empty match right after the previous match. Patterns are run by
  Python's ``re`` with ASCII classes, which agrees with RE2 on the common syntax.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

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

_FLOAT_RE = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|nan)",
                       re.IGNORECASE)
_HEX_RE = re.compile(rb"[+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?\d+)?",
                     re.IGNORECASE)
_INT_RE = re.compile(rb"[+-]?\d+")


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


# --- StaticRegexReplace -----------------------------------------------------------------------

def _rewrite_parts(rewrite: str) -> list[str | int] | None:
    """RE2 rewrite string as literal pieces and group numbers; None if malformed."""
    parts: list[str | int] = []
    i, lit = 0, []
    while i < len(rewrite):
        c = rewrite[i]
        if c != "\\":
            lit.append(c)
            i += 1
            continue
        nxt = rewrite[i + 1] if i + 1 < len(rewrite) else ""
        if nxt.isdigit():
            if lit:
                parts.append("".join(lit))
                lit = []
            parts.append(int(nxt))
        elif nxt == "\\":
            lit.append("\\")
        else:
            return None
        i += 2
    if lit:
        parts.append("".join(lit))
    return parts


@kernel("StaticRegexReplace")
def static_regex_replace(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    pattern = ctx.attrs.get("pattern", "")
    rewrite = ctx.attrs.get("rewrite", "")
    pattern = pattern.decode("utf-8", "surrogateescape") if isinstance(pattern, bytes) \
        else pattern
    rewrite = rewrite.decode("utf-8", "surrogateescape") if isinstance(rewrite, bytes) \
        else rewrite
    try:
        rx = re.compile(pattern, re.ASCII)
    except re.error as e:
        raise InvalidArgumentError(f"Invalid pattern: {pattern}, error: {e}") from None
    parts = _rewrite_parts(rewrite)
    if parts is not None and any(isinstance(p, int) and p > rx.groups for p in parts):
        parts = None  # RE2 refuses a rewrite naming a missing group: input unchanged
    global_ = bool(ctx.attrs.get("replace_global", True))

    def expand(m: re.Match) -> str:
        assert parts is not None
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in parts)

    def replace(v: Any) -> bytes:
        b = _as_bytes(v)
        if parts is None:
            return b
        s = b.decode("utf-8", "surrogateescape")
        out: list[str] = []
        p, last_end, count = 0, -1, 0
        while p <= len(s):
            m = rx.search(s, p)
            if m is None:
                break
            out.append(s[p:m.start()])
            if m.start() == m.end() == last_end:
                # RE2 never takes an empty match where the previous match ended.
                out.append(s[p:p + 1])
                p += 1
                continue
            out.append(expand(m))
            p = last_end = m.end()
            count += 1
            if not global_:
                break
        if count == 0:
            return b
        out.append(s[p:])
        return "".join(out).encode("utf-8", "surrogateescape")

    return _map(replace, x)
