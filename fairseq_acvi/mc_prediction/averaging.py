"""The S contexts' predictions averaged chunk by chunk, under one memory budget (docs/method.md §2.2).

A stochastic context gives, per target step, S contexts (ACVI's K samples, variational attention's
N source positions), each of which the output layer turns into a distribution over the V words.
Forming all (B, T, S, V) log-probabilities at once is what the combination rules of
:mod:`~fairseq_acvi.mc_prediction.combination` need, but for large validation batches or a large
vocabulary that tensor does not fit. Here the S contexts go through the output layer in chunks of
as many as keep (B·T, chunk, V) under :data:`MC_CHUNK_ELEMENTS` (all S at once when they fit), and
the combination is accumulated over the chunks. Under autograd every chunk's output layer and
weighting is recomputed in the backward pass, so that memory holds the (B, T, V) running result,
not S chunks' activations.

Every function takes the output layer as a callable over a chunk of contexts, so that the LSTM
decoder (modules/seq2seq/context_decoder.py) and the transformer (models/acvi_transformer.py) share them:

    log_probs(i, j) -> (B, T, j − i, V) float32     the contexts i .. j − 1 of the S

Shapes: B batch (× beam), T target steps, S contexts per step, V output logits.
"""
import math
from typing import Callable, Dict, Optional

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from fairseq_acvi.mc_prediction import uncertainty as unc
from fairseq_acvi.mc_prediction.combination import RunningCombination, combine_samples, weigh

#: above this many float32 elements (B·T·S·V; 512 MiB) the S contexts go through the output layer
#: in chunks (large validation batches; a beam-10 decode of 128 sentences at K = 10 over 8k words
#: fits in one)
MC_CHUNK_ELEMENTS = 1 << 27

#: the output layer over contexts i .. j − 1: (i, j) -> (B, T, j − i, V) float32 log-probabilities
ChunkLogProbs = Callable[[int, int], Tensor]


