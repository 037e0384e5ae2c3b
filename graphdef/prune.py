"""Keep only what some fetches and targets need: ``dependencies`` (a node set) and ``prune``.

``dependencies`` is the walk TensorFlow's ``extract_sub_graph`` does (backwards through data
and control inputs, NextIteration back edges included), with feeds cutting it the way a
session run does: a data edge reading a fed tensor needs nothing upstream. It answers "which
nodes must run", so the executor's planner, the optimizer and viz share it.

``prune`` turns that set into a runnable GraphDef, replacing fed tensors by Placeholders as
TensorFlow's ``strip_unused`` does.

Feeding, precisely (documented in ``dfg prune --help`` too):

- Feeding ``x:0`` replaces node ``x`` by a Placeholder named ``x`` (dtype from the OpDef and
  attrs, shape from ``_output_shapes``, the ``shape`` attr of placeholder and variable ops, or
  a Const's value), so every name that read or fetched ``x:0`` still resolves. A Placeholder
  that is fed simply stays.
- Feeding ``x:k`` with k > 0 (a Placeholder has one output) adds a Placeholder named
  ``x/feed_k`` and points the readers of ``x:k`` at it; ``x`` itself stays only if something
  still needs it. The same happens to ``x:0`` when ``x`` must still run (a control edge on a
  fed non-Placeholder keeps it running, as in TensorFlow), so its name stays taken.
- Control edges on a fed Placeholder need nothing (TensorFlow moves them to the feed).
- Tensors inside a while loop cannot be fed (TensorFlow forbids it too): the cut would break
  the loop.

Colocation: a kept node's ``_class: "loc:@w"`` hints keep ``w`` in ``prune``'s result (and
what ``w`` needs), as ``extract_sub_graph`` does to "prevent colocated nodes from being lost".
``dependencies`` leaves them out: it answers what must *run*, and a hint is not a dependency.

Functions: ``prune`` keeps exactly the library functions the kept nodes call (func-valued
attrs such as ``f``, ``then_branch``, ``branches``, ``cond``, ``body``, and ops naming a
function), transitively through function bodies, plus the gradient functions the library's
gradients table gives for them, as TensorFlow's ``FunctionLibraryDefinition::
ReachableDefinitions`` does; the gradients entries of dropped functions go too.

Loops stay whole: because the walk follows NextIteration back edges, anything it keeps of a
loop brings the loop's Merge/Switch/LoopCond/NextIteration skeleton with it; in addition, a
node kept inside a frame (say a fetched in-loop tensor) pulls in its frame's LoopConds, so the
kept part of the loop can still iterate and end.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from . import dtypes as D
from .errors import InvalidArgumentError, InvalidGraphError, NotFoundError, UsageError
from .frames import ENTER_OPS, EXIT_OPS, ROOT, FrameAnalysis, analyze_frames
from .graph import (
    CONTROL_SLOT,
    Graph,
    Node,
    gc_paused,
    input_string,
    parse_input,
    parse_tensor_name,
)
from .op_sets import PLACEHOLDER_OPS, SHAPE_ATTR_OPS
from .validate import NAME_RE, NameSuggester

if TYPE_CHECKING:
    from dfg.schemas.graph_pb2 import GraphDef

TensorRef = str | tuple[str, int]



# --- name resolution ----------------------------------------------------------------------------

def _did_you_mean(graph: Graph, name: str) -> str:
    close = NameSuggester(graph.names).suggest(name)
    return f"; did you mean '{close}'?" if close else ""


def resolve_tensor(graph: Graph, ref: TensorRef, what: str = "fetch") -> tuple[str, int]:
    """``"y"``, ``"y:1"`` or ``("y", 1)`` -> (node, slot) of an existing node.

    UsageError for a string that is not a tensor name at all, NotFoundError (with a
    did-you-mean) for a well-formed name whose node does not exist.
    """
    if isinstance(ref, tuple):
        name, slot = ref
    elif ref in graph:        # a node name as is, even one validation would call ill-formed
        name, slot = ref, 0
    else:
        name, slot = parse_tensor_name(ref)
        if name not in graph and not NAME_RE.match(name):
            raise UsageError(f"{what} '{ref}' is not a tensor name (expected node or "
                             "node:index)")
    if name not in graph:
        raise NotFoundError(f"{what} '{_spell(ref)}' names no node in the graph"
                            + _did_you_mean(graph, name))
    return name, slot


def resolve_target(graph: Graph, name: str) -> str:
    """A target is a node name (run for its effects); NotFoundError if there is none."""
    if name in graph:
        return name
    base, slot = parse_input(name)
    if (slot != 0 or name.startswith("^") or base != name) and base in graph:
        raise UsageError(f"target '{name}' is not a node name: targets name nodes, "
                         f"try '{base}'")
    if not NAME_RE.match(name):
        raise UsageError(f"target '{name}' is not a node name")
    raise NotFoundError(f"target '{name}' names no node in the graph"
                        + _did_you_mean(graph, name))


def _spell(ref: TensorRef) -> str:
    return f"{ref[0]}:{ref[1]}" if isinstance(ref, tuple) else ref


# --- the walk --------------------------------------------------------------------------------

class _Closure:
    """Result of the walk: nodes that must run, and where feeds cut it."""

    def __init__(self) -> None:
        self.kept: set[str] = set()
        self.cut: set[tuple[str, int]] = set()      # fed tensors read by kept nodes
        self.cut_control: set[str] = set()          # fed Placeholders with kept control readers


def _walk(graph: Graph, roots: Iterable[str], feeds: set[tuple[str, int]],
          c: _Closure, colocation: bool = False) -> None:
    stack = [r for r in roots if r not in c.kept]
    kept = c.kept
    get = graph.by_name.get
    if not feeds:
        # nothing cuts the walk: follow every in-edge (the usual case, kept lean). A node
        # is kept when first reached, so each is looked up and stacked once.
        todo = []
        for name in stack:
            node = get(name)
            if node is not None and name not in kept:
                kept.add(name)
                todo.append(node)
        pop, push, keep = todo.pop, todo.append, kept.add
        while todo:
            node = pop()
            for e in node.in_edges:
                src = e.src
                if src not in kept:
                    keep(src)
                    push(get(src))   # an edge's source always exists
            if colocation and "_class" in node.proto.attr:
                for t in _colocated(node):
                    if t not in kept and (target := get(t)) is not None:
                        keep(t)      # a hint naming a missing node keeps nothing
                        push(target)
        return
    fed_nodes = {name for name, _ in feeds}
    while stack:
        name = stack.pop()
        if name in kept:
            continue
        node = get(name)
        if node is None:
            continue  # an input naming a missing node; prune reports it, validate too
        kept.add(name)
        for e in node.in_edges:
            src = e.src
            if e.dst_input == CONTROL_SLOT:
                # TensorFlow moves control edges of a fed Placeholder to the feed; any other
                # fed node still has to run when something depends on it by control
                if src in fed_nodes and graph.get(src).op in PLACEHOLDER_OPS:
                    c.cut_control.add(src)
                    continue
            elif (src, e.src_output) in feeds:
                c.cut.add((src, e.src_output))
                continue
            if src not in kept:
                stack.append(src)
        if colocation and "_class" in node.proto.attr:
            for t in _colocated(node):
                if (t, 0) in feeds:
                    c.cut.add((t, 0))   # the feed's Placeholder keeps the name: enough
                elif t not in kept:
                    stack.append(t)


def _colocated(node: Node) -> list[str]:
    """Node names of ``_class: "loc:@name"`` colocation hints."""
    out = []
    for s in node.attr["_class"].list.s:
        text = s.decode("utf-8", "replace")
        if text.startswith("loc:@"):
            out.append(text[5:])
    return out


def _frame_name(node: Node) -> str:
    attr = node.proto.attr
    return attr["frame_name"].s.decode("utf-8", "replace") if "frame_name" in attr else ROOT


def _tensor_frame(fa: FrameAnalysis, graph: Graph, name: str) -> str:
    """The frame a node's outputs live in: an Enter's are in the frame it opens (the Enter
    itself is scheduled in its parent), an Exit's in the parent of the loop it leaves."""
    node = graph.get(name)
    if node.op in ENTER_OPS:
        return _frame_name(node)
    frame = fa.node_frame.get(name, ROOT)
    if frame != ROOT and node.op in EXIT_OPS:
        return fa.frames[frame].parent or ROOT
    return frame


