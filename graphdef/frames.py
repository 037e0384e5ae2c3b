"""Static frame analysis: which while-loop frame each node runs in.

Follows TensorFlow's control-flow info: starting from nodes with no inputs (root frame ""),
propagate along every edge. An Enter is scheduled in its producer's frame and its consumers are
in the child frame named by its ``frame_name`` attr (``Frame.enters`` of the child lists the
Enters that open it); an Exit belongs to the loop's frame and its consumers to the parent;
everything else inherits its producer's frame. A node reached from two
different frames is a problem ("inputs from different frames"), as is an Exit outside any
frame. The first frame a node is reached from wins, in breadth-first order, as in TensorFlow.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .graph import Graph, Node
from .op_sets import (  # noqa: F401 (re-exported: frame analysis is where callers look)
    CONTROL_FLOW_OPS,
    ENTER_OPS,
    EXIT_OPS,
    LOOP_COND_OPS,
    MERGE_OPS,
    NEXT_ITERATION_OPS,
    SWITCH_OPS,
)

ROOT = ""



@dataclass
class Frame:
    """One while-loop frame (or the root frame, name ``""``)."""

    name: str
    parent: str | None          # parent frame name; None for the root
    depth: int = 0
    nodes: list[str] = field(default_factory=list)   # scheduled in this frame
    enters: list[str] = field(default_factory=list)  # Enters opening it (in the parent frame)
    exits: list[str] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    next_iterations: list[str] = field(default_factory=list)
    loop_conds: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    parallel_iterations: int | None = None


@dataclass(frozen=True)
class FrameProblem:
    code: str        # frame-mismatch | exit-outside-frame | enter-parent-mismatch
    node: str
    op: str
    message: str


@dataclass
class FrameAnalysis:
    frames: dict[str, Frame]
    node_frame: dict[str, str]          # node name -> frame name (unreached nodes: absent)
    problems: list[FrameProblem]

    @property
    def has_loops(self) -> bool:
        return len(self.frames) > 1

    def frame_of(self, node: str) -> Frame:
        return self.frames[self.node_frame.get(node, ROOT)]

    def loop_frames(self) -> list[Frame]:
        """Every frame but the root, parents before children."""
        return sorted((f for f in self.frames.values() if f.name != ROOT),
                      key=lambda f: (f.depth, f.name))


def _attr_s(node: Node, key: str) -> str:
    attr = node.proto.attr
    return attr[key].s.decode("utf-8", "replace") if key in attr else ""


def analyze_frames(graph: Graph) -> FrameAnalysis:
    """Each node's while-loop frame, from the Enters reaching it (cached on ``graph``: treat
    the result as read-only)."""
    fa = graph.frame_analysis
    if fa is None:
        fa = graph.frame_analysis = _analyze_frames(graph)
    return fa


def _analyze_frames(graph: Graph) -> FrameAnalysis:
    frames: dict[str, Frame] = {ROOT: Frame(ROOT, None)}
    node_frame: dict[str, str] = {}
    problems: list[FrameProblem] = []
    queue: deque[Node] = deque()
    get = graph.by_name.get
    dups = graph.duplicates
    for n in graph.nodes:
        if not n.in_edges and (not dups or get(n.name) is n):
            node_frame[n.name] = ROOT
            queue.append(n)

    enters_of: dict[str, list[str]] = {}
    listed: set[str] = set()   # Enters already in enters_of

    def child_frame(enter: Node, parent: str) -> str:
        name = _attr_s(enter, "frame_name")
        if enter.name not in listed:   # a set: a frame may have thousands of Enters
            listed.add(enter.name)
            enters_of.setdefault(name, []).append(enter.name)
        f = frames.get(name)
        if f is None:
            pf = frames[parent]
            f = frames[name] = Frame(name, parent, pf.depth + 1)
            pf.children.append(name)
        elif f.parent != parent and name != ROOT:
            problems.append(FrameProblem(
                "enter-parent-mismatch", enter.name, enter.op,
                f"Enter opens frame '{name}' from frame '{parent or '<root>'}', but the frame "
                f"was already entered from '{f.parent or '<root>'}'"))
        return name

    while queue:
        cur = queue.popleft()
        fr = node_frame[cur.name]
        out_fr = fr
        if cur.op in EXIT_OPS:
            parent = frames[fr].parent
            if parent is None:
                problems.append(FrameProblem(
                    "exit-outside-frame", cur.name, cur.op,
                    "Exit is not inside any while-loop frame (no Enter leads to it)"))
                parent = ROOT
            out_fr = parent
        elif cur.op in ENTER_OPS:
            out_fr = child_frame(cur, fr)
        for e in cur.out_edges:
            name = e.dst   # always a node's name: edges come from existing nodes' inputs
            want = out_fr
            have = node_frame.get(name)
            if have is None:
                node_frame[name] = want
                queue.append(get(name))
            elif have != want:
                dst = get(name)
                problems.append(FrameProblem(
                    "frame-mismatch", dst.name, dst.op,
                    f"has inputs from different frames: input '{cur.name}' is in frame "
                    f"'{want or '<root>'}', but the node was already placed in frame "
                    f"'{have or '<root>'}'"))

    # op -> the Frame list its nodes also go in (Enters are listed by child_frame)
    lists = {op: attr for attr, ops in (("exits", EXIT_OPS), ("merges", MERGE_OPS),
                                        ("switches", SWITCH_OPS),
                                        ("next_iterations", NEXT_ITERATION_OPS),
                                        ("loop_conds", LOOP_COND_OPS)) for op in ops}
    outside: list[Node] = []   # NextIterations in the root frame: a problem, said last
    for n in graph.nodes:
        name = node_frame.get(n.name)
        if name is None:
            continue
        f = frames[name]
        f.nodes.append(n.name)
        attr = lists.get(n.op)
        if attr is not None:
            getattr(f, attr).append(n.name)
            if name == ROOT and attr == "next_iterations":
                outside.append(n)
    for name, enters in enters_of.items():
        f = frames[name]
        f.enters = enters
        first = graph.get(enters[0])
        if first is not None and "parallel_iterations" in first.attr:
            f.parallel_iterations = int(first.attr["parallel_iterations"].i)
    for n in outside:
        problems.append(FrameProblem(
            "next-iteration-outside-frame", n.name, n.op,
            "NextIteration is not inside any while-loop frame"))
    return FrameAnalysis(frames, node_frame, problems)
