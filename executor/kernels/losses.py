"""Loss kernels: softmax cross-entropy with dense and sparse labels (loss and backprop), CTC loss
and the CTC greedy and beam-search decoders."""

from __future__ import annotations

import math

import numpy as np

from dfg.graphdef.errors import FailedPreconditionError, InvalidArgumentError

from ._stdalgo import TopN as _TopN
from .registry import KernelContext, kernel


def _log_softmax(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log_softmax, softmax) along the last axis, shifted by the row max for stability."""
    work = logits.astype(np.float32) if logits.dtype == np.float16 else logits
    shifted = work - work.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    logp = shifted - lse
    return logp, np.exp(logp)


@kernel("SoftmaxCrossEntropyWithLogits")
def softmax_cross_entropy_with_logits(ctx: KernelContext, features: np.ndarray,
                                      labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        shape = np.broadcast_shapes(features.shape, labels.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"logits and labels must be broadcastable: logits_size={list(features.shape)} "
            f"labels_size={list(labels.shape)}") from None
    if len(shape) != 2:
        raise InvalidArgumentError(
            f"logits and labels must be either 2-dimensional, or broadcasted to be "
            f"2-dimensional, got shape {list(shape)}")
    f = np.broadcast_to(features, shape)
    y = np.broadcast_to(labels, shape)
    logp, p = _log_softmax(f)
    loss = -(y * logp).sum(axis=-1)
    dt = features.dtype
    return loss.astype(dt), (p - y).astype(dt)


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy_with_logits(ctx: KernelContext, features: np.ndarray,
                                             labels: np.ndarray,
                                             ) -> tuple[np.ndarray, np.ndarray]:
    if features.ndim != 2:
        raise InvalidArgumentError(f"logits must be 2-D, but got shape {list(features.shape)}")
    if labels.ndim != 1:
        raise InvalidArgumentError(f"labels must be 1-D, but got shape {list(labels.shape)}")
    if features.shape[0] != labels.shape[0]:
        raise InvalidArgumentError(
            f"logits and labels must have the same first dimension, got logits shape "
            f"{list(features.shape)} and labels shape {list(labels.shape)}")
    if features.shape[1] == 0 and labels.size:
        raise InvalidArgumentError(
            f"Must have at least one class, but got logits shape {list(features.shape)}")
    classes = features.shape[1]
    bad = (labels < 0) | (labels >= classes)
    if bad.any():
        v = labels[int(np.argmax(bad))]
        raise InvalidArgumentError(
            f"Received a label value of {v} which is outside the valid range of "
            f"[0, {classes}).  Label values: {' '.join(str(x) for x in labels)}")
    logp, p = _log_softmax(features)
    rows = np.arange(labels.size)
    loss = -logp[rows, labels]
    back = p.copy()
    back[rows, labels] -= 1
    dt = features.dtype
    return loss.astype(dt), back.astype(dt)


# --- CTC ------------------------------------------------------------------------------------
#
# TensorFlow's CTC kernels work in log space with one quirk kept here: the log-sum-exp of two
# log probabilities adds ``log1pf(expf(smaller - larger))``, a float32 correction, also for
# float64 inputs (and the gradient's ``expf`` is float32 too).

_F32 = np.float32


def _log1p_exp32(d):
    """log1pf(expf(d)) with d rounded to float32: each step computed in float64 and rounded,
    which gives the correctly rounded float32 results C's expf/log1pf aim for."""
    e = np.exp(np.asarray(d).astype(_F32).astype(np.float64)).astype(_F32)
    return np.log1p(e.astype(np.float64)).astype(_F32)