def _closure(graph: Graph, fetch_keys: list[tuple[str, int]], feed_set: set[tuple[str, int]],
             targets: list[str], colocation: bool = False) -> _Closure:
    c = _Closure()
    fa: FrameAnalysis | None = None
    if feed_set and any(n.op in ENTER_OPS for n in graph.nodes):
        fa = analyze_frames(graph)
        for name, slot in sorted(feed_set):
            frame = _tensor_frame(fa, graph, name)
            if frame != ROOT:
                raise InvalidArgumentError(
                    f"cannot feed '{name}:{slot}': it is inside while-loop frame '{frame}' "
                    "and feeding it would cut the loop (feed a tensor outside the loop)",
                    node=name, op=graph.get(name).op)
    # a fetched tensor that is also fed needs nothing: its value is the feed
    roots = [name for name, slot in fetch_keys if (name, slot) not in feed_set]
    _walk(graph, [*roots, *targets], feed_set, c, colocation)
    if (fa is not None or any(n.op in ENTER_OPS for n in graph.nodes)) \
            and any(graph.get(n).op in ENTER_OPS for n in c.kept):
        if fa is None:
            fa = analyze_frames(graph)
        _complete_loops(graph, fa, feed_set, c, colocation)
    return c


def _complete_loops(graph: Graph, fa: FrameAnalysis, feeds: set[tuple[str, int]],
                    c: _Closure, colocation: bool = False) -> None:
    """Pull in the LoopConds of every frame with a kept node, until nothing changes.

    A root-frame fetch reaches a loop only through an Exit, which already brings the LoopCond
    (Exit <- Switch <- LoopCond), so this adds nothing then; it matters for fetches and
    targets inside a loop, whose backward walk may miss the loop's termination condition.
    """
    done: set[str] = set()
    seen: set[str] = set()   # kept nodes whose frames are in done already
    get = graph.by_name.get
    while True:
        # only the nodes kept since the last round can name a frame not done yet
        fresh = c.kept - seen
        seen |= fresh
        frames = {_tensor_frame(fa, graph, n) for n in fresh if get(n).op in ENTER_OPS} \
            | {fa.node_frame.get(n, ROOT) for n in fresh}
        frames = {f for f in frames if f in fa.frames} - done - {ROOT}
        if not frames:
            return
        for name in sorted(frames):
            done.add(name)
            _walk(graph, fa.frames[name].loop_conds, feeds, c, colocation)


