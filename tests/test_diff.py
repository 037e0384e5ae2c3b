"""``dfg diff``: TensorFlow-made model pairs (a layer added, renamed, fine-tuned, rewired)
against the JSON their generator worked out from TensorFlow's graphs; checkpoints;
SavedModels per function; renamed scopes whose weights also changed; exit codes; pictures."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.graphdef.io import load_graphdef, save_graphdef
from dfg.graphdef.tensors import from_numpy, to_numpy
from dfg.schemas import saved_model_pb2

HERE = Path(__file__).resolve().parent
DIFF = HERE / "data" / "diff"
PAIRS = ["layer_added", "layer_renamed", "finetuned", "rewired"]
LSTM = HERE / "data" / "models" / "layer_bidirectional_lstm" / "graph.pb"
SAVED_LSTM = HERE / "data" / "savedmodels" / "lstm"
HAVE_DOT = shutil.which("dot") is not None


def run(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


@pytest.mark.parametrize("pair", PAIRS)
def test_tf_pairs_give_the_expected_json(pair):
    r = run("diff", DIFF / pair / "a.pb", DIFF / pair / "b.pb", "--json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.output) == json.loads((DIFF / pair / "expected.json").read_text())


def test_layer_added_is_added_and_rewired():
    rep = json.loads(run("diff", DIFF / "layer_added" / "a.pb",
                         DIFF / "layer_added" / "b.pb", "--json").output)
    assert {r["name"].split("/")[1] for r in rep["added"]} == {"extra_1"}
    rewired = {r["name"] for r in rep["changed"] if r["what"] == "inputs"}
    assert "net_1/concat_1/concat" in rewired


def test_checkpoints_per_variable():
    r = run("diff", DIFF / "ckpt" / "a", DIFF / "ckpt" / "b.index", "--json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.output) == json.loads((DIFF / "ckpt" / "expected.json").read_text())
    same = run("diff", DIFF / "ckpt" / "a", DIFF / "ckpt" / "a", "--json")
    assert same.exit_code == 0 and json.loads(same.output)["same"] is True


def test_same_graph_exit_0_and_text():
    r = run("diff", LSTM, LSTM)
    assert r.exit_code == 0
    assert "no differences" in r.output


def _rename_scope(gd, old: str, new: str) -> None:
    for n in gd.node:
        n.name = n.name.replace(old, new)
        for i, inp in enumerate(n.input):
            n.input[i] = inp.replace(old, new)


def test_renamed_scope_with_changed_weight(tmp_path):
    # every node of forward_lstm_2_1 renamed, one constant inside it changed as well: all
    # are renamed (by structure, and by the scope rename for the changed one and what
    # depends on it), the constant's value change reported on its new name
    gd = load_graphdef(LSTM)
    before = {n.name for n in gd.node}
    _rename_scope(gd, "forward_lstm_2_1", "fwd")
    target = next(n for n in gd.node if n.op == "Const" and "/fwd/" in n.name
                  and to_numpy(n.attr["value"].tensor).dtype == np.float32
                  and to_numpy(n.attr["value"].tensor).size > 1)
    v = to_numpy(target.attr["value"].tensor).copy()
    v.flat[0] += 0.25
    target.attr["value"].tensor.CopyFrom(from_numpy(v))
    save_graphdef(gd, tmp_path / "b.pb")
    rep = json.loads(run("diff", LSTM, tmp_path / "b.pb", "--json").output)
    expect = sorted((a, a.replace("forward_lstm_2_1", "fwd")) for a in before
                    if "forward_lstm_2_1" in a)
    assert sorted((r["before"], r["after"]) for r in rep["renamed"]) == expect
    assert rep["added"] == [] and rep["removed"] == []
    values = [r for r in rep["changed"] if r["what"] == "value"]
    assert [r["name"] for r in values] == [target.name]
    assert values[0]["max_abs_diff"] == pytest.approx(0.25)
    # the consumers that name renamed producers are not "rewired"
    assert [r for r in rep["changed"] if r["what"] == "inputs"] == []
    # the text report says it in one line
    text = run("diff", LSTM, tmp_path / "b.pb").output
    assert f"> scope forward_lstm_2_1 -> fwd: {len(expect)} nodes" in text
    assert len(text.splitlines()) == 4   # ---, +++, the scope, the value


def _copy_saved_model(dst: Path) -> saved_model_pb2.SavedModel:
    shutil.copytree(SAVED_LSTM, dst)
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((dst / "saved_model.pb").read_bytes())
    return sm


def test_saved_model_functions_renamed_and_changed(tmp_path):
    # a re-export: every function gets a new uniquifying number (references too), and one
    # constant inside one function changes
    sm = _copy_saved_model(tmp_path / "b")
    mg = sm.meta_graphs[0]
    names = [f.signature.name for f in mg.graph_def.library.function]
    new = {n: (n.rsplit("_", 1)[0] + "_" + str(int(n.rsplit("_", 1)[1]) + 1000)
               if n.rsplit("_", 1)[-1].isdigit() else n) for n in names}
    blob = sm.SerializeToString()
    for old in sorted(new, key=len, reverse=True):   # longest first: no prefix clashes
        blob = blob.replace(old.encode(), new[old].encode())
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(blob)
    changed_fn = None
    for f in sm.meta_graphs[0].graph_def.library.function:
        for nd in f.node_def:
            if nd.op == "Const" and changed_fn is None:
                v = to_numpy(nd.attr["value"].tensor)
                if v.dtype.kind in "if" and v.size == 1:
                    nd.attr["value"].tensor.CopyFrom(from_numpy(v + 3))
                    changed_fn, const = f.signature.name, nd.name
    assert changed_fn is not None
    (tmp_path / "b" / "saved_model.pb").write_bytes(sm.SerializeToString())
    rep = json.loads(run("diff", SAVED_LSTM, tmp_path / "b", "--json").output)
    renamed = {r["before"]: r["after"] for r in rep["functions"]["renamed"]}
    assert renamed == {o: n for o, n in new.items() if o != n}
    assert [c["name"] for c in rep["functions"]["changed"]] == [changed_fn]
    ch = rep["functions"]["changed"][0]
    assert [(r["name"], r["what"], r.get("max_abs_diff")) for r in ch["changed"]] == [
        (const, "value", 3.0)]
    assert rep["added"] == rep["removed"] == rep["changed"] == []
    assert rep["variables"] == {"added": [], "removed": [], "renamed": [], "changed": []}


def test_saved_model_against_itself_is_same():
    r = run("diff", SAVED_LSTM, SAVED_LSTM, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["same"] is True


def test_usage_errors_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "dfg.cli.main", "diff", str(DIFF / "ckpt" / "a"),
                        str(DIFF / "finetuned" / "a.pb")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("dfg: error: cannot diff a checkpoint")
    assert len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([sys.executable, "-m", "dfg.cli.main", "diff",
                        str(tmp_path / "nope.pb"), str(DIFF / "finetuned" / "a.pb")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    r = run("diff", DIFF / "finetuned" / "a.pb", DIFF / "finetuned" / "b.pb", "-o",
            tmp_path / "x.bogus")
    assert r.exit_code == 2


def test_subprocess_exit_1_when_different():
    r = subprocess.run([sys.executable, "-m", "dfg.cli.main", "diff",
                        str(DIFF / "rewired" / "a.pb"), str(DIFF / "rewired" / "b.pb")],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "~ net_1/concat_1/concat: inputs:" in r.stdout


def test_picture_colours_the_differences(tmp_path):
    out = tmp_path / "d.dot"
    r = run("diff", DIFF / "layer_added" / "a.pb", DIFF / "layer_added" / "b.pb", "-o", out)
    assert r.exit_code == 1
    dot = out.read_text()
    added = [ln for ln in dot.splitlines() if "extra_1" in ln and "#bbf7d0" in ln]
    assert added, "added nodes are drawn green"
    rew = [ln for ln in dot.splitlines() if ln.lstrip().startswith('"n:net_1/concat_1/concat"')]
    assert rew and "#fde68a" in rew[0]


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz 'dot' is not installed")
def test_picture_svg(tmp_path):
    out = tmp_path / "d.svg"
    r = run("diff", DIFF / "finetuned" / "a.pb", DIFF / "finetuned" / "b.pb", "-o", out)
    assert r.exit_code == 1
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "#b45309" in svg


def test_saved_model_picture_draws_the_model_function(tmp_path):
    # one constant of the Transformer's ffn_in layer changed inside the model function:
    # the picture is the model function's layers, ffn_in's box marked changed
    src = HERE / "data" / "keras_views" / "transformer"
    dst = tmp_path / "b"
    shutil.copytree(src, dst)
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString((dst / "saved_model.pb").read_bytes())
    done = 0
    for f in sm.meta_graphs[0].graph_def.library.function:
        for nd in f.node_def:
            if nd.op == "Const" and nd.name.endswith("ffn_in_1/Tensordot/axes"):
                nd.attr["value"].tensor.CopyFrom(from_numpy(np.array([1], np.int32)))
                done += 1
    assert done >= 1
    (dst / "saved_model.pb").write_bytes(sm.SerializeToString())
    out = tmp_path / "d.dot"
    r = run("diff", src, dst, "-o", out)
    assert r.exit_code == 1
    boxes = [ln for ln in out.read_text().splitlines() if '"s:' in ln and "label=" in ln
             and " -> " not in ln]
    marked = [ln for ln in boxes if "#fde68a" in ln]
    assert len(marked) == 1 and "ffn_in_1/" in marked[0] and "~1" in marked[0]
    assert any("attention_1/" in ln for ln in boxes)   # the model's layers, not a wrapper
