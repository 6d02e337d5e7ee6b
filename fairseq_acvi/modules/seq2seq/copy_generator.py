"""The pointer-generator's copy mixture (docs/method.md §3.1; See et al. 2017, P 5-7).

    p_gen = σ(w_cᵀ c_t + w_sᵀ s_t + w_xᵀ x_t + b_ptr)                          (switch)
    P(w)  = p_gen · P_vocab(w) + (1 − p_gen) · Σ_{i: x_i = w} a_ti             (mixture)

Vocabulary layout (the OOV position markers of ``fairseq_acvi.data.oov_markers``): ids
``[0, n_real)`` are fairseq's specials and the real words, ids ``[n_real, V)`` the markers
``<unk-j>``. ``P_vocab`` is a softmax over the ``n_real`` real ids only (the output layer has no
rows for markers, so markers get exactly zero vocabulary mass); the copy mass is scattered onto the
source token ids, markers included, with ``scatter_add`` — the memory is O(B·T·S·(V + N)), never a
(·, N, V) one-hot. Everything is float32 (even under fp16) and the log is taken of the mixture
clamped at ``eps`` = 1e-10, so a word that neither the vocabulary nor the source can produce gets a
finite log-probability (log 1e-10 ≈ −23) instead of −inf/NaN.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.precision import at_least_float32

EPS = 1e-10


class CopySwitch(nn.Module):
    """p_gen = σ(w_cᵀ c + w_sᵀ s + w_xᵀ x + b) as one linear map of [c; s; x] (See et al. eq. 8).

    c (..., d_c), s (..., d_s), x (..., d_x), broadcastable leading dims -> p_gen (..., 1) float32.
    """

    def __init__(self, context_dim: int, state_dim: int, input_dim: int):
        super().__init__()
        self.w_c = nn.Linear(context_dim, 1, bias=True)   # its bias is b_ptr
        self.w_s = nn.Linear(state_dim, 1, bias=False)
        self.w_x = nn.Linear(input_dim, 1, bias=False)

    def forward(self, c: Tensor, s: Tensor, x: Tensor) -> Tensor:
        logit = (at_least_float32(self.w_c(c)) + at_least_float32(self.w_s(s.to(c.dtype)))
                 + at_least_float32(self.w_x(x.to(c.dtype))))
        return torch.sigmoid(logit)


def copy_mixture_log_probs(vocab_logits: Tensor, p_gen: Tensor, attn: Tensor, src_ids: Tensor,
                           vocab_size: int, eps: float = EPS) -> Tensor:
    """log P(w) of the pointer-generator mixture, float32.

    vocab_logits: (..., n_real) logits over the real ids [0, n_real) (markers excluded)
    p_gen:        (..., 1) generation probability in [0, 1]
    attn:         (..., N) copy attention a_t (sums to 1 over non-padding; 0 at padding)
    src_ids:      (..., N) long source token ids (markers included; any id < vocab_size)
    vocab_size:   V = len(dictionary) ≥ n_real
    All leading dims are broadcast together (e.g. vocab_logits (B, T, S, n_real) with attn
    (B, T, 1, N) and src_ids (B, 1, 1, N)). Returns (..., V).
    """
    p_vocab = F.softmax(at_least_float32(vocab_logits), dim=-1)        # (..., n_real)
    p_gen = at_least_float32(p_gen)
    lead = torch.broadcast_shapes(p_vocab.shape[:-1], p_gen.shape[:-1], attn.shape[:-1],
                                  src_ids.shape[:-1])
    n_real = p_vocab.size(-1)
    if n_real > vocab_size:
        raise ValueError(f"copy mixture: {n_real} vocabulary logits for a dictionary of {vocab_size}")
    return mixture_log_probs((p_gen * p_vocab).expand(*lead, n_real),
                             (1.0 - p_gen).expand(*lead, 1), attn, src_ids, vocab_size, eps)


def mixture_log_probs(gen: Tensor, copy_mass: Tensor, attn: Tensor, src_ids: Tensor,
                      vocab_size: int, eps: float = EPS) -> Tensor:
    """log(gen ⊕ copy_mass · a scattered onto the source ids), clamped at ``eps``, float32.

    gen (..., n_real) the generation part (p_gen P_vocab, or a weighted sum of such parts over
    samples), copy_mass (..., 1) the copy probability (1 − p_gen, or its weighted sum), attn and
    src_ids (..., N) broadcastable against them. Returns (..., V)."""
    lead = gen.shape[:-1]
    n_real, N = gen.size(-1), attn.size(-1)
    if n_real < vocab_size:
        gen = torch.cat([gen, gen.new_zeros(*lead, vocab_size - n_real)], dim=-1)
    copy = (copy_mass * at_least_float32(attn)).expand(*lead, N)
    mixed = gen.scatter_add(-1, src_ids.expand(*lead, N), copy)          # (..., V)
    return mixed.clamp_min(eps).log()


def gold_vocab_log_probs(vocab_logits: Tensor, ids: Tensor) -> Tensor:
    """log P_vocab(y) = log_softmax(logits)[y] at one id per position, float32.

    vocab_logits (..., n) and ids (...) long in [0, n), broadcast together -> (...). One fused
    log-softmax (the tensor autograd keeps instead of the logits) and a gather: on a 50k-word
    vocabulary this is about 1.6x faster on a CPU, forward and backward, than
    ``logit_y − logsumexp(logits)``, whose forward and backward each make several passes and
    temporaries the size of the logits (benchmarks/bench_gold_log_probs.py).
    """
    lp = F.log_softmax(at_least_float32(vocab_logits), dim=-1)
    lead = torch.broadcast_shapes(lp.shape[:-1], ids.shape)
    return lp.expand(*lead, lp.size(-1)).gather(-1, ids.expand(lead).unsqueeze(-1)).squeeze(-1)


def copy_mixture_target_log_probs(vocab_logits: Tensor, p_gen: Tensor, attn: Tensor, src_ids: Tensor,
                                  target: Tensor, eps: float = EPS) -> Tensor:
    """log P(y) of the copy mixture for the gold token y only, float32 (training and validation).

    The same value as ``copy_mixture_log_probs(...).gather(-1, y)``, the clamp at ``eps`` included,
    without building the (..., V) mixture: the vocabulary part is ``exp(log_softmax(logits)[y])``
    (:func:`gold_vocab_log_probs`; zero for a marker id y ≥ n_real), the copy part
    ``Σ_{i: x_i = y} a_i``. Shapes as :func:`copy_mixture_log_probs` (``vocab_logits`` (..., n_real),
    ``p_gen`` (..., 1), ``attn`` / ``src_ids`` (..., N), broadcast together) and ``target`` (...) long
    ids; returns (...) float32.
    """
    n_real = vocab_logits.size(-1)
    lead = torch.broadcast_shapes(vocab_logits.shape[:-1], p_gen.shape[:-1], attn.shape[:-1],
                                  src_ids.shape[:-1], target.shape)
    y = target.expand(lead)
    in_vocab = y < n_real
    p_vocab_y = torch.exp(gold_vocab_log_probs(vocab_logits, y.clamp_max(n_real - 1))) * in_vocab
    copy_y = (at_least_float32(attn).expand(*lead, attn.size(-1))
              * src_ids.expand(*lead, src_ids.size(-1)).eq(y.unsqueeze(-1))).sum(-1)
    p_gen = at_least_float32(p_gen).squeeze(-1).expand(lead)
    return (p_gen * p_vocab_y + (1.0 - p_gen) * copy_y).clamp_min(eps).log()
