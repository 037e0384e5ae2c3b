"""The builder comparison corpus: each program written twice, once with TensorFlow 1.x graph
APIs (``tf_*``, run by generate.py in a TensorFlow venv) and once with dfg's builder
(``dfg_*``, run by tests/test_builder_corpus.py). Neither side imports the other's library
at module level, so this file loads in both venvs.

Each entry: ``feeds`` (placeholder name -> numpy array), ``fetch`` (tensor names), ``init``
(a target run first, or None).
"""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(13)
X23 = RNG.normal(size=(2, 3)).astype(np.float32)


# --- arith: operator overloading and common ops ----------------------------------------------
def tf_arith(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    b = tf1.placeholder(tf.bool, [2], name="b")
    a = [1.0 + x, x - 2.0, 3.0 / x, x // 2.0, x % 2.0, x ** 2.0, -x, abs(x), x < 1.0,
         x >= 1.0, b & b, b | b, b ^ b, ~b, x[0], x[:, 1:3], x @ tf.transpose(x),
         tf.reduce_sum(x), tf.reduce_mean(x, axis=1, keepdims=True), tf.reshape(x, [3, 2]),
         tf.concat([x, x], axis=0), tf.nn.softmax(x), tf.nn.relu(x), tf.sigmoid(x),
         tf.tanh(x), tf.exp(x), tf.cast(x, tf.int32), tf.square(x), tf.maximum(x, 0.5),
         tf.add(x, x), tf.multiply(x, 2.0), tf.subtract(x, 1.0)]
    return [tf.identity(t, name=f"out{i}") for i, t in enumerate(a)]


def dfg_arith(B):
    x = B.placeholder("float32", [2, 3], name="x")
    b = B.placeholder("bool", [2], name="b")
    a = [1.0 + x, x - 2.0, 3.0 / x, x // 2.0, x % 2.0, x ** 2.0, -x, abs(x), x < 1.0,
         x >= 1.0, b & b, b | b, b ^ b, ~b, x[0], x[:, 1:3], x @ B.transpose(x),
         B.reduce_sum(x), B.reduce_mean(x, axis=1, keepdims=True), B.reshape(x, [3, 2]),
         B.concat([x, x], axis=0), B.softmax(x), B.relu(x), B.sigmoid(x),
         B.tanh(x), B.exp(x), B.cast(x, "int32"), B.square(x), B.maximum(x, 0.5),
         B.add(x, x), B.multiply(x, 2.0), B.subtract(x, 1.0)]
    return [B.identity(t, name=f"out{i}") for i, t in enumerate(a)]


# --- scopes: unique names, name scopes, control deps, device, colocation -----------------------
def tf_scopes(tf1, tf):
    x = tf1.placeholder(tf.float32, [3], name="x")
    a = x + 1.0
    a1 = x + 2.0
    with tf1.name_scope("layer"):
        s = tf.add(a, a1)
        s1 = tf.add(s, a)
        with tf1.name_scope("inner"):
            m = s1 * 3.0
    with tf1.name_scope("layer"):
        m2 = m - 1.0
    with tf.control_dependencies([a]):
        c = tf.identity(m2, name="after_a")
        c2 = c * 2.0
    with tf.device("/cpu:0"):
        d = c2 + 1.0
    with tf1.colocate_with(d.op):
        e = tf.identity(d, name="colocated")
    return [e, a1]


def dfg_scopes(B):
    x = B.placeholder("float32", [3], name="x")
    a = x + 1.0
    a1 = x + 2.0
    with B.name_scope("layer"):
        s = B.add(a, a1)
        s1 = B.add(s, a)
        with B.name_scope("inner"):
            m = s1 * 3.0
    with B.name_scope("layer"):
        m2 = m - 1.0
    with B.control_dependencies([a]):
        c = B.identity(m2, name="after_a")
        c2 = c * 2.0
    with B.device("/cpu:0"):
        d = c2 + 1.0
    with B.colocate_with(d.op):
        e = B.identity(d, name="colocated")
    return [e, a1]


# --- variables ---------------------------------------------------------------------------------
def tf_variables(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    W = tf1.Variable(tf.ones([3, 4]), name="W")
    b = tf1.Variable(np.arange(4, dtype=np.float32), name="b")
    y = tf.matmul(x, W) + b
    tf1.assign_add(b, [1.0, 1.0, 1.0, 1.0])   # built, not fetched (it races with y)
    tf1.global_variables_initializer()
    return [y]


def dfg_variables(B):
    x = B.placeholder("float32", [2, 3], name="x")
    W = B.variable(B.ones([3, 4]), name="W")
    b = B.variable(np.arange(4, dtype=np.float32), name="b")
    y = B.matmul(x, W) + b
    b.assign_add([1.0, 1.0, 1.0, 1.0])
    B.global_variables_initializer()
    return [y]


# --- cond --------------------------------------------------------------------------------------
def tf_cond(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    p = tf1.placeholder(tf.bool, [], name="p")
    y = tf1.cond(p, lambda: x + 1.0, lambda: x * 2.0)
    z = tf1.cond(x[0, 0] > 0.0, lambda: (tf.reduce_sum(x), x), lambda: (tf.constant(7.0), -x))
    return [y, z[0], z[1]]


def dfg_cond(B):
    x = B.placeholder("float32", [2, 3], name="x")
    p = B.placeholder("bool", [], name="p")
    y = B.cond(p, lambda: x + 1.0, lambda: x * 2.0)
    z = B.cond(x[0, 0] > 0.0, lambda: (B.reduce_sum(x), x), lambda: (B.constant(7.0), -x))
    return [y, z[0], z[1]]


# --- while loops -------------------------------------------------------------------------------
def tf_while(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    i, acc = tf1.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * 0.5 + x),
                            [tf.constant(0), tf.zeros([2, 3])])
    r = tf1.while_loop(lambda k: k < 10, lambda k: k + 1, [tf.constant(0)])
    return [i, acc, r]


def dfg_while(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float32", [2, 3], name="x")
    i, acc = B.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, acc * 0.5 + x),
                          [B.constant(0), B.zeros([2, 3])])
    r = B.while_loop(lambda k: k < 10, lambda k: k + 1, [B.constant(0)])
    return [i, acc, r]


def tf_while_nested(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float32, [2, 3], name="x")

    def body(i, acc):
        def ib(j, a2):
            return j + 1, a2 + x
        _, acc = tf1.while_loop(lambda j, a2: j < i, ib, [0, acc])
        return i + 1, acc
    return list(tf1.while_loop(lambda i, acc: i < n, body, [tf.constant(0), tf.zeros([2, 3])]))


def dfg_while_nested(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float32", [2, 3], name="x")

    def body(i, acc):
        def ib(j, a2):
            return j + 1, a2 + x
        _, acc = B.while_loop(lambda j, a2: j < i, ib, [0, acc])
        return i + 1, acc
    return list(B.while_loop(lambda i, acc: i < n, body, [B.constant(0), B.zeros([2, 3])]))


def tf_cond_in_while(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")

    def body(i, s):
        s2 = tf1.cond(tf.equal(i % 2, 0), lambda: s + i, lambda: s - 1)
        return i + 1, s2
    return list(tf1.while_loop(lambda i, s: i < n, body, [tf.constant(0), tf.constant(0)]))


def dfg_cond_in_while(B):
    n = B.placeholder("int32", [], name="n")

    def body(i, s):
        s2 = B.cond(B.equal(i % 2, 0), lambda: s + i, lambda: s - 1)
        return i + 1, s2
    return list(B.while_loop(lambda i, s: i < n, body, [B.constant(0), B.constant(0)]))


PROGRAMS = {
    "arith": dict(tf=tf_arith, dfg=dfg_arith, init=None,
                  feeds={"x": X23, "b": np.array([True, False])}),
    "scopes": dict(tf=tf_scopes, dfg=dfg_scopes, init=None,
                   feeds={"x": np.array([1.0, 2.0, 3.0], np.float32)}),
    "variables": dict(tf=tf_variables, dfg=dfg_variables, init="init", feeds={"x": X23}),
    "cond": dict(tf=tf_cond, dfg=dfg_cond, init=None, feeds={"x": X23, "p": np.bool_(True)}),
    "while": dict(tf=tf_while, dfg=dfg_while, init=None, feeds={"x": X23, "n": np.int32(5)}),
    "while_nested": dict(tf=tf_while_nested, dfg=dfg_while_nested, init=None,
                         feeds={"x": X23, "n": np.int32(4)}),
    "cond_in_while": dict(tf=tf_cond_in_while, dfg=dfg_cond_in_while, init=None,
                          feeds={"n": np.int32(7)}),
}


# --- gradients: (ys, xs) built from placeholders; TensorFlow's tf.gradients values recorded -----
def tf_grad_mlp(tf1, tf):
    x = tf1.placeholder(tf.float32, [4, 3], name="x")
    w = tf1.placeholder(tf.float32, [3, 5], name="w")
    b = tf1.placeholder(tf.float32, [5], name="b")
    h = tf.tanh(tf.matmul(x, w) + b)
    p = tf.nn.softmax(h)
    loss = tf.reduce_mean(p * h) + tf.reduce_sum(tf.square(tf.sigmoid(h))) \
        + tf.reduce_sum(tf.math.log(tf.exp(tf.nn.relu(h)) + 1.0))
    return [loss], [x, w, b]


def dfg_grad_mlp(B):
    x = B.placeholder("float32", [4, 3], name="x")
    w = B.placeholder("float32", [3, 5], name="w")
    b = B.placeholder("float32", [5], name="b")
    h = B.tanh(B.matmul(x, w) + b)
    p = B.softmax(h)
    loss = B.reduce_mean(p * h) + B.reduce_sum(B.square(B.sigmoid(h))) \
        + B.reduce_sum(B.log(B.exp(B.relu(h)) + 1.0))
    return [loss], [x, w, b]


def tf_grad_shapes(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    y = tf1.placeholder(tf.float32, [3], name="y")
    a = x * y - x / (y * y + 1.0)
    c = tf.concat([a, tf.maximum(x, y), tf.minimum(x, 0.2)], axis=0)
    r = tf.reshape(tf.transpose(c), [2, 9])
    z = tf.reduce_mean(r, axis=1) * tf.reduce_sum(tf.math.squared_difference(x, y), axis=0)[0:2]
    return [z, tf.sqrt(y * y + 1.0)], [x, y]


def dfg_grad_shapes(B):
    x = B.placeholder("float32", [2, 3], name="x")
    y = B.placeholder("float32", [3], name="y")
    a = x * y - x / (y * y + 1.0)
    c = B.concat([a, B.maximum(x, y), B.minimum(x, 0.2)], axis=0)
    r = B.reshape(B.transpose(c), [2, 9])
    z = B.reduce_mean(r, axis=1) * B.reduce_sum(B.squared_difference(x, y), axis=0)[0:2]
    return [z, B.sqrt(y * y + 1.0)], [x, y]


def tf_grad_conv(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
    f = tf1.placeholder(tf.float32, [3, 3, 3, 4], name="f")
    h = tf.nn.relu(tf.nn.conv2d(x, f, strides=1, padding="SAME"))
    p = tf.nn.max_pool2d(h, 2, 2, "VALID")
    q = tf.nn.avg_pool2d(p, 2, 1, "SAME")
    c = tf.nn.conv2d(q, tf.ones([2, 2, 4, 2]), strides=2, padding="VALID")
    return [tf.reduce_sum(q * q) + tf.reduce_sum(c)], [x, f]


def dfg_grad_conv(B):
    x = B.placeholder("float32", [2, 6, 6, 3], name="x")
    f = B.placeholder("float32", [3, 3, 3, 4], name="f")
    h = B.relu(B.conv2d(x, f, strides=1, padding="SAME"))
    p = B.max_pool2d(h, 2, 2, "VALID")
    q = B.avg_pool2d(p, 2, 1, "SAME")
    c = B.conv2d(q, B.ones([2, 2, 4, 2]), strides=2, padding="VALID")
    return [B.reduce_sum(q * q) + B.reduce_sum(c)], [x, f]


def tf_grad_gather(tf1, tf):
    w = tf1.placeholder(tf.float32, [5, 3], name="w")
    y = tf.gather(w * 2.0, [0, 2, 2, 4])
    z = tf.gather(w, [1, 1, 3])
    return [tf.reduce_sum(tf.tanh(y)), tf.reduce_sum(z * z)], [w]


def dfg_grad_gather(B):
    w = B.placeholder("float32", [5, 3], name="w")
    y = B.gather(w * 2.0, [0, 2, 2, 4])
    z = B.gather(w, [1, 1, 3])
    return [B.reduce_sum(B.tanh(y)), B.reduce_sum(z * z)], [w]


def tf_grad_xent(tf1, tf):
    lg = tf1.placeholder(tf.float32, [4, 5], name="logits")
    lb = tf1.placeholder(tf.float32, [4, 5], name="labels")
    a = tf.nn.softmax_cross_entropy_with_logits(labels=lb, logits=lg)
    b = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant([0, 3, 1, 4]),
                                                       logits=lg * 0.5)
    return [tf.reduce_mean(a) + tf.reduce_sum(b)], [lg, lb]


def dfg_grad_xent(B):
    lg = B.placeholder("float32", [4, 5], name="logits")
    lb = B.placeholder("float32", [4, 5], name="labels")
    a = B.softmax_cross_entropy_with_logits(labels=lb, logits=lg)
    b = B.sparse_softmax_cross_entropy_with_logits(labels=B.constant([0, 3, 1, 4]),
                                                   logits=lg * 0.5)
    return [B.reduce_mean(a) + B.reduce_sum(b)], [lg, lb]


def tf_grad_cond(tf1, tf):
    x = tf1.placeholder(tf.float32, [2, 3], name="x")
    w = tf1.placeholder(tf.float32, [3], name="w")
    p = tf1.placeholder(tf.bool, [], name="p")
    y = tf1.cond(p, lambda: tf.tanh(x) * w, lambda: x * x)
    z = tf1.cond(p, lambda: tf.reduce_sum(w), lambda: tf.constant(1.0))
    return [tf.reduce_sum(y * y) + z], [x, w]


def dfg_grad_cond(B):
    x = B.placeholder("float32", [2, 3], name="x")
    w = B.placeholder("float32", [3], name="w")
    p = B.placeholder("bool", [], name="p")
    y = B.cond(p, lambda: B.tanh(x) * w, lambda: x * x)
    z = B.cond(p, lambda: B.reduce_sum(w), lambda: B.constant(1.0))
    return [B.reduce_sum(y * y) + z], [x, w]


def tf_grad_while(tf1, tf):
    x = tf1.placeholder(tf.float32, [3], name="x")
    _, acc = tf1.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, tf.tanh(a * x) + x),
                            [tf.constant(0), tf.ones([3])])
    return [tf.reduce_sum(acc)], [x]


def dfg_grad_while(B):
    x = B.placeholder("float32", [3], name="x")
    _, acc = B.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, B.tanh(a * x) + x),
                          [B.constant(0), B.ones([3])])
    return [B.reduce_sum(acc)], [x]


