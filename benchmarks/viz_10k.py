"""Benchmark ``dfg viz`` on a 10,000-node graph: DOT generation and ``dot -Tsvg`` time.

The graph imitates a deep model: 100 name scopes (``block_000`` ... ``block_099``) of 100
nodes each. Inside a scope, dense layers are chained (Const weights -> MatMul -> BiasAdd ->
Relu ...), closing with an Add of the block input (a residual connection) and a control
dependency on a NoOp; blocks feed each other in order, each block also mixes in (AddN) one to
four layers of earlier blocks, and some residuals skip several blocks: the cross-scope edges
(seeded, so every run draws the same graph). Default viz options unless --collapse.

    python benchmarks/viz_10k.py [--scopes 100] [--ops 100] [--collapse auto] [--keep OUT.svg]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from dfg.graphdef.graph import Graph
from dfg.graphdef.viz import build_view, render, to_dot
from dfg.schemas import graph_pb2, types_pb2

FLOAT = types_pb2.DT_FLOAT
WIDTH = 64


def _const(g, name: str, shape: tuple[int, ...]) -> None:
    n = g.node.add(name=name, op="Const")
    n.attr["dtype"].type = FLOAT
    t = n.attr["value"].tensor
    t.dtype = FLOAT
    for d in shape:
        t.tensor_shape.dim.add().size = d
    t.float_val.append(0.5)  # one value, repeated: the bytes do not matter here


def _op(g, name: str, op: str, inputs: list[str], **type_attrs: int) -> str:
    n = g.node.add(name=name, op=op)
    n.input.extend(inputs)
    n.attr["T"].type = FLOAT
    for key, value in type_attrs.items():
        n.attr[key].type = value
    return name


def build(scopes: int = 100, ops: int = 100, seed: int = 0) -> graph_pb2.GraphDef:
    """``scopes`` x ``ops`` nodes (plus one Placeholder)."""
    rng = random.Random(seed)
    g = graph_pb2.GraphDef()
    x = g.node.add(name="input", op="Placeholder")
    x.attr["dtype"].type = FLOAT
    for d in (-1, WIDTH):
        x.attr["shape"].shape.dim.add().size = d
    outputs = ["input"]
    layer_outputs: list[str] = []  # every Relu so far: what later blocks may mix in
    for s in range(scopes):
        sc = f"block_{s:03d}"
        block_in = outputs[-1]
        cur = block_in
        made = 0
        layer = 0
        # a dense layer is 5 nodes; leave 4 for the block's tail (mix, residual, NoOp, output)
        while made + 5 <= ops - 4:
            p = f"{sc}/dense_{layer}"
            _const(g, f"{p}/kernel", (WIDTH, WIDTH))
            _const(g, f"{p}/bias", (WIDTH,))
            mm = _op(g, f"{p}/MatMul", "MatMul", [cur, f"{p}/kernel"])
            ba = _op(g, f"{p}/BiasAdd", "BiasAdd", [mm, f"{p}/bias"])
            cur = _op(g, f"{p}/Relu", "Relu", [ba])
            made += 5
            layer += 1
        while made < ops - 4:  # pad odd sizes with elementwise ops
            cur = _op(g, f"{sc}/Square_{made}", "Square", [cur])
            made += 1
        # DenseNet-style mixing of a few earlier layers: the cross-scope edges
        earlier = rng.sample(layer_outputs, min(len(layer_outputs), rng.randint(1, 4)))
        mix = g.node.add(name=f"{sc}/mix", op="AddN", input=[cur, *sorted(earlier)])
        mix.attr["T"].type = FLOAT
        mix.attr["N"].i = len(mix.input)
        layer_outputs.extend(f"{sc}/dense_{i}/Relu" for i in range(layer))
        skip = block_in
        if s >= 2 and rng.random() < 0.3:
            skip = outputs[rng.randrange(max(1, s - 10), s)]  # a long skip connection
        res = _op(g, f"{sc}/residual", "AddV2", [mix.name, skip])
        g.node.add(name=f"{sc}/barrier", op="NoOp", input=[f"^{res}"])
        out = _op(g, f"{sc}/output", "Identity", [res, f"^{sc}/barrier"])
        outputs.append(out)
    return g


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scopes", type=int, default=100)
    ap.add_argument("--ops", type=int, default=100)
    ap.add_argument("--collapse", default="auto",
                    help="auto (the default viz option), none, or a depth")
    ap.add_argument("--keep", metavar="OUT.svg", help="also write the SVG here")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    graph = Graph(build(args.scopes, args.ops))
    t1 = time.perf_counter()
    collapse = args.collapse if args.collapse == "auto" else (
        None if args.collapse == "none" else int(args.collapse))
    view = build_view(graph, collapse=collapse)
    dot = to_dot(graph, view=view)
    t2 = time.perf_counter()
    svg = render(dot, "svg")
    t3 = time.perf_counter()
    if args.keep:
        with open(args.keep, "wb") as f:
            f.write(svg)
    edges = sum(1 for line in dot.splitlines() if " -> " in line)
    print(f"graph: {len(graph)} nodes, {sum(len(n.in_edges) for n in graph.nodes)} edges "
          f"(built in {t1 - t0:.2f} s)")
    print(f"view:  {len(view.boxes)} boxes, {len(view.annotations)} const annotations, "
          f"{edges} drawn edges, collapse depth {view.depth}"
          f"{' + series' if view.series else ''}")
    print(f"to_dot:    {t2 - t1:6.2f} s  ({len(dot):,} bytes of DOT)")
    print(f"dot -Tsvg: {t3 - t2:6.2f} s  ({len(svg):,} bytes of SVG)")
    print(f"total:     {t3 - t1:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
