"""jax2tf exports (tests/data/jax2tf, written by its generate.py with TensorFlow and JAX): the
Xla* ops jax2tf writes without native serialization, one case per op family plus a small MLP
and CNN, against TensorFlow's own outputs (its XLA-compiled run); a jax2tf SavedModel run,
frozen and run again; the native-serialization XlaCallModule refused by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conformance import assert_close, case_dirs, load_case, run_case

from dfg.cli.main import cli
from dfg.graphdef.errors import UnimplementedError
from dfg.graphdef.functions import attach_bodies
from dfg.graphdef.io import load_graph
from dfg.graphdef.passes import PassOptions
from dfg.graphdef.passes.pipeline import optimize

DATA = Path(__file__).resolve().parent / "data" / "jax2tf"
CASES = case_dirs(DATA)
IDS = [d.name for d in CASES]

# The Xla* ops the cases cover, with the case showing each (what jax 0.7.1 writes, plus the
# few only TensorFlow's tf2xla wrappers write).
COVERED = {
    "XlaDotV2": "jax2tf_dot_general", "XlaDynamicSlice": "jax2tf_dynamic_slice",
    "XlaDynamicUpdateSlice": "jax2tf_dynamic_slice", "XlaGather": "jax2tf_gather",
    "XlaScatter": "jax2tf_scatter", "XlaPad": "jax2tf_pad",
    "XlaVariadicReduceV2": "jax2tf_reduce", "XlaReduceWindow": "jax2tf_reduce_window",
    "XlaSelectAndScatter": "jax2tf_select_and_scatter", "XlaConvV2": "jax2tf_conv",
    "XlaVariadicSort": "jax2tf_sort", "XlaOptimizationBarrier": "jax2tf_barrier",
    "XlaReduce": "jax2tf_tfxla_ops", "XlaSort": "jax2tf_tfxla_ops",
    "XlaKeyValueSort": "jax2tf_tfxla_ops", "XlaSharding": "jax2tf_tfxla_ops",
    "XlaDot": "jax2tf_tfxla_ops", "XlaConv": "jax2tf_tfxla_ops",
    "XlaVariadicReduce": "jax2tf_tfxla_ops",
}


def test_every_op_family_has_a_case() -> None:
    for op, name in COVERED.items():
        assert op in load_case(DATA / name)["xla_ops"], (op, name)


@pytest.mark.parametrize("programs", ["auto", "never"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax2tf_case(case: Path, threads: int, programs: str) -> None:
    run_case(case, threads, programs=programs)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_jax2tf_case_after_optimizing(case: Path) -> None:
    steps = load_case(case)["steps"]
    options = PassOptions(tuple(dict.fromkeys(f for s in steps for f in s["fetch"])), (),
                          tuple(dict.fromkeys(k for s in steps for k in s["feed"])))
    result = optimize(case / "graph.pbtxt", options)
    assert not result.warnings, result.warnings
    run_case(case, threads=2, graph=result.graph_def)


def _computations(name: str) -> list:
    """Every (node, Computation) of a case's graph, as a Session hands them to kernels."""
    from dfg.executor.kernels.xla import Computation
    from dfg.graphdef.attrs import to_python
    from dfg.graphdef.functions import COMPUTATION_OPS

    gd = attach_bodies(load_graph(DATA / name / "graph.pbtxt").graph_def)
    out = []
    for nd in gd.node:
        for key in COMPUTATION_OPS.get(nd.op, ()):
            ref = to_python(nd.attr[key])
            out.append((nd, Computation(str(ref), ref.library),
                        Computation(str(ref), ref.library, interpret=True)))
    return out


@pytest.mark.parametrize("name", ["jax2tf_scatter", "jax2tf_reduce", "jax2tf_reduce_window",
                                  "jax2tf_select_and_scatter", "jax2tf_sort",
                                  "jax2tf_tfxla_ops"])
