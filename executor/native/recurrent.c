/* A recurrent cell's loop, iterations one after the other without the interpreter: each
 * iteration multiplies one state by the packed recurrent matrix (the direct convolution's 1x1
 * case, conv.c, one thread: the product a compiled program's MatMul computes for these
 * shapes) and runs the cell's elementwise chain (elementwise.c) over that product, the
 * iteration's input row, constant inputs and the states, into the next states and the
 * iteration's output row. The same kernels on the same operands as the program's steps, so
 * the same bits. module.c checks every buffer's length before the call. */
#include <stddef.h>
#include <string.h>

#include "native.h"

/* iteration i of a masked layer: the chain into r->tmp, then each state's next value row
 * by row (the mask's row set: the chain's output, else the state's own value) into the
 * output row or the scratch buffer not holding its current value */
static void masked_step(const struct dfg_recurrent *r, long i, const float *const *in,
                        const float **cur, int *where) {
    float *extra[DFG_CHAIN_MAX_EXTRA];
    for (int k = 0; k < r->n_extra; k++)
        extra[k] = r->tmp[k];
    dfg_chain_f32(in, r->kind, r->offset, r->stride, r->n_in, r->code, r->n_ops,
                  r->tmp[r->n_extra], r->rows, r->cols, r->n_extra, r->extra_op, extra);
    const unsigned char *m = r->masks[i];
    const size_t row_bytes = (size_t)r->cols * sizeof(float);
    for (int s = 0; s < r->n_states; s++) {
        float *dst;
        int next;
        if (s == r->item_state) {
            dst = r->items + i * r->item_len;
            next = 3;
        } else {
            next = where[s] == 1 ? 2 : 1;
            dst = next == 1 ? r->scratch_a[s] : r->scratch_b[s];
        }
        const float *t = r->tmp[r->state_src[s]], *e = cur[s];
        for (long row = 0; row < r->rows; row++) {
            const float *src = !r->state_sel[s] || m[row] ? t : e;
            memcpy(dst + row * r->cols, src + row * r->cols, row_bytes);
        }
        cur[s] = dst;
        where[s] = next;
    }
}

int dfg_recurrent_f32(const struct dfg_recurrent *r, long n) {
    const float *in[DFG_CHAIN_MAX_IN];
    float *extra[DFG_CHAIN_MAX_EXTRA];
    /* the buffer each state's value is in now: its first value, then one of its two
     * scratch buffers or an output row */
    const float *cur[DFG_RECURRENT_MAX_STATES];
    int where[DFG_RECURRENT_MAX_STATES];
    for (int s = 0; s < r->n_states; s++) {
        cur[s] = r->init[s];
        where[s] = 0;
    }
    const long *g = r->geometry;
    for (long i = 0; i < n; i++) {
        if (dfg_conv2d_nhwc_f32_mt(cur[r->mm_state], r->wb, r->product, g[1], g[2], g[3],
                                   g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12],
                                   g[13], g[14], NULL, NULL, NULL, DFG_ACT_NONE, g[0] * g[7],
                                   1, 1, 0))
            return -1;
        for (int j = 0; j < r->n_in; j++) {
            int role = r->role[j];
            in[j] = role == DFG_RC_FIXED ? r->fixed[j]
                    : role == DFG_RC_ROW ? r->rows_in[i]
                    : role == DFG_RC_PRODUCT ? r->product : cur[role];
        }
        if (r->masks) {
            masked_step(r, i, in, cur, where);
            continue;
        }
        /* each output's buffer: the output row, else the scratch buffer of its state that
         * does not hold the state's current value */
        float *dst[DFG_CHAIN_MAX_EXTRA + 1];
        int next_where[DFG_CHAIN_MAX_EXTRA + 1];
        for (int k = 0; k <= r->n_extra; k++) {
            int s = r->out_state[k];
            if (k == r->item_out) {
                dst[k] = r->items + i * r->item_len;
                next_where[k] = 3;
            } else {
                next_where[k] = where[s] == 1 ? 2 : 1;
                dst[k] = next_where[k] == 1 ? r->scratch_a[s] : r->scratch_b[s];
            }
        }
        for (int k = 0; k < r->n_extra; k++)
            extra[k] = dst[k];
        dfg_chain_f32(in, r->kind, r->offset, r->stride, r->n_in, r->code, r->n_ops,
                      dst[r->n_extra], r->rows, r->cols, r->n_extra, r->extra_op, extra);
        for (int k = 0; k <= r->n_extra; k++) {
            int s = r->out_state[k];
            if (s >= 0) {
                cur[s] = dst[k];
                where[s] = next_where[k];
            }
        }
    }
    for (int s = 0; s < r->n_states; s++)
        r->final_where[s] = where[s];
    return 0;
}
