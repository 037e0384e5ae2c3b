"""CLI details found running models people keep (issue 29): string literals fed to string
inputs, the unknown-op refusal naming every op, compare when nothing was compared,
optimize --verify with real feed values, a table initializer named init_all_tables_, and
tf.Example rows fed as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.graphdef.io import load_graph

DATA = Path(__file__).resolve().parent / "data"

STRING_GRAPH = """
node { name: "s" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "shape" value { shape { dim { size: -1 } } } } }
node { name: "j" op: "StringJoin" input: "s" input: "s" attr { key: "N" value { i: 2 } } }
node { name: "t" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } }
       attr { key: "shape" value { shape { } } } }
"""

UNKNOWN_OPS = """
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "p" op: "ProdEnvMatA" input: "a" }
node { name: "q" op: "ProdForceSeA" input: "p" }
node { name: "r" op: "ProdVirialSeA" input: "q" }
"""

# x must be positive: random feeds (normal) fail the Assert, real ones need not
POSITIVE = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 3 } } } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0 } } } }
node { name: "pos" op: "Greater" input: "x" input: "zero"
       attr { key: "T" value { type: DT_FLOAT } } }
node { name: "axis" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
node { name: "all" op: "All" input: "pos" input: "axis"
       attr { key: "Tidx" value { type: DT_INT32 } } attr { key: "keep_dims" value { b: false } } }
node { name: "check" op: "Assert" input: "all" input: "x"
       attr { key: "T" value { list { type: DT_FLOAT } } }
       attr { key: "summarize" value { i: 3 } } }
node { name: "y" op: "Sqrt" input: "x" input: "^check" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "two" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2 } } } }
node { name: "z" op: "Mul" input: "y" input: "two" attr { key: "T" value { type: DT_FLOAT } } }
"""


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def values(out: str) -> dict:
    return {f["name"]: f["value"] for f in json.loads(out)["fetches"]}


def test_bare_string_feeds_a_batch_of_one_and_true_stays_a_string(tmp_path: Path) -> None:
    g = tmp_path / "s.pbtxt"
    g.write_text(STRING_GRAPH)
    r = invoke("run", g, "--feed", "s=true", "--fetch", "j", "--json")
    assert r.exit_code == 0, r.output
    assert values(r.output) == {"j": ["truetrue"]}        # [?]: a batch of one
    r = invoke("run", g, "--feed", "t=42", "--fetch", "t", "--json")
    assert r.exit_code == 0, r.output
    assert values(r.output) == {"t": "42"}
    r = invoke("run", g, "--feed", 's=["a","True"]', "--fetch", "j", "--json")
    assert values(r.output) == {"j": ["aa", "TrueTrue"]}
    # a SavedModel signature's [?] string input: TF's ids for the same word
    io = DATA / "savedmodels" / "tf1_assets_io" / "serving_default"
    words = [w.decode() for w in np.load(io / "in_s.npy")]
    want = np.load(io / "out_ids.npy")
    r = invoke("run", DATA / "savedmodels" / "tf1_assets", "--feed", f"s={words[0]}",
               "--fetch", "ids", "--json")
    assert r.exit_code == 0, r.output
    assert values(r.output) == {"ids": [int(want[0])]}


def test_unknown_ops_are_all_named(tmp_path: Path) -> None:
    g = tmp_path / "deepmd.pbtxt"
    g.write_text(UNKNOWN_OPS)
    r = invoke("run", g, "--fetch", "r", "--feed", "a=1")
    assert r.exit_code == 1
    err = r.output.strip()
    assert len(err.splitlines()) == 1
    for op in ("ProdEnvMatA", "ProdForceSeA", "ProdVirialSeA"):
        assert op in err
    assert "more" not in err


