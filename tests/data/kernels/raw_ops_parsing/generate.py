"""Expected values for the parsing and formats kernels, computed by TensorFlow 2.21 (never run
in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_parsing/generate.py

Inputs are small real data made by TensorFlow itself (tf.train.Example(...).SerializeToString(),
tf.io.serialize_tensor, tf.io.encode_png / encode_jpeg / encode_wav) or written by hand as bytes
(GIF, BMP, corrupt and truncated files). Cases that need Pillow in dfg (JPEG decoding and
encoding) or whose strings end in NUL go to side.json / side.npz, replayed by
tests/kernels/test_parsing.py. Needs Pillow in the TF venv too (for 4:2:2 and CMYK JPEGs).
"""

import gzip
import io
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
import tensorflow as tf  # noqa: E402
from rawgen import f32, f64, i32, i64, raw  # noqa: E402, F401

rawgen.begin(HERE)


def S(*vals) -> np.ndarray:
    """A string tensor (object array of bytes), any shape via reshape."""
    out = np.empty(len(vals), dtype=object)
    out[:] = [v if isinstance(v, bytes) else v.encode() for v in vals]
    return out


def _tf_in(v):
    if isinstance(v, (list, tuple)):
        return [_tf_in(x) for x in v]
    a = np.asarray(v)
    if a.dtype == object:
        return tf.reshape(tf.constant(a.reshape(-1).tolist(), dtype=tf.string), a.shape)
    return tf.constant(a)


SIDE: list[dict] = []
SIDE_ARRAYS: dict[str, np.ndarray] = {}


def _np(v) -> np.ndarray:
    a = v.numpy() if hasattr(v, "numpy") else v
    a = np.array(a, dtype=object) if isinstance(a, bytes) else np.asarray(a)
    if a.dtype == object or a.dtype.kind in "SU":
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [x if isinstance(x, bytes) else str(x).encode()
                              for x in a.reshape(-1).tolist()]
        return out
    return a


def _has_nul(a: np.ndarray) -> bool:
    return a.dtype == object and any(x.endswith(b"\0") for x in a.reshape(-1).tolist())


_SEEN: dict = {}


_store = rawgen._store   # stores equal arrays once


def _side_array(a: np.ndarray) -> str:
    sig = ("s", a.dtype.str, a.shape, a.tobytes())
    if sig not in _SEEN:
        _SEEN[sig] = key = f"s{len(SIDE_ARRAYS)}"
        SIDE_ARRAYS[key] = a
    return _SEEN[sig]


def _side_store(v):
    """An array for side.npz: strings as their bytes concatenated plus lengths."""
    a = _np(v)
    if a.dtype == object:
        vals = a.reshape(-1).tolist()
        return {"bytes": _side_array(np.frombuffer(b"".join(vals), np.uint8)),
                "lens": _side_array(np.array([len(x) for x in vals], np.int64)),
                "shape": list(a.shape)}
    return _side_array(a)


def op(name: str, inputs: dict, attrs: dict | None = None, tol=None, note: str = "",
       unspecified: tuple = (), inferred: dict | None = None, side: bool = False,
       needs: str = "") -> None:
    """rawgen.op, with string inputs of any shape (empty ones too) typed as strings;
    ``inferred``: attrs TF infers from the inputs, written down for dfg's invoke (which
    cannot infer them when an op has several list inputs). Cases whose strings end in NUL
    (the manifest's byte strings cannot hold one), and ``side`` ones, go to side.json /
    side.npz, replayed by tests/kernels/test_parsing.py (``needs``: a module they need)."""
    attrs = attrs or {}
    all_attrs = {k: rawgen._attr(v) for k, v in {**attrs, **(inferred or {})}.items()}
    outputs, error = None, None
    try:
        r = getattr(raw, name)(**{k: _tf_in(v) for k, v in inputs.items()}, **attrs)
        outputs = [_np(x) for x in rawgen._flat(r)]
    except tf.errors.OpError as e:
        error = type(e).__name__
    flat_in = [x for v in inputs.values() for x in (v if isinstance(v, (list, tuple)) else [v])]
    if side or any(_has_nul(_np(x)) for x in flat_in + (outputs or [])):
        entry: dict = {"op": name, "note": note, "attrs": all_attrs, "needs": needs,
                       "inputs": [[_side_store(x) for x in v] if isinstance(v, (list, tuple))
                                  else _side_store(v) for v in inputs.values()]}
        if tol is not None:
            entry["tol"] = tol
        if error:
            entry["error"] = error
        else:
            entry["outputs"] = [{"dtype": x.dtype.name, "shape": list(x.shape)}
                                if i in unspecified else _side_store(x)
                                for i, x in enumerate(outputs)]
        SIDE.append(entry)
        return
    entry = {"op": name, "note": note}
    entry["inputs"] = [[_store(x) for x in v] if isinstance(v, (list, tuple))
                       else _store(v) for v in inputs.values()]
    entry["attrs"] = all_attrs
    if tol is not None:
        entry["tol"] = tol
    if error:
        entry["error"] = error
    else:
        entry["outputs"] = [
            {"dtype": x.dtype.name, "shape": list(x.shape)} if i in unspecified
            else _store(x) for i, x in enumerate(outputs)]
    rawgen.CASES.append(entry)


def write() -> None:
    import json
    rawgen.write()
    (HERE / "side.json").write_text(json.dumps(SIDE, indent=0) + "\n")
    np.savez_compressed(HERE / "side.npz", **SIDE_ARRAYS)
    print(len(SIDE), "side cases,", len(SIDE_ARRAYS), "side arrays")


def feat(v):
    if isinstance(v, tuple) and v and v[0] == "raw":
        return v[1]
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    if isinstance(v, list) and v and isinstance(v[0], float):
        return tf.train.Feature(float_list=tf.train.FloatList(value=v))
    if isinstance(v, list) and v and isinstance(v[0], int):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v))
    if v == "empty":
        return tf.train.Feature()
    kind, = v  # ("f",) ("i",) ("b",): an empty list of that type
    return {"f": tf.train.Feature(float_list=tf.train.FloatList()),
            "i": tf.train.Feature(int64_list=tf.train.Int64List()),
            "b": tf.train.Feature(bytes_list=tf.train.BytesList())}[kind]


def _no_trailing_nul(make, keys: list) -> bytes:
    """Serialize so that the bytes do not end in NUL (the manifest's byte strings cannot
    hold one): if need be, a second message with an unrequested feature "zz_pad" is
    concatenated (parsers merge concatenated messages)."""
    b = make(keys)
    if b.endswith(b"\0"):
        pad = tf.train.Features(feature={"zz_pad": feat([b"!"])})
        b += tf.train.Example(features=pad).SerializeToString()
    return b


def example(**features) -> bytes:
    def make(order):
        return tf.train.Example(features=tf.train.Features(
            feature={k: feat(features[k]) for k in order})).SerializeToString()
    return _no_trailing_nul(make, list(features))


def seq_example(context: dict, lists: dict) -> bytes:
    def make(order):
        return tf.train.SequenceExample(
            context=tf.train.Features(feature={k: feat(v) for k, v in context.items()}),
            feature_lists=tf.train.FeatureLists(feature_list={
                k: tf.train.FeatureList(feature=[feat(x) for x in lists[k]])
                for k in order})).SerializeToString()
    return _no_trailing_nul(make, list(lists))


def cut(b: bytes, n: int) -> bytes:
    """``b`` without (about) its last ``n`` bytes, not ending in NUL."""
    b = b[:-n]
    while b.endswith(b"\0"):
        b = b[:-1]
    return b


