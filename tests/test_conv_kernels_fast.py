"""Every strategy of the convolution and pooling kernels (executor/kernels/_conv.py) against
a direct float64 evaluation of the definitions (zero padding placed as TensorFlow places it,
average over the real elements of each window). Shapes are chosen so that each plan mode is
taken, and each test asserts the mode it meant to reach.
"""

from __future__ import annotations

import numpy as np
import pytest

from dfg.executor.kernels import _conv
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError


def _same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    out = -(-size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    return total // 2, total - total // 2


def _pads(x_hw: tuple[int, int], k: tuple[int, int], s: tuple[int, int], d: tuple[int, int],
          padding: str, explicit: tuple | None = None) -> list[tuple[int, int]]:
    if padding == "VALID":
        return [(0, 0), (0, 0)]
    if padding == "EXPLICIT":
        return [explicit[0], explicit[1]]
    return [_same_pads(x_hw[i], k[i], s[i], d[i]) for i in range(2)]


def _windows(x: np.ndarray, k: tuple[int, int], s: tuple[int, int], d: tuple[int, int],
             pads: list[tuple[int, int]], fill: float) -> np.ndarray:
    """(N, OH, OW, KH, KW, C) windows of NHWC float64 ``x`` padded with ``fill``, by loops."""
    xp = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)], constant_values=fill)
    n, hp, wp, c = xp.shape
    oh = (hp - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (wp - (k[1] - 1) * d[1] - 1) // s[1] + 1
    out = np.empty((n, oh, ow, k[0], k[1], c))
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    out[:, i, j, a, b] = xp[:, i * s[0] + a * d[0], j * s[1] + b * d[1]]
    return out


def _ref_conv(x, f, s=(1, 1), d=(1, 1), padding="SAME", explicit=None):
    w = _windows(x.astype(np.float64), f.shape[:2], s, d,
                 _pads(x.shape[1:3], f.shape[:2], s, d, padding, explicit), 0.0)
    fc, oc = f.shape[2], f.shape[3]
    groups = x.shape[3] // fc
    ocg = oc // groups
    parts = [np.einsum("nhwabc,abco->nhwo", w[..., g * fc:(g + 1) * fc],
                       f[..., g * ocg:(g + 1) * ocg].astype(np.float64))
             for g in range(groups)]
    return np.concatenate(parts, axis=-1)


def _ref_depthwise(x, f, s=(1, 1), d=(1, 1), padding="SAME"):
    w = _windows(x.astype(np.float64), f.shape[:2], s, d,
                 _pads(x.shape[1:3], f.shape[:2], s, d, padding), 0.0)
    out = np.einsum("nhwabc,abcm->nhwcm", w, f.astype(np.float64))
    return out.reshape(out.shape[:3] + (-1,))


def _attrs(s, d=(1, 1), padding="SAME", fmt="NHWC", explicit=None) -> dict:
    def four(v):
        return [1, v[0], v[1], 1] if fmt == "NHWC" else [1, 1, v[0], v[1]]

    a = {"strides": four(s), "dilations": four(d), "padding": padding, "data_format": fmt}
    if explicit is not None:
        flat = [0, 0, *explicit[0], *explicit[1], 0, 0]
        a["explicit_paddings"] = flat if fmt == "NHWC" else [0, 0, 0, 0, *flat[2:6]]
    return a


def _conv_mode(x, f, a) -> str:
    fmt = a["data_format"]
    xs = x.shape if fmt == "NHWC" else (x.shape[0], x.shape[2], x.shape[3], x.shape[1])
    return _conv._conv_plan(xs, f.shape, np.dtype(np.float32).itemsize,
                            tuple(a["strides"]), a["padding"], tuple(a["dilations"]), fmt,
                            tuple(a.get("explicit_paddings") or ())).mode


rng = np.random.default_rng(7)

CONV_CASES = [
    # (x shape NHWC, filter shape, strides, dilations, padding, explicit, expected mode)
    ((2, 7, 7, 20), (1, 1, 20, 4), (1, 1), (1, 1), "SAME", None, "gemm"),
    ((2, 9, 8, 12), (1, 1, 12, 5), (2, 3), (1, 1), "VALID", None, "gemm"),
    ((2, 7, 7, 4), (3, 3, 4, 6), (1, 1), (1, 1), "SAME", None, "gather"),
    ((2, 3, 3, 8), (1, 7, 8, 10), (1, 1), (1, 1), "SAME", None, "gather"),
    ((1, 9, 10, 16), (3, 2, 16, 4), (2, 3), (2, 1), "SAME", None, "gather"),
    ((2, 8, 8, 9), (3, 3, 9, 4), (1, 1), (1, 1), "VALID", None, "gather"),
    ((1, 8, 7, 10), (2, 3, 10, 3), (1, 2), (1, 1), "EXPLICIT", ((1, 2), (0, 3)), "gather"),
    ((1, 5, 5, 10), (1, 1, 10, 3), (1, 1), (1, 1), "EXPLICIT", ((1, 0), (2, 1)), "gather"),
    ((1, 66, 66, 32), (3, 3, 32, 8), (1, 1), (1, 1), "SAME", None, "taps"),
    ((1, 132, 66, 32), (3, 3, 32, 5), (2, 1), (1, 2), "VALID", None, "taps"),
    ((2, 38, 38, 3), (7, 7, 3, 8), (2, 2), (1, 1), "VALID", None, "im2col"),
    ((1, 40, 40, 3), (3, 3, 3, 4), (1, 1), (1, 1), "SAME", None, "im2col"),
    ((2, 6, 6, 8), (3, 3, 4, 6), (1, 1), (1, 1), "SAME", None, "grouped"),
    # one input channel per group (Keras ConvNeXt's 7x7 convs): the depthwise kernels
    ((2, 9, 9, 6), (3, 3, 1, 6), (1, 1), (1, 1), "SAME", None, "depthwise"),
    ((1, 8, 7, 5), (3, 3, 1, 10), (2, 1), (1, 1), "SAME", None, "depthwise"),
    ((1, 12, 12, 4), (3, 3, 1, 4), (1, 1), (2, 2), "VALID", None, "depthwise"),
    ((2, 40, 40, 8), (7, 7, 1, 8), (1, 1), (1, 1), "SAME", None, "depthwise"),
]


# "0": the numpy paths only; "": the compiled kernels where they apply (when built)
NATIVE = ["0", ""]


@pytest.mark.parametrize("xs,fs,s,d,padding,explicit,mode", CONV_CASES)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("native", NATIVE)
def test_conv2d_paths_match_definition(xs, fs, s, d, padding, explicit, mode, fmt, native,
                                       monkeypatch) -> None:
    monkeypatch.setenv("DFG_NATIVE", native)
    x = rng.standard_normal(xs).astype(np.float32)
    f = rng.standard_normal(fs).astype(np.float32)
    a = _attrs(s, d, padding, fmt, explicit)
    xin = x if fmt == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    assert _conv_mode(xin, f, a) == mode
    want = _ref_conv(x, f, s, d, padding, explicit)
    got = invoke("Conv2D", xin, f, attrs=a)
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # The plain function (what the fused kernels call) gives the same array.
    plain = _conv.conv2d(xin, f, a["strides"], padding, a["dilations"], fmt,
                         a.get("explicit_paddings"))
    np.testing.assert_array_equal(plain if fmt == "NHWC" else plain.transpose(0, 2, 3, 1),
                                  got)


def test_conv2d_float16_and_float64_and_empty() -> None:
    x = rng.standard_normal((2, 6, 6, 8))
    f = rng.standard_normal((3, 3, 8, 4))
    want = _ref_conv(x, f)
    got64 = invoke("Conv2D", x, f, attrs=_attrs((1, 1)))
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, want, rtol=1e-10, atol=1e-10)
    got16 = invoke("Conv2D", x.astype(np.float16), f.astype(np.float16), attrs=_attrs((1, 1)))
    assert got16.dtype == np.float16
    np.testing.assert_allclose(got16.astype(np.float64), want, rtol=2e-2, atol=5e-2)
    empty = invoke("Conv2D", np.zeros((0, 6, 6, 8), np.float32), f.astype(np.float32),
                   attrs=_attrs((1, 1)))
    assert empty.shape == (0, 6, 6, 4)


