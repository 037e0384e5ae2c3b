"""The optional compiled kernels: the direct convolution (executor/native/conv.c) against the
definition of a convolution, and through the Conv2D kernels and a Session against
TensorFlow's outputs; erf/erfc (executor/native/elementwise.c) against Python's math;
sigmoid and tanh against float64 numpy.

Skipped when the extension was not built (no C compiler at install)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.kernels import _conv, _native
from dfg.executor.kernels.registry import invoke

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")

BENCH = Path(__file__).parent / "data" / "bench"


def _definition(x: np.ndarray, f: np.ndarray, g: _conv.Geom) -> np.ndarray:
    """sum over taps of x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, :] @ f[ky, kx], with
    zeros outside x, in float64."""
    kh, kw, _, oc = f.shape
    pad_h = max(0, (g.oh - 1) * g.sh + (kh - 1) * g.dh + 1 - g.pt - g.h)
    pad_w = max(0, (g.ow - 1) * g.sw + (kw - 1) * g.dw + 1 - g.pl - g.w)
    xp = np.pad(x.astype(np.float64), ((0, 0), (g.pt, pad_h), (g.pl, pad_w), (0, 0)))
    out = np.zeros((g.n, g.oh, g.ow, oc))
    for ky in range(kh):
        for kx in range(kw):
            win = xp[:, ky * g.dh:ky * g.dh + (g.oh - 1) * g.sh + 1:g.sh,
                     kx * g.dw:kx * g.dw + (g.ow - 1) * g.sw + 1:g.sw]
            out += win @ f[ky, kx].astype(np.float64)
    return out


GEOMETRIES = [
    # x shape, filter shape, strides, dilations, padding
    ((1, 9, 11, 3), (3, 3, 3, 16), (1, 1), (1, 1), "SAME"),
    ((2, 17, 13, 16), (3, 3, 16, 17), (1, 1), (1, 1), "SAME"),
    ((3, 7, 5, 33), (3, 3, 33, 40), (2, 2), (1, 1), "SAME"),
    ((2, 20, 21, 5), (5, 5, 5, 1), (1, 1), (1, 1), "VALID"),
    ((1, 31, 29, 8), (4, 2, 8, 21), (3, 2), (1, 1), "SAME"),
    ((2, 16, 16, 12), (3, 3, 12, 32), (1, 1), (2, 2), "SAME"),
    ((1, 12, 40, 4), (1, 7, 4, 64), (1, 1), (1, 3), "VALID"),
    ((1, 6, 6, 2), (7, 7, 2, 3), (1, 1), (1, 1), "SAME"),      # window wider than the input
    ((2, 10, 10, 6), (3, 3, 6, 48), (1, 1), (1, 1), [[0, 0], [2, 0], [1, 3], [0, 0]]),
]


@pytest.mark.parametrize("xs,fs,strides,dilations,padding", GEOMETRIES, ids=str)
def test_direct_convolution_equals_the_definition(xs, fs, strides, dilations, padding,
                                                  monkeypatch) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    f = rng.standard_normal(fs).astype(np.float32)
    explicit = None
    if isinstance(padding, list):
        explicit, padding = [v for pair in padding for v in pair], "EXPLICIT"
    g = _conv.geometry(xs, "NHWC", fs[0], fs[1], [1, *strides, 1], [1, *dilations, 1],
                       padding, explicit)
    want = _definition(x, f, g)
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DFG_BLAS_THREADS", threads)
        got = _native.conv2d_nhwc_f32(x, f, g)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 6, 7, 8, 13, 32, 40, 42, 45, 77, 144])
def test_depthwise_convolution_equals_the_definition(channels) -> None:
    """The compiled depthwise kernel (channel blocks of 32 and 8 in registers, then one case
    per count of the last few) against each channel's own convolution in float64: every block
    size and tail, with padding, strides and dilations."""
    rng = np.random.default_rng(channels)
    for xs, k, strides, dilations, padding in (
            ((2, 9, 11, channels), 3, (1, 1), (1, 1), "SAME"),
            ((1, 12, 10, channels), 5, (2, 2), (1, 1), "SAME"),
            ((1, 11, 13, channels), 3, (1, 2), (2, 1), "VALID")):
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal((k, k, channels, 1)).astype(np.float32)
        g = _conv.geometry(xs, "NHWC", k, k, [1, *strides, 1], [1, *dilations, 1], padding,
                           None)
        # each channel alone is a one-channel convolution: the definition above
        want = np.concatenate([_definition(x[..., c:c + 1], f[:, :, c:c + 1], g)
                               for c in range(channels)], axis=-1)
        got = _native.depthwise_nhwc_f32(x, f, g)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _single_threaded(monkeypatch, seed: int, x_shape: tuple, f_shape: tuple) -> tuple:
    """x, f, their SAME 3x3 geometry, and the convolution computed on one thread."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    f = rng.standard_normal(f_shape).astype(np.float32)
    g = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", None)
    monkeypatch.setenv("DFG_BLAS_THREADS", "1")
    return x, f, g, _native.conv2d_nhwc_f32(x, f, g)


