"""Expected values for the random kernels, computed by TensorFlow 2.21 (never run in CI):

    /work/tfvenv/bin/python tests/data/kernels/raw_ops_random/generate.py

Every value is TF's own bits: stateless ops eagerly, seeded stateful ops and
``tf.random.Generator`` ops in TF1 graphs whose nodes run several times in one Session (the
n-th run must give TF's n-th draw).

Multinomial and ParameterizedTruncatedNormal split large draws over TF's intra-op threads and
the values depend on how many there are: those cases go to ``sharded.npz`` instead, drawn
with TF pinned to 2 intra-op threads, and tests/kernels/test_random.py replays them with dfg
told the same.
"""

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "raw_ops"))
import rawgen  # noqa: E402
import tensorflow as tf  # noqa: E402
from rawgen import f32, f64, graph, i32, i64, op, raw, write  # noqa: E402

THREADS = 2
tf.config.threading.set_intra_op_parallelism_threads(THREADS)
rawgen.begin(HERE)
f16, u32, u64 = np.float16, np.uint32, np.uint64
TIGHT = 1e-12   # float64 draws: numpy's log/sin/cos may differ from glibc's in the last bit

KEY = np.array([0x9E3779B97F4A7C15], u64)
CTR = np.array([5, 0x0123456789ABCDEF], u64)
CARRY = np.array([2 ** 64 - 3, 7], u64)     # the counter's low word wraps within the draw


def v2(name, shape, dtype, key=KEY, counter=CTR, alg=1, note="", tol=None, **extra):
    inputs = dict(shape=np.array(shape, i32), key=key, counter=counter, alg=np.int32(alg))
    inputs.update(extra)
    op(name, inputs, {} if dtype is None else dict(dtype=dtype), note=note, tol=tol)


def v1(name, shape, seed, dtype, note="", tol=None, **extra):
    inputs = dict(shape=np.array(shape, i32), seed=seed)
    inputs.update(extra)
    op(name, inputs, {} if dtype is None else dict(dtype=dtype), note=note, tol=tol)


# --- key/counter/alg ---------------------------------------------------------------------
for seed in (np.array([1, 2], i64), np.array([-1, 2 ** 40 + 5], i64), np.array([7, -3], i32),
             np.array([0, 0], i32)):
    op("StatelessRandomGetKeyCounter", dict(seed=seed), note=str(seed.dtype))
    op("StatelessRandomGetKeyCounterAlg", dict(seed=seed), note=str(seed.dtype))
op("StatelessRandomGetKeyCounter", dict(seed=np.array([1, 2, 3], i64)), note="bad seed")
op("StatelessRandomGetKeyCounterAlg", dict(seed=np.array([[1, 2]], i32)), note="bad seed")
op("StatelessRandomGetAlg", {})

# --- V2 uniform / normal / truncated normal ------------------------------------------------
for name in ("StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2"):
    v2(name, [7], tf.float32, note="float32, partial block")
    v2(name, [3, 5], tf.float32, counter=CARRY, note="counter carry")
    v2(name, [2, 9], tf.float16, note="half")
    v2(name, [7], tf.float64, note="double", tol=TIGHT)
    v2(name, [6], tf.float32, alg=3, note="auto-select is Philox")
    v2(name, [0, 4], tf.float32, alg=2, note="empty: alg not checked")
    v2(name, [4], tf.float32, alg=2, note="ThreeFry unsupported on CPU")
    v2(name, [4], tf.float32, key=np.array([1, 2], u64), note="bad key")
    op(name, dict(shape=np.array([5], i64), key=KEY, counter=CTR, alg=np.int32(1)),
       dict(dtype=tf.float32), note="int64 shape")
v2("StatelessRandomUniformV2", [4], tf.float32, alg=0, note="alg 0")
v2("StatelessRandomUniformV2", [2, -1], tf.float32, note="negative dim")
v2("StatelessRandomNormalV2", [600], tf.float32, note="many (log/sincos emulation)")
v2("StatelessTruncatedNormalV2", [600], tf.float32, counter=CARRY, note="many")
v2("StatelessTruncatedNormalV2", [201], tf.float64, note="many double", tol=TIGHT)
v2("StatelessRandomNormalV2", [64], tf.float64, counter=CARRY, note="many double", tol=TIGHT)