def test_compare_fails_when_nothing_was_compared(tmp_path: Path) -> None:
    g = tmp_path / "pos.pbtxt"
    g.write_text(POSITIVE)
    r = invoke("compare", g, g, "--fetch", "z", "--feed", "x=[-1,2,3]", "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["ok"] and doc["nothing_compared"] and doc["fetches"] == []
    r = invoke("compare", g, g, "--fetch", "z", "--feed", "x=[-1,2,3]")
    assert r.exit_code == 1 and "NOTHING COMPARED" in r.output
    r = invoke("compare", g, g, "--fetch", "z", "--feed", "x=[1,4,9]", "--json")
    assert r.exit_code == 0, r.output
    assert not json.loads(r.output)["nothing_compared"]


def test_optimize_verify_takes_real_feed_values(tmp_path: Path) -> None:
    g = tmp_path / "pos.pbtxt"
    g.write_text(POSITIVE)
    out = tmp_path / "o.pbtxt"
    np.save(tmp_path / "x.npy", np.array([1, 4, 9], np.float32))
    r = invoke("optimize", g, "--fetch", "z", "--verify", "--verify-feed",
               f"x=@{tmp_path / 'x.npy'}", "-o", out, "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.output)["verify"]
    assert v["ok"] and v["compared"] == ["z"] and not v["nothing_compared"]
    r = invoke("optimize", g, "--fetch", "z", "--verify-feed", "x=[1,4,9]", "-o", out)
    assert r.exit_code == 2 and "add --verify" in r.output


def test_table_initializer_with_trailing_underscore_is_found(tmp_path: Path) -> None:
    frozen = tmp_path / "tables.pb"
    r = invoke("freeze", DATA / "savedmodels" / "tf1_tables", "-o", frozen, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    gd = load_graph(frozen).graph_def
    for nd in gd.node:            # as some exporters name it
        if nd.name == info["init"]:
            nd.name = "init_all_tables_"
    (tmp_path / "renamed.pb").write_bytes(gd.SerializeToString())
    io = DATA / "savedmodels" / "tf1_tables_io" / "serving_default"
    np.save(tmp_path / "s.npy", np.load(io / "in_s.npy"))
    ids = info["outputs"]["ids"]["name"]
    args = ["run", tmp_path / "renamed.pb", "--feed", f"s=@{tmp_path / 's.npy'}", "--fetch", ids]
    r = invoke(*args)
    assert r.exit_code == 1
    assert "Table not initialized" in r.output and "--init init_all_tables_" in r.output
    r = invoke(*args, "--init", "init_all_tables_", "--json")
    assert r.exit_code == 0, r.output
    assert list(values(r.output).values())[0] == np.load(io / "out_ids.npy").tolist()


def test_tf_example_rows_fed_as_json() -> None:
    """An Estimator's tf.Example serving signature fed rows of features as JSON (what
    saved_model_cli --input_examples takes) gives TensorFlow's probabilities."""
    d = DATA / "tf1_estimator" / "dnn"
    r = invoke("run", d / "saved_model_examples", "--feed",
               f"examples=@{d / 'examples.json'}:example", "--json")
    assert r.exit_code == 0, r.output
    got = np.asarray(values(r.output)["probabilities"], np.float32)
    np.testing.assert_allclose(got, np.load(d / "examples_io.npz")["probabilities"],
                               rtol=1e-5, atol=1e-6)


def test_tf_example_json_errors_are_usage_errors(tmp_path: Path) -> None:
    d = DATA / "tf1_estimator" / "dnn"
    (tmp_path / "rows.json").write_text('[{"x": [1, "a"]}]')
    r = invoke("run", d / "saved_model_examples", "--feed",
               f"examples=@{tmp_path / 'rows.json'}:example")
    assert r.exit_code == 2 and "strings or numbers" in r.output
    (tmp_path / "rows.json").write_text("{not json")
    r = invoke("run", d / "saved_model_examples", "--feed",
               f"examples=@{tmp_path / 'rows.json'}:example")
    assert r.exit_code == 2 and "not JSON" in r.output
