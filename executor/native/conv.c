/* dfg's native kernels: direct 2-D convolutions for float32 NHWC.
 *
 * Why: numpy runs a convolution as im2col (or per-tap products) plus a BLAS GEMM, and the
 * GEMMs of real CNN layers are skinny (16-64 output channels against K = 9 * C), where
 * OpenBLAS reaches a third to a half of its square-matrix speed. This kernel keeps an
 * 8-pixel x 16-channel block of outputs in vector registers and streams the input and the
 * filter through it, so no patch matrix is built and the inner loop is one broadcast FMA
 * per input value: about 100 GFLOP/s per core on AVX-512, 2-3x the GEMM path on those
 * shapes. With 64 or more output channels on AVX-512 a wide tile of 6 pixels by 64 channels
 * loads four filter vectors and six values for 24 FMAs instead (about 137 GFLOP/s a core). Padding is never materialized for the whole input: each output row copies the
 * few input rows it reads into a zero-padded buffer (rows of padding are skipped).
 * Also here: the depthwise convolution (one filter per channel).
 *
 * Plain C with GCC vector extensions (no intrinsics): the same source compiles anywhere;
 * on x86-64 GCC builds AVX-512, AVX2 and baseline clones picked at load time by the CPU
 * (-DDFG_NO_CLONES builds for -march only: tests/test_native.py checks each clone so).
 * module.c calls the *_mt forms without the GIL; they run disjoint ranges of output rows
 * on dfg's native thread pool (threadpool.c).
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define RB_MAX 8        /* output pixels per block, at most */
#define RT 6            /* output pixels of a wide tile (four channel blocks: AVX-512) */
#define RT2 12          /* output pixels of a pair tile (two channel blocks: AVX-512) */
#define RT3 24          /* output pixels of a long tile (one channel block: AVX-512) */
#define VW DFG_VW       /* output channels per vector */

typedef float vf __attribute__((vector_size(VW * sizeof(float))));
typedef float vfu __attribute__((vector_size(VW * sizeof(float)), aligned(4)));
#define VH (VW / 2)     /* floats per half block */
typedef float vh __attribute__((vector_size(VH * sizeof(float))));
typedef float vhu __attribute__((vector_size(VH * sizeof(float)), aligned(4)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DFG_NO_CLONES)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* out[n, oy, ox, o] = sum_{ky, kx, c} x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c]
 *                                     * w[ky, kx, c, o]   (reads outside x are zero)
 * x: (N, H, W, C); out: (N, OH, OW, OC); wb: the filter packed per block of VW output
 * channels, (ceil(OC / VW), KH, KW, C, VW), zero past OC; all C-contiguous.
 * Then, while the block is in registers, the fused epilogue of _FusedConv2D: out = out *
 * scale + shift (each NULL to skip; both padded to whole blocks of VW), + res (NULL, or an
 * (N, OH, OW, OC) tensor: a residual connection), then act: 0 none, 1 Relu, 2 Relu6 (NaN
 * stays NaN, as TensorFlow's and numpy's max/min keep it).
 * Computes output rows [r0, r1) of the N * OH. Returns 0, or -1 when out of memory.
 *
 * RB, the output pixels of one block, is a constant of each caller: the RB x VW block of
 * accumulators must fit the vector registers with room for the filter vector and the
 * broadcast. AVX-512 has 32 registers of 16 floats: 8 pixels take 8. AVX2 has 16 of 8
 * floats: 8 pixels took all 16 and spilled (half the numpy/BLAS path's speed on an AVX2
 * EPYC); 6 pixels take 12 and leave 3. Each caller inlines this body with its own RB, so
 * the loops over the block unroll and the accumulators stay in registers. */
/* The taps of the output block at (row, ox) inside the input's rows (rows of padding are
 * skipped), with xp the block's first pixel's input at the tap and wk the filter block's
 * tap: BODY runs once per tap, for both block sizes below. */
#define CONV_TAPS(...)                                                           \
    for (long ky = 0; ky < KH; ky++) {                                           \
        const long iy = iy0 + ky * dh;                                           \
        if (iy < 0 || iy >= H) continue;                                         \
        const float *base = rows + (slot[ky] * Wp + ox * sw) * C;                \
        for (long kx = 0; kx < KWR; kx++) {                                      \
            const float *xp = base + kx * dw * C;                                \
            const float *wk = wblock + (ky * KW + kx) * C * VW;                  \
            __VA_ARGS__                                                          \
        }                                                                        \
    }

/* Store nr pixels' accumulators (acc[r]: channels ob.. of pixel r, width of them) at o
 * (pixels OC floats apart) with the fused epilogue, while the block is in registers: scale,
 * shift, residual; then the activation. */
static inline __attribute__((always_inline))
void store_block(float *o, vf *acc, long nr, long width, long ob, long OC, float *out,
                 const float *scale, const float *shift, const float *res, int act)
{
    if (scale || shift || res) {
        const float *rp = res ? res + (o - out) : NULL;
        for (long r = 0; r < nr; r++) {
            vf v = acc[r];
            /* scale and shift in one expression: contracted to an FMA wherever the target
             * has one, whichever path inlined this (as two statements, GCC fused them in
             * the pixel-block path and not in the one-pixel path) */
            if (scale && shift)
                v = v * *(const vfu *)(scale + ob) + *(const vfu *)(shift + ob);
            else if (scale)
                v *= *(const vfu *)(scale + ob);
            else if (shift)
                v += *(const vfu *)(shift + ob);
            if (rp) {
                vf t = {0};
                memcpy(&t, rp + r * OC, width * sizeof(float));
                v += t;
            }
            acc[r] = v;
        }
    }
    for (long r = 0; r < nr; r++) memcpy(o + r * OC, &acc[r], width * sizeof(float));
    /* The activation on the stored block (in L1), as a plain loop GCC vectorizes for each
     * clone's target: written with vector-extension selects it ran several times slower in
     * the AVX-512 clone (measured). As numpy's max/min: 0 where v < 0, 6 where v > 6; NaN
     * and -0.0 stay. */
    if (act >= DFG_ACT_SIGMOID_FN) {
        if (width == OC)    /* the pixels' whole outputs, one after another: one span */
            dfg_act_span_f32(o, nr * OC, act);
        else
            for (long r = 0; r < nr; r++) dfg_act_span_f32(o + r * OC, width, act);
    } else if (act)
        for (long r = 0; r < nr; r++) {
            float *op = o + r * OC;
            for (long j = 0; j < width; j++) {
                float t = op[j] < 0 ? 0.0f : op[j];
                op[j] = act == 2 && t > 6 ? 6.0f : t;
            }
        }
}

/* The pair and long tiles below (AVX-512), spelled once: a tile's pixels as a list (the
 * accumulators stay named variables, which GCC keeps in registers: an array whose address
 * is taken stays in memory). Pixel i of a pair tile has p<i>0 and p<i>1 (its two blocks of
 * VW channels), of a long tile q<i>; xp, xs, c, w0 and w1 are CONV_TAPS's and the body's. */
#define PIXELS8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define PIXELS12(M) PIXELS8(M) M(8) M(9) M(10) M(11)
#define PIXELS24(M) PIXELS12(M) M(12) M(13) M(14) M(15) M(16) M(17) M(18) M(19) M(20) \
    M(21) M(22) M(23)
