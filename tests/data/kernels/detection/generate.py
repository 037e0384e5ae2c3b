"""Expected values for tests/test_detection_kernels.py, computed by TensorFlow.

Run (never in CI; needs TensorFlow 2.21 CPU in a separate venv)::

    /tmp/tfvenv/bin/python tests/data/kernels/detection/generate.py

NonMaxSuppression (V1), NonMaxSuppressionV2, NonMaxSuppressionWithOverlaps and
CombinedNonMaxSuppression called eagerly with ``tf.raw_ops`` on seeded boxes (some given with
their corners swapped) and distinct scores (TensorFlow leaves the order of equal scores
unspecified); written as ``manifest.json`` + ``arrays.npz`` by the ``Recorder`` of
tests/data/kernels/sparse/generate.py (same format).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("sparse_generate",
                                               HERE.parent / "sparse" / "generate.py")
_gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gen)
Recorder = _gen.Recorder
f16, f32 = np.float16, np.float32


def detection_cases(R: Recorder) -> None:
    rng = np.random.default_rng(11)

    def boxes(n):
        c = rng.uniform(0, 1, (n, 2))
        hw = rng.uniform(0.05, 0.5, (n, 2))
        b = np.concatenate([c - hw / 2, c + hw / 2], axis=1).astype(f32)
        flip = rng.random(n) < 0.2      # some boxes given as (ymax, xmax, ymin, xmin)
        b[flip] = b[flip][:, [2, 3, 0, 1]]
        return b

    b = boxes(30)
    s = rng.permutation(30).astype(f32) / 30 + np.float32(0.01)   # distinct scores
    for iou in (0.5, 0.2, 0.0, 1.0):
        R.op("NonMaxSuppression", {"boxes": b, "scores": s, "max_output_size": np.int32(10)},
             {"iou_threshold": iou}, note=f"iou {iou}")
        R.op("NonMaxSuppressionV2", {"boxes": b, "scores": s, "max_output_size": np.int32(10),
                                     "iou_threshold": np.float32(iou)}, note=f"iou {iou}")
    R.op("NonMaxSuppression", {"boxes": b, "scores": s, "max_output_size": np.int32(100)},
         note="all (max above n)")
    neg = s - 1
    neg[3] = -np.inf
    R.op("NonMaxSuppression", {"boxes": b, "scores": neg, "max_output_size": np.int32(100)},
         {"iou_threshold": 0.3}, note="negative and -inf scores")
    R.op("NonMaxSuppressionV2", {"boxes": b.astype(f16), "scores": s.astype(f16),
                                 "max_output_size": np.int32(8),
                                 "iou_threshold": np.float16(0.4)}, note="half")
    R.op("NonMaxSuppression", {"boxes": b, "scores": s, "max_output_size": np.int32(5)},
         {"iou_threshold": 1.5}, note="bad threshold")
    R.op("NonMaxSuppressionV2", {"boxes": b, "scores": s[:-1],
                                 "max_output_size": np.int32(5),
                                 "iou_threshold": np.float32(0.5)}, note="scores mismatch")
    R.op("NonMaxSuppressionV2", {"boxes": b[:, :3].copy(), "scores": s,
                                 "max_output_size": np.int32(5),
                                 "iou_threshold": np.float32(0.5)}, note="3 columns")

    # overlaps
    ov = rng.uniform(0, 1, (12, 12)).astype(f32)
    s12 = (rng.permutation(12).astype(f32) + 1) / 12
    for thr, sthr in ((0.5, 0.0), (0.8, 0.3), (1.5, -1.0)):
        R.op("NonMaxSuppressionWithOverlaps", {"overlaps": ov, "scores": s12,
                                               "max_output_size": np.int32(8),
                                               "overlap_threshold": np.float32(thr),
                                               "score_threshold": np.float32(sthr)},
             note=f"{thr} {sthr}")
    R.op("NonMaxSuppressionWithOverlaps", {"overlaps": ov[:, :11].copy(), "scores": s12,
                                           "max_output_size": np.int32(8),
                                           "overlap_threshold": np.float32(0.5),
                                           "score_threshold": np.float32(0)},
         note="not square")

    # CombinedNonMaxSuppression: distinct scores everywhere (TF's tie order is unspecified)
    batch, n, classes = 2, 20, 3
    scores = (rng.permutation(batch * n * classes).astype(f32) + 1) / (batch * n * classes)
    scores = scores.reshape(batch, n, classes)
    shared = np.stack([boxes(n) for _ in range(batch)])[:, :, None, :]
    shared = shared * np.float32(1.2) - np.float32(0.1)   # some coordinates outside [0, 1]
    per_class = np.stack([np.stack([boxes(n) for _ in range(classes)], axis=1)
                          for _ in range(batch)])
    for bx, q in ((shared, "q1"), (per_class, "qC")):
        for mpc, mt, iou, sthr, pad, clip in ((4, 10, 0.5, 0.2, False, True),
                                              (3, 20, 0.3, 0.0, True, True),
                                              (5, 6, 0.6, 0.5, False, False),
                                              (2, 50, 0.5, 0.1, True, False)):
            R.op("CombinedNonMaxSuppression",
                 {"boxes": bx, "scores": scores, "max_output_size_per_class": np.int32(mpc),
                  "max_total_size": np.int32(mt), "iou_threshold": np.float32(iou),
                  "score_threshold": np.float32(sthr)},
                 {"pad_per_class": pad, "clip_boxes": clip},
                 note=f"{q} per_class {mpc} total {mt} pad {pad} clip {clip}")
    R.op("CombinedNonMaxSuppression",
         {"boxes": shared, "scores": scores[:1], "max_output_size_per_class": np.int32(3),
          "max_total_size": np.int32(5), "iou_threshold": np.float32(0.5),
          "score_threshold": np.float32(0)}, note="batch mismatch")
    R.op("CombinedNonMaxSuppression",
         {"boxes": shared, "scores": scores, "max_output_size_per_class": np.int32(0),
          "max_total_size": np.int32(5), "iou_threshold": np.float32(0.5),
          "score_threshold": np.float32(0)}, note="zero per class")
    R.op("CombinedNonMaxSuppression",
         {"boxes": per_class[:, :, :2].copy(), "scores": scores,
          "max_output_size_per_class": np.int32(3), "max_total_size": np.int32(5),
          "iou_threshold": np.float32(0.5), "score_threshold": np.float32(0)},
         note="q neither 1 nor classes")


def main() -> None:
    r = Recorder()
    detection_cases(r)
    r.write(HERE)


if __name__ == "__main__":
    main()
