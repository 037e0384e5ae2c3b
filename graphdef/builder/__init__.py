"""Build TensorFlow-compatible graphs in Python, without TensorFlow (``dfg.graphdef.builder``).

    from dfg.graphdef import builder as B
    g = B.Graph()
    with g.as_default():
        x = B.placeholder("float32", [None, 3], name="x")
        W = B.variable(B.zeros([3, 1]), name="W")
        y = B.matmul(x, W)
        init = B.global_variables_initializer()
    g.as_graph_def()   # the GraphDef TensorFlow 1.x would write for the same program
"""

from __future__ import annotations

from .autograph import autograph
from .control_flow import cond, merge, switch, while_loop
from .core import Graph, Operation, Tensor, get_default_graph, reset_default_graph
from .function import Function, function
from .gradients import gradients
from .importer import import_graph_def, unroll_loops
from .ops import *  # noqa: F403
from .ops import apply_op, constant, convert_to_tensor, group, placeholder
from .variables import (
    Variable,
    global_variables,
    global_variables_initializer,
    trainable_variables,
    variable,
    variables_initializer,
)


def name_scope(name: str | None, default_name: str | None = None):
    return get_default_graph().name_scope(name, default_name)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


def device(name: str | None):
    return get_default_graph().device(name)


def colocate_with(op, ignore_existing: bool = False):
    return get_default_graph().colocate_with(op, ignore_existing)


float32, float64, int32, int64, bool_ = "float32", "float64", "int32", "int64", "bool"

__all__ = [
    "Graph", "Operation", "Tensor", "Variable", "Function", "function", "get_default_graph",
    "reset_default_graph", "placeholder", "constant", "convert_to_tensor", "variable",
    "global_variables", "trainable_variables", "global_variables_initializer",
    "variables_initializer", "cond", "switch", "merge", "while_loop", "apply_op", "group",
    "name_scope", "control_dependencies", "device", "colocate_with", "gradients",
    "import_graph_def", "unroll_loops", "autograph",
]
