"""Cancellation and deadlines: one flag per step, one rule for every mode.

A step's ``StepControl`` is cancelled at most once, by the first of: a kernel error (the step
fails with it), ``Session.close()`` (``CancelledError``), SIGINT in the CLI, or the watchdog
at the step's deadline (``DeadlineExceededError``). Every mode checks only this flag, at the
same points: the scheduler before each node, straight-line and loop programs before each
kernel (so every loop iteration), and the step's end. The deadline is never compared with the
clock anywhere else, so the same timeout gives the same outcome whatever the mode. A kernel
already running is not interrupted; the step returns within one kernel's time.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from dfg.graphdef.errors import DeadlineExceededError, DfgError


class StepControl:
    """The cancel flag of one step. ``error`` is None until cancelled; it is written once,
    under ``_lock``, and read without it (a reader sees None or the final error)."""

    __slots__ = ("error", "deadline", "_wakers", "_lock", "finished")

    def __init__(self, timeout: float | None = None) -> None:
        self.error: BaseException | None = None
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self._wakers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self.finished = False

    def cancel(self, error: BaseException) -> bool:
        """Cancel the step with ``error`` unless it already is; wake whatever it waits on.
        True when this call cancelled it."""
        with self._lock:
            if self.error is not None or self.finished:
                return False
            self.error = error
            wakers = list(self._wakers)
        for wake in wakers:
            wake()
        return True

    def on_cancel(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from the cancelling thread) when the step is cancelled."""
        with self._lock:
            self._wakers.append(wake)
            cancelled = self.error is not None
        if cancelled:
            wake()

    def raise_if_cancelled(self) -> None:
        err = self.error
        if err is not None:
            raise err

    def finish(self) -> None:
        with self._lock:
            self.finished = True
            self._wakers.clear()


def deadline_error() -> DfgError:
    return DeadlineExceededError("step timed out")


class Watchdog:
    """One daemon thread cancelling steps at their deadlines (started on first use)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, StepControl]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, ctl: StepControl) -> None:
        if ctl.deadline is None:
            return
        with self._cond:
            heapq.heappush(self._heap, (ctl.deadline, next(self._seq), ctl))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dfg-watchdog",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)   # ended before its deadline
                if not self._heap:
                    self._cond.wait()
                    continue
                due = self._heap[0][0] - time.monotonic()
                if due > 0:
                    self._cond.wait(due)
                    continue
                _d, _s, ctl = heapq.heappop(self._heap)
                ctl.cancel(deadline_error())


WATCHDOG = Watchdog()
