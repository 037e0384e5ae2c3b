"""Fused recurrent cells: LSTMBlockCell, GRUBlockCell, BlockLSTM, BlockLSTMV2 and their
gradients, as TensorFlow's ``core/kernels/rnn`` computes them.

Gate layouts: ``w`` is ``[input_size + cell_size, 4 * cell_size]`` applied to ``[x, h_prev]``;
its column blocks are i, c, f, o (LSTMBlockCell, BlockLSTM) or i, f, c, o (BlockLSTMV2).
BlockLSTMV2 has no forget_bias (0) and its cell_clip defaults to 0 (off); clipping applies
only when cell_clip > 0. Peephole weights (wci, wcf, wco) are used only with use_peephole.

BlockLSTM runs ``seq_len_max`` steps; past it TF zeroes cs and h and leaves the other outputs
uninitialized (zeros here). float16 is computed in float32 and rounded once at the end
(TF rounds after each elementwise step, so results agree to float16 precision).
"""

from __future__ import annotations

import numpy as np

from dfg.graphdef.errors import InvalidArgumentError

from .registry import KernelContext, kernel

_ICFO, _IFCO = "icfo", "ifco"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _work(*xs: np.ndarray) -> list[np.ndarray]:
    """Inputs in the compute dtype (float16 -> float32)."""
    return [x.astype(np.float32) if x.dtype == np.float16 else x for x in xs]


def _rank(x: np.ndarray, r: int, name: str) -> None:
    if x.ndim != r:
        raise InvalidArgumentError(f"{name} must be rank {r} but is rank {x.ndim}")


def _eq(got: int, want: int, what: str) -> None:
    if got != want:
        raise InvalidArgumentError(f"{what}: {got} vs. {want}")


def _split(gates: np.ndarray, n: int, layout: str) -> tuple[np.ndarray, ...]:
    """(i, c, f, o) pre-activations from the fused gate matrix."""
    i, g1, g2, o = (gates[..., k * n:(k + 1) * n] for k in range(4))
    return (i, g1, g2, o) if layout == _ICFO else (i, g2, g1, o)


def _join(di: np.ndarray, dci: np.ndarray, df: np.ndarray, do: np.ndarray,
          layout: str) -> np.ndarray:
    mid = (dci, df) if layout == _ICFO else (df, dci)
    return np.concatenate((di,) + mid + (do,), axis=-1)


def _lstm_step(x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias: float, cell_clip: float,
               peephole: bool, layout: str) -> tuple[np.ndarray, ...]:
    """One LSTM step (TF's LSTMBlockCellFprop): (i, cs, f, o, ci, co, h)."""
    dt = x.dtype.type
    n = cs_prev.shape[1]
    gates = np.concatenate([x, h_prev], axis=1) @ w + b
    gi, gc, gf, go = _split(gates, n, layout)
    i = _sigmoid(gi + cs_prev * wci) if peephole else _sigmoid(gi)
    ci = np.tanh(gc)
    f = gf + dt(forget_bias)
    f = _sigmoid(f + cs_prev * wcf) if peephole else _sigmoid(f)
    cs = i * ci + f * cs_prev
    if cell_clip > 0:
        c = dt(cell_clip)
        cs = np.minimum(np.maximum(cs, -c), c)
    co = np.tanh(cs)
    o = _sigmoid(go + cs * wco) if peephole else _sigmoid(go)
    return i, cs, f, o, ci, co, o * co


def _cell_bprop(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad, wci, wcf, wco,
                peephole: bool) -> tuple[np.ndarray, ...]:
    """TF's LSTMBlockCellBprop core: (di, dci, df, do, cs_prev_grad)."""
    one = i.dtype.type(1)
    do = o * (one - o) * h_grad * co
    dcs = (one - co * co) * h_grad * o + cs_grad
    if peephole:
        dcs = dcs + do * wco
    dci = (one - ci * ci) * dcs * i
    df = f * (one - f) * dcs * cs_prev
    di = i * (one - i) * dcs * ci
    cs_prev_grad = dcs * f
    if peephole:
        cs_prev_grad = cs_prev_grad + di * wci + df * wcf
    return di, dci, df, do, cs_prev_grad


