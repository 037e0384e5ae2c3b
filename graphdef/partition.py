"""Partition a GraphDef by task, as TensorFlow's graph partitioner does for its distributed
runtime (tensorflow/core/graph/graph_partition.cc; this is our own code after its design).

Each node runs on the task its ``device`` names (``/job:J/replica:R/task:T``; missing replica
or task mean 0). A node without a task goes where its colocation group goes (``_class:
loc:@x``: x's task), else to the *default task*: the caller's, or ``/job:worker/.../task:0``
when some node names job ``worker`` (where a TF1 client's master places unplaced ops), else
the first task any node names in graph order. As TensorFlow's placer does, a node whose input
is a ref or a resource handle runs with that input's producer (an Assign with its variable, a
TensorArray's ops with the TensorArray), whatever its own device says. As TensorFlow does
before partitioning, control-flow nodes move next to their data (Switch to its data input,
Exit to its input, a non-ref Enter and NextIteration to their first consumer), so fewer
values cross tasks.

Every edge between tasks becomes a ``_Send`` on the source task and a ``_Recv`` on the
destination, one pair per distinct tensor and destination task (a ref-typed tensor gets a
pair per consumer, read only once the consumer's other inputs are ready, as TensorFlow's
AddReadControl does). Both carry TensorFlow's attrs: ``tensor_name`` (``edge_<k>_<src>``),
``send_device``, ``send_device_incarnation``, ``recv_device``, ``client_terminated``. A
control edge sends an empty float tensor from a dummy ``Const`` run after the source; the
destination waits on an ``Identity`` of its ``_Recv``.

While loops that span tasks get *control loops* (TensorFlow's AddControlFlow): on every task
that has nodes of frame F (or Enters into it), ``Enter -> Merge -> Switch(pred) ->
NextIteration -> Merge`` of dummy floats, whose predicate is the frame's ``LoopCond`` (sent
to the task like any value). Its Merge fires once per iteration, including the last, so a
``_Recv`` of a tensor crossing inside F takes a control edge from it and runs exactly once
per iteration in the right frame and iteration; the ``_Send`` side runs once per iteration
too (dead or alive: the executor runs Send/Recv on dead inputs and sends them as dead). A
nested frame's control loop enters from its parent frame's control loop on the same task.
TensorFlow adds control loops only on tasks receiving an edge inside F; we add one on every
task with nodes of F, so a task whose loop nodes see only loop invariants also iterates.

Function libraries are copied whole into every partition: a call runs on its node's task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as D
from .errors import InvalidGraphError
from .frames import ENTER_OPS, EXIT_OPS, NEXT_ITERATION_OPS, ROOT, SWITCH_OPS, analyze_frames
from .graph import CONTROL_SLOT, Graph
from .op_sets import RECV_OPS, SEND_OPS  # noqa: F401 (re-exported: partitions' op names)

# TensorFlow's send_device_incarnation identifies one life of a device; a dfg task's steps
# are told apart by their step id in the rendezvous key, so every partition says 1.
INCARNATION = 1

_TASK_RE = re.compile(r"/job:([A-Za-z][A-Za-z0-9_]*)(?:/replica:(\d+))?(?:/task:(\d+))?")


@dataclass(frozen=True, order=True)
class Task:
    """One task of a cluster: ``/job:J/replica:R/task:T``."""

    job: str
    replica: int = 0
    task: int = 0

    @property
    def name(self) -> str:
        return f"/job:{self.job}/replica:{self.replica}/task:{self.task}"

    @property
    def device(self) -> str:
        return self.name + "/device:CPU:0"

    @property
    def stem(self) -> str:
        """The partition's file stem: ``<job>_<task>`` (``<job>_r<replica>_<task>`` when the
        replica is not 0)."""
        return (f"{self.job}_{self.task}" if self.replica == 0
                else f"{self.job}_r{self.replica}_{self.task}")

    def __str__(self) -> str:
        return self.name


def parse_task(device: str) -> Task | None:
    """The task a device string names, or None when it names no job."""
    m = _TASK_RE.search(device or "")
    if m is None:
        return None
    return Task(m.group(1), int(m.group(2) or 0), int(m.group(3) or 0))


@dataclass(frozen=True)
class Transfer:
    """One ``_Send``/``_Recv`` pair."""

    src: str             # the tensor sent ("node:slot"), or "^node" for a control edge
    send_task: Task
    recv_task: Task
    send: str            # the _Send node (in send_task's partition)
    recv: str            # the _Recv node (in recv_task's partition)
    tensor_name: str     # the rendezvous name both carry
    frame: str           # the while-loop frame the value crosses in ("" = root)


@dataclass
class Partitioning:
    """The result of :func:`partition`: one GraphDef per task and the pairs joining them."""

    default_task: Task
    placement: dict[str, Task]          # node of the original graph -> its task
    graphs: dict[Task, Any]             # task -> its partition (GraphDef)
    transfers: list[Transfer] = field(default_factory=list)
    control_loops: dict[tuple[str, Task], str] = field(default_factory=dict)  # -> Merge

    @property
    def tasks(self) -> list[Task]:
        return sorted(self.graphs)

    def recvs_of(self, tensor: str) -> dict[Task, str]:
        """Task -> the _Recv of ``tensor`` ("node:slot") there, for every task receiving it."""
        return {t.recv_task: t.recv for t in self.transfers if t.src == tensor}


def default_task_of(graph: Graph) -> Task:
    """The task unplaced nodes go to (see the module docstring)."""
    tasks = [t for t in (parse_task(n.device) for n in graph.nodes) if t is not None]
    workers = sorted(t for t in tasks if t.job == "worker")
    if workers:
        return Task("worker", workers[0].replica, 0) if Task(
            "worker", workers[0].replica, 0) in workers else workers[0]
    return tasks[0] if tasks else Task("localhost")


def place(graph: Graph, default_task: Task | None = None) -> tuple[dict[str, Task], Task]:
    """Each node's task (devices, colocation, the default task) before control-flow moves."""
    default = default_task or default_task_of(graph)
    own = {n.name: parse_task(n.device) for n in graph.nodes}
    placement: dict[str, Task] = {}

    def resolve(name: str, seen: tuple = ()) -> Task | None:
        if name in placement:
            return placement[name]
        node = graph.get(name)
        if node is None or name in seen:
            return None
        t = None
        cls = node.attr["_class"].list.s if "_class" in node.attr else []
        for c in cls:
            c = c.decode("utf-8", "replace")
            if c.startswith("loc:@"):
                t = resolve(c[5:], seen + (name,))
                if t is not None:
                    break
        return t or own.get(name)

    for n in graph.nodes:
        placement[n.name] = resolve(n.name) or default
    _colocate_ref_and_resource_edges(graph, placement)
    return placement, default


