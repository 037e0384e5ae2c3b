"""Everyday Keras models at the sizes people train and serve them, for the performance table.

The table's own cases are small enough to commit; these are the models ordinary code writes
(the Keras examples' MNIST and CIFAR-10 CNNs, a text CNN, an MLP, a convolutional
autoencoder, a separable-convolution net, a 1D time-series CNN, LeNet-5, the CIFAR
ResNet-20, the DCGAN tutorial's generator, a small U-Net, a VGG-style CIFAR net), at full
width and at the batches of serving (1) and of batch inference (32-256). They are several
MB together, so they are not committed: build them with TensorFlow's Python (never in CI;
dfg never imports TensorFlow), then time them beside TensorFlow:

    /tmp/tfvenv/bin/python benchmarks/gen_ordinary.py /tmp/ordinary
    python benchmarks/table.py --tf-python /tmp/tfvenv/bin/python --only dir \\
        --dir /tmp/ordinary

Each is frozen as tests/data/bench/generate.py freezes its Keras cases (same seeds and
weight treatment, TensorFlow's outputs as the expected values, the conformance case format).
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_generate",
                                               ROOT / "tests" / "data" / "bench" / "generate.py")
G = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(G)


def _stack(keras: Any, shape: tuple, dtype: str, layers: list) -> Any:
    x = y = keras.Input(shape, dtype=dtype)
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


def _mnist(k: Any, L: Any) -> Any:
    """The Keras example "Simple MNIST convnet"."""
    return _stack(k, (28, 28, 1), "float32", [
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2),
        L.Flatten(), L.Dropout(0.5), L.Dense(10, activation="softmax")])


def _cifar(k: Any, L: Any) -> Any:
    """The classic CIFAR-10 CNN (two conv pairs, Dense 512)."""
    return _stack(k, (32, 32, 3), "float32", [
        L.Conv2D(32, 3, padding="same", activation="relu"), L.Conv2D(32, 3, activation="relu"),
        L.MaxPooling2D(2), L.Dropout(0.25),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.Conv2D(64, 3, activation="relu"),
        L.MaxPooling2D(2), L.Dropout(0.25),
        L.Flatten(), L.Dense(512, activation="relu"), L.Dropout(0.5),
        L.Dense(10, activation="softmax")])


def _cifar_bn(k: Any, L: Any) -> Any:
    """Conv-BatchNorm-ReLU blocks of 32, 64, 128 filters, global average pooling."""
    layers: list = []
    for width in (32, 64, 128):
        for _ in range(2):
            layers += [L.Conv2D(width, 3, padding="same", use_bias=False),
                       L.BatchNormalization(), L.ReLU()]
        layers.append(L.MaxPooling2D(2))
    return _stack(k, (32, 32, 3), "float32",
                  [*layers, L.GlobalAveragePooling2D(), L.Dense(10, activation="softmax")])


def _text_cnn(k: Any, L: Any) -> Any:
    return _stack(k, (200,), "int32", [
        L.Embedding(1000, 128), L.Conv1D(128, 5, activation="relu"), L.MaxPooling1D(5),
        L.Conv1D(128, 5, activation="relu"), L.GlobalMaxPooling1D(),
        L.Dense(64, activation="relu"), L.Dense(2, activation="softmax")])


def _mlp(k: Any, L: Any) -> Any:
    return _stack(k, (784,), "float32", [
        L.Dense(512, activation="relu"), L.Dropout(0.2), L.Dense(512, activation="relu"),
        L.Dense(10, activation="softmax")])


def _autoencoder(k: Any, L: Any) -> Any:
    """A denoising autoencoder: strided convs down, Conv2DTranspose up."""
    return _stack(k, (28, 28, 1), "float32", [
        L.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        L.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        L.Conv2DTranspose(64, 3, strides=2, padding="same", activation="relu"),
        L.Conv2DTranspose(32, 3, strides=2, padding="same", activation="relu"),
        L.Conv2D(1, 3, padding="same", activation="sigmoid")])


def _separable(k: Any, L: Any) -> Any:
    return _stack(k, (64, 64, 3), "float32", [
        L.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
        L.SeparableConv2D(64, 3, padding="same", activation="relu"), L.MaxPooling2D(2),
        L.SeparableConv2D(128, 3, padding="same", activation="relu"), L.MaxPooling2D(2),
        L.SeparableConv2D(256, 3, padding="same", activation="relu"),
        L.GlobalAveragePooling2D(), L.Dense(10, activation="softmax")])


def _series(k: Any, L: Any) -> Any:
    return _stack(k, (128, 9), "float32", [
        L.Conv1D(64, 3, activation="relu"), L.Conv1D(64, 3, activation="relu"),
        L.MaxPooling1D(2), L.Conv1D(128, 3, activation="relu"), L.GlobalAveragePooling1D(),
        L.Dense(6, activation="softmax")])


def _lenet(k: Any, L: Any) -> Any:
    """LeNet-5: tanh, average pooling, 6 and 16 filters of 5x5."""
    return _stack(k, (32, 32, 1), "float32", [
        L.Conv2D(6, 5, activation="tanh"), L.AveragePooling2D(2),
        L.Conv2D(16, 5, activation="tanh"), L.AveragePooling2D(2), L.Flatten(),
        L.Dense(120, activation="tanh"), L.Dense(84, activation="tanh"),
        L.Dense(10, activation="softmax")])


def _resnet20(k: Any, L: Any) -> Any:
    """The CIFAR ResNet-20: three stages of three basic blocks, 16/32/64 filters."""
    x = inp = k.Input((32, 32, 3))
    x = L.ReLU()(L.BatchNormalization()(L.Conv2D(16, 3, padding="same", use_bias=False)(x)))
    for stage, width in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage and not block else 1
            y = L.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(x)
            y = L.ReLU()(L.BatchNormalization()(y))
            y = L.BatchNormalization()(L.Conv2D(width, 3, padding="same", use_bias=False)(y))
            if stride != 1:
                x = L.BatchNormalization()(L.Conv2D(width, 1, strides=stride, use_bias=False)(x))
            x = L.ReLU()(L.Add()([x, y]))
    x = L.GlobalAveragePooling2D()(x)
    return k.Model(inp, L.Dense(10, activation="softmax")(x))


def _dcgan(k: Any, L: Any) -> Any:
    """The DCGAN tutorial's generator: Dense, Reshape, Conv2DTranspose 5x5 with BN."""
    return _stack(k, (100,), "float32", [
        L.Dense(7 * 7 * 256, use_bias=False), L.BatchNormalization(), L.LeakyReLU(),
        L.Reshape((7, 7, 256)),
        L.Conv2DTranspose(128, 5, padding="same", use_bias=False), L.BatchNormalization(),
        L.LeakyReLU(),
        L.Conv2DTranspose(64, 5, strides=2, padding="same", use_bias=False),
        L.BatchNormalization(), L.LeakyReLU(),
        L.Conv2DTranspose(1, 5, strides=2, padding="same", use_bias=False,
                          activation="tanh")])


