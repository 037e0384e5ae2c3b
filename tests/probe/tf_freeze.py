import json
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from pathlib import Path

import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

OUT = Path(sys.argv[1])
only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
for d in sorted(OUT.iterdir()):
    if d.name.endswith("_io") or not d.is_dir() or not (d / "saved_model.pb").exists():
        continue
    if only and d.name not in only:
        continue
    for lower in (True, False):
        try:
            m = tf.saved_model.load(str(d))
            f = m.signatures["serving_default"]
            fr = convert_variables_to_constants_v2(f, lower_control_flow=lower)
            gd = fr.graph.as_graph_def()
            ins = {}
            for t, k in zip(fr.inputs, sorted(f.structured_input_signature[1])):
                ins[k] = t.name
            outs = {k: v.name for k, v in zip(sorted(f.structured_outputs), fr.outputs)}
            tag = "v1cf" if lower else "v2cf"
            (OUT / f"{d.name}.{tag}.pb").write_bytes(gd.SerializeToString())
            (OUT / f"{d.name}.{tag}.json").write_text(json.dumps({"inputs": ins, "outputs": outs}))
            print("ok", d.name, tag, flush=True)
        except Exception as e:
            print("TFFAIL", d.name, lower, type(e).__name__, str(e)[:200], flush=True)
