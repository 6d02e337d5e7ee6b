"""Bidirectional multi-layer LSTM encoder shared by the seq2seq models (docs/method.md §3).

Input: token ids (translation, summarization) or precomputed feature vectors (video); the
``encode`` method takes already-embedded inputs so both paths share the recurrent part.
Output (a dict, so fairseq's beam search can reorder it)::

    encoder_out:          [h]            h: (B, N, 2·H) right-padded annotations h_i
    encoder_padding_mask: [pad]          pad: (B, N) bool, True at padding
    encoder_final:        [f]            f: (L, B, 2·H) final fwd/bwd hidden state per layer
    encoder_final_cell:   [fc]           fc: (L, B, 2·H) final fwd/bwd cell state per layer
    src_tokens:           [tokens]       (B, N) right-padded ids (copy mechanisms need them)
    row_source:           [source]       (B,) the row of this output each row copies (beam_rows.py)

Seed 003's configuration (iii) (``--self-attention-heads H``, docs/method.md §3.6; off by default,
and then nothing is built): :meth:`BiLSTMEncoder.add_self_attention` adds a bidirectional,
padding-masked multi-head self-attention block over the annotations, h̃ = LayerNorm(h +
MultiHead(h, h, h)) (:mod:`fairseq_acvi.modules.seq2seq.self_attention`), and ``encoder_out`` holds h̃:
every context inference and scorer of the decoder attends over the self-attended annotations.
The final states (the decoder's initial state) are the LSTM's, as without it. Every model built
on this encoder (translation, pointer-generator, captioner) gets it from
:meth:`~fairseq_acvi.models.seq2seq_base.ContextSeq2SeqModel.build_model`.

Source-use diagnostics (evaluation only): with ``context_ablation = "shuffle"`` the annotations
and their padding mask are those of *another* sentence of the batch (rolled by one; a batch of one
sentence takes the previous batch's first sentence), while the final states — the decoder's
initial state — stay the sentence's own. Attention then reads the wrong source.
"""
from typing import Dict, List, Optional

import torch.nn as nn
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import FairseqEncoder
from torch import Tensor

from fairseq_acvi.modules.seq2seq import beam_rows
from fairseq_acvi.modules.seq2seq.segmented_lstm import bilstm_by_segments, bilstm_packed
from fairseq_acvi.modules.seq2seq.self_attention import SelfAttentionBlock

#: on a CPU, batches whose longest source has at least this many positions run the LSTM unpacked
#: (``bilstm_by_segments``): measured by benchmarks/bench_encoder_lstm.py (BENCHMARKS.md), unpacked is
#: 10× faster at 400 positions, 1.8× at 100, level at 64, and 0.7-0.9× on short translation
#: batches (30-40 positions, 23-35 distinct lengths), where the packed call stays
UNPACKED_MIN_LENGTH = 64

#: values of --context-ablation (the decoder does "zero", the encoder "shuffle")
ABLATIONS = ("none", "zero", "shuffle")


