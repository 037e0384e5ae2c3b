"""Functions ``B.autograph`` refuses or cannot carry; the line each error must name ends with
``# <-``. tests/test_autograph.py converts and calls them."""

from __future__ import annotations

from dfg.graphdef import builder as B

# --- refused when converted ---------------------------------------------------------------


def uses_try(x):
    y = x
    try:  # <-
        y = x + 1.0
    except ValueError:
        pass
    return y


def uses_yield(x):
    yield x  # <-


COUNT = 0


def uses_global(x):
    global COUNT  # <-
    COUNT += 1
    return x


def uses_nonlocal(x):
    y = x

    def inner():
        nonlocal y  # <-
        y = y + 1.0
    inner()
    return y


def uses_del(x):
    y = x
    del y  # <-
    return x


def loop_else(n):
    i = 0
    while i < n:  # <-
        i += 1
    else:
        i = 0
    return i


# --- found while the graph is built -------------------------------------------------------


def one_branch(x):
    if x > 0.0:
        y = x * 2.0
    return y  # <-


def first_in_loop(n):
    i = 0
    while i < n:
        t = i * 2
        i += 1
    return t  # <-


def read_before_assigned(n):
    i = 0
    while i < n:
        if i > 2:
            i = t + 1  # noqa: F821  # <-
        t = i  # noqa: F841
        i += 1
    return i


def changes_dtype(n):
    i = 0
    while i < n:  # <-
        i = B.cast(i, "float32")
    return i


def float_into_int(n):
    i = 0
    while i < n:  # <-
        i = 2.5
    return i


def not_bool(x):
    if x:  # <-
        x = x + 1.0
    return x


def list_in_loop(n):
    acc = []
    i = 0
    while i < n:  # <-
        acc = acc + [i]
        i += 1
    return i


def dtype_per_branch(x):
    if x > 0.0:  # <-
        y = B.cast(x, "int32")
    else:
        y = x
    return y


def return_on_one_path(x):
    if x > 0.0:  # <-
        return x


class Holder:
    def __init__(self) -> None:
        self.value = None

    def store(self, x):
        if x > 0.0:  # <-
            self.value = x
        return x


def return_in_loop_then_none(x, n):
    i = 0
    while i < n:
        if B.gather(x, i) > 3.0:  # <-
            return i
        i += 1
