"""Gradient kernels that ``tf.gradients`` emits: broadcast reduction indices, activation and
unary-math gradients, BiasAddGrad, pooling gradients (2-D and 3-D, and max pooling's second
derivatives MaxPoolGradGrad / MaxPool3DGradGrad) and FusedBatchNormGrad.

Formulas follow TensorFlow's CPU kernels operation by operation (same association order,
same zero-gradient special cases), so float results agree to the last bit where numpy's
elementwise arithmetic is exact, and within rounding where TensorFlow reduces in another
order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

from ._select import where
from .registry import KernelContext, kernel

# --- helpers -------------------------------------------------------------------------------


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _same_shape(ctx: KernelContext, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise InvalidArgumentError(
            f"Inputs to operation {ctx.node} of type {ctx.op} must have the same size and "
            f"shape.  Input 0: {_fmt(a.shape)} != input 1: {_fmt(b.shape)}")


def _t(x: np.ndarray, v: float) -> Any:
    """``v`` as a scalar of x's dtype, so numpy keeps x's precision (as static_cast<T>)."""
    return x.dtype.type(v)


def _conj(x: np.ndarray) -> np.ndarray:
    return np.conj(x) if np.iscomplexobj(x) else x


def _no_nan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TensorFlow's mul_no_nan: a * b, but exactly 0 wherever b == 0 (even if a is inf/nan)."""
    return where(b == 0, np.zeros((), a.dtype), a * b)


# --- BroadcastGradientArgs ----------------------------------------------------------------


def broadcast_reduction_indices(s0: list[int], s1: list[int]) -> tuple[list[int], list[int]]:
    """The axes over which each input's gradient must be summed for ``s0 op s1``.

    Identical shapes need no reduction. Otherwise both shapes are aligned at the right and
    left-padded with 1s; an input is reduced over every axis where its (padded) size is 1,
    including axes where both are 1. Raises InvalidArgumentError for incompatible shapes.
    """
    if list(s0) == list(s1):
        return [], []
    rank = max(len(s0), len(s1))
    p0 = [1] * (rank - len(s0)) + list(s0)
    p1 = [1] * (rank - len(s1)) + list(s1)
    r0: list[int] = []
    r1: list[int] = []
    for axis, (a, b) in enumerate(zip(p0, p1)):
        if a != 1 and b != 1 and a != b:
            raise InvalidArgumentError(
                f"Incompatible shapes: [{','.join(map(str, s0))}] vs. "
                f"[{','.join(map(str, s1))}]")
        if a == 1:
            r0.append(axis)
        if b == 1:
            r1.append(axis)
    return r0, r1


@kernel("BroadcastGradientArgs", cheap=True)
def broadcast_gradient_args(ctx: KernelContext, s0: np.ndarray, s1: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]:
    for i, s in enumerate((s0, s1)):
        if s.ndim != 1:
            raise InvalidArgumentError(f"In[{i}] must be a vector.{_fmt(s.shape)}")
    r0, r1 = broadcast_reduction_indices([int(d) for d in s0], [int(d) for d in s1])
    return np.array(r0, dtype=s0.dtype), np.array(r1, dtype=s1.dtype)


# --- activation gradients: (gradients, features/outputs) -----------------------------------


def _check_grad_pair(g: np.ndarray, a: np.ndarray) -> None:
    if g.shape != a.shape:
        raise InvalidArgumentError(
            f"g and a must be the same size: gradients {_fmt(g.shape)} vs. features "
            f"{_fmt(a.shape)}")


@kernel("ReluGrad")
def relu_grad(ctx: KernelContext, gradients: np.ndarray, features: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, features)
    # A multiply, not a select: inf/nan gradients at inactive units give nan, as in TF.
    with np.errstate(invalid="ignore"):
        return gradients * (features > 0).astype(gradients.dtype)


@kernel("Relu6Grad")
def relu6_grad(ctx: KernelContext, gradients: np.ndarray, features: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, features)
    active = (features > 0) & (features < _t(features, 6))
    with np.errstate(invalid="ignore"):
        return gradients * active.astype(gradients.dtype)


