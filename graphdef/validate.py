"""Static validation of a GraphDef: every problem in one pass, each a stable-coded Diagnostic.

The checks follow what TensorFlow rejects when it imports or first runs a graph (names,
inputs, OpDef signatures and attrs, edge dtypes, cycles, while-loop frames, devices), plus a
few warnings for things TensorFlow tolerates but that usually mean a mistake or version skew.
Every check is linear in the graph size, so a 10k-node graph validates in well under a second.

Diagnostics never stop validation: a node whose attrs do not determine its signature simply
skips the checks that need the signature, so one mistake yields one diagnostic, not a cascade.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as D
from .attrs import kind_of
from .frames import (
    ENTER_OPS,
    EXIT_OPS,
    LOOP_COND_OPS,
    MERGE_OPS,
    NEXT_ITERATION_OPS,
    SWITCH_OPS,
    analyze_frames,
)
from .functions import (
    CALL_OPS,
    CASE_OPS,
    IF_OPS,
    RETVAL_OP,
    RETVAL_SUFFIX,
    WHILE_OPS,
    Library,
    call_sites,
    find_recursion,
    instantiate_checked,
    signature,
)
from .graph import CONTROL_SLOT, Graph, Node, gc_paused, parse_input

ERROR = "error"
WARNING = "warning"

# code -> (severity, meaning). The one table of codes: the CLI help and the tests read it.
CODES: dict[str, tuple[str, str]] = {
    "duplicate-name": (ERROR, "two or more nodes share a name"),
    "invalid-name": (ERROR, "a node name is empty or not [A-Za-z0-9.][A-Za-z0-9_.\\-/>]*"),
    "missing-input": (ERROR, "an input names a node that does not exist"),
    "output-out-of-range": (ERROR, "an input reads output k of a node that has <= k outputs"),
    "control-before-data": (ERROR, "a control input (^x) is listed before a data input"),
    "unknown-op": (ERROR, "the op type is not in the OpDef registry"),
    "input-count": (ERROR, "the number of data inputs differs from the OpDef's"),
    "missing-attr": (ERROR, "an attr the OpDef requires (no default) is absent"),
    "attr-type": (ERROR, "an attr value has the wrong type for its AttrDef"),
    "attr-not-allowed": (ERROR, "an attr value is not among the AttrDef's allowed values"),
    "attr-minimum": (ERROR, "an int attr or list length is below the AttrDef's minimum"),
    "unknown-attr": (WARNING, "an attr the OpDef does not define (version skew?)"),
    "dtype-mismatch": (ERROR, "an edge carries a dtype the consumer does not accept"),
    "ref-mismatch": (ERROR, "a non-ref tensor feeds an input that must be a ref"),
    "cycle": (ERROR, "a cycle that does not close through NextIteration -> Merge"),
    "frame-mismatch": (ERROR, "a node gets inputs from two different while-loop frames"),
    "enter-frame-mismatch": (ERROR, "Enters of one loop name different frames"),
    "enter-parent-mismatch": (ERROR, "one frame is entered from two different parent frames"),
    "parallel-iterations-mismatch": (WARNING,
                                     "Enters of one loop disagree on parallel_iterations"),
    "exit-outside-frame": (ERROR, "an Exit that no Enter leads to"),
    "next-iteration-outside-frame": (ERROR, "a NextIteration outside any while-loop frame"),
    "loop-cond-without-switch": (ERROR, "a LoopCond that is not the predicate of any Switch"),
    "colocation-missing": (WARNING, "a _class 'loc:@x' colocation hint names no node"),
    "invalid-device": (ERROR, "a device string TensorFlow cannot parse"),
    "unknown-function": (ERROR, "a node calls a function the graph's library lacks"),
    "call-signature": (ERROR, "a call's argument or result types differ from the function's"),
    "recursion": (ERROR, "a function calls itself, directly or through others"),
    "duplicate-function": (ERROR, "two or more library functions share a name"),
    "missing-return": (ERROR, "a function result without a 'ret' entry, or a stray one"),
    "shape-overflow": (ERROR, "a shape or tensor attr has more elements than int64 counts"),
}
INT64_MAX = 2 ** 63 - 1
_UNSET: Any = object()

# TensorFlow's node-name rule (graph/node_builder and importer use the same pattern)
NAME_RE = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\-/>]*\Z")
# An identifier in a device spec: job names and device types
_DEVICE_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9]+")

# difflib compares a name against every candidate; on graphs of thousands of look-alike
# names ("layer_17/conv/weights") that costs ~0.1 ms per candidate, so candidates come from
# buckets (same scope, same last component) unless the graph is small, and all suggestions of
# one validation share a budget of comparisons
_ALL_NAMES_UP_TO = 1000
_BUCKET_LIMIT = 300
_SUGGEST_BUDGET = 100_000   # candidate comparisons per validation (a count: deterministic)
_DEFAULT_PARALLEL_ITERATIONS = 10


@dataclass
class Diagnostic:
    """One problem. ``extra`` holds code-specific fields (``path`` for cycles ...)."""

    code: str
    severity: str          # "error" | "warning"
    node: str | None
    op: str | None
    message: str
    extra: dict[str, Any] = field(default_factory=dict)
    function: str | None = None   # the library function the node is in; None: top level

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: code, severity, node, op, message, function, then the extra fields."""
        d: dict[str, Any] = {"code": self.code, "severity": self.severity, "node": self.node,
                             "op": self.op, "message": self.message,
                             "function": self.function}
        d.update(self.extra)
        return d

    def __str__(self) -> str:
        where = f"node '{self.node}'" + (f" ({self.op})" if self.op else "") \
            if self.node is not None else "graph"
        return f"{self.severity} [{self.code}] {where}: {self.message}"


def _diag(code: str, node: Node | None, message: str, **extra: Any) -> Diagnostic:
    sev = CODES[code][0]
    return Diagnostic(code, sev, node.name if node else None, node.op if node else None,
                      message, extra)


def validate(graph: Graph) -> list[Diagnostic]:
    """Every diagnostic for ``graph``: the top level first, ordered by the node they concern
    (file order), then the function library (duplicate names, recursion, then each function's
    body in library order, see :func:`_check_library`)."""
    with gc_paused():
        lib = Library(graph.library)
        out = _Validator(graph, lib).run()
        if len(lib) or lib.duplicates:
            out.extend(_check_library(graph, lib))
    return out


