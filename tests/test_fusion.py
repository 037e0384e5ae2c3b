"""Run-time fusion: fused kernels (executor/kernels/fused.py), the fusion passes, batch norm
folded into conv/matmul weights, and ``optimize_for_signature`` (graphdef/passes/pipeline.py).

Fused kernels are checked against math (a direct numpy convolution written here); optimized
graphs against TensorFlow's outputs stored with the Keras zoo and the bench conformance cases,
and against the unoptimized graph run by the same Session code (``optimize=False``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conformance import assert_close

from dfg.executor import Session, codegen
from dfg.executor.kernels.registry import invoke
from dfg.executor.reference import Reference
from dfg.graphdef import builder as B
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError
from dfg.graphdef.io import load_graph
from dfg.graphdef.passes import PASSES, PassOptions
from dfg.graphdef.passes.pipeline import optimize_for_signature, run_passes

DATA = Path(__file__).resolve().parent / "data"
ZOO = sorted(p.parent for p in (DATA / "models").glob("*/case.json")
             if not p.parent.name.startswith("layer_"))
BENCH = sorted(p.parent for p in (DATA / "conformance").glob("*/case.json")
               if "bench" in json.loads(p.read_text()).get("features", []))
RNG = np.random.default_rng(7)


# --- math references ------------------------------------------------------------------------

def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: str) -> np.ndarray:
    """NHWC/HWIO convolution by its definition (float64), SAME or VALID."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    if pad == "SAME":
        oh, ow = -(-h // stride), -(-wd // stride)
        ph = max(0, (oh - 1) * stride + kh - h)
        pw = max(0, (ow - 1) * stride + kw - wd)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i:i + (oh - 1) * stride + 1:stride, j:j + (ow - 1) * stride + 1:stride]
            out += np.einsum("nhwc,co->nhwo", patch.astype(np.float64), w[i, j])
    return out


def _depthwise_ref(x: np.ndarray, w: np.ndarray, pad: str) -> np.ndarray:
    c, m = w.shape[2], w.shape[3]
    outs = [_conv_ref(x[..., k:k + 1], w[:, :, k:k + 1, :], 1, pad) for k in range(c)]
    return np.concatenate(outs, axis=-1).reshape(outs[0].shape[:3] + (c * m,))


def _sigmoid(y: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-y))


ACTS = {
    None: lambda y: y,
    "Relu": lambda y: np.maximum(y, 0),
    "Relu6": lambda y: np.clip(y, 0, 6),
    "Elu": lambda y: np.where(y < 0, np.expm1(y), y),
    "LeakyRelu": lambda y: np.where(y > 0, y, 0.3 * y),
    "Tanh": np.tanh,
    "Sigmoid": _sigmoid,
    "_MklSwish": lambda y: y * _sigmoid(y),
}


def _rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# --- fused kernels --------------------------------------------------------------------------

@pytest.mark.parametrize("act", list(ACTS), ids=lambda a: str(a))
def test_fused_conv2d_kernel(act):
    x, w, b = _rand(2, 9, 7, 3), _rand(3, 3, 3, 5), _rand(5)
    ops = ["BiasAdd"] + ([act] if act else [])
    got = invoke("_FusedConv2D", x, w, b, attrs={
        "strides": [1, 2, 2, 1], "padding": "SAME", "fused_ops": ops, "num_args": 1,
        "leakyrelu_alpha": 0.3})
    want = ACTS[act](_conv_ref(x, w, 2, "SAME") + b)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_fused_conv2d_batch_norm_and_nchw():
    x, w = _rand(2, 6, 6, 4), _rand(1, 1, 4, 3)
    scale, offset, mean = _rand(3), _rand(3), _rand(3)
    var = np.abs(_rand(3)) + 0.5
    got = invoke("_FusedConv2D", x.transpose(0, 3, 1, 2), w, scale, offset, mean, var,
                 attrs={"strides": [1, 1, 1, 1], "padding": "VALID", "data_format": "NCHW",
                        "fused_ops": ["FusedBatchNorm", "Relu"], "num_args": 4,
                        "epsilon": 0.01})
    y = _conv_ref(x, w, 1, "VALID")
    want = np.maximum((y - mean) * scale / np.sqrt(var + np.float32(0.01)) + offset, 0)
    np.testing.assert_allclose(got, want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


def test_fused_depthwise_and_matmul_kernels():
    x, w, b = _rand(1, 6, 5, 3), _rand(3, 3, 3, 2), _rand(6)
    got = invoke("_FusedDepthwiseConv2dNative", x, w, b, attrs={
        "strides": [1, 1, 1, 1], "padding": "SAME", "fused_ops": ["BiasAdd", "Relu6"],
        "num_args": 1})
    np.testing.assert_allclose(got, np.clip(_depthwise_ref(x, w, "SAME") + b, 0, 6),
                               rtol=1e-5, atol=1e-5)
    a, m, bias = _rand(4, 7), _rand(5, 7), _rand(5)
    got = invoke("_FusedMatMul", a, m, bias, attrs={
        "transpose_b": True, "fused_ops": ["BiasAdd", "_MklSwish"], "num_args": 1})
    want = a.astype(np.float64) @ m.T + bias
    np.testing.assert_allclose(got, want * _sigmoid(want), rtol=1e-5, atol=1e-5)


def test_fused_conv2d_residual_add_kernel():
    x, w, b = _rand(2, 5, 5, 3), _rand(3, 3, 3, 4), _rand(4)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "fused_ops": ["BiasAdd", "Add",
                                                                     "Relu"], "num_args": 2}
    y = _conv_ref(x, w, 1, "SAME") + b
    res = _rand(2, 5, 5, 4)
    np.testing.assert_allclose(invoke("_FusedConv2D", x, w, b, res, attrs=attrs),
                               np.maximum(y + res, 0), rtol=1e-5, atol=1e-5)
    # an addend that broadcasts the result larger still gives Add's result
    big = _rand(3, 2, 5, 5, 4)
    got = invoke("_FusedConv2D", x, w, b, big, attrs=attrs)
    assert got.shape == (3, 2, 5, 5, 4)
    np.testing.assert_allclose(got, np.maximum(y + big, 0), rtol=1e-5, atol=1e-5)


def test_fused_kernel_errors_name_what_is_wrong():
    x, w = _rand(1, 4, 4, 2), _rand(1, 1, 2, 3)
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID", "num_args": 1}
    with pytest.raises(InvalidArgumentError, match="bias must be 1-D with the output's 3"):
        invoke("_FusedConv2D", x, w, _rand(4), attrs={**attrs, "fused_ops": ["BiasAdd"]})
    with pytest.raises(UnimplementedError, match="Gelu"):
        invoke("_FusedConv2D", x, w, _rand(3), attrs={**attrs, "fused_ops": ["BiasAdd",
                                                                            "Gelu"]})
    with pytest.raises(InvalidArgumentError, match="take 4 arguments"):
        invoke("_FusedConv2D", x, w, _rand(3), attrs={**attrs,
                                                     "fused_ops": ["FusedBatchNorm"]})


