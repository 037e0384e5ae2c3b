"""Expected values for the queue, summary and legacy TensorArray/Stack kernels, computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_queue/generate.py

Queues live across steps, so they are TF1 graphs run step by step (``graph``); no step blocks
(TensorFlow would wait forever: tests/kernels/test_queue_summary.py covers blocking). Summary
ops are eager calls (``op``); their outputs are serialized Summary protos, compared as bytes
where dfg's serialization is TensorFlow's (scalars, histograms, tensors, audio), and for
images (PNG streams differ between encoders) also written to ``summaries.npz`` for
test_queue_summary.py, which compares the parsed protos and decoded pixels.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402,F401

rawgen.begin(HERE)
v1 = tf.compat.v1


def S(*xs):
    return np.array([x.encode() for x in xs], dtype=object)


def pwd(value, dtype=None):
    """A constant the graph builder cannot see through (for inputs its shape functions would
    reject before the kernel runs)."""
    t = tf.constant(value, dtype=dtype)
    return v1.placeholder_with_default(t, t.shape)


def steps_of(steps):
    """Steps with each target made an Operation (a dequeue's outputs name their op)."""
    out = []
    for fetches, targets, *more in steps:
        ops = [(t[0] if isinstance(t, (list, tuple)) else t) for t in targets]
        out.append((fetches, [getattr(t, "op", t) for t in ops], *more))
    return out


# =============================================================================================
# Queues

def fifo_graph():
    q = raw.FIFOQueueV2(component_types=[tf.float32, tf.int32, tf.string],
                        shapes=[[2], [], []], capacity=5, name="fifo")
    t = [tf.float32, tf.int32, tf.string]
    enq = raw.QueueEnqueueV2(handle=q, components=[np.array([1, 2], f32), np.int32(7),
                                                   S("a")[0]])
    enq2 = raw.QueueEnqueueV2(handle=q, components=[np.array([3, 4], f32), np.int32(8),
                                                    S("b")[0]])
    many = raw.QueueEnqueueManyV2(handle=q, components=[
        np.array([[5, 6], [7, 8]], f32), np.array([9, 10], i32), S("c", "d")])
    none = raw.QueueEnqueueManyV2(handle=q, components=[
        np.zeros((0, 2), f32), np.zeros((0,), i32), tf.constant([], tf.string)])
    bad_shape = raw.QueueEnqueueV2(handle=q, components=[np.array([1, 2, 3], f32),
                                                         np.int32(7), S("a")[0]])
    bad_dtype = raw.QueueEnqueueV2(handle=q, components=[np.array([1, 2], f64),
                                                         np.int32(7), S("a")[0]])
    bad_many = raw.QueueEnqueueManyV2(handle=q, components=[
        np.array([[5, 6], [7, 8]], f32), np.array([9, 10, 11], i32), S("c", "d")])
    timeout = raw.QueueEnqueueV2(handle=q, components=[np.array([1, 2], f32), np.int32(7),
                                                       S("a")[0]], timeout_ms=10)
    size = raw.QueueSizeV2(handle=q)
    closed = raw.QueueIsClosedV2(handle=q)
    deq = raw.QueueDequeueV2(handle=q, component_types=t)
    deq_many = raw.QueueDequeueManyV2(handle=q, n=2, component_types=t)
    deq_zero = raw.QueueDequeueManyV2(handle=q, n=0, component_types=t)
    deq_neg = raw.QueueDequeueManyV2(handle=q, n=pwd(-1), component_types=t)
    deq_neg_up = raw.QueueDequeueUpToV2(handle=q, n=pwd(-2), component_types=t)
    deq_vec = raw.QueueDequeueManyV2(handle=q, n=pwd([1, 5]), component_types=t)
    deq_types = raw.QueueDequeueV2(handle=q, component_types=[tf.float32, tf.int64, tf.string])
    up_to = raw.QueueDequeueUpToV2(handle=q, n=5, component_types=t)
    close = raw.QueueCloseV2(handle=q)
    close_cancel = raw.QueueCloseV2(handle=q, cancel_pending_enqueues=True)
    return steps_of([
        ([size, closed], []), ([], [enq]), ([], [enq2]), ([], [many]), ([size], []),
        ([], [none]), ([size], []), ([], [bad_shape]), ([], [bad_dtype]), ([], [bad_many]),
        ([], [timeout]), (list(deq), []), (list(deq_many), []), (list(deq_zero), []),
        ([], [deq_neg]), ([], [deq_neg_up]), (list(deq_vec), []), ([], [deq_types]),
        ([size], []), ([], [enq]), ([], [many]), ([size], []), ([], [close]),
        ([closed, size], []), ([], [enq]), ([], [none]), ([], [deq_many]),
        (list(up_to), []), ([size], []), ([], [deq]), ([], [up_to]), ([], [deq_many]),
        ([], [close]), ([], [close_cancel]), ([closed], []),
    ])


graph("queue_fifo", fifo_graph,
      ["FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
       "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2",
       "QueueIsClosedV2"])


def fifo_unshaped_graph():
    q = raw.FIFOQueueV2(component_types=[tf.int64, tf.float32], capacity=-1, name="free")
    t = [tf.int64, tf.float32]
    e1 = raw.QueueEnqueueV2(handle=q, components=[np.int64(3), np.zeros((2, 3), f32)])
    e2 = raw.QueueEnqueueV2(handle=q, components=[np.array([4, 5], i64),
                                                  np.ones((1,), f32)])
    many = raw.QueueEnqueueManyV2(handle=q, components=[np.array([[1, 2], [3, 4]], i64),
                                                        np.arange(6, dtype=f32).reshape(2, 3)])
    bad_many = raw.QueueEnqueueManyV2(handle=q, components=[pwd(np.array([1, 2], i64)),
                                                            pwd(np.zeros(3, f32))])
    deq = raw.QueueDequeueV2(handle=q, component_types=t)
    deq_many = raw.QueueDequeueManyV2(handle=q, n=1, component_types=t)
    deq_zero = raw.QueueDequeueUpToV2(handle=q, n=0, component_types=t)
    size = raw.QueueSizeV2(handle=q)
    return steps_of([([], [e1]), ([], [e2]), ([], [many]), ([], [bad_many]), ([size], []),
                     ([], [deq_many]), ([], [deq_zero]), (list(deq), []), (list(deq), []),
                     (list(deq), []), (list(deq), []), ([size], [])])


graph("queue_fifo_unshaped", fifo_unshaped_graph,
      ["FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2",
       "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueSizeV2"])


def padding_graph():
    q = raw.PaddingFIFOQueueV2(component_types=[tf.int32, tf.string, tf.float64],
                               shapes=[[None, 2], [None], []], capacity=10, name="pad")
    t = [tf.int32, tf.string, tf.float64]
    e1 = raw.QueueEnqueueV2(handle=q, components=[np.ones((1, 2), i32), S("x"), np.float64(1)])
    e2 = raw.QueueEnqueueV2(handle=q, components=[np.full((3, 2), 2, i32), S("y", "z"),
                                                  np.float64(2)])
    e3 = raw.QueueEnqueueManyV2(handle=q, components=[
        np.full((2, 2, 2), 3, i32), np.array([[b"p"], [b"q"]], dtype=object),
        np.array([3, 4], f64)])
    e4 = raw.QueueEnqueueV2(handle=q, components=[np.zeros((0, 2), i32), tf.constant([], tf.string),
                                                  np.float64(5)])
    bad = raw.QueueEnqueueV2(handle=q, components=[np.ones((3, 3), i32), S("y"),
                                                   np.float64(0)])
    bad_many = raw.QueueEnqueueManyV2(handle=q, components=[
        np.ones((2, 2, 3), i32), np.array([[b"p"], [b"q"]], dtype=object),
        np.array([3, 4], f64)])
    many = raw.QueueDequeueManyV2(handle=q, n=3, component_types=t)
    zero = raw.QueueDequeueManyV2(handle=q, n=0, component_types=t)
    deq = raw.QueueDequeueV2(handle=q, component_types=t)
    up_to = raw.QueueDequeueUpToV2(handle=q, n=4, component_types=t)
    close = raw.QueueCloseV2(handle=q)
    size = raw.QueueSizeV2(handle=q)
    steps = [([], [e1]), ([], [e2]), ([], [e3]), ([], [bad]), ([], [bad_many]), ([size], []),
            (list(many), []), (list(zero), []), (list(deq), []), ([], [e4]), ([], [e1]),
            ([], [e2]), ([], [close]), (list(up_to), []), ([size], []), ([], [up_to])]
    return steps_of(steps)


graph("queue_padding", padding_graph,
      ["PaddingFIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueManyV2",
       "QueueDequeueV2", "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2"])


def priority_graph():
    q = raw.PriorityQueueV2(component_types=[tf.string, tf.float32], shapes=[[], [2]],
                            capacity=-1, name="prio")
    t = [tf.int64, tf.string, tf.float32]
    pr = np.array([3, 1, 2, 1, 3, 0, 1, 2, 1, 1, 1, 0, -4, 1], i64)
    vals = S(*"abcdefghijklmn")
    vecs = np.arange(28, dtype=f32).reshape(14, 2)
    many = raw.QueueEnqueueManyV2(handle=q, components=[pr, vals, vecs])
    one = raw.QueueEnqueueV2(handle=q, components=[np.int64(1), S("o")[0],
                                                   np.array([-1, -2], f32)])
    bad = raw.QueueEnqueueV2(handle=q, components=[np.int64(1), S("o")[0],
                                                   np.array([-1, -2, -3], f32)])
    deq = raw.QueueDequeueV2(handle=q, component_types=t)
    deq4 = raw.QueueDequeueManyV2(handle=q, n=4, component_types=t)
    deq9 = raw.QueueDequeueManyV2(handle=q, n=9, component_types=t)
    up_to = raw.QueueDequeueUpToV2(handle=q, n=6, component_types=t)
    zero = raw.QueueDequeueManyV2(handle=q, n=0, component_types=t)
    close = raw.QueueCloseV2(handle=q)
    size = raw.QueueSizeV2(handle=q)
    return steps_of([([], [many]), ([], [one]), ([], [bad]), ([size], []), (list(deq4), []),
                     (list(deq), []), (list(up_to), []), (list(zero), []), ([], [close]),
                     ([], [deq9]), ([size], []), ([], [up_to]), ([size], []), ([], [deq])])


graph("queue_priority", priority_graph,
      ["PriorityQueueV2", "QueueEnqueueManyV2", "QueueEnqueueV2", "QueueDequeueV2",
       "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2"])


def shuffle_graph():
    q = raw.RandomShuffleQueueV2(component_types=[tf.int32, tf.float32], shapes=[[], [2]],
                                 capacity=20, min_after_dequeue=2, seed=7, seed2=11,
                                 name="shuffle")
    t = [tf.int32, tf.float32]
    enq = raw.QueueEnqueueManyV2(handle=q, components=[
        np.arange(10, dtype=i32), np.arange(20, dtype=f32).reshape(10, 2)])
    one = raw.QueueEnqueueV2(handle=q, components=[np.int32(99), np.array([9, 9], f32)])
    deq = raw.QueueDequeueV2(handle=q, component_types=t)
    many = raw.QueueDequeueManyV2(handle=q, n=4, component_types=t)
    up_to = raw.QueueDequeueUpToV2(handle=q, n=3, component_types=t)
    close = raw.QueueCloseV2(handle=q)
    size = raw.QueueSizeV2(handle=q)
    # seed 0 with a nonzero seed2 is a fixed seed too
    q2 = raw.RandomShuffleQueueV2(component_types=[tf.int64], shapes=[[]], capacity=8,
                                  min_after_dequeue=0, seed=0, seed2=-3, name="shuffle2")
    enq2 = raw.QueueEnqueueManyV2(handle=q2, components=[np.arange(8, dtype=i64) * 10])
    many2 = raw.QueueDequeueManyV2(handle=q2, n=8, component_types=[tf.int64])
    return steps_of([([], [enq]), (list(many), []), (list(deq), []), ([], [one]),
                     (list(deq), []), (list(up_to), []), ([size], []), ([], [close]),
                     (list(up_to), []), (list(up_to), []), ([size], []), ([], [deq]),
                     ([], [enq2]), (list(many2), [])])


graph("queue_shuffle", shuffle_graph,
      ["RandomShuffleQueueV2", "QueueEnqueueManyV2", "QueueEnqueueV2", "QueueDequeueV2",
       "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2"])


def v1_graph():
    """The ref-handle (V1) queue ops."""
    steps = []
    q = raw.FIFOQueue(component_types=[tf.int32], shapes=[[]], capacity=10, name="fifo1")
    enq = raw.QueueEnqueue(handle=q, components=[np.int32(5)])
    many = raw.QueueEnqueueMany(handle=q, components=[np.array([1, 2, 3], i32)])
    deq = raw.QueueDequeue(handle=q, component_types=[tf.int32])
    deq2 = raw.QueueDequeueMany(handle=q, n=2, component_types=[tf.int32])
    up = raw.QueueDequeueUpTo(handle=q, n=9, component_types=[tf.int32])
    close = raw.QueueClose(handle=q)
    size = raw.QueueSize(handle=q)
    isc = raw.QueueIsClosed(handle=q)
    steps += [([], [enq]), ([], [many]), ([size, isc], []), (deq, []), (deq2, []),
              ([], [close]), ([isc], []), (up, []), ([], [deq])]
    p = raw.PaddingFIFOQueue(component_types=[tf.float32], shapes=[[None]], capacity=4,
                             name="pad1")
    pe = raw.QueueEnqueue(handle=p, components=[np.array([1, 2], f32)])
    pe2 = raw.QueueEnqueue(handle=p, components=[np.array([3], f32)])
    pm = raw.QueueDequeueMany(handle=p, n=2, component_types=[tf.float32])
    steps += [([], [pe]), ([], [pe2]), (pm, [])]
    r = raw.PriorityQueue(component_types=[tf.int32], shapes=[[]], name="prio1")
    re = raw.QueueEnqueueMany(handle=r, components=[np.array([5, 2, 9], i64),
                                                    np.array([50, 20, 90], i32)])
    rd = raw.QueueDequeueMany(handle=r, n=3, component_types=[tf.int64, tf.int32])
    steps += [([], [re]), (rd, [])]
    s = raw.RandomShuffleQueue(component_types=[tf.int32], shapes=[[]], capacity=10,
                               min_after_dequeue=1, seed=5, seed2=6, name="shuffle1")
    se = raw.QueueEnqueueMany(handle=s, components=[np.arange(6, dtype=i32)])
    sd = raw.QueueDequeueMany(handle=s, n=5, component_types=[tf.int32])
    steps += [([], [se]), (sd, [])]
    return steps_of(steps)


graph("queue_v1", v1_graph,
      ["FIFOQueue", "QueueEnqueue", "QueueEnqueueMany", "QueueDequeue", "QueueDequeueMany",
       "QueueDequeueUpTo", "QueueClose", "QueueSize", "QueueIsClosed", "PaddingFIFOQueue",
       "PriorityQueue", "RandomShuffleQueue"])


def shared_graph():
    """Queues shared by name: one queue for several nodes, whose attrs must agree."""
    a = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=3,
                        shared_name="s", name="a")
    b = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=3,
                        shared_name="s", name="b")
    other = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=3,
                            shared_name="s", container="elsewhere", name="other")
    cap = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=4,
                          shared_name="s", name="cap")
    typ = raw.FIFOQueueV2(component_types=[tf.float64], shapes=[[2]], capacity=3,
                          shared_name="s", name="typ")
    shp = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[3]], capacity=3,
                          shared_name="s", name="shp")
    kind = raw.PaddingFIFOQueueV2(component_types=[tf.float32], shapes=[[2]], capacity=3,
                                  shared_name="s", name="kind")
    enq = raw.QueueEnqueueV2(handle=a, components=[np.array([1, 2], f32)])
    p1 = raw.PaddingFIFOQueueV2(component_types=[tf.int32], shapes=[[None, 3]], capacity=3,
                                shared_name="p", name="p1")
    p2 = raw.PaddingFIFOQueueV2(component_types=[tf.int32], shapes=[[4, None]], capacity=3,
                                shared_name="p", name="p2")
    p3 = raw.PaddingFIFOQueueV2(component_types=[tf.int32], shapes=[[4, 4]], capacity=3,
                                shared_name="p", name="p3")
    r1 = raw.RandomShuffleQueueV2(component_types=[tf.int32], capacity=3, min_after_dequeue=1,
                                  seed=1, seed2=2, shared_name="r", name="r1")
    r2 = raw.RandomShuffleQueueV2(component_types=[tf.int32], capacity=3, min_after_dequeue=1,
                                  seed=0, seed2=0, shared_name="r", name="r2")
    r3 = raw.RandomShuffleQueueV2(component_types=[tf.int32], capacity=3, min_after_dequeue=1,
                                  seed=1, seed2=3, shared_name="r", name="r3")
    r4 = raw.RandomShuffleQueueV2(component_types=[tf.int32], capacity=3, min_after_dequeue=0,
                                  seed=1, seed2=2, shared_name="r", name="r4")

    def sz(h):
        return raw.QueueSizeV2(handle=h)

    # one creation per step where the order of creation matters (TF runs a step's
    # independent nodes in no fixed order)
    return [([], [enq]), ([sz(a), sz(b), sz(other)], []), ([sz(cap)], []), ([sz(typ)], []),
            ([sz(shp)], []), ([sz(kind)], []), ([sz(p1)], []), ([sz(p2)], []), ([sz(p3)], []),
            ([sz(r1)], []), ([sz(r2)], []), ([sz(r3)], []), ([sz(r4)], [])]


