"""TensorArray V3 and Stack V2 kernels, driven through ``invoke`` with one shared ``step``
dict per simulated run. Expected values are hand-made or TensorFlow's conformance outputs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from dfg.executor.kernels.registry import invoke
from dfg.graphdef.errors import InvalidArgumentError, NotFoundError, UnimplementedError

CONFORMANCE = Path("/work/shared/conformance")
F = np.float32


def new_ta(step, size, dtype=F, **attrs):
    return invoke("TensorArrayV3", np.int32(size), attrs={"dtype": np.dtype(dtype), **attrs},
                  step=step)


def write(step, h, i, value, flow=None):
    # plain Python lists/floats stand for float32 values; numpy values keep their dtype
    value = np.asarray(value, F) if isinstance(value, (list, float)) else np.asarray(value)
    return invoke("TensorArrayWriteV3", h, np.int32(i), value,
                  np.float32(0) if flow is None else flow, step=step)


def read(step, h, i, dtype=F):
    return invoke("TensorArrayReadV3", h, np.int32(i), np.float32(0),
                  attrs={"dtype": np.dtype(dtype)}, step=step)


def gather(step, h, indices, dtype=F, element_shape=None):
    return invoke("TensorArrayGatherV3", h, np.array(indices, np.int32), np.float32(0),
                  attrs={"dtype": np.dtype(dtype), "element_shape": element_shape}, step=step)


def scatter(step, h, indices, value):
    return invoke("TensorArrayScatterV3", h, np.array(indices, np.int32), np.asarray(value),
                  np.float32(0), step=step)


def size(step, h):
    return invoke("TensorArraySizeV3", h, np.float32(0), step=step)


# --- creation, handles, flows ----------------------------------------------------------------

def test_create_returns_resource_handle_and_float_flow():
    step = {}
    h, flow = new_ta(step, 3)
    assert getattr(h, "__dfg_resource__", False)
    assert isinstance(flow, np.ndarray) and flow.dtype == np.float32 and flow.shape == ()
    assert int(size(step, h)) == 3 and size(step, h).dtype == np.int32


def test_each_execution_creates_a_new_array():
    step = {}
    h1, _ = new_ta(step, 2)
    h2, _ = new_ta(step, 2)   # same node executed again (e.g. next loop iteration)
    assert h1 != h2
    write(step, h1, 0, [1.0])
    write(step, h2, 0, [2.0])
    assert read(step, h1, 0).tolist() == [1.0] and read(step, h2, 0).tolist() == [2.0]


def test_write_returns_new_flow_and_read_round_trips():
    step = {}
    h, flow = new_ta(step, 2)
    out = write(step, h, 1, np.array([[1, 2], [3, 4]], F), flow)
    assert out.dtype == np.float32 and out.shape == () and out is not flow
    np.testing.assert_array_equal(read(step, h, 1), [[1, 2], [3, 4]])


def test_size_must_be_scalar_and_non_negative():
    with pytest.raises(InvalidArgumentError, match="must be scalar"):
        invoke("TensorArrayV3", np.array([2], np.int32), attrs={"dtype": np.dtype(F)})
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        new_ta({}, -1)


def test_handle_from_another_run_is_not_found():
    h, _ = new_ta({}, 2)
    with pytest.raises(NotFoundError):
        size({}, h)


# --- write / read rules ----------------------------------------------------------------------

def test_double_write_is_an_error():
    step = {}
    h, _ = new_ta(step, 2)
    write(step, h, 0, [1.0])
    with pytest.raises(InvalidArgumentError, match="already been written"):
        write(step, h, 0, [2.0])


def test_clear_after_read_forbids_second_read():
    step = {}
    h, _ = new_ta(step, 1)                       # clear_after_read defaults to true
    write(step, h, 0, [5.0])
    assert read(step, h, 0).tolist() == [5.0]
    with pytest.raises(InvalidArgumentError, match="twice"):
        read(step, h, 0)


def test_without_clear_after_read_reads_repeat():
    step = {}
    h, _ = new_ta(step, 1, clear_after_read=False)
    write(step, h, 0, [5.0])
    assert read(step, h, 0).tolist() == [5.0]
    assert read(step, h, 0).tolist() == [5.0]


def test_write_after_read_is_an_error():
    step = {}
    h, _ = new_ta(step, 1, element_shape=(2,))
    read(step, h, 0)                            # reads zeros
    with pytest.raises(InvalidArgumentError, match="already been read"):
        write(step, h, 0, np.ones(2, F))


def test_index_out_of_range():
    step = {}
    h, _ = new_ta(step, 2)
    with pytest.raises(InvalidArgumentError, match="not resizeable and size is: 2"):
        write(step, h, 2, [1.0])
    with pytest.raises(InvalidArgumentError, match="Tried to write to index -1"):
        write(step, h, -1, [1.0])
    with pytest.raises(InvalidArgumentError, match="Tried to read from index 5"):
        read(step, h, 5)
    with pytest.raises(InvalidArgumentError, match="index must be scalar"):
        invoke("TensorArrayWriteV3", h, np.array([0], np.int32), np.ones(1, F), np.float32(0),
               step=step)


def test_dynamic_size_grows_on_write_and_scatter():
    step = {}
    h, _ = new_ta(step, 0, dynamic_size=True, clear_after_read=False)
    write(step, h, 3, [3.0])
    assert int(size(step, h)) == 4
    scatter(step, h, [5, 4], np.array([[5.0], [4.0]], F))
    assert int(size(step, h)) == 6
    np.testing.assert_array_equal(gather(step, h, [3, 4, 5]), [[3.0], [4.0], [5.0]])


def test_unwritten_read_zeros_only_when_shape_known():
    step = {}
    h, _ = new_ta(step, 2, element_shape=(2, 3))
    z = read(step, h, 1)
    assert z.shape == (2, 3) and z.dtype == np.float32 and not z.any()
    h2, _ = new_ta(step, 2, element_shape=(None, 3))
    with pytest.raises(InvalidArgumentError, match="not fully defined"):
        read(step, h2, 0)
    h3, _ = new_ta(step, 2)                      # unknown rank
    with pytest.raises(InvalidArgumentError, match="not fully defined"):
        read(step, h3, 0)


def test_dtype_mismatch():
    step = {}
    h, _ = new_ta(step, 2)
    with pytest.raises(InvalidArgumentError, match="float32 but Op is trying to write dtype int32"):
        write(step, h, 0, np.array([1], np.int32))
    write(step, h, 0, np.array([1], F))
    with pytest.raises(InvalidArgumentError, match="requested dtype int32"):
        read(step, h, 0, dtype=np.int32)


def test_element_shape_mismatch():
    step = {}
    h, _ = new_ta(step, 2, element_shape=(2,))
    with pytest.raises(InvalidArgumentError, match="incompatible with the TensorArray"):
        write(step, h, 0, np.ones(3, F))


def test_identical_element_shapes_fixes_shape_at_first_write():
    step = {}
    h, _ = new_ta(step, 3, identical_element_shapes=True)
    write(step, h, 0, np.ones((2, 2), F))
    with pytest.raises(InvalidArgumentError, match=r"value shape is \[3\]"):
        write(step, h, 1, np.ones(3, F))
    z = read(step, h, 2)                          # inferred shape now gives zeros
    assert z.shape == (2, 2) and not z.any()


def test_string_elements():
    step = {}
    h, _ = new_ta(step, 2, dtype=object, element_shape=())
    write(step, h, 0, np.array(b"abc", dtype=object))
    assert read(step, h, 0, dtype=object) == b"abc"
    assert read(step, h, 1, dtype=object) == b""  # zero string is empty


# --- gather / scatter / concat / split -------------------------------------------------------

def test_scatter_then_gather():
    step = {}
    h, _ = new_ta(step, 4, clear_after_read=False)
    value = np.array([[1, 2], [3, 4], [5, 6]], F)
    flow = scatter(step, h, [2, 0, 3], value)
    assert flow.dtype == np.float32 and flow.shape == ()
    np.testing.assert_array_equal(gather(step, h, [0, 3, 2]), [[3, 4], [5, 6], [1, 2]])
    np.testing.assert_array_equal(read(step, h, 2), [1, 2])


def test_scatter_errors():
    step = {}
    h, _ = new_ta(step, 2)
    with pytest.raises(InvalidArgumentError, match=r"Max scatter index must be < array size \(2"):
        scatter(step, h, [0, 2], np.ones((2, 1), F))
    with pytest.raises(InvalidArgumentError, match="len\\(indices\\) == values.shape\\[0\\]"):
        scatter(step, h, [0], np.ones((2, 1), F))
    with pytest.raises(InvalidArgumentError, match="at least a vector"):
        scatter(step, h, [], np.float32(1))
    with pytest.raises(InvalidArgumentError, match="already been written"):
        scatter(step, h, [1, 1], np.ones((2, 1), F))


def test_gather_checks_shapes():
    step = {}
    h, _ = new_ta(step, 2)
    write(step, h, 0, np.ones(2, F))
    write(step, h, 1, np.ones(3, F))
    with pytest.raises(InvalidArgumentError, match="inconsistent shapes"):
        gather(step, h, [0, 1])
    h2, _ = new_ta(step, 1)
    write(step, h2, 0, np.ones(2, F))
    with pytest.raises(InvalidArgumentError):
        gather(step, h2, [0], element_shape=(3,))


def test_gather_empty():
    step = {}
    h, _ = new_ta(step, 0)
    out = gather(step, h, [], element_shape=(2, 3))
    assert out.shape == (0, 2, 3) and out.dtype == np.float32
    with pytest.raises(UnimplementedError):
        gather(step, h, [], element_shape=None)


def test_gather_scalar_elements():
    step = {}
    h, _ = new_ta(step, 2, dtype=np.int32)
    write(step, h, 0, np.int32(7))
    write(step, h, 1, np.int32(9))
    out = gather(step, h, [0, 1], dtype=np.int32, element_shape=())
    assert out.dtype == np.int32 and out.tolist() == [7, 9]


def test_concat_values_and_lengths():
    step = {}
    h, _ = new_ta(step, 3)
    write(step, h, 0, np.array([[1, 1], [2, 2]], F))
    write(step, h, 1, np.array([[3, 3]], F))
    write(step, h, 2, np.zeros((0, 2), F))
    value, lengths = invoke("TensorArrayConcatV3", h, np.float32(0),
                            attrs={"dtype": np.dtype(F)}, step=step)
    np.testing.assert_array_equal(value, [[1, 1], [2, 2], [3, 3]])
    assert lengths.dtype == np.int64 and lengths.tolist() == [2, 1, 0]


def test_concat_errors_and_empty():
    step = {}
    h, _ = new_ta(step, 2)
    write(step, h, 0, np.ones((1, 2), F))
    write(step, h, 1, np.ones((1, 3), F))
    with pytest.raises(InvalidArgumentError, match="inconsistent shapes"):
        invoke("TensorArrayConcatV3", h, np.float32(0), attrs={"dtype": np.dtype(F)},
               step=step)
    h2, _ = new_ta(step, 1)
    write(step, h2, 0, np.float32(1))
    with pytest.raises(InvalidArgumentError, match="scalar"):
        invoke("TensorArrayConcatV3", h2, np.float32(0), attrs={"dtype": np.dtype(F)},
               step=step)
    h3, _ = new_ta(step, 0)
    value, lengths = invoke("TensorArrayConcatV3", h3, np.float32(0),
                            attrs={"dtype": np.dtype(F), "element_shape_except0": (4,)},
                            step=step)
    assert value.shape == (0, 4) and lengths.shape == (0,)


def test_split_then_read():
    step = {}
    h, _ = new_ta(step, 3)
    value = np.arange(12, dtype=F).reshape(6, 2)
    flow = invoke("TensorArraySplitV3", h, value, np.array([1, 3, 2], np.int64),
                  np.float32(0), step=step)
    assert flow.shape == () and flow.dtype == np.float32
    np.testing.assert_array_equal(read(step, h, 0), [[0, 1]])
    np.testing.assert_array_equal(read(step, h, 1), [[2, 3], [4, 5], [6, 7]])
    np.testing.assert_array_equal(read(step, h, 2), [[8, 9], [10, 11]])


def test_split_errors():
    step = {}
    h, _ = new_ta(step, 2)
    value = np.ones((3, 2), F)
    with pytest.raises(InvalidArgumentError, match="sum of lengths"):
        invoke("TensorArraySplitV3", h, value, np.array([1, 1], np.int64), np.float32(0),
               step=step)
    with pytest.raises(InvalidArgumentError, match="not equal to the size of lengths"):
        invoke("TensorArraySplitV3", h, value, np.array([1, 1, 1], np.int64), np.float32(0),
               step=step)
    with pytest.raises(InvalidArgumentError, match="trying to write dtype"):
        invoke("TensorArraySplitV3", h, np.ones(2, np.int32), np.array([1, 1], np.int64),
               np.float32(0), step=step)


def test_close():
    step = {}
    h, _ = new_ta(step, 2)
    write(step, h, 0, [1.0])
    assert invoke("TensorArrayCloseV3", h, step=step) == ()
    with pytest.raises(InvalidArgumentError, match="already been closed"):
        read(step, h, 0)
    with pytest.raises(InvalidArgumentError, match="already been closed"):
        size(step, h)
    with pytest.raises(InvalidArgumentError, match="already been closed"):
        write(step, h, 1, [1.0])


# --- gradient arrays -------------------------------------------------------------------------

def grad_of(step, h, source="gradients"):
    return invoke("TensorArrayGradV3", h, np.float32(0), attrs={"source": source}, step=step)


def test_gradient_array_created_once_per_source_and_aggregates():
    step = {}
    h, _ = new_ta(step, 3, dynamic_size=True)
    write(step, h, 0, np.array([1, 1], F))
    write(step, h, 2, np.array([5], F))
    g1, flow = grad_of(step, h)
    g2, _ = grad_of(step, h)
    g3, _ = grad_of(step, h, "gradients_1")
    assert g1 == g2 and g1 != g3
    assert flow.dtype == np.float32 and flow.shape == ()
    assert int(size(step, g1)) == 3
    # forward array can no longer grow
    with pytest.raises(InvalidArgumentError, match="not resizeable"):
        write(step, h, 3, np.array([1], F))
    write(step, g1, 0, np.array([1, 2], F))
    write(step, g1, 0, np.array([10, 20], F))      # a second write adds
    np.testing.assert_array_equal(read(step, g1, 0), [11, 22])
    with pytest.raises(InvalidArgumentError, match="aggregate"):
        write(step, g1, 2, np.array([1, 2], F))     # forward element 2 has shape [1]
    # never-written gradient of a written forward element: zeros of the forward shape
    np.testing.assert_array_equal(read(step, g1, 2), [0])
    # the other source's array is independent
    np.testing.assert_array_equal(read(step, g3, 0), [0, 0])


def test_gradient_with_shape_prepends():
    step = {}
    h, _ = new_ta(step, 1, element_shape=(2,))
    write(step, h, 0, np.array([1, 2], F))
    g, _ = invoke("TensorArrayGradWithShape", h, np.float32(0), np.array([3], np.int32),
                  attrs={"source": "s"}, step=step)
    assert read(step, g, 0).shape == (3, 2)


# --- stacks ----------------------------------------------------------------------------------

def new_stack(step, max_size=-1, elem_type=F):
    return invoke("StackV2", np.int32(max_size), attrs={"elem_type": np.dtype(elem_type)},
                  step=step)


def pop(step, h, elem_type=F):
    return invoke("StackPopV2", h, attrs={"elem_type": np.dtype(elem_type)}, step=step)


def test_stack_push_pop_lifo():
    step = {}
    h = new_stack(step)
    assert getattr(h, "__dfg_resource__", False)
    for v in (1.0, 2.0, 3.0):
        out = invoke("StackPushV2", h, np.array([v], F), step=step)
        assert out.tolist() == [v]
    assert [pop(step, h).tolist() for _ in range(3)] == [[3.0], [2.0], [1.0]]
    with pytest.raises(InvalidArgumentError, match="is empty"):
        pop(step, h)


def test_stack_limits_and_types():
    step = {}
    h = new_stack(step, max_size=1)
    invoke("StackPushV2", h, np.array(1, F), step=step)
    with pytest.raises(InvalidArgumentError, match="overflowed its max_size"):
        invoke("StackPushV2", h, np.array(2, F), step=step)
    with pytest.raises(InvalidArgumentError, match="Must have type"):
        invoke("StackPushV2", new_stack(step), np.array(1, np.int32), step=step)
    assert invoke("StackCloseV2", h, step=step) == ()
    with pytest.raises(InvalidArgumentError, match="already been closed"):
        pop(step, h)
    with pytest.raises(NotFoundError):
        pop({}, h)


# --- concurrency -----------------------------------------------------------------------------

def run_threads(n, fn):
    errors = []
    barrier = threading.Barrier(n)

    def body(k):
        try:
            barrier.wait()
            fn(k)
        except Exception as e:  # noqa: BLE001 - collected and re-raised by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_concurrent_writes_and_reads():
    step = {}
    h, _ = new_ta(step, 0, dynamic_size=True, clear_after_read=False)
    per = 200

    def writer(k):
        for i in range(per):
            write(step, h, k * per + i, np.array([k * per + i], F))

    run_threads(8, writer)
    assert int(size(step, h)) == 8 * per
    np.testing.assert_array_equal(gather(step, h, list(range(8 * per)))[:, 0],
                                  np.arange(8 * per, dtype=F))
    seen = [[] for _ in range(8)]

    def reader(k):
        for i in range(per):
            seen[k].append(float(read(step, h, k * per + i)[0]))

    run_threads(8, reader)
    assert sorted(v for s in seen for v in s) == list(range(8 * per))


def test_concurrent_duplicate_writes_only_one_wins():
    step = {}
    h, _ = new_ta(step, 1)
    wins = []

    def writer(k):
        try:
            write(step, h, 0, np.array([k], F))
            wins.append(k)
        except InvalidArgumentError:
            pass

    run_threads(16, writer)
    assert len(wins) == 1
    assert read(step, h, 0).tolist() == [wins[0]]


def test_concurrent_gradient_aggregation_and_creation():
    step = {}
    h, _ = new_ta(step, 1)
    write(step, h, 0, np.zeros(3, F))
    handles = []

    def body(k):
        g, _ = grad_of(step, h)
        handles.append(g)
        for _ in range(50):
            write(step, g, 0, np.ones(3, F))

    run_threads(8, body)
    assert len(set(handles)) == 1
    np.testing.assert_array_equal(read(step, handles[0], 0), [400, 400, 400])


def test_concurrent_creation_in_fresh_step():
    step = {}
    made = []

    def body(k):
        h, _ = new_ta(step, 1)
        made.append(h)

    run_threads(16, body)
    for h in made:                   # every array is registered in the one step container
        assert int(size(step, h)) == 1


# --- TensorFlow's conformance cases, replayed ------------------------------------------------

def load_case(name):
    case = CONFORMANCE / name
    step = json.loads((case / "case.json").read_text())["steps"][0]
    feed = {k.split(":")[0]: np.load(case / v) for k, v in step["feed"].items()}
    want = {k: np.load(case / v) for k, v in step["expect"].items()}
    return feed, want


def assert_close(got, ref, name):
    assert got.dtype == ref.dtype and got.shape == ref.shape, name
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.skipif(not (CONFORMANCE / "tensor_array").is_dir(), reason="no conformance data")
def test_tensor_array_conformance_case():
    """The case's graph, op by op: TensorArray ops through our kernels, the loop body's
    arithmetic (acc = acc * 0.5 + x[i]) with numpy."""
    feed, want = load_case("tensor_array")
    x = feed["x"]
    step = {}
    ta_attrs = dict(identical_element_shapes=True)
    inputs, inputs_flow = new_ta(step, 6, **ta_attrs)                  # clear_after_read
    scattered = scatter(step, inputs, np.arange(6, dtype=np.int32), x)
    outputs, flow = new_ta(step, 6, clear_after_read=False, **ta_attrs)
    acc = np.zeros(2, F)
    for i in range(6):
        r = invoke("TensorArrayReadV3", inputs, np.int32(i), scattered,
                   attrs={"dtype": np.dtype(F)}, step=step)
        acc = acc * F(0.5) + r
        flow = invoke("TensorArrayWriteV3", outputs, np.int32(i), acc, flow, step=step)
    stacked = invoke("TensorArrayGatherV3", outputs, np.arange(6, dtype=np.int32), flow,
                     attrs={"dtype": np.dtype(F), "element_shape": (2,)}, step=step)
    picked = invoke("TensorArrayGatherV3", outputs, np.array([5, 0, 2], np.int32), flow,
                    attrs={"dtype": np.dtype(F), "element_shape": (2,)}, step=step)
    n = invoke("TensorArraySizeV3", outputs, flow, step=step)
    shuffled, sflow = new_ta(step, 4, clear_after_read=False, **ta_attrs)
    sflow = invoke("TensorArrayScatterV3", shuffled, np.array([3, 1, 0, 2], np.int32), x[:4],
                   sflow, step=step)
    third = invoke("TensorArrayReadV3", shuffled, np.int32(3), sflow,
                   attrs={"dtype": np.dtype(F)}, step=step)
    shuffled_stack = invoke("TensorArrayGatherV3", shuffled, np.arange(4, dtype=np.int32),
                            sflow, attrs={"dtype": np.dtype(F), "element_shape": (2,)},
                            step=step)
    assert_close(acc, want["fill/Exit_1:0"], "fill/Exit_1")
    assert_close(stacked, want["stacked/stacked:0"], "stacked")
    assert_close(picked, want["picked:0"], "picked")
    assert n.dtype == np.int32 and int(n) == int(want["size:0"])
    assert_close(third, want["third:0"], "third")
    assert_close(shuffled_stack, want["shuffled_stack/shuffled_stack:0"], "shuffled_stack")
    # the clear_after_read input array really was consumed
    with pytest.raises(InvalidArgumentError, match="twice"):
        read(step, inputs, 0)


@pytest.mark.skipif(not (CONFORMANCE / "map_fn").is_dir(), reason="no conformance data")
def test_map_fn_conformance_case():
    """map_fn's unstack / per-row write / stack, for scalar float and int32 elements."""
    feed, want = load_case("map_fn")
    x = feed["x"]
    step = {}
    results = {}
    for name, dtype, fn in (("row_norms", F, lambda r: np.sum(r * r)),
                            ("argmax_rows", np.int32, lambda r: np.int32(np.argmax(r)))):
        src, sflow = new_ta(step, 5, identical_element_shapes=True)
        sflow = scatter(step, src, np.arange(5, dtype=np.int32), x)
        dst, flow = new_ta(step, 5, dtype=dtype, identical_element_shapes=True)
        for i in range(5):
            row = invoke("TensorArrayReadV3", src, np.int32(i), sflow,
                         attrs={"dtype": np.dtype(F)}, step=step)
            flow = invoke("TensorArrayWriteV3", dst, np.int32(i), np.asarray(fn(row)), flow,
                          step=step)
        results[name] = invoke("TensorArrayGatherV3", dst, np.arange(5, dtype=np.int32), flow,
                               attrs={"dtype": np.dtype(dtype), "element_shape": ()},
                               step=step)
    assert_close(results["row_norms"], want["row_norms/TensorArrayStack/TensorArrayGatherV3:0"],
                 "row_norms")
    ref = want["argmax_rows/TensorArrayStack/TensorArrayGatherV3:0"]
    assert results["argmax_rows"].dtype == ref.dtype
    np.testing.assert_array_equal(results["argmax_rows"], ref)