@kernel("LeakyReluGrad")
def leaky_relu_grad(ctx: KernelContext, gradients: np.ndarray,
                    features: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, features)
    alpha = _t(gradients, ctx.attrs.get("alpha", 0.2))
    return where(features > 0, gradients, gradients * alpha)


@kernel("EluGrad")
def elu_grad(ctx: KernelContext, gradients: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, outputs)
    return where(outputs < 0, (outputs + _t(outputs, 1)) * gradients, gradients)


_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


@kernel("SeluGrad")
def selu_grad(ctx: KernelContext, gradients: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, outputs)
    return where(outputs < 0, gradients * (outputs + _t(outputs, _SELU_SCALE_ALPHA)),
                    gradients * _t(gradients, _SELU_SCALE))


@kernel("SoftplusGrad")
def softplus_grad(ctx: KernelContext, gradients: np.ndarray,
                  features: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, features)
    with np.errstate(over="ignore"):
        return gradients / (np.exp(-features) + _t(features, 1))


@kernel("SoftsignGrad")
def softsign_grad(ctx: KernelContext, gradients: np.ndarray,
                  features: np.ndarray) -> np.ndarray:
    _check_grad_pair(gradients, features)
    return gradients / np.square(np.abs(features) + _t(features, 1))


# --- unary math gradients: (y, dy) with y the forward output -------------------------------


