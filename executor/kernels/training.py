"""Optimizer update kernels: Apply*/ResourceApply* and their Sparse* forms.

Each optimizer is one formula on numpy arrays (``var`` and its slots in, new values out),
registered four ways: on ref variables (``Apply*``, output: the var's ref), on resource
variables (``ResourceApply*``, no output), and for both the sparse forms that update only the
rows ``indices`` names (duplicate indices apply one after the other, as TF's loop does).
The formulas are TensorFlow's (core/kernels/training_ops.cc); hyperparameters are scalars of
the var's dtype, so arithmetic stays in that dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from ..resources import VariableRef
from .registry import KernelContext, kernel
from .state import _var

Slots = list[np.ndarray]


def _sgd(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    return [s[0] - h["alpha"] * g]


def _momentum(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum = s
    accum = accum * h["momentum"] + g
    if ctx.attrs.get("use_nesterov", False):
        return [var - (g * h["lr"] + accum * h["momentum"] * h["lr"]), accum]
    return [var - accum * h["lr"], accum]


def _keras_momentum(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum = s
    accum = accum * h["momentum"] - g * h["lr"]
    if ctx.attrs.get("use_nesterov", False):
        return [var + (accum * h["momentum"] - g * h["lr"]), accum]
    return [var + accum, accum]


def _adagrad(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum = s
    if ctx.attrs.get("update_slots", True):
        accum = accum + g * g
    return [var - h["lr"] * g / np.sqrt(accum), accum]


def _adagrad_v2(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum = s
    if ctx.attrs.get("update_slots", True):
        accum = accum + g * g
    return [var - h["lr"] * g / (np.sqrt(accum) + h["epsilon"]), accum]


def _adam_alpha(h: dict) -> np.ndarray:
    return h["lr"] * np.sqrt(1 - h["beta2_power"]) / (1 - h["beta1_power"])


def _adam(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, m, v = s
    b1, b2 = h["beta1"], h["beta2"]
    m = m + (g - m) * (1 - b1)
    v = v + (g * g - v) * (1 - b2)
    alpha = _adam_alpha(h)
    if ctx.attrs.get("use_nesterov", False):
        step = (g * (1 - b1) + b1 * m) * alpha / (np.sqrt(v) + h["epsilon"])
    else:
        step = m * alpha / (np.sqrt(v) + h["epsilon"])
    return [var - step, m, v]


def _adam_amsgrad(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, m, v, vhat = s
    m = m + (g - m) * (1 - h["beta1"])
    v = v + (g * g - v) * (1 - h["beta2"])
    vhat = np.maximum(vhat, v)
    return [var - m * _adam_alpha(h) / (np.sqrt(vhat) + h["epsilon"]), m, v, vhat]


def _adamax(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, m, v = s
    m = m + (g - m) * (1 - h["beta1"])
    v = np.maximum(h["beta2"] * v, np.abs(g))
    return [var - h["lr"] / (1 - h["beta1_power"]) * (m / (v + h["epsilon"])), m, v]


def _rmsprop(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, ms, mom = s
    ms = ms + (g * g - ms) * (1 - h["rho"])
    mom = mom * h["momentum"] + h["lr"] * g / np.sqrt(ms + h["epsilon"])
    return [var - mom, ms, mom]


def _centered_rmsprop(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, mg, ms, mom = s
    ms = ms + (g * g - ms) * (1 - h["rho"])
    mg = mg + (g - mg) * (1 - h["rho"])
    denom = ms - mg * mg + h["epsilon"]
    mom = mom * h["momentum"] + g * h["lr"] / np.sqrt(denom)
    return [var - mom, mg, ms, mom]


def _adadelta(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum, accum_update = s
    rho, eps = h["rho"], h["epsilon"]
    accum = accum * rho + g * g * (1 - rho)
    update = np.sqrt(accum_update + eps) / np.sqrt(accum + eps) * g
    accum_update = accum_update * rho + update * update * (1 - rho)
    return [var - update * h["lr"], accum, accum_update]


def _add_sign(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, m = s
    m = m * h["beta"] + g * (1 - h["beta"])
    return [var - h["lr"] * (h["alpha"] + h["sign_decay"] * np.sign(g) * np.sign(m)) * g, m]


def _power_sign(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, m = s
    m = m * h["beta"] + g * (1 - h["beta"])
    scale = np.exp(h["logbase"] * h["sign_decay"] * np.sign(g) * np.sign(m))
    return [var - h["lr"] * scale * g, m]


def _shrink(prox: np.ndarray, rate: np.ndarray, l1: np.ndarray, l2: np.ndarray) -> np.ndarray:
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - rate * l1, 0) / (1 + rate * l2)
    return prox / (1 + rate * l2)


def _proximal_sgd(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    prox = s[0] - h["alpha"] * g
    return [_shrink(prox, h["alpha"], h["l1"], h["l2"])]


def _proximal_adagrad(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    var, accum = s
    accum = accum + g * g
    rate = h["lr"] / np.sqrt(accum)
    return [_shrink(var - g * rate, rate, h["l1"], h["l2"]), accum]


def _ftrl_update(ctx, s: Slots, h: dict, g: np.ndarray, gs: np.ndarray) -> Slots:
    """FTRL-proximal (ApplyFtrl and V2's functors): ``gs`` is the gradient the linear term
    takes (V2 adds its l2 shrinkage); lr_power -0.5 takes square roots, others pow."""
    var, accum, linear = s
    lr, l1, l2, p = h["lr"], h["l1"], h["l2"], h["lr_power"]
    two = var.dtype.type(2)
    new_accum = accum + g * g
    half = p == var.dtype.type(-0.5)
    root = np.sqrt(new_accum) if half else new_accum ** -p
    sigma = root - (np.sqrt(accum) if half else accum ** -p)
    if ctx.attrs.get("multiply_linear_by_lr", False):
        linear = linear + (gs * lr - sigma * var)
        bound = l1 * lr
        y = root + two * l2 * lr
    else:
        linear = linear + (gs - sigma / lr * var)
        bound = l1
        y = root / lr + two * l2
    x = bound * np.sign(linear) - linear
    var = np.where(np.abs(linear) > bound, x / y, var.dtype.type(0))
    return [var, new_accum, linear]


def _ftrl(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    return _ftrl_update(ctx, s, h, g, g)


def _ftrl_v2(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    return _ftrl_update(ctx, s, h, g, g + s[0].dtype.type(2) * h["l2_shrinkage"] * s[0])


def _adagrad_da(ctx, s: Slots, h: dict, g: np.ndarray) -> Slots:
    """AdagradDA: the accumulated gradient's dual averaging step; global_step is cast to
    float32 first, as TF's functor does."""
    var, ga, gg = s
    ga, gg = ga + g, gg + g * g
    dt = var.dtype.type
    lr, l1, l2 = h["lr"], h["l1"], h["l2"]
    step = dt(np.float32(h["global_step"]))
    denom = l2 * (step * lr) + np.sqrt(gg)
    if l1 > 0:
        new = (lr * dt(-1)) * np.sign(ga) * np.maximum(np.abs(ga) - step * l1, dt(0)) / denom
    else:
        new = lr * ga * dt(-1) / denom
    return [new, ga, gg]


# name -> (slots, the other inputs in OpDef order for the dense form, formula); the sparse form
# takes "indices" right after "grad".
_OPTIMIZERS: dict[str, tuple[int, Sequence[str], Callable]] = {
    "GradientDescent": (1, ("alpha", "grad"), _sgd),
    "Momentum": (2, ("lr", "grad", "momentum"), _momentum),
    "KerasMomentum": (2, ("lr", "grad", "momentum"), _keras_momentum),
    "Adagrad": (2, ("lr", "grad"), _adagrad),
    "AdagradV2": (2, ("lr", "epsilon", "grad"), _adagrad_v2),
    "Adam": (3, ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"),
             _adam),
    "AdamWithAmsgrad": (4, ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon",
                            "grad"), _adam_amsgrad),
    "AdaMax": (3, ("beta1_power", "lr", "beta1", "beta2", "epsilon", "grad"), _adamax),
    "RMSProp": (3, ("lr", "rho", "momentum", "epsilon", "grad"), _rmsprop),
    "CenteredRMSProp": (4, ("lr", "rho", "momentum", "epsilon", "grad"), _centered_rmsprop),
    "Adadelta": (3, ("lr", "rho", "epsilon", "grad"), _adadelta),
    "AddSign": (2, ("lr", "alpha", "sign_decay", "beta", "grad"), _add_sign),
    "PowerSign": (2, ("lr", "logbase", "sign_decay", "beta", "grad"), _power_sign),
    "ProximalGradientDescent": (1, ("alpha", "l1", "l2", "grad"), _proximal_sgd),
    "ProximalAdagrad": (2, ("lr", "l1", "l2", "grad"), _proximal_adagrad),
    "Ftrl": (3, ("grad", "lr", "l1", "l2", "lr_power"), _ftrl),
    "FtrlV2": (3, ("grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"), _ftrl_v2),
    "AdagradDA": (3, ("grad", "lr", "l1", "l2", "global_step"), _adagrad_da),
}
# The ops TensorFlow defines: dense ref, dense resource, sparse ref, sparse resource.
_REF_ONLY_MISSING = {"KerasMomentum", "AdamWithAmsgrad"}   # resource forms only
_SPARSE = {"Momentum", "KerasMomentum", "Adagrad", "AdagradV2", "RMSProp", "CenteredRMSProp",
           "Adadelta", "ProximalGradientDescent", "ProximalAdagrad", "Ftrl", "FtrlV2",
           "AdagradDA"}