def _colocate_ref_and_resource_edges(graph: Graph, placement: dict[str, Task]) -> None:
    """A node taking a ref or a resource handle runs where that ref or resource lives, as
    TensorFlow's placer colocates the two ends of such an edge (an Assign with its variable,
    a TensorArray's reads and writes with the TensorArray): the state is in one process."""
    from dfg.graphdef.opdefs.registry import SignatureError, registry

    reg = registry()
    for n in graph.topological_order():
        if not n.inputs:
            continue
        try:
            types = reg.input_types(n.proto)
        except (SignatureError, KeyError):
            continue
        for (src, _slot), t in zip(n.inputs, types):
            if (D.is_ref(t) or D.base(t) == D.DT_RESOURCE) and src in placement:
                placement[n.name] = placement[src]
                break


def _colocate_control_flow(graph: Graph, placement: dict[str, Task], ref_out: Any) -> None:
    """TensorFlow's OptimizeControlFlowColocation: Switch with its data input, Exit with its
    input, non-ref Enter and NextIteration with their first data consumer."""
    for n in graph.nodes:
        if n.op in SWITCH_OPS and n.inputs:
            placement[n.name] = placement[n.inputs[0][0]]
    for n in graph.nodes:
        if n.op in EXIT_OPS and n.inputs:
            placement[n.name] = placement[n.inputs[0][0]]
    for n in graph.nodes:
        if (n.op in ENTER_OPS and n.inputs and not ref_out(*n.inputs[0])) \
                or n.op in NEXT_ITERATION_OPS:
            for e in n.out_edges:
                if e.dst_input != CONTROL_SLOT:
                    placement[n.name] = placement[e.dst]
                    break


