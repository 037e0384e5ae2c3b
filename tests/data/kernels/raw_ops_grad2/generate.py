"""Expected values for the gradient kernels TF 2.21's GradientTape emits beyond the first
families (DepthwiseConv2dNative and Conv3D filter gradients, 3-D pooling gradients, max-pool
second derivatives, LRNGrad, ResizeBicubicGrad, the sparse segment gradients), computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_grad2/generate.py

oneDNN is switched off (TF_ENABLE_ONEDNN_OPTS=0) so that eager calls run TensorFlow's
reference CPU kernels, the ones its graphs run.

Notes:

* Conv3DBackpropFilter (v1) is removed at GraphDef version 10: its case is a graph imported
  with ``producer: 9``.
* TF's CPU depthwise gradients ignore ``dilations`` (dfg computes the dilated gradient, to
  match its dilated forward kernel), so no case sets them.
* Values lie on a grid of 1/64 so that max pooling has ties (MaxPool3DGrad gives every tied
  element the gradient, MaxPoolGradGrad only the first).
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
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402

rawgen.begin(HERE)
f16 = np.float16
rng = np.random.default_rng(2026)


def rand(*shape, dtype=f32, lo=-1.0, hi=1.0):
    """Uniform values on a grid of 1/64 of the range (exact in every float type; ties)."""
    return (lo + (hi - lo) * rng.integers(0, 65, shape) / 64).astype(dtype)


def out_size(size, k, s, padding):
    return -(-size // s) if padding == "SAME" else (size - k + s) // s


# =============================================================================================
# DepthwiseConv2dNativeBackpropInput / Filter (NHWC only on CPU)

DW = [  # (input NHWC, filter KH KW C M, strides, padding, explicit, dtype, note)
    ((2, 5, 6, 3), (3, 3, 3, 2), 1, "SAME", None, f32, "SAME, mult 2"),
    ((1, 7, 6, 4), (3, 2, 4, 1), 2, "VALID", None, f32, "VALID, stride 2, mult 1"),
    ((1, 5, 5, 2), (2, 3, 2, 3), 1, "EXPLICIT", [0, 0, 1, 2, 2, 0, 0, 0], f32, "EXPLICIT"),
    ((2, 6, 5, 2), (3, 3, 2, 2), 2, "SAME", None, f64, "float64, SAME, stride 2"),
    ((1, 4, 5, 3), (2, 2, 3, 2), 1, "VALID", None, f16, "float16"),
]
for xs, fs, s, pad, ex, dt, note in DW:
    oh = out_size(xs[1] + (sum(ex[2:4]) if ex else 0), fs[0], s, "VALID" if ex else pad)
    ow = out_size(xs[2] + (sum(ex[4:6]) if ex else 0), fs[1], s, "VALID" if ex else pad)
    dy = rand(xs[0], oh, ow, fs[2] * fs[3], dtype=dt)
    attrs = dict(strides=[1, s, s, 1], padding=pad)
    if ex:
        attrs["explicit_paddings"] = ex
    tol = 2e-2 if dt == f16 else None
    op("DepthwiseConv2dNativeBackpropInput",
       dict(input_sizes=np.array(xs, i32), filter=rand(*fs, dtype=dt), out_backprop=dy),
       attrs, tol=tol, note=note)
    op("DepthwiseConv2dNativeBackpropFilter",
       dict(input=rand(*xs, dtype=dt), filter_sizes=np.array(fs, i32), out_backprop=dy),
       attrs, tol=tol, note=note)
op("DepthwiseConv2dNativeBackpropInput",
   dict(input_sizes=np.array([1, 2, 3, 4], i32), filter=rand(2, 2, 2, 1),
        out_backprop=rand(1, 2, 3, 4)),
   dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NCHW"), note="NCHW")
op("DepthwiseConv2dNativeBackpropFilter",
   dict(input=rand(1, 2, 3, 4), filter_sizes=np.array([2, 2, 2, 1], i32),
        out_backprop=rand(1, 2, 3, 4)),
   dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NCHW"), note="NCHW")
op("DepthwiseConv2dNativeBackpropInput",
   dict(input_sizes=np.array([1, 4, 4, 2], i32), filter=rand(2, 2, 2, 1),
        out_backprop=rand(1, 3, 3, 2)),
   dict(strides=[1, 1, 1, 1], padding="SAME"), note="out_backprop size mismatch")
op("DepthwiseConv2dNativeBackpropFilter",
   dict(input=rand(1, 4, 4, 3), filter_sizes=np.array([2, 2, 2, 1], i32),
        out_backprop=rand(1, 4, 4, 2)),
   dict(strides=[1, 1, 1, 1], padding="SAME"), note="depth mismatch")

# =============================================================================================
# Conv3DBackpropFilterV2 (NDHWC only on CPU, no dilations)

C3 = [  # (input NDHWC, filter, strides, padding, dtype)
    ((1, 4, 5, 4, 2), (2, 3, 2, 2, 3), (1, 1, 1), "SAME", f32),
    ((2, 5, 4, 6, 3), (3, 2, 3, 3, 2), (2, 1, 2), "VALID", f32),
    ((1, 5, 5, 5, 2), (3, 3, 3, 2, 2), (2, 2, 2), "SAME", f64),
    ((1, 3, 4, 4, 2), (2, 2, 2, 2, 2), (1, 2, 1), "VALID", f16),
]
for xs, fs, s, pad, dt in C3:
    outs = [out_size(xs[1 + i], fs[i], s[i], pad) for i in range(3)]
    op("Conv3DBackpropFilterV2",
       dict(input=rand(*xs, dtype=dt), filter_sizes=np.array(fs, i32),
            out_backprop=rand(xs[0], *outs, fs[4], dtype=dt)),
       dict(strides=[1, *s, 1], padding=pad), tol=5e-2 if dt == f16 else None,
       note=f"{pad} strides {s} {np.dtype(dt).name}")
op("Conv3DBackpropFilterV2",
   dict(input=rand(1, 2, 3, 3, 3), filter_sizes=np.array([2, 2, 2, 2, 1], i32),
        out_backprop=rand(1, 1, 3, 3, 3)),
   dict(strides=[1, 1, 1, 1, 1], padding="SAME", data_format="NCDHW"), note="NCDHW")
op("Conv3DBackpropFilterV2",
   dict(input=rand(1, 3, 3, 3, 1), filter_sizes=np.array([2, 2, 2, 1, 1], i32),
        out_backprop=rand(1, 3, 3, 3, 1)),
   dict(strides=[1, 1, 1, 1, 1], padding="SAME", dilations=[1, 2, 1, 1, 1]),
   note="dilations")
op("Conv3DBackpropFilterV2",
   dict(input=rand(1, 3, 3, 3, 1), filter_sizes=np.array([2, 2, 2, 1, 1], i32),
        out_backprop=rand(1, 2, 3, 3, 1)),
   dict(strides=[1, 1, 1, 1, 1], padding="SAME"), note="out_backprop size mismatch")


def conv3d_filter_v1_graph():
    """A Conv3DBackpropFilter (v1) node in a GraphDef of producer version 9."""
    x, f, dy = rand(1, 3, 4, 3, 2), rand(2, 2, 2, 2, 3), rand(1, 2, 2, 2, 3)
    g0 = tf.Graph()
    with g0.as_default():
        tf.constant(x, name="x")
        tf.constant(f, name="f")
        tf.constant(dy, name="dy")
    gd = g0.as_graph_def()
    n = gd.node.add()
    n.name, n.op = "bpf", "Conv3DBackpropFilter"
    n.input.extend(["x", "f", "dy"])
    n.attr["T"].type = tf.float32.as_datatype_enum
    n.attr["strides"].list.i.extend([1, 1, 2, 1, 1])
    n.attr["padding"].s = b"VALID"
    gd.versions.producer = 9
    tf.graph_util.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    return [([g.get_tensor_by_name("bpf:0")], [])]


graph("conv3d_backprop_filter_v1", conv3d_filter_v1_graph, ["Conv3DBackpropFilter"])

# =============================================================================================
# MaxPool3DGrad / AvgPool3DGrad / MaxPool3DGradGrad (float32 and bfloat16 on CPU, NDHWC)

P3 = [((1, 4, 5, 4, 2), (2, 2, 2), (2, 2, 2), "VALID"),
      ((2, 3, 5, 4, 3), (2, 3, 2), (1, 2, 2), "SAME"),
      ((1, 5, 4, 5, 1), (3, 2, 3), (2, 1, 2), "SAME")]
for xs, k, s, pad in P3:
    x = rand(*xs, lo=0, hi=0.25)  # 17 distinct values: many ties
    attrs = dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=pad)
    y = raw.MaxPool3D(input=tf.constant(x), **attrs).numpy()
    note = f"{pad} ksize {k} strides {s}"
    op("MaxPool3DGrad", dict(orig_input=x, orig_output=y, grad=rand(*y.shape)), attrs,
       note=note)
    op("MaxPool3DGradGrad", dict(orig_input=x, orig_output=y, grad=rand(*xs)), attrs,
       note=note)
    op("AvgPool3DGrad", dict(orig_input_shape=np.array(xs, i32), grad=rand(*y.shape)), attrs,
       note=note)
op("MaxPool3DGrad", dict(orig_input=rand(1, 2, 2, 2, 2), orig_output=rand(1, 2, 1, 1, 1),
                         grad=rand(1, 2, 1, 1, 1)),
   dict(ksize=[1, 1, 1, 2, 2], strides=[1, 1, 1, 2, 2], padding="VALID",
        data_format="NCDHW"), note="NCDHW")
op("MaxPool3DGrad", dict(orig_input=rand(1, 2, 2, 2, 1), orig_output=rand(1, 1, 1, 1, 1),
                         grad=rand(1, 2, 1, 1, 1)),
   dict(ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID"),
   note="grad shape mismatch")
op("AvgPool3DGrad", dict(orig_input_shape=np.array([1, 2, 2, 2], i32),
                         grad=rand(1, 1, 1, 1, 1)),
   dict(ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID"),
   note="orig_input_shape not 5 elements")
op("MaxPool3DGradGrad", dict(orig_input=rand(1, 2, 2, 2, 1), orig_output=rand(1, 1, 1, 1, 1),
                             grad=rand(1, 2, 2, 1, 1)),
   dict(ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID"),
   note="grad shape mismatch")

# =============================================================================================
# MaxPoolGradGrad / MaxPoolGradGradV2 (NHWC on CPU)

P2 = [((2, 5, 6, 3), (2, 2), (2, 2), "VALID", f32),
      ((1, 5, 5, 2), (3, 3), (2, 2), "SAME", f32),
      ((1, 4, 6, 2), (2, 3), (1, 2), "SAME", f64),
      ((1, 4, 4, 3), (3, 2), (1, 1), "VALID", f16)]
for xs, k, s, pad, dt in P2:
    x = rand(*xs, lo=0, hi=0.25, dtype=dt)
    attrs = dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=pad)
    y = raw.MaxPool(input=tf.constant(x), **attrs).numpy()
    gg = rand(*xs, dtype=dt)
    note = f"{pad} ksize {k} strides {s} {np.dtype(dt).name}"
    op("MaxPoolGradGrad", dict(orig_input=x, orig_output=y, grad=gg), attrs, note=note)
    op("MaxPoolGradGradV2", dict(orig_input=x, orig_output=y, grad=gg,
                                 ksize=np.array(attrs["ksize"], i32),
                                 strides=np.array(attrs["strides"], i32)),
       dict(padding=pad), note=note)
op("MaxPoolGradGrad", dict(orig_input=rand(1, 2, 2, 2), orig_output=rand(1, 2, 1, 1),
                           grad=rand(1, 2, 2, 2)),
   dict(ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2], padding="VALID", data_format="NCHW"),
   note="NCHW")
op("MaxPoolGradGrad", dict(orig_input=rand(1, 2, 2, 2), orig_output=rand(1, 1, 1, 2),
                           grad=rand(1, 2, 2, 1)),
   dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"), note="grad mismatch")

# =============================================================================================
# LRNGrad (float32 and float16 on CPU)

for shape, r, bias, alpha, beta, dt in [((2, 3, 2, 7), 2, 1.0, 0.3, 0.75, f32),
                                        ((1, 2, 2, 5), 0, 2.0, 1.0, 0.5, f32),
                                        ((1, 2, 3, 4), 5, 1.0, 1.0, 0.5, f32),
                                        ((1, 2, 2, 6), 1, 1.5, 0.2, 0.6, f16)]:
    x = rand(*shape, dtype=dt)
    attrs = dict(depth_radius=r, bias=bias, alpha=alpha, beta=beta)
    y = raw.LRN(input=tf.constant(x), **attrs).numpy()
    op("LRNGrad", dict(input_grads=rand(*shape, dtype=dt), input_image=x, output_image=y),
       attrs, tol=2e-2 if dt == f16 else None,
       note=f"radius {r} {np.dtype(dt).name}")
op("LRNGrad", dict(input_grads=rand(1, 2, 2, 3), input_image=rand(1, 2, 2, 3),
                   output_image=rand(1, 2, 3, 3)), note="shape mismatch")

# =============================================================================================
# ResizeBicubicGrad (grads float32; original_image float32 or float64)

for (n, h, w, c), (oh, ow), align, half, dt in [
        ((1, 4, 5, 2), (7, 9), False, False, f32),
        ((2, 5, 4, 1), (3, 6), True, False, f32),
        ((1, 3, 6, 2), (8, 4), False, True, f32),
        ((1, 4, 4, 1), (6, 7), False, True, f64),
        ((1, 1, 3, 1), (3, 5), True, False, f64)]:
    op("ResizeBicubicGrad",
       dict(grads=rand(n, oh, ow, c), original_image=np.zeros((n, h, w, c), dt)),
       dict(align_corners=align, half_pixel_centers=half),
       note=f"{h}x{w} from {oh}x{ow} align {align} half {half} {np.dtype(dt).name}")
op("ResizeBicubicGrad", dict(grads=rand(1, 3, 3, 1), original_image=np.zeros((1, 2, 2, 1),
                                                                              f32)),
   dict(align_corners=True, half_pixel_centers=True), note="align and half")

# =============================================================================================
# SparseSegment{Sum,Mean,SqrtN}Grad and their V2 forms

grad = rand(4, 3)
idx = np.array([5, 1, 5, 0, 2, 1, 7], i32)
seg = np.array([0, 0, 1, 3, 3, 3, 1], i32)  # unsorted: the gradient does not care
for how in ("Sum", "Mean", "SqrtN"):
    for g, ix, sg, dt in [(grad, idx, seg, f32),
                          (rand(3, 2, 2, dtype=f64), idx[:5].astype(i64),
                           np.array([0, 1, 1, 2, 2], i64), f64),
                          (rand(2, 4, dtype=f16), idx[:4], np.array([0, 1, 1, 1], i32), f16)]:
        op(f"SparseSegment{how}Grad",
           dict(grad=g, indices=ix, segment_ids=sg, output_dim0=np.int32(9)),
           note=np.dtype(dt).name)
        op(f"SparseSegment{how}GradV2",
           dict(grad=g, indices=ix, segment_ids=sg, dense_output_dim0=np.int32(9)),
           note=np.dtype(dt).name)
    op(f"SparseSegment{how}Grad",
       dict(grad=grad, indices=idx, segment_ids=seg, output_dim0=np.int32(6)),
       note="index out of range")
    op(f"SparseSegment{how}GradV2",
       dict(grad=grad, indices=idx, segment_ids=np.array([0, 0, 1, 4, 3, 3, 1], i32),
            dense_output_dim0=np.int32(9)), note="segment id out of range")
op("SparseSegmentSumGradV2",
   dict(grad=rand(2, 3), indices=np.zeros(0, i32), segment_ids=np.zeros(0, i32),
        dense_output_dim0=np.int32(4)), note="empty")
op("SparseSegmentMeanGrad",
   dict(grad=rand(3), indices=np.array([2, 0, 2], i32), segment_ids=np.array([0, 2, 2], i32),
        output_dim0=np.int32(3)), note="1-D grad")

write()
