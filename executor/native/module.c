/* dfg.executor._native: the Python interface of dfg's compiled kernels (native.h).
 *
 * Each function below is declared once, here: its arguments are parsed by a format string
 * (so a wrong count or type is a TypeError, never a bad call), every array argument is taken
 * through the buffer protocol as a C-contiguous float32 buffer of exactly the length its
 * geometry needs (ValueError otherwise), so a caller cannot make a kernel read or write
 * outside its arrays; then the kernel runs without the GIL. executor/kernels/_native.py
 * wraps these in numpy terms and decides when they run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "native.h"

/* `obj` as a C-contiguous float32 buffer of `need` floats (any number when `need` < 0;
 * writable if asked); on success the caller releases `view`. `what` names the argument in
 * errors. */
static int f32_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t need,
                      const char *fn, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *fmt = view->format ? view->format : "B";
    size_t n = strlen(fmt);
    int f32 = view->itemsize == 4 && n > 0 && fmt[n - 1] == 'f'
              && (n == 1 || (n == 2 && strchr("@=<", fmt[0]) != NULL));
    if (!f32) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be float32, not format '%s'", fn, what, fmt);
    } else if (need >= 0 && view->len != need * 4) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd floats, the geometry needs %zd", fn,
                     what, view->len / 4, need);
    } else {
        return 0;
    }
    PyBuffer_Release(view);
    return -1;
}

/* As f32_buffer, for an optional argument: None gives data NULL (and nothing to release). */
static int f32_optional(PyObject *obj, Py_buffer *view, Py_ssize_t need, const char *fn,
                        const char *what)
{
    if (obj == Py_None) {
        memset(view, 0, sizeof(*view));
        return 0;
    }
    return f32_buffer(obj, view, 0, need, fn, what);
}

static void release(Py_buffer *view) {
    if (view->obj)
        PyBuffer_Release(view);
}

/* the product of n sizes, each >= 0; -1 (ValueError set) when one is negative or it
 * overflows */
static Py_ssize_t product(const char *fn, int n, const long *v) {
    Py_ssize_t p = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || __builtin_mul_overflow(p, (Py_ssize_t)v[i], &p)) {
            PyErr_Format(PyExc_ValueError, "%s: bad geometry (a size is negative or too large)",
                         fn);
            return -1;
        }
    }
    return p;
}

static int check_window(const char *fn, long sh, long sw, long dh, long dw, long pt, long pl,
                        long chunks, int threads)
{
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || pt < 0 || pl < 0 || chunks < 1 || threads < 1) {
        PyErr_Format(PyExc_ValueError, "%s: strides, dilations, chunks and threads must be >= 1 "
                     "and paddings >= 0", fn);
        return -1;
    }
    return 0;
}

/* x (any length) and out (writable, as long as x) as float32 buffers for an elementwise
 * kernel `fn`; returns the length, or -1 with nothing held. */
static Py_ssize_t unary_buffers(PyObject *xo, PyObject *oo, Py_buffer *x, Py_buffer *out,
                                const char *fn)
{
    if (f32_buffer(xo, x, 0, -1, fn, "x") < 0)
        return -1;
    Py_ssize_t n = x->len / 4;
    if (f32_buffer(oo, out, 1, n, fn, "out") < 0) {
        PyBuffer_Release(x);
        return -1;
    }
    return n;
}

PyDoc_STRVAR(erf_doc,
"erf_f32(x, out, complement, chunks=1, threads=1)\n--\n\n"
"out = erfc(x) if complement else erf(x); x and out float32 buffers of one size, in blocks\n"
"of 4096 elements split in `chunks` pieces on up to `threads` threads.");

