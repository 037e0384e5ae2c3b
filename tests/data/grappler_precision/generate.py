"""Generate the Grappler-precision cases: small frozen models run by TensorFlow with Grappler
off and on, so tests/test_optimizer_precision.py can hold dfg's run-time optimizer to
Grappler's own precision.

Run with the Python of a TensorFlow environment (never in CI; dfg never imports TensorFlow):

    /tmp/tfvenv/bin/python tests/data/grappler_precision/generate.py

Each case is a folder: ``graph.pb`` (a binary frozen GraphDef; the zoo case points at
``../models/efficientnet_v2_b0/graph.pb`` instead of copying it), ``feed_<i>.npy``, and per
fetched tensor ``off_<i>.npy``, ``on_<i>.npy`` and ``exact_<i>.npy``: the frozen GraphDef
imported into a fresh graph and run in a ``tf.compat.v1.Session``

- off: ``rewrite_options.disable_meta_optimizer`` and ``OptimizerOptions.L0`` (no Grappler,
  no graph-level constant folding): the graph as written;
- on: a default ConfigProto (Grappler's default pipeline: constant folding, arithmetic,
  remapper fusions of Conv2D/MatMul + BiasAdd/FusedBatchNorm + activation, ...);
- exact: the same graph in float64 (``to_float64``), as written: the float32 graph's values
  in exact arithmetic, to within float64 rounding, against which precision is measured.

``case.json`` records the fetches, their feeds, ``grappler_change`` (per fetch the largest
``|on - off|``) and ``error`` (per fetch the largest ``|off - exact|`` and
``|on - exact|``). oneDNN is off (TF_ENABLE_ONEDNN_OPTS=0): plain Eigen kernels, the bits
the other TensorFlow-made data here come from. Weights are seeded random values; batch-norm
variances are spread over [0.05, 2] so folded scales reach ~4.5, which is where folding in
float32 loses bits.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zlib
from pathlib import Path

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers as L  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

HERE = Path(__file__).resolve().parent
ZOO = HERE.parent / "models"
v1 = tf.compat.v1
raw = tf.raw_ops
SEED = 2821


def run(gd: tf.compat.v1.GraphDef, feeds: dict[str, np.ndarray], fetches: list[str],
        grappler: bool) -> list[np.ndarray]:
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    config = v1.ConfigProto()
    if not grappler:
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        config.graph_options.optimizer_options.opt_level = v1.OptimizerOptions.L0
    with v1.Session(graph=g, config=config) as sess:
        return sess.run(fetches, feed_dict=feeds)


def to_float64(gd: tf.compat.v1.GraphDef) -> tf.compat.v1.GraphDef:
    """``gd`` computing in float64: every float32 type attribute and constant becomes float64,
    and each inference FusedBatchNormV3 (no float64 kernel) its formula,
    ``(x - mean) * (scale / sqrt(variance + epsilon)) + offset``, with those constants made
    in float64. Run as written, its outputs are the float32 graph's exact values to ~1e-16."""
    out = v1.GraphDef()
    out.CopyFrom(gd)
    consts = {n.name: n for n in out.node if n.op == "Const"}
    bns = []
    f32, f64 = tf.float32.as_datatype_enum, tf.float64.as_datatype_enum
    # the library's functions too (a Keras RNN's While body and cond): their nodes, and the
    # types of their arguments and results
    fn_nodes = [n for f in out.library.function for n in f.node_def]
    for f in out.library.function:
        for arg in [*f.signature.input_arg, *f.signature.output_arg]:
            if arg.type == f32:
                arg.type = f64
    for n in [*out.node, *fn_nodes]:
        for a in n.attr.values():
            if a.type == f32:
                a.type = f64
            for i, t in enumerate(a.list.type):
                if t == f32:
                    a.list.type[i] = f64
        if n.op == "Const" and n.attr["dtype"].type == f64:
            v = tf.make_ndarray(n.attr["value"].tensor).astype(np.float64)
            n.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(v, tf.float64))
        if n.op == "FusedBatchNormV3":
            bns.append(n)
    _keep_flows_float32(out)
    for n in bns:
        s, o, m, var = (tf.make_ndarray(consts[i.split(":")[0]].attr["value"].tensor)
                        .astype(np.float64) for i in n.input[1:5])
        k = s / np.sqrt(var + float(np.float32(n.attr["epsilon"].f)))
        for suffix, v in (("k", k), ("b", o - m * k)):
            c = out.node.add(name=f"{n.name}/_f64_{suffix}", op="Const")
            c.attr["dtype"].type = tf.float64.as_datatype_enum
            c.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(v, tf.float64))
        x = n.input[0]
        mul = out.node.add(name=f"{n.name}/_f64_mul", op="Mul", input=[x, f"{n.name}/_f64_k"])
        mul.attr["T"].type = tf.float64.as_datatype_enum
        n.op = "AddV2"
        for a in list(n.attr):
            del n.attr[a]
        n.attr["T"].type = tf.float64.as_datatype_enum
        del n.input[:]
        n.input.extend([mul.name, f"{n.name}/_f64_b"])
    return out