def _unet_small(k: Any, L: Any) -> Any:
    """A small segmentation U-Net: two levels down, UpSampling2D and skip concatenations
    up, a 1-channel sigmoid mask."""
    inp = k.Input((64, 64, 3))
    c1 = L.Conv2D(16, 3, padding="same", activation="relu")(inp)
    c1 = L.Conv2D(16, 3, padding="same", activation="relu")(c1)
    c2 = L.Conv2D(32, 3, padding="same", activation="relu")(L.MaxPooling2D()(c1))
    c2 = L.Conv2D(32, 3, padding="same", activation="relu")(c2)
    b = L.Conv2D(64, 3, padding="same", activation="relu")(L.MaxPooling2D()(c2))
    u2 = L.Concatenate()([L.UpSampling2D()(b), c2])
    u2 = L.Conv2D(32, 3, padding="same", activation="relu")(u2)
    u1 = L.Concatenate()([L.UpSampling2D()(u2), c1])
    u1 = L.Conv2D(16, 3, padding="same", activation="relu")(u1)
    return k.Model(inp, L.Conv2D(1, 1, activation="sigmoid")(u1))


def _vgg_cifar(k: Any, L: Any) -> Any:
    """A VGG-style CIFAR net with BatchNorm and Dropout (the common Keras tutorial)."""
    layers: list = []
    for width in (32, 64, 128):
        layers += [L.Conv2D(width, 3, padding="same", activation="relu"),
                   L.BatchNormalization(),
                   L.Conv2D(width, 3, padding="same", activation="relu"),
                   L.BatchNormalization(), L.MaxPooling2D(2), L.Dropout(0.3)]
    return _stack(k, (32, 32, 3), "float32", [
        *layers, L.Flatten(), L.Dense(128, activation="relu"), L.BatchNormalization(),
        L.Dropout(0.5), L.Dense(10, activation="softmax")])


