"""The whole performance table, dfg against TensorFlow in the same run (issue #12).

    python benchmarks/table.py [--tf-python /tmp/tfvenv/bin/python] [--threads 2]
                               [--rounds 3] [--iters 10] [--warmup 3]
                               [--only bench,zoo,tf2,rnn,cold] [--case NAME ...]
                               [--dir DIR ...] [--json]

Cases: every ``bench`` case of tests/data/conformance and tests/data/bench (the issue's
nested loops, MLP, ResNet-style, Transformer encoder and U-Net), every keras.applications
model of the zoo (tests/data/models), the TF2 loop cases (tests/data/tf2) and the recurrent
models (``rnn``: Keras LSTM/GRU/Bidirectional/SimpleRNN functional and lowered, an LSTM
classifier, a TF1 ``dynamic_rnn`` LSTM, a scalar while with a Cast). For each, ``--rounds``
alternating rounds (dfg, then TensorFlow in a subprocess of its own environment), each the
median of ``--iters`` warm steps after ``--warmup`` untimed ones on both sides; the table
shows each side's median over rounds and the ratio dfg/TF (below 1: dfg is faster): the
median of each round's own ratio, its dfg time over the TensorFlow time measured right after
it (a shared machine runs in speed phases of seconds that slow both sides alike: DenseNet's
dfg rounds took 3.2, 2.9, 1.6, 2.7 ms while TensorFlow's beside them took 4.1, 3.9, 1.8,
3.1, so the ratio of the two medians mixed phases), and beside it that ratio of medians
("of medians"). Then the cold timings: ``dfg run`` of the README's example as a whole
process, and for each bench case and every case whose warm step is over 1 ms the first step
of a new Session (plan, compile, run) and its second step (where a graph without loops gets
optimized) against its warm steps, the first step optimized eagerly, and the first step of a
new Session when the plan cache holds its optimized graph, beside TensorFlow's own first
step against its warm steps (when the case ran with TensorFlow in the same invocation).

TensorFlow is never a dependency of dfg: without it the TF columns are empty. Timings are
medians; run on an idle machine (other processes only add noise). An ``OPENBLAS_CORETYPE``
that holds OpenBLAS to AVX2 kernels on an AVX-512 CPU (TensorFlow's kernels ignore it) is
dropped for the run, with a note, unless ``--keep-blas-env``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cases import find_tf_python, time_steps, time_tf, timed_step  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TF2_LOOPS = ("tf2_stateless_while", "tf2_nested_while", "tf2_while_stateful", "tf2_scan",
             "tf2_map_fn", "tf2_if_in_while", "tf2_keras_lstm_lowered", "tf2_keras_gru_lowered")
# recurrent models (issue #32): the Keras layers functional and lowered, then the bench cases
# of tests/data/bench that hold a recurrent network and the scalar while with a Cast
RNN_TF2 = tuple(f"tf2_keras_{k}{lo}" for k in ("lstm", "gru", "bidirectional_lstm", "simple_rnn")
                for lo in ("", "_lowered"))
RNN_BENCH = ("bench_lstm_classifier", "bench_dynamic_rnn_lstm", "bench_while_cast_10k")

# untimed steps before each round's timed ones, the same for both: a round starts right
# after the other side's (TensorFlow's process loading a gigabyte of libraries leaves the
# caches cold: mobilenet_v3_small's first dfg steps after it took 6.2, 1.6, 1.5, 5.4 ms,
# then 1.0-1.1), and TensorFlow's steps in its new process start just as cold
WARMUP = 3

# dfg/TF ratios the issue measured before the work on it (issue #12's text), for the cases
# that are the same graphs here
ISSUE_BEFORE = {"bench_add_chain": 8.1, "bench_addn_fanin": 5.6, "bench_while_10k": 3.5,
                "bench_matmul_branches": 1.03, "bench_cnn": 1.69, "mobilenet_v2": 1.80,
                "efficientnet_b0": 2.03}


def cases(groups: set[str]) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    if "bench" in groups:
        for d in [*sorted((DATA / "conformance").glob("*/case.json")),
                  *sorted((DATA / "bench").glob("*/case.json"))]:
            if "bench" in json.loads(d.read_text())["features"] and \
                    d.parent.name not in RNN_BENCH:
                out.append(("bench", d.parent))
    if "zoo" in groups:
        for d in sorted((DATA / "models").glob("*/case.json")):
            if not d.parent.name.startswith(("layer_", "kernels")):
                out.append(("zoo", d.parent))
    if "tf2" in groups:
        for name in TF2_LOOPS:
            if (DATA / "tf2" / name / "case.json").exists():
                out.append(("tf2", DATA / "tf2" / name))
    if "rnn" in groups:
        for name in RNN_TF2:
            if (DATA / "tf2" / name / "case.json").exists():
                out.append(("rnn", DATA / "tf2" / name))
        for name in RNN_BENCH:
            if (DATA / "bench" / name / "case.json").exists():
                out.append(("rnn", DATA / "bench" / name))
    return out


def _graph_file(d: Path) -> Path:
    return d / "graph.pbtxt" if (d / "graph.pbtxt").exists() else d / "graph.pb"


def _init(sess: object, setup: list) -> None:
    for targets, feed in setup:
        sess.run([], feed, targets=targets)


def first_and_warm(d: Path, threads: int, iters: int, reps: int = 1
                   ) -> tuple[float, float, float, float, float]:
    """Seconds of the first step of a new Session (plan, compile, run), of its second step
    (which, without loops, optimizes the signature: Session's ``optimize="lazy"``), the
    median warm step, the first step with ``optimize="eager"`` (optimized before it runs,
    as TensorFlow does), and the first step of a new Session of the graph loaded again once
    the process's plan cache holds its optimized graph (executor/plan_cache.py); each the
    median over ``reps`` new Sessions (TensorFlow's first step is the median over its
    rounds). The graph is loaded before the clock starts: reading a file is not a step."""
    import dfg.graphdef.passes.pipeline  # noqa: F401
    from dfg.executor import Session, plan_cache
    from dfg.executor.kernels import registry
    from dfg.graphdef.io import load_graph

    # Imports are paid once per process (the cold run counts them), not by each Session.
    registry.load_all()
    fetch, feed, setup = timed_step(d)
    firsts, seconds, warms, eager, cached = [], [], [], [], []
    for _ in range(reps):
        for mode, out in ((None, firsts), ("eager", eager), (None, cached)):
            # nothing carried over, but for the cached first step the plan cache's entry
            if out is not cached:
                plan_cache.clear()
            sess = Session(load_graph(_graph_file(d)), threads=threads, optimize=mode)
            _init(sess, setup)
            t0 = time.perf_counter()
            sess.run(fetch, feed)
            out.append(time.perf_counter() - t0)
            if out is firsts:
                t0 = time.perf_counter()
                sess.run(fetch, feed)
                seconds.append(time.perf_counter() - t0)
                warms.append(statistics.median(time_steps(sess, fetch, feed, 2, iters)))
            sess.close()
    return tuple(statistics.median(x) for x in (firsts, seconds, warms, eager, cached))


def cold_run(reps: int = 5) -> float:
    """Median seconds of `dfg run` of the README's example as a whole process."""
    exe = Path(sys.executable).with_name("dfg")
    cmd = [str(exe) if exe.exists() else "dfg", "run",
           str(ROOT / "examples" / "while_counter.pbtxt"), "--fetch", "counter/Exit",
           "--feed", "n=5"]
    # An installed package has its bytecode compiled (pip does it); an editable checkout
    # under PYTHONDONTWRITEBYTECODE=1 would recompile every module on every start instead.
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    *(str(ROOT / d) for d in ("cli", "executor", "graphdef", "schemas"))],
                   check=True, capture_output=True)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _blas_kernels_held_back() -> str | None:
    """OPENBLAS_CORETYPE as the environment sets it, when it holds OpenBLAS below what this
    CPU runs (Haswell/AVX2 kernels on an AVX-512 CPU): TensorFlow's own kernels ignore it, so
    a same-run comparison would pit dfg's AVX2 BLAS against TensorFlow's AVX-512 one."""
    core = os.environ.get("OPENBLAS_CORETYPE")
    if not core or core.upper() not in ("HASWELL", "SANDYBRIDGE", "NEHALEM", "ZEN"):
        return None
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return core if " avx512f " in flags.replace("\n", " ") else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep-blas-env", action="store_true",
                    help="Keep an OPENBLAS_CORETYPE that holds OpenBLAS below the CPU's "
                         "kernels (by default the table reruns itself without it, and says so)")
    ap.add_argument("--tf-python")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    # more untimed steps per round: TensorFlow's new process takes 15-20 steps to settle on
    # a recurrent loop (the LSTM classifier's steps fell from 2.0 to 1.45 ms), so a round
    # after 3 flatters dfg there (its Session is warm from the rounds before)
    ap.add_argument("--warmup", type=int, default=WARMUP)
    ap.add_argument("--only", default="bench,zoo,tf2,rnn,cold")
    ap.add_argument("--case", action="append", default=[],
                    help="only this case (by directory name; may be repeated)")
    ap.add_argument("--dir", action="append", default=[], type=Path,
                    help="also every case under this directory (a case.json and its graph, "
                         "as tests/data writes them: your own models; may be repeated)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    held = None if args.keep_blas_env else _blas_kernels_held_back()
    if held is not None:
        # numpy has not loaded OpenBLAS yet in this process only if dfg was not imported:
        # rerun cleanly without the variable
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        print(f"note: OPENBLAS_CORETYPE={held} held OpenBLAS to older kernels than this CPU "
              "runs (TensorFlow ignores it); rerunning without it (--keep-blas-env keeps it)",
              flush=True)
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    groups = set(args.only.split(","))
    tf_py = find_tf_python(args.tf_python)
    from dfg.executor import Session
    from dfg.graphdef.io import load_graph

    rows = []
    if not args.json:
        print(f"{'group':6} {'case':32} {'dfg ms':>10} {'TF ms':>10} {'ratio':>7} {'before':>7}"
              f" {'of medians':>10}")
    extra = [("dir", c.parent) for root in args.dir for c in sorted(root.glob("*/case.json"))]
    for group, d in [*cases(groups), *extra]:
        if args.case and d.name not in args.case:
            continue
        fetch, feed, setup = timed_step(d)
        sess = Session(load_graph(_graph_file(d)), threads=args.threads)
        _init(sess, setup)
        sess.run(fetch, feed)
        dfg_r, tf_r, tf_first = [], [], []
        for _ in range(args.rounds):
            dfg_r.append(statistics.median(time_steps(sess, fetch, feed, args.warmup,
                                                      args.iters)))
            if tf_py:
                try:
                    tf_t = time_tf(tf_py, d, args.warmup, args.iters, args.threads)
                    tf_r.append(tf_t["median_s"])
                    tf_first.append(tf_t["first_s"])
                except RuntimeError as e:
                    print(f"{d.name}: TensorFlow failed: {e}", file=sys.stderr)
        sess.close()
        row = {"group": group, "case": d.name, "dfg_ms": statistics.median(dfg_r) * 1e3}
        if d.name in ISSUE_BEFORE:
            row["ratio_before"] = ISSUE_BEFORE[d.name]
        if tf_r:
            row["tf_ms"] = statistics.median(tf_r) * 1e3
            row["tf_first_ms"] = statistics.median(tf_first) * 1e3
            # each round's dfg time over the TensorFlow time right after it (a failed
            # TensorFlow round leaves its dfg round unpaired)
            pairs = [d / t for d, t in zip(dfg_r, tf_r)] if len(tf_r) == len(dfg_r) else []
            row["ratio_of_medians"] = row["dfg_ms"] / row["tf_ms"]
            row["ratio"] = statistics.median(pairs) if pairs else row["ratio_of_medians"]
        rows.append(row)
        if not args.json:
            tf_ms = f"{row['tf_ms']:10.3f}" if "tf_ms" in row else f"{'-':>10}"
            ratio = f"{row['ratio']:7.2f}" if "ratio" in row else f"{'-':>7}"
            before = f"{row['ratio_before']:7.2f}" if "ratio_before" in row else f"{'':>7}"
            of_medians = f"{row['ratio_of_medians']:10.2f}" if "ratio" in row else ""
            print(f"{group:6} {d.name:32} {row['dfg_ms']:10.3f} {tf_ms} {ratio} {before}"
                  f" {of_medians}", flush=True)
    cold: dict = {}
    if "cold" in groups:
        cold["dfg_run_s"] = cold_run()
        cold["first_vs_warm"] = {}
        tf_rows = {r["case"]: r for r in rows if "tf_first_ms" in r}
        # the bench cases, and every case of the groups that ran whose warm step is over
        # 1 ms (the issue's first-step target covers those)
        slow = {r["case"] for r in rows if r["dfg_ms"] > 1.0}
        cold_cases = {d.name: d for _g, d in cases({"bench"})}
        cold_cases.update({d.name: d for _g, d in cases(groups) if d.name in slow})
        for d in cold_cases.values():
            if args.case and d.name not in args.case:
                continue
            first, second, warm, eager, cached = first_and_warm(d, args.threads, args.iters,
                                                                 args.rounds)
            r = cold["first_vs_warm"][d.name] = {
                "first_ms": first * 1e3, "second_ms": second * 1e3, "warm_ms": warm * 1e3,
                "ratio": first / warm, "eager_first_ms": eager * 1e3,
                "eager_ratio": eager / warm, "cached_first_ms": cached * 1e3,
                "cached_ratio": cached / warm}
            if d.name in tf_rows:   # TensorFlow's own first step against its warm step
                t = tf_rows[d.name]
                r["tf_first_ms"], r["tf_ratio"] = t["tf_first_ms"], t["tf_first_ms"] / t["tf_ms"]
    if args.json:
        print(json.dumps({"threads": args.threads, "tensorflow": tf_py, "rows": rows,
                          "cold": cold}, indent=2))
        return
    if cold:
        print(f"\ncold `dfg run examples/while_counter.pbtxt` (whole process): "
              f"{cold['dfg_run_s']:.3f} s")
        print("(first: the default, auto; second: the step that optimizes a graph without "
              "loops; eager: optimized before the first step; cached: a new Session of the "
              "graph loaded again, its optimized graph in the plan cache)")
        print(f"{'first step of a new Session':32} {'first ms':>10} {'second ms':>10}"
              f" {'warm ms':>10} {'x':>7} {'eager ms':>10} {'eager x':>7}"
              f" {'cached ms':>10} {'cached x':>8} {'TF first':>10} {'TF x':>7}")
        for name, r in cold["first_vs_warm"].items():
            tf = f" {r['tf_first_ms']:10.3f} {r['tf_ratio']:7.2f}" if "tf_ratio" in r else ""
            print(f"{name:32} {r['first_ms']:10.3f} {r['second_ms']:10.3f} "
                  f"{r['warm_ms']:10.3f} {r['ratio']:7.2f} {r['eager_first_ms']:10.3f} "
                  f"{r['eager_ratio']:7.2f} {r['cached_first_ms']:10.3f} "
                  f"{r['cached_ratio']:8.2f}{tf}")
    paired = [r for r in rows if "ratio" in r]
    if paired:
        def gmean(xs: list[float]) -> float:
            return math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(f"\ngeometric mean over {len(paired)} cases: "
              f"{gmean([r['ratio'] for r in paired]):.3f} "
              f"(of medians: {gmean([r['ratio_of_medians'] for r in paired]):.3f})")
    print(f"\nthreads={args.threads} rounds={args.rounds} iters={args.iters} "
          f"tensorflow={tf_py or 'not found'} cpus={os.cpu_count()}")


if __name__ == "__main__":
    main()
