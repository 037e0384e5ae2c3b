"""Writes tests/data/while_grad/<program>/: TensorFlow's graph with its gradients
(``tf_graph.pbtxt``) and ``runs.json`` (for each run: the feeds, the loss and
``tf.compat.v1.gradients`` of the loss against each x), plus
examples/train_dynamic_rnn_tf.json, the numbers examples/train_dynamic_rnn.py compares with.

Run ONLY in a TensorFlow venv (never in CI):
    /tmp/tfvenv/bin/python tests/data/while_grad/generate.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import tensorflow as tf  # noqa: E402
from while_grad_programs import PROGRAMS  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()


def _feed_value(g, name, v):
    t = g.get_tensor_by_name(name + ":0")
    return np.asarray(v, t.dtype.as_numpy_dtype)


def _dense(v, shape):
    """An IndexedSlicesValue (a gather's gradient) as the dense array it stands for (after 0
    loop trips TensorFlow's accumulated dense_shape stays [0, 0]: the x's shape is used)."""
    if hasattr(v, "indices"):
        out = np.zeros(shape, v.values.dtype)
        np.add.at(out, v.indices, v.values)
        return out
    return np.asarray(v)


def program(name: str, prog: dict) -> None:
    g = tf.Graph()
    if prog.get("functional"):
        tf1.enable_control_flow_v2()
    try:
        with g.as_default():
            loss, xs, _ = prog["tf"](tf1, tf)
            n_forward = len(g.as_graph_def().node)
            grads = tf1.gradients(loss, xs)
            init = tf1.global_variables_initializer()
    finally:
        tf1.disable_control_flow_v2()
    out = HERE / name
    out.mkdir(exist_ok=True)
    (out / "tf_graph.pbtxt").write_text(str(g.as_graph_def()))
    runs = []
    with tf1.Session(graph=g) as s:
        for feeds in prog["runs"]:
            s.run(init)
            fd = {g.get_tensor_by_name(k + ":0"): _feed_value(g, k, v) for k, v in feeds.items()}
            lv, gv = s.run([loss, grads], fd)
            runs.append({"feeds": {k: np.asarray(v).tolist() for k, v in feeds.items()},
                         "loss": float(lv), "grads": [_dense(v, x.shape.as_list()).tolist()
                                                  for v, x in zip(gv, xs)]})
    (out / "runs.json").write_text(json.dumps({
        "forward_nodes": n_forward, "loss": loss.name, "grads": [t.name for t in grads],
        "runs": runs}, indent=1) + "\n")
    print(name, "ok", [r["loss"] for r in runs])


# --- the example: plain gradient descent on an RNN over sequences of fed lengths ----------------
def train_dynamic_rnn() -> None:
    sys.path.insert(0, str(HERE.parents[2] / "examples"))
    import train_dynamic_rnn as ex
    g = tf.Graph()
    with g.as_default():
        length = tf1.placeholder(tf.int32, [], name="length")
        seq = tf1.placeholder(tf.float32, [None, ex.BATCH, ex.IN], name="seq")
        target = tf1.placeholder(tf.float32, [ex.BATCH, ex.HID], name="target")
        wx = tf1.Variable(ex.WX0, name="Wx", use_resource=False)
        wh = tf1.Variable(ex.WH0, name="Wh", use_resource=False)
        b = tf1.Variable(ex.B0, name="b", use_resource=False)

        def body(t, h):
            xt = tf.gather(seq, t)
            return t + 1, tf.tanh(tf.matmul(xt, wx) + tf.matmul(h, wh) + b)
        _, h = tf1.while_loop(lambda t, h: t < length, body,
                              [tf.constant(0), tf.zeros([ex.BATCH, ex.HID])])
        loss = tf.reduce_mean(tf.square(h - target))
        gw = tf1.gradients(loss, [wx, wh, b])
        step = tf.group(*[tf1.assign_sub(v, ex.LR * gv) for v, gv in zip([wx, wh, b], gw)])
        init = tf1.global_variables_initializer()
    losses = []
    ev = {length: len(ex.EVAL[0]), seq: ex.EVAL[0], target: ex.EVAL[1]}
    with tf1.Session(graph=g) as s:
        s.run(init)
        before = s.run(loss, ev)
        for seq_v, tgt in ex.batches():
            # the loss first, then the update (its own run: the step reads what it writes)
            losses.append(float(s.run(loss, {length: len(seq_v), seq: seq_v, target: tgt})))
            s.run(step, {length: len(seq_v), seq: seq_v, target: tgt})
        final = s.run(loss, ev)
        wx_v, wh_v, b_v = s.run([wx, wh, b])
    ex.TF_NUMBERS.write_text(json.dumps({
        "losses": losses, "eval_loss_before": float(before), "eval_loss": float(final),
        "Wx": wx_v.tolist(), "Wh": wh_v.tolist(), "b": b_v.tolist()}, indent=1) + "\n")
    print("train_dynamic_rnn", losses[0], losses[-1], before, final)


if __name__ == "__main__":
    only = sys.argv[1:]
    for name, prog in PROGRAMS.items():
        if not only or name in only:
            program(name, prog)
    if not only or "train" in only:
        train_dynamic_rnn()
