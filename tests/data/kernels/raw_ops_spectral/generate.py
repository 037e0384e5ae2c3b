"""Expected values for the spectral kernels (Complex, Angle, the FFTs, AudioSpectrogram, Mfcc),
computed by TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_spectral/generate.py

Besides manifest.json / arrays.npz / graphs/ it writes ``fftnd.json``: TensorFlow 2.21 has no
CPU kernel for FFTND, IFFTND, RFFTND and IRFFTND (they raise NotFoundError), so their expected
values come from TensorFlow's fixed-rank ops (FFT2D, RFFT3D, ...) run on the input cropped or
zero-padded to ``fft_length`` (what ``tf.signal.fftnd`` asks of them); tests/kernels/
test_spectral.py replays those.

Tolerances (``tol``, used as rtol and atol): TensorFlow transforms complex64 in float32 and
dfg in float64 rounded once, so results differ by TensorFlow's own rounding, about
1e-7 * |signal| * log2(n) (at most 2e-6 here, on outputs up to ~30): complex64 cases keep the
default 1e-5; complex128 cases use 1e-12 (seen: below 2e-15). AudioSpectrogram and Mfcc work
in double like TensorFlow's and agree to the last float bit.
"""

import json
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, i32, op, raw, write  # noqa: E402

rawgen.begin(HERE)

rng = np.random.default_rng(7)
c64, c128 = np.complex64, np.complex128


def cplx(shape, dtype=c64, scale=1.0):
    return (scale * (rng.standard_normal(shape) + 1j * rng.standard_normal(shape))).astype(dtype)


