"""Writes the TF2 conformance cases under tests/data/tf2/ (one folder per case).

Run with TensorFlow's own virtualenv, never in CI (TensorFlow is not a dependency of dfg):

    /tmp/tfvenv/bin/python tests/data/tf2/generate.py            # all cases
    /tmp/tfvenv/bin/python tests/data/tf2/generate.py tf2_while  # only the named cases

The format is exactly that of tests/data/conformance (see its README.md): graph.pbtxt (a text
GraphDef, with its function library), case.json and .npy feeds/expected values. The graphs are
TensorFlow 2 graphs: built in a tf.Graph with control flow v2 on (functional If/While/Case ops
and library functions), by calling tf.functions inside a graph (PartitionedCall /
StatefulPartitionedCall), or Keras models frozen with convert_variables_to_constants_v2.
Expected values are TensorFlow's outputs from running the very GraphDef written: it is imported
into a fresh tf.Graph and run step by step in one tf.compat.v1.Session without Grappler; the
same steps are run again with a default (optimizing) session, which must agree.

Reruns give the same files, except the lowered Keras graphs: TensorFlow's lowering (inside
convert_variables_to_constants_v2) names and counts its helper nodes differently from run to
run; their expected values do not change.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

# The ops this corpus is about: function calls, functional control flow and TensorLists.
FUNCTIONAL_OPS = {
    "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf", "Case", "StatelessCase",
    "While", "StatelessWhile",
}

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # Python's set order shows up in the traced functions' graphs: fix it for stable output.
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN off: plain Eigen kernels, the bits the conformance files were made with.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402

tf.compat.v1.enable_control_flow_v2()

CASES: dict[str, Callable[[], dict[str, Any]]] = {}


def case(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    CASES["tf2_" + fn.__name__] = fn
    return fn


def graph_of(build: Callable[[], None]) -> Any:
    g = tf.Graph()
    with g.as_default():
        build()
    return g.as_graph_def()


def step(feed: dict[str, Any] | None = None, fetch: list[str] | None = None,
         target: list[str] | None = None) -> dict[str, Any]:
    return {"feed": feed or {}, "fetch": fetch or [], "target": target or []}


def f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def i32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int32)


def ph(dtype: Any, shape: Any, name: str) -> Any:
    return tf.compat.v1.placeholder(dtype, shape, name=name)


# =============================================================================================
# function calls
# =============================================================================================


@case
def partitioned_call() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [None, 3], "x")

        @tf.function
        def affine(a: Any) -> Any:
            w = tf.constant([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.25]])
            y = tf.matmul(a, w) + tf.constant([0.5, -0.5])
            return tf.nn.relu(y), tf.reduce_sum(a, axis=1)

        y, s = affine(x)
        tf.identity(y, name="y")
        tf.identity(s, name="s")

    rng = np.random.default_rng(1)
    return dict(
        description="A stateless tf.function called in a graph (PartitionedCall) with two "
                    "outputs and an unknown batch size.",
        features=["multi-step"],
        graph=graph_of(build),
        steps=[step({"x:0": f32(rng.normal(size=(4, 3)))}, ["y:0", "s:0"]),
               step({"x:0": f32(rng.normal(size=(1, 3)))}, ["y:0", "s:0"])])


@case
def stateful_partitioned_call() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [2], "x")
        v = tf.Variable([1.0, 2.0], name="v")
        tf.compat.v1.variables_initializer([v], name="init")

        @tf.function
        def bump(a: Any) -> Any:
            v.assign_add(a)
            return v.read_value() * 2.0

        tf.identity(bump(x), name="doubled")
        tf.identity(v.read_value(), name="v_value")

    return dict(
        description="A tf.function that assigns a resource variable (StatefulPartitionedCall) "
                    "run in several steps: the variable carries across steps.",
        features=["variables", "resource-variables", "multi-step"],
        graph=graph_of(build),
        steps=[step(target=["init"]),
               step({"x:0": f32([0.5, -1.0])}, ["doubled:0"]),
               step({"x:0": f32([2.0, 3.0])}, ["doubled:0"]),
               step(fetch=["v_value:0"])])


@case
def call_in_call() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [3], "x")

        @tf.function
        def inner(a: Any, k: Any) -> Any:
            return a * k + 1.0

        @tf.function
        def middle(a: Any) -> Any:
            return inner(a, 2.0) - inner(a, -1.0)

        @tf.function
        def outer(a: Any) -> Any:
            return middle(a) * middle(a + 1.0)

        tf.identity(outer(x), name="y")

    return dict(
        description="Calls inside calls: a tf.function calling one that calls another, three "
                    "levels of PartitionedCall.",
        features=["nested-call"],
        graph=graph_of(build),
        steps=[step({"x:0": f32([1.0, -2.0, 0.5])}, ["y:0"])])


@case
def call_by_name() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [2, 2], "x")
        y = ph(tf.int32, [], "k")

        @tf.function
        def poly(a: Any, k: Any) -> Any:
            return a * a + tf.cast(k, tf.float32), tf.shape(a) * k

        p, q = poly(x, y)
        tf.identity(p, name="p")
        tf.identity(q, name="q")

    gd = graph_of(build)
    # Turn the PartitionedCall into a node whose op is the library function's name: the form
    # TensorFlow 1 graphs used for Defun calls. TensorFlow runs it as a call of the function.
    for n in gd.node:
        if n.op == "PartitionedCall":
            fname = n.attr["f"].func.name
            n.op = fname
            for a in list(n.attr):
                del n.attr[a]
    return dict(
        description="A node whose op is a library function's name (a PartitionedCall rewritten "
                    "by the generator), with two inputs and two outputs.",
        features=["call-by-name"],
        graph=gd,
        steps=[step({"x:0": f32([[1, 2], [3, -4]]), "k:0": i32(3)}, ["p:0", "q:0"])])


# =============================================================================================
# conditionals
# =============================================================================================


@case
def stateless_if() -> dict[str, Any]:
    def build() -> None:
        p = ph(tf.bool, [], "p")
        x = ph(tf.float32, [3], "x")
        n = ph(tf.int32, [], "n")
        r = tf.cond(p, lambda: (x * 2.0, n + 1), lambda: (-x, n * 10))
        tf.identity(r[0], name="fx")
        tf.identity(r[1], name="fn")

    x = f32([1.0, -2.0, 3.5])
    return dict(
        description="tf.cond with stateless branches (StatelessIf) returning a float and an int, "
                    "run with each predicate.",
        features=["cond", "multi-step"],
        graph=graph_of(build),
        steps=[step({"p:0": np.array(True), "x:0": x, "n:0": i32(4)}, ["fx:0", "fn:0"]),
               step({"p:0": np.array(False), "x:0": x, "n:0": i32(4)}, ["fx:0", "fn:0"])])


@case
def if_stateful() -> dict[str, Any]:
    def build() -> None:
        p = ph(tf.bool, [], "p")
        x = ph(tf.float32, [], "x")
        v = tf.Variable(10.0, name="v")
        tf.compat.v1.variables_initializer([v], name="init")

        def true_fn() -> Any:
            with tf.control_dependencies([v.assign_add(x)]):
                return v.read_value() + 0.0

        def false_fn() -> Any:
            with tf.control_dependencies([v.assign_sub(1.0)]):
                return v.read_value() * 2.0

        tf.identity(tf.cond(p, true_fn, false_fn), name="r")
        tf.identity(v.read_value(), name="v_value")

    return dict(
        description="tf.cond whose branches assign a resource variable (If): each step takes one "
                    "branch and the variable carries across steps.",
        features=["cond", "variables", "resource-variables", "multi-step"],
        graph=graph_of(build),
        steps=[step(target=["init"]),
               step({"p:0": np.array(True), "x:0": f32(2.5)}, ["r:0"]),
               step({"p:0": np.array(False), "x:0": f32(2.5)}, ["r:0"]),
               step({"p:0": np.array(True), "x:0": f32(-4.0)}, ["r:0"]),
               step(fetch=["v_value:0"])])


@case
def stateless_case() -> dict[str, Any]:
    def build() -> None:
        i = ph(tf.int32, [], "i")
        x = ph(tf.float32, [2], "x")
        r = tf.switch_case(i, [lambda: x + 1.0, lambda: x * x, lambda: -x])
        tf.identity(r, name="r")

    x = f32([1.5, -2.0])
    return dict(
        description="tf.switch_case with stateless branches (StatelessCase) for each index, and "
                    "out-of-range indices 5 and -3, which run the last branch.",
        features=["case", "multi-step"],
        graph=graph_of(build),
        steps=[step({"i:0": i32(k), "x:0": x}, ["r:0"]) for k in (0, 1, 2, 5, -3)])


@case
def case_stateful() -> dict[str, Any]:
    def build() -> None:
        i = ph(tf.int32, [], "i")
        v = tf.Variable(0, name="v")
        tf.compat.v1.variables_initializer([v], name="init")

        def add(k: int) -> Callable[[], Any]:
            def fn() -> Any:
                with tf.control_dependencies([v.assign_add(k)]):
                    return v.read_value() * 1
            return fn

        r = tf.switch_case(i, [add(1), add(10), add(100)])
        tf.identity(r, name="r")
        tf.identity(v.read_value(), name="v_value")

    return dict(
        description="tf.switch_case whose branches add 1, 10 or 100 to a resource variable "
                    "(Case); index 7 is out of range and runs the last branch.",
        features=["case", "variables", "resource-variables", "multi-step"],
        graph=graph_of(build),
        steps=[step(target=["init"])]
              + [step({"i:0": i32(k)}, ["r:0"]) for k in (0, 1, 2, 7, 1)]
              + [step(fetch=["v_value:0"])])


# =============================================================================================
# loops
# =============================================================================================


@case
def stateless_while() -> dict[str, Any]:
    def build() -> None:
        n = ph(tf.int32, [], "n")
        x = ph(tf.float32, [3], "x")
        r = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 0.5 + 1.0), (0, x))
        tf.identity(r[0], name="i_out")
        tf.identity(r[1], name="a_out")

    x = f32([4.0, -8.0, 0.0])
    return dict(
        description="tf.while_loop with a stateless body (StatelessWhile) running a fed number "
                    "of iterations, including zero.",
        features=["while", "multi-step"],
        graph=graph_of(build),
        steps=[step({"n:0": i32(k), "x:0": x}, ["i_out:0", "a_out:0"]) for k in (5, 0, 1)])


@case
def while_stateful() -> dict[str, Any]:
    def build() -> None:
        n = ph(tf.int32, [], "n")
        v = tf.Variable(0.0, name="acc")
        tf.compat.v1.variables_initializer([v], name="init")

        def body(i: Any) -> Any:
            with tf.control_dependencies([v.assign_add(tf.cast(i, tf.float32))]):
                return i + 1

        r = tf.while_loop(lambda i: i < n, body, [tf.constant(0)])
        tf.identity(r[0], name="count")
        tf.identity(v.read_value(), name="acc_value")

    return dict(
        description="A while loop whose body adds the counter to a resource variable "
                    "(AssignAddVariableOp per iteration, While); the sum carries across steps.",
        features=["while", "variables", "resource-variables", "multi-step"],
        graph=graph_of(build),
        steps=[step(target=["init"]),
               step({"n:0": i32(4)}, ["count:0"]),
               step(fetch=["acc_value:0"]),
               step({"n:0": i32(3)}, ["count:0"]),
               step(fetch=["acc_value:0"])])


@case
def nested_while() -> dict[str, Any]:
    def build() -> None:
        n = ph(tf.int32, [], "n")

        def outer_body(i: Any, total: Any) -> Any:
            j, s = tf.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + i * j),
                                 (0, total))
            return i + 1, s

        r = tf.while_loop(lambda i, t: i < n, outer_body, (0, tf.constant(0)))
        tf.identity(r[1], name="total")

    return dict(
        description="A while loop in a while loop: the inner bound is the outer counter and the "
                    "inner body reads it.",
        features=["while", "nested-while", "multi-step"],
        graph=graph_of(build),
        steps=[step({"n:0": i32(k)}, ["total:0"]) for k in (5, 0, 3)])


@case
def if_in_while() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.int64, [], "x")

        def body(v: Any, steps: Any) -> Any:
            v = tf.cond(tf.equal(v % 2, 0), lambda: v // 2, lambda: 3 * v + 1)
            return v, steps + 1

        r = tf.while_loop(lambda v, s: v > 1, body, (x, tf.constant(0)))
        tf.identity(r[1], name="steps")

    return dict(
        description="Collatz: a while loop whose body is a tf.cond (StatelessIf inside "
                    "StatelessWhile), int64, data-dependent trip count.",
        features=["while", "cond", "nested-control-flow", "multi-step"],
        graph=graph_of(build),
        steps=[step({"x:0": np.int64(k)}, ["steps:0"]) for k in (27, 1, 6)])


@case
def loop_dtypes() -> dict[str, Any]:
    def build() -> None:
        n = ph(tf.int32, [], "n")

        def body(i: Any, f: Any, big: Any, flag: Any, s: Any) -> Any:
            return (i + 1, f * 1.5 - 0.25, big * 3 + tf.cast(i, tf.int64),
                    tf.logical_not(flag), tf.strings.join([s, tf.strings.as_string(i)], "-"))

        r = tf.while_loop(lambda i, *_: i < n, body,
                          (tf.constant(0), tf.constant([1.0, -2.0]),
                           tf.constant(2**33, tf.int64), tf.constant(True), tf.constant("s")))
        tf.identity(r[0], name="i_out")
        tf.identity(r[1], name="f_out")
        tf.identity(r[2], name="big_out")
        tf.identity(r[3], name="flag_out")
        # Strings are compared in the graph: fetching them would need object arrays.
        tf.identity(tf.strings.length(r[4]), name="s_len")
        tf.identity(tf.equal(r[4], "s-0-1-2-3-4"), name="s_is_expected")

    return dict(
        description="Loop-carried values of five dtypes (int32 counter, float32 vector, int64 "
                    "beyond 2**32, bool, string built with StringJoin); strings checked in-graph.",
        features=["while", "dtypes", "multi-step"],
        graph=graph_of(build),
        steps=[step({"n:0": i32(k)},
                    ["i_out:0", "f_out:0", "big_out:0", "flag_out:0", "s_len:0",
                     "s_is_expected:0"]) for k in (5, 0)])


@case
def loop_shape_invariants() -> dict[str, Any]:
    def build() -> None:
        n = ph(tf.int32, [], "n")

        def body(i: Any, v: Any, m: Any) -> Any:
            v = tf.concat([v, tf.fill([i + 1], tf.cast(i, tf.float32))], 0)
            m = tf.concat([m, tf.reshape(tf.cast(tf.range(3 * i, 3 * i + 3), tf.int32),
                                         [1, 3])], 0)
            return i + 1, v, m

        r = tf.while_loop(lambda i, v, m: i < n, body,
                          (tf.constant(0), tf.zeros([1]), tf.zeros([0, 3], tf.int32)),
                          shape_invariants=(tf.TensorShape([]), tf.TensorShape(None),
                                            tf.TensorShape([None, 3])))
        tf.identity(r[1], name="vec")
        tf.identity(r[2], name="mat")

    return dict(
        description="Loop-carried tensors whose shapes change every iteration (shape_invariants "
                    "TensorShape(None) and [None, 3]): a vector and a matrix grown by concat.",
        features=["while", "shape-invariants", "multi-step"],
        graph=graph_of(build),
        steps=[step({"n:0": i32(k)}, ["vec:0", "mat:0"]) for k in (4, 0)])


@case
def parallel_iterations() -> dict[str, Any]:
    def build() -> None:
        h0 = ph(tf.float32, [2, 3], "h0")
        rng = np.random.default_rng(7)
        w = tf.constant(rng.normal(size=(3, 3)).astype(np.float32) * 0.5, name="w")
        b = tf.constant(rng.normal(size=(3,)).astype(np.float32), name="b")

        def body(i: Any, h: Any) -> Any:
            return i + 1, tf.tanh(tf.matmul(h, w) + b)

        r4 = tf.while_loop(lambda i, h: i < 8, body, (0, h0), parallel_iterations=4)
        r1 = tf.while_loop(lambda i, h: i < 8, body, (0, h0), parallel_iterations=1)
        tf.identity(r4[1], name="h_p4")
        tf.identity(r1[1], name="h_p1")

    rng = np.random.default_rng(8)
    return dict(
        description="The same 8-step recurrence h = tanh(h W + b) as two loops with "
                    "parallel_iterations 4 and 1 (results never depend on it).",
        features=["while", "loop-invariant", "matmul"],
        graph=graph_of(build),
        steps=[step({"h0:0": f32(rng.normal(size=(2, 3)))}, ["h_p4:0", "h_p1:0"])])


# =============================================================================================
# errors in function bodies
# =============================================================================================


@case
def error_assert() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [3], "x")
        p = ph(tf.bool, [], "p")

        def checked() -> Any:
            a = tf.debugging.Assert(tf.reduce_all(x > 0), [x], name="positive")
            with tf.control_dependencies([a]):
                return tf.sqrt(x)

        tf.identity(tf.cond(p, checked, lambda: x * 0.0), name="y")
        n = ph(tf.int32, [], "n")

        def body(i: Any, s: Any) -> Any:
            a = tf.debugging.Assert(i < 3, [i], name="small")
            with tf.control_dependencies([a]):
                return i + 1, s + tf.cast(i, tf.float32)

        tf.identity(tf.while_loop(lambda i, s: i < n, body, (0, 0.0))[1], name="loop_sum")

    good = f32([1.0, 4.0, 9.0])
    bad = f32([1.0, -4.0, 9.0])
    t, f = np.array(True), np.array(False)
    return dict(
        description="tf.debugging.Assert inside a cond branch (If) and inside a loop body "
                    "(While): pass, fail, pass, untaken branch, loop pass, loop fail, loop pass.",
        features=["error", "assert", "cond", "while", "multi-step"],
        graph=graph_of(build),
        steps=[step({"x:0": good, "p:0": t}, ["y:0"]),
               step({"x:0": bad, "p:0": t}, ["y:0"]),
               step({"x:0": good, "p:0": t}, ["y:0"]),
               step({"x:0": bad, "p:0": f}, ["y:0"]),
               step({"n:0": i32(3)}, ["loop_sum:0"]),
               step({"n:0": i32(5)}, ["loop_sum:0"]),
               step({"n:0": i32(2)}, ["loop_sum:0"])])


@case
def error_int_div_zero() -> dict[str, Any]:
    def build() -> None:
        a = ph(tf.int32, [3], "a")
        b = ph(tf.int32, [3], "b")

        @tf.function
        def divmod_(x: Any, y: Any) -> Any:
            return tf.math.floordiv(x, y), tf.math.floormod(x, y)

        q, r = divmod_(a, b)
        tf.identity(q, name="q")
        tf.identity(r, name="r")

    a = i32([7, -7, 9])
    return dict(
        description="Integer FloorDiv/FloorMod by zero inside a tf.function (PartitionedCall) "
                    "fails; the session keeps working for the following step.",
        features=["error", "int-div", "multi-step"],
        graph=graph_of(build),
        steps=[step({"a:0": a, "b:0": i32([2, 3, -4])}, ["q:0", "r:0"]),
               step({"a:0": a, "b:0": i32([2, 0, -4])}, ["q:0", "r:0"]),
               step({"a:0": a, "b:0": i32([-2, 5, 1])}, ["q:0", "r:0"])])


# =============================================================================================
# TensorList users
# =============================================================================================


@case
def map_fn() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [None, 3], "x")
        y = tf.map_fn(lambda r: (tf.reduce_sum(r * r), tf.argmax(r, output_type=tf.int32)), x,
                      fn_output_signature=(tf.float32, tf.int32))
        tf.identity(y[0], name="sq")
        tf.identity(y[1], name="am")

    rng = np.random.default_rng(3)
    return dict(
        description="tf.map_fn over the rows of a matrix with float and int32 outputs (a "
                    "While over TensorLists).",
        features=["map-fn", "while", "multi-step"],
        graph=graph_of(build),
        steps=[step({"x:0": f32(rng.normal(size=(4, 3)))}, ["sq:0", "am:0"]),
               step({"x:0": f32(rng.normal(size=(1, 3)))}, ["sq:0", "am:0"])])


@case
def scan() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [5, 2], "x")
        tf.identity(tf.scan(lambda a, r: a + r, x), name="cumsum")
        tf.identity(tf.scan(lambda a, r: a * 0.5 + r, x, initializer=tf.ones([2])),
                    name="decayed")
        tf.identity(tf.scan(tf.maximum, x, reverse=True), name="revmax")

    rng = np.random.default_rng(4)
    return dict(
        description="tf.scan: running sum, decayed sum with an initializer and a reversed "
                    "running maximum (TensorLists in While loops).",
        features=["scan", "while"],
        graph=graph_of(build),
        steps=[step({"x:0": f32(rng.normal(size=(5, 2)))}, ["cumsum:0", "decayed:0",
                                                             "revmax:0"])])


@case
def tensor_array() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [4, 3], "x")
        n = ph(tf.int32, [], "n")
        src = tf.TensorArray(tf.float32, size=4).unstack(x)
        out = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

        def body(i: Any, acc: Any, ta: Any) -> Any:
            row = src.read(i % 4)
            acc = acc + row
            return i + 1, acc, ta.write(i, acc * tf.cast(i, tf.float32))

        _, acc, ta = tf.while_loop(lambda i, a, t: i < n, body, (0, tf.zeros([3]), out))
        tf.identity(ta.stack(), name="stacked")
        tf.identity(ta.gather([0, 2]), name="gathered")
        tf.identity(ta.size(), name="size")
        tf.identity(acc, name="acc")

    rng = np.random.default_rng(5)
    return dict(
        description="TensorArrays under control flow v2: unstack in, read/write in a While with "
                    "a dynamic-size array, stack/gather/size out.",
        features=["tensor-array", "while"],
        graph=graph_of(build),
        steps=[step({"x:0": f32(rng.normal(size=(4, 3))), "n:0": i32(6)},
                    ["stacked:0", "gathered:0", "size:0", "acc:0"])])


@case
def while_gradients() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [3], "x")
        n = ph(tf.int32, [], "n")
        _, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, tf.sin(y) * x), (0, x))
        loss = tf.reduce_sum(y * y)
        tf.identity(loss, name="loss")
        tf.identity(tf.gradients(loss, x)[0], name="dx")

    return dict(
        description="tf.gradients of a while loop result with respect to its input under control "
                    "flow v2: TensorList accumulators and a gradient While.",
        features=["gradients", "while", "multi-step"],
        rtol=1e-4, atol=1e-5,
        graph=graph_of(build),
        steps=[step({"x:0": f32([0.5, -1.2, 2.0]), "n:0": i32(k)}, ["loss:0", "dx:0"])
               for k in (4, 1)])


@case
def v1_loop_state() -> dict[str, Any]:
    def build() -> None:
        # control flow v1 (Switch/Merge/Enter), as TF1 wrote graphs
        tf.compat.v1.disable_control_flow_v2()
        try:
            v = tf.compat.v1.Variable(1.0, use_resource=False, name="v")

            def body(i: Any, a: Any) -> Any:
                with tf.control_dependencies([tf.compat.v1.assign_add(v, 1.0)]):
                    return i + 1, a + tf.identity(v)   # v/read, entered into the loop

            _, total = tf.compat.v1.while_loop(lambda i, a: i < 3, body, [0, 0.0],
                                               parallel_iterations=1)
            tf.identity(total, name="sum")
            x = ph(tf.float32, [2], "x")

            def body2(i: Any, a: Any) -> Any:
                ta = tf.TensorArray(tf.float32, size=1).write(0, a * 2.0)
                return i + 1, ta.read(0)

            _, y = tf.compat.v1.while_loop(lambda i, a: i < 2, body2, [0, x])
            tf.identity(tf.gradients(tf.reduce_sum(y * y), x)[0], name="dx")
            tf.compat.v1.global_variables_initializer()
        finally:
            tf.compat.v1.enable_control_flow_v2()

    return dict(
        description="Control flow v1: a loop that updates a ref variable and reads it through "
                    "v/read entered into the loop (the reads see the updates: the buffer is "
                    "shared), run twice; the gradient of a loop whose body makes a "
                    "TensorArray (its handles saved on a stack for the gradient).",
        features=["while", "gradients", "variables", "multi-step"],
        rtol=1e-6, atol=1e-6,
        graph=graph_of(build),
        steps=[step(target=["init"]),
               step({"x:0": f32([0.5, -1.5])}, ["sum:0", "dx:0"]),
               step({"x:0": f32([2.0, 1.0])}, ["sum:0", "dx:0"])])


@case
def legacy_placeholder_shape() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, None, "x")
        tf.identity(x * 2.0, name="y")
        tf.identity(tf.shape(x), name="s")

    gd = graph_of(build)
    # a frozen graph as TensorFlow wrote them before GraphDef version 22: `shape {}` on a
    # Placeholder meant "unknown", and such graphs are fed any shape
    for n in gd.node:
        if n.op == "Placeholder":
            n.attr["shape"].shape.Clear()
    gd.versions.producer = 21
    rng = np.random.default_rng(23)
    return dict(
        description="An old graph (producer 21) whose Placeholder has the scalar shape attr "
                    "that meant an unknown shape before version 22: fed a matrix, a vector "
                    "and a scalar (nothing folds its Shape).",
        features=["legacy", "multi-step"],
        graph=gd,
        steps=[step({"x:0": f32(rng.normal(size=(2, 3)))}, ["y:0", "s:0"]),
               step({"x:0": f32([1.5, -2.0])}, ["y:0", "s:0"]),
               step({"x:0": f32(4.0)}, ["y:0", "s:0"])])


@case
def while_cond_gradients() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [2], "x")
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.5, 0.5]),
                                      use_resource=True)

        def body(i: Any, h: Any) -> Any:
            return i + 1, tf.cond(tf.reduce_sum(h) > 0, lambda: tf.tanh(h * w),
                                  lambda: tf.abs(h) ** w)

        _, hf = tf.while_loop(lambda i, h: i < 3, body, [0, x])
        y = tf.reduce_sum(hf)
        tf.identity(tf.gradients(y, x)[0], name="dx")
        # a second gradient of the same loop: it sees the loop rewritten by the first
        dx2, dw = tf.gradients(y * 2.0, [x, w])
        tf.identity(dx2, name="dx2")
        tf.identity(dw, name="dw")
        tf.compat.v1.global_variables_initializer()

    return dict(
        description="tf.gradients, twice, of a while loop whose body is a tf.cond: the cond's "
                    "intermediates reach the gradient as Optionals accumulated in TensorLists "
                    "(ZerosLike and AddN of lists of Optionals).",
        features=["gradients", "while", "cond", "multi-step"],
        rtol=1e-5, atol=1e-6,
        graph=graph_of(build),
        steps=[step(target=["init"]),
               step({"x:0": f32([0.5, -0.2])}, ["dx:0", "dx2:0", "dw:0"]),
               step({"x:0": f32([-0.5, -0.2])}, ["dx:0", "dx2:0", "dw:0"])])


@case
def tape_gradients() -> dict[str, Any]:
    """GradientTape inside tf.functions: cond_v2's gradient gets the forward branch's
    intermediates through Optionals (OptionalFromValue / OptionalNone / OptionalGetValue), and
    a persistent tape over tf.map_fn adds the gradient TensorLists with AddN."""

    @tf.function
    def cond_grad(x: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reduce_sum(tf.sin(x) * x),
                        lambda: tf.reduce_sum(tf.exp(x) * x))
        return tape.gradient(y, x)

    @tf.function
    def cond_grad_none(x: Any) -> Any:
        # the false branch keeps no intermediates: it answers the true one's with OptionalNone
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reduce_sum(tf.sin(x) * x),
                        lambda: tf.reduce_sum(x))
        return tape.gradient(y, x)

    @tf.function
    def map_grad(x: Any) -> Any:
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            m = tf.map_fn(lambda e: e ** 3, x)
        return tape.gradient(m, x)

    def build() -> None:
        x = ph(tf.float32, [4], "x")
        tf.identity(cond_grad(x), name="dcond")
        tf.identity(cond_grad_none(x), name="dcond_none")
        tf.identity(map_grad(x), name="dmap")

    return dict(
        description="GradientTape in tf.functions: the gradient of a tf.cond (its branch "
                    "intermediates passed as Optionals), both branches, and a persistent "
                    "tape's gradient of tf.map_fn (AddN of TensorLists).",
        features=["gradients", "cond", "map-fn", "function-call", "multi-step"],
        rtol=1e-5, atol=1e-6,
        graph=graph_of(build),
        steps=[step({"x:0": f32([0.5, -1.2, 2.0, 0.3])}, ["dcond:0", "dcond_none:0", "dmap:0"]),
               step({"x:0": f32([-0.5, -1.2, 0.4, -0.3])},
                    ["dcond:0", "dcond_none:0", "dmap:0"])])


# =============================================================================================
# placeholders in untaken branches
# =============================================================================================


@case
def v1_untaken_branch_placeholder() -> dict[str, Any]:
    def build() -> None:
        p = ph(tf.bool, [], "p")
        x = ph(tf.float32, [2], "x")

        def true_fn() -> Any:
            only_here = ph(tf.float32, [2], "only_here")
            return x + only_here

        tf.identity(tf.cond(p, true_fn, lambda: x * 3.0, name="branch"), name="y")

    tf.compat.v1.disable_control_flow_v2()
    try:
        gd = graph_of(build)
    finally:
        tf.compat.v1.enable_control_flow_v2()
    x = f32([1.0, 2.0])
    return dict(
        description="Control flow v1: a Placeholder made inside the true branch of a tf.cond is "
                    "not fed; the false branch runs fine, the true branch fails, then feeding it "
                    "works.",
        features=["cond", "error", "placeholder", "multi-step"],
        graph=gd,
        steps=[step({"p:0": np.array(False), "x:0": x}, ["y:0"]),
               step({"p:0": np.array(True), "x:0": x}, ["y:0"]),
               step({"p:0": np.array(True), "x:0": x, "branch/only_here:0": f32([10.0, 20.0])},
                    ["y:0"]),
               step({"p:0": np.array(False), "x:0": x}, ["y:0"])])


@case
def v2_untaken_branch_placeholder() -> dict[str, Any]:
    def build() -> None:
        p = ph(tf.bool, [], "p")
        x = ph(tf.float32, [2], "x")
        z = ph(tf.float32, [2], "z")
        tf.identity(tf.cond(p, lambda: x + z, lambda: x * 3.0), name="y")

    x = f32([1.0, 2.0])
    return dict(
        description="Control flow v2: a Placeholder read only by the true branch of an If is an "
                    "input of the If, so leaving it unfed fails whichever branch is taken.",
        features=["cond", "error", "placeholder", "multi-step"],
        graph=graph_of(build),
        steps=[step({"p:0": np.array(False), "x:0": x}, ["y:0"]),
               step({"p:0": np.array(True), "x:0": x}, ["y:0"]),
               step({"p:0": np.array(True), "x:0": x, "z:0": f32([10.0, 20.0])}, ["y:0"]),
               step({"p:0": np.array(False), "x:0": x, "z:0": f32([10.0, 20.0])}, ["y:0"])])


# =============================================================================================
# Keras recurrent layers, frozen functional and lowered
# =============================================================================================


def keras_case(kind: str, lowered: bool) -> dict[str, Any]:
    import keras
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    keras.utils.set_random_seed(11)
    layers = {
        "lstm": lambda: keras.layers.LSTM(6, return_sequences=True),
        "gru": lambda: keras.layers.GRU(5),
        "simple_rnn": lambda: keras.layers.SimpleRNN(4, return_sequences=True),
        "bidirectional_lstm": lambda: keras.layers.Bidirectional(keras.layers.LSTM(4)),
    }
    model = keras.Sequential([keras.Input((5, 3), batch_size=2), layers[kind]()])
    fn = tf.function(lambda x: model(x)).get_concrete_function(
        tf.TensorSpec([2, 5, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(fn, lower_control_flow=lowered)
    gd = frozen.graph.as_graph_def()
    inp = frozen.inputs[0].name
    out = frozen.outputs[0].name
    rng = np.random.default_rng(12)
    form = ("lowered to v1 control flow (Switch/Merge/Enter/Exit, TensorLists in v1 loops)"
            if lowered else "functional (While and library functions kept)")
    return dict(
        description=f"A tiny Keras {kind} layer (batch 2, 5 steps, 3 features) frozen with "
                    f"convert_variables_to_constants_v2, {form}.",
        features=["keras", "frozen", "rnn", "multi-step"] + (["lowered"] if lowered else []),
        rtol=1e-4, atol=1e-5,
        graph=gd,
        steps=[step({inp: f32(rng.normal(size=(2, 5, 3)))}, [out]),
               step({inp: f32(rng.normal(size=(2, 5, 3)))}, [out])])


@case
def frozen_switch_case() -> dict[str, Any]:
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    @tf.function(input_signature=[tf.TensorSpec([], tf.int32, name="i"),
                                  tf.TensorSpec([3], tf.float32, name="x")])
    def fn(i, x):
        r = tf.switch_case(i, [lambda: x + 1.0, lambda: x * x, lambda: -x, lambda: x / 2.0])
        return tf.reduce_sum(r) * tf.cast(i, tf.float32)

    # TensorFlow's own lowering turns the Case into a _SwitchN per branch input
    frozen = convert_variables_to_constants_v2(fn.get_concrete_function(),
                                               lower_control_flow=True)
    gd = frozen.graph.as_graph_def()
    assert "_SwitchN" in {n.op for n in gd.node}
    i_name, x_name = (t.name for t in frozen.inputs)
    out = frozen.outputs[0].name
    x = f32([1.5, -2.0, 4.0])
    return dict(
        description="A tf.function with a 4-branch tf.switch_case frozen with "
                    "convert_variables_to_constants_v2(lower_control_flow=True): TensorFlow's "
                    "lowering writes _SwitchN nodes. Each index, and out-of-range 9 and -2 "
                    "(the last branch).",
        features=["case", "frozen", "lowered", "multi-step"],
        graph=gd,
        steps=[step({i_name: i32(k), x_name: x}, [out]) for k in (0, 1, 2, 3, 9, -2)])


@case
def bfloat16_ops() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float32, [3, 4], "x")
        b = tf.cast(x, tf.bfloat16)
        y = tf.nn.softmax(b * b + tf.constant(1.5, tf.bfloat16))
        w = tf.matmul(b, tf.transpose(b))
        z = tf.reduce_sum(tf.nn.relu(b - tf.constant(0.25, tf.bfloat16)), axis=0)
        tf.identity(tf.cast(y, tf.float32), name="y")
        tf.identity(tf.cast(w, tf.float32), name="w")
        tf.identity(tf.cast(z, tf.float32), name="z")

    rng = np.random.default_rng(21)
    return dict(
        description="bfloat16 arithmetic (Cast, Mul, AddV2, Softmax, MatMul, Relu, Sum in "
                    "bfloat16, each op rounding its result), outputs cast back to float32.",
        features=["bfloat16", "multi-step"],
        # one bfloat16 ulp (2^-8 relative): TF's bfloat16 Softmax rounds inside (exp, sum,
        # reciprocal each in bfloat16), dfg rounds its float32 result once
        rtol=8e-3, atol=1e-3,
        graph=graph_of(build),
        steps=[step({"x:0": f32(rng.normal(size=(3, 4)))}, ["y:0", "w:0", "z:0"])
               for _ in range(2)])


@case
def keras_mixed_bfloat16() -> dict[str, Any]:
    import keras
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    keras.utils.set_random_seed(5)
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inp = keras.Input((8, 8, 3), batch_size=2)
        h = keras.layers.Conv2D(4, 3, activation="relu")(inp)
        h = keras.layers.GlobalAveragePooling2D()(h)
        h = keras.layers.Dense(6, activation="gelu")(h)
        h = keras.layers.LayerNormalization()(h)
        out = keras.layers.Dense(3, dtype="float32")(h)
        model = keras.Model(inp, out)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([2, 8, 8, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(fn)
    rng = np.random.default_rng(22)
    return dict(
        description="A small Keras model under the mixed_bfloat16 policy (bfloat16 compute, "
                    "float32 variables cast per layer, float32 head), frozen.",
        features=["keras", "frozen", "bfloat16"],
        # bfloat16 keeps 8 significant bits; TF rounds some intermediates dfg computes in
        # float32 (inside Gelu, LayerNormalization)
        rtol=3e-2, atol=2e-2,
        graph=frozen.graph.as_graph_def(),
        steps=[step({frozen.inputs[0].name: f32(rng.normal(size=(2, 8, 8, 3)))},
                    [frozen.outputs[0].name])])


for _kind in ("lstm", "gru", "simple_rnn", "bidirectional_lstm"):
    for _lowered in (False, True):
        CASES[f"tf2_keras_{_kind}" + ("_lowered" if _lowered else "")] = (
            lambda k=_kind, lo=_lowered: keras_case(k, lo))


# =============================================================================================
# writing
# =============================================================================================


def ops_of(gd: Any) -> tuple[set[str], set[str]]:
    """(op types in the graph and its functions, names of library functions)."""
    fnames = {f.signature.name for f in gd.library.function}
    ops = {n.op for n in gd.node}
    for f in gd.library.function:
        ops |= {n.op for n in f.node_def}
    return ops, fnames


def covered(gd: Any) -> list[str]:
    ops, fnames = ops_of(gd)
    out = sorted(o for o in ops if o in FUNCTIONAL_OPS or "TensorList" in o)
    if ops & fnames:
        out.append("function-call-by-name")
    return out


def run_tf(gd: Any, steps: list[dict[str, Any]], optimize: bool) -> list[Any]:
    """Each step's fetched values (a list) or TensorFlow's error class name."""
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    config = tf.compat.v1.ConfigProto()
    if not optimize:
        # Follow the graph as written: no Grappler, no graph-level constant folding.
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    results: list[Any] = []
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        for s in steps:
            targets = [g.get_operation_by_name(t) for t in s["target"]]
            try:
                out = sess.run(list(s["fetch"]) + targets, feed_dict=s["feed"])
                results.append(out[:len(s["fetch"])])
            except tf.errors.OpError as e:
                results.append(type(e).__name__)
    return results


def agree(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(np.asarray(x).dtype == np.asarray(y).dtype and np.asarray(x).shape
               == np.asarray(y).shape and np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
               for x, y in zip(a, b))


def write_case(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    gd = spec["graph"]
    rtol, atol = spec.get("rtol", 1e-5), spec.get("atol", 1e-6)
    steps = spec["steps"]
    plain = run_tf(gd, steps, optimize=False)
    default = run_tf(gd, steps, optimize=True)
    for i, (a, b) in enumerate(zip(plain, default)):
        if not agree(a, b, rtol, atol):
            raise SystemExit(f"{name} step {i}: optimizing session disagrees: {a} vs {b}")
    d = HERE / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "graph.pbtxt").write_text(text_format.MessageToString(gd))
    out_steps = []
    for i, (s, res) in enumerate(zip(steps, plain)):
        feed = {}
        for j, (k, v) in enumerate(s["feed"].items()):
            np.save(d / f"s{i}_feed_{j}.npy", np.asarray(v), allow_pickle=False)
            feed[k] = f"s{i}_feed_{j}.npy"
        expect: dict[str, str] = {}
        error = None
        if isinstance(res, str):
            error = res
        else:
            for j, (k, v) in enumerate(zip(s["fetch"], res)):
                v = np.asarray(v)
                assert v.dtype != object, f"{name}: {k} is an object array"
                np.save(d / f"s{i}_fetch_{j}.npy", v, allow_pickle=False)
                expect[k] = f"s{i}_fetch_{j}.npy"
        out_steps.append({"feed": feed, "fetch": list(s["fetch"]), "target": list(s["target"]),
                          "expect": expect, "expect_error": error})
    features = list(dict.fromkeys(["functional"] + spec["features"] + covered(gd)))
    if any(s["expect_error"] for s in out_steps) and "error" not in features:
        features.append("error")
    doc = {"description": spec["description"], "features": features, "rtol": rtol,
           "atol": atol, "steps": out_steps, "prune": None, "grappler_nodes": None}
    (d / "case.json").write_text(json.dumps(doc, indent=2) + "\n")
    ops, fnames = ops_of(gd)
    return {"case": name, "nodes": len(gd.node), "functions": len(fnames),
            "covered": covered(gd), "errors": [s["expect_error"] for s in out_steps
                                               if s["expect_error"]],
            "description": spec["description"], "features": features}


README_HEAD = """\
# TensorFlow 2 conformance cases

