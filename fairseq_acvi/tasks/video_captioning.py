"""The ``video_captioning`` task: frame features in, a caption out (docs/method.md §3.2, ACVI paper §4.2, App. B).

Data folder (positional ``data``; ``data_scripts/prepare_msvd.sh`` builds it)::

    DATA/dict.txt                caption dictionary (lower-cased NLTK wordpunct tokens, --min-count)
    DATA/{train,valid,test}.tsv  ``VIDEO_ID<TAB>caption``, one caption a line
    DATA/features/VIDEO_ID.npy   float array (frames, D); --features-dir to read elsewhere

Feature size D. ``--feature-dim 0`` (the default) takes it from the feature files
(:func:`~fairseq_acvi.data.video_features.infer_feature_dim`: 1280 for EfficientNet-Lite0, 1024 for
GoogLeNet pool5, 4096 for VGG16 fc2, whatever ``data_scripts/extract_video_features.py`` wrote; every file
must agree); the model records it (``encoder_embed_dim`` in the checkpoint), and a generation task that
reads features of another size is refused with both sizes named. ``--feature-dim D`` insists on D.

Items. By default every caption line is one item (one training pair); item id ``i`` = the ``i``-th line
of ``{split}.tsv``. With ``--caption-eval-unique-videos`` every split except ``train`` has one item
per video instead: item id ``i`` = the ``i``-th distinct video id in order of first appearance in
``{split}.tsv``, target = its first caption (so generation scores each video once).
``fairseq_acvi.data.video_features.item_video_ids`` gives this id -> video map; the evaluation command
(``python -m fairseq_acvi.cli.eval_captioning``) uses it to read ``fairseq-generate`` output against
all references of each video.

Batch contract for models (``build_model`` is fairseq's default, so any registered model whose
encoder reads frame features plugs in)::

    sample["net_input"] = {
        "src_feats":          FloatTensor (B, F_max, D) float32, zero-padded after src_lengths[b],
        "src_lengths":        LongTensor (B,), descending (packed-sequence friendly),
        "prev_output_tokens": LongTensor (B, T), eos first, right-padded with pad,
    }
    sample["target"]: LongTensor (B, T), eos last, right-padded;  sample["id"]: LongTensor (B,)
    sample["ntokens"], sample["nsentences"]: int
    padding mask: fairseq_acvi.data.video_features.padding_mask_from_lengths(src_lengths, F_max)
                  -> BoolTensor (B, F_max), True at padded frames.

The model is called as ``model(**net_input)``, i.e. ``forward(src_feats, src_lengths, prev_output_tokens)``
(FairseqEncoderDecoderModel's default ``forward`` names its first argument ``src_tokens``, so the model
overrides it), and its encoder as ``encoder(src_feats=..., src_lengths=...)`` by the beam search.
Features are float32 as they leave the dataset (with ``--fp16`` fairseq's trainer halves every
float32 tensor of a sample, fairseq-generate does not; the model casts to its own dtype).

MSVD split: the standard Youtube2Text files give 1200 / 100 / 670 videos (train / valid / test); the
paper's App. B speaks of "the last 600" test clips. We use the 670 of the shared split files.

Generation: ``fairseq-generate`` works unchanged. The task's generator
(:class:`FeatureSequenceGenerator`) lets fairseq's beam search read ``src_feats``; the encoder still
receives exactly ``src_feats`` and ``src_lengths``.
"""

import logging
import os
from dataclasses import dataclass, field
from typing import Dict, Optional

import torch
from fairseq.data import Dictionary
from fairseq.dataclass import FairseqDataclass
from fairseq.sequence_generator import EnsembleModel, SequenceGenerator
from fairseq.tasks import FairseqTask, register_task
from omegaconf import MISSING

from fairseq_acvi.data.video_features import infer_feature_dim, load_caption_dataset, padding_mask_from_lengths

logger = logging.getLogger(__name__)

# keys SequenceGenerator needs to find the batch size and source length; removed again before the
# encoder sees net_input
_GENERATOR_ALIASES = ("source", "padding_mask")


@dataclass
class VideoCaptioningConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={
        "help": "folder with dict.txt, {split}.tsv caption files and features/ (see data_scripts/prepare_msvd.sh)"})
    features_dir: str = field(default="features", metadata={
        "help": "folder of VIDEO_ID.npy feature files; relative paths are relative to the data folder"})
    max_frames: int = field(default=24, metadata={
        "help": "frames per video; files with more rows are reduced to this many equally spaced rows"})
    feature_dim: int = field(default=0, metadata={
        "help": "feature size per frame; 0 (default): read it from the feature files (1280: EfficientNet-Lite0, "
                "1024: GoogLeNet pool5)"})
    max_target_positions: int = field(default=1024, metadata={"help": "longest caption (tokens incl. eos)"})
    caption_eval_unique_videos: bool = field(default=False, metadata={
        "help": "one item per video (target: its first caption) in every split except 'train', "
                "so fairseq-generate scores each video once"})