static PyObject *erf_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    int complement, threads = 1;
    long chunks = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOp|li:erf_f32", &xo, &oo, &complement, &chunks, &threads))
        return NULL;
    if (chunks < 1 || threads < 1) {
        PyErr_SetString(PyExc_ValueError, "erf_f32: chunks and threads must be >= 1");
        return NULL;
    }
    Py_buffer x, out;
    Py_ssize_t n = unary_buffers(xo, oo, &x, &out, "erf_f32");
    if (n < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    dfg_erf_f32_mt(x.buf, out.buf, (long)n, complement, chunks, threads);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(softmax_doc,
"softmax_f32(x, out, rows, cols, as_log, chunks=1, threads=1)\n--\n\n"
"Softmax (log-softmax if as_log) of each row of (rows, cols) float32 x into out, the rows\n"
"split in `chunks` pieces on up to `threads` threads.");

static PyObject *softmax_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    long dims[2], chunks = 1;
    int as_log, threads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOllp|li:softmax_f32", &xo, &oo, &dims[0], &dims[1], &as_log,
                          &chunks, &threads))
        return NULL;
    if (chunks < 1 || threads < 1) {
        PyErr_SetString(PyExc_ValueError, "softmax_f32: chunks and threads must be >= 1");
        return NULL;
    }
    Py_ssize_t n = product("softmax_f32", 2, dims);
    if (n < 0)
        return NULL;
    if (dims[1] < 1) {
        PyErr_SetString(PyExc_ValueError, "softmax_f32: rows need at least one column");
        return NULL;
    }
    Py_buffer x, out;
    if (f32_buffer(xo, &x, 0, n, "softmax_f32", "x") < 0)
        return NULL;
    if (f32_buffer(oo, &out, 1, n, "softmax_f32", "out") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    dfg_softmax_f32_mt(x.buf, out.buf, dims[0], dims[1], as_log, chunks, threads);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(row_sum_doc,
"row_sum_f32(x, out, rows, cols)\n--\n\n"
"out (rows float32) = the sum of each row of x (rows x cols float32), added in the order\n"
"numpy's add.reduce adds a contiguous last axis (its pairwise sum).");

static PyObject *row_sum_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    long dims[2];
    (void)self;
    if (!PyArg_ParseTuple(args, "OOll:row_sum_f32", &xo, &oo, &dims[0], &dims[1]))
        return NULL;
    Py_ssize_t n = product("row_sum_f32", 2, dims);
    if (n < 0)
        return NULL;
    Py_buffer x, out;
    if (f32_buffer(xo, &x, 0, n, "row_sum_f32", "x") < 0)
        return NULL;
    if (f32_buffer(oo, &out, 1, dims[0], "row_sum_f32", "out") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    /* a small sum keeps the GIL: handing it over (and waiting to get it back from a thread
     * of the executor) costs more than a layer norm's mean */
    PyThreadState *ts = n >= (1 << 18) ? PyEval_SaveThread() : NULL;
    dfg_row_sum_f32(x.buf, out.buf, dims[0], dims[1]);
    if (ts)
        PyEval_RestoreThread(ts);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(mid_sum_doc,
"mid_sum_f32(x, out, outer, mid, inner, count)\n--\n\n"
"out (outer x inner) = the sums of float32 x (outer x mid x inner, mid >= 1) over its middle\n"
"axis in numpy's add.reduce order, each divided by count when count > 0 (a mean).");

static PyObject *mid_sum_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    long dims[3], count;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOllll:mid_sum_f32", &xo, &oo, &dims[0], &dims[1], &dims[2],
                          &count))
        return NULL;
    if (dims[1] < 1 || count < 0)
        return PyErr_Format(PyExc_ValueError, "mid_sum_f32: mid must be >= 1 and count >= 0");
    Py_ssize_t n = product("mid_sum_f32", 3, dims);
    long od[2] = {dims[0], dims[2]};
    Py_ssize_t no = product("mid_sum_f32", 2, od);
    if (n < 0 || no < 0)
        return NULL;
    Py_buffer x, out;
    if (f32_buffer(xo, &x, 0, n, "mid_sum_f32", "x") < 0)
        return NULL;
    if (f32_buffer(oo, &out, 1, no, "mid_sum_f32", "out") < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    /* as the row sum: a small one keeps the GIL */
    PyThreadState *ts = n >= (1 << 18) ? PyEval_SaveThread() : NULL;
    dfg_mid_sum_f32(x.buf, out.buf, dims[0], dims[1], dims[2], count);
    if (ts)
        PyEval_RestoreThread(ts);
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(activation_doc,
"activation_f32(x, out, kind, chunks, threads)\n--\n\n"
"out = sigmoid(x) (kind 0) or tanh(x) (kind 1); x and out float32 buffers of one size (the\n"
"same buffer allowed), in blocks of 4096 elements split in `chunks` pieces on up to\n"
"`threads` threads.");

static PyObject *activation_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    int kind, threads;
    long chunks;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOili:activation_f32", &xo, &oo, &kind, &chunks, &threads))
        return NULL;
    if (kind != DFG_ACT_SIGMOID && kind != DFG_ACT_TANH)
        return PyErr_Format(PyExc_ValueError, "activation_f32: unknown kind %d", kind);
    if (chunks < 1 || threads < 1) {
        PyErr_SetString(PyExc_ValueError, "activation_f32: chunks and threads must be >= 1");
        return NULL;
    }
    Py_buffer x, out;
    Py_ssize_t n = unary_buffers(xo, oo, &x, &out, "activation_f32");
    if (n < 0)
        return NULL;
    if (n < 2 * DFG_ACT_BLOCK) {
        dfg_activation_f32(x.buf, out.buf, (long)n, kind, 1, 1);   /* not worth the GIL's hand-off */
    } else {
        Py_BEGIN_ALLOW_THREADS
        dfg_activation_f32(x.buf, out.buf, (long)n, kind, chunks, threads);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(chain_doc,
"chain_f32(inputs, kinds, code, out, rows, cols, layout=None, extra_ops=None, extra_outs=None,\n"
"          chunks=1, threads=1)"
"\n--\n\n"
"out (rows x cols float32) = a chain of elementwise ops on `inputs` (a tuple of float32\n"
"buffers); kinds: bytes, one per input (0 full rows x cols, 1 a row of cols, 2 a scalar,\n"
"3 a column of rows, 4 a row per group of `stride` rows);\n"
"code: int32 triples (op, operand, operand or -1), operands 0..n-1 the inputs and n + k the\n"
"k-th op's result (native.h lists the ops); layout: int64 (offset, row stride, or rows per\n"
"group) per input,\n"
"in floats (default: 0 and cols), so a full input may be a column block of a wider array;\n"
"extra_ops: int32 indices of ops before the last whose results are also written, each into\n"
"the float32 rows x cols buffer of extra_outs (a tuple) at its position; chunks, threads:\n"
"the rows split on dfg's pool (the same bits on any split).");

/* --- a chain's arguments, as chain_f32 and recurrent_f32 both take them --------------------- */

/* kinds[j] of n inputs, each a DFG_CH_IN_* */
static int chain_kinds(const char *fn, const unsigned char *kinds, int n, int *kind) {
    for (int j = 0; j < n; j++) {
        kind[j] = kinds[j];
        if (kind[j] > DFG_CH_IN_GROUP) {
            PyErr_Format(PyExc_ValueError, "%s: unknown input kind %d", fn, kind[j]);
            return -1;
        }
    }
    return 0;
}

/* the code: 1 to DFG_CHAIN_MAX_OPS int32 triples (op, operand, operand or -1; operand n_in + k
 * is op k's result), copied into ops; the number of ops, or -1 */
static int chain_code(const char *fn, const void *code, Py_ssize_t len, int n_in, int *ops) {
    if (len % 12 || len == 0 || len / 12 > DFG_CHAIN_MAX_OPS) {
        PyErr_Format(PyExc_ValueError, "%s: code must be 1 to %d int32 triples", fn,
                     DFG_CHAIN_MAX_OPS);
        return -1;
    }
    int n_ops = (int)(len / 12);
    memcpy(ops, code, (size_t)len);
    for (int k = 0; k < n_ops; k++) {
        int op = ops[3 * k], a = ops[3 * k + 1], b = ops[3 * k + 2];
        int binary = (op >= DFG_CH_ADD && op <= DFG_CH_SQDIFF) || op == DFG_CH_LEAKY;
        if (op < 0 || op >= DFG_CH_N_OPS || a < 0 || a >= n_in + k
            || (binary ? (b < 0 || b >= n_in + k) : b != -1)) {
            PyErr_Format(PyExc_ValueError, "%s: bad op %d (code %d %d %d)", fn, k, op, a, b);
            return -1;
        }
    }
    return n_ops;
}

/* each input's offset and stride: from `lo`, one int64 pair per input, or (None) 0 and cols */
static int chain_layout(const char *fn, PyObject *lo, const int *kind, int n_in, long cols,
                        long *offset, long *stride) {
    if (lo == Py_None) {
        for (int j = 0; j < n_in; j++) {
            offset[j] = 0;
            stride[j] = cols;
        }
        return 0;
    }
    Py_buffer lay;
    if (PyObject_GetBuffer(lo, &lay, PyBUF_SIMPLE) < 0)
        return -1;
    int ok = lay.len == (Py_ssize_t)(2 * n_in * sizeof(int64_t));
    for (int j = 0; ok && j < n_in; j++) {
        int64_t pair[2];
        memcpy(pair, (const char *)lay.buf + 16 * j, 16);
        offset[j] = (long)pair[0];
        stride[j] = (long)pair[1];
        /* a group's stride is its rows per group (>= 1), a full input's its row stride
         * (>= cols); the others read none */
        ok &= pair[0] >= 0 && pair[1] >= (kind[j] == DFG_CH_IN_GROUP ? 1 : cols);
    }
    PyBuffer_Release(&lay);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: layout must be one (offset >= 0, stride >= cols, "
                     "or >= 1 for a group) int64 pair per input", fn);
        return -1;
    }
    return 0;
}

/* the ops before the last whose results are outputs too: int32 indices from `xo` (None:
 * none), distinct, up to DFG_CHAIN_MAX_EXTRA (exactly `want` of them when want >= 0); their
 * number, or -1 */
static int chain_extra(const char *fn, PyObject *xo, int n_ops, Py_ssize_t want,
                       int *extra_op) {
    if (xo == Py_None && want <= 0)
        return 0;
    Py_buffer xb;
    if (PyObject_GetBuffer(xo, &xb, PyBUF_SIMPLE) < 0)
        return -1;
    int n = (int)(xb.len / 4);
    int ok = xb.len % 4 == 0 && n <= DFG_CHAIN_MAX_EXTRA && (want < 0 || n == want);
    if (ok) {
        memcpy(extra_op, xb.buf, (size_t)xb.len);
        for (int e = 0; e < n; e++) {
            ok &= extra_op[e] >= 0 && extra_op[e] < n_ops - 1;
            for (int f = 0; f < e; f++)
                ok &= extra_op[f] != extra_op[e];
        }
    }
    PyBuffer_Release(&xb);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: extra_ops must be up to %d distinct int32 op "
                     "indices before the last, one per extra output", fn, DFG_CHAIN_MAX_EXTRA);
        return -1;
    }
    return n;
}

