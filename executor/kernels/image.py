"""Image kernels: non-max suppression, CropAndResize and its gradients, bicubic and area
resizing, ScaleAndTranslate, colour adjustment and HSV conversion, image and volume patches,
projective transforms, bounding boxes and glimpses.

TensorFlow's CPU semantics:

* NonMaxSuppression (V1 with the IoU threshold as an attr, V2 as an input, neither with a
  score threshold: TF uses the lowest finite value; V3-V5; WithOverlaps and Combined in
  detection.py share ``_hard_nms``) keeps boxes whose score is strictly above
  ``score_threshold``, visits them by descending score (ties: lower box index first) and
  drops a box whose IoU with an already selected one is strictly above ``iou_threshold``.
  Boxes are corner pairs in either order; a box with no area overlaps nothing. Hard NMS is
  one vectorized IoU pass per selected box; soft NMS (V5 with sigma > 0) re-queues decayed
  candidates, which needs a priority queue, so it runs TF's sequential algorithm over the
  candidates.
* CropAndResize samples each box at ``crop_size`` points spread from corner to corner (the
  box centre for a size of 1); samples outside the image take ``extrapolation_value``.
* ResizeBicubic uses TF's 1025-entry coefficient table: Keys' a=-0.75 with edge replication
  for the legacy modes, a=-0.5 with out-of-image taps dropped and the weights renormalised
  for half_pixel_centers. Rows are interpolated first, then columns, in float32.
* ResizeBicubicGrad spreads each output gradient over the 4x4 input pixels with the same
  weights, as float32 products added in TF's order in the image's dtype.
* ResizeArea averages each output cell's footprint, weighting partly covered input pixels by
  the covered fraction; sums run in TF's order (x, then y) in float32, one pass per tap.
* ScaleAndTranslate (tf.image.resize's lanczos3/5, gaussian, mitchellcubic, ...) builds
  TF's per-axis spans of normalised kernel weights as dense [out, in] matrices and applies
  them rows first, then columns.
* The colour kernels follow TF's CPU code per pixel: AdjustHue rotates the hue within each
  pixel's min..max channel range, AdjustSaturation goes through HSV with TF's float/double
  mix, RGBToHSV/HSVToRGB are TF's Eigen expressions in the image's dtype (float16 rounded
  after each step). AdjustContrastv2 sums each channel by folding the image in halves, as
  TF does. Where TF has no CPU kernel for a dtype the OpDef allows (float16 AdjustHue, ...)
  the kernel fails as a TF graph does.
* ExtractImagePatches/ExtractVolumePatches view the zero-padded input with strides.
* ImageProjectiveTransformV2/V3 (Keras' random rotation, zoom and translation layers) map
  each output pixel to the input in float32, fold the coordinate back for REFLECT, WRAP and
  NEAREST with TF's arithmetic and read neighbours outside the image as the fill value.

Crops, resizes and glimpses are float32 as their OpDefs say (selected indices int32); the
other kernels keep the image's dtype where their OpDefs do.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dfg.graphdef.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
    UnimplementedError,
)

from ._conv import window as _window
from .registry import KernelContext, kernel

_F32 = np.dtype(np.float32)


def _fmt(shape: Any) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


# ----------------------------------------------------------------------------------------------
# Non-max suppression


def _nms_inputs(boxes: np.ndarray, scores: np.ndarray, max_output_size: np.ndarray,
                iou_threshold: np.ndarray, score_threshold: np.ndarray,
                ) -> tuple[np.ndarray, np.ndarray, int, float, float]:
    if np.ndim(max_output_size) != 0:
        raise InvalidArgumentError(
            f"max_output_size must be 0-D, got shape {_fmt(np.shape(max_output_size))}")
    for name, v in (("iou_threshold", iou_threshold), ("score_threshold", score_threshold)):
        if np.ndim(v) != 0:
            raise InvalidArgumentError(f"{name} must be 0-D, got shape {_fmt(np.shape(v))}")
    iou = float(iou_threshold)
    if not 0 <= iou <= 1:
        raise InvalidArgumentError("iou_threshold must be in [0, 1]")
    if boxes.ndim != 2:
        raise InvalidArgumentError(f"boxes must be 2-D{_fmt(boxes.shape)}")
    if boxes.shape[1] != 4:
        raise InvalidArgumentError(
            f"boxes must have 4 columns (Dimension must be 4 but is {boxes.shape[1]})")
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        found = scores.shape[0] if scores.ndim == 1 else _fmt(scores.shape)
        raise InvalidArgumentError(
            f"scores has incompatible shape (Dimensions must be equal, but are "
            f"{boxes.shape[0]} and {found})")
    n_out = int(max_output_size)
    if n_out < 0:
        raise InvalidArgumentError("output size must be non-negative")
    # Coordinates and scores are compared in float32 (exact for float16 inputs).
    return (boxes.astype(_F32, copy=False), scores.astype(_F32, copy=False), n_out, iou,
            float(score_threshold))


class _Boxes:
    """Normalised corners and areas, for IoU of one box against many."""

    def __init__(self, boxes: np.ndarray) -> None:
        self.y0 = np.minimum(boxes[:, 0], boxes[:, 2])
        self.y1 = np.maximum(boxes[:, 0], boxes[:, 2])
        self.x0 = np.minimum(boxes[:, 1], boxes[:, 3])
        self.x1 = np.maximum(boxes[:, 1], boxes[:, 3])
        self.area = (self.y1 - self.y0) * (self.x1 - self.x0)

    def iou(self, i: int, others: np.ndarray) -> np.ndarray:
        """IoU of box ``i`` with each box in ``others`` (float32, 0 for empty boxes)."""
        ih = np.maximum(np.minimum(self.y1[i], self.y1[others])
                        - np.maximum(self.y0[i], self.y0[others]), np.float32(0))
        iw = np.maximum(np.minimum(self.x1[i], self.x1[others])
                        - np.maximum(self.x0[i], self.x0[others]), np.float32(0))
        inter = ih * iw
        a_i, a_o = self.area[i], self.area[others]
        with np.errstate(divide="ignore", invalid="ignore"):
            out = inter / (a_i + a_o - inter)
        return np.where((a_i <= 0) | (a_o <= 0), np.float32(0), out).astype(_F32)


def _hard_nms(bx: _Boxes | Callable[[int, np.ndarray], np.ndarray], scores: np.ndarray,
              n_out: int, iou: float, score_thr: float) -> tuple[np.ndarray, np.ndarray]:
    """Greedy NMS; ``bx`` gives the overlap of one box with many (IoU of boxes, or rows of
    a given overlap matrix for NonMaxSuppressionWithOverlaps)."""
    overlap = bx.iou if isinstance(bx, _Boxes) else bx
    cand = np.flatnonzero(scores > np.float32(score_thr))
    # Descending score, ties by ascending index: a stable sort of the negated scores.
    cand = cand[np.argsort(-scores[cand], kind="stable")]
    selected: list[int] = []
    # Each round takes the best live candidate; it survives every earlier selection, so it
    # is selected, and it removes the live candidates it overlaps too much.
    while cand.size and len(selected) < n_out:
        best = int(cand[0])
        selected.append(best)
        rest = cand[1:]
        cand = rest[~(overlap(best, rest) > np.float32(iou))]
    sel = np.array(selected, dtype=np.int32)
    return sel, scores[sel]


def _soft_nms(bx: _Boxes, scores: np.ndarray, n_out: int, iou: float, score_thr: float,
              sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """TF's soft-NMS: Gaussian decay exp(-iou^2 / (2 sigma)) with re-queued candidates."""
    f = np.float32
    scale = f(-0.5) / f(sigma)
    thr = f(score_thr)
    # Heap entries: (-score, index, first selection not yet applied to this candidate).
    heap = [(-float(scores[i]), int(i), 0) for i in np.flatnonzero(scores > thr)]
    heapq.heapify(heap)
    selected: list[int] = []
    sel_scores: list[np.float32] = []
    while heap and len(selected) < n_out:
        neg, i, begin = heapq.heappop(heap)
        original = f(-neg)
        score = original
        if begin < len(selected):
            # Newest selections first, as TF; stop once the score is no longer eligible.
            ious = bx.iou(i, np.array(selected[begin:][::-1], dtype=np.int64))
            # expf is correctly rounded in glibc: exp in double, rounded once to float.
            decay = np.exp((scale * ious * ious).astype(np.float64)).astype(_F32)
            for w in decay:
                score = f(score * w)
                if score <= thr:
                    break
        if score == original:
            selected.append(i)
            sel_scores.append(score)
        elif score > thr:
            heapq.heappush(heap, (-float(score), i, len(selected)))
    return np.array(selected, dtype=np.int32), np.array(sel_scores, dtype=_F32)


def _nms(boxes: np.ndarray, scores: np.ndarray, max_output_size: np.ndarray,
         iou_threshold: np.ndarray, score_threshold: np.ndarray,
         sigma: float = 0.0) -> tuple[np.ndarray, np.ndarray, int]:
    b, s, n_out, iou, score_thr = _nms_inputs(boxes, scores, max_output_size, iou_threshold,
                                              score_threshold)
    n_out = min(n_out, b.shape[0])
    bx = _Boxes(b)
    if sigma > 0:
        sel, sel_scores = _soft_nms(bx, s, n_out, iou, score_thr, sigma)
    else:
        sel, sel_scores = _hard_nms(bx, s, n_out, iou, score_thr)
    return sel, sel_scores, n_out


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=x.dtype)
    out[:x.size] = x
    return out


