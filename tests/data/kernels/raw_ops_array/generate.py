"""Expected values for the array/math miscellany and quantization kernels, computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_array/generate.py

oneDNN is switched off (TF_ENABLE_ONEDNN_OPTS=0) so that eager calls run TensorFlow's
reference CPU kernels, the ones its graphs run: with oneDNN on, eager QuantizeV2 MIN_FIRST is
rewritten to a oneDNN kernel that rounds halves to even, while a Session runs the reference
kernel, which rounds them away from zero.

Quantized tensors (qint8, quint8, qint16, quint16, qint32) are stored as their storage
integers and their type attrs as DataType numbers, which is how dfg's kernels see them
(numpy has no quantized dtypes): see ``qop``.
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
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402,F401
from tensorflow.python.framework import op_def_registry  # noqa: E402

rawgen.begin(HERE)

f16 = np.float16
u8, i8, i16, u16, u32, u64 = np.uint8, np.int8, np.int16, np.uint16, np.uint32, np.uint64

# =============================================================================================
# quantized types: inputs given as ("q", tf_dtype, storage array); attrs as tf DTypes
QUANTIZED = {tf.qint8, tf.quint8, tf.qint16, tf.quint16, tf.qint32}


def Q(dtype, values):
    """A quantized input: its storage array and TF type."""
    storage = {tf.qint8: i8, tf.quint8: u8, tf.qint16: i16, tf.quint16: u16, tf.qint32: i32}
    return ("q", dtype, np.asarray(values, dtype=storage[dtype]))


def qop(name: str, inputs: dict, attrs: dict | None = None, tol: float | None = None,
        note: str = "") -> None:
    """rawgen.op for ops with quantized inputs, outputs or type attrs."""
    attrs = attrs or {}
    entry: dict = {"op": name, "note": note}
    tf_inputs = {}
    keys = []
    for k, v in inputs.items():
        if isinstance(v, tuple) and v and v[0] == "q":
            _, dt, arr = v
            keys.append(rawgen._store(arr))
            tf_inputs[k] = tf.bitcast(tf.constant(arr), dt) if arr.ndim else \
                tf.constant(arr.item(), dtype=dt)
        else:
            keys.append(rawgen._store(np.asarray(v)))
            tf_inputs[k] = rawgen._tf_input(v)
    entry["inputs"] = keys
    entry["attrs"] = {k: (v.as_datatype_enum if v in QUANTIZED | {tf.bfloat16}
                          else rawgen._attr(v))
                      if isinstance(v, tf.DType) else rawgen._attr(v)
                      for k, v in attrs.items()}
    # TF infers the type attrs of quantized inputs; dfg's manifest states them
    for arg in op_def_registry.get(name).input_arg:
        v = inputs.get(arg.name)
        if arg.type_attr and isinstance(v, tuple) and v and v[0] == "q":
            entry["attrs"][arg.type_attr] = v[1].as_datatype_enum
    if tol is not None:
        entry["tol"] = tol
    try:
        r = getattr(raw, name)(**tf_inputs, **attrs)
        entry["outputs"] = [rawgen._store(np.asarray(x.numpy())) for x in rawgen._flat(r)]
    except tf.errors.OpError as e:
        entry["error"] = type(e).__name__
    rawgen.CASES.append(entry)


# --- QuantizeV2 ------------------------------------------------------------------------------
XQ = np.array([[-1.3, -1.0, -0.5, -0.25, 0.0, 0.3], [0.5, 0.75, 1.0, 1.7, 2.0, 3.5]], f32)
XQ_HALF = np.array([0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 254.5, 127.5, -127.5, 0.3], f32)
for T in (tf.qint8, tf.quint8, tf.qint16, tf.quint16, tf.qint32):
    for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        qop("QuantizeV2", dict(input=XQ, min_range=f32(-1.0), max_range=f32(2.0)),
            dict(T=T, mode=mode), note=f"{T.name} {mode}")
for T in (tf.qint8, tf.quint8):
    for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        qop("QuantizeV2", dict(input=XQ_HALF, min_range=f32(-127.5), max_range=f32(127.5)),
            dict(T=T, mode=mode), note=f"{T.name} {mode} halves")
        qop("QuantizeV2", dict(input=XQ_HALF, min_range=f32(0.0), max_range=f32(255.0)),
            dict(T=T, mode=mode), note=f"{T.name} {mode} halves, [0, 255]")
qop("QuantizeV2", dict(input=XQ_HALF, min_range=f32(-127.0), max_range=f32(127.0)),
    dict(T=tf.qint8, mode="SCALED", round_mode="HALF_TO_EVEN"), note="half to even")
qop("QuantizeV2", dict(input=XQ, min_range=f32(-1.0), max_range=f32(2.0)),
    dict(T=tf.qint8, mode="SCALED", narrow_range=True), note="narrow")
qop("QuantizeV2", dict(input=XQ, min_range=f32(-3.0), max_range=f32(1.0)),
    dict(T=tf.qint8, mode="SCALED", narrow_range=True, round_mode="HALF_TO_EVEN"),
    note="narrow, min side decides")
qop("QuantizeV2", dict(input=XQ, min_range=f32(0.5), max_range=f32(0.5)),
    dict(T=tf.quint8), note="degenerate range widened by ensure_minimum_range")
qop("QuantizeV2", dict(input=XQ * 100, min_range=f32(-100.0), max_range=f32(-100.0)),
    dict(T=tf.qint8, mode="MIN_FIRST", ensure_minimum_range=0.5), note="ensure_minimum_range")
qop("QuantizeV2", dict(input=XQ, min_range=f32(0.2), max_range=f32(1.0)),
    dict(T=tf.quint8, mode="MIN_FIRST"), note="min above zero")
XQ3 = np.arange(24, dtype=f32).reshape(2, 3, 4) / 4 - 2.5
qop("QuantizeV2", dict(input=XQ3, min_range=np.array([-2.5, -1.0, -3.0], f32),
                       max_range=np.array([3.0, 1.0, 0.5], f32)),
    dict(T=tf.qint8, mode="SCALED", axis=1), note="axis 1")
qop("QuantizeV2", dict(input=XQ3, min_range=np.array([-2.5, -1.0, -3.0, -1], f32),
                       max_range=np.array([3.0, 1.0, 0.5, 2], f32)),
    dict(T=tf.quint8, mode="MIN_COMBINED", axis=2), note="axis 2 min combined")
qop("QuantizeV2", dict(input=XQ3[:, :1], min_range=np.array([-2.5], f32),
                       max_range=np.array([3.0], f32)),
    dict(T=tf.qint8, mode="SCALED", axis=1), note="axis of size 1: scalar ranges")
qop("QuantizeV2", dict(input=XQ3, min_range=f32(-2.0), max_range=f32(2.0)),
    dict(T=tf.qint8, axis=-2), note="axis -2 means none")
qop("QuantizeV2", dict(input=np.zeros((0, 3), f32), min_range=f32(-1.0), max_range=f32(1.0)),
    dict(T=tf.qint8), note="empty")
for bad, kw in (("min > max", dict(min_range=f32(1.0), max_range=f32(-1.0))),
                ("axis too big", dict(min_range=f32(-1.0), max_range=f32(1.0), axis=3)),
                ("axis sizes", dict(min_range=np.array([-1.0, -1.0], f32),
                                    max_range=np.array([1.0, 1.0], f32), axis=1)),
                ("vector range without axis", dict(min_range=np.array([-1.0, -1.0], f32),
                                                   max_range=np.array([1.0, 1.0], f32))),
                ("min first with axis", dict(min_range=np.array([-1.0, -1.0, -1], f32),
                                             max_range=np.array([1.0, 1.0, 1], f32), axis=1,
                                             mode="MIN_FIRST")),
                ("half to even, min combined", dict(min_range=f32(-1.0), max_range=f32(1.0),
                                                    round_mode="HALF_TO_EVEN"))):
    ins = {k: kw.pop(k) for k in ("min_range", "max_range")}
    qop("QuantizeV2", dict(input=XQ3, **ins), dict(T=tf.qint8, **kw), note=bad)

def quantize_roundtrip_graph():
    """qint8/quint8/qint32 tensors flowing between nodes of a graph."""
    x = tf.constant(XQ3)
    steps = []
    for T, mode in ((tf.qint8, "SCALED"), (tf.quint8, "MIN_FIRST"), (tf.qint32, "MIN_COMBINED")):
        q = raw.QuantizeV2(input=x, min_range=-2.0, max_range=3.0, T=T, mode=mode)
        d = raw.Dequantize(input=q.output, min_range=q.output_min, max_range=q.output_max,
                           mode=mode)
        steps.append(([d, q.output_min, q.output_max], []))
    q32 = raw.QuantizeV2(input=x, min_range=-4.0, max_range=4.0, T=tf.qint32)
    r = raw.Requantize(input=q32.output, input_min=q32.output_min, input_max=q32.output_max,
                       requested_output_min=-3.0, requested_output_max=3.0, out_type=tf.quint8)
    d = raw.Dequantize(input=r.output, min_range=r.output_min, max_range=r.output_max)
    steps.append(([d], []))
    return steps


graph("quantize_roundtrip", quantize_roundtrip_graph, ["QuantizeV2", "Dequantize", "Requantize"])


# --- Dequantize ------------------------------------------------------------------------------
QV = {tf.qint8: [-128, -100, -1, 0, 1, 50, 127], tf.quint8: [0, 1, 2, 100, 128, 254, 255],
      tf.qint16: [-32768, -1000, -1, 0, 7, 32767, 12345],
      tf.quint16: [0, 1, 1000, 32768, 65534, 65535, 3],
      tf.qint32: [-2147483648, -65536, -1, 0, 1, 1 << 20, 2147483647]}
for T, vals in QV.items():
    for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        qop("Dequantize", dict(input=Q(T, vals), min_range=f32(-1.5), max_range=f32(3.0)),
            dict(mode=mode), note=f"{T.name} {mode}")
qop("Dequantize", dict(input=Q(tf.qint8, QV[tf.qint8]), min_range=f32(-1.0),
                       max_range=f32(1.0)), dict(mode="SCALED", narrow_range=True),
    note="narrow")
qop("Dequantize", dict(input=Q(tf.quint8, QV[tf.quint8]), min_range=f32(0.5),
                       max_range=f32(0.5)), dict(mode="MIN_FIRST"),
    note="min first, empty range")
QD = np.arange(-12, 12, dtype=i8).reshape(2, 3, 4) * 5
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=np.array([-1.0, -2, -0.5], f32),
                       max_range=np.array([1.0, 0.5, 3.0], f32)),
    dict(mode="SCALED", axis=1), note="axis 1 scaled")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=np.array([-1.0, -2, -0.5, 0], f32),
                       max_range=np.array([1.0, 0.5, 3.0, 4], f32)),
    dict(mode="MIN_COMBINED", axis=2), note="axis 2 min combined")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=f32(-1.0), max_range=f32(1.0)),
    dict(axis=-2), note="axis -2 means none")
qop("Dequantize", dict(input=Q(tf.quint8, np.zeros((0, 2), u8)), min_range=f32(-1.0),
                       max_range=f32(1.0)), None, note="empty")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=f32(-1.0), max_range=f32(1.0)),
    dict(axis=3), note="axis too big")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=np.array([-1.0, 0], f32),
                       max_range=np.array([1.0, 2.0], f32)), dict(axis=1),
    note="axis sizes")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=np.array([-1.0, -2, -0.5], f32),
                       max_range=np.array([1.0, 0.5, 3.0], f32)),
    dict(mode="MIN_FIRST", axis=1), note="min first with axis")
qop("Dequantize", dict(input=Q(tf.qint8, QD), min_range=f32(-1.0), max_range=f32(1.0)),
    dict(mode="SCALED", dtype=tf.bfloat16), note="bfloat16 needs MIN_COMBINED")

# --- QuantizeAndDequantize -------------------------------------------------------------------
XD = np.array([[-1.3, -1.0, -0.51, -0.25, 0.0, 0.3], [0.5, 0.77, 1.0, 1.7, 2.0, 3.5]], f32)
def old_graph_def():
    """A GraphDef of producer version 21: QuantizeAndDequantize (v1) was removed from
    GraphDef version 22 on, so only such graphs (never eager calls) run it."""
    gd = tf.compat.v1.GraphDef()
    gd.versions.producer = 21
    return gd


def node(gd, name, op_name, inputs=(), **attrs):
    n = gd.node.add()
    n.name, n.op = name, op_name
    n.input.extend(inputs)
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            n.attr[k].tensor.CopyFrom(tf.make_tensor_proto(v))
        elif isinstance(v, tf.DType):
            n.attr[k].type = v.as_datatype_enum
        elif isinstance(v, bool):
            n.attr[k].b = v
        elif isinstance(v, int):
            n.attr[k].i = v
        elif isinstance(v, float):
            n.attr[k].f = v
        else:
            n.attr[k].s = v.encode()


def qdq_graph():
    gd = old_graph_def()
    fetches = []
    v1 = [(dt, kw) for dt in (f32, f64) for kw in (
        dict(), dict(signed_input=False), dict(num_bits=4),
        dict(range_given=True, input_min=-1.0, input_max=1.0),
        dict(range_given=True, input_min=0.0, input_max=2.0, signed_input=False))]
    v1 += [(f32, dict(num_bits=0)), (f32, dict(range_given=True, input_min=1.0, input_max=-1.0))]
    for i, (dt, kw) in enumerate(v1):
        full = dict(signed_input=True, num_bits=8, range_given=False, input_min=0.0,
                    input_max=0.0)
        full.update(kw)
        node(gd, f"x{i}", "Const", dtype=tf.as_dtype(dt), value=XD.astype(dt))
        node(gd, f"q{i}", "QuantizeAndDequantize", [f"x{i}"], T=tf.as_dtype(dt), **full)
        fetches.append(f"q{i}:0")
    tf.graph_util.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    return [([g.get_tensor_by_name(f)], []) for f in fetches]


def qdq_half_graph():
    """TF registers no CPU kernel for half: a graph with one fails to run (InvalidArgument)."""
    gd = old_graph_def()
    node(gd, "h", "Const", dtype=tf.float16, value=XD.astype(f16))
    node(gd, "q", "QuantizeAndDequantize", ["h"], T=tf.float16, signed_input=True,
         num_bits=8, range_given=False, input_min=0.0, input_max=0.0)
    fetches = ["q:0"]
    node(gd, "hlo", "Const", dtype=tf.float16, value=np.array(-1, f16))
    node(gd, "hhi", "Const", dtype=tf.float16, value=np.array(1, f16))
    node(gd, "bits", "Const", dtype=tf.int32, value=np.array(8, i32))
    for name in ("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4"):
        node(gd, name, name, ["h", "hlo", "hhi"], T=tf.float16, signed_input=True, num_bits=8,
             range_given=False, round_mode="HALF_TO_EVEN", narrow_range=False, axis=-1)
        fetches.append(f"{name}:0")
    node(gd, "v3", "QuantizeAndDequantizeV3", ["h", "hlo", "hhi", "bits"], T=tf.float16,
         signed_input=True, range_given=True, narrow_range=False, axis=-1)
    fetches.append("v3:0")
    tf.graph_util.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    return [([g.get_tensor_by_name(f)], []) for f in fetches]


graph("quantize_and_dequantize", qdq_graph, ["QuantizeAndDequantize"])
graph("quantize_and_dequantize_half", qdq_half_graph,
      ["QuantizeAndDequantize", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
       "QuantizeAndDequantizeV4"])
for name in ("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4"):
    for dt in (f32, f64):
        for kw in (dict(), dict(signed_input=False, num_bits=3), dict(round_mode="HALF_UP"),
                   dict(narrow_range=True, range_given=True),
                   dict(range_given=True, round_mode="HALF_UP", num_bits=2)):
            op(name, dict(input=XD.astype(dt), input_min=dt(-1.0), input_max=dt(1.5)), kw,
               note=f"{dt.__name__} {kw}")
    op(name, dict(input=XD, input_min=np.array([-1.0, -0.5], f32),
                  input_max=np.array([1.0, 3.0], f32)),
       dict(axis=0, range_given=True), note="axis 0 given")
    op(name, dict(input=XD, input_min=np.array([0.0] * 6, f32),
                  input_max=np.array([0.0] * 6, f32)), dict(axis=1), note="axis 1 computed")
    op(name, dict(input=XD, input_min=np.array([-1.0, -0.5, 0], f32),
                  input_max=np.array([1.0, 3.0, 1], f32)),
       dict(axis=0, range_given=True), note="axis sizes")
    op(name, dict(input=XD, input_min=f32(1.0), input_max=f32(-1.0)),
       dict(range_given=True), note="bad range")
    op(name, dict(input=XD, input_min=f32(-1.0), input_max=f32(1.0)), dict(num_bits=63),
       note="num_bits 63")
    op(name, dict(input=XD, input_min=f32(-1.0), input_max=f32(1.0)), dict(axis=2),
       note="axis too big")
    op(name, dict(input=np.zeros((0, 2), f32), input_min=f32(-1.0), input_max=f32(1.0)),
       note="empty")
XTIE = np.array([0.5, 1.5, -0.5, -1.5, 2.5, -2.5, 126.5, -127.5, 0.49999997], f32)
for name in ("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4"):
    for mode in ("HALF_UP", "HALF_TO_EVEN"):
        op(name, dict(input=XTIE, input_min=f32(-127.0), input_max=f32(127.0)),
           dict(range_given=True, round_mode=mode), note=f"ties {mode}")
qop("QuantizeV2", dict(input=XTIE, min_range=f32(-127.0), max_range=f32(127.0)),
    dict(T=tf.qint8, mode="SCALED"), note="ties away from zero")
op("QuantizeAndDequantizeV3", dict(input=XD, input_min=f32(-1.0), input_max=f32(1.5),
                                   num_bits=i32(5)), note="5 bits")
op("QuantizeAndDequantizeV3", dict(input=XD.astype(f64), input_min=f64(-1.0),
                                   input_max=f64(1.5), num_bits=i32(8)),
   dict(range_given=False, signed_input=False, narrow_range=True), note="computed range")
op("QuantizeAndDequantizeV3", dict(input=XD, input_min=np.array([-1.0, -0.5], f32),
                                   input_max=np.array([1.0, 3.0], f32), num_bits=i32(4)),
   dict(axis=0), note="axis 0")
op("QuantizeAndDequantizeV3", dict(input=XD, input_min=f32(-1.0), input_max=f32(1.5),
                                   num_bits=i32(0)), note="num_bits 0")

# --- FakeQuantWithMinMaxVarsPerChannel -------------------------------------------------------
XF = np.linspace(-3.0, 3.0, 24, dtype=f32).reshape(2, 4, 3)
op("FakeQuantWithMinMaxVarsPerChannel",
   dict(inputs=XF, min=np.array([-1.0, -2.5, 0.0], f32), max=np.array([1.0, 2.0, 0.0], f32)),
   note="3 channels, one all-zero")
op("FakeQuantWithMinMaxVarsPerChannel",
   dict(inputs=XF.reshape(-1), min=np.linspace(-2, -0.1, 24, dtype=f32),
        max=np.linspace(0.2, 2.5, 24, dtype=f32)), dict(num_bits=4, narrow_range=True),
   note="1-D, 4 bits narrow")
op("FakeQuantWithMinMaxVarsPerChannel",
   dict(inputs=XF, min=np.array([-1.0, -2.5], f32), max=np.array([1.0, 2.0], f32)),
   note="wrong size")
op("FakeQuantWithMinMaxVarsPerChannel",
   dict(inputs=XF, min=np.array([-1.0, -2.5, 0], f32), max=np.array([1.0, 2.0, 1], f32)),
   dict(num_bits=1), note="num_bits 1")

# --- requantization --------------------------------------------------------------------------
Q32 = np.array([[-2147483648, -1 << 24, -70000, -1, 0, 1],
                [5000, 1 << 20, 1 << 27, 1 << 30, 2147483647, 123456789]], i32)
for out in (tf.quint8, tf.qint8):
    for lo, hi, rlo, rhi in ((-8.0, 8.0, -1.0, 1.0), (-100.0, 50.0, 0.0, 6.0),
                             (-1.0, 1.0, -1.0, 1.0), (0.0, 0.0, 0.0, 0.0)):
        qop("Requantize", dict(input=Q(tf.qint32, Q32), input_min=f32(lo), input_max=f32(hi),
                               requested_output_min=f32(rlo), requested_output_max=f32(rhi)),
            dict(out_type=out), note=f"{out.name} {lo} {hi} -> {rlo} {rhi}")
qop("Requantize", dict(input=Q(tf.qint32, Q32), input_min=f32(-8), input_max=f32(8),
                       requested_output_min=f32(1.0), requested_output_max=f32(2.0)),
    dict(out_type=tf.quint8), note="requested min > 0")
qop("Requantize", dict(input=Q(tf.qint32, Q32), input_min=f32(-8), input_max=f32(8),
                       requested_output_min=f32(-1.0), requested_output_max=f32(-0.5)),
    dict(out_type=tf.quint8), note="requested max < 0")
qop("Requantize", dict(input=Q(tf.qint32, Q32), input_min=f32(-8), input_max=f32(8),
                       requested_output_min=f32(-1.0), requested_output_max=f32(-2.0)),
    dict(out_type=tf.quint8), note="requested max < min")
qop("Requantize", dict(input=Q(tf.qint32, np.zeros(0, i32)), input_min=f32(-8),
                       input_max=f32(8), requested_output_min=f32(-1.0),
                       requested_output_max=f32(1.0)), dict(out_type=tf.quint8), note="empty")
for lo, hi in ((-8.0, 8.0), (0.0, 10.0), (-3.0, -3.0)):
    qop("RequantizationRange", dict(input=Q(tf.qint32, Q32), input_min=f32(lo),
                                    input_max=f32(hi)), note=f"{lo} {hi}")
    qop("QuantizeDownAndShrinkRange", dict(input=Q(tf.qint32, Q32), input_min=f32(lo),
                                           input_max=f32(hi)), dict(out_type=tf.quint8),
        note=f"{lo} {hi}")
Q32_POS = np.abs(Q32[:, 3:]) + 7
qop("RequantizationRange", dict(input=Q(tf.qint32, Q32_POS), input_min=f32(-4),
                                input_max=f32(4)), note="positive values")
qop("QuantizeDownAndShrinkRange", dict(input=Q(tf.qint32, Q32_POS), input_min=f32(-4),
                                       input_max=f32(4)), dict(out_type=tf.quint8),
    note="positive values")
qop("RequantizationRange", dict(input=Q(tf.qint32, np.zeros(0, i32)), input_min=f32(-4),
                                input_max=f32(4)), note="empty")
qop("QuantizeDownAndShrinkRange", dict(input=Q(tf.qint32, np.zeros(0, i32)),
                                       input_min=f32(-4), input_max=f32(4)),
    dict(out_type=tf.quint8), note="empty")
Q4 = (np.arange(2 * 2 * 3 * 3, dtype=np.int64).reshape(2, 2, 3, 3) - 15) * 40000000
Q4 = Q4.astype(i32)
for clip in (100.0, 0.5):
    qop("RequantizationRangePerChannel",
        dict(input=Q(tf.qint32, Q4), input_min=np.array([-10.0, -1.0, -5.0], f32),
             input_max=np.array([10.0, 2.0, 5.0], f32)), dict(clip_value_max=clip),
        note=f"clip {clip}")
qop("RequantizationRangePerChannel",
    dict(input=Q(tf.qint32, np.abs(Q4)), input_min=np.array([-10.0, -1.0, -5.0], f32),
         input_max=np.array([10.0, 2.0, 5.0], f32)), dict(clip_value_max=50.0),
    note="non-negative")
qop("RequantizationRangePerChannel",
    dict(input=Q(tf.qint32, np.zeros_like(Q4)), input_min=np.array([-10.0, -1.0, -5.0], f32),
         input_max=np.array([10.0, 2.0, 5.0], f32)), dict(clip_value_max=50.0),
    note="zeros")
qop("RequantizationRangePerChannel",
    dict(input=Q(tf.qint32, Q4[0, 0]), input_min=np.array([-10.0, -1.0, -5.0], f32),
         input_max=np.array([10.0, 2.0, 5.0], f32)), dict(clip_value_max=50.0),
    note="not 4-D")
qop("RequantizationRangePerChannel",
    dict(input=Q(tf.qint32, Q4), input_min=np.array([-10.0, -1.0], f32),
         input_max=np.array([10.0, 2.0, 5.0], f32)), dict(clip_value_max=50.0),
    note="min size")
for out, rlo, rhi in ((tf.qint8, -3.0, 3.0), (tf.quint8, 0.0, 5.0), (tf.quint8, -2.0, 1.0)):
    qop("RequantizePerChannel",
        dict(input=Q(tf.qint32, Q4), input_min=np.array([-10.0, -1.0, -5.0], f32),
             input_max=np.array([10.0, 2.0, 5.0], f32), requested_output_min=f32(rlo),
             requested_output_max=f32(rhi)), dict(out_type=out), note=f"{out.name}")
qop("RequantizePerChannel",
    dict(input=Q(tf.qint32, Q4), input_min=np.array([-10.0, -1.0, -5.0], f32),
         input_max=np.array([10.0, 2.0, 5.0], f32), requested_output_min=f32(0.0),
         requested_output_max=f32(3.0)), dict(out_type=tf.qint8), note="qint8 needs min < 0")
qop("RequantizePerChannel",
    dict(input=Q(tf.qint32, Q4), input_min=np.array([-10.0, -1.0, -5.0], f32),
         input_max=np.array([10.0, 2.0], f32), requested_output_min=f32(-1.0),
         requested_output_max=f32(3.0)), dict(out_type=tf.qint8), note="max size")

# =============================================================================================
# array / math miscellany
def xla_op(name: str, inputs: dict, attrs: dict | None = None, note: str = "") -> None:
    """rawgen.op for ops TF runs only through XLA (no CPU kernel): one jit-compiled call."""
    attrs = attrs or {}
    entry: dict = {"op": name, "note": note + " (XLA)"}
    entry["inputs"] = [rawgen._store(np.asarray(v)) for v in inputs.values()]
    entry["attrs"] = {k: rawgen._attr(v) for k, v in attrs.items()}
    ts = {k: tf.constant(v) for k, v in inputs.items()}
    r = tf.function(lambda: getattr(raw, name)(**ts, **attrs), jit_compile=True)()
    entry["outputs"] = [rawgen._store(x) for x in rawgen._flat(r)]
    rawgen.CASES.append(entry)


# --- Bitcast ---------------------------------------------------------------------------------
BITS = np.array([1.5, -2.25, 0.0, np.inf], f32)
for src, dst in ((f32, i32), (f32, u8), (f32, u16), (f32, np.complex64), (f64, f32),
                 (f64, np.complex128), (i64, u32), (u8, i8), (f16, i16), (i16, f16),
                 (np.complex64, f64), (np.complex128, u64)):
    a, b = np.dtype(src).itemsize, np.dtype(dst).itemsize
    x = np.frombuffer(BITS.tobytes(), src).copy()   # 16 bytes as `src`
    if a < b:
        x = x.reshape(-1, b // a)
    op("Bitcast", dict(input=x), dict(type=tf.as_dtype(dst)),
       note=f"{src.__name__}->{dst.__name__}")
op("Bitcast", dict(input=np.array(3.5, f32)), dict(type=tf.uint8), note="scalar to bytes")
op("Bitcast", dict(input=np.array(7, i32)), dict(type=tf.float32), note="scalar same size")
op("Bitcast", dict(input=np.zeros((0, 4), u8)), dict(type=tf.float32), note="empty")
op("Bitcast", dict(input=np.zeros((2, 3), u8)), dict(type=tf.float32), note="bad last dim")
op("Bitcast", dict(input=np.array(1, u8)), dict(type=tf.int16), note="scalar too small")
qop("Bitcast", dict(input=np.array([-1, 2, 300], i32)), dict(type=tf.qint32), note="to qint32")
qop("Bitcast", dict(input=Q(tf.quint8, [[1, 2], [255, 0]])), dict(type=tf.int16),
    note="quint8 to int16")

# --- PopulationCount -------------------------------------------------------------------------
for dt in (i8, i16, i32, i64, u8, u16, np.uint32, u64):
    info = np.iinfo(dt)
    x = np.array([0, 1, 3, 7, info.max, info.min, 85, 2 ** (info.bits - 2)], dtype=dt)
    if info.min < 0:
        x = np.concatenate([x, np.array([-1, -2], dt)])
    op("PopulationCount", dict(x=x.reshape(2, -1)), note=dt.__name__)
op("PopulationCount", dict(x=np.zeros((0, 3), i32)), note="empty")

# --- CumulativeLogsumexp ---------------------------------------------------------------------
CL = np.array([[0.5, -1.0, 2.0, 3.0], [-np.inf, 0.0, -np.inf, 1.0], [10.0, 10.0, -5.0, 0.25]])
for dt, tol in ((f32, 1e-5), (f64, 1e-12), (f16, 1e-2)):
    for kw in (dict(), dict(exclusive=True), dict(reverse=True),
               dict(exclusive=True, reverse=True)):
        op("CumulativeLogsumexp", dict(x=CL.astype(dt), axis=i32(1)), kw, tol=tol,
           note=f"{dt.__name__} {kw}")
op("CumulativeLogsumexp", dict(x=CL.astype(f32), axis=i64(-2)), dict(exclusive=True),
   note="axis -2 int64")
op("CumulativeLogsumexp", dict(x=np.zeros((0, 3), f32), axis=i32(0)), note="empty")
op("CumulativeLogsumexp", dict(x=np.array([[np.nan, 1.0, np.nan, 2.0, np.inf, -np.inf],
                                            [np.inf, np.inf, 1.0, -np.inf, 0.0, 0.0]], f32),
                               axis=i32(1)), note="nan, inf")
op("CumulativeLogsumexp", dict(x=CL.astype(f32), axis=np.array([1], i32)), note="axis vector")
op("CumulativeLogsumexp", dict(x=CL.astype(f32), axis=i32(2)), note="bad axis")

# --- ReverseSequence -------------------------------------------------------------------------
RS = np.arange(2 * 4 * 3, dtype=i32).reshape(2, 4, 3)
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([3, 0], i64)), dict(seq_dim=1),
   note="seq 1 batch 0")
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([1, 4, 2], i32)),
   dict(seq_dim=1, batch_dim=2), note="batch after seq, int32 lengths")
op("ReverseSequence", dict(input=RS.astype(f32), seq_lengths=np.array([2, 3, 1, 2], i64)),
   dict(seq_dim=0, batch_dim=1), note="seq before batch")
op("ReverseSequence", dict(input=np.array([[b"a", b"b", b"c"], [b"d", b"e", b"f"]], object),
                           seq_lengths=np.array([3, 2], i64)), dict(seq_dim=1),
   note="strings")
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([5, 0], i64)), dict(seq_dim=1),
   note="length exceeds the dim")
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([-1, 0], i64)), dict(seq_dim=1),
   note="negative length")
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([1, 2, 3], i64)), dict(seq_dim=1),
   note="wrong number of lengths")
op("ReverseSequence", dict(input=RS, seq_lengths=np.array([1, 2], i64)), dict(seq_dim=0),
   note="seq_dim == batch_dim")

# --- InplaceAdd / InplaceSub / InplaceUpdate -------------------------------------------------
IX = np.arange(12, dtype=f32).reshape(4, 3)
IV = np.array([[1, 2, 3], [10, 20, 30], [100, 200, 300]], f32)
for name in ("InplaceAdd", "InplaceSub", "InplaceUpdate"):
    op(name, dict(x=IX, i=np.array([3, 0, 3], i32), v=IV), note="duplicate rows")
    op(name, dict(x=IX.astype(i64), i=np.array([1], i32), v=IV[:1].astype(i64)), note="int64")
    op(name, dict(x=IX, i=np.array([4, 0, 1], i32), v=IV), note="row out of range")
    op(name, dict(x=IX, i=np.array([0, 1], i32), v=IV), note="i and v sizes")
    op(name, dict(x=IX, i=np.array([0, 1, 2], i32), v=IV[:, :2]), note="row shapes")
op("InplaceUpdate", dict(x=np.array([b"a", b"b", b"c"], object), i=np.array([2], i32),
                         v=np.array([b"z"], object)), note="strings")
op("InplaceUpdate", dict(x=IX, i=np.zeros(0, i32), v=np.zeros((0, 3), f32)), note="no rows")
op("InplaceUpdate", dict(x=np.array([True, False, False]), i=np.array([-1, 0], i32),
                         v=np.array([True, False])), note="bool, negative row")
op("InplaceAdd", dict(x=np.array([True, False]), i=np.array([0], i32), v=np.array([True])),
   note="bool")
op("InplaceSub", dict(x=np.array([b"a"], object), i=np.array([0], i32),
                      v=np.array([b"b"], object)), note="strings")

# --- ListDiff --------------------------------------------------------------------------------
op("ListDiff", dict(x=np.array([1, 2, 3, 4, 2, 6], i32), y=np.array([2, 5, 1], i32)),
   note="int32")
op("ListDiff", dict(x=np.array([1, 2, 3], i64), y=np.array([], i64)),
   dict(out_idx=tf.int64), note="empty y, int64 idx")
op("ListDiff", dict(x=np.array([b"a", b"bb", b"", b"a"], object), y=np.array([b"a"], object)),
   note="strings")
op("ListDiff", dict(x=np.array([0.5, np.nan, -0.0], f32), y=np.array([0.0, np.nan], f32)),
   note="floats, nan and -0")
op("ListDiff", dict(x=np.array([[1, 2]], i32), y=np.array([2], i32)), note="x not 1-D")
op("ListDiff", dict(x=np.array([1, 2, 3], f16), y=np.array([2], f16)), note="half")

# --- UnravelIndex ----------------------------------------------------------------------------
op("UnravelIndex", dict(indices=np.array([0, 5, 7, 23], i32), dims=np.array([2, 3, 4], i32)),
   note="vector")
op("UnravelIndex", dict(indices=i64(17), dims=np.array([4, 5], i64)), note="scalar int64")
op("UnravelIndex", dict(indices=np.array([], i32), dims=np.array([4, 5], i32)), note="empty")
op("UnravelIndex", dict(indices=np.array([-1, -7], i32), dims=np.array([2, 3], i32)),
   note="negative indices")
op("UnravelIndex", dict(indices=np.array([6], i32), dims=np.array([2, 3], i32)),
   note="out of bounds")
op("UnravelIndex", dict(indices=np.array([1], i32), dims=np.array([2, 0], i32)), note="zero dim")
op("UnravelIndex", dict(indices=np.array([1], i32), dims=np.array([2, -3], i32)),
   note="negative dim")
op("UnravelIndex", dict(indices=np.array([[1]], i32), dims=np.array([2, 3], i32)),
   note="indices matrix")

# --- NthElement ------------------------------------------------------------------------------
NE = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [-5, 8, 9, 7, -9]])
for dt in (f32, f64, i32, u8, i16, i8, i64, u16, np.uint32, u64, f16):
    op("NthElement", dict(input=np.abs(NE).astype(dt) if np.dtype(dt).kind == "u"
                          else NE.astype(dt), n=i32(1)), note=dt.__name__)
op("NthElement", dict(input=NE.astype(f32), n=i32(0)), dict(reverse=True), note="reverse max")
op("NthElement", dict(input=NE.astype(f32)[0], n=i32(4)), note="1-D: a scalar")
op("NthElement", dict(input=NE.reshape(3, 1, 5).astype(i32), n=i32(2)), dict(reverse=True),
   note="3-D reverse")
op("NthElement", dict(input=NE.astype(f32), n=i32(5)), note="n too big")
op("NthElement", dict(input=NE.astype(f32), n=i32(-1)), note="negative n")
op("NthElement", dict(input=np.float32(2), n=i32(0)), note="scalar input")

# --- HistogramFixedWidth ---------------------------------------------------------------------
HV = np.array([-1.0, 0.0, 1.5, 2.0, 2.5, 4.99, 5.0, 7.0, 100.0, -50.0])
for dt in (f32, f64, i32, i64):
    op("HistogramFixedWidth", dict(values=HV.astype(dt), value_range=np.array([0, 5], dt),
                                   nbins=i32(5)), note=dt.__name__)
op("HistogramFixedWidth", dict(values=HV.reshape(2, 5).astype(f32),
                               value_range=np.array([-1.0, 2.0], f32), nbins=i32(3)),
   dict(dtype=tf.int64), note="2-D, int64 out")
op("HistogramFixedWidth", dict(values=np.arange(10, dtype=f32) / 10,
                               value_range=np.array([0.0, 0.9], f32), nbins=i32(9)),
   note="bin edges")
op("HistogramFixedWidth", dict(values=np.zeros(0, f32), value_range=np.array([0, 1], f32),
                               nbins=i32(2)), note="empty")
op("HistogramFixedWidth", dict(values=np.array([np.inf, -np.inf, 1.0], f32),
                               value_range=np.array([0, 2], f32), nbins=i32(2)), note="inf")
op("HistogramFixedWidth", dict(values=np.array([np.nan, 1.0], f32),
                               value_range=np.array([0, 2], f32), nbins=i32(2)), note="nan")
op("HistogramFixedWidth", dict(values=HV.astype(f32), value_range=np.array([5, 0], f32),
                               nbins=i32(5)), note="empty range")
op("HistogramFixedWidth", dict(values=HV.astype(f32), value_range=np.array([0, 5], f32),
                               nbins=i32(0)), note="no bins")
op("HistogramFixedWidth", dict(values=HV.astype(f32), value_range=np.array([0, 5, 6], f32),
                               nbins=i32(2)), note="range of 3")

# --- DataFormatDimMap / DataFormatVecPermute -------------------------------------------------
for src, dst in (("NHWC", "NCHW"), ("NCHW", "NHWC"), ("NDHWC", "NCDHW"), ("NHWC", "HWNC"),
                 ("NCDHW", "NDHWC")):
    n = len(src)
    op("DataFormatDimMap", dict(x=np.arange(-n, n, dtype=i32).reshape(2, n)),
       dict(src_format=src, dst_format=dst), note=f"{src}->{dst}")
    op("DataFormatVecPermute", dict(x=np.arange(10, 10 + n, dtype=i64)),
       dict(src_format=src, dst_format=dst), note=f"{src}->{dst} full")
    op("DataFormatVecPermute", dict(x=np.arange(20, 20 + 2 * n, dtype=i32).reshape(n, 2)),
       dict(src_format=src, dst_format=dst), note=f"{src}->{dst} 2-D")
    op("DataFormatVecPermute", dict(x=np.arange(5, 5 + n - 2, dtype=i32)),
       dict(src_format=src, dst_format=dst), note=f"{src}->{dst} spatial")
op("DataFormatDimMap", dict(x=i64(3)), note="scalar int64 default formats")
op("DataFormatDimMap", dict(x=np.array([4, -5, 7, -9, 100], i32)), note="out of range")
op("DataFormatDimMap", dict(x=np.array([5, -6, 9], i64)),
   dict(src_format="NDHWC", dst_format="NCDHW"), note="5-D out of range")
op("DataFormatVecPermute", dict(x=np.arange(4, dtype=i32)),
   dict(src_format="NHWC", dst_format="NWHC"), note="spatial swap")
op("DataFormatVecPermute", dict(x=np.arange(2, dtype=i32)),
   dict(src_format="NHWC", dst_format="NWHC"), note="spatial-only swap")
op("DataFormatDimMap", dict(x=np.array([1], i32)), dict(src_format="NHW", dst_format="NWH"),
   note="3 letters")
op("DataFormatDimMap", dict(x=np.array([1], i32)), dict(src_format="NHWC", dst_format="NCHWD"),
   note="lengths differ")
op("DataFormatDimMap", dict(x=np.array([1], i32)), dict(src_format="NHWC", dst_format="ABCD"),
   note="not a permutation")
op("DataFormatVecPermute", dict(x=np.arange(3, dtype=i32)), note="size 3")
op("DataFormatVecPermute", dict(x=np.arange(12, dtype=i32).reshape(4, 3)), note="4x3")
op("DataFormatVecPermute", dict(x=np.zeros((2, 2, 2), i32)), note="3-D")

# --- GuaranteeConst / Copy / CopyHost / DeepCopy / Empty / Timestamp -------------------------
for name in ("GuaranteeConst", "DeepCopy"):
    op(name, dict(**{"input" if name == "GuaranteeConst" else "x": IX}), note="float")
    op(name, dict(**{"input" if name == "GuaranteeConst" else "x":
                     np.array([b"s", b""], object)}), note="strings")
for name in ("Copy", "CopyHost"):
    op(name, dict(input=IX.astype(i64)), note="int64")
    op(name, dict(input=np.array([True, False])), dict(tensor_name="t:0"), note="bool")
for dt in (tf.float32, tf.int64, tf.bool, tf.string, tf.complex64):
    op("Empty", dict(shape=np.array([2, 3], i32)), dict(dtype=dt, init=True),
       note=f"{dt.name} init")
op("Empty", dict(shape=np.array([3, 0, 2], i32)), dict(dtype=tf.float64), unspecified=(0,),
   note="uninitialized")
op("Empty", dict(shape=np.array([], i32)), dict(dtype=tf.int32, init=True), note="scalar")
op("Empty", dict(shape=np.array([2, -1], i32)), dict(dtype=tf.float32), note="negative dim")
op("Timestamp", {}, unspecified=(0,), note="any time")

# --- UniqueWithCountsV2 ----------------------------------------------------------------------
UA = np.array([[1, 2, 1, 2], [3, 4, 3, 5], [1, 2, 1, 2]], i32)
op("UniqueWithCountsV2", dict(x=np.array([4, 1, 4, 2, 1, 4], i64), axis=np.array([], i64)),
   note="1-D no axis")
op("UniqueWithCountsV2", dict(x=np.array([4, 1, 4], i32), axis=np.array([0], i32)),
   dict(out_idx=tf.int64), note="1-D axis 0 int64 idx")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([0], i64)), note="rows")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([1], i64)), note="columns")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([-1], i32)), note="axis -1")
op("UniqueWithCountsV2", dict(x=UA.reshape(3, 2, 2).astype(f32), axis=np.array([2], i64)),
   note="3-D axis 2")
op("UniqueWithCountsV2", dict(x=np.array([[b"a", b"b"], [b"a", b"b"], [b"b", b"a"]], object),
                              axis=np.array([0], i64)), note="string rows")
op("UniqueWithCountsV2", dict(x=np.array([b"x", b"y", b"x"], object), axis=np.array([], i64)),
   note="strings")
op("UniqueWithCountsV2", dict(x=np.array([0.0, -0.0, 1.5], f32), axis=np.array([], i64)),
   note="signed zeros")
op("UniqueWithCountsV2", dict(x=np.zeros((0, 3), i32), axis=np.array([0], i64)),
   note="empty rows")
op("UniqueWithCountsV2", dict(x=np.array([[True, False], [True, False]]),
                              axis=np.array([0], i64)), note="bool rows")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([2], i64)), note="bad axis")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([], i64)), note="2-D without axis")
op("UniqueWithCountsV2", dict(x=UA, axis=np.array([0, 1], i64)), note="two axes")

# --- ApproxTopK ------------------------------------------------------------------------------
# TF's CPU kernel takes the largest k along the last dimension (reduction_dimension -1); the
# other settings only run compiled by XLA, whose CPU fallback is exact as well.
AT = np.array([[0.5, 3.0, -1.0, 7.5, 2.0, 6.0], [9.0, -2.0, 4.0, 1.0, 8.5, 0.0],
               [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]], f32)
op("ApproxTopK", dict(input=AT), dict(k=2), note="max k")
op("ApproxTopK", dict(input=AT.astype(f16)), dict(k=3), note="half")
op("ApproxTopK", dict(input=AT), dict(k=1), note="k 1")
op("ApproxTopK", dict(input=AT), dict(k=0), note="k 0")
op("ApproxTopK", dict(input=AT), dict(k=2, aggregate_to_topk=False), note="not aggregated")
op("ApproxTopK", dict(input=AT[0]), dict(k=4, recall_target=0.5), note="1-D")
op("ApproxTopK", dict(input=np.array([1, np.nan, 3, 2, 3], f32)), dict(k=3), note="nan, tie")
BIG = np.sin(np.arange(2 * 300, dtype=f32) * 1.7).reshape(2, 300)
op("ApproxTopK", dict(input=BIG), dict(k=5), note="wide rows")
op("ApproxTopK", dict(input=BIG), dict(k=5, aggregate_to_topk=False, recall_target=0.99),
   note="wide, not aggregated")
op("ApproxTopK", dict(input=AT), dict(k=7), note="k too big")
xla_op("ApproxTopK", dict(input=AT), dict(k=3, is_max_k=False), note="min k")
xla_op("ApproxTopK", dict(input=AT), dict(k=2, reduction_dimension=0), note="dimension 0")
xla_op("ApproxTopK", dict(input=AT.astype(f16)), dict(k=2, reduction_dimension=-2),
       note="half, dimension -2")
xla_op("ApproxTopK", dict(input=AT.reshape(3, 2, 3)),
       dict(k=2, reduction_dimension=1, is_max_k=False, aggregate_to_topk=False), note="3-D")

# --- SparseMatMul ----------------------------------------------------------------------------
SA = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.5, -1.0, 0.0], [0.0, 3.0, 0.0]], f32)
SB = np.array([[2.0, 0.0], [0.0, -1.0], [1.5, 4.0]], f32)
op("SparseMatMul", dict(a=SA, b=SB), note="plain")
op("SparseMatMul", dict(a=SA, b=SB), dict(a_is_sparse=True, b_is_sparse=True), note="hints")
op("SparseMatMul", dict(a=SA.T.copy(), b=SB.T.copy()),
   dict(transpose_a=True, transpose_b=True, a_is_sparse=True), note="transposes")
op("SparseMatMul", dict(a=np.zeros((0, 3), f32), b=SB), note="empty")
op("SparseMatMul", dict(a=SA, b=SB.T.copy()), note="inner dims")

# --- SegmentXxxV2 (XLA only) -----------------------------------------------------------------
SD = np.array([[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0], [7.0, 0.5], [2.0, 2.0]], f32)
for name in ("SegmentSumV2", "SegmentProdV2", "SegmentMaxV2", "SegmentMinV2"):
    xla_op(name, dict(data=SD, segment_ids=np.array([0, 0, 2, 2, 3], i32),
                      num_segments=i32(5)), note="sorted, gaps")
    xla_op(name, dict(data=SD.astype(i32), segment_ids=np.array([1, 0, 1, 5, -1], i64),
                      num_segments=i64(3)), note="unsorted, out of range dropped")
    xla_op(name, dict(data=SD[:, 0].astype(f64), segment_ids=np.array([0, 1, 1, 1, 2], i32),
                      num_segments=i32(2)), note="float64")
    xla_op(name, dict(data=np.zeros((0, 2), f32), segment_ids=np.zeros(0, i32),
                      num_segments=i32(2)), note="empty")
xla_op("SegmentSumV2", dict(data=(SD[:, 0] + 1j * SD[:, 1]).astype(np.complex64),
                            segment_ids=np.array([0, 0, 1, 1, 1], i32), num_segments=i32(2)),
       note="complex")
xla_op("SegmentMaxV2", dict(data=SD.astype(u8), segment_ids=np.array([0, 0, 2, 2, 2], i32),
                            num_segments=i32(4)), note="uint8")

# --- EditDistance ----------------------------------------------------------------------------
# hypothesis / truth: [batch 2, 2, seq], groups (0,0) (0,1) (1,0) (1,1)
H_IDX = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2]], i64)
H_VAL = np.array([1, 2, 3, 4, 5, 6], i32)
T_IDX = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 2], [1, 0, 0], [1, 0, 1], [1, 1, 0]], i64)
T_VAL = np.array([1, 3, 2, 4, 6, 7], i32)
for norm in (True, False):
    op("EditDistance", dict(hypothesis_indices=H_IDX, hypothesis_values=H_VAL,
                            hypothesis_shape=np.array([2, 2, 3], i64), truth_indices=T_IDX,
                            truth_values=T_VAL, truth_shape=np.array([2, 3, 3], i64)),
       dict(normalize=norm), note=f"normalize {norm}")
op("EditDistance", dict(hypothesis_indices=np.array([[0, 0], [0, 1], [2, 0]], i64),
                        hypothesis_values=np.array([b"ab", b"c", b"d"], object),
                        hypothesis_shape=np.array([3, 2], i64),
                        truth_indices=np.array([[0, 0], [1, 0]], i64),
                        truth_values=np.array([b"ab", b"x"], object),
                        truth_shape=np.array([2, 1], i64)), note="strings, rank 2")
op("EditDistance", dict(hypothesis_indices=np.zeros((0, 2), i64),
                        hypothesis_values=np.zeros(0, f32), hypothesis_shape=np.array([2, 0], i64),
                        truth_indices=np.array([[1, 0]], i64), truth_values=np.array([1.5], f32),
                        truth_shape=np.array([2, 1], i64)), dict(normalize=False),
   note="empty hypothesis")
op("EditDistance", dict(hypothesis_indices=H_IDX[:, 1:], hypothesis_values=H_VAL,
                        hypothesis_shape=np.array([2, 3], i64), truth_indices=T_IDX,
                        truth_values=T_VAL, truth_shape=np.array([2, 3, 3], i64)),
   note="ranks differ")
op("EditDistance", dict(hypothesis_indices=H_IDX, hypothesis_values=H_VAL[:5],
                        hypothesis_shape=np.array([2, 2, 3], i64), truth_indices=T_IDX,
                        truth_values=T_VAL, truth_shape=np.array([2, 3, 3], i64)),
   note="values count")
op("EditDistance", dict(hypothesis_indices=np.array([[0]], i64), hypothesis_values=H_VAL[:1],
                        hypothesis_shape=np.array([2], i64),
                        truth_indices=np.array([[0]], i64), truth_values=T_VAL[:1],
                        truth_shape=np.array([2], i64)), note="rank 1")

# --- sets ------------------------------------------------------------------------------------
S1 = np.array([[[1, 2, 2, 5], [3, 3, 3, 3]], [[7, 1, 0, 4], [9, 8, 7, 6]]], i32)
S2 = np.array([[[2, 5, 6], [4, 4, 4]], [[0, 1, 2], [6, 7, 8]]], i32)


def sparse_of(dense, skip):
    """A SparseTensor of ``dense`` without the entries equal to ``skip``."""
    idx = np.argwhere(dense != skip).astype(i64)
    return idx, dense[dense != skip], np.array(dense.shape, i64)


for setop in ("a-b", "b-a", "intersection", "union"):
    op("DenseToDenseSetOperation", dict(set1=S1, set2=S2), dict(set_operation=setop),
       note=setop)
    i2, v2, s2 = sparse_of(S2, 4)
    op("DenseToSparseSetOperation", dict(set1=S1, set2_indices=i2, set2_values=v2,
                                         set2_shape=s2), dict(set_operation=setop), note=setop)
    i1, v1, s1 = sparse_of(S1, 3)
    op("SparseToSparseSetOperation", dict(set1_indices=i1, set1_values=v1, set1_shape=s1,
                                          set2_indices=i2, set2_values=v2, set2_shape=s2),
       dict(set_operation=setop), note=setop)
STR1 = np.array([[b"a", b"b", b""], [b"c", b"c", b"a"]], object)
STR2 = np.array([[b"b", b"z"], [b"", b"a"]], object)
op("DenseToDenseSetOperation", dict(set1=STR1, set2=STR2), dict(set_operation="union"),
   note="strings")
op("DenseToDenseSetOperation", dict(set1=S1[..., :2].astype(i64).reshape(4, 2),
                                    set2=S2.astype(i64).reshape(4, 3)),
   dict(set_operation="intersection"), note="int64")
for dt in (i8, i16, u8, u16):
    op("DenseToDenseSetOperation", dict(set1=np.abs(S1).astype(dt), set2=np.abs(S2).astype(dt)),
       dict(set_operation="a-b"), note=dt.__name__)
op("DenseToDenseSetOperation", dict(set1=S1, set2=S2[:1]), dict(set_operation="union"),
   note="group shapes differ")
op("DenseToDenseSetOperation", dict(set1=S1[0, 0], set2=S2[0, 0]), dict(set_operation="union"),
   note="rank 1")
op("DenseToDenseSetOperation", dict(set1=S1, set2=S2), dict(set_operation="xor"),
   note="bad operation")
op("DenseToDenseSetOperation", dict(set1=np.zeros((2, 0), i32), set2=np.zeros((2, 0), i32)),
   dict(set_operation="union"), note="empty sets")
UNS_I = np.array([[0, 1], [0, 0], [1, 0]], i64)
op("SparseToSparseSetOperation", dict(set1_indices=UNS_I, set1_values=np.array([1, 2, 3], i32),
                                      set1_shape=np.array([2, 2], i64),
                                      set2_indices=UNS_I[1:], set2_values=np.array([2, 3], i32),
                                      set2_shape=np.array([2, 2], i64)),
   dict(set_operation="union"), note="unsorted, validated")
op("SparseToSparseSetOperation", dict(set1_indices=UNS_I[[1, 0, 2]],
                                      set1_values=np.array([1, 2, 3], i32),
                                      set1_shape=np.array([2, 2], i64),
                                      set2_indices=UNS_I[1:], set2_values=np.array([2, 3], i32),
                                      set2_shape=np.array([2, 2], i64)),
   dict(set_operation="union", validate_indices=False), note="sorted, unvalidated")
op("DenseToSparseSetOperation", dict(set1=STR1, set2_indices=np.array([[0, 0], [1, 1]], i64),
                                     set2_values=np.array([b"a", b"c"], object),
                                     set2_shape=np.array([2, 2], i64)),
   dict(set_operation="a-b"), note="strings")
op("DenseToSparseSetOperation", dict(set1=S1[0], set2_indices=np.array([[0, 0], [2, 1]], i64),
                                     set2_values=np.array([1, 2], i32),
                                     set2_shape=np.array([2, 4], i64)),
   dict(set_operation="union"), note="index out of bounds")
i1, v1, s1 = sparse_of(S1, 3)
op("SetSize", dict(set_indices=i1, set_values=v1, set_shape=s1), note="3-D")
op("SetSize", dict(set_indices=np.array([[0, 0], [0, 1], [2, 0]], i64),
                   set_values=np.array([b"a", b"a", b"b"], object),
                   set_shape=np.array([3, 2], i64)), note="strings, empty group")
for dt in (i8, i16, i64, u8, u16):
    op("SetSize", dict(set_indices=i1, set_values=np.abs(v1).astype(dt), set_shape=s1),
       note=dt.__name__)
op("SetSize", dict(set_indices=UNS_I, set_values=np.array([1, 2, 3], i32),
                   set_shape=np.array([2, 2], i64)), note="unsorted")
op("SetSize", dict(set_indices=UNS_I, set_values=np.array([1, 2, 3], i32),
                   set_shape=np.array([2, 2], i64)), dict(validate_indices=False),
   note="unsorted, unvalidated")
op("SetSize", dict(set_indices=np.array([[0], [1]], i64), set_values=np.array([1, 2], i32),
                   set_shape=np.array([2], i64)), note="rank 1")
op("SetSize", dict(set_indices=np.array([[0, 0], [0, 0]], i64), set_values=np.array([1, 2], i32),
                   set_shape=np.array([2, 2], i64)), note="repeated index")

# --- SparseSoftmax ---------------------------------------------------------------------------
SM_I = np.array([[0, 0], [0, 2], [1, 1], [2, 0], [2, 1], [2, 3]], i64)
SM_V = np.array([1.0, 2.0, -3.0, 0.5, 0.5, 10.0])
for dt, tol in ((f32, 1e-6), (f64, 1e-12), (f16, 1e-3)):
    op("SparseSoftmax", dict(sp_indices=SM_I, sp_values=SM_V.astype(dt),
                             sp_shape=np.array([3, 4], i64)), tol=tol, note=dt.__name__)
op("SparseSoftmax", dict(sp_indices=np.array([[0, 1, 0], [0, 1, 2], [1, 0, 1]], i64),
                         sp_values=np.array([3.0, -1.0, 7.0], f32),
                         sp_shape=np.array([2, 2, 3], i64)), note="3-D")
op("SparseSoftmax", dict(sp_indices=np.array([[1, 0], [0, 0], [1, 1], [0, 1], [0, 3]], i64),
                         sp_values=np.array([1.0, 2.0, 3.0, 4.0, -1.0], f32),
                         sp_shape=np.array([2, 4], i64)), note="unsorted: sorted output")
op("SparseSoftmax", dict(sp_indices=np.zeros((0, 2), i64), sp_values=np.zeros(0, f32),
                         sp_shape=np.array([3, 4], i64)), note="empty")
op("SparseSoftmax", dict(sp_indices=np.array([[0], [2]], i64), sp_values=np.array([1.0, 2.0], f32),
                         sp_shape=np.array([3], i64)), note="rank 1")

# --- SparseSparseMaximum / Minimum -----------------------------------------------------------
A_I = np.array([[0, 0], [0, 2], [1, 1], [2, 3]], i64)
A_V = np.array([-1.0, 4.0, 2.0, -3.0])
B_I = np.array([[0, 1], [0, 2], [1, 1], [2, 0]], i64)
B_V = np.array([5.0, -4.0, 7.0, -2.0])
for name in ("SparseSparseMaximum", "SparseSparseMinimum"):
    for dt in (f32, f64, i32, i64, i8, u8, i16, u16, np.uint32, u64, f16):
        av = np.abs(A_V).astype(dt) if np.dtype(dt).kind == "u" else A_V.astype(dt)
        bv = np.abs(B_V).astype(dt) if np.dtype(dt).kind == "u" else B_V.astype(dt)
        op(name, dict(a_indices=A_I, a_values=av, a_shape=np.array([3, 4], i64),
                      b_indices=B_I, b_values=bv, b_shape=np.array([3, 4], i64)),
           note=dt.__name__)
    op(name, dict(a_indices=np.zeros((0, 2), i64), a_values=np.zeros(0, f32),
                  a_shape=np.array([3, 4], i64), b_indices=B_I, b_values=B_V.astype(f32),
                  b_shape=np.array([3, 4], i64)), note="a empty")
    op(name, dict(a_indices=A_I, a_values=A_V.astype(f32), a_shape=np.array([3, 5], i64),
                  b_indices=B_I, b_values=B_V.astype(f32), b_shape=np.array([3, 4], i64)),
       note="shapes differ")

# --- SparseSplit -----------------------------------------------------------------------------
SP_I = np.array([[0, 0], [0, 4], [1, 2], [2, 1], [2, 6], [3, 3], [4, 0]], i64)
SP_V = np.arange(7, dtype=f32) + 1
for axis, n in ((1, 3), (0, 2), (-1, 7), (0, 1), (1, 2)):
    op("SparseSplit", dict(split_dim=i64(axis), indices=SP_I, values=SP_V,
                           shape=np.array([5, 7], i64)), dict(num_split=n),
       note=f"axis {axis} into {n}")
op("SparseSplit", dict(split_dim=i64(0), indices=SP_I, values=SP_V.astype(object).astype(str)
                       .astype(object), shape=np.array([5, 7], i64)), dict(num_split=2),
   note="strings")
op("SparseSplit", dict(split_dim=i64(2), indices=SP_I, values=SP_V,
                       shape=np.array([5, 7], i64)), dict(num_split=2), note="bad axis")
op("SparseSplit", dict(split_dim=i64(0), indices=SP_I, values=SP_V,
                       shape=np.array([5, 7], i64)), dict(num_split=6), note="too many splits")

# --- SparseBincount --------------------------------------------------------------------------
BC_I = np.array([[0, 0], [0, 1], [0, 3], [1, 0], [2, 2], [2, 3]], i64)
BC_V = np.array([1, 3, 1, 0, 6, 2])
for tidx in (i32, i64):
    for wdt in (f32, f64, i32, i64):
        op("SparseBincount", dict(indices=BC_I, values=BC_V.astype(tidx),
                                  dense_shape=np.array([3, 4], i64), size=tidx(5),
                                  weights=(np.arange(6) + 0.5).astype(wdt)),
           note=f"{tidx.__name__} {wdt.__name__} 2-D")
op("SparseBincount", dict(indices=BC_I[:, 1:], values=BC_V.astype(i32),
                          dense_shape=np.array([4], i64), size=i32(4), weights=np.zeros(0, f32)),
   note="1-D no weights")
op("SparseBincount", dict(indices=BC_I, values=BC_V.astype(i32),
                          dense_shape=np.array([3, 4], i64), size=i32(3),
                          weights=np.zeros(0, i64)), dict(binary_output=True), note="binary")
op("SparseBincount", dict(indices=BC_I, values=BC_V.astype(i32),
                          dense_shape=np.array([3, 4], i64), size=i32(-1),
                          weights=np.zeros(0, f32)), note="negative size")
op("SparseBincount", dict(indices=BC_I, values=BC_V.astype(i32) - 1,
                          dense_shape=np.array([3, 4], i64), size=i32(4),
                          weights=np.zeros(0, f32)), note="negative value")
op("SparseBincount", dict(indices=BC_I[:, 1:], values=BC_V.astype(i32) - 1,
                          dense_shape=np.array([4], i64), size=i32(4), weights=np.zeros(0, f32)),
   note="1-D negative value")
op("SparseBincount", dict(indices=np.array([[0, 0, 0], [1, 0, 2], [1, 1, 1]], i64),
                          values=np.array([2, 0, 2], i64), dense_shape=np.array([2, 2, 4], i64),
                          size=i64(3), weights=np.array([1.5, 2, 3], f32)), note="3-D")
op("SparseBincount", dict(indices=BC_I, values=BC_V.astype(i32),
                          dense_shape=np.array([2, 4], i64), size=i32(4),
                          weights=np.zeros(0, f32)), note="batch out of bounds")


# --- StridedSliceAssign / ResourceStridedSliceAssign -----------------------------------------
V0 = np.arange(24, dtype=f32).reshape(4, 6)
SLICES = [
    (dict(begin=[0, 1], end=[2, 3], strides=[1, 1]), np.ones((2, 2), f32)),
    (dict(begin=[0, 1], end=[2, 3], strides=[1, 1]), np.float32(5)),
    (dict(begin=[1], end=[2], strides=[1], shrink_axis_mask=1), np.arange(6, dtype=f32)),
    (dict(begin=[-1, -1], end=[0, 0], strides=[-1, -2], end_mask=1),
     -np.arange(12, dtype=f32).reshape(4, 3)),
    (dict(begin=[0, 0], end=[1, 1], strides=[1, 1], new_axis_mask=1), np.full((1, 1, 6), 9, f32)),
    (dict(begin=[0, 2], end=[0, 5], strides=[1, 2], begin_mask=1, ellipsis_mask=0),
     np.array([7.0, 8.0], f32)),
    (dict(begin=[1, 0], end=[3, 0], strides=[1, 1], ellipsis_mask=2), np.zeros((2, 6), f32)),
    (dict(begin=[3], end=[1], strides=[1]), np.zeros((0, 6), f32)),
    (dict(begin=[0, 1], end=[2, 3], strides=[1, 1]), np.ones((3, 2), f32)),   # bad broadcast
    (dict(begin=[0], end=[1], strides=[0]), np.ones((1, 6), f32)),            # zero stride
]


def slice_assign_graph():
    steps = []
    for k, (spec, value) in enumerate(SLICES):
        spec = dict(spec)
        idx = {key: np.array(spec.pop(key), i64 if k % 2 else i32)
               for key in ("begin", "end", "strides")}
        v, init = refvar(V0, f"ref{k}")
        out = raw.StridedSliceAssign(ref=v, value=value, **idx, **spec)
        steps += [([], [init]), ([out], [])]
        h = raw.VarHandleOp(dtype=tf.float32, shape=[4, 6], shared_name=f"res{k}",
                            name=f"res{k}")
        hinit = raw.AssignVariableOp(resource=h, value=V0)
        assign = raw.ResourceStridedSliceAssign(ref=h, value=value, **idx, **spec)
        with tf.control_dependencies([assign]):
            read = raw.ReadVariableOp(resource=h, dtype=tf.float32)
        steps += [([], [hinit]), ([read], [])]
    vi, init = refvar(np.arange(6, dtype=i64), "ref_int")
    out = raw.StridedSliceAssign(ref=vi, begin=np.array([1], i32), end=np.array([5], i32),
                                 strides=np.array([2], i32), value=np.array([-1, -2], i64))
    steps += [([], [init]), ([out], [])]
    bad = raw.StridedSliceAssign(ref=vi, begin=np.array([1], i32), end=np.array([5], i32),
                                 strides=np.array([2], i32), value=np.array([-1.0, 2.0], f32))
    steps += [([], [init]), ([bad], [])]
    return steps


def refvar(value, name):
    """A VariableV2 and its Assign initializer (ref variables, as TF1 graphs have them)."""
    value = np.asarray(value)
    v = raw.VariableV2(shape=value.shape, dtype=tf.as_dtype(value.dtype), name=name)
    return v, raw.Assign(ref=v, value=value).op


graph("strided_slice_assign", slice_assign_graph,
      ["StridedSliceAssign", "ResourceStridedSliceAssign"])


if __name__ == "__main__":
    write()
