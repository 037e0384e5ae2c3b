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
three signatures: float inputs, an int32 input, a string input and a string variable),
``composite`` (signatures returning a RaggedTensor and a SparseTensor: their outputs are saved
per component as ``out_KEY.PART.npy``, the keys dfg gives them).

The zoo models, saved with ``tf.saved_model.save`` as TF2 users keep real models (a
``serving_default`` signature tracing ``model(x, training=False)``):

* ``zoo_mobilenet_v2``: ``keras.applications.MobileNetV2(alpha=0.35, 32x32, classes=10)``;
* ``zoo_resnet``: a small ResNet (stem + three bottleneck/basic residual stages, projection
  shortcuts, BatchNorm) from Keras layers;
* ``zoo_text_lstm``: int32 token ids -> Embedding(mask_zero) -> LSTM -> Dense softmax, plus a
  second signature ``logits`` returning the pre-softmax logits;
* ``zoo_module``: a ``tf.Module`` with variables and a ``tf.function`` running a
  ``tf.while_loop`` (a fixed-point iteration with a data-dependent trip count) and a second
  signature with a ``tf.range``/``tf.scan`` cumulative product.

BatchNorm moving statistics are calibrated (one training-mode pass per layer with momentum
0 over a batch of random inputs) and offsets/scales are seeded random, so the output depends
on the input. Build only some models with ``--only zoo_resnet,zoo_module``.

Deterministic: fixed seeds; the whole folder stays under about 3 MB.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
# The original four models share one generator, in order (as they were first generated).
RNG = np.random.default_rng(0)


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


class Composite(tf.Module):
    """Signatures returning a RaggedTensor and a SparseTensor (composite tensors, whose
    SignatureDef outputs list their component tensors) beside a dense one."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def dense(self, x):
        return {"y": x * 2.0}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x"),
                                  tf.TensorSpec([None], tf.int64, name="n")])
    def ragged(self, x, n):
        return {"rt": tf.RaggedTensor.from_row_lengths(x * 10.0, n), "total": tf.reduce_sum(x)}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.float32, name="m")])
    def sparse(self, m):
        return {"sp": tf.sparse.from_dense(tf.nn.relu(m))}


def composite(rng) -> None:
    """``composite``: outputs saved per component, ``out_KEY.PART.npy`` (dfg's names)."""
    name = "composite"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    m = Composite()
    tf.saved_model.save(m, str(HERE / name), signatures={
        "serving_default": m.dense, "ragged": m.ragged, "sparse": m.sparse})
    loaded = tf.saved_model.load(str(HERE / name))
    feeds = {"serving_default": {"x": np.array([1.0, -2.0, 0.5], np.float32)},
             "ragged": {"x": np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32),
                        "n": np.array([2, 0, 3], np.int64)},
             "sparse": {"m": rng.standard_normal((3, 4)).astype(np.float32)}}
    for sig, feed in feeds.items():
        outs = loaded.signatures[sig](**{k: tf.constant(v) for k, v in feed.items()})
        flat = {}
        for k, v in outs.items():
            if isinstance(v, tf.RaggedTensor):
                flat[f"{k}.flat_values"], flat[f"{k}.row_splits"] = v.flat_values, v.row_splits
            elif isinstance(v, tf.SparseTensor):
                flat.update({f"{k}.indices": v.indices, f"{k}.values": v.values,
                             f"{k}.dense_shape": v.dense_shape})
            else:
                flat[k] = v
        _save_io(name, sig, feed, flat)


# --- the zoo: real Keras models saved with tf.saved_model.save ---------------------------------

def _randomize_and_calibrate(model, rng, x_calib) -> None:
    """Seeded random BN offsets/scales, then moving statistics calibrated on ``x_calib``.

    With momentum 0 a training-mode call sets each BN's moving mean/variance to the batch
    statistics of its input; repeating the call makes every layer's statistics those of its
    input when the layers before it already normalise with their moving statistics."""
    bns = [ly for ly in model._flatten_layers()
           if isinstance(ly, tf.keras.layers.BatchNormalization)]
    for bn in bns:
        c = bn.gamma.shape[0]
        bn.gamma.assign(rng.uniform(0.6, 1.4, c).astype(np.float32))
        bn.beta.assign((rng.standard_normal(c) * 0.2).astype(np.float32))
    for v in model.weights:   # zero biases (Dense, Conv, LSTM) would hide a skipped BiasAdd
        if v.path.endswith("bias"):
            v.assign((rng.standard_normal(v.shape) * 0.1).astype(np.float32))
    saved = [bn.momentum for bn in bns]
    for bn in bns:
        bn.momentum = 0.0
    for _ in range(len(bns) and 3):
        model(x_calib, training=True)
    for bn, m in zip(bns, saved):
        bn.momentum = m