def test_conv2d_errors_name_expected_and_found() -> None:
    x = np.zeros((1, 4, 4, 6), np.float32)
    with pytest.raises(InvalidArgumentError, match="evenly divisible by filter depth: 6 vs 4"):
        _conv.conv2d(x, np.zeros((1, 1, 4, 2), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(InvalidArgumentError, match="same dtype"):
        _conv.conv2d(x, np.zeros((1, 1, 6, 2), np.float64), [1, 1, 1, 1], "SAME")
    with pytest.raises(InvalidArgumentError, match="strides must specify 4 dimensions"):
        _conv.conv2d(x, np.zeros((1, 1, 6, 2), np.float32), [1, 1], "SAME")
    with pytest.raises(InvalidArgumentError, match="padding must be SAME, VALID or EXPLICIT"):
        _conv.conv2d(x, np.zeros((1, 1, 6, 2), np.float32), [1, 1, 1, 1], "FULL")
    # A failed plan is not cached: the same call fails again.
    with pytest.raises(InvalidArgumentError):
        _conv.conv2d(x, np.zeros((1, 1, 6, 2), np.float32), [1, 1, 1, 1], "FULL")


DEPTHWISE_CASES = [
    ((2, 8, 8, 32), (3, 3, 32, 1), (1, 1), (1, 1), "SAME", "gather"),
    ((2, 9, 9, 6), (3, 3, 6, 2), (2, 2), (1, 1), "VALID", "gather"),
    ((1, 7, 8, 5), (3, 2, 5, 3), (1, 2), (2, 1), "SAME", "gather"),
    ((1, 40, 40, 48), (3, 3, 48, 1), (1, 1), (1, 1), "SAME", "taps"),
    ((1, 41, 40, 24), (5, 3, 24, 2), (2, 1), (1, 2), "SAME", "taps"),
    ((1, 80, 81, 48), (3, 3, 48, 1), (2, 2), (1, 1), "VALID", "taps"),
    ((2, 30, 31, 40), (5, 5, 40, 1), (2, 1), (1, 2), "SAME", "taps"),    # wide windows, dilated
]


@pytest.mark.parametrize("xs,fs,s,d,padding,mode", DEPTHWISE_CASES)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("native", NATIVE)
def test_depthwise_paths_match_definition(xs, fs, s, d, padding, mode, fmt, native,
                                          monkeypatch) -> None:
    monkeypatch.setenv("DFG_NATIVE", native)
    x = rng.standard_normal(xs).astype(np.float32)
    f = rng.standard_normal(fs).astype(np.float32)
    a = _attrs(s, d, padding, fmt)
    plan = _conv._depthwise_plan(xs, fs, 4, tuple(a["strides"]), padding,
                                 tuple(a["dilations"]), fmt, ())
    assert plan.mode == mode
    xin = x if fmt == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = invoke("DepthwiseConv2dNative", xin, f, attrs=a)
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
    want = _ref_depthwise(x, f, s, d, padding)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _ref_pool(x, k, s, padding, kind):
    fill = -np.inf if kind == "max" else np.nan
    w = _windows(x.astype(np.float64), k, s, (1, 1), _pads(x.shape[1:3], k, s, (1, 1),
                                                            padding), fill)
    if kind == "max":
        return w.max(axis=(3, 4))
    return np.nanmean(w, axis=(3, 4))   # mean over the real elements only


POOL_CASES = [
    ((2, 3, 3, 68), (3, 3), (2, 2), "VALID", "gather"),
    ((2, 7, 7, 12), (3, 3), (1, 1), "SAME", "gather"),
    ((2, 8, 9, 5), (2, 3), (2, 2), "SAME", "gather"),
    ((1, 60, 60, 40), (3, 3), (2, 2), "SAME", "taps"),
    ((1, 61, 60, 40), (2, 3), (1, 2), "SAME", "taps"),
]


@pytest.mark.parametrize("xs,k,s,padding,mode", POOL_CASES)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_pool_paths_match_definition(xs, k, s, padding, mode, kind, fmt) -> None:
    x = rng.standard_normal(xs).astype(np.float32)
    a = _attrs(s, padding=padding, fmt=fmt)
    a.pop("dilations")
    a["ksize"] = [1, k[0], k[1], 1] if fmt == "NHWC" else [1, 1, k[0], k[1]]
    plan = _conv._pool_plan(kind, xs if fmt == "NHWC" else (xs[0], xs[3], xs[1], xs[2]), 4,
                            tuple(a["ksize"]), tuple(a["strides"]), padding, fmt, ())
    assert plan.mode == (mode if fmt == "NHWC" else "taps")
    xin = x if fmt == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    got = invoke("MaxPool" if kind == "max" else "AvgPool", xin, attrs=a)
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
    want = _ref_pool(x, k, s, padding, kind)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("xs", [(1, 6, 6, 16), (1, 60, 60, 40)])
def test_max_pool_nan_and_integers(xs) -> None:
    x = rng.standard_normal(xs).astype(np.float32)
    x[0, 2, 3, 1] = np.nan
    a = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    got = invoke("MaxPool", x, attrs=a)
    # TensorFlow's kernel (Eigen's max with the accumulator first, as TF 2.21 gives it with
    # and without oneDNN): a NaN never wins its window
    assert not np.isnan(got).any()
    assert got[0, 1, 1, 1] == np.nanmax(x[0, 2:4, 2:4, 1])
    xi = rng.integers(-100, 100, xs).astype(np.int32)
    a = {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    got = invoke("MaxPool", xi, attrs=a)
    want = _ref_pool(xi, (3, 3), (2, 2), "SAME", "max")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_avg_pool_float16_divides_by_real_elements() -> None:
    x = np.ones((1, 5, 5, 16), np.float16)
    got = invoke("AvgPool", x, attrs={"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1],
                                      "padding": "SAME"})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.ones((1, 3, 3, 16), np.float16))


def test_blas_threads_are_left_alone_unless_asked(monkeypatch) -> None:
    """BLAS keeps its default whatever the Session's threads (measured faster on an idle
    machine, executor/blas.py); DFG_BLAS_THREADS=N sets it, and unsetting it restores it."""
    pytest.importorskip("threadpoolctl")
    from dfg.executor import Session, blas
    from dfg.graphdef import builder as B

    if not blas.current():
        pytest.skip("no BLAS library found by threadpoolctl")
    monkeypatch.delenv("DFG_BLAS_THREADS", raising=False)
    blas.configure(2)
    default = blas.current()[0]["threads"]
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 2], name="x")
        B.identity(x @ x, name="y")
    xv = np.array([[1, 2], [3, 4]], np.float32)
    try:
        with Session(g.as_graph_def(), threads=2) as sess:
            assert blas.current()[0]["threads"] == default
            np.testing.assert_array_equal(sess.run(["y:0"], {"x:0": xv})[0], xv @ xv)
        monkeypatch.setenv("DFG_BLAS_THREADS", "1")
        with Session(g.as_graph_def(), threads=2) as sess:
            assert blas.current()[0]["threads"] == 1
            np.testing.assert_array_equal(sess.run(["y:0"], {"x:0": xv})[0], xv @ xv)
        monkeypatch.setenv("DFG_BLAS_THREADS", "not a number")
        assert blas.configure(2) == default     # nonsense: BLAS's default again
    finally:
        monkeypatch.delenv("DFG_BLAS_THREADS", raising=False)
        blas.configure(2)
    assert blas.current()[0]["threads"] == default


