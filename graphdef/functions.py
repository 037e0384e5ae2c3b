"""Function libraries (``GraphDef.library``): the one helper every tool uses to walk them.

TensorFlow 2 graphs keep most of their nodes in FunctionDefs: bodies of ``While``/``If``/
``Case`` and of ``PartitionedCall``/``StatefulPartitionedCall``, or of a node whose op *is* a
function name. A function body differs from a GraphDef in two ways this module hides:

* its inputs name function arguments (``x``) or node outputs by output-arg name
  (``node:out_arg:index``), where a GraphDef would say ``node:flat_slot``;
* attr values may be placeholders (``$T``) bound by the caller's attrs.

:func:`body_graph_def` turns a FunctionDef (with bound attrs) into a plain GraphDef with
``_Arg``/``_Retval`` nodes, as TensorFlow's FunctionDefToBodyHelper does, so that validation,
shape rules and inlining reuse the code written for GraphDefs. :func:`iter_nodes` yields
``(function name or None, NodeDef)`` for every node of a graph and its library, and
:func:`called_functions` names the functions a node calls through any func-valued attr.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import dtypes as D
from .errors import InvalidArgumentError, NotFoundError, UnimplementedError

# Functional ops and the attrs holding the functions they run.
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IF_OPS = frozenset({"If", "StatelessIf"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})
FUNCTIONAL_OPS = CALL_OPS | IF_OPS | CASE_OPS | WHILE_OPS

ARG_OP, RETVAL_OP = "_Arg", "_Retval"

# Ops whose kernel applies a library function to tensor elements (XLA's reducers, scatter
# combiners, sort comparators), by the attrs naming it. The function is not inlined: the
# kernel needs its body, which attach_bodies hands it inside the func attr (BODY_KEY).
COMPUTATION_OPS: dict[str, tuple[str, ...]] = {
    "XlaReduce": ("reducer",), "XlaVariadicReduce": ("reducer",),
    "XlaVariadicReduceV2": ("reducer",), "XlaReduceWindow": ("computation",),
    "XlaScatter": ("update_computation",), "XlaSelectAndScatter": ("select", "scatter"),
    "XlaVariadicSort": ("comparator",),
}
BODY_KEY = "_dfg_library"
RETVAL_SUFFIX = "_RetVal"


@dataclass(frozen=True)
class Signature:
    """A function's interface: argument and result names with their DataTypes (0 where a
    type attr is left unbound), and the names of its control outputs."""

    name: str
    inputs: list[tuple[str, int]]
    outputs: list[tuple[str, int]]
    control_outputs: list[str]


class Library:
    """Functions by name, plus the gradients table (function -> gradient function)."""

    def __init__(self, library_proto: Any) -> None:
        self.proto = library_proto
        self.functions: dict[str, Any] = {}
        self.duplicates: list[str] = []
        for f in library_proto.function:
            if f.signature.name in self.functions:
                self.duplicates.append(f.signature.name)
            self.functions[f.signature.name] = f
        self.gradients = {g.function_name: g.gradient_func for g in library_proto.gradient}

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def __len__(self) -> int:
        return len(self.functions)

    def get(self, name: str) -> Any | None:
        return self.functions.get(name)

    def function(self, name: str) -> Any:
        f = self.functions.get(name)
        if f is None:
            raise NotFoundError(f"function '{name}' is not in the graph's function library")
        return f

    def names(self) -> list[str]:
        return sorted(self.functions)


def signature(fdef: Any, attrs: dict[str, Any] | None = None) -> Signature:
    """Names and DataTypes of a FunctionDef's args and results (type attrs bound by
    ``attrs``, AttrValue protos by name, where given)."""
    sig = fdef.signature
    return Signature(sig.name,
                     [(a.name, _arg_type(a, attrs)) for a in sig.input_arg],
                     [(a.name, _arg_type(a, attrs)) for a in sig.output_arg],
                     [c for c in sig.control_output])


def _arg_type(arg: Any, attrs: dict[str, Any] | None) -> int:
    if arg.type:
        return arg.type
    if arg.type_attr and attrs and arg.type_attr in attrs:
        av = attrs[arg.type_attr]
        return av.type if hasattr(av, "type") else int(av)
    return D.DT_INVALID


def is_function_call(op: str, library: Library | None) -> bool:
    """A node whose op names a library function (TensorFlow runs it as a call)."""
    return library is not None and op in library


def called_functions(node_def: Any, library: Library | None = None) -> list[tuple[str, str]]:
    """(attr name, function name) for every function ``node_def`` runs: func-valued attrs and
    lists of them (``f``, ``then_branch``, ``branches``, ``body`` ...), and the op itself when
    it is a library function (attr name ``""``)."""
    return [(key, name) for key, name, _attrs in call_sites(node_def, library)]


def call_attrs(node_def: Any, attr_name: str) -> dict[str, Any]:
    """The attrs a called function's placeholders bind to: the NameAttrList's own attrs for a
    func-valued attr, the node's attrs when the op is the function."""
    if attr_name == "":
        return dict(node_def.attr)
    av = node_def.attr[attr_name]
    if av.WhichOneof("value") == "func":
        return dict(av.func.attr)
    return {}