def _check_shapes(ctx: KernelContext, values: Slots, hyper: dict, grad: np.ndarray,
                  sparse: bool) -> None:
    var = values[0]
    for i, s in enumerate(values[1:], 1):
        if s.shape != var.shape:
            raise InvalidArgumentError(
                f"var and slot {i} do not have the same shape: {list(var.shape)} "
                f"{list(s.shape)}")
    for k, v in hyper.items():
        if v.ndim != 0:
            raise InvalidArgumentError(f"{k} is not a scalar: {list(v.shape)}")
    if not sparse and grad.shape != var.shape:
        raise InvalidArgumentError(
            f"var and grad do not have the same shape{list(var.shape)} {list(grad.shape)}")


def _apply(ctx: KernelContext, n_slots: int, names: Sequence[str], fn: Callable,
           values: Slots, rest: Sequence[np.ndarray], sparse: bool) -> Slots:
    hyper = dict(zip(names, rest))
    grad = hyper.pop("grad")
    indices = hyper.pop("indices", None)
    dt = values[0].dtype
    hyper = {k: np.asarray(v, dtype=dt) for k, v in hyper.items()}
    _check_shapes(ctx, values, hyper, grad, sparse)
    if not sparse:
        return [np.asarray(v, dtype=dt) for v in fn(ctx, values, hyper, grad)]
    var = values[0]
    if indices.ndim != 1:
        raise InvalidArgumentError(f"indices must be one-dimensional, got {list(indices.shape)}")
    if grad.shape != indices.shape + var.shape[1:]:
        raise InvalidArgumentError(
            f"grad must be the same shape as indices + var.shape[1:]: grad "
            f"{list(grad.shape)}, indices {list(indices.shape)}, var {list(var.shape)}")
    n = var.shape[0]
    for i, row in enumerate(indices.tolist()):
        if not 0 <= row < n:
            raise InvalidArgumentError(f"Index {row} at offset {i} in indices is out of range")
    out = [v.copy() for v in values]
    for i, row in enumerate(indices.tolist()):  # one row at a time: duplicates accumulate
        new = fn(ctx, [v[row] for v in out], hyper, grad[i])
        for v, x in zip(out, new):
            v[row] = x
    return out


