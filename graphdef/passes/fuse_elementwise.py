"""Pass ``fuse_elementwise``: a chain of elementwise ops as one ``_DfgElementwiseChain`` node.

A connected group of float32/float64 elementwise nodes (arithmetic, Relu, Relu6, Sigmoid,
Tanh, ...: :data:`CHAIN_OPS`) in which every node but the last has exactly one reader, inside
the group (in a loop: all its readers inside the group, as a GRU's update gate read by
``z * h`` and ``1 - z``: the chain's program reads its register twice), becomes one node
of dfg's private op (``graphdef/opdefs/dfg_op_defs.pbtxt``). Its
``program`` lists the ops in order; its kernel (``executor/kernels/fused.py``) writes each
result into the buffer of an operand that dies there, so a chain of k ops costs one
scheduling step and about one allocation instead of k. Typical chains: hard-swish
``x * relu6(x + 3) / 6`` (MobileNetV3), batch norm + ReLU before a convolution (DenseNet,
ResNetV2), layer normalization's arithmetic (ConvNeXt), squeeze-excite gates.

The group's nodes must share device and dtype; none but the last may be fetched, fed or a
target, or have control readers. The fused node takes the last node's name (a fetch of it
keeps its meaning) and every control input of the group. Tensors from outside the group,
read any number of times, become its inputs. TensorFlow cannot run the private op: the
pass is only for dfg's own per-signature optimization and not in ``dfg optimize``'s
default list. ``PassOptions.elementwise_scope="loops"`` forms chains inside while loops, where
each iteration repeats the per-op cost a chain saves (an LSTM cell's gate arithmetic is two
chains, 5-11% fewer instructions per step), and outside them only float32 chains of
``PassOptions.elementwise_sweep_ops``: the ops the executor's compiled sweep computes whole
in one pass (a DenseNet's or ResNetV2's batch norm and ReLU before each convolution, a
ConvNeXt's layer norm arithmetic), where a chain the numpy code would run gave no gain
beyond noise on the Keras zoo. A Session asks for both.

A recurrent cell splits one product into its gates (``Split`` on a constant axis, or a
GRU's ``StridedSlice`` ``[:, a:b]`` of its recurrent product) and adds the bias before
(``BiasAdd``, ``AddV2``). A chain reading a Split's or such a StridedSlice's outputs computes
its own blocks of the sliced value instead: ``Piece`` and ``Cut`` entries cut the value's
leaves (the tensors the ops before the slicing read, when nothing else reads those ops) into
blocks, and the ops between are applied to the blocks. Blocks of an elementwise expression
are the expression of the blocks, bit for bit, and each chain computes only its blocks, so
no work is done twice; the Split and the ops before it go when every piece is taken (an LSTM or GRU
cell's loop body: the products and two chains). In a loop, a chain that reads another's value
and otherwise only that chain's inputs becomes its second output (``M``, ``outputs``): an LSTM
cell's new state and its output are one sweep and one call (``_merge_reader``).
In a loop of scalar arithmetic
(a counter, an accumulator) compiled programs write a chain as its members' scalar forms
composed into one expression (the chain's record, ``ScalarForm.compose``), so the
arithmetic stays inline as it was before fusing; on arrays they call the chain's array
form, the kernel's own core, without the kernel call around it.
"""

from __future__ import annotations

from typing import Any

from ..frames import ROOT, analyze_frames
from ..graph import Graph
from .common import Editor, PassOptions, Protected, attr, attr_type, const_value

FUSED_OP = "_DfgElementwiseChain"
DT_FLOAT, DT_DOUBLE = 1, 2
# op -> number of operands; the kernel's CHAIN_OPS has the same keys (a test checks it)
CHAIN_OPS: dict[str, int] = {
    **dict.fromkeys(("Add", "AddV2", "BiasAdd", "AddN", "Sub", "Mul", "RealDiv", "Div", "Maximum",
                     "Minimum", "SquaredDifference"), 2),
    **dict.fromkeys(("Neg", "Abs", "Exp", "Log", "Sqrt", "Square", "Tanh", "Reciprocal",
                     "Rsqrt", "Relu", "Relu6", "Sigmoid"), 1),
}
MIN_NODES = 2


