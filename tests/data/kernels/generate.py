"""Recreates the .npy files under tests/data/kernels with TensorFlow (array/, math/, nn/, extra/).

Run with TensorFlow's own virtualenv, never in CI (TensorFlow is not a dependency of dfg):

    /tmp/tfvenv/bin/python tests/data/kernels/generate.py           # write every file
    /tmp/tfvenv/bin/python tests/data/kernels/generate.py --check   # compare, write nothing

- math/<case>/: copies of the conformance case tests/data/conformance/<case> (graph, case.json,
  feeds); every expected value is recomputed by running the graph's steps in a TensorFlow v1
  Session without Grappler.
- array/<case>__<tensor>.npy and nn/<prefix>_<tensor>.npy: tensors of a conformance case's first
  step, by running its graph in TensorFlow with the case's feeds (feeds, fetches and Const
  weights; see nn/README.md). A tensor name `a/b:1` is spelled `a_b_1` in the file name.
- extra/<case>__<tensor>.npy: the tf.raw_ops calls listed in extra/README.md, in eager mode.
  Hand-made inputs are spelled out below; random ones come from one seeded numpy stream.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# oneDNN off: plain Eigen kernels, the bits the conformance files were made with.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent / "conformance"
raw = tf.raw_ops

f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64

# =============================================================================================
# running conformance graphs
# =============================================================================================


def session_for(case: str) -> tuple[Any, Any]:
    from google.protobuf import text_format

    gd = tf.compat.v1.GraphDef()
    text_format.Parse((CONFORMANCE / case / "graph.pbtxt").read_text(), gd)
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    config = tf.compat.v1.ConfigProto()
    # The graph as written: no Grappler, no graph-level constant folding.
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    return g, tf.compat.v1.Session(graph=g, config=config)


def feeds_of(case: str, step: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.load(CONFORMANCE / case / v, allow_pickle=False)
            for k, v in step["feed"].items()}


def math_case(case: str) -> dict[str, np.ndarray]:
    """Every file of math/<case>: copied inputs, TensorFlow's fetches."""
    spec = json.loads((CONFORMANCE / case / "case.json").read_text())
    out: dict[str, Any] = {"graph.pbtxt": CONFORMANCE / case / "graph.pbtxt",
                           "case.json": CONFORMANCE / case / "case.json"}
    g, sess = session_for(case)
    with sess:
        for step in spec["steps"]:
            for v in step["feed"].values():
                out[v] = np.load(CONFORMANCE / case / v, allow_pickle=False)
            targets = [g.get_operation_by_name(t) for t in step["target"]]
            try:
                values = sess.run(list(step["fetch"]) + targets, feed_dict=feeds_of(case, step))
            except tf.errors.OpError as e:
                assert type(e).__name__ == step["expect_error"], (case, e)
                continue
            assert step["expect_error"] is None, case
            for name, v in zip(step["fetch"], values):
                out[step["expect"][name]] = np.asarray(v)
    return out


def tensors_of(case: str, names: list[str]) -> dict[str, np.ndarray]:
    """Tensors of the case's first step (a fed tensor gives its feed)."""
    spec = json.loads((CONFORMANCE / case / "case.json").read_text())
    _, sess = session_for(case)
    with sess:
        values = sess.run(names, feed_dict=feeds_of(case, spec["steps"][0]))
    return {n: np.asarray(v) for n, v in zip(names, values)}


def spelled(tensor: str) -> str:
    node, _, index = tensor.partition(":")
    return node.replace("/", "_") + ("" if index in ("", "0") else f"_{index}")


ARRAY = {
    "compare_select_where": ["coords:0", "mask:0"],
    "reductions": ["argmax:0", "argmin:0", "x:0"],
    "shape_builders": ["delta:0", "dims:0", "filled:0", "gather_cols:0", "gather_rows:0",
                       "idx:0", "labels:0", "limit:0", "n:0", "onehot:0", "onehot_axis0:0",
                       "ones:0", "padded:0", "params:0", "range_float:0", "range_int:0",
                       "sliced:0", "start:0", "tiled:0", "x:0", "zeros:0"],
    "shape_ops": ["anything:0", "cat_first:0", "cat_last:0", "cols:0", "cols:1", "cols:2",
                  "expanded:0", "flat:0", "halves:0", "halves:1", "packed:0", "parts:0",
                  "parts:1", "perm:0", "rank:0", "shape:0", "shape64:0", "size:0",
                  "squeezed:0", "x:0"],
    "strided_slice": ["clamped:0", "ellipsis:0", "negative_stride:0", "newaxis_rev:0",
                      "python_index/strided_slice:0", "rows:0", "scalar:0", "step_shrink:0",
                      "x:0"],
}

