"""Expected values for the image kernels (colour adjustment, HSV, patches, projective
transforms, bounding boxes, glimpses, CropAndResize gradients) and the nn ops that go with
them (MaxPoolWithArgmax, Dilation2D, InTopK, FractionalMax/AvgPool), computed by TensorFlow
2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_image/generate.py

oneDNN is switched off (TF_ENABLE_ONEDNN_OPTS=0) so that eager calls run TensorFlow's
reference CPU kernels, the ones its graphs run.

Notes on what is covered:

* AdjustContrast (v1) is deprecated at GraphDef version 2: TF runs it only in graphs whose
  producer version is below 2, so its cases are graphs imported with ``producer: 1``.
* Dtypes the OpDef allows but TF registers no CPU kernel for (float16 AdjustHue, ...) are
  graph cases: a Session fails them with InvalidArgumentError (eager would say NotFound).
* ExtractGlimpse fills windows that leave the image with random noise unless noise="zero";
  the noise cases here are deterministic ones (a constant image, whose uniform or Gaussian
  noise is that constant, or a window that ends exactly on the image border).
* FractionalMax/AvgPool draw their pooling regions from TF's Philox stream; every case uses
  ``deterministic=True`` with a seed and distinct attrs (TF's eager kernel cache keeps a
  deterministic node's first regions).
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
f16, u8, i8, i16 = np.float16, np.uint8, np.int8, np.int16
rng = np.random.default_rng(2021)



def rand(*shape, dtype=f32, lo=0.0, hi=1.0):
    """Uniform values on a grid of 1/64 of the range (exact in every float type; they
    compress well and give ties)."""
    return (lo + (hi - lo) * rng.integers(0, 65, shape) / 64).astype(dtype)


def ints(*shape, dtype=i32, lo=0, hi=10):
    return rng.integers(lo, hi, shape).astype(dtype)


def no_kernel_graph(name, make, ops):
    """A graph whose op has no CPU kernel for its dtype: the Session's error class."""
    def build():
        return [([make()], [])]
    graph(name, build, ops)


# =============================================================================================
# AdjustContrast (v1): graphs at producer version 1


def contrast_v1_graph(cases):
    """AdjustContrast nodes (added as NodeDefs: TF's Python refuses to build them) in a
    GraphDef of producer version 1, imported into the default graph."""
    g0 = tf.Graph()
    with g0.as_default():
        for i, (x, f, lo, hi) in enumerate(cases):
            tf.constant(x, name=f"x{i}")
            tf.constant(np.float32(f), name=f"f{i}")
            tf.constant(np.float32(lo), name=f"lo{i}")
            tf.constant(np.float32(hi), name=f"hi{i}")
    gd = g0.as_graph_def()
    for i, (x, *_rest) in enumerate(cases):
        n = gd.node.add()
        n.name, n.op = f"contrast{i}", "AdjustContrast"
        n.input.extend([f"x{i}", f"f{i}", f"lo{i}", f"hi{i}"])
        n.attr["T"].type = tf.as_dtype(x.dtype).as_datatype_enum
    gd.versions.producer = 1
    tf.graph_util.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    return [([g.get_tensor_by_name(f"contrast{i}:0")], []) for i in range(len(cases))]


graph("adjust_contrast_v1", lambda: contrast_v1_graph([
    (rand(2, 3, 4, 3, hi=255).round().astype(u8), 1.7, 0.0, 255.0),
    (ints(1, 4, 3, 2, dtype=i8, lo=-100, hi=100), 0.5, -50.0, 60.0),
    (ints(3, 2, 3, dtype=i16, lo=-300, hi=300), -1.5, -1000.0, 1000.0),
    (ints(2, 2, 2, 2, 1, dtype=i32, lo=-5, hi=50), 2.0, 0.0, 40.0),
    (rand(1, 5, 3, 2), 3.0, 0.2, 0.9),
    (rand(2, 3, 3, 1, dtype=f64), 0.25, -10.0, 10.0),
    (rand(0, 3, 3, 2), 2.0, 0.0, 1.0),
]), ["AdjustContrast"])
# TF has no int64 kernel (the whole graph fails placement, so it is a graph of its own).
graph("adjust_contrast_v1_int64", lambda: contrast_v1_graph([
    (ints(1, 2, 2, 3, dtype=i64), 2.0, 0.0, 1.0)]), ["AdjustContrast"])

# =============================================================================================
# AdjustContrastv2

op("AdjustContrastv2", dict(images=rand(2, 3, 4, 3), contrast_factor=f32(1.5)))
op("AdjustContrastv2", dict(images=rand(5, 7, 2, lo=-2, hi=3), contrast_factor=f32(-0.5)),
   note="3-D, odd sizes")
op("AdjustContrastv2", dict(images=rand(2, 2, 3, 5, 1), contrast_factor=f32(2.0)),
   note="5-D")
op("AdjustContrastv2", dict(images=rand(1, 13, 11, 2, hi=100), contrast_factor=f32(0.3)),
   note="odd folding")
op("AdjustContrastv2", dict(images=rand(3, 1, 1, 4), contrast_factor=f32(5.0)), note="1x1")
op("AdjustContrastv2", dict(images=rand(0, 2, 2, 3), contrast_factor=f32(2.0)), note="empty")
op("AdjustContrastv2", dict(images=rand(4, 3), contrast_factor=f32(2.0)), note="rank 2")
op("AdjustContrastv2", dict(images=rand(1, 2, 2, 3), contrast_factor=f32([2, 3])),
   note="factor not scalar")

# =============================================================================================
# AdjustHue / AdjustSaturation

special_rgb = np.array([
    [0.5, 0.5, 0.5], [0, 0, 0], [1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0],
    [0, 1, 1], [1, 0, 1], [0.8, 0.8, 0.2], [0.2, 0.8, 0.8], [0.8, 0.2, 0.8], [0.9, 0.3, 0.3],
    [0.3, 0.9, 0.3], [0.3, 0.3, 0.9], [0.6, 0.2, 0.4], [0.2, 0.6, 0.4], [0.4, 0.2, 0.6],
    [0.1, 0.7, 0.7], [1.5, -0.2, 0.3], [-0.5, -0.2, -0.9], [0.7, 0.7, 0.7000001],
], f32).reshape(1, 2, 11, 3)
hue_img = rand(2, 3, 4, 3)
for d in (0.2, -0.7, 1.3, -2.6, 100.3, -57.9):
    op("AdjustHue", dict(images=hue_img, delta=f32(d)), note=f"delta {d}")
