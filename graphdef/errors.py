"""The one error hierarchy of dfg.

Every error carries the node and op it concerns (when there is one) and renders as one line:
``node 'loop/Less' (Less): expected float32 input, found int32``. The CLI maps ``exit_code``
to the process exit status: 2 for unreadable input or bad usage, 1 for an invalid graph or a
failed run.

Runtime errors mirror TensorFlow's status codes (``InvalidArgumentError`` ...) so that a test
can compare against the error class TensorFlow raised.
"""

from __future__ import annotations


class DfgError(Exception):
    """Base of every error dfg raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, node: str | None = None, op: str | None = None,
                 source: str | None = None, function: str | None = None) -> None:
        self.message = message
        self.node = node
        self.op = op
        self.source = source
        self.function = function  # the library function the node comes from, if inlined
        super().__init__(self._render())

    def __reduce__(self) -> tuple:
        # pickled whole (a partitioned run's task raises it in another process), also for
        # subclasses whose __init__ takes more than the message (MissingFeedError)
        return _rebuild, (type(self), self.args, self.__dict__)

    def in_function(self, function: str, original: str) -> None:
        """Say that the node was inlined from ``function``, where it is named ``original``
        (the executor runs TF2 graphs lowered; see graphdef/lowering.py)."""
        self.function = function
        self.message = f"{self.message} [in function '{function}', node '{original}']"
        self.args = (self._render(),)

    def _render(self) -> str:
        where = []
        if self.source:
            where.append(self.source)
        if self.node is not None:
            where.append(f"node '{self.node}'" + (f" ({self.op})" if self.op else ""))
        elif self.op:
            where.append(f"op {self.op}")
        return ": ".join(where + [self.message])


def _rebuild(cls: type, args: tuple, state: dict) -> DfgError:
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(state)
    return e


class UsageError(DfgError):
    """The caller asked for something malformed (bad option value, bad tensor name)."""

    exit_code = 2


class AutographError(UsageError):
    """``builder.autograph`` cannot turn a Python function into graph control flow: a
    statement it does not support, or a variable a graph loop or branch cannot carry.
    ``source`` names the file, line and function (``f.py:12 (in collatz)``)."""


class GraphLoadError(DfgError):
    """A graph file could not be read or parsed (exit 2: unreadable input)."""

    exit_code = 2


class UnsupportedDTypeError(DfgError):
    """A tensor uses a dtype numpy cannot hold (float8, int4, resource values ...)."""

    exit_code = 1


class InvalidGraphError(DfgError):
    """The graph is structurally wrong (validation found errors)."""

    exit_code = 1


# --- runtime errors, named after TensorFlow's error classes --------------------------------

class OpError(DfgError):
    """A step failed. ``tf_name`` is the TensorFlow error class name it corresponds to."""

    tf_name = "UnknownError"


class CancelledError(OpError):
    tf_name = "CancelledError"


class InvalidArgumentError(OpError):
    tf_name = "InvalidArgumentError"


class DeadlineExceededError(OpError):
    tf_name = "DeadlineExceededError"


class NotFoundError(OpError):
    tf_name = "NotFoundError"


class ResourceExhaustedError(OpError):
    tf_name = "ResourceExhaustedError"


class MissingFeedError(InvalidArgumentError):
    """A Placeholder the step needs was not fed. ``placeholder``, ``dtype``, ``shape`` say
    which and what it takes (the CLI turns them into a --feed hint)."""

    def __init__(self, message: str, *, placeholder: str, dtype: str, shape: str,
                 **kw) -> None:
        self.placeholder, self.dtype, self.shape = placeholder, dtype, shape
        super().__init__(message, **kw)


class FailedPreconditionError(OpError):
    tf_name = "FailedPreconditionError"


class OutOfRangeError(OpError):
    tf_name = "OutOfRangeError"


class UnimplementedError(OpError):
    tf_name = "UnimplementedError"


class InternalError(OpError):
    tf_name = "InternalError"


class AbortedError(OpError):
    tf_name = "AbortedError"


class DataLossError(OpError):
    tf_name = "DataLossError"


class UnavailableError(OpError):
    """A task of a partitioned run went away (its process died)."""

    tf_name = "UnavailableError"


class PermissionDeniedError(OpError):
    """An op asked for a file the user did not grant (graphdef/files.py: the file gate).
    Exit 1: the run failed; the message names the flag that would allow it."""

    tf_name = "PermissionDeniedError"


__all__ = [
    "AbortedError",
    "DataLossError",
    "UnavailableError",
    "DfgError", "UsageError", "AutographError", "GraphLoadError", "UnsupportedDTypeError",
    "InvalidGraphError",
    "OpError", "CancelledError", "InvalidArgumentError", "MissingFeedError",
    "DeadlineExceededError",
    "NotFoundError", "ResourceExhaustedError", "FailedPreconditionError", "OutOfRangeError",
    "UnimplementedError", "InternalError", "PermissionDeniedError",
]