def iter_nodes(graph_def: Any) -> Iterator[tuple[str | None, Any]]:
    """Every node of the graph (function ``None``) and of each library function."""
    for nd in graph_def.node:
        yield None, nd
    for f in graph_def.library.function:
        for nd in f.node_def:
            yield f.signature.name, nd


def reachable(graph_def: Any, roots: Any = None) -> set[str]:
    """Functions reachable from ``roots`` (NodeDefs; default every top-level node), through
    func attrs and calls by op name, transitively through function bodies."""
    lib = Library(graph_def.library)
    return reachable_in(lib, graph_def.node if roots is None else roots)


def reachable_in(lib: Library, roots: Any, gradients: bool = False) -> set[str]:
    """Names reachable from ``roots`` (NodeDefs) in ``lib`` (names it lacks included, as
    called); with ``gradients``, each reached function's gradient function too."""
    stack = [fn for nd in roots for _, fn in called_functions(nd, lib)]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        f = lib.get(name)
        if f is not None:
            stack.extend(fn for nd in f.node_def for _, fn in called_functions(nd, lib))
        if gradients and lib.gradients.get(name):
            stack.append(lib.gradients[name])
    return seen


def needs_bodies(graph_def: Any) -> bool:
    """True when a top-level node applies a library function in its kernel (an op of
    :data:`COMPUTATION_OPS`) and does not carry that function's body yet."""
    for nd in graph_def.node:
        for key in COMPUTATION_OPS.get(nd.op, ()):
            av = nd.attr.get(key) if key in nd.attr else None
            if av is not None and av.WhichOneof("value") == "func" \
                    and BODY_KEY not in av.func.attr:
                return True
    return False


def attach_bodies(graph_def: Any) -> Any:
    """A copy of ``graph_def`` whose nodes of :data:`COMPUTATION_OPS` carry the functions
    they apply: each such func attr gets, under :data:`BODY_KEY`, a serialized
    FunctionDefLibrary with the function and everything it calls (what attrs.to_python hands
    the kernel as ``FuncRef.library``). The library stays as it was. Kernels see only their
    node's attrs, so this is how a reducer's body reaches them; done once, before binding."""
    from dfg.schemas import function_pb2, graph_pb2

    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    lib = Library(out.library)
    cache: dict[str, bytes] = {}
    for nd in out.node:
        for key in COMPUTATION_OPS.get(nd.op, ()):
            if key not in nd.attr or nd.attr[key].WhichOneof("value") != "func":
                continue
            f = nd.attr[key].func
            if f.name not in lib:
                raise NotFoundError(f"attr '{key}' names function '{f.name}', which is not in "
                                    "the graph's function library", node=nd.name, op=nd.op)
            body = cache.get(f.name)
            if body is None:
                keep = {f.name} | reachable_in(lib, lib.function(f.name).node_def)
                sub = function_pb2.FunctionDefLibrary()
                for g in out.library.function:
                    if g.signature.name in keep:
                        sub.function.add().CopyFrom(g)
                body = cache[f.name] = sub.SerializeToString(deterministic=True)
            f.attr[BODY_KEY].s = body
    return out


def detach_bodies(graph_def: Any) -> Any:
    """Remove what :func:`attach_bodies` added (in place), for a graph written out: the
    functions stay in the library, where TensorFlow looks for them. Returns ``graph_def``."""
    for nd in graph_def.node:
        for key in COMPUTATION_OPS.get(nd.op, ()):
            if key in nd.attr and nd.attr[key].WhichOneof("value") == "func":
                f = nd.attr[key].func
                if BODY_KEY in f.attr:
                    del f.attr[BODY_KEY]
    return graph_def


