/* dfg's native elementwise kernels: erf and erfc, sigmoid and tanh of float32 in one pass.
 *
 * Why: numpy evaluates erfc as about twenty whole-array passes (a polynomial by Horner's
 * rule, two exps, the selects), 0.7 ms on 131k floats, and exact GELU (Keras, ConvNeXt,
 * BERT) calls it once per activation. One pass that keeps every intermediate in registers
 * costs a tenth of that.
 *
 * The formula is the numpy path's (executor/kernels/math.py): erfc(a) = t exp(-a^2 + P(t)),
 * t = 1 / (1 + a/2), with Numerical Recipes' Chebyshev fit P (fractional error below 1.2e-7),
 * and erf's Taylor series below 0.5. Here it runs in double precision, so a^2 is exact and
 * no splitting of the exponent is needed; the result is rounded to float32 once.
 *
 * exp is computed here (not libm's) so the loop vectorizes: n = round(x / ln 2) by the
 * 1.5 * 2^52 shift, r = x - n ln 2 in two parts, e^r by its Taylor series to r^11 (|r| <=
 * 0.35: relative error below 1e-12), times 2^n built from the exponent bits. Arguments stay
 * within [-125, 1], far inside double's normal range.
 */
#include <stdint.h>
#include <string.h>

#include "native.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DFG_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

static const double ERFC_CHEB[10] = {
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
    0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};

/* e^r - 1 = r (1 + r/2! + r^2/3! + ... + r^10/11!), by Horner's rule: no cancellation near
 * 0. For |r| <= 0.6 the first term left out, r^12/12!, is below 5e-12 of the sum. */
static inline double expm1_taylor(double r) {
    double p = 1.0 / 39916800;
    p = p * r + 1.0 / 3628800;
    p = p * r + 1.0 / 362880;
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1.0;
    return p * r;
}

/* x = n ln2 + r with |r| <= ln2 / 2: returns e^r - 1, and n and 2^n through the pointers */
static inline double exp_reduced(double x, double *n_out, double *scale_out) {
    const double shift = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    double k = x * 1.4426950408889634 + shift;
    int64_t kb;
    memcpy(&kb, &k, sizeof kb);
    double n = k - shift;
    double r = x - n * 0.6931471805598903 - n * 5.497923018708371e-14;
    /* the low 32 bits of k's mantissa hold n (two's complement); 2^n = (n + 1023) << 52 */
    int64_t eb = ((int64_t)(int32_t)kb + 1023) << 52;
    memcpy(scale_out, &eb, sizeof *scale_out);
    *n_out = n;
    return expm1_taylor(r);
}

static inline double exp_small(double x) {
    double n, scale;
    double p = 1.0 + exp_reduced(x, &n, &scale);
    return p * scale;
}

/* erfc(a) for a in [0, 11] (erfc(11) is 0 in float32) */
static inline double erfc_pos(double a) {
    double t = 1.0 / (1.0 + 0.5 * a);
    double p = ERFC_CHEB[9];
    for (int k = 8; k >= 0; k--)
        p = p * t + ERFC_CHEB[k];
    return t * exp_small(p - a * a);
}

/* erf's Taylor series: 2/sqrt(pi) sum_k (-1)^k a^(2k+1) / (k! (2k+1)), 8 terms: below 1e-12
 * for a < 0.5 */
static inline double erf_taylor(double a) {
    double s = a * a;
    double p = -1.4925650358406251e-05;
    p = p * s + 0.00012055332981789664;
    p = p * s - 0.0008548327023450852;
    p = p * s + 0.005223977625442188;
    p = p * s - 0.026866170645131252;
    p = p * s + 0.11283791670955126;
    p = p * s - 0.37612638903183754;
    p = p * s + 1.1283791670955126;
    return a * p;
}

/* |x| in double, at most 11; NaN becomes 11 here and is put back by the caller */
static inline double abs11(float xf) {
    double a = __builtin_fabs((double)xf);
    return a < 11.0 ? a : 11.0;
}

/* out[i] = erfc(x[i]) when complement, else erf(x[i]), for i in [0, n). NaN stays NaN.
 * Two loops without branches, so each vectorizes. */