# nn/<prefix>_<tensor>: (conformance case, tensors)
NN = {
    "cnn": ("cnn", ["images:0", "w1:0", "w2:0", "w3:0", "conv1:0", "bn1:0", "pool1:0",
                    "conv3:0", "avgpool:0", "gap:0"]),
    "bench_cnn": ("bench_cnn", ["images:0", "w0:0", "w1:0", "w2:0", "b0:0", "b1:0", "b2:0",
                                "fc:0", "logits:0", "probs:0"]),
    "mlp": ("mlp", ["logits:0", "probs:0", "log_probs:0"]),
    "elementwise": ("elementwise_math", ["x:0", "relu:0", "relu6:0", "softplus:0"]),
    "reductions": ("reductions", ["x:0", "small:0", "b:0", "k:0", "sum_keep:0", "mean_neg:0",
                                  "max_all:0", "min_keep:0", "prod:0", "all_rows:0",
                                  "any_cols:0", "int_sum:0"]),
}


def array_files() -> dict[str, np.ndarray]:
    out = {}
    for case, names in ARRAY.items():
        for n, v in tensors_of(case, names).items():
            out[f"{case}__{spelled(n)}.npy"] = v
    return out


def nn_files() -> dict[str, np.ndarray]:
    out = {}
    for prefix, (case, names) in NN.items():
        for n, v in tensors_of(case, names).items():
            out[f"{prefix}_{spelled(n)}.npy"] = v
    return out


# =============================================================================================
# extra: tf.raw_ops in eager mode
# =============================================================================================


def np_of(t: Any) -> np.ndarray:
    a = t.numpy() if hasattr(t, "numpy") else np.asarray(t)
    if a.dtype == object:            # strings: fixed-width bytes, loadable without pickle
        a = np.array(a.tolist(), dtype=bytes)
    return a


def strings(*xs: bytes) -> np.ndarray:
    return np.array(list(xs), dtype=bytes)


