"""``dfg partition``: split a graph by task into one GraphDef per task."""

from __future__ import annotations

import os

import click

from dfg.graphdef.errors import UsageError

from .options import emit_json, graph_argument, json_option, load

FORMATS = ("pbtxt", "pb")


@click.command()
@graph_argument
@click.option("-o", "--output", "out_dir", required=True, metavar="DIR",
              help="Directory for the partitions (made if missing): DIR/<job>_<task>.pbtxt.")
@click.option("--default-task", default=None, metavar="TASK",
              help="Task for nodes whose device names none, e.g. /job:worker/task:0 "
                   "(default: worker 0 if the graph has a worker job, else the first task "
                   "named).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="pbtxt",
              show_default=True, help="File format of the partitions.")
@json_option
def partition(graph: str, out_dir: str, default_task: str | None, fmt: str,
              as_json: bool) -> None:
    """Split GRAPH by the task of each node's device, as TensorFlow's distributed runtime
    does, and write one GraphDef per task to DIR.

    A node runs on the task its device names (/job:J/replica:R/task:T); a node without
    one follows its colocation hint (_class "loc:@x": x's task), else goes to the default
    task (see --default-task). Every edge between tasks becomes a _Send on the producing
    task and a _Recv on the consuming one (one pair per tensor and receiving task), with
    TensorFlow's attrs (tensor_name, send_device, send_device_incarnation, recv_device,
    client_terminated); a control edge sends an empty tensor. A while loop spanning tasks
    gets a control loop (Enter, Merge, Switch on the loop's predicate, NextIteration, named
    <frame>/_cloop_<task>/...) on each of its tasks, so each _Recv inside it runs once per
    iteration. Each partition passes `dfg validate` and can be drawn with `dfg viz`; running
    a partition alone needs its _Recv outputs fed (`dfg run --cluster ray GRAPH` runs them
    all). Files are written atomically, only once every partition is built.

    \b
    Files: DIR/<job>_<task>.pbtxt (.pb with --format pb); <job>_r<replica>_<task> when the
    replica is not 0.
    JSON (--json; stable):
      {"default_task": str,
       "partitions": [{"task": str, "file": str, "nodes": int, "sends": int, "recvs": int}],
       "transfers": [{"tensor": "node:slot" or "^node", "from": task, "to": task,
                      "send": node, "recv": node, "tensor_name": str, "frame": str}],
       "control_loops": [{"frame": str, "task": str, "merge": node}]}
    Exit status: 0 written, 1 the graph cannot be partitioned (a loop spanning tasks without
    a LoopCond, an output whose dtype is unknown), 2 unreadable GRAPH or bad usage.

    \b
    Examples:
      dfg partition ps_mlp.pbtxt -o parts && dfg validate parts/*.pbtxt
      dfg partition model.pb -o parts --default-task /job:worker/task:1 --json
      dfg viz parts/worker_0.pbtxt -o worker_0.svg
    """
    from dfg.graphdef.io import save_graphdef
    from dfg.graphdef.partition import RECV_OPS, SEND_OPS
    from dfg.graphdef.partition import partition as run_partition

    result = run_partition(load(graph), default_task)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"-o {out_dir}: not a directory")
    files = {t: os.path.join(out_dir, f"{t.stem}.{fmt}") for t in result.tasks}
    src = os.path.realpath(graph) if graph != "-" else None
    for path in files.values():
        if src is not None and os.path.realpath(path) == src:
            raise UsageError(f"-o {out_dir} would overwrite the input {graph}")
    os.makedirs(out_dir, exist_ok=True)
    for t in result.tasks:
        save_graphdef(result.graphs[t], files[t], fmt)
    rows = []
    for t in result.tasks:
        nodes = result.graphs[t].node
        rows.append({"task": t.name, "file": files[t], "nodes": len(nodes),
                     "sends": sum(n.op in SEND_OPS for n in nodes),
                     "recvs": sum(n.op in RECV_OPS for n in nodes)})
    if as_json:
        emit_json({
            "default_task": result.default_task.name,
            "partitions": rows,
            "transfers": [{"tensor": tr.src, "from": tr.send_task.name,
                           "to": tr.recv_task.name, "send": tr.send, "recv": tr.recv,
                           "tensor_name": tr.tensor_name, "frame": tr.frame}
                          for tr in result.transfers],
            "control_loops": [{"frame": f, "task": t.name, "merge": m}
                              for (f, t), m in sorted(result.control_loops.items())],
        })
        return
    from .options import console

    out = console()
    for r in rows:
        out.print(f"{r['file']}: {r['task']}, {r['nodes']} nodes, {r['sends']} _Send, "
                  f"{r['recvs']} _Recv", highlight=False, markup=False)
    out.print(f"{len(result.transfers)} Send/Recv pairs, "
              f"{len(result.control_loops)} control loops; nodes without a task went to "
              f"{result.default_task.name}", highlight=False, markup=False)
