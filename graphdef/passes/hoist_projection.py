"""Pass ``hoist_projection``: a recurrent layer's input projection, every step in one product.

A Keras RNN layer (LSTM, GRU, SimpleRNN, each direction of a Bidirectional) unstacks its input
sequence into a TensorList before its while loop and, in every iteration, reads step ``t``
and multiplies it by the input kernel: ``MatMul(TensorListGetItem(list, t), W)``. Neither the
list nor ``W`` changes across iterations, so the products of all steps are one matrix product
over the whole sequence, computed once before the loop (one large GEMM, which BLAS runs at
full speed and on every core, where 40 small ones each pay their own packing and dispatch).
The loop then reads step ``t`` of the result. This is the input projection cuDNN and Keras's
own fused kernels compute up front.

Matched, in a loop frame F: a float32/float64 ``MatMul`` (``transpose_a`` false) whose first
input is a ``TensorListGetItem`` of a list invariant in F (a constant ``Enter``, or a loop
variable the body passes back unchanged) that was made by ``TensorListFromTensor(X, ...)``
outside the loop, and whose second input is invariant in F with a static shape ``[K, N]``.
Before the loop: ``P = Einsum(X, W, "abk,kn->abn")`` (``nk`` for ``transpose_b``), a
TensorList of ``P``'s steps and constant Enters of both; the MatMul becomes a
``TensorListGetItem`` of that list at the same index, with the MatMul's name and control
inputs, so its readers, its deadness (the index comes from the iteration) and a fetch of it
are unchanged. Every op is TensorFlow's own, so TensorFlow runs the result.

Values: each row of the product is the same dot product, but BLAS picks its kernel by matrix
size, so the last bits may differ from the small products' (as Grappler's rewrites and XLA's
fusions may); tests/test_hoist_projection.py checks the results against exact values. ``P``
holds ``N / K`` times the sequence's elements; the pass declines above
:data:`MAX_GROWTH` (a stock-price LSTM reading one feature per step would multiply its input
by 4 x units). The list's element shape must be a constant ``[?, K]``, which
TensorListFromTensor checks the sequence against: so the product cannot fail where the
loop's products would not, even in a loop that never iterates (it then runs once for
nothing, as a value the ``loop_invariant`` pass hoists does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as D
from ..frames import ROOT, analyze_frames
from ..graph import Graph
from .common import (
    Editor,
    PassOptions,
    Protected,
    Shapes,
    attr,
    attr_type,
    const_value,
    make_constant_enter,
)

# the product may hold at most this many times the elements of the sequence it projects
MAX_GROWTH = 64
# forward their input (IdentityN: its k-th): a function body's inputs and outputs, inlined
FORWARDS = frozenset({"Identity", "IdentityN"})


def run(graph: Graph, options: PassOptions) -> Any:
    return hoist_loop_matmuls(graph, options, "TensorListGetItem", _match, _rewrite)


def hoist_loop_matmuls(graph: Graph, options: PassOptions, needs: str, match: Any,
                       rewrite: Any) -> Any:
    """The driver of the projection passes (this one and ``hoist_concat_projection``): every
    float MatMul inside a loop frame that may be rewritten (:func:`float_matmul`) and reads
    two data inputs, the first an output 0, is offered to ``match(ed, prot, fa, shapes,
    node, frame, dtype, transposed, data)`` (``data``: its data inputs), and what that
    returns to ``rewrite(ed, prot, fa, name, frame, match)``; nothing to do in a graph
    without a ``needs`` op."""
    ed = Editor(graph)
    if not any(n.op == needs for n in graph.nodes):
        return ed.finish()
    prot = Protected(graph, options)
    fa = analyze_frames(graph)
    shapes = Shapes(ed, prot)
    for node in graph.topological_order():
        nd = ed.peek(node.name)
        if nd is None or nd.op != "MatMul":
            continue
        frame = fa.node_frame.get(nd.name)
        kind = float_matmul(prot, nd)
        if frame in (None, ROOT) or kind is None:
            continue
        data = ed.data_inputs(nd.name)
        if len(data) != 2 or data[0][1] != 0:
            continue
        found = match(ed, prot, fa, shapes, nd, frame, *kind, data)
        if found is not None:
            rewrite(ed, prot, fa, nd.name, frame, found)
    return ed.finish()


def float_matmul(prot: Protected, nd: Any) -> tuple[int, bool] | None:
    """(dtype, transpose_b) of a float32/float64 MatMul that may be rewritten (not pinned,
    ``transpose_a`` false), else None."""
    t = attr_type(nd)
    ta, tb = attr(nd, "transpose_a"), attr(nd, "transpose_b")
    if t not in (D.DT_FLOAT, D.DT_DOUBLE) or (ta is not None and ta.b) or prot.pinned(nd.name):
        return None
    return t, tb is not None and tb.b


def node_adder(ed: Editor, name: str, device: str, before: str) -> Any:
    """``add(base, op, inputs, controls=())``: a new node ``<name>/<base>`` on ``device``,
    placed before ``before``, wired; returns its name."""
    from dfg.schemas import node_def_pb2

    def add(base: str, op: str, inputs: list[tuple[str, int]], controls: tuple = ()) -> str:
        new = node_def_pb2.NodeDef(name=ed.unique_name(f"{name}/{base}"), op=op, device=device)
        ed.add(new, before=before)
        ed.set_inputs(new.name, inputs, controls)
        return new.name

    return add


def add_projection(ed: Editor, add: Any, sequence: tuple[str, int], weights: tuple[str, int],
                   transposed: bool, dtype: int) -> str:
    """``Einsum(sequence [T, B, K], weights [K, N] ([N, K] transposed))``: every step's
    product at once."""
    product = add("projection", "Einsum", [sequence, weights])
    p = ed.get(product)
    p.attr["equation"].s = b"abk,nk->abn" if transposed else b"abk,kn->abn"
    p.attr["N"].i = 2
    p.attr["T"].type = dtype
    return product


def become(nd: Any, op: str) -> None:
    """Turn ``nd`` into an ``op`` node without attrs but its ``_output_shapes`` (the same
    tensor under the same name); the caller sets the op's attrs."""
    shapes = attr(nd, "_output_shapes")
    shapes = None if shapes is None else shapes.SerializeToString()
    nd.op = op
    nd.attr.clear()
    if shapes is not None:
        nd.attr["_output_shapes"].ParseFromString(shapes)


