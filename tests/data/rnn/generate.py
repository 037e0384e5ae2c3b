"""Small recurrent models whose loops run in compiled code (executor/recurrent.py).

Each is a Keras layer over float features, frozen as tests/data/bench/generate.py freezes its
Keras cases (the same helpers, seeds and weight treatment; TensorFlow's outputs are the
expected values, in the conformance case format). They are sized so the recurrent product
(batch rows by the units) is one the compiled loop takes (2 to 32 rows, at least 1e5 FLOPs:
executor/kernels/_native.py's small-product rule) and kept small to commit (tens of KB):
an LSTM returning sequences, a Bidirectional LSTM, a SimpleRNN, a GRU, and an LSTM over
300 steps (more than one of the loop's chunks of iterations). Rebuild with TensorFlow's
Python (never in CI; dfg never imports TensorFlow):

    /tmp/tfvenv/bin/python tests/data/rnn/generate.py [--only NAME,...]

Larger models of the same kinds: benchmarks/gen_rnn_variants.py (not committed).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_generate",
                                               HERE.parent / "bench" / "generate.py")
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)
keras, L = G.keras, G.L

FEATURES = [*G.FROZEN[1:], "rnn", "While"]   # not "bench": these are tests, not timed


def _over(steps: int, features: int, *layers):
    x = y = keras.Input((steps, features), dtype="float32")
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


# name -> (batch, steps, features, description, builder)
CASES = {
    "rnn_lstm_sequences": (16, 12, 8, "LSTM(32) returning sequences, Dense 3",
                           lambda: _over(12, 8, L.LSTM(32, return_sequences=True),
                                         L.Dense(3))),
    "rnn_bilstm": (16, 12, 8, "Bidirectional LSTM(32), Dense 3 softmax",
                   lambda: _over(12, 8, L.Bidirectional(L.LSTM(32)),
                                 L.Dense(3, activation="softmax"))),
    "rnn_simple": (16, 12, 8, "SimpleRNN(64), Dense 3",
                   lambda: _over(12, 8, L.SimpleRNN(64), L.Dense(3))),
    "rnn_gru": (16, 12, 8, "GRU(48), Dense 3",
                lambda: _over(12, 8, L.GRU(48), L.Dense(3))),
    "rnn_lstm_long": (16, 300, 4, "LSTM(32) over 300 steps, Dense 1",
                      lambda: _over(300, 4, L.LSTM(32), L.Dense(1))),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    for name in (args.only.split(",") if args.only else CASES):
        batch, steps, features, text, build = CASES[name]
        G.keras_case(name, [((steps, features), "float32", "normal")], batch,
                     f"{text}, over {steps} steps of {features} float features, batch {batch}",
                     FEATURES)(build)
        G.generate_keras(name, HERE)


if __name__ == "__main__":
    main()