def call_depths(graph_def: Any) -> dict[str, int]:
    """Nesting depth of each reachable function: 1 when a top-level node calls it, 2 when
    only functions of depth 1 do, and so on (the smallest depth wins; recursion stops)."""
    lib = Library(graph_def.library)
    depth: dict[str, int] = {}
    frontier = [fn for nd in graph_def.node for _, fn in called_functions(nd, lib)]
    d = 1
    while frontier:
        nxt = []
        for name in frontier:
            if name in depth or name not in lib:
                continue
            depth[name] = d
            nxt.extend(fn for nd in lib.function(name).node_def
                       for _, fn in called_functions(nd, lib))
        frontier, d = nxt, d + 1
    return depth


def inlined_size(graph_def: Any) -> dict[str, tuple[int, int]]:
    """Top-level node name -> (nodes, bytes of node names) it stands for once every call it
    makes is inlined, computed from the call graph without inlining anything: a function
    called twice by one called twice ... grows exponentially (40 functions of three nodes
    would be 2**40), and nested prefixes make names grow with depth (quadratic bytes in a
    chain). Counts every function a node names (branches and bodies alike). The call graph
    must be free of recursion (:func:`find_recursion`)."""
    lib = Library(graph_def.library)
    memo: dict[str, tuple[int, int]] = {}

    def callees(nd: Any) -> list[str]:
        return [fn for _, fn in called_functions(nd, lib) if fn in lib]

    def node_size(nd: Any) -> tuple[int, int]:
        n, b = 1, len(nd.name)
        for fn in callees(nd):
            cn, cb = memo[fn]
            n += cn
            b += cn * (len(nd.name) + 1) + cb     # each inlined name gets "<node>/" first
        return n, b

    # post-order with an explicit stack: a chain of thousands of calls is just data
    for root in lib.functions:
        if root in memo:
            continue
        stack = [(root, False)]
        while stack:
            name, ready = stack.pop()
            if name in memo:
                continue
            body = lib.function(name).node_def
            if not ready:
                stack.append((name, True))
                stack.extend((fn, False) for nd in body for fn in callees(nd)
                             if fn not in memo)
                continue
            n = b = 0
            for nd in body:
                dn, db = node_size(nd)
                n, b = n + dn, b + db
            memo[name] = (n, b)
    return {nd.name: node_size(nd) for nd in graph_def.node if callees(nd)}


def find_recursion(graph_def: Any) -> list[list[str]]:
    """Cycles in the call graph (a function calling itself, directly or not)."""
    lib = Library(graph_def.library)
    edges = {name: sorted({fn for nd in f.node_def for _, fn in called_functions(nd, lib)
                           if fn in lib})
             for name, f in lib.functions.items()}
    cycles: list[list[str]] = []
    color: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []
    # depth-first with an explicit stack (a chain of thousands of calls is just data):
    # each frame is (function, iterator over its callees)
    for root in sorted(edges):
        if root in color:
            continue
        color[root] = 1
        path.append(root)
        stack = [(root, iter(edges.get(root, ())))]
        while stack:
            n, callees = stack[-1]
            for m in callees:
                if color.get(m) == 1:
                    cycles.append(path[path.index(m):] + [m])
                elif m not in color:
                    color[m] = 1
                    path.append(m)
                    stack.append((m, iter(edges.get(m, ()))))
                    break
            else:
                stack.pop()
                path.pop()
                color[n] = 2
    return cycles


# --- function bodies as GraphDefs ----------------------------------------------------------

def substitute_placeholders(node_def: Any, attrs: dict[str, Any], fname: str) -> None:
    """Replace ``$T``-style attr placeholders in ``node_def`` (in place) by the bound attrs."""
    for key in list(node_def.attr):
        av = node_def.attr[key]
        if av.WhichOneof("value") == "placeholder":
            bound = attrs.get(av.placeholder)
            if bound is None:
                raise InvalidArgumentError(
                    f"attr '{key}' refers to '${av.placeholder}', which the caller of function "
                    f"'{fname}' does not bind", node=node_def.name, op=node_def.op)
            node_def.attr[key].CopyFrom(bound)


def output_ranges(node_def: Any, library: Library | None = None) -> dict[str, tuple[int, int]]:
    """Output-arg name -> (first flat slot, count) for a node inside a function body."""
    from .opdefs.registry import SignatureError, registry

    if library is not None and node_def.op in library:
        sig = library.function(node_def.op).signature
        return {a.name: (i, 1) for i, a in enumerate(sig.output_arg)}
    reg = registry()
    opdef = reg.get(node_def.op)
    if opdef is None:
        return {}
    out: dict[str, tuple[int, int]] = {}
    start = 0
    for arg in opdef.output_arg:
        try:
            n = len(reg.arg_types(opdef, [arg], node_def.attr))
        except SignatureError:
            n = 1
        out[arg.name] = (start, n)
        start += n
    return out


