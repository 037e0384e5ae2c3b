"""Write the hostile graphs of tests/test_hostile_kernels.py: tiny GraphDefs whose kernels
would allocate far more memory than their inputs hold (an AsString width of 2e9, a StringJoin
of 100,000 one-megabyte strings, a 535-byte Const of 2^31 floats, outer products made by
broadcasting, Gather and MatMul), or run a regex that backtracks exponentially in a
backtracking engine (RE2 runs it in linear time). Each must fail (or finish) in well under a
second with the node named.

Plain Python and protobuf, no TensorFlow: every op is TensorFlow's and the attrs are the ones
its OpDefs declare. Run from the repository root:

    python tests/data/hostile_kernels/generate.py
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from dfg.schemas import graph_pb2, types_pb2

HERE = Path(__file__).resolve().parent
F32, I32, I64, STR = types_pb2.DT_FLOAT, types_pb2.DT_INT32, types_pb2.DT_INT64, \
    types_pb2.DT_STRING


class G:
    def __init__(self) -> None:
        self.g = graph_pb2.GraphDef()

    def node(self, name: str, op: str, inputs: tuple = (), **attrs) -> str:
        n = self.g.node.add(name=name, op=op)
        n.input.extend(inputs)
        for k, v in attrs.items():
            a = n.attr[k]
            if isinstance(v, bool):
                a.b = v
            elif isinstance(v, int) and k in ("T", "dtype", "Tidx", "Tmultiples", "Tindices",
                                             "Tparams", "Taxis", "index_type", "TI",
                                             "Tshape"):
                a.type = v
            elif isinstance(v, int):
                a.i = v
            elif isinstance(v, str):
                a.s = v.encode()
            elif isinstance(v, list):
                a.list.type.extend(v)
        return name

    def const(self, name: str, dtype: int, shape: tuple, vals: list) -> str:
        n = self.g.node.add(name=name, op="Const")
        n.attr["dtype"].type = dtype
        t = n.attr["value"].tensor
        t.dtype = dtype
        for d in shape:
            t.tensor_shape.dim.add().size = d
        field = {F32: "float_val", I32: "int_val", I64: "int64_val", STR: "string_val"}[dtype]
        getattr(t, field).extend(vals)
        return name


def as_string_width() -> G:
    g = G()
    x = g.const("x", F32, (1000,), [1.5])
    g.node("s", "AsString", (x,), T=F32, width=2_000_000_000)
    return g


def string_join_huge() -> G:
    g = G()
    one = g.const("one", I32, (), [7])
    mb = g.node("mb", "AsString", (one,), T=I32, width=1 << 20)      # one 1 MiB string
    dims = g.const("dims", I32, (1,), [100_000])
    vec = g.node("vec", "Fill", (dims, mb), T=STR, index_type=I32)   # 100k refs to it
    g.node("joined", "StringJoin", (vec, vec), N=2, separator="")
    return g


def const_2g_floats() -> G:
    g = G()
    big = g.const("big", F32, (1 << 31,), [1.0])
    axis = g.const("axis", I32, (1,), [0])
    g.node("total", "Sum", (big, axis), T=F32, Tidx=I32, keep_dims=False)
    return g


def tile_huge() -> G:
    g = G()
    x = g.const("x", F32, (1,), [1.0])
    m = g.const("m", I64, (1,), [1 << 40])
    g.node("tiled", "Tile", (x, m), T=F32, Tmultiples=I64)
    return g


def range_huge() -> G:
    g = G()
    a = g.const("start", I64, (), [0])
    b = g.const("limit", I64, (), [1 << 50])
    d = g.const("delta", I64, (), [1])
    g.node("r", "Range", (a, b, d), Tidx=I64)
    return g


def broadcast_outer() -> G:
    g = G()
    col = g.const("col", F32, (100_000, 1), [1.0])
    row = g.const("row", F32, (1, 100_000), [2.0])
    g.node("outer", "AddV2", (col, row), T=F32)
    return g


def matmul_outer() -> G:
    g = G()
    col = g.const("col", F32, (100_000, 1), [1.0])
    row = g.const("row", F32, (1, 100_000), [2.0])
    g.node("mm", "MatMul", (col, row), T=F32, transpose_a=False, transpose_b=False)
    return g


def gather_outer() -> G:
    g = G()
    params = g.const("params", F32, (1, 1_000_000), [1.0])
    idx = g.const("idx", I32, (1_000_000,), [0])
    axis = g.const("axis", I32, (), [0])
    g.node("gathered", "GatherV2", (params, idx, axis), Tparams=F32, Tindices=I32, Taxis=I32,
           batch_dims=0)
    return g


def regex_redos() -> G:
    """``(a+)+$`` on 41 a's and a '!': 2^41 paths for a backtracking engine."""
    g = G()
    x = g.const("x", STR, (2,), [b"a" * 41 + b"!", b"a" * 41])
    g.node("replaced", "StaticRegexReplace", (x,), pattern="(a+)+$", rewrite="<\\0>",
           replace_global=True)
    g.node("matched", "StaticRegexFullMatch", (x,), pattern="(a+)+")
    pat = g.const("pat", STR, (), [b"(a|aa)+$"])
    rw = g.const("rw", STR, (), [b"-"])
    g.node("dyn", "RegexReplace", (x, pat, rw), replace_global=True)
    return g


def regex_backref() -> G:
    """A backreference: RE2 rejects it (TensorFlow: InvalidArgumentError, Invalid pattern)."""
    g = G()
    x = g.const("x", STR, (1,), [b"aa"])
    g.node("backref", "StaticRegexReplace", (x,), pattern="(a)\\1", rewrite="-",
           replace_global=True)
    return g


CASES = {
    "as_string_width": as_string_width, "string_join_huge": string_join_huge,
    "const_2g_floats": const_2g_floats, "tile_huge": tile_huge, "range_huge": range_huge,
    "broadcast_outer": broadcast_outer, "matmul_outer": matmul_outer,
    "gather_outer": gather_outer, "regex_redos": regex_redos, "regex_backref": regex_backref,
}


def main() -> None:
    for name, make in CASES.items():
        (HERE / f"{name}.pbtxt").write_text(text_format.MessageToString(make().g))


if __name__ == "__main__":
    main()
