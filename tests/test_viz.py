"""``dfg viz``: DOT structure (frame clusters, collapse, edge styles and labels, constants,
--fetch, escaping, determinism), real Graphviz renders of every conformance graph, and the
command line (exit codes, formats, pipeline, missing ``dot``)."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format

from dfg.cli.main import cli
from dfg.graphdef import viz as V
from dfg.graphdef.errors import DfgError, UsageError
from dfg.graphdef.frames import analyze_frames
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.schemas import graph_pb2

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "conformance"
CASES = sorted(p.parent.name for p in DATA.glob("*/graph.pbtxt"))
LOOP_CASES = [c for c in CASES
              if analyze_frames(load_graph(DATA / c / "graph.pbtxt")).has_loops]
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(
    not HAVE_DOT, reason="Graphviz 'dot' is not installed (apt-get install graphviz); "
                         "CI installs it, so these run there")


# --- helpers ------------------------------------------------------------------------------

def make(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def case(name: str) -> Graph:
    return load_graph(DATA / name / "graph.pbtxt")


def ph(name: str, dtype: str = "DT_FLOAT", shape: tuple[int, ...] | None = None) -> str:
    dims = ""
    if shape is not None:
        dims = ('attr { key: "shape" value { shape { '
                + " ".join(f"dim {{ size: {d} }}" for d in shape) + " } } }")
    return (f'node {{ name: "{name}" op: "Placeholder" '
            f'attr {{ key: "dtype" value {{ type: {dtype} }} }} {dims} }}')


def const(name: str, value: float = 1.0, ctrl: str | None = None) -> str:
    inp = f'input: "^{ctrl}" ' if ctrl else ""
    return (f'node {{ name: "{name}" op: "Const" {inp}'
            'attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { '
            f'tensor {{ dtype: DT_FLOAT float_val: {value} }} }} }} }}')


def op(name: str, kind: str, *inputs: str, T: str = "DT_FLOAT") -> str:
    ins = " ".join(f'input: "{i}"' for i in inputs)
    return f'node {{ name: "{name}" op: "{kind}" {ins} attr {{ key: "T" value {{ type: {T} }} }} }}'


QSTR = r'"((?:[^"\\]|\\.)*)"'
EDGE_RE = re.compile(rf"^\s*{QSTR} -> {QSTR}(?: \[(.*)\])?;$")
NODE_RE = re.compile(rf"^\s*{QSTR} \[(.*)\];$")
SUBGRAPH_RE = re.compile(rf"^\s*subgraph {QSTR} {{$")


class Dot:
    """What a DOT text declares: nodes (attrs, enclosing cluster), clusters (parent), edges."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.nodes: dict[str, dict[str, str]] = {}
        self.node_cluster: dict[str, str | None] = {}
        self.cluster_parent: dict[str, str | None] = {}
        self.cluster_label: dict[str, str] = {}
        self.edges: list[tuple[str, str, dict[str, str]]] = []
        stack: list[str] = []
        for line in text.splitlines():
            if m := SUBGRAPH_RE.match(line):
                self.cluster_parent[m.group(1)] = stack[-1] if stack else None
                stack.append(m.group(1))
            elif line.strip() == "}" and stack:
                stack.pop()
            elif m := EDGE_RE.match(line):
                self.edges.append((m.group(1), m.group(2), attrs(m.group(3) or "")))
            elif m := NODE_RE.match(line):
                self.nodes[m.group(1)] = attrs(m.group(2))
                self.node_cluster[m.group(1)] = stack[-1] if stack else None
            elif stack and line.strip().startswith("label="):
                self.cluster_label[stack[-1]] = line.strip()

    def edge(self, src: str, dst: str) -> dict[str, str]:
        found = [a for s, d, a in self.edges if s == src and d == dst]
        assert len(found) == 1, (src, dst, found)
        return found[0]

    def label(self, node: str) -> str:
        return unquote(self.nodes[node]["label"])


def attrs(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2)
            for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\s]+)', text)}


def unquote(s: str) -> str:
    return s[1:-1] if s.startswith('"') else s


def dot_of(g: Graph, **kw) -> Dot:
    return Dot(V.to_dot(g, **kw))


