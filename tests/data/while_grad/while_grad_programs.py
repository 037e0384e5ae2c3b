"""While-loop gradient programs, each written twice: with TensorFlow 1.x graph APIs
(``tf_*``, run by generate.py in a TensorFlow venv, control flow v1) and with dfg's builder
(``dfg_*``, run by tests/test_while_gradients.py). Every loop's trip count is a placeholder
fed at run time. Neither side imports the other's library at module level, so this file
loads in both venvs.

Each program returns ``(loss, xs, fd)``: the scalar loss, the tensors (or variables) to
differentiate against, and the names of the tensors finite differences perturb (a variable
is perturbed through its snapshot ``<name>/read:0``). ``CASES`` lists the feeds of each run:
trip counts 0, 1 and many.
"""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(33)
X3 = RNG.normal(size=(3,)) * 0.5
P3 = RNG.normal(size=(3,))
W33 = RNG.normal(size=(3, 3)) * 0.6
H13 = RNG.normal(size=(1, 3))
X2 = RNG.normal(size=(2,)) * 0.6
SEQ = RNG.normal(size=(6, 2, 3))
WX = RNG.normal(size=(3, 4)) * 0.5
WH = RNG.normal(size=(4, 4)) * 0.4
BH = RNG.normal(size=(4,)) * 0.1
H0 = RNG.normal(size=(2, 4)) * 0.3
X5 = RNG.normal(size=(5,)) * 0.5
EMB = RNG.normal(size=(6, 3)) * 0.5


# --- pow: a loop-carried product p = p * x, n times -------------------------------------------
def tf_pow(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float64, [3], name="x")
    p0 = tf1.placeholder(tf.float64, [3], name="p0")
    _, p = tf1.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, p * x), [tf.constant(0), p0])
    return tf.reduce_sum(p), [x, p0], ["x:0", "p0:0"]


def dfg_pow(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float64", [3], name="x")
    p0 = B.placeholder("float64", [3], name="p0")
    _, p = B.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, p * x), [B.constant(0), p0])
    return B.reduce_sum(p), [x, p0], ["x:0", "p0:0"]


# --- captured variable: h = tanh(h @ W) + 0.5 h, W a ref variable read in the body -------------
def tf_captured_var(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    h0 = tf1.placeholder(tf.float64, [1, 3], name="h0")
    w = tf1.Variable(W33, name="W", use_resource=False)
    _, h = tf1.while_loop(lambda i, h: i < n,
                          lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w)) + h * 0.5),
                          [tf.constant(0), h0])
    return tf.reduce_sum(h * h), [w, h0], ["W/read:0", "h0:0"]


def dfg_captured_var(B):
    n = B.placeholder("int32", [], name="n")
    h0 = B.placeholder("float64", [1, 3], name="h0")
    w = B.variable(W33, name="W")
    _, h = B.while_loop(lambda i, h: i < n,
                        lambda i, h: (i + 1, B.tanh(B.matmul(h, w)) + h * 0.5),
                        [B.constant(0), h0])
    return B.reduce_sum(h * h), [w, h0], ["W/read:0", "h0:0"]


