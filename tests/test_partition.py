"""Graphs partitioned by task (graphdef/partition.py) and run one Ray actor per task
(executor/distributed/cluster.py, `dfg partition`, `dfg run --cluster ray`).

Expected values are TensorFlow's: tests/data/partition/generate.py ran each graph on a real
TF cluster (one in-process server per task) and saved what it computed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from click.testing import CliRunner

from dfg.cli.main import cli
from dfg.executor import Session
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    CancelledError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    OpError,
    UnavailableError,
)
from dfg.graphdef.graph import Graph
from dfg.graphdef.io import load_graph
from dfg.graphdef.partition import RECV_OPS, SEND_OPS, Task, parse_task, partition
from dfg.graphdef.validate import validate

HERE = os.path.join(os.path.dirname(__file__), "data", "partition")
PS = Task("ps")
W0, W1 = Task("worker", 0, 0), Task("worker", 0, 1)


def data(name: str) -> tuple[str, dict]:
    path = os.path.join(HERE, f"{name}.pbtxt")
    with np.load(os.path.join(HERE, f"{name}.npz")) as d:
        return path, {k: d[k] for k in d.files}


def node(gd, name):
    return next(n for n in gd.node if n.name == name)


# --- the partitioner ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["ps_mlp", "loop", "cond"])
def test_every_cross_task_edge_becomes_one_send_recv_pair(name):
    path, _ = data(name)
    g = load_graph(path)
    p = partition(g)
    assert set(p.graphs) == {PS, W0, W1}
    assert p.default_task == W0           # a graph with a worker job: worker 0
    # every original node is in exactly one partition: its task's
    for n in g.nodes:
        where = [t for t, gd in p.graphs.items() if any(x.name == n.name for x in gd.node)]
        assert where == [p.placement[n.name]]
    pairs = {(tr.src, tr.recv_task): tr for tr in p.transfers}
    assert len(pairs) == len(p.transfers)   # one pair per tensor and receiving task
    for n in g.nodes:
        dst = p.placement[n.name]
        for src, slot in n.inputs:
            if p.placement[src] != dst:
                assert (f"{src}:{slot}", dst) in pairs, (src, n.name)
        for src in n.control_inputs:
            if p.placement[src] != dst:
                assert (f"^{src}", dst) in pairs
    for tr in p.transfers:
        send = node(p.graphs[tr.send_task], tr.send)
        recv = node(p.graphs[tr.recv_task], tr.recv)
        assert send.op in SEND_OPS and recv.op in RECV_OPS
        for nd in (send, recv):
            assert nd.attr["tensor_name"].s.decode() == tr.tensor_name
            assert nd.attr["send_device"].s.decode() == tr.send_task.device
            assert nd.attr["recv_device"].s.decode() == tr.recv_task.device
            assert nd.attr["send_device_incarnation"].i == 1
            assert nd.attr["client_terminated"].b is False
        assert send.attr["T"].type == recv.attr["tensor_type"].type
        if not tr.src.startswith("^"):
            src, slot = tr.src.rsplit(":", 1)
            from dfg.graphdef.opdefs.registry import registry

            want = registry().output_types(g.node(src).proto)[int(slot)]
            assert recv.attr["tensor_type"].type == D.base(want)
    for t, gd in p.graphs.items():
        errors = [str(d) for d in validate(Graph(gd)) if d.is_error]
        assert errors == [], (t, errors)


def test_ps_placement_follows_devices_and_colocation():
    path, _ = data("ps_mlp")
    p = partition(path)
    assert p.placement["w1"] == PS and p.placement["h"] == W0
    assert p.placement["logits"] == W1
    # the optimizer's update is colocated with its variable (loc:@w1)
    assert p.placement["train/update_w1/ApplyGradientDescent"] == PS


GRAPH_TEXT = """
node { name: "w" op: "VariableV2" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape {} } } }
node { name: "w_init" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } } }
node { name: "w/Assign" op: "Assign" input: "w" input: "w_init"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "_class" value { list { s: "loc:@w" } } } }
node { name: "w/read" op: "Identity" input: "w" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "init" op: "NoOp" input: "^w/Assign" }
node { name: "q" op: "FIFOQueueV2" device: "/job:ps/task:0"
  attr { key: "component_types" value { list { type: DT_FLOAT } } } }
