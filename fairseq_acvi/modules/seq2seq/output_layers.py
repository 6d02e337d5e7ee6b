"""Output layers of the LSTM seq2seq decoder: the swappable last step (docs/method.md §2.2, §3.1).

The decoder (:class:`fairseq_acvi.modules.seq2seq.context_decoder.ContextLSTMDecoder`) forms, for every
step t and every context c_t^(s) it has (the mean, or S Monte-Carlo samples), the attentional
hidden state ``hid = tanh(W_c [s_t ; c_t^(s)])`` (P 4) and hands it to its output layer, which
turns it into a distribution over the target dictionary. The decoder then combines the S
distributions (D 88) and calls :meth:`OutputLayer.finish` on the result. An output layer sees::

    hid     (B, T, S, out_dim)   attentional hidden state per sample
    inputs  :class:`OutputInputs`, each field broadcastable against (B, T, S, ·):
            ctx (B, T, S, d_c), s (B, T, 1, H), x (B, T, 1, E) decoder input embeddings,
            attn (B, T, 1, N) attention of the step, src_ids (B, 1, 1, N) source ids or None

and returns log P (B, T, S, V) float32, or with ``target`` (B, T, 1) long the gold token's
log P (B, T, S) only (where :attr:`OutputLayer.supports_target_scoring`).

Decoding averages the S distributions (the "prob" combination, no autograd): a layer with
:attr:`OutputLayer.averages_in_probability_space` (the copy mixture) sums the weighted
probabilities of the samples and takes one log at the end, instead of S logs and a log-sum-exp
over (B, T, S, V) (the same value up to float rounding; those passes were most of a K = 10
CNN/DM decoding step, BENCHMARKS.md).

Layers: :class:`VocabularyOutput` (softmax over the dictionary: translation, captioning),
:class:`CopyOutput` (the pointer-generator's copy mixture, See et al. 2017) and
:class:`VocabularyOnlyOutput` (the pointer-generator's no-copy baseline). Everything they return
is float32, whatever the model's dtype.
"""
import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules.seq2seq.copy_generator import (EPS, CopySwitch, copy_mixture_log_probs,
                                                 copy_mixture_target_log_probs, gold_vocab_log_probs,
                                                 mixture_log_probs)
from fairseq_acvi.modules.precision import at_least_float32


@dataclass
class OutputInputs:
    """What an output layer may read besides the attentional hidden state (module docstring)."""

    ctx: Tensor
    s: Tensor
    x: Tensor
    attn: Optional[Tensor]
    src_ids: Optional[Tensor]


class OutputLayer(nn.Module):
    """Interface: hid (B, T, S, out_dim) -> log P (B, T, S, V) float32 (module docstring)."""

    #: True where ``forward(..., target=y)`` scores the gold tokens without the (…, V) tensor
    supports_target_scoring = False
    #: True where the layer reads the source ids (``inputs.src_ids``): the decoder then keeps them
    needs_source_ids = False

    def __init__(self, out_dim: int, num_logits: int, vocab_size: int, dropout: float):
        super().__init__()
        #: V' and b' of P 4: rows for the ``num_logits`` ids the layer scores (≤ ``vocab_size``)
        self.fc_out = nn.Linear(out_dim, num_logits)
        self.vocab_size = vocab_size
        self.dropout = dropout

    @property
    def num_logits(self) -> int:
        return self.fc_out.out_features

    def logits(self, hid: Tensor) -> Tensor:
        """hid (..., out_dim) -> (..., num_logits) in the model's dtype (dropout on ``hid``)."""
        return self.fc_out(F.dropout(hid, self.dropout, self.training))

    def read_ids(self, ids: Tensor) -> Tensor:
        """How the decoder reads target-side ids (B, T) — its inputs and the gold target."""
        return ids

    def finish(self, lprobs: Tensor) -> Tensor:
        """Applied to the combined distribution (B, T, V) the decoder returns."""
        return lprobs

    #: the layer can average samples in probability space (:meth:`prob_share`,
    #: :meth:`from_prob_share`), which the decoder then does when decoding (module docstring)
    averages_in_probability_space = False

    def prob_share(self, hid: Tensor, inputs: OutputInputs, w: Tensor):
        """A chunk of c samples' share of Σ_s w_s P_s: hid (B, T, c, out_dim), w (B, T, c)
        weights -> the layer's own partial sums (summed over chunks, then :meth:`from_prob_share`)."""
        raise NotImplementedError

    def from_prob_share(self, share, inputs: OutputInputs) -> Tensor:
        """The summed shares -> log Σ_s w_s P_s (B, T, V) float32."""
        raise NotImplementedError

    def forward(self, hid: Tensor, inputs: OutputInputs, target: Optional[Tensor] = None) -> Tensor:
        raise NotImplementedError  # pragma: no cover - interface


class VocabularyOutput(OutputLayer):
    """P(w) = softmax(V' hid + b')  (P 4) over the whole dictionary, float32."""

    def __init__(self, out_dim: int, vocab_size: int, dropout: float):
        super().__init__(out_dim, vocab_size, vocab_size, dropout)

    def forward(self, hid, inputs, target=None):
        lp = F.log_softmax(at_least_float32(self.logits(hid)), dim=-1)
        return lp if target is None else lp.gather(-1, target.unsqueeze(-1).expand(
            *lp.shape[:-1], 1)).squeeze(-1)


