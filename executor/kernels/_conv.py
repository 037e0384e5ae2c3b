"""Convolution and pooling on numpy arrays: geometry, plans and the fast paths.

Plain functions (no KernelContext), so that other kernels (the fused ops) can call them:
:func:`conv2d`, :func:`depthwise_conv2d`, :func:`max_pool` and :func:`avg_pool` take the
attrs as plain values and return an array of the input's dtype.

Most convolutions in real CNNs are small (a batch of a few 7x7 or 14x14 feature maps), where
the cost of a kernel is the number of numpy calls, not arithmetic. So every call first finds a
*plan* (cached per shapes and attrs: validation, geometry, the strategy and its index arrays
are computed once) and then runs a handful of numpy calls:

* a 1x1 convolution is one GEMM on a reshape of the input (strided: on a strided copy);
* a small KxK convolution gathers its windows with one ``take`` over the input's pixel rows
  (a precomputed index; padding reads a zero row appended to the input) and runs one GEMM:
  three calls whatever the filter size;
* a large KxK convolution with enough channels accumulates one GEMM per filter tap,
  ``x_shifted @ W[ky, kx]``, into a preallocated output, so no im2col matrix (9x the input
  for 3x3) is materialized; with few channels (a CNN's first layer, where the per-tap GEMMs
  would be too thin) it gathers the windows with one strided-view copy, a batch chunk at a
  time;
* depthwise convolutions and pooling gather the windows (small) or accumulate over the taps
  into ``out=`` buffers on strided views of the input (large), never copying per tap.

Output sizes and SAME padding follow TensorFlow's windowed-output rule: VALID gives
``(in - eff_k + stride) // stride`` (C++ truncating division), SAME gives ``ceil(in /
stride)`` with the total padding split so that the extra element goes after, EXPLICIT takes
``explicit_paddings`` (pairs per dimension, in data_format order). Average pooling divides by
the number of real (non-padding) elements of each window, as TensorFlow does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dfg.graphdef.errors import InvalidArgumentError

from . import _native

__all__ = ["conv2d", "depthwise_conv2d", "max_pool", "avg_pool"]

_HALF = np.dtype(np.float16)
# Spatial (h, w) and channel axes of the 4-D layouts.
AXES = {"NHWC": (1, 2, 3), "NCHW": (2, 3, 1)}

# Plans are cached per shapes and attrs (256 of each kind, least recently used first); a
# gather plan's index holds at most _GATHER_BYTES / (8 channels * 4 bytes) * 8 bytes = 1 MiB.
# Strategy thresholds (bytes of the gathered window matrix), measured with
# benchmarks/bench_kernels.py: below them one gather plus one GEMM (or reduction) beats a
# per-tap loop, whose numpy calls cost more than the extra copy.
_GATHER_BYTES = 4 << 20
_DEPTHWISE_GATHER_BYTES = 1 << 20
_POOL_GATHER_BYTES = 1 << 20
# The gather copies rows of C elements: with fewer channels, only for small matrices.
_GATHER_MIN_CHANNELS = 8
_GATHER_SMALL_BYTES = 64 << 10
# Per-tap GEMMs need this many input channels (their inner dimension) to run near BLAS speed.
_TAP_MIN_CHANNELS = 16
# Bound on the im2col matrix of one chunk: large batches are processed a few images at a time
# so the patch matrix neither exhausts memory nor falls out of cache needlessly.
PATCH_BYTES = 64 << 20
# On AVX-512 a float32 convolution from NATIVE_MIN_FLOPS on goes to the compiled direct
# convolution (_native.py) unless its windows do not overlap (1x1, patchify) and its output
# count is not a multiple of WIDE_OC. Before the wide tiles (conv.c: 6 pixels by 64
# channels) only skinny layers went (at most 64 outputs, or K = KH*KW*C <= 288: bench_cnn
# 0.73-0.87x, resnet_style 0.66-0.88x, U-Net 0.84-0.96x the numpy path's step, the Keras
# zoo's small maps even; without the floor one core of the direct kernel lost to BLAS's two
# there); C >= 64 with 128+ outputs ran 1.09-1.87x BLAS's time on 8-pixel blocks.
NATIVE_MIN_FLOPS = 5e6
# With 64 output channels or a multiple of them, the wide tiles take any such layer: the row
# kernel on large maps, the pixels of all rows as one product read in place
# (_native.flat_conv) on the others and for 1x1 windows; a weight slice per tile column,
# packed once, and the epilogue in registers.
# Full-size layers, 2 threads, GFLOP/s numpy path -> compiled (python benchmarks/
# bench_native_conv.py --full): VGG16 112x112x128 3x3 103 -> 272, 56x56x256 154 -> 278,
# 28x28x512 128 -> 237; InceptionV3 73x73x80 by 3x3x192 101 -> 293, 17x17x768 by 1x7x192 93
# -> 271; ResNet50 14x14x256 3x3 207 -> 265, 7x7x512 3x3 170 -> 250, 7x7x2048 by 1x1x512
# 187 -> 214, 14x14x1024 by 1x1x2048 stride 2 174 -> 252; 56x56 and 28x28 1x1 layers even
# (257-289 both), where the compiled kernel still saves the epilogue's pass over the output.
# Only 14x14x512 3x3 lost (236 -> 197). With overlapping windows any output count gains
# (tile columns of 64, then blocks of 16): InceptionV3's 35x35x64 by 3x3x96 131 -> 219,
# 35x35x96 by 3x3x96 120 -> 208, 17x17x160 by 1x7x160 169 -> 201; but a 1x1 layer of
# another output count stays with BLAS (35x35x192 by 1x1x48 219 against 173, 17x17x768 by
# 1x1x160 255 against 181).
WIDE_OC = 64
_F32 = np.dtype(np.float32)


# ----------------------------------------------------------------------------------------------
# Geometry


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype arithmetic runs in: float32 for float16, the dtype itself otherwise."""
    return np.dtype(np.float32) if dt == _HALF else dt


def check_format(fmt: str | None, allowed: tuple[str, ...] = ("NHWC", "NCHW")) -> str:
    fmt = fmt or "NHWC"
    if fmt not in allowed:
        raise InvalidArgumentError(
            f"unsupported data_format {fmt!r}: expected one of {', '.join(allowed)}")
    return fmt