_FLOW_OUT = {"TensorArrayV3": 1, "TensorArrayWriteV3": 0, "TensorArrayScatterV3": 0,
             "TensorArraySplitV3": 0, "TensorArrayGradV3": 1}
_FORWARD = ("Enter", "Merge", "Switch", "Exit", "NextIteration", "Identity", "RefEnter")


def _keep_flows_float32(gd: tf.compat.v1.GraphDef) -> None:
    """A TensorArray's flow is float32 whatever its elements are: the control-flow nodes
    that carry one (an Enter, Merge, Switch, ... of a flow) keep T = float32."""
    f32 = tf.float32.as_datatype_enum
    flows = {f"{n.name}:{k}" if k else n.name for n in gd.node
             for op, k in _FLOW_OUT.items() if n.op == op}
    flows |= {f"{n.name}:0" for n in gd.node if _FLOW_OUT.get(n.op) == 0}
    changed = True
    while changed:
        changed = False
        for n in gd.node:
            if n.op not in _FORWARD or n.attr["T"].type == f32:
                continue
            ins = [i for i in n.input if not i.startswith("^")]
            if ins[:1] and (ins[0] in flows or n.op == "Merge" and any(i in flows for i in ins)):
                n.attr["T"].type = f32
                flows |= {n.name, f"{n.name}:0", f"{n.name}:1"}
                changed = True