@kernel("NonMaxSuppression")
def non_max_suppression(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                        max_output_size: np.ndarray) -> np.ndarray:
    # V1: the threshold is an attr; no score threshold (TF uses the lowest float, so only
    # -inf and NaN scores are never candidates)
    iou = np.float32(ctx.attrs.get("iou_threshold", 0.5))
    sel, _, _ = _nms(boxes, scores, max_output_size, iou, np.finfo(np.float32).min)
    return sel


@kernel("NonMaxSuppressionV2")
def non_max_suppression_v2(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           ) -> np.ndarray:
    # the lowest finite value of T (float16's for half inputs: -65504 is no candidate)
    low = np.finfo(scores.dtype if scores.dtype.kind == "f" else np.float32).min
    sel, _, _ = _nms(boxes, scores, max_output_size, iou_threshold, np.asarray(low))
    return sel


@kernel("NonMaxSuppressionV3", heavy=True)
def non_max_suppression_v3(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           score_threshold: np.ndarray) -> np.ndarray:
    sel, _, _ = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold)
    return sel


@kernel("NonMaxSuppressionV4", heavy=True)
def non_max_suppression_v4(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           score_threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sel, _, _ = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold)
    valid = np.array(sel.size, dtype=np.int32)
    if ctx.attrs.get("pad_to_max_output_size", False):
        sel = _pad(sel, int(max_output_size))
    return sel, valid


@kernel("NonMaxSuppressionV5", heavy=True)
def non_max_suppression_v5(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           score_threshold: np.ndarray, soft_nms_sigma: np.ndarray,
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if np.ndim(soft_nms_sigma) != 0:
        raise InvalidArgumentError(
            f"soft_nms_sigma must be 0-D, got shape {_fmt(np.shape(soft_nms_sigma))}")
    sigma = float(soft_nms_sigma)
    if sigma < 0:
        raise InvalidArgumentError("soft_nms_sigma_val must be >= 0")
    sel, sel_scores, _ = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold,
                              sigma)
    valid = np.array(sel.size, dtype=np.int32)
    if ctx.attrs.get("pad_to_max_output_size", False):
        size = int(max_output_size)
        sel, sel_scores = _pad(sel, size), _pad(sel_scores, size)
    return sel, sel_scores.astype(scores.dtype), valid


# ----------------------------------------------------------------------------------------------
# CropAndResize


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """roundf for non-negative float32 values, without the rounding error of v + 0.5."""
    fl = np.floor(v)
    return fl + (v - fl >= np.float32(0.5))


@kernel("CropAndResize", heavy=True)
def crop_and_resize(ctx: KernelContext, image: np.ndarray, boxes: np.ndarray,
                    box_ind: np.ndarray, crop_size: np.ndarray) -> np.ndarray:
    if image.ndim != 4:
        raise InvalidArgumentError(f"input image must be 4-D{_fmt(image.shape)}")
    batch, h, w, depth = image.shape
    if h <= 0 or w <= 0:
        raise InvalidArgumentError("image dimensions must be positive")
    if boxes.ndim != 2:
        raise InvalidArgumentError(f"boxes must be 2-D{_fmt(boxes.shape)}")
    nb = boxes.shape[0]
    if boxes.shape[1] != 4:
        raise InvalidArgumentError("boxes must have 4 columns")
    if box_ind.ndim != 1:
        raise InvalidArgumentError(f"box_index must be 1-D{_fmt(box_ind.shape)}")
    if box_ind.shape[0] != nb:
        raise InvalidArgumentError("box_index has incompatible shape")
    if np.ndim(crop_size) != 1 or np.size(crop_size) != 2:
        raise InvalidArgumentError(f"crop_size must have two elements{_fmt(np.shape(crop_size))}")
    ch, cw = (int(v) for v in np.asarray(crop_size))
    if ch <= 0 or cw <= 0:
        raise InvalidArgumentError("crop dimensions must be positive")
    method = ctx.attrs.get("method", "bilinear") or "bilinear"
    if method not in ("bilinear", "nearest"):
        raise InvalidArgumentError(f"method must be 'bilinear' or 'nearest', found {method!r}")
    extrap = np.float32(ctx.attrs.get("extrapolation_value", 0.0))
    if nb and ((box_ind < 0) | (box_ind >= batch)).any():
        raise OutOfRangeError("box_index has values outside [0, batch_size)")
    out = np.empty((nb, ch, cw, depth), _F32)
    if nb == 0:
        return out
    bx = boxes.astype(_F32, copy=False)
    ys = _sample_coords(bx[:, 0], bx[:, 2], h, ch)   # [nb, ch]
    xs = _sample_coords(bx[:, 1], bx[:, 3], w, cw)   # [nb, cw]
    y_ok = (ys >= 0) & (ys <= np.float32(h - 1))
    x_ok = (xs >= 0) & (xs <= np.float32(w - 1))
    ysafe = np.where(y_ok, ys, np.float32(0))
    xsafe = np.where(x_ok, xs, np.float32(0))
    b = box_ind.astype(np.int64)[:, None, None]
    if method == "bilinear":
        top, bottom = np.floor(ysafe), np.ceil(ysafe)
        left, right = np.floor(xsafe), np.ceil(xsafe)
        ylerp = (ysafe - top)[:, :, None, None]
        xlerp = (xsafe - left)[:, None, :, None]
        ti, bi = top.astype(np.int64)[:, :, None], bottom.astype(np.int64)[:, :, None]
        li, ri = left.astype(np.int64)[:, None, :], right.astype(np.int64)[:, None, :]

        def px(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
            return image[b, yi, xi].astype(_F32, copy=False)

        tl, tr, bl, br = px(ti, li), px(ti, ri), px(bi, li), px(bi, ri)
        t = tl + (tr - tl) * xlerp
        bt = bl + (br - bl) * xlerp
        vals = t + (bt - t) * ylerp
    else:
        yi = _round_half_away(ysafe).astype(np.int64)[:, :, None]
        xi = _round_half_away(xsafe).astype(np.int64)[:, None, :]
        vals = image[b, yi, xi].astype(_F32, copy=False)
    ok = (y_ok[:, :, None] & x_ok[:, None, :])[..., None]
    np.copyto(out, np.where(ok, vals, extrap))
    return out


def _sample_coords(lo: np.ndarray, hi: np.ndarray, size: int, n: int) -> np.ndarray:
    """Float32 image coordinate of each of the ``n`` samples of every box along one axis."""
    f = np.float32
    span = f(size - 1)
    if n > 1:
        step = (hi - lo) * span / f(n - 1)
        return lo[:, None] * span + np.arange(n, dtype=_F32)[None, :] * step[:, None]
    # A single sample sits at the box centre; TF computes it in double (0.5 is a double).
    return (0.5 * (lo + hi).astype(np.float64) * (size - 1)).astype(_F32)[:, None]


# ----------------------------------------------------------------------------------------------
# Bicubic and area resizing


def _resize_args(ctx: KernelContext, images: np.ndarray, size: np.ndarray,
                 half_ok: bool = True) -> tuple[int, int, bool, bool]:
    if images.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional{_fmt(images.shape)}")
    size = np.asarray(size)
    if size.ndim != 1 or size.size != 2:
        raise InvalidArgumentError(
            f"shape_t must be 1-dimensional and have 2 elements{_fmt(size.shape)}")
    oh, ow = (int(v) for v in size)
    if oh <= 0 or ow <= 0:
        raise InvalidArgumentError("output dimensions must be positive")
    if images.shape[1] <= 0 or images.shape[2] <= 0:
        raise InvalidArgumentError(
            f"input image must be of non-zero size{_fmt(images.shape)}")
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False)) if half_ok else False
    if align and half:
        raise InvalidArgumentError(
            "If half_pixel_centers is True, align_corners must be False.")
    return oh, ow, align, half


def _scale(in_size: int, out_size: int, align: bool) -> np.float32:
    # TF falls back to in/out for a single input pixel even with align_corners (measured).
    if align and out_size > 1 and in_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


_TABLE = 1024


def _cubic_table(a: float) -> np.ndarray:
    """[TABLE + 1, 2] float32: the Keys kernel at distance t and at t + 1, t = i / TABLE."""
    # TF evaluates the polynomials in double (a is a double) at float positions.
    x = (np.arange(_TABLE + 1) / _TABLE).astype(_F32).astype(np.float64)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1.0
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return np.stack([near, far], axis=1).astype(_F32)


_TABLES: dict[float, np.ndarray] = {}


