"""Graph I/O: every conformance graph loads, pbtxt -> pb equals TensorFlow's bytes, round trips
are stable, formats are detected from content, and unreadable input is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from dfg.graphdef.errors import GraphLoadError, UsageError
from dfg.graphdef.io import detect_format, load_graphdef, save_graphdef, serialize

DATA = Path(__file__).resolve().parent / "data" / "conformance"
PBTXT = sorted(DATA.glob("*/graph.pbtxt"))
PB = sorted(DATA.glob("*/graph.pb"))
INVALID = DATA / "invalid"


@pytest.mark.parametrize("path", PBTXT + PB, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_graph_loads(path: Path) -> None:
    gd = load_graphdef(path)
    assert len(gd.node) > 0
    assert gd.versions.producer > 0


@pytest.mark.parametrize("pb", PB, ids=lambda p: p.parent.name)
def test_pbtxt_to_pb_is_byte_identical_to_tensorflow(pb: Path) -> None:
    assert len(PB) >= 4
    gd = load_graphdef(pb.with_name("graph.pbtxt"))
    assert serialize(gd, "pb") == pb.read_bytes()


@pytest.mark.parametrize("path", PBTXT, ids=lambda p: p.parent.name)
def test_pbtxt_pb_pbtxt_is_stable(path: Path) -> None:
    gd = load_graphdef(path)
    text1 = serialize(gd, "pbtxt")
    again = load_graphdef(serialize(gd, "pb"))
    assert serialize(again, "pbtxt") == text1
    assert load_graphdef(serialize(gd, "json")) == gd


def test_format_detected_from_content_not_extension(tmp_path: Path) -> None:
    src = DATA / "dag_basic" / "graph.pbtxt"
    gd = load_graphdef(src)
    for fmt in ("pb", "pbtxt", "json"):
        p = tmp_path / "graph.misleading"
        p.write_bytes(serialize(gd, fmt))
        assert detect_format(p.read_bytes()) == fmt
        assert load_graphdef(p) == gd
    wrong = tmp_path / "actually_text.pb"
    wrong.write_bytes(serialize(gd, "pbtxt"))
    assert load_graphdef(wrong) == gd


def test_bytes_source() -> None:
    raw = (DATA / "dag_basic" / "graph.pb").read_bytes()
    assert load_graphdef(raw) == load_graphdef(DATA / "dag_basic" / "graph.pbtxt")


@pytest.mark.parametrize("name", ["truncated.pb", "garbage.pb", "broken_syntax.pbtxt"])
def test_unreadable_files_raise_one_load_error_naming_the_file(name: str) -> None:
    with pytest.raises(GraphLoadError) as ei:
        load_graphdef(INVALID / name)
    msg = str(ei.value)
    assert name in msg and "\n" not in msg
    assert ei.value.exit_code == 2


def test_text_error_has_line_and_column() -> None:
    with pytest.raises(GraphLoadError) as ei:
        load_graphdef(INVALID / "broken_syntax.pbtxt")
    assert "line 56, column 9" in str(ei.value)


def test_missing_file() -> None:
    with pytest.raises(GraphLoadError, match="no such file"):
        load_graphdef("/nonexistent/graph.pb")


def test_atomic_save_keeps_old_file_on_failure(tmp_path: Path) -> None:
    gd = load_graphdef(DATA / "dag_basic" / "graph.pbtxt")
    out = tmp_path / "g.pb"
    save_graphdef(gd, out)
    before = out.read_bytes()
    with pytest.raises(UsageError):
        save_graphdef(gd, out, fmt="nonsense")
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["g.pb"]  # no temp file left behind


def test_generated_schemas_are_current() -> None:
    pytest.importorskip("grpc_tools")
    from dfg.schemas.generate import main

    assert main(["--check"]) == 0


def test_shipped_binary_opdefs_match_the_text_source() -> None:
    from dfg.graphdef.opdefs.registry import TF_PB, compile_pbtxt

    assert TF_PB.read_bytes() == compile_pbtxt()
