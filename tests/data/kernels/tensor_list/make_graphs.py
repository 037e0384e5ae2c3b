"""Writes TensorFlow-made graphs that carry TensorLists, with inputs and TensorFlow's outputs.

Run from the repository root with TensorFlow's own venv (never dfg's):

    /tmp/tfvenv/bin/python tests/data/kernels/tensor_list/make_graphs.py

Each case is ``<name>.pbtxt`` (a frozen ``tf.function`` whose v2 control flow is lowered to v1
Enter/Merge/Switch/Exit loops, as ``convert_variables_to_constants_v2`` does) plus
``<name>.json``: {"feed": {name: value}, "fetch": [names], "expected": [values], "dtype": [..]}.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

HERE = Path(__file__).resolve().parent


def write_case(name: str, fn, spec: tf.TensorSpec, x: np.ndarray) -> None:
    concrete = tf.function(fn).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=True)
    gd = frozen.graph.as_graph_def()
    (HERE / f"{name}.pbtxt").write_text(str(gd))
    inp = frozen.inputs[0].name
    outs = [t.name for t in frozen.outputs]
    got = frozen(tf.constant(x))
    got = got if isinstance(got, (list, tuple)) else [got]
    doc = {"feed": {inp: x.tolist()}, "feed_dtype": str(x.dtype), "fetch": outs,
           "expected": [np.asarray(g).tolist() for g in got],
           "dtype": [str(np.asarray(g).dtype) for g in got]}
    (HERE / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    ops = sorted({n.op for n in gd.node})
    print(name, len(gd.node), "nodes:", ", ".join(ops))


def squares(n):
    # tf.TensorArray under control flow v2: TensorListReserve/SetItem/Stack in a While
    ta = tf.TensorArray(tf.float32, size=n)
    for i in tf.range(n):
        ta = ta.write(i, tf.cast(i * i, tf.float32))
    return ta.stack()


def cumsum_scan(x):
    # tf.scan: TensorListFromTensor/GetItem (unstack), SetItem, Stack
    return tf.scan(lambda acc, v: acc + v, x)


def dynamic_push(x):
    # a dynamically sized TensorArray: pushes past the end (resize_if_index_out_of_bounds)
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[2])
    for i in tf.range(tf.shape(x)[0]):
        ta = ta.write(i, x[i] * 2.0)
    return ta.stack(), ta.size()


if __name__ == "__main__":
    write_case("tensor_array_squares", squares, tf.TensorSpec([], tf.int32), np.int32(6))
    write_case("scan_cumsum", cumsum_scan, tf.TensorSpec([None, 3], tf.float32),
               np.arange(12, dtype=np.float32).reshape(4, 3))
    write_case("dynamic_push", dynamic_push, tf.TensorSpec([None, 2], tf.float32),
               np.arange(10, dtype=np.float32).reshape(5, 2))
