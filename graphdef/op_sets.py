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
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
LOOP_COND_OPS = frozenset({"LoopCond"})
CONTROL_FLOW_OPS = (ENTER_OPS | EXIT_OPS | MERGE_OPS | SWITCH_OPS | NEXT_ITERATION_OPS
                    | LOOP_COND_OPS | frozenset({"ControlTrigger"}))
