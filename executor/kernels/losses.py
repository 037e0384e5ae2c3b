"""Loss kernels: softmax cross-entropy with dense and sparse labels (loss and backprop)."""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel


def _log_softmax(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log_softmax, softmax) along the last axis, shifted by the row max for stability."""
    work = logits.astype(np.float32) if logits.dtype == np.float16 else logits
    shifted = work - work.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    logp = shifted - lse
    return logp, np.exp(logp)


@kernel("SoftmaxCrossEntropyWithLogits")
def softmax_cross_entropy_with_logits(ctx: KernelContext, features: np.ndarray,
                                      labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        shape = np.broadcast_shapes(features.shape, labels.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"logits and labels must be broadcastable: logits_size={list(features.shape)} "
            f"labels_size={list(labels.shape)}") from None
    if len(shape) != 2:
        raise InvalidArgumentError(
            f"logits and labels must be either 2-dimensional, or broadcasted to be "
            f"2-dimensional, got shape {list(shape)}")
    f = np.broadcast_to(features, shape)
    y = np.broadcast_to(labels, shape)
    logp, p = _log_softmax(f)
    loss = -(y * logp).sum(axis=-1)
    dt = features.dtype
    return loss.astype(dt), (p - y).astype(dt)


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy_with_logits(ctx: KernelContext, features: np.ndarray,
                                             labels: np.ndarray,
                                             ) -> tuple[np.ndarray, np.ndarray]:
    if features.ndim != 2:
        raise InvalidArgumentError(f"logits must be 2-D, but got shape {list(features.shape)}")
    if labels.ndim != 1:
        raise InvalidArgumentError(f"labels must be 1-D, but got shape {list(labels.shape)}")
    if features.shape[0] != labels.shape[0]:
        raise InvalidArgumentError(
            f"logits and labels must have the same first dimension, got logits shape "
            f"{list(features.shape)} and labels shape {list(labels.shape)}")
    if features.shape[1] == 0 and labels.size:
        raise InvalidArgumentError(
            f"Must have at least one class, but got logits shape {list(features.shape)}")
    classes = features.shape[1]
    bad = (labels < 0) | (labels >= classes)
    if bad.any():
        v = labels[int(np.argmax(bad))]
        raise InvalidArgumentError(
            f"Received a label value of {v} which is outside the valid range of "
            f"[0, {classes}).  Label values: {' '.join(str(x) for x in labels)}")
    logp, p = _log_softmax(features)
    rows = np.arange(labels.size)
    loss = -logp[rows, labels]
    back = p.copy()
    back[rows, labels] -= 1
    dt = features.dtype
    return loss.astype(dt), back.astype(dt)