# --- V2 integers ---------------------------------------------------------------------------
ui = "StatelessRandomUniformIntV2"
v2(ui, [9], None, minval=np.int32(-5), maxval=np.int32(7), note="int32")
v2(ui, [2, 3], None, minval=np.int32(-2 ** 31), maxval=np.int32(2 ** 31 - 1),
   note="int32 nearly full range")
v2(ui, [5], None, minval=np.int64(-2 ** 62), maxval=np.int64(2 ** 62 + 12345),
   note="int64 wide")
v2(ui, [5], None, counter=CARRY, minval=np.int64(10), maxval=np.int64(13), note="int64")
v2(ui, [3], None, minval=np.int32(4), maxval=np.int32(4), note="minval == maxval")
v2(ui, [0], None, minval=np.int32(4), maxval=np.int32(4), note="empty: range unchecked")
v2(ui, [3], None, minval=np.array([1], i32), maxval=np.int32(4), note="minval not scalar")
fi = "StatelessRandomUniformFullIntV2"
for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
    v2(fi, [7], dt, note=dt.name)
v2(fi, [3, 3], tf.uint64, counter=CARRY, note="carry")

# --- V1 (seed pair) ------------------------------------------------------------------------
S64, S32 = np.array([12, 34], i64), np.array([-5, 99], i32)
for name in ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"):
    v1(name, [6], S64, tf.float32, note="float32")
    v1(name, [2, 5], S32, tf.float16, note="half, int32 seed")
    v1(name, [5], S64, tf.float64, note="double", tol=TIGHT)
    v1(name, [0], S64, tf.float32, note="empty")
    v1(name, [3], np.array([1, 2, 3], i64), tf.float32, note="bad seed")
v1("StatelessRandomUniformInt", [8], S64, None, minval=np.int32(-3), maxval=np.int32(3),
   note="int32")
v1("StatelessRandomUniformInt", [5], S32, None, minval=np.int64(-10 ** 15),
   maxval=np.int64(10 ** 17), note="int64")
v1("StatelessRandomUniformInt", [5], S32, None, minval=np.int64(3), maxval=np.int64(1),
   note="bad range")
for dt in (tf.int32, tf.int64, tf.uint32, tf.uint64):
    v1("StatelessRandomUniformFullInt", [5], S64, dt, note=dt.name)

# --- multinomial ---------------------------------------------------------------------------
with np.errstate(divide="ignore"):
    LOG = np.log(np.array([[0.1, 0.2, 0.3, 0.4, 1e-3], [1, 1, 1, 1, 1], [5, 0, 0, 0, 1]], f64))
LOG[1, 2] = -np.inf
sm = "StatelessMultinomial"
op(sm, dict(logits=LOG.astype(f32), num_samples=np.int32(9), seed=S64), note="float32")
op(sm, dict(logits=LOG.astype(f16), num_samples=np.int32(5), seed=S32),
   dict(output_dtype=tf.int32), note="half, int32 out")
op(sm, dict(logits=LOG, num_samples=np.int32(6), seed=S64), note="double")
op(sm, dict(logits=np.full((2, 3), -np.inf, f32), num_samples=np.int32(3), seed=S64),
   note="no finite logit: num_classes")
op(sm, dict(logits=LOG.astype(f32), num_samples=np.int32(0), seed=S64), note="no samples")
op(sm, dict(logits=LOG.astype(f32), num_samples=np.int32(-1), seed=S64), note="negative")
op(sm, dict(logits=np.zeros(3, f32), num_samples=np.int32(2), seed=S64), note="not a matrix")
op(sm, dict(logits=np.zeros((2, 0), f32), num_samples=np.int32(2), seed=S64),
   note="no classes")

# --- gamma -----------------------------------------------------------------------------------
ALPHA = np.array([0.25, 1.0, 2.5, 40.0], f32)
v1("StatelessRandomGammaV2", [3, 4], S64, None, alpha=ALPHA, note="float32")
v1("StatelessRandomGammaV2", [5, 2, 4], S32, None,
   alpha=np.array([[0.5, 1, 3, 7.5], [0.3, 2, 1, 12]], f16), note="half")
v1("StatelessRandomGammaV2", [6, 4], S64, None, alpha=ALPHA.astype(f64), note="double",
   tol=TIGHT)
