"""Writes the jax2tf cases under tests/data/jax2tf/ (one folder per case).

Run with a virtualenv holding TensorFlow 2.21 and a JAX that still converts without native
serialization (JAX <= 0.7.1; later JAX removed that mode), never in CI:

    python3 -m venv /tmp/jaxvenv
    /tmp/jaxvenv/bin/pip install tensorflow-cpu==2.21.0 jax==0.7.1 jaxlib==0.7.1
    /tmp/jaxvenv/bin/python tests/data/jax2tf/generate.py             # all cases
    /tmp/jaxvenv/bin/python tests/data/jax2tf/generate.py jax2tf_gather # only the named ones

Each case is a JAX function converted with ``jax2tf.convert(f, native_serialization=False)``:
the TensorFlow graph then holds XLA's operations as Xla* ops (XlaDotV2, XlaGather, XlaScatter,
XlaReduceWindow ...) and the functions their reducers and comparators apply in its library.
The folder format is that of tests/data/conformance (see its README.md): graph.pbtxt (the
concrete function's graph, library included), case.json, .npy feeds and expected values. The
expected values are TensorFlow's: the same tf.function run with jit_compile=True (TensorFlow has
no other way to run Xla* ops), on CPU.

Besides the cases:

* ``savedmodel_cnn/``: a small JAX CNN (conv, max pool, dense) with its parameters as
  tf.Variables, converted with a polymorphic batch dimension and saved with a serving
  signature; ``savedmodel_cnn/io.npz`` holds an input and
  TensorFlow's output.
* ``native/graph.pbtxt``: a function converted WITH native serialization (one XlaCallModule
  holding StableHLO), which dfg refuses by name.
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
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import jax2tf  # noqa: E402

jax.config.update("jax_platforms", "cpu")

CASES: dict[str, Callable[[], dict[str, Any]]] = {}


def case(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    CASES["jax2tf_" + fn.__name__] = fn
    return fn


def convert(f: Callable, native: bool = False) -> Any:
    return tf.function(jax2tf.convert(f, native_serialization=native, with_gradient=False),
                       autograph=False, jit_compile=True)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def i32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.int32)


def spec_case(description: str, f: Callable, inputs: list[list[np.ndarray]],
              rtol: float = 1e-5, atol: float = 1e-6, polymorphic: bool = False) -> dict[str, Any]:
    """A case: ``f`` converted and traced for the first input set's shapes (each later set
    must have the same shapes), one step per input set."""
    return dict(description=description, f=f, inputs=inputs, rtol=rtol, atol=atol)


# =============================================================================================
# one case per op family
# =============================================================================================


@case
def dot_general() -> dict[str, Any]:
    def f(a, b, p, q):
        batched = lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
        # contracting two dims, rhs dims before lhs's in the output order
        two = lax.dot_general(a, a.transpose(2, 1, 0) * 2, (((1, 2), (1, 0)), ((), ())))
        ints = lax.dot_general(p, q, (((1,), (0,)), ((), ())),
                               preferred_element_type=jnp.int32)
        return batched, two, ints

    r = rng(1)
    sets = [[f32(r.normal(size=(2, 3, 4))), f32(r.normal(size=(2, 4, 5))),
             r.integers(-128, 127, size=(3, 6)).astype(np.int8),
             r.integers(-128, 127, size=(6, 2)).astype(np.int8)]]
    return spec_case("lax.dot_general with batch and contracting dims, two contracting dims, "
                     "and int8 x int8 -> int32 (XlaDotV2).", f, sets, rtol=1e-5, atol=1e-5)


@case
def dynamic_slice() -> dict[str, Any]:
    def f(x, i, j):
        s = lax.dynamic_slice(x, (i, j), (2, 3))
        u = lax.dynamic_update_slice(x, jnp.full((2, 2), -1.0, x.dtype), (j, i))
        return s, u

    x = f32(np.arange(30).reshape(5, 6))
    # the second and third steps start out of range: XLA clamps the start
    sets = [[x, i32(1), i32(2)], [x, i32(7), i32(-3)], [x, i32(-1), i32(5)]]
    return spec_case("lax.dynamic_slice and dynamic_update_slice with fed starts, in range "
                     "and out of range (clamped) (XlaDynamicSlice, XlaDynamicUpdateSlice).",
                     f, sets)


@case
def gather() -> dict[str, Any]:
    def f(x, idx, rows, cols):
        taken = jnp.take(x, idx, axis=1, mode="clip")
        fancy = x[rows, cols]
        sliced = x[idx[:2]]
        filled = jnp.take(x, idx, axis=0, mode="fill", fill_value=-7.0)
        batched = jax.vmap(lambda r, k: lax.dynamic_slice(r, (k,), (2,)))(x, rows)
        return taken, fancy, sliced, filled, batched

    x = f32(rng(2).normal(size=(4, 5)))
    sets = [[x, i32([0, 4, 2, 9]), i32([0, 3, 1, 2]), i32([4, 0, 2, 2])],
            [x, i32([-2, 1, 3, 3]), i32([3, 3, 0, 1]), i32([1, 1, 4, 0])]]
    return spec_case("Gathers: jnp.take with clip and fill modes, fancy indexing by two "
                     "index arrays, row slices and a vmapped dynamic_slice (XlaGather).",
                     f, sets)


@case
def scatter() -> dict[str, Any]:
    def f(x, idx, v):
        s = x.at[idx].set(v)                 # out-of-range rows are dropped
        a = x.at[idx].add(v)                 # repeated rows add up in order
        m = x.at[idx].max(v)
        p = x.at[idx, 1].multiply(2.0)
        k = x.at[:, idx[:2]].min(-1.0)
        return s, a, m, p, k

    r = rng(3)
    x = f32(r.normal(size=(5, 3)))
    sets = [[x, i32([0, 2, 0, 4]), f32(r.normal(size=(4, 3)))],
            [x, i32([1, 7, 1, -1]), f32(r.normal(size=(4, 3)))]]
    return spec_case("Scatters x.at[idx].set/add/max/multiply/min with repeated and "
                     "out-of-range indices (XlaScatter with its update computations).", f, sets)


@case
def pad() -> dict[str, Any]:
    def f(x):
        a = lax.pad(x, jnp.float32(0.5), [(1, 2, 1), (-1, 0, 2)])
        b = lax.pad(x, jnp.float32(-1), [(0, -2, 0), (2, -1, 1)])
        return a, b

    x = f32(np.arange(12).reshape(3, 4) + 1)
    return spec_case("lax.pad with interior padding and negative (cropping) edges (XlaPad).",
                     f, [[x]])


@case
def reduce() -> dict[str, Any]:
    def f(x):
        # a reducer that is no monoid jax knows: a generic (variadic) reduce
        argmax_val, argmax_idx = lax.reduce(
            (x, lax.broadcasted_iota(jnp.int32, x.shape, 1)),
            (jnp.float32(-jnp.inf), jnp.int32(0)),
            lambda a, b: (jnp.maximum(a[0], b[0]),
                          jnp.where(a[0] >= b[0], a[1], b[1])), (1,))
        sumsq = lax.reduce(x, jnp.float32(0), lambda a, b: a + b * b, (0,))
        both = lax.reduce(x, jnp.float32(1), lax.mul, (0, 1))
        return argmax_val, argmax_idx, sumsq, both

    x = f32(rng(4).normal(size=(3, 5)))
    x[1, 2] = x[1, 0] = 3.0          # a tie: the first index wins
    return spec_case("lax.reduce with a custom two-operand reducer (argmax with index), a "
                     "reducer that is not a monoid, and a product over all dims "
                     "(XlaVariadicReduceV2, XlaReduce).", f, [[x]], rtol=1e-5, atol=1e-5)


@case
def reduce_window() -> dict[str, Any]:
    def f(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        sm = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")
        dil = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 2, 1),
                                [(0, 0), (1, 1), (0, 1), (0, 0)],
                                base_dilation=(1, 2, 1, 1), window_dilation=(1, 1, 2, 1))
        cm = lax.cummax(x, axis=1)
        mn = lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 1, 2), (1, 1, 1, 2), "VALID")
        return mx, sm, dil, cm, mn

    x = f32(rng(5).normal(size=(2, 5, 6, 4)))
    return spec_case("lax.reduce_window max/add/min with strides, SAME and explicit padding, "
                     "base and window dilation, and lax.cummax (XlaReduceWindow).", f, [[x]])


@case
def select_and_scatter() -> dict[str, Any]:
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "SAME")

    def f(x, g):
        _, vjp = jax.vjp(pool, x)
        return vjp(g)[0]

    r = rng(6)
    x = f32(r.normal(size=(1, 5, 5, 2)))
    x[0, 0, 0, 0] = x[0, 0, 1, 0]     # a tie inside a window: the first wins
    g = f32(r.normal(size=(1, 3, 3, 2)))
    return spec_case("The gradient of a max pool (jax.vjp): select_and_scatter_add "
                     "(XlaSelectAndScatter with a GE select and an add scatter).", f, [[x, g]])


@case
def conv() -> dict[str, Any]:
    def f(x, k, dw, kt):
        dn = ("NHWC", "HWIO", "NHWC")
        plain = lax.conv_general_dilated(x, k, (2, 1), [(1, 1), (0, 2)], dimension_numbers=dn)
        dil = lax.conv_general_dilated(x, k, (1, 1), "SAME", rhs_dilation=(2, 1),
                                       dimension_numbers=dn)
        depth = lax.conv_general_dilated(x, dw, (1, 1), "VALID", dimension_numbers=dn,
                                         feature_group_count=x.shape[-1])
        trans = lax.conv_transpose(x, kt, (2, 2), "SAME", dimension_numbers=dn)
        nchw = lax.conv_general_dilated(x.transpose(0, 3, 1, 2), k.transpose(3, 2, 0, 1),
                                        (1, 1), [(0, 0), (1, 0)], lhs_dilation=(1, 2),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return plain, dil, depth, trans, nchw

    r = rng(7)
    sets = [[f32(r.normal(size=(2, 6, 5, 3))), f32(r.normal(size=(3, 2, 3, 4))),
             f32(r.normal(size=(2, 2, 1, 6))), f32(r.normal(size=(3, 3, 3, 2)))]]
    return spec_case("lax.conv_general_dilated: strides and explicit padding, rhs dilation, "
                     "a depthwise (feature-grouped) conv, conv_transpose (lhs dilation) and "
                     "NCHW/OIHW layouts (XlaConvV2).", f, sets, rtol=1e-4, atol=1e-4)


@case
def sort() -> dict[str, Any]:
    def f(x, k, z):
        s = jnp.sort(x, axis=1)
        a = jnp.argsort(x, axis=0)
        kk, kv = lax.sort((k, x[:, 0]), num_keys=1)
        d = jnp.sort(x.ravel())[::-1]
        # rows longer than dfg's all-pairs limit: its merge sort
        return s, a, kk, kv, d, jnp.sort(z), jnp.argsort(z)

    z = f32(rng(16).integers(-300, 300, size=3000) / 4.0)   # many ties
    z[[5, 700, 2999]] = np.nan
    z[[9, 10]] = [-0.0, 0.0]
    x = f32(rng(8).normal(size=(6, 4)))
    x[2, 1] = x[4, 1]                      # ties keep their order (stable)
    x[3, 2] = np.nan
    x[0, 3] = -0.0
    x[1, 3] = 0.0
    return spec_case("jnp.sort, jnp.argsort (stable, with ties, NaN and signed zeros), a "
                     "two-operand lax.sort by keys, and a 3000-long row with many ties "
                     "(XlaVariadicSort with jax's comparator).",
                     f, [[x, i32([3, 1, 3, 0, 2, 1]), z]])


@case
def barrier() -> dict[str, Any]:
    def f(x, y):
        a, b = lax.optimization_barrier((x * 2, y + 1))
        return a + b

    return spec_case("lax.optimization_barrier over two values (XlaOptimizationBarrier).",
                     f, [[f32([1, 2, 3]), f32([0.5, 0.25, 0])]])


@case
def tfxla_ops() -> dict[str, Any]:
    """The Xla* ops this jax2tf never writes (XlaReduce, XlaSort, XlaKeyValueSort,
    XlaSharding), built with TensorFlow's own tf2xla wrappers instead."""
    from tensorflow.compiler.tf2xla.python import xla as tfxla

    @tf.function(autograph=False)
    def halve_add(a: Any, b: Any) -> Any:
        return a * 0.5 + b               # order matters: the accumulator comes first

    scalar = tf.TensorSpec([], tf.float32)
    reducer = halve_add.get_concrete_function(scalar, scalar)

    from tensorflow.compiler.tf2xla.ops import gen_xla_ops
    from tensorflow.compiler.xla import xla_data_pb2

    dot = xla_data_pb2.DotDimensionNumbers(lhs_contracting_dimensions=[1],
                                           rhs_contracting_dimensions=[1])
    conv = xla_data_pb2.ConvolutionDimensionNumbers(
        input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=[2],
        kernel_output_feature_dimension=0, kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=[2], output_batch_dimension=0, output_feature_dimension=1,
        output_spatial_dimensions=[2])

    @tf.function(autograph=False)
    def two(a0: Any, a1: Any, b0: Any, b1: Any) -> Any:
        return a0 + b0, tf.maximum(a1, b1) - a0 * 0.0

    two_c = two.get_concrete_function(scalar, scalar, scalar, scalar)

    def f(x, k, v):
        r = tfxla.reduce(x, tf.constant(1.0), [1], reducer)
        s = tfxla.sort(x)
        kk, vv = tfxla.key_value_sort(k, v)
        sh = tfxla.sharding(x * 2.0)
        # the first versions of dot, conv and variadic reduce (older jax2tf exports hold them)
        d1 = gen_xla_ops.xla_dot(x, v, dimension_numbers=dot.SerializeToString(),
                                 precision_config="")
        img = tf.reshape(tf.range(24, dtype=tf.float32) * 0.25 - 2.0, [4, 2, 3])
        ker = tf.reshape(tf.range(12, dtype=tf.float32) * 0.5 - 1.0, [2, 2, 3])
        c1 = gen_xla_ops.xla_conv(img, ker, [1], [[1, 1]], [1], [1], 1,
                                  dimension_numbers=conv.SerializeToString(),
                                  precision_config="")
        # batch groups: the batch of 4 splits in 2, each group with its own output features
        c2 = gen_xla_ops.xla_conv_v2(img, ker, [1], [[0, 1]], [1], [1], 1,
                                     dimension_numbers=conv.SerializeToString(),
                                     precision_config="", preferred_element_type=tf.float32,
                                     batch_group_count=2)
        vr = gen_xla_ops.xla_variadic_reduce([x, x * -1.0], [1.0, 0.5], [0], two_c)
        return (r, s, kk, vv, sh, d1, c1, c2, *vr)

    r = rng(15)
    sets = [[f32(r.normal(size=(3, 4))), i32([[3, 1, 2, 1], [0, 5, 5, -1]]),
             f32(np.arange(8).reshape(2, 4))]]
    return dict(description="XlaReduce with a reducer that is not associative, XlaSort, "
                            "XlaKeyValueSort with tied keys and XlaSharding, written with "
                            "tf2xla's Python wrappers (jax2tf 0.7.1 writes none of them).",
                f=f, inputs=sets, rtol=1e-5, atol=1e-6, tf_native=True)