def test_rows_split_over_threads_give_the_same_bits(monkeypatch) -> None:
    # Each output element is summed in the same order whichever thread computes its row.
    x, f, g, one = _single_threaded(monkeypatch, 5, (4, 64, 64, 32), (3, 3, 32, 16))
    monkeypatch.setenv("DFG_BLAS_THREADS", "2")
    assert _native.conv2d_nhwc_f32(x, f, g).tobytes() == one.tobytes()


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_conv2d_kernels_agree_with_the_native_path_on_and_off(fmt, monkeypatch) -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 48, 48, 24)).astype(np.float32)
    f = rng.standard_normal((3, 3, 24, 32)).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    g = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", None)
    assert _conv._conv_plan(x.shape, f.shape, 4, (1, 1, 1, 1), "SAME", (1, 1, 1, 1), "NHWC",
                            ()).native
    want = _definition(x, f, g)
    xin = x if fmt == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": fmt}
    for mode in ("0", "1"):
        monkeypatch.setenv("DFG_NATIVE", mode)
        assert _native.enabled() == (mode == "1")
        y = invoke("Conv2D", xin, f, attrs=attrs)
        z = invoke("_FusedConv2D", xin, f, bias,
                   attrs={**attrs, "fused_ops": ["BiasAdd", "Relu"], "num_args": 1})
        if fmt == "NCHW":
            y, z = y.transpose(0, 2, 3, 1), z.transpose(0, 2, 3, 1)
        tol = 1e-5 * np.abs(want).max()
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=tol)
        np.testing.assert_allclose(z, np.maximum(want + bias, 0), rtol=1e-5, atol=tol)


@pytest.mark.parametrize("case", ["bench_unet", "bench_resnet_style"])
def test_models_with_native_convolutions_match_tensorflow(case, monkeypatch) -> None:
    from dfg.executor import Session
    from dfg.graphdef.io import load_graph

    monkeypatch.setenv("DFG_NATIVE", "1")
    d = BENCH / case
    spec = json.loads((d / "case.json").read_text())
    step = spec["steps"][0]
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    with Session(load_graph(d / "graph.pb"), threads=2) as s:
        got = s.run(step["fetch"], feed)
    for name, value in zip(step["fetch"], got):
        np.testing.assert_allclose(value, np.load(d / step["expect"][name]),
                                   rtol=spec["rtol"], atol=spec["atol"])


_ERF_POINTS = np.concatenate([np.linspace(-12, 12, 48001), [
    -0.0, 0.0, 1e-30, -1e-30, 1e-8, 0.49999, 0.5, 0.50001, -0.5, 10.9, 11.0, 11.5, 30.0,
    np.inf, -np.inf, 3e38]]).astype(np.float32)


@pytest.mark.parametrize("op,fn", [("Erf", math.erf), ("Erfc", math.erfc)])
def test_compiled_erf_and_erfc_are_within_2e_7_of_python_math(op, fn, monkeypatch) -> None:
    monkeypatch.delenv("DFG_NATIVE", raising=False)
    assert _native.enabled()
    got = invoke(op, _ERF_POINTS)
    assert got.dtype == np.float32
    want = np.array([fn(v) for v in _ERF_POINTS.astype(np.float64)])
    # double-precision evaluation of a fit with fractional error 1.2e-7, rounded once
    normal = np.abs(want) > np.finfo(np.float32).tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-7)
    np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=2e-45)
    assert np.array_equal(np.signbit(got), np.signbit(want.astype(np.float32)))
    nan = invoke(op, np.full(600, np.nan, np.float32))
    assert np.isnan(nan).all()


@pytest.mark.parametrize("op", ["Erf", "Erfc"])
def test_compiled_and_numpy_erf_agree_in_every_single_precision_dtype(op, monkeypatch) -> None:
    for dtype in (np.float32, np.float16):
        x = _ERF_POINTS[np.abs(_ERF_POINTS) < 60000].astype(dtype)
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert not _native.enabled()
        numpy_path = invoke(op, x)
        monkeypatch.delenv("DFG_NATIVE")
        compiled = invoke(op, x)
        assert compiled.dtype == numpy_path.dtype == dtype
        # both within 6e-7 of the truth, so within 1.2e-6 of each other (float16: one ulp)
        tol = 1.2e-6 if dtype == np.float32 else 1e-3
        np.testing.assert_allclose(compiled.astype(np.float64), numpy_path.astype(np.float64),
                                   rtol=tol, atol=1e-38)


_ACT_POINTS = np.concatenate([np.linspace(-40, 40, 160001), [
    -0.0, 0.0, 1e-30, -1e-30, 1e-8, -1e-8, 1e-40, -1e-40, 0.29999, 0.3, 0.30001, 9.1, -9.1,
    20.0, 21.0, 87.0, -87.0, -88.8, -103.0, -104.0, 200.0, -200.0, 3e38, -3e38, np.inf,
    -np.inf]]).astype(np.float32)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of float32's spacing at want (want in float64)."""
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
def test_compiled_sigmoid_and_tanh_are_within_2_ulps(op, monkeypatch) -> None:
    """Computed in float32 arithmetic (elementwise.c says how): within 2 ulps of the
    correctly rounded value, so 2.5 of the exact one from float64 numpy (subnormal results
    too), signs of zeros kept, NaN kept, the limits exact."""
    monkeypatch.delenv("DFG_NATIVE", raising=False)
    assert _native.enabled()
    x64 = _ACT_POINTS.astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.tanh(x64) if op == "Tanh" else 1 / (1 + np.exp(-x64))
    got = invoke(op, _ACT_POINTS)
    assert got.dtype == np.float32 and got.shape == _ACT_POINTS.shape
    assert _ulps(got, want).max() <= 2.5
    assert np.array_equal(np.signbit(got), np.signbit(want.astype(np.float32)))
    limits = {"Tanh": (1.0, -1.0), "Sigmoid": (1.0, 0.0)}[op]
    assert list(invoke(op, np.array([np.inf, -np.inf], np.float32))) == list(limits)
    nan = invoke(op, np.full(700, np.nan, np.float32))
    assert np.isnan(nan).all()


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
def test_compiled_and_numpy_sigmoid_and_tanh_agree(op, monkeypatch) -> None:
    """Both paths within a few ulps of each other where the result is a normal float: the
    numpy sigmoid rounds in each of its four float32 passes (and gives 0 where e^-x
    overflows float32 and the exact value is subnormal)."""
    x = _ACT_POINTS[::2].copy()
    monkeypatch.setenv("DFG_NATIVE", "0")
    numpy_path = invoke(op, x)
    monkeypatch.delenv("DFG_NATIVE")
    compiled = invoke(op, x)
    normal = np.abs(compiled) >= np.finfo(np.float32).tiny
    assert _ulps(compiled[normal], numpy_path[normal].astype(np.float64)).max() <= 4
    assert np.array_equal(np.isnan(compiled), np.isnan(numpy_path))