def extra_files() -> dict[str, np.ndarray]:
    # One numpy stream, drawn in this order, gives every random input (the original files's).
    rng = np.random.default_rng(2024)
    out: dict[str, np.ndarray] = {}

    def put(case: str, **arrays: Any) -> None:
        for k, v in arrays.items():
            out[f"{case}__{k}.npy"] = np_of(v)

    # --- space/batch ---------------------------------------------------------------------
    x = rng.standard_normal((2, 3, 5, 2)).astype(f32)
    o = raw.SpaceToBatchND(input=x, block_shape=i32([2, 3]), paddings=i32([[1, 0], [0, 1]]))
    put("s2b_pad", x=x, out=o,
        back=raw.BatchToSpaceND(input=o, block_shape=i32([2, 3]), crops=i32([[1, 0], [0, 1]])))
    x = rng.integers(-50, 50, (1, 5, 3)).astype(i32)
    put("s2b_1d", x=x, out=raw.SpaceToBatchND(input=x, block_shape=i64([2]),
                                               paddings=i64([[1, 0]])))
    x = np.arange(32, dtype=f32).reshape(8, 2, 2, 1)
    put("b2s_crop", x=x, out=raw.BatchToSpaceND(input=x, block_shape=i32([2, 2]),
                                                 crops=i32([[1, 0], [0, 2]])))
    put("linspace",
        f32=raw.LinSpace(start=f32(-3.3), stop=f32(7.1), num=i32(17)),
        f64=raw.LinSpace(start=f64(5.0), stop=f64(-2.0), num=i32(11)))

    # --- tensor scatter ------------------------------------------------------------------
    t = rng.integers(-9, 10, (4, 3)).astype(f32)
    idx1 = np.array([[1], [3], [1]], i32)
    upd1 = rng.integers(-9, 10, (3, 3)).astype(f32)
    idx2 = np.array([[0, 0], [2, 1], [0, 0], [3, 2]], i64)
    upd2 = np.array([5, -7, 2, 8], f32)
    put("tscatter", t=t, idx1=idx1, upd1=upd1, idx2=idx2, upd2=upd2)
    for op in ("TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub",
               "TensorScatterMax", "TensorScatterMin"):
        fn = getattr(raw, op)
        put("tscatter", **{f"{op}_rows": fn(tensor=t, indices=idx1, updates=upd1),
                           f"{op}_elems": fn(tensor=t, indices=idx2, updates=upd2)})

    # --- bucketize, segments -------------------------------------------------------------
    xf = (rng.standard_normal(40) * 3).astype(f32)
    xi = np.array([-5, 0, 1, 5, 10, 33554433, 33554435, 33554437], i64)
    put("bucketize", xf=xf, xi=xi,
        of=raw.Bucketize(input=xf, boundaries=[-2.0, -0.5, 0.0, 0.1, 1.0, 3.0]),
        oi=raw.Bucketize(input=xi, boundaries=[0.0, 1.0, 10.0, 33554436.0]))
    data = (rng.standard_normal((7, 3)) * 4).astype(f32)
    ids = np.array([0, 0, 2, 2, 2, 5, 5], i32)
    idata = np.array([[-7, 4], [2, 5], [9, -3], [-4, -4]], i32)
    iids = np.array([0, 0, 1, 3], i64)
    put("segment", data=data, ids=ids, idata=idata, iids=iids,
        imean=raw.SegmentMean(data=idata, segment_ids=iids))
    for op in ("SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"):
        put("segment", **{op: getattr(raw, op)(data=data, segment_ids=ids)})
    ndata = np.array([np.nan, np.nan, 1, np.nan, np.nan, 3, -np.inf, -np.inf], f32)
    nids = np.array([0, 0, 1, 1, 2, 2, 3, 3], i32)
    put("segment_nan", ndata=ndata, nids=nids,
        max=raw.SegmentMax(data=ndata, segment_ids=nids),
        min=raw.SegmentMin(data=ndata, segment_ids=nids),
        umax=raw.UnsortedSegmentMax(data=ndata, segment_ids=nids, num_segments=i32(5)))
    udata = (rng.standard_normal((3, 4, 2)) * 4).astype(f32)
    uids = np.array([[0, 2, -1, 2], [5, 0, 0, -1], [2, 2, 5, 0]], i32)
    uidata = rng.integers(-9, 10, (5, 2)).astype(i32)
    uiids = np.array([3, 0, 3, -1, 0], i64)
    put("unsorted_segment", udata=udata, uids=uids, uidata=uidata, uiids=uiids,
        imax=raw.UnsortedSegmentMax(data=uidata, segment_ids=uiids, num_segments=i32(4)),
        imin=raw.UnsortedSegmentMin(data=uidata, segment_ids=uiids, num_segments=i32(4)))
    for op in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin",
               "UnsortedSegmentProd"):
        put("unsorted_segment",
            **{op: getattr(raw, op)(data=udata, segment_ids=uids, num_segments=i32(6))})

    # --- fake quantization ---------------------------------------------------------------
    x = np.concatenate([np.linspace(-8, 8, 321), rng.standard_normal(64) * 3]).astype(f32)
    put("fake_quant", x=x)
    params = [(-6, 6, 8, False), (-0.1, 0.25, 8, False), (0.5, 2, 8, False), (-2, -0.5, 4, True),
              (-1.3, 3.7, 16, True), (-10.1, 0.3, 2, False)]
    for i, (lo, hi, bits, narrow) in enumerate(params):
        put("fake_quant", **{
            f"args{i}": raw.FakeQuantWithMinMaxArgs(inputs=x, min=lo, max=hi, num_bits=bits,
                                                    narrow_range=narrow),
            f"vars{i}": raw.FakeQuantWithMinMaxVars(inputs=x, min=f32(lo), max=f32(hi),
                                                    num_bits=bits, narrow_range=narrow)})

    # --- 3-D convolution and pooling -----------------------------------------------------
    x = rng.standard_normal((2, 5, 6, 4, 3)).astype(f32)
    w = rng.standard_normal((3, 2, 3, 3, 4)).astype(f32)
    put("conv3d", x=x, w=w,
        same_s2=raw.Conv3D(input=x, filter=w, strides=[1, 2, 2, 1, 1], padding="SAME"),
        valid_s1=raw.Conv3D(input=x, filter=w, strides=[1, 1, 1, 1, 1], padding="VALID"),
        valid_s3=raw.Conv3D(input=x, filter=w, strides=[1, 1, 3, 2, 1], padding="VALID"),
        dil_same=tf.nn.convolution(x, w, padding="SAME", dilations=[2, 1, 2]),
        maxpool_same=raw.MaxPool3D(input=x, ksize=[1, 2, 3, 2, 1], strides=[1, 2, 2, 1, 1],
                                   padding="SAME"),
        avgpool_same=raw.AvgPool3D(input=x, ksize=[1, 2, 3, 2, 1], strides=[1, 2, 2, 1, 1],
                                   padding="SAME"),
        maxpool_valid=raw.MaxPool3D(input=x, ksize=[1, 3, 2, 2, 1], strides=[1, 1, 2, 2, 1],
                                    padding="VALID"),
        avgpool_valid=raw.AvgPool3D(input=x, ksize=[1, 3, 2, 2, 1], strides=[1, 1, 2, 2, 1],
                                    padding="VALID"))

    # --- detection -----------------------------------------------------------------------
    inf, nan = np.inf, np.nan
    pred = rng.integers(0, 4, (8, 5)).astype(f32)
    pred[6, 2], pred[7, 0] = nan, inf
    tgt = np.array([0, 1, 2, 3, 4, 5, 1, 1], i32)
    put("in_top_k", pred=pred, tgt=tgt,
        **{f"k{k}": raw.InTopKV2(predictions=pred, targets=tgt, k=i32(k)) for k in (1, 2, 3)})
    boxes = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                      [0, 10.1, 1, 11.1], [0, 100, 1, 101], [1, 1, 0, 0], [50, 50, 50, 52]], f32)
    scores = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.9, 0.8], f32)
    corner = rng.random((30, 2)) * 10
    size = rng.random((30, 2)) * 4 + 0.1
    rboxes = np.concatenate([corner, corner + size], 1).astype(f32)
    # Scores on a grid of eighths, so that ties occur.
    rscores = (np.round(rng.random(30) * 8) / 8).astype(f32)
    put("nms", boxes=boxes, scores=scores, rboxes=rboxes, rscores=rscores,
        v3=raw.NonMaxSuppressionV3(boxes=boxes, scores=scores, max_output_size=6,
                                   iou_threshold=f32(0.5), score_threshold=f32(0.55)),
        rand_v3=raw.NonMaxSuppressionV3(boxes=rboxes, scores=rscores, max_output_size=20,
                                        iou_threshold=f32(0.3), score_threshold=f32(0.2)))
    v4 = raw.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=7,
                                 iou_threshold=f32(0.5), score_threshold=f32(0.4),
                                 pad_to_max_output_size=True)
    put("nms", **{f"v4_{j}": v for j, v in enumerate(v4)})
    v5 = [("v5hard", boxes, scores, 5, 0.5, 0.0, 0.0, False),
          ("v5soft", boxes, scores, 8, 0.5, 0.1, 0.5, True),
          ("rand_v5soft", rboxes, rscores, 30, 0.3, 0.05, 1.0, False)]
    for name, b, s, m, iou, thr, sigma, pad in v5:
        r = raw.NonMaxSuppressionV5(boxes=b, scores=s, max_output_size=m,
                                    iou_threshold=f32(iou), score_threshold=f32(thr),
                                    soft_nms_sigma=f32(sigma), pad_to_max_output_size=pad)
        put("nms", **{f"{name}_{j}": v for j, v in enumerate(r)})

    img = (rng.random((2, 5, 6, 2)) * 100).astype(f32)
    cboxes = np.array([[-0.5, -0.5, 1.5, 1.5], [0.1, 0.2, 0.7, 0.9], [0.8, 0.9, 0.2, 0.1],
                       [0.25, -0.2, 0.25, 0.6], [-1, -1, -0.5, -0.5]], f32)
    bind = np.array([0, 1, 1, 0, 1], i32)

    def crop(image: np.ndarray, size: list[int], **kw: Any) -> Any:
        return raw.CropAndResize(image=image, boxes=cboxes, box_ind=bind,
                                 crop_size=i32(size), **kw)

    put("crop_and_resize", img=img, cboxes=cboxes, bind=bind,
        bilinear=crop(img, [3, 4], extrapolation_value=-1.0),
        nearest=crop(img, [4, 3], method="nearest", extrapolation_value=7.0),
        one=crop(img, [1, 1]), u8=crop(img.astype(np.uint8), [2, 3]))

    # --- resizing ------------------------------------------------------------------------
    rimg = (rng.random((2, 5, 7, 3)) * 255).astype(f32)
    u8img = np.array([[[[241, 100], [157, 121], [94, 192], [86, 239]]]], np.uint8)
    put("resize", rimg=rimg, u8img=u8img,
        cubic_legacy=raw.ResizeBicubic(images=rimg, size=i32([9, 4])),
        cubic_align=raw.ResizeBicubic(images=rimg, size=i32([9, 4]), align_corners=True),
        cubic_half=raw.ResizeBicubic(images=rimg, size=i32([9, 4]), half_pixel_centers=True),
        cubic_u8=raw.ResizeBicubic(images=u8img, size=i32([3, 9]), align_corners=True),
        area_down=raw.ResizeArea(images=rimg, size=i32([2, 3])),
        area_up=raw.ResizeArea(images=rimg, size=i32([8, 11])),
        area_align=raw.ResizeArea(images=rimg, size=i32([3, 4]), align_corners=True))

    # --- strings -------------------------------------------------------------------------
    s = strings(b"12", b" 12 ", b"-3", b"+4", b"1e3", b"0x1A", b"0x1.8p1", b"inf",
                b"-Infinity", b"\t7\n", b".5", b"1e400", b"2147483647", b"00012")
    si = strings(b"12", b" 12 ", b"-3", b"+4", b"\t7\n", b"2147483647", b"00012")
    put("string_to_number", s=s, si=si,
        f32=raw.StringToNumber(string_tensor=s, out_type=tf.float32),
        f64=raw.StringToNumber(string_tensor=s, out_type=tf.float64),
        i32=raw.StringToNumber(string_tensor=si, out_type=tf.int32),
        i64=raw.StringToNumber(string_tensor=si, out_type=tf.int64))
    fv = np.array([3.14159, -0.5, 1e10, 1e-7, -0.0, 2.5, inf, nan], f32)
    iv = np.array([3, -12, 0, 2147483647], i32)
    put("as_string", fv=fv, iv=iv,
        f_default=raw.AsString(input=fv),
        f_sci=raw.AsString(input=fv, scientific=True),
        f_short=raw.AsString(input=fv, shortest=True),
        f_prec_w=raw.AsString(input=fv, precision=2, width=9, fill="0"),
        f_left=raw.AsString(input=fv, width=11, fill="-"),
        i_default=raw.AsString(input=iv),
        i_w=raw.AsString(input=iv, width=6, fill="+"),
        b=raw.AsString(input=np.array([True, False])),
        c=raw.AsString(input=np.array([1 + 2j], np.complex64)))
    words = strings("héllo wörld".encode(), "日本語テキスト".encode(), b"abcdef")

    def substr(pos: Any, length: Any, unit: str) -> Any:
        return raw.Substr(input=words, pos=pos, len=length, unit=unit)

    put("substr", words=words,
        byte=substr(i32(1), i32(4), "BYTE"), byte_neg=substr(i32(-3), i32(2), "BYTE"),
        byte_rest=substr(i32(2), i32(-1), "BYTE"), utf8=substr(i32(1), i32(4), "UTF8_CHAR"),
        utf8_neg=substr(i32(-3), i32(2), "UTF8_CHAR"),
        vec=substr(i32([0, 3, 5]), i32([2, 1, 9]), "UTF8_CHAR"))
    rx = strings(b"hello world", b"john smith", b"abxd", b"", b"a1b22c333")

    def regex(pattern: str, rewrite: str, replace_global: bool) -> Any:
        return raw.StaticRegexReplace(input=rx, pattern=pattern, rewrite=rewrite,
                                      replace_global=replace_global)

    put("regex", rx=rx, vowels=regex("[aeiou]", r"<\0>", True),
        swap=regex(r"(\w+) (\w+)", r"\2, \1", True), empty=regex("x*", "-", True),
        first=regex(r"\d+", "#", False), bad_group=regex("(o)", r"\2", True))
    return out