def _cubic_weights(out_size: int, in_size: int, align: bool,
                   half: bool) -> tuple[np.ndarray, np.ndarray]:
    """([out, 4] input indices, [out, 4] float32 weights) of one axis."""
    table = _TABLES.get(-0.5 if half else -0.75)
    if table is None:
        table = _TABLES.setdefault(-0.5 if half else -0.75,
                                   _cubic_table(-0.5 if half else -0.75))
    scale = _scale(in_size, out_size, align)
    o = np.arange(out_size, dtype=_F32)
    loc = (o + np.float32(0.5)) * scale - np.float32(0.5) if half else o * scale
    base = np.floor(loc).astype(np.int64)
    delta = (loc - base.astype(_F32)).astype(_F32)
    off = np.rint(delta * np.float32(_TABLE)).astype(np.int64)  # lrintf: ties to even
    w = np.stack([table[off, 1], table[off, 0], table[_TABLE - off, 0],
                  table[_TABLE - off, 1]], axis=1)
    raw = base[:, None] + np.arange(-1, 3)[None, :]
    idx = np.clip(raw, 0, in_size - 1)
    if half:
        # Taps outside the image get no weight; the rest are renormalised to sum to 1.
        w = np.where(idx == raw, w, np.float32(0)).astype(_F32)
        total = ((w[:, 0] + w[:, 1]) + w[:, 2]) + w[:, 3]
        ok = np.abs(total) >= np.float32(1000) * np.finfo(_F32).tiny
        inv = np.float32(1) / np.where(ok, total, np.float32(1))
        w = np.where(ok[:, None], w * inv[:, None], w).astype(_F32)
    return idx, w


def _combine4(parts: list[np.ndarray], w: np.ndarray) -> np.ndarray:
    """v0*w0 + v1*w1 + v2*w2 + v3*w3, added left to right in float32 as TF does."""
    acc = parts[0] * w[0]
    for p, wk in zip(parts[1:], w[1:]):
        acc = acc + p * wk
    return acc


@kernel("ResizeBicubic", heavy=True)
def resize_bicubic(ctx: KernelContext, images: np.ndarray, size: np.ndarray) -> np.ndarray:
    oh, ow, align, half = _resize_args(ctx, images, size)
    img = images.astype(_F32, copy=False)
    yi, yw = _cubic_weights(oh, images.shape[1], align, half)
    xi, xw = _cubic_weights(ow, images.shape[2], align, half)
    # Interpolate along y for each needed input column, then along x.
    rows = _combine4([img[:, yi[:, k]] for k in range(4)],
                     [yw[:, k][None, :, None, None] for k in range(4)])
    return _combine4([rows[:, :, xi[:, k]] for k in range(4)],
                     [xw[:, k][None, None, :, None] for k in range(4)]).astype(_F32)


@kernel("ResizeBicubicGrad")
def resize_bicubic_grad(ctx: KernelContext, grads: np.ndarray,
                        original_image: np.ndarray) -> np.ndarray:
    """Each output gradient spread over the 4x4 input pixels ResizeBicubic read, with the
    same weights: ``T(grad * wy * wx)`` (float32 products) added in TF's order (batch, output
    row, output column, then the 16 taps y-major), in the original image's dtype."""
    dt = original_image.dtype
    _cpu_kernel_for("ResizeBicubicGrad", dt, ("float32", "float64"))
    if grads.ndim != 4:
        raise InvalidArgumentError(f"input_grad must be 4-dimensional{_fmt(grads.shape)}")
    if original_image.ndim != 4:
        raise InvalidArgumentError(
            f"original_image must be 4-dimensional{_fmt(original_image.shape)}")
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))
    if align and half:
        raise InvalidArgumentError(
            "If half_pixel_centers is True, align_corners must be False.")
    n, oh, ow, c = grads.shape
    h, w = original_image.shape[1], original_image.shape[2]
    if h <= 0 or w <= 0:
        raise InvalidArgumentError("original dimensions must be positive")
    if original_image.shape[0] != n or original_image.shape[3] != c:
        raise InvalidArgumentError(
            "input_grad and original_image must have the same batch and depth, found "
            f"{_fmt(grads.shape)} and {_fmt(original_image.shape)}")
    out = np.zeros((n * h * w, c), dt)
    if grads.size == 0:
        return out.reshape(n, h, w, c)
    yi, yw = _cubic_weights(oh, h, align, half)
    xi, xw = _cubic_weights(ow, w, align, half)
    g = grads.astype(_F32, copy=False)
    # (n, oh, ow, 4, 4, c) contributions and their flat target rows, in TF's order.
    wts = (g[:, :, :, None, None, :] * yw[None, :, None, :, None, None]) \
        * xw[None, None, :, None, :, None]
    rows = (np.arange(n)[:, None, None, None, None] * (h * w)
            + yi[None, :, None, :, None] * w + xi[None, None, :, None, :])
    np.add.at(out, rows.reshape(-1), wts.astype(dt).reshape(-1, c))
    return out.reshape(n, h, w, c)


def _area_weight(i: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                 scale: np.float32) -> np.ndarray:
    """Covered part of input pixel [i, i+1) by an output cell [lo, hi), in float32."""
    fi = i.astype(_F32)
    one = np.float32(1)
    return np.where(fi < lo, np.where(fi + one > hi, scale, fi + one - lo),
                    np.where(fi + one > hi, hi - fi, one)).astype(_F32)


