"""The fast-path cases (tests/data/fastpath, written by TensorFlow with its generate.py): 0-d
while loops and straight-line graphs in bfloat16, float16, wrapping and overflowing integers,
complex, and NaN/inf/-0.0 comparisons, where compiled programs' scalar forms and the
scheduler's inline paths must give the kernels' values. Each case runs in every mode
(programs never/auto/always x optimize off/auto/eager x threads 1/2/8), its steps twice so
that "auto" gets to compile, and must give TensorFlow's values bit for bit (NaN payloads
aside; zeros' signs included).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conformance import case_dirs, load_case

from dfg.executor import Session
from dfg.graphdef.io import load_graph

FASTPATH = Path(__file__).resolve().parent / "data" / "fastpath"
CASES = case_dirs(FASTPATH)


def test_the_corpus_is_there() -> None:
    names = {d.name for d in CASES}
    assert {"fp_bf16_loop", "fp_bf16_straight", "fp_f16_loop", "fp_int8_loop_wrap",
            "fp_int_overflow_loop", "fp_complex_loop", "fp_nan_compare"} <= names, names


def same_bits(actual: object, expected: np.ndarray, what: str) -> None:
    a = np.asarray(actual)
    assert a.dtype == expected.dtype, f"{what}: dtype {a.dtype} != {expected.dtype}"
    assert a.shape == expected.shape, f"{what}: shape {a.shape} != {expected.shape}"
    if a.dtype.kind in "fc":
        parts = [(a.real, expected.real), (a.imag, expected.imag)] if a.dtype.kind == "c" \
            else [(a, expected)]
        for x, e in parts:
            nan = np.isnan(e)
            assert (np.isnan(x) == nan).all(), f"{what}: NaN {x} vs TensorFlow's {e}"
            assert (x[~nan] == e[~nan]).all() and (
                np.signbit(x[~nan]) == np.signbit(e[~nan])).all(), \
                f"{what}: {a!r} vs TensorFlow's {expected!r}"
    else:
        assert np.array_equal(a, expected), f"{what}: {a!r} vs TensorFlow's {expected!r}"


@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("optimize", ["off", "auto", "eager"])
@pytest.mark.parametrize("programs", ["never", "auto", "always"])
@pytest.mark.parametrize("case", CASES, ids=[d.name for d in CASES])
def test_fastpath_case(case: Path, programs: str, optimize: str, threads: int) -> None:
    spec = load_case(case)
    assert spec["rtol"] == 0 and spec["atol"] == 0
    sess = Session(load_graph(case / "graph.pbtxt"), threads=threads, programs=programs,
                   optimize=optimize)
    try:
        for rnd in range(2):
            for i, step in enumerate(spec["steps"]):
                feed = {k: np.load(case / v, allow_pickle=False)
                        for k, v in step["feed"].items()}
                out = sess.run(step["fetch"], feed_dict=feed)
                for name, value in zip(step["fetch"], out):
                    want = np.load(case / step["expect"][name], allow_pickle=False)
                    same_bits(value, want, f"round {rnd} step {i} {name}")
    finally:
        sess.close()
