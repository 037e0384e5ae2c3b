"""TF1 checkpoints: a ``model.ckpt.meta`` MetaGraphDef loads as its GraphDef, and its variables
are restored by name from the bundle beside it, giving TensorFlow's output
(tests/data/checkpoints/generate.py: TensorFlow's import_meta_graph + Saver.restore)."""

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
from dfg.executor import Session
from dfg.executor.checkpoint import restore
from dfg.graphdef import load_graph
from dfg.graphdef.errors import FailedPreconditionError, NotFoundError

DATA = Path(__file__).resolve().parent / "data" / "checkpoints"
META = DATA / "mlp.ckpt.meta"


def test_meta_file_loads_as_its_graph() -> None:
    g = load_graph(str(META))
    ops = {n.op for n in g.nodes}
    assert {"VarHandleOp", "VariableV2", "Softmax", "SaveV2", "RestoreV2"} <= ops


@pytest.mark.parametrize("where", ["mlp.ckpt", "mlp.ckpt.index", "."])
def test_restore_by_name_gives_tensorflows_output(where: str) -> None:
    x, want = np.load(DATA / "x.npy"), np.load(DATA / "y.npy")
    with Session(load_graph(str(META))) as s:
        with pytest.raises(FailedPreconditionError):  # nothing initialized yet
            s.run(["y:0"], {"x:0": x})
        assert restore(s, str(DATA / where)) == 3
        got, = s.run(["y:0"], {"x:0": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_checkpoint_of_another_graph_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "g.pbtxt"
    other.write_text('node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: '
                     'DT_FLOAT } } attr { key: "shape" value { shape { } } } }')
    with Session(load_graph(str(other))) as s, pytest.raises(NotFoundError, match="no variable"):
        restore(s, str(DATA / "mlp.ckpt"))


def test_cli_restores_the_checkpoint_beside_a_meta_file(tmp_path: Path) -> None:
    x, want = np.load(DATA / "x.npy"), np.load(DATA / "y.npy")
    np.save(tmp_path / "x.npy", x)
    r = CliRunner().invoke(cli, ["run", str(META), "--fetch", "y", "--feed",
                                 f"x=@{tmp_path / 'x.npy'}", "--json"])
    assert r.exit_code == 0, r.output
    got = np.array(json.loads(r.output)["fetches"][0]["value"], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # a copy of the .meta file alone: nothing beside it, so --checkpoint names it
    lone = tmp_path / "copy.meta"
    shutil.copy(META, lone)
    r = CliRunner().invoke(cli, ["run", str(lone), "--fetch", "y", "--feed",
                                 f"x=@{tmp_path / 'x.npy'}"])
    assert r.exit_code == 1 and "uninitialized" in r.output
    proc = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", str(lone), "--fetch",
                           "y", "--feed", f"x=@{tmp_path / 'x.npy'}", "--checkpoint",
                           str(DATA), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = np.array(json.loads(proc.stdout)["fetches"][0]["value"], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_freeze_a_meta_graph_with_its_checkpoint(tmp_path: Path) -> None:
    # TF1's freeze_graph: prune to the fetch, variables (resource and ref) as Consts
    x, want = np.load(DATA / "x.npy"), np.load(DATA / "y.npy")
    out = tmp_path / "frozen.pb"
    r = CliRunner().invoke(cli, ["freeze", str(META), "--fetch", "y", "-o", str(out),
                                 "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["variables"] == 3
    g = load_graph(str(out))
    ops = {n.op for n in g.nodes}
    assert not ops & {"VarHandleOp", "VariableV2", "ReadVariableOp", "RestoreV2", "SaveV2"}
    with Session(g) as s:
        got, = s.run(["y:0"], {"x:0": x})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    r = CliRunner().invoke(cli, ["freeze", str(META), "-o", str(out)])
    assert r.exit_code == 2 and "--fetch" in r.output


def test_partitioned_variables_restore_from_their_slices() -> None:
    # a TF1 SavedModel whose variables were split by fixed_size_partitioner: the bundle
    # stores each part under a slice key, RestoreV2 asks for "10 4 0,4:-" style slices
    from dfg.executor.savedmodel import load

    ids, want = np.load(DATA / "ids.npy"), np.load(DATA / "y_part.npy")
    with load(DATA / "partitioned") as m:
        got = m.run("serving_default", {"ids": ids})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_slice_keys_decode_as_orderedcode() -> None:
    from dfg.graphdef.bundle import decode_slice_key

    # 0, "emb" (escaped, ended by \0\1), rank 2, then signed start/length per dimension:
    # one byte 0x80 ^ v for -64 <= v < 64 (0 -> 0x80, 4 -> 0x84, -1 -> 0x7f), two bytes
    # 110xxxxx xxxxxxxx up to 2^13 (300 -> c1 2c)
    key = b"\x00" + b"e\x00\xffb\x00\x01" + b"\x01\x02" + b"\x80\x84" + b"\xc1\x2c\x7f"
    assert decode_slice_key(key, "t") == ("e\x00b", ((0, 4), (300, -1)))


def test_partitioned_variables_restore_by_name_from_a_meta_checkpoint() -> None:
    # the .meta graph holds emb/part_0..2 and w/part_0..1; the checkpoint holds emb and w
    # as slices: each part gets its slice
    ids, want = np.load(DATA / "ids.npy"), np.load(DATA / "y_part.npy")
    meta = DATA / "partitioned" / "part.ckpt.meta"
    with Session(load_graph(str(meta))) as s:
        assert restore(s, str(DATA / "partitioned" / "part.ckpt")) == 5
        got, = s.run(["y:0"], {"ids:0": ids})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_freezing_a_write_to_a_ref_variable_is_refused() -> None:
    from dfg.executor.checkpoint import freeze
    from dfg.graphdef.errors import UnimplementedError

    with pytest.raises(UnimplementedError, match="writes variable 'dense/bias'"):
        freeze(load_graph(str(META)), str(DATA / "mlp.ckpt"), ["dense/bias/Assign"])


def test_slots_and_averages_of_a_partitioned_variable_restore() -> None:
    # the graph's wp/part_K/Momentum and wp/part_K/ExponentialMovingAverage are the K-th
    # slices of the checkpoint's wp/Momentum and wp/ExponentialMovingAverage
    d = DATA / "partitioned_slots"
    want = np.load(d / "want.npz")
    x = np.load(d / "x.npy")
    checks = sorted(k.split("/", 1)[1] for k in want if k.startswith("check/"))
    with Session(load_graph(str(d / "model.ckpt.meta"))) as s:
        # 2 parts, their 2 Momentum slots and 2 averages
        assert restore(s, str(d / "model.ckpt")) == 6
        for name, got in zip(checks, s.run([f"check/{n}:0" for n in checks])):
            np.testing.assert_array_equal(got, want[f"check/{name}"])
        s.run([], {"x:0": x}, targets=["train"])
        for name, got in zip(checks, s.run([f"check/{n}:0" for n in checks])):
            np.testing.assert_allclose(got, want[f"after/{name}"], rtol=1e-6, atol=1e-7)


def _aliased_checkpoint(tmp_path: Path, copies: int) -> str:
    """A bundle of one 1 MB tensor whose index lists it ``copies`` times under other keys,
    every entry pointing at the same bytes of the data file (a stranger's trick: each read
    fits the file and the budget, together they are ``copies`` MB)."""
    from dfg.graphdef.bundle import read_table
    from dfg.graphdef.bundle_writer import table_bytes, write_bundle
    from dfg.schemas import tensor_bundle_pb2

    prefix = str(tmp_path / "alias")
    write_bundle(prefix, {"v00": np.arange(250_000, dtype=np.float32)})
    table = dict(read_table(prefix + ".index"))
    entry = table[b"v00"]
    assert tensor_bundle_pb2.BundleEntryProto.FromString(entry).size == 1_000_000
    for i in range(1, copies):
        table[f"v{i:02d}".encode()] = entry
    Path(prefix + ".index").write_bytes(table_bytes(sorted(table.items())))
    return prefix


def test_checkpoint_reads_are_held_to_the_budget_in_total(tmp_path: Path) -> None:
    from dfg.graphdef.bundle import BundleReader
    from dfg.graphdef.errors import ResourceExhaustedError
    from dfg.graphdef.files import read_limit

    prefix = _aliased_checkpoint(tmp_path, 20)
    r = BundleReader(prefix)
    with read_limit(5_000_000):
        for i in range(5):                       # 5 MB: at the budget, allowed
            assert r.read(f"v{i:02d}")[-1] == 249_999
        assert r.read("v00")[1] == 1             # a key read again adds nothing
        with pytest.raises(ResourceExhaustedError, match=r"reading key v05 .*6,000,000 bytes"
                                                         r".*budget of 5,000,000 bytes"):
            r.read("v05")
    assert r.read("v05")[0] == 0                 # no limit outside the context


def test_restore_v2_of_aliased_keys_is_refused_by_the_step_budget(tmp_path: Path) -> None:
    """One RestoreV2 asking for 20 aliases of a 1 MB tensor under a 5 MB budget fails naming
    the node before the 20 MB are read; under 32 MB it restores them all."""
    from dfg.graphdef import builder as B
    from dfg.graphdef.errors import ResourceExhaustedError

    prefix = _aliased_checkpoint(tmp_path, 20)
    names = [f"v{i:02d}" for i in range(20)]
    g = B.Graph()
    with g.as_default():
        B.apply_op("RestoreV2", [B.constant(prefix), B.constant(names),
                                 B.constant([""] * 20)],
                   attrs={"dtypes": ["float32"] * 20}, name="restore")
    gd = g.as_graph_def()
    with Session(gd, max_bytes=5_000_000) as s:
        with pytest.raises(ResourceExhaustedError, match="'restore' .*RestoreV2.*budget"):
            s.run(["restore:0"])
    with Session(gd, max_bytes=32_000_000) as s:
        out = s.run([f"restore:{i}" for i in range(20)])
    assert all(o[-1] == 249_999 for o in out)