def test_straight_line_bodies_match_the_interpreter(name: str) -> None:
    """A computation's direct path (its body's kernels called in order) gives the bits the
    reference interpreter gives running the same function, on values with NaN, infinities,
    signed zeros and ties."""
    rng = np.random.default_rng(0)
    found = _computations(name)
    assert found
    for nd, fast, slow in found:
        assert fast.direct and not slow.direct
        args = []
        for dt in fast.arg_dtypes:
            if dt.kind == "f":
                a = rng.normal(size=64).astype(dt)
                a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]
            else:
                a = rng.integers(-3, 3, size=64).astype(dt)
            args.append(a)
        # ties between the two sides, as reducers (acc..., x...) and comparators (pairs) see
        n = len(args)
        for i, j in [(i, i + n // 2) for i in range(n // 2)] + [(i, i + 1) for i in
                                                               range(0, n - 1, 2)]:
            if args[i].dtype == args[j].dtype:
                args[j][:8] = args[i][:8]
        with np.errstate(all="ignore"):
            got, want = fast(*args), slow(*args)
        assert len(got) == len(want) == fast.num_results
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), nd.name


def test_a_reducer_without_its_body_is_refused_by_name() -> None:
    from dfg.executor.kernels.registry import invoke

    with pytest.raises(UnimplementedError, match="reducer.*body"):
        invoke("XlaReduce", np.ones(3, np.float32), np.float32(0),
               attrs={"dimensions_to_reduce": [0], "reducer": "add_f32"})


def test_xla_call_module_is_refused_naming_the_node() -> None:
    from dfg.executor import Session

    sess = Session(DATA / "native" / "graph.pbtxt")
    with pytest.raises(UnimplementedError) as e:
        sess.run(["Identity:0"], feed_dict={"x:0": np.ones(3, np.float32)})
    msg = str(e.value)
    assert "XlaCallModule" in msg and "StableHLO module" in msg and "not supported" in msg
    res = CliRunner().invoke(cli, ["run", str(DATA / "native" / "graph.pbtxt"), "--feed",
                                   "x=[1,2,3]", "--fetch", "Identity"])
    assert res.exit_code == 1
    assert "StableHLO" in res.output and "XlaCallModule" in res.output


def _cnn_io(tmp_path: Path) -> tuple[Path, np.ndarray]:
    io = np.load(DATA / "savedmodel_cnn" / "io.npz")
    np.save(tmp_path / "images.npy", io["images"])
    return tmp_path / "images.npy", io["probs"]


def _probs(out: str) -> np.ndarray:
    doc = json.loads(out)
    (fetch,) = [f for f in doc["fetches"] if f["name"].startswith("probs")]
    return np.asarray(fetch["value"], dtype=np.float32)


def test_jax2tf_savedmodel_runs_and_freezes(tmp_path: Path) -> None:
    images, probs = _cnn_io(tmp_path)
    runner = CliRunner()
    res = runner.invoke(cli, ["run", str(DATA / "savedmodel_cnn"), "--feed",
                              f"images=@{images}", "--json"])
    assert res.exit_code == 0, res.output
    assert_close(_probs(res.output), probs, 1e-5, 1e-6, "probs")
    frozen = tmp_path / "frozen.pb"
    res = runner.invoke(cli, ["freeze", str(DATA / "savedmodel_cnn"), "-o", str(frozen)])
    assert res.exit_code == 0, res.output
    gd = load_graph(frozen).graph_def
    ops = {nd.op for nd in gd.node}
    assert {"XlaConvV2", "XlaReduceWindow", "XlaDotV2"} <= ops
    assert not ops & {"VarHandleOp", "ReadVariableOp", "VariableV2"}
    # the reducer stays in the library, where TensorFlow looks for it; nothing of dfg's own
    # is left inside the func attr
    (rw,) = [nd for nd in gd.node if nd.op == "XlaReduceWindow"]
    assert rw.attr["computation"].func.name in {f.signature.name for f in gd.library.function}
    assert not rw.attr["computation"].func.attr
    # as a subprocess, the frozen graph gives TensorFlow's values
    proc = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", str(frozen), "--feed",
                           f"serving_default_images=@{images}", "--fetch", "probs", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert_close(_probs(proc.stdout), probs, 1e-5, 1e-6, "probs")
