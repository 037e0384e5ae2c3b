"""``dfg validate``: every problem of one or more graphs, in one pass."""

from __future__ import annotations

from typing import Any

import click

from .options import data_output, emit_json, graphs_argument, json_option, load, style


@click.command()
@graphs_argument
@json_option
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 1 on any).")
@data_output
def validate(graphs: tuple[str, ...], as_json: bool, strict: bool) -> None:
    """Check each GRAPH and report every problem found, with a stable code.

    Checks names, inputs, ops and attrs against TensorFlow's OpDefs, edge dtypes, cycles
    (a legal loop closes through NextIteration -> Merge), while-loop frames, colocation
    hints and devices; then the function library: every function body gets the same
    checks (its diagnostics name the function), calls are checked against the called
    function's signature (PartitionedCall Tin/Tout, If/Case branches, While cond/body),
    and recursion and duplicate names are errors. A polymorphic function (attrs like $T)
    is checked once per binding its callers give, or leniently (its unbound types not
    compared) when no caller binds it. A SavedModel directory is checked as the GraphDef of
    its MetaGraphDef (tags 'serve'), functions included. Exit status: 0 no errors (warnings
    allowed unless --strict), 1 some graph has errors, 2 some file cannot be read (readable
    files are still reported).

    \b
    Codes (severity):
      duplicate-name (error)                  two or more nodes share a name
      invalid-name (error)                    name empty or not [A-Za-z0-9.][A-Za-z0-9_.\\-/>]*
      missing-input (error)                   input names a missing node ("did you mean")
      output-out-of-range (error)             input reads output k of a node with <= k outputs
      control-before-data (error)             a ^control input listed before a data input
      unknown-op (error)                      op type not in the OpDef registry
      input-count (error)                     wrong number of data inputs for the OpDef
      missing-attr (error)                    required attr (no default) absent
      attr-type (error)                       attr value of the wrong type (list(int), type ...)
      attr-not-allowed (error)                attr value not in the AttrDef's allowed values
      attr-minimum (error)                    int attr or list length below the minimum
      unknown-attr (warning)                  attr the OpDef does not define (version skew)
      dtype-mismatch (error)                  edge dtype differs from what the consumer takes
      ref-mismatch (error)                    non-ref tensor into an input that must be a ref
      cycle (error)                           cycle not closed by NextIteration -> Merge
      frame-mismatch (error)                  node with inputs from different loop frames
      enter-frame-mismatch (error)            Enters of one loop name different frames
      enter-parent-mismatch (error)           a frame entered from two different parent frames
      parallel-iterations-mismatch (warning)  a loop's Enters disagree on it
      exit-outside-frame (error)              Exit that no Enter leads to
      next-iteration-outside-frame (error)    NextIteration outside any loop
      loop-cond-without-switch (error)        LoopCond that is no Switch's predicate
      colocation-missing (warning)            _class 'loc:@x' names no node
      invalid-device (error)                  device string TensorFlow cannot parse
      unknown-function (error)                a func attr names no library function
      call-signature (error)                  call's Tin/Tout/T differ from the function's types
      recursion (error)                       a function calls itself (directly or not)
      duplicate-function (error)              two library functions share a name
      missing-return (error)                  a function result without a 'ret' entry
      shape-overflow (error)                  a shape/tensor attr with > 2**63-1 elements

    \b
    --json prints a list, one object per readable GRAPH, in argument order:
      [{"file": str, "valid": bool, "nodes": int, "errors": int, "warnings": int,
        "diagnostics": [{"code": str, "severity": "error"|"warning",
                         "node": str|null, "op": str|null, "message": str,
                         "function": str|null, ...}]}]
    "valid" is false when there are errors (or, with --strict, warnings). "function" is the
    library function the problem is in (null: the top-level graph). Some codes add
    fields after "message": cycle: path [names], size; missing-input: input, suggestion;
    unknown-op: suggestion; output-out-of-range: input; input-count: expected, found;
    attr-*: attr (attr-type also expected, found); dtype-mismatch, ref-mismatch: input,
    expected, found; enter-frame-mismatch: frames [found, loop's] (enter at a Merge);
    parallel-iterations-mismatch: frame; duplicate-name: count; colocation-missing:
    target; invalid-device: device; unknown-function: attr, callee, suggestion;
    call-signature: attr, callee, expected, found; recursion: path [functions];
    duplicate-function: count.

    \b
    Examples:
      dfg validate model.pb
      dfg validate *.pbtxt --strict
      dfg validate model.pb --json | jq '.[0].diagnostics[] | .code'
      dfg validate *.pb -o report.json      # written even when a graph is invalid

    Names and messages in the text report show control characters escaped as \\xNN.
    """
    from dfg.graphdef.errors import GraphLoadError

    results: list[dict[str, Any]] = []
    unreadable: list[GraphLoadError] = []
    for path in graphs:
        try:
            nodes, diags = _check(path)
        except GraphLoadError as e:
            unreadable.append(e)
            continue
        errors = sum(1 for d in diags if d.is_error)
        warnings = len(diags) - errors
        result = {"file": path, "valid": errors == 0 and not (strict and warnings),
                  "nodes": nodes, "errors": errors, "warnings": warnings,
                  "diagnostics": [d.to_dict() for d in diags]}
        results.append(result)
        if not as_json:
            _print_result(result)
    if as_json:
        emit_json(results)
    if unreadable:
        first = unreadable[0]
        if len(unreadable) > 1:
            # the group prints one line: fold the others into it
            raise GraphLoadError(f"{first.message} (and {len(unreadable) - 1} more "
                                 "unreadable file" + ("s" if len(unreadable) > 2 else "") + ")",
                                 source=first.source)
        raise first
    if not all(r["valid"] for r in results):
        raise click.exceptions.Exit(1)


def _check(path: str) -> tuple[int, list[Any]]:
    """Node count and diagnostics of one GRAPH.

    The cycle collector stays paused until the graph is freed: the view is a few objects per
    node, none in a cycle, and resuming while it lives costs a full collection that scans
    them all (a tenth of a second per 100k nodes)."""
    from dfg.graphdef.graph import gc_paused
    from dfg.graphdef.validate import validate as run_checks

    with gc_paused():
        graph = load(path, saved_model_ok=True)
        diags = run_checks(graph)
        nodes = len(graph.nodes)
        del graph
    return nodes, diags


def _print_result(r: dict[str, Any]) -> None:
    from dfg.graphdef.text import printable

    def plural(n: int, word: str) -> str:
        return f"{n} {word}{'s' if n != 1 else ''}"

    if r["errors"] or r["warnings"]:
        status = style("invalid", fg="red", bold=True) if not r["valid"] \
            else style("valid", fg="green", bold=True)
        counts = f"{plural(r['errors'], 'error')}, {plural(r['warnings'], 'warning')}"
        click.echo(f"{printable(r['file'])}: {status} ({plural(r['nodes'], 'node')}, "
                   f"{counts})")
    else:
        click.echo(f"{printable(r['file'])}: {style('valid', fg='green', bold=True)} "
                   f"({plural(r['nodes'], 'node')})")
    for d in r["diagnostics"]:
        sev = style(f"{d['severity']:<7}", fg="red" if d["severity"] == "error"
                    else "yellow")
        where = f"'{d['node']}' ({d['op']})" if d["node"] is not None else "graph"
        if d.get("function") is not None:
            where = f"function '{d['function']}'" + (f" {where}" if d["node"] is not None
                                                     else "")
        # names come from the file: a control character must not reach the terminal
        click.echo(f"  {sev} {d['code']:<28} {printable(where)}: {printable(d['message'])}")
