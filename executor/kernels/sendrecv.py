"""_Send/_Recv (and _HostSend/_HostRecv): the two ends of an edge between partitions
(graphdef/partition.py), as TensorFlow's SendOp and RecvOp.

Both find the step's rendezvous in the step state (``RENDEZVOUS_KEY``, put there by
``Session.run(rendezvous=...)``; executor/distributed/cluster.py's is Ray's). Their key is
TensorFlow's ``send_device;incarnation;recv_device;tensor_name;frame_id:iteration``; the
rendezvous adds the step id. A Send never waits; a Recv is asynchronous (executor/asyncop.py):
it completes when the value arrives, a dead value as dead. Both run on dead inputs.
"""

from __future__ import annotations

from typing import Any

from dfg.graphdef.errors import FailedPreconditionError, InternalError

from ..asyncop import PENDING
from .registry import kernel

RENDEZVOUS_KEY = "dfg.rendezvous"


def rendezvous_key(attrs: dict, where: tuple[str, int]) -> str:
    frame_id, iteration = where
    return (f"{attrs['send_device']};{int(attrs['send_device_incarnation']):x};"
            f"{attrs['recv_device']};{attrs['tensor_name']};{frame_id}:{iteration}")


def _rendezvous(ctx: Any) -> Any:
    r = (ctx.step or {}).get(RENDEZVOUS_KEY)
    if r is None:
        raise FailedPreconditionError(
            f"{ctx.op} runs only in a partitioned step, where a rendezvous carries its value "
            "(`dfg run --cluster ray`, or feed its output)")
    return r


def send(ctx: Any, args: list, where: tuple[str, int], done: Any) -> tuple:
    value = args[0]
    _rendezvous(ctx).send(rendezvous_key(ctx.attrs, where), ctx.attrs["recv_device"],
                          value, value is None)
    return ()


def recv(ctx: Any, args: list, where: tuple[str, int], done: Any) -> Any:
    def arrived(value: Any, is_dead: bool, error: BaseException | None) -> None:
        done(None if error is not None else (None if is_dead else value,), error)

    _rendezvous(ctx).recv(rendezvous_key(ctx.attrs, where), arrived)
    return PENDING


# The records: the scheduler calls the async forms above (``start``); a caller without frames
# (a compiled program, folding) has only ``fn``, which refuses.
def sync_transfer(ctx: Any, *args: Any) -> Any:
    _rendezvous(ctx)
    raise InternalError(f"{ctx.op} runs only node by node (it is asynchronous)")


kernel("_Send", "_HostSend", cheap=True, start=send, runs_dead=True)(sync_transfer)
kernel("_Recv", "_HostRecv", cheap=True, start=recv, runs_dead=True)(sync_transfer)
