"""Every fast path gives exactly what the kernel it replaces gives.

For every op whose registry record declares a fast path (a scalar form, ``OpSpec.scalar``, an
array form, ``OpSpec.array``, or a transfer the scheduler does without a kernel call,
``OpSpec.transfer``), on every dtype its OpDef allows (bfloat16, float16, float32/64, the
integers at their ends, complex, bool, strings where allowed; for Cast every pair of them)
and on 0-d and small tensors with NaN, inf and -0.0:

* ``scalar``: the expression compiled programs write for the node (``codegen.scalar_form``,
  None where the form does not hold the dtype) on NumPy scalars, against the kernel call on
  0-d arrays;
* ``array``: the function compiled programs call for the node (``codegen.array_form``) on
  the arrays, against the kernel call: where the kernel raises, the form's result must not
  be taken (an ndarray of the output dtype); where it is taken, it has the kernel's bits;
* ``straight-line``, ``loop``, ``node-by-node``: the op in a graph run by a Session as a
  compiled straight-line program, inside a while loop compiled as a loop program, and node by
  node, against the reference interpreter (executor/reference.py), which runs every kernel
  through the one kernel call.

Results must be identical: same dtype and shape, same bits but NaN payloads (signed zeros
included). The count of (op, dtype, path) triples checked is printed and asserted.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from dfg.executor import Session, codegen
from dfg.executor.kernel_call import bind, call, context, quiet
from dfg.executor.kernels.registry import specs
from dfg.executor.reference import Reference
from dfg.graphdef import builder as B
from dfg.graphdef import dtypes as D
from dfg.graphdef.errors import DfgError
from dfg.graphdef.opdefs.registry import registry
from dfg.schemas.node_def_pb2 import NodeDef

# transfers the scheduler does inline outside loops (Switch/Merge/Enter... are control flow:
# tests/test_random_graphs.py and the conformance cases check them in every mode)
TRANSFER_OPS = ("Identity", "StopGradient", "Snapshot")


ALL_TYPES = (D.DT_BFLOAT16, D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE, D.DT_INT8, D.DT_UINT8,
             D.DT_INT16, D.DT_UINT16, D.DT_INT32, D.DT_UINT32, D.DT_INT64, D.DT_UINT64,
             D.DT_COMPLEX64, D.DT_COMPLEX128, D.DT_BOOL, D.DT_STRING)


def fast_path_ops() -> list[str]:
    ss = specs()
    return sorted([op for op, s in ss.items() if s.scalar is not None or s.array is not None]
                  + list(TRANSFER_OPS))


def allowed_types(op: str) -> list[int]:
    od = registry().get(op)
    attr = next((a for a in od.attr if a.name == "T"), None)
    if attr is None:   # a fixed input type (LogicalAnd: bool)
        return [od.input_arg[0].type]
    # no list: any type (Identity)
    return sorted(attr.allowed_values.list.type) or sorted(ALL_TYPES)


def type_attrs(op: str, dt: int) -> dict[str, int]:
    return {"T": dt} if any(a.name == "T" for a in registry().get(op).attr) else {}


# Cast's conversions: every pair of these (its OpDef allows any type; strings do not cast)
CAST_TYPES = tuple(t for t in ALL_TYPES if t != D.DT_STRING)


# programs of dfg's fused elementwise chain checked (its OpDef: float32 and float64): one
# its members' scalar forms compose into (nested), one a member without a scalar form keeps
# from composing, one reading a result twice (no composed form: it would be evaluated twice),
# one reading an input twice, one of a single op
CHAIN = "_DfgElementwiseChain"
CHAIN_PROGRAMS = (
    (3, ("AddV2 i0 i1", "Mul r0 i2", "Neg r1", "Sub i1 r2")),
    (2, ("Sub i0 i1", "Sigmoid r0", "Mul r1 i0", "Tanh r2")),
    (1, ("Square i0", "Mul r0 r0")),
    (2, ("Mul i0 i0", "Add r0 i1")),
    (2, ("RealDiv i0 i1",)),
)


def signatures(op: str) -> list[tuple[int, dict[str, Any], str]]:
    """(input dtype, attrs, label) of every node of ``op`` checked: one per dtype its OpDef
    allows (MatMul: each transposition; BiasAdd: each data format; the chain: each of
    CHAIN_PROGRAMS); for Cast every (source, destination) pair, and float narrowings with
    Truncate."""
    if op == CHAIN:
        return [(dt, {"T": dt, "N": n, "program": list(prog)}, f"{D.name(dt)} {prog}")
                for dt in allowed_types(op) for n, prog in CHAIN_PROGRAMS]
    if op == "Split":
        return [(dt, {"T": dt, "num_split": n}, f"{D.name(dt)} in {n}")
                for dt in allowed_types(op) for n in (2, 3)]
    if op == GET_ITEM:
        return [(dt, {"element_dtype": dt}, D.name(dt)) for dt in LIST_TYPES]
    if op == "StridedSlice":
        masks = ({}, {"begin_mask": 1, "end_mask": 2}, {"shrink_axis_mask": 1},
                 {"ellipsis_mask": 1}, {"new_axis_mask": 2})
        return [(dt, {"T": dt, "Index": D.DT_INT32, **m}, f"{D.name(dt)} {m}")
                for dt in allowed_types(op) for m in masks]
    if op == "MatMul":
        return [(dt, {"T": dt, "transpose_a": ta, "transpose_b": tb},
                 f"{D.name(dt)}{' ta' if ta else ''}{' tb' if tb else ''}")
                for dt in allowed_types(op) for ta in (False, True) for tb in (False, True)]
    if op == "BiasAdd":
        return [(dt, {"T": dt, "data_format": fmt}, f"{D.name(dt)} {fmt}")
                for dt in allowed_types(op) for fmt in (b"NHWC", b"NCHW")]
    if op != "Cast":
        return [(dt, type_attrs(op, dt), D.name(dt)) for dt in allowed_types(op)]
    out = [(s, {"SrcT": s, "DstT": d, "Truncate": False}, f"{D.name(s)}->{D.name(d)}")
           for s in CAST_TYPES for d in CAST_TYPES]
    floats = (D.DT_DOUBLE, D.DT_FLOAT, D.DT_HALF, D.DT_BFLOAT16)
    out += [(s, {"SrcT": s, "DstT": d, "Truncate": True},
             f"{D.name(s)}->{D.name(d)} truncate")
            for i, s in enumerate(floats) for d in floats[i + 1:]]
    return out


def values(dt: int) -> list[Any]:
    """Interesting 0-d values of ``dt`` (bfloat16 as float32 values already rounded)."""
    if dt == D.DT_BOOL:
        return [False, True]
    if dt == D.DT_STRING:
        return [b"", b"a", b"ab", b"\xff"]
    npdt = D.to_numpy(dt)
    if npdt.kind in "iu":
        info = np.iinfo(npdt)
        vs = {0, 1, 7, info.max, info.max - 1, info.min, info.min + 1, info.max // 3 + 1}
        if npdt.kind == "i":
            vs |= {-1, -3}
        return sorted(vs)
    if npdt.kind == "c":
        return [0j, -0.0 + 1j, 1.5 - 2j, complex(np.inf, 1), complex(np.nan, 0),
                complex(-np.inf, -np.inf), 1e30 + 1e30j]
    big = {D.DT_HALF: 65504.0, D.DT_BFLOAT16: 3.3895e38}.get(dt, float(np.finfo(npdt).max))
    tiny = {D.DT_HALF: 6e-8, D.DT_BFLOAT16: 1e-39}.get(dt, float(np.finfo(npdt).tiny) / 4)
    return [0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, 255.5, big, -big, tiny, np.inf, -np.inf, np.nan]


def feed_dtype(dt: int) -> np.dtype:
    return np.dtype(object) if dt == D.DT_STRING else D.to_numpy(dt)


def as_array(vs: Any, dt: int) -> np.ndarray:
    a = np.array(vs, dtype=feed_dtype(dt))
    return D.round_bfloat16(a) if dt == D.DT_BFLOAT16 else a


def arity(op: str, attrs: dict[str, Any] | None = None) -> int:
    if attrs and "N" in attrs:      # one list input of N tensors (the chain)
        return attrs["N"]
    return len(registry().get(op).input_arg)


def node(op: str, attrs: dict[str, Any]) -> NodeDef:
    nd = NodeDef(name="n", op=op)
    for name, v in attrs.items():
        if type(v) is bool:
            nd.attr[name].b = v
        elif type(v) is bytes:
            nd.attr[name].s = v
        elif type(v) is list:
            nd.attr[name].list.s.extend(x.encode() for x in v)
        elif name in ("N", "num_split") or name.endswith("_mask"):
            nd.attr[name].i = v
        else:
            nd.attr[name].type = v
    for i in range(arity(op, attrs)):
        nd.input.append(f"x{i}")
    return nd


def same(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a!r} vs {b!r}"
    if a.dtype.kind in "fc":
        pa = [a.real, a.imag] if a.dtype.kind == "c" else [a]
        pb = [b.real, b.imag] if b.dtype.kind == "c" else [b]
        for x, y in zip(pa, pb):
            nan = np.isnan(y)
            assert (np.isnan(x) == nan).all() and (x[~nan] == y[~nan]).all() and (
                np.signbit(x[~nan]) == np.signbit(y[~nan])).all(), f"{what}: {a!r} vs {b!r}"
    else:
        assert np.array_equal(a, b), f"{what}: {a!r} vs {b!r}"


# ops whose inputs are not alike: (shapes of their input tuples), some of them wrong
SHAPED = {
    # fitting shapes for each transposition (the others fail: the kernel says why)
    "MatMul": [((3, 4), (4, 2)), ((4, 3), (4, 2)), ((3, 4), (2, 4)), ((4, 3), (2, 4)),
               ((1, 1), (1, 5)), ((4,), (4, 2)), ((2, 4), (4,)), ((2, 2, 2), (2, 2)),
               ((0, 3), (3, 2))],
    "BiasAdd": [((2, 3), (3,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3,)), ((3,), (3,)),
                ((2, 3), (2, 3)), ((0, 3), (3,))],
}


def cases(op: str, dt: int, attrs: dict[str, Any] | None = None
          ) -> list[tuple[np.ndarray, ...]]:
    """Input tuples: every pair of interesting 0-d values, and all of them as vectors (for
    ops in SHAPED: arrays of those shapes filled with the interesting values)."""
    vs = values(dt)
    if op == "Split":
        # (axis, value): pieces along each axis, a negative one, one out of range, a size
        # the count does not divide, an empty value
        out = []
        for shape, axes in (((6,), (0, -1, 1)), ((2, 6), (1, -1, 0, 2)), ((6, 2, 3), (0, 2)),
                            ((0, 6), (0, 1))):
            n = int(np.prod(shape))
            value = as_array([vs[(j * 7) % len(vs)] for j in range(n)], dt).reshape(shape)
            out += [(np.array(a, np.int32), value) for a in axes]
        return out
    if op == GET_ITEM:
        # (list, index, element_shape): each index, one past the end, a negative one; an
        # uninitialized entry (zeros of the element shape), and one whose shape is not known;
        # a list of another element dtype
        from dfg.executor.kernels.tensor_list import TensorList

        npdt = feed_dtype(dt)
        entries = [as_array([vs[(j * 5 + k) % len(vs)] for j in range(4)], dt).reshape(2, 2)
                   for k in range(3)]
        full = TensorList.make(npdt, (2, 2), entries)
        holey = TensorList.make(npdt, (None, 2), [entries[0], None])
        unknown = TensorList.make(npdt, None, [None, None])
        other = TensorList.make(np.dtype(np.int16 if dt != D.DT_INT16 else np.int8), (2, 2),
                                [np.zeros((2, 2), np.int16 if dt != D.DT_INT16 else np.int8)])
        es = np.array([-1, 2], np.int32)
        return ([(full, np.array(i, np.int32), es) for i in (0, 1, 2, 3, -1)]
                + [(holey, np.array(1, np.int32), np.array([2, 2], np.int32)),
                   (holey, np.array(1, np.int32), np.array(-1, np.int32)),
                   (unknown, np.array(0, np.int32), np.array(-1, np.int32)),
                   (other, np.array(0, np.int32), es)])
    if op == "StridedSlice":
        # (x, begin, end, strides): ranges, negative ends and strides, a reversal, a stride
        # past the end, an empty result, a spec longer than the rank, mismatched spec shapes
        i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
        x2 = as_array([vs[(j * 7) % len(vs)] for j in range(12)], dt).reshape(3, 4)
        x1 = as_array([vs[(j * 5) % len(vs)] for j in range(6)], dt)
        return [(x2, i32(0, 1), i32(2, 3), i32(1, 1)), (x2, i32(1, -3), i32(-1, 4), i32(1, 2)),
                (x2, i32(2, 3), i32(0, 0), i32(-1, -1)), (x1, i32(1), i32(100), i32(3)),
                (x1, i32(4), i32(2), i32(1)), (x1, i32(-2), i32(6), i32(1)),
                (x2, i32(0, 0, 0), i32(1, 1, 1), i32(1, 1, 1)),
                (x2, i32(0, 0), i32(1), i32(1, 1)), (x1, i32(0), i32(6), i32(0))]
    if op in ("Select", "SelectV2"):
        # (cond, then, else): each pair of 0-d values picked both ways; vectors and matrices
        # under a mixed mask; a condition of one row per batch row (Select picks rows,
        # SelectV2 broadcasts a column) and of one column (SelectV2 broadcasts it over the
        # rows, Select refuses it); then and else of other shapes; empty tensors
        def arr(shape: tuple, k: int) -> np.ndarray:
            n = int(np.prod(shape))
            return as_array([vs[(j * 7 + k * 3) % len(vs)] for j in range(n)], dt) \
                .reshape(shape)

        def mask(shape: tuple) -> np.ndarray:
            n = int(np.prod(shape))
            return np.array([(j * 5) % 3 == 0 for j in range(n)], bool).reshape(shape)

        out = [(np.array(c), as_array(a, dt), as_array(b, dt))
               for c in (False, True) for a, b in itertools.product(vs[:4], vs[-4:])]
        for c, a, b in (((6,), (6,), (6,)), ((2, 3), (2, 3), (2, 3)), ((2,), (2, 3), (2, 3)),
                        ((2, 1), (2, 3), (2, 3)), ((1, 3), (2, 3), (2, 3)),
                        ((), (2, 3), (2, 3)), ((2, 3), (2, 3), (3,)),
                        ((3,), (2, 3), (2, 3)), ((0, 3), (0, 3), (0, 3))):
            out.append((mask(c), arr(a, 1), arr(b, 2)))
        return out
    if op == "Tile":
        # (x, multiples): a vector and a matrix tiled each way, by zero, a 0-d value, and
        # multiples the kernel refuses (negative, of another length, not a vector)
        i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
        x2 = as_array([vs[(j * 7) % len(vs)] for j in range(6)], dt).reshape(2, 3)
        x1 = as_array(vs, dt)
        return [(x1, i32(1)), (x1, i32(3)), (x1, i32(0)), (x2, i32(1, 1)), (x2, i32(2, 1)),
                (x2, i32(1, 4)), (x2, i32(3, 2)), (x2, i32(0, 2)), (x2, i32(-1, 2)),
                (x2, i32(2)), (x2, np.array([[1, 2]], np.int32)),
                (as_array(vs[0], dt), np.zeros(0, np.int32))]
    if op in SHAPED:
        out = []
        for shapes in SHAPED[op]:
            tup = []
            for k, shape in enumerate(shapes):
                n = int(np.prod(shape))
                tup.append(as_array([vs[(j * 7 + k * 3) % len(vs)] for j in range(n)], dt)
                           .reshape(shape))
            out.append(tuple(tup))
        return out
    combos = list(itertools.product(vs, repeat=arity(op, attrs)))
    out = [tuple(as_array(v, dt) for v in c) for c in combos]
    out.append(tuple(as_array([c[i] for c in combos], dt) for i in range(arity(op, attrs))))
    return out


def check_scalar_form(op: str, dt: int, attrs: dict[str, Any]) -> int:
    """The scalar form (where it holds ``dt`` and ``attrs``) on NumPy scalars against the
    kernel on 0-d arrays; 1 if it was checked, 0 if compiled programs would run the kernel
    anyway."""
    k = bind(node(op, attrs))
    form = codegen.scalar_form(k)
    for t in [dt, *k.out_types]:
        if t == D.DT_BFLOAT16 or D.to_numpy(t).kind in "cO":
            assert form is None, f"{op} would skip the kernel for {D.name(t)} ({attrs})"
    if attrs.get("Truncate") and D.DT_BFLOAT16 not in (attrs["SrcT"], attrs["DstT"]):
        assert form is None, f"{op} would skip the kernel's truncation ({attrs})"
    if form is None:
        return 0
    names = [f"a{i}" for i in range(arity(op, attrs))]
    # ``{kernel}``: the kernel call on these operands, as generated code writes it
    expr = form.format(*names, kernel=f"S(KERNEL([{', '.join(names)}]))")
    with quiet(all="ignore"):
        for args in cases(op, dt, attrs):
            if args[0].ndim:
                continue
            scalars = [codegen.to_scalar(a) for a in args]
            assert all(s.__class__ in codegen.SCALAR_TYPES for s in scalars)
            env = {**codegen.FORM_ENV, "S": codegen.to_scalar,
                   "KERNEL": lambda xs: call(k, [codegen.to_array(x) for x in xs],
                                             context(k))[0]}
            try:
                want = call(k, list(args), context(k))[0]
            except DfgError as e:      # the values the form leaves to the kernel: its error
                with pytest.raises(type(e)):
                    eval(expr, env, dict(zip(names, scalars)))  # noqa: S307
                continue
            got = eval(expr, env,  # noqa: S307 - the form's own text
                       dict(zip(names, scalars)))
            assert got.__class__ in codegen.SCALAR_TYPES, f"{op} {attrs}: {got!r}"
            same(codegen.to_array(got), want, f"{op} {attrs} scalar form on {args}")
    return 1


def taken_outputs(k: Any, got: Any) -> list[np.ndarray] | None:
    """What generated code takes from an array form's result (codegen.Emitter): one ndarray
    of the output dtype, or for several outputs a tuple of one such ndarray each; None where
    it runs the kernel instead."""
    if k.num_outputs == 1:
        return [got] if got.__class__ is np.ndarray and got.dtype is k.out_dtypes[0] else None
    if got.__class__ is not tuple or len(got) != k.num_outputs:
        return None
    ok = all(g.__class__ is np.ndarray and g.dtype is w for g, w in zip(got, k.out_dtypes))
    return list(got) if ok else None


def check_array_form(op: str, dt: int, attrs: dict[str, Any]) -> int:
    """The array form (where it holds ``dt`` and ``attrs``) on the inputs against the kernel
    call; 1 if it was checked, 0 if compiled programs would run the kernel anyway."""
    k = bind(node(op, attrs))
    k.deref = ()   # inputs fed by no ref output, as the plan narrows them
    fn = codegen.array_form(k)
    for t in [dt, *k.out_types]:
        if t == D.DT_BFLOAT16:
            assert fn is None, f"{op} would skip the kernel's rounding for bfloat16 ({attrs})"
    if fn is None:
        return 0
    taken = 0
    with quiet(all="ignore"):
        for args in cases(op, dt, attrs):
            try:
                want = call(k, list(args), context(k))
            except Exception:
                want = None
            try:
                got = taken_outputs(k, fn(*args))
            except Exception:
                continue   # the kernel runs
            if got is None:
                continue   # the kernel runs
            assert want is not None, f"{op} {attrs}: the form takes {got!r} where the " \
                                     f"kernel fails on {args}"
            for g, w in zip(got, want, strict=True):
                same(g, w, f"{op} {attrs} array form on {args}")
            taken += 1
        # generated code may hand it NumPy scalars (0-d values some scalar form computed)
        for args in cases(op, dt, attrs):
            if all(getattr(a, "ndim", 1) for a in args):
                continue
            scalars = [codegen.to_scalar(a) for a in args]
            try:
                want = call(k, list(args), context(k))
            except Exception:
                want = None
            try:
                got = taken_outputs(k, fn(*scalars))
            except Exception:
                continue
            if got is not None:
                assert want is not None, f"{op} {attrs}: taken on scalars {scalars}"
                for g, w in zip(got, want, strict=True):
                    same(g, w, f"{op} {attrs} array form on scalars {scalars}")
    assert taken, f"{op} {attrs}: the array form never applied"
    return 1


def _inputs(op: str, dt: int, attrs: dict[str, Any]) -> list[Any]:
    """Placeholders (float32 cast to bfloat16: npy has no bfloat16) for the op's inputs."""
    xs = []
    for i in range(arity(op, attrs)):
        if (op, i) in INDEX_INPUTS:     # Split's axis, StridedSlice's spec, a list index
            xs.append(B.placeholder("int32", None, name=f"x{i}"))
        elif (op, i) in CONDITION_INPUTS:
            xs.append(B.placeholder("bool", None, name=f"x{i}"))
        elif dt == D.DT_BFLOAT16:
            xs.append(B.cast(B.placeholder("float32", None, name=f"x{i}"), "bfloat16"))
        else:
            xs.append(B.placeholder(D.name(dt), None, name=f"x{i}"))
    return xs


