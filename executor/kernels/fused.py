"""Fused kernels: a convolution or matmul followed by its bias, batch norm and activation.

These are TensorFlow's own fused ops (``_FusedConv2D``, ``_FusedDepthwiseConv2dNative``,
``_FusedMatMul``, which Grappler's remapper writes and TensorFlow's CPU kernels run), made by
dfg's run-time fusion passes (``graphdef/passes/fuse_*.py``). ``fused_ops`` names what follows
the contraction, in order:

* ``["BiasAdd"]`` (1 arg: the bias) or ``["FusedBatchNorm"]`` (4 args: scale, offset, mean,
  variance, with ``epsilon``), then optionally ``"Add"`` (1 more arg, added elementwise: a
  residual connection), then optionally one activation: Relu, Relu6, Elu, LeakyRelu
  (``leakyrelu_alpha``), Tanh, Sigmoid, or ``_MklSwish`` (x * sigmoid(x)). ``Add`` and
  ``_MklSwish`` are the names oneDNN builds of TensorFlow give these fusions.

The speed comes from working in place: the bias and the activation are applied to the
convolution's freshly allocated output, with ``out=`` everywhere, so a fused node allocates
one tensor where the unfused chain allocates one per op. float16 is computed in float32 and
rounded once at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError
from dfg.graphdef.tensors import frozen

from . import _conv, _native, nn
from ._select import where
from .math import _matmul_2d, native_activation
from .registry import ArrayForm, KernelContext, ScalarForm, kernel, specs

_HALF = np.dtype(np.float16)


def _sigmoid_(y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """sigmoid(y) into ``out`` (default: y itself), exactly as the Sigmoid kernel
    (math._sigmoid): 1/(1+e^-y) in single and double precision; in half precision, with
    e = exp(-|y|) (never overflows), 1/(1+e) for y >= 0 and e/(1+e) below. No masked ufuncs
    (``where=`` branches per element, several times slower than a bitwise select)."""
    out = y if out is None else out
    if native_activation(y, _native.SIGMOID, out) is not None:
        return out
    if y.dtype.kind == "f" and y.dtype.itemsize >= 4:
        np.negative(y, out=out)
        np.exp(out, out=out)
        np.add(out, 1, out=out)
        return np.reciprocal(out, out=out)
    neg = y < 0
    e = np.abs(y, out=np.empty_like(y))     # out=: an array even when y is 0-d
    np.negative(e, out=e)
    np.exp(e, out=e)
    num = where(neg, e, e.dtype.type(1))
    np.add(e, 1, out=out)
    return np.divide(num, out, out=out)


def _relu_(y: np.ndarray, ctx: KernelContext) -> None:
    np.maximum(y, y.dtype.type(0), out=y)     # keeps NaN, as Relu


def _relu6_(y: np.ndarray, ctx: KernelContext) -> None:
    np.maximum(y, y.dtype.type(0), out=y)
    np.minimum(y, y.dtype.type(6), out=y)


def _elu_(y: np.ndarray, ctx: KernelContext) -> None:
    with np.errstate(over="ignore"):
        e = np.exp(y)                      # exp(y) - 1 below 0, as the Elu kernel computes it
    e -= 1
    np.copyto(y, where(y < 0, e, y))


def _leaky_relu_(y: np.ndarray, ctx: KernelContext) -> None:
    nn.leaky_relu_into(y, y.dtype.type(ctx.attrs.get("leakyrelu_alpha", 0.2)), y)


def _tanh_(y: np.ndarray, ctx: KernelContext) -> None:
    if native_activation(y, _native.TANH, y) is None:
        np.tanh(y, out=y)


def _sigmoid_act(y: np.ndarray, ctx: KernelContext) -> None:
    _sigmoid_(y)


def _swish_(y: np.ndarray, ctx: KernelContext) -> None:
    np.multiply(y, _sigmoid_(y, np.empty_like(y)), out=y)


# activation name in ``fused_ops`` -> in-place function
ACTIVATIONS: dict[str, Callable[[np.ndarray, KernelContext], None]] = {
    "Relu": _relu_, "Relu6": _relu6_, "Elu": _elu_, "LeakyRelu": _leaky_relu_,
    "Tanh": _tanh_, "Sigmoid": _sigmoid_act, "_MklSwish": _swish_,
}
# the first fused op and how many ``args`` it takes
_FIRST = {"BiasAdd": 1, "FusedBatchNorm": 4}


def _plan(ctx: KernelContext, args: tuple[np.ndarray, ...]
          ) -> tuple[str | None, bool, str | None]:
    """(first op, whether an Add follows, activation) from ``fused_ops``, checked against
    the number of args."""
    ops = list(ctx.attrs.get("fused_ops") or [])
    first = ops.pop(0) if ops and ops[0] in _FIRST else None
    add = bool(ops) and ops[0] == "Add" and first is not None
    if add:
        ops.pop(0)
    act = ops.pop(0) if ops and ops[0] in ACTIVATIONS else None
    if ops or (first is None and act is not None):
        raise UnimplementedError(
            f"fusion is not implemented: {list(ctx.attrs.get('fused_ops') or [])} (supported: "
            f"BiasAdd or FusedBatchNorm, then optionally Add, then optionally one of "
            f"{', '.join(ACTIVATIONS)})")
    want = (_FIRST.get(first, 0) if first else 0) + add
    num_args = int(ctx.attrs.get("num_args", len(args)))
    if num_args != want or len(args) < want:
        raise InvalidArgumentError(
            f"fused_ops {list(ctx.attrs.get('fused_ops') or [])} take {want} argument"
            f"{'s' if want != 1 else ''}, found num_args={num_args}")
    return first, add, act


def _channel_shape(fmt: str, ndim: int) -> tuple[int, ...]:
    """How a per-channel vector broadcasts against the output (-1: the channel axis)."""
    if fmt == "NCHW":
        return (-1,) + (1,) * (ndim - 2)
    return (-1,)


def _fold_batch_norm(ctx: KernelContext, scale: np.ndarray, offset: np.ndarray,
                     mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inference batch norm as y * s + t per channel (float64 in, float64 out)."""
    s = scale / np.sqrt(var + float(ctx.attrs.get("epsilon", 1e-4)))
    return s, offset - mean * s