/* the floats an input of this kind, offset and stride is read from over rows x cols: its
 * rows (`stride` apart), its row, its scalar, its column (one per row) or a row per group
 * of `stride` rows, past its offset (an overflow is refused as a bad geometry); -1 (error
 * set) on an overflow */
static Py_ssize_t chain_input_need(const char *fn, int kind, long offset, long stride,
                                   long rows, long cols) {
    Py_ssize_t need = kind == DFG_CH_IN_SCALAR ? 1 : kind == DFG_CH_IN_COL ? rows : cols;
    if ((kind == DFG_CH_IN_FULL || kind == DFG_CH_IN_GROUP) && rows > 1) {
        /* a group's: the last group's row ends the input */
        long span[2] = {kind == DFG_CH_IN_FULL ? rows - 1 : (rows - 1) / stride,
                        kind == DFG_CH_IN_FULL ? stride : cols};
        Py_ssize_t before = product(fn, 2, span);
        if (before < 0 || __builtin_add_overflow(need, before, &need))
            return -1;
    }
    if (rows == 0 || cols == 0)
        need = 0;
    if (__builtin_add_overflow(need, (Py_ssize_t)offset, &need)) {
        PyErr_Format(PyExc_ValueError, "%s: bad geometry", fn);
        return -1;
    }
    return need;
}

static PyObject *chain_f32(PyObject *self, PyObject *args) {
    PyObject *ins, *oo, *lo = Py_None, *xo = Py_None, *xouts = Py_None;
    const char *kinds, *code;
    Py_ssize_t n_kinds, code_len;
    long dims[2], chunks = 1;
    int threads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!y#y#Oll|OOOli:chain_f32", &PyTuple_Type, &ins, &kinds,
                          &n_kinds, &code, &code_len, &oo, &dims[0], &dims[1], &lo, &xo,
                          &xouts, &chunks, &threads))
        return NULL;
    const char *fn = "chain_f32";
    Py_ssize_t n_in = PyTuple_GET_SIZE(ins);
    Py_ssize_t total = product(fn, 2, dims);
    if (total < 0)
        return NULL;
    if (n_in < 1 || n_in > DFG_CHAIN_MAX_IN || n_kinds != n_in)
        return PyErr_Format(PyExc_ValueError, "%s: 1 to %d inputs with one kind each", fn,
                            DFG_CHAIN_MAX_IN);
    int ops[3 * DFG_CHAIN_MAX_OPS], kind[DFG_CHAIN_MAX_IN];
    long offset[DFG_CHAIN_MAX_IN], stride[DFG_CHAIN_MAX_IN];
    int n_ops = chain_code(fn, code, code_len, (int)n_in, ops);
    if (n_ops < 0 || chain_kinds(fn, (const unsigned char *)kinds, (int)n_in, kind) < 0
        || chain_layout(fn, lo, kind, (int)n_in, dims[1], offset, stride) < 0)
        return NULL;
    /* the extra outputs: op indices (int32, each an op before the last, no repeats) and as
     * many writable float32 buffers of rows x cols */
    int n_extra = 0, extra_op[DFG_CHAIN_MAX_EXTRA];
    if (xo != Py_None || xouts != Py_None) {
        if (!PyTuple_Check(xouts))
            return PyErr_Format(PyExc_TypeError, "%s: extra_outs must be a tuple", fn);
        n_extra = chain_extra(fn, xo, n_ops, PyTuple_GET_SIZE(xouts), extra_op);
        if (n_extra < 0)
            return NULL;
    }
    Py_buffer bufs[DFG_CHAIN_MAX_IN], out, xbufs[DFG_CHAIN_MAX_EXTRA];
    const float *ptrs[DFG_CHAIN_MAX_IN];
    float *xptrs[DFG_CHAIN_MAX_EXTRA];
    int got = 0, xgot = 0;
    PyObject *ret = NULL;
    for (; got < n_in; got++) {
        Py_ssize_t need = chain_input_need(fn, kind[got], offset[got], stride[got], dims[0],
                                           dims[1]);
        if (need < 0)
            goto done;
        if (f32_buffer(PyTuple_GET_ITEM(ins, got), &bufs[got], 0, -1, fn, "an input") < 0)
            goto done;
        if (bufs[got].len / 4 < need) {
            PyErr_Format(PyExc_ValueError, "%s: an input has %zd floats, the geometry needs %zd",
                         fn, bufs[got].len / 4, need);
            PyBuffer_Release(&bufs[got]);
            goto done;
        }
        ptrs[got] = bufs[got].buf;
    }
    for (; xgot < n_extra; xgot++) {
        if (f32_buffer(PyTuple_GET_ITEM(xouts, xgot), &xbufs[xgot], 1, total, fn,
                       "an extra output") < 0)
            goto done;
        xptrs[xgot] = xbufs[xgot].buf;
    }
    if (f32_buffer(oo, &out, 1, total, fn, "out") < 0)
        goto done;
    if (chunks < 1 || threads < 1 || threads > 64) {
        PyBuffer_Release(&out);
        PyErr_Format(PyExc_ValueError, "%s: chunks >= 1 and threads 1 to 64", fn);
        goto done;
    }
    /* a split asked for (_native.chain_split, the one rule) is honoured; else the GIL is kept
     * for a small chain */
    if (threads == 1 && total * n_ops < (1 << 16)) {
        dfg_chain_f32(ptrs, kind, offset, stride, (int)n_in, ops, n_ops, out.buf, dims[0],
                      dims[1], n_extra, extra_op, xptrs);
    } else {
        Py_BEGIN_ALLOW_THREADS
        dfg_chain_f32_mt(ptrs, kind, offset, stride, (int)n_in, ops, n_ops, out.buf, dims[0],
                         dims[1], n_extra, extra_op, xptrs, chunks, threads);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&out);
    ret = Py_NewRef(Py_None);
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&bufs[j]);
    for (int e = 0; e < xgot; e++)
        PyBuffer_Release(&xbufs[e]);
    return ret;
}

