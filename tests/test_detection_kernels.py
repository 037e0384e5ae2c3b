"""Detection kernels replayed against TensorFlow's outputs: NonMaxSuppression (V1),
NonMaxSuppressionV2, NonMaxSuppressionWithOverlaps and CombinedNonMaxSuppression.

tests/data/kernels/detection/generate.py called each op eagerly in
TensorFlow 2.21 and saved inputs, attrs and outputs or the error class into
tests/data/kernels/detection. Scores are distinct in every case: TensorFlow orders equal
scores through std::priority_queue / std::sort, which leave ties unspecified.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_sparse_kernels import load_cases, replay

from dfg.executor.kernels.registry import invoke

CASES, ARRAYS = load_cases("detection")


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_detection_case_equals_tensorflow(case: dict) -> None:
    replay(case, ARRAYS)


def test_every_detection_op_has_cases_and_errors() -> None:
    ops = {c["op"] for _, c in CASES}
    assert {"NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionWithOverlaps",
            "CombinedNonMaxSuppression"} <= ops
    assert {c["op"] for _, c in CASES if "error" in c} == ops


def test_combined_nms_by_hand() -> None:
    """Two classes sharing three boxes: class 0 keeps boxes 0 and 2 (1 overlaps 0), class 1
    keeps box 1 only (score threshold); merged by score and padded to max_total_size."""
    boxes = np.array([[[[0, 0, 1, 1]], [[0, 0, 0.9, 1]], [[0.5, 0.5, 2, 2]]]], np.float32)
    scores = np.array([[[0.9, 0.1], [0.8, 0.7], [0.6, 0.05]]], np.float32)
    b, s, c, n = invoke("CombinedNonMaxSuppression", boxes, scores, np.int32(5), np.int32(4),
                        np.float32(0.5), np.float32(0.2),
                        attrs={"pad_per_class": False, "clip_boxes": True})
    assert int(n[0]) == 3
    np.testing.assert_array_equal(s[0], np.float32([0.9, 0.7, 0.6, 0]))
    np.testing.assert_array_equal(c[0], np.float32([0, 1, 0, 0]))
    np.testing.assert_array_equal(b[0, 2], np.float32([0.5, 0.5, 1, 1]))   # clipped
    np.testing.assert_array_equal(b[0, 3], np.zeros(4, np.float32))