class BodyInputs:
    """Resolves the inputs written inside one function body to GraphDef spelling."""

    def __init__(self, fdef: Any, library: Library | None, nodes: dict[str, Any]) -> None:
        self.fname = fdef.signature.name
        self.args = {a.name for a in fdef.signature.input_arg}
        self.library = library
        self.nodes = nodes
        self._ranges: dict[str, dict[str, tuple[int, int]]] = {}

    def resolve(self, s: str, where: str) -> tuple[str, int]:
        """``x`` (an arg) -> (x, 0); ``n:out:i`` -> (n, flat slot); ``^n`` -> (n, -1).

        Raises NotFoundError naming the function for an input naming nothing there."""
        if s.startswith("^"):
            name = s[1:]
            if name not in self.nodes and name not in self.args:  # TF allows ^arg
                raise NotFoundError(f"control input '{s}' of '{where}' names no node of "
                                    f"function '{self.fname}'", node=where)
            return name, -1
        parts = s.split(":")
        if len(parts) == 1:
            if s in self.args:
                return s, 0
            if s in self.nodes:  # tolerated: a bare node name means its first output
                return s, 0
            raise NotFoundError(f"input '{s}' of '{where}' names no argument or node of "
                                f"function '{self.fname}'", node=where)
        name = parts[0]
        if name in self.args and len(parts) == 2 and parts[1].isdigit():
            return name, int(parts[1])
        nd = self.nodes.get(name)
        if nd is None:
            raise NotFoundError(f"input '{s}' of '{where}' names no node of function "
                                f"'{self.fname}'", node=where)
        if len(parts) == 2 and parts[1].isdigit():  # GraphDef spelling, tolerated
            return name, int(parts[1])
        ranges = self._ranges.get(name)
        if ranges is None:
            ranges = self._ranges[name] = output_ranges(nd, self.library)
        arg = parts[1]
        idx = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0
        if arg not in ranges:
            raise NotFoundError(
                f"input '{s}' of '{where}': op {nd.op} has no output named '{arg}' "
                f"(outputs: {', '.join(ranges) or 'none'}) in function '{self.fname}'",
                node=where)
        start, n = ranges[arg]
        if not 0 <= idx < n:
            raise InvalidArgumentError(
                f"input '{s}' of '{where}': output '{arg}' of '{name}' has {n} tensor(s), "
                f"index {idx} is out of range in function '{self.fname}'", node=where)
        return name, start + idx


def instantiate(fdef: Any, attrs: dict[str, Any] | None = None,
                library: Library | None = None) -> Any:
    """The function's body as a GraphDef: one ``_Arg`` node per argument (named after it),
    the body's nodes with placeholders bound and inputs in ``node:slot`` form, and one
    ``_Retval`` node per result (``<result>_RetVal``) reading what ``ret`` maps it to.
    Control outputs stay in ``fdef.control_ret``; nothing here runs or prunes. Raises on the
    first problem (:func:`instantiate_checked` collects them instead)."""
    return _body(fdef, attrs, library, strict=True)[0]


def _spell(node: str, slot: int) -> str:
    if slot == -1:
        return "^" + node
    return node if slot == 0 else f"{node}:{slot}"