#define PAIR_DECL(i) vf p##i##0 = {0}, p##i##1 = {0};
#define PAIR_FMA(i) { const float v = xp[(i) * xs + c]; p##i##0 += v * w0; p##i##1 += v * w1; }
#define PAIR_LO(i) acc[i] = p##i##0;
#define PAIR_HI(i) acc[i] = p##i##1;
#define LONG_DECL(i) vf q##i = {0};
#define LONG_FMA(i) q##i += xp[(i) * xs + c] * w0;
#define LONG_GET(i) acc[i] = q##i;
/* One pair tile of NP pixels (PIXELS: their list) at ox: taps, then both blocks stored */
#define PAIR_TILE(PIXELS, NP) do {                                                     \
        const long nr = OW - ox < (NP) ? OW - ox : (NP);                              \
        PIXELS(PAIR_DECL)                                                             \
        CONV_TAPS(for (long c = 0; c < CR; c++) {                                     \
            const float *w = wk + c * VW;                                             \
            const vf w0 = *(const vfu *)w, w1 = *(const vfu *)(w + bs);               \
            PIXELS(PAIR_FMA)                                                          \
        })                                                                            \
        vf acc[NP];                                                                   \
        float *o = orow + ox * OC + ob;                                               \
        PIXELS(PAIR_LO)                                                               \
        store_block(o, acc, nr, VW, ob, OC, out, scale, shift, res, act);             \
        PIXELS(PAIR_HI)                                                               \
        store_block(o + VW, acc, nr, VW, ob + VW, OC, out, scale, shift, res, act);   \
    } while (0)

