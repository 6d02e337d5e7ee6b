"""``acvi_video_captioner``: BiLSTM over frame features → LSTM decoder with pluggable context
inference (docs/method.md §2, §3.2; ACVI paper §2.2, §4.2, App. B).

Architecture (preset ``acvi_video_captioner``, the paper's MSVD set-up; ``_msvd``, its old second
name, still loads: models/legacy_names.py)::

    x_i  = dropout_in(f_i)                           f_i: (B, F, D) frame features (D from the data:
                                                     1280 EfficientNet-Lite0, 1024 GoogLeNet pool5)
    h_i  = [→h_i ; ←h_i] = BiLSTM(x)                 (B, F, 1000) = 2 × 500, no embedding layer
    s_t  = LSTM(E y_{t-1}, feed_{t-1})               (B, 1000), E: 256-d word embeddings
    e_ti = vᵀ tanh(W_h h_i + W_s s_t + b)            W_h, W_s map to 100-d (``--attention-dim 100``)
    c_t  = --context-inference {soft, acvi, structured, variational, ved}   (docs/method.md §2)
    P_t  = softmax(V' tanh(V [s_t ; c_t]) + b')      (P 4; K-sample average for ACVI, D 88)

**Decision ("states 1000-d")**: App. B says "All employed LSTMs entail 1000-dimensional
states. These are mapped to 100-dimensional features via the matrices W_h and W_s in Eq. (1)".
What W_h maps are the encodings h_i = [→h_i ; ←h_i] (P 1), so we make *those* 1000-d: 500 per
encoder direction (``--encoder-hidden-size`` is per direction), and a 1000-d decoder state s_t.
Annotations, decoder state and context then share one size. ``--encoder-hidden-size 1000`` gives
the other reading (1000 per direction, 2000-d annotations; the ACVI log σ² MLP, of width
d = dim h_i (P 18), then costs 4× more). Dropout 0.5 (Zaremba et al. 2015: on the non-recurrent
connections — frame inputs, LSTM outputs, decoder inputs and the attentional hidden state). The
VED latent is 100-d (App. B). ACVI: its defaults, the configuration chosen on Multi30K validation
(``VALIDATED_CHOICE``, modules/context/acvi.py), not yet measured on video; the paper's set-up is
``--acvi-beta 1 --acvi-kl-delay-updates 0 --acvi-kl-warmup-updates 0 --acvi-value-norm none
--mc-sampling iid``. Training: Adam (``fairseq-train --optimizer
adam``); decoding: beam 5 (``fairseq-generate --beam 5``); see ``recipes/captioning_msvd.sh``.

Batches come from the ``video_captioning`` task: ``net_input = {src_feats (B, F, D) float32
zero-padded, src_lengths (B,), prev_output_tokens (B, T)}``. The encoder casts the features to its
own dtype (fairseq-train halves them under ``--fp16``, fairseq-generate does not). The frame feature
size is fixed when the model is built (``--feature-dim`` of the task, saved in the checkpoint as
``encoder_embed_dim``); a batch or a task with another size gets a clear error.

K (Monte-Carlo samples of the ACVI context averaged at decoding) is a model option:
``fairseq-generate --model-overrides "{'mc_samples': K}"`` (default 10; 0 = the mean).
"""
from typing import Dict, List

import torch
from fairseq.models import register_model, register_model_architecture
from torch import Tensor

from fairseq_acvi.models.seq2seq_base import ContextSeq2SeqModel, add_seq2seq_args, seq2seq_defaults
from fairseq_acvi.modules.seq2seq.lstm_encoder import BiLSTMEncoder


class FeatureBiLSTMEncoder(BiLSTMEncoder):
    """BiLSTM over precomputed frame features (no embedding layer, no dictionary).

    forward(src_feats (B, F, D), src_lengths (B,)) -> the dict of :class:`BiLSTMEncoder.encode`:
    encoder_out [(B, F, 2H)], encoder_padding_mask [(B, F) bool, True at padded frames],
    encoder_final / encoder_final_cell [(L, B, 2H)]. Frames at or beyond ``src_lengths[b]`` are
    padding: they are excluded from the packed LSTM and get zero attention downstream.
    """

    def __init__(self, feature_dim: int, hidden_size: int, num_layers: int, dropout_in: float,
                 dropout_out: float, max_positions: int = 1024):
        super().__init__(None, feature_dim, hidden_size, num_layers, dropout_in, dropout_out,
                         embed_tokens=None, max_positions=max_positions)
        self.feature_dim = feature_dim

    def forward(self, src_feats: Tensor, src_lengths: Tensor, **unused) -> Dict[str, List[Tensor]]:
        if src_feats.dim() != 3 or src_feats.size(-1) != self.feature_dim:
            raise ValueError(
                f"acvi_video_captioner was built for {self.feature_dim}-d frame features but the "
                f"batch has src_feats of shape {tuple(src_feats.shape)}; use the --feature-dim the "
                f"model was trained with ({self.feature_dim}) and features of that size")
        B, F_max = src_feats.shape[:2]
        lengths = src_lengths.to(src_feats.device).long()
        if lengths.shape != (B,) or bool((lengths < 1).any()) or bool((lengths > F_max).any()):
            raise ValueError(f"src_lengths must hold 1..{F_max} frames for each of the {B} "
                             f"videos, got {src_lengths.tolist()}")
        pad = torch.arange(F_max, device=src_feats.device)[None, :] >= lengths[:, None]  # (B, F)
        dtype = self.lstm.weight_ih_l0.dtype
        x = src_feats.to(dtype).masked_fill(pad.unsqueeze(-1), 0.0)
        return self.encode(x, lengths, pad)


