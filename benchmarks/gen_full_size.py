"""Full-size Keras CNNs at the input sizes people run them at, for the performance table.

The committed zoo (tests/data/models) keeps the keras.applications models width-reduced at
32x32 (its ``--full`` widens them but keeps 32x32 inputs), where a step is a millisecond of
many small layers. At 224x224 the convolutions are large GEMM-sized layers and the time is
in the convolution kernels themselves: the comparison with TensorFlow's oneDNN kernels is
another one. These models are tens of MB each, so they are not committed: build them with
TensorFlow's Python (never in CI; dfg never imports TensorFlow), then time them beside
TensorFlow:

    /tmp/tfvenv/bin/python benchmarks/gen_full_size.py /tmp/full_size
    python benchmarks/table.py --tf-python /tmp/tfvenv/bin/python --only dir \\
        --dir /tmp/full_size

Each case is a folder in the conformance format (``graph.pb``, ``case.json``, the feed and
TensorFlow's outputs as ``.npy``): the model built with seeded random weights (no
downloads), frozen with ``convert_variables_to_constants_v2``, its expected outputs from
running the frozen GraphDef in a ``tf.compat.v1.Session``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

# name -> (keras.applications constructor, its keyword arguments, the batch's shape)
MODELS = {
    "full_resnet50_224": ("ResNet50", {}, (1, 224, 224, 3)),
    "full_mobilenet_v2_224": ("MobileNetV2", {}, (1, 224, 224, 3)),
    "full_efficientnet_b0_224": ("EfficientNetB0", {}, (1, 224, 224, 3)),
    "full_resnet50_64_b8": ("ResNet50", {"classes": 10}, (8, 64, 64, 3)),
    # more of the families people run full-size (not in the default set: a minute each)
    "full_vgg16_224": ("VGG16", {}, (1, 224, 224, 3)),
    "full_inception_v3_299": ("InceptionV3", {}, (1, 299, 299, 3)),
    "full_densenet121_224": ("DenseNet121", {}, (1, 224, 224, 3)),
    "full_xception_299": ("Xception", {}, (1, 299, 299, 3)),
    "full_mobilenet_v3_large_224": ("MobileNetV3Large", {}, (1, 224, 224, 3)),
    "full_convnext_tiny_224": ("ConvNeXtTiny", {}, (1, 224, 224, 3)),
    "full_resnet50_224_b8": ("ResNet50", {}, (8, 224, 224, 3)),
}
DEFAULT = ("full_resnet50_224", "full_mobilenet_v2_224", "full_efficientnet_b0_224",
           "full_resnet50_64_b8")


def build(name: str, out: Path) -> None:
    ctor, kw, shape = MODELS[name]
    keras.utils.set_random_seed(1)
    model = getattr(keras.applications, ctor)(weights=None, input_shape=shape[1:], **kw)
    fn = tf.function(lambda x: model(x, training=False))
    frozen = convert_variables_to_constants_v2(
        fn.get_concrete_function(tf.TensorSpec(shape, tf.float32)))
    gd = frozen.graph.as_graph_def()
    feed = np.random.default_rng(0).uniform(0, 255, shape).astype(np.float32)
    in_name = frozen.inputs[0].name
    out_names = [t.name for t in frozen.outputs]
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    with tf.compat.v1.Session(graph=g) as sess:
        expect = sess.run(out_names, {in_name: feed})
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "graph.pb").write_bytes(gd.SerializeToString())
    np.save(d / "s0_feed_0.npy", feed)
    for i, v in enumerate(expect):
        np.save(d / f"s0_fetch_{i}.npy", v)
    doc = {"description": f"keras.applications.{ctor}, full width, batch {shape}, seeded "
                          "random weights, frozen (benchmarks/gen_full_size.py)",
           "features": ["keras", "frozen", "application", "graph-pb", "full-size"],
           "rtol": 1e-3, "atol": 1e-4,
           "steps": [{"feed": {in_name: "s0_feed_0.npy"}, "fetch": out_names, "target": [],
                      "expect": {n: f"s0_fetch_{i}.npy" for i, n in enumerate(out_names)},
                      "expect_error": None}]}
    (d / "case.json").write_text(json.dumps(doc, indent=1))
    print(f"{name:28} {model.count_params():>10} params {len(gd.node):6} nodes "
          f"{len(gd.SerializeToString()) / 1e6:8.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default=",".join(DEFAULT),
                    help=f"comma-separated, of: {', '.join(MODELS)}")
    args = ap.parse_args()
    for name in args.only.split(","):
        build(name, args.out)


if __name__ == "__main__":
    main()
