"""GPU kernels through CuPy, for the ops where a device pays for the copies: large matrix
products. Registered only when CuPy imports and sees a device; ``Session(device="GPU")`` runs
these on the GPU and everything else on the CPU (soft placement, as TensorFlow does).

Inputs and outputs stay numpy arrays at the kernel boundary: each call copies to the device
and back, so the executor and every other kernel are unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.registry import kernel

GPU = "GPU"


def _cupy() -> Any | None:
    try:
        import cupy  # optional, never a dependency

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:  # not installed, no driver, no device
        return None


cp = _cupy()
AVAILABLE = cp is not None

if AVAILABLE:

    def _adj(x: Any, flag: bool) -> Any:
        return x.conj().swapaxes(-1, -2) if flag else x

    @kernel("MatMul", device=GPU, cheap=False)
    def matmul(ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        ga, gb = cp.asarray(a), cp.asarray(b)
        ga = ga.T if ctx.attrs.get("transpose_a") else ga
        gb = gb.T if ctx.attrs.get("transpose_b") else gb
        return cp.asnumpy(ga @ gb).astype(a.dtype, copy=False)

    @kernel("BatchMatMulV2", "BatchMatMulV3", device=GPU, cheap=False)
    def batch_matmul(ctx, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        gx = _adj(cp.asarray(x), ctx.attrs.get("adj_x", False))
        gy = _adj(cp.asarray(y), ctx.attrs.get("adj_y", False))
        out = cp.asnumpy(cp.matmul(gx, gy))
        return out.astype(ctx.attrs.get("Tout", x.dtype), copy=False)