def _ref_kernel(n_slots: int, names: Sequence[str], fn: Callable, sparse: bool) -> Callable:
    def run(ctx: KernelContext, *args):
        refs: list[VariableRef] = list(args[:n_slots])
        values = [r.read() for r in refs]
        new = _apply(ctx, n_slots, names, fn, values, args[n_slots:], sparse)
        for r, v in zip(refs, new):
            r.store(v)
        return refs[0]

    return run


def _resource_kernel(n_slots: int, names: Sequence[str], fn: Callable, sparse: bool) -> Callable:
    def run(ctx: KernelContext, *args):
        variables = [_var(ctx, h) for h in args[:n_slots]]
        new = _apply(ctx, n_slots, names, fn, [v.value for v in variables],
                     args[n_slots:], sparse)
        for var, v in zip(variables, new):
            var.value = v
        return ()

    return run


def _register() -> None:
    for name, (n_slots, names, fn) in _OPTIMIZERS.items():
        sparse_names = tuple(x for n in names for x in ((n, "indices") if n == "grad" else (n,)))
        forms = [(f"ResourceApply{name}", _resource_kernel, names, False)]
        if name not in _REF_ONLY_MISSING:
            forms.append((f"Apply{name}", _ref_kernel, names, False))
        if name in _SPARSE:
            forms.append((f"ResourceSparseApply{name}", _resource_kernel, sparse_names, True))
            if name not in _REF_ONLY_MISSING:
                forms.append((f"SparseApply{name}", _ref_kernel, sparse_names, True))
        for op, make, arg_names, sparse in forms:
            k = make(n_slots, arg_names, fn, sparse)
            k.__name__ = k.__qualname__ = op
            kernel(op, writes_ref=make is _ref_kernel)(k)


_register()
