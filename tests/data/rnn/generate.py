"""Small recurrent models whose loops run in compiled code (executor/recurrent.py).

Each is a Keras layer over float features, frozen as tests/data/bench/generate.py freezes its
Keras cases (the same helpers, seeds and weight treatment; TensorFlow's outputs are the
expected values, in the conformance case format). They are sized so the recurrent product
(batch rows by the units) is one the compiled loop takes (1 to 32 rows:
executor/kernels/_native.py's small-product rule) and kept small to commit (tens of KB):
an LSTM returning sequences, a Bidirectional LSTM, a SimpleRNN, a GRU, an LSTM over
300 steps (more than one of the loop's chunks of iterations), an LSTM at batch 1, and masked
layers after Embedding(mask_zero=True) (an LSTM, a GRU, a Bidirectional LSTM: the mask's
Select in the loop). Rebuild with TensorFlow's Python (never in CI; dfg never imports
TensorFlow):

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


def _tokens(steps: int, vocab: int, *layers):
    """Token ids (0 the padding Embedding(mask_zero=True) masks), then ``layers``."""
    x = keras.Input((steps,), dtype="int32")
    y = L.Embedding(vocab, 8, mask_zero=True)(x)
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


# name -> (batch, steps, features, description, builder); features None: token ids in
# [0, TOKENS), a sixth of them the masked padding 0
TOKENS = 6

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
    "rnn_lstm_b1": (1, 40, 8, "LSTM(32) on one sequence (a one-row product), Dense 1",
                    lambda: _over(40, 8, L.LSTM(32), L.Dense(1))),
    "rnn_lstm_masked": (16, 12, None, "Embedding(mask_zero=True), LSTM(32) returning "
                        "sequences, Dense 3",
                        lambda: _tokens(12, TOKENS, L.LSTM(32, return_sequences=True),
                                        L.Dense(3))),
    "rnn_gru_masked": (16, 12, None, "Embedding(mask_zero=True), GRU(48), Dense 3",
                       lambda: _tokens(12, TOKENS, L.GRU(48), L.Dense(3))),
    "rnn_bilstm_masked": (16, 12, None, "Embedding(mask_zero=True), Bidirectional LSTM(32), "
                          "Dense 3",
                          lambda: _tokens(12, TOKENS, L.Bidirectional(L.LSTM(32)), L.Dense(3))),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    for name in (args.only.split(",") if args.only else CASES):
        batch, steps, features, text, build = CASES[name]
        if features is None:
            spec = ((steps,), "int32", f"int{TOKENS}")
            text = f"{text}, over {steps} token ids in [0, {TOKENS}) (0 masked), batch {batch}"
        else:
            spec = ((steps, features), "float32", "normal")
            text = f"{text}, over {steps} steps of {features} float features, batch {batch}"
        G.keras_case(name, [spec], batch, text, FEATURES)(build)
        G.generate_keras(name, HERE)


if __name__ == "__main__":
    main()
