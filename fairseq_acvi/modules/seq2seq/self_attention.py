"""Multi-head self-attention over LSTM states, seed 003's configuration (iii) (docs/method.md §3.6).

One block, after Vaswani et al. (2017) where the seed is silent (seed 003, l. 81-91: multi-head
self-attention "on encoder hidden states and previous decoder hidden states separately"; Q, K, V
are linear maps of the states, scaled dot-product attention per head, the heads concatenated)::

    Q = W_q x,  K = W_k x,  V = W_v x                                   (seed 003 l. 85-89)
    A = Concat_h softmax(Q_h K_hᵀ / √d_h + mask) V_h                    (l. 91)
    y = LayerNorm(x + Dropout(W_o A))                                   (Vaswani et al. §3.1, 5.4)

Two uses:

* :meth:`SelfAttentionBlock.forward` — bidirectional, over the encoder's annotations (B, N, d)
  with a key padding mask (B, N): padded positions are never attended to, and their outputs are
  set to 0 (no scorer reads them: they are masked there too);
* :meth:`SelfAttentionBlock.step` — causal and incremental, over the decoder's states: the state
  of step t attends to the states of steps 1..t (itself included, as Vaswani et al.'s masked
  decoder self-attention), whose per-head keys and values (B, heads, t, d_h) the caller keeps
  (in the decoder's incremental state, reordered with the beam) and passes back at the next step;
* :meth:`SelfAttentionBlock.steps` — the same for T steps at once (the decoder's parallel
  teacher-forced path, docs/method.md §3.7), a causal mask in one attention call.

The parameters live in a :class:`torch.nn.MultiheadAttention` (``in_proj_weight`` = [W_q; W_k;
W_v], ``out_proj`` = W_o) and the attention itself is :func:`torch.nn.functional.
scaled_dot_product_attention`; both paths give what ``nn.MultiheadAttention`` gives (with the
causal mask for ``step``: tests/test_self_attention.py). The attention product and the layer
norm are computed in float32 also under fp16 (the projections in the parameters' dtype).
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.precision import at_least_float32


def check_heads(heads, dims, option: str = "--self-attention-heads") -> int:
    """``heads`` (also from ``--model-overrides``, past argparse): a whole number ≥ 0 dividing
    every size in ``dims`` ({name: size}); else a ValueError naming ``option``. Returns it."""
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 0:
        raise ValueError(f"{option} must be a whole number ≥ 0 (0 = off), got {heads!r}")
    if heads:
        for name, dim in dims.items():
            if dim % heads:
                raise ValueError(f"{option} {heads} must divide {name} ({dim}): each of the "
                                 f"{heads} heads gets {dim}/{heads} dimensions")
    return heads


class SelfAttentionBlock(nn.Module):
    """y = LayerNorm(x + Dropout(MultiHead(x, x, x))) over ``dim``-d states, ``heads`` heads
    (module docstring). ``dropout``: on the attention output before the residual sum (the
    attention weights themselves are not dropped)."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0):
        super().__init__()
        check_heads(heads, {"the state size": dim})
        if heads < 1:
            raise ValueError("a SelfAttentionBlock needs ≥ 1 head")
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.dropout = dropout
        self.attn = nn.MultiheadAttention(dim, heads, dropout=0.0, bias=True, batch_first=True)
        self.norm = nn.LayerNorm(dim)

    def reset_method_parameters(self):
        """The layer norm starts as the identity map (gain 1, bias 0), as in Vaswani et al.; the
        projections keep the package's U(−s, s) (modules/seq2seq/init.py)."""
        nn.init.ones_(self.norm.weight)
        nn.init.zeros_(self.norm.bias)

    # -- pieces ---------------------------------------------------------------------------------
    def _heads(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """x (B, n, d) -> q, k, v, each (B, heads, n, d_h)."""
        B, n, _ = x.shape
        qkv = F.linear(x, self.attn.in_proj_weight, self.attn.in_proj_bias)
        return tuple(p.view(B, n, self.heads, self.head_dim).transpose(1, 2)
                     for p in qkv.chunk(3, dim=-1))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], dtype) -> Tensor:
        """Scaled dot-product attention in float32, heads concatenated, then W_o:
        q (B, h, n, d_h), k, v (B, h, m, d_h), mask (B, 1, n|1, m) bool (True: attend) -> (B, n, d).
        (float64 stays float64: the exactness tests compare two computations to 1e-10.)"""
        a = F.scaled_dot_product_attention(at_least_float32(q), at_least_float32(k),
                                           at_least_float32(v), attn_mask=mask)
        B, _, n, _ = a.shape
        a = a.transpose(1, 2).reshape(B, n, self.dim).to(dtype)
        return self.attn.out_proj(a)

    def _residual(self, x: Tensor, a: Tensor) -> Tensor:
        """LayerNorm(x + Dropout(a)), the norm in float32, the result in x's dtype."""
        y = x + F.dropout(a, p=self.dropout, training=self.training)
        y = at_least_float32(y)
        return F.layer_norm(y, (self.dim,), self.norm.weight.to(y.dtype),
                            self.norm.bias.to(y.dtype), self.norm.eps).to(x.dtype)

    # -- the two uses ---------------------------------------------------------------------------
    def forward(self, x: Tensor, pad_mask: Optional[Tensor] = None) -> Tensor:
        """Bidirectional: x (B, N, d), pad_mask (B, N) bool (True at padding) -> (B, N, d), 0 at
        padding. Every row needs ≥ 1 position that is not padding."""
        q, k, v = self._heads(x)
        mask = None if pad_mask is None else ~pad_mask[:, None, None, :]
        y = self._residual(x, self._attend(q, k, v, mask, x.dtype))
        if pad_mask is not None:
            y = y.masked_fill(pad_mask.unsqueeze(-1), 0.0)
        return y

    def step(self, x_t: Tensor, past_keys: Tensor, past_values: Tensor
             ) -> Tuple[Tensor, Tensor, Tensor]:
        """Causal, one step: x_t (B, d) the state of step t; past_keys, past_values
        (B, heads, t−1, d_h) those of steps 1..t−1 -> (y_t (B, d), keys, values (B, heads, t, d_h))
        with step t's appended (pass them to the next step): :meth:`steps` with T = 1."""
        y, keys, values = self.steps(x_t.unsqueeze(1), past_keys, past_values)
        return y.squeeze(1), keys, values

    def steps(self, x: Tensor, past_keys: Tensor, past_values: Tensor
              ) -> Tuple[Tensor, Tensor, Tensor]:
        """Causal, T steps at once: x (B, T, d) the states of steps t0+1..t0+T; past_keys,
        past_values (B, heads, t0, d_h) -> (y (B, T, d), keys, values (B, heads, t0 + T, d_h)),
        step t0+i seeing the states of steps 1..t0+i (the causal mask; none is needed for one
        step, which sees every state there is)."""
        q, k, v = self._heads(x)                                      # (B, h, T, d_h) each
        keys = torch.cat([past_keys.to(k.dtype), k], dim=2)
        values = torch.cat([past_values.to(v.dtype), v], dim=2)
        T, t0 = x.size(1), past_keys.size(2)
        mask = None
        if T > 1:
            pos = torch.arange(t0 + T, device=x.device)
            mask = pos.unsqueeze(0) <= pos[t0:].unsqueeze(1)           # (T, t0 + T): j ≤ t0 + i
        y = self._residual(x, self._attend(q, keys, values, mask, x.dtype))
        return y, keys, values

    def empty_past(self, like: Tensor) -> Tuple[Tensor, Tensor]:
        """Keys and values before the first step: (B, heads, 0, d_h) each, ``like`` (B, ...)'s
        dtype and device."""
        shape = (like.size(0), self.heads, 0, self.head_dim)
        return like.new_zeros(shape), like.new_zeros(shape)