class BiLSTMEncoder(FairseqEncoder):
    def __init__(self, dictionary, embed_dim: int, hidden_size: int, num_layers: int,
                 dropout_in: float, dropout_out: float, embed_tokens: Optional[nn.Module] = None,
                 max_positions: int = 1024):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad() if dictionary is not None else 0
        self.embed_tokens = embed_tokens
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.output_units = 2 * hidden_size
        self.dropout_in, self.dropout_out = dropout_in, dropout_out
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, bidirectional=True,
                            batch_first=True, dropout=dropout_out if num_layers > 1 else 0.0)
        self._max_positions = max_positions
        self.context_ablation = "none"
        self._last_annotations = None
        #: seed 003's (iii) over the annotations (:meth:`add_self_attention`); None: off
        self.self_attention: Optional[SelfAttentionBlock] = None

    def add_self_attention(self, heads: int, dropout: float) -> None:
        """Self-attend the annotations from now on (module docstring): ``heads`` heads over the
        ``output_units``-d annotations, ``dropout`` on the attention output."""
        self.self_attention = SelfAttentionBlock(self.output_units, heads, dropout)

    def forward(self, src_tokens: Tensor, src_lengths: Tensor, **unused) -> Dict[str, List[Tensor]]:
        """src_tokens: (B, N) (left or right padded); src_lengths: (B,)."""
        tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)
        pad = tokens.eq(self.padding_idx)
        empty = (~pad).sum(1).le(1) & tokens[:, 0].eq(self.dictionary.eos())
        if empty.any():
            raise ValueError(
                f"{int(empty.sum())} empty source sentence(s) (only </s>) in the batch: the text "
                "given to fairseq-preprocess (or typed into fairseq-interactive) has empty lines; "
                "remove them (grep -n '^$' FILE)")
        x = self.embed_tokens(tokens)
        out = self.encode(x, (~pad).sum(1), pad)
        out["src_tokens"] = [tokens]
        return out

    def encode(self, x: Tensor, lengths: Tensor, pad: Tensor) -> Dict[str, List[Tensor]]:
        """x: (B, N, E) right-padded inputs; lengths: (B,); pad: (B, N) bool."""
        if (lengths == 0).any():
            raise ValueError("empty source sequence in the batch: every source needs ≥ 1 token")
        x = F.dropout(x, p=self.dropout_in, training=self.training)
        # on a CPU, long sources without packing: PyTorch's packed CPU backward is quadratic in
        # the length (modules/seq2seq/segmented_lstm.py)
        unpacked = x.device.type == "cpu" and x.size(1) >= UNPACKED_MIN_LENGTH
        h, h_n, c_n = (bilstm_by_segments if unpacked else bilstm_packed)(self.lstm, x, lengths)
        h = F.dropout(h, p=self.dropout_out, training=self.training)
        if self.self_attention is not None:
            h = self.self_attention(h, pad)
        bsz = x.size(0)

        def merge(state):  # (2·L, B, H) -> (L, B, 2·H): [forward; backward] per layer
            return state.view(self.num_layers, 2, bsz, -1).transpose(1, 2).reshape(
                self.num_layers, bsz, -1)

        if self.context_ablation == "shuffle":
            h, pad = self._other_sentences(h, pad)
        return {
            "encoder_out": [h],
            "encoder_padding_mask": [pad],
            "encoder_final": [merge(h_n)],
            "encoder_final_cell": [merge(c_n)],
            beam_rows.ROW_SOURCE: [beam_rows.initial(bsz, h.device)],
        }

    def _other_sentences(self, h: Tensor, pad: Tensor):
        """h (B, N, d), pad (B, N) -> another sentence's annotations and mask, same shapes."""
        if self.training:
            raise ValueError("--context-ablation is for evaluation only, not for training")
        if h.size(0) >= 2:
            self._last_annotations = (h[:1].detach(), pad[:1])
            return h.roll(1, dims=0), pad.roll(1, dims=0)
        if self._last_annotations is None:
            raise ValueError("--context-ablation shuffle needs a batch of ≥ 2 sentences first "
                             "(a larger --batch-size / --max-tokens)")
        other, other_pad = self._last_annotations
        n = min(other.size(1), h.size(1))
        new_h = h.new_zeros(h.shape)
        new_h[:, :n] = other[:, :n].to(h.dtype)
        new_pad = pad.new_ones(pad.shape)
        new_pad[:, :n] = other_pad[:, :n]
        return new_h, new_pad

    def reorder_encoder_out(self, encoder_out, new_order):
        """Every tensor's rows by ``new_order`` (rows',), except when each new row would copy a
        row of the same source (beam rows moving within their sentence,
        :mod:`~fairseq_acvi.modules.seq2seq.beam_rows`): its values are those it has, and the
        output is returned as it is."""
        source = encoder_out.get(beam_rows.ROW_SOURCE)
        if source:
            _, unchanged = beam_rows.reordered(source[0], new_order)
            if unchanged:
                return dict(encoder_out)
        out = {}
        for key, vals in encoder_out.items():
            dim = 1 if key in ("encoder_final", "encoder_final_cell") else 0
            out[key] = [v.index_select(dim, new_order) for v in vals]
        return out

    def max_positions(self):
        return self._max_positions
