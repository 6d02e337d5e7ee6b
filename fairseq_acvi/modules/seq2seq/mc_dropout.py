"""Monte-Carlo dropout at evaluation: K dropout masks averaged in probability space
(docs/uncertainty.md §6; Gal and Ghahramani 2016, *Dropout as a Bayesian Approximation*, ICML).

:func:`wrap_mc_dropout` turns any LSTM seq2seq model of the package (``acvi_lstm`` with every
context inference, soft included; ``acvi_pointer_generator``; ``acvi_video_captioner``) into a
model whose prediction at every target step is the average of K *chains*, each the model under
its own dropout masks:

    p̄_t(v) = (1/K) Σ_k p(v | y_<t, x; mask chain k)          (probability space)

The K chains are folded into the batch: row r of the outer batch (a sentence, or a beam row of
one) is inner rows r·K .. r·K + K − 1 (:func:`fold`). Each chain runs the whole network: the
encoder once per sentence under its own masks, then at every decoding step the decoder under
fresh masks, carrying its own recurrent state (its LSTM state, input feeding, ACVI's context
samples) from step to step, as K thinned networks would. The model itself stays in evaluation
mode (ACVI evaluates with K context samples, no word dropout, no training terms); only the
``F.dropout`` calls of its modules are sampled, by :class:`SharedDropoutMasks`, a
``TorchFunctionMode`` active while the wrapped encoder or decoder runs. It ignores their
``training`` flag and draws, for an input of (rows, ...) with rows = sentences × group × K, one
mask per (sentence, chain) (n_sent, 1, K, ...) expanded over the ``group`` rows of the
sentence: within a step every beam row of a sentence is under the same K masks, so the beam
compares hypotheses under one set of K networks, and the masks differ between chains, steps and
sentences. ``group`` is the beam size (:func:`set_rows_per_sentence`, done by the generation hooks;
1 when each row is its own sentence, e.g. teacher forcing).

The probability of each dropout is the model's own (the one it was trained with), or
``rate`` where given (only where the model applies dropout, i.e. its own probability is > 0).
Dropout that is not an ``F.dropout`` call is not sampled: the inter-layer dropout inside a
multi-layer ``nn.LSTM`` of the encoder (the fused kernel draws its own masks, only in training).
Every probability 0 gives K identical chains, whose average is exactly their own distribution
(:func:`~fairseq_acvi.mc_prediction.combination.average_members`), with I = 0: the plain model's
distribution up to the rounding of a batch K times larger (~2e-6 in log-probability).

With ``record_uncertainty`` the decoder returns ``extra["uncertainty"]`` (B, T, 4): H[p̄],
E H, the mutual information I over all K chains × S context samples, and the chains' part
I_members (:func:`~fairseq_acvi.mc_prediction.uncertainty.combine_members`); when decoding
incrementally the rows of every step are kept in the incremental state (reordered with the beam)
and :attr:`MCDropoutDecoder.uncertainty_path` points at them, as the plain decoder does.
"""
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from fairseq.models import FairseqEncoder, FairseqEncoderDecoderModel, FairseqIncrementalDecoder
from torch import Tensor
from torch.overrides import TorchFunctionMode

from fairseq_acvi.mc_prediction import uncertainty as unc
from fairseq_acvi.modules.seq2seq.context_decoder import ContextLSTMDecoder
from fairseq_acvi.mc_prediction.combination import average_members


