"""Recurrent classifiers beyond the table's own: other batches, widths, lengths and cells.

benchmarks/table.py's ``rnn`` group holds small recurrent models (tests/data/tf2, the LSTM
classifier and dynamic_rnn of tests/data/bench). These are larger, to see where dfg stands
as a model grows (a 32-row GRU's recurrent product, a Bidirectional LSTM's two loops), and
other architectures people keep (``ARCHITECTURES``: stacked, masked, a tagger, CRNNs, an
unrolled LSTM, attention over an LSTM, a stock predictor, one long series). They
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
}


def _register(name: str, batch: int, seq: int, units: int, cell: str, bidi: bool) -> None:
    keras, L = G.keras, G.L
    features = [*G.FROZEN, "rnn", "While", "softmax"]

    @G.keras_case(name, [((seq,), "int32", "int1000")], batch,
                  f"Benchmark: Embedding(1000, 32), {'Bidirectional ' if bidi else ''}"
                  f"{cell.upper()}({units}) over {seq} steps, Dense 5 softmax, batch {batch}",
                  features)
    def build():
        x = keras.Input((seq,), dtype="int32")
        y = L.Embedding(1000, 32)(x)
        layer = {"lstm": L.LSTM, "gru": L.GRU, "rnn": L.SimpleRNN}[cell](units)
        y = (L.Bidirectional(layer) if bidi else layer)(y)
        return keras.Model(x, L.Dense(5, activation="softmax")(y))


# name -> (batch, input (shape, dtype, kind), description, features, builder): architectures
# people keep beside the one-layer classifiers above (issue #32: LSTM taggers, sentiment
# models, CRNNs, stock predictors)
def _stacked(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.LSTM(64, return_sequences=True)(y)
    y = L.LSTM(64)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _masked(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32, mask_zero=True)(x)
    y = L.LSTM(64)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _gru_v1(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.GRU(64, reset_after=False)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _tagger(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.Bidirectional(L.LSTM(32, return_sequences=True))(y)
    return keras.Model(x, L.TimeDistributed(L.Dense(10, activation="softmax"))(y))


def _crnn(keras: Any, L: Any) -> Any:
    x = keras.Input((64, 16))
    y = L.Conv1D(32, 3, padding="same", activation="relu")(x)
    y = L.MaxPooling1D(2)(y)
    y = L.GRU(64)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _stock(keras: Any, L: Any) -> Any:
    x = keras.Input((60, 4))
    y = L.LSTM(50, return_sequences=True)(x)
    y = L.Dropout(0.2)(y)
    y = L.LSTM(50)(y)
    return keras.Model(x, L.Dense(1)(y))


def _gru_masked(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32, mask_zero=True)(x)
    y = L.GRU(64)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _unrolled(keras: Any, L: Any) -> Any:
    x = keras.Input((20,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.LSTM(64, unroll=True)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _bigru_crnn(keras: Any, L: Any) -> Any:
    x = keras.Input((64, 16))
    y = L.Conv1D(32, 5, padding="same", activation="relu")(x)
    y = L.Bidirectional(L.GRU(32, return_sequences=True))(y)
    y = L.GlobalMaxPooling1D()(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _attention(keras: Any, L: Any) -> Any:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.LSTM(64, return_sequences=True)(y)
    y = L.Attention()([y, y])
    y = L.GlobalAveragePooling1D()(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def _long_single(keras: Any, L: Any) -> Any:
    x = keras.Input((200, 8))
    y = L.LSTM(32)(x)
    return keras.Model(x, L.Dense(1)(y))


TOKENS = ((40,), "int32", "int1000")
ARCHITECTURES = {
    "v_lstm_stacked": (16, TOKENS, "two LSTM(64) layers, the first returning sequences",
                       _stacked),
    "v_lstm_masked": (16, TOKENS, "LSTM(64) after Embedding(mask_zero=True)", _masked),
    "v_gru_reset_before": (16, TOKENS, "GRU(64, reset_after=False)", _gru_v1),
    "v_bilstm_tagger": (16, TOKENS, "Bidirectional LSTM(32) returning sequences, "
                        "TimeDistributed Dense 10 softmax", _tagger),
    "v_crnn": (16, ((64, 16), "float32", "normal"), "Conv1D(32, 3) relu, MaxPooling1D, "
               "GRU(64), Dense 5 softmax on float features", _crnn),
    "v_stock_lstm": (32, ((60, 4), "float32", "normal"), "a stock predictor: LSTM(50) "
                     "returning sequences, Dropout, LSTM(50), Dense 1", _stock),
    "v_gru_masked": (16, TOKENS, "GRU(64) after Embedding(mask_zero=True)", _gru_masked),
    "v_lstm_unrolled": (16, ((20,), "int32", "int1000"), "LSTM(64, unroll=True) over 20 "
                        "steps (no loop: one straight graph)", _unrolled),
    "v_bigru_crnn": (16, ((64, 16), "float32", "normal"), "Conv1D(32, 5) relu, Bidirectional "
                     "GRU(32) returning sequences, GlobalMaxPooling1D, Dense 5 softmax",
                     _bigru_crnn),
    "v_lstm_attention": (16, TOKENS, "LSTM(64) returning sequences, dot-product Attention "
                         "over itself, GlobalAveragePooling1D, Dense 5 softmax", _attention),
    "v_lstm_b1_s200": (1, ((200, 8), "float32", "normal"), "one series of 200 steps of 8 "
                       "features, LSTM(32), Dense 1 (per-iteration cost dominates)",
                       _long_single),
}


def _register_architecture(name: str) -> None:
    batch, spec, text, make = ARCHITECTURES[name]

    @G.keras_case(name, [spec], batch, f"Benchmark: {text}, batch {batch}",
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