op("AdjustHue", dict(images=special_rgb, delta=f32(0.25)), note="grey, primaries, ties")
op("AdjustHue", dict(images=special_rgb, delta=f32(-1.0)), note="full turn")
op("AdjustHue", dict(images=rand(3, 4, 3), delta=f32(0.1)), note="3-D")
op("AdjustHue", dict(images=rand(0, 4, 3), delta=f32(0.1)), note="empty")
op("AdjustHue", dict(images=rand(2, 2, 4), delta=f32(0.1)), note="4 channels")
op("AdjustHue", dict(images=rand(2, 3), delta=f32(0.1)), note="rank 2")
op("AdjustHue", dict(images=rand(2, 2, 3), delta=f32([0.1])), note="delta not scalar")

for s in (0.5, 2.0, 0.0, 7.5):
    op("AdjustSaturation", dict(images=hue_img, scale=f32(s)), note=f"scale {s}")
op("AdjustSaturation", dict(images=special_rgb, scale=f32(0.6)), note="grey, primaries, ties")
op("AdjustSaturation", dict(images=special_rgb, scale=f32(3.0)), note="saturating")
op("AdjustSaturation", dict(images=rand(4, 1, 3), scale=f32(1.3)), note="3-D")
op("AdjustSaturation", dict(images=rand(0, 1, 3), scale=f32(1.3)), note="empty")
op("AdjustSaturation", dict(images=rand(1, 2, 2, 2), scale=f32(1.3)), note="2 channels")
op("AdjustSaturation", dict(images=rand(3), scale=f32(1.3)), note="rank 1")

no_kernel_graph("adjust_hue_half",
                lambda: raw.AdjustHue(images=rand(2, 2, 3, dtype=f16), delta=f32(0.1)),
                ["AdjustHue"])
no_kernel_graph("adjust_saturation_half",
                lambda: raw.AdjustSaturation(images=rand(2, 2, 3, dtype=f16), scale=f32(2)),
                ["AdjustSaturation"])
no_kernel_graph("adjust_contrast_v2_half",
                lambda: raw.AdjustContrastv2(images=rand(2, 2, 3, dtype=f16),
                                             contrast_factor=f32(2)),
                ["AdjustContrastv2"])

# =============================================================================================
# RGBToHSV / HSVToRGB

rgb = rand(3, 4, 3)
op("RGBToHSV", dict(images=rgb))
op("RGBToHSV", dict(images=special_rgb), note="grey, black, primaries, ties")
op("RGBToHSV", dict(images=rgb.astype(f64)), note="float64")
op("RGBToHSV", dict(images=special_rgb.astype(f64)), note="float64 special", tol=1e-12)
op("RGBToHSV", dict(images=rgb.astype(f16)), note="float16", tol=1e-3)
op("RGBToHSV", dict(images=special_rgb.astype(f16)), note="float16 special", tol=1e-3)
op("RGBToHSV", dict(images=rand(3)), note="1-D")
op("RGBToHSV", dict(images=rand(0, 3)), note="empty")
op("RGBToHSV", dict(images=rand(2, 4)), note="4 channels")
op("RGBToHSV", dict(images=f32(0.5)), note="scalar")

hsv = np.concatenate([rand(3, 4, 1), rand(3, 4, 1), rand(3, 4, 1)], axis=-1)
special_hsv = np.array([[0, 0, 0.5], [1, 1, 1], [1 / 6, 1, 1], [0.5, 0.3, 0.8], [2 / 3, 0.5, 1],
                        [0.999, 1, 0.5], [-0.1, 0.5, 0.5], [1.2, 0.5, 0.5], [0.3, 0, 0.7],
                        [0.75, 1.5, 0.5], [5 / 6, 0.2, -0.4]], f32)
op("HSVToRGB", dict(images=hsv))
op("HSVToRGB", dict(images=special_hsv), note="hue edges, out of range, s=0")
op("HSVToRGB", dict(images=hsv.astype(f64)), note="float64", tol=1e-12)
op("HSVToRGB", dict(images=special_hsv.astype(f64)), note="float64 special", tol=1e-12)
op("HSVToRGB", dict(images=hsv.astype(f16)), note="float16", tol=1e-3)
op("HSVToRGB", dict(images=special_hsv.astype(f16)), note="float16 special", tol=1e-3)
op("HSVToRGB", dict(images=rand(0, 2, 3)), note="empty")
op("HSVToRGB", dict(images=rand(2, 2)), note="2 channels")
op("HSVToRGB", dict(images=f32(0.5)), note="scalar")

# =============================================================================================
# ExtractImagePatches / ExtractVolumePatches


def patches(x, k, s, r, pad, note="", tol=None):
    op("ExtractImagePatches", dict(images=x),
       dict(ksizes=[1, *k, 1], strides=[1, *s, 1], rates=[1, *r, 1], padding=pad),
       note=note, tol=tol)


img = rand(2, 7, 6, 2)
for pad in ("VALID", "SAME"):
    patches(img, (3, 2), (2, 3), (1, 1), pad, note=pad)
    patches(img, (2, 3), (1, 2), (2, 2), pad, note=f"rates 2 {pad}")
    patches(img, (2, 2), (4, 5), (1, 1), pad, note=f"strides > ksize {pad}")
    patches(img, (3, 3), (1, 1), (3, 1), pad, note=f"rates 3,1 {pad}")
