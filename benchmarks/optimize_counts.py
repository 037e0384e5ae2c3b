"""Node counts per TensorFlow conformance case: original, ``dfg optimize``, and Grappler's.

    python benchmarks/optimize_counts.py            # markdown table on stdout
    python benchmarks/optimize_counts.py --csv
    python benchmarks/optimize_counts.py --zoo [--reps 3] [MODEL ...]   # run-time optimizer

``--zoo`` times instead the Session's per-signature optimizer (``optimize_for_signature``,
what the first step of a new Session runs) on the keras.applications models of
tests/data/models (default: all; or the MODEL folder names given), fetching and feeding what
each case's first step does: nodes before and after, and the best of ``--reps`` runs in wall
and CPU seconds (CPU is the fairer number on a busy machine).

Columns:
  original   nodes in the case's graph.pbtxt
  grappler   nodes TensorFlow's Grappler kept with its default optimizers, fetching the first
             step's fetches (its targets if it fetches nothing), from case.json
  ours       nodes after ``dfg optimize`` with that same fetch set (and the first step's feeds):
             the like-for-like comparison with Grappler
  ours_all   nodes after ``dfg optimize`` for everything the case's steps fetch, run and feed
             (what tests/test_optimize_conformance.py runs against TensorFlow's values;
             larger than ``ours`` where later steps need more of the graph)
  seconds    time of the ``ours_all`` optimization
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conformance import case_dirs, load_case  # noqa: E402

from dfg.graphdef.io import load_graph  # noqa: E402
from dfg.graphdef.passes import PassOptions  # noqa: E402
from dfg.graphdef.passes.pipeline import optimize  # noqa: E402


def _unique(xs) -> tuple[str, ...]:
    return tuple(dict.fromkeys(xs))


def counts() -> list[dict]:
    rows = []
    for d in case_dirs():
        case = load_case(d)
        steps = case["steps"]
        g = load_graph(d / "graph.pbtxt")
        first = steps[0]
        like_grappler = PassOptions(tuple(first["fetch"]),
                                    () if first["fetch"] else tuple(first["target"]),
                                    tuple(first["feed"]))
        everything = PassOptions(_unique(f for s in steps for f in s["fetch"]),
                                 _unique(t for s in steps for t in s["target"]),
                                 _unique(k for s in steps for k in s["feed"]))
        ours = optimize(g, like_grappler)
        t0 = time.perf_counter()
        ours_all = optimize(g, everything)
        secs = time.perf_counter() - t0
        rows.append({"case": d.name, "original": len(g), "grappler": case["grappler_nodes"],
                     "ours": ours.nodes_after, "ours_all": ours_all.nodes_after,
                     "seconds": secs, "warnings": len(ours.warnings) + len(ours_all.warnings)})
    return rows


def zoo(names: list[str], reps: int) -> None:
    import json

    from dfg.graphdef.passes.pipeline import optimize_for_signature

    models = ROOT / "tests" / "data" / "models"
    dirs = [models / n for n in names] if names else sorted(
        p.parent for p in models.glob("*/case.json")
        if not p.parent.name.startswith(("layer_", "kernels")))
    print(f"{'model':24} {'nodes':>7} {'after':>7} {'wall s':>8} {'cpu s':>8}")
    for d in dirs:
        step = json.loads((d / "case.json").read_text())["steps"][0]
        path = d / "graph.pb" if (d / "graph.pb").exists() else d / "graph.pbtxt"
        g = load_graph(path)
        best_wall = best_cpu = float("inf")
        for _ in range(reps):
            w0, c0 = time.perf_counter(), time.process_time()
            res = optimize_for_signature(g, step["fetch"], list(step["feed"]), step["target"])
            best_wall = min(best_wall, time.perf_counter() - w0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        print(f"{d.name:24} {len(g):7d} {res.nodes_after:7d} {best_wall:8.3f} {best_cpu:8.3f}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", action="store_true", help="CSV instead of a markdown table")
    ap.add_argument("--zoo", action="store_true",
                    help="time the Session's optimizer on the zoo models instead")
    ap.add_argument("--reps", type=int, default=3, help="runs per model with --zoo (best)")
    ap.add_argument("models", nargs="*", help="zoo model folders (with --zoo; default all)")
    args = ap.parse_args()
    if args.zoo:
        zoo(args.models, args.reps)
        return
    rows = counts()
    cols = ["case", "original", "grappler", "ours", "ours_all", "ours-grappler", "seconds"]
    if args.csv:
        print(",".join(cols))
    else:
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(cols) - 1)) + "|")
    below = equal = above = 0
    for r in rows:
        g = r["grappler"]
        delta = "" if g is None else f"{r['ours'] - g:+d}"
        if g is not None:
            below += r["ours"] < g
            equal += r["ours"] == g
            above += r["ours"] > g
        vals = [r["case"], str(r["original"]), "null" if g is None else str(g), str(r["ours"]),
                str(r["ours_all"]), delta, f"{r['seconds']:.3f}"]
        print(",".join(vals) if args.csv else "| " + " | ".join(vals) + " |")
    if not args.csv:
        total = sum(r["original"] for r in rows), sum(r["ours"] for r in rows)
        print(f"\n{len(rows)} cases: ours < Grappler in {below}, = in {equal}, > in {above}; "
              f"{total[0]} -> {total[1]} nodes in all; "
              f"{sum(r['warnings'] for r in rows)} pass warnings")


if __name__ == "__main__":
    main()
