"""Variables: ref variables (VariableV2/Assign*) and resource variables (VarHandleOp ...)."""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
)

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
            ref.store(fn(ref.value))
    else:
        ref.store(fn(ref.value))
    return ref


@kernel("Assign", cheap=True, writes_ref=True)
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


@kernel("AssignAdd", cheap=True, writes_ref=True)
def assign_add(ctx, ref: VariableRef, value: np.ndarray):
    return _update(ctx, ref, lambda old: np.add(_read_for_update(ref, old), value,
                                                dtype=_read_for_update(ref, old).dtype))


@kernel("AssignSub", cheap=True, writes_ref=True)
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


# --- scatter updates of variables (ref and resource) ------------------------------------------

def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        if np.count_nonzero(b) != b.size:
            raise InvalidArgumentError("Integer division by zero")
        q = np.abs(a) // np.abs(b)  # C truncation, as TensorFlow's integer division
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return np.divide(a, b)


# op suffix -> how duplicates combine (None: plain assignment, the last one wins)
_SCATTER_COMBINE = {
    "Update": None, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": "div",
    "Min": np.minimum, "Max": np.maximum,
}


def _scatter_rows(params: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                  how: str, what: str) -> np.ndarray:
    """``params`` with ``updates`` combined into its rows ``indices`` (a new array)."""
    if params.ndim < 1:
        raise InvalidArgumentError(f"{what}: params must be at least 1-D, got shape "
                                   f"{list(params.shape)}")
    want = indices.shape + params.shape[1:]
    if updates.ndim and updates.shape != want:
        raise InvalidArgumentError(
            f"Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = "
            f"[], got updates.shape {list(updates.shape)}, indices.shape "
            f"{list(indices.shape)}, params.shape {list(params.shape)}")
    flat = indices.reshape(-1).astype(np.int64, copy=False)
    n = params.shape[0]
    bad = (flat < 0) | (flat >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidArgumentError(f"indices[{i}] = {flat[i]} is not in [0, {n})")
    upd = np.broadcast_to(updates, want).reshape((flat.size,) + params.shape[1:])
    upd = upd.astype(params.dtype, copy=False)
    out = params.copy()
    combine = _SCATTER_COMBINE[how]
    if combine is None:
        out[flat] = upd
    elif combine == "div":
        for j, row in enumerate(flat):  # duplicates divide one after the other
            out[row] = _trunc_div(out[row], upd[j])
    else:
        combine.at(out, flat, upd)
    return out


def _scatter_nd(ctx, params: np.ndarray, indices: np.ndarray, updates: np.ndarray,
                how: str) -> np.ndarray:
    from .array import _tensor_scatter

    combine = _SCATTER_COMBINE[how]
    return _tensor_scatter(ctx, params, indices, updates.astype(params.dtype, copy=False),
                           combine)


def _ref_scatter(how: str, nd: bool):
    def run(ctx, ref: VariableRef, indices: np.ndarray, updates: np.ndarray):
        def fn(old):
            old = _read_for_update(ref, old)
            if nd:
                return _scatter_nd(ctx, old, indices, updates, how)
            return _scatter_rows(old, indices, updates, how, ctx.op)
        return _update(ctx, ref, fn)

    return run


def _resource_scatter(how: str, nd: bool):
    def run(ctx, handle: ResourceHandle, indices: np.ndarray, updates: np.ndarray):
        var = _var(ctx, handle)
        with var.lock:
            if nd:
                var.value = _scatter_nd(ctx, var.value, indices, updates, how)
            else:
                var.value = _scatter_rows(var.value, indices, updates, how, ctx.op)
        return ()

    return run


for _how in _SCATTER_COMBINE:
    kernel(f"Scatter{_how}", writes_ref=True)(_ref_scatter(_how, False))
    kernel(f"ResourceScatter{_how}")(_resource_scatter(_how, False))
for _how in ("Update", "Add", "Sub", "Min", "Max"):
    kernel(f"ScatterNd{_how}", writes_ref=True)(_ref_scatter(_how, True))
    kernel(f"ResourceScatterNd{_how}")(_resource_scatter(_how, True))


@kernel("ResourceGatherNd")
def resource_gather_nd(ctx, handle: ResourceHandle, indices: np.ndarray):
    from ..kernel_call import call_op

    return call_op(ctx, "GatherNd", [_var(ctx, handle).value, indices])


@kernel("CountUpTo", cheap=True, writes_ref=True)
def count_up_to(ctx, ref: VariableRef):
    limit = ctx.attrs["limit"]
    with ref.lock:
        old = np.array(_read_for_update(ref, ref.value))   # the store below is in place
        if old >= limit:
            raise OutOfRangeError(f"Reached limit of {limit}")
        ref.store(np.asarray(old + 1, dtype=old.dtype))
    return old


@kernel("ResourceCountUpTo", cheap=True)
def resource_count_up_to(ctx, handle: ResourceHandle):
    limit = ctx.attrs["limit"]
    var = _var(ctx, handle)
    with var.lock:
        old = var.value
        if old >= limit:
            raise OutOfRangeError(f"Reached limit of {limit}")
        var.value = np.asarray(old + 1, dtype=old.dtype)
    return old


# --- strided-slice assignment (ref and resource) ----------------------------------------------

def _slice_assign(ctx, old: np.ndarray, begin: np.ndarray, end: np.ndarray,
                  strides: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``old`` with ``value`` (broadcast to the slice's final shape) written into the slice
    StridedSlice with the same spec would read (a new array)."""
    from .array import strided_slice_plan

    b, e, s = np.asarray(begin), np.asarray(end), np.asarray(strides)
    if b.ndim != 1 or e.shape != b.shape or s.shape != b.shape:
        raise InvalidArgumentError(
            f"Expected begin, end, and strides to be 1D equal size tensors, but got shapes "
            f"{list(b.shape)}, {list(e.shape)}, and {list(s.shape)} instead.")
    if value.dtype != old.dtype:
        raise InvalidArgumentError(
            f"l-value dtype {old.dtype} does not match r-value dtype {value.dtype}")
    a = ctx.attrs
    slices, final = strided_slice_plan(
        old.shape, b.tolist(), e.tolist(), s.tolist(), int(a.get("begin_mask", 0)),
        int(a.get("end_mask", 0)), int(a.get("ellipsis_mask", 0)),
        int(a.get("new_axis_mask", 0)), int(a.get("shrink_axis_mask", 0)))
    try:
        vb = np.broadcast_to(value, final)
    except ValueError:
        raise InvalidArgumentError(
            f"Cannot broadcast input shape {list(value.shape)} into final shape "
            f"{list(final)}") from None
    proc = tuple(len(range(*sl.indices(d))) for sl, d in zip(slices, old.shape))
    out = old.copy()
    if slices:
        out[slices] = vb.reshape(proc)
    else:
        out[...] = vb.reshape(old.shape)
    return out


@kernel("StridedSliceAssign", writes_ref=True)
def strided_slice_assign(ctx, ref: VariableRef, begin: np.ndarray, end: np.ndarray,
                         strides: np.ndarray, value: np.ndarray):
    return _update(ctx, ref, lambda old: _slice_assign(
        ctx, _read_for_update(ref, old), begin, end, strides, value))


@kernel("ResourceStridedSliceAssign")
def resource_strided_slice_assign(ctx, handle: ResourceHandle, begin: np.ndarray,
                                  end: np.ndarray, strides: np.ndarray, value: np.ndarray):
    var = _var(ctx, handle)
    with var.lock:
        var.value = _slice_assign(ctx, var.value, begin, end, strides, value)
    return ()