def _epilogue(ctx: KernelContext, y: np.ndarray, args: tuple[np.ndarray, ...],
              first: str | None, add: bool, act: str | None, fmt: str = "NHWC",
              inputs: tuple[np.ndarray, ...] = ()) -> np.ndarray:
    """Apply bias or batch norm, then the activation, to ``y`` in place; returns the result
    in the output dtype. ``inputs``: arrays ``y`` must not alias (a contraction that returned
    a view of its input would otherwise have that input overwritten)."""
    out_dtype = y.dtype
    if first == "BiasAdd" and fmt == "NHWC":
        r = _chain_epilogue(y, args, add, act, ctx)
        if r is not None:
            return r
    if not y.flags.writeable or any(np.may_share_memory(y, a) for a in inputs):
        y = y.copy()
    if y.dtype == _HALF:
        y = y.astype(np.float32)
    c = y.shape[1] if fmt == "NCHW" else (y.shape[-1] if y.ndim else 1)
    if first == "BiasAdd":
        bias = np.asarray(args[0])
        if bias.ndim != 1 or bias.shape[0] != c:
            raise InvalidArgumentError(
                f"bias must be 1-D with the output's {c} channels, found shape "
                f"{list(bias.shape)}")
        np.add(y, bias.astype(y.dtype, copy=False).reshape(_channel_shape(fmt, y.ndim)), out=y)
    elif first == "FusedBatchNorm":
        scale, offset, mean, var = (np.asarray(a, np.float64) for a in args[:4])
        for name, v in (("scale", scale), ("offset", offset), ("mean", mean),
                        ("variance", var)):
            if v.shape != (c,):
                raise InvalidArgumentError(
                    f"{name} must be 1-D with the output's {c} channels, found shape "
                    f"{list(v.shape)}")
        s, t = _fold_batch_norm(ctx, scale, offset, mean, var)
        shape = _channel_shape(fmt, y.ndim)
        np.multiply(y, s.astype(y.dtype).reshape(shape), out=y)
        np.add(y, t.astype(y.dtype).reshape(shape), out=y)
    if add:
        other = np.asarray(args[_FIRST[first]])
        if other.dtype != out_dtype:
            raise InvalidArgumentError(
                f"the added tensor must be {out_dtype}, found {other.dtype}")
        try:
            shape = np.broadcast_shapes(y.shape, other.shape)
        except ValueError:
            raise InvalidArgumentError(
                f"Incompatible shapes: {list(y.shape)} vs. {list(other.shape)}") from None
        if shape == y.shape:
            np.add(y, other, out=y)
        else:   # the addend broadcasts the result larger: no longer in place
            y = np.add(y, other, dtype=y.dtype)
    if act is not None:
        ACTIVATIONS[act](y, ctx)
    return y.astype(out_dtype, copy=False)


_NATIVE_ACT = {None: _native.ACT_NONE, "Relu": _native.ACT_RELU, "Relu6": _native.ACT_RELU6,
               "Sigmoid": _native.ACT_SIGMOID, "Tanh": _native.ACT_TANH,
               "_MklSwish": _native.ACT_SWISH}


# activations a compiled chain applies as the numpy path's passes do (NaN kept; a -0.0 sum
# comes out +0.0, as the compiled convolutions' own epilogue gives it; LeakyRelu as
# nn.leaky_relu_into's max(x, x * alpha) for 0 < alpha <= 1)
_CHAIN_ACTS = frozenset({None, "Relu", "Relu6", "LeakyRelu"})
_EPILOGUE_CODES: dict[tuple[bool, str | None], bytes] = {}


def _leaky_alpha(ctx: KernelContext) -> np.ndarray | None:
    """A fused LeakyRelu's alpha as the one-element float32 operand of the chain's
    max(x, x * alpha), or None where that is not LeakyRelu (alpha outside (0, 1])."""
    alpha = np.float32(ctx.attrs.get("leakyrelu_alpha", 0.2))
    return np.array([alpha], _F32) if 0 < alpha <= 1 else None


def _chain_epilogue(y: np.ndarray, args: tuple, add: bool, act: str | None,
                    ctx: KernelContext) -> np.ndarray | None:
    """A large float32 product's BiasAdd (then + the added tensor, then Relu, Relu6 or
    LeakyRelu) as one compiled chain over its output, split on the pool, instead of a numpy
    pass per op (a BLAS-path convolution of a full-size ResNet50 spent 7 of its 55 ms in
    those; a DCGAN generator's LeakyRelu epilogues 1 ms of the Dense layer's 2): the same
    float32 operations in the same order, each rounded as numpy rounds it. None where the
    operands are not plain float32 of the shapes the chain takes, the output is under
    _native.BROADCAST_MIN elements or the activation is another (the numpy path runs and
    words any error)."""
    if act not in _CHAIN_ACTS or y.dtype is not _F32 or y.size < _native.BROADCAST_MIN:
        return None
    alpha = _leaky_alpha(ctx) if act == "LeakyRelu" else None
    if act == "LeakyRelu" and alpha is None:
        return None
    bias = args[0]
    if bias.__class__ is not np.ndarray or bias.dtype is not _F32 or bias.ndim != 1 \
            or not y.ndim or bias.shape[0] != y.shape[-1]:
        return None
    ins = [y, bias]
    if add:
        other = args[_FIRST["BiasAdd"]]
        if other.__class__ is not np.ndarray or other.dtype is not _F32 \
                or other.shape != y.shape:
            return None
        ins.append(other)
    if alpha is not None:
        ins.append(alpha)
    key = (add, act)
    code = _EPILOGUE_CODES.get(key)
    if code is None:
        n = len(ins)
        ops = [(_native.CHAIN_OPS["BiasAdd"], 0, 1)]
        if add:
            ops.append((_native.CHAIN_OPS["AddV2"], n, 2))
        if act == "LeakyRelu":
            ops.append((_native.CHAIN_LEAKY, n + len(ops) - 1, n - 1))
        elif act is not None:
            ops.append((_native.CHAIN_OPS[act], n + len(ops) - 1, -1))
        code = _EPILOGUE_CODES[key] = np.array(ops, np.int32).tobytes()
    return _native.chain_on(code, tuple(ins))


def _native_epilogue(ctx: KernelContext, f: np.ndarray, args: tuple[np.ndarray, ...],
                     first: str | None, add: bool, act: str | None, depthwise: bool = False
                     ) -> _native.Epilogue | None:
    """The epilogue as the compiled convolution (``depthwise``: the depthwise one) applies
    it, or None when it cannot (other activations, dtypes, or arguments _epilogue would
    reject with an error)."""
    oc = -1 if f.ndim != 4 else f.shape[2] * f.shape[3] if depthwise else f.shape[-1]
    if first is None or act not in _NATIVE_ACT or any(
            np.asarray(a).shape != (oc,) for a in args[:_FIRST[first]]):
        return None
    scale = None
    if first == "BiasAdd":
        shift = np.asarray(args[0])
        if shift.dtype != np.float32:
            return None
    else:   # FusedBatchNorm, folded as _epilogue folds it
        s, t = _fold_batch_norm(ctx, *(np.asarray(a, np.float64) for a in args[:4]))
        scale, shift = s.astype(np.float32), t.astype(np.float32)
    residual = np.asarray(args[_FIRST[first]]) if add else None
    return _native.Epilogue(scale, shift, residual, _NATIVE_ACT[act])


