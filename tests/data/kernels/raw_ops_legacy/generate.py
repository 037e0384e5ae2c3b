"""Expected values for kernels of older and gradient ops TF1 graphs still hold (batch norm
before FusedBatchNorm, resize gradients), computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_legacy/generate.py
"""

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
import tensorflow as tf  # noqa: E402
from rawgen import f32, f64, graph, i32, op, write  # noqa: E402

rawgen.begin(HERE)
R = np.random.default_rng(7)


def rnd(*shape, dtype=f32):
    return R.standard_normal(shape).astype(dtype)


# --- BatchNormWithGlobalNormalization: graphs of producer 8 (TF refuses it from version 9) -----


def bn_graph(cases):
    """BatchNormWithGlobalNormalization NodeDefs (TF's Python refuses to build them) in a
    GraphDef of producer version 8, as 2015-era graphs (Inception v3's) are."""
    g0 = tf.Graph()
    with g0.as_default():
        for i, (arrays, _eps, _scale) in enumerate(cases):
            for k, a in zip("tmvbg", arrays):
                tf.constant(a, name=f"{k}{i}")
    gd = g0.as_graph_def()
    for i, (arrays, eps, scale) in enumerate(cases):
        n = gd.node.add()
        n.name, n.op = f"bn{i}", "BatchNormWithGlobalNormalization"
        n.input.extend([f"{k}{i}" for k in "tmvbg"])
        n.attr["T"].type = tf.as_dtype(arrays[0].dtype).as_datatype_enum
        n.attr["variance_epsilon"].f = eps
        n.attr["scale_after_normalization"].b = scale
    gd.versions.producer = 8
    tf.graph_util.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    return [([g.get_tensor_by_name(f"bn{i}:0")], []) for i in range(len(cases))]


def bn_case(dt, scale):
    return ((rnd(2, 3, 3, 4, dtype=dt), rnd(4, dtype=dt), np.abs(rnd(4, dtype=dt)) + dt(0.1),
             rnd(4, dtype=dt), rnd(4, dtype=dt)), 0.001, scale)


graph("batch_norm_global_f32", lambda: bn_graph([bn_case(f32, False), bn_case(f32, True)]),
      ["BatchNormWithGlobalNormalization"], tol=1e-6)
graph("batch_norm_global_f64", lambda: bn_graph([bn_case(f64, False), bn_case(f64, True)]),
      ["BatchNormWithGlobalNormalization"], tol=1e-12)

# --- resize gradients --------------------------------------------------------------------------
img = rnd(2, 5, 7, 3)
for align, half in ((False, False), (True, False), (False, True)):
    for oh, ow in ((9, 4), (3, 11)):
        g = rnd(2, oh, ow, 3)
        op("ResizeBilinearGrad", dict(grads=g, original_image=img),
           dict(align_corners=align, half_pixel_centers=half), tol=1e-5,
           note=f"align={align} half={half} {oh}x{ow}")
        op("ResizeNearestNeighborGrad", dict(grads=g, size=np.array([5, 7], i32)),
           dict(align_corners=align, half_pixel_centers=half), tol=1e-5,
           note=f"align={align} half={half} {oh}x{ow}")
op("ResizeBilinearGrad", dict(grads=rnd(1, 4, 4, 2), original_image=img.astype(f64)),
   dict(), tol=1e-7, note="double image: float32 contributions, summed in another order")
op("ResizeBilinearGrad", dict(grads=rnd(1, 4, 4, 2), original_image=img),
   dict(), tol=1e-5, note="only the image's height and width are read")

# --- SpaceToBatch / BatchToSpace (the 4-D, square-block forms) and MirrorPadGrad --------------
x4 = rnd(2, 4, 6, 3)
op("SpaceToBatch", dict(input=x4, paddings=np.array([[0, 0], [1, 1]], i32)),
   dict(block_size=2))
op("SpaceToBatch", dict(input=x4, paddings=np.array([[0, 0], [0, 1]], i32)),
   dict(block_size=2), note="not divisible")
op("BatchToSpace", dict(input=rnd(8, 2, 3, 2), crops=np.array([[0, 1], [1, 0]], i32)),
   dict(block_size=2))
for mode in ("REFLECT", "SYMMETRIC"):
    op("MirrorPadGrad", dict(input=rnd(7, 9, 2), paddings=np.array([[2, 1], [0, 3], [0, 0]], i32)),
       dict(mode=mode), tol=1e-6, note=mode)
op("MirrorPadGrad", dict(input=rnd(4), paddings=np.array([[2, 1]], i32)), dict(mode="REFLECT"),
   note="padding too large")

if __name__ == "__main__":
    write()
