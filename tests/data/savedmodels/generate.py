"""Write the small SavedModels dfg's SavedModel tests read, with TensorFlow's own outputs.

Run with a Python that has TensorFlow 2.21 (never in CI; dfg never imports TensorFlow)::

    /tmp/tfvenv/bin/python tests/data/savedmodels/generate.py

For each model NAME it writes:

* ``NAME/``: the SavedModel directory (``tf.saved_model.save`` / Keras ``model.export``);
* ``NAME_io/SIG/in_KEY.npy`` and ``NAME_io/SIG/out_KEY.npy``: a feed for every input key of
  signature SIG and TensorFlow's output for every output key (string tensors as ``S`` arrays,
  so they load without pickle);
* ``mlp_io/variables.npz`` and ``module_io/variables.npz``: every checkpoint entry as
  TensorFlow's checkpoint reader returns it, keyed by checkpoint key (for the bundle reader).

Models: ``mlp`` (Dense-ReLU-Dense-softmax), ``cnn`` (Conv2D-BatchNorm-ReLU-pool-Dense),
``lstm`` (LSTM-Dense; a While loop inside the functions), ``module`` (a ``tf.Module`` with
three signatures: float inputs, an int32 input, a string input and a string variable).
Deterministic: fixed seeds; the whole folder stays well under 1 MB.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    return path


def _save_io(name: str, sig: str, feeds: dict, outs: dict) -> None:
    d = HERE / f"{name}_io" / sig
    d.mkdir(parents=True, exist_ok=True)
    for k, v in feeds.items():
        np.save(d / f"in_{k}.npy", _plain(v))
    for k, v in outs.items():
        np.save(d / f"out_{k}.npy", _plain(v))


def _plain(v) -> np.ndarray:
    a = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
    if a.dtype == object:
        a = a.astype("S")
    return a


def _dump_signatures(name: str, feeds_by_sig: dict) -> None:
    """Reload the SavedModel as TF serving would and record each signature's outputs."""
    loaded = tf.saved_model.load(str(HERE / name))
    for sig, feeds in feeds_by_sig.items():
        fn = loaded.signatures[sig]
        outs = fn(**{k: tf.constant(v) for k, v in feeds.items()})
        _save_io(name, sig, feeds, outs)


def _dump_variables(name: str) -> None:
    reader = tf.train.load_checkpoint(str(HERE / name / "variables" / "variables"))
    values = {}
    for key in sorted(reader.get_variable_to_shape_map()):
        if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
            continue
        values[key] = _plain(reader.get_tensor(key))
    d = HERE / f"{name}_io"
    d.mkdir(parents=True, exist_ok=True)
    np.savez(d / "variables.npz", **values)


def _keras_export(name: str, model, feeds: dict) -> None:
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    model.export(str(HERE / name), format="tf_saved_model", verbose=False)
    _dump_signatures(name, {"serving_default": feeds})


def mlp(rng) -> None:
    tf.keras.utils.set_random_seed(1)
    inp = tf.keras.Input((4,), name="features")
    h = tf.keras.layers.Dense(8, activation="relu")(inp)
    out = tf.keras.layers.Dense(3, activation="softmax")(h)
    model = tf.keras.Model(inp, out)
    _keras_export("mlp", model, {"features": rng.standard_normal((2, 4)).astype(np.float32)})
    _dump_variables("mlp")


def cnn(rng) -> None:
    tf.keras.utils.set_random_seed(2)
    inp = tf.keras.Input((8, 8, 3), name="image")
    x = tf.keras.layers.Conv2D(4, 3, padding="same", use_bias=False)(inp)
    bn = tf.keras.layers.BatchNormalization()
    x = bn(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.MaxPooling2D()(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    out = tf.keras.layers.Dense(2)(x)
    model = tf.keras.Model(inp, out)
    # non-trivial moving statistics, so that inference-mode BatchNorm is really tested
    bn.moving_mean.assign(rng.standard_normal(4).astype(np.float32) * 0.1)
    bn.moving_variance.assign(rng.uniform(0.5, 2.0, 4).astype(np.float32))
    bn.gamma.assign(rng.uniform(0.5, 1.5, 4).astype(np.float32))
    bn.beta.assign(rng.standard_normal(4).astype(np.float32) * 0.1)
    _keras_export("cnn", model, {"image": rng.standard_normal((2, 8, 8, 3)).astype(np.float32)})


def lstm(rng) -> None:
    tf.keras.utils.set_random_seed(3)
    inp = tf.keras.Input((5, 3), name="sequence")
    x = tf.keras.layers.LSTM(4)(inp)
    out = tf.keras.layers.Dense(2)(x)
    model = tf.keras.Model(inp, out)
    _keras_export("lstm", model,
                  {"sequence": rng.standard_normal((2, 5, 3)).astype(np.float32)})


class Calculator(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable([[1.0, -2.0], [0.5, 3.0]], name="w")
        self.b = tf.Variable([0.25, -1.0], name="b")
        self.step = tf.Variable(7, dtype=tf.int32, name="step")
        self.greeting = tf.Variable([b"hello", b"bonjour!"], name="greeting")

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def affine(self, x):
        return {"y": tf.matmul(x, self.w) + self.b, "norm": tf.reduce_sum(x * x, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="n")])
    def count(self, n):
        return {"total": n * self.step + 1}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="name")])
    def greet(self, name):
        return {"text": tf.strings.join([self.greeting[0], ", ", name])}


def module(rng) -> None:
    name = "module"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    m = Calculator()
    tf.saved_model.save(m, str(HERE / name), signatures={
        "serving_default": m.affine, "count": m.count, "greet": m.greet})
    _dump_signatures(name, {
        "serving_default": {"x": rng.standard_normal((3, 2)).astype(np.float32)},
        "count": {"n": np.int32(6)},
        "greet": {"name": np.array([b"world", b"dfg"])},
    })
    _dump_variables(name)


def main() -> int:
    rng = np.random.default_rng(0)
    for build in (mlp, cnn, lstm, module):
        build(rng)
        print("wrote", build.__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