def _conv_call(fn: Callable[..., np.ndarray], ctx: KernelContext, x: np.ndarray,
               f: np.ndarray, args: tuple[np.ndarray, ...]) -> np.ndarray:
    m = ctx.memo
    if m is None or m[0] != x.shape or m[1] != f.shape or m[2] is not x.dtype \
            or m[3] is not f.dtype or m[4] != len(args):
        m = _conv_call_plan(fn, ctx, x, f, args)
    kept = m[10]
    if kept is not None and kept[0] is f and _native.enabled():
        y = _run_kept(kept, x, f, args)
        if y is not None:
            return y
    first, add, act, fmt, p = m[5:10]
    if fn is nn.conv2d_of and fmt == "NHWC" and (p is None or p.native_fused):
        ep = _native_epilogue(ctx, f, args, first, add, act)
        if ep is not None:
            a = ctx.attrs
            y = _conv.conv2d_native_fused(x, f, a.get("strides"), a.get("padding"),
                                          a.get("dilations"), fmt,
                                          a.get("explicit_paddings"), ep, p)
            if y is not None:
                _keep_native(ctx, m, f, args, first, add, ep, p, _native.prepare_conv,
                             _native.conv2d_prepared)
                return y
    if fn is nn.depthwise_conv2d_of and fmt == "NHWC" and p is not None and not add \
            and x.dtype == _F32 and f.dtype == _F32 and f.ndim == 4 and f.shape[3] == 1 \
            and p.mode != "empty" and _native.enabled():
        # the compiled depthwise kernel applies the bias (or folded batch norm) and the
        # activation to each pixel as it computes it: no passes over the output
        ep = _native_epilogue(ctx, f, args, first, add, act, depthwise=True)
        if ep is not None:
            kept = _keep_native(ctx, m, f, args, first, add, ep, p, _native.prepare_depthwise,
                                _native.depthwise_prepared)
            return _native.depthwise_prepared(
                x, kept or _native.prepare_depthwise(f, p.g, ep))
    if p is None:
        y = fn(ctx.attrs, x, f)
        return _epilogue(ctx, y, args, first, add, act, fmt, (x, f))
    if fn is nn.conv2d_of:
        y = _conv.conv2d_planned(x, f, p)
        if first == "BiasAdd" and fmt == "NHWC":
            # every plan's convolution writes a fresh NHWC array: the bias, the residual
            # and the activation go straight on, as _epilogue would apply them (same ufuncs,
            # same operands, same order), without its checks of the general case (a small
            # layer's epilogue cost as much as its convolution)
            b = args[0]
            r = args[1] if add else y
            if type(b) is np.ndarray and b.dtype is y.dtype and b.shape == (p.oc,) \
                    and type(r) is np.ndarray and r.dtype is y.dtype and r.shape == y.shape:
                out = _chain_epilogue(y, args, add, act, ctx)   # one compiled pass, if it can
                if out is not None:
                    return out
                np.add(y, b, out=y)
                if add:
                    np.add(y, r, out=y)
                if act is not None:
                    ACTIVATIONS[act](y, ctx)
                return y
    else:
        y = _conv.depthwise_planned(x, f, p)
    return _epilogue(ctx, y, args, first, add, act, fmt, (x, f))


def _conv_call_plan(fn: Callable[..., np.ndarray], ctx: KernelContext, x: np.ndarray,
                    f: np.ndarray, args: tuple[np.ndarray, ...]) -> tuple:
    """What a fused convolution node keeps in ``ctx.memo`` for inputs of these shapes and
    dtypes: the fused ops (``_plan``), the data format, and the convolution's plan (None:
    the general path, which raises what is wrong)."""
    first, add, act = _plan(ctx, args)
    fmt = ctx.attrs.get("data_format", "NHWC") or "NHWC"
    ctx.memo = None     # nn's kernels keep their own plan there: not while fused
    p = nn.planned_conv(ctx, x, f, _conv.conv2d_plan if fn is nn.conv2d_of
                        else _conv.depthwise_plan)
    # the last entry: what _keep_native prepared, if anything
    m = ctx.memo = (x.shape, f.shape, x.dtype, f.dtype, len(args), first, add, act, fmt, p,
                    None)
    return m


def _run_kept(kept: tuple, x: np.ndarray, f: np.ndarray, args: tuple) -> np.ndarray | None:
    """The compiled convolution ``_keep_native`` kept, on ``x`` (of the shape and dtype it
    was kept for), when ``f`` and the epilogue's vectors are the frozen arrays it was
    prepared for: only the input and the residual (float32, of the output's shape) are new.
    None otherwise."""
    statics = kept[1]
    n = len(statics)
    if kept[0] is not f or n and (args[0] is not statics[0] or n > 1 and not all(
            a is b for a, b in zip(args[1:n], statics[1:]))):
        return None
    if kept[2] is None:
        return kept[4](x, kept[3])
    r = args[kept[2]]
    if r.__class__ is np.ndarray and r.dtype is _F32 and r.shape == kept[3].out_shape:
        return kept[4](x, kept[3], r)
    return None


def _keep_native(ctx: KernelContext, m: tuple, f: np.ndarray, args: tuple,
                 first: str | None, add: bool, ep: _native.Epilogue, p: Any,
                 prepare: Callable[..., Any], run: Callable[..., np.ndarray]) -> Any:
    """Keep the compiled convolution's preparation (``prepare``'s: the filter in blocks,
    the epilogue's vectors, the geometry) in the node's memo, with the function that
    ``run``s it, when the filter and the epilogue's inputs are frozen arrays (Consts: their
    values cannot change while the memo holds them), so the next run with the same arrays
    calls the kernel at once. Returns the preparation kept, or None."""
    statics = args[:_FIRST[first]] if first else ()
    if p is None or not frozen(f) or not all(frozen(a) for a in statics):
        return None
    prep = prepare(f, p.g, ep)
    rslot = _FIRST.get(first, 0) if add else None
    kept = (f, statics, rslot, prep, run)
    ctx.memo = (*m[:10], kept)
    shape, dtype, n = m[0], m[2], m[4]
    go = _native.runner(prep, depthwise=run is _native.depthwise_prepared)
    out_shape, enabled, nd = prep.out_shape, _native.enabled, np.ndarray
    s0 = statics[0] if statics else None
    more_statics = tuple(zip(range(1, len(statics)), statics[1:]))

    def fast(x: np.ndarray, filt: np.ndarray, *more: np.ndarray) -> np.ndarray | None:
        # compiled programs' call (KernelContext.fast): the kernel's own test (_run_kept),
        # written out, then the compiled kernel at once (_native.runner; module.c refuses a
        # buffer that is not C-contiguous)
        if x.__class__ is not nd or x.shape != shape or x.dtype is not dtype \
                or filt is not f or len(more) != n \
                or (s0 is not None and more[0] is not s0) or not enabled():
            return None
        for i, a in more_statics:
            if more[i] is not a:
                return None
        r = None
        if rslot is not None:
            r = more[rslot]
            if r.__class__ is not nd or r.dtype is not _F32 or r.shape != out_shape:
                return None
        try:
            return go(x, r)
        except (TypeError, ValueError, MemoryError):
            return None      # not C-contiguous, or no row buffer: the kernel says

    ctx.fast = fast
    return prep


