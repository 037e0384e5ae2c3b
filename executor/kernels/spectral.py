"""Complex numbers and Fourier transforms: Complex, Angle, FFT/IFFT (1-3D, N-D), RFFT/IRFFT,
the Batch* aliases, AudioSpectrogram, Mfcc.
"""

from __future__ import annotations