def shp(*dims):
    return tf.TensorShape([None if d == -1 else d for d in dims])


# ------------------------------------------------------------------ ParseExample(V2)
ex1 = example(a=[1.0, 2.0], b=[3, 4, 5], s=[b"x", b"yy"], v=[1, 2, 3, 4], r=[7.5])
ex2 = example(a=[5.5, 6.5], b=[9], v=[8, 9])
ex3 = example(b=("i",), s=[b"only"], r=[1.0, 2.0, 3.0])
ex_dup = ex1 + example(a=[10.0, 20.0], b=[42])   # concatenated: later entries win
ex_bad_type = example(a=[1, 2])
ex_short = example(a=[1.0])


def v2(serialized, names=(), sparse=(), dense=(), ragged=(), note="", unspecified=()):
    """sparse: [(key, dtype)], dense: [(key, dtype, shape, default)], ragged: [(key, dtype,
    split dtype)]."""
    op("ParseExampleV2", dict(
        serialized=serialized, names=S(*names),
        sparse_keys=S(*[k for k, _ in sparse]), dense_keys=S(*[k for k, *_ in dense]),
        ragged_keys=S(*[k for k, *_ in ragged]),
        dense_defaults=[d[3] for d in dense]),
        dict(num_sparse=len(sparse),
             sparse_types=[t for _, t in sparse], ragged_value_types=[r[1] for r in ragged],
             ragged_split_types=[r[2] for r in ragged], dense_shapes=[d[2] for d in dense]),
        note=note, unspecified=unspecified, inferred=dict(Tdense=[d[1] for d in dense]))


batch = S(ex1, ex2, ex3)
v2(batch, sparse=[("b", tf.int64), ("s", tf.string), ("missing", tf.float32)],
   dense=[("a", tf.float32, [2], np.array([-1.0, -2.0], f32)),
          ("v", tf.int64, [-1, 2], np.array(0, i64)),
          ("s2", tf.string, [], S(b"dflt").reshape(()))],
   ragged=[("r", tf.float32, tf.int64), ("b", tf.int64, tf.int32)],
   note="batch: sparse, dense with defaults, var-length dense, ragged")
v2(S(ex_dup, ex2), dense=[("a", tf.float32, [2, 1], np.zeros((2, 1), f32))],
   sparse=[("b", tf.int64)], note="concatenated examples: the last entry of a key wins")
v2(S(ex2, ex3), dense=[("a", tf.float32, [2], np.zeros(0, f32))],
   note="required dense feature missing")
v2(S(ex_bad_type), dense=[("a", tf.float32, [2], np.zeros(0, f32))],
   note="wrong feature type")
v2(S(ex_short), dense=[("a", tf.float32, [2], np.zeros(0, f32))], note="wrong value count")
v2(S(cut(ex1, 3)), dense=[("a", tf.float32, [2], np.zeros(2, f32))], note="truncated proto")
v2(S(b"\x0a\x05garbage"), sparse=[("a", tf.float32)], note="corrupt proto")
v2(S(ex1, ex2), sparse=[("b", tf.float32)], note="sparse type mismatch")
v2(S(), sparse=[("b", tf.int64)], dense=[("a", tf.float32, [2], np.zeros(2, f32)),
                                          ("v", tf.int64, [-1], np.array(0, i64))],
   ragged=[("r", tf.float32, tf.int32)], note="empty batch")
v2(S(ex1).reshape(()), sparse=[("b", tf.int64), ("zz", tf.string)],
   dense=[("a", tf.float32, [2], np.zeros(0, f32)), ("v", tf.int64, [-1, 2], np.array(0, i64)),
          ("q", tf.int64, [3], np.array([7, 8, 9], i64))],
   ragged=[("r", tf.float32, tf.int64), ("nope", tf.int64, tf.int32)],
   note="scalar serialized")
v2(S(ex1, ex2), names=["first", "second"], dense=[("v", tf.int64, [-1, 3], np.array(0, i64))],
   note="var-length not a multiple of the stride")
v2(S(ex1), dense=[("a", tf.float32, [-1], np.zeros(2, f32))],
   note="var-length default with two elements")
v2(S(example(a="empty", b=("i",))), dense=[("a", tf.float32, [], np.array(3.5, f32))],
   sparse=[("b", tf.int64)], note="feature with no list counts as missing")
v2(S(ex1), dense=[("a", tf.float32, [2], np.zeros(2, f32))], sparse=[("a", tf.float32)],
   note="a key configured twice")

op("ParseExample", dict(
    serialized=batch, names=S(), sparse_keys=[S("b").reshape(()), S("s").reshape(())],
    dense_keys=[S("a").reshape(()), S("v").reshape(())],
    dense_defaults=[np.array([0.5, 0.25], f32), np.array(-1, i64)]),
    dict(sparse_types=[tf.int64, tf.string], dense_shapes=[[2], [-1]]),
    inferred=dict(Nsparse=2, Ndense=2, Tdense=[tf.float32, tf.int64]))
op("ParseExample", dict(
    serialized=S(ex2, ex3), names=S("n1", "n2"), sparse_keys=[],
    dense_keys=[S("a").reshape(())], dense_defaults=[np.zeros(0, f32)]),
    dict(sparse_types=[], dense_shapes=[[2]]), note="required feature missing",
    inferred=dict(Nsparse=0, Ndense=1, Tdense=[tf.float32]))

op("ParseSingleExample", dict(serialized=S(ex1).reshape(()),
                              dense_defaults=[np.zeros(0, f32), np.array("z", object)]),
   dict(num_sparse=2, sparse_keys=["b", "s"], dense_keys=["a", "nope"],
        sparse_types=[tf.int64, tf.string], dense_shapes=[[2], []]),
   inferred=dict(Tdense=[tf.float32, tf.string]))
op("ParseSingleExample", dict(serialized=S(ex2).reshape(()), dense_defaults=[np.zeros(0, i64)]),
   dict(num_sparse=0, sparse_keys=[], dense_keys=["v"], sparse_types=[],
        dense_shapes=[[-1, 2]]), note="var-length dense", inferred=dict(Tdense=[tf.int64]))
op("ParseSingleExample", dict(serialized=S(ex1).reshape(()),
                              dense_defaults=[np.array(0, i64), np.array(0, f32)]),
   dict(num_sparse=0, sparse_keys=[], dense_keys=["v", "zz"], sparse_types=[],
        dense_shapes=[[-1, 2], [-1, 3]]), note="var-length dense, present and missing",
   inferred=dict(Tdense=[tf.int64, tf.float32]))
op("ParseSingleExample", dict(serialized=S(ex2).reshape(()),
                              dense_defaults=[np.zeros(0, f32)]),
   dict(num_sparse=0, sparse_keys=[], dense_keys=["s"], sparse_types=[],
        dense_shapes=[[1]]), note="required missing", inferred=dict(Tdense=[tf.float32]))

# hand-written wire format: repeated keys, unpacked lists, unknown fields, empty Features


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7F | 0x80])
        v >>= 7
    return out + bytes([v])


