"""TF1 Estimator-style models with partitioned ref variables (tests/data/tf1_estimator, written
by its generate.py with TensorFlow): run from the checkpoint's .meta graph and from the
SavedModel, frozen both ways, and counted by ``dfg info``; and ``dfg freeze`` of every
SavedModel in the test data, which must leave no variable op of any kind and give
TensorFlow's values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.executor.checkpoint import saver_slices
from dfg.executor.savedmodel import VARIABLE_OPS, freeze, load
from dfg.graphdef.errors import FailedPreconditionError, UnimplementedError
from dfg.graphdef.io import load_graph
from dfg.graphdef.savedmodel import SavedModelDir

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
EST = DATA / "tf1_estimator"
MODELS = ("dnn", "wide_deep")


def io(model: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, Any]]:
    z = np.load(EST / model / "io.npz")
    feeds = {k[5:]: z[k] for k in z.files if k.startswith("feed_")}
    fetches = {k[6:]: z[k] for k in z.files if k.startswith("fetch_")}
    return feeds, fetches, json.loads((EST / model / "names.json").read_text())


def close(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


def _npy(tmp_path: Path, feeds: dict[str, np.ndarray]) -> list[str]:
    args = []
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--feed", f"{k}=@{tmp_path / f'{k}.npy'}"]
    return args


def _fetched(out: str) -> dict[str, np.ndarray]:
    return {f["name"]: np.asarray(f["value"]) for f in json.loads(out)["fetches"]}


@pytest.mark.parametrize("model", MODELS)
def test_the_models_hold_partitioned_ref_variables(model: str) -> None:
    names = io(model)[2]
    assert names["variable_ops"] == ["VariableV2"]
    assert any("/part_1" in n for n in names["partitioned"])
    gd = load_graph(EST / model / f"{names['checkpoint']}.meta").graph_def
    assert {nd.op for nd in gd.node} >= {"VariableV2", "RestoreV2"}


@pytest.mark.parametrize("model", MODELS)
def test_meta_graph_runs_from_its_checkpoint(model: str, tmp_path: Path) -> None:
    """dfg run model.ckpt-N.meta restores every part of every partitioned variable (it said
    "Attempting to use uninitialized value dnn/hiddenlayer_1/bias/part_0")."""
    feeds, want, names = io(model)
    meta = EST / model / f"{names['checkpoint']}.meta"
    for key in want:
        res = CliRunner().invoke(cli, ["run", str(meta), *_npy(tmp_path, feeds), "--fetch",
                                       names["fetch"][key].split(":")[0], "--json"])
        assert res.exit_code == 0, res.output
        (got,) = _fetched(res.output).values()
        close(got.astype(want[key].dtype), want[key], key)


@pytest.mark.parametrize("model", MODELS)
def test_parts_restore_by_their_savers_slice_spec(model: str) -> None:
    """Each part's slice comes from the spec the graph's own Saver restores it with (TF's
    save_slice_info), the whole variable's checkpoint key and the part's extent."""
    names = io(model)[2]
    g = load_graph(EST / model / f"{names['checkpoint']}.meta")
    sliced = saver_slices(g)
    parts = [n for n in names["partitioned"]]
    assert set(parts) <= set(sliced)
    key, spec = sliced[parts[0]]
    assert "/part_" not in key and spec.split()[-1] != ""
    # and by name too, in the graph pruned to the outputs (its Saver gone): the same values
    from dfg.executor.checkpoint import restore
    from dfg.graphdef.prune import prune

    prefix = str(EST / model / names["checkpoint"])
    pruned = prune(g, [t.split(":")[0] for t in names["fetch"].values()])
    assert not saver_slices(load_graph(pruned))
    with Session(g, optimize=False) as a, Session(pruned, optimize=False) as b:
        restore(a, prefix)
        restore(b, prefix)
        read = [p for p in parts if "Adagrad" not in p]
        assert read
        for p in read:
            va, vb = a.resources.lookup(("", p)), b.resources.lookup(("", p))
            assert vb is not None and vb.value is not None, p
            np.testing.assert_array_equal(vb.value, va.value, err_msg=p)


@pytest.mark.parametrize("model", MODELS)
def test_savedmodel_runs_and_info_counts_its_variables(model: str, tmp_path: Path) -> None:
    feeds, want, names = io(model)
    sm = EST / model / "saved_model"
    res = CliRunner().invoke(cli, ["run", str(sm), *_npy(tmp_path, feeds), "--json"])
    assert res.exit_code == 0, res.output
    got = _fetched(res.output)
    for key in want:
        close(got[key].astype(want[key].dtype), want[key], key)
    res = CliRunner().invoke(cli, ["info", str(sm), "--json"])
    assert res.exit_code == 0, res.output
    v = json.loads(res.output)["variables"]
    # every part, its Adagrad slot, and global_step (it said 0)
    assert v["count"] == len(names["partitioned"]) + 1
    items = {i["name"]: i for i in v["items"]}
    part = names["partitioned"][0]
    assert items[part]["checkpoint_key"] == part.split("/part_")[0]
    assert items["global_step"]["checkpoint_key"] == "global_step"
    res = CliRunner().invoke(cli, ["info", str(sm)])
    assert f"Variables: {v['count']}," in res.output


@pytest.mark.parametrize("model", MODELS)
def test_freeze_converts_ref_variables(model: str, tmp_path: Path) -> None:
    """dfg freeze of an Estimator SavedModel and of its checkpoint + .meta: every VariableV2
    becomes a Const (it said "0 variables as constants", exited 0 and left 17 VariableV2)."""
    feeds, want, names = io(model)
    out = tmp_path / "frozen.pb"
    res = CliRunner().invoke(cli, ["freeze", str(EST / model / "saved_model"), "-o", str(out),
                                   "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    gd = load_graph(out).graph_def
    assert not {nd.op for nd in gd.node} & VARIABLE_OPS
    # the parts the signature reads (no optimizer slots, no global_step)
    assert info["variables"] == len([p for p in names["partitioned"] if "Adagrad" not in p])
    with Session(gd) as s:
        got = s.run([info["outputs"][k]["name"] for k in want],
                    {info["inputs"][k]["name"]: v for k, v in feeds.items()})
    for key, g in zip(want, got):
        close(g, want[key], key)
    meta = EST / model / f"{names['checkpoint']}.meta"
    fetch = [names["fetch"][k].split(":")[0] for k in want]
    out2 = tmp_path / "frozen_meta.pb"
    proc = subprocess.run([sys.executable, "-m", "dfg.cli.main", "freeze", str(meta), "--fetch",
                           ",".join(fetch), "-o", str(out2)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    gd = load_graph(out2).graph_def
    assert not {nd.op for nd in gd.node} & VARIABLE_OPS
    with Session(gd) as s:
        got = s.run([names["fetch"][k] for k in want],
                    {names["feed"][k]: v for k, v in feeds.items()})
    for key, g in zip(want, got):
        close(g, want[key], key)


def test_freeze_refuses_a_graph_still_holding_variables(tmp_path: Path) -> None:
    """A variable freezing cannot turn into a constant fails the command (exit 1) naming it,
    never a graph written as if frozen."""
    from dfg.executor.savedmodel import check_frozen

    gd = load_graph(EST / "dnn" / "model.ckpt-3.meta").graph_def
    with pytest.raises(FailedPreconditionError, match="global_step \\(VariableV2\\)"):
        check_frozen(gd)
    # a fetch reading a variable the checkpoint lacks: exit 1, the variable named
    g = load_graph(EST / "dnn" / "model.ckpt-3.meta").graph_def
    nd = g.node.add(name="extra", op="VariableV2")
    nd.attr["dtype"].type = 1
    nd.attr["shape"].shape.SetInParent()
    (tmp_path / "g.pb").write_bytes(g.SerializeToString())
    out = tmp_path / "f.pb"
    res = CliRunner().invoke(cli, ["freeze", str(tmp_path / "g.pb"), "--checkpoint",
                                   str(EST / "dnn" / "model.ckpt-3"), "--fetch", "extra",
                                   "-o", str(out)])
    assert res.exit_code == 1, res.output
    assert "extra" in res.output and not out.exists()


# --- dfg freeze of every SavedModel in the test data ------------------------------------------

def _all_saved_models() -> list[Path]:
    # tests/data/malformed holds corrupt models on purpose (test_malformed_models.py)
    return sorted(p.parent for p in DATA.rglob("saved_model.pb")
                  if "malformed" not in p.relative_to(DATA).parts)


def _tf_io(sm: Path) -> dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """signature -> (inputs, outputs) TensorFlow's generators saved for this SavedModel."""
    rel = sm.relative_to(DATA)
    out: dict[str, Any] = {}
    if rel.parts[0] == "savedmodels":
        d = DATA / "savedmodels" / f"{sm.name}_io"
        for sig in sorted(p for p in d.iterdir() if p.is_dir()) if d.is_dir() else []:
            out[sig.name] = ({p.stem[3:]: np.load(p) for p in sig.glob("in_*.npy")},
                             {p.stem[4:]: np.load(p) for p in sig.glob("out_*.npy")})
    elif rel.parts[0] == "tf1_estimator" and rel.name == "saved_model_examples":
        from dfg.cli.feeds import examples_from_json

        d = sm.parent
        out["serving_default"] = (
            {"examples": examples_from_json(str(d / "examples.json"))},
            {"probabilities": np.load(d / "examples_io.npz")["probabilities"]})
    elif rel.parts[0] == "tf1_estimator":
        feeds, want, _ = io(rel.parts[1])
        out["serving_default"] = (feeds, want)
    elif rel == Path("checkpoints/partitioned"):
        out["serving_default"] = ({"ids": np.load(DATA / "checkpoints" / "ids.npy")},
                                  {"y": np.load(DATA / "checkpoints" / "y_part.npy")})
    elif rel == Path("jax2tf/savedmodel_cnn"):
        z = np.load(sm / "io.npz")
        out["serving_default"] = ({"images": z["images"]}, {"probs": z["probs"]})
    elif rel == Path("kernels/raw_ops_ragged/keras_text"):
        d = DATA / "kernels" / "raw_ops_ragged"
        (case,) = [c for c in json.loads((d / "extra.json").read_text()) if "savedmodel" in c]
        arrays = np.load(d / "arrays.npz", allow_pickle=False)
        out["serving_default"] = ({k: arrays[v] for k, v in case["inputs"].items()},
                                  {k: arrays[v] for k, v in case["outputs"].items()})
    return out


