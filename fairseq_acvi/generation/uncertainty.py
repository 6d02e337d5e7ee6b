"""Per-token uncertainty of beam-search hypotheses (docs/uncertainty.md; docs/method.md §2.2).

:func:`enable_uncertainty` takes the generator a task built (fairseq's ``SequenceGenerator`` or a
subclass: the video captioner's ``FeatureSequenceGenerator``, ``SequenceGeneratorWithAlignment``)
and gives it, in place, the behaviour of :class:`UncertaintyRecorder`; fairseq's search itself is
not changed. For each ``generate`` call the model's decoder records the uncertainty of every step
(``ContextLSTMDecoder.record_uncertainty``), keeps the path of every beam row in its incremental
state (reordered with the beam like the LSTM state) and points at it in
``decoder.uncertainty_path`` (B·beam, t, 3). When fairseq finalises hypotheses at step t, the rows
that end in ``</s>`` are read from that path, so every finished hypothesis gets
``hypo["uncertainty"]`` (len(hypo["tokens"]), 3) float32 in nats: H[p̄], E_k H[p_k] and the
mutual information of the distribution each of its tokens was chosen from, along its own path.
The search, the scores and the hypotheses are the same as without it (the decoder returns the
same log-probabilities; ``tests/test_uncertainty_generation.py``).

Ensembles (``--path a.pt:b.pt``; docs/uncertainty.md §6): fairseq's ``EnsembleModel`` averages
the members' distributions in probability space. :func:`enable_uncertainty` then also gives the
generator's ensemble the behaviour of :class:`UncertaintyEnsemble`: after each step it reads
every member decoder's log p̄_m and its own uncertainty row, combines them
(:func:`~fairseq_acvi.mc_prediction.uncertainty.combine_members`: the decomposition over all
members × context samples, and the members' part I_members) and keeps the (B·beam, t, 4) path,
reordered with the beam, which the finalised hypotheses read as above. A hypothesis of a
prediction that averages members (an ensemble, or MC dropout's chains,
modules/seq2seq/mc_dropout.py) also gets ``hypo["members_mi"]`` (len(tokens),).

Every hypothesis also gets ``hypo["sentence_uncertainty"]``, its sentence-level scores in nats
(:func:`fairseq_acvi.generation.sentence_scores.sentence_scores`).
"""
from collections import Counter
from typing import Dict, List, Optional

import torch
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator
from torch import Tensor

from fairseq_acvi.generation.sentence_scores import sentence_scores
from fairseq_acvi.mc_prediction import uncertainty as unc
from fairseq_acvi.modules.seq2seq.context_decoder import ContextLSTMDecoder
from fairseq_acvi.modules.seq2seq.mc_dropout import MCDropoutDecoder, set_rows_per_sentence
from fairseq_acvi.mc_prediction.combination import average_members

#: the decoders whose uncertainty a hypothesis can report
RECORDING_DECODERS = (ContextLSTMDecoder, MCDropoutDecoder)


class UncertaintyEnsemble:
    """Mixin placed before fairseq's ``EnsembleModel`` class (or a subclass; see
    :func:`enable_uncertainty`): with :attr:`record_uncertainty`, the per-step uncertainty of the
    members' average, its path kept per beam row (module docstring)."""

    record_uncertainty = False
    uncertainty_path: Optional[Tensor] = None

    def forward_decoder(self, tokens, encoder_outs, incremental_states, temperature: float = 1.0):
        out = super().forward_decoder(tokens, encoder_outs, incremental_states, temperature)
        if self.record_uncertainty:
            decs = [m.decoder for m in self.models]
            lp = torch.stack([d.last_lprobs.float() for d in decs], dim=-2)     # (rows, M, V)
            rows = [d.uncertainty_path[:, -1] for d in decs]                   # (rows, 3 or 4)
            width = max(r.size(-1) for r in rows)
            rows = [torch.nn.functional.pad(r, (0, width - r.size(-1))) for r in rows]
            u = unc.combine_members(lp, average_members(lp), torch.stack(rows, dim=-2))
            u = u.unsqueeze(1)                                                  # (rows, 1, 4)
            self.uncertainty_path = (u if self.uncertainty_path is None
                                     else torch.cat([self.uncertainty_path, u], dim=1))
        return out

    def reorder_incremental_state(self, incremental_states, new_order):
        super().reorder_incremental_state(incremental_states, new_order)
        if self.record_uncertainty and self.uncertainty_path is not None:
            self.uncertainty_path = self.uncertainty_path.index_select(0, new_order)