v1("StatelessRandomGammaV2", [4, 3], S64, None, alpha=ALPHA, note="bad shape")
v1("StatelessRandomGammaV2", [0, 4], S64, None, alpha=ALPHA, note="empty")
v2("StatelessRandomGammaV3", [5, 4], None, alpha=ALPHA, note="float32")
v2("StatelessRandomGammaV3", [3, 4], None, counter=CARRY, alpha=ALPHA.astype(f64),
   note="double", tol=TIGHT)
v2("StatelessRandomGammaV3", [2], None, alg=2, alpha=np.float32(2), note="ThreeFry")

# --- Poisson ---------------------------------------------------------------------------------
LAM = np.array([0.5, 3.0, 9.99, 10.0, 37.5, 1000.0], f32)
sp = "StatelessRandomPoisson"
for dt in (tf.float32, tf.int32, tf.int64, tf.float16, tf.float64):
    v1(sp, [4, 6], S64, dt, lam=LAM, note=f"{dt.name}")
v1(sp, [3, 6], S32, tf.int64, lam=LAM.astype(f64), note="double rates")
v1(sp, [3, 2], S32, tf.int32, lam=np.array([7, 20], i64), note="int64 rates")
v1(sp, [2, 2], S32, tf.float32, lam=np.array([3, 300], i32), note="int32 rates")
v1(sp, [4], S32, tf.int32, lam=np.array([np.inf, -1, 0, 2], f32), note="inf, negative, zero")
v1(sp, [4], S32, tf.float32, lam=np.array([np.inf, -1, 0, 2], f32), note="inf float")
v1(sp, [3, 4], S64, tf.float32, lam=LAM, note="bad shape")

# --- binomial --------------------------------------------------------------------------------
CNT = np.array([10.0, 50.0, 200.0, 200.0, 5.0, 0.0, 7.0, 30.0], f64)
PRB = np.array([0.3, 0.1, 0.5, 0.9, 0.95, 0.5, 1.0, 0.0], f64)
sb = "StatelessRandomBinomial"
for t, dt in ((f64, tf.int64), (f32, tf.int32), (f16, tf.float32), (f64, tf.float16),
              (f32, tf.float64)):
    op(sb, dict(shape=np.array([3, 8], i32), seed=S64, counts=CNT.astype(t),
                probs=PRB.astype(t)), dict(dtype=dt), note=f"{np.dtype(t)} -> {dt.name}")
op(sb, dict(shape=np.array([2, 4, 3], i64), seed=S32, counts=np.array([[20.], [3.], [1e4], [9.]]),
            probs=np.array([0.4, 0.6, 0.02])), dict(dtype=tf.int64), note="broadcast")
op(sb, dict(shape=np.array([2], i32), seed=S32, counts=np.array([5.0, 6.0]),
            probs=np.array([np.nan, 0.5])), dict(dtype=tf.float32), note="nan prob")
op(sb, dict(shape=np.array([3, 2], i32), seed=S64, counts=CNT[:3], probs=PRB[:2]),
   dict(dtype=tf.int64), note="incompatible")
op(sb, dict(shape=np.array([3, 2], i32), seed=S64, counts=CNT[:3], probs=PRB[:3]),
   dict(dtype=tf.int64), note="bad shape")

# --- parameterized truncated normal ----------------------------------------------------------
ptn = "StatelessParameterizedTruncatedNormal"
P4 = dict(means=np.array([0.0, 1.0, -2.0, 0.5], f32), stddevs=np.array([1.0, 0.5, 2.0, 1.0], f32),
          minvals=np.array([-3.0, 0.9, 3.0, -np.inf], f32),   # randn, uniform, exponential,
          maxvals=np.array([3.0, 1.2, np.inf, -1.0], f32))    # one-sided (flipped)
for t, tol in ((f32, None), (f16, None), (f64, TIGHT)):
    op(ptn, dict(shape=np.array([6, 4], i32), seed=S64, **{k: v.astype(t) for k, v in P4.items()}),
       note=f"{np.dtype(t)}: the three samplers", tol=tol)
op(ptn, dict(shape=np.array([5, 3], i32), seed=S32, means=np.float32(0),
             stddevs=np.array([1.0, 0.1, 3.0], f32), minvals=np.float32(-0.5),
             maxvals=np.float32(0.4)), note="broadcast")
op(ptn, dict(shape=np.array([2, 2], i32), seed=S32, means=np.float32(0),
             stddevs=np.float32(-1), minvals=np.float32(-1), maxvals=np.float32(1)),
   note="invalid parameters")