graph("queue_shared", shared_graph,
      ["FIFOQueueV2", "PaddingFIFOQueueV2", "RandomShuffleQueueV2", "QueueSizeV2",
       "QueueEnqueueV2"])


def bad_queues_graph():
    """Queues whose attrs TensorFlow's kernels refuse (each fails in its own step)."""
    bad = [
        raw.FIFOQueueV2(component_types=[tf.float32, tf.int32], shapes=[[1]], name="count"),
        raw.PaddingFIFOQueueV2(component_types=[tf.float32], shapes=[], name="noshape"),
        raw.PriorityQueueV2(component_types=[tf.float32], shapes=[], name="prio_noshape"),
        raw.PriorityQueueV2(component_types=[tf.float32], shapes=[[], []], name="prio_count"),
        raw.RandomShuffleQueueV2(component_types=[tf.float32], capacity=2,
                                 min_after_dequeue=2, name="min_big"),
        raw.RandomShuffleQueueV2(component_types=[tf.float32], capacity=-1,
                                 min_after_dequeue=-1, name="min_neg"),
    ]
    zero = raw.FIFOQueueV2(component_types=[tf.float32], shapes=[[]], capacity=0, name="zero")
    zclose = raw.QueueCloseV2(handle=zero)
    zenq = raw.QueueEnqueueManyV2(handle=zero, components=[np.zeros((0,), f32)])
    return [([raw.QueueSizeV2(handle=h)], []) for h in bad] + [
        ([raw.QueueSizeV2(handle=zero)], []), ([], [zenq]), ([], [zclose])]