def test_elementwise_chain_kernel_equals_the_ops_kernels():
    from dfg.executor.kernels.fused import CHAIN_OPS
    from dfg.graphdef.passes.fuse_elementwise import CHAIN_OPS as PASS_OPS

    assert {k: v[0] for k, v in CHAIN_OPS.items()} == PASS_OPS
    for shape in [(2, 5, 5, 3), (3,), ()]:
        x = np.asarray(_rand(*shape, scale=3.0))
        y = np.asarray(np.abs(_rand(*shape)) + 0.5)
        for op, (arity, _) in CHAIN_OPS.items():
            if op == "BiasAdd":
                continue    # test_chain_pieces_and_bias_adds_equal_split_and_the_ops
            # op applied to (op applied to the inputs): a result operand that dies, reused
            args = [x, y][:arity]
            inner = "i0" if arity == 1 else "i0 i1"
            outer = "r0" if arity == 1 else "r0 i1"
            prog = [f"{op} {inner}", f"{op} {outer}"]
            got = invoke("_DfgElementwiseChain", *args, attrs={"program": prog,
                                                               "N": len(args)})
            first = invoke(op, *args)
            want = invoke(op, first, *args[1:])
            assert got.dtype == want.dtype and got.shape == want.shape, (op, shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {shape}")
    # hard-swish with a broadcast constant, and a scalar input broadcast against a result
    x = _rand(2, 4, 4, 3)
    got = invoke("_DfgElementwiseChain", x, np.float32(3), np.float32(6), attrs={
        "program": ["AddV2 i0 i1", "Relu6 r0", "RealDiv r1 i2", "Mul i0 r2"], "N": 3})
    np.testing.assert_allclose(got, x * np.clip(x + 3, 0, 6) / 6, rtol=1e-6, atol=1e-6)
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        invoke("_DfgElementwiseChain", _rand(2, 3), _rand(4), attrs={
            "program": ["Mul i0 i1", "Relu r0"], "N": 2})
    with pytest.raises(UnimplementedError, match="MatMul"):
        invoke("_DfgElementwiseChain", _rand(2), attrs={"program": ["MatMul i0 i0"],
                                                        "N": 1})


_SPECIAL = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40, 3e38, -3e38, 1e-8,
                     0.3, -7.5], np.float32)


def _split_then_ops(z_args, b, c, j, axis, n):
    """Block j of Split(BiasAdd(AddV2(p, m), b)) through the ops' own kernels, then an LSTM
    gate's arithmetic: sigmoid(block) * c + tanh(block)."""
    z = invoke("BiasAdd", invoke("AddV2", *z_args), b)
    piece = invoke("Split", np.int32(axis), z, attrs={"num_split": n})[j]
    return invoke("AddV2", invoke("Mul", invoke("Sigmoid", piece), c), invoke("Tanh", piece))


