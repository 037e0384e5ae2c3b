"""Complex numbers and Fourier transforms: Complex, Angle, FFT/IFFT (1-3D, N-D), RFFT/IRFFT,
the Batch* aliases, AudioSpectrogram, Mfcc.

TensorFlow's CPU kernels (DUCC for the FFTs, Ooura's rdft for the spectrogram) work in the
tensor's own precision; here every transform runs in float64/complex128 and is rounded once to
the output dtype, so complex64 results are the correctly rounded ones and differ from
TensorFlow's by its own float32 rounding (about 1e-7 of the signal's magnitude).

Semantics kept from TensorFlow:

* The real transforms crop each transformed input dimension to ``fft_length`` (the innermost
  one of IRFFT* to ``fft_length / 2 + 1``) and refuse shorter inputs; IRFFT* ignore the
  imaginary parts of the DC bin and (even lengths) of the Nyquist bin, as a c2r transform does.
* An input with no elements gives an output of TensorFlow's shape that TensorFlow leaves
  uninitialized; here it is zeros. A zero ``fft_length`` on a non-empty input (TensorFlow's
  process aborts in DUCC) gives the empty output its shape function says.
* The dtype pairs are float32<->complex64 and float64<->complex128 only; other Treal/Tcomplex
  pairs fail the way TensorFlow's do (InvalidArgumentError for the FFT ops, NotFoundError for
  Complex and Angle, whose kernels are registered per pair).
* FFTND/IFFTND/RFFTND/IRFFTND: TensorFlow 2.21 has no CPU kernel for them (its CPU build
  raises NotFoundError); these kernels follow the checks of its N-D kernel (the axes must be
  the last ones, ascending; at most 3 of them, as its only kernel, the GPU one, allows) and
  crop or zero-pad every transformed dimension to ``fft_length``, which is what
  ``tf.signal.fftnd`` asks for.
* BatchFFT* / BatchIFFT* (deprecated at GraphDef version 15) have no CPU kernel in TensorFlow
  2.21: they raise NotFoundError, as TensorFlow does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, NotFoundError

from .registry import KernelContext, kernel

Array = np.ndarray

_C64 = np.dtype(np.complex64)
_C128 = np.dtype(np.complex128)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_COMPLEX_OF = {_F32: _C64, _F64: _C128}
_TF_NAME = {_F32: "float", _F64: "double", _C64: "complex64", _C128: "complex128"}


def _fmt(shape: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _name(dt: np.dtype) -> str:
    return _TF_NAME.get(np.dtype(dt), str(dt))


def _out_dtype(ctx: KernelContext, attr: str, default: np.dtype) -> np.dtype:
    v = ctx.attrs.get(attr)
    return np.dtype(v) if v is not None else default


# --- Complex, Angle -----------------------------------------------------------------------------

@kernel("Complex")
def complex_(ctx: KernelContext, real: Array, imag: Array) -> Array:
    want = _COMPLEX_OF.get(real.dtype)
    out = _out_dtype(ctx, "Tout", want)
    if out != want or imag.dtype != real.dtype:
        # TensorFlow registers Complex for (float, complex64) and (double, complex128) only
        raise NotFoundError(f"no CPU kernel for Complex with T={_name(real.dtype)}, "
                            f"Tout={_name(out)}")
    try:
        shape = np.broadcast_shapes(real.shape, imag.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"Incompatible shapes: {_fmt(real.shape)} vs. {_fmt(imag.shape)}") from None
    # Parts assigned separately: real + 1j * imag would turn an infinite imag into nan.
    r = np.empty(shape, out)
    r.real = real
    r.imag = imag
    return r


@kernel("Angle")
def angle(ctx: KernelContext, x: Array) -> Array:
    want = x.real.dtype
    out = _out_dtype(ctx, "Tout", want)
    if out != want:
        raise NotFoundError(f"no CPU kernel for Angle with T={_name(x.dtype)}, Tout={_name(out)}")
    return np.asarray(np.arctan2(x.imag, x.real), dtype=out)  # std::arg is atan2(imag, real)


# --- FFT checks shared by the fixed-rank and N-D kernels --------------------------------------

def _fft_lengths(fft_length: Array, rank: int, nd: bool) -> list[int]:
    if fft_length.ndim != 1 or fft_length.shape[0] != rank:
        got = f", but got: {fft_length.shape[0] if fft_length.ndim else 0}." if nd else ""
        raise InvalidArgumentError(f"fft_length must have shape [{rank}]{got}")
    n = [int(v) for v in fft_length]
    for i, v in enumerate(n):
        if v < 0:
            raise InvalidArgumentError(f"fft_length[{i}] must >= 0, but got: {v}")
    return n


def _check_min_lengths(x: Array, n: list[int], forward: bool) -> None:
    """The real transforms read at least ``n`` values per transformed dimension (the innermost
    of an inverse: ``n // 2 + 1`` bins); empty dimensions pass."""
    rank = len(n)
    for i, v in enumerate(n):
        need = v // 2 + 1 if not forward and i == rank - 1 else v
        d = x.ndim - rank + i
        if x.shape[d] != 0 and x.shape[d] < need:
            raise InvalidArgumentError(f"Input dimension {d} must have length of at least "
                                       f"{need} but got: {x.shape[d]}")


def _check_types(x: Array, out: np.dtype, real: bool, forward: bool) -> None:
    if real and forward:
        ok, what = _COMPLEX_OF.get(x.dtype) == out, "forward real FFT"
    elif real:
        ok, what = _COMPLEX_OF.get(out) == x.dtype, "backward real FFT"
    else:
        ok, what = x.dtype == out, "FFT"
    if not ok:
        raise InvalidArgumentError(
            f"Wrong types for {what}: in={_name(x.dtype)} out={_name(out)}")


def _transform(x: Array, n: list[int], out_shape: list[int], out: np.dtype, real: bool,
               forward: bool) -> Array:
    """The transform over the last ``len(n)`` dimensions, each cropped or zero-padded to ``n``
    (numpy's ``s``), computed in double precision."""
    if x.size == 0 or math.prod(out_shape) == 0:
        return np.zeros(out_shape, out)  # TensorFlow leaves such outputs uninitialized
    axes = tuple(range(-len(n), 0))
    if real and forward:
        r = np.fft.rfftn(x.astype(np.float64, copy=False), s=n, axes=axes)
    elif real:
        r = np.fft.irfftn(x.astype(np.complex128, copy=False), s=n, axes=axes)
    else:
        fn = np.fft.fftn if forward else np.fft.ifftn
        r = fn(x.astype(np.complex128, copy=False), s=n, axes=axes)
    return r.astype(out, copy=False)


def _rank_check(x: Array, rank: int) -> None:
    if x.ndim < rank:
        raise InvalidArgumentError(
            f"Input must have rank of at least {rank} but got: {_fmt(x.shape)}")


# --- FFT, IFFT (1-3D) -------------------------------------------------------------------------

def _complex_fft(rank: int, forward: bool):
    def run(ctx: KernelContext, x: Array) -> Array:
        _rank_check(x, rank)
        n = list(x.shape[x.ndim - rank:])
        return _transform(x, n, list(x.shape), x.dtype, False, forward)

    return run


for _r, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    kernel(f"FFT{_suffix}", heavy=True)(_complex_fft(_r, True))
    kernel(f"IFFT{_suffix}", heavy=True)(_complex_fft(_r, False))


# --- RFFT, IRFFT (1-3D) -----------------------------------------------------------------------

def _real_fft(rank: int, forward: bool):
    def run(ctx: KernelContext, x: Array, fft_length: Array) -> Array:
        _rank_check(x, rank)
        n = _fft_lengths(fft_length, rank, nd=False)
        _check_min_lengths(x, n, forward)
        out_shape = list(x.shape[:x.ndim - rank]) + n
        if forward and n[-1] != 0:
            out_shape[-1] = n[-1] // 2 + 1
        out = _out_dtype(ctx, "Tcomplex" if forward else "Treal",
                         _C64 if forward else _F32)
        _check_types(x, out, True, forward)
        return _transform(x, n, out_shape, out, True, forward)

    return run


for _r, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    kernel(f"RFFT{_suffix}", heavy=True)(_real_fft(_r, True))
    kernel(f"IRFFT{_suffix}", heavy=True)(_real_fft(_r, False))


# --- FFTND, IFFTND, RFFTND, IRFFTND -----------------------------------------------------------

def _nd_fft(real: bool, forward: bool):
    def run(ctx: KernelContext, x: Array, fft_length: Array, axes: Array) -> Array:
        if axes.ndim != 1:
            raise InvalidArgumentError(f"axes must be a vector, got shape {_fmt(axes.shape)}")
        rank = axes.shape[0]
        _rank_check(x, rank)
        if not 1 <= rank <= 3:
            raise InvalidArgumentError("Only 1D, 2D and 3D FFTs supported.")
        norm = [int(a) + x.ndim if a < 0 else int(a) for a in axes]
        for i in range(1, rank):
            if norm[i - 1] + 1 != norm[i]:
                raise InvalidArgumentError("axes must be successive and ascending.")
        if norm[-1] != x.ndim - 1:
            raise InvalidArgumentError("The last axis to perform transform on must be -1.")
        n = _fft_lengths(fft_length, rank, nd=True)
        out_shape = list(x.shape[:x.ndim - rank]) + n
        if real:
            _check_min_lengths(x, n, forward)
            if forward and n[-1] != 0:
                out_shape[-1] = n[-1] // 2 + 1
            out = _out_dtype(ctx, "Tcomplex" if forward else "Treal",
                             _C64 if forward else _F32)
        else:
            out = x.dtype
        _check_types(x, out, real, forward)
        return _transform(x, n, out_shape, out, real, forward)

    return run


kernel("FFTND")(_nd_fft(False, True))
kernel("IFFTND")(_nd_fft(False, False))
kernel("RFFTND")(_nd_fft(True, True))
kernel("IRFFTND")(_nd_fft(True, False))


# --- BatchFFT* (no CPU kernel in TensorFlow) ---------------------------------------------------

def _no_cpu_kernel(op: str):
    def run(ctx: KernelContext, x: Array) -> Array:
        raise NotFoundError(f"no CPU kernel is registered for op {op} in TensorFlow (deprecated "
                            f"at GraphDef version 15: use {op[len('Batch'):]})")

    return run


for _op in ("BatchFFT", "BatchFFT2D", "BatchFFT3D", "BatchIFFT", "BatchIFFT2D", "BatchIFFT3D"):
    kernel(_op)(_no_cpu_kernel(_op))


# --- AudioSpectrogram -------------------------------------------------------------------------

_CHUNK_ELEMS = 1 << 22  # windowed samples transformed at once: bounds the float64 working copy


@kernel("AudioSpectrogram")
def audio_spectrogram(ctx: KernelContext, x: Array) -> Array:
    window = int(ctx.attrs["window_size"])
    stride = int(ctx.attrs["stride"])
    if window <= 1:
        raise InvalidArgumentError(f"window_size must be > 1, got {window}")
    if stride <= 0:
        raise InvalidArgumentError(f"stride must be > 0, got {stride}")
    if x.ndim != 2:
        raise InvalidArgumentError(f"input must be 2-dimensional{_fmt(x.shape)}")
    samples, channels = x.shape
    fft_len = 1 << (window - 1).bit_length()  # the next power of two >= window
    bins = fft_len // 2 + 1
    frames = 0 if samples < window else 1 + (samples - window) // stride
    out = np.empty((channels, frames, bins), np.float32)
    # TensorFlow's periodic Hann window, in double; frames are windowed and transformed in
    # double and only the squared magnitude is rounded to float.
    hann = 0.5 - 0.5 * np.cos((2 * math.pi * np.arange(window)) / window)
    xt = np.ascontiguousarray(x.T, dtype=np.float64)  # [channels, samples]
    chunk = max(1, _CHUNK_ELEMS // (fft_len * max(channels, 1)))
    for f0 in range(0, frames, chunk):
        f1 = min(frames, f0 + chunk)
        idx = (np.arange(f0, f1) * stride)[:, None] + np.arange(window)
        spec = np.fft.rfft(xt[:, idx] * hann, n=fft_len, axis=-1)
        out[:, f0:f1] = spec.real * spec.real + spec.imag * spec.imag
    if not ctx.attrs.get("magnitude_squared", False):
        np.sqrt(out, out=out)  # sqrtf of the float power, as TensorFlow
    return out


# --- Mfcc -------------------------------------------------------------------------------------

_FILTERBANK_FLOOR = 1e-12


def _mel(freq: Array | float) -> Array:
    return 1127.0 * np.log1p(np.asarray(freq, np.float64) / 700.0)


def _c_int(v: float) -> int:
    """C's (int) of a double as x86 does it: out of range (or nan) gives INT_MIN."""
    return int(v) if -2.0**31 < v < 2.0**31 else -2**31


def _mfcc_error(channels: int, rate: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Mfcc initialization failed for channel count {channels} and sample rate {rate}")


@kernel("Mfcc")
def mfcc(ctx: KernelContext, spectrogram: Array, sample_rate: Array) -> Array:
    if spectrogram.ndim != 3:
        raise InvalidArgumentError(
            f"spectrogram must be 3-dimensional{_fmt(spectrogram.shape)}")
    if sample_rate.ndim != 0:
        raise InvalidArgumentError(f"Input sample_rate should be a scalar tensor, got "
                                   f"{_fmt(sample_rate.shape)} instead.")
    rate = int(sample_rate)
    # float attrs: TensorFlow holds them as float and widens them to double
    upper = float(np.float32(ctx.attrs["upper_frequency_limit"]))
    lower = float(np.float32(ctx.attrs["lower_frequency_limit"]))
    n_mel = int(ctx.attrs["filterbank_channel_count"])
    n_dct = int(ctx.attrs["dct_coefficient_count"])
    length = spectrogram.shape[2]
    if (n_mel < 1 or rate <= 0 or length < 2 or lower < 0 or upper <= lower
            or n_dct < 1 or n_dct > n_mel):
        raise _mfcc_error(length, rate)
    out_shape = spectrogram.shape[:2] + (n_dct,)

    # The mel filterbank (triangles between successive center frequencies, DC excluded).
    mel_low = float(_mel(lower))
    spacing = (float(_mel(upper)) - mel_low) / (n_mel + 1)
    centers = mel_low + spacing * (np.arange(n_mel + 1) + 1)
    hz_per_bin = 0.5 * rate / (length - 1)
    start = _c_int(1.5 + lower / hz_per_bin)
    end = _c_int(upper / hz_per_bin)
    if not 0 <= end < length:
        # TensorFlow's filterbank gives up on a spectrum this short (it logs an error) and the
        # DCT of its empty result is all zeros. (A negative end, from an overflowing limit,
        # compares as a huge unsigned there.)
        return np.zeros(out_shape, np.float32)
    melf = _mel(np.arange(start, end + 1) * hz_per_bin)
    # band[i]: the channel whose right slope bin i is on (-1: left of the first center)
    band = np.searchsorted(centers[:n_mel], melf, side="left") - 1
    safe = np.maximum(band, 0)
    weights = np.where(band >= 0,
                       (centers[safe + 1] - melf) / (centers[safe + 1] - centers[safe]),
                       (centers[0] - melf) / (centers[0] - mel_low))
    mag = np.sqrt(spectrogram[..., start:end + 1].astype(np.float64))
    right = mag * weights
    left = mag - right
    # band is non-decreasing: each channel's bins are one slice. Summing slices (instead of a
    # matrix product) keeps an inf or nan bin out of the channels it does not touch.
    edges = np.searchsorted(band, np.arange(-1, n_mel + 1), side="left")
    mel = np.zeros(spectrogram.shape[:2] + (n_mel,), np.float64)
    for c in range(n_mel):
        mel[..., c] = (right[..., edges[c + 1]:edges[c + 2]].sum(-1)
                       + left[..., edges[c]:edges[c + 1]].sum(-1))
    mel = np.log(np.where(mel < _FILTERBANK_FLOOR, _FILTERBANK_FLOOR, mel))

    # DCT-II with sqrt(2 / N) scaling, the first n_dct coefficients.
    arg = math.pi / n_mel
    cosines = math.sqrt(2.0 / n_mel) * np.cos(
        (np.arange(n_dct) * arg)[:, None] * (np.arange(n_mel) + 0.5))
    return (mel @ cosines.T).astype(np.float32)
