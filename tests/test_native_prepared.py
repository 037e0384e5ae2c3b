"""Compiled convolutions prepared once per Const filter (executor/kernels/_native.py's
``packed``, ``prepare_conv``, ``prepare_depthwise``) and the rule that sends small
convolutions to them (``_conv._small_native_pays``).

A node keeps its filter packed for the compiled kernel only while the filter is the same
frozen array (a Const's read-only view of the graph's bytes): a fed or variable filter is
packed again on every call, so changing it in place changes the next result. Values are
checked against the float64 definition of a convolution, on the compiled path and on
numpy's (``DFG_NATIVE=0``), never against each other's output."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from test_native import _definition as _conv_definition

from dfg.executor import Session
from dfg.executor.kernel_call import bind_op, call, context
from dfg.executor.kernels import _conv, _native
from dfg.executor.kernels.registry import complete_attrs
from dfg.graphdef import builder as B
from dfg.graphdef.tensors import from_numpy, frozen, to_numpy

pytestmark = pytest.mark.skipif(not _native.built(), reason="native kernels not built")


def _const(a: np.ndarray) -> np.ndarray:
    """``a`` as a Const's value is decoded: a read-only view of the proto's bytes."""
    return to_numpy(from_numpy(a))


def _definition(x: np.ndarray, f: np.ndarray, strides: int, padding: str) -> np.ndarray:
    """The convolution by its definition, in float64 (test_native's, for this geometry)."""
    g = _conv.geometry(x.shape, "NHWC", f.shape[0], f.shape[1], [1, strides, strides, 1],
                       [1, 1, 1, 1], padding, None)
    return _conv_definition(x, f, g)


class _Node:
    """One node's kernel with one context across calls, as a plan runs it."""

    def __init__(self, op: str, attrs: dict, args: list) -> None:
        self.k = bind_op(op, complete_attrs(op, dict(attrs), list(args)))
        self.ctx = context(self.k)

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        out = call(self.k, list(args), self.ctx)
        return out if isinstance(out, np.ndarray) else out[0]


def test_frozen_is_a_read_only_view_of_bytes_only() -> None:
    a = np.arange(6, dtype=np.float32)
    assert frozen(_const(a.reshape(2, 3)))
    assert frozen(_const(a).reshape(3, 2)[1:])          # views of views of the bytes
    assert not frozen(a)                                # writeable
    view = a.view()
    view.flags.writeable = False
    assert not frozen(view)                             # its base can still change
    buf = np.frombuffer(bytearray(a.tobytes()), np.float32)     # a bytearray can change
    buf.flags.writeable = False
    assert not frozen(buf)
    assert not frozen(np.float32(1.0))                  # not an array


def test_packed_is_computed_once_for_a_frozen_array_and_dropped_with_it() -> None:
    calls = []

    def make(a: np.ndarray) -> np.ndarray:
        calls.append(1)
        return a * 2

    f = _const(np.arange(8, dtype=np.float32))
    one, two = _native.packed(f, make), _native.packed(f, make)
    assert one is two and len(calls) == 1 and np.array_equal(one, np.arange(8) * 2)
    assert not one.flags.writeable
    key = (make, id(f))
    assert key in _native._PACKS
    del f, one, two
    gc.collect()
    assert key not in _native._PACKS                            # dropped with its array

    w = np.arange(8, dtype=np.float32)                          # writeable: every call
    first = _native.packed(w, make)
    w[0] = 100
    assert _native.packed(w, make)[0] == 200 and first[0] == 0 and len(calls) == 3


# small convolutions (under _conv.SMALL_FLOPS), as the Keras zoo's reduced models hold them
SMALL = [
    # x shape, filter shape, stride, padding
    ((2, 4, 4, 4), (1, 1, 4, 4), 1, "VALID"),
    ((2, 2, 2, 16), (1, 1, 16, 16), 1, "VALID"),
    ((2, 1, 1, 32), (1, 1, 32, 32), 1, "SAME"),
    ((2, 15, 15, 16), (1, 1, 16, 2), 1, "SAME"),
    ((2, 8, 8, 2), (1, 1, 2, 2), 1, "VALID"),
    ((2, 1, 1, 432), (1, 1, 432, 72), 1, "SAME"),
    ((2, 8, 8, 16), (1, 1, 16, 8), 2, "VALID"),                 # strided 1x1
    ((2, 3, 3, 10), (7, 1, 10, 12), 1, "SAME"),
    ((2, 7, 7, 4), (5, 5, 4, 4), 1, "SAME"),
    ((2, 32, 32, 3), (3, 3, 3, 16), 2, "VALID"),
    ((1, 5, 6, 3), (3, 3, 3, 17), 1, "SAME"),                   # 17 channels: two blocks
]


@pytest.mark.parametrize("native", ["default", "0"])
@pytest.mark.parametrize("xs,fs,stride,padding", SMALL, ids=str)
def test_small_convolutions_equal_the_definition_run_after_run(xs, fs, stride, padding,
                                                               native, monkeypatch) -> None:
    """Conv2D and _FusedConv2D (bias, residual, Relu) on one context across three runs, with
    a Const's filter and bias (kept prepared) and with writeable ones (prepared each time),
    on the compiled path and numpy's."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(sum(xs) + sum(fs))
    f = rng.standard_normal(fs).astype(np.float32)
    b = rng.standard_normal(fs[3]).astype(np.float32)
    attrs = {"strides": [1, stride, stride, 1], "padding": padding}
    for filt, bias in ((_const(f), _const(b)), (f, b)):
        for run in range(3):
            x = rng.standard_normal(xs).astype(np.float32)
            want = _definition(x, f, stride, padding)
            if run == 0:
                conv = _Node("Conv2D", attrs, [x, filt])
                relu = _Node("_FusedConv2D", {**attrs, "fused_ops": ["BiasAdd", "Relu"],
                                              "num_args": 1}, [x, filt, bias])
                res = _Node("_FusedConv2D", {**attrs, "fused_ops": ["BiasAdd", "Add"],
                                             "num_args": 2}, [x, filt, bias, want])
            r = rng.standard_normal(want.shape).astype(np.float32)
            got = [conv(x, filt), relu(x, filt, bias), res(x, filt, bias, r)]
            for g, w in zip(got, [want, np.maximum(want + b, 0), want + b + r]):
                assert g.dtype == np.float32 and g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)
        # the fused nodes kept the compiled kernel's preparation for the Const's arrays only
        plan = _conv.conv2d_plan(xs, fs, 4, attrs["strides"], padding)
        compiled = native == "default" and plan.native_fused and _native.dense_conv()
        for node in (relu, res):
            kept = node.ctx.memo[10]
            assert (kept is not None and kept[0] is filt) == (compiled and filt is not f)


def test_the_small_rule_sends_overlapping_windows_and_cheap_1x1_layers_to_the_kernel() -> None:
    def plan(xs: tuple, fs: tuple, stride: int = 1) -> _conv._ConvPlan:
        return _conv.conv2d_plan(xs, fs, 4, [1, stride, stride, 1], "SAME")

    assert plan((2, 4, 4, 8), (3, 3, 8, 8)).native                  # overlapping: always
    assert plan((2, 3, 3, 10), (7, 1, 10, 12)).native
    small = plan((2, 4, 4, 4), (1, 1, 4, 4))
    assert small.native and small.native_fused                      # few blocks, all used
    # two output channels of a 16-channel block: the kernel's blocks are mostly waste, and
    # only the fused op's epilogue passes tip it
    waste = plan((2, 16, 16, 8), (1, 1, 8, 2))
    assert not waste.native and waste.native_fused
    # a GEMM of two rows packs its whole filter on every call: the kernel, whose filter is
    # packed once, with both pixels in one block (measured 25.6 us against 15.8 us for 256
    # by 256)
    assert plan((2, 1, 1, 432), (1, 1, 432, 128)).native
    assert plan((2, 1, 1, 128), (1, 1, 128, 20)).native
    # a large 1x1 layer: BLAS's GEMM, but for a multiple of 64 output channels on AVX-512,
    # where the wide tiles run its pixels as one product (_conv.WIDE_OC)
    assert not plan((8, 32, 32, 64), (1, 1, 64, 48)).native_fused
    large = plan((8, 32, 32, 64), (1, 1, 64, 64))
    assert large.native_fused == _native.wide_vectors()
    assert _native.flat_conv(large.g, 64) == _native.wide_vectors()


def _depthwise_definition(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """3x3 SAME stride-1 depthwise convolution (multiplier 1) in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros(x.shape)
    for i in range(3):
        for j in range(3):
            out += xp[:, i:i + x.shape[1], j:j + x.shape[2]] * f[i, j, :, 0]
    return out


def test_a_kept_filter_is_not_reused_for_another_array_at_the_same_node() -> None:
    """The node's memo holds the filter it prepared; a different filter (another Const, or
    the same values in a new array) is prepared anew, for Conv2D, the fused convolution and
    both depthwise ops."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    fa, fb = (_const(rng.standard_normal((3, 3, 8, 8)).astype(np.float32)) for _ in range(2))
    bias = _const(np.zeros(8, np.float32))
    conv = _Node("Conv2D", attrs, [x, fa])
    fused = _Node("_FusedConv2D", {**attrs, "fused_ops": ["BiasAdd"], "num_args": 1},
                  [x, fa, bias])
    for f in (fa, fb, fa, fb):
        want = _definition(x, f, 1, "SAME")
        np.testing.assert_allclose(conv(x, f), want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(fused(x, f, bias), want, rtol=1e-5, atol=1e-4)
    da, db = (_const(rng.standard_normal((3, 3, 8, 1)).astype(np.float32)) for _ in range(2))
    dw = _Node("DepthwiseConv2dNative", attrs, [x, da])
    dwf = _Node("_FusedDepthwiseConv2dNative",
                {**attrs, "fused_ops": ["BiasAdd", "Relu"], "num_args": 1}, [x, da, bias])
    for f in (da, db, da):
        want = _depthwise_definition(x, f)
        np.testing.assert_allclose(dw(x, f), want, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(dwf(x, f, bias), np.maximum(want, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_fed_filter_changed_in_place_changes_the_next_result(threads) -> None:
    """A fed array is the caller's and may change between runs: the session must not keep
    it packed (a Const filter beside it is kept, and stays right)."""
    rng = np.random.default_rng(9)
    const_f = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 4, 4, 8], name="x")
        fed = B.placeholder("float32", [1, 1, 8, 8], name="f")
        a = B.conv2d(x, fed, padding="SAME", name="a")
        B.conv2d(a, B.constant(const_f, name="w"), padding="SAME", name="b")
    f = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)
    xv = rng.standard_normal((2, 4, 4, 8)).astype(np.float32)
    with Session(g.as_graph_def(), threads=threads) as sess:
        for _ in range(4):
            got_a, got_b = sess.run(["a:0", "b:0"], {"x:0": xv, "f:0": f})
            want_a = _definition(xv, f, 1, "SAME")
            np.testing.assert_allclose(got_a, want_a, rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(
                got_b, _definition(want_a.astype(np.float32), const_f, 1, "SAME"),
                rtol=1e-4, atol=1e-3)
            f *= -2.0          # in place: the same array object, other values


@pytest.mark.parametrize("act", ["Sigmoid", "Tanh", "_MklSwish"])
@pytest.mark.parametrize("op,xs,fs", [
    ("_FusedConv2D", (2, 4, 4, 8), (1, 1, 8, 24)),
    ("_FusedConv2D", (2, 9, 9, 5), (3, 3, 5, 17)),
    ("_FusedDepthwiseConv2dNative", (2, 8, 8, 19), (3, 3, 19, 1)),
], ids=str)
def test_compiled_sigmoid_tanh_and_swish_epilogues_give_the_activation_kernels_bits(
        act, op, xs, fs, monkeypatch) -> None:
    """The compiled convolutions apply Sigmoid, Tanh and Swish (x * sigmoid(x), Keras's
    EfficientNet activation) to the block they computed: the same bits as the activation's
    own kernel on the convolution's biased output (the numpy path's passes), NaN, large
    and tiny values included; and values within tolerance of the float64 definition."""
    monkeypatch.delenv("DFG_NATIVE", raising=False)
    if not _native.dense_conv():
        pytest.skip("the compiled direct convolution does not run on this CPU")
    rng = np.random.default_rng(len(act) + xs[-1])
    x = (rng.standard_normal(xs) * 6).astype(np.float32)
    x[0, 1, 1, :] = np.nan
    x[1, 0, 0, 0] = 1e30
    f, bias = _const(rng.standard_normal(fs).astype(np.float32)), \
        _const(rng.standard_normal(fs[2] if fs[3] == 1 else fs[3]).astype(np.float32))
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "num_args": 1}
    fused = _Node(op, {**attrs, "fused_ops": ["BiasAdd", act]}, [x, f, bias])
    biased = _Node(op, {**attrs, "fused_ops": ["BiasAdd"]}, [x, f, bias])
    for _ in range(2):     # prepared, then kept
        got, y = fused(x, f, bias), biased(x, f, bias)
        if act == "_MklSwish":
            want = np.multiply(y, _Node("Sigmoid", {}, [y])(y))
        else:
            want = _Node(act, {}, [y])(y)
        assert got.dtype == np.float32 and np.array_equal(got, want, equal_nan=True)
    assert fused.ctx.memo[10] is not None
    ok = np.isfinite(y)
    exact = y[ok].astype(np.float64)
    with np.errstate(over="ignore"):
        e = np.exp(-exact)
    definition = {"Sigmoid": 1 / (1 + e), "Tanh": np.tanh(exact),
                  "_MklSwish": exact / (1 + e)}[act]
    np.testing.assert_allclose(got[ok], definition, rtol=1e-6, atol=1e-7)


def _pool_definition(x: np.ndarray, k: int, s: int, pads: tuple, op: str) -> np.ndarray:
    """MaxPool by TensorFlow's fold (acc < v ? v : acc from the lowest finite float32, taps
    in order) or AvgPool (the float64 mean of the real elements) over k x k windows, stride
    s, (top, bottom, left, right) padding that is never read."""
    n, h, w, c = x.shape
    pt, pb, pl, pr = pads
    oh, ow = (h + pt + pb - k) // s + 1, (w + pl + pr - k) // s + 1
    out = np.empty((n, oh, ow, c), np.float64 if op == "avg" else np.float32)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                rows = [y for y in range(oy * s - pt, oy * s - pt + k) if 0 <= y < h]
                cols = [v for v in range(ox * s - pl, ox * s - pl + k) if 0 <= v < w]
                for ch in range(c):
                    vals = [x[b, y, v, ch] for y in rows for v in cols]
                    if op == "avg":
                        out[b, oy, ox, ch] = np.mean(np.float64(vals))
                        continue
                    acc = np.float32(-np.finfo(np.float32).max)
                    for v in vals:
                        acc = v if acc < v else acc
                    out[b, oy, ox, ch] = acc
    return out


@pytest.mark.parametrize("native", ["default", "0"])
@pytest.mark.parametrize("xs,k,s,padding", [
    ((2, 8, 8, 12), 3, 1, "SAME"), ((2, 9, 9, 5), 3, 2, "VALID"), ((1, 5, 6, 3), 2, 2, "SAME"),
    ((2, 15, 15, 33), 3, 2, "SAME"), ((1, 7, 7, 4), 7, 1, "VALID"),
    ((1, 6, 5, 3), 3, 2, [[0, 0], [2, 1], [0, 2], [0, 0]]),
    # channel blocks of 64 and 16 and a tail; rows split over the pool's threads
    ((2, 6, 6, 83), 2, 2, "VALID"), ((4, 16, 16, 40), 3, 1, "SAME"),
], ids=str)
def test_pools_equal_tensorflows_definition_run_after_run(xs, k, s, padding, native,
                                                          monkeypatch) -> None:
    """MaxPool (the compiled kernel: TensorFlow's fold, so a NaN never wins, a window of
    NaNs is the lowest float, and of 0 and -0 the first stays) and AvgPool (the compiled
    depthwise sums over the real elements' count) on one context across runs, compiled
    and numpy."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(sum(xs) + k)
    x = rng.standard_normal(xs).astype(np.float32)
    x[0, 0, :, 0] = np.nan                          # NaNs in some windows, a whole one
    x[0, 1:3, 1:3, 0] = np.nan
    x[0, -1, -1, :] = 0.0
    x[0, -1, -2, :] = -0.0
    h, w = xs[1], xs[2]
    if isinstance(padding, list):
        pads = (*padding[1], *padding[2])
    elif padding == "SAME":
        ph = max(0, (-(-h // s) - 1) * s + k - h)
        pw = max(0, (-(-w // s) - 1) * s + k - w)
        pads = (ph // 2, ph - ph // 2, pw // 2, pw - pw // 2)
    else:
        pads = (0, 0, 0, 0)
    ops = [("MaxPool", "max")] + ([("AvgPool", "avg")] if not isinstance(padding, list) else [])
    for op, kind in ops:
        attrs = {"ksize": [1, k, k, 1], "strides": [1, s, s, 1],
                 "padding": "EXPLICIT" if isinstance(padding, list) else padding}
        if isinstance(padding, list):
            attrs["explicit_paddings"] = [p for pair in padding for p in pair]
        node = _Node(op, attrs, [x])
        want = _pool_definition(x, k, s, pads, kind)
        for _ in range(2):
            got = node(x)
            assert got.dtype == np.float32 and got.shape == want.shape
            if kind == "max":      # exact; and the compiled fold keeps TF's zero signs
                assert np.array_equal(got, want, equal_nan=True)
                if native == "default":    # (numpy's fmax may keep the other zero)
                    assert np.array_equal(np.signbit(got), np.signbit(want))
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_maxpool_interface_refuses_what_its_kernel_cannot_take() -> None:
    """module.c checks every array's dtype, contiguity and length against the geometry before
    the kernel runs without the GIL."""
    from dfg.executor import _native as ext

    x = np.zeros((1, 4, 4, 3), np.float32)
    out = np.zeros((1, 2, 2, 3), np.float32)
    geom = (1, 4, 4, 3, 2, 2, 2, 2, 2, 2, 0, 0)
    ext.maxpool_nhwc_f32(x, out, geom, 1, 1)                          # the shapes fit
    with pytest.raises(ValueError):
        ext.maxpool_nhwc_f32(x, out, geom[:6] + (3,) + geom[7:], 1, 1)    # out too short
    with pytest.raises(ValueError):
        ext.maxpool_nhwc_f32(x, out, geom[:8] + (0,) + geom[9:], 1, 1)    # stride 0
    with pytest.raises(ValueError):
        ext.maxpool_nhwc_f32(x, out, geom[:4] + (0,) + geom[5:], 1, 1)    # empty window
    with pytest.raises((TypeError, ValueError)):
        ext.maxpool_nhwc_f32(x.astype(np.float64), out, geom, 1, 1)
    with pytest.raises((TypeError, ValueError, BufferError)):
        ext.maxpool_nhwc_f32(x, out[:, :, ::-1], geom, 1, 1)          # not contiguous


def test_a_small_pointwise_layer_runs_as_one_row_of_pixels_with_the_same_bits() -> None:
    """A small 1x1 stride-1 convolution is prepared as one row of all N*H*W pixels
    (_native.pixel_rows), so the kernel's pixel blocks span rows and images; each pixel's sum
    is the same, so the result has the bits of the kernel run row by row, epilogue and
    residual included. Strided or padded layers keep their rows."""
    rng = np.random.default_rng(11)
    ext = _native.extension()
    for xs, oc in (((2, 1, 1, 112), 40), ((3, 2, 5, 24), 37), ((1, 7, 1, 9), 16)):
        x = rng.standard_normal(xs).astype(np.float32)
        f = rng.standard_normal((1, 1, xs[3], oc)).astype(np.float32)
        g = _conv.conv2d_plan(xs, f.shape, 4, [1, 1, 1, 1], "VALID").g
        ep = _native.Epilogue(rng.standard_normal(oc).astype(np.float32),
                              rng.standard_normal(oc).astype(np.float32),
                              rng.standard_normal((*xs[:3], oc)).astype(np.float32),
                              _native.ACT_RELU6)
        prep = _native.prepare_conv(f, g, ep)
        assert prep.geometry[:3] == (1, 1, xs[0] * xs[1] * xs[2])
        got = _native.conv2d_prepared(x, prep, ep.residual)
        rows = np.empty_like(got)
        ext.conv2d_nhwc_f32(x, prep.weights, rows, (*xs, 1, 1, oc, xs[1], xs[2], 1, 1, 1, 1,
                                                    0, 0), prep.scale, prep.shift,
                            ep.residual, prep.act, 1, 1)
        assert got.tobytes() == rows.tobytes()
        want = np.clip((x.reshape(-1, xs[3]).astype(np.float64) @ f.reshape(xs[3], oc))
                       .reshape(got.shape) * ep.scale + ep.shift + ep.residual, 0, 6)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    g = _conv.conv2d_plan((2, 4, 4, 8), (1, 1, 8, 16), 4, [1, 2, 2, 1], "VALID").g
    assert _native.prepare_conv(np.ones((1, 1, 8, 16), np.float32), g).geometry[:3] == (2, 4, 4)


def test_a_kept_call_gives_the_kernels_bits_and_declines_what_it_was_not_kept_for(
        monkeypatch) -> None:
    """A convolution that kept its packed filter leaves its context a kept call
    (``KernelContext.fast``, what compiled programs call first): on the inputs it was kept for
    it gives the kernel's bits; another filter array, another input shape, a residual of
    another shape or the compiled kernels refused (DFG_NATIVE=0) make it decline (None), and
    the kernel runs. A fed filter (not frozen) keeps nothing."""
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    f = _const(rng.standard_normal((3, 3, 8, 8)).astype(np.float32))
    d = _const(rng.standard_normal((3, 3, 8, 1)).astype(np.float32))
    bias = _const(rng.standard_normal(8).astype(np.float32))
    res = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    nodes = [(_Node("Conv2D", attrs, [x, f]), (x, f)),
             (_Node("_FusedConv2D", {**attrs, "fused_ops": ["BiasAdd", "Add", "Relu"],
                                     "num_args": 2}, [x, f, bias, res]), (x, f, bias, res)),
             (_Node("DepthwiseConv2dNative", attrs, [x, d]), (x, d)),
             (_Node("_FusedDepthwiseConv2dNative",
                    {**attrs, "fused_ops": ["BiasAdd", "Relu6"], "num_args": 1}, [x, d, bias]),
              (x, d, bias))]
    for node, args in nodes:
        assert node.ctx.fast is None
        want = node(*args)
        fast = node.ctx.fast
        assert fast is not None, node.k.op
        assert fast(*args).tobytes() == want.tobytes()
        other = _const(np.array(args[1]))                  # the same values, another array
        assert fast(x, other, *args[2:]) is None
        assert fast(x[:, :5], *args[1:]) is None
        # an input of the shape kept for but not C-contiguous: declined, not misread
        wide = np.repeat(x, 2, axis=3)[..., ::2]
        assert wide.shape == x.shape and not wide.flags.c_contiguous
        assert fast(wide, *args[1:]) is None
        if len(args) == 4:
            assert fast(*args[:3], res[:, :5]) is None
            assert fast(*args[:3], rng.standard_normal(res.shape).astype(np.float32)) \
                is not None                                  # a new residual is an input
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert fast(*args) is None
        monkeypatch.delenv("DFG_NATIVE")
        assert fast(*args).tobytes() == want.tobytes()
    fed = rng.standard_normal((3, 3, 8, 8)).astype(np.float32)
    node = _Node("Conv2D", attrs, [x, fed])
    node(x, fed)
    assert node.ctx.fast is None


@pytest.mark.parametrize("programs", ["always", "never"])
def test_compiled_programs_with_kept_calls_give_the_graphs_values(programs,
                                                                   monkeypatch) -> None:
    """A small CNN (convolution, depthwise, fused epilogues) in a Session, compiled programs
    or node by node: every run has the values of the graph run as written with the compiled
    kernels refused (the numpy path), and the convolution nodes keep calls."""
    rng = np.random.default_rng(22)
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 8, 8, 4], name="x")
        y = B.conv2d(x, B.constant(rng.standard_normal((3, 3, 4, 8)).astype(np.float32)),
                     padding="SAME", name="c1")
        y = B.apply_op("BiasAdd", [y, B.constant(rng.standard_normal(8).astype(np.float32))],
                       name="b1").outputs[0]
        y = B.apply_op("Relu", [y], name="r1").outputs[0]
        y = B.apply_op("DepthwiseConv2dNative",
                       [y, B.constant(rng.standard_normal((3, 3, 8, 1)).astype(np.float32))],
                       {"strides": [1, 1, 1, 1], "padding": "SAME"}, name="dw").outputs[0]
        B.conv2d(y, B.constant(rng.standard_normal((1, 1, 8, 6)).astype(np.float32)),
                 padding="SAME", name="out")
    gd = g.as_graph_def()
    feeds = [{"x:0": rng.standard_normal((2, 8, 8, 4)).astype(np.float32)} for _ in range(3)]
    monkeypatch.setenv("DFG_NATIVE", "0")
    with Session(gd, threads=1, optimize=False, programs="never") as s:
        wants = [s.run(["out:0"], f)[0] for f in feeds]
    monkeypatch.delenv("DFG_NATIVE")
    with Session(gd, threads=1, programs=programs) as s:
        for _ in range(8):
            for f, want in zip(feeds, wants):
                np.testing.assert_allclose(s.run(["out:0"], f)[0], want, rtol=1e-5, atol=1e-5)
        plan = s.plan(["out:0"], ["x:0"])
        kept = [it.op for it in plan.items if it.shared_ctx is not None
                and it.shared_ctx.fast is not None]
        assert kept and all(op in ("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative",
                                   "_FusedDepthwiseConv2dNative") for op in kept)


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
def test_a_pools_kept_call_gives_the_kernels_bits(op, monkeypatch) -> None:
    """MaxPool and AvgPool keep their compiled preparation per input shape and leave their
    context a kept call with the kernel's bits, declining another shape or dtype and the
    compiled kernels refused."""
    rng = np.random.default_rng(23)
    x = rng.standard_normal((2, 7, 7, 5)).astype(np.float32)
    node = _Node(op, {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}, [x])
    want = node(x)
    fast = node.ctx.fast
    assert fast is not None and fast(x).tobytes() == want.tobytes()
    assert fast(x[:, :6]) is None and fast(x.astype(np.float64)) is None
    monkeypatch.setenv("DFG_NATIVE", "0")
    assert fast(x) is None
    np.testing.assert_allclose(node(x), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8,
                                   np.complex64, np.bool_])
def test_a_joins_kept_call_copies_the_values_and_declines_what_it_was_not_kept_for(
        dtype, monkeypatch) -> None:
    """ConcatV2 and Pack leave their context a kept call (the compiled row copy for the
    values' shapes, dtype and axis): it gives numpy's concatenation and stack; other shapes,
    another dtype, another axis value or dtype, a value that is not C-contiguous, or the
    compiled kernels refused make it decline (None) and the kernel runs (keeping a call for
    the new inputs), which still raises what is wrong."""
    rng = np.random.default_rng(24)

    def vals(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 5).astype(dtype)

    for axis in (0, 1, -1):
        a, b = vals(2, 3, 4), vals(2, 3, 4)
        if axis == 0:
            b = vals(5, 3, 4)
        elif axis == 1:
            b = vals(2, 1, 4)
        else:
            b = vals(2, 3, 7)
        ax = np.array(axis, np.int32)
        node = _Node("ConcatV2", {"N": 2}, [a, b, ax])
        want = np.concatenate([a, b], axis)
        assert node(a, b, ax).tobytes() == want.tobytes()
        fast = node.ctx.fast
        assert fast is not None
        got = fast(a, b, np.array(axis, np.int32))          # the axis by its value
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert fast(a, b, np.array(axis, np.int64)) is None
        assert fast(a, b, np.array(axis + 3 if axis < 0 else axis - 3, np.int32)) is None
        assert fast(a[:1], b, ax) is None
        assert fast(np.zeros(a.shape, np.int16), b, ax) is None      # another dtype
        assert fast(a, b, np.array([axis], np.int32)) is None
        with pytest.raises(ValueError):   # what the kernel catches: it runs numpy's copy
            fast(np.asfortranarray(a), b, ax)
        f_a = np.asfortranarray(a)
        assert node(f_a, b, ax).tobytes() == want.tobytes()
        monkeypatch.setenv("DFG_NATIVE", "0")
        assert fast(a, b, ax) is None
        assert node(a, b, ax).tobytes() == want.tobytes()
        monkeypatch.delenv("DFG_NATIVE")
        c = vals(2, 3, 4)           # new shapes: the kernel runs and keeps them
        want = np.concatenate([a, c], axis)
        assert node(a, c, ax).tobytes() == want.tobytes()
        assert node.ctx.fast(a, c, ax).tobytes() == want.tobytes()
        with pytest.raises(Exception, match="Dimension|shape"):
            node(a, vals(3, 5, 2), ax)
    for axis in (0, 1, -1):
        xs = [vals(3, 2) for _ in range(3)]
        node = _Node("Pack", {"N": 3, "axis": axis}, xs)
        want = np.stack(xs, axis)
        assert node(*xs).tobytes() == want.tobytes()
        fast = node.ctx.fast
        assert fast is not None and fast(*xs).tobytes() == want.tobytes()
        assert fast(*xs[:2]) is None and fast(*xs, xs[0]) is None
        assert fast(xs[0], xs[1], xs[2][:1]) is None
        with pytest.raises(Exception, match="Shapes of all inputs must match"):
            node(xs[0], xs[1], xs[2][:1])
    scalars = [np.array(v, dtype) for v in (1, 2, 3)]        # a shape built from scalars
    node = _Node("Pack", {"N": 3}, scalars)
    assert node(*scalars).tolist() == np.array([1, 2, 3], dtype).tolist()
    assert node.ctx.fast(*scalars).tolist() == np.array([1, 2, 3], dtype).tolist()


@pytest.mark.parametrize("programs", ["always", "never"])
def test_joins_in_a_session_give_numpys_values_whatever_the_fed_shapes(programs) -> None:
    """A DenseNet-like chain of concatenations and a stack in a Session, compiled programs
    or node by node, fed batches of changing size: each run has numpy's values."""
    rng = np.random.default_rng(25)
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [None, 2, 3], name="x")
        y = x
        for i in range(4):
            y = B.concat([y, x], -1, name=f"cat{i}")
        B.apply_op("Pack", [[y, y]], {"axis": 1}, name="out")
    gd = g.as_graph_def()
    with Session(gd, threads=1, programs=programs) as s:
        for n in (2, 2, 3, 2, 1, 3, 3):
            xv = rng.standard_normal((n, 2, 3)).astype(np.float32)
            want = np.concatenate([xv] * 5, -1)
            want = np.stack([want, want], 1)
            assert s.run(["out:0"], {"x:0": xv})[0].tobytes() == want.tobytes()


def test_a_gathers_kept_call_takes_the_same_indices_and_declines_anything_else() -> None:
    """GatherV2 with indices that cannot change (a Const's frozen array, or a 0-d index)
    keeps a call: np.take's values for params of the same shape and dtype, the same indices
    and axis; another params shape or dtype, another indices array (even of equal values:
    it could change), another axis or batch_dims make it decline and the kernel runs, which
    still checks the indices against the new params."""
    rng = np.random.default_rng(26)
    params = rng.standard_normal((4, 5, 3)).astype(np.float32)
    shape_vec = np.array([2, 16, 16, 8], np.int32)
    for p, idx, axis in ((params, _const(np.array([3, 0, 3], np.int32)), 0),
                         (params, _const(np.array([[1, 4], [0, 2]], np.int64)), 1),
                         (params, np.array(2, np.int32), -1),
                         (shape_vec, _const(np.array([1, 2, 3], np.int32)), 0)):
        ax = np.array(axis, np.int32)
        node = _Node("GatherV2", {}, [p, idx, ax])
        want = np.take(p, idx, axis=axis)
        got = node(p, idx, ax)
        assert got.dtype == p.dtype and got.tobytes() == want.tobytes()
        fast = node.ctx.fast
        assert fast is not None
        assert fast(p, idx, np.array(axis, np.int32)).tobytes() == want.tobytes()
        assert fast(p.copy(), idx, ax).tobytes() == want.tobytes()     # new params values
        assert fast(np.concatenate([p, p]), idx, ax) is None             # another shape
        assert fast(p.astype(np.float64), idx, ax) is None
        assert fast(p, idx, np.array(axis, np.int64)) is None
        if idx.ndim:
            assert fast(p, np.array(idx), ax) is None       # equal values, another array
        else:
            assert fast(p, np.array(int(idx), np.int32), ax).tobytes() == want.tobytes()
            assert fast(p, np.array(0, np.int32), ax) is None
    node = _Node("GatherV2", {}, [params, _const(np.array([3], np.int32)), np.array(0, np.int32)])
    node(params, _const(np.array([3], np.int32)), np.array(0, np.int32))
    with pytest.raises(Exception, match=r"indices\[0\] = 3 is not in \[0, 2\)"):
        node(params[:2], _const(np.array([3], np.int32)), np.array(0, np.int32))
    fed = np.array([1, 0], np.int32)                     # fed indices: nothing kept
    node = _Node("GatherV2", {}, [params, fed, np.array(0, np.int32)])
    node(params, fed, np.array(0, np.int32))
    assert node.ctx.fast is None
    batched = _const(np.array([[1], [0], [2], [1]], np.int32))
    node = _Node("GatherV2", {"batch_dims": 1}, [params, batched, np.array(1, np.int32)])
    node(params, batched, np.array(1, np.int32))
    assert node.ctx.fast is None


def _val_field_const(a: np.ndarray) -> np.ndarray:
    """``a`` as a Const written with a value field (int_val, float_val) decodes."""
    from dfg.schemas import tensor_pb2

    t = tensor_pb2.TensorProto()
    from_numpy(a, proto=t)
    t.ClearField("tensor_content")
    field = {"i": "int_val", "f": "float_val"}[a.dtype.kind]
    t.ClearField(field)
    getattr(t, field).extend(a.reshape(-1).tolist())
    return to_numpy(t)


def test_small_value_field_consts_decode_frozen_and_large_ones_as_arrays() -> None:
    """A Const written with a value field (small shape constants usually are) decodes to a
    read-only view of bytes, as tensor_content does, up to 64 KB: its values cannot change,
    so kept calls may know it by identity. TensorFlow's fill rule still holds."""
    from dfg.schemas import tensor_pb2

    small = _val_field_const(np.array([2, -1, 1, 1], np.int32))
    assert frozen(small) and small.dtype is np.dtype(np.int32)
    assert small.tolist() == [2, -1, 1, 1]
    t = tensor_pb2.TensorProto(dtype=1)
    t.tensor_shape.dim.add(size=5)
    t.float_val.extend([1.5, 2.5])                       # the last value fills the rest
    filled = to_numpy(t)
    assert frozen(filled) and filled.tolist() == [1.5, 2.5, 2.5, 2.5, 2.5]
    t = tensor_pb2.TensorProto(dtype=1)
    t.tensor_shape.dim.add(size=1 << 15)
    t.float_val.append(0.0)                              # 128 KB: an array of its own
    big = to_numpy(t)
    assert not frozen(big) and big.shape == (1 << 15,) and not big.any()


def test_shape_and_reshape_keep_calls_that_decline_what_they_were_not_kept_for() -> None:
    """Shape keeps its vector (read-only) for inputs of the same shape; Reshape keeps the
    view it makes for inputs of the same shape and a sizes vector of the same dtype and
    values. Anything else declines (None) and the kernel runs and words the error."""
    rng = np.random.default_rng(27)
    x = rng.standard_normal((2, 1, 1, 6)).astype(np.float32)
    node = _Node("Shape", {"out_type": np.dtype(np.int32)}, [x])
    vec = node(x)
    assert vec.tolist() == [2, 1, 1, 6] and vec.dtype == np.int32
    fast = node.ctx.fast
    assert fast(x.copy()) is vec and not vec.flags.writeable
    with pytest.raises(ValueError):
        vec[0] = 3                                       # nobody can change what is kept
    assert fast(x[:1]) is None and node(x[:1]).tolist() == [1, 1, 1, 6]
    sizes = np.array([2, -1], np.int32)
    r = _Node("Reshape", {}, [x, sizes])
    want = x.reshape(2, 6)
    assert r(x, sizes).tobytes() == want.tobytes()
    fast = r.ctx.fast
    assert fast(x, sizes).tobytes() == want.tobytes()
    assert fast(x, np.array([2, 6], np.int32)) is None   # other values
    assert fast(x, np.array([2, -1], np.int64)) is None  # another dtype
    assert fast(x[:1], sizes) is None                    # another input shape
    sizes[1] = 3                                         # a fed vector changed in place
    assert fast(x, sizes) is None
    with pytest.raises(Exception, match="12 values, but the requested shape has 6"):
        r(x, sizes)


def test_shape_arithmetic_on_kept_values_is_kept_and_on_fed_values_is_not() -> None:
    """A batch size sliced out of a kept Shape vector by a Const spec, and a target shape
    packed from it and Consts, are the same arrays every step (their inputs cannot change);
    the same ops on a fed vector compute again, so a vector changed in place between steps
    gives its new values."""
    from dfg.executor.kernels import array as A

    rng = np.random.default_rng(28)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    vec = _Node("Shape", {"out_type": np.dtype(np.int32)}, [x])(x)
    spec = [_val_field_const(np.array([v], np.int32)) for v in (0, 1, 1)]
    form = A._strided_slice_form({"shrink_axis_mask": 1})
    n = form(vec, *spec)
    assert int(n) == 3 and form(vec, *spec) is n and not n.flags.writeable
    fed = np.array([5, 4], np.int32)
    m = form(fed, *spec)
    fed[0] = 7
    assert int(form(fed, *spec)) == 7 and int(m) == 7    # a view of the fed vector
    ones = _val_field_const(np.array(1, np.int32))
    pack = _Node("Pack", {"axis": 0}, [n, ones, ones])
    target = pack(n, ones, ones)
    assert target.tolist() == [3, 1, 1]
    kept = pack.ctx.fast(n, ones, ones)
    assert kept.tolist() == [3, 1, 1] and pack.ctx.fast(n, ones, ones) is kept
    mine = np.array(2, np.int32)
    got = pack.ctx.fast(mine, ones, ones)
    mine[()] = 6
    assert got.tolist() == [2, 1, 1] and pack.ctx.fast(mine, ones, ones).tolist() == [6, 1, 1]


@pytest.mark.parametrize("programs", ["always", "never"])
def test_a_keras_reshape_by_batch_size_gives_numpys_values_whatever_the_batch(programs
                                                                             ) -> None:
    """Keras reshapes a squeeze-excite gate with its batch size: Shape, StridedSlice, Pack
    and Reshape. Fed batches of changing size in a Session, each run has numpy's values."""
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [None, 3, 3, 4], name="x")
        m = B.apply_op("Mean", [x, B.constant(np.array([1, 2], np.int32))],
                       name="gap").outputs[0]
        shp = B.apply_op("Shape", [m], {"out_type": "int32"}, name="shape").outputs[0]
        n = B.apply_op("StridedSlice", [shp, B.constant(np.array([0], np.int32)),
                                        B.constant(np.array([1], np.int32)),
                                        B.constant(np.array([1], np.int32))],
                       {"shrink_axis_mask": 1}, name="n").outputs[0]
        one, four = B.constant(np.int32(1)), B.constant(np.int32(4))
        target = B.apply_op("Pack", [[n, one, one, four]], {"axis": 0}, name="target").outputs[0]
        r = B.apply_op("Reshape", [m, target], name="gate").outputs[0]
        B.apply_op("Mul", [x, r], name="out")
    gd = g.as_graph_def()
    rng = np.random.default_rng(29)
    with Session(gd, threads=1, programs=programs) as s:
        for b in (2, 2, 3, 2, 1, 3, 3, 2):
            xv = rng.standard_normal((b, 3, 3, 4)).astype(np.float32)
            gate = (np.add.reduce(xv, axis=(1, 2), dtype=np.float32) / np.float32(9))
            want = xv * gate.reshape(b, 1, 1, 4)
            got, tgt = s.run(["out:0", "target:0"], {"x:0": xv})
            assert got.tobytes() == want.tobytes()
            assert tgt.tolist() == [b, 1, 1, 4] and tgt.flags.writeable   # a fetch is a copy


def test_a_list_stores_kept_call_stores_like_the_kernel_and_declines_the_rest() -> None:
    """TensorListSetItem keeps a call after it stored an array: for a list of the same
    element dtype and shape, an item of the same dtype and shape and an index in range it
    makes the kernel's new list (the old one unchanged); anything else declines (None) and
    the kernel runs, which grows a resizable list or words the error."""
    from dfg.executor.kernels.tensor_list import TensorList

    f32 = np.dtype(np.float32)
    items = [np.full((2, 3), k, np.float32) for k in range(4)]
    tl = TensorList.make(f32, (None, 3), [None] * 4)
    node = _Node("TensorListSetItem", {"element_dtype": f32}, [tl, np.int32(0), items[0]])

    def run(*args: object) -> TensorList:
        out = call(node.k, list(args), node.ctx)
        return out if isinstance(out, TensorList) else out[0]

    first = run(tl, np.array(0, np.int32), items[0])
    fast = node.ctx.fast
    assert fast is not None
    second = fast(first, np.array(2, np.int32), items[2])
    assert second.entries()[0] is items[0] and second.entries()[2] is items[2]
    assert first.entries()[2] is None and tl.entries() == [None] * 4   # values, not changed
    third = fast(second, np.int64(3), items[3])                        # a scalar index
    assert third.length == 4 and third.entries()[3] is items[3]
    assert fast(second, np.array(4, np.int32), items[1]) is None        # out of range
    assert fast(second, np.array(-1, np.int32), items[1]) is None
    assert fast(second, np.array([1], np.int32), items[1]) is None      # not a scalar
    assert fast(second, np.array(1, np.int32), items[1].astype(np.float64)) is None
    assert fast(second, np.array(1, np.int32), np.zeros((2, 4), np.float32)) is None
    other = TensorList.make(f32, tuple([None, 3]), [None] * 4)          # another shape object
    assert fast(other, np.array(1, np.int32), items[1]) is None
    with pytest.raises(Exception, match="Trying to modify element 4 in a list with 4"):
        run(second, np.array(4, np.int32), items[1])
    with pytest.raises(Exception, match="incompatible shape"):
        run(second, np.array(1, np.int32), np.zeros((2, 4), np.float32))
