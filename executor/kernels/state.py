"""Variables: ref variables (VariableV2/Assign*) and resource variables (VarHandleOp ...)."""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError

from ..resources import ResourceHandle, VariableRef
from .registry import kernel


def _key(ctx, default_name: str) -> tuple[str, str]:
    return (ctx.attrs.get("container") or "", ctx.attrs.get("shared_name") or default_name)


def _shape_ok(want: tuple | None, have: tuple) -> bool:
    if want is None:
        return True
    return len(want) == len(have) and all(w is None or w == h for w, h in zip(want, have))


@kernel("VariableV2", "Variable", cheap=True)
def variable_v2(ctx):
    dtype, shape = ctx.attrs.get("dtype"), ctx.attrs.get("shape")
    return ctx.resources.lookup_or_create(
        _key(ctx, ctx.node), lambda: VariableRef(ctx.node, dtype, shape))


def _update(ctx, ref: VariableRef, fn) -> VariableRef:
    if ctx.attrs.get("use_locking", False):
        with ref.lock:
            ref.value = fn(ref.value)
    else:
        ref.value = fn(ref.value)
    return ref


@kernel("Assign", cheap=True)
def assign(ctx, ref: VariableRef, value: np.ndarray):
    if ctx.attrs.get("validate_shape", True) and ref.value is not None \
            and ref.value.shape != value.shape:
        raise InvalidArgumentError(
            f"Assign requires shapes of both tensors to match: variable {ref.name} has shape "
            f"{list(ref.value.shape)}, value has shape {list(value.shape)}")
    if ctx.attrs.get("validate_shape", True) and not _shape_ok(ref.shape, value.shape):
        raise InvalidArgumentError(
            f"Assign to {ref.name}: value shape {list(value.shape)} does not match the "
            f"variable's declared shape {list(ref.shape)}")
    return _update(ctx, ref, lambda _old: value)


def _read_for_update(ref: VariableRef, old: np.ndarray | None) -> np.ndarray:
    if old is None:
        raise FailedPreconditionError(f"Attempting to use uninitialized value {ref.name}")
    return old


@kernel("AssignAdd", cheap=True)
def assign_add(ctx, ref: VariableRef, value: np.ndarray):
    return _update(ctx, ref, lambda old: np.add(_read_for_update(ref, old), value,
                                                dtype=_read_for_update(ref, old).dtype))


@kernel("AssignSub", cheap=True)
def assign_sub(ctx, ref: VariableRef, value: np.ndarray):
    return _update(ctx, ref, lambda old: np.subtract(_read_for_update(ref, old), value,
                                                     dtype=_read_for_update(ref, old).dtype))


@kernel("IsVariableInitialized", cheap=True)
def is_variable_initialized(ctx, ref: VariableRef):
    return np.asarray(ref.value is not None)


# --- resource variables --------------------------------------------------------------------

class ResourceVariable:
    __dfg_resource__ = True
    __slots__ = ("name", "dtype", "shape", "value", "lock")

    def __init__(self, name: str, dtype, shape) -> None:
        self.name, self.dtype, self.shape = name, dtype, shape
        self.value: np.ndarray | None = None
        self.lock = __import__("threading").Lock()


@kernel("VarHandleOp", cheap=True)
def var_handle_op(ctx):
    container, name = _key(ctx, ctx.node)
    return ResourceHandle(container, name, ctx.attrs.get("dtype"), ctx.attrs.get("shape"))


def _var(ctx, handle: ResourceHandle, create: bool = False) -> ResourceVariable:
    if create:
        return ctx.resources.lookup_or_create(
            handle.key, lambda: ResourceVariable(handle.name, handle.dtype, handle.shape))
    var = ctx.resources.lookup(handle.key)
    if var is None or var.value is None:
        raise FailedPreconditionError(
            f"Could not find variable {handle.name}: it is uninitialized (resource "
            f"{handle.container or 'localhost'}/{handle.name} does not exist yet)")
    return var


@kernel("ReadVariableOp", cheap=True)
def read_variable_op(ctx, handle: ResourceHandle):
    var = _var(ctx, handle)
    want = ctx.attrs.get("dtype")
    if want is not None and var.value.dtype != want:
        raise InvalidArgumentError(
            f"Trying to read variable {handle.name} with dtype {want}, but it holds "
            f"{var.value.dtype}")
    return var.value


@kernel("AssignVariableOp", cheap=True)
def assign_variable_op(ctx, handle: ResourceHandle, value: np.ndarray):
    var = _var(ctx, handle, create=True)
    if var.dtype is not None and value.dtype != var.dtype:
        raise InvalidArgumentError(
            f"Trying to assign variable {handle.name} of dtype {var.dtype} a value of dtype "
            f"{value.dtype}")
    with var.lock:
        var.value = value
    return ()


def _assign_update(ctx, handle: ResourceHandle, value: np.ndarray, fn) -> tuple:
    var = _var(ctx, handle)
    with var.lock:
        var.value = fn(var.value, value).astype(var.value.dtype, copy=False)
    return ()


@kernel("AssignAddVariableOp", cheap=True)
def assign_add_variable_op(ctx, handle: ResourceHandle, value: np.ndarray):
    return _assign_update(ctx, handle, value, np.add)


@kernel("AssignSubVariableOp", cheap=True)
def assign_sub_variable_op(ctx, handle: ResourceHandle, value: np.ndarray):
    return _assign_update(ctx, handle, value, np.subtract)


@kernel("VarIsInitializedOp", cheap=True)
def var_is_initialized_op(ctx, handle: ResourceHandle):
    var = ctx.resources.lookup(handle.key)
    return np.asarray(var is not None and var.value is not None)


@kernel("VariableShape", cheap=True)
def variable_shape(ctx, handle: ResourceHandle):
    var = _var(ctx, handle)
    return np.asarray(var.value.shape, dtype=ctx.attrs.get("out_type", np.dtype(np.int32)))


@kernel("DestroyResourceOp", cheap=True)
def destroy_resource_op(ctx, handle: ResourceHandle):
    if not ctx.resources.delete(handle.key) and not ctx.attrs.get("ignore_lookup_error", True):
        raise NotFoundError(f"resource {handle.name} does not exist")
    return ()


@kernel("ResourceGather", cheap=False)
def resource_gather(ctx, handle: ResourceHandle, indices: np.ndarray):
    params = _var(ctx, handle).value
    batch_dims = ctx.attrs.get("batch_dims", 0)
    if batch_dims:
        raise InvalidArgumentError("ResourceGather with batch_dims is not supported")
    if indices.size and (indices.min() < 0 or indices.max() >= params.shape[0]):
        raise InvalidArgumentError(
            f"indices must be in [0, {params.shape[0]}), found {indices.min()}..{indices.max()}")
    return np.take(params, indices, axis=0)
