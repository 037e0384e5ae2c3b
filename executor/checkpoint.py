"""Restore a Session's variables from a TF1 checkpoint by name, as ``tf.train.Saver`` maps
them: the checkpoint key of a variable is its op's name (``w``, ``dense/kernel``).

A TF1 model often travels as ``model.ckpt.meta`` (the MetaGraphDef, whose GraphDef
``dfg.graphdef.io`` reads) beside ``model.ckpt.index`` and ``model.ckpt.data-*`` (the bundle,
read by ``dfg.graphdef.bundle``). The graph's own ``save/restore_all`` would need the
SaverDef the .meta file carries; restoring by name needs only the graph and the bundle,
and works the same for graphs whose Saver was pruned away.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dfg.graphdef.errors import InvalidArgumentError, NotFoundError

_VARIABLE_OPS = {"VariableV2", "Variable"}
_HANDLE_OPS = {"VarHandleOp"}


def default_prefix(graph_path: str) -> str | None:
    """``model.ckpt`` for ``model.ckpt.meta`` when ``model.ckpt.index`` lies beside it."""
    if not graph_path.endswith(".meta"):
        return None
    prefix = graph_path[:-len(".meta")]
    index = prefix + ".index"     # a FIFO counts too: reading it refuses it (exit 2)
    return prefix if os.path.exists(index) and not os.path.isdir(index) else None


def resolve_prefix(path: str) -> str:
    """A checkpoint prefix from what a user may give: the prefix, its .index file, or a
    directory with a ``checkpoint`` state file (its latest checkpoint)."""
    p = Path(path)
    if p.is_dir():
        state = p / "checkpoint"
        if state.exists() and not state.is_dir():
            from dfg.graphdef.files import read_file

            text = read_file(state, what="the checkpoint state file").decode("utf-8", "replace")
            for line in text.splitlines():
                if line.startswith("model_checkpoint_path:"):
                    name = line.split(":", 1)[1].strip().strip('"')
                    if not os.path.isabs(name) or not os.path.isfile(name + ".index"):
                        # relative, or an absolute path from the machine that wrote it
                        name = str(p / Path(name).name)
                    return name
        raise NotFoundError(f"{path}: a directory without a 'checkpoint' state file")
    if path.endswith(".index"):
        path = path[:-len(".index")]
    if not os.path.exists(path + ".index") or os.path.isdir(path + ".index"):
        raise NotFoundError(f"no checkpoint at {path} ({path}.index does not exist)")
    return path


def _partitioned_key(keys: set[str], name: str) -> tuple[str, int] | None:
    """(checkpoint key, K) for the K-th part of a partitioned variable: ``NAME/part_K``
    itself, or a variable made for it, such as an optimizer slot or a moving average
    (``NAME/part_K/Momentum``), which the Saver stores under ``NAME/Momentum``."""
    parts = name.split("/")
    for i in range(len(parts) - 1, 0, -1):
        seg = parts[i]
        if seg.startswith("part_") and seg[5:].isdigit():
            base = "/".join(parts[:i] + parts[i + 1:])
            if base in keys:
                return base, int(seg[5:])
    return None


def saver_slices(graph: Any) -> dict[str, tuple[str, str]]:
    """Variable node -> (checkpoint key, shape_and_slices spec) for the parts of partitioned
    variables, as the graph's own Saver restores them: an Assign (or AssignVariableOp) of
    output k of a RestoreV2 whose tensor_names and shape_and_slices are Consts. The spec is
    TensorFlow's encoding of the part's save_slice_info ("10 4 0,5:-": full shape [10, 4],
    rows 0..4, all columns); only parts with a non-empty spec are listed."""
    from dfg.graphdef.tensors import to_numpy

    def const(src: str) -> Any:
        nd = graph.node(src) if src in graph else None
        while nd is not None and nd.op == "Identity" and nd.inputs:
            nd = graph.node(nd.inputs[0][0])
        if nd is None or nd.op != "Const" or "value" not in nd.attr:
            return None
        return to_numpy(nd.attr["value"].tensor).reshape(-1)

    out: dict[str, tuple[str, str]] = {}
    for node in graph.nodes:
        if node.op not in ("RestoreV2", "RestoreSlice") or len(node.inputs) < 3:
            continue
        names, specs = const(node.inputs[1][0]), const(node.inputs[2][0])
        if names is None or specs is None or len(names) != len(specs):
            continue
        for k in range(len(names)):
            spec = _text(specs[k])
            if node.op == "RestoreSlice":
                spec, k = _text(specs[0]), 0
            if not spec.strip():
                continue
            for e in graph.consumers(node.name, k):
                dst = graph.node(e.dst)
                if dst.op in ("Assign", "AssignVariableOp") and e.dst_input == 1:
                    out[dst.inputs[0][0]] = (_text(names[k]), spec)
            if node.op == "RestoreSlice":
                break
    return out


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _partition(bundle: Any, keys: set[str], name: str, wholes: dict[str, Any]) -> Any:
    """The value of ``NAME/part_K``, the K-th part of a variable a partitioner split (the
    checkpoint stores NAME with one slice per part, in the order of their offsets), or of a
    variable made per part (``NAME/part_K/SLOT``, stored as ``NAME/SLOT``); ``wholes``
    keeps each key read once for all its parts."""
    found = _partitioned_key(keys, name)
    if found is None:
        return None
    base, k = found
    entry = bundle.entry(base)
    if not len(entry.slices):
        # a variable the partitioner left in one part: stored whole (the caller checks its
        # shape against the part's)
        return bundle.read(base) if k == 0 else None
    if base not in wholes:
        wholes[base] = bundle.read(base)
    full = wholes[base]
    extents = sorted(
        tuple((int(e.start), int(e.length) if e.HasField("length") else full.shape[d])
              for d, e in enumerate(sl.extent))
        for sl in entry.slices)
    if k >= len(extents):
        return None
    return full[tuple(slice(a, a + n) for a, n in extents[k])].copy()


def _saved_slice(bundle: Any, key: str, spec: str, wholes: dict[str, Any]) -> Any:
    """The part ``spec`` names of the checkpoint's ``key`` (read once for all its parts)."""
    from .kernels.io import _slice_of

    if key not in wholes:
        wholes[key] = bundle.read(key)
    return _slice_of(wholes[key], spec, key)


