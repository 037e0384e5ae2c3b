"""dfg.graphdef.validate: TensorFlow's own graphs validate clean, each broken graph is reported
with the problem TensorFlow names, and every check fires on a small hand-built graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cputime import cpu_seconds
from google.protobuf import text_format

from dfg.graphdef.errors import GraphLoadError
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.validate import CODES, Diagnostic, parse_device, validate
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent / "data" / "conformance"
CASES = sorted(p.parent.name for p in DATA.glob("*/graph.pbtxt"))
INVALID = DATA / "invalid"


def make(text: str) -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return Graph(gd)


def ph(name: str, dtype: str = "DT_FLOAT") -> str:
    return (f'node {{ name: "{name}" op: "Placeholder" '
            f'attr {{ key: "dtype" value {{ type: {dtype} }} }} }}')


def binop(name: str, op: str, a: str, b: str, t: str = "DT_FLOAT", extra: str = "") -> str:
    return (f'node {{ name: "{name}" op: "{op}" input: "{a}" input: "{b}" '
            f'attr {{ key: "T" value {{ type: {t} }} }} {extra} }}')


def codes(diags: list[Diagnostic]) -> list[str]:
    return [d.code for d in diags]


def only(diags: list[Diagnostic], code: str) -> list[Diagnostic]:
    return [d for d in diags if d.code == code]


def reload(graph: Graph, edit) -> Graph:
    """A copy of ``graph`` with ``edit(node_by_name)`` applied to its GraphDef."""
    gd = graph_pb2.GraphDef()
    gd.CopyFrom(graph.graph_def)
    edit({n.name: n for n in gd.node})
    return Graph(gd)


# --- TensorFlow's graphs ------------------------------------------------------------------------

def test_all_conformance_cases_present():
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES)
def test_conformance_graph_validates_clean(case):
    diags = validate(load_graph(DATA / case / "graph.pbtxt"))
    assert [d for d in diags if d.is_error] == []
    assert diags == []  # TensorFlow wrote them: no unknown attrs or stray hints either


@pytest.mark.parametrize("case", ["dag_basic", "while_counter"])
def test_binary_graph_validates_clean(case):
    assert validate(load_graph(DATA / case / "graph.pb")) == []


# --- the broken graphs of invalid/ ----------------------------------------------------------

# file -> (code, node) for the problem index.json describes (read from its "problem" text)
EXPECTED = {
    "attr_wrong_type.pbtxt": ("attr-type", "d"),
    "control_input_before_data.pbtxt": ("control-before-data", "e"),
    "cycle_without_nextiteration.pbtxt": ("cycle", "c"),
    "duplicate_node_name.pbtxt": ("duplicate-name", "c"),
    "enter_frame_mismatch.pbtxt": ("enter-frame-mismatch", "loop/Merge"),
    "missing_input_node.pbtxt": ("missing-input", "e"),
    "output_slot_out_of_range.pbtxt": ("output-out-of-range", "c"),
    "unknown_op.pbtxt": ("unknown-op", "d"),
    "wrong_input_count.pbtxt": ("input-count", "c"),
}
UNREADABLE = {"truncated.pb", "garbage.pb", "broken_syntax.pbtxt"}


def test_index_covers_every_invalid_file():
    index = json.loads((INVALID / "index.json").read_text())
    assert set(index) == set(EXPECTED) | UNREADABLE
    assert {p.name for p in INVALID.iterdir()} - {"index.json"} == set(index)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_invalid_graph_reports_its_problem(name):
    code, node = EXPECTED[name]
    diags = validate(load_graph(INVALID / name))
    hits = [d for d in diags if d.code == code and d.node == node]
    assert len(hits) == 1, diags
    assert hits[0].severity == "error"
    if name != "enter_frame_mismatch.pbtxt":
        # one mistake, one diagnostic: no cascade into dtype or frame checks
        assert [d.code for d in diags] == [code]


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_files_fail_to_load(name):
    with pytest.raises(GraphLoadError):
        load_graph(INVALID / name)


def test_invalid_messages_say_expected_and_found():
    def first(name: str) -> Diagnostic:
        return validate(load_graph(INVALID / name))[0]

    d = first("attr_wrong_type.pbtxt")
    assert "'T'" in d.message and "type" in d.message and "string" in d.message
    assert d.op == "AddV2"
    d = first("wrong_input_count.pbtxt")
    assert d.extra["expected"] == 2 and d.extra["found"] == 3
    d = first("output_slot_out_of_range.pbtxt")
    assert "a:3" in d.message and "1 output" in d.message
    d = first("cycle_without_nextiteration.pbtxt")
    assert d.extra["path"] == ["c", "e", "c"]
    assert "c -> e -> c" in d.message
    d = first("duplicate_node_name.pbtxt")
    assert d.extra["count"] == 2 and "Mul" in d.message and "AddV2" in d.message
    d = first("control_input_before_data.pbtxt")
    assert "^a" in d.message and "'c'" in d.message


def test_enter_frame_mismatch_names_both_frames():
    diags = validate(load_graph(INVALID / "enter_frame_mismatch.pbtxt"))
    (d,) = only(diags, "enter-frame-mismatch")
    assert "some_other_frame" in d.message and "loop/while_context" in d.message
    assert "loop/Enter" in d.message and "loop/NextIteration" in d.message
    assert d.extra["frames"] == ["some_other_frame", "loop/while_context"]
    # TensorFlow's run-time complaint (inputs from different frames at loop/Less) shows too
    assert "loop/Less" in [x.node for x in only(diags, "frame-mismatch")]


# --- names ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["", "-x", "a b", "x:0", "_hidden", "é"])
def test_ill_formed_names(name):
    diags = validate(make(ph(name)))
    assert codes(diags) == ["invalid-name"]


@pytest.mark.parametrize("name", [".a", "a/b-c>d", "0", "x_1.y"])
def test_well_formed_names(name):
    assert validate(make(ph(name))) == []


def test_duplicate_three_times():
    diags = validate(make(ph("a") + ph("a") + ph("a", "DT_INT32")))
    dup = only(diags, "duplicate-name")
    assert len(dup) == 2 and all(d.extra["count"] == 3 for d in dup)


# --- inputs -------------------------------------------------------------------------------------

def test_missing_input_suggests_close_name():
    diags = validate(make(ph("alpha") + binop("c", "AddV2", "alpah", "alpha")))
    (d,) = diags
    assert d.code == "missing-input" and d.node == "c"
    assert d.extra["suggestion"] == "alpha" and "did you mean 'alpha'?" in d.message


def test_missing_control_input_is_reported():
    g = make(ph("a") + 'node { name: "n" op: "NoOp" input: "^ghost" }')
    (d,) = validate(g)
    assert d.code == "missing-input" and d.extra["input"] == "^ghost"


def test_output_slot_of_multi_output_op():
    split = ('node { name: "s" op: "Split" input: "dim" input: "x" '
             'attr { key: "num_split" value { i: 2 } } '
             'attr { key: "T" value { type: DT_FLOAT } } }')
    g = make(ph("dim", "DT_INT32") + ph("x") + split
             + binop("ok", "AddV2", "s:0", "s:1") + binop("bad", "AddV2", "s:1", "s:2"))
    (d,) = validate(g)
    assert d.code == "output-out-of-range" and d.node == "bad" and d.extra["input"] == "s:2"
    assert "2 outputs" in d.message


def test_data_input_from_op_without_outputs():
    g = make('node { name: "n" op: "NoOp" }' + ph("a") + binop("c", "AddV2", "n", "a"))
    assert "output-out-of-range" in codes(validate(g))


def test_control_inputs_after_data_are_fine():
    g = make(ph("a") + ph("b") + 'node { name: "c" op: "Identity" input: "a" input: "^b" '
             'attr { key: "T" value { type: DT_FLOAT } } }')
    assert validate(g) == []


# --- ops and attrs ---------------------------------------------------------------------------

def test_unknown_and_empty_op():
    g = make(ph("a") + 'node { name: "x" op: "FancyAdd" input: "a" }'
             + 'node { name: "y" op: "" }' + 'node { name: "z" op: "Idenity" input: "a" }')
    diags = validate(g)
    assert codes(diags) == ["unknown-op"] * 3
    assert diags[2].extra["suggestion"] == "Identity"


def test_input_count_with_number_attr_and_type_list():
    addn = ('node { name: "s" op: "AddN" input: "a" input: "a" '
            'attr { key: "N" value { i: 3 } } attr { key: "T" value { type: DT_FLOAT } } }')
    idn = ('node { name: "i" op: "IdentityN" input: "a" '
           'attr { key: "T" value { list { type: DT_FLOAT type: DT_FLOAT } } } }')
    diags = validate(make(ph("a") + addn + idn))
    assert [(d.code, d.node, d.extra["expected"], d.extra["found"]) for d in diags] == [
        ("input-count", "s", 3, 2), ("input-count", "i", 2, 1)]


def test_missing_required_attr():
    (d,) = validate(make('node { name: "p" op: "Placeholder" }'))
    assert d.code == "missing-attr" and d.extra["attr"] == "dtype"


@pytest.mark.parametrize("attr, value, expected, found", [
    ("strides", "i: 1", "list(int)", "int"),
    ("padding", "i: 1", "string", "int"),
    ("T", 's: "float"', "type", "string"),
    ("use_cudnn_on_gpu", "f: 1.0", "bool", "float"),
])
def test_attr_of_wrong_type(attr, value, expected, found):
    attrs = {"T": "type: DT_FLOAT", "strides": "list { i: 1 i: 1 i: 1 i: 1 }",
             "padding": 's: "SAME"', "use_cudnn_on_gpu": "b: true"}
    attrs[attr] = value
    body = " ".join(f'attr {{ key: "{k}" value {{ {v} }} }}' for k, v in attrs.items())
    g = make(ph("x") + ph("w") + f'node {{ name: "c" op: "Conv2D" input: "x" input: "w" {body} }}')
    (d,) = validate(g)
    assert (d.code, d.node, d.extra["expected"], d.extra["found"]) == (
        "attr-type", "c", expected, found)


def test_shape_and_func_attr_types():
    bad_shape = ('node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }'
                 ' attr { key: "shape" value { i: 3 } } }')
    call = ('node { name: "f" op: "PartitionedCall" attr { key: "Tin" value { list { } } } '
            'attr { key: "Tout" value { list { } } } attr { key: "f" value { s: "fn" } } }')
    diags = validate(make(bad_shape + call))
    assert [(d.node, d.extra["expected"]) for d in diags] == [("p", "shape"), ("f", "func")]
    good_call = (call.replace('s: "fn"', 'func { name: "fn" }')
                 + 'library { function { signature { name: "fn" } } }')
    assert validate(make(good_call)) == []  # empty lists fit list(type)


def test_attr_values_not_allowed():
    matmul = binop("m", "MatMul", "a", "b", "DT_BOOL")
    conv = ('node { name: "c" op: "Conv2D" input: "x" input: "w" '
            'attr { key: "T" value { type: DT_FLOAT } } '
            'attr { key: "strides" value { list { i: 1 i: 1 i: 1 i: 1 } } } '
            'attr { key: "padding" value { s: "SOMETIMES" } } }')
    diags = validate(make(ph("a", "DT_BOOL") + ph("b", "DT_BOOL") + matmul
                          + ph("x") + ph("w") + conv))
    assert [(d.code, d.node) for d in diags] == [("attr-not-allowed", "m"),
                                                 ("attr-not-allowed", "c")]
    assert "bool" in diags[0].message
    assert "'SOMETIMES'" in diags[1].message and "'SAME'" in diags[1].message


def test_attr_minimum():
    addn = ('node { name: "s" op: "AddN" attr { key: "N" value { i: 0 } } '
            'attr { key: "T" value { type: DT_FLOAT } } }')
    idn = 'node { name: "i" op: "IdentityN" attr { key: "T" value { list { } } } }'
    diags = validate(make(addn + idn))
    assert [(d.code, d.node) for d in diags] == [("attr-minimum", "s"), ("attr-minimum", "i")]
    assert "at least 1" in diags[0].message


def test_unknown_attr_is_a_warning_and_underscore_attrs_are_ignored():
    g = make('node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }'
             ' attr { key: "new_in_tf_99" value { i: 1 } } '
             ' attr { key: "_private" value { i: 1 } } }')
    (d,) = validate(g)
    assert (d.code, d.severity, d.extra["attr"]) == ("unknown-attr", "warning", "new_in_tf_99")


# --- edge dtypes -------------------------------------------------------------------------------

def test_dtype_mismatch_on_edge():
    g = make(ph("i", "DT_INT32") + ph("f") + binop("c", "AddV2", "f", "i"))
    (d,) = validate(g)
    assert (d.code, d.node, d.extra["input"]) == ("dtype-mismatch", "c", 1)
    assert (d.extra["expected"], d.extra["found"]) == ("float32", "int32")


def test_ref_rules():
    var = ('node { name: "v" op: "VariableV2" attr { key: "dtype" value { type: DT_FLOAT } } '
           'attr { key: "shape" value { shape { } } } }')
    read = 'node { name: "r" op: "Identity" input: "v" attr { key: "T" value { type: DT_FLOAT } } }'
    assign = ('node { name: "as" op: "Assign" input: "%s" input: "x" '
              'attr { key: "T" value { type: DT_FLOAT } } }')
    # a ref may feed a plain input, and a ref input needs a ref
    assert validate(make(var + ph("x") + read + assign % "v")) == []
    (d,) = validate(make(ph("p") + ph("x") + assign % "p"))
    assert (d.code, d.node, d.extra["expected"], d.extra["found"]) == (
        "ref-mismatch", "as", "float32_ref", "float32")


# --- cycles -------------------------------------------------------------------------------------

def test_self_loop():
    g = make(ph("a") + binop("x", "AddV2", "a", "x"))
    (d,) = validate(g)
    assert d.code == "cycle" and d.extra["path"] == ["x", "x"]


def test_cycle_through_control_edge_and_two_separate_cycles():
    ident = ('node {{ name: "{0}" op: "Identity" input: "{1}" {2} '
             'attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}')
    g = make(ph("a")
             + ident.format("p", "a", 'input: "^r"') + ident.format("q", "p", "")
             + ident.format("r", "q", "")
             + ident.format("u", "w", "") + ident.format("w", "u", ""))
    diags = validate(g)
    assert [(d.node, d.extra["path"]) for d in diags] == [
        ("p", ["p", "q", "r", "p"]), ("u", ["u", "w", "u"])]


def test_shortest_cycle_is_shown():
    # a -> b -> c -> a and the chord b -> a: the path printed from a is the 2-cycle
    ident = ('node {{ name: "{0}" op: "IdentityN" {1} '
             'attr {{ key: "T" value {{ list {{ {2} }} }} }} }}')
    g = make(ident.format("a", 'input: "c" input: "b"', "type: DT_FLOAT type: DT_FLOAT")
             + ident.format("b", 'input: "a"', "type: DT_FLOAT")
             + ident.format("c", 'input: "b"', "type: DT_FLOAT"))
    (d,) = validate(g)
    assert d.extra["path"] == ["a", "b", "a"] and d.extra["size"] == 3


def test_legal_loops_are_not_cycles_but_other_next_iteration_edges_are():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")
    assert validate(g) == []

    # NextIteration feeding an Identity that feeds it back: no Merge closes this loop
    def edit(nodes):
        nodes["counter/Identity"].input[0] = "counter/NextIteration"
    bad = reload(g, edit)
    cycles = only(validate(bad), "cycle")
    assert len(cycles) == 1
    assert set(cycles[0].extra["path"]) == {"counter/Identity", "counter/Add",
                                            "counter/NextIteration"}


def test_validate_is_fast_on_a_deep_10k_chain():
    n = 10_000
    gd = graph_pb2.GraphDef()
    text_format.Parse(ph("x0"), gd)
    for i in range(1, n):
        nd = gd.node.add(name=f"x{i}", op="Identity", input=[f"x{i - 1}"])
        nd.attr["T"].type = 1
    gd.node[0].input.append(f"x{n - 1}")   # close one giant illegal cycle
    gd.node[0].op = "Identity"
    gd.node[0].attr["T"].type = 1
    del gd.node[0].attr["dtype"]
    g = Graph(gd)
    with cpu_seconds() as spent:
        diags = validate(g)
    (d,) = diags
    assert d.code == "cycle" and d.extra["size"] == n and len(d.extra["path"]) == n + 1
    assert spent.seconds < 10.0, spent.seconds


def test_many_missing_inputs_among_look_alike_names_stay_fast():
    # difflib over 10k similar names for each of 5k missing inputs would take a minute
    gd = graph_pb2.GraphDef()
    n = 10_000
    for i in range(n):
        src = f"layer_{i}/conv/weightz" if i % 2 else f"layer_{i - 1}/conv/weights"
        nd = gd.node.add(name=f"layer_{i}/conv/weights", op="Identity", input=[src])
        nd.attr["T"].type = 1
    with cpu_seconds() as spent:
        diags = validate(Graph(gd))
    missing = only(diags, "missing-input")
    assert len(missing) == n // 2 + 1          # every odd node, and node 0 reads layer_-1
    assert spent.seconds < 10.0, spent.seconds
    # a typo in the last component finds its sibling in the same scope
    odd = next(d for d in missing if d.node == "layer_1/conv/weights")
    assert odd.extra["suggestion"] == "layer_1/conv/weights"


# --- frames -------------------------------------------------------------------------------------

def test_exit_and_next_iteration_outside_a_frame():
    g = make(ph("a")
             + 'node { name: "x" op: "Exit" input: "a" attr { key: "T" value { type: DT_FLOAT } } }'
             + 'node { name: "n" op: "NextIteration" input: "a" '
               'attr { key: "T" value { type: DT_FLOAT } } }')
    assert [(d.code, d.node) for d in validate(g)] == [
        ("exit-outside-frame", "x"), ("next-iteration-outside-frame", "n")]


def test_loop_cond_without_switch():
    g = make(ph("p", "DT_BOOL") + 'node { name: "lc" op: "LoopCond" input: "p" }')
    (d,) = validate(g)
    assert (d.code, d.node) == ("loop-cond-without-switch", "lc")


def test_enter_of_one_loop_naming_another_frame():
    g = load_graph(DATA / "while_parallel" / "graph.pbtxt")
    enters = [n.name for n in g.nodes if n.op == "Enter"]
    inside = [n for n in enters if n not in {"rnn/Enter", "rnn/Enter_1", "rnn/Enter_2"}]
    assert len(inside) >= 2   # W and b enter the loop as loop invariants
    victim = inside[0]

    def edit(nodes):
        nodes[victim].attr["frame_name"].s = b"elsewhere"
    diags = only(validate(reload(g, edit)), "enter-frame-mismatch")
    assert [(d.node, d.extra["frames"]) for d in diags] == [
        (victim, ["elsewhere", "rnn/while_context"])]


def test_parallel_iterations_disagreeing_is_a_warning():
    g = load_graph(DATA / "while_counter" / "graph.pbtxt")

    def edit(nodes):
        nodes["counter/Less/Enter"].attr["parallel_iterations"].i = 3
    (d,) = validate(reload(g, edit))
    assert (d.code, d.severity, d.node) == ("parallel-iterations-mismatch", "warning",
                                            "counter/Less/Enter")
    assert "3" in d.message and "10" in d.message


# --- colocation and devices ---------------------------------------------------------------------

def test_colocation_hint_naming_missing_node():
    cls = 'attr { key: "_class" value { list { s: "loc:@a" s: "loc:@ghost" } } }'
    g = make(ph("a") + f'node {{ name: "i" op: "Identity" input: "a" '
             f'attr {{ key: "T" value {{ type: DT_FLOAT }} }} {cls} }}')
    (d,) = validate(g)
    assert (d.code, d.severity, d.extra["target"]) == ("colocation-missing", "warning", "ghost")


@pytest.mark.parametrize("spec", [
    "", "/cpu:0", "/gpu:1", "/CPU:0", "/device:CPU:0", "/device:GPU:*",
    "/job:localhost/replica:0/task:0/device:CPU:0", "/job:worker/task:3",
    "/job:ps/replica:1/task:0/cpu:0", "/device:XLA_CPU:0", "/job:*/device:CPU",
])
def test_device_specs_that_parse(spec):
    assert parse_device(spec)


@pytest.mark.parametrize("spec", [
    "cpu:0", "/cpu", "/device:", "/replica:x", "/job:1bad", "/cpu:a", "/tpu:0",
    "/job:x/", "/device:CPU:0 ", "//cpu:0",
])
def test_device_specs_that_do_not(spec):
    assert not parse_device(spec)


def test_invalid_device_is_reported():
    g = make('node { name: "p" op: "Placeholder" device: "/gpu:zero" '
             'attr { key: "dtype" value { type: DT_FLOAT } } }')
    (d,) = validate(g)
    assert (d.code, d.severity, d.extra["device"]) == ("invalid-device", "error", "/gpu:zero")


# --- the Diagnostic record ------------------------------------------------------------------

def test_diagnostic_to_dict_is_json_ready_with_fixed_keys_first():
    d = validate(load_graph(INVALID / "cycle_without_nextiteration.pbtxt"))[0]
    out = json.loads(json.dumps(d.to_dict()))
    assert list(out)[:5] == ["code", "severity", "node", "op", "message"]
    assert out["path"] == ["c", "e", "c"]


def test_every_code_has_severity_and_diagnostics_are_in_file_order():
    assert all(sev in ("error", "warning") for sev, _ in CODES.values())
    g = make(ph("a") + binop("z", "AddV2", "a", "ghost") + 'node { name: "y" op: "Nope" }'
             + binop("x", "AddV2", "a", "gone"))
    assert [d.node for d in validate(g)] == ["z", "y", "x"]


def test_a_reference_type_as_an_attr_value_is_an_error() -> None:
    # TensorFlow's ValidateAttrValue: "AttrValue must not have reference type value"
    from dfg.schemas import graph_pb2

    gd = text_format.Parse('''
node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT_REF } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1 } } } }
''', graph_pb2.GraphDef())
    diags = [d for d in validate(Graph(gd)) if d.is_error]
    assert [(d.code, d.node) for d in diags] == [("attr-type", "c")]
    assert "float32_ref" in diags[0].message


def test_facts_shared_across_validations_keep_each_graphs_own_findings():
    """Validations share what they found per (op, attrs) (an AddV2 of float32 is fine and
    takes two float32s): a second graph with the same node still gets its own input checks,
    and a node whose attrs are wrong is reported every time, wherever it is."""
    good = make(ph("a") + ph("b") + binop("s", "AddV2", "a", "b"))
    assert validate(good) == [] and validate(good) == []
    # the same AddV2, fed an int32: the shared facts say float32 is wanted
    mixed = make(ph("a", "DT_INT32") + ph("b") + binop("s", "AddV2", "a", "b"))
    (d,) = validate(mixed)
    assert d.code == "dtype-mismatch" and d.node == "s"
    bad = make(ph("a") + ph("b") + binop("s", "AddV2", "a", "b", t="DT_STRING"))
    first = [(d.code, d.node) for d in validate(bad)]
    assert first and first == [(d.code, d.node) for d in validate(bad)]
    assert validate(good) == []