SVG_CLUSTER_RE = re.compile(r'<g id="clust\d+" class="cluster">\s*<title>(.*?)</title>')


# --- frames as clusters -------------------------------------------------------------------

def test_while_nested_clusters_nest_and_hold_their_nodes():
    d = dot_of(case("while_nested"))
    outer, inner = "cluster_outer/while_context", "cluster_outer/inner/while_context"
    assert d.cluster_parent == {outer: None, inner: outer}
    assert "parallel_iterations=10" in d.cluster_label[outer]
    assert "while inner/while_context" in d.cluster_label[inner]  # the prefix all share
    assert d.node_cluster["n:n"] is None and d.node_cluster["n:scale"] is None
    # an Enter is drawn inside the loop it opens, an Exit inside the loop it leaves
    assert d.node_cluster["n:outer/Enter"] == outer
    assert d.node_cluster["n:outer/Exit"] == outer
    assert d.node_cluster["n:outer/inner/Enter"] == inner
    assert d.node_cluster["n:outer/inner/Merge"] == inner
    assert d.node_cluster["n:outer/inner/Exit_1"] == inner
    assert d.node_cluster["n:outer/add"] == outer


@pytest.mark.parametrize("name", LOOP_CASES)
def test_one_cluster_per_frame_nested_like_the_loops(name):
    g = case(name)
    fa = analyze_frames(g)
    d = dot_of(g)
    want = {V.cluster_name(f.name): (V.cluster_name(f.parent) if f.parent else None)
            for f in fa.loop_frames()}
    assert d.cluster_parent == want


def test_collapsed_boxes_stay_in_their_frame_cluster():
    d = dot_of(case("while_nested"), collapse=1)
    outer, inner = "cluster_outer/while_context", "cluster_outer/inner/while_context"
    assert d.cluster_parent == {outer: None, inner: outer}
    # the scope "outer" is split by frame: one box per frame it has nodes in
    assert d.node_cluster["s:outer/@outer/while_context"] == outer
    assert d.node_cluster["s:outer/@outer/inner/while_context"] == inner
    counts = {n: int(re.search(r"(\d+) ops", d.label(n)).group(1))
              for n in d.nodes if n.startswith("s:")}
    fa = analyze_frames(case("while_nested"))
    assert sum(counts.values()) + 2 == 60  # every node but the 2 placeholders is in a box
    assert counts["s:outer/@outer/inner/while_context"] >= len(
        fa.frames["outer/inner/while_context"].nodes)


# --- real Graphviz --------------------------------------------------------------------------

@needs_dot
@pytest.mark.parametrize("name", CASES)
def test_every_conformance_graph_renders_to_svg(name):
    g = case(name)
    svg = V.render(V.to_dot(g), "svg").decode("utf-8")
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    fa = analyze_frames(g)
    titles = [html.unescape(t) for t in SVG_CLUSTER_RE.findall(svg)]
    assert sorted(titles) == sorted(V.cluster_name(f.name) for f in fa.loop_frames())


@needs_dot
@pytest.mark.parametrize("name", LOOP_CASES)
def test_loop_svg_has_one_cluster_per_frame_even_collapsed(name):
    g = case(name)
    fa = analyze_frames(g)
    for collapse in (1, 2):
        svg = V.render(V.to_dot(g, collapse=collapse), "svg").decode("utf-8")
        titles = sorted(html.unescape(t) for t in SVG_CLUSTER_RE.findall(svg))
        assert titles == sorted(V.cluster_name(f.name) for f in fa.loop_frames()), collapse


@needs_dot
def test_nodes_are_laid_out_inside_their_cluster():
    # Graphviz's own layout (JSON output) puts each loop node within its cluster's box
    text = V.to_dot(case("while_nested"))
    layout = json.loads(subprocess.run(["dot", "-Tjson"], input=text.encode(),
                                       capture_output=True, check=True).stdout)
    objs = layout["objects"]
    nodes = {o["_gvid"]: o for o in objs if "pos" in o}
    checked = 0
    for c in (o for o in objs if o.get("name", "").startswith("cluster_")):
        x0, y0, x1, y1 = map(float, c["bb"].split(","))
        for gid in c.get("nodes", []):
            x, y = map(float, nodes[gid]["pos"].split(","))
            assert x0 <= x <= x1 and y0 <= y <= y1, (c["name"], nodes[gid]["name"])
            checked += 1
    assert checked > 50


