"""SavedModels of real models (tf.saved_model.save): every signature, and its frozen graph,
give TensorFlow's outputs.

tests/data/savedmodels/generate.py wrote the SavedModels (MobileNetV2 alpha 0.35, a small
ResNet, an Embedding+LSTM text model with two signatures, a tf.Module whose functions run a
while loop and a scan) and TensorFlow's outputs for fixed inputs (``<model>_io/<sig>/``).
Tolerance as the Keras zoo (tests/test_models.py): rtol 1e-4, atol 1e-4 times the largest
expected magnitude, at least 1e-4; integers exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conformance import assert_close
from test_savedmodel import cases as savedmodel_cases
from test_savedmodel import io_of

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.executor.savedmodel import freeze, load

DATA = Path(__file__).resolve().parent / "data" / "savedmodels"
MODELS = ("zoo_mobilenet_v2", "zoo_resnet", "zoo_text_lstm", "zoo_module")


def cases() -> list[tuple[str, str]]:
    return savedmodel_cases(MODELS)


def check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, what)
        return
    atol = max(1e-4, 1e-4 * float(np.abs(want).max(initial=0)))
    assert_close(got, want, 1e-4, atol, what)


@pytest.fixture(scope="module")
def models():
    loaded = {m: load(DATA / m, threads=2) for m in MODELS}
    yield loaded
    for m in loaded.values():
        m.close()


def test_zoo_savedmodels_are_present() -> None:
    for m in MODELS:
        assert (DATA / m / "saved_model.pb").is_file()
        assert (DATA / m / "variables" / "variables.index").is_file()
    assert len(cases()) >= 6


@pytest.mark.parametrize("model,sig", cases())
def test_signature_equals_tensorflow(models, model: str, sig: str) -> None:
    ins, outs = io_of(model, sig)
    got = models[model].run(sig, ins)
    assert sorted(got) == sorted(outs)
    for k, want in outs.items():
        check(got[k], want, f"{model} {sig} {k}")


@pytest.mark.parametrize("model,sig", cases())
def test_frozen_signature_equals_tensorflow(models, model: str, sig: str) -> None:
    frozen, info = freeze(models[model], sig)
    assert not frozen.library.function
    assert not {nd.op for nd in frozen.node} & {
        "VarHandleOp", "ReadVariableOp", "StatefulPartitionedCall", "PartitionedCall",
        "While", "StatelessWhile", "If", "StatelessIf", "RestoreV2"}
    ins, outs = io_of(model, sig)
    feed = {info["inputs"][k]["name"]: v for k, v in ins.items()}
    names = [info["outputs"][k]["name"] for k in outs]
    with Session(frozen, threads=2) as sess:
        got = sess.run(names, feed_dict=feed)
    for (k, want), g in zip(outs.items(), got):
        check(g, want, f"frozen {model} {sig} {k}")


def test_cli_freeze_and_run_mobilenet(tmp_path: Path) -> None:
    out = tmp_path / "frozen.pb"
    r = CliRunner().invoke(cli, ["freeze", str(DATA / "zoo_mobilenet_v2"), "-o", str(out),
                                 "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    ins, outs = io_of("zoo_mobilenet_v2", "serving_default")
    image = DATA / "zoo_mobilenet_v2_io" / "serving_default" / "in_image.npy"
    feed_name = info["inputs"]["image"]["name"].split(":")[0]
    r = CliRunner().invoke(cli, ["run", str(out), "--feed", f"{feed_name}=@{image}",
                                 "--fetch", "output_0", "--output", "json"])
    assert r.exit_code == 0, r.output
    got = np.array(json.loads(r.output)["fetches"][0]["value"], np.float32)
    check(got, outs["output_0"], "cli frozen mobilenet")
    r = CliRunner().invoke(cli, ["ops", "--missing", str(out), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["missing"] == []


def test_cli_run_signature_text_model() -> None:
    tokens = DATA / "zoo_text_lstm_io" / "logits" / "in_tokens.npy"
    r = CliRunner().invoke(cli, ["run", str(DATA / "zoo_text_lstm"), "--signature", "logits",
                                 "--feed", f"tokens=@{tokens}", "--output", "json"])
    assert r.exit_code == 0, r.output
    got = np.array(json.loads(r.output)["fetches"][0]["value"], np.float32)
    check(got, io_of("zoo_text_lstm", "logits")[1]["logits"], "cli text logits")