def ld(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + varint(len(body)) + body


def w_floats(vals, packed=True):
    if packed:
        return ld(0x12, ld(0x0A, np.array(vals, "<f4").tobytes()))
    return ld(0x12, b"".join(b"\x0d" + np.array([v], "<f4").tobytes() for v in vals))


def w_ints(vals, packed=True):
    if packed:
        return ld(0x1A, ld(0x0A, b"".join(varint(v) for v in vals)))
    return ld(0x1A, b"".join(b"\x08" + varint(v) for v in vals))


def w_bytes(vals):
    return ld(0x0A, b"".join(ld(0x0A, v) for v in vals))


def w_example(entries, extra=b""):
    """entries: (key, Feature bytes); ``extra`` goes after the features (unknown fields)."""
    return ld(0x0A, b"".join(ld(0x0A, ld(0x0A, k.encode()) + ld(0x12, f))
                             for k, f in entries)) + extra


wx1 = w_example([("a", w_floats([1.0, 2.0])), ("a", w_floats([3.0, 4.0], packed=False)),
                 ("s", w_bytes([b"p"])), ("s", b""), ("i", w_ints([5, -6], packed=False)),
                 ("i", w_ints([7, 1 << 40]))], extra=b"\x10\x05\x1d\x01\x02\x03\x04")
wx2 = w_example([("a", w_floats([9.0, 8.0])), ("a", b""), ("i", w_ints([]))])
wx3 = ld(0x0A, ld(0x0A, ld(0x12, w_ints([3])) + ld(0x0A, b"i")))  # value before key
v2(S(wx1, wx2, wx3), dense=[("a", tf.float32, [2], np.zeros(2, f32))],
   sparse=[("s", tf.string), ("i", tf.int64)], note="hand-written wire format")
v2(S(wx1).reshape(()), dense=[("a", tf.float32, [2], np.zeros(2, f32))],
   sparse=[("s", tf.string)], ragged=[("i", tf.int64, tf.int32)],
   note="hand-written wire format, scalar")
v2(S(w_example([("a", ld(0x22, b"\x01"))])), dense=[("a", tf.float32, [], np.zeros((), f32))],
   note="feature of an unknown kind")
v2(S(w_example([("a", w_floats([1.0, 2.0, 3.0]))]), ex2), names=["x", "y"],
   dense=[("a", tf.float32, [-1], np.array(-1.0, f32)),
          ("b", tf.int64, [-1], np.array(-7, i64))], note="var-length padding")
v2(S(ex1, ex2, ex3), dense=[("s", tf.string, [-1], np.array("pad", object))],
   ragged=[("zz", tf.string, tf.int64)], note="var-length strings")
v2(S(ex1), names=["a", "b"], dense=[("a", tf.float32, [2], np.zeros(2, f32))],
   note="names of the wrong length")
v2(S(ex1), dense=[("a", tf.float32, [None, None] if False else [2, -1], np.zeros(0, f32))],
   note="unknown inner dimension")

# ------------------------------------------------------------------ sequence examples
sq1 = seq_example({"c": [1.0, 2.0], "cs": [b"u"], "ci": [3]},
                  {"fd": [[1, 2], [3, 4], [5, 6]], "fs": [[1.5], ("f",), [2.5, 3.5], "empty"],
                   "fr": [[b"a"], [b"b", b"c"]]})
sq2 = seq_example({"ci": [4, 5]}, {"fd": [[7, 8]], "fs": [[9.0]]})
sq3 = seq_example({"c": [9.0, 8.0]}, {})


def seqv2(serialized, names=(), csparse=(), cdense=(), cragged=(), fsparse=(), fdense=(),
          fragged=(), note="", unspecified=()):
    op("ParseSequenceExampleV2", dict(
        serialized=serialized, debug_name=S(*names),
        context_sparse_keys=S(*[k for k, *_ in csparse]),
        context_dense_keys=S(*[k for k, *_ in cdense]),
        context_ragged_keys=S(*[k for k, *_ in cragged]),
        feature_list_sparse_keys=S(*[k for k, *_ in fsparse]),
        feature_list_dense_keys=S(*[k for k, *_ in fdense]),
        feature_list_ragged_keys=S(*[k for k, *_ in fragged]),
        feature_list_dense_missing_assumed_empty=np.array([d[3] for d in fdense], bool),
        context_dense_defaults=[d[3] for d in cdense]),
        dict(Ncontext_sparse=len(csparse),
             context_sparse_types=[t for _, t in csparse],
             context_ragged_value_types=[r[1] for r in cragged],
             context_ragged_split_types=[r[2] for r in cragged],
             context_dense_shapes=[d[2] for d in cdense],
             Nfeature_list_sparse=len(fsparse), Nfeature_list_dense=len(fdense),
             feature_list_dense_types=[d[1] for d in fdense],
             feature_list_sparse_types=[t for _, t in fsparse],
             feature_list_ragged_value_types=[r[1] for r in fragged],
             feature_list_ragged_split_types=[r[2] for r in fragged],
             feature_list_dense_shapes=[d[2] for d in fdense]),
        note=note, unspecified=unspecified,
        inferred=dict(Tcontext_dense=[d[1] for d in cdense]))


seqv2(S(sq1, sq2, sq3), csparse=[("cs", tf.string)],
      cdense=[("c", tf.float32, [2], np.array([0.5, 0.5], f32))],
      cragged=[("ci", tf.int64, tf.int32)],
      fsparse=[("fs", tf.float32)], fdense=[("fd", tf.int64, [2], True)],
      fragged=[("fr", tf.string, tf.int64)], note="batch")
seqv2(S(sq1).reshape(()), csparse=[("cs", tf.string)],
      cdense=[("c", tf.float32, [2], np.zeros(0, f32))], cragged=[("ci", tf.int64, tf.int64)],
      fsparse=[("fs", tf.float32)], fdense=[("fd", tf.int64, [2], False)],
      fragged=[("fr", tf.string, tf.int32)], note="scalar", unspecified=(5, 12))
seqv2(S(sq1, sq3), fdense=[("fd", tf.int64, [2], False)], note="required feature list missing")
seqv2(S(sq1, sq2), cdense=[("c", tf.float32, [2], np.zeros(0, f32))],
      note="required context missing")
seqv2(S(sq1), fdense=[("fd", tf.float32, [2], True)], note="feature list type mismatch")
seqv2(S(sq1), fdense=[("fd", tf.int64, [3], True)], note="feature list row size mismatch")
seqv2(S(cut(sq1, 4)), fsparse=[("fs", tf.float32)], note="truncated")

# hand-written: repeated map keys (the later wins), empty Features and FeatureLists
ctx_b = ld(0x0A, b"".join(ld(0x0A, ld(0x0A, k.encode()) + ld(0x12, f)) for k, f in [
    ("c", w_floats([1.0, 2.0])), ("c", w_floats([5.0, 6.0])), ("cs", b""),
    ("ci", w_ints([9]))]))
fl_b = ld(0x12, b"".join(ld(0x0A, ld(0x0A, k.encode()) + ld(0x12, f)) for k, f in [
    ("fs", ld(0x0A, w_floats([1.0])) + ld(0x0A, b"") + ld(0x0A, w_floats([]))),
    ("fr", b""), ("fd", ld(0x0A, w_ints([1, 2])))]))
sq_wire = ctx_b + fl_b + b"\x18\x07"
seqv2(S(sq_wire, sq2, sq3), csparse=[("cs", tf.string)],
      cdense=[("c", tf.float32, [2], np.array([0.5, 0.5], f32))],
      cragged=[("ci", tf.int64, tf.int64)], fsparse=[("fs", tf.float32)],
      fdense=[("fd", tf.int64, [2], True)], fragged=[("fr", tf.string, tf.int32)],
      note="hand-written wire format")
seqv2(S(sq2, sq3), cdense=[("ci", tf.int64, [2], np.array([1, 1], i64))],
      note="context default, present with another length")
seqv2(S(sq1), fsparse=[("fd", tf.int64)], fragged=[("fs", tf.float32, tf.int64)],
      cragged=[("cs", tf.string, tf.int32)], note="feature lists as sparse and ragged")
seqv2(S(sq1), csparse=[("c", tf.float32)], cdense=[("c", tf.float32, [2], np.zeros(0, f32))],
      note="a context key dense and sparse")
seqv2(S(sq1), cdense=[("c", tf.float32, [3], np.zeros(0, f32))],
      note="context dense shape mismatch")
seqv2(S(sq1, sq2), names=["one"], fsparse=[("fs", tf.float32)], note="too few names")

op("ParseSequenceExample", dict(serialized=S(sq1, sq2), debug_name=S(),
                                context_dense_defaults=[np.array([0, 0], f32)]),
   dict(feature_list_dense_missing_assumed_empty=[], context_sparse_keys=["ci"],
        context_dense_keys=["c"], feature_list_sparse_keys=["fs"],
        feature_list_dense_keys=["fd"], Ncontext_sparse=1, Ncontext_dense=1,
        Nfeature_list_sparse=1, Nfeature_list_dense=1, context_sparse_types=[tf.int64],
        feature_list_dense_types=[tf.int64],
        context_dense_shapes=[[2]], feature_list_sparse_types=[tf.float32],
        feature_list_dense_shapes=[[2]]), inferred=dict(Tcontext_dense=[tf.float32]))
op("ParseSequenceExample", dict(serialized=S(sq1, sq3), debug_name=S("a", "b"),
                                context_dense_defaults=[]),
   dict(feature_list_dense_missing_assumed_empty=[], context_sparse_keys=[],
        context_dense_keys=[], feature_list_sparse_keys=[], feature_list_dense_keys=["fd"],
        Ncontext_sparse=0, Ncontext_dense=0, Nfeature_list_sparse=0, Nfeature_list_dense=1,
        context_sparse_types=[], feature_list_dense_types=[tf.int64],
        context_dense_shapes=[], feature_list_sparse_types=[],
        feature_list_dense_shapes=[[2]]), note="required feature list missing",
   inferred=dict(Tcontext_dense=[]))


def single_seq(ser, csparse=(), cdense=(), fsparse=(), fdense=(), missing=(), note=""):
    op("ParseSingleSequenceExample", dict(
        serialized=S(ser).reshape(()), feature_list_dense_missing_assumed_empty=S(*missing),
        context_sparse_keys=[S(k).reshape(()) for k, _ in csparse],
        context_dense_keys=[S(k).reshape(()) for k, *_ in cdense],
        feature_list_sparse_keys=[S(k).reshape(()) for k, _ in fsparse],
        feature_list_dense_keys=[S(k).reshape(()) for k, *_ in fdense],
        context_dense_defaults=[d[3] for d in cdense], debug_name=S("dbg").reshape(())),
        dict(context_sparse_types=[t for _, t in csparse],
             feature_list_dense_types=[d[1] for d in fdense],
             context_dense_shapes=[d[2] for d in cdense],
             feature_list_sparse_types=[t for _, t in fsparse],
             feature_list_dense_shapes=[d[2] for d in fdense]), note=note,
        inferred=dict(Ncontext_sparse=len(csparse), Ncontext_dense=len(cdense),
                      Nfeature_list_sparse=len(fsparse), Nfeature_list_dense=len(fdense),
                      Tcontext_dense=[d[1] for d in cdense]))


single_seq(sq1, csparse=[("ci", tf.int64), ("zz", tf.float32)],
           cdense=[("c", tf.float32, [2], np.zeros(0, f32)),
                   ("cd", tf.string, [1], S("dd"))],
           fsparse=[("fs", tf.float32), ("fr", tf.string), ("nope", tf.int64)],
           fdense=[("fd", tf.int64, [2]), ("gone", tf.float32, [3])], missing=["gone"])
single_seq(sq2, fdense=[("fd", tf.int64, [2]), ("fr", tf.string, [1])],
           note="required feature list missing")
single_seq(sq1, fdense=[("fr", tf.string, [1])], note="row size mismatch")
single_seq(sq1, cdense=[("c", tf.int64, [2], np.zeros(0, i64))], note="context type mismatch")
single_seq(b"\x12\x03abc", note="corrupt proto")

single_seq(sq_wire, csparse=[("cs", tf.string), ("ci", tf.int64)],
           cdense=[("c", tf.float32, [2], np.zeros(0, f32))],
           fsparse=[("fs", tf.float32), ("fr", tf.string)], fdense=[("fd", tf.int64, [2])],
           note="hand-written wire format")
single_seq(sq3, cdense=[("c", tf.float32, [2], np.zeros(0, f32))],
           fsparse=[("fs", tf.float32)], fdense=[("fd", tf.int64, [2])], missing=["fd"],
           note="missing feature lists")

# ------------------------------------------------------------------ raw bytes, CSV
op("DecodeRaw", dict(bytes=S(b"\x01\x02\x03\x04\x05\x06\x07\x88", b"abcdefgh")),
   dict(out_type=tf.int16))
op("DecodeRaw", dict(bytes=S(b"\x01\x02\x03\x04\x05\x06\x07\x88")),
   dict(out_type=tf.int32, little_endian=False), note="big endian")
op("DecodeRaw", dict(bytes=S(np.arange(4, dtype=f32).tobytes() + b"\x41", )[:0]),
   dict(out_type=tf.float32), note="empty batch")
op("DecodeRaw", dict(bytes=S(np.array([1.5, -2.25], f64).tobytes()).reshape(1, 1)),
   dict(out_type=tf.float64))
op("DecodeRaw", dict(bytes=S(np.array([1 + 2j, -3.5j], np.complex64).tobytes())),
   dict(out_type=tf.complex64, little_endian=False), note="big endian complex")
op("DecodeRaw", dict(bytes=S(b"\x01\x00\x01")), dict(out_type=tf.bool))
op("DecodeRaw", dict(bytes=S(b"\x01\x02\x03", b"\x04\x05\x06")), dict(out_type=tf.uint8))
op("DecodeRaw", dict(bytes=S(np.array([1.5, 2], np.float16).tobytes())),
   dict(out_type=tf.float16))
op("DecodeRaw", dict(bytes=S(b"abc")), dict(out_type=tf.int16), note="not a multiple")
op("DecodeRaw", dict(bytes=S(b"ab", b"abcd")), dict(out_type=tf.int8), note="sizes differ")
op("DecodeRaw", dict(bytes=S(b"", b"")), dict(out_type=tf.int64), note="empty strings")
op("DecodePaddedRaw", dict(input_bytes=S(b"\x01\x02\x03\x04\x05", b"\x07"),
                           fixed_length=np.array(4, i32)), dict(out_type=tf.uint16))
op("DecodePaddedRaw", dict(input_bytes=S(b"\x01\x02\x03\x04\x05\x06\x07\x08", b""),
                           fixed_length=np.array(8, i32)),
   dict(out_type=tf.int32, little_endian=False))
op("DecodePaddedRaw", dict(input_bytes=S(b"abc"), fixed_length=np.array(3, i32)),
   dict(out_type=tf.int16), note="length not a multiple")
op("DecodePaddedRaw", dict(input_bytes=S(b"abc"), fixed_length=np.array(0, i32)),
   dict(out_type=tf.int8), note="zero length")


def csv(records, defaults, note="", **attrs):
    op("DecodeCSV", dict(records=records, record_defaults=defaults), attrs, note=note,
       inferred=dict(OUT_TYPE=[tf.string if d.dtype == object else tf.as_dtype(d.dtype)
                               for d in defaults]))


csv(S("1,2.5,abc,7", "-3, 4e2 ,\"q,\"\"x\"\"\",", ",,,"),
    [np.array([0], i32), np.array([0.5], f32), S("def"), np.array([9], i64)])
csv(S("a|b|c", "x||z"), [S("d1"), S("d2"), S("d3")], field_delim="|")
csv(S("1,NA,3"), [np.array([0], i64), np.array([-1], i64), np.array([0], i64)],
    na_value="NA", note="na_value")
csv(S("1,2,3,4,5"), [np.array([0], f64), np.array([0], f64)], select_cols=[1, 3])
csv(S("\"a\"b,c"), [S(""), S("")], note="bad quote")
csv(S("x\"y,1"), [S(""), np.array([0], i32)], use_quote_delim=False, note="no quote delim")
csv(S("1,2"), [np.array([0], i32)], note="too many fields")
csv(S("abc"), [np.array([0], i32)], note="not an int")
csv(S(",5"), [np.zeros(0, f32), np.array([1], f32)], note="required field missing")
csv(S("inf,-NaN, +1.5e3 ,1e40").reshape(2, 2)[:1, :1] if False else
    S(" inf", "-nan", "+1.5e3", "1e40").reshape(2, 2), [np.array([0], f32)],
    note="special floats")
csv(S("99999999999,1"), [np.array([0], i32), np.array([0], i32)], note="int32 overflow")
csv(S("\"a,b\",\"\"", "\r\nx,\"y\"\"\""), [S("d"), S("e")], note="quotes and CRLF")
csv(S("1,2,", " 7 ,+8,"), [np.array([0], i64), np.array([0], i64), np.array([5], i64)],
    note="trailing delimiter, spaces")
csv(S("1,2,3", "4,5,6", "7,8,9", "1,2,3").reshape(2, 2), [np.array([0], i32), S("q")],
    select_cols=[0, 2], note="2-D records, select_cols")
csv(S("0.1,1e-50,-0", "1.7976931348623157e308,.5,5."),
    [np.array([0], f64), np.array([0], f32), np.array([0], f32)], note="float edge cases")
csv(S("1e,2"), [np.array([0], f32), np.array([0], f32)], note="bad float")
csv(S("-9223372036854775808,0x10"), [np.array([0], i64), S("")], note="int64 min, hex")
csv(S("+-1"), [np.array([0], f32)], note="plus minus")
csv(S("a,b"), [S("x"), S("y")], select_cols=[1, 0], note="select_cols not increasing")
csv(S("a,b"), [S("x"), S("y")], field_delim="ab", note="two-char delimiter")
csv(S(""), [S("x")], note="empty record")

# ------------------------------------------------------------------ tensors, JSON, zlib
for v in [np.float32(1.5), np.array([[1, -2], [3, -4]], i32), np.zeros((0, 3), f32),
          S("ab", "c"), np.array([True, False, True]), np.array([1 + 2j], np.complex128),
          np.array([0.5, -1], np.float16), np.array([7, 200], np.uint8)]:
    op("SerializeTensor", dict(tensor=v))
for v, t in [(np.array([[1.5, -2]], f32), tf.float32), (np.array([-7, -3], i64), tf.int64),
             (S("x", "yz").reshape(2, 1), tf.string), (np.array(-1, np.int8), tf.int8)]:
    op("ParseTensor", dict(serialized=S(tf.io.serialize_tensor(v).numpy()).reshape(())),
       dict(out_type=t))
for v in [np.array([1.5, -2], np.float16), np.array([[True], [False]]),
          np.array([1 - 2j], np.complex64), np.array([7, 4000000000], np.uint32),
          np.array(b"only", object), np.zeros((2, 0), f64), np.array([-3, 9], np.int16)]:
    t = tf.constant(v) if v.dtype != object else tf.constant(v.item())
    op("ParseTensor", dict(serialized=S(tf.io.serialize_tensor(t).numpy()).reshape(())),
       dict(out_type=t.dtype))
for v in [np.array(-2.5, f64), np.array([[1, 2]], np.uint16), np.array([-1, 1], np.int8),
          np.array([7, 1 << 60], np.uint64), np.array([], object)]:
    op("SerializeTensor", dict(tensor=v))
proto = tf.make_tensor_proto(np.array([3, 3, 3, -1], i32)).SerializeToString()
op("ParseTensor", dict(serialized=S(proto).reshape(())), dict(out_type=tf.int32),
   note="typed int_val field")
op("ParseTensor", dict(serialized=S(tf.io.serialize_tensor(np.float32(2)).numpy())
                       .reshape(())), dict(out_type=tf.int32), note="type mismatch")
op("ParseTensor", dict(serialized=S(b"\x08\x01\x12\x04\x12\x02\x08\x03\x22\x04abcd")
                       .reshape(())), dict(out_type=tf.float32), note="content too short")
op("ParseTensor", dict(serialized=S(b"\x08\x01\x12\xff").reshape(())),
   dict(out_type=tf.float32), note="truncated proto")

js = [b'{"features":{"feature":{"b":{"int64List":{"value":["1",-2]}},'
      b'"a":{"floatList":{"value":[1.5, "NaN", 0.1]}},"c":{"bytesList":{"value":["YWJj"]}}}}}',
      b'{}', b'{"features":{"feature":{"e":{}, "n":null, "x":{"int64_list":{"value":7}}}}}']
op("DecodeJSONExample", dict(json_examples=S(*js)))
op("DecodeJSONExample", dict(json_examples=S(
    b'{"features":{"feature":{}}, "features":{"feature":{"k":{"bytes_list":{"value":"QQ"}}}}}')
    .reshape(1, 1)))
op("DecodeJSONExample", dict(json_examples=S(
    b'{"features":{"feature":{"k":{"bytesList":{"value":["_-8", "YWI="]}},'
    b'"f":{"floatList":{"value":["Infinity", "-Infinity", -0.0, 3]}},'
    b'"i":{"int64List":{"value":["-9223372036854775808", 12, "1e3"]}},'
    b'"e":{"floatList":null}}}}')))
for bad in [b'{"features":', b'{"nope":1}',
            b'{"features":{"feature":{"a":{"int64List":{"value":[1.5]}}}}}',
            b'{"features":{"feature":{"a":{"floatList":{"value":[1e40]}}}}}',
            b'{"features":{"feature":{"a":{"int64List":{}},"a":{"int64List":{}}}}}',
            b'{"features":{"feature":{"a":{"int64List":{"value":[true]}}}}}',
            b'{"features":{"feature":{"a":{"bytesList":{"value":["a$"]}}}}}',
            b'[1, 2]']:
    op("DecodeJSONExample", dict(json_examples=S(bad)), note="bad JSON")

text = b"hello hello hello world!" * 4
z = zlib.compress(text)
op("DecodeCompressed", dict(bytes=S(z, zlib.compress(b"x"))), dict(compression_type="ZLIB"))
op("DecodeCompressed", dict(bytes=S(gzip.compress(text) + gzip.compress(b"!?"))),
   dict(compression_type="GZIP"), note="two gzip members")
op("DecodeCompressed", dict(bytes=S(cut(z, 6), z + b"junk")), dict(compression_type="ZLIB"),
   note="truncated stream, trailing bytes")
op("DecodeCompressed", dict(bytes=S(b"abc", b"")), dict(compression_type=""))
op("DecodeCompressed", dict(bytes=S(z[:4] + b"\xff" + z[5:])), dict(compression_type="ZLIB"),
   note="corrupt")
op("DecodeCompressed", dict(bytes=S(z)), dict(compression_type="GZIP"), note="not gzip")
op("DecodeCompressed", dict(bytes=S(z)), dict(compression_type="LZ4"), note="unknown type")

# ------------------------------------------------------------------ PNG
rng = np.random.default_rng(7)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(
        ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2),
         (1, 0, 2, 1))