patches(rand(1, 9, 1, 1), (1, 1), (7, 1), (1, 1), "SAME", note="stride 7 over 9")
patches(rand(1, 4, 5, 2), (4, 6), (1, 1), (1, 1), "SAME", note="window larger than image")
patches(rand(1, 4, 5, 2), (5, 2), (1, 1), (1, 1), "VALID", note="no output rows")
patches(rand(0, 4, 5, 2), (2, 2), (1, 1), (1, 1), "SAME", note="empty batch")
patches(rand(2, 5, 5, 3, hi=255).astype(u8), (2, 2), (2, 2), (1, 1), "SAME", note="uint8")
patches(ints(1, 5, 4, 2, dtype=i64, lo=-9), (3, 2), (1, 2), (1, 2), "VALID", note="int64")
patches(rand(1, 5, 4, 2, dtype=f16), (2, 2), (1, 1), (2, 1), "SAME", note="float16")
patches(rand(1, 4, 4, 1, dtype=f64), (2, 3), (2, 1), (1, 1), "SAME", note="float64")
patches((rand(1, 3, 4, 2) + 1j * rand(1, 3, 4, 2)).astype(np.complex64), (2, 2), (1, 1),
        (1, 1), "SAME", note="complex64")
op("ExtractImagePatches", dict(images=img),
   dict(ksizes=[2, 2, 2, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="VALID"),
   note="ksize on batch")
op("ExtractImagePatches", dict(images=img),
   dict(ksizes=[1, 2, 2, 1], strides=[1, 0, 1, 1], rates=[1, 1, 1, 1], padding="VALID"),
   note="stride 0")
op("ExtractImagePatches", dict(images=img[0]),
   dict(ksizes=[1, 2, 2, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="VALID"),
   note="rank 3")
no_kernel_graph("extract_image_patches_bool",
                lambda: raw.ExtractImagePatches(images=np.ones((1, 3, 3, 1), bool),
                                                ksizes=[1, 2, 2, 1], strides=[1, 1, 1, 1],
                                                rates=[1, 1, 1, 1], padding="VALID"),
                ["ExtractImagePatches"])


def vpatches(x, k, s, pad, note=""):
    op("ExtractVolumePatches", dict(input=x),
       dict(ksizes=[1, *k, 1], strides=[1, *s, 1], padding=pad), note=note)


vol = rand(2, 4, 5, 3, 1)
for pad in ("VALID", "SAME"):
    vpatches(vol, (2, 3, 2), (2, 1, 2), pad, note=pad)
    vpatches(vol, (1, 2, 2), (3, 3, 3), pad, note=f"strides > ksize {pad}")
    vpatches(vol, (3, 3, 3), (1, 1, 1), pad, note=f"cube {pad}")
vpatches(ints(1, 3, 3, 3, 1), (2, 2, 2), (1, 2, 1), "SAME", note="int32")
vpatches(rand(1, 3, 2, 3, 2, dtype=f16), (2, 1, 2), (1, 1, 1), "VALID", note="float16")
vpatches(rand(1, 3, 2, 3, 2, hi=200).astype(u8), (2, 2, 2), (2, 2, 2), "SAME", note="uint8")
vpatches(rand(0, 3, 3, 3, 1), (2, 2, 2), (1, 1, 1), "SAME", note="empty batch")
vpatches(rand(1, 2, 3, 3, 1), (3, 2, 2), (1, 1, 1), "VALID", note="no output planes")
op("ExtractVolumePatches", dict(input=vol),
   dict(ksizes=[1, 2, 2, 2, 2], strides=[1, 1, 1, 1, 1], padding="VALID"),
   note="ksize on depth")
op("ExtractVolumePatches", dict(input=vol[0]),
   dict(ksizes=[1, 2, 2, 2, 1], strides=[1, 1, 1, 1, 1], padding="VALID"), note="rank 4")

# =============================================================================================
# ImageProjectiveTransformV2 / V3


def rotation(theta, h, w, dx=0.0, dy=0.0):
    """Keras' rotation about the image centre (output -> input), plus a translation."""
    c, s = np.cos(theta), np.sin(theta)
    x0 = ((w - 1) - (c * (w - 1) - s * (h - 1))) / 2.0 + dx
    y0 = ((h - 1) - (s * (w - 1) + c * (h - 1))) / 2.0 + dy
    return [c, -s, x0, s, c, y0, 0.0, 0.0]


H, W = 4, 5
timg = rand(2, H, W, 2, hi=10)
trans = {
    "rotate": np.array([rotation(0.6, H, W), rotation(-2.2, H, W)], f32),
    "shared": np.array([rotation(1.1, H, W, 0.3, -0.4)], f32),
    "zoom": np.array([[0.6, 0, 1.2, 0, 1.7, -1.5, 0, 0]] * 2, f32),
    "far": np.array([[1, 0, 14.5, 0, 1, -13.25, 0, 0], [1, 0, -23.7, 0, 1, 31.2, 0, 0]], f32),
    "projective": np.array([[1.1, 0.2, -0.5, -0.1, 0.9, 0.3, 0.05, -0.08],
                            [0.9, 0, 0.4, 0, 1.2, 0, -0.1, 0.02]], f32),
    "shear": np.array([[1, 0.7, -1, 0, 1, 0, 0, 0]], f32),
}
for name, t in trans.items():
    full = name in ("rotate", "far", "projective")
    for interp in ("NEAREST", "BILINEAR"):
        for mode in ("REFLECT", "WRAP", "CONSTANT", "NEAREST"):
            if not full and (interp, mode) not in (("NEAREST", "CONSTANT"),
                                                   ("BILINEAR", "REFLECT")):
                continue
            op("ImageProjectiveTransformV3",
               dict(images=timg, transforms=t, output_shape=i32([H, W]), fill_value=f32(-1.5)),
               dict(interpolation=interp, fill_mode=mode), note=f"{name} {interp} {mode}")
    op("ImageProjectiveTransformV2", dict(images=timg, transforms=t, output_shape=i32([4, 7])),
       dict(interpolation="BILINEAR", fill_mode="CONSTANT"), note=f"{name} resized")
op("ImageProjectiveTransformV2", dict(images=timg, transforms=trans["rotate"],
                                      output_shape=i32([H, W])),
   dict(interpolation="NEAREST"), note="default fill_mode")
op("ImageProjectiveTransformV3",
   dict(images=np.array([[[[1.0], [2.0], [3.0]]]], f32),
        transforms=np.array([[1, 0, 0, 0, 1, 0, -1, 0]], f32), output_shape=i32([1, 3]),
        fill_value=f32(9)),
   dict(interpolation="BILINEAR", fill_mode="REFLECT"), note="projection zero at x=1")
for dt, note in ((u8, "uint8"), (i32, "int32"), (i64, "int64"), (f16, "float16"),
                 (f64, "float64")):
    x = (timg * 20).astype(dt)
    for interp in ("NEAREST", "BILINEAR"):
        op("ImageProjectiveTransformV3",
           dict(images=x, transforms=trans["rotate"], output_shape=i32([H, W]),
                fill_value=f32(7.8)),
           dict(interpolation=interp, fill_mode="CONSTANT"), note=f"{note} {interp}",
           tol=1e-3 if dt == f16 else None)
    op("ImageProjectiveTransformV3",
       dict(images=x, transforms=trans["projective"], output_shape=i32([H, W]),
            fill_value=f32(3.0)),
       dict(interpolation="BILINEAR", fill_mode="REFLECT"), note=f"{note} reflect",
       tol=1e-3 if dt == f16 else None)
op("ImageProjectiveTransformV3",
   dict(images=rand(2, 1, 4, 1), transforms=trans["far"], output_shape=i32([2, 4]),
        fill_value=f32(0)),
   dict(interpolation="BILINEAR", fill_mode="REFLECT"), note="height 1 reflect")
op("ImageProjectiveTransformV3",
   dict(images=rand(2, 4, 1, 1), transforms=trans["far"], output_shape=i32([4, 2]),
        fill_value=f32(0)),
   dict(interpolation="NEAREST", fill_mode="WRAP"), note="width 1 wrap")
op("ImageProjectiveTransformV3",
   dict(images=rand(0, 3, 3, 1), transforms=trans["shared"], output_shape=i32([3, 3]),
        fill_value=f32(0)),
   dict(interpolation="BILINEAR", fill_mode="CONSTANT"), note="empty batch")
op("ImageProjectiveTransformV3",
   dict(images=rand(1, 0, 3, 1), transforms=trans["shared"], output_shape=i32([2, 2]),
        fill_value=f32(4)),
   dict(interpolation="BILINEAR"), note="zero-height image: all fill")
for bad, note in (
        (dict(images=timg[0], transforms=trans["shared"], output_shape=i32([3, 3])), "rank 3"),
        (dict(images=timg, transforms=trans["shared"][:, :7], output_shape=i32([3, 3])),
         "7 params"),
        (dict(images=timg, transforms=np.ones((3, 8), f32), output_shape=i32([3, 3])),
         "3 transforms for 2 images"),
        (dict(images=timg, transforms=trans["shared"], output_shape=i32([3, 0])),
         "zero output"),
        (dict(images=timg, transforms=trans["shared"], output_shape=i32([3, 3, 1])),
         "3 output dims"),
        (dict(images=timg, transforms=trans["shared"], output_shape=i32([[3, 3]])),
         "2-D output shape")):
    op("ImageProjectiveTransformV2", bad, dict(interpolation="NEAREST"), note=note)
op("ImageProjectiveTransformV3",
   dict(images=timg, transforms=trans["shared"], output_shape=i32([3, 3]),
        fill_value=f32([1, 2])),
   dict(interpolation="NEAREST"), note="fill_value not scalar")

# =============================================================================================
# DrawBoundingBoxes / DrawBoundingBoxesV2

canvas = rand(2, 6, 7, 3) * 0.3
boxes = np.array([
    [[0.1, 0.1, 0.6, 0.7], [0.5, 0.2, 0.9, 0.95], [-0.2, -0.3, 0.4, 0.5], [0.7, 0.1, 0.2, 0.5],
     [1.3, 0.2, 1.6, 0.5], [0.0, 0.0, 1.0, 1.0], [0.3, 0.3, 0.3, 0.3], [0.2, -0.5, 0.8, 1.5],
     [-0.1, 0.4, 0.5, 0.6], [0.5, 0.5, 0.9, 0.9], [0.05, 0.8, 0.95, 1.2], [0.4, -0.9, 0.6, -0.1]],
    [[0.0, 0.0, 0.5, 0.5], [0.25, 0.25, 0.75, 0.75], [0.5, 0.5, 1.0, 1.0], [0.9, 0.9, 0.1, 0.1],
     [0.1, 0.9, 0.9, 0.1], [-1, -1, 2, 2], [0.33, 0.0, 0.66, 1.0], [0.0, 0.33, 1.0, 0.66],
     [0.6, 0.6, 0.61, 0.61], [0.99, 0.99, 1.0, 1.0], [0.0, 0.0, 0.01, 0.01],
     [0.45, 0.45, 0.55, 0.55]]], f32)
op("DrawBoundingBoxes", dict(images=canvas, boxes=boxes))
op("DrawBoundingBoxes", dict(images=canvas[..., :1], boxes=boxes), note="grey")
op("DrawBoundingBoxes", dict(images=rand(2, 6, 7, 4), boxes=boxes), note="RGBA")
op("DrawBoundingBoxes", dict(images=canvas.astype(f16), boxes=boxes), note="float16")
op("DrawBoundingBoxes", dict(images=canvas, boxes=np.zeros((2, 0, 4), f32)), note="no boxes")
op("DrawBoundingBoxes", dict(images=rand(0, 3, 3, 3), boxes=np.zeros((0, 2, 4), f32)),
   note="empty batch")
op("DrawBoundingBoxes", dict(images=rand(1, 1, 1, 3), boxes=boxes[:1, :3]), note="1x1 image")
op("DrawBoundingBoxes", dict(images=rand(2, 6, 7, 2), boxes=boxes), note="2 channels")
op("DrawBoundingBoxes", dict(images=canvas, boxes=boxes[..., :3]), note="3 coordinates")
op("DrawBoundingBoxes", dict(images=canvas, boxes=boxes[:1]), note="batch mismatch")
op("DrawBoundingBoxes", dict(images=canvas[0], boxes=boxes), note="rank 3 images")
op("DrawBoundingBoxes", dict(images=canvas, boxes=boxes[0]), note="rank 2 boxes")
colors = np.array([[0.9, 0.1, 0.2, 1], [0.1, 0.2, 0.9, 0.5], [0.5, 0.5, 0.5, 0],
                   [-1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]], f32)
op("DrawBoundingBoxesV2", dict(images=canvas, boxes=boxes, colors=colors))
op("DrawBoundingBoxesV2", dict(images=canvas, boxes=boxes, colors=colors[:2, :3]),
   note="2 colours, 3 channels")
op("DrawBoundingBoxesV2", dict(images=canvas[..., :1], boxes=boxes, colors=colors),
   note="grey")
op("DrawBoundingBoxesV2", dict(images=canvas, boxes=boxes, colors=np.zeros((0, 4), f32)),
   note="no colours: default table")
op("DrawBoundingBoxesV2", dict(images=canvas.astype(f16), boxes=boxes, colors=colors[:3]),
   note="float16")
op("DrawBoundingBoxesV2", dict(images=canvas, boxes=boxes, colors=colors[:, :2]),
   note="colours with too few channels")
op("DrawBoundingBoxesV2", dict(images=canvas, boxes=boxes, colors=colors[0]),
   note="1-D colours")

# =============================================================================================
# ExtractGlimpse / ExtractGlimpseV2

gimg = rand(2, 8, 9, 1)
flat_img = np.full((2, 6, 7, 2), 0.25, f32)
flat_img[1] = -3.0
zero_noise = dict(uniform_noise=False, noise="zero")
offsets = {
    "inside": np.array([[0.1, -0.2], [-0.3, 0.25]], f32),
    "edges": np.array([[0.9, -0.95], [-1.0, 1.0]], f32),
    "outside": np.array([[3.0, 0.0], [0.0, -4.0]], f32),
    "pixels": np.array([[1.0, 2.0], [-3.0, 7.5]], f32),
    "pixels_far": np.array([[6.7, -2.2], [12.0, 1.0]], f32),
}
for version in ("ExtractGlimpse", "ExtractGlimpseV2"):
    for centered in (True, False):
        for normalized in (True, False):
            for oname, off in offsets.items():
                if normalized and oname.startswith("pixels"):
                    continue
                if not normalized and not oname.startswith("pixels"):
                    continue
                for size in ([3, 4], [10, 2]) if oname in ("edges", "pixels") else ([3, 4],):
                    op(version, dict(input=gimg, size=i32(size), offsets=off),
                       dict(centered=centered, normalized=normalized, **zero_noise),
                       note=f"{oname} centered={centered} normalized={normalized} {size}")
    op(version, dict(input=gimg, size=i32([3, 4]), offsets=offsets["inside"]),
       dict(centered=False, normalized=True, **zero_noise), note="normalized uncentered")
    op(version, dict(input=gimg, size=i32([8, 9]), offsets=np.zeros((2, 2), f32)),
       note="whole image, default noise")
    # V1 also takes half the window off uncentered pixel offsets.
    border = [[7, 7.5], [1, 1.5]] if version == "ExtractGlimpse" else [[6, 6], [0, 0]]
    op(version, dict(input=gimg, size=i32([2, 3]), offsets=np.array(border, f32)),
       dict(centered=False, normalized=False), note="ends on the border, uniform noise")
    for noise in ("uniform", "gaussian"):
        op(version, dict(input=flat_img, size=i32([4, 5]), offsets=offsets["edges"]),
           dict(uniform_noise=noise == "uniform", noise=noise),
           note=f"{noise} noise of a constant image")
    op(version, dict(input=flat_img, size=i32([4, 5]), offsets=offsets["edges"]),
       dict(uniform_noise=False, noise=""), note="empty noise: gaussian")
    op(version, dict(input=gimg, size=i32([0, 3]), offsets=offsets["inside"]),
       dict(**zero_noise), note="zero height")
    op(version, dict(input=gimg, size=i32([3, 4, 5]), offsets=offsets["inside"]),
       dict(**zero_noise), note="3 sizes")
    op(version, dict(input=gimg, size=i32([3, 4]), offsets=offsets["inside"][:1]),
       dict(**zero_noise), note="1 offset for 2 images")
    op(version, dict(input=gimg, size=i32([3, 4]), offsets=np.zeros((2, 3), f32)),
       dict(**zero_noise), note="3 coordinates")
    op(version, dict(input=gimg, size=i32([3, 4]), offsets=offsets["inside"]),
       dict(uniform_noise=True, noise="gaussian"), note="uniform_noise and gaussian")
    op(version, dict(input=gimg, size=i32([3, 4]), offsets=offsets["inside"]),
       dict(uniform_noise=False, noise="pink"), note="unknown noise")
    op(version, dict(input=gimg[0], size=i32([3, 4]), offsets=offsets["inside"]),
       dict(**zero_noise), note="rank 3")

# =============================================================================================
# CropAndResizeGradImage / CropAndResizeGradBoxes

cboxes = np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.5, 0.6, 1.3], [0.9, 0.8, 0.2, 0.1]], f32)
cind = i32([0, 1, 1])
cgrads = rand(3, 3, 4, 2, lo=-1)
for dt in (f32, f16, f64):
    for method in ("bilinear", "nearest"):
        op("CropAndResizeGradImage",
           dict(grads=cgrads, boxes=cboxes, box_ind=cind, image_size=i32([2, 5, 6, 2])),
           dict(T=tf.as_dtype(dt), method=method), note=f"{dt.__name__} {method}",
           tol=1e-3 if dt == f16 else None)
