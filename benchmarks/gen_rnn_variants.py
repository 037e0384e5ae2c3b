"""Recurrent classifiers beyond the table's own: other batches, widths, lengths and cells.

benchmarks/table.py's ``rnn`` group holds small recurrent models (tests/data/tf2, the LSTM
classifier and dynamic_rnn of tests/data/bench). These are larger, to see where dfg stands
as a model grows (a 32-row GRU's recurrent product, a Bidirectional LSTM's two loops), and
other architectures people keep (``ARCHITECTURES``: stacked, masked, a tagger, CRNNs, an
unrolled LSTM, attention over an LSTM, a stock predictor, one long series, a ConvLSTM2D, an
encoder-decoder, the generic RNN layer over a cell, a backwards GRU). They
are several MB together, so they are not committed: build them with TensorFlow's Python
(never in CI; dfg never imports TensorFlow), then time them beside TensorFlow:

    /tmp/tfvenv/bin/python benchmarks/gen_rnn_variants.py /tmp/rnn_variants
    python benchmarks/table.py --tf-python /tmp/tfvenv/bin/python --only dir \\
        --dir /tmp/rnn_variants

Each is Embedding(1000, 32) over int32 token ids, the recurrent layer, Dense(5) softmax,
frozen as tests/data/bench/generate.py freezes its Keras cases (same seeds and weights,
TensorFlow's outputs as the expected values, the conformance case format).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_generate",
                                               ROOT / "tests" / "data" / "bench" / "generate.py")
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)

# name -> (batch, sequence length, units, cell, bidirectional)
VARIANTS = {
    "v_lstm_b1_u64": (1, 40, 64, "lstm", False),
    "v_lstm_b8_u32_s100": (8, 100, 32, "lstm", False),
    "v_lstm_b32_u128": (32, 40, 128, "lstm", False),
    "v_lstm_b64_u256": (64, 30, 256, "lstm", False),
    "v_gru_b16_u64": (16, 40, 64, "gru", False),
    "v_gru_b32_u128": (32, 40, 128, "gru", False),
    "v_bilstm_b16_u64": (16, 40, 64, "lstm", True),
    "v_rnn_b16_u64": (16, 40, 64, "rnn", False),
    # batch inference: more rows than the direct kernel's 32 (BLAS's product each step)
    "v_lstm_b128_u64": (128, 40, 64, "lstm", False),
    "v_gru_b64_u128": (64, 40, 128, "gru", False),
}


def _register(name: str, batch: int, seq: int, units: int, cell: str, bidi: bool) -> None:
    keras, L = G.keras, G.L
    features = [*G.FROZEN, "rnn", "While", "softmax"]

    @G.keras_case(name, [((seq,), "int32", "int1000")], batch,
                  f"Benchmark: Embedding(1000, 32), {'Bidirectional ' if bidi else ''}"
                  f"{cell.upper()}({units}) over {seq} steps, Dense 5 softmax, batch {batch}",
                  features)
    def build():
        layer = {"lstm": L.LSTM, "gru": L.GRU, "rnn": L.SimpleRNN}[cell](units)
        return _classifier(keras, L, L.Bidirectional(layer) if bidi else layer, steps=seq)


def _stack(keras: Any, shape: tuple, dtype: str, layers: list) -> Any:
    """A model applying ``layers`` in order to one input of ``shape`` and ``dtype``."""
    x = y = keras.Input(shape, dtype=dtype)
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


def _classifier(keras: Any, L: Any, *middle: Any, mask_zero: bool = False,
                steps: int = 40) -> Any:
    """Token ids -> Embedding(1000, 32) -> ``middle`` -> Dense 5 softmax."""
    return _stack(keras, (steps,), "int32", [L.Embedding(1000, 32, mask_zero=mask_zero),
                                             *middle, L.Dense(5, activation="softmax")])


def _attention(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.LSTM(64, return_sequences=True)(y)
    y = L.Attention()([y, y])
    y = L.GlobalAveragePooling1D()(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _seq2seq(keras: Any, L: Any) -> Any:
    """An encoder LSTM's final states start a decoder LSTM (translation models' shape)."""
    src, tgt = keras.Input((30,), dtype="int32"), keras.Input((20,), dtype="int32")
    _, h, c = L.LSTM(64, return_state=True)(L.Embedding(1000, 32)(src))
    y = L.LSTM(64, return_sequences=True)(L.Embedding(1000, 32)(tgt), initial_state=[h, c])
    return keras.Model([src, tgt], L.Dense(10, activation="softmax")(y))


# name -> (batch, input (shape, dtype, kind) or a list of them, description, builder):
# architectures people keep beside the one-layer classifiers above (issue #32: LSTM taggers,
# sentiment models, CRNNs, stock predictors, video, translation)
TOKENS = ((40,), "int32", "int1000")
ARCHITECTURES = {
    "v_lstm_stacked": (16, TOKENS, "two LSTM(64) layers, the first returning sequences",
                       lambda k, L: _classifier(k, L, L.LSTM(64, return_sequences=True),
                                                L.LSTM(64))),
    "v_lstm_masked": (16, TOKENS, "LSTM(64) after Embedding(mask_zero=True)",
                      lambda k, L: _classifier(k, L, L.LSTM(64), mask_zero=True)),
    "v_gru_reset_before": (16, TOKENS, "GRU(64, reset_after=False)",
                           lambda k, L: _classifier(k, L, L.GRU(64, reset_after=False))),
    "v_bilstm_tagger": (16, TOKENS, "Bidirectional LSTM(32) returning sequences, "
                        "TimeDistributed Dense 10 softmax",
                        lambda k, L: _stack(k, (40,), "int32", [
                            L.Embedding(1000, 32),
                            L.Bidirectional(L.LSTM(32, return_sequences=True)),
                            L.TimeDistributed(L.Dense(10, activation="softmax"))])),
    "v_crnn": (16, ((64, 16), "float32", "normal"), "Conv1D(32, 3) relu, MaxPooling1D, "
               "GRU(64), Dense 5 softmax on float features",
               lambda k, L: _stack(k, (64, 16), "float32", [
                   L.Conv1D(32, 3, padding="same", activation="relu"), L.MaxPooling1D(2),
                   L.GRU(64), L.Dense(5, activation="softmax")])),
    "v_stock_lstm": (32, ((60, 4), "float32", "normal"), "a stock predictor: LSTM(50) "
                     "returning sequences, Dropout, LSTM(50), Dense 1",
                     lambda k, L: _stack(k, (60, 4), "float32", [
                         L.LSTM(50, return_sequences=True), L.Dropout(0.2), L.LSTM(50),
                         L.Dense(1)])),
    "v_gru_masked": (16, TOKENS, "GRU(64) after Embedding(mask_zero=True)",
                     lambda k, L: _classifier(k, L, L.GRU(64), mask_zero=True)),
    "v_lstm_unrolled": (16, ((20,), "int32", "int1000"), "LSTM(64, unroll=True) over 20 "
                        "steps (no loop: one straight graph)",
                        lambda k, L: _classifier(k, L, L.LSTM(64, unroll=True), steps=20)),
    "v_bigru_crnn": (16, ((64, 16), "float32", "normal"), "Conv1D(32, 5) relu, Bidirectional "
                     "GRU(32) returning sequences, GlobalMaxPooling1D, Dense 5 softmax",
                     lambda k, L: _stack(k, (64, 16), "float32", [
                         L.Conv1D(32, 5, padding="same", activation="relu"),
                         L.Bidirectional(L.GRU(32, return_sequences=True)),
                         L.GlobalMaxPooling1D(), L.Dense(5, activation="softmax")])),
    "v_lstm_attention": (16, TOKENS, "LSTM(64) returning sequences, dot-product Attention "
                         "over itself, GlobalAveragePooling1D, Dense 5 softmax", _attention),
    "v_lstm_b1_s200": (1, ((200, 8), "float32", "normal"), "one series of 200 steps of 8 "
                       "features, LSTM(32), Dense 1 (per-iteration cost dominates)",
                       lambda k, L: _stack(k, (200, 8), "float32", [L.LSTM(32), L.Dense(1)])),
    "v_convlstm": (4, ((6, 16, 16, 3), "float32", "normal"), "ConvLSTM2D(8, 3) over 6 "
                   "frames of 16x16x3, GlobalAveragePooling2D, Dense 5 softmax (video)",
                   lambda k, L: _stack(k, (6, 16, 16, 3), "float32", [
                       L.ConvLSTM2D(8, 3, padding="same"), L.GlobalAveragePooling2D(),
                       L.Dense(5, activation="softmax")])),
    "v_seq2seq": (16, [((30,), "int32", "int1000"), ((20,), "int32", "int1000")],
                  "an encoder LSTM(64)'s final states as a decoder LSTM(64)'s initial state, "
                  "Dense 10 softmax per step", _seq2seq),
    "v_rnn_lstmcell": (16, TOKENS, "RNN(LSTMCell(64)): the generic RNN layer over a cell",
                       lambda k, L: _classifier(k, L, L.RNN(L.LSTMCell(64)))),
    "v_gru_backwards": (16, TOKENS, "GRU(64, go_backwards=True)",
                        lambda k, L: _classifier(k, L, L.GRU(64, go_backwards=True))),
    "v_bigru": (16, TOKENS, "Bidirectional GRU(64) (a sentiment classifier)",
                lambda k, L: _classifier(k, L, L.Bidirectional(L.GRU(64)))),
    "v_simplernn_stacked": (16, TOKENS, "two SimpleRNN(64) layers, the first returning "
                            "sequences", lambda k, L: _classifier(
                                k, L, L.SimpleRNN(64, return_sequences=True), L.SimpleRNN(64))),
}


def _register_architecture(name: str) -> None:
    batch, spec, text, make = ARCHITECTURES[name]

    specs = spec if isinstance(spec, list) else [spec]

    @G.keras_case(name, specs, batch, f"Benchmark: {text}, batch {batch}",
                  [*G.FROZEN, "rnn", "While"])
    def build():
        return make(G.keras, G.L)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory to write the cases into")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else [*VARIANTS, *ARCHITECTURES]
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        if name in ARCHITECTURES:
            _register_architecture(name)
        else:
            _register(name, *VARIANTS[name])
        G.generate_keras(name, args.out)


if __name__ == "__main__":
    main()
