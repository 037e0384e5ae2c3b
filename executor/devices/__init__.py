"""Optional devices. CPU kernels are the numpy families under ``executor/kernels``; a device
module here registers kernels for another device only when its runtime is importable, so a
machine without it (CI, most laptops) loads nothing and runs everything on the CPU."""

from __future__ import annotations

from . import gpu  # noqa: F401  registers GPU kernels only if CuPy and a GPU are present