op("CropAndResizeGradImage",
   dict(grads=rand(3, 1, 1, 2), boxes=cboxes, box_ind=cind, image_size=i32([2, 5, 6, 2])),
   dict(T=tf.float32), note="1x1 crops")
op("CropAndResizeGradImage",
   dict(grads=rand(2, 4, 3, 1), boxes=np.array([[0, 0, 1, 1], [0.2, 0.2, 0.7, 0.6]], f32),
        box_ind=i32([0, 0]), image_size=i32([1, 4, 4, 1])),
   dict(T=tf.float32), note="two boxes on one image")
op("CropAndResizeGradImage",
   dict(grads=np.zeros((0, 2, 2, 2), f32), boxes=np.zeros((0, 4), f32),
        box_ind=np.zeros((0,), i32), image_size=i32([2, 3, 3, 2])),
   dict(T=tf.float32), note="no boxes")
for bad, note in (
        (dict(grads=cgrads, boxes=cboxes, box_ind=i32([0, 2, 1]), image_size=i32([2, 5, 6, 2])),
         "box index out of range"),
        (dict(grads=cgrads, boxes=cboxes, box_ind=cind, image_size=i32([2, 5, 6])),
         "3 image dims"),
        (dict(grads=cgrads, boxes=cboxes, box_ind=cind, image_size=i32([2, 5, 6, 3])),
         "depth mismatch"),
        (dict(grads=cgrads[0], boxes=cboxes, box_ind=cind, image_size=i32([2, 5, 6, 2])),
         "rank 3 grads"),
        (dict(grads=cgrads, boxes=cboxes[:2], box_ind=cind[:2], image_size=i32([2, 5, 6, 2])),
         "box count mismatch"),
        (dict(grads=cgrads, boxes=cboxes, box_ind=cind, image_size=i32([2, 0, 6, 2])),
         "zero height")):
    op("CropAndResizeGradImage", bad, dict(T=tf.float32), note=note)