@pytest.mark.parametrize("native", ["on", "0"])
def test_chain_pieces_and_bias_adds_equal_split_and_the_ops(native, monkeypatch):
    """A chain's ``Piece`` entries (a Split moved into it by the pass, its value's leaves cut
    into blocks) and ``BiasAdd`` give the bits of Split, BiasAdd and the ops run one by one:
    full, row-broadcast, scalar and size-1 leaves, float32 (compiled, reading blocks where
    they lie) and float64; and the errors of the ops they replace."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(3)
    prog = ["Piece i0 {a} 4 {j} 0", "Piece i1 {a} 4 {j} 0", "AddV2 r0 r1",
            "Piece i2 {a} 4 {j} 0", "BiasAdd r2 r3", "Sigmoid r4", "Mul r5 i3", "Tanh r4",
            "AddV2 r6 r7"]
    for dt in (np.float32, np.float64):
        p = (rng.standard_normal((5, 24)) * 3).astype(dt)
        p.flat[rng.integers(0, p.size, 8)] = _SPECIAL[:8]
        m = rng.standard_normal((5, 24)).astype(dt)
        b = rng.standard_normal(24).astype(dt)
        c = rng.standard_normal((5, 6)).astype(dt)
        for leaves in ((p, m), (p, m[:1]), (p, dt(0.5)), (p[:, :1] * 0 + p[:, :1], m)):
            for j in range(4):
                for axis in (1, -1):
                    got = invoke("_DfgElementwiseChain", *leaves, b, c, attrs={
                        "program": [e.format(a=axis, j=j) for e in prog], "N": 4, "T": dt})
                    want = _split_then_ops(leaves, b, c, j, axis, 4)
                    assert got.dtype == want.dtype and got.shape == want.shape
                    nan = np.isnan(want)
                    assert np.array_equal(np.isnan(got), nan)
                    np.testing.assert_array_equal(got[~nan], want[~nan], err_msg=f"{j} {axis}")
    bad = [("Piece i0 3 4 0 0", "AddV2 r0 i1"), ("Piece i0 1 5 0 0", "AddV2 r0 i1"),
           ("Piece i0 1 4 0 0", "BiasAdd r0 i1")]
    x = rng.standard_normal((5, 24)).astype(np.float32)
    with pytest.raises(InvalidArgumentError, match="split_dim < input rank"):
        invoke("_DfgElementwiseChain", x, x, attrs={"program": list(bad[0]), "N": 2})
    with pytest.raises(InvalidArgumentError, match="evenly divide"):
        invoke("_DfgElementwiseChain", x, x, attrs={"program": list(bad[1]), "N": 2})
    with pytest.raises(InvalidArgumentError, match="Biases must be 1D"):
        invoke("_DfgElementwiseChain", x, x[:, :6], attrs={"program": list(bad[2]), "N": 2})
    with pytest.raises(InvalidArgumentError, match="as many biases"):
        invoke("_DfgElementwiseChain", x, x[0], attrs={"program": list(bad[2]), "N": 2})
    # the leaves of one split must broadcast (a Split of their sum would have failed)
    with pytest.raises(InvalidArgumentError, match="Incompatible shapes"):
        invoke("_DfgElementwiseChain", x, x[:, :4], attrs={
            "program": ["Piece i0 1 4 0 0", "Piece i1 1 4 0 0", "AddV2 r0 r1"], "N": 2})
    with pytest.raises(InvalidArgumentError, match="bad slice"):
        invoke("_DfgElementwiseChain", x, attrs={"program": ["Piece i0 1 4 4 0", "Neg r0"],
                                                 "N": 1})


@pytest.mark.parametrize("native", ["on", "0"])
def test_a_chains_add_n_adds_equal_shapes_and_refuses_others_as_add_n_does(native,
                                                                          monkeypatch):
    """AddN of two inputs in a chain (hoist_concat_projection writes one where a ConcatV2
    checked its inputs' rows): AddN's bits on equal shapes, whole or in pieces, float32 and
    float64; AddN's error where AddV2 would broadcast."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(5)
    for dt in (np.float32, np.float64):
        a, b = (rng.standard_normal((16, 32)) * 3).astype(dt), rng.standard_normal((16, 32)) \
            .astype(dt)
        bias = rng.standard_normal(8).astype(dt)
        got = invoke("_DfgElementwiseChain", a, b, attrs={
            "program": ["AddN i0 i1", "Tanh r0"], "N": 2, "T": dt})
        np.testing.assert_array_equal(got, invoke("Tanh", invoke("AddN", a, b)))
        for j in range(4):
            got = invoke("_DfgElementwiseChain", a, b, bias, attrs={"program": [
                f"Piece i0 1 4 {j} 0", f"Piece i1 1 4 {j} 0", "AddN r0 r1",
                "BiasAdd r2 i2", "Sigmoid r3"], "N": 3, "T": dt})
            want = invoke("Sigmoid", invoke("BiasAdd", np.split(invoke("AddN", a, b), 4,
                                                                axis=1)[j], bias))
            np.testing.assert_array_equal(got, want)
        for other in (b[:1], b[0], dt(1.5)):
            with pytest.raises(InvalidArgumentError, match="must have the same shape"):
                invoke("_DfgElementwiseChain", a, other, attrs={
                    "program": ["AddN i0 i1", "Tanh r0"], "N": 2, "T": dt})
        with pytest.raises(InvalidArgumentError, match="must have the same shape"):
            invoke("_DfgElementwiseChain", a, b[:1], bias, attrs={"program": [
                "Piece i0 1 4 0 0", "Piece i1 1 4 0 0", "AddN r0 r1", "BiasAdd r2 i2"],
                "N": 3, "T": dt})


@pytest.mark.parametrize("native", ["on", "0"])
def test_compiled_elementwise_chains_give_the_bits_of_the_ops_kernels(native, monkeypatch):
    """Random chains of the ops the compiled chain computes (fused.NATIVE_CHAIN_OPS), on
    full, row-broadcast, column-broadcast, scalar and strided float32 inputs holding NaN,
    infinities, signed zeros and subnormals, equal the ops' own kernels applied one by one,
    bit for bit (with DFG_NATIVE=0 the numpy chain runs, against the numpy kernels)."""
    from dfg.executor.kernels.fused import NATIVE_CHAIN_OPS
    from dfg.graphdef.passes.fuse_elementwise import CHAIN_OPS as ARITY

    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(7)
    # (BiasAdd's and AddN's shapes are their own tests': test_chain_pieces_and_bias_adds_...,
    # test_a_chains_add_n_...)
    ops = sorted(op for op in NATIVE_CHAIN_OPS if op not in ("BiasAdd", "AddN"))
    for trial in range(60):
        rows, cols = int(rng.integers(1, 9)), int(rng.integers(1, 700))
        full = (rng.standard_normal((rows, 2 * cols)) * 4).astype(np.float32)
        full.flat[rng.integers(0, full.size, 12)] = _SPECIAL
        inputs = [full[:, ::2], (rng.standard_normal((rows, cols)) * 3).astype(np.float32),
                  rng.standard_normal(cols).astype(np.float32), np.float32(rng.normal()),
                  (rng.standard_normal((rows, 1)) * 2).astype(np.float32)]
        inputs[-1].flat[rng.integers(0, rows)] = _SPECIAL[int(rng.integers(len(_SPECIAL)))]
        values = list(inputs)
        program = []
        for k in range(int(rng.integers(2, 9))):
            op = ops[int(rng.integers(len(ops)))]
            names = [f"i{j}" for j in range(len(inputs))] + [f"r{j}" for j in range(k)]
            picks = [int(rng.integers(len(names))) for _ in range(ARITY[op])]
            if ARITY[op] == 1 or k == 0:
                picks[0] = len(inputs) + k - 1 if k else 0   # keep it one chain
            else:
                picks[0] = len(inputs) + k - 1
            program.append(" ".join([op, *(names[p] for p in picks)]))
            values.append(invoke(op, *(values[p] for p in picks)))
        got = invoke("_DfgElementwiseChain", *inputs,
                     attrs={"program": program, "N": len(inputs), "T": np.float32})
        want = np.asarray(values[-1])
        assert got.shape == want.shape and got.dtype == want.dtype == np.float32, program
        # the same bits, but for a NaN's sign and payload (which no op defines)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), (trial, program)
        assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), \
            (trial, program)
        # an earlier entry as a second output (a merged LSTM cell's new state): both values,
        # each of its own shape (one narrower than the last is left to the numpy chain)
        k = int(rng.integers(len(program) - 1))
        both = invoke("_DfgElementwiseChain", *inputs,
                      attrs={"program": program, "N": len(inputs), "T": np.float32, "M": 2,
                             "outputs": [k, len(program) - 1]})
        assert len(both) == 2
        for out, ref in zip(both, (np.asarray(values[len(inputs) + k]), want)):
            assert out.shape == ref.shape and out.dtype == np.float32, (trial, program, k)
            nan = np.isnan(ref)
            assert np.array_equal(np.isnan(out), nan), (trial, program, k)
            assert np.array_equal(out[~nan].view(np.uint32), ref[~nan].view(np.uint32)), \
                (trial, program, k)


def test_a_chain_split_on_the_pool_gives_one_threads_bits():
    """A large chain's rows split on the native pool (``_native.chain_split``): every
    split gives the one-thread call's bits (full, row, scalar and column inputs, a second
    output); the kernel on such a chain equals the ops' kernels applied one by one; bad
    splits are refused."""
    from dfg.executor.kernels import _native

    ext = _native.extension()
    if ext is None:
        pytest.skip("native kernels not built")
    rng = np.random.default_rng(3)
    rows, cols = 97, 700
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    x.flat[rng.integers(0, x.size, 40)] = _SPECIAL[rng.integers(0, len(_SPECIAL), 40)]
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    row = rng.standard_normal(cols).astype(np.float32)
    scalar = np.array([1.5], np.float32)
    col = rng.standard_normal(rows).astype(np.float32)
    ins, kinds = (x, y, row, scalar, col), bytes([0, 0, 1, 2, 3])
    # (x + y) * row, sigmoid, - scalar, tanh, * col, + x  (op codes: native.h's DFG_CH_*)
    code = np.array([0, 0, 1, 2, 5, 2, 11, 6, -1, 1, 7, 3, 12, 8, -1, 2, 9, 4, 0, 10, 0],
                    np.int32).tobytes()
    extra_op = np.array([3], np.int32).tobytes()

    def call(chunks: int, threads: int) -> tuple:
        out, more = np.empty((rows, cols), np.float32), np.empty((rows, cols), np.float32)
        ext.chain_f32(ins, kinds, code, out, rows, cols, None, extra_op, (more,), chunks,
                      threads)
        return out, more

    one = call(1, 1)
    for chunks, threads in ((2, 2), (7, 2), (97, 3), (200, 8)):
        for a, b in zip(one, call(chunks, threads)):
            assert a.tobytes() == b.tobytes(), (chunks, threads)
    with pytest.raises(ValueError):
        call(0, 2)
    with pytest.raises(ValueError):
        call(4, 0)
    assert _native.chain_split(1, 10**6, code) == (1, 1)     # one row: nothing to split
    # the kernel, split (rows * cols * ops over CHAIN_SPLIT_WORK), against the ops one by one
    program = ["AddV2 i0 i1", "Sigmoid r0", "Mul r1 i2", "Tanh r2", "Sub r3 i1"]
    assert _native.chain_split(rows, cols, code)[1] == _native._threads()
    got = invoke("_DfgElementwiseChain", x, y, row,
                 attrs={"program": program, "N": 3, "T": np.float32})
    r = invoke("AddV2", x, y)
    r = invoke("Sigmoid", r)
    r = invoke("Mul", r, row)
    r = invoke("Tanh", r)
    want = invoke("Sub", r, y)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("outputs,m", [([0, 2], 2), ([1, 2], 3), ([2, 1], 2), ([1, 1, 2], 3),
                                       ([2], 2), ([], 2), ([0, 1, 2, 3], 4)])
