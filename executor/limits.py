"""Output-size limits: refuse a kernel run whose output would exceed the step's memory budget,
before the kernel allocates it.

Most ops' outputs are about as large as their inputs, which already exist: they need no
check. The few whose output can be far larger than their inputs (Fill, Tile, Range,
BroadcastTo, Gather, MatMul, string widths and joins, ...) have an estimator, written here
and declared on the op's registry record (``OpSpec.estimate``): ``fn(k, args) -> bytes``,
from the input shapes and values and the bound attrs (``k.attrs``). ``kernel_call.call``
runs it when the step has a budget (``KernelContext.max_bytes``).

An estimator is an upper bound of what the outputs will hold, computed without allocating:
arithmetic on shapes and on the few small inputs that say a size (``dims``, ``multiples``,
``num_segments``, ...). It never raises for malformed inputs (the kernel words those errors,
as TensorFlow does); it returns 0 when it cannot tell, so a wrong input reaches the kernel.
Sizes are Python ints: a hostile shape cannot wrap around. A string element counts its
bytes plus :data:`STR_OVERHEAD` (the object array's pointer and the ``bytes`` object header).
Binary elementwise ops are estimated too (a [N,1] column plus a [1,N] row is N^2): equal
shapes and scalars return at the first test, the cost every Add pays (~0.2-0.4 us).

The same estimators keep constant folding (``graphdef/passes/constant_folding.py``) from
running a kernel whose output it could not keep. Consts are not kernels: their decoding is
bounded by ``graphdef.tensors.materialize_limit`` (8 GiB per tensor by default, the step's
budget while a Session builds a plan).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dfg.graphdef.errors import ResourceExhaustedError

from .kernels.registry import declare

# one string element: the object array's 8-byte pointer and CPython's 33-byte bytes header
STR_OVERHEAD = 41


def check(k: Any, args: list, max_bytes: int) -> None:
    need = k.size_check(k, args)
    if need > max_bytes:
        raise ResourceExhaustedError(
            f"output would need {need:,} bytes, over the step's memory budget of "
            f"{max_bytes:,} bytes (Session(max_bytes=...), --max-memory)")


def register(*ops: str) -> Callable:
    """Declare the decorated ``fn(k, args) -> bytes`` as the estimator of ``ops`` (it lives in
    their registry records: ``OpSpec.estimate``)."""
    def deco(fn: Callable[[Any, list], int]) -> Callable[[Any, list], int]:
        declare(*ops, estimate=fn)
        return fn
    return deco


# --- helpers ----------------------------------------------------------------------------------

def _ints(a: Any) -> list[int]:
    """A small integer input (a shape, sizes) as Python ints; [] when it is not one."""
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu" or a.size > 512:
        return []  # not a shape (numpy has at most 64 dims; paddings twice that)
    return [int(v) for v in a.reshape(-1).tolist()]


def _int(a: Any, default: int = 0) -> int:
    if isinstance(a, np.ndarray) and a.size == 1 and a.dtype.kind in "iuf":
        v = a.reshape(-1)[0]
        if a.dtype.kind == "f":
            return int(v) if math.isfinite(v) else default
        return int(v)
    return default


def _prod(dims: Any) -> int:
    """Elements of a shape; negative dims (invalid: the kernel says so) count as 0."""
    n = 1
    for d in dims:
        n *= max(int(d), 0)
    return n


def _out_itemsize(k: Any, i: int = 0, default: int = 8) -> int:
    """Bytes per element of output ``i``: from the OpDef's dtype, else a type attr (the
    output's type attrs before ``T``, which some ops use for an index input)."""
    dts = getattr(k, "out_dtypes", None)
    dt = dts[i] if dts and i < len(dts) else None
    if dt is None:
        for name in ("dtype", "Tout", "out_type", "output_dtype", "element_dtype", "T"):
            v = k.attrs.get(name) if k.attrs else None
            if isinstance(v, np.dtype):
                dt = v
                break
    if dt is None:
        return default
    dt = np.dtype(dt)
    return STR_OVERHEAD if dt.kind == "O" else max(dt.itemsize, 1)


def _itemsize(a: Any) -> int:
    if not isinstance(a, np.ndarray):
        return 8
    return STR_OVERHEAD if a.dtype.kind == "O" else max(a.dtype.itemsize, 1)