class UncertaintyRecorder:
    """Mixin placed before a ``SequenceGenerator`` class (see :func:`enable_uncertainty`).

    After each ``generate``, :attr:`last_hypos` maps every sample id of the batch to its
    hypotheses (fairseq's dicts, with their uncertainties), in the order ``generate`` returned them.
    """

    last_hypos: Dict[int, List[dict]]

    @property
    def last_batch(self) -> Dict[int, List[Tensor]]:
        """Every sample id of the last batch -> the per-token uncertainties (T, 3) of its hypotheses."""
        return {sid: [h["uncertainty"] for h in hs] for sid, hs in self.last_hypos.items()}

    def _uncertainty_source(self):
        """What holds the path: the one decoder, or the ensemble that combines its members."""
        if len(self.model.models) == 1:
            return self.model.models[0].decoder
        return self.model

    def generate(self, models, sample, **kwargs):
        recorders = [m.decoder for m in self.model.models]
        if len(recorders) > 1:
            recorders.append(self.model)
        before = [r.record_uncertainty for r in recorders]
        for r in recorders:
            r.record_uncertainty, r.uncertainty_path = True, None
        try:
            hypos = super().generate(models, sample, **kwargs)
        finally:
            for r, b in zip(recorders, before):
                r.record_uncertainty, r.uncertainty_path = b, None
                if hasattr(r, "last_lprobs"):
                    r.last_lprobs = None
        for hs in hypos:
            for h in hs:     # before fairseq's generate loop turns positional_scores into bits
                h["sentence_uncertainty"] = sentence_scores(h["uncertainty"],
                                                            h["positional_scores"])
        ids = sample["id"].tolist() if "id" in sample else list(range(len(hypos)))
        self.last_hypos = dict(zip(ids, hypos))
        return hypos

    def finalize_hypos(self, step, bbsz_idx, eos_scores, tokens, scores, finalized, finished,
                       beam_size, attn, src_lengths, max_len):
        path = self._uncertainty_source().uncertainty_path
        if path is None or path.size(1) != step + 1:
            raise RuntimeError(f"uncertainty path of {None if path is None else path.size(1)} "
                               f"steps at step {step}: the decoder did not record every step")
        rows = path.index_select(0, bbsz_idx)                  # (n, step + 1, 3)
        sent = _sentences(bbsz_idx, finished, beam_size)       # before fairseq marks any finished
        had = [len(f) for f in finalized]
        newly = super().finalize_hypos(step, bbsz_idx, eos_scores, tokens, scores, finalized,
                                       finished, beam_size, attn, src_lengths, max_len)
        # fairseq appended, in the order of bbsz_idx, one hypothesis for every row whose
        # sentence still had room: give each the path of its own row
        taken = Counter()
        for i, s in enumerate(sent):
            k = had[s] + taken[s]
            if k < len(finalized[s]):
                finalized[s][k]["uncertainty"] = rows[i, :, :3].float()
                if rows.size(-1) > unc.MEMBERS_MUTUAL_INFORMATION:
                    finalized[s][k]["members_mi"] = rows[i, :, unc.MEMBERS_MUTUAL_INFORMATION].float()
                taken[s] += 1
        if any(len(f) != had[s] + taken[s] for s, f in enumerate(finalized)):
            raise RuntimeError("finished hypotheses and beam rows no longer match "
                               "(fairseq's finalize_hypos changed?)")
        return newly


def _sentences(bbsz_idx: Tensor, finished: List[bool], beam_size: int) -> List[int]:
    """The original sentence index of each beam row ``bbsz_idx`` (n,), as fairseq's
    ``finalize_hypos`` computes it: rows index the sentences not yet finished."""
    unfinished = [s for s, f in enumerate(finished) if not f]
    return [unfinished[int(r) // beam_size] for r in bbsz_idx.tolist()]


_CLASSES: Dict[type, type] = {}


def _swap_class(obj, mixin):
    """Give ``obj`` the behaviour of ``mixin`` placed before its own class, in place."""
    cls = type(obj)
    if not issubclass(cls, mixin):
        if (mixin, cls) not in _CLASSES:
            _CLASSES[(mixin, cls)] = type(f"{mixin.__name__.replace('Recorder', '')}"
                                          f"{cls.__name__}", (mixin, cls), {})
        obj.__class__ = _CLASSES[(mixin, cls)]


def enable_uncertainty(generator):
    """Give ``generator`` (a fairseq ``SequenceGenerator`` of one model or an ensemble, each with a
    :class:`ContextLSTMDecoder`, or with MC dropout's decoder) the :class:`UncertaintyRecorder`
    behaviour, in place (and its ensemble :class:`UncertaintyEnsemble`'s); returns it."""
    if not isinstance(generator, SequenceGenerator):
        raise ValueError(f"per-token uncertainty needs beam search or sampling (SequenceGenerator), "
                         f"not {type(generator).__name__} (--score-reference is not supported)")
    models = generator.model.models
    for m in models:
        if not isinstance(getattr(m, "decoder", None), RECORDING_DECODERS):
            raise ValueError(f"per-token uncertainty needs fairseq_acvi seq2seq models (acvi_lstm, "
                             f"acvi_pointer_generator, acvi_video_captioner), got "
                             f"{type(m).__name__}")
    if len(models) > 1:
        if not isinstance(generator.model, EnsembleModel):
            raise ValueError(f"an ensemble's uncertainty needs fairseq's EnsembleModel, got "
                             f"{type(generator.model).__name__}")
        _swap_class(generator.model, UncertaintyEnsemble)
    if not isinstance(generator, UncertaintyRecorder):
        _swap_class(generator, UncertaintyRecorder)
        generator.last_hypos = {}
    set_rows_per_sentence(models, generator.beam_size)
    return generator
