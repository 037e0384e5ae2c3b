"""Robustness probe: ordinary TensorFlow/Keras programs (tf.functions, Keras models, TF1
graphs) saved as SavedModels, with TensorFlow's outputs for fixed inputs. Not a test: run it
by hand with TensorFlow's venv, then tests/probe/run.py with dfg's (see README.md).
"""

import os
import shutil
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe")
OUT.mkdir(parents=True, exist_ok=True)
only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
R = np.random.default_rng(0)
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def f32(*s):
    return R.standard_normal(s).astype(np.float32)


def spec(shape, dt=tf.float32):
    return tf.TensorSpec(shape, dt)


def write_io(name, ins, outs, sig="serving_default", fresh=True):
    """NAME_io/SIG/in_*.npy and out_*.npy: the feeds and TensorFlow's outputs (``fresh``:
    NAME_io emptied first)."""
    io = OUT / f"{name}_io" / sig
    if fresh and io.parent.exists():
        shutil.rmtree(io.parent)
    io.mkdir(parents=True)
    for k, v in ins.items():
        np.save(io / f"in_{k}.npy", v)
    for k, v in outs.items():
        np.save(io / f"out_{k}.npy", v.numpy() if hasattr(v, "numpy") else v)


def save_module(name, mod, sigs):
    """sigs: {signame: (concrete_fn_or_function, {key: array})}"""
    d = OUT / name
    if d.exists():
        shutil.rmtree(d)
    io = OUT / f"{name}_io"
    if io.exists():
        shutil.rmtree(io)
    signatures = {k: v[0] for k, v in sigs.items()}
    tf.saved_model.save(mod, str(d), signatures=signatures)
    loaded = tf.saved_model.load(str(d))
    for k, (_, ins) in sigs.items():
        out = loaded.signatures[k](**{n: tf.constant(v) for n, v in ins.items()})
        write_io(name, ins, out, k, fresh=False)


def simple(name, fn, specs, ins, mod=None):
    mod = mod or tf.Module()
    import inspect

    names = list(inspect.signature(fn).parameters)
    specs = [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(specs, names)]
    mod.f = tf.function(fn, input_signature=specs)
    conc = mod.f.get_concrete_function()
    save_module(name, mod, {"serving_default": (conc, dict(zip(names, ins)))})


def keras_model(name, model, specs, ins, key="y", **call_kw):
    """A Keras model saved with one signature returning {key: model(x, **call_kw)}."""
    mod = tf.Module()
    mod.m = model
    simple(name, lambda x: {key: model(x, **call_kw)}, specs, ins, mod=mod)


@case
def strings_basic():
    def fn(s):
        low = tf.strings.lower(s)
        parts = tf.strings.split(low, " ")
        n = parts.row_lengths()
        j = tf.strings.reduce_join(parts, axis=-1, separator="|")
        r = tf.strings.regex_replace(low, "[aeiou]", "_")
        l = tf.strings.length(s)
        sub = tf.strings.substr(s, 1, 3)
        h = tf.strings.to_hash_bucket_fast(s, 100)
        return {"joined": j, "n": n, "rep": r, "len": l, "sub": sub, "hash": h}

    simple(
        "strings_basic",
        fn,
        [spec([None], tf.string)],
        [np.array([b"Hello World foo", b"A quick Brown", b"x"])],
    )


@case
def strings_numbers():
    def fn(s):
        n = tf.strings.to_number(s, tf.float32)
        back = tf.strings.as_string(n * 2.0, precision=2)
        fm = tf.strings.format("v={} n={}", (n, tf.size(n)))
        return {"n": n, "back": back, "fm": fm}

    simple("strings_numbers", fn, [spec([None], tf.string)], [np.array([b"1.5", b"-2", b"3e2"])])


@case
def static_hash_table():
    class M(tf.Module):
        def __init__(self):
            self.t = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    tf.constant(["a", "b", "c"]), tf.constant([1, 2, 3], tf.int64)
                ),
                -1,
            )

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, s):
            return {"ids": self.t.lookup(s), "size": self.t.size()}

    m = M()
    save_module(
        "static_hash_table",
        m,
        {"serving_default": (m.f.get_concrete_function(), {"s": np.array([b"a", b"c", b"zz"])})},
    )


@case
def keras_string_lookup():
    inp = keras.Input(shape=(None,), dtype="string")
    lk = keras.layers.StringLookup(vocabulary=["cat", "dog", "bird"], num_oov_indices=1)
    out = lk(inp)
    m = keras.Model(inp, out)

    keras_model(
        "keras_string_lookup",
        m,
        [spec([None, None], tf.string)],
        [np.array([[b"cat", b"fish"], [b"bird", b"dog"]])],
        key="ids",
    )


@case
def keras_text_vectorization():
    tv = keras.layers.TextVectorization(max_tokens=20, output_sequence_length=6)
    tv.adapt(tf.constant(["the cat sat on the mat", "the dog ate my homework", "a bird flew"]))

    class M(tf.Module):
        def __init__(self):
            self.tv = tv

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, x):
            return {"tok": self.tv(x)}

    mm = M()
    save_module(
        "keras_text_vectorization",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {"x": np.array([b"The cat ate, the DOG!", b"unknown words here"])},
            )
        },
    )


@case
def keras_int_lookup_hashing():
    il = keras.layers.IntegerLookup(vocabulary=[10, 20, 30])
    hs = keras.layers.Hashing(num_bins=7)
    ce = keras.layers.CategoryEncoding(num_tokens=5, output_mode="multi_hot")
    disc = keras.layers.Discretization(bin_boundaries=[0.0, 1.0, 2.0])

    class M(tf.Module):
        def __init__(self):
            self.l = [il, hs, ce, disc]

        @tf.function(input_signature=[spec([None, 3], tf.int64), spec([None, 3], tf.float32)])
        def f(self, i, x):
            return {"il": il(i), "hs": hs(i), "ce": ce(il(i)), "disc": disc(x)}

    mm = M()
    save_module(
        "keras_int_lookup_hashing",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {
                    "i": np.array([[10, 20, 99], [30, 30, 10]], np.int64),
                    "x": np.array([[-1, 0.5, 1.5], [2.5, 0, 1]], np.float32),
                },
            )
        },
    )


@case
def linalg():
    def fn(a, b):
        spd = tf.matmul(a, a, transpose_b=True) + 4.0 * tf.eye(4)
        ch = tf.linalg.cholesky(spd)
        inv = tf.linalg.inv(spd)
        det = tf.linalg.det(spd)
        sol = tf.linalg.solve(spd, b)
        ld = tf.linalg.logdet(spd)
        tri = tf.linalg.triangular_solve(ch, b, lower=True)
        band = tf.linalg.band_part(a, 1, 0)
        q, r = tf.linalg.qr(a)
        e, v = tf.linalg.eigh(spd)
        s = tf.linalg.svd(a, compute_uv=False)
        tr = tf.linalg.trace(a)
        dg = tf.linalg.diag_part(a)
        return {
            "ch": ch,
            "inv": inv,
            "det": det,
            "sol": sol,
            "ld": ld,
            "tri": tri,
            "band": band,
            "qr": tf.matmul(q, r),
            "e": e,
            "s": s,
            "tr": tr,
            "dg": dg,
            "ls": tf.linalg.lstsq(a, b),
        }

    simple("linalg", fn, [spec([2, 4, 4]), spec([2, 4, 2])], [f32(2, 4, 4), f32(2, 4, 2)])


