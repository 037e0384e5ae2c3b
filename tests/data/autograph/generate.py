"""TensorFlow's values for the autograph programs (the same programs written with
``tf.function``, i.e. TensorFlow's AutoGraph; the dfg versions are in autograph_programs.py).

    /path/to/tfvenv/bin/python tests/data/autograph/generate.py

Writes ``cases.json`` (per program: its inputs as ``[name, dtype, shape]`` and the number of
feed cases) and ``expected.npz`` (``<program>/feed<c>/<input>`` and ``<program>/tf<c>/<i>``:
the feeds and TensorFlow's i-th output for case c). Needs TensorFlow 2.21; a few seconds.
Never run in CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = Path(__file__).resolve().parent


def programs(tf):
    def collatz(n):
        steps = 0
        while n != 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        return steps

    def nested_break(x, n):
        total = 0.0
        i = 0
        while i < n:
            j = 0
            while j < n:
                if j > i:
                    break
                total += tf.gather(x, j) * tf.cast(i, tf.float32)
                j += 1
            if total > 10.0:
                break
            i += 1
        return total, i

    def if_in_while(x):
        y = x
        k = 0
        while y < 100.0:
            if y > 50.0:
                y = y * 1.5
            elif y > 10.0:
                y = y * 2.0
            else:
                y = y + 7.0
            k += 1
        return y, k

    def tensor_range(x, n):
        acc = tf.zeros([3])
        for i in range(n):
            acc = acc * 0.5 + x * tf.cast(i, tf.float32)
        s = 0
        for j in range(n, 0, -2):
            s += j
        return acc, s

    def early_return(x):
        if tf.reduce_sum(x) > 0.0:
            return x * 2.0
        y = x - 1.0
        return y * y

    def skip_odd(n):
        s = 0
        for i in range(n):
            if i % 2 == 1:
                continue
            s += i
        return s

    def unrolled(x):
        for k in range(3):
            x = x * 2.0 + k
        i = 0
        while i < 2:
            x = x - 1.0
            i += 1
        return x

    def rows(m):
        acc = tf.zeros([3])
        for r in m:
            acc = acc + r * r
        return acc

    def logic(a, b):
        c = 0
        if a > 0 and b > 0 or not a < -5:
            c = 1
        d = a if a > b else b
        return c, d

    def closure(x, n):
        scale = x * 2.0

        def step(v):
            if v > 5.0:
                return v - scale
            return v + 1.0

        v = x
        for _ in range(n):
            v = step(v)
        return v

    # TensorFlow's AutoGraph refuses a `return` inside a tensor loop (NotImplementedError:
    # "a return statement cannot be placed inside this TensorFlow loop"); dfg's runs it.
    # TensorFlow's values come from the same programs with the return written as a result
    # variable and a `break`.
    def return_in_loop(x, n):
        i = 0
        r = -1
        while i < n:
            if tf.gather(x, i) > 3.0:
                r = i
                break
            i += 1
        return r

    def return_in_for(x):
        r = 0.0
        for v in x:
            if v > 3.0:
                r = v * 10.0
                break
        return r

    f32, i32 = np.float32, np.int32
    xs = np.arange(1, 6, dtype=f32)
    return {
        "collatz": (collatz, [("n", "int32", [])],
                    [{"n": i32(v)} for v in (1, 6, 27, 97)]),
        "nested_break": (nested_break, [("x", "float32", [5]), ("n", "int32", [])],
                         [{"x": xs, "n": i32(4)}, {"x": xs, "n": i32(0)},
                          {"x": xs * 0.1, "n": i32(5)}]),
        "if_in_while": (if_in_while, [("x", "float32", [])],
                        [{"x": f32(v)} for v in (1.0, 50.0, 200.0)]),
        "tensor_range": (tensor_range, [("x", "float32", [3]), ("n", "int32", [])],
                         [{"x": np.array([1, -2, 0.5], f32), "n": i32(v)} for v in (0, 1, 5)]),
        "early_return": (early_return, [("x", "float32", [3])],
                         [{"x": np.array([1, 2, -1], f32)}, {"x": np.array([1, -3, 1], f32)}]),
        "skip_odd": (skip_odd, [("n", "int32", [])], [{"n": i32(v)} for v in (0, 1, 7, 10)]),
        "unrolled": (unrolled, [("x", "float32", [])], [{"x": f32(1.0)}, {"x": f32(-0.5)}]),
        "rows": (rows, [("m", "float32", [None, 3])],
                 [{"m": np.arange(12, dtype=f32).reshape(4, 3)},
                  {"m": np.zeros((0, 3), f32)}]),
        "logic": (logic, [("a", "int32", []), ("b", "int32", [])],
                  [{"a": i32(a), "b": i32(b)} for a, b in ((3, -2), (3, 4), (-9, 1), (-2, -7))]),
        "closure": (closure, [("x", "float32", []), ("n", "int32", [])],
                    [{"x": f32(1.0), "n": i32(6)}, {"x": f32(3.0), "n": i32(0)},
                     {"x": f32(0.5), "n": i32(9)}]),
        "return_in_loop": (return_in_loop, [("x", "float32", [5]), ("n", "int32", [])],
                           [{"x": np.array([1, 2, 5, 7, 1], f32), "n": i32(v)}
                            for v in (0, 2, 5)]),
        "return_in_for": (return_in_for, [("x", "float32", [None])],
                          [{"x": np.array([1, 2, 5, 7, 1], f32)}, {"x": np.array([1, 2], f32)},
                           {"x": np.zeros([0], f32)}]),
    }


def main() -> None:
    import tensorflow as tf
    cases: dict[str, dict] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, (fn, inputs, feeds) in programs(tf).items():
        sig = [tf.TensorSpec(shape, getattr(tf, dt), name=nm) for nm, dt, shape in inputs]
        tff = tf.function(fn, input_signature=sig, autograph=True)
        for c, feed in enumerate(feeds):
            out = tff(*[tf.constant(feed[nm]) for nm, _, _ in inputs])
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            for nm, _, _ in inputs:
                arrays[f"{name}/feed{c}/{nm}"] = np.asarray(feed[nm])
            for i, o in enumerate(outs):
                arrays[f"{name}/tf{c}/{i}"] = o.numpy()
        cases[name] = {"inputs": inputs, "cases": len(feeds), "outputs": len(outs)}
    np.savez(HERE / "expected.npz", **arrays)
    (HERE / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{len(cases)} programs, {sum(c['cases'] for c in cases.values())} cases")


if __name__ == "__main__":
    main()
