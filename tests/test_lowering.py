"""TF2 functional graphs run by lowering (graphdef/lowering.py): hand-written FunctionDefs with
expected values from arithmetic. TensorFlow's own TF2 corpus is tests/test_tf2_conformance.py."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.session import missing_kernels
from dfg.graphdef.errors import InvalidArgumentError, MissingFeedError
from dfg.graphdef.graph import Graph
from dfg.graphdef.lowering import lower_functional, needs_lowering
from dfg.schemas import graph_pb2

F32 = 'attr { key: "T" value { type: DT_FLOAT } }'
I32 = 'attr { key: "T" value { type: DT_INT32 } }'


def graph(text: str) -> Graph:
    return Graph(text_format.Parse(text, graph_pb2.GraphDef()))


def const(name: str, dtype: str, field: str, value) -> str:
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: {dtype} }} }}'
            f' attr {{ key: "value" value {{ tensor {{ dtype: {dtype} tensor_shape {{ }} '
            f'{field}: {value} }} }} }} }}')


# sum of i*i for i in [0, n): StatelessWhile over (i, acc), cond i < n (n a loop variable)
WHILE = f"""
node {{ name: "n" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_INT32 }} }} }}
{const("zero", "DT_INT32", "int_val", 0)}
node {{ name: "loop" op: "StatelessWhile" input: "zero" input: "zero" input: "n"
  attr {{ key: "T" value {{ list {{ type: DT_INT32 type: DT_INT32 type: DT_INT32 }} }} }}
  attr {{ key: "cond" value {{ func {{ name: "cond" }} }} }}
  attr {{ key: "body" value {{ func {{ name: "body" }} }} }}
  attr {{ key: "parallel_iterations" value {{ i: 4 }} }} }}
