"""Optional values (executor/kernels/optional.py): what tf.experimental.Optional documents.
TensorFlow's own outputs for these ops run in tests/data/tf2/tf2_tape_gradients (cond_v2's
gradient); here the parts that case does not reach: OptionalHasValue and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError

F32 = np.dtype(np.float32)


def test_has_value_and_get_value() -> None:
    x, n = np.arange(3, dtype=np.float32), np.int64(7)
    opt = invoke("OptionalFromValue", x, n, attrs={"Toutput_types": [F32, np.dtype(np.int64)]})
    assert invoke("OptionalHasValue", opt).item() is True
    got = invoke("OptionalGetValue", opt, attrs={
        "output_types": [F32, np.dtype(np.int64)], "output_shapes": [(3,), ()]})
    np.testing.assert_array_equal(got[0], x)
    assert int(got[1]) == 7
    assert invoke("OptionalHasValue", invoke("OptionalNone")).item() is False


def test_get_value_of_none_and_of_the_wrong_structure() -> None:
    with pytest.raises(InvalidArgumentError, match="does not have a value"):
        invoke("OptionalGetValue", invoke("OptionalNone"),
               attrs={"output_types": [F32], "output_shapes": [()]})
    opt = invoke("OptionalFromValue", np.float32(1), attrs={"Toutput_types": [F32]})
    with pytest.raises(InvalidArgumentError, match="number of components is 2"):
        invoke("OptionalGetValue", opt, attrs={"output_types": [F32, F32],
                                               "output_shapes": [(), ()]})
    with pytest.raises(InvalidArgumentError, match="expected type is int32"):
        invoke("OptionalGetValue", opt, attrs={"output_types": [np.dtype(np.int32)],
                                               "output_shapes": [()]})


def test_zeros_like_and_add_n_of_optionals() -> None:
    a = invoke("OptionalFromValue", np.array([1, 2], np.float32), attrs={"Toutput_types": [F32]})
    b = invoke("OptionalFromValue", np.array([10, 20], np.float32),
               attrs={"Toutput_types": [F32]})
    z = invoke("ZerosLike", a)
    s = invoke("AddN", a, b, z)
    got = invoke("OptionalGetValue", s, attrs={"output_types": [F32], "output_shapes": [(2,)]})
    np.testing.assert_array_equal(got[0], [11, 22])
    none = invoke("OptionalNone")
    assert invoke("OptionalHasValue", invoke("AddN", none, none)).item() is False
    with pytest.raises(InvalidArgumentError, match="one has a value and the other doesn't"):
        invoke("AddN", a, none)