@kernel("TanhGrad")
def tanh_grad(ctx: KernelContext, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    _same_shape(ctx, y, dy)
    return dy * (_t(y, 1) - y * y)


@kernel("SigmoidGrad")
def sigmoid_grad(ctx: KernelContext, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    _same_shape(ctx, y, dy)
    return dy * (y * (_t(y, 1) - y))


@kernel("SqrtGrad")
def sqrt_grad(ctx: KernelContext, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    _same_shape(ctx, y, dy)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _no_nan(_t(y, 0.5) / _conj(y), dy)


@kernel("RsqrtGrad")
def rsqrt_grad(ctx: KernelContext, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    _same_shape(ctx, y, dy)
    yc = _conj(y)
    with np.errstate(over="ignore", invalid="ignore"):
        return _no_nan(_t(y, -0.5) * (yc * yc), _no_nan(yc, dy))


@kernel("ReciprocalGrad", "InvGrad")
def reciprocal_grad(ctx: KernelContext, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    _same_shape(ctx, y, dy)
    yc = _conj(y)
    with np.errstate(over="ignore", invalid="ignore"):
        return _no_nan(-(yc * yc), dy)


# --- BiasAddGrad ---------------------------------------------------------------------------


def _sum_keep_dtype(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    """Sum like TF: float16 accumulates in float32, other types in their own type."""
    if x.dtype == np.float16:
        return np.sum(x, axis=axis, dtype=np.float32).astype(np.float16)
    return np.sum(x, axis=axis, dtype=x.dtype)


@kernel("BiasAddGrad")
def bias_add_grad(ctx: KernelContext, out_backprop: np.ndarray) -> np.ndarray:
    if out_backprop.ndim < 2:
        raise InvalidArgumentError(
            f"Input tensor must be at least 2D: {_fmt(out_backprop.shape)}")
    channel = 1 if ctx.attrs.get("data_format", "NHWC") == "NCHW" else out_backprop.ndim - 1
    axes = tuple(a for a in range(out_backprop.ndim) if a != channel)
    return _sum_keep_dtype(out_backprop, axes)


# --- pooling gradients ---------------------------------------------------------------------


def _to_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return np.transpose(x, (0, 2, 3, 1)) if data_format == "NCHW" else x


def _from_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return np.transpose(x, (0, 3, 1, 2)) if data_format == "NCHW" else x


def _spatial(v: list[int], data_format: str, what: str) -> tuple[int, int]:
    if len(v) != 4:
        raise InvalidArgumentError(f"Sliding window {what} field must specify 4 dimensions")
    if data_format == "NCHW":
        n, c, h, w = v
    else:
        n, h, w, c = v
    if n != 1 or c != 1:
        raise UnimplementedError(
            "Pooling is not yet supported on the batch or depth dimension in gradients; "
            f"{what} is {list(v)}")
    return int(h), int(w)


def _out_size_and_pad(size: int, window: int, stride: int, padding: str,
                      explicit: tuple[int, int]) -> tuple[int, int]:
    """Output size and padding before, as TensorFlow's windowed-output rule computes them."""
    if stride <= 0:
        raise InvalidArgumentError(f"Stride must be > 0, but got {stride}")
    if padding == "VALID":
        out, before = (size - window + stride) // stride, 0
    elif padding == "SAME":
        out = (size + stride - 1) // stride
        before = max((out - 1) * stride + window - size, 0) // 2
    else:  # EXPLICIT
        before = explicit[0]
        out = (size + explicit[0] + explicit[1] - window + stride) // stride
    if out < 0:
        raise InvalidArgumentError(
            f"Computed output size would be negative: {out} [input_size: {size}, "
            f"effective_filter_size: {window}, stride: {stride}]")
    return out, before


def _window_index(out: int, window: int, stride: int, before: int, size: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(out, window) input positions of every window, and which of them are inside."""
    pos = np.arange(out)[:, None] * stride - before + np.arange(window)[None, :]
    valid = (pos >= 0) & (pos < size)
    return np.clip(pos, 0, max(size - 1, 0)), valid


def _pool_geometry(ctx: KernelContext, in_shape: tuple[int, ...], ksize: list[int],
                   strides: list[int]) -> dict[str, Any]:
    a = ctx.attrs
    fmt = a.get("data_format", "NHWC")
    kh, kw = _spatial(ksize, fmt, "ksize")
    sh, sw = _spatial(strides, fmt, "stride")
    padding = a["padding"]
    ex = list(a.get("explicit_paddings") or [])
    if padding == "EXPLICIT":
        if len(ex) != 8:
            raise InvalidArgumentError(
                f"explicit_paddings attribute must contain 8 values, got {len(ex)}")
        if fmt == "NCHW":
            ph, pw = (ex[4], ex[5]), (ex[6], ex[7])
        else:
            ph, pw = (ex[2], ex[3]), (ex[4], ex[5])
    else:
        ph = pw = (0, 0)
    _, h, w, _ = in_shape
    oh, top = _out_size_and_pad(h, kh, sh, padding, ph)
    ow, left = _out_size_and_pad(w, kw, sw, padding, pw)
    rows, rvalid = _window_index(oh, kh, sh, top, h)
    cols, cvalid = _window_index(ow, kw, sw, left, w)
    return dict(fmt=fmt, oh=oh, ow=ow, rows=rows, rvalid=rvalid, cols=cols, cvalid=cvalid)


def _check_grad_shape(grad: np.ndarray, want: tuple[int, ...]) -> None:
    if grad.shape != want:
        raise InvalidArgumentError(
            f"Expected grad shape to be {_fmt(want)}, but got {_fmt(grad.shape)}")


@kernel("MaxPoolGrad")
def max_pool_grad(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                  grad: np.ndarray) -> np.ndarray:
    return _max_pool_grad(ctx, orig_input, orig_output, grad, list(ctx.attrs["ksize"]),
                          list(ctx.attrs["strides"]))


@kernel("MaxPoolGradV2")
def max_pool_grad_v2(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                     grad: np.ndarray, ksize: np.ndarray, strides: np.ndarray) -> np.ndarray:
    return _max_pool_grad(ctx, orig_input, orig_output, grad, [int(k) for k in ksize.ravel()],
                          [int(k) for k in strides.ravel()])


def _max_pool_grad(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                   grad: np.ndarray, ksize: list[int], strides: list[int]) -> np.ndarray:
    fmt = ctx.attrs.get("data_format", "NHWC")
    for name, t in (("orig_input", orig_input), ("orig_output", orig_output),
                    ("grad", grad)):
        if t.ndim != 4:
            raise InvalidArgumentError(f"{name} must be 4-dimensional, got {_fmt(t.shape)}")
    x = _to_nhwc(orig_input, fmt)
    g = _to_nhwc(grad, fmt)
    geo = _pool_geometry(ctx, x.shape, ksize, strides)
    n, h, w, c = x.shape
    oh, ow = geo["oh"], geo["ow"]
    _check_grad_shape(g, (n, oh, ow, c))
    # Find each window's arg max the way TF's CPU kernel does: scan the window row-major and
    # take a later element only when it is strictly greater (ties keep the first; a NaN first
    # element stays). Padding positions never take part. orig_output is not consulted.
    best = np.zeros((n, oh, ow, c), x.dtype)
    arg = np.full((n, oh, ow, c), -1, np.int64)
    for a in range(geo["rows"].shape[1]):
        r, rv = geo["rows"][:, a], geo["rvalid"][:, a]
        for b in range(geo["cols"].shape[1]):
            col, cv = geo["cols"][:, b], geo["cvalid"][:, b]
            valid = (rv[:, None] & cv[None, :])[None, :, :, None]
            v = x[:, r][:, :, col]  # (n, oh, ow, c)
            take = valid & ((arg < 0) | (best < v))
            best = where(take, v, best)
            flat = (r[:, None] * w + col[None, :])[None, :, :, None]
            arg = where(take, flat, arg)
    out = np.zeros((n, h * w, c), x.dtype)
    ni, _, _, ci = np.indices(arg.shape, sparse=True)
    ok = arg >= 0
    # Accumulate in output order (batch, row, col, channel), the order TF adds in.
    np.add.at(out, (np.broadcast_to(ni, arg.shape)[ok], arg[ok],
                    np.broadcast_to(ci, arg.shape)[ok]), g[ok])
    return _from_nhwc(out.reshape(n, h, w, c), fmt)


@kernel("AvgPoolGrad")
def avg_pool_grad(ctx: KernelContext, orig_input_shape: np.ndarray,
                  grad: np.ndarray) -> np.ndarray:
    fmt = ctx.attrs.get("data_format", "NHWC")
    if orig_input_shape.ndim != 1 or orig_input_shape.size != 4:
        raise InvalidArgumentError(
            "orig_input_shape must be 1-dimensional and 4 elements, got shape "
            f"{_fmt(orig_input_shape.shape)}")
    if grad.ndim != 4:
        raise InvalidArgumentError(f"out_backprop must be 4-dimensional, got {_fmt(grad.shape)}")
    shape = tuple(int(d) for d in orig_input_shape)
    if fmt == "NCHW":
        shape = (shape[0], shape[2], shape[3], shape[1])
    g = _to_nhwc(grad, fmt)
    geo = _pool_geometry(ctx, shape, list(ctx.attrs["ksize"]), list(ctx.attrs["strides"]))
    n, h, w, c = shape
    oh, ow = geo["oh"], geo["ow"]
    _check_grad_shape(g, (n, oh, ow, c))
    rows, rvalid, cols, cvalid = geo["rows"], geo["rvalid"], geo["cols"], geo["cvalid"]
    # Each output spreads grad * (1 / number of in-bounds inputs of its window) over them.
    count = rvalid.sum(1)[:, None] * cvalid.sum(1)[None, :]  # (oh, ow)
    with np.errstate(divide="ignore"):
        coeff = (1.0 / np.maximum(count, 1)).astype(g.dtype)
    contrib = g * coeff[None, :, :, None]  # (n, oh, ow, c)
    # Target input cell of every (output row, output col, window row, window col).
    flat = (rows[:, None, :, None] * w + cols[None, :, None, :])
    valid = rvalid[:, None, :, None] & cvalid[None, :, None, :]
    oi, oj, _, _ = np.nonzero(valid)  # row-major: output order, then window order, as TF
    targets = flat[valid]
    out = np.zeros((n, h * w, c), g.dtype)
    for b in range(n):
        np.add.at(out[b], targets, contrib[b, oi, oj])
    return _from_nhwc(out.reshape(n, h, w, c), fmt)


# --- 3-D pooling gradients and max-pool second derivatives --------------------------------
#
# TensorFlow's CPU kernels for these take NHWC / NDHWC only. Each window is visited tap by
# tap: ``_taps`` gives, per tap of the window, the flat spatial input position every output
# reads (and whether it is inside the input), so the loops run over the KH*KW(*KD) taps only.


def _taps(in_sizes: tuple[int, ...], ksize: list[int], strides: list[int], padding: str
          ) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """(output sizes, (K, P) flat input positions, (K, P) inside-the-input mask): K taps of
    each window in row-major order, P outputs in row-major order."""
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"padding must be SAME or VALID, found {padding!r}")
    outs, pos, ok = [], [], []
    for size, k, st in zip(in_sizes, ksize, strides):
        if k <= 0:
            raise InvalidArgumentError(f"ksize must be positive, got: {k}")
        o, before = _out_size_and_pad(size, k, st, padding, (0, 0))
        p, v = _window_index(o, k, st, before, size)          # (out, k)
        outs.append(o)
        pos.append(p.T)                                        # (k, out)
        ok.append(v.T)
    d = len(in_sizes)
    flat = np.zeros((1,) * (2 * d), np.int64)
    valid = np.ones((1,) * (2 * d), bool)
    for i in range(d):
        # axes: taps (0..d-1) then outputs (d..2d-1)
        shape = [1] * (2 * d)
        shape[i], shape[d + i] = ksize[i], outs[i]
        flat = flat * in_sizes[i] + pos[i].reshape(shape)
        valid = valid & ok[i].reshape(shape)
    k_total, p_total = int(np.prod(ksize)), int(np.prod(outs))
    full = tuple(ksize) + tuple(outs)
    return (tuple(outs), np.broadcast_to(flat, full).reshape(k_total, p_total),
            np.broadcast_to(valid, full).reshape(k_total, p_total))


def _pool_attrs(ctx: KernelContext, rank: int, ksize: list[int] | None = None,
                strides: list[int] | None = None, op: str = "") -> tuple[list[int], list[int]]:
    """Spatial ksize and strides of a channels-last pooling gradient, validated as TF."""
    fmt = ctx.attrs.get("data_format") or ("NDHWC" if rank == 5 else "NHWC")
    if fmt not in ("NHWC", "NDHWC"):
        raise InvalidArgumentError(
            f"Default {op} only supports {'NDHWC' if rank == 5 else 'NHWC'} on device type "
            "CPU")
    ks = [int(v) for v in (ksize if ksize is not None else ctx.attrs.get("ksize") or [])]
    st = [int(v) for v in (strides if strides is not None else ctx.attrs.get("strides") or [])]
    if len(ks) != rank:
        raise InvalidArgumentError(f"Sliding window ksize field must specify {rank} dimensions")
    if len(st) != rank:
        raise InvalidArgumentError(f"Sliding window strides field must specify {rank} dimensions")
    if ks[0] != 1 or st[0] != 1:
        raise UnimplementedError("Pooling is not yet supported on the batch dimension.")
    if ks[-1] != 1 or st[-1] != 1:
        raise UnimplementedError("Pooling is not yet supported on the depth dimension.")
    if min(st) <= 0:
        raise InvalidArgumentError(f"Stride must be > 0, but got {st}")
    return ks[1:-1], st[1:-1]


def _pool3d_dtype(op: str, dt: np.dtype) -> None:
    # TensorFlow registers its 3-D pooling kernels for float32 and bfloat16 only.
    if dt.name not in ("float32", "bfloat16"):
        raise InvalidArgumentError(
            f"No OpKernel was registered to support Op '{op}' with T={dt.name} on CPU: "
            "TensorFlow registers it for float32, bfloat16")


def _check_dims(rank: int, **tensors: np.ndarray) -> None:
    for name, t in tensors.items():
        if t.ndim != rank:
            raise InvalidArgumentError(f"{name} must be {rank}-dimensional")


def _expect(name: str, got: tuple[int, ...], want: tuple[int, ...]) -> None:
    if tuple(got) != tuple(want):
        raise InvalidArgumentError(
            f"Expected {name} shape to be {_fmt(want)}, but got {_fmt(got)}")


@kernel("MaxPool3DGrad")
def max_pool3d_grad(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                    grad: np.ndarray) -> np.ndarray:
    """TF's CPU kernel: every window element within 1e-5 of the window's max (from
    orig_output) receives the window's gradient (ties all do)."""
    ks, st = _pool_attrs(ctx, 5, op="MaxPooling3dGradOp")
    _pool3d_dtype("MaxPool3DGrad", grad.dtype)
    _check_dims(5, tensor_in=orig_input, tensor_out=orig_output, out_backprop=grad)
    n, c = orig_input.shape[0], orig_input.shape[4]
    outs, idx, valid = _taps(orig_input.shape[1:4], ks, st, ctx.attrs["padding"])
    _expect("orig_output", orig_output.shape, (n, *outs, c))
    _expect("grad", grad.shape, (n, *outs, c))
    dt = grad.dtype
    x = orig_input.astype(dt, copy=False).reshape(n, -1, c)
    y = orig_output.astype(dt, copy=False).reshape(n, -1, c)
    g = grad.reshape(n, -1, c)
    out = np.zeros(x.shape, dt)
    eps = dt.type(1e-5)
    for k in range(idx.shape[0]):
        v = valid[k]
        if not v.any():
            continue
        pos = idx[k][v]                      # distinct input positions of this tap
        hit = np.abs(x[:, pos] - y[:, v]) < eps
        out[:, pos] += np.where(hit, g[:, v], dt.type(0))
    return out.reshape(orig_input.shape)


@kernel("AvgPool3DGrad")
def avg_pool3d_grad(ctx: KernelContext, orig_input_shape: np.ndarray,
                    grad: np.ndarray) -> np.ndarray:
    """Each output's gradient times 1/(its window's real elements), added to them."""
    ks, st = _pool_attrs(ctx, 5, op="AvgPooling3dGradOp")
    _pool3d_dtype("AvgPool3DGrad", grad.dtype)
    if orig_input_shape.ndim != 1 or orig_input_shape.size != 5:
        raise InvalidArgumentError("tensor_in must be 1-dimensional and 5 elements")
    _check_dims(5, out_backprop=grad)
    shape = tuple(int(d) for d in orig_input_shape)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"Dimension -1 must be >= 0: {list(shape)}")
    n, c = shape[0], shape[4]
    if grad.shape[0] != n:
        raise InvalidArgumentError(
            "Expected first dimension of tensor_in_shape and out_backprop to match, got "
            f"{n} and {grad.shape[0]}")
    if grad.shape[4] != c:
        raise InvalidArgumentError(
            "Expected last dimension of tensor_in_shape and out_backprop to match, got "
            f"{c} and {grad.shape[4]}")
    outs, idx, valid = _taps(shape[1:4], ks, st, ctx.attrs["padding"])
    _expect("grad", grad.shape, (n, *outs, c))
    dt = grad.dtype
    count = valid.sum(axis=0)
    # TF scales by T(1.0f / count), the reciprocal in float32.
    with np.errstate(divide="ignore"):
        scale = (np.float32(1) / count.astype(np.float32)).astype(dt)
    contrib = grad.reshape(n, -1, c) * scale[None, :, None]
    out = np.zeros((n, int(np.prod(shape[1:4])), c), dt)
    for k in range(idx.shape[0]):
        v = valid[k]
        if v.any():
            out[:, idx[k][v]] += contrib[:, v]
    return out.reshape(shape)


def _max_pool_grad_grad(ctx: KernelContext, rank: int, x: np.ndarray, y: np.ndarray,
                        gg: np.ndarray, ksize: list[int] | None = None,
                        strides: list[int] | None = None, op: str = "") -> np.ndarray:
    """Second derivative of max pooling: each output takes ``gg`` at the first element of
    its window (row-major) equal to orig_output, or 0 if none is."""
    ks, st = _pool_attrs(ctx, rank, ksize, strides, op)
    _check_dims(rank, orig_input=x, orig_output=y, grad=gg)
    n, c = x.shape[0], x.shape[-1]
    outs, idx, valid = _taps(x.shape[1:-1], ks, st, ctx.attrs["padding"])
    _expect("orig_output", y.shape, (n, *outs, c))
    _expect("grad", gg.shape, x.shape)
    xs, ys, gs = x.reshape(n, -1, c), y.reshape(n, -1, c), gg.reshape(n, -1, c)
    out = np.zeros(ys.shape, gg.dtype)
    found = np.zeros(ys.shape, bool)
    for k in range(idx.shape[0]):
        v = valid[k]
        if not v.any():
            continue
        pos = idx[k][v]
        hit = ~found[:, v] & (xs[:, pos] == ys[:, v])
        sub = out[:, v]
        np.copyto(sub, gs[:, pos], where=hit)
        out[:, v] = sub
        found[:, v] |= hit
    return out.reshape(y.shape)


@kernel("MaxPool3DGradGrad")
def max_pool3d_grad_grad(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                         grad: np.ndarray) -> np.ndarray:
    _pool3d_dtype("MaxPool3DGradGrad", grad.dtype)
    return _max_pool_grad_grad(ctx, 5, orig_input, orig_output, grad,
                               op="MaxPooling3dGradGradOp")


@kernel("MaxPoolGradGrad")
def max_pool_grad_grad(ctx: KernelContext, orig_input: np.ndarray, orig_output: np.ndarray,
                       grad: np.ndarray) -> np.ndarray:
    return _max_pool_grad_grad(ctx, 4, orig_input, orig_output, grad,
                               op="MaxPoolingGradGradOp")


@kernel("MaxPoolGradGradV2")
def max_pool_grad_grad_v2(ctx: KernelContext, orig_input: np.ndarray,
                          orig_output: np.ndarray, grad: np.ndarray, ksize: np.ndarray,
                          strides: np.ndarray) -> np.ndarray:
    return _max_pool_grad_grad(ctx, 4, orig_input, orig_output, grad,
                               [int(k) for k in ksize.ravel()],
                               [int(k) for k in strides.ravel()], op="MaxPoolingGradGradOp")


# --- FusedBatchNormGrad --------------------------------------------------------------------


def _fused_batch_norm_grad(ctx: KernelContext, y_backprop: np.ndarray, x: np.ndarray,
                           scale: np.ndarray, mean: np.ndarray, variance: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = ctx.attrs
    fmt = a.get("data_format", "NHWC")
    rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
    for name, t in (("x", x), ("y_backprop", y_backprop)):
        if t.ndim != rank:
            raise InvalidArgumentError(
                f"{name} must be a {rank}-dimensional tensor. {_fmt(t.shape)}")
    for name, t in (("scale", scale), ("reserve_space_1", mean),
                    ("reserve_space_2", variance)):
        if t.ndim != 1:
            raise InvalidArgumentError(f"{name} must be 1-dimensional. {_fmt(t.shape)}")
    if x.shape != y_backprop.shape:
        raise InvalidArgumentError(
            f"x and y_backprop must have same shape, but x has shape {_fmt(x.shape)} and "
            f"y_backprop has shape {_fmt(y_backprop.shape)}")
    channel = 1 if fmt in ("NCHW", "NCDHW") else rank - 1
    depth = x.shape[channel]
    for name, t in (("scale", scale), ("reserve_space_1", mean),
                    ("reserve_space_2", variance)):
        if t.shape[0] != depth:
            raise InvalidArgumentError(
                f"{name} must have the same number of elements as the channels of x, got "
                f"{t.shape[0]} and {depth}")
    # Channels last, flattened to (rest, depth), computed in float32 (the U type).
    u = np.float32
    perm = [i for i in range(rank) if i != channel] + [channel]
    xs = np.transpose(x, perm).reshape(-1, depth).astype(u)
    dy = np.transpose(y_backprop, perm).reshape(-1, depth).astype(u)
    scale, mean, variance = scale.astype(u), mean.astype(u), variance.astype(u)
    eps = u(a.get("epsilon", 1e-4))
    rest = u(max(xs.shape[0], 1))
    offset_bp = dy.sum(axis=0, dtype=u)
    with np.errstate(divide="ignore", invalid="ignore"):
        coef0 = u(1) / np.sqrt(variance + eps)
        if a.get("is_training", True):
            x_centered = xs - mean
            scale_bp = (dy * (x_centered * coef0)).sum(axis=0, dtype=u)
            dy_centered = dy - offset_bp * (u(1) / rest)
            dy_xc_mean = (dy * x_centered).sum(axis=0, dtype=u) / rest
            coef1 = scale * coef0
            coef2 = np.square(coef0) * dy_xc_mean
            x_bp = coef1 * (dy_centered - x_centered * coef2)
        else:
            scale_bp = (dy * (xs - mean)).sum(axis=0, dtype=u) * coef0
            x_bp = dy * (coef0 * scale)
    inverse = np.argsort(perm)
    moved = tuple(x.shape[i] for i in perm)
    x_bp = np.transpose(x_bp.reshape(moved), inverse).astype(x.dtype)
    return x_bp, scale_bp.astype(u), offset_bp.astype(u)


def _empty_reserve() -> np.ndarray:
    return np.zeros((0,), np.float32)


@kernel("FusedBatchNormGrad", "FusedBatchNormGradV2")
def fused_batch_norm_grad(ctx: KernelContext, y_backprop: np.ndarray, x: np.ndarray,
                          scale: np.ndarray, reserve_space_1: np.ndarray,
                          reserve_space_2: np.ndarray) -> tuple[np.ndarray, ...]:
    outs = _fused_batch_norm_grad(ctx, y_backprop, x, scale, reserve_space_1, reserve_space_2)
    return (*outs, _empty_reserve(), _empty_reserve())


@kernel("FusedBatchNormGradV3")
def fused_batch_norm_grad_v3(ctx: KernelContext, y_backprop: np.ndarray, x: np.ndarray,
                             scale: np.ndarray, reserve_space_1: np.ndarray,
                             reserve_space_2: np.ndarray,
                             reserve_space_3: np.ndarray) -> tuple[np.ndarray, ...]:
    outs = _fused_batch_norm_grad(ctx, y_backprop, x, scale, reserve_space_1, reserve_space_2)
    return (*outs, _empty_reserve(), _empty_reserve())


@kernel("StridedSliceGrad")
def strided_slice_grad(ctx: KernelContext, shape: np.ndarray, begin: np.ndarray,
                       end: np.ndarray, strides: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """StridedSlice's gradient: zeros of the input's ``shape`` with ``dy`` written where the
    slice read (the same spec, resolved by array.strided_slice_plan)."""
    from .array import strided_slice_plan

    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    a = ctx.attrs
    slices, out_shape = strided_slice_plan(
        dims, np.asarray(begin).tolist(), np.asarray(end).tolist(),
        np.asarray(strides).tolist(), int(a.get("begin_mask", 0)), int(a.get("end_mask", 0)),
        int(a.get("ellipsis_mask", 0)), int(a.get("new_axis_mask", 0)),
        int(a.get("shrink_axis_mask", 0)))
    if tuple(dy.shape) != tuple(out_shape):
        raise InvalidArgumentError(
            f"shape of dy was {list(dy.shape)} instead of {list(out_shape)}")
    out = np.zeros(dims, dtype=dy.dtype)
    region = out[slices] if slices else out
    region[...] = dy.reshape(region.shape)
    return out