@needs_dot
@pytest.mark.parametrize("fmt, magic", [("svg", b"<?xml"), ("png", b"\x89PNG"),
                                        ("pdf", b"%PDF")])
def test_render_formats(fmt, magic):
    assert V.render(V.to_dot(case("dag_basic")), fmt).startswith(magic)


@needs_dot
def test_render_reports_graphviz_failure():
    with pytest.raises(DfgError, match="Graphviz 'dot' failed"):
        V.render("digraph { a -> }", "svg")


def test_render_without_dot_is_a_usage_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(V.GraphvizNotFoundError) as e:
        V.render("digraph { a }", "svg")
    assert e.value.exit_code == 2 and isinstance(e.value, UsageError)
    assert "apt-get install graphviz" in str(e.value)
    # DOT itself needs no Graphviz
    assert V.render("digraph { a }", "dot") == b"digraph { a }"


def test_render_rejects_unknown_format():
    with pytest.raises(UsageError, match="unknown picture format"):
        V.render("digraph {}", "jpg")


# --- nodes and edges --------------------------------------------------------------------------

def test_switch_outputs_marked_true_false():
    d = dot_of(case("cond_basic"))
    t = d.edge("n:branch/Switch", "n:branch/switch_t")
    f = d.edge("n:branch/Switch", "n:branch/switch_f")
    assert unquote(t["label"]).startswith("T ") and unquote(f["label"]).startswith("F ")
    assert t["color"] != f["color"]
    assert unquote(t["color"]) == "#16a34a" and unquote(f["color"]) == "#dc2626"
    # the data switched keeps its dtype and shape on the label
    assert unquote(d.edge("n:branch/Mul/Switch", "n:branch/Mul")["label"]) == "T float32 [3]"


def test_data_edges_show_dtype_and_shape_control_edges_dashed():
    g = make("\n".join([
        ph("x", shape=(2, 3)),
        'node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } '
        'dim { size: 4 } } float_val: 1 } } } }',
        op("mm", "MatMul", "x", "w"),
        op("act", "Relu", "mm"),
        'node { name: "init" op: "NoOp" }',
        op("y", "Identity", "act", "^init"),
    ]))
    d = dot_of(g)
    assert unquote(d.edge("n:x", "n:mm")["label"]) == "float32 [2,3]"
    assert unquote(d.edge("n:mm", "n:act")["label"]) == "float32 [2,4]"
    ctrl = d.edge("n:init", "n:y")
    assert ctrl["style"] == "dashed" and "label" not in ctrl
    assert "style" not in d.edge("n:act", "n:y")


def test_edge_out_of_slot_one_shows_the_slot():
    g = make("\n".join([
        ph("x", shape=(5,)),
        'node { name: "u" op: "Unique" input: "x" attr { key: "T" value { type: DT_FLOAT } } '
        'attr { key: "out_idx" value { type: DT_INT32 } } }',
        op("vals", "Identity", "u"),
        op("idx", "Identity", "u:1", T="DT_INT32"),
    ]))
    d = dot_of(g)
    assert unquote(d.edge("n:u", "n:idx")["label"]) == ":1 int32"
    assert unquote(d.edge("n:u", "n:vals")["label"]) == "float32"


def test_node_shape_by_kind():
    g = make("\n".join([
        ph("x"),
        'node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } } '
        'attr { key: "shape" value { shape { } } } }',
        const("lonely"),  # no consumer: drawn as a box, not an annotation
        op("s", "Switch", "x", "x"),
        op("a", "Add", "x", "v"),
    ]))
    d = dot_of(g)
    assert d.nodes["n:x"]["shape"] == "invhouse"
    assert d.nodes["n:v"]["shape"] == "cylinder"
    assert d.nodes["n:lonely"]["shape"] == "box" and "style" in d.nodes["n:lonely"]
    assert d.nodes["n:s"]["shape"] == "octagon"
    assert "shape" not in d.nodes["n:a"]  # the default: a rounded box
    assert d.label("n:a") == r"a\nAdd"


