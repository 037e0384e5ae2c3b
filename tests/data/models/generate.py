"""Generate the Keras model zoo: frozen GraphDefs with TensorFlow's inputs and outputs.

Run with the Python of a TensorFlow environment (never in CI; dfg never imports TensorFlow):

    /tmp/tfvenv/bin/python tests/data/models/generate.py            # every case, here
    /tmp/tfvenv/bin/python tests/data/models/generate.py --only mobilenet,layer_conv2d
    /tmp/tfvenv/bin/python tests/data/models/generate.py --list
    /tmp/tfvenv/bin/python tests/data/models/generate.py --kernels   # kernels/kernels.npz
    /tmp/tfvenv/bin/python tests/data/models/generate.py --full --out /tmp/zoo_full

``--full`` builds the keras.applications models at their real widths (ResNet50, VGG16,
Xception, ...: tens to hundreds of MB each, never committed) into ``--out``; the committed
zoo builds the same families from the same Keras code, width-reduced (see ``_Narrow``).

Each case is a folder in the format of tests/data/conformance (see its README): ``graph.pb``
(binary GraphDef; no pbtxt, to keep the size down), ``case.json``, ``s0_feed_*.npy`` and
``s0_fetch_*.npy``. A model is built with a fixed seed, every constant weight (zero biases,
norm offsets and scales, moving means and variances, layer scales) is replaced by seeded
random values so that a skipped BiasAdd or a mis-folded batch norm cannot pass, the
BatchNormalization moving statistics of the keras.applications models are then calibrated
on a batch of random inputs (``calibrate_batch_norm``: without it a deep net's output
hardly depends on its input; ``case.json`` records ``input_sensitivity``; VGG16, with no
normalization at all, gets unit-variance kernels instead, ``unit_variance_kernels``; models
that rescale pixels themselves are fed pixels in [0, 255]), the model is frozen with
``convert_variables_to_constants_v2`` (default: control flow lowered to v1
Switch/Merge/Enter/Exit), and the expected outputs come from running the frozen GraphDef
itself in a ``tf.compat.v1.Session`` after ``import_graph_def``. When the model ends in a
Softmax, the Softmax's input (the logits) is fetched too, so small logit errors cannot hide
behind saturated probabilities.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import layers as L  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

HERE = Path(__file__).resolve().parent
SEED = 1234
BATCH = 2


# --------------------------------------------------------------------------- width reduction

class _Narrow:
    """Stands in for ``keras.layers`` inside one keras.applications module while it builds a
    model: Conv/SeparableConv/Dense layers get ``filters``/``units`` divided by ``div``
    (the classifier keeps ``classes``). Every other name is the real layer. Layers whose
    widths must match (residual adds, concatenations) divide the same number by the same
    divisor, so the network keeps its shape, blocks and op mix at a fraction of the weights."""

    def __init__(self, div: int, classes: int, only: frozenset[str] | None = None,
                 keep: Callable[[str], bool] | None = None) -> None:
        self._div, self._classes, self._only, self._keep = div, classes, only, keep

    def _n(self, v: int, name: str | None = None) -> int:
        if self._only is not None and name not in self._only:
            return v
        if self._keep is not None and self._keep(name or ""):
            return v  # already sized from a narrowed tensor's shape
        return max(4, v // self._div)

    def __getattr__(self, name: str):
        real = getattr(keras.layers, name)
        if name in ("Conv1D", "Conv2D", "Conv3D", "SeparableConv2D", "Conv2DTranspose"):
            def make(filters, *a, **k):
                return real(self._n(filters, k.get("name")), *a, **k)
            return make
        if name == "Dense":
            def dense(units, *a, **k):
                return real(units if k.get("name") == "predictions" or units == self._classes
                            else self._n(units, k.get("name")), *a, **k)
            return dense
        return real


class narrowed:
    """Context manager: build with ``module.layers`` replaced by a :class:`_Narrow`."""

    def __init__(self, module, div: int, classes: int = 10,
                 only: frozenset[str] | None = None,
                 keep: Callable[[str], bool] | None = None) -> None:
        self.module, self.div, self.classes = module, div, classes
        self.only, self.keep = only, keep

    def __enter__(self):
        self.saved = self.module.layers
        self.module.layers = _Narrow(self.div, self.classes, self.only, self.keep)

    def __exit__(self, *exc):
        self.module.layers = self.saved


def _apps(name: str):
    import importlib
    return importlib.import_module(f"keras.src.applications.{name}")


# --------------------------------------------------------------------------- cases

# name -> (builder, input specs [(shape without batch, dtype, kind)], description, features)
CASES: dict[str, tuple[Callable[[bool], keras.Model], list, str, list[str]]] = {}


def case(name: str, inputs: list, description: str, features: list[str]):
    def deco(fn):
        CASES[name] = (fn, inputs, description, features)
        return fn
    return deco


def img(h: int, w: int | None = None, c: int = 3, kind: str = "normal") -> tuple:
    return ((h, w or h, c), "float32", kind)


# Models whose first layers rescale pixels (Rescaling 1/255 or 1/127.5, ImageNet
# Normalization) are fed pixel values in [0, 255]: fed N(0, 1) they would see an almost
# constant image.
PIXELS = "pixels"


APP = ["keras", "frozen", "application", "graph-pb"]


@case("mobilenet", [img(32)], "keras.applications.MobileNet(alpha=0.25), 32x32, 10 classes.",
      APP)
def _mobilenet(full):
    return keras.applications.MobileNet(input_shape=(32, 32, 3), alpha=1.0 if full else 0.25,
                                        weights=None, classes=10)


@case("mobilenet_v2", [img(32)], "keras.applications.MobileNetV2(alpha=0.35), 32x32.", APP)
def _mobilenet_v2(full):
    return keras.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=1.0 if full else 0.35,
                                          weights=None, classes=10)


@case("mobilenet_v3_small", [img(32, kind=PIXELS)],
      "keras.applications.MobileNetV3Small(alpha=0.75, minimalistic=False), 32x32 (hard-swish,"
      " squeeze-excite, Rescaling); its last 1x1 conv (conv_2) has 128 filters, not 1024.", APP)
def _mobilenet_v3_small(full):
    if full:
        return keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), weights=None,
                                                   classes=10)
    with narrowed(_apps("mobilenet_v3"), 8, only=frozenset({"conv_2"})):
        return keras.applications.MobileNetV3Small(input_shape=(32, 32, 3), alpha=0.75,
                                                   weights=None, classes=10)


@case("mobilenet_v3_large", [img(32, kind=PIXELS)],
      "keras.applications.MobileNetV3Large(alpha=0.5, minimalistic=True), 32x32; its last "
      "1x1 conv (conv_2) has 256 filters, not 1280.", APP)
def _mobilenet_v3_large(full):
    if full:
        return keras.applications.MobileNetV3Large(input_shape=(32, 32, 3), weights=None,
                                                   classes=10)
    with narrowed(_apps("mobilenet_v3"), 5, only=frozenset({"conv_2"})):
        return keras.applications.MobileNetV3Large(input_shape=(32, 32, 3), alpha=0.5,
                                                   minimalistic=True, weights=None,
                                                   classes=10)


@case("efficientnet_b0", [img(32, kind=PIXELS)],
      "keras EfficientNet builder with B0's blocks at width 0.25, depth 0.5 (full: B0), 32x32: "
      "swish, squeeze-excite, Normalization + Rescaling preprocessing.", APP)
def _efficientnet_b0(full):
    if full:
        return keras.applications.EfficientNetB0(input_shape=(32, 32, 3), weights=None,
                                                  classes=10)
    return _apps("efficientnet").EfficientNet(0.25, 0.5, 32, input_shape=(32, 32, 3),
                                              weights=None, classes=10, name="efficientnet")


@case("efficientnet_v2_b0", [img(32, kind=PIXELS)],
      "keras EfficientNetV2 builder with B0's blocks at width 0.25, depth 0.5 (full: V2B0), "
      "32x32: fused MBConv blocks.", APP)
def _efficientnet_v2_b0(full):
    if full:
        return keras.applications.EfficientNetV2B0(input_shape=(32, 32, 3), weights=None,
                                                    classes=10)
    return _apps("efficientnet_v2").EfficientNetV2(0.25, 0.5, 32, input_shape=(32, 32, 3),
                                                   weights=None, classes=10,
                                                   name="efficientnetv2-b0")


def _narrow_app(module: str, fn: str, full: bool, div: int, shape: tuple,
                keep: Callable[[str], bool] | None = None, **kw):
    ctor = getattr(keras.applications, fn)
    if full:
        return ctor(input_shape=shape, weights=None, classes=10, **kw)
    with narrowed(_apps(module), div, keep=keep):
        return ctor(input_shape=shape, weights=None, classes=10, **kw)


@case("resnet50", [img(32)],
      "keras.applications.ResNet50 with every Conv/Dense width divided by 16 (same blocks), "
      "32x32.", APP)
def _resnet50(full):
    return _narrow_app("resnet", "ResNet50", full, 16, (32, 32, 3))


@case("resnet50_v2", [img(32)],
      "keras.applications.ResNet50V2 (pre-activation) with widths divided by 16, 32x32.", APP)
def _resnet50_v2(full):
    return _narrow_app("resnet", "ResNet50V2", full, 16, (32, 32, 3))


@case("densenet121", [img(32)],
      "keras.applications.DenseNet121 with widths (growth rate, convs) divided by 8, 32x32.",
      APP)
def _densenet121(full):
    return _narrow_app("densenet", "DenseNet121", full, 8, (32, 32, 3))


@case("nasnet_mobile", [img(32)],
      "keras NASNet builder, NASNetMobile's cells with penultimate_filters=192, num_blocks=2, "
      "stem 16 (full: NASNetMobile), 32x32.", APP)
def _nasnet_mobile(full):
    if full:
        return keras.applications.NASNetMobile(input_shape=(32, 32, 3), weights=None,
                                               classes=10)
    return _apps("nasnet").NASNet(input_shape=(32, 32, 3), penultimate_filters=192,
                                  num_blocks=2, stem_block_filters=16, skip_reduction=False,
                                  filter_multiplier=2, weights=None, classes=10,
                                  default_size=32)


@case("xception", [img(71)], "keras.applications.Xception with widths divided by 16, 71x71.",
      APP)
def _xception(full):
    return _narrow_app("xception", "Xception", full, 16, (71, 71, 3))


@case("inception_v3", [img(75)],
      "keras.applications.InceptionV3 with widths divided by 16, 75x75.", APP)
def _inception_v3(full):
    return _narrow_app("inception_v3", "InceptionV3", full, 16, (75, 75, 3))


@case("inception_resnet_v2", [img(75)],
      "keras.applications.InceptionResNetV2 with widths divided by 16, 75x75.", APP)
def _inception_resnet_v2(full):
    # Each residual block's "up" conv (blockNN_i_conv) takes its width from the narrowed input.
    return _narrow_app("inception_resnet_v2", "InceptionResNetV2", full, 16, (75, 75, 3),
                       keep=lambda n: bool(re.fullmatch(r"block(35|17|8)_\d+_conv", n)))


@case("vgg16", [img(32)],
      "keras.applications.VGG16 with include_top, widths divided by 16 (fc 256), 32x32.", APP)
def _vgg16(full):
    return _narrow_app("vgg16", "VGG16", full, 16, (32, 32, 3))


@case("convnext_tiny", [img(32, kind=PIXELS)],
      "keras ConvNeXt builder, depths [1,1,2,1] and dims [16,32,48,64] (full: ConvNeXtTiny), "
      "32x32: LayerNormalization, gelu, LayerScale.", APP)
def _convnext_tiny(full):
    if full:
        return keras.applications.ConvNeXtTiny(input_shape=(32, 32, 3), weights=None,
                                               classes=10)
    return _apps("convnext").ConvNeXt([1, 1, 2, 1], [16, 32, 48, 64], input_shape=(32, 32, 3),
                                      weights=None, classes=10, name="convnext_tiny")


# ---- layer catalogue: one small graph per layer (or a few layers)

LAY = ["keras", "frozen", "layer", "graph-pb"]


def _seq(shape: tuple, *layers, dtype: str = "float32") -> keras.Model:
    x = keras.Input(shape, dtype=dtype)
    y = x
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


def _layer_case(name: str, shape: tuple, make: Callable[[], list], kind: str = "normal",
                dtype: str = "float32", desc: str | None = None) -> None:
    CASES["layer_" + name] = (lambda full: _seq(shape, *make(), dtype=dtype),
                              [(shape, dtype, kind)], desc or f"Keras layer(s): {name}.", LAY)


_layer_case("dense_dropout", (12,), lambda: [L.Dense(16, activation="relu"), L.Dropout(0.5),
                                             L.Dense(5)])
_layer_case("conv1d", (16, 3), lambda: [L.Conv1D(6, 3, strides=2, padding="same"),
                                        L.Conv1D(5, 3, dilation_rate=2, padding="causal"),
                                        L.Conv1D(4, 2, padding="valid")])
_layer_case("conv2d", (12, 12, 4), lambda: [L.Conv2D(8, 3, strides=2, padding="same"),
                                            L.Conv2D(8, 3, dilation_rate=2, padding="same"),
                                            L.Conv2D(6, (2, 3), padding="valid")])
# Keras runs grouped convolutions on CPU as an XLA-compiled function: the frozen graph calls it
# with StatefulPartitionedCall (dfg inlines it before running).
_layer_case("conv2d_groups", (8, 8, 4), lambda: [L.Conv2D(6, 3, padding="same", groups=2)])
_layer_case("conv3d", (6, 8, 8, 2), lambda: [L.Conv3D(4, 3, padding="same"),
                                             L.Conv3D(3, 2, strides=2, padding="valid")])
_layer_case("conv1d_transpose", (8, 3), lambda: [L.Conv1DTranspose(4, 3, strides=2,
                                                                   padding="same"),
                                                 L.Conv1DTranspose(3, 3, padding="valid")])
_layer_case("conv2d_transpose", (6, 6, 3), lambda: [
    L.Conv2DTranspose(4, 3, strides=2, padding="same"),
    L.Conv2DTranspose(3, (3, 2), strides=(1, 2), padding="valid")])
_layer_case("conv3d_transpose", (4, 4, 4, 2), lambda: [
    L.Conv3DTranspose(3, 3, strides=2, padding="same"),
    L.Conv3DTranspose(2, 2, padding="valid")])
_layer_case("separable_conv1d", (16, 4), lambda: [L.SeparableConv1D(6, 3, depth_multiplier=2,
                                                                    padding="same")])
_layer_case("separable_conv2d", (10, 10, 4), lambda: [
    L.SeparableConv2D(6, 3, depth_multiplier=2, padding="same"),
    L.SeparableConv2D(5, 3, strides=2, padding="valid")])
_layer_case("depthwise_conv1d", (16, 4), lambda: [L.DepthwiseConv1D(3, depth_multiplier=2,
                                                                    padding="same")])
_layer_case("depthwise_conv2d", (10, 10, 4), lambda: [
    L.DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
    L.DepthwiseConv2D(3, strides=2, padding="valid")])
_layer_case("pooling1d", (15, 3), lambda: [L.MaxPooling1D(2), L.AveragePooling1D(3, 1, "same")])
_layer_case("pooling2d", (11, 11, 3), lambda: [L.MaxPooling2D(3, 2, "same"),
                                               L.AveragePooling2D(2, 1, "valid"),
                                               L.AveragePooling2D(3, 2, "same")])
_layer_case("pooling3d", (7, 7, 7, 2), lambda: [L.MaxPooling3D(2, 2, "same"),
                                                L.AveragePooling3D(2, 1, "valid")])
for _d, _shape in (("1d", (9, 3)), ("2d", (7, 7, 3)), ("3d", (5, 5, 5, 3))):
    _layer_case(f"global_max_pooling{_d}", _shape,
                lambda _d=_d: [getattr(L, f"GlobalMaxPooling{_d.upper()}")()])
    _layer_case(f"global_average_pooling{_d}", _shape,
                lambda _d=_d: [getattr(L, f"GlobalAveragePooling{_d.upper()}")()])
_layer_case("batch_normalization", (6, 6, 5), lambda: [L.BatchNormalization(),
                                                       L.BatchNormalization(axis=1)])
_layer_case("layer_normalization", (6, 8), lambda: [L.LayerNormalization(),
                                                    L.LayerNormalization(axis=[1, 2])])
_layer_case("group_normalization", (6, 6, 8), lambda: [L.GroupNormalization(groups=4)])
_layer_case("unit_normalization", (6, 8), lambda: [L.UnitNormalization()])
_layer_case("embedding", (7,), lambda: [L.Embedding(20, 6)], kind="int20", dtype="int32")
_layer_case("simple_rnn", (6, 4), lambda: [L.SimpleRNN(5, return_sequences=True),
                                           L.SimpleRNN(3)])
_layer_case("lstm", (6, 4), lambda: [L.LSTM(5, return_sequences=True), L.LSTM(3)])
_layer_case("gru", (6, 4), lambda: [L.GRU(5, return_sequences=True), L.GRU(3)])
_layer_case("gru_reset_before_unrolled_rnn", (5, 4), lambda: [
    L.GRU(4, reset_after=False, return_sequences=True), L.SimpleRNN(3, unroll=True)])
_layer_case("embedding_masked_lstm", (7,), lambda: [L.Embedding(10, 4, mask_zero=True),
                                                    L.LSTM(3)], kind="int10", dtype="int32",
            desc="Embedding(mask_zero=True) feeding an LSTM: masked time steps (ids 0) keep "
                 "the previous state.")
_layer_case("bidirectional_lstm", (5, 3), lambda: [L.Bidirectional(L.LSTM(4))])
_layer_case("cropping", (8, 8, 3), lambda: [L.Cropping2D(((1, 2), (2, 1)))])
_layer_case("cropping1d", (8, 3), lambda: [L.Cropping1D((1, 2))])
_layer_case("cropping3d", (5, 6, 6, 2), lambda: [L.Cropping3D(((1, 0), (1, 2), (0, 1)))])
_layer_case("upsampling1d", (5, 3), lambda: [L.UpSampling1D(2)])
_layer_case("upsampling2d", (5, 5, 3), lambda: [L.UpSampling2D(2),
                                                L.UpSampling2D(2, interpolation="bilinear")])
_layer_case("upsampling3d", (3, 3, 3, 2), lambda: [L.UpSampling3D(2)])
_layer_case("zero_padding", (5, 5, 3), lambda: [L.ZeroPadding2D(((1, 2), (0, 1)))])
_layer_case("zero_padding1d", (5, 3), lambda: [L.ZeroPadding1D((2, 1))])
_layer_case("zero_padding3d", (3, 3, 3, 2), lambda: [L.ZeroPadding3D(1)])
# Keras 3's TensorFlow backend offers these six (no gaussian/mitchellcubic).
for _interp in ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5"):
    _layer_case(f"resizing_{_interp}", (9, 7, 3),
                lambda _i=_interp: [L.Resizing(12, 5, interpolation=_i)])
for _interp in ("bilinear", "bicubic", "lanczos3", "area"):
    _layer_case(f"resizing_{_interp}_antialias", (9, 7, 3),
                lambda _i=_interp: [L.Resizing(4, 3, interpolation=_i, antialias=True)],
                desc=f"Resizing down with interpolation={_interp}, antialias=True.")
for _method in ("gaussian", "mitchellcubic"):
    _layer_case(f"tf_image_resize_{_method}", (9, 7, 3),
                lambda _m=_method: [L.Lambda(lambda x: tf.image.resize(x, (12, 4), method=_m))],
                desc=f"tf.image.resize(method={_method!r}) in a Lambda (Keras' Resizing "
                     "lacks it), up in rows, down in columns.")
_layer_case("resizing_crop_to_aspect", (9, 7, 3),
            lambda: [L.Resizing(6, 6, crop_to_aspect_ratio=True)])
_layer_case("rescaling_normalization", (6, 4), lambda: [
    L.Rescaling(1 / 127.5, offset=-1), L.Normalization(mean=[0.1, 0.2, -0.3, 0.0],
                                                       variance=[1.0, 2.0, 0.5, 4.0])])
_layer_case("center_crop", (9, 8, 3), lambda: [L.CenterCrop(5, 4)])
_layer_case("permute_repeat_flatten", (4, 3), lambda: [L.Permute((2, 1)), L.Flatten(),
                                                       L.RepeatVector(3), L.Reshape((6, 6))])
_layer_case("activation_layers", (10,), lambda: [L.PReLU(), L.LeakyReLU(0.2), L.ELU(0.7),
                                                 L.ReLU(max_value=2.0, threshold=0.1),
                                                 L.Softmax()])
for _act in ("celu", "elu", "exponential", "gelu", "glu", "hard_shrink", "hard_sigmoid",
             "hard_silu", "hard_tanh", "leaky_relu", "linear", "log_sigmoid", "log_softmax",
             "mish", "relu", "relu6", "selu", "sigmoid", "silu", "soft_shrink", "softmax",
             "softplus", "softsign", "sparse_plus", "sparse_sigmoid", "sparsemax", "squareplus",
             "tanh", "tanh_shrink", "threshold"):
    if _act == "threshold":
        CASES["layer_act_threshold"] = (
            lambda full: _seq((4, 6), L.Lambda(
                lambda x: keras.activations.threshold(x, 0.3, -1.0))),
            [((4, 6), "float32", "wide")], "keras.activations.threshold(x, 0.3, -1).", LAY)
        continue
    _layer_case(f"act_{_act}", (4, 6), lambda _a=_act: [L.Activation(_a)], kind="wide",
                desc=f"keras.activations.{_act}.")
_layer_case("act_gelu_approximate", (4, 6),
            lambda: [L.Lambda(lambda x: keras.activations.gelu(x, approximate=True))],
            kind="wide", desc="keras.activations.gelu(approximate=True).")


def _two(shape_a: tuple, shape_b: tuple, make: Callable) -> keras.Model:
    a, b = keras.Input(shape_a), keras.Input(shape_b)
    return keras.Model([a, b], make(a, b))


def _merge_case(name: str, shape_a: tuple, shape_b: tuple, make: Callable, desc: str) -> None:
    CASES["layer_" + name] = (lambda full: _two(shape_a, shape_b, make),
                              [(shape_a, "float32", "normal"), (shape_b, "float32", "normal")],
                              desc, LAY)


_merge_case("merging", (5, 4), (5, 4), lambda a, b: L.Concatenate()([
    L.Add()([a, b]), L.Subtract()([a, b]), L.Multiply()([a, b]), L.Average()([a, b]),
    L.Maximum()([a, b]), L.Minimum()([a, b]), L.Concatenate(axis=1)([a, b])[:, :5]]),
    "Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate (two axes).")
_merge_case("dot", (5, 4), (6, 4), lambda a, b: L.Dot(axes=(2, 2), normalize=True)([a, b]),
            "Dot with normalize=True over the feature axis.")
_merge_case("attention", (5, 4), (6, 4), lambda a, b: L.Attention(use_scale=True)([a, b]),
            "Attention (dot-product, learned scale): query a, value b.")
_merge_case("additive_attention", (5, 4), (6, 4),
            lambda a, b: L.AdditiveAttention()([a, b]), "AdditiveAttention: query a, value b.")
_merge_case("multi_head_attention", (5, 8), (6, 8),
            lambda a, b: L.MultiHeadAttention(num_heads=2, key_dim=4)(a, b),
            "MultiHeadAttention (2 heads, key_dim 4): query a, value b (einsum projections).")


# --------------------------------------------------------------------------- generation

def randomize_constant_weights(model: keras.Model, rng: np.random.Generator) -> int:
    """Replace every float weight whose entries are all equal (Keras initializes biases,
    beta, moving mean with zeros; gamma, moving variance with ones; LayerScale with 1e-6) by
    seeded random values; positive constants stay positive (variances). Returns the count."""
    n = 0
    for w in model.weights:
        v = np.asarray(w.numpy())
        if v.size == 0 or v.dtype.kind != "f" or not np.all(v == v.flat[0]):
            continue
        c = float(v.flat[0])
        if c == 0.0:
            new = rng.normal(0.0, 0.2, v.shape)
        else:
            new = np.sign(c) * rng.uniform(0.5, 1.5, v.shape)
        w.assign(new.astype(v.dtype))
        n += 1
    # Normalization copies its (adapt_)mean/variance variables into tensors when built:
    # refresh those from the randomized variables.
    for layer in model._flatten_layers():
        if isinstance(layer, L.Normalization) and getattr(layer, "adapt_mean", None) is not None:
            layer.finalize_state()
    return n


def calibrate_batch_norm(model: keras.Model, specs: list, rng: np.random.Generator,
                         batch: int = 32) -> int:
    """Set every BatchNormalization's moving mean/variance to the statistics of its input
    over a batch of random inputs, keeping the (randomized) offsets and scales.

    With random moving statistics a deep network's output barely depends on its input (each
    BN rescales by numbers unrelated to its input's spread), so a wrong kernel could still
    match. With momentum 0, one training-mode pass sets each BN's moving statistics to its
    input's batch mean and (biased) variance, the very numbers training mode normalises
    with; so the inference-mode network then computes, layer by layer, what that training
    pass did, and every BN sees inputs of mean 0 and variance 1 before its scale and offset.
    Dropout is turned off for the pass (rate 0), so the statistics are those of inference.
    Returns the number of BN layers calibrated."""
    bns = [ly for ly in model._flatten_layers() if isinstance(ly, L.BatchNormalization)]
    if not bns:
        return 0
    drops = [ly for ly in model._flatten_layers() if isinstance(ly, L.Dropout)]
    saved = [(bn, bn.momentum) for bn in bns] + [(d, d.rate) for d in drops]
    for bn in bns:
        bn.momentum = 0.0
    for d in drops:
        d.rate = 0.0
    xs = [make_input((batch, *shape), dtype, kind, rng) for shape, dtype, kind in specs]
    try:
        model(xs[0] if len(xs) == 1 else xs, training=True)
    finally:
        for layer, v in saved:
            if isinstance(layer, L.BatchNormalization):
                layer.momentum = v
            else:
                layer.rate = v
    return len(bns)


def unit_variance_kernels(model: keras.Model, specs: list, rng: np.random.Generator,
                          batch: int = 32) -> int:
    """For a deep network without normalization layers (VGG16): scale each Conv/Dense kernel,
    in order, so that its pre-activation output has unit variance over a batch of random
    inputs (LSUV, Mishkin & Matas 2016). Glorot-initialized ReLU stacks shrink the signal by
    about 1/sqrt(2) per layer, so after 13 layers the random biases are all that is left of
    the output. Biases are left as they are. Returns the number of layers scaled."""
    xs = [make_input((batch, *shape), dtype, kind, rng) for shape, dtype, kind in specs]
    n = 0
    for layer in model.layers:
        kernel = getattr(layer, "kernel", None)
        if kernel is None or not isinstance(layer, (L.Conv1D, L.Conv2D, L.Conv3D, L.Dense)):
            continue
        act, bias = layer.activation, getattr(layer, "bias", None)
        saved_bias = None if bias is None else bias.numpy()
        layer.activation = keras.activations.linear
        if bias is not None:
            bias.assign(np.zeros_like(saved_bias))
        try:
            z = keras.Model(model.inputs, layer.output)(xs[0] if len(xs) == 1 else xs,
                                                         training=False)
            std = float(np.std(np.asarray(z)))
        finally:
            layer.activation = act
            if bias is not None:
                bias.assign(saved_bias)
        if std > 0:
            kernel.assign(np.asarray(kernel.numpy()) / std)
            n += 1
    return n


def input_sensitivity(gd, in_names: list[str], fetch: str, specs: list,
                      rng: np.random.Generator, batch: int = 8) -> float:
    """How much the output depends on the input: the std of each output entry across a batch
    of different random inputs, averaged, over the mean magnitude of the outputs. Near 0
    means the network ignores its input (a wrong kernel upstream could still match)."""
    feeds = {nm: make_input((batch, *shape), dtype, kind, rng)
             for nm, (shape, dtype, kind) in zip(in_names, specs)}
    y = np.asarray(run_frozen(gd, feeds, [fetch])[0], np.float64).reshape(batch, -1)
    return float(y.std(axis=0).mean() / (np.abs(y).mean() + 1e-30))


def make_input(shape: tuple, dtype: str, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind.startswith("int"):
        return rng.integers(0, int(kind[3:]), shape).astype(dtype)
    if kind == PIXELS:
        return rng.uniform(0.0, 255.0, shape).astype(dtype)
    if kind == "wide":  # activations: cover both tails and the kinks near zero
        return (rng.standard_normal(shape) * 3.0).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def freeze(model: keras.Model, specs: list) -> tuple[tf.compat.v1.GraphDef, list[str], list[str]]:
    sigs = [tf.TensorSpec((None, *shape), dtype, name=f"input_{i}")
            for i, (shape, dtype, _) in enumerate(specs)]
    if len(sigs) == 1:
        fn = tf.function(lambda x: model(x, training=False))
    else:
        fn = tf.function(lambda *xs: model(list(xs), training=False))
    cf = fn.get_concrete_function(*sigs)
    frozen = convert_variables_to_constants_v2(cf)
    gd = frozen.graph.as_graph_def()
    return gd, [t.name for t in frozen.inputs], [t.name for t in frozen.outputs]


def run_frozen(gd, feeds: dict[str, np.ndarray], fetches: list[str]) -> list[np.ndarray]:
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(fetches, feed_dict=feeds)


def logits_of(gd, out_name: str) -> str | None:
    """The Softmax input behind the output, when the output is Identity(Softmax(x))."""
    nodes = {n.name: n for n in gd.node}
    n = nodes.get(out_name.split(":")[0])
    while n is not None and n.op == "Identity":
        n = nodes.get(n.input[0].split(":")[0])
    if n is not None and n.op == "Softmax":
        src = n.input[0]
        return src if ":" in src else src + ":0"
    return None


def tolerances(expected: list[np.ndarray], features: list[str]) -> tuple[float, float]:
    """rtol 1e-4 (float32 convolutions and matmuls summed in another order); atol 1e-4
    scaled by the largest expected magnitude, for deep nets whose logits are large."""
    scale = max(float(np.max(np.abs(e))) if e.size else 0.0 for e in expected)
    return 1e-4, 1e-4 * max(1.0, scale)


def write_case(d: Path, doc: dict, graph_bytes: bytes | None, graph_text: str | None,
               feeds: dict, fetches: list[str], values: list) -> None:
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    if graph_bytes is not None:
        (d / "graph.pb").write_bytes(graph_bytes)
    if graph_text is not None:
        (d / "graph.pbtxt").write_text(graph_text)
    feed_files = {}
    for i, (k, v) in enumerate(feeds.items()):
        feed_files[k] = f"s0_feed_{i}.npy"
        np.save(d / feed_files[k], v)
    expect = {}
    for i, (k, v) in enumerate(zip(fetches, values)):
        expect[k] = f"s0_fetch_{i}.npy"
        np.save(d / expect[k], np.asarray(v))
    doc["steps"] = [{"feed": feed_files, "fetch": fetches, "target": [], "expect": expect,
                     "expect_error": None}]
    order = ["description", "features", "rtol", "atol", "steps", "prune", "grappler_nodes"]
    doc = {**{k: doc[k] for k in order}, **{k: v for k, v in doc.items() if k not in order}}
    (d / "case.json").write_text(json.dumps(doc, indent=1) + "\n")


def generate(name: str, out: Path, full: bool) -> dict:
    build, specs, description, features = CASES[name]
    keras.utils.set_random_seed(SEED)
    model = build(full)
    rng = np.random.default_rng(SEED)
    randomize_constant_weights(model, rng)
    # keras.applications models: BN statistics from the data (the layer catalogue keeps
    # random ones: one BN layer alone stays input-sensitive)
    calibrated = ("application" in features
                  and calibrate_batch_norm(model, specs, np.random.default_rng(SEED + 1)))
    norms = (L.BatchNormalization, L.LayerNormalization, L.GroupNormalization)
    if "application" in features and not any(isinstance(ly, norms)
                                             for ly in model._flatten_layers()):
        unit_variance_kernels(model, specs, np.random.default_rng(SEED + 1))
    gd, in_names, out_names = freeze(model, specs)
    fetches = list(out_names)
    lg = logits_of(gd, out_names[0])
    if lg:
        fetches.append(lg)
    feeds = {nm: make_input((BATCH, *shape), dtype, kind, rng)
             for nm, (shape, dtype, kind) in zip(in_names, specs)}
    values = run_frozen(gd, feeds, fetches)
    sensitivity = None
    if "application" in features:
        sensitivity = input_sensitivity(gd, in_names, lg or out_names[0], specs,
                                        np.random.default_rng(SEED + 2))
    d = out / name
    rtol, atol = tolerances([np.asarray(v) for v in values], features)
    doc = {"description": description, "features": features, "rtol": rtol, "atol": atol,
           "prune": None, "grappler_nodes": None,
           "params": int(model.count_params()), "nodes": len(gd.node)}
    if sensitivity is not None:
        doc["input_sensitivity"] = round(sensitivity, 4)
        doc["bn_calibrated"] = int(calibrated)
    write_case(d, doc, gd.SerializeToString(), None, feeds, fetches, values)
    size = (d / "graph.pb").stat().st_size
    sens = f" sensitivity {sensitivity:.3f}" if sensitivity is not None else ""
    print(f"{name:34} {model.count_params():>9} params {len(gd.node):>6} nodes "
          f"{size / 1e6:7.2f} MB{sens}", flush=True)
    return doc


# ---- single-op cases for the kernel tests (tests/kernels/test_nn_zoo.py)

def kernel_cases(rng: np.random.Generator) -> list[tuple[str, dict, list[np.ndarray]]]:
    """(op, attrs, inputs) run through tf.raw_ops: the kernels the zoo needed."""
    out = []
    for pad, st, fshape, xsize in (("SAME", 2, (3, 3, 3, 2, 4), (2, 5, 6, 7, 2)),
                                   ("VALID", 1, (2, 3, 2, 3, 2), (1, 4, 5, 3, 3)),
                                   ("VALID", 3, (2, 2, 2, 1, 3), (2, 7, 6, 8, 1)),
                                   ("SAME", 1, (1, 1, 1, 2, 2), (1, 2, 2, 2, 2))):
        strides = [1, st, st, st, 1]
        x = tf.zeros(xsize)
        f = rng.standard_normal(fshape).astype("float32")
        y = tf.nn.conv3d(x, f, strides, pad)
        dy = rng.standard_normal(y.shape).astype("float32")
        out.append(("Conv3DBackpropInputV2", {"strides": strides, "padding": pad},
                    [np.array(xsize, np.int32), f, dy]))
    img = rng.standard_normal((2, 6, 9, 2)).astype("float32")
    for kt in ("lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle", "keyscubic",
               "mitchellcubic"):
        for anti in (True, False):
            for size, scale, trans in (((10, 4), (1.7, 0.45), (0.0, 0.0)),
                                       ((5, 12), (0.8, 1.3), (0.6, -1.2)),
                                       ((4, 3), (0.5, 0.3), (2.5, 0.3))):
                out.append(("ScaleAndTranslate", {"kernel_type": kt, "antialias": anti},
                            [img, np.array(size, np.int32), np.array(scale, np.float32),
                             np.array(trans, np.float32)]))
    out.append(("ScaleAndTranslate", {"kernel_type": "lanczos3", "antialias": True},
                [rng.integers(0, 255, (1, 5, 4, 3)).astype("uint8"), np.array([7, 2], np.int32),
                 np.array([1.4, 0.5], np.float32), np.array([0.0, 0.0], np.float32)]))
    return out


def generate_kernels(out: Path) -> None:
    rng = np.random.default_rng(SEED)
    arrays, index = {}, []
    for i, (op, attrs, inputs) in enumerate(kernel_cases(rng)):
        arg_names = {"Conv3DBackpropInputV2": ("input_sizes", "filter", "out_backprop"),
                     "ScaleAndTranslate": ("images", "size", "scale", "translation")}[op]
        y = getattr(tf.raw_ops, op)(**dict(zip(arg_names, inputs)), **attrs)
        names = [f"c{i}_in{k}" for k in range(len(inputs))]
        arrays.update(zip(names, inputs))
        arrays[f"c{i}_out"] = y.numpy()
        index.append({"op": op, "attrs": attrs, "inputs": names, "output": f"c{i}_out"})
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "kernels.npz", **arrays)
    (out / "kernels.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"{len(index)} kernel cases -> {out}/kernels.npz")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--full", action="store_true",
                    help="real-size keras.applications models (large; needs --out)")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--kernels", action="store_true",
                    help="only the single-op kernel cases (kernels/kernels.npz)")
    args = ap.parse_args()
    if args.kernels:
        generate_kernels(args.out / "kernels")
        return
    if args.list:
        print("\n".join(CASES))
        return
    if args.full and args.out == HERE:
        sys.exit("--full models are too large to commit: give --out DIR")
    names = args.only.split(",") if args.only else list(CASES)
    if args.full and not args.only:
        names = [n for n in names if not n.startswith("layer_")]
    for n in names:
        generate(n, args.out, args.full)


if __name__ == "__main__":
    main()