def real(shape, dtype=f32, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def fl(*v):
    return np.array(v, i32)


# --- Complex, Angle ---------------------------------------------------------------------------
op("Complex", dict(real=real((2, 1)), imag=real((3,))), note="broadcast")
op("Complex", dict(real=np.array([1.5, -0.0, np.inf, np.nan, 2], f64),
                   imag=np.array([-2, 0.0, -np.inf, 1, np.nan], f64)),
   dict(Tout=tf.complex128), tol=0, note="float64, inf/nan/-0")
op("Complex", dict(real=np.float32(3), imag=np.float32(-4)), note="scalars")
op("Complex", dict(real=np.zeros((0, 3), f32), imag=real((3,))), note="empty")
op("Complex", dict(real=real((2, 1, 1, 1, 1, 1, 1)), imag=real((1, 2, 1, 1, 1, 1, 2))),
   note="rank 7 broadcast")
op("Complex", dict(real=real((2, 2)), imag=real((3,))), note="incompatible")
op("Complex", dict(real=real((2,)), imag=real((2,))), dict(Tout=tf.complex128),
   note="float -> complex128: no kernel")
op("Complex", dict(real=real((2,), f64), imag=real((2,), f64)), dict(Tout=tf.complex64),
   note="double -> complex64: no kernel")

special = [1 + 1j, -1, complex(-0.0, 0.0), complex(-1, -0.0), 0j, complex(0, -2),
           complex(np.inf, 1), complex(-np.inf, np.inf), complex(np.nan, 1), complex(3, -4)]
op("Angle", dict(input=np.array(special, c64)), note="complex64 specials")
op("Angle", dict(input=np.array(special, c128)), dict(Tout=tf.float64), tol=1e-15,
   note="complex128 specials")
op("Angle", dict(input=cplx((2, 0))), note="empty")
op("Angle", dict(input=np.complex64(-2 - 2j)), note="scalar")
op("Angle", dict(input=cplx((2,))), dict(Tout=tf.float64), note="complex64 -> double")

# --- FFT, IFFT (1-3D) -------------------------------------------------------------------------
for name in ("FFT", "IFFT"):
    op(name, dict(input=cplx((3, 8))), note="batch 3, n 8")
    op(name, dict(input=cplx((2, 2, 12), scale=5)), note="n 12, |x|~5")
    op(name, dict(input=cplx((7,), c128)), tol=1e-12, note="complex128, n 7")
    op(name, dict(input=cplx((2, 1))), note="inner dim 1")
    op(name, dict(input=cplx((2, 0))), note="empty inner")
    op(name, dict(input=cplx((0, 4))), note="empty batch")
    op(name, dict(input=np.complex64(1 + 1j)), note="rank 0")
nanx = np.ones(8, c64)
nanx[3] = np.nan
op("FFT", dict(input=nanx), note="nan spreads")
for name in ("FFT2D", "IFFT2D"):
    op(name, dict(input=cplx((2, 3, 4))), note="batch 2, 3x4")
    op(name, dict(input=cplx((5, 6), c128)), tol=1e-12, note="complex128 5x6")
    op(name, dict(input=cplx((3, 1, 1))), note="1x1")
    op(name, dict(input=cplx((0, 2, 2))), note="empty batch")
    op(name, dict(input=cplx((2, 0, 3))), note="empty inner")
    op(name, dict(input=cplx((4,))), note="rank 1")
for name in ("FFT3D", "IFFT3D"):
    op(name, dict(input=cplx((2, 2, 3, 4))), note="batch 2, 2x3x4")
    op(name, dict(input=cplx((3, 2, 5), c128)), tol=1e-12, note="complex128 3x2x5")
    op(name, dict(input=cplx((2, 1, 1, 1))), note="1x1x1")
    op(name, dict(input=cplx((2, 0, 1, 1))), note="empty")
    op(name, dict(input=cplx((4, 4))), note="rank 2")

# --- RFFT, IRFFT (1D) -------------------------------------------------------------------------
op("RFFT", dict(input=real((3, 8)), fft_length=fl(8)), note="n 8")
op("RFFT", dict(input=real((2, 9), scale=4), fft_length=fl(9)), note="odd n 9")
op("RFFT", dict(input=real((2, 10)), fft_length=fl(6)), note="fft_length < input: crop")
op("RFFT", dict(input=real((2, 10)), fft_length=fl(7)), note="crop to odd")
op("RFFT", dict(input=real((4, 6), f64), fft_length=fl(6)), dict(Tcomplex=tf.complex128),
   tol=1e-12, note="float64")
op("RFFT", dict(input=real((3, 1)), fft_length=fl(1)), note="inner dim 1")
op("RFFT", dict(input=real((3, 5)), fft_length=fl(1)), note="fft_length 1 of 5")
op("RFFT", dict(input=np.zeros((0, 4), f32), fft_length=fl(4)), note="empty batch")
op("RFFT", dict(input=np.zeros((3, 0), f32), fft_length=fl(4)), unspecified=(0,),
   note="empty inner: [3,3] left uninitialized by TF")
op("RFFT", dict(input=real((4,)), fft_length=fl(6)), note="fft_length > input")
op("RFFT", dict(input=real((4,)), fft_length=fl(-1)), note="negative fft_length")
op("RFFT", dict(input=real((4,)), fft_length=fl(2, 2)), note="fft_length shape")
op("RFFT", dict(input=real((4,)), fft_length=np.int32(4)), note="fft_length scalar")
op("RFFT", dict(input=np.float32(1), fft_length=fl(1)), note="rank 0")
op("RFFT", dict(input=real((4,)), fft_length=fl(4)), dict(Tcomplex=tf.complex128),
   note="float -> complex128")

# IRFFT: the imaginary parts of the DC and Nyquist bins are ignored (c2r)
op("IRFFT", dict(input=cplx((3, 5)), fft_length=fl(8)), note="n 8, DC/Nyquist imag ignored")
op("IRFFT", dict(input=cplx((2, 4)), fft_length=fl(7)), note="odd n 7 (no Nyquist)")
op("IRFFT", dict(input=cplx((2, 8)), fft_length=fl(6)), note="crop 8 bins to 4")
op("IRFFT", dict(input=cplx((2, 6), scale=3), fft_length=fl(4)), note="crop 6 bins to 3")
op("IRFFT", dict(input=cplx((3, 5), c128), fft_length=fl(8)),
   dict(Treal=tf.float64), tol=1e-12, note="complex128")
op("IRFFT", dict(input=cplx((2, 1)), fft_length=fl(1)), note="n 1")
op("IRFFT", dict(input=cplx((2, 2)), fft_length=fl(2)), note="n 2: DC and Nyquist only")
op("IRFFT", dict(input=cplx((2, 3)), fft_length=fl(3)), note="n 3")
op("IRFFT", dict(input=cplx((0, 3)), fft_length=fl(4)), note="empty batch")
op("IRFFT", dict(input=cplx((3, 0)), fft_length=fl(4)), unspecified=(0,),
   note="empty inner: [3,4] uninitialized")
op("IRFFT", dict(input=cplx((2, 4)), fft_length=fl(8)), note="too few bins for n 8")
op("IRFFT", dict(input=cplx((2, 4)), fft_length=fl(-2)), note="negative fft_length")
op("IRFFT", dict(input=cplx((2, 4)), fft_length=fl(4, 4)), note="fft_length shape")
op("IRFFT", dict(input=np.complex64(1), fft_length=fl(1)), note="rank 0")
op("IRFFT", dict(input=cplx((2, 3)), fft_length=fl(4)), dict(Treal=tf.float64),
   note="complex64 -> double")

# --- RFFT2D/3D, IRFFT2D/3D ------------------------------------------------------------------
op("RFFT2D", dict(input=real((2, 4, 6)), fft_length=fl(4, 6)), note="4x6")
op("RFFT2D", dict(input=real((5, 7), scale=3), fft_length=fl(3, 5)), note="crop 5x7 to 3x5")
op("RFFT2D", dict(input=real((3, 5), f64), fft_length=fl(3, 5)), dict(Tcomplex=tf.complex128),
   tol=1e-12, note="float64 odd")
op("RFFT2D", dict(input=real((2, 1, 1)), fft_length=fl(1, 1)), note="1x1")
op("RFFT2D", dict(input=np.zeros((0, 2, 2), f32), fft_length=fl(2, 2)), note="empty")
op("RFFT2D", dict(input=real((3, 4)), fft_length=fl(4, 5)), note="inner too short")
op("RFFT2D", dict(input=real((3, 4)), fft_length=fl(5, 4)), note="outer too short")
op("RFFT2D", dict(input=real((3, 4)), fft_length=fl(3, -4)), note="negative")
op("RFFT2D", dict(input=real((3, 4)), fft_length=fl(3)), note="fft_length shape")
op("RFFT2D", dict(input=real((4,)), fft_length=fl(1, 4)), note="rank 1")
op("RFFT2D", dict(input=real((3, 4), f64), fft_length=fl(3, 4)), note="double -> complex64")

op("IRFFT2D", dict(input=cplx((2, 4, 5)), fft_length=fl(4, 8)), note="4x8")
op("IRFFT2D", dict(input=cplx((3, 4)), fft_length=fl(2, 4)), note="crop outer 3 to 2")
op("IRFFT2D", dict(input=cplx((5, 6), scale=2), fft_length=fl(3, 5)), note="crop both, odd")
op("IRFFT2D", dict(input=cplx((3, 4), c128), fft_length=fl(3, 7)),
   dict(Treal=tf.float64), tol=1e-12, note="complex128")
op("IRFFT2D", dict(input=cplx((2, 1, 1)), fft_length=fl(1, 1)), note="1x1")
op("IRFFT2D", dict(input=cplx((0, 2, 3)), fft_length=fl(2, 4)), note="empty")
op("IRFFT2D", dict(input=cplx((3, 4)), fft_length=fl(4, 4)), note="outer too short")
op("IRFFT2D", dict(input=cplx((3, 2)), fft_length=fl(3, 4)), note="inner too short")
op("IRFFT2D", dict(input=cplx((3, 2)), fft_length=fl(-3, 2)), note="negative")
op("IRFFT2D", dict(input=cplx((3,)), fft_length=fl(1, 4)), note="rank 1")

op("RFFT3D", dict(input=real((2, 2, 3, 4)), fft_length=fl(2, 3, 4)), note="2x3x4")
op("RFFT3D", dict(input=real((3, 4, 5), scale=2), fft_length=fl(2, 3, 3)), note="crop")
op("RFFT3D", dict(input=real((2, 3, 3), f64), fft_length=fl(2, 3, 3)),
   dict(Tcomplex=tf.complex128), tol=1e-12, note="float64")
op("RFFT3D", dict(input=real((1, 1, 1)), fft_length=fl(1, 1, 1)), note="1x1x1")
op("RFFT3D", dict(input=np.zeros((2, 0, 2, 2), f32), fft_length=fl(0, 2, 2)), note="empty")
op("RFFT3D", dict(input=real((2, 2, 2)), fft_length=fl(2, 3, 2)), note="too short")
op("RFFT3D", dict(input=real((2, 2)), fft_length=fl(1, 2, 2)), note="rank 2")

op("IRFFT3D", dict(input=cplx((2, 2, 3, 3)), fft_length=fl(2, 3, 4)), note="2x3x4")
op("IRFFT3D", dict(input=cplx((3, 4, 5)), fft_length=fl(2, 3, 5)), note="crop")
op("IRFFT3D", dict(input=cplx((2, 2, 4), c128), fft_length=fl(2, 2, 6)),
   dict(Treal=tf.float64), tol=1e-12, note="complex128")
op("IRFFT3D", dict(input=cplx((1, 1, 1)), fft_length=fl(1, 1, 1)), note="1x1x1")
op("IRFFT3D", dict(input=cplx((0, 2, 2, 2)), fft_length=fl(2, 2, 2)), note="empty")
op("IRFFT3D", dict(input=cplx((2, 2, 2)), fft_length=fl(2, 2, 4)), note="too few bins")
op("IRFFT3D", dict(input=cplx((2, 2, 2)), fft_length=fl(2, 2, -1)), note="negative")

# --- Batch* (no CPU kernel in TF 2.21) ----------------------------------------------------------
for name in ("BatchFFT", "BatchFFT2D", "BatchFFT3D", "BatchIFFT", "BatchIFFT2D", "BatchIFFT3D"):
    op(name, dict(input=cplx((2, 2, 2))), note="no CPU kernel")

# --- AudioSpectrogram -------------------------------------------------------------------------
t = np.arange(200) / 8000.0
audio = np.stack([np.sin(2 * np.pi * 440 * t) + 0.1 * rng.standard_normal(200),
                  0.5 * np.cos(2 * np.pi * 1300 * t)], axis=1).astype(f32)
op("AudioSpectrogram", dict(input=audio), dict(window_size=32, stride=16),
   note="2 channels, window 32 (pow2)")
op("AudioSpectrogram", dict(input=audio), dict(window_size=25, stride=10,
                                               magnitude_squared=True),
   note="window 25 -> fft 32, squared")
op("AudioSpectrogram", dict(input=audio[:, :1]), dict(window_size=40, stride=50),
   note="stride > window")
op("AudioSpectrogram", dict(input=audio[:70]), dict(window_size=2, stride=1),
   note="window 2")
op("AudioSpectrogram", dict(input=audio[:70]), dict(window_size=65, stride=3),
   note="fft 128, one window")
op("AudioSpectrogram", dict(input=audio[:20]), dict(window_size=32, stride=4),
   note="fewer samples than window: 0 frames")
op("AudioSpectrogram", dict(input=np.zeros((40, 0), f32)), dict(window_size=8, stride=4),
   note="no channels")
op("AudioSpectrogram", dict(input=audio), dict(window_size=1, stride=1), note="window 1")
op("AudioSpectrogram", dict(input=audio), dict(window_size=8, stride=0), note="stride 0")
op("AudioSpectrogram", dict(input=audio[:, 0]), dict(window_size=8, stride=4), note="rank 1")

# --- Mfcc -------------------------------------------------------------------------------------
spec = raw.AudioSpectrogram(input=tf.constant(
    np.concatenate([audio, audio[::-1]], 0)), window_size=64, stride=32,
    magnitude_squared=True).numpy()  # [2, 11, 33]
big = raw.AudioSpectrogram(input=tf.constant(np.tile(audio, (3, 1))), window_size=256,
                           stride=128, magnitude_squared=True).numpy()  # [2, 3, 129]
rate = np.int32(8000)
op("Mfcc", dict(spectrogram=big, sample_rate=rate), note="defaults")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(filterbank_channel_count=10, dct_coefficient_count=10, upper_frequency_limit=3900.0,
        lower_frequency_limit=100.0), note="10 channels")