def _lse(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """TF's two-term LogSumExp (ctc_loss_util.h), elementwise, in a's dtype."""
    dt = a.dtype
    with np.errstate(invalid="ignore", over="ignore"):
        hi = np.where(a > b, a, b)
        lo = np.where(a > b, b, a)
        corr = _log1p_exp32(lo - hi).astype(dt)
        out = hi + corr
    out = np.where(a == -np.inf, b, out)
    return np.where((b == -np.inf) & (a != -np.inf), a, out)


def _ctc_labels(labels_indices: np.ndarray, labels_values: np.ndarray,
                batch: int) -> list[list[int]]:
    """The label sequence of each batch entry from the sparse labels (validated as TF's
    SparseTensor with shape [batch, max_label_len] and row-major order)."""
    if labels_indices.shape[1] != 2:
        raise InvalidArgumentError(
            f"Dimension mismatch between indices and shape: {labels_indices.shape[1]} vs. 2")
    idx = labels_indices.astype(np.int64)
    width = int(idx[:, 1].max()) + 1 if idx.shape[0] else 0
    width = max(width, 0)
    for n, (b, j) in enumerate(idx.tolist()):
        if not (0 <= b < batch and 0 <= j < width):
            raise InvalidArgumentError(
                f"label SparseTensor is not valid: indices[{n}] = [{b},{j}] is out of bounds: "
                f"need 0 <= index < [{batch},{width}]")
        if n and (b, j) <= tuple(idx[n - 1].tolist()):
            raise InvalidArgumentError(
                f"label SparseTensor is not valid: indices[{n}] = [{b},{j}] is out of order. "
                f"Many sparse ops require sorted indices.")
    labels: list[list[int]] = [[] for _ in range(batch)]
    for (b, _), v in zip(idx.tolist(), labels_values.tolist()):
        labels[b].append(int(v))
    return labels


def _ctc_l_prime(label: list[int], b: int, classes: int, collapse: bool,
                 blank: int) -> list[int]:
    """l' = blank, l1, blank, l2, ..., blank, after TF's label preprocessing."""
    if not label:
        raise InvalidArgumentError(f"Labels length is zero in batch {b}")
    out: list[int] = []
    finished = False
    for i, v in enumerate(label):
        if i == 0 or not collapse or v != label[i - 1]:
            if v >= classes - 1:
                finished = True
            elif finished:
                raise InvalidArgumentError(
                    f"Saw a non-null label (index >= num_classes - 1) following a null label, "
                    f"batch: {b} num_classes: {classes} labels: "
                    f"{','.join(map(str, label))} labels seen so far: {','.join(map(str, out))}")
            else:
                out.append(v)
    if any(v < 0 for v in out):
        raise InvalidArgumentError(
            f"All labels must be nonnegative integers, batch: {b} labels: "
            f"{','.join(map(str, out))}")
    lp = [blank]
    for v in out:
        lp += [v, blank]
    return lp


@kernel("CTCLoss")
def ctc_loss(ctx: KernelContext, inputs: np.ndarray, labels_indices: np.ndarray,
             labels_values: np.ndarray, sequence_length: np.ndarray,
             ) -> tuple[np.ndarray, np.ndarray]:
    a = ctx.attrs
    if inputs.ndim != 3:
        raise InvalidArgumentError("inputs is not a 3-Tensor")
    if sequence_length.ndim != 1:
        raise InvalidArgumentError("sequence_length is not a vector")
    if labels_indices.ndim != 2:
        raise InvalidArgumentError("labels_indices is not a matrix")
    if labels_values.ndim != 1:
        raise InvalidArgumentError("labels_values is not a vector")
    max_time, batch, classes = inputs.shape
    if batch != sequence_length.shape[0]:
        raise InvalidArgumentError(
            f"len(sequence_length) != batch_size.  len(sequence_length):  "
            f"{sequence_length.shape[0]} batch_size: {batch}")
    if labels_indices.shape[0] != labels_values.shape[0]:
        raise InvalidArgumentError(
            f"labels_indices and labels_values must contain the same number of rows, but saw "
            f"shapes: {list(labels_indices.shape)} vs. {list(labels_values.shape)}")
    if batch == 0:
        raise InvalidArgumentError("batch_size must not be 0")
    labels = _ctc_labels(labels_indices, labels_values, batch)
    seq = [int(s) for s in sequence_length]
    for b, s in enumerate(seq):
        if s > max_time:
            raise InvalidArgumentError(f"sequence_length({b}) <= {max_time}")
    for b, s in enumerate(seq):
        if s < 0:
            raise InvalidArgumentError(f"seq_len({b}) < 0")
    blank = classes - 1
    ignore_longer = bool(a.get("ignore_longer_outputs_than_inputs", False))
    l_primes = []
    for b in range(batch):
        lp = _ctc_l_prime(labels[b], b, classes, bool(a.get("preprocess_collapse_repeated",
                                                              False)), blank)
        if not ignore_longer and len(labels[b]) > seq[b]:
            raise InvalidArgumentError(
                f"Not enough time for target transition sequence (required: {len(labels[b])}"
                f", available: {seq[b]}){b}You can turn this error into a warning by using "
                f"the flag ignore_longer_outputs_than_inputs")
        l_primes.append(lp)
    dt = inputs.dtype
    loss = np.zeros(batch, dt)
    grad = np.zeros(inputs.shape, dt)
    # Entries TF skips (zero loss and gradient): empty sequences and, when asked, labels
    # longer than the sequence.
    run = [b for b in range(batch)
           if seq[b] > 0 and not (ignore_longer and len(labels[b]) > seq[b])]
    if run:
        lo, gr = _ctc_forward_backward(inputs[:, run, :], [l_primes[b] for b in run],
                                       np.array([seq[b] for b in run]), blank,
                                       bool(a.get("ctc_merge_repeated", True)))
        loss[run] = lo
        grad[:, run, :] = gr
    return loss, grad


def _ctc_forward_backward(x: np.ndarray, l_primes: list[list[int]], seq: np.ndarray,
                          blank: int, merge: bool) -> tuple[np.ndarray, np.ndarray]:
    """Loss and gradient of each batch entry (all with seq > 0), vectorized over the batch:
    GravesTh eqs 7.5-7.34 as TF computes them, including its restriction of each time step
    to the u that can still reach the end."""
    dt = x.dtype
    ninf = dt.type(-np.inf)
    t_max, batch, classes = x.shape
    u_len = np.array([len(lp) for lp in l_primes])
    big_u = int(u_len.max())
    lp = np.full((batch, big_u), blank, np.int64)
    for b, seq_lp in enumerate(l_primes):
        lp[b, :len(seq_lp)] = seq_lp
    # softmax as TF: exp(x - max) / sum, then log of that (not a log-softmax)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=2, keepdims=True))
        y = e / e.sum(axis=2, keepdims=True)
        logy = np.log(y)                                             # [T, B, C]
    rows = np.arange(batch)[:, None]
    # log y of each l' position at each t: [T, B, U]
    ly = logy[:, rows, lp]
    u_idx = np.arange(big_u)
    is_blank = lp == blank
    stay = np.full((batch, big_u), merge) | is_blank
    skip = np.zeros((batch, big_u), bool)
    skip[:, 2:] = ~is_blank[:, 2:] & ~(merge & (lp[:, 2:] == lp[:, :-2]))

    def window(t: np.ndarray) -> np.ndarray:
        """[B, U]: the u TF updates at step t (per entry's own T)."""
        t = t[:, None]
        lo = np.maximum(0, u_len[:, None] - 2 * (seq[:, None] - t))
        hi = np.minimum(u_len[:, None], 2 * (t + 1))
        return (u_idx >= lo) & (u_idx < hi)

    alpha = np.full((t_max, batch, big_u), ninf, dt)
    alpha[0, :, 0] = ly[0, :, 0]
    alpha[0, :, 1] = ly[0, :, 1]
    for t in range(1, t_max):
        prev = alpha[t - 1]
        s = np.where(stay, prev, ninf)
        s[:, 1:] = _lse(s[:, 1:], prev[:, :-1])
        s2 = _lse(s[:, 2:], prev[:, :-2])
        s[:, 2:] = np.where(skip[:, 2:], s2, s[:, 2:])
        new = ly[t] + s
        live = window(np.full(batch, t)) & (t < seq)[:, None]
        alpha[t] = np.where(live, new, ninf)
    beta = np.full((t_max, batch, big_u), ninf, dt)
    last = seq - 1
    init = (u_idx >= u_len[:, None] - 2) & (u_idx < u_len[:, None])
    beta[last, np.arange(batch)] = np.where(init, dt.type(0), ninf)
    for t in range(t_max - 2, -1, -1):
        nxt = beta[t + 1] + ly[t + 1]
        cur = np.full((batch, big_u), ninf, dt)
        cur = np.where(stay, _lse(cur, nxt), cur)
        cur[:, :-1] = _lse(cur[:, :-1], nxt[:, 1:])
        c2 = _lse(cur[:, :-2], nxt[:, 2:])
        cur[:, :-2] = np.where(skip[:, 2:], c2, cur[:, :-2])
        live = window(np.full(batch, t)) & (t < last)[:, None]
        beta[t] = np.where(live, cur, beta[t])
    ab = alpha + beta                                                 # [T, B, U]
    log_p = np.full(batch, ninf, dt)
    for u in range(big_u):
        log_p = np.where(u < u_len, _lse(log_p, ab[0, :, u]), log_p)
    # gradient: y - exp(logsumexp over u with l'[u] == k of alpha*beta - log p)
    prob = np.full((t_max, batch, classes), ninf, dt)
    bidx = np.arange(batch)
    for u in range(big_u):
        has = u < u_len
        k = lp[:, u]
        cur = prob[:, bidx, k]
        prob[:, bidx, k] = np.where(has, _lse(cur, ab[:, :, u]), cur)
    with np.errstate(over="ignore", invalid="ignore"):
        neg = np.exp((prob - log_p[:, None]).astype(_F32)).astype(dt)
    grad = y - neg
    grad = np.where((log_p == ninf)[:, None], y, grad)
    valid = np.arange(t_max)[:, None] < seq[None, :]
    grad = np.where(valid[:, :, None], grad, dt.type(0))
    return -log_p, grad


def _decoder_inputs(inputs: np.ndarray, sequence_length: np.ndarray) -> list[int]:
    """TF's shared decoder checks; the sequence lengths as ints."""
    if inputs.ndim != 3:
        raise InvalidArgumentError("inputs is not a 3-Tensor")
    if inputs.size == 0:
        raise InvalidArgumentError("inputs must not be empty")
    if sequence_length.ndim != 1:
        raise InvalidArgumentError("sequence_length is not a vector")
    max_time, batch = inputs.shape[:2]
    if batch != sequence_length.shape[0]:
        raise FailedPreconditionError(
            f"len(sequence_length) != batch_size.  len(sequence_length):  "
            f"{sequence_length.shape[0]} batch_size: {batch}")
    seq = [int(s) for s in sequence_length]
    for b, s in enumerate(seq):
        if s > max_time:
            raise FailedPreconditionError(f"sequence_length({b}) <= {max_time}")
    return seq


def _sparse_paths(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One decoded path per batch entry as TF's sparse (indices, values, dense_shape)."""
    ind = [(b, t) for b, p in enumerate(paths) for t in range(len(p))]
    vals = [v for p in paths for v in p]
    longest = max((len(p) for p in paths), default=0)
    return (np.array(ind, np.int64).reshape(-1, 2), np.array(vals, np.int64),
            np.array([len(paths), longest], np.int64))


@kernel("CTCGreedyDecoder")
def ctc_greedy_decoder(ctx: KernelContext, inputs: np.ndarray, sequence_length: np.ndarray,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    seq = _decoder_inputs(inputs, sequence_length)
    max_time, batch, classes = inputs.shape
    bi = int(ctx.attrs.get("blank_index", -1))
    blank = classes + bi if bi < 0 else bi
    if not 0 <= blank < classes:
        raise InvalidArgumentError(
            f"blank_index expected to be between {-classes} and {classes - 1} but was {bi}")
    merge = bool(ctx.attrs.get("merge_repeated", False))
    # TF's row max keeps the first strictly greater value: NaN never wins, except that a
    # NaN in class 0 stays the max of its row.
    filled = np.where(np.isnan(inputs), -np.inf, inputs)
    best = np.argmax(filled, axis=2)
    best = np.where(np.isnan(inputs[:, :, 0]), 0, best)
    top = np.take_along_axis(inputs, best[:, :, None], axis=2)[:, :, 0]
    valid = np.arange(max_time)[:, None] < np.array(seq)[None, :]
    logp = np.zeros(batch, inputs.dtype)
    for t in range(max_time):  # summed step by step, in order, as TF does
        logp = np.where(valid[t], logp + -top[t], logp)
    prev = np.concatenate([np.full((1, batch), -1), best[:-1]], axis=0)
    keep = valid & (best != blank) & ~(merge & (best == prev))
    paths = [best[keep[:, b], b].tolist() for b in range(batch)]
    ind, vals, shape = _sparse_paths(paths)
    return ind, vals, shape, logp[:, None]


# --- CTC beam search ----------------------------------------------------------------------------
#
# The beam search follows TF's CTCBeamSearchDecoder (ctc_beam_search.h) step by step. Which
# beams survive, and in which order equal-probability beams come out, depends on the exact
# sequence of comparisons of TF's TopN container (tensorflow/core/lib/gtl/top_n.h) and the
# libstdc++ heap and sort algorithms underneath it (``_stdalgo``), so those are reproduced
# as well.

class _Beam:
    """One beam entry: a prefix (parent + label) with its old and new log probabilities,
    each as [total, blank, label]."""

    __slots__ = ("parent", "label", "children", "old", "new")

    def __init__(self, parent: _Beam | None, label: int, ninf) -> None:
        self.parent = parent
        self.label = label
        self.children: dict[int, _Beam] = {}
        self.old = [ninf, ninf, ninf]
        self.new = [ninf, ninf, ninf]

    def labels(self, merge: bool) -> list[int]:
        out: list[int] = []
        prev = -1
        c = self
        while c.parent is not None:
            if not merge or c.label != prev:
                out.append(c.label)
            prev = c.label
            c = c.parent
        return out[::-1]


def _beam_search(x: np.ndarray, width: int, top: int, merge: bool,
                 ) -> tuple[list[list[int]], list[float]]:
    """TF's beam search over one batch entry's logits ``x`` [T, C] (blank = C - 1).

    Probabilities are Python floats holding values of x's dtype: every arithmetic step is
    rounded back to that dtype (exact for float64; for float32 the double result of one
    +/- of two float32 values rounds to the correctly rounded float32 result)."""
    dt = x.dtype.type
    rnd = (lambda v: float(_F32(v))) if x.dtype == np.float32 else float
    ninf = -math.inf
    classes = x.shape[1]
    blank = classes - 1

    def lse(a: float, b: float) -> float:
        if a == ninf:
            return b
        if b == ninf:
            return a
        hi, lo = (a, b) if a > b else (b, a)
        corr = float(_F32(math.log1p(float(_F32(math.exp(float(_F32(lo - hi))))))))
        return rnd(hi + corr)

    def greater(a: _Beam, b: _Beam) -> bool:
        return a.new[0] > b.new[0]

    leaves = _TopN(width, greater)
    root = _Beam(None, -1, ninf)
    root.new[0] = root.new[1] = 0.0
    leaves.push(root)
    for row in x:
        row_max = row.max()
        acc = dt(0)
        # exp and log as C's correctly rounded expf/logf (numpy's float32 ones may be off
        # by an ulp, which matters where beams tie); the sum in order, in x's precision
        for v in np.exp((row - row_max).astype(np.float64)).astype(x.dtype):
            acc = acc + v
        norm = row_max + dt(math.log(acc))
        logp = row - norm                       # log softmax, rounded as TF's T
        lp = logp.tolist()
        raw_blank, fnorm = float(row[blank]), float(norm)
        branches = leaves.extract()
        leaves.reset()
        for b in branches:
            b.old = list(b.new)
        for b in branches:
            if b.parent is not None:
                par = b.parent
                if par.new[0] != ninf:
                    prev = par.old[1] if b.label == par.label else par.old[0]
                    b.new[2] = lse(b.new[2], prev)
                b.new[2] = rnd(b.new[2] + lp[b.label])
            b.new[1] = rnd(rnd(b.old[0] + raw_blank) - fnorm)
            b.new[0] = lse(b.new[1], b.new[2])
            leaves.push(b)
        for b in branches:
            total = b.old[0]
            if not (total > ninf and (len(leaves) < width
                                      or total > leaves.peek_bottom().new[0])):
                continue
            # a new child's label probability: P(prefix) * P(label), or for a repeat of
            # the last label the prefix's blank-ending part only
            cand = (logp[:blank] + dt(total)).tolist()
            if 0 <= b.label < blank:
                cand[b.label] = rnd(lp[b.label] + b.old[1])
            for label, score in enumerate(cand):
                c = b.children.get(label)
                if c is not None and c.new[0] != ninf:
                    continue  # already in the beam
                if score > ninf and (len(leaves) < width
                                     or score > leaves.peek_bottom().new[0]):
                    if c is None:
                        c = b.children[label] = _Beam(b, label, ninf)
                    c.new = [score, ninf, score]
                    if len(leaves) == width:
                        leaves.peek_bottom().new = [ninf, ninf, ninf]
                    leaves.push(c)
                elif c is not None:
                    # TF resets a child that is no candidate, old probabilities too: a beam
                    # dropped earlier in this step then grows no children of its own
                    c.old = [ninf, ninf, ninf]
                    c.new = [ninf, ninf, ninf]
    if top > width:
        raise InvalidArgumentError("requested more paths than the beam width.")
    if top > len(leaves):
        raise InvalidArgumentError("Less leaves in the beam search than requested.")
    best = _TopN(top, greater)
    for e in leaves.elements:
        best.push(e)
    chosen = best.extract()[:top]
    return [e.labels(merge) for e in chosen], [e.new[0] for e in chosen]


@kernel("CTCBeamSearchDecoder")
def ctc_beam_search_decoder(ctx: KernelContext, inputs: np.ndarray,
                            sequence_length: np.ndarray) -> list[np.ndarray]:
    seq = _decoder_inputs(inputs, sequence_length)
    width = int(ctx.attrs["beam_width"])
    top = int(ctx.attrs["top_paths"])
    merge = bool(ctx.attrs.get("merge_repeated", True))
    batch = inputs.shape[1]
    paths: list[list[list[int]]] = [[] for _ in range(top)]
    logp = np.zeros((batch, top), inputs.dtype)
    for b in range(batch):
        found, probs = _beam_search(inputs[:max(seq[b], 0), b, :], width, top, merge)
        for p in range(top):
            paths[p].append(found[p])
            logp[b, p] = probs[p]
    sparse = [_sparse_paths(p) for p in paths]
    return ([s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse]
            + [logp])