PyDoc_STRVAR(conv_doc,
"conv2d_nhwc_f32(x, wb, out, geometry, scale, shift, residual, act, chunks, threads,\n"
"                flat=0)\n--\n\n"
"Direct convolution of float32 NHWC x (N, H, W, C) by the packed filter wb (ceil(OC/16), KH,\n"
"KW, C, 16) into out (N, OH, OW, OC); geometry = (N, H, W, C, KH, KW, OC, OH, OW, sh, sw,\n"
"dh, dw, pt, pl). Then out * scale + shift (each None or ceil(OC/16)*16 floats), + residual\n"
"(None or out's shape), act (0 none, 1 Relu, 2 Relu6, 3 Sigmoid, 4 Tanh, 5 Swish). The N*OH\n"
"rows run in `chunks` pieces\n"
"on up to `threads` threads. flat: 1 on AVX-512 with OC of 64 or more, the output pixels\n"
"as the rows of one product for each whole tile column of 64 channels (conv.c's\n"
"dfg_conv_flat_f32; its own split over the threads), the row kernel for the rest;\n"
"2 the few-channel kernel (OC <= 4, no dilation; wb then holds the filter as (OC, KH, KW*C)\n"
"at its start: dfg_conv_narrow_f32).\n"
"MemoryError when a row buffer cannot be allocated.");

static PyObject *conv2d_nhwc_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *wo, *oo, *so, *to, *ro;
    long g[15];       /* N, H, W, C, KH, KW, OC, OH, OW, sh, sw, dh, dw, pt, pl */
    int act, threads, flat = 0;
    long chunks;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO(lllllllllllllll)OOOili|i:conv2d_nhwc_f32", &xo, &wo, &oo,
                          &g[0], &g[1], &g[2], &g[3], &g[4], &g[5], &g[6], &g[7], &g[8],
                          &g[9], &g[10], &g[11], &g[12], &g[13], &g[14], &so, &to, &ro, &act,
                          &chunks, &threads, &flat))
        return NULL;
    const char *fn = "conv2d_nhwc_f32";
    const long N = g[0], H = g[1], W = g[2], C = g[3], KH = g[4], KW = g[5], OC = g[6],
               OH = g[7], OW = g[8];
    if (check_window(fn, g[9], g[10], g[11], g[12], g[13], g[14], chunks, threads) < 0)
        return NULL;
    if (act < DFG_ACT_NONE || act > DFG_ACT_SWISH_FN)
        return PyErr_Format(PyExc_ValueError, "%s: unknown activation %d", fn, act);
    if (flat < 0 || flat > DFG_CONV_NARROW)
        return PyErr_Format(PyExc_ValueError, "%s: unknown kernel %d", fn, flat);
    if (flat == DFG_CONV_NARROW && (OC > DFG_NARROW_MAX || g[11] != 1 || g[12] != 1))
        return PyErr_Format(PyExc_ValueError, "%s: the few-channel kernel takes at most %d "
                            "outputs and no dilation", fn, DFG_NARROW_MAX);
    const long blocks = (OC + DFG_VW - 1) / DFG_VW;
    const long xs[4] = {N, H, W, C}, ws[5] = {blocks, KH, KW, C, DFG_VW},
               os[4] = {N, OH, OW, OC}, cs[2] = {blocks, DFG_VW};
    Py_ssize_t nx = product(fn, 4, xs), nw = product(fn, 5, ws), no = product(fn, 4, os),
               nc = product(fn, 2, cs);
    if (nx < 0 || nw < 0 || no < 0 || nc < 0)
        return NULL;
    Py_buffer x = {0}, wb = {0}, out = {0}, scale = {0}, shift = {0}, res = {0};
    PyObject *ret = NULL;
    if (f32_buffer(xo, &x, 0, nx, fn, "x") < 0 || f32_buffer(wo, &wb, 0, nw, fn, "wb") < 0
        || f32_buffer(oo, &out, 1, no, fn, "out") < 0
        || f32_optional(so, &scale, nc, fn, "scale") < 0
        || f32_optional(to, &shift, nc, fn, "shift") < 0
        || f32_optional(ro, &res, no, fn, "residual") < 0)
        goto done;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = dfg_conv2d_nhwc_f32_mt(x.buf, wb.buf, out.buf, H, W, C, KH, KW, OC, OH, OW, g[9],
                                 g[10], g[11], g[12], g[13], g[14], scale.buf, shift.buf,
                                 res.buf, act, N * OH, chunks, threads, flat);
    Py_END_ALLOW_THREADS
    if (err)
        PyErr_SetString(PyExc_MemoryError,
                        "native Conv2D: out of memory for its row or patch buffer");
    else
        ret = Py_NewRef(Py_None);
done:
    release(&x);
    release(&wb);
    release(&out);
    release(&scale);
    release(&shift);
    release(&res);
    return ret;
}

PyDoc_STRVAR(depthwise_doc,
"depthwise_nhwc_f32(x, f, out, geometry, scale, shift, act, chunks, threads)\n--\n\n"
"Depthwise convolution (depth multiplier 1) of float32 NHWC x (N, H, W, C) by f (KH, KW, C)\n"
"into out (N, OH, OW, C); geometry = (N, H, W, C, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl).\n"
"Then out * scale + shift (each None or C floats; rounded apart), act (0 none, 1 Relu,\n"
"2 Relu6, 3 Sigmoid, 4 Tanh, 5 Swish).");

