"""``dfg validate`` and ``dfg prune`` from the command line: exit codes, JSON, output formats,
one-line errors; in-process with CliRunner and as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format

from dfg.cli.main import cli
from dfg.graphdef.validate import CODES
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"
INVALID = DATA / "invalid"
DAG = DATA / "dag_basic" / "graph.pbtxt"
WHILE = DATA / "while_counter" / "graph.pb"

# invalid file -> the code dfg reports for the problem index.json names
EXPECTED = {
    "attr_wrong_type.pbtxt": "attr-type",
    "control_input_before_data.pbtxt": "control-before-data",
    "cycle_without_nextiteration.pbtxt": "cycle",
    "duplicate_node_name.pbtxt": "duplicate-name",
    "enter_frame_mismatch.pbtxt": "enter-frame-mismatch",
    "missing_input_node.pbtxt": "missing-input",
    "output_slot_out_of_range.pbtxt": "output-out-of-range",
    "unknown_op.pbtxt": "unknown-op",
    "wrong_input_count.pbtxt": "input-count",
}
UNREADABLE = ["broken_syntax.pbtxt", "garbage.pb", "truncated.pb"]

WARN_GRAPH = """
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "_class" value { list { s: "loc:@nowhere" } } } }
"""


def invoke(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", *map(str, args)],
                          input=stdin, capture_output=True, env=env, timeout=120)


def one_line_error(stderr: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("dfg: error: ")
    assert "Traceback" not in stderr


# --- validate -------------------------------------------------------------------------------

def test_validate_clean_graphs_exit_0():
    cases = sorted(DATA.glob("*/graph.pbtxt"))
    r = invoke("validate", *cases, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [o["file"] for o in out] == [str(c) for c in cases]
    assert all(o["valid"] and o["errors"] == 0 and o["diagnostics"] == [] for o in out)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_invalid_file_exit_1_with_code(name):
    r = invoke("validate", INVALID / name, "--json")
    assert r.exit_code == 1
    (result,) = json.loads(r.stdout)
    assert result["valid"] is False and result["errors"] >= 1
    assert EXPECTED[name] in [d["code"] for d in result["diagnostics"]]


@pytest.mark.parametrize("name", UNREADABLE)
def test_validate_unreadable_exit_2_one_line(name):
    p = run("validate", INVALID / name)
    assert p.returncode == 2
    one_line_error(p.stderr.decode())
    assert name in p.stderr.decode()
    assert p.stdout == b""


def test_validate_subprocess_text_output():
    p = run("validate", INVALID / "cycle_without_nextiteration.pbtxt", DAG)
    assert p.returncode == 1
    out = p.stdout.decode()
    assert "cycle" in out and "c -> e -> c" in out
    assert f"{DAG}: valid" in out
    assert p.stderr == b""


def test_validate_mixed_readable_and_unreadable():
    r = invoke("validate", DAG, INVALID / "garbage.pb", INVALID / "truncated.pb", "--json")
    assert r.exit_code == 2
    out = json.loads(r.stdout)
    assert [o["file"] for o in out] == [str(DAG)]
    one_line_error(r.stderr)
    assert "garbage.pb" in r.stderr and "1 more" in r.stderr


def test_validate_json_schema():
    r = invoke("validate", INVALID / "missing_input_node.pbtxt", "--json")
    (result,) = json.loads(r.stdout)
    assert list(result) == ["file", "valid", "nodes", "errors", "warnings", "diagnostics"]
    (d,) = result["diagnostics"]
    assert list(d)[:5] == ["code", "severity", "node", "op", "message"]
    assert (d["code"], d["severity"], d["node"], d["op"]) == (
        "missing-input", "error", "e", "AddV2")
    assert result["nodes"] == 5


def test_warnings_pass_unless_strict(tmp_path):
    g = tmp_path / "warn.pbtxt"
    g.write_text(WARN_GRAPH)
    r = invoke("validate", g, "--json")
    assert r.exit_code == 0
    (result,) = json.loads(r.stdout)
    assert result["valid"] and result["warnings"] == 1
    assert result["diagnostics"][0]["code"] == "colocation-missing"
    r = invoke("validate", g, "--strict", "--json")
    assert r.exit_code == 1
    assert json.loads(r.stdout)[0]["valid"] is False
    assert invoke("validate", g, "--strict").exit_code == 1


def test_validate_reads_stdin():
    r = invoke("validate", "-", stdin=DAG.read_bytes())
    assert r.exit_code == 0 and "valid" in r.stdout


def test_validate_help_documents_every_code_and_the_schema():
    r = invoke("validate", "--help")
    assert r.exit_code == 0
    for code, (severity, _meaning) in CODES.items():
        assert f"{code} ({severity})" in r.stdout, code
    assert '"diagnostics"' in r.stdout and "Example" in r.stdout


# --- prune --------------------------------------------------------------------------------------

def parse_pbtxt(data: bytes | str) -> graph_pb2.GraphDef:
    gd = graph_pb2.GraphDef()
    text_format.Parse(data if isinstance(data, str) else data.decode(), gd)
    return gd


def test_prune_to_stdout_as_pbtxt():
    r = invoke("prune", DAG, "--fetch", "c")
    assert r.exit_code == 0, r.output
    gd = parse_pbtxt(r.stdout)
    assert sorted(n.name for n in gd.node) == ["a", "b", "c"]


def test_prune_feed_and_comma_lists():
    r = invoke("prune", DAG, "--fetch", "e", "--feed", "c:0,d")
    assert r.exit_code == 0, r.output
    gd = parse_pbtxt(r.stdout)
    assert [(n.name, n.op) for n in gd.node] == [
        ("c", "Placeholder"), ("d", "Placeholder"), ("e", "AddV2")]


def test_prune_output_formats(tmp_path):
    out = tmp_path / "small.pb"
    r = invoke("prune", WHILE, "--fetch", "counter/Exit", "-o", out)
    assert r.exit_code == 0 and r.stdout == ""
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(out.read_bytes())  # binary, from the extension
    assert len(gd.node) == 13
    r = invoke("prune", WHILE, "--fetch", "counter/Exit", "--to", "json")
    assert r.exit_code == 0
    assert len(json.loads(r.stdout)["node"]) == 13
    txt = tmp_path / "x.pbtxt"
    assert invoke("prune", DAG, "--fetch", "d", "-o", txt).exit_code == 0
    assert [n.name for n in parse_pbtxt(txt.read_text()).node] == ["a", "b", "d"]


def test_prune_targets():
    g = DATA / "variables_ref" / "graph.pbtxt"
    r = invoke("prune", g, "--target", "init")
    assert r.exit_code == 0, r.output
    names = {n.name for n in parse_pbtxt(r.stdout).node}
    assert {"init", "w/Assign", "v/Assign", "counter/Assign"} <= names
    assert "total" not in names


def test_prune_pipes_into_info_and_validate():
    p1 = run("prune", WHILE, "--fetch", "counter/Exit", "--feed", "start")
    assert p1.returncode == 0, p1.stderr
    p2 = run("info", "-", "--json", stdin=p1.stdout)
    assert p2.returncode == 0, p2.stderr
    info = json.loads(p2.stdout)
    assert info["nodes"] == 13
    assert {i["name"] for i in info["inputs"]} == {"n", "start"}
    p3 = run("validate", "-", stdin=p1.stdout)
    assert p3.returncode == 0, p3.stdout


def test_prune_missing_fetch_exit_1_with_suggestion():
    p = run("prune", DAG, "--fetch", "ee")
    assert p.returncode == 1
    one_line_error(p.stderr.decode())
    assert "did you mean 'e'" in p.stderr.decode()
    assert p.stdout == b""


@pytest.mark.parametrize("args", [
    ["--fetch", "^e"],
    ["--fetch", "e:x"],
    [],                                   # nothing to keep
    ["--fetch", "e", "--feed", "c=1.0"],  # prune takes names, not values
    ["--target", "e:0"],
])
def test_prune_usage_errors_exit_2(args):
    p = run("prune", DAG, *args)
    assert p.returncode == 2
    one_line_error(p.stderr.decode())


def test_prune_unreadable_graph_exit_2():
    p = run("prune", INVALID / "truncated.pb", "--fetch", "c")
    assert p.returncode == 2
    one_line_error(p.stderr.decode())


def test_prune_feed_inside_loop_exit_1():
    r = invoke("prune", WHILE, "--fetch", "counter/Exit", "--feed", "counter/Add")
    assert r.exit_code == 1
    one_line_error(r.stderr)
    assert "while-loop" in r.stderr


def test_prune_help_has_example():
    r = invoke("prune", "--help")
    assert r.exit_code == 0
    assert "Example" in r.stdout and "--feed" in r.stdout and "strip_unused" in r.stdout