@case
def signal_fft():
    def fn(x):
        c = tf.signal.rfft(x)
        back = tf.signal.irfft(c)
        st = tf.signal.stft(x, frame_length=16, frame_step=8)
        mag = tf.abs(st)
        fr = tf.signal.frame(x, 8, 4)
        win = tf.signal.hann_window(16)
        f2 = tf.signal.fft(tf.complex(x, x))
        dct = tf.signal.dct(x)
        return {
            "re": tf.math.real(c),
            "im": tf.math.imag(c),
            "back": back,
            "mag": mag,
            "fr": fr,
            "win": win,
            "f2r": tf.math.real(f2),
            "dct": dct,
        }

    simple("signal_fft", fn, [spec([2, 64])], [f32(2, 64)])


@case
def math_misc():
    def fn(x, seg):
        return {
            "segsum": tf.math.segment_sum(x, seg),
            "useg": tf.math.unsorted_segment_max(x, seg, 4),
            "cs": tf.math.cumsum(x, axis=0, exclusive=True, reverse=True),
            "cp": tf.math.cumprod(x, axis=1),
            "lse": tf.math.reduce_logsumexp(x, axis=1),
            "lg": tf.math.lgamma(tf.abs(x) + 0.5),
            "dg": tf.math.digamma(tf.abs(x) + 0.5),
            "erfinv": tf.math.erfinv(tf.clip_by_value(x, -0.9, 0.9)),
            "xlogy": tf.math.xlogy(x, tf.abs(x) + 1.0),
            "topv": tf.math.top_k(x, 2).values,
            "topi": tf.math.top_k(x, 2).indices,
            "sort": tf.sort(x, direction="DESCENDING"),
            "argsort": tf.argsort(x),
            "bincount": tf.math.bincount(seg, minlength=5),
            "cummax": tf.math.cumulative_logsumexp(x, axis=1),
            "sq": tf.math.squared_difference(x, 1.0),
            "sign": tf.sign(x),
            "floormod": tf.math.floormod(x, 0.7),
            "atan2": tf.math.atan2(x, x + 2.0),
            "igamma": tf.math.igamma(tf.abs(x) + 1.0, tf.abs(x) + 0.5),
            "bessel": tf.math.bessel_i0e(x),
            "round": tf.round(x * 3),
            "rint": tf.math.rint(x * 3),
            "l2n": tf.math.l2_normalize(x, axis=1),
            "nz": tf.math.count_nonzero(x > 0, axis=1),
        }

    simple(
        "math_misc",
        fn,
        [spec([5, 3]), spec([5], tf.int32)],
        [f32(5, 3), np.array([0, 0, 1, 2, 2], np.int32)],
    )


@case
def unique_ops():
    def fn(x):
        u, idx = tf.unique(x)
        u2, i2, c2 = tf.unique_with_counts(x)
        w = tf.where(x > 2)
        bm = tf.boolean_mask(x, x > 2)
        return {"u": u, "idx": idx, "c2": c2, "w": w, "bm": bm, "u2": u2, "i2": i2}

    simple("unique_ops", fn, [spec([None], tf.int32)], [np.array([3, 1, 3, 5, 1, 7], np.int32)])


@case
def random_stateless():
    def fn(seed):
        a = tf.random.stateless_normal([3, 4], seed=seed)
        b = tf.random.stateless_uniform([5], seed=seed, minval=0, maxval=10, dtype=tf.int32)
        c = tf.random.stateless_truncated_normal([2, 2], seed=seed)
        d = tf.random.stateless_categorical(tf.math.log([[0.2, 0.8]]), 6, seed=seed)
        e = tf.random.stateless_binomial([4], seed=seed, counts=10.0, probs=0.3)
        return {"a": a, "b": b, "c": c, "d": d, "e": e}

    simple("random_stateless", fn, [spec([2], tf.int32)], [np.array([7, 11], np.int32)])


@case
def ragged_ops():
    def fn(vals, lens):
        rt = tf.RaggedTensor.from_row_lengths(vals, lens)
        s = tf.reduce_sum(rt, axis=1)
        m = tf.reduce_max(rt, axis=1)
        dense = rt.to_tensor(default_value=-1.0)
        r2 = tf.ragged.range(lens)
        g = tf.gather(rt, [2, 0])
        return {
            "s": s,
            "m": m,
            "dense": dense,
            "r2": r2.flat_values,
            "r2s": r2.row_splits,
            "g": g.to_tensor(),
        }

    simple(
        "ragged_ops",
        fn,
        [spec([None]), spec([None], tf.int64)],
        [f32(6), np.array([2, 1, 3], np.int64)],
    )