# =============================================================================================
# writing / checking
# =============================================================================================


def same_file(path: Path, value: Any) -> bool:
    if not path.exists():
        return False
    if isinstance(value, Path):
        return path.read_bytes() == value.read_bytes()
    old = np.load(path, allow_pickle=False)
    return (old.dtype == value.dtype and old.shape == value.shape
            and np.array_equal(old, value, equal_nan=old.dtype.kind in "fc"))


def main(argv: list[str]) -> None:
    check = "--check" in argv
    groups: dict[str, dict[str, Any]] = {"array": array_files(), "nn": nn_files(),
                                         "extra": extra_files()}
    for case in sorted(p.name for p in (HERE / "math").iterdir() if p.is_dir()):
        groups[f"math/{case}"] = math_case(case)
    exact, changed = 0, []
    for folder, files in groups.items():
        for name, value in sorted(files.items()):
            path = HERE / folder / name
            if same_file(path, value):
                exact += 1
                continue
            changed.append(f"{folder}/{name}")
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(value, Path):
                    shutil.copyfile(value, path)
                else:
                    np.save(path, value, allow_pickle=False)
    print(f"{exact} files reproduced exactly, {len(changed)} "
          + ("differ" if check else "written") + (":" if changed else ""))
    for c in changed:
        print("  " + c)


if __name__ == "__main__":
    main(sys.argv[1:])
