"""Write the hostile inputs of tests/test_hostile_io.py: tiny files that once crashed dfg,
hung it, made it print pages or accept what it should refuse.

Plain Python and protobuf, no TensorFlow (the other formats' headers are written by hand from
their specifications: ONNX's ModelProto field numbers, TFLite's "TFL3" file identifier at
bytes 4..8, HDF5's signature, zip's local file header). Run from the repository root:

    python tests/data/hostile/generate.py
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from google.protobuf import text_format

from dfg.schemas import graph_pb2, saved_model_pb2, types_pb2

HERE = Path(__file__).resolve().parent


def nested_pbtxt(levels: int) -> str:
    """A NoOp whose attr nests function attrs about ``levels`` braces deep (every brace is
    one more message: node, attr map entry, AttrValue, NameAttrList ...)."""
    opening = ['node {\n  name: "deep"\n  op: "NoOp"\n']
    depth = 1  # inside node
    while depth < levels:
        opening.append('attr { key: "f" value { func { name: "g"\n')
        depth += 3
    return "".join(opening) + "}" * (depth - 1) + "\n}\n"


def nested_graphdef(funcs: int) -> graph_pb2.GraphDef:
    g = graph_pb2.GraphDef()
    n = g.node.add(name="deep", op="NoOp")
    v = n.attr["f"]
    for i in range(funcs):
        v.func.name = f"f{i}"
        v = v.func.attr["x"]
    v.i = 1
    return g


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def onnx_model() -> bytes:
    """An ONNX ModelProto: ir_version 8, producer_name, a graph with one Identity node,
    opset_import {domain "", version 17}."""
    node = field(1, b"x") + field(2, b"y") + field(3, b"id") + field(4, b"Identity")
    graph = field(1, node) + field(2, b"g")
    opset = field(1, b"") + varint(2 << 3) + varint(17)
    return (varint(1 << 3) + varint(8) + field(2, b"pytorch") + field(3, b"2.1")
            + field(7, graph) + field(8, opset))


def saved_model() -> bytes:
    sm = saved_model_pb2.SavedModel(saved_model_schema_version=1)
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    mg.graph_def.node.add(name="x", op="Placeholder").attr["dtype"].type = types_pb2.DT_FLOAT
    return sm.SerializeToString()


def control_names() -> graph_pb2.GraphDef:
    """Names with ESC, BEL, XML entities, quotes, braces and a newline: escaping bait."""
    g = graph_pb2.GraphDef()
    x = g.node.add(name="x\x1b[31mred\x07", op="Placeholder")
    x.attr["dtype"].type = types_pb2.DT_FLOAT
    prev = x.name
    for name in ("&name;", "<title>\"q\"</title>", "a{b}|c", "new\nline", "tab\there",
                 "del\x7f", "nul\x00byte"):
        n = g.node.add(name=name, op="Identity", input=[prev])
        n.attr["T"].type = types_pb2.DT_FLOAT
        prev = name
    return g


def huge_shape_const() -> graph_pb2.GraphDef:
    """A Const of shape [2**40, 2**40]: 2**80 elements, past int64."""
    g = graph_pb2.GraphDef()
    c = g.node.add(name="huge", op="Const")
    c.attr["dtype"].type = types_pb2.DT_FLOAT
    t = c.attr["value"].tensor
    t.dtype = types_pb2.DT_FLOAT
    for _ in range(2):
        t.tensor_shape.dim.add().size = 2 ** 40
    t.float_val.append(1.0)
    n = g.node.add(name="y", op="Identity", input=["huge"])
    n.attr["T"].type = types_pb2.DT_FLOAT
    return g


def zip_archive() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in (("config.json", '{"class_name": "Sequential"}'),
                           ("metadata.json", '{"keras_version": "3.0.0"}')):
            # a fixed date: the same bytes on every run
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), text)
    return buf.getvalue()


def main() -> None:
    files: dict[str, bytes] = {
        "empty.pb": b"",
        "whitespace.pbtxt": b"  \n\n",
        "nested_120.pbtxt": nested_pbtxt(120).encode(),
        "nested_40_funcs.pb": nested_graphdef(40).SerializeToString(),
        "fake_savedmodel.pb": saved_model(),
        "fake_onnx.pb": onnx_model(),
        "tiny.onnx": onnx_model(),
        "fake.tflite": b"\x1c\x00\x00\x00TFL3" + bytes(24),
        "fake_keras.h5": b"\x89HDF\r\n\x1a\n" + bytes(24),
        "fake.keras": zip_archive(),
        "control_names.pbtxt": text_format.MessageToString(control_names()).encode(),
        "huge_shape_const.pbtxt": text_format.MessageToString(huge_shape_const()).encode(),
        # a parse error whose offending token is one 20,000-character line
        "giant_line.pbtxt": b'node { name: "a" op: "NoOp" }\nnode ' + b"x" * 20_000 + b"\n",
    }
    for name, data in files.items():
        (HERE / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
