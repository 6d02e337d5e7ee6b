"""Attention over the decoder's own past, seed 003's configuration (ii) (docs/method.md §3.6).

At step t the decoder, besides attending to the source, attends to its own earlier outputs
q_1..q_{t−1} (q_j: the top LSTM layer's output s_j, or with ``--self-attention-heads`` the
self-attended state) with a scorer of the same family as the encoder attention
(``--attention-type``: additive, multiplicative, scaled-dot, key-value; seed 003 l. 41-77, whose
f_att is written for "previous hidden states" s_1..s_m)::

    e^dec_tj = f_att(q_t, q_j)                     j < t          (seed 003 l. 43, 51-75)
    b_t      = softmax_j(e^dec_tj)                                (l. 43; float32)
    d_t      = Σ_{j<t} b_tj v_j                    v_j = q_j, or the key-value scorer's value
    d_1      = 0                                   (no past at the first step)

The decoder past context is deterministic (soft attention); the context inference (soft, ACVI,
…) is that of the source context only. ``d_t`` joins the prediction, which takes "current decoder
output and available context vectors" (seed 003 l. 95): tanh(W_c [q_t ; d_t ; c_t])
(modules/seq2seq/context_decoder.py).

The scorer's per-state work (key projections) is position-wise, so each state is prepared once,
when it is made, and its key and value appended to the past: (B, t, k) and (B, t, v), kept in the
decoder's incremental state and reordered with the beam. :meth:`DecoderPastAttention.steps` gives
T steps at once (the decoder's parallel teacher-forced path, docs/method.md §3.7): every query
scored against every state in one call, the positions j ≥ t masked.
"""
from typing import Tuple

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_acvi.modules.context.scorers import DEFAULT_INNER, Memory, build_scorer, masked_softmax


class DecoderPastAttention(nn.Module):
    """f_att of ``--attention-type`` (and ``--key-value-inner``) between the query q_t (B, dim)
    and the past states (module docstring). ``value_dim``: the size of d_t (``dim``, the
    key-value scorer's too)."""

    def __init__(self, attention_type: str, dim: int, attn_dim: int,
                 inner: str = DEFAULT_INNER):
        super().__init__()
        self.scorer = build_scorer(attention_type, dim, dim, attn_dim, inner=inner)
        self.dim = dim
        self.value_dim = self.scorer.value_dim

    def empty_past(self, like: Tensor) -> Tuple[Tensor, Tensor]:
        """Keys and values before the first step, (B, 0, k) and (B, 0, v), ``like`` (B, N, d)'s
        dtype and device."""
        mem = self.scorer.prepare(like.new_zeros(like.size(0), 0, self.dim),
                                  like.new_zeros(like.size(0), 0, dtype=torch.bool))
        return mem.keys, mem.values

    def append(self, q_t: Tensor, keys: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
        """Add state q_t (B, dim) to the past: keys (B, t, k), values (B, t, v) -> (B, t+1, ·)."""
        mem = self.scorer.prepare(q_t.unsqueeze(1), q_t.new_zeros(q_t.size(0), 1, dtype=torch.bool))
        return (torch.cat([keys, mem.keys.to(keys.dtype)], dim=1),
                torch.cat([values, mem.values.to(values.dtype)], dim=1))

    def forward(self, q_t: Tensor, keys: Tensor, values: Tensor) -> Tuple[Tensor, Tensor]:
        """q_t (B, dim); keys (B, t, k), values (B, t, v) of steps 1..t (t may be 0) ->
        (d_t (B, v) in values' dtype, b_t (B, t) float32)."""
        B, t = keys.shape[:2]
        if t == 0:
            return values.new_zeros(B, self.value_dim), values.new_zeros(B, 0, dtype=torch.float32)
        scores = self.scorer(q_t, Memory(keys, values, keys.new_zeros(B, t, dtype=torch.bool)))
        attn = masked_softmax(scores)                                  # (B, t) float32
        return attn.to(values.dtype).unsqueeze(1).bmm(values).squeeze(1), attn

    def steps(self, q: Tensor, keys: Tensor, values: Tensor
              ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """T steps at once: q (B, T, dim) the states of steps t0+1..t0+T; keys (B, t0, k), values
        (B, t0, v) of the steps before -> (d (B, T, v) in values' dtype, b (B, T, t0 + T − 1)
        float32 (0 where a step has no such past position), keys (B, t0 + T, k), values
        (B, t0 + T, v)): what T calls of ``forward`` then ``append`` give."""
        B, T = q.shape[:2]
        t0 = keys.size(1)
        new = self.scorer.prepare(q, q.new_zeros(B, T, dtype=torch.bool))
        keys = torch.cat([keys, new.keys.to(keys.dtype)], dim=1)
        values = torch.cat([values, new.values.to(values.dtype)], dim=1)
        scores = self.scorer(q, Memory(keys, values, keys.new_zeros(B, t0 + T, dtype=torch.bool)))
        pos = torch.arange(t0 + T, device=q.device)
        past = pos.unsqueeze(0) < pos[t0:].unsqueeze(1)                # (T, t0 + T): j < t0 + i
        has_past = past.any(-1, keepdim=True)                          # (T, 1): False at step 1
        # a step without a past keeps its finite scores through the softmax, then gets weight 0
        # (d_1 = 0), so that no -inf-only row makes a NaN in the value or the gradient
        attn = masked_softmax(scores.masked_fill(~past & has_past, float("-inf")))
        attn = attn * has_past
        d = attn.to(values.dtype).bmm(values)                          # (B, T, v)
        return d, attn[..., :t0 + T - 1], keys, values
