"""Op-name sets shared by several modules, defined once.

Every module that asks "is this a placeholder / a variable / a loop op?" imports the answer
from here, so two modules can never disagree on membership.
"""

from __future__ import annotations

# a placeholder that must be fed (running it unfed is an error)
PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2"})
# every op that is a graph input: the placeholders and the one with a default
INPUT_OPS = PLACEHOLDER_OPS | frozenset({"PlaceholderWithDefault"})
# v1 (ref) variables, whose output is the variable itself
REF_VARIABLE_OPS = frozenset({"VariableV2", "Variable", "TemporaryVariable"})
# every op that holds a variable: ref variables and resource handles
VARIABLE_OPS = REF_VARIABLE_OPS | frozenset({"VarHandleOp"})
# ops whose ``shape`` attr is the static shape of output 0
SHAPE_ATTR_OPS = INPUT_OPS | REF_VARIABLE_OPS
CONST_OPS = frozenset({"Const", "HostConst"})

# v1 control flow
ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
MERGE_OPS = frozenset({"Merge", "RefMerge"})
SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
SEND_OPS = frozenset({"_Send", "_HostSend"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
# Ops that run live yet may output a dead tensor (a Switch's untaken side, a _Recv of a dead
# value): ``^op`` does not carry that deadness, so a pass never moves a reader's wait from
# such an output to the op itself.
DEAD_OUTPUT_OPS = SWITCH_OPS | RECV_OPS
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
LOOP_COND_OPS = frozenset({"LoopCond"})
CONTROL_FLOW_OPS = (ENTER_OPS | EXIT_OPS | MERGE_OPS | SWITCH_OPS | NEXT_ITERATION_OPS
                    | LOOP_COND_OPS | frozenset({"ControlTrigger"}))


_PY_FUNC = ("runs Python code (tf.py_function / tf.numpy_function) that the graph does not "
            "store: only the process that built the graph can run it")
# Why an op has no kernel, where the reason is not just "not written yet" (error messages).
NO_KERNEL_REASON = {"EagerPyFunc": _PY_FUNC, "PyFunc": _PY_FUNC, "PyFuncStateless": _PY_FUNC}
NO_KERNEL_REASON.update(dict.fromkeys(
    ("KthOrderStatistic", "TopKUnique", "TopKWithUnique"),
    "a TPU-only op: TensorFlow has no CPU kernel for it, not even through XLA"))


def no_kernel_reason(op: str) -> str | None:
    if op in NO_KERNEL_REASON:
        return NO_KERNEL_REASON[op]
    if op.endswith("Dataset") or op.endswith("DatasetV2") or op.startswith("Iterator") \
            or op in ("ReduceDataset", "MakeIterator", "AnonymousIteratorV3"):
        return "a tf.data pipeline: dfg runs no tf.data ops (feed the data instead)"
    return None
