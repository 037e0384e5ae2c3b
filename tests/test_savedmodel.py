"""SavedModel directories: the checkpoint bundle reader, info, run --signature and freeze.

Expected values are TensorFlow's: tests/data/savedmodels/generate.py wrote the SavedModels,
each signature's feeds and TensorFlow's outputs, and every checkpoint value as TensorFlow's
checkpoint reader returned it; crc32c values are the published test vectors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.executor.savedmodel import freeze, load
from dfg.graphdef.bundle import BundleReader, crc32c, mask, read_bundle, read_table
from dfg.graphdef.errors import GraphLoadError, NotFoundError

DATA = Path(__file__).resolve().parent / "data" / "savedmodels"
MODELS = ("mlp", "cnn", "lstm", "module", "composite")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def cases(models: tuple[str, ...] = MODELS) -> list[tuple[str, str]]:
    """(model, signature) for every signature whose TensorFlow inputs/outputs were saved."""
    return [(m, d.name) for m in models for d in sorted((DATA / f"{m}_io").iterdir())
            if d.is_dir()]


def io_of(model: str, sig: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    d = DATA / f"{model}_io" / sig
    ins = {p.stem[3:]: np.load(p) for p in d.glob("in_*.npy")}
    outs = {p.stem[4:]: np.load(p) for p in d.glob("out_*.npy")}
    return ins, outs


def assert_tf_equal(got: np.ndarray, want: np.ndarray) -> None:
    got = np.asarray(got)
    if want.dtype.kind == "S":
        assert got.shape == want.shape
        assert [bytes(x) for x in got.reshape(-1)] == [bytes(x) for x in want.reshape(-1)]
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- crc32c and the bundle ------------------------------------------------------------------

def test_crc32c_test_vectors() -> None:
    # RFC 3720 (iSCSI) appendix B.4 and the usual check value
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C


def test_crc32c_lanes_agree_with_the_bytewise_definition() -> None:
    rng = np.random.default_rng(5)
    data = rng.integers(0, 256, 300_007, dtype=np.uint8).tobytes()
    # extending byte by byte through small pieces never takes the lane path
    crc = 0
    for i in range(0, len(data), 1000):
        crc = crc32c(data[i:i + 1000], crc)
    assert crc32c(data) == crc
    assert crc32c(data[100:], crc32c(data[:100])) == crc


def test_mask_is_leveldbs_rotation_plus_constant() -> None:
    assert mask(0) == 0xA282EAD8
    c = 0x12345678
    assert mask(c) == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


@pytest.mark.parametrize("model", ["mlp", "module"])
def test_bundle_values_equal_tensorflows_checkpoint_reader(model: str) -> None:
    want = np.load(DATA / f"{model}_io" / "variables.npz")
    got = read_bundle(DATA / model)
    assert sorted(got) == sorted(want.files)
    for key in want.files:
        assert_tf_equal(got[key], want[key])


def test_bundle_string_tensor_and_object_graph() -> None:
    r = BundleReader(DATA / "module" / "variables" / "variables.index")
    assert r.header.num_shards == 1
    assert list(r.read("greeting/.ATTRIBUTES/VARIABLE_VALUE")) == [b"hello", b"bonjour!"]
    g = r.object_graph()
    keys = {a.checkpoint_key for n in g.nodes for a in n.attributes}
    assert "w/.ATTRIBUTES/VARIABLE_VALUE" in keys
    with pytest.raises(NotFoundError, match="not found in checkpoint"):
        r.read("nope")


def _corrupt_copy(tmp_path: Path, model: str, rel: str, where: int) -> Path:
    dst = tmp_path / model
    shutil.copytree(DATA / model, dst)
    f = dst / rel
    data = bytearray(f.read_bytes())
    data[where] ^= 0x40
    f.write_bytes(bytes(data))
    return dst


def test_flipped_byte_in_data_shard_is_a_checksum_error(tmp_path: Path) -> None:
    r = BundleReader(DATA / "mlp")
    entry = r.entry("variables/0/.ATTRIBUTES/VARIABLE_VALUE")
    bad = _corrupt_copy(tmp_path, "mlp", "variables/variables.data-00000-of-00001",
                        entry.offset + 3)
    with pytest.raises(GraphLoadError, match="checksum mismatch for key variables/0/"):
        read_bundle(bad)
    # and restoring the model reports it too (RestoreV2 reads through the same reader)
    with pytest.raises(GraphLoadError, match="checksum mismatch"):
        load(bad)


def test_flipped_byte_in_index_is_a_checksum_error(tmp_path: Path) -> None:
    bad = _corrupt_copy(tmp_path, "module", "variables/variables.index", 10)
    with pytest.raises(GraphLoadError, match="checksum mismatch in the index block"):
        read_table(bad / "variables" / "variables.index")


def test_truncated_index_has_bad_magic(tmp_path: Path) -> None:
    f = tmp_path / "x.index"
    f.write_bytes((DATA / "mlp" / "variables" / "variables.index").read_bytes()[:-1])
    with pytest.raises(GraphLoadError, match="bad magic"):
        read_table(f)


# --- info -----------------------------------------------------------------------------------

def test_info_json_lists_signatures_and_variables() -> None:
    r = invoke("info", str(DATA / "module"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kind"] == "saved_model" and d["tags"] == ["serve"]
    assert sorted(d["signatures"]) == ["count", "greet", "serving_default"]
    sd = d["signatures"]["serving_default"]
    assert sd["inputs"] == {"x": {"name": "serving_default_x:0", "dtype": "float32",
                                  "shape": [None, 2]}}
    assert sorted(sd["outputs"]) == ["norm", "y"]
    assert d["signatures"]["greet"]["inputs"]["name"]["dtype"] == "string"
    assert d["signatures"]["count"]["outputs"]["total"]["shape"] == []
    v = d["variables"]
    # w 2x2 float32, b 2 float32, step int32 scalar, greeting: 2 strings (5+8 bytes, two
    # one-byte varint lengths and a 4-byte checksum as the bundle stores them)
    assert v["count"] == 4
    assert {i["name"]: i["bytes"] for i in v["items"]} == {"w": 16, "b": 8, "step": 4,
                                                          "greeting": 19}
    assert v["bytes"] == 47


def test_info_table_and_saved_model_pb_path() -> None:
    r = invoke("info", str(DATA / "mlp" / "saved_model.pb"))
    assert r.exit_code == 0, r.output
    assert "serving_default" in r.output and "features" in r.output


def test_graph_commands_refuse_a_saved_model_with_a_hint() -> None:
    # commands that write a graph (validate and viz read a SavedModel's graph)
    r = invoke("optimize", str(DATA / "mlp" / "saved_model.pb"), "--fetch", "x")
    assert r.exit_code == 2
    assert "this is a SavedModel" in r.output and "dfg freeze" in r.output


# --- run --signature ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models():
    loaded = {m: load(DATA / m, threads=1) for m in MODELS}
    yield loaded
    for m in loaded.values():
        m.close()


@pytest.mark.parametrize("model,sig", cases())
def test_signature_equals_tensorflow(models, model: str, sig: str) -> None:
    ins, outs = io_of(model, sig)
    got = models[model].run(sig, ins)
    assert sorted(got) == sorted(outs)
    for k, want in outs.items():
        assert_tf_equal(got[k], want)


def test_cli_run_signature_by_keys() -> None:
    ins, outs = io_of("module", "serving_default")
    x = DATA / "module_io" / "serving_default" / "in_x.npy"
    r = invoke("run", str(DATA / "module"), "--signature", "serving_default",
               "--feed", f"x=@{x}", "--fetch", "y", "--output", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [f["name"] for f in d["fetches"]] == ["y"]
    np.testing.assert_allclose(np.array(d["fetches"][0]["value"], np.float32), outs["y"],
                               rtol=1e-5, atol=1e-6)
    r = invoke("run", str(DATA / "module"), "--signature", "count", "--feed", "n=6",
               "--output", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["fetches"][0]["value"] == int(
        np.load(DATA / "module_io" / "count" / "out_total.npy"))


def test_cli_run_signature_errors_name_the_keys() -> None:
    r = invoke("run", str(DATA / "module"), "--signature", "nope")
    assert r.exit_code == 1 and "available: count, greet, serving_default" in r.output
    r = invoke("run", str(DATA / "module"))
    assert r.exit_code == 1 and "--feed x=... (float32 [?,2])" in r.output
    r = invoke("run", str(DATA / "module"), "--feed", "nope=1")
    assert r.exit_code == 1 and "has no input 'nope' (inputs: x)" in r.output


# --- freeze ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model,sig", cases())
def test_frozen_graph_equals_tensorflow(models, model: str, sig: str) -> None:
    frozen, info = freeze(models[model], sig)
    ops = {nd.op for nd in frozen.node}
    assert not ops & {"VarHandleOp", "ReadVariableOp", "StatefulPartitionedCall",
                      "PartitionedCall", "While", "If", "RestoreV2"}
    assert not frozen.library.function
    ins, outs = io_of(model, sig)
    with Session(frozen, threads=1) as sess:
        feed = {info["inputs"][k]["name"]: v for k, v in ins.items()}
        for k, want in outs.items():
            assert info["outputs"][k]["name"] == f"{k}:0"
            assert_tf_equal(sess.run(info["outputs"][k]["name"], feed), want)


def test_cli_freeze_then_run(tmp_path: Path) -> None:
    out = tmp_path / "frozen.pb"
    r = invoke("freeze", str(DATA / "mlp"), "-o", str(out), "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["inputs"]["features"]["name"] == "serving_default_features:0"
    ins, outs = io_of("mlp", "serving_default")
    feats = DATA / "mlp_io" / "serving_default" / "in_features.npy"
    r = invoke("run", str(out), "--feed", f"serving_default_features=@{feats}",
               "--fetch", "output_0", "--output", "json")
    assert r.exit_code == 0, r.output
    got = np.array(json.loads(r.output)["fetches"][0]["value"], np.float32)
    np.testing.assert_allclose(got, outs["output_0"], rtol=1e-5, atol=1e-6)
