"""Asynchronous kernels, TensorFlow's AsyncOpKernel: a kernel that may finish later.

An async kernel is ``start(ctx, args, where, done)``: it returns its outputs at once, or
:data:`PENDING` after arranging for ``done(outputs, error)`` to be called exactly once later,
from any thread. ``where`` is ``(frame_id, iteration)``, the frame instance and iteration the
node runs in (``frame_id`` is "" in the root frame), which a rendezvous key needs. The
scheduler (executor.py) counts a pending kernel as outstanding work, keeps running other
ready nodes meanwhile, and wakes on ``done`` through the step's completion queue, so a
``_Recv`` waiting for another task blocks no thread. A cancelled step (first error, deadline,
``Session.close``) stops waiting for it; what the kernel registered is the caller's to drop
(executor/distributed/cluster.py aborts the step's rendezvous). A plan with an async kernel
runs node by node: compiled programs call kernels synchronously.

An async kernel is declared in its op's record (``kernel(..., start=fn, runs_dead=...)``,
kernels/registry.py OpSpec). Transfer ops (``runs_dead``) run even when their inputs are
dead, as TensorFlow runs its Send/Recv, so every send meets its receive: a dead input is sent
as dead (``None``).
"""

from __future__ import annotations

PENDING = object()     # what a start function returns when ``done`` will be called later

def where(tagged: tuple) -> tuple[str, int]:
    """(frame_id, iteration) of a tagged node: the chain of frame names, each with the
    parent iteration it was entered from, so two tasks name the same frame instance alike."""
    frame, it = tagged[1], tagged[2]
    parts = []
    while frame is not None and frame.parent is not None:
        piter, name = frame.key
        parts.append(f"{name}@{piter}")
        frame = frame.parent
    return "/".join(reversed(parts)), it.iter_num