def tf_grad_dynamic(tf1, tf):
    x = tf1.placeholder(tf.float32, [None, 3], name="x")
    w = tf1.placeholder(tf.float32, [3, 4], name="w")
    b = tf1.placeholder(tf.float32, [4], name="b")
    h = tf.tanh(tf.matmul(x, w) + b)
    loss = tf.reduce_mean(tf.reduce_sum(h * h, axis=1)) + tf.reduce_sum(tf.reduce_mean(h, axis=0))
    return [loss, tf.reduce_max(h)], [x, w, b]


def dfg_grad_dynamic(B):
    x = B.placeholder("float32", [None, 3], name="x")
    w = B.placeholder("float32", [3, 4], name="w")
    b = B.placeholder("float32", [4], name="b")
    h = B.tanh(B.matmul(x, w) + b)
    loss = B.reduce_mean(B.reduce_sum(h * h, axis=1)) + B.reduce_sum(B.reduce_mean(h, axis=0))
    return [loss, B.reduce_max(h)], [x, w, b]


def tf_grad_cond_in_while(tf1, tf):
    x = tf1.placeholder(tf.float32, [3], name="x")

    def body(i, a):
        a2 = tf1.cond(tf.equal(i % 2, 0), lambda: tf.tanh(a) * x, lambda: a * a * 0.5)
        return i + 1, a2
    _, acc = tf1.while_loop(lambda i, a: i < 4, body, [tf.constant(0), x])
    return [tf.reduce_sum(acc)], [x]


