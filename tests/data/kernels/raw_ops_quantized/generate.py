"""Expected values for the eight-bit ops of TF1 quantized graphs (QuantizedMatMul,
QuantizedConv2D, QuantizedRelu/Relu6, QuantizedBiasAdd, QuantizedMaxPool/AvgPool,
QuantizedConcat, QuantizedReshape, QuantizedAdd, QuantizedMul), computed by TensorFlow 2.21
(never run in CI):

    /tmp/tfvenv/bin/python tests/data/kernels/raw_ops_quantized/generate.py

oneDNN is switched off (TF_ENABLE_ONEDNN_OPTS=0) so that TensorFlow runs its reference
kernels. Quantized tensors are stored as their storage integers and their type attrs as
DataType numbers, as in ``raw_ops_array/generate.py``.
"""

import os
import sys
from pathlib import Path

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
import tensorflow as tf  # noqa: E402
from rawgen import f32, graph, i32, raw, write  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

rawgen.begin(HERE)

QUANTIZED = {tf.qint8, tf.quint8, tf.qint16, tf.quint16, tf.qint32}
STORAGE = {tf.qint8: np.int8, tf.quint8: np.uint8, tf.qint32: np.int32}
RNG = np.random.default_rng(7)


def Q(dtype, values):
    """A quantized input: its storage array and TF type."""
    return ("q", dtype, np.asarray(values, dtype=STORAGE[dtype]))


def U8(shape):
    return Q(tf.quint8, RNG.integers(0, 256, shape))


def _is_q(v):
    return isinstance(v, tuple) and v and v[0] == "q"


def _tf_q(v):
    _, dt, arr = v
    return tf.bitcast(tf.constant(arr), dt) if arr.ndim else tf.constant(arr.item(), dtype=dt)


def qop(name: str, inputs: dict, attrs: dict | None = None, note: str = "") -> None:
    """rawgen.op for ops with quantized inputs, outputs or type attrs (list inputs as
    Python lists)."""
    attrs = attrs or {}
    entry: dict = {"op": name, "note": note}
    tf_inputs, keys = {}, []
    for k, v in inputs.items():
        if isinstance(v, list):
            keys.append([rawgen._store(x[2] if _is_q(x) else np.asarray(x)) for x in v])
            tf_inputs[k] = [_tf_q(x) if _is_q(x) else rawgen._tf_input(x) for x in v]
        elif _is_q(v):
            keys.append(rawgen._store(v[2]))
            tf_inputs[k] = _tf_q(v)
        else:
            keys.append(rawgen._store(np.asarray(v)))
            tf_inputs[k] = rawgen._tf_input(v)
    entry["inputs"] = keys
    entry["attrs"] = {k: (v.as_datatype_enum if v in QUANTIZED else rawgen._attr(v))
                      if isinstance(v, tf.DType) else rawgen._attr(v)
                      for k, v in attrs.items()}
    # TF infers the type attrs of quantized inputs; dfg's manifest states them
    for arg in op_def_registry.get(name).input_arg:
        v = inputs.get(arg.name)
        v = v[0] if isinstance(v, list) and v else v
        if arg.type_attr and _is_q(v):
            entry["attrs"][arg.type_attr] = v[1].as_datatype_enum
    try:
        r = getattr(raw, name)(**tf_inputs, **attrs)
        entry["outputs"] = [rawgen._store(np.asarray(x.numpy())) for x in rawgen._flat(r)]
    except tf.errors.OpError as e:
        entry["error"] = type(e).__name__
        print(name, note, "->", type(e).__name__, str(e).split("\n")[0][:160])
    rawgen.CASES.append(entry)


# --- QuantizedMatMul ---------------------------------------------------------------------------
A23 = Q(tf.quint8, np.arange(6).reshape(2, 3) * 40 + 5)
B32 = Q(tf.quint8, np.arange(6).reshape(3, 2) * 30 + 100)


