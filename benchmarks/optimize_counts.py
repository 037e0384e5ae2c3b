"""Node counts per TensorFlow conformance case: original, ``dfg optimize``, and Grappler's.

    python benchmarks/optimize_counts.py            # markdown table on stdout
    python benchmarks/optimize_counts.py --csv

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", action="store_true", help="CSV instead of a markdown table")
    args = ap.parse_args()
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
