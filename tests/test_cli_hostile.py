"""The CLI against hostile or careless input: integer feeds out of range, pickled and garbage
.npy/.npz feeds (never unpickled), control characters, markup and emoji codes in node names,
absurdly nested literals, interrupts, and optimize --verify when nothing can be compared.
Every failure must be one line on stderr with the right exit status, never a traceback or an
``internal error``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.feeds import split_feeds
from dfg.cli.main import cli
from dfg.graphdef.text import printable

DATA = Path(__file__).resolve().parent / "data" / "conformance"
WHILE = DATA / "while_counter" / "graph.pbtxt"   # placeholder n: int32
CNN = DATA / "cnn" / "graph.pbtxt"


def invoke(*args, input: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def dfg(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "dfg.cli", *map(str, args)], input=stdin,
                          capture_output=True, env=env, timeout=120)


def one_line_error(stderr: str | bytes, *words: str) -> str:
    if isinstance(stderr, bytes):
        stderr = stderr.decode()
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfg: error: "), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    for w in words:
        assert w in lines[0], stderr
    return lines[0]


# --- printable -----------------------------------------------------------------------------

def test_printable_escapes_c0_c1_and_del_only():
    assert printable("a\x1b[2Jb\n\t\x00\x7f\x85\x9f") == "a\\x1b[2Jb\\x0a\\x09\\x00\\x7f\\x85\\x9f"
    kept = "plain/name_1:0 é 名前 \u00a0 [bold] :smile:"
    assert printable(kept) == kept


# --- integer feeds out of range ------------------------------------------------------------

@pytest.mark.parametrize("value,bad", [("99999999999", "99999999999"),
                                       ("-2147483649", "-2147483649"),
                                       ("[1,[2,4294967296]]", "4294967296"),
                                       ("123456789012345678901234567890",
                                        "123456789012345678901234567890")])
def test_int_feed_out_of_range_is_exit_2(value, bad):
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n={value}")
    assert r.exit_code == 2
    one_line_error(r.stderr, "--feed n", bad, "int32", "-2147483648..2147483647")


def test_int_feed_at_the_edge_of_the_range_runs():
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", "n=-2147483648", "--json")
    assert r.exit_code == 0, r.output
    # the loop counts while i < n: from 0, never for a negative n (TensorFlow's while_loop)
    assert json.loads(r.stdout)["fetches"][0]["value"] == 0


def test_int_feed_out_of_range_in_bench_and_compare_and_a_real_process():
    r = invoke("bench", WHILE, "--fetch", "counter/Exit", "--feed", "n=99999999999")
    assert r.exit_code == 2
    one_line_error(r.stderr, "int32")
    r = invoke("compare", WHILE, WHILE, "--fetch", "counter/Exit", "--feed", "n=3000000000")
    assert r.exit_code == 2
    one_line_error(r.stderr, "int32")
    p = dfg("run", WHILE, "--fetch", "counter/Exit", "--feed", "n=99999999999")
    assert p.returncode == 2
    one_line_error(p.stderr, "out of range for int32")


def test_int_feed_out_of_range_for_a_saved_model_signature_key():
    sm = Path(__file__).resolve().parent / "data" / "savedmodels" / "zoo_text_lstm"
    r = invoke("run", sm, "--signature", "logits", "--feed", "tokens=[[99999999999]]")
    assert r.exit_code == 2
    one_line_error(r.stderr, "--feed tokens", "int32")


# --- .npy / .npz feeds ---------------------------------------------------------------------

class _Trap:
    """Unpickling this creates ``path``: the proof that a feed file was unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_pickled_feeds_are_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    arr = np.empty(1, dtype=object)
    arr[0] = _Trap(marker)
    npy, npz = tmp_path / "evil.npy", tmp_path / "evil.npz"
    np.save(npy, arr, allow_pickle=True)
    np.savez(npz, n=arr)
    for spec in (f"n=@{npy}", f"n=@{npz}", f"n=@{npz}:n"):
        r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", spec)
        assert r.exit_code == 2, spec
        one_line_error(r.stderr, "pickled")
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"garbage", b"", b"PK\x03\x04broken zip",
                                     b"\x93NUMPY\x01\x00truncated"])
