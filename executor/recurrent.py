"""A recurrent layer's loop run in compiled code: its iterations without the interpreter.

A Keras LSTM, GRU or SimpleRNN layer (TF2's While, lowered, or its functional form), once the
optimizer has hoisted its input projection and fused its cell (passes/hoist_projection.py,
passes/fuse_elementwise.py), is a loop whose iteration is: two counters stepped and compared
with their bounds, the state times the recurrent matrix (MatMul), the iteration's input row
read from a list (TensorListGetItem), the cell's elementwise chain (``_DfgElementwiseChain``)
making the next states, and the output row stored in a list (TensorListSetItem). Generated
code (codegen.py) runs that in about 18 us an iteration at 16 rows and 64 units, a third of it
Python around the two compiled kernels. Here the loop's iterations run in C
(executor/native/recurrent.c) without the GIL: the same product (``_native.small_matmul_plan``,
the direct kernel the MatMul's array form takes for these shapes), the same chain sweep
(``Sweep``, the one the chain's array form runs) on the same operands, so the same bits.

:func:`match` reads a loop's IR once, when its program is compiled; it answers a
:class:`Runner` only for exactly that shape (anything else: None, and the loop runs as
generated code). The runner is called where the loop starts, on the values of the slots it
reads; it declines (None) whenever this run's values are not what the compiled loop takes:
not float32, not contiguous, a product BLAS computes, an input row that is not a stored
array, counters that are not integers, a budget the outputs would exceed. Then, and for
whatever iterations it leaves, the generated loop runs as before, kernel by kernel. When it
runs, the loop's counters, states and output list are what the iterations it ran would have
made, and the generated loop's next test of its predicate ends the loop.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .kernels import _native
from .kernels.tensor_list import get_rows, set_rows
from .program_ir import If, KernelStep, LoopIR, Select

_F32 = np.dtype(np.float32)
# iterations per call of the compiled loop: the step's cancel flag is read between calls
CHUNK = 256
_INT_TYPES = (int, np.integer)


class Runner(NamedTuple):
    """What :func:`match` found, by slot. ``reads``: the slots the runner is called on, in
    order; ``writes``: the loop variables it returns the values of, in order."""

    reads: tuple
    writes: tuple
    terms: tuple        # (counter slot, bound slot) of each Less the predicate ANDs
    counters: tuple     # (counter slot, increment slot)
    mm: KernelStep      # state @ recurrent matrix
    get: KernelStep     # the input row
    chain: KernelStep   # the cell
    chain_fn: Any       # the chain's array form (its ``sweep_for``)
    put: KernelStep     # the output row
    states: tuple       # (state slot, the chain output that is its next value)
    list_var: int       # the output list's slot
    item_out: int       # the chain output stored in the list
    index: int          # the counter the input row is read at
    put_index: int      # where the output row goes: ``index``, or an outside value

    def __call__(self, ctl: Any, max_bytes: int | None, *values: Any) -> Any:
        return run(self, ctl, max_bytes, values)


def match(lp: LoopIR, invariant: set[int]) -> Runner | None:
    """The runner of loop ``lp`` (see the module docstring), or None. ``invariant``: the
    kernel steps (``id``) generated code runs in the first iteration only (a GRU splits its
    bias there): their outputs are values the loop does not change, and the runner is asked
    after that first iteration."""
    if not lp.body or any(type(st) in (If, Select, LoopIR) for st in [*lp.pre, *lp.body]):
        return None
    steps = [st for st in [*lp.pre, *lp.body] if id(st) not in invariant]
    produced = {st.out + k: st for st in steps for k in range(st.item.num_outputs)}
    variables = {m[0]: m for m in lp.merges}
    if any(m[1] is not None for m in lp.merges):
        return None                         # a loop variable's value_index is read

    def outside(slot: int) -> bool:         # a value the loop does not change
        return slot not in produced and (slot not in variables or variables[slot][3] == slot)

    by_op: dict[str, list[KernelStep]] = {}
    for st in steps:
        if st.stateful:
            return None
        by_op.setdefault(st.item.op, []).append(st)
    if set(by_op) - {"Less", "LogicalAnd", "AddV2", "Add", "MatMul", "TensorListGetItem",
                     "_DfgElementwiseChain", "TensorListSetItem"}:
        return None
    if any(len(by_op.get(op, ())) != 1 for op in ("MatMul", "TensorListGetItem",
                                                  "_DfgElementwiseChain",
                                                  "TensorListSetItem")):
        return None
    (mm,), (get,), (chain,), (put,) = (by_op[op] for op in (
        "MatMul", "TensorListGetItem", "_DfgElementwiseChain", "TensorListSetItem"))
    # the counters: loop variables stepped by an outside increment
    counters = []
    for st in [*by_op.get("AddV2", ()), *by_op.get("Add", ())]:
        var, inc = st.args
        if var not in variables or variables[var][3] != st.out or not outside(inc):
            return None
        counters.append((var, inc))
    counter_slots = {c for c, _i in counters}
    # the predicate: an AND of Less(counter, outside bound), computed in the pre part
    if any(st.item.op not in ("Less", "LogicalAnd") for st in lp.pre) \
            or any(st.item.op in ("Less", "LogicalAnd") for st in lp.body):
        return None
    terms = []
    for st in by_op.get("Less", ()):
        c, bound = st.args
        if c not in counter_slots or not outside(bound):
            return None
        terms.append((st.out, c, bound))
    less_out = {t[0] for t in terms}
    conj: dict[int, set] = {t[0]: {t[0]} for t in terms}
    for st in by_op.get("LogicalAnd", ()):
        a, b = st.args
        if a not in conj or b not in conj:
            return None
        conj[st.out] = conj[a] | conj[b]
    if conj.get(lp.pred_slot) != less_out or not terms:
        return None
    if mm.item.attrs.get("transpose_a") or mm.args[0] not in variables \
            or not outside(mm.args[1]):
        return None
    glist, gindex, gshape = get.args
    if not outside(glist) or gindex not in counter_slots or not outside(gshape):
        return None
    plist, pindex, pitem = put.args
    # the output row goes where the input row came from, or always to one index (a layer
    # returning its last output only)
    if plist not in variables or variables[plist][3] != put.out \
            or (pindex != gindex and not outside(pindex)):
        return None
    n_out = chain.item.num_outputs
    outs = {chain.out + k: k for k in range(n_out)}
    if pitem not in outs:
        return None
    # every loop variable: a counter, an outside value, the list, or a state the chain makes
    states = []
    for vs, _ix, _init, nx, _i0, _i1 in lp.merges:
        if vs in counter_slots or nx == vs or vs == plist:
            continue
        if nx not in outs:
            return None
        states.append((vs, outs[nx]))
    state_slots = {s for s, _k in states}
    if mm.args[0] not in state_slots or len(states) > 8 or len({k for _s, k in states}) \
            != len(states):
        return None
    for a in chain.args:
        if a not in (get.out, mm.out) and a not in state_slots and not outside(a):
            return None
    fn = chain.item.spec.array.function(chain.item.input_dtypes, chain.item.attrs) \
        if chain.item.spec.array is not None else None
    if fn is None or getattr(fn, "sweep_for", None) is None:
        return None
    reads = tuple(dict.fromkeys([
        *(c for c, _i in counters), *(i for _c, i in counters),
        *(b for _o, _c, b in terms), mm.args[1], glist, plist, pindex,
        *(s for s, _k in states), *(a for a in chain.args if outside(a))]))
    writes = (*(c for c, _i in counters), *(s for s, _k in states), plist)
    return Runner(reads, writes, tuple((c, b) for _o, c, b in terms), tuple(counters), mm,
                  get, chain, fn, put, tuple(states), plist, outs[pitem], gindex, pindex)


def _int(v: Any) -> int | None:
    if v.__class__ is np.ndarray and v.ndim == 0:
        v = v[()]
    if isinstance(v, _INT_TYPES) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


def run(r: Runner, ctl: Any, max_bytes: int | None, values: tuple) -> Any:
    """``r``'s iterations on this run's ``values`` (of ``r.reads``): (iterations run, the new
    values of ``r.writes``), or None when the loop must run as generated code."""
    if ctl.error is not None or _native.extension() is None:
        return None
    val = dict(zip(r.reads, values))
    # how many iterations the predicate holds for: each Less(counter, bound) of the AND
    incs = {c: _int(val[i]) for c, i in r.counters}
    n = None
    for c, b in r.terms:
        start, bound, inc = _int(val[c]), _int(val[b]), incs[c]
        if start is None or bound is None or inc is None or inc <= 0:
            return None
        k = max(0, -(-(bound - start) // inc))
        n = k if n is None else min(n, k)
    if not n or incs.get(r.index) != 1:
        return None
    t0 = _int(val[r.index])
    if any(_int(val[c]) is None or incs[c] is None for c, _i in r.counters):
        return None
    st = dict(r.states)
    init = {s: val[s] for s in st}
    mm_state = r.mm.args[0]
    w = val[r.mm.args[1]]
    h = init[mm_state]
    if h.__class__ is not np.ndarray or w.__class__ is not np.ndarray or h.ndim != 2 \
            or w.ndim != 2:
        return None
    plan = _native.small_matmul_plan(h, w, bool(r.mm.item.attrs.get("transpose_b")))
    if plan is None:
        return None
    _ref, wb, geometry, p_shape = plan
    attrs = r.get.item.attrs
    rows = get_rows(val[r.get.args[0]], t0, n, attrs["element_dtype"])
    if rows is None:
        return None
    shape0 = rows[0].shape
    for x in rows:
        if x.dtype is not _F32 or x.shape != shape0 or not x.flags.c_contiguous:
            return None
    # the chain's operands, and how the sweep reads them (its plan for these shapes)
    args = []
    for a in r.chain.args:
        v = rows[0] if a == r.get.out else np.empty(p_shape, _F32) if a == r.mm.out \
            else val[a]
        if v.__class__ is not np.ndarray or v.dtype is not _F32 or not v.flags.c_contiguous:
            return None
        args.append(v)
    sweep = r.chain_fn.sweep_for(tuple(x.shape for x in args))
    if sweep is None or 4 in sweep.kinds:
        return None
    out_shape = sweep.out_shape
    for s in st:
        if init[s].shape != out_shape and s != mm_state:
            return None
    if init[mm_state].shape != out_shape:
        return None     # the product's state is made by the chain: of its shape
    item_bytes = 4 * int(np.prod(out_shape))
    if max_bytes is not None and max(item_bytes, 4 * int(np.prod(p_shape))) > max_bytes:
        return None     # an output over the budget: the kernel says so
    slot_state = {s: i for i, s in enumerate(st)}
    roles, fixed = [], []
    for j in sweep.srcs:
        a = r.chain.args[j]
        roles.append(-2 if a == r.get.out else -3 if a == r.mm.out
                     else slot_state[a] if a in slot_state else -1)
        fixed.append(args[j] if roles[-1] == -1 else None)
    n_extra = 0 if sweep.extra is None else len(sweep.extra) // 4
    # the chain's outputs in the sweep's order: the extra ones, then the last (the node's
    # outputs are in that order too: ``hit`` returns (*more, out))
    out_state = [-1] * (n_extra + 1)
    for s, k in r.states:
        out_state[k] = slot_state[s]
    product = np.empty(p_shape, _F32)
    # every output row stays in the list, or only the last (a layer returning its last
    # output): then one chunk's rows, written again by each chunk
    ring = r.put_index != r.index
    items = np.empty((min(n, CHUNK) if ring else n, *out_shape), _F32)
    states = list(st)
    scratch_a = tuple(np.empty(out_shape, _F32) if st[s] != r.item_out else None
                      for s in states)
    scratch_b = tuple(np.empty(out_shape, _F32) if st[s] != r.item_out else None
                      for s in states)
    current = [init[s] for s in states]
    ext = _native.extension()
    roles_b = np.array(roles, np.int32).tobytes()
    outs_b = np.array(out_state, np.int32).tobytes()
    done = 0
    while done < n:
        if ctl.error is not None:
            break
        k = min(CHUNK, n - done)
        at = 0 if ring else done
        try:
            where = ext.recurrent_f32(
                tuple(rows[done:done + k]), wb, geometry, product, slot_state[mm_state],
                roles_b, sweep.kinds, sweep.layout, tuple(fixed), sweep.code, sweep.rows,
                sweep.cols, sweep.extra, outs_b, r.item_out, items[at:at + k],
                tuple(current), scratch_a, scratch_b)
        except (TypeError, ValueError, MemoryError):
            return None     # what the kernels would say, they say when the loop runs them
        last = items[at + k - 1]
        for i, wh in enumerate(where):
            if wh == 3:
                # the rows are written again by the next chunk of a ring: kept apart
                current[i] = last.copy() if ring and done + k < n else last
            elif wh == 1:
                current[i] = scratch_a[i]
            elif wh == 2:
                current[i] = scratch_b[i]
        if any(wh in (1, 2) for wh in where) and done + k < n:
            # the next call reads them as first values and writes the scratch buffers
            current = [c.copy() if wh in (1, 2) else c for c, wh in zip(current, where)]
        done += k
    if not done:
        return None
    if not ring:
        put_at, put = t0, list(items[:done])
    else:   # every iteration sets one index: the last one's row is what stays there
        put_at, put = _int(val[r.put_index]), [last if done == n else last.copy()]
        if put_at is None:
            return None
    out_list = set_rows(r.put.item.attrs["element_dtype"], val[r.list_var], put_at, put)
    if out_list is None:
        return None
    new = {}
    for c, i in r.counters:
        v, inc = val[c], val[i]
        for _ in range(done):
            v = v + inc
        new[c] = v
    for s, cur in zip(states, current):
        new[s] = cur
    new[r.list_var] = out_list
    return done, tuple(new[s] for s in r.writes)
