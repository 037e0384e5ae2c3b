"""Write the malformed-model corpus of tests/test_malformed_models.py: each case a copy of a
good model from tests/data (the TF1 SavedModel tests/data/savedmodels/tf1_assets, with a
variable, a vocabulary asset and a table; the TF1 checkpoint tests/data/checkpoints/mlp.ckpt
and its .meta) with one part broken the way a corrupt download or a hostile author would:
truncated files, wrong checksums, size claims of 100 GB, dimensions of -2**63, absurd
shapes, missing or swapped shards, a big-endian index, asset paths out of assets/.

No TensorFlow: the index is re-encoded with dfg's own table writer (correct checksums, so
the reader gets past them to the broken field). FIFOs and symlinks cannot be committed; the
test makes those cases itself. Run from the repository root:

    python tests/data/malformed/generate.py
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from dfg.graphdef.bundle import read_table
from dfg.graphdef.bundle_writer import table_bytes
from dfg.schemas import saved_model_pb2, tensor_bundle_pb2

HERE = Path(__file__).resolve().parent
DATA = HERE.parent
SAVED_MODEL = DATA / "savedmodels" / "tf1_assets"
VOCAB_MODEL = DATA / "savedmodels" / "vocab_lookup"   # TF2, an asset in asset_file_def
CHECKPOINT = DATA / "checkpoints"
CKPT_FILES = ("mlp.ckpt.meta", "mlp.ckpt.index", "mlp.ckpt.data-00000-of-00001")

# case -> the dfg command (``{case}``: the case's folder, ``{tmp}``: a scratch folder);
# every one must end with exit 2 and one line naming the file and the field.
FREEZE_SM = ("freeze", "{case}", "-o", "{tmp}/frozen.pb")
RUN_SM = ("run", "{case}", "--feed", "s=[\"red\"]")
FREEZE_VOCAB = FREEZE_SM
RUN_VOCAB = ("run", "{case}", "--feed", "words=[\"a\"]")
FREEZE_CKPT = ("freeze", "{case}/mlp.ckpt.meta", "--fetch", "y", "-o", "{tmp}/frozen.pb")
RUN_CKPT = ("run", "{case}/mlp.ckpt.meta", "--fetch", "y", "--feed", "x=[[1,2,3]]")


def _copy_saved_model(dst: Path) -> None:
    shutil.copytree(SAVED_MODEL, dst)


def _copy_vocab_model(dst: Path) -> None:
    shutil.copytree(VOCAB_MODEL, dst)


def _copy_checkpoint(dst: Path) -> None:
    dst.mkdir(parents=True)
    for name in CKPT_FILES:
        shutil.copy(CHECKPOINT / name, dst / name)


def _rewrite_index(index: Path, edit: Callable[[bytes, object], None]) -> None:
    """Re-encode ``index`` after ``edit(key, proto)`` changed its header or entries (the
    header is a BundleHeaderProto under key b"", every other value a BundleEntryProto)."""
    out = []
    for key, value in read_table(index):
        proto = (tensor_bundle_pb2.BundleHeaderProto if key == b""
                 else tensor_bundle_pb2.BundleEntryProto).FromString(value)
        edit(key, proto)
        out.append((key, proto.SerializeToString()))
    index.write_bytes(table_bytes(out))


def _entries(key: bytes, edit: Callable[[object], None]) -> Callable[[bytes, object], None]:
    def apply(k: bytes, proto: object) -> None:
        if k == key:
            edit(proto)
    return apply


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


SM_INDEX = Path("variables/variables.index")
SM_DATA = Path("variables/variables.data-00000-of-00001")
CK_INDEX = Path("mlp.ckpt.index")
CK_DATA = Path("mlp.ckpt.data-00000-of-00001")


def _set_size(n: int) -> Callable[[object], None]:
    def edit(e: object) -> None:
        e.size = n
    return edit


def _set_offset(n: int) -> Callable[[object], None]:
    def edit(e: object) -> None:
        e.offset = n
    return edit


def _set_dims(*dims: int) -> Callable[[object], None]:
    def edit(e: object) -> None:
        del e.shape.dim[:]
        for d in dims:
            e.shape.dim.add().size = d
    return edit


def _set_dtype(dt: int) -> Callable[[object], None]:
    def edit(e: object) -> None:
        e.dtype = dt
    return edit


def _set_shard(i: int) -> Callable[[object], None]:
    def edit(e: object) -> None:
        e.shard_id = i
    return edit


def _header(**fields: int) -> Callable[[bytes, object], None]:
    def edit(k: bytes, proto: object) -> None:
        if k == b"":
            for f, v in fields.items():
                setattr(proto, f, v)
    return edit


def _saved_model_proto(root: Path, edit: Callable[[object], None]) -> None:
    p = root / "saved_model.pb"
    sm = saved_model_pb2.SavedModel.FromString(p.read_bytes())
    edit(sm)
    p.write_bytes(sm.SerializeToString(deterministic=True))


def _asset_name(name: str) -> Callable[[object], None]:
    """Every asset renamed ``name``: in ``asset_file_def`` (TF2) and in the TF1
    ``saved_model_assets`` collection of AssetFileDefs packed in Anys."""
    from dfg.schemas import meta_graph_pb2

    def edit(sm: object) -> None:
        mg = sm.meta_graphs[0]
        for a in mg.asset_file_def:
            a.filename = name
        col = mg.collection_def.get("saved_model_assets")
        if col is not None:
            for any_ in col.any_list.value:
                a = meta_graph_pb2.AssetFileDef()
                any_.Unpack(a)
                a.filename = name
                any_.Pack(a)
    return edit


def _drop_meta_graphs(sm: object) -> None:
    del sm.meta_graphs[:]


def _field(path: str, value: object) -> Callable[[object], None]:
    """Set a field of the first MetaGraphDef, ``path`` as attribute/key steps:
    ``signature_def/serving_default/outputs/one_hot/name``."""
    def edit(sm: object) -> None:
        obj = sm.meta_graphs[0]
        *steps, last = path.split("/")
        for step in steps:
            obj = obj[int(step)] if step.isdigit() else (
                obj[step] if not hasattr(obj, step) else getattr(obj, step))
        setattr(obj, last, value)
    return edit


def _signature_dim(sm: object) -> None:
    shape = sm.meta_graphs[0].signature_def["serving_default"].inputs["words"].tensor_shape
    del shape.dim[:]
    shape.dim.add().size = -2**63


# case -> (base: "sm", "vocab" or "ckpt", how to break the copy, the commands to run it with)
CASES: dict[str, tuple[str, Callable[[Path], None], tuple[tuple[str, ...], ...]]] = {
    # --- the SavedModel's own proto
    "sm_pb_truncated": ("sm", lambda r: _truncate(r / "saved_model.pb", 4000),
                        (FREEZE_SM, RUN_SM)),
    "sm_pb_garbage": ("sm", lambda r: (r / "saved_model.pb").write_bytes(b"\xff" * 64),
                      (FREEZE_SM,)),
    "sm_pb_no_meta_graph": ("sm", lambda r: _saved_model_proto(r, _drop_meta_graphs),
                            (FREEZE_SM,)),
    # --- asset paths out of assets/ (a TF1 collection, a TF2 asset_file_def)
    "sm_asset_absolute": ("sm", lambda r: _saved_model_proto(r, _asset_name("/etc/passwd")),
                          (RUN_SM,)),
    "sm_asset_dotdot": ("sm", lambda r: _saved_model_proto(
        r, _asset_name("../../../../../../etc/passwd")), (RUN_SM,)),
    "sm_asset_is_the_folder": ("sm", lambda r: _saved_model_proto(r, _asset_name(".")),
                               (RUN_SM,)),
    "vocab_asset_absolute": ("vocab", lambda r: _saved_model_proto(
        r, _asset_name("/etc/passwd")), (FREEZE_VOCAB, RUN_VOCAB)),
    "vocab_asset_dotdot": ("vocab", lambda r: _saved_model_proto(
        r, _asset_name("../../../../../../etc/passwd")), (FREEZE_VOCAB, RUN_VOCAB)),
    "vocab_asset_into_variables": ("vocab", lambda r: _saved_model_proto(
        r, _asset_name("../variables/variables.index")), (FREEZE_VOCAB,)),
    # --- MetaGraphDef fields naming what is not there
    "vocab_signature_output_missing": ("vocab", lambda r: _saved_model_proto(
        r, _field("signature_def/serving_default/outputs/one_hot/name", "nope:0")),
        (FREEZE_VOCAB, RUN_VOCAB)),
    "vocab_signature_dtype_unknown": ("vocab", lambda r: _saved_model_proto(
        r, _field("signature_def/serving_default/inputs/words/dtype", 999)), (RUN_VOCAB,)),
    "vocab_signature_dim_min_int64": ("vocab", lambda r: _saved_model_proto(
        r, _signature_dim), (RUN_VOCAB,)),
    "vocab_saver_restore_op_missing": ("vocab", lambda r: _saved_model_proto(
        r, _field("saver_def/restore_op_name", "nope")), (FREEZE_VOCAB, RUN_VOCAB)),
    "vocab_init_op_missing": ("vocab", lambda r: _saved_model_proto(
        r, _field("signature_def/__saved_model_init_op/outputs/__saved_model_init_op/name",
                  "nope")), (FREEZE_VOCAB,)),
    "vocab_asset_tensor_missing": ("vocab", lambda r: _saved_model_proto(
        r, _field("asset_file_def/0/tensor_info/name", "nope:0")), (RUN_VOCAB,)),
    # --- the variables' index
    "sm_index_truncated": ("sm", lambda r: _truncate(r / SM_INDEX, 60), (FREEZE_SM,)),
    "sm_index_empty": ("sm", lambda r: _truncate(r / SM_INDEX, 0), (FREEZE_SM,)),
    "sm_index_bad_crc": ("sm", lambda r: _flip(r / SM_INDEX, 3), (FREEZE_SM, RUN_SM)),
    "sm_index_bad_magic": ("sm", lambda r: _flip(r / SM_INDEX, 116), (FREEZE_SM,)),
    "sm_index_big_endian": ("sm", lambda r: _rewrite_index(r / SM_INDEX,
                                                           _header(endianness=1)),
                            (FREEZE_SM,)),
    "sm_index_num_shards_huge": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _header(num_shards=2**31 - 1)), (FREEZE_SM,)),
    "sm_index_size_100gb": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_size(100 << 30))), (FREEZE_SM, RUN_SM)),
    "sm_index_offset_huge": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_offset(1 << 62))), (FREEZE_SM,)),
    "sm_index_dim_min_int64": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_dims(-2**63))), (FREEZE_SM, RUN_SM)),
    "sm_index_dims_absurd": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_dims(1 << 40, 1 << 40))), (FREEZE_SM,)),
    "sm_index_dtype_unknown": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_dtype(999))), (FREEZE_SM,)),
    "sm_index_shard_id_out_of_range": ("sm", lambda r: _rewrite_index(
        r / SM_INDEX, _entries(b"c", _set_shard(7))), (FREEZE_SM,)),
    # --- the variables' data shard
    "sm_data_truncated": ("sm", lambda r: _truncate(r / SM_DATA, 2), (FREEZE_SM, RUN_SM)),
    "sm_data_bad_crc": ("sm", lambda r: _flip(r / SM_DATA, 0), (FREEZE_SM,)),
    "sm_data_missing": ("sm", lambda r: (r / SM_DATA).unlink(), (FREEZE_SM, RUN_SM)),
    "sm_data_swapped": ("sm", lambda r: shutil.copy(CHECKPOINT / CK_DATA, r / SM_DATA),
                        (FREEZE_SM,)),
    # --- a TF1 checkpoint beside its .meta
    "ckpt_meta_truncated": ("ckpt", lambda r: _truncate(r / "mlp.ckpt.meta", 3000),
                            (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_index_truncated": ("ckpt", lambda r: _truncate(r / CK_INDEX, 100),
                             (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_index_bad_crc": ("ckpt", lambda r: _flip(r / CK_INDEX, 10), (FREEZE_CKPT,)),
    "ckpt_index_big_endian": ("ckpt", lambda r: _rewrite_index(r / CK_INDEX,
                                                               _header(endianness=1)),
                              (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_index_size_100gb": ("ckpt", lambda r: _rewrite_index(
        r / CK_INDEX, _entries(b"dense/kernel", _set_size(100 << 30))),
        (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_index_dim_min_int64": ("ckpt", lambda r: _rewrite_index(
        r / CK_INDEX, _entries(b"dense/bias", _set_dims(-2**63))), (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_index_dims_absurd": ("ckpt", lambda r: _rewrite_index(
        r / CK_INDEX, _entries(b"out/kernel", _set_dims(1 << 31, 1 << 31, 1 << 31))),
        (FREEZE_CKPT,)),
    "ckpt_index_dims_negative": ("ckpt", lambda r: _rewrite_index(
        r / CK_INDEX, _entries(b"out/kernel", _set_dims(5, -2))), (FREEZE_CKPT,)),
    "ckpt_data_missing": ("ckpt", lambda r: (r / CK_DATA).unlink(), (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_data_truncated": ("ckpt", lambda r: _truncate(r / CK_DATA, 50), (FREEZE_CKPT,)),
    "ckpt_data_bad_crc": ("ckpt", lambda r: _flip(r / CK_DATA, 30), (FREEZE_CKPT, RUN_CKPT)),
    "ckpt_data_swapped": ("ckpt", lambda r: shutil.copy(SAVED_MODEL / SM_DATA, r / CK_DATA),
                          (FREEZE_CKPT,)),
    "ckpt_offsets_swapped": ("ckpt", lambda r: _rewrite_index(
        r / CK_INDEX, lambda k, e: setattr(e, "offset", {20: 80, 80: 20}.get(e.offset, e.offset))
        if k else None), (FREEZE_CKPT,)),
}


def main() -> None:
    for name, (base, breaks, _commands) in CASES.items():
        dst = HERE / name
        if dst.exists():
            shutil.rmtree(dst)
        {"sm": _copy_saved_model, "vocab": _copy_vocab_model,
         "ckpt": _copy_checkpoint}[base](dst)
        breaks(dst)


if __name__ == "__main__":
    main()
