"""Write each corpus program's GraphDef as dfg's builder makes it (``<program>/
builder_graph.pbtxt``; for the builder-only FUNCTIONAL_PROGRAMS also ``fetch.json``), for
generate.py to import and run with TensorFlow.

    python tests/data/builder/write_builder_graphs.py      # in dfg's venv
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def build(name: str):
    from programs import PROGRAMS

    from dfg.graphdef import builder as B
    g = B.Graph()
    with g.as_default():
        fetched = PROGRAMS[name]["dfg"](B)
    return g, [t.name for t in fetched]


def main() -> None:
    import json

    from programs import FUNCTIONAL_PROGRAMS, PROGRAMS

    from dfg.graphdef import builder as B
    for name in PROGRAMS:
        g, _ = build(name)
        (HERE / name).mkdir(exist_ok=True)
        g.save(str(HERE / name / "builder_graph.pbtxt"))
        print(name, len(g.ops), "nodes")
    # builder-only programs (functional If/While): the graph and its fetches, for
    # generate.py to run with TensorFlow
    for name, prog in FUNCTIONAL_PROGRAMS.items():
        g = B.Graph()
        with g.as_default():
            fetched = prog["dfg"](B)
        (HERE / name).mkdir(exist_ok=True)
        g.save(str(HERE / name / "builder_graph.pbtxt"))
        (HERE / name / "fetch.json").write_text(json.dumps([t.name for t in fetched]) + "\n")
        print(name, len(g.ops), "nodes")


if __name__ == "__main__":
    main()