def _ref_conv_backprop_input(x_shape, f, dy, s, padding):
    """d(sum(conv(x, f) * dy)) / dx by the definition: every output tap scatters dy @ f^T."""
    n, h, w, c = x_shape
    kh, kw = f.shape[:2]
    pads = _pads((h, w), (kh, kw), s, (1, 1), padding)
    dxp = np.zeros((n, h + sum(pads[0]), w + sum(pads[1]), c))
    for oy in range(dy.shape[1]):
        for ox in range(dy.shape[2]):
            for i in range(kh):
                for j in range(kw):
                    dxp[:, oy * s[0] + i, ox * s[1] + j] += \
                        dy[:, oy, ox].astype(np.float64) @ f[i, j].T.astype(np.float64)
    return dxp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + w]


@pytest.mark.parametrize("x_shape,k,s,padding,tiled", [
    ((2, 8, 6, 3), (2, 2), (2, 2), "SAME", True),      # Keras Conv2DTranspose(2, strides=2)
    ((1, 9, 12, 4), (3, 3), (3, 3), "VALID", True),
    ((2, 8, 8, 16), (2, 2), (2, 2), "VALID", True),
    ((1, 9, 9, 4), (2, 2), (2, 2), "VALID", False),    # the last row and column untouched
    ((2, 7, 7, 3), (3, 3), (2, 2), "SAME", False),     # overlapping windows
])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_conv2d_backprop_input_matches_definition(x_shape, k, s, padding, tiled, fmt) -> None:
    rng = np.random.default_rng(5)
    oc = 5
    f = rng.standard_normal(k + (x_shape[3], oc)).astype(np.float32)
    g = _conv.geometry(x_shape, "NHWC", k[0], k[1], (1,) + s + (1,), (1, 1, 1, 1), padding,
                       None)
    assert _conv.tiles_exactly(g) == tiled
    dy = rng.standard_normal((x_shape[0], g.oh, g.ow, oc)).astype(np.float32)
    want = _ref_conv_backprop_input(x_shape, f, dy, s, padding)
    nchw = (0, 3, 1, 2)
    sizes = np.array(x_shape if fmt == "NHWC" else [x_shape[i] for i in nchw], np.int32)
    got = invoke("Conv2DBackpropInput", sizes, f,
                 dy if fmt == "NHWC" else np.ascontiguousarray(dy.transpose(nchw)),
                 attrs=_attrs(s, padding=padding, fmt=fmt))
    if fmt == "NCHW":
        got = got.transpose(0, 2, 3, 1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("entry", ["dfg.graphdef", "dfg.executor", "dfg.cli.main"])
def test_openblas_thread_timeout_is_set_before_numpy_loads(entry) -> None:
    """OpenBLAS reads its spin timeout once, when numpy loads it: every dfg entry point sets
    it (2^14 cycles) before importing numpy, and a value in the environment wins."""
    import os
    import subprocess
    import sys

    code = (f"import sys, os; import {entry}; "
            "print(os.environ['OPENBLAS_THREAD_TIMEOUT']); import numpy")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["14"]
    env["OPENBLAS_THREAD_TIMEOUT"] = "6"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["6"]