def mm(a, b, ra, rb, note, **kw):
    qop("QuantizedMatMul", dict(a=a, b=b, min_a=f32(ra[0]), max_a=f32(ra[1]),
                                min_b=f32(rb[0]), max_b=f32(rb[1])), kw, note=note)


mm(A23, B32, (-1, 2), (-3, 4), "basic")
mm(U8((5, 7)), U8((7, 4)), (0, 6), (-0.5, 0.5), "zero point 0 for a")
mm(U8((7, 5)), U8((7, 4)), (-2.5, 1.25), (-1, 1), "transpose_a", transpose_a=True)
mm(U8((5, 7)), U8((4, 7)), (-2.5, 1.25), (-1, 1), "transpose_b", transpose_b=True)
mm(U8((7, 5)), U8((4, 7)), (-1, 1), (-7, 3), "both transposed", transpose_a=True,
   transpose_b=True)
mm(U8((3, 40)), U8((40, 6)), (1.0, 3.0), (-5.0, -1.0), "min above 0, max below 0")
mm(U8((3, 40)), U8((40, 6)), (-1e-3, 2e-3), (-300.0, 100.0), "tiny and large ranges")
qop("QuantizedMatMul", dict(a=A23, b=B32, min_a=np.array([-1.0], f32), max_a=f32(2),
                            min_b=f32(-3), max_b=f32(4)), note="min_a not a scalar")
mm(A23, B32, (1, 1), (-3, 4), "max_a == min_a")
mm(A23, Q(tf.quint8, np.zeros((4, 2))), (-1, 2), (-3, 4), "size mismatch")
mm(Q(tf.quint8, np.zeros((1, 2, 3))), B32, (-1, 2), (-3, 4), "3-D a")

# --- QuantizedConv2D ---------------------------------------------------------------------------
X552 = U8((2, 5, 5, 2))
F3323 = U8((3, 3, 2, 3))


def conv(x, f, rx, rf, strides, padding, note, **kw):
    qop("QuantizedConv2D", dict(input=x, filter=f, min_input=f32(rx[0]), max_input=f32(rx[1]),
                                min_filter=f32(rf[0]), max_filter=f32(rf[1])),
        dict(strides=strides, padding=padding, out_type=tf.qint32, **kw), note=note)


conv(X552, F3323, (-1, 2), (-0.5, 0.75), [1, 1, 1, 1], "SAME", "SAME")
conv(X552, F3323, (-1, 2), (-0.5, 0.75), [1, 1, 1, 1], "VALID", "VALID")
conv(X552, F3323, (0, 6), (-1, 1), [1, 2, 2, 1], "SAME", "SAME stride 2")
conv(X552, U8((2, 2, 2, 3)), (-3, 1), (-1, 1), [1, 2, 2, 1], "SAME", "SAME even filter")
conv(X552, F3323, (-1, 2), (-2, 0.5), [1, 2, 2, 1], "VALID", "VALID stride 2")
conv(U8((1, 11, 11, 1)), U8((1, 1, 1, 2)), (-1, 1), (-1, 1), [1, 4, 4, 1], "VALID",
     "VALID stride 4, input not tiled")
conv(X552, F3323, (-2, -1), (-1, 1), [1, 1, 1, 1], "SAME", "max below 0: zero point > 255")
conv(X552, F3323, (1, 2), (-1, 1), [1, 1, 1, 1], "SAME", "min above 0: zero point < 0")
conv(X552, U8((3, 3, 3, 3)), (-1, 2), (-1, 1), [1, 1, 1, 1], "SAME", "depth mismatch")
conv(X552, F3323, (-1, 2), (-1, 1), [1, 1, 2, 1], "SAME", "unequal strides")
conv(X552, F3323, (-1, 2), (-1, 1), [1, 1, 1, 1], "SAME", "dilations",
     dilations=[1, 2, 2, 1])