def call_sites(node_def: Any, library: Library | None = None
               ) -> list[tuple[str, str, dict[str, Any]]]:
    """(attr name, function name, attrs binding its placeholders) for every function
    ``node_def`` runs, in :func:`called_functions` order; entries of func lists (``Case``'s
    ``branches``) get their own NameAttrList's attrs."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    if library is not None and node_def.op in library:
        out.append(("", node_def.op, dict(node_def.attr)))
    for key in sorted(node_def.attr):
        av = node_def.attr[key]
        kind = av.WhichOneof("value")
        if kind == "func":
            out.append((key, av.func.name, dict(av.func.attr)))
        elif kind == "list":
            out.extend((key, f.name, dict(f.attr)) for f in av.list.func)
    return out


@dataclass(frozen=True)
class BodyProblem:
    """Something :func:`instantiate` would raise for, found by :func:`instantiate_checked`:
    ``node`` is the body node (or ``<result>_RetVal``, or None for the function itself),
    ``input`` the input text that does not resolve (None for other problems)."""

    kind: str            # "missing-input" | "output-out-of-range" | "missing-return"
    node: str | None
    input: str | None
    message: str


def instantiate_checked(fdef: Any, attrs: dict[str, Any] | None = None,
                        library: Library | None = None
                        ) -> tuple[Any, list[BodyProblem]]:
    """Like :func:`instantiate`, for checking rather than running: every problem is
    collected instead of raising on the first, an input that does not resolve keeps its text
    (so the GraphDef shows it as a missing input), and placeholders the caller does not bind
    stay placeholders (``_Arg``/``_Retval`` types they decide are DT_INVALID).

    UnimplementedError for list-valued arguments, as :func:`instantiate`."""
    return _body(fdef, attrs, library, strict=False)


def _body(fdef: Any, attrs: dict[str, Any] | None, library: Library | None, strict: bool
          ) -> tuple[Any, list[BodyProblem]]:
    """What :func:`instantiate` (``strict``: raise on the first problem, every placeholder
    bound) and :func:`instantiate_checked` (collect problems) share."""
    from dfg.schemas import graph_pb2

    from .opdefs.registry import registry

    attrs = dict(attrs or {})
    for ad in fdef.signature.attr:  # defaults of the function's own attrs
        if ad.name not in attrs and ad.HasField("default_value"):
            attrs[ad.name] = ad.default_value
    g = graph_pb2.GraphDef()
    sig = fdef.signature
    problems: list[BodyProblem] = []
    for i, a in enumerate(sig.input_arg):
        if a.number_attr or a.type_list_attr:
            raise UnimplementedError(f"function '{sig.name}': list-valued argument '{a.name}'")
        nd = g.node.add(name=a.name, op=ARG_OP)
        nd.attr["T"].type = _arg_type(a, attrs)
        nd.attr["index"].i = i
    nodes = {}
    for src in fdef.node_def:
        nd = g.node.add()
        nd.CopyFrom(src)
        if strict:
            substitute_placeholders(nd, attrs, sig.name)
        else:  # placeholders the caller leaves unbound stay, for lenient checking
            for key in list(nd.attr):
                av = nd.attr[key]
                if av.WhichOneof("value") == "placeholder" and av.placeholder in attrs:
                    nd.attr[key].CopyFrom(attrs[av.placeholder])
        nodes.setdefault(nd.name, nd)
    res = BodyInputs(fdef, library, nodes)
    reg = registry()

    def resolve(s: str, where: str) -> str:
        if strict:
            return _spell(*res.resolve(s, where))
        try:
            return _spell(*res.resolve(s, where))
        except NotFoundError as e:
            parts = s.lstrip("^").split(":")
            nd = nodes.get(parts[0])
            if nd is not None and nd.op not in reg and not is_function_call(nd.op, library):
                # output names of an unknown op are unknowable: its one problem is the op
                idx = parts[2] if len(parts) > 2 and parts[2].isdigit() else "0"
                return _spell(parts[0], int(idx))
            problems.append(BodyProblem("missing-input", where, s, e.message))
        except InvalidArgumentError as e:
            problems.append(BodyProblem("output-out-of-range", where, s, e.message))
        return s

    for nd in g.node[len(sig.input_arg):]:
        spelled = [resolve(s, nd.name) for s in nd.input]
        del nd.input[:]
        nd.input.extend(spelled)
    for j, a in enumerate(sig.output_arg):
        rname = a.name + RETVAL_SUFFIX
        if a.name not in fdef.ret:
            if strict:
                raise InvalidArgumentError(f"function '{sig.name}' has no 'ret' entry for its "
                                           f"result '{a.name}'")
            problems.append(BodyProblem("missing-return", None, None,
                                        f"result '{a.name}' has no 'ret' entry"))
            continue
        nd = g.node.add(name=rname, op=RETVAL_OP, input=[resolve(fdef.ret[a.name], rname)])
        nd.attr["T"].type = _arg_type(a, attrs)
        nd.attr["index"].i = j
    outs = {a.name for a in sig.output_arg}
    for key in sorted(fdef.ret):
        if key not in outs:
            problems.append(BodyProblem("missing-return", None, None,
                                        f"'ret' entry '{key}' names no result of the "
                                        "signature"))
    for cname in sorted(fdef.control_ret):
        target = fdef.control_ret[cname]
        if target not in nodes:
            if strict:
                raise NotFoundError(f"control output '{cname}' of function '{sig.name}' "
                                    f"names no node ('{target}')")
            problems.append(BodyProblem("missing-input", None, None,
                                        f"control output '{cname}' names no node "
                                        f"('{target}')"))
    return g, problems
