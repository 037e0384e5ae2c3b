"""An RNN trained over sequences whose length is fed at run time, with gradients through the
while loop, no TensorFlow; compared step by step with TensorFlow's numbers.

    python examples/train_dynamic_rnn.py [--quiet]

One graph: ``h_t = tanh(x_t Wx + h_{t-1} Wh + b)`` for ``t < length`` in a ``while_loop``
(``length`` a placeholder), the loss ``mean((h - target)^2)``, ``B.gradients`` of it against
the three ref variables (a backward loop popping what the forward loop pushed, as TensorFlow
1.x builds it), and plain gradient descent (``assign_sub``) in a step of its own. Every step
feeds a batch of a different length (1 to 8). The losses and the trained weights are
compared with what TensorFlow 2.21 computed for the same program and data
(``train_dynamic_rnn_tf.json``, written by tests/data/while_grad/generate.py); exit 1 if
they differ by more than float32 rounding allows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

BATCH, IN, HID = 4, 3, 5
LR = 0.3
STEPS = 40
TF_NUMBERS = Path(__file__).with_name("train_dynamic_rnn_tf.json")

_rng = np.random.default_rng(2026)
WX0 = (_rng.normal(size=(IN, HID)) * 0.5).astype(np.float32)
WH0 = (_rng.normal(size=(HID, HID)) * 0.3).astype(np.float32)
B0 = np.zeros(HID, np.float32)
_MIX = _rng.normal(size=(IN, HID)).astype(np.float32)


def _batch(rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
    seq = rng.normal(size=(length, BATCH, IN)).astype(np.float32)
    # a target the RNN can learn: a squashed, decaying sum of the inputs
    decay = 0.7 ** np.arange(length)[::-1]
    target = np.tanh(np.einsum("t,tbi,ih->bh", decay, seq, _MIX) * 0.5).astype(np.float32)
    return seq, target


def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    for _ in range(STEPS):
        yield _batch(rng, int(rng.integers(1, 9)))


EVAL = _batch(np.random.default_rng(99), 7)


def build():
    from dfg.graphdef import builder as B
    g = B.Graph()
    with g.as_default():
        length = B.placeholder("int32", [], name="length")
        seq = B.placeholder("float32", [None, BATCH, IN], name="seq")
        target = B.placeholder("float32", [BATCH, HID], name="target")
        wx = B.variable(WX0, name="Wx")
        wh = B.variable(WH0, name="Wh")
        b = B.variable(B0, name="b")

        def body(t, h):
            xt = B.gather(seq, t)
            return t + 1, B.tanh(B.matmul(xt, wx) + B.matmul(h, wh) + b)
        _, h = B.while_loop(lambda t, h: t < length, body,
                            [B.constant(0), B.zeros([BATCH, HID])])
        loss = B.reduce_mean(B.square(h - target))
        grads = B.gradients(loss, [wx, wh, b])
        step = B.group(*[v.assign_sub(LR * gv) for v, gv in zip([wx, wh, b], grads)])
        init = B.global_variables_initializer()
    return g, loss, step, init, [wx, wh, b]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    from dfg.executor import Session

    g, loss, step, init, variables = build()
    sess = Session(g.as_graph_def())
    sess.run([], targets=[init.name])
    tf = json.loads(TF_NUMBERS.read_text())
    worst = 0.0
    for i, (seq, tgt) in enumerate(batches()):
        feeds = {"length:0": np.int32(len(seq)), "seq:0": seq, "target:0": tgt}
        lv = float(sess.run(loss.name, feeds))
        sess.run([], feeds, targets=[step.name])
        worst = max(worst, abs(lv - tf["losses"][i]) / max(abs(tf["losses"][i]), 1e-6))
        if not args.quiet and (i < 5 or i % 10 == 9):
            print(f"step {i:3d}  length {len(seq)}  loss {lv:.6f}  "
                  f"(TensorFlow {tf['losses'][i]:.6f})")
    feeds = {"length:0": np.int32(len(EVAL[0])), "seq:0": EVAL[0], "target:0": EVAL[1]}
    ev = float(sess.run(loss.name, feeds))
    got = sess.run([v.value().name for v in variables])
    w_err = max(float(np.abs(a - np.asarray(tf[k])).max())
                for a, k in zip(got, ("Wx", "Wh", "b")))
    print(f"eval loss {ev:.6f} (TensorFlow {tf['eval_loss']:.6f}; before training "
          f"{tf['eval_loss_before']:.6f}); worst relative loss difference {worst:.1e}; "
          f"max |weights - TensorFlow's| {w_err:.1e}")
    ok = worst < 1e-4 and w_err < 1e-4 and abs(ev - tf["eval_loss"]) < 1e-4
    return 0 if ok and ev < tf["eval_loss_before"] else 1


if __name__ == "__main__":
    sys.exit(main())