static inline __attribute__((always_inline))
int conv_rows(const float *x, const float *wb, float *out,
              long H, long W, long C, long KH, long KW, long OC, long OH, long OW,
              long sh, long sw, long dh, long dw, long pt, long pl,
              const float *scale, const float *shift, const float *res, int act,
              long r0, long r1, const int RB, long first_pass)
{
    const long xs = sw * C;                          /* input step between output pixels */
    /* Without dilation a row of taps is one contiguous run of KW * C values in the input
     * row and in the filter: CONV_TAPS walks it as one loop of CR values (KWR = 1 tap),
     * where a 5x5 filter over one channel ran five loops of one value each (the same
     * products in the same order: the same bits) */
    const long KWR = dw == 1 ? 1 : KW, CR = dw == 1 ? KW * C : C;
    /* Each output row first has the KH input rows it reads in zero-padded buffers, wide
     * enough for whole blocks (the row's last, partial block computes a few pixels it does
     * not store): the inner loop never tests bounds and no block takes a slow path. An input
     * row is copied once for the output rows in a thread's range that read it in turn: Wp * C
     * floats per input row against OW * OC * KH * KW * C FMAs per output row. */
    const long blocks = (OW + RB - 1) / RB;
    /* pixels the blocks compute: whole blocks of RB, or of RT for the wide tiles below */
    long px = blocks * RB;
    if (RB == 8 && OC >= 4 * VW && (OW + RT - 1) / RT * RT > px)
        px = (OW + RT - 1) / RT * RT;
    if (RB == 8 && OC % (4 * VW) >= 2 * VW && (OW + RT2 - 1) / RT2 * RT2 > px)
        px = (OW + RT2 - 1) / RT2 * RT2;
    const long Wp = (px - 1) * sw + (KW - 1) * dw + 1;   /* padded columns read */
    /* padded column q holds input column q - pl: input in [lo, hi), zeros elsewhere */
    const long lo = pl < Wp ? pl : Wp;
    const long hi = pl + W < Wp ? pl + W : Wp;
    /* One pixel by a 1x1 filter (a one-row matrix product: a GEMV): the block of RB pixels
     * would compute RB - 1 pixels of padding, so here four blocks of channels at once, each
     * output's sum in the same order and form as below (the same bits) */
    if (OW == 1 && OH == 1 && W == 1 && H == 1 && KH == 1 && KW == 1 && pt == 0 && pl == 0) {
        for (long row = r0; row < r1; row++) {
            const float *xp = x + row * C;
            float *o = out + row * OC;
            long ob = first_pass * 4 * VW;
            for (; ob + 4 * VW <= OC; ob += 4 * VW) {
                const float *w0 = wb + ob * C;
                vf acc[4];
                if (RB == 8) {
                    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                    for (long c = 0; c < C; c++) {
                        const float v = xp[c];
                        a0 += v * *(const vfu *)(w0 + c * VW);
                        a1 += v * *(const vfu *)(w0 + (C + c) * VW);
                        a2 += v * *(const vfu *)(w0 + (2 * C + c) * VW);
                        a3 += v * *(const vfu *)(w0 + (3 * C + c) * VW);
                    }
                    acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
                } else {
                    vh l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0};
                    vh h0 = {0}, h1 = {0}, h2 = {0}, h3 = {0};
                    for (long c = 0; c < C; c++) {
                        const float v = xp[c];
                        const float *w = w0 + c * VW;
                        l0 += v * *(const vhu *)w; h0 += v * *(const vhu *)(w + VH);
                        w += C * VW;
                        l1 += v * *(const vhu *)w; h1 += v * *(const vhu *)(w + VH);
                        w += C * VW;
                        l2 += v * *(const vhu *)w; h2 += v * *(const vhu *)(w + VH);
                        w += C * VW;
                        l3 += v * *(const vhu *)w; h3 += v * *(const vhu *)(w + VH);
                    }
                    const vh lo_[4] = {l0, l1, l2, l3}, hi_[4] = {h0, h1, h2, h3};
                    for (int r = 0; r < 4; r++) {
                        memcpy(&acc[r], &lo_[r], sizeof(vh));
                        memcpy((char *)&acc[r] + sizeof(vh), &hi_[r], sizeof(vh));
                    }
                }
                for (int b = 0; b < 4; b++)
                    store_block(o + ob + b * VW, &acc[b], 1, VW, ob + b * VW, OC, out, scale,
                                shift, res, act);
            }
            for (; ob < OC; ob += VW) {     /* the last blocks, one at a time */
                const long width = OC - ob < VW ? OC - ob : VW;
                const float *wk = wb + ob * C;
                vf acc;
                if (RB == 8) {
                    vf a0 = {0};
                    for (long c = 0; c < C; c++)
                        a0 += xp[c] * *(const vfu *)(wk + c * VW);
                    acc = a0;
                } else {
                    vh l0 = {0}, h0 = {0};
                    for (long c = 0; c < C; c++) {
                        const float v = xp[c];
                        l0 += v * *(const vhu *)(wk + c * VW);
                        h0 += v * *(const vhu *)(wk + c * VW + VH);
                    }
                    memcpy(&acc, &l0, sizeof(vh));
                    memcpy((char *)&acc + sizeof(vh), &h0, sizeof(vh));
                }
                store_block(o + ob, &acc, 1, width, ob, OC, out, scale, shift, res, act);
            }
        }
        return 0;
    }
    /* The padded rows are a ring of the S consecutive input rows one output row reads: input
     * row iy of image n sits in slot iy % S, copied once for every output row that reads it
     * (a 3x3 stride-1 layer copied each row three times: with 16 output channels the copies
     * cost as much as the FMAs) */
    const long S = (KH - 1) * dh + 1;
    float *rows = malloc(S * Wp * C * sizeof(float));
    long *slot = malloc((KH + S) * sizeof(long)), *held = slot + KH;
    if (!rows || !slot) {
        free(rows);
        free(slot);
        return -1;
    }
    for (long i = 0; i < S; i++) held[i] = -1;     /* which (n, iy) each slot holds */
    /* Passes over the range's rows: on AVX-512 one per tile column of 4 * VW channels (see
     * below), so its filter (KH * KW * C * 64 floats) stays in cache over the rows, then one
     * for the channels left, a block at a time. Rows are copied into the ring again for each
     * pass (Wp * C floats a row against the pass's 64 * KH * KW * C FMAs a pixel). */
    const long tiles = RB == 8 ? OC / (4 * VW) : 0;
    for (long pass = RB == 8 ? first_pass : 0; pass <= tiles; pass++) {
    const int last = pass == tiles;
    if (last && tiles * 4 * VW == OC)
        break;
    for (long row = r0; row < r1; row++) {
        const long n = row / OH, oy = row % OH;
        const long iy0 = oy * sh - pt;
        float *orow = out + row * OW * OC;
        for (long ky = 0; ky < KH; ky++) {
            const long iy = iy0 + ky * dh;
            if (iy < 0 || iy >= H) continue;        /* a row of padding: its taps are skipped */
            slot[ky] = iy % S;
            if (held[slot[ky]] == n * H + iy) continue;
            held[slot[ky]] = n * H + iy;
            float *d = rows + slot[ky] * Wp * C;
            memset(d, 0, lo * C * sizeof(float));
            if (hi > lo)
                memcpy(d + lo * C, x + (n * H + iy) * W * C, (hi - lo) * C * sizeof(float));
            memset(d + hi * C, 0, (Wp - hi) * C * sizeof(float));
        }
        if (!last) {
            /* Wide tiles (AVX-512): RT pixels by four blocks of VW channels, 24 accumulators
             * of the 32 registers. Per input value four filter vectors and RT broadcasts feed
             * 4 * RT FMAs, where the 8-pixel block below loads 9 values for 8 FMAs (load-bound:
             * half the FMA rate). Each output's sum runs over the taps and channels in the same
             * order and form as the block's: the same bits. */
            const long bs = KH * KW * C * VW;         /* floats between channel blocks */
            {
                const long ob0 = pass * 4 * VW;
                const float *wblock = wb + ob0 * KH * KW * C;
                for (long ox = 0; ox < OW; ox += RT) {
                    const long nr = OW - ox < RT ? OW - ox : RT;
                    vf a00 = {0}, a01 = {0}, a02 = {0}, a03 = {0}, a10 = {0}, a11 = {0},
                       a12 = {0}, a13 = {0}, a20 = {0}, a21 = {0}, a22 = {0}, a23 = {0},
                       a30 = {0}, a31 = {0}, a32 = {0}, a33 = {0}, a40 = {0}, a41 = {0},
                       a42 = {0}, a43 = {0}, a50 = {0}, a51 = {0}, a52 = {0}, a53 = {0};
                    CONV_TAPS(for (long c = 0; c < CR; c++) {
                        const float *w = wk + c * VW;
                        const vf w0 = *(const vfu *)w, w1 = *(const vfu *)(w + bs),
                                 w2 = *(const vfu *)(w + 2 * bs), w3 = *(const vfu *)(w + 3 * bs);
                        float v = xp[c];
                        a00 += v * w0; a01 += v * w1; a02 += v * w2; a03 += v * w3;
                        v = xp[xs + c];
                        a10 += v * w0; a11 += v * w1; a12 += v * w2; a13 += v * w3;
                        v = xp[2 * xs + c];
                        a20 += v * w0; a21 += v * w1; a22 += v * w2; a23 += v * w3;
                        v = xp[3 * xs + c];
                        a30 += v * w0; a31 += v * w1; a32 += v * w2; a33 += v * w3;
                        v = xp[4 * xs + c];
                        a40 += v * w0; a41 += v * w1; a42 += v * w2; a43 += v * w3;
                        v = xp[5 * xs + c];
                        a50 += v * w0; a51 += v * w1; a52 += v * w2; a53 += v * w3;
                    })
                    vf acc[RB_MAX];
                    float *o = orow + ox * OC + ob0;
                    acc[0] = a00; acc[1] = a10; acc[2] = a20; acc[3] = a30; acc[4] = a40;
                    acc[5] = a50;
                    store_block(o, acc, nr, VW, ob0, OC, out, scale, shift, res, act);
                    acc[0] = a01; acc[1] = a11; acc[2] = a21; acc[3] = a31; acc[4] = a41;
                    acc[5] = a51;
                    store_block(o + VW, acc, nr, VW, ob0 + VW, OC, out, scale, shift, res, act);
                    acc[0] = a02; acc[1] = a12; acc[2] = a22; acc[3] = a32; acc[4] = a42;
                    acc[5] = a52;
                    store_block(o + 2 * VW, acc, nr, VW, ob0 + 2 * VW, OC, out, scale, shift,
                                res, act);
                    acc[0] = a03; acc[1] = a13; acc[2] = a23; acc[3] = a33; acc[4] = a43;
                    acc[5] = a53;
                    store_block(o + 3 * VW, acc, nr, VW, ob0 + 3 * VW, OC, out, scale, shift,
                                res, act);
                }
            }
        }
        long ob = tiles * 4 * VW;
        /* Pair tiles (AVX-512, 32 or more channels left: 32, 96, 160 outputs): RT2 pixels
         * by two blocks of VW channels, 24 accumulators again. Per input value two filter
         * vectors and RT2 broadcasts feed 2 * RT2 FMAs (the 8-pixel block: 9 loads for 8),
         * each output's sum in the same order and form: the same bits. A row's pixels take
         * n12 tiles of 12, then tiles of 8 (16 accumulators), the fewest pixels computed
         * (13: 8 + 8, not 12 + 12; 30: 12 + 12 + 8) */
        long n12 = 0;
        if (RB == 8 && last && OC - ob >= 2 * VW) {
            long best = -1;
            for (long n8 = 0; n8 <= 2; n8++) {
                const long rest = OW - 8 * n8 > 0 ? OW - 8 * n8 : 0;
                const long k12 = (rest + RT2 - 1) / RT2, total = k12 * RT2 + 8 * n8;
                if (best < 0 || total < best) {
                    best = total;
                    n12 = k12;
                }
            }
        }
        for (; RB == 8 && last && ob + 2 * VW <= OC; ob += 2 * VW) {
            const long bs = KH * KW * C * VW;
            const float *wblock = wb + ob * KH * KW * C;
            long ox = 0;
            for (; ox < OW && ox < n12 * RT2; ox += RT2)
                PAIR_TILE(PIXELS12, RT2);
            for (; ox < OW; ox += 8)
                PAIR_TILE(PIXELS8, 8);
        }
        for (; last && ob < OC; ob += VW) {
            const long width = OC - ob < VW ? OC - ob : VW;
            const float *wblock = wb + ob * KH * KW * C;
            long ox = 0;
            /* Long tiles (AVX-512, one block of channels: 16, 48, 80 outputs): RT3 pixels
             * by one block, 24 accumulators, one filter vector and RT3 broadcasts per input
             * value (the 8-pixel block's 8 chains of FMAs wait on their latency); then the
             * row's rest in 8-pixel blocks. The same sums in the same order: the same bits. */
            for (; RB == 8 && ox + RT3 <= OW; ox += RT3) {
                PIXELS24(LONG_DECL)
                CONV_TAPS(for (long c = 0; c < CR; c++) {
                    const vf w0 = *(const vfu *)(wk + c * VW);
                    PIXELS24(LONG_FMA)
                })
                vf acc[RT3];
                PIXELS24(LONG_GET)
                store_block(orow + ox * OC + ob, acc, RT3, width, ob, OC, out, scale, shift,
                            res, act);
            }
            for (; ox < OW; ox += RB) {
                const long nr = OW - ox < RB ? OW - ox : RB;
                vf acc[RB_MAX];
                if (RB == 8) {          /* a constant: each caller has one branch only */
                    /* named accumulators, not an array: GCC keeps an array whose address
                     * is taken in memory through the inner loop */
                    vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0},
                       a7 = {0};
                    CONV_TAPS(for (long c = 0; c < CR; c++) {
                        const vf wv = *(const vfu *)(wk + c * VW);
                        a0 += xp[c] * wv;
                        a1 += xp[xs + c] * wv;
                        a2 += xp[2 * xs + c] * wv;
                        a3 += xp[3 * xs + c] * wv;
                        a4 += xp[4 * xs + c] * wv;
                        a5 += xp[5 * xs + c] * wv;
                        a6 += xp[6 * xs + c] * wv;
                        a7 += xp[7 * xs + c] * wv;
                    })
                    acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
                    acc[4] = a4; acc[5] = a5; acc[6] = a6; acc[7] = a7;
                } else {
                    /* Halves of 8 floats (one AVX2 register each): GCC lowers a 16-float
                     * vector on AVX2 through the stack, so these are spelled out. */
                    vh l0 = {0}, l1 = {0}, l2 = {0}, l3 = {0}, l4 = {0}, l5 = {0};
                    vh h0 = {0}, h1 = {0}, h2 = {0}, h3 = {0}, h4 = {0}, h5 = {0};
                    CONV_TAPS(for (long c = 0; c < CR; c++) {
                        const vh wl = *(const vhu *)(wk + c * VW);
                        const vh wh = *(const vhu *)(wk + c * VW + VH);
                        float v = xp[c];
                        l0 += v * wl; h0 += v * wh;
                        v = xp[xs + c];
                        l1 += v * wl; h1 += v * wh;
                        v = xp[2 * xs + c];
                        l2 += v * wl; h2 += v * wh;
                        v = xp[3 * xs + c];
                        l3 += v * wl; h3 += v * wh;
                        v = xp[4 * xs + c];
                        l4 += v * wl; h4 += v * wh;
                        v = xp[5 * xs + c];
                        l5 += v * wl; h5 += v * wh;
                    })
                    const vh lo_[6] = {l0, l1, l2, l3, l4, l5}, hi_[6] = {h0, h1, h2, h3, h4, h5};
                    for (int r = 0; r < 6; r++) {
                        memcpy(&acc[r], &lo_[r], sizeof(vh));
                        memcpy((char *)&acc[r] + sizeof(vh), &hi_[r], sizeof(vh));
                    }
                }
                store_block(orow + ox * OC + ob, acc, nr, width, ob, OC, out, scale, shift,
                            res, act);
            }
        }
    }
    }   /* passes */
    free(rows);
    free(slot);
    return 0;
}