# --- nested: an inner loop (m trips) inside an outer loop (n trips), the inner body reading
# the outer loop variable -----------------------------------------------------------------------
def tf_nested(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    m = tf1.placeholder(tf.int32, [], name="m")
    x = tf1.placeholder(tf.float64, [2], name="x")

    def outer(i, a):
        _, b = tf1.while_loop(lambda j, b: j < m,
                              lambda j, b: (j + 1, tf.tanh(b) * a + x * 0.5), [tf.constant(0), a])
        return i + 1, b * x + a
    _, a = tf1.while_loop(lambda i, a: i < n, outer, [tf.constant(0), x])
    return tf.reduce_sum(a * a), [x], ["x:0"]


def dfg_nested(B):
    n = B.placeholder("int32", [], name="n")
    m = B.placeholder("int32", [], name="m")
    x = B.placeholder("float64", [2], name="x")

    def outer(i, a):
        _, b = B.while_loop(lambda j, b: j < m,
                            lambda j, b: (j + 1, B.tanh(b) * a + x * 0.5), [B.constant(0), a])
        return i + 1, b * x + a
    _, a = B.while_loop(lambda i, a: i < n, outer, [B.constant(0), x])
    return B.reduce_sum(a * a), [x], ["x:0"]


# --- cond inside the loop: even iterations multiply, odd ones add sin(p) ------------------------
def tf_cond(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float64, [3], name="x")

    def body(i, p):
        q = tf1.cond(tf.equal(i % 2, 0), lambda: p * x, lambda: tf.sin(p) + x)
        return i + 1, q
    _, p = tf1.while_loop(lambda i, p: i < n, body, [tf.constant(0), x])
    return tf.reduce_sum(p), [x], ["x:0"]


def dfg_cond(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float64", [3], name="x")

    def body(i, p):
        q = B.cond(B.equal(i % 2, 0), lambda: p * x, lambda: B.sin(p) + x)
        return i + 1, q
    _, p = B.while_loop(lambda i, p: i < n, body, [B.constant(0), x])
    return B.reduce_sum(p), [x], ["x:0"]


# --- rnn: h = tanh(x_t Wx + h Wh + b) over the first `length` steps of a fed sequence -----------
def tf_rnn(tf1, tf):
    length = tf1.placeholder(tf.int32, [], name="length")
    seq = tf1.placeholder(tf.float64, [None, 2, 3], name="seq")
    h0 = tf1.placeholder(tf.float64, [2, 4], name="h0")
    wx = tf1.Variable(WX, name="Wx", use_resource=False)
    wh = tf1.Variable(WH, name="Wh", use_resource=False)
    b = tf1.Variable(BH, name="b", use_resource=False)

    def body(t, h):
        xt = tf.gather(seq, t)
        return t + 1, tf.tanh(tf.matmul(xt, wx) + tf.matmul(h, wh) + b)
    _, h = tf1.while_loop(lambda t, h: t < length, body, [tf.constant(0), h0])
    return (tf.reduce_sum(h * h), [wx, wh, b, h0],
            ["Wx/read:0", "Wh/read:0", "b/read:0", "h0:0"])


def dfg_rnn(B):
    length = B.placeholder("int32", [], name="length")
    seq = B.placeholder("float64", [None, 2, 3], name="seq")
    h0 = B.placeholder("float64", [2, 4], name="h0")
    wx = B.variable(WX, name="Wx")
    wh = B.variable(WH, name="Wh")
    b = B.variable(BH, name="b")

    def body(t, h):
        xt = B.gather(seq, t)
        return t + 1, B.tanh(B.matmul(xt, wx) + B.matmul(h, wh) + b)
    _, h = B.while_loop(lambda t, h: t < length, body, [B.constant(0), h0])
    return (B.reduce_sum(h * h), [wx, wh, b, h0],
            ["Wx/read:0", "Wh/read:0", "b/read:0", "h0:0"])


# --- dynamic_shape: shapes known only at run time; an exit the loss does not use (q); a loop
# variable whose next value does not depend on itself (r; static shape: TensorFlow's zeros for
# an unknown shape there are float32 whatever the dtype, and its run fails)
def tf_dynamic_shape(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float64, [None], name="x")
    y = tf1.placeholder(tf.float64, [3], name="y")

    def body(i, p, q, r):
        return i + 1, p * x + q, tf.sin(q) * 0.5, tf.tanh(y) * 2.0
    _, p, _, r = tf1.while_loop(lambda i, p, q, r: i < n, body,
                                [tf.constant(0), x, x * 2.0, y])
    return tf.reduce_sum(p) + tf.reduce_sum(r * r), [x, y], ["x:0", "y:0"]


def dfg_dynamic_shape(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float64", [None], name="x")
    y = B.placeholder("float64", [3], name="y")

    def body(i, p, q, r):
        return i + 1, p * x + q, B.sin(q) * 0.5, B.tanh(y) * 2.0
    _, p, _, r = B.while_loop(lambda i, p, q, r: i < n, body,
                              [B.constant(0), x, x * 2.0, y])
    return B.reduce_sum(p) + B.reduce_sum(r * r), [x, y], ["x:0", "y:0"]


# --- dead_branch: a cond in the loop whose other branch does not read the loop variable
# (zeros for it come from a stack of its shape), shapes unknown -----------------------------------
def tf_dead_branch(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float64, [None], name="x")

    def body(i, p):
        return i + 1, tf1.cond(i < 2, lambda: tf.tanh(p) * x, lambda: x * 0.5 + 1.0)
    _, p = tf1.while_loop(lambda i, p: i < n, body, [tf.constant(0), x])
    return tf.reduce_sum(p * p), [x], ["x:0"]


def dfg_dead_branch(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float64", [None], name="x")

    def body(i, p):
        return i + 1, B.cond(i < 2, lambda: B.tanh(p) * x, lambda: x * 0.5 + 1.0)
    _, p = B.while_loop(lambda i, p: i < n, body, [B.constant(0), x])
    return B.reduce_sum(p * p), [x], ["x:0"]


# --- while_in_cond: the loop inside a cond branch -------------------------------------------------
def tf_while_in_cond(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    x = tf1.placeholder(tf.float64, [3], name="x")

    def loop():
        return tf1.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, tf.sin(p) * x),
                              [tf.constant(0), x])[1]
    y = tf1.cond(n > 1, loop, lambda: x * 3.0)
    return tf.reduce_sum(y), [x], ["x:0"]


def dfg_while_in_cond(B):
    n = B.placeholder("int32", [], name="n")
    x = B.placeholder("float64", [3], name="x")

    def loop():
        return B.while_loop(lambda i, p: i < n, lambda i, p: (i + 1, B.sin(p) * x),
                            [B.constant(0), x])[1]
    y = B.cond(n > 1, loop, lambda: x * 3.0)
    return B.reduce_sum(y), [x], ["x:0"]


# --- embedding: a gather from a variable in the loop (a sparse gradient); values only, the
# builder accumulates it dense
def tf_embedding(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    ids = tf1.placeholder(tf.int32, [None], name="ids")
    e = tf1.Variable(EMB, name="E", use_resource=False)

    def body(i, h):
        return i + 1, tf.tanh(h + tf.gather(e, tf.gather(ids, i)))
    _, h = tf1.while_loop(lambda i, h: i < n, body,
                          [tf.constant(0), tf.zeros([3], tf.float64)])
    return tf.reduce_sum(h * h), [e], ["E/read:0"]


def dfg_embedding(B):
    n = B.placeholder("int32", [], name="n")
    ids = B.placeholder("int32", [None], name="ids")
    e = B.variable(EMB, name="E")

    def body(i, h):
        return i + 1, B.tanh(h + B.gather(e, B.gather(ids, i)))
    _, h = B.while_loop(lambda i, h: i < n, body,
                        [B.constant(0), B.zeros([3], "float64")])
    return B.reduce_sum(h * h), [e], ["E/read:0"]


# --- functional_if: cond as TensorFlow 2 builds it (one If, branches in the library) ------------
def tf_functional_if(tf1, tf):   # generate.py builds it with control flow v2 on
    x = tf1.placeholder(tf.float64, [3], name="x")
    w = tf1.placeholder(tf.float64, [3], name="w")
    y = tf1.cond(tf.reduce_sum(x) > 0.0, lambda: tf.sin(x) * w,
                 lambda: tf.exp(x * 0.5) + w * w)
    return tf.reduce_sum(y * y), [x, w], ["x:0", "w:0"]


def dfg_functional_if(B):
    x = B.placeholder("float64", [3], name="x")
    w = B.placeholder("float64", [3], name="w")
    y = B.cond(B.reduce_sum(x) > 0.0, lambda: B.sin(x) * w,
               lambda: B.exp(x * 0.5) + w * w, functional=True)
    return B.reduce_sum(y * y), [x, w], ["x:0", "w:0"]


# --- functional_while: a while_loop as TensorFlow 2 builds it (one While), an RNN over a fed
# length, and nested functional loops
def tf_functional_rnn(tf1, tf):   # generate.py builds it with control flow v2 on
    length = tf1.placeholder(tf.int32, [], name="length")
    seq = tf1.placeholder(tf.float64, [None, 2, 3], name="seq")
    h0 = tf1.placeholder(tf.float64, [2, 4], name="h0")
    wx = tf1.placeholder(tf.float64, [3, 4], name="Wx")
    wh = tf1.placeholder(tf.float64, [4, 4], name="Wh")

    def body(t, h):
        return t + 1, tf.tanh(tf.matmul(tf.gather(seq, t), wx) + tf.matmul(h, wh))
    _, h = tf1.while_loop(lambda t, h: t < length, body, [tf.constant(0), h0])
    return tf.reduce_sum(h * h), [wx, wh, h0], ["Wx:0", "Wh:0", "h0:0"]


def dfg_functional_rnn(B):
    length = B.placeholder("int32", [], name="length")
    seq = B.placeholder("float64", [None, 2, 3], name="seq")
    h0 = B.placeholder("float64", [2, 4], name="h0")
    wx = B.placeholder("float64", [3, 4], name="Wx")
    wh = B.placeholder("float64", [4, 4], name="Wh")

    def body(t, h):
        return t + 1, B.tanh(B.matmul(B.gather(seq, t), wx) + B.matmul(h, wh))
    _, h = B.while_loop(lambda t, h: t < length, body, [B.constant(0), h0], functional=True)
    return B.reduce_sum(h * h), [wx, wh, h0], ["Wx:0", "Wh:0", "h0:0"]


def tf_functional_nested(tf1, tf):
    n = tf1.placeholder(tf.int32, [], name="n")
    m = tf1.placeholder(tf.int32, [], name="m")
    x = tf1.placeholder(tf.float64, [2], name="x")

    def outer(i, a):
        _, b = tf1.while_loop(lambda j, b: j < m,
                              lambda j, b: (j + 1, tf.tanh(b) * a + x * 0.5), [tf.constant(0), a])
        return i + 1, b * x + a
    _, a = tf1.while_loop(lambda i, a: i < n, outer, [tf.constant(0), x])
    return tf.reduce_sum(a * a), [x], ["x:0"]


def dfg_functional_nested(B):
    n = B.placeholder("int32", [], name="n")
    m = B.placeholder("int32", [], name="m")
    x = B.placeholder("float64", [2], name="x")

    def outer(i, a):
        _, b = B.while_loop(lambda j, b: j < m,
                            lambda j, b: (j + 1, B.tanh(b) * a + x * 0.5), [B.constant(0), a],
                            functional=True)
        return i + 1, b * x + a
    _, a = B.while_loop(lambda i, a: i < n, outer, [B.constant(0), x], functional=True)
    return B.reduce_sum(a * a), [x], ["x:0"]


def _runs(counts: dict, base: dict) -> list[dict]:
    return [dict(base, **c) for c in counts]


PROGRAMS = {
    "pow": dict(tf=tf_pow, dfg=dfg_pow,
                runs=_runs([{"n": 0}, {"n": 1}, {"n": 5}], {"x": X3, "p0": P3})),
    "captured_var": dict(tf=tf_captured_var, dfg=dfg_captured_var,
                         runs=_runs([{"n": 0}, {"n": 1}, {"n": 6}], {"h0": H13})),
    "nested": dict(tf=tf_nested, dfg=dfg_nested,
                   runs=_runs([{"n": 0, "m": 2}, {"n": 1, "m": 1}, {"n": 3, "m": 0},
                               {"n": 3, "m": 4}], {"x": X2})),
    "cond": dict(tf=tf_cond, dfg=dfg_cond,
                 runs=_runs([{"n": 0}, {"n": 1}, {"n": 6}], {"x": X3})),
    "rnn": dict(tf=tf_rnn, dfg=dfg_rnn,
                runs=_runs([{"length": 0}, {"length": 1}, {"length": 6}],
                           {"seq": SEQ, "h0": H0})),
    "dynamic_shape": dict(tf=tf_dynamic_shape, dfg=dfg_dynamic_shape,
                          runs=_runs([{"n": 0}, {"n": 1}, {"n": 5}], {"x": X5, "y": X3})),
    "dead_branch": dict(tf=tf_dead_branch, dfg=dfg_dead_branch,
                        runs=_runs([{"n": 0}, {"n": 1}, {"n": 5}], {"x": X5})),
    "while_in_cond": dict(tf=tf_while_in_cond, dfg=dfg_while_in_cond,
                          runs=_runs([{"n": 0}, {"n": 1}, {"n": 2}, {"n": 6}], {"x": X3})),
    "embedding": dict(tf=tf_embedding, dfg=dfg_embedding, values_only=True,
                      runs=_runs([{"n": 0}, {"n": 1}, {"n": 5}],
                                 {"ids": np.array([2, 0, 2, 5, 1], np.int32)})),
    # functional: values only (the backward If differs from TensorFlow's, see if_grad)
    "functional_if": dict(tf=tf_functional_if, dfg=dfg_functional_if, functional=True,
                          runs=[{"x": X3 + 0.5, "w": P3}, {"x": X3 - 0.5, "w": P3},
                                {"x": -X3 - 1.0, "w": P3}]),
    "functional_rnn": dict(tf=tf_functional_rnn, dfg=dfg_functional_rnn, functional=True,
                           runs=_runs([{"length": 0}, {"length": 1}, {"length": 6}],
                                      {"seq": SEQ, "h0": H0, "Wx": WX, "Wh": WH})),
    "functional_nested": dict(tf=tf_functional_nested, dfg=dfg_functional_nested,
                              functional=True,
                              runs=_runs([{"n": 0, "m": 2}, {"n": 1, "m": 1},
                                          {"n": 3, "m": 0}, {"n": 3, "m": 4}], {"x": X2})),
}
