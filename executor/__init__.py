"""The dataflow executor: ``Session`` runs TensorFlow graphs with v1 control flow and state."""

from __future__ import annotations

import os
from typing import Any

# OpenBLAS's idle worker threads spin for 2^28 cycles (about 0.1 s) after every product,
# holding the cores the executor's threads and the native kernels need. 2^20 cycles (about
# 0.3 ms) keeps them awake between back-to-back products and lets them sleep soon after.
# Measured (same process, 2 cores), default -> 20: U-Net 14.3 -> 11.1 ms, bench_cnn 3.2 ->
# 2.0, Transformer 5.1 -> 3.9, MLP 0.62 -> 0.44, matmul branches 25.6 -> 24.0. OpenBLAS reads
# it once, when numpy loads it, so it is set here, before any numpy import (dfg.graphdef and
# dfg.cli import this package first); a value already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

__all__ = ["Session"]


def __getattr__(name: str) -> Any:
    # lazy, so `import dfg.executor.kernels.registry` does not pull in the whole executor
    if name == "Session":
        from .session import Session
        return Session
    raise AttributeError(name)