INDEX_INPUTS = {("Split", 0), ("StridedSlice", 1), ("StridedSlice", 2), ("StridedSlice", 3),
                ("TensorListGetItem", 1), ("TensorListGetItem", 2), ("Tile", 1)}
CONDITION_INPUTS = {("Select", 0), ("SelectV2", 0)}
# TensorListGetItem: element dtypes checked (the list is built in the graph from a stacked
# tensor, x0, by TensorListFromTensor)
GET_ITEM = "TensorListGetItem"
LIST_TYPES = (D.DT_HALF, D.DT_FLOAT, D.DT_DOUBLE, D.DT_INT8, D.DT_UINT8, D.DT_INT32,
              D.DT_INT64, D.DT_COMPLEX64, D.DT_BOOL, D.DT_STRING)


def _args(op: str, xs: list[Any]) -> list[Any]:
    if op == GET_ITEM:
        dt = xs[0].dtype
        tl = B.apply_op("TensorListFromTensor", [xs[0], xs[2]],
                        {"element_dtype": dt, "shape_type": D.DT_INT32}).outputs[0]
        return [tl, xs[1], xs[2]]
    return [xs] if op == CHAIN else xs     # the chain's one list input


def _out(t: Any) -> Any:
    return B.cast(t, "float32") if D.base(t.dtype) == D.DT_BFLOAT16 else t


