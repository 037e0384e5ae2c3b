"""File-format codecs: PNG, JPEG, GIF, BMP images and WAV audio, decode and encode.

TensorFlow's CPU semantics (image/decode_image_op.cc and the libpng, giflib and libjpeg-turbo
settings it uses), as checked against its outputs (tests/data/kernels/raw_ops_parsing):

* DecodeJpeg, DecodePng, DecodeGif, DecodeBmp, DecodeAndCropJpeg and DecodeImage are one TF
  kernel that sniffs the format from the magic bytes: DecodePng and DecodeJpeg also decode
  GIF (one frame) and each other, DecodeGif gives JPEG/PNG a frame axis, DecodeBmp and
  DecodeAndCropJpeg only take their own format.
* PNG decoding is libpng's, with TF's transforms: palette to RGB (alpha from tRNS), low bit
  depths scaled to 8, 16-bit samples truncated to their high byte for uint8, uint8 samples
  widened as ``v * 257`` for uint16, RGB to gray as ``(9797 r + 19234 g + 13737 b) >> 15``
  (rounded for 16-bit samples; through libpng's gamma tables when the file states a gamma),
  gray to RGB by copying, an added alpha channel filled with ``2**bit_depth - 1``.
  EncodePng writes the same bytes as TF's libpng: adaptive filters (the smallest sum of
  absolute differences per row), zlib at the given level with memLevel 9, Z_FILTERED and
  libpng's small-image window bits, 8 KiB IDAT chunks (level 0's stored blocks are laid
  out as zlib lays them out for libpng's row-by-row calls).
* GIF frames are composed as TF's gif_io does: each frame starts from the previous one,
  pixels of the transparent index keep it (black in the first frame), the canvas is as
  large as the largest frame; disposal methods are ignored.
* BMP is TF's own decoder: 8-, 24- and 32-bit uncompressed rows, bottom-up unless the height
  is negative, BGR(A) to RGB(A), palettes ignored.
* WAV: 16-bit PCM only; samples are ``int16 / 32768``; EncodeWav rounds ``x * 32768`` half
  away from zero and clamps to int16.
* JPEG needs Pillow (``pip install pillow``; without it JPEG decoding and encoding are
  UnimplementedErrors, headers are still read for ExtractJpegShape and error checks). Pillow
  wraps libjpeg-turbo as TensorFlow does; decoding reproduces TF's pixels exactly for every
  dct_method / fancy_upscaling / ratio / crop setting on gray, 4:4:4 and 4:2:0 images (see
  the JPEG section for the rarer set-ups that raise instead), and EncodeJpeg's bytes are
  TF's. try_recover_truncated / acceptable_fraction are honoured only for intact files.
"""

from __future__ import annotations

import math
import struct
import zlib
from typing import Any

import numpy as np

from dfg.graphdef.errors import InternalError, InvalidArgumentError, UnimplementedError

from .registry import KernelContext, kernel

_U8, _U16, _F32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float32)


def _fmt(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _contents(x: np.ndarray) -> bytes:
    if x.ndim != 0:
        raise InvalidArgumentError(f"`contents` must be scalar but got shape{_fmt(x.shape)}")
    v = x.item()
    return v if isinstance(v, bytes) else str(v).encode()


class _BadImage(Exception):
    """The data is not a valid image of the format being decoded."""


# --- PNG decoding ------------------------------------------------------------------------

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
          (1, 0, 2, 1))  # (row start, col start, row step, col step) per pass
_PNG_BITS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


class _Png:
    """A parsed PNG: header fields, palette, tRNS, gamma and the concatenated IDAT data."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(_PNG_MAGIC):
            raise _BadImage("Not a PNG file")
        pos, self.idat = 8, bytearray()
        self.palette: np.ndarray | None = None
        self.trns: bytes | None = None
        self.gamma = 0  # the file's gamma * 100000; 0: none stated
        self.header = False
        seen_idat = False
        while True:
            if pos + 8 > len(data):
                raise _BadImage("truncated chunk header")
            n, kind = struct.unpack(">I4s", data[pos:pos + 8])
            if n > 0x7FFFFFFF or pos + 12 + n > len(data):
                raise _BadImage("truncated chunk")
            body = data[pos + 8:pos + 8 + n]
            crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
            pos += 12 + n
            critical = not kind[0] & 0x20
            if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
                if critical:
                    raise _BadImage(f"{kind.decode('latin-1')}: CRC error")
                continue  # libpng drops an ancillary chunk with a bad CRC
            if not self.header and kind != b"IHDR":
                raise _BadImage("Missing IHDR before chunk")
            if kind == b"IHDR":
                self._ihdr(body)
            elif kind == b"PLTE":
                if len(body) % 3 or not 0 < len(body) <= 768:
                    if self.color == 3:
                        raise _BadImage("Invalid palette")
                    continue
                # libpng keeps 256 entries, at most 2**bit_depth of them from the file
                npal = min(len(body) // 3, 1 << self.bits if self.color == 3 else 256)
                pal = np.zeros((256, 3), _U8)
                pal[:npal] = np.frombuffer(body, _U8)[:npal * 3].reshape(-1, 3)
                self.palette, self.npal = pal, npal
            elif kind == b"tRNS" and not seen_idat:
                want = {0: 2, 2: 6}.get(self.color)
                if self.color == 3 and self.palette is not None and 0 < len(body) <= self.npal:
                    self.trns = body
                elif want is not None and len(body) == want:
                    self.trns = body
            elif kind == b"gAMA" and not seen_idat and len(body) == 4:
                g = struct.unpack(">I", body)[0]
                if 0 < g <= 0x7FFFFFFF and not self.gamma_from_srgb:
                    self.gamma = g
            elif kind == b"sRGB" and not seen_idat and len(body) == 1:
                self.gamma, self.gamma_from_srgb = 45455, True
            elif kind == b"IDAT":
                if self.color == 3 and self.palette is None:
                    raise _BadImage("Missing PLTE before IDAT")
                self.idat += body
                seen_idat = True
            elif kind == b"IEND":
                break
            elif critical:
                raise _BadImage(f"{kind.decode('latin-1')}: unknown critical chunk")
        if not seen_idat:
            raise _BadImage("Not enough image data")

    gamma_from_srgb = False

    def _ihdr(self, body: bytes) -> None:
        if self.header or len(body) != 13:
            raise _BadImage("invalid IHDR")
        w, h, bits, color, comp, filt, interlace = struct.unpack(">IIBBBBB", body)
        if not (0 < w <= 1_000_000 and 0 < h <= 1_000_000):  # libpng's default user limits
            raise _BadImage("Invalid IHDR data")
        if color not in _PNG_BITS or bits not in _PNG_BITS[color] or comp or filt \
                or interlace > 1:
            raise _BadImage("Invalid IHDR data")
        self.width, self.height, self.bits, self.color = w, h, bits, color
        self.interlace, self.header = interlace, True

    def samples(self) -> np.ndarray:
        """The image as (h, w, file channels) samples at the file's bit depth (palette
        indices for colour type 3), uint8 or uint16."""
        nch = _PNG_CHANNELS[self.color]
        bpp_bits = nch * self.bits
        bpp = max(1, bpp_bits // 8)
        passes = _ADAM7 if self.interlace else ((0, 0, 1, 1),)
        sizes = []
        for r0, c0, dr, dc in passes:
            pw = (self.width - c0 + dc - 1) // dc if self.width > c0 else 0
            ph = (self.height - r0 + dr - 1) // dr if self.height > r0 else 0
            sizes.append((ph, pw, (pw * bpp_bits + 7) // 8))
        need = sum(ph * (rb + 1) for ph, pw, rb in sizes if pw and ph)
        d = zlib.decompressobj()
        try:
            raw = d.decompress(bytes(self.idat), need)
        except zlib.error as e:
            raise _BadImage(str(e)) from None
        if len(raw) < need:
            raise _BadImage("Not enough image data")
        dt = _U16 if self.bits == 16 else _U8
        out = np.zeros((self.height, self.width, nch), dt)
        pos = 0
        for (r0, c0, dr, dc), (ph, pw, rb) in zip(passes, sizes):
            if not pw or not ph:
                continue
            rows = _unfilter(raw[pos:pos + ph * (rb + 1)], ph, rb, bpp)
            pos += ph * (rb + 1)
            out[r0::dr, c0::dc] = _unpack(rows, pw, nch, self.bits)
        return out


def _unfilter(raw: bytes, h: int, rb: int, bpp: int) -> np.ndarray:
    """Undo the per-row filters (None, Sub, Up, Average, Paeth)."""
    data = np.frombuffer(raw, _U8).reshape(h, rb + 1)
    kinds, rows = data[:, 0], data[:, 1:].copy()
    if (kinds > 4).any():
        raise _BadImage("bad adaptive filter value")
    prev = np.zeros(rb, _U8)
    for y in range(h):
        k = kinds[y]
        row = rows[y]
        if k == 1:  # Sub: a running sum per byte position within a pixel
            n = -(-rb // bpp) * bpp
            padded = np.zeros(n, _U8)
            padded[:rb] = row
            row[:] = np.cumsum(padded.reshape(-1, bpp), axis=0, dtype=_U8).reshape(-1)[:rb]
        elif k == 2:
            row += prev
        elif k == 3:
            r, p = bytearray(row.tobytes()), prev.tobytes()
            for i in range(rb):
                left = r[i - bpp] if i >= bpp else 0
                r[i] = (r[i] + ((left + p[i]) >> 1)) & 0xFF
            row[:] = np.frombuffer(bytes(r), _U8)
        elif k == 4:
            r, p = bytearray(row.tobytes()), prev.tobytes()
            for i in range(rb):
                if i >= bpp:
                    a, c = r[i - bpp], p[i - bpp]
                else:
                    a = c = 0
                b = p[i]
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                r[i] = (r[i] + pred) & 0xFF
            row[:] = np.frombuffer(bytes(r), _U8)
        prev = row
    return rows


def _unpack(rows: np.ndarray, w: int, nch: int, bits: int) -> np.ndarray:
    """Filtered-away rows of bytes to (h, w, nch) samples."""
    h = rows.shape[0]
    if bits == 16:
        return rows[:, :w * nch * 2].copy().view(">u2").astype(_U16).reshape(h, w, nch)
    if bits == 8:
        return rows[:, :w * nch].reshape(h, w, nch)
    bitsarr = np.unpackbits(rows, axis=1)[:, :w * bits].reshape(h, w, bits)
    weights = (1 << np.arange(bits - 1, -1, -1)).astype(_U8)
    return (bitsarr * weights).sum(axis=2, dtype=_U8).reshape(h, w, 1)


def _gamma8(value_table: np.ndarray, g: int) -> np.ndarray:
    """libpng's png_build_8bit_table: ``floor(255 * (v/255) ** (g/1e5) + .5)``."""
    if 95000 <= g <= 105000:  # not significant: identity
        return value_table
    v = value_table.astype(np.float64)
    out = np.floor(255 * np.power(v / 255.0, g * 0.00001) + 0.5)
    out = np.where((value_table > 0) & (value_table < 255), out, v)
    return out.astype(_U8)