def check_members(value) -> int:
    """``--mc-dropout K``: a whole number ≥ 1 (K = 1 is one dropout-masked pass)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"--mc-dropout must be a whole number ≥ 1 (the dropout masks averaged), "
                         f"got {value!r}")
    return value


def check_rate(value) -> Optional[float]:
    """``--mc-dropout-rate P``: None (the model's own rates) or 0 ≤ P < 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"--mc-dropout-rate must lie in [0, 1), got {value!r}")
    return float(value)


def fold(order: Tensor, members: int) -> Tensor:
    """Outer row indices (n,) -> the inner rows of their chains (n·K,): r -> r·K .. r·K + K − 1."""
    return (order.view(-1, 1) * members
            + torch.arange(members, device=order.device, dtype=order.dtype)).view(-1)


class SharedDropoutMasks(TorchFunctionMode):
    """While active, every ``F.dropout(x, p)`` with p > 0 (whatever its ``training`` flag) returns
    x · m / (1 − p) with m ~ Bernoulli(1 − p) drawn with shape (n_sent, 1, K, *x.shape[1:]) and
    expanded to x's (n_sent · group · K, ...) rows (module docstring). ``rate`` replaces p > 0.
    ``draws`` counts the masks drawn (tests)."""

    def __init__(self, members: int, group: int = 1, rate: Optional[float] = None):
        super().__init__()
        self.members, self.group, self.rate = members, group, rate
        self.draws = 0

    def mask(self, shape, p: float, like: Tensor) -> Tensor:
        """The scaled mask of (rows, ...) = ``shape`` (rows = n_sent · group · K), x's dtype."""
        rows, rest = shape[0], tuple(shape[1:])
        per = self.group * self.members
        if rows % per:
            raise ValueError(f"MC dropout: a dropout input of {rows} rows is not sentences × "
                             f"{self.group} beam rows × {self.members} chains (a dropout whose "
                             f"first dimension is not the batch is not supported)")
        keep = torch.full((rows // per, 1, self.members) + rest, 1.0 - p, device=like.device,
                          dtype=torch.float32)
        m = torch.bernoulli(keep).div_(1.0 - p).to(like.dtype)
        self.draws += 1
        return m.expand(rows // per, self.group, self.members, *rest).reshape(shape)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.dropout:
            x = args[0] if args else kwargs["input"]
            p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
            if p > 0 and self.rate is not None:
                p = self.rate
            if p <= 0:
                return x
            if p >= 1:
                return torch.zeros_like(x)
            return x * self.mask(x.shape, float(p), x)
        return func(*args, **kwargs)


class MCDropoutEncoder(FairseqEncoder):
    """The encoder run once per (sentence, chain): every batch-first input repeated K times."""

    def __init__(self, inner: FairseqEncoder, members: int, rate: Optional[float]):
        super().__init__(getattr(inner, "dictionary", None))
        self.inner, self.members, self.rate = inner, members, rate

    def forward(self, src_lengths: Tensor, **net_input) -> Dict:
        """src_lengths (B,) and the encoder's other inputs (batch-first, e.g. src_tokens (B, N)
        or src_feats (B, F, D)) -> the inner encoder's output for B·K rows."""
        B = src_lengths.size(0)
        idx = torch.arange(B, device=src_lengths.device).repeat_interleave(self.members)
        expanded = {k: (v.index_select(0, idx.to(v.device))
                        if torch.is_tensor(v) and v.dim() > 0 and v.size(0) == B else v)
                    for k, v in net_input.items()}
        with SharedDropoutMasks(self.members, 1, self.rate):
            return self.inner(src_lengths=src_lengths.index_select(0, idx), **expanded)

    def reorder_encoder_out(self, encoder_out, new_order):
        return self.inner.reorder_encoder_out(encoder_out, fold(new_order, self.members))

    def max_positions(self):
        return self.inner.max_positions()


class MCDropoutDecoder(FairseqIncrementalDecoder):
    """The K chains of the decoder and their average (module docstring)."""

    #: the uncertainty recording, as :class:`ContextLSTMDecoder`'s
    record_uncertainty = False
    uncertainty_path: Optional[Tensor] = None
    #: with ``record_uncertainty``: log p̄ (rows, V) of the latest step (for ensembles)
    last_lprobs: Optional[Tensor] = None

    def __init__(self, inner: ContextLSTMDecoder, members: int, rate: Optional[float]):
        super().__init__(inner.dictionary)
        self.inner, self.members, self.rate = inner, members, rate
        #: beam rows per sentence in the batch (:func:`set_rows_per_sentence`)
        self.rows_per_sentence = 1

    def forward(self, prev_output_tokens: Tensor, encoder_out: Dict, incremental_state=None,
                **kwargs):
        """prev_output_tokens (B, T), encoder_out of B·K rows (:class:`MCDropoutEncoder`) ->
        (log p̄ (B, T', V) float32, {"attn": [(B, T', N)], "uncertainty": (B, T', 4)?})."""
        if self.training:
            raise ValueError("MC dropout (--mc-dropout) is for evaluation and decoding, not "
                             "training")
        if kwargs.get("score_target"):
            raise ValueError("MC dropout does not score gold tokens alone (score_target)")
        B, K = prev_output_tokens.size(0), self.members
        idx = torch.arange(B, device=prev_output_tokens.device).repeat_interleave(K)
        kw = {k: (v.index_select(0, idx) if torch.is_tensor(v) and v.dim() > 0 and v.size(0) == B
                  else v) for k, v in kwargs.items()}
        self.inner.record_uncertainty = self.record_uncertainty
        try:
            with SharedDropoutMasks(K, self.rows_per_sentence, self.rate):
                lp, extra = self.inner(prev_output_tokens.index_select(0, idx), encoder_out,
                                       incremental_state=incremental_state, **kw)
        finally:
            self.inner.record_uncertainty = False
        T, V = lp.shape[1:]
        chains = lp.view(B, K, T, V).transpose(1, 2)                    # (B, T, K, V)
        lp_mean = average_members(chains)
        out = {}
        attn = extra.get("attn", [None])[0]
        if attn is not None:
            out["attn"] = [attn.view(B, K, *attn.shape[1:]).float().mean(1)]
        if self.record_uncertainty:
            u_inner = extra["uncertainty"]
            u_inner = u_inner.view(B, K, T, u_inner.size(-1)).transpose(1, 2)
            u = unc.combine_members(chains, lp_mean, u_inner)          # (B, T, 4)
            out["uncertainty"] = u
            self.last_lprobs = lp_mean[:, -1]
            if incremental_state is not None:
                prev = self.get_incremental_state(incremental_state, "uq")
                path = u if prev is None else torch.cat([prev["path"], u], dim=1)
                self.set_incremental_state(incremental_state, "uq", {"path": path})
                self.uncertainty_path = path
        return lp_mean, out

    def reorder_incremental_state(self, incremental_state, new_order):
        self.inner.reorder_incremental_state_scripting(incremental_state,
                                                       fold(new_order, self.members))
        prev = self.get_incremental_state(incremental_state, "uq")
        if prev is not None:
            self.set_incremental_state(incremental_state, "uq",
                                       {"path": prev["path"].index_select(0, new_order)})

    def reorder_incremental_state_scripting(self, incremental_state, new_order):
        # not FairseqIncrementalDecoder's walk over every submodule: the inner decoder's rows are
        # the folded ones
        self.reorder_incremental_state(incremental_state, new_order)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        lprobs = net_output[0].float()
        return lprobs if log_probs else lprobs.exp()

    def max_positions(self):
        return self.inner.max_positions()


class MCDropoutModel(FairseqEncoderDecoderModel):
    """A model and its K dropout chains (module docstring); evaluation only."""

    def __init__(self, model, members: int, rate: Optional[float] = None):
        super().__init__(MCDropoutEncoder(model.encoder, members, rate),
                         MCDropoutDecoder(model.decoder, members, rate))
        self.members, self.rate = members, rate
        self.eval()

    def forward(self, prev_output_tokens: Tensor, **net_input):
        """net_input as the model's (src_tokens or src_feats, src_lengths), prev_output_tokens
        (B, T) -> the decoder's (log p̄ (B, T, V), extra)."""
        encoder_out = self.encoder(**net_input)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out)

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return self.decoder.get_normalized_probs(net_output, log_probs, sample)

    def max_positions(self):
        return (self.encoder.max_positions(), self.decoder.max_positions())


def wrap_mc_dropout(model, members: int, rate: Optional[float] = None) -> MCDropoutModel:
    """``model`` (an LSTM seq2seq model of the package) with K = ``members`` dropout chains."""
    check_members(members)
    rate = check_rate(rate)
    if not isinstance(getattr(model, "decoder", None), ContextLSTMDecoder):
        raise ValueError(f"--mc-dropout needs a fairseq_acvi LSTM seq2seq model (acvi_lstm, "
                         f"acvi_pointer_generator, acvi_video_captioner), got "
                         f"{type(model).__name__}")
    return MCDropoutModel(model, members, rate)


def set_rows_per_sentence(models, rows: int) -> None:
    """Tell the MC dropout decoders among ``models`` that the batch holds ``rows`` consecutive
    rows per sentence (the beam size of the generator that runs them)."""
    for m in models:
        if isinstance(getattr(m, "decoder", None), MCDropoutDecoder):
            m.decoder.rows_per_sentence = rows