def dependencies(graph: Graph, fetches: Iterable[TensorRef], feeds: Iterable[TensorRef] = (),
                 targets: Iterable[str] = ()) -> set[str]:
    """Names of the nodes that must run to compute ``fetches`` and run ``targets``.

    ``fetches`` and ``feeds`` are tensor names (``"y"``, ``"y:1"``), node names, or (node,
    slot) pairs; ``targets`` are node names. A fed tensor cuts the walk: its producer is in
    the set only if something else needs it to run. NotFoundError names a missing node (with a
    did-you-mean); InvalidArgumentError rejects feeding a tensor inside a while loop.
    """
    fetch_keys = [resolve_tensor(graph, f, "fetch") for f in fetches]
    feed_set = {resolve_tensor(graph, f, "feed") for f in feeds}
    target_names = [resolve_target(graph, t) for t in targets]
    return _closure(graph, fetch_keys, feed_set, target_names).kept


# --- prune -------------------------------------------------------------------------------------

def prune(graph: Graph, fetches: Iterable[TensorRef], feeds: Iterable[TensorRef] = (),
          targets: Iterable[str] = ()) -> GraphDef:
    """A new GraphDef with only what ``fetches`` and ``targets`` need, fed tensors replaced by
    Placeholders (see the module docstring); versions and node order are kept, colocated
    nodes too, and of the library exactly the functions the kept nodes run.
    """
    with gc_paused():
        return _prune(graph, fetches, feeds, targets)