/* Few output channels (an output layer's 1-4, where a block of 16 channels computes 4-16x
 * the FMAs it keeps): each output the dot product of its window with its filter column,
 * along the window's contiguous runs (a row of taps inside the input, up to KW * C values:
 * no dilation). wt: the filter as (OC, KH, KW * C). The products run in VH lanes, 8 pixels
 * at once where their windows lie inside the input's columns (8 chains of FMAs, one filter
 * load for 8 inputs), their lanes then added pairwise across the 8 in three steps of
 * shuffles (one pixel alone: lane by lane in order), then the run's tail. Then the
 * epilogue once over the pixels' outputs (contiguous): v * scale + shift, + residual, the
 * activation, as store_block applies it. Computes output rows [r0, r1) of the N * OH. */
typedef int vhi __attribute__((vector_size(VH * sizeof(int))));

static inline __attribute__((always_inline))
void narrow_epilogue(float *o, long count, long OC, float *out, const float *scale,
                     const float *shift, const float *res, int act)
{
    if (scale || shift || res) {
        const float *rp = res ? res + (o - out) : NULL;
        for (long i = 0; i < count; i++) {
            const long c = i % OC;
            float v = o[i];
            if (scale && shift)
                v = v * scale[c] + shift[c];
            else if (scale)
                v *= scale[c];
            else if (shift)
                v += shift[c];
            if (rp)
                v += rp[i];
            o[i] = v;
        }
    }
    if (act >= DFG_ACT_SIGMOID_FN)
        dfg_act_span_f32(o, count, act);
    else if (act)
        for (long i = 0; i < count; i++) {
            float t = o[i] < 0 ? 0.0f : o[i];
            o[i] = act == 2 && t > 6 ? 6.0f : t;
        }
}

CLONES
void dfg_conv_narrow_f32(const float *x, const float *wt, float *out, long H, long W, long C,
                         long KH, long KW, long OC, long OH, long OW, long sh, long sw,
                         long pt, long pl, const float *scale, const float *shift,
                         const float *res, int act, long r0, long r1)
{
    const long KC = KW * C, ps = sw * C;
    for (long row = r0; row < r1; row++) {
        const long n = row / OH, oy = row % OH, iy0 = oy * sh - pt;
        const long ky0 = iy0 < 0 ? -iy0 : 0, ky1 = H - iy0 < KH ? H - iy0 : KH;
        float *orow = out + row * OW * OC;
        for (long ox = 0; ox < OW;) {
            const long ix0 = ox * sw - pl;
            long np = 1;
            if (ix0 >= 0 && ox + 8 <= OW && (ox + 7) * sw - pl + KW <= W) {
                np = 8;                         /* 8 pixels, whole windows */
                for (long o = 0; o < OC; o++) {
                    vh a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0},
                       a7 = {0}, t = {0};
                    for (long ky = ky0; ky < ky1; ky++) {
                        const float *xp = x + ((n * H + iy0 + ky) * W + ix0) * C;
                        const float *wp = wt + (o * KH + ky) * KC;
                        long j = 0;
                        for (; j + VH <= KC; j += VH) {
                            const vh w = *(const vhu *)(wp + j);
                            a0 += *(const vhu *)(xp + j) * w;
                            a1 += *(const vhu *)(xp + ps + j) * w;
                            a2 += *(const vhu *)(xp + 2 * ps + j) * w;
                            a3 += *(const vhu *)(xp + 3 * ps + j) * w;
                            a4 += *(const vhu *)(xp + 4 * ps + j) * w;
                            a5 += *(const vhu *)(xp + 5 * ps + j) * w;
                            a6 += *(const vhu *)(xp + 6 * ps + j) * w;
                            a7 += *(const vhu *)(xp + 7 * ps + j) * w;
                        }
                        for (; j < KC; j++)
                            for (int p = 0; p < 8; p++) t[p] += xp[p * ps + j] * wp[j];
                    }
                    /* lane sums of a0..a7 as the lanes of one vector: pairs, quads, halves */
                    const vhi lo1 = {0, 8, 2, 10, 4, 12, 6, 14}, hi1 = {1, 9, 3, 11, 5, 13, 7, 15};
                    const vh u01 = __builtin_shuffle(a0, a1, lo1) + __builtin_shuffle(a0, a1, hi1),
                             u23 = __builtin_shuffle(a2, a3, lo1) + __builtin_shuffle(a2, a3, hi1),
                             u45 = __builtin_shuffle(a4, a5, lo1) + __builtin_shuffle(a4, a5, hi1),
                             u67 = __builtin_shuffle(a6, a7, lo1) + __builtin_shuffle(a6, a7, hi1);
                    const vhi lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
                    const vh v03 = __builtin_shuffle(u01, u23, lo2) + __builtin_shuffle(u01, u23, hi2),
                             v47 = __builtin_shuffle(u45, u67, lo2) + __builtin_shuffle(u45, u67, hi2);
                    const vhi lo3 = {0, 1, 2, 3, 8, 9, 10, 11}, hi3 = {4, 5, 6, 7, 12, 13, 14, 15};
                    const vh r = __builtin_shuffle(v03, v47, lo3) + __builtin_shuffle(v03, v47, hi3)
                                 + t;
                    if (OC == 1)
                        *(vhu *)(orow + ox) = r;
                    else
                        for (int p = 0; p < 8; p++) orow[(ox + p) * OC + o] = r[p];
                }
            } else {                            /* one pixel, its window clipped */
                const long kx0 = ix0 < 0 ? -ix0 : 0, kx1 = W - ix0 < KW ? W - ix0 : KW;
                const long len = (kx1 - kx0) * C;
                for (long o = 0; o < OC; o++) {
                    vh a0 = {0};
                    float t = 0;
                    for (long ky = ky0; ky < ky1; ky++) {
                        const float *xp = x + ((n * H + iy0 + ky) * W + ix0 + kx0) * C;
                        const float *wp = wt + (o * KH + ky) * KC + kx0 * C;
                        long j = 0;
                        for (; j + VH <= len; j += VH)
                            a0 += *(const vhu *)(xp + j) * *(const vhu *)(wp + j);
                        for (; j < len; j++) t += xp[j] * wp[j];
                    }
                    float v = 0;
                    for (int e = 0; e < VH; e++) v += a0[e];
                    orow[ox * OC + o] = v + t;
                }
            }
            ox += np;
        }
        narrow_epilogue(orow, OW * OC, OC, out, scale, shift, res, act);
    }
}

