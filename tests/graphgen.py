"""Random TensorFlow v1 control-flow graphs for differential tests (hypothesis strategies).

``control_flow_graphs()`` draws a program and builds it with ``dfg.graphdef.builder``: small
float64 and int32 tensors (shape [2]) through elementwise math, ``while_loop``s nested up to
``max_depth`` deep (trip counts from small Consts, from the data, or data-dependent conditions
such as ``x < limit``, always bounded by a small constant), ``cond``s inside loop bodies and
loops inside cond branches, and ref variables updated by ``AssignAdd(use_locking=True)`` in
loop bodies and branches. A drawn :class:`Case` says what to feed, fetch and initialize.
``functional=True`` also draws TF2's functional forms (``StatelessIf``/``StatelessWhile`` with
the branches and bodies as library functions; everything nested in one is functional too, and
has no variables), which a Session runs after lowering them to v1 frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from dfg.graphdef import builder as B
from dfg.graphdef.builder.control_flow import CondContext, WhileContext

F, I = "f", "i"     # the two kinds of values: float64[2] and int32[2]
MAX_TRIPS = 3        # every loop condition includes i < MAX_TRIPS (or a smaller bound)


@dataclass
class Case:
    graph_def: Any
    feeds: dict[str, np.ndarray]
    fetches: list[str]
    init: str | None                      # the target initializing the variables
    variables: list[str] = field(default_factory=list)   # "v:0": fetch after the steps
    features: set[str] = field(default_factory=set)
    float_fetches: set[str] = field(default_factory=set)

    def __repr__(self) -> str:
        return (f"Case({len(self.graph_def.node)} nodes, features={sorted(self.features)}, "
                f"fetches={self.fetches}, variables={self.variables})")


def _ref_in_context(ref: Any) -> Any:
    """The ref tensor ``ref`` as seen in the current control-flow context: through a RefEnter
    per loop and a RefSwitch per cond branch, as TensorFlow builds them (the builder's own
    capture would make plain Enters/Switches, which drop the ref)."""
    g = B.get_default_graph()

    def inside(ctx: Any) -> Any:
        if ctx is None:
            return ref
        if ref.name in ctx.external:
            return ctx.external[ref.name]
        outer = inside(ctx.outer)
        with ctx.outside():
            if isinstance(ctx, WhileContext):
                made = B.apply_op("RefEnter", [outer], {
                    "frame_name": ctx.name, "is_constant": True,
                    "parallel_iterations": ctx.parallel_iterations}).outputs[0]
            else:
                assert isinstance(ctx, CondContext)
                made = B.apply_op("RefSwitch", [outer, ctx.pred]).outputs[ctx.branch]
        return ctx.adopt_external(ref, made)

    return inside(g._ctxt)


class _Gen:
    def __init__(self, draw: Any, max_depth: int, max_flow: int,
                 const_predicates: bool, functional: bool = False) -> None:
        self.draw = draw
        self.functional = functional       # may draw functional (TF2) conds and loops
        self.in_function = 0               # how many functional constructs we are inside
        self.const_predicates = const_predicates
        self.feeds: dict[str, Any] = {}
        self.max_depth = max_depth
        self.flow_left = max_flow          # control-flow constructs still allowed
        self.ops_left = 120                # elementwise ops still allowed
        self.variables: list[Any] = []
        self.features: set[str] = set()

    # --- plain values -------------------------------------------------------------------
    def pick(self, pool: list[tuple[str, Any]], kind: str) -> Any:
        xs = [t for k, t in pool if k == kind]
        return xs[self.draw(st.integers(0, len(xs) - 1))]

    def elementwise(self, pool: list[tuple[str, Any]], kind: str) -> Any:
        self.ops_left -= 1
        a = self.pick(pool, kind)
        if kind == F:
            choice = self.draw(st.sampled_from(
                ["tanh", "sin", "neg", "half", "add", "sub", "max", "min", "mul", "cast"]))
            if choice == "cast":
                return B.cast(self.pick(pool, I), "float64")
            if choice in ("tanh", "sin", "neg", "half"):
                return {"tanh": B.tanh, "sin": B.sin, "neg": B.neg,
                        "half": lambda x: x * 0.5}[choice](a)
        else:
            choice = self.draw(st.sampled_from(
                ["neg", "abs", "mod", "inc", "add", "sub", "max", "min"]))
            if choice in ("neg", "abs", "mod", "inc"):
                return {"neg": B.neg, "abs": B.abs, "mod": lambda x: x % 7,
                        "inc": lambda x: x + 1}[choice](a)
        b = self.pick(pool, kind)
        return {"add": B.add, "sub": B.subtract, "max": B.maximum, "min": B.minimum,
                "mul": B.multiply}[choice](a, b)

    def value(self, pool: list[tuple[str, Any]], kind: str, depth: int) -> Any:
        """A new tensor of ``kind``: elementwise math, or a cond or while loop built here."""
        flow = self.flow_left > 0 and depth < self.max_depth and self.ops_left > 0
        what = self.draw(st.sampled_from(["math", "math", "cond", "while"] if flow
                                         else ["math"]))
        if what == "cond":
            return self.cond(pool, kind, depth)
        if what == "while":
            return self.while_loop(pool, kind, depth)
        steps = self.draw(st.integers(1, 3))
        local = list(pool)
        out = None
        for _ in range(steps):
            out = self.elementwise(local, kind)
            local.append((kind, out))
        return out

    def predicate(self, pool: list[tuple[str, Any]]) -> Any:
        """A scalar bool that depends on the feeds (``const_predicates``: or may not)."""
        kind = self.draw(st.sampled_from([F, I]))
        s = B.reduce_sum(self.pick(pool, kind))
        if not self.const_predicates:
            s = s + B.reduce_sum(self.feeds[kind])
        if kind == F:
            return s > self.draw(st.sampled_from([-0.5, 0.0, 0.5]))
        return B.apply_op("Equal", [s % 2, np.int32(0)]).outputs[0]   # no Tensor.__eq__

    def assign_add(self, pool: list[tuple[str, Any]]) -> Any:
        """AssignAdd(use_locking=True) of an int value of the pool to a variable."""
        if not self.variables or self.draw(st.integers(0, 3)) == 0:
            init = np.array(self.draw(st.lists(st.integers(-3, 3), min_size=2, max_size=2)),
                            np.int32)
            g = B.get_default_graph()
            saved, g._ctxt = g._ctxt, None   # a variable lives outside every context
            try:
                self.variables.append(B.variable(init, name=f"v{len(self.variables)}"))
            finally:
                g._ctxt = saved
        v = self.variables[self.draw(st.integers(0, len(self.variables) - 1))]
        inc = self.pick(pool, I) % 5     # small increments: no overflow across many runs
        return B.apply_op("AssignAdd", [_ref_in_context(v._ref), inc],
                          {"use_locking": True}).outputs[0]

    # --- control flow -------------------------------------------------------------------
    def _functional(self) -> bool:
        """Whether the next cond or loop is functional: always inside a functional one;
        drawn when ``functional`` (and never drawn otherwise, so v1 draws stay the same)."""
        if self.in_function:
            return True
        return bool(self.functional and self.draw(st.booleans()))

    def cond(self, pool: list[tuple[str, Any]], kind: str, depth: int) -> Any:
        self.flow_left -= 1
        if depth > 0:
            self.features.add("nested")
        pred = self.predicate(pool)
        kinds = [kind] + ([self.draw(st.sampled_from([F, I]))]
                          if self.draw(st.booleans()) else [])
        fn_form = self._functional()

        def branch() -> Any:
            def fn() -> list:
                local = list(pool)     # what a branch makes stays in the branch
                self.in_function += fn_form
                try:
                    outs = [self.value(local, k, depth + 1) for k in kinds]
                finally:
                    self.in_function -= fn_form
                if not self.in_function and not fn_form and self.draw(st.integers(0, 4)) == 0:
                    self.features.add("variable-in-cond")
                    a = self.assign_add(local)
                    outs[0] = B.with_dependencies([a], outs[0])
                return outs
            return fn

        outs = B.cond(pred, branch(), branch(), functional=fn_form)
        self.features.add("functional-cond" if fn_form else "cond")
        for k, t in zip(kinds[1:], outs[1:]):
            pool.append((k, t))
        return outs[0]

    def while_loop(self, pool: list[tuple[str, Any]], kind: str, depth: int) -> Any:
        self.flow_left -= 1
        self.features.add("while")
        if depth > 0:
            self.features.add("nested")
        carried = [kind] + ([self.draw(st.sampled_from([F, I]))]
                            if self.draw(st.booleans()) else [])
        start = [self.pick(pool, k) for k in carried]
        how = self.draw(st.sampled_from(["const", "data", "carried"]))
        if how == "const":
            limit: Any = B.constant(np.int32(self.draw(st.integers(0, MAX_TRIPS))))
        elif how == "data":   # a trip count computed from the data: 0..MAX_TRIPS
            limit = B.reduce_sum(B.abs(self.pick(pool, I))) % (MAX_TRIPS + 1)
        else:
            limit = B.constant(np.int32(MAX_TRIPS))
        threshold = self.draw(st.sampled_from([-1.0, 0.0, 1.0]))
        use_assign = self.draw(st.integers(0, 2)) == 0
        parallel = self.draw(st.sampled_from([1, 2, 10]))
        fn_form = self._functional()
        use_assign = use_assign and not fn_form and not self.in_function

        def cond_fn(i: Any, *vs: Any) -> Any:
            c = i < limit
            if how == "carried":   # data-dependent: also stop once the sum passes a bound
                v = vs[0] if carried[0] == F else B.cast(vs[0], "float64")
                c = B.logical_and(c, B.reduce_sum(v) < threshold)
            return c

        def body(i: Any, *vs: Any) -> list:
            local = list(pool) + list(zip(carried, vs))
            self.in_function += fn_form
            try:
                nxt = [self.value(local, k, depth + 1) for k in carried]
            finally:
                self.in_function -= fn_form
            i1 = i + 1
            if use_assign:
                self.features.add("variable-in-loop")
                local.append((I, B.add(B.zeros_like(self.pick(local, I)), i)))
                a = self.assign_add(local)
                i1 = B.with_dependencies([a], i1)
            return [i1, *nxt]

        outs = B.while_loop(cond_fn, body, [B.constant(np.int32(0)), *start],
                            parallel_iterations=parallel, functional=fn_form)
        if fn_form:
            self.features.add("functional-while")
        for k, t in zip(carried[1:], outs[2:]):
            pool.append((k, t))
        # the trip count, as an int value later ops may use (and fetches may show)
        pool.append((I, B.constant(np.zeros(2, np.int32)) + outs[0]))
        if depth > 0 and any(isinstance(c, WhileContext) for c in _contexts()):
            self.features.add("nested-while")
        if any(isinstance(c, CondContext) for c in _contexts()):
            self.features.add("while-in-cond")
        return outs[1]


def _contexts() -> list[Any]:
    out, c = [], B.get_default_graph()._ctxt
    while c is not None:
        out.append(c)
        c = c.outer
    return out


@st.composite
def control_flow_graphs(draw: Any, max_depth: int = 3, max_flow: int = 5,
                        const_predicates: bool = True, functional: bool = False) -> Case:
    """A :class:`Case`: a random graph with nested loops, conds and variables.
    ``const_predicates``: conds may have predicates computed from constants only (which an
    optimizer can fold, removing the untaken branch)."""
    gen = _Gen(draw, max_depth, max_flow, const_predicates, functional)
    g = B.Graph()
    floats = st.floats(-2, 2, allow_nan=False, width=64)
    x = np.array(draw(st.lists(floats, min_size=2, max_size=2)), np.float64)
    k = np.array(draw(st.lists(st.integers(-5, 5), min_size=2, max_size=2)), np.int32)
    with g.as_default():
        pool: list[tuple[str, Any]] = [
            (F, B.placeholder("float64", [2], name="x")),
            (I, B.placeholder("int32", [2], name="k")),
            (F, B.constant(np.array([0.25, -0.75]), name="cf")),
            (I, B.constant(np.array([1, 2], np.int32), name="ci")),
        ]
        gen.feeds = {F: pool[0][1], I: pool[1][1]}
        results: list[tuple[str, Any]] = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from([F, I]))
            t = gen.value(pool, kind, 0)
            pool.append((kind, t))
            results.append((kind, t))
        init = B.global_variables_initializer() if gen.variables else None
    chosen = sorted({results[-1][1].name} | {t.name for _k, t in results
                                             if draw(st.booleans())})
    floats_out = {t.name for kk, t in pool if kk == F}
    return Case(g.as_graph_def(), {"x:0": x, "k:0": k}, chosen,
                init.name if init is not None else None,
                [f"{v.op.name}:0" for v in gen.variables], gen.features,
                {n for n in chosen if n in floats_out})
