"""One CLI vocabulary for every command in cli/main.py's table: -o/--output FILE is the output
file (format from the extension, --format to override, unknown extensions refused), --json
wherever the output is data, --fetch/--feed/--target take comma lists, usage errors are one
line with exit 2, --help exits 0, binary never goes to a terminal, piped output never wraps.
Checked through click's CliRunner and as real processes (``python -m dfg.cli``). Expected
values come from TensorFlow's conformance files (tests/data/conformance)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import json_format, text_format
from terminal import run_on_pty

from dfg.cli.main import COMMANDS, cli
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"
DAG = DATA / "dag_basic" / "graph.pbtxt"        # e = a*b + (a+b); d = a+b (placeholders a, b)
WHILE = DATA / "while_counter" / "graph.pbtxt"  # counter/Exit counts up to n
MLP = DATA / "mlp"
DAG_FEEDS = ["--feed", "a=[[1,2,3],[4,5,6]]", "--feed", "b=[[0,1,2],[3,4,5]]"]

# Commands whose -o is not a report but the thing they make, and why they have no --json
# (or a --json that is not their main output).
GRAPH_WRITERS = {"convert", "prune", "optimize", "unroll", "freeze"}   # -o: the graph
NO_JSON = {
    "convert": "its output is a graph: JSON is --format json (a GraphDef in JSON)",
    "prune": "its output is a graph: JSON is --format json",
    "unroll": "its output is a graph: JSON is --format json",
    "viz": "its output is a picture (DOT/SVG/PNG/PDF), not data",
}
# where --json is a side report and -o stays the graph
JSON_IS_A_REPORT = {"optimize": "the pass report (the graph must then go to -o FILE)",
                    "freeze": "the feed/fetch names (printed after writing the graph)"}
# commands that need arguments to do anything (a missing one is a usage error)
NO_REQUIRED_ARGS = {"ops"}


def invoke(*args, input: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def dfg(*args, stdin: bytes | None = None, env: dict | None = None
        ) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "dfg.cli", *map(str, args)], input=stdin,
                          capture_output=True, env=env, timeout=120)


def one_line_error(stderr: str | bytes, *words: str) -> str:
    if isinstance(stderr, bytes):
        stderr = stderr.decode()
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfg: error: "), stderr
    assert "Traceback" not in stderr
    for w in words:
        assert w in lines[0], stderr
    return lines[0]


def command(name: str) -> click.Command:
    cmd = cli.get_command(click.Context(cli), name)
    assert cmd is not None, name
    return cmd


def options(cmd: click.Command, hidden: bool = False) -> set[str]:
    return {o for p in cmd.params if isinstance(p, click.Option) and (hidden or not p.hidden)
            for o in p.opts + p.secondary_opts}


ALL = sorted(COMMANDS)


# --- every command, from the table --------------------------------------------------------

def test_the_table_is_what_the_group_lists():
    r = invoke("--help")
    assert r.exit_code == 0
    for name in ALL:
        assert name in r.stdout


@pytest.mark.parametrize("name", ALL)
def test_help_exits_0(name: str):
    for flag in ("--help", "-h"):
        r = invoke(name, flag)
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith("Usage: ")


@pytest.mark.parametrize("name", ALL)
def test_every_command_takes_dash_o(name: str):
    opts = options(command(name))
    assert "-o" in opts and "--output" in opts, name


@pytest.mark.parametrize("name", ALL)
def test_data_commands_take_json(name: str):
    opts = options(command(name))
    if name in NO_JSON:
        assert "--json" not in opts, f"{name} has --json: remove it from NO_JSON"
    else:
        assert "--json" in opts, name


@pytest.mark.parametrize("name", ALL)
def test_old_spellings_are_hidden(name: str):
    cmd = command(name)
    assert "--to" not in options(cmd)           # documented word: --format
    assert not re.search(r"--to\b", invoke(name, "--help").stdout)
    if name in GRAPH_WRITERS:
        assert "--format" in options(cmd) and "--to" in options(cmd, hidden=True)


@pytest.mark.parametrize("name", ALL)
def test_name_lists_split_on_commas(name: str):
    """--fetch a,b is --fetch a --fetch b, for every command that takes names."""
    cmd = command(name)
    ctx = click.Context(cmd)
    checked = 0
    for p in cmd.params:
        if p.name in ("fetches", "targets", "inits"):
            assert p.process_value(ctx, ("a,b", "c")) == ("a", "b", "c"), (name, p.name)
            checked += 1
        if p.name == "feeds":
            got = p.process_value(ctx, ("a,b", "c"))
            # names only (prune/optimize) or NAME=VALUE (run ...): NAME=VALUE lists split
            # where a new NAME= starts
            assert got in (("a", "b", "c"), ("a,b", "c")), (name, got)
            if got == ("a,b", "c"):
                assert p.process_value(ctx, ("x=[1,2],y=3",)) == ("x=[1,2]", "y=3")
            checked += 1
    if name in ("run", "bench", "profile", "compare", "viz", "prune", "optimize"):
        assert checked, f"{name} takes --fetch"


@pytest.mark.parametrize("name", ALL)
def test_unknown_option_is_one_line_exit_2(name: str):
    r = invoke(name, "--no-such-option")
    assert r.exit_code == 2
    one_line_error(r.stderr, "--no-such-option", f"dfg {name} --help")
    assert r.stdout == ""


@pytest.mark.parametrize("name", sorted(set(ALL) - NO_REQUIRED_ARGS))
def test_missing_argument_is_one_line_exit_2(name: str):
    r = invoke(name)
    assert r.exit_code == 2
    one_line_error(r.stderr, "missing")


def test_bad_values_and_unknown_commands_are_one_line():
    for args, word in ((["bench", WHILE, "--fetch", "counter/Exit", "--iters", "x"], "--iters"),
                       (["viz", WHILE, "--format", "jpg"], "--format"),
                       (["run", WHILE, "--fetch"], "--fetch"),
                       (["no-such-command"], "no-such-command")):
        r = invoke(*args)
        assert r.exit_code == 2, args
        one_line_error(r.stderr, word)


def test_real_processes_one_line_usage_errors_and_help():
    for args in (["info", "--bogus"], ["run", WHILE], ["convert"], ["nosuch"]):
        p = dfg(*args)
        assert p.returncode == 2, (args, p.stderr)
        one_line_error(p.stderr)
        assert p.stdout == b""
    p = dfg("run", "--help")
    assert p.returncode == 0 and b"--json" in p.stdout and b"--output FILE" in p.stdout


# --- --fetch a,b behaves like --fetch a --fetch b ----------------------------------------

def test_comma_fetch_lists_in_run_prune_optimize_viz():
    for head in (["run", DAG, *DAG_FEEDS, "--json"], ["prune", DAG], ["optimize", DAG],
                 ["viz", DAG]):
        split = invoke(*head, "--fetch", "d,e")
        repeated = invoke(*head, "--fetch", "d", "--fetch", "e")
        assert split.exit_code == 0, (head, split.output)
        assert split.stdout == repeated.stdout, head
    doc = json.loads(invoke("run", DAG, *DAG_FEEDS, "--fetch", "d,e", "--json").stdout)
    # d = a+b, e = a*b + (a+b), by hand
    assert [f["name"] for f in doc["fetches"]] == ["d", "e"]
    assert doc["fetches"][1]["value"] == [[1.0, 5.0, 11.0], [19.0, 29.0, 41.0]]


def test_comma_fetch_lists_in_bench_profile_compare():
    r = invoke("bench", DAG, *DAG_FEEDS, "--fetch", "d,e", "--iters", "2", "--warmup", "0",
               "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["fetches"] == ["d", "e"]
    r = invoke("profile", DAG, *DAG_FEEDS, "--fetch", "d,e", "--iters", "1", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["fetches"] == ["d", "e"]
    r = invoke("compare", DAG, DAG, "--fetch", "d,e", "--json")
    assert r.exit_code == 0, r.output
    assert [f["name"] for f in json.loads(r.stdout)["fetches"]] == ["d", "e"]


def test_comma_feed_lists_of_values():
    one = invoke("run", DAG, "--fetch", "e", "--json",
                 "--feed", "a=[[1,2,3],[4,5,6]],b=[[0,1,2],[3,4,5]]")
    assert one.exit_code == 0, one.output
    assert one.stdout == invoke("run", DAG, "--fetch", "e", "--json", *DAG_FEEDS).stdout


# --- -o FILE: format from the extension, --format overrides, unknown refused -------------

def test_convert_refuses_an_extension_that_is_no_graph_format(tmp_path):
    out = tmp_path / "model.onnx"
    r = invoke("convert", WHILE, "-o", out)
    assert r.exit_code == 2
    one_line_error(r.stderr, "model.onnx", "--format")
    assert not out.exists()
    r = invoke("convert", WHILE, "-o", tmp_path / "noext")
    assert r.exit_code == 2
    # --format overrides: any name, the format asked for
    assert invoke("convert", WHILE, "-o", out, "--format", "pb").exit_code == 0
    assert out.read_bytes() == (DATA / "while_counter" / "graph.pb").read_bytes()


@pytest.mark.parametrize("flag", ["--format", "--to"])
def test_format_and_its_old_name_override_the_extension(tmp_path, flag):
    out = tmp_path / "g.pbtxt"
    assert invoke("prune", WHILE, "--fetch", "counter/Exit", "-o", out, flag, "json"
                  ).exit_code == 0
    gd = graph_pb2.GraphDef()
    json_format.Parse(out.read_text(), gd)
    assert len(gd.node) == 13


def test_to_and_format_must_agree():
    r = invoke("convert", WHILE, "--to", "pb", "--format", "json")
    assert r.exit_code == 2
    one_line_error(r.stderr, "--to", "--format")


@pytest.mark.parametrize("name", ["convert", "prune", "optimize", "unroll"])
def test_graph_writers_default_to_pbtxt_on_stdout(name, tmp_path):
    args = {"convert": [], "prune": ["--fetch", "counter/Exit"],
            "optimize": ["--fetch", "counter/Exit"],
            "unroll": ["--loop", "counter/while_context", "--times", "3"]}[name]
    r = invoke(name, WHILE, *args)
    assert r.exit_code == 0, r.output
    text_format.Parse(r.stdout, graph_pb2.GraphDef())
    out = tmp_path / "g.json"
    assert invoke(name, WHILE, *args, "-o", out).exit_code == 0
    json_format.Parse(out.read_text(), graph_pb2.GraphDef())


def _mlp_args() -> tuple[list[str], dict]:
    case = json.loads((MLP / "case.json").read_text())
    step = case["steps"][0]
    feeds = [f"--feed={k}=@{MLP / v}" for k, v in step["feed"].items()]
    return [str(MLP / "graph.pbtxt"), *feeds], {**case, "step": step}


def test_run_o_npz_is_a_real_npz(tmp_path):
    args, case = _mlp_args()
    fetches = case["step"]["fetch"][:3]
    out = tmp_path / "r.npz"
    r = invoke("run", *args, "--fetch", ",".join(fetches), "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    with np.load(out, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(fetches)
        for f in fetches:
            np.testing.assert_allclose(z[f], np.load(MLP / case["step"]["expect"][f]),
                                       rtol=case["rtol"], atol=case["atol"])


def test_run_o_npy_holds_the_one_fetch(tmp_path):
    args, case = _mlp_args()
    f = case["step"]["fetch"][3]
    out = tmp_path / "probs.npy"
    assert invoke("run", *args, "--fetch", f, "-o", out).exit_code == 0
    np.testing.assert_allclose(np.load(out, allow_pickle=False),
                               np.load(MLP / case["step"]["expect"][f]),
                               rtol=case["rtol"], atol=case["atol"])
    r = invoke("run", *args, "--fetch", "fc1,probs", "-o", tmp_path / "two.npy")
    assert r.exit_code == 2
    one_line_error(r.stderr, ".npz")
    assert not (tmp_path / "two.npy").exists()


def test_run_o_json_txt_and_unknown(tmp_path):
    base = ["run", WHILE, "--fetch", "counter/Exit", "--feed", "n=7"]
    expected = {"fetches": [{"name": "counter/Exit", "dtype": "int32", "shape": [],
                             "value": 7}], "steps": 1}
    out = tmp_path / "r.json"
    assert invoke(*base, "-o", out).exit_code == 0
    assert json.loads(out.read_text()) == expected
    # --json, --format json and the old --output json are the same document
    for flags in (["--json"], ["--format", "json"], ["--output", "json"]):
        r = invoke(*base, *flags)
        assert r.exit_code == 0 and json.loads(r.stdout) == expected, flags
    txt = tmp_path / "r.txt"
    assert invoke(*base, "-o", txt).exit_code == 0
    lines = txt.read_text().splitlines()
    assert any("counter/Exit" in ln and "int32" in ln and " 7 " in ln for ln in lines)
    r = invoke(*base, "-o", tmp_path / "r.bin")
    assert r.exit_code == 2
    one_line_error(r.stderr, "r.bin")
    r = invoke(*base, "--json", "--format", "npz")
    assert r.exit_code == 2


def test_old_run_output_word_with_dash_o(tmp_path):
    """`--output npz -o FILE` (the old spelling) still writes an npz."""
    out = tmp_path / "o.bin"
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", "n=4", "--output", "npz",
               "-o", out)
    assert r.exit_code == 0, r.output
    with np.load(out) as z:
        assert int(z["counter/Exit"]) == 4


@pytest.mark.parametrize("name,args", [
    ("info", [WHILE]),
    ("validate", [WHILE]),
    ("ops", ["--missing", WHILE]),
    ("bench", [WHILE, "--fetch", "counter/Exit", "--feed", "n=2", "--iters", "1",
               "--warmup", "0"]),
    ("compare", [WHILE, WHILE, "--fetch", "counter/Exit", "--feed", "n=2"]),
    ("profile", [WHILE, "--fetch", "counter/Exit", "--feed", "n=2", "--iters", "1",
                 "--warmup", "0"]),
])
def test_report_commands_write_stdout_to_dash_o(tmp_path, name, args):
    json_file, txt_file = tmp_path / "r.json", tmp_path / "r.txt"
    r = invoke(name, *args, "-o", json_file)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    doc = json.loads(json_file.read_text())
    stdout = json.loads(invoke(name, *args, "--json").stdout)
    if name in ("info", "validate", "ops", "compare"):     # deterministic documents
        assert doc == stdout
    else:                                                  # timings differ: same keys
        assert list(doc) == list(stdout)
    assert invoke(name, *args, "-o", txt_file).exit_code == 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(txt_file.read_text())
    assert txt_file.read_text().strip()
    r = invoke(name, *args, "-o", tmp_path / "r.xml")
    assert r.exit_code == 2
    one_line_error(r.stderr, "r.xml", "--json")
    assert not (tmp_path / "r.xml").exists()


def test_validate_o_keeps_the_report_of_an_invalid_graph(tmp_path):
    out = tmp_path / "v.json"
    bad = DATA / "invalid" / "missing_input_node.pbtxt"
    r = invoke("validate", WHILE, bad, "-o", out)
    assert r.exit_code == 1
    doc = json.loads(out.read_text())
    assert [d["valid"] for d in doc] == [True, False]
    assert doc[1]["diagnostics"][0]["code"] == "missing-input"


def test_dash_o_never_clobbers_on_a_failure_before_output(tmp_path):
    out = tmp_path / "keep.json"
    out.write_text("precious")
    r = invoke("info", DATA / "invalid" / "truncated.pb", "-o", out)
    assert r.exit_code == 2 and out.read_text() == "precious"


# --- terminals and pipes -------------------------------------------------------------------

def _run_on_pty(args: list, env: dict | None = None) -> tuple[int, bytes, bytes]:
    """Run dfg with standard output on a pseudo-terminal; returns (rc, terminal, stderr)."""
    return run_on_pty(args, "stdout", env)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("args", [
    ["convert", WHILE, "--format", "pb"],
    ["prune", WHILE, "--fetch", "counter/Exit", "--to", "pb"],
    ["run", WHILE, "--fetch", "counter/Exit", "--feed", "n=3", "--format", "npz"],
    ["run", WHILE, "--fetch", "counter/Exit", "--feed", "n=3", "-o", "-", "--format", "npy"],
])
def test_no_binary_to_a_terminal(args):
    rc, out, err = _run_on_pty(args)
    assert rc == 2
    one_line_error(err, "refusing to write binary to a terminal; use -o FILE or pipe it")
    assert out == b""
    piped = dfg(*args)            # the same into a pipe is fine
    assert piped.returncode == 0 and piped.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_colour_on_a_terminal_only_and_never_with_no_color():
    bad = DATA / "invalid" / "missing_input_node.pbtxt"
    rc, out, _ = _run_on_pty(["validate", bad])
    assert rc == 1 and b"\x1b[" in out
    rc, out, _ = _run_on_pty(["validate", bad], env={"NO_COLOR": "1"})
    assert rc == 1 and b"\x1b[" not in out and b"invalid" in out
    p = dfg("validate", bad, env={"NO_COLOR": ""})
    p2 = subprocess.run([sys.executable, "-m", "dfg.cli", "validate", str(bad)],
                        capture_output=True, timeout=120,
                        env={k: v for k, v in os.environ.items() if k != "NO_COLOR"})
    assert b"\x1b[" not in p.stdout and b"\x1b[" not in p2.stdout


def test_piped_output_never_wraps(tmp_path):
    long = "/".join(f"scope{i}" for i in range(40)) + "/a_very_long_node_name"
    g = tmp_path / "long.pbtxt"
    g.write_text(f'node {{ name: "{long}" op: "Placeholder" '
                 'attr { key: "dtype" value { type: DT_FLOAT } } }\n')
    p = dfg("info", g, "--nodes", env={"COLUMNS": "40"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode().splitlines()
    assert sum(long in ln for ln in lines) >= 2          # inputs and node outputs, whole
    assert max(map(len, lines)) > 300                     # nothing folded at 40 or 80
