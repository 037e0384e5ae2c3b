"""Where a step's time goes, kernel by kernel, inside compiled programs too (issue #32).

    python benchmarks/loop_profile.py tests/data/bench/bench_lstm_classifier [--steps 100]
                                      [--threads 2]

cProfile cannot see into generated loop code and adds its own cost to every call; this
wraps only the calls generated code makes (``kernel_call.call``, each array form, the
memory-budget test) with a clock, runs ``--steps`` warm steps of the case's first timed step,
and prints per op: microseconds per step, calls per step and microseconds per call. The
wrapping adds well under a microsecond per call; the rows are what each call costs, the
gap to the step's total what the generated code and the scheduler cost around them.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cases import timed_step  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", type=Path)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from dfg.executor import Session, codegen
    from dfg.graphdef.io import load_graph

    spent: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    clock = time.perf_counter

    def timed(label: str, fn: Any) -> Any:
        def run(*a: Any) -> Any:
            t = clock()
            try:
                return fn(*a)
            finally:
                spent[label] += clock() - t
                calls[label] += 1
        return run

    compile_function = codegen.Emitter.compile

    def compile_timed(self: Any, name: str, params: str) -> Any:
        for key, fn in list(self.env.items()):
            if key.startswith("AF"):
                op = self.kernels[int(key[2:])].op
                self.env[key] = timed(f"array form {op}", fn)
        made = compile_function(self, name, params)
        kernel_call, fits = made.__globals__["call"], made.__globals__["FITS"]
        made.__globals__["call"] = lambda k, a, c: timed(f"kernel call {k.op}", kernel_call)(
            k, a, c)
        made.__globals__["FITS"] = lambda k, a, c: timed(f"budget test {k.op}", fits)(k, a, c)
        return made

    codegen.Emitter.compile = compile_timed
    fetch, feed, setup = timed_step(args.case)
    graph = args.case / "graph.pbtxt"
    if not graph.exists():
        graph = args.case / "graph.pb"
    with Session(load_graph(graph), threads=args.threads) as sess:
        for targets, fd in setup:
            sess.run([], fd, targets=targets)
        for _ in range(30):
            sess.run(fetch, feed)
        spent.clear()
        calls.clear()
        t0 = clock()
        for _ in range(args.steps):
            sess.run(fetch, feed)
        step_us = (clock() - t0) / args.steps * 1e6
    n = args.steps
    print(f"{args.case.name}: {step_us:.0f} us per step ({n} steps, {args.threads} threads)")
    print(f"{'op':44} {'us/step':>9} {'calls/step':>11} {'us/call':>9}")
    for label, secs in spent.most_common():
        print(f"{label:44} {secs / n * 1e6:9.1f} {calls[label] / n:11.1f} "
              f"{secs / calls[label] * 1e6:9.2f}")


if __name__ == "__main__":
    main()