node { name: "deq" op: "QueueDequeueV2" input: "q" device: "/job:ps/task:0"
  attr { key: "component_types" value { list { type: DT_FLOAT } } } }
node { name: "two" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2 } } } }
node { name: "y" op: "Mul" input: "w/read" input: "two" input: "^w/Assign"
  device: "/job:worker/task:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "blocked" op: "AddV2" input: "deq" input: "w/read" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
"""


def small_graph():
    from google.protobuf import text_format

    from dfg.schemas import graph_pb2

    return text_format.Parse(GRAPH_TEXT, graph_pb2.GraphDef())


def test_colocation_and_a_control_edge_across_tasks():
    p = partition(small_graph())
    assert p.placement["w/Assign"] == PS          # no device, loc:@w
    assert p.placement["init"] == W0
    # y's control input ^w/Assign crosses ps -> worker 0: an empty float sent after it
    tr = next(t for t in p.transfers if t.src == "^w/Assign")
    send = node(p.graphs[PS], tr.send)
    dummy = node(p.graphs[PS], send.input[0])
    assert dummy.op == "Const" and list(dummy.input) == ["^w/Assign"]
    assert [d.size for d in dummy.attr["value"].tensor.tensor_shape.dim] == [0]
    y = node(p.graphs[W0], "y")
    ident = y.input[2][1:]
    assert node(p.graphs[W0], ident).op == "Identity"
    assert list(node(p.graphs[W0], ident).input) == [tr.recv]


def test_a_loop_spanning_tasks_gets_a_control_loop_on_each():
    path, _ = data("loop")
    p = partition(path)
    frame = "while/while_context"
    assert set(p.control_loops) == {(frame, W0), (frame, W1)}
    w1 = p.graphs[W1]
    merge = p.control_loops[(frame, W1)]
    sw = next(n for n in w1.node if n.op == "Switch" and n.input[0] == merge)
    # its predicate is the loop's LoopCond, received from worker 0
    pred = node(w1, sw.input[1])
    assert pred.op == "_Recv" and pred.attr["_src"].s == b"while/LoopCond"
    # every Recv inside the frame runs once per iteration: it hangs off the Merge
    in_frame = [tr for tr in p.transfers if tr.frame == frame and tr.recv_task == W1]
    assert in_frame
    for tr in in_frame:
        assert f"^{merge}" in node(w1, tr.recv).input


def test_parse_task():
    assert parse_task("/job:ps/task:1/device:CPU:0") == Task("ps", 0, 1)
    assert parse_task("/job:worker/replica:2/task:3") == Task("worker", 2, 3)
    assert parse_task("/device:CPU:0") is None and parse_task("") is None


@pytest.mark.parametrize("optimize", ["off", "eager"])
def test_a_partition_alone_runs_with_its_recvs_fed(optimize):
    path, d = data("cond")
    p = partition(path)
    w1 = p.graphs[W1]
    feeds = {tr.recv: d["x"] if tr.src == "cond/Square/Switch:1" else np.zeros(0, np.float32)
             for tr in p.transfers if tr.recv_task == W1}
    assert len(feeds) == 2        # x's untaken-or-not value, and switch_t's control edge
    out = next(n.name for n in w1.node if n.op == "_Send")
    # eager: the optimizer must not make the fed control _Recv run (identity_removal)
    with Session(w1, optimize=optimize) as s:
        # the true branch (x^2 + 1) on worker 1 with what it receives fed
        (y,) = s.run([node(w1, out).input[0]], feeds)
        np.testing.assert_allclose(y, d["x"] ** 2 + 1)
        with pytest.raises(FailedPreconditionError, match="partitioned step"):
            s.run([node(w1, out).input[0]])


def test_cli_partition_writes_valid_files(tmp_path):
    path, _ = data("loop")
    r = CliRunner().invoke(cli, ["partition", path, "-o", str(tmp_path / "p"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["default_task"] == "/job:worker/replica:0/task:0"
    files = sorted(os.listdir(tmp_path / "p"))
    assert files == ["ps_0.pbtxt", "worker_0.pbtxt", "worker_1.pbtxt"]
    assert sum(x["sends"] for x in doc["partitions"]) == len(doc["transfers"])
    assert {c["task"] for c in doc["control_loops"]} == {W0.name, W1.name}
    r = CliRunner().invoke(cli, ["validate", *(str(tmp_path / "p" / f) for f in files)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["viz", str(tmp_path / "p" / "worker_1.pbtxt"), "-o",
                                 str(tmp_path / "w1.dot")])
    assert r.exit_code == 0, r.output


# --- runs on Ray ------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    return request.param


def single(path):
    return Session(path)


def test_cond_with_branches_on_other_tasks(ray_local, threads):
    path, d = data("cond")
    with Session(path, cluster="ray", threads=threads) as s, single(path) as one:
        for p in (True, False):
            feeds = {"x": d["x"], "p": p}
            got = s.run("out", feeds)
            np.testing.assert_allclose(got, d[f"out_{p}"], rtol=1e-6)
            np.testing.assert_array_equal(got, one.run("out", feeds))
        # the untaken branch's value crosses dead: fetched on its task, it is dead there
        part = s.partitioning
        branch = next(n for n in part.graphs[W1].node if n.op == "AddV2").name
        with pytest.raises(InvalidArgumentError, match="dead"):
            s.run(branch, {"x": d["x"], "p": False})
        np.testing.assert_allclose(s.run(branch, {"x": d["x"], "p": True}),
                                   d["x"] ** 2 + 1)


def test_while_loop_with_a_body_on_two_tasks(ray_local, threads):
    path, d = data("loop")
    with Session(path, cluster="ray", threads=threads) as s, single(path) as one:
        s.run([], targets=["init"])
        one.run([], targets=["init"])
        for n in (0, 1, 5):
            feeds = {"x0": d["x0"], "n": n}
            got = s.run("out", feeds)
            np.testing.assert_allclose(got, d[f"out_{n}"], rtol=1e-6)
            np.testing.assert_array_equal(got, one.run("out", feeds))


def test_task_sessions_keep_their_optimized_partitions_in_a_granted_directory(ray_local,
                                                                              tmp_path):
    """plan_cache_dir reaches every task's Session (executor/plan_cache.py): with eager
    optimization each task stores its partition's optimized graph there; a second cluster
    Session over the same directory gives the same values and adds no file."""
    path, d = data("loop")
    feeds = {"x0": d["x0"], "n": 5}
    with Session(path, cluster="ray", threads=1, optimize="eager",
                 plan_cache_dir=tmp_path) as s:
        s.run([], targets=["init"])
        first = s.run("out", feeds)
    np.testing.assert_allclose(first, d["out_5"], rtol=1e-6)
    stored = sorted(p.name for p in tmp_path.iterdir())
    assert stored and all(name.endswith(".pb") for name in stored)
    with Session(path, cluster="ray", threads=1, optimize="lazy",
                 plan_cache_dir=tmp_path) as s:
        s.run([], targets=["init"])
        np.testing.assert_array_equal(s.run("out", feeds), first)
    assert sorted(p.name for p in tmp_path.iterdir()) == stored


def test_parameter_server_mlp_trains_over_steps(ray_local, threads):
    path, d = data("ps_mlp")
    feeds = {"x": d["x"], "y": d["y"]}
    with Session(path, cluster="ray", threads=threads) as s, single(path) as one:
        s.run([], targets=["init"])
        one.run([], targets=["init"])
        losses = [s.run("loss", feeds, targets=["train"]) for _ in range(6)]
        local = [one.run("loss", feeds, targets=["train"]) for _ in range(6)]
        np.testing.assert_allclose(losses, d["loss"], rtol=2e-6)
        np.testing.assert_allclose(losses, local, rtol=1e-6)
        # the variables live on the ps task across steps and runs
        for k in ("w1", "b1", "w2", "b2"):
            np.testing.assert_allclose(s.run(k), d[f"{k}_final"], rtol=1e-5, atol=1e-7)


def _wait_running(sess, task):
    """Until ``task``'s actor is inside a step (a condition, not a sleep)."""
    import time

    import ray

    end = time.monotonic() + 120
    while ray.get(sess.actor(task).running.remote()) == 0:
        assert time.monotonic() < end, "the step never started on " + task
        time.sleep(0.05)


def _in_thread(fn):
    box = {}

    def go():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=go)
    t.start()
    return t, box


