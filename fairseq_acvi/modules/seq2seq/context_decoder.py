"""LSTM decoder with (optional) input feeding and pluggable context inference (docs/method.md §2, §3).

One decoder step (Luong et al. 2015 with input feeding, P 4, P 10):

    x_t   = [E y_{t-1} ; f_{t-1} ; z]                  f: attentional hidden, z: VED latent
    s_t   = LSTM_L(... LSTM_1(x_t))                    (B, H)
    e_t   = scorer(s_t, mem, k_t)                      (B, N), -inf at padding (k_t: coverage)
    out_t = context_inference.step(e_t, s_t, ...)      mean m_t, samples c_t^(1..S), attn a_t
    f_t   = tanh(W_c [s_t ; m_t])                      recurrent path uses the mean (§2.2)

then ``out = context_inference.finish(stack(out_1..T))`` completes, for all steps at once, what the
recurrence does not read (ACVI's variance, KL and samples).

Without input feeding (``--input-feeding 0``, docs/method.md §3.7) x_t = [E y_{t-1} ; z]: a
teacher-forced pass then runs each LSTM layer over all steps in one fused call and the scorer,
the context inference (``steps``) and W_c for all steps at once (:meth:`_all_steps`; seed 003's
options below as causal attention over all steps), where nothing else is recurrent
(:attr:`runs_in_parallel`); incremental decoding and the recurrent configurations run the step
loop (:meth:`_step_by_step`).

A ``stateful`` context inference (planning attention, §3.4) also gets its recurrent state r_{t-1}
and returns r_t; the state lives in the incremental state beside the LSTM state (keys
``state_<name>``, batch-first) and is reordered with the beam like it.

After the loop, for all steps at once (one batched matmul, samples folded into the batch):

    P_t = Σ_s w_s softmax(W_o tanh(W_c [s_t ; c_t^(s)]))   (D 88; float32, log-space)

The decoder returns ``(lprobs, extra)``: ``lprobs`` (B, T, V) float32 *log-probabilities*
(already normalised and MC-averaged; ``get_normalized_probs`` only exponentiates), and
``extra = {"attn": [(B, T, N)], "losses": {name: (sum, weight or None)}, "token_terms":
{name: (B, T)}}``. A weight of None means the criterion chooses it (the coverage loss,
``--coverage-weight``); ``token_terms`` are the context inference's per-step terms before they are
summed (unweighted, padding steps included; e.g. ACVI's ``kl``, planning attention's ``replan``
switch g_t), for diagnostics and pictures.

Predictive uncertainty (docs/uncertainty.md; off unless ``record_uncertainty`` is set, e.g. by
:func:`fairseq_acvi.generation.uncertainty.enable_uncertainty`): ``extra["uncertainty"]`` (B, T, 3)
float32 holds H[p̄_t], E_k H[p_t^(k)] and their difference, the mutual information, computed from
the K per-sample distributions the output step already forms (:mod:`fairseq_acvi.mc_prediction.uncertainty`).
When decoding incrementally the rows of every step are also kept in the incremental state
(``uq``, (B, t, 3), reordered with the beam like the LSTM state), and :attr:`uncertainty_path`
points at the newest one: row b holds the uncertainties of every step of the path that beam row b
is on, which is what a finished hypothesis reports.

The output layer is a part (``head``, :mod:`fairseq_acvi.modules.seq2seq.output_layers`; fairseq's
decoders already have an ``output_layer`` method): the
softmax over the dictionary (translation, captioning), the copy mixture or the no-copy softmax
(pointer-generator). It maps the attentional hidden state of every sample to log-probabilities;
combining the samples, the uncertainty and the incremental state stay here.

``--context-inference none`` is a variant like the others (the empty context,
:mod:`fairseq_acvi.modules.context.none`): the decoder has no branch for it.

Seed 003's configurations (ii) and (iii) (docs/method.md §3.6; both off by default, and then
nothing of them is built: the decoder is the one above, bit for bit, and old checkpoints load):

* ``--self-attention-heads H`` (iii): the top layer's output s_t goes through causal multi-head
  self-attention over s_1..s_t, q_t = LayerNorm(s_t + MultiHead(s_t; s_1..s_t))
  (:mod:`fairseq_acvi.modules.seq2seq.self_attention`), and q_t replaces s_t everywhere below it: the
  scorer's query, the context inference's query, W_c's input and the output layer's. The
  per-head keys and values of every earlier step are kept in the incremental state (``sa_keys``,
  ``sa_values``, (B, H, t, d_h)) and reordered with the beam. (The encoder side, self-attention
  over the annotations, is the encoder's: modules/seq2seq/lstm_encoder.py.)
* ``--attend-decoder-past`` (ii): a second, deterministic context d_t = Σ_{j<t} b_tj v_j over the
  decoder's own earlier outputs q_1..q_{t−1}, scored by a second scorer of the ``--attention-type``
  family (:mod:`fairseq_acvi.modules.seq2seq.decoder_past`; d_1 = 0), joins the prediction:
  f_t = tanh(W_c [q_t ; d_t ; m_t]) on the recurrent path and tanh(W_c [q_t ; d_t ; c_t^(s)]) for
  the output layer (the decoder output the prediction reads is u_t = [q_t ; d_t]; a copy
  switch still reads q_t). The past keys and values (``past_keys``, ``past_values``, (B, t, ·))
  live in the incremental state, reordered with the beam; ``extra["decoder_past_attn"]``
  (B, T, t0 + T − 1) holds b_t (zeros where a step has no such past position).

The incremental state, made at the first step and reordered with the beam, is
:mod:`fairseq_acvi.modules.seq2seq.decoder_state`'s.
"""
from typing import Callable, Dict, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq.models import FairseqIncrementalDecoder
from torch import Tensor

