"""The graph files dfg writes are the same bytes for the same input in every process: each
test SavedModel is frozen 5 times in separate processes with different hash seeds
(PYTHONHASHSEED changes set and dict-of-set orders; a proto map's order changes with the
address space), and optimize / prune / convert of a TF2 graph with functions likewise.
Before, freeze emitted a lowered call's control outputs in the proto map's order, which
differed from run to run."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
SAVED_MODELS = sorted(p for p in (DATA / "savedmodels").iterdir()
                      if (p / "saved_model.pb").is_file())
# freezing refuses a signature that assigns a variable (tf1_assets bumps a counter)
NOT_FREEZABLE = {"tf1_assets"}
RUNS = 5


def _dfg_outputs(args_of: list[list[str]], outs: list[Path]) -> list[str]:
    """Run ``dfg`` once per argument list, two at a time, each with its own hash seed;
    the digest of each output file."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    running: list[subprocess.Popen] = []
    for seed, args in enumerate(args_of, start=1):
        if len(running) >= 2:
            running.pop(0).wait(timeout=600)
        running.append(subprocess.Popen([sys.executable, "-m", "dfg.cli", *args],
                                         env={**env, "PYTHONHASHSEED": str(seed)},
                                         stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE))
    for p in running:
        p.wait(timeout=600)
    digests = []
    for out in outs:
        assert out.is_file(), out
        digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
    return digests


@pytest.mark.parametrize("model", [p.name for p in SAVED_MODELS
                                   if p.name not in NOT_FREEZABLE])
def test_freeze_writes_the_same_bytes_in_every_process(model: str, tmp_path: Path) -> None:
    outs = [tmp_path / f"frozen_{k}.pb" for k in range(RUNS)]
    digests = _dfg_outputs([["freeze", str(DATA / "savedmodels" / model), "-o", str(o)]
                            for o in outs], outs)
    assert len(set(digests)) == 1, digests


@pytest.mark.parametrize("command", ["optimize", "prune", "convert"])
def test_optimize_prune_convert_write_the_same_bytes_in_every_process(command: str,
                                                                      tmp_path: Path) -> None:
    graph = DATA / "tf2" / "tf2_call_in_call" / "graph.pbtxt"
    extra = [] if command == "convert" else ["--fetch", "y"]
    outs = [tmp_path / f"out_{k}.pb" for k in range(RUNS)]
    digests = _dfg_outputs([[command, str(graph), *extra, "-o", str(o)] for o in outs], outs)
    assert len(set(digests)) == 1, digests