def png_file(samples, bits, color, palette=None, trns=None, interlace=0, gamma=None):
    """A PNG written by hand (filter type None), for what TF's encoder cannot write."""
    raw = b""
    for r0, c0, dr, dc in (ADAM7 if interlace else ((0, 0, 1, 1),)):
        sub = samples[r0::dr, c0::dc]
        if sub.size == 0:
            continue
        for row in sub:
            v = row.reshape(-1)
            if bits == 16:
                data = v.astype(">u2").tobytes()
            elif bits == 8:
                data = v.astype(np.uint8).tobytes()
            else:
                bitsarr = ((v[:, None] >> np.arange(bits - 1, -1, -1)) & 1).astype(np.uint8)
                data = np.packbits(bitsarr.reshape(-1)).tobytes()
            raw += b"\0" + data
    h, w = samples.shape[:2]
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bits, color,
                                                                 0, 0, interlace))
    if gamma:
        out += png_chunk(b"gAMA", struct.pack(">I", gamma))
    if palette is not None:
        out += png_chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    return out + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def smooth(h, w, c, noise=10):
    y, x = np.mgrid[:h, :w]
    chans = [(np.sin(x / (3 + k) + y / 5.0) + 1) * 110 + rng.integers(0, noise, (h, w))
             for k in range(c)]
    return np.stack(chans, -1).clip(0, 255).astype(np.uint8)


