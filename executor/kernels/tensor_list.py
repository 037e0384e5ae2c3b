"""TensorList kernels: the variant values of TensorFlow 2 lists (``tf.TensorArray`` under
control flow v2, ``tf.map_fn``, ``tf.scan``, Keras RNNs, gradients of v2 while loops).

Value model
-----------
A TensorList is a *value*, not a resource: a :class:`TensorList` object (marked
``__dfg_resource__`` so the executor and ``invoke`` pass it on untouched; the OpDef gives
variant outputs no numpy dtype, so nothing converts it) holding an element dtype, a partial
element shape, ``max_num_elements`` and a sequence of entries, each a numpy array or ``None``
for an uninitialized element. It flows through Identity/Enter/Switch/Merge/NextIteration/Exit
like any other value. A batch of lists (``TensorListPushBackBatch``) is an object ndarray of
TensorLists.

Values are immutable from the graph's point of view: one list may be read by several
consumers and several loop iterations, so every op that "modifies" a list returns a new one.
To keep ``PushBack`` in a long loop linear, lists share an append-only store: a list is the
first ``length`` entries of its store, and pushing onto a list that ends where its store ends
appends in place (under the store's lock, so only one of two concurrent pushes onto the same
list wins the store; the other copies). Entries below any list's length are never changed.
``PopBack`` is a shorter view of the same store; ``SetItem`` copies the list of references
(never the arrays).

Shapes are tuples with ``None`` for unknown dims, or ``None`` for unknown rank. Element
dtypes are compared as TensorFlow DataTypes, so the string dtypes (object/bytes/str) are one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import InvalidArgumentError, UnimplementedError

from .array import stacked
from .registry import ArrayForm, KernelContext, declare, kernel
from .tensor_array import PartialShape, _compatible, _fmt, _fully_defined, _merge, _zeros

Entry = Any  # np.ndarray, a nested TensorList (variant elements), or None (uninitialized)


# Guards appends to every store's ``items`` (one lock for all: an append is a few
# instructions, and a recurrent loop makes a store per step, where a lock of its own cost
# 0.4 us to make)
_APPEND = threading.Lock()


class _Store:
    """Append-only entries shared by the lists that are prefixes of it.

    Invariant: ``_APPEND`` guards appends to ``items``; an entry, once stored, never changes.
    """

    __slots__ = ("items",)

    def __init__(self, items: list[Entry]) -> None:
        self.items = items


class TensorList:
    """One TensorList value: the first ``length`` entries of ``store``. Never mutated: every
    op makes a new value (a plain class with slots, not a frozen dataclass, because a
    recurrent loop makes one per step and a frozen dataclass's ``__init__`` costs 3 us).

    (No ``read`` attribute and no sequence protocol on purpose: the executor dereferences
    values having ``read``, and numpy would try to iterate a sequence.)
    """

    __dfg_resource__: ClassVar[bool] = True
    __slots__ = ("element_dtype", "element_shape", "max_num_elements", "store", "length")

    def __init__(self, element_dtype: Any, element_shape: PartialShape,
                 max_num_elements: int, store: _Store, length: int) -> None:
        self.element_dtype = element_dtype    # numpy dtype, or a DataType number numpy lacks
        self.element_shape = element_shape
        self.max_num_elements = max_num_elements
        self.store = store
        self.length = length

    @staticmethod
    def make(element_dtype: Any, element_shape: PartialShape, entries: list[Entry],
             max_num_elements: int = -1) -> TensorList:
        """A list owning ``entries`` (the caller gives up the Python list)."""
        return TensorList(element_dtype, element_shape, max_num_elements, _Store(entries),
                          len(entries))

    def entries(self) -> list[Entry]:
        """A new Python list of the entries (references, not copies of arrays)."""
        return self.store.items[:self.length]

    def entry(self, i: int) -> Entry:
        return self.store.items[i]

    def derive(self, entries: list[Entry], element_shape: Any = ...) -> TensorList:
        """A list like this one with other entries (and optionally another shape)."""
        return TensorList.make(self.element_dtype,
                               self.element_shape if element_shape is ... else element_shape,
                               entries, self.max_num_elements)

    def pushed(self, value: Entry) -> TensorList:
        st = self.store
        with _APPEND:
            if len(st.items) == self.length:   # this list is the tip of its store: share it
                st.items.append(value)
                return TensorList(self.element_dtype, self.element_shape,
                                  self.max_num_elements, st, self.length + 1)
        items = self.entries()
        items.append(value)
        return self.derive(items)

    def popped(self) -> TensorList:
        return TensorList(self.element_dtype, self.element_shape, self.max_num_elements,
                          self.store, self.length - 1)

    def as_array(self) -> np.ndarray:
        """This value as a 0-d object array (the form of a variant scalar tensor)."""
        a = np.empty((), dtype=object)
        a[()] = self
        return a

    def __repr__(self) -> str:
        return (f"TensorList(element_dtype={_dtname(self.element_dtype)}, element_shape="
                f"{_fmt(self.element_shape)}, length={self.length})")


# --- helpers ---------------------------------------------------------------------------------

def _tf_dtype(dt: Any) -> int:
    """A dtype as TensorFlow's DataType number (every string representation is DT_STRING)."""
    if isinstance(dt, (int, np.integer)) and not isinstance(dt, bool):
        return D.base(int(dt))
    return D.from_numpy(dt)


def _dtname(dt: Any) -> str:
    try:
        return D.name(_tf_dtype(dt))
    except Exception:  # noqa: BLE001 - only for messages
        return str(dt)


def _same(a: Any, b: Any) -> bool:
    # equal NumPy dtypes are one DataType (a loop's every get and set asks: ~1 us saved)
    if a is b or (isinstance(a, np.dtype) and isinstance(b, np.dtype) and a == b):
        return True
    try:
        return _tf_dtype(a) == _tf_dtype(b)
    except Exception:  # noqa: BLE001 - an unknown dtype equals only itself
        return a == b


# An element is a tensor or a nested list; a tensor may be a numpy scalar (a kernel's 0-d
# result, as the executor keeps them), not only an ndarray
_TENSOR = (np.ndarray, np.generic)


def _is_variant(dt: Any) -> bool:
    return not isinstance(dt, np.dtype) and _same(dt, D.DT_VARIANT)


def _dtype_of(v: Any) -> Any:
    return v.dtype if isinstance(v, _TENSOR) else D.DT_VARIANT


def _shape_of(v: Any) -> tuple[int, ...]:
    return tuple(v.shape) if isinstance(v, _TENSOR) else ()


def as_list(x: Any) -> TensorList | None:
    """``x`` as a TensorList if it is one (or a 0-d object array holding one), else None."""
    if x.__class__ is TensorList or isinstance(x, TensorList):
        return x
    if isinstance(x, np.ndarray) and x.dtype == object and x.shape == () \
            and isinstance(x[()], TensorList):
        return x[()]
    return None


def _list(x: Any) -> TensorList:
    tl = as_list(x)
    if tl is None:
        saw = type(x).__name__ if not isinstance(x, np.ndarray) else \
            f"a {_dtname(x.dtype)} tensor of shape {_fmt(x.shape)}"
        raise InvalidArgumentError(f"Input handle is not a list. Saw: '{saw}'")
    return tl


def _check_op_dtype(ctx: KernelContext, tl: TensorList) -> None:
    _check_element_dtype(ctx.attrs["element_dtype"], tl)


def _check_element_dtype(want: Any, tl: TensorList) -> None:
    """The op's element_dtype is the list's (by identity first: a loop asks every step)."""
    if tl.element_dtype is not want and not _same(want, tl.element_dtype):
        raise InvalidArgumentError(
            f"Invalid data types; op elements {_dtname(want)} but list elements "
            f"{_dtname(tl.element_dtype)}")


def _shape_from_tensor(t: Any, what: str = "element_shape") -> PartialShape:
    """TensorFlow's TensorShapeFromTensor: -1 (scalar) is an unknown rank; a vector holds
    dims, -1 for an unknown one."""
    a = t if t.__class__ is np.ndarray else np.asarray(t)
    if a.dtype.type not in _INT_SCALARS:
        raise InvalidArgumentError(
            f"Expected an int32 or int64 shape tensor for {what}; found {_dtname(a.dtype)}")
    if a.ndim == 0:
        if int(a) != -1:
            raise InvalidArgumentError(
                "The only valid scalar shape tensor is the fully unknown shape specified as "
                f"-1, got {int(a)}")
        return None
    if a.ndim != 1:
        raise InvalidArgumentError(
            f"Shape tensor {what} must be a scalar or a vector, got shape {_fmt(a.shape)}")
    dims = a.tolist()
    if any(d < -1 for d in dims):
        raise InvalidArgumentError(f"Dimension {min(dims)} must be >= -1")
    return tuple(None if d == -1 else d for d in dims)


def _merge_shapes(a: PartialShape, b: PartialShape) -> PartialShape:
    return _merge(a, b)  # raises "Incompatible shapes during merge: ..."


def _element_shape(tl: TensorList, t: Any) -> PartialShape:
    """TensorFlow's GetElementShapeFromInput: the input shape merged with the list's."""
    return _merge_shapes(_shape_from_tensor(t), tl.element_shape)


# a loop's counter as compiled programs keep it (a NumPy scalar: codegen's scalar forms)
_INT_SCALARS = frozenset({np.int32, np.int64})


def _scalar_int(x: Any, what: str) -> int:
    if x.__class__ is np.ndarray and x.ndim == 0 or x.__class__ in _INT_SCALARS:
        return int(x)
    a = np.asarray(x)
    if a.ndim != 0:
        raise InvalidArgumentError(f"{what} must be a scalar, got shape {_fmt(a.shape)}")
    return int(a)


def _int_vector(x: Any, what: str) -> list[int]:
    a = np.asarray(x)
    if a.ndim != 1:
        raise InvalidArgumentError(
            f"Expected {what} to be a vector, but received shape: {_fmt(a.shape)}")
    return [int(i) for i in a]


def _zeros_entry(dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    if _is_variant(dtype):
        raise UnimplementedError(
            "Reading an uninitialized element of a list of variant elements is not supported")
    return _zeros(dtype, shape)


def _pack(dtype: Any, shape: tuple[int, ...], values: list[Entry]) -> np.ndarray:
    """Stack ``values`` (None: zeros of ``shape``) into one array of ``dtype``."""
    if _is_variant(dtype):
        out = np.empty((len(values),) + shape, dtype=object)
        for i, v in enumerate(values):
            if v is None:
                raise UnimplementedError(
                    "Stacking uninitialized elements of a list of variant elements is not "
                    "supported")
            out[i] = v
        return out
    if not values:
        return _zeros(dtype, (0,) + shape)
    zeros = None
    parts = []
    for v in values:
        if v is None:
            if zeros is None:
                zeros = _zeros(dtype, shape)
            v = zeros
        parts.append(v)
    out = stacked(parts, 0)
    want = np.dtype(dtype)
    return out if out.dtype == want or want.kind == "O" else out.astype(want)


def _rows(t: np.ndarray) -> list[np.ndarray]:
    # views of one input array: arrays flowing through the graph are never mutated
    if t.ndim >= 2:
        return list(t)     # the same views, made in C (a sequence's 40 steps: 15 -> 3 us)
    return [t[i, ...] for i in range(t.shape[0])]   # 0-d arrays, never numpy scalars


def _at_least_vector(t: Any,
                     message: str = "Tensor must be at least a vector, but saw shape: "
                     ) -> np.ndarray:
    a = np.asarray(t)
    if a.ndim < 1:
        raise InvalidArgumentError(f"{message}{_fmt(a.shape)}")
    return a


# --- creation ------------------------------------------------------------------------------

@kernel("EmptyTensorList", cheap=True)
def empty_tensor_list(ctx: KernelContext, element_shape: np.ndarray,
                      max_num_elements: np.ndarray) -> TensorList:
    a = np.asarray(max_num_elements)
    if a.ndim != 0:
        raise InvalidArgumentError(
            f"max_num_elements expected to be a scalar but got shape: {_fmt(a.shape)}")
    m = int(a)  # TensorFlow takes any negative value as "no limit"
    return TensorList.make(ctx.attrs["element_dtype"], _shape_from_tensor(element_shape), [],
                           m)


@kernel("TensorListReserve", cheap=True)
def tensor_list_reserve(ctx: KernelContext, element_shape: np.ndarray,
                        num_elements: np.ndarray) -> TensorList:
    n = _scalar_int(num_elements, "num_elements")
    if n < 0:
        raise InvalidArgumentError(
            f"The num_elements to reserve must be a non negative number, but got {n}")
    return TensorList.make(ctx.attrs["element_dtype"], _shape_from_tensor(element_shape),
                           [None] * n)


@kernel("TensorListFromTensor")
def tensor_list_from_tensor(ctx: KernelContext, tensor: np.ndarray,
                            element_shape: np.ndarray) -> TensorList:
    shape = _shape_from_tensor(element_shape)
    t = _at_least_vector(tensor)
    if not _compatible(shape, t.shape[1:]):
        raise InvalidArgumentError(
            f"Specified a list with shape {_fmt(shape)} from a tensor with shape "
            f"{_fmt(t.shape[1:])}")
    dtype = t.dtype
    if dtype.kind == "O" and _is_variant(ctx.attrs.get("element_dtype")):
        dtype = ctx.attrs["element_dtype"]   # an object array of variants (ragged rows)
    return TensorList.make(dtype, shape, _rows(t))


@kernel("TensorListSplit")
def tensor_list_split(ctx: KernelContext, tensor: np.ndarray, element_shape: np.ndarray,
                      lengths: np.ndarray) -> TensorList:
    shape = _shape_from_tensor(element_shape)
    if shape is not None and len(shape) < 1:
        raise InvalidArgumentError(
            "TensorListSplit requires element_shape to be at least of rank 1, but saw: "
            f"{_fmt(shape)}")
    t = _at_least_vector(tensor)
    if shape is not None and not _compatible(shape[1:], t.shape[1:]):
        raise InvalidArgumentError(
            f"tensor shape {_fmt(t.shape)} is not compatible with element_shape {_fmt(shape)}")
    lens = _int_vector(lengths, "lengths")
    pieces, start = [], 0
    for n in lens:
        if n < 0:
            raise InvalidArgumentError(f"Invalid value in lengths: {n}")
        end = start + n
        if end > t.shape[0]:
            raise InvalidArgumentError(
                f"Attempting to slice [{start}, {end}] from tensor with length {t.shape[0]}")
        pieces.append(t[start:end])
        start = end
    if start != t.shape[0]:
        raise InvalidArgumentError(
            f"Unused values in tensor. Length of tensor: {t.shape[0]} Values used: {start}")
    return TensorList.make(t.dtype, shape, pieces)


def _scatter_new(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                 element_shape: np.ndarray, num_elements: int) -> TensorList:
    shape = _shape_from_tensor(element_shape)
    if num_elements < -1:
        raise InvalidArgumentError(
            f"TensorListScatter expects num_elements >= -1, found: {num_elements}")
    t = _at_least_vector(tensor)
    if not _compatible(shape, t.shape[1:]):
        raise InvalidArgumentError(
            f"Specified a list with shape {_fmt(shape)} from a tensor with shape "
            f"{_fmt(t.shape[1:])}")
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    if len(idx) != t.shape[0]:
        raise InvalidArgumentError(
            f"Invalid number of rows in input tensor. Expected: {len(idx)} Actual: "
            f"{t.shape[0]}")
    for i in idx:
        if i < 0:
            raise InvalidArgumentError(
                "Indices in TensorListScatter must all be non-negative.")
        if num_elements != -1 and i >= num_elements:
            raise InvalidArgumentError(
                f"TensorListScatter: Trying to scatter at index {i} in list with size "
                f"{num_elements}")
    entries: list[Entry] = [None] * max(max(idx, default=-1) + 1, num_elements)
    for k, i in enumerate(idx):   # a repeated index keeps its last row, as in TensorFlow
        entries[i] = t[k, ...]
    return TensorList.make(t.dtype, shape, entries)


@kernel("TensorListScatter")
def tensor_list_scatter(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                        element_shape: np.ndarray) -> TensorList:
    return _scatter_new(ctx, tensor, indices, element_shape, -1)


@kernel("TensorListScatterV2")
def tensor_list_scatter_v2(ctx: KernelContext, tensor: np.ndarray, indices: np.ndarray,
                           element_shape: np.ndarray, num_elements: np.ndarray) -> TensorList:
    return _scatter_new(ctx, tensor, indices, element_shape,
                        _scalar_int(num_elements, "num_elements"))


# --- reading -------------------------------------------------------------------------------

@kernel("TensorListLength", cheap=True)
def tensor_list_length(ctx: KernelContext, input_handle: Any) -> np.ndarray:
    return np.array(_list(input_handle).length, dtype=np.int32)


@kernel("TensorListElementShape", cheap=True)
def tensor_list_element_shape(ctx: KernelContext, input_handle: Any) -> np.ndarray:
    shape = _list(input_handle).element_shape
    dt = ctx.attrs.get("shape_type")
    dt = np.dtype(np.int32) if dt is None else dt
    if shape is None:
        return np.array(-1, dtype=dt)
    return np.array([-1 if d is None else d for d in shape], dtype=dt)


def _fill_unknown_from_entries(shape: PartialShape, entries: Sequence[Entry]) -> PartialShape:
    """Merge a not fully defined shape with the shapes of the initialized entries."""
    if _fully_defined(shape):
        return shape
    for v in entries:
        if v is not None:
            have = _shape_of(v)
            if have != shape:       # once merged, equal entries have nothing to add
                shape = _merge_shapes(shape, have)
    return shape


def _get_item(input_handle: Any, index: Any, element_shape: Any, element_dtype: Any) -> Any:
    """TensorListGetItem's core: the kernel and its array form both run it."""
    tl = _list(input_handle)
    _check_element_dtype(element_dtype, tl)
    i = _scalar_int(index, "index")
    if not 0 <= i < tl.length:
        raise InvalidArgumentError(
            f"Trying to access element {i} in a list with {tl.length} elements.")
    v = tl.store.items[i]
    if v is not None:
        return v
    # Uninitialized: zeros of the element shape, completed from the other elements if need be.
    shape = _fill_unknown_from_entries(_element_shape(tl, element_shape), tl.entries())
    if not _fully_defined(shape):
        raise InvalidArgumentError(
            "Trying to read an uninitialized tensor but element_shape is not fully defined: "
            f"{_fmt(shape)} and no list element is set.")
    return _zeros_entry(tl.element_dtype, tuple(shape))  # type: ignore[arg-type]


def _get_item_form(attrs: Any) -> Any:
    """TensorListGetItem's array form (a recurrent loop reads its input list every step):
    the kernel's core, without the kernel call around it."""
    element_dtype = attrs["element_dtype"]

    def get_item(input_handle: Any, index: Any, element_shape: Any) -> Any:
        return _get_item(input_handle, index, element_shape, element_dtype)

    return get_item


@kernel("TensorListGetItem", cheap=True, array=ArrayForm(
    _get_item_form, frozenset({D.DT_VARIANT, D.DT_INT32})))
def tensor_list_get_item(ctx: KernelContext, input_handle: Any, index: np.ndarray,
                         element_shape: np.ndarray) -> Any:
    return _get_item(input_handle, index, element_shape, ctx.attrs["element_dtype"])


@kernel("TensorListStack")
def tensor_list_stack(ctx: KernelContext, input_handle: Any,
                      element_shape: np.ndarray) -> np.ndarray:
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    want = int(ctx.attrs.get("num_elements", -1))
    if want != -1 and tl.length != want:
        raise InvalidArgumentError(
            f"Operation expected a list with {want} elements but got a list with "
            f"{tl.length} elements.")
    shape = _element_shape(tl, element_shape)
    if not _fully_defined(shape) and tl.length == 0:
        raise InvalidArgumentError(
            "Tried to stack elements of an empty list with non-fully-defined element_shape: "
            f"{_fmt(shape)}")
    entries = tl.entries()
    shape = _fill_unknown_from_entries(shape, entries)
    if not _fully_defined(shape):
        raise InvalidArgumentError(
            "Tried to stack list which only contains uninitialized tensors and has a "
            f"non-fully-defined element_shape: {_fmt(shape)}")
    return _pack(tl.element_dtype, tuple(shape), entries)  # type: ignore[arg-type]


@kernel("TensorListGather")
def tensor_list_gather(ctx: KernelContext, input_handle: Any, indices: np.ndarray,
                       element_shape: np.ndarray) -> np.ndarray:
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    idx = [int(i) for i in np.asarray(indices).reshape(-1)]
    shape = _element_shape(tl, element_shape)
    if not _fully_defined(shape) and not idx:
        raise InvalidArgumentError(
            f"Tried to gather 0-elements from a list with non-fully-defined shape: "
            f"{_fmt(shape)}")
    for i in idx:
        if not 0 <= i < tl.length:
            raise InvalidArgumentError(
                f"Trying to gather element {i} in a list with {tl.length} elements.")
    picked = [tl.entry(i) for i in idx]
    shape = _fill_unknown_from_entries(shape, picked)
    if not _fully_defined(shape):
        raise InvalidArgumentError(
            "Tried to gather uninitialized tensors from a list with non-fully-defined "
            f"element_shape: {_fmt(shape)}")
    return _pack(tl.element_dtype, tuple(shape), picked)  # type: ignore[arg-type]


def _concat(tl: TensorList, except0: PartialShape, first_dim: int | None,
            leading_dims: list[int] | None) -> tuple[np.ndarray, np.ndarray]:
    """TensorListConcat(V2): ``leading_dims`` is None for the first version, which cannot
    size uninitialized elements except from the other elements."""
    if tl.length == 0 and not _fully_defined(except0):
        raise InvalidArgumentError(
            "All except the first dimension must be fully defined when concating an empty "
            f"tensor list. element_shape: {_fmt(except0)}")
    entries = tl.entries()
    # Check the elements against the shape and each other; infer a common first dim.
    known_first = first_dim is not None
    inferred, consistent = first_dim, not known_first
    for i, v in enumerate(entries):
        if v is None:
            continue
        s = _shape_of(v)
        if len(s) < 1:
            raise InvalidArgumentError(
                f"Concat saw a scalar shape at index {i} but requires at least vectors.")
        except0 = _merge_shapes(except0, s[1:])
        if known_first and first_dim != s[0]:
            raise InvalidArgumentError(
                "First entry of element_shape input does not match the first dim of list "
                f"element at index: {i} Expected: {first_dim} Actual: {s[0]}")
        if consistent:
            if inferred is None:
                inferred = s[0]
            elif inferred != s[0]:
                inferred, consistent = None, False
    first_dim = inferred
    if not _fully_defined(except0):
        raise InvalidArgumentError(
            "Trying to concat list with only uninitialized tensors but "
            f"element_shape_except_first_dim is not fully defined: {_fmt(except0)}")
    rest = tuple(except0)  # type: ignore[arg-type]
    lengths = []
    for i, v in enumerate(entries):
        if v is not None:
            lengths.append(_shape_of(v)[0])
        elif (leading_dims is None or i >= len(leading_dims)) and first_dim is not None:
            lengths.append(first_dim)
        elif leading_dims is None:
            raise InvalidArgumentError(
                "Concating lists with uninitialized tensors is not supported in this version "
                "of TensorListConcat. Consider updating your GraphDef to run the newer "
                "version.")
        elif i >= len(leading_dims):
            raise InvalidArgumentError(
                f"List contains uninitialized tensor at index {i} but leading_dims has only "
                f"{len(leading_dims)} elements.")
        else:
            lengths.append(leading_dims[i])
    dtype = tl.element_dtype
    parts = [v if v is not None else _zeros_entry(dtype, (n,) + rest)
             for v, n in zip(entries, lengths)]
    out = np.concatenate(parts, axis=0) if parts else _zeros_entry(dtype, (0,) + rest)
    if isinstance(dtype, np.dtype) and out.dtype != dtype and dtype.kind != "O":
        out = out.astype(dtype)
    return out, np.array(lengths, dtype=np.int64)


@kernel("TensorListConcat")
def tensor_list_concat(ctx: KernelContext, input_handle: Any) -> tuple[np.ndarray, np.ndarray]:
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    attr_shape = ctx.attrs.get("element_shape")
    except0: PartialShape = None if attr_shape is None else tuple(attr_shape)[1:]
    if tl.element_shape is not None and len(tl.element_shape) >= 1:
        # TensorFlow's first version ignores what the list knows; using it only makes
        # lists with a fully defined element shape concat where they otherwise could not.
        except0 = _merge_shapes(except0, tl.element_shape[1:])
    return _concat(tl, except0, None, None)


@kernel("TensorListConcatV2")
def tensor_list_concat_v2(ctx: KernelContext, input_handle: Any, element_shape: np.ndarray,
                          leading_dims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    shape = _element_shape(tl, element_shape)
    if shape is not None and len(shape) < 1:
        raise InvalidArgumentError(
            "Concat requires elements to be at least vectors, found scalars instead.")
    first = None if shape is None else shape[0]
    except0 = None if shape is None else shape[1:]
    leading = [int(d) for d in np.asarray(leading_dims).reshape(-1)]
    return _concat(tl, except0, first, leading)


# --- "modifying" (each returns a new list) -------------------------------------------------

@kernel("TensorListPushBack", cheap=True)
def tensor_list_push_back(ctx: KernelContext, input_handle: Any, tensor: Any) -> TensorList:
    tl = _list(input_handle)
    want = ctx.attrs["element_dtype"]
    if not _same(want, _dtype_of(tensor)):
        raise InvalidArgumentError(
            f"Invalid data types; list elements {_dtname(want)} but tried to append "
            f"{_dtname(_dtype_of(tensor))}")
    if not _compatible(tl.element_shape, _shape_of(tensor)):
        raise InvalidArgumentError(
            "Tried to append a tensor with incompatible shape to a list. Op element shape: "
            f"{_fmt(_shape_of(tensor))} list shape: {_fmt(tl.element_shape)}")
    _check_op_dtype(ctx, tl)
    if tl.max_num_elements >= 0 and tl.length >= tl.max_num_elements:
        raise InvalidArgumentError(
            f"Tried to push item into a full list list size: {tl.length} max_num_elements: "
            f"{tl.max_num_elements}")
    return tl.pushed(tensor)


@kernel("TensorListPushBackBatch")
def tensor_list_push_back_batch(ctx: KernelContext, input_handles: Any,
                                tensor: np.ndarray) -> np.ndarray:
    want = ctx.attrs["element_dtype"]
    if not _same(want, tensor.dtype):
        raise InvalidArgumentError(
            f"Invalid data types; list elements {_dtname(want)} but tried to append "
            f"{_dtname(tensor.dtype)}")
    t = _at_least_vector(tensor, "Expected tensor to be at least a vector, but saw shape: ")
    handles = np.asarray(input_handles, dtype=object) \
        if not isinstance(input_handles, np.ndarray) else input_handles
    if handles.ndim != 1:
        raise InvalidArgumentError(
            f"Expected input_handles to be a vector, but saw shape: {_fmt(handles.shape)}")
    if t.shape[0] != handles.shape[0]:
        raise InvalidArgumentError(
            f"Expected tensor.shape[0] == input_handles.size, but saw {t.shape[0]} vs. "
            f"{handles.shape[0]}")
    lists = []
    for b, h in enumerate(handles):
        tl = as_list(h)
        if tl is None:
            raise InvalidArgumentError(
                f"Input handle at index {b} is not a list. Saw: '{type(h).__name__}'")
        if not _compatible(tl.element_shape, t.shape[1:]):
            raise InvalidArgumentError(
                f"Tried to append a tensor with incompatible shape to a list at index {b}. "
                f"Op element shape: {_fmt(t.shape[1:])} list shape: "
                f"{_fmt(tl.element_shape)}")
        if not _same(want, tl.element_dtype):
            raise InvalidArgumentError(
                f"Invalid data type at index {b}; op elements {_dtname(want)} but list "
                f"elements {_dtname(tl.element_dtype)}")
        lists.append(tl)
    out = np.empty((len(lists),), dtype=object)
    for b, tl in enumerate(lists):
        out[b] = tl.pushed(t[b, ...])
    return out


@kernel("TensorListPopBack", cheap=True)
def tensor_list_pop_back(ctx: KernelContext, input_handle: Any,
                         element_shape: np.ndarray) -> tuple[TensorList, Any]:
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    if tl.length == 0:
        raise InvalidArgumentError("Trying to pop from an empty list.")
    v = tl.entry(tl.length - 1)
    if v is None:
        shape = _element_shape(tl, element_shape)
        if not _fully_defined(shape):
            raise InvalidArgumentError(
                "Trying to read an uninitialized tensor but element_shape is not fully "
                f"defined.{_fmt(shape)}")
        v = _zeros_entry(tl.element_dtype, tuple(shape))  # type: ignore[arg-type]
    return tl.popped(), v


def _kept_set_item(dtype: Any, element_shape: Any, item_dtype: Any, item_shape: tuple
                   ) -> Any:
    """A TensorListSetItem node's ``ctx.fast`` after it set an ndarray of ``item_dtype`` and
    ``item_shape`` into a list of ``dtype`` and ``element_shape``: the same store for a list
    of the same element dtype and shape objects, an ndarray item of the same dtype and shape
    and an index in range (the checks the kernel made, answered by identity); None for
    anything else (the kernel runs and words what is wrong). A recurrent loop stores its
    output every step: 5 us through the kernel call."""
    def fast(handle: Any, index: Any, item: Any) -> TensorList | None:
        tl = handle if handle.__class__ is TensorList else None
        if tl is None or tl.element_dtype is not dtype or tl.element_shape is not element_shape \
                or item.__class__ is not np.ndarray or item.dtype is not item_dtype \
                or item.shape != item_shape:
            return None
        if index.__class__ is np.ndarray:
            if index.ndim:
                return None
        elif index.__class__ not in _INT_SCALARS:
            return None
        i = int(index)
        n = tl.length
        if i < 0 or i >= n:
            return None         # the kernel grows the list (resize) or says what is wrong
        entries = tl.store.items[:n]
        entries[i] = item
        return TensorList(dtype, element_shape, tl.max_num_elements, _Store(entries), n)
    return fast


def get_rows(input_handle: Any, start: int, count: int, element_dtype: Any) -> list | None:
    """What ``count`` TensorListGetItem calls at indices ``start``, ``start + 1``, ... give,
    when each would give a stored ndarray (a recurrent loop run natively reads its input rows
    at once, executor/recurrent.py); None when one of the calls would do anything else (fail,
    or make zeros for an unset element): the kernel then runs and does it."""
    tl = as_list(input_handle)
    if tl is None or start < 0 or start + count > tl.length or (
            tl.element_dtype is not element_dtype and not _same(element_dtype,
                                                                tl.element_dtype)):
        return None
    rows = tl.store.items[start:start + count]
    if any(r.__class__ is not np.ndarray for r in rows):
        return None
    return rows


def set_rows(element_dtype: Any, input_handle: Any, start: int, items: Sequence[Any]
             ) -> TensorList | None:
    """The list ``len(items)`` TensorListSetItem calls (of element dtype ``element_dtype``)
    make, setting ``items[k]`` at index ``start + k`` one after the other, each into the list
    the one before made: the kernel's checks, then one new list (the ones between are never
    seen). None when a call would fail or grow the list: the kernel then runs and says why."""
    tl = as_list(input_handle)
    if tl is None or start < 0 or start + len(items) > tl.length or (
            tl.element_dtype is not element_dtype and not _same(element_dtype,
                                                                tl.element_dtype)):
        return None
    for item in items:
        if item.__class__ is not np.ndarray or (
                item.dtype is not tl.element_dtype and not _same(item.dtype, tl.element_dtype)) \
                or not _compatible(tl.element_shape, item.shape):
            return None
    entries = tl.entries()
    entries[start:start + len(items)] = items
    return tl.derive(entries)


@kernel("TensorListSetItem", cheap=True, prepared=True)
def tensor_list_set_item(ctx: KernelContext, input_handle: Any, index: np.ndarray,
                         item: Any) -> TensorList:
    fast = ctx.fast
    if fast is not None:
        out = fast(input_handle, index, item)
        if out is not None:
            return out
    tl = _list(input_handle)
    _check_op_dtype(ctx, tl)
    i = _scalar_int(index, "index")
    resize = bool(ctx.attrs.get("resize_if_index_out_of_bounds", False))
    if i < 0 or (not resize and i >= tl.length):
        raise InvalidArgumentError(
            f"Trying to modify element {i} in a list with {tl.length} elements.")
    dt = item.dtype if item.__class__ is np.ndarray else _dtype_of(item)
    if dt is not tl.element_dtype and not _same(dt, tl.element_dtype):
        raise InvalidArgumentError(
            f"Invalid data types; list elements {_dtname(tl.element_dtype)} but tried to set "
            f"{_dtname(_dtype_of(item))}")
    if not _compatible(tl.element_shape, _shape_of(item)):
        raise InvalidArgumentError(
            "Tried to set a tensor with incompatible shape at a list index. Item element "
            f"shape: {_fmt(_shape_of(item))} list shape: {_fmt(tl.element_shape)}")
    entries = tl.entries()   # references only: O(length) pointers, no array copies
    if i >= len(entries):
        entries.extend([None] * (i + 1 - len(entries)))
    entries[i] = item
    if item.__class__ is np.ndarray:
        ctx.fast = _kept_set_item(tl.element_dtype, tl.element_shape, item.dtype, item.shape)
    return tl.derive(entries)


@kernel("TensorListResize", cheap=True)
def tensor_list_resize(ctx: KernelContext, input_handle: Any, size: np.ndarray) -> TensorList:
    tl = _list(input_handle)
    n = _scalar_int(size, "size")
    if n < 0:
        raise InvalidArgumentError(f"TensorListSlice expects size to be non-negative. Got: {n}")
    if n <= tl.length:
        return TensorList(tl.element_dtype, tl.element_shape, tl.max_num_elements, tl.store, n)
    return tl.derive(tl.entries() + [None] * (n - tl.length))


@kernel("TensorListScatterIntoExistingList")
def tensor_list_scatter_into_existing_list(ctx: KernelContext, input_handle: Any,
                                           tensor: np.ndarray, indices: np.ndarray
                                           ) -> TensorList:
    tl = _list(input_handle)
    if not _same(tensor.dtype, tl.element_dtype):
        raise InvalidArgumentError(
            f"Invalid data types; input tensor type: {_dtname(tensor.dtype)} list "
            f"element_type: {_dtname(tl.element_dtype)}")
    t = _at_least_vector(tensor)
    idx = _int_vector(indices, "indices")
    if len(idx) != t.shape[0]:
        raise InvalidArgumentError(
            f"Expected len(indices) == tensor.shape[0], but saw: {len(idx)} vs. {t.shape[0]}")
    if any(i < 0 for i in idx):
        raise InvalidArgumentError("Indices in TensorListScatter must all be non-negative.")
    entries = tl.entries()
    top = max(idx, default=-1) + 1
    if top > len(entries):
        entries.extend([None] * (top - len(entries)))
    for k, i in enumerate(idx):
        entries[i] = t[k, ...]
    return tl.derive(entries)


def _concat_pair(ctx: KernelContext, a: TensorList, b: TensorList, where: int) -> TensorList:
    want = ctx.attrs["element_dtype"]
    for name, tl in (("input_a", a), ("input_b", b)):
        if not _same(tl.element_dtype, want):
            raise InvalidArgumentError(
                f"{name}[{where}].dtype != element_dtype.  Saw: {_dtname(tl.element_dtype)} vs. "
                f"{_dtname(want)}")
    if a.element_shape != b.element_shape:
        raise InvalidArgumentError(
            "input_a and input_b TensorList element shapes are not identical at index "
            f"{where}.  Saw {_fmt(a.element_shape)} vs. {_fmt(b.element_shape)}")
    return a.derive(a.entries() + b.entries())


@kernel("TensorListConcatLists")
def tensor_list_concat_lists(ctx: KernelContext, input_a: Any, input_b: Any) -> Any:
    la, lb = as_list(input_a), as_list(input_b)
    if la is not None and lb is not None:
        return _concat_pair(ctx, la, lb, 0)
    xa = np.asarray(input_a, dtype=object) if la is None else la.as_array()
    xb = np.asarray(input_b, dtype=object) if lb is None else lb.as_array()
    if xa.shape != xb.shape:
        raise InvalidArgumentError(
            "Incompatible input TensorList tensor shapes: "
            f"{_fmt(xa.shape)} vs. {_fmt(xb.shape)}")
    out = np.empty(xa.shape, dtype=object)
    for k, pos in enumerate(np.ndindex(*xa.shape)):
        out[pos] = _concat_pair(ctx, _list(xa[pos]), _list(xb[pos]), k)
    return out


# --- variant support for gradients (called from the ZerosLike and AddN kernels) -------------

def zeros_like_list(x: Any) -> TensorList:
    """ZerosLike of a TensorList: same length, dtype and element shape; each initialized
    element replaced by zeros of its shape (nested lists recursively), the others left
    uninitialized."""
    tl = _list(x)
    dt = tl.element_dtype
    out: list[Entry] = []
    for v in tl.entries():
        if v is None:
            out.append(None)
        elif isinstance(v, _TENSOR):
            if v.dtype.kind in "OSU":
                raise InvalidArgumentError(
                    f"Trying to compute zeros_like for unsupported dtype {_dtname(dt)}")
            out.append(np.zeros(v.shape, v.dtype))
        else:   # a variant element (a list, an Optional cond_v2 accumulated): its own kind's
            from ..kernel_call import call_op

            out.append(call_op(None, "ZerosLike", [v]))
    return tl.derive(out)


def _add_entries(a: Entry, b: Entry) -> Entry:
    if a is None:
        return b
    if b is None:
        return a
    if not isinstance(a, _TENSOR) or not isinstance(b, _TENSOR):
        if as_list(a) is None:   # another variant (an Optional): AddN adds its kind
            from ..kernel_call import call_op

            return call_op(None, "AddN", [a, b])
        return _add_two(_list(a), _list(b))
    if a.shape != b.shape:
        raise InvalidArgumentError(
            "Trying to add two tensors with incompatible element shapes. One is "
            f"{_fmt(a.shape)} and the other is {_fmt(b.shape)}")
    if a.dtype.kind in "bOSU":
        raise InvalidArgumentError(f"Trying to add unsupported dtype {_dtname(a.dtype)}")
    return np.add(a, b)


def _add_two(a: TensorList, b: TensorList) -> TensorList:
    if not _same(a.element_dtype, b.element_dtype):
        raise InvalidArgumentError(
            "Trying to add two lists of tensors of different dtypes. One is "
            f"{_dtname(a.element_dtype)} and the other is {_dtname(b.element_dtype)}")
    try:
        shape = _merge_shapes(a.element_shape, b.element_shape)
    except InvalidArgumentError:
        raise InvalidArgumentError(
            "Trying to add two lists of tensors with incompatible element shapes. One is "
            f"{_fmt(a.element_shape)} and the other is {_fmt(b.element_shape)}") from None
    if a.length != b.length:
        raise InvalidArgumentError(
            "Trying to add two lists of tensors with different lengths. One is "
            f"{a.length} and the other is {b.length}")
    out = [_add_entries(x, y) for x, y in zip(a.entries(), b.entries())]
    return a.derive(out, element_shape=shape)


def add_n_lists(xs: Sequence[Any]) -> TensorList:
    """AddN of TensorLists: element-wise sums, left to right (uninitialized + x = x)."""
    acc = _list(xs[0])
    for x in xs[1:]:
        acc = _add_two(acc, _list(x))
    return acc


declare("ZerosLike", variant=(TensorList, lambda ctx, x: zeros_like_list(x)))
declare("AddN", "AccumulateNV2", variant=(TensorList, lambda ctx, *xs: add_n_lists(xs)))
