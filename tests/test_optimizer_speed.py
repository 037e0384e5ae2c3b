"""The run-time optimizer's fast paths give the same graphs as the plain rules (structural,
not timed): a long constant chain folds to one Const whose value is worked out here by math,
controls survive the deferred rewrite, a pass with nothing to do hands back its input, and
graphs far too large for a quadratic pass (10k-100k nodes) optimize to the expected shape.

Expected values come from arithmetic on the graph's own constants (Python integers, numpy
float32 sums that are exact), never from the optimizer's output.
"""

from __future__ import annotations

import numpy as np

from dfg.executor import Session
from dfg.graphdef.graph import Graph
from dfg.graphdef.passes import PassOptions, get_pass
from dfg.graphdef.passes.pipeline import optimize, optimize_for_signature
from dfg.graphdef.tensors import from_numpy, to_numpy
from dfg.schemas import graph_pb2, types_pb2

FLOAT, INT32 = types_pb2.DT_FLOAT, types_pb2.DT_INT32


def _ph(g, name: str, dtype: int) -> None:
    n = g.node.add(name=name, op="Placeholder")
    n.attr["dtype"].type = dtype


def _const(g, name: str, value, dtype: int, controls=()) -> None:
    n = g.node.add(name=name, op="Const")
    n.input.extend(f"^{c}" for c in controls)
    n.attr["dtype"].type = dtype
    from_numpy(np.asarray(value), dtype, n.attr["value"].tensor)


def _op(g, name: str, op: str, inputs, dtype: int = FLOAT) -> None:
    n = g.node.add(name=name, op=op)
    n.input.extend(inputs)
    n.attr["T"].type = dtype


def _chain(g, op: str, x: str, consts: list[str], prefix: str, dtype: int = FLOAT,
           const_first_every: int = 0) -> str:
    """``x op c0 op c1 ...`` as a chain of binary nodes; every ``const_first_every``-th link
    spells the constant first (``c op prev``), which the fold must read the same way."""
    prev = x
    for i, c in enumerate(consts):
        flip = const_first_every and i % const_first_every == 0
        _op(g, f"{prefix}_{i}", op, [c, prev] if flip else [prev, c], dtype)
        prev = f"{prefix}_{i}"
    return prev


def _consts_of(gd) -> dict[str, np.ndarray]:
    return {n.name: to_numpy(n.attr["value"].tensor) for n in gd.node if n.op == "Const"}


def _compute(gd) -> list:
    """The non-Const, non-Placeholder nodes left."""
    return [n for n in gd.node if n.op not in ("Const", "Placeholder")]


def test_a_10k_add_chain_folds_to_one_add_of_the_exact_sum():
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    n = 10_000
    names = []
    for i in range(n):          # k/4 for k = 0..3: every partial sum is exact in float32
        _const(g, f"c{i}", np.float32((i % 4) / 4), FLOAT)
        names.append(f"c{i}")
    top = _chain(g, "AddV2", "x", names, "add", const_first_every=7)
    res = optimize_for_signature(g, [f"{top}:0"], ["x:0"])
    out = res.graph_def
    left = _compute(out)
    assert [nd.op for nd in left] == ["AddV2"] and left[0].name == top
    consts = _consts_of(out)
    assert len(consts) == 1
    (cname, value), = consts.items()
    assert value.dtype == np.float32 and value.shape == ()
    assert float(value) == sum((i % 4) / 4 for i in range(n))     # 3750.0
    assert list(left[0].input) == ["x", cname]
    # and the graph computes it
    with Session(out) as s:
        got = s.run(f"{top}:0", {"x:0": np.float32(0.25)})
    assert float(got) == 3750.25