static PyObject *depthwise_nhwc_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *fo, *oo, *so, *to;
    long g[14];       /* N, H, W, C, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl */
    int act, threads;
    long chunks;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO(llllllllllllll)OOili:depthwise_nhwc_f32", &xo, &fo, &oo,
                          &g[0], &g[1], &g[2], &g[3], &g[4], &g[5], &g[6], &g[7], &g[8],
                          &g[9], &g[10], &g[11], &g[12], &g[13], &so, &to, &act, &chunks,
                          &threads))
        return NULL;
    const char *fn = "depthwise_nhwc_f32";
    const long N = g[0], H = g[1], W = g[2], C = g[3], KH = g[4], KW = g[5], OH = g[6],
               OW = g[7];
    if (check_window(fn, g[8], g[9], g[10], g[11], g[12], g[13], chunks, threads) < 0)
        return NULL;
    if (act < DFG_ACT_NONE || act > DFG_ACT_SWISH_FN)
        return PyErr_Format(PyExc_ValueError, "%s: unknown activation %d", fn, act);
    const long xs[4] = {N, H, W, C}, fs[3] = {KH, KW, C}, os[4] = {N, OH, OW, C}, cs[1] = {C};
    Py_ssize_t nx = product(fn, 4, xs), nf = product(fn, 3, fs), no = product(fn, 4, os),
               nc = product(fn, 1, cs);
    if (nx < 0 || nf < 0 || no < 0 || nc < 0)
        return NULL;
    Py_buffer x = {0}, f = {0}, out = {0}, scale = {0}, shift = {0};
    PyObject *ret = NULL;
    if (f32_buffer(xo, &x, 0, nx, fn, "x") < 0 || f32_buffer(fo, &f, 0, nf, fn, "f") < 0
        || f32_buffer(oo, &out, 1, no, fn, "out") < 0
        || f32_optional(so, &scale, nc, fn, "scale") < 0
        || f32_optional(to, &shift, nc, fn, "shift") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    dfg_depthwise_nhwc_f32_mt(x.buf, f.buf, out.buf, H, W, C, KH, KW, OH, OW, g[8], g[9],
                              g[10], g[11], g[12], g[13], scale.buf, shift.buf, act, N * OH,
                              chunks, threads);
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    release(&x);
    release(&f);
    release(&out);
    release(&scale);
    release(&shift);
    return ret;
}

PyDoc_STRVAR(maxpool_doc,
"maxpool_nhwc_f32(x, out, geometry, chunks, threads, avg=0)\n--\n\n"
"MaxPool of float32 NHWC x (N, H, W, C) into out (N, OH, OW, C) over windows of\n"
"geometry = (N, H, W, C, KH, KW, OH, OW, sh, sw, pt, pl): TensorFlow's fold from the\n"
"lowest finite float over the taps inside x; avg: AvgPool, each window's sum over the\n"
"taps inside x divided by their count.");

static PyObject *maxpool_nhwc_f32(PyObject *self, PyObject *args) {
    PyObject *xo, *oo;
    long g[12];       /* N, H, W, C, KH, KW, OH, OW, sh, sw, pt, pl */
    int threads, avg = 0;
    long chunks;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO(llllllllllll)li|p:maxpool_nhwc_f32", &xo, &oo, &g[0],
                          &g[1], &g[2], &g[3], &g[4], &g[5], &g[6], &g[7], &g[8], &g[9],
                          &g[10], &g[11], &chunks, &threads, &avg))
        return NULL;
    const char *fn = "maxpool_nhwc_f32";
    const long N = g[0], H = g[1], W = g[2], C = g[3], KH = g[4], KW = g[5], OH = g[6],
               OW = g[7];
    if (check_window(fn, g[8], g[9], 1, 1, g[10], g[11], chunks, threads) < 0)
        return NULL;
    if (KH < 1 || KW < 1)
        return PyErr_Format(PyExc_ValueError, "%s: the window must be at least 1x1", fn);
    const long xs[4] = {N, H, W, C}, os[4] = {N, OH, OW, C};
    Py_ssize_t nx = product(fn, 4, xs), no = product(fn, 4, os);
    if (nx < 0 || no < 0)
        return NULL;
    Py_buffer x = {0}, out = {0};
    PyObject *ret = NULL;
    if (f32_buffer(xo, &x, 0, nx, fn, "x") < 0 || f32_buffer(oo, &out, 1, no, fn, "out") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    dfg_maxpool_nhwc_f32_mt(x.buf, out.buf, H, W, C, KH, KW, OH, OW, g[8], g[9], g[10], g[11],
                            N * OH, chunks, threads, avg);
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    release(&x);
    release(&out);
    return ret;
}

PyDoc_STRVAR(concat_doc,
"concat_rows(values, out, outer, chunks=1, threads=1)\n--\n\n"
"out = the C-contiguous buffers `values` (of out's format) joined along an axis: each\n"
"value is `outer` equal rows, and out's row o is every value's row o in turn (ConcatV2 with\n"
"outer the product of the axes before the concatenated one); rows split in `chunks` on up to\n"
"`threads` threads of the pool.");

#define DFG_CONCAT_MAX 1024
static PyObject *concat_rows(PyObject *self, PyObject *args) {
    PyObject *vals, *oo;
    Py_ssize_t outer;
    long chunks = 1;
    int threads = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!On|li:concat_rows", &PyTuple_Type, &vals, &oo, &outer,
                          &chunks, &threads))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(vals);
    if (n < 1 || n > DFG_CONCAT_MAX || outer < 1)
        return PyErr_Format(PyExc_ValueError, "concat_rows: 1 to %d values and outer >= 1",
                            DFG_CONCAT_MAX);
    if (chunks < 1 || threads < 1 || threads > 64)
        return PyErr_Format(PyExc_ValueError, "concat_rows: chunks >= 1 and threads 1 to 64");
    Py_buffer out, bufs[DFG_CONCAT_MAX];
    if (PyObject_GetBuffer(oo, &out, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0)
        return NULL;
    const char *ofmt = out.format ? out.format : "B";
    Py_ssize_t got = 0, total = 0;
    PyObject *ret = NULL;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(vals, got), &bufs[got],
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto done;
        const char *fmt = bufs[got].format ? bufs[got].format : "B";
        if (bufs[got].itemsize != out.itemsize || strcmp(fmt, ofmt) != 0
            || bufs[got].len % outer) {
            PyErr_SetString(PyExc_ValueError, "concat_rows: a value of another format, or "
                            "not `outer` equal rows");
            PyBuffer_Release(&bufs[got]);
            goto done;
        }
        total += bufs[got].len;
    }
    if (total != out.len) {
        PyErr_Format(PyExc_ValueError, "concat_rows: the values hold %zd bytes, out %zd",
                     total, out.len);
        goto done;
    }
    {
        static const char *src[DFG_CONCAT_MAX];
        static long row[DFG_CONCAT_MAX];
        /* (src and row are static: the GIL, held until the copy starts, guards them, and a
         * copy that lets it go keeps it till the arrays are read: see below) */
        const char *s_local[64];
        long r_local[64];
        const char **sp = n <= 64 ? s_local : src;
        long *rp = n <= 64 ? r_local : row;
        for (Py_ssize_t j = 0; j < n; j++) {
            sp[j] = bufs[j].buf;
            rp[j] = (long)(bufs[j].len / outer);
        }
        /* a small copy keeps the GIL: handing it over costs more. A copy of more than 64
         * values uses the static arrays and keeps it too */
        PyThreadState *ts = total >= (1 << 16) && n <= 64 ? PyEval_SaveThread() : NULL;
        dfg_concat_rows_mt(sp, rp, (int)n, out.buf, (long)outer, chunks, threads);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    Py_INCREF(Py_None);
    ret = Py_None;
done:
    for (Py_ssize_t j = 0; j < got; j++)
        PyBuffer_Release(&bufs[j]);
    PyBuffer_Release(&out);
    return ret;
}