def _check_cell(x, cs_prev, h_prev, w, wci, wcf, wco, b) -> tuple[int, int, int]:
    """LSTMBlockCell's input checks; (batch, input_size, cell_size)."""
    _rank(x, 2, "x_tensor")
    _rank(cs_prev, 2, "cs_prev_tensor")
    batch, input_size = x.shape
    cell = cs_prev.shape[1]
    _eq(cs_prev.shape[0], batch, "cs_prev.dims(0) != batch_size")
    _rank(h_prev, 2, "h_prev_tensor")
    _eq(h_prev.shape[0], batch, "h_prev.dims(0) != batch_size")
    _eq(h_prev.shape[1], cell, "h_prev.dims(1) != cell_size")
    _rank(w, 2, "w_tensor")
    _eq(w.shape[0], input_size + cell, "w.dim_size(0) != input_size + cell_size")
    _eq(w.shape[1], cell * 4, "w.dim_size(1) != cell_size * 4")
    for t, name in ((wci, "wci_tensor"), (wcf, "wcf_tensor"), (wco, "wco_tensor"),
                    (b, "b_tensor")):
        _rank(t, 1, name)
    _eq(b.shape[0], cell * 4, "b.dim_size(0) != cell_size * 4")
    if batch == 0 or cell == 0:
        raise InvalidArgumentError(f"cs_prev_tensor is empty, has shape: ({batch},{cell}).")
    return batch, input_size, cell


def _check_peep(peephole: bool, cell: int, *ws: np.ndarray) -> None:
    # TF reads cell_size peephole weights without checking their length (the cell ops).
    if peephole:
        for wt, name in zip(ws, ("wci", "wcf", "wco")):
            _eq(wt.shape[0], cell, f"{name}.dim_size(0) != cell_size")