def _str_bytes(a: Any) -> tuple[int, int]:
    """(total bytes, longest element) of a string array."""
    if not isinstance(a, np.ndarray) or a.dtype.kind != "O" or a.size == 0:
        return 0, 0
    lens = [len(v) if isinstance(v, (bytes, str)) else 0 for v in a.reshape(-1).tolist()]
    return sum(lens), max(lens)


def _sep_len(k: Any) -> int:
    sep = k.attrs.get("separator", "") or ""
    return len(sep.encode() if isinstance(sep, str) else sep)


def _bcast(*shapes: tuple) -> int:
    """Elements of the broadcast of ``shapes`` (max per axis; a 0 dim makes it 0)."""
    rank = max((len(s) for s in shapes), default=0)
    n = 1
    for ax in range(1, rank + 1):
        m = 1
        for s in shapes:
            if len(s) >= ax:
                d = s[-ax]
                if d == 0:
                    return 0
                if d > m:
                    m = d
        n *= m
    return n


def _data_elems(a: Any) -> int:
    return a.size if isinstance(a, np.ndarray) else 0


# --- shape-taking ops -------------------------------------------------------------------------

@register("Fill")
def fill(k: Any, args: list) -> int:
    dims, value = args[0], args[1]
    n = _prod(_ints(dims))
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":
        return n * 8 + _str_bytes(value)[0] + STR_OVERHEAD  # n references to one object
    return n * _itemsize(value)


@register("BroadcastTo")
def broadcast_to(k: Any, args: list) -> int:
    x, shape = args[0], _ints(args[1])
    # numpy broadcasts to a view, but consumers and the output check make it real
    return _bcast(tuple(shape), getattr(x, "shape", ())) * (
        8 if getattr(x, "dtype", None) is not None and x.dtype.kind == "O" else _itemsize(x))


@register("Tile")
def tile(k: Any, args: list) -> int:
    x, m = args[0], _ints(args[1])
    return _data_elems(x) * _prod(m) * _itemsize(x)


@register("Range")
def range_(k: Any, args: list) -> int:
    try:
        st, li, de = (float(np.asarray(a).reshape(-1)[0]) for a in args[:3])
    except (ValueError, IndexError, TypeError):
        return 0
    if de == 0 or not all(map(math.isfinite, (st, li, de))):
        return 0  # the kernel refuses these with TensorFlow's messages
    q = abs((li - st) / de)
    return (math.ceil(q) if q < 2.0**64 else 2**64) * _out_itemsize(k, 0, 8)


@register("LinSpace")
def linspace(k: Any, args: list) -> int:
    return max(_int(args[2]), 0) * _itemsize(args[0])


