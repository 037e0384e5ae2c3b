"""Write a small Keras 3 Transformer encoder SavedModel (``model.export``), the kind of
model whose default ``dfg viz`` picture issue 31 found unreadable (a 60-character prefix on
every label, the signature wrapper drawn instead of the model).

Run with a Python that has TensorFlow 2.21 and Keras 3 (never in CI; dfg never imports
TensorFlow)::

    /tmp/tfvenv/bin/python tests/data/keras_views/generate.py

Writes ``transformer/``: tokens (int32 [?, 8]) -> Embedding(50, 16) + a learned position
embedding -> MultiHeadAttention (2 heads of 8) with a residual and LayerNormalization ->
Dense 32 relu -> Dense 16 with a residual and LayerNormalization -> GlobalAveragePooling1D
-> Dense 4 softmax. Seeded; a few tens of kilobytes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402

HERE = Path(__file__).resolve().parent


class Positions(keras.layers.Layer):
    """Adds a learned embedding of each position."""

    def build(self, shape):
        self.table = self.add_weight(shape=(shape[1], shape[2]), name="table")

    def call(self, x):
        return x + self.table


def main() -> None:
    keras.utils.set_random_seed(0)
    tokens = keras.Input((8,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(50, 16, name="embed")(tokens)
    x = Positions(name="positions")(x)
    att = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8, name="attention")(x, x)
    x = keras.layers.LayerNormalization(name="norm1")(keras.layers.Add(name="res1")([x, att]))
    h = keras.layers.Dense(32, activation="relu", name="ffn_in")(x)
    h = keras.layers.Dense(16, name="ffn_out")(h)
    x = keras.layers.LayerNormalization(name="norm2")(keras.layers.Add(name="res2")([x, h]))
    x = keras.layers.GlobalAveragePooling1D(name="pool")(x)
    y = keras.layers.Dense(4, activation="softmax", name="classes")(x)
    model = keras.Model(tokens, y, name="encoder")
    out = HERE / "transformer"
    shutil.rmtree(out, ignore_errors=True)
    model.export(str(out))
    print("wrote", out)


if __name__ == "__main__":
    main()
