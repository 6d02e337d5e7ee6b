"""Combining S per-sample predictive distributions into one (docs/method.md §2.2, §2.4).

Every stochastic context (ACVI's K samples, variational attention's N source positions) gives,
per target step, S distributions log p_s (..., S, V) and weights w_s (uniform 1/S or log w_s
given). Three combinations, all float32 and in log space:

    "prob"       log Σ_s w_s p_s                  the predictive average (D 88)
    "logprob"    Σ_s w_s log p_s                  the expected log-probability (a training term)
    "geometric"  log_softmax_V(Σ_s w_s log p_s)   its normalised exponential (--mc-combine geometric)

:func:`combine_samples` forms one from all S at once; :class:`RunningCombination` from chunks of
samples, for decoders that push the S contexts through the output layer a chunk at a time (the
LSTM decoder, the transformer), so that memory holds one (..., V) running sum.

:func:`average_members` is the "prob" combination of M equally weighted *members* (the chains of
MC dropout, modules/seq2seq/mc_dropout.py; docs/uncertainty.md §6), written so that M identical members
give back their distribution bit for bit.

On a CPU, work over (rows, S, V) that reads each element a few times goes a block of rows at a
time (:func:`row_block`), so that a block stays in the cache between its operations: at decoding's
sizes (beam rows × 10 samples × an 8k vocabulary, ~50M elements a step) whole-tensor elementwise
operations are bound by memory traffic, several times slower than the arithmetic.
"""
from typing import Optional

import math

import torch
from torch import Tensor

COMBINATIONS = ("prob", "logprob", "geometric")
#: how the K evaluation samples' distributions are combined (``--mc-combine``; docs/method.md §2.2)
MC_COMBINE_CHOICES = ("prob", "geometric")


def check_mc_combine(value: str) -> str:
    """``--mc-combine`` checked (also when it comes from ``--model-overrides``, past argparse)."""
    if value not in MC_COMBINE_CHOICES:
        raise ValueError(f"--mc-combine must be one of {', '.join(MC_COMBINE_CHOICES)}, got {value!r}")
    return value


def combine_samples(lp: Tensor, log_weights: Optional[Tensor], mode: str) -> Tensor:
    """lp: (..., S, V) float32; log_weights: (..., S) or None (uniform) -> (..., V), the
    combination ``mode`` (module docstring). One sample is returned as it is."""
    S = lp.size(-2)
    if S == 1:
        return lp.squeeze(-2)
    if log_weights is None:
        log_weights = lp.new_full(lp.shape[:-1], -math.log(S))
    comb = RunningCombination(mode)
    comb.add(lp, log_weights)
    return comb.result()


#: elements of one block of rows (:func:`row_block`): 1 MiB of float32, a CPU core's L2 cache
CACHE_BLOCK_ELEMENTS = 1 << 18


def row_block(rows: int, per_row: int, on_gpu: bool) -> int:
    """How many of ``rows`` rows of ``per_row`` elements to process together (module docstring):
    all of them on a GPU (blocks would only add kernel launches), else as many as fit in
    :data:`CACHE_BLOCK_ELEMENTS` (at least one)."""
    return rows if on_gpu else max(1, CACHE_BLOCK_ELEMENTS // max(1, per_row))


def average_members(lp: Tensor) -> Tensor:
    """log (1/M) Σ_m p_m: lp (..., M, V) float32 log-probabilities, may hold −inf -> (..., V).

    Formed as m + log mean_m exp(lp_m − m) with m the largest member's value per token, so that
    M identical members return exactly their own values (exp(0) = 1, mean 1, log 1 = 0); a token
    that every member gives −inf stays −inf. A block of rows at a time (:func:`row_block`); the
    values do not depend on the block size."""
    lead, (M, V) = lp.shape[:-2], lp.shape[-2:]
    flat = lp.reshape(-1, M, V)
    n = flat.size(0)
    step = row_block(n, M * V, lp.is_cuda)
    if step >= n:
        return _average_block(flat).view(*lead, V)
    out = lp.new_empty(n, V)
    for i in range(0, n, step):
        out[i:i + step] = _average_block(flat[i:i + step])
    return out.view(*lead, V)


def _average_block(lp: Tensor) -> Tensor:
    """:func:`average_members` of (n, M, V) -> (n, V). ``amax``, not ``max(dim)``: the latter also
    forms the indices, 40× slower on a CPU; a non-finite top (every member −inf) becomes 0."""
    top = lp.amax(dim=-2, keepdim=True).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    return (top + torch.log(torch.exp(lp - top).mean(dim=-2, keepdim=True))).squeeze(-2)


def weigh(lp: Tensor, log_w: Tensor, mode: str) -> Tensor:
    """A chunk's share of a combination: lp (..., c, V), log_w (..., c) -> (..., V),
    "prob": log Σ_c w_c exp(lp_c) (log-summed over the chunks), "logprob": Σ_c w_c lp_c (summed)."""
    if mode == "prob":
        return torch.logsumexp(lp + log_w.unsqueeze(-1), dim=-2)
    if mode == "logprob":
        return (lp * log_w.exp().unsqueeze(-1)).sum(-2)
    raise ValueError(f"unknown sample combination {mode!r}")


class RunningCombination:
    """A combination (module docstring) accumulated over chunks of samples: :meth:`add` a chunk's
    log-probabilities and log-weights, or :meth:`add_share` its :func:`weigh` already formed under
    :attr:`inner` (e.g. inside an activation-checkpointed function); :meth:`result` at the end."""

    def __init__(self, mode: str):
        if mode not in COMBINATIONS:
            raise ValueError(f"unknown sample combination {mode!r}")
        self.mode = mode
        #: how a chunk's share is formed: "prob" for the average, "logprob" for the other two
        self.inner = "prob" if mode == "prob" else "logprob"
        self._acc: Optional[Tensor] = None

    def add(self, lp: Tensor, log_w: Tensor) -> None:
        """One chunk: lp (..., c, V) float32, log_w (..., c)."""
        self.add_share(weigh(lp, log_w, self.inner))

    def add_share(self, share: Tensor) -> None:
        """One chunk's :func:`weigh` (..., V) under :attr:`inner`."""
        if self._acc is None:
            self._acc = share
        elif self.inner == "prob":
            self._acc = torch.logaddexp(self._acc, share)
        else:
            self._acc = self._acc + share

    def result(self) -> Tensor:
        """The combination (..., V) of every chunk added."""
        if self._acc is None:
            raise ValueError("no samples were combined")
        return torch.log_softmax(self._acc, dim=-1) if self.mode == "geometric" else self._acc
