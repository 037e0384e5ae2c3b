"""Generate the benchmark cases of issue #12 that tests/data/conformance lacks.

Run with the Python of a TensorFlow environment (never in CI; dfg never imports TensorFlow):

    /tmp/tfvenv/bin/python tests/data/bench/generate.py               # every case, here
    /tmp/tfvenv/bin/python tests/data/bench/generate.py --only bench_mlp,bench_unet
    /tmp/tfvenv/bin/python tests/data/bench/generate.py --list

Each case is a folder in the format of tests/data/conformance (see its README), with
``"bench"`` among its features:

- ``bench_nested_while_100x100``: TF1 graph mode, control flow v1 (Switch/Merge/Enter/Exit/
  NextIteration/LoopCond): an outer while of ``n`` iterations holding an inner while of ``m``
  iterations of int32 scalar arithmetic, ``acc = (acc * 31 + i * j + 7) % 10007``; ``n`` and
  ``m`` are placeholders fed 100 and 100, so nothing folds the loops away. ``graph.pbtxt``.
- ``bench_mlp``: Keras MLP 784 -> Dense 384 relu -> Dense 384 relu -> Dense 10 softmax,
  batch 64 (the issue's 512-wide layers would make graph.pb 2.7 MB; 384 keeps it under 2 MB).
- ``bench_resnet_style``: Keras ResNet-style CNN, 32x32x3, batch 8: a 3x3 stem conv, 3 stages
  (16/32/64) of 2 residual blocks (Conv2D+BatchNorm+ReLU twice, identity or strided 1x1
  projection shortcut, Add, ReLU), GlobalAveragePooling2D, Dense 10 softmax.
- ``bench_transformer_encoder``: Keras Transformer encoder on float features [8, 64, 64]:
  2 blocks of MultiHeadAttention (4 heads, key_dim 16; Keras 3 projects with Einsum),
  residual Add + LayerNormalization, feed-forward Dense 256 gelu + Dense 64, residual Add +
  LayerNormalization; GlobalAveragePooling1D, Dense 10 softmax.
- ``bench_unet``: Keras U-Net, 64x64x3, batch 4: 3 down levels (Conv2D x2 + MaxPool,
  16/32/64), a 128-wide bottleneck (Conv2D x2), 3 up levels (Conv2DTranspose stride 2 +
  Concatenate skip + Conv2D x2), a final 1x1 Conv2D with sigmoid.

The recurrent cases of issue #32 (``benchmarks/table.py --only rnn``):

- ``bench_while_cast_10k``: TF1 graph mode, control flow v1: a while loop of ``n`` = 10,000
  iterations of scalar work with a Cast, ``i < n``, ``acc = acc * 0.999 + float(i)``,
  ``i = i + 1`` (Less, Cast, Mul, AddV2, AddV2 on int32 and float32 scalars). ``graph.pbtxt``.
- ``bench_dynamic_rnn_lstm``: TF1 graph mode, control flow v1: ``tf.compat.v1.nn.dynamic_rnn``
  of a TF1-style LSTM cell (BasicLSTMCell's math: one MatMul of ``[x, h]``, BiasAdd, Split into
  i, j, f, o, ``c = c * sigmoid(f + 1) + sigmoid(i) * tanh(j)``, ``h = tanh(c) * sigmoid(o)``;
  Keras 3 has no TF1 cells, so the cell is written here), batch 16, 20 steps, 32 features, 64
  units, weights seeded constants; TensorArrays in a v1 while loop. Fetches the outputs and the
  final state. ``graph.pb``.
- ``bench_lstm_classifier``: Keras Embedding(1000, 32) -> LSTM(64) -> Dense(5, softmax) on int32
  token ids [16, 40], frozen functional (a While with library functions, as a SavedModel of
  a sentiment model holds it).

The Keras models are made as tests/data/models/generate.py makes its zoo (its helpers are
imported from that file): fixed seeds, every constant weight (zero biases, BN/LN offsets and
scales, moving statistics) replaced by seeded random values, BatchNormalization moving
statistics calibrated on a random batch (ResNet), unit-variance kernels for the U-Net (no
normalization layer; its sigmoid stays unsaturated), frozen with
``convert_variables_to_constants_v2`` to ``graph.pb``; expected values come from running the
frozen GraphDef in a ``tf.compat.v1.Session``. Softmax models fetch the logits too.
``case.json`` records params, nodes, ``input_sensitivity`` and the output spread.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN off: plain Eigen kernels, as the conformance files were made.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from keras import layers as L  # noqa: E402

HERE = Path(__file__).resolve().parent
SEED = 1234


def _zoo():
    """tests/data/models/generate.py as a module (its helpers: randomize, calibrate, freeze)."""
    path = HERE.parent / "models" / "generate.py"
    spec = importlib.util.spec_from_file_location("dfg_models_generate", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


Z = _zoo()

# name -> (builder, input specs [(shape without batch, dtype, kind)], batch, description,
#          features, weight treatment)
KERAS: dict[str, tuple] = {}


def keras_case(name: str, inputs: list, batch: int, description: str, features: list[str],
               treat: str = ""):
    def deco(fn: Callable[[], keras.Model]):
        KERAS[name] = (fn, inputs, batch, description, features, treat)
        return fn
    return deco


FROZEN = ["bench", "keras", "frozen", "graph-pb"]


@keras_case("bench_mlp", [((784,), "float32", "normal")], 64,
            "Benchmark: Keras MLP 784 -> Dense 384 relu -> Dense 384 relu -> Dense 10 softmax, "
            "batch 64 (probabilities and logits).", FROZEN + ["matmul", "mlp", "softmax"])
def _mlp() -> keras.Model:
    x = keras.Input((784,))
    y = L.Dense(384, activation="relu")(x)
    y = L.Dense(384, activation="relu")(y)
    y = L.Dense(10, activation="softmax")(y)
    return keras.Model(x, y)


def _res_block(x, width: int, stride: int):
    y = L.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU()(y)
    y = L.Conv2D(width, 3, padding="same", use_bias=False)(y)
    y = L.BatchNormalization()(y)
    if stride != 1 or x.shape[-1] != width:
        s = L.Conv2D(width, 1, strides=stride, use_bias=False)(x)
        s = L.BatchNormalization()(s)
    else:
        s = x
    return L.ReLU()(L.Add()([y, s]))


@keras_case("bench_resnet_style", [((32, 32, 3), "float32", "normal")], 8,
            "Benchmark: Keras ResNet-style CNN, 32x32x3, batch 8: stem conv, 3 stages "
            "(16/32/64) of 2 residual blocks (Conv2D+BatchNorm+ReLU, identity or projection "
            "shortcut, Add), GlobalAveragePooling2D, Dense 10 softmax.",
            FROZEN + ["cnn", "batch-norm", "softmax"], treat="calibrate")
def _resnet() -> keras.Model:
    x = keras.Input((32, 32, 3))
    y = L.Conv2D(16, 3, padding="same", use_bias=False)(x)
    y = L.ReLU()(L.BatchNormalization()(y))
    for stage, width in enumerate((16, 32, 64)):
        for block in range(2):
            y = _res_block(y, width, 2 if stage > 0 and block == 0 else 1)
    y = L.GlobalAveragePooling2D()(y)
    return keras.Model(x, L.Dense(10, activation="softmax")(y))


def _encoder_block(x, heads: int, key_dim: int, ff: int):
    a = L.MultiHeadAttention(num_heads=heads, key_dim=key_dim)(x, x)
    x = L.LayerNormalization()(L.Add()([x, a]))
    f = L.Dense(ff, activation="gelu")(x)
    f = L.Dense(x.shape[-1])(f)
    return L.LayerNormalization()(L.Add()([x, f]))


@keras_case("bench_transformer_encoder", [((64, 64), "float32", "normal")], 8,
            "Benchmark: Keras Transformer encoder on float features [8, 64, 64]: 2 blocks of "
            "MultiHeadAttention (4 heads, key_dim 16, Einsum projections), Add + "
            "LayerNormalization, Dense 256 gelu + Dense 64, Add + LayerNormalization; "
            "GlobalAveragePooling1D, Dense 10 softmax.",
            FROZEN + ["einsum", "layer-norm", "softmax"])
def _transformer() -> keras.Model:
    x = keras.Input((64, 64))
    y = x
    for _ in range(2):
        y = _encoder_block(y, 4, 16, 256)
    y = L.GlobalAveragePooling1D()(y)
    return keras.Model(x, L.Dense(10, activation="softmax")(y))


def _conv2(x, width: int):
    x = L.Conv2D(width, 3, padding="same", activation="relu")(x)
    return L.Conv2D(width, 3, padding="same", activation="relu")(x)


@keras_case("bench_unet", [((64, 64, 3), "float32", "normal")], 4,
            "Benchmark: Keras U-Net, 64x64x3, batch 4: 3 down levels (Conv2D x2 + MaxPool, "
            "16/32/64), bottleneck 128, 3 up levels (Conv2DTranspose stride 2 + Concatenate "
            "skip + Conv2D x2), 1x1 Conv2D sigmoid.",
            FROZEN + ["cnn", "conv-transpose", "concat"], treat="unit_variance")
def _unet() -> keras.Model:
    x = keras.Input((64, 64, 3))
    skips, y = [], x
    for width in (16, 32, 64):
        y = _conv2(y, width)
        skips.append(y)
        y = L.MaxPooling2D(2)(y)
    y = _conv2(y, 128)
    for width, skip in zip((64, 32, 16), reversed(skips)):
        y = L.Conv2DTranspose(width, 2, strides=2, padding="same")(y)
        y = _conv2(L.Concatenate()([y, skip]), width)
    return keras.Model(x, L.Conv2D(1, 1, activation="sigmoid")(y))


@keras_case("bench_lstm_classifier", [((40,), "int32", "int1000")], 16,
            "Benchmark: Keras LSTM classifier, Embedding(1000, 32) -> LSTM(64) -> Dense(5, "
            "softmax) on int32 token ids [16, 40], frozen functional (While kept).",
            FROZEN + ["rnn", "lstm", "embedding", "While", "softmax"])
def _lstm_classifier() -> keras.Model:
    x = keras.Input((40,), dtype="int32")
    y = L.Embedding(1000, 32)(x)
    y = L.LSTM(64)(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def spread(y: np.ndarray) -> dict:
    """How far the outputs are from saturating: min, max and std of the fetched values."""
    y = np.asarray(y, np.float64)
    return {"min": round(float(y.min()), 5), "max": round(float(y.max()), 5),
            "std": round(float(y.std()), 5)}


def generate_keras(name: str, out: Path) -> None:
    build, specs, batch, description, features, treat = KERAS[name]
    keras.utils.set_random_seed(SEED)
    model = build()
    rng = np.random.default_rng(SEED)
    Z.randomize_constant_weights(model, rng)
    if treat == "calibrate":
        Z.calibrate_batch_norm(model, specs, np.random.default_rng(SEED + 1))
    elif treat == "unit_variance":
        Z.unit_variance_kernels(model, specs, np.random.default_rng(SEED + 1))
    gd, in_names, out_names = Z.freeze(model, specs)
    fetches = list(out_names)
    lg = Z.logits_of(gd, out_names[0])
    if lg:
        fetches.append(lg)
    feeds = {nm: Z.make_input((batch, *shape), dtype, kind, rng)
             for nm, (shape, dtype, kind) in zip(in_names, specs)}
    values = [np.asarray(v) for v in Z.run_frozen(gd, feeds, fetches)]
    sens = Z.input_sensitivity(gd, in_names, lg or out_names[0], specs,
                               np.random.default_rng(SEED + 2))
    rtol, atol = Z.tolerances(values, features)
    doc = {"description": description, "features": features, "rtol": rtol, "atol": atol,
           "prune": None, "grappler_nodes": None, "params": int(model.count_params()),
           "nodes": len(gd.node), "input_sensitivity": round(sens, 4),
           "output_spread": {k: spread(v) for k, v in zip(fetches, values)}}
    # deterministic: attr maps sorted, so reruns write the same bytes
    data = gd.SerializeToString(deterministic=True)
    Z.write_case(out / name, doc, data, None, feeds, fetches, values)
    print(f"{name:28} {model.count_params():>8} params {len(gd.node):>5} nodes "
          f"{len(data) / 1e6:6.2f} MB sensitivity {sens:.3f} "
          f"spread {doc['output_spread'][fetches[0]]}", flush=True)


def generate_nested_while(out: Path) -> None:
    """Outer while (i < n) holding an inner while (j < m), control flow v1, int32 scalars."""
    name = "bench_nested_while_100x100"
    tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")
        m = tf.compat.v1.placeholder(tf.int32, [], name="m")

        def outer_body(i, acc):
            def inner_body(j, a):
                return j + 1, (a * 31 + i * j + 7) % 10007
            _, acc = tf.compat.v1.while_loop(lambda j, a: j < m, inner_body,
                                             [tf.constant(0), acc], name="inner")
            return i + 1, acc

        i_out, acc_out = tf.compat.v1.while_loop(lambda i, acc: i < n, outer_body,
                                                 [tf.constant(0), tf.constant(1)],
                                                 name="outer")
    tf.compat.v1.enable_control_flow_v2()
    gd = g.as_graph_def()
    ops = [nd.op for nd in gd.node]
    assert ops.count("NextIteration") == 4 and "While" not in ops, ops
    fetches = [acc_out.name, i_out.name]
    feeds = {"n:0": np.array(100, np.int32), "m:0": np.array(100, np.int32)}
    g2 = tf.Graph()
    with g2.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    # as written (no Grappler), then a default optimizing session: both must agree
    cfg = tf.compat.v1.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(graph=g2, config=cfg) as sess:
        values = sess.run(fetches, feed_dict=feeds)
    with tf.compat.v1.Session(graph=g2) as sess:
        again = sess.run(fetches, feed_dict=feeds)
    assert all(np.array_equal(a, b) for a, b in zip(values, again))
    # the same recurrence in Python, as a check of the graph itself
    acc = 1
    for i in range(100):
        for j in range(100):
            acc = (acc * 31 + i * j + 7) % 10007
    assert int(values[0]) == acc and int(values[1]) == 100, (values, acc)
    keep = tf.compat.v1.graph_util.extract_sub_graph(gd, [f.split(":")[0] for f in fetches])
    doc = {"description": "Benchmark: nested while loops (control flow v1), an outer loop of n "
                          "= 100 iterations holding an inner loop of m = 100 iterations of "
                          "acc = (acc * 31 + i * j + 7) % 10007 on int32 scalars; n and m are "
                          "fed.",
           "features": ["bench", "while", "nested-while", "loop-invariant"],
           "rtol": 1e-05, "atol": 1e-06,
           "prune": {"fetch": sorted(f.split(":")[0] for f in fetches),
                     "nodes": sorted(nd.name for nd in keep.node)},
           "grappler_nodes": None, "params": 0, "nodes": len(gd.node)}
    Z.write_case(out / name, doc, None, text_format.MessageToString(gd), feeds, fetches,
               [np.asarray(v) for v in values])
    print(f"{name:28} {len(gd.node):>5} nodes, acc {int(values[0])}", flush=True)


def _v1_case(name: str, g: Any, fetches: list[str], feeds: dict, description: str,
             features: list[str], binary: bool, rtol: float = 1e-05, atol: float = 1e-06
             ) -> list[np.ndarray]:
    """Run a TF1 graph as written and with a default optimizing session (both must agree
    within the tolerances), and write its case. Returns the values."""
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    cfg = tf.compat.v1.ConfigProto()
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(graph=g2, config=cfg) as sess:
        values = [np.asarray(v) for v in sess.run(fetches, feed_dict=feeds)]
    with tf.compat.v1.Session(graph=g2) as sess:
        again = sess.run(fetches, feed_dict=feeds)
    assert all(np.allclose(a, b, rtol=rtol, atol=atol) for a, b in zip(values, again))
    keep = tf.compat.v1.graph_util.extract_sub_graph(gd, [f.split(":")[0] for f in fetches])
    doc = {"description": description, "features": features, "rtol": rtol, "atol": atol,
           "prune": {"fetch": sorted({f.split(":")[0] for f in fetches}),
                     "nodes": sorted(nd.name for nd in keep.node)},
           "grappler_nodes": None, "params": 0, "nodes": len(gd.node)}
    if binary:
        Z.write_case(out_dir() / name, doc, gd.SerializeToString(deterministic=True), None,
                     feeds, fetches, values)
    else:
        Z.write_case(out_dir() / name, doc, None, text_format.MessageToString(gd), feeds,
                     fetches, values)
    print(f"{name:28} {len(gd.node):>5} nodes", flush=True)
    return values


_OUT: list[Path] = [HERE]


def out_dir() -> Path:
    return _OUT[0]


def generate_while_cast() -> None:
    """10,000 iterations of scalar work with a Cast (control flow v1)."""
    tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        n = tf.compat.v1.placeholder(tf.int32, [], name="n")

        def body(i, acc):
            return i + 1, acc * 0.999 + tf.cast(i, tf.float32)

        i_out, acc_out = tf.compat.v1.while_loop(lambda i, acc: i < n, body,
                                                 [tf.constant(0), tf.constant(0.0)],
                                                 name="loop")
    tf.compat.v1.enable_control_flow_v2()
    ops = [nd.op for nd in g.as_graph_def().node]
    assert "Cast" in ops and ops.count("NextIteration") == 2, ops
    values = _v1_case(
        "bench_while_cast_10k", g, [acc_out.name, i_out.name],
        {"n:0": np.array(10000, np.int32)},
        "Benchmark: a while loop (control flow v1) of n = 10000 iterations of scalar work "
        "with a Cast: i < n, acc = acc * 0.999 + float(i), i = i + 1 (int32 and float32 "
        "scalars); n is fed.", ["bench", "while", "cast"], binary=False)
    # the same recurrence in float32 numpy, as a check of the graph itself
    acc = np.float32(0)
    for i in range(10000):
        acc = acc * np.float32(0.999) + np.float32(i)
    assert np.isclose(values[0], acc, rtol=1e-5) and int(values[1]) == 10000, (values, acc)


class _LSTMCell:
    """A TF1-style LSTM cell for dynamic_rnn (BasicLSTMCell's math; Keras 3 has no TF1
    cells): one MatMul of [x, h] by a seeded constant kernel, BiasAdd, Split into the i, j,
    f, o gates, forget bias 1."""

    def __init__(self, units: int, features: int, rng: np.random.Generator) -> None:
        self.units = units
        scale = 1.0 / np.sqrt(features + units)
        self.kernel = (rng.standard_normal((features + units, 4 * units)) * scale
                       ).astype(np.float32)
        self.bias = (rng.standard_normal(4 * units) * 0.1).astype(np.float32)

    @property
    def state_size(self):
        return (self.units, self.units)

    @property
    def output_size(self) -> int:
        return self.units

    def zero_state(self, batch: int, dtype):
        return (tf.zeros([batch, self.units], dtype), tf.zeros([batch, self.units], dtype))

    def __call__(self, x, state, scope=None):
        c, h = state
        z = tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), tf.constant(self.kernel)),
                           tf.constant(self.bias))
        i, j, f, o = tf.split(z, 4, axis=1)
        c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
        h = tf.tanh(c) * tf.sigmoid(o)
        return h, (c, h)


def generate_dynamic_rnn() -> None:
    """tf.compat.v1.nn.dynamic_rnn of an LSTM cell, control flow v1, TensorArrays."""
    batch, steps, features, units = 16, 20, 32, 64
    rng = np.random.default_rng(SEED)
    tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [batch, steps, features], name="x")
        cell = _LSTMCell(units, features, rng)
        outputs, (c, h) = tf.compat.v1.nn.dynamic_rnn(
            cell, x, initial_state=cell.zero_state(batch, tf.float32), dtype=tf.float32)
    tf.compat.v1.enable_control_flow_v2()
    ops = [nd.op for nd in g.as_graph_def().node]
    assert "NextIteration" in ops and "TensorArrayV3" in ops and "While" not in ops, ops
    feeds = {"x:0": rng.standard_normal((batch, steps, features)).astype(np.float32)}
    _v1_case("bench_dynamic_rnn_lstm", g, [outputs.name, c.name, h.name], feeds,
             "Benchmark: tf.compat.v1.nn.dynamic_rnn (control flow v1, TensorArrays) of a "
             "TF1-style LSTM cell (BasicLSTMCell's math, constant weights), batch 16, 20 "
             "steps, 32 features, 64 units; fetches the outputs and the final state.",
             ["bench", "while", "rnn", "lstm", "tensor-array", "graph-pb"], binary=True,
             rtol=1e-4, atol=1e-5)


V1 = {"bench_while_cast_10k": generate_while_cast,
      "bench_dynamic_rnn_lstm": generate_dynamic_rnn}
CASES = ["bench_nested_while_100x100", *V1, *KERAS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    _OUT[0] = args.out
    for name in args.only.split(",") if args.only else CASES:
        if name == "bench_nested_while_100x100":
            generate_nested_while(args.out)
        elif name in V1:
            V1[name]()
        else:
            generate_keras(name, args.out)


if __name__ == "__main__":
    main()
