"""``dfg ops``: which ops have kernels, which test covers each, and which a graph lacks.

Test coverage is found, not listed by hand. When dfg runs from a source checkout (a ``tests``
folder next to the package), an op counts as covered by

* ``tests/kernels/test_raw_ops.py`` if a case of a TensorFlow manifest
  (``tests/data/kernels/raw_ops*/manifest.json``) runs it;
* ``tests/data/<folder>`` if a graph stored there (``.pbtxt``, ``.json`` or ``.pb``, function
  libraries included) has a node of that op: the tests of that folder run those graphs;
* a test module if it names the op as a string literal (``invoke("Roll", ...)``,
  ``op: "Roll"`` in an inline graph).

Without a checkout (an installed wheel) coverage is unknown and reported as null.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click

from .options import console, data_output, emit_json, json_option, load


@click.command()
@json_option
@click.option("--missing", "graph", metavar="GRAPH", default=None,
              help="List the ops GRAPH (or a SavedModel DIR) uses, function bodies included, "
                   "that have no kernel (exit 1 if any).")
@data_output
def ops(as_json: bool, graph: str | None) -> None:
    """List the ops with kernels (per device) out of the OpDef registry.

    \b
    JSON (stable): {"opdefs": N, "kernels": {"CPU": N, ...}, "ops": [{"op", "devices", "cpu",
    "tests"}], "coverage": {"covered": N, "uncovered": [op...]} | null}; "tests" lists the
    test modules or tests/data folders that run the op (null outside a source checkout);
    with --missing: {"graph", "missing": [{"op", "nodes", "example"}]}.

    \b
    Examples:
      dfg ops --json | jq '.kernels'
      dfg ops --missing model.pb
      dfg ops --missing saved_model_dir
    """
    from dfg.executor.kernels.registry import ops_with_kernels
    from dfg.graphdef.opdefs.registry import registry

    table = ops_with_kernels()
    if graph is not None:
        from dfg.executor.session import missing_kernels

        # what a Session would lack: function bodies included, functional ops (If, While,
        # calls) need none since the Session lowers them
        counts = missing_kernels(load(graph, saved_model_ok=True))
        missing = [{"op": op, "nodes": len(names), "example": names[0]}
                   for op, names in sorted(counts.items())]
        if as_json:
            emit_json({"graph": graph, "missing": missing})
        elif missing:
            con = console()
            for m in missing:
                con.print(f"{m['op']}: {m['nodes']} node(s), e.g. {m['example']}")
        else:
            console().print(f"{graph}: every op has a kernel")
        if missing:
            raise SystemExit(1)
        return
    per_device: dict[str, int] = {}
    for devs in table.values():
        for d in devs:
            per_device[d] = per_device.get(d, 0) + 1
    if as_json:
        found = test_coverage(set(table))
        rows = [{"op": op, "devices": devs, "cpu": "CPU" in devs,
                 "tests": None if found is None else found.get(op, [])}
                for op, devs in table.items()]
        summary = None if found is None else {
            "covered": sum(1 for r in rows if r["tests"]),
            "uncovered": [r["op"] for r in rows if not r["tests"]]}
        emit_json({"opdefs": len(registry()), "kernels": per_device, "ops": rows,
                   "coverage": summary})
        return
    con = console()
    con.print(f"{len(table)} ops with kernels (" + ", ".join(
        f"{d}: {n}" for d, n in sorted(per_device.items())) + f") of {len(registry())} OpDefs")
    con.print(", ".join(table))


_OP_TEXT = re.compile(rb'op[\'"]?\s*:\s*"([A-Za-z0-9_>]+)"')    # pbtxt and JSON NodeDefs
_OP_BINARY = re.compile(rb"\x12([\x01-\x7f])([A-Z][A-Za-z0-9_]*)")  # NodeDef.op (field 2)
_LITERAL = re.compile(r"""["'](_?[A-Z][A-Za-z0-9_]*)["']""")  # _Fused* ops too


def tests_dir() -> Path | None:
    """The ``tests`` folder of the source checkout dfg runs from, if any."""
    root = Path(__file__).resolve().parent.parent
    return root / "tests" if (root / "tests" / "kernels").is_dir() else None


def test_coverage(ops: set[str], tests: Path | None = None) -> dict[str, list[str]] | None:
    """op -> sorted test modules / tests/data folders that run it (see the module docstring);
    None when there is no tests folder."""
    tests = tests if tests is not None else tests_dir()
    if tests is None:
        return None
    found: dict[str, set[str]] = {}

    def credit(names: set[str], where: str) -> None:
        for n in names & ops:
            found.setdefault(n, set()).add(where)

    for manifest in sorted((tests / "data" / "kernels").glob("raw_ops*/manifest.json")):
        cases = json.loads(manifest.read_text())
        credit({c["op"] for c in cases if "op" in c}
               | {o for c in cases for o in c.get("ops", [])}, "tests/kernels/test_raw_ops.py")
    data = tests / "data"
    for path in sorted(data.rglob("*")) if data.is_dir() else []:
        if path.suffix not in (".pbtxt", ".json", ".pb") or any(
                part.startswith("raw_ops") for part in path.parts):
            continue
        raw = path.read_bytes()
        if path.suffix == ".pb":
            names = {m.group(2) for m in _OP_BINARY.finditer(raw)
                     if m.group(1)[0] == len(m.group(2))}
        else:
            names = {m.group(1) for m in _OP_TEXT.finditer(raw)}
        folder = path.relative_to(tests.parent).parts[:3]
        credit({n.decode("ascii", "replace") for n in names}, "/".join(folder[:3]))
    for path in sorted(tests.rglob("test_*.py")):
        credit(set(_LITERAL.findall(path.read_text())),
               path.relative_to(tests.parent).as_posix())
    return {op: sorted(w) for op, w in sorted(found.items())}