img3 = smooth(6, 9, 3)
img16 = (smooth(5, 4, 2).astype(np.uint16) * 257 + rng.integers(0, 200, (5, 4, 2))).astype(
    np.uint16)
for img, comp in [(img3, -1), (smooth(4, 5, 1), 9), (smooth(3, 7, 4), 1), (img16, -1),
                  (smooth(1, 6, 3), 6), (smooth(5, 1, 2), 3), (smooth(4, 4, 3), 0)]:
    op("EncodePng", dict(image=img), dict(compression=comp))
op("EncodePng", dict(image=np.zeros((0, 3, 3), np.uint8)), note="empty image")
op("EncodePng", dict(image=np.zeros((3, 3), np.uint8)), note="2-D image")
op("EncodePng", dict(image=np.zeros((2, 2, 5), np.uint8)), note="5 channels")

png3 = tf.io.encode_png(img3).numpy()
png16 = tf.io.encode_png(img16).numpy()
png_ga = tf.io.encode_png(smooth(4, 3, 2)).numpy()
png_rgba = tf.io.encode_png(smooth(3, 5, 4)).numpy()
s1 = rng.integers(0, 2, (5, 11, 1))
s4 = rng.integers(0, 6, (4, 6, 1))
pal = rng.integers(0, 256, (6, 3))
crafted = {
    "gray 1-bit": png_file(s1, 1, 0),
    "gray 2-bit tRNS": png_file(rng.integers(0, 4, (3, 5, 1)), 2, 0, trns=b"\0\2"),
    "palette 4-bit tRNS": png_file(s4, 4, 3, pal, trns=bytes([0, 100, 255, 30])),
    "palette 1-bit": png_file(s1, 1, 3, pal),
    "rgb 16-bit tRNS": png_file(img16[..., :1].repeat(3, 2), 16, 2,
                                trns=struct.pack(">HHH", *[int(v) for v in img16[0, 0, :1]
                                                          .repeat(3)])),
    "rgb interlaced": png_file(smooth(9, 10, 3), 8, 2, interlace=1),
    "rgb gamma": png_file(smooth(3, 4, 3), 8, 2, gamma=45455),
}
for data, ch, dt, note in [(png3, 0, tf.uint8, ""), (png3, 1, tf.uint8, "rgb to gray"),
                           (png3, 4, tf.uint16, "add alpha"), (png16, 0, tf.uint16, "16-bit"),
                           (png16, 3, tf.uint8, "16-bit to 8"), (png_ga, 0, tf.uint8, "gray+a"),
                           (png_ga, 3, tf.uint16, "gray+a to rgb"),
                           (png_rgba, 1, tf.uint8, "rgba to gray")]:
    op("DecodePng", dict(contents=S(data).reshape(())), dict(channels=ch, dtype=dt), note=note)
