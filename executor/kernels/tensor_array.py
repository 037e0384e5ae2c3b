"""TensorArray (V3, and the legacy V1/V2 ops at the end) and Stack (V2 and v1) kernels: per-run
resources living in ``ctx.step``.

Resource model
--------------
Every run (one ``session.run``) has its own ``ctx.step`` dict. The first TensorArray or stack
kernel of a run stores a :class:`StepResources` container in it under :data:`STEP_KEY`;
creation ops register new resources there and return a small *handle* object
(:class:`TensorArrayHandle` / :class:`StackHandle`, both marked ``__dfg_resource__``) that
flows through the graph (Enter, Identity, Switch ... pass it on unchanged). Every other op
looks the handle up in its own run's container, so a handle that outlives its run (fetched
and fed back) is a ``NotFoundError``, as in TensorFlow where the step container is gone.

Each execution of a creation node makes a new resource with a process-unique id, so a
TensorArrayV3 inside a loop body gets one array per iteration.

Flows are float32 scalars whose value carries no meaning; they only order ops. Write,
Scatter and Split return a fresh copy of ``flow_in``; TensorArrayV3/GradV3 return 0.

Locking
-------
The executor may run kernels of one run on several threads at once (reads and writes of
different loop iterations). ``StepResources.lock`` guards its dicts; every TensorArray and
stack has its own lock guarding all of its mutable state. Lock order: the container lock
may be held while taking an array's lock (gradient creation), never the reverse.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, NotFoundError, UnimplementedError

from .array import stacked
from .registry import KernelContext, kernel

Shape = tuple[int, ...]
PartialShape = tuple[int | None, ...] | None  # None: unknown rank; None dims: unknown size

STEP_KEY = "__dfg_tensor_arrays_and_stacks__"

# Process-wide id source, so that resource ids never repeat across runs either.
_id_lock = threading.Lock()
_ids = itertools.count(1)


def _new_id() -> int:
    with _id_lock:
        return next(_ids)


# --- handles -----------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorArrayHandle:
    """What a TensorArray op outputs on its handle slot: the key of an array of one run."""

    __dfg_resource__: ClassVar[bool] = True
    key: int
    name: str  # unique display name (TensorFlow's "<tensor_array_name>_<n>"), for messages


@dataclass(frozen=True)
class StackHandle:
    """What StackV2 outputs: the key of a stack of one run."""

    __dfg_resource__: ClassVar[bool] = True
    key: int
    name: str


# --- shapes and dtypes -------------------------------------------------------------------

def _norm_partial(shape: Any) -> PartialShape:
    if shape is None:
        return None
    return tuple(None if d is None or int(d) < 0 else int(d) for d in shape)


def _fully_defined(shape: PartialShape) -> bool:
    return shape is not None and None not in shape     # every write asks: no generator


def _compatible(partial: PartialShape, shape: Shape) -> bool:
    if partial is None or partial == shape:
        return True
    if len(partial) != len(shape):
        return False
    for p, d in zip(partial, shape):     # a loop, not all(generator): every list set asks
        if p is not None and p != d:
            return False
    return True


def _merge(a: PartialShape, b: PartialShape) -> PartialShape:
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise InvalidArgumentError(f"Incompatible shapes during merge: {_fmt(a)} vs. {_fmt(b)}")
    out = []
    for x, y in zip(a, b):
        if x is not None and y is not None and x != y:
            raise InvalidArgumentError(
                f"Incompatible shapes during merge: {_fmt(a)} vs. {_fmt(b)}")
        out.append(x if x is not None else y)
    return tuple(out)


def _fmt(shape: PartialShape) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _dtname(dt: Any) -> str:
    try:
        return D.name(D.from_numpy(dt))
    except Exception:  # noqa: BLE001 - only for messages
        return str(dt)


def _same_dtype(a: Any, b: Any) -> bool:
    """numpy dtype equality, with every string representation (object/bytes/str) as one."""
    if a is b:      # NumPy's own instances (every write and read of a loop asks)
        return True
    try:
        da, db = np.dtype(a), np.dtype(b)
    except TypeError:
        return a == b
    if da.kind in "OSU" and db.kind in "OSU":
        return True
    return da == db


def _zeros(dtype: Any, shape: Shape) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "OSU":  # TensorFlow's zero string is empty
        return np.full(shape, b"", dtype=object)
    return np.zeros(shape, dtype=dt)


def _scalar_int(x: np.ndarray, what: str) -> int:
    if (x.ndim if x.__class__ is np.ndarray else np.ndim(x)) != 0:
        raise InvalidArgumentError(f"{what} must be scalar, but had shape: {_fmt(np.shape(x))}")
    return int(x)


def _vector(x: np.ndarray, message: str) -> np.ndarray:
    if np.ndim(x) != 1:
        raise InvalidArgumentError(f"{message}{_fmt(np.shape(x))}")
    return x


def _flow(flow_in: Any) -> np.ndarray:
    return np.array(flow_in, dtype=np.float32)


# --- state ---------------------------------------------------------------------------------

class _Element:
    """One slot of a TensorArray. Guarded by the owning array's lock."""

    __slots__ = ("value", "shape", "written", "read", "cleared")

    def __init__(self) -> None:
        self.value: np.ndarray | None = None  # None: nothing stored (unwritten, or zeros)
        self.shape: Shape | None = None       # shape of what was (or counts as) written
        self.written = False
        self.read = False
        self.cleared = False  # read with clear_after_read: a second read is an error