/* Pixels as the rows of one product (AVX-512): out[p, o] = sum_k a[p, k] * w[k, o] for the
 * M output pixels p and OC channels o, where a[p, k] is pixel p's window, its taps in (ky,
 * kx, c) order (K = KH * KW * C), read in place from the input (struct flat_src: no patch
 * matrix is built; a padded copy of the input stands in for it when windows cross the
 * edges). wb is the filter packed as above, (OC / VW, K, VW); items cover the OC / (4 * VW) whole
 * tile columns (the caller computes any channels past them).
 * Tiles of RT pixels by 4 * VW channels as the wide tiles above, but over the pixels of all
 * rows and images at once: a 7x7 layer computes 54 pixels for its 49 (the row kernel: 84)
 * and its work splits over tile columns too, where the row kernel had 7 rows for its
 * threads. The sum over k runs in blocks of at most FLAT_KB, each over a group of FLAT_GROUP
 * tiles of one tile column, so the column's FLAT_KB x 64 slice of the filter stays in L1
 * for the group's tiles (the row kernel reads each tile's whole window of weights from L2:
 * 256 bytes for 24 FMAs), and the group's partial sums and input in L2. Between blocks the
 * partial sums wait in the output, stored and loaded as they are, so each output is the
 * same sum of float32 FMAs in the same order however the k are cut (the row kernel's bits).
 * Work items: tile column j by pixel tile t, item = j * T + t; computes items [i0, i1). */
#define FLAT_KB 128
#define FLAT_GROUP 32

/* Where the flat product reads: output pixel p = (n, oy, ox) starts at x + n * is + oy * sh
 * * rs + ox * sw * C (rs, is: floats per input row and image), and its window is K / L
 * segments of L contiguous values, segment s at seg[s] from there (a row of taps, KW * C
 * values, when the columns are not dilated; else one tap's C). */
struct flat_src {
    const float *x;
    const long *seg;
    long C, OH, OW, sh, sw, rs, is, L;
};

static inline __attribute__((always_inline))
void flat_items(const struct flat_src *s, const float *wb, float *out, long M, long K, long OC,
                const float *scale, const float *shift, const float *res, int act,
                long i0, long i1)
{
    const long T = (M + RT - 1) / RT;
    const long bs = K * VW;                     /* floats between channel blocks */
    const long C = s->C, OW = s->OW, HW = s->OH * OW, L = s->L;
    const long ystep = s->sh * s->rs, xstep = s->sw * C;
    for (long item = i0; item < i1;) {
        const long j = item / T, ta = item - j * T;
        const long tb = i1 - j * T < T ? i1 - j * T : T;
        item = j * T + tb;
        const long ob0 = j * 4 * VW;
        const float *wj = wb + ob0 * K;
        for (long g0 = ta; g0 < tb; g0 += FLAT_GROUP) {
        const long g1 = tb - g0 < FLAT_GROUP ? tb : g0 + FLAT_GROUP;
        for (long k0 = 0; k0 < K;) {
            const long si = k0 / L, off = k0 - si * L;
            const long kn = L - off < FLAT_KB ? L - off : FLAT_KB;
            const int first = k0 == 0, last = k0 + kn == K;
            const float *xk = s->x + s->seg[si] + off;
            for (long t = g0; t < g1; t++) {
                const long p0 = t * RT;
                const long nr = M - p0 < RT ? M - p0 : RT;
                /* the tile's pixels' windows; a last tile's pixels past M read its first
                 * pixel again (their sums are dropped): never past the input */
                const float *xr[RT];
                long n = p0 / HW, oy = p0 % HW / OW, ox = p0 % OW;
                xr[0] = xk + n * s->is + oy * ystep + ox * xstep;
                for (int r = 1; r < RT; r++) {
                    if (++ox == OW) {
                        ox = 0;
                        if (++oy == s->OH) {
                            oy = 0;
                            n++;
                        }
                    }
                    xr[r] = r < nr ? xk + n * s->is + oy * ystep + ox * xstep : xr[0];
                }
                const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3], *x4 = xr[4],
                            *x5 = xr[5];
                float *o = out + p0 * OC + ob0;
                vf acc[4][RT];
                for (int b = 0; b < 4; b++)
                    for (int r = 0; r < RT; r++) {
                        vf v = {0};
                        if (!first && r < nr)
                            memcpy(&v, o + r * OC + b * VW, sizeof(vf));
                        acc[b][r] = v;
                    }
                vf a00 = acc[0][0], a01 = acc[1][0], a02 = acc[2][0], a03 = acc[3][0],
                   a10 = acc[0][1], a11 = acc[1][1], a12 = acc[2][1], a13 = acc[3][1],
                   a20 = acc[0][2], a21 = acc[1][2], a22 = acc[2][2], a23 = acc[3][2],
                   a30 = acc[0][3], a31 = acc[1][3], a32 = acc[2][3], a33 = acc[3][3],
                   a40 = acc[0][4], a41 = acc[1][4], a42 = acc[2][4], a43 = acc[3][4],
                   a50 = acc[0][5], a51 = acc[1][5], a52 = acc[2][5], a53 = acc[3][5];
                const float *w = wj + k0 * VW;
                for (long c = 0; c < kn; c++) {
                    const float *wc = w + c * VW;
                    const vf w0 = *(const vfu *)wc, w1 = *(const vfu *)(wc + bs),
                             w2 = *(const vfu *)(wc + 2 * bs), w3 = *(const vfu *)(wc + 3 * bs);
                    float v = x0[c];
                    a00 += v * w0; a01 += v * w1; a02 += v * w2; a03 += v * w3;
                    v = x1[c];
                    a10 += v * w0; a11 += v * w1; a12 += v * w2; a13 += v * w3;
                    v = x2[c];
                    a20 += v * w0; a21 += v * w1; a22 += v * w2; a23 += v * w3;
                    v = x3[c];
                    a30 += v * w0; a31 += v * w1; a32 += v * w2; a33 += v * w3;
                    v = x4[c];
                    a40 += v * w0; a41 += v * w1; a42 += v * w2; a43 += v * w3;
                    v = x5[c];
                    a50 += v * w0; a51 += v * w1; a52 += v * w2; a53 += v * w3;
                }
                vf blk[4][RB_MAX] = {{a00, a10, a20, a30, a40, a50}, {a01, a11, a21, a31, a41, a51},
                                     {a02, a12, a22, a32, a42, a52}, {a03, a13, a23, a33, a43, a53}};
                for (int b = 0; b < 4; b++) {
                    if (last)
                        store_block(o + b * VW, blk[b], nr, VW, ob0 + b * VW, OC, out, scale,
                                    shift, res, act);
                    else
                        for (long r = 0; r < nr; r++)
                            memcpy(o + r * OC + b * VW, &blk[b][r], sizeof(vf));
                }
            }
            k0 += kn;
        }
        }   /* groups */
    }
}