# =============================================================================================
# small models
# =============================================================================================


def _mlp_params(r: np.random.Generator) -> list[np.ndarray]:
    return [f32(r.normal(size=(8, 16)) * 0.3), f32(r.normal(size=16) * 0.1),
            f32(r.normal(size=(16, 3)) * 0.3), f32(r.normal(size=3) * 0.1)]


@case
def mlp() -> dict[str, Any]:
    params = _mlp_params(rng(9))

    def f(x):
        w1, b1, w2, b2 = params
        h = jax.nn.gelu(x @ w1 + b1)
        return jax.nn.log_softmax(h @ w2 + b2)

    r = rng(10)
    return spec_case("A two-layer JAX MLP (gelu, log_softmax) with its weights as constants.",
                     f, [[f32(r.normal(size=(4, 8)))]], rtol=1e-5, atol=1e-5)


def _cnn_params(r: np.random.Generator) -> list[np.ndarray]:
    return [f32(r.normal(size=(3, 3, 1, 4)) * 0.5), f32(r.normal(size=4) * 0.1),
            f32(r.normal(size=(3 * 3 * 4, 5)) * 0.3), f32(r.normal(size=5) * 0.1)]


def _cnn(params: Any, x: Any) -> Any:
    k, b, w, c = params
    h = lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    h = jax.nn.relu(h)
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = h.reshape(h.shape[0], -1)
    return jax.nn.softmax(h @ w + c)


