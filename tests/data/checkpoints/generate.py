"""A TF1 checkpoint as tf.compat.v1.train.Saver writes it, for tests/test_checkpoint_restore.py.

Run with TensorFlow's own virtualenv, never in CI (TensorFlow is not a dependency of dfg):

    /tmp/tfvenv/bin/python tests/data/checkpoints/generate.py

Writes ``mlp.ckpt.meta`` (the MetaGraphDef), ``mlp.ckpt.index`` / ``mlp.ckpt.data-*`` (the
bundle), the ``checkpoint`` state file, ``x.npy`` and TensorFlow's output ``y.npy`` after
restoring into a fresh Session. The graph has a resource variable (get_variable) and a ref
variable (VariableV2), both changed after initialization so only a restore gives ``y``.

``partitioned/``: a TF1 SavedModel (simple_save) whose embedding is split in 3 parts along
rows and whose weight is split in 2 along columns (fixed_size_partitioner): the bundle
stores each part as a slice of the whole variable; ``ids.npy`` and TF's ``y_part.npy``; the
same variables as a TF1 checkpoint ``partitioned/part.ckpt.*``.

``partitioned_slots/``: optimizer slots and moving averages of a partitioned variable (see
:func:`partitioned_slots`).
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
v1 = tf.compat.v1


def main() -> None:
    for f in HERE.glob("mlp.ckpt*"):
        f.unlink()
    rng = np.random.default_rng(3)
    x_val = rng.standard_normal((4, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        w = v1.get_variable("dense/kernel", initializer=tf.constant(
            rng.standard_normal((3, 5)).astype(np.float32)))
        b = v1.Variable(tf.zeros([5]), name="dense/bias", use_resource=False)
        w2 = v1.get_variable("out/kernel", initializer=tf.constant(
            rng.standard_normal((5, 2)).astype(np.float32)))
        h = tf.nn.relu(tf.matmul(x, w) + b)
        tf.nn.softmax(tf.matmul(h, w2), name="y")
        saver = v1.train.Saver()
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            s.run([w.assign(w * 1.5), v1.assign(b, tf.fill([5], 0.25))])
            # a relative prefix: the 'checkpoint' state file then names it relatively
            cwd = os.getcwd()
            os.chdir(HERE)
            try:
                saver.save(s, "mlp.ckpt")
            finally:
                os.chdir(cwd)
    # TensorFlow's own answer: a fresh graph from the .meta file, restored from the checkpoint
    with tf.Graph().as_default() as g2, v1.Session(graph=g2) as s:
        saver = v1.train.import_meta_graph(str(HERE / "mlp.ckpt.meta"))
        saver.restore(s, str(HERE / "mlp.ckpt"))
        y = s.run("y:0", {"x:0": x_val})
    np.save(HERE / "x.npy", x_val)
    np.save(HERE / "y.npy", y)
    partitioned(rng)


def partitioned(rng) -> None:
    import shutil

    d = HERE / "partitioned"
    if d.exists():
        shutil.rmtree(d)
    ids_val = np.array([0, 3, 9, 4], np.int64)
    g = tf.Graph()
    with g.as_default():
        ids = v1.placeholder(tf.int64, [None], name="ids")
        emb = v1.get_variable("emb", initializer=tf.constant(
            rng.standard_normal((10, 4)).astype(np.float32)),
            partitioner=v1.fixed_size_partitioner(3))
        w = v1.get_variable("w", initializer=tf.constant(
            rng.standard_normal((4, 3)).astype(np.float32)),
            partitioner=v1.fixed_size_partitioner(2, axis=1))
        y = tf.identity(tf.matmul(tf.nn.embedding_lookup(emb, ids),
                                  tf.concat(list(w), axis=1)), name="y")
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            v1.saved_model.simple_save(s, str(d), {"ids": ids}, {"y": y})
            # the same variables as a TF1 checkpoint (the .meta graph has emb/part_0 ...)
            cwd = os.getcwd()
            os.chdir(d)
            try:
                v1.train.Saver().save(s, "part.ckpt", write_state=False)
            finally:
                os.chdir(cwd)
    loaded = tf.saved_model.load(str(d))
    y_val = loaded.signatures["serving_default"](ids=tf.constant(ids_val))["y"].numpy()
    np.save(HERE / "ids.npy", ids_val)
    np.save(HERE / "y_part.npy", y_val)
    print("wrote", sorted(p.name for p in HERE.iterdir()))
    partitioned_slots(rng)


def partitioned_slots(rng) -> None:
    """``partitioned_slots/``: a variable split in 2 by fixed_size_partitioner, trained with
    Momentum and tracked by an ExponentialMovingAverage. The Saver stores each part's slot
    and average as slices of ``wp/Momentum`` and ``wp/ExponentialMovingAverage``, though the
    graph's variables are ``wp/part_K/Momentum`` ...; ``want.npz``: TF's values of every
    ``check/*`` tensor after restoring into a fresh Session, then ``after/*`` after one more
    training step (which reads the restored slots)."""
    import shutil

    d = HERE / "partitioned_slots"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    x_val = rng.standard_normal((5, 4)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 4], name="x")
        wp = v1.get_variable("wp", initializer=tf.constant(
            rng.standard_normal((4, 2)).astype(np.float32)),
            partitioner=v1.fixed_size_partitioner(2))
        loss = tf.reduce_sum(tf.square(tf.matmul(x, tf.concat(list(wp), axis=0))),
                             name="loss")
        opt = v1.train.MomentumOptimizer(0.05, 0.9)
        step = opt.minimize(loss)
        ema = v1.train.ExponentialMovingAverage(0.5)
        with tf.control_dependencies([step]):
            train = tf.group(ema.apply(list(wp)), name="train")
        checks = {}
        for k, part in enumerate(wp):
            checks[f"slot{k}"] = tf.identity(opt.get_slot(part, "momentum"),
                                             name=f"check/slot{k}")
            checks[f"avg{k}"] = tf.identity(ema.average(part), name=f"check/avg{k}")
            checks[f"part{k}"] = tf.identity(part, name=f"check/part{k}")
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            for _ in range(3):
                s.run(train, {x: x_val})
            cwd = os.getcwd()
            os.chdir(d)
            try:
                v1.train.Saver().save(s, "model.ckpt", write_state=False)
            finally:
                os.chdir(cwd)
    want = {}
    with tf.Graph().as_default() as g2, v1.Session(graph=g2) as s:
        saver = v1.train.import_meta_graph(str(d / "model.ckpt.meta"))
        saver.restore(s, str(d / "model.ckpt"))
        names = sorted(checks)
        for n, v in zip(names, s.run([f"check/{n}:0" for n in names])):
            want[f"check/{n}"] = v
        s.run("train", {"x:0": x_val})
        for n, v in zip(names, s.run([f"check/{n}:0" for n in names])):
            want[f"after/{n}"] = v
    np.save(d / "x.npy", x_val)
    np.savez(d / "want.npz", **want)
    print("wrote", sorted(p.name for p in d.iterdir()))


if __name__ == "__main__":
    main()