graph("queue_bad", bad_queues_graph,
      ["FIFOQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2", "RandomShuffleQueueV2",
       "QueueSizeV2", "QueueCloseV2", "QueueEnqueueManyV2"])


def input_pipeline_graph():
    """What TF1 input code builds: string_input_producer and batch (their queue runners'
    enqueue ops run here as steps) and the queue-fill summaries they add."""
    names = v1.train.string_input_producer(["a.txt", "b.txt", "c.txt"], shuffle=False,
                                           num_epochs=None, capacity=8)
    runner = v1.get_collection(v1.GraphKeys.QUEUE_RUNNERS)[0]
    name = names.dequeue()
    x = tf.strings.length(name)
    batch = v1.train.batch([name, x], batch_size=2, capacity=6, dynamic_pad=True)
    runner2 = v1.get_collection(v1.GraphKeys.QUEUE_RUNNERS)[1]
    merged = v1.summary.merge_all()
    return [([], [runner.enqueue_ops[0]]), ([], [runner2.enqueue_ops[0]]),
            ([], [runner2.enqueue_ops[0]]), ([merged], []), (list(batch), []),
            ([], [runner.close_op]), ([names.size()], [])]


graph("queue_input_pipeline", input_pipeline_graph,
      ["FIFOQueueV2", "PaddingFIFOQueueV2", "QueueEnqueueManyV2", "QueueEnqueueV2",
       "QueueDequeueV2", "QueueDequeueManyV2", "QueueCloseV2", "QueueSizeV2",
       "ScalarSummary", "MergeSummary"])



