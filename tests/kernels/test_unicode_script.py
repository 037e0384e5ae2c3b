"""UnicodeScript over the whole code space: TensorFlow's answers for every 61st code point
and both ends of every script run (tests/data/kernels/unicode_script, its generate.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dfg.executor.kernels.registry import invoke

DATA = Path(__file__).resolve().parents[1] / "data" / "kernels" / "unicode_script"


def test_unicode_script_equals_tensorflow_everywhere() -> None:
    want = np.load(DATA / "expected.npz")
    got = invoke("UnicodeScript", want["cp"])
    assert got.dtype == np.int32
    bad = np.flatnonzero(got != want["script"])
    assert bad.size == 0, [(hex(int(want["cp"][i])), int(got[i]), int(want["script"][i]))
                           for i in bad[:5]]


def test_out_of_range_code_points_are_invalid() -> None:
    got = invoke("UnicodeScript", np.array([-5, 0x110000, 0x7FFFFFFF], np.int32))
    assert got.tolist() == [-1, -1, -1]