def test_a_chains_outputs_are_checked(outputs, m):
    """``outputs`` lists distinct op entries, the last entry last, and ``M`` counts them:
    anything else is refused with a message naming the node (a slice is not an output)."""
    prog = ["Piece i0 0 2 0 0", "Neg r0", "Abs r1"]
    with pytest.raises(InvalidArgumentError, match="_DfgElementwiseChain"):
        invoke("_DfgElementwiseChain", np.ones(4, np.float32),
               attrs={"program": prog, "N": 1, "M": m, "outputs": outputs})


def test_the_compiled_sweeps_extra_outputs_are_checked():
    """chain_f32's extra outputs: op indices before the last, distinct, one float32 buffer
    of the output's size each (module.c refuses anything else before writing)."""
    from dfg.executor.kernels import _native

    ext = _native.extension()
    if ext is None:
        pytest.skip("native kernels not built")
    x = np.arange(8, dtype=np.float32) - 4
    code = np.array([5, 0, -1, 6, 1, -1], np.int32).tobytes()     # Neg, then Abs (native.h)
    out, extra = np.empty(8, np.float32), np.empty(8, np.float32)
    ext.chain_f32((x,), bytes(1), code, out, 1, 8, None, np.array([0], np.int32).tobytes(),
                  (extra,))
    assert np.array_equal(extra, -x) and np.array_equal(out, np.abs(x))
    for ops, outs in ((np.array([1], np.int32), (extra,)), (np.array([-1], np.int32), (extra,)),
                      (np.array([0, 0], np.int32), (extra, extra.copy())),
                      (np.array([0], np.int32), ()), (np.array([0], np.int32),
                                                     (np.empty(7, np.float32),))):
        with pytest.raises(ValueError):
            ext.chain_f32((x,), bytes(1), code, out, 1, 8, None, ops.tobytes(), outs)
    with pytest.raises(TypeError):
        ext.chain_f32((x,), bytes(1), code, out, 1, 8, None, np.array([0], np.int32).tobytes(),
                      (np.empty(8, np.float64),))



@pytest.mark.parametrize("native", ["1", "0"])
def test_a_chains_gate_broadcast_over_each_images_pixels_gives_the_ops_bits(native,
                                                                              monkeypatch):
    """A chain reading a squeeze-excite gate, (N, 1, 1, C) against (N, H, W, C), and the like
    ((N, 1, C) against (N, T, C); (2, 3, 1, C) against (2, 3, 4, C)), beside full, row and
    scalar inputs: the compiled sweep reads the gate's row once per group of rows (narrow
    and wide rows: blocks of several rows, and a row per block) and equals the ops' own
    kernels one by one, bit for bit; with DFG_NATIVE=0 the numpy chain."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(8)
    for out_shape, gate_shape in (((2, 3, 3, 24), (2, 1, 1, 24)), ((2, 2, 2, 300), (2, 1, 1, 300)),
                                  ((3, 5, 16), (3, 1, 16)), ((2, 3, 4, 8), (2, 3, 1, 8)),
                                  ((1, 7, 7, 130), (1, 1, 1, 130))):
        gate = (rng.standard_normal(gate_shape) * 3).astype(np.float32)
        gate.flat[rng.integers(0, gate.size, 3)] = _SPECIAL[:3]
        x = (rng.standard_normal(out_shape) * 3).astype(np.float32)
        x.flat[rng.integers(0, x.size, 8)] = _SPECIAL[:8]
        row = rng.standard_normal(out_shape[-1]).astype(np.float32)
        for program, inputs in (
                (["Mul i0 i1", "Mul i2 r0"], [gate, np.float32(1 / 6), x]),
                (["AddV2 i0 i1", "Relu6 r0", "Mul i2 r1", "Sigmoid r2", "Mul r3 i3"],
                 [gate, row, x, x]),
                (["Sub i1 i0", "Tanh r0", "Div r1 i2"], [gate, x, np.float32(0.5)])):
            values = list(inputs)
            for entry in program:
                op, *refs = entry.split()
                values.append(invoke(op, *(values[int(r[1:]) + (0 if r[0] == "i" else
                                                               len(inputs))] for r in refs)))
            got = invoke("_DfgElementwiseChain", *inputs,
                         attrs={"program": program, "N": len(inputs), "T": np.float32})
            want = np.asarray(values[-1])
            assert got.shape == want.shape == out_shape and got.dtype == np.float32
            nan = np.isnan(want)
            assert np.array_equal(np.isnan(got), nan), (out_shape, program)
            assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), \
                (out_shape, program)


# --- small graphs ---------------------------------------------------------------------------

def _conv_graph(act: str | None, bn: bool = True, swish: bool = False):
    """x -> Conv2D -> BiasAdd -> [Mul, AddV2 (Keras 3's batch norm)] -> activation."""
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 8, 8, 3], name="x")
        y = B.conv2d(x, B.constant(_rand(3, 3, 3, 4), name="w"), padding="SAME", name="conv")
        y = B.apply_op("BiasAdd", [y, B.constant(_rand(4), name="b")], name="bias").outputs[0]
        if bn:
            y = B.multiply(y, B.constant(_rand(1, 1, 1, 4), name="bn_scale"), name="bn_mul")
            y = B.add(y, B.constant(_rand(4), name="bn_shift"), name="bn_add")
        if swish:
            y = B.multiply(y, B.sigmoid(y, name="sig"), name="swish")
        elif act:
            attrs = {"alpha": 0.3} if act == "LeakyRelu" else {}
            y = B.apply_op(act, [y], attrs, name="act").outputs[0]
    return g.as_graph_def(), y.name


def _run(graph, fetches, feed):
    # optimize=False: the graph exactly as given (the Session would otherwise optimize it
    # for the signature itself, with this very pipeline)
    with Session(graph, threads=1, optimize=False) as s:
        return s.run(fetches, feed)


def _ops(graph_def) -> dict[str, str]:
    return {n.name: n.op for n in graph_def.node}


@pytest.mark.parametrize("act", ["Relu", "Relu6", "Elu", "LeakyRelu", "Tanh", "Sigmoid",
                                 "swish"])