def write(name: str, gd: tf.compat.v1.GraphDef | None, feeds: dict[str, np.ndarray],
          fetches: list[str], description: str, graph_path: str = "graph.pb") -> None:
    if gd is None:
        gd = v1.GraphDef()
        gd.ParseFromString((HERE / name / graph_path).read_bytes())
    off = run(gd, feeds, fetches, False)
    on = run(gd, feeds, fetches, True)
    exact = run(to_float64(gd), {k: v.astype(np.float64) for k, v in feeds.items()}, fetches,
                False)
    d = HERE / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    if graph_path == "graph.pb":
        (d / "graph.pb").write_bytes(gd.SerializeToString(deterministic=True))
    feed_files = {}
    for i, (k, v) in enumerate(feeds.items()):
        np.save(d / f"feed_{i}.npy", v)
        feed_files[k] = f"feed_{i}.npy"
    change, error = {}, {}
    for i, (f, a, b) in enumerate(zip(fetches, off, on)):
        np.save(d / f"off_{i}.npy", a)
        np.save(d / f"on_{i}.npy", b)
        np.save(d / f"exact_{i}.npy", exact[i])
        change[f] = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        error[f] = {k: float(np.max(np.abs(v.astype(np.float64) - exact[i])))
                    for k, v in (("off", a), ("on", b))}
    doc = {"description": description, "graph": graph_path, "feeds": feed_files,
           "fetches": fetches, "grappler_change": change, "error": error, "nodes": len(gd.node)}
    (d / "case.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(name, change, error)


def bn_params(rng: np.random.Generator, c: int) -> list[np.ndarray]:
    """scale, offset, mean, variance of a batch norm over ``c`` channels."""
    return [rng.uniform(0.5, 1.5, c).astype(np.float32),
            rng.normal(0, 0.3, c).astype(np.float32),
            rng.normal(0, 0.5, c).astype(np.float32),
            rng.uniform(0.05, 2.0, c).astype(np.float32)]


# --------------------------------------------------------------------------- TF1-style graphs

def conv_bn_relu(rng: np.random.Generator) -> None:
    """Three Conv2D + FusedBatchNormV3 (inference) + Relu layers, the last a depthwise conv
    + BN + Relu6, then a residual Add."""
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (None, 16, 16, 3), name="x")
        h = x
        cin = 3
        for i, cout in enumerate([16, 16, 16]):
            w = tf.constant(rng.normal(0, 1 / np.sqrt(9 * cin), (3, 3, cin, cout))
                            .astype(np.float32))
            h = tf.nn.conv2d(h, w, 1, "SAME", name=f"conv{i}")
            s, o, m, v = bn_params(rng, cout)
            h = raw.FusedBatchNormV3(x=h, scale=s, offset=o, mean=m, variance=v,
                                     epsilon=1e-3, is_training=False, name=f"bn{i}")[0]
            h = tf.nn.relu(h, name=f"relu{i}")
            cin = cout
        skip = h
        dw = tf.constant(rng.normal(0, 1 / 3, (3, 3, cin, 1)).astype(np.float32))
        h = tf.nn.depthwise_conv2d(h, dw, [1, 1, 1, 1], "SAME", name="dw")
        s, o, m, v = bn_params(rng, cin)
        h = raw.FusedBatchNormV3(x=h, scale=s, offset=o, mean=m, variance=v, epsilon=1e-3,
                                 is_training=False, name="bn_dw")[0]
        h = tf.nn.relu6(h, name="relu6")
        tf.identity(h + skip, name="out")
    write("conv_bn_relu", g.as_graph_def(),
          {"x:0": rng.standard_normal((2, 16, 16, 3)).astype(np.float32)}, ["out:0"],
          "three Conv2D + FusedBatchNormV3 (inference) + Relu, a depthwise conv + BN + Relu6, "
          "a residual Add (tf.compat.v1 graph)")


def matmul_bias_act(rng: np.random.Generator) -> None:
    """MatMul + BiasAdd + each activation dfg fuses, chained, and a residual Add."""
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (None, 32), name="x")
        h = x
        acts = [tf.nn.relu, tf.nn.relu6, tf.nn.elu, lambda t: tf.nn.leaky_relu(t, 0.1),
                tf.tanh, tf.sigmoid, lambda t: t * tf.sigmoid(t), None]
        for i, act in enumerate(acts):
            w = tf.constant(rng.normal(0, 1.5 / np.sqrt(32), (32, 32)).astype(np.float32))
            b = tf.constant(rng.normal(0, 0.5, 32).astype(np.float32))
            h = tf.nn.bias_add(tf.matmul(h, w, name=f"mm{i}"), b, name=f"bias{i}")
            if act is not None:
                h = act(h)
        tf.identity(h, name="out")
    write("matmul_bias_act", g.as_graph_def(),
          {"x:0": rng.standard_normal((4, 32)).astype(np.float32)}, ["out:0"],
          "MatMul + BiasAdd + Relu, Relu6, Elu, LeakyRelu, Tanh, Sigmoid, swish, none, chained "
          "(tf.compat.v1 graph)")


