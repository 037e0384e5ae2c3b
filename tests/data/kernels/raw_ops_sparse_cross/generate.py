"""Expected values for SparseCross, SparseCrossV2 and SparseCrossHashed, computed by
TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_sparse_cross/generate.py

The ops have several list inputs, so the attrs TF infers from them (N, sparse_types,
dense_types) are added to each case for the replay (which cannot split the flat inputs
without them).

Not covered: SparseCrossHashed with strong_hash and a dense int64 input, which crashes
TensorFlow 2.21 (a segfault in the kernel).
"""

import os
import sys
from pathlib import Path

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
import tensorflow as tf  # noqa: E402
from rawgen import i64  # noqa: E402

rawgen.begin(HERE)


def S(*xs):
    return np.array([x.encode() for x in xs], dtype=object)


def D(rows):
    return np.array([[x.encode() for x in r] for r in rows], dtype=object)


def sp(idx, vals, shape):
    return (np.array(idx, i64), vals, np.array(shape, i64))


def _dt(v):
    return tf.string if np.asarray(v).dtype == object else tf.int64


def cross(name, sparse, dense, extra=None, attrs=None, note=""):
    """One op call; ``sparse`` is a list of (indices, values, shape)."""
    inputs = dict(indices=[s[0] for s in sparse], values=[s[1] for s in sparse],
                  shapes=[s[2] for s in sparse], dense_inputs=list(dense), **(extra or {}))
    rawgen.op(name, inputs, attrs, note=note)
    rawgen.CASES[-1]["attrs"].update(
        N=len(sparse), sparse_types=[rawgen._attr(_dt(s[1])) for s in sparse],
        dense_types=[rawgen._attr(_dt(d)) for d in dense])


def v1(sparse, dense, hashed=False, buckets=0, key=0, out=tf.string, internal=tf.string,
       note=""):
    cross("SparseCross", sparse, dense, attrs=dict(
        hashed_output=hashed, num_buckets=buckets, hash_key=key, out_type=out,
        internal_type=internal), note=note)


def v2(sparse, dense, sep="_X_", note=""):
    cross("SparseCrossV2", sparse, dense, extra=dict(sep=np.array(sep.encode(), dtype=object)),
          note=note)


def hashed(sparse, dense, buckets=0, strong=False, salt=(137, 173), note=""):
    cross("SparseCrossHashed", sparse, dense, extra=dict(
        num_buckets=i64(buckets), strong_hash=np.bool_(strong), salt=np.array(salt, i64)),
        note=note)


# inputs: a (3 rows, row 1 empty), b (2 features in rows 0 and 2), c ints, dense d / e
a = sp([[0, 0], [2, 0], [2, 1]], S("a0", "a2", "a2b"), [3, 2])
b = sp([[0, 0], [0, 1], [2, 0]], S("b00", "b01", "b2"), [3, 5])
c = sp([[0, 0], [1, 0], [2, 0], [2, 1]], np.array([7, -3, 2 ** 40 + 5, 0], i64), [3, 2])
d = D([["x", "y"], ["z", "w"], ["u", "v"]])
e = np.array([[11], [-12], [13]], i64)
empty = sp(np.zeros((0, 2), i64), np.zeros(0, i64), [3, 4])  # (TF reads [] as float)
longs = sp([[0, 0], [1, 0]], S("a fairly long feature string that is over sixty four bytes "
                                "long, to be sure", "é"), [2, 1])
unsorted = sp([[1, 0], [0, 0], [1, 1]], S("p", "q", "r"), [3, 2])

for note, sps, dns in [("sparse x sparse", [a, b], []),
                       ("sparse x dense", [a], [d]),
                       ("three inputs", [a, b], [d]),
                       ("int64 x string", [c, b], []),
                       ("an empty sparse input", [a, empty], []),
                       ("dense only", [], [d, e]),
                       ("rows out of order", [unsorted], [d])]:
    internal = tf.int64 if any(np.asarray(s[1]).dtype != object for s in sps) or \
        any(np.asarray(x).dtype != object for x in dns) else tf.string
    v1(sps, dns, internal=internal, note=note)
    v1(sps, dns, hashed=True, out=tf.int64, internal=internal, note=note + ", hashed")
    v2(sps, dns, note=note)
    hashed(sps, dns, note=note + ", hashed")

v1([a, b], [d], hashed=True, buckets=10, out=tf.int64, note="num_buckets 10")
v1([c], [e], hashed=True, buckets=1000, key=956888297470, out=tf.int64, internal=tf.int64,
   note="hash_key")
v1([c], [], hashed=True, key=-5, out=tf.int64, internal=tf.int64, note="negative hash_key")
v1([a], [d], hashed=True, buckets=7, out=tf.int64, note="int64 out_type, string internal")
v1([longs, longs], [], hashed=True, out=tf.int64, note="long strings")
v1([c], [e], out=tf.string, internal=tf.int64, note="int64 as strings")
v1([a], [d], hashed=False, out=tf.int64, note="out_type int64 hashes")
v1([c], [], out=tf.string, internal=tf.string, note="int64 values, string internal: error")
v1([], [e], out=tf.int64, internal=tf.string, note="int64 dense, string internal: error")
v2([a, b], [d], sep="--", note="custom sep")
v2([c], [e], sep="", note="empty sep")
v2([longs], [], sep="|", note="one column")
v2([a, sp([[0, 0]], S("q"), [4, 1])], [], note="batch mismatch: error")
v2([a], [np.array([[1], [2]], i64)], note="dense batch mismatch: error")
v2([sp([[0, 0, 0]], S("q"), [3, 2])], [], note="indices not 2 columns: error")
v2([sp([[0, 0]], S("q", "r"), [3, 2])], [], note="values size: error")
v2([sp([[0, 0]], S("q"), [3, 2, 1])], [], note="shape not 2-D: error")
v2([], [np.array([1, 2], i64)], note="dense not a matrix: error")
cross("SparseCrossV2", [a], [], extra=dict(sep=S("a", "b")), note="sep not a scalar: error")
hashed([a, b], [d], buckets=10, note="num_buckets 10")
hashed([a, c], [d], buckets=0, strong=True, note="strong")
hashed([c, b], [d], buckets=50, strong=True, salt=(-1, 2 ** 62), note="strong, salt")
hashed([c], [e], buckets=-3, note="negative num_buckets")
hashed([c], [], strong=True, note="strong int64")
hashed([a], [], salt=(1, 2, 3), note="salt of 3: error")

rawgen.write()