class _FeatureEnsembleModel(EnsembleModel):
    """EnsembleModel whose encoder call drops the generator-only aliases of ``src_feats``."""

    def forward_encoder(self, net_input: Dict[str, torch.Tensor]):
        net_input = {k: v for k, v in net_input.items() if k not in _GENERATOR_ALIASES}
        return super().forward_encoder(net_input)


class FeatureSequenceGenerator(SequenceGenerator):
    """fairseq's SequenceGenerator for ``net_input["src_feats"]`` batches.

    fairseq's beam search reads the batch size, source length and device from ``src_tokens`` or
    ``source``; this adds ``source`` (= src_feats) and ``padding_mask`` for that purpose only.
    """

    def __init__(self, models, tgt_dict, **kwargs):
        if not isinstance(models, EnsembleModel):
            models = _FeatureEnsembleModel(models)
        super().__init__(models, tgt_dict, **kwargs)

    def _generate(self, sample, *args, **kwargs):
        net_input = sample["net_input"]
        if "src_feats" in net_input and "source" not in net_input:
            feats = net_input["src_feats"]
            mask = padding_mask_from_lengths(net_input["src_lengths"].to(feats.device), feats.size(1))
            sample = dict(sample, net_input=dict(net_input, source=feats, padding_mask=mask))
        return super()._generate(sample, *args, **kwargs)


@register_task("video_captioning", dataclass=VideoCaptioningConfig)
class VideoCaptioningTask(FairseqTask):
    """Caption generation from per-video frame features; see the module docstring for the contract."""

    cfg: VideoCaptioningConfig

    def __init__(self, cfg: VideoCaptioningConfig, tgt_dict: Dictionary):
        super().__init__(cfg)
        self.tgt_dict = tgt_dict

    @classmethod
    def setup_task(cls, cfg: VideoCaptioningConfig, **kwargs):
        dict_path = os.path.join(cfg.data, "dict.txt")
        if not os.path.isfile(dict_path):
            raise FileNotFoundError(
                f"caption dictionary not found: {dict_path} (build it with data_scripts/prepare_msvd.sh)")
        tgt_dict = Dictionary.load(dict_path)
        logger.info(f"[video_captioning] dictionary: {len(tgt_dict)} types")
        if not cfg.feature_dim or cfg.feature_dim <= 0:
            feature_dir = os.path.join(cfg.data, cfg.features_dir)
            cfg.feature_dim = infer_feature_dim(feature_dir)
            logger.info(f"[video_captioning] feature size {cfg.feature_dim} (from the files in {feature_dir})")
        return cls(cfg, tgt_dict)

    def feature_dir(self) -> str:
        return os.path.join(self.cfg.data, self.cfg.features_dir)  # join keeps absolute features_dir

    def load_dataset(self, split: str, epoch: int = 1, combine: bool = False, **kwargs):
        caption_file = os.path.join(self.cfg.data, f"{split}.tsv")
        unique = bool(self.cfg.caption_eval_unique_videos) and split != "train"
        dataset, records = load_caption_dataset(
            caption_file, self.feature_dir(), self.tgt_dict, self.cfg.feature_dim, self.cfg.max_frames,
            unique_videos=unique, shuffle=(split == "train"))
        mode = "one per video" if unique else "one per caption"
        logger.info(f"[video_captioning] {split}: {len(dataset)} items ({mode}), "
                    f"{len(set(dataset.video_ids))} videos, {len(records)} captions")
        self.datasets[split] = dataset

    def build_generator(self, models, args, seq_gen_cls=None, extra_gen_cls_kwargs=None,
                        prefix_allowed_tokens_fn=None):
        if seq_gen_cls is None and not getattr(args, "print_alignment", False):
            seq_gen_cls = FeatureSequenceGenerator
        return super().build_generator(models, args, seq_gen_cls=seq_gen_cls,
                                       extra_gen_cls_kwargs=extra_gen_cls_kwargs,
                                       prefix_allowed_tokens_fn=prefix_allowed_tokens_fn)

    def build_dataset_for_inference(self, src_tokens, src_lengths, **kwargs):
        raise NotImplementedError("video_captioning reads features from {split}.tsv; use fairseq-generate --gen-subset")

    def max_positions(self):
        return (self.cfg.max_frames, self.cfg.max_target_positions)

    @property
    def source_dictionary(self) -> Optional[Dictionary]:
        return None

    @property
    def target_dictionary(self) -> Dictionary:
        return self.tgt_dict