class CopyOutput(OutputLayer):
    """The copy mixture (docs/method.md §3.1, P 5-7), float32 (``modules/seq2seq/copy_generator.py``):

        P_vocab = softmax(V' hid + b')     over the ``n_real`` real ids (markers: 0)
        p_gen   = σ(w_cᵀ c + w_sᵀ s_t + w_xᵀ x_t + b_ptr)          one per sample c
        P(w)    = p_gen P_vocab(w) + (1 − p_gen) Σ_{i: x_i = w} a_ti
    """

    supports_target_scoring = True
    needs_source_ids = True

    def __init__(self, out_dim: int, n_real: int, vocab_size: int, dropout: float,
                 context_dim: int, state_dim: int, input_dim: int):
        super().__init__(out_dim, n_real, vocab_size, dropout)
        self.switch = CopySwitch(context_dim, state_dim, input_dim)

    def forward(self, hid, inputs, target=None):
        logits = self.logits(hid)
        p_gen = self.switch(inputs.ctx, inputs.s, inputs.x)                  # (B, T, S, 1)
        if target is not None:
            return copy_mixture_target_log_probs(logits, p_gen, inputs.attn, inputs.src_ids, target)
        return copy_mixture_log_probs(logits, p_gen, inputs.attn, inputs.src_ids, self.vocab_size)

    averages_in_probability_space = True

    def prob_share(self, hid, inputs, w):
        """(Σ_c w_c p_gen,c P_vocab,c (B, T, n_real), Σ_c w_c (1 − p_gen,c) (B, T, 1)), float32:
        the attention a_t is the same for every sample, so the copy part of the average is
        (Σ_s w_s (1 − p_gen,s)) a_t, scattered once (:meth:`from_prob_share`)."""
        p_vocab = F.softmax(at_least_float32(self.logits(hid)), dim=-1)       # (B, T, c, n_real)
        p_gen = at_least_float32(self.switch(inputs.ctx, inputs.s, inputs.x))  # (B, T, c, 1)
        w = at_least_float32(w).unsqueeze(-1)                                   # (B, T, c, 1)
        gen = torch.matmul((w * p_gen).transpose(-1, -2), p_vocab).squeeze(-2)
        return gen, (w * (1.0 - p_gen)).sum(-2)

    def from_prob_share(self, share, inputs):
        gen, copy_mass = share
        return mixture_log_probs(gen, copy_mass, inputs.attn.squeeze(2), inputs.src_ids.squeeze(2),
                                 self.vocab_size)


def vocab_only_log_probs(vocab_logits: Tensor, vocab_size: int, marker_log_prob: float) -> Tensor:
    """The no-copy output: log P_vocab over the real ids, ``marker_log_prob`` at the markers.

    vocab_logits (..., n_real) -> (..., V) float32 (V = ``vocab_size`` ≥ n_real); the real ids get
    ``log_softmax(vocab_logits)`` (sums to 1), ids [n_real, V) the constant ``marker_log_prob``.
    """
    lp = F.log_softmax(at_least_float32(vocab_logits), dim=-1)
    n_real = lp.size(-1)
    if n_real > vocab_size:
        raise ValueError(f"no-copy output: {n_real} vocabulary logits for a dictionary of {vocab_size}")
    return torch.cat([lp, lp.new_full((*lp.shape[:-1], vocab_size - n_real), marker_log_prob)], -1)


def vocab_only_target_log_probs(vocab_logits: Tensor, target: Tensor) -> Tensor:
    """log P_vocab(y) of the gold token only, float32 (:func:`gold_vocab_log_probs`).

    vocab_logits (..., n_real), target (...) long ids in [0, n_real) (markers already mapped to
    ``<unk>``; a larger id is an index error of ``gather``), broadcast together -> (...). The same
    values as :func:`vocab_only_log_probs` gathered at ``target``, without its (..., V) copy with
    the marker columns.
    """
    return gold_vocab_log_probs(vocab_logits, target)


class VocabularyOnlyOutput(OutputLayer):
    """The pointer-generator without copying (See et al.'s "baseline", docs/method.md §3.1):
    P(w) = P_vocab(w) for the real ids w < n_real, P(<unk-j>) = 0 at the markers.

    Marker ids are read as ``<unk>`` on the target side (:meth:`read_ids`): a source OOV in a
    summary is scored as ``<unk>``. Per sample the markers get the copy mixture's floor log ε
    (ε = 1e-10), so that combining samples never meets −inf (Σ_s w_s lp_s with a zero weight would
    give NaN); :meth:`finish` puts −inf there once the samples are combined, so a marker is never
    decoded. No copy switch is built: no p_gen parameters at all.
    """

    supports_target_scoring = True

    def __init__(self, out_dim: int, n_real: int, vocab_size: int, dropout: float, unk_idx: int):
        super().__init__(out_dim, n_real, vocab_size, dropout)
        self.unk_idx = unk_idx

    def read_ids(self, ids):
        """ids (...) long -> the same with every marker id (≥ n_real) replaced by ``<unk>``."""
        return ids.masked_fill(ids >= self.num_logits, self.unk_idx)

    def finish(self, lprobs):
        n_real = self.num_logits
        return torch.cat([lprobs[..., :n_real],
                          lprobs.new_full((*lprobs.shape[:-1], lprobs.size(-1) - n_real), -math.inf)], -1)

    def forward(self, hid, inputs, target=None):
        logits = self.logits(hid)
        if target is not None:
            return vocab_only_target_log_probs(logits, target)
        return vocab_only_log_probs(logits, self.vocab_size, math.log(EPS))
