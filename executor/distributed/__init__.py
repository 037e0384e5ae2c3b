"""Running dfg beyond one process, on Ray (the optional extra ``dfg[ray]``).

* :mod:`.batch`: batch inference over datasets (``dfg batch``), and :class:`Predictor`, the
  callable class Ray Data's ``map_batches`` takes.
* :mod:`.cluster`: a graph partitioned by task (``device`` fields), each partition run by its
  own Ray actor, Send/Recv carried by Ray (``dfg run --cluster ray``, ``Session(cluster="ray")``).

Nothing here imports Ray at module import: without the extra, dfg runs as before and only
these entry points say what to install.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["Predictor", "prepare_local_ray"]


def prepare_local_ray() -> None:
    """The environment for a Ray instance dfg starts itself (``ray.init`` without an address),
    set before it starts; a value the user set is kept.

    * ``RAY_worker_niceness=0``: workers run at the priority of the process that started Ray.
      Ray's default lowers them by 15 so its own daemons stay responsive, but a dfg worker
      does the user's computing: beside two busy processes on a 2-core machine, nice-15
      workers got about 2% of a core and a batch or partitioned run crawled.
    * ``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0``: workers import dfg as the driver does, from its
      own environment, rather than from one Ray would build with ``uv run``.
    """
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def __getattr__(name: str) -> Any:
    # Predictor lives in .batch; importing it lazily keeps `import dfg.executor` free of Ray.
    if name == "Predictor":
        from .batch import Predictor

        return Predictor
    raise AttributeError(name)