def test_consts_are_annotations_unless_hidden():
    g = case("cond_basic")
    d = dot_of(g)
    assert "n:branch/Mul/y" not in d.nodes
    ann = "c:branch/Mul/y>n:branch/Mul"
    assert d.nodes[ann]["shape"] == "plaintext" and d.label(ann) == "y = 2"
    assert d.edge(ann, "n:branch/Mul")["arrowsize"] == "0.4"
    hidden = dot_of(g, show_consts=False)
    assert not [n for n in hidden.nodes if n.startswith("c:")]
    assert "n:branch/Mul/y" not in hidden.nodes
    assert set(hidden.nodes) == {n for n in d.nodes if not n.startswith("c:")}


def test_const_used_as_control_dependency_stays_a_box():
    g = make("\n".join([ph("x"), const("c"), op("y", "Identity", "x", "^c")]))
    d = dot_of(g)
    assert "n:c" in d.nodes and d.edge("n:c", "n:y")["style"] == "dashed"


def test_big_const_annotation_shows_dtype_and_shape():
    d = dot_of(case("mlp"))
    labels = [d.label(n) for n in d.nodes if n.startswith("c:")]
    assert any(re.search(r"float32 \[\d+,\d+\]", lab) for lab in labels), labels


# --- collapse ---------------------------------------------------------------------------------

def scoped_graph() -> Graph:
    # a/ holds a chain of 3 plus a/b/ (a chain of 3); c is top level; edges cross scopes
    return make("\n".join([
        ph("x", shape=(4,)),
        op("a/p", "Neg", "x"), op("a/q", "Abs", "a/p"), op("a/r", "Exp", "a/q"),
        op("a/b/s", "Neg", "a/r"), op("a/b/t", "Abs", "a/b/s"), op("a/b/u", "Exp", "a/b/t"),
        op("c", "AddN", "a/b/u", "a/r", "a/p"),
    ]))


def test_collapse_depth_one_merges_scope_and_edges():
    d = dot_of(scoped_graph(), collapse=1)
    assert set(d.nodes) == {"n:x", "s:a/", "n:c"}
    assert d.label("s:a/") == r"a/\n6 ops: Abs, Exp, Neg"
    assert d.nodes["s:a/"]["shape"] == "box3d"
    merged = d.edge("s:a/", "n:c")
    assert unquote(merged["label"]) == "float32 [4] \u00d73"  # one edge, with the count
    assert float(merged["penwidth"]) > 1


def test_collapse_depth_two_and_none():
    d2 = dot_of(scoped_graph(), collapse=2)
    assert set(d2.nodes) == {"n:x", "n:a/p", "n:a/q", "n:a/r", "s:a/b/", "n:c"}
    assert d2.label("s:a/b/") == r"b/\n3 ops: Abs, Exp, Neg"  # "a/": every scoped node's
    assert len([e for e in d2.edges if e[0] == "s:a/b/"]) == 1
    dn = dot_of(scoped_graph(), collapse=None)
    assert not [n for n in dn.nodes if n.startswith("s:")] and len(dn.nodes) == 8


def test_expand_opens_chosen_scopes():
    d = dot_of(scoped_graph(), collapse=1, expand=["a"])
    assert set(d.nodes) == {"n:x", "n:a/p", "n:a/q", "n:a/r", "s:a/b/", "n:c"}
    # opening a nested scope opens its ancestors too
    d = dot_of(scoped_graph(), collapse=1, expand=["a/b/"])
    assert not [n for n in d.nodes if n.startswith("s:")]


def test_expand_unknown_scope_is_a_usage_error():
    with pytest.raises(UsageError, match="no name scope 'nope'"):
        V.to_dot(scoped_graph(), collapse=1, expand=["nope"])


def test_bad_collapse_value():
    for bad in (0, -1, "deep", True):
        with pytest.raises(UsageError):
            V.build_view(scoped_graph(), collapse=bad)


