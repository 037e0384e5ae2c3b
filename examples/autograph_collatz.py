"""Collatz step counts with ``B.autograph``: a ``while`` whose trip count depends on the data,
with an ``if`` inside, written as plain Python and turned into graph control flow.

    python examples/autograph_collatz.py [--functional] [-o collatz.pbtxt]
    dfg run collatz.pbtxt --fetch collatz/steps --feed collatz/n=27      # prints 111

The decorated function is the Python one: called with a Python int it runs as Python; called
with a graph tensor its ``while`` becomes a ``while_loop`` and its ``if`` a ``cond``
(Switch/Merge, or functional ``StatelessWhile``/``StatelessIf`` with ``--functional``). The
script runs the graph with dfg's Session for n = 1..300 and compares every count with the
plain Python function's.
"""

from __future__ import annotations

import argparse

import numpy as np

from dfg.executor import Session
from dfg.graphdef import builder as B


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def build(functional: bool) -> B.Graph:
    g = B.Graph()
    with g.as_default(), g.name_scope("collatz"):
        n = B.placeholder("int32", [], name="n")
        steps = B.autograph(collatz, functional=functional)(n)
        B.identity(steps, name="steps")
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functional", action="store_true", help="functional While/If nodes")
    ap.add_argument("-o", "--output", help="also save the graph (.pbtxt/.pb)")
    ap.add_argument("--source", action="store_true", help="print the rewritten function")
    args = ap.parse_args()
    g = build(args.functional)
    if args.output:
        g.save(args.output)
    if args.source:
        print(B.autograph(collatz).autograph_source)
    sess = Session(g.as_graph_def())
    ns = range(1, 301)
    got = [int(sess.run("collatz/steps:0", {"collatz/n:0": np.int32(n)})) for n in ns]
    want = [collatz(n) for n in ns]          # the same function, run as Python
    assert got == want, [(n, a, b) for n, a, b in zip(ns, got, want) if a != b][:5]
    print(f"graph ({len(g.as_graph_def().node)} nodes) == Python for n = 1..300; "
          f"n=27 takes {got[26]} steps, the longest below 300 is n={1 + int(np.argmax(got))} "
          f"with {max(got)} steps")


if __name__ == "__main__":
    main()
