"""Neural-network kernels: convolutions, pooling (also with argmax, fractional), batch norm,
activations, LRN, resizing, Dilation2D, InTopK; the gradients of Conv2D, DepthwiseConv2dNative,
Conv3D and LRN (the pooling gradients are in grad.py).

Conventions shared by the windowed ops (conv, pool):

* ``data_format`` NHWC or NCHW; kernels work in NHWC internally (NCHW is transposed in and
  out) except large pooling, which indexes the spatial axes of either layout directly.
* Output sizes and SAME padding follow TensorFlow's windowed-output rule: VALID gives
  ``(in - eff_k + stride) // stride`` (C++ truncating division), SAME gives
  ``ceil(in / stride)`` with the total padding split so that the extra element goes after,
  EXPLICIT takes ``explicit_paddings`` (pairs per dimension, in data_format order).
* Conv2D, DepthwiseConv2dNative, MaxPool and AvgPool are plain functions in ``_conv.py``
  (plans cached per shape and attrs; a GEMM per 1x1 conv, one gather and one GEMM for small
  windows, per-tap accumulation into preallocated buffers for large ones); the kernels here
  only read their attrs. The filter gradient is im2col plus one BLAS matmul; the input
  gradient never pads: for each filter tap it computes the range of output positions that
  reads real input and works on that range only. Loops run over filter taps (or groups),
  never over pixels.
* float16 is computed in float32 and rounded back once; every output has the input's dtype
  (ResizeBilinear always outputs float32, as its OpDef says).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dfg.executor import blas
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError
from dfg.graphdef.tensors import frozen

from . import _conv, _native, _philox
from ._conv import AXES as _AXES
from ._conv import PATCH_BYTES as _PATCH_BYTES
from ._conv import Geom as _Geom
from ._conv import batch_chunks as _batch_chunks
from ._conv import check_rank as _check_rank
from ._conv import compute_dtype as _compute_dtype
from ._conv import from_nhwc as _from_nhwc
from ._conv import groups_of as _groups
from ._conv import patches as _patches
from ._conv import same_dtype as _conv_inputs
from ._conv import tap_range as _tap_range
from ._conv import to_nhwc as _to_nhwc
from ._conv import window as _window
from ._select import where
from .registry import ArrayForm, KernelContext, kernel

# ----------------------------------------------------------------------------------------------
# Shared helpers


def _data_format(ctx: KernelContext, allowed: tuple[str, ...] = ("NHWC", "NCHW")) -> str:
    return _conv.check_format(ctx.attrs.get("data_format"), allowed)


def _geometry(ctx: KernelContext, fmt: str, x_shape: tuple[int, ...], kh: int,
              kw: int) -> _Geom:
    """Convolution geometry from the node's strides/dilations/padding attrs."""
    a = ctx.attrs
    return _conv.geometry(x_shape, fmt, kh, kw, a.get("strides"), a.get("dilations"),
                          a.get("padding"), a.get("explicit_paddings"))


# ----------------------------------------------------------------------------------------------
# Convolutions


_PLANNED = (np.dtype(np.float32), np.dtype(np.float64))


def planned_conv(ctx: KernelContext, x: np.ndarray, f: np.ndarray, plan: Any) -> Any:
    """The convolution plan ``ctx.memo`` keeps for a NHWC float32/float64 node whose inputs
    have these shapes and dtypes: made once by ``plan(x_shape, f_shape, itemsize, strides,
    padding, dilations, "NHWC", explicit_paddings)`` and kept while they stay the same (a
    convolution's wrapper checks and geometry cost more than a small convolution itself).
    None where the general path runs (other formats, dtypes or ranks: it raises the
    errors)."""
    m = ctx.memo
    if m is not None and m[0] is plan and m[1] == x.shape and m[2] == f.shape \
            and m[3] is x.dtype and m[4] is f.dtype:
        return m[5]
    a = ctx.attrs
    if (a.get("data_format") or "NHWC") != "NHWC" or x.ndim != 4 or f.ndim != 4 \
            or x.dtype not in _PLANNED or f.dtype != x.dtype:
        return None
    p = plan(x.shape, f.shape, x.dtype.itemsize, a.get("strides"), a.get("padding"),
             a.get("dilations"), "NHWC", a.get("explicit_paddings"))
    # the last entry: a kernel's preparation for a frozen filter (conv2d), if any
    ctx.memo = (plan, x.shape, f.shape, x.dtype, f.dtype, p, None)
    return p


