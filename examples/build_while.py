"""A graph with a nested while loop, built in Python with dfg's builder and saved as .pbtxt.

    python examples/build_while.py [-o examples/build_while.pbtxt]
    dfg run examples/build_while.pbtxt --fetch outer/Exit_1 --feed n=4
    dfg viz examples/build_while.pbtxt -o build_while.svg

For i in 0..n-1 the inner loop adds i to the accumulator i times, so ``outer/Exit_1`` is
``sum(i * i for i in range(n))`` (14 for n=4); ``outer/Exit`` is n.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dfg.graphdef import builder as B


def build() -> B.Graph:
    g = B.Graph()
    with g.as_default():
        n = B.placeholder("int32", [], name="n")

        def outer_body(i, acc):
            def inner_body(j, a):
                return j + 1, a + i
            _, acc = B.while_loop(lambda j, a: j < i, inner_body, [B.constant(0), acc],
                                  name="inner")
            return i + 1, acc

        B.while_loop(lambda i, acc: i < n, outer_body, [B.constant(0), B.constant(0)],
                     name="outer")
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(Path(__file__).with_suffix(".pbtxt")))
    args = ap.parse_args()
    build().save(args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
