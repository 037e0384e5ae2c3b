"""Optional GPU kernels: without CuPy nothing is registered and GPU sessions fall back to the
CPU; with CuPy and a device, GPU MatMul equals the CPU's."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.devices import gpu
from dfg.executor.kernels.registry import ops_with_kernels
from dfg.graphdef.graph import Graph
from dfg.schemas import graph_pb2

GRAPH = '''
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "m" op: "MatMul" input: "a" input: "b" attr { key: "T" value { type: DT_FLOAT } }
       attr { key: "transpose_b" value { b: true } } }
node { name: "r" op: "Relu" input: "m" attr { key: "T" value { type: DT_FLOAT } } }
'''


def _graph() -> Graph:
    gd = graph_pb2.GraphDef()
    text_format.Parse(GRAPH, gd)
    return Graph(gd)


def test_gpu_registry_matches_availability() -> None:
    gpu_ops = {op for op, devs in ops_with_kernels().items() if "GPU" in devs}
    assert bool(gpu_ops) == gpu.AVAILABLE


def test_gpu_session_falls_back_to_cpu_and_matches_math() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    b = np.ones((4, 3), np.float32)
    with Session(_graph(), device="GPU") as sess:
        r = sess.run("r", {"a": a, "b": b})
    # row sums of a are -3 and 6: relu(a @ b.T) is 0 then 6 in every column
    np.testing.assert_array_equal(r, np.array([[0] * 4, [6] * 4], np.float32))


@pytest.mark.skipif(not gpu.AVAILABLE, reason="CuPy with a GPU is not available")
def test_gpu_matmul_equals_cpu() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal((16, 32), np.float32)
    with Session(_graph(), device="GPU") as g, Session(_graph()) as c:
        np.testing.assert_allclose(g.run("m", {"a": a, "b": b}), c.run("m", {"a": a, "b": b}),
                                   rtol=1e-5, atol=1e-5)