def run(graph: Graph, options: PassOptions) -> Any:
    ed = Editor(graph)
    prot = Protected(graph, options)
    order = graph.topological_order()
    rank = {n.name: i for i, n in enumerate(order)}
    taken: set[str] = set()
    in_loop = None
    sweep = options.elementwise_sweep_ops
    if options.elementwise_scope == "loops":
        node_frame = analyze_frames(graph).node_frame
        in_loop = {n for n, f in node_frame.items() if f != ROOT}
        if not in_loop and not sweep:
            return ed.finish()
    absorbed: list[str] = []      # slicers moved into chains, then the ops inlined into them
    made: list[str] = []          # the chains made, in loop frames
    for node in reversed(order):
        root = ed.get(node.name)
        if root is None or root.name in taken or not _eligible(ed, prot, root):
            continue
        # outside loops (scope "loops") only a float32 chain of sweep ops
        only = None
        if in_loop is not None and root.name not in in_loop:
            if root.op not in sweep or attr_type(root) != DT_FLOAT:
                continue
            only = sweep
        members = _grow(ed, prot, root, taken, only,
                        shared=in_loop is not None and root.name in in_loop)
        if len(members) < MIN_NODES:
            continue
        taken.update(members)
        moved = _rewrite(ed, prot, root, sorted(members, key=rank.__getitem__), only)
        taken.update(moved)
        absorbed.extend(moved)
        if in_loop is not None and root.name in in_loop:
            made.append(root.name)
    # what the chains took whole is gone: a slicer all of whose blocks they compute, and the
    # ops that only slicers read
    for name in absorbed:
        if name in ed and not ed.data_readers(name) and not ed.control_readers(name):
            ed.remove(name)
    for name in made:
        if name in ed:
            _merge_reader(ed, prot, name, node_frame)
    return ed.finish()


# the compiled sweep's limits (native.h): ops, and inputs plus slices it reads
SWEEP_MAX_OPS = SWEEP_MAX_OPERANDS = 32
SLICE_ENTRIES = ("Piece", "Cut")     # program entries that take a block of an input