from fairseq_acvi.mc_prediction import averaging as mc
from fairseq_acvi.mc_prediction import uncertainty as unc
from fairseq_acvi.modules.context import StepOutput, context_class
from fairseq_acvi.modules.context.scorers import DEFAULT_INNER, Memory
from fairseq_acvi.modules.seq2seq import compiled_step
from fairseq_acvi.modules.seq2seq.decoder_passes import DecoderPasses
from fairseq_acvi.modules.seq2seq.decoder_state import DecoderState
from fairseq_acvi.modules.seq2seq.decoder_past import DecoderPastAttention
from fairseq_acvi.modules.seq2seq.output_layers import OutputInputs, OutputLayer, VocabularyOutput
from fairseq_acvi.modules.seq2seq.self_attention import SelfAttentionBlock


class ContextLSTMDecoder(DecoderPasses, DecoderState, FairseqIncrementalDecoder):
    """The LSTM decoder of every seq2seq model, with input feeding unless ``--input-feeding 0``
    (module docstring).

    ``value_dim``: size of the encoder annotations h_i; ``enc_final_dim``: of the final encoder
    state that initialises the LSTM; ``build_output_layer(context_dim)``: makes the
    :class:`OutputLayer` once the context inference (and so d_c) is known; its ``fc_out`` reads
    ``--decoder-out-embed-dim`` features (default: :class:`VocabularyOutput` over the dictionary,
    dropout ``--decoder-dropout-out``); ``coverage``: build the additive scorer's coverage
    weight w_k; ``use_coverage`` (default ``coverage``): keep the coverage vector and return the
    coverage loss (the pointer-generator builds w_k always and uses it only with ``--coverage``).
    """

    def __init__(self, args, dictionary, embed_tokens: nn.Module, value_dim: int,
                 enc_final_dim: int,
                 build_output_layer: Optional[Callable[[int], OutputLayer]] = None,
                 coverage: bool = False, use_coverage: Optional[bool] = None):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.eos_idx = dictionary.eos()
        self.unk_idx = dictionary.unk()
        self.embed_tokens = embed_tokens
        embed_dim = embed_tokens.embedding_dim
        H = args.decoder_hidden_size
        self.hidden_size = H
        self.num_layers = args.decoder_layers
        self.dropout_in = args.decoder_dropout_in
        self.dropout_out = args.decoder_dropout_out
        self.max_target_positions = args.max_target_positions
        self.use_coverage = coverage if use_coverage is None else use_coverage

        variant = context_class(args)
        self.scorer = variant.build_scorer(args, H, value_dim, coverage=coverage)
        self.context = variant(args, self.scorer.value_dim, H, enc_final_dim)
        self.out_dim = args.decoder_out_embed_dim
        #: Luong et al.'s input feeding (``--input-feeding``, default 1): f_{t-1} is an LSTM input
        self.input_feeding = bool(getattr(args, "input_feeding", 1))
        self.compile_step = compiled_step.check_mode(
            getattr(args, "compile_decoder_step", None) or "none")
        self.feed_dim = self.out_dim if self.input_feeding else 0
        self.word_keep = getattr(self.context, "word_keep", 1.0)
        #: "zero": every context (mean and samples) is replaced by zeros (source-use diagnostics;
        #: "shuffle" is done by the encoder, which hands over another sentence's annotations)
        self.context_ablation = getattr(args, "context_ablation", "none")

        in_dim = embed_dim + self.feed_dim + self.context.decoder_input_dim
        self.layers = nn.ModuleList(
            [nn.LSTMCell(in_dim if i == 0 else H, H) for i in range(self.num_layers)])
        self.init_h = nn.Linear(enc_final_dim, H)
        self.init_c = nn.Linear(enc_final_dim, H)
        # seed 003's (iii) and (ii) (module docstring; the options are checked with the model's
        # others, models/seq2seq_base.py); when off nothing is built
        heads = getattr(args, "self_attention_heads", 0) or 0
        self.self_attn = (SelfAttentionBlock(H, heads, self.dropout_out) if heads else None)
        self.past_attn = (DecoderPastAttention(args.attention_type, H, args.attention_dim,
                                               getattr(args, "key_value_inner", DEFAULT_INNER))
                          if getattr(args, "attend_decoder_past", False) else None)
        #: size of u_t, the decoder output the prediction reads: [q_t ; d_t] with (ii), else q_t
        self.pred_dim = H + (self.past_attn.value_dim if self.past_attn is not None else 0)
        self.W_c = nn.Linear(self.pred_dim + self.context.context_dim, self.out_dim, bias=False)
        output_layer = (build_output_layer(self.context.context_dim) if build_output_layer
                        else VocabularyOutput(self.out_dim, len(dictionary), self.dropout_out))
        if output_layer.fc_out.in_features != self.out_dim:
            raise ValueError(f"the output layer reads {output_layer.fc_out.in_features}-d features "
                             f"but --decoder-out-embed-dim is {self.out_dim}")
        self.head = output_layer

    def upgrade_state_dict_named(self, state_dict, name):
        """Checkpoints saved before the output layer was a part (2026-11-26) name its parameters
        ``decoder.fc_out.*`` / ``decoder.switch.*``: renamed to ``decoder.head.*`` (same
        values, same parameter order, so optimizer states resume)."""
        prefix = f"{name}." if name else ""
        for old in [k for k in state_dict if k.startswith(prefix + "fc_out.")
                    or k.startswith(prefix + "switch.")]:
            state_dict[prefix + "head." + old[len(prefix):]] = state_dict.pop(old)

    # ------------------------------------------------------------------------------------------
    #: compute ``extra["uncertainty"]`` (module docstring); off by default: one attribute test
    record_uncertainty = False
    #: with ``record_uncertainty`` and an incremental state: the (B, t, 3) per-step uncertainties
    #: of every beam row's path after the latest step (None before the first step)
    uncertainty_path: Optional[Tensor] = None
    #: with ``record_uncertainty`` and an incremental state: log p̄ (B, V) of the latest step, what
    #: an ensemble of decoders averages (generation/uncertainty.py; a reference, no copy)
    last_lprobs: Optional[Tensor] = None

    @property
    def supports_target_scoring(self) -> bool:
        """True where the output layer scores the gold tokens without the (B, T, V) output (the
        pointer-generator's); :meth:`training_inputs` then asks for ``score_target``."""
        return self.head.supports_target_scoring

    def training_inputs(self, target: Tensor) -> Dict:
        """The forward arguments, besides ``prev_output_tokens``, that a forward with a known gold
        ``target`` (B, T) takes (training and validation): ``target`` and ``score_target`` where
        the decoder scores the gold tokens itself (:attr:`supports_target_scoring`), ``target``
        where the context inference conditions on y (``needs_target``: variational; a truncated
        summary does not end in </s>, so y cannot be rebuilt from ``prev_output_tokens``), else
        nothing."""
        if self.supports_target_scoring:
            return {"target": target, "score_target": True}
        if self.context.needs_target:
            return {"target": target}
        return {}

    def forward(self, prev_output_tokens: Tensor, encoder_out: Dict, incremental_state=None,
                target: Optional[Tensor] = None, score_target: bool = False, **unused):
        """prev_output_tokens: (B, T) -> (lprobs (B, T', V) float32, extra); T' = 1 when
        decoding incrementally.

        target (B, T), optional: the gold y_1..y_T for contexts that condition on it (variational
        inference network, its per-step terms). The ``elbo`` criterion passes it; without it the
        target is rebuilt from prev_output_tokens, which is exact only when every target ends in
        ``</s>`` (not for summaries cut by ``--truncate-target``).

        score_target: return ``(None, extra)`` with ``extra["target_lprobs"]`` = log P(y_t)
        (B, T) float32, the same values as ``lprobs`` gathered at ``target``, where the decoder
        ``supports_target_scoring`` (needs ``target``; not with an incremental state)."""
        if target is not None and target.shape != prev_output_tokens.shape:
            raise ValueError(f"target {tuple(target.shape)} and prev_output_tokens "
                             f"{tuple(prev_output_tokens.shape)} must have the same shape")
        if score_target and (target is None or incremental_state is not None
                             or not self.supports_target_scoring):
            raise ValueError("score_target needs target, no incremental state and a decoder that "
                             f"supports_target_scoring ({type(self).__name__}: "
                             f"{self.supports_target_scoring})")
        prev_output_tokens = self.head.read_ids(prev_output_tokens)
        if target is not None:
            target = self.head.read_ids(target)
        cache = self._get_cache(incremental_state)
        if cache is None:
            cache = self._start(encoder_out, prev_output_tokens, incremental_state is None, target)
        if incremental_state is not None:
            t0 = prev_output_tokens.size(1) - 1
            prev_output_tokens = prev_output_tokens[:, -1:]
        else:
            t0 = 0
        if self.training and self.context_ablation != "none":
            raise ValueError("--context-ablation is for evaluation only (fairseq-generate / "
                             "fairseq-validate --model-overrides), not for training")
        tokens = prev_output_tokens
        if self.training and self.word_keep < 1.0:
            drop = torch.rand(tokens.shape, device=tokens.device) > self.word_keep
            tokens = tokens.masked_fill(drop & tokens.ne(self.padding_idx), self.unk_idx)
        x = F.dropout(self.embed_tokens(tokens), p=self.dropout_in, training=self.training)
        mem = Memory(cache["keys"], cache["values"], cache["pad"])
        prepared = {k[len("prep_"):]: v for k, v in cache.items() if k.startswith("prep_")}
        if incremental_state is None and self.runs_in_parallel:
            all_steps = compiled_step.step_function(self, self.compile_step, "_all_steps")
            s, feeds, steps, new_cache, past_attn = all_steps(x, cache, mem, prepared)
            cov_loss = None
        else:
            s, feeds, steps, new_cache, cov_loss, past_attn = self._step_by_step(
                x, cache, mem, prepared, t0, incremental_state is not None)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "cache", new_cache)
        stats = {} if self.record_uncertainty and not score_target else None

        out = self.context.finish(steps, prepared)                     # fields (B, T, ...)
        if self.context_ablation == "zero":                            # samples made by finish
            out = out.zeroed()
        if score_target:
            lprobs, target_lprobs = None, self._predict_target(s, feeds, out, x, cache, target)
        else:
            lprobs, target_lprobs = self._predict(s, feeds, out, x, cache, stats=stats), None
        nonpad = prev_output_tokens.ne(self.padding_idx)               # (B, T)
        losses = {}
        for name, val in out.losses.items():
            losses[name] = ((val * nonpad).sum(), self.context.loss_weight(name))
        if cov_loss is not None:
            losses["coverage"] = ((cov_loss * nonpad).sum(), None)
        if self.training and self.context.needs_target:
            if target is None:
                target = self._targets(prev_output_tokens)
            fn = lambda ctx: self.output_log_probs(s, ctx, out, x, cache).gather(  # noqa: E731
                -1, target[:, :, None, None].expand(*ctx.shape[:3], 1)).squeeze(-1)
            for name, val in self.context.sequence_losses(out, fn, target, prepared).items():
                losses[name] = ((val * nonpad).sum(), self.context.loss_weight(name))
        if incremental_state is None or t0 == 0:
            for name, val in self.context.sentence_losses(prepared).items():
                losses[name] = (val.sum(), self.context.loss_weight(name))
        extra = {"attn": [out.attn], "losses": losses, "token_terms": out.losses}
        if past_attn is not None:
            extra["decoder_past_attn"] = past_attn
        if target_lprobs is not None:
            extra["target_lprobs"] = target_lprobs
        if stats is not None:
            u = stats.get("uncertainty")
            self._keep_uncertainty(unc.single(lprobs) if u is None else u, extra, new_cache,
                                   incremental_state, lprobs)
        return lprobs, extra

    def _keep_uncertainty(self, u: Tensor, extra: Dict, new_cache: Dict[str, Tensor],
                          incremental_state, lprobs: Tensor) -> None:
        """u (B, T, 3) float32 -> ``extra["uncertainty"]``; when decoding incrementally, appended
        to the path history of the incremental state (``uq`` (B, t, 3)), :attr:`uncertainty_path`,
        and the latest step's log p̄ (B, V) of ``lprobs`` (B, T, V) in :attr:`last_lprobs`."""
        extra["uncertainty"] = u
        if incremental_state is not None:
            prev = new_cache.get("uq")
            path = u if prev is None else torch.cat([prev, u], dim=1)
            new_cache["uq"] = path
            self.set_incremental_state(incremental_state, "cache", new_cache)
            self.uncertainty_path = path
            self.last_lprobs = lprobs[:, -1]

    # ------------------------------------------------------------------------------------------
    def output_log_probs(self, s: Tensor, ctx: Tensor, out: StepOutput, x: Tensor,
                         cache: Dict[str, Tensor], target: Optional[Tensor] = None) -> Tensor:
        """The output layer on contexts ``ctx`` (P 4): s (B, T, pred_dim) the decoder outputs u_t
        (s_t, or q_t / [q_t ; d_t] with seed 003's options), ctx (B, T, S, d_c), x (B, T, E)
        -> log-probs (B, T, S, V) float32; with ``target`` (B, T) long, log P(y_t) of the gold
        tokens only, (B, T, S)."""
        return self._output(self._hidden(s, ctx), ctx, s, out, x, cache, target)

    def _hidden(self, s: Tensor, ctx: Tensor) -> Tensor:
        """tanh(W_c [u_t ; c]) (B, T, S, out_dim) for every context c in ctx (B, T, S, d_c);
        s (B, T, pred_dim) holds u_t."""
        s_ = s.unsqueeze(2).expand(-1, -1, ctx.size(2), -1)
        return torch.tanh(self.W_c(torch.cat([s_, ctx.to(s.dtype)], dim=-1)))

    def _output(self, hid, ctx, s, out: StepOutput, x, cache, target=None) -> Tensor:
        """hid (B, T, S, out_dim), ctx (B, T, S, d_c) -> the output layer's (B, T, S, V) or, with
        ``target`` (B, T), (B, T, S)."""
        inputs = self._output_inputs(ctx, s, out, x, cache)
        return self.head(hid, inputs, None if target is None else target.unsqueeze(2))

    def _output_inputs(self, ctx, s, out: StepOutput, x, cache) -> OutputInputs:
        if self.past_attn is not None:      # u_t = [q_t ; d_t]: the output layer reads q_t
            s = s[..., :self.hidden_size]
        return OutputInputs(ctx=ctx, s=s.unsqueeze(2), x=x.unsqueeze(2),
                            attn=None if out.attn is None else out.attn.unsqueeze(2),
                            src_ids=cache["src_ids"][:, None, None, :] if "src_ids" in cache else None)

    def _predict(self, s, feeds, out: StepOutput, x, cache, stats: Optional[Dict] = None):
        """log P (B, T, V) float32, the K-sample average (D 88), finished by the output layer
        (the no-copy baseline: −inf at the markers). With a ``stats`` dict, also
        ``stats["uncertainty"]`` (B, T, 3) from the K per-sample distributions (left unset with
        one context per step: the caller takes the entropy of the result)."""
        return self.head.finish(self._combined(s, feeds, out, x, cache, stats))

    def _combined(self, s, feeds, out: StepOutput, x, cache, stats):
        """:meth:`_predict` before the output layer's ``finish``: the S contexts' distributions
        combined chunk by chunk (:mod:`fairseq_acvi.mc_prediction.averaging`); in probability
        space where the output layer forms it there (the copy mixture, when decoding)."""
        if out.samples is None:  # one context per step, the mean: reuse the recurrent path
            return self._output(feeds.unsqueeze(2), out.mean.unsqueeze(2), s, out, x,
                                cache).squeeze(2)
        n_logits = len(self.dictionary)
        if (out.combine == "prob" and not torch.is_grad_enabled()
                and self.head.averages_in_probability_space):
            lp_mean = mc.average_in_probability_space(
                lambda i, j, w: self.head.prob_share(
                    self._hidden(s, out.samples[:, :, i:j]),
                    self._output_inputs(out.samples[:, :, i:j], s, out, x, cache), w),
                lambda total: self.head.from_prob_share(
                    total, self._output_inputs(None, s, out, x, cache)),
                out.samples, n_logits, out.log_weights)
            if stats is not None and out.samples.size(2) > 1:
                # the decomposition reads every sample's distribution; the search reads lp_mean,
                # the same values whether the uncertainty is recorded or not
                stats["uncertainty"] = mc.sample_uncertainty(
                    self._chunk_log_probs(s, out, x, cache), out.samples, n_logits,
                    out.log_weights, lp_mean)
            return lp_mean
        return mc.average(self._chunk_log_probs(s, out, x, cache), out.samples, n_logits,
                          out.log_weights, out.combine, stats)

    def _chunk_log_probs(self, s, out: StepOutput, x, cache, target=None):
        """The output layer over contexts i .. j − 1 of ``out.samples``: (i, j) -> (B, T, j − i,
        V), or with ``target`` (B, T) the gold tokens' (B, T, j − i)."""
        if target is None:
            return lambda i, j: self.output_log_probs(s, out.samples[:, :, i:j], out, x, cache)
        return lambda i, j: self.output_log_probs(s, out.samples[:, :, i:j], out, x, cache, target)

    def _predict_target(self, s, feeds, out: StepOutput, x, cache, target: Tensor) -> Tensor:
        """log P(y_t) of the gold tokens (B, T) float32: :meth:`_predict` gathered at ``target``
        (B, T), computed by the output layer's gold-token path (no (B, T, V) tensor) where it
        :attr:`supports_target_scoring`."""
        if not self.head.supports_target_scoring or (out.combine == "geometric" and out.samples is not None):
            # (the geometric mean is normalised over the vocabulary: it needs every token's score)
            return self._predict(s, feeds, out, x, cache).gather(-1, target.unsqueeze(-1)).squeeze(-1)
        if out.samples is None:   # the mean context: the recurrent path's hidden, as _predict
            return self._output(feeds.unsqueeze(2), out.mean.unsqueeze(2), s, out, x, cache,
                                target).squeeze(2)
        return mc.gold_log_probs(self._chunk_log_probs(s, out, x, cache, target), out.samples,
                                 self.head.num_logits, out.log_weights, out.combine)

    def _targets(self, prev_output_tokens: Tensor) -> Tensor:
        """Rebuild the target y_1..y_T from prev_output_tokens = [eos, y_1, …] (right padded)."""
        pad = prev_output_tokens.new_full((prev_output_tokens.size(0), 1), self.padding_idx)
        tgt = torch.cat([prev_output_tokens[:, 1:], pad], dim=1)
        last = prev_output_tokens.ne(self.padding_idx) & tgt.eq(self.padding_idx)
        return tgt.masked_fill(last, self.eos_idx)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        lprobs = net_output[0].float()
        return lprobs if log_probs else lprobs.exp()

    def max_positions(self):
        return self.max_target_positions
