"""The interactive HTML viewer: one self-contained file (no network when opened) in which a
person pans, zooms, opens and closes name scopes, searches a node and reads its details.

Layout is Graphviz's, computed here: every name scope (and the graph itself) is laid out
once with its direct children as boxes (sub-scopes) and nodes, by one ``dot -Tsvg`` run per
nesting level over all that level's scopes, deepest first. A scope's box at its parent's
level is sized from its own layout (a fixed fraction of it, within bounds), so opening it
draws its layout inside the box, scaled to fit, with no new layout: the picture is a
zoomable map, each level drawn inside its box. The page holds each scope's SVG as text and
puts it into the DOM only when the scope is opened, so a 10,000-node graph starts with the
few boxes of its top level.

Why Graphviz computed by dfg rather than a JavaScript layout library: dfg already draws
with Graphviz (the same look as ``dfg viz -o x.svg``), the page then needs no layout code
at all (a few hundred lines of our own JavaScript for pan, zoom, open/close, search and
details), and nothing is vendored, so there is no licence or size to carry.

Every drawn node or scope is an SVG element with ``data-node`` holding its full name
(scopes: the scope path, nodes: the node name), for tests and users' scripts.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as D
from .errors import DfgError
from .graph import Graph
from .op_sets import CONST_OPS
from .tensors import format_shape
from .viz import (
    _NOT_XML,
    _SPEED_ATTRS,
    FAST_LAYOUT_COST,
    FASTEST_LAYOUT_COST,
    MARK_COLORS,
    PROFILE_MIN_SHARE,
    PROFILE_TOP,
    TensorFacts,
    _const_summary,
    find_dot,
    group_path,
    heat_color,
    model_prefix,
    node_kind,
    quote,
    short_name,
)

# A scope's box is this fraction of its own layout, within these bounds (points)
BOX_SCALE = 0.45
BOX_MIN = (110.0, 36.0)
BOX_MAX = (560.0, 420.0)
# More items than this in one scope are split into numbered groups of this size, so that
# no single layout is beyond dot
GROUP_SIZE = 400
_KIND_FILL = {"placeholder": "#dbeafe", "variable": "#fde68a", "const": "#e5e7eb",
              "op": "#ffffff", "control": "#fce7f3"}


@dataclass
class _Scope:
    sid: str
    path: str                       # full scope path ("" for the graph)
    parent: str | None
    scopes: list[str] = field(default_factory=list)   # child scope ids
    nodes: list[str] = field(default_factory=list)    # node names directly inside
    members: int = 0                # nodes inside, at any depth
    depth: int = 0
    size: tuple[float, float] = (0.0, 0.0)   # the layout's size in points
    svg: str = ""


def _esc(s: str) -> str:
    """``s`` for an XML attribute or text: what XML cannot hold (control characters) as
    ``\\xNN``/``\\uNNNN``, as dfg prints names, then the markup characters escaped."""
    s = _NOT_XML.sub(lambda m: (f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                                else f"\\u{ord(m.group()):04x}"), s)
    # newline and tab as references: an attribute's value keeps them then
    return html.escape(s, quote=True).replace("\n", "&#10;").replace("\t", "&#9;").replace(
        "\r", "&#13;")


class _Builder:
    def __init__(self, graph: Graph, marks: dict[str, str] | None,
                 profile: dict[str, float] | None, title: str) -> None:
        self.graph = graph
        self.marks = marks or {}
        self.profile = profile or {}
        self.title = title
        self.facts = TensorFacts(graph)
        self.nodes = [n for n in graph.nodes if graph.get(n.name) is n]
        # constants feeding only data inputs are shown in their consumers' details, not
        # drawn (TensorBoard does the same): the layout stays about the computation
        # (a function's resource arguments, one per captured variable, the same way)
        self.hidden = {n.name for n in self.nodes
                       if (n.op in CONST_OPS or (n.op == "_Arg" and "T" in n.attr
                                                 and n.attr["T"].type == D.DT_RESOURCE))
                       and n.out_edges and not any(e.is_control for e in n.out_edges)}
        self.prefix = model_prefix(group_path(n.name) for n in self.nodes)
        self.scopes: dict[str, _Scope] = {}
        self.scope_of_path: dict[str, str] = {}
        self.node_scope: dict[str, str] = {}
        self.node_id: dict[str, str] = {}
        self._tree()

    # --- the scope tree -------------------------------------------------------------------
    def _scope(self, path: str) -> str:
        """The scope at ``path`` relative to the model's prefix (the tree starts inside
        it: the scopes every node shares are no level of their own)."""
        sid = self.scope_of_path.get(path)
        if sid is not None:
            return sid
        parent = None if path == "" else self._scope(path.rpartition("/")[0])
        sid = f"s{len(self.scopes)}"
        full = "/".join(self.prefix + [path]) if path else ""
        sc = _Scope(sid, full, parent)
        if parent is not None:
            self.scopes[parent].scopes.append(sid)
            sc.depth = self.scopes[parent].depth + 1
        self.scopes[sid] = sc
        self.scope_of_path[path] = sid
        return sid

    def _tree(self) -> None:
        self._scope("")
        for i, n in enumerate(self.nodes):
            self.node_id[n.name] = f"v{i}"
            if n.name in self.hidden:
                continue
            path = group_path(n.name).rpartition("/")[0]
            head = "/".join(self.prefix)
            if self.prefix and (path == head or path.startswith(head + "/")):
                path = path[len(head) + 1:]
            sid = self._scope(path)
            self.scopes[sid].nodes.append(n.name)
            self.node_scope[n.name] = sid
        # big flat scopes: numbered groups of GROUP_SIZE items
        for sc in list(self.scopes.values()):
            if len(sc.nodes) > GROUP_SIZE:
                names = sorted(sc.nodes)
                sc.nodes = []
                rel = next(p for p, i in self.scope_of_path.items() if i == sc.sid)
                for k in range(0, len(names), GROUP_SIZE):
                    label = f"{rel}/" if rel else ""
                    gid = self._scope(f"{label}[{k + 1}-{min(k + GROUP_SIZE, len(names))}]")
                    self.scopes[gid].nodes = names[k:k + GROUP_SIZE]
                    for m in names[k:k + GROUP_SIZE]:
                        self.node_scope[m] = gid
        # a scope holding nothing drawn (only hidden constants) is dropped
        for sc in sorted(self.scopes.values(), key=lambda s: -s.depth):
            sc.members = len(sc.nodes) + sum(self.scopes[c].members for c in sc.scopes)
        for sc in self.scopes.values():
            sc.scopes = [c for c in sc.scopes if self.scopes[c].members]
        # a scope holding one scope and no node is no level of its own: its child takes
        # its place (a function body's text_lstm_1/lstm_1/while/...)
        for sc in sorted(self.scopes.values(), key=lambda s: s.depth):
            if sc.parent is None or sc.nodes or len(sc.scopes) != 1 or not sc.members:
                continue
            parent = self.scopes[sc.parent]
            (child,) = sc.scopes
            parent.scopes[parent.scopes.index(sc.sid)] = child
            self.scopes[child].parent = parent.sid
            sc.scopes, sc.members = [], 0
        # a scope of one node is that node (as dfg viz draws it)
        for sc in sorted(self.scopes.values(), key=lambda s: -s.depth):
            if sc.parent is None or sc.members != 1 or sc.scopes:
                continue
            parent = self.scopes[sc.parent]
            (name,) = sc.nodes
            parent.nodes.append(name)
            parent.scopes.remove(sc.sid)
            self.node_scope[name] = parent.sid
            sc.nodes, sc.members = [], 0
        # depths again, after the moves: layouts are made deepest first
        todo = [self.scopes["s0"]]
        while todo:
            sc = todo.pop()
            for c in sc.scopes:
                self.scopes[c].depth = sc.depth + 1
                todo.append(self.scopes[c])

    def _item(self, name: str, level: _Scope) -> str | None:
        """The item of ``level`` holding node ``name`` (a node id or a child scope id)."""
        sid = self.node_scope.get(name)
        if sid is None:
            return None
        if sid == level.sid:
            return self.node_id[name]
        while sid is not None:
            parent = self.scopes[sid].parent
            if parent == level.sid:
                return sid
            sid = parent
        return None

    # --- layouts --------------------------------------------------------------------------
    def _shares(self) -> dict[str, float]:
        """Profile share of every node and scope id."""
        out: dict[str, float] = defaultdict(float)
        for name, share in self.profile.items():
            if name not in self.node_id:
                continue
            out[self.node_id[name]] += share
            sid = self.node_scope.get(name)
            while sid is not None:
                out[sid] += share
                sid = self.scopes[sid].parent
        return out

    def _marks_in(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = defaultdict(Counter)
        for name, mark in self.marks.items():
            sid = self.node_scope.get(name)
            if sid is None:   # a hidden constant: its consumers' scope
                n = self.graph.get(name)
                if n is None or not n.out_edges:
                    continue
                sid = self.node_scope.get(n.out_edges[0].dst)
            while sid is not None:
                out[sid][mark] += 1
                sid = self.scopes[sid].parent
        return out

    def _dot(self, sc: _Scope, shares: dict[str, float], top: set[str],
             marks_in: dict[str, Counter[str]]) -> str:
        lines = [f"digraph {quote(sc.sid)} {{",
                 '  graph [rankdir=TB, fontname="Helvetica", fontsize=10, nodesep=0.25, '
                 'ranksep=0.35, newrank=true];',
                 '  node [fontname="Helvetica", fontsize=10, shape=box, '
                 'style="rounded,filled", fillcolor="#ffffff", height=0.3];',
                 '  edge [fontname="Helvetica", fontsize=8, arrowsize=0.6];']
        for cid in sc.scopes:
            c = self.scopes[cid]
            w, h = c.size
            bw = min(max(w * BOX_SCALE, BOX_MIN[0]), BOX_MAX[0])
            bh = min(max(h * BOX_SCALE, BOX_MIN[1]), BOX_MAX[1])
            leaf = (c.path[len(sc.path) + 1:] if sc.path and c.path.startswith(sc.path + "/")
                    else c.path.rpartition("/")[2])
            label = [short_name(leaf, (), 38) + "/", f"{c.members} nodes"]
            a = {"id": quote(cid), "class": '"scope"', "shape": "box",
                 "style": '"rounded,filled"', "fillcolor": '"#dcfce7"', "color": '"#15803d"',
                 "width": f"{bw / 72:.2f}", "height": f"{bh / 72:.2f}",
                 "labelloc": "t"}
            self._decorate(cid, a, label, shares, top, marks_in.get(cid))
            a["label"] = quote("\n".join(label))
            lines.append(f"  {quote(cid)} [{', '.join(f'{k}={v}' for k, v in a.items())}];")
        for name in sc.nodes:
            n = self.graph.node(name)
            nid = self.node_id[name]
            # the name inside this scope (a scope of one node was folded into its parent:
            # "Cast_1/ReadVariableOp", not "ReadVariableOp")
            rel = group_path(name)
            if sc.path and rel.startswith(sc.path + "/"):
                rel = rel[len(sc.path) + 1:]
            label = [short_name(rel, self.prefix, 38), n.op]
            a = {"id": quote(nid), "class": '"op"',
                 "fillcolor": quote(_KIND_FILL[node_kind(n.op)])}
            if node_kind(n.op) == "placeholder":
                a["shape"] = "invhouse"
            mark = self.marks.get(name)
            if mark is not None:
                a["fillcolor"], a["color"] = MARK_COLORS[mark]
                a["penwidth"] = "2"
            self._decorate(nid, a, label, shares, top, None)
            a["label"] = quote("\n".join(label))
            lines.append(f"  {quote(nid)} [{', '.join(f'{k}={v}' for k, v in a.items())}];")
        # edges between this level's items, merged per pair
        pairs: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for item_name in self._names_under(sc):
            n = self.graph.node(item_name)
            dst = self._item(item_name, sc)
            for e in n.in_edges:
                src = self._item(e.src, sc)
                if src is None or dst is None or src == dst:
                    continue
                pairs[(src, dst)].append(e)
        # costly layouts get viz's cheaper settings (see viz.FAST_LAYOUT_COST)
        cost = _layout_cost([k for k, es in pairs.items()
                             if not all(e.is_control for e in es)])
        speed = 2 if cost > FASTEST_LAYOUT_COST else 1 if cost > FAST_LAYOUT_COST else 0
        if speed:
            lines[1] = lines[1][:-2] + _SPEED_ATTRS[speed] + "];"
        for (src, dst), edges in sorted(pairs.items()):
            a: dict[str, str] = {}
            if all(e.is_control for e in edges):
                a.update(style="dashed", color='"#6b7280"', constraint="false")
            else:
                labels = {self.facts.edge_label(e) for e in edges if not e.is_control}
                text = labels.pop() if len(labels) == 1 else ""
                if len(edges) > 1:
                    text = f"{text} \u00d7{len(edges)}".strip()
                if text:
                    # xlabels are placed after layout: plain labels on a costly picture
                    # become layout nodes, and dot takes minutes
                    a["xlabel" if speed else "label"] = quote(text)
            attrs = f" [{', '.join(f'{k}={v}' for k, v in a.items())}]" if a else ""
            lines.append(f"  {quote(src)} -> {quote(dst)}{attrs};")
        lines.append("}")
        return "\n".join(lines)

    def _decorate(self, key: str, a: dict[str, str], label: list[str],
                  shares: dict[str, float], top: set[str],
                  marks: Counter[str] | None) -> None:
        """Profile colour and share, diff colour and counts."""
        share = shares.get(key)
        if share:
            a["fillcolor"] = quote(heat_color(share))
            if key in top:
                label.append(f"{100 * share:.1f}%")
        if marks:
            kind = next(k for k in MARK_COLORS if k in marks)
            a["fillcolor"], a["color"] = MARK_COLORS[kind]
            a["penwidth"] = "2"
            signs = {"added": "+", "removed": "-", "changed": "~", "renamed": ">"}
            label.append(" ".join(f"{signs[k]}{marks[k]}" for k in MARK_COLORS if k in marks))

    def _names_under(self, sc: _Scope) -> list[str]:
        out = list(sc.nodes)
        for c in sc.scopes:
            out.extend(self._names_under(self.scopes[c]))
        return out

    def layout(self) -> None:
        exe = find_dot()
        shares = self._shares()
        ranked = sorted(shares.items(), key=lambda kv: -kv[1])
        # the top nodes, and boxes, by share: labelled with it
        top = {k for k, v in ranked[:2 * PROFILE_TOP] if v >= PROFILE_MIN_SHARE}
        marks_in = self._marks_in()
        by_depth: dict[int, list[_Scope]] = defaultdict(list)
        for sc in self.scopes.values():
            if sc.members:
                by_depth[sc.depth].append(sc)
        for depth in sorted(by_depth, reverse=True):
            level = by_depth[depth]
            text = "\n".join(self._dot(sc, shares, top, marks_in) for sc in level)
            try:
                proc = subprocess.run([exe, "-Tsvg"], input=text.encode("utf-8"),
                                      capture_output=True, check=False)
            except OSError as e:
                raise DfgError(f"cannot run Graphviz 'dot' ({exe}): {e.strerror}") from None
            if proc.returncode != 0:
                msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
                raise DfgError("Graphviz 'dot' failed: " + (msg[-1] if msg else "no message"))
            docs = proc.stdout.decode("utf-8").split("<?xml")[1:]
            if len(docs) != len(level):
                raise DfgError(f"Graphviz 'dot' gave {len(docs)} pictures for {len(level)}")
            for sc, doc in zip(level, docs):
                self._take_svg(sc, doc)

    _VIEWBOX = re.compile(r'viewBox="([\d.\-]+) ([\d.\-]+) ([\d.]+) ([\d.]+)"')
    _GROUP = re.compile(r'<g id="([sv]\d+)" class="([^"]*)">')

    def _take_svg(self, sc: _Scope, doc: str) -> None:
        m = self._VIEWBOX.search(doc)
        w, h = (float(m.group(3)), float(m.group(4))) if m else (100.0, 50.0)
        # (graphviz names the later graphs of one run page0,1_graph0 ...)
        start = re.search(r'<g id="[^"]*graph\d+" class="graph"', doc)
        if start is None:
            raise DfgError("Graphviz 'dot' wrote an SVG without its graph group")
        body = doc[doc.index(">", start.start()) + 1: doc.rindex("</g>")]
        body = re.sub(r"<title>[^<]*</title>", "", body, count=1)
        body = re.sub(r'<polygon fill="white"[^>]*/>', "", body, count=1)
        body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
        names = {self.node_id[n]: n for n in sc.nodes}
        names.update({c: self.scopes[c].path for c in sc.scopes})

        def tag(m: re.Match[str]) -> str:
            key = m.group(1)
            return (f'<g id="{key}" class="{m.group(2)}" data-node="{_esc(names.get(key, ""))}"'
                    f' data-key="{key}">')

        body = self._GROUP.sub(tag, body)
        # a node's <title> (what a browser shows on hover) is its full name, not its id
        body = re.sub(r"<title>([sv]\d+)</title>",
                      lambda m: f"<title>{_esc(names.get(m.group(1), ''))}</title>", body)
        # graphviz's own translate puts (0,0) at the bottom left: keep it in a group
        sc.svg = f'<g transform="translate(4 {h - 4:.2f})">{body}</g>'
        sc.size = (w, h)

    # --- details --------------------------------------------------------------------------
    def details(self) -> dict[str, Any]:
        nodes: dict[str, Any] = {}
        for n in self.nodes:
            nid = self.node_id[n.name]
            ins = []
            for src, slot in n.inputs:
                dt = self.facts.dtype(src, slot)
                sh = self.facts.shape(src, slot)
                item = {"name": src if slot == 0 else f"{src}:{slot}",
                        "dtype": D.name(dt) if dt else None,
                        "shape": None if sh is None else format_shape(sh)}
                src_node = self.graph.get(src)
                if src_node is not None and src_node.name in self.hidden:
                    item["value"] = _const_summary(src_node)
                ins.append(item)
            outs = []
            k = 0
            while True:
                dt = self.facts.dtype(n.name, k)
                if dt is None:
                    break
                sh = self.facts.shape(n.name, k)
                outs.append({"dtype": D.name(dt), "shape": None if sh is None
                             else format_shape(sh)})
                k += 1
                if k > 64:
                    break
            rec: dict[str, Any] = {"name": n.name, "op": n.op, "inputs": ins,
                                   "outputs": outs, "control": list(n.control_inputs),
                                   "attrs": _attrs_json(n)}
            if n.device:
                rec["device"] = n.device
            if n.op in CONST_OPS:
                rec["value"] = _const_summary(n)
            if n.name in self.marks:
                rec["diff"] = self.marks[n.name]
            if n.name in self.profile:
                rec["share"] = self.profile[n.name]
            sid = self.node_scope.get(n.name)
            if sid is None and n.out_edges:   # a hidden constant: where its consumer is
                sid = self.node_scope.get(n.out_edges[0].dst)
            rec["scope"] = sid
            nodes[nid] = rec
        scopes = {sc.sid: {"path": sc.path, "parent": sc.parent, "members": sc.members,
                           "w": sc.size[0], "h": sc.size[1], "svg": sc.svg,
                           "ops": dict(Counter(self.graph.node(m).op for m in
                                               self._names_under(sc)).most_common(12))}
                  for sc in self.scopes.values() if sc.members}
        return {"title": self.title, "root": "s0", "nodes": nodes, "scopes": scopes,
                "count": len(self.nodes)}


def _layout_cost(edges: list[tuple[str, str]]) -> int:
    """How many ranks the edges span, summed (what dot's work grows with; as
    viz._layout_cost), ranks by longest path, edges closing a cycle left out."""
    succ: dict[str, list[str]] = defaultdict(list)
    indeg: Counter[str] = Counter()
    nodes: set[str] = set()
    for s, d in edges:
        succ[s].append(d)
        indeg[d] += 1
        nodes.update((s, d))
    rank = {n: 0 for n in nodes if indeg[n] == 0}
    ready = list(rank)
    while ready:
        n = ready.pop()
        for d in succ[n]:
            rank[d] = max(rank.get(d, 0), rank[n] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    return sum(max(1, abs(rank.get(d, 0) - rank.get(s, 0))) for s, d in edges)


def _attrs_json(n: Any) -> dict[str, Any]:
    from .diff import _attr_json

    out: dict[str, Any] = {}
    for k in sorted(n.attr):
        if k == "value" and n.op in CONST_OPS:
            continue
        try:
            v = _attr_json(n.attr[k])
        except Exception:
            v = "?"
        text = json.dumps(v)
        out[k] = v if len(text) <= 200 else text[:197] + "..."
    return out


# Function bodies opened inside the nodes that run them, this many calls deep
BODY_DEPTH = 3
# ... and no more nodes than this added for them (a body called from many places counts
# once per call)
BODY_BUDGET = 20_000


def with_function_bodies(graph: Graph) -> Graph:
    """``graph`` plus, for every node that runs library functions (While's cond and body,
    If's branches, calls), the functions' bodies as nodes named under it
    (``lstm/while/body/...``), so that the viewer shows them as boxes one opens like any
    scope; bodies inside bodies too, BODY_DEPTH calls deep."""
    from dfg.schemas import graph_pb2

    from .functions import Library, call_sites, instantiate_checked

    lib = Library(graph.graph_def.library)
    if not len(lib):
        return graph
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph.graph_def)
    taken = {nd.name for nd in out.node}
    budget = [BODY_BUDGET]

    def add(nodes: Any, prefix: str, stack: tuple[str, ...]) -> None:
        for nd in list(nodes):
            for attr, fname, fattrs in call_sites(nd, lib):
                fdef = lib.get(fname)
                if fdef is None or fname in stack or len(stack) >= BODY_DEPTH:
                    continue
                try:
                    body, _problems = instantiate_checked(fdef, fattrs, lib)
                except DfgError:
                    continue   # list-valued arguments: left closed
                if len(body.node) > budget[0]:
                    return
                budget[0] -= len(body.node)
                where = f"{prefix}{nd.name}/{attr or 'call'}"
                if where + "/" in taken:
                    continue
                taken.add(where + "/")
                added = []
                for bn in body.node:
                    new = out.node.add()
                    new.CopyFrom(bn)
                    new.name = f"{where}/{bn.name}"
                    for i, inp in enumerate(new.input):
                        ctrl = inp.startswith("^")
                        new.input[i] = ("^" if ctrl else "") + f"{where}/{inp.lstrip('^')}"
                    added.append(new)
                add(body.node, where + "/", stack + (fname,))

    add(list(graph.graph_def.node), "", ())
    return Graph(out)


def to_html(graph: Graph, *, marks: dict[str, str] | None = None,
            profile: dict[str, float] | None = None, title: str = "dfg viz") -> str:
    """The viewer page for ``graph`` (see the module docstring); ``marks``: dfg diff's
    node marks; ``profile``: node name -> share of the run time. Function bodies are
    opened inside the nodes that run them (:func:`with_function_bodies`)."""
    graph = with_function_bodies(graph)
    b = _Builder(graph, marks, profile, title)
    b.layout()
    data = json.dumps(b.details(), separators=(",", ":"))
    data = data.replace("</", "<\\/").replace("<!--", "<\\!--")
    page, style, script = (_asset(f"viewer.{ext}") for ext in ("html", "css", "js"))
    # one pass, so that nothing the graph's names hold is taken for a placeholder
    parts = {"__TITLE__": _esc(title), "__DATA__": data, "__SCRIPT__": script,
             "__STYLE__": style}
    return re.sub("__(TITLE|DATA|SCRIPT|STYLE)__", lambda m: parts[m.group(0)], page)


def _asset(name: str) -> str:
    from importlib.resources import files

    return files("dfg.graphdef").joinpath(name).read_text(encoding="utf-8")