def arithmetic_chains(rng: np.random.Generator) -> None:
    """Constant chains (x + c1) + c2 ..., (x * c1) * c2 ..., a common factor
    x*c1 + x*c2, neutral elements, and arithmetic on constants only (folded)."""
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, (None, 8), name="x")
        cs = [tf.constant(rng.uniform(0.3, 3.0, 8).astype(np.float32)) for _ in range(6)]
        a = x
        for c in cs:
            a = a + c
        m = x
        for c in cs:
            m = m * c
        f = tf.add_n([x * cs[0], x * cs[1], x * cs[2]])
        k = tf.sqrt(cs[3] * cs[4] + cs[5]) / cs[0]          # constants only: folded
        n = (x * 1.0 + 0.0) * k
        tf.identity(a, name="add_chain")
        tf.identity(m, name="mul_chain")
        tf.identity(f, name="factor")
        tf.identity(n, name="folded")
    write("arithmetic_chains", g.as_graph_def(),
          {"x:0": (rng.standard_normal((4, 8)) * 10).astype(np.float32)},
          ["add_chain:0", "mul_chain:0", "factor:0", "folded:0"],
          "chains of constant Adds and Muls, a common factor (AddN of x*c), x*1+0, and "
          "constant-only arithmetic (tf.compat.v1 graph)")


# --------------------------------------------------------------------------- Keras models

def randomize_bn(model: keras.Model, rng: np.random.Generator) -> None:
    for layer in model._flatten_layers():
        if isinstance(layer, L.BatchNormalization):
            c = layer.gamma.shape[0]
            s, o, m, v = bn_params(rng, c)
            layer.gamma.assign(s)
            layer.beta.assign(o)
            layer.moving_mean.assign(m)
            layer.moving_variance.assign(v)
        elif getattr(layer, "bias", None) is not None:
            layer.bias.assign(rng.normal(0, 0.2, layer.bias.shape).astype(np.float32))


def freeze(model: keras.Model, shape: tuple) -> tuple[tf.compat.v1.GraphDef, str, str]:
    fn = tf.function(lambda x: model(x, training=False))
    cf = fn.get_concrete_function(tf.TensorSpec((None, *shape), tf.float32, name="input_0"))
    frozen = convert_variables_to_constants_v2(cf)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def logits_of(gd: tf.compat.v1.GraphDef, out: str) -> str:
    nodes = {n.name: n for n in gd.node}
    n = nodes[out.split(":")[0]]
    while n.op == "Identity":
        n = nodes[n.input[0].split(":")[0]]
    assert n.op == "Softmax", n.op
    return n.input[0] if ":" in n.input[0] else n.input[0] + ":0"


def efficientnet_v2_block(rng: np.random.Generator) -> None:
    """EfficientNetV2's blocks at reduced width: a stem, a fused-MBConv (3x3 expand conv + BN
    + swish, 1x1 project + BN, residual), an MBConv with squeeze-excite (1x1 expand, depthwise
    3x3, SE, 1x1 project, residual), a head conv, pooling, Dense, softmax."""
    keras.utils.set_random_seed(SEED)
    inp = keras.Input((24, 24, 3))

    def conv_bn(t, c, k=1, act="swish", depthwise=False):
        if depthwise:
            t = L.DepthwiseConv2D(k, padding="same", use_bias=False)(t)
        else:
            t = L.Conv2D(c, k, padding="same", use_bias=False)(t)
        t = L.BatchNormalization()(t)
        return L.Activation(act)(t) if act else t

    h = conv_bn(inp, 16, 3)
    y = conv_bn(h, 64, 3)                             # fused MBConv
    y = conv_bn(y, 16, 1, act=None)
    h = L.Add()([h, y])
    y = conv_bn(h, 64, 1)                             # MBConv
    y = conv_bn(y, 64, 3, depthwise=True)
    se = L.GlobalAveragePooling2D(keepdims=True)(y)
    se = L.Conv2D(4, 1, activation="swish")(se)
    se = L.Conv2D(64, 1, activation="sigmoid")(se)
    y = L.Multiply()([y, se])
    y = conv_bn(y, 16, 1, act=None)
    h = L.Add()([h, y])
    h = conv_bn(h, 48, 1)                             # head
    h = L.GlobalAveragePooling2D()(h)
    out = L.Dense(10, activation="softmax")(h)
    model = keras.Model(inp, out)
    randomize_bn(model, rng)
    gd, x, y_name = freeze(model, (24, 24, 3))
    write("efficientnet_v2_block", gd,
          {x: rng.uniform(-1, 1, (2, 24, 24, 3)).astype(np.float32)},
          [y_name, logits_of(gd, y_name)],
          "Keras EfficientNetV2-style blocks at reduced width (stem, fused-MBConv, MBConv with "
          "squeeze-excite, head), softmax output and its logits")


