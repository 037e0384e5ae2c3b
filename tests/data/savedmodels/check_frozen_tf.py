"""Check that ``dfg freeze`` output runs in TensorFlow and gives TensorFlow's outputs.

Never run in CI. Freeze with dfg first, then run this with TensorFlow's Python::

    for m in mlp cnn lstm module zoo_mobilenet_v2 zoo_resnet zoo_text_lstm zoo_module; do
      for s in tests/data/savedmodels/${m}_io/*/; do
      s=$(basename $s); dfg freeze tests/data/savedmodels/$m --signature $s \\
        -o /tmp/frozen_${m}_$s.pb --json > /tmp/frozen_${m}_$s.json; done; done
    /tmp/tfvenv/bin/python tests/data/savedmodels/check_frozen_tf.py /tmp

It imports each ``frozen_<model>_<signature>.pb`` into a TF1 graph, feeds the saved inputs
(``<model>_io/<signature>/in_*.npy``) and compares with TensorFlow's saved outputs (the
zoo's tolerance: TensorFlow's own frozen graph differs from its function by ~1e-5 on
MobileNetV2).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(folder: str) -> int:
    bad = 0
    for pb in sorted(Path(folder).glob("frozen_*.pb")):
        info = json.loads(pb.with_suffix(".json").read_text())
        model = pb.stem[len("frozen_"):-len(info["signature"]) - 1]
        io = HERE / f"{model}_io" / info["signature"]
        gd = tf.compat.v1.GraphDef()
        gd.ParseFromString(pb.read_bytes())
        with tf.Graph().as_default() as g:
            tf.compat.v1.import_graph_def(gd, name="")
            with tf.compat.v1.Session(graph=g) as sess:
                feeds = {info["inputs"][p.stem[3:]]["name"]: np.load(p)
                         for p in io.glob("in_*.npy")}
                for p in sorted(io.glob("out_*.npy")):
                    key = p.stem[4:]
                    got = sess.run(info["outputs"][key]["name"], feeds)
                    want = np.load(p)
                    ok = (np.array_equal(np.asarray(got).astype("S"), want)
                          if want.dtype.kind == "S" else np.allclose(
                              got, want, 1e-4, 1e-4 * max(1.0, float(np.abs(want).max(
                                  initial=0)))))
                    bad += not ok
                    print(f"{pb.name} {key}: {'ok' if ok else 'MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
