"""``dfg optimize`` from the command line: outputs and formats, --report/--json, pass
selection, --verify, exit codes and one-line errors; in-process with CliRunner and once as a
real subprocess. Expected values come from TensorFlow's conformance files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import json_format, text_format

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.graphdef.passes import PASSES, PassInfo
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"
CHAIN = DATA / "bench_add_chain"          # x + 0.5, 1000 times, then Identity chain_out
CNN = DATA / "cnn"


def invoke(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin)


def parse_pbtxt(text: str) -> graph_pb2.GraphDef:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return gd


def chain_expected() -> tuple[np.ndarray, np.ndarray]:
    case = json.loads((CHAIN / "case.json").read_text())
    step = case["steps"][0]
    x = np.load(CHAIN / step["feed"]["x:0"])
    return x, np.load(CHAIN / step["expect"]["chain_out:0"])


def check_chain(gd) -> None:
    x, expected = chain_expected()
    with Session(gd, threads=1) as sess:
        got = sess.run("chain_out:0", feed_dict={"x:0": x})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def one_line_error(stderr: str, *words: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfg: error: "), stderr
    for w in words:
        assert w in lines[0], stderr


def test_default_writes_pbtxt_on_stdout():
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--feed", "x")
    assert r.exit_code == 0, r.output
    gd = parse_pbtxt(r.stdout)
    assert len(gd.node) == 3            # x, one constant (500), chain_out = x + 500
    assert r.stderr == ""
    check_chain(gd)


@pytest.mark.parametrize("suffix,kind", [(".pb", "pb"), (".json", "json"), (".pbtxt", "pbtxt")])
def test_output_format_follows_the_extension(tmp_path, suffix, kind):
    out = tmp_path / f"opt{suffix}"
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "-o", out)
    assert r.exit_code == 0 and r.stdout == "", r.output
    gd = graph_pb2.GraphDef()
    if kind == "pb":
        gd.ParseFromString(out.read_bytes())
    elif kind == "json":
        json_format.Parse(out.read_text(), gd)
    else:
        text_format.Parse(out.read_text(), gd)
    check_chain(gd)


def test_to_overrides_the_extension(tmp_path):
    out = tmp_path / "opt.pbtxt"
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "-o", out,
               "--to", "pb")
    assert r.exit_code == 0
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(out.read_bytes())
    assert len(gd.node) == 3


def test_report_goes_to_stderr_and_stdout_stays_the_graph():
    r = invoke("optimize", CNN / "graph.pbtxt", "--fetch", "logits", "--report")
    assert r.exit_code == 0
    parse_pbtxt(r.stdout)                               # still a graph, nothing else
    for word in ("pass", "nodes", "edges", "changed", "time", "fold_batch_norm", "total",
                 "25 -> 22"):
        assert word in r.stderr, r.stderr


def test_json_report_needs_an_output_file(tmp_path):
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--json")
    assert r.exit_code == 2
    one_line_error(r.stderr, "-o")
    out = tmp_path / "opt.pb"
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--json", "-o", out)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["graph"] == {"nodes_before": 1003, "nodes_after": 3,
                            "edges_before": 2001, "edges_after": 2}
    assert rep["passes"][:2] == ["lower_functional", "prune"]
    assert rep["converged"] and rep["verify"] is None
    assert rep["warnings"] == []
    rec = rep["records"][0]
    assert set(rec) == {"name", "round", "nodes_before", "nodes_after", "edges_before",
                        "edges_after", "changed", "seconds", "status", "message"}
    assert out.exists()


def test_passes_and_skip_select_what_runs():
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--passes", "prune")
    assert r.exit_code == 0 and len(parse_pbtxt(r.stdout).node) == 1003
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out",
               "--skip", "arithmetic")
    assert r.exit_code == 0 and len(parse_pbtxt(r.stdout).node) > 1000
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--passes",
               "prune,nope")
    assert r.exit_code == 2
    one_line_error(r.stderr, "unknown pass 'nope'", "constant_folding")


def test_max_const_bytes_limits_folding(tmp_path):
    src = tmp_path / "fill.pbtxt"
    src.write_text("""
node { name: "dims" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
                                       int_val: 100 } } } }
node { name: "v" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1.5 } } } }
node { name: "filled" op: "Fill" input: "dims" input: "v"
  attr { key: "T" value { type: DT_FLOAT } } attr { key: "index_type" value { type: DT_INT32 } } }
