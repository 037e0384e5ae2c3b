"""Immutable per-signature executor state, built once per (fetches, feeds, targets) and cached.

A ``Plan`` holds the nodes a step needs (pruned from the graph, feeds cutting it), one
``NodeItem`` per node (kernel, bound attrs, arity, out-edges, control-flow flags), the static
layout of every while-loop frame (``FrameLayout``: which items it holds, their input offsets and
pending-count template), the initial ready set and where fetched and fed tensors go. Nothing
here changes while steps run, except the plan's ``PlanStats`` (measured costs and program
decisions, with one update policy documented there).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import (
    InvalidArgumentError,
    UnimplementedError,
)
from dfg.graphdef.frames import (
    ENTER_OPS,
    EXIT_OPS,
    MERGE_OPS,
    NEXT_ITERATION_OPS,
    ROOT,
    SWITCH_OPS,
    FrameAnalysis,
)
from dfg.graphdef.graph import CONTROL_SLOT, Graph, parse_tensor_name
from dfg.graphdef.op_sets import INPUT_OPS
from dfg.graphdef.opdefs.registry import SignatureError, registry
from dfg.graphdef.shapes import input_shape

from . import blas
from .kernel_call import BoundKernel, bind, bind_attrs, context  # noqa: F401 (bind_attrs)
from .kernels import registry as kernels
from .kernels.control_flow import MERGE_INDEX  # noqa: F401 (programs read it here)

# Ops the scheduler runs without calling a kernel (``NodeItem.transfer``, from the op's
# record ``OpSpec.transfer``): FORWARD, SWITCH, MERGE (kernels/control_flow.py says what they
# do) and CONST (its value, bound at plan time: ``NodeItem.const_out``).
FORWARD, SWITCH, MERGE, CONST = (kernels.FORWARD, kernels.SWITCH, kernels.MERGE,
                                 kernels.CONST)
# How the frame propagator treats a node's outputs (NodeItem.cf_kind): in its own iteration,
# into a child frame, out to the parent frame, or into the next iteration.
# CF_PROGRAM marks a frame's loop program (programs.py), run as one pseudo node.
CF_NONE, CF_ENTER, CF_EXIT, CF_NEXT_ITERATION, CF_PROGRAM = 0, 1, 2, 3, 4
# the record of a node the plan adds itself (a loop program)
PSEUDO_SPEC = kernels.OpSpec("LoopProgram", None)


class NodeItem(BoundKernel):
    """One node of a plan: its bound kernel (``kernel_call.BoundKernel``) and where it sits in
    the plan. ``out_data`` edges are (dst item, index of the dst input in its frame's input
    array, src slot); ``out_control`` holds the control successors. Built in one place
    (``_make_item``; loop programs' pseudo nodes by ``programs._program_item`` through
    ``NodeItem.pseudo``) and not written once the plan is built: what steps learn (costs,
    program decisions) lives in the plan's ``PlanStats``."""

    __slots__ = (
        "id", "out_data", "out_control", "frame", "local_id", "in_offset",
        "num_control_inputs", "is_merge", "is_switch", "is_enter", "is_exit",
        "is_next_iteration", "is_constant_enter", "is_control_trigger", "enter_frame",
        "parallel_iterations", "fetch_slots", "shared_ctx", "transfer", "const_out", "cf_kind",
        "writes_ref", "async_start", "runs_dead",
    )

    def __init__(self, idx: int) -> None:
        self.id = idx
        self.out_data: list[tuple[NodeItem, int, int]] = []
        self.out_control: list[NodeItem] = []
        self.frame = ROOT
        self.local_id = -1
        self.in_offset = 0
        self.num_control_inputs = 0
        self.is_merge = self.is_switch = self.is_enter = self.is_exit = False
        self.is_next_iteration = self.is_constant_enter = self.is_control_trigger = False
        self.enter_frame: str | None = None
        self.parallel_iterations = 0
        self.fetch_slots: list[tuple[int, int]] = []  # (fetch index, output slot)
        self.shared_ctx: Any = None
        self.transfer = 0
        self.const_out: tuple | None = None
        self.cf_kind = CF_NONE
        self.writes_ref = False   # updates a ref variable's buffer in place (executor order)
        # asyncop.py: the kernel's start function if it may finish later (a _Recv), and
        # whether it runs on dead inputs (Send/Recv: a dead value crosses as dead)
        self.async_start: Any = None
        self.runs_dead = False

    @classmethod
    def pseudo(cls, idx: int, name: str, op: str, fn: Any, input_types: list[int],
               out_types: list[int], frame: str) -> NodeItem:
        """A node the plan adds itself (a loop program): stateful, unchecked outputs."""
        item = cls(idx)
        item.name, item.op, item.fn, item.cheap, item.attrs = name, op, fn, None, {}
        item.spec = PSEUDO_SPEC
        item.num_inputs, item.num_outputs = len(input_types), len(out_types)
        item.input_dtypes, item.out_types = list(input_types), list(out_types)
        item.out_dtypes = [None] * len(out_types)
        item.deref, item.stateful, item.size_check = (), True, None
        item.bf16_out = ()
        item.frame = frame
        return item

    def __repr__(self) -> str:
        return f"NodeItem({self.name!r}, {self.op})"