cimg = rand(2, 5, 6, 2, hi=4)
for dt in (f32, f64, f16, u8, i32, i8, np.uint16, i16, i64):
    op("CropAndResizeGradBoxes",
       dict(grads=cgrads, image=(cimg * (40 if dt not in (f32, f64, f16) else 1)).astype(dt),
            boxes=cboxes, box_ind=cind), note=dt.__name__)
op("CropAndResizeGradBoxes",
   dict(grads=rand(3, 1, 4, 2), image=cimg, boxes=cboxes, box_ind=cind), note="crop height 1")
op("CropAndResizeGradBoxes",
   dict(grads=rand(3, 3, 1, 2), image=cimg, boxes=cboxes, box_ind=cind), note="crop width 1")
op("CropAndResizeGradBoxes",
   dict(grads=np.zeros((0, 2, 2, 2), f32), image=cimg, boxes=np.zeros((0, 4), f32),
        box_ind=np.zeros((0,), i32)), note="no boxes")
for bad, note in (
        (dict(grads=cgrads, image=cimg, boxes=cboxes, box_ind=i32([0, 1, -1])),
         "box index out of range"),
        (dict(grads=cgrads, image=cimg[..., :1], boxes=cboxes, box_ind=cind), "depth mismatch"),
        (dict(grads=cgrads, image=cimg[0], boxes=cboxes, box_ind=cind), "rank 3 image"),
        (dict(grads=cgrads, image=cimg, boxes=cboxes[:, :3], box_ind=cind), "3 columns")):
    op("CropAndResizeGradBoxes", bad, note=note)

