/* The Python module that carries dfg's native kernels. It exports nothing to Python: the
 * kernels are plain C functions, loaded from this same file with ctypes
 * (executor/kernels/_native.py), which calls them without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native",
    "dfg's compiled kernels (called through ctypes; see dfg.executor.kernels._native)",
    -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&native_module); }
