"""``acvi_pointer_generator``: pointer-generator with coverage for summarization (docs/method.md §3.1).

The seq2seq core (BiLSTM encoder, input-feeding LSTM decoder with pluggable context inference,
coverage) is ``acvi_lstm``'s; this file only changes

* the **embeddings**: one table shared by encoder and decoder (joined dictionary with the OOV
  position markers ``<unk-j>``); marker ids are embedded as ``<unk>`` (:class:`MarkerEmbedding`);
* the **output layer** (:class:`PointerGeneratorDecoder`): for every context c (the mean, or each
  Monte-Carlo sample)
      P_vocab = softmax(V' tanh(V [s_t; c] + b) + b')   over the real ids only (markers: 0)
      p_gen   = σ(w_cᵀ c + w_sᵀ s_t + w_xᵀ x_t + b_ptr)
      P(w)    = p_gen P_vocab(w) + (1 − p_gen) Σ_{i: x_i = w} a_ti              (float32)
  (``fairseq_acvi.modules.copy_generator``). With ACVI the K samples are averaged in probability
  space *after* mixing (docs/method.md §2.2: p_gen depends on c_t, so each sample has its own p_gen).
* **coverage** (``--coverage``): the decoder is always built with the coverage weight w_k of the
  additive scorer, so the parameter set is the same with and without coverage (a checkpoint of
  the coverage-free phases loads into the coverage phase, optimizer state included). Without
  ``--coverage`` no coverage vector is kept: the score has no w_k term (w_k gets no gradient) and
  there is no coverage loss. With it, k_t = Σ_{τ<t} a_τ enters the score and the loss
  Σ_i min(a_ti, k_ti) is returned (weight ``--coverage-weight`` of the ``elbo`` criterion).

**No-copy baseline** (``--no-copy``; See et al. 2017's "baseline" row, docs/method.md §3.1): the
same model without the copy mechanism. Per context c the output is
      P(w) = P_vocab(w)  for the real ids w < n_real,      P(<unk-j>) = 0  for the markers
(float32 log-softmax over the real ids; no clamp is needed). The decoder reads every marker id as
``<unk>``: on input (the embedding already does) and as a **gold target**, so a source OOV in a
summary (``<unk-j>``) is scored as ``<unk>`` and the baseline learns to emit ``<unk>`` for OOV
words; an OOV that is not in the source already is ``<unk>`` in the data. Nothing the model
computes depends on which source position holds which marker. **Decisions:**
  - no :class:`CopySwitch` is built (no p_gen parameters: a different model whose checkpoints do
    not load into the copy model or back; nothing unused for ``--ddp-backend`` to trip on);
  - the distribution the decoder returns (``_predict``: beam search, ``get_normalized_probs``)
    has log P = −inf at the markers, so a marker can never be decoded (``restore_oov`` would turn
    it into a copied word). The per-sample output layer (:meth:`output_log_probs`) writes the copy
    mixture's floor log ε (ε = 1e-10, ``copy_generator.EPS``) there instead, so that combining
    samples never meets −inf (Σ_s w_s lp_s with a zero weight w_s would give NaN); −inf is put in
    after the combination. Gold-token scoring (``_predict_target``) never reads the marker block.
  ``--coverage`` and every context variant work as with copying (the attention still builds the
  context and the coverage loss). The option is a model argument, so ``fairseq-generate`` rebuilds
  the no-copy model from the checkpoint; pass it in every training phase.

Copy attention per variant (**decision**): the copy distribution of every sample uses the
decoder's attention a_t of that step (``StepOutput.attn``): for ``soft``/``ved`` the soft
attention, for ``structured`` the normalised CRF marginals, for ``acvi`` the mixture weights a_t
that generated the sample, for ``variational`` the *prior* a_t for every alignment sample (enum and
sample modes, and the ``exact`` decode). The alternative for variational attention, copying with a
hard alignment δ_{z} (P(w | z=i) = p_gen P_vocab + (1 − p_gen)[x_i = w]), would be the exact
latent-alignment copy model; we do not build it: it needs the sample→position identity that the
context interface does not expose, and with the prior marginalisation (``exact``) it reduces to
the same copy term Σ_i a_ti (1 − p_gen,i) [x_i = w]. Enumerating N alignments also costs
B·T·N·V memory, infeasible for N = 400, V = 50k: use ``--variational-mode sample`` there.

Presets: ``acvi_pointer_generator`` = ``acvi_pointer_generator_cnndm`` (See et al.: 128-d
embeddings, 256-d BiLSTM per direction, 256-d decoder, additive attention of size 512, no dropout).
Train with ``--task pointer_summarization --criterion elbo`` (``recipes/summarization_cnndm.sh``;
the baseline: add ``--no-copy`` to its fairseq-train arguments).
"""
import math
from typing import Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import register_model, register_model_architecture
from torch import Tensor