CLONES
void dfg_conv_flat_f32(const struct flat_src *s, const float *wb, float *out, long M, long K,
                       long OC, const float *scale, const float *shift, const float *res,
                       int act, long i0, long i1)
{
    flat_items(s, wb, out, M, K, OC, scale, shift, res, act, i0, i1);
}

/* Rows [r0, r1) of the zero-padded copy of x the flat product reads: (N, Hp, Wp, C), input
 * row iy at padded row iy + pt, column ix at ix + pl. */
static void pad_rows(const float *x, float *xp, long H, long W, long C, long Hp, long Wp,
                     long pt, long pl, long r0, long r1)
{
    for (long r = r0; r < r1; r++) {
        const long n = r / Hp, iy = r % Hp - pt;
        float *d = xp + r * Wp * C;
        if (iy < 0 || iy >= H) {
            memset(d, 0, Wp * C * sizeof(float));
            continue;
        }
        const long lo = pl < Wp ? pl : Wp, hi = pl + W < Wp ? pl + W : Wp;
        memset(d, 0, lo * C * sizeof(float));
        if (hi > lo)
            memcpy(d + lo * C, x + (n * H + iy) * W * C, (hi - lo) * C * sizeof(float));
        memset(d + hi * C, 0, (Wp - hi) * C * sizeof(float));
    }
}

/* The kernel with 8-pixel blocks (AVX-512), and with 6-pixel blocks (16 vector registers:
 * AVX2, and NEON's 32 of 4 floats). Both are cloned per target; dfg_conv2d_nhwc_f32_mt
 * picks one by the CPU. */
CLONES
int dfg_conv2d_nhwc_f32(const float *x, const float *wb, float *out,
                        long H, long W, long C, long KH, long KW, long OC, long OH, long OW,
                        long sh, long sw, long dh, long dw, long pt, long pl,
                        const float *scale, const float *shift, const float *res, int act,
                        long r0, long r1, long first_pass)
{
    return conv_rows(x, wb, out, H, W, C, KH, KW, OC, OH, OW, sh, sw, dh, dw, pt, pl,
                     scale, shift, res, act, r0, r1, 8, first_pass);
}

CLONES
int dfg_conv2d_nhwc_f32_rb6(const float *x, const float *wb, float *out,
                            long H, long W, long C, long KH, long KW, long OC, long OH,
                            long OW, long sh, long sw, long dh, long dw, long pt, long pl,
                            const float *scale, const float *shift, const float *res, int act,
                            long r0, long r1, long first_pass)
{
    (void)first_pass;       /* no wide tiles: every channel in one pass */
    return conv_rows(x, wb, out, H, W, C, KH, KW, OC, OH, OW, sh, sw, dh, dw, pt, pl,
                     scale, shift, res, act, r0, r1, 6, 0);
}

/* Whether the CPU has 32 wide vector registers (AVX-512): the 8-pixel blocks fit them. */
static int wide_registers(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* Depthwise 2-D convolution of float32 NHWC with one filter per channel (depth multiplier
 * 1): out[n, oy, ox, c] = sum_{ky, kx} x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw, c]
 * * f[ky, kx, c] over the taps inside x (padding is zeros: skipped). Each output pixel's
 * channels accumulate in vector registers, 32 then 8 at a time, tap by tap (the last few in
 * place, in a loop GCC vectorizes); numpy's path makes two passes over the whole output per tap.
 * f is (KH, KW, C).
 * Computes output rows [r0, r1) of the N * OH. */
/* _FusedDepthwiseConv2dNative's epilogue on one output pixel's C channels (in L1): v * scale
 * + shift (each NULL to skip), then act as the direct convolution's. Not inlined, and never
 * contracted to an FMA: the multiply and the add round apart, as the numpy path's do. */
__attribute__((noinline, optimize("fp-contract=off")))
static void dw_epilogue(float *o, long C, const float *scale, const float *shift, int act)
{
    if (scale)
        for (long c = 0; c < C; c++) o[c] = o[c] * scale[c];
    if (shift)
        for (long c = 0; c < C; c++) o[c] = o[c] + shift[c];
    if (act >= DFG_ACT_SIGMOID_FN)
        dfg_act_span_f32(o, C, act);
    else if (act)
        for (long c = 0; c < C; c++) {
            float t = o[c] < 0 ? 0.0f : o[c];
            o[c] = act == 2 && t > 6 ? 6.0f : t;
        }
}

/* The taps of output pixel (n, oy, ox) inside x (padding is zeros: skipped), with xt the
 * input pixel at the tap and ft the tap's filter (channel 0 of each): BODY runs once per
 * tap, for each channel block below. */
#define DW_TAPS(...)                                                             \
    for (long ky = 0; ky < KH; ky++) {                                           \
        const long iy = oy * sh - pt + ky * dh;                                  \
        if (iy < 0 || iy >= H) continue;                                         \
        for (long kx = 0; kx < KW; kx++) {                                       \
            const long ix = ox * sw - pl + kx * dw;                              \
            if (ix < 0 || ix >= W) continue;                                     \
            const float *restrict xt = x + ((n * H + iy) * W + ix) * C;          \
            const float *restrict ft = f + (ky * KW + kx) * C;                   \
            __VA_ARGS__                                                          \
        }                                                                        \
    }

/* The last K < VH channels of a pixel, from channel c0: one case per K, so each loop has a
 * constant trip count (unrolled, the sums in registers: the same sums in the same order)
 * where a loop of a few channels paid the vectorizer's checks at every tap ((2,8,8,2) by
 * 3x3, NASNet's, took 11 us). */
#define DW_REST(K)                                                                  \
    case K: {                                                                       \
        float acc[K] = {0};                                                         \
        DW_TAPS(for (int c = 0; c < K; c++) acc[c] += xt[c0 + c] * ft[c0 + c];)     \
        for (int c = 0; c < K; c++) o[c0 + c] = acc[c];                             \
        break;                                                                      \
    }