def test_compiled_activations_split_on_threads_and_in_place_give_the_same_bits(
        monkeypatch) -> None:
    """A large tensor's blocks run on the native pool: each thread count gives the bits of
    one thread; out may be x itself; a strided input is read through a copy."""
    x = (np.random.default_rng(5).standard_normal((9, 70001)) * 6).astype(np.float32)
    for kind in (_native.SIGMOID, _native.TANH):
        monkeypatch.setenv("DFG_BLAS_THREADS", "1")
        one = _native.activation_f32(x, kind)
        for threads in ("2", "3"):
            monkeypatch.setenv("DFG_BLAS_THREADS", threads)
            assert np.array_equal(_native.activation_f32(x, kind), one)
        y = x.copy()
        assert _native.activation_f32(y, kind, y) is y and np.array_equal(y, one)
        assert np.array_equal(_native.activation_f32(x[:, ::2], kind), one[:, ::2])


def test_compiled_erf_and_softmax_split_on_threads_give_the_same_bits(monkeypatch) -> None:
    """A Transformer's GELU (erfc) and attention softmax are large enough to split on the
    native pool: each thread count gives the bits of one thread."""
    x = (np.random.default_rng(6).standard_normal((9, 70007)) * 4).astype(np.float32)
    monkeypatch.setenv("DFG_BLAS_THREADS", "1")
    one = [_native.erf_f32(x, False), _native.erf_f32(x, True),
           _native.softmax_f32(x, False), _native.softmax_f32(x.reshape(-1, 7), True)]
    for threads in ("2", "3"):
        monkeypatch.setenv("DFG_BLAS_THREADS", threads)
        got = [_native.erf_f32(x, False), _native.erf_f32(x, True),
               _native.softmax_f32(x, False), _native.softmax_f32(x.reshape(-1, 7), True)]
        for a, b in zip(got, one):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("shape", [(8, 4, 64, 64), (3, 1000), (600, 1), (2, 37, 19)])
def test_compiled_softmax_and_log_softmax_match_the_definition(shape, monkeypatch) -> None:
    monkeypatch.delenv("DFG_NATIVE", raising=False)
    x = (np.random.default_rng(3).standard_normal(shape) * 8).astype(np.float32)
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(-1, keepdims=True)
    total = np.exp(shifted).sum(-1, keepdims=True)
    got = invoke("Softmax", x)
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_allclose(got, np.exp(shifted) / total, rtol=3e-7, atol=1e-37)
    got_log = invoke("LogSoftmax", x)
    np.testing.assert_allclose(got_log, shifted - np.log(total), rtol=3e-7, atol=3e-7)


def test_compiled_softmax_special_values_follow_the_numpy_path(monkeypatch) -> None:
    rows = [[1, 2, np.nan, 3], [np.nan, 1, 2, 3], [np.inf, 1, 2, 3], [-np.inf] * 4,
            [0, -np.inf, 1e30, -1e30], [-1e4, 0, -1e4, -1e4]]
    x = np.repeat(np.array(rows, np.float32), 200, axis=1)     # past the ctypes floor
    for op in ("Softmax", "LogSoftmax"):
        monkeypatch.setenv("DFG_NATIVE", "0")
        numpy_path = invoke(op, x)
        monkeypatch.delenv("DFG_NATIVE")
        compiled = invoke(op, x)
        np.testing.assert_allclose(compiled, numpy_path, rtol=3e-7, atol=0)
        assert np.array_equal(np.isnan(compiled), np.isnan(numpy_path))
    # a row of -inf and a row holding NaN or +inf are NaN throughout, as in TensorFlow
    assert np.isnan(invoke("Softmax", x)[[0, 1, 2, 3]]).all()