def restore(session: Any, prefix: str) -> int:
    """Give every variable of ``session``'s graph whose op name is a key of the checkpoint
    at ``prefix`` that value (a part of a partitioned variable: the slice its Saver's spec
    names, see :func:`saver_slices`, or without a Saver in the graph, by name:
    ``NAME/part_K``: its part of NAME;
    ``NAME/part_K/SLOT``, a slot or moving average of that part: its part of NAME/SLOT);
    returns how many were restored. A variable the checkpoint
    holds with another shape or dtype is an InvalidArgumentError; none restored is a
    NotFoundError (the checkpoint is not this graph's)."""
    import numpy as np

    from dfg.graphdef import dtypes as D
    from dfg.graphdef.bundle import BundleReader

    from .kernels.state import ResourceVariable
    from .resources import VariableRef, node_resource_key

    bundle = BundleReader(resolve_prefix(prefix))
    keys = set(bundle.keys())
    wholes: dict[str, Any] = {}
    sliced = saver_slices(session.graph)
    done = 0
    for node in session.graph.nodes:
        if node.op not in _VARIABLE_OPS and node.op not in _HANDLE_OPS:
            continue
        attrs = node.attr
        if node.name in sliced and sliced[node.name][0] in keys:
            value = _saved_slice(bundle, *sliced[node.name], wholes)
        elif node.name in keys:
            value = bundle.read(node.name)
        else:
            value = _partition(bundle, keys, node.name, wholes)
            if value is None:
                continue
        dt = D.to_numpy(attrs["dtype"].type) if "dtype" in attrs else value.dtype
        shape = tuple(d.size for d in attrs["shape"].shape.dim) if "shape" in attrs else None
        if value.dtype != dt:
            raise InvalidArgumentError(
                f"checkpoint holds {value.dtype} for variable '{node.name}', the graph "
                f"declares {dt}", node=node.name, op=node.op)
        if shape is not None and not attrs["shape"].shape.unknown_rank and (
                len(shape) != value.ndim
                or any(d >= 0 and d != v for d, v in zip(shape, value.shape))):
            raise InvalidArgumentError(
                f"checkpoint holds shape {list(value.shape)} for variable '{node.name}', "
                f"the graph declares {list(shape)}", node=node.name, op=node.op)
        key = node_resource_key(node)
        if node.op in _VARIABLE_OPS:
            def make(n=node.name, dt=dt, shape=shape):
                return VariableRef(n, dt, shape)
        else:
            def make(k=key, dt=dt, shape=shape):
                return ResourceVariable(k[1], dt, shape)
        var = session.resources.lookup_or_create(key, make)
        with var.lock:
            var.value = np.array(value, copy=True)
        done += 1
    if not done:
        raise NotFoundError(f"checkpoint {prefix} holds no variable of this graph (its keys "
                            f"are variable names; {len(keys)} keys there)")
    return done


def freeze(graph: Any, prefix: str, fetches: list[str], feeds: list[str] = ()
           ) -> tuple[Any, dict[str, Any]]:
    """TF1's freeze_graph: ``graph`` pruned to ``fetches`` (``feeds`` become Placeholders),
    its variables restored from the checkpoint at ``prefix`` and turned into Consts (calls
    inlined and functional control flow lowered, as the Session runs it). Returns the
    GraphDef and ``{"fetches", "variables", "constant_bytes", "nodes"}``."""
    import numpy as np

    from dfg.graphdef.errors import FailedPreconditionError
    from dfg.graphdef.prune import prune

    from .resources import node_resource_key
    from .savedmodel import inline_variables
    from .session import Session

    with Session(graph, threads=1, optimize=False) as sess:
        restore(sess, prefix)
        pruned = prune(sess.graph, list(fetches), list(feeds))
        values: dict[str, np.ndarray] = {}
        for nd in pruned.node:
            if nd.op not in _VARIABLE_OPS and nd.op not in _HANDLE_OPS:
                continue
            var = sess.resources.lookup(node_resource_key(nd))
            if var is None or getattr(var, "value", None) is None:
                raise FailedPreconditionError(
                    "variable the fetches read is not in the checkpoint", node=nd.name,
                    op=nd.op)
            values[nd.name] = var.value
    frozen = inline_variables(pruned, values)
    from .savedmodel import check_frozen

    check_frozen(frozen)
    info = {"fetches": list(fetches), "variables": len(values),
            "constant_bytes": int(sum(v.nbytes for v in values.values()
                                      if v.dtype != object)),
            "nodes": len(frozen.node)}
    return frozen, info

