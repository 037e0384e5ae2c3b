"""TensorList kernels through ``invoke``, and one v1 while loop building a list run by the
Session. Expected values are math (stacks of known arrays, zeros) and TensorFlow's error
texts as TensorFlow 2.21 prints them."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from checks import same
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.kernels.registry import has_kernel, invoke
from dfg.executor.kernels.tensor_list import TensorList
from dfg.graphdef.errors import InvalidArgumentError
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.schemas import graph_pb2

F = np.dtype(np.float32)
I32 = np.dtype(np.int32)
A = {"element_dtype": F}

OPS = ("EmptyTensorList TensorListReserve TensorListFromTensor TensorListStack "
       "TensorListGetItem TensorListSetItem TensorListPushBack TensorListPushBackBatch "
       "TensorListPopBack TensorListLength TensorListElementShape TensorListConcat "
       "TensorListConcatV2 TensorListConcatLists TensorListSplit TensorListGather "
       "TensorListScatter TensorListScatterV2 TensorListScatterIntoExistingList "
       "TensorListResize").split()


def shape(*dims: int) -> np.ndarray:
    return np.array(dims, np.int32)


UNKNOWN = np.int32(-1)   # unknown rank


def empty(es=UNKNOWN, max_n=-1, dtype=F):
    return invoke("EmptyTensorList", es, np.int32(max_n), attrs={"element_dtype": dtype})


def reserve(n, es=UNKNOWN, dtype=F):
    return invoke("TensorListReserve", es, np.int32(n), attrs={"element_dtype": dtype})


def from_tensor(t, es=UNKNOWN):
    return invoke("TensorListFromTensor", np.asarray(t), es)


def push(tl, value):
    return invoke("TensorListPushBack", tl, np.asarray(value),
                  attrs={"element_dtype": np.asarray(value).dtype})


def get(tl, i, es=UNKNOWN, dtype=F):
    return invoke("TensorListGetItem", tl, np.int32(i), es, attrs={"element_dtype": dtype})


def set_item(tl, i, value, resize=False):
    value = np.asarray(value)
    return invoke("TensorListSetItem", tl, np.int32(i), value,
                  attrs={"element_dtype": value.dtype, "resize_if_index_out_of_bounds": resize})


def stack(tl, es=UNKNOWN, dtype=F, num_elements=-1):
    return invoke("TensorListStack", tl, es,
                  attrs={"element_dtype": dtype, "num_elements": num_elements})


def length(tl) -> int:
    out = invoke("TensorListLength", tl)
    assert out.dtype == np.int32 and out.shape == ()
    return int(out)


def f32(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def test_every_op_has_a_kernel():
    assert [op for op in OPS if not has_kernel(op)] == []


# --- creation and the value model --------------------------------------------------------------

def test_empty_list_is_an_opaque_value_and_push_back_returns_new_lists():
    e = empty(shape(2))
    assert isinstance(e, TensorList) and getattr(e, "__dfg_resource__", False)
    assert not hasattr(e, "read")   # the executor would dereference it
    a = push(e, f32([1, 2]))
    b = push(a, f32([3, 4]))
    assert (length(e), length(a), length(b)) == (0, 1, 2)
    same(stack(b), f32([[1, 2], [3, 4]]))
    same(stack(a), f32([[1, 2]]))


def test_push_onto_an_older_list_does_not_change_lists_made_from_it():
    a = push(push(empty(), f32([1])), f32([2]))
    b = push(a, f32([3]))        # extends a's store in place
    c = push(a, f32([30]))       # a is no longer the tip: copies
    popped, last = invoke("TensorListPopBack", b, UNKNOWN, attrs=A)
    d = push(popped, f32([300]))
    same(stack(b), f32([[1], [2], [3]]))
    same(stack(c), f32([[1], [2], [30]]))
    same(stack(d), f32([[1], [2], [300]]))
    same(stack(a), f32([[1], [2]]))
    same(last, f32([3]))


def test_concurrent_pushes_onto_one_list_each_get_their_own_list():
    base = push(empty(), f32(0))
    results: dict[int, TensorList] = {}

    def work(k: int) -> None:
        results[k] = push(base, f32(k))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, tl in results.items():
        same(stack(tl), f32([0, k]))


def test_ten_thousand_pushes_share_one_store():
    tl = empty(UNKNOWN, dtype=I32)
    for i in range(10_000):
        tl = push(tl, np.int32(i))
    assert length(tl) == 10_000
    assert len(tl.store.items) == 10_000   # appended in place, never copied
    same(stack(tl, dtype=I32), np.arange(10_000, dtype=np.int32))


def test_element_shape_input_parsing():
    with pytest.raises(InvalidArgumentError,
                       match="only valid scalar shape tensor is the fully unknown shape"):
        empty(np.int32(3))
    with pytest.raises(InvalidArgumentError, match="Dimension -2 must be >= -1"):
        empty(shape(-2))
    with pytest.raises(InvalidArgumentError, match="int32 or int64"):
        empty(f32([1]))
    with pytest.raises(InvalidArgumentError,
                       match=r"max_num_elements expected to be a scalar but got shape: \[1\]"):
        invoke("EmptyTensorList", UNKNOWN, np.array([1], np.int32), attrs=A)


def test_element_shape_output():
    unknown = invoke("TensorListElementShape", empty(), attrs={"shape_type": I32})
    same(unknown, np.array(-1, np.int32))
    partial = invoke("TensorListElementShape", empty(shape(-1, 3)),
                     attrs={"shape_type": np.dtype(np.int64)})
    same(partial, np.array([-1, 3], np.int64))
    scalar = invoke("TensorListElementShape", empty(shape()), attrs={"shape_type": I32})
    same(scalar, np.zeros((0,), np.int32))


def test_reserve_makes_uninitialized_elements_read_as_zeros_when_the_shape_is_known():
    r = reserve(3, shape(2, 1))
    assert length(r) == 3
    same(get(r, 1), np.zeros((2, 1), np.float32))
    same(stack(r), np.zeros((3, 2, 1), np.float32))
    with pytest.raises(InvalidArgumentError,
                       match="num_elements to reserve must be a non negative number, but got -1"):
        reserve(-1)


def test_from_tensor_rows_and_errors():
    t = np.arange(6, dtype=np.int64).reshape(3, 2)
    tl = from_tensor(t, shape(-1))
    assert length(tl) == 3 and tl.element_dtype == np.int64
    same(get(tl, 2, dtype=np.dtype(np.int64)), np.array([4, 5], np.int64))
    same(stack(tl, dtype=np.dtype(np.int64)), t)
    with pytest.raises(InvalidArgumentError,
                       match=r"Tensor must be at least a vector, but saw shape: \[\]"):
        from_tensor(np.float32(1))
    with pytest.raises(InvalidArgumentError,
                       match=r"Specified a list with shape \[2\] from a tensor with shape \[3\]"):
        from_tensor(np.zeros((2, 3), np.float32), shape(2))


def test_string_elements():
    tl = from_tensor(np.array([b"a", b"bc"], dtype=object))
    obj = np.dtype(object)
    same(stack(tl, dtype=obj), np.array([b"a", b"bc"], dtype=object))
    same(get(reserve(1, shape(1), dtype=obj), 0, dtype=obj), np.array([b""], dtype=object))


# --- reading -------------------------------------------------------------------------------

def test_get_item_errors():
    tl = push(push(empty(shape(2), max_n=2), f32([1, 1])), f32([2, 2]))
    for i in (2, -1):
        with pytest.raises(InvalidArgumentError,
                           match=f"Trying to access element {i} in a list with 2 elements"):
            get(tl, i)
    with pytest.raises(InvalidArgumentError,
                       match="Invalid data types; op elements int32 but list elements float32"):
        get(tl, 0, dtype=I32)


def test_get_item_uninitialized():
    r = reserve(3)
    with pytest.raises(InvalidArgumentError,
                       match="Trying to read an uninitialized tensor but element_shape is not "
                             "fully defined: <unknown> and no list element is set"):
        get(r, 0)
    same(get(r, 0, shape(2, 1)), np.zeros((2, 1), np.float32))
    r2 = set_item(r, 1, f32([1, 2, 3]))
    same(get(r2, 0), np.zeros(3, np.float32))   # shape taken from the element that is set
    same(get(r2, 1), f32([1, 2, 3]))
    with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes during merge: \[3\] "
                                                   r"vs. \[2\]"):
        get(reserve(1, shape(2)), 0, shape(3))


def test_stack():
    r2 = set_item(reserve(3), 1, f32([1, 1, 1]))
    same(stack(r2), f32([[0, 0, 0], [1, 1, 1], [0, 0, 0]]))
    with pytest.raises(InvalidArgumentError, match="Operation expected a list with 2 elements "
                                                   "but got a list with 3 elements"):
        stack(r2, num_elements=2)
    same(stack(r2, num_elements=3), f32([[0, 0, 0], [1, 1, 1], [0, 0, 0]]))
    same(stack(empty(shape(2, 3))), np.zeros((0, 2, 3), np.float32))
    same(stack(empty(), shape(2, 3)), np.zeros((0, 2, 3), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"Tried to stack elements of an empty list "
                                                   r"with non-fully-defined element_shape: "
                                                   r"\[\?,3\]"):
        stack(empty(shape(-1, 3)))
    with pytest.raises(InvalidArgumentError, match="only contains uninitialized tensors"):
        stack(reserve(2))
    with pytest.raises(InvalidArgumentError, match=r"Incompatible shapes during merge"):
        stack(push(push(empty(), f32([1])), f32([1, 2])))


def test_gather():
    tl = from_tensor(f32([[1], [2], [3]]))
    same(invoke("TensorListGather", tl, np.array([2, 0, 2], np.int32), UNKNOWN, attrs=A),
         f32([[3], [1], [3]]))
    same(invoke("TensorListGather", tl, np.zeros(0, np.int32), shape(1), attrs=A),
         np.zeros((0, 1), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"Tried to gather 0-elements from a list "
                                                   r"with non-fully-defined shape: \[\?,3\]"):
        invoke("TensorListGather", empty(shape(-1, 3)), np.zeros(0, np.int32), UNKNOWN,
               attrs=A)
    for i in (5, -1):
        with pytest.raises(InvalidArgumentError,
                           match=f"Trying to gather element {i} in a list with 3 elements"):
            invoke("TensorListGather", tl, np.array([0, i], np.int32), UNKNOWN, attrs=A)
    r = set_item(reserve(3), 2, f32([7, 8]))
    same(invoke("TensorListGather", r, np.array([0, 2], np.int32), UNKNOWN, attrs=A),
         f32([[0, 0], [7, 8]]))


def test_concat_v2():
    tl = push(push(empty(shape(-1, 2)), f32([[1, 2]])), f32([[3, 4], [5, 6]]))
    out, lengths = invoke("TensorListConcatV2", tl, UNKNOWN, np.zeros(0, np.int64), attrs=A)
    same(out, f32([[1, 2], [3, 4], [5, 6]]))
    same(lengths, np.array([1, 2], np.int64))
    # uninitialized elements: sized by leading_dims
    r = reserve(2, shape(-1, 2))
    out, lengths = invoke("TensorListConcatV2", r, shape(-1, 2), np.array([1, 3], np.int64),
                          attrs=A)
    same(out, np.zeros((4, 2), np.float32))
    same(lengths, np.array([1, 3], np.int64))
    # ... or by the first dim the initialized ones share
    mixed = set_item(reserve(3, shape(-1, 2)), 0, f32([[1, 1], [1, 1]]))
    out, lengths = invoke("TensorListConcatV2", mixed, UNKNOWN, np.zeros(0, np.int64), attrs=A)
    same(out, np.concatenate([np.ones((2, 2), np.float32), np.zeros((4, 2), np.float32)]))
    same(lengths, np.array([2, 2, 2], np.int64))
    out, lengths = invoke("TensorListConcatV2", empty(shape(-1, 2)), UNKNOWN,
                          np.zeros(0, np.int64), attrs=A)
    same(out, np.zeros((0, 2), np.float32))
    same(lengths, np.zeros(0, np.int64))


def test_concat_v2_errors():
    z = np.zeros(0, np.int64)
    with pytest.raises(InvalidArgumentError, match="All except the first dimension must be "
                                                   r"fully defined .* element_shape: \[\?\]"):
        invoke("TensorListConcatV2", empty(shape(-1, -1)), UNKNOWN, z, attrs=A)
    with pytest.raises(InvalidArgumentError, match="Concat requires elements to be at least "
                                                   "vectors, found scalars instead"):
        invoke("TensorListConcatV2", empty(shape()), UNKNOWN, z, attrs=A)
    with pytest.raises(InvalidArgumentError, match="element_shape_except_first_dim is not "
                                                   "fully defined: <unknown>"):
        invoke("TensorListConcatV2", reserve(2), UNKNOWN, z, attrs=A)
    with pytest.raises(InvalidArgumentError, match="Concat saw a scalar shape at index 0"):
        invoke("TensorListConcatV2", push(empty(), f32(1)), UNKNOWN, z, attrs=A)
    with pytest.raises(InvalidArgumentError, match="uninitialized tensor at index 1 but "
                                                   "leading_dims has only 1 elements"):
        invoke("TensorListConcatV2", reserve(2, shape(-1, 2)), UNKNOWN,
               np.array([1], np.int64), attrs=A)
    with pytest.raises(InvalidArgumentError, match="First entry of element_shape input does not"
                                                   " match the first dim of list element at "
                                                   "index: 0 Expected: 3 Actual: 1"):
        invoke("TensorListConcatV2", push(empty(), f32([1])), shape(3), z, attrs=A)


def test_concat_v1():
    tl = from_tensor(f32([[1, 2], [3, 4]]))
    out, lengths = invoke("TensorListConcat", tl, attrs={"element_dtype": F,
                                                         "element_shape": None})
    same(out, f32([1, 2, 3, 4]))
    same(lengths, np.array([2, 2], np.int64))
    with pytest.raises(InvalidArgumentError, match="not supported in this version of "
                                                   "TensorListConcat"):
        invoke("TensorListConcat", reserve(2, shape(2, 2)),
               attrs={"element_dtype": F, "element_shape": (2, 2)})


def test_length_and_pop_back():
    tl = from_tensor(f32([[1], [2]]))
    rest, last = invoke("TensorListPopBack", tl, UNKNOWN, attrs=A)
    same(last, f32([2]))
    assert length(rest) == 1 and length(tl) == 2
    _, first = invoke("TensorListPopBack", rest, UNKNOWN, attrs=A)
    same(first, f32([1]))
    with pytest.raises(InvalidArgumentError, match="Trying to pop from an empty list"):
        invoke("TensorListPopBack", empty(), UNKNOWN, attrs=A)
    _, zero = invoke("TensorListPopBack", reserve(1), shape(2), attrs=A)
    same(zero, np.zeros(2, np.float32))
    with pytest.raises(InvalidArgumentError, match="element_shape is not fully defined"):
        invoke("TensorListPopBack", reserve(1), UNKNOWN, attrs=A)


# --- "modifying" -----------------------------------------------------------------------------

def test_push_back_errors():
    e = empty(shape(2), max_n=2)
    with pytest.raises(InvalidArgumentError, match=r"Tried to append a tensor with incompatible "
                                                   r"shape to a list. Op element shape: \[3\] "
                                                   r"list shape: \[2\]"):
        push(e, f32([1, 2, 3]))
    with pytest.raises(InvalidArgumentError, match="Invalid data types; op elements int32 but "
                                                   "list elements float32"):
        push(e, np.array([1, 2], np.int32))
    full = push(push(e, f32([1, 1])), f32([2, 2]))
    with pytest.raises(InvalidArgumentError, match="Tried to push item into a full list list "
                                                   "size: 2 max_num_elements: 2"):
        push(full, f32([3, 3]))


def test_set_item():
    r = reserve(3)
    r2 = set_item(r, 1, f32([5]))
    same(get(r2, 1), f32([5]))
    with pytest.raises(InvalidArgumentError, match="uninitialized"):
        get(r, 1)   # the input list is unchanged
    grown = set_item(r, 5, f32([1]), resize=True)
    assert length(grown) == 6 and length(r) == 3
    same(stack(grown), f32([[0], [0], [0], [0], [0], [1]]))
    for i in (3, -1):
        with pytest.raises(InvalidArgumentError,
                           match=f"Trying to modify element {i} in a list with 3 elements"):
            set_item(r, i, f32([1]))
    with pytest.raises(InvalidArgumentError, match=r"Tried to set a tensor with incompatible "
                                                   r"shape at a list index. Item element shape:"
                                                   r" \[3\] list shape: \[2\]"):
        set_item(empty(shape(2)), 0, f32([1, 2, 3]), resize=True)


def test_resize():
    tl = from_tensor(f32([[1], [2], [3]]))
    short = invoke("TensorListResize", tl, np.int32(1))
    same(stack(short), f32([[1]]))
    longer = invoke("TensorListResize", short, np.int32(3))
    same(stack(longer), f32([[1], [0], [0]]))
    same(stack(tl), f32([[1], [2], [3]]))
    with pytest.raises(InvalidArgumentError, match="TensorListSlice expects size to be "
                                                   "non-negative. Got: -1"):
        invoke("TensorListResize", tl, np.int32(-1))


def test_split():
    t = np.arange(10, dtype=np.float32).reshape(5, 2)
    tl = invoke("TensorListSplit", t, shape(-1, 2), np.array([2, 0, 3], np.int64))
    assert length(tl) == 3
    same(get(tl, 0), t[:2])
    same(get(tl, 1), np.zeros((0, 2), np.float32))
    same(get(tl, 2), t[2:])
    cases = [([2, 2], "Unused values in tensor. Length of tensor: 5 Values used: 4"),
             ([2, 4], r"Attempting to slice \[2, 6\] from tensor with length 5"),
             ([-1, 6], "Invalid value in lengths: -1")]
    for lens, msg in cases:
        with pytest.raises(InvalidArgumentError, match=msg):
            invoke("TensorListSplit", t, shape(-1, 2), np.array(lens, np.int64))
    with pytest.raises(InvalidArgumentError, match="requires element_shape to be at least of "
                                                   r"rank 1, but saw: \[\]"):
        invoke("TensorListSplit", t, shape(), np.array([5], np.int64))


def test_scatter_and_scatter_v2():
    t = f32([[1], [2], [3]])
    tl = invoke("TensorListScatter", t, np.array([4, 0, 2], np.int32), UNKNOWN)
    assert length(tl) == 5
    same(stack(tl), f32([[2], [0], [3], [0], [1]]))
    dup = invoke("TensorListScatter", f32([[1], [2]]), np.array([0, 0], np.int32), UNKNOWN)
    same(stack(dup), f32([[2]]))   # the last row written to an index wins
    v2 = invoke("TensorListScatterV2", f32([[1, 2]]), np.array([1], np.int32), UNKNOWN,
                np.int32(5))
    assert length(v2) == 5
    same(get(v2, 1), f32([1, 2]))
    with pytest.raises(InvalidArgumentError,
                       match="Invalid number of rows in input tensor. Expected: 1 Actual: 2"):
        invoke("TensorListScatter", f32([[1], [2]]), np.array([0], np.int32), UNKNOWN)
    with pytest.raises(InvalidArgumentError, match="must all be non-negative"):
        invoke("TensorListScatter", f32([[1]]), np.array([-1], np.int32), UNKNOWN)
    with pytest.raises(InvalidArgumentError,
                       match="Trying to scatter at index 5 in list with size 5"):
        invoke("TensorListScatterV2", f32([[1]]), np.array([5], np.int32), UNKNOWN,
               np.int32(5))
    with pytest.raises(InvalidArgumentError, match="expects num_elements >= -1, found: -2"):
        invoke("TensorListScatterV2", f32([[1]]), np.array([0], np.int32), UNKNOWN,
               np.int32(-2))


def test_scatter_into_existing_list():
    base = from_tensor(f32([[1], [2]]))
    out = invoke("TensorListScatterIntoExistingList", base, f32([[9], [8]]),
                 np.array([3, 0], np.int32))
    same(stack(out), f32([[8], [2], [0], [9]]))
    same(stack(base), f32([[1], [2]]))
    with pytest.raises(InvalidArgumentError, match="Invalid data types; input tensor type: "
                                                   "int32 list element_type: float32"):
        invoke("TensorListScatterIntoExistingList", base, np.array([[5]], np.int32),
               np.array([0], np.int32))
    with pytest.raises(InvalidArgumentError, match=r"Expected len\(indices\) == "
                                                   r"tensor.shape\[0\], but saw: 2 vs. 1"):
        invoke("TensorListScatterIntoExistingList", base, f32([[5]]),
               np.array([1, 0], np.int32))


def test_concat_lists():
    a = from_tensor(f32([[1, 2]]), shape(-1))
    b = from_tensor(f32([[3, 4], [5, 6]]), shape(-1))
    ab = invoke("TensorListConcatLists", a, b, attrs=A)
    same(stack(ab), f32([[1, 2], [3, 4], [5, 6]]))
    assert length(a) == 1 and length(b) == 2
    with pytest.raises(InvalidArgumentError, match=r"element shapes are not identical at index "
                                                   r"0.  Saw \[\?\] vs. \[2\]"):
        invoke("TensorListConcatLists", a, from_tensor(f32([[1, 2]]), shape(2)), attrs=A)
    with pytest.raises(InvalidArgumentError, match=r"input_b\[0\].dtype != element_dtype.  "
                                                   "Saw: int32 vs. float32"):
        invoke("TensorListConcatLists", a, from_tensor(np.ones((1, 2), np.int32), shape(-1)),
               attrs=A)
    batch_a = np.empty(2, dtype=object)
    batch_a[0], batch_a[1] = a, b
    batch_b = np.empty(2, dtype=object)
    batch_b[0], batch_b[1] = b, a
    out = invoke("TensorListConcatLists", batch_a, batch_b, attrs=A)
    assert out.shape == (2,)
    same(stack(out[0]), f32([[1, 2], [3, 4], [5, 6]]))
    same(stack(out[1]), f32([[3, 4], [5, 6], [1, 2]]))


def test_push_back_batch():
    handles = np.empty(2, dtype=object)
    handles[0], handles[1] = empty(shape(2)), push(empty(shape(2)), f32([0, 0]))
    out = invoke("TensorListPushBackBatch", handles, f32([[1, 2], [3, 4]]))
    assert out.dtype == object and out.shape == (2,)
    same(stack(out[0]), f32([[1, 2]]))
    same(stack(out[1]), f32([[0, 0], [3, 4]]))
    assert length(handles[0]) == 0
    with pytest.raises(InvalidArgumentError, match="Expected tensor.shape\\[0\\] == "
                                                   "input_handles.size, but saw 3 vs. 2"):
        invoke("TensorListPushBackBatch", handles, np.ones((3, 2), np.float32))
    with pytest.raises(InvalidArgumentError, match="Expected tensor to be at least a vector"):
        invoke("TensorListPushBackBatch", handles, np.float32(1))
    with pytest.raises(InvalidArgumentError, match="incompatible shape to a list at index 0"):
        invoke("TensorListPushBackBatch", handles, np.ones((2, 3), np.float32))


def test_not_a_list():
    with pytest.raises(InvalidArgumentError, match="Input handle is not a list"):
        invoke("TensorListLength", np.float32(1))


# --- variant support for gradients --------------------------------------------------------

def test_zeros_like_of_a_list():
    r = set_item(reserve(3), 1, f32([1, 2, 3]))
    z = invoke("ZerosLike", r)
    assert isinstance(z, TensorList) and length(z) == 3
    same(stack(z), np.zeros((3, 3), np.float32))
    assert z.entry(0) is None and z.entry(2) is None   # uninitialized stays uninitialized
    same(z.entry(1), np.zeros(3, np.float32))
    same(get(r, 1), f32([1, 2, 3]))
    with pytest.raises(InvalidArgumentError,
                       match="Trying to compute zeros_like for unsupported dtype string"):
        invoke("ZerosLike", from_tensor(np.array([b"a"], dtype=object)))


def test_add_n_of_lists():
    a = set_item(reserve(3), 1, f32([1, 2]))
    b = set_item(set_item(reserve(3), 1, f32([10, 20])), 2, f32([5, 5]))
    s = invoke("AddN", a, b, a)
    same(stack(s), f32([[0, 0], [12, 24], [5, 5]]))
    same(stack(a), f32([[0, 0], [1, 2], [0, 0]]))
    with pytest.raises(InvalidArgumentError, match="different lengths. One is 3 and the other "
                                                   "is 2"):
        invoke("AddN", a, reserve(2))
    with pytest.raises(InvalidArgumentError, match=r"incompatible element shapes. One is \[2\] "
                                                   r"and the other is \[3\]"):
        invoke("AddN", from_tensor(f32([[1, 2]])), from_tensor(f32([[1, 2, 3]])))
    with pytest.raises(InvalidArgumentError, match="of different dtypes. One is float32 and the "
                                                   "other is int32"):
        invoke("AddN", from_tensor(f32([[1, 2]])), from_tensor(np.ones((1, 2), np.int32)))


# --- a v1 while loop pushing to a list, run by the Session ---------------------------------

def _attr_type(key: str, t: str) -> str:
    return f'attr {{ key: "{key}" value {{ type: {t} }} }}'


def _list_loop_graph() -> Graph:
    """``l = []; i = 0; while i < n: l = push_back(l, i * i); i += 1; stack(l)``, written as
    TensorFlow's v1 while loop, the list a loop variable of dtype variant."""
    ti = _attr_type("T", "DT_INT32")
    tv = _attr_type("T", "DT_VARIANT")
    ed = _attr_type("element_dtype", "DT_INT32")
    enter = ('attr { key: "frame_name" value { s: "w" } } '
             'attr { key: "parallel_iterations" value { i: 10 } }')

    def const(name: str, value: int, ctl: str = "") -> str:
        inp = f' input: "^{ctl}"' if ctl else ""
        return (f'node {{ name: "{name}" op: "Const"{inp} {_attr_type("dtype", "DT_INT32")}'
                f' attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }}'
                f' int_val: {value} }} }} }} }}\n')

    text = (
        'node { name: "n" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }\n'
        + const("zero", 0) + const("shape", -1) + const("max", -1)
        + f'node {{ name: "l0" op: "EmptyTensorList" input: "shape" input: "max" {ed} '
          f'{_attr_type("shape_type", "DT_INT32")} }}\n'
        + f'node {{ name: "w/Enter" op: "Enter" input: "zero" {ti} {enter} }}\n'
        + f'node {{ name: "w/Enter_1" op: "Enter" input: "l0" {tv} {enter} }}\n'
        + f'node {{ name: "w/n" op: "Enter" input: "n" {ti} {enter} '
          'attr { key: "is_constant" value { b: true } } }\n'
        + f'node {{ name: "w/Merge" op: "Merge" input: "w/Enter" input: "w/NextIteration" {ti} '
          'attr { key: "N" value { i: 2 } } }\n'
        + 'node { name: "w/Merge_1" op: "Merge" input: "w/Enter_1" '
          f'input: "w/NextIteration_1" {tv} attr {{ key: "N" value {{ i: 2 }} }} }}\n'
        + f'node {{ name: "w/Less" op: "Less" input: "w/Merge" input: "w/n" {ti} }}\n'
        + 'node { name: "w/LoopCond" op: "LoopCond" input: "w/Less" }\n'
        + f'node {{ name: "w/Switch" op: "Switch" input: "w/Merge" input: "w/LoopCond" {ti} }}\n'
        + 'node { name: "w/Switch_1" op: "Switch" input: "w/Merge_1" input: "w/LoopCond" '
          f'{tv} }}\n'
        + f'node {{ name: "w/Identity" op: "Identity" input: "w/Switch:1" {ti} }}\n'
        + f'node {{ name: "w/Identity_1" op: "Identity" input: "w/Switch_1:1" {tv} }}\n'
        + const("w/one", 1, ctl="w/Identity")
        + f'node {{ name: "w/add" op: "AddV2" input: "w/Identity" input: "w/one" {ti} }}\n'
        + f'node {{ name: "w/sq" op: "Mul" input: "w/Identity" input: "w/Identity" {ti} }}\n'
        + 'node { name: "w/push" op: "TensorListPushBack" input: "w/Identity_1" '
          f'input: "w/sq" {ed} }}\n'
        + f'node {{ name: "w/NextIteration" op: "NextIteration" input: "w/add" {ti} }}\n'
        + f'node {{ name: "w/NextIteration_1" op: "NextIteration" input: "w/push" {tv} }}\n'
        + f'node {{ name: "w/Exit" op: "Exit" input: "w/Switch" {ti} }}\n'
        + f'node {{ name: "w/Exit_1" op: "Exit" input: "w/Switch_1" {tv} }}\n'
        # the element shape []: scalars (an empty int32 vector)
        + f'node {{ name: "elem_shape" op: "Const" {_attr_type("dtype", "DT_INT32")} attr {{ '
          'key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 0 } } } } '
          '} }\n'
        + f'node {{ name: "stacked" op: "TensorListStack" input: "w/Exit_1" '
          f'input: "elem_shape" {ed} }}\n'
        + 'node { name: "len" op: "TensorListLength" input: "w/Exit_1" }\n')
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("programs", ["never", "always"])
@pytest.mark.parametrize("n", [0, 1, 6, 300])
def test_while_loop_pushing_squares_then_stacking(threads: int, programs: str, n: int):
    with Session(_list_loop_graph(), threads=threads, programs=programs) as sess:
        for _ in range(2):   # the same session again: lists are values of one run
            stacked, count, i = sess.run(["stacked:0", "len:0", "w/Exit:0"],
                                         {"n": np.int32(n)})
            same(np.asarray(stacked), np.arange(n, dtype=np.int32) ** 2)
            assert int(count) == n and int(i) == n
        # the loop is simple enough to run as one program when asked
        assert sess.plan(["stacked:0"], ["n:0"]).frames["w"].program is not None
        final, = sess.run(["w/Exit_1:0"], {"n": np.int32(n)})
        assert isinstance(final, TensorList) and final.length == n
        assert len(final.store.items) == n   # each push extended the one store: no copies