def test_a_task_killed_during_a_step_fails_it_and_restarts(ray_local):
    import ray

    with Session(small_graph(), cluster="ray", threads=1) as s:
        s.run([], targets=["init"])
        assert s.run("y") == 6.0
        # "blocked" waits on the ps's dequeue of an empty queue; worker 0 waits on its Recv
        t, box = _in_thread(lambda: s.run("blocked"))
        _wait_running(s, PS.name)
        ray.kill(s.actor(PS.name))
        t.join(120)
        err = box.get("error")
        assert isinstance(err, UnavailableError), box
        assert "/job:ps/replica:0/task:0" in str(err) and "initialis" in str(err)
        # the next run starts the task afresh: its variable needs its initializer again
        with pytest.raises(FailedPreconditionError):
            s.run("y")
        s.run([], targets=["init"])
        assert s.run("y") == 6.0


def test_deadline_and_cancel_reach_every_task(ray_local):
    with Session(small_graph(), cluster="ray", threads=1) as s:
        s.run([], targets=["init"])
        with pytest.raises(DeadlineExceededError):
            s.run("blocked", timeout=1.0)
        assert s.run("y") == 6.0          # every task is free again
        t, box = _in_thread(lambda: s.run("blocked"))
        _wait_running(s, PS.name)
        s.cancel()
        t.join(120)
        assert isinstance(box.get("error"), CancelledError), box
        assert s.run("y") == 6.0