# =============================================================================================
# Summaries. Each case is one step fetching the serialized proto with "$" appended: rawgen
# stores strings without their trailing NULs, and most serialized histograms end in one
# (the count 0.0 of the last, empty, bucket run).

rng = np.random.default_rng(7)


def summaries(name, ops, builders):
    def build():
        steps = []
        for make in builders:
            out = make()
            steps.append(([tf.strings.join([out, "$"])], []))
        return steps
    graph(name, build, ops)


def old_graph(name, ops, producer, nodes):
    """Ops TF's Python refuses to build (deprecated before the current GraphDef version): a
    GraphDef of an old producer version, imported. ``nodes``: (name, op, inputs as numpy
    arrays, attrs as AttrValue setters)."""
    def build():
        g0 = tf.Graph()
        with g0.as_default():
            for n, (_node, _op, inputs, _attrs) in enumerate(nodes):
                for k, x in enumerate(inputs):
                    tf.constant(x, name=f"in{n}_{k}")
        gd = g0.as_graph_def()
        for n, (node, op_type, inputs, attrs) in enumerate(nodes):
            nd = gd.node.add()
            nd.name, nd.op = node, op_type
            nd.input.extend(f"in{n}_{k}" for k in range(len(inputs)))
            attrs(nd.attr)
        gd.versions.producer = producer
        tf.graph_util.import_graph_def(gd, name="")
        g = v1.get_default_graph()
        return [([tf.strings.join([g.get_tensor_by_name(f"{node}:0"), "$"])], [])
                for node, *_ in nodes]
    graph(name, build, ops)


def scalar(values, tags=None, dtype=None):
    values = np.asarray(values, dtype=dtype)
    if tags is None:
        tags = np.array([f"s{i}".encode() for i in range(values.size)],
                        dtype=object).reshape(values.shape)
    return lambda: raw.ScalarSummary(tags=tags, values=values)


summaries("summary_scalar", ["ScalarSummary"], [
    scalar([1.5, -2.0, 0.0, 3.25], dtype=f32),
    scalar([1 / 3, -1e300, 2.5e-46, 7.0], dtype=f64),
    scalar(np.array([[1, -7], [2**31 - 1, 5]], i32)),
    scalar(np.array([2**40 + 1, -(2**62) - 3, 9], i64)),
    scalar(np.array([0, 255, 17], np.uint8)),
    scalar(np.array([-128, 5], np.int8)),
    scalar(np.array([-3000, 7], np.int16)),
    scalar(np.array([65535, 1], np.uint16)),
    scalar(np.array([2**32 - 1, 3], np.uint32)),
    scalar(np.array([2**64 - 1, 3], np.uint64)),
    scalar(np.array([0.1, -65504, 6.0e-8, 1], np.float16)),
    lambda: raw.ScalarSummary(tags=S("b0", "b1"), values=tf.constant([0.3, -7.7], tf.bfloat16)),
    scalar(np.float32(2.5), tags=np.array(b"scalar", dtype=object)),
    scalar(np.array([np.nan, -np.inf, np.inf, 1.0], f32)),
    scalar(np.zeros((0, 2), f32), tags=np.zeros((0, 2), dtype=object).astype(bytes)),
    scalar(np.array([1.0, 2.0], f32), tags=S("dup", "dup")),
    lambda: raw.ScalarSummary(tags=S("a", "b"), values=pwd(np.float32(1))),
    lambda: raw.ScalarSummary(tags=pwd(S("a", "b")), values=pwd(np.ones((2, 1), f32))),
])


