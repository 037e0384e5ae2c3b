"""What a SavedModel loader must do besides restoring variables, as TensorFlow 2's
``tf.saved_model.load`` does it, and freezing such models.

tests/data/savedmodels/generate.py wrote (with TensorFlow's own outputs):

* ``tf1_tables``: ``simple_save`` of a TF1 graph with a table but no main op: the loader runs
  the graph's table initializers itself;
* ``tf1_assets``: a TF1 ``Builder`` model whose main op fills a table from a vocabulary
  file under ``assets/``: the asset placeholder is fed the file's path;
* ``vocab_lookup``: TF2 (Keras StringLookup on a vocabulary file; embedding_lookup_sparse of
  a SparseTensor signature input, a ResourceGather).

A frozen graph that reads a table keeps its initializers under one ``init_all_tables`` NoOp
(asset paths become Consts), which its user runs first, as a TF1 user runs
``tables_initializer``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_savedmodel import io_of
from test_savedmodel_zoo import check

from dfg.executor import Session
from dfg.executor.savedmodel import freeze, load
from dfg.graphdef.errors import UnimplementedError

DATA = Path(__file__).resolve().parent / "data" / "savedmodels"
CASES = [("tf1_tables", "serving_default"), ("tf1_assets", "serving_default"),
         ("vocab_lookup", "serving_default"), ("vocab_lookup", "embed")]


@pytest.mark.parametrize("model,sig", CASES)
def test_signature_equals_tensorflow(model: str, sig: str) -> None:
    ins, outs = io_of(model, sig)
    with load(DATA / model, threads=2) as m:
        got = m.run(sig, ins)
    assert sorted(got) == sorted(outs)
    for k, want in outs.items():
        check(got[k], want, f"{model} {sig} {k}")


@pytest.mark.parametrize("model,sig", [c for c in CASES if c[0] != "tf1_assets"])
def test_frozen_signature_equals_tensorflow(model: str, sig: str) -> None:
    ins, outs = io_of(model, sig)
    with load(DATA / model, threads=2) as m:
        frozen, info = freeze(m, sig)
    ops = {nd.op for nd in frozen.node}
    assert not ops & {"VarHandleOp", "ReadVariableOp", "ResourceGather", "AssignVariableOp",
                      "StatefulPartitionedCall"}
    reads_table = bool(ops & {"LookupTableFindV2"})
    assert ("init" in info) == reads_table
    feed = {info["inputs"][k]["name"]: v for k, v in ins.items()}
    with Session(frozen, threads=2) as sess:
        if reads_table:
            sess.run([], targets=[info["init"]])
        got = sess.run([info["outputs"][k]["name"] for k in outs], feed_dict=feed)
    for (k, want), g in zip(outs.items(), got):
        check(g, want, f"frozen {model} {sig} {k}")


def test_frozen_assets_become_paths_and_the_graph_stands_alone(tmp_path: Path) -> None:
    ins, outs = io_of("vocab_lookup", "serving_default")
    with load(DATA / "vocab_lookup") as m:
        frozen, info = freeze(m, "serving_default")
    assert not [nd.name for nd in frozen.node if nd.op == "Placeholder"
                and nd.name != info["inputs"]["words"]["name"].split(":")[0]]
    paths = [nd.attr["value"].tensor.string_val[0] for nd in frozen.node
             if nd.op == "Const" and nd.attr["dtype"].type == 7
             and nd.attr["value"].tensor.string_val
             and nd.attr["value"].tensor.string_val[0].endswith(b"words.txt")]
    assert paths and all(Path(p.decode()).is_file() for p in paths)
    # without running init_all_tables the lookup fails as TensorFlow's does
    with Session(frozen) as sess, pytest.raises(Exception, match="not initialized"):
        sess.run([info["outputs"]["one_hot"]["name"]],
                 feed_dict={info["inputs"]["words"]["name"]: ins["words"]})


def test_freezing_a_signature_that_assigns_a_variable_names_the_assignment() -> None:
    with load(DATA / "tf1_assets") as m, pytest.raises(UnimplementedError) as e:
        freeze(m, "serving_default")
    assert "AssignAddVariableOp" in str(e.value)


def test_tf1_main_op_ran_once_with_the_asset_fed() -> None:
    with load(DATA / "tf1_assets") as m:
        assert m.saved_model.init_op.startswith("init_all_tables")  # the main op's node
        assets = m.saved_model.asset_feeds()
        assert [Path(p).name for p in assets.values()] == ["colors.txt"]
        # "green" is line 1 of the vocabulary; the signature bumps c (3 -> 4) before
        # multiplying, so a second call sees 5
        first = m.run("serving_default", {"s": np.array([b"green"], dtype=object)})
        second = m.run("serving_default", {"s": np.array([b"green"], dtype=object)})
    assert first["out"].tolist() == [4.0] and second["out"].tolist() == [5.0]


def test_validate_and_viz_read_a_saved_model_directory(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dfg.cli.main import cli

    r = CliRunner().invoke(cli, ["validate", str(DATA / "tf1_tables"), "--json"])
    assert r.exit_code == 0, r.output
    assert '"valid": true' in r.output
    out = tmp_path / "g.dot"
    r = CliRunner().invoke(cli, ["viz", str(DATA / "vocab_lookup"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("// dfg viz")
    # commands that write a graph still point at freeze: a SavedModel's graph alone cannot
    # restore its variables
    r = CliRunner().invoke(cli, ["prune", str(DATA / "tf1_tables"), "--fetch", "x"])
    assert r.exit_code == 2 and "dfg freeze" in r.output