def test_cli_run_cluster(ray_local, tmp_path):
    import ray

    path, d = data("ps_mlp")
    np.save(tmp_path / "x.npy", d["x"])
    np.save(tmp_path / "y.npy", d["y"])
    args = ["run", path, "--cluster", "ray", "--init", "init", "--target", "train",
            "--steps", "6", "--fetch", "loss", "--feed",
            f"x=@{tmp_path / 'x.npy'},y=@{tmp_path / 'y.npy'}", "--json", "--threads", "1"]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.output
    # --steps 6 prints the loss computed in the 6th step (before its update)
    np.testing.assert_allclose(json.loads(r.output)["fetches"][0]["value"], d["loss"][-1],
                               rtol=2e-6)
    addr = ray.get_runtime_context().gcs_address
    env = dict(os.environ, RAY_ENABLE_UV_RUN_RUNTIME_ENV="0")
    p = subprocess.run([sys.executable, "-m", "dfg.cli.main", *args, "--address", addr],
                       capture_output=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    np.testing.assert_allclose(json.loads(p.stdout)["fetches"][0]["value"], d["loss"][-1],
                               rtol=2e-6)
    p = subprocess.run([sys.executable, "-m", "dfg.cli.main", "run", path, "--fetch", "loss",
                        "--address", addr], capture_output=True, env=env, timeout=600)
    assert p.returncode == 2 and b"--address needs --cluster" in p.stderr


def test_nested_loops_with_the_inner_body_on_another_task(ray_local, threads):
    path, d = data("nested")
    p = partition(path)
    # worker 1 has only inner-loop nodes: it gets the outer frame's control loop too, and
    # enters its inner one from it
    outer, inner = "while/while_context", "while/while/while_context"
    assert {(outer, W1), (inner, W1)} <= set(p.control_loops)
    with Session(path, cluster="ray", threads=threads) as s, single(path) as one:
        for n, m in ((2, 3), (3, 0), (0, 2)):
            feeds = {"x0": d["x0"], "n": n, "m": m}
            got = s.run("out", feeds)
            np.testing.assert_allclose(got, d[f"out_{n}_{m}"], rtol=1e-6)
            np.testing.assert_array_equal(got, one.run("out", feeds))


def test_a_plan_with_a_recv_runs_node_by_node():
    # a _Recv completes later (executor/asyncop.py): no compiled program may call it
    path, _ = data("loop")
    p = partition(path)
    w1 = p.graphs[W1]
    send = next(n.name for n in w1.node if n.op == "_Send")
    with Session(w1, programs="always") as s:
        plan = s.plan([], [], [send])
        assert plan.has_async and plan.has_control_flow
        assert plan.program is None
        assert all(lay.program is None for lay in plan.frames.values())


@pytest.mark.parametrize("host", [False, True], ids=["Send", "HostSend"])
def test_partitions_in_threads_meet_through_one_mailbox(host):
    """The kernels and the async hook without Ray: each partition of the cond in its own
    Session and thread, one in-process mailbox (cluster.Mailbox) as their rendezvous."""
    from dfg.executor.distributed.cluster import Mailbox

    path, d = data("cond")
    p = partition(path)
    box = Mailbox()

    class Rendezvous:
        def send(self, key, dst_device, value, is_dead):
            box.put(7, key, value, is_dead)

        def recv(self, key, cb):
            box.get(7, key, cb)

    for gd in p.graphs.values():
        for n in gd.node:
            if host and n.op in ("_Send", "_Recv"):
                n.op = "_HostSend" if n.op == "_Send" else "_HostRecv"
    for pv in (True, False):
        runs = []
        for t, gd in p.graphs.items():
            sends = [n.name for n in gd.node if n.op in SEND_OPS]
            fetch = ["out"] if t == W0 else []
            feeds = {"x": d["x"], "p": pv} if t == W0 else {}

            def go(gd=gd, fetch=fetch, feeds=feeds, sends=sends):
                with Session(gd, threads=1) as s:
                    return s.run(fetch, feeds, targets=sends, timeout=60,
                                 rendezvous=Rendezvous())

            runs.append((t, *_in_thread(go)))
        for t, th, box_ in runs:
            th.join(120)
            assert "error" not in box_, (t, box_)
        out = next(b["value"] for t, _th, b in runs if t == W0)
        np.testing.assert_allclose(out[0], d[f"out_{pv}"], rtol=1e-6)


@pytest.mark.parametrize("case", ["cond_nested", "while_with_cond", "tensor_array", "scan",
                                  "error_unfed_placeholder"])
def test_conformance_graphs_split_node_by_node_over_two_tasks(ray_local, case):
    """TF's v1 conformance cases, every other node on the other worker (the worst split):
    their recorded TF values still come out. Covers deadness through the Identity after a
    control edge's _Recv (the optimizer must keep it), TensorArrays (a resource's ops
    follow it to its task) and a task's error reaching the caller as TF's class."""
    sys.path.insert(0, os.path.dirname(__file__))
    from conformance import assert_close, load_case

    from dfg.graphdef.io import load_graphdef

    d = __import__("pathlib").Path(os.path.dirname(__file__)) / "data" / "conformance" / case
    spec = load_case(d)
    gd = load_graphdef(d / "graph.pbtxt")
    for i, nd in enumerate(gd.node):
        nd.device = f"/job:worker/task:{i % 2}"
    with Session(gd, cluster="ray", threads=1) as s:
        for i, step in enumerate(spec["steps"]):
            feed = {k: np.load(d / v, allow_pickle=False) for k, v in step["feed"].items()}
            if step["expect_error"]:
                with pytest.raises(OpError) as info:
                    s.run(step["fetch"], feed, targets=step["target"], timeout=120)
                assert info.value.tf_name == step["expect_error"], info.value
                continue
            out = s.run(step["fetch"], feed, targets=step["target"], timeout=120)
            for name, value in zip(step["fetch"], out):
                want = np.load(d / step["expect"][name], allow_pickle=False)
                assert_close(value, want, spec["rtol"], spec["atol"], f"step {i} {name}")


_NICENESS_CHILD = """
import json, os, sys
import ray
from dfg.executor import Session

with Session(sys.argv[1], cluster="ray", threads=1) as s:   # starts its own local Ray
    @ray.remote
    def niceness():
        return os.nice(0)

    print(json.dumps({"driver": os.nice(0), "worker": ray.get(niceness.remote())}))
"""


def test_the_ray_dfg_starts_runs_its_workers_at_the_drivers_priority():
    # Ray's default lowers its workers' priority by 15; beside two busy processes such a
    # worker gets a few percent of a core. The child starts nicer than this process, so the
    # worker's niceness must be the child's, not this process's nor the child's plus 15.
    pytest.importorskip("ray")
    path, _ = data("ps_mlp")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_worker_niceness")}
    p = subprocess.run([sys.executable, "-c", _NICENESS_CHILD, path], capture_output=True,
                       env=env, timeout=600, preexec_fn=lambda: os.nice(2))
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    got = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert got["driver"] == os.nice(0) + 2
    assert got["worker"] == got["driver"]