@case
def cnn() -> dict[str, Any]:
    params = _cnn_params(rng(11))
    r = rng(12)
    return spec_case("A small JAX CNN (conv, relu, 2x2 max pool, dense, softmax) with its "
                     "weights as constants.", lambda x: _cnn(params, x),
                     [[f32(r.normal(size=(2, 6, 6, 1)))]], rtol=1e-5, atol=1e-6)


# =============================================================================================
# writing
# =============================================================================================


def write_case(name: str, spec: dict[str, Any]) -> None:
    inputs = spec["inputs"]
    fn = tf.function(spec["f"], autograph=False, jit_compile=True) if spec.get("tf_native") \
        else convert(spec["f"])
    specs = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype), name=f"x{i}")
             for i, a in enumerate(inputs[0])]
    cf = fn.get_concrete_function(*specs)
    gd = cf.graph.as_graph_def()
    feeds = [t.name for t in cf.inputs if t.op.type == "Placeholder"]
    fetches = [t.name for t in cf.outputs]
    d = HERE / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / "graph.pbtxt").write_text(text_format.MessageToString(gd))
    steps = []
    for s, values in enumerate(inputs):
        out = fn(*values)
        out = out if isinstance(out, (list, tuple)) else [out]
        feed = {}
        for k, (t, v) in enumerate(zip(feeds, values)):
            fname = f"s{s}_feed_{k}.npy"
            np.save(d / fname, np.asarray(v))
            feed[t] = fname
        expect = {}
        for k, (t, v) in enumerate(zip(fetches, out)):
            fname = f"s{s}_fetch_{k}.npy"
            np.save(d / fname, np.asarray(v.numpy()))
            expect[t] = fname
        steps.append({"feed": feed, "fetch": fetches, "target": [], "expect": expect,
                      "expect_error": None})
    ops = sorted({n.op for n in gd.node} | {n.op for f in gd.library.function
                                              for n in f.node_def})
    case_json = {"description": spec["description"], "features": ["jax2tf", "xla"],
                 "rtol": spec["rtol"], "atol": spec["atol"], "steps": steps,
                 "xla_ops": [o for o in ops if o.startswith("Xla")],
                 "generated_by": f"jax {jax.__version__}, tensorflow {tf.__version__}"}
    (d / "case.json").write_text(json.dumps(case_json, indent=1) + "\n")
    print(name, case_json["xla_ops"])