@case
def image_ops():
    def fn(img, boxes):
        g = tf.image.rgb_to_grayscale(img)
        hsv = tf.image.rgb_to_hsv(tf.nn.sigmoid(img))
        back = tf.image.hsv_to_rgb(hsv)
        con = tf.image.adjust_contrast(img, 1.5)
        sat = tf.image.adjust_saturation(tf.nn.sigmoid(img), 0.5)
        hue = tf.image.adjust_hue(tf.nn.sigmoid(img), 0.1)
        fl = tf.image.flip_left_right(img)
        rot = tf.image.rot90(img)
        cr = tf.image.crop_and_resize(img, boxes, [0, 1], [4, 4])
        pt = tf.image.extract_patches(img, [1, 3, 3, 1], [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        std = tf.image.per_image_standardization(img)
        sob = tf.image.sobel_edges(img)
        tv = tf.image.total_variation(img)
        pad = tf.image.pad_to_bounding_box(img, 1, 1, 10, 10)
        cc = tf.image.central_crop(img, 0.5)
        rs = tf.image.resize(img, [5, 5], method="bilinear")
        rsw = tf.image.resize_with_pad(img, 6, 10)
        ssim = tf.image.ssim(tf.nn.sigmoid(img), tf.nn.sigmoid(img * 0.9), 1.0, filter_size=3)
        return {
            k: v
            for k, v in dict(
                g=g,
                hsv=hsv,
                back=back,
                con=con,
                sat=sat,
                hue=hue,
                fl=fl,
                rot=rot,
                cr=cr,
                pt=pt,
                std=std,
                sob=sob,
                tv=tv,
                pad=pad,
                cc=cc,
                rs=rs,
                rsw=rsw,
                ssim=ssim,
            ).items()
        }

    simple(
        "image_ops",
        fn,
        [spec([2, 8, 8, 3]), spec([2, 4])],
        [f32(2, 8, 8, 3), np.array([[0.1, 0.1, 0.8, 0.9], [0.0, 0.2, 0.5, 1.0]], np.float32)],
    )


@case
def nms():
    def fn(boxes, scores):
        sel = tf.image.non_max_suppression(boxes, scores, 3, 0.5)
        sel2, sc2 = tf.image.non_max_suppression_with_scores(
            boxes, scores, 3, 0.5, soft_nms_sigma=0.5
        )
        p = tf.image.non_max_suppression_padded(boxes, scores, 4, 0.5, pad_to_max_output_size=True)
        return {"sel": sel, "sel2": sel2, "sc2": sc2, "p0": p[0], "p1": p[1]}

    b = R.uniform(0, 1, (8, 4)).astype(np.float32)
    b[:, 2:] = b[:, :2] + 0.3
    simple("nms", fn, [spec([None, 4]), spec([None])], [b, R.uniform(0, 1, 8).astype(np.float32)])


@case
def control_autograph():
    def fn(x, n):
        acc = tf.zeros_like(x)
        for i in tf.range(n):
            if tf.reduce_sum(acc) > 10.0:
                break
            acc += x * tf.cast(i, tf.float32)
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        i = tf.constant(0)
        while i < n:
            ta = ta.write(i, tf.reduce_mean(x) * tf.cast(i, tf.float32))
            i += 1
        sw = tf.switch_case(n % 3, [lambda: x + 1.0, lambda: x * 2.0, lambda: -x])
        return {"acc": acc, "ta": ta.stack(), "sw": sw}

    simple(
        "control_autograph",
        fn,
        [spec([3]), spec([], tf.int32)],
        [np.array([1.0, 2.0, 0.5], np.float32), np.array(7, np.int32)],
    )


@case
def vectorized_map():
    def fn(x):
        vm = tf.vectorized_map(lambda r: tf.reduce_sum(r * r) + tf.reduce_max(r), x)
        mp = tf.map_fn(
            lambda r: (r[0] * 2.0, tf.cast(r[1], tf.int32)),
            x,
            fn_output_signature=(tf.float32, tf.int32),
        )
        fl = tf.foldl(lambda a, r: a + r, x)
        sc = tf.scan(lambda a, r: a * 0.5 + r, x)
        return {"vm": vm, "mp0": mp[0], "mp1": mp[1], "fl": fl, "sc": sc}

    simple("vectorized_map", fn, [spec([4, 3])], [f32(4, 3)])


@case
def jit_compiled():
    def fn(x, w):
        return {"y": tf.nn.gelu(tf.matmul(x, w)) + 1.0}

    mod = tf.Module()
    mod.f = tf.function(fn, input_signature=[spec([None, 8]), spec([8, 4])], jit_compile=True)
    save_module(
        "jit_compiled",
        mod,
        {"serving_default": (mod.f.get_concrete_function(), {"x": f32(3, 8), "w": f32(8, 4)})},
    )


@case
def keras_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        inp = keras.Input((8, 8, 3))
        h = keras.layers.Conv2D(4, 3, activation="relu")(inp)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.GlobalAveragePooling2D()(h)
        h = keras.layers.Dense(5)(h)
        out = keras.layers.Activation("softmax", dtype="float32")(h)
        m = keras.Model(inp, out)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    keras_model(
        "keras_mixed_precision",
        m,
        [spec([None, 8, 8, 3])],
        [f32(2, 8, 8, 3)],
        key="y",
        training=False,
    )


@case
def keras_export():
    inp = keras.Input((6,), name="feat")
    h = keras.layers.Dense(8, activation="swish")(inp)
    h = keras.layers.LayerNormalization()(h)
    h = keras.layers.Dropout(0.3)(h)
    out = keras.layers.Dense(3, activation="softmax", name="probs")(h)
    m = keras.Model(inp, out)
    d = OUT / "keras_export"
    if d.exists():
        shutil.rmtree(d)
    m.export(str(d))
    loaded = tf.saved_model.load(str(d))
    x = f32(4, 6)
    sig = loaded.signatures["serving_default"]
    key = list(sig.structured_input_signature[1].keys())[0]
    out = sig(**{key: tf.constant(x)})
    write_io("keras_export", {key: x}, out)


@case
def keras_rnn_variants():
    inp = keras.Input((5, 4))
    a = keras.layers.Conv1D(6, 2, padding="causal")(inp)
    b = keras.layers.GRU(6, return_sequences=True, go_backwards=True)(a)
    c = keras.layers.Bidirectional(keras.layers.SimpleRNN(3))(b)
    t = keras.layers.TimeDistributed(keras.layers.Dense(2))(b)
    m = keras.Model(inp, [c, t])

    class M(tf.Module):
        def __init__(self):
            self.m = m

        @tf.function(input_signature=[spec([None, 5, 4])])
        def f(self, x):
            c, t = self.m(x)
            return {"c": c, "t": t}

    mm = M()
    save_module(
        "keras_rnn_variants",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"x": f32(2, 5, 4)})},
    )


@case
def keras_convlstm():
    inp = keras.Input((3, 6, 6, 2))
    h = keras.layers.ConvLSTM2D(3, 3, padding="same", return_sequences=False)(inp)
    m = keras.Model(inp, h)

    keras_model("keras_convlstm", m, [spec([None, 3, 6, 6, 2])], [f32(2, 3, 6, 6, 2)], key="y")


@case
def keras_mha_mask():
    q = keras.Input((5, 8))
    mask = keras.Input((5, 5), dtype="bool")
    mha = keras.layers.MultiHeadAttention(2, 4)
    o = mha(q, q, attention_mask=mask, use_causal_mask=True)
    m = keras.Model([q, mask], o)

    class M(tf.Module):
        def __init__(self):
            self.m = m

        @tf.function(input_signature=[spec([None, 5, 8]), spec([None, 5, 5], tf.bool)])
        def f(self, q, mask):
            return {"y": self.m([q, mask])}

    mm = M()
    msk = R.uniform(size=(2, 5, 5)) > 0.3
    save_module(
        "keras_mha_mask",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"q": f32(2, 5, 8), "mask": msk})},
    )


@case
def train_step():
    class M(tf.Module):
        def __init__(self):
            self.w = tf.Variable(R.standard_normal((3, 1)).astype(np.float32))
            self.b = tf.Variable(np.zeros(1, np.float32))
            self.opt = keras.optimizers.Adam(0.1)
            self.opt.build([self.w, self.b])

        @tf.function(input_signature=[spec([None, 3]), spec([None, 1])])
        def step(self, x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, self.w) + self.b - y))
            g = tape.gradient(loss, [self.w, self.b])
            self.opt.apply_gradients(zip(g, [self.w, self.b]))
            return {"loss": loss, "w": tf.identity(self.w)}

    mm = M()
    save_module(
        "train_step",
        mm,
        {"serving_default": (mm.step.get_concrete_function(), {"x": f32(8, 3), "y": f32(8, 1)})},
    )


