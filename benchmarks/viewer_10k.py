"""Benchmark the HTML viewer on the 10,000-node graph of viz_10k.py: time to write the page
(Graphviz layouts included), its size, and in headless chromium (when installed) the time
from navigation to a drawn first level, to open a scope, and to find a node by search.

    python benchmarks/viewer_10k.py [--scopes 100] [--ops 100] [--keep OUT.html]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from cdp import Browser  # noqa: E402
from viz_10k import build  # noqa: E402

from dfg.graphdef.graph import Graph  # noqa: E402
from dfg.graphdef.viewer import to_html  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scopes", type=int, default=100)
    ap.add_argument("--ops", type=int, default=100)
    ap.add_argument("--keep", default=None, help="write the page here too")
    args = ap.parse_args()
    g = Graph(build(args.scopes, args.ops))
    t0 = time.perf_counter()
    page = to_html(g, title="viewer_10k")
    t_write = time.perf_counter() - t0
    print(f"graph: {len(g)} nodes; page written in {t_write:.2f} s, "
          f"{len(page.encode()) / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory() as d:
        path = Path(args.keep) if args.keep else Path(d) / "viewer.html"
        path.write_text(page, encoding="utf-8")
        if not Browser.available():
            print("chromium not installed: no load times")
            return
        with Browser() as b:
            p = b.page()
            for domain in ("Runtime.enable", "Page.enable", "Log.enable"):
                p.call(domain)
            t0 = time.perf_counter()
            p.call("Page.navigate", url=path.resolve().as_uri())
            p.wait_event("Page.loadEventFired")
            p.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            t_load = time.perf_counter() - t0
            drawn = p.eval("document.querySelectorAll('[data-node]').length")
            t0 = time.perf_counter()
            p.eval("dfgViewer.openScope(document.querySelector('g.scope')"
                   ".getAttribute('data-key'))")
            p.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            t_open = time.perf_counter() - t0
            t0 = time.perf_counter()
            hit = p.eval("(() => { const f = dfgViewer.search('block_077/dense_3/MatMul');"
                         " const el = dfgViewer.reveal(f[0]);"
                         " return el && el.getAttribute('data-node'); })()")
            t_search = time.perf_counter() - t0
            errors = p.errors()
    print(f"chromium: first level drawn {t_load:.2f} s after navigation ({drawn} elements "
          f"with data-node); a scope opened in {t_open * 1000:.0f} ms; search + reveal of "
          f"{hit} in {t_search * 1000:.0f} ms; console errors: {len(errors)}")


if __name__ == "__main__":
    main()