class TensorArray:
    """The state of one TensorArray; all methods take ``self.lock``.

    Invariant: ``lock`` guards ``elems``, ``element_shape``, ``dynamic_size``,
    ``marked_size``, ``closed`` and ``gradients_disallowed``; the other fields never change.
    """

    def __init__(self, name: str, dtype: Any, size: int, element_shape: PartialShape,
                 identical_element_shapes: bool, dynamic_size: bool, clear_after_read: bool,
                 is_grad: bool = False, marked_size: int = -1) -> None:
        self.name = name
        self.dtype = dtype
        self.identical_element_shapes = identical_element_shapes
        self.clear_after_read = clear_after_read
        self.is_grad = is_grad  # gradient arrays aggregate repeated writes by adding
        self.lock = threading.Lock()
        self.elems = [_Element() for _ in range(size)]
        self.element_shape = element_shape
        self.dynamic_size = dynamic_size
        self.marked_size = marked_size  # size recorded by Split (used by Concat of grads)
        self.closed = False
        self.gradients_disallowed = False

    # Everything below named _locked_* expects self.lock to be held.

    def _locked_check_open(self) -> None:
        if self.closed:
            raise InvalidArgumentError(f"TensorArray {self.name} has already been closed.")

    def _locked_write(self, index: int, value: np.ndarray) -> None:
        self._locked_check_open()
        n = len(self.elems)
        if index < 0 or (not self.dynamic_size and index >= n):
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Tried to write to index {index} but array is not "
                f"resizeable and size is: {n}")
        if index >= n:  # dynamic_size: grow
            self.elems.extend(_Element() for _ in range(index + 1 - n))
        t = self.elems[index]
        if not _same_dtype(value.dtype, self.dtype):
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                f"the value dtype is {_dtname(value.dtype)} but TensorArray dtype is "
                f"{_dtname(self.dtype)}.")
        if not _compatible(self.element_shape, value.shape):
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                f"the value shape is {_fmt(value.shape)} which is incompatible with the "
                f"TensorArray's inferred element shape: {_fmt(self.element_shape)} (consider "
                "setting infer_shape=False).")
        if self.identical_element_shapes and not _fully_defined(self.element_shape):
            self.element_shape = tuple(value.shape)
        if t.read:
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                "it has already been read.")
        if t.written and not self.is_grad:
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because "
                "it has already been written to.")
        if not t.written:
            t.value, t.shape, t.written = value, tuple(value.shape), True
            return
        # A gradient array: sum the partial gradients of one forward element.
        if tuple(value.shape) != t.shape:
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not aggregate to TensorArray index {index} "
                f"because the existing shape is {_fmt(t.shape)} but the new input shape is "
                f"{_fmt(value.shape)}.")
        if t.value is None or t.value.size == 0:
            t.value = value  # only a shape was recorded: it stood for zeros
            return
        if np.dtype(self.dtype).kind in "bOSU":
            raise InvalidArgumentError(
                f"TensorArray {self.name}: cannot aggregate writes of dtype "
                f"{_dtname(self.dtype)}")
        t.value = np.add(t.value, value)  # a new array: stored inputs are never mutated
        self.gradients_disallowed = True

    def _locked_read(self, index: int) -> np.ndarray:
        self._locked_check_open()
        n = len(self.elems)
        if index < 0 or (not self.is_grad and index >= n):
            raise InvalidArgumentError(
                f"Tried to read from index {index} but array size is: {n}")
        if (index >= n or not self.elems[index].written):
            # Never written: zeros of the known shape. Gradient arrays may also be read past
            # their end (a forward element whose gradient was never written).
            if self.is_grad and index < n and self.elems[index].shape:
                shape = self.elems[index].shape
            elif not _fully_defined(self.element_shape):
                raise InvalidArgumentError(
                    f"TensorArray {self.name}: Could not read from TensorArray index {index}.  "
                    "Furthermore, the element shape is not fully defined: "
                    f"{_fmt(self.element_shape)}.  It is possible you are working with a "
                    "resizeable TensorArray and stop_gradients is not allowing the gradients to "
                    "be written.  If you set the full element_shape property on the forward "
                    "TensorArray, the proper all-zeros tensor will be returned instead of "
                    "incurring this error.")
            else:
                shape = tuple(self.element_shape)  # type: ignore[arg-type]
            if index >= n:
                self.elems.extend(_Element() for _ in range(index + 1 - n))
                for e in self.elems[n:]:
                    e.shape, e.written = shape, True
            else:
                self.elems[index].shape, self.elems[index].written = shape, True
        t = self.elems[index]
        if t.cleared:
            raise InvalidArgumentError(
                f"TensorArray {self.name}: Could not read index {index} twice because it was "
                "cleared after a previous read (perhaps try setting clear_after_read = false?).")
        if t.value is None or t.value.size == 0:
            t.value = _zeros(self.dtype, t.shape or ())
        value = t.value
        if self.clear_after_read:
            t.value, t.cleared = None, True
        t.read = True
        return value

    # Public operations (each is atomic with respect to the other threads).

    def write(self, index: int, value: np.ndarray) -> None:
        with self.lock:
            self._locked_write(index, value)

    def read(self, index: int) -> np.ndarray:
        with self.lock:
            return self._locked_read(index)

    def read_many(self, indices: list[int]) -> list[np.ndarray]:
        with self.lock:
            return [self._locked_read(i) for i in indices]

    def size(self) -> int:
        with self.lock:
            self._locked_check_open()
            return len(self.elems)

    def pack_or_concat_size(self) -> int:
        with self.lock:
            self._locked_check_open()
            if self.is_grad and self.marked_size >= 0:
                return self.marked_size
            return len(self.elems)

    def merge_element_shape(self, candidate: PartialShape) -> None:
        with self.lock:
            self.element_shape = _merge(self.element_shape, candidate)

    def scatter(self, indices: list[int], values: np.ndarray) -> None:
        with self.lock:
            self._locked_check_open()
            size = len(self.elems)
            max_index = max(indices) if indices else -1
            if self.dynamic_size and size < max_index + 1:
                size = max_index + 1
            if max_index >= size:
                raise InvalidArgumentError(
                    f"Max scatter index must be < array size ({max_index} vs. {size})")
            for i, ix in enumerate(indices):
                # values[i, ...] is a 0-d array view even for strings (values[i] of an
                # object vector is the bare bytes)
                self._locked_write(ix, values[i, ...])

    def split(self, pieces: list[np.ndarray]) -> None:
        with self.lock:
            self._locked_check_open()
            size = len(self.elems)
            if self.dynamic_size and size < len(pieces):
                size = len(pieces)
            if size != len(pieces):
                raise InvalidArgumentError(
                    f"TensorArray's size is not equal to the size of lengths ({size} vs. "
                    f"{len(pieces)}), and the TensorArray is not marked as dynamically "
                    "resizeable")
            if not self.is_grad:
                self.marked_size = size
            for i, piece in enumerate(pieces):
                self._locked_write(i, piece)

    def close(self) -> None:
        with self.lock:
            self.elems = []
            self.closed = True

    def make_gradient(self, name: str, shape_to_prepend: Shape | None) -> TensorArray:
        """A gradient array for this one: same size, aggregating writes, and every element
        this array has written counts as written zeros of the (prepended) same shape."""
        with self.lock:
            self._locked_check_open()
            self.dynamic_size = False  # once gradients exist, the forward array can't grow
            if self.gradients_disallowed:
                raise InvalidArgumentError(
                    f"Unable to create a gradients TensorArray for {self.name}.  Perhaps you "
                    "used the multiple_writes_aggregate flag on a previous write?  Gradient "
                    "calculation is impossible when multiple writes are performed to the same "
                    "index.")
            element_shape: PartialShape = self.element_shape
            if shape_to_prepend is not None:
                element_shape = (None if self.element_shape is None
                                 else tuple(shape_to_prepend) + tuple(self.element_shape))
            grad = TensorArray(name, self.dtype, len(self.elems), element_shape,
                               self.identical_element_shapes, dynamic_size=False,
                               clear_after_read=True, is_grad=True,
                               marked_size=self.marked_size)
            prefix = tuple(shape_to_prepend or ())
            for src, dst in zip(self.elems, grad.elems):
                if src.written:
                    dst.shape, dst.written = prefix + tuple(src.shape or ()), True
            return grad


