/* dfg's compiled kernels: every C function one source file defines and another calls, declared
 * once. module.c is the Python interface (dfg.executor._native); conv.c, elementwise.c and
 * threadpool.c are plain C with no Python in them (tests/test_native.py builds them for one
 * instruction set at a time). */
#ifndef DFG_NATIVE_H
#define DFG_NATIVE_H

/* threadpool.c: run fn(args, r0, r1) over [0, rows) in `chunks` pieces on up to `threads`
 * threads, the caller one of them. Returns 0, or a piece's nonzero return. */
typedef int (*dfg_range_fn)(const void *args, long r0, long r1);
int dfg_pool_run(dfg_range_fn fn, const void *args, long rows, long chunks, int threads);
long dfg_pool_spin(long us);
void dfg_pool_rest(void);   /* polling workers sleep now */

/* conv.c: direct float32 NHWC convolutions (the layouts are described there), over all
 * N * OH output rows split on the pool. conv2d returns 0, or -1 when out of memory. */
/* the fused ops' activation: 0 none, 1 Relu, 2 Relu6 (a select), and 3 Sigmoid, 4 Tanh,
 * 5 Swish (x * sigmoid(x)), which the convolutions apply through dfg_act_span_f32 */
enum { DFG_ACT_NONE = 0, DFG_ACT_RELU = 1, DFG_ACT_RELU6 = 2, DFG_ACT_SIGMOID_FN = 3,
       DFG_ACT_TANH_FN = 4, DFG_ACT_SWISH_FN = 5 };
#define DFG_VW 16   /* output channels per vector block of the packed filter */
/* conv2d's "flat" argument: 0 the row kernel, 1 the flat product (AVX-512, whole tile
 * columns), DFG_CONV_NARROW the few-channel kernel (at most DFG_NARROW_MAX outputs, no
 * dilation; its wb is the filter as (OC, KH, KW * C), in a buffer of the packed size) */
#define DFG_CONV_NARROW 2
#define DFG_NARROW_MAX 4

int dfg_conv2d_nhwc_f32_mt(const float *x, const float *wb, float *out,
                           long H, long W, long C, long KH, long KW, long OC, long OH, long OW,
                           long sh, long sw, long dh, long dw, long pt, long pl,
                           const float *scale, const float *shift, const float *res, int act,
                           long rows, long chunks, int threads, int flat);
int dfg_depthwise_nhwc_f32_mt(const float *x, const float *f, float *out, long H, long W,
                              long C, long KH, long KW, long OH, long OW, long sh, long sw,
                              long dh, long dw, long pt, long pl, const float *scale,
                              const float *shift, int act, long rows, long chunks, int threads);
/* avg: AvgPool's average over each window's real elements instead of MaxPool's fold */
int dfg_maxpool_nhwc_f32_mt(const float *x, float *out, long H, long W, long C, long KH,
                            long KW, long OH, long OW, long sh, long sw, long pt, long pl,
                            long rows, long chunks, int threads, int avg);

/* elementwise.c */
void dfg_erf_f32(const float *x, float *out, long n, int complement);
void dfg_softmax_f32(const float *x, float *out, long rows, long cols, int as_log);
/* the two above with their blocks of DFG_ACT_BLOCK elements (erf) or their rows (softmax)
 * split in `chunks` pieces on up to `threads` threads */
void dfg_erf_f32_mt(const float *x, float *out, long n, int complement, long chunks,
                    int threads);
void dfg_softmax_f32_mt(const float *x, float *out, long rows, long cols, int as_log,
                        long chunks, int threads);
/* out[i] = sigmoid(x[i]) or tanh(x[i]) for i in [0, n) (x == out allowed), the n elements
 * in blocks of DFG_ACT_BLOCK split in `chunks` pieces on up to `threads` threads */
enum { DFG_ACT_SIGMOID = 0, DFG_ACT_TANH = 1 };
#define DFG_ACT_BLOCK 4096
void dfg_activation_f32(const float *x, float *out, long n, int kind, long chunks,
                        int threads);
/* o[i] = act(o[i]) for i in [0, n), act one of DFG_ACT_SIGMOID_FN, DFG_ACT_TANH_FN and
 * DFG_ACT_SWISH_FN: the Sigmoid and Tanh kernels' own functions, and x times the sigmoid
 * rounded to float32 (as the numpy path multiplies them) */
void dfg_act_span_f32(float *o, long n, int act);

/* a chain of float32 elementwise ops (elementwise.c): the op codes, the input kinds, and
 * the limits module.c checks before the call */
enum { DFG_CH_ADD = 0, DFG_CH_SUB, DFG_CH_MUL, DFG_CH_DIV, DFG_CH_SQDIFF, DFG_CH_NEG,
       DFG_CH_ABS, DFG_CH_SQUARE, DFG_CH_RECIP, DFG_CH_SQRT, DFG_CH_RSQRT, DFG_CH_SIGMOID,
       DFG_CH_TANH, DFG_CH_RELU, DFG_CH_RELU6, DFG_CH_LEAKY, DFG_CH_N_OPS };