@dataclass(frozen=True)
class _OpFacts:
    """What the attr and signature checks found for one (op, attrs) combination that had
    nothing to report: nodes with the same op and attrs share it (a big graph has few)."""

    placeholder: bool              # a polymorphic body's attr: no signature to check
    in_types: list[int] | None
    out_types: list[int] | None
    calls: bool                    # some attr names a function: check_calls has work
    hints: bool                    # a _class attr: check_hints has colocation work


# (op, attrs) -> (the OpDef they were checked against, their facts) across validations: a
# Session validates its graph, and the optimizer validates its result, whose nodes are
# mostly the same (op, attrs) again (the LSTM classifier's optimized graph: 3.6 ms, most
# of it these checks). Facts depend on the key and the OpDef alone; an entry of an OpDef the
# registry has since replaced is computed again. Bounded: cleared when full.
_SHARED_FACTS: dict[tuple[Any, ...], tuple[Any, _OpFacts | None]] = {}
_SHARED_FACTS_MAX = 1 << 15


class _Validator:
    def __init__(self, graph: Graph, library: Library | None = None,
                 function: str | None = None, outer: Graph | None = None) -> None:
        from .opdefs.registry import registry

        self.g = graph
        self.lib = library
        self.function = function   # the function whose body ``graph`` is, if any
        self.outer = outer         # the top-level graph around that function
        self.reg = registry()
        self.out: list[Diagnostic] = []
        self._names: NameSuggester | None = None
        self._ops: NameSuggester | None = None
        self._out_types: dict[str, list[int] | None] = {}
        # (op, attrs) -> facts, or None when that combination has something to report (its
        # nodes are then checked one by one, so every message is exactly the per-node one)
        self._facts: dict[tuple[Any, ...], _OpFacts | None] = {}
        # facts per node index, all computed by the first call of facts()
        self._node_facts: list[_OpFacts | None] | None = None
        self._devices: dict[str, bool] = {}
        self._op_names: set[str] | None = None   # every node's op, once the facts are in
        # the node each name resolves to (the first of duplicates), by identity
        self.unique = [n for n in graph.nodes if graph.get(n.name) is n] \
            if graph.duplicates else graph.nodes

    # the name suggesters index every name: made only when a diagnostic needs a suggestion
    @property
    def names(self) -> NameSuggester:
        if self._names is None:
            self._names = NameSuggester(self.g.names)
        return self._names

    @property
    def ops(self) -> NameSuggester:
        if self._ops is None:
            # op names are flat (no scopes to bucket by) and few: search them all
            self._ops = NameSuggester(self.reg.names(), search_all=True)
        return self._ops

    def run(self) -> list[Diagnostic]:
        self.check_names()
        g = self.g
        irregular = g.irregular_inputs
        node_facts = self._all_facts()
        types_of = self._out_types
        # one node per name: each node's output types go in as the loop reaches it (its
        # producers, usually earlier in the file, are then in already; out_types() finds
        # the others)
        one_pass = not g.duplicates
        if not one_pass:
            self._all_out_types(node_facts)
        device_ok = self._devices
        for n, facts in zip(g.nodes, node_facts):
            if one_pass and facts is not None:
                types_of[n.name] = facts.out_types
            # the common case inline: attrs of this (op, attrs) known clean, every data
            # input reads an existing output of exactly the dtype the input takes; anything
            # else goes through the full checks (which also accept what differs only
            # legitimately, e.g. a ref read as its value)
            clean = facts is not None and n.index not in irregular
            if clean:
                in_types = facts.in_types  # type: ignore[union-attr]
                inputs = n.inputs
                if in_types is None or len(inputs) != len(in_types):
                    clean = False
                else:
                    k = 0
                    for src, slot in inputs:
                        types = types_of.get(src, _UNSET)
                        if types is _UNSET:
                            types = self.out_types(src)
                        if types is not None and (slot >= len(types)
                                                  or types[slot] != in_types[k]):
                            clean = False
                            break
                        k += 1
            if not clean:
                # something may be wrong: the full checks, which say exactly what
                self.check_inputs(n)
                self.check_op(n)
            if facts is None or facts.calls:
                self.check_calls(n)
            if facts is None or facts.hints:
                self.check_hints(n)
            elif n.device:
                ok = device_ok.get(n.device)
                if ok is None or not ok:
                    self.check_hints(n)
        self.check_cycles()
        self.check_frames()
        if self.out:
            order = {n.name: n.index for n in self.unique}
            big = len(self.g.nodes)
            # stable sort: diagnostics of one node stay in check order
            self.out.sort(key=lambda d: order.get(d.node, big) if d.node is not None else -1)
        return self.out

    def _all_facts(self) -> list[_OpFacts | None]:
        """facts() of every node, by node index: one loop, the (op, attrs) key of each node
        computed once (reading attrs through upb is most of the cost)."""
        if self._node_facts is not None:
            return self._node_facts
        reg = self.reg
        lib = self.lib
        cache = self._facts
        checked: dict[str, bool] = {}   # op -> whether its nodes have shared facts
        out: list[_OpFacts | None] = []
        for n in self.g.nodes:
            op = n.op
            ok = checked.get(op)
            if ok is None:
                ok = checked[op] = bool(op) and op in reg \
                    and not (lib is not None and op in lib)
            if not ok:
                out.append(None)
                continue
            key = _attrs_key(n)
            facts = cache.get(key, _UNSET)
            if facts is _UNSET:
                opdef = reg.get(op)
                shared = _SHARED_FACTS.get(key)
                if shared is not None and shared[0] is opdef:
                    facts = shared[1]
                else:
                    facts = self._compute_facts(n)
                    if len(_SHARED_FACTS) >= _SHARED_FACTS_MAX:
                        _SHARED_FACTS.clear()
                    _SHARED_FACTS[key] = (opdef, facts)
                cache[key] = facts
            out.append(facts)
        self._node_facts = out
        self._op_names = set(checked)
        return out

    def _all_out_types(self, node_facts: list[_OpFacts | None]
                       ) -> dict[str, list[int] | None]:
        """Output types by node name where the shared facts tell them (the rest, through
        out_types(), when asked)."""
        types_of = self._out_types
        for n in self.unique:
            facts = node_facts[n.index]
            if facts is not None:
                types_of[n.name] = facts.out_types
        return types_of

    # --- helpers ------------------------------------------------------------------------
    def suggest(self, name: str) -> str | None:
        return self.names.suggest(name)

    def facts(self, n: Node) -> _OpFacts | None:
        """The shared attr/signature facts of ``n``'s (op, attrs), computed with the first
        node that has them; None: ``n`` needs the full per-node checks."""
        return self._all_facts()[n.index]

    def _compute_facts(self, n: Node) -> _OpFacts | None:
        from .opdefs.registry import SignatureError

        calls = any(k == "func" or (k == "list" and len(av.list.func))
                    for av in n.attr.values() for k in [av.WhichOneof("value")])
        hints = "_class" in n.attr   # part of the key: the same for every node sharing it
        saved, self.out = self.out, []
        try:
            ok = self.check_attrs(n, self.reg.get(n.op))
            quiet = ok and not self.out
        finally:
            self.out = saved
        if not quiet:
            return None
        if any(av.WhichOneof("value") == "placeholder" for av in n.attr.values()):
            return _OpFacts(True, None, self._output_types(n), calls, hints)
        try:
            in_types = self.reg.input_types(n.proto)
        except SignatureError:
            return None
        return _OpFacts(False, in_types, self._output_types(n), calls, hints)

    def _output_types(self, n: Node) -> list[int] | None:
        from .opdefs.registry import SignatureError

        try:
            return self.reg.output_types(n.proto)
        except SignatureError:
            return None

    def out_types(self, name: str) -> list[int] | None:
        """Output DataTypes of node ``name`` (None: unknown op or undetermined signature)."""
        types = self._out_types.get(name, _UNSET)
        if types is not _UNSET:
            return types
        from .opdefs.registry import SignatureError

        n = self.g.get(name)
        types = None
        facts = self.facts(n) if n is not None else None
        if facts is not None:
            types = facts.out_types
        elif n is not None and self.lib is not None and n.op in self.lib:
            # a call by op name: the function's signature is its OpDef (DT_INVALID: unbound)
            sig = signature(self.lib.function(n.op), dict(n.attr))
            types = [t for _, t in sig.outputs]
        elif n is not None and n.op in self.reg:
            try:
                types = self.reg.output_types(n.proto)
            except SignatureError:
                types = None
        self._out_types[name] = types
        return types

    # --- names --------------------------------------------------------------------------
    def check_names(self) -> None:
        seen: dict[str, list[Node]] = {}
        dups = self.g.duplicates
        match = NAME_RE.match
        for n in self.g.nodes:
            if dups and n.name in dups:
                seen.setdefault(n.name, []).append(n)
            if not match(n.name):
                what = "is empty" if not n.name else f"'{n.name}' is ill-formed"
                self.out.append(_diag(
                    "invalid-name", n,
                    f"node name {what}: expected [A-Za-z0-9.][A-Za-z0-9_.\\-/>]* "
                    "(TensorFlow's rule)"))
        for name, nodes in seen.items():
            where = ", ".join(f"{m.op} at position {m.index}" for m in nodes)
            for m in nodes[1:]:
                self.out.append(_diag(
                    "duplicate-name", m,
                    f"node name '{name}' is not unique: expected one node, found "
                    f"{len(nodes)} ({where})", count=len(nodes)))

    # --- inputs -------------------------------------------------------------------------
    def check_inputs(self, n: Node) -> None:
        if n.index not in self.g.irregular_inputs:
            # every producer exists and no control input comes first: only the output
            # index can be wrong
            for src, slot in n.inputs:
                types = self.out_types(src)
                if types is not None and slot >= len(types):
                    break
            else:
                return
        g = self.g
        first_control: str | None = None
        reported_order = False
        for s in n.proto.input:
            src, slot = parse_input(s)
            if slot == CONTROL_SLOT:
                if first_control is None:
                    first_control = s
            elif first_control is not None and not reported_order:
                reported_order = True
                self.out.append(_diag(
                    "control-before-data", n,
                    f"control input '{first_control}' comes before data input '{s}': "
                    "control inputs must come after all data inputs"))
            producer = g.get(src)
            if producer is None:
                hint = self.suggest(src) if src else None
                extra = {"input": s}
                msg = (f"input '{s}' names node '{src}', which does not exist" if s != src
                       else f"input '{s}' names a node that does not exist")
                if not src:
                    msg = f"input '{s}' names no node (empty name)"
                if hint:
                    msg += f"; did you mean '{hint}'?"
                    extra["suggestion"] = hint
                self.out.append(_diag("missing-input", n, msg, **extra))
                continue
            if slot == CONTROL_SLOT:
                continue
            types = self.out_types(src)
            if types is not None and slot >= len(types):
                count = f"{len(types)} output{'s' if len(types) != 1 else ''}"
                if len(types) == 1:
                    valid = f"only {src}:0 exists"
                elif types:
                    valid = f"{src}:0 to {src}:{len(types) - 1} exist"
                else:
                    valid = "it produces no tensors"
                self.out.append(_diag(
                    "output-out-of-range", n,
                    f"input '{s}' reads output {slot} of {producer.op} '{src}', which has "
                    f"{count} ({valid})", input=s))

    # --- op, attrs, signature, edge dtypes ------------------------------------------------
    def check_op(self, n: Node) -> None:
        facts = self.facts(n)
        if facts is not None:
            # the attrs and signature of this (op, attrs) were checked clean already
            if facts.placeholder or facts.in_types is None:
                return
            if len(n.inputs) == len(facts.in_types):
                self.check_edge_types(n, facts.in_types)
                return
        from .opdefs.registry import SignatureError

        reg = self.reg
        if not n.op:
            self.out.append(_diag("unknown-op", n, "node has no op type"))
            return
        if self.lib is not None and n.op in self.lib:
            self.check_call_by_name(n)
            return
        opdef = reg.get(n.op)
        if opdef is None:
            close = self.ops.suggest(n.op, cutoff=0.8)
            msg = f"op type '{n.op}' is not registered (not one of the {len(reg)} known ops)"
            if self.lib is not None and len(self.lib):
                msg = msg[:-1] + f", nor one of the {len(self.lib)} library functions)"
            extra = {}
            if close:
                msg += f"; did you mean '{close}'?"
                extra["suggestion"] = close
            self.out.append(_diag("unknown-op", n, msg, **extra))
            return
        attrs_ok = self.check_attrs(n, opdef)
        if not attrs_ok:
            return  # the signature depends on attrs already reported
        if any(av.WhichOneof("value") == "placeholder" for av in n.attr.values()):
            return  # a polymorphic body checked without its caller's types: no signature
        try:
            in_types = reg.input_types(n.proto, opdef)
        except SignatureError as e:
            # attrs looked fine one by one but still do not give a signature
            self.out.append(_diag("attr-type", n, f"attrs do not determine the signature: {e}"))
            return
        if len(n.inputs) != len(in_types):
            sig = ", ".join(
                f"{a.name}:{a.type_attr or a.type_list_attr or D.name(a.type)}"
                + (f"*{a.number_attr}" if a.number_attr else "")
                for a in opdef.input_arg)
            self.out.append(_diag(
                "input-count", n,
                f"{n.op} expects {len(in_types)} data input{'s' if len(in_types) != 1 else ''}"
                f" ({sig or 'none'}) given its attrs, found {len(n.inputs)}",
                expected=len(in_types), found=len(n.inputs)))
            return
        self.check_edge_types(n, in_types)

    def check_edge_types(self, n: Node, in_types: list[int]) -> None:
        """Each data edge's dtype against what input k of ``n`` takes (DT_INVALID: unknown,
        a type a polymorphic function leaves to its caller)."""
        for e in n.in_edges:
            if e.dst_input == CONTROL_SLOT:
                continue
            types = self.out_types(e.src)
            if types is None or e.src_output >= len(types):
                continue
            want, have = in_types[e.dst_input], types[e.src_output]
            if want == D.DT_INVALID or have == D.DT_INVALID:
                continue
            src_desc = f"'{e.src}:{e.src_output}'" if e.src_output else f"'{e.src}'"
            if D.base(want) != D.base(have):
                self.out.append(_diag(
                    "dtype-mismatch", n,
                    f"input {e.dst_input} expects {D.name(want)}, but {src_desc} "
                    f"({self.g.get(e.src).op}) gives {D.name(have)}",
                    input=e.dst_input, expected=D.name(want), found=D.name(have)))
            elif D.is_ref(want) and not D.is_ref(have):
                self.out.append(_diag(
                    "ref-mismatch", n,
                    f"input {e.dst_input} must be a ref ({D.name(want)}), but {src_desc} "
                    f"({self.g.get(e.src).op}) gives a plain {D.name(have)}",
                    input=e.dst_input, expected=D.name(want), found=D.name(have)))

    def check_attrs(self, n: Node, opdef: Any) -> bool:
        """Attr checks; False when an attr problem makes the signature unknowable."""
        defs = self.reg.attr_defs(n.op)
        ok = True
        attr = n.attr
        for name, ad in defs.items():
            if name not in attr:
                if not ad.HasField("default_value"):
                    self.out.append(_diag(
                        "missing-attr", n,
                        f"required attr '{name}' ({ad.type}) is missing", attr=name,
                        expected=ad.type))
                    ok = False
                continue
            av = attr[name]
            kind = kind_of(av)
            if not _kind_matches(kind, ad.type):
                found = "no value" if kind == "none" else f"a {kind}"
                self.out.append(_diag(
                    "attr-type", n,
                    f"attr '{name}' should be a {ad.type}, found {found} "
                    f"({_short(av)})", attr=name, expected=ad.type, found=kind))
                ok = False
                continue
            if kind == "placeholder":
                continue  # its value comes from the caller: nothing more to check here
            if kind in ("tensor", "shape"):
                self.check_shape_size(n, name, av.tensor.tensor_shape if kind == "tensor"
                                      else av.shape)
            if ad.type in ("type", "list(type)"):
                refs = [t for t in (av.list.type if ad.type == "list(type)" else [av.type])
                        if D.is_ref(t)]
                if refs:
                    # as TensorFlow's ValidateAttrValue: a ref type is never an attr's value
                    self.out.append(_diag(
                        "attr-type", n,
                        f"attr '{name}' is the reference type {D.name(refs[0])}: attrs take "
                        f"plain types (expected {D.name(D.base(refs[0]))})", attr=name,
                        expected=D.name(D.base(refs[0])), found=D.name(refs[0])))
                    ok = False
                    continue
            if ad.HasField("allowed_values"):
                bad = _not_allowed(av, ad)
                if bad is not None:
                    self.out.append(_diag(
                        "attr-not-allowed", n,
                        f"attr '{name}' is {bad}, which {n.op} does not allow "
                        f"(allowed: {_allowed_text(ad)})", attr=name))
                    ok = False
            if ad.has_minimum:
                if ad.type == "int":
                    if av.i < ad.minimum:
                        self.out.append(_diag(
                            "attr-minimum", n,
                            f"attr '{name}' is {av.i}, expected at least {ad.minimum}",
                            attr=name))
                        ok = False
                elif ad.type.startswith("list"):
                    count = _list_len(av)
                    if count < ad.minimum:
                        self.out.append(_diag(
                            "attr-minimum", n,
                            f"attr '{name}' has {count} element{'s' if count != 1 else ''}, "
                            f"expected at least {ad.minimum}", attr=name))
                        ok = False
        # sorted: upb iterates a map in an order that changes from one process to the next
        for name in sorted(attr):
            if name not in defs and not name.startswith("_"):
                self.out.append(_diag(
                    "unknown-attr", n,
                    f"attr '{name}' is not defined by {n.op}'s OpDef (known: "
                    f"{', '.join(sorted(defs)) or 'none'}); written by a newer TensorFlow?",
                    attr=name))
        return ok

    def check_shape_size(self, n: Node, attr: str, shape: Any) -> None:
        """TensorFlow's TensorShape refuses more than 2**63-1 elements (known dims only)."""
        dims = [d.size for d in shape.dim]
        count = 1
        for d in dims:
            if d > 0:
                count *= d
        if count > INT64_MAX or any(d > INT64_MAX for d in dims):
            self.out.append(_diag(
                "shape-overflow", n,
                f"attr '{attr}' has shape [{','.join(map(str, dims))}]: {count} elements, "
                f"more than int64 can count ({INT64_MAX})", attr=attr))

    # --- calls into the function library -------------------------------------------------------
    def check_call_by_name(self, n: Node) -> None:
        """A node whose op is a library function: its signature stands in for the OpDef."""
        assert self.lib is not None
        fdef = self.lib.function(n.op)
        for ad in fdef.signature.attr:
            if ad.name not in n.attr and not ad.HasField("default_value"):
                self.out.append(_diag(
                    "missing-attr", n,
                    f"function '{n.op}' needs attr '{ad.name}' ({ad.type}) from its caller",
                    attr=ad.name, expected=ad.type))
                return
        sig = signature(fdef, dict(n.attr))
        want = [t for _, t in sig.inputs]
        if len(n.inputs) != len(want):
            args = ", ".join(f"{a}:{D.name(t) if t else '?'}" for a, t in sig.inputs)
            self.out.append(_diag(
                "input-count", n,
                f"function '{n.op}' takes {len(want)} argument{'s' if len(want) != 1 else ''}"
                f" ({args or 'none'}), found {len(n.inputs)} data inputs",
                expected=len(want), found=len(n.inputs)))
            return
        self.check_edge_types(n, want)

    def check_calls(self, n: Node) -> None:
        """Func-valued attrs: the function exists and its signature matches the call's types
        (PartitionedCall Tin/Tout, If/Case Tin/Tout against each branch, While T against
        cond's arguments and body's arguments and results)."""
        facts = self.facts(n)
        if facts is not None and not facts.calls:
            return
        sites = call_sites(n.proto)   # func attrs only: calls by op name are check_op's
        if not sites:
            return
        lib = self.lib
        for attr, fname, fattrs in sites:
            if lib is None or fname not in lib:
                known = lib.names() if lib is not None else []
                close = difflib.get_close_matches(fname, known, n=1, cutoff=0.8)
                msg = (f"attr '{attr}' calls function '{fname}', which the graph's library "
                       f"does not define ({len(known)} function{'s' if len(known) != 1 else ''}"
                       " there)")
                extra: dict[str, Any] = {"attr": attr, "callee": fname}
                if close:
                    msg += f"; did you mean '{close[0]}'?"
                    extra["suggestion"] = close[0]
                self.out.append(_diag("unknown-function", n, msg, **extra))
                continue
            op = n.op
            if op in CALL_OPS:
                self._expect(n, attr, fname, fattrs, "Tin", "Tout")
            elif op in IF_OPS or op in CASE_OPS:
                self._expect(n, attr, fname, fattrs, "Tin", "Tout")
            elif op in WHILE_OPS:
                self._expect(n, attr, fname, fattrs, "T", "T" if attr == "body" else None)

    def _types_attr(self, n: Node, key: str) -> list[int] | None:
        if key not in n.attr or n.attr[key].WhichOneof("value") not in ("list", None):
            return None   # missing or mistyped: check_attrs reports it
        return list(n.attr[key].list.type)

    def _expect(self, n: Node, attr: str, fname: str, fattrs: dict[str, Any],
                in_key: str, out_key: str | None) -> None:
        assert self.lib is not None
        sig = signature(self.lib.function(fname), fattrs)
        sides = [("argument", in_key, sig.inputs)]
        if out_key is not None:
            sides.append(("result", out_key, sig.outputs))
        for what, key, args in sides:
            call = self._types_attr(n, key)
            if call is None:
                continue
            have = [t for _, t in args]
            if len(call) != len(have):
                self.out.append(_diag(
                    "call-signature", n,
                    f"attr '{attr}': function '{fname}' has {len(have)} {what}"
                    f"{'s' if len(have) != 1 else ''} ({_types_text(have)}), but the call's "
                    f"{key} lists {len(call)} ({_types_text(call)})",
                    attr=attr, callee=fname, expected=len(call), found=len(have)))
                continue
            for k, (want, got) in enumerate(zip(call, have)):
                if want and got and D.base(want) != D.base(got):
                    self.out.append(_diag(
                        "call-signature", n,
                        f"attr '{attr}': {what} {k} ('{args[k][0]}') of function '{fname}' "
                        f"is {D.name(got)}, but the call's {key}[{k}] says {D.name(want)}",
                        attr=attr, callee=fname, expected=D.name(want), found=D.name(got)))
                    break   # one per side: the rest usually follows from the first
        if out_key is None and len(sig.outputs) != 1:
            self.out.append(_diag(
                "call-signature", n,
                f"attr '{attr}': the loop condition '{fname}' returns {len(sig.outputs)} "
                "results, expected 1 (the predicate)", attr=attr, callee=fname,
                expected=1, found=len(sig.outputs)))

    # --- colocation hints and devices ---------------------------------------------------------
    def check_hints(self, n: Node) -> None:
        if "_class" in n.attr:
            for s in n.attr["_class"].list.s:
                text = s.decode("utf-8", "replace")
                if text.startswith("loc:@"):
                    target = text[5:]
                    # a body may keep its outer graph's hints (gradient functions do)
                    if target not in self.g and (self.outer is None
                                                 or target not in self.outer):
                        self.out.append(_diag(
                            "colocation-missing", n,
                            f"colocation hint '{text}' names node '{target}', which does not "
                            "exist", target=target))
        if n.device and not self._device_ok(n.device):
            self.out.append(_diag(
                "invalid-device", n,
                f"device '{n.device}' does not parse: expected a spec like "
                "/job:x/replica:0/task:0/device:CPU:0 (or legacy /cpu:0, /gpu:0)",
                device=n.device))

    def _device_ok(self, device: str) -> bool:
        ok = self._devices.get(device)
        if ok is None:
            ok = self._devices[device] = parse_device(device)
        return ok

    # --- cycles -------------------------------------------------------------------------
    def _in_file_order(self) -> bool:
        """Whether every edge but the loop back edges runs forward in file order, as in the
        graphs TensorFlow writes: then there is no cycle, and no need to look for one."""
        get = self.g.get
        if not self.g.duplicates:
            # the graph found its backward edges while it was built
            return all(get(e.dst).op in MERGE_OPS and get(e.src).op in NEXT_ITERATION_OPS
                       for e in self.g.backward_edges)
        for n in self.unique:
            i = n.index
            merge = n.op in MERGE_OPS
            for e in n.in_edges:
                p = get(e.src)
                if p.index >= i and not (merge and p.op in NEXT_ITERATION_OPS):
                    return False
        return True

    def check_cycles(self) -> None:
        if self._in_file_order():
            return
        nodes = self.unique
        idx = {n.name: i for i, n in enumerate(nodes)}
        # adjacency (dataflow direction) minus the legal loop back edges NextIteration -> Merge
        succ: list[list[int]] = [[] for _ in nodes]
        for i, n in enumerate(nodes):
            back = n.op in NEXT_ITERATION_OPS
            for e in n.out_edges:
                j = idx.get(e.dst)
                if j is None:
                    continue
                if back and nodes[j].op in MERGE_OPS:
                    continue
                succ[i].append(j)
        if _acyclic(succ):
            return   # the usual case, settled by one Kahn pass (cheaper than Tarjan's)
        for comp in _strongly_connected(succ):
            if len(comp) == 1:
                v = comp[0]
                if v not in succ[v]:
                    continue
            start = min(comp)
            path = _cycle_through(start, set(comp), succ)
            names = [nodes[i].name for i in path]
            self.out.append(_diag(
                "cycle", nodes[start],
                f"{len(comp)} node{'s' if len(comp) != 1 else ''} in a cycle that does not "
                f"close through NextIteration -> Merge: {' -> '.join(names)}",
                path=names, size=len(comp)))

    # --- while-loop frames --------------------------------------------------------------
    def check_frames(self) -> None:
        g = self.g
        loop_ops = ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS | LOOP_COND_OPS
        if self._op_names is not None and not g.duplicates:
            has_loops = not loop_ops.isdisjoint(self._op_names)   # every op, seen once
        else:
            has_loops = any(n.op in loop_ops for n in self.unique)
        if not has_loops:
            return
        fa = analyze_frames(g)
        for p in fa.problems:
            node = g.get(p.node)
            code = p.code if p.code in CODES else "frame-mismatch"
            self.out.append(_diag(code, node, p.message))
        self.check_loop_families()
        for n in self.unique:
            if n.op in LOOP_COND_OPS:
                feeds_switch = any(e.dst_input == 1 and g.get(e.dst).op in SWITCH_OPS
                                   for e in n.out_edges)
                if not feeds_switch:
                    self.out.append(_diag(
                        "loop-cond-without-switch", n,
                        "LoopCond should be the predicate (input 1) of its loop's Switches, "
                        "but no Switch reads it"))

    def check_loop_families(self) -> None:
        """Group nodes that must share a frame; the Enters of one group must agree.

        Union every edge except those that change frames (into an Enter, out of an Exit) and
        the Enter -> Merge entry edges, which are kept apart so that a Merge joining an Enter
        of a different frame can be reported at the Merge, naming both frames.
        """
        g = self.g
        nodes = self.unique
        get = g.by_name.get
        # a node's position in ``nodes``: its index when no name is duplicated
        dups = bool(g.duplicates)
        idx = {n.name: i for i, n in enumerate(nodes)} if dups else {}
        parent = list(range(len(nodes)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        frame_names: dict[str, str] = {}   # Enter -> its frame_name, read once

        def frame_of(enter: Node) -> str:
            name = frame_names.get(enter.name)
            if name is None:
                name = frame_names[enter.name] = _frame_name(enter)
            return name

        merge_entries: list[tuple[Node, Node]] = []   # (Merge, Enter feeding it)
        for n in nodes:
            if n.op in ENTER_OPS:
                continue  # an Enter's inputs live in the parent frame
            j = idx[n.name] if dups else n.index
            merge = n.op in MERGE_OPS
            for e in n.in_edges:
                src = get(e.src)   # an edge's source always exists
                if src.op in EXIT_OPS:
                    continue  # an Exit's consumers live in the parent frame
                if merge and src.op in ENTER_OPS:
                    if e.dst_input != CONTROL_SLOT:
                        merge_entries.append((n, src))
                    continue
                ri, rj = find(idx[e.src] if dups else src.index), find(j)
                if ri != rj:
                    parent[ri] = rj

        # frame names per group: Enters inside it, then Enters feeding its Merges
        members: dict[int, list[Node]] = {}
        for n in nodes:
            if n.op in ENTER_OPS and n.out_edges:
                members.setdefault(find(idx[n.name] if dups else n.index), []).append(n)
        entries: dict[int, list[tuple[Node, Node]]] = {}
        for m, e in merge_entries:
            entries.setdefault(find(idx[m.name] if dups else m.index), []).append((m, e))

        for root in set(members) | set(entries):
            inside = members.get(root, [])
            joins = entries.get(root, [])
            votes: dict[str, list[int]] = {}
            # Enters inside the group outvote entry Enters on ties (they are the loop's own
            # view of its frame); then file order decides
            for rank, e in enumerate(inside):
                votes.setdefault(frame_of(e), [0, 0, rank])[0] += 1
            for rank, (_m, e) in enumerate(joins):
                v = votes.setdefault(frame_of(e), [0, 0, len(inside) + rank])
                v[1] += 1
            frame = min(votes, key=lambda f: (-(votes[f][0] + votes[f][1]), -votes[f][0],
                                              votes[f][2]))
            like = next((e for e in inside if frame_of(e) == frame),
                        next((e for _m, e in joins if frame_of(e) == frame), None))
            for e in inside:
                fe = frame_of(e)
                if fe != frame:
                    self.out.append(_diag(
                        "enter-frame-mismatch", e,
                        f"Enter names frame '{fe}', but the loop it feeds runs in frame "
                        f"'{frame}' (as Enter '{like.name}' says)",
                        frames=[fe, frame]))
            for m, e in joins:
                fe = frame_of(e)
                if fe == frame:
                    continue
                nexts = [s for s, _k in m.inputs if (p := g.get(s)) is not None
                         and p.op in NEXT_ITERATION_OPS]
                other = (f"NextIteration '{nexts[0]}' of frame '{frame}'" if nexts
                         else f"the rest of its loop in frame '{frame}'")
                self.out.append(_diag(
                    "enter-frame-mismatch", m,
                    f"Merge joins Enter '{e.name}' of frame '{fe}' and {other}: one loop's "
                    "Enters must all name the same frame", frames=[fe, frame],
                    enter=e.name))
            pis: dict[int, Node] = {}
            for e in [*inside, *(e for _m, e in joins)]:
                if frame_of(e) == frame:
                    pis.setdefault(_parallel_iterations(e), e)
            if len(pis) > 1:
                (p0, e0), *rest = sorted(pis.items(), key=lambda kv: kv[1].index)
                for p1, e1 in rest:
                    self.out.append(_diag(
                        "parallel-iterations-mismatch", e1,
                        f"parallel_iterations is {p1}, but Enter '{e0.name}' of the same "
                        f"frame '{frame}' says {p0}", frame=frame))


# --- the function library ------------------------------------------------------------------

# Distinct caller bindings validated per polymorphic function; more add little but time.
_MAX_INSTANTIATIONS = 8


def _check_library(graph: Graph, lib: Library) -> list[Diagnostic]:
    """Duplicate function names, recursion, then every function body in library order.

    A body is checked as a GraphDef (``instantiate_checked``: ``_Arg`` nodes typed by the
    signature, ``_Retval`` nodes for the results) by the same checks as the top level, each
    diagnostic naming its function. A polymorphic function (signature attrs such as ``T``)
    is checked once per distinct binding its callers give (up to _MAX_INSTANTIATIONS); one
    no caller binds is checked leniently: attrs left as ``$T`` placeholders and whatever
    types they decide are not compared. Functions with list-valued arguments are not
    checked inside (only their calls are).
    """
    from .errors import UnimplementedError

    out: list[Diagnostic] = []
    for name in dict.fromkeys(lib.duplicates):
        count = sum(1 for f in lib.proto.function if f.signature.name == name)
        out.append(Diagnostic("duplicate-function", ERROR, None, None,
                              f"function name '{name}' is not unique: the library defines "
                              f"it {count} times", {"count": count}, function=name))
    for cycle in find_recursion(graph.graph_def):
        out.append(Diagnostic("recursion", ERROR, None, None,
                              f"function '{cycle[0]}' calls itself: {' -> '.join(cycle)} "
                              "(TensorFlow cannot inline or lower a recursive call)",
                              {"path": cycle}, function=cycle[0]))
    bindings = _bindings(graph, lib)
    for name, fdef in lib.functions.items():
        seen: set[tuple[str, str | None, str]] = set()
        for attrs in bindings.get(name) or [None]:
            try:
                body, problems = instantiate_checked(fdef, attrs, lib)
            except UnimplementedError:
                break
            for d in _check_body(name, body, problems, lib, graph):
                key = (d.code, d.node, d.message)
                if key not in seen:   # instantiations usually share their mistakes
                    seen.add(key)
                    out.append(d)
    return out


def _bindings(graph: Graph, lib: Library) -> dict[str, list[dict[str, Any]]]:
    """Polymorphic function -> the distinct concrete attr bindings its callers give."""
    from .functions import iter_nodes

    poly = {name: f for name, f in lib.functions.items() if len(f.signature.attr)}
    out: dict[str, dict[bytes, dict[str, Any]]] = {}
    if not poly:
        return {}
    for _fn, nd in iter_nodes(graph.graph_def):
        for _attr, fname, fattrs in call_sites(nd, lib):
            fdef = poly.get(fname)
            if fdef is None:
                continue
            bound: dict[str, Any] = {}
            for ad in fdef.signature.attr:
                av = fattrs.get(ad.name)
                if av is not None and av.WhichOneof("value") != "placeholder":
                    bound[ad.name] = av
            if any(ad.name not in bound and not ad.HasField("default_value")
                   for ad in fdef.signature.attr):
                continue   # bound by an enclosing function's own placeholders: lenient
            key = b"".join(k.encode() + b"=" + bound[k].SerializeToString(deterministic=True)
                           for k in sorted(bound))
            found = out.setdefault(fname, {})
            if len(found) < _MAX_INSTANTIATIONS:
                found.setdefault(key, bound)
    return {name: list(found.values()) for name, found in out.items()}


def _check_body(fname: str, body: Any, problems: list[Any], lib: Library, outer: Graph
                ) -> list[Diagnostic]:
    g = Graph(body)
    diags = [Diagnostic(p.kind, CODES[p.kind][0], p.node,
                        g.get(p.node).op if p.node and p.node in g else None, p.message,
                        {"input": p.input} if p.input is not None else {})
             for p in problems]
    reported = {(p.node, p.input) for p in problems if p.input is not None}
    for d in _Validator(g, lib, fname, outer).run():
        if d.code == "missing-input" and (d.node, d.extra.get("input")) in reported:
            continue   # already said, in the function's own spelling
        diags.append(d)
    order = {n.name: n.index for n in g.nodes}
    diags.sort(key=lambda d: order.get(d.node, -1) if d.node is not None else -1)
    for d in diags:
        d.function = fname
        if d.op == RETVAL_OP and d.node is not None and d.node.endswith(RETVAL_SUFFIX):
            # the synthetic _Retval node is the function's result: say so
            d.message = f"result '{d.node[:-len(RETVAL_SUFFIX)]}': {d.message}"
            d.node, d.op = None, None
        # every message says "in function 'F'" once
        d.message = d.message.replace(f" of function '{fname}'", f" in function '{fname}'")
        if f"in function '{fname}'" not in d.message:
            d.message += f" (in function '{fname}')"
    return diags


def _types_text(types: list[int]) -> str:
    return ", ".join(D.name(t) if t else "?" for t in types) or "none"


# ops whose "value" attr is a tensor that may be large: keyed by its dtype and shape only
_TENSOR_VALUE_OPS = frozenset({"Const", "HostConst"})


def _attrs_key(n: Node) -> tuple[Any, ...]:
    """A hashable key of everything the attr and signature checks read from ``n``: its op
    and attrs (a Const's value only by dtype and shape: no check reads the values)."""
    attr = n.proto.attr
    # ``attr[name]`` per key: the map's items() view iterates in Python, twice as slow
    if n.op in _TENSOR_VALUE_OPS:
        parts: list[Any] = []
        for name in attr:
            v = attr[name]
            if name == "value" and v.WhichOneof("value") == "tensor":
                t = v.tensor
                parts.append((name, t.dtype, t.tensor_shape.SerializeToString()))
            else:
                parts.append((name, v.SerializeToString()))
        return (n.op, *parts)
    return (n.op, *[(name, attr[name].SerializeToString()) for name in attr])


class NameSuggester:
    """"Did you mean" for names: difflib's closest match among likely candidates, cached.

    Small name sets are searched whole; big ones only among names in the same scope or with
    the same last component (typos rarely change both), so a suggestion stays cheap even on
    10k-node graphs. Once the comparison budget is spent, no more suggestions are made (a
    count, not a clock, so the output does not depend on the machine).
    """

    def __init__(self, names: Iterable[str], budget: int = _SUGGEST_BUDGET,
                 search_all: bool = False) -> None:
        self._names = list(names)
        self._search_all = search_all
        self._by_scope: dict[str, list[str]] | None = None
        self._by_leaf: dict[str, list[str]] | None = None
        self._cache: dict[tuple[str, float], str | None] = {}
        self._budget = budget

    def _candidates(self, name: str) -> list[str]:
        if self._search_all or len(self._names) <= _ALL_NAMES_UP_TO:
            return self._names
        if self._by_scope is None:
            self._by_scope, self._by_leaf = {}, {}
            for n in self._names:
                scope, _, leaf = n.rpartition("/")
                self._by_scope.setdefault(scope, []).append(n)
                self._by_leaf.setdefault(leaf, []).append(n)
        scope, _, leaf = name.rpartition("/")
        assert self._by_leaf is not None
        return (self._by_scope.get(scope, [])[:_BUCKET_LIMIT]
                + self._by_leaf.get(leaf, [])[:_BUCKET_LIMIT])

    def suggest(self, name: str, cutoff: float = 0.6) -> str | None:
        key = (name, cutoff)
        if key in self._cache:
            return self._cache[key]
        best = None
        candidates = self._candidates(name)
        if len(candidates) <= self._budget:
            self._budget -= len(candidates)
            close = difflib.get_close_matches(name, candidates, n=1, cutoff=cutoff)
            best = close[0] if close else None
        self._cache[key] = best
        return best


# --- helpers without state --------------------------------------------------------------------

def _frame_name(n: Node) -> str:
    attr = n.proto.attr
    return attr["frame_name"].s.decode("utf-8", "replace") if "frame_name" in attr else ""


def _parallel_iterations(n: Node) -> int:
    attr = n.proto.attr
    return int(attr["parallel_iterations"].i) if "parallel_iterations" in attr \
        else _DEFAULT_PARALLEL_ITERATIONS


def _kind_matches(kind: str, want: str) -> bool:
    if kind == want:
        return True
    if kind == "list":                  # an empty list fits every list type
        return want.startswith("list(")
    return kind == "placeholder"        # function-body placeholders: resolved at call time


def _list_len(av: Any) -> int:
    lv = av.list
    return (len(lv.s) + len(lv.i) + len(lv.f) + len(lv.b) + len(lv.type) + len(lv.shape)
            + len(lv.tensor) + len(lv.func))


def _not_allowed(av: Any, ad: Any) -> str | None:
    """A description of the first value not in ``ad.allowed_values``, or None."""
    allowed = ad.allowed_values.list
    if ad.type == "type":
        return None if av.type in allowed.type else D.name(av.type)
    if ad.type == "list(type)":
        bad = [t for t in av.list.type if t not in allowed.type]
        return f"a list holding {D.name(bad[0])}" if bad else None
    if ad.type == "string":
        return None if av.s in allowed.s else repr(av.s.decode("utf-8", "replace"))
    if ad.type == "list(string)":
        bad = [s for s in av.list.s if s not in allowed.s]
        return f"a list holding {bad[0].decode('utf-8', 'replace')!r}" if bad else None
    return None


def _allowed_text(ad: Any) -> str:
    lv = ad.allowed_values.list
    if len(lv.type):
        return ", ".join(D.name(t) for t in lv.type)
    return ", ".join(repr(s.decode("utf-8", "replace")) for s in lv.s)


def _short(av: Any) -> str:
    from google.protobuf import text_format

    text = text_format.MessageToString(av, as_one_line=True)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_device(spec: str) -> bool:
    """Whether TensorFlow's full device-name parser accepts ``spec`` ("" is fine).

    Components, each optional, in this order and repeatable as TensorFlow allows:
    ``/job:NAME``, ``/replica:N``, ``/task:N``, ``/device:TYPE[:N|*]``, and the legacy
    ``/cpu:N`` / ``/gpu:N`` (any case of CPU/GPU as TensorFlow writes them). ``*`` stands
    for "any" wherever TensorFlow allows it.
    """
    s = spec
    while s:
        progress = False
        if s.startswith("/job:"):
            s = s[5:]
            s, ok = _consume(s, _DEVICE_WORD)
            if not ok:
                return False
            progress = True
        if s.startswith("/replica:"):
            s, ok = _consume(s[9:], _NUMBER)
            if not ok:
                return False
            progress = True
        if s.startswith("/task:"):
            s, ok = _consume(s[6:], _NUMBER)
            if not ok:
                return False
            progress = True
        if s.startswith("/device:"):
            s, ok = _consume(s[8:], _DEVICE_WORD)
            if not ok:
                return False
            if s.startswith(":"):
                s, ok = _consume(s[1:], _NUMBER)
                if not ok:
                    return False
            progress = True
        for legacy in ("/cpu:", "/CPU:", "/gpu:", "/GPU:"):
            if s.startswith(legacy):
                s, ok = _consume(s[len(legacy):], _NUMBER)
                if not ok:
                    return False
                progress = True
        if not progress:
            return False
    return True


def _consume(s: str, pattern: re.Pattern[str]) -> tuple[str, bool]:
    """Strip ``*`` or one match of ``pattern`` from the front of ``s``."""
    if s.startswith("*"):
        return s[1:], True
    m = pattern.match(s)
    if not m:
        return s, False
    return s[m.end():], True


def _acyclic(succ: list[list[int]]) -> bool:
    """Whether the graph has no cycle: Kahn's algorithm reaches every node."""
    indeg = [0] * len(succ)
    for edges in succ:
        for w in edges:
            indeg[w] += 1
    ready = [v for v, d in enumerate(indeg) if d == 0]
    done = 0
    while ready:
        v = ready.pop()
        done += 1
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return done == len(succ)


def _strongly_connected(succ: list[list[int]]) -> Iterator[list[int]]:
    """Tarjan's SCCs, iteratively (graphs are deep: a 10k chain would overflow recursion)."""
    n = len(succ)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, pos = work[-1]
            edges = succ[v]
            if pos < len(edges):
                work[-1] = (v, pos + 1)
                w = edges[pos]
                if index[w] == -1:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ[v]:
                    yield comp


def _cycle_through(start: int, comp: set[int], succ: list[list[int]]) -> list[int]:
    """A shortest cycle start -> ... -> start inside one SCC (breadth-first)."""
    prev: dict[int, int] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for v in frontier:
            for w in succ[v]:
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    path.reverse()
                    return path + [start]
                if w in comp and w not in seen:
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start, start]  # unreachable for a real SCC; keeps the type simple
