"""Hostile input and interrupted output: each case a tiny committed file under
tests/data/hostile (written by its generate.py), run through the real ``dfg`` in a subprocess
capped at 2 GB of address space. Every one must end quickly with exit 1 or 2 and exactly one
line on stderr, no traceback; writes killed half-way must leave no temp file and no partial
target."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dfg.graphdef.atomic import TMP_MARK, remove_stale, temp_name, write_atomic
from dfg.graphdef.errors import GraphLoadError, InvalidGraphError
from dfg.graphdef.io import load_graphdef, save_graphdef, serialize, too_deep
from dfg.schemas import graph_pb2

HOSTILE = Path(__file__).resolve().parent / "data" / "hostile"
LIMIT_AS = 2 << 30
CPU_SECONDS = 2.0
needs_dot = pytest.mark.skipif(not any(
    os.access(os.path.join(d, "dot"), os.X_OK) for d in os.environ.get("PATH", "").split(":")),
    reason="Graphviz 'dot' not installed")


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def dfg(*args: str, cwd: Path | None = None) -> tuple[int, str, str, float]:
    """Exit status, stdout, stderr and CPU seconds of ``dfg ARGS`` under the 2 GB cap."""
    import tempfile
    import threading

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NO_COLOR="1")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([sys.executable, "-m", "dfg.cli.main", *args], cwd=cwd, env=env,
                             stdout=out, stderr=err, preexec_fn=_cap)
        hang_guard = threading.Timer(60, p.kill)   # the bound tested is on CPU time
        hang_guard.start()
        try:
            # wait4: this child's own CPU time (wall time depends on the machine's load)
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            hang_guard.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (p.returncode, out.read().decode(errors="replace"),
                err.read().decode(errors="replace"), usage.ru_utime + usage.ru_stime)


# file -> (exit status, words the one stderr line must hold)
UNREADABLE = {
    "empty.pb": (2, "empty (0 bytes)"),
    "whitespace.pbtxt": (2, "empty"),
    "nested_120.pbtxt": (2, "nested deeper than protobuf's limit of 100"),
    "nested_40_funcs.pb": (2, "nested deeper than protobuf's limit of 100"),
    "fake_savedmodel.pb": (2, "this is a SavedModel"),
    "fake_onnx.pb": (2, "ONNX"),
    "tiny.onnx": (2, "ONNX"),
    "fake.tflite": (2, "TensorFlow Lite"),
    "fake_keras.h5": (2, "HDF5"),
    "fake.keras": (2, "zip archive"),
    "giant_line.pbtxt": (2, "line 2, column 6"),
}
COMMANDS = {
    "validate": lambda f, tmp: ["validate", str(f)],
    "info": lambda f, tmp: ["info", str(f)],
    "viz": lambda f, tmp: ["viz", str(f), "-o", str(tmp / "g.dot")],
    "convert": lambda f, tmp: ["convert", str(f), "-o", str(tmp / "g.pb")],
}


def one_line_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err[:2000]
    assert "Traceback" not in err and "internal error" not in err, err[:2000]
    assert lines[0].startswith("dfg: error: "), lines[0]
    return lines[0]


def test_committed_files_are_what_the_generator_writes(tmp_path: Path) -> None:
    sys.path.insert(0, str(HOSTILE))
    try:
        import generate  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    generate.HERE = tmp_path
    generate.main()
    for p in tmp_path.iterdir():
        assert p.read_bytes() == (HOSTILE / p.name).read_bytes(), p.name


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name", list(UNREADABLE))
def test_unreadable_input_is_one_line_and_exit_2(name: str, command: str,
                                                  tmp_path: Path) -> None:
    code, words = UNREADABLE[name]
    rc, out, err, cpu = dfg(*COMMANDS[command](HOSTILE / name, tmp_path))
    line = one_line_error(err)
    assert rc == code, (rc, line)
    assert words in line, line
    assert name in line
    assert len(line) <= 400, len(line)      # quotes at most ~200 characters of input
    assert cpu < CPU_SECONDS, cpu
    assert list(tmp_path.iterdir()) == []   # nothing written


def test_giant_line_is_quoted_short() -> None:
    rc, out, err, _ = dfg("validate", str(HOSTILE / "giant_line.pbtxt"))
    line = one_line_error(err)
    assert "x" * 61 not in line and "(20,002 characters)" in line
    assert 'Expected "{"' in line     # the parser's explanation survives the cut


def test_huge_shape_const_is_a_validation_error_not_a_crash(tmp_path: Path) -> None:
    rc, out, err, cpu = dfg("validate", str(HOSTILE / "huge_shape_const.pbtxt"), "--json")
    assert rc == 1 and err == "", err
    import json

    (result,) = json.loads(out)
    codes = {d["code"]: d for d in result["diagnostics"]}
    assert "shape-overflow" in codes
    assert codes["shape-overflow"]["node"] == "huge"
    assert "1208925819614629174706176 elements" in codes["shape-overflow"]["message"]
    assert cpu < CPU_SECONDS
    for command in ("info", "viz", "convert"):
        rc, out, err, cpu = dfg(*COMMANDS[command](HOSTILE / "huge_shape_const.pbtxt",
                                                   tmp_path))
        assert rc == 0 and err == "", (command, err)   # describing it is fine
        assert cpu < CPU_SECONDS


def test_control_character_names_validate_as_invalid_names() -> None:
    rc, out, err, _ = dfg("validate", str(HOSTILE / "control_names.pbtxt"), "--json")
    assert rc == 1 and err == ""
    import json

    (result,) = json.loads(out)
    bad = {d["node"] for d in result["diagnostics"] if d["code"] == "invalid-name"}
    assert "x\x1b[31mred\x07" in bad and "&name;" in bad and "new\nline" in bad


@needs_dot
def test_viz_svg_is_valid_xml_for_any_node_name(tmp_path: Path) -> None:
    svg = tmp_path / "g.svg"
    rc, out, err, _ = dfg("viz", str(HOSTILE / "control_names.pbtxt"), "-o", str(svg))
    assert rc == 0, err
    root = ET.parse(svg).getroot()     # raises on an undefined entity or a control char
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(f"{ns}text")]
    titles = [t.text for t in root.iter(f"{ns}title")]
    # the names are shown, with controls escaped as printable() writes them
    for shown in ("&name;", '<title>"q"</title>', "a{b}|c", "x\\x1b[31mred\\x07",
                  "nul\\x00byte", "del\\x7f"):
        assert shown in texts, (shown, texts)
    # 8 nodes, 7 edges: no node merged or invented by the escaping of ids
    assert len([t for t in titles if t and t.startswith("n:") and "->" not in t]) == 8
    assert len([t for t in titles if t and "->" in t]) == 7


def test_reading_depth_at_the_limit_round_trips_and_past_it_is_refused(tmp_path) -> None:
    sys.path.insert(0, str(HOSTILE))
    try:
        import generate  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    ok = generate.nested_graphdef(32)      # 4 + 3 * 32 = 100 messages deep: the limit
    assert not too_deep(ok)
    for fmt in ("pb", "pbtxt", "json"):
        assert load_graphdef(serialize(ok, fmt)) == ok
    deep = generate.nested_graphdef(33)    # 103 deep
    assert too_deep(deep)
    for fmt in ("pb", "pbtxt", "json"):
        out = tmp_path / f"deep.{fmt}"
        with pytest.raises(InvalidGraphError, match="deeper than protobuf's limit of 100"):
            save_graphdef(deep, out, fmt)
        assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(GraphLoadError, match="nested deeper"):
        load_graphdef(deep.SerializeToString())
    with pytest.raises(GraphLoadError, match="nested deeper"):
        load_graphdef(generate.nested_pbtxt(200).encode())


def test_big_pbtxt_is_read_in_batches_with_true_line_numbers() -> None:
    from google.protobuf import text_format

    gd = graph_pb2.GraphDef()
    for i in range(30_000):   # about 1.5 MB of text: two batches or more
        n = gd.node.add(name=f"n{i}", op="Identity" if i else "Placeholder")
        if i:
            n.input.append(f"n{i - 1}")
    gd.versions.producer = 1234
    text = text_format.MessageToString(gd)
    assert len(text) > 1 << 20
    assert load_graphdef(text.encode()) == gd
    lines = text.split("\n")
    bad_line = max(i for i, line in enumerate(lines) if "name:" in line) + 1  # in the last batch
    lines[bad_line - 1] = lines[bad_line - 1].replace("name:", "nmae:")
    with pytest.raises(GraphLoadError) as ei:
        load_graphdef("\n".join(lines).encode())
    assert f"line {bad_line}, column" in str(ei.value)


# --- atomic writes --------------------------------------------------------------------------

def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temp_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "g.pb"
    stale = temp_name(target, pid=_dead_pid())
    stale.write_bytes(b"half")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = temp_name(target, pid=sleeper.pid)
        live.write_bytes(b"busy")
        other = temp_name(tmp_path / "other.pb", pid=_dead_pid())
        other.write_bytes(b"not ours to judge")
        write_atomic(target, b"complete")
        assert target.read_bytes() == b"complete"
        assert not stale.exists()
        assert live.exists() and other.exists()
        assert remove_stale(tmp_path / "other.pb") == [other]
    finally:
        sleeper.kill()
        sleeper.wait()


SELF_TERM = r"""
import os, signal, sys
from dfg.graphdef.atomic import write_atomic
def chunks():
    yield b"a" * 1000
    os.kill(os.getpid(), signal.{sig})   # the signal arrives in the middle of the write
    yield b"b" * 1000