def test_const_only_scope_goes_with_its_consumer():
    # maximum_iterations-style constants in a scope of their own make no box
    g = make("\n".join([ph("x"), const("s/k1"), const("s/k2"),
                        op("t/a", "Add", "x", "s/k1"), op("t/b", "Add", "t/a", "s/k2"),
                        op("t/c", "Neg", "t/b")]))
    d = dot_of(g, collapse=1)
    assert set(d.nodes) == {"n:x", "s:t/"}
    assert d.label("s:t/") == r"t/\n5 ops: Add, Neg"


def layered(scopes: int, ops_per_scope: int) -> Graph:
    lines = [ph("in", shape=(8,))]
    prev = "in"
    for s in range(scopes):
        for i in range(ops_per_scope):
            name = f"blk{s}/sub{i % 3}/op{i}"
            lines.append(op(name, "Neg", prev))
            prev = name
    return make("\n".join(lines))


def test_auto_collapse_picks_deepest_depth_within_budget():
    g = layered(30, 12)  # 361 nodes; depth 1: 30 boxes, depth 2: 90 boxes
    assert V.build_view(g).depth == 2  # 361 nodes do not fit the default 250; 91 boxes do
    v = V.build_view(g, max_boxes=100)
    assert (v.depth, len(v.boxes), v.auto) == (2, 91, True)
    v = V.build_view(g, max_boxes=50)
    assert (v.depth, len(v.boxes)) == (1, 31)
    assert V.build_view(g, max_boxes=1000).depth is None


def test_auto_collapse_falls_back_to_series_for_flat_graphs():
    lines = [ph("x", shape=(3,))]
    prev = "x"
    for i in range(400):
        lines.append(op(f"chain_{i}", "Neg", prev))
        prev = f"chain_{i}"
    lines.append(op("out", "Identity", prev))
    g = make("\n".join(lines))
    v = V.build_view(g)
    assert v.series and v.size <= V.DEFAULT_MAX_BOXES
    d = dot_of(g)
    assert d.label("r:chain_*") == r"chain_*\n400 ops: Neg"
    assert d.nodes["r:chain_*"]["shape"] == "folder"
    assert d.edges and all(s != t for s, t, _ in d.edges)  # chain-internal edges hidden
    # an explicit depth never groups series
    assert not V.build_view(g, collapse=1).series


def test_auto_collapse_also_bounds_the_layout_cost(monkeypatch):
    g = layered(30, 12)
    d1, d2 = V.build_view(g, collapse=1), V.build_view(g, collapse=2)
    assert d1.cost < d2.cost
    assert V.build_view(g, max_boxes=100).depth == 2
    monkeypatch.setattr(V, "MAX_LAYOUT_COST", d2.cost - 1)
    assert V.build_view(g, max_boxes=100).depth == 1  # 91 boxes, but too costly to lay out


def dense_dag(n: int, fan: int) -> Graph:
    lines = [ph("x")]
    for i in range(n):
        # every node reads the `fan` nodes before it, so edges span many ranks
        ins = ["x"] + [f"v{j}" for j in range(max(0, i - fan), i)]
        lines.append(f'node {{ name: "v{i}" op: "AddN" '
                     + " ".join(f'input: "{x}"' for x in ins)
                     + f' attr {{ key: "N" value {{ i: {len(ins)} }} }} '
                       'attr { key: "T" value { type: DT_FLOAT } } }')
    return make("\n".join(lines))


def test_costly_pictures_get_cheaper_layout_settings():
    small = V.to_dot(case("scan"))
    assert "nslimit" not in small and "xlabel=" not in small and " label=" in small
    g = dense_dag(150, 40)
    view = V.build_view(g, collapse=None)
    assert view.cost > V.FASTEST_LAYOUT_COST
    text = V.to_dot(g, view=view)
    assert "splines=line" in text and "fastest layout" in text
    d = Dot(text)
    assert all("label" not in a for _, _, a in d.edges)
    assert all("xlabel" in a for s, _, a in d.edges if s != "n:x")
    mid = layered(10, 6)
    view = V.build_view(mid, collapse=None)
    assert view.cost < V.FAST_LAYOUT_COST  # a chain costs one rank per edge


def test_every_conformance_graph_gets_the_plain_layout():
    for name in CASES:
        assert V.build_view(case(name)).cost < V.FAST_LAYOUT_COST, name


