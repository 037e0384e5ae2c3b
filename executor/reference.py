"""The reference interpreter: the oracle the threaded executor is tested against.

Simple, slow and single-threaded, written from TensorFlow's control-flow rules rather than
from the executor: it shares nothing with ``executor.py``/``propagator.py`` but the one kernel
call (``kernel_call``) and what Switch and Merge do to values (``kernels/control_flow.py``).
Control-flow ops are interpreted here, every other node runs its kernel.

The model (TensorFlow v1 control flow, ``core/common_runtime/propagator_state.cc`` and "Dynamic
Control Flow in Large-Scale Machine Learning"):

* A *frame instance* is one execution of a while loop: the root frame once per step, a child
  frame once per (parent instance, parent iteration) whose Enters ran. It runs iteration by
  iteration; iteration ``i+1`` exists only if some NextIteration of iteration ``i`` produced a
  live value. Within an iteration every node runs at most once.
* A node's result is *absent* (it never runs: an input never arrives), or it ran, *dead* or
  live, with one value or DEAD per output slot (a live Switch has one dead output).
* A node runs when all its inputs have arrived; it is dead if a data input is DEAD or a control
  input comes from a dead node (ControlTrigger is never dead). Dead nodes run no kernel.
* Merge runs on its first live data input (output: the value and its index) once its control
  inputs have arrived (their deadness does not matter); it is dead when all its data inputs
  are dead, or when a dead input comes from an Enter (a loop on the untaken side of a cond).
* Enter feeds iteration 0 of its child frame, or every iteration if ``is_constant``.
  NextIteration feeds the next iteration; a dead one stops there. A live Exit gives its value
  to the parent iteration; an Exit that ran dead in the last iteration gives DEAD there.
* Fetches are read in the root frame; a fetched ref variable is read as its value.

Inside one iteration, nodes are tried in topological order, repeatedly until nothing changes
(a fixpoint): what is still undecided then never runs. So illegal cycles and Merges waiting
forever end as absent nodes, reported as the step being unable to make progress. A child frame
runs (all its iterations at once) when every Enter feeding it in this iteration has run or is
known never to run (at the fixpoint, undecided Enters count as never running).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dfg.graphdef.errors import InternalError, InvalidArgumentError
from dfg.graphdef.frames import (
    ENTER_OPS,
    EXIT_OPS,
    LOOP_COND_OPS,
    MERGE_OPS,
    NEXT_ITERATION_OPS,
    ROOT,
    SWITCH_OPS,
    FrameAnalysis,
    analyze_frames,
)
from dfg.graphdef.graph import Graph, Node, parse_tensor_name
from dfg.graphdef.opdefs.registry import registry
from dfg.graphdef.prune import dependencies

from .kernel_call import BoundKernel, bind, call, context, numpy_dtype, quiet
from .kernels import control_flow
from .resources import ResourceManager

DEAD = None          # an output slot that carries no value
PENDING = object()   # an input not known yet in this pass
ABSENT = object()    # an input that never arrives


class Ran:
    """A node that ran: dead or live, one value (or DEAD) per output slot."""

    __slots__ = ("dead", "outs")

    def __init__(self, dead: bool, outs: tuple = ()) -> None:
        self.dead = dead
        self.outs = outs

    def out(self, slot: int) -> Any:
        if self.dead or slot >= len(self.outs):
            return DEAD
        return self.outs[slot]

    def __repr__(self) -> str:
        return "Ran(dead)" if self.dead else f"Ran({len(self.outs)} outputs)"


DEAD_RUN = Ran(True)


def _read(x: Any) -> Any:
    """A ref variable read as its value (a plain array as is)."""
    return x.read() if x is not None and not isinstance(x, np.ndarray) and hasattr(
        x, "read") else x


class _Frame:
    """One frame instance: its Enters' results in the parent iteration, the iteration being
    run, the one before (for NextIteration), and the Exit results for the parent."""

    def __init__(self, name: str, enters: dict[str, Ran]) -> None:
        self.name = name
        self.enters = enters               # Enter name -> how it ran in the parent iteration
        self.iteration = 0
        # this iteration: node name -> Ran or ABSENT (missing: not decided yet), and
        # ("frame", child name) -> the child frame instance run in this iteration
        self.cur: dict[Any, Any] = {}
        self.prev: dict[Any, Any] = {}     # the previous iteration's (NextIteration reads it)
        self.exits: dict[str, Ran] = {}    # Exit name -> what it gives the parent iteration


class Reference:
    """Runs steps of ``graph`` with the variables kept across runs in ``self.resources``,
    as a Session does (``run`` takes the same fetches, feeds and targets)."""

    def __init__(self, graph: Any, max_iterations: int = 1_000_000) -> None:
        from dfg.graphdef.io import load_graph
        from dfg.graphdef.lowering import lower_functional, needs_lowering

        g = load_graph(graph)
        if needs_lowering(g.graph_def):   # TF2 function calls: run their v1 lowering
            g = Graph(lower_functional(g.graph_def))
        from dfg.graphdef.functions import attach_bodies, needs_bodies

        if needs_bodies(g.graph_def):       # functions XLA reducers apply (as a Session)
            g = Graph(attach_bodies(g.graph_def))
        self.graph: Graph = g
        self.frames: FrameAnalysis = analyze_frames(g)
        self.resources = ResourceManager()
        self.max_iterations = max_iterations
        self._bound: dict[str, BoundKernel] = {}

    # --- one step -------------------------------------------------------------------------
    def run(self, fetches: Any, feed_dict: dict | None = None, targets: Any = None) -> Any:
        """Fetched values in fetch order (one value if ``fetches`` is a string)."""
        single = isinstance(fetches, str)
        keys = [parse_tensor_name(f) for f in ([fetches] if single else list(fetches or []))]
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        self.feeds = {parse_tensor_name(k): self._feed_value(parse_tensor_name(k), v)
                      for k, v in (feed_dict or {}).items()}
        needed = dependencies(self.graph, keys, feeds=list(self.feeds), targets=targets)
        self.needed = needed
        self.fed_nodes = {name for name, _slot in self.feeds}
        self._plan(needed)
        self.step: dict[Any, Any] = {}
        root = _Frame(ROOT, {})
        with quiet(all="ignore"):
            self._run_frame(root)
        out = [self._fetch(root, k) for k in keys]
        return out[0] if single else out

    def _feed_value(self, key: tuple[str, int], value: Any) -> np.ndarray:
        """A fed value as the dtype of the tensor it replaces (when its OpDef says)."""
        node = self.graph.node(key[0])
        try:
            reg = registry()
            want = numpy_dtype(reg.output_types(node.proto, reg.get(node.op))[key[1]])
        except Exception:   # an unknown op or signature: the value as given
            want = None
        return np.asarray(value, dtype=want) if want is not None else np.asarray(value)

    def _fetch(self, root: _Frame, key: tuple[str, int]) -> np.ndarray:
        if key in self.feeds:
            return self.feeds[key]
        name, slot = key
        r = self._lookup(root, self.graph.node(name), name, slot, final=True)
        if r is ABSENT:
            stuck = [n for n in self.order.get(ROOT, []) if isinstance(n, str)
                     and not isinstance(root.cur.get(n), Ran)][:10]
            raise InvalidArgumentError(
                f"the step cannot make progress before computing {name}:{slot}: these nodes "
                f"never ran: {', '.join(stuck)}")
        v = r.out(slot)
        if v is DEAD:
            raise InvalidArgumentError(f"fetch '{name}:{slot}' is dead", node=name,
                                       op=self.graph.node(name).op)
        return np.asarray(_read(v))

    # --- static structure -----------------------------------------------------------------
    def _plan(self, needed: set[str]) -> None:
        """Per frame, the needed nodes it runs in topological order, a child frame standing
        in for all its nodes (keyed ``("frame", name)``), at the place of its last one."""
        fa = self.frames
        order: dict[str, list[Any]] = {}
        self.child_enters: dict[str, list[str]] = {}
        self.next_iterations: dict[str, list[str]] = {}
        for node in self.graph.topological_order(needed):
            frame = fa.node_frame.get(node.name, ROOT)
            if node.op in ENTER_OPS:
                child = node.attr["frame_name"].s.decode("utf-8", "replace")
                self.child_enters.setdefault(child, []).append(node.name)
            if node.op in NEXT_ITERATION_OPS:
                self.next_iterations.setdefault(frame, []).append(node.name)
            order.setdefault(frame, []).append(node.name)
            # every enclosing frame sees this node as part of its child frame
            while frame != ROOT:
                parent = fa.frames[frame].parent or ROOT
                order.setdefault(parent, []).append(("frame", frame))
                frame = parent
        # keep a child frame's last position only, so its Enters come first
        self.order = {}
        for frame, items in order.items():
            last = {it: i for i, it in enumerate(items)}
            self.order[frame] = [it for i, it in enumerate(items) if last[it] == i]

    def _kernel(self, node: Node) -> BoundKernel:
        k = self._bound.get(node.name)
        if k is None:
            k = self._bound[node.name] = bind(node)
        return k

    # --- frames and iterations ------------------------------------------------------------
    def _run_frame(self, fr: _Frame) -> None:
        items = self.order.get(fr.name, [])
        while True:
            self._run_iteration(fr, items)
            again = any(isinstance(r, Ran) and not r.dead
                        for r in (fr.cur.get(n) for n in self.next_iterations.get(fr.name, ())))
            if not again:
                return
            if fr.iteration + 1 >= self.max_iterations:
                raise InvalidArgumentError(f"while loop '{fr.name}' ran more than "
                                           f"{self.max_iterations} iterations")
            fr.prev, fr.cur = fr.cur, {}
            fr.iteration += 1

    def _run_iteration(self, fr: _Frame, items: list[Any]) -> None:
        todo = list(items)
        force = False
        while todo:
            left = []
            for it in todo:
                done = self._try_child(fr, it[1], force) if isinstance(it, tuple) \
                    else self._try_node(fr, it)
                if not done:
                    left.append(it)
            if len(left) == len(todo):
                # no progress: child frames whose Enters are still undecided run without
                # them; when none is left, the undecided nodes never run
                if force or not any(isinstance(it, tuple) for it in left):
                    break
                force = True
            else:
                force = False
            todo = left

    def _try_child(self, fr: _Frame, child: str, force: bool) -> bool:
        enters: dict[str, Ran] = {}
        for e in self.child_enters.get(child, []):
            if self.frames.node_frame.get(e, ROOT) != fr.name:
                continue
            r = fr.cur.get(e)
            if r is None and not force:
                return False
            if isinstance(r, Ran):
                enters[e] = r
        sub = _Frame(child, enters)
        if enters:   # a frame instance exists only once one of its Enters ran
            self._run_frame(sub)
            for e in self.frames.frames[child].exits:
                if e in sub.exits:
                    continue
                r = sub.cur.get(e)
                if isinstance(r, Ran) and r.dead:
                    sub.exits[e] = DEAD_RUN   # dead in the last iteration
        fr.cur[("frame", child)] = sub
        return True

    # --- one node -------------------------------------------------------------------------
    def _lookup(self, fr: _Frame, dst: Node, src: str, slot: int, final: bool = False) -> Any:
        """How input ``src`` (slot ``slot``, -1 for a control edge) of ``dst`` arrives in the
        current iteration of ``fr``: a Ran, PENDING or ABSENT."""
        if slot >= 0 and (src, slot) in self.feeds:
            return Ran(False, (None,) * slot + (self.feeds[(src, slot)],))
        if slot < 0 and src not in self.needed and src in self.fed_nodes:
            return Ran(False)   # a fed Placeholder: its control edges come from the feed
        node = self.graph.node(src)
        fa = self.frames
        where = fa.node_frame.get(src, ROOT)
        if node.op in ENTER_OPS and node.attr["frame_name"].s.decode() == fr.name \
                and where != fr.name:
            if fr.iteration > 0 and not node.attr["is_constant"].b:
                return ABSENT
            return fr.enters.get(src, ABSENT)
        if node.op in NEXT_ITERATION_OPS and where == fr.name:
            r = fr.prev.get(src) if fr.iteration > 0 else None
            return r if isinstance(r, Ran) and not r.dead else ABSENT
        if node.op in EXIT_OPS and where != fr.name and where != ROOT \
                and (fa.frames[where].parent or ROOT) == fr.name:
            sub = fr.cur.get(("frame", where))
            if sub is None:
                return ABSENT if final else PENDING
            return sub.exits.get(src, ABSENT)
        if where != fr.name:
            raise InvalidArgumentError(
                f"input '{src}' is in frame '{where or '<root>'}', its consumer '{dst.name}' "
                f"in frame '{fr.name or '<root>'}'", node=dst.name, op=dst.op)
        r = fr.cur.get(src)
        if r is None:
            return ABSENT if final else PENDING
        return r   # a Ran, or ABSENT

    def _try_node(self, fr: _Frame, name: str) -> bool:
        """Run ``name`` in the current iteration if its inputs allow; False: not yet."""
        node = self.graph.node(name)
        data = [self._lookup(fr, node, s, k) for s, k in node.inputs]
        ctrl = [self._lookup(fr, node, s, -1) for s in node.control_inputs]
        if node.op in MERGE_OPS:
            return self._merge(fr, node, data, ctrl)
        if any(x is ABSENT for x in data) or any(x is ABSENT for x in ctrl):
            fr.cur[name] = ABSENT   # an input never arrives: it never runs
            return True
        if any(x is PENDING for x in data) or any(x is PENDING for x in ctrl):
            return False
        args = [r.out(k) for r, (_s, k) in zip(data, node.inputs)]
        dead = any(a is DEAD for a in args) or any(r.dead for r in ctrl)
        if node.op == "ControlTrigger":
            fr.cur[name] = Ran(False, ())
        elif dead:
            fr.cur[name] = DEAD_RUN
        else:
            fr.cur[name] = Ran(False, tuple(self._compute(fr, node, args)))
            if node.op in EXIT_OPS:
                if name in fr.exits:
                    raise InternalError("a loop Exit produced a live value twice",
                                        node=name, op=node.op)
                fr.exits[name] = fr.cur[name]
        return True

    def _merge(self, fr: _Frame, node: Node, data: list, ctrl: list) -> bool:
        if any(x is ABSENT for x in ctrl):
            fr.cur[node.name] = ABSENT
            return True
        if any(x is PENDING for x in ctrl):
            return False
        live = [r.out(k) if isinstance(r, Ran) and r.out(k) is not DEAD else None
                for r, (_src, k) in zip(data, node.inputs)]
        if any(v is not None for v in live):
            v, index = control_flow.merge(live)
            fr.cur[node.name] = Ran(False, (v if node.op == "RefMerge" else _read(v), index))
            return True
        from_enter = any(isinstance(r, Ran) and self.graph.node(src).op in ENTER_OPS
                         for r, (src, _k) in zip(data, node.inputs))
        if from_enter or all(isinstance(r, Ran) for r in data):
            fr.cur[node.name] = DEAD_RUN     # every input dead, or a dead loop
            return True
        if any(r is PENDING for r in data):
            return False
        fr.cur[node.name] = ABSENT   # no live input and not all dead: it never runs
        return True

    def _compute(self, fr: _Frame, node: Node, args: list) -> Any:
        op = node.op
        if op in SWITCH_OPS:
            data, pred = args
            p = np.asarray(_read(pred))
            if p.shape != ():
                raise InvalidArgumentError(f"the predicate must be a scalar, found shape "
                                           f"{list(p.shape)}", node=node.name, op=op)
            data = data if op == "RefSwitch" else _read(data)
            return tuple(DEAD if v is None else v for v in control_flow.switch(data, bool(p)))
        if op in ENTER_OPS or op in EXIT_OPS or op in NEXT_ITERATION_OPS \
                or op in LOOP_COND_OPS:
            return (args[0] if op.startswith("Ref") else _read(args[0]),)
        k = self._kernel(node)
        ctx = context(k, self.resources, self.step,
                      frame=(fr.name, fr.iteration) if fr.name else None)
        return call(k, list(args), ctx)


def evaluate(graph: Graph, fetches: list[str], feed_dict: dict[str, Any] | None = None
             ) -> list[np.ndarray]:
    """One step of a fresh ``Reference(graph)``: the fetched values, in order."""
    return Reference(graph).run(list(fetches), feed_dict)
