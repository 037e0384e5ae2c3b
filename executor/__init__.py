"""The dataflow executor: ``Session`` runs TensorFlow graphs with v1 control flow and state."""

from __future__ import annotations

from typing import Any

__all__ = ["Session"]


def __getattr__(name: str) -> Any:
    # lazy, so `import dfg.executor.kernels.registry` does not pull in the whole executor
    if name == "Session":
        from .session import Session
        return Session
    raise AttributeError(name)