""")
    small = invoke("optimize", src, "--fetch", "filled", "--max-const-bytes", "100")
    big = invoke("optimize", src, "--fetch", "filled", "--max-const-bytes", "1k")
    assert small.exit_code == 0 and big.exit_code == 0
    assert {n.name: n.op for n in parse_pbtxt(small.stdout).node}["filled"] == "Fill"  # 400 B
    assert {n.name: n.op for n in parse_pbtxt(big.stdout).node}["filled"] == "Const"
    bad = invoke("optimize", src, "--fetch", "filled", "--max-const-bytes", "lots")
    assert bad.exit_code == 2


def test_usage_errors_and_missing_names():
    g = CHAIN / "graph.pbtxt"
    r = invoke("optimize", g)
    assert r.exit_code == 2
    one_line_error(r.stderr, "--fetch")
    r = invoke("optimize", g, "--fetch", "chain_out", "--feed", "x=1")
    assert r.exit_code == 2
    one_line_error(r.stderr, "--feed x")
    r = invoke("optimize", CNN / "graph.pbtxt", "--fetch", "logit")
    assert r.exit_code == 1
    one_line_error(r.stderr, "did you mean 'logits'")
    r = invoke("optimize", DATA / "invalid" / "missing_input_node.pbtxt", "--fetch", "x")
    assert r.exit_code == 1
    one_line_error(r.stderr, "not valid")
    r = invoke("optimize", DATA / "nope.pbtxt", "--fetch", "x")
    assert r.exit_code == 2


def test_verify_passes_on_a_correct_optimization(tmp_path):
    out = tmp_path / "opt.pb"
    r = invoke("optimize", DATA / "gradients" / "graph.pbtxt", "--fetch",
               "grads/AddN,grads/MatMul_grad/MatMul,loss", "--verify", "--report", "-o", out)
    assert r.exit_code == 0, r.output
    assert "verify: ok" in r.stderr and out.exists()


def _plant(monkeypatch, name: str, fn) -> None:
    monkeypatch.setitem(PASSES, name, PassInfo(name, fn, True, "test"))


def test_verify_catches_a_wrong_rewrite_and_writes_nothing(tmp_path, monkeypatch):
    from dfg.graphdef.passes.common import Editor, set_const

    def off_by_one(graph, options):     # a "pass" that rewrites the chain's constant wrongly
        ed = Editor(graph)
        for nd in ed.nodes.values():
            if nd.op == "Const":
                set_const(nd, np.float32(501.0), 1)
        return ed.finish()

    _plant(monkeypatch, "off_by_one", off_by_one)
    out = tmp_path / "opt.pb"
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out", "--verify", "-o", out)
    assert r.exit_code == 1
    one_line_error(r.stderr, "chain_out", "graph not written")
    assert not out.exists()


def test_a_failing_pass_is_a_warning_not_a_failure(monkeypatch):
    def boom(graph, options):
        raise ValueError("broken pass")

    _plant(monkeypatch, "boom", boom)
    r = invoke("optimize", CHAIN / "graph.pbtxt", "--fetch", "chain_out")
    assert r.exit_code == 0
    assert "dfg: warning: pass 'boom' raised ValueError: broken pass" in r.stderr
    check_chain(parse_pbtxt(r.stdout))


def test_help_documents_every_pass():
    r = invoke("optimize", "--help")
    assert r.exit_code == 0
    for name in PASSES:
        assert name in r.output
    assert "Example" in r.output


def test_real_process_reads_stdin_and_writes_a_file(tmp_path):
    out = tmp_path / "opt.pb"
    env = {**os.environ, "NO_COLOR": "1"}
    p = subprocess.run([sys.executable, "-m", "dfg.cli.main", "optimize", "-", "--fetch",
                        "chain_out", "--feed", "x", "-o", str(out), "--report"],
                       input=(CHAIN / "graph.pbtxt").read_bytes(), capture_output=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"" and b"total" in p.stderr
    gd = graph_pb2.GraphDef()
    gd.ParseFromString(out.read_bytes())
    check_chain(gd)


def test_verify_says_it_cannot_make_a_resource_input(tmp_path: Path) -> None:
    # TF's freezing leaves a lookup table's handle as a resource Placeholder
    g = tmp_path / "g.pbtxt"
    g.write_text(
        'node { name: "h" op: "Placeholder" attr { key: "dtype" value { type: DT_RESOURCE } } }\n'
        'node { name: "r" op: "ReadVariableOp" input: "h" '
        'attr { key: "dtype" value { type: DT_FLOAT } } }\n')
    r = CliRunner().invoke(cli, ["optimize", str(g), "--fetch", "r", "--verify",
                                 "-o", str(tmp_path / "o.pbtxt")])
    assert r.exit_code == 1
    assert "no random value for Placeholder 'h' of dtype resource" in r.output
    assert not (tmp_path / "o.pbtxt").exists()