# =============================================================================================
# MaxPool / MaxPool3D with NaN and signed zeros: MaxPool folds each window with
# acc < x ? x : acc from the lowest finite value (NaN never wins, an all-NaN window gives
# that value); MaxPool3D's Eigen kernel lets a NaN win, and a number after it win back (with
# SAME padding the padding's lowest value, folded in too, wins back as well: dfg does not
# follow that, so no such window here)
NANPOOL = np.array([1, np.nan, np.nan, np.nan, 0, -0.0, -0.0, 0, 2, 5, np.nan, 7], np.float32)
op("MaxPool", dict(input=NANPOOL.reshape(1, 1, 12, 1)),
   dict(ksize=[1, 1, 2, 1], strides=[1, 1, 2, 1], padding="VALID"), note="NaN and zeros")
op("MaxPool", dict(input=NANPOOL.reshape(1, 3, 4, 1)),
   dict(ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1], padding="SAME"), note="NaN, SAME")
op("MaxPool", dict(input=NANPOOL.reshape(1, 1, 3, 4)),
   dict(ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2], padding="VALID"), note="NaN, depthwise")
op("MaxPool3D", dict(input=NANPOOL.reshape(1, 1, 1, 12, 1)),
   dict(ksize=[1, 1, 1, 2, 1], strides=[1, 1, 1, 2, 1], padding="VALID"), note="NaN 3-D")

# MaxPoolWithArgmax / MaxPoolGradWithArgmax


def argmax_pool(x, k, s, pad, batch_index=False, targmax=tf.int64, note=""):
    op("MaxPoolWithArgmax", dict(input=x),
       dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=pad, Targmax=targmax,
            include_batch_in_index=batch_index), note=note)


pool_x = rand(2, 5, 6, 2, lo=-1)
for pad in ("VALID", "SAME"):
    argmax_pool(pool_x, (3, 3), (2, 2), pad, note=pad)
    argmax_pool(pool_x, (2, 3), (1, 2), pad, batch_index=True, note=f"batch index {pad}")
    argmax_pool(pool_x, (2, 2), (3, 4), pad, targmax=tf.int32, note=f"strides > ksize {pad}")
argmax_pool(np.ones((2, 3, 4, 2), f32), (2, 2), (1, 1), "SAME", batch_index=True, note="ties")
nan_x = rand(1, 3, 3, 1)
nan_x[0, 0, 0, 0] = np.nan
nan_x[0, 1, 2, 0] = np.nan
argmax_pool(nan_x, (2, 2), (1, 1), "VALID", note="NaN")
argmax_pool(np.full((1, 2, 2, 1), -np.inf, f32), (2, 2), (1, 1), "SAME", note="-inf")
argmax_pool((pool_x * 100 + 100).astype(u8), (3, 2), (2, 2), "SAME", note="uint8")
argmax_pool((pool_x * 100).astype(i64), (2, 2), (2, 2), "VALID", note="int64")
argmax_pool(pool_x.astype(f16), (3, 3), (1, 1), "SAME", note="float16")
argmax_pool(pool_x.astype(f64), (2, 2), (2, 1), "SAME", targmax=tf.int32, note="float64")
argmax_pool(pool_x, (7, 2), (2, 2), "VALID", note="window taller than input")
argmax_pool(rand(1, 2, 2, 4), (1, 1), (1, 1), "VALID", note="1x1")
op("MaxPoolWithArgmax", dict(input=rand(1, 2, 2, 4)),
   dict(ksize=[1, 1, 1, 2], strides=[1, 1, 1, 2], padding="VALID"), note="depth window")
