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

A masked layer (after ``Embedding(mask_zero=True)``) also reads a mask row from a second
list each iteration (tiled, or broadcast by SelectV2) and makes each state with ``Select(mask,
the chain's output, the state)``: the compiled loop then copies each state's rows from the
chain's output or its own value by the mask's bytes (recurrent.c), the output row being one
of the states (the layer's previous output).

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
# each integer dtype's range (np.iinfo costs microseconds a call)
_LIMITS = {np.dtype(c): (int(np.iinfo(c).min), int(np.iinfo(c).max)) for c in "bBhHiIlLqQ"}


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
    # (state slot, the chain output that is its next value, whether chosen by the mask)
    states: tuple
    list_var: int       # the output list's slot
    item_out: int       # the chain output stored in the list
    index: int          # the counter the input row is read at
    put_index: int      # where the output row goes: ``index``, or an outside value
    # a masked layer (Keras's ``mask_zero``): the mask's TensorListGetItem, the Tile of its
    # row (or None), the state whose new value is the output row, and whether a Select (not
    # SelectV2: no broadcasting) needs the mask tiled across the units; else None, -1
    mask: KernelStep | None
    tile: KernelStep | None
    item_state: int
    full_mask: bool
    # shapes, the matrix and the budget -> ``_setup``'s answer (entries set and dropped
    # whole under the GIL; cleared past 64)
    memo: dict

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
                     "_DfgElementwiseChain", "TensorListSetItem", "SelectV2", "Select",
                     "Tile"}:
        return None
    if any(len(by_op.get(op, ())) != 1 for op in ("MatMul", "_DfgElementwiseChain",
                                                  "TensorListSetItem")) \
            or len(by_op.get("TensorListGetItem", ())) not in (1, 2) \
            or len(by_op.get("Tile", ())) > 1:
        return None
    (mm,), (chain,), (put,) = (by_op[op] for op in (
        "MatMul", "_DfgElementwiseChain", "TensorListSetItem"))
    # the input rows' list, and a masked layer's list of masks (bool rows)
    gets = by_op["TensorListGetItem"]
    masks = [g for g in gets if _is_bool(g.item.attrs.get("element_dtype"))]
    if len(gets) - len(masks) != 1 or len(masks) > 1:
        return None
    (get,) = (g for g in gets if g not in masks)
    mask = masks[0] if masks else None
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
    # a masked layer: the mask row (tiled across the units) chooses, row by row, between a
    # chain output and the state's own value: Select(mask, output, state)
    tile = by_op.get("Tile", [None])[0]
    cond = None
    if mask is not None:
        if mask.args[1] != gindex or not outside(mask.args[0]) or not outside(mask.args[2]):
            return None
        cond = mask.out
        if tile is not None:
            if tile.args[0] != mask.out or not outside(tile.args[1]):
                return None
            cond = tile.out
    elif tile is not None:
        return None
    selects = {st.out: st for op in ("SelectV2", "Select") for st in by_op.get(op, ())}
    if selects and cond is None:
        return None
    # every loop variable: a counter, an outside value, the list, or a state the chain makes
    # (through the mask's Select on a masked layer)
    states = []
    for vs, _ix, _init, nx, _i0, _i1 in lp.merges:
        if vs in counter_slots or nx == vs or vs == plist:
            continue
        if nx in outs:
            states.append((vs, outs[nx], False))
            continue
        sel = selects.get(nx)
        if sel is None or sel.args[0] != cond or sel.args[1] not in outs or sel.args[2] != vs:
            return None
        states.append((vs, outs[sel.args[1]], True))
    state_slots = {s for s, _k, _m in states}
    next_of = {m[3]: m[0] for m in lp.merges}
    if mm.args[0] not in state_slots or len(states) > 8:
        return None
    if len({nx for nx in next_of if nx in selects}) != len(selects):
        return None                         # a Select that makes no state
    item_state = -1
    if mask is None:
        if pitem not in outs or len({k for _s, k, _m in states}) != len(states):
            return None
    else:
        # the output row is a state's new value (the layer's previous output, masked)
        if next_of.get(pitem) not in state_slots:
            return None
        item_state = [s for s, _k, _m in states].index(next_of[pitem])
    for a in chain.args:
        if a not in (get.out, mm.out) and a not in state_slots and not outside(a):
            return None
    fn = chain.item.spec.array.function(chain.item.input_dtypes, chain.item.attrs) \
        if chain.item.spec.array is not None else None
    if fn is None or getattr(fn, "sweep_for", None) is None:
        return None
    masked = () if mask is None else (mask.args[0], *(() if tile is None else tile.args[1:]))
    reads = tuple(dict.fromkeys([
        *(c for c, _i in counters), *(i for _c, i in counters),
        *(b for _o, _c, b in terms), mm.args[1], glist, plist, pindex,
        *(s for s, _k, _m in states), *(a for a in chain.args if outside(a)), *masked]))
    writes = (*(c for c, _i in counters), *(s for s, _k, _m in states), plist)
    return Runner(reads, writes, tuple((c, b) for _o, c, b in terms), tuple(counters), mm,
                  get, chain, fn, put, tuple(states), plist, outs.get(pitem, -1), gindex,
                  pindex, mask, tile, item_state, bool(by_op.get("Select")), {})


def _is_bool(dtype: Any) -> bool:
    try:
        return np.dtype(dtype) == np.bool_
    except (TypeError, ValueError):     # a DataType numpy has no dtype for
        return False


def _int(v: Any) -> int | None:
    if v.__class__ is np.ndarray and v.ndim == 0:
        v = v[()]
    if isinstance(v, _INT_TYPES) and not isinstance(v, (bool, np.bool_)):
        return int(v)
    return None


def _setup(r: Runner, val: dict, rows0: np.ndarray, max_bytes: int | None) -> tuple | None:
    """What a run of ``r`` needs that depends only on the shapes and the constant matrix
    (kept in ``r.memo`` per those): the packed matrix and the product's geometry, the chain's
    sweep, each operand's role, each output's state; None when they are not what the compiled
    loop takes."""
    mm_state = r.mm.args[0]
    w, h = val[r.mm.args[1]], val[mm_state]
    if h.__class__ is not np.ndarray or w.__class__ is not np.ndarray or h.ndim != 2 \
            or w.ndim != 2:
        return None
    plan = _native.small_matmul_plan(h, w, bool(r.mm.item.attrs.get("transpose_b")))
    if plan is None:
        return None
    ref, wb, geometry, p_shape = plan
    # the chain's operands' shapes, and how the sweep reads them (its plan for these shapes)
    shapes = []
    for a in r.chain.args:
        v = rows0 if a == r.get.out else None if a == r.mm.out else val[a]
        if v is not None and (v.__class__ is not np.ndarray or v.dtype is not _F32):
            return None
        shapes.append(p_shape if v is None else v.shape)
    sweep = r.chain_fn.sweep_for(tuple(shapes))
    if sweep is None or 4 in sweep.kinds:
        return None
    out_shape = sweep.out_shape
    states = [s for s, _k, _m in r.states]
    if any(val[s].__class__ is not np.ndarray or val[s].shape != out_shape for s in states):
        return None     # every state is made by the chain: of its outputs' shape
    if max_bytes is not None and 4 * max(int(np.prod(out_shape)), int(np.prod(p_shape))) \
            > max_bytes:
        return None     # an output over the budget: the kernel says so
    slot_state = {s: i for i, s in enumerate(states)}
    roles = [-2 if a == r.get.out else -3 if a == r.mm.out
             else slot_state[a] if a in slot_state else -1
             for a in (r.chain.args[j] for j in sweep.srcs)]
    fixed = tuple(r.chain.args[j] if role == -1 else None
                  for j, role in zip(sweep.srcs, roles))
    n_extra = 0 if sweep.extra is None else len(sweep.extra) // 4
    # the chain's outputs in the sweep's order: the extra ones, then the last (the node's
    # outputs are in that order too: ``hit`` returns (*more, out))
    out_state = [-1] * (n_extra + 1)
    if r.mask is None:
        for s, k, _m in r.states:
            out_state[k] = slot_state[s]
        scratch = tuple(k != r.item_out for _s, k, _m in r.states)
        masking = None
    else:
        # a masked layer: every state from its output row by row (module.c: state_src,
        # state_sel), the item state's new value written to the output row
        scratch = tuple(i != r.item_state for i in range(len(r.states)))
        masking = (np.array([k for _s, k, _m in r.states], np.int32).tobytes(),
                   np.array([m for _s, _k, m in r.states], np.int32).tobytes(), n_extra + 1)
        if len(out_shape) != 2:
            return None     # the mask selects rows of (rows, units) states
    return (ref, wb, geometry, p_shape, sweep, np.array(roles, np.int32).tobytes(), fixed,
            np.array(out_state, np.int32).tobytes(), slot_state[mm_state], scratch, masking)


def _mask_rows(r: Runner, val: dict, t0: int, n: int, out_shape: tuple) -> tuple | None:
    """A masked layer's mask rows for iterations t0..t0+n-1: bool, one value per state row,
    broadcast across its units (a Tile by (1, units) of (rows, 1), or SelectV2's broadcast of
    (rows, 1)); None when they are anything else."""
    got = get_rows(val[r.mask.args[0]], t0, n, r.mask.item.attrs["element_dtype"])
    if got is None or len(out_shape) != 2:
        return None
    rows, units = out_shape
    # Keras tiles it by (1, 1) and leaves the broadcast to SelectV2, or by (1, units)
    if r.tile is not None:
        mult = val[r.tile.args[1]]
        if mult.__class__ is not np.ndarray or mult.shape != (2,) or mult.dtype.kind not in "iu" \
                or int(mult[0]) != 1 or int(mult[1]) not in (1, units) \
                or (r.full_mask and int(mult[1]) != units):
            return None
    elif r.full_mask:
        return None
    want = (rows, 1)
    for m in got:
        if m.dtype != np.bool_ or m.shape != want or not m.flags.c_contiguous:
            return None
    return tuple(got)


def _stepped(v: Any, inc: Any, n: int) -> Any:
    """``v + inc`` applied ``n`` times, as the generated loop's scalar forms compute it: one
    addition for the result's type, then the sum in that type when it holds it."""
    one = v + inc
    total = int(v) + n * int(inc)
    if isinstance(one, np.integer):
        lo, hi = _LIMITS[one.dtype]
        if not lo <= total <= hi:
            for _ in range(n - 1):      # wrapping: as the additions one by one
                one = one + inc
            return one
    return one.__class__(total)


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
    rows = get_rows(val[r.get.args[0]], t0, n, r.get.item.attrs["element_dtype"])
    if rows is None:
        return None
    shape0 = rows[0].shape
    if any(x.shape != shape0 for x in rows):
        return None     # (their dtype and layout module.c checks)
    key = (id(val[r.mm.args[1]]), shape0,
           *(val[a].shape if a in val and val[a].__class__ is np.ndarray else None
             for a in r.chain.args), *(val[s].shape for s, _k, _m in r.states), max_bytes)
    setup = r.memo.get(key)
    if setup is None or setup[0]() is not val[r.mm.args[1]]:
        setup = _setup(r, val, rows[0], max_bytes)
        if setup is None:
            return None
        if len(r.memo) > 64:
            r.memo.clear()
        r.memo[key] = setup
    (_ref, wb, geometry, p_shape, sweep, roles_b, fixed_slots, outs_b, mm_index, scratch,
     masking) = setup
    fixed = tuple(None if a is None else val[a] for a in fixed_slots)
    out_shape = sweep.out_shape
    masks = tmp = None
    if masking is not None:
        masks = _mask_rows(r, val, t0, n, out_shape)
        if masks is None:
            return None
        tmp = tuple(np.empty(out_shape, _F32) for _ in range(masking[2]))
    product = np.empty(p_shape, _F32)
    # every output row stays in the list, or only the last (a layer returning its last
    # output): then one chunk's rows, written again by each chunk
    ring = r.put_index != r.index
    items = np.empty((min(n, CHUNK) if ring else n, *out_shape), _F32)
    states = [s for s, _k, _m in r.states]
    scratch_a = tuple(np.empty(out_shape, _F32) if x else None for x in scratch)
    scratch_b = tuple(np.empty(out_shape, _F32) if x else None for x in scratch)
    current = [val[s] for s in states]
    ext = _native.extension()
    done = 0
    while done < n:
        if ctl.error is not None:
            break
        k = min(CHUNK, n - done)
        at = 0 if ring else done
        try:
            where = ext.recurrent_f32(
                tuple(rows[done:done + k]), wb, geometry, product, mm_index, roles_b,
                sweep.kinds, sweep.layout, fixed, sweep.code, sweep.rows, sweep.cols,
                sweep.extra, outs_b, r.item_out, items[at:at + k], tuple(current),
                scratch_a, scratch_b,
                *(() if masks is None else (masks[done:done + k], *masking[:2], r.item_state,
                                            tmp)))
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
    new = {c: _stepped(val[c], val[i], done) for c, i in r.counters}
    for s, cur in zip(states, current):
        new[s] = cur
    new[r.list_var] = out_list
    return done, tuple(new[s] for s in r.writes)
