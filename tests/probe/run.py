import sys
from pathlib import Path

import numpy as np

import dfg.executor  # noqa
from dfg.executor import Session
from dfg.executor.savedmodel import freeze, load

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe")
only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None


def cmp(got, want, what):
    got = np.asarray(got)
    if want.dtype.kind == "V" and want.dtype.itemsize == 2:
        from dfg.graphdef.dtypes import bfloat16_from_bits

        want = bfloat16_from_bits(want.view(np.uint16))
    if want.dtype.kind in "SUO":
        g = [bytes(x) if not isinstance(x, str) else x.encode() for x in got.reshape(-1)]
        w = [bytes(x) for x in want.reshape(-1)]
        if got.shape != want.shape or g != w:
            return (f"{what}: strings differ {got.reshape(-1)[:4]} vs {want.reshape(-1)[:4]} "
                    f"shape {got.shape} {want.shape}")
        return None
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{what}: dtype/shape {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    if want.dtype.kind in "iub":
        if not np.array_equal(got, want):
            return f"{what}: ints differ {got.reshape(-1)[:6]} vs {want.reshape(-1)[:6]}"
        return None
    w = want.astype(np.float64) if want.dtype.kind != "c" else want
    g = got.astype(w.dtype)
    atol = max(1e-4, 1e-4 * float(np.abs(w).max(initial=0)))
    if not np.allclose(g, w, rtol=1e-4, atol=atol, equal_nan=True):
        err = np.abs(g - w).max()
        return f"{what}: max err {err:.3g} got {g.reshape(-1)[:4]} want {w.reshape(-1)[:4]}"
    return None


def main():
    for d in sorted(OUT.iterdir()):
        if d.name.endswith("_io") or not d.is_dir():
            continue
        if only and d.name not in only:
            continue
        io = OUT / f"{d.name}_io"
        for sd in sorted(io.iterdir()):
            if not sd.is_dir():
                continue
            ins = {p.stem[3:]: np.load(p, allow_pickle=True) for p in sd.glob("in_*.npy")}
            outs = {p.stem[4:]: np.load(p, allow_pickle=True) for p in sd.glob("out_*.npy")}
            for mode in ("sm", "frozen"):
                probs = []
                try:
                    if mode == "sm":
                        m = load(d, threads=2)
                        got = m.run(sd.name, ins)
                        m.close()
                    else:
                        m = load(d, threads=2)
                        frozen, info = freeze(m, sd.name)
                        feed = {info["inputs"][k]["name"]: v for k, v in ins.items()}
                        names = [info["outputs"][k]["name"] for k in outs]
                        with Session(frozen, threads=2) as sess:
                            if info.get("init"):
                                sess.run([], targets=[info["init"]])
                            vals = sess.run(names, feed_dict=feed)
                        got = dict(zip(outs, vals))
                        m.close()
                    for k, w in outs.items():
                        if k not in got:
                            probs.append(f"{k}: missing")
                            continue
                        p = cmp(got[k], w, k)
                        if p:
                            probs.append(p)
                except Exception as e:
                    probs.append(f"EXC {type(e).__name__}: {str(e)[:400]}")
                print(
                    ("OK  " if not probs else "BAD ") + f"{d.name}/{sd.name} [{mode}]", flush=True
                )
                for p in probs:
                    print("     ", p)


if __name__ == "__main__":
    main()
