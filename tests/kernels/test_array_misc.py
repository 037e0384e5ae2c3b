"""Array-miscellany and quantization kernels: what the replayed TensorFlow cases
(tests/data/kernels/raw_ops_array) cannot state exactly."""

from __future__ import annotations

import time

import numpy as np
import pytest

from dfg.executor.kernels.quantization import qdtype
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError


def test_timestamp_is_the_wall_clock_in_seconds() -> None:
    before = time.time()
    ts = invoke("Timestamp")
    after = time.time()
    assert ts.dtype == np.float64 and ts.shape == ()
    assert before <= float(ts) <= after


@pytest.mark.parametrize("enum,storage", [(11, np.int8), (12, np.uint8), (13, np.int32),
                                          (15, np.int16), (16, np.uint16)])
def test_quantized_types_map_to_their_storage_integers(enum: int, storage: type) -> None:
    # DataType numbers from types.proto: DT_QINT8 = 11 ... DT_QUINT16 = 16
    assert qdtype(enum) == np.dtype(storage)
    assert qdtype(np.dtype(storage)) == np.dtype(storage)


def test_a_non_quantized_type_is_not_taken_for_one() -> None:
    with pytest.raises(InvalidArgumentError):
        qdtype(1)   # DT_FLOAT
    with pytest.raises(InvalidArgumentError):
        qdtype(np.dtype(np.float32))


def test_bitcast_to_a_quantized_type_keeps_the_bits() -> None:
    x = np.array([-1, 255, 7], np.int32)
    y = invoke("Bitcast", x, attrs={"T": np.dtype(np.int32), "type": 12})   # quint8
    assert y.dtype == np.uint8 and y.shape == (3, 4)
    assert y.tobytes() == x.tobytes()


def test_empty_without_init_has_the_shape_and_dtype() -> None:
    y = invoke("Empty", np.array([2, 0, 3], np.int32), attrs={"dtype": np.dtype(np.float16)})
    assert y.dtype == np.float16 and y.shape == (2, 0, 3)