def _merge_reader(ed: Editor, prot: Protected, name: str, node_frame: dict) -> None:
    """A chain ``b`` in a loop that reads chain ``name``'s value and otherwise only inputs of
    ``name`` becomes a second output of ``name`` (program ``name``'s then ``b``'s, outputs the
    two last entries): an LSTM cell's two chains, its new state (read by the next iteration
    and by the output's chain) and its output, are one sweep and one call. ``b``'s readers
    read output 1. Not when ``b`` keeps its name (fetched, fed, a target), has control
    readers or control inputs ``name`` lacks, slices ``name``'s value, is in another frame,
    or the sum would pass the sweep's limits."""
    a = ed.get(name)
    if a is None or attr(a, "M") is not None:
        return
    for b_name in sorted({r for r, _slot in ed.data_readers(name, 0)}):
        b = ed.get(b_name)
        if b is None or b.op != FUSED_OP or attr(b, "M") is not None \
                or node_frame.get(b_name) != node_frame.get(name) or b.device != a.device \
                or attr_type(b) != attr_type(a) or prot.keeps_name(b_name) \
                or prot.pinned(b_name) or ed.control_readers(b_name) \
                or not set(ed.control_inputs(b_name)) <= set(ed.control_inputs(name)):
            continue
        a_in, b_in = ed.data_inputs(name), ed.data_inputs(b_name)
        if sum(t == (name, 0) for t in b_in) != 1 \
                or any(t != (name, 0) and t not in a_in for t in b_in):
            continue
        a_prog = [p.decode() for p in a.attr["program"].list.s]
        b_prog = [p.decode() for p in b.attr["program"].list.s]
        groups = [int(e.split()[-1]) for e in a_prog if e.split()[0] in SLICE_ENTRIES]
        shift = max(groups) + 1 if groups else 0
        own = f"r{len(a_prog) - 1}"

        def ref(tok: str, b_in: list = b_in, a_in: list = a_in, own: str = own,
                offset: int = len(a_prog)) -> str:
            if tok[0] == "r":
                return f"r{int(tok[1:]) + offset}"
            t = b_in[int(tok[1:])]
            return own if t == (name, 0) else f"i{a_in.index(t)}"

        merged = list(a_prog)
        ok = True
        for e in b_prog:
            op, *args = e.split()
            if op in SLICE_ENTRIES:
                first = ref(args[0])
                ok &= first[0] == "i"         # a slice of an input, not of name's value
                merged.append(" ".join([op, first, *args[1:-1], str(int(args[-1]) + shift)]))
            else:
                merged.append(" ".join([op, *(ref(x) for x in args)]))
        slices = sum(e.split()[0] in SLICE_ENTRIES for e in merged)
        if not ok or len(merged) - slices > SWEEP_MAX_OPS \
                or len(a_in) + slices > SWEEP_MAX_OPERANDS:
            continue
        del a.attr["program"].list.s[:]
        a.attr["program"].list.s.extend(e.encode() for e in merged)
        a.attr["M"].i = 2
        a.attr["outputs"].list.i.extend([len(a_prog) - 1, len(merged) - 1])
        shapes = attr(a, "_output_shapes"), attr(b, "_output_shapes")
        if shapes[0] is not None and shapes[1] is not None:
            a.attr["_output_shapes"].list.shape.extend(shapes[1].list.shape)
        elif shapes[0] is not None:
            del a.attr["_output_shapes"]
        ed.replace_tensor((b_name, 0), (name, 1))
        ed.remove(b_name)
        return


def _eligible(ed: Editor, prot: Protected, nd: Any) -> bool:
    arity = CHAIN_OPS.get(nd.op)
    fmt = attr(nd, "data_format")
    if nd.op == "BiasAdd" and fmt is not None and fmt.s not in (b"", b"NHWC"):
        return False     # the chain's BiasAdd adds along the last axis
    return (arity is not None and attr_type(nd) in (DT_FLOAT, DT_DOUBLE)
            and not prot.pinned(nd.name) and len(ed.data_inputs(nd.name)) == arity)


def _split_axis(ed: Editor, prot: Protected, name: str, dtype: int, device: str
                ) -> tuple[int, int, tuple[str, int]] | None:
    """(axis, num_split, value tensor) of a Split a chain may compute its pieces of: its axis
    a constant, its dtype and device the chain's, nothing else needing it (each output read
    only by ops that may chain, none fetched, fed or named, no control readers; its control
    inputs become the chain's)."""
    nd = ed.get(name)
    if nd is None or nd.op != "Split" or attr_type(nd) != dtype or nd.device != device \
            or prot.pinned(name) or prot.keeps_name(name) or ed.control_readers(name):
        return None
    data = ed.data_inputs(name)
    n = attr(nd, "num_split")
    axis = const_value(ed.get(data[0][0])) if len(data) == 2 and data[0][1] == 0 else None
    if n is None or axis is None or axis.ndim != 0 or axis.dtype.kind not in "iu":
        return None
    if not _read_by_chainable(ed, prot, name, dtype):
        return None
    return int(axis), int(n.i), data[1]