for name, data in crafted.items():
    for ch, dt in [(0, tf.uint8), (1, tf.uint8), (3, tf.uint16), (4, tf.uint8)]:
        op("DecodePng", dict(contents=S(data).reshape(())), dict(channels=ch, dtype=dt),
           note=name)
bad_crc = bytearray(png3)
bad_crc[30] ^= 0xFF  # inside IHDR's CRC
idat = png3.index(b"IDAT")
corrupt = png3[:idat + 6] + b"\xff\xff\xff" + png3[idat + 9:]
for data, note in [(bytes(bad_crc), "bad IHDR CRC"), (cut(png3, 30), "truncated"),
                   (corrupt, "corrupt IDAT"), (b"\x89PNG\r\n\x1a\n", "signature only")]:
    op("DecodePng", dict(contents=S(data).reshape(())), note=note)
op("DecodePng", dict(contents=S(png3).reshape(())), dict(channels=2), note="channels 2")
op("DecodePng", dict(contents=S(png3, png3)), note="not a scalar")
op("DecodePng", dict(contents=S(b"").reshape(())), note="empty input")

# ------------------------------------------------------------------ GIF


def lzw_encode(indices: bytes, min_bits: int) -> bytes:
    """A plain GIF LZW encoder (clear code first, table reset when full)."""
    clear, eoi = 1 << min_bits, (1 << min_bits) + 1
    out, acc, nacc = bytearray(), 0, 0
    bits = min_bits + 1

    def emit(code):
        nonlocal acc, nacc
        acc |= code << nacc
        nacc += bits
        while nacc >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nacc -= 8

    table = {bytes([i]): i for i in range(clear)}
    nxt = eoi + 1
    emit(clear)
    cur = b""
    for b in indices:
        cand = cur + bytes([b])
        if cand in table:
            cur = cand
            continue
        emit(table[cur])
        if nxt < 4096:
            table[cand] = nxt
            nxt += 1
            if nxt - 1 == (1 << bits) and bits < 12:
                bits += 1
        else:
            emit(clear)
            table = {bytes([i]): i for i in range(clear)}
            nxt, bits = eoi + 1, min_bits + 1
        cur = bytes([b])
    if cur:
        emit(table[cur])
    emit(eoi)
    if nacc:
        out.append(acc & 0xFF)
    return bytes(out)


def blocks(data: bytes) -> bytes:
    return b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255]
                    for i in range(0, len(data), 255)) + b"\0"


def gif_file(w, h, gct, frames, trailer=True):
    """frames: (left, top, w, h, indices, local colour table or None, transparent index or
    None, interlaced)."""
    bits = (len(gct) - 1).bit_length() - 1
    out = b"GIF89a" + struct.pack("<HHBBB", w, h, 0x80 | bits, 0, 0) + gct.tobytes()
    for left, top, fw, fh, idx, lct, trans, inter in frames:
        if trans is not None:
            out += b"\x21\xf9\x04" + bytes([1, 10, 0, trans]) + b"\0"
        flags = 0x40 if inter else 0
        if lct is not None:
            flags |= 0x80 | ((len(lct) - 1).bit_length() - 1)
        out += b"\x2c" + struct.pack("<HHHHB", left, top, fw, fh, flags)
        if lct is not None:
            out += lct.tobytes()
        data = idx
        if inter:
            order = [r for st, sp in ((0, 8), (4, 8), (2, 4), (1, 2)) for r in range(st, fh, sp)]
            data = idx[order]
        out += b"\x03" + blocks(lzw_encode(data.astype(np.uint8).tobytes(), 3))
    return out + (b"\x3b" if trailer else b"")