@case
def variables_counter():
    class M(tf.Module):
        def __init__(self):
            self.c = tf.Variable(0, dtype=tf.int64)
            self.acc = tf.Variable(tf.zeros([3]))

        @tf.function(input_signature=[spec([3])])
        def f(self, x):
            self.c.assign_add(1)
            self.acc.assign(self.acc * 0.5 + x)
            self.acc.scatter_nd_update([[1]], [42.0])
            return {"c": self.c.read_value(), "acc": self.acc.read_value()}

    mm = M()
    save_module(
        "variables_counter",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {"x": np.array([1.0, 2.0, 3.0], np.float32)},
            )
        },
    )


@case
def print_assert():
    def fn(x):
        tf.print("x is", x, output_stream=sys.stderr)
        tf.debugging.assert_positive(x + 100.0, message="must be positive")
        y = tf.debugging.check_numerics(x * 2.0, "bad")
        tf.debugging.assert_equal(tf.shape(x)[0], 3)
        return {"y": y}

    simple("print_assert", fn, [spec([3])], [np.array([1.0, -2.0, 3.0], np.float32)])


@case
def nn_misc():
    def fn(x, lab, img):
        return {
            "sce": tf.nn.softmax_cross_entropy_with_logits(tf.one_hot(lab, 4), x),
            "ssce": tf.nn.sparse_softmax_cross_entropy_with_logits(lab, x),
            "sig": tf.nn.sigmoid_cross_entropy_with_logits(tf.ones_like(x), x),
            "lrn": tf.nn.local_response_normalization(img),
            "mpa": tf.nn.max_pool_with_argmax(img, 2, 2, "SAME")[1],
            "mom": tf.nn.moments(img, [0, 1, 2])[1],
            "dil": tf.nn.conv2d(img, tf.ones([2, 2, 3, 2]), 1, "SAME", dilations=2),
            "ap3": tf.nn.avg_pool3d(tf.expand_dims(img, 1), [1, 1, 2, 2, 1], 1, "VALID"),
            "s2d": tf.nn.space_to_depth(img, 2),
            "d2s": tf.nn.depth_to_space(tf.nn.space_to_depth(img, 2), 2),
            "lsm": tf.nn.log_softmax(x),
            "elu": tf.nn.elu(x),
            "selu": tf.nn.selu(x),
            "c6": tf.nn.relu6(x * 5),
            "bn": tf.nn.batch_normalization(x, 0.1, 2.0, 0.3, 1.5, 1e-3),
            "ctcg": tf.nn.ctc_greedy_decoder(
                tf.transpose(tf.reshape(tf.concat([x, x], 0), [2, 4, 4]), [0, 1, 2]), [2, 2, 2, 2]
            )[0][0].values,
            "ins": tf.nn.in_top_k(lab, x, 2),
            "zf": tf.nn.zero_fraction(x),
        }

    simple(
        "nn_misc",
        fn,
        [spec([4, 4]), spec([4], tf.int32), spec([1, 6, 6, 3])],
        [f32(4, 4), np.array([0, 3, 1, 2], np.int32), f32(1, 6, 6, 3)],
    )


@case
def dtypes_misc():
    def fn(x, u):
        return {
            "bc": tf.bitcast(x, tf.int32),
            "and": tf.bitwise.bitwise_and(u, 0x0F),
            "sh": tf.bitwise.left_shift(tf.cast(u, tf.int32), 2),
            "inv": tf.bitwise.invert(u),
            "sat": tf.dtypes.saturate_cast(x * 300.0, tf.uint8),
            "h": tf.cast(tf.cast(x, tf.float16) * 3.0, tf.float32),
            "bf": tf.cast(tf.cast(x, tf.bfloat16) + 1.0, tf.float32),
            "c": tf.abs(tf.complex(x, 1.0 - x)),
            "ang": tf.math.angle(tf.complex(x, 1.0)),
            "fq": tf.quantization.fake_quant_with_min_max_args(x, -1.0, 1.0, num_bits=8),
            "i64": tf.cast(x * 1e6, tf.int64) // 7,
            "u16": tf.cast(u, tf.uint16) * 300,
            "f64": tf.cast(x, tf.float64) ** 3,
            "pop": tf.raw_ops.PopulationCount(x=u),
        }

    simple(
        "dtypes_misc",
        fn,
        [spec([4]), spec([4], tf.uint8)],
        [f32(4), np.array([1, 200, 17, 255], np.uint8)],
    )


@case
def einsum_tensordot():
    def fn(a, b):
        return {
            "e1": tf.einsum("bij,bjk->bik", a, b),
            "e2": tf.einsum("bii->b", a),
            "e3": tf.einsum("bij->j", a),
            "e4": tf.einsum("...ij,...kj->...ik", a, a),
            "td": tf.tensordot(a, b, [[2], [1]]),
            "mv": tf.linalg.matvec(a, b[:, :, 0]),
            "bmm": tf.matmul(a[:, None], b[None]),
            "kron": tf.linalg.LinearOperatorKronecker(
                [tf.linalg.LinearOperatorFullMatrix(a[0]), tf.linalg.LinearOperatorFullMatrix(a[1])]
            ).to_dense(),
        }

    simple("einsum_tensordot", fn, [spec([2, 3, 3]), spec([2, 3, 4])], [f32(2, 3, 3), f32(2, 3, 4)])


@case
def gather_scatter():
    def fn(x, idx):
        return {
            "g": tf.gather(x, idx, axis=1),
            "gb": tf.gather(x, tf.stack([idx, idx, idx]) % 3, batch_dims=1),
            "gnd": tf.gather_nd(x, [[0, 1], [2, 2]]),
            "snd": tf.scatter_nd([[1], [3]], [5.0, 6.0], [5]),
            "tsu": tf.tensor_scatter_nd_add(x, [[0, 0], [1, 1]], [10.0, 20.0]),
            "tsm": tf.tensor_scatter_nd_max(x, [[0, 0]], [100.0]),
            "oh": tf.one_hot(idx, 4, on_value=2.0, off_value=-1.0, axis=0),
            "rev": tf.reverse_sequence(x, [1, 2, 3], seq_axis=1, batch_axis=0),
            "roll": tf.roll(x, [1, -1], [0, 1]),
            "tile": tf.tile(x, [2, 1]),
            "mp": tf.pad(x, [[1, 1], [2, 0]], mode="REFLECT"),
            "sym": tf.pad(x, [[1, 1], [2, 0]], mode="SYMMETRIC"),
            "dp": tf.dynamic_partition(x, [0, 1, 0], 2)[0],
            "ds": tf.dynamic_stitch([[0, 2], [1]], [x[:2], x[2:]]),
            "bs": tf.searchsorted([[1.0, 2.0, 3.0]] * 3, x),
            "mdiag": tf.linalg.diag(x[0]),
            "sg": tf.strided_slice(x, [0, 3], [3, 0], [2, -1]),
            "ex": x[..., tf.newaxis, 1:],
            "mset": tf.linalg.set_diag(x[:, :3], [1.0, 2.0, 3.0]),
        }

    simple(
        "gather_scatter",
        fn,
        [spec([3, 4]), spec([3], tf.int32)],
        [f32(3, 4), np.array([3, 0, 2], np.int32)],
    )


v1 = tf.compat.v1