@pytest.mark.parametrize("fused_ops", [
    ["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"], ["BiasAdd", "Add", "Relu"],
    ["FusedBatchNorm"], ["FusedBatchNorm", "Relu"], ["FusedBatchNorm", "Add", "Relu6"],
    ["BiasAdd", "Elu"],     # an activation the compiled epilogue does not take: numpy's
])
def test_fused_conv2d_epilogue_in_the_compiled_kernel_matches_the_definition(
        fused_ops, monkeypatch) -> None:
    monkeypatch.setenv("DFG_NATIVE", "1")   # the compiled conv on any CPU (default: AVX-512)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 40, 36, 8)).astype(np.float32)   # 10 MFLOP: native
    f = rng.standard_normal((3, 3, 8, 24)).astype(np.float32)
    x[0, 5, 5, :] = np.nan          # NaN must survive Relu and Relu6, as TensorFlow keeps it
    g = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", None)
    assert _conv._conv_plan(x.shape, f.shape, 4, (1, 1, 1, 1), "SAME", (1, 1, 1, 1), "NHWC",
                            ()).native
    y, args = _fused_epilogue(_definition(x, f, g), fused_ops, rng)
    got = invoke("_FusedConv2D", x, f, *args,
                 attrs={"strides": [1, 1, 1, 1], "padding": "SAME", "fused_ops": fused_ops,
                        "num_args": len(args), "epsilon": 1e-3})
    _assert_matches(got, y)


def _assert_matches(got: np.ndarray, y: np.ndarray) -> None:
    """A fused convolution's float32 result against its float64 definition ``y``: NaN where
    ``y`` has it, close elsewhere."""
    assert got.dtype == np.float32 and got.shape == y.shape
    assert np.array_equal(np.isnan(got), np.isnan(y))
    ok = ~np.isnan(y)
    np.testing.assert_allclose(got[ok], y[ok], rtol=1e-5, atol=1e-4)


def _fused_epilogue(y: np.ndarray, fused_ops: list[str], rng: np.random.Generator
                    ) -> tuple[np.ndarray, list[np.ndarray]]:
    """A fused convolution's ``fused_ops`` applied to its float64 value ``y`` by definition
    (batch norm with epsilon 1e-3; NaN kept by Relu and Relu6, as TensorFlow keeps it), and
    the random arguments they take."""
    c = y.shape[-1]
    if fused_ops[0] == "BiasAdd":
        args = [rng.standard_normal(c).astype(np.float32)]
        y = y + args[0]
    else:
        scale, offset, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
        var = rng.uniform(0.5, 2, c).astype(np.float32)
        args = [scale, offset, mean, var]
        y = (y - mean) * scale / np.sqrt(var.astype(np.float64) + 1e-3) + offset
    if "Add" in fused_ops:
        args.append(rng.standard_normal(y.shape).astype(np.float32))
        y = y + args[-1]
    act = fused_ops[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        if act == "Relu":
            y = np.where(np.isnan(y), y, np.maximum(y, 0))
        elif act == "Relu6":
            y = np.where(np.isnan(y), y, np.clip(y, 0, 6))
        elif act == "Elu":
            y = np.where(y < 0, np.expm1(y), y)
    return y, args


@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"],
                                       ["FusedBatchNorm", "Relu6"], ["BiasAdd", "Elu"]])
@pytest.mark.parametrize("channels", [13, 40])
def test_fused_depthwise_epilogue_in_the_compiled_kernel_matches_the_definition(
        fused_ops, channels) -> None:
    """_FusedDepthwiseConv2dNative: the compiled depthwise kernel applies the bias (or
    folded batch norm) and Relu/Relu6 to each pixel as it computes it (Elu: numpy's pass
    after it); NaN survives the activations."""
    rng = np.random.default_rng(channels)
    x = rng.standard_normal((2, 15, 13, channels)).astype(np.float32)
    f = rng.standard_normal((3, 3, channels, 1)).astype(np.float32)
    x[0, 5, 5, :] = np.nan
    g = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 2, 2, 1], [1, 1, 1, 1], "SAME", None)
    with np.errstate(invalid="ignore"):
        y = np.concatenate([_definition(x[..., c:c + 1], f[:, :, c:c + 1], g)
                            for c in range(channels)], axis=-1)
    y, args = _fused_epilogue(y, fused_ops, rng)
    got = invoke("_FusedDepthwiseConv2dNative", x, f, *args,
                 attrs={"strides": [1, 2, 2, 1], "padding": "SAME", "fused_ops": fused_ops,
                        "num_args": len(args), "epsilon": 1e-3})
    _assert_matches(got, y)