write_atomic(sys.argv[1], chunks())
print("not reached")
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_signal_during_write_removes_the_temp_file(sig: str, tmp_path: Path) -> None:
    target = tmp_path / "out.pb"
    # the signal's default action in the child, whatever pytest inherited (a background
    # job of a shell ignores SIGINT, and so would the child)
    p = subprocess.run([sys.executable, "-c", SELF_TERM.replace("{sig}", sig), str(target)],
                       capture_output=True,
                       preexec_fn=lambda: signal.signal(getattr(signal, sig), signal.SIG_DFL))
    # still dies of the signal (SIGINT: Python's own handler raised KeyboardInterrupt)
    assert p.returncode == -getattr(signal, sig)
    assert (b"KeyboardInterrupt" in p.stderr) == (sig == "SIGINT")
    assert b"not reached" not in p.stdout
    assert list(tmp_path.iterdir()) == []


def test_sigterm_and_sigkill_during_dfg_convert(tmp_path: Path) -> None:
    """Kill ``dfg convert`` while its temp file exists: SIGTERM leaves nothing; SIGKILL leaves
    a temp file that the next write to the same path removes. The target is never partial."""
    from dfg.schemas import types_pb2

    gd = graph_pb2.GraphDef()
    c = gd.node.add(name="big", op="Const")
    c.attr["dtype"].type = types_pb2.DT_FLOAT
    t = c.attr["value"].tensor
    t.dtype = types_pb2.DT_FLOAT
    t.tensor_shape.dim.add().size = 32 << 20
    t.tensor_content = bytes(128 << 20)     # 128 MB: the write takes a moment
    src = tmp_path / "src.pb"
    src.write_bytes(gd.SerializeToString())
    expected = src.read_bytes()
    del gd, t, c
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "copy.pb"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        caught = False
        for _attempt in range(5):
            p = subprocess.Popen([sys.executable, "-m", "dfg.cli.main", "convert", str(src),
                                  "-o", str(target)], stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while p.poll() is None and time.monotonic() < deadline:
                if any(TMP_MARK in e.name for e in os.scandir(out_dir)):
                    p.send_signal(sig)
                    caught = True
                    break
                time.sleep(0.001)
            p.wait(timeout=60)
            if caught:
                break
            target.unlink()   # finished before we saw its temp file: try again
        assert caught, "never saw the write under way"
        assert p.returncode == -sig
        left = [e.name for e in os.scandir(out_dir)]
        if sig == signal.SIGTERM:
            assert left == [] or left == ["copy.pb"], left
        else:
            assert any(TMP_MARK in name for name in left), left
        assert not target.exists() or target.read_bytes() == expected
    # the next write removes the dead process's temp file
    rc, out, err, _ = dfg("convert", str(HOSTILE / "control_names.pbtxt"), "-o", str(target))
    assert rc == 0, err
    assert [e.name for e in os.scandir(out_dir)] == ["copy.pb"]


def test_graphdefs_that_look_like_other_formats_still_load() -> None:
    """The sniffing of other formats must not refuse real GraphDefs: a first node named
    "TFL3..." puts those bytes where TFLite keeps its identifier; names starting "PK" or
    with HDF5's signature bytes are inside a message, never at byte 0."""
    for name in ("TFL3abc", "PK\x03\x04", "\x89HDF"):
        gd = graph_pb2.GraphDef()
        gd.node.add(name=name, op="NoOp")
        for fmt in ("pb", "pbtxt", "json"):
            assert load_graphdef(serialize(gd, fmt)) == gd, (name, fmt)


def test_big_string_literal_reads_back_exactly_and_in_bounded_memory(tmp_path: Path) -> None:
    """A 4 MB tensor_content is a 12+ MB line of escapes: read back byte for byte, in a
    process capped at 2 GB (it once took ~100 times the line's length)."""
    from google.protobuf import text_format

    from dfg.schemas import types_pb2

    gd = graph_pb2.GraphDef()
    c = gd.node.add(name="big", op="Const")
    c.attr["dtype"].type = types_pb2.DT_FLOAT
    t = c.attr["value"].tensor
    t.dtype = types_pb2.DT_FLOAT
    t.tensor_shape.dim.add().size = 1 << 20
    t.tensor_content = bytes(range(256)) * (1 << 14)      # every escape: \000 ... \377
    s = c.attr["s"].list
    s.s.extend([b"\"quoted\" and \\ backslash" * 5000, "unicode \u00e9".encode() * 9000])
    gd.node.add(name="after", op="NoOp")
    src = tmp_path / "big.pbtxt"
    src.write_text(text_format.MessageToString(gd))
    assert src.stat().st_size > 12_000_000
    rc, out, err, cpu = dfg("convert", str(src), "-o", str(tmp_path / "big.pb"))
    assert rc == 0, err
    assert graph_pb2.GraphDef.FromString((tmp_path / "big.pb").read_bytes()) == gd
    assert load_graphdef(src) == gd