CLONES
void dfg_depthwise_nhwc_f32(const float *x, const float *f, float *out, long H, long W,
                            long C, long KH, long KW, long OH, long OW, long sh, long sw,
                            long dh, long dw, long pt, long pl, const float *scale,
                            const float *shift, int act, long r0, long r1)
{
    for (long row = r0; row < r1; row++) {
        const long n = row / OH, oy = row % OH;
        for (long ox = 0; ox < OW; ox++) {
            float *restrict o = out + (row * OW + ox) * C;
            /* blocks of 32 channels accumulate in four vector registers over the taps and
             * are stored once (adding into the output tap by tap loaded and stored it 9
             * times); the same sums in the same order, so the same bits */
            long c0 = 0;
            for (; c0 + 4 * VH <= C; c0 += 4 * VH) {
                vh a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                DW_TAPS(
                    a0 += *(const vhu *)(xt + c0) * *(const vhu *)(ft + c0);
                    a1 += *(const vhu *)(xt + c0 + VH) * *(const vhu *)(ft + c0 + VH);
                    a2 += *(const vhu *)(xt + c0 + 2 * VH) * *(const vhu *)(ft + c0 + 2 * VH);
                    a3 += *(const vhu *)(xt + c0 + 3 * VH) * *(const vhu *)(ft + c0 + 3 * VH);
                )
                *(vhu *)(o + c0) = a0;
                *(vhu *)(o + c0 + VH) = a1;
                *(vhu *)(o + c0 + 2 * VH) = a2;
                *(vhu *)(o + c0 + 3 * VH) = a3;
            }
            for (; c0 + VH <= C; c0 += VH) {         /* then 8 at a time */
                vh a0 = {0};
                DW_TAPS(a0 += *(const vhu *)(xt + c0) * *(const vhu *)(ft + c0);)
                *(vhu *)(o + c0) = a0;
            }
            switch (C - c0) {                           /* the last few */
                DW_REST(1) DW_REST(2) DW_REST(3) DW_REST(4) DW_REST(5) DW_REST(6) DW_REST(7)
                default: break;
            }
            if (scale || shift || act) dw_epilogue(o, C, scale, shift, act);
        }
    }
}

/* MaxPool of float32 NHWC x (N, H, W, C) over KH x KW windows into out (N, OH, OW, C):
 * each channel folds acc < v ? v : acc over the window's taps inside x (padding is never
 * read), from the lowest finite float: TensorFlow's fold, so a NaN never wins, a window of
 * NaNs gives -FLT_MAX, and of 0 and -0 the first stays. GCC vectorizes the channel loop
 * with the select as written (MAXPS keeps its second operand on NaN: the same fold).
 * Computes output rows [r0, r1) of the N * OH. */
/* Channel blocks of 4 vectors, then of one, of output pixel (row, ox) over taps ky in [ky0,
 * ky1), kx in [kx0, kx1): the fold in vector registers across the taps (a channel loop over
 * memory stored each tap's result), as a select of bits (GCC's vector ?: is C++ only),
 * which GCC turns into MAXPS */
typedef int vi __attribute__((vector_size(VW * sizeof(float))));
#define FOLD_MAX(acc, v) do {                                                          \
        const vf v_ = (v);                                                            \
        const vi m_ = (acc) < v_;                                                     \
        (acc) = (vf)(((vi)v_ & m_) | ((vi)(acc) & ~m_));                              \
    } while (0)
#define MP_TAPS(...)                                                                   \
    for (long ky = ky0; ky < ky1; ky++) {                                             \
        const float *xr = x + ((n * H + oy * sh - pt + ky) * W + ox * sw - pl) * C + c0; \
        for (long kx = kx0; kx < kx1; kx++) {                                         \
            const float *xt = xr + kx * C;                                            \
            __VA_ARGS__                                                               \
        }                                                                             \
    }

CLONES
void dfg_maxpool_nhwc_f32(const float *x, float *out, long H, long W, long C, long KH,
                          long KW, long OH, long OW, long sh, long sw, long pt, long pl,
                          long r0, long r1)
{
    for (long row = r0; row < r1; row++) {
        const long n = row / OH, oy = row % OH;
        /* the taps inside x: rows [ky0, ky1) of the window, and per pixel columns */
        const long ky0 = pt - oy * sh > 0 ? pt - oy * sh : 0;
        const long ky1 = H - (oy * sh - pt) < KH ? H - (oy * sh - pt) : KH;
        for (long ox = 0; ox < OW; ox++) {
            float *restrict o = out + (row * OW + ox) * C;
            const long kx0 = pl - ox * sw > 0 ? pl - ox * sw : 0;
            const long kx1 = W - (ox * sw - pl) < KW ? W - (ox * sw - pl) : KW;
            long c0 = 0;
            const vf lowest = (vf){0} - FLT_MAX;
            for (; c0 + 4 * VW <= C; c0 += 4 * VW) {
                vf a0 = lowest, a1 = lowest, a2 = lowest, a3 = lowest;
                MP_TAPS(FOLD_MAX(a0, *(const vfu *)xt); FOLD_MAX(a1, *(const vfu *)(xt + VW));
                        FOLD_MAX(a2, *(const vfu *)(xt + 2 * VW));
                        FOLD_MAX(a3, *(const vfu *)(xt + 3 * VW));)
                *(vfu *)(o + c0) = a0;
                *(vfu *)(o + c0 + VW) = a1;
                *(vfu *)(o + c0 + 2 * VW) = a2;
                *(vfu *)(o + c0 + 3 * VW) = a3;
            }
            for (; c0 + VW <= C; c0 += VW) {
                vf a0 = lowest;
                MP_TAPS(FOLD_MAX(a0, *(const vfu *)xt);)
                *(vfu *)(o + c0) = a0;
            }
            for (; c0 < C; c0++) {
                float acc = -FLT_MAX;
                for (long ky = ky0; ky < ky1; ky++)
                    for (long kx = kx0; kx < kx1; kx++) {
                        const float v = x[((n * H + oy * sh - pt + ky) * W + ox * sw - pl + kx)
                                          * C + c0];
                        acc = acc < v ? v : acc;
                    }
                o[c0] = acc;
            }
        }
    }
}

/* AvgPool of float32 NHWC x over KH x KW windows into out: each window's sum over its taps
 * inside x in (ky, kx) order from 0 (the padding is never read), divided by their count,
 * TensorFlow's average over the real elements; the sums in registers across the taps as
 * MaxPool's fold, the last channels (under a vector) summed a pixel at a time along its
 * contiguous channels. The same sums in the same order as the depthwise kernel by a filter
 * of ones, then the same division: the same bits. Computes output rows [r0, r1). */
CLONES
void dfg_avgpool_nhwc_f32(const float *x, float *out, long H, long W, long C, long KH,
                          long KW, long OH, long OW, long sh, long sw, long pt, long pl,
                          long r0, long r1)
{
    for (long row = r0; row < r1; row++) {
        const long n = row / OH, oy = row % OH;
        const long ky0 = pt - oy * sh > 0 ? pt - oy * sh : 0;
        const long ky1 = H - (oy * sh - pt) < KH ? H - (oy * sh - pt) : KH;
        for (long ox = 0; ox < OW; ox++) {
            float *restrict o = out + (row * OW + ox) * C;
            const long kx0 = pl - ox * sw > 0 ? pl - ox * sw : 0;
            const long kx1 = W - (ox * sw - pl) < KW ? W - (ox * sw - pl) : KW;
            const float count = (float)((ky1 - ky0) * (kx1 - kx0));
            long c0 = 0;
            for (; c0 + 4 * VW <= C; c0 += 4 * VW) {
                vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                MP_TAPS(a0 += *(const vfu *)xt; a1 += *(const vfu *)(xt + VW);
                        a2 += *(const vfu *)(xt + 2 * VW); a3 += *(const vfu *)(xt + 3 * VW);)
                *(vfu *)(o + c0) = a0 / count;
                *(vfu *)(o + c0 + VW) = a1 / count;
                *(vfu *)(o + c0 + 2 * VW) = a2 / count;
                *(vfu *)(o + c0 + 3 * VW) = a3 / count;
            }
            for (; c0 + VW <= C; c0 += VW) {
                vf a0 = {0};
                MP_TAPS(a0 += *(const vfu *)xt;)
                *(vfu *)(o + c0) = a0 / count;
            }
            if (c0 < C) {
                float acc[VW] = {0};
                const long rest = C - c0;
                MP_TAPS(for (long c = 0; c < rest; c++) acc[c] += xt[c];)
                for (long c = 0; c < rest; c++) o[c0 + c] = acc[c] / count;
            }
        }
    }
}