# --- shuffle ---------------------------------------------------------------------------------
ss = "StatelessShuffle"
v2s = dict(key=KEY, counter=CTR, alg=np.int32(1))
op(ss, dict(value=np.arange(10, dtype=i32), **v2s), note="1-D")
op(ss, dict(value=np.arange(18, dtype=f32).reshape(6, 3), **v2s), note="rows")
op(ss, dict(value=np.array([b"a", b"b", b"c", b"d"], object), **v2s), note="strings")
op(ss, dict(value=np.array([[1.0, 2.0]], f64), **v2s), note="one row")
op(ss, dict(value=np.float32(3), **v2s), note="scalar")
op(ss, dict(value=np.arange(5, dtype=i64), key=KEY, counter=CTR, alg=np.int32(2)),
   note="ThreeFry")


# --- seeded stateful ops: the n-th run gives TF's n-th draw --------------------------------------
def stateful_graph():
    sh = np.array([5], i32)
    outs = [
        raw.RandomUniform(shape=sh, dtype=tf.float32, seed=1, seed2=2),
        raw.RandomUniform(shape=np.array([2, 3], i64), dtype=tf.float64, seed=0, seed2=9),
        raw.RandomUniform(shape=sh, dtype=tf.float16, seed=7, seed2=0),
        raw.RandomStandardNormal(shape=np.array([7], i32), dtype=tf.float32, seed=3, seed2=4),
        raw.RandomStandardNormal(shape=sh, dtype=tf.float64, seed=3, seed2=4),
        raw.TruncatedNormal(shape=np.array([9], i32), dtype=tf.float32, seed=5, seed2=6),
        raw.TruncatedNormal(shape=np.array([3], i32), dtype=tf.float16, seed=5, seed2=6),
        raw.RandomUniformInt(shape=sh, minval=np.int32(-4), maxval=np.int32(9), seed=11,
                             seed2=1),
        raw.RandomUniformInt(shape=sh, minval=np.int64(0), maxval=np.int64(2 ** 40), seed=11,
                             seed2=2),
        raw.Multinomial(logits=LOG.astype(f32), num_samples=np.int32(6), seed=8, seed2=8),
        raw.RandomShuffle(value=np.arange(7, dtype=i32), seed=2, seed2=3),
        raw.RandomShuffle(value=np.arange(8, dtype=f32).reshape(4, 2), seed=2, seed2=4),
        raw.RandomGamma(shape=np.array([3], i32), alpha=ALPHA, seed=4, seed2=4),
        raw.RandomPoissonV2(shape=np.array([2], i32), rate=LAM.astype(f64), dtype=tf.int32,
                            seed=6, seed2=2),
        raw.ParameterizedTruncatedNormal(shape=np.array([4, 3], i32), means=np.float32(1),
                                         stdevs=np.float32(2), minvals=np.float32(0),
                                         maxvals=np.float32(2), seed=9, seed2=9),
        raw.ParameterizedTruncatedNormal(shape=np.array([4, 2], i32),
                                         means=np.array([0, 1, 2, 3], f32),
                                         stdevs=np.array([1, 1, 1, 1], f32),
                                         minvals=np.array([-1, 5, 1, -np.inf], f32),
                                         maxvals=np.array([1, np.inf, 4, 0], f32),
                                         seed=9, seed2=10),
    ]
    return [(outs, [])] * 3


graph("seeded_stateful", stateful_graph,
      ["RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt",
       "Multinomial", "RandomShuffle", "RandomGamma", "RandomPoissonV2",
       "ParameterizedTruncatedNormal"], tol=TIGHT)


def bfloat16_graph():
    """bfloat16 uniforms take 7 bits per value (not float32's rounded): cast to float32 (exact)
    for the file; normals are float32 draws rounded."""
    sh = np.array([6], i32)
    bf = tf.bfloat16
    outs = [
        raw.StatelessRandomUniform(shape=sh, seed=S64, dtype=bf),
        raw.StatelessRandomUniformV2(shape=sh, key=KEY, counter=CTR, alg=np.int32(1), dtype=bf),
        raw.RandomUniform(shape=np.array([9], i32), dtype=bf, seed=1, seed2=2),
        raw.StatelessRandomNormal(shape=sh, seed=S64, dtype=bf),
    ]
    return [([tf.cast(o, tf.float32) for o in outs], [])] * 2