@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_garbage_feed_files_are_exit_2(tmp_path, content, suffix):
    f = tmp_path / f"bad{suffix}"
    f.write_bytes(content)
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n=@{f}")
    assert r.exit_code == 2
    one_line_error(r.stderr, f.name)


def test_feed_file_errors_name_the_keys(tmp_path):
    f = tmp_path / "two.npz"
    np.savez(f, a=np.int32(1), b=np.int32(2))
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n=@{f}")
    assert r.exit_code == 2
    one_line_error(r.stderr, "keys: a, b")
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n=@{f}:c")
    one_line_error(r.stderr, "no array 'c'")
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n=@{f}:b", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["fetches"][0]["value"] == 2
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed", f"n=@{tmp_path / 'no.npy'}")
    assert r.exit_code == 2
    one_line_error(r.stderr, "no.npy")


def test_absurdly_nested_literal_is_exit_2():
    r = invoke("run", WHILE, "--fetch", "counter/Exit", "--feed",
               "n=" + "[" * 100_000 + "]" * 100_000)
    assert r.exit_code == 2
    one_line_error(r.stderr, "--feed")


def test_feed_lists_split_only_where_a_new_feed_starts():
    assert split_feeds("a=1,b=[1,2],c:0=@x.npz:k") == ["a=1", "b=[1,2]", "c:0=@x.npz:k"]
    assert split_feeds("s=hello,world") == ["s=hello,world"]          # a string with a comma
    assert split_feeds('s="x,y=1",t=2') == ['s="x,y=1"', "t=2"]       # quoted: kept whole
    assert split_feeds("m=[[1,2],[3,4]]") == ["m=[[1,2],[3,4]]"]


# --- names that attack the terminal --------------------------------------------------------

EVIL = "x\x1b[2J\x1b]0;pwned\x07evil\nline\x9b"


def _evil_graph(tmp_path: Path) -> Path:
    g = tmp_path / "evil.pbtxt"
    esc = EVIL.encode("utf-8").decode("latin-1")      # pbtxt octal escapes, byte by byte
    quoted = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else f"\\{ord(c):03o}"
                     for c in esc)
    g.write_text(
        f'node {{ name: "{quoted}" op: "Placeholder" '
        'attr { key: "dtype" value { type: DT_FLOAT } } }\n'
        f'node {{ name: "y" op: "Identity" input: "{quoted}" '
        'attr { key: "T" value { type: DT_FLOAT } } }\n'
        'node { name: "[bold]m[/bold]:smile:" op: "Placeholder" '
        'attr { key: "dtype" value { type: DT_FLOAT } } }\n')
    return g


def _no_raw_controls(text: str) -> None:
    assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) <= 0x9f for c in text), \
        repr(text)


def test_control_characters_are_escaped_in_validate_info_and_errors(tmp_path):
    g = _evil_graph(tmp_path)
    escaped = printable(EVIL)
    p = dfg("validate", g)
    assert p.returncode == 1
    out = p.stdout.decode()
    _no_raw_controls(out)
    assert escaped in out and "invalid-name" in out
    p = dfg("info", g)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    _no_raw_controls(out)
    assert escaped in out
    # markup and emoji codes are shown as written, not interpreted
    assert "[bold]m[/bold]:smile:" in out
    p = dfg("run", g, "--fetch", "y", "--feed", "[bold]m[/bold]:smile:=1")
    assert p.returncode != 0
    err = p.stderr.decode()
    _no_raw_controls(err)
    assert len(err.splitlines()) == 1
    # the JSON keeps the exact name (JSON escapes it)
    doc = json.loads(dfg("info", g, "--json").stdout)
    assert EVIL in {i["name"] for i in doc["inputs"]}