@register_model("acvi_video_captioner")
class ACVIVideoCaptioner(ContextSeq2SeqModel):
    """Video captioning seq2seq model (docs/method.md §3.2); see the module docstring."""

    @staticmethod
    def add_args(parser):
        add_seq2seq_args(parser)
        parser.add_argument("--encoder-dropout-in", type=float, metavar="D",
                            help="dropout on the frame features entering the BiLSTM (default: "
                                 "--dropout; 0 turns it off)")

    @classmethod
    def fill_defaults(cls, args):
        base_architecture(args)

    @classmethod
    def build_encoder(cls, args, task):
        task_dim = getattr(getattr(task, "cfg", None), "feature_dim", None)
        feature_dim = args.encoder_embed_dim or task_dim
        if feature_dim is None:
            raise ValueError("acvi_video_captioner needs the frame feature size: use --task "
                             "video_captioning --feature-dim D")
        if task_dim is not None and task_dim != feature_dim:
            raise ValueError(
                f"acvi_video_captioner: the model takes {feature_dim}-d frame features "
                f"(--encoder-embed-dim, saved in a checkpoint from the training --feature-dim) but "
                f"the task reads --feature-dim {task_dim}; they must agree")
        args.encoder_embed_dim = feature_dim  # saved with the model: the input size it is built for
        max_frames = (getattr(getattr(task, "cfg", None), "max_frames", None)
                      or args.max_source_positions)
        return FeatureBiLSTMEncoder(feature_dim, args.encoder_hidden_size, args.encoder_layers,
                                    args.encoder_dropout_in, args.encoder_dropout_out,
                                    max_positions=max_frames)

    def forward(self, src_feats: Tensor, src_lengths: Tensor, prev_output_tokens: Tensor, **kwargs):
        """src_feats (B, F, D), src_lengths (B,), prev_output_tokens (B, T) ->
        (lprobs (B, T, V) float32 log-probabilities, extra) as in :class:`ContextLSTMDecoder`."""
        encoder_out = self.encoder(src_feats=src_feats, src_lengths=src_lengths)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, **kwargs)

    def load_state_dict(self, state_dict, strict=True, model_cfg=None, args=None):
        key = "encoder.lstm.weight_ih_l0"
        if key in state_dict and state_dict[key].size(1) != self.encoder.feature_dim:
            raise ValueError(
                f"checkpoint was trained on {state_dict[key].size(1)}-d frame features but the "
                f"model was built for {self.encoder.feature_dim}-d (--feature-dim); use the "
                "feature size the model was trained with")
        return super().load_state_dict(state_dict, strict=strict, model_cfg=model_cfg, args=args)


@register_model_architecture("acvi_video_captioner", "acvi_video_captioner")
def base_architecture(args):
    """Paper sizes (App. B) unless set: see the module docstring. ``encoder_embed_dim`` stays None
    (= the task's --feature-dim) until the model is built."""
    seq2seq_defaults(
        args, dropout=0.5, encoder_embed_dim=None, encoder_hidden_size=500, encoder_layers=1,
        decoder_embed_dim=256, decoder_hidden_size=1000, decoder_layers=1,
        attention_type="additive", attention_dim=100)   # VED: its own 100-d latent (App. B)


@register_model_architecture("acvi_video_captioner", "acvi_video_captioner_msrvtt_cpu")
def acvi_video_captioner_msrvtt_cpu(args):
    """CPU-sized captioner for the 1,000 MSR-VTT clips of ``recipes/captioning_msrvtt.sh``
    (docs/recipes/captioning_msrvtt.md): the paper's structure (BiLSTM over the frames, LSTM decoder,
    additive attention, docs/method.md §3.2) at a quarter of its sizes so that an epoch of 16,000
    caption pairs takes minutes on one core: 128 units per encoder direction (256-d annotations),
    256-d decoder state, 128-d word embeddings, 64-d attention projections, dropout 0.3 (on a
    corpus 16x smaller than MSVD's 1,200 x 40 pairs the paper's 0.5 was not measured). The frame
    feature size comes from the data (128 for the compressed VGG16 vectors). Context inference:
    ``--context-inference``, ACVI with its defaults (``VALIDATED_CHOICE``)."""
    seq2seq_defaults(
        args, dropout=0.3, encoder_embed_dim=None, encoder_hidden_size=128, encoder_layers=1,
        decoder_embed_dim=128, decoder_hidden_size=256, decoder_layers=1,
        attention_type="additive", attention_dim=64)
