"""Pass ``hoist_concat_projection``: a TF1 recurrent cell's input projection, every step in
one product.

A TF1 cell under ``tf.compat.v1.nn.dynamic_rnn`` (BasicLSTMCell, LSTMCell, GRUCell, or a
cell written the same way) reads step ``t`` of its input from a TensorArray the loop's
caller scattered the sequence into, and multiplies the concatenation of that step and the
state by one kernel: ``MatMul(ConcatV2([TensorArrayReadV3(ta, t), h], 1), W)``. That product
is ``x_t . W_x + h . W_h``, with ``W_x`` and ``W_h`` the kernel's rows for the input and for
the state. ``x_t . W_x`` depends on nothing the loop changes, so for every step it is one
matrix product computed before the loop (one large GEMM, which BLAS runs at full speed and
on every core, as cuDNN and Keras's fused kernels compute the input projection up front);
the loop then multiplies only the state, and no longer builds the concatenation.

Matched, in a loop frame F: a float32/float64 ``MatMul`` (``transpose_a`` false) whose first
input is a two-input ``ConcatV2`` along axis 1 (or -1) read by nothing else, one of whose
inputs is a ``TensorArrayReadV3`` in F of a TensorArray invariant in F, with the flow of a
``TensorArrayScatterV3`` of a sequence ``X`` of static shape ``[?, ?, K_x]`` made outside
the loop (the array's handle read only by that scatter and by Enters whose readers only
read or size it: nothing else writes it), and whose second input is invariant in F with a
static shape ``[K, N]`` (``[N, K]`` for ``transpose_b``), ``K > K_x``. Before the loop:
``P = Einsum(X, W_x)``, scattered into a new TensorArray like the first (same size, same
indices); in the loop, the MatMul becomes ``AddN(TensorArrayReadV3(P's array, t),
MatMul(h, W_h))`` with the MatMul's name and control inputs, so its readers, its deadness
and a fetch of it are unchanged. Every op is TensorFlow's own, so TensorFlow runs the result.

Shapes: the concatenation required ``x_t`` and ``h`` to have the same rows, and the product
``K_x + K_h = K``. ``MatMul(h, W_h)`` requires ``h`` to have ``K - K_x`` columns, and AddN
requires both terms to have the same shape (never broadcasting, as an AddV2 would): so the
rewritten loop fails where the original fails, with the AddN's or MatMul's message instead
of the ConcatV2's.

Values: the product is split into two partial sums over the kernel's rows, then added:
within a few float32 ulp of the one product (a GEMM sums its inner dimension in blocks of
its own choosing anyway; tests/test_optimizer_precision.py holds the result to Grappler's
precision against exact values). ``P`` holds ``N / K_x`` times the sequence's elements; the
pass declines above :data:`MAX_GROWTH`, as ``hoist_projection`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as D
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
from .hoist_projection import (
    MAX_GROWTH,
    _invariant,
    add_projection,
    become,
    hoist_loop_matmuls,
    node_adder,
)

# ops that may read an Enter of the TensorArray's handle without changing its elements
_ARRAY_READERS = frozenset({"TensorArrayReadV3", "TensorArraySizeV3"})


def run(graph: Graph, options: PassOptions) -> Any:
    return hoist_loop_matmuls(graph, options, "TensorArrayReadV3", _match, _rewrite)


def _match(ed: Editor, prot: Protected, fa: Any, shapes: Shapes, nd: Any, frame: str,
           t: int, transposed: bool, data: list) -> dict | None:
    concat = ed.peek(data[0][0])
    if concat is None or concat.op != "ConcatV2" or fa.node_frame.get(concat.name) != frame \
            or attr_type(concat) != t or prot.pinned(concat.name) \
            or prot.keeps_name(concat.name) or ed.control_readers(concat.name) \
            or ed.data_readers(concat.name) != [(nd.name, 0)]:
        return None
    parts = ed.data_inputs(concat.name)
    if len(parts) != 3:
        return None
    axis = ed.peek(parts[2][0])
    axis = const_value(axis) if axis is not None and axis.op == "Const" else None
    if axis is None or axis.shape != () or int(axis) not in (1, -1):
        return None
    for pos in (0, 1):
        read = _array_read(ed, prot, fa, parts[pos], frame, t)
        if read is not None:
            break
    else:
        return None
    sequence, scatter, array = read["sequence"], read["scatter"], read["array"]
    weights = _invariant(ed, prot, fa, data[1], frame)
    if weights is None and ed.op(data[1][0]) == "Const" and data[1][1] == 0:
        weights = data[1]       # a constant in the loop (only its value is used)
    w_shape = shapes.fully_known(weights) if weights is not None else None
    kx = _step_width(shapes.of(sequence), attr(ed.peek(array[0]), "element_shape"))
    if kx is None or w_shape is None or len(w_shape) != 2:
        return None
    k, n = (w_shape[1], w_shape[0]) if transposed else w_shape
    if not 0 < kx < k or n > MAX_GROWTH * kx:
        return None
    # the kernel's rows for the input (first in the concatenation when pos is 0)
    rows_x = (0, kx) if pos == 0 else (k - kx, k)
    rows_h = (kx, k) if pos == 0 else (0, k - kx)
    return {"concat": concat.name, "read": read["node"], "other": parts[1 - pos],
            "sequence": sequence, "scatter": scatter, "array": array, "weights": weights,
            "rows_x": rows_x, "rows_h": rows_h, "transposed": transposed, "dtype": t}


def _step_width(seq: Any, element_shape: Any) -> int | None:
    """The columns of one step ``[B, K_x]`` of a sequence of static shape ``seq``, or of
    the array's ``element_shape`` (which every write and scatter is checked against); None
    when neither says, or they disagree, or a step is not a matrix."""
    widths = set()
    if seq is not None:
        if len(seq) != 3:
            return None
        if seq[2] is not None:
            widths.add(seq[2])
    if element_shape is not None and not element_shape.shape.unknown_rank:
        dims = element_shape.shape.dim
        if len(dims) != 2:
            return None
        if dims[1].size >= 0:
            widths.add(dims[1].size)
    return widths.pop() if len(widths) == 1 else None


def _array_read(ed: Editor, prot: Protected, fa: Any, t: tuple[str, int], frame: str,
                dtype: int) -> dict | None:
    """What ``t`` reads when it is step ``index`` of a TensorArray invariant in ``frame``
    that a scatter outside filled and nothing else writes: the read node, the sequence, the
    scatter and the array (TensorArrayV3 outputs); else None."""
    rd = ed.peek(t[0])
    if rd is None or t[1] != 0 or rd.op != "TensorArrayReadV3" \
            or fa.node_frame.get(rd.name) != frame or attr_type(rd, "dtype") != dtype \
            or prot.is_fed(rd.name):
        return None
    r_in = ed.data_inputs(rd.name)
    if len(r_in) != 3:
        return None
    handle = _invariant(ed, prot, fa, r_in[0], frame)
    flow = _invariant(ed, prot, fa, r_in[2], frame)
    if handle is None or flow is None or handle[1] != 0 or flow[1] != 0:
        return None
    scatter, array = ed.peek(flow[0]), ed.peek(handle[0])
    if scatter is None or array is None or scatter.op != "TensorArrayScatterV3" \
            or array.op != "TensorArrayV3" or attr_type(scatter) != dtype \
            or attr_type(array, "dtype") != dtype or prot.is_fed(scatter.name) \
            or prot.is_fed(array.name):
        return None
    s_in = ed.data_inputs(scatter.name)
    if len(s_in) != 4 or s_in[0] != handle or s_in[3] != (array.name, 1):
        return None
    # nothing else writes the array: its handle goes only to this scatter and into loops
    # whose readers only read it
    for reader, _slot in ed.data_readers(array.name, 0):
        if reader == scatter.name:
            continue
        r = ed.peek(reader)
        if r is None or r.op != "Enter" or any(
                ed.op(x) not in _ARRAY_READERS for x, _s in ed.data_readers(reader)):
            return None
    return {"node": rd.name, "index": r_in[1], "sequence": s_in[2], "scatter": scatter.name,
            "array": (array.name, 0)}


def _rewrite(ed: Editor, prot: Protected, fa: Any, name: str, frame: str, m: dict) -> None:
    nd = ed.get(name)
    t, device = m["dtype"], nd.device
    before = fa.frames[frame].enters[0] if fa.frames[frame].enters else name
    add = node_adder(ed, name, device, before)
    # the kernel's two row blocks, outside the loop (in the sequence's frame: a control
    # input from it places a constant there in a nested loop too)
    w_x, w_h = _row_blocks(ed, m, name, device, before, m["sequence"][0], add)
    product = add_projection(ed, add, m["sequence"], (w_x, 0), m["transposed"], t)
    # a TensorArray like the input's (same size, same flags), the product scattered into it
    # at the same indices
    src = ed.peek(m["array"][0])
    arr = add("projection/array", "TensorArrayV3", [ed.data_inputs(src.name)[0]])
    a = ed.get(arr)
    for key in ("dynamic_size", "clear_after_read", "identical_element_shapes"):
        if key in src.attr:
            a.attr[key].CopyFrom(src.attr[key])
    a.attr["dtype"].type = t
    a.attr["element_shape"].shape.unknown_rank = True
    a.attr["tensor_array_name"].s = b""
    scatter_in = ed.data_inputs(m["scatter"])
    filled = add("projection/scatter", "TensorArrayScatterV3",
                 [(arr, 0), scatter_in[1], (product, 0), (arr, 1)])
    ed.get(filled).attr["T"].type = t
    enters = []
    for src_t, dt in (((arr, 0), D.DT_RESOURCE), ((filled, 0), D.DT_FLOAT),
                      ((w_h, 0), t)):
        e = add(f"projection/enter_{len(enters)}", "Enter", [src_t])
        make_constant_enter(ed, fa, ed.get(e), dt, frame)
        enters.append(e)
    read_in = ed.data_inputs(m["read"])
    step = add("projection/read", "TensorArrayReadV3",
               [(enters[0], 0), read_in[1], (enters[1], 0)])
    ed.get(step).attr["dtype"].type = t
    state = add("recurrent", "MatMul", [m["other"], (enters[2], 0)])
    s = ed.get(state)
    s.attr["T"].type = t
    s.attr["transpose_a"].b = False
    s.attr["transpose_b"].b = m["transposed"]
    controls = [*ed.control_inputs(name), *ed.control_inputs(m["concat"])]
    become(nd, "AddN")
    nd.attr["N"].i = 2
    nd.attr["T"].type = t
    ed.set_inputs(name, [(step, 0), (state, 0)], controls)
    ed.remove(m["concat"])
    read = m["read"]
    if not ed.data_readers(read) and not ed.control_readers(read) \
            and not prot.keeps_name(read):
        ed.remove(read)


def _row_blocks(ed: Editor, m: dict, name: str, device: str, before: str, seq_node: str,
                add: Any) -> tuple[str, str]:
    """Nodes outside the loop holding the kernel's rows for the input and for the state
    (columns, for a transposed kernel): constants when the kernel is one, else Slices."""
    w = m["weights"]
    wn = ed.peek(w[0])
    value = const_value(wn) if wn is not None and wn.op == "Const" and w[1] == 0 else None
    axis = 1 if m["transposed"] else 0
    out = []
    for tag, (lo, hi) in (("input", m["rows_x"]), ("state", m["rows_h"])):
        if value is not None:
            block = np.take(value, np.arange(lo, hi), axis=axis)
            c = ed.make_const(ed.unique_name(f"{name}/kernel_{tag}"), block, m["dtype"],
                              [seq_node], device=device, before=before)
            out.append(c.name)
            continue
        begin = [0, 0]
        size = [-1, -1]
        begin[axis], size[axis] = lo, hi - lo
        ins = []
        for part, v in (("begin", begin), ("size", size)):
            c = ed.make_const(ed.unique_name(f"{name}/kernel_{tag}/{part}"),
                              np.array(v, np.int32), D.DT_INT32, [seq_node], device=device,
                              before=before)
            ins.append((c.name, 0))
        sl = add(f"kernel_{tag}", "Slice", [w, *ins])
        s = ed.get(sl)
        s.attr["T"].type = m["dtype"]
        s.attr["Index"].type = D.DT_INT32
        out.append(sl)
    return out[0], out[1]
