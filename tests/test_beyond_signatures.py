"""SavedModels run beyond their signatures (tests/data/beyond_signatures, written by its
generate.py with TensorFlow): a tf.Module saved without signatures, called through its object
graph's concrete functions (``dfg run DIR --function PATH``, listed by ``dfg info``), and a TF1
SavedModel whose signature reads a tf.data iterator, run below the signature
(``dfg run DIR --graph``) fed the iterator's output, with its variable restored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor.savedmodel import load_function

DATA = Path(__file__).resolve().parent / "data" / "beyond_signatures"
MODULE = DATA / "module_no_sig"
TF1 = DATA / "tf1_dataset"


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def fetched(out: str) -> dict[str, np.ndarray]:
    return {f["name"]: np.asarray(f["value"], dtype=np.float32)
            for f in json.loads(out)["fetches"]}


@pytest.fixture(scope="module")
def io() -> dict[str, np.ndarray]:
    return dict(np.load(DATA / "module_no_sig_io.npz"))


def test_info_lists_the_object_graph_functions() -> None:
    res = invoke("info", MODULE, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["signatures"] == {}
    fns = {f["path"]: f for f in doc["functions"]}
    assert sorted(fns) == ["__call__", "scale", "sub.shift"]
    assert fns["__call__"]["inputs"] == [{"name": "x", "dtype": "float32", "shape": [None, 3]}]
    assert [o["key"] for o in fns["scale"]["outputs"]] == ["norm", "scaled"]
    assert fns["__call__"]["captures"] == 2
    res = invoke("info", MODULE)
    assert "sub.shift" in res.output and "--function PATH" in res.output


def test_no_signature_names_the_functions_to_run() -> None:
    res = invoke("run", MODULE, "--feed", "x=[[1,2,3]]")
    assert res.exit_code == 1
    assert "no signature 'serving_default' (available: none)" in res.output
    assert "__call__, scale, sub.shift" in res.output and "--function" in res.output


def test_functions_run_to_tensorflows_values(io: dict[str, np.ndarray],
                                              tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", io["x"])
    res = invoke("run", MODULE, "--function", "__call__", "--feed", f"x=@{tmp_path / 'x.npy'}",
                 "--json")
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(fetched(res.output)["output_0"], io["call"], rtol=1e-6)
    res = invoke("run", MODULE, "--function", "scale", "--feed", f"s={float(io['s'])}",
                 "--json")
    assert res.exit_code == 0, res.output
    got = fetched(res.output)
    np.testing.assert_allclose(got["scaled"], io["scaled"], rtol=1e-6)
    np.testing.assert_allclose(got["norm"], io["norm"], rtol=1e-6)
    with load_function(MODULE, "sub.shift") as model:
        out = model.run(inputs={"y": io["y"]})
    assert list(out) == ["output_0"]
    np.testing.assert_allclose(out["output_0"], io["shift"], rtol=1e-6)


def test_function_run_as_a_subprocess(io: dict[str, np.ndarray], tmp_path: Path) -> None:
    np.save(tmp_path / "y.npy", io["y"])
    proc = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", str(MODULE),
                           "--function", "sub.shift", "--feed", f"y=@{tmp_path / 'y.npy'}",
                           "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(fetched(proc.stdout)["output_0"], io["shift"], rtol=1e-6)


def test_unknown_function_is_named() -> None:
    res = invoke("run", MODULE, "--function", "nope", "--feed", "x=1")
    assert res.exit_code == 1
    assert "no function 'nope'" in res.output and "sub.shift" in res.output


def test_tf1_savedmodel_runs_below_its_signature(tmp_path: Path) -> None:
    """The signature's output reads a tf.data iterator (no kernel in dfg): fed the
    iterator's output, the graph runs with the restored ref variable, as TensorFlow."""
    z = np.load(DATA / "tf1_dataset_io.npz")
    np.save(tmp_path / "x.npy", z["x"])
    res = invoke("run", TF1, "--graph", "--feed", f"IteratorGetNext=@{tmp_path / 'x.npy'}",
                 "--fetch", "y", "--json")
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(fetched(res.output)["y"], z["y"], rtol=1e-6)
    # through the signature it needs the iterator itself: refused, naming tf.data
    res = invoke("run", TF1)
    assert res.exit_code == 1 and "tf.data" in res.output


def test_graph_and_function_need_a_saved_model(tmp_path: Path) -> None:
    g = Path(__file__).resolve().parent.parent / "examples" / "while_counter.pbtxt"
    for flag in (["--graph"], ["--function", "__call__"]):
        res = invoke("run", g, *flag, "--fetch", "counter/Exit", "--feed", "n=3")
        assert res.exit_code == 2, res.output
        assert "SavedModel" in res.output
    res = invoke("run", TF1, "--graph", "--signature", "serving_default", "--fetch", "y")
    assert res.exit_code == 2
    res = invoke("run", TF1, "--graph")
    assert res.exit_code == 2 and "--fetch" in res.output


def test_signature_without_outputs_runs_and_freezes_alike(tmp_path: Path) -> None:
    """TF1 allows a signature with no outputs; TensorFlow's session runs it (nothing to
    fetch). dfg run does too, and dfg freeze writes its graph (its input) rather than
    refusing: the same answer both ways."""
    res = invoke("run", TF1, "--signature", "nothing", "--feed", "x=[[1,2]]", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["fetches"] == []
    out = tmp_path / "nothing.pbtxt"
    res = invoke("freeze", TF1, "--signature", "nothing", "-o", out, "--json")
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert info["outputs"] == {} and info["inputs"]["x"]["name"] == "IteratorGetNext:0"
    from dfg.executor.savedmodel import VARIABLE_OPS
    from dfg.graphdef.io import load_graph

    ops = {nd.op for nd in load_graph(out).graph_def.node}
    assert "IteratorGetNext" in ops and not ops & VARIABLE_OPS