op("MaxPoolWithArgmax", dict(input=rand(0, 2, 2, 4)),
   dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), note="empty")
op("MaxPoolWithArgmax", dict(input=rand(2, 2, 2, 4)),
   dict(ksize=[2, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), note="ksize on batch")
op("MaxPoolWithArgmax", dict(input=rand(2, 2, 4)),
   dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), note="rank 3")

for pad, k, s, bi in (("VALID", (3, 3), (2, 2), False), ("SAME", (2, 3), (1, 2), True),
                      ("SAME", (3, 3), (1, 1), False), ("VALID", (2, 2), (1, 1), True)):
    attrs = dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=pad, include_batch_in_index=bi)
    _, am = raw.MaxPoolWithArgmax(input=pool_x, **attrs)
    g = rand(*am.shape, lo=-1)
    op("MaxPoolGradWithArgmax", dict(input=pool_x, grad=g, argmax=am.numpy()), attrs,
       note=f"{pad} {k} {s} batch_index={bi}")
    if pad == "SAME" and bi:
        for dt in (f16, f64, i32, u8):
            op("MaxPoolGradWithArgmax",
               dict(input=pool_x.astype(dt), grad=(g * 10).astype(dt), argmax=am.numpy()), attrs,
               note=dt.__name__, tol=1e-3 if dt == f16 else None)
        op("MaxPoolGradWithArgmax", dict(input=pool_x, grad=g[:, :1], argmax=am.numpy()), attrs,
           note="grad shape")
        op("MaxPoolGradWithArgmax", dict(input=pool_x, grad=g, argmax=am.numpy()[:1]), attrs,
           note="argmax shape")