from fairseq_acvi.data.oov_markers import marker_id_range
from fairseq_acvi.models.lstm_seq2seq import (
    ACVILSTMModel, add_seq2seq_args, finish_model, seq2seq_defaults)
from fairseq_acvi.modules.context import StepOutput
from fairseq_acvi.modules.context_decoder import _MC_CHUNK_ELEMENTS, ContextLSTMDecoder, combine_samples
from fairseq_acvi.modules.copy_generator import (EPS, CopySwitch, copy_mixture_log_probs,
                                                 copy_mixture_target_log_probs)
from fairseq_acvi.modules.lstm_encoder import BiLSTMEncoder


def vocab_only_log_probs(vocab_logits: Tensor, vocab_size: int, marker_log_prob: float) -> Tensor:
    """The no-copy output: log P_vocab over the real ids, ``marker_log_prob`` at the markers.

    vocab_logits (..., n_real) -> (..., V) float32 (V = ``vocab_size`` ≥ n_real); the real ids get
    ``log_softmax(vocab_logits)`` (sums to 1), ids [n_real, V) the constant ``marker_log_prob``.
    """
    lp = F.log_softmax(vocab_logits.float(), dim=-1)
    n_real = lp.size(-1)
    if n_real > vocab_size:
        raise ValueError(f"no-copy output: {n_real} vocabulary logits for a dictionary of {vocab_size}")
    return torch.cat([lp, lp.new_full((*lp.shape[:-1], vocab_size - n_real), marker_log_prob)], -1)


def vocab_only_target_log_probs(vocab_logits: Tensor, target: Tensor) -> Tensor:
    """log P_vocab(y) of the gold token only, float32: ``logit_y − logsumexp(logits)``.

    vocab_logits (..., n_real), target (...) long ids in [0, n_real) (markers already mapped to
    ``<unk>``; a larger id is an index error of ``gather``), broadcast together -> (...). The same
    values as :func:`vocab_only_log_probs` gathered at ``target``, without a second
    (..., n_real) tensor.
    """
    logits = vocab_logits.float()
    n_real = logits.size(-1)
    lead = torch.broadcast_shapes(logits.shape[:-1], target.shape)
    y = target.expand(lead)
    logit_y = logits.expand(*lead, n_real).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    return logit_y - torch.logsumexp(logits, dim=-1).expand(lead)


