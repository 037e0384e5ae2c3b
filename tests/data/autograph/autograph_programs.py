"""The autograph programs, written for dfg's builder (the same programs written for
TensorFlow's tf.function are in generate.py, which recorded TensorFlow's values). Plain
functions: tests/test_autograph.py converts each with ``B.autograph`` (v1 and functional)."""

from __future__ import annotations

from dfg.graphdef import builder as B


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def nested_break(x, n):
    total = 0.0
    i = 0
    while i < n:
        j = 0
        while j < n:
            if j > i:
                break
            total += B.gather(x, j) * B.cast(i, "float32")
            j += 1
        if total > 10.0:
            break
        i += 1
    return total, i


def if_in_while(x):
    y = x
    k = 0
    while y < 100.0:
        if y > 50.0:
            y = y * 1.5
        elif y > 10.0:
            y = y * 2.0
        else:
            y = y + 7.0
        k += 1
    return y, k


def tensor_range(x, n):
    acc = B.zeros([3])
    for i in range(n):
        acc = acc * 0.5 + x * B.cast(i, "float32")
    s = 0
    for j in range(n, 0, -2):
        s += j
    return acc, s


def early_return(x):
    if B.reduce_sum(x) > 0.0:
        return x * 2.0
    y = x - 1.0
    return y * y


def skip_odd(n):
    s = 0
    for i in range(n):
        if i % 2 == 1:
            continue
        s += i
    return s


def unrolled(x):
    for k in range(3):
        x = x * 2.0 + k
    i = 0
    while i < 2:
        x = x - 1.0
        i += 1
    return x


def rows(m):
    acc = B.zeros([3])
    for r in m:
        acc = acc + r * r
    return acc


def logic(a, b):
    c = 0
    if a > 0 and b > 0 or not a < -5:
        c = 1
    d = a if a > b else b
    return c, d


def closure(x, n):
    scale = x * 2.0

    def step(v):
        if v > 5.0:
            return v - scale
        return v + 1.0

    v = x
    for _ in range(n):
        v = step(v)
    return v


def return_in_loop(x, n):
    i = 0
    while i < n:
        if B.gather(x, i) > 3.0:
            return i
        i += 1
    return -1


def return_in_for(x):
    for v in x:
        if v > 3.0:
            return v * 10.0
    return 0.0


PROGRAMS = {f.__name__: f for f in (collatz, nested_break, if_in_while, tensor_range,
                                    early_return, skip_odd, unrolled, rows, logic, closure,
                                    return_in_loop, return_in_for)}
