"""Ragged and text kernels end to end, against TensorFlow's outputs.

The single-op cases of ``tests/data/kernels/raw_ops_ragged`` run in test_raw_ops.py; here run
the cases that need more than one kernel family (``extra.json`` there: a ``tf.map_fn`` over a
ragged tensor, and a SavedModel of Keras TextVectorization layers with tf.strings ops), plus
behaviour TensorFlow cannot be asked about (what is left out, variant values as objects).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import test_raw_ops as raw  # the replay helpers (a module import: its tests stay there)

from dfg.executor.kernels.ragged import RaggedVariant
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import errors

HERE = Path(__file__).resolve().parent.parent / "data" / "kernels" / "raw_ops_ragged"
EXTRA = json.loads((HERE / "extra.json").read_text())


def _case(kind: str) -> dict:
    return next(c for c in EXTRA if kind in c)


def test_map_fn_over_ragged_tensor() -> None:
    """tf.map_fn encodes each row with RaggedTensorToVariant(batched_input=True), carries the
    variants in a TensorList and decodes the stacked results with RaggedTensorFromVariant."""
    case = {**next(c for c in EXTRA if c.get("graph", "").endswith("ragged_map_fn.pbtxt")),
            "_dir": HERE.name}
    raw.test_graph_case(case)


def test_keras_text_vectorization_savedmodel() -> None:
    from dfg.executor import savedmodel

    case = _case("savedmodel")
    model = savedmodel.load(HERE / case["savedmodel"])
    try:
        got = model.run(inputs={k: raw.arr(v, HERE.name) for k, v in case["inputs"].items()})
    finally:
        model.close()
    assert sorted(got) == sorted(case["outputs"])
    for name, key in case["outputs"].items():
        raw.compare(np.asarray(got[name]), raw.arr(key, HERE.name), 1e-6, name)


def test_variant_round_trip_keeps_components() -> None:
    s1 = np.array([0, 2, 2, 3], np.int32)
    vals = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    enc = invoke("RaggedTensorToVariant", s1, vals,
                 attrs={"batched_input": False, "RAGGED_RANK": 1, "Tsplits": np.dtype(np.int32)})
    assert isinstance(enc, RaggedVariant) and enc.ragged_rank == 1
    out = invoke("RaggedTensorFromVariant", enc,
                 attrs={"input_ragged_rank": 1, "output_ragged_rank": 1,
                        "Tvalues": np.dtype(np.float32), "Tsplits": np.dtype(np.int32)})
    np.testing.assert_array_equal(out[0], s1)
    np.testing.assert_array_equal(out[1], vals)
    rows = invoke("RaggedTensorToVariant", s1, vals,
                  attrs={"batched_input": True, "RAGGED_RANK": 1,
                         "Tsplits": np.dtype(np.int32)})
    assert rows.shape == (3,) and [r.values.shape[0] for r in rows] == [2, 0, 1]


def test_unsupported_input_encoding_is_unimplemented() -> None:
    # a codec ICU knows but this kernel does not: not mistaken for an unknown name
    with pytest.raises(errors.UnimplementedError):
        invoke("UnicodeDecode", np.array([b"x"], dtype=object),
               attrs={"input_encoding": "windows-1252"})


def test_zeros_like_and_add_of_encoded_ragged_tensors() -> None:
    from dfg.executor.kernels.ragged import add_ragged, is_ragged_variant, zeros_like_ragged

    s = np.array([0, 1, 3], np.int64)
    a = RaggedVariant((s,), np.array([1.0, 2.0, 3.0], np.float32))
    b = RaggedVariant((s,), np.array([0.5, 0.5, -1.0], np.float32))
    z = zeros_like_ragged(a)
    assert z.nested_splits[0] is s and z.values.tolist() == [0, 0, 0]
    assert add_ragged(a, b).values.tolist() == [1.5, 2.5, 2.0]
    batch = np.empty(2, dtype=object)
    batch[0], batch[1] = a, b
    assert is_ragged_variant(batch) and not is_ragged_variant(np.array([b"x"], dtype=object))
    summed = add_ragged(batch, zeros_like_ragged(batch))
    assert [v.values.tolist() for v in summed] == [[1, 2, 3], [0.5, 0.5, -1]]
    other = RaggedVariant((np.array([0, 2, 3], np.int64),), b.values)
    with pytest.raises(errors.InvalidArgumentError):
        add_ragged(a, other)