def dense_bn(rng: np.random.Generator) -> None:
    """Dense + BatchNormalization + relu, twice, then Dense + softmax (Keras 3 freezes the
    batch norms as per-feature arithmetic: folded into the MatMul's weights)."""
    keras.utils.set_random_seed(SEED + 1)
    inp = keras.Input((20,))
    h = inp
    for units in (32, 32):
        h = L.Dense(units, use_bias=False)(h)
        h = L.BatchNormalization()(h)
        h = L.Activation("relu")(h)
    out = L.Dense(6, activation="softmax")(h)
    model = keras.Model(inp, out)
    randomize_bn(model, rng)
    gd, x, y_name = freeze(model, (20,))
    write("dense_bn", gd, {x: rng.standard_normal((4, 20)).astype(np.float32)},
          [y_name, logits_of(gd, y_name)],
          "Keras Dense + BatchNormalization + relu twice, Dense + softmax, and the logits")


def keras_lstm(rng: np.random.Generator) -> None:
    """Keras LSTM(16) over 12 steps of 24 features, then Dense + softmax: the input
    projection of every step, which the hoist_projection pass computes as one product before
    the loop (a While with library functions, as Keras freezes it)."""
    keras.utils.set_random_seed(SEED + 2)
    inp = keras.Input((12, 24))
    out = L.Dense(4, activation="softmax")(L.LSTM(16)(inp))
    model = keras.Model(inp, out)
    randomize_bn(model, rng)
    gd, x, y_name = freeze(model, (12, 24))
    write("keras_lstm", gd, {x: rng.standard_normal((3, 12, 24)).astype(np.float32)},
          [y_name, logits_of(gd, y_name)],
          "Keras LSTM(16) over 12 steps of 24 features, Dense + softmax, and the logits")