def _sensitivity(model, rng, shape) -> float:
    """Std of the outputs across different inputs relative to their mean magnitude."""
    ys = np.stack([model(rng.standard_normal(shape).astype(np.float32), training=False).numpy()
                   for _ in range(4)])
    return float(ys.std(axis=0).mean() / (np.abs(ys).mean() + 1e-12))


def _save_keras(name: str, model, spec, feeds: dict, extra: dict | None = None) -> None:
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    key = next(iter(feeds))

    @tf.function(input_signature=[spec])
    def serve(x):
        return {"output_0": model(x, training=False)}

    sigs = {"serving_default": serve}
    for sig, fn in (extra or {}).items():
        sigs[sig] = fn
    tf.saved_model.save(model, str(HERE / name), signatures=sigs)
    _dump_signatures(name, {s: {key: feeds[key]} for s in sigs})


def zoo_mobilenet_v2(rng) -> None:
    tf.keras.utils.set_random_seed(11)
    model = tf.keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35,
                                              weights=None, classes=10)
    _randomize_and_calibrate(model, rng, rng.standard_normal((16, 32, 32, 3)).astype(np.float32))
    print("  sensitivity", _sensitivity(model, rng, (2, 32, 32, 3)))
    x = rng.standard_normal((2, 32, 32, 3)).astype(np.float32)
    _save_keras("zoo_mobilenet_v2", model, tf.TensorSpec([None, 32, 32, 3], tf.float32, "image"),
                {"image": x})


def _res_block(x, filters: int, stride: int, name: str):
    L = tf.keras.layers
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = L.Conv2D(filters, 1, stride, use_bias=False, name=name + "_proj")(x)
        shortcut = L.BatchNormalization(name=name + "_proj_bn")(shortcut)
    y = L.Conv2D(filters, 3, stride, padding="same", use_bias=False, name=name + "_c1")(x)
    y = L.BatchNormalization(name=name + "_bn1")(y)
    y = L.ReLU(name=name + "_relu1")(y)
    y = L.Conv2D(filters, 3, padding="same", use_bias=False, name=name + "_c2")(y)
    y = L.BatchNormalization(name=name + "_bn2")(y)
    return L.ReLU(name=name + "_out")(L.Add(name=name + "_add")([shortcut, y]))


def zoo_resnet(rng) -> None:
    L = tf.keras.layers
    tf.keras.utils.set_random_seed(12)
    inp = tf.keras.Input((32, 32, 3), name="image")
    x = L.ZeroPadding2D(1)(inp)
    x = L.Conv2D(16, 3, use_bias=True, name="stem")(x)
    x = L.BatchNormalization(name="stem_bn")(x)
    x = L.ReLU()(x)
    x = L.MaxPooling2D(3, 2, padding="same")(x)
    for i, (f, s) in enumerate([(16, 1), (16, 1), (32, 2), (32, 1), (64, 2)]):
        x = _res_block(x, f, s, f"block{i}")
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax", name="predictions")(x)
    model = tf.keras.Model(inp, out, name="resnet_small")
    _randomize_and_calibrate(model, rng, rng.standard_normal((16, 32, 32, 3)).astype(np.float32))
    print("  sensitivity", _sensitivity(model, rng, (2, 32, 32, 3)))
    x = rng.standard_normal((2, 32, 32, 3)).astype(np.float32)
    _save_keras("zoo_resnet", model, tf.TensorSpec([None, 32, 32, 3], tf.float32, "image"),
                {"image": x})