op("Mfcc", dict(spectrogram=big, sample_rate=np.int32(16000)),
   dict(upper_frequency_limit=7000.0, lower_frequency_limit=0.0,
        filterbank_channel_count=20, dct_coefficient_count=20), note="lower 0, all coefs")
op("Mfcc", dict(spectrogram=big, sample_rate=np.int32(8000)),
   dict(upper_frequency_limit=333.3, lower_frequency_limit=33.3,
        filterbank_channel_count=4, dct_coefficient_count=3), note="odd float limits")
op("Mfcc", dict(spectrogram=big, sample_rate=rate),
   dict(filterbank_channel_count=80), note="too many channels (empty bands floored)")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(upper_frequency_limit=4000.0), note="upper = Nyquist")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(upper_frequency_limit=4200.0), note="upper > Nyquist: spectrum too short, zeros")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(upper_frequency_limit=float("inf"), filterbank_channel_count=5,
        dct_coefficient_count=3), note="upper inf: zeros")
op("Mfcc", dict(spectrogram=np.zeros((1, 2, 33), f32), sample_rate=rate),
   dict(filterbank_channel_count=8, dct_coefficient_count=5, upper_frequency_limit=3000.0),
   note="silence: log floor")
sp2 = spec.copy()
sp2[0, 1, 5] = np.inf
sp2[1, 2, 10] = np.nan
op("Mfcc", dict(spectrogram=sp2, sample_rate=rate),
   dict(filterbank_channel_count=10, upper_frequency_limit=3500.0), note="inf and nan bins")