def test_conv_bias_bn_activation_fuse_into_one_node(act):
    gd, out = _conv_graph(None if act == "swish" else act, swish=act == "swish")
    x = _rand(2, 8, 8, 3)
    res = optimize_for_signature(gd, [out], ["x:0"])
    ops = _ops(res.graph_def)
    last = out.split(":")[0]
    assert ops[last] == "_FusedConv2D"
    assert sorted(ops.values()) == ["Const", "Const", "Placeholder", "_FusedConv2D"]
    node = next(n for n in res.graph_def.node if n.name == last)
    assert [s.decode() for s in node.attr["fused_ops"].list.s] == \
        ["BiasAdd", "_MklSwish" if act == "swish" else act]
    # against the graph as written, and against math
    got, = _run(res.graph_def, [out], {"x:0": x})
    want, = _run(gd, [out], {"x:0": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    v = {n.name: n for n in gd.node}
    from dfg.graphdef.tensors import to_numpy
    c = {k: to_numpy(v[k].attr["value"].tensor).astype(np.float64)
         for k in ("w", "b", "bn_scale", "bn_shift")}
    y = (_conv_ref(x, c["w"], 1, "SAME") + c["b"]) * c["bn_scale"] + c["bn_shift"]
    np.testing.assert_allclose(got, ACTS["_MklSwish" if act == "swish" else act](y),
                               rtol=1e-4, atol=1e-4)


def test_residual_add_fuses_with_its_activation():
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 6, 6, 3], name="x")
        skip = B.placeholder("float32", [2, 6, 6, 4], name="skip")
        y = B.conv2d(x, B.constant(_rand(1, 1, 3, 4)), name="conv")
        y = B.apply_op("BiasAdd", [y, B.constant(_rand(4))], name="bias").outputs[0]
        y = B.relu(B.add(skip, y, name="residual"), name="out")
    gd = g.as_graph_def()
    res = optimize_for_signature(gd, ["out:0"], ["x:0", "skip:0"])
    node = next(n for n in res.graph_def.node if n.name == "out")
    assert node.op == "_FusedConv2D" and node.attr["num_args"].i == 2
    assert [s.decode() for s in node.attr["fused_ops"].list.s] == ["BiasAdd", "Add", "Relu"]
    feed = {"x:0": _rand(2, 6, 6, 3), "skip:0": _rand(2, 6, 6, 4)}
    np.testing.assert_allclose(_run(res.graph_def, ["out:0"], feed)[0],
                               _run(gd, ["out:0"], feed)[0], rtol=1e-6, atol=1e-6)


def test_fetched_or_fed_intermediates_are_not_swallowed():
    gd, out = _conv_graph("Relu")
    x = _rand(2, 8, 8, 3)
    # fetching the conv and the batch norm's Mul keeps both (same name, same meaning)
    fetches = ["conv:0", "bn_mul:0", out]
    res = optimize_for_signature(gd, fetches, ["x:0"])
    ops = _ops(res.graph_def)
    assert ops["conv"] == "Conv2D" and ops["bn_mul"] == "Mul"
    for got, want in zip(_run(res.graph_def, fetches, {"x:0": x}), _run(gd, fetches,
                                                                        {"x:0": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # feeding the BiasAdd: it stays as it is, under its name (nothing folds into it)
    fed = _rand(2, 8, 8, 4)
    res = optimize_for_signature(gd, [out], ["bias:0"])
    ops = _ops(res.graph_def)
    assert ops["bias"] == "BiasAdd" and ops["conv"] == "Conv2D"
    got, = _run(res.graph_def, [out], {"bias:0": fed})
    want, = _run(gd, [out], {"bias:0": fed})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_affine_fold_keeps_shape_changing_broadcasts():
    # a (2,1,1,4) "scale" broadcasts the batch: not per-channel, so it must not fold
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [1, 5, 5, 2], name="x")
        y = B.conv2d(x, B.constant(_rand(1, 1, 2, 4)), name="conv")
        y = B.multiply(y, B.constant(_rand(2, 1, 1, 4)), name="scale")
    gd = g.as_graph_def()
    res = run_passes(gd, PassOptions(fetches=("scale:0",)), ["fold_batch_norm"])
    assert _ops(res.graph_def)["scale"] == "Mul"
    x = _rand(1, 5, 5, 2)
    assert _run(res.graph_def, ["scale:0"], {"x:0": x})[0].shape == (2, 5, 5, 4)


def test_dense_and_depthwise_fuse():
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 6, 6, 3], name="x")
        y = B.apply_op("DepthwiseConv2dNative", [x, B.constant(_rand(3, 3, 3, 2))], {
            "strides": [1, 1, 1, 1], "padding": "SAME"}, name="dw").outputs[0]
        y = B.multiply(y, B.constant(_rand(6)), name="dw_scale")
        y = B.add(y, B.constant(_rand(6)), name="dw_shift")
        y = B.apply_op("Relu6", [y], name="dw_act").outputs[0]
        y = B.reduce_mean(y, [1, 2], name="gap")
        y = B.matmul(y, B.constant(_rand(6, 5)), name="dense")
        y = B.apply_op("BiasAdd", [y, B.constant(_rand(5))], name="dense_bias").outputs[0]
        y = B.tanh(y, name="dense_act")
    gd = g.as_graph_def()
    res = optimize_for_signature(gd, ["dense_act:0"], ["x:0"])
    ops = _ops(res.graph_def)
    assert ops["dw_act"] == "_FusedDepthwiseConv2dNative"
    assert ops["dense_act"] == "_FusedMatMul"
    x = _rand(2, 6, 6, 3)
    np.testing.assert_allclose(_run(res.graph_def, ["dense_act:0"], {"x:0": x})[0],
                               _run(gd, ["dense_act:0"], {"x:0": x})[0], rtol=1e-5, atol=1e-5)


def test_stateful_nodes_keep_their_order_and_targets_run():
    # v += x*2 + 1 each step, then read after the update (a control edge): the constant
    # arithmetic may fold, the update and its order may not
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [3], name="x")
        v = B.variable(np.zeros(3, np.float32), name="v")
        init = B.global_variables_initializer()
        upd = v.assign_add(B.add(B.multiply(x, B.constant(2.0)), B.constant(1.0)),
                           name="upd")
        with B.control_dependencies([upd]):
            B.identity(v.read_value(), name="out")
    gd = g.as_graph_def()
    step = optimize_for_signature(gd, ["out:0"], ["x:0"])
    setup = optimize_for_signature(gd, [], [], [init.name])
    assert not step.warnings and not setup.warnings
    ops = _ops(step.graph_def)
    assert "upd" in ops and init.name not in ops
    x = np.array([1, 2, 3], np.float32)
    # one Session's state seen through the plans of two optimized graphs, as a Session
    # running one optimized graph per signature does
    with Session(setup.graph_def, threads=1, optimize=False) as s0, \
            Session(step.graph_def, threads=1, optimize=False) as s1:
        s1.resources = s0.resources
        s0.run([], targets=[init.name])
        got = [s1.run(["out:0"], {"x:0": x})[0].tolist() for _ in range(3)]
    assert got == [[3, 5, 7], [6, 10, 14], [9, 15, 21]]


