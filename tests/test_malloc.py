"""executor/malloc.py: glibc's thresholds are raised once per process by a Session, unless
DFG_MALLOC=0 or the user's own MALLOC_* settings say otherwise (each case in a fresh
process: the setting is process-wide)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest


def _tuned(env: dict[str, str]) -> str:
    code = ("from dfg.executor import malloc\n"
            "from dfg.executor import Session\n"
            "from dfg.graphdef.io import load_graph\n"
            "import sys\n"
            "s = Session(load_graph(sys.argv[1]))\n"
            "print(s.run('counter/Exit', {'n': 3}), malloc.tune())\n")
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "while_counter.pbtxt")
    full = {k: v for k, v in os.environ.items()
            if k not in ("DFG_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code, example], env=full, check=True,
                         capture_output=True, text=True)
    return out.stdout.split()


glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="malloc is tuned on glibc only")


@glibc
def test_a_session_tunes_glibc_malloc_once():
    assert _tuned({}) == ["3", "True"]


def test_dfg_malloc_0_or_the_users_own_settings_leave_malloc_alone():
    assert _tuned({"DFG_MALLOC": "0"}) == ["3", "False"]
    assert _tuned({"MALLOC_TRIM_THRESHOLD_": "131072"}) == ["3", "False"]