def partition(graph: Any, default_task: Task | str | None = None) -> Partitioning:
    """Split ``graph`` (a Graph, GraphDef or path) into one GraphDef per task."""
    from dfg.graphdef.io import load_graph
    from dfg.graphdef.opdefs.registry import SignatureError, registry

    g: Graph = load_graph(graph)
    gd = g.graph_def
    if isinstance(default_task, str):
        t = parse_task(default_task)
        if t is None:
            raise InvalidGraphError(f"default task '{default_task}' names no job: expected "
                                    "/job:J/replica:R/task:T")
        default_task = t
    placement, default = place(g, default_task)
    reg = registry()
    out_types: dict[str, list[int] | None] = {}

    def types(name: str) -> list[int] | None:
        if name not in out_types:
            try:
                out_types[name] = reg.output_types(g.node(name).proto)
            except (SignatureError, KeyError):
                out_types[name] = None
        return out_types[name]

    def out_type(name: str, slot: int) -> int:
        ts = types(name)
        if ts is None or slot >= len(ts):
            node = g.node(name)
            raise InvalidGraphError(f"cannot tell the dtype of output {slot} to send it to "
                                    "another task (unknown op or bad attrs)",
                                    node=name, op=node.op)
        return ts[slot]

    def ref_out(name: str, slot: int) -> bool:
        ts = types(name)
        return bool(ts and slot < len(ts) and D.is_ref(ts[slot]))

    _colocate_control_flow(g, placement, ref_out)
    fa = analyze_frames(g)
    node_frame = fa.node_frame

    def in_frame(n: Any) -> str:
        return node_frame.get(n.name, ROOT)

    def out_frame(n: Any) -> str:
        if n.op in ENTER_OPS:
            return n.attr["frame_name"].s.decode("utf-8", "replace")
        f = node_frame.get(n.name, ROOT)
        if n.op in EXIT_OPS:
            return (fa.frames[f].parent or ROOT) if f in fa.frames else ROOT
        return f

    from dfg.schemas import graph_pb2

    parts: dict[Task, Any] = {}

    def part(task: Task) -> Any:
        p = parts.get(task)
        if p is None:
            p = parts[task] = graph_pb2.GraphDef()
            p.versions.CopyFrom(gd.versions)
            if gd.HasField("library"):
                p.library.CopyFrom(gd.library)
        return p

    for t in sorted(set(placement.values())):
        part(t)
    result = Partitioning(default, dict(placement), parts)

    # --- control loops for frames on more than one task --------------------------------------
    frame_tasks: dict[str, set[Task]] = {}
    for n in g.nodes:
        f = in_frame(n)
        if f != ROOT:
            frame_tasks.setdefault(f, set()).add(placement[n.name])
        if n.op in ENTER_OPS:
            frame_tasks.setdefault(out_frame(n), set()).add(placement[n.name])
    spanning = {f for f, ts in frame_tasks.items() if len(ts) > 1}
    # a spanning frame's ancestors need control loops on its tasks too (nesting)
    pending: list[tuple[str, Task]] = []
    for f in sorted(spanning):
        for t in sorted(frame_tasks[f]):
            pending.append((f, t))
    new_nodes: list[tuple[Task, Any]] = []   # nodes added to partitions (control loops)
    extra_edges: list[tuple[str, int, Any, str]] = []  # (src, slot, dst NodeDef, frame)

    def add(task: Task, name: str, op: str, inputs: list[str], **attrs: Any) -> Any:
        nd = part(task).node.add()
        nd.name, nd.op, nd.device = name, op, task.device
        nd.input.extend(inputs)
        for k, v in attrs.items():
            _set_attr(nd.attr[k], v)
        new_nodes.append((task, nd))
        return nd

    def control_loop(frame: str, task: Task) -> str:
        key = (frame, task)
        if key in result.control_loops:
            return result.control_loops[key]
        fr = fa.frames[frame]
        if not fr.loop_conds:
            raise InvalidGraphError(f"while-loop frame '{frame}' spans tasks but has no "
                                    "LoopCond (a cross-task loop needs its predicate)")
        prefix = f"{frame}/_cloop_{task.stem}"
        parent = fr.parent or ROOT
        if parent == ROOT:
            src = add(task, f"{prefix}/dummy", "Const", [], dtype=("type", D.DT_FLOAT),
                      value=("empty_float", None)).name
        else:
            src = control_loop(parent, task)
        pi = fr.parallel_iterations or 10
        add(task, f"{prefix}/enter", "Enter", [src], T=("type", D.DT_FLOAT),
            frame_name=("s", frame), is_constant=("b", False),
            parallel_iterations=("i", pi))
        merge = add(task, f"{prefix}/merge", "Merge", [f"{prefix}/enter", f"{prefix}/next"],
                    T=("type", D.DT_FLOAT), N=("i", 2))
        sw = add(task, f"{prefix}/switch", "Switch", [merge.name],
                 T=("type", D.DT_FLOAT))
        add(task, f"{prefix}/next", "NextIteration", [f"{sw.name}:1"],
            T=("type", D.DT_FLOAT))
        result.control_loops[key] = merge.name
        # the predicate: the frame's LoopCond, crossing tasks like any in-frame value
        extra_edges.append((fr.loop_conds[0], 0, sw, frame))
        return merge.name

    for f, t in pending:
        control_loop(f, t)

    # --- the original nodes, their inputs rewired through _Send/_Recv -------------------------
    counter = [0]
    dup: dict[tuple[str, int, Task], str] = {}   # (src, slot or -1, dst task) -> recv output

    def new_name(base: str) -> str:
        counter[0] += 1
        return f"{base}/_{counter[0]}"

    def transfer(src: str, slot: int, dst_task: Task, frame: str) -> tuple[str, str]:
        """A _Send/_Recv pair for src:slot (slot -1: control) to dst_task; returns the
        input string the consumer uses and the _Recv's name."""
        src_task = placement[src]
        k = len(result.transfers)
        tensor_name = f"edge_{k}_{src}"
        if slot == CONTROL_SLOT:
            dummy = add(src_task, new_name(f"{src}/ctrl"), "Const", [f"^{src}"],
                        dtype=("type", D.DT_FLOAT), value=("empty_float", None))
            send_from, dtype = dummy.name, D.DT_FLOAT
        else:
            send_from = src if slot == 0 else f"{src}:{slot}"
            dtype = D.base(out_type(src, slot))
        common = dict(tensor_name=("s", tensor_name), send_device=("s", src_task.device),
                      send_device_incarnation=("i", INCARNATION),
                      recv_device=("s", dst_task.device), client_terminated=("b", False),
                      _src=("s", src))
        send = add(src_task, new_name(src), "_Send", [send_from], T=("type", dtype),
                   **common)
        recv_inputs = []
        if frame != ROOT:
            recv_inputs.append(f"^{control_loop(frame, dst_task)}")
        recv = add(dst_task, new_name(src), "_Recv", recv_inputs,
                   tensor_type=("type", dtype), **common)
        out = recv.name
        if slot == CONTROL_SLOT:
            out = add(dst_task, new_name(src), "Identity", [recv.name],
                      T=("type", D.DT_FLOAT)).name
        result.transfers.append(Transfer(
            f"^{src}" if slot == CONTROL_SLOT else f"{src}:{slot}", src_task, dst_task,
            send.name, recv.name, tensor_name, frame))
        return out, recv.name

    def rewired(src: str, slot: int, dst_task: Task, frame: str, ref: bool
                ) -> tuple[str, str | None]:
        """The input string for src:slot on dst_task, and the _Recv made for a ref edge."""
        if placement[src] == dst_task:
            return (f"^{src}" if slot == CONTROL_SLOT else src if slot == 0
                    else f"{src}:{slot}"), None
        key = (src, slot, dst_task)
        if not ref and key in dup:
            out = dup[key]
        else:
            out, recv = transfer(src, slot, dst_task, frame)
            if ref:
                return out, recv
            dup[key] = out
        return (f"^{out}" if slot == CONTROL_SLOT else out), None

    for n in g.nodes:
        task = placement[n.name]
        nd = part(task).node.add()
        nd.CopyFrom(n.proto)
        nd.device = task.device
        del nd.input[:]
        ref_recvs: list[str] = []
        local: list[str] = []
        for src, slot in n.inputs:
            ref = placement[src] != task and ref_out(src, slot)
            inp, recv = rewired(src, slot, task, out_frame(g.node(src)), ref)
            nd.input.append(inp)
            if recv is not None:
                ref_recvs.append(recv)
            else:
                local.append(inp.split(":")[0])
        controls = []
        for src in n.control_inputs:
            inp, _ = rewired(src, CONTROL_SLOT, task, out_frame(g.node(src)), False)
            controls.append(inp)
            local.append(inp[1:])
        nd.input.extend(controls)
        # a ref edge reads the variable when the consumer could run: after its other inputs
        for r in ref_recvs:
            rn = next(x for x in part(task).node if x.name == r)
            rn.input.extend(f"^{x}" for x in local if f"^{x}" not in rn.input)

    for src, slot, dst, frame in extra_edges:
        task = parse_task(dst.device)
        inp, _ = rewired(src, slot, task, frame, False)
        dst.input.append(inp)
    return result


def _set_attr(av: Any, spec: tuple[str, Any]) -> None:
    kind, v = spec
    if kind == "type":
        av.type = v
    elif kind == "s":
        av.s = v.encode()
    elif kind == "i":
        av.i = v
    elif kind == "b":
        av.b = v
    elif kind == "empty_float":   # a float tensor of shape [0]: the dummy TF sends
        av.tensor.dtype = D.DT_FLOAT
        av.tensor.tensor_shape.dim.add().size = 0
    else:
        raise ValueError(kind)