class PlanStats:
    """A plan's runtime: what steps learn about it and make for it (measured kernel costs,
    whether each program runs, programs' compiled code, whether a step ran it and what the
    optimizer did), kept apart from the plan, which is immutable once built (as TensorFlow
    keeps KernelStats apart from its ImmutableExecutorState).

    ``lock`` guards ``compiled`` (code is compiled once, by the first step that needs it);
    ``interpreted`` only grows (a lost race compiles one step later); the costs and decisions
    are written without a lock (see below).

    Update policy: a kernel's cost is an exponential average
    of its measured runs (µs; -1 until measured) that halves the gap to a faster run and
    moves a fifth of the way to a slower one, counting it at most 4x the average (``record``),
    written by whichever thread ran it (a lost update only delays a decision); a compiled
    program records its mean cost per kernel call (a plain average: one slow run counts).
    A program's mode changes with hysteresis so a plan does not flap between modes: it starts
    running as a program when every kernel is cheap by its static class or measured at most
    ``PROGRAM_ENTER_US``; it stops once its mean kernel cost (or one kernel measured by the
    interpreter) exceeds ``PROGRAM_LEAVE_US``, and comes back only when every kernel's
    average, measured node by node, falls to ``PROGRAM_ENTER_US`` again.

    BLAS products (convolutions, matmuls: ``OpSpec.blas``) do not count in a straight-line
    program while they are gated (``blas.GATED``): node by node they run one at a time too,
    each on every core (BLAS's threads, the native kernels' pool), so all node by node could
    overlap with them is cheap kernels, and it pays a scheduling trip per node for that. A
    program's mean cost leaves their last measured cost out. Measured with programs
    always/auto/never: DenseNet121 3.5/3.6/4.6 ms, NASNetMobile 5.9/6.2/7.7, ConvNeXt
    3.2/3.2/3.7, Inception-ResNet-v2 10.4/10.8/12.6."""

    PROGRAM_ENTER_US = 100.0
    PROGRAM_LEAVE_US = 400.0
    # A straight-line program kept off by its measured costs is still tried, and its step
    # time compared with node by node's (``prefer_program``): node by node pays for itself
    # only when two expensive kernels can run side by side, which costs alone do not tell.
    # With 2 threads on 2 cores, the program was the faster on every bench and zoo graph
    # (U-Net 5.0 -> 4.5 ms, ResNet-style 1.8 -> 1.7, Transformer 2.37 -> 2.25: their
    # Softmax, Erfc and convs run one after the other). The slower mode is tried again every
    # MODE_PROBE_EVERY steps, so a change of load or of inputs is followed.
    MODE_PROBE_EVERY = 32
    MODE_MARGIN = 0.97     # the program must be this much faster to be preferred
    MODE_SETTLE_RUNS = 3   # node-by-node steps before the program is first tried

    def __init__(self, num_ids: int) -> None:
        self.lock = threading.Lock()
        # program id -> its compiled code (codegen), False: it stays interpreted
        self.compiled: dict[int, Any] = {}
        self.interpreted: set[int] = set()   # straight-line programs interpreted once
        # the session's (session.py, under its lock): a step has run the plan; the run-time
        # optimizer's report; built unoptimized, its optimization due after its first run
        self.ran = False
        self.optimized: Any = None
        self.deferred = False
        self.cost_us = [-1.0] * num_ids
        # item id -> a cost set by ``pin``: measurements no longer move it
        self.pinned: dict[int, float] = {}
        self.program_on: dict[int, bool] = {}    # program item id -> current decision
        # program item id -> mean µs per kernel call in its compiled runs (EMA)
        self.program_cost: dict[int, float] = {}
        # straight-line program id -> [node-by-node step s, compiled program step s] (EMAs,
        # None until measured), and the steps the choice between them was asked for
        self.mode_s: dict[int, list[float | None]] = {}
        self.mode_asked: dict[int, int] = {}
        self.mode_runs: dict[int, int] = {}     # node-by-node steps timed

    def prefer_program(self, prog: Any) -> bool:
        """Whether a straight-line program that ``program_runs`` keeps off should run anyway,
        by measured step times (see MODE_PROBE_EVERY): False until node by node has run
        MODE_SETTLE_RUNS timed steps; then the program, to get its time; then the faster,
        and the other every MODE_PROBE_EVERY steps. Never with a kernel registered for the
        pool (cheap=False: a queue's dequeue may wait for an enqueue later in the program's
        order)."""
        times = self.mode_s.get(prog.id)
        if times is None or times[0] is None or prog.blocking_kernels():
            return False
        if times[1] is None:
            # node by node first runs a few times: each run halves the gap of a kernel's
            # cost to a faster run (``record``), so a first run's outlier (a kernel's first
            # call) settles, and the program may run by its costs alone
            return self.mode_runs.get(prog.id, 0) >= self.MODE_SETTLE_RUNS
        n = self.mode_asked[prog.id] = self.mode_asked.get(prog.id, 0) + 1
        return (times[1] < self.MODE_MARGIN * times[0]) != (n % self.MODE_PROBE_EVERY == 0)

    def record_mode(self, prog: Any, program: bool, secs: float) -> None:
        times = self.mode_s.setdefault(prog.id, [None, None])
        k = 1 if program else 0
        if not program:
            self.mode_runs[prog.id] = self.mode_runs.get(prog.id, 0) + 1
        old = times[k]
        times[k] = secs if old is None else 0.7 * old + 0.3 * secs

    def record_program(self, prog: Any, secs: float, kernel_calls: int) -> None:
        us = secs * 1e6
        serial = prog.serial_kernels() if prog.holds_serial and blas.GATED else ()
        if serial:
            us -= sum(max(0.0, self.cost_us[k.id]) for k in serial)
            kernel_calls -= len(serial)
        us = max(0.0, us) / max(1, kernel_calls)
        c = self.program_cost.get(prog.id)
        self.program_cost[prog.id] = us if c is None else 0.8 * c + 0.2 * us

    def compile_once(self, prog: Any, compile_fn: Any) -> Any:
        """``prog``'s compiled code, made by ``compile_fn(prog)`` on first use (under
        ``lock``: two steps never compile one program twice)."""
        with self.lock:
            code = self.compiled.get(prog.id)
            if code is None:
                code = self.compiled[prog.id] = compile_fn(prog)
            return code

    def pin(self, item: NodeItem, us: float) -> None:
        """Fix ``item``'s cost at ``us`` microseconds: the decisions that follow from measured
        costs (inline or pool, program or node by node) become those of a machine where it
        costs that, whatever this one measures (tests: a busy machine must not change what
        they assert; tools comparing modes)."""
        self.pinned[item.id] = us
        self.cost_us[item.id] = us

    def record(self, item: NodeItem, secs: float) -> None:
        if self.pinned and item.id in self.pinned:
            return
        c = self.cost_us[item.id]
        us = secs * 1e6
        if c < 0:
            self.cost_us[item.id] = us
        elif us <= c:
            self.cost_us[item.id] = 0.5 * (c + us)
        else:
            # Noise only ever adds time: one preempted or page-faulting run of a ~5 us
            # kernel of a GRU's loop took 15 ms in a trace here; as a plain average (a fifth
            # of it, 3000 us) it crossed PROGRAM_LEAVE_US and took ~20 samples to fall back
            # below PROGRAM_ENTER_US. A sample counts for at most 4x the average, so a kernel
            # that really got slower (larger inputs) is followed at 1.6x per sample; the
            # program's own mean cost (record_program) still notices a slow run at once.
            self.cost_us[item.id] = 0.8 * c + 0.2 * min(us, 4.0 * c + 1.0)

    def program_runs(self, prog: Any) -> bool:
        on = self.program_on.get(prog.id)
        cost = self.cost_us
        serial = prog.holds_serial and blas.GATED
        if on:
            leave = self.PROGRAM_LEAVE_US
            if self.program_cost.get(prog.id, 0.0) > leave or any(
                    cost[k.id] > leave for k in prog.kernels
                    if k.cheap is None and not (serial and k.spec.blas)):
                on = False
                self.program_cost.pop(prog.id, None)
        else:
            enter = self.PROGRAM_ENTER_US
            # a gated product must have been measured (its cost is what a program's mean
            # leaves out): the first step, node by node, measures it. A loop's heavy kernels
            # need not be: its iterations run one after the other either way, so all node by
            # node could overlap is one iteration's independent kernels, at a scheduling
            # trip per node of every iteration (an LSTM classifier's first step 21 -> 6.6 ms);
            # a program found slow (record_program) goes node by node the next step
            loop = prog.unmeasured_heavy_ok
            on = all(k.cheap or (serial and k.spec.blas and cost[k.id] >= 0) or (
                k.cheap is None and (
                cost[k.id] <= enter if cost[k.id] >= 0 else loop or not k.spec.heavy))
                for k in prog.kernels)
        self.program_on[prog.id] = on
        return on


