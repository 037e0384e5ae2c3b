"""TensorFlow's own text for Print (v1) and Assert, for tests/test_logging_ops.py.

Run with TensorFlow's virtualenv, never in CI (TensorFlow is not a dependency of dfg):

    /tmp/tfvenv/bin/python tests/data/logging/generate.py

Writes ``graph.pbtxt`` (a TF1 graph: two Print nodes, one with ``first_n=2``, and an Assert
that fails), the feeds ``x.npy``, ``s.npy``, ``i.npy``, and ``expected.json``: the lines TF's
kernels write to stderr over three runs of ``y`` and one of ``y_all`` (captured at the file
descriptor, as they come from C++), and the line of the failing Assert's message that
says what failed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
v1 = tf.compat.v1


def main() -> None:
    x_val = (np.arange(6, dtype=np.float32).reshape(2, 3) / 3).astype(np.float32)
    s_val = np.array([b"a\tb", "é".encode()], dtype=object)
    i_val = np.array([3, -1, 4, 1, 5], np.int64)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [2, 3], name="x")
        s = v1.placeholder(tf.string, [2], name="s")
        i = v1.placeholder(tf.int64, [5], name="i")
        p = v1.Print(x, [x, s, i, tf.constant(7), tf.constant(True)], message="dbg: ",
                     first_n=2, summarize=4)
        tf.identity(p, name="y")
        q = v1.Print(x, [x, i], message="all: ", summarize=-1)
        tf.identity(q, name="y_all")
        a = tf.debugging.Assert(tf.reduce_all(x < 0.5), [x, s, i, "text"], summarize=2,
                                name="check")
        with tf.control_dependencies([a]):
            tf.identity(x, name="y_checked")
    feeds = {"x:0": x_val, "s:0": s_val, "i:0": i_val}
    with tempfile.TemporaryFile() as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            with v1.Session(graph=g) as sess:
                for _ in range(3):
                    sess.run("y:0", feeds)
                sess.run("y_all:0", feeds)
                try:
                    sess.run("y_checked:0", feeds)
                    message = None
                except tf.errors.InvalidArgumentError as e:
                    message = next(ln.strip() for ln in e.message.splitlines()
                                   if "assertion failed" in ln)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8").splitlines()
                 if ln.startswith(("dbg: ", "all: "))]
    (HERE / "graph.pbtxt").write_text(str(g.as_graph_def()))
    np.save(HERE / "x.npy", x_val)
    np.save(HERE / "s.npy", s_val.astype("S"))
    np.save(HERE / "i.npy", i_val)
    (HERE / "expected.json").write_text(json.dumps(
        {"stderr": lines, "assert": message}, indent=1, ensure_ascii=False) + "\n")
    print(lines, message)


if __name__ == "__main__":
    main()
