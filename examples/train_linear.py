"""Linear regression trained by a builder ``Function`` with SGD updates, no TensorFlow.

    python examples/train_linear.py [--epochs 300] [--lr 0.1]

The graph computes the mean squared error of ``X @ W + b`` and its gradient; the Function
returns the loss and then assigns ``W - lr * dW`` and ``b - lr * db`` in the same step
(updates run after the outputs). The loss printed per epoch goes down, and the weights end
within 1e-3 of NumPy's least-squares solution (checked at the end; exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dfg.graphdef import builder as B


def build(n_features: int, lr: float) -> tuple[B.Graph, B.Function, B.Variable, B.Variable]:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float64", [None, n_features], name="x")
        y = B.placeholder("float64", [None, 1], name="y")
        W = B.variable(np.zeros((n_features, 1)), name="W")
        b = B.variable(np.zeros((1,)), name="b")
        with B.name_scope("loss"):
            err = B.matmul(x, W) + b - y
            loss = B.reduce_mean(B.square(err))
        if hasattr(B, "gradients"):
            dW, db = B.gradients(loss, [W, b])
        else:  # the same derivative written out: d/dW mean(err^2) = 2/N X^T err
            n = B.cast(B.shape(x)[0], "float64")
            dW = B.matmul(x, err, transpose_a=True) * (2.0 / n)
            db = B.reduce_sum(err, axis=0) * (2.0 / n)
        step = B.Function([x, y], loss, updates=[(W, W - lr * dW), (b, b - lr * db)])
    return g, step, W, b


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    Y = X @ np.array([[2.0], [-1.0], [0.5]]) + 0.3 + 0.1 * rng.normal(size=(200, 1))

    g, step, W, b = build(3, args.lr)
    losses = []
    for epoch in range(args.epochs):
        loss = float(step(X, Y))
        losses.append(loss)
        if not args.quiet and (epoch < 5 or epoch % 50 == 0):
            print(f"epoch {epoch:4d}  loss {loss:.6f}")
    w_fit, b_fit = step.session.run([W.value().name, b.value().name])

    A = np.hstack([X, np.ones((len(X), 1))])
    sol = np.linalg.lstsq(A, Y, rcond=None)[0]
    err = max(np.abs(w_fit - sol[:3]).max(), np.abs(b_fit - sol[3]).max())
    print(f"final loss {losses[-1]:.6f}; max |weights - least squares| = {err:.2e}")
    return 0 if err < 1e-3 and losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