# --- graphs TensorFlow made (tf.TensorArray in a loop, tf.scan), lowered to v1 loops ---------

TF_CASES = Path(__file__).resolve().parent.parent / "data" / "kernels" / "tensor_list"


@pytest.mark.parametrize("programs", ["never", "always"])
@pytest.mark.parametrize("name", ["tensor_array_squares", "scan_cumsum", "dynamic_push"])
def test_tensorflow_graphs_with_lists_give_tensorflows_outputs(name: str, programs: str):
    case = json.loads((TF_CASES / f"{name}.json").read_text())
    feed = {k: np.asarray(v, dtype=case["feed_dtype"]) for k, v in case["feed"].items()}
    with Session(load_graph(TF_CASES / f"{name}.pbtxt"), threads=2, programs=programs) as sess:
        got = sess.run(case["fetch"], feed)
    for g, want, dt in zip(got, case["expected"], case["dtype"]):
        same(np.asarray(g), np.asarray(want, dtype=dt))


@pytest.mark.parametrize("programs", ["never", "always"])
def test_variant_zeros_like_and_add_n_in_a_graph(programs: str):
    """stack(AddN(l, l, ZerosLike(l))) for l = from_tensor(x): 2 * x, through the Session."""
    tv = _attr_type("T", "DT_VARIANT")
    ed = _attr_type("element_dtype", "DT_FLOAT")
    text = (
        'node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
        'node { name: "es" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
        'attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: -1 } } }'
        ' }\n'
        f'node {{ name: "l" op: "TensorListFromTensor" input: "x" input: "es" {ed} '
        f'{_attr_type("shape_type", "DT_INT32")} }}\n'
        f'node {{ name: "z" op: "ZerosLike" input: "l" {tv} }}\n'
        f'node {{ name: "sum" op: "AddN" input: "l" input: "l" input: "z" {tv} '
        'attr { key: "N" value { i: 3 } } }\n'
        f'node {{ name: "out" op: "TensorListStack" input: "sum" input: "es" {ed} }}\n')
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    x = f32([[1, 2], [3, 4], [5, 6]])
    with Session(Graph(gd), threads=2, programs=programs) as sess:
        out, = sess.run(["out:0"], {"x": x})
    same(np.asarray(out), 2 * x)
