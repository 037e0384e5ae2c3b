"""The machinery every raw-op generator shares: ``op`` (one eager ``tf.raw_ops`` call) and
``graph`` (a small TF1 graph run in a Session), collected into a manifest and an array file.

A generator (``tests/data/kernels/raw_ops*/generate.py``) imports this module, calls
``begin(its folder)``, then ``op``/``graph`` for each case, then ``write()``; see
``raw_ops/generate.py`` for the format. Needs TensorFlow: run with its venv, never in CI.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import tensorflow as tf

raw = tf.raw_ops
f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64

HERE = Path(__file__).resolve().parent


def begin(folder: Path) -> None:
    """Collect into ``folder`` (its manifest.json, arrays.npz and graphs/)."""
    global HERE
    HERE = Path(folder)
    CASES.clear()
    ARRAYS.clear()
    _SEEN.clear()


def write() -> None:
    (HERE / "manifest.json").write_text(json.dumps(CASES, indent=0) + "\n")
    np.savez_compressed(HERE / "arrays.npz", **ARRAYS)
    print(len(CASES), "cases,", len(ARRAYS), "arrays")


CASES: list[dict] = []
ARRAYS: dict[str, np.ndarray] = {}
# (dtype, shape, bytes) -> key: an array equal to one already stored reuses its key (cases
# share inputs, and every npz entry costs a few hundred bytes)
_SEEN: dict[tuple, str] = {}


def _store(v) -> str:
    a = v.numpy() if hasattr(v, "numpy") else v
    a = np.array(a, dtype=object) if isinstance(a, bytes) else np.asarray(a)
    if a.dtype == object or a.dtype.kind in "SU":
        vals = [x if isinstance(x, bytes) else str(x).encode() for x in a.reshape(-1)]
        assert all(not x.endswith(b"\0") for x in vals), "trailing NUL would be lost"
        a = np.array(vals, dtype="S" if vals else "S1").reshape(a.shape)
    sig = (a.dtype.str, a.shape, a.tobytes())
    if sig in _SEEN:
        return _SEEN[sig]
    key = f"a{len(ARRAYS)}"
    ARRAYS[key] = a
    _SEEN[sig] = key
    return key


def _attr(v):
    if isinstance(v, tf.DType):
        return {"dtype": "string" if v == tf.string else v.as_numpy_dtype.__name__}
    if isinstance(v, (list, tuple)):
        return [_attr(x) for x in v]
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def _flat(r) -> list:
    if r is None or isinstance(r, tf.Operation):
        return []
    if isinstance(r, (list, tuple)):
        out = []
        for x in r:
            out.extend(_flat(x))
        return out
    return [r]


def _tf_input(v):
    if isinstance(v, (list, tuple)):
        return [_tf_input(x) for x in v]
    a = np.asarray(v)
    return tf.constant(a) if a.dtype != object else tf.constant(a.tolist() if a.ndim else a.item())


def op(name: str, inputs: dict, attrs: dict | None = None, tol: float | None = None,
       note: str = "", unspecified: tuple = (), signs: tuple = (), ignore: tuple = ()) -> None:
    """One eager call of tf.raw_ops.<name>; inputs in OpDef order (lists for list inputs).

    ``unspecified``: outputs whose values TF leaves uninitialized (only dtype and shape are
    kept); ``signs``: outputs defined only up to the sign of each column (compared as |x|);
    ``ignore``: placeholder outputs TF documents as unused (not compared)."""
    attrs = attrs or {}
    entry: dict = {"op": name, "note": note}
    ins = []
    for v in inputs.values():
        if isinstance(v, (list, tuple)) and not isinstance(v, np.ndarray):
            ins.append([_store(x) for x in v])
        else:
            ins.append(_store(v))
    entry["inputs"] = ins
    entry["attrs"] = {k: _attr(v) for k, v in attrs.items()}
    if tol is not None:
        entry["tol"] = tol
    try:
        r = getattr(raw, name)(**{k: _tf_input(v) for k, v in inputs.items()}, **attrs)
        entry["outputs"] = [
            None if i in ignore else
            {"dtype": x.dtype.name, "shape": x.shape.as_list()} if i in unspecified else _store(x)
            for i, x in enumerate(_flat(r))]
        if signs:
            entry["signs"] = list(signs)
    except (tf.errors.OpError, ValueError, TypeError) as e:
        if not isinstance(e, tf.errors.OpError):
            raise
        entry["error"] = type(e).__name__
    CASES.append(entry)


def graph(name: str, build, ops: list[str], tol: float | None = None) -> None:
    """A TF1 graph: ``build()`` adds nodes to the default graph and returns a list of steps
    ``(fetches, targets)``; each step is run in one Session, in order."""
    g = tf.Graph()
    with g.as_default():
        steps = build()
    (HERE / "graphs").mkdir(exist_ok=True)
    path = HERE / "graphs" / f"{name}.pbtxt"
    path.write_text(str(g.as_graph_def()))
    entry: dict = {"graph": f"graphs/{name}.pbtxt", "ops": ops, "steps": []}
    if tol is not None:
        entry["tol"] = tol
    with tf.compat.v1.Session(graph=g) as sess:
        for fetches, targets, *more in steps:
            extra = more[0] if more else {}
            st: dict = {"fetches": [t.name for t in fetches], "targets": [t.name for t in targets]}
            feeds = {}
            for t, fname in extra.get("files", {}).items():  # a file next to this script
                feeds[t] = str(HERE / fname)
                st.setdefault("files", {})[t.name] = fname
            if "sort" in extra:  # outputs in unspecified order: compare sorted by this one
                st["sort"] = extra["sort"]
            try:
                vals = sess.run(list(fetches) + list(targets), feed_dict=feeds)[:len(fetches)]
                st["outputs"] = [_store(v) for v in vals]
            except tf.errors.OpError as e:
                st["error"] = type(e).__name__
            entry["steps"].append(st)
    used = {n.op for n in g.as_graph_def().node}
    missing = set(ops) - used
    assert not missing, (name, missing)
    CASES.append(entry)
