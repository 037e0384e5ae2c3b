"""Benchmark ``dfg diff`` on the largest zoo model (InceptionResNetV2, 5314 nodes) against
a copy with one weight changed and a copy with every node renamed, beside the time to load
the graph (what ``dfg info`` does first).

    python benchmarks/diff_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench_cases import best  # benchmarks/ is the script's folder

from dfg.graphdef.diff import diff_graphs
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graphdef
from dfg.graphdef.tensors import from_numpy, to_numpy
from dfg.schemas import graph_pb2

MODEL = Path(__file__).resolve().parent.parent / "tests/data/models/inception_resnet_v2/graph.pb"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    a = load_graphdef(MODEL)
    one = graph_pb2.GraphDef()
    one.CopyFrom(a)
    nd = next(n for n in one.node if n.op == "Const" and n.attr["value"].tensor.tensor_content)
    v = to_numpy(nd.attr["value"].tensor).copy()
    v.flat[0] += 0.5
    nd.attr["value"].tensor.CopyFrom(from_numpy(v))
    renamed = graph_pb2.GraphDef()
    renamed.CopyFrom(a)
    for n in renamed.node:
        n.name = n.name.replace("inception_resnet_v2_1", "irv2")
        for i, inp in enumerate(n.input):
            n.input[i] = inp.replace("inception_resnet_v2_1", "irv2")
    t_load = best(lambda: load_graphdef(MODEL), args.repeat)
    t_view = best(lambda: Graph(a), args.repeat)
    t_one = best(lambda: diff_graphs(a, one), args.repeat)
    t_ren = best(lambda: diff_graphs(a, renamed), args.repeat)
    d = diff_graphs(a, renamed)
    print(f"{MODEL.parent.name}: {len(a.node)} nodes")
    print(f"  load the file                   {t_load * 1000:7.1f} ms")
    print(f"  index it (Graph)                {t_view * 1000:7.1f} ms")
    print(f"  diff, one weight changed        {t_one * 1000:7.1f} ms")
    print(f"  diff, every node renamed        {t_ren * 1000:7.1f} ms "
          f"({len(d.nodes.renamed)} renames found)")


if __name__ == "__main__":
    main()