def zoo_text_lstm(rng) -> None:
    L = tf.keras.layers
    tf.keras.utils.set_random_seed(13)
    inp = tf.keras.Input((12,), dtype="int32", name="tokens")
    x = L.Embedding(200, 16, mask_zero=True, name="embed")(inp)
    x = L.LSTM(24, name="lstm")(x)
    logits = L.Dense(5, name="logits")(x)
    out = L.Softmax(name="probs")(logits)
    model = tf.keras.Model(inp, out, name="text_lstm")
    head = tf.keras.Model(inp, logits)
    _randomize_and_calibrate(model, rng, None)
    spec = tf.TensorSpec([None, 12], tf.int32, "tokens")

    @tf.function(input_signature=[spec])
    def logits_fn(tokens):
        return {"logits": head(tokens, training=False)}

    tokens = rng.integers(1, 200, (3, 12)).astype(np.int32)
    tokens[0, 8:] = 0   # padding: the mask makes the LSTM keep its state over these steps
    tokens[1, 5:] = 0
    _save_keras("zoo_text_lstm", model, spec, {"tokens": tokens}, {"logits": logits_fn})


class Iterate(tf.Module):
    """A tf.Module with variables whose functions loop: what hand-written TF2 code does."""

    def __init__(self, rng) -> None:
        super().__init__()
        a = rng.standard_normal((4, 4)).astype(np.float32) * 0.3
        self.a = tf.Variable(a, name="a")
        self.b = tf.Variable(rng.standard_normal(4).astype(np.float32), name="b")
        self.tol = tf.Variable(1e-5, name="tol")
        self.max_iter = tf.Variable(50, dtype=tf.int32, name="max_iter")

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def solve(self, x):
        # fixed point of z = tanh(z A + b) + x: a while loop whose trip count depends on data
        def cond(i, z, delta):
            return tf.logical_and(i < self.max_iter, delta > self.tol)

        def body(i, z, delta):
            z_new = tf.tanh(tf.matmul(z, self.a) + self.b) + x
            return i + 1, z_new, tf.reduce_max(tf.abs(z_new - z))

        i, z, delta = tf.while_loop(cond, body, [tf.constant(0), x, tf.constant(1e9)])
        return {"z": z, "iterations": i, "delta": delta}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="v")])
    def cumulative(self, v):
        prods = tf.scan(lambda acc, e: acc * e + self.b[0], v, initializer=tf.constant(1.0))
        return {"scan": prods, "total": tf.reduce_sum(prods)}


def zoo_module(rng) -> None:
    name = "zoo_module"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    m = Iterate(rng)
    tf.saved_model.save(m, str(HERE / name), signatures={
        "serving_default": m.solve, "cumulative": m.cumulative})
    _dump_signatures(name, {
        "serving_default": {"x": rng.standard_normal((3, 4)).astype(np.float32)},
        "cumulative": {"v": rng.uniform(0.5, 1.5, 7).astype(np.float32)},
    })


# --- what loaders must do beyond restoring variables: tables, assets, TF1 init ops -------------

def _tf1_io(name: str, feeds: dict) -> None:
    """TensorFlow 2's loader (tf.saved_model.load) on a TF1 SavedModel: its outputs."""
    loaded = tf.saved_model.load(str(HERE / name))
    fn = loaded.signatures["serving_default"]
    _save_io(name, "serving_default", feeds, fn(**{k: tf.constant(v) for k, v in feeds.items()}))


def tf1_tables(rng) -> None:
    """simple_save of a TF1 graph with a while_loop/cond, a get_variable and a
    KeyValueTensorInitializer table but no main op: TF2's loader runs the table
    initializers itself (TF1's loader would fail)."""
    name = "tf1_tables"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        n = v1.placeholder(tf.int32, [], name="n")
        s = v1.placeholder(tf.string, [None], name="s")
        w = v1.get_variable("w", initializer=tf.constant(
            rng.standard_normal((3, 2)).astype(np.float32)))
        y = tf.matmul(x, w)

        def body(i, acc):
            return i + 1, v1.cond(i % 2 > 0, lambda: acc * 1.1, lambda: acc + 1.0)

        _, loop = v1.while_loop(lambda i, acc: i < n, body, [tf.constant(0), y])
        table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(["a", "b"], [5, 6]), -1)
        ids = table.lookup(s)
        with v1.Session(graph=g) as sess:
            sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
            v1.saved_model.simple_save(sess, str(HERE / name), inputs={"x": x, "n": n, "s": s},
                                       outputs={"y": y, "loop": loop, "ids": ids})
    _tf1_io(name, {"x": rng.standard_normal((4, 3)).astype(np.float32), "n": np.int32(5),
                   "s": np.array([b"a", b"zz", b"b"])})


