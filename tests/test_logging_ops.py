"""Print (v1) and Assert write what TensorFlow's kernels write (tests/data/logging, made by
its generate.py with TensorFlow 2.21): Print's first_n counts runs for the session's life,
and each data tensor is summarized as Tensor::SummarizeValue does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.graphdef.errors import InvalidArgumentError
from dfg.graphdef.io import load_graph

DATA = Path(__file__).resolve().parent / "data" / "logging"


@pytest.mark.parametrize("optimize", ["auto", "off"])
def test_print_and_assert_text_equals_tensorflows(capsys, optimize: str) -> None:
    want = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))
    feeds = {"x:0": np.load(DATA / "x.npy"),
             "s:0": np.array([bytes(v) for v in np.load(DATA / "s.npy")], dtype=object),
             "i:0": np.load(DATA / "i.npy")}
    with Session(load_graph(str(DATA / "graph.pbtxt")), optimize=optimize) as sess:
        for _ in range(3):
            sess.run("y:0", feeds)
        sess.run("y_all:0", feeds)
        with pytest.raises(InvalidArgumentError) as e:
            sess.run("y_checked:0", feeds)
    lines = [ln for ln in capsys.readouterr().err.splitlines()
             if ln.startswith(("dbg: ", "all: "))]
    assert lines == want["stderr"]
    assert want["assert"] in str(e.value)