class Stack:
    """The state of one stack. Invariant: ``lock`` guards ``items`` and ``closed``."""

    def __init__(self, name: str, elem_type: Any, max_size: int) -> None:
        self.name = name
        self.elem_type = elem_type
        self.max_size = max_size  # negative: unbounded
        self.lock = threading.Lock()
        self.items: list[np.ndarray] = []
        self.closed = False

    def _locked_check_open(self) -> None:
        if self.closed:
            raise InvalidArgumentError(f"Stack[{self.name}] has already been closed.")

    def push(self, value: np.ndarray) -> None:
        with self.lock:
            self._locked_check_open()
            if 0 <= self.max_size <= len(self.items):
                raise InvalidArgumentError(
                    f"Stack[{self.name}] overflowed its max_size ({self.max_size})")
            self.items.append(value)

    def pop(self) -> np.ndarray:
        with self.lock:
            self._locked_check_open()
            if not self.items:
                raise InvalidArgumentError(f"Stack[{self.name}] is empty when calling Pop().")
            return self.items.pop()

    def close(self) -> None:
        with self.lock:
            self.items = []
            self.closed = True


class StepResources:
    """The TensorArrays and stacks of one run.

    Invariant: ``lock`` guards the three dicts (insertions and look-ups).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrays: dict[int, TensorArray] = {}
        self.grads: dict[tuple[int, str], TensorArrayHandle] = {}  # (forward key, source)
        self.stacks: dict[int, Stack] = {}


def step_resources(step: dict) -> StepResources:
    """The run's container, created on first use (``dict.setdefault`` is atomic)."""
    res = step.get(STEP_KEY)
    if res is None:
        res = step.setdefault(STEP_KEY, StepResources())
    return res