graph("bfloat16", bfloat16_graph,
      ["StatelessRandomUniform", "StatelessRandomUniformV2", "RandomUniform",
       "StatelessRandomNormal"])


def poisson_v1_graph():
    """RandomPoisson was removed in GraphDef version 25: import it as an old graph does."""
    old = tf.Graph()
    with old.as_default():
        for i, (dt, rate) in enumerate(((tf.float32, LAM), (tf.float16, LAM.astype(f16)),
                                        (tf.float64, LAM.astype(f64)))):
            raw.RandomPoissonV2(shape=np.array([2], i32), rate=rate, dtype=dt, seed=6,
                                seed2=1 + i, name=f"p{i}")
    gd = old.as_graph_def()
    for n in gd.node:
        if n.op == "RandomPoissonV2":
            n.op = "RandomPoisson"
            del n.attr["R"]
    gd.versions.producer = 24
    tf.compat.v1.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    outs = [g.get_tensor_by_name(f"p{i}:0") for i in range(3)]
    return [(outs, [])] * 3


graph("random_poisson_v1", poisson_v1_graph, ["RandomPoisson"], tol=TIGHT)


def stateful_errors_graph():
    bad = raw.RandomUniformInt(shape=np.array([3], i32), minval=np.int32(5), maxval=np.int32(5),
                               seed=1, seed2=1)
    return [([bad], []), ([bad], [])]


graph("seeded_stateful_errors", stateful_errors_graph, ["RandomUniformInt"])


# --- tf.random.Generator ops on their state variable --------------------------------------------
def generator_graph():
    steps = []
    state0 = np.array([3, 0, 0x12345], i64)
    alg = np.int64(1)

    def var(name, value=state0):
        v = raw.VarHandleOp(dtype=tf.int64, shape=[value.size], shared_name=name, name=name)
        return v, raw.AssignVariableOp(resource=v, value=value)

    def read_after(v, op_):
        with tf.control_dependencies([op_]):
            return raw.ReadVariableOp(resource=v, dtype=tf.int64)

    draws = [
        ("u", lambda v: raw.StatefulUniform(resource=v, algorithm=alg, shape=np.array([6], i64),
                                            dtype=tf.float32)),
        ("u64", lambda v: raw.StatefulUniform(resource=v, algorithm=alg,
                                              shape=np.array([3], i64), dtype=tf.float64)),
        ("n", lambda v: raw.StatefulStandardNormalV2(resource=v, algorithm=alg,
                                                     shape=np.array([2, 3], i64),
                                                     dtype=tf.float32)),
        ("t", lambda v: raw.StatefulTruncatedNormal(resource=v, algorithm=alg,
                                                    shape=np.array([5], i32),
                                                    dtype=tf.float16)),
        ("i", lambda v: raw.StatefulUniformInt(resource=v, algorithm=alg,
                                               shape=np.array([5], i64),
                                               minval=np.int32(-7), maxval=np.int32(100))),
        ("f", lambda v: raw.StatefulUniformFullInt(resource=v, algorithm=alg,
                                                   shape=np.array([4], i64), dtype=tf.uint64)),
        ("b", lambda v: raw.StatefulRandomBinomial(resource=v, algorithm=alg,
                                                   shape=np.array([3, 2], i32),
                                                   counts=np.array([10.0, 40.0], f32),
                                                   probs=np.array([0.5, 0.25], f32),
                                                   dtype=tf.int32)),
        ("s", lambda v: raw.RngSkip(resource=v, algorithm=alg, delta=np.int64(5))),
    ]
    for name, make in draws:
        v, init = var(name)
        d = make(v)
        outs, targets = ([], [d]) if isinstance(d, tf.Operation) else ([d], [])
        after = read_after(v, d)
        steps += [([], [init])]
        if name == "b":
            # TF's binomial kernel loses its state update while the variable's buffer is
            # shared with the assigned constant (it writes to the buffer it read before
            # copying): a first in-place skip gives the variable its own buffer.
            steps += [([], [raw.RngSkip(resource=v, algorithm=alg, delta=np.int64(0))])]
        steps += [(outs, targets), (outs, targets), ([after], [])]
    v, init = var("rs", np.array([2 ** 63 - 1, -1, 77], i64))   # counter wraps
    rs = raw.RngReadAndSkip(resource=v, alg=np.int32(1), delta=np.uint64(3))
    steps += [([], [init]), ([rs], []), ([rs], [])]
    # algorithm 3, auto-select (Generator(alg="auto_select")): Philox on CPU
    v, init = var("auto", state0)
    auto = raw.RngReadAndSkip(resource=v, alg=np.int32(3), delta=np.uint64(2))
    auto_u = raw.StatefulUniform(resource=v, algorithm=np.int64(3), shape=np.array([4], i64),
                                 dtype=tf.float32)
    steps += [([], [init]), ([auto], []), ([auto_u], []), ([auto], [])]
    v, init = var("tf", state0)
    bad = raw.StatefulUniform(resource=v, algorithm=np.int64(2), shape=np.array([2], i64),
                              dtype=tf.float32)
    steps += [([], [init]), ([bad], [])]
    v, init = var("short", state0[:2])
    short = raw.StatefulUniform(resource=v, algorithm=alg, shape=np.array([2], i64),
                                dtype=tf.float32)
    steps += [([], [init]), ([short], [])]
    nd = raw.NonDeterministicInts(shape=np.array([2, 3], i64), dtype=tf.int64)
    steps += [([nd - nd, tf.shape(nd)], [])]
    return steps


