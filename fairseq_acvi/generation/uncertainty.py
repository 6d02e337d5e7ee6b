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

Only one model at a time: the uncertainty of an ensemble is not the mean of its members'.
"""
from collections import Counter
from typing import Dict, List

from fairseq.sequence_generator import SequenceGenerator
from torch import Tensor

from fairseq_acvi.modules.context_decoder import ContextLSTMDecoder


class UncertaintyRecorder:
    """Mixin placed before a ``SequenceGenerator`` class (see :func:`enable_uncertainty`).

    After each ``generate``, :attr:`last_batch` maps every sample id of the batch to the
    per-token uncertainties (T, 3) of its hypotheses, in the order ``generate`` returned them.
    """

    last_batch: Dict[int, List[Tensor]]

    def _uncertainty_decoder(self) -> ContextLSTMDecoder:
        return self.model.models[0].decoder

    def generate(self, models, sample, **kwargs):
        dec = self._uncertainty_decoder()
        before = dec.record_uncertainty
        dec.record_uncertainty, dec.uncertainty_path = True, None
        try:
            hypos = super().generate(models, sample, **kwargs)
        finally:
            dec.record_uncertainty, dec.uncertainty_path = before, None
        ids = sample["id"].tolist() if "id" in sample else list(range(len(hypos)))
        self.last_batch = {sid: [h["uncertainty"] for h in hs] for sid, hs in zip(ids, hypos)}
        return hypos

    def finalize_hypos(self, step, bbsz_idx, eos_scores, tokens, scores, finalized, finished,
                       beam_size, attn, src_lengths, max_len):
        path = self._uncertainty_decoder().uncertainty_path
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
                finalized[s][k]["uncertainty"] = rows[i].float()
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


def enable_uncertainty(generator):
    """Give ``generator`` (a fairseq ``SequenceGenerator`` of one model with a
    :class:`ContextLSTMDecoder`) the :class:`UncertaintyRecorder` behaviour, in place; returns it."""
    if not isinstance(generator, SequenceGenerator):
        raise ValueError(f"per-token uncertainty needs beam search or sampling (SequenceGenerator), "
                         f"not {type(generator).__name__} (--score-reference is not supported)")
    models = generator.model.models
    if len(models) != 1:
        raise ValueError(f"per-token uncertainty is for one model, got an ensemble of {len(models)}")
    if not isinstance(getattr(models[0], "decoder", None), ContextLSTMDecoder):
        raise ValueError(f"per-token uncertainty needs a fairseq_acvi seq2seq model (acvi_lstm, "
                         f"acvi_pointer_generator, acvi_video_captioner), got "
                         f"{type(models[0]).__name__}")
    cls = type(generator)
    if not issubclass(cls, UncertaintyRecorder):
        if cls not in _CLASSES:
            _CLASSES[cls] = type(f"Uncertainty{cls.__name__}", (UncertaintyRecorder, cls), {})
        generator.__class__ = _CLASSES[cls]
        generator.last_batch = {}
    return generator