SAVED_MODELS = _all_saved_models()
# Signatures that write a variable each call: a frozen graph cannot keep that state, so
# freezing refuses them, naming the writer (exit 1), rather than bake in one call's value.
STATEFUL = {("savedmodels/tf1_assets", "serving_default"): "AssignAddVariableOp"}


def test_the_test_data_has_saved_models_of_every_kind() -> None:
    names = {p.relative_to(DATA).as_posix() for p in SAVED_MODELS}
    assert {"tf1_estimator/dnn/saved_model", "tf1_estimator/wide_deep/saved_model",
            "checkpoints/partitioned", "jax2tf/savedmodel_cnn", "savedmodels/mlp"} <= names


@pytest.mark.parametrize("sm", SAVED_MODELS, ids=[p.relative_to(DATA).as_posix()
                                                  for p in SAVED_MODELS])
def test_freeze_every_saved_model(sm: Path) -> None:
    """Every signature freezes to a graph without variable ops of any kind, which gives
    TensorFlow's values wherever a generator saved them."""
    ios = _tf_io(sm)
    sigs = sorted(SavedModelDir(str(sm)).signatures)
    checked = 0
    with load(sm, threads=1) as model:
        for sig in sigs:
            writer = STATEFUL.get((sm.relative_to(DATA).as_posix(), sig))
            if writer is not None:
                with pytest.raises(UnimplementedError) as e:
                    freeze(model, sig)
                assert e.value.op == writer, str(e.value)
                checked += 1
                continue
            frozen, info = freeze(model, sig)
            assert not {nd.op for nd in frozen.node} & VARIABLE_OPS, sig
            if sig not in ios:
                continue
            ins, outs = ios[sig]
            with Session(frozen) as s:
                if "init" in info:
                    s.run([], targets=[info["init"]])
                keys = sorted(outs)
                got = s.run([info["outputs"][k]["name"] for k in keys],
                            {info["inputs"][k]["name"]: v for k, v in ins.items()})
            for k, g in zip(keys, got):
                g, w = np.asarray(g), outs[k]
                if w.dtype.kind in "SUO":
                    assert [bytes(x) if not isinstance(x, str) else x.encode()
                            for x in g.reshape(-1)] == [
                        bytes(x) if not isinstance(x, str) else x.encode()
                        for x in w.reshape(-1)], (sig, k)
                else:
                    assert g.shape == w.shape, (sig, k)
                    np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5,
                                               err_msg=f"{sig} {k}")
            checked += 1
    if ios:
        assert checked, f"no signature of {sm} was checked against TensorFlow's values"
