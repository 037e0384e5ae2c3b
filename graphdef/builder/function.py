"""``Function(inputs, outputs, updates)``: a graph bound to a dfg Session.

Calling it feeds the inputs, computes the outputs and then applies the updates in the same
step: every update's assignment has a control dependency on every output, the way a training
step reads the loss before it changes the weights. Variables keep their values across calls
(one Session per Function); they are initialized on the first call.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from .core import Graph, Operation, Tensor, get_default_graph
from .variables import Variable, global_variables_initializer


class Function:
    def __init__(self, inputs: list[Any], outputs: Any, updates: Any = (),
                 graph: Graph | None = None, session: Any = None,
                 name: str = "function_updates") -> None:
        g = graph or get_default_graph()
        self.graph = g
        for x in inputs:
            ok = isinstance(x, Variable) or (isinstance(x, Tensor) and x.op.type in (
                "Placeholder", "PlaceholderWithDefault"))
            if not ok:
                what = x.op.type if isinstance(x, Tensor) else type(x).__name__
                raise InvalidArgumentError(
                    f"Function inputs must be placeholders or variables, found {what} "
                    f"'{getattr(x, 'name', x)}'")
        self.inputs = list(inputs)
        self.single = not isinstance(outputs, (list, tuple))
        self.outputs = [outputs] if self.single else list(outputs)
        pairs = list(updates.items()) if isinstance(updates, dict) else list(updates)
        self.update_op: Operation | None = None
        with g.as_default():
            if pairs:
                out_ops = [o.op if isinstance(o, Tensor) else o for o in self.outputs]
                assigns = []
                with g.control_dependencies(out_ops):
                    for var, new in pairs:
                        if not isinstance(var, Variable):
                            raise InvalidArgumentError(
                                f"an update must assign a Variable, found {type(var).__name__}")
                        a = var.assign(new)
                        assigns.append(a)
                from .ops import group
                self.update_op = group(*assigns, name=name)
            self._init = (global_variables_initializer() if g.variables else None)
        self._session = session
        self._initialized = session is not None

    @property
    def session(self) -> Any:
        if self._session is None:
            from dfg.executor import Session
            self._session = Session(self.graph.as_graph_def(), threads=1)
        return self._session

    def __call__(self, *values: Any) -> Any:
        if len(values) != len(self.inputs):
            raise InvalidArgumentError(
                f"Function takes {len(self.inputs)} inputs, found {len(values)}")
        sess = self.session
        if not self._initialized and self._init is not None:
            sess.run([], targets=[self._init.name])
        self._initialized = True
        feed = {}
        for x, v in zip(self.inputs, values):
            key = x.name if isinstance(x, Tensor) else x._as_tensor(True).name
            feed[key] = v
        fetches = [o.name for o in self.outputs if isinstance(o, Tensor)]
        targets = [self.update_op.name] if self.update_op is not None else []
        targets += [o.name for o in self.outputs if isinstance(o, Operation)]
        out = sess.run(fetches, feed_dict=feed, targets=targets)
        return out[0] if self.single else out


def function(inputs: list[Any], outputs: Any, updates: Any = (), **kw: Any) -> Function:
    return Function(inputs, outputs, updates, **kw)