op("MaxPoolGradWithArgmax", dict(input=rand(0, 2, 2, 1), grad=rand(0, 1, 1, 1),
                                argmax=np.zeros((0, 1, 1, 1), i64)),
   dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"), note="empty")
no_kernel_graph("max_pool_grad_with_argmax_int32",
                lambda: raw.MaxPoolGradWithArgmax(
                    input=rand(1, 2, 2, 1), grad=rand(1, 1, 1, 1),
                    argmax=np.zeros((1, 1, 1, 1), i32), ksize=[1, 2, 2, 1],
                    strides=[1, 1, 1, 1], padding="VALID"),
                ["MaxPoolGradWithArgmax"])

# =============================================================================================
# Dilation2D and its gradients


def dil_attrs(s, r, pad):
    return dict(strides=[1, *s, 1], rates=[1, *r, 1], padding=pad)


dx = rand(2, 6, 5, 2, lo=-1)
dfilt = rand(2, 3, 2, lo=-0.5, hi=0.5)
dil_cases = [((1, 1), (1, 1), "VALID"), ((1, 1), (1, 1), "SAME"), ((2, 2), (1, 1), "SAME"),
             ((1, 2), (2, 1), "VALID"), ((2, 1), (2, 2), "SAME"), ((3, 3), (1, 1), "VALID")]
for s, r, pad in dil_cases:
    attrs = dil_attrs(s, r, pad)
    out = raw.Dilation2D(input=dx, filter=dfilt, **attrs)
    op("Dilation2D", dict(input=dx, filter=dfilt), attrs, note=f"{s} {r} {pad}")
    dy = rand(*out.shape, lo=-1)
    op("Dilation2DBackpropInput", dict(input=dx, filter=dfilt, out_backprop=dy), attrs,
       note=f"{s} {r} {pad}")
    op("Dilation2DBackpropFilter", dict(input=dx, filter=dfilt, out_backprop=dy), attrs,
       note=f"{s} {r} {pad}")
attrs = dil_attrs((1, 1), (1, 1), "SAME")
ties_x, ties_f = np.zeros((1, 3, 3, 1), f32), np.zeros((2, 2, 1), f32)
ties_dy = rand(1, 3, 3, 1)
for name in ("Dilation2DBackpropInput", "Dilation2DBackpropFilter"):
    op(name, dict(input=ties_x, filter=ties_f, out_backprop=ties_dy), attrs, note="ties")
    op(name, dict(input=np.full((1, 3, 3, 1), -np.inf, f32), filter=ties_f,
                  out_backprop=ties_dy), attrs, note="-inf input (nothing beats lowest)")
op("Dilation2D", dict(input=np.full((1, 3, 3, 1), -np.inf, f32), filter=ties_f), attrs,
   note="-inf input")
for dt in (u8, i32, f16, f64, i8):
    x = (dx * 60 + (80 if dt == u8 else 0)).astype(dt)
    f = (dfilt * 100).astype(dt) if dt != u8 else (dfilt * 100 + 100).astype(dt)
    attrs = dil_attrs((1, 2), (2, 1), "SAME")
    out = raw.Dilation2D(input=x, filter=f, **attrs)
    dy = (rand(*out.shape) * 10).astype(dt)
    tol = 1e-3 if dt == f16 else None
    op("Dilation2D", dict(input=x, filter=f), attrs, note=dt.__name__, tol=tol)
    op("Dilation2DBackpropInput", dict(input=x, filter=f, out_backprop=dy), attrs,
       note=dt.__name__, tol=tol)
    op("Dilation2DBackpropFilter", dict(input=x, filter=f, out_backprop=dy), attrs,
       note=dt.__name__, tol=tol)
attrs = dil_attrs((1, 1), (1, 1), "VALID")
op("Dilation2D", dict(input=rand(0, 4, 4, 2), filter=dfilt), attrs, note="empty batch")
op("Dilation2D", dict(input=dx, filter=rand(7, 2, 2)), attrs, note="filter taller than input")
op("Dilation2D", dict(input=dx, filter=dfilt[..., :1]), attrs, note="depth mismatch")
op("Dilation2D", dict(input=dx, filter=dfilt[0]), attrs, note="rank 2 filter")
op("Dilation2D", dict(input=dx[0], filter=dfilt), attrs, note="rank 3 input")
op("Dilation2D", dict(input=dx, filter=dfilt), dict(strides=[2, 1, 1, 1], rates=[1, 1, 1, 1],
                                                    padding="VALID"), note="batch stride")
op("Dilation2D", dict(input=dx, filter=dfilt), dict(strides=[1, 1, 1, 1], rates=[1, 1, 1, 2],
                                                    padding="VALID"), note="depth rate")
op("Dilation2DBackpropInput",
   dict(input=rand(0, 4, 4, 2), filter=dfilt, out_backprop=rand(0, 3, 2, 2)), attrs,
   note="empty batch")
op("Dilation2DBackpropInput", dict(input=dx, filter=dfilt, out_backprop=rand(2, 4, 3, 2)),
   attrs, note="wrong out_backprop shape")
op("Dilation2DBackpropFilter", dict(input=dx, filter=dfilt, out_backprop=rand(2, 5, 4, 2)),
   attrs, note="wrong out_backprop shape")
op("Dilation2DBackpropFilter", dict(input=dx, filter=dfilt, out_backprop=rand(5, 3, 3)),
   attrs, note="rank 3 out_backprop")

# =============================================================================================
# InTopK (v1: k is an attr)

preds = np.array([[0.1, 0.5, 0.2, 0.2, 0.0], [1, 2, 3, 4, 5], [0.3, 0.3, 0.3, 0.1, 0.0],
                  [-1, -2, -3, -4, -5], [0.2, np.nan, 0.1, 0, 0], [0.2, np.inf, 0.1, 0, 0]], f32)
for k in (1, 2, 3, 0, 5, -1):
    op("InTopK", dict(predictions=preds, targets=i32([2, 3, 1, 0, 0, 1])), dict(k=k),
       note=f"k={k}")
op("InTopK", dict(predictions=preds, targets=i64([4, 0, 5, -1, 2, 0])), dict(k=2),
   note="int64, targets out of range")
op("InTopK", dict(predictions=np.zeros((0, 3), f32), targets=np.zeros((0,), i32)), dict(k=1),
   note="empty")
op("InTopK", dict(predictions=preds[0], targets=i32([0])), dict(k=1), note="rank 1")
op("InTopK", dict(predictions=preds, targets=i32([0, 1])), dict(k=1), note="length mismatch")

# =============================================================================================
# FractionalMaxPool / FractionalAvgPool (deterministic, seeded: TF's Philox regions)

fx = rand(2, 9, 8, 2, lo=-1)
frac_cases = [
    ([1, 1.44, 1.73, 1], False, False, (1, 2)),
    ([1, 1.44, 1.73, 1], True, False, (3, 4)),
    ([1, 1.5, 1.5, 1], False, True, (5, 0)),
    ([1, 1.5, 1.5, 1], True, True, (0, 6)),
    ([1, 2.0, 3.0, 1], False, False, (7, 8)),
    ([1, 1.0, 1.2, 1], True, False, (9, 10)),
    ([1, 2.6, 1.1, 1], False, True, (11, 12)),
    ([1, 4.5, 4.5, 1], True, True, (-13, 2**40 + 14)),
]
for name in ("FractionalMaxPool", "FractionalAvgPool"):
    for ratio, pseudo, overlapping, (s1, s2) in frac_cases:
        op(name, dict(value=fx),
           dict(pooling_ratio=ratio, pseudo_random=pseudo, overlapping=overlapping,
                deterministic=True, seed=s1, seed2=s2),
           note=f"{ratio} pseudo={pseudo} overlapping={overlapping}")
    for dt, seed in ((i32, 21), (i64, 22), (f64, 23)):
        x = (fx * 50).astype(dt)
        op(name, dict(value=x),
           dict(pooling_ratio=[1, 1.6, 1.3, 1], overlapping=True, deterministic=True,
                seed=seed, seed2=1), note=dt.__name__)
    op(name, dict(value=fx[:, :3, :2]),
       dict(pooling_ratio=[1, 2.9, 1.9, 1], deterministic=True, seed=31, seed2=1),
       note="1x1 output")
    for attrs, note in (
            (dict(pooling_ratio=[1, 0.5, 1.5, 1], deterministic=True, seed=1), "ratio < 1"),
            (dict(pooling_ratio=[2, 1.5, 1.5, 1], deterministic=True, seed=41), "batch ratio"),
            (dict(pooling_ratio=[1, 1.5, 1.5, 1], deterministic=False, seed=1),
             "seed without deterministic"),
            (dict(pooling_ratio=[1, 11, 1.5, 1], deterministic=True, seed=42),
             "ratio above size")):
        op(name, dict(value=fx), attrs, note=note)
    op(name, dict(value=fx[0]), dict(pooling_ratio=[1, 1.5, 1.5, 1], deterministic=True, seed=43),
       note="rank 3")
    op(name, dict(value=fx[:0]), dict(pooling_ratio=[1, 1.5, 1.5, 1], deterministic=True,
                                      seed=44), note="empty batch")


# =============================================================================================
# tf.image functions in a TF1 graph (the ops as TF's Python API emits them)


def image_api_graph():
    import keras

    x = tf.constant((rand(2, 6, 5, 3) * 255).astype(u8))
    xf = tf.image.convert_image_dtype(x, tf.float32)
    outs = [
        tf.image.adjust_hue(xf, 0.3),
        tf.image.adjust_saturation(xf, 1.7),
        tf.image.adjust_contrast(xf, 0.6),
        tf.image.adjust_contrast(x, 1.4),
        tf.image.rgb_to_hsv(xf),
        tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(xf)),
        tf.image.extract_patches(xf, [1, 3, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        tf.image.draw_bounding_boxes(xf, boxes[:, :4], colors=colors[:3]),
        # what Keras' RandomRotation/Zoom/Translation layers run, with a fixed transform
        keras.ops.image.affine_transform(xf, trans["projective"], interpolation="bilinear",
                                         fill_mode="reflect"),
        keras.ops.image.affine_transform(xf, trans["zoom"], interpolation="nearest",
                                         fill_mode="constant", fill_value=0.5),
    ]
    return [(outs, [])]


graph("image_api", image_api_graph,
      ["AdjustHue", "AdjustSaturation", "AdjustContrastv2", "RGBToHSV", "HSVToRGB",
       "ExtractImagePatches", "DrawBoundingBoxesV2", "ImageProjectiveTransformV3"])

if __name__ == "__main__":
    write()
