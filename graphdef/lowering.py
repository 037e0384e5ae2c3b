"""Lower TensorFlow 2 functional graphs to v1 dataflow: inline calls, turn If/Case into
Switch/Merge and While into Enter/Merge/Switch/LoopCond/NextIteration/Exit frames.

This is what TensorFlow's LowerFunctionalOpsPass and function inlining do before its executor
runs a graph, and it is how dfg runs TF2 graphs: the executor, its programs, frame analysis
and viz clusters then work on them unchanged. Chosen over call frames in the executor because
one executor model (v1 frames, deadness) stays the only one to get right and fast.

Shape of the rewrite, for a functional node ``N`` (``N`` keeps its name, so fetches and
control edges naming it keep working):

* call (``PartitionedCall``, ``StatefulPartitionedCall``, op = a library function):
  ``N/inputs = IdentityN(args..., ^N's control inputs)`` is the function's entry: the body's
  argument reads come from it, and body nodes with no inputs depend on it, so the body runs in
  the caller's frame and iteration, is dead when the call is, and waits for the call's control
  inputs (TensorFlow's call semantics). Body nodes are copied as ``N/<node>``.
  ``N = IdentityN(results..., ^control outputs)`` (a ``NoOp`` without results), so a
  function's side effects finish before anything reading the call goes on.
* ``If``: ``Switch(pred, pred)`` gives the pivots; each input goes through a ``Switch``; the
  branches are inlined as calls ``N/then`` and ``N/else`` whose entries depend on the pivots;
  ``N/merge_j`` merges result j; ``N = IdentityN(merges)``. Without results, ``N`` is a
  ``Merge`` of the two pivots gated on each branch's completion.
* ``Case``: a chain of the ``If`` shape, ``branch_index == k`` at level k, so an index out of
  range runs the last branch, as TensorFlow does.
* ``_SwitchN`` (what TensorFlow's own lowering makes of a ``Case``; frozen TF2 graphs hold
  it): ``N = Identity(data, ^N's control inputs)`` and one ``Switch`` of ``N`` per output,
  on ``index == j`` (the last output: index out of ``[0, n-1)``, TensorFlow's rule), and
  readers of ``N:j`` read that ``Switch``'s live side instead.
* ``While``: frame named after ``N``, one Enter/Merge/Switch/Exit per loop variable,
  ``N/cond`` and ``N/body`` inlined as calls inside the frame, ``NextIteration`` of each body
  result, ``N = IdentityN(exits)``. A body's control outputs gate its results, so one
  iteration's side effects finish before the next iteration's begin.

Nested functional nodes brought in by an inlined body are lowered in turn. Inlined nodes carry
``_dfg_function`` (the function they come from) and ``_dfg_node`` (their name there), so errors
can name them.
"""

from __future__ import annotations

from typing import Any

from . import dtypes as D
from .errors import InvalidArgumentError, UnimplementedError
from .functions import (
    ARG_OP,
    CALL_OPS,
    CASE_OPS,
    FUNCTIONAL_OPS,
    IF_OPS,
    RETVAL_OP,
    WHILE_OPS,
    Library,
    call_attrs,
    find_recursion,
    inlined_size,
    instantiate,
    signature,
)
from .graph import parse_input

FUNCTION_ATTR = "_dfg_function"
NODE_ATTR = "_dfg_node"

# Nodes a single graph may grow to before lowering gives up (recursion is checked first;
# this bounds a legal but exponential fan-out of calls).
MAX_NODES = 5_000_000
MAX_NAME_BYTES = 64 << 20   # node names of the lowered graph, in all


SWITCH_N = "_SwitchN"


def needs_lowering(graph_def: Any) -> bool:
    """True when a top-level node is functional (a call, If, Case or While) or a
    ``_SwitchN``."""
    names = {f.signature.name for f in graph_def.library.function}
    return any(nd.op in FUNCTIONAL_OPS or nd.op in names or nd.op == SWITCH_N
               for nd in graph_def.node)


def lower_functional(graph_def: Any, keep_library: bool = False) -> Any:
    """A new GraphDef with every call inlined and every If/Case/While lowered (the input is
    not modified). ``keep_library``: keep all of ``library`` (otherwise only the functions
    the lowered graph's nodes still name are kept, usually none)."""
    from dfg.schemas import graph_pb2

    lib = Library(graph_def.library)
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    if needs_lowering(graph_def):
        cycles = find_recursion(graph_def)
        if cycles:
            raise InvalidArgumentError("cannot inline recursive function calls: "
                                       + " -> ".join(cycles[0]))
        _check_inlined_size(graph_def)
        _Lowering(out, lib).run()
    if not keep_library and out.HasField("library"):
        # only what ops that are not lowered still name (a tf.data map's function, say)
        from .prune import kept_library

        kept = kept_library(out.library, out.node)
        out.ClearField("library")
        if kept.function:
            out.library.CopyFrom(kept)
    return out