@case
def tf1_simple_save():
    d = OUT / "tf1_simple_save"
    if d.exists():
        shutil.rmtree(d)
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 3], name="x")
        n = v1.placeholder(tf.int32, [], name="n")
        w = v1.get_variable(
            "w", initializer=tf.constant(R.standard_normal((3, 2)).astype(np.float32))
        )
        b = v1.Variable(tf.zeros([2]), name="b")
        y = tf.matmul(x, w) + b
        i0 = tf.constant(0)

        def cond(i, acc):
            return i < n

        def body(i, acc):
            return i + 1, v1.cond(i % 2 > 0, lambda: acc * 1.1, lambda: acc + 1.0)

        _, loop = v1.while_loop(cond, body, [i0, y])
        tab = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a", "b"], [5, 6]), -1)
        s = v1.placeholder(tf.string, [None], name="s")
        ids = tab.lookup(s)
        with v1.Session(graph=g) as sess:
            sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
            v1.saved_model.simple_save(
                sess,
                str(d),
                inputs={"x": x, "n": n, "s": s},
                outputs={"y": y, "loop": loop, "ids": ids},
            )
            feeds = {
                "x": f32(4, 3),
                "n": np.array(5, np.int32),
                "s": np.array([b"a", b"z", b"b"], dtype=object),
            }
            outs = sess.run(
                {"y": y, "loop": loop, "ids": ids}, {x: feeds["x"], n: feeds["n"], s: feeds["s"]}
            )
    write_io("tf1_simple_save", feeds, outs)


@case
def tf1_builder_assets():
    d = OUT / "tf1_builder_assets"
    if d.exists():
        shutil.rmtree(d)
    vocab = OUT / "vocab_tmp.txt"
    vocab.write_text("red\ngreen\nblue\n")
    g = tf.Graph()
    with g.as_default():
        s = v1.placeholder(tf.string, [None], name="s")
        tab = tf.lookup.StaticVocabularyTable(
            tf.lookup.TextFileInitializer(
                str(vocab),
                tf.string,
                tf.lookup.TextFileIndex.WHOLE_LINE,
                tf.int64,
                tf.lookup.TextFileIndex.LINE_NUMBER,
            ),
            num_oov_buckets=2,
        )
        ids = tab.lookup(s)
        c = v1.get_variable("c", initializer=tf.constant(3.0))
        upd = v1.assign_add(c, 1.0)
        with tf.control_dependencies([upd]):
            out = tf.cast(ids, tf.float32) * c
        with v1.Session(graph=g) as sess:
            sess.run([v1.global_variables_initializer(), v1.tables_initializer()])
            b = v1.saved_model.Builder(str(d))
            sig = v1.saved_model.predict_signature_def({"s": s}, {"out": out, "ids": ids})
            b.add_meta_graph_and_variables(
                sess,
                ["serve"],
                signature_def_map={"serving_default": sig},
                main_op=v1.tables_initializer(),
                assets_collection=v1.get_collection(v1.GraphKeys.ASSET_FILEPATHS),
            )
            b.save()
    # TF's own outputs from the loaded SavedModel (fresh session)
    feeds = {"s": np.array([b"blue", b"pink", b"red"], dtype=object)}
    with tf.Graph().as_default() as g2, v1.Session(graph=g2) as sess:
        mg = v1.saved_model.loader.load(sess, ["serve"], str(d))
        sg = mg.signature_def["serving_default"]
        outs = sess.run(
            {k: v.name for k, v in sg.outputs.items()}, {sg.inputs["s"].name: feeds["s"]}
        )
    vocab.unlink()
    write_io("tf1_builder_assets", feeds, outs)


@case
def keras_lookup_vocab_file():
    vocab = OUT / "vocab2.txt"
    vocab.write_text("alpha\nbeta\ngamma\n")
    lk = keras.layers.StringLookup(vocabulary=str(vocab), output_mode="one_hot")

    class M(tf.Module):
        def __init__(self):
            self.lk = lk

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, x):
            return {"oh": self.lk(x)}

    mm = M()
    save_module(
        "keras_lookup_vocab_file",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"x": np.array([b"beta", b"zeta"])})},
    )
    vocab.unlink()


@case
def keras_multi_input_export():
    a = keras.Input((4,), name="num")
    b = keras.Input((2,), name="cat", dtype="int32")
    e = keras.layers.Embedding(10, 3)(b)
    e = keras.layers.Flatten()(e)
    n = keras.layers.Normalization()
    n.adapt(R.standard_normal((20, 4)).astype(np.float32) * 3 + 1)
    h = keras.layers.Concatenate()([n(a), e])
    h = keras.layers.Dense(5, activation="elu")(h)
    o1 = keras.layers.Dense(1, name="reg")(h)
    o2 = keras.layers.Dense(3, activation="softmax", name="cls")(h)
    m = keras.Model({"num": a, "cat": b}, {"reg": o1, "cls": o2})
    d = OUT / "keras_multi_input_export"
    if d.exists():
        shutil.rmtree(d)
    m.export(str(d))
    loaded = tf.saved_model.load(str(d))
    sig = loaded.signatures["serving_default"]
    ins = {"num": f32(3, 4), "cat": np.array([[1, 2], [3, 9], [0, 0]], np.int32)}
    keys = list(sig.structured_input_signature[1].keys())
    out = sig(**{k: tf.constant(ins[k]) for k in keys})
    write_io("keras_multi_input_export", {k: ins[k] for k in keys}, out)


@case
def keras_masked_text():
    inp = keras.Input((None,), dtype="int32")
    e = keras.layers.Embedding(20, 8, mask_zero=True)(inp)
    h = keras.layers.GRU(6, return_sequences=True)(e)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(2)(h)
    m = keras.Model(inp, o)

    keras_model(
        "keras_masked_text",
        m,
        [spec([None, None], tf.int32)],
        [np.array([[3, 5, 0, 0], [1, 2, 3, 4], [7, 0, 0, 0]], np.int32)],
        key="y",
    )


@case
def image_serving_fn():
    inp = keras.Input((16, 16, 3))
    h = keras.layers.Conv2D(4, 3, strides=2, padding="same", activation="relu6")(inp)
    h = keras.layers.DepthwiseConv2D(3, padding="same")(h)
    h = keras.layers.GlobalMaxPooling2D()(h)
    m = keras.Model(inp, keras.layers.Dense(3)(h))

    class M(tf.Module):
        def __init__(self):
            self.m = m

        @tf.function(input_signature=[spec([None, None, None, 3], tf.uint8)])
        def f(self, img):
            x = tf.image.convert_image_dtype(img, tf.float32)
            x = tf.image.resize(x, [16, 16], antialias=True)
            x = (x - 0.5) * 2.0
            logits = self.m(x)
            return {
                "probs": tf.nn.softmax(logits),
                "cls": tf.argmax(logits, -1),
                "top": tf.math.top_k(logits, 2).indices,
            }

    mm = M()
    save_module(
        "image_serving_fn",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {"img": R.integers(0, 255, (2, 24, 20, 3)).astype(np.uint8)},
            )
        },
    )


