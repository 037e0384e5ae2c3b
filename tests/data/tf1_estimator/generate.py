"""Writes the TF1 Estimator-style models under tests/data/tf1_estimator/.

Run with TensorFlow's own virtualenv, never in CI:

    /tmp/tfvenv/bin/python tests/data/tf1_estimator/generate.py

tf.estimator is gone from TensorFlow 2.21, so the models are built the way its canned
estimators built them, with tf.compat.v1 graph code: ref variables (VariableV2, as TF1 and
Estimators made them, ``use_resource=False``), a ``global_step``, hidden layers and embeddings
split by a partitioner (``min_max_variable_partitioner`` for the DNN's kernels, as
DNNClassifier's ``input_layer_partitioner`` does; ``fixed_size_partitioner`` for the
embeddings), trained a few steps with Adagrad (its slots are partitioned too), then exported:

* ``dnn/``: a DNN classifier (3 dense features, hidden layers 8 and 4, 3 classes).
* ``dnn/saved_model_examples/``: the same DNN behind the tf.Example serving input Estimators
  export by default (``examples.json`` rows, ``examples_io.npz`` TF's probabilities).
* ``wide_deep/``: wide and deep: a linear part over a categorical id column (weights split in
  3 by rows) and the dense features, a deep part over an embedding of the ids (split in 2,
  mean-combined) and the dense features, logits summed, a sigmoid.

Each folder holds the model exported both ways Estimators users keep them:

* ``saved_model/``: a SavedModel (SavedModelBuilder, tag ``serve``, signature
  ``serving_default`` over the raw feature tensors, plus the graph's ``init_all_tables`` as
  Estimators export it), variables with their slices in ``saved_model/variables``;
* ``model.ckpt-N.{meta,index,data-*}``: the training checkpoint (tf.train.Saver, sharded as
  Estimators save it) with its .meta graph.

``io.npz`` holds the inputs and TensorFlow's outputs (from a fresh session restoring the
checkpoint, and again from the SavedModel, which must agree), ``names.json`` the feed and
fetch tensor names in the .meta graph.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
v1.disable_eager_execution()
v1.disable_resource_variables()

HERE = Path(__file__).resolve().parent


def dense(x: Any, units: int, name: str, activation: Any = None,
          partitioner: Any = None) -> Any:
    """A dense layer whose kernel may be partitioned, as tf.compat.v1.layers.dense makes it
    under a variable scope with a partitioner."""
    with v1.variable_scope(name, partitioner=partitioner):
        kernel = v1.get_variable("kernel", [x.shape[1], units],
                                 initializer=v1.glorot_uniform_initializer(seed=1))
        bias = v1.get_variable("bias", [units], initializer=v1.constant_initializer(0.1))
        y = tf.matmul(x, kernel) + bias      # a PartitionedVariable concatenates its parts
        return activation(y) if activation is not None else y


def export(g: Any, sess: Any, d: Path, inputs: dict[str, Any], outputs: dict[str, Any],
           step: int) -> None:
    sm = d / "saved_model"
    builder = v1.saved_model.Builder(str(sm))
    sig = v1.saved_model.predict_signature_def(inputs, outputs)
    builder.add_meta_graph_and_variables(
        sess, [v1.saved_model.tag_constants.SERVING],
        signature_def_map={"serving_default": sig},
        main_op=v1.tables_initializer(), strip_default_attrs=True)
    builder.save()
    saver = v1.train.Saver(sharded=True, max_to_keep=1)
    saver.save(sess, str(d / "model.ckpt"), global_step=step, write_state=False)


def train(sess: Any, loss: Any, feeds: dict[Any, np.ndarray], steps: int) -> None:
    gs = v1.train.get_or_create_global_step()
    opt = v1.train.AdagradOptimizer(0.1)
    train_op = opt.minimize(loss, global_step=gs)
    sess.run(v1.global_variables_initializer())
    for _ in range(steps):
        sess.run(train_op, feeds)


def check_restored(d: Path, names: dict[str, Any], feeds: dict[str, np.ndarray],
                   want: dict[str, np.ndarray], step: int) -> None:
    """The checkpoint, restored into its .meta graph in a fresh session, and the SavedModel,
    loaded in another, both give ``want``."""
    g = tf.Graph()
    with g.as_default(), v1.Session(graph=g) as s:
        saver = v1.train.import_meta_graph(str(d / f"model.ckpt-{step}.meta"))
        saver.restore(s, str(d / f"model.ckpt-{step}"))
        got = s.run({k: names["fetch"][k] for k in want},
                    {names["feed"][k]: v for k, v in feeds.items()})
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)
    g = tf.Graph()
    with g.as_default(), v1.Session(graph=g) as s:
        mg = v1.saved_model.loader.load(s, ["serve"], str(d / "saved_model"))
        sig = mg.signature_def["serving_default"]
        got = s.run({k: sig.outputs[k].name for k in want},
                    {sig.inputs[k].name: v for k, v in feeds.items()})
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-6)


def write(d: Path, g: Any, sess: Any, inputs: dict[str, Any], outputs: dict[str, Any],
          loss: Any, train_feeds: dict[Any, np.ndarray], feeds: dict[str, np.ndarray]) -> None:
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    steps = 3
    train(sess, loss, train_feeds, steps)
    want = sess.run(outputs, {inputs[k]: v for k, v in feeds.items()})
    export(g, sess, d, inputs, outputs, steps)
    names = {"feed": {k: t.name for k, t in inputs.items()},
             "fetch": {k: t.name for k, t in outputs.items()},
             "checkpoint": f"model.ckpt-{steps}",
             "variable_ops": sorted({v.op.type for v in v1.global_variables()}),
             "partitioned": sorted({v.op.name for v in v1.global_variables()
                                    if "/part_" in v.op.name})}
    (d / "names.json").write_text(json.dumps(names, indent=1) + "\n")
    np.savez(d / "io.npz", **{f"feed_{k}": v for k, v in feeds.items()},
             **{f"fetch_{k}": v for k, v in want.items()})
    check_restored(d, names, feeds, want, steps)
    print(d.name, {k: v.shape for k, v in want.items()}, names["variable_ops"],
          len(names["partitioned"]), "parts")


def dnn() -> None:
    rng = np.random.default_rng(1)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        labels = v1.placeholder(tf.int64, [None], name="labels")
        part = v1.min_max_variable_partitioner(max_partitions=2, min_slice_size=16)
        with v1.variable_scope("dnn"):
            h = dense(x, 8, "hiddenlayer_0", tf.nn.relu, part)
            h = dense(h, 4, "hiddenlayer_1", tf.nn.relu, part)
            logits = dense(h, 3, "logits", None, part)
        probs = tf.nn.softmax(logits, name="probabilities")
        classes = tf.argmax(logits, 1, name="class_ids")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        train_x = rng.normal(size=(16, 3)).astype(np.float32)
        train_y = rng.integers(0, 3, size=16)
        # the serving input Estimators export by default: serialized tf.train.Example protos
        serialized = v1.placeholder(tf.string, [None], name="input_example_tensor")
        parsed = v1.io.parse_example(serialized,
                                     {"x": v1.io.FixedLenFeature([3], tf.float32)})
        with v1.variable_scope("dnn", reuse=True):
            h = dense(parsed["x"], 8, "hiddenlayer_0", tf.nn.relu, part)
            h = dense(h, 4, "hiddenlayer_1", tf.nn.relu, part)
            ex_probs = tf.nn.softmax(dense(h, 3, "logits", None, part), name="ex_probabilities")
        with v1.Session(graph=g) as sess:
            write(HERE / "dnn", g, sess, {"x": x},
                  {"probabilities": probs, "class_ids": classes, "logits": logits}, loss,
                  {x: train_x, labels: train_y},
                  {"x": rng.normal(size=(5, 3)).astype(np.float32)})
            export_examples(sess, HERE / "dnn", serialized, ex_probs, rng)


def export_examples(sess: Any, d: Path, serialized: Any, probs: Any,
                    rng: np.random.Generator) -> None:
    """``saved_model_examples/``: the same trained DNN behind a tf.Example serving signature
    (input ``examples``: serialized protos, parsed in the graph); ``examples.json`` holds rows
    of features as saved_model_cli --input_examples takes them, ``examples_io.npz`` TF's
    probabilities for them."""
    rows = [{"x": [round(float(v), 3) for v in rng.normal(size=3)]} for _ in range(3)]
    protos = []
    for row in rows:
        ex = tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=row["x"]))}))
        protos.append(ex.SerializeToString())
    want = sess.run(probs, {serialized: protos})
    builder = v1.saved_model.Builder(str(d / "saved_model_examples"))
    sig = v1.saved_model.predict_signature_def({"examples": serialized},
                                               {"probabilities": probs})
    builder.add_meta_graph_and_variables(sess, ["serve"],
                                         signature_def_map={"serving_default": sig},
                                         strip_default_attrs=True)
    builder.save()
    (d / "examples.json").write_text(json.dumps(rows) + "\n")
    np.savez(d / "examples_io.npz", probabilities=want)
    print("dnn examples", want.shape)


def wide_deep() -> None:
    rng = np.random.default_rng(2)
    vocab = 12
    g = tf.Graph()
    with g.as_default():
        ids = v1.placeholder(tf.int64, [None, 3], name="ids")
        x = v1.placeholder(tf.float32, [None, 2], name="x")
        labels = v1.placeholder(tf.float32, [None], name="labels")
        with v1.variable_scope("linear", partitioner=v1.fixed_size_partitioner(3)):
            wide_w = v1.get_variable("ids/weights", [vocab, 1],
                                     initializer=v1.random_normal_initializer(seed=3))
            dense_w = v1.get_variable("x/weights", [2, 1],
                                      initializer=v1.random_normal_initializer(seed=4))
            wide = tf.reduce_sum(tf.nn.embedding_lookup(wide_w, ids), axis=1) + \
                tf.matmul(x, dense_w)
            bias = v1.get_variable("bias_weights", [1], initializer=v1.zeros_initializer())
            wide = wide + bias
        with v1.variable_scope("dnn"):
            with v1.variable_scope("input_from_feature_columns",
                                   partitioner=v1.fixed_size_partitioner(2)):
                emb = v1.get_variable("ids_embedding/embedding_weights", [vocab, 4],
                                      initializer=v1.random_normal_initializer(seed=5))
                e = tf.reduce_mean(tf.nn.embedding_lookup(emb, ids), axis=1)
            part = v1.min_max_variable_partitioner(max_partitions=2, min_slice_size=16)
            h = dense(tf.concat([e, x], 1), 8, "hiddenlayer_0", tf.nn.relu, part)
            deep = dense(h, 1, "logits", None, part)
        logits = tf.add(wide, deep, name="logits")
        probs = tf.sigmoid(logits, name="logistic")
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
            labels=labels[:, None], logits=logits))
        train_feeds = {ids: rng.integers(0, vocab, size=(16, 3)),
                       x: rng.normal(size=(16, 2)).astype(np.float32),
                       labels: rng.integers(0, 2, size=16).astype(np.float32)}
        with v1.Session(graph=g) as sess:
            write(HERE / "wide_deep", g, sess, {"ids": ids, "x": x},
                  {"logistic": probs, "logits": logits}, loss, train_feeds,
                  {"ids": rng.integers(0, vocab, size=(4, 3)),
                   "x": rng.normal(size=(4, 2)).astype(np.float32)})


if __name__ == "__main__":
    dnn()
    wide_deep()