op("Mfcc", dict(spectrogram=np.zeros((0, 3, 33), f32), sample_rate=rate),
   dict(upper_frequency_limit=3000.0), note="empty")
op("Mfcc", dict(spectrogram=spec[0], sample_rate=rate), note="rank 2")
op("Mfcc", dict(spectrogram=spec, sample_rate=np.array([8000], i32)), note="rate vector")
op("Mfcc", dict(spectrogram=spec, sample_rate=np.int32(0)), note="rate 0")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(upper_frequency_limit=100.0, lower_frequency_limit=200.0), note="upper < lower")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(lower_frequency_limit=-1.0, upper_frequency_limit=3000.0), note="lower < 0")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(filterbank_channel_count=5, dct_coefficient_count=6, upper_frequency_limit=3000.0),
   note="more coefficients than channels")
op("Mfcc", dict(spectrogram=spec, sample_rate=rate),
   dict(filterbank_channel_count=0, upper_frequency_limit=3000.0), note="no channels")
op("Mfcc", dict(spectrogram=spec[..., :1], sample_rate=rate), note="one bin")


# --- a TF1 graph: tf.signal.stft, then the complex ops around it -------------------------------
def stft_graph():
    x = tf.compat.v1.placeholder_with_default(real((2, 64), scale=2), [2, 64], name="x")
    s = tf.signal.stft(x, frame_length=16, frame_step=8)  # [2, 7, 9] complex64
    mag = tf.abs(s)
    power = tf.math.multiply(s, tf.math.conj(s))
    re, im = tf.math.real(s), tf.math.imag(s)
    back = tf.complex(re, im)
    ang = tf.math.angle(s)
    inv = tf.signal.irfft(s)
    spec = tf.signal.rfft(x, fft_length=[32])  # crops to 32 samples
    full = tf.signal.rfft(x[:, :40], fft_length=[64])  # the Python wrapper zero-pads
    return [([mag, power, re, im, back, ang, inv, spec, full], [])]


