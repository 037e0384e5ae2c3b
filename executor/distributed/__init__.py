"""Running dfg beyond one process, on Ray (the optional extra ``dfg[ray]``).

* :mod:`.batch`: batch inference over datasets (``dfg batch``), and :class:`Predictor`, the
  callable class Ray Data's ``map_batches`` takes.
* :mod:`.cluster`: a graph partitioned by task (``device`` fields), each partition run by its
  own Ray actor, Send/Recv carried by Ray (``dfg run --cluster ray``, ``Session(cluster="ray")``).

Nothing here imports Ray at module import: without the extra, dfg runs as before and only
these entry points say what to install.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Predictor"]


def __getattr__(name: str) -> Any:
    # Predictor lives in .batch; importing it lazily keeps `import dfg.executor` free of Ray.
    if name == "Predictor":
        from .batch import Predictor

        return Predictor
    raise AttributeError(name)