def chunk_size(rows: int, S: int, n_logits: int) -> int:
    """How many of the S contexts of each of ``rows`` (B·T) steps go through the output layer
    together: all of them while the (rows, S, n_logits) output stays under
    :data:`MC_CHUNK_ELEMENTS`, else as many as fit (at least one)."""
    return max(1, min(S, MC_CHUNK_ELEMENTS // max(1, rows * n_logits)))


def recomputed(fn: Callable[..., Tensor], *args) -> Tensor:
    """``fn(*args)``; under autograd its activations are not kept but recomputed in the backward
    pass (activation checkpointing, replaying the same dropout masks)."""
    if torch.is_grad_enabled():
        return checkpoint(fn, *args, use_reentrant=False)
    return fn(*args)


def explicit_log_weights(samples: Tensor, log_weights: Optional[Tensor]) -> Tensor:
    """The log-weights of the contexts ``samples`` (B, T, S, ·) written out: ``log_weights``
    (B, T, S) in float32 (float64 in a float64 model), or log(1/S) for every context when it is
    None (uniform)."""
    dtype = torch.float64 if samples.dtype == torch.float64 else torch.float32
    if log_weights is not None:
        return log_weights.to(dtype)
    B, T, S = samples.shape[:3]
    return torch.full((B, T, S), -math.log(S), dtype=dtype, device=samples.device)


def average(log_probs: ChunkLogProbs, samples: Tensor, n_logits: int,
            log_weights: Optional[Tensor], mode: str, stats: Optional[Dict] = None) -> Tensor:
    """The distributions of the contexts ``samples`` (B, T, S, ·) combined by rule ``mode``
    (prob, logprob or geometric; :func:`~fairseq_acvi.mc_prediction.combination.combine_samples`)
    with log-weights ``log_weights`` (B, T, S) (None: uniform) -> (B, T, V) float32.

    With a ``stats`` dict and S > 1, also ``stats["uncertainty"]`` (B, T, 3): the decomposition
    around the predictive average p̄ (:func:`~fairseq_acvi.mc_prediction.uncertainty.decompose`),
    which reads every context's distribution (evaluation)."""
    B, T, S = samples.shape[:3]
    step = chunk_size(B * T, S, n_logits)
    if step >= S:
        lp = log_probs(0, S)
        lp_mean = combine_samples(lp, log_weights, mode)
        if stats is not None and S > 1:
            mixture = lp_mean if mode == "prob" else combine_samples(lp, log_weights, "prob")
            stats["uncertainty"] = unc.decompose(lp, mixture, log_weights)
        return lp_mean
    log_w = explicit_log_weights(samples, log_weights)
    comb = RunningCombination(mode)
    parts = unc.SampleAccumulator() if stats is not None else None
    # the uncertainty needs the predictive average p̄ also when another combination is returned
    mix = RunningCombination("prob") if parts is not None and mode != "prob" else None
    for i in range(0, S, step):
        j = min(S, i + step)
        lw = log_w[:, :, i:j]
        if parts is None:
            comb.add_share(recomputed(lambda w, i=i, j=j: weigh(log_probs(i, j), w, comb.inner), lw))
            continue
        lp = log_probs(i, j)
        for k in range(lp.size(2)):
            parts.add(lp[:, :, k], lw[:, :, k])
        comb.add(lp, lw)
        if mix is not None:
            mix.add(lp, lw)
    if parts is not None:
        stats["uncertainty"] = parts.result((mix or comb).result())
    return comb.result()


def sample_uncertainty(log_probs: ChunkLogProbs, samples: Tensor, n_logits: int,
                       log_weights: Optional[Tensor], lp_mean: Tensor) -> Tensor:
    """The (B, T, 3) uncertainty decomposition of the distributions of the contexts ``samples``
    (B, T, S, ·) around their average ``lp_mean`` (B, T, V), chunk by chunk (evaluation)."""
    B, T, S = samples.shape[:3]
    step = chunk_size(B * T, S, n_logits)
    if step >= S:
        return unc.decompose(log_probs(0, S), lp_mean, log_weights)
    log_w = explicit_log_weights(samples, log_weights)
    parts = unc.SampleAccumulator()
    for i in range(0, S, step):
        lp = log_probs(i, min(S, i + step))
        for k in range(lp.size(2)):
            parts.add(lp[:, :, k], log_w[:, :, i + k])
    return parts.result(lp_mean)


def gold_log_probs(log_probs: ChunkLogProbs, samples: Tensor, n_logits: int,
                   log_weights: Optional[Tensor], mode: str) -> Tensor:
    """The combination at the gold tokens only: ``log_probs(i, j)`` gives (B, T, j − i) (the
    output layer's gold-token path, no V dimension) -> (B, T). ``mode`` prob or logprob (the
    geometric rule is normalised over the vocabulary and needs every word's score)."""
    B, T, S = samples.shape[:3]
    step = chunk_size(B * T, S, n_logits)
    if step >= S:
        lp = log_probs(0, S)
    else:   # chunks, recomputed in the backward pass
        lp = torch.cat([recomputed(lambda i=i: log_probs(i, min(S, i + step)))
                        for i in range(0, S, step)], dim=2)
    return combine_samples(lp.unsqueeze(-1), log_weights, mode).squeeze(-1)


def average_in_probability_space(share: Callable[[int, int, Tensor], tuple],
                                 finish: Callable[[tuple], Tensor], samples: Tensor,
                                 n_logits: int, log_weights: Optional[Tensor]) -> Tensor:
    """The "prob" combination formed by an output layer in probability space (the copy mixture,
    :attr:`~fairseq_acvi.modules.seq2seq.output_layers.OutputLayer.averages_in_probability_space`) for the
    contexts ``samples`` (B, T, S, ·): ``share(i, j, w)`` gives the layer's partial sums for
    contexts i .. j − 1 with their weights w (B, T, j − i); they are summed over the chunks and
    ``finish`` takes the one log. Used without autograd (decoding)."""
    B, T, S = samples.shape[:3]
    w = explicit_log_weights(samples, log_weights).exp()
    step = chunk_size(B * T, S, n_logits)
    total = None
    for i in range(0, S, step):
        j = min(S, i + step)
        part = share(i, j, w[:, :, i:j])
        total = part if total is None else tuple(a + b for a, b in zip(total, part))
    return finish(total)