PyDoc_STRVAR(recurrent_doc,
"recurrent_f32(rows_in, wb, geometry, product, mm_state, roles, kinds, layout, fixed, code,\n"
"              rows, cols, extra_ops, out_states, item_out, items, init, scratch_a,\n"
"              scratch_b)\n--\n\n"
"len(rows_in) iterations of a recurrent cell (recurrent.c): the state mm_state times the\n"
"packed matrix wb (conv2d_nhwc_f32's wb and geometry, one thread) into product, then the\n"
"chain (chain_f32's code, kinds, layout, extra_ops, rows, cols) over its inputs, each by its\n"
"role (int32: -1 fixed[j], -2 the iteration's rows_in entry, -3 product, k >= 0 state k), into\n"
"its outputs (the extra ones, then the last): out_states (int32 per output) names the state\n"
"each becomes (-1: none, only for item_out), item_out (or -1) the output written to row i of\n"
"items. init: each state's first value (read only); scratch_a, scratch_b: two writable\n"
"buffers per state (None for a state only ever an output row). Returns, per state, where its\n"
"last value is: 0 init, 1 scratch_a, 2 scratch_b, 3 the last row of items.\n\n"
"A masked layer adds masks (one buffer of rows bytes per iteration), state_src and state_sel\n"
"(int32 per state), item_state and tmp (one writable rows x cols buffer per chain output):\n"
"the chain's outputs then go to tmp, each state's next value is, row by row, output\n"
"state_src[s] where the mask's byte is set or state_sel[s] is 0, else its own value, and\n"
"items' row i is state item_state's new value (out_states and item_out are not read).");

/* `obj` as a float32 buffer of at least `need` floats (exactly `exact` when >= 0) */
static int f32_at_least(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t need,
                        Py_ssize_t exact, const char *fn, const char *what) {
    if (f32_buffer(obj, view, writable, exact, fn, what) < 0)
        return -1;
    if (view->len / 4 < need) {
        PyErr_Format(PyExc_ValueError, "%s: %s has %zd floats, the chain reads %zd", fn, what,
                     view->len / 4, need);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* int32 values from a bytes-like object of exactly n of them, each in [lo, hi] */
static int int32_values(PyObject *obj, int *out, Py_ssize_t n, int lo, int hi,
                        const char *fn, const char *what) {
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE) < 0)
        return -1;
    int ok = b.len == n * 4;
    if (ok) {
        memcpy(out, b.buf, (size_t)b.len);
        for (Py_ssize_t i = 0; i < n; i++)
            ok &= out[i] >= lo && out[i] <= hi;
    }
    PyBuffer_Release(&b);
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be %zd int32 values in [%d, %d]", fn, what,
                     n, lo, hi);
        return -1;
    }
    return 0;
}

