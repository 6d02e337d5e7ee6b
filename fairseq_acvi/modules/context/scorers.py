"""Attention scorers (docs/method.md §1), one small interface shared by every seq2seq model.

A scorer turns a decoder query ``s_t`` and the encoder memory into *masked* scores ``e_t``:
padded source positions get ``-inf`` before any softmax (never renormalised afterwards).

Usage, once per source batch and then once per decoder step::

    mem = scorer.prepare(h, pad_mask)          # h: (B, N, d_enc), pad_mask: (B, N) bool
    e_t = scorer(s_t, mem, coverage=k_t)       # s_t: (B, d_dec) -> e_t: (B, N)
    c_t = softmax(e_t) @ mem.values            # mem.values: (B, N, value_dim)
    e   = scorer(s, mem)                       # every step at once: s (B, T, d_dec) -> (B, T, N)

``prepare`` does all the per-source work (key projections) so that the per-step path is one
small matmul; ``mem`` is a :class:`Memory` whose tensors are batch-first and can be reordered
with :meth:`Memory.index_select` when a beam search reorders hypotheses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.precision import at_least_float32

SCORERS = ("additive", "multiplicative", "scaled-dot", "key-value")
#: the scorers the key-value scorer can apply to its keys (``--key-value-inner``; seed 003: "f_att
#: can be any of the previously mentioned attention functions")
INNER_SCORERS = ("additive", "multiplicative", "scaled-dot")
#: the key-value scorer's scorer of its keys when none is named (every model trained before the
#: option had it)
DEFAULT_INNER = "multiplicative"
#: the additive scorer's pre-activations (B, t, N, a) for t steps at once stay under this many
#: elements when it scores every step of a teacher-forced pass (:meth:`AdditiveScorer.score_steps`)
_STEP_CHUNK_ELEMENTS = 1 << 22


@dataclass
class Memory:
    """Encoder memory prepared for scoring.

    keys:     (B, N, k) projected keys (what the per-step score reads)
    values:   (B, N, value_dim) what contexts average over (``h`` itself unless key-value)
    pad_mask: (B, N) bool, True at padding
    """

    keys: Tensor
    values: Tensor
    pad_mask: Tensor


def masked_fill_scores(scores: Tensor, pad_mask: Tensor) -> Tensor:
    """Set padded positions to -inf (works for fp16 too). scores, pad_mask: (B, N)."""
    return scores.masked_fill(pad_mask, float("-inf"))


class Scorer(nn.Module):
    """Base class: ``prepare`` once per batch, ``forward`` once per decoder step."""

    value_dim: int

    def prepare(self, h: Tensor, pad_mask: Tensor) -> Memory:  # pragma: no cover - interface
        raise NotImplementedError

    def score(self, query: Tensor, mem: Memory, coverage: Optional[Tensor]) -> Tensor:
        raise NotImplementedError  # pragma: no cover - interface

    def score_steps(self, query: Tensor, mem: Memory) -> Tensor:
        """Every step's scores at once, no coverage: query (B, T, d_dec) -> (B, T, N)."""
        raise NotImplementedError  # pragma: no cover - interface

    def forward(self, query: Tensor, mem: Memory, coverage: Optional[Tensor] = None) -> Tensor:
        """query: (B, d_dec); coverage: (B, N) or None -> masked scores (B, N). Every step at
        once (the parallel teacher-forced path, docs/method.md §3.7): query (B, T, d_dec) ->
        (B, T, N); coverage, which depends on the earlier steps' weights, is refused there."""
        if query.dim() == 3:
            if coverage is not None:
                raise ValueError("coverage depends on the earlier steps' attention: it cannot be "
                                 "scored for every step at once")
            return masked_fill_scores(self.score_steps(query, mem), mem.pad_mask.unsqueeze(1))
        return masked_fill_scores(self.score(query, mem, coverage), mem.pad_mask)


