import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from run import cmp

import dfg.executor  # noqa
from dfg.executor import Session
from dfg.graphdef import load_graph

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe_tf1")
for pb in sorted(OUT.glob("*.pb")):
    d = OUT / f"{pb.stem}_io"
    names = json.loads((d / "names.json").read_text())
    feeds = {k: np.load(d / f"feed{i}.npy") for i, k in enumerate(names["feeds"])}
    probs = []
    for opt in (True, False):
        for threads in (1, 2):
            try:
                with Session(load_graph(str(pb)), threads=threads, optimize=opt) as s:
                    vals = s.run(names["fetches"], feed_dict=feeds)
                for i, v in enumerate(vals):
                    p = cmp(
                        v,
                        np.load(d / f"fetch{i}.npy"),
                        f"{names['fetches'][i]} opt={opt} t={threads}",
                    )
                    if p:
                        probs.append(p)
            except Exception as e:
                probs.append(f"EXC opt={opt} {type(e).__name__}: {str(e)[:300]}")
    print(("OK  " if not probs else "BAD ") + pb.stem)
    for p in probs:
        print("    ", p)