CLONES
void dfg_erf_f32(const float *x, float *out, long n, int complement) {
    if (complement) {
        for (long i = 0; i < n; i++) {
            float xf = x[i];
            double r = erfc_pos(abs11(xf));
            float res = (float)(xf < 0 ? 2.0 - r : r);
            out[i] = xf != xf ? xf : res;
        }
    } else {
        for (long i = 0; i < n; i++) {
            float xf = x[i];
            double a = abs11(xf);
            double e = a < 0.5 ? erf_taylor(a) : 1.0 - erfc_pos(a);
            /* copysign keeps erf(-0.0) = -0.0 and puts back erf's sign */
            float res = __builtin_copysignf((float)e, xf);
            out[i] = xf != xf ? xf : res;
        }
    }
}

/* Softmax (log_softmax when `as_log`) of each row of a (rows, cols) float32 array, in one
 * sweep per row while the row sits in L1 (numpy makes five whole-array passes). As
 * TensorFlow: subtract the row's max, exponentiate, scale
 * by the sum; here the exps and the sum are in double and each output is rounded once.
 * exp_small needs arguments above -708: below -200 the float32 result is 0 either way. */
#define LANES 16

CLONES
void dfg_softmax_f32(const float *x, float *out, long rows, long cols, int as_log) {
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = out + r * cols;
        /* The row's max. A NaN anywhere need not be looked for: its exp is NaN, so the
         * sum is, and with it every output of the row (as in TensorFlow). LANES running
         * maxima: one was a chain of dependent compare-selects that GCC cannot vectorize
         * (max is not associative for it): 131k floats in rows of 16k, 190 -> 135 us. */
        float pm[LANES];
        long i;
        for (int j = 0; j < LANES; j++)
            pm[j] = xr[0];
        for (i = 0; i + LANES <= cols; i += LANES)
            for (int j = 0; j < LANES; j++)
                pm[j] = xr[i + j] > pm[j] ? xr[i + j] : pm[j];
        for (; i < cols; i++)
            pm[0] = xr[i] > pm[0] ? xr[i] : pm[0];
        float m = pm[0];
        for (int j = 1; j < LANES; j++)
            m = pm[j] > m ? pm[j] : m;
        /* exps into the output (float; a loop without a reduction vectorizes), then
         * summed in double in LANES partial sums */
        double md = m;
        for (i = 0; i < cols; i++) {
            double d = (double)xr[i] - md;   /* inf - inf is NaN, as in TensorFlow */
            d = d < -200.0 ? -200.0 : d;
            yr[i] = (float)exp_small(d);
        }
        double ps[LANES] = {0};
        i = 0;
        for (; i + LANES <= cols; i += LANES)
            for (int j = 0; j < LANES; j++)
                ps[j] += yr[i + j];
        for (; i < cols; i++)
            ps[0] += yr[i];
        double s = 0;
        for (int j = 0; j < LANES; j++)
            s += ps[j];
        if (as_log) {
            double ls = __builtin_log(s);
            for (i = 0; i < cols; i++)
                yr[i] = (float)(((double)xr[i] - (double)m) - ls);
        } else {
            float inv = (float)(1.0 / s);   /* TensorFlow scales by the sum's reciprocal */
            for (i = 0; i < cols; i++)
                yr[i] *= inv;
        }
    }
}

/* Sigmoid and tanh of float32, in float32 arithmetic, within 2 ulps of the exact value
 * (checked against float64 over every 97th float32 bit pattern of [-110, 110]; TensorFlow's
 * own float32 sigmoid and tanh are approximations of that order too).
 *
 * Why: numpy's float32 sigmoid is four whole-array passes (negate, exp, add, reciprocal)
 * and its tanh is not vectorized (11 us on a 16 x 64 gate); an LSTM step calls three
 * sigmoids and two tanhs on such gates, a GRU's two and one. In double precision, rounded
 * once, these took 1.9 and 2.2 ns an element on an AVX2 EPYC, the most of an LSTM cell's
 * elementwise chains; in float32, eight to a vector, 0.75 and 1.2.
 *
 * Both use e = e^-a for a = |x| in [0, 104] (exp_neg_f32: never overflows; below about
 * -87.3 its scaling by 2^n in two halves gives the subnormals): sigmoid(x) = 1 / (1 + e)
 * for x >= 0, e / (1 + e) below; tanh(|x|) = (1 - e') / (1 + e') with e' = e^-2|x| from
 * 0.625 on (tanh is 1 in float32 from 9.01: |x| held to 9), and below 0.625 Cephes's odd
 * polynomial x + x z P(z), z = x^2 (no cancellation near 0, full relative precision down
 * to subnormals), the sign put back by copysign, so tanh(-0.0) = -0.0. NaN stays NaN. Both
 * sides of each select are computed branch-free, so the loops vectorize. */
