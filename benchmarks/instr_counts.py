"""Instructions per warm step, counted by valgrind's callgrind: a measure that load does not
move, for A/B comparisons on a busy machine (wall and CPU time on a shared 2-core machine
moved by more than the changes being measured).

    python benchmarks/instr_counts.py CASE[,CASE...] [--steps 10] [--warm 15]
                                      [--python OTHER_TREE_VENV/bin/python ...]

For each case (a folder name under tests/data/bench, tests/data/tf2 or tests/data/models)
and each interpreter (this one by default; ``--python`` again for another checkout's venv,
whose ``dfg`` it imports), a child process builds a Session (1 thread, DFG_BLAS_THREADS=1),
runs ``--warm`` steps, then ``--steps`` steps inside ``operator.call``: callgrind counts
only inside that call (``--toggle-collect=_operator_call``), so imports, planning and the
first steps' compiles are left out. Prints instructions per step. Needs ``valgrind``; a
count takes about a minute per case.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

CHILD = r"""
import gc, operator, os, sys
sys.path.insert(0, {bench!r})
from pathlib import Path
from bench_cases import timed_step
import dfg.graphdef.passes.pipeline  # noqa: F401
from dfg.executor import Session
from dfg.graphdef.io import load_graph

d = Path({case!r})
fetch, feed, setup = timed_step(d)
g = d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt"
sess = Session(load_graph(g), threads=1)
for targets, f in setup:
    sess.run([], f, targets=targets)
for _ in range({warm}):
    sess.run(fetch, feed)
gc.collect()
gc.disable()


def steps():
    for _ in range({steps}):
        sess.run(fetch, feed)


operator.call(steps)
"""


def case_dir(name: str) -> Path:
    for group in ("bench", "tf2", "models", "conformance"):
        d = DATA / group / name
        if (d / "case.json").exists():
            return d
    raise SystemExit(f"no case {name!r} under {DATA}")


def count(python: str, case: Path, steps: int, warm: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD.format(bench=str(ROOT / "benchmarks"), case=str(case),
                                       steps=steps, warm=warm))
        env = {**os.environ, "DFG_BLAS_THREADS": "1"}
        res = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                              "--toggle-collect=_operator_call",
                              f"--callgrind-out-file={tmp}/cg.out", python, str(script)],
                             capture_output=True, text=True, env=env)
        m = re.search(r"Collected : (\d+)", res.stderr)
        if res.returncode != 0 or m is None:
            raise SystemExit(f"{case.name}: callgrind failed:\n{res.stderr[-2000:]}")
        return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warm", type=int, default=15)
    ap.add_argument("--python", action="append", default=None,
                    help="an interpreter whose dfg to count (repeatable; default: this one)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    pythons = args.python or [sys.executable]
    print("case".ljust(40) + "".join(f"{'M instr/step #' + str(i):>18}"
                                    for i in range(len(pythons))) + "   ratio")
    for name in args.cases.split(","):
        d = case_dir(name)
        per = [count(p, d, args.steps, args.warm) / args.steps / 1e6 for p in pythons]
        ratio = f"{per[-1] / per[0]:8.3f}" if len(per) > 1 else ""
        print(name.ljust(40) + "".join(f"{v:18.2f}" for v in per) + ratio, flush=True)
    for i, p in enumerate(pythons):
        print(f"#{i}: {p}")


if __name__ == "__main__":
    main()