def _area_axis(out_size: int, in_size: int,
               align: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Per output cell: its float32 footprint [lo, hi), first and end input pixel, span."""
    scale = _scale(in_size, out_size, align)
    o = np.arange(out_size, dtype=_F32)
    lo = o * scale
    hi = (o + np.float32(1)) * scale
    start = np.floor(lo).astype(np.int64)
    end = np.ceil(hi).astype(np.int64)
    return lo, hi, start, end, int((end - start).max())


@kernel("ResizeArea")
def resize_area(ctx: KernelContext, images: np.ndarray, size: np.ndarray) -> np.ndarray:
    oh, ow, align, _ = _resize_args(ctx, images, size, half_ok=False)
    img = images.astype(_F32, copy=False)
    h, w = images.shape[1:3]
    sy, sx = _scale(h, oh, align), _scale(w, ow, align)
    # Sums in TF's order: along x (first pixel weighted, whole middle ones, weighted last),
    # then along y, then times 1/(sy*sx). Cells reaching past the image re-read its edge.
    lo, hi, xs, xe, span = _area_axis(ow, w, align)

    def col(i: np.ndarray) -> np.ndarray:
        return img[:, :, np.clip(i, 0, w - 1)]

    first_w = _area_weight(xs, lo, hi, sx)[None, None, :, None]
    last_w = _area_weight(xe - 1, lo, hi, sx)[None, None, :, None]
    rows = col(xs) * first_w
    for k in range(1, span - 1):
        mid = (xs + k < xe - 1)[None, None, :, None]
        rows = np.where(mid, rows + col(xs + k), rows)
    several = (xs + 1 != xe)[None, None, :, None]
    rows = np.where(several, rows + col(xe - 1) * last_w, rows)
    lo, hi, ys, ye, span = _area_axis(oh, h, align)
    total = np.zeros((images.shape[0], oh, ow, images.shape[3]), _F32)
    for k in range(span):
        i = ys + k
        wy = _area_weight(i, lo, hi, sy)[None, :, None, None]
        live = (i < ye)[None, :, None, None]
        total = np.where(live, total + rows[:, np.clip(i, 0, h - 1)] * wy, total)
    inv = np.float32(1.0 / float(sy * sx))  # 1.0 / (float * float) in double, then float
    return (total * inv).astype(_F32)


# ----------------------------------------------------------------------------------------------
# ScaleAndTranslate (tf.image.resize with lanczos3/5, gaussian, mitchellcubic, ...)

def _lanczos(radius: float):
    def f(x: np.ndarray) -> np.ndarray:
        px = np.float32(np.pi) * x
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.float32(radius) * np.sin(px) * np.sin(px / np.float32(radius)) / (px * px)
        # sin(x)/x tends to 1 at 0: TF returns 1 within 1e-3 of the centre.
        return np.where(x > radius, np.float32(0), np.where(x <= 1e-3, np.float32(1), v))
    return f, radius


def _gaussian(x: np.ndarray) -> np.ndarray:
    sigma = 1.5 / 3.0  # radius 1.5 = three standard deviations
    return np.where(x >= 1.5, 0.0, np.exp(-x * x / (2.0 * sigma * sigma)))


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 2, 0.0, np.where(x >= 1, ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0,
                                          ((1.5 * x - 2.5) * x) * x + 1.0))


def _mitchell_cubic(x: np.ndarray) -> np.ndarray:
    return np.where(x >= 2, 0.0, np.where(
        x >= 1, (((-7.0 / 18.0) * x + 2.0) * x - 10.0 / 3.0) * x + 16.0 / 9.0,
        (((7.0 / 6.0) * x - 2.0) * x) * x + 8.0 / 9.0))


# kernel_type -> (function of |distance|, radius); names as TF's SamplingKernelTypeFromString.
_SAMPLING_KERNELS: dict[str, tuple[Any, float]] = {
    "lanczos1": _lanczos(1.0), "lanczos3": _lanczos(3.0), "lanczos5": _lanczos(5.0),
    "gaussian": (_gaussian, 1.5),
    "box": (lambda x: np.where(x < 0.5, 1.0, np.where(x == 0.5, 0.5, 0.0)), 1.0),
    "triangle": (lambda x: np.where(x < 1.0, 1.0 - x, 0.0), 1.0),
    "keyscubic": (_keys_cubic, 2.0), "mitchellcubic": (_mitchell_cubic, 2.0),
}


def _span_weights(kern: Any, radius: float, out_size: int, in_size: int, scale: float,
                  translate: float, antialias: bool) -> np.ndarray:
    """Dense [out_size, in_size] float32 weights: per output pixel, the normalised kernel
    taps over the input pixels its span covers (all zero when the sample point lies outside
    the input), as TF's ComputeSpansCore builds them."""
    inv_scale = np.float32(1.0 / scale)
    inv_translate = -inv_scale * np.float32(translate)
    kscale = max(inv_scale, np.float32(1)) if antialias else np.float32(1)
    reach = np.float32(radius) * kscale
    sample = (np.arange(out_size, dtype=_F32) + np.float32(0.5)) * inv_scale + inv_translate
    start = np.clip(np.ceil(sample - reach - np.float32(0.5)), 0, in_size - 1).astype(np.int64)
    end = np.clip(np.floor(sample + reach - np.float32(0.5)), 0, in_size - 1).astype(
        np.int64) + 1
    src = np.arange(in_size)
    inside = (src[None, :] >= start[:, None]) & (src[None, :] < end[:, None])
    pos = (src.astype(_F32)[None, :] + np.float32(0.5) - sample[:, None]) / kscale
    w = np.where(inside, kern(np.abs(pos).astype(_F32)), 0).astype(_F32)
    total = w.sum(axis=1, dtype=_F32)
    ok = (np.abs(total) >= 1000 * np.finfo(_F32).tiny) & (sample >= 0) & (sample <= in_size)
    w = np.where(ok[:, None], w * (np.float32(1) / np.where(ok, total, 1))[:, None], 0)
    return w.astype(_F32)


def _two_floats(v: np.ndarray, name: str) -> tuple[float, float]:
    v = np.asarray(v)
    if v.ndim != 1 or v.size != 2:
        raise InvalidArgumentError(f"{name} must be a vector of 2 floats, found shape "
                                   f"{_fmt(v.shape)}")
    return float(v[0]), float(v[1])


@kernel("ScaleAndTranslate")
def scale_and_translate(ctx: KernelContext, images: np.ndarray, size: np.ndarray,
                        scale: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Resample each image with a separable kernel: output pixel centre ``x + 0.5`` maps to
    input coordinate ``(x + 0.5 - translation) / scale``; with ``antialias`` the kernel is
    widened by ``1/scale`` when downsampling. Rows first, then columns, in float32."""
    kt = ctx.attrs.get("kernel_type", "lanczos3")
    if kt not in _SAMPLING_KERNELS:
        raise InvalidArgumentError(f"Unrecognized kernel type: {kt}")
    if images.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional, found shape "
                                   f"{_fmt(images.shape)}")
    size = np.asarray(size)
    if size.ndim != 1 or size.size != 2:
        raise InvalidArgumentError(f"size must be a vector of 2 int32, found shape "
                                   f"{_fmt(size.shape)}")
    oh, ow = int(size[0]), int(size[1])
    n, h, w, c = images.shape
    if oh <= 0 or ow <= 0:
        raise InvalidArgumentError(f"output dimensions must be positive, found [{oh},{ow}]")
    if c <= 0:
        raise InvalidArgumentError("image must have at least one channel")
    if h <= 0 or w <= 0:
        raise InvalidArgumentError("input image must be of non-zero size")
    sy, sx = _two_floats(scale, "scale")
    if not (sy > 0 and sx > 0):
        raise InvalidArgumentError(f"Scale must be greater than zero, found [{sy},{sx}]")
    ty, tx = _two_floats(translation, "translation")
    anti = bool(ctx.attrs.get("antialias", True))
    kern, radius = _SAMPLING_KERNELS[kt]
    wy = _span_weights(kern, radius, oh, h, sy, ty, anti)
    wx = _span_weights(kern, radius, ow, w, sx, tx, anti)
    img = images.astype(_F32, copy=False)
    rows = np.einsum("oh,nhwc->nowc", wy, img)
    return np.einsum("pw,nowc->nopc", wx, rows).astype(_F32)


# ----------------------------------------------------------------------------------------------
# Shared checks for the colour, patch, transform, drawing and glimpse kernels below


def _cpu_kernel_for(op: str, dtype: np.dtype, registered: tuple[str, ...]) -> None:
    """TF registers CPU kernels for only some of the dtypes the OpDef allows; a graph using
    another dtype fails as TF's Session and tf.function do (InvalidArgumentError)."""
    if np.dtype(dtype).name not in registered:
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op '{op}' with T={np.dtype(dtype).name} "
            f"on CPU: TensorFlow registers it for {', '.join(registered)}")


def _scalar_f32(v: np.ndarray, name: str) -> np.float32:
    if np.ndim(v) != 0:
        raise InvalidArgumentError(f"{name} must be scalar: {_fmt(np.shape(v))}")
    return np.float32(v)


def _at_least_3d(images: np.ndarray) -> None:
    if images.ndim < 3:
        raise InvalidArgumentError(
            f"input must be at least 3-D, got shape {_fmt(images.shape)}")


def _rgb_channels(images: np.ndarray) -> None:
    if images.shape[-1] != 3:
        raise InvalidArgumentError(
            f"input must have 3 channels but instead has {images.shape[-1]} channels.")


# ----------------------------------------------------------------------------------------------
# Contrast


@kernel("AdjustContrast")
def adjust_contrast(ctx: KernelContext, images: np.ndarray, contrast_factor: np.ndarray,
                    min_value: np.ndarray, max_value: np.ndarray) -> np.ndarray:
    """The deprecated v1 op (TF runs it only in GraphDefs of producer version < 2): per image
    and channel, ``clip((x - mean) * factor + mean, min_value, max_value)`` in float32."""
    _cpu_kernel_for("AdjustContrast", images.dtype,
                    ("uint8", "int8", "int16", "int32", "float32", "float64"))
    _at_least_3d(images)
    f = _scalar_f32(contrast_factor, "contrast_factor")
    lo = _scalar_f32(min_value, "min_value")
    hi = _scalar_f32(max_value, "max_value")
    if images.size == 0:
        return np.zeros(images.shape, _F32)
    h, w, c = images.shape[-3:]
    x = images.astype(_F32).reshape(-1, h, w, c)
    mean = x.sum(axis=(1, 2), dtype=_F32, keepdims=True) / np.float32(h * w)
    out = (x - mean) * f + mean
    return np.maximum(np.minimum(out, hi), lo).reshape(images.shape)


def _folded_sum(x: np.ndarray) -> np.ndarray:
    """Sum over axis 1 of a float32 [B, N, C] array in AdjustContrastv2's order: the upper
    half is added onto the lower half (an odd middle row carried over) until one row is
    left."""
    n = x.shape[1]
    right = n // 2
    left = n - right
    s = np.empty((x.shape[0], left, x.shape[2]), _F32)
    s[:, :right] = x[:, left:left + right] + x[:, :right]
    if left > right:
        s[:, right] = x[:, right]
    rem = left
    while rem > 1:
        right = rem // 2
        left = rem - right
        s[:, :right] += s[:, left:left + right]
        rem = left
    return s[:, 0]


@kernel("AdjustContrastv2")
def adjust_contrast_v2(ctx: KernelContext, images: np.ndarray,
                       contrast_factor: np.ndarray) -> np.ndarray:
    """Per image and channel: ``mean + factor * (x - mean)`` (float32 on CPU)."""
    _cpu_kernel_for("AdjustContrastv2", images.dtype, ("float32",))
    _at_least_3d(images)
    f = _scalar_f32(contrast_factor, "contrast_factor")
    if images.size == 0:
        return np.zeros(images.shape, _F32)
    h, w, c = images.shape[-3:]
    x = images.reshape(-1, h * w, c)
    mean = _folded_sum(x) * (np.float32(1) / np.float32(h * w))
    mean = mean[:, None, :]
    return (mean + f * (x - mean)).reshape(images.shape)


# ----------------------------------------------------------------------------------------------
# Hue and saturation (TF's CPU kernels work per pixel in float32)


def _rgb_to_hue_range(r: np.ndarray, g: np.ndarray,
                      b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AdjustHue's hue in [0, 6) and the min and max channel of each pixel: the pixel's
    sector of the colour wheel (0 red..yellow, 1 yellow..green, ...) plus how far along it
    the middle channel lies; hue 0 for grey pixels."""
    rg = r < g
    b_lo = np.where(rg, b < r, b < g)
    b_hi = np.where(rg, b > g, b > r)
    # (max, mid, min, sector) of the six orderings, as TF branches on them.
    vmax = np.where(rg, np.where(b_lo, g, np.where(b_hi, b, g)),
                    np.where(b_lo, r, np.where(b_hi, b, r)))
    vmid = np.where(rg, np.where(b_lo, r, np.where(b_hi, g, b)),
                    np.where(b_lo, g, np.where(b_hi, r, b)))
    vmin = np.where(rg, np.where(b_lo, b, r), np.where(b_lo, b, g))
    sector = np.where(rg, np.where(b_lo, 1, np.where(b_hi, 3, 2)),
                      np.where(b_lo, 0, np.where(b_hi, 4, 5)))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (vmid - vmin) / (vmax - vmin)
    ratio = np.where(sector % 2 == 0, ratio, np.float32(1) - ratio)
    h = np.where(vmax == vmin, np.float32(0), sector.astype(_F32) + ratio)
    return h.astype(_F32), vmin, vmax


def _hue_range_to_rgb(h: np.ndarray, vmin: np.ndarray,
                      vmax: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    finite = np.isfinite(h)
    # int(h) truncates; a NaN hue lands in the default (last) sector, as on x86.
    sector = np.where(finite, np.trunc(np.where(finite, h, 0)), 5).astype(np.int64)
    ratio = h - sector.astype(_F32)
    ratio = np.where(sector % 2 == 0, ratio, np.float32(1) - ratio)
    vmid = vmin + ratio * (vmax - vmin)
    choose = [(vmax, vmid, vmin), (vmid, vmax, vmin), (vmin, vmax, vmid),
              (vmin, vmid, vmax), (vmid, vmin, vmax), (vmax, vmin, vmid)]
    sector = np.where((sector >= 0) & (sector <= 5), sector, 5)
    return tuple(np.choose(sector, [c[i] for c in choose]) for i in range(3))


def _wrap_hue(h: np.ndarray) -> np.ndarray:
    """Bring hues into [0, 6) as TF does: add 6 while negative, then subtract 6 while >= 6.
    Below 2**25 every such float32 step is exact except the one from [-6, 0) up, which
    rounds (and may land on 6, which one more step takes to 0); float64 gives the exact
    steps in one go. (Beyond 2**25 TF's steps round, or stop moving at all.)"""
    h64 = h.astype(np.float64)
    with np.errstate(invalid="ignore"):
        turns = np.floor(h64 / 6.0)
        high = (h64 - 6.0 * turns).astype(_F32)                    # h >= 6: exact
        last_negative = (h64 - 6.0 * turns - 6.0).astype(_F32)     # in [-6, 0), exact
    low = last_negative + np.float32(6)
    low = np.where(low >= np.float32(6), low - np.float32(6), low)
    return np.where(h < 0, low, np.where(h >= np.float32(6), high, h)).astype(_F32)


@kernel("AdjustHue")
def adjust_hue(ctx: KernelContext, images: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Rotate each RGB pixel's hue by ``delta`` turns, keeping its min and max channel."""
    _cpu_kernel_for("AdjustHue", images.dtype, ("float32",))
    _at_least_3d(images)
    d = _scalar_f32(delta, "delta")
    _rgb_channels(images)
    if images.size == 0:
        return np.zeros(images.shape, _F32)
    x = images.reshape(-1, 3)
    h, vmin, vmax = _rgb_to_hue_range(x[:, 0], x[:, 1], x[:, 2])
    h = _wrap_hue((h + d * np.float32(6)).astype(_F32))
    return np.stack(_hue_range_to_rgb(h, vmin, vmax), axis=-1).reshape(images.shape)


def _max3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """std::max(a, std::max(b, c)) (an operand that compares false is kept)."""
    bc = np.where(b < c, c, b)
    return np.where(a < bc, bc, a)


def _min3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    bc = np.where(c < b, c, b)
    return np.where(bc < a, bc, a)


@kernel("AdjustSaturation")
def adjust_saturation(ctx: KernelContext, images: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Scale each RGB pixel's HSV saturation by ``scale`` (clamped to [0, 1])."""
    _cpu_kernel_for("AdjustSaturation", images.dtype, ("float32",))
    _at_least_3d(images)
    k = _scalar_f32(scale, "scale")
    _rgb_channels(images)
    if images.size == 0:
        return np.zeros(images.shape, _F32)
    x = images.reshape(-1, 3)
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    f = np.float32
    with np.errstate(divide="ignore", invalid="ignore"):
        v = _max3(r, g, b)
        rng = v - _min3(r, g, b)
        s = np.where(v > 0, rng / v, f(0))
        norm = f(1) / (f(6) * rng)
        # The 2/6 and 4/6 offsets are doubles in TF: those sums are rounded once, to float.
        hh = np.where(r == v, norm * (g - b),
                      np.where(g == v, ((norm * (b - r)).astype(np.float64) + 2.0 / 6.0),
                               ((norm * (r - g)).astype(np.float64) + 4.0 / 6.0)).astype(f))
    hh = np.where(rng <= 0, f(0), hh).astype(f)
    hh = np.where(hh < 0, hh + f(1), hh)
    s = s * k
    s = np.where(f(0) < s, s, f(0))
    s = np.where(s < f(1), s, f(1))
    # HSV back to RGB (the Wikipedia construction, with TF's own fmod loop).
    c = s * v
    m = v - c
    dh = hh * f(6)
    sector = np.where(np.isfinite(dh), np.trunc(np.where(np.isfinite(dh), dh, 0)), -1)
    fm = dh
    while (low := np.isfinite(fm) & (fm <= 0)).any():
        fm = np.where(low, fm + f(2), fm)
    while (high := np.isfinite(fm) & (fm >= 2)).any():
        fm = np.where(high, fm - f(2), fm)
    xx = c * (f(1) - np.abs(fm - f(1)))
    zero = np.zeros_like(c)
    table = [(c, xx, zero), (xx, c, zero), (zero, c, xx), (zero, xx, c), (xx, zero, c),
             (c, zero, xx), (zero, zero, zero)]
    idx = np.where((sector >= 0) & (sector <= 5), sector, 6).astype(np.int64)
    out = [np.choose(idx, [t[i] for t in table]) + m for i in range(3)]
    return np.stack(out, axis=-1).astype(f).reshape(images.shape)


# ----------------------------------------------------------------------------------------------
# RGB <-> HSV (Eigen expressions in the image's own dtype; float16 rounds after every step)


def _colorspace_input(images: np.ndarray, op: str) -> None:
    _cpu_kernel_for(op, images.dtype, ("float16", "float32", "float64"))
    if images.ndim < 1:
        raise InvalidArgumentError(f"input must be at least 1D{_fmt(images.shape)}")
    if images.shape[-1] != 3:
        raise FailedPreconditionError(
            f"input must have 3 channels but input only has {images.shape[-1]} channels.")


@kernel("RGBToHSV")
def rgb_to_hsv(ctx: KernelContext, images: np.ndarray) -> np.ndarray:
    """Hue in [0, 1) (red 0, green 1/3, blue 2/3; 0 for grey), saturation range/max (0 for
    black), value max."""
    _colorspace_input(images, "RGBToHSV")
    t = images.dtype.type
    r, g, b = images[..., 0], images[..., 1], images[..., 2]
    v = np.max(images, axis=-1)
    rng = v - np.min(images, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > t(0), rng / v, t(0))
        norm = (t(1) / rng) * (t(1) / t(6))
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, norm * (b - r) + t(2) / t(6), norm * (r - g) + t(4) / t(6)))
    h = np.where(rng > t(0), h, t(0))
    h = np.where(h < t(0), h + t(1), h)
    return np.stack([h, s, v], axis=-1).astype(images.dtype, copy=False)


@kernel("HSVToRGB")
def hsv_to_rgb(ctx: KernelContext, images: np.ndarray) -> np.ndarray:
    _colorspace_input(images, "HSVToRGB")
    t = images.dtype.type
    h, s, v = images[..., 0], images[..., 1], images[..., 2]
    dh = h * t(6)

    def clip01(a: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(a, t(0)), t(1))

    dr = clip01(np.abs(dh - t(3)) - t(1))
    dg = clip01(-np.abs(dh - t(2)) + t(2))
    db = clip01(-np.abs(dh - t(4)) + t(2))
    one_s = -s + t(1)
    out = [(one_s + s * d) * v for d in (dr, dg, db)]
    return np.stack(out, axis=-1).astype(images.dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# Image and volume patches


def _space_attr(ctx: KernelContext, name: str, rank: int) -> list[int]:
    """ksizes/strides/rates: 1 on batch and depth, >= 1 on the spatial dimensions."""
    v = [int(a) for a in (ctx.attrs.get(name) or [])]
    if len(v) < rank:
        raise InvalidArgumentError(f"{name} must have {rank} elements, found {v}")
    if v[0] != 1 or v[rank - 1] != 1:
        raise UnimplementedError(f"Only support {name} across space.")
    if min(v[1:rank - 1]) < 1:
        raise OutOfRangeError(f"{name} is out of range.")
    return v[1:rank - 1]


def _extract_patches(x: np.ndarray, ks: list[int], st: list[int], rates: list[int],
                     padding: str) -> np.ndarray:
    """[B, *spatial, C] -> [B, *out, prod(ks) * C]: each window's taps (dilated by ``rates``)
    in row-major tap order with the channels innermost; taps in the padding read zero."""
    nd = len(ks)
    geo = [_window(x.shape[1 + i], ks[i], rates[i], st[i], padding, None) for i in range(nd)]
    outs = [o for o, _ in geo]
    n, c = x.shape[0], x.shape[-1]
    shape = (n, *outs, int(np.prod(ks)) * c)
    if 0 in shape:
        return np.zeros(shape, x.dtype)
    # Zero-pad just enough for every read, then view the windows with strides.
    need = [max(b + x.shape[1 + i], (outs[i] - 1) * st[i] + (ks[i] - 1) * rates[i] + 1)
            for i, (_, b) in enumerate(geo)]
    if any(b for _, b in geo) or need != list(x.shape[1:-1]):
        xp = np.zeros((n, *need, c), x.dtype)
        xp[(slice(None),) + tuple(slice(b, b + x.shape[1 + i]) for i, (_, b) in enumerate(geo))] = x
    else:
        xp = np.ascontiguousarray(x)
    sp = xp.strides[1:-1]
    view = as_strided(xp, (n, *outs, *ks, c),
                      (xp.strides[0], *[sp[i] * st[i] for i in range(nd)],
                       *[sp[i] * rates[i] for i in range(nd)], xp.strides[-1]),
                      writeable=False)
    return view.reshape(shape)


@kernel("ExtractImagePatches")
def extract_image_patches(ctx: KernelContext, images: np.ndarray) -> np.ndarray:
    if images.dtype == np.bool_:
        _cpu_kernel_for("ExtractImagePatches", images.dtype, ("numeric types",))
    ks = _space_attr(ctx, "ksizes", 4)
    st = _space_attr(ctx, "strides", 4)
    rates = _space_attr(ctx, "rates", 4)
    if images.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-dimensional{_fmt(images.shape)}")
    return _extract_patches(images, ks, st, rates, ctx.attrs.get("padding"))


@kernel("ExtractVolumePatches")
def extract_volume_patches(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    ks = _space_attr(ctx, "ksizes", 5)
    st = _space_attr(ctx, "strides", 5)
    if x.ndim != 5:
        raise InvalidArgumentError(f"input must be 5-dimensional{_fmt(x.shape)}")
    return _extract_patches(x, ks, st, [1, 1, 1], ctx.attrs.get("padding"))


# ----------------------------------------------------------------------------------------------
# ImageProjectiveTransformV2/V3 (what Keras' RandomRotation/Zoom/Translation emit)


def _map_reflect(v: np.ndarray, n: int) -> np.ndarray:
    """Reflect [abcd] to ...dcba|abcd|dcba... with TF's float/int64 arithmetic."""
    if n <= 1:
        return np.where((v < 0) | (v > np.float32(n - 1)), np.float32(0), v)
    f = np.float32
    sz2 = 2 * n
    with np.errstate(invalid="ignore"):
        k_neg = np.trunc(np.where(v < 0, -v, 0) / f(sz2)).astype(np.int64)
        neg = (sz2 * k_neg).astype(f) + v
        neg = np.where(neg < f(-n), neg + f(sz2), -neg - f(1))
        k_pos = np.trunc(np.where(v > f(n - 1), v, 0) / f(sz2)).astype(np.int64)
        pos = v - (sz2 * k_pos).astype(f)
        pos = np.where(pos >= f(n), f(sz2) - pos - f(1), pos)
    return np.where(v < 0, neg, np.where(v > f(n - 1), pos, v)).astype(f)


def _map_wrap(v: np.ndarray, n: int) -> np.ndarray:
    """Wrap [abcd] to ...abcd|abcd|abcd... (TF divides by n - 1 to count the turns)."""
    if n <= 1:
        return np.where((v < 0) | (v > np.float32(n - 1)), np.float32(0), v)
    f = np.float32
    sz = n - 1
    with np.errstate(invalid="ignore"):
        k_neg = np.trunc(np.where(v < 0, -v, 0) / f(sz)).astype(np.int64)
        neg = v + (n * (k_neg + 1)).astype(f)
        k_pos = np.trunc(np.where(v > f(sz), v, 0) / f(sz)).astype(np.int64)
        pos = v - (n * k_pos).astype(f)
    return np.where(v < 0, neg, np.where(v > f(sz), pos, v)).astype(f)


def _map_coords(v: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Map input coordinates outside [0, n - 1] back inside for every mode but CONSTANT
    (then clamp: a reflected 3.5 must not round to 4)."""
    if mode == "CONSTANT":
        return v
    if mode == "REFLECT":
        v = _map_reflect(v, n)
    elif mode == "WRAP":
        v = _map_wrap(v, n)
    return np.minimum(np.maximum(v, np.float32(0)), np.float32(n - 1))


_TRANSFORM_TYPES = ("uint8", "int32", "int64", "float16", "float32", "float64")


def _to_image_dtype(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """static_cast<T>(float): integers truncate toward zero."""
    if dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(v).astype(dtype)
    return v.astype(dtype)


def _projective_transform(ctx: KernelContext, images: np.ndarray, transforms: np.ndarray,
                          output_shape: np.ndarray, fill: np.float32) -> np.ndarray:
    _cpu_kernel_for(ctx.op or "ImageProjectiveTransformV3", images.dtype, _TRANSFORM_TYPES)
    interp = ctx.attrs.get("interpolation")
    mode = ctx.attrs.get("fill_mode", "CONSTANT") or "CONSTANT"
    if interp not in ("NEAREST", "BILINEAR"):
        raise InvalidArgumentError(
            f"Invalid interpolation {interp}. Supported types: NEAREST, BILINEAR")
    if mode not in ("REFLECT", "WRAP", "CONSTANT", "NEAREST"):
        raise InvalidArgumentError(
            f"Invalid mode {mode}. Supported types: REFLECT, WRAP, CONSTANT, NEAREST")
    if images.ndim != 4:
        raise InvalidArgumentError("Input images must have rank 4")
    n, h, w, c = images.shape
    if not (transforms.ndim == 2 and transforms.shape[0] in (n, 1)
            and transforms.shape[1] == 8):
        raise InvalidArgumentError("Input transform should be num_images x 8 or 1 x 8")
    output_shape = np.asarray(output_shape)
    if output_shape.ndim != 1:
        raise InvalidArgumentError(
            f"output shape must be 1-dimensional{_fmt(output_shape.shape)}")
    if output_shape.size != 2:
        raise InvalidArgumentError(
            f"output shape must have two elements{_fmt(output_shape.shape)}")
    oh, ow = int(output_shape[0]), int(output_shape[1])
    if oh <= 0 or ow <= 0:
        raise InvalidArgumentError("output dimensions must be positive")
    dt = images.dtype
    fill_t = _to_image_dtype(np.asarray(fill, _F32), dt)
    out = np.empty((n, oh, ow, c), dt)
    if out.size == 0:
        return out
    if h == 0 or w == 0:        # every read falls outside
        out[...] = fill_t
        return out
    f = np.float32
    t = transforms.astype(_F32, copy=False)
    t = np.broadcast_to(t, (n, 8))[:, :, None, None]
    ys = np.arange(oh, dtype=_F32)[None, :, None]
    xs = np.arange(ow, dtype=_F32)[None, None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        proj = t[:, 6] * xs + t[:, 7] * ys + f(1)
        in_x = (t[:, 0] * xs + t[:, 1] * ys + t[:, 2]) / proj
        in_y = (t[:, 3] * xs + t[:, 4] * ys + t[:, 5]) / proj
    # A zero projection (a point at infinity) takes the fill value.
    finite = proj != 0
    x = np.where(finite, _map_coords(in_x.astype(_F32), w, mode), f(0))
    y = np.where(finite, _map_coords(in_y.astype(_F32), h, mode), f(0))
    bi = np.arange(n)[:, None, None]

    def index(v: np.ndarray) -> np.ndarray:
        """int64 positions; non-finite or huge coordinates fall outside (-1)."""
        ok = np.abs(v) < f(2 ** 62)
        return np.where(ok, np.where(ok, v, 0).astype(np.int64), -1)

    def read(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        """Pixels at integer positions ([n, oh, ow, c]); the fill value outside."""
        ok = (yi >= 0) & (yi < h) & (xi >= 0) & (xi < w)
        v = images[bi, np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
        return np.where(ok[..., None], v, fill_t)

    if interp == "NEAREST":
        # std::round: halves away from zero.
        def rnd(v: np.ndarray) -> np.ndarray:
            with np.errstate(invalid="ignore"):
                return np.where(v < 0, -_round_half_away(-v), _round_half_away(v))

        vals = read(index(rnd(y)), index(rnd(x)))
    else:
        y0, x0 = np.floor(y), np.floor(x)
        y1, x1 = y0 + f(1), x0 + f(1)
        y0i, x0i, y1i, x1i = (index(a) for a in (y0, x0, y1, x1))
        wx0, wx1 = (x1 - x)[..., None], (x - x0)[..., None]
        wy0, wy1 = (y1 - y)[..., None], (y - y0)[..., None]

        def rf(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
            return read(yi, xi).astype(_F32)

        top = wx0 * rf(y0i, x0i) + wx1 * rf(y0i, x1i)
        bottom = wx0 * rf(y1i, x0i) + wx1 * rf(y1i, x1i)
        vals = _to_image_dtype(wy0 * top + wy1 * bottom, dt)
    np.copyto(out, np.where(finite[..., None], vals, fill_t))
    return out


@kernel("ImageProjectiveTransformV2")
def image_projective_transform_v2(ctx: KernelContext, images: np.ndarray,
                                  transforms: np.ndarray, output_shape: np.ndarray) -> np.ndarray:
    """Output pixel (x, y) samples the input at ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)
    with k = c0 x + c1 y + 1 (the transform maps output to input), zero outside."""
    return _projective_transform(ctx, images, transforms, output_shape, np.float32(0))


@kernel("ImageProjectiveTransformV3")
def image_projective_transform_v3(ctx: KernelContext, images: np.ndarray,
                                  transforms: np.ndarray, output_shape: np.ndarray,
                                  fill_value: np.ndarray) -> np.ndarray:
    if np.ndim(fill_value) != 0:
        raise InvalidArgumentError(
            f"fill_value must be a scalar{_fmt(np.shape(fill_value))}")
    return _projective_transform(ctx, images, transforms, output_shape, np.float32(fill_value))


# ----------------------------------------------------------------------------------------------
# DrawBoundingBoxes(V2)

# TF's default colours (RGBA): yellow, blue, red, lime, purple, olive, maroon, navy, aqua,
# fuchsia. One-channel images draw every box with the first component, which TF sets to 1.
_BOX_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1],
                        [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1],
                        [0, 1, 1, 1], [1, 0, 1, 1]], _F32)


def _draw_boxes(images: np.ndarray, boxes: np.ndarray, colors: np.ndarray | None,
                op: str) -> np.ndarray:
    _cpu_kernel_for(op, images.dtype, ("float16", "float32"))
    if images.ndim != 4:
        raise InvalidArgumentError("The rank of the images should be 4")
    if boxes.ndim != 3:
        raise InvalidArgumentError("The rank of the boxes tensor should be 3")
    if images.shape[0] != boxes.shape[0]:
        raise InvalidArgumentError("The batch sizes should be the same")
    n, h, w, depth = images.shape
    if depth not in (1, 3, 4):
        raise InvalidArgumentError(
            "Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
    if boxes.shape[2] != 4:
        raise InvalidArgumentError(
            f"The size of the third dimension of the box must be 4. Received: {boxes.shape[2]}")
    table = None
    if colors is not None:
        if colors.ndim != 2:
            raise InvalidArgumentError(f"colors must be a 2-D matrix{_fmt(colors.shape)}")
        if colors.shape[1] < depth:
            raise InvalidArgumentError(
                f"colors must have equal or more channels than the image provided: "
                f"{_fmt(colors.shape)}")
        if colors.size:
            table = colors[:, :depth].astype(_F32, copy=False)
    if table is None:
        table = _BOX_COLORS[:, :depth].copy()
        if depth == 1:
            table[:, 0] = 1
    table = table.astype(images.dtype)
    canvas = images.copy()
    # Corners scaled by (size - 1) in float32 and truncated toward zero, as int64 casts do.
    scale = np.array([h - 1, w - 1, h - 1, w - 1], _F32)
    with np.errstate(invalid="ignore", over="ignore"):
        corners = np.trunc(boxes.astype(_F32, copy=False) * scale).astype(np.int64)
    for b in range(n):
        for k in range(boxes.shape[1]):
            r0, c0, r1, c1 = (int(v) for v in corners[b, k])
            if r0 > r1 or c0 > c1:      # inverted: not drawn
                continue
            if r0 >= h or r1 < 0 or c0 >= w or c1 < 0:     # wholly outside
                continue
            color = table[k % len(table)]
            rr0, rr1 = max(r0, 0), min(r1, h - 1)
            cc0, cc1 = max(c0, 0), min(c1, w - 1)
            if r0 >= 0:
                canvas[b, r0, cc0:cc1 + 1] = color
            if r1 < h:
                canvas[b, r1, cc0:cc1 + 1] = color
            if c0 >= 0:
                canvas[b, rr0:rr1 + 1, c0] = color
            if c1 < w:
                canvas[b, rr0:rr1 + 1, c1] = color
    return canvas


@kernel("DrawBoundingBoxes")
def draw_bounding_boxes(ctx: KernelContext, images: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Outline each box (normalised [y_min, x_min, y_max, x_max]) one pixel wide in TF's
    colour table, box k in colour k mod 10; later boxes draw over earlier ones."""
    return _draw_boxes(images, boxes, None, "DrawBoundingBoxes")


@kernel("DrawBoundingBoxesV2")
def draw_bounding_boxes_v2(ctx: KernelContext, images: np.ndarray, boxes: np.ndarray,
                           colors: np.ndarray) -> np.ndarray:
    """As DrawBoundingBoxes with the given colours (rows cycled); no rows: TF's table."""
    return _draw_boxes(images, boxes, colors, "DrawBoundingBoxesV2")


# ----------------------------------------------------------------------------------------------
# ExtractGlimpse(V2)


def _glimpse(ctx: KernelContext, images: np.ndarray, size: np.ndarray, offsets: np.ndarray,
             version: int) -> np.ndarray:
    """Windows of ``size`` at ``offsets`` (y, x per image: pixels or, ``normalized``, fractions
    of the image; ``centered`` from the image centre). Where a window leaves the image it is
    filled with noise: zeros for noise="zero"; TF's uniform and Gaussian noise are random
    draws (here from numpy: same distribution, other values)."""
    a = ctx.attrs
    uniform = bool(a.get("uniform_noise", True))
    noise = a.get("noise", "uniform")
    noise = "uniform" if noise is None else noise
    if uniform and noise not in ("", "uniform"):
        raise InvalidArgumentError(
            "The uniform_noise and noise could not be specified at the same time")
    if noise == "":
        noise = "uniform" if uniform else "gaussian"
    if noise not in ("uniform", "gaussian", "zero"):
        raise InvalidArgumentError(
            f"The noise could only be uniform, gaussian, or zero, got{noise}")
    normalized, centered = bool(a.get("normalized", True)), bool(a.get("centered", True))
    if images.ndim != 4:
        raise InvalidArgumentError(
            f"input must be 4-dimensional (batch_size, height, width, depth){_fmt(images.shape)}")
    size = np.asarray(size)
    if size.ndim != 1 or size.shape[0] != 2:
        raise InvalidArgumentError(
            f"input must be a vector of size 2 (height, width){_fmt(size.shape)}")
    gh, gw = int(size[0]), int(size[1])
    if gh < 0 or gw < 0:
        raise InvalidArgumentError(f"Dimension must be non-negative, got [{gh},{gw}]")
    n, h, w, c = images.shape
    if offsets.ndim != 2:
        raise InvalidArgumentError(f"input must be a matrix{_fmt(offsets.shape)}")
    if offsets.shape[0] != n:
        raise InvalidArgumentError(f"first dimension should be batch{_fmt(offsets.shape)}")
    if offsets.shape[1] != 2:
        raise InvalidArgumentError(
            f"second dimension should be of size 2 (y,x){_fmt(offsets.shape)}")
    out = np.zeros((n, gh, gw, c), _F32)
    if out.size == 0:
        return out
    f = np.float32
    img = images.astype(_F32, copy=False)
    for i in range(n):
        y, x = f(offsets[i, 0]), f(offsets[i, 1])
        if normalized:
            y, x = y * f(h), x * f(w)
        if centered and (normalized or version == 1):
            y, x = y / f(2) + f(h) / f(2), x / f(2) + f(w) / f(2)
        elif centered:
            y, x = y + f(h) / f(2), x + f(w) / f(2)
        if version == 1 or (normalized and centered):
            y, x = y - f(gh) / f(2), x - f(gw) / f(2)
        spans = []
        partial = False
        for pos, glimpse, size_in in ((y, gh, h), (x, gw, w)):
            off = int(np.trunc(pos)) if np.isfinite(pos) else 0   # (Index) x truncates
            if off < 0:
                extent = max(0, glimpse + off)
                src, dst, partial = 0, glimpse - extent, True
            else:
                extent = glimpse
                src, dst = off, 0
                if off + glimpse >= size_in:
                    extent, partial = max(0, size_in - off), True
            spans.append((src, dst, min(size_in, extent)))
        (sy, dy, ey), (sx, dx, ex) = spans
        if partial:
            out[i] = _glimpse_noise(img[i], noise, (gh, gw, c))
            if ey == 0 or ex == 0:
                continue
        out[i, dy:dy + ey, dx:dx + ex] = img[i, sy:sy + ey, sx:sx + ex]
    return out


def _glimpse_noise(img: np.ndarray, noise: str, shape: tuple[int, int, int]) -> np.ndarray:
    if noise == "zero" or img.size == 0:
        return np.zeros(shape, _F32)
    rng = np.random.default_rng()
    if noise == "uniform":
        lo = img.min()
        return lo + (rng.random(shape, dtype=np.float32) * (img.max() - lo)).astype(_F32)
    # Gaussian per channel with the channel's mean and deviation, clipped to its range.
    flat = img.reshape(-1, img.shape[-1])
    mean = flat.mean(axis=0, dtype=_F32)
    sigma = np.sqrt(np.square(flat - mean).mean(axis=0, dtype=_F32))
    draw = mean + rng.standard_normal(shape, dtype=np.float32) * sigma
    return np.maximum(np.minimum(draw, flat.max(axis=0)), flat.min(axis=0)).astype(_F32)


@kernel("ExtractGlimpse")
def extract_glimpse(ctx: KernelContext, images: np.ndarray, size: np.ndarray,
                    offsets: np.ndarray) -> np.ndarray:
    return _glimpse(ctx, images, size, offsets, 1)


@kernel("ExtractGlimpseV2")
def extract_glimpse_v2(ctx: KernelContext, images: np.ndarray, size: np.ndarray,
                       offsets: np.ndarray) -> np.ndarray:
    return _glimpse(ctx, images, size, offsets, 2)


# ----------------------------------------------------------------------------------------------
# CropAndResize gradients


def _crop_boxes(boxes: np.ndarray, box_ind: np.ndarray) -> int:
    """The number of boxes (TF's ParseAndCheckBoxSizes)."""
    if boxes.size == 0 and box_ind.size == 0:
        return 0
    if boxes.ndim != 2:
        raise InvalidArgumentError(f"boxes must be 2-D{_fmt(boxes.shape)}")
    if boxes.shape[1] != 4:
        raise InvalidArgumentError("boxes must have 4 columns")
    if box_ind.ndim != 1:
        raise InvalidArgumentError(f"box_index must be 1-D{_fmt(box_ind.shape)}")
    if box_ind.shape[0] != boxes.shape[0]:
        raise InvalidArgumentError("box_index has incompatible shape")
    return boxes.shape[0]


def _crop_grads(grads: np.ndarray) -> tuple[int, int]:
    if grads.ndim != 4:
        raise InvalidArgumentError(f"grads image must be 4-D{_fmt(grads.shape)}")
    ch, cw = grads.shape[1:3]
    if ch <= 0 or cw <= 0:
        raise InvalidArgumentError("grads dimensions must be positive")
    return ch, cw


def _check_box_ind(box_ind: np.ndarray, batch: int) -> None:
    if box_ind.size and ((box_ind < 0) | (box_ind >= batch)).any():
        raise OutOfRangeError("box_index has values outside [0, batch_size)")


@kernel("CropAndResizeGradImage")
def crop_and_resize_grad_image(ctx: KernelContext, grads: np.ndarray, boxes: np.ndarray,
                               box_ind: np.ndarray, image_size: np.ndarray) -> np.ndarray:
    """Scatter each crop sample's gradient onto the pixels it read: the four bilinear
    neighbours by their weights, or the nearest pixel. Adds run in TF's order (box, row,
    column, then the four corners) in the output dtype."""
    method = ctx.attrs.get("method", "bilinear") or "bilinear"
    if method not in ("bilinear", "nearest"):
        raise InvalidArgumentError(f"method must be 'bilinear' or 'nearest'{method}")
    dt = np.dtype(ctx.attrs.get("T", np.float32))
    _cpu_kernel_for("CropAndResizeGradImage", dt, ("float16", "float32", "float64"))
    ch, cw = _crop_grads(grads)
    nb = _crop_boxes(boxes, box_ind)
    if grads.shape[0] != nb:
        raise InvalidArgumentError("boxes and grads have incompatible shape")
    image_size = np.asarray(image_size)
    if image_size.ndim != 1:
        raise InvalidArgumentError(f"image_size must be 1-D{_fmt(image_size.shape)}")
    if image_size.shape[0] != 4:
        raise InvalidArgumentError(f"image_size must have 4 elements{_fmt(image_size.shape)}")
    batch, h, w, depth = (int(v) for v in image_size)
    if h <= 0 or w <= 0:
        raise InvalidArgumentError("image dimensions must be positive")
    if grads.shape[3] != depth:
        raise InvalidArgumentError("image_size and grads are incompatible")
    if batch < 0 or depth < 0:
        raise InvalidArgumentError(f"Dimension must be non-negative, got {[batch, h, w, depth]}")
    _check_box_ind(box_ind, batch)
    out = np.zeros((batch, h, w, depth), dt)
    if nb == 0 or depth == 0:
        return out
    bx = boxes.astype(_F32, copy=False)
    ys = _sample_coords(bx[:, 0], bx[:, 2], h, ch)   # [nb, ch]
    xs = _sample_coords(bx[:, 1], bx[:, 3], w, cw)   # [nb, cw]
    ok = (((ys >= 0) & (ys <= np.float32(h - 1)))[:, :, None]
          & ((xs >= 0) & (xs <= np.float32(w - 1)))[:, None, :])     # [nb, ch, cw]
    ysafe = np.where((ys >= 0) & (ys <= np.float32(h - 1)), ys, np.float32(0))
    xsafe = np.where((xs >= 0) & (xs <= np.float32(w - 1)), xs, np.float32(0))
    b = box_ind.astype(np.int64)[:, None, None]
    g = grads.astype(_F32, copy=False)
    if method == "bilinear":
        top, bottom = np.floor(ysafe), np.ceil(ysafe)
        left, right = np.floor(xsafe), np.ceil(xsafe)
        yl = (ysafe - top)[:, :, None, None]
        xl = (xsafe - left)[:, None, :, None]
        one = np.float32(1)
        dtop = (one - yl) * g
        dbot = yl * g
        parts = [((one - xl) * dtop).astype(dt), (xl * dtop).astype(dt),
                 ((one - xl) * dbot).astype(dt), (xl * dbot).astype(dt)]
        ti, bi = top.astype(np.int64)[:, :, None], bottom.astype(np.int64)[:, :, None]
        li, ri = left.astype(np.int64)[:, None, :], right.astype(np.int64)[:, None, :]
        pix = [(b * h + ti) * w + li, (b * h + ti) * w + ri, (b * h + bi) * w + li,
               (b * h + bi) * w + ri]                                  # each [nb, ch, cw]
        vals = np.stack(parts, axis=3)                                 # [nb, ch, cw, 4, d]
        idx = np.stack(np.broadcast_arrays(*pix), axis=3)              # [nb, ch, cw, 4]
        keep = np.broadcast_to(ok[..., None], idx.shape)
    else:
        yi = _round_half_away(ysafe).astype(np.int64)[:, :, None]
        xi = _round_half_away(xsafe).astype(np.int64)[:, None, :]
        vals = g.astype(dt)[:, :, :, None, :]
        idx = np.broadcast_to((b * h + yi) * w + xi, ok.shape)[..., None]
        keep = ok[..., None]
    # Flat (pixel, channel) targets in TF's loop order; np.add.at adds them one by one.
    flat = idx[..., None] * depth + np.arange(depth)
    mask = np.broadcast_to(keep[..., None], flat.shape)
    np.add.at(out.reshape(-1), flat[mask], vals[mask])
    return out


@kernel("CropAndResizeGradBoxes")
def crop_and_resize_grad_boxes(ctx: KernelContext, grads: np.ndarray, image: np.ndarray,
                               boxes: np.ndarray, box_ind: np.ndarray) -> np.ndarray:
    """d(loss)/d(box corners) of bilinear CropAndResize: the image gradient at each sample
    times how the sample moves with each corner, summed per box in TF's order (row,
    column, channel) in float32."""
    method = ctx.attrs.get("method", "bilinear") or "bilinear"
    if method != "bilinear":
        raise InvalidArgumentError(f"method must be 'bilinear'{method}")
    ch, cw = _crop_grads(grads)
    depth = grads.shape[3]
    if image.ndim != 4:
        raise InvalidArgumentError(f"input image must be 4-D{_fmt(image.shape)}")
    batch, h, w = image.shape[:3]
    if h <= 0 or w <= 0:
        raise InvalidArgumentError("image dimensions must be positive")
    if image.shape[3] != depth:
        raise InvalidArgumentError("image, grads depth differ")
    nb = _crop_boxes(boxes, box_ind)
    if grads.shape[0] != nb:
        raise InvalidArgumentError("boxes and grads have incompatible shape")
    _check_box_ind(box_ind, batch)
    out = np.zeros((nb, 4), _F32)
    if nb == 0 or depth == 0:
        return out
    f = np.float32
    bx = boxes.astype(_F32, copy=False)
    y1, x1, y2, x2 = bx[:, 0], bx[:, 1], bx[:, 2], bx[:, 3]

    def coords(lo: np.ndarray, hi: np.ndarray, size: int, n: int) -> tuple[np.ndarray, f]:
        # Unlike the forward op, the step is (hi - lo) * ((size - 1) / (n - 1)).
        if n > 1:
            ratio = f(size - 1) / f(n - 1)
            step = (hi - lo) * ratio
            return lo[:, None] * f(size - 1) + np.arange(n, dtype=_F32)[None, :] * step[:, None], \
                ratio
        return (0.5 * (lo + hi).astype(np.float64) * (size - 1)).astype(_F32)[:, None], f(0)

    ys, hr = coords(y1, y2, h, ch)
    xs, wr = coords(x1, x2, w, cw)
    y_ok = (ys >= 0) & (ys <= f(h - 1))
    x_ok = (xs >= 0) & (xs <= f(w - 1))
    ysafe, xsafe = np.where(y_ok, ys, f(0)), np.where(x_ok, xs, f(0))
    top, bottom = np.floor(ysafe), np.ceil(ysafe)
    left, right = np.floor(xsafe), np.ceil(xsafe)
    yl = (ysafe - top)[:, :, None, None]
    xl = (xsafe - left)[:, None, :, None]
    b = box_ind.astype(np.int64)[:, None, None]
    ti, bi = top.astype(np.int64)[:, :, None], bottom.astype(np.int64)[:, :, None]
    li, ri = left.astype(np.int64)[:, None, :], right.astype(np.int64)[:, None, :]

    def px(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        return image[b, yi, xi].astype(_F32)

    tl, tr, bl, br = px(ti, li), px(ti, ri), px(bi, li), px(bi, ri)
    one = f(1)
    gy = ((one - xl) * (bl - tl) + xl * (br - tr)) * grads
    gx = ((one - yl) * (tr - tl) + yl * (br - bl)) * grads
    yv = np.arange(ch, dtype=_F32)[None, :, None, None]
    xv = np.arange(cw, dtype=_F32)[None, None, :, None]
    if ch > 1:
        t0, t2 = gy * (f(h - 1) - yv * hr), gy * (yv * hr)
    else:
        t0 = t2 = (gy.astype(np.float64) * 0.5 * (h - 1)).astype(_F32)
    if cw > 1:
        t1, t3 = gx * (f(w - 1) - xv * wr), gx * (xv * wr)
    else:
        t1 = t3 = (gx.astype(np.float64) * 0.5 * (w - 1)).astype(_F32)
    ok = (y_ok[:, :, None] & x_ok[:, None, :])[..., None]
    terms = np.stack([np.where(ok, t, f(0)) for t in (t0, t1, t2, t3)], axis=1)
    # Sequential float32 sums over (row, column, channel), as TF accumulates.
    return np.cumsum(terms.reshape(nb, 4, -1), axis=2, dtype=_F32)[:, :, -1]