@case
def sparse_signature():
    class M(tf.Module):
        def __init__(self):
            self.emb = tf.Variable(R.standard_normal((10, 3)).astype(np.float32))

        @tf.function(input_signature=[tf.SparseTensorSpec([None, 4], tf.int64)])
        def f(self, sp):
            dense = tf.sparse.to_dense(sp)
            e = tf.nn.embedding_lookup_sparse(self.emb, sp, None, combiner="mean")
            return {"dense": dense, "e": e, "sum": tf.sparse.reduce_sum(sp, axis=1)}

    mm = M()
    conc = mm.f.get_concrete_function()
    d = OUT / "sparse_signature"
    if d.exists():
        shutil.rmtree(d)
    tf.saved_model.save(mm, str(d), signatures={"serving_default": conc})
    loaded = tf.saved_model.load(str(d))
    sig = loaded.signatures["serving_default"]
    list(sig.structured_input_signature[1].keys())
    ins = {}
    vals = {
        "indices": np.array([[0, 0], [0, 2], [2, 1]], np.int64),
        "values": np.array([3, 7, 1], np.int64),
        "dense_shape": np.array([3, 4], np.int64),
    }
    order = [vals["indices"], vals["values"], vals["dense_shape"]]
    for k, vv in zip(["sp", "sp_1", "sp_2"], order):
        ins[k] = vv
    out = sig(**{k: tf.constant(v) for k, v in ins.items()})
    write_io("sparse_signature", ins, out)


@case
def keras_bn_dropout_training():
    inp = keras.Input((5,))
    h = keras.layers.Dense(4)(inp)
    h = keras.layers.BatchNormalization(momentum=0.5)(h)
    m = keras.Model(inp, h)

    class M(tf.Module):
        def __init__(self):
            self.m = m

        @tf.function(input_signature=[spec([None, 5])])
        def f(self, x):
            y = self.m(x, training=True)  # updates moving stats
            return {"y": y, "mean": tf.identity(self.m.layers[2].moving_mean)}

    mm = M()
    save_module(
        "keras_bn_dropout_training",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"x": f32(6, 5)})},
    )


@case
def polymorphic_fn():
    class M(tf.Module):
        @tf.function
        def f(self, x, scale=2.0):
            return {"y": x * scale, "n": tf.shape(x)}

    mm = M()
    c1 = mm.f.get_concrete_function(tf.TensorSpec([None], tf.float32, name="x"))
    c2 = mm.f.get_concrete_function(tf.TensorSpec([None, 2], tf.float64, name="x"))
    save_module(
        "polymorphic_fn",
        mm,
        {"serving_default": (c1, {"x": f32(5)}), "wide": (c2, {"x": R.standard_normal((3, 2))})},
    )


@case
def nested_modules_vars():
    class Inner(tf.Module):
        def __init__(self):
            self.k = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
            self.flag = tf.Variable(True)
            self.name_v = tf.Variable("hello")

    class M(tf.Module):
        def __init__(self):
            self.inner = Inner()
            self.lst = [tf.Variable(1.5), tf.Variable(2.5)]

        @tf.function(input_signature=[spec([2, 3])])
        def f(self, x):
            y = tf.where(self.inner.flag, x * self.inner.k, x)
            return {
                "y": y + self.lst[0] * self.lst[1],
                "s": tf.strings.join([self.inner.name_v, "!"]),
            }

    mm = M()
    save_module(
        "nested_modules_vars",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"x": f32(2, 3)})},
    )


@case
def while_tensorarray_dynamic():
    def fn(x, n):
        ta = tf.TensorArray(tf.float32, size=n, element_shape=[None], infer_shape=False)

        def body(i, ta):
            row = tf.range(tf.cast(i + 1, tf.float32)) * x[i % tf.shape(x)[0]]
            return i + 1, ta.write(i, tf.reduce_sum(row, keepdims=True))

        _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta])
        conc = ta.concat()
        return {"conc": conc, "size": ta.size()}

    simple(
        "while_tensorarray_dynamic",
        fn,
        [spec([None]), spec([], tf.int32)],
        [f32(3), np.array(4, np.int32)],
    )


@case
def gradients_in_fn():
    def fn(x):
        with tf.GradientTape() as t2:
            t2.watch(x)
            with tf.GradientTape() as t1:
                t1.watch(x)
                y = tf.reduce_sum(tf.sin(x) * tf.exp(x) + tf.nn.softplus(x) ** 2)
            g = t1.gradient(y, x)
        h = t2.gradient(g, x)
        return {"g": g, "h": h}

    simple("gradients_in_fn", fn, [spec([4])], [f32(4)])


@case
def cf_nested_structures():
    def fn(x, n):
        def body(i, state):
            a, (b, c) = state
            a = tf.cond(i % 2 == 0, lambda: a + b, lambda: a * 0.5)

            def inner(j, acc):
                return j + 1, acc + tf.cast(j, tf.float32) * c

            _, c2 = tf.while_loop(lambda j, acc: j < i, inner, [0, c])
            return i + 1, (a, (b * 1.01, c2 * 0.1))

        _, (a, (b, c)) = tf.while_loop(
            lambda i, s: i < n, body, [0, (x, (x + 1.0, x * 0.0 + 0.3))], maximum_iterations=7
        )
        return {"a": a, "b": b, "c": c}

    simple(
        "cf_nested_structures", fn, [spec([3]), spec([], tf.int32)], [f32(3), np.array(9, np.int32)]
    )


@case
def cf_shape_changing_loop():
    def fn(x):
        def body(i, acc):
            return i + 1, tf.concat([acc, acc[-1:] * 2.0], 0)

        _, acc = tf.while_loop(
            lambda i, a: i < 4,
            body,
            [0, x],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])],
        )
        r = tf.cond(tf.shape(acc)[0] > 5, lambda: acc[:5], lambda: tf.pad(acc, [[0, 2], [0, 0]]))
        return {"acc": acc, "r": r}

    simple("cf_shape_changing_loop", fn, [spec([None, 2])], [f32(2, 2)])


@case
def cf_stateful_cases():
    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(1.0)
            self.hist = tf.Variable(tf.zeros([5]))

        @tf.function(input_signature=[spec([], tf.int32), spec([5])])
        def f(self, k, x):
            for i in tf.range(5):
                if x[i] > 0:
                    self.v.assign_add(x[i])
                else:
                    self.v.assign(self.v * 0.5)
                self.hist.scatter_nd_update([[i]], [self.v])
            r = tf.switch_case(
                k, [lambda: self.v.assign_add(100.0), lambda: self.v.assign_sub(1.0)]
            )
            return {"v": r, "hist": self.hist.read_value()}

    m = M()
    save_module(
        "cf_stateful_cases",
        m,
        {
            "serving_default": (
                m.f.get_concrete_function(),
                {"k": np.array(1, np.int32), "x": np.array([1, -2, 3, -4, 0.5], np.float32)},
            )
        },
    )


