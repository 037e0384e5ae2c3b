"""Sources, identities and assertions: Const, Placeholder*, Identity*, NoOp, Assert ..."""

from __future__ import annotations

import sys
import threading

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, MissingFeedError

from .registry import CONST, FORWARD, KernelContext, kernel


@kernel("Const", cheap=True, transfer=CONST)
@kernel("HostConst", cheap=True)
def const(ctx):
    # bound once at plan time; kernels never mutate their inputs, so sharing is safe
    return ctx.attrs["value"]


@kernel("Placeholder", "PlaceholderV2", cheap=True)
def placeholder(ctx):
    from dfg.graphdef.dtypes import from_numpy, name
    from dfg.graphdef.tensors import format_shape

    dt = ctx.attrs.get("dtype")
    shape = ctx.attrs.get("shape")
    dts = name(from_numpy(dt)) if isinstance(dt, np.dtype) else str(dt)
    shape_s = format_shape(shape) if shape is not None else "<unknown>"
    raise MissingFeedError(
        f"placeholder '{ctx.node}' ({dts}, shape {shape_s}) must be fed",
        placeholder=ctx.node, dtype=dts, shape=shape_s)


@kernel("Identity", "StopGradient", "Snapshot", "RefIdentity", cheap=True, transfer=FORWARD)
@kernel("PlaceholderWithDefault", "PreventGradient", "EnsureShape", "CheckNumericsV2",
        cheap=True)
def identity(ctx, x):
    if ctx.op == "EnsureShape":
        want = ctx.attrs.get("shape")
        if want is not None and (len(want) != x.ndim or any(
                w is not None and w != h for w, h in zip(want, x.shape))):
            raise InvalidArgumentError(
                f"Shape of tensor {list(x.shape)} is not compatible with expected shape "
                f"{['?' if w is None else w for w in want]}")
    return x


@kernel("IdentityN", cheap=True)
def identity_n(ctx, *xs):
    return tuple(xs)


@kernel("NoOp", "ControlTrigger", cheap=True)
def no_op(ctx, *_):
    return ()


def _summarize(x, n: int) -> str:
    """One data input of Assert or Print as TF writes it: ``[`` SummarizeValue ``]``."""
    from .string import summarize_value_v1

    text = summarize_value_v1(np.asarray(x), n).decode("utf-8", "replace")
    return f"[{text}]"


class _PrintCount:
    """How many times a Print node with ``first_n`` has printed in this session."""

    __dfg_resource__ = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0


@kernel("Assert", cheap=True)
def assert_(ctx, condition, *data):
    if not bool(np.all(condition)):
        n = ctx.attrs.get("summarize", 3)
        raise InvalidArgumentError(
            "assertion failed: " + " ".join(_summarize(d, n) for d in data))
    return ()


@kernel("CheckNumerics")
def check_numerics(ctx, x):
    if np.issubdtype(x.dtype, np.inexact) and not np.all(np.isfinite(x)):
        kind = "NaN" if np.isnan(x).any() else "Inf"
        raise InvalidArgumentError(f"{ctx.attrs.get('message', '')} : Tensor had {kind} values")
    return x


@kernel("Print")
def print_(ctx, x, *data):
    first_n = int(ctx.attrs.get("first_n", -1))
    if first_n >= 0 and ctx.resources is not None:
        # TF's kernel counts its calls for as long as it lives: the session
        seen = ctx.resources.lookup_or_create(("_print_first_n", ctx.node), _PrintCount)
        with seen.lock:
            if seen.count >= first_n:
                return x
            seen.count += 1
    msg = ctx.attrs.get("message", "")
    n = ctx.attrs.get("summarize", 3)
    print(msg + "".join(_summarize(d, n) for d in data), file=sys.stderr)
    return x


@kernel("PrintV2")
def print_v2(ctx, s):
    end = ctx.attrs.get("end", "\n")
    text = s.item() if isinstance(s, np.ndarray) else s
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    print(text, end=end, file=sys.stderr if ctx.attrs.get("output_stream") != "stdout"
          else sys.stdout)
    return ()


@kernel("GuaranteeConst", "Copy", "CopyHost", cheap=True)
def guarantee_const(ctx, x):
    # GuaranteeConst only promises constness to the optimizer; Copy/CopyHost are the debugger's
    # copies (their debug_ops_spec watches nothing here): all pass the value on.
    return x


@kernel("DeepCopy", cheap=True)
def deep_copy(ctx, x):
    return x.copy()


@kernel("Timestamp", cheap=True)
def timestamp(ctx):
    import time

    return np.asarray(time.time(), dtype=np.float64)


@kernel("Abort")
def abort(ctx: KernelContext) -> None:
    """TensorFlow's Abort ends the whole process; dfg fails the step instead (a library must
    not kill its caller), with the op's message."""
    from dfg.graphdef.errors import AbortedError

    msg = ctx.attrs.get("error_msg", "") or ""
    raise AbortedError(f"Abort operation: {msg}" if msg else "Abort operation")