def tf1_assets(rng) -> None:
    """A TF1 SavedModel from Builder with a vocabulary file asset, a text-file table and a
    main op (tables_initializer) fed the asset's path; the signature also bumps a variable."""
    name = "tf1_assets"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    v1 = tf.compat.v1
    tmp = HERE / "colors.txt"
    tmp.write_text("red\ngreen\nblue\n")
    try:
        g = tf.Graph()
        with g.as_default():
            s = v1.placeholder(tf.string, [None], name="s")
            init = tf.lookup.TextFileInitializer(
                str(tmp), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                tf.lookup.TextFileIndex.LINE_NUMBER)
            ids = tf.lookup.StaticVocabularyTable(init, num_oov_buckets=2).lookup(s)
            c = v1.get_variable("c", initializer=tf.constant(3.0))
            with tf.control_dependencies([v1.assign_add(c, 1.0)]):
                out = tf.cast(ids, tf.float32) * c
            with v1.Session(graph=g) as sess:
                sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
                b = v1.saved_model.Builder(str(HERE / name))
                b.add_meta_graph_and_variables(
                    sess, ["serve"], signature_def_map={
                        "serving_default": v1.saved_model.predict_signature_def(
                            {"s": s}, {"out": out, "ids": ids})},
                    main_op=v1.tables_initializer(),
                    assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS))
                b.save()
    finally:
        tmp.unlink()
    _tf1_io(name, {"s": np.array([b"blue", b"pink", b"red"])})


def vocab_lookup(rng) -> None:
    """TF2: a Keras StringLookup on a vocabulary file (an asset read by the table's
    initializer function) and an embedding_lookup_sparse of a SparseTensor input (signature
    inputs indices/values/dense_shape; a ResourceGather, which freezing turns into a
    GatherV2)."""
    import keras

    name = "vocab_lookup"
    _fresh(HERE / name)
    _fresh(HERE / f"{name}_io")
    tmp = HERE / "words.txt"
    tmp.write_text("alpha\nbeta\ngamma\n")
    try:
        class Lookup(tf.Module):
            def __init__(self):
                self.lookup = keras.layers.StringLookup(vocabulary=str(tmp),
                                                        output_mode="one_hot")
                self.emb = tf.Variable(rng.standard_normal((10, 3)).astype(np.float32))

            @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="words")])
            def words(self, words):
                return {"one_hot": self.lookup(words)}

            @tf.function(input_signature=[tf.SparseTensorSpec([None, 4], tf.int64)])
            def embed(self, sp):
                return {"mean": tf.nn.embedding_lookup_sparse(self.emb, sp, None,
                                                              combiner="mean"),
                        "dense": tf.sparse.to_dense(sp)}

        m = Lookup()
        tf.saved_model.save(m, str(HERE / name), signatures={
            "serving_default": m.words, "embed": m.embed.get_concrete_function()})
    finally:
        tmp.unlink()
    _dump_signatures(name, {
        "serving_default": {"words": np.array([b"beta", b"zeta", b"alpha"])},
        "embed": {"sp": np.array([[0, 0], [0, 2], [2, 1]], np.int64),
                  "sp_1": np.array([3, 7, 1], np.int64),
                  "sp_2": np.array([3, 4], np.int64)},
    })


BUILDERS = (mlp, cnn, lstm, module, composite, zoo_mobilenet_v2, zoo_resnet, zoo_text_lstm,
            zoo_module, tf1_tables, tf1_assets, vocab_lookup)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated model names")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    for build in BUILDERS:
        if only and build.__name__ not in only:
            continue
        # one generator per model, so building one model alone gives the same data
        fresh = build.__name__.startswith("zoo_") or build in (
            composite, tf1_tables, tf1_assets, vocab_lookup)
        build(np.random.default_rng(0) if fresh else RNG)
        print("wrote", build.__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