def _match(ed: Editor, prot: Protected, fa: Any, shapes: Shapes, nd: Any, frame: str,
           t: int, transposed: bool, data: list) -> tuple | None:
    """(sequence tensor, outer weights, index tensor, get-item node) or None."""
    get = ed.peek(data[0][0])
    if get is None or get.op != "TensorListGetItem" or fa.node_frame.get(get.name) != frame \
            or attr_type(get, "element_dtype") != t or prot.is_fed(get.name):
        return None
    g_in = ed.data_inputs(get.name)
    if len(g_in) != 3:
        return None
    outer_list = _invariant(ed, prot, fa, g_in[0], frame)
    weights = _invariant(ed, prot, fa, data[1], frame)
    if outer_list is None or weights is None:
        return None
    source = _through_identities(ed, prot, outer_list)
    src = ed.peek(source[0]) if source is not None and source[1] == 0 else None
    if src is None or src.op != "TensorListFromTensor" \
            or attr_type(src, "element_dtype") != t:
        return None
    src_in = ed.data_inputs(src.name)
    w_shape = shapes.fully_known(weights)
    if len(src_in) != 2 or w_shape is None or len(w_shape) != 2:
        return None
    k, n = (w_shape[1], w_shape[0]) if transposed else w_shape
    if k <= 0 or n > MAX_GROWTH * k:
        return None
    # the list's element shape, which TensorListFromTensor checks every step against, must
    # say [?, K]: then the one product cannot fail where the loop's would not (a loop that
    # never iterates included)
    es = ed.peek(src_in[1][0])
    es = const_value(es) if es is not None and es.op == "Const" and src_in[1][1] == 0 \
        else None
    if es is None or es.shape != (2,) or int(es[1]) != k:
        return None
    return src_in[0], weights, g_in[1], get.name


