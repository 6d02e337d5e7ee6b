"""Architecture names kept only so that older checkpoints and command lines keep working.

Until 2026-11-26 each seq2seq model had a second preset that repeated its base architecture's
defaults exactly; the presets were dropped (one name per configuration). The old names map to
the base architecture they always equalled — a checkpoint saved under one builds the same model —
and are not documented elsewhere: use the right-hand names.
"""
from fairseq.models import register_model_architecture

from fairseq_acvi.models import lstm_seq2seq, pointer_generator, video_captioner

#: old name -> (model, the base architecture it equals)
LEGACY_ARCHITECTURES = {
    "acvi_lstm_iwslt": ("acvi_lstm", lstm_seq2seq.base_architecture),
    "acvi_lstm_wmt_en_ro": ("acvi_lstm", lstm_seq2seq.base_architecture),
    "acvi_pointer_generator_cnndm": ("acvi_pointer_generator", pointer_generator.base_architecture),
    "acvi_video_captioner_msvd": ("acvi_video_captioner", video_captioner.base_architecture),
}

for _old, (_model, _base) in LEGACY_ARCHITECTURES.items():
    register_model_architecture(_model, _old)(_base)