graph("generator", generator_graph,
      ["StatefulUniform", "StatefulStandardNormalV2", "StatefulTruncatedNormal",
       "StatefulUniformInt", "StatefulUniformFullInt", "StatefulRandomBinomial", "RngSkip",
       "RngReadAndSkip", "NonDeterministicInts"], tol=TIGHT)


def generator_v1_graph():
    """StatefulStandardNormal (removed in GraphDef version 29) keeps the algorithm in the
    state's first element: imported as an old graph would have it."""
    old = tf.Graph()
    with old.as_default():
        v = raw.VarHandleOp(dtype=tf.int64, shape=[4], shared_name="old", name="old")
        raw.AssignVariableOp(resource=v, value=np.array([1, 9, 0, 42], i64), name="init")
        d = raw.StatefulStandardNormalV2(resource=v, algorithm=np.int64(1),
                                         shape=np.array([3], i64), dtype=tf.float32, name="d")
        with tf.control_dependencies([d]):
            raw.ReadVariableOp(resource=v, dtype=tf.int64, name="after")
    gd = old.as_graph_def()
    for n in gd.node:
        if n.name == "d":
            n.op = "StatefulStandardNormal"
            del n.input[1]
    gd.versions.producer = 28
    tf.compat.v1.import_graph_def(gd, name="")
    g = tf.compat.v1.get_default_graph()
    d, after, init = (g.get_tensor_by_name("d:0"), g.get_tensor_by_name("after:0"),
                      g.get_operation_by_name("init"))
    return [([], [init]), ([d], []), ([d], []), ([after], [])]


graph("generator_v1", generator_v1_graph, ["StatefulStandardNormal"])



def sharded() -> None:
    """Draws TF splits over its 2 intra-op threads: inputs and outputs in sharded.npz."""
    out = {}
    big = (np.random.RandomState(3).randint(-8, 8, size=(10, 300)) / 4).astype(f32)
    out["multinomial_logits"] = big
    out["multinomial"] = raw.StatelessMultinomial(logits=big, num_samples=np.int32(20),
                                                  seed=S64).numpy()
    out["ptn"] = raw.StatelessParameterizedTruncatedNormal(
        shape=np.array([1500], i32), seed=S64, means=np.float32(0), stddevs=np.float32(1),
        minvals=np.float32(-0.3), maxvals=np.float32(0.5)).numpy()
    g = tf.Graph()
    with g.as_default():
        m = raw.Multinomial(logits=big, num_samples=np.int32(20), seed=4, seed2=5)
        p = raw.ParameterizedTruncatedNormal(shape=np.array([20, 100], i32),
                                             means=np.float32(1), stdevs=np.float32(2),
                                             minvals=np.float32(-1), maxvals=np.float32(2.5),
                                             seed=6, seed2=7)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=THREADS)
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        for i in range(2):
            out[f"multinomial_run{i}"], out[f"ptn_v1_run{i}"] = sess.run([m, p])
    np.savez_compressed(HERE / "sharded.npz", **out)


if __name__ == "__main__":
    write()
    sharded()