Each folder is one case in exactly the format of `tests/data/conformance` (see its README.md:
`graph.pbtxt`, `case.json`, `.npy` feeds and expected values, run by `tests/conformance.py`).
The graphs are TensorFlow 2.21 graphs with a function library: functional control flow
(`If`/`StatelessIf`, `Case`/`StatelessCase`, `While`/`StatelessWhile`), function calls
(`PartitionedCall`, `StatefulPartitionedCall`, a node whose op is a function name), TensorList
ops, and frozen Keras recurrent layers both functional and lowered to v1 control flow.

Written by `generate.py` (run `/tmp/tfvenv/bin/python tests/data/tf2/generate.py` with a
TensorFlow virtualenv; never in CI). Expected values are TensorFlow's outputs from running the
GraphDef as written (imported into a fresh graph, a v1 Session without Grappler); a default,
optimizing session agrees within the case's rtol/atol. `prune` and `grappler_nodes` are null.
The `*_lowered` Keras graphs' helper node names change from one generator run to the next
(TensorFlow's lowering); their values do not.
Feature tags are those of `tests/data/conformance` plus: `functional` (every case), the
functional and TensorList op types the graph or its functions use, `function-call-by-name`,
`nested-call`, `case`, `shape-invariants`, `rnn`, `lowered`, `placeholder`.

## Cases

| case | nodes | functions | ops covered | description |
| --- | --- | --- | --- | --- |
"""


def main(argv: list[str]) -> None:
    names = argv or list(CASES)
    rows = []
    for name in names:
        rows.append(write_case(name, CASES[name]()))
        print(f"wrote {name}", flush=True)
    if not argv:
        lines = [f"| {r['case']} | {r['nodes']} | {r['functions']} | "
                 f"{', '.join(r['covered']) or '-'} | {r['description']} |" for r in rows]
        (HERE / "README.md").write_text(README_HEAD + "\n".join(lines) + "\n")
    w = max(len(r["case"]) for r in rows)
    print(f"\n{'case':<{w}}  nodes  funcs  errors  ops covered")
    for r in rows:
        print(f"{r['case']:<{w}}  {r['nodes']:>5}  {r['functions']:>5}  {len(r['errors']):>6}  "
              + ", ".join(r["covered"]))


if __name__ == "__main__":
    main(sys.argv[1:])