@dataclass
class FrameLayout:
    """Static shape of one frame (by frame_name): its items and per-iteration array sizes."""

    name: str
    items: list[NodeItem] = field(default_factory=list)
    num_inputs: int = 0
    pending_template: list[int] = field(default_factory=list)
    num_enters: int = 0
    parallel_iterations: int = 10
    exits: list[NodeItem] = field(default_factory=list)
    program: Any = None   # a LoopProgram when the frame is a loop nest programs.py compiles


@dataclass
class Plan:
    items: list[NodeItem]
    frames: dict[str, FrameLayout]
    has_control_flow: bool
    initial_ready: list[NodeItem]
    fetches: list[tuple[str, int]]
    # fed tensor -> [(dst item, dst input)] that read it; fetch index -> feed name if fed
    feed_edges: dict[tuple[str, int], list[tuple[NodeItem, int]]]
    feed_dtypes: dict[tuple[str, int], int]
    feed_shapes: dict[tuple[str, int], tuple | None]
    fetched_feeds: dict[int, tuple[str, int]]
    targets: list[str]
    by_name: dict[str, NodeItem]
    num_ids: int = 0      # items plus loop programs: the size of per-run arrays by item id
    program: Any = None   # without control flow: the StraightLineProgram (programs.py)
    # per item id: data inputs as (producer, slot) by input index (None: fed or outside the
    # step) and control inputs; computed once from the out-edges
    inputs: dict[int, list[Any]] = field(default_factory=dict)
    controls: dict[int, list[NodeItem]] = field(default_factory=dict)
    stats: PlanStats = field(default_factory=lambda: PlanStats(0))

    # what changes while steps run lives in the plan's runtime (PlanStats); these read it
    @property
    def optimized(self) -> Any:
        """The run-time optimizer's report for this plan, if it ran."""
        return self.stats.optimized

    @property
    def deferred(self) -> bool:
        """Built unoptimized by a Session whose optimization waits for the signature's second
        run (session.py, optimize="lazy")."""
        return self.stats.deferred

    @property
    def ran(self) -> bool:
        """A step has run the plan (a deferred one is optimized next)."""
        return self.stats.ran

    @property
    def has_async(self) -> bool:
        """Whether a kernel of the step may finish later (asyncop.py): it runs node by node."""
        v = self.__dict__.get("_has_async")
        if v is None:
            v = self.__dict__["_has_async"] = any(it.async_start is not None
                                                  for it in self.items)
        return v

    @property
    def reads_ref_variables(self) -> bool:
        """Whether the step runs a ref variable (VariableV2), whose buffer a fetch may be."""
        v = self.__dict__.get("_reads_refs")
        if v is None:
            v = self.__dict__["_reads_refs"] = any(
                it.op in ("VariableV2", "Variable") for it in self.items)
        return v


