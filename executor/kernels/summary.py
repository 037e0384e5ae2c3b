"""Summaries: the TF1 summary ops that return serialized ``Summary`` protos (ScalarSummary,
HistogramSummary, ImageSummary, AudioSummary(V2), TensorSummary(V2), MergeSummary), and the
TF2 summary-writer ops.

The proto-returning ops build TensorFlow's ``tensorflow.Summary`` (schemas/summary.proto)
and serialize it; the bytes are TensorFlow's:

* histograms use TensorFlow's default buckets (limits growing by 10% from 1e-12 to 1e20,
  mirrored, with 0 and +-DBL_MAX; a value goes to the first bucket whose limit is above it),
  min / max / num / sum / sum_squares accumulated in double in element order, and runs of
  empty buckets folded into the next limit; NaN or infinity is an InvalidArgumentError;
* images are PNGs written as TensorFlow's libpng writes them (formats.py's encoder); float
  and half images are scaled per image: by 255 / max when no finite value is negative, else
  by 127 / max|x| around 128, in the image's own precision and truncated to uint8; pixels
  with a non-finite channel take ``bad_color``;
* audio is 16-bit PCM WAV (formats.py's encoder) at ``lrintf(sample_rate)`` Hz;
* tensors are stored as ``Tensor::AsProtoTensorContent`` stores them (``tensor_content``,
  ``string_val`` for strings); TensorSummary (v1) names the node in ``node_name``.

Writer ops (SummaryWriter, CreateSummaryFileWriter, CreateSummaryDbWriter, Write*Summary,
FlushSummaryWriter, CloseSummaryWriter): dfg writes no event files and opens no database.
A writer is a session-lifetime resource that exists from its Create* op to its close (so,
as in TensorFlow, writing through a writer never created or already closed is a
NotFoundError); the Write* ops check their inputs as TensorFlow's kernels do (scalar step
and tag, NaN in a histogram, image and audio shapes, parseable protos ...) and then do
nothing, so graphs built with ``tf.summary`` run. Where TensorFlow's kernel would crash the
process (a non-scalar step, an empty scalar value, a 1-D audio tensor) they raise
InvalidArgumentError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    DataLossError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
)

from ..resources import ResourceHandle
from .registry import KernelContext, kernel

_DBL_MAX = float(np.finfo(np.float64).max)
_OBJ = np.dtype(object)


def _pb():
    from dfg.schemas import summary_pb2

    return summary_pb2


def _fmt(shape: tuple) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _scalar_bytes(x: np.ndarray, message: str) -> bytes:
    if x.ndim != 0:
        raise InvalidArgumentError(message)
    v = x.reshape(-1)[0]
    return v if isinstance(v, bytes) else str(v).encode()


def _tag(b: bytes) -> str:
    # proto3 strings are text: TF's C++ would store the bytes as they are; invalid UTF-8
    # (which TensorBoard could not show anyway) is replaced
    return b.decode("utf-8", "replace")


def _serialized(summary: Any) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


# --- ScalarSummary -------------------------------------------------------------------------

@kernel("ScalarSummary")
def scalar_summary(ctx: KernelContext, tags: np.ndarray, values: np.ndarray) -> np.ndarray:
    if tags.shape != values.shape:
        raise InvalidArgumentError(
            f"tags and values are not the same shape: {_fmt(tags.shape)} != "
            f"{_fmt(values.shape)}")
    s = _pb().Summary()
    floats = values.reshape(-1).astype(np.float32).tolist()
    for t, v in zip(tags.reshape(-1).tolist(), floats):
        val = s.value.add()
        val.tag = _tag(t if isinstance(t, bytes) else str(t).encode())
        val.simple_value = v
    return _serialized(s)


# --- HistogramSummary ----------------------------------------------------------------------

_LIMITS: np.ndarray | None = None


def default_bucket_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket limits (tsl/lib/histogram/histogram.cc)."""
    global _LIMITS
    if _LIMITS is None:
        pos = []
        v = 1.0e-12
        while v < 1.0e20:   # each limit 10% above the last, in double
            pos.append(v)
            v *= 1.1
        pos.append(_DBL_MAX)
        _LIMITS = np.array([-x for x in reversed(pos)] + [0.0] + pos, dtype=np.float64)
    return _LIMITS


