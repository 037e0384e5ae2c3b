"""CPU time of a block, for the tests that guard against a hang or a quadratic blow-up.

Those tests bound CPU seconds (not wall time, so a busy machine does not fail them) with a
margin of ten times or more over what the work needs. The cyclic collector is off inside the
block: late in a long suite one full collection pass took half a second in CI, and it belongs
to no test. CPU time is the whole process's, so Ray's driver threads count too; the margins
cover them.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Spent:
    seconds: float = 0.0


@contextmanager
def cpu_seconds() -> Iterator[Spent]:
    spent = Spent()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    t0 = time.process_time()
    try:
        yield spent
    finally:
        spent.seconds = time.process_time() - t0
        if was_enabled:
            gc.enable()
