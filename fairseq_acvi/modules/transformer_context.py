"""Context inference as the encoder-decoder attention of a transformer decoder (docs/method.md §2.6).

:class:`ContextMultiheadAttention` is fairseq's :class:`~fairseq.modules.MultiheadAttention` (same
parameters, same state-dict names, same cached static keys) with the context of every head
inferred by one of the package's context-inference variants (``--context-inference``):

* ``soft``: fairseq's own forward, unchanged (c^h = Σ_i a^h_i u^h_i, §2.1 per head);
* ``acvi``: per head h, the context is latent with the Gaussian of §2.2 built on that head's
  attention weights a^h (B·H, T, N) and values u^h_i = (W_v h_i)^h (head dim d_h = D / H):

      m^h_t = Σ_i a^h_ti μ(u^h_i),   v^h_t = Σ_i (a^h_ti)² σ²(u^h_i),   c^h_t = m^h_t + √v^h_t ⊙ ε
      KL_t  = Σ_h ½ Σ_d ((m^h_td)² + v^h_td − 1 − log v^h_td)

  μ and σ² are one :class:`~fairseq_acvi.modules.context.acvi.ACVIContext` of width d_h (§2.2
  with the head's value u^h_i as the annotation: μ = identity by default, log σ² = an MLP with
  one d_h-wide hidden layer, P 18), shared by the layer's heads; its moments, KL, free bits,
  schedule (β, delay, warm-up, cycles) and sampler are reused as they are. The heads' samples
  are concatenated and go through W_o (``out_proj``) like fairseq's.

Which layer samples what (``--acvi-latent-layers``, set by the decoder):

* ``latent`` layers draw one sample per token in training and return their KL terms;
* at evaluation every layer returns its mean context m, except the ``sample_output`` layer (the
  top one), which returns K = ``mc_samples`` samples as an extra dim: (T, B, K, D). Its decoder
  layer carries the K dim through the residual, the layer norms and the FFN, and the decoder
  averages the K predictive distributions (D 88) in float32. K = 0 returns the mean.

The normaliser of every head's weights (``--attention-normalizer``, docs/method.md §3.5):
``softmax`` (fairseq's), ``sparsemax`` or ``entmax15`` (the ``entmax`` package, float32, exact
zeros at padding), in soft and acvi layers alike. For a soft layer with a sparse normaliser the
scores come from fairseq's own forward (``before_softmax=True``: the same projections, masks and
cached static keys) and the weights are applied to its values here. The constrained normalisers
(``csoftmax``, ``csparsemax``) are refused: their bounds at step t depend on the attention of
every earlier step, so the transformer's teacher-forced pass, which computes all T steps of a layer
at once, would need a loop over T inside every layer and head, and Malaviya et al. define one
cumulative attention per source word, not one per head and layer.

Shapes: T target positions, B batch (× beam), N source positions, H heads, D = H · d_h.
Everything the KL and the sample are built from (μ, σ², a, m, v) is float32 under fp16.
"""
from typing import Dict, Optional, Tuple

import torch
from fairseq import utils
from fairseq.modules import MultiheadAttention
from torch import Tensor

from fairseq_acvi.mc_prediction.sampling import draw_gaussian
from fairseq_acvi.modules.context import build_context
from fairseq_acvi.modules.context.acvi import ACVIContext
from fairseq_acvi.modules.context.normalizers import sparse_normalize

#: the variants the transformer adapter supports (the others need a recurrent decoder state
#: (pag), the whole target (variational), a sentence latent fed to the input (ved) or a CRF
#: over each head (structured), not written for the transformer yet)
TRANSFORMER_VARIANTS = ("soft", "acvi")

#: the ``--attention-normalizer`` values the transformer's encoder-decoder attention supports
#: (module docstring: why not the constrained ones)
TRANSFORMER_NORMALIZERS = ("softmax", "sparsemax", "entmax15")

#: per-token terms that are averaged over heads (and layers) rather than summed
AVERAGED_TERMS = ("ctx_var",)