def _container(ctx: KernelContext, handle: Any) -> StepResources:
    """The container of the run that made ``handle``: a legacy (V1/V2) handle carries it (its
    ops run with a context shared by every run, without a ``ctx.step``), a V3 handle's is
    its own run's."""
    if isinstance(handle, (LegacyTensorArrayHandle, LegacyStackHandle)):
        return handle.res
    return step_resources(ctx.step)


def _held(ctx: KernelContext, handle: Any, cls: type, table: str, what: str,
          container: str) -> Any:
    """The array or stack ``handle`` names, from the ``table`` of its run's container."""
    if not isinstance(handle, cls):
        raise InvalidArgumentError(f"expected a {what} handle, found {type(handle).__name__}")
    res = _container(ctx, handle)
    with res.lock:
        held = getattr(res, table).get(handle.key)
    if held is None:
        raise NotFoundError(f"Resource {container}/{handle.name} does not exist in this run "
                            f"({what}s live for one run only)")
    return held


def _array(ctx: KernelContext, handle: Any) -> TensorArray:
    # the array a V3 handle names, kept in the node's memo for the same handle object: a
    # loop reads or writes through one handle every iteration (a V3 kernel's context is the
    # run's, so nothing outlives the run; an array stays in its run's table once made:
    # closing it only marks it). Legacy handles' kernels share one context across runs.
    m = ctx.memo
    if m is not None and m[0] is handle:
        return m[1]
    ta = _held(ctx, handle, TensorArrayHandle, "arrays", "TensorArray", "_tensor_arrays")
    if handle.__class__ is TensorArrayHandle:
        ctx.memo = (handle, ta)
    return ta


def _stack(ctx: KernelContext, handle: Any) -> Stack:
    return _held(ctx, handle, StackHandle, "stacks", "stack", "_stacks")


def _check_requested_dtype(ta: TensorArray, dtype: Any) -> None:
    if not _same_dtype(dtype, ta.dtype):
        raise InvalidArgumentError(
            f"TensorArray dtype is {_dtname(ta.dtype)} but Op requested dtype "
            f"{_dtname(dtype)}.")


def _check_written_dtype(ta: TensorArray, value: np.ndarray) -> None:
    if not _same_dtype(value.dtype, ta.dtype):
        raise InvalidArgumentError(
            f"TensorArray dtype is {_dtname(ta.dtype)} but Op is trying to write dtype "
            f"{_dtname(value.dtype)}.")


# --- TensorArray kernels -------------------------------------------------------------------

@kernel("TensorArrayV3", cheap=True)
def tensor_array_v3(ctx: KernelContext, size: np.ndarray) -> tuple[TensorArrayHandle,
                                                                    np.ndarray]:
    n = _scalar_int(size, "TensorArray size")
    if n < 0:
        raise InvalidArgumentError("Size should be >= 0.")
    a = ctx.attrs
    key = _new_id()
    name = f"{a.get('tensor_array_name') or ctx.node}_{key}"
    ta = TensorArray(name, a["dtype"], n, _norm_partial(a.get("element_shape")),
                     bool(a.get("identical_element_shapes", False)),
                     bool(a.get("dynamic_size", False)), bool(a.get("clear_after_read", True)))
    res = step_resources(ctx.step)
    with res.lock:
        res.arrays[key] = ta
    return TensorArrayHandle(key, name), np.zeros((), np.float32)