def _cut_spec(ed: Editor, prot: Protected, name: str, dtype: int, device: str
              ) -> tuple[int, int | None, int | None, int, tuple[str, int]] | None:
    """(axis, start, stop, dims, value tensor) of a StridedSlice a chain may compute its
    block of: ``value[..., start:stop, ...]`` on one axis, every other axis whole (begin and
    end masked, or begin 0), stride 1, no ellipsis, new or shrunk axes, the spec constant; its
    dtype and device the chain's, each reader an op that may chain, nothing else needing it
    (a GRU cell slices its recurrent product into three gates)."""
    nd = ed.get(name)
    if nd is None or nd.op != "StridedSlice" or attr_type(nd) != dtype \
            or nd.device != device or prot.pinned(name) or prot.keeps_name(name) \
            or ed.control_readers(name):
        return None
    data = ed.data_inputs(name)
    if len(data) != 4 or any(slot != 0 for _n, slot in data[1:]):
        return None
    spec = [const_value(ed.get(n)) for n, _slot in data[1:]]
    if any(v is None or v.ndim != 1 or v.dtype.kind not in "iu" or len(v) != len(spec[0])
           or not len(v) for v in spec):
        return None
    masks = {k: (attr(nd, k).i if attr(nd, k) is not None else 0)
             for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                       "shrink_axis_mask")}
    if masks["ellipsis_mask"] or masks["new_axis_mask"] or masks["shrink_axis_mask"] \
            or any(int(x) != 1 for x in spec[2]):
        return None
    cut = [i for i in range(len(spec[0]))
           if not ((masks["begin_mask"] >> i & 1 or int(spec[0][i]) == 0)
                   and masks["end_mask"] >> i & 1)]
    if len(cut) != 1:
        return None
    a = cut[0]
    start = None if masks["begin_mask"] >> a & 1 else int(spec[0][a])
    stop = None if masks["end_mask"] >> a & 1 else int(spec[1][a])
    if not _read_by_chainable(ed, prot, name, dtype):
        return None
    return a, start, stop, len(spec[0]), data[0]


def _read_by_chainable(ed: Editor, prot: Protected, name: str, dtype: int) -> bool:
    """Whether every reader of ``name``'s outputs is an op of ``dtype`` that may chain."""
    for reader, _slot in ed.data_readers(name):
        r = ed.get(reader)
        if r is None or not _eligible(ed, prot, r) or attr_type(r) != dtype:
            return False
    return True


SLICERS = ("Split", "StridedSlice")


def _slicer(ed: Editor, prot: Protected, name: str, dtype: int, device: str) -> Any:
    """What a chain needs to compute its own block of a Split's or StridedSlice's output
    (``_split_axis``, ``_cut_spec``), or None."""
    op = ed.op(name)
    if op == "Split":
        return _split_axis(ed, prot, name, dtype, device)
    if op == "StridedSlice":
        return _cut_spec(ed, prot, name, dtype, device)
    return None


def _inlinable(ed: Editor, prot: Protected, src: str, reader: str, dtype: int, device: str
               ) -> bool:
    """Whether ``src``'s op may be computed piecewise inside the chain: it may chain, and its
    one output is read by ``reader`` and otherwise only by Splits and StridedSlices chains
    take whole (its control inputs become the chain's)."""
    c = ed.get(src)
    if c is None or not _eligible(ed, prot, c) or attr_type(c) != dtype \
            or c.device != device or prot.keeps_name(src) or ed.control_readers(src) \
            or ed.used_slots(src) != {0}:
        return False
    return all(r == reader or _slicer(ed, prot, r, dtype, device) is not None
               for r in {r for r, _ in ed.data_readers(src)})


def _grow(ed: Editor, prot: Protected, root: Any, taken: set[str],
          only: frozenset[str] | None = None, shared: bool = False) -> set[str]:
    """The nodes that can join ``root``'s chain: producers whose only reader is in it (and,
    given ``only``, whose op is in it). ``shared`` (in loops): also a producer all of whose
    readers are in it, read as one register by each (a GRU's update gate ``z``, read by
    ``z * h`` and ``1 - z``: without it the gate is a chain of its own, one more call each
    iteration). Such a producer is looked at again from each reader that joins, so it joins
    once its last reader has."""
    members = {root.name}
    work = [root.name]
    while work:
        m = work.pop()
        for src, slot in ed.data_inputs(m):
            if src in members or src in taken or slot != 0:
                continue
            c = ed.get(src)
            if c is None or not _eligible(ed, prot, c) or c.device != root.device \
                    or only is not None and c.op not in only \
                    or attr_type(c) != attr_type(root) or prot.keeps_name(src) \
                    or ed.control_readers(src) or ed.used_slots(src) != {0}:
                continue
            readers = ed.data_readers(src)
            if len(readers) != 1 or readers[0][0] != m:
                if not shared or any(r not in members for r, _slot in readers):
                    continue
            members.add(src)
            work.append(src)
    return members


