"""Write the model pairs ``dfg diff`` is tested on, with the differences TensorFlow's own
graphs say they have.

Run with a Python that has TensorFlow 2.21 and Keras 3 (never in CI; dfg never imports
TensorFlow)::

    /tmp/tfvenv/bin/python tests/data/diff/generate.py

A small Keras model (x[8] -> Dense 16 relu "hidden" -> Dense 16 relu "side" and a
Concatenate of the two -> Dense 4 "logits" -> softmax), seeded, frozen with
``convert_variables_to_constants_v2`` as a TF2 user freezes a model. Each pair is a folder
with ``a.pb``, ``b.pb`` (binary GraphDefs) and ``expected.json``, what ``dfg diff a.pb b.pb
--json`` must print:

* ``layer_added``: B has a Dense 16 "extra" between "hidden" and the concatenation;
* ``layer_renamed``: B's "hidden" layer is called "encoder" (same weights);
* ``finetuned``: B's "hidden" kernel is A's plus seeded noise of scale 1e-3 (a fine-tuning
  step), everything else the same;
* ``rewired``: B concatenates [side, hidden] instead of [hidden, side].

``ckpt/``: ``a`` and ``b`` checkpoints (``tf.train.Checkpoint``) of the base and the
fine-tuned model, and ``expected.json`` for ``dfg diff ckpt/a ckpt/b --json``.

The expected JSON is worked out here from TensorFlow's GraphDefs and values, by name (the
renamed pair by the known rename hidden -> encoder), with numpy for the largest absolute
difference: it does not come from dfg.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2,
)

HERE = Path(__file__).resolve().parent
DTYPES = {tf.float32.as_datatype_enum: "float32", tf.int32.as_datatype_enum: "int32",
          tf.int64.as_datatype_enum: "int64"}


def build(hidden: str = "hidden", extra: bool = False, swap: bool = False) -> keras.Model:
    keras.utils.clear_session()   # the same scope names in every model
    keras.utils.set_random_seed(0)
    x = keras.Input((8,), name="x")
    h = keras.layers.Dense(16, activation="relu", name=hidden)(x)
    s = keras.layers.Dense(16, activation="relu", name="side")(x)
    if extra:
        h = keras.layers.Dense(16, activation="relu", name="extra")(h)
    c = keras.layers.Concatenate(name="concat")([s, h] if swap else [h, s])
    y = keras.layers.Dense(4, activation="softmax", name="logits")(c)
    return keras.Model(x, y, name="net")


def copy_weights(dst: keras.Model, src: keras.Model) -> None:
    for layer in src.layers:
        if layer.weights:
            name = "encoder" if layer.name == "hidden" and "encoder" in [
                l.name for l in dst.layers] else layer.name
            dst.get_layer(name).set_weights(layer.get_weights())


def freeze(model: keras.Model) -> tf.compat.v1.GraphDef:
    fn = tf.function(lambda x: model(x, training=False))
    cf = fn.get_concrete_function(tf.TensorSpec((None, 8), tf.float32, name="x"))
    return convert_variables_to_constants_v2(cf).graph.as_graph_def()


def summary(arr: np.ndarray, dtype: int) -> str:
    # dfg diff's summary: dtype and shape, the values when there are at most four
    text = f"{DTYPES[dtype]} [{','.join(str(d) for d in arr.shape)}]"
    if arr.size <= 4:
        vals = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v)
                         for v in arr.reshape(-1).tolist())
        text += f" = [{vals}]" if arr.ndim else f" = {vals}"
    return text


def expected(a: tf.compat.v1.GraphDef, b: tf.compat.v1.GraphDef,
             rename: dict[str, str] | None = None) -> dict:
    A = {n.name: n for n in a.node}
    B = {n.name: n for n in b.node}
    mapping = {}
    for name in A:
        new = "/".join((rename or {}).get(p, p) for p in name.split("/"))
        if new != name:
            assert new in B and new not in A, (name, new)
            mapping[name] = new
    renamed = [{"name": bn, "before": an, "after": bn, "op": B[bn].op}
               for an, bn in sorted(mapping.items(), key=lambda kv: kv[1])]
    added = [{"name": n, "op": B[n].op} for n in sorted(B)
             if n not in A and n not in mapping.values()]
    removed = [{"name": n, "op": A[n].op} for n in sorted(A) if n not in B and n not in mapping]

    def remap(inp: str) -> str:
        ctrl = inp.startswith("^")
        name, sep, rest = inp.lstrip("^").partition(":")
        return ("^" if ctrl else "") + mapping.get(name, name) + sep + rest

    changed = []
    for n in sorted(A.keys() & B.keys()):
        x, y = A[n], B[n]
        assert x.op == y.op and x.device == y.device, n
        if [remap(i) for i in x.input] != list(y.input):
            changed.append({"name": n, "what": "inputs", "before": list(x.input),
                            "after": list(y.input)})
        for k in sorted(set(x.attr) | set(y.attr)):
            if x.attr[k] == y.attr[k]:
                continue
            assert k == "value" and x.op == "Const", (n, k)
            va = tf.make_ndarray(x.attr[k].tensor)
            vb = tf.make_ndarray(y.attr[k].tensor)
            diff = float(np.max(np.abs(va.astype(np.float64) - vb.astype(np.float64))))
            changed.append({"name": n, "what": "value",
                            "before": summary(va, x.attr[k].tensor.dtype),
                            "after": summary(vb, y.attr[k].tensor.dtype),
                            "max_abs_diff": diff})
    return {"kind": "graph", "same": False, "added": added, "removed": removed,
            "renamed": renamed, "changed": changed,
            "functions": {"added": [], "removed": [], "renamed": [], "changed": []}}


def write_pair(name: str, a: tf.compat.v1.GraphDef, b: tf.compat.v1.GraphDef,
               rename: dict[str, str] | None = None) -> None:
    d = HERE / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "a.pb").write_bytes(a.SerializeToString(deterministic=True))
    (d / "b.pb").write_bytes(b.SerializeToString(deterministic=True))
    exp = expected(a, b, rename)
    (d / "expected.json").write_text(json.dumps(exp, indent=2) + "\n")
    print(name, {k: len(v) for k, v in exp.items() if isinstance(v, list)})


def main() -> None:
    base = build()
    gd_base = freeze(base)

    added = build(extra=True)
    copy_weights(added, base)
    write_pair("layer_added", gd_base, freeze(added))

    renamed = build(hidden="encoder")
    copy_weights(renamed, base)
    write_pair("layer_renamed", gd_base, freeze(renamed), {"hidden": "encoder",
                                                           "hidden_1": "encoder_1"})

    tuned = build()
    copy_weights(tuned, base)
    kernel, bias = tuned.get_layer("hidden").get_weights()
    rng = np.random.default_rng(1)
    kernel = kernel + (rng.standard_normal(kernel.shape) * 1e-3).astype(np.float32)
    tuned.get_layer("hidden").set_weights([kernel, bias])
    write_pair("finetuned", gd_base, freeze(tuned))

    swapped = build(swap=True)
    copy_weights(swapped, base)
    write_pair("rewired", gd_base, freeze(swapped))

    # checkpoints of the base and the fine-tuned model
    d = HERE / "ckpt"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    tf.train.Checkpoint(model=base).write(str(d / "a"))
    tf.train.Checkpoint(model=tuned).write(str(d / "b"))
    ra = tf.train.load_checkpoint(str(d / "a"))
    rb = tf.train.load_checkpoint(str(d / "b"))
    dtypes_a = ra.get_variable_to_dtype_map()
    changed = []
    for key in sorted(dtypes_a):
        if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
            continue
        va, vb = ra.get_tensor(key), rb.get_tensor(key)
        if va.dtype != object and not np.array_equal(va, vb):
            changed.append({"name": key, "what": "value",
                            "before": summary(va, dtypes_a[key].as_datatype_enum),
                            "after": summary(vb, dtypes_a[key].as_datatype_enum),
                            "max_abs_diff": float(np.max(np.abs(
                                va.astype(np.float64) - vb.astype(np.float64))))})
    exp = {"kind": "checkpoint", "same": False, "added": [], "removed": [], "renamed": [],
           "changed": changed,
           "functions": {"added": [], "removed": [], "renamed": [], "changed": []}}
    (d / "expected.json").write_text(json.dumps(exp, indent=2) + "\n")
    print("ckpt", len(changed), "changed")


if __name__ == "__main__":
    main()