def _check_inlined_size(graph_def: Any) -> None:
    """Refuse, before inlining anything, calls that would grow the graph past MAX_NODES
    nodes or MAX_NAME_BYTES of node names (a stranger's few-kilobyte library can nest calls
    so that inlining them would take terabytes)."""
    sizes = inlined_size(graph_def)
    nodes = len(graph_def.node) + sum(n - 1 for n, _ in sizes.values())
    name_bytes = sum(len(nd.name) for nd in graph_def.node) \
        + sum(b - len(name) for name, (_, b) in sizes.items())
    if nodes <= MAX_NODES and name_bytes <= MAX_NAME_BYTES:
        return
    big = max(sizes, key=lambda k: sizes[k])
    op = next(nd.op for nd in graph_def.node if nd.name == big)
    what = (f"{nodes:,} nodes, more than {MAX_NODES:,}" if nodes > MAX_NODES
            else f"{name_bytes:,} bytes of node names, more than {MAX_NAME_BYTES:,}")
    raise InvalidArgumentError(
        f"inlining the function calls would make the graph {what} (node '{big}' ({op}) "
        f"alone stands for {sizes[big][0]:,} nodes): refusing to inline them")


class _Lowering:
    def __init__(self, out: Any, lib: Library) -> None:
        self.out = out
        self.lib = lib
        self.used: set[str] = {nd.name for nd in out.node}
        self.index: dict[str, Any] = {nd.name: nd for nd in out.node}

    # --- helpers ----------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        if name not in self.used:
            self.used.add(name)
            return name
        k = 1
        while f"{name}_{k}" in self.used:
            k += 1
        name = f"{name}_{k}"
        self.used.add(name)
        return name

    def add(self, name: str, op: str, inputs: list[str], **attrs: Any) -> str:
        """Append a node (name made unique) and return its name."""
        nd = self.out.node.add(name=self.unique(name), op=op, input=inputs)
        for key, value in attrs.items():
            _set_attr(nd.attr[key], key, value)
        self.index[nd.name] = nd
        if len(self.out.node) > MAX_NODES:
            raise InvalidArgumentError(f"lowering functions grew the graph past {MAX_NODES} "
                                       "nodes")
        return nd.name

    def tensor_type(self, tensor: str) -> int:
        """DataType of a tensor of the graph being built (``name`` / ``name:k``)."""
        from .opdefs.registry import SignatureError, registry

        name, slot = parse_input(tensor)
        nd = self.index.get(name)
        if nd is None:
            return D.DT_INVALID
        if nd.op in self.lib:
            outs = signature(self.lib.function(nd.op), dict(nd.attr)).outputs
            return outs[slot][1] if slot < len(outs) else D.DT_INVALID
        reg = registry()
        opdef = reg.get(nd.op)
        if opdef is None:
            return D.DT_INVALID
        try:
            types = reg.output_types(nd, opdef)
        except (SignatureError, KeyError):
            return D.DT_INVALID
        return D.base(types[slot]) if slot < len(types) else D.DT_INVALID

    def types_of(self, tensors: list[str], declared: list[int] | None = None) -> list[int]:
        """Declared types where known, else the producers' output types."""
        out = []
        for i, t in enumerate(tensors):
            dt = declared[i] if declared and i < len(declared) else D.DT_INVALID
            if not dt:
                dt = self.tensor_type(t)
            out.append(dt)
        return out

    # --- the walk ---------------------------------------------------------------------------
    def run(self) -> None:
        i = 0
        while i < len(self.out.node):  # the list grows as bodies are inlined
            nd = self.out.node[i]
            if nd.op in CALL_OPS or nd.op in self.lib:
                self.lower_call(nd)
            elif nd.op in IF_OPS:
                self.lower_if(nd)
            elif nd.op in CASE_OPS:
                self.lower_case(nd)
            elif nd.op in WHILE_OPS:
                self.lower_while(nd)
            i += 1
        # after inlining, so a body's _SwitchN and its readers are all in the graph
        switch_n = [nd for nd in self.out.node if nd.op == SWITCH_N]
        if switch_n:
            self.lower_switch_n(switch_n)

    def _replace(self, nd: Any, op: str, inputs: list[str], **attrs: Any) -> None:
        """Rewrite ``nd`` in place (same name) as ``op`` reading ``inputs``."""
        keep = {k: nd.attr[k] for k in (FUNCTION_ATTR, NODE_ATTR, "_class") if k in nd.attr}
        device = nd.device
        name = nd.name
        nd.Clear()
        nd.name, nd.op, nd.device = name, op, device
        nd.input.extend(inputs)
        for key, value in attrs.items():
            _set_attr(nd.attr[key], key, value)
        for k, v in keep.items():
            nd.attr[k].CopyFrom(v)

    @staticmethod
    def _split_inputs(nd: Any) -> tuple[list[str], list[str]]:
        data = [s for s in nd.input if not s.startswith("^")]
        ctrl = [s for s in nd.input if s.startswith("^")]
        return data, ctrl

    # --- calls ------------------------------------------------------------------------------
    def inline(self, prefix: str, fname: str, attrs: dict[str, Any], args: list[str],
               controls: list[str], out_name: str | None = None,
               out_node: Any = None) -> tuple[list[str], str]:
        """Inline function ``fname`` reading ``args`` after ``controls``; its results become
        ``out_name`` (a new node) or ``out_node`` (rewritten in place). Returns the result
        tensors (``out:j``) and the name of the node that completes the call."""
        fdef = self.lib.function(fname)
        sig = signature(fdef, attrs)
        if len(args) != len(sig.inputs):
            raise InvalidArgumentError(
                f"function '{fname}' takes {len(sig.inputs)} argument(s), the call passes "
                f"{len(args)}", node=prefix)
        body = instantiate(fdef, attrs, self.lib)
        arg_types = self.types_of(args, [t for _, t in sig.inputs])
        if args:
            entry = self.add(prefix + "/inputs", "IdentityN", args + controls, T=arg_types)
        else:
            entry = self.add(prefix + "/inputs", "NoOp", controls)
        names: dict[str, str] = {}
        arg_slot: dict[str, int] = {}
        for nd in body.node:
            if nd.op == ARG_OP:
                arg_slot[nd.name] = nd.attr["index"].i
            elif nd.op != RETVAL_OP:
                names[nd.name] = self.unique(f"{prefix}/{nd.name}")

        def remap(s: str) -> str:
            src, slot = parse_input(s)
            if src in arg_slot:
                if slot == -1:
                    return "^" + entry
                k = arg_slot[src]
                return entry if k == 0 else f"{entry}:{k}"
            new = names[src]
            if slot == -1:
                return "^" + new
            return new if slot == 0 else f"{new}:{slot}"

        results: list[str] = []
        for nd in body.node:
            if nd.op == ARG_OP:
                continue
            if nd.op == RETVAL_OP:
                results.append(remap(nd.input[0]))
                continue
            new = self.out.node.add()
            new.CopyFrom(nd)
            new.name = names[nd.name]
            del new.input[:]
            new.input.extend(remap(s) for s in nd.input)
            if "_class" in new.attr:  # colocation names follow the renamed nodes
                locs = [x.decode() for x in new.attr["_class"].list.s]
                del new.attr["_class"].list.s[:]
                new.attr["_class"].list.s.extend(
                    ("loc:@" + names.get(x[5:], x[5:])).encode() if x.startswith("loc:@")
                    else x.encode() for x in locs)
            if not nd.input:  # in the caller's frame, dead with it, after its controls
                new.input.append("^" + entry)
            if FUNCTION_ATTR not in new.attr:
                new.attr[FUNCTION_ATTR].s = fname.encode()
                new.attr[NODE_ATTR].s = nd.name.encode()
            self.index[new.name] = new
        # in the signature's control_output order, then by name: a proto map's own order
        # varies from process to process, and the output must be the same bytes every time
        order = [k for k in fdef.signature.control_output if k in fdef.control_ret]
        order += sorted(set(fdef.control_ret) - set(order))
        done = ["^" + names[fdef.control_ret[k]] for k in order]
        out_types = self.types_of(results, [t for _, t in sig.outputs])
        if results:
            op, inputs, extra = "IdentityN", results + done, {"T": out_types}
        else:
            op, inputs, extra = "NoOp", done or ["^" + entry], {}
        if out_node is not None:
            self._replace(out_node, op, inputs, **extra)
            name = out_node.name
        else:
            name = self.add(out_name or prefix, op, inputs, **extra)
        return [name if j == 0 else f"{name}:{j}" for j in range(len(results))], name

    def lower_call(self, nd: Any) -> None:
        if nd.op in self.lib:
            fname, attrs = nd.op, call_attrs(nd, "")
        else:
            fname, attrs = nd.attr["f"].func.name, call_attrs(nd, "f")
        data, ctrl = self._split_inputs(nd)
        self.inline(nd.name, fname, attrs, data, ctrl, out_node=nd)

    # --- conditionals -----------------------------------------------------------------------
    def cond(self, prefix: str, pred: str, args: list[str], arg_types: list[int],
             controls: list[str], then_fn: Any, else_fn: Any, out_types: list[int],
             out_node: Any = None) -> str:
        """Switch ``args`` on ``pred``, run ``then_fn``/``else_fn`` (each
        ``(prefix, args, pivot) -> (results, done node)``) and merge their results into
        ``out_node`` (rewritten in place) or a node named ``prefix``."""
        switches, piv_t, piv_f = self._cond_open(prefix, pred, args, arg_types, controls)
        outs_t, done_t = then_fn(prefix + "/then", [s + ":1" for s in switches], piv_t)
        outs_f, done_f = else_fn(prefix + "/else", switches, piv_f)
        return self._cond_close(prefix, piv_t, piv_f, outs_t, done_t, outs_f, done_f,
                                out_types, out_node)

    def _cond_open(self, prefix: str, pred: str, args: list[str], arg_types: list[int],
                   controls: list[str]) -> tuple[list[str], str, str]:
        """The Switches of a conditional: (the args' Switch nodes, then pivot, else pivot)."""
        sw = self.add(prefix + "/switch_pred", "Switch", [pred, pred] + controls, T=D.DT_BOOL)
        piv_t = self.add(prefix + "/pivot_t", "Identity", [sw + ":1"], T=D.DT_BOOL)
        piv_f = self.add(prefix + "/pivot_f", "Identity", [sw], T=D.DT_BOOL)
        switches = [self.add(f"{prefix}/switch_{i}", "Switch", [a, pred], T=t)
                    for i, (a, t) in enumerate(zip(args, arg_types))]
        return switches, piv_t, piv_f

    def _cond_close(self, prefix: str, piv_t: str, piv_f: str, outs_t: list[str], done_t: str,
                    outs_f: list[str], done_f: str, out_types: list[int],
                    out_node: Any = None) -> str:
        """The Merges of a conditional's two sides, into ``out_node`` or a node ``prefix``."""
        merges = [self.add(f"{prefix}/merge_{j}", "Merge", [a, b], T=t, N=2)
                  for j, (a, b, t) in enumerate(zip(outs_t, outs_f, out_types))]
        if merges:
            op, inputs, attrs = "IdentityN", merges, {"T": out_types}
        else:  # completion: whichever branch ran, after its side effects
            gate_t = self.add(prefix + "/then_done", "Identity", [piv_t, "^" + done_t],
                              T=D.DT_BOOL)
            gate_f = self.add(prefix + "/else_done", "Identity", [piv_f, "^" + done_f],
                              T=D.DT_BOOL)
            op, inputs, attrs = "Merge", [gate_t, gate_f], {"T": D.DT_BOOL, "N": 2}
        if out_node is not None:
            self._replace(out_node, op, inputs, **attrs)
            return out_node.name
        return self.add(prefix, op, inputs, **attrs)

    def _branch(self, fname: str, attrs: dict[str, Any]) -> Any:
        def fn(prefix: str, args: list[str], pivot: str) -> tuple[list[str], str]:
            return self.inline(prefix, fname, attrs, args, ["^" + pivot])
        return fn

    def _as_bool(self, prefix: str, pred: str, dtype: int) -> str:
        """TensorFlow's rule for a non-bool predicate scalar: nonzero is true."""
        if dtype in (D.DT_BOOL, D.DT_INVALID):
            return pred
        if dtype == D.DT_STRING:
            raise UnimplementedError("a string predicate for If/While", node=prefix)
        return self.add(prefix + "/pred_bool", "Cast", [pred], SrcT=dtype, DstT=D.DT_BOOL,
                        Truncate=False)

    def lower_if(self, nd: Any) -> None:
        data, ctrl = self._split_inputs(nd)
        if not data:
            raise InvalidArgumentError("If needs a predicate input", node=nd.name, op=nd.op)
        pred = self._as_bool(nd.name, data[0], nd.attr["Tcond"].type or D.DT_BOOL)
        args = data[1:]
        arg_types = self.types_of(args, list(nd.attr["Tin"].list.type))
        out_types = list(nd.attr["Tout"].list.type)
        then_f, else_f = nd.attr["then_branch"].func, nd.attr["else_branch"].func
        self.cond(nd.name, pred, args, arg_types, ctrl,
                  self._branch(then_f.name, dict(then_f.attr)),
                  self._branch(else_f.name, dict(else_f.attr)), out_types, out_node=nd)

    def lower_case(self, nd: Any) -> None:
        data, ctrl = self._split_inputs(nd)
        if not data:
            raise InvalidArgumentError("Case needs a branch_index input", node=nd.name,
                                       op=nd.op)
        branches = list(nd.attr["branches"].list.func)
        if not branches:
            raise InvalidArgumentError("Case has no branches", node=nd.name, op=nd.op)
        idx, args = data[0], data[1:]
        arg_types = self.types_of(args, list(nd.attr["Tin"].list.type))
        out_types = list(nd.attr["Tout"].list.type)
        n = len(branches)
        if n == 1:  # the index is read (it must exist) but chooses nothing
            gate = self.add(nd.name + "/index", "Identity", [idx] + ctrl, T=D.DT_INT32)
            self.inline(nd.name + "/branch0", branches[0].name, dict(branches[0].attr), args,
                        ["^" + gate], out_node=nd)
            return

        # Level k: branch k when the index is k, else level k+1 in the else side (the last
        # branch at the end). Built forward (Switches and then-branches, level by level),
        # then the Merges backward: a Case of thousands of branches is just data, no
        # recursion.
        opened = []
        prefix, idx_k, args_k, controls = nd.name, idx, args, ctrl
        for k in range(n - 1):
            anchor = self.add(prefix + "/index", "Identity", [idx_k] + controls,
                              T=D.DT_INT32)
            const = self.add(prefix + "/k", "Const", ["^" + anchor], dtype=D.DT_INT32,
                             value=("int32", k))
            pred = self.add(prefix + "/pred", "Equal", [anchor, const], T=D.DT_INT32)
            switches, piv_t, piv_f = self._cond_open(prefix, pred, [anchor] + args_k,
                                                     [D.DT_INT32] + arg_types, [])
            br = branches[k]
            outs_t, done_t = self.inline(prefix + "/then", br.name, dict(br.attr),
                                         [s + ":1" for s in switches][1:], ["^" + piv_t])
            opened.append((prefix, piv_t, piv_f, outs_t, done_t))
            prefix, idx_k, args_k, controls = (prefix + "/else", switches[0], switches[1:],
                                               ["^" + piv_f])
        last = branches[n - 1]
        # the else side of the last level: ``prefix`` is already that level's "/else"
        outs_f, done_f = self.inline(prefix, last.name, dict(last.attr), args_k, controls)
        for k in range(n - 2, -1, -1):
            p, piv_t, piv_f, outs_t, done_t = opened[k]
            q = self._cond_close(p, piv_t, piv_f, outs_t, done_t, outs_f, done_f, out_types,
                                 out_node=nd if k == 0 else None)
            outs_f, done_f = [q if j == 0 else f"{q}:{j}" for j in range(len(out_types))], q

    def lower_switch_n(self, nodes: list[Any]) -> None:
        renamed: dict[str, str] = {}   # "N:j" -> the tensor that now carries output j
        switches: set[str] = set()     # they read N itself
        for nd in nodes:
            data, ctrl = self._split_inputs(nd)
            if len(data) != 2:
                raise InvalidArgumentError(f"_SwitchN needs 2 inputs (data, output_index), "
                                           f"found {len(data)}", node=nd.name, op=nd.op)
            n = int(nd.attr["num_outs"].i)
            t = nd.attr["T"].type
            value, idx = data
            name = nd.name
            self._replace(nd, "Identity", [value] + ctrl, T=t)
            # the index's own frame and deadness: every new node hangs off it
            anchor = self.add(name + "/index", "Identity", [idx, "^" + name], T=D.DT_INT32)
            for j in range(n):
                if j < n - 1:
                    k = self.add(f"{name}/k{j}", "Const", ["^" + anchor], dtype=D.DT_INT32,
                                 value=("int32", j))
                    pred = self.add(f"{name}/pred{j}", "Equal", [anchor, k], T=D.DT_INT32)
                    live = 1
                else:  # in range of the first n-1 outputs: the last output is dead
                    lo = self.add(f"{name}/k0_", "Const", ["^" + anchor], dtype=D.DT_INT32,
                                  value=("int32", 0))
                    hi = self.add(f"{name}/kn_", "Const", ["^" + anchor], dtype=D.DT_INT32,
                                  value=("int32", n - 1))
                    ge = self.add(f"{name}/ge", "GreaterEqual", [anchor, lo], T=D.DT_INT32)
                    lt = self.add(f"{name}/lt", "Less", [anchor, hi], T=D.DT_INT32)
                    pred = self.add(f"{name}/in_range", "LogicalAnd", [ge, lt])
                    live = 0
                sw = self.add(f"{name}/switch{j}", "Switch", [name, pred], T=t)
                switches.add(sw)
                renamed[f"{name}:{j}"] = f"{sw}:{live}" if live else sw
            renamed[name] = renamed[f"{name}:0"]
        for nd in self.out.node:
            for i, s in enumerate(nd.input):
                r = renamed.get(s)
                if r is not None and nd.name not in switches:
                    nd.input[i] = r

    # --- loops ------------------------------------------------------------------------------
    def lower_while(self, nd: Any) -> None:
        data, ctrl = self._split_inputs(nd)
        w = nd.name
        types = self.types_of(data, list(nd.attr["T"].list.type))
        if not data:
            raise UnimplementedError("a While without loop variables", node=w, op=nd.op)
        cond_f, body_f = nd.attr["cond"].func, nd.attr["body"].func
        par = nd.attr["parallel_iterations"].i if "parallel_iterations" in nd.attr else 10
        par = par if par > 0 else 10
        enters = [self.add(f"{w}/enter_{i}", "Enter", [x] + ctrl, T=t, frame_name=w.encode(),
                           is_constant=False, parallel_iterations=par)
                  for i, (x, t) in enumerate(zip(data, types))]
        merges = [self.add(f"{w}/merge_{i}", "Merge", [e, f"{w}/next_iteration_{i}"], T=t,
                           N=2) for i, (e, t) in enumerate(zip(enters, types))]
        (c,), _ = self.inline(w + "/cond", cond_f.name, dict(cond_f.attr), merges, [])
        cond_sig = signature(self.lib.function(cond_f.name), dict(cond_f.attr))
        c = self._as_bool(w + "/cond", c, cond_sig.outputs[0][1] if cond_sig.outputs else 0)
        loop_cond = self.add(w + "/loop_cond", "LoopCond", [c])
        switches = [self.add(f"{w}/switch_{i}", "Switch", [m, loop_cond], T=t)
                    for i, (m, t) in enumerate(zip(merges, types))]
        exits = [self.add(f"{w}/exit_{i}", "Exit", [s], T=t)
                 for i, (s, t) in enumerate(zip(switches, types))]
        outs, _ = self.inline(w + "/body", body_f.name, dict(body_f.attr),
                              [s + ":1" for s in switches], [])
        if len(outs) != len(data):
            raise InvalidArgumentError(
                f"body '{body_f.name}' returns {len(outs)} value(s) for {len(data)} loop "
                "variable(s)", node=w, op=nd.op)
        for i, (o, t) in enumerate(zip(outs, types)):
            name = self.add(f"{w}/next_iteration_{i}", "NextIteration", [o], T=t)
            if name != f"{w}/next_iteration_{i}":  # the Merge was wired to the planned name
                self.index[merges[i]].input[1] = name
        self._replace(nd, "IdentityN", exits, T=types)


_TYPE_KEYS = frozenset({"T", "SrcT", "DstT", "dtype"})
_INT_KEYS = frozenset({"N", "parallel_iterations"})
_BOOL_KEYS = frozenset({"is_constant", "Truncate"})


def _set_attr(av: Any, key: str, value: Any) -> None:
    """Attr values of the few ops lowering writes, typed by their key."""
    if key in _TYPE_KEYS:
        if isinstance(value, list):
            av.list.SetInParent()
            av.list.type.extend(value)
        else:
            av.type = value
    elif key in _INT_KEYS:
        av.i = value
    elif key in _BOOL_KEYS:
        av.b = value
    elif key == "frame_name":
        av.s = value
    elif key == "value":  # ("int32", k): a scalar int32 tensor
        av.tensor.dtype = D.DT_INT32
        av.tensor.tensor_shape.SetInParent()
        av.tensor.int_val.append(value[1])
    else:
        raise TypeError(f"attr {key}={value!r}")