def histo(values, tag="h"):
    return lambda: raw.HistogramSummary(tag=tag, values=values)


_normal = (rng.standard_normal(200) * 10).astype(f32)
_normal[:5] = [0, 1e-13, -1e-13, 1e-12, -1e-12]
summaries("summary_histogram", ["HistogramSummary"], [
    histo(_normal),
    histo(rng.standard_normal((4, 5)) * 1e5),
    histo(np.array([0.0, 0.0, 1.0, 1.1, 1.2100000000000002, -1.1, 1e25, -1e25, 5e-300], f64)),
    histo(rng.integers(-1000, 1000, 50).astype(i32)),
    histo(rng.integers(0, 256, 30).astype(np.uint8)),
    histo(np.array([2**62, -(2**40), 3, 3, 3], i64)),
    histo(np.array([2**64 - 1, 0, 12], np.uint64)),
    histo(np.array([0.5, -0.25, 100, 65504], np.float16)),
    lambda: raw.HistogramSummary(tag="bf", values=tf.constant([0.3, -7.7, 1e30], tf.bfloat16)),
    histo(np.array([-7, 7], np.int8)), histo(np.array([300, -300], np.int16)),
    histo(np.array([65000, 3], np.uint16)), histo(np.array([4e9, 3], np.uint32)),
    histo(np.zeros((0,), f32)),
    histo(np.float32(42.0)),
    histo(np.array([1.0, np.nan, np.inf], f32)),
    histo(np.array([1.0, -np.inf, np.nan], f64)),
    lambda: raw.HistogramSummary(tag=pwd(S("a", "b")), values=np.ones(3, f32)),
])


def image(tensor, **attrs):
    if "bad_color" in attrs:
        attrs["bad_color"] = tf.make_tensor_proto(attrs["bad_color"])
    return lambda: raw.ImageSummary(tag="img", tensor=tensor, **attrs)


_big = rng.integers(0, 256, (1, 56, 56, 3)).astype(np.uint8)
_flt = rng.random((2, 4, 5, 3)).astype(f32) * 3
_neg = (rng.standard_normal((1, 3, 4, 3)) * 2).astype(f32)
_bad = _neg.copy()
_bad[0, 0, 0, 1], _bad[0, 1, 2, 0], _bad[0, 2, 3, 2] = np.nan, np.inf, -np.inf
summaries("summary_image", ["ImageSummary"], [
    image(rng.integers(0, 256, (2, 3, 4, 3)).astype(np.uint8)),
    image(rng.integers(0, 256, (1, 5, 4, 1)).astype(np.uint8), max_images=1),
    image(rng.integers(0, 256, (4, 2, 3, 4)).astype(np.uint8), max_images=2),
    image(np.tile(np.arange(40, dtype=np.uint8).reshape(1, 5, 8, 1), (1, 1, 1, 3))),
    image(_big),
    image(_flt),
    image(_neg),
    image(_bad),
    image(_bad, bad_color=np.array([0, 255, 0], np.uint8)),
    image(np.full((1, 2, 2, 1), np.nan, f32)),
    image(np.zeros((1, 3, 3, 4), f32)),
    image(np.full((1, 2, 3, 1), 5e-7, f32)),
    image(np.array([[[[1e-7], [-2e-7]]]], f32)),
    image((rng.random((1, 4, 4, 3)) * 7 - 2).astype(np.float16)),
    image(rng.random((1, 3, 3, 1)) * 1e-3),
    image(np.zeros((0, 2, 2, 3), f32)),
    image(np.zeros((2, 2, 3), f32)),
    image(np.zeros((1, 2, 2, 2), f32)),
    image(np.zeros((1, 0, 2, 3), f32)),
    image(np.zeros((1, 2, 2, 4), f32), bad_color=np.array([1, 2, 3], np.uint8)),
    image(np.zeros((1, 2, 2, 4), np.uint8), bad_color=np.array([1, 2, 3], np.uint8)),
    lambda: raw.ImageSummary(tag=pwd(S("a", "b")), tensor=np.zeros((1, 2, 2, 1), f32)),
])


def audio(tensor, rate=8000.0, **attrs):
    return lambda: raw.AudioSummaryV2(tag="snd", tensor=tensor, sample_rate=rate, **attrs)


_ties = np.array([[0.5, -0.5, 1.5, -1.5, 2.5, 0.0, 32766.5, -32767.5]], f32) / 32768
summaries("summary_audio", ["AudioSummaryV2"], [
    audio(np.array([[0.0, 0.25, -0.5, 1.0, -1.0], [1.2, -1.3, 0.999, -0.001, 1e-6]], f32)),
    audio(_ties, rate=np.float32(8000.5)),
    audio(rng.uniform(-1, 1, (2, 4, 2)).astype(f32), rate=44100.0, max_outputs=1),
    audio(rng.uniform(-1, 1, (4, 3)).astype(f32), rate=np.array([22050.0], f32)),
    audio(np.zeros((1, 0), f32), rate=0.4),
    audio(np.zeros((0, 5), f32)),
    audio(np.zeros((1, 3), f32), rate=0.0),
    audio(np.zeros((1, 3), f32), rate=-2.0),
    audio(np.zeros((1, 3), f32), rate=np.array([1.0, 2.0], f32)),
    lambda: raw.AudioSummaryV2(tag="snd", tensor=pwd(np.zeros(5, f32)), sample_rate=8000.0),
    audio(np.zeros((1, 2, 3, 1), f32)),
    lambda: raw.AudioSummaryV2(tag=pwd(S("a", "b")), tensor=np.zeros((1, 3), f32),
                               sample_rate=8000.0),
])


def _audio_attrs(rate, max_outputs=3):
    def set_attrs(attr):
        attr["sample_rate"].f = rate
        attr["max_outputs"].i = max_outputs
    return set_attrs


old_graph("summary_audio_v1", ["AudioSummary"], 14, [
    ("a1", "AudioSummary", [S("old")[0], np.array([[0.5, -0.25, 0.125]], f32)],
     _audio_attrs(16000.0)),
    ("a2", "AudioSummary", [S("old")[0], rng.uniform(-1, 1, (3, 2, 2)).astype(f32)],
     _audio_attrs(11025.5, 2)),
    ("a3", "AudioSummary", [S("old")[0], np.zeros((1, 2), f32)], _audio_attrs(-1.0)),
])


