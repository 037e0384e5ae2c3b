"""``B.autograph``: Python control flow turned into graph control flow by rewriting the
function's source. The programs of tests/data/autograph/autograph_programs.py build graphs (v1
Switch/Merge/Enter/Exit and functional If/While) that every pass validation and that dfg's
Session runs to the values TensorFlow's AutoGraph (tf.function) computed for the same
programs on the same feeds (generate.py, recorded in expected.npz). Python conditions run as
Python (loops unroll); refusals and carrying errors name the file, the line and the function.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dfg.executor import Session
from dfg.graphdef import builder as B
from dfg.graphdef import load_graph
from dfg.graphdef.errors import AutographError, UsageError
from dfg.graphdef.validate import validate

DATA = Path(__file__).parent / "data" / "autograph"
sys.path.insert(0, str(DATA))
import autograph_bad as bad  # noqa: E402
from autograph_programs import PROGRAMS, collatz, unrolled  # noqa: E402

CASES = json.loads((DATA / "cases.json").read_text())
EXPECTED = np.load(DATA / "expected.npz")

CONTROL_V1 = {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"}
FUNCTIONAL = {"If", "StatelessIf", "While", "StatelessWhile"}


def _build(fn, inputs, functional):
    g = B.Graph()
    with g.as_default():
        args = [B.placeholder(dt, shape, name=nm) for nm, dt, shape in inputs]
        out = B.autograph(fn, functional=functional)(*args)
    outs = list(out) if isinstance(out, tuple) else [out]
    return g.as_graph_def(), outs


def _assert_valid(gd) -> None:
    errors = [d for d in validate(load_graph(gd)) if d.severity == "error"]
    assert errors == []


def test_tensorflow_recorded_every_program() -> None:
    assert sorted(CASES) == sorted(PROGRAMS)


@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_as_tensorflow_autograph(name: str, functional: bool) -> None:
    spec = CASES[name]
    gd, outs = _build(PROGRAMS[name], spec["inputs"], functional)
    _assert_valid(gd)
    ops = {n.op for n in gd.node}
    if name != "unrolled":   # every other program has a tensor condition
        assert ops & (FUNCTIONAL if functional else CONTROL_V1)
        assert not ops & (CONTROL_V1 if functional else FUNCTIONAL)
    assert len(outs) == spec["outputs"]
    sess = Session(gd, threads=1)
    for c in range(spec["cases"]):
        feeds = {f"{nm}:0": EXPECTED[f"{name}/feed{c}/{nm}"] for nm, _, _ in spec["inputs"]}
        got = sess.run([t.name for t in outs], feeds)
        for i, v in enumerate(got):
            want = EXPECTED[f"{name}/tf{c}/{i}"]
            assert v.dtype == want.dtype and v.shape == want.shape, (name, c, i)
            np.testing.assert_allclose(v, want, rtol=1e-6, err_msg=f"{name} case {c} out {i}")


def test_python_conditions_run_as_python() -> None:
    """A Python loop unrolls (no control-flow node at all); Python values in, Python out."""
    gd, _ = _build(unrolled, [("x", "float32", [])], functional=False)
    assert not {n.op for n in gd.node} & (CONTROL_V1 | FUNCTIONAL)
    assert sum(n.op == "Mul" for n in gd.node) == 3      # for k in range(3)
    assert sum(n.op == "Sub" for n in gd.node) == 2      # while i < 2
    g = B.Graph()
    with g.as_default():
        assert B.autograph(collatz)(27) == 111       # plain Python: builds nothing
    assert g.as_graph_def().node == []


def test_decorator_keeps_the_function_and_shows_its_rewrite() -> None:
    f = B.autograph(collatz)
    assert f.__name__ == "collatz" and f.__wrapped__ is collatz
    assert B.autograph(f) is f
    assert "_ag.while_stmt(" in f.autograph_source and "_ag.if_stmt(" in f.autograph_source

    @B.autograph(functional=True)
    def method_like(x, scale=2.0, *, bias):
        return x * scale + bias if x > 0.0 else bias
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        y = method_like(x, bias=1.0)
    gd = g.as_graph_def()
    _assert_valid(gd)
    sess = Session(gd, threads=1)
    assert sess.run(y.name, {"x:0": np.float32(3.0)}) == 7.0
    assert sess.run(y.name, {"x:0": np.float32(-3.0)}) == 1.0


def test_closure_over_an_outer_tensor_and_a_nested_decorated_function() -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        n = B.placeholder("int32", [], name="n")
        w = x * 3.0

        @B.autograph
        def halve(v):
            while v > w:       # w: a closure cell holding a tensor
                v = v / 2.0
            return v

        @B.autograph
        def outer(v, k):
            for _ in range(k):
                v = halve(v * 5.0)
            return v
        out = outer(x + 0.0, n)
    gd = g.as_graph_def()
    _assert_valid(gd)

    def plain(x, n):   # the same in Python, float32 steps
        v = np.float32(x)
        for _ in range(n):
            v = np.float32(v * 5)
            while v > np.float32(x * 3):
                v = np.float32(v / 2)
        return v
    sess = Session(gd, threads=1)
    for xv, nv in ((1.0, 3), (0.7, 0), (2.5, 4)):
        got = sess.run(out.name, {"x:0": np.float32(xv), "n:0": np.int32(nv)})
        assert got == plain(xv, nv)


def _marked_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    marked = [first + i for i, s in enumerate(lines) if s.rstrip().endswith("# <-")]
    assert len(marked) == 1
    return marked[0]


def _where(fn) -> str:
    return f"{Path(bad.__file__).resolve()}:{_marked_line(fn)} (in "


@pytest.mark.parametrize("fn, says", [
    (bad.uses_try, "`try` statements are not supported"),
    (bad.uses_yield, "generators (`yield`) are not supported"),
    (bad.uses_global, "`global` is not supported"),
    (bad.uses_del, "`del` of a variable is not supported"),
    (bad.loop_else, "`else` on a loop is not supported"),
], ids=lambda v: getattr(v, "__name__", "")[:12])
def test_refusals_name_the_line(fn, says: str) -> None:
    with pytest.raises(AutographError) as e:
        B.autograph(fn)
    msg = str(e.value)
    assert msg.startswith(_where(fn) + f"{fn.__name__}): ")
    assert says in msg


def test_refusal_in_a_nested_function_names_it() -> None:
    with pytest.raises(AutographError) as e:
        B.autograph(bad.uses_nonlocal)
    assert str(e.value).startswith(_where(bad.uses_nonlocal) + "inner): `nonlocal`")


def test_a_function_without_source_is_refused() -> None:
    ns: dict = {}
    exec("def f(x):\n    return x\n", ns)
    with pytest.raises(AutographError, match="define the function in a file"):
        B.autograph(ns["f"])
    with pytest.raises(AutographError, match="cannot convert a lambda"):
        B.autograph(lambda x: x)
    assert issubclass(AutographError, UsageError)   # the CLI's exit 2: the program's fault

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args):
            return f(*args)
        return wrapper
    with pytest.raises(AutographError, match="autograph must be the innermost decorator"):
        B.autograph(deco(collatz))


@pytest.mark.parametrize("fn, inputs, says", [
    (bad.one_branch, [("float32", [])],
     "'y' has no value here: it is assigned only in the true branch of the `if` with a "
     "tensor condition at line {if}; assign it in both branches or before the `if`"),
    (bad.first_in_loop, [("int32", [])],
     "'t' has no value here: it is first assigned inside the `while` loop with a tensor "
     "condition at line {while} (which may run zero times); give it a value before the loop"),
    (bad.read_before_assigned, [("int32", [])],
     "'t' has no value here: it is first assigned inside the `while` loop with a tensor "
     "condition at line {while}, and read before that assignment"),
    (bad.changes_dtype, [("int32", [])],
     "loop variable 'i' enters the `while` loop as int32 and leaves its body as float32"),
    (bad.float_into_int, [("int32", [])],
     "loop variable 'i' enters the `while` loop as int32 and its body makes it a Python "
     "float (2.5)"),
    (bad.not_bool, [("float32", [])],
     "the condition of the `if` is a float32 tensor; expected a bool tensor"),
    (bad.list_in_loop, [("int32", [])],
     "'acc' holds a Python list that the `while` loop with a tensor condition changes"),
    (bad.dtype_per_branch, [("float32", [])],
     "'y' is int32 in the true branch of the `if` and float32 in the false branch"),
    (bad.return_on_one_path, [("float32", [])],
     "a `return` under an `if` with a tensor condition needs a value on both paths"),
    (bad.return_in_loop_then_none, [("float32", [5]), ("int32", [])],
     "a `return` inside the `while` loop with a tensor condition at line {while} needs the "
     "function to end with a `return` on every path"),
], ids=lambda v: getattr(v, "__name__", "")[:20] if callable(v) else "")
@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
def test_carrying_errors_name_the_line(fn, inputs, says: str, functional: bool) -> None:
    src, first = inspect.getsourcelines(fn)
    stmt_line = {kw: next((first + i for i, s in enumerate(src)
                           if s.lstrip().startswith(kw + " ")), None) for kw in ("if", "while")}
    g = B.Graph()
    with g.as_default():
        args = [B.placeholder(dt, shape) for dt, shape in inputs]
        with pytest.raises(AutographError) as e:
            B.autograph(fn, functional=functional)(*args)
    msg = str(e.value)
    assert msg.startswith(_where(fn) + f"{fn.__name__}): "), msg
    assert says.format(**stmt_line) in msg, msg


def test_attribute_assignment_under_a_tensor_condition_is_refused() -> None:
    h = bad.Holder()
    store = B.autograph(bad.Holder.store)
    assert store(h, 2.0) == 2.0 and h.value == 2.0      # a Python condition: Python
    g = B.Graph()
    with g.as_default():
        with pytest.raises(AutographError) as e:
            store(h, B.placeholder("float32", []))
    assert str(e.value).startswith(_where(bad.Holder.store) + "store): assigning "
                                   "`self.value` inside an `if` with a tensor condition is "
                                   "not supported")


def _len_and_with(x):
    total = 0.0
    with B.name_scope("acc"):
        for i in range(len(x)):
            total += B.gather(x, i)
    if total > 100.0:
        pass
    return total, len(x) if len(x) > 2 else -1


@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
def test_len_with_blocks_and_stateless_if(functional: bool) -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [None], name="x")
        total, n = B.autograph(_len_and_with, functional=functional)(x)
    gd = g.as_graph_def()
    _assert_valid(gd)
    assert any(nd.name.startswith("acc/while") for nd in gd.node)
    sess = Session(gd, threads=1)
    for v in (np.arange(4, dtype=np.float32), np.ones([2], np.float32)):
        got = sess.run([total.name, n.name], {"x:0": v})
        assert got[0] == v.sum() and got[1] == (len(v) if len(v) > 2 else -1)


def _collatz_by_hand(n, functional):
    def body(m, s):
        m = B.cond(B.equal(m % 2, 0), lambda: m // 2, lambda: 3 * m + 1, functional=functional)
        return m, s + 1
    return B.while_loop(lambda m, s: B.not_equal(m, 1), body, [n, B.constant(0)],
                        functional=functional)[1]


@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
def test_autograph_builds_the_graph_written_by_hand(functional: bool) -> None:
    """The converted collatz is, node for node, the B.while_loop + B.cond program a person
    would write (no leftover of the Python-or-tensor decisions in the graph)."""
    gds = []
    for by_hand in (False, True):
        g = B.Graph()
        with g.as_default():
            n = B.placeholder("int32", [], name="n")
            if by_hand:
                _collatz_by_hand(n, functional)
            else:
                B.autograph(collatz, functional=functional)(n)
        gds.append(g.as_graph_def())
    assert gds[0] == gds[1]


def _mixed(x, items):
    i = 0
    while i < 3:          # Python first; becomes a graph loop once `i` is a tensor
        i = i + B.cast(x > 0.0, "int32") + 1
    total = 0.0
    for v in items:       # a Python list of tensors: unrolled; the break flag becomes a
        if v > 2.0:       # tensor, so each later iteration runs under a cond
            break
        total += v
    return i, total


@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
def test_python_loops_that_meet_tensors(functional: bool) -> None:
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        items = [x, x + 1.0, x * 3.0, x - 10.0]
        i, total = B.autograph(_mixed, functional=functional)(x, items)
    gd = g.as_graph_def()
    _assert_valid(gd)
    sess = Session(gd, threads=1)

    def plain(x):
        i = 0
        while i < 3:
            i = i + int(x > 0) + 1
        total = np.float32(0)
        for v in [x, x + 1, x * 3, x - 10]:
            if v > 2:
                break
            total += np.float32(v)
        return i, total
    for xv in (0.5, -1.0, 1.5, 3.0):
        got = sess.run([i.name, total.name], {"x:0": np.float32(xv)})
        want = plain(np.float32(xv))
        assert got[0] == want[0] and got[1] == want[1], (xv, got, want)


class _Base:
    def scale(self, x):
        return x * 2.0


class _Model(_Base):
    def __init__(self, k: int) -> None:
        self.k = k

    @B.autograph
    def __call__(self, x):
        y = super().scale(x)          # the method's __class__ cell is kept
        for _ in range(self.k):       # a Python int: unrolled
            if y > 10.0:
                y = y - 3.0
        return y


def test_a_decorated_method_with_super() -> None:
    m = _Model(3)
    assert m(7.0) == 8.0              # Python: 14 -> 11 -> 8
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [], name="x")
        y = m(x)
    gd = g.as_graph_def()
    _assert_valid(gd)
    assert sum(nd.op == "Merge" for nd in gd.node) == 3     # one cond per unrolled step
    sess = Session(gd, threads=1)
    for xv, want in ((7.0, 8.0), (4.0, 8.0), (20.0, 31.0)):
        assert sess.run(y.name, {"x:0": np.float32(xv)}) == want


def _enumerate_rows(m, ws):
    acc = 0.0
    for i, r in enumerate(m):          # a tensor: a graph loop over rows (TensorFlow's
        acc += B.reduce_sum(r) * B.cast(i, "float32")    # AutoGraph refuses this one)
    for j, w in enumerate(ws, 1):      # a Python list: unrolled
        acc = acc + w * j
    return acc


@pytest.mark.parametrize("functional", [False, True], ids=["v1", "functional"])
def test_enumerate_over_a_tensor(functional: bool) -> None:
    g = B.Graph()
    with g.as_default():
        m = B.placeholder("float32", [None, 2], name="m")
        out = B.autograph(_enumerate_rows, functional=functional)(m, [1.0, 2.0])
    gd = g.as_graph_def()
    _assert_valid(gd)
    sess = Session(gd, threads=1)
    for rows in (3, 0):
        mv = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        want = sum(mv[i].sum() * i for i in range(rows)) + 1.0 * 1 + 2.0 * 2
        assert sess.run(out.name, {"m:0": mv}) == want


def test_a_tensor_is_not_iterable_outside_autograph() -> None:
    with B.Graph().as_default():
        x = B.placeholder("float32", [3])
        with pytest.raises(TypeError, match="not iterable in Python"):
            list(x)
        with pytest.raises(TypeError, match="not iterable in Python"):
            a, b, c = x


_SCALE = 3.0


def _with_defaults(x: B.Tensor, scale: float = _SCALE, *, k: int = int(_SCALE)) -> B.Tensor:
    for _ in range(k):
        x = x * scale
    return x


def test_defaults_and_annotations_keep_their_values() -> None:
    """They were evaluated once, in the function's module; the rewrite reuses the values."""
    f = B.autograph(_with_defaults)
    assert f(1.0) == 27.0 and f(1.0, 2.0, k=2) == 4.0
    assert f.__annotations__ == _with_defaults.__annotations__
