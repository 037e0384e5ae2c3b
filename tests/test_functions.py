"""Function libraries as first-class graph parts (issue 10): ``dfg info`` lists functions and
static dtypes/shapes, ``dfg validate`` checks function bodies and calls, ``dfg prune`` keeps
exactly the reachable functions (and colocated nodes), ``dfg viz`` draws functional nodes as
clusters of their function bodies.

Small TF2-form graphs are written here as pbtxt (FunctionDef spelling ``node:out_arg:index``,
``$T`` placeholders); the TF2 corpus in tests/data/tf2 is TensorFlow's own. Expected values
come from the graphs' meaning (what calls what, which dtypes the signatures declare), never
from dfg's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from google.protobuf import text_format

from dfg.cli.main import cli
from dfg.graphdef.errors import UnimplementedError, UsageError
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.prune import dependencies, prune
from dfg.graphdef.summary import summarize
from dfg.graphdef.validate import CODES, validate
from dfg.graphdef.viz import to_dot
from dfg.schemas import graph_pb2

TESTS = Path(__file__).resolve().parent
CONFORMANCE = TESTS / "data" / "conformance"
TF2 = TESTS / "data" / "tf2"
TF2_CASES = sorted(p.parent.name for p in TF2.glob("*/graph.pbtxt"))


def T(name: str, dtype: str) -> str:
    return f'attr {{ key: "{name}" value {{ type: {dtype} }} }}'


def TL(name: str, *dtypes: str) -> str:
    return (f'attr {{ key: "{name}" value {{ list {{ '
            + " ".join(f"type: {d}" for d in dtypes) + " } } }")


def F(key: str, fname: str) -> str:
    return f'attr {{ key: "{key}" value {{ func {{ name: "{fname}" }} }} }}'


def ph(name: str, dtype: str = "DT_FLOAT", shape: str = "dim { size: 2 }") -> str:
    return (f'node {{ name: "{name}" op: "Placeholder" {T("dtype", dtype)} '
            f'attr {{ key: "shape" value {{ shape {{ {shape} }} }} }} }}')


def const(name: str, dtype: str, value: str) -> str:
    return (f'node {{ name: "{name}" op: "Const" {T("dtype", dtype)} attr {{ key: "value" '
            f'value {{ tensor {{ dtype: {dtype} tensor_shape {{ }} {value} }} }} }} }}')


def fn(name: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]], body: str,
       ret: dict[str, str], extra: str = "") -> str:
    ins = " ".join(f'input_arg {{ name: "{a}" {_argtype(t)} }}' for a, t in inputs)
    outs = " ".join(f'output_arg {{ name: "{a}" {_argtype(t)} }}' for a, t in outputs)
    rets = " ".join(f'ret {{ key: "{k}" value: "{v}" }}' for k, v in ret.items())
    return (f'function {{ signature {{ name: "{name}" {ins} {outs} {extra} }} {body} {rets} }}')


def _argtype(t: str) -> str:
    return f'type_attr: "{t[1:]}"' if t.startswith("$") else f"type: {t}"


# --- the fixture: a TF2-form graph with every kind of call ----------------------------------
#
#   x (float32 [2]), pred (bool [])
#   loop   = StatelessWhile(i0, x)  cond c: i < 3,  body b: (i + 1, twice(x))
#   twice  = PartitionedCall target: calls inner by op name;  inner(a) = a * a
#   branch = StatelessIf(pred, x)   then t: x * 2,  else e: -x   (gradients: t -> t_grad)
#   p      = poly(x) with T = float32 (op is the function name; poly is Identity over $T)
#   unused, unused_grad: called by nothing (gradient entry unused -> unused_grad)

INNER = fn("inner", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
           f'node_def {{ name: "m" op: "Mul" input: "a" input: "a" {T("T", "DT_FLOAT")} }}',
           {"r": "m:z:0"})
TWICE = fn("twice", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
           'node_def { name: "call" op: "inner" input: "a" }', {"r": "call:r:0"})
COND = fn("c", [("i", "DT_INT32"), ("x", "DT_FLOAT")], [("p", "DT_BOOL")],
          'node_def { name: "lim" op: "Const" ' + T("dtype", "DT_INT32")
          + ' attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } '
            'int_val: 3 } } } }'
          f' node_def {{ name: "less" op: "Less" input: "i" input: "lim:output:0" '
          f'{T("T", "DT_INT32")} }}', {"p": "less:z:0"})
BODY = fn("b", [("i", "DT_INT32"), ("x", "DT_FLOAT")], [("i1", "DT_INT32"), ("x1", "DT_FLOAT")],
          'node_def { name: "one" op: "Const" ' + T("dtype", "DT_INT32")
          + ' attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } '
            'int_val: 1 } } } }'
          f' node_def {{ name: "inc" op: "AddV2" input: "i" input: "one:output:0" '
          f'{T("T", "DT_INT32")} }}'
          f' node_def {{ name: "pc" op: "PartitionedCall" input: "x" '
          f'{TL("Tin", "DT_FLOAT")} {TL("Tout", "DT_FLOAT")} {F("f", "twice")} }}',
          {"i1": "inc:z:0", "x1": "pc:output:0"})
THEN = fn("t", [("x", "DT_FLOAT")], [("y", "DT_FLOAT")],
          'node_def { name: "two" op: "Const" ' + T("dtype", "DT_FLOAT")
          + ' attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } '
            'float_val: 2 } } } }'
          f' node_def {{ name: "dbl" op: "Mul" input: "x" input: "two:output:0" '
          f'{T("T", "DT_FLOAT")} }}', {"y": "dbl:z:0"})
ELSE = fn("e", [("x", "DT_FLOAT")], [("y", "DT_FLOAT")],
          f'node_def {{ name: "neg" op: "Neg" input: "x" {T("T", "DT_FLOAT")} }}',
          {"y": "neg:y:0"})
POLY = fn("poly", [("v", "$T")], [("w", "$T")],
          'node_def { name: "id" op: "Identity" input: "v" '
          'attr { key: "T" value { placeholder: "T" } } }', {"w": "id:output:0"},
          extra='attr { name: "T" type: "type" }')
UNUSED = fn("unused", [("x", "DT_FLOAT")], [("y", "DT_FLOAT")],
            f'node_def {{ name: "s" op: "Square" input: "x" {T("T", "DT_FLOAT")} }}',
            {"y": "s:y:0"})
UNUSED_GRAD = fn("unused_grad", [("x", "DT_FLOAT"), ("dy", "DT_FLOAT")], [("dx", "DT_FLOAT")],
                 f'node_def {{ name: "g" op: "Mul" input: "x" input: "dy" '
                 f'{T("T", "DT_FLOAT")} }}', {"dx": "g:z:0"})
T_GRAD = fn("t_grad", [("x", "DT_FLOAT"), ("dy", "DT_FLOAT")], [("dx", "DT_FLOAT")],
            f'node_def {{ name: "g" op: "Identity" input: "dy" {T("T", "DT_FLOAT")} }}',
            {"dx": "g:output:0"})

LIBRARY = ("library { " + INNER + TWICE + COND + BODY + THEN + ELSE + POLY + UNUSED
           + UNUSED_GRAD + T_GRAD
           + ' gradient { function_name: "unused" gradient_func: "unused_grad" }'
           + ' gradient { function_name: "t" gradient_func: "t_grad" } }')

NODES = (ph("x") + ph("pred", "DT_BOOL", "") + const("i0", "DT_INT32", "int_val: 0")
         + f'node {{ name: "loop" op: "StatelessWhile" input: "i0" input: "x" '
           f'{TL("T", "DT_INT32", "DT_FLOAT")} {F("cond", "c")} {F("body", "b")} }}'
         + f'node {{ name: "branch" op: "StatelessIf" input: "pred" input: "x" '
           f'{T("Tcond", "DT_BOOL")} {TL("Tin", "DT_FLOAT")} {TL("Tout", "DT_FLOAT")} '
           f'{F("then_branch", "t")} {F("else_branch", "e")} '
           'attr { key: "output_shapes" value { list { shape { dim { size: 2 } } } } } }'
         + f'node {{ name: "p" op: "poly" input: "x" {T("T", "DT_FLOAT")} }}')

GRAPH = NODES + LIBRARY


def make(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def errors(g: Graph) -> list:
    return [d for d in validate(g) if d.is_error]


def fnames(gd) -> list[str]:
    return [f.signature.name for f in gd.library.function]


# --- validate ----------------------------------------------------------------------------------

def test_fixture_validates_clean():
    assert validate(make(GRAPH)) == []


def test_corrupted_body_is_flagged_with_the_function_name():
    g = make(GRAPH.replace('input: "i" input: "one:output:0"', 'input: "i" input: "ghost:z:0"'))
    (d,) = errors(g)
    assert (d.code, d.function, d.node, d.op) == ("missing-input", "b", "inc", "AddV2")
    assert "in function 'b'" in d.message and "ghost:z:0" in d.message
    assert d.to_dict()["function"] == "b" and d.to_dict()["input"] == "ghost:z:0"


def test_body_checks_are_the_top_level_checks():
    # a wrong output arg name, an op with the wrong arity, and an unknown op, in three bodies
    g = make(GRAPH.replace('"m:z:0"', '"m:out:0"')
             .replace('name: "neg" op: "Neg" input: "x"', 'name: "neg" op: "Neg" input: "x" '
                      'input: "x"')
             .replace('op: "Square"', 'op: "Sqaure"'))
    got = {(d.function, d.code) for d in errors(g)}
    assert got == {("inner", "missing-input"), ("e", "input-count"), ("unused", "unknown-op")}


def test_result_dtype_against_signature():
    # e declares a float32 result but returns IsNan's bool (its output is also named y)
    g = make(GRAPH.replace('name: "neg" op: "Neg"', 'name: "neg" op: "IsNan"'))
    (d,) = errors(g)
    assert (d.code, d.function, d.node) == ("dtype-mismatch", "e", None)
    assert d.message.startswith("result 'y':") and "bool" in d.message


def test_missing_ret_entry():
    g = make(GRAPH.replace('ret { key: "y" value: "neg:y:0" }', ""))
    (d,) = errors(g)
    assert (d.code, d.function) == ("missing-return", "e")
    assert "in function 'e'" in d.message


def test_unknown_function_and_unknown_op():
    g = make(GRAPH.replace('func { name: "b" }', 'func { name: "bb" }')
             + 'node { name: "q" op: "inner2" input: "x" }')
    by_code = {d.code: d for d in errors(g)}
    assert set(by_code) == {"unknown-function", "unknown-op"}
    uf = by_code["unknown-function"]
    assert (uf.node, uf.extra["callee"], uf.extra["attr"], uf.function) == \
        ("loop", "bb", "body", None)
    assert "nor one of the" in by_code["unknown-op"].message


@pytest.mark.parametrize("old,new,node,attr", [
    # PartitionedCall passes int32 where twice takes float32
    ('input: "x" attr { key: "Tin" value { list { type: DT_FLOAT } } }',
     'input: "x" attr { key: "Tin" value { list { type: DT_INT32 } } }', "pc", "f"),
    # If promises two results, its branches return one
    ('attr { key: "Tout" value { list { type: DT_FLOAT } } } attr { key: "then_branch"',
     'attr { key: "Tout" value { list { type: DT_FLOAT type: DT_FLOAT } } } '
     'attr { key: "then_branch"', "branch", "else_branch"),
    # While carries (int32, float32) but its cond takes (int32, int32)
    ('output_arg { name: "p" type: DT_BOOL }', 'output_arg { name: "p" type: DT_BOOL } '
     'output_arg { name: "p2" type: DT_BOOL }', "loop", "cond"),
])
def test_call_signature_mismatch(old, new, node, attr):
    text = GRAPH.replace(old, new, 1)
    assert text != GRAPH
    if "p2" in new:
        text = text.replace('{"p": "less:z:0"}', "").replace(
            'ret { key: "p" value: "less:z:0" }',
            'ret { key: "p" value: "less:z:0" } ret { key: "p2" value: "less:z:0" }')
    diags = [d for d in errors(make(text)) if d.code == "call-signature"]
    assert diags and {d.node for d in diags} == {node}
    assert attr in {d.extra["attr"] for d in diags}


def test_while_types_against_body():
    g = make(GRAPH.replace('attr { key: "T" value { list { type: DT_INT32 type: DT_FLOAT } } }',
                           'attr { key: "T" value { list { type: DT_INT32 type: DT_INT32 } } }'))
    diags = errors(g)
    # the loop's input 1 (x, float32) no longer fits T, and cond and body disagree with T
    assert {d.code for d in diags} == {"dtype-mismatch", "call-signature"}
    assert {d.extra["attr"] for d in diags if d.code == "call-signature"} == {"cond", "body"}


def test_call_by_op_name_checks_arity_and_dtypes():
    g = make(GRAPH + 'node { name: "q" op: "inner" input: "x" input: "x" }'
             + 'node { name: "r" op: "inner" input: "i0" }')
    got = [(d.node, d.code) for d in errors(g)]
    assert got == [("q", "input-count"), ("r", "dtype-mismatch")]


def test_recursion_and_duplicate_functions():
    rec = (fn("r1", [("a", "DT_FLOAT")], [("b", "DT_FLOAT")],
              'node_def { name: "c" op: "r2" input: "a" }', {"b": "c:b:0"})
           + fn("r2", [("a", "DT_FLOAT")], [("b", "DT_FLOAT")],
                'node_def { name: "c" op: "r1" input: "a" }', {"b": "c:b:0"}))
    g = make(GRAPH.replace("library { ", "library { " + rec + INNER))
    by_code = {}
    for d in errors(g):
        by_code.setdefault(d.code, []).append(d)
    assert set(by_code) == {"recursion", "duplicate-function"}
    (r,) = by_code["recursion"]
    assert r.extra["path"] == ["r1", "r2", "r1"] and r.function == "r1"
    (dup,) = by_code["duplicate-function"]
    assert dup.function == "inner" and dup.extra["count"] == 2


def test_polymorphic_function_checked_per_binding():
    # poly adds a float constant to its $T argument: fine for T=float32, wrong for int32
    bad_poly = POLY.replace(
        'node_def { name: "id" op: "Identity" input: "v" '
        'attr { key: "T" value { placeholder: "T" } } }',
        'node_def { name: "k" op: "Const" ' + T("dtype", "DT_FLOAT")
        + ' attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } '
          'float_val: 1 } } } }'
        ' node_def { name: "id" op: "AddV2" input: "v" input: "k:output:0" '
        'attr { key: "T" value { placeholder: "T" } } }').replace('"id:output:0"', '"id:z:0"')
    assert validate(make(NODES + LIBRARY.replace(POLY, bad_poly))) == []
    int_call = f'node {{ name: "p2" op: "poly" input: "i0" {T("T", "DT_INT32")} }}'
    diags = errors(make(NODES + int_call + LIBRARY.replace(POLY, bad_poly)))
    assert [(d.code, d.function, d.node) for d in diags] == [("dtype-mismatch", "poly", "id")]
    # no caller at all: checked leniently, the unbound types are not compared
    assert validate(make(ph("x") + LIBRARY.replace(POLY, bad_poly))) == []
    # a call by name that leaves T unbound is an error at the call
    (d,) = errors(make(GRAPH + 'node { name: "p3" op: "poly" input: "x" }'))
    assert (d.code, d.node, d.extra["attr"]) == ("missing-attr", "p3", "T")


def test_control_input_on_an_argument_is_allowed():
    g = make(GRAPH.replace('node_def { name: "neg" op: "Neg" input: "x"',
                           'node_def { name: "neg" op: "Neg" input: "x" input: "^x"'))
    assert errors(g) == []


def test_new_codes_are_in_the_table_and_the_help():
    text = invoke("validate", "--help").output
    for code in ("unknown-function", "call-signature", "recursion", "duplicate-function",
                 "missing-return"):
        assert code in CODES and code in text


@pytest.mark.parametrize("path", sorted(CONFORMANCE.glob("*/graph.pbtxt")),
                         ids=lambda p: p.parent.name)
def test_conformance_graphs_still_validate(path):
    assert errors(load_graph(path)) == []


# --- prune -------------------------------------------------------------------------------------

def test_prune_keeps_exactly_the_reachable_functions():
    g = make(GRAPH)
    loop = prune(g, ["loop:1"])
    assert [n.name for n in loop.node] == ["x", "i0", "loop"]
    # cond and body, what the body calls (PartitionedCall f) and what that calls (by op name)
    assert fnames(loop) == ["inner", "twice", "c", "b"]
    assert list(loop.library.gradient) == []
    branch = prune(g, ["branch"])
    assert fnames(branch) == ["t", "e", "t_grad"]    # t's gradient function comes along
    assert [(x.function_name, x.gradient_func) for x in branch.library.gradient] == \
        [("t", "t_grad")]
    assert fnames(prune(g, ["p"])) == ["poly"]
    assert not prune(g, ["x"]).HasField("library")
    for gd in (loop, branch):
        assert validate(Graph(gd)) == []


def test_prune_keeps_colocated_nodes():
    # y is colocated with w, which y does not read: extract_sub_graph keeps w (and what w
    # needs), so that the colocation is not lost
    g = make(ph("a") + ph("w0") + 'node { name: "w" op: "Identity" input: "w0" '
             + T("T", "DT_FLOAT") + " }"
             + 'node { name: "y" op: "Neg" input: "a" ' + T("T", "DT_FLOAT")
             + ' attr { key: "_class" value { list { s: "loc:@w" } } } }'
             + ph("z"))
    assert [n.name for n in prune(g, ["y"]).node] == ["a", "w0", "w", "y"]
    # what must *run* is still only the data and control ancestors
    assert dependencies(g, ["y"]) == {"a", "y"}
    # a fed colocation target keeps its name as the feed's Placeholder
    fed = prune(g, ["y"], feeds=["w"])
    assert [(n.name, n.op) for n in fed.node] == [("a", "Placeholder"), ("w", "Placeholder"),
                                                   ("y", "Neg")]


# --- info --------------------------------------------------------------------------------------

def test_info_lists_functions():
    s = summarize(make(GRAPH))
    fs = {f["name"]: f for f in s["functions"]}
    assert list(fs) == ["inner", "twice", "c", "b", "t", "e", "poly", "unused", "unused_grad",
                        "t_grad"]
    assert fs["b"]["inputs"] == [{"name": "i", "dtype": "int32"}, {"name": "x", "dtype": "float32"}]
    assert fs["c"]["outputs"] == [{"name": "p", "dtype": "bool"}]
    assert fs["poly"]["inputs"] == [{"name": "v", "dtype": None}]   # the caller's T decides
    assert [fs[n]["nodes"] for n in ("inner", "c", "b")] == [1, 2, 3]
    assert {n: fs[n]["depth"] for n in fs} == {
        "c": 1, "b": 1, "twice": 2, "inner": 3, "t": 1, "e": 1, "poly": 1, "unused": None,
        "unused_grad": None, "t_grad": None}
    assert fs["inner"]["callers"] == ["loop"] and fs["t"]["callers"] == ["branch"]
    assert fs["poly"]["callers"] == ["p"] and fs["unused"]["callers"] == []


def test_info_static_dtypes_and_shapes():
    s = summarize(make(GRAPH), node_outputs=True)
    outs = {o["name"]: o for o in s["outputs"]}
    # While outputs have T's dtypes; the If records its result shape; poly(T=float32)
    assert {k: (o["dtype"], o["shape"]) for k, o in outs.items()} == {
        "loop:0": ("int32", None), "loop:1": ("float32", None),
        "branch:0": ("float32", [2]), "p:0": ("float32", None)}
    tensors = {t["name"]: (t["dtype"], t["shape"]) for t in s["tensors"]}
    assert tensors["x:0"] == ("float32", [2]) and tensors["pred:0"] == ("bool", [])
    assert tensors["i0:0"] == ("int32", [])
    assert len(tensors) == 7    # x, pred, i0, loop:0, loop:1, branch, p


# --- viz ---------------------------------------------------------------------------------------

def test_viz_functional_nodes_collapsed_by_default():
    dot = to_dot(make(GRAPH), collapse=None)
    assert '"n:loop" [label="loop\\nStatelessWhile\\nbody: b, cond: c", peripheries=2' in dot
    # the loop-carried values, with dtypes from the body's signature
    assert '"n:loop" -> "n:loop" [label="loop: int32, float32"' in dot
    assert "cluster_call" not in dot and '"f:' not in dot


def test_viz_expand_draws_function_bodies():
    dot = to_dot(make(GRAPH), collapse=None, expand=["loop"])
    assert 'subgraph "cluster_call:loop" {' in dot
    assert 'subgraph "cluster_fn:loop>body:b>" {' in dot
    assert 'subgraph "cluster_fn:loop>cond:c>" {' in dot
    # body nodes, the loop's tensors into both functions' args, results to the next iteration
    assert '"f:loop>body:b>inc" [label="inc\\nAddV2"' in dot
    assert '"n:loop" -> "f:loop>body:b>x" [label="float32"' in dot
    assert '"n:loop" -> "f:loop>cond:c>i" [label="int32"' in dot
    assert '"f:loop>body:b>x1_RetVal" -> "f:loop>body:b>x" [label="next: float32"' in dot
    assert '"f:loop>cond:c>p_RetVal" -> "n:loop" [label="bool"' in dot
    assert '"f:loop>body:b>i" -> "f:loop>body:b>inc" [label="int32"]' in dot
    # twice (called inside b) stays closed until asked for, then opens, nested
    assert "cluster_call:loop>body:b>pc" not in dot
    nested = to_dot(make(GRAPH), collapse=None, expand=["loop", "twice"])
    assert 'subgraph "cluster_call:loop>body:b>pc" {' in nested
    assert '"f:loop>body:b>pc>f:twice>call" [label="call\\ninner\\nfunction: inner"' in nested
    # If: argument in, result out, both branches
    br = to_dot(make(GRAPH), collapse=None, expand=["branch"])
    assert '"n:branch" -> "f:branch>then_branch:t>x"' in br
    assert '"f:branch>else_branch:e>y_RetVal" -> "n:branch" [label="float32"' in br
    assert to_dot(make(GRAPH), collapse=None, expand=["branch"]) == br   # deterministic


def test_viz_expand_unknown_name():
    with pytest.raises(UsageError, match="no name scope 'nope'"):
        to_dot(make(GRAPH), expand=["nope"])


def test_viz_escapes_function_names():
    weird = 'we"ird<&>\\n'
    text = GRAPH.replace('"b"', '"we\\"ird<&>\\\\n"')
    g = make(text)
    assert g.graph_def.library.function[3].signature.name == weird
    dot = to_dot(g, collapse=None, expand=["loop"])
    assert 'cluster_fn:loop>body:we\\"ird<&>\\\\n>' in dot
    assert 'body: we\\"ird\\<&\\>\\\\n' in dot      # a label: record characters escaped
    assert '"ird<' not in dot.replace('\\"ird<', "")   # no unescaped quote before the name
    if _have_dot():
        from xml.etree import ElementTree

        from dfg.graphdef.viz import render

        ElementTree.fromstring(render(dot, "svg"))   # well-formed XML


def _have_dot() -> bool:
    import shutil

    return shutil.which("dot") is not None


# --- the TF2 corpus -----------------------------------------------------------------------------

@pytest.mark.skipif(not TF2_CASES, reason="tests/data/tf2 has not been generated")
@pytest.mark.parametrize("case", TF2_CASES)
def test_tf2_corpus_validates_and_prunes_to_reachable_functions(case):
    from dfg.graphdef.functions import reachable

    g = load_graph(TF2 / case / "graph.pbtxt")
    assert errors(g) == []
    spec = json.loads((TF2 / case / "case.json").read_text())
    step = spec["steps"][0]
    gd = prune(g, step["fetch"], targets=step.get("target") or [])
    kept = set(fnames(gd))
    grads = {x.gradient_func for x in g.graph_def.library.gradient if x.function_name in kept}
    assert kept == reachable(gd, list(gd.node)) | grads
    assert errors(Graph(gd)) == []
    from dfg.executor import Session

    feeds = {k: np.load(TF2 / case / v) for k, v in step["feed"].items()}
    try:
        out = Session(Graph(gd)).run(step["fetch"], feed_dict=feeds,
                                     targets=step.get("target") or None)
    except UnimplementedError as e:
        pytest.skip(f"the executor does not run this TF2 graph yet: {e}")
    except Exception:
        if step.get("expect_error"):
            return   # the case expects the run to fail, pruned or not
        raise
    for name, value in zip(step["fetch"], out):
        want = np.load(TF2 / case / step["expect"][name])
        np.testing.assert_allclose(value, want, rtol=spec.get("rtol", 1e-5),
                                   atol=spec.get("atol", 1e-6))


@pytest.mark.skipif(not TF2_CASES, reason="tests/data/tf2 has not been generated")
def test_some_tf2_prunes_drop_functions():
    # guards the test above against a prune that keeps the whole library
    dropped = 0
    for case in TF2_CASES:
        g = load_graph(TF2 / case / "graph.pbtxt")
        step = json.loads((TF2 / case / "case.json").read_text())["steps"][0]
        gd = prune(g, step["fetch"], targets=step.get("target") or [])
        dropped += len(gd.library.function) < len(g.graph_def.library.function)
    assert dropped >= 3


# --- the command line ---------------------------------------------------------------------------

def invoke(*args: str, stdin: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", *map(str, args)],
                          input=stdin, capture_output=True, env=env, timeout=120)


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    p = tmp_path / "tf2.pbtxt"
    p.write_text(GRAPH)
    return p


def test_cli_info(graph_file: Path):
    doc = json.loads(invoke("info", graph_file, "--json").output)
    assert [f["name"] for f in doc["functions"]][:4] == ["inner", "twice", "c", "b"]
    assert "tensors" not in doc
    doc = json.loads(invoke("info", graph_file, "--json", "--nodes").output)
    assert doc["tensors"][0] == {"name": "x:0", "op": "Placeholder", "dtype": "float32",
                                 "shape": [2]}
    help_text = invoke("info", "--help").output
    assert "functions[{name,inputs" in help_text and "tensors[" in help_text
    r = run("info", graph_file, "--nodes")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "Library functions" in out and "unused_grad" in out and "Node outputs" in out


def test_cli_validate(graph_file: Path, tmp_path: Path):
    assert invoke("validate", graph_file).exit_code == 0
    bad = tmp_path / "bad.pbtxt"
    bad.write_text(GRAPH.replace('input: "i" input: "one:output:0"', 'input: "i" input: "gh"'))
    r = invoke("validate", bad, "--json")
    assert r.exit_code == 1
    (d,) = json.loads(r.output)[0]["diagnostics"]
    assert list(d)[:6] == ["code", "severity", "node", "op", "message", "function"]
    assert (d["code"], d["function"], d["node"]) == ("missing-input", "b", "inc")
    p = run("validate", bad)
    assert p.returncode == 1
    assert "function 'b' 'inc' (AddV2)" in p.stdout.decode()
    assert "in function 'b'" in p.stdout.decode()


def test_cli_prune(graph_file: Path):
    r = invoke("prune", graph_file, "--fetch", "branch", "--to", "json")
    assert r.exit_code == 0
    names = [f["signature"]["name"] for f in json.loads(r.output)["library"]["function"]]
    assert names == ["t", "e", "t_grad"]
    p = run("prune", graph_file, "--fetch", "loop:1")
    assert p.returncode == 0, p.stderr
    gd = graph_pb2.GraphDef()
    text_format.Parse(p.stdout.decode(), gd)
    assert fnames(gd) == ["inner", "twice", "c", "b"]


def test_cli_viz(graph_file: Path):
    r = invoke("viz", graph_file, "--collapse", "none", "--expand", "loop")
    assert r.exit_code == 0
    assert 'subgraph "cluster_call:loop"' in r.stdout
    p = run("viz", graph_file, "--expand", "branch")
    assert p.returncode == 0, p.stderr
    assert 'subgraph "cluster_fn:branch>then_branch:t>"' in p.stdout.decode()
    bad = invoke("viz", graph_file, "--expand", "nope")
    assert bad.exit_code == 2
