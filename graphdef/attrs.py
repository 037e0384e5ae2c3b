"""AttrValue <-> plain Python values.

``to_python`` gives what tools and kernels want: ints, floats, bools, ``str`` for ``s``
(bytes if it is not UTF-8), DataType numbers (or numpy dtypes with ``numpy_types``), shapes as
tuples (None for unknown), tensors as numpy arrays, lists of those, function names.
"""

from __future__ import annotations

from typing import Any

from . import dtypes as D
from . import tensors


def _s(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


class FuncRef(str):
    """A func attr's function name that also carries the function's body: ``library`` is a
    serialized FunctionDefLibrary holding it and what it calls (functions.attach_bodies puts
    it there for ops that apply a function inside their kernel, XLA's reducers say)."""

    library: bytes | None = None


def _func(f: Any) -> str:
    from .functions import BODY_KEY

    if BODY_KEY not in f.attr:
        return f.name
    ref = FuncRef(f.name)
    ref.library = f.attr[BODY_KEY].s
    return ref


def to_python(av: Any, numpy_types: bool = False) -> Any:
    kind = av.WhichOneof("value")
    if kind is None:
        return None
    if kind == "s":
        return _s(av.s)
    if kind in ("i", "f", "b"):
        return getattr(av, kind)
    if kind == "type":
        return _type(av.type, numpy_types)
    if kind == "shape":
        return tensors.shape_from_proto(av.shape)
    if kind == "tensor":
        return tensors.to_numpy(av.tensor)
    if kind == "func":
        return _func(av.func)
    if kind == "placeholder":
        return av.placeholder
    lv = av.list
    for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
        vals = getattr(lv, field)
        if len(vals):
            if field == "s":
                return [_s(x) for x in vals]
            if field == "type":
                return [_type(t, numpy_types) for t in vals]
            if field == "shape":
                return [tensors.shape_from_proto(s) for s in vals]
            if field == "tensor":
                return [tensors.to_numpy(t) for t in vals]
            if field == "func":
                return [_func(f) for f in vals]
            return list(vals)
    return []


def _type(t: int, numpy_types: bool) -> Any:
    if numpy_types and D.is_numpy_compatible(t):
        return D.to_numpy(t)
    return t


def kind_of(av: Any) -> str:
    """The OpDef attr type string this value has: "int", "list(type)", ... ("list" if empty)."""
    kind = av.WhichOneof("value")
    names = {"s": "string", "i": "int", "f": "float", "b": "bool", "type": "type",
             "shape": "shape", "tensor": "tensor", "func": "func", "placeholder": "placeholder"}
    if kind != "list":
        return names.get(kind, "none")
    lv = av.list
    for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
        if len(getattr(lv, field)):
            return f"list({names[field]})"
    return "list"