@case
def fn_calls_fns():
    @tf.function
    def helper(a, b):
        return tf.nn.relu(a) * b, tf.reduce_sum(a)

    @tf.function(experimental_implements="my.op")
    def impl(a):
        return a * 3.0

    def fn(x):
        p, s = helper(x, 2.0)
        q, s2 = helper(tf.cast(x, tf.float64), tf.constant(3.0, tf.float64))
        return {"p": p, "s": s, "q": q, "s2": s2, "i": impl(x)}

    simple("fn_calls_fns", fn, [spec([4])], [f32(4)])


@case
def tensorlist_ops():
    def fn(x):
        ta = tf.TensorArray(
            tf.float32, size=0, dynamic_size=True, clear_after_read=False, element_shape=[2]
        )
        for i in tf.range(tf.shape(x)[0]):
            ta = ta.write(i, x[i] * tf.cast(i, tf.float32))
        g = ta.gather([0, 2])
        sp = tf.TensorArray(tf.float32, size=2).split(tf.reshape(x, [-1]), [3, tf.size(x) - 3])
        return {"stack": ta.stack(), "g": g, "sp0": sp.read(0), "sp1": sp.read(1), "n": ta.size()}

    simple("tensorlist_ops", fn, [spec([None, 2])], [f32(4, 2)])


@case
def py_function():
    def fn(x):
        y = tf.py_function(lambda a: a * 2, [x], tf.float32)
        return {"y": y}

    simple("py_function", fn, [spec([2])], [f32(2)])


@case
def dataset_in_fn():
    def fn(n):
        ds = tf.data.Dataset.range(n).map(lambda v: v * 2).filter(lambda v: v % 3 != 0).batch(2)
        total = ds.reduce(tf.constant(0, tf.int64), lambda acc, b: acc + tf.reduce_sum(b))
        return {"total": total}

    simple("dataset_in_fn", fn, [spec([], tf.int64)], [np.array(10, np.int64)])


@case
def keras_custom_layer_loop():
    class Attn(keras.layers.Layer):
        def build(self, s):
            self.w = self.add_weight(shape=(s[-1], s[-1]), initializer="glorot_uniform")

        def call(self, x):
            s = tf.einsum("bij,jk,blk->bil", x, self.w, x)
            m = tf.linalg.band_part(tf.ones_like(s), -1, 0)
            s = tf.where(m > 0, s, -1e9)
            return tf.matmul(tf.nn.softmax(s, -1), x)

    inp = keras.Input((6, 4))
    out = Attn()(inp)
    out = keras.layers.LayerNormalization()(out + inp)
    m = keras.Model(inp, out)

    keras_model("keras_custom_layer_loop", m, [spec([None, 6, 4])], [f32(2, 6, 4)], key="y")


@case
def keras_bf16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inp = keras.Input((8, 8, 3))
        h = keras.layers.Conv2D(4, 3, activation="relu")(inp)
        h = keras.layers.BatchNormalization()(h)
        h = keras.layers.GlobalAveragePooling2D()(h)
        h = keras.layers.Dense(6, activation="gelu")(h)
        h = keras.layers.LayerNormalization()(h)
        out = keras.layers.Dense(3, dtype="float32")(h)
        m = keras.Model(inp, out)
    finally:
        keras.mixed_precision.set_global_policy("float32")

    keras_model(
        "keras_bf16", m, [spec([None, 8, 8, 3])], [f32(2, 8, 8, 3)], key="y", training=False
    )


@case
def bf16_ops():
    def fn(x):
        b = tf.cast(x, tf.bfloat16)
        y = tf.nn.softmax(b * b + tf.constant(1.5, tf.bfloat16))
        z = tf.reduce_sum(b, axis=0)
        w = tf.matmul(b, tf.transpose(b))
        return {
            "y": tf.cast(y, tf.float32),
            "z": tf.cast(z, tf.float32),
            "w": tf.cast(w, tf.float32),
            "raw": y,
        }

    simple("bf16_ops", fn, [spec([3, 4])], [f32(3, 4)])


@case
def serve_tf_example():
    feats = {
        "age": tf.io.FixedLenFeature([1], tf.float32, default_value=[30.0]),
        "city": tf.io.FixedLenFeature([], tf.string, default_value=""),
        "tags": tf.io.VarLenFeature(tf.string),
        "hist": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
    }

    class M(tf.Module):
        def __init__(self):
            self.w = tf.Variable([[0.5]])

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, examples):
            p = tf.io.parse_example(examples, feats)
            score = tf.matmul(p["age"], self.w)
            ntags = tf.sparse.reduce_sum(
                tf.sparse.map_values(
                    tf.ones_like,
                    tf.cast(
                        tf.sparse.to_indicator(
                            tf.sparse.SparseTensor(
                                p["tags"].indices,
                                tf.strings.to_hash_bucket_fast(p["tags"].values, 5),
                                p["tags"].dense_shape,
                            ),
                            5,
                        ),
                        tf.float32,
                    )
                    if False
                    else tf.sparse.SparseTensor(
                        p["tags"].indices,
                        tf.ones_like(p["tags"].values, tf.float32),
                        p["tags"].dense_shape,
                    ),
                ),
                axis=1,
            )
            return {"score": score, "city": p["city"], "ntags": ntags, "hist": p["hist"]}

    def ex(age, city, tags, hist):
        f = {}
        if age is not None:
            f["age"] = tf.train.Feature(float_list=tf.train.FloatList(value=[age]))
        f["city"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[city]))
        f["tags"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=tags))
        f["hist"] = tf.train.Feature(int64_list=tf.train.Int64List(value=hist))
        return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()

    data = np.array(
        [ex(41.0, b"Oslo", [b"a", b"b"], [1, 2, 3]), ex(None, b"Rome", [], [7])], dtype=object
    )
    m = M()
    save_module(
        "serve_tf_example",
        m,
        {"serving_default": (m.f.get_concrete_function(), {"examples": data})},
    )


@case
def serve_image_bytes():
    inp = keras.Input((8, 8, 3))
    h = keras.layers.Conv2D(2, 3, activation="relu")(inp)
    m = keras.Model(inp, keras.layers.Dense(2)(keras.layers.Flatten()(h)))

    class M(tf.Module):
        def __init__(self):
            self.m = m

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, images):
            def dec(b):
                img = tf.io.decode_image(b, channels=3, expand_animations=False)
                img = tf.image.resize(tf.cast(img, tf.float32) / 255.0, [8, 8])
                return img

            x = tf.map_fn(dec, images, fn_output_signature=tf.TensorSpec([8, 8, 3], tf.float32))
            return {"logits": self.m(x)}

    imgs = [
        tf.io.encode_png(R.integers(0, 255, (10, 12, 3)).astype(np.uint8)).numpy(),
        tf.io.encode_jpeg(R.integers(0, 255, (16, 9, 3)).astype(np.uint8)).numpy(),
    ]
    mm = M()
    save_module(
        "serve_image_bytes",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {"images": np.array(imgs, dtype=object)},
            )
        },
    )