/* The kernels above over all their rows, split on dfg's native thread pool (threadpool.c). */
struct conv_args {
    const float *x, *wb;
    float *out;
    long H, W, C, KH, KW, OC, OH, OW, sh, sw, dh, dw, pt, pl;
    const float *scale, *shift, *res;
    int act;
    long first_pass;        /* the row kernel's first pass (tile column): the flat product
                             * computed those before it */
};

/* wide_registers(), asked once (a benign race: every thread computes the same answer) */
static int wide_cpu(void) {
    static int wide = -1;
    if (wide < 0) wide = wide_registers();
    return wide;
}

static int conv_range(const void *p, long r0, long r1) {
    const struct conv_args *a = p;
    return (wide_cpu() ? dfg_conv2d_nhwc_f32 : dfg_conv2d_nhwc_f32_rb6)(
                               a->x, a->wb, a->out, a->H, a->W, a->C, a->KH, a->KW, a->OC,
                               a->OH, a->OW, a->sh, a->sw, a->dh, a->dw, a->pt, a->pl,
                               a->scale, a->shift, a->res, a->act, r0, r1, a->first_pass);
}

static int narrow_range(const void *p, long r0, long r1) {
    const struct conv_args *a = p;
    dfg_conv_narrow_f32(a->x, a->wb, a->out, a->H, a->W, a->C, a->KH, a->KW, a->OC, a->OH,
                        a->OW, a->sh, a->sw, a->pt, a->pl, a->scale, a->shift, a->res, a->act,
                        r0, r1);
    return 0;
}

struct flat_args {
    const struct flat_src *s;
    const float *wb;
    float *out;
    long M, K, OC;
    const float *scale, *shift, *res;
    int act;
};

static int flat_range(const void *p, long i0, long i1) {
    const struct flat_args *f = p;
    dfg_conv_flat_f32(f->s, f->wb, f->out, f->M, f->K, f->OC, f->scale, f->shift, f->res,
                      f->act, i0, i1);
    return 0;
}

struct pad_args {
    const float *x;
    float *xp;
    long H, W, C, Hp, Wp, pt, pl;
};

static int pad_range(const void *p, long r0, long r1) {
    const struct pad_args *a = p;
    pad_rows(a->x, a->xp, a->H, a->W, a->C, a->Hp, a->Wp, a->pt, a->pl, r0, r1);
    return 0;
}

/* at most this many taps (KH * KW) for the flat product's segment table; past it, rows */
#define FLAT_MAX_TAPS 1024

int dfg_conv2d_nhwc_f32_mt(const float *x, const float *wb, float *out,
                           long H, long W, long C, long KH, long KW, long OC, long OH, long OW,
                           long sh, long sw, long dh, long dw, long pt, long pl,
                           const float *scale, const float *shift, const float *res, int act,
                           long rows, long chunks, int threads, int flat)
{
    struct conv_args a = {x, wb, out, H, W, C, KH, KW, OC, OH, OW, sh, sw, dh, dw, pt, pl,
                          scale, shift, res, act, 0};
    if (flat == DFG_CONV_NARROW) {
        if (OC > DFG_NARROW_MAX || dh != 1 || dw != 1)
            return -2;
        return dfg_pool_run(narrow_range, &a, rows, chunks, threads);
    }
    if (!flat || !wide_cpu() || OC < 4 * VW || KH * KW > FLAT_MAX_TAPS)
        return dfg_pool_run(conv_range, &a, rows, chunks, threads);
    /* The pixels as the rows of one product, read in place (dfg_conv_flat_f32): from the
     * input itself when every window lies inside it, else from a zero-padded copy (the
     * input plus its border) */
    const long N = rows / OH, M = rows * OW, K = KH * KW * C;
    const long Hp = (OH - 1) * sh + (KH - 1) * dh + 1, Wp = (OW - 1) * sw + (KW - 1) * dw + 1;
    const int inside = pt == 0 && pl == 0 && Hp <= H && Wp <= W;
    float *xp = NULL;
    if (!inside) {
        xp = malloc((size_t)N * Hp * Wp * C * sizeof(float));
        if (!xp)
            return -1;
        struct pad_args pa = {x, xp, H, W, C, Hp, Wp, pt, pl};
        dfg_pool_run(pad_range, &pa, N * Hp, threads > 1 ? 2 * threads : 1, threads);
    }
    const long rw = inside ? W : Wp;
    long seg[FLAT_MAX_TAPS];
    /* segment offsets: a row of taps when its columns are adjacent, else each tap */
    long nseg = 0;
    for (long ky = 0; ky < KH; ky++)
        for (long kx = 0; kx < (dw == 1 ? 1 : KW); kx++)
            seg[nseg++] = (ky * dh * rw + kx * dw) * C;
    struct flat_src s = {inside ? x : xp, seg, C, OH, OW, sh, sw, rw * C,
                         (inside ? H : Hp) * rw * C, dw == 1 ? KW * C : C};
    const long items = OC / (4 * VW) * ((M + RT - 1) / RT);
    struct flat_args f = {&s, wb, out, M, K, OC, scale, shift, res, act};
    int err = dfg_pool_run(flat_range, &f, items,
                           threads > 1 ? (items < 4 * threads ? items : 4 * threads) : 1,
                           threads);
    free(xp);
    /* the channels past the last whole tile column (OC not a multiple of 64: Xception's
     * 728): the row kernel's last pass, its pair, long and block tiles, over every row */
    if (!err && OC % (4 * VW)) {
        a.first_pass = OC / (4 * VW);
        err = dfg_pool_run(conv_range, &a, rows, chunks, threads);
    }
    return err;
}

struct dw_args {
    const float *x, *f;
    float *out;
    long H, W, C, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl;
    const float *scale, *shift;
    int act;
};

static int dw_range(const void *p, long r0, long r1) {
    const struct dw_args *a = p;
    dfg_depthwise_nhwc_f32(a->x, a->f, a->out, a->H, a->W, a->C, a->KH, a->KW, a->OH, a->OW,
                           a->sh, a->sw, a->dh, a->dw, a->pt, a->pl, a->scale, a->shift,
                           a->act, r0, r1);
    return 0;
}

int dfg_depthwise_nhwc_f32_mt(const float *x, const float *f, float *out, long H, long W,
                              long C, long KH, long KW, long OH, long OW, long sh, long sw,
                              long dh, long dw, long pt, long pl, const float *scale,
                              const float *shift, int act, long rows, long chunks, int threads)
{
    struct dw_args a = {x, f, out, H, W, C, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl,
                        scale, shift, act};
    return dfg_pool_run(dw_range, &a, rows, chunks, threads);
}

struct mp_args {
    const float *x;
    float *out;
    long H, W, C, KH, KW, OH, OW, sh, sw, pt, pl;
    int avg;
};

static int mp_range(const void *p, long r0, long r1) {
    const struct mp_args *a = p;
    (a->avg ? dfg_avgpool_nhwc_f32 : dfg_maxpool_nhwc_f32)(
        a->x, a->out, a->H, a->W, a->C, a->KH, a->KW, a->OH, a->OW, a->sh, a->sw, a->pt, a->pl,
        r0, r1);
    return 0;
}

int dfg_maxpool_nhwc_f32_mt(const float *x, float *out, long H, long W, long C, long KH,
                            long KW, long OH, long OW, long sh, long sw, long pt, long pl,
                            long rows, long chunks, int threads, int avg)
{
    struct mp_args a = {x, out, H, W, C, KH, KW, OH, OW, sh, sw, pt, pl, avg};
    return dfg_pool_run(mp_range, &a, rows, chunks, threads);
}
