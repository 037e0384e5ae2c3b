"""The builder corpus (tests/data/builder): for each program written with TensorFlow's 1.x
graph APIs and with dfg's builder, the builder's GraphDef equals TensorFlow's node for node
(names, ops, inputs, devices, attrs) and dfg's run equals TensorFlow's values; TensorFlow
itself ran the builder's graph and got its own values (recorded by generate.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef.attrs import to_python
from dfg.schemas import graph_pb2

DATA = Path(__file__).parent / "data" / "builder"
sys.path.insert(0, str(DATA))
from programs import PROGRAMS  # noqa: E402

# Attrs TensorFlow adds that change nothing about what the graph computes or where it runs.
IGNORED_ATTRS = {
    "_has_manual_control_dependencies",   # a Python-side marker for tf.function's auto deps
    "_output_shapes",                     # shape annotations, when export asks for them
}


def _node_summary(node) -> dict:
    attrs = {}
    for k, v in node.attr.items():
        if k in IGNORED_ATTRS:
            continue
        if v.WhichOneof("value") == "tensor":
            # TensorFlow may store a constant compactly (one repeated value) or in
            # tensor_content: compare what it decodes to, dtype and shape included
            arr = to_python(v)
            attrs[k] = ("tensor", v.tensor.dtype, arr.shape, arr.tobytes())
        else:
            attrs[k] = v.SerializeToString(deterministic=True)
    data = [i for i in node.input if not i.startswith("^")]
    control = sorted(i for i in node.input if i.startswith("^"))
    return {"op": node.op, "inputs": data, "control": control, "device": node.device,
            "attrs": attrs}


def _load(path: Path):
    gd = graph_pb2.GraphDef()
    text_format.Parse(path.read_text(), gd)
    return gd


def _build(name: str):
    g = B.Graph()
    with g.as_default():
        fetched = PROGRAMS[name]["dfg"](B)
    return g.as_graph_def(), [t.name for t in fetched]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_graphdef_as_tensorflow(name: str) -> None:
    tf_gd = _load(DATA / name / "tf_graph.pbtxt")
    gd, fetch = _build(name)
    result = json.loads((DATA / name / "result.json").read_text())
    assert fetch == result["fetch"]
    tf_nodes = {n.name: _node_summary(n) for n in tf_gd.node}
    ours = {n.name: _node_summary(n) for n in gd.node}
    assert sorted(ours) == sorted(tf_nodes)
    for n in tf_nodes:
        assert ours[n] == tf_nodes[n], n


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_dfg_runs_to_tensorflow_values(name: str) -> None:
    gd, fetch = _build(name)
    prog = PROGRAMS[name]
    exp = np.load(DATA / name / "expected.npz")
    sess = Session(gd, threads=1)
    if prog["init"]:
        sess.run([], targets=[prog["init"]])
    feeds = {f"{k}:0": exp[f"feed_{k}"] for k in prog["feeds"]}
    got = sess.run(fetch, feed_dict=feeds)
    for i, g in enumerate(got):
        want = exp[f"tf_{i}"]
        assert g.dtype == want.dtype and g.shape == want.shape, fetch[i]
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6, err_msg=fetch[i])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_tensorflow_ran_the_builders_graph(name: str) -> None:
    result = json.loads((DATA / name / "result.json").read_text())
    assert result["tf_on_builder"] == {"ran": True, "equal_to_tf": True}
    # and the builder graph TensorFlow ran is the one the builder makes today
    gd, _ = _build(name)
    assert _load(DATA / name / "builder_graph.pbtxt") == gd