# --- optimize --verify ---------------------------------------------------------------------

ASSERT_GRAPH = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 2 } } } } }
node { name: "no" op: "Const" attr { key: "dtype" value { type: DT_BOOL } }
       attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape { } bool_val: false } } } }
node { name: "check" op: "Assert" input: "no" input: "x"
       attr { key: "T" value { list { type: DT_FLOAT } } }
       attr { key: "summarize" value { i: 3 } } }
node { name: "y" op: "Identity" input: "x" input: "^check"
       attr { key: "T" value { type: DT_FLOAT } } }
"""


def test_verify_prints_its_verdict_without_report(tmp_path):
    r = invoke("optimize", CNN, "--fetch", "logits", "--verify")
    assert r.exit_code == 0, r.output
    assert "verify: ok: 1 fetch(es) agree" in r.stderr       # stdout is the graph
    assert "verify" not in r.stdout
    out = tmp_path / "o.pb"
    r = invoke("optimize", CNN, "--fetch", "logits", "--verify", "-o", out)
    assert r.exit_code == 0 and out.exists()
    assert "verify: ok" in r.stdout                           # stdout is free: the verdict


def test_verify_that_compares_nothing_fails(tmp_path):
    g = tmp_path / "assert.pbtxt"
    g.write_text(ASSERT_GRAPH)
    out = tmp_path / "o.pbtxt"
    r = invoke("optimize", g, "--fetch", "y", "--verify", "-o", out)
    assert r.exit_code == 1
    assert "verify: NOTHING COMPARED" in r.stdout
    one_line_error(r.stderr, "could not compare anything", "both graphs fail the same way")
    assert not out.exists()
    r = invoke("optimize", g, "--fetch", "y", "--verify", "--json", "-o", out)
    assert r.exit_code == 1
    v = json.loads(r.stdout)["verify"]
    assert v["ok"] and v["nothing_compared"] and v["compared"] == []


# --- interrupts ----------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIONREAD on a pipe")
def _default_sigint() -> None:
    """In the child: SIGINT's default action, whatever pytest inherited (a shell starts a
    background job with SIGINT ignored, and Python then keeps it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_interrupt_is_exit_130_and_one_line(tmp_path):
    """dfg blocks reading the graph from standard input (a pipe kept open); once it has
    drained the byte written first it is surely inside the command; SIGINT then ends it
    with 130 and one line. (A FIFO as a feed file is refused now, not waited on.)"""
    import fcntl
    import termios

    env = {**os.environ, "NO_COLOR": "1"}
    p = subprocess.Popen([sys.executable, "-m", "dfg.cli", "run", "-", "--fetch",
                          "counter/Exit"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, preexec_fn=_default_sigint)
    p.stdin.write(b" ")
    p.stdin.flush()
    deadline = time.monotonic() + 60
    pending = bytearray(4)
    while True:      # the byte is gone from the pipe once dfg is reading its input
        fcntl.ioctl(p.stdin.fileno(), termios.FIONREAD, pending)
        if int.from_bytes(pending, sys.byteorder) == 0:
            break
        assert time.monotonic() < deadline and p.poll() is None, p.stderr.read()
        time.sleep(0.05)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    # stdin stays open until dfg has exited, so that end of input can never be what ends it
    p.wait(timeout=60)
    out, err = p.stdout.read(), p.stderr.read()
    p.stdin.close()
    assert p.returncode == 130, err
    assert err.decode().splitlines() == ["dfg: interrupted"]
    assert out == b""


@pytest.mark.parametrize("command", ["bench", "profile", "compare"])
def test_timeout_bounds_bench_profile_and_compare(command):
    """A loop of 2**31-1 iterations (hours) under --timeout 1: each command ends with exit 1
    and one line naming the timeout, as dfg run does (they had no --timeout)."""
    graphs = [WHILE, WHILE] if command == "compare" else [WHILE]
    r = dfg(command, *graphs, "--fetch", "counter/Exit", "--feed", "n=2147483647",
            "--timeout", "1")
    assert r.returncode == 1, r.stderr
    line = one_line_error(r.stderr)
    assert "timed out" in line or "--timeout" in line, line


def test_compare_refuses_an_output_over_max_memory(tmp_path):
    """dfg compare has --max-memory too: a 4 MB Fill under a 1M budget is refused in both
    graphs before it is allocated, so nothing is compared (exit 1); with 8M it agrees."""
    from dfg.graphdef import builder as B

    g = B.Graph()
    with g.as_default():
        B.apply_op("Fill", [B.constant([1000, 1000]), B.constant(1.0)], name="big")
    p = tmp_path / "fill.pb"
    p.write_bytes(g.as_graph_def().SerializeToString())
    r = invoke("compare", p, p, "--fetch", "big", "--max-memory", "1M", "--json")
    assert r.exit_code == 1, r.output
    d = json.loads(r.output)
    assert d["nothing_compared"] is True
    # the Fill, or the Const it folds into when the run-time optimizer runs first
    assert "4,000,000 bytes" in d["error_a"] and "node 'big' (" in d["error_a"], d
    r = invoke("compare", p, p, "--fetch", "big", "--max-memory", "8M", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["ok"] is True, r.output


# --- function libraries that would explode when inlined ------------------------------------

def _library_graph(n: int, calls_per_level: int):
    """f0 .. f{n-1}: each calls the next ``calls_per_level`` times (and, with two calls, adds
    the results); the last is an Identity. A top-level node 'call' calls f0."""
    from dfg.schemas import graph_pb2

    g = graph_pb2.GraphDef()
    for i in range(n):
        f = g.library.function.add()
        f.signature.name = f"f{i}"
        f.signature.input_arg.add(name="x", type=1)
        f.signature.output_arg.add(name="y", type=1)
        if i + 1 == n:
            f.node_def.add(name="c", op="Identity", input=["x"]).attr["T"].type = 1
            f.ret["y"] = "c:output:0"
            continue
        for k in "ab"[:calls_per_level]:
            f.node_def.add(name=k, op=f"f{i + 1}", input=["x"])
        if calls_per_level == 2:
            f.node_def.add(name="s", op="AddV2", input=["a:y:0", "b:y:0"]).attr["T"].type = 1
            f.ret["y"] = "s:z:0"
        else:
            f.ret["y"] = "a:y:0"
    g.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    g.node.add(name="call", op="f0", input=["x"])
    return g


def test_calls_that_would_explode_when_inlined_are_refused_before(tmp_path):
    """40 functions each calling the next twice: a 3 KB file standing for 2**41 - 2 nodes
    (f_i has a, b and s; count(f_i) = 3 + 2 count(f_i+1), count(f39) = 1). dfg run hung
    building them; now one line, exit 1, nothing inlined. A chain of 10,000 single calls
    (names grow with depth: 10**8 bytes of names) is refused too; 200 levels run."""
    p = tmp_path / "diamond.pb"
    p.write_bytes(_library_graph(40, 2).SerializeToString())
    r = dfg("run", p, "--fetch", "call", "--feed", "x=1.0")
    assert r.returncode == 1, r.stderr
    one_line_error(r.stderr, "refusing to inline", f"{2**41 - 2:,} nodes", "'call' (f0)")
    p = tmp_path / "chain.pb"
    p.write_bytes(_library_graph(10_000, 1).SerializeToString())
    r = dfg("run", p, "--fetch", "call", "--feed", "x=1.0")
    assert r.returncode == 1, r.stderr
    one_line_error(r.stderr, "refusing to inline", "bytes of node names")
    p = tmp_path / "short.pb"
    p.write_bytes(_library_graph(200, 1).SerializeToString())
    r = invoke("run", p, "--fetch", "call", "--feed", "x=2.5", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["fetches"][0]["value"] == 2.5