@kernel("_FusedConv2D", heavy=True, blas=True, prepared=True)
def fused_conv2d(ctx: KernelContext, x: np.ndarray, f: np.ndarray, *args: Any) -> np.ndarray:
    if (ctx.attrs.get("filter_format") or "HWIO") != "HWIO":
        raise UnimplementedError(
            f"filter_format {ctx.attrs.get('filter_format')!r} is not implemented (HWIO is)")
    if int(ctx.attrs.get("num_host_args", 0) or 0):
        raise UnimplementedError("host args of _FusedConv2D are not implemented")
    return _conv_call(nn.conv2d_of, ctx, x, f, args)


@kernel("_FusedDepthwiseConv2dNative", heavy=True, prepared=True)
def fused_depthwise_conv2d(ctx: KernelContext, x: np.ndarray, f: np.ndarray,
                           *args: Any) -> np.ndarray:
    return _conv_call(nn.depthwise_conv2d_of, ctx, x, f, args)


@kernel("_DfgFusedConv2DBackpropInput", heavy=True, blas=True)
def fused_conv2d_backprop_input(ctx: KernelContext, sizes: np.ndarray, f: np.ndarray,
                                dy: np.ndarray, *args: Any) -> np.ndarray:
    """A transposed convolution with its BiasAdd (then optionally a residual Add) and
    activation (graphdef/passes/fuse_conv_bias_act.py): the compiled phases apply the bias
    and a compiled activation as they compute (nn.conv2d_backprop_input_with); otherwise
    the epilogue runs on the result as _FusedConv2D's does."""
    first, add, act = _plan(ctx, args)
    fmt = ctx.attrs.get("data_format", "NHWC") or "NHWC"
    ep = None
    if first == "BiasAdd" and not add and act in _NATIVE_ACT and fmt == "NHWC" \
            and isinstance(args[0], np.ndarray) and args[0].dtype == np.float32 \
            and f.ndim == 4 and args[0].shape == (f.shape[2],):
        ep = _native.Epilogue(None, args[0], None, _NATIVE_ACT[act])
    y, applied = nn.conv2d_backprop_input_with(ctx, sizes, f, dy, ep)
    if applied:
        return y
    return _epilogue(ctx, y, args, first, add, act, fmt, (dy, f))


@kernel("_FusedMatMul", heavy=True, blas=True)
def fused_matmul(ctx: KernelContext, a: np.ndarray, b: np.ndarray, *args: Any) -> np.ndarray:
    # the fused ops parsed once per node (a recurrent cell's product runs every step)
    m = ctx.memo
    if m is None or m[0] != len(args):
        m = ctx.memo = (len(args), *_plan(ctx, args))
    _n, first, add, act = m
    if a.ndim != 2 or b.ndim != 2:
        raise InvalidArgumentError(
            f"inputs must be 2-D matrices, found shapes {list(a.shape)} and {list(b.shape)}")
    if a.dtype != b.dtype:
        raise InvalidArgumentError(f"a and b must have the same dtype, found {a.dtype} and "
                                   f"{b.dtype}")
    dt = a.dtype
    if dt == _HALF:
        a, b = a.astype(np.float32), b.astype(np.float32)
    ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
    if a.shape[0 if ta else 1] != b.shape[1 if tb else 0]:
        ash, bsh = a.shape[::-1] if ta else a.shape, b.shape[::-1] if tb else b.shape
        raise InvalidArgumentError(
            f"matrix size-incompatible: In[0]: {list(ash)}, In[1]: {list(bsh)}")
    if first == "BiasAdd" and not add and act in _NATIVE_ACT and not ta \
            and a.dtype is _F32 and args[0].__class__ is np.ndarray:
        # a batch's rows by a constant matrix: the bias and activation in registers
        prep = _native.matmul_plan(a, b, tb, args[0], _NATIVE_ACT[act])
        if prep is not None:
            return _native.matmul_f32(a, prep)
    # the MatMul kernel's product (a recurrent cell's few rows: the direct kernel)
    y = _matmul_2d(a, b, ta, tb)
    return _epilogue(ctx, y, args, first, add, act).astype(dt, copy=False)


# --- chains of elementwise ops -----------------------------------------------------------------

def _ew_relu(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0), out=out)