def tsum(tensor, metadata=b"", tag="t"):
    return lambda: raw.TensorSummaryV2(tag=tag, tensor=tensor,
                                       serialized_summary_metadata=metadata)


def _metadata():
    from tensorflow.core.framework import summary_pb2
    m = summary_pb2.SummaryMetadata()
    m.plugin_data.plugin_name = "scalars"
    m.plugin_data.content = b"\x08\x01"
    m.display_name = "shown"
    m.summary_description = "about"
    m.data_class = summary_pb2.DATA_CLASS_SCALAR
    return m.SerializeToString()


summaries("summary_tensor", ["TensorSummaryV2", "TensorSummary"], [
    tsum(np.arange(6, dtype=i32).reshape(2, 3)),
    tsum(np.float32(3.0), metadata=_metadata()),
    tsum(S("a", "bc", "")),
    tsum(np.array([True, False]), tag="flags"),
    tsum(np.array([1.5, -2], np.float16)),
    tsum(np.array([1 + 2j], np.complex64)),
    tsum(np.array([2**64 - 1], np.uint64)),
    tsum(np.zeros((0, 3), f64)),
    tsum(np.int8(-3)),
    lambda: raw.TensorSummaryV2(tag="bf", tensor=tf.constant([1.5, -2.25, 3.1], tf.bfloat16),
                                serialized_summary_metadata=b""),
    lambda: raw.TensorSummary(tensor=tf.constant(0.3, tf.bfloat16), name="bf_v1"),
    lambda: raw.TensorSummaryV2(tag=pwd(S("a", "b")), tensor=np.zeros(2, f32),
                                serialized_summary_metadata=b""),
    lambda: raw.TensorSummaryV2(tag="t", tensor=np.zeros(2, f32),
                                serialized_summary_metadata=pwd(S("a", "b"))),
    lambda: raw.TensorSummary(tensor=np.arange(3, dtype=i64), name="tensor_v1"),
    lambda: raw.TensorSummary(tensor=S("x"), description="d", labels=["l1", "l2"],
                              display_name="n", name="tensor_v1_str"),
])


def merged(*parts):
    return lambda: raw.MergeSummary(inputs=[p() for p in parts])


def _const(x):
    return lambda: tf.constant(x)


summaries("summary_merge", ["MergeSummary", "ScalarSummary", "HistogramSummary",
                            "TensorSummary"], [
    merged(scalar([1.0, 2.0], dtype=f32), histo(np.arange(5, dtype=f32), tag="hh")),
    merged(lambda: raw.TensorSummary(tensor=[1.0], name="n1"),
           lambda: raw.TensorSummary(tensor=[2.0], name="n2")),
    merged(lambda: tf.stack([raw.ScalarSummary(tags="x", values=np.float32(1)),
                             raw.ScalarSummary(tags="y", values=np.float32(2))]),
           _const(np.array([b""], dtype=object))),
    merged(scalar([1.0], tags=S("same"), dtype=f32), scalar([2.0], tags=S("same"), dtype=f32)),
    merged(_const(np.array(b"\xff\xff", dtype=object))),
])


def writers_graph():
    w = raw.SummaryWriter(shared_name="w1")
    w2 = raw.SummaryWriter(shared_name="w2")
    w3 = raw.SummaryWriter(shared_name="w3")
    logdir = "/tmp/dfg_raw_ops_queue_summaries"
    create = raw.CreateSummaryFileWriter(writer=w, logdir=logdir, max_queue=10,
                                         flush_millis=1000, filename_suffix=".x")
    create_bad = raw.CreateSummaryFileWriter(writer=w, logdir=pwd(S(logdir, logdir)),
                                             max_queue=10, flush_millis=1000,
                                             filename_suffix=".x")
    db = raw.CreateSummaryDbWriter(writer=w3, db_uri=logdir + "/db.sqlite",
                                   experiment_name="e", run_name="r", user_name="u")
    one = np.int64(1)

    def scalar_w(writer, value):
        return raw.WriteScalarSummary(writer=writer, step=one, tag="t", value=value)

    steps = [
        scalar_w(w, np.float32(2)), raw.FlushSummaryWriter(writer=w), create_bad, create,
        scalar_w(w, np.float32(2)), scalar_w(w, pwd(np.array([1, 2], i32))),
        scalar_w(w2, np.float32(1)),
        raw.WriteHistogramSummary(writer=w, step=one, tag="h", values=np.arange(4, dtype=f32)),
        raw.WriteHistogramSummary(writer=w, step=one, tag="h",
                                  values=np.array([1.0, np.nan], f32)),
        raw.WriteHistogramSummary(writer=w, step=one, tag="h", values=np.array([True, False])),
        raw.WriteImageSummary(writer=w, step=one, tag="i", tensor=np.zeros((1, 2, 2, 3), f32),
                              bad_color=np.array([255, 0, 0], np.uint8)),
        raw.WriteImageSummary(writer=w, step=one, tag="i",
                              tensor=pwd(np.zeros((2, 2, 3), f32)),
                              bad_color=np.array([255, 0, 0], np.uint8)),
        raw.WriteImageSummary(writer=w, step=one, tag="i", tensor=np.zeros((1, 2, 2, 3), f32),
                              bad_color=pwd(np.uint8(255))),
        raw.WriteImageSummary(writer=w, step=one, tag="i", tensor=np.zeros((1, 2, 2, 3), f32),
                              bad_color=np.array([255, 0], np.uint8)),
        raw.WriteImageSummary(writer=w, step=one, tag="i",
                              tensor=np.zeros((1, 2, 2, 3), np.uint8),
                              bad_color=np.array([255, 0], np.uint8), max_images=1),
        raw.WriteAudioSummary(writer=w, step=one, tag="a", tensor=np.zeros((1, 5), f32),
                              sample_rate=8000.0),
        raw.WriteAudioSummary(writer=w, step=one, tag="a", tensor=np.zeros((1, 5), f32),
                              sample_rate=pwd(np.float32(-1))),
        raw.WriteSummary(writer=w, step=one, tensor=np.zeros(2, i32), tag="x",
                         summary_metadata=""),
        raw.WriteSummary(writer=w, step=one, tensor=S("q"), tag="x",
                         summary_metadata=_metadata()),
        raw.WriteRawProtoSummary(writer=w, step=one, tensor=S("")),
        raw.WriteRawProtoSummary(writer=w, step=one, tensor=np.array([b"", b"\xff\xff"])),
        raw.WriteGraphSummary(writer=w, step=one, tensor=b""),
        raw.WriteGraphSummary(writer=w, step=one, tensor=b"\xff\xff"),
        raw.FlushSummaryWriter(writer=w), raw.FlushSummaryWriter(writer=w2),
        raw.CloseSummaryWriter(writer=w2), raw.CloseSummaryWriter(writer=w),
        scalar_w(w, np.float32(2)), raw.CloseSummaryWriter(writer=w), create,
        scalar_w(w, np.float32(3)), db, scalar_w(w3, np.float32(4)),
        raw.CloseSummaryWriter(writer=w3),
    ]
    return [([], [s]) for s in steps]