def _prune(graph: Graph, fetches: Iterable[TensorRef], feeds: Iterable[TensorRef],
           targets: Iterable[str]) -> GraphDef:
    from dfg.schemas import graph_pb2

    from .opdefs.registry import SignatureError, registry

    fetch_keys = [resolve_tensor(graph, f, "fetch") for f in fetches]
    feed_keys = [resolve_tensor(graph, f, "feed") for f in feeds]
    target_names = [resolve_target(graph, t) for t in targets]
    if not fetch_keys and not target_names:
        raise UsageError("nothing to keep: give at least one fetch or target")
    reg = registry()

    def out_types(name: str) -> list[int] | None:
        n = graph.get(name)
        if n is None or n.op not in reg:
            return None
        try:
            return reg.output_types(n.proto)
        except SignatureError:
            return None

    for (name, slot), what in [*((k, "fetch") for k in fetch_keys),
                               *((k, "feed") for k in feed_keys)]:
        types = out_types(name)
        if types is not None and slot >= len(types):
            raise NotFoundError(
                f"{what} '{name}:{slot}' does not exist: {graph.get(name).op} '{name}' has "
                f"{len(types)} output{'s' if len(types) != 1 else ''}",
                node=name, op=graph.get(name).op)
    feed_set = set(feed_keys)
    c = _closure(graph, fetch_keys, feed_set, target_names, colocation=True)

    bad = [(n, s) for n, s in graph.missing_inputs if n.name in c.kept]
    if bad:
        n, s = bad[0]
        src = parse_input(s)[0]
        raise InvalidGraphError(f"input '{s}' names a node that does not exist"
                                + _did_you_mean(graph, src), node=n.name, op=n.op)

    # a fetched fed tensor needs its Placeholder even when nothing else reads it
    fetched_fed = [k for k in fetch_keys if k in feed_set]
    cut = c.cut | set(fetched_fed)

    # where each fed tensor comes from in the result
    taken = set(graph.names) if cut else set()   # names a new Placeholder must avoid
    ph_name: dict[tuple[str, int], str] = {}
    in_place: set[str] = set()            # nodes replaced by a Placeholder of the same name
    for name, slot in sorted(cut):
        if slot == 0 and name not in c.kept:
            ph_name[(name, slot)] = name
            in_place.add(name)
        else:
            ph_name[(name, slot)] = _unique(f"{name}/feed_{slot}", taken)
    for name, slot in fetched_fed:
        if ph_name[(name, slot)] != name or slot != 0:
            raise UsageError(
                f"cannot fetch the fed tensor '{name}:{slot}': in the pruned graph its value "
                f"comes from Placeholder '{ph_name[(name, slot)]}', so the name '{name}:{slot}'"
                " would not hold it; fetch a tensor computed from it instead")

    readers: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for key in cut:
        readers[key] = [(e.dst, e.dst_input) for e in graph.consumers(*key)
                        if e.dst in c.kept]

    new_nodes: dict[str, list[Any]] = {}   # original node name -> Placeholders emitted there
    for key, ph in sorted(ph_name.items()):
        name, slot = key
        src = graph.get(name)
        if ph == name and src.op in PLACEHOLDER_OPS:
            new_nodes.setdefault(name, []).append(src.proto)   # a fed Placeholder stays
            continue
        types = out_types(name)
        if types is None:
            raise InvalidArgumentError(
                f"cannot feed '{name}:{slot}': the dtype of that output is unknown (op "
                f"'{src.op}' is not registered or its attrs do not determine it)",
                node=name, op=src.op)
        dtype = types[slot]
        if D.is_ref(dtype):
            for dst, k in readers[key]:
                n = graph.get(dst)
                try:
                    wants_ref = D.is_ref(reg.input_types(n.proto)[k])
                except (SignatureError, KeyError, IndexError):
                    wants_ref = False
                if wants_ref:
                    raise InvalidArgumentError(
                        f"cannot feed '{name}:{slot}': it is a ref ({D.name(dtype)}) and "
                        f"'{dst}' ({n.op}) needs the ref itself, not a value",
                        node=name, op=src.op)
        new_nodes.setdefault(name, []).append(_placeholder(ph, D.base(dtype), src, slot))
    for name in c.cut_control:
        if name not in in_place:                 # a fed Placeholder read only by control
            new_nodes.setdefault(name, []).append(graph.get(name).proto)
            in_place.add(name)

    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph.graph_def.versions)
    kept = c.kept
    dups = graph.duplicates
    if not new_nodes and not ph_name and not dups:
        # nothing replaced or renamed: the kept NodeDefs as they are, copied in one call
        out.node.extend([n.proto for n in graph.nodes if n.name in kept])
    else:
        for n in graph.nodes:
            if dups and graph.get(n.name) is not n:
                continue  # a duplicate name: the first node wins, as everywhere in dfg
            if new_nodes:
                for proto in new_nodes.get(n.name, ()):
                    out.node.add().CopyFrom(proto)
            if n.name not in kept or n.name in in_place:
                continue
            nd = out.node.add()
            nd.CopyFrom(n.proto)
            if ph_name and any(k in ph_name for k in n.inputs):
                del nd.input[:]
                for s in n.proto.input:
                    src, slot = parse_input(s)
                    key = (src, slot)
                    nd.input.append(input_string(ph_name[key], 0)
                                    if slot != CONTROL_SLOT and key in ph_name else s)
    if graph.graph_def.HasField("library"):
        lib = kept_library(graph.graph_def.library, out.node)
        if lib.ByteSize() or not graph.graph_def.library.ByteSize():
            out.library.CopyFrom(lib)
    return out