def test_elementwise_chains_are_opt_in_and_keep_fetched_nodes():
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [2, 3, 4], name="x")
        a = B.add(x, B.constant(np.float32(3)), name="plus3")
        r = B.apply_op("Relu6", [a], name="relu6").outputs[0]
        h = B.multiply(x, B.divide(r, B.constant(np.float32(6)), name="div6"), name="hswish")
        B.tanh(B.multiply(h, h, name="sq"), name="out")
    gd = g.as_graph_def()
    feed = {"x:0": _rand(2, 3, 4, scale=4.0)}
    assert "_DfgElementwiseChain" not in [
        n.op for n in optimize_for_signature(gd, ["out:0"], ["x:0"]).graph_def.node]
    res = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise=True)
    ops = _ops(res.graph_def)
    # hswish is read twice (by sq): it ends a chain of its own; sq + out form another
    assert ops["hswish"] == ops["out"] == "_DfgElementwiseChain"
    assert sorted(ops.values()).count("_DfgElementwiseChain") == 2
    xv = feed["x:0"].astype(np.float64)
    h = xv * np.clip(xv + 3, 0, 6) / 6
    got, = _run(res.graph_def, ["out:0"], feed)
    np.testing.assert_allclose(got, np.tanh(h * h), rtol=1e-6, atol=1e-6)
    # fetching the Relu6 keeps it: the chain stops there
    res = optimize_for_signature(gd, ["out:0", "relu6:0"], ["x:0"], elementwise=True)
    ops = _ops(res.graph_def)
    assert ops["relu6"] == "_DfgElementwiseChain" and "plus3" not in ops
    for got, want in zip(_run(res.graph_def, ["out:0", "relu6:0"], feed),
                         _run(gd, ["out:0", "relu6:0"], feed)):
        np.testing.assert_array_equal(got, want)


def test_a_sessions_optimizer_forms_elementwise_chains_inside_loops_only():
    """``elementwise="loops"`` (what a Session asks for): the chain in the loop body is fused,
    the one after the loop is not (the Session's also not: Exp is no op of the compiled
    sweep); the values are those of the graph as written."""
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [4, 8], name="x")

        def body(i, h):
            gate = B.sigmoid(B.add(h, x, name="pre"), name="gate")
            return i + 1, B.multiply(gate, B.tanh(h, name="th"), name="cell")

        _, h = B.while_loop(lambda i, h: i < 5, body, [B.constant(0), x], name="loop")
        B.exp(B.multiply(h, h, name="sq"), name="out")
    gd = g.as_graph_def()
    res = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise="loops")
    chains = [n.name for n in res.graph_def.node if n.op == "_DfgElementwiseChain"]
    assert chains and all(n.startswith("loop/") for n in chains)
    assert _ops(res.graph_def)["out"] == "Exp"
    feed = {"x:0": _rand(4, 8)}
    got, = _run(res.graph_def, ["out:0"], feed)
    want, = _run(gd, ["out:0"], feed)
    np.testing.assert_array_equal(got, want)
    # a Session forms the same chains (the mode pinned: CI also runs DFG_OPTIMIZE=0)
    with Session(gd, threads=1, optimize="eager") as s:
        np.testing.assert_array_equal(s.run(["out:0"], feed)[0], want)
        plan = s.plan(["out:0"], ["x:0"])
        assert plan.optimized is not None       # it did optimize
        chained = [it.name for it in plan.items if it.op == "_DfgElementwiseChain"]
        assert chained and all(n.startswith("loop/") for n in chained)


def _batch_norm_relu(dtype: str, last: str = "Relu") -> tuple:
    """x * scale + offset, then ``last`` (a DenseNet's or ResNetV2's batch norm before a
    convolution), its graph and a feed."""
    with B.Graph().as_default() as g:
        x = B.placeholder(dtype, [2, 4, 4, 24], name="x")
        scale = B.constant(_rand(24).astype(dtype), name="scale")
        offset = B.constant(_rand(24).astype(dtype), name="offset")
        y = B.add(B.multiply(x, scale, name="bn_mul"), offset, name="bn_add")
        B.apply_op(last, [y], {}, name="out")
    return g.as_graph_def(), {"x:0": _rand(2, 4, 4, 24).astype(dtype)}


@pytest.mark.parametrize("last", ["Relu", "Relu6", "Sigmoid"])
def test_a_session_chains_float32_sweeps_outside_loops(last):
    """Outside loops a Session chains float32 ops the compiled sweep computes whole (a batch
    norm's Mul and AddV2 and the activation: one pass and one call for three), with the
    values of the graph as written, bit for bit; with ``sweep_ops`` empty (what
    ``optimize_for_signature`` defaults to) nothing is chained outside loops."""
    from dfg.executor.kernels.fused import NATIVE_CHAIN_OPS

    gd, feed = _batch_norm_relu("float32", last)
    plain = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise="loops")
    assert _ops(plain.graph_def)["out"] == last
    res = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise="loops",
                                 sweep_ops=frozenset(NATIVE_CHAIN_OPS))
    ops = _ops(res.graph_def)
    assert ops["out"] == "_DfgElementwiseChain" and "bn_mul" not in ops and "bn_add" not in ops
    want, = _run(gd, ["out:0"], feed)
    got, = _run(res.graph_def, ["out:0"], feed)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    from dfg.executor.kernels import _native
    if _native.enabled():       # the Session asks for the sweep's ops where it runs
        with Session(gd, threads=1, optimize="eager") as s:
            assert s.run(["out:0"], feed)[0].tobytes() == want.tobytes()
            assert [it.op for it in s.plan(["out:0"], ["x:0"]).items
                    if it.name == "out"] == ["_DfgElementwiseChain"]


def test_a_session_leaves_other_chains_outside_loops_alone():
    """float64 (the sweep is float32) and an op the sweep lacks (Exp) stay as written."""
    from dfg.executor.kernels.fused import NATIVE_CHAIN_OPS

    sweep = frozenset(NATIVE_CHAIN_OPS)
    gd, _feed = _batch_norm_relu("float64")
    res = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise="loops", sweep_ops=sweep)
    assert _ops(res.graph_def)["out"] == "Relu" and "bn_mul" in _ops(res.graph_def)
    gd, _feed = _batch_norm_relu("float32", "Exp")
    res = optimize_for_signature(gd, ["out:0"], ["x:0"], elementwise="loops", sweep_ops=sweep)
    ops = _ops(res.graph_def)
    # the Mul and AddV2 before it chain; the Exp stays its own node
    assert ops["out"] == "Exp" and ops["bn_add"] == "_DfgElementwiseChain"


def test_a_chain_in_a_loop_of_scalar_arithmetic_keeps_its_inline_scalar_form():
    """A Session chains a scalar loop's arithmetic too; compiled programs then write the
    chain as its members' own scalar forms composed (no kernel call per iteration), and the
    values are the graph's as written, bit for bit (the reference interpreter's)."""
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [], name="x")

        def body(i, acc):
            step = B.cast(i, "float32", name="fi")
            return i + 1, B.add(B.multiply(acc, x, name="decay"), step, name="acc_next")

        _, acc = B.while_loop(lambda i, acc: i < 300, body, [B.constant(0), x], name="loop")
        B.identity(acc, name="out")
    gd = g.as_graph_def()
    feed = {"x:0": np.float32(0.75)}
    want = Reference(gd).run(["out:0"], feed)[0]
    with Session(gd, threads=1, optimize="auto", programs="always") as s:
        for _ in range(2):      # the second run is the compiled program's
            got = s.run(["out:0"], feed)[0]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        chain = next(it for it in s.plan(["out:0"], ["x:0"]).items
                     if it.op == "_DfgElementwiseChain")
    assert codegen.scalar_form(chain) == "({0} * {1}) + {2}"


