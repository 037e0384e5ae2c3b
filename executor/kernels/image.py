"""Image kernels: non-max suppression, CropAndResize, bicubic and area resizing,
ScaleAndTranslate.

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
* ResizeArea averages each output cell's footprint, weighting partly covered input pixels by
  the covered fraction; sums run in TF's order (x, then y) in float32, one pass per tap.
* ScaleAndTranslate (tf.image.resize's lanczos3/5, gaussian, mitchellcubic, ...) builds
  TF's per-axis spans of normalised kernel weights as dense [out, in] matrices and applies
  them rows first, then columns.

Outputs are float32 as the OpDefs say (selected indices int32).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, OutOfRangeError

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


@kernel("NonMaxSuppressionV3")
def non_max_suppression_v3(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           score_threshold: np.ndarray) -> np.ndarray:
    sel, _, _ = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold)
    return sel


@kernel("NonMaxSuppressionV4")
def non_max_suppression_v4(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                           max_output_size: np.ndarray, iou_threshold: np.ndarray,
                           score_threshold: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sel, _, _ = _nms(boxes, scores, max_output_size, iou_threshold, score_threshold)
    valid = np.array(sel.size, dtype=np.int32)
    if ctx.attrs.get("pad_to_max_output_size", False):
        sel = _pad(sel, int(max_output_size))
    return sel, valid


@kernel("NonMaxSuppressionV5")
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


@kernel("CropAndResize")
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


@kernel("ResizeBicubic")
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