gct = rng.integers(0, 256, (8, 3)).astype(np.uint8)
lct = rng.integers(0, 256, (8, 3)).astype(np.uint8)
f1 = rng.integers(0, 8, (6, 7))
f2 = rng.integers(0, 8, (3, 4))
f3 = rng.integers(0, 8, (10, 5))
gif1 = gif_file(7, 6, gct, [(0, 0, 7, 6, f1, None, None, False)])
gif_anim = gif_file(7, 6, gct, [(0, 0, 7, 6, f1, None, None, False),
                                (2, 1, 4, 3, f2, lct, 3, False),
                                (5, 4, 4, 3, f2, None, None, False)])
gif_inter = gif_file(5, 10, gct, [(0, 0, 5, 10, f3, None, 5, True)])
gif_partial_first = gif_file(9, 9, gct, [(1, 2, 4, 3, f2, None, None, False),
                                         (0, 0, 7, 6, f1, None, 0, False)])
for data, note in [(gif1, "one frame"), (gif_anim, "animation"), (gif_inter, "interlaced"),
                   (gif_partial_first, "partial first frame"),
                   (gif1[:-1], "no trailer")]:
    op("DecodeGif", dict(contents=S(data).reshape(())), note=note)
bad_lzw = gif_file(7, 6, gct, [(0, 0, 7, 6, f1[:2], None, None, False)])
bad_lzw = bad_lzw.replace(struct.pack("<HHHHB", 0, 0, 7, 2, 0), struct.pack("<HHHHB", 0, 0,
                                                                             7, 6, 0))
op("DecodeGif", dict(contents=S(bad_lzw).reshape(())), note="image data ends too soon")
op("DecodeGif", dict(contents=S(b"GIF89a\x01").reshape(())), note="truncated header")
op("DecodeGif", dict(contents=S(b"GIF8" + bytes(20)).reshape(())), note="no image")
op("DecodeImage", dict(contents=S(gif_anim).reshape(())), dict(expand_animations=False),
   note="first frame")
op("DecodeImage", dict(contents=S(gif_anim).reshape(())), dict(dtype=tf.float32))
op("DecodeImage", dict(contents=S(gif1).reshape(())), dict(channels=1), note="gif channels 1")
op("DecodePng", dict(contents=S(gif1).reshape(())), note="one-frame gif via DecodePng")
op("DecodeJpeg", dict(contents=S(gif_anim).reshape(())), note="animation via DecodeJpeg")

# ------------------------------------------------------------------ BMP


def bmp_file(pix, top_down=False):
    """An uncompressed BMP (BGR(A) or 8-bit rows padded to 4 bytes)."""
    h, w, c = pix.shape
    rows = pix[..., ::-1] if c >= 3 else pix
    if c == 4:
        rows = pix[..., [2, 1, 0, 3]]
    row_size = (w * c + 3) // 4 * 4
    body = b""
    for r in (range(h) if top_down else range(h - 1, -1, -1)):
        line = rows[r].astype(np.uint8).tobytes()
        body += line + b"\x05" * (row_size - len(line))
    header_size = 54
    hdr = b"BM" + struct.pack("<IHHI", header_size + len(body), 0, 0, header_size)
    hdr += struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 8 * c, 0, len(body),
                       2835, 2835, 0, 0)
    return hdr + body


bmp24 = bmp_file(smooth(3, 5, 3))
bmp32 = bmp_file(smooth(4, 3, 4), top_down=True)
bmp8 = bmp_file(smooth(2, 3, 1))
for data, ch, note in [(bmp24, 0, "24-bit"), (bmp24, 4, "24-bit to rgba"),
                       (bmp32, 0, "32-bit top-down"), (bmp32, 3, "32-bit to rgb"),
                       (bmp8, 0, "8-bit"), (bmp8, 3, "8-bit to rgb"), (bmp24, 1, "channels 1")]:
    op("DecodeBmp", dict(contents=S(data).reshape(())), dict(channels=ch), note=note)
op("DecodeBmp", dict(contents=S(bmp24 + b"x").reshape(())), note="size mismatch")
op("DecodeBmp", dict(contents=S(png3).reshape(())), note="a PNG")
op("DecodeImage", dict(contents=S(bmp24).reshape(())), dict(dtype=tf.uint16))
op("DecodeImage", dict(contents=S(png16).reshape(())), dict(dtype=tf.float32), tol=1e-7)
op("DecodeImage", dict(contents=S(png3).reshape(())), dict(dtype=tf.uint16, channels=4))
op("DecodeImage", dict(contents=S(b"not an image").reshape(())), note="unknown format")
op("DecodeGif", dict(contents=S(png3).reshape(())), note="png via DecodeGif")
op("DecodeJpeg", dict(contents=S(png_rgba).reshape(())), dict(channels=3),
   note="png via DecodeJpeg")