qop("QuantizedConv2D", dict(input=X552, filter=F3323, min_input=np.array([-1.0], f32),
                            max_input=f32(2), min_filter=f32(-1), max_filter=f32(1)),
    dict(strides=[1, 1, 1, 1], padding="SAME"), note="min_input not a scalar")

# --- QuantizedRelu, QuantizedRelu6 -------------------------------------------------------------
R8 = Q(tf.quint8, np.arange(0, 256, 15))
R32 = Q(tf.qint32, np.array([-2 ** 31, -5_000_000, -1, 0, 1, 300_000_000, 2 ** 31 - 1]))
for op_name in ("QuantizedRelu", "QuantizedRelu6"):
    for rng in ((-1.0, 5.0), (-10.0, 10.0), (0.5, 8.0), (-8.0, -1.0)):
        qop(op_name, dict(features=R8, min_features=f32(rng[0]), max_features=f32(rng[1])),
            dict(out_type=tf.quint8), note=f"quint8 {rng}")
    for rng in ((-3.0, 3.0), (-1.0, 20.0)):
        qop(op_name, dict(features=R32, min_features=f32(rng[0]), max_features=f32(rng[1])),
            dict(out_type=tf.qint32), note=f"qint32 {rng}")
    qop(op_name, dict(features=R8, min_features=np.array([-1.0], f32),
                      max_features=f32(1)), dict(out_type=tf.quint8), note="min not a scalar")

# --- QuantizedBiasAdd --------------------------------------------------------------------------
for x, b, rx, rb, note in (
        (U8((2, 3)), U8((3,)), (-1, 2), (-0.5, 0.5), "2-D"),
        (U8((2, 3, 3, 4)), U8((4,)), (0, 6), (-3, 1), "4-D"),
        (U8((4, 5)), U8((5,)), (-0.001, 0.002), (-100, 50), "very different ranges"),
        (Q(tf.qint8, RNG.integers(-128, 128, (3, 4))), Q(tf.qint8, [-128, -1, 0, 127]),
         (-1, 3), (-1, 1), "qint8")):
    qop("QuantizedBiasAdd", dict(input=x, bias=b, min_input=f32(rx[0]), max_input=f32(rx[1]),
                                 min_bias=f32(rb[0]), max_bias=f32(rb[1])),
        dict(out_type=tf.qint32), note=note)
qop("QuantizedBiasAdd", dict(input=U8((3,)), bias=U8((3,)), min_input=f32(0),
                             max_input=f32(1), min_bias=f32(0), max_bias=f32(1)),
    dict(out_type=tf.qint32), note="1-D input")
qop("QuantizedBiasAdd", dict(input=U8((2, 3)), bias=U8((2,)), min_input=f32(0),
                             max_input=f32(1), min_bias=f32(0), max_bias=f32(1)),
    dict(out_type=tf.qint32), note="bias size")

# --- QuantizedMaxPool, QuantizedAvgPool --------------------------------------------------------
P8 = U8((2, 5, 5, 2))
PI8 = Q(tf.qint8, RNG.integers(-128, 128, (1, 4, 5, 3)))
for op_name in ("QuantizedMaxPool", "QuantizedAvgPool"):
    for x, k, s, pad in ((P8, 2, 2, "VALID"), (P8, 3, 2, "SAME"), (P8, 2, 1, "SAME"),
                         (PI8, 3, 2, "SAME"), (PI8, 2, 2, "VALID")):
        qop(op_name, dict(input=x, min_input=f32(-1.5), max_input=f32(2.5)),
            dict(ksize=[1, k, k, 1], strides=[1, s, s, 1], padding=pad),
            note=f"{x[1].name} {k}x{k}/{s} {pad}")
    qop(op_name, dict(input=Q(tf.quint8, np.zeros((4, 4, 1))), min_input=f32(0),
                      max_input=f32(1)),
        dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), note="3-D input")
    qop(op_name, dict(input=P8, min_input=np.array([0.0], f32), max_input=f32(1)),
        dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"),
        note="min not a scalar")
