"""Batch inference throughput (rows/s): `dfg batch` with 1 and 2 workers on the local engine
and on Ray, against TensorFlow in one process with the same batch size.

    python benchmarks/bench_batch.py [--model mobilenet] [--rows 1024] [--shards 4]
                                     [--batch-size 32] [--tf-python /path/to/tfvenv/bin/python]
                                     [--no-ray] [--json]

The rows are seeded random inputs for a zoo model (tests/data/models/MODEL, its first feed
and fetch), cut into --shards npz files. Every dfg run is the whole of `run_batch` (what `dfg
batch` does): worker start-up and model loading included, as the rows/s a user sees. The
Ray instance (local, started once here) is not counted; its actors are. TensorFlow runs in a
subprocess of a separate environment (--tf-python, $DFG_TF_PYTHON): its rows/s is given for
the inference loop alone and with the import of TensorFlow and the graph load counted; "dfg
in process" is dfg's loop timed the same way (the model loaded and optimized once, as in
each worker; its first batch is in the loop, as TensorFlow's is).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "data" / "models"


def make_shards(model: str, rows: int, shards: int, folder: Path) -> tuple[str, str, list[str]]:
    case = json.loads((ZOO / model / "case.json").read_text())
    step = case["steps"][0]
    feed, fetch = next(iter(step["feed"].items()))[0], step["fetch"][0]
    x = np.load(ZOO / model / step["feed"][feed])
    rng = np.random.default_rng(0)
    data = rng.standard_normal((rows,) + x.shape[1:]).astype(x.dtype)
    paths = []
    for i, part in enumerate(np.array_split(data, shards)):
        p = folder / f"shard_{i}.npz"
        np.savez(p, **{feed: part})
        paths.append(str(p))
    return feed, fetch, paths


def run_dfg(model: str, fetch: str, paths: list[str], out: Path, engine: str, workers: int,
            batch_size: int) -> dict:
    from dfg.executor.distributed.batch import run_batch

    shutil.rmtree(out, ignore_errors=True)
    report = run_batch(str(ZOO / model / "graph.pb"), paths, str(out), fetches=[fetch],
                       engine=engine, workers=workers, batch_size=batch_size)
    failed = [f for f in report["files"] if f["status"] != "done"]
    if failed:
        raise SystemExit(f"dfg batch failed: {failed[0]['error']}")
    return {"engine": engine, "workers": workers, "rows": report["rows"],
            "seconds": report["seconds"], "rows_per_s": report["rows_per_s"]}


def run_in_process(model: str, feed: str, fetch: str, paths: list[str], batch_size: int,
                   threads: int) -> dict:
    """dfg's inference loop in this process (a Model, as each worker holds), timed as
    TensorFlow's: the loop apart from loading."""
    from dfg.executor.distributed.batch import Model

    t0 = time.perf_counter()
    m = Model(str(ZOO / model / "graph.pb"), fetches=[fetch], threads=threads)
    startup = time.perf_counter() - t0
    t1 = time.perf_counter()
    rows = 0
    for p in paths:
        with np.load(p) as z:
            x = z[feed]
        for i in range(0, len(x), batch_size):
            rows += len(m.run({feed: x[i:i + batch_size]})[fetch])
    seconds = time.perf_counter() - t1
    m.close()
    return {"engine": f"dfg in process ({threads} thr)", "workers": 1, "rows": rows,
            "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds, 3),
            "startup_s": round(startup, 3),
            "rows_per_s_with_startup": round(rows / (seconds + startup), 3)}


def run_tf(py: str, model: str, feed: str, fetch: str, paths: list[str], batch_size: int,
           threads: int) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([py, str(Path(__file__).with_name("_tf_batch_runner.py")),
                        str(ZOO / model / "graph.pb"), feed, fetch, str(batch_size),
                        str(threads), *paths], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"TensorFlow failed: {p.stderr.strip().splitlines()[-1:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {"engine": f"tensorflow ({threads} thr)", "workers": 1, "rows": r["rows"],
            "seconds": round(r["seconds"], 3), "rows_per_s": round(r["rows"] / r["seconds"], 3),
            "startup_s": round(r["startup_s"], 3), "process_s": round(wall, 3),
            "rows_per_s_with_startup": round(r["rows"] / (r["seconds"] + r["startup_s"]), 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mobilenet")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--tf-python", default=None)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from bench_cases import find_tf_python

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        feed, fetch, paths = make_shards(args.model, args.rows, args.shards, folder)
        for workers in (1, 2):
            results.append(run_dfg(args.model, fetch, paths, folder / "out", "local", workers,
                                   args.batch_size))
        if not args.no_ray:
            import ray

            from dfg.executor.distributed import prepare_local_ray

            prepare_local_ray()      # as dfg batch starts its own instance
            t0 = time.perf_counter()
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            ray_start = time.perf_counter() - t0
            try:
                for workers in (1, 2):
                    r = run_dfg(args.model, fetch, paths, folder / "out", "ray", workers,
                                args.batch_size)
                    r["ray_init_s"] = round(ray_start, 3)
                    results.append(r)
            finally:
                ray.shutdown()
        for threads in (1, os.cpu_count() or 1):
            results.append(run_in_process(args.model, feed, fetch, paths, args.batch_size,
                                          threads))
        py = find_tf_python(args.tf_python)
        if py is not None:
            for threads in (1, os.cpu_count() or 1):
                results.append(run_tf(py, args.model, feed, fetch, paths, args.batch_size,
                                      threads))
    if args.json:
        print(json.dumps({"model": args.model, "rows": args.rows, "shards": args.shards,
                          "batch_size": args.batch_size, "results": results}, indent=2))
        return
    print(f"{args.model}: {args.rows} rows in {args.shards} npz shards, batch size "
          f"{args.batch_size}, {os.cpu_count()} cores")
    print(f"{'engine':<24} {'workers':>7} {'seconds':>9} {'rows/s':>9}  notes")
    for r in results:
        notes = ""
        if "startup_s" in r:
            notes = (f"+{r['startup_s']:.2f} s load (import for TF): "
                     f"{r['rows_per_s_with_startup']:.1f} rows/s overall")
        elif "ray_init_s" in r:
            notes = f"Ray started once before, in {r['ray_init_s']:.1f} s (not counted)"
        else:
            notes = "worker start-up and model load counted"
        print(f"{r['engine']:<24} {r['workers']:>7} {r['seconds']:>9.2f} "
              f"{r['rows_per_s']:>9.1f}  {notes}")


if __name__ == "__main__":
    main()
