"""Spectral kernels beyond what the raw-op manifest can hold.

* "FFTND", "IFFTND", "RFFTND", "IRFFTND": TensorFlow 2.21 has no CPU kernel for them, so
  ``tests/data/kernels/raw_ops_spectral/generate.py`` computed their expected values with
  TensorFlow's fixed-rank ops on the cropped / zero-padded input (``fftnd.json``).
* AudioSpectrogram across its working chunks, against the DFT written out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_raw_ops import arr, attr, compare

from dfg.executor.kernels import spectral
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import errors

FOLDER = "raw_ops_spectral"
CASES = json.loads((Path(__file__).resolve().parent.parent / "data" / "kernels" / FOLDER
                    / "fftnd.json").read_text())
ND_OPS = ("FFTND", "IFFTND", "RFFTND", "IRFFTND")


def test_every_nd_op_has_cases() -> None:
    assert {c["op"] for c in CASES} == set(ND_OPS)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['op']}-{c['note']}" for c in CASES])
def test_nd_case(case: dict) -> None:
    inputs = [arr(k, FOLDER) for k in case["inputs"]]
    attrs = {k: attr(v) for k, v in case["attrs"].items()}
    if "error" in case:
        with pytest.raises(errors.OpError) as info:
            invoke(case["op"], *inputs, attrs=attrs)
        assert type(info.value).__name__ == case["error"]
        return
    got = invoke(case["op"], *inputs, attrs=attrs)
    compare(got, arr(case["outputs"][0], FOLDER), case.get("tol"), f"{case['op']} {case['note']}")


def test_rfftnd_then_irfftnd_is_the_identity() -> None:
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 6))
    n, axes = np.array([3, 5, 6], np.int32), np.array([-3, -2, -1], np.int32)
    y = invoke("RFFTND", x, n, axes, attrs={"Tcomplex": np.dtype(np.complex128)})
    assert y.shape == (2, 3, 5, 4) and y.dtype == np.complex128
    back = invoke("IRFFTND", y, n, axes, attrs={"Treal": np.dtype(np.float64)})
    np.testing.assert_allclose(back, x, rtol=1e-12, atol=1e-12)


def test_audio_spectrogram_across_chunks_matches_the_dft(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr(spectral, "_CHUNK_ELEMS", 800)  # 100 frames of fft length 8 a chunk
    rng = np.random.default_rng(2)
    x = rng.standard_normal((250, 1)).astype(np.float32)
    window = 8
    out = invoke("AudioSpectrogram", x, attrs={"window_size": window, "stride": 1})
    assert out.shape == (1, 243, 5) and out.dtype == np.float32
    j = np.arange(window)
    hann = 0.5 - 0.5 * np.cos(2 * np.pi * j / window)  # periodic Hann
    k = np.arange(5)[:, None]
    for f in (0, 99, 100, 199, 200, 242):
        frame = x[f:f + window, 0].astype(np.float64) * hann
        re = (np.cos(2 * np.pi * k * j / window) * frame).sum(1)
        im = (np.sin(2 * np.pi * k * j / window) * frame).sum(1)
        np.testing.assert_allclose(out[0, f], np.sqrt(re * re + im * im), rtol=1e-5, atol=1e-6)


def test_zero_fft_length_gives_an_empty_output() -> None:
    # TensorFlow aborts in DUCC here; the shapes are those of its shape functions
    x = np.ones((3, 4), np.float32)
    assert invoke("RFFT", x, np.array([0], np.int32)).shape == (3, 0)
    c = np.ones((3, 4), np.complex64)
    y = invoke("IRFFT", c, np.array([0], np.int32))
    assert y.shape == (3, 0) and y.dtype == np.float32