class ContextMultiheadAttention(MultiheadAttention):
    """Encoder-decoder multi-head attention with per-head context inference (module docstring).

    ``latent``: this layer's context is ACVI's latent Gaussian (``--context-inference acvi`` and
    the layer is selected by ``--acvi-latent-layers``); otherwise it is fairseq's soft attention.
    """

    def __init__(self, embed_dim, num_heads, args, latent: bool, kdim=None, vdim=None,
                 dropout=0.0, q_noise=0.0, qn_block_size=8):
        super().__init__(embed_dim, num_heads, kdim=kdim, vdim=vdim, dropout=dropout,
                         encoder_decoder_attention=True, q_noise=q_noise,
                         qn_block_size=qn_block_size)
        variant = getattr(args, "context_inference", "soft")
        if variant not in TRANSFORMER_VARIANTS:
            raise ValueError(f"--context-inference {variant!r} is not available in the transformer "
                             f"(choose from {', '.join(TRANSFORMER_VARIANTS)})")
        #: ``--attention-normalizer`` of every head (module docstring)
        self.normalizer = getattr(args, "attention_normalizer", None) or "softmax"
        if self.normalizer not in TRANSFORMER_NORMALIZERS:
            raise ValueError(f"--attention-normalizer {self.normalizer} is not available in the "
                             f"transformer (choose from {', '.join(TRANSFORMER_NORMALIZERS)}; the "
                             "constrained normalisers need a step-by-step decoder: the LSTM models)")
        self.acvi: Optional[ACVIContext] = None
        if variant == "acvi" and latent:
            if getattr(args, "acvi_sampler", "gaussian") != "gaussian":
                raise ValueError("acvi_transformer: --acvi-sampler gumbel is not supported")
            d_h = embed_dim // num_heads
            self.acvi = build_context(args, d_h, d_h, d_h)
        #: the top layer: at evaluation it returns K samples (T, B, K, D) instead of the mean
        self.sample_output = False
        #: per-token loss terms of the latest full-sequence forward: name -> (B, T) float32
        self.latent_losses: Dict[str, Tensor] = {}

    def forward(self, query: Tensor, key: Optional[Tensor], value: Optional[Tensor],
                key_padding_mask: Optional[Tensor] = None, incremental_state=None,
                need_weights: bool = True, static_kv: bool = False,
                attn_mask: Optional[Tensor] = None, before_softmax: bool = False,
                need_head_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """query (T, B, D), key = value = encoder output (N, B', D) (B' = B / beam when fairseq's
        beamable attention is on), key_padding_mask (B', N) -> (context (T, B, D), or (T, B, K, D)
        for the sampling top layer at evaluation; attention weights (B, T, N) averaged over heads,
        or (H, B, T, N) with ``need_head_weights``, float32; None unless asked for)."""
        self.latent_losses = {}
        if self.acvi is None and self.normalizer == "softmax":
            return super().forward(query, key, value, key_padding_mask, incremental_state,
                                   need_weights, static_kv, attn_mask, before_softmax,
                                   need_head_weights)
        if self.acvi is None:
            return self._sparse_soft_forward(query, key, value, key_padding_mask, incremental_state,
                                             need_weights, static_kv, attn_mask, before_softmax,
                                             need_head_weights)
        if not static_kv or attn_mask is not None or before_softmax or self.bias_k is not None \
                or self.add_zero_attn:
            raise ValueError("ContextMultiheadAttention (acvi) is encoder-decoder attention only")
        T, bsz, D = query.shape
        H, hd = self.num_heads, self.head_dim
        k, mu, var, pad = self._static_memory(key, key_padding_mask, bsz, incremental_state)
        kv_bsz = k.size(0) // H

        q = self.q_proj(query)
        q *= self.scaling
        q = q.contiguous().view(T, bsz * H, hd).transpose(0, 1)        # (B·H, T, d_h)
        scores = self._per_kv_batch(q, k.transpose(1, 2), kv_bsz)      # (B·H, T, N)
        if pad is not None:
            scores = scores.view(kv_bsz, -1, H, T, scores.size(-1)).masked_fill(
                pad.view(kv_bsz, 1, 1, 1, -1).to(torch.bool), float("-inf"))
            scores = scores.view(bsz * H, T, -1)
        attn_float = self._normalize(scores)                           # (B·H, T, N) float32
        a = self.dropout_module(attn_float)
        m = self._per_kv_batch(a, mu, kv_bsz)                          # (B·H, T, d_h) float32
        v = self._per_kv_batch(a.pow(2), var, kv_bsz).clamp_min(1e-12)

        if incremental_state is None:
            terms = self.acvi.kl_terms(m, v)                           # (B·H, T) each
            self.latent_losses = {
                name: (t.view(bsz, H, T).mean(1) if name in AVERAGED_TERMS
                       else t.view(bsz, H, T).sum(1)) for name, t in terms.items()}
        dtype = query.dtype
        K = 1 if self.training else (self.acvi.mc_samples if self.sample_output else 0)
        if K <= 0:
            ctx = m.to(dtype).transpose(0, 1).contiguous().view(T, bsz, D)
        elif self.training:
            ctx = draw_gaussian(m, v, 1, dtype).squeeze(2)             # (B·H, T, d_h)
            ctx = ctx.transpose(0, 1).contiguous().view(T, bsz, D)
        else:
            c = draw_gaussian(m, v, K, dtype, antithetic=self.acvi.antithetic)  # (B·H, T, K, d_h)
            ctx = c.view(bsz, H, T, K, hd).permute(2, 0, 3, 1, 4).reshape(T, bsz, K, D)
        out = self.out_proj(ctx)

        return out, self._returned_weights(attn_float, bsz, T, need_weights, need_head_weights)

    def _returned_weights(self, attn_float: Tensor, bsz: int, T: int, need_weights: bool,
                          need_head_weights: bool) -> Optional[Tensor]:
        """The weights fairseq's attention returns: (H, B, T, N) per head, (B, T, N) averaged over
        the heads, or None; ``attn_float`` (B·H, T, N)."""
        if not (need_weights or need_head_weights):
            return None
        weights = attn_float.view(bsz, self.num_heads, T, -1).transpose(1, 0)
        return weights if need_head_weights else weights.mean(dim=0)

    # ------------------------------------------------------------------------------------------
    def _normalize(self, scores: Tensor) -> Tensor:
        """scores (B·H, T, N), −inf at padding -> float32 weights under the layer's normaliser
        (fairseq's softmax, or sparsemax / 1.5-entmax with exact zeros at padding)."""
        if self.normalizer == "softmax":
            return utils.softmax(scores, dim=-1)
        return sparse_normalize(self.normalizer, scores, scores.isneginf())

    def _sparse_soft_forward(self, query, key, value, key_padding_mask, incremental_state,
                             need_weights, static_kv, attn_mask, before_softmax, need_head_weights):
        """Soft attention with a sparse normaliser: fairseq's forward up to the masked scores
        (its projections, masks and cached static keys and values), then the normaliser, the
        attention dropout, the weighted values and ``out_proj`` here. Same shapes as fairseq's."""
        if not static_kv or before_softmax:
            raise ValueError("ContextMultiheadAttention (sparse normaliser) is encoder-decoder "
                             "attention only")
        T, bsz, D = query.shape
        H = self.num_heads
        scores, v = super().forward(query, key, value, key_padding_mask, incremental_state,
                                    need_weights, static_kv, attn_mask, before_softmax=True,
                                    need_head_weights=need_head_weights)  # (B·H, T, N), (B'·H, N, d_h)
        attn_float = self._normalize(scores)
        probs = self.dropout_module(attn_float.type_as(scores))
        ctx = self._per_kv_batch(probs, v, v.size(0) // H)            # (B·H, T, d_h)
        out = self.out_proj(ctx.transpose(0, 1).contiguous().view(T, bsz, D))
        return out, self._returned_weights(attn_float, bsz, T, need_weights, need_head_weights)

    def _static_memory(self, key, key_padding_mask, bsz, incremental_state):
        """Keys, μ and σ² of the encoder output, computed once per sentence and cached in the
        incremental state like fairseq's static keys (reordered with the beam by
        :meth:`reorder_incremental_state`): key (N, B', D) -> k (B'·H, N, d_h) in the model's
        dtype, μ and σ² (B'·H, N, d_h) float32, padding mask (B', N) or None."""
        H, hd = self.num_heads, self.head_dim
        saved = self._get_input_buffer(incremental_state) if incremental_state is not None else None
        if saved and saved.get("prev_key") is not None:
            k4, mu4, var4 = saved["prev_key"], saved["acvi_mu"], saved["acvi_var"]
            B_, N = k4.size(0), k4.size(2)
            return (k4.view(B_ * H, N, hd), mu4.view(B_ * H, N, hd), var4.view(B_ * H, N, hd),
                    saved.get("prev_key_padding_mask"))
        if self.beam_size > 1 and bsz == key.size(1):   # fairseq's beamable attention
            key = key.view(key.size(0), -1, self.beam_size, key.size(2))[:, :, 0, :]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.view(
                    -1, self.beam_size, key_padding_mask.size(1))[:, 0, :]
        N, B_ = key.size(0), key.size(1)
        k = self.k_proj(key).view(N, B_ * H, hd).transpose(0, 1)       # (B'·H, N, d_h)
        vals = self.v_proj(key).view(N, B_, H, hd).permute(1, 2, 0, 3)  # (B', H, N, d_h)
        mu4, var4 = self.acvi.value_moments(vals)                      # (B', H, N, d_h) float32
        mu4, var4 = mu4.contiguous(), var4.contiguous()
        if incremental_state is not None:
            self._set_input_buffer(incremental_state, {
                "prev_key": k.reshape(B_, H, N, hd), "acvi_mu": mu4, "acvi_var": var4,
                "prev_key_padding_mask": key_padding_mask})
        return k, mu4.view(B_ * H, N, hd), var4.view(B_ * H, N, hd), key_padding_mask

    def _per_kv_batch(self, x: Tensor, y: Tensor, kv_bsz: int) -> Tensor:
        """Batched product of per-query x (B·H, T, a) with per-sentence y (B'·H, a, b); with
        beamable attention (B = beam · B') the beam rows of one sentence share y."""
        H = self.num_heads
        if x.size(0) == y.size(0):
            return torch.bmm(x.to(y.dtype) if y.dtype != x.dtype else x, y)
        out = torch.einsum("bxhta,bhas->bxhts", x.view((kv_bsz, -1, H) + x.shape[1:]).to(y.dtype),
                           y.view((kv_bsz, H) + y.shape[1:]))
        return out.reshape((-1,) + out.shape[-2:])
