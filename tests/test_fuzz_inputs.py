"""Damaged inputs never escape as a Python traceback: loading, validating, pruning, drawing
and planning a run of randomly corrupted TensorFlow graphs either work or raise one error of
dfg's hierarchy (what the CLI turns into one line and exit code 1 or 2)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.graphdef.errors import DfgError
from dfg.graphdef.io import load_graph
from dfg.graphdef.prune import prune
from dfg.graphdef.validate import validate
from dfg.graphdef.viz import to_dot

DATA = Path(__file__).resolve().parent / "data" / "conformance"
SOURCES = sorted(p for p in DATA.glob("*/graph.pb") if p.stat().st_size < 40_000) + \
    sorted(p for p in DATA.glob("*/graph.pbtxt") if p.stat().st_size < 80_000)


def mutate(data: bytes, rng: random.Random, text: bool) -> bytes:
    if text and rng.random() < 0.6:
        # structural damage that still parses: lines dropped, duplicated or swapped
        lines = data.split(b"\n")
        for _ in range(rng.randint(1, 6)):
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            op = rng.choice(["drop", "dup", "swap"])
            if op == "drop":
                del lines[i]
            elif op == "dup":
                lines.insert(i, lines[j])
            else:
                lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    b = bytearray(data)
    kind = rng.choice(["flip", "truncate", "splice", "zero"])
    if kind == "truncate":
        return bytes(b[:rng.randrange(len(b))])
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(b))
        if kind == "flip":
            b[i] ^= 1 << rng.randrange(8)
        elif kind == "zero":
            b[i] = 0
        else:
            j = rng.randrange(len(b))
            n = rng.randint(1, 16)
            b[i:i + n] = b[j:j + n]
    return bytes(b)


OPS = ["Add", "AddV2", "Mul", "Identity", "Switch", "Merge", "Enter", "Exit", "NextIteration",
       "Const", "Placeholder", "Cast", "Reshape", "MatMul", "Sum", "NoOp", "Assign", "Pack"]
DTYPES = [1, 2, 3, 9, 10, 7, 101]   # float, double, int32, int64, bool, string, float_ref


def mutate_proto(data: bytes, rng: random.Random) -> bytes:
    """Semantic damage: the file parses, the graph is wrong (names, edges, ops, attrs)."""
    gd = load_graph(data).graph_def
    nodes = gd.node
    for _ in range(rng.randint(1, 4)):
        if not nodes:
            break
        nd = rng.choice(nodes)
        op = rng.choice(["del_node", "rewire", "slot", "op", "del_attr", "dtype", "control",
                         "rename", "frame"])
        if op == "del_node":
            nodes.remove(nd)
        elif op == "rewire" and nd.input:
            k = rng.randrange(len(nd.input))
            nd.input[k] = rng.choice(nodes).name
        elif op == "slot" and nd.input:
            k = rng.randrange(len(nd.input))
            nd.input[k] = nd.input[k].lstrip("^").split(":")[0] + f":{rng.randint(0, 3)}"
        elif op == "op":
            nd.op = rng.choice(OPS)
        elif op == "del_attr" and nd.attr:
            del nd.attr[rng.choice(sorted(nd.attr))]
        elif op == "dtype":
            for key in ("T", "dtype"):
                if key in nd.attr:
                    nd.attr[key].type = rng.choice(DTYPES)
        elif op == "control":
            nd.input.append("^" + rng.choice(nodes).name)
        elif op == "rename":
            nd.name = rng.choice(nodes).name
        elif op == "frame" and "frame_name" in nd.attr:
            nd.attr["frame_name"].s = b"other"
    return gd.SerializeToString()


# FUZZ_N=20000 python -m pytest tests/test_fuzz_inputs.py for a longer hunt
@pytest.mark.parametrize("seed", range(int(os.environ.get("FUZZ_N", 600))))
def test_corrupted_graph_is_handled_or_a_dfg_error(seed: int) -> None:
    rng = random.Random(seed)
    src = SOURCES[seed % len(SOURCES)]
    if seed % 2:
        data = mutate_proto(src.read_bytes(), rng)
    else:
        data = mutate(src.read_bytes(), rng, src.suffix == ".pbtxt")
    try:
        g = load_graph(data)
    except DfgError:
        return
    diags = validate(g)                     # diagnostics, never an exception
    assert all(d.code for d in diags)
    to_dot(g)
    names = [n.name for n in g.nodes]
    if not names:
        return
    try:
        prune(g, [rng.choice(names)])
    except DfgError:
        pass
    if any(d.is_error for d in diags):
        with pytest.raises(DfgError):
            Session(g, threads=1)
        return
    # a valid mutant: planning a run of any node fails, if at all, with one of our errors
    with Session(g, threads=1) as sess:
        try:
            sess.run([], targets=[rng.choice(names)], timeout=2.0)
        except DfgError:
            pass
        except (FloatingPointError, np.exceptions.AxisError) as e:  # pragma: no cover
            raise AssertionError(f"raw {type(e).__name__}") from e