def _build_for(arch: str, tmp_path: Path):
    """The extension module compiled for one instruction set only (no target clones), loaded
    beside the installed one (its own file, its own thread pool)."""
    import importlib.util
    import shutil
    import subprocess
    import sysconfig

    cc = shutil.which("cc") or shutil.which("gcc")
    src = Path(__file__).resolve().parent.parent / "executor" / "native"
    lib = tmp_path / arch / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    lib.parent.mkdir()
    subprocess.run([cc, "-O3", "-fno-trapping-math", "-fno-math-errno", f"-march={arch}",
                    "-shared", "-fPIC", "-DDFG_NO_CLONES", "-pthread",
                    f"-I{sysconfig.get_paths()['include']}",
                    *(str(src / f) for f in ("module.c", "conv.c", "elementwise.c", "recurrent.c",
                                             "threadpool.c")),
                    "-o", str(lib)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("_native", lib)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 clones only")
@pytest.mark.parametrize("arch", ["x86-64", "x86-64-v3"])
def test_every_target_clone_computes_what_the_loaded_one_does(arch, tmp_path,
                                                              monkeypatch) -> None:
    """GCC builds AVX-512, AVX2 and baseline clones and the CPU picks one: the ones this
    machine does not pick are built alone here and checked against the loaded kernels,
    through the same wrappers."""
    import shutil

    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler")
    clone = _build_for(arch, tmp_path)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 13, 11, 5)).astype(np.float32)
    f = rng.standard_normal((3, 3, 5, 20)).astype(np.float32)
    g = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 2, 2, 1], [1, 1, 1, 1], "SAME", None)
    bias = rng.standard_normal(20).astype(np.float32)
    ep = _native.Epilogue(None, bias, None, _native.ACT_RELU6)
    dw = rng.standard_normal((3, 3, 5, 1)).astype(np.float32)
    gd = _conv.geometry(x.shape, "NHWC", 3, 3, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", None)
    xs = np.concatenate([np.linspace(-12, 12, 4001), [-0.0, np.inf, -np.inf, np.nan]]) \
        .astype(np.float32)
    z = (rng.standard_normal((37, 53)) * 5).astype(np.float32)

    def run() -> list[np.ndarray]:
        return [_native.conv2d_nhwc_f32(x, f, g, ep), _native.depthwise_nhwc_f32(x, dw, gd),
                _native.erf_f32(xs, False), _native.erf_f32(xs, True),
                _native.softmax_f32(z, False), _native.activation_f32(xs, _native.SIGMOID),
                _native.activation_f32(xs, _native.TANH), chain(),
                _native.mid_sum_f32(x.reshape(2, 13 * 11, 5).repeat(4, axis=2), 2, 143, 20, 143)]

    def chain() -> np.ndarray:
        # every op of the compiled chain: (((z * z - z) / 3 + ...) ...), z's row broadcast
        code = [(2, 0, 0), (1, 3, 0), (3, 4, 2), (4, 5, 1), (5, 6, -1), (6, 7, -1),
                (7, 8, -1), (8, 9, -1), (9, 10, -1), (10, 11, -1), (0, 12, 1), (11, 13, -1),
                (12, 14, -1)]
        out = np.empty_like(z)
        _native.chain_f32((z, z[0].copy(), np.float32(3).reshape(1)), bytes([0, 1, 2]),
                          np.array(code, np.int32).tobytes(), out, *z.shape)
        return out

    want = run()
    monkeypatch.setattr(_native, "_ext", clone)
    got = run()
    for a, b, tol in zip(got, want, [1e-5, 1e-5, 2e-7, 2e-7, 1e-6, 5e-7, 5e-7, 1e-6, 0.0],
                         strict=True):
        # FMA or not: rounding only (sigmoid and tanh: each within 2 ulps of the exact)
        np.testing.assert_allclose(a, b, rtol=tol, atol=1e-5 if tol == 1e-5 else 1e-9)


def test_the_native_interface_refuses_what_its_kernels_cannot_take() -> None:
    """module.c checks every array against the geometry before a kernel runs: a wrong dtype,
    a short or non-contiguous buffer, a read-only output or a bad window is an error, not a
    read or write outside the arrays."""
    from dfg.executor import _native as ext

    x = np.zeros((1, 4, 4, 3), np.float32)
    wb = np.zeros((1, 3, 3, 3, 16), np.float32)
    out = np.zeros((1, 4, 4, 5), np.float32)
    geom = (1, 4, 4, 3, 3, 3, 5, 4, 4, 1, 1, 1, 1, 1, 1)
    ext.conv2d_nhwc_f32(x, wb, out, geom, None, None, None, 0, 1, 1)    # the shapes fit
    with pytest.raises(ValueError, match="out has 80 floats, the geometry needs 120"):
        ext.conv2d_nhwc_f32(x, wb, out, geom[:7] + (6,) + geom[8:], None, None, None, 0, 1, 1)
    with pytest.raises(TypeError, match="x must be float32"):
        ext.conv2d_nhwc_f32(x.astype(np.float64), wb, out, geom, None, None, None, 0, 1, 1)
    with pytest.raises(ValueError, match="scale has 5 floats"):
        ext.conv2d_nhwc_f32(x, wb, out, geom, np.ones(5, np.float32), None, None, 0, 1, 1)
    with pytest.raises(ValueError, match="strides"):
        ext.conv2d_nhwc_f32(x, wb, out, geom[:9] + (0,) + geom[10:], None, None, None, 0, 1, 1)
    with pytest.raises(ValueError, match="activation"):
        ext.conv2d_nhwc_f32(x, wb, out, geom, None, None, None, 7, 1, 1)
    with pytest.raises(ValueError, match="not C-contiguous"):
        ext.erf_f32(np.zeros((4, 4), np.float32)[:, ::2], np.zeros(8, np.float32), False)
    frozen = np.zeros(8, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ext.erf_f32(np.zeros(8, np.float32), frozen, False)
    with pytest.raises(ValueError, match="bad geometry"):
        ext.softmax_f32(x, x.copy(), -1, 48, False)
    with pytest.raises(ValueError, match="unknown kind"):
        ext.activation_f32(x, x.copy(), 2, 1, 1)
    with pytest.raises(ValueError, match="out has 47 floats"):
        ext.activation_f32(x, np.zeros(47, np.float32), 0, 1, 1)
    with pytest.raises(ValueError, match="chunks and threads"):
        ext.activation_f32(x, x.copy(), 0, 0, 1)
    row, out = np.zeros(3, np.float32), np.zeros(48, np.float32)
    add = np.array([0, 0, 1], np.int32).tobytes()        # Add i0 i1
    ext.chain_f32((x, row), bytes([0, 1]), add, out, 16, 3)     # the lengths fit
    with pytest.raises(ValueError, match="an input has 3 floats, the geometry needs 48"):
        ext.chain_f32((x, row), bytes([0, 0]), add, out, 16, 3)
    with pytest.raises(ValueError, match="bad op 0"):
        ext.chain_f32((x, row), bytes([0, 1]), np.array([0, 0, 2], np.int32).tobytes(),
                      out, 16, 3)                          # an operand not yet computed
    with pytest.raises(ValueError, match="bad op 0"):
        ext.chain_f32((x,), bytes([0]), np.array([99, 0, -1], np.int32).tobytes(), out, 16, 3)
    with pytest.raises(ValueError, match="int32 triples"):
        ext.chain_f32((x,), bytes([0]), b"\0" * 13, out, 16, 3)
    with pytest.raises(ValueError, match="unknown input kind"):
        ext.chain_f32((x,), bytes([7]), np.array([5, 0, -1], np.int32).tobytes(), out, 16, 3)
    # a column block read where it lies: rows `stride` apart from an offset, all inside
    wide = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    neg = np.array([5, 0, -1], np.int32).tobytes()          # Neg i0
    ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3, np.array([5, 8], np.int64).tobytes())
    np.testing.assert_array_equal(out.reshape(16, 3), -wide[:, 5:8])
    with pytest.raises(ValueError, match="has 128 floats, the geometry needs 129"):
        ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3,
                      np.array([6, 8], np.int64).tobytes())   # the last row runs past the end
    with pytest.raises(ValueError, match="stride >= cols"):
        ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3, np.array([0, 2], np.int64).tobytes())
    with pytest.raises(ValueError, match="offset >= 0"):
        ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3,
                      np.array([-1, 8], np.int64).tobytes())
    with pytest.raises(ValueError, match="one .* pair per input"):
        ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3, b"\0" * 8)
    with pytest.raises(ValueError, match="bad geometry"):
        ext.chain_f32((wide,), bytes([0]), neg, out, 16, 3,
                      np.array([0, 1 << 62], np.int64).tobytes())
    # a row per group of 4 rows: 4 rows of 3 read, the last ending the buffer
    gate = np.arange(12, dtype=np.float32)
    ext.chain_f32((gate,), bytes([4]), neg, out, 16, 3, np.array([0, 4], np.int64).tobytes())
    np.testing.assert_array_equal(out.reshape(16, 3), -np.repeat(gate.reshape(4, 3), 4, 0))
    with pytest.raises(ValueError, match="has 12 floats, the geometry needs 13"):
        ext.chain_f32((gate,), bytes([4]), neg, out, 16, 3, np.array([1, 4], np.int64).tobytes())
    with pytest.raises(ValueError, match="has 12 floats, the geometry needs 18"):
        ext.chain_f32((gate,), bytes([4]), neg, out, 16, 3, np.array([0, 3], np.int64).tobytes())
    with pytest.raises(ValueError, match="or >= 1 for a group"):
        ext.chain_f32((gate,), bytes([4]), neg, out, 16, 3, np.array([0, 0], np.int64).tobytes())
    with pytest.raises(TypeError):
        ext.conv2d_nhwc_f32(x, wb, out, geom[:14], None, None, None, 0, 1, 1)