def test_deterministic_and_reports():
    gd, out = _conv_graph("Relu")
    a = optimize_for_signature(gd, [out], ["x:0"])
    b = optimize_for_signature(gd, [out], ["x:0"])
    assert a.graph_def.SerializeToString(deterministic=True) == \
        b.graph_def.SerializeToString(deterministic=True)
    assert a.nodes_before == len(gd.node) and a.nodes_after == 4
    assert "fuse_conv_bias_act" in a.summary() and a.seconds > 0
    assert not a.warnings


def test_fusion_passes_are_opt_in_for_dfg_optimize():
    assert not PASSES["fuse_conv_bias_act"].default
    assert not PASSES["fuse_matmul_bias_act"].default
    assert not PASSES["fuse_elementwise"].default


# --- real graphs: TensorFlow's outputs ------------------------------------------------------

def _case_run(d: Path, graph) -> tuple[list, dict]:
    case = json.loads((d / "case.json").read_text())
    step = case["steps"][0]
    feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
    return _run(graph, step["fetch"], feed), case


@pytest.mark.parametrize("d", ZOO + BENCH, ids=lambda d: d.name)
def test_optimized_graph_gives_tensorflows_outputs(d: Path):
    g = load_graph(d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt")
    case = json.loads((d / "case.json").read_text())
    step = case["steps"][0]
    feeds = [k if ":" in k else f"{k}:0" for k in step["feed"]]
    # elementwise chains (opt-in) are checked on the models that have them
    res = optimize_for_signature(g, step["fetch"], feeds, elementwise=d.name in (
        "mobilenet_v3_small", "densenet121", "convnext_tiny", "resnet50_v2"))
    assert not res.warnings, res.warnings
    out, _ = _case_run(d, res.graph_def)
    base, _ = _case_run(d, g)
    rtol, atol = case.get("rtol", 1e-4), case.get("atol", 1e-4)
    for name, got, ref in zip(step["fetch"], out, base):
        expected = np.load(d / step["expect"][name], allow_pickle=False)
        assert_close(got, expected, rtol, atol, f"{d.name} {name} vs TensorFlow")
        assert_close(got, np.asarray(ref), rtol, atol, f"{d.name} {name} vs unoptimized")
    if d.name in ("resnet50", "vgg16", "mobilenet_v2"):
        ops = [n.op for n in res.graph_def.node]
        assert "Conv2D" not in ops and "BiasAdd" not in ops, sorted(set(ops))


def _lstm_loop(extra_reader: bool = False):
    """A while loop of an LSTM cell as Keras writes it: z = BiasAdd(AddV2(x W, h U), b),
    Split(z, 4) on axis 1, the gates' arithmetic. ``extra_reader``: the candidate gate is
    also summed outside the chains (the Split must then stay)."""
    rng = np.random.default_rng(11)
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [3, 5], name="x")
        w = B.constant(rng.standard_normal((5, 16)).astype(np.float32) * 0.5, name="w")
        u = B.constant(rng.standard_normal((4, 16)).astype(np.float32) * 0.5, name="u")
        b = B.constant(rng.standard_normal(16).astype(np.float32), name="b")

        def body(i, h, c, acc):
            z = B.apply_op("AddV2", [B.matmul(x, w), B.matmul(h, u)]).outputs[0]
            z = B.apply_op("BiasAdd", [z, b], name="bias").outputs[0]
            gi, gf, gg, go = B.apply_op("Split", [B.constant(np.int32(1)), z],
                                        {"num_split": 4}, name="split").outputs
            c2 = B.add(B.multiply(B.sigmoid(gf), c), B.multiply(B.sigmoid(gi), B.tanh(gg)))
            h2 = B.multiply(B.sigmoid(go), B.tanh(c2), name="h_next")
            extra = B.reduce_sum(gg, [0, 1]) if extra_reader else B.constant(0.0)
            return i + 1, h2, c2, acc + extra

        zeros = B.constant(np.zeros((3, 4), np.float32))
        _, h, c, acc = B.while_loop(lambda i, *_: i < 6, body,
                                    [B.constant(0), zeros, zeros, B.constant(0.0)],
                                    name="loop")
        B.identity(h, name="h")
        B.identity(c, name="c")
        B.identity(acc, name="acc")
    return g.as_graph_def()


@pytest.mark.parametrize("extra_reader", [False, True])
def test_a_cells_split_and_bias_add_join_its_gate_chains(extra_reader):
    """The optimizer moves a recurrent cell's Split into the gates' chains, with the BiasAdd
    and AddV2 before it (each chain computes its blocks of them: no work is done twice), and
    the output's chain, which reads the new state's chain and otherwise only its inputs,
    becomes that chain's second output: the loop body is one chain of two outputs and the
    products; the values are the graph's as written, bit for bit (the reference
    interpreter's), in every mode. A Split whose piece something else also reads stays, the
    output's chain then reads a piece the state's does not and stays a chain of its own, and
    the values do not change."""
    gd = _lstm_loop(extra_reader)
    fetches = ["h:0", "c:0", "acc:0"]
    feed = {"x:0": _rand(3, 5)}
    want = Reference(gd).run(fetches, feed)
    for programs in ("always", "never"):
        with Session(gd, threads=1, optimize="auto", programs=programs) as s:
            for _ in range(2):
                got = s.run(fetches, feed)
                for a, w in zip(got, want):
                    assert a.dtype == w.dtype and a.tobytes() == w.tobytes(), programs
            ops = [it.op for it in s.plan(fetches, ["x:0"]).items if it.name.startswith("loop/")]
            chain_items = [it for it in s.plan(fetches, ["x:0"]).items
                           if it.op == "_DfgElementwiseChain"]
    chains = [it.attrs["program"] for it in chain_items]
    pieces = [any(e.startswith("Piece") for e in p) for p in chains]
    if extra_reader:    # the Split stays; the adds before it are a chain of their own
        assert "Split" in ops and not any(pieces) and len(chains) == 3
        assert all(not it.attrs.get("outputs") for it in chain_items)
    else:               # the loop's arithmetic: two products, one chain of two outputs
        assert len(chains) == 1 and all(pieces)
        program, outputs = chains[0], list(chain_items[0].attrs["outputs"])
        assert outputs[-1] == len(program) - 1 and len(outputs) == 2
        assert chain_items[0].attrs["M"] == 2
        assert program[outputs[0]].startswith("AddV2")     # c' = f c + i g
        assert not {"Split", "BiasAdd", "Sigmoid", "Tanh"} & set(ops)
        assert ops.count("MatMul") == 2


