"""Load a SavedModel into a :class:`Session` and run its signatures, as TensorFlow's loader does.

    from dfg.executor.savedmodel import load
    model = load("model_dir")                       # tags default to 'serve'
    out = model.run("serving_default", {"x": x})    # {output key: array}

Loading builds one Session on the MetaGraphDef's GraphDef (calls are inlined by the Session),
then runs the SaverDef's restore op with its filename tensor fed the ``variables/variables``
prefix (the restore function's RestoreV2 reads the bundle, its AssignVariableOps fill the
variables), then the init op (``__saved_model_init_op``, a TF1 model's main op, or else its
table and local variable initializers, as TensorFlow 2's loader does) with the asset
placeholders fed the files under ``assets/``. A signature is then one
``Session.run`` fetching its outputs' tensors and feeding its inputs' tensors, by key.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError, NotFoundError
from dfg.graphdef.savedmodel import SavedModelDir, Signature

from .resources import node_resource_key
from .session import Session


class LoadedModel:
    """A restored SavedModel: ``session`` (variables restored), ``signatures`` by key."""

    def __init__(self, saved_model: SavedModelDir, session: Session) -> None:
        self.saved_model = saved_model
        self.session = session
        self.signatures: dict[str, Signature] = saved_model.signatures

    def signature(self, key: str | None = None) -> Signature:
        return self.saved_model.signature(key)

    def run(self, signature: str | None = None, inputs: dict[str, Any] | None = None,
            outputs: list[str] | None = None, timeout: float | None = None
            ) -> dict[str, np.ndarray]:
        """Run a signature: ``inputs`` by input key; returns ``{output key: array}`` for
        ``outputs`` (default: every output of the signature, in key order)."""
        sig = self.signature(signature)
        inputs = dict(inputs or {})
        unknown = sorted(set(inputs) - set(sig.inputs))
        if unknown:
            raise InvalidArgumentError(
                f"signature '{sig.key}' has no input {', '.join(repr(k) for k in unknown)} "
                f"(inputs: {', '.join(sig.inputs) or 'none'})")
        missing = sorted(set(sig.inputs) - set(inputs))
        if missing:
            raise InvalidArgumentError(
                f"signature '{sig.key}' needs input {', '.join(repr(k) for k in missing)} "
                "(feed it by key)")
        keys = list(sig.outputs) if outputs is None else list(outputs)
        for k in keys:
            if k not in sig.outputs:
                raise NotFoundError(f"signature '{sig.key}' has no output '{k}' (outputs: "
                                    f"{', '.join(sig.outputs)})")
        feed = {sig.inputs[k].name: v for k, v in inputs.items()}
        values = self.session.run([sig.outputs[k].name for k in keys], feed_dict=feed,
                                  timeout=timeout)
        return dict(zip(keys, values))

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> LoadedModel:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def restore(session: Session, saved_model: SavedModelDir) -> None:
    """Run the SaverDef's restore op fed the variables' prefix, then the init op."""
    saver = saved_model.saver_def
    prefix = saved_model.variables_prefix
    if saver is not None and saver.restore_op_name and prefix is not None:
        session.run([], feed_dict={saver.filename_tensor_name: np.array(prefix.encode(),
                                                                         dtype=object)},
                    targets=[saver.restore_op_name.split(":")[0]])
    restore_captured_variables(session, saved_model)
    targets = saved_model.init_targets()
    if targets:
        assets = {name: np.array(path.encode(), dtype=object)
                  for name, path in saved_model.asset_feeds().items()}
        session.run([], feed_dict=assets, targets=targets)


def restore_captured_variables(session: Session, saved_model: SavedModelDir) -> int:
    """Give every variable a top-level function call captures its checkpoint value, when the
    SaverDef's restore op left it uninitialized; returns how many were restored.

    TensorFlow 2's loader restores through the object graph, not the SaverDef: a call to a
    saved concrete function passes the captured variables' handles last, in the order of
    the function's ``bound_inputs`` (object-graph node ids), and each variable node's
    checkpoint key is in the checkpoint's own object graph (same node ids). Keras 3 models
    saved with ``tf.saved_model.save`` need this: their functions capture handles the
    SaverDef's restore function never assigns (TensorFlow's v1 loader fails on them too)."""
    from .kernels.state import ResourceVariable

    mg = saved_model.meta_graph
    if not mg.HasField("object_graph_def") or saved_model.bundle() is None:
        return 0
    functions = mg.object_graph_def.concrete_functions
    keys = {v.node_id: v.checkpoint_key for v in saved_model.variables() if v.checkpoint_key}
    nodes = {nd.name: nd for nd in saved_model.graph_def.node}
    bundle = saved_model.bundle()
    done = 0
    for nd in saved_model.graph_def.node:
        if nd.op not in ("StatefulPartitionedCall", "PartitionedCall") or "f" not in nd.attr:
            continue
        fn = functions.get(nd.attr["f"].func.name)
        if fn is None or not fn.bound_inputs:
            continue
        data = [i for i in nd.input if not i.startswith("^")]
        captured = data[len(data) - len(fn.bound_inputs):]
        for inp, node_id in zip(captured, fn.bound_inputs):
            handle = nodes.get(inp.split(":")[0])
            ckpt_key = keys.get(node_id)
            if handle is None or handle.op != "VarHandleOp" or ckpt_key is None:
                continue
            key = node_resource_key(handle)
            var = session.resources.lookup(key)
            if var is not None and getattr(var, "value", None) is not None:
                continue
            value = bundle.read(ckpt_key)
            var = session.resources.lookup_or_create(
                key, lambda v=value, k=key: ResourceVariable(k[1], v.dtype, v.shape))
            with var.lock:
                var.value = value
            done += 1
    return done


def load(path: str | os.PathLike[str], tags: Any = None, threads: int | None = None,
         **session_kw: Any) -> LoadedModel:
    """Load the SavedModel at ``path`` (directory or its saved_model.pb), restore its
    variables, and return the :class:`LoadedModel`."""
    sm = SavedModelDir(str(path), tags)
    session = Session(sm.graph_def, threads=threads, **session_kw)
    try:
        restore(session, sm)
    except BaseException:
        session.close()
        raise
    return LoadedModel(sm, session)


# --- object-graph functions ----------------------------------------------------------------

class LoadedFunction(LoadedModel):
    """A concrete function of a SavedModel's object graph, loaded as a one-signature model:
    the session's graph calls it (``StatefulPartitionedCall``) with a Placeholder per input
    and its captures (variables restored from the checkpoint by their object-graph keys,
    constants, asset paths); the signature's key is the function's path."""

    def __init__(self, saved_model: SavedModelDir, session: Session, sig: Signature) -> None:
        super().__init__(saved_model, session)
        self.signatures = {sig.key: sig}

    def signature(self, key: str | None = None) -> Signature:
        if key is None or key in self.signatures:
            return next(iter(self.signatures.values()))
        raise NotFoundError(f"function '{next(iter(self.signatures))}' is loaded, not "
                            f"'{key}'")


def load_function(path: str | os.PathLike[str], function: str, tags: Any = None,
                  threads: int | None = None, **session_kw: Any) -> LoadedFunction:
    """Load the object graph's concrete function at ``function`` (``model.__call__``,
    ``sub.shift``; ``PATH#K`` for its K-th concrete function) of the SavedModel at ``path``,
    for a model saved without signatures (a ``tf.Module`` with ``signatures={}``)."""
    from dfg.graphdef.errors import UnimplementedError
    from dfg.graphdef.savedmodel import TensorSpec
    from dfg.schemas import graph_pb2

    from .kernels.state import ResourceVariable

    sm = SavedModelDir(str(path), tags)
    fn = sm.function(function)
    og = sm.meta_graph.object_graph_def
    g = graph_pb2.GraphDef()
    g.versions.CopyFrom(sm.graph_def.versions)
    g.library.CopyFrom(sm.graph_def.library)
    taken: set[str] = set()

    def unique(name: str) -> str:
        cand, k = name, 1
        while cand in taken:
            cand, k = f"{name}_{k}", k + 1
        taken.add(cand)
        return cand

    call_inputs: list[str] = []
    types: list[int] = []
    inputs: dict[str, TensorSpec] = {}
    for name, dt, shape in fn.inputs:
        nd = g.node.add(name=unique(name.replace(":", "_") or "input"), op="Placeholder")
        nd.attr["dtype"].type = dt
        if shape is not None:
            for d in shape:
                nd.attr["shape"].shape.dim.add(size=-1 if d is None else d)
        else:
            nd.attr["shape"].shape.unknown_rank = True
        inputs[name] = TensorSpec(f"{nd.name}:0", dt, shape)
        call_inputs.append(nd.name)
        types.append(dt)
    keys = {v.node_id: v for v in sm.variables()}
    graph_nodes = {nd.name: nd for nd in sm.graph_def.node}
    variables: list[tuple[str, str]] = []   # (shared_name, checkpoint key)
    for node_id in fn.captures:
        obj = og.nodes[node_id]
        kind = obj.WhichOneof("kind")
        if kind == "variable" and node_id in keys and keys[node_id].checkpoint_key:
            var = keys[node_id]
            nd = g.node.add(name=unique(f"captured/{obj.variable.name or node_id}"),
                            op="VarHandleOp")
            nd.attr["dtype"].type = var.dtype
            nd.attr["shape"].shape.CopyFrom(obj.variable.shape)
            nd.attr["shared_name"].s = f"captured_{node_id}".encode()
            variables.append((f"captured_{node_id}", var.checkpoint_key))
            types.append(D_RESOURCE)
        elif kind == "constant" and obj.constant.operation in graph_nodes:
            src = graph_nodes[obj.constant.operation]
            nd = g.node.add()
            nd.CopyFrom(src)
            nd.name = unique(src.name)
            del nd.input[:]
            types.append(src.attr["dtype"].type)
        elif kind == "asset":
            asset = sm.meta_graph.asset_file_def[obj.asset.asset_file_def_index]
            nd = g.node.add(name=unique(f"captured/asset_{node_id}"), op="Const")
            nd.attr["dtype"].type = 7   # DT_STRING
            from dfg.graphdef.tensors import from_numpy

            nd.attr["value"].tensor.CopyFrom(from_numpy(np.array(
                str(sm.directory / "assets" / asset.filename).encode(), dtype=object)))
            types.append(7)
        else:
            raise UnimplementedError(
                f"function '{fn.path}' captures object {node_id} ({kind}), which dfg cannot "
                "pass to it (variables, constants and assets can be)")
        call_inputs.append(nd.name)
    call = g.node.add(name=unique("call"), op="StatefulPartitionedCall", input=call_inputs)
    call.attr["f"].func.name = fn.concrete
    call.attr["Tin"].list.type.extend(types)
    call.attr["Tout"].list.type.extend(dt for _k, dt, _s in fn.outputs)
    for a in ("config", "config_proto", "executor_type"):
        call.attr[a].s = b""
    outputs: dict[str, TensorSpec] = {}
    for j, (key, dt, shape) in enumerate(fn.outputs):
        nd = g.node.add(name=unique(key), op="Identity", input=[f"{call.name}:{j}"])
        nd.attr["T"].type = dt
        outputs[key] = TensorSpec(f"{nd.name}:0", dt, shape)
    session = Session(g, threads=threads, **session_kw)
    try:
        bundle = sm.bundle()
        for shared, ckpt_key in variables:
            value = bundle.read(ckpt_key)
            var = session.resources.lookup_or_create(
                ("", shared), lambda v=value, n=shared: ResourceVariable(n, v.dtype, v.shape))
            with var.lock:
                var.value = value
    except BaseException:
        session.close()
        raise
    return LoadedFunction(sm, session, Signature(fn.path, inputs, outputs, "function"))


D_RESOURCE = 20   # DT_RESOURCE


# --- freezing -------------------------------------------------------------------------------

# Ops that pass a resource handle through unchanged: input slot -> output slots. After a
# variable becomes a Const they pass its value instead, so only their type attr changes.
_PASS_THROUGH = {"Identity", "Enter", "Exit", "NextIteration", "Switch", "Merge", "IdentityN"}


def _outputs_of(op: str, in_slot: int) -> list[int]:
    if op == "Switch":
        return [0, 1] if in_slot == 0 else []
    if op == "Merge":
        return [0]
    if op == "IdentityN":
        return [in_slot]
    return [0] if in_slot == 0 else []


_REF_VARIABLES = {"VariableV2", "Variable"}


def inline_variables(graph_def: Any, values: dict[str, np.ndarray],
                     droppable: frozenset[str] | set[str] = frozenset()) -> Any:
    """A copy of ``graph_def`` where each variable node named in ``values`` is a ``Const`` of
    its value (TensorFlow's convert_variables_to_constants_v2 does the same rewrites).

    A ref variable's (VariableV2) readers already take its value, so only a writer of it
    (a ref input: Assign, Scatter*) is an UnimplementedError. For a resource variable
    (VarHandleOp) the handle-passing nodes downstream (Identity, Enter, Switch, Merge, ...)
    carry the value's dtype instead of ``resource``, each ``ReadVariableOp`` of it becomes an
    ``Identity`` and each ``ResourceGather``/``ResourceGatherNd`` a ``GatherV2``/``GatherNd``
    of it. Any other use of such a handle is an UnimplementedError, except that an
    assignment named in ``droppable`` (one only the init op runs: the value it writes is
    already the constant) becomes a ``NoOp`` with the same inputs as control inputs."""
    from dfg.graphdef import dtypes as D
    from dfg.graphdef.errors import UnimplementedError
    from dfg.graphdef.graph import CONTROL_SLOT, parse_input
    from dfg.schemas import graph_pb2

    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    nodes = {nd.name: nd for nd in out.node}
    consumers: dict[tuple[str, int], list[tuple[Any, int]]] = {}
    for nd in out.node:
        for i, s in enumerate(nd.input):
            src, slot = parse_input(s)
            if slot != CONTROL_SLOT:
                consumers.setdefault((src, slot), []).append((nd, i))
    # tensor -> DataType of the variable value it now carries
    carried: dict[tuple[str, int], int] = {}
    work = []
    for name, value in values.items():
        nd = nodes[name]
        ref = nd.op in _REF_VARIABLES
        dt = _to_const(nd, np.asarray(value))
        if ref:
            _no_writer(consumers.get((name, 0), []), name)
            continue
        carried[(name, 0)] = dt
        work.append((name, 0))
    retyped: set[tuple[str, int]] = set()
    while work:
        key = work.pop()
        dt = carried[key]
        for nd, i in consumers.get(key, []):
            if (nd.name, i) in retyped:
                continue
            retyped.add((nd.name, i))
            if nd.op == "ReadVariableOp":
                want = nd.attr["dtype"].type
                if want != dt:
                    raise UnimplementedError(f"reads {D.name(want)} from a variable holding "
                                             f"{D.name(dt)}", node=nd.name, op=nd.op)
                nd.op = "Identity"
                del nd.attr["dtype"]
                nd.attr["T"].type = dt
                continue
            if nd.name in droppable and nd.op in _ASSIGNS:
                nd.op = "NoOp"
                ins = [x if x.startswith("^") else "^" + parse_input(x)[0] for x in nd.input]
                del nd.input[:]
                nd.input.extend(dict.fromkeys(ins))
                for a in list(nd.attr):
                    if not a.startswith("_"):
                        del nd.attr[a]
                continue
            if nd.op in _GATHERS and i == 0:
                _gather_of_value(out, nd, dt)
                continue
            if nd.op not in _PASS_THROUGH:
                raise UnimplementedError(
                    "uses a variable in a way freezing cannot turn into a constant (only "
                    "ReadVariableOp and Identity-like ops can)", node=nd.name, op=nd.op)
            if nd.op == "IdentityN":
                nd.attr["T"].list.type[i] = dt
            else:
                nd.attr["T"].type = dt
            for o in _outputs_of(nd.op, i):
                if (nd.name, o) not in carried:
                    carried[(nd.name, o)] = dt
                    work.append((nd.name, o))
    return out


def _to_const(nd: Any, value: np.ndarray, dt: int | None = None) -> int:
    """Rewrite ``nd`` in place as a Const of ``value``; returns its DataType."""
    from dfg.graphdef import dtypes as D
    from dfg.graphdef.tensors import from_numpy

    dt = D.from_numpy(value.dtype) if dt is None else dt
    nd.op = "Const"
    for a in list(nd.attr):
        del nd.attr[a]
    nd.attr["dtype"].type = dt
    from_numpy(value, dt, nd.attr["value"].tensor)
    return dt


def _no_writer(readers: list[tuple[Any, int]], name: str) -> None:
    """Refuse to freeze a ref variable some node writes (its input there is a ref)."""
    from dfg.graphdef import dtypes as D
    from dfg.graphdef.errors import UnimplementedError
    from dfg.graphdef.opdefs.registry import SignatureError, registry

    reg = registry()
    for nd, i in readers:
        opdef = reg.get(nd.op)
        try:
            types = reg.input_types(nd, opdef) if opdef is not None else []
        except (SignatureError, KeyError):
            types = []
        if i < len(types) and D.is_ref(types[i]):
            raise UnimplementedError(
                f"writes variable '{name}', which freezing turns into a constant",
                node=nd.name, op=nd.op)


_GATHERS = {"ResourceGather": "GatherV2", "ResourceGatherNd": "GatherNd"}
_ASSIGNS = {"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"}


def _gather_of_value(graph_def: Any, nd: Any, dt: int) -> None:
    """Rewrite a ResourceGather(Nd) of a frozen variable in place as GatherV2 (GatherNd)."""
    from dfg.graphdef.graph import parse_input
    from dfg.graphdef.tensors import from_numpy

    batch_dims = nd.attr["batch_dims"].i if "batch_dims" in nd.attr else 0
    tindices = nd.attr["Tindices"].type
    for a in list(nd.attr):
        if not a.startswith("_"):
            del nd.attr[a]
    nd.attr["Tparams"].type = dt
    nd.attr["Tindices"].type = tindices
    if nd.op == "ResourceGather":
        # the axis lives where the handle does (same frame, same deadness)
        src = parse_input(nd.input[0])[0]
        axis = graph_def.node.add(name=f"{nd.name}/axis", op="Const", input=["^" + src])
        axis.attr["dtype"].type = 3  # DT_INT32
        from_numpy(np.asarray(0, np.int32), 3, axis.attr["value"].tensor)
        nd.input.insert(2, axis.name)
        nd.attr["Taxis"].type = 3
        nd.attr["batch_dims"].i = batch_dims
    nd.op = _GATHERS[nd.op]


def freeze(model: LoadedModel, signature: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A self-contained GraphDef computing ``signature``: calls inlined and functional control
    flow lowered (as the Session runs it), pruned to the signature's outputs, variables turned
    into Consts of their restored values, no function library. Inputs stay the signature's
    Placeholders (same names); each output gets an ``Identity`` named after its key (or
    ``<key>_<k>`` if that name is taken). Returns the GraphDef and
    ``{"signature", "inputs": {key: {name, dtype, shape}}, "outputs": {key: {name, ...}}}``
    with the tensor names to feed and fetch in the frozen graph."""
    from dfg.graphdef.prune import prune

    sig = model.signature(signature)
    lowered = model.session.graph          # calls inlined, If/While lowered
    fetches = [s.name for s in sig.outputs.values()]
    feeds = [s.name for s in sig.inputs.values()]
    # Lookup tables are filled by the init op, not by a variable: a signature reading one
    # keeps the initializers, gathered under one NoOp the frozen graph's user runs first
    # (as a TF1 user runs tables_initializer), with asset paths as Consts.
    init_targets: list[str] = []
    # a signature without outputs runs nothing (TensorFlow's session too): its frozen graph
    # is its inputs, as `dfg run` of it succeeds with nothing fetched
    needed = prune(lowered, fetches, feeds) if fetches else prune(
        lowered, [], feeds, targets=[f.split(":")[0] for f in feeds])
    if _reads_tables(needed):
        init_targets = model.saved_model.init_targets()
    pruned = prune(lowered, fetches, feeds, targets=init_targets) if init_targets else needed
    init_only = {nd.name for nd in pruned.node} - {nd.name for nd in needed.node}
    if init_targets:
        _assets_as_consts(pruned, model.saved_model.asset_feeds())
    values = restored_values(model.session, pruned)
    frozen = inline_variables(pruned, values, droppable=init_only)
    from dfg.graphdef.functions import detach_bodies

    detach_bodies(frozen)      # the Session's copies of reducers' bodies: not for the file
    check_frozen(frozen)
    # prune kept only the functions nodes still name (none once calls are inlined, unless
    # an op such as a tf.data map takes a function)
    taken = {nd.name for nd in frozen.node}
    outputs = {}
    for key, spec in sig.outputs.items():
        name, k = key, 0
        while name in taken:
            k += 1
            name = f"{key}_{k}"
        taken.add(name)
        nd = frozen.node.add()
        nd.name, nd.op = name, "Identity"
        nd.input.append(spec.name[:-2] if spec.name.endswith(":0") else spec.name)
        nd.attr["T"].type = spec.dtype
        outputs[key] = {**spec.as_dict(), "name": f"{name}:0", "source": spec.name}
    init = None
    if init_targets:
        init = "init_all_tables"
        while init in taken:
            init += "_"
        nd = frozen.node.add(name=init, op="NoOp")
        nd.input.extend("^" + t for t in init_targets)
    info = {"signature": sig.key,
            "inputs": {k: s.as_dict() for k, s in sig.inputs.items()},
            "outputs": outputs,
            "variables": len(values),
            "constant_bytes": int(sum(np.asarray(v).nbytes for v in values.values()
                                      if np.asarray(v).dtype != object)),
            "nodes": len(frozen.node)}
    if init is not None:
        info["init"] = init
    return frozen, info


# Ops that hold or hand out a variable's state: none may be left in a frozen graph.
VARIABLE_OPS = frozenset({"VarHandleOp", "_VarHandlesOp", "VariableV2", "Variable",
                          "TemporaryVariable", "ReadVariableOp", "ResourceGather",
                          "ResourceGatherNd", "VarIsInitializedOp", "IsVariableInitialized"})


def restored_values(session: Any, graph_def: Any) -> dict[str, np.ndarray]:
    """Variable node -> its value in ``session``, for every variable of ``graph_def`` of any
    kind: resource (VarHandleOp) and ref (VariableV2, Variable: TF1 and Estimator models,
    whose partitioned parts restore as NAME/part_K). A variable without a value is a
    FailedPreconditionError naming it."""
    from dfg.graphdef.errors import FailedPreconditionError

    from .resources import node_resource_key

    values: dict[str, np.ndarray] = {}
    for nd in graph_def.node:
        if nd.op != "VarHandleOp" and nd.op not in _REF_VARIABLES:
            continue
        var = session.resources.lookup(node_resource_key(nd))
        if var is None or getattr(var, "value", None) is None:
            raise FailedPreconditionError("variable has no value after restoring the "
                                          "checkpoint", node=nd.name, op=nd.op)
        values[nd.name] = var.value
    return values


def check_frozen(graph_def: Any) -> None:
    """A FailedPreconditionError naming every node of ``graph_def`` that still holds or reads
    a variable (a frozen graph must have none: it would fail, uninitialized, when run)."""
    from dfg.graphdef.errors import FailedPreconditionError

    left = [nd for nd in graph_def.node if nd.op in VARIABLE_OPS]
    if left:
        shown = ", ".join(f"{nd.name} ({nd.op})" for nd in left[:20])
        more = f" and {len(left) - 20} more" if len(left) > 20 else ""
        raise FailedPreconditionError(
            f"the frozen graph would still hold {len(left)} variable op(s): {shown}{more}; "
            "they were not turned into constants")


_TABLE_OPS = {"HashTableV2", "HashTable", "MutableHashTableV2", "MutableHashTable",
              "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2"}


def _reads_tables(graph_def: Any) -> bool:
    return any(nd.op in _TABLE_OPS for nd in graph_def.node)


def _assets_as_consts(graph_def: Any, assets: dict[str, str]) -> None:
    """Each asset Placeholder becomes a Const string of its file's path."""
    from dfg.graphdef import dtypes as D

    names = {n.split(":")[0]: path for n, path in assets.items()}
    for nd in graph_def.node:
        path = names.get(nd.name)
        if path is not None and nd.op == "Placeholder":
            _to_const(nd, np.array(path.encode(), dtype=object), D.DT_STRING)