def straight_graph(op: str, dt: int, attrs: dict[str, Any]) -> Any:
    g = B.Graph()
    with g.as_default():
        xs = _inputs(op, dt, attrs)
        y = B.apply_op(op, _args(op, xs), attrs, default_name="op").outputs[0]
        B.identity(_out(y), name="y")
    return g.as_graph_def()


def loop_graph(op: str, dt: int, attrs: dict[str, Any]) -> Any:
    """y = op(x...) computed in each of two iterations of a while loop (the inputs enter as
    loop constants, the result is a loop variable): the loop program's path."""
    g = B.Graph()
    with g.as_default():
        xs = _inputs(op, dt, attrs)
        first = B.apply_op(op, _args(op, xs), attrs, default_name="op").outputs[0]

        def body(i: Any, acc: Any) -> list:
            return [i + 1, B.apply_op(op, _args(op, xs), attrs, default_name="op").outputs[0]]

        _i, acc = B.while_loop(lambda i, acc: i < 2, body, [B.constant(np.int32(0)), first])
        B.identity(_out(acc), name="y")
    return g.as_graph_def()


def graph_feeds(op: str, args: tuple) -> dict[str, np.ndarray] | None:
    """The feeds of the graph paths for one case (None: a case the graph cannot be fed: a
    list with unset entries or of another dtype)."""
    if op != GET_ITEM:
        return feeds(args)
    entries = args[0].entries()
    if any(e is None for e in entries) or args[0].element_shape is None \
            or entries[0].dtype.kind == "i" and entries[0].dtype.itemsize == 2:
        return None
    return feeds((np.stack(entries), *args[1:]))