def needed_nodes(graph: Graph, fetches: list[tuple[str, int]], feeds: set[tuple[str, int]],
                 targets: list[str]) -> set[str]:
    """Nodes the fetched tensors and targets need, through data and control edges; a fed
    tensor cuts the walk (its producer is needed only if something else needs it)."""
    from dfg.graphdef.prune import dependencies

    return dependencies(graph, fetches, feeds=feeds, targets=targets)


def build_plan(graph: Graph, frames: FrameAnalysis, fetches: list[str],
               feeds: list[str], targets: list[str], device: str = kernels.CPU,
               max_bytes: int | None = None) -> Plan:
    reg = registry()
    from dfg.graphdef.prune import resolve_target, resolve_tensor

    # NotFoundError (with a did-you-mean) for names that are not in the graph
    fetch_keys = [resolve_tensor(graph, parse_tensor_name(f), "fetch") for f in fetches]
    feed_keys = [resolve_tensor(graph, parse_tensor_name(f), "feed") for f in feeds]
    targets = [resolve_target(graph, t) for t in targets]
    feed_set = set(feed_keys)
    fetched_feeds = {i: k for i, k in enumerate(fetch_keys) if k in feed_set}
    roots = [k for i, k in enumerate(fetch_keys) if i not in fetched_feeds]
    needed = needed_nodes(graph, roots, feed_set, list(targets))

    by_node = graph.by_name
    ops = {by_node[n].op for n in needed}   # each distinct op looked up once
    missing = sorted(op for op in ops if kernels.lookup(op, device) is None
                     and kernels.lookup(op) is None)
    if missing:
        from dfg.graphdef.op_sets import no_kernel_reason

        reasons: dict[str, list[str]] = {}
        for op in missing:
            if (r := no_kernel_reason(op)) is not None:
                reasons.setdefault(r, []).append(op)
        why = "".join(f"; {', '.join(ops)}: {r}" for r, ops in reasons.items())
        raise UnimplementedError(
            f"no {device} kernel for op{'s' if len(missing) > 1 else ''} "
            + ", ".join(missing) + " (see `dfg ops --missing GRAPH`)" + why)

    # A plan's build is most of the first step a Session runs as written (a few hundred
    # nodes: about as long as the step itself), so each pass below reads a node's fields
    # once: items, their frame layouts and control-flow kinds in one; edges, deref flags,
    # pending counts and the in-edge lists in another.
    order = graph.topological_order(needed)
    items: list[NodeItem] = []
    by_name: dict[str, NodeItem] = {}
    node_frame = frames.node_frame
    layouts: dict[str, FrameLayout] = {ROOT: FrameLayout(ROOT)}  # root even if empty
    has_cf = in_frames = False
    for node in order:
        item = _make_item(node, len(items), device, max_bytes)
        items.append(item)
        by_name[node.name] = item
        frame = item.frame = node_frame.get(node.name, ROOT)
        lay = layouts.get(frame)
        if lay is None:
            lay = layouts[frame] = FrameLayout(frame)
        item.local_id = len(lay.items)
        item.in_offset = lay.num_inputs
        lay.num_inputs += item.num_inputs
        lay.items.append(item)
        if item.is_exit:
            lay.exits.append(item)
        if frame != ROOT or item.is_enter or item.is_exit or item.is_next_iteration:
            in_frames = True     # frames to check (_check_frames): not in a plain graph
        if item.is_enter or item.is_exit or item.is_next_iteration:
            item.cf_kind = (CF_ENTER if item.is_enter else CF_EXIT if item.is_exit
                            else CF_NEXT_ITERATION)
        if item.is_merge or item.is_switch or in_frames or item.runs_dead:  # Recv: deadness
            has_cf = True

    # output slot checks for fetches and feeds
    for node, slot in fetch_keys + feed_keys:
        n_out = by_name[node].num_outputs if node in by_name else _num_outputs(reg, graph, node)
        if not 0 <= slot < n_out:
            raise InvalidArgumentError(
                f"tensor '{node}:{slot}' does not exist: node has {n_out} output(s)",
                node=node, op=graph.node(node).op)

    for i, (node, _slot) in enumerate(fetch_keys):
        if i in fetched_feeds:
            continue
        item = by_name[node]
        out_frame = frames.frames[item.frame].parent if item.is_exit else item.frame
        if out_frame != ROOT:
            raise InvalidArgumentError(
                f"cannot fetch a tensor inside while-loop frame '{item.frame}'",
                node=node, op=item.op)
        item.fetch_slots.append((i, fetch_keys[i][1]))

    for item in items:
        if item.is_enter:  # an Enter is scheduled in the parent; it opens its child frame
            lay = layouts.get(item.enter_frame)
            if lay is None:
                raise InvalidArgumentError(
                    f"Enter opens frame '{item.enter_frame}' but nothing the step needs runs "
                    "in it", node=item.name, op=item.op)
            lay.num_enters += 1
            lay.parallel_iterations = item.parallel_iterations

    # edges (out-edges address the consumer's input slot directly: offset + input index);
    # fed tensors cut data edges. A non-ref input fed by a ref output is dereferenced (the
    # variable's value). TensorFlow's pending counts: see below.
    feed_edges: dict[tuple[str, int], list[tuple[NodeItem, int]]] = {k: [] for k in feed_keys}
    inputs: dict[int, list[Any]] = {}
    controls: dict[int, list[NodeItem]] = {}
    initial: list[NodeItem] = []
    for lay in layouts.values():
        lay.pending_template = [0] * len(lay.items)
    ref = D.REF_OFFSET
    for item, node in zip(items, order):
        if len(node.inputs) != item.num_inputs:
            raise InvalidArgumentError(
                f"expected {item.num_inputs} data inputs for {item.op}, found "
                f"{len(node.inputs)}", node=item.name, op=item.op)
        data_in = ctrl_in = 0
        ins: list[Any] = [None] * item.num_inputs
        ctl: list[NodeItem] = []
        deref: list[int] = []
        for e in node.in_edges:
            src = by_name.get(e.src)
            k = e.dst_input
            if k == CONTROL_SLOT:
                if src is not None:
                    src.out_control.append(item)
                    ctl.append(src)
                    ctrl_in += 1
                continue
            key = (e.src, e.src_output)
            if key in feed_set:
                feed_edges[key].append((item, k))
                continue
            if src is None:
                raise InvalidArgumentError(f"input '{e.src}:{e.src_output}' is not in the step",
                                           node=item.name, op=item.op)
            slot = e.src_output
            src.out_data.append((item, item.in_offset + k, slot))
            data_in += 1
            ins[k] = (src, slot)
            if slot >= src.num_outputs:
                raise InvalidArgumentError(
                    f"input {k} reads '{e.src}:{slot}', which does not exist: "
                    f"'{e.src}' has {src.num_outputs} output(s)", node=item.name, op=item.op)
            if src.out_types[slot] > ref and not item.input_dtypes[k] > ref:
                deref.append(k)
        item.num_control_inputs = ctrl_in
        if in_frames:
            _check_frames(item, by_name, node, frames)
        if deref:
            item.deref = tuple(deref)
            item.transfer = 0  # reading a ref variable is work for the kernel
        inputs[item.id] = ins
        if len(ctl) > 1:
            ctl.sort(key=_item_id)     # producers in plan order, as in_edges() lists them
        controls[item.id] = ctl
        if item.is_merge:
            # TensorFlow's encoding: bit 0 set while no live data input has arrived; each
            # control input counts 2. Ready at 0, or at 1 when every data input is dead.
            p = (ctrl_in << 1) | 1
            if data_in == 0 and item.num_inputs > 0:
                p &= ~1  # every data input fed
        else:
            p = data_in + ctrl_in
        layouts[item.frame].pending_template[item.local_id] = p
        if p == 0 and item.frame == ROOT:
            initial.append(item)

    feed_dtypes: dict[tuple[str, int], int] = {}
    feed_shapes: dict[tuple[str, int], tuple | None] = {}
    producer = graph.graph_def.versions.producer   # old graphs' placeholders: input_shape
    for key in feed_keys:
        node = graph.node(key[0])
        try:
            feed_dtypes[key] = D.base(reg.output_types(node.proto)[key[1]])
        except (SignatureError, KeyError, IndexError):
            feed_dtypes[key] = D.DT_INVALID
        feed_shapes[key] = (input_shape(node.proto, producer) if node.op in INPUT_OPS
                            else None)
        for dst, _k in feed_edges[key]:
            if dst.frame != ROOT:
                raise UnimplementedError(
                    f"feeding '{key[0]}:{key[1]}' into while-loop frame '{dst.frame}'",
                    node=dst.name, op=dst.op)
    # An unfed Placeholder is no error until it runs (TensorFlow's rule: one inside an
    # untaken cond branch never does); its kernel raises MissingFeedError then.

    # programs.add_programs (run by the Session) compiles loop and straight-line programs
    return Plan(items, layouts, has_cf, initial, fetch_keys, feed_edges, feed_dtypes,
                feed_shapes, fetched_feeds, list(targets), by_name, len(items), None, inputs,
                controls, PlanStats(len(items)))


