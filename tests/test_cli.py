"""The dfg command: info, convert, run, bench, ops; help for every command; exit codes and
one-line errors, through click's CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import COMMANDS, cli

DATA = Path(__file__).resolve().parent / "data" / "conformance"
INVALID = DATA / "invalid"


def dfg(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", *args], input=stdin,
                          capture_output=True, env=env, timeout=120)


def invoke(*args: str, input: bytes | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(name: str) -> None:
    r = invoke(name, "--help")
    assert r.exit_code == 0, r.output
    assert "Example" in r.output


def test_version_and_top_help() -> None:
    assert invoke("--version").output.startswith("dfg, version ")
    r = invoke("--help")
    assert r.exit_code == 0 and "info" in r.output and "run" in r.output


def test_info_json_is_stable_and_complete() -> None:
    r = invoke("info", str(DATA / "while_nested" / "graph.pbtxt"), "--json")
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert list(doc) == ["file", "nodes", "inputs", "outputs", "op_types", "constants",
                         "variables", "control_edges", "frames", "devices", "versions",
                         "library_functions", "functions"]
    assert [f["name"] for f in doc["frames"]] == ["outer/while_context",
                                                  "outer/inner/while_context"]
    assert doc["frames"][1]["parent"] == "outer/while_context"
    assert {i["name"] for i in doc["inputs"]} == {"n", "scale"}


def test_info_counts_constants_and_variables() -> None:
    doc = json.loads(invoke("info", str(DATA / "cnn" / "graph.pbtxt"), "--json").output)
    assert doc["inputs"] == [{"name": "images", "op": "Placeholder", "dtype": "float32",
                              "shape": [2, 8, 8, 3]}]
    # static shapes through Conv2D, pooling and the rest: TensorFlow's logits shape
    tf_logits = np.load(DATA / "cnn" / "s0_fetch_6.npy")
    assert doc["outputs"] == [{"name": "logits:0", "op": "AddV2", "dtype": "float32",
                               "shape": list(tf_logits.shape)}]
    assert doc["constants"]["count"] == doc["op_types"]["Const"]
    var = json.loads(invoke("info", str(DATA / "variables_ref" / "graph.pbtxt"), "--json")
                     .output)
    assert {v["op"] for v in var["variables"]} == {"VariableV2"}


def test_info_reads_stdin() -> None:
    raw = (DATA / "dag_basic" / "graph.pb").read_bytes()
    r = dfg("info", "-", "--json", stdin=raw)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["file"] == "-"


@pytest.mark.parametrize("name", ["truncated.pb", "garbage.pb", "broken_syntax.pbtxt"])
def test_unreadable_input_is_exit_2_and_one_line(name: str) -> None:
    r = dfg("info", str(INVALID / name))
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("dfg: error:") and name in err
    assert "Traceback" not in err
    r2 = invoke("info", str(INVALID / name))
    assert r2.exit_code == 2


def test_debug_shows_traceback() -> None:
    r = dfg("--debug", "info", str(INVALID / "garbage.pb"))
    assert r.returncode != 0 and b"Traceback" in r.stderr


def test_convert_pbtxt_to_pb_matches_tensorflow(tmp_path: Path) -> None:
    out = tmp_path / "x.pb"
    r = invoke("convert", str(DATA / "while_counter" / "graph.pbtxt"), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == (DATA / "while_counter" / "graph.pb").read_bytes()


def test_convert_to_stdout_and_back(tmp_path: Path) -> None:
    r = dfg("convert", str(DATA / "dag_basic" / "graph.pb"), "--to", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["node"]
    again = dfg("convert", "-", "-o", str(tmp_path / "y.pb"), stdin=r.stdout)
    assert again.returncode == 0
    assert (tmp_path / "y.pb").read_bytes() == (DATA / "dag_basic" / "graph.pb").read_bytes()


def test_convert_failure_never_clobbers_output(tmp_path: Path) -> None:
    out = tmp_path / "keep.pb"
    out.write_bytes(b"precious")
    r = invoke("convert", str(INVALID / "truncated.pb"), "-o", str(out))
    assert r.exit_code == 2 and out.read_bytes() == b"precious"


def test_run_json_while_loop() -> None:
    r = dfg("run", str(DATA / "while_counter" / "graph.pbtxt"), "--fetch", "counter/Exit",
            "--feed", "n=7", "--output", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"fetches": [{"name": "counter/Exit", "dtype": "int32",
                                                 "shape": [], "value": 7}], "steps": 1}


def test_run_feeds_from_npy_and_writes_npz(tmp_path: Path) -> None:
    d = DATA / "mlp"
    case = json.loads((d / "case.json").read_text())
    step = case["steps"][0]
    feeds = [f"--feed={k}=@{d / v}" for k, v in step["feed"].items()]
    out = tmp_path / "o.npz"
    args = [str(d / "graph.pbtxt"), *sum([["--fetch", f] for f in step["fetch"]], []), *feeds,
            "--output", "npz", "-o", str(out)]
    r = invoke("run", *args)
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        for f in step["fetch"]:
            np.testing.assert_allclose(z[f], np.load(d / step["expect"][f]),
                                       rtol=case["rtol"], atol=case["atol"])


def test_run_literal_feed_takes_placeholder_dtype() -> None:
    r = invoke("run", str(DATA / "dag_basic" / "graph.pbtxt"), "--fetch", "e",
               "--feed", "a=[[1,2,3],[4,5,6]]", "--feed", "b=[[0,1,2],[3,4,5]]",
               "--output", "json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.output)["fetches"][0]
    # e = a*b + (a+b), worked by hand
    assert v["dtype"] == "float32" and v["value"] == [[1.0, 5.0, 11.0], [19.0, 29.0, 41.0]]


def test_run_missing_feed_is_exit_1_with_hint() -> None:
    r = dfg("run", str(DATA / "dag_basic" / "graph.pbtxt"), "--fetch", "e",
            "--feed", "a=[[1,2,3],[4,5,6]]")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "placeholder 'b' (float32, shape [2,3]) must be fed: --feed b=..." in err
    assert err.count("\n") == 1


def test_run_with_init_and_steps_keeps_state() -> None:
    d = DATA / "variables_ref"
    case = json.loads((d / "case.json").read_text())
    init = case["steps"][0]["target"][0]
    g = DATA / "variables_ref" / "graph.pbtxt"
    fetch = case["steps"][1]["fetch"]
    r = invoke("run", str(g), "--init", init, *sum([["--fetch", f] for f in fetch], []),
               "--output", "json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["fetches"]
    for f, v in zip(fetch, got):
        expected = np.load(d / case["steps"][1]["expect"][f])
        np.testing.assert_allclose(np.asarray(v["value"], dtype=expected.dtype), expected)


def test_run_bad_feed_syntax_is_usage_error() -> None:
    r = invoke("run", str(DATA / "dag_basic" / "graph.pbtxt"), "--fetch", "e", "--feed", "a")
    assert r.exit_code == 2


def test_run_kernel_error_is_exit_1_naming_node() -> None:
    d = DATA / "error_int_div_zero"
    case = json.loads((d / "case.json").read_text())
    step = next(s for s in case["steps"] if s["expect_error"])
    feeds = [f"--feed={k}=@{d / v}" for k, v in step["feed"].items()]
    r = dfg("run", str(d / "graph.pbtxt"), *sum([["--fetch", f] for f in step["fetch"]], []),
            *feeds)
    assert r.returncode == 1
    assert b"node '" in r.stderr and b"Traceback" not in r.stderr


def test_bench_json_keys() -> None:
    r = invoke("bench", str(DATA / "while_counter" / "graph.pbtxt"), "--fetch", "counter/Exit",
               "--feed", "n=3", "--iters", "3", "--warmup", "1", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    for k in ("min_s", "median_s", "mean_s", "max_s", "iters"):
        assert k in doc
    assert doc["iters"] == 3 and doc["min_s"] <= doc["median_s"] <= doc["max_s"]
    from dfg.executor.kernels import _native
    assert doc["native"] is _native.enabled()


def test_ops_json_lists_at_least_200_cpu_kernels() -> None:
    doc = json.loads(invoke("ops", "--json").output)
    assert doc["kernels"]["CPU"] >= 200
    # TensorFlow's 1908 OpDefs and dfg's private ones (graphdef/opdefs/dfg_op_defs.pbtxt)
    private = (DATA.parent.parent.parent / "graphdef" / "opdefs" / "dfg_op_defs.pbtxt")
    assert doc["opdefs"] == 1908 + len(re.findall(r"(?m)^op \{", private.read_text()))
    ops = {o["op"] for o in doc["ops"]}
    assert {"Conv2D", "Switch", "TensorArrayV3", "StridedSlice"} <= ops


def test_ops_missing(tmp_path: Path) -> None:
    g = tmp_path / "g.pbtxt"
    # a TPU-only op: TensorFlow has no CPU kernel for it either
    g.write_text('node { name: "s" op: "KthOrderStatistic" input: "c" '
                 'attr { key: "k" value { i: 1 } } }\n'
                 'node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }'
                 ' attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } } } } }')
    r = invoke("ops", "--missing", str(g), "--json")
    assert r.exit_code == 1
    assert json.loads(r.output)["missing"] == [
        {"op": "KthOrderStatistic", "nodes": 1, "example": "s"}]
    ok = invoke("ops", "--missing", str(DATA / "cnn" / "graph.pbtxt"))
    assert ok.exit_code == 0
    rr = invoke("run", str(g), "--fetch", "s")
    assert rr.exit_code == 1 and "KthOrderStatistic" in rr.output and "TPU-only" in rr.output


def test_ops_missing_takes_a_saved_model_dir() -> None:
    # the "no kernel" error points at `dfg ops --missing GRAPH`: a SavedModel DIR is a GRAPH
    saved = DATA.parent / "savedmodels" / "lstm"
    r = invoke("ops", "--missing", str(saved), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["missing"] == []


def test_no_color_and_no_tty_means_plain_output() -> None:
    r = dfg("info", str(DATA / "dag_basic" / "graph.pbtxt"))
    assert r.returncode == 0 and b"\x1b[" not in r.stdout


def test_feed_a_file_as_its_bytes(tmp_path: Path) -> None:
    # @FILE that is not .npy/.npz: its bytes (trailing NULs kept) as one string; a rank-1
    # string input takes it as a batch of one, @a,@b as a batch of two
    g = tmp_path / "g.pbtxt"
    g.write_text(
        'node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } } '
        'attr { key: "shape" value { shape { dim { size: -1 } } } } }\n'
        'node { name: "n" op: "StringLength" input: "b" }\n'
        'node { name: "s" op: "Placeholder" attr { key: "dtype" value { type: DT_STRING } } '
        'attr { key: "shape" value { shape { } } } }\n'
        'node { name: "m" op: "StringLength" input: "s" }\n')
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"\x89PNG\x00\x00")
    b.write_bytes(b"xyz")
    r = invoke("run", str(g), "--fetch", "n,m", "--feed", f"b=@{a}", "--feed", f"s=@{b}",
               "--json")
    assert r.exit_code == 0, r.output
    fetches = json.loads(r.output)["fetches"]
    assert [f["value"] for f in fetches] == [[6], 3]
    r = invoke("run", str(g), "--fetch", "n", "--feed", f"b=@{a},@{b}", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["fetches"][0]["value"] == [6, 3]
    r = invoke("run", str(g), "--fetch", "n", "--feed", f"b=@{tmp_path / 'none.bin'}")
    assert r.exit_code == 2 and "cannot read" in r.output


def test_init_runs_with_the_feeds(tmp_path: Path) -> None:
    # TF1 initializers may read a placeholder (and save/restore_all reads save/Const, the
    # checkpoint path): --init gets the --feed values as the steps do
    g = tmp_path / "g.pbtxt"
    g.write_text(
        'node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }\n'
        'node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } }'
        ' attr { key: "shape" value { shape { } } } }\n'
        'node { name: "init" op: "Assign" input: "v" input: "p"'
        ' attr { key: "T" value { type: DT_FLOAT } } }\n'
        'node { name: "two" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }'
        ' attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { }'
        ' float_val: 2 } } } }\n'
        'node { name: "y" op: "Mul" input: "v" input: "two"'
        ' attr { key: "T" value { type: DT_FLOAT } } }\n')
    for cmd in (["run", "--fetch", "y", "--json"], ["bench", "--fetch", "y", "--iters", "2"],
                ["profile", "--fetch", "y", "--iters", "2"]):
        r = invoke(cmd[0], str(g), *cmd[1:], "--init", "init", "--feed", "p=3")
        assert r.exit_code == 0, r.output
        if cmd[0] == "run":
            assert json.loads(r.output)["fetches"][0]["value"] == 6.0