def _grad(ctx: KernelContext, handle: Any, shape_to_prepend: Shape | None
          ) -> tuple[TensorArrayHandle, np.ndarray]:
    fwd = _array(ctx, handle)
    source = ctx.attrs["source"]
    res = _container(ctx, handle)
    # Under the container lock so that concurrent GradV3 nodes for one (array, source)
    # create one gradient array between them.
    with res.lock:
        existing = res.grads.get((handle.key, source))
        if existing is not None:
            return existing, np.zeros((), np.float32)
        key = _new_id()
        name = f"{handle.name}@{source}"
        grad = fwd.make_gradient(name, shape_to_prepend)
        gh = TensorArrayHandle(key, name)
        res.arrays[key] = grad
        res.grads[(handle.key, source)] = gh
    return gh, np.zeros((), np.float32)


@kernel("TensorArrayGradV3", cheap=True)
def tensor_array_grad_v3(ctx: KernelContext, handle: Any, flow_in: np.ndarray
                         ) -> tuple[TensorArrayHandle, np.ndarray]:
    return _grad(ctx, handle, None)


@kernel("TensorArrayGradWithShape", cheap=True)
def tensor_array_grad_with_shape(ctx: KernelContext, handle: Any, flow_in: np.ndarray,
                                 shape_to_prepend: np.ndarray
                                 ) -> tuple[TensorArrayHandle, np.ndarray]:
    prefix = _vector(shape_to_prepend, "shape_to_prepend must be a vector, got shape: ")
    if np.any(prefix < 0):
        raise InvalidArgumentError(f"Dimension -1 must be >= 0 in shape_to_prepend {prefix}")
    return _grad(ctx, handle, tuple(int(d) for d in prefix))


@kernel("TensorArrayWriteV3", cheap=True)
def tensor_array_write_v3(ctx: KernelContext, handle: Any, index: np.ndarray,
                          value: np.ndarray, flow_in: np.ndarray) -> np.ndarray:
    i = _scalar_int(index, "TensorArray index")
    ta = _array(ctx, handle)
    _check_written_dtype(ta, value)
    ta.write(i, value)
    return _flow(flow_in)


@kernel("TensorArrayReadV3", cheap=True)
def tensor_array_read_v3(ctx: KernelContext, handle: Any, index: np.ndarray,
                         flow_in: np.ndarray) -> np.ndarray:
    i = _scalar_int(index, "TensorArray index")
    ta = _array(ctx, handle)
    _check_requested_dtype(ta, ctx.attrs["dtype"])
    return ta.read(i)


@kernel("TensorArrayGatherV3")
def tensor_array_gather_v3(ctx: KernelContext, handle: Any, indices: np.ndarray,
                           flow_in: np.ndarray) -> np.ndarray:
    ta = _array(ctx, handle)
    _check_requested_dtype(ta, ctx.attrs["dtype"])
    elem_shape = _norm_partial(ctx.attrs.get("element_shape"))
    ta.merge_element_shape(elem_shape)
    idx = [int(i) for i in _vector(
        indices, "Expected indices to be a vector, but received shape: ")]
    if not idx:
        if not _fully_defined(elem_shape):
            raise UnimplementedError(
                f"TensorArray has size zero, but element shape {_fmt(elem_shape)} is not fully "
                "defined. Currently only static shapes are supported when packing zero-size "
                "TensorArrays.")
        return _zeros(ta.dtype, (0,) + tuple(elem_shape))  # type: ignore[arg-type]
    values = ta.read_many(idx)
    first = values[0].shape
    if not _compatible(elem_shape, first):
        raise InvalidArgumentError(
            f"TensorArray was passed element_shape {_fmt(elem_shape)} which does not match the "
            f"Tensor at index 0: {_fmt(first)}")
    for i, v in enumerate(values[1:], 1):
        if v.shape != first:
            raise InvalidArgumentError(
                f"TensorArray has inconsistent shapes.  Index 0 has shape: {_fmt(first)} but "
                f"index {i} has shape: {_fmt(v.shape)}")
    return stacked(values, 0)


