"""Special functions: Bessel functions, incomplete gamma and beta, erfinv/ndtri, polygamma,
zeta, Dawson, exponential and Fresnel integrals, Spence, NextAfter.
"""

from __future__ import annotations