graph("stft_abs", stft_graph,
      ["RFFT", "ComplexAbs", "Conj", "Mul", "Real", "Imag", "Complex", "Angle", "IRFFT"])


# --- FFTND & co: expected values from TF's fixed-rank ops (see the docstring) ------------------
ND: list[dict] = []


def crop_pad(x, n):
    r = len(n)
    x = x[(Ellipsis,) + tuple(slice(0, k) for k in n)]
    pad = [(0, 0)] * (x.ndim - r) + [(0, max(0, k - d)) for k, d in zip(n, x.shape[-r:])]
    return np.pad(x, pad)


FIXED = {("FFTND", 1): "FFT", ("FFTND", 2): "FFT2D", ("FFTND", 3): "FFT3D",
         ("IFFTND", 1): "IFFT", ("IFFTND", 2): "IFFT2D", ("IFFTND", 3): "IFFT3D",
         ("RFFTND", 1): "RFFT", ("RFFTND", 2): "RFFT2D", ("RFFTND", 3): "RFFT3D",
         ("IRFFTND", 1): "IRFFT", ("IRFFTND", 2): "IRFFT2D", ("IRFFTND", 3): "IRFFT3D"}


def nd(name, x, n, axes, attrs=None, tol=None, note="", error=None):
    attrs = attrs or {}
    entry = {"op": name, "note": note, "inputs": [rawgen._store(x), rawgen._store(fl(*n)),
                                                  rawgen._store(fl(*axes))],
             "attrs": {k: rawgen._attr(v) for k, v in attrs.items()}}
    if tol is not None:
        entry["tol"] = tol
    if error:
        entry["error"] = error
    else:
        fixed = FIXED[(name, len(n))]
        if name in ("FFTND", "IFFTND"):
            r = getattr(raw, fixed)(input=tf.constant(crop_pad(x, n)))
        elif name == "RFFTND":
            r = getattr(raw, fixed)(input=tf.constant(crop_pad(x, n)), fft_length=fl(*n),
                                    **attrs)
        else:  # IRFFT*: the innermost dimension holds n[-1] // 2 + 1 bins
            bins = list(n[:-1]) + [n[-1] // 2 + 1]
            r = getattr(raw, fixed)(input=tf.constant(crop_pad(x, bins)), fft_length=fl(*n),
                                    **attrs)
        entry["outputs"] = [rawgen._store(r)]
    ND.append(entry)


# TF itself refuses every one of these on CPU:
try:
    raw.FFTND(input=tf.constant(cplx((2, 2))), fft_length=fl(2), axes=fl(-1))
    raise AssertionError("TF now has a CPU FFTND kernel: replay it with op() instead")
except tf.errors.NotFoundError:
    pass

nd("FFTND", cplx((3, 8)), [8], [-1], note="1-D, same length")
nd("FFTND", cplx((3, 8)), [5], [1], note="1-D crop, positive axis")
nd("FFTND", cplx((3, 4)), [7], [-1], note="1-D zero-pad")
nd("FFTND", cplx((2, 3, 4)), [4, 6], [-2, -1], note="2-D pad inner")
nd("FFTND", cplx((2, 3, 4), c128), [2, 4], [1, 2], tol=1e-12, note="2-D complex128 crop")
nd("FFTND", cplx((2, 2, 3, 4)), [3, 3, 3], [-3, -2, -1], note="3-D mixed crop/pad")
nd("IFFTND", cplx((3, 8)), [6], [-1], note="1-D crop")
nd("IFFTND", cplx((2, 3, 4)), [5, 4], [-2, -1], note="2-D pad outer")
nd("IFFTND", cplx((2, 3, 5), c128), [2, 3, 6], [0, 1, 2], tol=1e-12, note="3-D complex128")
nd("RFFTND", real((3, 8)), [8], [-1], note="1-D")
nd("RFFTND", real((3, 9)), [6], [-1], note="1-D crop")
nd("RFFTND", real((2, 5, 7)), [4, 7], [-2, -1], note="2-D crop outer")
nd("RFFTND", real((2, 3, 4), f64), [2, 3, 4], [0, 1, 2], dict(Tcomplex=tf.complex128),
   tol=1e-12, note="3-D float64")
nd("IRFFTND", cplx((3, 5)), [8], [-1], note="1-D")
nd("IRFFTND", cplx((3, 6)), [7], [-1], note="1-D crop bins")
nd("IRFFTND", cplx((2, 4, 5)), [3, 8], [-2, -1], note="2-D crop outer")
nd("IRFFTND", cplx((2, 3, 4), c128), [2, 3, 6], [-3, -2, -1],
   dict(Treal=tf.float64), tol=1e-12, note="3-D complex128")
nd("FFTND", cplx((2, 3)), [3, 3], [-1], note="fft_length shape", error="InvalidArgumentError")
nd("FFTND", cplx((2, 3)), [3, 3], [0, 0], note="axes not successive",
   error="InvalidArgumentError")
nd("FFTND", cplx((2, 3)), [2], [0], note="last axis not -1", error="InvalidArgumentError")
nd("FFTND", cplx((3,)), [3, 3], [-2, -1], note="rank too small", error="InvalidArgumentError")
nd("FFTND", cplx((2, 3)), [-1], [-1], note="negative fft_length",
   error="InvalidArgumentError")
nd("FFTND", cplx((2, 2, 2, 2)), [2, 2, 2, 2], [0, 1, 2, 3], note="4-D",
   error="InvalidArgumentError")
nd("RFFTND", real((2, 3)), [2, 4], [-2, -1], note="inner too short",
   error="InvalidArgumentError")
nd("IRFFTND", cplx((2, 3)), [2, 6], [-2, -1], note="too few bins",
   error="InvalidArgumentError")
nd("RFFTND", real((2, 3), f64), [2, 3], [-2, -1], note="double -> complex64",
   error="InvalidArgumentError")

if __name__ == "__main__":
    write()
    (HERE / "fftnd.json").write_text(json.dumps(ND, indent=0) + "\n")
