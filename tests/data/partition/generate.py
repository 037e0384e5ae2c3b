"""Writes the partitioned-graph test data with TensorFlow (never run in CI, not a dependency):

    /tmp/tfvenv/bin/python tests/data/partition/generate.py

Three TF1 graphs as between-graph replication writes them (graph mode, control flow v1, ref
variables), each node pinned by ``tf.device`` to a task of the cluster
ps:1, worker:2, and the values TensorFlow computes for them in a real distributed run: one
in-process ``tf.distribute.Server`` per task, the session on worker 0's gRPC target (so
nodes without a device run on /job:worker/task:0, as TF's master places them).

- ``ps_mlp.pbtxt``: a 4-8-2 MLP, its variables on /job:ps/task:0, layer 1 on worker 0, layer
  2 and the loss on worker 1, gradients colocated with their ops, GradientDescent(0.1) applied
  on the ps (colocated with the variables). ``ps_mlp.npz``: the batch (x, y), the loss of 6
  training steps (loss is evaluated in the same step as train) and the weights after them.
- ``loop.pbtxt``: a while loop whose body spans two tasks (sin on worker 1, the rest on
  worker 0; a ps variable scales it); ``loop.npz``: the results for n = 0, 1 and 5.
- ``cond.pbtxt``: a cond whose true branch is on worker 1 and false branch on the ps;
  ``cond.npz``: the results for p = True and False.
- ``nested.pbtxt``: a while loop in a while loop (worker 0), the inner body on worker 1;
  ``nested.npz``: the results for (n, m) = (2, 3), (3, 0) and (0, 2).
"""

from __future__ import annotations

import os
import socket

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()
tf1.disable_resource_variables()

PS, W0, W1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def cluster() -> tuple[tf.train.ClusterSpec, list]:
    p = free_ports(3)
    spec = tf.train.ClusterSpec({"ps": [f"localhost:{p[0]}"],
                                 "worker": [f"localhost:{p[1]}", f"localhost:{p[2]}"]})
    servers = [tf.distribute.Server(spec, job_name=j, task_index=i, start=True)
               for j, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    return spec, servers


def write(g: tf.Graph, name: str) -> None:
    tf.io.write_graph(g.as_graph_def(), HERE, f"{name}.pbtxt", as_text=True)


def ps_mlp(target: str) -> None:
    rng = np.random.default_rng(27)
    init = {"w1": rng.normal(0, 0.5, (4, 8)).astype(np.float32),
            "b1": np.full(8, 0.1, np.float32),
            "w2": rng.normal(0, 0.5, (8, 2)).astype(np.float32),
            "b2": np.zeros(2, np.float32)}
    x = rng.normal(0, 1, (5, 4)).astype(np.float32)
    y = rng.normal(0, 1, (5, 2)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            v = {k: tf1.Variable(a, name=k) for k, a in init.items()}
        with tf.device(W0):
            xp = tf1.placeholder(tf.float32, [None, 4], name="x")
            yp = tf1.placeholder(tf.float32, [None, 2], name="y")
            h = tf.nn.relu(tf.matmul(xp, v["w1"]) + v["b1"], name="h")
        with tf.device(W1):
            logits = tf.add(tf.matmul(h, v["w2"]), v["b2"], name="logits")
            loss = tf.reduce_mean(tf.square(logits - yp), name="loss")
        opt = tf1.train.GradientDescentOptimizer(0.1)
        with tf.device(W0):
            train = opt.minimize(loss, colocate_gradients_with_ops=True, name="train")
        tf1.variables_initializer(list(v.values()), name="init")
    write(g, "ps_mlp")
    losses = []
    with tf1.Session(target, graph=g) as sess:
        sess.run("init")
        for _ in range(6):
            lv, _ = sess.run([loss, train], {xp: x, yp: y})
            losses.append(lv)
        final = sess.run({k: t for k, t in v.items()})
    np.savez(os.path.join(HERE, "ps_mlp.npz"), x=x, y=y, loss=np.asarray(losses, np.float32),
             **{f"{k}_final": a for k, a in final.items()})


def loop(target: str) -> None:
    g = tf.Graph()
    with g.as_default():
        with tf.device(PS):
            scale = tf1.Variable(np.float32(0.9), name="scale")
        with tf.device(W0):
            n = tf1.placeholder(tf.int32, [], name="n")
            x0 = tf1.placeholder(tf.float32, [3], name="x0")

            def body(i, x):
                with tf.device(W1):
                    y = tf.sin(x) * 2.0 + 0.5
                with tf.device(W0):
                    z = y * scale - 0.1
                return i + 1, z

            _i, out = tf1.while_loop(lambda i, x: i < n, body, [tf.constant(0), x0])
            tf.identity(out, name="out")
        tf1.variables_initializer([scale], name="init")
    write(g, "loop")
    x0v = np.asarray([0.3, -1.2, 2.0], np.float32)
    res = {"x0": x0v}
    with tf1.Session(target, graph=g) as sess:
        sess.run("init")
        for k in (0, 1, 5):
            res[f"out_{k}"] = sess.run("out:0", {"n:0": k, "x0:0": x0v})
    np.savez(os.path.join(HERE, "loop.npz"), **res)


def cond(target: str) -> None:
    g = tf.Graph()
    with g.as_default():
        with tf.device(W0):
            x = tf1.placeholder(tf.float32, [3], name="x")
            p = tf1.placeholder(tf.bool, [], name="p")

            def true_fn():
                with tf.device(W1):
                    return tf.square(x) + 1.0

            def false_fn():
                with tf.device(PS):
                    return tf.abs(x) * 3.0

            r = tf1.cond(p, true_fn, false_fn)
            tf.multiply(r, 2.0, name="out")
    write(g, "cond")
    xv = np.asarray([1.5, -2.0, 0.25], np.float32)
    res = {"x": xv}
    with tf1.Session(target, graph=g) as sess:
        for pv in (True, False):
            res[f"out_{pv}"] = sess.run("out:0", {"x:0": xv, "p:0": pv})
    np.savez(os.path.join(HERE, "cond.npz"), **res)


def nested(target: str) -> None:
    g = tf.Graph()
    with g.as_default():
        with tf.device(W0):
            n = tf1.placeholder(tf.int32, [], name="n")
            m = tf1.placeholder(tf.int32, [], name="m")
            x0 = tf1.placeholder(tf.float32, [2], name="x0")

            def outer(i, x):
                def inner(j, y):
                    with tf.device(W1):
                        y2 = tf.cos(y) + 0.25
                    return j + 1, y2

                _j, y = tf1.while_loop(lambda j, y: j < m, inner, [tf.constant(0), x])
                return i + 1, y * 0.5 + 1.0

            _i, out = tf1.while_loop(lambda i, x: i < n, outer, [tf.constant(0), x0])
            tf.identity(out, name="out")
    write(g, "nested")
    x0v = np.asarray([0.7, -2.5], np.float32)
    res = {"x0": x0v}
    with tf1.Session(target, graph=g) as sess:
        for nv, mv in ((2, 3), (3, 0), (0, 2)):
            res[f"out_{nv}_{mv}"] = sess.run("out:0", {"n:0": nv, "m:0": mv, "x0:0": x0v})
    np.savez(os.path.join(HERE, "nested.npz"), **res)


def main() -> None:
    _spec, servers = cluster()
    target = servers[1].target     # worker 0 is the master, as a between-graph client's
    ps_mlp(target)
    loop(target)
    cond(target)
    nested(target)
    print("wrote", sorted(f for f in os.listdir(HERE) if not f.endswith(".py")))


if __name__ == "__main__":
    main()
