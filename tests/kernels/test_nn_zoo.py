"""Kernels the Keras model zoo needed (Conv3DBackpropInputV2 for Conv3DTranspose,
ScaleAndTranslate for lanczos/gaussian/mitchellcubic and antialiased resizing) against
TensorFlow's outputs (tests/data/models/kernels, written by tests/data/models/generate.py
--kernels with tf.raw_ops) and against math written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from checks import close

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError

DATA = Path(__file__).resolve().parent.parent / "data" / "models" / "kernels"
INDEX = json.loads((DATA / "kernels.json").read_text())


@pytest.fixture(scope="module")
def arrays():
    with np.load(DATA / "kernels.npz", allow_pickle=False) as z:
        yield {k: z[k] for k in z.files}


def _id(c: dict) -> str:
    return c["output"] + "-" + c["op"] + "-" + "-".join(
        f"{k}={v}" for k, v in c["attrs"].items() if k != "strides")


@pytest.mark.parametrize("c", INDEX, ids=[_id(c) for c in INDEX])
def test_equals_tensorflow(c: dict, arrays):
    got = invoke(c["op"], *[arrays[n] for n in c["inputs"]], attrs=c["attrs"])
    close(got, arrays[c["output"]], rtol=1e-4, atol=1e-5)


def test_cases_cover_every_sampling_kernel():
    kinds = {c["attrs"]["kernel_type"] for c in INDEX if c["op"] == "ScaleAndTranslate"}
    assert kinds == {"lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle",
                     "keyscubic", "mitchellcubic"}


def _conv3d(x: np.ndarray, f: np.ndarray, stride: int) -> np.ndarray:
    """VALID Conv3D by direct loops over output positions."""
    n, d, h, w, _ = x.shape
    kd, kh, kw, _, oc = f.shape
    od, oh, ow = ((d - kd) // stride + 1, (h - kh) // stride + 1, (w - kw) // stride + 1)
    y = np.zeros((n, od, oh, ow, oc))
    for a, b, e in np.ndindex(od, oh, ow):
        win = x[:, a * stride:a * stride + kd, b * stride:b * stride + kh,
                e * stride:e * stride + kw]
        y[:, a, b, e] = np.tensordot(win, f, axes=([1, 2, 3, 4], [0, 1, 2, 3]))
    return y


def test_conv3d_backprop_input_is_the_adjoint_of_conv3d():
    # <conv(x), dy> == <x, conv^T(dy)> for every x: check it for random x and dy.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 4, 6, 2))
    f = rng.standard_normal((2, 3, 2, 2, 3)).astype(np.float32)
    y = _conv3d(x, f.astype(np.float64), 2)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = invoke("Conv3DBackpropInputV2", np.array(x.shape, np.int32), f, dy,
                attrs={"strides": [1, 2, 2, 2, 1], "padding": "VALID"})
    assert dx.shape == x.shape and dx.dtype == np.float32
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-5)


def test_conv3d_backprop_input_rejects_a_mismatched_out_backprop():
    with pytest.raises(InvalidArgumentError, match="out_backprop must have shape"):
        invoke("Conv3DBackpropInputV2", np.array([1, 4, 4, 4, 2], np.int32),
               np.ones((2, 2, 2, 2, 3), np.float32), np.ones((1, 2, 2, 2, 3), np.float32),
               attrs={"strides": [1, 1, 1, 1, 1], "padding": "VALID"})


def test_scale_and_translate_identity_and_box_downsampling():
    img = np.arange(2 * 4 * 6 * 1, dtype=np.float32).reshape(2, 4, 6, 1)
    same_size = invoke("ScaleAndTranslate", img, np.array([4, 6], np.int32),
                       np.array([1, 1], np.float32), np.array([0, 0], np.float32),
                       attrs={"kernel_type": "triangle", "antialias": True})
    np.testing.assert_allclose(same_size, img, atol=1e-6)   # tent at pixel centres: identity
    half = invoke("ScaleAndTranslate", img, np.array([2, 3], np.int32),
                  np.array([0.5, 0.5], np.float32), np.array([0, 0], np.float32),
                  attrs={"kernel_type": "box", "antialias": True})
    # An antialiased box at scale 1/2 averages each 2x2 block.
    want = img.reshape(2, 2, 2, 3, 2, 1).mean(axis=(2, 4))
    np.testing.assert_allclose(half, want, rtol=1e-6)


def test_scale_and_translate_rejects_bad_arguments():
    img = np.zeros((1, 2, 2, 1), np.float32)
    args = (np.array([2, 2], np.int32), np.array([1, 1], np.float32),
            np.array([0, 0], np.float32))
    with pytest.raises(InvalidArgumentError, match="kernel type"):
        invoke("ScaleAndTranslate", img, *args, attrs={"kernel_type": "sinc"})
    with pytest.raises(InvalidArgumentError, match="Scale must be greater than zero"):
        invoke("ScaleAndTranslate", img, args[0], np.array([0, 1], np.float32), args[2])
