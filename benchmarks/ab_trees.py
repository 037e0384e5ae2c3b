"""A/B two (or more) dfg source trees in ONE process, their steps interleaved, so that both
see the same load: on a shared machine, two timings taken minutes apart differ by more than
most regressions (a DenseNet step went from 8 to 100 ms wall with the load average at 10).

    python benchmarks/ab_trees.py TREE_A TREE_B [...] --cases densenet121,mobilenet_v2
                                  [--iters 60] [--threads 2] [--programs auto] [--cpu]

A TREE is a checkout of this repository (``git worktree add /tmp/old <commit>``). Each is
imported in turn under the name ``dfg`` (through a farm of symlinks: the repository's
folders install under ``dfg.*``); the Sessions made from it keep its modules, so they run
side by side. A tree without a compiled ``executor/_native*.so`` gets a copy of this one's
(``executor/native`` rarely changes: check ``git diff A B -- executor/native``). ``--cpu``
times the main thread's CPU (``time.thread_time``): with ``--threads 1`` and
``DFG_BLAS_THREADS=1`` all of a step's work is on it, and load barely moves it.
Lazy imports inside functions resolve to the tree imported last: fine for timing steps.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(HERE))
from bench_cases import timed_step  # noqa: E402

PARTS = ("schemas", "graphdef", "executor", "cli")


def _farm(tree: Path, tmp: Path) -> Path:
    farm = tmp / f"{len(list(tmp.iterdir()))}_{tree.name}"
    (farm / "dfg").mkdir(parents=True)
    for p in PARTS:
        (farm / "dfg" / p).symlink_to(tree / p)
    if not list((tree / "executor").glob("_native*.so")):
        for so in (ROOT / "executor").glob("_native*.so"):
            shutil.copy2(so, tree / "executor" / so.name)
    return farm


def _import(farm: Path) -> tuple:
    for m in [m for m in sys.modules if m == "dfg" or m.startswith("dfg.")]:
        del sys.modules[m]
    sys.path.insert(0, str(farm))
    try:
        from dfg.executor import Session
        from dfg.executor.kernels import registry
        from dfg.graphdef.io import load_graph

        registry.load_all()
    finally:
        sys.path.remove(str(farm))
    return Session, load_graph


def _case(name: str) -> Path:
    for group in ("models", "conformance", "bench", "tf2"):
        if (DATA / group / name / "case.json").exists():
            return DATA / group / name
    raise SystemExit(f"no case {name!r} under {DATA}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--programs", default="auto")
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    clock = time.thread_time if args.cpu else time.perf_counter
    names = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        # each tree's Sessions are made and warmed before the next tree is imported: lazy
        # imports inside dfg's functions resolve to whatever tree ``dfg`` names at the time
        sessions: dict[str, list] = {n: [] for n in names}
        steps = {}
        for t in args.trees:
            Session, load_graph = _import(_farm(t.resolve(), Path(tmp)))
            for name in names:
                d = _case(name)
                fetch, feed, setup = steps[name] = timed_step(d)
                graph = d / "graph.pbtxt" if (d / "graph.pbtxt").exists() else d / "graph.pb"
                s = Session(load_graph(graph), threads=args.threads, programs=args.programs)
                for targets, f in setup:
                    s.run([], f, targets=targets)
                for _ in range(5):
                    s.run(fetch, feed)
                sessions[name].append(s)
        print(f"{'case':24}" + "".join(f" {t.name[:22]:>22}" for t in args.trees)
              + "   (min / median ms)")
        for name in names:
            fetch, feed, _ = steps[name]
            times: list[list[float]] = [[] for _ in args.trees]
            for _ in range(args.iters):
                for k, s in enumerate(sessions[name]):
                    t0 = clock()
                    s.run(fetch, feed)
                    times[k].append(clock() - t0)
            for s in sessions[name]:
                s.close()
            print(f"{name:24}" + "".join(
                f" {min(t) * 1e3:10.2f} /{statistics.median(t) * 1e3:9.2f}" for t in times),
                flush=True)

if __name__ == "__main__":
    main()