def test_a_nodes_context_keeps_the_array_its_handle_names_within_the_run():
    """A loop's read and write nodes use one context per run: the array their handle names
    is kept for that handle (another handle is looked up again), and closing the array still
    stops them (it stays in the run's table, marked closed)."""
    from dfg.executor.kernel_call import bind_op, call, context
    from dfg.executor.kernels.registry import complete_attrs

    step = {}
    h1, _ = new_ta(step, 3)
    h2, _ = new_ta(step, 3)
    args = [h1, np.int32(0), np.ones(2, F), np.float32(0)]
    k = bind_op("TensorArrayWriteV3", complete_attrs("TensorArrayWriteV3", {}, args))
    ctx = context(k, resources=object(), step=step)
    for i, h in ((0, h1), (1, h1), (0, h2), (2, h1)):
        call(k, [h, np.int32(i), np.full(2, i + 10 * (h is h2), F), np.float32(0)], ctx)
    assert [read(step, h1, i).tolist() for i in range(3)] == [[0, 0], [1, 1], [2, 2]]
    assert read(step, h2, 0).tolist() == [10, 10]
    invoke("TensorArrayCloseV3", h1, step=step)
    with pytest.raises(Exception, match="closed"):
        call(k, [h1, np.int32(1), np.ones(2, F), np.float32(0)], ctx)
    with pytest.raises(NotFoundError):                 # a handle of another run
        call(k, [h2, np.int32(1), np.ones(2, F), np.float32(0)],
             context(k, resources=object(), step={}))
