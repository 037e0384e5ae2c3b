"""Make the pictures the README shows: a ``dfg diff`` picture and a screenshot of the HTML
viewer, from the TensorFlow-made models under tests/data.

    python examples/make_pictures.py

Writes ``examples/diff_layer_added.svg`` (``dfg diff`` of a Keras model and the same model
with a layer added, drawn with the differences coloured), ``examples/text_lstm.html`` (the
viewer of a Keras text classifier SavedModel) and ``examples/viewer.png`` (that page in
headless chromium, its LSTM layer opened and a node found by search). Needs Graphviz, and
chromium for the screenshot (skipped without it).
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from cdp import Browser  # noqa: E402


def dfg(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "dfg.cli.main", *args], cwd=ROOT,
                          stdout=subprocess.DEVNULL).returncode


def main() -> None:
    pair = ROOT / "tests" / "data" / "diff" / "layer_added"
    svg = HERE / "diff_layer_added.svg"
    rc = dfg("diff", str(pair / "a.pb"), str(pair / "b.pb"), "-o", str(svg))
    assert rc == 1, "the two models differ"
    print("wrote", svg.relative_to(ROOT))
    page = HERE / "text_lstm.html"
    assert dfg("viz", str(ROOT / "tests" / "data" / "savedmodels" / "zoo_text_lstm"),
               "-o", str(page)) == 0
    print("wrote", page.relative_to(ROOT))
    if not Browser.available():
        print("chromium not installed: no screenshot")
        return
    with Browser() as b:
        p = b.page()
        for domain in ("Runtime.enable", "Page.enable"):
            p.call(domain)
        p.call("Page.navigate", url=page.resolve().as_uri())
        p.wait_event("Page.loadEventFired")
        p.eval("(() => { const f = dfgViewer.search('lstm_cell_1/MatMul_1');"
               " dfgViewer.reveal(f[0]); document.getElementById('hits').style.display ="
               " 'none'; document.getElementById('search').value = 'lstm_cell_1/MatMul_1'; })()")
        p.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        shot = HERE / "viewer.png"
        shot.write_bytes(base64.b64decode(p.call("Page.captureScreenshot")["data"]))
        print("wrote", shot.relative_to(ROOT))


if __name__ == "__main__":
    main()