def load_benchmark():
    path = HERE.parent / "benchmarks" / "viz_10k.py"
    spec = importlib.util.spec_from_file_location("viz_10k", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_10k_node_graph_collapses_to_a_few_hundred_boxes_quickly():
    g = Graph(load_benchmark().build(100, 100))
    assert len(g) == 10_001
    t0 = time.process_time()
    text = V.to_dot(g)
    elapsed = time.process_time() - t0
    d = Dot(text)
    assert len(d.nodes) <= V.DEFAULT_MAX_BOXES
    assert "s:block_042/" in d.nodes and d.label("s:block_042/").startswith(
        r"block_042/\n100 ops: ")
    assert elapsed < 10, elapsed
    if HAVE_DOT:
        t0 = time.perf_counter()
        V.render(text, "svg")
        assert time.perf_counter() - t0 < 300    # catches a hang; wall time is the load's


# --- --fetch -----------------------------------------------------------------------------------

def test_fetch_highlights_what_prune_keeps_and_greys_the_rest():
    info = json.loads((DATA / "while_nested" / "case.json").read_text())
    kept = set(info["prune"]["nodes"])
    g = case("while_nested")
    d = dot_of(g, fetches=info["prune"]["fetch"], show_consts=False)
    grey = {n[2:] for n, a in d.nodes.items() if a.get("fillcolor") == '"#f5f5f5"'}
    drawn = {n[2:] for n in d.nodes if n.startswith("n:")}
    assert grey == drawn - kept
    assert "outer/inner/Exit" in grey  # the one loop output nobody reads
    for f in info["prune"]["fetch"]:
        assert d.nodes[f"n:{f}"]["penwidth"] == "2.5"
    greyed_edge = d.edge("n:outer/inner/Switch", "n:outer/inner/Exit")
    assert greyed_edge["color"] == '"#c0c0c0"'


def test_fetch_in_collapsed_box_counts_what_is_needed():
    d = dot_of(scoped_graph(), collapse=1, fetches=["a/q"])
    assert d.label("s:a/") == r"a/\n6 ops: Abs, Exp, Neg\n2 needed"
    assert d.nodes["n:c"]["fillcolor"] == '"#f5f5f5"'


def test_fetch_of_missing_node_fails_like_prune():
    r = CliRunner().invoke(cli, ["viz", str(DATA / "dag_basic" / "graph.pbtxt"),
                                 "--fetch", "nope"])
    assert r.exit_code == 1 and "names no node" in r.stderr


# --- escaping and determinism ---------------------------------------------------------------------

NASTY = ['we"ird', "back\\slash", "rec{o}r|d<x>", "new\nline"]


def nasty_graph() -> Graph:
    gd = graph_pb2.GraphDef()
    prev = None
    for name in NASTY:
        n = gd.node.add(name=name, op="Neg" if prev else "Placeholder")
        n.attr["T" if prev else "dtype"].type = 1
        if prev:
            n.input.append(prev)
        prev = name
    return Graph(gd)


def test_quote_escapes_lexer_and_record_characters():
    assert V.quote('a"b') == r'"a\"b"'
    assert V.quote("a\\b") == r'"a\\b"'
    assert V.quote("{a|b}<p>") == r'"\{a\|b\}\<p\>"'
    assert V.quote("a\nb") == r'"a\nb"'
    assert V.quote_id("a\\b\"c") == r'"a\\b\"c"'


@needs_dot
def test_awkward_names_survive_graphviz():
    text = V.to_dot(nasty_graph())
    svg = V.render(text, "svg").decode()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", svg)]
    for name in NASTY:
        for part in name.split("\n"):
            assert part in texts, (part, texts)
    # every edge connects the declared nodes: no node invented by a bad escape
    plain = subprocess.run(["dot", "-Tplain"], input=text.encode(), capture_output=True,
                           check=True).stdout.decode()
    assert sum(1 for line in plain.splitlines() if line.startswith("node ")) == len(NASTY)
    assert sum(1 for line in plain.splitlines() if line.startswith("edge ")) == len(NASTY) - 1


@pytest.mark.parametrize("name", ["while_nested", "gradients", "cond_nested", "scan"])
def test_same_graph_same_dot_whatever_the_node_order(name):
    g = case(name)
    first = V.to_dot(g)
    assert V.to_dot(case(name)) == first
    gd = graph_pb2.GraphDef()
    gd.CopyFrom(g.graph_def)
    nodes = list(gd.node)
    del gd.node[:]
    gd.node.extend(reversed(nodes))
    assert V.to_dot(Graph(gd)) == first


def test_broken_graphs_still_draw():
    for name in ("duplicate_node_name.pbtxt", "missing_input_node.pbtxt",
                 "cycle_without_nextiteration.pbtxt", "enter_frame_mismatch.pbtxt"):
        text = V.to_dot(load_graph(DATA / "invalid" / name))
        assert text.startswith("// dfg viz:") and text.rstrip().endswith("}")


# --- static shapes ------------------------------------------------------------------------------

def test_shape_inference_rules():
    g = make("\n".join([
        ph("a", shape=(2, 1, 3)), ph("b", shape=(4, 1)),
        op("bc", "Mul", "a", "b"),
        'node { name: "newshape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
        'attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } } '
        'int_val: -1 int_val: 6 } } } }',
        'node { name: "rs" op: "Reshape" input: "bc" input: "newshape" '
        'attr { key: "T" value { type: DT_FLOAT } } }',
        'node { name: "axis" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
        'attr { key: "value" value { tensor { dtype: DT_INT32 int_val: 1 } } } }',
        'node { name: "sum" op: "Sum" input: "rs" input: "axis" '
        'attr { key: "T" value { type: DT_FLOAT } } attr { key: "keep_dims" value { b: true } } }',
        'node { name: "shp" op: "Shape" input: "sum" attr { key: "T" value { type: DT_FLOAT } } }',
    ]))
    facts = V.TensorFacts(g)
    assert facts.shape("bc", 0) == (2, 4, 3)
    assert facts.shape("rs", 0) == (4, 6)
    assert facts.shape("sum", 0) == (4, 1)
    assert facts.shape("shp", 0) == (2,)
    assert facts.edge_label(g.node("shp").in_edges[0]) == "float32 [4,1]"


def test_output_shapes_attr_wins():
    g = make(ph("x") + """
        node { name: "f" op: "MyCustomOp" input: "x"
               attr { key: "T" value { type: DT_INT64 } }
               attr { key: "_output_shapes" value { list { shape { dim { size: -1 }
                      dim { size: 7 } } } } } }
        node { name: "y" op: "Identity" input: "f" attr { key: "T" value { type: DT_INT64 } } }
    """)
    d = dot_of(g)
    # an op unknown to the registry: dtype from its T attr, shape from _output_shapes
    assert unquote(d.edge("n:f", "n:y")["label"]) == "int64 [?,7]"
    assert unquote(d.edge("n:x", "n:f")["label"]) == "float32"  # placeholder without shape


# --- command line ---------------------------------------------------------------------------------

def invoke(*args, stdin: bytes | None = None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=stdin)


def run(*args, env: dict[str, str] | None = None, stdin: bytes | None = None):
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", *map(str, args)],
                          input=stdin, capture_output=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1", **(env or {})})


WHILE_NESTED = DATA / "while_nested" / "graph.pbtxt"


def test_cli_dot_on_stdout():
    r = invoke("viz", WHILE_NESTED)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("// dfg viz: 60 nodes")
    assert Dot(r.stdout).cluster_parent  # parses back, with clusters
    assert invoke("viz", WHILE_NESTED, "-o", "-").stdout == r.stdout


def test_cli_options_reach_the_dot():
    r = invoke("viz", WHILE_NESTED, "--rankdir", "LR", "--collapse", "1", "--no-consts")
    assert r.exit_code == 0, r.output
    d = Dot(r.stdout)
    assert "rankdir=LR" in r.stdout
    assert "s:outer/@outer/while_context" in d.nodes
    assert not [n for n in d.nodes if n.startswith("c:")]
    r = invoke("viz", DATA / "gradients" / "graph.pbtxt", "--collapse", "1",
               "--expand", "grads")
    assert r.exit_code == 0, r.output
    d = Dot(r.stdout)
    assert "s:grads/" not in d.nodes and "s:grads/Mean_grad/" in d.nodes


@pytest.mark.parametrize("args, message", [
    (["--collapse", "0"], "at least 1"),
    (["--collapse", "deep"], "not a depth"),
    (["--rankdir", "BT"], "BT"),
    (["--format", "jpg"], "jpg"),
    (["-o", "g.jpeg"], "cannot tell the picture format"),
    (["--collapse", "1", "--expand", "nope"], "no name scope"),
])
def test_cli_usage_errors_exit_2(args, message, tmp_path):
    r = invoke("viz", WHILE_NESTED, *args)
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_cli_unreadable_graph_exit_2(tmp_path):
    r = invoke("viz", tmp_path / "missing.pbtxt")
    assert r.exit_code == 2 and "no such file" in r.stderr


@needs_dot
def test_cli_writes_the_format_of_the_extension(tmp_path):
    for ext, magic in (("svg", b"<?xml"), ("png", b"\x89PNG"), ("pdf", b"%PDF"),
                       ("dot", b"// dfg viz"), ("gv", b"// dfg viz")):
        out = tmp_path / f"g.{ext}"
        r = invoke("viz", WHILE_NESTED, "-o", out)
        assert r.exit_code == 0, r.output
        assert out.read_bytes().startswith(magic), ext
    # --format wins over the extension
    out = tmp_path / "picture.out"
    assert invoke("viz", WHILE_NESTED, "-o", out, "--format", "svg").exit_code == 0
    assert out.read_bytes().startswith(b"<?xml")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic writes


def test_cli_reads_standard_input():
    r = invoke("viz", "-", stdin=WHILE_NESTED.read_bytes())
    assert r.exit_code == 0, r.output
    assert r.stdout == invoke("viz", WHILE_NESTED).stdout


def test_cli_says_when_it_collapsed(tmp_path):
    lines = [ph("x")] + [op(f"s{i}/n{j}", "Neg", "x") for i in range(40) for j in range(10)]
    path = tmp_path / "wide.pbtxt"
    path.write_text("\n".join(lines))
    r = invoke("viz", path)
    assert r.exit_code == 0
    assert "drawn as 41 boxes (name scopes at depth 1 collapsed" in r.stderr
    assert "collapse: depth 1 (auto)" in r.stdout
    assert "large picture" not in r.stderr
    r = invoke("viz", path, "--collapse", "none")
    assert r.exit_code == 0 and "a large picture (401 boxes" in r.stderr


@needs_dot
def test_cli_subprocess_pipeline_prune_to_svg(tmp_path):
    # dfg prune m.pb --fetch y | dfg viz - -o y.svg, as real processes
    pruned = run("prune", WHILE_NESTED, "--fetch", "outer/Exit_1", "--to", "pb")
    assert pruned.returncode == 0, pruned.stderr
    out = tmp_path / "y.svg"
    r = run("viz", "-", "-o", out, stdin=pruned.stdout)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert len(SVG_CLUSTER_RE.findall(svg)) == 2
    assert "<title>n:outer/Exit_1</title>" in svg
    assert "<title>n:outer/inner/Exit</title>" not in svg  # pruned away


def test_cli_without_graphviz_exit_2_with_hint_and_dot_still_works(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    out = tmp_path / "g.svg"
    r = run("viz", WHILE_NESTED, "-o", out, env={"PATH": str(empty)})
    assert r.returncode == 2
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dfg: error: ")
    assert "apt-get install graphviz" in lines[0]
    assert not out.exists()
    r = run("viz", WHILE_NESTED, "-o", tmp_path / "g.dot", env={"PATH": str(empty)})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "g.dot").read_text().startswith("// dfg viz")
    r = run("viz", WHILE_NESTED, env={"PATH": str(empty)})
    assert r.returncode == 0 and r.stdout.startswith(b"// dfg viz")


def test_cli_help_has_an_example():
    r = invoke("viz", "--help")
    assert r.exit_code == 0
    assert "dfg viz model.pbtxt -o model.svg" in r.output