def write_savedmodel() -> None:
    params = _cnn_params(rng(13))
    d = HERE / "savedmodel_cnn"
    if d.exists():
        shutil.rmtree(d)
    module = tf.Module()
    module.params = [tf.Variable(p, name=f"p{i}") for i, p in enumerate(params)]
    # the batch is polymorphic, as exported models' usually is
    conv = jax2tf.convert(_cnn, native_serialization=False, with_gradient=False,
                          polymorphic_shapes=[None, "(b, 6, 6, 1)"])

    @tf.function(autograph=False, jit_compile=True,
                 input_signature=[tf.TensorSpec([None, 6, 6, 1], tf.float32, name="images")])
    def serve(images: Any) -> Any:
        return {"probs": conv(module.params, images)}

    module.serve = serve
    tf.saved_model.save(module, str(d), signatures={"serving_default": serve})
    x = f32(rng(14).normal(size=(3, 6, 6, 1)))
    y = serve(tf.constant(x))["probs"].numpy()
    np.savez(d / "io.npz", images=x, probs=y)
    print("savedmodel_cnn", y.shape)


def write_native() -> None:
    fn = convert(lambda x: jnp.sin(x) * 2.0, native=True)
    cf = fn.get_concrete_function(tf.TensorSpec([3], tf.float32, name="x"))
    gd = cf.graph.as_graph_def()
    d = HERE / "native"
    d.mkdir(exist_ok=True)
    (d / "graph.pbtxt").write_text(text_format.MessageToString(gd))
    print("native", sorted({n.op for n in gd.node}), [t.name for t in cf.outputs])


def main(names: list[str]) -> None:
    todo = names or list(CASES)
    for name in todo:
        if name == "savedmodel_cnn":
            write_savedmodel()
        elif name == "native":
            write_native()
        else:
            write_case(name, CASES[name]())
    if not names:
        write_savedmodel()
        write_native()


if __name__ == "__main__":
    main(sys.argv[1:])