static PyObject *recurrent_f32(PyObject *self, PyObject *args) {
    PyObject *rows_o, *wo, *po, *roles_o, *kinds_o, *lay_o, *fixed_o, *code_o, *extra_o,
             *outs_o, *items_o, *init_o, *sa_o, *sb_o, *masks_o = Py_None, *src_o = NULL,
             *sel_o = NULL, *tmp_o = NULL;
    long g[15], rows, cols;
    int mm_state, item_out, item_state = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O(lllllllllllllll)OiOOOO!OllOOiOO!O!O!|OOOiO!:recurrent_f32",
                          &PyTuple_Type, &rows_o, &wo, &g[0], &g[1], &g[2], &g[3], &g[4],
                          &g[5], &g[6], &g[7], &g[8], &g[9], &g[10], &g[11], &g[12], &g[13],
                          &g[14], &po, &mm_state, &roles_o, &kinds_o, &lay_o, &PyTuple_Type,
                          &fixed_o, &code_o, &rows, &cols, &extra_o, &outs_o, &item_out,
                          &items_o, &PyTuple_Type, &init_o, &PyTuple_Type, &sa_o,
                          &PyTuple_Type, &sb_o, &masks_o, &src_o, &sel_o, &item_state,
                          &PyTuple_Type, &tmp_o))
        return NULL;
    const int masked = masks_o != Py_None;
    const char *fn = "recurrent_f32";
    Py_ssize_t n = PyTuple_GET_SIZE(rows_o);
    int n_states = (int)PyTuple_GET_SIZE(init_o);
    int n_in = (int)PyTuple_GET_SIZE(fixed_o);
    if (n_states < 1 || n_states > DFG_RECURRENT_MAX_STATES
        || PyTuple_GET_SIZE(sa_o) != n_states || PyTuple_GET_SIZE(sb_o) != n_states
        || n_in < 1 || n_in > DFG_CHAIN_MAX_IN || mm_state < 0 || mm_state >= n_states)
        return PyErr_Format(PyExc_ValueError, "%s: 1 to %d states (init, scratch_a, scratch_b "
                            "alike), 1 to %d chain inputs, mm_state a state", fn,
                            DFG_RECURRENT_MAX_STATES, DFG_CHAIN_MAX_IN);
    if (check_window(fn, g[9], g[10], g[11], g[12], g[13], g[14], 1, 1) < 0)
        return NULL;
    /* the chain: its code, inputs, extra outputs (as chain_f32 checks them) */
    int role[DFG_CHAIN_MAX_IN], kind[DFG_CHAIN_MAX_IN], ops[3 * DFG_CHAIN_MAX_OPS];
    long offset[DFG_CHAIN_MAX_IN], stride[DFG_CHAIN_MAX_IN];
    if (int32_values(roles_o, role, n_in, DFG_RC_PRODUCT, n_states - 1, fn, "roles") < 0)
        return NULL;
    if (rows < 0 || cols < 0)
        return PyErr_Format(PyExc_ValueError, "%s: bad rows or cols", fn);
    Py_buffer kb, cb;
    if (PyObject_GetBuffer(kinds_o, &kb, PyBUF_SIMPLE) < 0)
        return NULL;
    int kinds_ok = kb.len == n_in
                   && chain_kinds(fn, (const unsigned char *)kb.buf, n_in, kind) == 0;
    PyBuffer_Release(&kb);
    if (!kinds_ok)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "%s: one kind per "
                                                      "chain input", fn);
    for (int j = 0; j < n_in; j++)
        if (kind[j] == DFG_CH_IN_GROUP)
            return PyErr_Format(PyExc_ValueError, "%s: input kind %d is not taken", fn,
                                kind[j]);
    if (PyObject_GetBuffer(code_o, &cb, PyBUF_SIMPLE) < 0)
        return NULL;
    int n_ops = chain_code(fn, cb.buf, cb.len, n_in, ops);
    PyBuffer_Release(&cb);
    if (n_ops < 0 || chain_layout(fn, lay_o, kind, n_in, cols, offset, stride) < 0)
        return NULL;
    int extra_op[DFG_CHAIN_MAX_EXTRA];
    int n_extra = chain_extra(fn, extra_o, n_ops, -1, extra_op);
    if (n_extra < 0)
        return NULL;
    int out_state[DFG_CHAIN_MAX_EXTRA + 1];
    int updated[DFG_RECURRENT_MAX_STATES] = {0}, via_row[DFG_RECURRENT_MAX_STATES] = {0};
    int state_src[DFG_RECURRENT_MAX_STATES], state_sel[DFG_RECURRENT_MAX_STATES];
    if (masked) {
        /* every state is made each iteration (from an output, row by row), one of them the
         * output row */
        if (!PyTuple_Check(masks_o) || PyTuple_GET_SIZE(masks_o) != PyTuple_GET_SIZE(rows_o)
            || !src_o || !sel_o || !tmp_o || PyTuple_GET_SIZE(tmp_o) != n_extra + 1
            || item_state < 0 || item_state >= n_states)
            return PyErr_Format(PyExc_ValueError, "%s: a masked layer takes one mask per "
                                "input row, state_src, state_sel, item_state (a state) and "
                                "one tmp buffer per chain output", fn);
        if (int32_values(src_o, state_src, n_states, 0, n_extra, fn, "state_src") < 0
            || int32_values(sel_o, state_sel, n_states, 0, 1, fn, "state_sel") < 0)
            return NULL;
        for (int s = 0; s < n_states; s++)
            updated[s] = 1;
        via_row[item_state] = 1;
        item_out = 0;   /* items holds rows x cols floats a row */
    } else {
    if (int32_values(outs_o, out_state, n_extra + 1, -1, n_states - 1, fn, "out_states") < 0)
        return NULL;
    if (item_out < -1 || item_out > n_extra)
        return PyErr_Format(PyExc_ValueError, "%s: item_out must be an output or -1", fn);
    /* each state the output of at most one output; an output of no state is the item */
    for (int k = 0; k <= n_extra; k++) {
        int s = out_state[k];
        if (s < 0 ? k != item_out : updated[s]++ > 0)
            return PyErr_Format(PyExc_ValueError, "%s: each state is at most one output, and "
                                "an output of no state is item_out", fn);
        if (s >= 0 && k == item_out)
            via_row[s] = 1;
    }
    }
    Py_ssize_t out_len = rows * cols;
    if (rows != 0 && out_len / rows != cols)
        return PyErr_Format(PyExc_ValueError, "%s: bad rows or cols", fn);
    /* the product: x is a state's value (N*H*W*C floats), out the product buffer */
    const long blocks = (g[6] + DFG_VW - 1) / DFG_VW;
    const long xs[4] = {g[0], g[1], g[2], g[3]}, ws[5] = {blocks, g[4], g[5], g[3], DFG_VW},
               os[4] = {g[0], g[7], g[8], g[6]};
    Py_ssize_t nx = product(fn, 4, xs), nw = product(fn, 5, ws), no = product(fn, 4, os);
    if (nx < 0 || nw < 0 || no < 0)
        return NULL;
    /* every buffer a state's value may be in holds what the chain and the product read, and
     * a chain output's buffer is exactly rows x cols */
    Py_ssize_t state_need[DFG_RECURRENT_MAX_STATES] = {0};
    Py_ssize_t row_need = 0, product_need = 0, fixed_need[DFG_CHAIN_MAX_IN] = {0};
    for (int j = 0; j < n_in; j++) {
        Py_ssize_t need = chain_input_need(fn, kind[j], offset[j], stride[j], rows, cols);
        if (need < 0)
            return NULL;
        if (role[j] == DFG_RC_FIXED)
            fixed_need[j] = need;
        else if (role[j] == DFG_RC_ROW)
            row_need = need > row_need ? need : row_need;
        else if (role[j] == DFG_RC_PRODUCT)
            product_need = need > product_need ? need : product_need;
        else if (need > state_need[role[j]])
            state_need[role[j]] = need;
    }
    if (product_need > no)
        return PyErr_Format(PyExc_ValueError, "%s: the chain reads %zd floats of a product of "
                            "%zd", fn, product_need, no);
    if (via_row[mm_state] && out_len != nx)
        return PyErr_Format(PyExc_ValueError, "%s: the product's state is an output row of "
                            "%zd floats, the product reads %zd", fn, out_len, nx);
    Py_buffer *rb = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_buffer));
    const float **row_ptr = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(float *));
    Py_buffer *mb = PyMem_Calloc((size_t)(n > 0 && masked ? n : 1), sizeof(Py_buffer));
    const unsigned char **mask_ptr =
        PyMem_Calloc((size_t)(n > 0 && masked ? n : 1), sizeof(unsigned char *));
    Py_buffer wb = {0}, pb = {0}, ib = {0}, fb[DFG_CHAIN_MAX_IN], sb0[DFG_RECURRENT_MAX_STATES],
              sba[DFG_RECURRENT_MAX_STATES], sbb[DFG_RECURRENT_MAX_STATES],
              tb[DFG_CHAIN_MAX_EXTRA + 1];
    float *tmp_ptr[DFG_CHAIN_MAX_EXTRA + 1] = {0};
    memset(tb, 0, sizeof(tb));
    memset(fb, 0, sizeof(fb));
    memset(sb0, 0, sizeof(sb0));
    memset(sba, 0, sizeof(sba));
    memset(sbb, 0, sizeof(sbb));
    const float *fixed_ptr[DFG_CHAIN_MAX_IN] = {0}, *init_ptr[DFG_RECURRENT_MAX_STATES];
    float *a_ptr[DFG_RECURRENT_MAX_STATES] = {0}, *b_ptr[DFG_RECURRENT_MAX_STATES] = {0};
    int final_where[DFG_RECURRENT_MAX_STATES];
    PyObject *ret = NULL;
    Py_ssize_t got_rows = 0, got_masks = 0;
    if (!rb || !row_ptr || !mb || !mask_ptr) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got_rows < n; got_rows++) {
        if (f32_at_least(PyTuple_GET_ITEM(rows_o, got_rows), &rb[got_rows], 0, row_need, -1,
                         fn, "an input row") < 0)
            goto done;
        row_ptr[got_rows] = rb[got_rows].buf;
    }
    for (; masked && got_masks < n; got_masks++) {
        /* a row's mask: exactly one byte a row */
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(masks_o, got_masks), &mb[got_masks],
                               PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        mask_ptr[got_masks] = mb[got_masks].buf;
        if (mb[got_masks].len != rows || mb[got_masks].itemsize != 1) {
            got_masks++;
            PyErr_Format(PyExc_ValueError, "%s: a mask must be %ld bytes", fn, rows);
            goto done;
        }
    }
    for (int k = 0; masked && k <= n_extra; k++) {
        if (f32_buffer(PyTuple_GET_ITEM(tmp_o, k), &tb[k], 1, out_len, fn, "tmp") < 0)
            goto done;
        tmp_ptr[k] = tb[k].buf;
    }
    if (f32_buffer(wo, &wb, 0, nw, fn, "wb") < 0 || f32_buffer(po, &pb, 1, no, fn, "product") < 0)
        goto done;
    for (int j = 0; j < n_in; j++) {
        PyObject *f = PyTuple_GET_ITEM(fixed_o, j);
        if (role[j] != DFG_RC_FIXED)
            continue;
        if (f32_at_least(f, &fb[j], 0, fixed_need[j], -1, fn, "a fixed input") < 0)
            goto done;
        fixed_ptr[j] = fb[j].buf;
    }
    for (int s = 0; s < n_states; s++) {
        /* the first value: read by the chain and, for the product's state, the product */
        Py_ssize_t exact = s == mm_state ? nx : -1;
        if (f32_at_least(PyTuple_GET_ITEM(init_o, s), &sb0[s], 0, state_need[s], exact, fn,
                         "a state's first value") < 0)
            goto done;
        init_ptr[s] = sb0[s].buf;
        if (updated[s] && !via_row[s]) {
            if (state_need[s] > out_len || (s == mm_state && out_len != nx)) {
                PyErr_Format(PyExc_ValueError, "%s: a state of %zd floats is read as %zd", fn,
                             out_len, s == mm_state ? nx : state_need[s]);
                goto done;
            }
            if (f32_buffer(PyTuple_GET_ITEM(sa_o, s), &sba[s], 1, out_len, fn, "scratch_a") < 0
                || f32_buffer(PyTuple_GET_ITEM(sb_o, s), &sbb[s], 1, out_len, fn,
                              "scratch_b") < 0)
                goto done;
            a_ptr[s] = sba[s].buf;
            b_ptr[s] = sbb[s].buf;
        } else if (via_row[s] && state_need[s] > out_len) {
            PyErr_Format(PyExc_ValueError, "%s: an output row of %zd floats is read as %zd", fn,
                         out_len, state_need[s]);
            goto done;
        }
    }
    {
        long span[2] = {n, item_out >= 0 ? (long)out_len : 0};
        Py_ssize_t items_len = product(fn, 2, span);
        if (items_len < 0 || f32_buffer(items_o, &ib, 1, items_len, fn, "items") < 0)
            goto done;
    }
    struct dfg_recurrent r = {row_ptr, wb.buf, g, pb.buf, mm_state, n_in, role, kind, offset,
                              stride, fixed_ptr, ops, n_ops, n_extra, extra_op, rows, cols,
                              out_state, item_out, ib.buf, out_len, n_states, init_ptr, a_ptr,
                              b_ptr, final_where, masked ? mask_ptr : NULL, state_src,
                              state_sel, item_state, tmp_ptr};
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = dfg_recurrent_f32(&r, n);
    Py_END_ALLOW_THREADS
    if (err) {
        PyErr_SetString(PyExc_MemoryError, "recurrent_f32: out of memory for a row buffer");
        goto done;
    }
    ret = PyTuple_New(n_states);
    for (int s = 0; ret && s < n_states; s++)
        PyTuple_SET_ITEM(ret, s, PyLong_FromLong(final_where[s]));
