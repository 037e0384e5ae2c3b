"""Write the inputs and models ``tests/test_batch.py`` runs ``dfg batch`` on, with TensorFlow's
own outputs.

Run with a Python that has TensorFlow 2.21 (never in CI; dfg never imports TensorFlow)::

    /tmp/tfvenv/bin/python tests/data/batch/generate.py

It writes, beside this file:

* ``examples_model.pb``: a frozen TF1 graph that parses a batch of serialized ``tf.Example``
  fed to the string placeholder ``examples`` (``ParseExampleV2``: ``x`` float32 [4], ``k``
  int64 [] with default 0) and fetches ``scores`` = tanh(x W + b) + k (float32 [N, 3]) and
  ``label`` = k * 2 (int64 [N]);
* ``examples_0.tfrecord`` (5 records) and ``examples_1.tfrecord`` (7 records, some without
  ``k``), written by ``tf.io.TFRecordWriter``, so dfg's TFRecord reader is checked against
  TensorFlow's writer; ``examples_N_expected.npz``: TensorFlow's ``scores`` and ``label``
  for every record, in file order;
* ``image_model.pb``: a frozen TF1 graph fed a batch of encoded PNG files (string placeholder
  ``images``) that decodes each one (``tf.map_fn``, v1 control flow) and fetches ``means``,
  the mean of each channel (float32 [N, 3]);
* ``images/img_K.png`` (6 PNGs of 5x7x3, ``tf.io.encode_png``) and ``images_expected.npz``:
  TensorFlow's ``means`` for them in file-name order.

Deterministic: fixed seeds; a few kB in all.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
RNG = np.random.default_rng(27)
v1 = tf.compat.v1


def _freeze(graph: tf.Graph, sess, outputs: list[str], path: Path) -> None:
    frozen = v1.graph_util.convert_variables_to_constants(sess, graph.as_graph_def(), outputs)
    path.write_bytes(frozen.SerializeToString())


def _example(x: np.ndarray, k: int | None) -> bytes:
    feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=x.tolist()))}
    if k is not None:
        feature["k"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[k]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def examples() -> None:
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        ex = v1.placeholder(tf.string, [None], name="examples")
        parsed = v1.io.parse_example(ex, {
            "x": v1.io.FixedLenFeature([4], tf.float32),
            "k": v1.io.FixedLenFeature([], tf.int64, default_value=0)})
        wv = v1.Variable(w, name="w")
        bv = v1.Variable(b, name="b")
        k = parsed["k"]
        scores = tf.tanh(tf.matmul(parsed["x"], wv) + bv) + tf.cast(k, tf.float32)[:, None]
        tf.identity(scores, name="scores")
        tf.identity(k * 2, name="label")
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            _freeze(g, sess, ["scores", "label"], HERE / "examples_model.pb")
            for i, n in enumerate((5, 7)):
                records = [_example(RNG.standard_normal(4).astype(np.float32),
                                    None if (i == 1 and r % 3 == 0) else int(RNG.integers(-5, 6)))
                           for r in range(n)]
                with tf.io.TFRecordWriter(str(HERE / f"examples_{i}.tfrecord")) as wr:
                    for rec in records:
                        wr.write(rec)
                s, lab = sess.run(["scores:0", "label:0"],
                                  {ex: np.array(records, dtype=object)})
                np.savez(HERE / f"examples_{i}_expected.npz", scores=s, label=lab)


def images() -> None:
    folder = HERE / "images"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    encoded = []
    g = tf.Graph()
    with g.as_default(), v1.Session(graph=g) as sess:
        for i in range(6):
            pixels = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)
            data = sess.run(tf.io.encode_png(pixels))
            (folder / f"img_{i}.png").write_bytes(data)
            encoded.append(data)
    g = tf.Graph()
    with g.as_default():
        imgs = v1.placeholder(tf.string, [None], name="images")
        means = tf.map_fn(
            lambda s: tf.reduce_mean(tf.cast(tf.io.decode_png(s, channels=3), tf.float32),
                                     axis=[0, 1]),
            imgs, fn_output_signature=tf.float32)
        tf.identity(means, name="means")
        with v1.Session(graph=g) as sess:
            _freeze(g, sess, ["means"], HERE / "image_model.pb")
            m = sess.run("means:0", {imgs: np.array(encoded, dtype=object)})
    np.savez(HERE / "images_expected.npz", means=m)


if __name__ == "__main__":
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()
    examples()
    images()