def in_edges(items: list[NodeItem]) -> tuple[dict[int, list[Any]], dict[int, list[NodeItem]]]:
    """Per item id: its data inputs as (producer, slot) by input index (None where nothing in
    ``items`` produces it: fed or pruned) and its control inputs; from the out-edges."""
    inputs: dict[int, list[Any]] = {it.id: [None] * it.num_inputs for it in items}
    controls: dict[int, list[NodeItem]] = {it.id: [] for it in items}
    for src in items:
        for dst, idx, slot in src.out_data:
            inputs[dst.id][idx - dst.in_offset] = (src, slot)
        for dst in src.out_control:
            controls[dst.id].append(src)
    return inputs, controls


def _item_id(item: NodeItem) -> int:
    return item.id


def _num_outputs(reg, graph: Graph, node: str) -> int:
    try:
        return reg.num_outputs(graph.node(node).proto)
    except (SignatureError, KeyError):
        return 1


def _check_frames(item: NodeItem, by_name: dict[str, NodeItem], node: Any,
                  frames: FrameAnalysis) -> None:
    """Every input must arrive in the node's frame: a producer's outputs land in its own
    frame, in the child frame for an Enter, in the parent frame for an Exit."""
    for e in node.in_edges:
        src = by_name.get(e.src)
        if src is None:
            continue
        if src.is_enter:
            have = src.enter_frame
        elif src.is_exit:
            have = frames.frames[src.frame].parent or ROOT
        else:
            have = src.frame
        if have != item.frame:
            raise InvalidArgumentError(
                f"has inputs from different frames: input '{src.name}' is in frame "
                f"'{have or '<root>'}', this node is in frame '{item.frame or '<root>'}'",
                node=item.name, op=item.op)


