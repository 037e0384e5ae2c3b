"""``dfg viz`` readable by default on TensorFlow-written Keras models: one box per layer,
labels without the model's prefix and at most 40 characters, pictures at most 3000 pt a
side, a SavedModel drawn as its model function; label shortening and shape rules."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format

from dfg.cli.main import cli
from dfg.graphdef import viz as V
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.savedmodel import SavedModelDir
from dfg.schemas import graph_pb2

HERE = Path(__file__).resolve().parent
MODELS = HERE / "data" / "models"
SAVED = HERE / "data" / "savedmodels"
HAVE_DOT = shutil.which("dot") is not None

# TensorFlow-written Keras models of three sizes (nodes drawn), as frozen graphs and
# SavedModels (whose model function is drawn)
READABLE = {
    "zoo_text_lstm": (SAVED / "zoo_text_lstm", ["embed_1/", "lstm_1/", "logits_1/"]),
    "vgg16": (MODELS / "vgg16" / "graph.pb", ["block1_conv1_1/", "fc1_1/", "predictions_1/"]),
    "layer_embedding_masked_lstm": (MODELS / "layer_embedding_masked_lstm" / "graph.pb",
                                    ["embedding_1/"]),
    "zoo_resnet": (SAVED / "zoo_resnet", ["stem_1/", "block0_c1_1/", "predictions_1/"]),
    # a Keras 3 Transformer encoder (model.export), tests/data/keras_views/generate.py
    "transformer": (HERE / "data" / "keras_views" / "transformer",
                    ["embed_1/", "attention_1/", "norm1_1/", "ffn_in_1/", "classes_1/"]),
}


def svg_size(svg: str) -> tuple[float, float]:
    m = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    assert m, "an SVG with its size in points"
    return float(m.group(1)), float(m.group(2))


def svg_texts(svg: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def dot_text(path: Path) -> str:
    r = CliRunner().invoke(cli, ["viz", str(path)])
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("name", sorted(READABLE))
def test_layers_are_boxes_and_labels_are_short(name):
    path, layers = READABLE[name]
    text = dot_text(path)
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', text)
    lines = [ln for lab in labels for ln in lab.split("\\n")]
    assert max(len(ln) for ln in lines) <= V.MAX_LABEL
    for layer in layers:
        assert any(lab.startswith(layer + "\\n") for lab in labels), layer
    # nobody's label carries the model's prefix or TF2's wrapper scopes
    assert not any(re.match(r"(StatefulPartitionedCall|functional_\d|resnet_small_1/)", ln)
                   for ln in lines)


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz 'dot' is not installed")
@pytest.mark.parametrize("name", sorted(READABLE))
def test_default_svg_fits_a_page(name, tmp_path):
    path, _ = READABLE[name]
    out = tmp_path / "m.svg"
    r = CliRunner().invoke(cli, ["viz", str(path), "-o", str(out)])
    assert r.exit_code == 0, r.output
    svg = out.read_text()
    w, h = svg_size(svg)
    assert w <= 3000 and h <= 3000, (w, h)
    assert max(len(t) for t in svg_texts(svg)) <= V.MAX_LABEL


def test_saved_model_draws_the_model_function_not_the_wrapper():
    sm = SavedModelDir(SAVED / "lstm")
    fn = V.saved_model_function(sm)
    assert fn is not None and "signature_wrapper" not in fn
    r = CliRunner().invoke(cli, ["viz", str(SAVED / "lstm")])
    assert r.exit_code == 0
    assert f"drawing function {fn}" in r.stderr
    assert "signature_wrapper" not in r.stdout
    assert '"s:functional_2_1/lstm_1/"' in r.stdout
    # --function main: the graph itself, with its call of the wrapper
    r = CliRunner().invoke(cli, ["viz", str(SAVED / "lstm"), "--function", "main"])
    assert "signature_wrapper" in r.stdout
    r = CliRunner().invoke(cli, ["viz", str(SAVED / "lstm"), "--function", "nope"])
    assert r.exit_code == 2


def test_bidirectional_layer_opens_into_its_two_lstms():
    g = load_graph(MODELS / "layer_bidirectional_lstm" / "graph.pb")
    view = V.build_view(g)
    assert view.layers
    scopes = {b.path for b in view.boxes.values() if b.kind == "scope"}
    assert {"functional_32_1/bidirectional_1/forward_lstm_2_1",
            "functional_32_1/bidirectional_1/backward_lstm_2_1"} <= scopes
    # TF's unused_control_flow_input_N placeholders: one series box, not 26 boxes
    series = [b for b in view.boxes.values() if b.kind == "series"]
    assert [len(b.members) for b in series] == [26]


def test_small_graphs_are_drawn_whole():
    g = load_graph(MODELS / "layer_act_gelu" / "graph.pb")
    view = V.build_view(g)
    assert view.depth is None and not view.layers


def test_short_name():
    assert V.short_name("m_1/dense_1/MatMul", ["m_1"]) == "dense_1/MatMul"
    assert V.short_name("StatefulPartitionedCall/PartitionedCall_3/x/y") == "x/y"
    long = "a" * 10 + "/" + "b" * 20 + "/" + "c" * 15 + "/MatMul"
    assert V.short_name(long) == "\u2026/" + "c" * 15 + "/MatMul"
    assert len(V.short_name("z" * 80)) == V.MAX_LABEL
    assert V.model_prefix(["x", "m/a/b", "m/a/c", "m/d"]) == ["m"]
    assert V.model_prefix(["x", "m/a/b", "m/a/c"]) == ["m", "a"]
    assert V.group_path("Func/m/a/input/_3") == "m/a/input/_3"


def _graph(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def _shape_const(name: str, values: list[int]) -> str:
    vals = " ".join(f"int_val: {v}" for v in values)
    return (f'node {{ name: "{name}" op: "Const" '
            'attr { key: "dtype" value { type: DT_INT32 } } '
            f'attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ dim {{ '
            f'size: {len(values)} }} }} {vals} }} }} }} }}')


def _float_input(name: str, shape: list[int]) -> str:
    dims = " ".join(f"dim {{ size: {d} }}" for d in shape)
    return (f'node {{ name: "{name}" op: "Placeholder" attr {{ key: "dtype" value {{ type: '
            f'DT_FLOAT }} }} attr {{ key: "shape" value {{ shape {{ {dims} }} }} }} }}')


def test_shape_rules_from_the_convolution_arithmetic():
    # SAME stride 2 on 32 -> ceil(32/2) = 16; VALID 3x3 stride 1 on 16 -> 14; pool 2x2/2 -> 7
    g = _graph("\n".join([
        _float_input("x", [1, 32, 32, 3]), _float_input("w", [3, 3, 3, 8]),
        _float_input("dw", [3, 3, 8, 2]),
        'node { name: "c" op: "Conv2D" input: "x" input: "w" '
        'attr { key: "T" value { type: DT_FLOAT } } '
        'attr { key: "strides" value { list { i: 1 i: 2 i: 2 i: 1 } } } '
        'attr { key: "padding" value { s: "SAME" } } }',
        'node { name: "d" op: "DepthwiseConv2dNative" input: "c" input: "dw" '
        'attr { key: "T" value { type: DT_FLOAT } } '
        'attr { key: "strides" value { list { i: 1 i: 1 i: 1 i: 1 } } } '
        'attr { key: "padding" value { s: "VALID" } } }',
        'node { name: "p" op: "MaxPool" input: "d" attr { key: "T" value { type: DT_FLOAT } } '
        'attr { key: "ksize" value { list { i: 1 i: 2 i: 2 i: 1 } } } '
        'attr { key: "strides" value { list { i: 1 i: 2 i: 2 i: 1 } } } '
        'attr { key: "padding" value { s: "VALID" } } }',
        _shape_const("perm", [0, 3, 1, 2]),
        'node { name: "t" op: "Transpose" input: "p" input: "perm" '
        'attr { key: "T" value { type: DT_FLOAT } } }',
        _shape_const("axis", [3]),
        'node { name: "cat" op: "ConcatV2" input: "p" input: "p" input: "axis" '
        'attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }',
    ]))
    facts = V.TensorFacts(g)
    assert facts.shape("c", 0) == (1, 16, 16, 8)
    assert facts.shape("d", 0) == (1, 14, 14, 16)
    assert facts.shape("p", 0) == (1, 7, 7, 16)
    assert facts.shape("t", 0) == (1, 16, 7, 7)
    assert facts.shape("cat", 0) == (1, 7, 7, 32)


def _cases():
    for root in (HERE / "data" / "conformance", MODELS):
        for case in sorted(root.glob("*/case.json")):
            yield case.parent


def test_static_shapes_agree_with_tensorflow():
    # every fetched tensor of every conformance and zoo case whose shape the static rules
    # claim: each claimed dimension is what TensorFlow's output has
    import json

    import numpy as np

    checked = 0
    for case in _cases():
        graph_file = next((case / f for f in ("graph.pbtxt", "graph.pb")
                           if (case / f).exists()), None)
        if graph_file is None:
            continue
        info = json.loads((case / "case.json").read_text())
        if info.get("expect_error") or not info.get("steps"):
            continue
        facts = V.TensorFacts(load_graph(graph_file))
        for step in info["steps"][:1]:
            if step.get("expect_error"):
                continue
            for tensor, npy in (step.get("expect") or {}).items():
                name, _, slot = tensor.rpartition(":")
                claim = facts.shape(name, int(slot))
                if claim is None:
                    continue
                tf_shape = np.load(case / npy, allow_pickle=False).shape
                assert len(claim) == len(tf_shape), (case.name, tensor, claim, tf_shape)
                for c, t in zip(claim, tf_shape):
                    assert c is None or c == t, (case.name, tensor, claim, tf_shape)
                checked += 1
    assert checked > 100, checked
