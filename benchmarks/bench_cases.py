"""Time the public `bench` conformance cases with dfg, and with TensorFlow in the same run when
it is available, and print the ratio.

    python benchmarks/bench_cases.py [--tf-python /path/to/tf-venv/bin/python] [--iters N]

TensorFlow is never a dependency of dfg: it runs in a subprocess of a separate environment
(`python -m venv tfvenv && tfvenv/bin/pip install tensorflow-cpu==2.21.0`), found from
--tf-python, $DFG_TF_PYTHON, or the current interpreter if it can import tensorflow.
dfg is timed exactly as `dfg bench` does (same code path: Session.run in one process).
"""

# ruff: noqa: I001
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# dfg.executor before numpy: it sets OpenBLAS's thread timeout, read when numpy loads OpenBLAS
try:
    import dfg.executor  # noqa: F401
except ImportError:     # TensorFlow's side runs this module in its own venv, without dfg
    pass
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "data" / "conformance"


def find_tf_python(arg: str | None) -> str | None:
    for cand in (arg, os.environ.get("DFG_TF_PYTHON"), sys.executable):
        if not cand:
            continue
        ok = subprocess.run([cand, "-c", "import tensorflow"], capture_output=True)
        if ok.returncode == 0:
            return cand
    return None


def timed_step(case_dir: Path) -> tuple[list[str], dict, list[tuple[list[str], dict]]]:
    """What a case's timing runs: the fetches and feeds of its first step that fetches
    something, and the (targets, feeds) of the steps before it, which only initialise
    (variables) and run once first. Plain numpy: TensorFlow's runner imports it too."""
    steps = json.loads((case_dir / "case.json").read_text())["steps"]
    k = next((i for i, s in enumerate(steps) if s["fetch"]), 0)

    def feeds(s: dict) -> dict:
        return {n: np.load(case_dir / f) for n, f in s["feed"].items()}

    setup = [(s["target"], feeds(s)) for s in steps[:k] if s["target"]]
    return steps[k]["fetch"], feeds(steps[k]), setup


def time_dfg(case_dir: Path, warmup: int, iters: int, threads: int) -> dict:
    from dfg.executor import Session
    from dfg.graphdef.io import load_graph

    fetch, feed, setup = timed_step(case_dir)
    graph = case_dir / "graph.pbtxt"
    if not graph.exists():
        graph = case_dir / "graph.pb"
    with Session(load_graph(graph), threads=threads) as sess:
        for targets, f in setup:
            sess.run([], f, targets=targets)
        times = time_steps(sess, fetch, feed, warmup, iters)
    return {"median_s": statistics.median(times), "min_s": min(times)}


def best(fn, repeat: int) -> float:
    """The fastest of ``repeat`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def time_steps(sess, fetch: list[str], feed: dict, warmup: int, iters: int) -> list[float]:
    """Seconds of each of ``iters`` steps after ``warmup`` untimed ones."""
    for _ in range(warmup):
        sess.run(fetch, feed)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(fetch, feed)
        times.append(time.perf_counter() - t0)
    return times


def time_tf(py: str, case_dir: Path, warmup: int, iters: int, threads: int,
            extra: list[str] | None = None) -> dict:
    out = subprocess.run([py, str(Path(__file__).with_name("_tf_runner.py")), str(case_dir),
                          str(warmup), str(iters), str(threads), *(extra or [])],
                         capture_output=True, text=True, env={**os.environ,
                                                              "TF_CPP_MIN_LOG_LEVEL": "3"})
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "tf failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tf_py = find_tf_python(args.tf_python)
    rows = []
    for d in sorted(CASES.glob("*/case.json")):
        case = json.loads(d.read_text())
        if "bench" not in case["features"]:
            continue
        row = {"case": d.parent.name,
               "dfg": time_dfg(d.parent, args.warmup, args.iters, args.threads)}
        if tf_py:
            row["tf"] = time_tf(tf_py, d.parent, args.warmup, args.iters, args.threads)
            row["ratio"] = row["dfg"]["median_s"] / row["tf"]["median_s"]
        rows.append(row)
    if args.json:
        print(json.dumps({"threads": args.threads, "tensorflow": tf_py, "cases": rows},
                         indent=2))
        return
    print(f"threads={args.threads}  tensorflow={'yes (' + tf_py + ')' if tf_py else 'not found'}")
    print(f"{'case':24} {'dfg median ms':>14} {'tf median ms':>13} {'dfg/tf':>7}")
    for r in rows:
        tf_ms = f"{r['tf']['median_s'] * 1e3:13.3f}" if "tf" in r else f"{'-':>13}"
        ratio = f"{r['ratio']:7.2f}" if "ratio" in r else f"{'-':>7}"
        print(f"{r['case']:24} {r['dfg']['median_s'] * 1e3:14.3f} {tf_ms} {ratio}")


if __name__ == "__main__":
    main()