@case
def audio_features():
    def fn(wave):
        st = tf.signal.stft(wave, 64, 32, fft_length=64)
        mag = tf.abs(st)
        mel = tf.signal.linear_to_mel_weight_matrix(16, 33, 8000, 20.0, 4000.0)
        m = tf.tensordot(mag, mel, 1)
        logm = tf.math.log(m + 1e-6)
        mf = tf.signal.mfccs_from_log_mel_spectrograms(logm)
        return {"mfcc": mf[..., :8], "mel": m}

    simple("audio_features", fn, [spec([None, 512])], [f32(2, 512)])


@case
def keras_augment_training():
    class M(tf.Module):
        def __init__(self):
            self.flip = keras.layers.RandomFlip("horizontal", seed=3)
            self.rot = keras.layers.RandomRotation(0.1, seed=4)

        @tf.function(input_signature=[spec([None, 8, 8, 1])])
        def f(self, x):
            return {"flip": self.flip(x, training=True), "rot": self.rot(x, training=True)}

    mm = M()
    save_module(
        "keras_augment_training",
        mm,
        {"serving_default": (mm.f.get_concrete_function(), {"x": f32(2, 8, 8, 1)})},
    )


@case
def text_pipeline():
    tv = keras.layers.TextVectorization(max_tokens=30, ngrams=2, output_mode="tf_idf")
    tv.adapt(["the quick brown fox", "the lazy dog", "quick quick fox jumps"])

    class M(tf.Module):
        def __init__(self):
            self.tv = tv

        @tf.function(input_signature=[spec([None], tf.string)])
        def f(self, s):
            chars = tf.strings.unicode_split(s, "UTF-8")
            return {"tfidf": self.tv(s), "nchars": chars.row_lengths(), "up": tf.strings.upper(s)}

    mm = M()
    save_module(
        "text_pipeline",
        mm,
        {
            "serving_default": (
                mm.f.get_concrete_function(),
                {"s": np.array([b"The quick fox", "caf\u00e9 dog".encode()], dtype=object)},
            )
        },
    )


import tensorflow.experimental.numpy as tnp  # noqa: E402


@case
def misc_ops():
    def fn(boxes, scores, x, seg):
        nms = tf.image.combined_non_max_suppression(boxes, scores, 3, 5, 0.5, 0.1)
        return {
            "nb": nms.nmsed_boxes,
            "ns": nms.nmsed_scores,
            "nc": nms.nmsed_classes,
            "nv": nms.valid_detections,
            "us": tf.math.unsorted_segment_sum(x, seg, tf.reduce_max(seg) + 1),
            "bc": tf.math.bincount(seg, weights=x[:, 0]),
            "hist": tf.histogram_fixed_width(x, [-2.0, 2.0], nbins=5),
            "ss": tf.searchsorted(tf.sort(x[:, 0]), [0.0, 1.0]),
            "tk": tf.math.top_k(x[:, 0], 3, sorted=True).indices,
            "expm": tf.linalg.expm(x[:3, :3] * 0.1),
            "adj": tf.linalg.adjoint(tf.complex(x[:2, :2], x[:2, :2] * 2.0)),
            "tnp": tnp.cumsum(tnp.asarray(x) ** 2, axis=0)
            + tnp.tril(tnp.ones((5, 3), dtype=tnp.float32)),
            "ein": tf.einsum("...ij,...jk->...ik", x[None, :3, :3], x[:3, :3]),
        }

    b = R.uniform(0, 1, (2, 6, 1, 4)).astype(np.float32)
    b[..., 2:] = b[..., :2] + 0.3
    simple(
        "misc_ops",
        fn,
        [spec([2, 6, 1, 4]), spec([2, 6, 2]), spec([5, 3]), spec([5], tf.int32)],
        [
            b,
            R.uniform(0, 1, (2, 6, 2)).astype(np.float32),
            f32(5, 3),
            np.array([0, 2, 2, 1, 0], np.int32),
        ],
    )


@case
def conv_variants():
    def fn(x, x1):
        w = tf.constant(R.standard_normal((3, 3, 2, 4)).astype(np.float32))
        wt = tf.constant(R.standard_normal((3, 3, 5, 2)).astype(np.float32))
        dw = tf.constant(R.standard_normal((3, 3, 2, 2)).astype(np.float32))
        w1 = tf.constant(R.standard_normal((3, 2, 3)).astype(np.float32))
        return {
            "tr": tf.nn.conv2d_transpose(x, wt, [2, 16, 16, 5], 2, "SAME"),
            "atr": tf.nn.atrous_conv2d(x, w, 2, "SAME"),
            "c1": tf.nn.conv1d(x1, w1, 2, "VALID"),
            "dw": tf.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], "SAME", dilations=[2, 2]),
            "pool": tf.nn.pool(x, [3, 3], "AVG", strides=[2, 2], padding="SAME"),
            "sep": tf.nn.separable_conv2d(x, dw, tf.ones([1, 1, 4, 3]), [1, 1, 1, 1], "VALID"),
            "c3t": tf.nn.conv3d_transpose(
                x[:, None], tf.ones([2, 2, 2, 3, 2]), [2, 2, 16, 16, 3], [1, 2, 2, 2, 1], "SAME"
            ),
        }

    simple(
        "conv_variants", fn, [spec([2, 8, 8, 2]), spec([2, 9, 2])], [f32(2, 8, 8, 2), f32(2, 9, 2)]
    )


@case
def string_more():
    def fn(s):
        return {
            "sp": tf.strings.split(s, maxsplit=1).to_tensor(),
            "m": tf.strings.regex_full_match(s, r"[a-z ]+"),
            "bs": tf.strings.bytes_split(s).row_lengths(),
            "tr": tf.strings.unicode_transcode(s, "UTF-8", "UTF-16-BE"),
            "ss": tf.strings.strip(s),
            "cnt": tf.strings.length(s, unit="UTF8_CHAR"),
            "j": tf.strings.join([s, s], separator="+"),
            "num": tf.strings.to_number(tf.strings.as_string(tf.strings.length(s)), tf.int64),
        }

    simple(
        "string_more",
        fn,
        [spec([None], tf.string)],
        [np.array([b"hello world x", " caf\u00e9 ".encode(), b"A-B"], dtype=object)],
    )


@case
def quantize_graph():
    def fn(x):
        q = tf.quantization.quantize(x, -1.0, 1.0, tf.quint8)
        d = tf.quantization.dequantize(q.output, q.output_min, q.output_max)
        qd = tf.quantization.quantize_and_dequantize_v2(x, -1.0, 1.0, num_bits=4, range_given=True)
        fq = tf.quantization.fake_quant_with_min_max_vars_per_channel(
            tf.reshape(x, [-1, 4]), [-1.0] * 4, [1.0] * 4
        )
        return {"d": d, "qd": qd, "fq": fq, "raw": tf.bitcast(q.output, tf.uint8)}

    simple("quantize_graph", fn, [spec([8])], [np.linspace(-1.2, 1.2, 8).astype(np.float32)])


for n, f in CASES.items():
    if only and n not in only:
        continue
    try:
        f()
        print("ok", n, flush=True)
    except Exception as e:
        print("TFFAIL", n, type(e).__name__, str(e)[:300], flush=True)