def test_native_pool_is_shared_safely_by_threads_and_survives_fork(monkeypatch) -> None:
    """Several Python threads run split convolutions at once (one gets the pool, the others
    run theirs inline), every result equals the single-threaded one; a forked child, which
    has no pool threads, starts its own."""
    import os
    import threading

    x, f, g, want = _single_threaded(monkeypatch, 8, (4, 32, 32, 16), (3, 3, 16, 32))
    monkeypatch.setenv("DFG_BLAS_THREADS", "3")
    bad: list[str] = []

    def work() -> None:
        for _ in range(20):
            if not np.array_equal(_native.conv2d_nhwc_f32(x, f, g), want):
                bad.append("differs")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
    pid = os.fork()
    if pid == 0:   # the child: exit status says whether its split result was right
        ok = np.array_equal(_native.conv2d_nhwc_f32(x, f, g), want)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_the_direct_convolution_runs_on_avx512_or_avx2_or_when_asked(monkeypatch) -> None:
    # its register blocks are sized for AVX-512 (8 pixels) and AVX2 with FMA (6 pixels):
    # elsewhere they spill and the numpy/BLAS path is faster, so it runs only when asked
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read().split()
    except OSError:
        pytest.skip("no /proc/cpuinfo to tell the CPU's vector width")
    vector = "avx512f" in flags or "avx2" in flags and "fma" in flags
    monkeypatch.delenv("DFG_NATIVE", raising=False)
    assert _native.dense_conv() == (vector and _native.built())
    monkeypatch.setenv("DFG_NATIVE", "1")
    assert _native.dense_conv() == _native.built()
    monkeypatch.setenv("DFG_NATIVE", "0")
    assert not _native.dense_conv()


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "int64", "float16",
                                   "float32", "float64", "complex64", "complex128"])
