"""Pass ``fuse_matmul_bias_act``: ``MatMul`` + ``BiasAdd`` (+ activation) as one
``_FusedMatMul`` node, TensorFlow's fused op, with the rules of ``fuse_conv_bias_act`` (same
activations, same conditions; the fused node keeps the last node's name). Dense layers
(Keras ``Dense``: MatMul, BiasAdd, activation) are its target.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from .common import PassOptions
from .fuse_conv_bias_act import DT_FLOAT, fuse

# _FusedMatMul takes bfloat16, half and float; dfg fuses float only
MATMUL_FUSIONS = {"MatMul": ("_FusedMatMul", frozenset({DT_FLOAT}))}


def run(graph: Graph, options: PassOptions) -> Any:
    return fuse(graph, options, MATMUL_FUSIONS)