@kernel("TensorArrayScatterV3")
def tensor_array_scatter_v3(ctx: KernelContext, handle: Any, indices: np.ndarray,
                            value: np.ndarray, flow_in: np.ndarray) -> np.ndarray:
    ta = _array(ctx, handle)
    _check_written_dtype(ta, value)
    if value.ndim == 0:
        raise InvalidArgumentError(
            "Input value for unpack must be at least a vector but received shape: []")
    idx = [int(i) for i in _vector(
        indices, "Expected indices to be a vector, but received shape: ")]
    if len(idx) != value.shape[0]:
        raise InvalidArgumentError(
            f"Expected len(indices) == values.shape[0], but saw: {len(idx)} vs. "
            f"{value.shape[0]}")
    ta.scatter(idx, value)  # value[i] views: stored arrays are never mutated
    return _flow(flow_in)


@kernel("TensorArrayConcatV3")
def tensor_array_concat_v3(ctx: KernelContext, handle: Any, flow_in: np.ndarray
                           ) -> tuple[np.ndarray, np.ndarray]:
    ta = _array(ctx, handle)
    _check_requested_dtype(ta, ctx.attrs["dtype"])
    except0 = _norm_partial(ctx.attrs.get("element_shape_except0"))
    n = ta.pack_or_concat_size()
    if n == 0:
        if not _fully_defined(except0):
            raise UnimplementedError(
                f"TensorArray has size zero, but element_shape_except0 {_fmt(except0)} is not "
                "fully defined. Currently only static shapes are supported when concatenating "
                "zero-size TensorArrays.")
        return (_zeros(ta.dtype, (0,) + tuple(except0)),  # type: ignore[arg-type]
                np.zeros((0,), np.int64))
    values = ta.read_many(list(range(n)))
    rest0: Shape = ()
    for i, v in enumerate(values):
        if v.ndim == 0:
            raise InvalidArgumentError(
                f"Concat saw a scalar shape at index {i} but requires at least vectors.  Did "
                "you mean to call pack?")
        if i == 0:
            rest0 = v.shape[1:]
            if not _compatible(except0, rest0):
                raise InvalidArgumentError(
                    f"TensorArray was passed element_shape_except0 {_fmt(except0)} but index 0 "
                    f"has (excepting dimension 0) shape: {_fmt(rest0)} which does not match.")
        elif v.shape[1:] != rest0:
            raise InvalidArgumentError(
                "TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) "
                f"shape: {_fmt(rest0)} but index {i} has (excepting dimension 0) shape: "
                f"{_fmt(v.shape[1:])}")
    lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
    return np.concatenate(values, axis=0), lengths


@kernel("TensorArraySplitV3")
def tensor_array_split_v3(ctx: KernelContext, handle: Any, value: np.ndarray,
                          lengths: np.ndarray, flow_in: np.ndarray) -> np.ndarray:
    ta = _array(ctx, handle)
    lens = [int(n) for n in _vector(
        lengths, "Expected lengths to be a vector, received shape: ")]
    if value.ndim == 0:
        raise InvalidArgumentError(
            "Expected value to be at least a vector, but received shape: []")
    if any(n < 0 for n in lens):
        raise InvalidArgumentError(f"Expected lengths to be non-negative, got {lens}")
    if sum(lens) != value.shape[0]:
        raise InvalidArgumentError(
            "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
            f"{sum(lens)} and value's shape is: {_fmt(value.shape)}")
    _check_written_dtype(ta, value)
    bounds = np.cumsum([0] + lens)
    pieces = [value[bounds[i]:bounds[i + 1]] for i in range(len(lens))]
    ta.split(pieces)
    return _flow(flow_in)


@kernel("TensorArraySizeV3", cheap=True)
def tensor_array_size_v3(ctx: KernelContext, handle: Any, flow_in: np.ndarray) -> np.ndarray:
    return np.array(_array(ctx, handle).size(), dtype=np.int32)


@kernel("TensorArrayCloseV3", cheap=True)
def tensor_array_close_v3(ctx: KernelContext, handle: Any) -> tuple[()]:
    _array(ctx, handle).close()
    return ()


# --- Stack kernels -------------------------------------------------------------------------

@kernel("StackV2", cheap=True)
def stack_v2(ctx: KernelContext, max_size: np.ndarray) -> StackHandle:
    if np.ndim(max_size) != 0:
        raise InvalidArgumentError(
            f"Stack size must be a scalar, but had shape: {_fmt(np.shape(max_size))}")
    key = _new_id()
    name = f"{ctx.attrs.get('stack_name') or ctx.node}_{key}"
    st = Stack(name, ctx.attrs["elem_type"], int(max_size))
    res = step_resources(ctx.step)
    with res.lock:
        res.stacks[key] = st
    return StackHandle(key, name)


