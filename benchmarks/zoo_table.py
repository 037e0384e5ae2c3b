"""Print the Keras model zoo table (tests/data/models): graph size, nodes, distinct ops, the
largest absolute error against TensorFlow's outputs, and seconds per step in dfg (and in
TensorFlow, when it is available).

    python benchmarks/zoo_table.py [--tf-python /path/to/tf-venv/bin/python] [--threads 2]
                                   [--iters 10] [--layers] [--only mobilenet,resnet50] [--json]
                                   [--dir /tmp/zoo_full]

By default the keras.applications cases are listed; ``--layers`` adds the one-layer cases.
TensorFlow is never a dependency of dfg: it runs in a subprocess of a separate environment,
found from --tf-python, $DFG_TF_PYTHON, or the current interpreter if it can import
tensorflow (as in bench_cases.py). Both sides run the case's first step with the same feeds
and fetches, intra- and inter-op threads set to ``--threads``; the median step is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cases import find_tf_python, time_steps, time_tf  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "data" / "models"

def measure_dfg(d: Path, threads: int, warmup: int, iters: int) -> dict:
    from dfg.executor import Session
    from dfg.graphdef.io import load_graph

    case = json.loads((d / "case.json").read_text())
    step = case["steps"][0]
    graph = load_graph(d / "graph.pb")
    feed = {k: np.load(d / v) for k, v in step["feed"].items()}
    with Session(graph, threads=threads) as sess:
        out = sess.run(step["fetch"], feed)
        err = 0.0
        for name, value in zip(step["fetch"], out):
            exp = np.load(d / step["expect"][name])
            if exp.size:
                err = max(err, float(np.max(np.abs(np.asarray(value, np.float64) - exp))))
        times = time_steps(sess, step["fetch"], feed, warmup, iters)
    return {"case": d.name, "mb": (d / "graph.pb").stat().st_size / 1e6,
            "nodes": len(graph.nodes), "ops": len({n.op for n in graph.nodes}),
            "params": case.get("params"), "max_abs_err": err, "atol": case["atol"],
            "dfg_s": statistics.median(times)}


def measure_tf(py: str, d: Path, threads: int, warmup: int, iters: int) -> float | None:
    try:
        return time_tf(py, d, warmup, iters, threads)["median_s"]
    except RuntimeError:
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--layers", action="store_true", help="include the one-layer cases")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--dir", type=Path, default=ZOO,
                    help="zoo folder (e.g. the --out of generate.py --full)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    dirs = sorted(p.parent for p in args.dir.glob("*/case.json"))
    if args.only:
        keep = set(args.only.split(","))
        dirs = [d for d in dirs if d.name in keep]
    elif not args.layers:
        dirs = [d for d in dirs if not d.name.startswith("layer_")]
    tf_py = find_tf_python(args.tf_python)
    rows = []
    for d in dirs:
        row = measure_dfg(d, args.threads, args.warmup, args.iters)
        if tf_py:
            row["tf_s"] = measure_tf(tf_py, d, args.threads, args.warmup, args.iters)
        rows.append(row)
    if args.json:
        print(json.dumps({"threads": args.threads, "tensorflow": tf_py, "cases": rows},
                         indent=1))
        return
    print(f"threads={args.threads}  tensorflow={tf_py or 'not found'}")
    print(f"{'model':34} {'MB':>6} {'nodes':>6} {'ops':>4} {'max|err|':>9} {'atol':>8} "
          f"{'dfg ms':>8} {'tf ms':>8} {'dfg/tf':>6}")
    for r in rows:
        tf_s = r.get("tf_s")
        tf_ms = f"{tf_s * 1e3:8.2f}" if tf_s else f"{'-':>8}"
        ratio = f"{r['dfg_s'] / tf_s:6.1f}" if tf_s else f"{'-':>6}"
        print(f"{r['case']:34} {r['mb']:6.2f} {r['nodes']:6d} {r['ops']:4d} "
              f"{r['max_abs_err']:9.2e} {r['atol']:8.1e} {r['dfg_s'] * 1e3:8.2f} {tf_ms} {ratio}")


if __name__ == "__main__":
    main()
