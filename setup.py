"""The one thing pyproject.toml cannot declare: dfg's optional compiled kernels.

``executor/native/*.c`` builds into the extension module ``dfg.executor._native`` (its
Python interface is ``module.c``) when a C compiler is there;
``optional=True`` lets the install go on without it, and the kernels fall back to numpy
(executor/kernels/_native.py says which is in use).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dfg.executor._native",
            sources=["executor/native/module.c", "executor/native/conv.c",
                     "executor/native/elementwise.c", "executor/native/threadpool.c",
                     "executor/native/recurrent.c"],
            depends=["executor/native/native.h"],
            # -fno-trapping-math lets GCC compute both sides of a select and vectorize the
            # loop (dfg never traps on floating-point exceptions), -fno-math-errno lets it
            # vectorize sqrt (errno is never read); values are unchanged.
            extra_compile_args=["-O3", "-fno-trapping-math", "-fno-math-errno", "-pthread"],
            extra_link_args=["-pthread"],   # threadpool.c's threads (older glibc: libpthread)
            optional=True,
        ),
    ],
)