@kernel("StackPushV2", cheap=True)
def stack_push_v2(ctx: KernelContext, handle: Any, elem: np.ndarray) -> np.ndarray:
    st = _stack(ctx, handle)
    # a resource (a TensorArray handle the v1 gradient of a loop saves per iteration) has
    # no numpy dtype: the stack's DT_RESOURCE elem_type takes it as it is
    have = getattr(elem, "dtype", None)
    if not (isinstance(elem, np.ndarray) or isinstance(have, np.dtype)):
        if isinstance(st.elem_type, np.dtype):
            raise InvalidArgumentError(
                f"Must have type {_dtname(st.elem_type)} but got {type(elem).__name__}")
    elif not _same_dtype(have, st.elem_type):
        raise InvalidArgumentError(
            f"Must have type {_dtname(st.elem_type)} but got {_dtname(have)}")
    st.push(elem)
    return elem


@kernel("StackPopV2", cheap=True)
def stack_pop_v2(ctx: KernelContext, handle: Any) -> np.ndarray:
    st = _stack(ctx, handle)
    want = ctx.attrs.get("elem_type")
    if want is not None and not _same_dtype(want, st.elem_type):
        raise InvalidArgumentError(
            f"Stack[{st.name}] holds {_dtname(st.elem_type)} but Op requested "
            f"{_dtname(want)}")
    return st.pop()


@kernel("StackCloseV2", cheap=True)
def stack_close_v2(ctx: KernelContext, handle: Any) -> tuple[()]:
    _stack(ctx, handle).close()
    return ()


# --- legacy TensorArray ops (V1 ref handles, V2 string handles) and v1 stacks ---------------
# TensorFlow runs them with its V3 kernels; only their signatures differ: no flow output on
# the creation and gradient ops, and the handle is a ref (V1) or a string vector
# [container, name] (V2). TensorArrayPack / Unpack are Gather / Scatter of every element.
#
# Only their creation and gradient ops are stateful in the OpDefs, so the others run with a
# context shared by every run (no ``ctx.step``). Their handles therefore lead to the run's
# container themselves: a V1 handle object carries it; a V2 string names a handle in a
# process-wide table of weak references, kept alive by the run's state (so a V2 handle that
# outlives its run is a NotFoundError, as in TensorFlow).

_TA_CONTAINER, _GRAD_CONTAINER = "_tensor_arrays", "_tensor_array_grads"
LEGACY_KEY = "__dfg_legacy_tensor_array_handles__"


@dataclass(frozen=True)
class LegacyTensorArrayHandle(TensorArrayHandle):
    """A V1/V2 TensorArray's handle: the V3 key and name, and its run's container."""

    res: StepResources = field(compare=False, repr=False)


@dataclass(frozen=True)
class LegacyStackHandle(StackHandle):
    """A v1 stack's handle: the V2 key and name, and its run's container."""

    res: StepResources = field(compare=False, repr=False)


_named: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_named_lock = threading.Lock()


def _legacy_of(ctx: KernelContext, h: TensorArrayHandle) -> LegacyTensorArrayHandle:
    """The legacy handle of an array just made by a (stateful) creation or gradient op;
    the run's state keeps it alive for the run."""
    res = step_resources(ctx.step)
    lh = LegacyTensorArrayHandle(h.key, h.name, res)
    with res.lock:
        ctx.step.setdefault(LEGACY_KEY, []).append(lh)
    return lh


def _string_handle(lh: LegacyTensorArrayHandle, container: str) -> np.ndarray:
    with _named_lock:
        _named[(container, lh.name)] = lh
    return np.array([container.encode(), lh.name.encode()], dtype=object)


def _handle_strings(handle: np.ndarray) -> tuple[str, str]:
    if handle.size != 2:
        raise InvalidArgumentError(
            f"Tensor array handle must be 2-element vector, but had shape: "
            f"{_fmt(handle.shape)}")
    a, b = (x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)
            for x in handle.reshape(-1).tolist())
    return a, b


def _legacy_handle(handle: Any) -> LegacyTensorArrayHandle:
    """A V1 (object) or V2 (string vector) handle as the V3 kernels take it."""
    if isinstance(handle, LegacyTensorArrayHandle):
        return handle
    if isinstance(handle, np.ndarray) and handle.dtype == object:
        key = _handle_strings(handle)
        with _named_lock:
            lh = _named.get(key)
        if lh is None:
            raise NotFoundError(f"Resource {key[0]}/{key[1]} does not exist (TensorArrays live "
                                "for one run only)")
        return lh
    raise InvalidArgumentError(f"expected a TensorArray handle, found {type(handle).__name__}")


@kernel("TensorArray", cheap=True)
def tensor_array_v1(ctx: KernelContext, size: np.ndarray) -> LegacyTensorArrayHandle:
    return _legacy_of(ctx, tensor_array_v3(ctx, size)[0])


