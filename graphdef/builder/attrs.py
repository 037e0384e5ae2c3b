"""Plain Python values -> AttrValue protos, typed by the OpDef's attr declarations."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import tensors
from ..errors import InvalidArgumentError
from ..opdefs.registry import registry


def _dtype(v: Any) -> int:
    """A DataType number from a number, a name ("float32", "DT_FLOAT") or a numpy dtype, as
    the builder's placeholder and constant take dtypes."""
    from .. import dtypes as D

    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, str):
        try:
            return D.from_name(v)
        except ValueError as e:
            raise InvalidArgumentError(str(e)) from None
    return D.from_numpy(v)


def to_attr_value(value: Any, typ: str) -> Any:
    """``typ`` is an OpDef attr type: int, float, bool, string, type, shape, tensor, func
    or list(...) of one of them."""
    from dfg.schemas import attr_value_pb2
    av = attr_value_pb2.AttrValue()
    if isinstance(value, attr_value_pb2.AttrValue):
        return value
    if typ.startswith("list("):
        inner = typ[5:-1]
        lv = av.list
        lv.SetInParent()
        for v in value:
            if inner == "int":
                lv.i.append(int(v))
            elif inner == "float":
                lv.f.append(float(v))
            elif inner == "bool":
                lv.b.append(bool(v))
            elif inner == "string":
                lv.s.append(v if isinstance(v, bytes) else str(v).encode())
            elif inner == "type":
                lv.type.append(_dtype(v))
            elif inner == "shape":
                sp = lv.shape.add()
                sp.SetInParent()
                tensors.shape_to_proto(v, sp)
            elif inner == "tensor":
                tensors.from_numpy(np.asarray(v), proto=lv.tensor.add())
            elif inner == "func":
                lv.func.add().name = v
            else:
                raise InvalidArgumentError(f"unknown attr type {typ}")
        return av
    if typ == "int":
        av.i = int(value)
    elif typ == "float":
        av.f = float(value)
    elif typ == "bool":
        av.b = bool(value)
    elif typ == "string":
        av.s = value if isinstance(value, bytes) else str(value).encode()
    elif typ == "type":
        av.type = _dtype(value)
    elif typ == "shape":
        av.shape.SetInParent()   # a scalar shape is an empty but present TensorShapeProto
        tensors.shape_to_proto(None if value is None else tuple(value), av.shape)
    elif typ == "tensor":
        if hasattr(value, "dtype") and hasattr(value, "tensor_shape"):
            av.tensor.CopyFrom(value)
        else:
            tensors.from_numpy(np.asarray(value), proto=av.tensor)
    elif typ == "func":
        av.func.name = value
    else:
        raise InvalidArgumentError(f"unknown attr type {typ}")
    return av


def to_attr_values(op_type: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """Convert each attr with the type its OpDef declares; attrs the OpDef does not declare
    (``_class`` ...) must already be AttrValues or strings lists."""
    defs = registry().attr_defs(op_type)
    out = {}
    for k, v in attrs.items():
        ad = defs.get(k)
        if ad is None:
            if k.startswith("_"):
                out[k] = to_attr_value(v, "list(string)" if isinstance(v, list) else "bool")
                continue
            raise InvalidArgumentError(f"op {op_type} has no attr '{k}'", op=op_type)
        out[k] = to_attr_value(v, ad.type)
    return out