def test_concat_joins_rows_as_the_definition_says(dtype, monkeypatch) -> None:
    """ConcatV2 through the compiled row copy: out[..., the k-th value's span, ...] is the
    k-th value, for every axis (negative too), several values, a value empty along the axis;
    the same array with DFG_NATIVE=0 (numpy's concatenate)."""
    rng = np.random.default_rng(3)
    for trial in range(12):
        rank = int(rng.integers(1, 5))
        shape = [int(rng.integers(1, 5)) for _ in range(rank)]
        axis = int(rng.integers(-rank, rank))
        a = axis % rank
        widths = [int(rng.integers(0 if k else 1, 4)) for k in range(int(rng.integers(2, 5)))]
        values = []
        for w in widths:
            s = list(shape)
            s[a] = w
            values.append((rng.standard_normal(s) * 50).astype(dtype))
        got = invoke("ConcatV2", *values, np.int32(axis))
        assert got.dtype == np.dtype(dtype) and got.shape[a] == sum(widths)
        start = 0
        for v, w in zip(values, widths):
            ix = (slice(None),) * a + (slice(start, start + w),)
            assert np.array_equal(got[ix], v), (trial, shape, axis, widths)
            start += w
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert np.array_equal(invoke("ConcatV2", *values, np.int32(axis)), got)
        monkeypatch.delenv("DFG_NATIVE")


def test_concat_rows_interface_refuses_what_does_not_fit() -> None:
    ext = _native.extension()
    a, b = np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32)
    out = np.zeros((4, 5), np.float32)
    ext.concat_rows((a, b), out, 4)
    with pytest.raises(ValueError, match="another format"):
        ext.concat_rows((a, b.astype(np.int32)), out, 4)
    with pytest.raises(ValueError, match="the values hold 80 bytes, out 48"):
        ext.concat_rows((a, b), np.zeros((4, 3), np.float32), 4)
    with pytest.raises(ValueError, match="not `outer` equal rows"):
        ext.concat_rows((a, b), out, 3)
    with pytest.raises(ValueError, match="outer >= 1"):
        ext.concat_rows((a, b), out, 0)
    with pytest.raises(ValueError, match="not C-contiguous"):
        ext.concat_rows((a[:, :2], b), out, 4)


@pytest.mark.parametrize("dtype", ["bool", "int16", "int64", "float16", "float32",
                                   "complex128"])
def test_pack_stacks_as_the_definition_says(dtype, monkeypatch) -> None:
    """Pack through the compiled row copy: out[(slice,) * axis + (k,)] is the k-th value, for
    every axis (negative too) and 1 to 5 values; the same array with DFG_NATIVE=0."""
    rng = np.random.default_rng(4)
    for trial in range(10):
        rank = int(rng.integers(0, 4))
        shape = tuple(int(rng.integers(1, 4)) for _ in range(rank))
        values = [(rng.standard_normal(shape) * 50).astype(dtype)
                  for _ in range(int(rng.integers(1, 6)))]
        axis = int(rng.integers(-rank - 1, rank + 1))
        got = invoke("Pack", *values, attrs={"axis": axis, "N": len(values)})
        a = axis % (rank + 1)
        assert got.dtype == np.dtype(dtype) and got.shape == (*shape[:a], len(values),
                                                               *shape[a:])
        for k, v in enumerate(values):
            assert np.array_equal(got[(slice(None),) * a + (k,)], v), (trial, shape, axis)
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert np.array_equal(invoke("Pack", *values, attrs={"axis": axis,
                                                             "N": len(values)}), got)
        monkeypatch.delenv("DFG_NATIVE")


