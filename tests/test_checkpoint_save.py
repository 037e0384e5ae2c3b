"""Writing checkpoints: the bundle writer, SaveV2 / MergeV2Checkpoints, and a SavedModel's own
save function run by dfg.

Expected values: TensorFlow's own bundles (tests/data/savedmodels, written by TF 2.21): a
SavedModel's save function run by dfg must write the same bytes TensorFlow wrote (for
``module`` the whole index and data file; for Keras models every variable's bytes and entry,
the object-graph entry aside, which TensorFlow's Python saver builds differently from the
constant baked into the save function); and round trips through dfg's reader, which checks
the format's checksums and layout.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.executor.savedmodel import load
from dfg.graphdef import builder as B
from dfg.graphdef import dtypes as D
from dfg.graphdef import errors
from dfg.graphdef.bundle import (
    FOOTER_SIZE,
    OBJECT_GRAPH_KEY,
    TABLE_MAGIC,
    BundleReader,
    crc32c,
    mask,
    read_bundle,
    read_table,
)
from dfg.graphdef.bundle_writer import write_bundle

DATA = Path(__file__).resolve().parent / "data" / "savedmodels"


def _values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    s = np.empty((2, 2), dtype=object)
    s[:] = [[b"", b"x"], ["é".encode(), b"\x00\xff" * 200]]
    return {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "f64": np.float64(2.5).reshape(()),
        "i8": np.array([-128, 127], np.int8),
        "u16": np.array([[1, 65535]], np.uint16),
        "i64": np.arange(7, dtype=np.int64) - 3,
        "bool": np.array([True, False, True]),
        "c64": np.array([1 + 2j, -3j], np.complex64),
        "empty": np.zeros((0, 3), np.float32),
        "strings": s,
        "scalar_string": np.array(b"hello", dtype=object),
        "a/nested/.ATTRIBUTES/VARIABLE_VALUE": np.ones((2, 2), np.int32),
    }


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and list(a.reshape(-1)) == list(b.reshape(-1))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def test_write_then_read_every_dtype(tmp_path: Path) -> None:
    vals = _values()
    files = write_bundle(tmp_path / "ckpt", vals)
    assert sorted(os.path.basename(f) for f in files) == ["ckpt.data-00000-of-00001",
                                                          "ckpt.index"]
    got = read_bundle(tmp_path / "ckpt")   # checksums of blocks and tensors verified
    assert sorted(got) == sorted(vals)
    for k, v in vals.items():
        assert _same(got[k], np.asarray(v)), k


def test_bundle_layout_follows_the_format(tmp_path: Path) -> None:
    vals = _values()
    write_bundle(tmp_path / "ckpt", vals)
    index = (tmp_path / "ckpt.index").read_bytes()
    data = (tmp_path / "ckpt.data-00000-of-00001").read_bytes()
    assert struct.unpack("<Q", index[-8:])[0] == TABLE_MAGIC
    table = read_table(tmp_path / "ckpt.index")
    keys = [k for k, _ in table]
    assert keys[0] == b"" and keys[1:] == sorted(k.encode() for k in vals)
    r = BundleReader(tmp_path / "ckpt")
    assert (r.header.num_shards, r.header.endianness, r.header.version.producer) == (1, 0, 1)
    # data in the order given, back to back, unaligned; each crc is mask(crc32c(bytes))
    pos = 0
    for k, v in vals.items():
        e = r.entry(k)
        assert (e.shard_id, e.offset) == (0, pos), k
        raw = data[e.offset:e.offset + e.size]
        if np.asarray(v).dtype != object:
            assert raw == np.ascontiguousarray(v).tobytes()
            assert e.crc32c == mask(crc32c(raw))
        pos += e.size
    assert pos == len(data)
    # the footer's last 8 bytes are the magic; the metaindex block is empty (one restart)
    from dfg.graphdef.bundle import _varint
    meta_off, p = _varint(index[-FOOTER_SIZE:], 0, "")
    meta_size, _ = _varint(index[-FOOTER_SIZE:], p, "")
    assert index[meta_off:meta_off + meta_size] == struct.pack("<II", 0, 1)
    trailer = index[meta_off + meta_size:meta_off + meta_size + 5]
    assert trailer == b"\x00" + struct.pack("<I", mask(crc32c(struct.pack("<II", 0, 1)
                                                             + b"\x00")))


def test_many_keys_span_several_blocks(tmp_path: Path) -> None:
    vals = {f"k{i:06d}/" + "x" * 40: np.array([i], np.int32) for i in range(9000)}
    write_bundle(tmp_path / "big", vals)
    index = (tmp_path / "big.index").read_bytes()
    # the index block (located by the footer) has more than one data block handle
    from dfg.graphdef.bundle import _block_entries, _read_block, _varint
    pos = 0
    footer = index[-FOOTER_SIZE:]
    for _ in range(2):
        _, pos = _varint(footer, pos, "")
    off, pos = _varint(footer, pos, "")
    size, _ = _varint(footer, pos, "")
    handles = _block_entries(_read_block(index, off, size, ""), "")
    assert len(handles) >= 2
    got = read_bundle(tmp_path / "big")
    assert len(got) == 9000 and int(got["k004321/" + "x" * 40][0]) == 4321


def test_duplicate_key_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="duplicate key: a"):
        write_bundle(tmp_path / "d", [("a", np.ones(1)), ("a", np.zeros(1))])


# --- the kernels in a graph -----------------------------------------------------------------

def _save_restore_graph():
    with B.Graph().as_default() as g:
        prefix = B.placeholder(np.dtype(object), [], name="prefix")
        a = B.constant(np.arange(6, dtype=np.float32).reshape(2, 3), name="a")
        s = B.constant(np.array([b"p", b"qq"], dtype=object), name="s")
        names = B.constant(np.array([b"a", b"s"], dtype=object), name="names")
        slices = B.constant(np.array([b"", b""], dtype=object), name="slices")
        B.apply_op("SaveV2", [prefix, names, slices, [a, s]], name="save")
        B.apply_op("RestoreV2", [prefix, names, slices],
                   attrs={"dtypes": [D.DT_FLOAT, D.DT_STRING]}, name="restore")
        bad = B.constant(np.array([b"a"], dtype=object), name="one_name")
        B.apply_op("SaveV2", [prefix, bad, slices, [a, s]], name="save_bad")
        B.apply_op("SaveV2", [prefix, names, B.constant(np.array([b"2 3 0,1:-", b""],
                                                                 dtype=object)), [a, s]],
                   name="save_slice")
    return g.as_graph_def()


def test_savev2_then_restorev2_round_trip(tmp_path: Path) -> None:
    gd = _save_restore_graph()
    prefix = np.array(str(tmp_path / "sub" / "model").encode(), dtype=object)
    with Session(gd, threads=2) as sess:
        sess.run([], {"prefix:0": prefix}, targets=["save"])
        a, s = sess.run(["restore:0", "restore:1"], {"prefix:0": prefix})
    np.testing.assert_array_equal(a, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert list(s) == [b"p", b"qq"]
    assert sorted(os.listdir(tmp_path / "sub")) == ["model.data-00000-of-00001",
                                                    "model.index"]


def test_savev2_errors_name_the_node(tmp_path: Path) -> None:
    gd = _save_restore_graph()
    prefix = np.array(str(tmp_path / "m").encode(), dtype=object)
    with Session(gd, threads=1) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="save_bad.*1 tensor names but 2"):
            sess.run([], {"prefix:0": prefix}, targets=["save_bad"])
        # a slice spec whose extents do not give the saved tensor's shape
        with pytest.raises(errors.InvalidArgumentError, match="save_slice.*shape"):
            sess.run([], {"prefix:0": prefix}, targets=["save_slice"])


# --- partitioned variables: SaveV2 of slices, as TF1's Saver writes them ----------------------

CKPT = Path(__file__).resolve().parent / "data" / "checkpoints"


@pytest.mark.parametrize("case,prefix,save", [
    # a sharded Saver: SaveV2 to a temporary shard, then MergeV2Checkpoints
    ("partitioned", "part.ckpt", "save/Identity_10:0"),
    # slots and moving averages of a partitioned variable (wp/Momentum ... as slices)
    ("partitioned_slots", "model.ckpt", "save/control_dependency:0"),
])
def test_saving_partitioned_variables_writes_tensorflows_bytes(tmp_path: Path, case: str,
                                                               prefix: str, save: str) -> None:
    from dfg.executor.checkpoint import restore
    from dfg.graphdef.io import load_graph

    src = CKPT / case / prefix
    with Session(load_graph(str(src) + ".meta")) as sess:
        restore(sess, str(src))
        sess.run(save, {"save/Const:0": np.array(str(tmp_path / prefix).encode(),
                                                 dtype=object)})
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / f"{prefix}{suffix}").read_bytes() == \
            Path(f"{src}{suffix}").read_bytes(), suffix


# --- a SavedModel's own save function (SaveV2 to a temp dir + MergeV2Checkpoints) ---------

def _run_save_function(model_dir: Path, prefix: Path) -> None:
    with load(model_dir, threads=1) as model:
        sd = model.saved_model.saver_def
        model.session.run([sd.save_tensor_name], feed_dict={
            sd.filename_tensor_name: np.array(str(prefix).encode(), dtype=object)})


def test_saved_model_save_function_writes_tensorflows_bytes(tmp_path: Path) -> None:
    _run_save_function(DATA / "module", tmp_path / "variables")
    for suffix in (".index", ".data-00000-of-00001"):
        want = (DATA / "module" / "variables" / f"variables{suffix}").read_bytes()
        assert (tmp_path / f"variables{suffix}").read_bytes() == want, suffix
    # the save function's temporary shard directory was merged and removed
    assert sorted(os.listdir(tmp_path)) == ["variables.data-00000-of-00001",
                                            "variables.index"]


@pytest.mark.parametrize("model", ["mlp", "zoo_resnet", "zoo_text_lstm"])
def test_saved_model_save_function_variables_equal_tensorflows(tmp_path: Path,
                                                               model: str) -> None:
    _run_save_function(DATA / model, tmp_path / "v")
    want = BundleReader(DATA / model / "variables" / "variables")
    got = BundleReader(tmp_path / "v")
    assert sorted(got.keys()) == sorted(want.keys())
    want_data = Path(want.shard_path(0)).read_bytes()
    got_data = Path(got.shard_path(0)).read_bytes()
    for k in want.keys():
        if k == OBJECT_GRAPH_KEY:
            continue
        we, ge = want.entry(k), got.entry(k)
        assert (ge.dtype, ge.offset, ge.size, ge.crc32c) == (we.dtype, we.offset, we.size,
                                                              we.crc32c), k
        assert got_data[ge.offset:ge.offset + ge.size] == \
            want_data[we.offset:we.offset + we.size], k
    # and the restored model runs from the checkpoint dfg wrote
    assert _same(got.read(k), want.read(k))