def _ew_relu6(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    r = np.maximum(x, x.dtype.type(0), out=out)
    return np.minimum(r, r.dtype.type(6), out=_own(r))


def _ew_sigmoid(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    r = np.array(x) if out is None else out     # np.array: a 0-d array, not a scalar
    _sigmoid_(r)
    return r


def _ew_tanh(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    r = native_activation(np.asarray(x), _native.TANH, out)
    return np.tanh(x, out=out) if r is None else r


def _ew_rsqrt(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    r = np.sqrt(x, out=out)
    return np.reciprocal(r, out=_own(r))


def _ew_squared_difference(x: np.ndarray, y: np.ndarray, out: np.ndarray | None
                           ) -> np.ndarray:
    r = np.subtract(x, y, out=out)
    return np.multiply(r, r, out=_own(r))


# op -> (arity, function called as fn(*operands, out=buffer or None)); each computes exactly
# what the op's own kernel computes on float32/float64 (the same numpy functions). BiasAdd
# (NHWC: the pass takes no other) and a two-input AddN (its inputs' shapes must be equal) are
# additions once their shapes are checked (_shape_plan).
CHAIN_OPS: dict[str, tuple[int, Callable[..., np.ndarray]]] = {
    **{op: (2, f) for op, f in (
        ("Add", np.add), ("AddV2", np.add), ("BiasAdd", np.add), ("AddN", np.add),
        ("Sub", np.subtract),
        ("Mul", np.multiply),
        ("RealDiv", np.true_divide), ("Div", np.true_divide), ("Maximum", np.maximum),
        ("Minimum", np.minimum), ("SquaredDifference", _ew_squared_difference))},
    **{op: (1, f) for op, f in (
        ("Neg", np.negative), ("Abs", np.abs), ("Exp", np.exp), ("Log", np.log),
        ("Sqrt", np.sqrt), ("Square", np.square), ("Tanh", _ew_tanh),
        ("Reciprocal", np.reciprocal), ("Rsqrt", _ew_rsqrt), ("Relu", _ew_relu),
        ("Relu6", _ew_relu6), ("Sigmoid", _ew_sigmoid))},
}


def _own(buf: Any) -> np.ndarray | None:
    """``buf`` as an output buffer for a unary op (None: a numpy scalar, not writable)."""
    return buf if type(buf) is np.ndarray else None


def _fits(buf: Any, other: np.ndarray) -> np.ndarray | None:
    """``buf`` when ``buf op other`` has ``buf``'s shape (it can be written in place)."""
    if type(buf) is not np.ndarray:
        return None
    s = other.shape
    if s == buf.shape or not s:
        return buf
    try:
        return buf if np.broadcast_shapes(buf.shape, s) == buf.shape else None
    except ValueError:
        return None     # the op itself reports the incompatible shapes


# ops the compiled chain (executor/native/elementwise.c, dfg_chain_f32) computes with the bits
# of the numpy functions above, and their codes there (native.h's DFG_CH_*). Not Exp/Log
# (numpy's own vectorized float32 exp and log round differently from any other), nor
# Maximum/Minimum of two operands (which of two zeros numpy keeps is its loop's choice).
# Relu/Relu6 compare with a constant 0 and 6 as numpy's maximum and minimum do: NaN is kept
# and a zero result is +0 (tests/test_native.py checks both against the numpy kernels).
NATIVE_CHAIN_OPS = _native.CHAIN_OPS
_F32 = np.dtype(np.float32)


def sweep_ops() -> frozenset[str]:
    """The ops of a chain the compiled sweep runs whole, when it is built and enabled (the
    Session forms float32 chains of these outside loops: ``PassOptions.elementwise_sweep_ops``);
    else none."""
    return frozenset(NATIVE_CHAIN_OPS) if _native.enabled() else frozenset()


class Sweep(NamedTuple):
    """How the compiled sweep runs a chain on inputs of given shapes (``chain_f32``'s
    arguments): ``srcs`` the node's input each of its operands is, ``kinds`` and ``layout``
    (None: every operand from offset 0, rows ``cols`` apart) how it reads each, over ``rows``
    x ``cols``; ``code`` the ops; ``extra`` the ops before the last whose results are
    outputs too (int32 bytes, None: only the last); ``out_shape`` each output's shape."""

    srcs: tuple
    kinds: bytes
    layout: bytes | None
    rows: int
    cols: int
    code: bytes
    extra: bytes | None
    out_shape: tuple


# (program, number of inputs) -> the function running it (the kernel's core and the array form)
_PROGRAMS: dict[tuple[tuple[str, ...], int], Callable[..., Any]] = {}


def _native_code(parsed: list, n_inputs: int) -> bytes | None:
    """The chain as dfg_chain_f32's int32 triples (op, operand, operand or -1; operand n +
    k is the k-th op's result), or None when an op is not one it computes."""
    code = []
    for op, refs, _params in parsed:
        c = NATIVE_CHAIN_OPS.get(op)
        if c is None:
            return None
        ids = [int(r[1:]) + (n_inputs if r[0] == "r" else 0) for r in refs]
        code += [c, ids[0], ids[1] if len(ids) > 1 else -1]
    return np.array(code, np.int32).tobytes()


_LAYOUT_MAX = 4096    # entries of a cache here before it is cleared


# ops whose shape rule is not numpy's broadcasting: checked by _shape_plan
_CHECKED = frozenset({"BiasAdd", "AddN"})
PIECE, CUT = "Piece", "Cut"
SLICES = (PIECE, CUT)


def _int_or_none(a: str) -> int | None | bool:
    """An integer operand of a slice entry; ``_`` is None (an open end); False: neither."""
    if a == "_":
        return None
    return int(a) if a.lstrip("-").isdigit() else False


def _parse(program: tuple[str, ...], n_inputs: int) -> list[tuple[str, list[str], tuple]]:
    """``program``'s entries as (op, operands: ``i<k>`` the k-th input, ``r<k>`` the k-th
    entry's result, params), checked: op names against CHAIN_OPS, operands parsed as integers
    in range (nothing of the graph's text is used beyond these).

    Two entries take a block of an input (the pass moves a cell's Split or StridedSlice into
    the chain): ``Piece i<k> <axis> <n> <j> <g>``, the j-th of n equal blocks along ``axis``,
    and ``Cut i<k> <axis> <start> <stop> <dims> <g>``, ``[start:stop]`` along ``axis`` (``_``
    an open end) of a StridedSlice of ``dims`` dims. Axes count in the rank of the entry's
    group ``g``: the leaves of one sliced expression (the sliced value is their elementwise
    broadcast, so its block is the ops on each leaf's block; a leaf of size 1 or without
    that axis broadcasts as it is). Their params: (group, (kind, axis, ...), j)."""
    if not program:
        raise InvalidArgumentError("_DfgElementwiseChain: empty program")
    parsed = []
    groups: dict[int, tuple] = {}
    for k, text in enumerate(program):
        op, *args = text.split()
        params: tuple = ()
        if op in SLICES:
            nums = [_int_or_none(a) for a in args[1:]]
            ok = len(args) == (5 if op == PIECE else 6) and all(x is not False for x in nums) \
                and args[0].startswith("i") and isinstance(nums[0], int) \
                and isinstance(nums[-1], int) and nums[-1] >= 0
            if ok and op == PIECE:
                ok = all(x is not None for x in nums) and nums[1] >= 1 and 0 <= nums[2] < nums[1]
                spec, j = ("split", nums[0], nums[1]), nums[2] if ok else 0
            elif ok:
                ok = isinstance(nums[3], int) and 0 <= nums[0] < nums[3]
                spec, j = ("cut", nums[0], nums[1], nums[2], nums[3]), 0
            if not ok or groups.setdefault(nums[-1], spec) != spec:
                raise InvalidArgumentError(
                    f"_DfgElementwiseChain: bad slice in entry {k} ({text!r}): Piece i<k> "
                    "<axis> <n> <j> <g> (0 <= j < n) or Cut i<k> <axis> <start> <stop> <dims> "
                    "<g> (0 <= axis < dims), one kind and axis per group")
            params, args = (nums[-1], spec, j), args[:1]
        elif op not in CHAIN_OPS:
            raise UnimplementedError(f"_DfgElementwiseChain: op {op} is not supported "
                                     f"(supported: {', '.join(sorted(CHAIN_OPS))})")
        elif len(args) != CHAIN_OPS[op][0]:
            raise InvalidArgumentError(f"_DfgElementwiseChain: {op} takes {CHAIN_OPS[op][0]} "
                                       f"operand(s), found {text!r}")
        refs = []
        for a in args:
            kind, digits = a[:1], a[1:]
            idx = int(digits) if digits.isdigit() else -1
            if kind not in ("i", "r") or idx < 0 or kind == "r" and idx >= k \
                    or kind == "i" and idx >= n_inputs:
                raise InvalidArgumentError(
                    f"_DfgElementwiseChain: bad operand {a!r} in entry {k} ({text!r})")
            refs.append(f"{kind}{idx}")
        parsed.append((op, refs, params))
    if parsed[-1][0] in SLICES:
        raise InvalidArgumentError("_DfgElementwiseChain: the last entry is an op, not a slice")
    return parsed


def _group_extent(spec: tuple, leaves: list[tuple]) -> tuple[int, int]:
    """(position of the sliced axis from the end, its size) of a group's value, after the
    checks of the op it replaces (a Split's, a StridedSlice's); its leaves must broadcast."""
    kind, axis = spec[0], spec[1]
    rank = max(len(s) for s in leaves)
    if kind == "split" and not -rank <= axis < rank:
        raise InvalidArgumentError(
            f"-input rank(-{rank}) <= split_dim < input rank ({rank}), but got {axis}")
    if kind == "cut" and spec[4] > rank:
        raise InvalidArgumentError(
            f"Index out of range using input dim {rank}; input has only {rank} dims")
    pos = axis - rank if axis >= 0 else axis
    try:
        size = np.broadcast_shapes(*((s[pos],) if len(s) >= -pos else (1,)
                                     for s in leaves))[0]
    except ValueError:
        raise InvalidArgumentError("Incompatible shapes: " + " vs. ".join(
            str(list(s)) for s in leaves)) from None
    if kind == "split" and size % spec[2]:
        raise InvalidArgumentError(
            "Number of ways to split should evenly divide the split dimension, but got "
            f"split_dim {rank + pos} (size = {size}) and num_split {spec[2]}")
    return pos, size


def _shape_plan(parsed: list, shapes: tuple) -> tuple:
    """For inputs of ``shapes``: each slice entry's index (None: the leaf broadcasts as it
    is) and (position from the end, start, stop) of its block, each entry's result shape
    (the last is the output's), after the
    checks the ops the chain replaces make: a Split's and a StridedSlice's (``_group_extent``),
    a BiasAdd's (a bias as long as the value's last axis) and an AddN's (equal shapes). Raises
    InvalidArgumentError with those ops' messages."""
    groups: dict[int, list[tuple]] = {}
    for op, refs, params in parsed:
        if op in SLICES:
            groups.setdefault(params[0], []).append(shapes[int(refs[0][1:])])
    extents = {g: _group_extent(next(p[1] for op, _r, p in parsed if op in SLICES
                                     and p[0] == g), leaves)
               for g, leaves in groups.items()}
    plan: list = []
    results: list[tuple] = []
    for op, refs, params in parsed:
        if op in SLICES:
            s = shapes[int(refs[0][1:])]
            pos, size = extents[params[0]]
            spec = params[1]
            if spec[0] == "split":
                w = size // spec[2]
                lo, hi = params[2] * w, (params[2] + 1) * w
            else:   # StridedSlice with stride 1: Python's slice of range(size)
                lo, hi, _step = slice(spec[2], spec[3]).indices(size)
                hi = max(lo, hi)
            if len(s) >= -pos and s[pos] == size:
                lead = (slice(None),) * (len(s) + pos)
                plan.append((lead + (slice(lo, hi),), pos, lo, hi))
                results.append(s[:len(s) + pos] + (hi - lo,) + (s[len(s) + pos + 1:]))
            else:
                plan.append((None, pos, lo, hi))
                results.append(s)
            continue
        ops = [results[int(r[1:])] if r[0] == "r" else shapes[int(r[1:])] for r in refs]
        if op == "BiasAdd":
            v, b = ops
            if len(v) < 2:
                raise InvalidArgumentError(f"Input tensor must be at least 2D: {list(v)}")
            if len(b) != 1:
                raise InvalidArgumentError(f"Biases must be 1D: {list(b)}")
            if v[-1] != b[0]:
                raise InvalidArgumentError(
                    "Must provide as many biases as the channel dimension of the input "
                    f"tensor: {list(b)} vs. {list(v)}")
            results.append(v)
            continue
        if op == "AddN":
            if ops[0] != ops[1]:
                raise InvalidArgumentError(      # the AddN kernel's message (kernels/math.py)
                    "inputs[0] and inputs[1] must have the same shape: "
                    f"[{','.join(map(str, ops[0]))}] vs. [{','.join(map(str, ops[1]))}]")
            results.append(ops[0])
            continue
        try:
            results.append(np.broadcast_shapes(*ops))
        except ValueError:
            raise InvalidArgumentError(
                "Incompatible shapes: " + " vs. ".join(str(list(x)) for x in ops)) from None
    return plan, results


def _sweep_layout(parsed: list, used: list[int], slices: list[int], shapes: tuple,
                  plan: list, out_shape: tuple) -> tuple | None:
    """How the compiled sweep reads the chain's operands (the inputs it uses, then the
    slices) straight from the inputs' own buffers: (source input of each, kinds, int64
    (offset, row stride) pairs, rows, cols), a slice of the last axis read as a column block
    where it lies; None when an operand is neither full, a row nor one element, or a slice
    is of another axis (its view is then copied: the numpy chain runs)."""
    if not out_shape or 0 in out_shape:
        return None
    cols = out_shape[-1]
    rows = math.prod(out_shape) // cols
    srcs, kinds, layout = [], [], []

    def operand(src: int, shape: tuple, offset: int, stride: int) -> bool:
        n = math.prod(shape)
        kind = 0 if shape == out_shape else 2 if n == 1 else \
            1 if shape and shape[-1] == cols and n == cols else -1
        if kind < 0:
            group = _native.group_rows(shape, out_shape)
            if group is None:
                return False
            kind, stride = 4, group
        srcs.append(src)
        kinds.append(kind)
        layout.extend((offset, stride if kind in (0, 4) else cols))
        return True

    for j in used:
        s = shapes[j]
        if not operand(j, s, 0, s[-1] if s else 1):
            return None
    for k, (ix, pos, lo, hi) in zip(slices, plan):
        src = int(parsed[k][1][0][1:])
        s = shapes[src]
        if ix is None:
            ok = operand(src, s, 0, s[-1] if s else 1)
        elif pos != -1:
            return None
        else:
            ok = operand(src, s[:-1] + (hi - lo,), lo, s[-1])
        if not ok:
            return None
    return srcs, bytes(kinds), np.array(layout, np.int64).tobytes(), rows, cols


MAX_OUTPUTS = 1 + 4     # the last entry and up to native.h's DFG_CHAIN_MAX_EXTRA others


def _outputs_of(parsed: list, outputs: tuple[int, ...]) -> tuple[int, ...]:
    """The entries whose results are the chain's outputs, in order: ``outputs`` (the node's
    attr) checked (distinct op entries, not slices, the last entry last), else the last."""
    last = len(parsed) - 1
    if not outputs:
        return (last,)
    if len(outputs) > MAX_OUTPUTS or outputs[-1] != last or len(set(outputs)) != len(outputs) \
            or any(not 0 <= k <= last or parsed[k][0] in SLICES for k in outputs):
        raise InvalidArgumentError(
            f"_DfgElementwiseChain: outputs {list(outputs)} must be up to {MAX_OUTPUTS} "
            "distinct op entries, the last entry last")
    return outputs


def _compile(program: tuple[str, ...], n_inputs: int,
             outputs: tuple[int, ...] = ()) -> Callable[..., Any]:
    """The function running ``program`` on its inputs, cached: the compiled sweep where every
    op has one and the inputs allow (``_native.chain_on``), else straight-line numpy code in
    which each op writes into the buffer of a result operand that dies there (when the shapes
    allow), so the chain allocates about once. Pieces become further inputs (views of theirs,
    from the shape plan); a program with pieces, a BiasAdd or an AddN is checked once per
    input shapes (``_shape_plan``). It returns the chain's value (a NumPy scalar on 0-d
    inputs) or raises ValueError on shapes that do not broadcast; with several ``outputs``
    (program entries, the last entry last), a tuple of their values. The kernel and the
    chain's array form both call it."""
    key = (program, n_inputs, outputs)
    hit = _PROGRAMS.get(key)
    if hit is not None:
        return hit
    parsed = _parse(program, n_inputs)
    outs = _outputs_of(parsed, outputs)
    # the ops alone, over the inputs they read (``used``) and then the pieces, as further
    # inputs: an input read only through its pieces is not handed to the sweep
    pieces = [k for k, e in enumerate(parsed) if e[0] in SLICES]
    used = sorted({int(r[1:]) for op, refs, _p in parsed if op not in SLICES for r in refs
                   if r[0] == "i"})
    renamed: dict[str, str] = {f"i{j}": f"i{m}" for m, j in enumerate(used)}
    renamed.update({f"r{k}": f"i{len(used) + m}" for m, k in enumerate(pieces)})
    ops = []
    for k, (op, refs, params) in enumerate(parsed):
        if op in SLICES:
            continue
        renamed[f"r{k}"] = f"r{len(ops)}"
        ops.append((op, [renamed[r] for r in refs], params))
    n_all = len(used) + len(pieces)
    # the ops whose results are outputs (by op index); none of them lends its buffer
    out_ops = [int(renamed[f"r{k}"][1:]) for k in outs]
    last_use = {int(r[1:]): k for k, (_op, refs, _p) in enumerate(ops) for r in refs
                if r[0] == "r" and int(r[1:]) not in out_ops}
    lines = [f"def chain({', '.join(f'i{j}' for j in range(n_all))}):"]
    env: dict[str, Any] = {"_own": _own, "_fits": _fits}
    for k, (op, refs, _p) in enumerate(ops):
        env[f"f{k}"] = CHAIN_OPS[op][1]
        dying = [r for r in refs if r[0] == "r" and last_use.get(int(r[1:])) == k]
        if not dying:
            out = "None"
        elif len(refs) == 1:
            out = f"_own({dying[0]})"
        else:
            buf = dying[0]
            other = refs[1] if refs[0] == buf else refs[0]
            out = f"_fits({buf}, {other})"
        lines.append(f"    r{k} = f{k}({', '.join(refs)}, out={out})")
    if len(out_ops) == 1:
        lines.append(f"    return r{len(ops) - 1}")
    else:
        lines.append(f"    return ({', '.join(f'r{j}' for j in out_ops)},)")
    exec(compile("\n".join(lines), "<_DfgElementwiseChain>", "exec"), env)  # noqa: S102
    numpy_chain, code = env["chain"], _native_code(ops, n_all)
    # the ops before the last whose results the sweep also writes out
    extra = np.array(out_ops[:-1], np.int32).tobytes() if len(out_ops) > 1 else None
    if code is None or extra is not None:
        run = numpy_chain       # several outputs: the sweep runs from ``hit`` below
    else:
        def run(*args: Any) -> Any:
            out = _native.chain_on(code, args)
            return numpy_chain(*args) if out is None else out
    if pieces or extra is not None or any(op in _CHECKED for op, _r, _p in parsed):
        sources = [int(parsed[k][1][0][1:]) for k in pieces]
        # input shapes -> (the pieces' indices, the sweep's layout or None)
        plans: dict[tuple, tuple] = {}

        def plan_of(shapes: tuple) -> tuple:
            got = plans.get(shapes)
            if got is None:
                plan, results = _shape_plan(parsed, shapes)   # raises as the ops would
                out_shape = results[-1]
                # the sweep computes every op on the output's blocks: an output of another
                # shape (broadcast to it only later) is left to the numpy chain
                sweep = None if code is None or any(results[k] != out_shape for k in outs) \
                    else _sweep_layout(parsed, used, pieces, shapes, plan, out_shape)
                if len(plans) >= _LAYOUT_MAX:
                    plans.clear()
                # the sweep's operands picked from the inputs in one C call (an LSTM cell's
                # gates read 10 operands from 4 inputs: a comprehension cost 0.6 us a call)
                pick = None if sweep is None else _picker(sweep[0])
                split = None if sweep is None else \
                    _native.chain_split(sweep[3], sweep[4], code)
                got = plans[shapes] = (plan, out_shape, sweep, pick, split)
            return got

        def sweep_for(shapes: tuple) -> Sweep | None:
            try:
                _plan, out_shape, sweep, _pick, _split = plan_of(shapes)
            except (InvalidArgumentError, ValueError):
                return None
            if sweep is None:
                return None
            srcs, kinds, layout, rows, cols = sweep
            return Sweep(tuple(srcs), kinds, layout, rows, cols, code, extra, out_shape)

        def hit(*inputs: Any) -> Any:
            try:
                shapes = tuple([x.shape for x in inputs])
            except AttributeError:
                shapes = tuple(getattr(x, "shape", ()) for x in inputs)
            plan, out_shape, sweep, pick, split = plan_of(shapes)
            if sweep is not None and (ext := _native.extension()) is not None:
                out = np.empty(out_shape, _F32)
                try:    # (the interface checks each buffer: float32, C-contiguous, long enough)
                    if extra is None:
                        ext.chain_f32(pick(inputs), sweep[1], code, out,
                                      sweep[3], sweep[4], sweep[2], None, None, *split)
                        return out
                    more = tuple([np.empty(out_shape, _F32) for _ in out_ops[1:]])
                    ext.chain_f32(pick(inputs), sweep[1], code, out,
                                  sweep[3], sweep[4], sweep[2], extra, more, *split)
                    return (*more, out)
                except (TypeError, ValueError):
                    pass        # views of them, copied, below
            return run(*(inputs[j] for j in used),
                       *(inputs[src] if ix is None else inputs[src][ix]
                         for src, (ix, *_e) in zip(sources, plan)))
    else:
        hit = run if len(used) == n_inputs else (
            lambda *inputs: run(*(inputs[j] for j in used)))

        def sweep_for(shapes: tuple) -> Sweep | None:
            if code is None:
                return None
            lay = _native.chain_layout(tuple(shapes[j] for j in used))
            if lay is None:
                return None
            out_shape, kinds, rows, cols, layout = lay
            return Sweep(tuple(used), kinds, layout, rows, cols, code, None, out_shape)
    # what the sweep runs for given input shapes (executor/recurrent.py runs it in its loop)
    hit.sweep_for = sweep_for
    _PROGRAMS[key] = hit
    return hit


def _picker(index: list[int]) -> Callable[[tuple], tuple]:
    """``f(xs) == tuple(xs[j] for j in index)``, as one C call where it can be."""
    if len(index) >= 2:
        return itemgetter(*index)
    return lambda xs, j=index[0]: (xs[j],)


def _program_of(attrs: Any) -> tuple[str, ...]:
    return tuple(attrs.get("program") or ())


def _outputs_attr(attrs: Any) -> tuple[int, ...]:
    """The node's ``outputs``, checked against its ``M`` (InvalidArgumentError)."""
    outputs = tuple(int(k) for k in attrs.get("outputs") or ())
    if int(attrs.get("M") or 1) != max(1, len(outputs)):
        raise InvalidArgumentError(f"_DfgElementwiseChain: M = {attrs.get('M')} outputs, "
                                   f"outputs lists {len(outputs)}")
    return outputs


def _array_form(attrs: Any) -> Callable[..., Any] | None:
    """The chain's array form: the kernel's core for the node's program (None for a program
    the kernel refuses: the kernel call gives the error)."""
    try:
        return _compile(_program_of(attrs), int(attrs.get("N") or 0), _outputs_attr(attrs))
    except (InvalidArgumentError, UnimplementedError, ValueError):
        return None


# (program, number of inputs, input type, output type) -> the composed scalar form or None
_SCALAR_TEXTS: dict[tuple, str | None] = {}


def _scalar_text(attrs: Any, input_types: Any, out_types: Any) -> str | None:
    """The chain's scalar form: its members' own scalar forms (the registry's records for
    Add, Mul, Neg, ...) composed into one expression over the chain's inputs, each result
    written where its one reader reads it. None when a member has no scalar form for the
    dtype, or reads an operand twice, or a result is not read exactly once (its text would
    be evaluated twice)."""
    program, n = _program_of(attrs), len(input_types)
    if len(attrs.get("outputs") or ()) > 1:
        return None         # one expression has one value
    key = (program, n, tuple(input_types), tuple(out_types))
    if key in _SCALAR_TEXTS:
        return _SCALAR_TEXTS[key]
    _SCALAR_TEXTS[key] = text = _compose_scalar(program, n, input_types, out_types)
    if len(_SCALAR_TEXTS) > _LAYOUT_MAX:
        _SCALAR_TEXTS.clear()
    return text


def _compose_scalar(program: tuple[str, ...], n: int, input_types: Any, out_types: Any
                    ) -> str | None:
    try:
        parsed = _parse(program, n)
    except (InvalidArgumentError, UnimplementedError):
        return None
    reads: dict[str, int] = {}
    for _op, refs, _params in parsed:
        for r in refs:
            reads[r] = reads.get(r, 0) + 1
    if any(reads.get(f"r{k}") != 1 for k in range(len(parsed) - 1)):
        return None
    ss = specs()
    texts: list[str] = []
    for op, refs, _params in parsed:
        form = ss[op].scalar if op in ss else None
        types = tuple(input_types[:1]) * len(refs)
        if form is None or form.compose is not None or "{kernel}" in form.expr \
                or not form.applies(types, out_types, {}):
            return None
        text = form.text(types, out_types)
        if any(text.count(f"{{{j}}}") > 1 for j in range(len(refs))):
            return None
        operands = [f"{{{r[1:]}}}" if r[0] == "i" else f"({texts[int(r[1:])]})" for r in refs]
        texts.append(text.format(*operands, out="{out}", nz_out="{nz_out}"))
    return texts[-1]


@kernel("_DfgElementwiseChain",
        scalar=ScalarForm("", frozenset({D.DT_FLOAT, D.DT_DOUBLE}), compose=_scalar_text),
        array=ArrayForm(_array_form, frozenset({D.DT_FLOAT, D.DT_DOUBLE})))
def elementwise_chain(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    """Evaluate ``program`` (see the OpDef) as compiled straight-line code."""
    outputs = _outputs_attr(ctx.attrs)
    run = _compile(_program_of(ctx.attrs), len(inputs), outputs)
    try:
        out = run(*inputs)
    except ValueError:
        raise InvalidArgumentError(
            "Incompatible shapes: " + " vs. ".join(str(list(x.shape)) for x in inputs)
        ) from None
    dtype = ctx.output_dtypes[0] if ctx.output_dtypes else inputs[0].dtype
    if len(outputs) > 1:
        return tuple(o if type(o) is np.ndarray and o.dtype == dtype else np.asarray(o, dtype)
                     for o in out)
    return out if type(out) is np.ndarray and out.dtype == dtype else np.asarray(out, dtype)