class AdditiveScorer(Scorer):
    """Bahdanau: e_ti = vᵀ tanh(W_h h_i + W_s s_t + w_k k_ti + b)   (P 1, P 8).

    ``attn_dim`` is the size of the projections (100 for video captioning, P App. B).
    The coverage term w_k k_ti exists only when ``coverage=True``.
    """

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, coverage: bool = False):
        super().__init__()
        self.W_h = nn.Linear(key_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(query_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)
        self.w_k = nn.Parameter(torch.zeros(attn_dim)) if coverage else None
        self.value_dim = key_dim

    def reset_method_parameters(self):
        """w_k starts at 0: coverage plays no part until it is trained (docs/method.md §3.1)."""
        if self.w_k is not None:
            nn.init.zeros_(self.w_k)

    def prepare(self, h, pad_mask):
        return Memory(self.W_h(h), h, pad_mask)

    def score(self, query, mem, coverage):
        pre = mem.keys + self.W_s(query).unsqueeze(1)  # (B, N, a)
        if self.w_k is not None and coverage is not None:
            pre = pre + coverage.unsqueeze(-1).to(pre.dtype) * self.w_k
        return self.v(torch.tanh(pre)).squeeze(-1)

    def score_steps(self, query, mem):
        """(B, T, d_dec) -> (B, T, N), a few steps at a time: the (B, t, N, a) pre-activations
        of a chunk stay under _STEP_CHUNK_ELEMENTS (one step's at least), so long sources and
        targets (CNN/DM: 400 × 100) never allocate a (B, T, N, a) tensor at once."""
        q = self.W_s(query)                                          # (B, T, a)
        chunk = max(1, _STEP_CHUNK_ELEMENTS // max(1, mem.keys.numel()))
        return torch.cat([self.v(torch.tanh(mem.keys.unsqueeze(1) + q[:, i:i + chunk].unsqueeze(2)))
                          .squeeze(-1) for i in range(0, q.size(1), chunk)], dim=1)


class MultiplicativeScorer(Scorer):
    """Luong "general": e_ti = h_iᵀ W s_t   (P 10). W is applied to h once per batch."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int = 0, coverage: bool = False):
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)
        self.value_dim = key_dim

    def prepare(self, h, pad_mask):
        return Memory(self.W(h), h, pad_mask)

    def score(self, query, mem, coverage):
        return torch.bmm(mem.keys, query.unsqueeze(2)).squeeze(2)

    def score_steps(self, query, mem):
        return torch.bmm(query, mem.keys.transpose(1, 2))


class ScaledDotScorer(Scorer):
    """e_ti = (P_h h_i)ᵀ (P_s s_t) / √a, both projected to a common size a (seed 003)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, coverage: bool = False):
        super().__init__()
        self.P_h = nn.Linear(key_dim, attn_dim, bias=False)
        self.P_s = nn.Linear(query_dim, attn_dim, bias=False)
        self.scale = 1.0 / math.sqrt(attn_dim)
        self.value_dim = key_dim

    def prepare(self, h, pad_mask):
        return Memory(self.P_h(h) * self.scale, h, pad_mask)

    def score(self, query, mem, coverage):
        return torch.bmm(mem.keys, self.P_s(query).unsqueeze(2)).squeeze(2)

    def score_steps(self, query, mem):
        return torch.bmm(self.P_s(query), mem.keys.transpose(1, 2))


class KeyValueScorer(Scorer):
    """[k_i; v_i] = T h_i; scores from an inner scorer (``inner``, one of :data:`INNER_SCORERS`)
    on k_i, contexts from v_i (seed 003)."""

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int, coverage: bool = False,
                 inner: str = DEFAULT_INNER):
        super().__init__()
        if inner not in INNER_SCORERS:
            raise ValueError(f"--key-value-inner: unknown scorer {inner!r}; choose from "
                             f"{', '.join(INNER_SCORERS)}")
        self.T = nn.Linear(key_dim, 2 * key_dim, bias=False)
        self.inner = build_scorer(inner, query_dim, key_dim, attn_dim, coverage)
        self.value_dim = key_dim

    def prepare(self, h, pad_mask):
        k, v = self.T(h).chunk(2, dim=-1)
        inner = self.inner.prepare(k, pad_mask)
        return Memory(inner.keys, v, pad_mask)

    def score(self, query, mem, coverage):
        return self.inner.score(query, mem, coverage)

    def score_steps(self, query, mem):
        return self.inner.score_steps(query, mem)


class NoScorer(Scorer):
    """The scorer of a context inference that attends to nothing (``--context-inference none``):
    no parameters, no scores (``forward`` returns None); ``prepare`` keeps the annotations as
    they are (keys = values = h)."""

    def __init__(self, key_dim: int):
        super().__init__()
        self.value_dim = key_dim

    def prepare(self, h, pad_mask):
        return Memory(h, h, pad_mask)

    def forward(self, query, mem, coverage=None):
        return None


_CLASSES = {
    "additive": AdditiveScorer,
    "multiplicative": MultiplicativeScorer,
    "scaled-dot": ScaledDotScorer,
    "key-value": KeyValueScorer,
}


def build_scorer(name: str, query_dim: int, key_dim: int, attn_dim: int,
                 coverage: bool = False, inner: str = DEFAULT_INNER) -> Scorer:
    """Build a scorer by name (``inner``: the key-value scorer's scorer of its keys, ignored by
    the others); unknown names raise a ValueError listing the choices."""
    if name not in _CLASSES:
        raise ValueError(f"--attention-type: unknown scorer {name!r}; choose from {', '.join(SCORERS)}")
    if coverage and name != "additive":
        raise ValueError("the coverage feature exists only for --attention-type additive (docs/method.md §1)")
    if name == "key-value":
        return KeyValueScorer(query_dim, key_dim, attn_dim, coverage=coverage, inner=inner)
    return _CLASSES[name](query_dim, key_dim, attn_dim, coverage=coverage)


def masked_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dim in float32, float64 for float64 scores (scores already hold
    -inf at padding)."""
    return F.softmax(at_least_float32(scores), dim=-1)