static inline float exp_neg_f32(float a) {
    const float shift = 12582912.0f;              /* 1.5 * 2^23: adding it rounds to an integer */
    float k = -a * 1.44269504088896341f + shift;
    int32_t kb;
    memcpy(&kb, &k, sizeof kb);
    float n = k - shift;
    float r = -a - n * 0.693359375f - n * -2.12194440e-4f;   /* Cody-Waite: ln2 in two parts */
    /* Cephes expf: e^r = 1 + r + r^2 P(r), |r| <= ln2 / 2 */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.0f;
    /* 2^n (n >= -151) as two powers of two, each a normal float */
    int32_t ni = kb - 0x4B400000, h = ni / 2;
    int32_t b1 = (h + 127) << 23, b2 = (ni - h + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return e * s1 * s2;
}

static inline float sigmoid1(float x) {
    float a = __builtin_fabsf(x);
    a = a < 104.0f ? a : 104.0f;          /* NaN becomes 104 here and is put back below */
    float e = exp_neg_f32(a);
    float r = (x >= 0.0f ? 1.0f : e) / (1.0f + e);
    return x != x ? x : r;
}

static inline float tanh1(float x) {
    float a = __builtin_fabsf(x);
    a = a < 9.0f ? a : 9.0f;              /* NaN becomes 9 here and is put back below */
    float z = a * a;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = a + a * z * p;
    float e = exp_neg_f32(2.0f * a);
    float big = (1.0f - e) / (1.0f + e);
    float r = __builtin_copysignf(a < 0.625f ? small : big, x);
    return x != x ? x : r;
}

CLONES
static void sigmoid_span(const float *x, float *out, long n) {
    for (long i = 0; i < n; i++)
        out[i] = sigmoid1(x[i]);
}

CLONES
static void tanh_span(const float *x, float *out, long n) {
    for (long i = 0; i < n; i++)
        out[i] = tanh1(x[i]);
}


CLONES
static void swish_span(float *o, long n) {
    for (long i = 0; i < n; i++) {
        float y = o[i];
        o[i] = y * sigmoid1(y);
    }
}

void dfg_act_span_f32(float *o, long n, int act) {
    if (act == DFG_ACT_SIGMOID_FN)
        sigmoid_span(o, o, n);
    else if (act == DFG_ACT_TANH_FN)
        tanh_span(o, o, n);
    else if (act == DFG_ACT_SWISH_FN)
        swish_span(o, n);
}

/* A kernel fn(x, out, n, width, kind) over n elements in rows of `width` (the pool's rows:
 * blocks of DFG_ACT_BLOCK for an elementwise kernel, a softmax's own rows), split in
 * `chunks` pieces on up to `threads` threads: each element's value is computed as on one
 * thread, so any split gives the same bits. */
typedef void (*span_fn)(const float *x, float *out, long n, long width, int kind);

struct span_args {
    span_fn fn;
    const float *x;
    float *out;
    long n, width;
    int kind;
};

static int span_range(const void *p, long r0, long r1) {
    const struct span_args *a = p;
    long i0 = r0 * a->width, i1 = r1 * a->width;
    i1 = i1 < a->n ? i1 : a->n;
    a->fn(a->x + i0, a->out + i0, i1 - i0, a->width, a->kind);
    return 0;
}

static void run_spans(span_fn fn, const float *x, float *out, long n, long width, int kind,
                      long chunks, int threads) {
    struct span_args a = {fn, x, out, n, width, kind};
    long rows = (n + width - 1) / width;
    if (rows <= 1 || threads <= 1 || chunks <= 1)
        span_range(&a, 0, rows);
    else
        dfg_pool_run(span_range, &a, rows, chunks, threads);
}

static void act_span(const float *x, float *out, long n, long width, int kind) {
    (void)width;
    if (kind == DFG_ACT_SIGMOID)
        sigmoid_span(x, out, n);
    else
        tanh_span(x, out, n);
}

void dfg_activation_f32(const float *x, float *out, long n, int kind, long chunks,
                        int threads) {
    run_spans(act_span, x, out, n, DFG_ACT_BLOCK, kind, chunks, threads);
}

/* A chain of float32 elementwise ops (the _DfgElementwiseChain kernel's program) in one
 * sweep: each block of up to CHAIN_BLOCK elements of a row goes through every op of the
 * program while it sits in L1, where numpy makes one whole-array pass and one call per op.
 *
 * Each op computes exactly what its kernel does in float32: one IEEE operation per element
 * (+, -, *, /, sqrt are correctly rounded, so the bits equal numpy's; Rsqrt is 1/sqrt(x) and
 * SquaredDifference (x-y)*(x-y), two roundings each, as the numpy path computes them),
 * sigmoid/tanh are sigmoid1/tanh1, the Sigmoid and Tanh kernels' own functions, and
 * Relu/Relu6 the kernels' np.maximum(x, 0) and np.minimum(., 6) (NaN kept, -0 as +0). Every
 * op writes its own block of results, so no expression spans two ops (nothing to contract
 * into an FMA). Operand codes: 0..n_in-1 the inputs, n_in + k the k-th op's result.
 * Inputs are full (rows x cols, row r at offset + r * stride: a column block of a wider
 * array is read where it lies), a row (cols at offset, broadcast down the rows), one
 * scalar (at offset), a column (row r's value at offset + r, broadcast along the row) or a
 * row per group (row r reads the row at offset + (r / stride) * cols). Ops extra_op[e]
 * (before the last) are outputs too: each block of their results is copied into
 * extra_out[e] (rows x cols) while it is in L1 (an LSTM cell's new state and its output,
 * one sweep). */
#define CHAIN_BLOCK 256

/* inlined into each clone of dfg_chain_f32 (a call would run the baseline build) */
static inline __attribute__((always_inline))
void chain_op(int op, const float *a, const float *b, float *r, long n) {
    long i;
    switch (op) {
    case DFG_CH_ADD: for (i = 0; i < n; i++) r[i] = a[i] + b[i]; break;
    case DFG_CH_SUB: for (i = 0; i < n; i++) r[i] = a[i] - b[i]; break;
    case DFG_CH_MUL: for (i = 0; i < n; i++) r[i] = a[i] * b[i]; break;
    case DFG_CH_DIV: for (i = 0; i < n; i++) r[i] = a[i] / b[i]; break;
    case DFG_CH_SQDIFF:
        for (i = 0; i < n; i++) {
            float d = a[i] - b[i];
            r[i] = d * d;
        }
        break;
    case DFG_CH_NEG: for (i = 0; i < n; i++) r[i] = -a[i]; break;
    case DFG_CH_ABS: for (i = 0; i < n; i++) r[i] = __builtin_fabsf(a[i]); break;
    case DFG_CH_SQUARE: for (i = 0; i < n; i++) r[i] = a[i] * a[i]; break;
    case DFG_CH_RECIP: for (i = 0; i < n; i++) r[i] = 1.0f / a[i]; break;
    case DFG_CH_SQRT: for (i = 0; i < n; i++) r[i] = __builtin_sqrtf(a[i]); break;
    case DFG_CH_RSQRT:
        for (i = 0; i < n; i++) {
            float s = __builtin_sqrtf(a[i]);
            r[i] = 1.0f / s;
        }
        break;
    case DFG_CH_SIGMOID: for (i = 0; i < n; i++) r[i] = sigmoid1(a[i]); break;
    case DFG_CH_TANH: for (i = 0; i < n; i++) r[i] = tanh1(a[i]); break;
    /* numpy's maximum(x, 0) and then minimum(., 6): NaN kept, -0 becomes +0 */
    case DFG_CH_RELU:
        for (i = 0; i < n; i++)
            r[i] = a[i] > 0.0f || a[i] != a[i] ? a[i] : 0.0f;
        break;
    case DFG_CH_RELU6:
        for (i = 0; i < n; i++) {
            float t = a[i] > 0.0f || a[i] != a[i] ? a[i] : 0.0f;
            r[i] = t < 6.0f || t != t ? t : 6.0f;
        }
        break;
    /* LeakyRelu's max(x, x * alpha) (nn.leaky_relu_into: 0 < alpha <= 1): NaN kept (x * alpha
     * is NaN too), -0.0 stays -0.0 */
    case DFG_CH_LEAKY:
        for (i = 0; i < n; i++) {
            float t = a[i] * b[i];
            r[i] = a[i] > t ? a[i] : t;
        }
        break;
    default: break;
    }
}

CLONES
void dfg_chain_f32(const float *const *in, const int *kind, const long *offset,
                   const long *stride, int n_in, const int *code, int n_ops, float *out,
                   long rows, long cols, int n_extra, const int *extra_op,
                   float *const *extra_out) {
    /* 32 ops and 32 scalars of 256 floats: 64 KB of stack */
    float buf[DFG_CHAIN_MAX_OPS][CHAIN_BLOCK];
    float sc[DFG_CHAIN_MAX_IN][CHAIN_BLOCK];
    const float *src[DFG_CHAIN_MAX_IN + DFG_CHAIN_MAX_OPS];
    for (int j = 0; j < n_in; j++)
        if (kind[j] == DFG_CH_IN_SCALAR)
            for (int i = 0; i < CHAIN_BLOCK; i++)
                sc[j][i] = in[j][offset[j]];
    /* Rows shorter than a block, with every full input's rows back to back, go several to a
     * block (a broadcast row repeated along it): one block per row of a few vectors paid
     * each op's loop set-up per row (a (2,4,4,128) batch norm and ReLU took 2.2 us) */
    long per = cols < CHAIN_BLOCK ? CHAIN_BLOCK / cols : 1;
    for (int j = 0; j < n_in && per > 1; j++)
        if (kind[j] == DFG_CH_IN_FULL && stride[j] != cols)
            per = 1;
    if (per > 1) {
        for (int j = 0; j < n_in; j++)
            if (kind[j] == DFG_CH_IN_ROW)
                for (long r = 0; r < per; r++)
                    memcpy(sc[j] + r * cols, in[j] + offset[j], (size_t)cols * sizeof(float));
        for (long row = 0; row < rows; row += per) {
            long m = rows - row < per ? rows - row : per, n = m * cols;
            for (int j = 0; j < n_in; j++) {
                src[j] = kind[j] == DFG_CH_IN_FULL ? in[j] + offset[j] + row * cols : sc[j];
                if (kind[j] == DFG_CH_IN_GROUP)
                    for (long r = 0; r < m; r++)
                        memcpy(sc[j] + r * cols, in[j] + offset[j] + (row + r) / stride[j] * cols,
                               (size_t)cols * sizeof(float));
                if (kind[j] == DFG_CH_IN_COL)
                    for (long r = 0; r < m; r++)
                        for (long i = 0; i < cols; i++)
                            sc[j][r * cols + i] = in[j][offset[j] + row + r];
            }
            for (int k = 0; k < n_ops; k++) {
                const int *c = code + 3 * k;
                float *r = k == n_ops - 1 ? out + row * cols : buf[k];
                chain_op(c[0], src[c[1]], c[2] >= 0 ? src[c[2]] : NULL, r, n);
                src[n_in + k] = r;
            }
            for (int e = 0; e < n_extra; e++)
                memcpy(extra_out[e] + row * cols, src[n_in + extra_op[e]],
                       (size_t)n * sizeof(float));
        }
        return;
    }
    for (long row = 0; row < rows; row++) {
        for (long c0 = 0; c0 < cols; c0 += CHAIN_BLOCK) {
            long n = cols - c0 < CHAIN_BLOCK ? cols - c0 : CHAIN_BLOCK;
            for (int j = 0; j < n_in; j++) {
                src[j] = kind[j] == DFG_CH_IN_FULL ? in[j] + offset[j] + row * stride[j] + c0
                         : kind[j] == DFG_CH_IN_ROW ? in[j] + offset[j] + c0
                         : kind[j] == DFG_CH_IN_GROUP ? in[j] + offset[j] + row / stride[j] * cols + c0
                         : sc[j];
                if (kind[j] == DFG_CH_IN_COL && c0 == 0)
                    for (int i = 0; i < CHAIN_BLOCK; i++)
                        sc[j][i] = in[j][offset[j] + row];
            }
            for (int k = 0; k < n_ops; k++) {
                const int *c = code + 3 * k;
                /* the last op writes straight into the output */
                float *r = k == n_ops - 1 ? out + row * cols + c0 : buf[k];
                chain_op(c[0], src[c[1]], c[2] >= 0 ? src[c[2]] : NULL, r, n);
                src[n_in + k] = r;
            }
            for (int e = 0; e < n_extra; e++)
                memcpy(extra_out[e] + row * cols + c0, src[n_in + extra_op[e]],
                       (size_t)n * sizeof(float));
        }
    }
}

/* dfg_chain_f32 with its rows split on the pool: each element goes through the same ops
 * whatever rows share its block, so any split gives the same bits. A row per group of rows
 * reads by the row's own index: such a chain runs on one thread. */
struct chain_args {
    const float *const *in;
    const int *kind;
    const long *offset, *stride;
    int n_in;
    const int *code;
    int n_ops;
    float *out;
    long cols;
    int n_extra;
    const int *extra_op;
    float *const *extra_out;
};

static int chain_range(const void *p, long r0, long r1) {
    const struct chain_args *a = p;
    const float *in[DFG_CHAIN_MAX_IN];
    float *extra[DFG_CHAIN_MAX_EXTRA];
    for (int j = 0; j < a->n_in; j++)
        in[j] = a->kind[j] == DFG_CH_IN_FULL ? a->in[j] + r0 * a->stride[j]
                : a->kind[j] == DFG_CH_IN_COL ? a->in[j] + r0 : a->in[j];
    for (int e = 0; e < a->n_extra; e++)
        extra[e] = a->extra_out[e] + r0 * a->cols;
    dfg_chain_f32(in, a->kind, a->offset, a->stride, a->n_in, a->code, a->n_ops,
                  a->out + r0 * a->cols, r1 - r0, a->cols, a->n_extra, a->extra_op, extra);
    return 0;
}

void dfg_chain_f32_mt(const float *const *in, const int *kind, const long *offset,
                      const long *stride, int n_in, const int *code, int n_ops, float *out,
                      long rows, long cols, int n_extra, const int *extra_op,
                      float *const *extra_out, long chunks, int threads) {
    struct chain_args a = {in, kind, offset, stride, n_in, code, n_ops, out, cols, n_extra,
                           extra_op, extra_out};
    int split = rows > 1 && threads > 1 && chunks > 1;
    for (int j = 0; j < n_in && split; j++)
        split = kind[j] != DFG_CH_IN_GROUP;
    if (split)
        dfg_pool_run(chain_range, &a, rows, chunks < rows ? chunks : rows, threads);
    else
        chain_range(&a, 0, rows);
}

/* ConcatV2/Pack's row copy: out's row o is each value's row o in turn. A row of a few vectors
 * (a U-Net's 16-channel join: 64 bytes) is copied 16 bytes at a time inline, not by a memcpy
 * call per row; a large copy is split by rows on the pool (memory-bound: two cores copy
 * about twice as fast as one). */
struct concat_args {
    const char *const *src;
    const long *row;
    int n;
    char *dst;
    long out_row;
};

static void copy_row(char *d, const char *s, long len) {
    if (len <= 256 && (len & 15) == 0) {
        for (long i = 0; i < len; i += 16)
            __builtin_memcpy(d + i, s + i, 16);
    } else {
        memcpy(d, s, (size_t)len);
    }
}

static int concat_range(const void *p, long o0, long o1) {
    const struct concat_args *a = p;
    for (long o = o0; o < o1; o++) {
        char *d = a->dst + o * a->out_row;
        for (int j = 0; j < a->n; j++) {
            copy_row(d, a->src[j] + o * a->row[j], a->row[j]);
            d += a->row[j];
        }
    }
    return 0;
}

void dfg_concat_rows_mt(const char *const *src, const long *row, int n, char *dst, long outer,
                        long chunks, int threads) {
    long out_row = 0;
    for (int j = 0; j < n; j++)
        out_row += row[j];
    struct concat_args a = {src, row, n, dst, out_row};
    if (outer > 1 && threads > 1 && chunks > 1)
        dfg_pool_run(concat_range, &a, outer, chunks < outer ? chunks : outer, threads);
    else
        concat_range(&a, 0, outer);
}

/* erf/erfc and softmax over dfg's native pool (threadpool.c), through run_spans: erf's rows
 * are blocks of DFG_ACT_BLOCK elements, softmax's its own rows. */
static void erf_span(const float *x, float *out, long n, long width, int complement) {
    (void)width;
    dfg_erf_f32(x, out, n, complement);
}

void dfg_erf_f32_mt(const float *x, float *out, long n, int complement, long chunks,
                    int threads) {
    run_spans(erf_span, x, out, n, DFG_ACT_BLOCK, complement, chunks, threads);
}

static void softmax_span(const float *x, float *out, long n, long cols, int as_log) {
    dfg_softmax_f32(x, out, n / cols, cols, as_log);
}

void dfg_softmax_f32_mt(const float *x, float *out, long rows, long cols, int as_log,
                        long chunks, int threads) {
    run_spans(softmax_span, x, out, rows * cols, cols, as_log, chunks, threads);
}

/* The sum of each row of a (rows, cols) float32 array, as numpy's add.reduce over the last
 * axis computes it: 0 + its pairwise sum in float32 (numpy's FLOAT_pairwise_sum: below 8
 * values one after the other; up to 128, eight running sums over every eighth value, joined
 * as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest one after the other;
 * above, the halves, split at a multiple of 8). The same additions in the same order give
 * the same bits; _native.py checks that against numpy once before using it. A layer norm's
 * mean over 64 channels was numpy's reduction loop set up per row (18 us for 512 rows).
 * No expression multiplies, so nothing contracts into an FMA. */
static float pairwise_f32(const float *a, long n) {
    if (n < 8) {
        float res = 0.0f;
        for (long i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        float r[8];
        long i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    long n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_f32(a, n2) + pairwise_f32(a + n2, n - n2);
}

CLONES
void dfg_row_sum_f32(const float *x, float *out, long rows, long cols) {
    for (long r = 0; r < rows; r++)
        out[r] = 0.0f + pairwise_f32(x + r * cols, cols);
}

/* The sums over the middle axis of a (outer, mid, inner) float32 array, as numpy's
 * add.reduce over axes that are not the last computes them when the inner axis is what it
 * loops over: each of the outer x inner outputs starts from 0 (so -0.0 sums to +0.0) and
 * adds the values one after the other, in order (no pairwise sum: the reduced values of one
 * output are `inner` floats apart). Then, when `count` > 0, each sum divided by it (a mean: one
 * IEEE division, as numpy's true_divide). _native.py checks the bits against numpy once
 * before using it. A squeeze-excite gate's global average pool was numpy's reduction set up
 * per call (5 us on (2,8,8,96)). */
CLONES
void dfg_mid_sum_f32(const float *x, float *out, long outer, long mid, long inner,
                     long count) {
    for (long o = 0; o < outer; o++) {
        const float *xo = x + o * mid * inner;
        float *r = out + o * inner;
        long c0 = 0;
        /* blocks of 8 outputs summed in registers down the whole middle axis (a loop over
         * a short row of unknown length was 12 ns per row of 8: (2,16,16,8) took 6 us) */
        for (; c0 + 8 <= inner; c0 += 8) {
            float a[8] = {0};
            for (long m = 0; m < mid; m++) {
                const float *xm = xo + m * inner + c0;
                for (int j = 0; j < 8; j++)
                    a[j] = a[j] + xm[j];
            }
            memcpy(r + c0, a, sizeof a);
        }
        for (long c = c0; c < inner; c++)
            r[c] = 0.0f;
        for (long m = 0; m < mid && c0 < inner; m++) {
            const float *xm = xo + m * inner;
            for (long c = c0; c < inner; c++)
                r[c] = r[c] + xm[c];
        }
        if (count > 0) {
            const float d = (float)count;
            for (long c = 0; c < inner; c++)
                r[c] = r[c] / d;
        }
    }
}
