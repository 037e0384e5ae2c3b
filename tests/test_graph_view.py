"""The Graph view's indexes: edges both ways, consumers, backward edges, topological order.

Expected values are worked out by hand from the small graphs written here.
"""

from __future__ import annotations

from dfg.graphdef.graph import CONTROL_SLOT, Edge, Graph
from dfg.schemas import graph_pb2


def _graph(*nodes: tuple[str, str, list[str]]) -> Graph:
    gd = graph_pb2.GraphDef()
    for name, op, inputs in nodes:
        gd.node.add(name=name, op=op).input.extend(inputs)
    return Graph(gd)


def test_edges_consumers_and_controls_in_input_order() -> None:
    g = _graph(("a", "Placeholder", []), ("b", "Placeholder", []),
               ("c", "Add", ["a", "^b", "a:1"]),       # a control input before a data input
               ("d", "Add", ["a:1", "c", "^a", "^c"]))
    c, d = g.node("c"), g.node("d")
    assert c.inputs == [("a", 0), ("a", 1)] and c.control_inputs == ["b"]
    # data edges first, numbered by data position; then control edges
    assert c.in_edges == [Edge("a", 0, "c", 0), Edge("a", 1, "c", 1),
                          Edge("b", CONTROL_SLOT, "c", CONTROL_SLOT)]
    assert g.irregular_inputs == {c.index}
    assert g.consumers("a", 1) == [Edge("a", 1, "c", 1), Edge("a", 1, "d", 0)]
    assert g.consumers("a", CONTROL_SLOT) == [Edge("a", CONTROL_SLOT, "d", CONTROL_SLOT)]
    assert g.consumers("c") == [Edge("c", 0, "d", 1)]
    assert g.consumers("d") == []
    assert [e.dst for e in g.node("a").out_edges] == ["c", "c", "d", "d"]
    assert d.in_edges[-2:] == [Edge("a", CONTROL_SLOT, "d", CONTROL_SLOT),
                               Edge("c", CONTROL_SLOT, "d", CONTROL_SLOT)]
    assert g.num_control_edges == 3
    assert g.by_name["d"] is d and g.by_name.get("zz") is None


def test_missing_producers_are_recorded_and_keep_the_data_positions() -> None:
    g = _graph(("a", "Placeholder", []), ("b", "Add", ["nope:2", "a", "^gone"]))
    b = g.node("b")
    assert [(n.name, s) for n, s in g.missing_inputs] == [("b", "nope:2"), ("b", "^gone")]
    assert b.in_edges == [Edge("a", 0, "b", 1)]      # still input 1: "nope:2" was input 0
    assert b.inputs == [("nope", 2), ("a", 0)] and b.control_inputs == ["gone"]
    assert g.irregular_inputs == {b.index}


def test_backward_edges_are_the_loop_back_edges_and_out_of_order_inputs() -> None:
    loop = _graph(("x", "Placeholder", []), ("enter", "Enter", ["x"]),
                  ("merge", "Merge", ["enter", "next"]), ("next", "NextIteration", ["merge"]))
    assert loop.backward_edges == [Edge("next", 0, "merge", 1)]
    written_backwards = _graph(("b", "Neg", ["a"]), ("a", "Placeholder", []),
                               ("c", "Neg", ["c"]))      # a self-loop runs backwards too
    assert written_backwards.backward_edges == [Edge("a", 0, "b", 0), Edge("c", 0, "c", 0)]
    assert _graph(("a", "Placeholder", []), ("b", "Neg", ["a"])).backward_edges == []


def test_topological_order_ignores_back_edges_and_appends_cycles_in_file_order() -> None:
    # Kahn's order, the ready node with the smallest index first, newly ready nodes next
    g = _graph(("z", "Neg", ["y"]), ("y", "Neg", ["x"]), ("x", "Placeholder", []),
               ("w", "Placeholder", []))
    assert [n.name for n in g.topological_order()] == ["x", "y", "z", "w"]
    loop = _graph(("x", "Placeholder", []), ("enter", "Enter", ["x"]),
                  ("merge", "Merge", ["enter", "next"]), ("body", "Neg", ["merge"]),
                  ("next", "NextIteration", ["body"]), ("p", "Neg", ["q"]),
                  ("q", "Neg", ["p"]))
    assert [n.name for n in loop.topological_order()] == [
        "x", "enter", "merge", "body", "next", "p", "q"]
    assert [n.name for n in loop.topological_order(["body", "next", "merge"])] == [
        "merge", "body", "next"]
    # duplicate names: the first node of a name is the one ordered
    dup = _graph(("a", "Placeholder", []), ("a", "Neg", ["b"]), ("b", "Neg", ["a"]))
    assert [(n.name, n.index) for n in dup.topological_order()] == [("a", 0), ("b", 2)]