/* DFG_CH_LEAKY(x, alpha): max(x, x * alpha), LeakyRelu for 0 < alpha <= 1 (binary: alpha
 * is its second operand, one scalar) */
/* out[r] = the sum of row r of x (rows x cols), in numpy's order (elementwise.c) */
void dfg_row_sum_f32(const float *x, float *out, long rows, long cols);
/* out (outer x inner) = the sums of x (outer x mid x inner) over its middle axis in numpy's
 * order, each divided by `count` when it is above 0 (elementwise.c) */
void dfg_mid_sum_f32(const float *x, float *out, long outer, long mid, long inner,
                     long count);
/* an input of the chain: full (rows x cols), a row broadcast down the rows, one scalar, a
 * column (one value per row, broadcast along it: a layer norm's mean), or a row per group of
 * `stride` consecutive rows (an image's channels broadcast over its pixels: a squeeze-excite
 * gate of shape (N, 1, 1, C) against (N, H, W, C)) */
enum { DFG_CH_IN_FULL = 0, DFG_CH_IN_ROW = 1, DFG_CH_IN_SCALAR = 2, DFG_CH_IN_COL = 3,
       DFG_CH_IN_GROUP = 4 };
#define DFG_CHAIN_MAX_OPS 32
#define DFG_CHAIN_MAX_IN 32
#define DFG_CHAIN_MAX_EXTRA 4
/* out (rows x cols) = the program `code` (n_ops triples: op, operand, operand or -1) of the
 * n_in inputs `in` of kinds `kind`, each read from its `offset` (a full one's rows `stride`
 * floats apart); extra_out[e] (rows x cols) = op extra_op[e]'s result, for n_extra of them;
 * module.c has checked every code and length */
void dfg_chain_f32(const float *const *in, const int *kind, const long *offset,
                   const long *stride, int n_in, const int *code, int n_ops, float *out,
                   long rows, long cols, int n_extra, const int *extra_op,
                   float *const *extra_out);
/* dfg_chain_f32 over its rows split in `chunks` pieces on up to `threads` threads (one
 * thread for a chain with a row-per-group input) */
/* elementwise.c: out's row o of `outer` is each of the n values' row o (row[j] bytes) in
 * turn; split by rows on the pool with chunks and threads > 1. */
void dfg_concat_rows_mt(const char *const *src, const long *row, int n, char *dst, long outer,
                        long chunks, int threads);
void dfg_chain_f32_mt(const float *const *in, const int *kind, const long *offset,
                      const long *stride, int n_in, const int *code, int n_ops, float *out,
                      long rows, long cols, int n_extra, const int *extra_op,
                      float *const *extra_out, long chunks, int threads);

/* recurrent.c: n iterations of a recurrent cell (see there). A chain input's role: one of
 * these, or k >= 0 for state k's current value. module.c checked every length. */
enum { DFG_RC_FIXED = -1, DFG_RC_ROW = -2, DFG_RC_PRODUCT = -3 };
#define DFG_RECURRENT_MAX_STATES 8
struct dfg_recurrent {
    const float *const *rows_in;  /* the input row of each iteration */
    const float *wb;              /* the recurrent matrix, packed (conv.c's layout) */
    const long *geometry;         /* the product's: conv2d_nhwc_f32's 15 numbers */
    float *product;               /* the product's output, reused each iteration */
    int mm_state;                 /* the state the product multiplies */
    int n_in;                     /* the chain's inputs: role, kind, offset, stride each */
    const int *role, *kind;
    const long *offset, *stride;
    const float *const *fixed;    /* a fixed input's buffer (by input index) */
    const int *code;
    int n_ops, n_extra;
    const int *extra_op;
    long rows, cols;
    const int *out_state;         /* per output (extra ones, then the last): its state, -1 */
    int item_out;                 /* the output written to the iteration's output row */
    float *items;                 /* n output rows of item_len floats */
    long item_len;
    int n_states;
    const float *const *init;     /* each state's first value (never written) */
    float *const *scratch_a, *const *scratch_b;
    int *final_where;             /* out: 0 init, 1 scratch_a, 2 scratch_b, 3 the last row */
    /* a masked layer (Keras's mask_zero): NULL, or each iteration's mask (rows bytes), and
     * then each state's next value is chosen row by row, as the layer's Select does: its
     * chain output state_src[s] where the row's mask is set (everywhere when !state_sel[s]),
     * else its own current value. The chain's outputs go to tmp (n_extra + 1 buffers of rows
     * x cols, in the chain's order), out_state and item_out are unused, and the output row
     * is state item_state's new value. */
    const unsigned char *const *masks;
    const int *state_src, *state_sel;
    int item_state;
    float *const *tmp;
};
int dfg_recurrent_f32(const struct dfg_recurrent *r, long n);

#endif