done:
    for (Py_ssize_t i = 0; i < got_rows; i++)
        PyBuffer_Release(&rb[i]);
    PyMem_Free(rb);
    PyMem_Free(row_ptr);
    for (Py_ssize_t i = 0; i < got_masks; i++)
        PyBuffer_Release(&mb[i]);
    PyMem_Free(mb);
    PyMem_Free(mask_ptr);
    for (int k = 0; k <= DFG_CHAIN_MAX_EXTRA; k++)
        release(&tb[k]);
    release(&wb);
    release(&pb);
    release(&ib);
    for (int j = 0; j < DFG_CHAIN_MAX_IN; j++)
        release(&fb[j]);
    for (int s = 0; s < DFG_RECURRENT_MAX_STATES; s++) {
        release(&sb0[s]);
        release(&sba[s]);
        release(&sbb[s]);
    }
    return ret;
}

PyDoc_STRVAR(pool_spin_doc,
"pool_spin(us=-1)\n--\n\n"
"How long (microseconds) the native pool's idle workers poll for the next job before they\n"
"sleep; us >= 0 sets it. Returns the previous value.");

static PyObject *pool_spin(PyObject *self, PyObject *args) {
    long us = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "|l:pool_spin", &us))
        return NULL;
    if (us > 1000000)
        return PyErr_Format(PyExc_ValueError, "pool_spin: at most 1000000 us, not %ld", us);
    return PyLong_FromLong(dfg_pool_spin(us));
}

PyDoc_STRVAR(pool_rest_doc,
"pool_rest()\n--\n\n"
"Idle pool workers that are polling for the next job sleep now (before a threaded BLAS\n"
"product, whose own threads want the cores).");

static PyObject *pool_rest(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    dfg_pool_rest();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"pool_rest", pool_rest, METH_NOARGS, pool_rest_doc},
    {"pool_spin", pool_spin, METH_VARARGS, pool_spin_doc},
    {"recurrent_f32", recurrent_f32, METH_VARARGS, recurrent_doc},
    {"erf_f32", erf_f32, METH_VARARGS, erf_doc},
    {"softmax_f32", softmax_f32, METH_VARARGS, softmax_doc},
    {"row_sum_f32", row_sum_f32, METH_VARARGS, row_sum_doc},
    {"mid_sum_f32", mid_sum_f32, METH_VARARGS, mid_sum_doc},
    {"activation_f32", activation_f32, METH_VARARGS, activation_doc},
    {"chain_f32", chain_f32, METH_VARARGS, chain_doc},
    {"concat_rows", concat_rows, METH_VARARGS, concat_doc},
    {"conv2d_nhwc_f32", conv2d_nhwc_f32, METH_VARARGS, conv_doc},
    {"depthwise_nhwc_f32", depthwise_nhwc_f32, METH_VARARGS, depthwise_doc},
    {"maxpool_nhwc_f32", maxpool_nhwc_f32, METH_VARARGS, maxpool_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native",
    "dfg's compiled kernels (see dfg.executor.kernels._native, which wraps them)",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    /* DFG_POOL_SPIN_US: the idle workers' poll before they sleep (threadpool.c) */
    const char *spin = getenv("DFG_POOL_SPIN_US");
    if (spin && *spin) {
        char *end;
        long us = strtol(spin, &end, 10);
        if (*end == '\0' && us >= 0 && us <= 1000000)
            dfg_pool_spin(us);
    }
    PyObject *m = PyModule_Create(&native_module);
    if (m && (PyModule_AddIntConstant(m, "VW", DFG_VW) < 0
              || PyModule_AddIntConstant(m, "ACT_NONE", DFG_ACT_NONE) < 0
              || PyModule_AddIntConstant(m, "ACT_RELU", DFG_ACT_RELU) < 0
              || PyModule_AddIntConstant(m, "ACT_RELU6", DFG_ACT_RELU6) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
