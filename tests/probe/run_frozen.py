import json
import sys
from pathlib import Path

import numpy as np

import dfg.executor  # noqa
from dfg.executor import Session
from dfg.graphdef import load_graph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import cmp  # noqa

OUT = Path(sys.argv[1])
only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
for pb in sorted(OUT.glob("*.pb")):
    name, tag = pb.name.split(".")[:2]
    if only and name not in only:
        continue
    info = json.loads(pb.with_suffix(".json").read_text())
    sd = OUT / f"{name}_io" / "serving_default"
    ins = {p.stem[3:]: np.load(p, allow_pickle=True) for p in sd.glob("in_*.npy")}
    outs = {p.stem[4:]: np.load(p, allow_pickle=True) for p in sd.glob("out_*.npy")}
    probs = []
    try:
        g = load_graph(str(pb))
        feed = {info["inputs"][k]: v for k, v in ins.items()}
        keys = list(outs)
        with Session(g, threads=2) as s:
            vals = s.run([info["outputs"][k] for k in keys], feed_dict=feed)
        for k, v in zip(keys, vals):
            p = cmp(v, outs[k], k)
            if p:
                probs.append(p)
    except Exception as e:
        probs.append(f"EXC {type(e).__name__}: {str(e)[:300]}")
    print(("OK  " if not probs else "BAD ") + f"{name} [{tag}]", flush=True)
    for p in probs:
        print("     ", p)
