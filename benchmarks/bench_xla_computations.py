"""How long the Xla* ops that apply a computation take, with the computation's body run
directly (its kernels called in order) and in the reference interpreter (the path a body with
control flow takes), on the jax2tf cases' own computations and larger inputs.

    python benchmarks/bench_xla_computations.py [REPEATS]

Prints one line per op: milliseconds per call, direct and interpreted (median of REPEATS)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

from dfg.executor.kernels import xla
from dfg.executor.kernels.registry import KernelContext
from dfg.graphdef.attrs import to_python
from dfg.graphdef.functions import attach_bodies
from dfg.graphdef.io import load_graph

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "jax2tf"


def node(case: str, op: str):
    gd = attach_bodies(load_graph(DATA / case / "graph.pbtxt").graph_def)
    return next(nd for nd in gd.node if nd.op == op)


def ctx_for(nd) -> KernelContext:
    from dfg.executor.kernel_call import bind_attrs
    from dfg.graphdef.opdefs.registry import registry

    return KernelContext(nd.name, nd.op, bind_attrs(registry().get(nd.op), nd),
                         [np.dtype(np.float32)])


def computations(interpret: bool):
    """xla.computation, built with or without the interpreter (one cache per path)."""
    cache: dict = {}

    def comp(ctx: KernelContext, attr: str) -> xla.Computation:
        ref = ctx.attrs[attr]
        if str(ref) not in cache:
            cache[str(ref)] = xla.Computation(str(ref), ref.library, interpret=interpret)
        return cache[str(ref)]

    return comp


def timeit(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(repeats: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 64, 64, 16)).astype(np.float32)
    pool = node("jax2tf_cnn", "XlaReduceWindow")
    src = rng.normal(size=(8, 32, 32, 16)).astype(np.float32)
    sas = node("jax2tf_select_and_scatter", "XlaSelectAndScatter")
    scat = next(nd for nd in attach_bodies(load_graph(
        DATA / "jax2tf_scatter" / "graph.pbtxt").graph_def).node if nd.op == "XlaScatter"
        and "AddV2" in to_python(nd.attr["update_computation"]).library.decode("latin-1"))
    ops = {
        "XlaReduceWindow 2x2/2 max, 8x64x64x16": (
            pool, lambda c: xla.xla_reduce_window(
                c, x, np.float32(-np.inf), np.array([1, 2, 2, 1]), np.array([1, 2, 2, 1]),
                np.ones(4, np.int64), np.ones(4, np.int64), np.zeros((4, 2), np.int64))),
        "XlaSelectAndScatter 2x2/2, 8x64x64x16": (
            sas, lambda c: xla.xla_select_and_scatter(
                c, x, np.array([1, 2, 2, 1]), np.array([1, 2, 2, 1]),
                np.zeros((4, 2), np.int64), src, np.float32(0))),
        "XlaScatter 1000 rows of 64 into 100": (
            scat, lambda c: xla.xla_scatter(
                c, np.zeros((100, 64), np.float32),
                rng.integers(0, 100, size=(1000, 1)).astype(np.int32),
                rng.normal(size=(1000, 64)).astype(np.float32))),
    }
    direct_path, interpreted = computations(False), computations(True)
    with np.errstate(all="ignore"):
        for label, (nd, fn) in ops.items():
            c = ctx_for(nd)
            xla.computation = direct_path
            direct = timeit(lambda f=fn, c=c: f(c), repeats)
            xla.computation = interpreted
            interp = timeit(lambda f=fn, c=c: f(c), repeats)
            print(f"{label:<42} direct {direct:9.2f} ms   interpreted {interp:9.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