@kernel("LSTMBlockCell", heavy=True)
def lstm_block_cell(ctx: KernelContext, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    a = ctx.attrs
    _, _, cell = _check_cell(x, cs_prev, h_prev, w, wci, wcf, wco, b)
    peep = bool(a.get("use_peephole", False))
    _check_peep(peep, cell, wci, wcf, wco)
    dt = x.dtype
    out = _lstm_step(*_work(x, cs_prev, h_prev, w, wci, wcf, wco, b),
                     float(a.get("forget_bias", 1.0)), float(a.get("cell_clip", 3.0)), peep,
                     _ICFO)
    return tuple(v.astype(dt) for v in out)


@kernel("LSTMBlockCellGrad")
def lstm_block_cell_grad(ctx: KernelContext, x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs,
                         f, o, ci, co, cs_grad, h_grad):
    batch, _, cell = _check_cell(x, cs_prev, h_prev, w, wci, wcf, wco, b)
    for t, name in ((i, "i"), (cs, "cs"), (f, "f"), (o, "o"), (ci, "ci"), (co, "co"),
                    (cs_grad, "cs_grad_tensor"), (h_grad, "h_grad_tensor")):
        _rank(t, 2, name)
        _eq(t.shape[0], batch, f"{name}.dim_size(0) != batch_size")
        _eq(t.shape[1], cell, f"{name}.dim_size(1) != cell_size")
    peep = bool(ctx.attrs["use_peephole"])
    _check_peep(peep, cell, wci, wcf, wco)
    dt = x.dtype
    cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad = _work(
        cs_prev, wci, wcf, wco, i, cs, f, o, ci, co, cs_grad, h_grad)
    di, dci, df, do, cs_prev_grad = _cell_bprop(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad,
                                                wci, wcf, wco, peep)
    dgates = _join(di, dci, df, do, _ICFO)
    if peep:
        wg = [(di * cs_prev).sum(0), (df * cs_prev).sum(0), (do * cs).sum(0)]
    else:
        wg = [np.zeros(wci.shape, wci.dtype), np.zeros(wcf.shape, wcf.dtype),
              np.zeros(wco.shape, wco.dtype)]
    return tuple(v.astype(dt) for v in [cs_prev_grad, dgates] + wg)


def _check_block(seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b) -> tuple[int, ...]:
    """BlockLSTM's input checks; (steps, time, batch, input_size, cell_size)."""
    if seq_len_max.ndim != 0:
        raise InvalidArgumentError(
            f"`seq_len_max_tensor` must be rank 0 but is rank {seq_len_max.ndim}")
    if x.ndim != 3:
        raise InvalidArgumentError("x must be 3D")
    time, batch, input_size = x.shape
    if cs_prev.ndim != 2:
        raise InvalidArgumentError("cs_prev must be 2D")
    _eq(cs_prev.shape[0], batch, "cs_prev.dims(0) != batch_size")
    cell = cs_prev.shape[1]
    if h_prev.ndim != 2:
        raise InvalidArgumentError("h_prev must be 2D")
    _eq(h_prev.shape[0], batch, "h_prev.dims(0) != batch_size")
    _eq(h_prev.shape[1], cell, "h_prev.dims(1) != cell_size")
    if w.ndim != 2:
        raise InvalidArgumentError("w must be 2D")
    _eq(w.shape[0], input_size + cell, "w.dim_size(0) != input_size + cell_size")
    _eq(w.shape[1], cell * 4, "w.dim_size(1) != cell_size * 4")
    for t, name in ((wci, "wci"), (wcf, "wcf"), (wco, "wco")):
        if t.ndim != 1:
            raise InvalidArgumentError(f"{name} must be 1D")
        _eq(t.shape[0], cell, f"{name}.dim_size(0) != cell_size")
    if b.ndim != 1:
        raise InvalidArgumentError("b must be 1D")
    _eq(b.shape[0], cell * 4, "b.dim_size(0) != cell_size * 4")
    steps = int(seq_len_max)
    if not 0 <= steps <= time:
        raise InvalidArgumentError(f"seq_len_max must be between 0 and {time} but is {steps}")
    return steps, time, batch, input_size, cell


def _block_lstm(ctx: KernelContext, layout: str, forget_bias: float, cell_clip: float,
                seq_len_max, x, cs_prev, h_prev, w, wci, wcf, wco, b):
    steps, time, batch, _, cell = _check_block(seq_len_max, x, cs_prev, h_prev, w, wci, wcf,
                                               wco, b)
    dt = x.dtype
    x, cs_prev, h_prev, w, wci, wcf, wco, b = _work(x, cs_prev, h_prev, w, wci, wcf, wco, b)
    outs = [np.zeros((time, batch, cell), x.dtype) for _ in range(7)]
    peep = bool(ctx.attrs.get("use_peephole", False))
    cs, h = cs_prev, h_prev
    for t in range(steps):
        step = _lstm_step(x[t], cs, h, w, wci, wcf, wco, b, forget_bias, cell_clip, peep,
                          layout)
        for k in range(7):
            outs[k][t] = step[k]
        cs, h = step[1], step[6]
    return tuple(v.astype(dt) for v in outs)


@kernel("BlockLSTM")
def block_lstm(ctx: KernelContext, *args):
    a = ctx.attrs
    return _block_lstm(ctx, _ICFO, float(a.get("forget_bias", 1.0)),
                       float(a.get("cell_clip", 3.0)), *args)


@kernel("BlockLSTMV2")
def block_lstm_v2(ctx: KernelContext, *args):
    return _block_lstm(ctx, _IFCO, 0.0, float(ctx.attrs.get("cell_clip", 0.0)), *args)


def _block_lstm_grad(ctx: KernelContext, layout: str, seq_len_max, x, cs_prev, h_prev, w,
                     wci, wcf, wco, b, i, cs, f, o, ci, co, h, cs_grad, h_grad):
    if seq_len_max.ndim != 0:
        raise InvalidArgumentError(
            f"`seq_len_max_tensor` must be rank 0 but is rank {seq_len_max.ndim}")
    _rank(x, 3, "x")
    time, batch, input_size = x.shape
    _rank(cs_prev, 2, "cs_prev")
    _rank(h_prev, 2, "h_prev")
    _rank(w, 2, "w")
    if not (w.shape[1] > 0 and w.shape[1] % 4 == 0):
        raise InvalidArgumentError(
            f"w matrix columns must be a positive multiple of 4, but got {w.shape[1]}")
    cell = w.shape[1] // 4
    if input_size + cell != w.shape[0]:
        raise InvalidArgumentError(
            f"w matrix rows don't match: {input_size + cell} vs. {w.shape[0]}")
    for t, name in ((wci, "wci"), (wcf, "wcf"), (wco, "wco"), (b, "b")):
        _rank(t, 1, name)
    if cell != b.shape[0] // 4:
        raise InvalidArgumentError(f"w and b cell_size don't match: {cell} vs. {b.shape[0]}")
    for t, name in ((i, "i"), (cs, "cs"), (f, "f"), (o, "o"), (ci, "ci"), (co, "co"),
                    (h, "h")):
        if t.ndim != 3:
            raise InvalidArgumentError(f"{name} must be rank 3. Received: {t.ndim}")
    steps = int(seq_len_max)
    if not 0 <= steps <= time:
        raise InvalidArgumentError(f"seq_len_max must be between 0 and {time} but is {steps}")
    peep = bool(ctx.attrs["use_peephole"])
    shape_mismatch = [(cs_prev, (batch, cell)), (h_prev, (batch, cell))] + [
        (t, (time, batch, cell)) for t in (i, cs, f, o, ci, co, h, cs_grad, h_grad)]
    for t, want in shape_mismatch:
        if t.shape != want:
            raise InvalidArgumentError(f"expected shape {list(want)}, got {list(t.shape)}")
    if peep:
        _check_peep(peep, cell, wci, wcf, wco)
    dt = x.dtype
    (x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h, cs_grad,
     h_grad) = _work(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, h, cs_grad,
                     h_grad)
    wd = x.dtype
    x_grad = np.zeros((time, batch, input_size), wd)
    cs_prev_grad = np.zeros((batch, cell), wd)
    h_prev_grad = np.zeros((batch, cell), wd)
    w_grad = np.zeros(w.shape, wd)
    b_grad = np.zeros(b.shape, wd)
    wci_grad, wcf_grad, wco_grad = (np.zeros(t.shape, wd) for t in (wci, wcf, wco))
    for t in range(steps - 1, -1, -1):
        csp = cs_prev if t == 0 else cs[t - 1]
        hp = h_prev if t == 0 else h[t - 1]
        dcs_in = cs_prev_grad + cs_grad[t]
        dh_in = h_prev_grad + h_grad[t]
        di, dci, df, do, cs_prev_grad = _cell_bprop(csp, i[t], cs[t], f[t], o[t], ci[t],
                                                    co[t], dcs_in, dh_in, wci, wcf, wco, peep)
        dgates = _join(di, dci, df, do, layout)
        xh_grad = dgates @ w.T
        x_grad[t] = xh_grad[:, :input_size]
        h_prev_grad = xh_grad[:, input_size:]
        w_grad += np.concatenate([x[t], hp], axis=1).T @ dgates
        b_grad += dgates.sum(0)
        if peep:
            wci_grad += (di * csp).sum(0)
            wcf_grad += (df * csp).sum(0)
            wco_grad += (do * cs[t]).sum(0)
    return tuple(v.astype(dt) for v in (x_grad, cs_prev_grad, h_prev_grad, w_grad, wci_grad,
                                        wcf_grad, wco_grad, b_grad))


@kernel("BlockLSTMGrad")
def block_lstm_grad(ctx: KernelContext, *args):
    return _block_lstm_grad(ctx, _ICFO, *args)


@kernel("BlockLSTMGradV2")
def block_lstm_grad_v2(ctx: KernelContext, *args):
    return _block_lstm_grad(ctx, _IFCO, *args)


def _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c) -> tuple[int, int, int]:
    if x.ndim != 2:
        raise InvalidArgumentError(f"Rank of x must be 2, got {x.ndim}")
    batch, input_size = x.shape
    if h_prev.ndim != 2:
        raise InvalidArgumentError(f"Rank of h_prev must be 2, got {h_prev.ndim}")
    _eq(h_prev.shape[0], batch, "h_prev.dims(0) != batch_size")
    cell = h_prev.shape[1]
    if w_ru.ndim != 2:
        raise InvalidArgumentError(f"Rank of w_ru_ must be 2, got {w_ru.ndim}")
    _eq(w_ru.shape[0], input_size + cell, "w_ru.dim_size(0) != input_size + cell_size")
    _eq(w_ru.shape[1], cell * 2, "w_ru.dim_size(1) != cell_size * 2")
    if w_c.ndim != 2:
        raise InvalidArgumentError(f"Rank of w_c must be 2, got {w_c.ndim}")
    _eq(w_c.shape[0], input_size + cell, "w_c.dim_size(0) != input_size + cell_size")
    _eq(w_c.shape[1], cell, "w_c.dim_size(1) != cell_size")
    if b_ru.ndim != 1:
        raise InvalidArgumentError(f"Rank of b_ru must be 1, got {b_ru.ndim}")
    _eq(b_ru.shape[0], cell * 2, "b_ru.dim_size(0) != cell_size * 2")
    if b_c.ndim != 1:
        raise InvalidArgumentError(f"Rank of b_c must be 1, got {b_c.ndim}")
    _eq(b_c.shape[0], cell, "b_c.dim_size(0) != cell_size")
    return batch, input_size, cell