# ------------------------------------------------------------------ JPEG without Pillow
jpeg_img = smooth(13, 18, 3)
jpg = tf.io.encode_jpeg(jpeg_img, quality=85).numpy()
jpg_gray = tf.io.encode_jpeg(smooth(9, 7, 1)).numpy()
op("ExtractJpegShape", dict(contents=S(jpg).reshape(())))
op("ExtractJpegShape", dict(contents=S(jpg_gray).reshape(())), dict(output_type=tf.int64))
op("ExtractJpegShape", dict(contents=S(png3).reshape(())), note="not a JPEG")
op("DecodeJpeg", dict(contents=S(jpg).reshape(())), dict(channels=4), note="4 channels")
op("DecodeJpeg", dict(contents=S(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01").reshape(())),
   note="no frame header")
op("DecodeJpeg", dict(contents=S(jpg).reshape(())), dict(ratio=3), note="ratio 3")
op("DecodeJpeg", dict(contents=S(jpg).reshape(())), dict(dct_method="FLOAT"),
   note="bad dct_method")
op("DecodeAndCropJpeg", dict(contents=S(jpg).reshape(()),
                             crop_window=np.array([[0, 0, 2, 2]], i32)), note="2-D window")
op("DecodeAndCropJpeg", dict(contents=S(png3).reshape(()),
                             crop_window=np.array([0, 0, 2, 2], i32)), note="a PNG")
op("EncodeJpeg", dict(image=smooth(3, 3, 2)), note="2 channels")
op("EncodeJpeg", dict(image=smooth(3, 3, 3)), dict(quality=101), note="quality 101")
op("EncodeJpeg", dict(image=smooth(3, 3, 3)), dict(format="grayscale"), note="format")
op("EncodeJpegVariableQuality", dict(images=smooth(3, 3, 3), quality=np.array(-1, i32)),
   note="quality -1")

# ------------------------------------------------------------------ JPEG with Pillow (side)


def pil_jpeg(img, **kw):
    buf = io.BytesIO()
    Image.fromarray(img[..., 0] if img.shape[2] == 1 else img).save(buf, "JPEG", **kw)
    return buf.getvalue()


buf = io.BytesIO()
Image.fromarray(smooth(5, 6, 4), "CMYK").save(buf, "JPEG", quality=90)
jpgs = {"420": jpg, "gray": jpg_gray,
        "444": tf.io.encode_jpeg(smooth(7, 5, 3), chroma_downsampling=False).numpy(),
        "progressive": tf.io.encode_jpeg(smooth(11, 13, 3), progressive=True).numpy(),
        "422": pil_jpeg(smooth(6, 11, 3), subsampling=1, quality=80),
        "cmyk": buf.getvalue()}
for name, data in jpgs.items():
    for attrs in [{}, dict(channels=1), dict(channels=3, ratio=2), dict(ratio=4),
                  dict(fancy_upscaling=False), dict(dct_method="INTEGER_ACCURATE"),
                  dict(dct_method="INTEGER_ACCURATE", ratio=2), dict(ratio=8)]:
        op("DecodeJpeg", dict(contents=S(data).reshape(())), attrs, note=name, side=True,
           needs="PIL")
for name in ("420", "422", "progressive"):
    data = jpgs[name]
    for window, attrs in [([2, 3, 5, 6], {}), ([0, 0, 4, 9], {}), ([1, 8, 6, 7], {}),
                          ([2, 3, 5, 6], dict(dct_method="INTEGER_ACCURATE")),
                          ([3, 1, 2, 2], dict(channels=1)), ([0, 0, 40, 40], {})]:
        op("DecodeAndCropJpeg", dict(contents=S(data).reshape(()),
                                     crop_window=np.array(window, i32)), attrs, note=name,
           side=True, needs="PIL")
op("DecodeImage", dict(contents=S(jpg).reshape(())), dict(dtype=tf.float32), side=True,
   needs="PIL")
op("DecodePng", dict(contents=S(jpg).reshape(())), dict(dtype=tf.uint16), side=True,
   needs="PIL", note="JPEG via DecodePng")
op("DecodeGif", dict(contents=S(jpg).reshape(())), side=True, needs="PIL",
   note="JPEG via DecodeGif")
op("DecodeJpeg", dict(contents=S(cut(jpg, 40)).reshape(())), side=True, needs="PIL",
   note="truncated")
for img, attrs in [(smooth(8, 8, 3), {}), (smooth(17, 23, 3), dict(quality=40)),
                   (smooth(9, 5, 1), dict(format="grayscale", progressive=True)),
                   (smooth(6, 7, 3), dict(chroma_downsampling=False, optimize_size=True)),
                   (smooth(5, 5, 3), dict(density_unit="cm", x_density=72, y_density=96,
                                          xmp_metadata="<x:xmpmeta>dfg</x:xmpmeta>")),
                   (smooth(4, 6, 3), dict(quality=0))]:
    op("EncodeJpeg", dict(image=img), attrs, side=True, needs="PIL")
op("EncodeJpegVariableQuality", dict(images=smooth(7, 6, 3), quality=np.array(33, i32)),
   side=True, needs="PIL")

# ------------------------------------------------------------------ WAV
audio = np.array([[0.5, -0.25], [0.999, -1.0], [1.5, -2.0], [0.3, 0.00002],
                  [-0.5, 0.75]], f32)
for a, rate in [(audio, 16000), (audio[:, :1], 8000), (np.zeros((0, 2), f32), 44100),
                (np.array([[0.5 / 32768], [-1.5 / 32768], [2.5 / 32768], [0.7]], f32), 22050)]:
    op("EncodeWav", dict(audio=a, sample_rate=np.array(rate, i32)))
op("EncodeWav", dict(audio=audio[:, 0], sample_rate=np.array(8000, i32)), note="1-D audio")
op("EncodeWav", dict(audio=audio, sample_rate=np.array(0, i32)), note="rate 0")
wav2 = tf.audio.encode_wav(audio, 16000).numpy()
wav1 = tf.audio.encode_wav(audio[:, :1] * -0.7, 11025).numpy()
for data, attrs in [(wav2, {}), (wav2, dict(desired_channels=1)),
                    (wav1, dict(desired_channels=3, desired_samples=7)),
                    (wav2, dict(desired_samples=2))]:
    op("DecodeWav", dict(contents=S(data).reshape(())), attrs)
junk = wav2[:12] + b"JUNK" + struct.pack("<I", 4) + b"abcd" + wav2[12:]
op("DecodeWav", dict(contents=S(junk).reshape(())), note="JUNK chunk before fmt")
list_tail = wav1 + b"LIST" + struct.pack("<I", 4) + b"info"
op("DecodeWav", dict(contents=S(list_tail).reshape(())), note="chunk after data")
for data, note in [(cut(wav2, 5), "truncated"), (b"RIFX" + wav2[4:], "not RIFF"),
                   (wav2[:34] + struct.pack("<H", 8) + wav2[36:], "8-bit"),
                   (wav2[:36], "no data chunk")]:
    op("DecodeWav", dict(contents=S(data).reshape(())), note=note)

# ------------------------------------------------------------------ whole graphs (TF1)


def parse_graph():
    feats = {"a": tf.io.FixedLenFeature([2], tf.float32, default_value=[-1.0, -2.0]),
             "v": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True),
             "b": tf.io.VarLenFeature(tf.int64),
             "r": tf.io.RaggedFeature(tf.float32, row_splits_dtype=tf.int32)}
    out = tf.io.parse_example(tf.constant([ex1, ex2, ex3]), feats)
    one = tf.io.parse_single_example(tf.constant(ex2), {"v": feats["v"], "b": feats["b"]})
    ctx, lists = tf.io.parse_single_sequence_example(
        tf.constant(sq1), context_features={"c": tf.io.FixedLenFeature([2], tf.float32)},
        sequence_features={"fd": tf.io.FixedLenSequenceFeature([2], tf.int64),
                           "fs": tf.io.VarLenFeature(tf.float32)})
    fetches = [out["a"], out["v"], out["b"].indices, out["b"].values, out["b"].dense_shape,
               out["r"].values, out["r"].row_splits, one["v"], one["b"].values, ctx["c"],
               lists["fd"], lists["fs"].indices, lists["fs"].values]
    return [(fetches, [])]


def image_graph():
    png = tf.io.decode_png(tf.constant(png3), channels=4)
    flt = tf.image.convert_image_dtype(png, tf.float32)
    gif = tf.io.decode_gif(tf.constant(gif_anim))
    img = tf.io.decode_image(tf.constant(bmp24), channels=3, expand_animations=False)
    enc = tf.io.encode_png(tf.cast(flt * 255.0, tf.uint8)[:, :, :3])
    wav, rate = tf.audio.decode_wav(tf.constant(wav2), desired_channels=1)
    cols = tf.io.decode_csv(tf.constant(["1,a,2.5", "4,,-1"]), [[0], ["z"], [0.0]])
    raw_ = tf.io.decode_raw(tf.constant([b"\x01\x02\x03\x04"]), tf.uint16)
    ten = tf.io.parse_tensor(tf.io.serialize_tensor(tf.constant([[1.5, 2.5]])), tf.float32)
    return [([png, flt, gif, img, enc, wav, rate, *cols, raw_, ten], [])]


rawgen.graph("parsing_graph", parse_graph,
             ["ParseExampleV2", "ParseSequenceExampleV2"])
rawgen.graph("formats_graph", image_graph,
             ["DecodePng", "DecodeGif", "DecodeImage", "EncodePng", "DecodeWav", "DecodeCSV",
              "DecodeRaw", "ParseTensor", "SerializeTensor"])

if __name__ == "__main__":
    write()