def feeds(args: tuple) -> dict[str, np.ndarray]:
    return {f"x{i}:0": a for i, a in enumerate(args)}


def check_graph_paths(op: str, dt: int, attrs: dict[str, Any]) -> int:
    """The straight-line program, the loop program and node by node against the reference
    interpreter; returns the number of paths checked."""
    n = 0
    all_cases = cases(op, dt, attrs)
    # every vector, and a spread of 0-d tuples (each value appears)
    chosen = all_cases[-1:] + all_cases[:-1:max(1, (len(all_cases) - 1) // 24)]
    straight = straight_graph(op, dt, attrs)
    for path, graph, programs in (("straight-line", straight, "always"),
                                  ("loop", loop_graph(op, dt, attrs), "always"),
                                  ("node-by-node", straight, "never")):
        ref = Reference(graph)
        with Session(graph, threads=1, programs=programs, optimize="off") as sess:
            for args in chosen:
                fd = graph_feeds(op, args)
                if fd is None:
                    continue
                try:
                    want = ref.run(["y:0"], feed_dict=fd)[0]
                except DfgError as e:   # shapes the op refuses (SHAPED): the same error
                    for _rnd in range(2):
                        with pytest.raises(type(e)):
                            sess.run(["y:0"], feed_dict=fd)
                    continue
                for rnd in range(2):   # the second run uses the compiled program
                    got = sess.run(["y:0"], feed_dict=fd)[0]
                    same(got, want, f"{op} {attrs} {path} run {rnd} on {args}")
        n += 1
    return n


OPS = fast_path_ops()
TRIPLES: list[tuple[str, str, str]] = []


@pytest.mark.parametrize("op", OPS)
def test_fast_paths_equal_the_kernel(op: str) -> None:
    for dt, attrs, name in signatures(op):
        if op in TRANSFER_OPS and dt not in (D.DT_BFLOAT16, D.DT_HALF, D.DT_FLOAT, D.DT_INT8,
                                             D.DT_UINT8, D.DT_INT64, D.DT_COMPLEX64,
                                             D.DT_BOOL, D.DT_STRING):
            continue   # a transfer moves any value alike: a few dtypes of each kind
        scalar = check_scalar_form(op, dt, attrs)
        if scalar:
            TRIPLES.append((op, name, "scalar"))
        if check_array_form(op, dt, attrs):
            TRIPLES.append((op, name, "array"))
        elif op == "Cast" and D.DT_BFLOAT16 not in (attrs["SrcT"], attrs["DstT"]):
            continue   # programs run Cast's kernel there: the kernel's own tests cover it
        k = check_graph_paths(op, dt, attrs)
        TRIPLES.extend([(op, name, p) for p in ("straight-line", "loop", "node-by-node")][:k])


def test_every_scalar_form_is_checked_and_the_triples_are_counted(record_property) -> None:
    ss = specs()
    assert {op for op, s in ss.items() if s.scalar is not None} <= set(OPS)
    if len({t[0] for t in TRIPLES}) < len(OPS):
        pytest.skip("run with the per-op tests to count the triples")
    scalar = sum(1 for t in TRIPLES if t[2] == "scalar")
    array = sum(1 for t in TRIPLES if t[2] == "array")
    print(f"\nfast paths checked: {len(TRIPLES)} (op, dtype, path) triples, {scalar} of them "
          f"scalar forms, {array} array forms, over {len(OPS)} ops")
    record_property("fast_path_triples", len(TRIPLES))
    # 14 ops with scalar forms over their OpDefs' dtypes, 3 graph paths each, plus transfers
    assert len(TRIPLES) >= 400 and scalar >= 100 and array >= 30, (len(TRIPLES), scalar, array)


def cond_in_loop_graph() -> Any:
    """A while loop over i = 0..4 whose body has a hand-made cond on ``i % 2 == 0``: Switch
    of i, the true side times 10, the false side plus 100, joined by two Merges (inputs in
    either order) whose values and value_index outputs are summed over the iterations."""
    g = B.Graph()
    with g.as_default():
        def body(i: Any, a: Any, k: Any, b: Any, n: Any) -> list:
            even = B.apply_op("Equal", [i % 2, np.int32(0)]).outputs[0]
            sw = B.apply_op("Switch", [i, even]).outputs
            t, f = sw[1] * 10, sw[0] + 100
            m1 = B.apply_op("Merge", [[f, t]]).outputs
            m2 = B.apply_op("Merge", [[t, f]]).outputs
            return [i + 1, a + m1[0], k + m1[1], b + m2[0], n + m2[1]]

        zero = B.constant(np.int32(0))
        out = B.while_loop(lambda i, *_: i < 5, body, [zero] * 5)
        for name, t in zip(["i", "a", "k", "b", "n"], out):
            B.identity(t, name=name)
    return g.as_graph_def()


def test_a_cond_compiles_to_what_switch_and_merge_define() -> None:
    """program_compile derives a cond's If/Select from kernels/control_flow.py (switch puts
    the data on output 1 when the predicate holds; merge takes the first live input and its
    index): compiled, interpreted, node by node and in the reference interpreter, a loop
    with a cond gives what those definitions say, value_index included."""
    from dfg.executor.program_compile import _SWITCH_SIDE, merge_select
    from dfg.executor.program_ir import If, Select

    # the static rules derived from the definitions are TensorFlow's: output 1 is the true
    # side; a Merge of (false, true) inputs takes input 1 (index 1) when the predicate holds
    assert _SWITCH_SIDE == {0: False, 1: True}
    assert merge_select((7, 9), (False, True)) == ((9, 1), (7, 0))
    assert merge_select((7, 9), (True, False)) == ((7, 0), (9, 1))
    # even i: the true side (i * 10) is Merge input 1 of m1, input 0 of m2; odd: i + 100
    a = sum(i * 10 if i % 2 == 0 else i + 100 for i in range(5))
    want = {"i": 5, "a": a, "k": 3, "b": a, "n": 2}
    gd = cond_in_loop_graph()
    fetches = [f"{k}:0" for k in want]
    ref = Reference(gd).run(fetches, {})
    assert [int(v) for v in ref] == list(want.values())
    for programs in ("always", "never"):
        sess = Session(gd, programs=programs, optimize=False)
        got = sess.run(fetches)
        assert [int(v) for v in got] == list(want.values()), programs
    loops = [lay.program.loop for lay in sess.plan(fetches).frames.values()
             if lay.program is not None]
    assert len(loops) == 1      # it compiled: an If per side and the Merges as Selects
    stmts = loops[0].body
    assert sum(type(st) is If for st in stmts) == 2
    assert sum(type(st) is Select for st in stmts) == 4


def test_an_unpickled_feed_and_a_decoded_const_keep_the_array_forms() -> None:
    # an array that crossed a process (Ray, multiprocessing) has an equal dtype that is not
    # NumPy's float32 instance; the fed value is made NumPy's own, and a loop's array forms
    # take their results whatever instance their inputs carry: the loop gives TF's values
    # (math: x doubled n times) with every path
    import pickle

    x = pickle.loads(pickle.dumps(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert x.dtype == np.float32 and x.dtype is not np.dtype(np.float32)
    g = B.Graph()
    with g.as_default():
        xin = B.placeholder(np.float32, [2, 3], name="x")
        w = B.constant(np.full((3, 3), 0.5, np.float32), name="w")
        i0 = B.constant(0, name="i0")

        def body(i, v):
            return i + 1, B.sigmoid(B.matmul(v, w)) * 2.0 + v

        _, out = B.while_loop(lambda i, v: i < 4, body, [i0, xin], name="loop")
        B.identity(out, name="y")
    want = x.astype(np.float64)
    for _ in range(4):
        want = 2.0 / (1.0 + np.exp(-(want @ np.full((3, 3), 0.5)))) + want
    with Session(g.as_graph_def()) as sess:
        for _ in range(3):          # the third run is the compiled program's
            got = sess.run("y", {"x": x})
            assert got.dtype is np.dtype(np.float32)
            np.testing.assert_allclose(got, want, rtol=1e-5)