IMAGE = "normal"
# name -> (batch, input shape, dtype, kind, description, builder)
MODELS = {
    "o_mnist_cnn_b1": (1, (28, 28, 1), "float32", IMAGE, "the Keras MNIST convnet", _mnist),
    "o_mnist_cnn_b128": (128, (28, 28, 1), "float32", IMAGE, "the Keras MNIST convnet",
                         _mnist),
    "o_cifar_cnn_b1": (1, (32, 32, 3), "float32", IMAGE, "a CIFAR-10 CNN", _cifar),
    "o_cifar_cnn_b64": (64, (32, 32, 3), "float32", IMAGE, "a CIFAR-10 CNN", _cifar),
    "o_cifar_bn_b32": (32, (32, 32, 3), "float32", IMAGE, "a CIFAR-10 Conv-BN-ReLU net",
                       _cifar_bn),
    "o_text_cnn_b32": (32, (200,), "int32", "int1000", "a text CNN (Embedding, Conv1D)",
                       _text_cnn),
    "o_mlp_b256": (256, (784,), "float32", IMAGE, "an MLP 784-512-512-10", _mlp),
    "o_autoencoder_b32": (32, (28, 28, 1), "float32", IMAGE,
                          "a convolutional autoencoder (Conv2DTranspose)", _autoencoder),
    "o_separable_b8": (8, (64, 64, 3), "float32", IMAGE, "a SeparableConv2D net",
                       _separable),
    "o_series_cnn_b64": (64, (128, 9), "float32", IMAGE, "a 1D CNN over sensor series",
                         _series),
    "o_lenet5_b256": (256, (32, 32, 1), "float32", IMAGE, "LeNet-5", _lenet),
    "o_resnet20_b128": (128, (32, 32, 3), "float32", IMAGE, "the CIFAR ResNet-20", _resnet20),
    "o_dcgan_gen_b64": (64, (100,), "float32", IMAGE, "the DCGAN tutorial's generator",
                        _dcgan),
    "o_unet_small_b8": (8, (64, 64, 3), "float32", IMAGE, "a small segmentation U-Net",
                        _unet_small),
    "o_vgg_cifar_b128": (128, (32, 32, 3), "float32", IMAGE,
                         "a VGG-style CIFAR net with BatchNorm and Dropout", _vgg_cifar),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="directory to write the cases into")
    ap.add_argument("--only", help="comma-separated names (default: all)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        batch, shape, dtype, kind, text, make = MODELS[name]

        @G.keras_case(name, [(shape, dtype, kind)], batch,
                      f"Benchmark: {text}, batch {batch} (benchmarks/gen_ordinary.py)",
                      [*G.FROZEN])
        def build(make=make):
            return make(G.keras, G.L)

        G.generate_keras(name, args.out)


if __name__ == "__main__":
    main()
