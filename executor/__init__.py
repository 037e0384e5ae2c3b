"""The dataflow executor: ``Session`` runs TensorFlow graphs with v1 control flow and state."""

from __future__ import annotations

import os
from typing import Any

# OpenBLAS's idle worker threads spin for 2^28 cycles (about 0.1 s) after every product,
# holding the cores the executor's threads and the native kernels need. 2^14 cycles (a few
# microseconds) lets them sleep almost at once. Measured (2 cores, AVX-512 kernels),
# default -> 20 -> 14: U-Net 6.3 -> 4.9 -> 4.2 ms, ResNet-style 2.8 -> 2.0-2.5 -> 1.55;
# MLP 0.22 -> 0.23 -> 0.26 the one loss. At 20 (about 0.3 ms) a disturbance (another
# process's burst) also left the Transformer at 4.1 ms instead of 2.3 for tens of steps;
# at 14 it recovers at once. OpenBLAS reads it once, when numpy loads it, so it is set here,
# before any numpy import (dfg.graphdef and dfg.cli import this package first); a value
# already in the environment wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "14")

__all__ = ["Session"]


def __getattr__(name: str) -> Any:
    # lazy, so `import dfg.executor.kernels.registry` does not pull in the whole executor
    if name == "Session":
        from .session import Session
        return Session
    raise AttributeError(name)