def _tf1_rnn(name: str, rng: np.random.Generator, gru: bool) -> None:
    """tf.compat.v1.nn.dynamic_rnn (control flow v1, TensorArrays) of a TF1 cell over 12
    steps of 24 features, 16 units, batch 3: BasicLSTMCell's math (one MatMul of
    ``concat([x, h])``) or GRUCell's (two: the gates of ``[x, h]``, the candidate of
    ``[x, r * h]``), written here (Keras 3 has no TF1 cells) with its kernels as variables,
    frozen as TF1 models are (each kernel a Const entered into the loop). The products of
    ``[x_t, ...]``, which hoist_concat_projection splits and hoists."""
    steps, features, units = 12, 24, 16
    tf.compat.v1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, steps, features], name="x")
        scale = 1.5 / np.sqrt(features + units)

        def var(vname: str, shape: tuple) -> tf.Variable:
            return v1.get_variable(vname, initializer=(rng.standard_normal(shape) * scale)
                                   .astype(np.float32))

        if gru:
            wg, bg = var("gates/kernel", (features + units, 2 * units)), var("gates/bias",
                                                                             (2 * units,))
            wc, bc = var("candidate/kernel", (features + units, units)), var(
                "candidate/bias", (units,))
        else:
            w, b = var("kernel", (features + units, 4 * units)), var("bias", (4 * units,))

        class Cell:
            state_size = units if gru else (units, units)       # LSTM: (c, h)
            output_size = units

            def zero_state(self, batch, dtype):
                zeros = tf.zeros([batch, units], dtype)
                return zeros if gru else (zeros, zeros)

            def __call__(self, xt, state, scope=None):
                if gru:
                    h = state
                    gates = tf.sigmoid(tf.nn.bias_add(tf.matmul(tf.concat([xt, h], 1), wg), bg))
                    r, u = tf.split(gates, 2, axis=1)
                    cand = tf.tanh(tf.nn.bias_add(tf.matmul(tf.concat([xt, r * h], 1), wc), bc))
                    h = u * h + (1 - u) * cand
                    return h, h
                c, h = state
                i, j, f, o = tf.split(tf.nn.bias_add(tf.matmul(tf.concat([xt, h], 1), w), b),
                                      4, axis=1)
                c = c * tf.sigmoid(f + 1.0) + tf.sigmoid(i) * tf.tanh(j)
                h = tf.tanh(c) * tf.sigmoid(o)
                return h, (c, h)

        cell = Cell()
        outputs, state = v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        state = state if gru else state[0]      # the final h is the last output
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            gd = v1.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), [outputs.op.name, state.op.name])
    tf.compat.v1.enable_control_flow_v2()
    ops = [n.op for n in gd.node]
    assert "NextIteration" in ops and "TensorArrayReadV3" in ops and "While" not in ops, ops
    write(name, gd, {x.name: rng.standard_normal((3, steps, features)).astype(np.float32)},
          [outputs.name, state.name],
          f"TF1 dynamic_rnn of a {'GRUCell' if gru else 'BasicLSTMCell'}-style cell (frozen "
          "variable kernels), 12 steps of 24 features, 16 units: its outputs and final state")


def tf1_dynamic_rnn_lstm(rng: np.random.Generator) -> None:
    _tf1_rnn("tf1_dynamic_rnn_lstm", rng, gru=False)


def tf1_dynamic_rnn_gru(rng: np.random.Generator) -> None:
    _tf1_rnn("tf1_dynamic_rnn_gru", rng, gru=True)


def zoo(name: str) -> None:
    """A model of the zoo (tests/data/models/<name>), with its feed."""
    src = ZOO / name
    case = json.loads((src / "case.json").read_text())
    step = case["steps"][0]
    gd = v1.GraphDef()
    gd.ParseFromString((src / "graph.pb").read_bytes())
    feeds = {k: np.load(src / v) for k, v in step["feed"].items()}
    write(f"zoo_{name}", gd, feeds, list(step["fetch"]),
          f"the zoo's {name} (graph and feed from tests/data/models)",
          graph_path=f"../../models/{name}/graph.pb")


CASES = {"conv_bn_relu": conv_bn_relu, "matmul_bias_act": matmul_bias_act,
         "arithmetic_chains": arithmetic_chains, "efficientnet_v2_block": efficientnet_v2_block,
         "dense_bn": dense_bn, "keras_lstm": keras_lstm,
         "tf1_dynamic_rnn_lstm": tf1_dynamic_rnn_lstm, "tf1_dynamic_rnn_gru": tf1_dynamic_rnn_gru}
ZOO_CASES = ("efficientnet_v2_b0",   # the model
             "resnet50")             # the zoo model its folds moved most (1.7e-4)


def main() -> None:
    """Every case, or those named on the command line (a zoo case as zoo_<name>). Each case
    draws from its own generator, seeded by its name: one regenerated alone is the same."""
    only = set(sys.argv[1:])
    for name, fn in CASES.items():
        if not only or name in only:
            fn(np.random.default_rng([SEED, zlib.crc32(name.encode())]))
    for name in ZOO_CASES:
        if not only or f"zoo_{name}" in only:
            zoo(name)


if __name__ == "__main__":
    main()