def kept_library(library: Any, nodes: Iterable[Any]) -> Any:
    """The part of ``library`` (a FunctionDefLibrary) that ``nodes`` (NodeDefs) call:
    reachable functions, their gradient functions, and the gradients entries of the kept
    functions; library order is kept."""
    from .functions import Library, reachable_in

    keep = reachable_in(Library(library), nodes, gradients=True)
    out = type(library)()
    for f in library.function:
        if f.signature.name in keep:
            out.function.add().CopyFrom(f)
    for g in library.gradient:
        if g.function_name in keep:
            out.gradient.add().CopyFrom(g)
    for r in getattr(library, "registered_gradients", ()):
        out.registered_gradients.add().CopyFrom(r)
    return out


def _unique(name: str, taken: set[str]) -> str:
    cand, i = name, 1
    while cand in taken:
        cand = f"{name}_{i}"
        i += 1
    taken.add(cand)
    return cand


def _placeholder(name: str, dtype: int, src: Any, slot: int) -> Any:
    """A Placeholder standing for ``src:slot``, with the shape we can tell."""
    from dfg.schemas import node_def_pb2

    ph = node_def_pb2.NodeDef(name=name, op="Placeholder")
    ph.attr["dtype"].type = dtype
    shape = _known_shape(src, slot)
    if shape is not None:
        ph.attr["shape"].shape.CopyFrom(shape)
        if "_output_shapes" in src.attr:
            ph.attr["_output_shapes"].list.shape.add().CopyFrom(shape)
    else:
        ph.attr["shape"].shape.unknown_rank = True
    return ph


def _known_shape(src: Any, slot: int) -> Any | None:
    attr = src.attr
    if "_output_shapes" in attr:
        shapes = attr["_output_shapes"].list.shape
        if slot < len(shapes):
            return shapes[slot]
    if slot == 0 and src.op in SHAPE_ATTR_OPS and "shape" in attr \
            and attr["shape"].WhichOneof("value") == "shape":
        return attr["shape"].shape
    if slot == 0 and src.op == "Const" and "value" in attr \
            and attr["value"].WhichOneof("value") == "tensor":
        return attr["value"].tensor.tensor_shape
    return None