@pytest.mark.parametrize("native", ["1", "0"])
def test_sums_and_means_over_middle_axes_add_in_numpys_order(native, monkeypatch) -> None:
    """Sum and Mean of float32 over a run of axes before the last (a global average pool's
    (1, 2) of NHWC, a mean over the batch) run the compiled sum down the middle axis, which
    adds as numpy's add.reduce does there: from 0, one value after the other. The same bits
    as numpy's reduction then division, with NaN, infinities and signed zeros, dims kept or
    not, rows of 8 and more and their remainders; short rows (numpy may sum those pairwise),
    runs that are not contiguous and strided inputs take numpy's path."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
        assert _native.mid_sum_f32(np.ones((2, 3, 8), np.float32), 2, 3, 8) is not None
    rng = np.random.default_rng(42)
    f32 = np.float32
    for shape, axes in (((2, 8, 8, 96), (1, 2)), ((2, 16, 16, 8), (1, 2)), ((1, 7, 7, 13), (1, 2)),
                        ((3, 5, 24), (0,)), ((2, 3, 4, 9), (0, 1, 2)), ((4, 2, 2, 1280), (1, 2)),
                        ((2, 1, 1, 16), (1, 2)), ((2, 9, 3, 8), (1,)), ((2, 4, 4, 1), (1, 2)),
                        ((2, 4, 4, 5), (1, 2)), ((3, 4, 2, 8), (0, 2))):
        x = (rng.standard_normal(shape) * 1000).astype(f32)
        x.flat[rng.integers(0, x.size, 3)] = [-0.0, 1e-40, 3e38]
        specials = x.copy()
        specials.flat[rng.integers(0, x.size, 2)] = [np.inf, np.nan]
        n = int(np.prod([shape[a] for a in axes]))
        for v in (x, specials, -np.abs(x) * 0.0):
            for keep in (False, True):
                ax = np.array(axes, np.int32)
                s = invoke("Sum", v, ax, attrs={"keep_dims": keep, "T": f32})
                m = invoke("Mean", v, ax, attrs={"keep_dims": keep, "T": f32})
                want_s = np.add.reduce(v, axis=axes, dtype=f32, keepdims=keep)
                want_m = np.true_divide(want_s, f32(n))
                for got, want in ((s, want_s), (m, want_m)):
                    got, want = np.asarray(got), np.asarray(want)
                    assert got.dtype == f32 and got.shape == want.shape
                    assert got.tobytes() == want.tobytes(), (shape, axes, keep)
    x = (rng.standard_normal((2, 6, 6, 16)) * 10).astype(f32)
    got = invoke("Mean", x[:, ::2], np.array([1, 2], np.int32), attrs={"T": f32})
    assert got.tobytes() == np.true_divide(np.add.reduce(x[:, ::2], axis=(1, 2), dtype=f32),
                                           f32(18)).tobytes()


def test_a_means_kept_call_takes_the_same_axes_and_shape_only() -> None:
    """A Mean over middle axes by a Const's axes keeps a call: numpy's bits for float32
    inputs of the same shape and the same axes array; another shape, dtype or axes array
    declines (None) and the kernel runs."""
    from dfg.executor.kernel_call import bind_op, call, context
    from dfg.executor.kernels.registry import complete_attrs
    from dfg.graphdef.tensors import from_numpy, to_numpy

    rng = np.random.default_rng(43)
    x = rng.standard_normal((2, 4, 4, 16)).astype(np.float32)
    axes = to_numpy(from_numpy(np.array([1, 2], np.int32)))      # a Const's frozen array
    k = bind_op("Mean", complete_attrs("Mean", {"keep_dims": True}, [x, axes]))
    ctx = context(k)
    want = np.true_divide(np.add.reduce(x, axis=(1, 2), dtype=np.float32, keepdims=True),
                          np.float32(16))
    got = call(k, [x, axes], ctx)
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert got.tobytes() == want.tobytes()
    fast = ctx.fast
    assert fast is not None and fast(x, axes).tobytes() == want.tobytes()
    y = rng.standard_normal((2, 4, 4, 16)).astype(np.float32)
    assert fast(y, axes).tobytes() == np.true_divide(
        np.add.reduce(y, axis=(1, 2), dtype=np.float32, keepdims=True), np.float32(16)).tobytes()
    assert fast(x[:1], axes) is None
    assert fast(x.astype(np.float64), axes) is None
    assert fast(x, np.array([1, 2], np.int32)) is None       # equal values, another array


@pytest.mark.parametrize("native", ["1", "0"])
def test_sums_and_means_over_the_last_axis_add_in_numpys_order(native, monkeypatch) -> None:
    """Sum and Mean of float32 over the last axis alone (a layer norm's moments) run the
    compiled row sum, which adds as numpy's add.reduce does: the same bits as numpy's own
    reduction then division (its pairwise sum on rows of every length class: under 8, up to
    128, split above), with NaN, infinities and signed zeros, dims kept or not; other axes,
    dtypes and strided inputs take numpy's path, with the same values."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
        assert _native.row_sum_f32(np.ones((2, 3), np.float32)) is not None
    rng = np.random.default_rng(41)
    f32 = np.float32
    for shape in ((5,), (3, 1), (4, 7), (2, 3, 8), (6, 64), (8, 64, 64), (3, 128), (2, 129),
                  (2, 300), (1, 4099)):
        x = (rng.standard_normal(shape) * 1000).astype(f32)
        x.flat[rng.integers(0, x.size, 3)] = [-0.0, 1e-40, 3e38]
        if x.shape[-1] > 3:
            x[..., 1] = -0.0 if x.ndim == 1 else x[..., 1]
        specials = x.copy()
        specials.flat[rng.integers(0, x.size, 2)] = [np.inf, np.nan]
        for v in (x, specials, -np.abs(x) * 0.0):
            for keep in (False, True):
                ax = np.array([-1], np.int32)
                s = invoke("Sum", v, ax, attrs={"keep_dims": keep, "T": f32})
                m = invoke("Mean", v, ax, attrs={"keep_dims": keep, "T": f32})
                want_s = np.add.reduce(v, axis=-1, dtype=f32, keepdims=keep)
                want_m = np.true_divide(want_s, f32(v.shape[-1]))
                for got, want in ((s, want_s), (m, want_m)):
                    got, want = np.asarray(got), np.asarray(want)
                    assert got.dtype == f32 and got.shape == want.shape
                    assert got.tobytes() == want.tobytes(), (shape, keep)
    x = (rng.standard_normal((4, 6, 5)) * 10).astype(f32)
    for v, axes in ((x, [1]), (x, [0, 2]), (x[:, ::2], [2]), (x.astype(np.float64), [2])):
        got = invoke("Sum", v, np.array(axes, np.int32), attrs={"T": v.dtype})
        np.testing.assert_array_equal(got, np.add.reduce(v, axis=tuple(axes), dtype=v.dtype))


@pytest.mark.parametrize("value,on", [(None, True), ("0", False), ("off", False),
                                      ("1", True), ("", True), ("other", True)])
def test_the_switch_is_read_on_every_call(value, on, monkeypatch) -> None:
    """DFG_NATIVE as set at the moment of the call (extension() and dense_conv() read it in
    one lookup when it is unset, the usual case)."""
    for _ in range(2):
        if value is None:
            monkeypatch.delenv("DFG_NATIVE", raising=False)
        else:
            monkeypatch.setenv("DFG_NATIVE", value)
        assert _native.enabled() == on
        assert (_native.extension() is not None) == on
        assert _native.dense_conv() == (on and (value == "1" or _native._VECTOR))
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert _native.extension() is None and not _native.dense_conv()