def _reciprocal(a: float) -> int:
    return int(math.floor(1e10 / a + 0.5))


def _png_decode(data: bytes, channels: int, want16: bool) -> np.ndarray:
    """A PNG through TF's libpng transforms to ``channels`` (0: the file's) channels of
    uint8 or uint16 (``want16``) samples."""
    png = _Png(data)
    color, bits = png.color, png.bits
    has_trns = png.trns is not None
    if channels == 0:
        channels = (4 if has_trns else 3) if color == 3 else _PNG_CHANNELS[color]
    s = png.samples()
    has_alpha = bool(color & 4)
    want_alpha = channels % 2 == 0
    is_gray = not color & 2
    expand_trns = color == 3 or (want_alpha and not has_alpha and has_trns)
    # EXPAND: palette to RGB(A), gray below 8 bits to 8 bits, tRNS to alpha
    if color == 3:
        idx = s[..., 0]
        rgb = png.palette[idx]
        if has_trns:
            alpha = np.full(256, 255, _U8)
            alpha[:len(png.trns)] = np.frombuffer(png.trns, _U8)
            s = np.concatenate([rgb, alpha[idx][..., None]], axis=2)
        else:
            s = rgb
        depth = 8
    else:
        depth = bits
        if is_gray and bits < 8:
            scale = {1: 255, 2: 85, 4: 17}[bits]
            if expand_trns and has_trns:
                tv = struct.unpack(">H", png.trns)[0] & ((1 << bits) - 1)
                alpha = np.where(s[..., 0] == tv, 0, 255).astype(_U8)
                s = np.concatenate([s * scale, alpha[..., None]], axis=2).astype(_U8)
            else:
                s = (s * scale).astype(_U8)
            depth = 8
        elif expand_trns and has_trns:
            vals = struct.unpack(">" + "H" * (len(png.trns) // 2), png.trns)
            top = (1 << depth) - 1
            match = np.all(s == np.array(vals, dtype=np.int64), axis=2)
            alpha = np.where(match, 0, top).astype(s.dtype)
            s = np.concatenate([s, alpha[..., None]], axis=2)
    # STRIP_ALPHA when no alpha is wanted
    if not want_alpha and s.shape[2] in (2, 4):
        s = s[..., :-1]
    # RGB_TO_GRAY
    if channels < 3 and not is_gray:
        s = _rgb_to_gray(s, depth, png)
    # GRAY_TO_RGB
    if channels >= 3 and s.shape[2] <= 2:
        s = np.concatenate([s[..., :1]] * 3 + ([s[..., 1:]] if s.shape[2] == 2 else []),
                           axis=2)
    # STRIP_16 for uint8 output: the high byte
    if depth == 16 and not want16:
        s = (s >> 8).astype(_U8)
        out_depth = 8
    else:
        out_depth = depth
    # FILLER: libpng's add_alpha with TF's filler (1 << file bit depth) - 1
    if want_alpha and s.shape[2] in (1, 3):
        filler = (1 << bits) - 1
        fill = filler if out_depth == 16 else filler & 0xFF
        s = np.concatenate([s, np.full(s.shape[:2] + (1,), fill, s.dtype)], axis=2)
    if want16 and out_depth == 8:
        s = s.astype(_U16) * 257
    return s.astype(_U16 if want16 else _U8, copy=False)


def _rgb_to_gray(s: np.ndarray, depth: int, png: _Png) -> np.ndarray:
    rc, gc = 9797, 19234  # libpng's fixed-point 0.299, 0.587 (truncated), blue the rest
    bc = 32768 - rc - gc
    r, g, b = (s[..., i].astype(np.int64) for i in range(3))
    rest = s[..., 3:]
    gamma = png.gamma
    significant = gamma and not 95000 <= gamma <= 105000
    if depth == 16:
        if significant:
            raise UnimplementedError(
                "PNG: 16-bit RGB to gray conversion of a file with a gamma is not supported")
        gray = ((rc * r + gc * g + bc * b + 16384) >> 15).astype(_U16)
    elif significant:
        ident = np.arange(256, dtype=_U8)
        to1 = _gamma8(ident, _reciprocal(gamma))
        screen = _reciprocal(gamma)  # libpng assumes the screen matches the file
        from1 = _gamma8(ident, _reciprocal(screen))
        table = _gamma8(ident, int(math.floor(1e15 / gamma / screen + 0.5)))
        lr, lg, lb = to1[r].astype(np.int64), to1[g].astype(np.int64), to1[b].astype(np.int64)
        mixed = from1[(rc * lr + gc * lg + bc * lb + 16384) >> 15]
        same = (r == g) & (r == b)
        gray = np.where(same, table[r], mixed).astype(_U8)
    else:
        same = (r == g) & (r == b)
        gray = np.where(same, r, (rc * r + gc * g + bc * b) >> 15).astype(_U8)
    return np.concatenate([gray[..., None].astype(s.dtype), rest], axis=2)


# --- PNG encoding ------------------------------------------------------------------------

def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return (struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


def _filter_sum(row: np.ndarray) -> int:
    """libpng's filter heuristic: bytes as signed magnitudes, summed."""
    r = row.astype(np.int64)
    return int(np.where(r < 128, r, 256 - r).sum())


def _png_filter(rows: np.ndarray, bpp: int) -> bytes:
    """Each row with libpng's adaptive filter choice (ties go to the earlier filter; no
    Up/Average/Paeth for one-row images, no Sub/Average/Paeth for one-column ones)."""
    h, rb = rows.shape
    use = [0, 1, 2, 3, 4]
    if h == 1:
        use = [k for k in use if k not in (2, 3, 4)]
    if rb == bpp:
        use = [k for k in use if k not in (1, 3, 4)]
    out = bytearray()
    prev = np.zeros(rb, np.int64)
    zeros = np.zeros(bpp, np.int64)
    for y in range(h):
        x = rows[y].astype(np.int64)
        left = np.concatenate([zeros, x[:-bpp]])
        upleft = np.concatenate([zeros, prev[:-bpp]])
        best = None
        for k in use:
            if k == 0:
                f = x
            elif k == 1:
                f = (x - left) & 255
            elif k == 2:
                f = (x - prev) & 255
            elif k == 3:
                f = (x - (left + prev) // 2) & 255
            else:
                p = left + prev - upleft
                pa, pb, pc = np.abs(p - left), np.abs(p - prev), np.abs(p - upleft)
                pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
                f = (x - pred) & 255
            score = _filter_sum(f) if len(use) > 1 else 0
            if best is None or score < best[0]:
                best = (score, k, f)
        out.append(best[1])
        out += best[2].astype(_U8).tobytes()
        prev = x
    return bytes(out)


def _png_encode(img: np.ndarray, level: int) -> bytes:
    h, w, c = img.shape
    bits = 16 if img.dtype == _U16 else 8
    color = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = np.ascontiguousarray(img).astype(">u2" if bits == 16 else _U8).tobytes()
    rb = w * c * bits // 8
    rows = np.frombuffer(raw, _U8).reshape(h, rb)
    data = _png_filter(rows, c * bits // 8)
    size = len(data)
    # libpng's deflate settings: a smaller window for small images, Z_FILTERED with filters
    wbits = 15
    if size <= 16384:
        half = 1 << (wbits - 1)
        while size + 262 <= half:
            half >>= 1
            wbits -= 1
    if level == 0:
        stream = bytearray(_zlib_stored(data, rb + 1, max(wbits, 9)))
    else:
        z = zlib.compressobj(6 if level < 0 else level, zlib.DEFLATED, max(wbits, 9), 9,
                             zlib.Z_FILTERED)
        stream = bytearray(z.compress(data) + z.flush())
    if size <= 16384:  # libpng's optimize_cmf: the smallest window the data needs
        cmf = stream[0]
        cinfo, half = cmf >> 4, 1 << ((cmf >> 4) + 7)
        if (cmf & 0x0F) == 8 and cinfo <= 7 and size <= half:
            while True:
                half >>= 1
                cinfo -= 1
                if not (cinfo > 0 and size <= half):
                    break
            cmf = (cmf & 0x0F) | (cinfo << 4)
            flg = stream[1] & 0xE0
            flg += 0x1F - ((cmf << 8) + flg) % 0x1F
            stream[0], stream[1] = cmf, flg
    out = bytearray(_PNG_MAGIC)
    out += _png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, color, 0, 0, 0))
    for i in range(0, len(stream), 8192):
        out += _png_chunk(b"IDAT", bytes(stream[i:i + 8192]))
    out += _png_chunk(b"IEND", b"")
    return bytes(out)


class _Stored:
    """zlib's deflate at level 0 (deflate_stored, zlib 1.2.12+) as libpng drives it: one
    row per deflate call into an 8 KiB output buffer. Stored-block boundaries depend on
    those buffer sizes, which Python's zlib does not let one choose."""

    def __init__(self, data: bytes, wbits: int) -> None:
        self.w_size = 1 << wbits
        self.window = bytearray(2 * self.w_size)
        self.strstart = self.block_start = 0
        self.pending = bytearray()
        self.out = bytearray()
        self.room = 8192  # libpng's zbuffer
        self.src, self.pos, self.end = data, 0, 0
        self.adler = zlib.adler32(data) & 0xFFFFFFFF
        cmf = ((wbits - 8) << 4) | 8
        self.header = bytes([cmf, 31 - (cmf << 8) % 31])
        self.status, self.trailer_done = "init", False

    def _flush(self) -> None:
        n = min(len(self.pending), self.room)
        self.out += self.pending[:n]
        del self.pending[:n]
        self.room -= n

    def _copy_in(self, n: int) -> bytes:
        b = self.src[self.pos:self.pos + n]
        self.pos += n
        return b

    def _stored(self, finish: bool) -> str:
        w, avail = self.w_size, self.end - self.pos
        used, last = avail, 0
        while True:  # blocks written straight to the output
            if self.room < 5:
                break
            left = self.strstart - self.block_start
            n = min(65535, left + self.end - self.pos, self.room - 5)
            if n < w and ((n == 0 and not finish) or not finish
                          or n != left + self.end - self.pos):
                break
            last = 1 if finish and n == left + self.end - self.pos else 0
            self.pending += bytes([last]) + struct.pack("<HH", n, n ^ 0xFFFF)
            self._flush()
            take = min(left, n)
            if take:
                self.out += self.window[self.block_start:self.block_start + take]
                self.room -= take
                self.block_start += take
            if n - take:
                self.out += self._copy_in(n - take)
                self.room -= n - take
            if last:
                break
        used -= self.end - self.pos
        if used:
            if used >= w:
                self.window[:w] = self.src[self.pos - w:self.pos]
                self.strstart = w
            else:
                if 2 * w - self.strstart <= used:
                    self.strstart -= w
                    self.window[:self.strstart] = self.window[w:w + self.strstart]
                self.window[self.strstart:self.strstart + used] = self.src[self.pos - used:
                                                                           self.pos]
                self.strstart += used
            self.block_start = self.strstart
        if last:
            return "finish_done"
        have = 2 * w - self.strstart
        if self.end - self.pos > have and self.block_start >= w:
            self.block_start -= w
            self.strstart -= w
            self.window[:self.strstart] = self.window[w:w + self.strstart]
            have += w
        have = min(have, self.end - self.pos)
        if have:
            self.window[self.strstart:self.strstart + have] = self._copy_in(have)
            self.strstart += have
        have = 65535
        left = self.strstart - self.block_start
        if left >= min(have, w) or (finish and self.pos == self.end and left <= have):
            n = min(left, have)
            last = 1 if finish and self.pos == self.end and n == left else 0
            self.pending += bytes([last]) + struct.pack("<HH", n, n ^ 0xFFFF)
            self.pending += self.window[self.block_start:self.block_start + n]
            self.block_start += n
            self._flush()
        return "finish_started" if last else "need_more"

    def deflate(self, finish: bool) -> bool:
        """One deflate() call; True when the stream is complete."""
        if self.pending:
            self._flush()
            if self.room == 0:
                return False
        if self.status == "init":
            self.pending += self.header
            self.status = "busy"
            self._flush()
            if self.pending:
                return False
        if self.pos < self.end or (finish and self.status != "finish"):
            state = self._stored(finish)
            if state.startswith("finish"):
                self.status = "finish"
            if state in ("need_more", "finish_started"):
                return False
        if not finish:
            return False
        if self.trailer_done:
            return True
        self.pending += struct.pack(">I", self.adler)
        self._flush()
        self.trailer_done = True
        return not self.pending

    def feed(self, n: int, finish: bool) -> None:
        """libpng's png_compress_IDAT for the next ``n`` input bytes."""
        self.end = self.pos + n
        while True:
            done = self.deflate(finish)
            if self.room == 0:
                self.room = 8192
                if finish and not done:
                    continue
            if done or (not finish and self.pos == self.end):
                return


def _zlib_stored(data: bytes, row: int, wbits: int) -> bytes:
    z = _Stored(data, wbits)
    for start in range(0, len(data), row):
        z.feed(min(row, len(data) - start), False)
    z.feed(0, True)
    return bytes(z.out)


@kernel("EncodePng")
def encode_png(ctx: KernelContext, image: np.ndarray) -> np.ndarray:
    level = int(ctx.attrs["compression"])
    if not -1 <= level <= 9:
        raise InvalidArgumentError(f"compression should be in [-1,9], got {level}")
    if image.ndim != 3:
        raise InvalidArgumentError(f"image must be 3-dimensional{_fmt(image.shape)}")
    if image.size >= (1 << 31) - 1:
        raise InvalidArgumentError("image cannot have >= int32 max elements")
    c = image.shape[2]
    if c not in (1, 2, 3, 4):
        raise InvalidArgumentError(f"image must have 1, 2, 3, or 4 channels, got {c}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise InternalError("PNG encoding failed")  # libpng refuses an empty image
    return np.array(_png_encode(image, level), dtype=object)


# --- JPEG ---------------------------------------------------------------------------------
#
# Pillow wraps libjpeg-turbo, as TensorFlow does, but it offers only two decoder set-ups:
# ISLOW IDCT with fancy upsampling (its default) and IFAST IDCT with replicating upsampling
# (its "draft" mode). TensorFlow's default is IFAST *with* fancy upsampling. So the planes
# are taken from libjpeg without colour conversion and finished here: under IFAST the
# replicated chroma planes are subsampled back to their stored size and upsampled with
# libjpeg-turbo's fancy (triangle) filters, then converted with libjpeg's YCbCr tables.
# Under ISLOW, planes stored at half size both ways (4:2:0) come unscaled out of a half-scale
# decode. That gives TensorFlow's bits for every dct_method / fancy_upscaling / ratio / crop
# combination, except INTEGER_ACCURATE with other 2x chroma subsampling (4:2:2, 4:4:0) when
# fancy upscaling is off or a DecodeAndCropJpeg window edge falls inside the image: Pillow
# has interpolated those planes already, so these raise UnimplementedError.

_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


class _JpegHeader:
    """What TF's decode needs from the markers before the first scan."""

    def __init__(self, data: bytes) -> None:
        if not data.startswith(b"\xff\xd8"):
            raise _BadImage("Not a JPEG file")
        pos, n = 2, len(data)
        self.adobe: int | None = None
        self.jfif = False
        self.comps: list[tuple[int, int, int]] = []
        self.progressive = False
        found = False
        while pos < n:
            while pos < n and data[pos] != 0xFF:  # libjpeg skips garbage before a marker
                pos += 1
            while pos < n and data[pos] == 0xFF:
                pos += 1
            if pos >= n:
                break
            m = data[pos]
            pos += 1
            if m in (0xD8, 0x01) or 0xD0 <= m <= 0xD7:
                continue
            if m == 0xD9:
                break
            if pos + 2 > n:
                raise _BadImage("truncated marker")
            length = struct.unpack(">H", data[pos:pos + 2])[0]
            seg = data[pos + 2:pos + length]
            if length < 2 or len(seg) != length - 2:
                raise _BadImage("truncated marker")
            if m in _SOF:
                if len(seg) < 6:
                    raise _BadImage("bad SOF")
                self.precision, self.height, self.width, nc = struct.unpack(">BHHB", seg[:6])
                if len(seg) < 6 + 3 * nc or nc == 0:
                    raise _BadImage("bad SOF")
                self.comps = [(seg[6 + 3 * i], seg[7 + 3 * i] >> 4, seg[7 + 3 * i] & 15)
                              for i in range(nc)]
                self.progressive = m in (0xC2, 0xC6, 0xCA, 0xCE)
                found = True
            elif m == 0xE0 and seg.startswith(b"JFIF\0"):
                self.jfif = True
            elif m == 0xEE and seg.startswith(b"Adobe") and len(seg) >= 12:
                self.adobe = seg[11]
            elif m == 0xDA:
                break
            pos += length
        if not found:
            raise _BadImage("no SOF marker")
        if self.width == 0 or self.height == 0:
            raise _BadImage("empty image")

    @property
    def color_space(self) -> str:
        """libjpeg's guess (default_decompress_parms)."""
        nc = len(self.comps)
        if nc == 1:
            return "gray"
        if nc == 3:
            if self.jfif:
                return "ycc"
            if self.adobe is not None:
                return "rgb" if self.adobe == 0 else "ycc"
            ids = tuple(c[0] for c in self.comps)
            return "rgb" if ids == (82, 71, 66) else "ycc"
        if nc == 4:
            if self.adobe is not None:
                return "cmyk" if self.adobe == 0 else "ycck"
            return "cmyk"
        return "unknown"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _jpeg_geometry(hdr: _JpegHeader, ratio: int) -> list[tuple[int, int, int, int]]:
    """Per component: (h_expand, v_expand, downsampled width, downsampled height) under
    libjpeg-turbo's DCT scaling, which scales chroma up by IDCT where it can."""
    maxh = max(c[1] for c in hdr.comps)
    maxv = max(c[2] for c in hdr.comps)
    mins = 8 // ratio
    out = []
    for _, h, v in hdr.comps:
        ss = mins
        while ss < 8 and (maxh * mins) % (h * ss * 2) == 0 and (maxv * mins) % (v * ss * 2) == 0:
            ss *= 2
        he, ve = maxh * mins // (h * ss), maxv * mins // (v * ss)
        out.append((he, ve, _ceil_div(hdr.width * h * ss, maxh * 8),
                    _ceil_div(hdr.height * v * ss, maxv * 8)))
    return out


def _fancy_h2v1(p: np.ndarray) -> np.ndarray:
    """libjpeg-turbo's h2v1_fancy_upsample: 3/4 nearer + 1/4 further, biases 1 and 2."""
    c = p.astype(np.int32)
    left = np.concatenate([c[:, :1], c[:, :-1]], axis=1)
    right = np.concatenate([c[:, 1:], c[:, -1:]], axis=1)
    even, odd = (3 * c + left + 1) >> 2, (3 * c + right + 2) >> 2
    even[:, 0], odd[:, -1] = c[:, 0], c[:, -1]
    return np.stack([even, odd], axis=2).reshape(c.shape[0], -1)


def _fancy_v(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column sums 3 * nearer row + further row for the upper and lower output rows."""
    c = p.astype(np.int32)
    up = np.concatenate([c[:1], c[:-1]], axis=0)
    down = np.concatenate([c[1:], c[-1:]], axis=0)
    return 3 * c + up, 3 * c + down


def _fancy_h1v2(p: np.ndarray) -> np.ndarray:
    upper, lower = _fancy_v(p)
    return np.stack([(upper + 1) >> 2, (lower + 2) >> 2], axis=1).reshape(-1, p.shape[1])


def _fancy_h2v2(p: np.ndarray) -> np.ndarray:
    """libjpeg-turbo's h2v2_fancy_upsample (9/16, 3/16, 3/16, 1/16 with biases 8 and 7)."""
    rows = []
    for s in _fancy_v(p):
        left = np.concatenate([s[:, :1], s[:, :-1]], axis=1)
        right = np.concatenate([s[:, 1:], s[:, -1:]], axis=1)
        even, odd = (3 * s + left + 8) >> 4, (3 * s + right + 7) >> 4
        even[:, 0], odd[:, -1] = (4 * s[:, 0] + 8) >> 4, (4 * s[:, -1] + 7) >> 4
        rows.append(np.stack([even, odd], axis=2).reshape(s.shape[0], -1))
    return np.stack(rows, axis=1).reshape(-1, rows[0].shape[1])


def _upsample(p: np.ndarray, he: int, ve: int, fancy: bool) -> np.ndarray:
    """One component plane to full size as libjpeg-turbo's upsampler picks."""
    if he == 1 and ve == 1:
        return p
    w = p.shape[1]
    if fancy and he == 2 and ve == 1 and w > 2:
        return _fancy_h2v1(p)
    if fancy and he == 1 and ve == 2:
        return _fancy_h1v2(p)
    if fancy and he == 2 and ve == 2 and w > 2:
        return _fancy_h2v2(p)
    return np.repeat(np.repeat(p, ve, axis=0), he, axis=1)


def _ycc_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """libjpeg's build_ycc_rgb_table (16-bit fixed point)."""
    x = np.arange(256, dtype=np.int64) - 128
    half = 1 << 15

    def fix(v: float) -> int:
        return int(v * 65536 + 0.5)

    return ((fix(1.40200) * x + half) >> 16, (fix(1.77200) * x + half) >> 16,
            -fix(0.71414) * x, -fix(0.34414) * x + half)


_YCC = _ycc_tables()


def _ycc_to_rgb(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    cr_r, cb_b, cr_g, cb_g = _YCC
    yi = y.astype(np.int64)
    r = yi + cr_r[cr]
    g = yi + ((cb_g[cb] + cr_g[cr]) >> 16)
    b = yi + cb_b[cb]
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(_U8)


def _rgb_to_gray_jpeg(rgb: np.ndarray) -> np.ndarray:
    """libjpeg's rgb_gray_convert."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    out = (r * int(0.29900 * 65536 + 0.5) + g * int(0.58700 * 65536 + 0.5)
           + b * int(0.11400 * 65536 + 0.5) + (1 << 15)) >> 16
    return out.astype(_U8)


def _pillow() -> Any:
    try:
        from PIL import Image, ImageFile
    except ImportError:
        return None
    return Image, ImageFile


def _pil_planes(data: bytes, hdr: _JpegHeader, ratio: int, fast: bool, mode: str,
                raw: bool) -> np.ndarray:
    """libjpeg's output through Pillow: ``fast`` IFAST IDCT with replicating upsampling
    (else ISLOW with fancy upsampling); ``raw``: component planes without colour conversion
    (mode "YCbCr" for three components, "L" for one), else ``mode``'s conversion."""
    import io

    Image, _ = _pillow()
    try:
        im = Image.open(io.BytesIO(data))
        if im.format not in ("JPEG", "MPO"):
            raise _BadImage("not a JPEG")
        if ratio > 1 or raw or mode != im.mode:
            want = mode if not raw else ("YCbCr" if len(hdr.comps) == 3 else "L")
            size = (_ceil_div(im.size[0], ratio), _ceil_div(im.size[1], ratio))
            if raw and len(hdr.comps) == 3:
                # claim YCbCr so that libjpeg passes the stored components through
                d, e, o, _ = im.tile[0]
                im.tile = [type(im.tile[0])(d, e, o, ("YCbCr", "YCbCr"))]
                im._mode = "YCbCr"
            elif want != im.mode:
                if (im.mode, want) not in (("RGB", "L"), ("RGB", "YCbCr")):
                    raise UnimplementedError(f"JPEG: no {want} output from a {im.mode} image")
                d, e, o, _ = im.tile[0]
                im.tile = [type(im.tile[0])(d, e, o, (want, ""))]
                im._mode = want
            if ratio > 1:
                d, e, o, a = im.tile[0]
                e = (0, 0, size[0], size[1])
                im.tile = [type(im.tile[0])(d, e, o, a)]
                im._size = size
        im.decoderconfig = (ratio, 1 if fast else 0)
        im.load()
        return np.asarray(im)
    except (OSError, SyntaxError, ValueError) as e:
        raise _BadImage(f"Invalid JPEG data: {e}") from None


def _jpeg_decode(data: bytes, channels: int, ratio: int = 1, fancy: bool = True,
                 fast: bool = True, crop: tuple[int, int, int, int] | None = None,
                 op: str = "DecodeJpeg") -> np.ndarray:
    """TF's jpeg::Uncompress: ``channels`` 0 (the file's, CMYK as RGB), 1 or 3; ``fast``
    IFAST (TF's default and INTEGER_FAST) else ISLOW (INTEGER_ACCURATE); ``crop`` (y, x,
    h, w) in output pixels."""
    hdr = _JpegHeader(data)
    if _pillow() is None:
        raise UnimplementedError(
            f"{op}: decoding a JPEG needs Pillow, which is not installed (pip install pillow)")
    space = hdr.color_space
    nc = len(hdr.comps)
    if channels == 0:
        channels = min(nc, 3)
    out_w, out_h = _ceil_div(hdr.width, ratio), _ceil_div(hdr.height, ratio)
    if crop is not None:
        cy, cx, ch, cw = crop
        if not (cw > 0 and ch > 0 and cx >= 0 and cy >= 0 and cy + ch <= out_h
                and cx + cw <= out_w):
            raise _BadImage("Invalid crop window")
    if out_w * out_h * nc >= 1 << 29:
        raise _BadImage("Image too large")
    if space in ("cmyk", "ycck"):
        return _jpeg_cmyk(data, hdr, channels, ratio, fancy, fast, crop)
    if nc not in (1, 3) or space == "unknown":
        raise _BadImage("unsupported JPEG colour space")
    geo = _jpeg_geometry(hdr, ratio)
    mins = 8 // ratio
    do_fancy = fancy and mins > 1
    planes_out = _pil_planes(data, hdr, ratio, fast, "", raw=True)
    if nc == 1:
        planes_out = planes_out.reshape(out_h, out_w, 1)
    # only component 0 is needed for gray output of YCbCr (libjpeg skips the others)
    use = [0] if (channels == 1 and space in ("ycc", "gray")) else list(range(nc))
    x0, x1 = 0, out_w
    if crop is not None:
        align = 8 * max(c[1] for c in hdr.comps) // ratio
        x0 = cx // align * align
        x1 = cx + cw
    native = None
    if not fast and ratio == 1 and (not do_fancy or crop is not None) and all(
            geo[ci][:2] in ((1, 1), (2, 2)) for ci in use) and any(
            geo[ci][:2] == (2, 2) for ci in use):
        # ISLOW planes stored at half size in both directions come out of a half-scale
        # decode unscaled (libjpeg scales them by IDCT, with the same 8x8 ISLOW IDCT)
        native = _pil_planes(data, hdr, 2, fast, "", raw=True)
    planes = []
    for ci in use:
        he, ve, dw, dh = geo[ci]
        full = planes_out[..., ci]
        if (he, ve) != (1, 1) and not fast and native is None:
            # libjpeg already upsampled, fancily where its rules say so: TF's values unless
            # TF replicates instead, or treats a crop window's edge as the image's
            libjpeg_fancy = mins > 1 and ((he, ve) == (1, 2) or (
                (he, ve) in ((2, 1), (2, 2)) and dw > 2))
            cut = crop is not None and he == 2 and (x0 > 0 or x1 < out_w)
            if libjpeg_fancy and (not do_fancy or cut):
                raise UnimplementedError(
                    "JPEG: dct_method INTEGER_ACCURATE with "
                    + ("a crop window" if do_fancy else "fancy_upscaling=False")
                    + f" on {he}x{ve} chroma subsampling cannot be decoded exactly with "
                    "Pillow (use the default dct_method)")
            p = full
        else:
            if (he, ve) == (1, 1):
                p = full
            elif native is not None:
                p = native[..., ci][:dh, :dw]
            else:
                p = full[::ve, ::he][:dh, :dw]
            if crop is not None and (he, ve) != (1, 1):
                # libjpeg-turbo's crop treats the aligned window's edges as image edges
                p = p[:, x0 // he:_ceil_div(x1, he)]
                p = _upsample(p, he, ve, do_fancy)[:out_h, :x1 - x0]
                p = np.pad(p, ((0, 0), (x0, out_w - x1)))
            else:
                p = _upsample(p, he, ve, do_fancy)[:out_h, :out_w]
        planes.append(p)
    if channels == 1:
        img = planes[0] if space in ("ycc", "gray") else _rgb_to_gray_jpeg(
            np.stack(planes, axis=-1))
        img = img[..., None]
    elif space == "gray":
        img = np.repeat(planes[0][..., None], 3, axis=2)
    elif space == "rgb":
        img = np.stack(planes, axis=-1).astype(_U8)
    else:
        img = _ycc_to_rgb(*planes)
    if crop is not None:
        img = img[cy:cy + ch, cx:cx + cw]
    return np.ascontiguousarray(img, dtype=_U8)


def _jpeg_cmyk(data: bytes, hdr: _JpegHeader, channels: int, ratio: int, fancy: bool,
               fast: bool, crop: tuple[int, int, int, int] | None) -> np.ndarray:
    """CMYK/YCCK JPEGs: libjpeg's CMYK output, then TF's own conversion to RGB. Pillow's
    two set-ups (IFAST with replication, ISLOW with fancy upsampling) are all there is here,
    so subsampled components under another combination (or cut by a crop window) raise."""
    if channels == 1:
        raise _BadImage("gray output of a CMYK JPEG")  # libjpeg: bogus colour conversion
    mins = 8 // ratio
    for he, ve, dw, _ in _jpeg_geometry(hdr, ratio):
        libjpeg_fancy = mins > 1 and ((he, ve) == (1, 2) or (
            (he, ve) in ((2, 1), (2, 2)) and dw > 2))
        if libjpeg_fancy and (fancy != (not fast) or crop is not None):
            raise UnimplementedError(
                "JPEG: a chroma-subsampled CMYK image with these dct_method / "
                "fancy_upscaling / crop settings cannot be decoded exactly with Pillow")
    arr = _pil_planes(data, hdr, ratio, fast, "CMYK", raw=False).astype(np.int64)
    # Pillow reads CMYK JPEGs as Adobe-inverted ("CMYK;I"): undo that to libjpeg's values
    arr = 255 - arr
    c, m, y, k = (arr[..., i] for i in range(4))
    if hdr.adobe is not None:
        rgb = np.stack([k * c // 255, k * m // 255, k * y // 255], axis=-1)
    else:
        rgb = np.stack([(255 - k) * (255 - c) // 255, (255 - k) * (255 - m) // 255,
                        (255 - k) * (255 - y) // 255], axis=-1)
    rgb = rgb.astype(_U8)
    if crop is not None:
        cy, cx, ch, cw = crop
        rgb = rgb[cy:cy + ch, cx:cx + cw]
    return np.ascontiguousarray(rgb)


# --- GIF ----------------------------------------------------------------------------------

class _GifEOF(_BadImage):
    """The LZW end code came before the frame's last pixel (giflib's EOF_TOO_SOON)."""


def _gif_blocks(data: bytes, pos: int) -> tuple[bytes, int, bool]:
    """Sub-blocks from ``pos`` up to the empty one: (payload, position after it, complete)."""
    out = bytearray()
    n = len(data)
    while pos < n:
        size = data[pos]
        pos += 1
        if size == 0:
            return bytes(out), pos, True
        out += data[pos:pos + size]
        pos += size
    return bytes(out), min(pos, n), False


def _gif_lzw(code: bytes, min_bits: int, npix: int) -> bytes:
    """giflib's LZW decoding of ``npix`` indices (codes least significant bit first)."""
    if not 1 <= min_bits <= 11:
        raise _BadImage("invalid LZW code size")
    clear, eoi = 1 << min_bits, (1 << min_bits) + 1
    table: list[bytes] = [bytes([i]) for i in range(clear)] + [b"", b""]
    bits, out = min_bits + 1, bytearray()
    prev: bytes | None = None
    acc = nacc = pos = 0
    n = len(code)
    while len(out) < npix:
        while nacc < bits:
            if pos >= n:
                raise _BadImage("image data ends before its last pixel")
            acc |= code[pos] << nacc
            pos += 1
            nacc += 8
        c = acc & ((1 << bits) - 1)
        acc >>= bits
        nacc -= bits
        if c == clear:
            del table[clear + 2:]
            bits, prev = min_bits + 1, None
            continue
        if c == eoi:
            raise _GifEOF("LZW end code before the last pixel")
        if c < len(table) and c not in (clear, eoi):
            entry = table[c]
            if prev is not None and len(table) < 4096:
                table.append(prev + entry[:1])
        elif c == len(table) and prev is not None:
            entry = prev + prev[:1]
            if len(table) < 4096:
                table.append(entry)
        else:
            raise _BadImage("invalid LZW code")
        out += entry
        prev = entry
        if len(table) == (1 << bits) and bits < 12:
            bits += 1
    return bytes(out[:npix])


def _gif_frames(data: bytes, first_only: bool) -> np.ndarray:
    """TF's gif::Decode: frames [n, h, w, 3] uint8 composed on the previous frame."""
    if len(data) < 13 or not data.startswith(b"GIF"):
        raise _BadImage("failed to open gif file: Data is not in GIF format")
    flags = data[10]
    pos = 13
    gmap = None
    if flags & 0x80:
        size = 1 << ((flags & 7) + 1)
        if pos + 3 * size > len(data):
            raise _BadImage("failed to open gif file: Failed to read from given file")
        gmap = np.frombuffer(data[pos:pos + 3 * size], _U8).reshape(-1, 3)
        pos += 3 * size
    frames: list[tuple] = []  # (left, top, w, h, colour map, raster, transparent index)
    ext_gcb: int | None = None
    ext_seen = False
    try:
        while True:
            if pos >= len(data):
                raise _BadImage("failed to slurp gif file: Failed to read from given file")
            kind = data[pos]
            pos += 1
            if kind == 0x2C:
                if pos + 9 > len(data):
                    raise _BadImage("failed to slurp gif file: Failed to read from given file")
                left, top, w, h, f = struct.unpack("<HHHHB", data[pos:pos + 9])
                pos += 9
                cmap = gmap
                if f & 0x80:
                    size = 1 << ((f & 7) + 1)
                    if pos + 3 * size > len(data):
                        raise _BadImage("failed to slurp gif file: Failed to read")
                    cmap = np.frombuffer(data[pos:pos + 3 * size], _U8).reshape(-1, 3)
                    pos += 3 * size
                frames.append([left, top, w, h, cmap, None, ext_gcb if ext_seen else None])
                ext_gcb, ext_seen = None, False
                if pos >= len(data):
                    raise _BadImage("failed to slurp gif file: Failed to read")
                min_bits = data[pos]
                pos += 1
                if w == 0 or h == 0:
                    raise _BadImage("failed to slurp gif file: Image is defective")
                code, end, _ = _gif_blocks(data, pos)
                raster = _gif_lzw(code, min_bits, w * h)
                img = np.frombuffer(raster, _U8).reshape(h, w)
                if f & 0x40:  # interlaced: rows 0,8,.. then 4,12,.. then 2,6,.. then 1,3,..
                    order = [r for start, step in ((0, 8), (4, 8), (2, 4), (1, 2))
                             for r in range(start, h, step)]
                    deint = np.empty_like(img)
                    deint[order] = img
                    img = deint
                frames[-1][5] = img
                pos = end
            elif kind == 0x21:
                if pos >= len(data):
                    raise _BadImage("failed to slurp gif file: Failed to read")
                func = data[pos]
                pos += 1
                first = True
                while True:
                    if pos >= len(data):
                        raise _BadImage("failed to slurp gif file: Failed to read")
                    size = data[pos]
                    pos += 1
                    if size == 0:
                        break
                    block = data[pos:pos + size]
                    pos += size
                    if first and func == 0xF9 and not ext_seen:
                        ext_seen = True
                        # a Graphics Control block of 4 bytes: its transparent index
                        ext_gcb = block[3] if len(block) == 4 and block[0] & 1 else None
                    first = False
            elif kind == 0x3B:
                break
            else:
                raise _BadImage("failed to slurp gif file: Wrong record type detected")
    except _GifEOF as e:
        raise _BadImage(f"failed to slurp gif file: {e}") from None
    except _BadImage:
        # TF keeps going when a complete frame came before the trouble
        if not frames or frames[-1][5] is None:
            raise
    if not frames:
        raise _BadImage("gif file does not contain any image")
    width = max(f[2] for f in frames)
    height = max(f[3] for f in frames)
    n = 1 if first_only else len(frames)
    out = np.zeros((n, height, width, 3), _U8)
    for k in range(n):
        left, top, w, h, cmap, img, trans = frames[k]
        if k > 0:
            out[k] = out[k - 1]
        if cmap is None:
            raise _BadImage(f"missing color map for frame {k}")
        x0, y0 = left, top
        x1, y1 = min(left + w, width), min(top + h, height)
        if x1 <= x0 or y1 <= y0:
            continue
        idx = img[:y1 - y0, :x1 - x0]
        keep = idx == trans if trans is not None else np.zeros(idx.shape, bool)
        bad = (~keep) & (idx >= len(cmap))
        if bad.any():
            raise _BadImage(f"found color index {int(idx[bad][0])} outside of color map "
                            f"range {len(cmap)}")
        region = out[k, y0:y1, x0:x1]
        colours = cmap[np.minimum(idx, len(cmap) - 1)]
        region[~keep] = colours[~keep]
    return out


# --- BMP ------------------------------------------------------------------------------

def _bmp_decode(data: bytes, channels: int) -> np.ndarray:
    """TF's own BMP decoder (no palettes, no compression)."""
    if channels == 1:
        raise InvalidArgumentError("`channels` must be 0, 3 or 4 for BMP, but got 1")
    if len(data) < 32:
        raise InvalidArgumentError(
            "Incomplete bmp content, requires at least 32 bytes to find the header size, "
            f"width, height, and bpp, got {len(data)} bytes")
    header = struct.unpack_from("<i", data, 10)[0]
    width, height = struct.unpack_from("<ii", data, 18)
    bpp = struct.unpack_from("<h", data, 28)[0]
    img_ch = int(bpp / 8) if bpp >= 0 else -int(-bpp / 8)
    if img_ch not in (1, 3, 4):
        raise InvalidArgumentError(
            f"Number of channels inherent in the image must be 1, 3 or 4, was {img_ch}")
    want = channels or img_ch
    if width <= 0:
        raise InvalidArgumentError("Width must be positive")
    if height == 0:
        raise InvalidArgumentError("Height must be nonzero")
    if header < 0:
        raise InvalidArgumentError("header size must be nonnegative")
    if width * abs(height) >= ((1 << 31) - 1) // 8:
        raise InvalidArgumentError("Total possible pixel bytes must be less than 2^30")
    h = abs(height)
    row = (img_ch * width + 3) // 4 * 4
    diff = len(data) - header - row * h
    if diff != 0:
        raise InvalidArgumentError(
            f"Input size should match (header_size + row_size * abs_height) but they differ "
            f"by {diff}")
    pix = np.frombuffer(data, _U8, count=row * h, offset=header).reshape(h, row)
    pix = pix[:, :width * img_ch].reshape(h, width, img_ch)
    if height > 0:
        pix = pix[::-1]  # bottom-up rows
    if img_ch == 1:
        out = np.repeat(pix, 3, axis=2) if want in (3, 4) else pix
    else:
        out = pix[..., [2, 1, 0]]
    if want == 4:
        alpha = pix[..., 3:4] if img_ch == 4 else np.full((h, width, 1), 255, _U8)
        out = np.concatenate([out, alpha], axis=2)
    return np.ascontiguousarray(out)


# --- the decode ops -------------------------------------------------------------------

def _sniff(data: bytes) -> str:
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(_PNG_MAGIC):
        return "png"
    if data.startswith(b"GIF8"):
        return "gif"
    if data.startswith(b"BM"):
        return "bmp"
    if data.startswith(b"RIFF") and len(data) > 12 and data[8:12] == b"WEBP":
        return "webp"
    if data.startswith(b"\xff\x0a") or data.startswith(b"\0\0\0\x0cJXL \r\n\x87\n"):
        return "jxl"
    return "unknown"


def _jpeg_flags(ctx: KernelContext) -> tuple[int, bool, bool]:
    """ratio, fancy upscaling, IFAST (TF's default) from DecodeJpeg's attrs."""
    a = ctx.attrs
    ratio = int(a["ratio"])
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"ratio must be 1, 2, 4, or 8, got {ratio}")
    dct = a["dct_method"]
    if dct not in ("", "INTEGER_FAST", "INTEGER_ACCURATE"):
        raise InvalidArgumentError(
            "dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}")
    return ratio, bool(a["fancy_upscaling"]), dct != "INTEGER_ACCURATE"


def _to_dtype(img: np.ndarray, dtype: np.dtype, from16: bool = False) -> np.ndarray:
    """TF's casts of decoded uint8 (or PNG uint16) samples to the wanted dtype."""
    if dtype == _U8:
        return img
    if dtype == _U16:
        return img.astype(_U16) * np.uint16(256)
    scale = np.float32(1.0 / (65535 if from16 else 255))
    return img.astype(_F32) * scale


def _decode_image(ctx: KernelContext, contents: np.ndarray, crop: np.ndarray | None = None
                  ) -> np.ndarray:
    """DecodeImageV2Op: the format from the magic bytes, the op decides the shape."""
    op, a = ctx.op, ctx.attrs
    jpeg_args = (1, True, True)
    if op in ("DecodeJpeg", "DecodeAndCropJpeg"):
        jpeg_args = _jpeg_flags(ctx)
    dtype = _U8
    if op in ("DecodePng", "DecodeImage"):
        dtype = np.dtype(a["dtype"])
        allowed = (_U8, _U16) if op == "DecodePng" else (_U8, _U16, _F32)
        if dtype not in allowed:
            raise InvalidArgumentError(f"`dtype` for `{op}` must be "
                                       + ("unit8, unit16" if op == "DecodePng"
                                          else "unit8, unit16, float") + f" but got: {dtype}")
    expand = bool(a.get("expand_animations", True)) if op == "DecodeImage" else True
    channels = 3 if op == "DecodeGif" else int(a["channels"])
    if channels not in (0, 1, 3, 4):
        raise InvalidArgumentError(f"`channels` must be 0, 1, 3 or 4 but got {channels}")
    data = _contents(contents)
    if not data:
        raise InvalidArgumentError("Input is empty.")
    fmt = _sniff(data)
    four_d = op == "DecodeGif"
    try:
        if fmt == "jpeg":
            if channels not in (0, 1, 3):
                raise InvalidArgumentError("JPEG does not support 4 channels")
            window = None
            if op == "DecodeAndCropJpeg":
                if crop.ndim != 1:
                    raise InvalidArgumentError(
                        f"crop_window must be 1-D, got shape {_fmt(crop.shape)}")
                if crop.shape[0] != 4:
                    raise InvalidArgumentError(
                        f"crop_size must have four elements {_fmt(crop.shape)}")
                window = tuple(int(v) for v in crop)
            elif op == "DecodeBmp":
                raise InvalidArgumentError(
                    "Trying to decode JPEG format using DecodeBmp op. Use `decode_jpeg` or "
                    "`decode_image` instead.")
            ratio, fancy, fast = jpeg_args
            try:
                img = _jpeg_decode(data, channels, ratio, fancy, fast, window, op)
            except _BadImage:
                if bool(a.get("try_recover_truncated", False)) or float(
                        a.get("acceptable_fraction", 1.0)) < 1.0:
                    raise UnimplementedError(
                        f"{op}: recovering a damaged or truncated JPEG "
                        "(try_recover_truncated, acceptable_fraction) is not supported"
                    ) from None
                raise
            img = _to_dtype(img, dtype)
        elif fmt == "png":
            png16 = dtype != _U8
            img = _png_decode(data, channels, png16)
            if op == "DecodeBmp":
                raise InvalidArgumentError(
                    "Trying to decode PNG format using DecodeBmp op. Use `decode_png` or "
                    "`decode_image` instead.")
            if op == "DecodeAndCropJpeg":
                raise InvalidArgumentError(
                    "DecodeAndCropJpeg operation can run on JPEG only, but detected PNG.")
            if dtype == _F32:
                img = img.astype(_F32) * np.float32(1.0 / 65535)
        elif fmt == "gif":
            if channels not in (0, 3):
                raise InvalidArgumentError(f"channels must be 0 or 3 for GIF, got {channels}")
            if op == "DecodeBmp":
                raise InvalidArgumentError(
                    "Trying to decode GIF format using DecodeBmp op. Use `decode_gif` or "
                    "`decode_image` instead.")
            if op == "DecodeAndCropJpeg":
                raise InvalidArgumentError(
                    "DecodeAndCropJpeg operation can run on JPEG only, but detected GIF.")
            frames = _gif_frames(data, first_only=not expand)
            if op in ("DecodePng", "DecodeJpeg"):
                if frames.shape[0] != 1:
                    raise InvalidArgumentError(
                        f"Got {frames.shape[0]} frames, but animated gifs can only be decoded "
                        "by tf.io.decode_gif or tf.io.decode_image")
                frames = frames[0]
            elif op == "DecodeImage" and not expand:
                frames = frames[0]
            return _to_dtype(frames, dtype)
        elif fmt == "bmp":
            if op not in ("DecodeBmp", "DecodeImage"):
                if channels == 1:
                    raise InvalidArgumentError(
                        "`channels` must be 0, 3 or 4 for BMP, but got 1")
                if op == "DecodeAndCropJpeg":
                    raise InvalidArgumentError(
                        "DecodeAndCropJpeg operation can run on JPEG only, but detected BMP.")
                raise InvalidArgumentError(
                    "Trying to decode BMP format using a wrong op. Use `decode_bmp` or "
                    f"`decode_image` instead. Op used: {op}")
            img = _to_dtype(_bmp_decode(data, channels), dtype)
        elif fmt in ("webp", "jxl"):
            raise UnimplementedError(
                f"{op}: {'WebP' if fmt == 'webp' else 'JPEG XL'} images are not supported")
        else:
            raise InvalidArgumentError(
                "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP "
                "required.")
    except _BadImage as e:
        name = {"jpeg": "jpeg::Uncompress failed. Invalid JPEG data or crop window.",
                "png": f"Invalid PNG data, size {len(data)}",
                "gif": f"Invalid GIF data (size {len(data)}), {e}"}.get(fmt, str(e))
        raise InvalidArgumentError(name) from None
    return img[None] if four_d else img


@kernel("DecodeJpeg", "DecodePng", "DecodeGif", "DecodeBmp", "DecodeImage")
def decode_image(ctx: KernelContext, contents: np.ndarray) -> np.ndarray:
    return _decode_image(ctx, contents)


@kernel("DecodeAndCropJpeg")
def decode_and_crop_jpeg(ctx: KernelContext, contents: np.ndarray, crop_window: np.ndarray
                         ) -> np.ndarray:
    return _decode_image(ctx, contents, crop_window)


@kernel("ExtractJpegShape")
def extract_jpeg_shape(ctx: KernelContext, contents: np.ndarray) -> np.ndarray:
    if contents.ndim != 0:
        raise InvalidArgumentError(
            f"contents must be scalar, got shape {_fmt(contents.shape)}")
    data = _contents(contents)
    try:
        hdr = _JpegHeader(data)
    except _BadImage:
        raise InvalidArgumentError(f"Invalid JPEG data, size {len(data)}") from None
    comps = {"gray": 1, "ycc": 3, "rgb": 3, "cmyk": 4, "ycck": 4}.get(hdr.color_space,
                                                                    len(hdr.comps))
    return np.array([hdr.height, hdr.width, comps], dtype=ctx.attrs["output_type"])


# --- JPEG encoding --------------------------------------------------------------------

def _jpeg_encode(img: np.ndarray, fmt: str, quality: int, progressive: bool = False,
                 optimize: bool = False, chroma_downsampling: bool = True,
                 density_unit: int = 1, x_density: int = 300, y_density: int = 300,
                 xmp: bytes = b"", op: str = "EncodeJpeg") -> bytes:
    """libjpeg-turbo through Pillow, set up as TF's jpeg::Compress (byte-identical)."""
    import io

    if img.shape[0] == 0 or img.shape[1] == 0:
        raise InternalError("JPEG encoding failed")
    pil = _pillow()
    if pil is None:
        raise UnimplementedError(
            f"{op}: encoding a JPEG needs Pillow, which is not installed (pip install pillow)")
    image_mod = pil[0]
    mode = "L" if fmt == "grayscale" else "RGB"
    arr = np.ascontiguousarray(img[..., 0] if mode == "L" else img, dtype=_U8)
    im = image_mod.fromarray(arr, mode)
    kw: dict[str, Any] = dict(quality=max(quality, 1), progressive=progressive,
                              optimize=optimize, dpi=(x_density, y_density))
    if not chroma_downsampling:
        kw["subsampling"] = 0
    if xmp:
        kw["xmp"] = xmp
    buf = io.BytesIO()
    try:
        im.save(buf, "JPEG", **kw)
    except (OSError, ValueError) as e:
        raise InternalError(f"JPEG encoding failed: {e}") from None
    out = bytearray(buf.getvalue())
    # the JFIF APP0 segment follows SOI: units at byte 13, then the two densities
    if out[2:4] == b"\xff\xe0" and out[6:11] == b"JFIF\0":
        out[13] = density_unit
        out[14:18] = struct.pack(">HH", x_density & 0xFFFF, y_density & 0xFFFF)
    return bytes(out)


def _encode_format(image: np.ndarray, fmt: str) -> str:
    if image.ndim != 3:
        raise InvalidArgumentError(f"image must be 3-dimensional{_fmt(image.shape)}")
    if image.size >= (1 << 31) - 1:
        raise InvalidArgumentError("Cannot encode images with >= max int32 elements")
    c = image.shape[2]
    if fmt == "":
        if c not in (1, 3):
            raise InvalidArgumentError(f"image must have 1 or 3 channels, got {_fmt(image.shape)}")
        return "grayscale" if c == 1 else "rgb"
    want = 1 if fmt == "grayscale" else 3
    if c != want:
        raise InvalidArgumentError(f"format {fmt} expects {want} channels, got "
                                   f"{_fmt(image.shape)}")
    return fmt


@kernel("EncodeJpeg")
def encode_jpeg(ctx: KernelContext, image: np.ndarray) -> np.ndarray:
    a = ctx.attrs
    fmt = a["format"]
    if fmt not in ("", "grayscale", "rgb"):
        raise InvalidArgumentError(f"format must be '', grayscale or rgb, got {fmt}")
    quality = int(a["quality"])
    if not 0 <= quality <= 100:
        raise InvalidArgumentError(f"quality must be in [0,100], got {quality}")
    unit = a["density_unit"]
    if unit not in ("in", "cm"):
        raise InvalidArgumentError(f"density_unit must be 'in' or 'cm'{unit}")
    xmp = a["xmp_metadata"]
    fmt = _encode_format(image, fmt)
    out = _jpeg_encode(image, fmt, quality, bool(a["progressive"]), bool(a["optimize_size"]),
                       bool(a["chroma_downsampling"]), 1 if unit == "in" else 2,
                       int(a["x_density"]), int(a["y_density"]),
                       xmp.encode() if isinstance(xmp, str) else bytes(xmp), op=ctx.op)
    return np.array(out, dtype=object)


@kernel("EncodeJpegVariableQuality")
def encode_jpeg_variable_quality(ctx: KernelContext, images: np.ndarray, quality: np.ndarray
                                 ) -> np.ndarray:
    fmt = _encode_format(images, "") if images.ndim == 3 else None
    if images.ndim != 3:
        raise InvalidArgumentError(f"image must be 3-dimensional{_fmt(images.shape)}")
    if quality.ndim != 0:
        raise InvalidArgumentError(f"quality must be scalar: {_fmt(quality.shape)}")
    q = int(quality)
    if not 0 <= q <= 100:
        raise InvalidArgumentError(f"quality must be in [0,100], got {q}")
    return np.array(_jpeg_encode(images, fmt, q, op=ctx.op), dtype=object)


# --- WAV ------------------------------------------------------------------------------

@kernel("DecodeWav")
def decode_wav(ctx: KernelContext, contents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if contents.ndim != 0:
        raise InvalidArgumentError(
            f"contents must be scalar, got shape {_fmt(contents.shape)}")
    data = contents.item()
    data = data if isinstance(data, bytes) else str(data).encode()
    samples, nch, rate = _wav_read(data)
    want_ch = int(ctx.attrs["desired_channels"])
    want_n = int(ctx.attrs["desired_samples"])
    out_n = samples.shape[0] if want_n == -1 else want_n
    out_c = nch if want_ch == -1 else want_ch
    if out_n < 0 or out_c < 0:
        raise InvalidArgumentError(
            f"Dimension {min(out_n, out_c)} must be >= 0")
    out = np.zeros((out_n, out_c), _F32)
    n = min(out_n, samples.shape[0])
    if n and out_c:
        src = np.minimum(np.arange(out_c), nch - 1)
        out[:n] = samples[:n][:, src]
    return out, np.array(rate, dtype=np.int32)


_WAV_SKIP = {b"JUNK", b"bext", b"iXML", b"qlty", b"mext", b"levl", b"link", b"axml"}


def _wav_read(data: bytes) -> tuple[np.ndarray, int, int]:
    """TF's DecodeLin16WaveAsFloatVector: [samples, channels] float32, channels, rate."""
    pos = 0
    n = len(data)

    def take(k: int) -> bytes:
        nonlocal pos
        if pos + k > n:
            raise InvalidArgumentError("Data too short when trying to read string")
        out = data[pos:pos + k]
        pos += k
        return out

    def expect(text: bytes) -> None:
        got = take(len(text))
        if got != text:
            raise InvalidArgumentError(
                f"Header mismatch: Expected {text.decode()} but found "
                f"{got.decode('latin-1')}")

    expect(b"RIFF")
    take(4)
    expect(b"WAVE")
    chunk = take(4)
    while chunk != b"fmt ":
        if chunk not in _WAV_SKIP:
            raise InvalidArgumentError(f"Unexpected field {chunk.decode('latin-1')}")
        size = struct.unpack("<I", take(4))[0]
        take(size)
        chunk = take(4)
    fmt_size = struct.unpack("<I", take(4))[0]
    if fmt_size not in (16, 18):
        raise InvalidArgumentError(
            f"Bad format chunk size for WAV: Expected 16 or 18, but got{fmt_size}")
    audio_format, channels = struct.unpack("<HH", take(4))
    if audio_format != 1:
        raise InvalidArgumentError(
            f"Bad audio format for WAV: Expected 1 (PCM), but got{audio_format}")
    if channels < 1:
        raise InvalidArgumentError(
            f"Bad number of channels for WAV: Expected at least 1, but got {channels}")
    rate, byte_rate = struct.unpack("<II", take(8))
    block, bits = struct.unpack("<HH", take(4))
    if bits != 16:
        raise InvalidArgumentError(f"Can only read 16-bit WAV files, but received {bits}")
    if block != (bits * channels + 7) // 8:
        raise InvalidArgumentError(
            f"Bad bytes per sample in WAV header: Expected {(bits * channels + 7) // 8} but "
            f"got {block}")
    if byte_rate != (block * rate) & 0xFFFFFFFF:
        raise InvalidArgumentError(
            f"Bad bytes per second in WAV header: Expected {block * rate} but got "
            f"{byte_rate} (sample_rate={rate}, bytes_per_sample={block})")
    if fmt_size == 18:
        pos += 2
    found = None
    while pos < n:
        cid = take(4)
        size = struct.unpack("<I", take(4))[0]
        if size > 0x7FFFFFFF:
            raise InvalidArgumentError(
                f"WAV data chunk '{cid.decode('latin-1')}' is too large: {size} bytes, but "
                "the limit is 2147483647")
        if cid == b"data":
            if found is not None:
                raise InvalidArgumentError("More than one data chunk found in WAV")
            count = size // block
            nbytes = 2 * count * channels
            if pos + nbytes > n:
                raise InvalidArgumentError("Data too short when trying to read string")
            found = np.frombuffer(data, "<i2", count=count * channels, offset=pos)
            found = (found.astype(_F32) * np.float32(1.0 / 32768)).reshape(count, channels)
            pos += nbytes
        else:
            pos += size
    if found is None:
        raise InvalidArgumentError("No data chunk found in WAV")
    return found, channels, rate


@kernel("EncodeWav")
def encode_wav(ctx: KernelContext, audio: np.ndarray, sample_rate: np.ndarray) -> np.ndarray:
    if audio.ndim != 2:
        raise InvalidArgumentError(f"audio must be 2-dimensional{_fmt(audio.shape)}")
    if sample_rate.ndim != 0:
        raise InvalidArgumentError(
            f"Input sample_rate should be a scalar tensor, got {_fmt(sample_rate.shape)} "
            "instead.")
    return np.array(wav_bytes(audio, int(sample_rate)), dtype=object)


def wav_bytes(audio: np.ndarray, rate: int) -> bytes:
    """(frames, channels) ``audio`` as a 16-bit PCM WAV file at ``rate`` Hz, as EncodeWav
    and AudioSummary write it."""
    frames, channels = audio.shape
    if frames >= 1 << 31:
        raise InvalidArgumentError("audio length too large to encode")
    if channels >= 1 << 31:
        raise InvalidArgumentError("audio channels too large to encode")
    if rate <= 0 or rate > 0xFFFFFFFF:
        raise InvalidArgumentError(f"sample_rate must be in (0, 2^32), got: {rate}")
    if channels == 0 or channels > 0xFFFF:
        raise InvalidArgumentError(f"num_channels must be in (0, 2^16), got: {channels}")
    data_size = frames * channels * 2
    if 44 + data_size > 0xFFFFFFFF:
        raise InvalidArgumentError("Provided channels and frames cannot be encoded as a WAV.")
    with np.errstate(invalid="ignore", over="ignore"):
        x = audio.astype(_F32) * np.float32(32768)
        # roundf: half away from zero (x - trunc(x) is exact), then clamped to int16
        t = np.trunc(x)
        r = t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0)
        samples = np.nan_to_num(np.clip(r, -32768, 32767), nan=0.0).astype("<i2")
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + data_size, b"WAVE", b"fmt ", 16,
                         1, channels, rate, (rate * 2 * channels) & 0xFFFFFFFF, 2 * channels,
                         16, b"data", data_size)
    return header + samples.tobytes()