graph("summary_writers", writers_graph,
      ["SummaryWriter", "CreateSummaryFileWriter", "CreateSummaryDbWriter",
       "WriteScalarSummary", "WriteHistogramSummary", "WriteImageSummary",
       "WriteAudioSummary", "WriteSummary", "WriteRawProtoSummary", "WriteGraphSummary",
       "FlushSummaryWriter", "CloseSummaryWriter"])



# =============================================================================================
# Legacy TensorArray ops (V1 ref handles, deprecated at GraphDef version 16; V2 string handles,
# at 26) in GraphDefs of producer version 15, and v1 stacks. TensorArrays live for one run:
# each step is a scenario of its own.

def _attr(av, v):
    if isinstance(v, tf.DType):
        av.type = v.as_datatype_enum
    elif isinstance(v, bool):
        av.b = v
    elif isinstance(v, int):
        av.i = v
    elif isinstance(v, float):
        av.f = v
    elif isinstance(v, str):
        av.s = v.encode()
    elif isinstance(v, tf.TensorShape):
        av.shape.CopyFrom(v.as_proto())
    else:
        raise TypeError(v)


def imported_graph(name, ops, producer, consts, nodes, steps):
    """A GraphDef of the given producer version: ``consts`` (name -> array), ``nodes``
    (name, op, input names, attrs), and steps of (fetched tensor names, target names)."""
    def build():
        g0 = tf.Graph()
        with g0.as_default():
            for cname, x in consts.items():
                tf.constant(x, name=cname)
        gd = g0.as_graph_def()
        for node, op_type, inputs, attrs in nodes:
            nd = gd.node.add()
            nd.name, nd.op = node, op_type
            nd.input.extend(inputs)
            for k, v in attrs.items():
                _attr(nd.attr[k], v)
        gd.versions.producer = producer
        tf.graph_util.import_graph_def(gd, name="")
        g = v1.get_default_graph()
        return [([g.get_tensor_by_name(t) for t in fetch],
                 [g.get_operation_by_name(t) for t in targets]) for fetch, targets in steps]
    graph(name, build, ops)


_F = tf.float32
_ta_consts = {
    "flow": np.float32(0), "i0": np.int32(0), "i1": np.int32(1), "i2": np.int32(2),
    "i5": np.int32(5), "n0": np.int32(0), "n2": np.int32(2), "n3": np.int32(3),
    "v12": np.array([1, 2], f32), "v34": np.array([3, 4], f32), "v56": np.array([5, 6], f32),
    "m32": np.arange(6, dtype=f32).reshape(3, 2), "m42": np.arange(8, dtype=f32).reshape(4, 2),
    "idx201": np.array([2, 0, 1], i32), "idx20": np.array([2, 0], i32),
    "vec5": np.arange(5, dtype=f32), "len23": np.array([2, 3], i64), "iv": np.int32(7),
}


