"""Hostile kernels (issue #14): tiny committed graphs (tests/data/hostile_kernels, written by
its generate.py) whose kernels would allocate terabytes, or whose regex backtracks
exponentially in a backtracking engine, each run by the real ``dfg run`` in a subprocess
capped at 2 GB of address space. Every refusal must end quickly with exit 1 and exactly one
line on stderr naming the node, no traceback; the regexes must simply finish, with RE2's
results."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data" / "hostile_kernels"
LIMIT_AS = 2 << 30
# the bound that matters: the process's own CPU time (wall time is the machine's load; the
# subprocess's 300 s timeout; dfg's own --timeout 120 s guards against a hang)
CPU_SECONDS = 2.0


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def dfg_run(graph: str, fetch: str) -> tuple[int, str, str, float, float]:
    """Exit status, stdout, stderr, CPU seconds and wall seconds of ``dfg run`` under the
    2 GB cap."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NO_COLOR="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", str(DATA / graph),
                        "--fetch", fetch, "--timeout", "120", "--json"],
                       env=env, capture_output=True, preexec_fn=_cap, timeout=300)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"),
            cpu, wall)


# graph -> (fetch, node the error names, words the line holds)
REFUSED = {
    "as_string_width.pbtxt": ("s", "'s' (AsString)", "2,000,000,041,000 bytes"),
    "string_join_huge.pbtxt": ("joined", "'joined' (StringJoin)", "memory budget"),
    "tile_huge.pbtxt": ("tiled", "'tiled' (Tile)", "4,398,046,511,104 bytes"),
    "range_huge.pbtxt": ("r", "'r' (Range)", "9,007,199,254,740,992 bytes"),
    "broadcast_outer.pbtxt": ("outer", "'outer' (AddV2)", "40,000,000,000 bytes"),
    "matmul_outer.pbtxt": ("mm", "'mm' (MatMul)", "40,000,000,000 bytes"),
    "gather_outer.pbtxt": ("gathered", "'gathered' (GatherV2)", "4,000,000,000,000 bytes"),
    "regex_backref.pbtxt": ("backref", "'backref' (StaticRegexReplace)",
                            "Invalid pattern: (a)\\1, error: invalid escape sequence: \\1"),
}


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err[:2000]
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("graph", list(REFUSED))
def test_hostile_kernel_is_refused_fast_naming_the_node(graph: str) -> None:
    fetch, node, words = REFUSED[graph]
    rc, out, err, cpu, wall = dfg_run(graph, fetch)
    line = one_line(err)
    assert rc == 1, (rc, line)
    assert f"node {node}" in line and words in line, line
    assert out == ""
    assert cpu < CPU_SECONDS, (cpu, wall)


def test_const_of_2g_floats_is_refused_not_materialized() -> None:
    """The 535-byte Const of 2^31 floats (8 GiB) summed: refused before any of it is
    written, well inside the 2 GB cap, with one line naming the Const."""
    rc, out, err, cpu, wall = dfg_run("const_2g_floats.pbtxt", "total")
    line = one_line(err)
    assert rc == 1 and out == ""
    assert "8,589,934,592 bytes" in line and "[2147483648]" in line, line
    assert "node 'big' (Const)" in line, line
    assert cpu < CPU_SECONDS, (cpu, wall)


def test_exponential_regexes_finish_in_linear_time() -> None:
    """``(a+)+$`` on 41 a's and a '!' (a backtracking engine tries 2^41 ways and was still
    running after 120 s); RE2 answers at once. Expected values follow from the patterns:
    the '!' string never matches at its end, the all-a string matches whole."""
    rc, out, err, cpu, wall = dfg_run("regex_redos.pbtxt", "replaced,matched,dyn")
    assert rc == 0 and err == "", err
    got = {f["name"]: f["value"] for f in json.loads(out)["fetches"]}
    bang, plain = "a" * 41 + "!", "a" * 41
    assert got["replaced"] == [bang, f"<{plain}>"]
    assert got["matched"] == [False, True]
    assert got["dyn"] == [bang, "-"]
    assert cpu < CPU_SECONDS, (cpu, wall)


def test_committed_graphs_are_what_generate_writes(tmp_path: Path) -> None:
    """The committed files are tiny and are exactly what generate.py makes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_hostile_kernels", DATA / "generate.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    from google.protobuf import text_format

    for name, make in gen.CASES.items():
        path = DATA / f"{name}.pbtxt"
        assert path.stat().st_size < 2000, name
        assert path.read_text() == text_format.MessageToString(make().g), name


# --- RE2 semantics against TensorFlow's own results (regex_tf.json, made by regex_tf.py) ------

def _regex_cases() -> dict:
    return json.loads((DATA / "regex_tf.json").read_text())


def _texts():
    import numpy as np

    t = np.empty(len(_regex_cases()["texts"]), dtype=object)
    t[:] = [bytes.fromhex(h) for h in _regex_cases()["texts"]]
    return t


@pytest.mark.parametrize("case", _regex_cases()["replace"],
                         ids=lambda c: f"{c['pattern']}->{c['rewrite']}/{c['global']}")
def test_regex_replace_agrees_with_tensorflow(case: dict) -> None:
    import numpy as np

    from dfg.executor.kernels.registry import invoke

    want = [bytes.fromhex(h) for h in case["out"]]
    got = invoke("StaticRegexReplace", _texts(), attrs={
        "pattern": case["pattern"], "rewrite": case["rewrite"],
        "replace_global": case["global"]})
    assert got.tolist() == want
    dyn = invoke("RegexReplace", _texts(), np.array(case["pattern"].encode(), dtype=object),
                 np.array(case["rewrite"].encode(), dtype=object),
                 attrs={"replace_global": case["global"]})
    assert dyn.tolist() == want


@pytest.mark.parametrize("case", _regex_cases()["full_match"], ids=lambda c: c["pattern"])
def test_regex_full_match_agrees_with_tensorflow(case: dict) -> None:
    from dfg.executor.kernels.registry import invoke

    got = invoke("StaticRegexFullMatch", _texts(), attrs={"pattern": case["pattern"]})
    assert got.tolist() == case["out"]


@pytest.mark.parametrize("case", _regex_cases()["bad"], ids=lambda c: c["pattern"])
def test_patterns_re2_rejects_are_rejected_as_tensorflow_does(case: dict) -> None:
    from dfg.executor.kernels.registry import invoke
    from dfg.graphdef.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as e:
        invoke("StaticRegexReplace", _texts(), attrs={"pattern": case["pattern"],
                                                      "rewrite": "-"})
    assert f"Invalid pattern: {case['error']}" in str(e.value)
