"""Benchmark one training step (loss and gradients) of an RNN over a sequence whose length
is fed at run time, three ways the builder can build it: the v1 ``while_loop`` gradient
(stacks and a backward loop, as TensorFlow 1.x), the functional ``While`` gradient (the
forward loop run again recording TensorLists, then a backward While), and, for a length
fixed when the graph is built, ``unroll_loops`` first (a straight-line graph, no frames).

    python benchmarks/while_gradients.py [--lengths 1 10 100] [--repeat 5]

Prints, per length, the best step time of each (ms) and the graph's node count.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_cases import best  # benchmarks/ is the script's folder

from dfg.executor import Session
from dfg.graphdef import builder as B

BATCH, IN, HID = 8, 16, 32


def build(functional: bool, static_length: int | None = None):
    g = B.Graph()
    with g.as_default():
        length = (B.constant(np.int32(static_length)) if static_length is not None
                  else B.placeholder("int32", [], name="length"))
        seq = B.placeholder("float32", [None, BATCH, IN], name="seq")
        wx = B.placeholder("float32", [IN, HID], name="Wx")
        wh = B.placeholder("float32", [HID, HID], name="Wh")
        h0 = B.constant(np.zeros((BATCH, HID), np.float32))

        def body(t, h):
            return t + 1, B.tanh(B.matmul(B.gather(seq, t), wx) + B.matmul(h, wh))
        _, h = B.while_loop(lambda t, h: t < length, body, [B.constant(0), h0],
                            functional=functional)
        loss = B.reduce_sum(h * h)
    if static_length is not None:
        g = B.unroll_loops(g)
        loss = g.get_tensor_by_name(loss.name)
    with g.as_default():
        grads = B.gradients(loss, [g.get_tensor_by_name("Wx:0"),
                                   g.get_tensor_by_name("Wh:0")])
    return g, [loss.name] + [t.name for t in grads]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    wx = rng.normal(size=(IN, HID)).astype(np.float32) * 0.2
    wh = rng.normal(size=(HID, HID)).astype(np.float32) * 0.2
    print(f"{'length':>6} {'v1 stacks ms':>13} {'nodes':>6} {'functional ms':>14} {'nodes':>6} "
          f"{'unrolled ms':>12} {'nodes':>6}")
    for n in args.lengths:
        seq = rng.normal(size=(n, BATCH, IN)).astype(np.float32)
        row = []
        for functional, static in ((False, None), (True, None), (False, n)):
            g, fetches = build(functional, static)
            gd = g.as_graph_def()
            sess = Session(gd)
            feeds = {"seq:0": seq, "Wx:0": wx, "Wh:0": wh}
            if static is None:
                feeds["length:0"] = np.int32(n)
            sess.run(fetches, feeds)   # plan once
            row += [best(lambda s=sess, f=feeds, fe=fetches: s.run(fe, f), args.repeat) * 1e3,
                    len(gd.node)]
        print(f"{n:>6} {row[0]:>13.2f} {row[1]:>6} {row[2]:>14.2f} {row[3]:>6} "
              f"{row[4]:>12.2f} {row[5]:>6}")


if __name__ == "__main__":
    main()