class MarkerEmbedding(nn.Embedding):
    """Token embedding that reads every marker id (≥ ``first_marker``) as ``<unk>``.

    ids (...) long -> (..., E). The marker rows of the table exist (so that the table matches the
    dictionary) but are never read.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int,
                 first_marker: int, unk_idx: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx=padding_idx)
        nn.init.normal_(self.weight, mean=0, std=embedding_dim ** -0.5)
        nn.init.constant_(self.weight[padding_idx], 0)
        self.first_marker, self.unk_idx = first_marker, unk_idx

    def forward(self, ids: Tensor) -> Tensor:
        return super().forward(ids.masked_fill(ids >= self.first_marker, self.unk_idx))


class PointerGeneratorDecoder(ContextLSTMDecoder):
    """ContextLSTMDecoder whose output layer is the copy mixture (module docstring); with
    ``args.no_copy`` the vocabulary softmax alone (the no-copy baseline, no copy switch)."""

    def __init__(self, args, dictionary, embed_tokens, value_dim: int, enc_final_dim: int,
                 n_real: int):
        if getattr(args, "context_inference", "soft") == "none":
            raise ValueError("--context-inference none: the pointer-generator (and its --no-copy "
                             "baseline) is an attention model; choose soft, acvi, structured, "
                             "variational or ved")
        coverage = bool(getattr(args, "coverage", False))
        if coverage and args.attention_type != "additive":
            raise ValueError(f"--coverage needs --attention-type additive (the w_k k_ti term of "
                             f"P 8), got {args.attention_type}")
        # always build w_k (constant parameter set); use it only with --coverage
        super().__init__(args, dictionary, embed_tokens, value_dim, enc_final_dim,
                         coverage=args.attention_type == "additive")
        self.use_coverage = coverage
        self.n_real = n_real
        self.fc_out = nn.Linear(self.out_dim, n_real)            # V', b': real ids only
        self.no_copy = bool(getattr(args, "no_copy", False))
        # the no-copy baseline has no p_gen parameters at all (module docstring)
        self.switch = None if self.no_copy else CopySwitch(
            self.context.context_dim, self.hidden_size, embed_tokens.embedding_dim)

    def as_vocab_ids(self, ids: Tensor) -> Tensor:
        """ids (...) long -> the same with every marker id (≥ n_real) replaced by ``<unk>``."""
        return ids.masked_fill(ids >= self.n_real, self.unk_idx)

    def forward(self, prev_output_tokens: Tensor, encoder_out: Optional[Dict] = None,
                incremental_state=None, target: Optional[Tensor] = None, **kwargs):
        """As :meth:`ContextLSTMDecoder.forward`. With ``--no-copy`` the decoder reads marker ids
        as ``<unk>`` in ``prev_output_tokens`` (B, T) (the embedding does so anyway) and in
        ``target`` (B, T): a source OOV in the summary is scored as ``<unk>``, in
        ``extra["target_lprobs"]`` and in the variational context's target-dependent terms."""
        if self.no_copy:
            prev_output_tokens = self.as_vocab_ids(prev_output_tokens)
            if target is not None:
                target = self.as_vocab_ids(target)
        return super().forward(prev_output_tokens, encoder_out, incremental_state=incremental_state,
                               target=target, **kwargs)

    def _start(self, encoder_out, prev_output_tokens, full_sequence, target=None):
        cache = super()._start(encoder_out, prev_output_tokens, full_sequence, target)
        cache["src_ids"] = encoder_out["src_tokens"][0]          # (B, N) right-padded, = values
        return cache

    def output_log_probs(self, s: Tensor, ctx: Tensor, out: StepOutput, x: Tensor,
                         cache: Dict[str, Tensor], target=None) -> Tensor:
        """s (B, T, H), ctx (B, T, S, d_c), out.attn (B, T, N), x (B, T, E) -> (B, T, S, V) fp32;
        with ``target`` (B, T) long, log P(y_t) of the gold tokens only, (B, T, S)."""
        S = ctx.size(2)
        s_ = s.unsqueeze(2).expand(-1, -1, S, -1)
        hid = torch.tanh(self.W_c(torch.cat([s_, ctx.to(s.dtype)], dim=-1)))
        return self._mix(hid, ctx, s.unsqueeze(2), x.unsqueeze(2), out.attn.unsqueeze(2), cache,
                         target=None if target is None else target.unsqueeze(2))

    def _predict(self, s, feeds, out: StepOutput, x, cache, stats=None):
        """The distribution the decoder returns, log P (B, T, V) float32; ``--no-copy``: −inf
        (probability 0) at the markers, set after the samples are combined. ``stats``: as
        :meth:`ContextLSTMDecoder._predict`, from the per-sample *mixed* distributions (§2.2)."""
        if out.samples is None:  # the mean context only: the recurrent path's hidden is reused
            lp = self._mix(feeds.unsqueeze(2), out.mean.unsqueeze(2), s.unsqueeze(2),
                           x.unsqueeze(2), out.attn.unsqueeze(2), cache).squeeze(2)
        else:
            lp = super()._predict(s, feeds, out, x, cache, stats=stats)
        if self.no_copy:
            lp = torch.cat([lp[..., :self.n_real],
                            lp.new_full((*lp.shape[:-1], lp.size(-1) - self.n_real), -math.inf)], -1)
        return lp

    supports_target_scoring = True

    def _predict_target(self, s, feeds, out: StepOutput, x, cache, target):
        """log P(y_t) of the gold tokens only (B, T) float32: :meth:`_predict` gathered at
        ``target`` (B, T), computed by :func:`copy_mixture_target_log_probs` (no (B, T, V) mixture);
        ``--no-copy``: by :func:`vocab_only_target_log_probs`, ``target`` with the markers
        already read as ``<unk>`` (:meth:`forward`)."""
        if out.samples is None:   # the mean context: the recurrent path's hidden, as _predict
            return self._mix(feeds.unsqueeze(2), out.mean.unsqueeze(2), s.unsqueeze(2), x.unsqueeze(2),
                             out.attn.unsqueeze(2), cache, target=target.unsqueeze(2)).squeeze(2)
        B, T, S = out.samples.shape[:3]
        # large validation batches with many samples: the (B, T, ·, n_real) logits sample by sample
        step = S if B * T * S * self.n_real <= _MC_CHUNK_ELEMENTS else 1
        lp = torch.cat([self.output_log_probs(s, out.samples[:, :, i:i + step], out, x, cache, target)
                        for i in range(0, S, step)], dim=2)                   # (B, T, S)
        return combine_samples(lp.unsqueeze(-1), out.log_weights, out.combine).squeeze(-1)

    def _mix(self, hid, ctx, s, x, attn, cache, target=None):
        """hid (B, T, S, out_dim), ctx (B, T, S, d_c), s (B, T, 1, H), x (B, T, 1, E),
        attn (B, T, 1, N) -> log P (B, T, S, V) float32; with ``target`` (B, T, 1) long, log P(y)
        of the gold token only, (B, T, S). ``--no-copy``: log P_vocab, log ε at the markers (the
        copy mixture's floor; :meth:`_predict` makes it −inf after combining the samples), and a
        ``target`` must hold no marker ids."""
        logits = self.fc_out(F.dropout(hid, self.dropout_out, self.training))
        if self.no_copy:
            if target is not None:
                return vocab_only_target_log_probs(logits, target)
            return vocab_only_log_probs(logits, len(self.dictionary), math.log(EPS))
        p_gen = self.switch(ctx, s, x)                                   # (B, T, S, 1)
        src = cache["src_ids"][:, None, None, :]                         # (B, 1, 1, N)
        if target is not None:
            return copy_mixture_target_log_probs(logits, p_gen, attn, src, target)
        return copy_mixture_log_probs(logits, p_gen, attn, src, len(self.dictionary))