def test_an_int32_mul_chain_wraps_like_the_kernel():
    g = graph_pb2.GraphDef()
    _ph(g, "x", INT32)
    n = 2_000
    _const(g, "three", np.int32(3), INT32)
    top = _chain(g, "Mul", "x", ["three"] * n, "mul", INT32)
    out = get_pass("arithmetic")(Graph(g), PassOptions(fetches=(f"{top}:0",)))
    left = _compute(out)
    assert [nd.name for nd in left] == [top]
    const_name = left[0].input[1]
    value = int(_consts_of(out)[const_name])
    expected = pow(3, n, 2**32)             # int32 arithmetic wraps modulo 2**32
    expected = expected - 2**32 if expected >= 2**31 else expected
    assert value == expected


def test_a_fetched_link_splits_the_chain_and_keeps_its_value():
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    _const(g, "one", np.float32(1), FLOAT)
    _const(g, "two", np.float32(2), FLOAT)
    top = _chain(g, "AddV2", "x", ["one", "two"] * 50, "a")    # 100 links, +150 in all
    mid = "a_39"                                               # x + 20 * 3 = x + 60
    res = optimize_for_signature(g, [f"{mid}:0", f"{top}:0"], ["x:0"])
    out = res.graph_def
    by_name = {nd.name: nd for nd in out.node}
    consts = _consts_of(out)
    assert sorted(nd.name for nd in _compute(out)) == sorted([mid, top])
    assert by_name[mid].input[0] == "x" and float(consts[by_name[mid].input[1]]) == 60
    assert by_name[top].input[0] == mid and float(consts[by_name[top].input[1]]) == 90
    with Session(out) as s:
        got_mid, got_top = s.run([f"{mid}:0", f"{top}:0"], {"x:0": np.float32(1)})
    assert (float(got_mid), float(got_top)) == (61.0, 151.0)


def test_controls_of_folded_links_and_constants_survive():
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    for k in range(4):
        g.node.add(name=f"gate{k}", op="NoOp")
    _const(g, "c0", np.float32(1), FLOAT, controls=["gate0"])
    _const(g, "c1", np.float32(2), FLOAT)
    _const(g, "c2", np.float32(3), FLOAT, controls=["gate1"])
    top = _chain(g, "AddV2", "x", ["c0", "c1", "c2"], "a")
    g.node[[n.name for n in g.node].index("a_1")].input.append("^gate2")
    g.node[[n.name for n in g.node].index("a_2")].input.append("^gate3")
    out = get_pass("arithmetic")(Graph(g), PassOptions(fetches=(f"{top}:0",)))
    by_name = {nd.name: nd for nd in out.node}
    assert "a_0" not in by_name and "a_1" not in by_name
    add = by_name[top]
    cname = add.input[1]
    assert list(add.input) == ["x", cname, "^gate3", "^gate2"]
    assert list(by_name[cname].input) == ["^gate0", "^gate1"]
    assert float(_consts_of(out)[cname]) == 6


def test_a_mul_chain_feeding_an_add_chain_folds_each():
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    for v in (2, 3, 5, 7):
        _const(g, f"k{v}", np.float32(v), FLOAT)
    m = _chain(g, "Mul", "x", ["k2", "k3"], "m")             # x * 6
    top = _chain(g, "AddV2", m, ["k5", "k7"], "a")            # x * 6 + 12
    res = optimize_for_signature(g, [f"{top}:0"], ["x:0"])
    out = res.graph_def
    assert sorted(nd.op for nd in _compute(out)) == ["AddV2", "Mul"]
    with Session(out) as s:
        assert float(s.run(f"{top}:0", {"x:0": np.float32(0.5)})) == 15.0


def test_a_neutral_link_after_a_folded_chain_sees_its_settled_shape():
    # a_2 adds zeros of shape [3]: removable only if the chain's static shape absorbs [3]
    # (x is [3]), which the shape query must read through the folded chain
    g = graph_pb2.GraphDef()
    n = g.node.add(name="x", op="Placeholder")
    n.attr["dtype"].type = FLOAT
    n.attr["shape"].shape.dim.add(size=3)
    _const(g, "one", np.float32(1), FLOAT)
    _const(g, "zeros", np.zeros(3, np.float32), FLOAT)
    _chain(g, "AddV2", "x", ["one", "one"], "a")
    _op(g, "z", "AddV2", ["a_1", "zeros"])
    _op(g, "y", "Mul", ["z", "one"])
    out = get_pass("arithmetic")(Graph(g), PassOptions(fetches=("y:0",)))
    by_name = {nd.name: nd for nd in out.node}
    assert "z" not in by_name and by_name["y"].op == "Identity"
    assert list(by_name["y"].input) == ["a_1"]
    assert by_name["a_1"].input[0] == "x"
    assert float(_consts_of(out)[by_name["a_1"].input[1]]) == 2