qop("QuantizedAvgPool", dict(input=P8, min_input=f32(0), max_input=f32(1)),
    dict(ksize=[2, 1, 1, 1], strides=[1, 1, 1, 1], padding="VALID"), note="batch window")

# --- QuantizedConcat ---------------------------------------------------------------------------
C1 = U8((2, 3))
C2 = U8((1, 3))
C3 = U8((2, 2))


def concat(dim, values, los, his, note):
    qop("QuantizedConcat", dict(concat_dim=i32(dim), values=values,
                                input_mins=[f32(v) for v in los],
                                input_maxes=[f32(v) for v in his]), note=note)


concat(0, [C1, C2], (-1, 0.5), (1, 2), "axis 0")
concat(1, [C1, C3, C1], (-1, -1, -1), (1, 1, 1), "axis 1, same ranges: copied")
concat(1, [C1, C3], (0.5, 1), (3, 4), "mins above 0")
concat(0, [C1, Q(tf.quint8, np.zeros((0, 3)))], (-1, -5), (1, 9), "an empty input")
Q32 = Q(tf.qint32, RNG.integers(-2 ** 31, 2 ** 31, (2, 2)))
concat(0, [Q32, Q(tf.qint32, [[7, -7]])], (-2, -1), (3, 10), "qint32: symmetric range")
concat(2, [C1, C2], (-1, 0), (1, 2), "axis out of range")
concat(-1, [C1, C2], (-1, 0), (1, 2), "negative axis")
concat(1, [C1, C2], (-1, 0), (1, 2), "dimension mismatch")
qop("QuantizedConcat", dict(concat_dim=i32(0), values=[C1, C2],
                            input_mins=[np.array([-1.0, 0.0], f32), f32(0)],
                            input_maxes=[f32(1), f32(2)]), note="min with 2 elements")

# --- QuantizedReshape --------------------------------------------------------------------------
qop("QuantizedReshape", dict(tensor=C1, shape=np.array([3, -1], i32), input_min=f32(-1),
                             input_max=f32(2)), note="quint8")
qop("QuantizedReshape", dict(tensor=Q32, shape=np.array([4], i32),
                             input_min=np.array([-1.0], f32), input_max=f32(2)),
    note="qint32, range as 1-element vectors")
qop("QuantizedReshape", dict(tensor=C1, shape=np.array([4], i32), input_min=f32(-1),
                             input_max=f32(2)), note="size mismatch")
qop("QuantizedReshape", dict(tensor=C1, shape=np.array([6], i32),
                             input_min=np.array([-1.0, 0.0], f32), input_max=f32(2)),
    note="min with 2 elements")

# --- QuantizedAdd, QuantizedMul ----------------------------------------------------------------
for op_name in ("QuantizedAdd", "QuantizedMul"):
    for x, y, rx, ry, note in (
            (U8((2, 3)), U8((2, 3)), (-1, 2), (-0.5, 0.5), "same shapes"),
            (U8((3, 4)), Q(tf.quint8, 200), (0, 6), (-3, 1), "tensor and scalar"),
            (Q(tf.quint8, [17]), U8((5,)), (-2, 2), (1, 3), "scalar and tensor"),
            (Q(tf.quint8, 255), Q(tf.quint8, 3), (-2, 2), (-1, 3), "two scalars"),
            (U8((2, 3, 4)), U8((4,)), (-1, 1), (-7, 0.5), "tensor and vector"),
            (U8((3,)), U8((2, 3)), (-1, 1), (-7, 0.5), "vector and tensor"),
            (U8((2, 1, 3)), U8((1, 2, 1)), (-1, 1), (-1, 1), "3-D broadcast"),
            (U8((2, 3)), U8((3, 2)), (-1, 1), (-1, 1), "incompatible shapes"),
            (U8((2, 3)), U8((2, 3)), (1, 1), (-1, 1), "max_x == min_x")):
        qop(op_name, dict(x=x, y=y, min_x=f32(rx[0]), max_x=f32(rx[1]), min_y=f32(ry[0]),
                          max_y=f32(ry[1])), dict(Toutput=tf.qint32), note=note)
    qop(op_name, dict(x=U8((2,)), y=U8((2,)), min_x=np.array([-1.0], f32), max_x=f32(1),
                      min_y=f32(-1), max_y=f32(1)), dict(Toutput=tf.qint32),
        note="min_x not a scalar")


