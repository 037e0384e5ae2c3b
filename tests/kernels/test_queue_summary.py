"""Queues, summaries and legacy TensorArrays beyond the replayed cases.

* Queues block as TensorFlow's do: a dequeue waits for another step's enqueue, an enqueue
  for room; a wait ends with the step's deadline (DeadlineExceededError) or
  ``Session.close()`` (CancelledError), never hangs (tests/data/kernels/raw_ops_queue cannot
  hold such cases: TensorFlow would wait forever).
* Summary protos: every summary case of raw_ops_queue/manifest.json (TensorFlow's serialized
  protos) parsed and compared field by field with dfg's, images as decoded pixels and audio
  as decoded samples (test_raw_ops.py compares the same outputs as bytes).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import dfg.executor.kernels.queue  # noqa: F401  (until "queue" is in FAMILIES)
import dfg.executor.kernels.summary  # noqa: F401
from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef import builder as B
from dfg.graphdef import dtypes as D
from dfg.graphdef import errors, load_graph
from dfg.graphdef.errors import CancelledError, DeadlineExceededError, NotFoundError

F, I64 = D.DT_FLOAT, D.DT_INT64
DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "raw_ops_queue"


def queue_graph(op: str = "FIFOQueueV2", capacity: int = 2, **attrs):
    """One float queue of scalars: ``enq`` (fed ``x``), ``enq_many`` (fed ``xs``), ``deq``,
    ``deq_many`` (fed ``n``), ``close``, ``close_cancel``, ``size``."""
    g = B.Graph()
    v2 = op.endswith("V2")
    sfx = "V2" if v2 else ""
    with g.as_default():
        q = B.apply_op(op, [], attrs={"component_types": [F], "shapes": [[]],
                                      "capacity": capacity, **attrs}, name="q").outputs[0]
        x = B.placeholder("float32", [], name="x")
        xs = B.placeholder("float32", [None], name="xs")
        n = B.placeholder("int32", [], name="n")
        B.apply_op("QueueEnqueue" + sfx, [q, [x]], name="enq")
        B.apply_op("QueueEnqueueMany" + sfx, [q, [xs]], name="enq_many")
        B.apply_op("QueueDequeue" + sfx, [q], attrs={"component_types": [F]}, name="deq")
        B.apply_op("QueueDequeueMany" + sfx, [q, n], attrs={"component_types": [F]},
                   name="deq_many")
        B.apply_op("QueueClose" + sfx, [q], name="close")
        B.apply_op("QueueClose" + sfx, [q], attrs={"cancel_pending_enqueues": True},
                   name="close_cancel")
        B.apply_op("QueueSize" + sfx, [q], name="size")
    return g.as_graph_def()


def in_thread(fn):
    """Run ``fn`` in a thread; returns (thread, box) where box gets 'value' or 'error'."""
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


MODES = [("never", 2), ("auto", 2), ("auto", 1)]


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_dequeue_waits_for_another_steps_enqueue(programs, threads):
    with Session(queue_graph(), threads=threads, programs=programs) as sess:
        t, box = in_thread(lambda: sess.run("deq", timeout=20))
        time.sleep(0.3)
        assert t.is_alive(), box   # still waiting: the queue is empty
        sess.run([], {"x": np.float32(7)}, targets=["enq"])
        t.join(10)
        assert not t.is_alive() and box == {"value": np.float32(7)}, box


@pytest.mark.parametrize("programs,threads", MODES)
def test_a_dequeue_on_an_empty_queue_ends_at_the_deadline(programs, threads):
    with Session(queue_graph(), threads=threads, programs=programs) as sess:
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceededError):
            sess.run("deq", timeout=0.3)
        took = time.perf_counter() - t0
        assert 0.25 < took < 3, took
        # the cancelled attempt is gone: the next element goes to the next dequeue
        sess.run([], {"x": np.float32(1)}, targets=["enq"])
        assert sess.run("deq", timeout=5) == 1
        assert sess.run("size") == 0


def test_closing_the_session_cancels_a_blocked_dequeue():
    sess = Session(queue_graph(), threads=2)
    t, box = in_thread(lambda: sess.run("deq"))
    time.sleep(0.3)
    assert t.is_alive()
    sess.close()
    t.join(10)
    assert not t.is_alive() and isinstance(box.get("error"), CancelledError), box


def test_an_enqueue_waits_for_room():
    with Session(queue_graph(capacity=2), threads=2) as sess:
        sess.run([], {"xs": np.array([1, 2], np.float32)}, targets=["enq_many"])
        t, box = in_thread(lambda: sess.run([], {"x": np.float32(3)}, targets=["enq"],
                                            timeout=20))
        time.sleep(0.3)
        assert t.is_alive() and sess.run("size") == 2
        assert sess.run("deq", timeout=5) == 1
        t.join(10)
        assert not t.is_alive() and "error" not in box, box
        got = sess.run("deq_many", {"n": np.int32(2)}, timeout=5)
        np.testing.assert_array_equal(got, [2, 3])


def test_dequeue_many_larger_than_the_capacity_completes_with_enqueues_from_other_steps():
    with Session(queue_graph(capacity=2), threads=2) as sess:
        t, box = in_thread(lambda: sess.run("deq_many", {"n": np.int32(5)}, timeout=20))
        for v in range(5):
            sess.run([], {"x": np.float32(v)}, targets=["enq"], timeout=20)
        t.join(10)
        assert not t.is_alive(), box
        np.testing.assert_array_equal(box["value"], [0, 1, 2, 3, 4])


def test_enqueue_many_larger_than_the_capacity_completes_as_another_step_dequeues():
    with Session(queue_graph(capacity=2), threads=2) as sess:
        t, box = in_thread(lambda: sess.run([], {"xs": np.arange(5, dtype=np.float32)},
                                            targets=["enq_many"], timeout=20))
        got = [float(sess.run("deq", timeout=20)) for _ in range(5)]
        t.join(10)
        assert not t.is_alive() and "error" not in box, box
        assert got == [0, 1, 2, 3, 4]


def test_close_waits_behind_a_pending_enqueue_and_cancel_pending_enqueues_cancels_it():
    with Session(queue_graph(capacity=1), threads=2) as sess:
        sess.run([], {"x": np.float32(1)}, targets=["enq"])
        t1, box1 = in_thread(lambda: sess.run([], {"x": np.float32(2)}, targets=["enq"],
                                              timeout=20))
        time.sleep(0.2)
        t2, box2 = in_thread(lambda: sess.run([], targets=["close"], timeout=20))
        time.sleep(0.2)
        assert t1.is_alive() and t2.is_alive()   # the close queues behind the enqueue
        assert sess.run("deq", timeout=5) == 1   # room: the enqueue, then the close, finish
        t1.join(10)
        t2.join(10)
        assert "error" not in box1 and "error" not in box2, (box1, box2)
        assert sess.run("deq", timeout=5) == 2
        with pytest.raises(errors.OutOfRangeError):
            sess.run("deq", timeout=5)
    with Session(queue_graph(capacity=1), threads=2) as sess:
        sess.run([], {"x": np.float32(1)}, targets=["enq"])
        t1, box1 = in_thread(lambda: sess.run([], {"x": np.float32(2)}, targets=["enq"],
                                              timeout=20))
        time.sleep(0.2)
        sess.run([], targets=["close_cancel"], timeout=5)
        t1.join(10)
        assert isinstance(box1.get("error"), CancelledError), box1
        assert sess.run("size") == 1


def test_one_step_that_enqueues_and_dequeues_does_not_wait_on_itself():
    g = B.Graph()
    with g.as_default():
        q = B.apply_op("FIFOQueueV2", [], attrs={"component_types": [F], "shapes": [[]]},
                       name="q").outputs[0]
        deq = B.apply_op("QueueDequeueV2", [q], attrs={"component_types": [F]}, name="deq")
        B.apply_op("QueueEnqueueV2", [q, [B.constant(np.float32(4))]], name="enq")
        B.identity(deq.outputs[0], name="out")
    for programs in ("never", "auto"):
        with Session(g.as_graph_def(), threads=2, programs=programs) as sess:
            for _ in range(3):
                assert sess.run("out", targets=["enq"], timeout=20) == 4


def test_a_v1_queue_wait_also_ends():
    """V1 queue ops are not stateful in their OpDefs: they may run without the step's cancel
    flag, and then refuse to wait at all (DeadlineExceededError at once) rather than risk
    waiting for ever; with it, they wait for the deadline."""
    with Session(queue_graph("FIFOQueue"), threads=2) as sess:
        sess.run([], {"x": np.float32(5)}, targets=["enq"])
        assert sess.run("deq", timeout=5) == 5
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceededError):
            sess.run("deq", timeout=0.5)
        # the wait ended by the deadline, not the queue: a bound that only catches a hang
        # (wall time on a busy machine is the machine's, not dfg's)
        assert time.perf_counter() - t0 < 120


def test_a_wait_outside_a_session_fails_at_once():
    from dfg.executor.resources import ResourceManager

    rm = ResourceManager()
    attrs = {"component_types": [np.dtype(np.float32)], "shapes": [()], "capacity": -1,
             "container": "", "shared_name": "solo"}
    h = invoke("FIFOQueueV2", attrs=attrs, resources=rm)
    with pytest.raises(DeadlineExceededError):
        invoke("QueueDequeueV2", h, attrs={"component_types": [np.dtype(np.float32)]},
               resources=rm)
    invoke("QueueEnqueueV2", h, np.float32(3), resources=rm,
           attrs={"Tcomponents": [np.dtype(np.float32)]})
    got = invoke("QueueDequeueV2", h, attrs={"component_types": [np.dtype(np.float32)]},
                 resources=rm)
    assert float(got[0]) == 3


def test_random_seeds_give_a_permutation():
    with Session(queue_graph("RandomShuffleQueueV2", capacity=10, min_after_dequeue=0,
                             seed=0, seed2=0), threads=2) as sess:
        sess.run([], {"xs": np.arange(10, dtype=np.float32)}, targets=["enq_many"])
        got = sess.run("deq_many", {"n": np.int32(10)}, timeout=5)
        assert sorted(got.tolist()) == list(range(10))


def test_a_v2_tensor_array_handle_does_not_outlive_its_run():
    g = B.Graph()
    with g.as_default():
        ta = B.apply_op("TensorArrayV2", [B.constant(np.int32(2))], attrs={"dtype": F},
                        name="ta").outputs[0]
        h = B.placeholder("string", [2], name="h")
        B.apply_op("TensorArraySizeV2", [h, B.constant(np.float32(0))], name="size")
        B.apply_op("TensorArraySizeV2", [ta, B.constant(np.float32(0))], name="size_here")
    with Session(g.as_graph_def()) as sess:
        handle, n = sess.run(["ta", "size_here"])
        assert handle[0] == b"_tensor_arrays" and n == 2
        with pytest.raises(NotFoundError):
            sess.run("size", {"h": handle})


# --- summary protos, field by field --------------------------------------------------------

def _summary_steps():
    out = []
    for c in json.loads((DATA / "manifest.json").read_text()):
        name = Path(c["graph"]).stem
        if not name.startswith("summary_") or name == "summary_writers":
            continue
        for k, st in enumerate(c["steps"]):
            if "outputs" in st:
                out.append(pytest.param(c, k, id=f"{name}-{k}"))
    return out


def _tf_bytes(key: str) -> bytes:
    a = np.load(DATA / "arrays.npz", allow_pickle=False)[key]
    return bytes(a.reshape(-1)[0])


def _floats_equal(got: float, want: float, what: str, rtol: float = 1e-7) -> None:
    if np.isnan(want):
        assert np.isnan(got), what
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=what)


def _pixels(png: bytes, channels: int) -> np.ndarray:
    from dfg.executor.kernels.formats import _png_decode

    return _png_decode(png, channels, False)


def _samples(wav: bytes) -> tuple[np.ndarray, int, int]:
    from dfg.executor.kernels.formats import _wav_read

    return _wav_read(wav)


def _compare_values(g, w, what: str) -> None:
    from dfg.graphdef.tensors import to_numpy

    assert g.tag == w.tag and g.node_name == w.node_name, what
    assert g.WhichOneof("value") == w.WhichOneof("value"), what
    assert g.HasField("metadata") == w.HasField("metadata"), what
    assert g.metadata == w.metadata, what
    kind = w.WhichOneof("value")
    if kind == "simple_value":
        _floats_equal(g.simple_value, w.simple_value, what)
    elif kind == "histo":
        for f in ("min", "max", "num", "sum", "sum_squares"):
            _floats_equal(getattr(g.histo, f), getattr(w.histo, f), f"{what} {f}", 1e-12)
        np.testing.assert_array_equal(g.histo.bucket_limit, w.histo.bucket_limit, what)
        np.testing.assert_array_equal(g.histo.bucket, w.histo.bucket, what)
    elif kind == "image":
        gi, wi = g.image, w.image
        assert (gi.height, gi.width, gi.colorspace) == (wi.height, wi.width, wi.colorspace)
        np.testing.assert_array_equal(_pixels(gi.encoded_image_string, gi.colorspace),
                                      _pixels(wi.encoded_image_string, wi.colorspace), what)
    elif kind == "audio":
        ga, wa = g.audio, w.audio
        assert (ga.sample_rate, ga.num_channels, ga.length_frames, ga.content_type) == (
            wa.sample_rate, wa.num_channels, wa.length_frames, wa.content_type), what
        gs, ws = _samples(ga.encoded_audio_string), _samples(wa.encoded_audio_string)
        assert gs[1:] == ws[1:], what
        np.testing.assert_array_equal(gs[0], ws[0], what)
    elif kind == "tensor":
        gt, wt = to_numpy(g.tensor), to_numpy(w.tensor)
        assert gt.dtype == wt.dtype and gt.shape == wt.shape, what
        assert gt.reshape(-1).tolist() == wt.reshape(-1).tolist(), what
        assert g.tensor == w.tensor, what
    else:
        assert g == w, what


@pytest.mark.parametrize("case,k", _summary_steps())
def test_summary_protos_match_tensorflows_field_by_field(case, k):
    from dfg.schemas import summary_pb2

    step = case["steps"][k]
    sess = Session(load_graph(str(DATA / case["graph"])))
    try:
        got = sess.run(step["fetches"])
    finally:
        sess.close()
    for name, g, key in zip(step["fetches"], got, step["outputs"]):
        gb, wb = bytes(g.item()), _tf_bytes(key)
        assert gb.endswith(b"$") and wb.endswith(b"$")
        gs = summary_pb2.Summary.FromString(gb[:-1])
        ws = summary_pb2.Summary.FromString(wb[:-1])
        assert len(gs.value) == len(ws.value), name
        for i, (gv, wv) in enumerate(zip(gs.value, ws.value)):
            _compare_values(gv, wv, f"{name} value {i}")


def test_default_histogram_buckets_are_tensorflows():
    from dfg.executor.kernels.summary import default_bucket_limits

    lim = default_bucket_limits()
    # 774 limits from 1e-12 growing by 10% below 1e20, DBL_MAX, their negatives and 0
    assert len(lim) == 1551 and lim[775] == 0.0 and lim[776] == 1e-12
    assert lim[-1] == np.finfo(np.float64).max and lim[-2] < 1e20 <= lim[-2] * 1.1
    np.testing.assert_array_equal(lim[:775], -lim[776:][::-1])
    assert np.all(np.diff(lim) > 0)
