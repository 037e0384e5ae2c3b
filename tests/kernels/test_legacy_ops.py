"""Ops TensorFlow 2.21 no longer writes but older graphs contain (TopK, HostConst,
PlaceholderV2, the Ref* loop ops of v1 graphs looping over a ref variable) and
ShardedFilespec; expected values from arithmetic and from the ops' documented formats."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.kernels.registry import invoke
from dfg.graphdef.graph import Graph
from dfg.schemas import graph_pb2


def graph(text: str) -> Graph:
    return Graph(text_format.Parse(text, graph_pb2.GraphDef()))


def test_top_k_v1_takes_k_as_an_attr() -> None:
    v, i = invoke("TopK", np.array([[1.0, 5.0, 3.0, 5.0]], np.float32), attrs={"k": 2})
    assert v.tolist() == [[5.0, 5.0]] and i.tolist() == [[1, 3]]   # ties: lower index first


def test_host_const_is_its_value() -> None:
    value = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = invoke("HostConst", attrs={"value": value, "dtype": np.dtype(np.int32)})
    assert out.dtype == np.int32 and out.tolist() == value.tolist()


def test_sharded_filespec_pattern() -> None:
    out = invoke("ShardedFilespec", np.array(b"ckpt/model", dtype=object), np.int32(3))
    assert out[()] == b"ckpt/model-?????-of-00003"


def test_placeholder_v2_is_fed() -> None:
    g = graph('node { name: "x" op: "PlaceholderV2" attr { key: "dtype" value { type: DT_FLOAT } }'
              ' attr { key: "shape" value { shape { dim { size: 2 } } } } }')
    with Session(g) as sess:
        assert sess.run("x:0", {"x:0": [1.5, 2.5]}).tolist() == [1.5, 2.5]


def _f32(name: str, value: float) -> str:
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}'
            f' attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }}'
            f' float_val: {value} }} }} }} }}')


def _i32(name: str, value: int, ctrl: str = "") -> str:
    inp = f' input: "^{ctrl}"' if ctrl else ""
    return (f'node {{ name: "{name}" op: "Const"{inp} attr {{ key: "dtype" value {{ type: '
            f'DT_INT32 }} }} attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 '
            f'tensor_shape {{ }} int_val: {value} }} }} }} }}')


F = 'attr { key: "T" value { type: DT_FLOAT } }'
I = 'attr { key: "T" value { type: DT_INT32 } }'
FRAME = 'attr { key: "frame_name" value { s: "loop" } }'

# v = 10; while i < 3: v += 1 (AssignAdd on the ref carried by RefEnter/RefMerge/RefSwitch/
# RefNextIteration/RefExit); fetch the value read through RefExit: 13.
REF_LOOP = f"""
node {{ name: "v" op: "VariableV2" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "shape" value {{ shape {{ }} }} }} }}
{_f32("ten", 10.0)}
node {{ name: "init" op: "Assign" input: "v" input: "ten" {F} }}
{_i32("zero", 0)}
node {{ name: "i_enter" op: "Enter" input: "zero" {I} {FRAME} }}
node {{ name: "v_enter" op: "RefEnter" input: "v" {F} {FRAME} }}
node {{ name: "i_merge" op: "Merge" input: "i_enter" input: "i_next"
  attr {{ key: "T" value {{ type: DT_INT32 }} }} attr {{ key: "N" value {{ i: 2 }} }} }}
node {{ name: "v_merge" op: "RefMerge" input: "v_enter" input: "v_next"
  attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "N" value {{ i: 2 }} }} }}
{_i32("three", 3, "i_merge")}
node {{ name: "less" op: "Less" input: "i_merge" input: "three" {I} }}
node {{ name: "cond" op: "LoopCond" input: "less" }}
node {{ name: "i_switch" op: "Switch" input: "i_merge" input: "cond" {I} }}
node {{ name: "v_switch" op: "RefSwitch" input: "v_merge" input: "cond" {F} }}
node {{ name: "i_body" op: "Identity" input: "i_switch:1" {I} }}
{_i32("one", 1, "i_body")}
node {{ name: "i_add" op: "AddV2" input: "i_body" input: "one" {I} }}
node {{ name: "one_f" op: "Const" input: "^i_body"
  attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }}
    float_val: 1 }} }} }} }}
node {{ name: "bump" op: "AssignAdd" input: "v_switch:1" input: "one_f" {F} }}
node {{ name: "i_next" op: "NextIteration" input: "i_add" {I} }}
node {{ name: "v_next" op: "RefNextIteration" input: "bump" {F} }}
node {{ name: "v_exit" op: "RefExit" input: "v_switch" {F} }}
node {{ name: "i_exit" op: "Exit" input: "i_switch" {I} }}
node {{ name: "read" op: "Identity" input: "v_exit" {F} }}
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_ref_loop_ops_carry_a_variable_through_a_while_loop(threads: int) -> None:
    with Session(graph(REF_LOOP), threads=threads) as sess:
        sess.run([], targets=["init"])
        i, v = sess.run(["i_exit:0", "read:0"])
        assert int(i) == 3 and float(v) == 13.0
        assert float(sess.run("v:0")) == 13.0    # the variable itself was updated


def test_abort_fails_the_step_instead_of_ending_the_process() -> None:
    # TensorFlow's Abort exits the process; a library must not, so the step fails
    from google.protobuf import text_format

    from dfg.executor import Session
    from dfg.graphdef.errors import AbortedError
    from dfg.graphdef.graph import Graph
    from dfg.schemas import graph_pb2

    g = Graph(text_format.Parse(
        'node { name: "stop" op: "Abort" attr { key: "error_msg" value { s: "bad input" } } }',
        graph_pb2.GraphDef()))
    with Session(g) as s, pytest.raises(AbortedError, match="bad input"):
        s.run([], targets=["stop"])