library {{
  function {{
    signature {{ name: "cond" input_arg {{ name: "i" type: DT_INT32 }}
      input_arg {{ name: "acc" type: DT_INT32 }} input_arg {{ name: "n" type: DT_INT32 }}
      output_arg {{ name: "ok" type: DT_BOOL }} }}
    node_def {{ name: "less" op: "Less" input: "i" input: "n" {I32} }}
    ret {{ key: "ok" value: "less:z:0" }}
  }}
  function {{
    signature {{ name: "body" input_arg {{ name: "i" type: DT_INT32 }}
      input_arg {{ name: "acc" type: DT_INT32 }} input_arg {{ name: "n" type: DT_INT32 }}
      output_arg {{ name: "i2" type: DT_INT32 }} output_arg {{ name: "acc2" type: DT_INT32 }}
      output_arg {{ name: "n2" type: DT_INT32 }} }}
    node_def {{ name: "one" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
      attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }}
        int_val: 1 }} }} }} }}
    node_def {{ name: "next" op: "AddV2" input: "i" input: "one:output:0" {I32} }}
    node_def {{ name: "sq" op: "Mul" input: "i" input: "i" {I32} }}
    node_def {{ name: "acc_next" op: "AddV2" input: "acc" input: "sq:z:0" {I32} }}
    ret {{ key: "i2" value: "next:z:0" }} ret {{ key: "acc2" value: "acc_next:z:0" }}
    ret {{ key: "n2" value: "n" }}
  }}
}}
"""


@pytest.mark.parametrize("threads", [1, 2, 8])
@pytest.mark.parametrize("programs", ["never", "always", "auto"])
def test_stateless_while(threads: int, programs: str) -> None:
    with Session(graph(WHILE), threads=threads, programs=programs) as sess:
        for n in (0, 1, 5, 40):
            i, acc, n_out = sess.run(["loop:0", "loop:1", "loop:2"], {"n": np.int32(n)})
            assert (int(i), int(acc), int(n_out)) == (n, sum(k * k for k in range(n)), n)


def test_lowered_while_is_a_v1_frame() -> None:
    low = lower_functional(graph(WHILE).graph_def)
    ops = [nd.op for nd in low.node]
    assert not needs_lowering(low) and not low.library.function
    assert ops.count("Enter") == ops.count("Exit") == ops.count("NextIteration") == 3
    enter = next(nd for nd in low.node if nd.op == "Enter")
    assert enter.attr["frame_name"].s == b"loop"
    assert enter.attr["parallel_iterations"].i == 4
    loop = next(nd for nd in low.node if nd.name == "loop")   # the name stays fetchable
    assert loop.op == "IdentityN"


# If over a resource variable: the then branch adds x to the variable and returns x*2, the
# else branch returns -x; a Placeholder read only by the else branch's caller side.
IF = f"""
node {{ name: "p" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_BOOL }} }} }}
node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
node {{ name: "v" op: "VarHandleOp" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "shape" value {{ shape {{ }} }} }}
  attr {{ key: "shared_name" value {{ s: "v" }} }} }}
{const("zero", "DT_FLOAT", "float_val", 0.0)}
node {{ name: "init" op: "AssignVariableOp" input: "v" input: "zero"
  attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
node {{ name: "read" op: "ReadVariableOp" input: "v"
  attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
node {{ name: "cond" op: "If" input: "p" input: "x" input: "v"
  attr {{ key: "Tcond" value {{ type: DT_BOOL }} }}
  attr {{ key: "Tin" value {{ list {{ type: DT_FLOAT type: DT_RESOURCE }} }} }}
  attr {{ key: "Tout" value {{ list {{ type: DT_FLOAT }} }} }}
  attr {{ key: "then_branch" value {{ func {{ name: "then" }} }} }}
  attr {{ key: "else_branch" value {{ func {{ name: "else" }} }} }} }}
library {{
  function {{
    signature {{ name: "then" input_arg {{ name: "x" type: DT_FLOAT }}
      input_arg {{ name: "h" type: DT_RESOURCE }} output_arg {{ name: "y" type: DT_FLOAT }}
      is_stateful: true }}
    node_def {{ name: "add" op: "AssignAddVariableOp" input: "h" input: "x"
      attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} }}
    node_def {{ name: "two" op: "Mul" input: "x" input: "x" {F32} }}
    ret {{ key: "y" value: "two:z:0" }}
    control_ret {{ key: "add" value: "add" }}
  }}
  function {{
    signature {{ name: "else" input_arg {{ name: "x" type: DT_FLOAT }}
      input_arg {{ name: "h" type: DT_RESOURCE }} output_arg {{ name: "y" type: DT_FLOAT }} }}
    node_def {{ name: "neg" op: "Neg" input: "x" {F32} }}
    ret {{ key: "y" value: "neg:y:0" }}
  }}
}}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_if_with_a_stateful_branch(threads: int) -> None:
    with Session(graph(IF), threads=threads) as sess:
        sess.run([], targets=["init"])
        total = 0.0
        for p, x in [(True, 3.0), (False, 5.0), (True, 0.5)]:
            y = sess.run("cond:0", {"p": p, "x": np.float32(x)})
            if p:
                total += x
            assert float(y) == (x * x if p else -x)
            # the side effect finished before the If's output was produced
            assert float(sess.run("read:0")) == total


# Case with three branches returning 10, 20, 30; an index out of range runs the last one.
def case_graph() -> Graph:
    branches = "".join(
        f"""function {{ signature {{ name: "b{k}" output_arg {{ name: "y" type: DT_INT32 }} }}
          node_def {{ name: "c" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
            attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }}
              int_val: {10 * (k + 1)} }} }} }} }}
          ret {{ key: "y" value: "c:output:0" }} }}""" for k in range(3))
    return graph(f"""
node {{ name: "i" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_INT32 }} }} }}
node {{ name: "case" op: "StatelessCase" input: "i"
  attr {{ key: "Tin" value {{ list {{ }} }} }}
  attr {{ key: "Tout" value {{ list {{ type: DT_INT32 }} }} }}
  attr {{ key: "branches" value {{ list {{ func {{ name: "b0" }} func {{ name: "b1" }}
    func {{ name: "b2" }} }} }} }} }}
library {{ {branches} }}
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_case_out_of_range_runs_the_last_branch(threads: int) -> None:
    with Session(case_graph(), threads=threads) as sess:
        got = [int(sess.run("case:0", {"i": np.int32(i)})) for i in (0, 1, 2, 3, -1, 99)]
    assert got == [10, 20, 30, 30, 30, 30]


# A node whose op is a polymorphic library function: "$T" bound by the node's attr T.
POLY = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_INT64 } } }
node { name: "call" op: "square" input: "x" attr { key: "T" value { type: DT_INT64 } } }
node { name: "outer" op: "PartitionedCall" input: "call"
  attr { key: "Tin" value { list { type: DT_INT64 } } }
  attr { key: "Tout" value { list { type: DT_INT64 } } }
  attr { key: "f" value { func { name: "square" attr { key: "T" value { type: DT_INT64 } } } } } }
library {
  function {
    signature { name: "square" input_arg { name: "a" type_attr: "T" }
      output_arg { name: "b" type_attr: "T" } attr { name: "T" type: "type" } }
    node_def { name: "m" op: "Mul" input: "a" input: "a"
      attr { key: "T" value { placeholder: "T" } } }
    ret { key: "b" value: "m:z:0" }
  }
}
"""


def test_call_by_op_name_with_placeholder_attrs() -> None:
    with Session(graph(POLY)) as sess:
        call, outer = sess.run(["call:0", "outer:0"], {"x": np.array([2, -3], np.int64)})
    assert call.dtype == np.int64 and call.tolist() == [4, 9]
    assert outer.tolist() == [16, 81]


def test_recursion_is_refused() -> None:
    g = graph("""
node { name: "c" op: "f" }
library { function { signature { name: "f" output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "again" op: "f" } ret { key: "y" value: "again:y:0" } } }
""")
    with pytest.raises(InvalidArgumentError, match="recursive"):
        lower_functional(g.graph_def)


def test_error_inside_a_function_names_it() -> None:
    g = graph(f"""
node {{ name: "x" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_INT32 }} }} }}
node {{ name: "call" op: "StatefulPartitionedCall" input: "x"
  attr {{ key: "Tin" value {{ list {{ type: DT_INT32 }} }} }}
  attr {{ key: "Tout" value {{ list {{ type: DT_INT32 }} }} }}
  attr {{ key: "f" value {{ func {{ name: "divide" }} }} }} }}
library {{ function {{
  signature {{ name: "divide" input_arg {{ name: "a" type: DT_INT32 }}
    output_arg {{ name: "q" type: DT_INT32 }} }}
  node_def {{ name: "zero" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
    attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }}
      int_val: 0 }} }} }} }}
  node_def {{ name: "div" op: "FloorDiv" input: "a" input: "zero:output:0" {I32} }}
  ret {{ key: "q" value: "div:z:0" }} }} }}
""")
    with Session(g) as sess, pytest.raises(InvalidArgumentError) as ei:
        sess.run("call:0", {"x": np.int32(7)})
    assert ei.value.function == "divide"
    assert "in function 'divide', node 'div'" in str(ei.value)


def test_unfed_placeholder_in_an_untaken_branch_is_fine() -> None:
    # x feeds only the else branch: TensorFlow runs the step when p is true without x
    with Session(graph(IF)) as sess:
        sess.run([], targets=["init"])
        # x is an input of the If itself, so it is needed either way: fed or not, it runs
        with pytest.raises(MissingFeedError):
            sess.run("cond:0", {"p": True})


def test_missing_kernels_sees_through_functions() -> None:
    assert missing_kernels(graph(WHILE)) == {}
    g = graph(POLY.replace('op: "Mul"', 'op: "NoSuchKernelOp"').replace("m:z:0", "m:0"))
    assert list(missing_kernels(g)) == ["NoSuchKernelOp"]


def test_cli_runs_a_tf2_graph_and_shows_a_tensor_list() -> None:
    """`dfg run` (a real process) on TensorFlow's map_fn graph: the fetch equals TensorFlow's
    value, and a fetched TensorList is reported as a variant."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    case = Path(__file__).parent / "data" / "tf2" / "tf2_map_fn"
    step = json.loads((case / "case.json").read_text())["steps"][0]
    fetch = step["fetch"][0]
    feeds = [a for k, v in step["feed"].items() for a in ("--feed", f"{k}=@{case / v}")]
    r = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", str(case / "graph.pbtxt"),
                        "--fetch", fetch, "--fetch", "map/TensorArrayV2", *feeds,
                        "--output", "json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["fetches"]
    expected = np.load(case / step["expect"][fetch])
    np.testing.assert_allclose(np.array(got[0]["value"], dtype=expected.dtype), expected,
                               rtol=1e-5, atol=1e-6)
    assert got[1]["dtype"] == "variant" and got[1]["value"].startswith("TensorList(")


def test_lowering_keeps_the_functions_ops_that_are_not_lowered_still_name() -> None:
    # "body" is called by a While (inlined: dropped); "mapper" is only named by an op
    # lowering leaves alone (as a tf.data MapDataset names its function): kept
    gd = graph(WHILE).graph_def
    extra = text_format.Parse("""
library { function { signature { name: "mapper" input_arg { name: "x" type: DT_INT32 }
  output_arg { name: "y" type: DT_INT32 } } ret { key: "y" value: "x" } } }
node { name: "ds" op: "MapDataset" input: "n"
  attr { key: "f" value { func { name: "mapper" } } } }""", graph_pb2.GraphDef())
    gd.MergeFrom(extra)
    out = lower_functional(gd)
    assert [f.signature.name for f in out.library.function] == ["mapper"]
    assert not lower_functional(graph(WHILE).graph_def).HasField("library")


def test_a_graph_calling_python_says_why_it_cannot_run() -> None:
    g = graph("""
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "py" op: "EagerPyFunc" input: "x" attr { key: "token" value { s: "pyfunc_0" } }
  attr { key: "Tin" value { list { type: DT_FLOAT } } }
  attr { key: "Tout" value { list { type: DT_FLOAT } } } }""")
    from dfg.graphdef.errors import UnimplementedError

    with Session(g) as s, pytest.raises(UnimplementedError, match="Python code"):
        s.run(["py"], {"x": np.float32(1)})