@register_model("acvi_pointer_generator")
class PointerGeneratorModel(ACVILSTMModel):
    @staticmethod
    def add_args(parser):
        add_seq2seq_args(parser)
        parser.add_argument("--coverage", action="store_true",
                            help="coverage k_t in the attention score and the coverage loss "
                                 "(docs/method.md §3.1; the final training phase)")
        parser.add_argument("--no-copy", action="store_true",
                            help="the no-copy baseline (See et al. 2017): P(w) = P_vocab(w), no "
                                 "copy switch; source OOVs (<unk-j>) in the target are scored as "
                                 "<unk>, and markers are never generated (docs/method.md §3.1)")

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
        if src_dict.symbols != tgt_dict.symbols:
            raise ValueError("acvi_pointer_generator needs one joined dictionary with the <unk-j> "
                             "markers for source and target (fairseq-preprocess --srcdict D "
                             "--tgtdict D; data_scripts/prepare_cnndm.sh)")
        if args.encoder_embed_dim != args.decoder_embed_dim:
            raise ValueError("acvi_pointer_generator shares the source/target embedding: "
                             "--encoder-embed-dim must equal --decoder-embed-dim")
        first_marker, _ = marker_id_range(tgt_dict)
        embed = MarkerEmbedding(len(tgt_dict), args.decoder_embed_dim, tgt_dict.pad(),
                                first_marker, tgt_dict.unk())
        encoder = BiLSTMEncoder(src_dict, args.encoder_embed_dim, args.encoder_hidden_size,
                                args.encoder_layers, args.encoder_dropout_in,
                                args.encoder_dropout_out, embed_tokens=embed,
                                max_positions=args.max_source_positions)
        decoder = PointerGeneratorDecoder(args, tgt_dict, embed, value_dim=encoder.output_units,
                                          enc_final_dim=encoder.output_units, n_real=first_marker)
        if args.share_decoder_input_output_embed:
            raise ValueError("--share-decoder-input-output-embed is not supported by the "
                             "pointer-generator (its output layer covers the real words only)")
        return finish_model(cls(encoder, decoder), args)


def pointer_generator_defaults(args):
    seq2seq_defaults(
        args, dropout=0.0, encoder_embed_dim=128, decoder_embed_dim=128, encoder_hidden_size=256,
        encoder_layers=1, decoder_hidden_size=256, decoder_layers=1, attention_type="additive",
        attention_dim=512, max_source_positions=401, max_target_positions=100)
    if getattr(args, "coverage", None) is None:
        args.coverage = False
    if getattr(args, "no_copy", None) is None:
        args.no_copy = False
    if getattr(args, "ved_latent_dim", None) is None:
        args.ved_latent_dim = 128  # docs/method.md §2.5: 128 for summarization


@register_model_architecture("acvi_pointer_generator", "acvi_pointer_generator")
def base_architecture(args):
    pointer_generator_defaults(args)


@register_model_architecture("acvi_pointer_generator", "acvi_pointer_generator_cnndm")
def acvi_pointer_generator_cnndm(args):
    pointer_generator_defaults(args)
