"""Writes the fast-path conformance cases under tests/data/fastpath/ (one folder per case).

Run with TensorFlow's own virtualenv, never in CI (TensorFlow is not a dependency of dfg):

    /tmp/tfvenv/bin/python tests/data/fastpath/generate.py             # all cases
    /tmp/tfvenv/bin/python tests/data/fastpath/generate.py fp_bf16_loop  # only these

0-d values are where dfg's fast paths live (compiled programs' scalar forms, the scheduler's
inline transfers): these cases are 0-d while loops (control flow v1: Enter/Merge/Switch/
NextIteration/Exit, the shape loop programs compile) and straight-line graphs in the dtypes
whose results need more than a float64 expression: bfloat16 and float16 (every op rounds),
int8/uint8/int16 wrap-around, int32/int64 overflow, complex, and comparisons with NaN, inf
and -0.0. The format is exactly that of tests/data/conformance (see its README.md); rtol
and atol are 0: the values must be TensorFlow's, bit for bit but NaN payloads
(tests/test_fastpath_conformance.py also checks the sign of zeros). bfloat16 values are fed
and fetched as float32 through Casts (npy has no bfloat16).

Expected values are TensorFlow's outputs from running the very GraphDef written, imported into
a fresh tf.Graph, in a tf.compat.v1.Session without Grappler; a default (optimizing) session
must agree exactly.
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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402

tf.compat.v1.disable_eager_execution()
tf.compat.v1.disable_control_flow_v2()   # v1 loops: the frames loop programs compile

CASES: dict[str, Callable[[], dict[str, Any]]] = {}
v1 = tf.compat.v1


def case(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    CASES["fp_" + fn.__name__] = fn
    return fn


def graph_of(build: Callable[[], None]) -> Any:
    g = tf.Graph()
    with g.as_default():
        build()
    return g.as_graph_def()


def step(feed: dict[str, Any], fetch: list[str]) -> dict[str, Any]:
    return {"feed": feed, "fetch": fetch, "target": []}


def ph(dtype: Any, name: str) -> Any:
    return v1.placeholder(dtype, [], name=name)


def scalar(dtype: Any, v: Any) -> np.ndarray:
    return np.asarray(v, dtype=dtype)


def loop(n: Any, body: Callable, init: list) -> list:
    """``tf.while_loop`` over (i, *init) while i < n: the 0-d loops of the cases."""
    out = v1.while_loop(lambda i, *vs: i < n, lambda i, *vs: [i + 1, *body(*vs)],
                        [tf.constant(0), *init])
    return out[1:]


# =============================================================================================
# bfloat16
# =============================================================================================


@case
def bf16_loop() -> dict[str, Any]:
    """acc += x and p *= y in bfloat16, n times: every AddV2/Mul rounds to bfloat16."""
    def build() -> None:
        x = tf.cast(ph(tf.float32, "x"), tf.bfloat16)
        y = tf.cast(ph(tf.float32, "y"), tf.bfloat16)
        n = ph(tf.int32, "n")
        acc, p, d = loop(n, lambda a, p, d: [a + x, p * y, d - x * y],
                         [tf.zeros([], tf.bfloat16), tf.ones([], tf.bfloat16),
                          tf.constant(3.0, tf.bfloat16)])
        tf.cast(acc, tf.float32, name="y_acc")
        tf.cast(p, tf.float32, name="y_p")
        tf.cast(d, tf.float32, name="y_d")
        tf.cast(acc > p, tf.int32, name="y_gt")

    fetch = ["y_acc:0", "y_p:0", "y_d:0", "y_gt:0"]
    steps = [step({"x:0": scalar(np.float32, x), "y:0": scalar(np.float32, y),
                   "n:0": scalar(np.int32, n)}, fetch)
             for x, y, n in ((0.1, 1.01, 100), (0.1, 1.01, 0), (0.3, 0.999, 37),
                             (0.1, 1.01, 100), (1e-3, 1.5, 300))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop accumulating bfloat16 sums, products and "
                            "differences (each op rounds to bfloat16: 0.1 added 100 times "
                            "is 10.0625, not float32's 10.0098).",
                features=["while", "bfloat16", "dtypes"])


@case
def bf16_straight() -> dict[str, Any]:
    """A straight-line bfloat16 chain on 0-d values: Add, Sub, Mul, Neg, compares."""
    def build() -> None:
        a = tf.cast(ph(tf.float32, "a"), tf.bfloat16)
        b = tf.cast(ph(tf.float32, "b"), tf.bfloat16)
        s = ((a + b) + b) + b
        tf.cast(s, tf.float32, name="y_sum")
        tf.cast(tf.add(a, b), tf.float32, name="y_add")
        tf.cast(a - b - b, tf.float32, name="y_sub")
        tf.cast(a * b * b, tf.float32, name="y_mul")
        tf.cast(-(a * b), tf.float32, name="y_neg")
        tf.cast(tf.less(s, a + b * 3.0), tf.int32, name="y_lt")
        tf.cast(tf.equal(s, a + b * 3.0), tf.int32, name="y_eq")

    fetch = ["y_sum:0", "y_add:0", "y_sub:0", "y_mul:0", "y_neg:0", "y_lt:0", "y_eq:0"]
    steps = [step({"a:0": scalar(np.float32, a), "b:0": scalar(np.float32, b)}, fetch)
             for a, b in ((1.0, 0.00390625), (100.0, 0.3), (3.14159, 2.71828),
                          (1.0, 0.00390625), (-0.0, 0.0), (3e38, 3e38), (np.nan, 1.0))]
    return dict(graph=graph_of(build), steps=steps,
                description="Straight-line bfloat16 arithmetic on 0-d values, each op "
                            "rounding (1 + 2^-8 + 2^-8 + 2^-8 stays 1 in bfloat16), overflow to "
                            "inf, NaN and -0.0.",
                features=["dag", "bfloat16", "special-values"])


# =============================================================================================
# float16
# =============================================================================================


@case
def f16_loop() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.float16, "x")
        y = ph(tf.float16, "y")
        n = ph(tf.int32, "n")
        acc, p = loop(n, lambda a, p: [a + x, p * y],
                      [tf.zeros([], tf.float16), tf.ones([], tf.float16)])
        tf.identity(acc, name="y_acc")
        tf.identity(p, name="y_p")
        tf.identity(acc - p, name="y_diff")

    fetch = ["y_acc:0", "y_p:0", "y_diff:0"]
    steps = [step({"x:0": scalar(np.float16, x), "y:0": scalar(np.float16, y),
                   "n:0": scalar(np.int32, n)}, fetch)
             for x, y, n in ((0.1, 1.5, 3000), (0.1, 2.0, 20), (0.1, 2.0, 20),
                             (0.001, 0.5, 30), (-0.1, -1.1, 7))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop of float16 sums and products: sums stall "
                            "where 0.1 is below half an ulp, products overflow to inf or "
                            "underflow through subnormals.",
                features=["while", "dtypes", "special-values"])


@case
def f16_straight() -> dict[str, Any]:
    def build() -> None:
        a = ph(tf.float16, "a")
        b = ph(tf.float16, "b")
        tf.identity((a + b) + b, name="y_sum")
        tf.identity(a * b, name="y_mul")
        tf.identity(a - b, name="y_sub")
        tf.identity(-a, name="y_neg")
        tf.identity(tf.less(a + b, a), name="y_lt")
        tf.identity(tf.greater_equal(a * b, b), name="y_ge")

    fetch = ["y_sum:0", "y_mul:0", "y_sub:0", "y_neg:0", "y_lt:0", "y_ge:0"]
    steps = [step({"a:0": scalar(np.float16, a), "b:0": scalar(np.float16, b)}, fetch)
             for a, b in ((60000, 6000), (1.0, 0.0004), (1e-4, 1e-4), (-0.0, 0.0),
                          (np.inf, -np.inf), (np.nan, 1.0), (60000, 6000))]
    return dict(graph=graph_of(build), steps=steps,
                description="Straight-line float16 arithmetic on 0-d values: overflow to "
                            "inf, sums below an ulp, subnormal products, -0.0, inf - inf, NaN.",
                features=["dag", "dtypes", "special-values"])


# =============================================================================================
# integers: wrap-around and overflow
# =============================================================================================


@case
def int8_loop_wrap() -> dict[str, Any]:
    def build() -> None:
        x8 = ph(tf.int8, "x8")
        u8 = ph(tf.uint8, "u8")
        n = ph(tf.int32, "n")
        a, b, c = loop(n, lambda a, b, c: [a * tf.constant(3, tf.int8) + x8,
                                           b - u8, c * u8 + tf.constant(1, tf.uint8)],
                       [tf.constant(1, tf.int8), tf.constant(5, tf.uint8),
                        tf.constant(1, tf.uint8)])
        tf.identity(a, name="y_a")
        tf.identity(b, name="y_b")
        tf.identity(c, name="y_c")
        tf.identity(tf.less(a, tf.constant(0, tf.int8)), name="y_neg")

    fetch = ["y_a:0", "y_b:0", "y_c:0", "y_neg:0"]
    steps = [step({"x8:0": scalar(np.int8, x), "u8:0": scalar(np.uint8, u),
                   "n:0": scalar(np.int32, n)}, fetch)
             for x, u, n in ((1, 7, 10), (-128, 255, 9), (127, 200, 50), (1, 7, 10), (0, 0, 0))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop of int8 and uint8 arithmetic that wraps "
                            "around on every iteration (x*3 + 1, u - 7, c*u + 1).",
                features=["while", "dtypes", "special-values"])


@case
def int_overflow_loop() -> dict[str, Any]:
    def build() -> None:
        x = ph(tf.int32, "x")
        y = ph(tf.int64, "y")
        n = ph(tf.int32, "n")
        a, b, c = loop(n, lambda a, b, c: [a * x + tf.constant(7), b * y - tf.constant(
            3, tf.int64), -(c + x)], [tf.constant(1), tf.constant(1, tf.int64),
                                     tf.constant(2147483600)])
        tf.identity(a, name="y_a")
        tf.identity(b, name="y_b")
        tf.identity(c, name="y_c")
        tf.identity(tf.greater(a, tf.constant(0)), name="y_pos")

    fetch = ["y_a:0", "y_b:0", "y_c:0", "y_pos:0"]
    steps = [step({"x:0": scalar(np.int32, x), "y:0": scalar(np.int64, y),
                   "n:0": scalar(np.int32, n)}, fetch)
             for x, y, n in ((65537, 4294967297, 6), (-3, -7, 40), (2147483647, 2, 70),
                             (65537, 4294967297, 6))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop of int32 and int64 products and sums that "
                            "overflow (two's complement wrap-around), and Neg of INT_MIN.",
                features=["while", "dtypes", "special-values"])


@case
def int_straight_wrap() -> dict[str, Any]:
    dts = {"i8": tf.int8, "u8": tf.uint8, "i16": tf.int16, "u16": tf.uint16,
           "i32": tf.int32, "i64": tf.int64}

    def build() -> None:
        for k, dt in dts.items():
            a = ph(dt, f"{k}_a")
            b = ph(dt, f"{k}_b")
            tf.identity(a + b, name=f"y_{k}_add")
            tf.identity(a - b, name=f"y_{k}_sub")
            tf.identity(a * b, name=f"y_{k}_mul")
            tf.identity(tf.less_equal(a + b, a), name=f"y_{k}_le")
            if dt.is_unsigned:
                continue
            tf.identity(-a, name=f"y_{k}_neg")

    fetch = [f"y_{k}_{o}:0" for k, dt in dts.items()
             for o in ("add", "sub", "mul", "le") + (() if dt.is_unsigned else ("neg",))]
    steps = []
    for sel in range(3):
        feed = {}
        for k, dt in dts.items():
            npdt = dt.as_numpy_dtype
            info = np.iinfo(npdt)
            a, b = ((info.max, 1), (info.min, info.max), (info.max // 3 + 1, 5))[sel]
            feed[f"{k}_a:0"] = scalar(npdt, a)
            feed[f"{k}_b:0"] = scalar(npdt, b)
        steps.append(step(feed, fetch))
    steps.append(steps[0])
    return dict(graph=graph_of(build), steps=steps,
                description="Straight-line 0-d Add, Sub, Mul, Neg and LessEqual at the ends "
                            "of int8, uint8, int16, uint16, int32 and int64 (wrap-around).",
                features=["dag", "dtypes", "special-values"])


# =============================================================================================
# complex
# =============================================================================================


@case
def complex_loop() -> dict[str, Any]:
    def build() -> None:
        c = ph(tf.complex64, "c")
        w = ph(tf.complex128, "w")
        n = ph(tf.int32, "n")
        z, u = loop(n, lambda z, u: [z * z + c, u * w - tf.constant(1 + 1j, tf.complex128)],
                    [tf.zeros([], tf.complex64), tf.ones([], tf.complex128)])
        tf.identity(z, name="y_z")
        tf.identity(u, name="y_u")
        tf.identity(tf.equal(z, -z), name="y_eq")
        tf.identity(-u, name="y_neg")

    fetch = ["y_z:0", "y_u:0", "y_eq:0", "y_neg:0"]
    steps = [step({"c:0": scalar(np.complex64, c), "w:0": scalar(np.complex128, w),
                   "n:0": scalar(np.int32, n)}, fetch)
             for c, w, n in ((0.3 + 0.5j, 1 - 1j, 12), (-0.75 + 0.1j, 0.5j, 30),
                             (2 + 2j, 3 + 0j, 80), (0.3 + 0.5j, 1 - 1j, 12))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop of complex64 and complex128 arithmetic "
                            "(z*z + c, escaping to inf/nan), Equal and Neg.",
                features=["while", "dtypes", "special-values"])


# =============================================================================================
# NaN, inf and signed zeros in comparisons
# =============================================================================================


@case
def nan_compare() -> dict[str, Any]:
    def build() -> None:
        a = ph(tf.float32, "a")
        b = ph(tf.float32, "b")
        for name, op in (("lt", tf.less), ("le", tf.less_equal), ("gt", tf.greater),
                         ("ge", tf.greater_equal), ("eq", tf.equal),
                         ("ne", tf.not_equal)):
            tf.identity(op(a, b), name="y_" + name)
        tf.identity(tf.maximum(a, b), name="y_max")
        tf.identity(tf.minimum(a, b), name="y_min")
        tf.identity(a * b, name="y_mul")
        tf.identity(tf.logical_and(tf.less(a, b), tf.logical_not(tf.equal(a, b))),
                    name="y_and")
        tf.identity(tf.logical_or(tf.greater(a, b), tf.equal(a, a)), name="y_or")

    fetch = [f"y_{k}:0" for k in ("lt", "le", "gt", "ge", "eq", "ne", "max", "min", "mul", "and",
                                "or")]
    vals = ((np.nan, 1.0), (np.nan, np.nan), (np.inf, np.nan), (-0.0, 0.0), (np.inf, np.inf),
            (-np.inf, 3.0), (1.0, np.nan), (np.nan, 1.0))
    steps = [step({"a:0": scalar(np.float32, a), "b:0": scalar(np.float32, b)}, fetch)
             for a, b in vals]
    return dict(graph=graph_of(build), steps=steps,
                description="0-d float32 comparisons, Maximum/Minimum and logical ops with "
                            "NaN, inf and -0.0 (NaN compares false but for NotEqual; Maximum "
                            "and Minimum propagate NaN).",
                features=["dag", "compare", "logical", "special-values"])


@case
def nan_loop() -> dict[str, Any]:
    """A loop whose predicate compares a value that becomes NaN: it stops at once."""
    def build() -> None:
        x = ph(tf.float32, "x")
        d = ph(tf.float32, "d")
        h = ph(tf.float16, "h")
        out = v1.while_loop(
            lambda i, v, w: tf.logical_and(v < tf.constant(100.0), i < 1000),
            lambda i, v, w: [i + 1, v + d, w * h], [tf.constant(0), x,
                                                    tf.ones([], tf.float16)])
        tf.identity(out[0], name="y_iters")
        tf.identity(out[1], name="y_v")
        tf.identity(out[2], name="y_w")
        tf.identity(tf.not_equal(out[2], out[2]), name="y_w_nan")

    fetch = ["y_iters:0", "y_v:0", "y_w:0", "y_w_nan:0"]
    steps = [step({"x:0": scalar(np.float32, x), "d:0": scalar(np.float32, dd),
                   "h:0": scalar(np.float16, h)}, fetch)
             for x, dd, h in ((0.0, np.nan, 2.0), (0.0, 7.5, 1.5), (np.nan, 1.0, np.inf),
                              (-np.inf, np.inf, 0.5), (0.0, 7.5, 1.5))]
    return dict(graph=graph_of(build), steps=steps,
                description="A 0-d while loop whose predicate compares a value that becomes "
                            "NaN (the loop stops), or -inf + inf; a float16 product beside it.",
                features=["while", "compare", "special-values"])


# =============================================================================================
# writing
# =============================================================================================


def run_tf(gd: Any, steps: list[dict[str, Any]], optimize: bool) -> list[Any]:
    """Each step's fetched values (a list) or TensorFlow's error class name."""
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    config = v1.ConfigProto()
    if not optimize:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = v1.OptimizerOptions.L0
    results: list[Any] = []
    with v1.Session(graph=g, config=config) as sess:
        for s in steps:
            try:
                results.append(sess.run(list(s["fetch"]), feed_dict=s["feed"]))
            except tf.errors.OpError as e:
                results.append(type(e).__name__)
    return results


def same(a: Any, b: Any) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(np.asarray(x).dtype == np.asarray(y).dtype
               and np.array_equal(x, y, equal_nan=np.asarray(x).dtype.kind in "fc")
               for x, y in zip(a, b))


def write_case(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    gd = spec["graph"]
    steps = spec["steps"]
    plain = run_tf(gd, steps, optimize=False)
    default = run_tf(gd, steps, optimize=True)
    for i, (a, b) in enumerate(zip(plain, default)):
        if not same(a, b):
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
                np.save(d / f"s{i}_fetch_{j}.npy", np.asarray(v), allow_pickle=False)
                expect[k] = f"s{i}_fetch_{j}.npy"
        out_steps.append({"feed": feed, "fetch": list(s["fetch"]), "target": [],
                          "expect": expect, "expect_error": error})
    doc = {"description": spec["description"], "features": spec["features"], "rtol": 0.0,
           "atol": 0.0, "steps": out_steps, "prune": None, "grappler_nodes": None}
    (d / "case.json").write_text(json.dumps(doc, indent=2) + "\n")
    return {"case": name, "nodes": len(gd.node), "description": spec["description"]}


README_HEAD = """\
# Fast-path conformance cases

0-d while loops (control flow v1) and straight-line graphs in bfloat16, float16, int8/uint8
wrap-around, int32/int64 overflow, complex and NaN/inf/-0.0 comparisons: the values where
dfg's fast paths (compiled programs' scalar forms, the scheduler's inline transfers) must give
exactly what the kernels give. The format is that of `tests/data/conformance` (see its
README.md), with rtol = atol = 0. Written by `generate.py` (run
`/tmp/tfvenv/bin/python tests/data/fastpath/generate.py` with a TensorFlow virtualenv; never in
CI): TensorFlow 2.21's outputs running each GraphDef as written in a v1 Session without
Grappler (a default, optimizing session gives the same bits). Run in every mode by
`tests/test_fastpath_conformance.py`.

| case | nodes | description |
| --- | --- | --- |
"""


def main(argv: list[str]) -> None:
    names = argv or list(CASES)
    rows = []
    for name in names:
        rows.append(write_case(name, CASES[name]()))
        print(f"wrote {name}", flush=True)
    if not argv:
        lines = [f"| {r['case']} | {r['nodes']} | {r['description']} |" for r in rows]
        (HERE / "README.md").write_text(README_HEAD + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
