"""`dfg batch` and the Predictor: batch inference over files, on local worker processes and on a
local Ray cluster.

Expected values come from TensorFlow's files (the zoo case's outputs, the SavedModel's
outputs, tests/data/batch/*_expected.npz written by its generator) and, for rows TensorFlow
did not run, from dfg's Session run on each row alone (the `dfg run` of that row): batching,
sharding and the engines must not change a value.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor.distributed.batch import EXIT_ONCE_ENV, HANG_ONCE_ENV, Model, run_batch
from dfg.graphdef.errors import DataLossError
from dfg.graphdef.tfrecord import encode_record, read_records

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "batch"
ZOO = ROOT / "tests" / "data" / "models" / "vgg16"
CNN = ROOT / "tests" / "data" / "savedmodels" / "cnn"
CNN_IO = ROOT / "tests" / "data" / "savedmodels" / "cnn_io" / "serving_default"
ZOO_FEED, ZOO_FETCH = "input_0:0", "Identity:0"


def _zoo_case() -> dict:
    return json.loads((ZOO / "case.json").read_text())


# --- inputs and expected values, built once ------------------------------------------------

@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    """Two npz shards for the frozen CNN: TensorFlow's two rows plus seeded ones; expected
    outputs per row (TensorFlow's for its rows, checked against dfg run row by row)."""
    d = tmp_path_factory.mktemp("zoo")
    tf_x = np.load(ZOO / "s0_feed_0.npy")
    rng = np.random.default_rng(27)
    extra = rng.standard_normal((5,) + tf_x.shape[1:]).astype(np.float32)
    a = np.concatenate([tf_x, extra[:2]])          # 4 rows
    b = extra[2:]                                  # 3 rows
    np.savez(d / "a.npz", **{ZOO_FEED: a})
    np.savez(d / "b.npz", **{ZOO_FEED: b})
    model = Model(str(ZOO / "graph.pb"), fetches=[ZOO_FETCH], threads=1)
    try:   # `dfg run` of each row alone
        rows = [model.run({ZOO_FEED: x[None]})[ZOO_FETCH][0] for x in np.concatenate([a, b])]
    finally:
        model.close()
    expected = np.stack(rows)
    case = _zoo_case()
    tf_y = np.load(ZOO / "s0_fetch_0.npy")
    np.testing.assert_allclose(expected[:2], tf_y, rtol=case["rtol"], atol=case["atol"])
    return {"dir": d, "a": expected[:4], "b": expected[4:], "rtol": case["rtol"],
            "atol": case["atol"]}


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """An npz shard for the SavedModel signature: TensorFlow's rows and seeded ones."""
    d = tmp_path_factory.mktemp("cnn")
    tf_x = np.load(CNN_IO / "in_image.npy")
    rng = np.random.default_rng(3)
    x = np.concatenate([tf_x, rng.standard_normal((3,) + tf_x.shape[1:]).astype(np.float32)])
    np.savez(d / "images.npz", image=x)
    model = Model(str(CNN), signature="serving_default", threads=1)
    try:
        expected = np.stack([model.run({"image": r[None]})["output_0"][0] for r in x])
    finally:
        model.close()
    np.testing.assert_allclose(expected[:2], np.load(CNN_IO / "out_output_0.npy"),
                               rtol=1e-4, atol=1e-5)
    return {"dir": d, "expected": expected}


def _check_zoo(out: Path, zoo: dict) -> None:
    for name in ("a", "b"):
        with np.load(out / f"{name}.npz") as z:
            assert z.files == [ZOO_FETCH]
            np.testing.assert_allclose(z[ZOO_FETCH], zoo[name], rtol=zoo["rtol"],
                                       atol=zoo["atol"])


def _check_examples(out: Path) -> None:
    for i in (0, 1):
        with np.load(out / f"examples_{i}.npz") as got, \
                np.load(DATA / f"examples_{i}_expected.npz") as want:
            assert sorted(got.files) == ["label", "scores"]
            np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(got["label"], want["label"])


def _check_images(out: Path) -> None:
    with np.load(out / "images.npz") as got, np.load(DATA / "images_expected.npz") as want:
        np.testing.assert_allclose(got["means"], want["means"], rtol=1e-6)


def _zoo_batch(zoo: dict, out: Path, **kw) -> dict:
    return run_batch(str(ZOO / "graph.pb"), [str(zoo["dir"] / "a.npz"),
                                             str(zoo["dir"] / "b.npz")],
                     str(out), fetches=[ZOO_FETCH], batch_size=2, **kw)


def _done(report: dict, rows: int) -> None:
    assert [f["status"] for f in report["files"]] == ["done"] * len(report["files"]), report
    assert report["rows"] == rows
    assert sum(report["workers"].values()) == rows


# --- the TFRecord reader -------------------------------------------------------------------

def test_tfrecord_reader_reads_tensorflows_writer():
    data = (DATA / "examples_1.tfrecord").read_bytes()
    records = read_records(DATA / "examples_1.tfrecord")
    assert len(records) == 7
    # framing: re-encoding the records gives TensorFlow's bytes back exactly
    assert b"".join(encode_record(r) for r in records) == data
    assert all(b"\n" in r[:2] for r in records)   # a tf.Example starts with field 1 (features)


def test_tfrecord_reader_checks_crcs_and_bounds(tmp_path):
    good = encode_record(b"hello") + encode_record(b"world")
    bad_data = bytearray(good)
    bad_data[12] ^= 1                               # a data byte of record 0
    (tmp_path / "d.tfrecord").write_bytes(bytes(bad_data))
    with pytest.raises(DataLossError, match="record 0 at byte 0: the data's checksum"):
        read_records(tmp_path / "d.tfrecord")
    bad_len = bytearray(good)
    bad_len[len(encode_record(b"hello"))] ^= 1      # the length of record 1
    (tmp_path / "l.tfrecord").write_bytes(bytes(bad_len))
    with pytest.raises(DataLossError, match="record 1 at byte 21: the length's checksum"):
        read_records(tmp_path / "l.tfrecord")
    # a well-formed header claiming 1 TB: refused before anything is allocated
    huge = encode_record(b"x" * 3)
    length = struct.pack("<Q", 1 << 40)
    from dfg.graphdef.bundle import crc32c, mask
    claim = length + struct.pack("<I", mask(crc32c(length))) + huge[12:]
    (tmp_path / "h.tfrecord").write_bytes(claim)
    with pytest.raises(DataLossError, match="claims 1,099,511,627,776 bytes but only"):
        read_records(tmp_path / "h.tfrecord")
    (tmp_path / "t.tfrecord").write_bytes(good[:5])
    with pytest.raises(DataLossError, match="truncated header"):
        read_records(tmp_path / "t.tfrecord")


# --- the local engine ----------------------------------------------------------------------

def test_local_frozen_cnn_equals_run_per_row(zoo, tmp_path):
    report = _zoo_batch(zoo, tmp_path / "out", workers=2)
    _done(report, 7)
    _check_zoo(tmp_path / "out", zoo)
    assert [f["rows"] for f in report["files"]] == [4, 3]


def test_local_savedmodel_signature(cnn, tmp_path):
    report = run_batch(str(CNN), [str(cnn["dir"] / "images.npz")], str(tmp_path),
                       signature="serving_default", workers=1, batch_size=2)
    _done(report, 5)
    with np.load(tmp_path / "images.npz") as z:
        assert z.files == ["output_0"]
        np.testing.assert_allclose(z["output_0"], cnn["expected"], rtol=1e-4, atol=1e-5)


def test_local_tfrecord_and_image_folder(tmp_path):
    report = run_batch(str(DATA / "examples_model.pb"),
                       [str(DATA / "examples_0.tfrecord"), str(DATA / "examples_1.tfrecord")],
                       str(tmp_path), fetches=["scores", "label"], workers=2, batch_size=3,
                       input_key="examples")
    _done(report, 12)
    _check_examples(tmp_path)
    # the image model's only string placeholder is the default --input-key
    report = run_batch(str(DATA / "image_model.pb"), [str(DATA / "images")], str(tmp_path),
                       fetches=["means"], workers=1, batch_size=4)
    _done(report, 6)
    _check_images(tmp_path)


def test_empty_tfrecord_gives_empty_outputs(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    report = run_batch(str(DATA / "examples_model.pb"), [str(tmp_path / "empty.tfrecord")],
                       str(tmp_path / "out"), fetches=["scores", "label"], workers=1)
    assert report["files"][0]["status"] == "done" and report["rows"] == 0
    with np.load(tmp_path / "out" / "empty.npz") as z:
        assert z["scores"].shape == (0, 3) and z["label"].shape == (0,)


def test_resume_skips_finished_outputs(zoo, tmp_path):
    out = tmp_path / "out"
    _done(_zoo_batch(zoo, out, workers=1), 7)
    a_stat = os.stat(out / "a.npz")
    (out / "b.npz").unlink()
    report = _zoo_batch(zoo, out, workers=1)
    assert [(f["status"], f["rows"]) for f in report["files"]] == [("skipped", 4), ("done", 3)]
    assert report["rows"] == 3
    assert os.stat(out / "a.npz").st_mtime_ns == a_stat.st_mtime_ns   # not rewritten
    _check_zoo(out, zoo)


def test_killed_local_worker_loses_and_doubles_nothing(zoo, tmp_path, monkeypatch):
    marker = tmp_path / "exited"
    monkeypatch.setenv(EXIT_ONCE_ENV, str(marker))
    report = _zoo_batch(zoo, tmp_path / "out", workers=2)
    assert marker.exists()           # a worker did die on its first batch
    dead = f"pid-{marker.read_text()}"
    assert report["workers"].get(dead, 0) == 0
    _done(report, 7)
    _check_zoo(tmp_path / "out", zoo)   # every row once, in order, right


def test_hung_local_worker_is_killed_and_its_file_fails_alone(zoo, tmp_path, monkeypatch):
    """A worker that never answers (HANG_ONCE_ENV: blocked as a kernel stuck in native code
    would be) is killed once --batch-timeout and the grace have passed: its batch's file
    fails naming the timeout, the other file is done with the right rows."""
    monkeypatch.setenv(HANG_ONCE_ENV, str(tmp_path / "hung"))
    report = _zoo_batch(zoo, tmp_path / "out", workers=2, timeout=10)
    assert (tmp_path / "hung").exists()
    status = {Path(f["input"]).name: f for f in report["files"]}
    failed = [f for f in status.values() if f["status"] == "failed"]
    assert len(failed) == 1, report
    assert "no result within the batch timeout of 10 s" in failed[0]["error"], failed
    assert [f["status"] for f in status.values()].count("done") == 1, report


def _endless_loop_model(path: Path) -> None:
    """y = x + n where n counts up to max(x) one by one: x = [2**31 - 1] takes hours."""
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        x = B.placeholder("int32", [None], name="x")
        n = B.apply_op("Max", [x, B.constant(0)], name="n").outputs[0]
        i = B.while_loop(lambda i: B.apply_op("Less", [i, n]).outputs[0],
                         lambda i: B.apply_op("AddV2", [i, B.constant(1)]).outputs[0],
                         [B.constant(0)])
        i = i[0] if isinstance(i, (list, tuple)) else i
        B.apply_op("AddV2", [x, i], name="y")
    path.write_bytes(g.as_graph_def().SerializeToString())


def test_batch_timeout_fails_the_endless_input_only(tmp_path):
    """dfg batch --batch-timeout: the input whose batch would loop for hours fails with one
    line naming the deadline (exit 1); the other input's rows are right (x + max(x))."""
    model = tmp_path / "loop.pb"
    _endless_loop_model(model)
    np.savez(tmp_path / "quick.npz", x=np.array([5, 3], np.int32))
    np.savez(tmp_path / "endless.npz", x=np.array([2**31 - 1], np.int32))
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["batch", str(model), "--fetch", "y", "--input",
                                 str(tmp_path / "quick.npz"), "--input",
                                 str(tmp_path / "endless.npz"), "-o", str(out),
                                 "--workers", "1", "--batch-timeout", "2", "--json"])
    assert r.exit_code == 1, r.output
    report = json.loads(r.stdout)
    status = {Path(f["input"]).name: f for f in report["files"]}
    assert status["quick.npz"]["status"] == "done"
    assert status["endless.npz"]["status"] == "failed"
    assert "timed out" in status["endless.npz"]["error"], status
    np.testing.assert_array_equal(np.load(out / "quick.npz")["y"], [10, 8])


def _bad_inputs(tmp_path: Path) -> list[str]:
    damaged = bytearray((DATA / "examples_0.tfrecord").read_bytes())
    damaged[30] ^= 0xFF
    (tmp_path / "damaged.tfrecord").write_bytes(bytes(damaged))
    np.savez(tmp_path / "wrong_key.npz", nope=np.zeros(3, np.float32))
    return [str(tmp_path / "damaged.tfrecord"), str(DATA / "examples_1.tfrecord"),
            str(tmp_path / "wrong_key.npz"), str(DATA / "examples_0.tfrecord")]


def test_bad_files_fail_alone_cli(tmp_path):
    inputs = _bad_inputs(tmp_path)
    out = tmp_path / "out"
    args = ["batch", str(DATA / "examples_model.pb"), "--fetch", "scores,label",
            "--input-key", "examples", "-o", str(out), "--workers", "1", "--json"]
    for i in inputs:
        args += ["--input", i]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    status = {Path(f["input"]).name: f for f in doc["files"]}
    assert status["damaged.tfrecord"]["status"] == "failed"
    assert "damaged.tfrecord" in status["damaged.tfrecord"]["error"]
    assert "checksum" in status["damaged.tfrecord"]["error"]
    assert status["wrong_key.npz"]["status"] == "failed"
    assert "wrong_key.npz" in status["wrong_key.npz"]["error"]
    assert status["examples_0.tfrecord"]["status"] == status["examples_1.tfrecord"]["status"] \
        == "done"
    assert not (out / "damaged.npz").exists() and not (out / "wrong_key.npz").exists()
    _check_examples(out)
    stderr_lines = r.stderr.strip().splitlines()
    assert len(stderr_lines) == 2 and all(line.startswith("dfg: error: ")
                                          for line in stderr_lines)


# --- the CLI -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--fetch", "scores"], "missing option '--input'"),
    (["--fetch", "scores", "--input", "x.csv"], "--input x.csv: no such file"),
    (["--fetch", "scores", "--input", str(ROOT / "pyproject.toml")], "not an input"),
    (["--input", str(DATA / "examples_0.tfrecord")], "name the tensors to fetch"),
    (["--fetch", "scores", "--input", str(DATA / "examples_0.tfrecord"), "--address", "a:1"],
     "--address joins a Ray cluster"),
    (["--fetch", "scores", "--input", str(DATA / "examples_0.tfrecord"), "--workers", "0"],
     "--workers"),
    (["--fetch", "scores", "--input", str(DATA / "examples_0.tfrecord"), "--engine", "spark"],
     "--engine"),
    (["--fetch", "scores", "--input", str(DATA / "examples_0.tfrecord"), "--input",
      str(DATA / "examples_0.tfrecord")], "would both be written to examples_0.npz"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    r = CliRunner().invoke(cli, ["batch", str(DATA / "examples_model.pb"), "-o",
                                 str(tmp_path / "out"), *args])
    assert r.exit_code == 2, r.output
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_help_documents_json_keys():
    r = CliRunner().invoke(cli, ["batch", "--help"])
    assert r.exit_code == 0
    for key in ('"rows"', '"seconds"', '"rows_per_s"', '"files"', '"workers"', '"status"',
                '"error"', "--engine", "--address", "--input-key", "resumes"):
        assert key in r.output


def _subprocess(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", "batch", *args],
                          capture_output=True, text=True, timeout=600, env=env)


def test_subprocess_local_table_and_json(tmp_path):
    p = _subprocess(str(DATA / "image_model.pb"), "--fetch", "means", "--input",
                    str(DATA / "images"), "-o", str(tmp_path), "--workers", "1")
    assert p.returncode == 0, p.stderr
    assert "images.npz" in p.stdout and "done" in p.stdout and "\x1b[" not in p.stderr
    _check_images(tmp_path)
    p = _subprocess(str(DATA / "image_model.pb"), "--fetch", "means", "--input",
                    str(DATA / "images"), "-o", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["files"][0]["status"] == "skipped" and doc["rows"] == 0
    assert doc["workers"] == {}                      # nothing to run: no worker started


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal_only(tmp_path):
    from terminal import run_on_pty

    args = ["batch", DATA / "examples_model.pb", "--fetch", "scores,label", "--input",
            DATA / "examples_0.tfrecord", "--input", DATA / "examples_1.tfrecord",
            "--workers", "1", "--batch-size", "2"]
    rc, out, err = run_on_pty([*args, "-o", tmp_path / "a"], "stderr", columns=100)
    assert rc == 0 and b"12 rows in" in out
    assert b"rows" in err and b"12/12" in err           # the bar, its total learnt
    rc, out, err = run_on_pty([*args, "-o", tmp_path / "b", "--json"], "stderr", columns=100)
    assert rc == 0 and json.loads(out)["rows"] == 12 and b"/12" not in err
    p = _subprocess(*map(str, args[1:]), "-o", str(tmp_path / "c"))   # a pipe: no bar
    assert p.returncode == 0 and "/12" not in p.stderr


# --- the Ray engine (one local Ray for the whole session) ----------------------------------

def test_ray_frozen_cnn(ray_local, zoo, tmp_path):
    report = _zoo_batch(zoo, tmp_path / "out", engine="ray", workers=2)
    _done(report, 7)
    assert all(w.startswith("actor-") for w in report["workers"])
    _check_zoo(tmp_path / "out", zoo)


def test_ray_savedmodel_and_tf_example(ray_local, cnn, tmp_path):
    report = run_batch(str(CNN), [str(cnn["dir"] / "images.npz")], str(tmp_path),
                       engine="ray", workers=1, batch_size=2)
    _done(report, 5)
    with np.load(tmp_path / "images.npz") as z:
        np.testing.assert_allclose(z["output_0"], cnn["expected"], rtol=1e-4, atol=1e-5)
    report = run_batch(str(DATA / "examples_model.pb"),
                       [str(DATA / "examples_0.tfrecord"), str(DATA / "examples_1.tfrecord")],
                       str(tmp_path), fetches=["scores", "label"], engine="ray", workers=2,
                       batch_size=3, input_key="examples")
    _done(report, 12)
    _check_examples(tmp_path)


def test_ray_bad_file_fails_alone(ray_local, tmp_path):
    report = run_batch(str(DATA / "examples_model.pb"), _bad_inputs(tmp_path),
                       str(tmp_path / "out"), fetches=["scores", "label"], engine="ray",
                       workers=2, batch_size=3, input_key="examples")
    status = [f["status"] for f in report["files"]]
    assert status == ["failed", "done", "failed", "done"], report
    assert "damaged.tfrecord" in report["files"][0]["error"]
    _check_examples(tmp_path / "out")


def test_killed_ray_actor_loses_and_doubles_nothing(ray_local, zoo, tmp_path, monkeypatch):
    marker = tmp_path / "exited"
    monkeypatch.setenv(EXIT_ONCE_ENV, str(marker))
    report = _zoo_batch(zoo, tmp_path / "out", engine="ray", workers=2)
    assert marker.exists()           # an actor process did die on its first batch
    _done(report, 7)
    _check_zoo(tmp_path / "out", zoo)


def test_predictor_in_ray_data(ray_local):
    """The README's example: Predictor as Ray Data's map_batches callable class."""
    import ray

    from dfg.executor.distributed import Predictor

    x = np.load(CNN_IO / "in_image.npy")
    ds = ray.data.from_items([{"image": row, "id": i} for i, row in enumerate(x)])
    out = ds.map_batches(Predictor, fn_constructor_kwargs={
        "model": str(CNN), "signature": "serving_default", "passthrough": ["id"]},
        concurrency=1, batch_size=2).take_all()
    out.sort(key=lambda r: r["id"])
    got = np.stack([r["output_0"] for r in out])
    np.testing.assert_allclose(got, np.load(CNN_IO / "out_output_0.npy"), rtol=1e-4,
                               atol=1e-5)


def test_subprocess_ray_joins_the_cluster(ray_local, tmp_path):
    address = ray_local.get_runtime_context().gcs_address
    p = _subprocess(str(DATA / "examples_model.pb"), "--fetch", "scores,label",
                    "--input", str(DATA / "examples_0.tfrecord"), "--input",
                    str(DATA / "examples_1.tfrecord"), "--input-key", "examples",
                    "-o", str(tmp_path), "--engine", "ray", "--address", address,
                    "--workers", "2", "--batch-size", "4", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["rows"] == 12 and sum(doc["workers"].values()) == 12
    _check_examples(tmp_path)


def test_subprocess_ray_local_instance(tmp_path):
    """Without --address the command starts its own Ray and stops it (one run, ~10 s)."""
    pytest.importorskip("ray")
    shutil.copy(DATA / "examples_0.tfrecord", tmp_path / "examples_0.tfrecord")
    p = _subprocess(str(DATA / "examples_model.pb"), "--fetch", "scores,label",
                    "--input", str(tmp_path / "examples_0.tfrecord"), "-o",
                    str(tmp_path / "out"), "--engine", "ray", "--workers", "1", "--json",
                    env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["files"][0]["status"] == "done"
    with np.load(tmp_path / "out" / "examples_0.npz") as got, \
            np.load(DATA / "examples_0_expected.npz") as want:
        np.testing.assert_allclose(got["scores"], want["scores"], rtol=1e-6, atol=1e-6)


def _saving_graph(prefix: Path) -> str:
    """y = x, with a SaveV2 of a constant to ``prefix`` as y's control input: a model that
    writes a file whenever it runs."""
    def strings(name: str, v: str) -> str:
        return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: '
                f'DT_STRING }} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_STRING '
                f'tensor_shape {{ {"dim { size: 1 }" if name != "prefix" else ""} }} '
                f'string_val: "{v}" }} }} }} }}\n')

    return (strings("prefix", str(prefix)) + strings("names", "w") + strings("slices", "")
            + '''
node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1.5 } } } }
node { name: "save" op: "SaveV2" input: "prefix" input: "names" input: "slices" input: "w"
  attr { key: "dtypes" value { list { type: DT_FLOAT } } } }
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Identity" input: "x" input: "^save"
  attr { key: "T" value { type: DT_FLOAT } } }
''')


def test_batch_model_writes_files_only_with_permission(tmp_path):
    # issue 30: batch runs a stranger's model closed by default, like dfg run
    victim = tmp_path / "victim"
    victim.mkdir()
    graph = tmp_path / "g.pbtxt"
    graph.write_text(_saving_graph(victim / "evil"))
    x = np.arange(5, dtype=np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    args = ["batch", str(graph), "--fetch", "y", "--input", str(tmp_path / "in.npz"),
            "--workers", "1", "--json"]
    r = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "out1")])
    assert r.exit_code == 1
    report = json.loads(r.stdout)
    assert report["files"][0]["status"] == "failed"
    assert "SaveV2" in report["files"][0]["error"]
    assert "--allow-write" in report["files"][0]["error"]
    assert list(victim.iterdir()) == []      # nothing written
    r = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "out2"),
                                 "--allow-write", str(victim)])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(np.load(tmp_path / "out2" / "in.npz")["y"], x)
    assert (victim / "evil.index").exists()
