"""Parsing and formats kernels: the cases the raw-op manifest cannot hold, replayed.

``tests/data/kernels/raw_ops_parsing/generate.py`` ran each case in TensorFlow 2.21 and wrote
those whose strings end in a NUL byte (serialized protos, WAV and gzip data: the manifest's
byte strings would lose it) and those that need Pillow (JPEG decoding and encoding) to
``side.json`` / ``side.npz`` (strings as their bytes concatenated, plus lengths). Each case
runs here through the kernel registry and must give TF's dtype, shape and values (floats
within a tolerance), or the same error class. The Pillow cases skip without it.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke
from dfg.graphdef import errors

HERE = Path(__file__).resolve().parent.parent / "data" / "kernels" / "raw_ops_parsing"


@cache
def _side() -> tuple[list[dict], Any]:
    cases = json.loads((HERE / "side.json").read_text())
    return cases, np.load(HERE / "side.npz", allow_pickle=False)


def _value(ref: Any) -> np.ndarray:
    arrays = _side()[1]
    if isinstance(ref, dict):  # strings: concatenated bytes plus lengths
        data, lens = arrays[ref["bytes"]].tobytes(), arrays[ref["lens"]]
        out = np.empty(len(lens), dtype=object)
        pos = 0
        for i, n in enumerate(lens.tolist()):
            out[i] = data[pos:pos + n]
            pos += n
        return out.reshape(ref["shape"])
    return arrays[ref]


def _attr(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"dtype"}:
        return np.dtype(object) if v["dtype"] == "string" else np.dtype(v["dtype"])
    if isinstance(v, list):
        return [_attr(x) for x in v]
    return v


def _ids() -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for c in _side()[0]:
        seen[c["op"]] = seen.get(c["op"], 0) + 1
        out.append(f"{c['op']}-{seen[c['op']]}")
    return out


def run_case(case: dict) -> None:
    """Replay one side case (raises AssertionError on a mismatch)."""
    flat: list = []
    for x in case["inputs"]:
        flat.extend([_value(k) for k in x] if isinstance(x, list) else [_value(x)])
    attrs = {k: _attr(v) for k, v in case["attrs"].items()}
    if "error" in case:
        with pytest.raises(errors.OpError) as info:
            invoke(case["op"], *flat, attrs=attrs)
        assert type(info.value).__name__ == case["error"], info.value
        return
    got = invoke(case["op"], *flat, attrs=attrs)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(case["outputs"])
    for i, (g, ref) in enumerate(zip(got, case["outputs"])):
        what = f"{case['op']} output {i} ({case['note']})"
        if isinstance(ref, dict) and "dtype" in ref:  # unspecified values
            assert (g.dtype.name, list(g.shape)) == (ref["dtype"], ref["shape"]), what
            continue
        want = _value(ref)
        assert isinstance(g, np.ndarray), what
        assert g.shape == want.shape, (what, g.shape, want.shape)
        if want.dtype == object:
            assert g.dtype == object, what
            assert g.reshape(-1).tolist() == want.reshape(-1).tolist(), what
        elif want.dtype.kind in "fc":
            assert g.dtype == want.dtype, what
            tol = case.get("tol", 1e-5)
            np.testing.assert_allclose(g, want, rtol=tol, atol=tol, err_msg=what)
        else:
            assert g.dtype == want.dtype, what
            np.testing.assert_array_equal(g, want, err_msg=what)


@pytest.mark.parametrize("case", _side()[0], ids=_ids())
def test_side_case(case: dict) -> None:
    if case.get("needs"):
        pytest.importorskip(case["needs"])
    run_case(case)


def test_jpeg_without_pillow_says_how_to_get_it() -> None:
    """Without Pillow, decoding a JPEG is UnimplementedError naming the op and the fix."""
    if importlib.util.find_spec("PIL") is not None:
        pytest.skip("Pillow is installed")
    jpeg = next(c for c in _side()[0] if c["op"] == "DecodeJpeg" and "outputs" in c)
    with pytest.raises(errors.UnimplementedError) as info:
        invoke("DecodeJpeg", _value(jpeg["inputs"][0]), attrs={})
    assert "pip install pillow" in str(info.value)
    assert "DecodeJpeg" in str(info.value)


def _side_input(op: str, note: str) -> np.ndarray:
    case = next(c for c in _side()[0] if c["op"] == op and c["note"] == note)
    return _value(case["inputs"][0])


def test_jpeg_decode_that_pillow_cannot_match_is_unimplemented() -> None:
    """INTEGER_ACCURATE without fancy upscaling on 4:2:2 chroma: Pillow has already
    interpolated the chroma planes TF would replicate, so dfg refuses rather than differ."""
    pytest.importorskip("PIL")
    data = _side_input("DecodeJpeg", "422")
    with pytest.raises(errors.UnimplementedError):
        invoke("DecodeJpeg", data, attrs={"dct_method": "INTEGER_ACCURATE",
                                          "fancy_upscaling": False})
    # the default IFAST path decodes it (its values are among the replayed cases)
    assert invoke("DecodeJpeg", data, attrs={"fancy_upscaling": False}).shape == (6, 11, 3)


def test_scalar_string_dense_feature_of_a_batch_holds_bytes() -> None:
    # a batch of Examples with a scalar string feature: each output element is the bytes
    # value itself (not a 0-d array), as tf.io.parse_example returns it
    from dfg.executor.kernels.registry import invoke
    from dfg.schemas import example_pb2

    def example(city: bytes) -> bytes:
        ex = example_pb2.Example()
        ex.features.feature["city"].bytes_list.value.append(city)
        return ex.SerializeToString()

    obj = np.dtype(object)
    batch = np.array([example(b"Oslo"), example(b"Rome")], dtype=object)
    out = invoke("ParseExampleV2", batch, np.array([], dtype=object),
                 np.array([], dtype=object), np.array([b"city"], dtype=object),
                 np.array([], dtype=object), np.array(b"", dtype=object),
                 attrs={"Tdense": [obj], "num_sparse": 0, "sparse_types": [],
                        "ragged_value_types": [], "ragged_split_types": [],
                        "dense_shapes": [()]})
    city = out[-1] if isinstance(out, (list, tuple)) else out
    assert city.shape == (2,) and city.tolist() == [b"Oslo", b"Rome"]
