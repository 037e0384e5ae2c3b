"""The HTML viewer (``dfg viz GRAPH -o model.html``): a self-contained page, checked as
text and in a real headless chromium driven over the DevTools protocol (tests/cdp.py):
it loads without console errors or network requests, a scope opens on a mouse click,
search finds a node and the panel shows its details; diff marks and profile colours."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.graphdef.graph import Graph
from dfg.graphdef.viewer import to_html

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cdp import Browser  # noqa: E402

SAVED = HERE / "data" / "savedmodels"
DIFF = HERE / "data" / "diff"
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="Graphviz 'dot' is not installed")
needs_browser = pytest.mark.skipif(
    not (HAVE_DOT and Browser.available()),
    reason="chromium (apt-get install chromium) and Graphviz are needed for the browser tests")


def write_page(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "model.html"
    r = CliRunner().invoke(cli, ["viz", *args, "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


def page_data(path: Path) -> dict:
    text = path.read_text()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


@needs_dot
def test_page_is_self_contained(tmp_path):
    text = write_page(tmp_path, str(SAVED / "zoo_text_lstm")).read_text()
    # nothing to fetch: no external scripts, styles, images or fonts
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", text)
    assert "url(" not in text and "@import" not in text
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", text))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert "default-src 'none'" in text   # and the page forbids any request anyway


@needs_dot
def test_every_drawn_box_carries_its_full_name(tmp_path):
    data = page_data(write_page(tmp_path, str(SAVED / "zoo_text_lstm")))
    names = {n["name"] for n in data["nodes"].values()}
    scopes = {s["path"] for s in data["scopes"].values()}
    drawn = set()
    for sc in data["scopes"].values():
        drawn.update(re.findall(r'data-node="([^"]*)"', sc["svg"]))
    assert drawn <= names | scopes
    assert "text_lstm_1/lstm_1/lstm_cell_1/MatMul" in drawn
    assert "text_lstm_1/lstm_1" in drawn
    # node details: op, inputs with dtype and shape, constant values
    mm = next(n for n in data["nodes"].values()
              if n["name"] == "text_lstm_1/logits_1/MatMul")
    assert mm["op"] == "MatMul"
    assert mm["inputs"][0]["dtype"] == "float32" and mm["inputs"][0]["shape"] == "[?,24]"
    assert mm["outputs"] == [{"dtype": "float32", "shape": "[?,5]"}]
    # the LSTM's While runs two functions: their bodies are scopes one opens
    assert {"text_lstm_1/lstm_1/while/body", "text_lstm_1/lstm_1/while/cond"} <= scopes
    body_ops = {n["op"] for n in data["nodes"].values()
                if n["name"].startswith("text_lstm_1/lstm_1/while/body/")}
    assert {"_Arg", "_Retval", "MatMul", "Sigmoid", "TensorListGetItem"} <= body_ops


def _center(page, selector: str) -> list[float]:
    return page.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                     " if (!e) return null; const b = e.getBoundingClientRect();"
                     " return [b.x + b.width / 2, b.y + b.height / 2]; })()")


def _open_page(browser, path: Path):
    page = browser.page()
    for domain in ("Runtime.enable", "Page.enable", "Log.enable", "Network.enable"):
        page.call(domain)
    page.call("Page.navigate", url=path.resolve().as_uri())
    page.wait_event("Page.loadEventFired")
    page.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    return page


@needs_browser
def test_browser_loads_clicks_and_searches(tmp_path):
    path = write_page(tmp_path, str(SAVED / "zoo_text_lstm"))
    cell = "text_lstm_1/lstm_1/lstm_cell_1"
    with Browser() as b:
        page = _open_page(b, path)
        assert page.errors() == []
        assert page.requests() == [path.resolve().as_uri()]
        assert page.eval("document.querySelectorAll('[data-node]').length") > 5
        inside = f'[data-node="{cell}/MatMul"]'
        assert page.eval(f"document.querySelector('{inside}') === null")
        # a real mouse click on the scope's box opens it
        xy = _center(page, f'g.scope[data-node="{cell}"]')
        assert xy is not None
        page.click(*xy)
        assert page.eval(f"document.querySelector('{inside}') !== null")
        assert page.eval(f"document.querySelector('g.scope[data-node=\"{cell}\"]')"
                         ".classList.contains('open')")
        # click again: closed
        page.click(*_center(page, f'g.scope[data-node="{cell}"]'))
        assert page.eval(f"document.querySelector('{inside}') === null")
        # search: typed into the box, Enter opens what holds the node and marks it
        page.eval("document.getElementById('collapse').click()")
        xy = _center(page, "#search")
        page.click(*xy)
        page.call("Input.insertText", text="lstm_cell_1/MatMul_1")
        for kind in ("keyDown", "keyUp"):
            page.call("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter",
                      windowsVirtualKeyCode=13)
        hit = page.eval("(() => { const e = document.querySelector('g.hit');"
                        " return e && e.getAttribute('data-node'); })()")
        assert hit == f"{cell}/MatMul_1"
        panel = page.eval("document.getElementById('panel').innerText")
        assert f"{cell}/MatMul_1" in panel and "MatMul" in panel and "float32" in panel
        # a node inside the loop's body function: found, its boxes opened
        body = page.eval("(() => { const f = dfgViewer.search("
                         "'while/body/text_lstm_1/lstm_1/while/lstm_cell_1/MatMul_1');"
                         " const el = dfgViewer.reveal(f[0]);"
                         " return el && el.getAttribute('data-node'); })()")
        assert body == ("text_lstm_1/lstm_1/while/body/text_lstm_1/lstm_1/while/"
                        "lstm_cell_1/MatMul_1")
        assert page.errors() == []
        assert page.requests() == [path.resolve().as_uri()]


def _load_benchmark():
    spec = importlib.util.spec_from_file_location(
        "viz_10k", HERE.parent / "benchmarks" / "viz_10k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_dot
def test_big_graph_starts_with_its_collapsed_scopes(tmp_path):
    g = Graph(_load_benchmark().build(30, 100))
    page = tmp_path / "big.html"
    page.write_text(to_html(g))
    data = page_data(page)
    assert data["count"] == len(g) == 3001
    root = data["scopes"][data["root"]]
    assert len(re.findall(r'data-node="', root["svg"])) <= 40   # 30 blocks, a few nodes
    if Browser.available():
        with Browser() as b:
            p = _open_page(b, page)
            assert p.errors() == []
            drawn = p.eval("document.querySelectorAll('[data-node]').length")
            assert drawn < 200
            found = p.eval("(() => { const f = dfgViewer.search('block_017/dense_2/MatMul');"
                           " const el = dfgViewer.reveal(f[0]);"
                           " return el && el.getAttribute('data-node'); })()")
            assert found == "block_017/dense_2/MatMul"


@needs_dot
def test_diff_page_marks_the_differences(tmp_path):
    out = tmp_path / "d.html"
    r = CliRunner().invoke(cli, ["diff", str(DIFF / "layer_added" / "a.pb"),
                                 str(DIFF / "layer_added" / "b.pb"), "-o", str(out)])
    assert r.exit_code == 1
    data = page_data(out)
    added = {n["name"] for n in data["nodes"].values() if n.get("diff") == "added"}
    assert "net_1/extra_1/MatMul" in added
    # the box of the added layer is drawn green, counted
    svg = "".join(s["svg"] for s in data["scopes"].values())
    m = re.search(r'data-node="net_1/extra_1"(.*?)</g>', svg, re.S)
    assert m and "#bbf7d0" in m.group(1)


@needs_dot
def test_profile_colours_pictures_and_viewer(tmp_path):
    graph = DIFF / "finetuned" / "a.pb"
    prof = tmp_path / "p.json"
    r = CliRunner().invoke(cli, ["profile", str(graph), "--fetch", "Identity", "--json",
                                 "--feed", "x=" + json.dumps([[0.5] * 8] * 4),
                                 "--top", "50", "--iters", "3"])
    assert r.exit_code == 0, r.output
    prof.write_text(r.stdout)
    nodes = json.loads(r.stdout)["nodes"]
    top = max(nodes, key=lambda n: n["share"])
    dot = CliRunner().invoke(cli, ["viz", str(graph), "--collapse", "none",
                                   "--profile", str(prof)])
    assert dot.exit_code == 0
    line = next(ln for ln in dot.stdout.splitlines()
                if ln.lstrip().startswith(f'"n:{top["node"]}" ['))
    assert f'{100 * top["share"]:.1f}% of the time' in line
    assert 'fillcolor="#ff' in line
    data = page_data(write_page(tmp_path, str(graph), "--profile", str(prof)))
    rec = next(n for n in data["nodes"].values() if n["name"] == top["node"])
    assert rec["share"] == pytest.approx(top["share"])
    svg = "".join(s["svg"] for s in data["scopes"].values())
    assert f"{100 * top['share']:.1f}%" in svg


def test_bad_profile_is_usage_error(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text('{"ops": []}')
    r = CliRunner().invoke(cli, ["viz", str(DIFF / "finetuned" / "a.pb"), "--profile",
                                 str(bad)])
    assert r.exit_code == 2



@needs_browser
def test_hostile_names_load_and_keep_their_names(tmp_path):
    # names with markup, quotes, entities, control characters, newlines: every node drawn,
    # its data-node its name (what XML cannot hold, control characters, as \\xNN)
    from dfg.graphdef.io import load_graph

    src = HERE / "data" / "hostile" / "control_names.pbtxt"
    g = load_graph(src)
    path = write_page(tmp_path, str(src))

    def shown(name: str) -> str:
        return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]",
                      lambda m: f"\\x{ord(m.group()):02x}", name)

    with Browser() as b:
        page = _open_page(b, path)
        assert page.errors() == []
        drawn = page.eval("Array.from(document.querySelectorAll('[data-node]'))"
                          ".map(e => e.getAttribute('data-node'))")
    assert sorted(drawn) == sorted(shown(n.name) for n in g.nodes)