def _histogram_values(values: np.ndarray, name: str) -> np.ndarray:
    x = values.reshape(-1).astype(np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        first = x[int(np.argmax(bad))]
        what = "Nan" if np.isnan(first) else "Infinity"
        raise InvalidArgumentError(f"{what} in summary histogram for: {name}")
    return x


def histogram_proto(x: np.ndarray, proto: Any) -> None:
    """Fill a HistogramProto as TF's Histogram::Add and EncodeToProto(drop zero buckets)."""
    limits = default_bucket_limits()
    n = len(limits)
    if x.size:
        idx = np.minimum(np.searchsorted(limits, x, side="right"), n - 1)
        counts = np.bincount(idx, minlength=n).astype(np.float64)
        proto.min = float(min(x.min(), _DBL_MAX))
        proto.max = float(max(x.max(), -_DBL_MAX))
        proto.num = float(x.size)
        # TF adds in element order: an accumulate keeps that order (np.sum would pair up)
        proto.sum = float(np.add.accumulate(x)[-1])
        proto.sum_squares = float(np.add.accumulate(x * x)[-1])
    else:
        counts = np.zeros(n)
        proto.min, proto.max = _DBL_MAX, -_DBL_MAX
    # a run of empty buckets is one entry at the run's last limit, with its (zero) count
    nz = counts > 0
    keep = nz | np.append(nz[1:], True)
    proto.bucket_limit.extend(limits[keep].tolist())
    proto.bucket.extend(counts[keep].tolist())


@kernel("HistogramSummary")
def histogram_summary(ctx: KernelContext, tag: np.ndarray, values: np.ndarray) -> np.ndarray:
    if tag.ndim != 0:
        raise InvalidArgumentError("tags must be scalar")
    x = _histogram_values(values, ctx.node)
    s = _pb().Summary()
    v = s.value.add()
    v.tag = _tag(_scalar_bytes(tag, "tags must be scalar"))
    histogram_proto(x, v.histo)
    return _serialized(s)


# --- ImageSummary --------------------------------------------------------------------------

_IMAGE_DTYPES = ("uint8", "float16", "float32", "float64")


def _check_image(tensor: np.ndarray) -> tuple[int, int, int, int]:
    if not (tensor.ndim == 4 and tensor.shape[3] in (1, 3, 4)):
        raise InvalidArgumentError(
            f"Tensor must be 4-D with last dim 1, 3, or 4, not {_fmt(tensor.shape)}")
    b, h, w, d = tensor.shape
    if b >= 1 << 31 or h >= 1 << 31 or w >= 1 << 31 or h * w >= 1 << 29:
        raise InvalidArgumentError(f"Tensor too large for summary {_fmt(tensor.shape)}")
    if h * w <= 0 or d <= 0:
        raise InvalidArgumentError(
            f"input tensor must have non-zero dims. Found: [{b}, {h}, {w}, {d}].")
    return b, h, w, d


def _check_bad_color(bad_color: np.ndarray, depth: int, floating: bool) -> None:
    if bad_color.ndim != 1:
        raise InvalidArgumentError(
            f"bad_color must be a vector, got shape {_fmt(bad_color.shape)}")
    if floating and bad_color.shape[0] < depth:
        raise InvalidArgumentError(
            f"expected depth <= bad_color.size, got depth = {depth}, bad_color.size = "
            f"{bad_color.shape[0]}")


def _to_uint8(img: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """One float image [h, w, d] as TF's NormalizeFloatImage makes it uint8."""
    dt = img.dtype
    finite = np.isfinite(img).all(axis=-1)
    good = img[finite].astype(np.float32)
    lo = good.min() if good.size else np.float32(np.inf)
    hi = good.max() if good.size else np.float32(-np.inf)
    tiny = np.float32(1e-6)
    if lo < 0:
        m = max(abs(lo), abs(hi))
        scale, offset = (np.float32(0) if m < tiny else np.float32(127) / m), np.float32(128)
    else:
        scale, offset = (np.float32(0) if hi < tiny else np.float32(255) / hi), np.float32(0)
    # in the image's precision (half stays half), then truncated as static_cast<uint8>
    with np.errstate(invalid="ignore", over="ignore"):
        y = img * dt.type(scale) + dt.type(offset)
        out = np.where(finite[..., None], y, 0).astype(np.uint8)
    out[~finite] = bad_color[:img.shape[-1]]
    return out


@kernel("ImageSummary")
def image_summary(ctx: KernelContext, tag: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    from .formats import _png_encode

    max_images = int(ctx.attrs.get("max_images", 3))
    if max_images >= 1 << 31:
        raise InvalidArgumentError("max_images must be < 2^31")
    bad_color = np.asarray(ctx.attrs.get("bad_color", np.array([255, 0, 0, 255], np.uint8)))
    if bad_color.dtype != np.uint8:
        raise InvalidArgumentError(
            f"bad_color must be uint8, got {D.name(D.from_numpy(bad_color.dtype))}")
    if bad_color.ndim != 1:
        raise InvalidArgumentError(
            f"bad_color must be a vector, got shape {_fmt(bad_color.shape)}")
    if tag.ndim != 0:
        raise InvalidArgumentError("Tags must be a scalar")
    if tensor.dtype.name not in _IMAGE_DTYPES:
        raise InvalidArgumentError(f"ImageSummary does not take {tensor.dtype} images")
    b, h, w, d = _check_image(tensor)
    floating = tensor.dtype != np.uint8
    if floating:
        _check_bad_color(bad_color, d, True)
    base = _tag(_scalar_bytes(tag, "Tags must be a scalar"))
    s = _pb().Summary()
    for i in range(min(max_images, b)):
        v = s.value.add()
        # the tag depends on the number of images asked for, not produced
        v.tag = f"{base}/image/{i}" if max_images > 1 else f"{base}/image"
        img = tensor[i] if not floating else _to_uint8(tensor[i], bad_color)
        v.image.height, v.image.width, v.image.colorspace = h, w, d
        try:
            v.image.encoded_image_string = _png_encode(np.ascontiguousarray(img), -1)
        except Exception as e:  # noqa: BLE001 - TF: "PNG encoding failed"
            raise InternalError(f"PNG encoding failed: {e}") from None
    return _serialized(s)


# --- AudioSummary --------------------------------------------------------------------------

def _check_audio(tensor: np.ndarray) -> None:
    if not 2 <= tensor.ndim <= 3:
        raise InvalidArgumentError(f"Tensor must be 3-D or 2-D, got: {_fmt(tensor.shape)}")


def _audio(ctx: KernelContext, tag: np.ndarray, tensor: np.ndarray, rate: float) -> np.ndarray:
    from .formats import wav_bytes

    if tag.ndim != 0:
        raise InvalidArgumentError("Tag must be a scalar")
    _check_audio(tensor)
    base = _tag(_scalar_bytes(tag, "Tag must be a scalar"))
    rate32 = np.float32(rate)
    if not rate32 > 0:
        raise InvalidArgumentError("sample_rate must be > 0")
    max_outputs = int(ctx.attrs.get("max_outputs", 3))
    b, frames = tensor.shape[0], tensor.shape[1]
    channels = 1 if tensor.ndim == 2 else tensor.shape[2]
    # lrintf: the current rounding mode (to nearest, ties to even); 0 becomes 1
    hz = int(np.rint(rate32)) if np.isfinite(rate32) and rate32 < 2.0**63 else 1 << 63
    hz = max(hz, 1)
    s = _pb().Summary()
    for i in range(min(max_outputs, b)):
        v = s.value.add()
        v.tag = f"{base}/audio/{i}" if max_outputs > 1 else f"{base}/audio"
        a = v.audio
        a.sample_rate = float(rate32)
        a.num_channels = channels
        a.length_frames = frames
        a.content_type = "audio/wav"
        clip = tensor[i].reshape(frames, channels)
        a.encoded_audio_string = wav_bytes(clip, hz)
    return _serialized(s)


@kernel("AudioSummary")
def audio_summary(ctx: KernelContext, tag: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    return _audio(ctx, tag, tensor, float(ctx.attrs["sample_rate"]))


@kernel("AudioSummaryV2")
def audio_summary_v2(ctx: KernelContext, tag: np.ndarray, tensor: np.ndarray,
                     sample_rate: np.ndarray) -> np.ndarray:
    if tag.ndim != 0:
        raise InvalidArgumentError("Tag must be a scalar")
    _check_audio(tensor)
    if sample_rate.size != 1:
        raise InvalidArgumentError("sample_rate must be rank-0 or contain a single value")
    return _audio(ctx, tag, tensor, float(sample_rate.reshape(-1)[0]))


# --- TensorSummary -------------------------------------------------------------------------

def tensor_proto(x: np.ndarray, proto: Any, dtype: int | None = None) -> None:
    """Tensor::AsProtoTensorContent (AsProtoField for strings) into ``proto``; ``dtype``: the
    DataType when numpy's is not it (bfloat16 runs as float32)."""
    bf16 = dtype is not None and D.base(dtype) == D.DT_BFLOAT16
    proto.dtype = D.DT_BFLOAT16 if bf16 else D.from_numpy(x.dtype)
    proto.tensor_shape.SetInParent()   # TF always sets the shape, [] included
    for d in x.shape:
        proto.tensor_shape.dim.add().size = d
    if bf16:
        if x.size:
            proto.tensor_content = D.bfloat16_bits(x).astype("<u2").tobytes()
    elif x.dtype == _OBJ:
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode()
                                for v in x.reshape(-1))
    elif x.size:
        le = x.dtype.newbyteorder("<") if x.dtype.itemsize > 1 else x.dtype
        proto.tensor_content = np.ascontiguousarray(x, dtype=le).tobytes()


def _input_dtype(ctx: KernelContext, i: int) -> int | None:
    """Input ``i``'s DataType, when the node is in a graph."""
    return ctx.input_dtypes[i] if len(ctx.input_dtypes) > i else None


@kernel("TensorSummaryV2")
def tensor_summary_v2(ctx: KernelContext, tag: np.ndarray, tensor: np.ndarray,
                      metadata: np.ndarray) -> np.ndarray:
    if tag.ndim != 0:
        raise InvalidArgumentError("tag must be scalar")
    if metadata.ndim != 0:
        raise InvalidArgumentError("serialized_summary_metadata must be scalar")
    s = _pb().Summary()
    v = s.value.add()
    v.tag = _tag(_scalar_bytes(tag, "tag must be scalar"))
    tensor_proto(tensor, v.tensor, _input_dtype(ctx, 1))
    v.metadata.SetInParent()
    _parse_lenient(v.metadata, _scalar_bytes(metadata, ""))
    return _serialized(s)


def _parse_lenient(msg: Any, data: bytes) -> None:
    """TF ignores whether the metadata parses: keep what does."""
    from google.protobuf.message import DecodeError

    try:
        msg.MergeFromString(data)
    except DecodeError:
        msg.Clear()


@kernel("TensorSummary")
def tensor_summary(ctx: KernelContext, tensor: np.ndarray) -> np.ndarray:
    s = _pb().Summary()
    v = s.value.add()
    v.node_name = ctx.node
    tensor_proto(tensor, v.tensor, _input_dtype(ctx, 0))
    return _serialized(s)


# --- MergeSummary --------------------------------------------------------------------------

def _parse_summaries(x: np.ndarray) -> list[Any]:
    from google.protobuf.message import DecodeError

    out = []
    for b in x.reshape(-1).tolist():
        try:
            out.append(_pb().Summary.FromString(b if isinstance(b, bytes) else
                                                str(b).encode()))
        except DecodeError:
            out.append(None)
    return out


@kernel("MergeSummary")
def merge_summary(ctx: KernelContext, *inputs: np.ndarray) -> np.ndarray:
    s = _pb().Summary()
    tags: set[str] = set()
    for x in inputs:
        for parsed in _parse_summaries(x):
            if parsed is None:
                raise InvalidArgumentError("Could not parse one of the summary inputs")
            for v in parsed.value:
                # TensorSummary (v1) values have no tag: never duplicates
                if v.tag and v.tag in tags:
                    raise InvalidArgumentError(
                        f"Duplicate tag {v.tag} found in summary inputs ")
                tags.add(v.tag)
                s.value.add().CopyFrom(v)
    return _serialized(s)


# --- summary writers (no files: see the module docstring) ----------------------------------

class SummaryWriter:
    """A writer that exists (dfg keeps nothing it would write)."""

    __dfg_resource__ = True

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"SummaryWriter({self.kind})"


def _writer_key(handle: Any) -> tuple:
    if not isinstance(handle, ResourceHandle):
        raise InvalidArgumentError(
            f"expected a summary writer handle, found {type(handle).__name__}")
    return (handle.container, handle.name, "SummaryWriter")   # typed, as TF's ResourceMgr


def _writer(ctx: KernelContext, handle: Any) -> SummaryWriter:
    w = ctx.resources.lookup(_writer_key(handle))
    if w is None:
        raise NotFoundError(f"Resource {handle.container or 'localhost'}/{handle.name}/"
                            "SummaryWriterInterface does not exist.")
    return w


@kernel("SummaryWriter", cheap=True)
def summary_writer(ctx: KernelContext) -> ResourceHandle:
    a = ctx.attrs
    return ResourceHandle(a.get("container") or "", a.get("shared_name") or ctx.node)


def _scalars(pairs: list[tuple[str, np.ndarray]], suffix: str = " must be a scalar") -> None:
    for name, x in pairs:
        if x.ndim != 0:
            raise InvalidArgumentError(f"{name}{suffix}")


@kernel("CreateSummaryFileWriter", cheap=True)
def create_summary_file_writer(ctx: KernelContext, writer: Any, logdir: np.ndarray,
                               max_queue: np.ndarray, flush_millis: np.ndarray,
                               filename_suffix: np.ndarray) -> tuple:
    _scalars([("logdir", logdir), ("max_queue", max_queue), ("flush_millis", flush_millis),
              ("filename_suffix", filename_suffix)])
    ctx.resources.lookup_or_create(_writer_key(writer), lambda: SummaryWriter("file"))
    return ()


@kernel("CreateSummaryDbWriter", cheap=True)
def create_summary_db_writer(ctx: KernelContext, writer: Any, db_uri: np.ndarray,
                             experiment_name: np.ndarray, run_name: np.ndarray,
                             user_name: np.ndarray) -> tuple:
    _scalars([("db_uri", db_uri), ("experiment_name", experiment_name),
              ("run_name", run_name), ("user_name", user_name)])
    ctx.resources.lookup_or_create(_writer_key(writer), lambda: SummaryWriter("db"))
    return ()


@kernel("FlushSummaryWriter", cheap=True)
def flush_summary_writer(ctx: KernelContext, writer: Any) -> tuple:
    _writer(ctx, writer)
    return ()


@kernel("CloseSummaryWriter", cheap=True)
def close_summary_writer(ctx: KernelContext, writer: Any) -> tuple:
    _writer(ctx, writer)
    ctx.resources.delete(_writer_key(writer))
    return ()


def _step_and_tag(step: np.ndarray, tag: np.ndarray | None) -> None:
    # TensorFlow reads them with scalar<>(), which aborts the process for other shapes
    _scalars([("step", step)] + ([("tag", tag)] if tag is not None else []))


@kernel("WriteScalarSummary", cheap=True)
def write_scalar_summary(ctx: KernelContext, writer: Any, step: np.ndarray, tag: np.ndarray,
                         value: np.ndarray) -> tuple:
    _writer(ctx, writer)
    _step_and_tag(step, tag)
    if value.size == 0:   # TF reads element 0
        raise InvalidArgumentError("WriteScalarSummary needs a value, got an empty tensor")
    return ()


@kernel("WriteHistogramSummary", cheap=True)
def write_histogram_summary(ctx: KernelContext, writer: Any, step: np.ndarray,
                            tag: np.ndarray, values: np.ndarray) -> tuple:
    _writer(ctx, writer)
    _step_and_tag(step, tag)
    _histogram_values(values, _tag(_scalar_bytes(tag, "tag must be a scalar")))
    return ()


@kernel("WriteImageSummary", cheap=True)
def write_image_summary(ctx: KernelContext, writer: Any, step: np.ndarray, tag: np.ndarray,
                        tensor: np.ndarray, bad_color: np.ndarray) -> tuple:
    if int(ctx.attrs.get("max_images", 3)) >= 1 << 31:
        raise InvalidArgumentError("max_images must be < 2^31")
    _writer(ctx, writer)
    _step_and_tag(step, tag)
    if bad_color.ndim != 1:
        raise InvalidArgumentError(
            f"bad_color must be a vector, got shape {_fmt(bad_color.shape)}")
    _b, _h, _w, d = _check_image(tensor)
    _check_bad_color(bad_color, d, tensor.dtype != np.uint8)
    return ()


@kernel("WriteAudioSummary", cheap=True)
def write_audio_summary(ctx: KernelContext, writer: Any, step: np.ndarray, tag: np.ndarray,
                        tensor: np.ndarray, sample_rate: np.ndarray) -> tuple:
    _writer(ctx, writer)
    _step_and_tag(step, tag)
    _scalars([("sample_rate", sample_rate)])
    _check_audio(tensor)
    if not np.float32(sample_rate) > 0:
        raise InvalidArgumentError("sample_rate must be > 0")
    return ()


@kernel("WriteSummary", cheap=True)
def write_summary(ctx: KernelContext, writer: Any, step: np.ndarray, tensor: np.ndarray,
                  tag: np.ndarray, summary_metadata: np.ndarray) -> tuple:
    _writer(ctx, writer)
    _step_and_tag(step, tag)
    _scalars([("summary_metadata", summary_metadata)])
    return ()


@kernel("WriteRawProtoSummary", cheap=True)
def write_raw_proto_summary(ctx: KernelContext, writer: Any, step: np.ndarray,
                            tensor: np.ndarray) -> tuple:
    _writer(ctx, writer)
    _step_and_tag(step, None)
    for i, parsed in enumerate(_parse_summaries(tensor)):
        if parsed is None:
            raise DataLossError(
                f"Bad tf.compat.v1.Summary binary proto tensor string at index {i}")
    return ()


@kernel("WriteGraphSummary", cheap=True)
def write_graph_summary(ctx: KernelContext, writer: Any, step: np.ndarray,
                        tensor: np.ndarray) -> tuple:
    from google.protobuf.message import DecodeError

    from dfg.schemas import graph_pb2

    _writer(ctx, writer)
    _step_and_tag(step, None)
    _scalars([("tensor", tensor)])
    try:
        graph_pb2.GraphDef.FromString(_scalar_bytes(tensor, ""))
    except DecodeError:
        raise DataLossError("Bad tf.GraphDef binary proto tensor string") from None
    return ()