# --- an eightbit graph as quantize_graph writes it ---------------------------------------------
def eightbit_graph():
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(2, 6, 6, 3)).astype(np.float32))
    w = tf.constant(rng.normal(size=(3, 3, 3, 4)).astype(np.float32) * 0.3)
    bias = tf.constant(np.array([0.1, -0.2, 0.3, -0.4], np.float32))
    wm = tf.constant(rng.normal(size=(16, 5)).astype(np.float32) * 0.2)

    def quantize(t):
        lo, hi = tf.reduce_min(t), tf.reduce_max(t)
        return raw.QuantizeV2(input=t, min_range=lo, max_range=hi, T=tf.quint8,
                              mode="MIN_FIRST")

    qx, qw = quantize(x), quantize(w)
    c = raw.QuantizedConv2D(input=qx.output, filter=qw.output, min_input=qx.output_min,
                            max_input=qx.output_max, min_filter=qw.output_min,
                            max_filter=qw.output_max, strides=[1, 1, 1, 1], padding="SAME")
    cr = raw.RequantizationRange(input=c.output, input_min=c.min_output,
                                 input_max=c.max_output)
    c8 = raw.Requantize(input=c.output, input_min=c.min_output, input_max=c.max_output,
                        requested_output_min=cr.output_min, requested_output_max=cr.output_max,
                        out_type=tf.quint8)
    qb = quantize(bias)
    ba = raw.QuantizedBiasAdd(input=c8.output, bias=qb.output, min_input=c8.output_min,
                              max_input=c8.output_max, min_bias=qb.output_min,
                              max_bias=qb.output_max, out_type=tf.qint32)
    b8 = raw.QuantizeDownAndShrinkRange(input=ba.output, input_min=ba.min_out,
                                        input_max=ba.max_out, out_type=tf.quint8)
    r = raw.QuantizedRelu(features=b8.output, min_features=b8.output_min,
                          max_features=b8.output_max, out_type=tf.quint8)
    p = raw.QuantizedMaxPool(input=r.activations, min_input=r.min_activations,
                             max_input=r.max_activations, ksize=[1, 3, 3, 1],
                             strides=[1, 3, 3, 1], padding="VALID")
    flat = raw.QuantizedReshape(tensor=p.output, shape=[2, 16], input_min=p.min_output,
                                input_max=p.max_output)
    qwm = quantize(wm)
    m = raw.QuantizedMatMul(a=flat.output, b=qwm.output, min_a=flat.output_min,
                            max_a=flat.output_max, min_b=qwm.output_min,
                            max_b=qwm.output_max, Toutput=tf.qint32)
    m8 = raw.QuantizeDownAndShrinkRange(input=m.out, input_min=m.min_out,
                                        input_max=m.max_out, out_type=tf.quint8)
    r6 = raw.QuantizedRelu6(features=m8.output, min_features=m8.output_min,
                            max_features=m8.output_max, out_type=tf.quint8)
    y = raw.Dequantize(input=r6.activations, min_range=r6.min_activations,
                       max_range=r6.max_activations, mode="MIN_FIRST")
    return [([c.output, c.min_output, c.max_output, ba.output, p.output, m.out, y], [])]


graph("eightbit", eightbit_graph,
      ["QuantizeV2", "QuantizedConv2D", "QuantizedBiasAdd", "QuantizedRelu",
       "QuantizedMaxPool", "QuantizedReshape", "QuantizedMatMul", "QuantizedRelu6",
       "Dequantize"])

write()
