"""Read TensorFlow SavedModel directories: MetaGraphDefs, signatures, saver, variables.

A SavedModel directory holds ``saved_model.pb`` (a ``tensorflow.SavedModel``: one
``MetaGraphDef`` per tag set), ``variables/variables.index`` + ``.data-*`` (a checkpoint
bundle, read by :mod:`dfg.graphdef.bundle`) and ``assets/``. A MetaGraphDef carries the
GraphDef with its function library, the SignatureDefs (named entry points: input and output
*keys* mapped to tensor names in the graph), the SaverDef (which op restores the variables from
a checkpoint prefix fed to which tensor) and the object graph (which objects are variables, and
so which checkpoint key holds each variable's value)::

    from dfg.graphdef.savedmodel import SavedModelDir
    sm = SavedModelDir("model_dir")                  # or "model_dir/saved_model.pb"
    sig = sm.signatures["serving_default"]
    sig.inputs["x"].name                             # 'serving_default_x:0'

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import dtypes as D
from .errors import GraphLoadError, NotFoundError
from .tensors import format_shape, shape_from_proto

SAVED_MODEL_PB = "saved_model.pb"
SAVED_MODEL_PBTXT = "saved_model.pbtxt"
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
# TF1 SavedModels' collections (tensorflow/python/saved_model/constants.py, ops.GraphKeys)
MAIN_OP_KEY = "saved_model_main_op"
LEGACY_INIT_OP_KEY = "legacy_init_op"
ASSETS_KEY = "saved_model_assets"
TABLE_INITIALIZERS_KEY = "table_initializer"
LOCAL_VARIABLES_KEY = "local_variables"
DEFAULT_TAGS = ("serve",)
DEFAULT_SIGNATURE = "serving_default"


def saved_model_file(path: str | os.PathLike[str]) -> Path | None:
    """The saved_model.pb(txt) that ``path`` names (the directory or the file), else None."""
    if str(path) == "-":
        return None
    p = Path(path)
    # anything by that name counts (a FIFO or a device too: reading it refuses it, with a
    # message, rather than calling the folder "not a SavedModel")
    if p.is_dir():
        for name in (SAVED_MODEL_PB, SAVED_MODEL_PBTXT):
            if (p / name).exists() and not (p / name).is_dir():
                return p / name
        return None
    if p.name in (SAVED_MODEL_PB, SAVED_MODEL_PBTXT) and p.exists() and not p.is_dir():
        return p
    return None


def is_saved_model(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike)) and saved_model_file(path) is not None


def saved_model_hint(path: Any) -> str | None:
    """The message for a command that wanted a GraphDef but was given a SavedModel."""
    if not is_saved_model(path):
        return None
    folder = saved_model_file(path).parent
    return (f"this is a SavedModel, not a GraphDef: use the directory with "
            f"`dfg info {folder}`, `dfg run {folder} --signature ...` or "
            f"`dfg freeze {folder} -o frozen.pb` (then use frozen.pb here)")


def load_saved_model_proto(path: str | os.PathLike[str]) -> Any:
    """The ``tensorflow.SavedModel`` proto of a directory or its saved_model.pb(txt)."""
    from google.protobuf import message, text_format

    from dfg.schemas import saved_model_pb2

    f = saved_model_file(path)
    if f is None:
        raise GraphLoadError("not a SavedModel: no saved_model.pb here", source=str(path))
    from .files import read_file

    data = read_file(f, what="the SavedModel file")
    sm = saved_model_pb2.SavedModel()
    try:
        if f.name == SAVED_MODEL_PBTXT:
            text_format.Parse(data.decode("utf-8"), sm)
        else:
            sm.ParseFromString(data)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as e:
        raise GraphLoadError(f"not a valid SavedModel ({e})", source=str(f)) from None
    if not sm.meta_graphs:
        raise GraphLoadError("the SavedModel holds no MetaGraphDef", source=str(f))
    return sm


@dataclass(frozen=True)
class TensorSpec:
    """A signature input or output: the graph tensor it is, its dtype and static shape."""

    name: str                          # "serving_default_x:0"
    dtype: int                         # DataType number
    shape: tuple[int | None, ...] | None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": D.name(self.dtype),
                "shape": None if self.shape is None else list(self.shape)}


@dataclass(frozen=True)
class Signature:
    key: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    method_name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "method_name": self.method_name,
                "inputs": {k: v.as_dict() for k, v in self.inputs.items()},
                "outputs": {k: v.as_dict() for k, v in self.outputs.items()}}


# A composite tensor's components, named after the key: what TensorFlow's type spec flattens
# it to (RaggedTensorSpec: flat values, then each level's row splits; SparseTensorSpec:
# indices, values, dense shape), by TypeSpecProto.TypeSpecClass number
_COMPONENT_NAMES = {1: ("indices", "values", "dense_shape"),
                    3: ("flat_values", "row_splits")}


def _component_name(key: str, type_class: int, i: int) -> str:
    names = _COMPONENT_NAMES.get(type_class)
    if names is None:
        return f"{key}.{i}"
    if i < len(names):
        return f"{key}.{names[i]}"
    return f"{key}.{names[-1]}_{i - len(names) + 1}"   # deeper ragged levels


def _tensor_specs(key: str, info: Any) -> dict[str, TensorSpec]:
    """A signature key's tensors: a dense tensor under its key; a composite one (a
    RaggedTensor, a SparseTensor) as its component tensors, each under ``KEY.PART``."""
    kind = info.WhichOneof("encoding")
    if kind == "coo_sparse":
        sp = info.coo_sparse
        return {f"{key}.indices": TensorSpec(sp.indices_tensor_name, D.DT_INT64, None),
                f"{key}.values": TensorSpec(sp.values_tensor_name, int(info.dtype), None),
                f"{key}.dense_shape": TensorSpec(sp.dense_shape_tensor_name, D.DT_INT64,
                                                 None)}
    if kind == "composite_tensor":
        ct = info.composite_tensor
        out: dict[str, TensorSpec] = {}
        for i, comp in enumerate(ct.components):
            name = _component_name(key, int(ct.type_spec.type_spec_class), i)
            out.update(_tensor_specs(name, comp))
        return out
    return {key: TensorSpec(info.name, int(info.dtype), shape_from_proto(info.tensor_shape))}


def signatures_of(meta_graph: Any) -> dict[str, Signature]:
    """The user signatures of a MetaGraphDef (the init-op pseudo signature left out), by key,
    in sorted order; inputs and outputs sorted by key as well."""
    out: dict[str, Signature] = {}
    for key in sorted(meta_graph.signature_def):
        if key == INIT_OP_SIGNATURE_KEY:
            continue
        sd = meta_graph.signature_def[key]
        inputs: dict[str, TensorSpec] = {}
        outputs: dict[str, TensorSpec] = {}
        for k in sorted(sd.inputs):
            inputs.update(_tensor_specs(k, sd.inputs[k]))
        for k in sorted(sd.outputs):
            outputs.update(_tensor_specs(k, sd.outputs[k]))
        out[key] = Signature(key, inputs, outputs, sd.method_name)
    return out


def select_meta_graph(saved_model: Any, tags: Any = None, source: str = "") -> Any:
    """The MetaGraphDef whose tag set equals ``tags`` (default: 'serve', or the only one)."""
    graphs = list(saved_model.meta_graphs)
    available = [sorted(m.meta_info_def.tags) for m in graphs]
    if tags is None:
        if len(graphs) == 1:
            return graphs[0]
        tags = DEFAULT_TAGS
    want = sorted({tags} if isinstance(tags, str) else set(tags))
    for m, t in zip(graphs, available):
        if t == want:
            return m
    raise NotFoundError(f"{source + ': ' if source else ''}no MetaGraphDef with tags "
                        f"{','.join(want)} (available: "
                        f"{'; '.join(','.join(t) or '<none>' for t in available)})")


@dataclass
class SavedVariable:
    """A variable of the object graph and where its value lives in the checkpoint."""

    node_id: int
    name: str
    dtype: int
    shape: tuple[int | None, ...] | None
    trainable: bool
    checkpoint_key: str | None = None
    nbytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": D.name(self.dtype),
                "shape": None if self.shape is None else list(self.shape),
                "trainable": self.trainable, "checkpoint_key": self.checkpoint_key,
                "bytes": self.nbytes}


@dataclass(frozen=True)
class SavedFunction:
    """A concrete function of the object graph, callable by its path (``model.__call__``,
    ``sub.shift``): its user inputs (name, DataType, shape) and outputs (key, DataType,
    shape) in the FunctionDef's order, and the object-graph nodes it captures (variables,
    constants, assets), passed after the inputs."""

    path: str
    concrete: str
    inputs: tuple[tuple[str, int, Any], ...]
    outputs: tuple[tuple[str, int, Any], ...]
    captures: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        def spec(n: str, dt: int, shape: Any, key: str) -> dict[str, Any]:
            return {key: n, "dtype": D.name(dt),
                    "shape": None if shape is None else list(shape)}

        return {"path": self.path, "concrete_function": self.concrete,
                "inputs": [spec(*x, "name") for x in self.inputs],
                "outputs": [spec(*x, "key") for x in self.outputs],
                "captures": len(self.captures)}


def _flatten_structure(sv: Any, path: str = "") -> list[tuple[str, Any]]:
    """(path, TensorSpecProto) of a StructuredValue's tensor specs in TensorFlow's nest order
    (dict keys sorted); other leaves (None, numbers) take no tensor."""
    kind = sv.WhichOneof("kind")
    if kind == "tensor_spec_value":
        return [(path, sv.tensor_spec_value)]
    if kind in ("tuple_value", "list_value"):
        out = []
        for i, v in enumerate(getattr(sv, kind).values):
            out += _flatten_structure(v, f"{path}/{i}" if path else str(i))
        return out
    if kind == "dict_value":
        out = []
        for k in sorted(sv.dict_value.fields):
            out += _flatten_structure(sv.dict_value.fields[k], f"{path}/{k}" if path else k)
        return out
    if kind == "named_tuple_value":
        out = []
        for pair in sv.named_tuple_value.values:
            out += _flatten_structure(pair.value, f"{path}/{pair.key}" if path else pair.key)
        return out
    return []


@dataclass
class SavedModelDir:
    """A SavedModel directory with one MetaGraphDef selected by ``tags``."""

    path: str
    tags: Any = None
    saved_model: Any = field(init=False, repr=False)
    meta_graph: Any = field(init=False, repr=False)
    directory: Path = field(init=False)

    def __post_init__(self) -> None:
        self.saved_model = load_saved_model_proto(self.path)
        self.directory = saved_model_file(self.path).parent
        self.meta_graph = select_meta_graph(self.saved_model, self.tags, str(self.directory))
        self._bundle = None
        self._check_references()

    def _check_references(self) -> None:
        """Every graph name the MetaGraphDef's fields refer to (signature tensors, the
        SaverDef's ops, the init op, asset tensors) names a node of its graph, and every
        signature dtype and shape is one: else the model is corrupt (exit 2), said once,
        naming the field, rather than failing later as a bad fetch."""
        from dfg.schemas import types_pb2

        from .graph import parse_tensor_name

        mg = self.meta_graph
        nodes = {nd.name for nd in mg.graph_def.node}
        dtypes = set(types_pb2.DataType.values())

        def fail(field: str, what: str) -> None:
            raise GraphLoadError(f"corrupt SavedModel: {field} {what}",
                                 source=str(self.directory))

        def node_of(field: str, name: str) -> None:
            try:
                node = parse_tensor_name(name)[0] if name else ""
            except Exception:  # noqa: BLE001 - any unparsable name is the same corruption
                node = ""
            if node.startswith("^"):
                node = node[1:]
            if not node or node not in nodes:
                fail(field, f"names {name!r}, which is no node of the graph")

        def tensor_info(field: str, info: Any) -> None:
            kind = info.WhichOneof("encoding")
            if kind == "name":
                node_of(field + ".name", info.name)
            elif kind == "coo_sparse":
                sp = info.coo_sparse
                for part in ("indices_tensor_name", "values_tensor_name",
                             "dense_shape_tensor_name"):
                    node_of(f"{field}.coo_sparse.{part}", getattr(sp, part))
            elif kind == "composite_tensor":
                for i, comp in enumerate(info.composite_tensor.components):
                    tensor_info(f"{field}.composite_tensor.components[{i}]", comp)
            if info.dtype not in dtypes:
                fail(field + ".dtype", f"is {info.dtype}, not a TensorFlow dtype")
            if any(d.size < -1 for d in info.tensor_shape.dim):
                fail(field + ".tensor_shape", "has a dimension below -1 (unknown)")

        for key in sorted(mg.signature_def):
            sd = mg.signature_def[key]
            for part in ("inputs", "outputs"):
                for k in sorted(getattr(sd, part)):
                    tensor_info(f"signature_def[{key!r}].{part}[{k!r}]", getattr(sd, part)[k])
        if mg.HasField("saver_def"):
            sv = mg.saver_def
            for f in ("restore_op_name", "filename_tensor_name"):
                if getattr(sv, f):
                    node_of(f"saver_def.{f}", getattr(sv, f))
        for i, a in enumerate(mg.asset_file_def):
            if a.tensor_info.name:
                node_of(f"asset_file_def[{i}].tensor_info.name", a.tensor_info.name)

    # --- what the MetaGraphDef holds ------------------------------------------------------
    @property
    def graph_def(self) -> Any:
        return self.meta_graph.graph_def

    @property
    def tag_sets(self) -> list[list[str]]:
        return [sorted(m.meta_info_def.tags) for m in self.saved_model.meta_graphs]

    @property
    def signatures(self) -> dict[str, Signature]:
        return signatures_of(self.meta_graph)

    def signature(self, key: str | None = None) -> Signature:
        sigs = self.signatures
        if key is None:
            if DEFAULT_SIGNATURE in sigs:
                return sigs[DEFAULT_SIGNATURE]
            if len(sigs) == 1:
                return next(iter(sigs.values()))
            key = DEFAULT_SIGNATURE
        if key not in sigs:
            fns = sorted(dict.fromkeys(f.path for f in self.functions()))
            hint = (f"; its object graph has functions {', '.join(fns)}: run one with "
                    "--function PATH") if fns else ""
            raise NotFoundError(f"{self.directory}: no signature '{key}' (available: "
                                f"{', '.join(sigs) or 'none'}){hint}")
        return sigs[key]

    @property
    def saver_def(self) -> Any | None:
        return self.meta_graph.saver_def if self.meta_graph.HasField("saver_def") else None

    @property
    def init_op(self) -> str | None:
        """The node the loader runs after restoring, if any: the ``__saved_model_init_op``
        signature, else a TF1 model's ``saved_model_main_op`` or ``legacy_init_op``
        collection (TensorFlow's ``loader_impl.get_init_op``)."""
        sd = self.meta_graph.signature_def.get(INIT_OP_SIGNATURE_KEY)
        if sd is not None and INIT_OP_SIGNATURE_KEY in sd.outputs:
            name = sd.outputs[INIT_OP_SIGNATURE_KEY].name.split(":")[0]
            if name:
                return name
        for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
            col = self.meta_graph.collection_def.get(key)
            if col is not None and col.node_list.value:
                return col.node_list.value[0].split(":")[0]
        return None

    def init_targets(self) -> list[str]:
        """What to run after restoring: the init op, or else what TensorFlow 2's loader of
        TF1 models runs instead (``Scaffold.default_local_init_op``): every table
        initializer and local variable initializer the graph lists in its collections."""
        init = self.init_op
        if init is not None:
            return [init]
        from dfg.schemas import variable_pb2

        out: list[str] = []
        cols = self.meta_graph.collection_def
        if TABLE_INITIALIZERS_KEY in cols:
            out += [n.split(":")[0] for n in cols[TABLE_INITIALIZERS_KEY].node_list.value]
        if LOCAL_VARIABLES_KEY in cols:
            for raw in cols[LOCAL_VARIABLES_KEY].bytes_list.value:
                vd = variable_pb2.VariableDef()
                vd.ParseFromString(raw)
                if vd.initializer_name:
                    out.append(vd.initializer_name.split(":")[0])
        known = {nd.name for nd in self.graph_def.node}
        return [n for n in dict.fromkeys(out) if n in known]

    def asset_feeds(self) -> dict[str, str]:
        """Asset tensor name -> the asset file's path under ``assets/`` (the loader feeds
        them when it runs the init op), from ``asset_file_def`` or, in older TF1 models,
        the ``saved_model_assets`` collection."""
        from dfg.schemas import meta_graph_pb2

        protos = list(self.meta_graph.asset_file_def)
        col = self.meta_graph.collection_def.get(ASSETS_KEY)
        if not protos and col is not None:
            for any_ in col.any_list.value:
                a = meta_graph_pb2.AssetFileDef()
                any_.Unpack(a)
                protos.append(a)
        out = {}
        for a in protos:
            if a.tensor_info.name:
                out[a.tensor_info.name] = self._asset_path(a.filename)
        return out

    def _asset_path(self, filename: str) -> str:
        """The path of an asset, which must lie inside ``assets/`` (or ``assets.extra/``)
        once symlinks and ``..`` are resolved: an absolute name, ``../../etc/passwd`` or a
        link out of the folder is a corrupt model (exit 2), never read nor written into a
        frozen graph."""
        from .files import inside

        path = self.directory / "assets" / filename
        real = os.path.realpath(path) if "\0" not in filename else ""
        ok = bool(real) and not os.path.isabs(filename) and any(
            inside(real, folder) and real != os.path.realpath(folder)
            for folder in (self.directory / "assets", self.directory / "assets.extra"))
        if not ok:
            raise GraphLoadError(f"corrupt SavedModel: asset_file_def filename {filename!r} "
                                 "is not a file inside its assets/ folder",
                                 source=str(self.directory))
        return str(path)

    # --- variables ------------------------------------------------------------------------
    @property
    def variables_prefix(self) -> str | None:
        """The checkpoint prefix of the variables (None when the model has none)."""
        prefix = self.directory / "variables" / "variables"
        # anything there but a folder (a FIFO too: reading it refuses it, exit 2)
        index = Path(str(prefix) + ".index")
        return str(prefix) if index.exists() and not index.is_dir() else None

    def bundle(self) -> Any:
        from .bundle import BundleReader

        if self._bundle is None and self.variables_prefix is not None:
            self._bundle = BundleReader(self.variables_prefix)
        return self._bundle

    def variables(self) -> list[SavedVariable]:
        """The object graph's variables, with their checkpoint keys (the checkpoint's own
        object graph lists the same objects in the same order)."""
        import numpy as np

        if not self.meta_graph.HasField("object_graph_def"):
            return self._graph_variables()
        bundle = self.bundle()
        ckpt_graph = bundle.object_graph() if bundle is not None else None
        out = []
        for i, obj in enumerate(self.meta_graph.object_graph_def.nodes):
            if obj.WhichOneof("kind") != "variable":
                continue
            v = obj.variable
            var = SavedVariable(i, v.name, int(v.dtype), shape_from_proto(v.shape), v.trainable)
            if ckpt_graph is not None and i < len(ckpt_graph.nodes):
                for attr in ckpt_graph.nodes[i].attributes:
                    if attr.name == "VARIABLE_VALUE":
                        var.checkpoint_key = attr.checkpoint_key
            if var.checkpoint_key and var.checkpoint_key in bundle:
                var.nbytes = int(bundle.entry(var.checkpoint_key).size)
            elif var.shape is not None and None not in var.shape and D.is_numpy_compatible(
                    var.dtype) and D.base(var.dtype) != D.DT_STRING:
                var.nbytes = int(np.prod(var.shape, dtype=np.int64)) * D.to_numpy(
                    var.dtype).itemsize
            out.append(var)
        return out


    def functions(self) -> list[SavedFunction]:
        """The object graph's concrete functions, by path from the root object (children's
        names joined with dots; the signatures' wrappers left out, `signatures` lists
        those), each traced function's concrete functions in order."""
        if not self.meta_graph.HasField("object_graph_def"):
            return []
        og = self.meta_graph.object_graph_def
        lib = {f.signature.name: f for f in self.graph_def.library.function}
        out: list[SavedFunction] = []
        seen = {0}
        queue = [(0, "")]
        while queue:
            nid, path = queue.pop(0)
            node = og.nodes[nid]
            for child in node.children:
                if child.node_id in seen or child.local_name == "signatures" and nid == 0:
                    continue
                seen.add(child.node_id)
                queue.append((child.node_id, f"{path}.{child.local_name}" if path
                              else child.local_name))
            if node.WhichOneof("kind") != "function":
                continue
            for name in node.function.concrete_functions:
                cf = og.concrete_functions.get(name)
                fdef = lib.get(name)
                if cf is None or fdef is None:
                    continue
                n_user = len(fdef.signature.input_arg) - len(cf.bound_inputs)
                specs = _flatten_structure(cf.canonicalized_input_signature)
                ins = []
                for i, arg in enumerate(fdef.signature.input_arg[:max(n_user, 0)]):
                    sp = specs[i][1] if i < len(specs) else None
                    nm = (sp.name if sp is not None and sp.name else arg.name)
                    ins.append((nm, int(arg.type), shape_from_proto(sp.shape)
                                if sp is not None else None))
                outs_spec = _flatten_structure(cf.output_signature)
                outs = []
                for j, arg in enumerate(fdef.signature.output_arg):
                    key, sp = outs_spec[j] if j < len(outs_spec) else (f"output_{j}", None)
                    if not key or key.isdigit():
                        key = f"output_{j}"
                    outs.append((key.replace("/", "_"), int(arg.type),
                                 shape_from_proto(sp.shape) if sp is not None else None))
                out.append(SavedFunction(path, name, tuple(ins), tuple(outs),
                                         tuple(cf.bound_inputs)))
        return out

    def function(self, path: str) -> SavedFunction:
        """The concrete function at ``path`` (``PATH#K``: its K-th concrete function; the
        first by default)."""
        base, _, k = path.partition("#")
        found = [f for f in self.functions() if f.path == base]
        if not found:
            have = sorted(dict.fromkeys(f.path for f in self.functions()))
            raise NotFoundError(f"{self.directory}: no function '{base}' in the object graph "
                                f"(functions: {', '.join(have) or 'none'})")
        if k:
            if not k.isdigit() or int(k) >= len(found):
                raise NotFoundError(f"{self.directory}: function '{base}' has {len(found)} "
                                    f"concrete function(s), no #{k}")
            return found[int(k)]
        return found[0]

    def _graph_variables(self) -> list[SavedVariable]:
        """A TF1 SavedModel's variables (it has no object graph): the graph's variable nodes
        of every kind (VariableV2 and Variable, as TF1 and Estimators make them, and
        VarHandleOp), each part of a partitioned variable on its own, with the checkpoint key
        holding its value (a part's: the whole variable's name, from its save_slice_info in
        the MetaGraphDef's variable collections) and its size."""
        import numpy as np

        from dfg.schemas import variable_pb2

        full_names: dict[str, str] = {}
        trainable: set[str] = set()
        for key, col in self.meta_graph.collection_def.items():
            if col.WhichOneof("kind") != "bytes_list":
                continue
            for raw in col.bytes_list.value:
                vd = variable_pb2.VariableDef()
                try:
                    vd.ParseFromString(raw)
                except Exception:   # noqa: BLE001 - a collection of something else
                    break
                name = vd.variable_name.split(":")[0]
                if vd.save_slice_info_def.full_name:
                    full_names[name] = vd.save_slice_info_def.full_name
                if key == "trainable_variables" or vd.trainable:
                    trainable.add(name)
        bundle = self.bundle()
        out = []
        for i, nd in enumerate(self.graph_def.node):
            if nd.op not in ("VariableV2", "Variable", "VarHandleOp"):
                continue
            dt = nd.attr["dtype"].type if "dtype" in nd.attr else 0
            shape = shape_from_proto(nd.attr["shape"].shape) if "shape" in nd.attr else None
            var = SavedVariable(i, nd.name, int(dt), shape, nd.name in trainable)
            key = full_names.get(nd.name, nd.name)
            if bundle is not None and key in bundle:
                var.checkpoint_key = key
            if shape is not None and None not in shape and D.is_numpy_compatible(dt) \
                    and D.base(dt) != D.DT_STRING:
                var.nbytes = int(np.prod(shape, dtype=np.int64)) * D.to_numpy(dt).itemsize
            out.append(var)
        return out


def describe(path: str | os.PathLike[str], tags: Any = None) -> dict[str, Any]:
    """What ``dfg info DIR --json`` prints: a stable, JSON-ready summary of a SavedModel.

    Keys: path, kind ("saved_model"), tag_sets, tags (of the MetaGraphDef described),
    tensorflow_version, signatures{key: {key, method_name, inputs{key: {name, dtype, shape}},
    outputs{...}}}, variables{count, bytes, items[{name, dtype, shape, trainable,
    checkpoint_key, bytes}]}, checkpoint{prefix, keys, shards, bytes} (null without
    variables), graph{nodes, functions, function_nodes, op_types{op: count}} (top-level graph
    and library), saver{filename_tensor, restore_op, save_tensor} (null without a SaverDef),
    init_op, assets[filename], functions[{path, concrete_function, inputs[{name, dtype,
    shape}], outputs[{key, dtype, shape}], captures}] (the object graph's concrete functions,
    callable with ``dfg run DIR --function PATH``).
    """
    from collections import Counter

    sm = SavedModelDir(str(path), tags)
    mg = sm.meta_graph
    gd = mg.graph_def
    ops = Counter(n.op for n in gd.node)
    for fn in gd.library.function:
        ops.update(n.op for n in fn.node_def)
    variables = sm.variables()
    bundle = sm.bundle()
    saver = sm.saver_def
    return {
        "path": str(sm.directory),
        "kind": "saved_model",
        "tag_sets": sm.tag_sets,
        "tags": sorted(mg.meta_info_def.tags),
        "tensorflow_version": mg.meta_info_def.tensorflow_version or None,
        "signatures": {k: s.as_dict() for k, s in sm.signatures.items()},
        "variables": {"count": len(variables),
                      "bytes": sum(v.nbytes or 0 for v in variables),
                      "items": [v.as_dict() for v in variables]},
        "checkpoint": None if bundle is None else {
            "prefix": bundle.prefix, "keys": len(bundle.keys()),
            "shards": int(bundle.header.num_shards), "bytes": bundle.num_bytes()},
        "graph": {"nodes": len(gd.node), "functions": len(gd.library.function),
                  "function_nodes": sum(len(f.node_def) for f in gd.library.function),
                  "op_types": dict(sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))},
        "saver": None if saver is None else {
            "filename_tensor": saver.filename_tensor_name,
            "restore_op": saver.restore_op_name, "save_tensor": saver.save_tensor_name},
        "init_op": sm.init_op,
        "assets": sorted(a.filename for a in mg.asset_file_def),
        "functions": [f.as_dict() for f in sm.functions()],
    }


def format_spec(spec: TensorSpec) -> str:
    return f"{D.name(spec.dtype)} {format_shape(spec.shape)}"
