"""The one OpDef registry: TensorFlow's 1908 OpDefs plus dfg's additions.

It answers what a node's signature is once its attrs are known: how many inputs and outputs it
has (``number_attr``, ``type_list_attr``), their DataTypes (ref types as ``DT_*_REF``), attr
defaults and allowed values, and fills defaults into a NodeDef.

Loading parses a binary OpList shipped in the package (compiled from the .pbtxt source, see
NOTICE); it happens on first use only, so commands that need no OpDefs do not pay for it.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from .. import dtypes as D

HERE = Path(__file__).resolve().parent
TF_PBTXT = HERE / "tensorflow_op_defs.pbtxt"
TF_PB = HERE / "tensorflow_op_defs.pb"
OURS_PBTXT = HERE / "dfg_op_defs.pbtxt"


class SignatureError(ValueError):
    """A node's attrs do not determine its signature (missing or ill-typed attr)."""


class OpRegistry:
    def __init__(self, ops: list[Any]) -> None:
        self._ops: dict[str, Any] = {op.name: op for op in ops}
        self._attr_defs: dict[str, dict[str, Any]] = {}

    def __contains__(self, op: str) -> bool:
        return op in self._ops

    def __len__(self) -> int:
        return len(self._ops)

    def names(self) -> list[str]:
        return sorted(self._ops)

    def get(self, op: str) -> Any | None:
        return self._ops.get(op)

    def register(self, opdef: Any) -> None:
        """Add (or replace) an OpDef: the one place an op's signature is declared."""
        self._ops[opdef.name] = opdef
        self._attr_defs.pop(opdef.name, None)

    def attr_defs(self, op: str) -> dict[str, Any]:
        """Attr name -> OpDef.AttrDef for ``op`` (cached)."""
        d = self._attr_defs.get(op)
        if d is None:
            opdef = self._ops[op]
            d = self._attr_defs[op] = {a.name: a for a in opdef.attr}
        return d

    # --- signatures ---------------------------------------------------------------------
    def _attr(self, opdef: Any, attrs: Any, name: str) -> Any:
        if name in attrs:
            return attrs[name]
        ad = self.attr_defs(opdef.name).get(name)
        if ad is not None and ad.HasField("default_value"):
            return ad.default_value
        raise SignatureError(f"missing attr '{name}'")

    def arg_types(self, opdef: Any, args: Any, attrs: Any) -> list[int]:
        """DataTypes of the flattened args (input_arg or output_arg) given a NodeDef's attrs."""
        out: list[int] = []
        for arg in args:
            if arg.type_list_attr:
                av = self._attr(opdef, attrs, arg.type_list_attr)
                if av.WhichOneof("value") not in ("list", None):
                    raise SignatureError(
                        f"attr '{arg.type_list_attr}' must be a list of types")
                types = list(av.list.type)
            else:
                if arg.type:
                    t = arg.type
                else:
                    av = self._attr(opdef, attrs, arg.type_attr)
                    if av.WhichOneof("value") != "type":
                        raise SignatureError(
                            f"attr '{arg.type_attr}' must be a type, found "
                            f"{av.WhichOneof('value') or 'nothing'}")
                    t = av.type
                n = 1
                if arg.number_attr:
                    av = self._attr(opdef, attrs, arg.number_attr)
                    if av.WhichOneof("value") != "i":
                        raise SignatureError(f"attr '{arg.number_attr}' must be an int")
                    n = av.i
                    if n < 0:
                        raise SignatureError(f"attr '{arg.number_attr}' is negative ({n})")
                types = [t] * n
            if arg.is_ref:
                types = [D.as_ref(t) for t in types]
            out.extend(types)
        return out

    def input_types(self, node_def: Any, opdef: Any | None = None) -> list[int]:
        opdef = opdef or self._ops[node_def.op]
        return self.arg_types(opdef, opdef.input_arg, node_def.attr)

    def output_types(self, node_def: Any, opdef: Any | None = None) -> list[int]:
        opdef = opdef or self._ops[node_def.op]
        return self.arg_types(opdef, opdef.output_arg, node_def.attr)

    def num_outputs(self, node_def: Any) -> int:
        return len(self.output_types(node_def))

    def allowed_values(self, op: str, attr: str) -> Any | None:
        ad = self.attr_defs(op).get(attr)
        if ad is None or not ad.HasField("allowed_values"):
            return None
        return ad.allowed_values

    def default(self, op: str, attr: str) -> Any | None:
        ad = self.attr_defs(op).get(attr)
        if ad is None or not ad.HasField("default_value"):
            return None
        return ad.default_value

    def fill_defaults(self, node_def: Any) -> Any:
        """Add every attr the OpDef defaults and the NodeDef leaves out (in place)."""
        opdef = self._ops.get(node_def.op)
        if opdef is None:
            return node_def
        for ad in opdef.attr:
            if ad.name not in node_def.attr and ad.HasField("default_value"):
                node_def.attr[ad.name].CopyFrom(ad.default_value)
        return node_def


_lock = threading.Lock()
_registry: OpRegistry | None = None  # guarded by _lock while being built


def _load_oplist() -> list[Any]:
    from google.protobuf import text_format

    from dfg.schemas import op_def_pb2

    tf_ops = op_def_pb2.OpList()
    if TF_PB.exists():
        tf_ops.ParseFromString(TF_PB.read_bytes())
    else:  # source checkout without the compiled list: slower, same result
        text_format.Parse(TF_PBTXT.read_text(), tf_ops)
    ours = op_def_pb2.OpList()
    text_format.Parse(OURS_PBTXT.read_text(), ours)
    return list(tf_ops.op) + list(ours.op)


def registry() -> OpRegistry:
    """The process-wide registry, loaded on first use."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                _registry = OpRegistry(_load_oplist())
    return _registry


def compile_pbtxt() -> bytes:
    from google.protobuf import text_format

    from dfg.schemas import op_def_pb2

    ops = op_def_pb2.OpList()
    text_format.Parse(TF_PBTXT.read_text(), ops)
    return ops.SerializeToString(deterministic=True)


if __name__ == "__main__":
    if "--compile" in sys.argv:
        TF_PB.write_bytes(compile_pbtxt())
        print(f"wrote {TF_PB}")
    elif "--check" in sys.argv:
        sys.exit(0 if TF_PB.read_bytes() == compile_pbtxt() else 1)
