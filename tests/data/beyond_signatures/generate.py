"""Writes SavedModels that are run below or beside their signatures, under
tests/data/beyond_signatures/. Run with TensorFlow's own virtualenv, never in CI:

    /tmp/tfvenv/bin/python tests/data/beyond_signatures/generate.py

* ``module_no_sig/``: a ``tf.Module`` saved with ``signatures={}``: callable only through its
  object graph's concrete functions (``__call__``, ``scale``, ``sub.shift``), which capture
  its variables. ``module_no_sig_io.npz`` holds inputs and TensorFlow's outputs of each.
* ``tf1_dataset/``: a TF1 SavedModel whose signature's output reads a ``tf.data`` iterator
  (``IteratorGetNext``) and a variable: it has no input to feed. Run below the signature,
  feeding the iterator's output tensor. ``tf1_dataset_io.npz`` holds a value fed to
  ``IteratorGetNext:0`` and TensorFlow's ``y`` for it (a session on the loaded graph). Its
  second signature, ``nothing``, has an input and no outputs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent


def _fresh(d: Path) -> None:
    if d.exists():
        shutil.rmtree(d)


def module_no_sig() -> None:
    d = HERE / "module_no_sig"
    _fresh(d)

    class Model(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = tf.Variable([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.25]], name="w")
            self.b = tf.Variable([0.5, -0.5], name="b")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def __call__(self, x: Any) -> Any:
            return tf.nn.relu(tf.matmul(x, self.w) + self.b)

        @tf.function(input_signature=[tf.TensorSpec([], tf.float32, name="s")])
        def scale(self, s: Any) -> Any:
            return {"scaled": self.w * s, "norm": tf.reduce_sum(self.w * self.w) * s}

    m = Model()
    m.sub = tf.Module()
    b = m.b
    m.sub.shift = tf.function(lambda y: y * 2.0 + b,
                              input_signature=[tf.TensorSpec([2], tf.float32, name="y")])
    tf.saved_model.save(m, str(d), signatures={})
    loaded = tf.saved_model.load(str(d))
    assert not list(loaded.signatures), list(loaded.signatures)
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], np.float32)
    s = np.float32(1.5)
    y = np.array([0.25, -4.0], np.float32)
    sc = loaded.scale(tf.constant(s))
    np.savez(HERE / "module_no_sig_io.npz", x=x, call=loaded(tf.constant(x)).numpy(), s=s,
             scaled=sc["scaled"].numpy(), norm=sc["norm"].numpy(), y=y,
             shift=loaded.sub.shift(tf.constant(y)).numpy())
    print("module_no_sig")


def tf1_dataset() -> None:
    d = HERE / "tf1_dataset"
    _fresh(d)
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        rows = np.arange(12, dtype=np.float32).reshape(6, 2)
        ds = tf.data.Dataset.from_tensor_slices(rows).batch(3)
        it = v1.data.make_one_shot_iterator(ds)
        x = it.get_next()
        w = v1.get_variable("w", initializer=tf.constant([[2.0, -1.0, 0.5], [1.0, 0.0, 3.0]]),
                            use_resource=False)
        y = tf.identity(tf.matmul(x, w) * 0.5, name="y")
        sig = v1.saved_model.build_signature_def(
            inputs={}, outputs={"y": v1.saved_model.build_tensor_info(y)},
            method_name=v1.saved_model.PREDICT_METHOD_NAME)
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            builder = v1.saved_model.Builder(str(d))
            # a signature without outputs (TF1 allows it; its session refuses to run it)
            empty = v1.saved_model.build_signature_def(
                inputs={"x": v1.saved_model.build_tensor_info(x)}, outputs={},
                method_name=v1.saved_model.PREDICT_METHOD_NAME)
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={"serving_default": sig, "nothing": empty})
            builder.save()
    fed = np.array([[1.0, 2.0], [-3.0, 0.5]], np.float32)
    g = tf.Graph()
    with g.as_default(), v1.Session(graph=g) as sess:
        v1.saved_model.loader.load(sess, ["serve"], str(d))
        got = sess.run("y:0", {"IteratorGetNext:0": fed})
        first = sess.run("y:0")     # the dataset's first batch, through the signature
        try:
            sess.run([], {"IteratorGetNext:0": fed})
        except (RuntimeError, ValueError, TypeError) as e:   # what TF says to no fetches
            print("TensorFlow refuses a run without fetches:", type(e).__name__, e)
    np.savez(HERE / "tf1_dataset_io.npz", x=fed, y=got, first=first)
    print("tf1_dataset", got.shape, first.shape)


if __name__ == "__main__":
    module_no_sig()
    tf1_dataset()
