"""Image and pooling kernel behaviour that TensorFlow's recorded outputs cannot pin down
(their values are TensorFlow's in tests/data/kernels/raw_ops_image, replayed by
test_raw_ops.py): random fills, regions drawn from random seeds, and inputs on which TF's
own kernels abort. Expected values here follow from the ops' definitions.
"""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError
from dfg.graphdef.graph import Graph
from dfg.schemas import graph_pb2

f32, i32, i64 = np.float32, np.int32, np.int64


def _image(n: int, h: int, w: int, c: int) -> np.ndarray:
    return (np.arange(n * h * w * c, dtype=f32).reshape(n, h, w, c) % 7) / 7


def _check_cells(seq: np.ndarray, size: int, out: int) -> None:
    """Cumulative cell boundaries: 0 .. size, each cell size // out or one more."""
    assert seq.dtype == i64 and seq.shape == (out + 1,)
    assert seq[0] == 0 and seq[-1] == size
    assert set(np.diff(seq).tolist()) <= {size // out, size // out + 1}


def test_fractional_pool_unseeded_deterministic_node_keeps_its_regions() -> None:
    # Without seeds TF draws random ones; a deterministic node then keeps its first regions
    # for the session's lifetime (here: for good, seeded from the node's name).
    text = """
    node { name: "x" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
           attr { key: "value" value { tensor { dtype: DT_FLOAT
             tensor_shape { dim { size: 1 } dim { size: 23 } dim { size: 19 } dim { size: 1 } }
             float_val: 1.5 } } } }
    node { name: "p" op: "FractionalMaxPool" input: "x"
           attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "pooling_ratio" value { list { f: 1 f: 1.7 f: 1.3 f: 1 } } }
           attr { key: "deterministic" value { b: true } } }
    """
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    with Session(Graph(gd)) as s1, Session(Graph(gd)) as s2:
        runs = [s.run(["p:0", "p:1", "p:2"]) for s in (s1, s1, s2)]
    out, rows, cols = runs[0]
    assert out.shape == (1, 13, 14, 1) and (out == f32(1.5)).all()
    _check_cells(rows, 23, 13)
    _check_cells(cols, 19, 14)
    for _, r, c in runs[1:]:
        np.testing.assert_array_equal(r, rows)
        np.testing.assert_array_equal(c, cols)


@pytest.mark.parametrize("pseudo", [False, True])
def test_fractional_pool_random_regions_are_valid(pseudo: bool) -> None:
    x = _image(2, 17, 11, 2)
    for _ in range(5):
        out, rows, cols = invoke("FractionalAvgPool", x, attrs={
            "pooling_ratio": [1.0, 1.6, 1.4, 1.0], "pseudo_random": pseudo})
        _check_cells(rows, 17, 10)
        _check_cells(cols, 11, 7)
        # Each output is its cell's mean.
        r, c = rows[3], cols[2]
        cell = x[:, r:rows[4], c:cols[3]]
        np.testing.assert_allclose(out[:, 3, 2], cell.mean(axis=(1, 2)), rtol=1e-6)


@pytest.mark.parametrize("noise", ["uniform", "gaussian"])
def test_extract_glimpse_noise_stays_in_the_image_range(noise: str) -> None:
    x = _image(2, 6, 5, 2)
    x[1, :, :, 1] += 3.0
    # Centred offsets pushing the 4x4 window past the top-left corner by 2 rows and columns.
    off = np.array([[-1.0, -1.0], [-1.0, -1.0]], f32)
    g = invoke("ExtractGlimpseV2", x, np.array([4, 4], i32), off,
               attrs={"uniform_noise": noise == "uniform", "noise": noise})
    assert g.shape == (2, 4, 4, 2) and g.dtype == f32
    # y = -1 * 6 / 2 + 3 - 2 = -2, x = -1 * 5 / 2 + 2.5 - 2 = -2: the image's top-left 2x2
    # lands in the window's bottom-right corner; the rest is noise.
    np.testing.assert_array_equal(g[:, 2:, 2:], x[:, :2, :2])
    noise_part = np.concatenate([g[:, :2].reshape(2, -1, 2), g[:, 2:, :2].reshape(2, -1, 2)],
                                axis=1)
    if noise == "uniform":      # over the whole image's range
        lo = x.reshape(2, -1).min(axis=1)[:, None, None]
        hi = x.reshape(2, -1).max(axis=1)[:, None, None]
    else:                       # clipped to each channel's range
        lo = x.min(axis=(1, 2))[:, None, :]
        hi = x.max(axis=(1, 2))[:, None, :]
    assert (noise_part >= lo).all() and (noise_part <= hi).all()
    assert len(np.unique(noise_part)) > 4


def test_max_pool_grad_with_argmax_rejects_foreign_indices() -> None:
    # TF's kernel aborts the process (a CHECK failure) on these.
    x = _image(2, 2, 2, 1)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}
    grad = np.ones((2, 1, 1, 1), f32)
    for argmax, batch_index in ((np.array([3, 4], i64), False), (np.array([3, -1], i64), False),
                                (np.array([5, 6], i64), True)):
        with pytest.raises(InvalidArgumentError, match="Invalid output gradient index"):
            invoke("MaxPoolGradWithArgmax", x, grad, argmax.reshape(2, 1, 1, 1),
                   attrs={**attrs, "include_batch_in_index": batch_index})
    ok = invoke("MaxPoolGradWithArgmax", x, grad, np.array([3, 7], i64).reshape(2, 1, 1, 1),
                attrs={**attrs, "include_batch_in_index": True})
    np.testing.assert_array_equal(ok.reshape(-1), [0, 0, 0, 1, 0, 0, 0, 1])


def test_image_projective_transform_rejects_unknown_modes() -> None:
    # TF only logs these and then uses an uninitialised mode.
    x = _image(1, 3, 3, 1)
    t = np.array([[1, 0, 0, 0, 1, 0, 0, 0]], f32)
    for attrs, msg in (({"interpolation": "BICUBIC"}, "Invalid interpolation"),
                       ({"interpolation": "NEAREST", "fill_mode": "MIRROR"}, "Invalid mode")):
        with pytest.raises(InvalidArgumentError, match=msg):
            invoke("ImageProjectiveTransformV2", x, t, np.array([3, 3], i32), attrs=attrs)
    same = invoke("ImageProjectiveTransformV2", x, t, np.array([3, 3], i32),
                  attrs={"interpolation": "BILINEAR"})
    np.testing.assert_array_equal(same, x)


def test_adjust_hue_many_turns_wraps_like_one() -> None:
    # A whole number of turns more or less leaves every hue where it was (up to rounding of
    # the shifted hue); a pure red pixel shifted by a third of a turn becomes green.
    x = np.array([[[1, 0, 0], [0.2, 0.6, 0.4]]], f32)
    base = invoke("AdjustHue", x, f32(0.25))
    np.testing.assert_allclose(invoke("AdjustHue", x, f32(1000.25)), base, atol=1e-4)
    np.testing.assert_allclose(invoke("AdjustHue", x[:, :1], f32(1 / 3)), [[[0, 1, 0]]],
                               atol=1e-6)