def dfg_grad_cond_in_while(B):
    x = B.placeholder("float32", [3], name="x")

    def body(i, a):
        a2 = B.cond(B.equal(i % 2, 0), lambda: B.tanh(a) * x, lambda: a * a * 0.5)
        return i + 1, a2
    _, acc = B.while_loop(lambda i, a: i < 4, body, [B.constant(0), x])
    return [B.reduce_sum(acc)], [x]


GRAD_PROGRAMS = {
    "grad_mlp": dict(tf=tf_grad_mlp, dfg=dfg_grad_mlp,
                     feeds={"x": RNG.normal(size=(4, 3)).astype(np.float32),
                            "w": RNG.normal(size=(3, 5)).astype(np.float32),
                            "b": RNG.normal(size=(5,)).astype(np.float32)}),
    "grad_shapes": dict(tf=tf_grad_shapes, dfg=dfg_grad_shapes,
                        feeds={"x": RNG.normal(size=(2, 3)).astype(np.float32),
                               "y": RNG.normal(size=(3,)).astype(np.float32)}),
    "grad_conv": dict(tf=tf_grad_conv, dfg=dfg_grad_conv,
                      feeds={"x": RNG.normal(size=(2, 6, 6, 3)).astype(np.float32),
                             "f": RNG.normal(size=(3, 3, 3, 4)).astype(np.float32)}),
    "grad_gather": dict(tf=tf_grad_gather, dfg=dfg_grad_gather,
                        feeds={"w": RNG.normal(size=(5, 3)).astype(np.float32)}),
    "grad_xent": dict(tf=tf_grad_xent, dfg=dfg_grad_xent,
                      feeds={"logits": RNG.normal(size=(4, 5)).astype(np.float32),
                             "labels": RNG.dirichlet(np.ones(5), size=4).astype(np.float32)}),
    "grad_cond": dict(tf=tf_grad_cond, dfg=dfg_grad_cond,
                      feeds={"x": RNG.normal(size=(2, 3)).astype(np.float32),
                             "w": RNG.normal(size=(3,)).astype(np.float32),
                             "p": np.bool_(True)}),
    "grad_cond_false": dict(tf=tf_grad_cond, dfg=dfg_grad_cond,
                            feeds={"x": RNG.normal(size=(2, 3)).astype(np.float32),
                                   "w": RNG.normal(size=(3,)).astype(np.float32),
                                   "p": np.bool_(False)}),
    "grad_dynamic": dict(tf=tf_grad_dynamic, dfg=dfg_grad_dynamic,
                         feeds={"x": RNG.normal(size=(5, 3)).astype(np.float32),
                                "w": RNG.normal(size=(3, 4)).astype(np.float32),
                                "b": RNG.normal(size=(4,)).astype(np.float32)}),
    "grad_while": dict(tf=tf_grad_while, dfg=dfg_grad_while, unroll=True,
                       feeds={"x": RNG.normal(size=(3,)).astype(np.float32)}),
    "grad_cond_in_while": dict(tf=tf_grad_cond_in_while, dfg=dfg_grad_cond_in_while,
                               unroll=True,
                               feeds={"x": RNG.normal(size=(3,)).astype(np.float32)}),
}


# --- functional control flow (cond/while_loop functional=True): built by the builder only;
# generate.py imports the builder's GraphDef into TensorFlow and records what it computes ----
def dfg_functional(B):
    x = B.placeholder("float32", [3], name="x")
    p = B.placeholder("bool", [], name="p")
    y = B.cond(p, lambda: B.tanh(x) * 2.0, lambda: x + 1.0, functional=True)
    s = B.cond(x[0] > 0.0, lambda: B.reduce_sum(x), lambda: B.constant(7.0), functional=True)
    i, a = B.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x),
                        [B.constant(0), x], functional=True)

    def outer(j, acc):
        _, acc2 = B.while_loop(lambda k, b: k < j, lambda k, b: (k + 1, b + x), [0, acc],
                               functional=True)
        return j + 1, acc2
    _, n = B.while_loop(lambda j, acc: j < 4, outer, [B.constant(0), B.zeros([3])],
                        functional=True)
    return [y, s, i, a, n]


FUNCTIONAL_PROGRAMS = {
    "functional": dict(dfg=dfg_functional,
                       feeds={"x": np.array([0.5, -1.0, 2.0], np.float32), "p": np.bool_(True)}),
}