@kernel("TensorArrayV2", cheap=True)
def tensor_array_v2(ctx: KernelContext, size: np.ndarray) -> np.ndarray:
    return _string_handle(_legacy_of(ctx, tensor_array_v3(ctx, size)[0]), _TA_CONTAINER)


def _grad_legacy(ctx: KernelContext, handle: Any) -> LegacyTensorArrayHandle:
    if isinstance(handle, np.ndarray):
        container = _handle_strings(handle)[0]
        if container != _TA_CONTAINER:
            raise InvalidArgumentError(f"Input container should be '{_TA_CONTAINER}',  but "
                                       f"received '{container}'")
    lh = _legacy_handle(handle)
    return _legacy_of(ctx, _grad(ctx, lh, None)[0])


@kernel("TensorArrayGrad", cheap=True)
def tensor_array_grad_v1(ctx: KernelContext, handle: Any, flow_in: np.ndarray
                         ) -> LegacyTensorArrayHandle:
    return _grad_legacy(ctx, handle)


@kernel("TensorArrayGradV2", cheap=True)
def tensor_array_grad_v2(ctx: KernelContext, handle: Any, flow_in: np.ndarray) -> np.ndarray:
    return _string_handle(_grad_legacy(ctx, handle), _GRAD_CONTAINER)


def _legacy(v3: Any, cheap: bool | None, *ops: str) -> None:
    """Register ``ops`` as the V3 kernel ``v3``, reached through a legacy handle."""
    def run(ctx: KernelContext, handle: Any, *rest: Any) -> Any:
        lh = _legacy_handle(handle)
        return v3(ctx, lh, *rest)

    kernel(*ops, cheap=cheap)(run)


_legacy(tensor_array_write_v3, True, "TensorArrayWrite", "TensorArrayWriteV2")
_legacy(tensor_array_read_v3, True, "TensorArrayRead", "TensorArrayReadV2")
_legacy(tensor_array_gather_v3, None, "TensorArrayGather", "TensorArrayGatherV2")
_legacy(tensor_array_scatter_v3, None, "TensorArrayScatter", "TensorArrayScatterV2")
_legacy(tensor_array_concat_v3, None, "TensorArrayConcat", "TensorArrayConcatV2")
_legacy(tensor_array_split_v3, None, "TensorArraySplit", "TensorArraySplitV2")
_legacy(tensor_array_size_v3, True, "TensorArraySize", "TensorArraySizeV2")
_legacy(tensor_array_close_v3, True, "TensorArrayClose", "TensorArrayCloseV2")


@kernel("TensorArrayPack")
def tensor_array_pack(ctx: KernelContext, handle: Any, flow_in: np.ndarray) -> np.ndarray:
    lh = _legacy_handle(handle)
    n = _array(ctx, lh).pack_or_concat_size()
    return tensor_array_gather_v3(ctx, lh, np.arange(n, dtype=np.int32), flow_in)


@kernel("TensorArrayUnpack")
def tensor_array_unpack(ctx: KernelContext, handle: Any, value: np.ndarray,
                        flow_in: np.ndarray) -> np.ndarray:
    lh = _legacy_handle(handle)
    ta = _array(ctx, lh)
    _check_written_dtype(ta, value)
    if value.ndim == 0:
        raise InvalidArgumentError(
            "Input value for unpack must be at least a vector but received shape: []")
    n = value.shape[0]
    size = ta.size()
    if ta.dynamic_size and size < n:   # it grows to fit, as a scatter would
        size = n
    if n != size:
        raise InvalidArgumentError(
            f"Expected len(tensor_array) == element_shape[0], but saw: {size} vs. {n}")
    return tensor_array_scatter_v3(ctx, lh, np.arange(n, dtype=np.int32), value, flow_in)


@kernel("Stack", cheap=True)
def stack_v1(ctx: KernelContext) -> LegacyStackHandle:
    h = stack_v2(ctx, np.asarray(-1, dtype=np.int32))   # v1 stacks are unbounded
    return LegacyStackHandle(h.key, h.name, step_resources(ctx.step))


def _legacy_stack(v2: Any, op: str) -> None:
    def run(ctx: KernelContext, handle: Any, *rest: Any) -> Any:
        if not isinstance(handle, LegacyStackHandle):
            raise InvalidArgumentError(
                f"expected a stack handle, found {type(handle).__name__}")
        return v2(ctx, handle, *rest)

    kernel(op, cheap=True)(run)


_legacy_stack(stack_push_v2, "StackPush")
_legacy_stack(stack_pop_v2, "StackPop")
_legacy_stack(stack_close_v2, "StackClose")
