"""Detection kernels: CombinedNonMaxSuppression and NonMaxSuppressionWithOverlaps.

Both share the greedy NMS of :mod:`.image` (NonMaxSuppression V1-V5 live there):

* NonMaxSuppressionWithOverlaps takes the [n, n] overlap matrix instead of boxes and drops a
  candidate whose overlap with a selected box is strictly above ``overlap_threshold`` (any
  value: TF does not require [0, 1] here).
* CombinedNonMaxSuppression (``tf.image.combined_non_max_suppression``) runs hard NMS per
  batch item and class (boxes ``[batch, n, q, 4]`` with q = 1 shared or q = classes), keeps at
  most ``max_output_size_per_class`` per class, then sorts all classes' selections by score
  (descending) and keeps ``max_total_size`` of them; boxes are clipped to [0, 1] when
  ``clip_boxes``; outputs are zero-padded to ``max_total_size`` (or, with ``pad_per_class``,
  to min(max_total_size, max_output_size_per_class * classes)); classes come out as float32.
  TF orders equal scores through std::sort (unspecified); here ties keep class order, then
  selection order.
"""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .image import _Boxes, _fmt, _hard_nms
from .registry import KernelContext, kernel

_F32 = np.dtype(np.float32)


def _scalar(v: np.ndarray, name: str) -> np.ndarray:
    if np.ndim(v) != 0:
        raise InvalidArgumentError(f"{name} must be 0-D, got shape {_fmt(np.shape(v))}")
    return v


@kernel("NonMaxSuppressionWithOverlaps")
def non_max_suppression_with_overlaps(ctx: KernelContext, overlaps: np.ndarray,
                                      scores: np.ndarray, max_output_size: np.ndarray,
                                      overlap_threshold: np.ndarray,
                                      score_threshold: np.ndarray) -> np.ndarray:
    n_out = int(_scalar(max_output_size, "max_output_size"))
    thr = float(_scalar(overlap_threshold, "overlap_threshold"))
    s_thr = float(_scalar(score_threshold, "score_threshold"))
    if overlaps.ndim != 2:
        raise InvalidArgumentError(f"overlaps must be 2-D{_fmt(overlaps.shape)}")
    n = overlaps.shape[0]
    if overlaps.shape[1] != n:
        raise InvalidArgumentError(f"overlaps must be square{_fmt(overlaps.shape)}")
    if scores.ndim != 1:
        raise InvalidArgumentError(f"scores must be 1-D{_fmt(scores.shape)} (Shape must be "
                                   f"rank 1 but is rank {scores.ndim})")
    if scores.shape[0] != n:
        raise InvalidArgumentError(f"scores has incompatible shape (Dimensions must be equal, "
                                   f"but are {n} and {scores.shape[0]})")
    if n_out < 0:
        raise InvalidArgumentError("output size must be non-negative")
    ov = overlaps.astype(_F32, copy=False)
    sel, _ = _hard_nms(lambda i, others: ov[others, i], scores.astype(_F32, copy=False),
                       min(n_out, n), thr, s_thr)
    return sel


@kernel("CombinedNonMaxSuppression")
def combined_non_max_suppression(ctx: KernelContext, boxes: np.ndarray, scores: np.ndarray,
                                 max_output_size_per_class: np.ndarray,
                                 max_total_size: np.ndarray, iou_threshold: np.ndarray,
                                 score_threshold: np.ndarray):
    if boxes.ndim != 4:
        raise InvalidArgumentError(
            f"boxes must be 4-D [batch, num_boxes, q, 4], got shape {_fmt(boxes.shape)}")
    if scores.ndim != 3:
        raise InvalidArgumentError(f"scores must be 3-D [batch, num_boxes, num_classes], "
                                   f"got shape {_fmt(scores.shape)}")
    batch, n, q, four = boxes.shape
    classes = scores.shape[2]
    if q not in (1, classes):
        raise InvalidArgumentError("third dimension of boxes must be either 1 or num classes")
    if four != 4:
        raise InvalidArgumentError("boxes must have 4 columns")
    if scores.shape[1] != n:
        raise InvalidArgumentError("scores has incompatible shape")
    if scores.shape[0] != batch:
        raise InvalidArgumentError("boxes and scores must have same batch size")
    per_class = int(_scalar(max_output_size_per_class, "max_size_per_class"))
    if per_class <= 0:
        raise InvalidArgumentError("max_size_per_class must be positive")
    total = int(_scalar(max_total_size, "max_total_size"))
    if total <= 0:
        raise InvalidArgumentError("max_total_size must be > 0")
    iou = float(_scalar(iou_threshold, "iou_threshold"))
    s_thr = float(_scalar(score_threshold, "score_threshold"))
    if not 0 <= iou <= 1:
        raise InvalidArgumentError("iou_threshold must be in [0, 1]")
    size = total
    if ctx.attrs.get("pad_per_class", False):
        size = min(total, per_class * classes)
    clip = ctx.attrs.get("clip_boxes", True)
    b = boxes.astype(_F32, copy=False)
    s = scores.astype(_F32, copy=False)
    out_boxes = np.zeros((batch, size, 4), _F32)
    out_scores = np.zeros((batch, size), _F32)
    out_classes = np.zeros((batch, size), _F32)
    valid = np.zeros(batch, np.int32)
    keep = min(per_class, n)
    for bi in range(batch):
        picked = []   # (score, class, box index) of every class's selections
        shared = _Boxes(b[bi, :, 0]) if q == 1 else None
        for c in range(classes):
            bx = shared if shared is not None else _Boxes(b[bi, :, c])
            sel, sc = _hard_nms(bx, s[bi, :, c], keep, iou, s_thr)
            picked.extend(zip(sc.tolist(), [c] * sel.size, sel.tolist()))
        # descending score; equal scores keep class-then-selection order (a stable sort)
        picked.sort(key=lambda t: -t[0])
        picked = picked[:size]
        k = len(picked)
        valid[bi] = k
        if not k:
            continue
        sc, cl, ix = (np.array(v) for v in zip(*picked))
        coords = b[bi, ix, 0 if q == 1 else cl]
        if clip:
            coords = np.clip(coords, _F32.type(0), _F32.type(1))
        out_boxes[bi, :k] = coords
        out_scores[bi, :k] = sc
        out_classes[bi, :k] = cl
    return out_boxes, out_scores, out_classes, valid