def test_a_pass_with_nothing_to_do_hands_back_its_input():
    g = graph_pb2.GraphDef()
    g.versions.producer = 1
    _ph(g, "x", FLOAT)
    _op(g, "y", "Relu", ["x"])
    graph = Graph(g)
    for name in ("arithmetic", "cse", "constant_folding", "identity_removal",
                 "fold_batch_norm", "dead_branches", "loop_invariant", "hoist_projection",
                 "hoist_concat_projection", "fold_pad", "sink_squeeze", "fuse_conv_bias_act"):
        assert get_pass(name)(graph, PassOptions(fetches=("y:0",))) is g, name


def test_a_100k_identity_chain_optimizes_to_one_identity():
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    prev = "x"
    for i in range(100_000):
        _op(g, f"id_{i}", "Identity", [prev])
        prev = f"id_{i}"
    _op(g, "y", "Identity", [prev])
    res = optimize(g, PassOptions(fetches=("y",)))
    assert not res.warnings
    assert [(nd.name, list(nd.input)) for nd in res.graph_def.node] == [("x", []),
                                                                        ("y", ["x"])]


def test_many_removed_identities_feeding_one_node_by_control():
    # sink waits for 3000 Identities of one producer each: all go, sink waits for the
    # producers, each once
    g = graph_pb2.GraphDef()
    _ph(g, "x", FLOAT)
    for i in range(3000):
        _op(g, f"p{i}", "Relu", ["x"])
        _op(g, f"i{i}", "Identity", [f"p{i}"])
    sink = g.node.add(name="sink", op="NoOp")
    sink.input.extend(f"^i{i}" for i in range(3000))
    sink.input.extend(f"^i{i}" for i in range(0, 3000, 2))     # repeats are dropped too
    out = get_pass("identity_removal")(Graph(g), PassOptions(targets=("sink",)))
    by_name = {nd.name: nd for nd in out.node}
    assert not any(nd.op == "Identity" for nd in out.node)
    assert list(by_name["sink"].input) == [f"^p{i}" for i in range(3000)]


def test_the_fusion_tail_runs_only_when_it_may_do_something():
    """optimize_for_signature skips the fusions and the last prune when nothing changed
    and no convolution or MatMul is left to fuse; with a MatMul + BiasAdd they run and fuse."""
    g = graph_pb2.GraphDef()
    g.versions.producer = 1     # (without versions a pass's output gains them: a change)
    _ph(g, "x", FLOAT)
    _op(g, "y", "Relu", ["x"])
    res = optimize_for_signature(Graph(g), ["y:0"], ["x:0"])
    assert res.graph_def is g
    assert not {"fuse_conv_bias_act", "fuse_matmul_bias_act"} & set(res.passes)

    _const(g, "w", np.ones((2, 2), np.float32), FLOAT)
    _const(g, "b", np.ones(2, np.float32), FLOAT)
    _op(g, "mm", "MatMul", ["x", "w"])
    _op(g, "z", "BiasAdd", ["mm", "b"])
    res = optimize_for_signature(Graph(g), ["z:0"], ["x:0"])
    assert "fuse_matmul_bias_act" in res.passes
    assert [n.op for n in res.graph_def.node if n.name == "z"] == ["_FusedMatMul"]
    x = np.array([[1, 2]], np.float32)
    with Session(res.graph_def, threads=1, optimize=False) as sess:
        np.testing.assert_array_equal(sess.run("z", {"x": x}), x @ np.ones((2, 2)) + 1)