def _make_item(node: Any, idx: int, device: str = kernels.CPU,
               max_bytes: int | None = None) -> NodeItem:
    item = bind(node, device, into=NodeItem(idx))
    attrs = item.attrs
    op = node.op
    item.is_merge = op in MERGE_OPS
    item.is_switch = op in SWITCH_OPS
    item.is_enter = op in ENTER_OPS
    item.is_exit = op in EXIT_OPS
    item.is_next_iteration = op in NEXT_ITERATION_OPS
    item.is_control_trigger = op == "ControlTrigger"
    item.is_constant_enter = bool(item.is_enter and attrs.get("is_constant", False))
    item.enter_frame = attrs.get("frame_name") if item.is_enter else None
    item.parallel_iterations = max(1, int(attrs.get("parallel_iterations", 10) or 10)) \
        if item.is_enter else 0
    item.deref = ()   # the plan sets it from the producers' output types
    # transfer ops only move a value; the scheduler does that itself, skipping two calls
    spec = item.spec
    item.transfer = spec.transfer
    if item.transfer == CONST:
        value = attrs.get("value")
        if type(value) is np.ndarray and value.dtype == item.out_dtypes[0]:
            item.const_out = (value,)
        else:
            item.transfer = 0
    item.writes_ref = spec.writes_ref and any(D.is_ref(t) for t in item.input_dtypes)
    item.async_start = spec.start
    item.runs_dead = spec.runs_dead
    # stateless kernels see only their attrs: one context serves every run; stateful ones
    # (variables, TensorArrays, stacks) get a per-run context carrying the step's state
    if not item.stateful:
        item.shared_ctx = context(item, max_bytes=max_bytes)
    return item