def _invariant(ed: Editor, prot: Protected, fa: Any, t: tuple[str, int], frame: str
               ) -> tuple[str, int] | None:
    """The tensor outside loop ``frame`` that ``t`` (read inside it) equals in every
    iteration: through Identity/IdentityN nodes, a constant Enter of the frame, or a loop
    variable whose NextIteration gets back the value its Switch handed to the body; else
    None."""
    seen = set()
    while t not in seen:
        seen.add(t)
        nd = ed.peek(t[0])
        if nd is None or prot.is_fed(nd.name):
            return None
        if nd.op in FORWARDS and fa.node_frame.get(nd.name) == frame:
            t = _forwarded(ed, nd, t)
            continue
        if nd.op == "Enter":
            c, f = attr(nd, "is_constant"), attr(nd, "frame_name")
            ok = c is not None and c.b and f is not None and f.s.decode("utf-8", "replace") \
                == frame
            return ed.data_inputs(nd.name)[0] if ok else None
        if nd.op == "Switch" and t[1] == 1 and fa.node_frame.get(nd.name) == frame:
            return _passed_through(ed, prot, fa, nd, frame)
        return None
    return None


def _passed_through(ed: Editor, prot: Protected, fa: Any, switch: Any, frame: str
                    ) -> tuple[str, int] | None:
    """The Enter's input when ``switch`` is a loop variable's and the body returns it as is."""
    data = ed.data_inputs(switch.name)
    if len(data) != 2:
        return None
    (merge_name, _), (cond_name, _) = data
    merge, cond = ed.peek(merge_name), ed.peek(cond_name)
    if merge is None or cond is None or merge.op != "Merge" or cond.op != "LoopCond":
        return None
    ins = [ed.peek(s) for s, _ in ed.data_inputs(merge_name)]
    enters = [x for x in ins if x is not None and x.op == "Enter"]
    nexts = [x for x in ins if x is not None and x.op == "NextIteration"]
    if len(ins) != 2 or len(enters) != 1 or len(nexts) != 1 or prot.is_fed(merge_name):
        return None
    f = attr(enters[0], "frame_name")
    if f is None or f.s.decode("utf-8", "replace") != frame:
        return None
    back = _through_identities(ed, prot, ed.data_inputs(nexts[0].name)[0], frame, fa)
    if back != (switch.name, 1):
        return None
    return ed.data_inputs(enters[0].name)[0]


def _through_identities(ed: Editor, prot: Protected, t: tuple[str, int],
                        frame: str | None = None, fa: Any = None) -> tuple[str, int] | None:
    """``t`` followed back through Identity/IdentityN nodes (of ``frame`` when given)."""
    seen = set()
    while t not in seen:
        seen.add(t)
        nd = ed.peek(t[0])
        if nd is None or nd.op not in FORWARDS or prot.is_fed(nd.name) \
                or frame is not None and fa.node_frame.get(nd.name) != frame:
            return t
        t = _forwarded(ed, nd, t)
    return None


def _forwarded(ed: Editor, nd: Any, t: tuple[str, int]) -> tuple[str, int]:
    """The input an Identity's output, or an IdentityN's output k, is."""
    data = ed.data_inputs(nd.name)
    return data[t[1]] if nd.op == "IdentityN" and t[1] < len(data) else data[0]


def _rewrite(ed: Editor, prot: Protected, fa: Any, name: str, frame: str,
             match: tuple) -> None:
    sequence, weights, index, get = match
    nd = ed.get(name)
    t, device = nd.attr["T"].type, nd.device
    tb = attr(nd, "transpose_b")
    before = fa.frames[frame].enters[0] if fa.frames[frame].enters else name
    add = node_adder(ed, name, device, before)
    product = add_projection(ed, add, sequence, weights, tb is not None and tb.b, t)
    # an unknown element shape (-1), live when the sequence is
    shape = ed.make_const(ed.unique_name(f"{name}/projection/element_shape"),
                          np.int32(-1), D.DT_INT32, [sequence[0]],
                          device=device, before=before)
    steps = add("projection/list", "TensorListFromTensor", [(product, 0), (shape.name, 0)])
    lst = ed.get(steps)
    lst.attr["element_dtype"].type = t
    lst.attr["shape_type"].type = D.DT_INT32
    enters = []
    for src, dt in ((steps, D.DT_VARIANT), (shape.name, D.DT_INT32)):
        e = add(f"projection/enter_{len(enters)}", "Enter", [(src, 0)])
        make_constant_enter(ed, fa, ed.get(e), dt, frame)
        enters.append(e)
    controls = [*ed.control_inputs(name), *ed.control_inputs(get)]
    become(nd, "TensorListGetItem")
    nd.attr["element_dtype"].type = t
    ed.set_inputs(name, [(enters[0], 0), index, (enters[1], 0)], controls)
    if not ed.readers.get(get) and not prot.keeps_name(get):
        ed.remove(get)