@kernel("Conv2D", heavy=True, blas=True, prepared=True)
def conv2d(ctx: KernelContext, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    p = planned_conv(ctx, x, f, _conv.conv2d_plan)
    if p is None:
        return conv2d_of(ctx.attrs, x, f)
    if p.native and x.dtype is _F32 and f.dtype is _F32 and _native.dense_conv():
        return _run_prepared(ctx, x, f, p.g, _native.prepare_conv, _native.conv2d_prepared,
                             _native.dense_conv)
    return _conv.conv2d_planned(x, f, p)


def _run_prepared(ctx: KernelContext, x: np.ndarray, f: np.ndarray, g: Any,
                  prepare: Any, run: Any, gate: Any) -> np.ndarray:
    """``run(x, prepare(f, g))``: a compiled convolution, its preparation (the filter as the
    kernel reads it, the geometry) kept in the node's memo (planned_conv's last entry) while
    the filter is the same frozen array (a Const's), and offered to compiled programs as the
    node's ``ctx.fast`` while ``gate()`` (the compiled kernel's switch) allows it."""
    m = ctx.memo
    kept = m[6]
    if kept is not None and kept[0] is f:
        return run(x, kept[1])
    prep = prepare(f, g)
    if frozen(f):
        ctx.memo = (*m[:6], (f, prep))
        ctx.fast = _kept_call(x.shape, prep, run, gate, f)
    return run(x, prep)


def _kept_call(shape: tuple, prep: Any, run: Any, gate: Any,
               f: np.ndarray | None = None) -> Any:
    """A node's ``ctx.fast`` (None without a preparation): ``run(x, prep)`` for a float32
    ``x`` of ``shape`` (and a convolution's filter ``f``, the array it was prepared for)
    while ``gate()`` (the compiled kernels' switch); else None (the kernel)."""
    if prep is None:
        return None
    if run is _native.conv2d_prepared or run is _native.depthwise_prepared:
        # the compiled kernel at once (_native.runner: the same call without the
        # conversions, which the test here makes needless; module.c refuses a buffer that
        # is not C-contiguous)
        go = _native.runner(prep, depthwise=run is _native.depthwise_prepared)
        nd = np.ndarray

        def fast_conv(x: np.ndarray, filt: np.ndarray | None = None) -> np.ndarray | None:
            if filt is f and x.__class__ is nd and x.dtype is _F32 and x.shape == shape \
                    and gate():
                try:
                    return go(x)
                except (TypeError, ValueError, MemoryError):
                    return None      # not C-contiguous, or no row buffer: the kernel says
            return None
        return fast_conv

    def fast(x: np.ndarray, filt: np.ndarray | None = None) -> np.ndarray | None:
        if filt is f and x.__class__ is np.ndarray and x.dtype is _F32 and x.shape == shape \
                and gate():
            return run(x, prep)
        return None
    return fast


def conv2d_of(a: dict, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Conv2D of ``x`` by ``f`` with the window attributes ``a`` (Conv2D's, or a fused
    convolution's): the general path, which raises what is wrong."""
    return _conv.conv2d(x, f, a.get("strides"), a.get("padding"), a.get("dilations"),
                        a.get("data_format") or "NHWC", a.get("explicit_paddings"))


@kernel("DepthwiseConv2dNative", heavy=True, prepared=True)
def depthwise_conv2d(ctx: KernelContext, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    p = planned_conv(ctx, x, f, _conv.depthwise_plan)
    if p is None:
        return depthwise_conv2d_of(ctx.attrs, x, f)
    if p.mode != "empty" and x.dtype is _F32 and f.dtype is _F32 and f.shape[3] == 1 \
            and _native.enabled():
        return _run_prepared(ctx, x, f, p.g, _native.prepare_depthwise,
                             _native.depthwise_prepared, _native.enabled)
    return _conv.depthwise_planned(x, f, p)


def depthwise_conv2d_of(a: dict, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """DepthwiseConv2dNative of ``x`` by ``f`` with the window attributes ``a``: the general
    path."""
    return _conv.depthwise_conv2d(x, f, a.get("strides"), a.get("padding"),
                                  a.get("dilations"), a.get("data_format") or "NHWC",
                                  a.get("explicit_paddings"))


def _sizes_vector(v: np.ndarray, name: str) -> list[int]:
    v = np.asarray(v)
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"{name} must be a 1-D integer vector, found {v.dtype} shape {list(v.shape)}")
    return [int(s) for s in v]


@kernel("Conv2DBackpropInput", heavy=True, blas=True)
def conv2d_backprop_input(ctx: KernelContext, input_sizes: np.ndarray, f: np.ndarray,
                          dy: np.ndarray) -> np.ndarray:
    """Gradient of Conv2D with respect to its input (a transposed convolution)."""
    return conv2d_backprop_input_with(ctx, input_sizes, f, dy, None)[0]


def conv2d_backprop_input_with(ctx: KernelContext, input_sizes: np.ndarray, f: np.ndarray,
                               dy: np.ndarray, epilogue: _native.Epilogue | None
                               ) -> tuple[np.ndarray, bool]:
    """Conv2DBackpropInput, and whether ``epilogue`` (a per-channel shift and activation:
    _DfgFusedConv2DBackpropInput's) was applied: the compiled phases apply it as they
    compute; the other paths leave it to the caller."""
    fmt = _data_format(ctx)
    _check_rank(f, 4, "filter")
    _check_rank(dy, 4, "out_backprop")
    sizes = _sizes_vector(input_sizes, "input_sizes")
    h_ax, w_ax, c_ax = _AXES[fmt]
    if len(sizes) == 2:
        # Spatial sizes only: batch from out_backprop, depth from the filter.
        shape = [0, 0, 0, 0]
        shape[0], shape[h_ax], shape[w_ax], shape[c_ax] = dy.shape[0], sizes[0], sizes[1], \
            f.shape[2]
        sizes = shape
    if len(sizes) != 4 or any(s < 0 for s in sizes):
        raise InvalidArgumentError(
            f"input_sizes must hold 4 non-negative sizes (or 2 spatial ones), found {sizes}")
    dy, f, dt = _conv_inputs(dy, f)
    n, h, w, c = sizes[0], sizes[h_ax], sizes[w_ax], sizes[c_ax]
    kh, kw, fc, oc = f.shape
    groups = _groups(c, fc)
    g = _geometry(ctx, fmt, (n, h, w, c), kh, kw)
    dyn = _to_nhwc(dy, fmt)
    if dyn.shape != (n, g.oh, g.ow, oc):
        raise InvalidArgumentError(
            f"out_backprop must have shape {[n, g.oh, g.ow, oc]} (NHWC) for input of shape "
            f"{[n, h, w, c]}, found {list(dyn.shape)}")
    m, k = n * g.oh * g.ow, kh * kw
    if groups == 1 and m and _conv.tiles_exactly(g):
        # Windows that tile the input exactly (kernel == stride, no padding, Keras's
        # Conv2DTranspose(k, strides=k)): every input pixel takes one window's one tap, so
        # the gradient is one product, dy @ W^T as a 1x1 convolution, and one transpose.
        # W^T is kept for a filter that cannot change (a Const's): a (2, 2, 64, 128) one
        # took 34 us to transpose, a third of the product
        kept = ctx.memo
        if kept is not None and kept[0] is f:
            wt = kept[1]
        else:
            wt = np.ascontiguousarray(f.reshape(k * c, oc).T)
            if frozen(f):
                ctx.memo = (f, wt)
        r = blas.matmul(np.ascontiguousarray(dyn).reshape(m, oc), wt)
        out = r.reshape(n, g.oh, g.ow, kh, kw, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h, w, c)
        return np.ascontiguousarray(_from_nhwc(out, fmt)).astype(dt, copy=False), False
    if groups == 1 and m and dyn.dtype is _F32 and f.dtype is _F32 and g.dh == g.dw == 1 \
            and _native.dense_conv():
        if epilogue is not None and fmt == "NHWC":
            out = _transposed_native(ctx, dyn, f, g, epilogue)
            if out is not None:
                return out, True
        return _from_nhwc(_transposed_native(ctx, dyn, f, g, None), fmt), False
    dy2 = dyn.reshape(m, oc)
    # Column gradients, laid out channel-major (K, C, M) so that the scatter below adds
    # long runs along output columns.
    if groups == 1:
        dcols = (f.reshape(k * c, oc) @ dy2.T).reshape(k, c, m)
    else:
        dcols = np.empty((k, c, m), dy.dtype)
        ocg = oc // groups
        for gi in range(groups):
            fg = f[:, :, :, gi * ocg:(gi + 1) * ocg].reshape(k, fc, ocg)
            dcols[:, gi * fc:(gi + 1) * fc, :] = fg @ dy2[:, gi * ocg:(gi + 1) * ocg].T
    out = _scatter_taps(dcols.reshape(kh, kw, c, n, g.oh, g.ow), g)
    return np.ascontiguousarray(_from_nhwc(out, fmt)).astype(dt, copy=False), False


_PHASES = "phases"      # the memo of _transposed_native (the tiling path keeps (f, W^T))


def _transposed_native(ctx: KernelContext, dy: np.ndarray, f: np.ndarray, g: _Geom,
                       epilogue: _native.Epilogue | None) -> np.ndarray | None:
    """Conv2DBackpropInput of NHWC float32 ``dy`` by ``f`` as one compiled forward
    convolution per phase of the input (_conv.transposed_phases), each written into its rows
    and columns of the result, with ``epilogue`` (no residual) applied as each phase is
    computed; None when a phase no tap reaches would need it applied apart. The phases'
    filters and preparations are kept for a frozen filter while the geometry and the
    epilogue stay (a Keras Conv2DTranspose(3, strides=2) of (32,14,14,64) to 32 channels:
    5.1 ms by the GEMM and scatter, ~1 by phases)."""
    # the epilogue's bias array (the same frozen Const's) and activation; (None, -1): none
    shift, act = (None, -1) if epilogue is None else (epilogue.shift, epilogue.act)
    kept = ctx.memo
    if kept is not None and kept[0] is _PHASES and kept[1] is f and kept[2] == g \
            and kept[3] is shift and kept[4] == act:
        preps = kept[5]
    else:
        preps = []
        for ph in _conv.transposed_phases(g, f.shape[3]):
            if ph.sub is None:
                if epilogue is not None:
                    return None
                preps.append((ph, None))
                continue
            sub = np.ascontiguousarray(f[np.ix_(ph.ty, ph.tx)].transpose(0, 1, 3, 2))
            preps.append((ph, _native.prepare_conv(sub, ph.sub, epilogue)))
        if frozen(f) and (shift is None or frozen(shift)):
            ctx.memo = (_PHASES, f, g, shift, act, preps)
    dx = np.empty((g.n, g.h, g.w, g.c), _F32)
    for ph, prep in preps:
        rows, cols = slice(ph.py, None, g.sh), slice(ph.px, None, g.sw)
        if prep is None:
            dx[:, rows, cols] = 0
            continue
        src = dy if ph.cy == ph.cx == 0 else dy[:, ph.cy:, ph.cx:]
        part = _native.conv2d_prepared(src, prep)
        if g.sh == g.sw == 1:
            return part
        dx[:, rows, cols] = part
    return dx


def _scatter_taps(dcols: np.ndarray, g: _Geom) -> np.ndarray:
    """Column gradients (KH, KW, C, N, OH, OW) added back onto the input positions each tap
    read, as an NHWC view; taps are clipped to the output range that reads real input."""
    dx = np.zeros((g.c, g.n, g.h, g.w), dcols.dtype)
    if dcols.size:
        for i, j, (a, b, cc, d), rows, cs in g.taps():
            if b > a and d > cc:
                dx[:, :, rows, cs] += dcols[i, j, :, :, a:b, cc:d]
    return dx.transpose(1, 2, 3, 0)


@kernel("Conv2DBackpropFilter", heavy=True, blas=True)
def conv2d_backprop_filter(ctx: KernelContext, x: np.ndarray, filter_sizes: np.ndarray,
                           dy: np.ndarray) -> np.ndarray:
    """Gradient of Conv2D with respect to its filter: patches^T @ out_backprop."""
    fmt = _data_format(ctx)
    _check_rank(x, 4, "input")
    _check_rank(dy, 4, "out_backprop")
    fs = _sizes_vector(filter_sizes, "filter_sizes")
    if len(fs) != 4 or any(s < 0 for s in fs):
        raise InvalidArgumentError(f"filter_sizes must hold 4 non-negative sizes, found {fs}")
    x, dy, dt = _conv_inputs(x, dy)
    xn, dyn = _to_nhwc(x, fmt), _to_nhwc(dy, fmt)
    kh, kw, fc, oc = fs
    g = _geometry(ctx, fmt, xn.shape, kh, kw)
    groups = _groups(g.c, fc)
    if dyn.shape != (g.n, g.oh, g.ow, oc) or oc % groups:
        raise InvalidArgumentError(
            f"out_backprop must have shape {[g.n, g.oh, g.ow, oc]} (NHWC), found "
            f"{list(dyn.shape)}")
    k = kh * kw
    if g.n * g.oh * g.ow == 0 or g.c == 0 or oc == 0:
        return np.zeros(fs, dt)
    df = np.zeros((k, fc, oc), x.dtype)
    ocg = oc // groups
    for n0, n1 in _batch_chunks(g, x.dtype.itemsize):
        mat, view = _patches(xn[n0:n1], replace(g, n=n1 - n0))
        dy2 = dyn[n0:n1].reshape(-1, oc)
        if groups == 1:
            df += (mat.T @ dy2).reshape(k, fc, oc)
            continue
        for gi in range(groups):
            pg = view[:, :, gi * fc:(gi + 1) * fc].reshape(-1, k * fc)
            df[:, :, gi * ocg:(gi + 1) * ocg] += (pg.T @ dy2[:, gi * ocg:(gi + 1) * ocg]) \
                .reshape(k, fc, ocg)
    return df.reshape(fs).astype(dt, copy=False)


# ----------------------------------------------------------------------------------------------
# DepthwiseConv2dNative gradients
#
# A depthwise convolution is a grouped convolution with one group per input channel whose
# output channel ``c * mult + m`` uses ``filter[:, :, c, m]``. The input gradient accumulates
# tap by tap (out_backprop times the tap's weights, added where the tap read); the filter
# gradient is one batched matmul over the channels (each channel's im2col columns against its
# ``mult`` outputs).
# TensorFlow's CPU kernels take NHWC only. They also ignore ``dilations`` (their output size
# check uses undilated windows, and the CPU forward op rejects dilations); dfg's forward
# kernel computes dilated depthwise convolutions, so these compute their exact gradients.


def _depthwise_format(ctx: KernelContext) -> str:
    fmt = _data_format(ctx)
    if fmt != "NHWC":
        raise UnimplementedError("Depthwise convolution on CPU is only supported for NHWC format")
    return fmt


def _check_depthwise_backprop(op: str, g: _Geom, dy_shape: tuple[int, ...], c: int,
                              fc: int, mult: int) -> None:
    if fc != c:
        raise InvalidArgumentError(
            f"{op}: input and filter must have the same depth: {c} vs {fc}")
    want = (g.n, g.oh, g.ow, c * mult)
    if tuple(dy_shape) != want:
        raise InvalidArgumentError(
            f"{op}: out_backprop must have shape {list(want)} (NHWC), found {list(dy_shape)}")


@kernel("DepthwiseConv2dNativeBackpropInput")
def depthwise_conv2d_backprop_input(ctx: KernelContext, input_sizes: np.ndarray,
                                    f: np.ndarray, dy: np.ndarray) -> np.ndarray:
    fmt = _depthwise_format(ctx)
    _check_rank(f, 4, "filter")
    _check_rank(dy, 4, "out_backprop")
    sizes = _sizes_vector(input_sizes, "input_sizes")
    if len(sizes) != 4 or any(s < 0 for s in sizes):
        raise InvalidArgumentError(
            f"input_sizes must hold 4 non-negative sizes (NHWC), found {sizes}")
    dy, f, dt = _conv_inputs(dy, f)
    n, h, w, c = sizes
    kh, kw, fc, mult = f.shape
    g = _geometry(ctx, fmt, (n, h, w, c), kh, kw)
    _check_depthwise_backprop("DepthwiseConv2DBackpropInput", g, dy.shape, c, fc, mult)
    # Per filter tap, out_backprop times the tap's weights (summed over the multiplier) is
    # added to the input positions the tap read.
    dx = np.zeros((n, h, w, c), dy.dtype)
    if dy.size and dx.size:
        d5 = dy.reshape(n, g.oh, g.ow, c, mult)
        for i, j, (a, b, cc, d), rows, cs in g.taps():
            if b > a and d > cc:
                part = d5[:, a:b, cc:d]
                if mult == 1:
                    dx[:, rows, cs] += part[..., 0] * f[i, j, :, 0]
                else:
                    dx[:, rows, cs] += np.einsum("nhwcd,cd->nhwc", part, f[i, j])
    return dx.astype(dt, copy=False)


@kernel("DepthwiseConv2dNativeBackpropFilter")
def depthwise_conv2d_backprop_filter(ctx: KernelContext, x: np.ndarray,
                                     filter_sizes: np.ndarray, dy: np.ndarray) -> np.ndarray:
    fmt = _depthwise_format(ctx)
    _check_rank(x, 4, "input")
    _check_rank(dy, 4, "out_backprop")
    fs = _sizes_vector(filter_sizes, "filter_sizes")
    if len(fs) != 4 or any(s < 0 for s in fs):
        raise InvalidArgumentError(f"filter_sizes must hold 4 non-negative sizes, found {fs}")
    x, dy, dt = _conv_inputs(x, dy)
    kh, kw, fc, mult = fs
    g = _geometry(ctx, fmt, x.shape, kh, kw)
    _check_depthwise_backprop("DepthwiseConv2DBackpropFilter", g, dy.shape, g.c, fc, mult)
    k = kh * kw
    df = np.zeros((g.c, k, mult), x.dtype)
    if g.n * g.oh * g.ow and g.c and mult:
        for n0, n1 in _batch_chunks(g, x.dtype.itemsize):
            _, view = _patches(x[n0:n1], replace(g, n=n1 - n0))      # (M, K, C)
            d = dy[n0:n1].reshape(-1, g.c, mult)                       # (M, C, mult)
            df += np.matmul(view.transpose(2, 1, 0), d.transpose(1, 0, 2))
    return np.ascontiguousarray(df.transpose(1, 0, 2)).reshape(fs).astype(dt, copy=False)


# ----------------------------------------------------------------------------------------------
# Pooling


def _max_pool(ctx: KernelContext, x: np.ndarray, ksize: Any, strides: Any) -> np.ndarray:
    fmt = _data_format(ctx, ("NHWC", "NCHW", "NCHW_VECT_C"))
    if fmt == "NCHW_VECT_C":
        raise InvalidArgumentError("data_format NCHW_VECT_C is not supported on CPU")
    return _conv.max_pool(x, ksize, strides, ctx.attrs.get("padding"), fmt,
                          ctx.attrs.get("explicit_paddings"))


@kernel("MaxPool", heavy=True, prepared=True)
def max_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    m = ctx.memo
    if m is None or m[0] != x.shape or m[1] is not x.dtype:
        m = ctx.memo = (x.shape, x.dtype, _pool_native(ctx, x, "max"))
        ctx.fast = _kept_call(x.shape, m[2], _native.pool_prepared, _native.enabled)
    if m[2] is not None and _native.enabled():
        return _native.pool_prepared(x, m[2])      # one compiled pass, TF's fold
    return _max_pool(ctx, x, ctx.attrs.get("ksize"), ctx.attrs.get("strides"))


@kernel("MaxPoolV2")
def max_pool_v2(ctx: KernelContext, x: np.ndarray, ksize: np.ndarray,
                strides: np.ndarray) -> np.ndarray:
    return _max_pool(ctx, x, _sizes_vector(ksize, "ksize"), _sizes_vector(strides, "strides"))


@kernel("AvgPool", heavy=True, prepared=True)
def avg_pool(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    m = ctx.memo
    if m is None or m[0] != x.shape or m[1] is not x.dtype:
        m = ctx.memo = (x.shape, x.dtype, _pool_native(ctx, x, "avg"))
        ctx.fast = _kept_call(x.shape, m[2], _native.pool_prepared, _native.enabled)
    if m[2] is not None and _native.enabled():
        return _native.pool_prepared(x, m[2])    # sums in registers, then the count
    a = ctx.attrs
    return _conv.avg_pool(x, a.get("ksize"), a.get("strides"), a.get("padding"),
                          a.get("data_format") or "NHWC")


def _pool_native(ctx: KernelContext, x: np.ndarray, op: str) -> Any:
    """For a float32 NHWC pool over spatial windows: the compiled kernel's preparation of
    MaxPool (``op`` "max") or AvgPool ("avg"). None elsewhere (the numpy path runs, and
    raises what is wrong)."""
    a = ctx.attrs
    if x.dtype is not _F32 or x.ndim != 4 or (a.get("data_format") or "NHWC") != "NHWC" \
            or not _native.enabled():
        return None
    try:
        p = _conv.pool_plan(op, x.shape, 4, a.get("ksize"), a.get("strides"),
                            a.get("padding"), "NHWC", a.get("explicit_paddings") or ())
    except (InvalidArgumentError, ValueError, TypeError):
        return None
    if p.mode not in ("gather", "taps"):
        return None
    g = p.g
    return _native.prepare_maxpool(g) if op == "max" else _native.prepare_avgpool(g)


# ----------------------------------------------------------------------------------------------
# Batch normalization


def _fused_batch_norm(ctx: KernelContext, x: np.ndarray, scale: np.ndarray,
                      offset: np.ndarray, mean: np.ndarray, variance: np.ndarray,
                      reserve_3: bool) -> tuple[np.ndarray, ...]:
    fmt = _data_format(ctx, ("NHWC", "NCHW", "NDHWC", "NCDHW"))
    if x.ndim not in (4, 5):
        raise InvalidArgumentError(
            f"input must be 4 or 5-dimensional, found shape {list(x.shape)}")
    for name, v in (("scale", scale), ("offset", offset), ("mean", mean),
                    ("variance", variance)):
        _check_rank(v, 1, name)
    c_axis = x.ndim - 1 if fmt.endswith("C") else 1
    depth = x.shape[c_axis]
    for name, v in (("scale", scale), ("offset", offset)):
        if v.size != depth:
            raise InvalidArgumentError(
                f"{name} must have the same number of elements as the channels of x: "
                f"expected {depth}, found {v.size}")
    training = bool(ctx.attrs.get("is_training", True))
    factor = np.float32(ctx.attrs.get("exponential_avg_factor", 1.0))
    if not training or factor != 1:
        for name, v in (("mean", mean), ("variance", variance)):
            if v.size != depth:
                raise InvalidArgumentError(
                    f"{name} must have the same number of elements as the channels of x "
                    f"when is_training=false or exponential_avg_factor != 1: expected {depth}, "
                    f"found {v.size}")
    u = scale.dtype
    eps = u.type(ctx.attrs.get("epsilon", 1e-4))
    bshape = [1] * x.ndim
    bshape[c_axis] = depth
    axes = tuple(i for i in range(x.ndim) if i != c_axis)
    xf = x.astype(u, copy=False)
    extra = (np.zeros((), u),) if reserve_3 else ()

    if x.size == 0:
        # TF reports NaN statistics for an empty batch, in both modes.
        nan = np.full(scale.shape, np.nan, u)
        return (np.zeros(x.shape, x.dtype), nan, nan.copy(), nan.copy(), nan.copy()) + extra

    if training:
        n = x.size // depth
        inv_n = u.type(1.0 / n)
        batch_mean = np.sum(xf, axis=axes, dtype=u) * inv_n
        centered = xf - batch_mean.reshape(bshape)
        batch_var = np.sum(np.square(centered), axis=axes, dtype=u) * inv_n
        # Running variance is reported with Bessel's correction; normalisation uses the
        # biased one.
        adjust = u.type(n / max(n - 1, 1))
        if factor == 1:
            new_mean, new_var = batch_mean.copy(), batch_var * adjust
        else:
            one_minus = u.type(1) - factor
            new_mean = one_minus * mean + factor * batch_mean
            new_var = one_minus * variance + (factor * adjust) * batch_var
        saved_mean, saved_var = batch_mean, batch_var
        var_for_norm = batch_var
    else:
        centered = xf - mean.reshape(bshape)
        var_for_norm = variance
        new_mean, new_var = mean.copy(), variance.copy()
        saved_mean, saved_var = mean.copy(), variance.copy()
    mult = (u.type(1) / np.sqrt(var_for_norm + eps)) * scale
    y = centered * mult.reshape(bshape) + offset.reshape(bshape)
    return (y.astype(x.dtype, copy=False), new_mean.astype(u, copy=False),
            new_var.astype(u, copy=False), saved_mean, saved_var) + extra


@kernel("FusedBatchNorm", "FusedBatchNormV2", heavy=True)
def fused_batch_norm(ctx: KernelContext, x: np.ndarray, scale: np.ndarray, offset: np.ndarray,
                     mean: np.ndarray, variance: np.ndarray) -> tuple[np.ndarray, ...]:
    return _fused_batch_norm(ctx, x, scale, offset, mean, variance, reserve_3=False)


@kernel("FusedBatchNormV3", heavy=True)
def fused_batch_norm_v3(ctx: KernelContext, x: np.ndarray, scale: np.ndarray,
                        offset: np.ndarray, mean: np.ndarray,
                        variance: np.ndarray) -> tuple[np.ndarray, ...]:
    return _fused_batch_norm(ctx, x, scale, offset, mean, variance, reserve_3=True)


# ----------------------------------------------------------------------------------------------
# Softmax and activations


_F32 = np.dtype(np.float32)


def _softmax_input(x: np.ndarray) -> np.ndarray:
    if x.ndim < 1:
        raise InvalidArgumentError(f"logits must have >= 1 dimension, found shape {list(x.shape)}")
    return x.astype(_compute_dtype(x.dtype), copy=False)


def _native_softmax(xf: np.ndarray, dtype: np.dtype, as_log: bool) -> np.ndarray | None:
    """(Log-)softmax of float32 ``xf`` by the compiled kernel (executor/native/
    elementwise.c), or None when it is not built or refused. Any size: numpy's path is six
    passes and a classifier's head is small ((2, 10): 14 us standalone, 46 in a step)."""
    if xf.dtype != _F32 or not _native.enabled():
        return None
    return _native.softmax_f32(xf, as_log).astype(dtype, copy=False)


@kernel("Softmax")
def softmax(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _softmax_input(x)
    if xf.size == 0:
        return np.empty(x.shape, x.dtype)
    if (r := _native_softmax(xf, x.dtype, False)) is not None:
        return r
    e = xf - np.max(xf, axis=-1, keepdims=True)
    np.exp(e, out=e)                # in place: one buffer, not three
    # Multiply by the reciprocal of the sum, as TF does.
    s = np.sum(e, axis=-1, keepdims=True)
    e *= np.reciprocal(s, out=s)
    return e.astype(x.dtype, copy=False)


@kernel("LogSoftmax")
def log_softmax(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _softmax_input(x)
    if xf.size == 0:
        return np.empty(x.shape, x.dtype)
    if (r := _native_softmax(xf, x.dtype, True)) is not None:
        return r
    shifted = xf - np.max(xf, axis=-1, keepdims=True)
    shifted -= np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return shifted.astype(x.dtype, copy=False)


def _float_in(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind != "f":
        raise InvalidArgumentError(f"expected a floating-point input, found {x.dtype}")
    return x.astype(_compute_dtype(x.dtype), copy=False)


def _relu(x: np.ndarray) -> np.ndarray:
    # np.maximum keeps NaN, as TF's CPU Relu does.
    return np.maximum(x, x.dtype.type(0))


def _relu6(x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, x.dtype.type(0)), x.dtype.type(6))


# the kernels' cores as array forms (compiled programs call them directly) for real dtypes
_REAL = (D.FLOATING | D.INTEGER) - {D.DT_BFLOAT16}


@kernel("Relu", array=ArrayForm(lambda attrs: _relu, _REAL))
def relu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _relu(x)


@kernel("Relu6", array=ArrayForm(lambda attrs: _relu6, _REAL))
def relu6(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return _relu6(x)


@kernel("Elu")
def elu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _float_in(x)
    with np.errstate(over="ignore"):
        out = where(xf < 0, np.exp(xf) - 1, xf)
    return out.astype(x.dtype, copy=False)


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


@kernel("Selu")
def selu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _float_in(x)
    t = xf.dtype.type
    with np.errstate(over="ignore"):
        out = where(xf < 0, t(_SELU_SCALE * _SELU_ALPHA) * (np.exp(xf) - 1),
                       t(_SELU_SCALE) * xf)
    return out.astype(x.dtype, copy=False)


@kernel("Softplus")
def softplus(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _float_in(x)
    # Past these thresholds softplus(x) equals x (large x) or exp(x) (very negative x) to
    # machine precision; using them avoids exp overflow and log1p underflow. The threshold
    # uses the epsilon of the op's own dtype.
    thr = float(np.log(np.finfo(x.dtype).eps)) + 2
    with np.errstate(over="ignore"):
        e = np.exp(xf)
        out = where(xf > -thr, xf, where(xf < thr, e, np.log1p(e)))
    return out.astype(x.dtype, copy=False)


@kernel("Softsign")
def softsign(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _float_in(x)
    return (xf / (1 + np.abs(xf))).astype(x.dtype, copy=False)


@kernel("LeakyRelu")
def leaky_relu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    xf = _float_in(x)
    alpha = xf.dtype.type(ctx.attrs.get("alpha", 0.2))
    return leaky_relu_into(xf, alpha, None).astype(x.dtype, copy=False)


_LEAKY_CODE = np.array([_native.CHAIN_LEAKY, 0, 1], np.int32).tobytes()


def leaky_relu_into(x: np.ndarray, alpha: Any, out: np.ndarray | None) -> np.ndarray:
    """x > 0 ? x : x * alpha (into ``out``, which may be ``x``). For 0 < alpha <= 1 that is
    max(x, x * alpha), two passes and no mask (a (64,14,14,64) one: 2.3 ms -> ~0.3): the
    same values, NaN kept, and -0.0 * alpha is -0.0 as the select gives; on a large float32
    array one compiled pass of those two operations, split on the pool (_native.chain_on)."""
    if 0 < alpha <= 1:
        if out is None and x.dtype is _F32 and x.size >= _native.BROADCAST_MIN:
            r = _native.chain_on(_LEAKY_CODE, (x, np.array([alpha], _F32)))
            if r is not None:
                return r
        t = np.multiply(x, alpha)
        return np.maximum(x, t, out=t if out is None else out)
    r = where(x > 0, x, x * alpha)
    if out is None:
        return r
    np.copyto(out, r)
    return out


# ----------------------------------------------------------------------------------------------
# Local response normalization


@kernel("LRN")
def lrn(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """out = x / (bias + alpha * sum(x[..., d-r:d+r+1] ** 2)) ** beta, over the last axis."""
    _check_rank(x, 4, "input")
    r = int(ctx.attrs.get("depth_radius", 5))
    if r < 0:
        raise InvalidArgumentError(f"depth_radius must be >= 0, found {r}")
    xf = _float_in(x)
    t = xf.dtype.type
    bias, alpha, beta = (t(ctx.attrs.get(k, d)) for k, d in
                         (("bias", 1.0), ("alpha", 1.0), ("beta", 0.5)))
    sq = np.square(xf)
    depth = x.shape[-1]
    acc = sq.copy()
    # Add the channel window as shifted slices; offsets beyond the depth add nothing.
    for o in range(1, min(r, depth - 1) + 1):
        acc[..., o:] += sq[..., :-o]
        acc[..., :-o] += sq[..., o:]
    out = xf * np.power(bias + alpha * acc, -beta)
    return out.astype(x.dtype, copy=False)


def _window_sum(v: np.ndarray, r: int) -> np.ndarray:
    """Sum over the channel window [d - r, d + r] (clipped to the depth) of the last axis."""
    acc = v.copy()
    for o in range(1, min(r, v.shape[-1] - 1) + 1):
        acc[..., o:] += v[..., :-o]
        acc[..., :-o] += v[..., o:]
    return acc


@kernel("LRNGrad")
def lrn_grad(ctx: KernelContext, dy: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """TF's CPU LRNGrad: with norm = bias + alpha * window_sum(x^2),
    dx[k] = dy[k] * norm[k]^-beta - 2 alpha beta x[k] * sum over windows j holding k of
    y[j] dy[j] / norm[j] (float32 and float16 only; float16 computed in float32)."""
    if dy.dtype.name not in ("float32", "float16"):
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op 'LRNGrad' with T={dy.dtype.name} on "
            "CPU: TensorFlow registers it for float32, float16")
    if dy.ndim != 4 or x.ndim != 4:
        raise InvalidArgumentError("inputs must be 4-dimensional")
    if x.shape != dy.shape or y.shape != dy.shape:
        raise InvalidArgumentError(
            "input_grads, input_image, and out_image should have the same shape")
    r = int(ctx.attrs.get("depth_radius", 5))
    if r < 0:
        raise InvalidArgumentError(f"depth_radius must be >= 0, found {r}")
    g, xf, yf = (_float_in(a) for a in (dy, x, y))
    t = xf.dtype.type
    bias, alpha, beta = (t(ctx.attrs.get(k, d)) for k, d in
                         (("bias", 1.0), ("alpha", 1.0), ("beta", 0.5)))
    norm = alpha * _window_sum(np.square(xf), r) + bias
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        spread = _window_sum(t(-2) * alpha * beta * yf / norm * g, r)
        out = xf * spread + g * np.power(norm, -beta)
    return out.astype(dy.dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# Image resizing


def _size_pair(size: np.ndarray) -> tuple[int, int]:
    """The (height, width) of a resize op's ``size`` input: 2 positive ints."""
    size = np.asarray(size)
    if size.ndim != 1 or size.size != 2:
        raise InvalidArgumentError(
            f"size must be a 1-D tensor of 2 elements, found shape {list(size.shape)}")
    h, w = (int(v) for v in size)
    if h <= 0 or w <= 0:
        raise InvalidArgumentError(f"output dimensions must be positive, found {[h, w]}")
    return h, w


def _align_half(ctx: KernelContext) -> tuple[bool, bool]:
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))
    if align and half:
        raise InvalidArgumentError(
            "if half_pixel_centers is True, align_corners must be False")
    return align, half


def _resize_args(ctx: KernelContext, images: np.ndarray,
                 size: np.ndarray) -> tuple[int, int, bool, bool]:
    _check_rank(images, 4, "input")
    oh, ow = _size_pair(size)
    if images.shape[1] <= 0 or images.shape[2] <= 0:
        raise InvalidArgumentError(
            f"input image must be of non-zero size, found shape {list(images.shape)}")
    return (oh, ow, *_align_half(ctx))


def _resize_scale(in_size: int, out_size: int, align: bool) -> np.float32:
    if align and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _source_coords(out_size: int, in_size: int, align: bool, half: bool,
                   shift: bool) -> np.ndarray:
    """Float32 source coordinate of each output index (half-pixel shifts back by 0.5 when
    ``shift``; nearest-neighbour leaves that to its floor)."""
    scale = _resize_scale(in_size, out_size, align)
    i = np.arange(out_size, dtype=np.float32)
    if half:
        c = (i + np.float32(0.5)) * scale
        return c - np.float32(0.5) if shift else c
    return i * scale


def _lerp_table(out_size: int, in_size: int, align: bool,
                half: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    src = _source_coords(out_size, in_size, align, half, shift=True)
    fl = np.floor(src)
    lower = np.maximum(fl.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    return lower, upper, (src - fl).astype(np.float32)


@kernel("ResizeBilinear", heavy=True)
def resize_bilinear(ctx: KernelContext, images: np.ndarray, size: np.ndarray) -> np.ndarray:
    oh, ow, align, half = _resize_args(ctx, images, size)
    img = images.astype(np.float32, copy=False)
    y0, y1, ylerp = _lerp_table(oh, images.shape[1], align, half)
    x0, x1, xlerp = _lerp_table(ow, images.shape[2], align, half)
    top, bottom = img[:, y0], img[:, y1]
    xl = xlerp[None, None, :, None]
    tl, tr, bl, br = top[:, :, x0], top[:, :, x1], bottom[:, :, x0], bottom[:, :, x1]
    t = tl + (tr - tl) * xl
    b = bl + (br - bl) * xl
    return t + (b - t) * ylerp[None, :, None, None]


def _nearest_index(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    src = _source_coords(out_size, in_size, align, half, shift=False)
    fl = np.floor(src)
    if align:
        # roundf: halves away from zero (coordinates are non-negative here). Comparing the
        # exact fraction avoids the float rounding of src + 0.5.
        fl = fl + (src - fl >= np.float32(0.5))
    idx = np.minimum(fl.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


@kernel("ResizeNearestNeighbor")
def resize_nearest_neighbor(ctx: KernelContext, images: np.ndarray,
                            size: np.ndarray) -> np.ndarray:
    oh, ow, align, half = _resize_args(ctx, images, size)
    yi = _nearest_index(oh, images.shape[1], align, half)
    xi = _nearest_index(ow, images.shape[2], align, half)
    return images[:, yi][:, :, xi]




def _grad_args(ctx: KernelContext, grads: np.ndarray,
               image: np.ndarray) -> tuple[int, int, bool, bool]:
    _check_rank(grads, 4, "input_grad")
    _check_rank(image, 4, "original_image")
    # TF reads only the image's height and width: batch and depth come from grads
    return (image.shape[1], image.shape[2], *_align_half(ctx))


@kernel("ResizeBilinearGrad")
def resize_bilinear_grad(ctx: KernelContext, grads: np.ndarray,
                         image: np.ndarray) -> np.ndarray:
    """Each output gradient spread over the four input pixels ResizeBilinear read, with the
    same weights (TF's table of lerps)."""
    h, w, align, half = _grad_args(ctx, grads, image)
    oh, ow = grads.shape[1], grads.shape[2]
    # contributions are float32 products (grads and lerps are float32), summed in the
    # image's precision (TF's order of additions differs: ~1 float32 ulp for double)
    acc_t = np.float64 if image.dtype == np.float64 else np.float32
    f32 = np.float32
    g = grads.astype(f32, copy=False)
    y0, y1, ylerp = _lerp_table(oh, h, align, half)
    x0, x1, xlerp = _lerp_table(ow, w, align, half)
    yl = ylerp.astype(f32)[:, None]
    xl = xlerp.astype(f32)[None, :]
    out = np.zeros((grads.shape[0], h, w, grads.shape[3]), acc_t)
    yy = {0: y0[:, None], 1: y1[:, None]}
    xx = {0: x0[None, :], 1: x1[None, :]}
    one = f32(1)
    weights = {(0, 0): (one - yl) * (one - xl), (0, 1): (one - yl) * xl,
               (1, 0): yl * (one - xl), (1, 1): yl * xl}
    for (a, b), wt in weights.items():
        ys = np.broadcast_to(yy[a], (oh, ow)).reshape(-1)
        xs = np.broadcast_to(xx[b], (oh, ow)).reshape(-1)
        contrib = (g * wt[None, :, :, None]).astype(acc_t).reshape(g.shape[0], oh * ow, -1)
        flat = out.reshape(out.shape[0], h * w, -1)
        np.add.at(flat, (slice(None), ys * w + xs), contrib)
    return out.astype(image.dtype, copy=False)


@kernel("ResizeNearestNeighborGrad")
def resize_nearest_neighbor_grad(ctx: KernelContext, grads: np.ndarray,
                                 size: np.ndarray) -> np.ndarray:
    """Each output gradient added to the input pixel ResizeNearestNeighbor copied it from."""
    _check_rank(grads, 4, "input")
    h, w = _size_pair(size)
    align, half = _align_half(ctx)
    oh, ow = grads.shape[1], grads.shape[2]
    # the forward op's index tables, read from the gradient's side (sizes swapped as TF does)
    yi = _nearest_index(oh, h, align, half)
    xi = _nearest_index(ow, w, align, half)
    out = np.zeros((grads.shape[0], h * w, grads.shape[3]), grads.dtype)
    idx = (yi[:, None] * w + xi[None, :]).reshape(-1)
    np.add.at(out, (slice(None), idx), grads.reshape(grads.shape[0], oh * ow, -1))
    return out.reshape(grads.shape[0], h, w, grads.shape[3])


@kernel("BatchNormWithGlobalNormalization")
def batch_norm_with_global_normalization(ctx: KernelContext, t: np.ndarray, m: np.ndarray,
                                         v: np.ndarray, beta: np.ndarray,
                                         gamma: np.ndarray) -> np.ndarray:
    """The pre-FusedBatchNorm op of TF1 graphs (Inception v3's 2015 graph has it):
    ``(t - m) * (rsqrt(v + eps) * gamma) + beta``, in TF's order of operations."""
    _check_rank(t, 4, "input")
    depth = t.shape[-1]
    for name, a in (("mean", m), ("variance", v), ("beta", beta), ("gamma", gamma)):
        if a.ndim != 1 or a.shape[0] != depth:
            raise InvalidArgumentError(
                f"{name} must be a 1-D vector of the input's depth {depth}, found shape "
                f"{list(a.shape)}")
    dt = t.dtype
    eps = dt.type(ctx.attrs.get("variance_epsilon", 0.0))
    scale = (np.float64(1) / np.sqrt((v + eps).astype(np.float64))).astype(dt)
    if ctx.attrs.get("scale_after_normalization", False):
        scale = scale * gamma
    return ((t - m) * scale + beta).astype(dt, copy=False)


# ----------------------------------------------------------------------------------------------
# 3-D convolution and pooling (NDHWC only, as TensorFlow's CPU kernels)


def _ndhwc_only(ctx: KernelContext, message: str) -> None:
    fmt = ctx.attrs.get("data_format", "NDHWC") or "NDHWC"
    if fmt == "NCDHW":
        raise InvalidArgumentError(message)
    if fmt != "NDHWC":
        raise InvalidArgumentError(f"unsupported data_format {fmt!r}: expected NDHWC")


def _five(vals: Any, name: str) -> list[int]:
    vals = [int(v) for v in (vals if vals is not None else [])]
    if len(vals) != 5:
        raise InvalidArgumentError(f"{name} must specify 5 dimensions, found {len(vals)}: {vals}")
    return vals


def _padding_3d(ctx: KernelContext) -> str:
    padding = ctx.attrs.get("padding")
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"padding must be SAME or VALID, found {padding!r}")
    return padding


def _windows_3d(shape: tuple[int, ...], ksize: tuple[int, ...], strides: list[int],
                dilations: list[int], padding: str) -> list[tuple[int, int]]:
    """(output size, padding before) for each of the three spatial dimensions."""
    return [_window(shape[1 + i], ksize[i], dilations[i], strides[i], padding, None)
            for i in range(3)]


@kernel("Conv3D", heavy=True, blas=True)
def conv3d(ctx: KernelContext, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """NDHWC convolution as im2col (one strided-view copy of the padded input) plus a matmul.

    TensorFlow's CPU kernel rejects dilations > 1; this computes the dilated convolution as
    defined (what TF's GPU kernel and tf.nn.convolution's space-to-batch rewrite give).
    """
    _ndhwc_only(ctx, "CPU implementation of Conv3D currently only supports the NHWC tensor "
                     "format.")
    _check_rank(x, 5, "input")
    _check_rank(f, 5, "filter")
    x, f, dt = _conv_inputs(x, f)
    st = _five(ctx.attrs.get("strides"), "strides")
    dl = _five(ctx.attrs.get("dilations") or [1] * 5, "dilations")
    if st[0] != 1 or st[4] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support strides in the batch and depth "
            "dimensions.")
    if dl[0] != 1 or dl[4] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support dilations in the batch and depth "
            "dimensions.")
    kd, kh, kw, fc, oc = f.shape
    n, c = x.shape[0], x.shape[4]
    if fc != c:
        raise InvalidArgumentError(
            f"Number of channels in filter ({fc}) must match last dimension of input ({c})")
    geo = _windows_3d(x.shape, (kd, kh, kw), st[1:4], dl[1:4], _padding_3d(ctx))
    outs = tuple(o for o, _ in geo)
    if min((n, c, oc) + outs) == 0:
        return np.zeros((n,) + outs + (oc,), dt)
    wmat = f.reshape(-1, oc)
    out = np.empty((n,) + outs + (oc,), x.dtype)
    for n0, n1, cols in _patches_3d(x, geo, f.shape[:3], st, dl):
        np.matmul(cols, wmat, out=out[n0:n1].reshape(-1, oc))
    return out.astype(dt, copy=False)


def _patches_3d(x: np.ndarray, geo: list[tuple[int, int]], ks: tuple[int, ...],
                st: list[int], dl: list[int]) -> Any:
    """im2col of NDHWC ``x``, a batch chunk at a time: (n0, n1, (M, KD*KH*KW*C) matrix)."""
    n, c = x.shape[0], x.shape[4]
    outs = tuple(o for o, _ in geo)
    # Pad just enough for every window read (zeros stand for the SAME padding).
    need = [max(b + x.shape[1 + i], (geo[i][0] - 1) * st[1 + i]
                + (ks[i] - 1) * dl[1 + i] + 1) for i, (_, b) in enumerate(geo)]
    if need != list(x.shape[1:4]):
        xp = np.zeros((n, *need, c), x.dtype)
        xp[:, geo[0][1]:geo[0][1] + x.shape[1], geo[1][1]:geo[1][1] + x.shape[2],
           geo[2][1]:geo[2][1] + x.shape[3]] = x
    else:
        xp = np.ascontiguousarray(x)
    sn, sd, sh, sw, sc = xp.strides
    k = math.prod(ks) * c
    per_image = math.prod(outs) * k * x.dtype.itemsize
    step = max(1, _PATCH_BYTES // max(per_image, 1))
    for n0 in range(0, n, step):
        n1 = min(n0 + step, n)
        win = as_strided(xp[n0:], (n1 - n0,) + outs + tuple(ks) + (c,),
                         (sn, sd * st[1], sh * st[2], sw * st[3],
                          sd * dl[1], sh * dl[2], sw * dl[3], sc), writeable=False)
        yield n0, n1, np.ascontiguousarray(win).reshape(-1, k)


@kernel("Conv3DBackpropInputV2", heavy=True, blas=True)
def conv3d_backprop_input_v2(ctx: KernelContext, input_sizes: np.ndarray, f: np.ndarray,
                             dy: np.ndarray) -> np.ndarray:
    """Gradient of Conv3D with respect to its input (Keras' Conv3DTranspose).

    Per filter tap, ``dy @ f[tap]^T`` is added to the input positions that tap read in the
    forward convolution; positions in the padding are dropped (taps clipped with
    ``_tap_range``, as in the 2-D kernel)."""
    _ndhwc_only(ctx, "CPU implementation of Conv3DBackpropInputV2 currently only supports "
                     "the NHWC tensor format.")
    _check_rank(f, 5, "filter")
    _check_rank(dy, 5, "out_backprop")
    sizes = _sizes_vector(input_sizes, "input_sizes")
    if len(sizes) != 5 or any(s < 0 for s in sizes):
        raise InvalidArgumentError(
            f"input_sizes must hold 5 non-negative sizes (NDHWC), found {sizes}")
    dy, f, dt = _conv_inputs(dy, f)
    st = _five(ctx.attrs.get("strides"), "strides")
    dl = _five(ctx.attrs.get("dilations") or [1] * 5, "dilations")
    if st[0] != 1 or st[4] != 1 or dl[0] != 1 or dl[4] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support strides or dilations in the batch "
            "and depth dimensions.")
    kd, kh, kw, fc, oc = f.shape
    n, c = sizes[0], sizes[4]
    if fc != c:
        raise InvalidArgumentError(
            f"Number of channels in filter ({fc}) must match last dimension of input_sizes "
            f"({c})")
    geo = _windows_3d(tuple(sizes), (kd, kh, kw), st[1:4], dl[1:4], _padding_3d(ctx))
    want = (n,) + tuple(o for o, _ in geo) + (oc,)
    if dy.shape != want:
        raise InvalidArgumentError(
            f"out_backprop must have shape {list(want)} for input_sizes {sizes}, found "
            f"{list(dy.shape)}")
    dx = np.zeros(sizes, dy.dtype)
    if dy.size == 0 or dx.size == 0:
        return dx.astype(dt, copy=False)
    for taps in np.ndindex(kd, kh, kw):
        out_idx, in_idx = [slice(None)], [slice(None)]
        for i, t in enumerate(taps):
            n_out, before = geo[i]
            s0 = t * dl[1 + i] - before
            a, b = _tap_range(n_out, s0, st[1 + i], sizes[1 + i])
            if b <= a:
                break
            out_idx.append(slice(a, b))
            in_idx.append(slice(s0 + a * st[1 + i], s0 + (b - 1) * st[1 + i] + 1, st[1 + i]))
        else:
            dx[tuple(in_idx)] += dy[tuple(out_idx)] @ f[taps].T
    return dx.astype(dt, copy=False)


def _conv3d_backprop_filter(ctx: KernelContext, x: np.ndarray, fs: list[int],
                            dy: np.ndarray, op: str) -> np.ndarray:
    """Gradient of Conv3D with respect to its filter: im2col(x)^T @ out_backprop."""
    _ndhwc_only(ctx, f"{op} only supports NDHWC on the CPU.")
    _check_rank(x, 5, "input")
    _check_rank(dy, 5, "out_backprop")
    if len(fs) != 5 or any(s < 0 for s in fs):
        raise InvalidArgumentError(f"filter_sizes must hold 5 non-negative sizes, found {fs}")
    x, dy, dt = _conv_inputs(x, dy)
    st = _five(ctx.attrs.get("strides"), "strides")
    dl = _five(ctx.attrs.get("dilations") or [1] * 5, "dilations")
    if st[0] != 1 or st[4] != 1:
        raise InvalidArgumentError(
            "Current implementation does not yet support strides in the batch and depth "
            "dimensions.")
    if any(d != 1 for d in dl):
        raise InvalidArgumentError(
            "Current CPU implementation does not yet support dilation rates larger than 1.")
    kd, kh, kw, fc, oc = fs
    n, c = x.shape[0], x.shape[4]
    if fc != c:
        raise InvalidArgumentError(
            f"{op}: input and filter must have the same depth: {c} vs {fc}")
    geo = _windows_3d(x.shape, (kd, kh, kw), st[1:4], dl[1:4], _padding_3d(ctx))
    want = (n,) + tuple(o for o, _ in geo) + (oc,)
    if dy.shape != want:
        raise InvalidArgumentError(
            f"{op}: out_backprop must have shape {list(want)}, found {list(dy.shape)}")
    df = np.zeros((kd * kh * kw * c, oc), x.dtype)
    if dy.size and x.size:
        for n0, n1, cols in _patches_3d(x, geo, (kd, kh, kw), st, dl):
            df += cols.T @ dy[n0:n1].reshape(-1, oc)
    return df.reshape(fs).astype(dt, copy=False)


@kernel("Conv3DBackpropFilterV2", heavy=True, blas=True)
def conv3d_backprop_filter_v2(ctx: KernelContext, x: np.ndarray, filter_sizes: np.ndarray,
                              dy: np.ndarray) -> np.ndarray:
    return _conv3d_backprop_filter(ctx, x, _sizes_vector(filter_sizes, "filter_sizes"), dy,
                                   "Conv3DBackpropFilterOpV2")


@kernel("Conv3DBackpropFilter")
def conv3d_backprop_filter(ctx: KernelContext, x: np.ndarray, f: np.ndarray,
                           dy: np.ndarray) -> np.ndarray:
    """The v1 op (GraphDefs of producer version < 10): the filter's shape from a tensor."""
    return _conv3d_backprop_filter(ctx, x, list(f.shape), dy, "Conv3DBackpropFilterOp")


def _pool3d_params(ctx: KernelContext, x: np.ndarray) -> tuple[list[tuple[int, int]],
                                                                list[int], list[int]]:
    _ndhwc_only(ctx, "Default Pooling3DOp only supports NDHWC on device type CPU")
    _check_rank(x, 5, "input")
    ks = _five(ctx.attrs.get("ksize"), "ksize")
    st = _five(ctx.attrs.get("strides"), "strides")
    if min(ks) <= 0 or min(st) <= 0:
        raise InvalidArgumentError(
            f"ksize and strides must be positive, found {ks} and {st}")
    if ks[0] != 1 or st[0] != 1:
        raise InvalidArgumentError("Pooling is not yet supported on the batch dimension.")
    if ks[4] != 1 or st[4] != 1:
        raise UnimplementedError("Pooling is not yet supported on the depth dimension.")
    geo = _windows_3d(x.shape, tuple(ks[1:4]), st[1:4], [1, 1, 1], _padding_3d(ctx))
    return geo, ks[1:4], st[1:4]


def _pool3d_taps(x: np.ndarray, geo: list[tuple[int, int]], ks: list[int],
                 st: list[int]) -> Any:
    """Per filter tap: the output box reading real input and the matching input slices."""
    for taps in np.ndindex(*ks):
        out_idx, in_idx = [slice(None)], [slice(None)]
        for i, t in enumerate(taps):
            n_out, before = geo[i]
            s0 = t - before
            a, b = _tap_range(n_out, s0, st[i], x.shape[1 + i])
            if b <= a:
                break
            out_idx.append(slice(a, b))
            in_idx.append(slice(s0 + a * st[i], s0 + (b - 1) * st[i] + 1, st[i]))
        else:
            yield tuple(out_idx), tuple(in_idx)


@kernel("MaxPool3D", heavy=True)
def max_pool3d(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    geo, ks, st = _pool3d_params(ctx, x)
    shape = (x.shape[0],) + tuple(o for o, _ in geo) + (x.shape[4],)
    # TF's Eigen kernel (oneDNN off) lets each element replace the window's value unless it
    # is smaller: a NaN does, and a number after it replaces the NaN again. Without NaN that
    # is np.maximum; with NaN, np.fmax then the NaNs put back (one max() finds them: ~2x
    # slower only then). TF also folds SAME padding in, whose lowest value replaces a NaN
    # too; that is not followed here.
    out = np.full(shape, _conv.pool_lowest(x.dtype), x.dtype)
    if out.size:
        has_nan = x.dtype.kind == "f" and bool(np.isnan(x.max()))
        for o, i in _pool3d_taps(x, geo, ks, st):
            acc, v = out[o], x[i]
            if has_nan:
                np.fmax(acc, v, out=acc)
                np.copyto(acc, v, where=np.isnan(v))
            else:
                np.maximum(acc, v, out=acc)
            out[o] = acc
    return out


@kernel("AvgPool3D", heavy=True)
def avg_pool3d(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    geo, ks, st = _pool3d_params(ctx, x)
    shape = (x.shape[0],) + tuple(o for o, _ in geo) + (x.shape[4],)
    cdt = _compute_dtype(x.dtype)
    total = np.zeros(shape, cdt)
    if total.size:
        for o, i in _pool3d_taps(x, geo, ks, st):
            total[o] += x[i]
    # Windows average over their real (non-padding) elements: a product of per-axis counts.
    count = np.ones((1,) * 5, cdt)
    for ax, ((n_out, before), k, s) in enumerate(zip(geo, ks, st)):
        start = np.arange(n_out) * s - before
        cnt = np.minimum(start + k, x.shape[1 + ax]) - np.maximum(start, 0)
        count = count * cnt.reshape([-1 if d == 1 + ax else 1 for d in range(5)]).astype(cdt)
    return (total / count).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# InTopK


@kernel("InTopKV2")
def in_top_k_v2(ctx: KernelContext, predictions: np.ndarray, targets: np.ndarray,
                k: np.ndarray) -> np.ndarray:
    if np.ndim(k) != 0:
        raise InvalidArgumentError(f"k must be 0-D, got shape {list(np.shape(k))}")
    return _in_top_k(predictions, targets, int(k))


def _in_top_k(predictions: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    if predictions.ndim != 2:
        raise InvalidArgumentError(
            f"predictions must be 2-dimensional, found shape {list(predictions.shape)}")
    if targets.ndim != 1:
        raise InvalidArgumentError(
            f"targets must be 1-dimensional, found shape {list(targets.shape)}")
    b, c = predictions.shape
    if targets.shape[0] != b:
        raise InvalidArgumentError(
            f"First dimension of predictions {b} must match length of targets "
            f"{targets.shape[0]}")
    t = targets.astype(np.int64)
    valid = (t >= 0) & (t < c)
    if c == 0:
        return np.zeros(b, dtype=bool)
    target_pred = predictions[np.arange(b), where(valid, t, 0)]
    # TF cannot say (and answers false) for a bad target or any non-finite prediction in
    # the row; otherwise it counts the classes strictly more probable than the target.
    finite = np.isfinite(predictions).all(axis=1)
    more = (predictions > target_pred[:, None]).sum(axis=1)
    return valid & finite & (more < k)


@kernel("InTopK")
def in_top_k(ctx: KernelContext, predictions: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return _in_top_k(predictions, targets, int(ctx.attrs.get("k")))


# ----------------------------------------------------------------------------------------------
# MaxPoolWithArgmax and its gradient


def _fmt_shape(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _lowest(dt: np.dtype) -> Any:
    """Eigen::NumTraits<T>::lowest(): the most negative finite value."""
    return np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min


def _argmax_pool_params(ctx: KernelContext, x: np.ndarray) -> tuple[int, int, int, int,
                                                                        int, int, int, int]:
    """(window, stride, output size and padding before) per spatial axis, as TF's
    PoolParameters gives them for NHWC: (kh, kw, sh, sw, oh, ow, pad_top, pad_left)."""
    ks = [int(v) for v in ctx.attrs.get("ksize") or []]
    st = [int(v) for v in ctx.attrs.get("strides") or []]
    if len(ks) != 4:
        raise InvalidArgumentError("Sliding window ksize field must specify 4 dimensions")
    if len(st) != 4:
        raise InvalidArgumentError("Sliding window stride field must specify 4 dimensions")
    if ks[0] != 1 or st[0] != 1:
        raise UnimplementedError("Pooling is not yet supported on the batch dimension.")
    if x.ndim != 4:
        raise InvalidArgumentError(f"tensor_in must be 4-dimensional, found shape "
                                   f"{list(x.shape)}")
    n, h, w, c = x.shape
    if ks[3] != 1:
        # Pooling across depth: TF keeps the spatial size, pools 1x1 windows and reports
        # every channel unpooled (what MaxPoolWithArgmax gives on CPU).
        if ks[1] != 1 or ks[2] != 1:
            raise UnimplementedError("MaxPooling supports exactly one of pooling across depth "
                                     "or pooling across width/height.")
        if c % ks[3]:
            raise UnimplementedError("Depthwise max pooling requires the depth window to "
                                     "evenly divide the input depth")
        if st[3] != ks[3]:
            raise UnimplementedError("Depthwise max pooling requires the depth window to "
                                     "equal the depth stride")
        return 1, 1, st[1], st[2], h, w, 0, 0
    padding = ctx.attrs.get("padding")
    oh, pt = _window(h, ks[1], 1, st[1], padding, None)
    ow, pl = _window(w, ks[2], 1, st[2], padding, None)
    return ks[1], ks[2], st[1], st[2], oh, ow, pt, pl


@kernel("MaxPoolWithArgmax")
def max_pool_with_argmax(ctx: KernelContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Max pooling (NHWC) and each maximum's flat index: ``(y * W + x) * C + c``, plus
    ``b * H * W * C`` with include_batch_in_index. Ties and NaN keep the first element in
    row-major window order (a later element wins only if strictly greater)."""
    kh, kw, sh, sw, oh, ow, pt, pl = _argmax_pool_params(ctx, x)
    if x.size == 0:
        raise InvalidArgumentError(f"tensor_in must not be empty, found shape {list(x.shape)}")
    n, h, w, c = x.shape
    batch_index = bool(ctx.attrs.get("include_batch_in_index", False))
    out = np.full((n, oh, ow, c), _lowest(x.dtype), x.dtype)
    arg = np.full((n, oh, ow, c), -1, np.int64)
    rows0 = np.arange(oh) * sh - pt
    cols0 = np.arange(ow) * sw - pl
    chans = np.arange(c)
    base = (np.arange(n) * (h * w * c))[:, None, None, None] if batch_index else 0
    for i in range(kh):
        rows = rows0 + i
        r_ok = (rows >= 0) & (rows < h)
        rc = np.clip(rows, 0, h - 1)
        for j in range(kw):
            cols = cols0 + j
            ok = r_ok[:, None] & ((cols >= 0) & (cols < w))[None, :]
            if not ok.any():
                continue
            cc = np.clip(cols, 0, w - 1)
            v = x[:, rc][:, :, cc]
            take = ok[None, :, :, None] & ((arg < 0) | (out < v))
            np.copyto(out, v, where=take)
            flat = ((rc[:, None] * w + cc[None, :]) * c)[None, :, :, None] + chans + base
            np.copyto(arg, np.broadcast_to(flat, arg.shape), where=take)
    dt = np.dtype(ctx.attrs.get("Targmax", np.int64))
    return out, arg.astype(dt)


@kernel("MaxPoolGradWithArgmax")
def max_pool_grad_with_argmax(ctx: KernelContext, x: np.ndarray, grad: np.ndarray,
                              argmax: np.ndarray) -> np.ndarray:
    """Scatter-add ``grad`` to the input positions ``argmax`` names (per image when the
    indices leave the batch out). TF's CPU kernel takes int64 indices only."""
    if argmax.dtype != np.int64:
        raise InvalidArgumentError(
            "No OpKernel was registered to support Op 'MaxPoolGradWithArgmax' with Targmax="
            f"{argmax.dtype} on CPU: TensorFlow registers it for int64 only")
    _, _, _, _, oh, ow, _, _ = _argmax_pool_params(ctx, x)
    n, h, w, c = x.shape
    want = [n, oh, ow, c]
    if list(grad.shape) != want:
        raise InvalidArgumentError(
            f"Expected grad shape to be {_fmt_shape(want)}, but got {_fmt_shape(grad.shape)}")
    if list(argmax.shape) != want:
        raise InvalidArgumentError(
            f"Expected argmax shape to be {_fmt_shape(want)}, but got "
            f"{_fmt_shape(argmax.shape)}")
    out = np.zeros(x.shape, grad.dtype)
    if grad.size == 0:
        return out
    per = h * w * c
    first = np.arange(n)[:, None] * per
    idx = argmax.reshape(n, -1)
    if not ctx.attrs.get("include_batch_in_index", False):
        idx = idx + first
    bad = (idx < first) | (idx >= first + per)
    if bad.any():
        # TF's kernel aborts the process on these (a CHECK failure).
        raise InvalidArgumentError(
            f"Invalid output gradient index {int(argmax.reshape(n, -1)[bad][0])}: argmax must "
            f"index the input of its own image")
    np.add.at(out.reshape(-1), idx.reshape(-1), grad.reshape(-1))
    return out


# ----------------------------------------------------------------------------------------------
# Dilation2D (grayscale morphological dilation) and its gradients


def _dilation_params(ctx: KernelContext, x: np.ndarray, f: np.ndarray) -> tuple[Any, ...]:
    st = [int(v) for v in ctx.attrs.get("strides") or []]
    if len(st) != 4:
        raise InvalidArgumentError("Sliding window stride field must specify 4 dimensions")
    if st[0] != 1 or st[3] != 1:
        raise UnimplementedError("Stride is only supported across spatial dimensions.")
    rt = [int(v) for v in ctx.attrs.get("rates") or []]
    if len(rt) != 4:
        raise InvalidArgumentError(
            "Input stride (atrous rate) field must specify 4 dimensions")
    if rt[0] != 1 or rt[3] != 1:
        raise UnimplementedError("Rate is only supported across spatial dimensions.")
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional{_fmt_shape(x.shape)}")
    if f.ndim != 3:
        raise InvalidArgumentError(f"filter must be 3-dimensional: {_fmt_shape(f.shape)}")
    if x.shape[3] != f.shape[2]:
        raise InvalidArgumentError(
            f"input and filter must have the same depth: {x.shape[3]} vs {f.shape[2]}")
    padding = ctx.attrs.get("padding")
    oh, pt = _window(x.shape[1], f.shape[0], rt[1], st[1], padding, None)
    ow, pl = _window(x.shape[2], f.shape[1], rt[2], st[2], padding, None)
    return st[1], st[2], rt[1], rt[2], oh, ow, pt, pl


def _dilation(x: np.ndarray, f: np.ndarray, p: tuple[Any, ...]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """max over taps of x + filter (T arithmetic, starting from T's lowest value, a tap wins
    only if strictly greater), with the winning tap's input row/column and filter index."""
    sh, sw, rh, rw, oh, ow, pt, pl = p
    n, h, w, c = x.shape
    fh, fw = f.shape[:2]
    out = np.full((n, oh, ow, c), _lowest(x.dtype), x.dtype)
    rows0 = np.arange(oh) * sh - pt
    cols0 = np.arange(ow) * sw - pl
    # Before any tap wins, TF's input position is the window start clipped at 0, its filter
    # tap (0, 0).
    in_r = np.broadcast_to(np.maximum(rows0, 0)[None, :, None, None], out.shape).copy()
    in_c = np.broadcast_to(np.maximum(cols0, 0)[None, None, :, None], out.shape).copy()
    tap = np.zeros(out.shape, np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(fh):
            rows = rows0 + i * rh
            r_ok = (rows >= 0) & (rows < h)
            rc = np.clip(rows, 0, max(h - 1, 0))
            for j in range(fw):
                cols = cols0 + j * rw
                ok = r_ok[:, None] & ((cols >= 0) & (cols < w))[None, :]
                if not ok.any():
                    continue
                cc = np.clip(cols, 0, max(w - 1, 0))
                v = x[:, rc][:, :, cc] + f[i, j]
                take = ok[None, :, :, None] & (v > out)
                np.copyto(out, v, where=take)
                np.copyto(in_r, np.broadcast_to(rc[None, :, None, None], out.shape), where=take)
                np.copyto(in_c, np.broadcast_to(cc[None, None, :, None], out.shape), where=take)
                np.copyto(tap, i * fw + j, where=take)
    return out, in_r, in_c, tap


def _dilation_backprop_args(ctx: KernelContext, x: np.ndarray, f: np.ndarray,
                            dy: np.ndarray) -> tuple[Any, ...]:
    p = _dilation_params(ctx, x, f)
    if dy.ndim != 4:
        raise InvalidArgumentError(f"out_backprop must be 4-dimensional{_fmt_shape(dy.shape)}")
    if dy.shape != (x.shape[0], p[4], p[5], x.shape[3]):
        raise InvalidArgumentError("out_backprop has incompatible size.")
    return p


@kernel("Dilation2D")
def dilation2d(ctx: KernelContext, x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """out[b, y, x, c] = max over filter taps (i, j) of input[b, y*sh + i*rh - pad_top,
    x*sw + j*rw - pad_left, c] + filter[i, j, c], taps in the padding skipped."""
    p = _dilation_params(ctx, x, f)
    if 0 in (x.shape[0], p[4], p[5], x.shape[3]):
        return np.zeros((x.shape[0], p[4], p[5], x.shape[3]), x.dtype)
    return _dilation(x, f, p)[0]


@kernel("Dilation2DBackpropInput")
def dilation2d_backprop_input(ctx: KernelContext, x: np.ndarray, f: np.ndarray,
                              dy: np.ndarray) -> np.ndarray:
    """Each output gradient goes to the input element its maximum came from (the first
    maximal tap in row-major order), added in TF's order in the input dtype."""
    p = _dilation_backprop_args(ctx, x, f, dy)
    dx = np.zeros(x.shape, x.dtype)
    if x.size == 0 or dy.size == 0:
        return dx
    _, in_r, in_c, _ = _dilation(x, f, p)
    n, h, w, c = x.shape
    ok = (in_r < h) & (in_c < w)
    flat = ((np.arange(n)[:, None, None, None] * h + in_r) * w + in_c) * c + np.arange(c)
    with np.errstate(over="ignore"):
        np.add.at(dx.reshape(-1), flat[ok], dy[ok])
    return dx


@kernel("Dilation2DBackpropFilter")
def dilation2d_backprop_filter(ctx: KernelContext, x: np.ndarray, f: np.ndarray,
                               dy: np.ndarray) -> np.ndarray:
    """Each output gradient goes to the filter tap its maximum came from."""
    p = _dilation_backprop_args(ctx, x, f, dy)
    df = np.zeros(f.shape, f.dtype)
    if f.size == 0 or dy.size == 0:
        return df
    _, _, _, tap = _dilation(x, f, p)
    c = x.shape[3]
    flat = tap * c + np.arange(c)
    with np.errstate(over="ignore"):
        np.add.at(df.reshape(-1), flat.reshape(-1), dy.reshape(-1))
    return df


# ----------------------------------------------------------------------------------------------
# FractionalMaxPool / FractionalAvgPool: TF's pooling sequences come from its Philox stream,
# reproduced here word for word (Philox4x32-10, as GuardedPhiloxRandom hands it out).

class _Philox:
    """tensorflow::random::PhiloxRandom as a stateful stream over ``_philox.blocks``: key
    from ``seed``, upper counter words from ``seed2``; each call returns four 32-bit words
    and advances the 128-bit counter."""

    def __init__(self, seed: int, seed2: int) -> None:
        self.key = seed & ((1 << 64) - 1)
        self.counter = (seed2 & ((1 << 64) - 1)) << 64

    def copy(self) -> _Philox:
        other = _Philox(0, 0)
        other.key, other.counter = self.key, self.counter
        return other

    def skip(self, n: int) -> None:
        self.counter = _philox.add128(self.counter, n)

    def __call__(self) -> list[int]:
        words = _philox.blocks(self.key, self.counter, 1)[0].tolist()
        self.skip(1)
        return words


class _Words:
    """SingleSampleAdapter: 32-bit words one at a time from a Philox stream reserved for
    ``n`` of them (GuardedPhiloxRandom::ReserveSamples32 skips the parent past them)."""

    def __init__(self, parent: _Philox, n: int) -> None:
        self.gen = parent.copy()
        parent.skip((n + 3) // 4)
        self.buf: list[int] = []

    def __call__(self) -> int:
        if not self.buf:
            self.buf = self.gen()
        return self.buf.pop(0)


def _pooling_sequence(n_in: int, n_out: int, gen: _Philox, pseudo: bool) -> np.ndarray:
    """TF's GeneratePoolingSequence: n_out + 1 cumulative cell boundaries over n_in."""
    if pseudo:
        # a_i = ceil(alpha * (i + u)) with one u in [0, max_u) (Graham's pseudo-random
        # regions), u from 52 random mantissa bits.
        alpha = n_in / n_out
        k = n_in // n_out
        max_u = min((k + 2) / alpha - 1, (n_in + 1 - k) / alpha - (n_out - 1))
        words = _Words(gen, 2)
        x0, x1 = words(), words()
        bits = (0x3FF << 52) | ((x0 & 0xFFFFF) << 32) | x1
        u = (float(np.array(bits, np.uint64).view(np.float64)) - 1.0) * max_u
        cum = [1] + [int(math.ceil(alpha * (i + u))) for i in range(1, n_out)] + [n_in + 1]
        diff = [cum[i + 1] - cum[i] for i in range(n_out)]
    else:
        # n_in // n_out per cell, n_in % n_out cells one longer, shuffled (Fisher-Yates with
        # word % remaining, as TF's RandomShuffle).
        k, extra = divmod(n_in, n_out)
        diff = [k + 1] * extra + [k] * (n_out - extra)
        words = _Words(gen, n_out)
        for i in range(n_out - 1):
            j = i + words() % (n_out - i)
            diff[i], diff[j] = diff[j], diff[i]
    return np.concatenate([[0], np.cumsum(diff)]).astype(np.int64)


_FRACTIONAL_SEED2 = 0x66726163


def _fractional_setup(ctx: KernelContext, x: np.ndarray, op: str
                      ) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Output size and the row and column sequences of a FractionalMax/AvgPool node."""
    a = ctx.attrs
    ratio = [float(np.float32(v)) for v in a.get("pooling_ratio") or []]
    if len(ratio) != 4:
        raise InvalidArgumentError("pooling_ratio field must specify 4 dimensions")
    for r in ratio:
        if r < 1:
            raise InvalidArgumentError(f"pooling_ratio cannot be smaller than 1, got: {r}")
    if ratio[0] != 1 or ratio[3] != 1:
        raise UnimplementedError(f"Fractional {op} pooling is not yet supported on the batch "
                                 "nor channel dimension.")
    seed, seed2 = int(a.get("seed", 0) or 0), int(a.get("seed2", 0) or 0)
    deterministic = bool(a.get("deterministic", False))
    if not deterministic and (seed or seed2):
        raise InvalidArgumentError("Both seed and seed2 should be 0 if deterministic is false.")
    if x.ndim != 4:
        raise InvalidArgumentError(
            f"tensor_in must be 4-dimensional, found shape {list(x.shape)}")
    out = []
    for i in range(4):
        # int / float in float32, floored.
        o = int(np.floor(np.float32(x.shape[i]) / np.float32(ratio[i])))
        if o <= 0:
            raise InvalidArgumentError(
                f"Pooling ratio is higher than input dimension size for dimension {i}. Input "
                f"dim size: {x.shape[i]} pooling ratio: {ratio[i]:g}")
        out.append(o)
    if seed == 0 and seed2 == 0:
        if deterministic:
            # TF draws random seeds once per kernel and keeps that node's first regions.
            # These ops are stateless here (no per-session state), so the seeds come from
            # the node's name instead: fixed regions for the node, as in one TF session.
            seed, seed2 = zlib.crc32((ctx.node or "").encode()) + 1, _FRACTIONAL_SEED2
        else:
            # Fresh regions on every run, as TF's advancing generator gives.
            seed, seed2 = (int(v) for v in np.random.default_rng().integers(1, 1 << 63, 2))
    gen = _Philox(seed, seed2)
    pseudo = bool(a.get("pseudo_random", False))
    rows = _pooling_sequence(x.shape[1], out[1], gen, pseudo)
    cols = _pooling_sequence(x.shape[2], out[2], gen, pseudo)
    return out, rows, cols


def _fractional_taps(x: np.ndarray, rows: np.ndarray, cols: np.ndarray, overlapping: bool
                     ) -> Any:
    """For each (row offset, column offset) inside the cells, in row-major order: the input
    values at that offset of every cell ([B, OH, OW, C]) and where the offset is inside."""
    h, w = x.shape[1:3]

    def cells(seq: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        start = seq[:-1]
        end = np.minimum(seq[1:] if overlapping else seq[1:] - 1, size - 1)
        return start, end

    r0, r1 = cells(rows, h)
    c0, c1 = cells(cols, w)
    for dr in range(int((r1 - r0).max()) + 1):
        r = r0 + dr
        r_ok = r <= r1
        for dc in range(int((c1 - c0).max()) + 1):
            c = c0 + dc
            ok = r_ok[:, None] & (c <= c1)[None, :]
            v = x[:, np.minimum(r, h - 1)][:, :, np.minimum(c, w - 1)]
            yield v, ok[None, :, :, None]


@kernel("FractionalMaxPool")
def fractional_max_pool(ctx: KernelContext, x: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Max over cells whose row and column boundaries TF draws from its seeded Philox
    stream (reproduced exactly: ``deterministic`` with a seed gives TF's cells)."""
    out_size, rows, cols = _fractional_setup(ctx, x, "max")
    out = np.full((x.shape[0], out_size[1], out_size[2], x.shape[3]), _lowest(x.dtype), x.dtype)
    for v, ok in _fractional_taps(x, rows, cols, bool(ctx.attrs.get("overlapping", False))):
        np.copyto(out, np.maximum(out, v), where=ok)
    return out, rows, cols


@kernel("FractionalAvgPool")
def fractional_avg_pool(ctx: KernelContext, x: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean over the cells of FractionalMaxPool: summed in row-major order in T, divided by
    the cell size in T (integers truncate)."""
    out_size, rows, cols = _fractional_setup(ctx, x, "average")
    shape = (x.shape[0], out_size[1], out_size[2], x.shape[3])
    total = np.zeros(shape, x.dtype)
    count = np.zeros((1, out_size[1], out_size[2], 1), x.dtype)
    with np.errstate(over="ignore"):
        for v, ok in _fractional_taps(x, rows, cols, bool(ctx.attrs.get("overlapping", False))):
            np.add(total, v, out=total, where=ok)
            count += ok.astype(x.dtype)
    if x.dtype.kind in "iu":
        # C++ integer division truncates toward zero (numpy's // floors).
        q = np.abs(total) // count
        out = np.where(total < 0, -q, q).astype(x.dtype)
    else:
        out = total / count
    return out, rows, cols