def _ta_nodes(v):
    """The scenarios with V1 op names (v="") or V2 ones (v="V2")."""
    nodes, steps = [], []

    def add(name, op_type, inputs, **attrs):
        nodes.append((name, op_type + v, inputs, attrs))

    # write three rows, pack them (V1) / gather them (V2), and the size
    add("a", "TensorArray", ["n3"], dtype=_F)
    add("a_w0", "TensorArrayWrite", ["a", "i0", "v12", "flow"], T=_F)
    add("a_w1", "TensorArrayWrite", ["a", "i1", "v34", "a_w0"], T=_F)
    add("a_w2", "TensorArrayWrite", ["a", "i2", "v56", "a_w1"], T=_F)
    add("a_size", "TensorArraySize", ["a", "a_w2"])
    if v:
        add("a_all", "TensorArrayGather", ["a", "idx201", "a_w2"], dtype=_F)
    else:
        nodes.append(("a_all", "TensorArrayPack", ["a", "a_w2"], {"dtype": _F}))
    steps.append((["a_all:0", "a_size:0"], []))
    # unpack (V1) / scatter (V2) then read and gather, keeping what was read
    add("b", "TensorArray", ["n3"], dtype=_F, clear_after_read=False)
    if v:
        add("b_in", "TensorArrayScatter", ["b", "idx201", "m32", "flow"], T=_F)
    else:
        nodes.append(("b_in", "TensorArrayUnpack", ["b", "m32", "flow"], {"T": _F}))
    add("b_r", "TensorArrayRead", ["b", "i1", "b_in"], dtype=_F)
    add("b_g", "TensorArrayGather", ["b", "idx20", "b_in"], dtype=_F)
    steps.append((["b_r:0", "b_g:0"], []))
    # scatter and concat
    add("c", "TensorArray", ["n3"], dtype=_F)
    add("c_s", "TensorArrayScatter", ["c", "idx201", "m32", "flow"], T=_F)
    add("c_cat", "TensorArrayConcat", ["c", "c_s"], dtype=_F)
    steps.append((["c_cat:0", "c_cat:1"], []))
    # split, read, close
    add("d", "TensorArray", ["n2"], dtype=_F)
    add("d_sp", "TensorArraySplit", ["d", "vec5", "len23", "flow"], T=_F)
    add("d_r", "TensorArrayRead", ["d", "i1", "d_sp"], dtype=_F)
    add("d_close", "TensorArrayClose", ["d", "^d_r"])
    steps.append((["d_r:0"], ["d_close"]))
    add("d_after", "TensorArrayRead", ["d", "i0", "d_sp", "^d_close"], dtype=_F)
    steps.append((["d_after:0"], []))
    # a gradient array: same size, writes aggregate
    add("e", "TensorArray", ["n2"], dtype=_F)
    add("e_w", "TensorArrayWrite", ["e", "i0", "v12", "flow"], T=_F)
    add("e_grad", "TensorArrayGrad", ["e", "e_w"], source="gradients")
    add("e_gw", "TensorArrayWrite", ["e_grad", "i1", "v34", "e_w"], T=_F)
    add("e_gw2", "TensorArrayWrite", ["e_grad", "i1", "v56", "e_gw"], T=_F)
    add("e_gr", "TensorArrayRead", ["e_grad", "i1", "e_gw2"], dtype=_F)
    add("e_gsize", "TensorArraySize", ["e_grad", "e_gw2"])
    steps.append((["e_gr:0", "e_gsize:0"], []))
    # a dynamic array grows
    add("f", "TensorArray", ["n0"], dtype=_F, dynamic_size=True,
        element_shape=tf.TensorShape([2]))
    if v:
        add("f_in", "TensorArrayScatter", ["f", "idx201", "m32", "flow"], T=_F)
    else:
        nodes.append(("f_in", "TensorArrayUnpack", ["f", "m32", "flow"], {"T": _F}))
    add("f_size", "TensorArraySize", ["f", "f_in"])
    add("f_w", "TensorArrayWrite", ["f", "i5", "v12", "f_in"], T=_F)
    add("f_size2", "TensorArraySize", ["f", "f_w"])
    steps.append((["f_size:0", "f_size2:0"], []))
    # errors: reading past the end, a write of the wrong dtype, a second close
    add("g", "TensorArray", ["n2"], dtype=_F)
    add("g_r", "TensorArrayRead", ["g", "i5", "flow"], dtype=_F)
    steps.append((["g_r:0"], []))
    add("h", "TensorArray", ["n2"], dtype=_F)
    add("h_w", "TensorArrayWrite", ["h", "i0", "iv", "flow"], T=tf.int32)
    steps.append((["h_w:0"], []))
    add("k", "TensorArray", ["n0"], dtype=_F)
    if v:
        add("k_all", "TensorArrayGather", ["k", "idx20", "flow"], dtype=_F)
    else:
        nodes.append(("k_all", "TensorArrayPack", ["k", "flow"], {"dtype": _F}))
    steps.append((["k_all:0"], []))
    add("m", "TensorArray", ["n3"], dtype=_F)
    if v:
        add("m_in", "TensorArrayScatter", ["m", "idx20", "m32", "flow"], T=_F)
    else:
        nodes.append(("m_in", "TensorArrayUnpack", ["m", "m42", "flow"], {"T": _F}))
    steps.append((["m_in:0"], []))
    add("z", "TensorArray", ["n2"], dtype=_F, element_shape=tf.TensorShape([2]))
    add("z_r", "TensorArrayRead", ["z", "i1", "flow"], dtype=_F)
    if not v:
        nodes.append(("z_all", "TensorArrayPack", ["z", "flow"],
                      {"dtype": _F, "element_shape": tf.TensorShape([2])}))
    add("z_gz", "TensorArrayGather", ["z", "idx20", "flow"], dtype=_F)
    steps.append((["z_r:0"], []))
    steps.append(((["z_all:0"] if not v else ["z_gz:0"]), []))
    return nodes, steps


_v1_nodes, _v1_steps = _ta_nodes("")
imported_graph("tensor_array_v1", [
    "TensorArray", "TensorArrayWrite", "TensorArrayRead", "TensorArrayPack",
    "TensorArrayUnpack", "TensorArrayGather", "TensorArrayScatter", "TensorArrayConcat",
    "TensorArraySplit", "TensorArraySize", "TensorArrayClose", "TensorArrayGrad"],
    15, _ta_consts, _v1_nodes, _v1_steps)
_v2_nodes, _v2_steps = _ta_nodes("V2")
imported_graph("tensor_array_v2", [
    "TensorArrayV2", "TensorArrayWriteV2", "TensorArrayReadV2", "TensorArrayGatherV2",
    "TensorArrayScatterV2", "TensorArrayConcatV2", "TensorArraySplitV2", "TensorArraySizeV2",
    "TensorArrayCloseV2", "TensorArrayGradV2"],
    15, _ta_consts, _v2_nodes, _v2_steps)


def stack_v1_graph():
    s = raw.Stack(elem_type=tf.float32, stack_name="st")
    push = raw.StackPush(handle=s, elem=np.array([1, 2], f32))
    with tf.control_dependencies([push]):
        push2 = raw.StackPush(handle=s, elem=np.array([3, 4, 5], f32), swap_memory=True)
    with tf.control_dependencies([push2]):
        pop = raw.StackPop(handle=s, elem_type=tf.float32)
    with tf.control_dependencies([pop]):
        pop2 = raw.StackPop(handle=s, elem_type=tf.float32)
    with tf.control_dependencies([pop2]):
        close = raw.StackClose(handle=s)
    e = raw.Stack(elem_type=tf.int32)
    empty = raw.StackPop(handle=e, elem_type=tf.int32)
    # (a push with no pop is removed by TF's graph optimizer: each push here is popped)
    w = raw.Stack(elem_type=tf.int32)
    wrong = raw.StackPush(handle=w, elem=np.float32(1))
    with tf.control_dependencies([wrong]):
        wrong_pop = raw.StackPop(handle=w, elem_type=tf.float32)
    return [([push, push2, pop, pop2], [close]), ([empty], []), ([wrong_pop], [])]


graph("stack_v1", stack_v1_graph, ["Stack", "StackPush", "StackPop", "StackClose"])


if __name__ == "__main__":
    write()
