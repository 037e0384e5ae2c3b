"""Graph optimization passes: the one ordered table (name -> function, and why it is there).

Each pass is a pure function ``(graph: Graph, options: PassOptions) -> GraphDef`` in its own
module; ``pipeline.optimize`` runs the selected ones in this table's order, repeating until
nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import (
    arithmetic,
    constant_folding,
    cse,
    dead_branches,
    debug_strip,
    fold_batch_norm,
    fold_pad,
    fuse_conv_bias_act,
    fuse_elementwise,
    fuse_matmul_bias_act,
    hoist_concat_projection,
    hoist_projection,
    identity_removal,
    loop_invariant,
    lower_functional,
    prune,
    sink_squeeze,
)
from .common import DEFAULT_MAX_CONST_BYTES, PassFn, PassOptions


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: PassFn         # (graph, options) -> new GraphDef
    default: bool      # in the default list
    reason: str        # one line: why the pass exists


# The one ordered table. Order matters: lowering first opens function bodies to every
# other pass; pruning shrinks the work of every later pass;
# debug_strip runs before folding so stripped checks stop pinning values; folding makes
# predicates and operands constant for dead_branches and arithmetic; cse and identity_removal
# last clean up what the others leave. The pipeline repeats the list until nothing changes.
PASSES: dict[str, PassInfo] = {p.name: p for p in [
    PassInfo("lower_functional", lower_functional.run, True,
             "inline calls and lower If/Case/While so the other passes see through them"),
    PassInfo("prune", prune.run, True,
             "drop every node the fetches and targets do not need"),
    PassInfo("debug_strip", debug_strip.run, False,
             "remove Assert/CheckNumerics/Print (opt-in: a failing Assert stops failing)"),
    PassInfo("constant_folding", constant_folding.run, True,
             "compute once at optimize time what depends only on constants"),
    PassInfo("dead_branches", dead_branches.run, True,
             "a cond with a constant predicate keeps only the branch it takes"),
    PassInfo("arithmetic", arithmetic.run, True,
             "x*1, x+0, --x, constant chains and common factors need no work"),
    PassInfo("fold_batch_norm", fold_batch_norm.run, True,
             "inference batch norm is an affine map: fold it into the conv weights"),
    PassInfo("fold_pad", fold_pad.run, True,
             "a zero Pad before a Conv2D becomes the conv's explicit padding (no copy)"),
    PassInfo("sink_squeeze", sink_squeeze.run, False,
             "a Conv1D's Squeeze after its BiasAdd and activation, so they fuse into it"),
    PassInfo("loop_invariant", loop_invariant.run, True,
             "compute values that do not change across iterations once, outside the loop"),
    PassInfo("hoist_projection", hoist_projection.run, True,
             "an RNN's input projection for every step as one product before its loop"),
    PassInfo("hoist_concat_projection", hoist_concat_projection.run, True,
             "a TF1 cell's product of [x_t, h]: x's part for every step before the loop"),
    PassInfo("cse", cse.run, True,
             "compute identical expressions once"),
    PassInfo("identity_removal", identity_removal.run, True,
             "forwarding nodes and no-op control edges cost a scheduling step each"),
    # run-time fusions (the Session's per-signature pipeline): dfg's kernels take every
    # combination they write, TensorFlow's CPU kernels not all of them, so not by default
    PassInfo("fuse_conv_bias_act", fuse_conv_bias_act.run, False,
             "conv + BiasAdd + activation as one _FusedConv2D: no temporaries, one step"),
    PassInfo("fuse_matmul_bias_act", fuse_matmul_bias_act.run, False,
             "MatMul + BiasAdd + activation as one _FusedMatMul"),
    PassInfo("fuse_elementwise", fuse_elementwise.run, False,
             "a chain of elementwise ops as one node reusing its buffers (dfg-private op)"),
]}

DEFAULT_PASSES: tuple[str, ...] = tuple(n for n, p in PASSES.items() if p.default)


def get_pass(name: str) -> PassFn:
    return PASSES[name].fn


def optimize(graph: Any, options: PassOptions, passes: list[str] | None = None,
             **kw: Any) -> Any:
    """Shortcut for :func:`pipeline.optimize` (returns its ``PipelineResult``)."""
    from .pipeline import optimize as run

    return run(graph, options, passes, **kw)


__all__ = ["PASSES", "DEFAULT_PASSES", "DEFAULT_MAX_CONST_BYTES", "PassInfo", "PassOptions",
           "get_pass", "optimize"]
