"""The LSTM decoder's incremental state: made at the first step, reordered with the beam
(docs/method.md §3.9; the decoder: :mod:`fairseq_acvi.modules.seq2seq.context_decoder`).

The state is a dict of tensors. ``h`` and ``c`` are (layers, rows, H); every other entry is
batch-first (rows, ...):
* per row: ``feed`` (input feeding), ``coverage``, seed 003's ``sa_*`` and ``past_*`` keys and
  values of earlier steps, a stateful context's ``state_*``;
* per sentence (:func:`per_sentence`, the same in every row of a sentence): the scorer's
  ``keys`` and ``values``, the padding mask ``pad``, the pointer-generator's ``src_ids``, the
  context inference's prepared tensors ``prep_*``; in beam search also ``row_source``
  (:mod:`fairseq_acvi.modules.seq2seq.beam_rows`), so that reorders within sentences leave the
  per-sentence entries as they are.
"""
from typing import Dict, Optional

import torch
from torch import Tensor

from fairseq_acvi.modules.context.scorers import Memory
from fairseq_acvi.modules.seq2seq import beam_rows


def per_sentence(key: str) -> bool:
    """Whether an entry of the state is the same for every row of a sentence."""
    return key in ("keys", "values", "pad", "src_ids") or key.startswith("prep_")


class DecoderState:
    """Mixin of :class:`~fairseq_acvi.modules.seq2seq.context_decoder.ContextLSTMDecoder`: its
    incremental state (module docstring)."""

    def _start(self, encoder_out, prev_output_tokens, full_sequence: bool,
               target: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Per-sentence state: initial LSTM state, prepared memory, the context's prepared
        tensors (``prep_*``) and, for a stateful context, its initial recurrent state
        (``state_*``). Every entry but h and c is batch-first."""
        final = encoder_out["encoder_final"][0]                        # (L_enc, B, 2H_enc)
        final_c = encoder_out["encoder_final_cell"][0]
        L = final.size(0)
        idx = [min(i, L - 1) for i in range(self.num_layers)]
        cache = {
            "h": torch.stack([torch.tanh(self.init_h(final[j])) for j in idx]),
            "c": torch.stack([self.init_c(final_c[j]) for j in idx]),
        }
        h = encoder_out["encoder_out"][0]                               # (B, N, d)
        pad = encoder_out["encoder_padding_mask"][0]
        mem = self.scorer.prepare(h, pad)
        cache.update(keys=mem.keys, values=mem.values, pad=mem.pad_mask)
        B = h.size(0)
        if self.input_feeding:
            cache["feed"] = h.new_zeros(B, self.feed_dim)
        if self.head.needs_source_ids:
            cache["src_ids"] = encoder_out["src_tokens"][0]            # (B, N) right-padded, = values
        if self.use_coverage:
            cache["coverage"] = h.new_zeros(B, h.size(1), dtype=torch.float32)
        if self.self_attn is not None:
            cache["sa_keys"], cache["sa_values"] = self.self_attn.empty_past(h)
        if self.past_attn is not None:
            cache["past_keys"], cache["past_values"] = self.past_attn.empty_past(h)
        target_emb = target_pad = None
        if self.context.needs_target and self.training and full_sequence:
            if target is None:
                target = self._targets(prev_output_tokens)
            target_emb, target_pad = self.embed_tokens(target), target.eq(self.padding_idx)
        prepared = self.context.prepare(mem, final[-1], target_emb, target_pad)
        cache.update({"prep_" + k: v for k, v in prepared.items()})
        if not full_sequence and beam_rows.share_within_sentences(cache, encoder_out,
                                                                  per_sentence):
            prepared = {k[len("prep_"):]: v for k, v in cache.items() if k.startswith("prep_")}
            mem = Memory(cache["keys"], cache["values"], cache["pad"])
        if self.context.stateful:
            state = self.context.init_state(prepared, mem)
            cache.update({"state_" + k: v for k, v in state.items()})
        return cache

    def _get_cache(self, incremental_state):
        if incremental_state is None:
            return None
        return self.get_incremental_state(incremental_state, "cache")

    def reorder_incremental_state(self, incremental_state, new_order):
        cache = self._get_cache(incremental_state)
        if cache is None:
            return
        self.set_incremental_state(incremental_state, "cache", beam_rows.reorder(
            cache, new_order, per_sentence, layer_first=("h", "c")))
