"""The conformance runner: every TensorFlow case with 1, 2 and 8 threads, each with programs
"auto" (the default), and with steps and while loops forced to run node by node ("never") and
(where their shape allows) as programs ("always").

A case whose graph uses an op without a kernel is skipped naming the op (found from the kernel
registry before running), never hidden.
"""

from __future__ import annotations

import pytest
from conformance import case_dirs, missing_kernels, run_case

CASES = case_dirs()


@pytest.mark.parametrize("programs", ["auto", "never", "always"])
@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("case", CASES, ids=[d.name for d in CASES])
def test_conformance_case(case, threads: int, programs: str) -> None:
    missing = missing_kernels(case)
    if missing:
        pytest.skip("no kernel for " + ", ".join(missing))
    run_case(case, threads, programs=programs)
