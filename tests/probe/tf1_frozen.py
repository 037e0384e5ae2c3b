"""TF1 graphs frozen with tf.compat.v1.graph_util.convert_variables_to_constants."""

import json
import os
import shutil
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from pathlib import Path

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
v1.disable_eager_execution()
OUT = Path("/tmp/probe_tf1")
OUT.mkdir(exist_ok=True)
R = np.random.default_rng(0)
only = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None
CASES = {}


def case(f):
    CASES[f.__name__] = f
    return f


def finish(name, sess, g, feeds, fetches):
    """feeds: {tensor: value}; fetches: [tensor]"""
    outs = sess.run(fetches, {g.get_tensor_by_name(k): v for k, v in feeds.items()})
    gd = v1.graph_util.convert_variables_to_constants(
        sess, g.as_graph_def(), [t.split(":")[0] for t in fetches]
    )
    (OUT / f"{name}.pb").write_bytes(gd.SerializeToString())
    d = OUT / f"{name}_io"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    for i, (_k, v) in enumerate(feeds.items()):
        np.save(d / f"feed{i}.npy", v)
    for i, v in enumerate(outs):
        np.save(d / f"fetch{i}.npy", v)
    (d / "names.json").write_text(json.dumps({"feeds": list(feeds), "fetches": fetches}))


@case
def v1_dynamic_rnn():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 6, 4], name="x")
        L = v1.placeholder(tf.int32, [None], name="len")
        cell = v1.nn.rnn_cell.MultiRNNCell([v1.nn.rnn_cell.LSTMCell(5), v1.nn.rnn_cell.GRUCell(3)])
        out, st = v1.nn.dynamic_rnn(cell, x, sequence_length=L, dtype=tf.float32)
        fw = v1.nn.rnn_cell.BasicLSTMCell(4)
        bw = v1.nn.rnn_cell.BasicRNNCell(4)
        (o1, o2), _ = v1.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=L, dtype=tf.float32, scope="bi"
        )
        tf.identity(tf.concat([out[:, -1, :], o1[:, 0], o2[:, 0]], -1), name="y")
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            finish(
                "v1_dynamic_rnn",
                s,
                g,
                {
                    "x:0": R.standard_normal((3, 6, 4)).astype(np.float32),
                    "len:0": np.array([6, 2, 4], np.int32),
                },
                ["y:0"],
            )


@case
def v1_layers_bn_cond():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 8, 8, 3], name="x")
        training = v1.placeholder_with_default(False, [], name="training")
        h = v1.layers.conv2d(x, 4, 3, padding="same")
        h = v1.layers.batch_normalization(h, training=training, fused=True)
        h = tf.nn.relu(h)
        h = v1.layers.max_pooling2d(h, 2, 2)
        h = v1.layers.dropout(h, 0.5, training=training)
        h = v1.layers.flatten(h)
        tf.identity(v1.layers.dense(h, 3), name="y")
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            finish(
                "v1_layers_bn_cond",
                s,
                g,
                {"x:0": R.standard_normal((2, 8, 8, 3)).astype(np.float32)},
                ["y:0"],
            )


@case
def v1_tensorarray_while():
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        n = tf.shape(x)[0]
        ta = tf.TensorArray(tf.float32, size=n)

        def body(i, ta, acc):
            row = x[i]
            acc = acc + row
            return i + 1, ta.write(i, acc * tf.cast(i, tf.float32)), acc

        _, ta, acc = v1.while_loop(lambda i, *_: i < n, body, [0, ta, tf.zeros([3])])
        y = tf.identity(ta.stack(), name="y")
        m = v1.cond(tf.reduce_sum(acc) > 0, lambda: tf.reduce_max(y), lambda: tf.reduce_min(y))
        tf.identity(m, name="z")
        with v1.Session(graph=g) as s:
            finish(
                "v1_tensorarray_while",
                s,
                g,
                {"x:0": R.standard_normal((5, 3)).astype(np.float32)},
                ["y:0", "z:0"],
            )


@case
def v1_seq2seq_beam_like():
    g = tf.Graph()
    with g.as_default():
        logits = v1.placeholder(tf.float32, [None, 7], name="logits")
        k = 3
        vals, idx = tf.nn.top_k(tf.nn.log_softmax(logits), k)
        flat = tf.reshape(idx, [-1])
        uniq, _ = tf.unique(flat)
        gathered = tf.gather(tf.transpose(logits), uniq)
        tf.identity(tf.reduce_logsumexp(gathered, axis=0), name="s")
        tf.identity(tf.argmax(logits, axis=1, output_type=tf.int32), name="am")
        tf.identity(
            tf.math.unsorted_segment_sum(
                logits, tf.math.floormod(tf.range(tf.shape(logits)[0]), 2), 2
            ),
            name="seg",
        )
        with v1.Session(graph=g) as sess:
            finish(
                "v1_seq2seq_beam_like",
                sess,
                g,
                {"logits:0": R.standard_normal((4, 7)).astype(np.float32)},
                ["s:0", "am:0", "seg:0"],
            )


@case
def v1_nested_while_cond():
    g = tf.Graph()
    with g.as_default():
        n = v1.placeholder(tf.int32, [], name="n")

        def outer(i, tot):
            def inner(j, t):
                t = v1.cond(
                    tf.equal(tf.math.floormod(i + j, 3), 0),
                    lambda: t + tf.cast(i * j, tf.float32),
                    lambda: t - 0.5,
                )
                return j + 1, t

            _, t = v1.while_loop(lambda j, t: j < i, inner, [0, tot], parallel_iterations=4)
            return i + 1, t

        _, tot = v1.while_loop(lambda i, t: i < n, outer, [0, tf.constant(0.0)])
        tf.identity(tot, name="y")
        with v1.Session(graph=g) as s:
            finish("v1_nested_while_cond", s, g, {"n:0": np.array(9, np.int32)}, ["y:0"])


@case
def v1_embedding_textcnn():
    g = tf.Graph()
    with g.as_default():
        ids = v1.placeholder(tf.int32, [None, 10], name="ids")
        emb = v1.get_variable("emb", [50, 8])
        e = tf.nn.embedding_lookup(emb, ids)
        e = tf.expand_dims(e, -1)
        pools = []
        for k in (2, 3):
            w = v1.get_variable(f"w{k}", [k, 8, 1, 4])
            b = v1.get_variable(f"b{k}", [4], initializer=v1.zeros_initializer())
            c = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(e, w, [1, 1, 1, 1], "VALID"), b))
            pools.append(tf.nn.max_pool(c, [1, 10 - k + 1, 1, 1], [1, 1, 1, 1], "VALID"))
        h = tf.reshape(tf.concat(pools, 3), [-1, 8])
        tf.identity(tf.nn.softmax(v1.layers.dense(h, 2)), name="y")
        with v1.Session(graph=g) as s:
            s.run(v1.global_variables_initializer())
            finish(
                "v1_embedding_textcnn",
                s,
                g,
                {"ids:0": R.integers(0, 50, (3, 10)).astype(np.int32)},
                ["y:0"],
            )


for n, f in CASES.items():
    if only and n not in only:
        continue
    try:
        f()
        print("ok", n, flush=True)
    except Exception as e:
        import traceback

        traceback.print_exc()
        print("TFFAIL", n, e, flush=True)