def _rewrite(ed: Editor, prot: Protected, root: Any, members: list[str],
             only: frozenset[str] | None = None) -> list[str]:
    """``members`` in topological order, ``root`` last. An input that is a Split's or a
    StridedSlice's output (``_slicer``) becomes the chain's own block of the sliced value:
    ``Piece`` or ``Cut`` entries of the value's leaves, and the elementwise ops between (read
    by nothing but slicers) applied to the blocks, so a recurrent cell's gate split and the
    bias add before it join the gates' chains. Returns the slicers and ops whose work the
    chain took."""
    index = {n: k for k, n in enumerate(members)}
    inputs: list[tuple[str, int]] = []
    program: list[str] = []
    entry: dict[str, str] = {}
    t = attr_type(root)
    groups: dict[str, int] = {}
    pieces: dict[tuple, str] = {}
    moved: list[str] = []

    def operand(tensor: tuple[str, int]) -> str:
        if tensor not in inputs:
            inputs.append(tensor)
        return f"i{inputs.index(tensor)}"

    def piece(tensor: tuple[str, int], reader: str, slicer: str, spec: tuple, j: int) -> str:
        """The entry computing ``tensor``'s (which ``reader`` reads) block ``j`` of a Split's
        (``spec``: axis, num_split) or its StridedSlice's block (axis, start, stop, dims)."""
        key = (tensor, slicer, j)
        if key in pieces:
            return pieces[key]
        src, slot = tensor
        if slot == 0 and _inlinable(ed, prot, src, reader, t, root.device) \
                and (only is None or ed.op(src) in only):
            args = [piece(x, src, slicer, spec, j) for x in ed.data_inputs(src)]
            program.append(" ".join([ed.get(src).op, *args]))
            moved.append(src)
        else:
            g = groups.setdefault(slicer, len(groups))
            if len(spec) == 2:
                program.append(f"Piece {operand(tensor)} {spec[0]} {spec[1]} {j} {g}")
            else:
                a, start, stop, dims = spec
                program.append(f"Cut {operand(tensor)} {a} {'_' if start is None else start} "
                               f"{'_' if stop is None else stop} {dims} {g}")
        pieces[key] = f"r{len(program) - 1}"
        return pieces[key]

    for name in members:
        nd = ed.get(name)
        args = []
        for src, slot in ed.data_inputs(name):
            if src in index:
                args.append(entry[src])
                continue
            sliced = _slicer(ed, prot, src, t, root.device)
            if sliced is None:
                args.append(operand((src, slot)))
                continue
            *spec, value = sliced
            args.append(piece(value, src, src, tuple(spec), slot))
            if src not in moved:
                moved.insert(0, src)
        program.append(" ".join([nd.op, *args]))
        entry[name] = f"r{len(program) - 1}"
    controls = [c for n in [*members, *moved] for c in ed.control_inputs(n)]
    controls = list(dict.fromkeys(controls))
    shapes = attr(root, "_output_shapes")
    shapes = None if shapes is None else shapes.SerializeToString()
    for n in members[:-1]:
        ed.remove(n)
    root.op = FUSED_OP
    root.attr.clear()
    root.attr["T"].type = t
    root.attr["N"].i = len(inputs)
    root.attr["program"].list.s.extend(p.encode() for p in program)
    if shapes is not None:
        root.attr["_output_shapes"].ParseFromString(shapes)
    ed.set_inputs(root.name, inputs, controls)
    # slicers first, then the ops they read, producers after their readers: removing in this
    # order leaves each without readers when its turn comes
    return [m for m in moved if ed.op(m) in SLICERS] + \
        [m for m in reversed(moved) if ed.op(m) not in SLICERS]