@pytest.mark.parametrize("native", ["on", "0"])
def test_chain_cuts_equal_strided_slice_and_the_ops(native, monkeypatch):
    """``Cut`` entries (a StridedSlice ``[:, start:stop]`` moved into a chain) give the bits
    of StridedSlice and the ops one by one: open and negative ends, a cut past the end, an
    empty cut, leaves that broadcast; and StridedSlice's errors."""
    if native == "0":
        monkeypatch.setenv("DFG_NATIVE", "0")
    else:
        monkeypatch.delenv("DFG_NATIVE", raising=False)
    rng = np.random.default_rng(5)
    m = (rng.standard_normal((4, 15)) * 2).astype(np.float32)
    b = rng.standard_normal(15).astype(np.float32)
    i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
    for start, stop in ((None, 5), (5, 10), (10, None), (-5, None), (3, 40), (9, 2)):
        prog = [f"Cut i0 1 {'_' if start is None else start} {'_' if stop is None else stop} 2 0",
                f"Cut i1 1 {'_' if start is None else start} {'_' if stop is None else stop} 2 0",
                "AddV2 r0 r1", "Sigmoid r2"]
        for leaves in ((m, b), (m, m[:1]), (m[:, :1] * 1, b)):
            got = invoke("_DfgElementwiseChain", *leaves, attrs={"program": prog, "N": 2})
            z = invoke("AddV2", *leaves)
            bm, em = (1 | (2 if start is None else 0)), (1 | (2 if stop is None else 0))
            sliced = invoke("StridedSlice", z, i32(0, start or 0), i32(0, stop or 0),
                            i32(1, 1), attrs={"begin_mask": bm, "end_mask": em})
            want = invoke("Sigmoid", sliced)
            assert got.shape == want.shape, (start, stop, got.shape, want.shape)
            np.testing.assert_array_equal(got, want, err_msg=f"{start}:{stop}")
    with pytest.raises(InvalidArgumentError, match="Index out of range"):
        invoke("_DfgElementwiseChain", b, attrs={"program": ["Cut i0 1 _ 5 2 0", "Neg r0"],
                                                 "N": 1})


def _gru_loop():
    """A while loop of a Keras GRU cell (reset_after): the input product split in three, the
    recurrent product plus its bias sliced [:, :u], [:, u:2u], [:, 2u:]."""
    rng = np.random.default_rng(13)
    u = 4
    with B.Graph().as_default() as g:
        x = B.placeholder("float32", [3, 5], name="x")
        w = B.constant(rng.standard_normal((5, 3 * u)).astype(np.float32), name="w")
        rw = B.constant(rng.standard_normal((u, 3 * u)).astype(np.float32), name="rw")
        b0 = B.constant(rng.standard_normal(3 * u).astype(np.float32), name="b0")
        b1 = B.constant(rng.standard_normal(3 * u).astype(np.float32), name="b1")

        def cut(t, lo, hi):
            return B.apply_op("StridedSlice", [
                t, B.constant(np.array([0, lo or 0], np.int32)),
                B.constant(np.array([0, hi or 0], np.int32)),
                B.constant(np.array([1, 1], np.int32))],
                {"begin_mask": 1 | (2 if lo is None else 0),
                 "end_mask": 1 | (2 if hi is None else 0)}).outputs[0]

        def body(i, h):
            mx = B.apply_op("BiasAdd", [B.matmul(x, w), b0]).outputs[0]
            xz, xr, xh = B.apply_op("Split", [B.constant(np.int32(-1)), mx],
                                    {"num_split": 3}).outputs
            inner = B.add(B.matmul(h, rw), b1)
            rz, rr, rh = cut(inner, None, u), cut(inner, u, 2 * u), cut(inner, 2 * u, None)
            z = B.sigmoid(B.add(xz, rz))
            r = B.sigmoid(B.add(xr, rr))
            hh = B.tanh(B.add(xh, B.multiply(r, rh)))
            one = B.constant(np.float32(1.0))
            return i + 1, B.add(B.multiply(z, h), B.multiply(B.subtract(one, z), hh))

        _, h = B.while_loop(lambda i, h: i < 6, body,
                            [B.constant(0), B.constant(np.zeros((3, u), np.float32))],
                            name="loop")
        B.identity(h, name="h")
    return g.as_graph_def()


def _gru_math(gd, x: np.ndarray) -> np.ndarray:
    """``_gru_loop``'s cell in float64 NumPy, its constants read from the graph."""
    from dfg.graphdef.tensors import to_numpy

    c = {n.name: to_numpy(n.attr["value"].tensor).astype(np.float64) for n in gd.node
         if n.name in ("w", "rw", "b0", "b1")}
    u = c["rw"].shape[0]
    h = np.zeros((3, u))
    mx = x.astype(np.float64) @ c["w"] + c["b0"]
    for _ in range(6):
        inner = h @ c["rw"] + c["b1"]
        z = 1 / (1 + np.exp(-(mx[:, :u] + inner[:, :u])))
        r = 1 / (1 + np.exp(-(mx[:, u:2 * u] + inner[:, u:2 * u])))
        hh = np.tanh(mx[:, 2 * u:] + r * inner[:, 2 * u:])
        h = z * h + (1 - z) * hh
    return h


def test_a_gru_cells_slices_and_its_update_gate_join_one_chain():
    """A GRU cell's StridedSlices of its recurrent product (and the bias add before them)
    move into the gates' chain as Cut entries, and the update gate ``z``, read by ``z * h``
    and ``1 - z``, joins the chain that reads it twice (a value all of whose readers are in
    a loop's chain): the loop body is the products and one chain, the GRU's values (float64
    math), with the reference interpreter's bits in every mode."""
    gd = _gru_loop()
    feed = {"x:0": _rand(3, 5)}
    want = Reference(gd).run(["h:0"], feed)[0]
    np.testing.assert_allclose(want, _gru_math(gd, feed["x:0"]), rtol=1e-5, atol=1e-6)
    for programs in ("always", "never"):
        with Session(gd, threads=1, optimize="auto", programs=programs) as s:
            for _ in range(2):
                got = s.run(["h:0"], feed)[0]
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), programs
            items = s.plan(["h:0"], ["x:0"]).items
    ops = [it.op for it in items if it.name.startswith("loop/")]
    programs = [it.attrs["program"] for it in items if it.op == "_DfgElementwiseChain"]
    assert not {"StridedSlice", "Split", "BiasAdd", "Sigmoid", "Tanh"} & set(ops), ops
    assert len(programs) == 1 and any("Cut" in e for e in programs[0])
    assert sum(e.startswith("Sigmoid") for e in programs[0]) == 2   # z and r, each once


def test_a_value_read_outside_the_chain_stays_its_own_chain():
    """``z`` read by two of a chain's ops joins it only when nothing else reads it: here the
    loop also carries ``z`` out (a NextIteration), so ``z`` keeps its own chain and both
    chains give the reference interpreter's bits."""
    rng = np.random.default_rng(5)
    with B.Graph().as_default() as g:
        a = B.constant(rng.standard_normal((2, 3)).astype(np.float32), name="a")

        def body(i, h, zs):
            z = B.sigmoid(B.add(B.multiply(a, h), a))
            one = B.constant(np.float32(1.0))
            return i + 1, B.add(B.multiply(z, h), B.subtract(one, z)), z

        zero = B.constant(np.zeros((2, 3), np.float32))
        _, h, zs = B.while_loop(lambda i, h, zs: i < 4, body, [B.constant(0), zero, zero],
                                name="loop")
        B.identity(h, name="h")
        B.identity(zs, name="zs")
    gd = g.as_graph_def()
    want = Reference(gd).run(["h:0", "zs:0"], {})
    with Session(gd, threads=1, optimize="eager") as s:
        got = s.run(["h:0", "zs:0"])
        chains = [it for it in s.plan(["h:0", "zs:0"], []).items
                  if it.op == "_DfgElementwiseChain"]
    for w, v in zip(want, got):
        assert v.tobytes() == w.tobytes()
    assert len(chains) == 2
