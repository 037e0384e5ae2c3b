"""StridedSliceGrad: dy scattered into zeros where the slice read (expected values by math:
the gradient of a sum of a slice is 1 exactly where the slice reads)."""

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError


def test_scatters_dy_into_the_sliced_positions():
    dy = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    got = invoke("StridedSliceGrad", np.array([4, 5], np.int32), np.array([1, 0], np.int32),
                 np.array([3, 5], np.int32), np.array([1, 2], np.int32), dy,
                 attrs={"Index": np.int32})
    want = np.zeros((4, 5), np.float32)
    want[1:3, ::2] = dy
    np.testing.assert_array_equal(got, want)


def test_shrink_and_negative_stride():
    dy = np.array([7.0, 8.0], np.float64)          # x[2, ::-2] of a 3x4
    got = invoke("StridedSliceGrad", np.array([3, 4], np.int64), np.array([2, -1], np.int64),
                 np.array([3, -5], np.int64), np.array([1, -2], np.int64), dy,
                 attrs={"Index": np.int64, "shrink_axis_mask": 1})
    want = np.zeros((3, 4))
    want[2, ::-2] = dy
    np.testing.assert_array_equal(got, want)


def test_dy_of_the_wrong_shape_is_an_error():
    with pytest.raises(InvalidArgumentError, match="shape of dy"):
        invoke("StridedSliceGrad", np.array([4], np.int32), np.array([0], np.int32),
               np.array([2], np.int32), np.array([1], np.int32), np.ones(3, np.float32),
               attrs={"Index": np.int32})