@register("Pad", "PadV2", "MirrorPad", "SpaceToBatchND")
def pad(k: Any, args: list) -> int:
    x = args[0]
    p = args[1]
    if x.__class__ is np.ndarray and p.__class__ is np.ndarray and p.dtype.kind in "iu" \
            and p.shape == (x.ndim, 2) and k.op != "SpaceToBatchND":
        # the common case in one pass (the general one below cost more than a small Pad)
        n = 1
        for d, (a, b) in zip(x.shape, p.tolist()):
            n *= max(d + max(a, 0) + max(b, 0), 0)
        return n * _itemsize(x)
    shape = list(getattr(x, "shape", ()))
    if k.op == "SpaceToBatchND":
        p = _ints(args[2])
    else:
        p = _ints(args[1])
    if len(p) != 2 * len(shape):
        if k.op == "SpaceToBatchND" and len(p) <= 2 * len(shape):
            for i in range(len(p) // 2):
                shape[1 + i] += max(p[2 * i], 0) + max(p[2 * i + 1], 0)
            return _prod(shape) * _itemsize(x)
        return 0
    out = [d + max(p[2 * i], 0) + max(p[2 * i + 1], 0) for i, d in enumerate(shape)]
    return _prod(out) * _itemsize(x)


@register("OneHot")
def one_hot(k: Any, args: list) -> int:
    return _data_elems(args[0]) * max(_int(args[1]), 0) * _itemsize(args[2])


@register("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt")
def random_shape(k: Any, args: list) -> int:
    return _prod(_ints(args[0])) * _out_itemsize(k, 0, 8)


@register("Multinomial")
def multinomial(k: Any, args: list) -> int:
    logits = args[0]
    batch = logits.shape[0] if isinstance(logits, np.ndarray) and logits.ndim else 1
    # the kernel also draws one uniform per sample (float64)
    return batch * max(_int(args[1]), 0) * (_out_itemsize(k, 0, 8) + 8)


@register("SparseToDense")
def sparse_to_dense(k: Any, args: list) -> int:
    return _prod(_ints(args[1])) * _itemsize(args[2])


@register("ScatterNd")
def scatter_nd(k: Any, args: list) -> int:
    return _prod(_ints(args[2])) * _itemsize(args[1])


@register("Conv2DBackpropInput", "Conv3DBackpropInputV2", "AvgPoolGrad")
def sizes_first(k: Any, args: list) -> int:
    return _prod(_ints(args[0])) * _itemsize(args[1])


@register("Conv2DBackpropFilter")
def filter_sizes(k: Any, args: list) -> int:
    return _prod(_ints(args[1])) * _itemsize(args[0])


@register("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
          "UnsortedSegmentProd")
def unsorted_segment(k: Any, args: list) -> int:
    data, ids, num = args
    inner = _prod(data.shape[getattr(ids, "ndim", 0):]) if isinstance(data, np.ndarray) else 0
    return max(_int(num), 0) * inner * _itemsize(data)


@register("SparseSegmentSumWithNumSegments", "SparseSegmentMeanWithNumSegments",
          "SparseSegmentSqrtNWithNumSegments")
def sparse_segment(k: Any, args: list) -> int:
    data = args[0]
    inner = _prod(data.shape[1:]) if isinstance(data, np.ndarray) else 0
    return max(_int(args[3]), 0) * inner * _itemsize(data)


@register("Bincount")
def bincount(k: Any, args: list) -> int:
    return max(_int(args[1]), 0) * _itemsize(args[2])


@register("DenseBincount")
def dense_bincount(k: Any, args: list) -> int:
    x = args[0]
    rows = x.shape[0] if isinstance(x, np.ndarray) and x.ndim == 2 else 1
    return rows * max(_int(args[1]), 0) * _itemsize(args[2])


@register("SparseFillEmptyRows")
def sparse_fill_empty_rows(k: Any, args: list) -> int:
    idx, vals, dense = args[0], args[1], _ints(args[2])
    rows = max(dense[0], 0) if dense else 0
    rank = idx.shape[1] if isinstance(idx, np.ndarray) and idx.ndim == 2 else 1
    nnz = _data_elems(vals)
    # indices, values, an empty-row flag per row and the reverse index map
    return (nnz + rows) * (8 * rank + _itemsize(vals)) + rows + 8 * nnz


@register("TensorListReserve")
def tensor_list_reserve(k: Any, args: list) -> int:
    return max(_int(args[1]), 0) * 8  # one list slot per element


@register("TensorListResize")
def tensor_list_resize(k: Any, args: list) -> int:
    return max(_int(args[1]), 0) * 8


@register("TensorArrayV3")
def tensor_array(k: Any, args: list) -> int:
    return max(_int(args[0]), 0) * 64  # one small element record per index


# --- ops whose output multiplies input dimensions ---------------------------------------------

@register("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea",
          "ScaleAndTranslate")
def resize(k: Any, args: list) -> int:
    img, size = args[0], _ints(args[1])
    if not isinstance(img, np.ndarray) or img.ndim != 4 or len(size) != 2:
        return 0
    per = _itemsize(img) if k.op == "ResizeNearestNeighbor" else 4
    # the float kernels also hold a float64 copy of the output while they compute
    per = per if k.op == "ResizeNearestNeighbor" else per + 8
    return img.shape[0] * _prod(size) * img.shape[3] * per


@register("CropAndResize")
def crop_and_resize(k: Any, args: list) -> int:
    img, boxes, size = args[0], args[1], _ints(args[3])
    if not isinstance(img, np.ndarray) or img.ndim != 4 or len(size) != 2:
        return 0
    nb = boxes.shape[0] if isinstance(boxes, np.ndarray) and boxes.ndim else 0
    return nb * _prod(size) * img.shape[3] * (4 + 8)


@register("CombinedNonMaxSuppression")
def combined_nms(k: Any, args: list) -> int:
    boxes = args[0]
    batch = boxes.shape[0] if isinstance(boxes, np.ndarray) and boxes.ndim else 1
    total = max(_int(args[3]), 0)
    return batch * total * (4 * 4 + 4 + 4) + batch * 4


@register("MatrixDiag")
def matrix_diag(k: Any, args: list) -> int:
    d = args[0]
    n = d.shape[-1] if isinstance(d, np.ndarray) and d.ndim else 0
    return _data_elems(d) * n * _itemsize(d)


@register("Diag")
def diag(k: Any, args: list) -> int:
    d = args[0]
    return _data_elems(d) ** 2 * _itemsize(d)


@register("MatrixDiagV2", "MatrixDiagV3")
def matrix_diag_v2(k: Any, args: list) -> int:
    d = args[0]
    if not isinstance(d, np.ndarray) or d.ndim == 0:
        return 0
    ks = _ints(args[1]) or [0]
    lo, hi = ks[0], ks[-1]
    dlen = d.shape[-1]
    # square when neither side is given; the larger of both bounds each side
    side = max(_int(args[2], -1), _int(args[3], -1), dlen - min(hi, 0), dlen + max(lo, 0))
    batch = _prod(d.shape[:-1])  # (an over-count by the number of diagonals when lo < hi)
    return batch * side * side * _itemsize(d)


@register("Gather", "GatherV2", "ResourceGather")
def gather(k: Any, args: list) -> int:
    params, idx = args[0], args[1]
    if not isinstance(params, np.ndarray) or not isinstance(idx, np.ndarray):
        return 0  # a resource handle: the variable's size is not known here
    axis = _int(args[2]) if k.op == "GatherV2" and len(args) > 2 else 0
    axis = axis + params.ndim if axis < 0 else axis
    if params.ndim == 0 or not 0 <= axis < params.ndim:
        return 0
    per = 8 if params.dtype.kind == "O" else _itemsize(params)
    return params.size // max(params.shape[axis], 1) * idx.size * per


@register("GatherNd")
def gather_nd(k: Any, args: list) -> int:
    params, idx = args
    if not isinstance(params, np.ndarray) or not isinstance(idx, np.ndarray) or idx.ndim == 0:
        return 0
    depth = idx.shape[-1]
    per = 8 if params.dtype.kind == "O" else _itemsize(params)
    return _prod(idx.shape[:-1]) * _prod(params.shape[depth:]) * per


@register("MatMul")
def matmul(k: Any, args: list) -> int:
    a, b = args[0], args[1]
    if getattr(a, "ndim", 0) != 2 or getattr(b, "ndim", 0) != 2:
        return 0
    m = a.shape[1] if k.attrs.get("transpose_a") else a.shape[0]
    n = b.shape[0] if k.attrs.get("transpose_b") else b.shape[1]
    return m * n * _itemsize(a)


@register("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(k: Any, args: list) -> int:
    a, b = args[0], args[1]
    if getattr(a, "ndim", 0) < 2 or getattr(b, "ndim", 0) < 2:
        return 0
    m = a.shape[-1] if k.attrs.get("adj_x") else a.shape[-2]
    n = b.shape[-2] if k.attrs.get("adj_y") else b.shape[-1]
    return _bcast(a.shape[:-2], b.shape[:-2]) * m * n * max(_itemsize(a), _out_itemsize(k))


@register("Einsum")
def einsum(k: Any, args: list) -> int:
    eq = k.attrs.get("equation", "")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    if "->" not in eq:
        return 0
    lhs, out = eq.replace(" ", "").split("->")
    terms = lhs.split(",")
    if len(terms) != len(args):
        return 0
    sizes: dict[str, int] = {}
    ell: list[tuple] = []
    for t, a in zip(terms, args):
        if not isinstance(a, np.ndarray):
            return 0
        shape = a.shape
        if "..." in t:
            pre, post = t.split("...")
            n_ell = a.ndim - len(pre) - len(post)
            if n_ell < 0:
                return 0
            ell.append(shape[len(pre):len(pre) + n_ell])
            labels = list(pre) + [None] * n_ell + list(post)
        else:
            labels = list(t)
        if len(labels) != a.ndim:
            return 0
        for lab, d in zip(labels, shape):
            if lab is not None:
                sizes[lab] = max(sizes.get(lab, 0), d)
    n = _bcast(*ell) if "..." in out and ell else 1
    for lab in out.replace("...", ""):
        n *= sizes.get(lab, 0)
    return n * max(_itemsize(args[0]), 1)


@register("SparseTensorDenseMatMul")
def sparse_dense_matmul(k: Any, args: list) -> int:
    shape, b = _ints(args[2]), args[3]
    if len(shape) != 2 or getattr(b, "ndim", 0) != 2:
        return 0
    rows = shape[1] if k.attrs.get("adjoint_a") else shape[0]
    cols = b.shape[0] if k.attrs.get("adjoint_b") else b.shape[1]
    return max(rows, 0) * cols * _itemsize(b)


@register("Conv2D", "DepthwiseConv2dNative")
def conv2d(k: Any, args: list) -> int:
    """Strides and dilations only shrink the output; explicit paddings (an attr as small as
    any) and many output channels (a filter [1,1,C,N] is C*N numbers) grow it."""
    x, f = args[0], args[1]
    if getattr(x, "ndim", 0) != 4 or getattr(f, "ndim", 0) != 4:
        return 0
    nchw = (k.attrs.get("data_format") or "NHWC") in ("NCHW", b"NCHW")
    h, w = (x.shape[2], x.shape[3]) if nchw else (x.shape[1], x.shape[2])
    pads = [max(int(v), 0) for v in (k.attrs.get("explicit_paddings") or [])]
    pad = sum(pads) if len(pads) == 8 else 0
    oc = f.shape[3] if k.op == "Conv2D" else f.shape[2] * f.shape[3]
    return x.shape[0] * (h + pad) * (w + pad) * oc * _itemsize(x)


# --- broadcasting elementwise ops: an outer "sum" of a column and a row is quadratic ----------

def _broadcast2(k: Any, args: list) -> int:
    # runs before every binary elementwise op: the common cases return at the first test
    a, b = args[0], args[1]
    try:
        sa, sb = a.shape, b.shape
    except AttributeError:
        return 0
    if sa == sb or not sa or not sb:
        return 0  # no larger than an input, which already exists
    if len(sa) < len(sb):
        sa, sb = sb, sa
    off = len(sa) - len(sb)
    n = 1
    for d in sa[:off]:
        n *= d
    for x, y in zip(sa[off:], sb):
        n *= x if x > y else y   # an upper bound (0 against 1 broadcasts to 0)
    if n <= a.size or n <= b.size:
        return 0
    # outputs are of the inputs' dtype, or bool for comparisons: never wider
    return n * max(a.dtype.itemsize, b.dtype.itemsize, 1)


def _broadcast3(k: Any, args: list) -> int:
    shapes = [getattr(a, "shape", ()) for a in args[:3]]
    if shapes[0] == shapes[1] == shapes[2]:
        return 0
    return _bcast(*shapes) * max(_itemsize(args[1]), 1)


for _op in ("Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv", "FloorMod",
            "TruncateDiv", "TruncateMod", "Maximum", "Minimum", "Pow", "SquaredDifference",
            "Atan2", "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
            "LogicalAnd", "LogicalOr", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
            "RightShift", "Xdivy", "Xlogy", "Xlog1py", "MulNoNan", "Mod", "ApproximateEqual"):
    declare(_op, estimate=_broadcast2)
declare("SelectV2", estimate=_broadcast3)


def _broadcast_n(k: Any, args: list) -> int:
    """dfg's fused elementwise chain: its output is the broadcast of all its inputs (each op
    of it was estimated alike before fusing)."""
    shapes = [getattr(a, "shape", ()) for a in args]
    first = shapes[0]
    if all(s == first for s in shapes):
        return 0
    # each output (a merged LSTM cell's two) at most the broadcast
    outputs = max(len(k.attrs.get("outputs") or ()), 1)
    return _bcast(*shapes) * max(max(_itemsize(a) for a in args), 1) * outputs


declare("_DfgElementwiseChain", estimate=_broadcast_n)
# inputs of one shape make an output of that shape: these estimators answer 0 at their first
# test, which generated code makes itself before calling them (codegen.array_step)
_broadcast2.alike_inputs_fit = _broadcast3.alike_inputs_fit = True  # type: ignore[attr-defined]
_broadcast_n.alike_inputs_fit = True  # type: ignore[attr-defined]
# estimators that read nothing of the inputs but their shapes and dtypes (and the node's
# attrs): generated code asks each once per input shapes and budget (codegen.Emitter.fits),
# where a loop would ask the same every iteration
for _fn in (_broadcast2, _broadcast3, _broadcast_n, matmul, batch_matmul, conv2d):
    _fn.shapes_only = True  # type: ignore[attr-defined]


@register("Complex")
def complex_(k: Any, args: list) -> int:
    a, b = args[0], args[1]
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return 0
    return _bcast(a.shape, b.shape) * 2 * max(a.dtype.itemsize, 1)


@register("FFTND", "IFFTND", "RFFTND", "IRFFTND")
def fft_nd(k: Any, args: list) -> int:
    # zero-padding to fft_length can make the output much larger than the input
    x, n = args[0], _ints(args[1])
    if not isinstance(x, np.ndarray) or not n or len(n) > x.ndim:
        return 0
    return _prod(x.shape[:x.ndim - len(n)]) * _prod(n) * _out_itemsize(k)


@register("AudioSpectrogram")
def audio_spectrogram(k: Any, args: list) -> int:
    x = args[0]
    window, stride = int(k.attrs.get("window_size", 0)), int(k.attrs.get("stride", 0))
    if not isinstance(x, np.ndarray) or x.ndim != 2 or window < 2 or stride < 1:
        return 0
    frames = 0 if x.shape[0] < window else 1 + (x.shape[0] - window) // stride
    return x.shape[1] * frames * ((1 << (window - 1).bit_length()) // 2 + 1) * 4


# --- strings ----------------------------------------------------------------------------------

def _int_digits(x: np.ndarray) -> int:
    """Digits before the point of printf("%f") of the largest finite magnitude in ``x``."""
    if x.size == 0:
        return 1
    parts = (x.real, x.imag) if x.dtype.kind == "c" else (x,)
    with np.errstate(all="ignore"):
        big = max(float(np.max(np.abs(np.where(np.isfinite(p), p, 0)))) for p in parts)
    return len(str(int(big))) if big >= 1 else 1


@register("AsString")
def as_string(k: Any, args: list) -> int:
    x = args[0]
    if not isinstance(x, np.ndarray):
        return 0
    a = k.attrs
    width = max(int(a.get("width", -1)), 0)
    prec = int(a.get("precision", -1))
    kind = x.dtype.kind
    if kind == "O":
        natural = _str_bytes(x)[1]
    elif kind == "b":
        natural = 5
    elif kind in "iu":
        natural = 21
    else:
        natural = 8 + _int_digits(x) + (prec if prec >= 0 else 6)  # sign, point, e+308
        if kind == "c":
            natural = 2 * natural + 3
    return x.size * (max(width, natural) + STR_OVERHEAD)


@register("StringJoin")
def string_join(k: Any, args: list) -> int:
    shapes = [a.shape for a in args if isinstance(a, np.ndarray) and a.ndim]
    n = _prod(shapes[0]) if shapes else 1
    total = max(len(args) - 1, 0) * _sep_len(k) * n
    for a in args:
        b, _longest = _str_bytes(a)
        total += b * n if getattr(a, "ndim", 0) == 0 else b
    return total + n * STR_OVERHEAD


@register("Substr")
def substr(k: Any, args: list) -> int:
    x, pos = args[0], args[1]
    if not isinstance(x, np.ndarray) or not isinstance(pos, np.ndarray):
        return 0
    if x.shape == pos.shape or pos.ndim == 0:
        return 0  # each output is a piece of its own input string
    return _bcast(x.shape, pos.shape) * (_str_bytes(x)[1] + STR_OVERHEAD)


@register("StringSplit", "StringSplitV2")
def string_split(k: Any, args: list) -> int:
    x = args[0]
    b, _ = _str_bytes(x)
    # at most one token per byte plus one per string: its index pair, value and object
    return (b + _data_elems(x)) * (16 + STR_OVERHEAD)


@register("ReduceJoin", "UnsortedSegmentJoin")
def reduce_join(k: Any, args: list) -> int:
    x = args[0]
    sep = _sep_len(k)
    b, _ = _str_bytes(x)
    n = _data_elems(x)
    outs = max(_int(args[2]), 0) * _prod(x.shape[getattr(args[1], "ndim", 0):]) \
        if k.op == "UnsortedSegmentJoin" and isinstance(x, np.ndarray) else n
    return b + sep * n + (outs + 1) * STR_OVERHEAD


# --- XLA's ops (jax2tf exports): padding, dilation and gathers can grow far past the inputs ----

def _xla_dims(k: Any) -> dict[int, list[int]]:
    """The node's serialized dimension numbers (an xla proto of int64 fields), {} if none."""
    from .kernels.xla import _proto_ints

    try:
        return _proto_ints(k.attrs.get("dimension_numbers"))
    except Exception:   # noqa: BLE001 - malformed: the kernel words the error
        return {}


@register("XlaPad")
def xla_pad(k: Any, args: list) -> int:
    x = args[0]
    lo, hi, inner = _ints(args[2]), _ints(args[3]), _ints(args[4])
    shape = list(getattr(x, "shape", ()))
    if not len(lo) == len(hi) == len(inner) == len(shape):
        return 0
    out = [lo[i] + hi[i] + (d + (d - 1) * max(inner[i], 0) if d else 0)
           for i, d in enumerate(shape)]
    return _prod(out) * _itemsize(x)


@register("XlaGather")
def xla_gather(k: Any, args: list) -> int:
    idx, sizes = args[1], _ints(args[2])
    f = _xla_dims(k)
    if not isinstance(idx, np.ndarray) or not sizes:
        return 0
    ivd = (f.get(4) or [0])[-1]
    batch = _prod(d for i, d in enumerate(idx.shape) if i != ivd)
    return batch * _prod(sizes) * _itemsize(args[0])


@register("XlaDotV2", "XlaDot")
def xla_dot(k: Any, args: list) -> int:
    a, b = args[0], args[1]
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return 0
    f = _xla_dims(k)
    la = set(f.get(1, [])) | set(f.get(3, []))
    rb = set(f.get(2, [])) | set(f.get(4, []))
    batch = _prod(a.shape[d] for d in f.get(3, []) if 0 <= d < a.ndim)
    free = _prod(d for i, d in enumerate(a.shape) if i not in la) * \
        _prod(d for i, d in enumerate(b.shape) if i not in rb)
    return batch * free * max(_out_itemsize(k), 8)   # integer products widen to int64


@register("XlaReduceWindow")
def xla_reduce_window(k: Any, args: list) -> int:
    x = args[0]
    pad = _ints(args[6])
    bd = _ints(args[4])
    shape = list(getattr(x, "shape", ()))
    if len(pad) != 2 * len(shape) or len(bd) != len(shape):
        return 0
    # the dilated, padded base the windows slide over, and at most as many outputs
    base = [(d - 1) * max(bd[i], 1) + 1 + max(pad[2 * i], 0) + max(pad[2 * i + 1], 0)
            if d else 0 for i, d in enumerate(shape)]
    return 2 * _prod(base) * _itemsize(x)


@register("XlaConvV2", "XlaConv")
def xla_conv(k: Any, args: list) -> int:
    x, w = args[0], args[1]
    pad, ld = _ints(args[3]), _ints(args[4])
    if not isinstance(x, np.ndarray) or not isinstance(w, np.ndarray):
        return 0
    f = _xla_dims(k)
    sp, ksp = f.get(11, []), f.get(6, [])
    if len(pad) != 2 * len(sp) or len(ld) != len(sp) or len(ksp) != len(sp):
        return 0
    try:
        n, c = x.shape[(f.get(7) or [0])[-1]], x.shape[(f.get(8) or [0])[-1]]
        o = w.shape[(f.get(4) or [0])[-1]]
        full = [(x.shape[d] - 1) * max(ld[i], 1) + 1 + max(pad[2 * i], 0)
                + max(pad[2 * i + 1], 0) if x.shape[d] else 0 for i, d in enumerate(sp)]
    except IndexError:
        return 0
    # the padded input, and the output (at most one position per padded input position)
    # with a product of the same size per kernel offset
    return (n * c * _prod(full) + 2 * n * o * _prod(full)) * 8
