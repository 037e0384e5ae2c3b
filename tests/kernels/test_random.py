"""Random kernels beyond the replayed raw-op cases (tests/data/kernels/raw_ops_random/).

* Philox4x32-10 against the Random123 paper's known-answer vectors.
* Draws TF splits over its intra-op threads (shard-dependent values), replayed from
  ``sharded.npz`` (TF 2.21 pinned to 2 threads) with dfg told TF's thread count is 2.
* Session behaviour: a seeded node's stream lives as long as the session, unseeded draws differ,
  a Generator's state variable advances as TF's does.
* Speed: a million stateless uniforms well under half a second.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from dfg.executor import Session
from dfg.executor.kernels import _philox as P
from dfg.executor.kernels import random as R
from dfg.executor.kernels.registry import invoke
from dfg.executor.resources import ResourceManager
from dfg.graphdef.graph import Graph
from dfg.schemas import graph_pb2

DATA = Path(__file__).resolve().parent.parent / "data" / "kernels" / "raw_ops_random"
i32, i64, f32 = np.int32, np.int64, np.float32
S64 = np.array([12, 34], i64)


@pytest.mark.parametrize("counter, key, want", [
    # Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (Random123 kat_vectors).
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
])
def test_philox_known_answers(counter, key, want) -> None:
    c = counter[0] | counter[1] << 32 | counter[2] << 64 | counter[3] << 96
    got = P.blocks(key[0] | key[1] << 32, c, 1)[0]
    assert got.tolist() == list(want)


def test_philox_counter_carries_across_words() -> None:
    c = (1 << 64) - 1                       # block 1 is counter 2**64: the carry reaches word 2
    two = P.blocks(9, c, 2)
    assert two[1].tolist() == P.blocks(9, 1 << 64, 1)[0].tolist()
    assert P.blocks(9, (1 << 128) - 1, 2)[1].tolist() == P.blocks(9, 0, 1)[0].tolist()


@pytest.fixture
def two_tf_threads(monkeypatch):
    monkeypatch.setattr(R, "TF_THREADS", 2)


def sharded() -> dict[str, np.ndarray]:
    with np.load(DATA / "sharded.npz") as z:
        return {k: z[k] for k in z.files}


def test_sharded_stateless_draws(two_tf_threads) -> None:
    want = sharded()
    got = invoke("StatelessMultinomial", want["multinomial_logits"], i32(20), S64)
    np.testing.assert_array_equal(got, want["multinomial"])
    got = invoke("StatelessParameterizedTruncatedNormal", np.array([1500], i32), S64, f32(0),
                 f32(1), f32(-0.3), f32(0.5))
    np.testing.assert_array_equal(got, want["ptn"])


def test_sharded_seeded_draws_run_after_run(two_tf_threads) -> None:
    want = sharded()
    res = ResourceManager()
    for run in range(2):
        m = invoke("Multinomial", want["multinomial_logits"], i32(20),
                   attrs={"seed": 4, "seed2": 5}, resources=res)
        np.testing.assert_array_equal(m, want[f"multinomial_run{run}"])
        p = invoke("ParameterizedTruncatedNormal", np.array([20, 100], i32), f32(1), f32(2),
                   f32(-1), f32(2.5), attrs={"seed": 6, "seed2": 7, "dtype": np.dtype(f32)},
                   resources=res)
        np.testing.assert_array_equal(p, want[f"ptn_v1_run{run}"])


def test_shards_follow_eigen_parallel_for(monkeypatch) -> None:
    monkeypatch.setattr(R, "TF_THREADS", 2)
    assert R._shards(5, 10) == [(0, 5)]                    # too cheap to split
    assert R._shards(10, 23200) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    monkeypatch.setattr(R, "TF_THREADS", 1)
    assert R._shards(10, 23200) == [(0, 10)]


SEEDED = """
node { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
       attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } }
       int_val: 6 } } } }
node { name: "r" op: "RandomStandardNormal" input: "shape"
       attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "T" value { type: DT_INT32 } }
       attr { key: "seed" value { i: %d } } attr { key: "seed2" value { i: %d } } }
"""


def session_draws(seed: int, seed2: int, runs: int) -> list[np.ndarray]:
    gd = graph_pb2.GraphDef()
    text_format.Parse(SEEDED % (seed, seed2), gd)
    with Session(Graph(gd)) as s:
        return [s.run(["r:0"])[0] for _ in range(runs)]


def test_seeded_node_streams_per_session() -> None:
    a, b = session_draws(7, 3, 3), session_draws(7, 3, 3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], a[1])
    # The n-th run is TF's n-th draw: the stream skips 256 blocks per output each run.
    key, counter = P.seeds_to_key_counter(7, 3)
    third = P.normal_real(P.blocks(key, P.add128(counter, 2 * 6 * 256), 2).reshape(-1),
                          np.dtype(f32))[:6]
    np.testing.assert_array_equal(a[2], third)
    # Outside a session a seeded op gives its first draw every time.
    once = invoke("RandomStandardNormal", np.array([6], i32),
                  attrs={"seed": 7, "seed2": 3, "dtype": np.dtype(f32)})
    np.testing.assert_array_equal(once, a[0])


def test_unseeded_draws_differ() -> None:
    a = session_draws(0, 0, 2)
    assert not np.array_equal(a[0], a[1])
    assert not np.array_equal(session_draws(0, 0, 1)[0], a[0])


def test_generator_state_advances_in_a_session() -> None:
    text = """
    node { name: "v" op: "VarHandleOp" attr { key: "dtype" value { type: DT_INT64 } }
           attr { key: "shape" value { shape { dim { size: 3 } } } }
           attr { key: "shared_name" value { s: "v" } } }
    node { name: "init_value" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
           attr { key: "value" value { tensor { dtype: DT_INT64
           tensor_shape { dim { size: 3 } } int64_val: -1 int64_val: 0 int64_val: 5 } } } }
    node { name: "init" op: "AssignVariableOp" input: "v" input: "init_value"
           attr { key: "dtype" value { type: DT_INT64 } } }
    node { name: "alg" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
           attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { }
           int64_val: 1 } } } }
    node { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
           attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { dim { size: 1 } }
           int64_val: 3 } } } }
    node { name: "u" op: "StatefulUniform" input: "v" input: "alg" input: "shape"
           attr { key: "dtype" value { type: DT_FLOAT } }
           attr { key: "shape_dtype" value { type: DT_INT64 } } }
    node { name: "read" op: "ReadVariableOp" input: "v" input: "^u"
           attr { key: "dtype" value { type: DT_INT64 } } }
    """
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    with Session(Graph(gd)) as s:
        s.run([], targets=["init"])
        u, state = s.run(["u:0", "read:0"])
    # The counter 2**64 - 1 moves by 3 outputs * 256 blocks, carrying into its upper word.
    assert state.tolist() == [3 * 256 - 1, 1, 5]
    np.testing.assert_array_equal(u, P.uniform_float(P.stream(5, (1 << 64) - 1, 3)))


def test_a_million_uniforms_are_quick() -> None:
    args = (np.array([1_000_000], i32), np.array([7], np.uint64), np.array([1, 2], np.uint64),
            i32(1))
    invoke("StatelessRandomUniformV2", np.array([8], i32), *args[1:])
    t = time.process_time()
    out = invoke("StatelessRandomUniformV2", *args)
    assert time.process_time() - t < 0.5
    assert out.shape == (1_000_000,) and out.dtype == f32
    assert 0 <= out.min() and out.max() < 1