@kernel("GRUBlockCell")
def gru_block_cell(ctx: KernelContext, x, h_prev, w_ru, w_c, b_ru, b_c):
    _, _, n = _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    ru = np.concatenate([x, h_prev], axis=1) @ w_ru + b_ru
    r = _sigmoid(ru[:, :n])
    u = _sigmoid(ru[:, n:])
    c = np.tanh(np.concatenate([x, h_prev * r], axis=1) @ w_c + b_c)
    h = u * (h_prev - c) + c
    return r, u, c, h


@kernel("GRUBlockCellGrad")
def gru_block_cell_grad(ctx: KernelContext, x, h_prev, w_ru, w_c, b_ru, b_c, r, u, c, d_h):
    batch, input_size, cell = _check_gru(x, h_prev, w_ru, w_c, b_ru, b_c)
    for t, name in ((r, "r"), (u, "u"), (c, "c"), (d_h, "d_h")):
        if t.ndim != 2:
            raise InvalidArgumentError(f"Rank of {name} must be 2, got {t.ndim}")
        _eq(t.shape[0], batch, f"{name}.dims(0) != batch_size")
        _eq(t.shape[1], cell, f"{name}.dims(1) != cell_size")
    one = x.dtype.type(1)
    d_c_bar = (d_h * (one - u)) * (one - c * c)
    d_u_bar = d_h * (h_prev - c) * u * (one - u)
    dxh2 = d_c_bar @ w_c.T
    d_hr = dxh2[:, input_size:]
    d_r_bar = (d_hr * h_prev * r) * (one - r)
    d_ru = np.concatenate([d_r_bar, d_u_bar], axis=1)
    dxh1 = d_ru @ w_ru.T
    d_x = (dxh1 + dxh2)[:, :input_size]
    d_h_prev = dxh1[:, input_size:] + d_hr * r + d_h * u
    return d_x, d_h_prev, d_c_bar, d_ru