def check_rank(x: np.ndarray, rank: int, what: str) -> None:
    if x.ndim != rank:
        raise InvalidArgumentError(
            f"{what} must be {rank}-dimensional, found shape {list(x.shape)}")


def nhw_c(vals: Any, fmt: str, name: str) -> tuple[int, int, int, int]:
    """A 4-entry attr (strides, ksize, ...) as (n, h, w, c) whatever the layout."""
    vals = [int(v) for v in (vals if vals is not None else [])]
    if len(vals) != 4:
        raise InvalidArgumentError(
            f"{name} must specify 4 dimensions, found {len(vals)}: {vals}")
    h, w, c = AXES[fmt]
    return vals[0], vals[h], vals[w], vals[c]


def explicit_pads(pads: Sequence[int], fmt: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from explicit_paddings, validated as TensorFlow does."""
    pads = [int(p) for p in pads]
    if len(pads) != 8:
        raise InvalidArgumentError(
            f"explicit_paddings must contain 8 values for EXPLICIT padding, found {len(pads)}")
    if any(p < 0 for p in pads):
        raise InvalidArgumentError(f"explicit_paddings must be nonnegative, found {pads}")
    h, w, c = AXES[fmt]
    if pads[0] or pads[1] or pads[2 * c] or pads[2 * c + 1]:
        raise InvalidArgumentError(
            f"explicit padding in the batch or depth dimension is not supported, found {pads}")
    return (pads[2 * h], pads[2 * h + 1]), (pads[2 * w], pads[2 * w + 1])


def check_padding(padding: Any, explicit: Sequence[int] | None,
                  fmt: str) -> tuple[str, Any]:
    """(padding, explicit pads or None), validated."""
    if padding not in ("SAME", "VALID", "EXPLICIT"):
        raise InvalidArgumentError(
            f"padding must be SAME, VALID or EXPLICIT, found {padding!r}")
    if padding == "EXPLICIT":
        return padding, explicit_pads(explicit or (), fmt)
    if explicit:
        raise InvalidArgumentError(
            "explicit_paddings must be empty when padding is not EXPLICIT, found "
            f"{list(explicit)}")
    return padding, None


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero), which TF's size formula relies on."""
    q = abs(a) // b
    return q if a >= 0 else -q


def window(size: int, k: int, dilation: int, stride: int, padding: str,
           explicit: tuple[int, int] | None) -> tuple[int, int]:
    """(output size, padding before) of one spatial dimension."""
    if stride <= 0:
        raise InvalidArgumentError(f"strides must be > 0, found {stride}")
    if dilation < 1:
        raise InvalidArgumentError(f"dilations must be >= 1, found {dilation}")
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        out, before = _trunc_div(size - eff + stride, stride), 0
    elif padding == "EXPLICIT":
        assert explicit is not None
        before = explicit[0]
        out = _trunc_div(size + explicit[0] + explicit[1] - eff + stride, stride)
    else:
        out = (size + stride - 1) // stride
        before = max(0, (out - 1) * stride + eff - size) // 2
    if out < 0:
        raise InvalidArgumentError(
            f"computed output size would be negative: {out} (input size {size}, effective "
            f"filter size {eff}, stride {stride})")
    return out, before


def tap_range(n_out: int, start: int, stride: int, size: int) -> tuple[int, int]:
    """Output positions [lo, hi) whose input index ``start + o*stride`` lies in [0, size)."""
    lo = max(0, -(start // stride))
    hi = min(n_out, (size - 1 - start) // stride + 1)
    return lo, max(lo, hi)


@dataclass(frozen=True)
class Geom:
    """Geometry of a 2-D windowed op on an NHWC tensor."""

    n: int
    h: int
    w: int
    c: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pt: int
    pl: int

    def taps(self) -> Iterator[tuple[int, int, tuple[int, int, int, int], slice, slice]]:
        """Per filter tap (i, j): output slices and the matching strided input slices."""
        for i in range(self.kh):
            r0 = i * self.dh - self.pt
            a, b = tap_range(self.oh, r0, self.sh, self.h)
            rows = slice(r0 + a * self.sh, r0 + (b - 1) * self.sh + 1, self.sh)
            for j in range(self.kw):
                c0 = j * self.dw - self.pl
                c, d = tap_range(self.ow, c0, self.sw, self.w)
                cols = slice(c0 + c * self.sw, c0 + (d - 1) * self.sw + 1, self.sw)
                yield i, j, (a, b, c, d), rows, cols

    @property
    def padded(self) -> bool:
        """Whether some window reads outside the input."""
        return (self.pt > 0 or self.pl > 0
                or (self.oh - 1) * self.sh + (self.kh - 1) * self.dh - self.pt >= self.h
                or (self.ow - 1) * self.sw + (self.kw - 1) * self.dw - self.pl >= self.w)


def geometry(x_shape: tuple[int, ...], fmt: str, kh: int, kw: int, strides: Any,
             dilations: Any, padding: Any, explicit: Sequence[int] | None) -> Geom:
    """Convolution geometry of NHWC ``x_shape`` from strides/dilations/padding attrs."""
    n, h, w, c = x_shape
    sn, sh, sw, sc = nhw_c(strides, fmt, "strides")
    if sn != 1 or sc != 1:
        raise InvalidArgumentError(
            f"strides in the batch and depth dimensions must be 1, found {sn} and {sc}")
    dn, dh, dw, dc = nhw_c(dilations or [1, 1, 1, 1], fmt, "dilations")
    if dn != 1 or dc != 1:
        raise InvalidArgumentError(
            f"dilations in the batch and depth dimensions must be 1, found {dn} and {dc}")
    padding, pads = check_padding(padding, explicit, fmt)
    oh, pt = window(h, kh, dh, sh, padding, pads[0] if pads else None)
    ow, pl = window(w, kw, dw, sw, padding, pads[1] if pads else None)
    return Geom(n, h, w, c, kh, kw, sh, sw, dh, dw, oh, ow, pt, pl)


def groups_of(in_depth: int, filter_depth: int) -> int:
    if filter_depth <= 0 or in_depth % filter_depth:
        raise InvalidArgumentError(
            f"input depth must be evenly divisible by filter depth: {in_depth} vs "
            f"{filter_depth}")
    return in_depth // filter_depth


def to_nhwc(x: np.ndarray, fmt: str) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if fmt == "NCHW" else x


def from_nhwc(x: np.ndarray, fmt: str) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if fmt == "NCHW" else x


def _key(v: Any) -> tuple:
    """An attr list as a hashable cache key (None as empty); the plan validates its values."""
    return tuple(v) if v is not None else ()


# ----------------------------------------------------------------------------------------------
# Window gathering


def _gather_index(g: Geom, tap_major: bool = False) -> tuple[np.ndarray, bool]:
    """Row indices into the (N*H*W [+1], C) pixel matrix of every window element.

    Shape (N*OH*OW*KH*KW,), in (n, oh, ow, kh, kw) order, or (kh, kw, n, oh, ow) if
    ``tap_major`` (reductions over the taps then run over contiguous (M, C) slabs); elements
    in the padding point to row N*H*W (a fill row the caller appends). Also returns whether
    any element does.
    """
    r = (np.arange(g.oh) * g.sh - g.pt)[:, None] + np.arange(g.kh) * g.dh   # (OH, KH)
    c = (np.arange(g.ow) * g.sw - g.pl)[:, None] + np.arange(g.kw) * g.dw   # (OW, KW)
    valid = (((r >= 0) & (r < g.h))[:, None, :, None]
             & ((c >= 0) & (c < g.w))[None, :, None, :])                     # (OH, OW, KH, KW)
    pix = r[:, None, :, None] * g.w + c[None, :, None, :]
    base = (np.arange(g.n) * (g.h * g.w))[:, None, None, None, None]
    fill = g.n * g.h * g.w
    idx = np.where(valid, base + pix, fill)
    if tap_major:
        idx = idx.transpose(3, 4, 0, 1, 2)
    idx = np.ascontiguousarray(idx).reshape(-1).astype(np.intp)
    idx.flags.writeable = False
    return idx, not bool(valid.all())


def _gather(x: np.ndarray, idx: np.ndarray, fill_row: bool, fill: Any) -> np.ndarray:
    """The (N*OH*OW*KH*KW, C) window elements of NHWC ``x``, padding read as ``fill``."""
    rows = x.reshape(-1, x.shape[-1])
    if fill_row:
        src = np.empty((rows.shape[0] + 1, rows.shape[1]), x.dtype)
        src[:-1] = rows
        src[-1] = fill
        rows = src
    return rows.take(idx, axis=0)


def _padded(x: np.ndarray, g: Geom, channel_major: bool) -> np.ndarray:
    """``x`` zero-padded just enough for every window read, as (N,Hp,Wp,C) or (C,N,Hp,Wp).

    This copy is the size of the input (small next to the patch matrix); with no padding in
    the NHWC layout the input itself is used.
    """
    hp = max(g.pt + g.h, (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1)
    wp = max(g.pl + g.w, (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1)
    src = x.transpose(3, 0, 1, 2) if channel_major else x
    if hp == g.h and wp == g.w:
        # No padding: NHWC windows are views of x itself; channel-major needs its copy.
        return np.ascontiguousarray(src) if channel_major else x
    xp = np.zeros((g.c, g.n, hp, wp) if channel_major else (g.n, hp, wp, g.c), x.dtype)
    xp[(slice(None),) * (2 if channel_major else 1)
       + (slice(g.pt, g.pt + g.h), slice(g.pl, g.pl + g.w))] = src
    return xp


def _tap_views(xp: np.ndarray, g: Geom) -> Iterator[tuple[int, int, np.ndarray]]:
    """Per filter tap (i, j), the (N, OH, OW, C) strided view of padded NHWC ``xp`` it reads."""
    # Rows/columns start at the tap's offset inside the padded input (its padding before
    # is exactly pt/pl, or the input itself when there is none).
    for i in range(g.kh):
        r0 = i * g.dh
        rows = slice(r0, r0 + (g.oh - 1) * g.sh + 1, g.sh)
        for j in range(g.kw):
            c0 = j * g.dw
            yield i, j, xp[:, rows, c0:c0 + (g.ow - 1) * g.sw + 1:g.sw]


def _channel_major(g: Geom) -> bool:
    # Copy along whichever axis gives the longer contiguous runs: with few channels (the
    # first layer of a CNN) runs along output columns beat C-wide ones (measured).
    return g.c < 8 or 8 * g.c <= g.ow


def patches(x: np.ndarray, g: Geom) -> tuple[np.ndarray, np.ndarray]:
    """im2col of NHWC ``x``: a (M, KH*KW*C) matrix and its (M, KH*KW, C) view, M = N*OH*OW.

    The matrix may be a transposed (Fortran-ordered) view, which BLAS consumes directly.
    Every window is gathered by one strided-view copy of the (padded) input.
    """
    m, k = g.n * g.oh * g.ow, g.kh * g.kw
    if g.kh == g.kw == 1 and not g.padded:
        # A 1x1 filter without padding reads each (strided) pixel once: no im2col at all.
        flat = np.ascontiguousarray(x[:, ::g.sh, ::g.sw][:, :g.oh, :g.ow]).reshape(m, g.c)
        return flat, flat.reshape(m, 1, g.c)
    cm = _channel_major(g)
    xp = _padded(x, g, cm)
    if cm:
        sc, sn, sh, sw = xp.strides
        windows = as_strided(xp, (g.kh, g.kw, g.c, g.n, g.oh, g.ow),
                             (sh * g.dh, sw * g.dw, sc, sn, sh * g.sh, sw * g.sw),
                             writeable=False)
        cols = np.ascontiguousarray(windows)
        return cols.reshape(k * g.c, m).T, cols.reshape(k, g.c, m).transpose(2, 0, 1)
    sn, sh, sw, sc = xp.strides
    windows = as_strided(xp, (g.n, g.oh, g.ow, g.kh, g.kw, g.c),
                         (sn, sh * g.sh, sw * g.sw, sh * g.dh, sw * g.dw, sc), writeable=False)
    cols = np.ascontiguousarray(windows)
    return cols.reshape(m, k * g.c), cols.reshape(m, k, g.c)


def batch_chunks(g: Geom, itemsize: int) -> list[tuple[int, int]]:
    per_image = g.oh * g.ow * g.kh * g.kw * g.c * itemsize
    step = max(1, PATCH_BYTES // max(per_image, 1))
    return [(n0, min(n0 + step, g.n)) for n0 in range(0, g.n, step)]


# ----------------------------------------------------------------------------------------------
# Conv2D


@dataclass(frozen=True)
class _ConvPlan:
    g: Geom
    oc: int
    groups: int
    # "empty" | "gemm" (1x1 unpadded) | "gather" | "taps" | "im2col" | "grouped"
    mode: str
    idx: np.ndarray | None = None
    fill_row: bool = False
    native: bool = False    # the compiled direct convolution pays (when it is built)
    # it pays for a _FusedConv2D, whose numpy path adds the epilogue's passes (True when
    # native is)
    native_fused: bool = False
    window: Any = None      # "depthwise": its DepthwiseConv2dNative plan (_WindowPlan)


def tiles_exactly(g: Geom) -> bool:
    """Whether the windows cover the input exactly once each: kernel == stride, no padding,
    no dilation, and the input a whole number of windows."""
    return (g.sh, g.sw) == (g.kh, g.kw) and g.dh == g.dw == 1 and g.pt == g.pl == 0 \
        and g.oh * g.kh == g.h and g.ow * g.kw == g.w


class Phase(NamedTuple):
    """One phase of a transposed convolution (:func:`transposed_phases`): the input rows
    ``py::sh`` and columns ``px::sw`` of the gradient; ``sub`` the forward convolution that
    computes them from the output gradient cropped by (``cy``, ``cx``) rows and columns, by
    the filter's taps ``ty`` x ``tx`` (in that order; None: no tap reaches the phase)."""
    py: int
    px: int
    ty: tuple[int, ...]
    tx: tuple[int, ...]
    cy: int
    cx: int
    sub: Geom | None


def _phase_axis(p: int, s: int, k: int, pad: int, size: int, out: int
                ) -> tuple[tuple[int, ...], int, int, int, int]:
    """Along one axis, the input positions p, p + s, ... take tap i from output position
    q + (p + pad - i) / s where that divides: the taps, largest first (so the offsets
    rise by one per tap, a stride-1 window), the output's crop, the window's leading pad,
    how many positions the phase has and the cropped output's length."""
    taps = tuple(i for i in range(k - 1, -1, -1) if (p + pad - i) % s == 0)
    count = max(0, (size - p + s - 1) // s)
    if not taps:
        return taps, 0, 0, count, out
    first = (p + pad - taps[0]) // s         # the lowest offset (the largest tap)
    crop = max(0, first)
    return taps, crop, crop - first, count, out - crop


def transposed_phases(g: Geom, oc: int) -> list[Phase]:
    """Conv2DBackpropInput of geometry ``g`` (the forward convolution's: input (N, H, W, C),
    output gradient (N, OH, OW, ``oc``), no dilation) as SH * SW forward convolutions of
    stride 1, one per phase of the input: input position y = SH * q + py takes tap i from
    output row q + (py + PT - i) / SH when that divides, so each phase is a correlation of
    the output gradient with a few of the filter's taps (reversed, channels transposed).
    Together they hold each tap once: the product's FMAs, none on zeros, and each phase is a
    dense convolution the compiled kernel runs with its own tiles (the GEMM and scatter
    path's column matrix is K times the input gradient)."""
    out = []
    for py in range(g.sh):
        ty, cy, pad_t, qy, hy = _phase_axis(py, g.sh, g.kh, g.pt, g.h, g.oh)
        for px in range(g.sw):
            tx, cx, pad_l, qx, wx = _phase_axis(px, g.sw, g.kw, g.pl, g.w, g.ow)
            sub = None
            if ty and tx and qy and qx and hy > 0 and wx > 0:
                sub = Geom(g.n, hy, wx, oc, len(ty), len(tx), 1, 1, 1, 1, qy, qx, pad_t, pad_l)
            out.append(Phase(py, px, ty, tx, cy, cx, sub))
    return out


def _native_pays(g: Geom, oc: int, gather: bool, fused: bool = False) -> bool:
    """Whether the compiled direct convolution beats the GEMM paths on this geometry
    (``gather``: the numpy path would gather a patch matrix, its fastest form; ``fused``:
    a _FusedConv2D, whose epilogue the numpy path applies in passes of its own)."""
    flops = 2.0 * g.n * g.oh * g.ow * oc * g.kh * g.kw * g.c
    if flops < SMALL_FLOPS:
        return _small_native_pays(g, oc, flops, fused)
    if not _native.wide_vectors():
        if g.sh >= g.kh and g.sw >= g.kw:
            return False    # windows that do not overlap (1x1, patchify): BLAS's GEMM
        return _avx2_native_pays(g, oc, gather, flops)
    if flops < NATIVE_MIN_FLOPS:
        return False
    # wide tiles (WIDE_OC says why); overlapping windows for any output count
    return oc % WIDE_OC == 0 or g.sh < g.kh or g.sw < g.kw


# Below a million FLOPs a layer costs microseconds, and what each path costs around its
# arithmetic decides. The numpy path's gather, GEMM and epilogue are several numpy calls
# (2-3 us each on a 2-core EPYC); the direct kernel is one call on a filter packed once (a
# Const's: _native.packed), though it computes whole blocks of 16 channels and 6 (AVX2) or
# 8 (AVX-512) pixels. Every Conv2D of the Keras zoo under a million FLOPs, numpy path vs
# direct kernel, one thread: with overlapping windows the direct kernel won every layer
# (5.4-7.4 -> 2.0-2.5 us at 5-30 KFLOP, 18.2 -> 5.3 us at 64 KFLOP, 56-161 -> 19-44 us
# at 300-600 KFLOP). On 1x1 layers the direct kernel's wasted blocks and BLAS's packing of
# the filter (which a GEMM of a few rows pays on every call: (2,1,1,256) by 256x256 took
# 25.6 us through numpy, 15.8 us direct) decide: SMALL_GEMM_US and SMALL_DIRECT_US model
# them, fitted on every such layer of the zoo under a million FLOPs, hot, one thread, with
# a small pointwise layer's pixels as one row (_native.pixel_rows).
SMALL_FLOPS = 1e6
SMALL_GEMM_US = (4.5, 40e3, 3000)    # fixed us, FLOPs per us, filter elements packed per us
SMALL_EPILOGUE_US = 3.0              # _FusedConv2D's bias and activation passes on that path
SMALL_DIRECT_US = (3.3, 60e3)        # fixed us, computed (padded) FLOPs per us


def _small_native_pays(g: Geom, oc: int, flops: float, fused: bool) -> bool:
    """The rule under SMALL_FLOPS: any overlapping windows; 1x1 and other windows that do
    not overlap (a plain GEMM) when the kernel's padded blocks still cost less."""
    if flops <= 0:
        return False
    if g.sh < g.kh or g.sw < g.kw:
        return True
    block = 8 if _native.wide_vectors() else AVX2_BLOCK
    rows, width = _native.pixel_rows(g, flops)
    padded = 2.0 * rows * -(-width // block) * block * -(-oc // 16) * 16 * g.kh * g.kw * g.c
    gemm = SMALL_GEMM_US[0] + flops / SMALL_GEMM_US[1] + g.kh * g.kw * g.c * oc / SMALL_GEMM_US[2]
    return SMALL_DIRECT_US[0] + padded / SMALL_DIRECT_US[1] \
        < gemm + (SMALL_EPILOGUE_US if fused else 0.0)


# The AVX2 kernel (6-pixel blocks of 16 channels, conv.c) against the numpy path on an AVX2
# EPYC, 2 threads, every Conv2D of the bench and zoo models and ResNet/VGG-sized layers
# (python benchmarks/bench_native_conv.py prints such a sweep): direct/numpy time 0.17-0.5 where
# numpy takes per-tap GEMMs or an im2col copy (any K up to 4608, any output count: 33-46
# GFLOP/s against 87-110); against the gathered patch matrix, 0.5-0.85 up to K = 1152 and
# 1.6 at K = 2304 (BLAS's square-ish GEMM then runs at 90 GFLOP/s). A row whose last block
# is mostly past its end wastes that block's work (OW = 8: 12 pixels computed for 8), and
# under about a million FLOPs (tens of microseconds) neither side wins.
AVX2_GATHER_MAX_K = 1152
AVX2_MIN_FLOPS = 1e6
AVX2_BLOCK = 6


def _avx2_native_pays(g: Geom, oc: int, gather: bool, flops: float) -> bool:
    computed = -(-g.ow // AVX2_BLOCK) * AVX2_BLOCK
    if computed > 1.25 * g.ow or flops < AVX2_MIN_FLOPS:
        return False
    return not gather or g.kh * g.kw * g.c <= AVX2_GATHER_MAX_K


@functools.lru_cache(maxsize=256)
def _conv_plan(x_shape: tuple[int, ...], f_shape: tuple[int, ...], itemsize: int,
               strides: tuple, padding: Any, dilations: tuple, fmt: str,
               explicit: tuple) -> _ConvPlan:
    kh, kw, fc, oc = f_shape
    g = geometry(x_shape, fmt, kh, kw, strides, dilations, padding, explicit)
    groups = groups_of(g.c, fc)
    if oc % groups:
        raise InvalidArgumentError(
            f"output depth must be evenly divisible by the number of groups: {oc} vs {groups}")
    if min(g.n, g.oh, g.ow, oc) == 0 or g.c == 0:
        return _ConvPlan(g, oc, groups, "empty")
    if groups > 1:
        # one input channel per group (Keras ConvNeXt's 7x7 "depthwise" Conv2D): the filter
        # (KH, KW, 1, C*mult) is DepthwiseConv2dNative's (KH, KW, C, mult), output channel
        # c*mult + m in both; per group matmuls cost a Python loop turn per channel
        if fc == 1:
            return _ConvPlan(g, oc, groups, "depthwise", window=_depthwise_plan(
                x_shape, (kh, kw, g.c, oc // g.c), itemsize, strides, padding, dilations,
                fmt, explicit))
        return _ConvPlan(g, oc, groups, "grouped")
    if kh == kw == 1 and not g.padded:
        return _ConvPlan(g, oc, groups, "gemm", native=_native_pays(g, oc, False),
                         native_fused=_native_pays(g, oc, False, fused=True))
    cols_bytes = g.n * g.oh * g.ow * kh * kw * g.c * itemsize
    # With few channels the gather moves tiny rows; a strided copy moves longer runs.
    if cols_bytes <= _GATHER_BYTES and (g.c >= _GATHER_MIN_CHANNELS
                                        or cols_bytes <= _GATHER_SMALL_BYTES):
        idx, fill_row = _gather_index(g)
        native = _native_pays(g, oc, True)
        return _ConvPlan(g, oc, groups, "gather", idx, fill_row, native, native_fused=native)
    native = _native_pays(g, oc, False)
    if g.c >= _TAP_MIN_CHANNELS:
        return _ConvPlan(g, oc, groups, "taps", native=native, native_fused=native)
    return _ConvPlan(g, oc, groups, "im2col", native=native, native_fused=native)


def _conv_taps(x: np.ndarray, f: np.ndarray, g: Geom, oc: int) -> np.ndarray:
    """Sum over the filter taps of ``x_shifted @ W[i, j]`` into one output buffer."""
    xp = _padded(x, g, False)
    out = np.empty((g.n, g.oh, g.ow, oc), x.dtype)
    tmp = np.empty_like(out)
    for i, j, view in _tap_views(xp, g):
        if i == 0 and j == 0:
            np.matmul(view, f[0, 0], out=out)
        else:
            np.matmul(view, f[i, j], out=tmp)
            out += tmp
    return out


def _conv_im2col(x: np.ndarray, f: np.ndarray, g: Geom, oc: int, groups: int) -> np.ndarray:
    kh, kw, fc, _ = f.shape
    out = np.empty((g.n, g.oh, g.ow, oc), x.dtype)
    k = kh * kw * fc
    for n0, n1 in batch_chunks(g, x.dtype.itemsize):
        mat, view = patches(x[n0:n1], replace(g, n=n1 - n0))
        dst = out[n0:n1].reshape(-1, oc)
        if groups == 1:
            np.matmul(mat, f.reshape(k, oc), out=dst)
            continue
        ocg = oc // groups
        for gi in range(groups):
            pg = view[:, :, gi * fc:(gi + 1) * fc].reshape(-1, k)
            dst[:, gi * ocg:(gi + 1) * ocg] = pg @ f[:, :, :, gi * ocg:(gi + 1) * ocg] \
                .reshape(k, ocg)
    return out


def conv2d_nhwc(x: np.ndarray, f: np.ndarray, strides: Any, padding: Any,
                dilations: Any = (1, 1, 1, 1), data_format: str = "NHWC",
                explicit_paddings: Any = ()) -> np.ndarray:
    """Conv2D of NHWC ``x`` (a view of NCHW input is fine) in its compute dtype; NHWC out.

    ``strides``/``dilations``/``explicit_paddings`` are read in ``data_format`` order.
    """
    return conv2d_planned(x, f, conv2d_plan(x.shape, f.shape, x.dtype.itemsize, strides,
                                            padding, dilations, data_format,
                                            explicit_paddings))


def conv2d_plan(x_shape: tuple[int, ...], f_shape: tuple[int, ...], itemsize: int,
                strides: Any, padding: Any, dilations: Any = (1, 1, 1, 1),
                data_format: str = "NHWC", explicit_paddings: Any = ()) -> _ConvPlan:
    """How :func:`conv2d_nhwc` convolves inputs of these shapes (geometry, method): a kernel
    may keep it (``KernelContext.memo``) and call :func:`conv2d_planned` while the shapes
    stay the same."""
    return _conv_plan(x_shape, f_shape, itemsize, _key(strides), padding, _key(dilations),
                      data_format, _key(explicit_paddings))


def conv2d_planned(x: np.ndarray, f: np.ndarray, p: _ConvPlan) -> np.ndarray:
    """:func:`conv2d_nhwc` by plan ``p`` (from :func:`conv2d_plan` for these shapes)."""
    g, oc = p.g, p.oc
    if p.native and x.dtype == _F32 and f.dtype == _F32 and _native.dense_conv():
        return _native.conv2d_nhwc_f32(x, f, g)
    if p.mode == "gemm":
        if g.sh != 1 or g.sw != 1 or g.oh != g.h or g.ow != g.w:
            x = x[:, ::g.sh, ::g.sw][:, :g.oh, :g.ow]
        m = x.reshape(-1, g.c) @ f.reshape(g.c, oc)
        return m.reshape(g.n, g.oh, g.ow, oc)
    if p.mode == "gather":
        cols = _gather(x, p.idx, p.fill_row, 0).reshape(g.n * g.oh * g.ow, -1)
        return (cols @ f.reshape(-1, oc)).reshape(g.n, g.oh, g.ow, oc)
    if p.mode == "taps":
        return _conv_taps(x, f, g, oc)
    if p.mode == "empty":
        return np.zeros((g.n, g.oh, g.ow, oc), x.dtype)
    if p.mode == "depthwise":
        kh, kw = f.shape[:2]
        return depthwise_planned(x, f.reshape(kh, kw, g.c, oc // g.c), p.window)
    return _conv_im2col(x, f, g, oc, p.groups)


def same_dtype(x: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.dtype]:
    """Both inputs in their compute dtype, and the dtype of the result."""
    if x.dtype != f.dtype:
        raise InvalidArgumentError(
            f"input and filter must have the same dtype, found {x.dtype} and {f.dtype}")
    if x.dtype != _HALF:
        return x, f, x.dtype
    cdt = compute_dtype(x.dtype)
    return x.astype(cdt, copy=False), f.astype(cdt, copy=False), x.dtype


def conv2d(x: np.ndarray, filter: np.ndarray, strides: Sequence[int], padding: str,
           dilations: Sequence[int] | None = (1, 1, 1, 1), data_format: str = "NHWC",
           explicit_paddings: Sequence[int] | None = ()) -> np.ndarray:
    """TensorFlow's Conv2D: ``x`` (4-D, ``data_format``) with ``filter`` (KH, KW, C/groups,
    O); attrs as in the OpDef (lists in ``data_format`` order). Result has ``x``'s dtype."""
    fmt = check_format(data_format)
    check_rank(x, 4, "input")
    check_rank(filter, 4, "filter")
    x, f, dt = same_dtype(x, filter)
    out = conv2d_nhwc(to_nhwc(x, fmt), f, strides, padding, dilations, fmt, explicit_paddings)
    return from_nhwc(out, fmt).astype(dt, copy=False)


def conv2d_native_fused(x: np.ndarray, filter: np.ndarray, strides: Sequence[int],
                        padding: str, dilations: Sequence[int] | None, data_format: str,
                        explicit_paddings: Sequence[int] | None,
                        epilogue: _native.Epilogue, plan: _ConvPlan | None = None
                        ) -> np.ndarray | None:
    """Conv2D with ``epilogue`` applied inside the compiled kernel (no pass over the output
    per fused op), or None when that kernel does not take this convolution: the caller then
    runs :func:`conv2d` and its own epilogue. ``plan``: the caller's :func:`conv2d_plan`
    for these NHWC shapes, if it has it."""
    if (data_format or "NHWC") != "NHWC" or x.dtype != _F32 or filter.dtype != _F32 \
            or x.ndim != 4 or filter.ndim != 4 or not _native.dense_conv():
        return None
    p = plan or _conv_plan(x.shape, filter.shape, 4, _key(strides), padding, _key(dilations),
                           "NHWC", _key(explicit_paddings))
    res = epilogue.residual
    if not p.native_fused or res is not None and (
            res.dtype != _F32 or res.shape != (p.g.n, p.g.oh, p.g.ow, p.oc)):
        return None
    return _native.conv2d_nhwc_f32(x, filter, p.g, epilogue)


# ----------------------------------------------------------------------------------------------
# DepthwiseConv2dNative


@dataclass(frozen=True)
class _WindowPlan:
    g: Geom
    mode: str   # "empty" | "gather" | "taps"
    idx: np.ndarray | None = None
    fill_row: bool = False
    count: np.ndarray | None = None   # avg pool: real elements per window, (OH*OW, 1)
    slices: tuple = ()                # pool taps: (output index, input index) pairs


@functools.lru_cache(maxsize=256)
def _depthwise_plan(x_shape: tuple[int, ...], f_shape: tuple[int, ...], itemsize: int,
                    strides: tuple, padding: Any, dilations: tuple, fmt: str,
                    explicit: tuple) -> _WindowPlan:
    kh, kw, fc, mult = f_shape
    g = geometry(x_shape, fmt, kh, kw, strides, dilations, padding, explicit)
    if fc != g.c:
        raise InvalidArgumentError(
            f"input and filter must have the same depth: {g.c} vs {fc}")
    if min(g.n, g.oh, g.ow, g.c, mult) == 0:
        return _WindowPlan(g, "empty")
    if g.n * g.oh * g.ow * kh * kw * g.c * mult * itemsize <= _DEPTHWISE_GATHER_BYTES:
        idx, fill_row = _gather_index(g)
        return _WindowPlan(g, "gather", idx, fill_row)
    return _WindowPlan(g, "taps")


def depthwise_conv2d(x: np.ndarray, filter: np.ndarray, strides: Sequence[int], padding: str,
                     dilations: Sequence[int] | None = (1, 1, 1, 1),
                     data_format: str = "NHWC",
                     explicit_paddings: Sequence[int] | None = ()) -> np.ndarray:
    """TensorFlow's DepthwiseConv2dNative: each channel convolved with its own ``mult``
    filters (``filter`` is (KH, KW, C, mult)); output channel ``c * mult + m``."""
    fmt = check_format(data_format)
    check_rank(x, 4, "input")
    check_rank(filter, 4, "filter")
    x, f, dt = same_dtype(x, filter)
    xn = to_nhwc(x, fmt)
    p = depthwise_plan(xn.shape, f.shape, x.dtype.itemsize, strides, padding, dilations, fmt,
                       explicit_paddings)
    return from_nhwc(depthwise_planned(xn, f, p), fmt).astype(dt, copy=False)


def depthwise_plan(x_shape: tuple[int, ...], f_shape: tuple[int, ...], itemsize: int,
                   strides: Any, padding: Any, dilations: Any = (1, 1, 1, 1),
                   data_format: str = "NHWC", explicit_paddings: Any = ()) -> _WindowPlan:
    """How :func:`depthwise_planned` convolves inputs of these shapes (``x_shape`` in
    ``data_format``): a kernel may keep it while the shapes stay the same."""
    return _depthwise_plan(x_shape, f_shape, itemsize, _key(strides), padding,
                           _key(dilations), data_format, _key(explicit_paddings))


def depthwise_planned(xn: np.ndarray, f: np.ndarray, p: _WindowPlan) -> np.ndarray:
    """The depthwise convolution of NHWC ``xn`` (in its compute dtype) by plan ``p``: NHWC
    out, in ``xn``'s dtype."""
    g = p.g
    x = xn
    kh, kw, c, mult = f.shape
    if mult == 1 and p.mode != "empty" and xn.dtype == _F32 and f.dtype == _F32 \
            and _native.enabled():
        return _native.depthwise_nhwc_f32(xn, f, g)
    if p.mode == "gather":
        cols = _gather(xn, p.idx, p.fill_row, 0).reshape(-1, kh * kw, c)
        if mult == 1:
            out = np.einsum("mkc,kc->mc", cols, f.reshape(kh * kw, c))
        else:
            out = np.einsum("mkc,kcd->mcd", cols, f.reshape(kh * kw, c, mult))
    elif p.mode == "taps":
        # Accumulate tap by tap into preallocated buffers: out += x_shifted * w[i, j].
        # With mult == 1 everything stays 4-D: a trailing axis of 1 would make numpy's inner
        # loops one element long.
        xp = _padded(xn, g, False)
        shape = (g.n, g.oh, g.ow, c) + ((mult,) if mult > 1 else ())
        fw = f if mult > 1 else f[:, :, :, 0]
        out = np.empty(shape, x.dtype)
        tmp = np.empty_like(out)
        for i, j, view in _tap_views(xp, g):
            v = view[..., None] if mult > 1 else view
            if i == 0 and j == 0:
                np.multiply(v, fw[0, 0], out=out)
            else:
                np.multiply(v, fw[i, j], out=tmp)
                out += tmp
    else:
        out = np.zeros((g.n, g.oh, g.ow, c * mult), x.dtype)
    return out.reshape(g.n, g.oh, g.ow, c * mult)


# ----------------------------------------------------------------------------------------------
# Pooling


def pool_geometry(x_shape: tuple[int, ...], ksize: Any, strides: Any, padding: Any,
                  explicit: Any, fmt: str) -> tuple[Geom, int, int]:
    """Pool geometry plus the depth window and depth stride (1 and 1 for spatial pooling)."""
    if len(x_shape) != 4:
        raise InvalidArgumentError(
            f"input must be 4-dimensional, found shape {list(x_shape)}")
    kn, kh, kw, kc = nhw_c(ksize, fmt, "ksize")
    sn, sh, sw, sc = nhw_c(strides, fmt, "strides")
    if min(kn, kh, kw, kc) <= 0 or min(sn, sh, sw, sc) <= 0:
        raise InvalidArgumentError(
            f"ksize and strides must be positive, found {list(ksize)} and {list(strides)}")
    if kn != 1 or sn != 1:
        raise InvalidArgumentError("pooling is not supported on the batch dimension")
    h_ax, w_ax, c_ax = AXES[fmt]
    padding, pads = check_padding(padding, explicit, fmt)
    oh, pt = window(x_shape[h_ax], kh, 1, sh, padding, pads[0] if pads else None)
    ow, pl = window(x_shape[w_ax], kw, 1, sw, padding, pads[1] if pads else None)
    g = Geom(x_shape[0], x_shape[h_ax], x_shape[w_ax], x_shape[c_ax], kh, kw, sh, sw, 1, 1,
             oh, ow, pt, pl)
    return g, kc, sc


def _avg_count(g: Geom) -> np.ndarray:
    """Real (non-padding) elements per window, (OH, OW): a row count times a column count."""
    rh = np.arange(g.oh) * g.sh - g.pt
    rw = np.arange(g.ow) * g.sw - g.pl
    nh = np.minimum(rh + g.kh, g.h) - np.maximum(rh, 0)
    nw = np.minimum(rw + g.kw, g.w) - np.maximum(rw, 0)
    return nh[:, None] * nw[None, :]


@functools.lru_cache(maxsize=256)
def _pool_plan(op: str, x_shape: tuple[int, ...], itemsize: int, ksize: tuple,
               strides: tuple, padding: Any, fmt: str, explicit: tuple) -> _WindowPlan:
    g, kc, sc = pool_geometry(x_shape, ksize, strides, padding, explicit, fmt)
    if kc != 1 or sc != 1:
        return _WindowPlan(g, "depth")
    count = _avg_count(g).reshape(g.oh * g.ow, 1) if op == "avg" else None
    if min(g.n, g.oh, g.ow, g.c) == 0:
        return _WindowPlan(g, "empty", count=count)
    if fmt == "NHWC" and g.n * g.oh * g.ow * g.kh * g.kw * g.c * itemsize \
            <= _POOL_GATHER_BYTES:
        idx, fill_row = _gather_index(g, tap_major=True)
        return _WindowPlan(g, "gather", idx, fill_row, count)
    # The (output, input) index pairs of every tap that reads real input, computed once.
    slices = tuple((_spatial(fmt, slice(a, b), slice(c, d)), _spatial(fmt, rows, cs))
                   for _, _, (a, b, c, d), rows, cs in g.taps() if b > a and d > c)
    return _WindowPlan(g, "taps", count=count, slices=slices)


def _out_shape(g: Geom, fmt: str) -> tuple[int, ...]:
    return (g.n, g.oh, g.ow, g.c) if fmt == "NHWC" else (g.n, g.c, g.oh, g.ow)


def _spatial(fmt: str, rows: slice, cols: slice) -> tuple[slice, ...]:
    """Index selecting (rows, cols) on the spatial axes of a 4-D tensor in ``fmt``."""
    return (slice(None), rows, cols) if fmt == "NHWC" else (slice(None), slice(None), rows,
                                                            cols)


def _depth_max_pool(x: np.ndarray, g: Geom, k: int, s: int, fmt: str) -> np.ndarray:
    # TF's depthwise max pooling: non-overlapping windows along channels only.
    if g.kh != 1 or g.kw != 1 or g.sh != 1 or g.sw != 1:
        raise InvalidArgumentError(
            "max pooling supports exactly one of pooling across depth or across width/height")
    if k != s or g.c % k:
        raise InvalidArgumentError(
            f"depthwise max pooling needs the depth window ({k}) to equal the depth stride "
            f"({s}) and to divide the input depth ({g.c})")
    if fmt != "NHWC":
        raise InvalidArgumentError("depthwise max pooling is only supported for NHWC")
    # TF's reduction over each depth window starts from its first element (an all-NaN
    # window stays NaN), then folds the rest as MaxPool does
    windows = x.reshape(g.n, g.h, g.w, g.c // k, k)
    out = windows[..., 0].copy()
    for j in range(1, k):
        _max_into(out, windows[..., j])
    return out


def pool_lowest(dt: np.dtype) -> Any:
    """Where TensorFlow's MaxPool and MaxPool3D start a window: NumTraits<T>::lowest(), the
    most negative finite value, not -inf."""
    return np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min


def _max_into(acc: np.ndarray, x: np.ndarray) -> None:
    """``acc = acc < x ? x : acc``, Eigen's max with the accumulator first: a NaN never
    replaces it, and of two equal values (0 and -0) the accumulator's stays. (A masked
    copy; ~10x slower than np.fmax on strided windows, so only for depth pooling.)"""
    np.copyto(acc, x, where=acc < x)


def max_pool(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str,
             data_format: str = "NHWC", explicit_paddings: Sequence[int] | None = ()
             ) -> np.ndarray:
    """TensorFlow's MaxPool (also across depth). Its kernel folds each window into the most
    negative finite value with ``acc < x ? x : acc``: a NaN never wins (an all-NaN window
    pools to that lowest value). np.fmax from that value is the same fold, but for which
    zero a window of 0 and -0 keeps (TF: the first). Across depth the fold starts from the
    window's first element (:func:`_max_into`, exact)."""
    fmt = check_format(data_format)
    check_rank(x, 4, "input")
    p = _pool_plan("max", x.shape, x.dtype.itemsize, _key(ksize), _key(strides), padding,
                   fmt, _key(explicit_paddings))
    g = p.g
    if p.mode == "depth":
        _, kc, sc = pool_geometry(x.shape, ksize, strides, padding, explicit_paddings, fmt)
        return _depth_max_pool(x, g, kc, sc, fmt)
    lowest = pool_lowest(x.dtype)
    if p.mode == "gather":
        cols = _gather(x, p.idx, p.fill_row, lowest).reshape(g.kh * g.kw, -1, g.c)
        return np.fmax.reduce(cols, axis=0, initial=lowest).reshape(g.n, g.oh, g.ow, g.c)
    out = np.full(_out_shape(g, fmt), lowest, x.dtype)
    for oi, ii in p.slices:
        o = out[oi]
        np.fmax(o, x[ii], out=o)
    return out


def pool_plan(op: str, x_shape: tuple[int, ...], itemsize: int, ksize: Any, strides: Any,
              padding: Any, fmt: str, explicit_paddings: Any = ()) -> _WindowPlan:
    """How a pool (``op``: "avg" or "max") windows inputs of this shape: a kernel may keep it
    while the shape stays the same."""
    return _pool_plan(op, x_shape, itemsize, _key(ksize), _key(strides), padding, fmt,
                      _key(explicit_paddings))


def avg_pool(x: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str,
             data_format: str = "NHWC") -> np.ndarray:
    """TensorFlow's AvgPool: each window's mean over its real (non-padding) elements."""
    fmt = check_format(data_format)
    check_rank(x, 4, "input")
    p = _pool_plan("avg", x.shape, x.dtype.itemsize, _key(ksize), _key(strides), padding,
                   fmt, ())
    g = p.g
    if p.mode == "depth":
        raise InvalidArgumentError("average pooling across depth is not supported")
    cdt = compute_dtype(x.dtype)
    count = p.count.astype(cdt)
    if p.mode == "gather":
        cols = _gather(x.astype(cdt, copy=False), p.idx, p.fill_row, 0)
        total = cols.reshape(g.kh * g.kw, g.n, g.oh * g.ow, g.c).sum(axis=0)
        return (total / count).astype(x.dtype, copy=False).reshape(g.n, g.oh, g.ow, g.c)
    total = np.zeros(_out_shape(g, fmt), cdt)
    for oi, ii in p.slices:
        total[oi] += x[ii]
    count = count.reshape(g.oh, g.ow)
    count = count[:, :, None] if fmt == "NHWC" else count
    return (total / count).astype(x.dtype, copy=False)
