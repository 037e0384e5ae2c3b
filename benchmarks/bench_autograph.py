"""What ``B.autograph`` costs: converting a function (parse + rewrite + compile, once per
decoration), building its graph, and the graph it builds against the same program written
by hand with ``B.while_loop``/``B.cond`` (nodes, and run time per step in dfg's Session).

    python benchmarks/bench_autograph.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from dfg.executor import Session
from dfg.graphdef import builder as B

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "data" / "autograph"))
from autograph_programs import PROGRAMS, collatz  # noqa: E402


def by_hand(n, functional):
    def body(m, s):
        m = B.cond(B.equal(m % 2, 0), lambda: m // 2, lambda: 3 * m + 1, functional=functional)
        return m, s + 1
    return B.while_loop(lambda m, s: B.not_equal(m, 1), body, [n, B.constant(0)],
                        functional=functional)[1]


def ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    r = args.repeat
    print("convert (ms, median):", ", ".join(
        f"{name} {ms(lambda f=f: B.autograph(f), r):.2f}" for name, f in PROGRAMS.items()))
    for functional in (False, True):
        form = "functional" if functional else "v1"
        graphs = {}
        for kind in ("autograph", "by hand"):
            def build(kind=kind, functional=functional):
                g = B.Graph()
                with g.as_default():
                    n = B.placeholder("int32", [], name="n")
                    out = B.autograph(collatz, functional=functional)(n) \
                        if kind == "autograph" else by_hand(n, functional)
                return g, out
            t_build = ms(build, r)
            g, out = build()
            gd = g.as_graph_def()
            sess = Session(gd, threads=1)
            sess.run(out.name, {"n:0": np.int32(27)})
            t_run = ms(lambda s=sess, o=out: s.run(o.name, {"n:0": np.int32(27)}), r)
            graphs[kind] = (len(gd.node), sum(len(f.node_def) for f in gd.library.function),
                            t_build, t_run)
        for kind, (nodes, fnodes, tb, tr) in graphs.items():
            print(f"collatz {form:10s} {kind:9s}: {nodes:3d} nodes + {fnodes:2d} in functions, "
                  f"build {tb:6.2f} ms, run n=27 (111 iterations) {tr:6.2f} ms")


if __name__ == "__main__":
    main()
