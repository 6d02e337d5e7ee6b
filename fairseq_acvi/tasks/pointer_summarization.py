"""``pointer_summarization``: CNN/DM article → summary with OOV position markers (docs/method.md §3.1).

fairseq's ``translation`` task plus what the pointer-generator's phased training needs:

* **Data**: ``data_scripts/prepare_cnndm.sh`` output (``{split}.src-tgt.{src,tgt}`` binarised with
  the joined ``dict.txt`` = real words + markers ``<unk-0>…<unk-{M-1}>``). The task refuses
  dictionaries that are not joined or have no marker block.
* **Truncation (explicit)** to the current phase's limits (P Table 5):
    ``--truncate-source``: an article keeps its first ``--max-source-positions − 1`` tokens and
      its ``</s>`` (so ``--max-source-positions 401`` = 400 words, the last phase; 11 = 10 words,
      the first);
    ``--truncate-target``: a summary longer than ``--max-target-positions`` tokens (``</s>``
      counted) keeps its first ``--max-target-positions`` words and **no** ``</s>`` (See et al.:
      a cut summary must not teach the decoder to stop there); a shorter one is unchanged.
  Without the flags nothing is cut and fairseq refuses over-long training examples as usual.
* **Marker demotion**: with ``--truncate-source``, a marker ``<unk-j>`` whose position j is past
  the kept source words (j ≥ max-source-positions − 1) cannot be copied any more; it is mapped to
  ``<unk>`` in source and target (``fairseq_acvi.data.oov_markers.demote_markers``).
* **Empty lines**: an empty article or summary (only ``</s>`` in the binarised data) is an error
  naming the data file and the 1-based line, raised when the split is loaded.

``fairseq-generate`` works unchanged; ``data_scripts/restore_oov.py`` puts the source words back
in place of the markers and ``python -m fairseq_acvi.cli.eval_summarization`` scores the result
(ROUGE-Lsum on the sentence-split ``{split}.summary`` side file).
"""
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq.data import BaseWrapperDataset, LanguagePairDataset, data_utils
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

from fairseq_acvi.data.oov_markers import demote_markers, marker_id_range

logger = logging.getLogger(__name__)


class PhaseTruncateDataset(BaseWrapperDataset):
    """Truncate token sequences (each ending in ``eos``) to ``max_len`` tokens and demote markers.

    keep_eos=True  (source): ``[w_1 … w_{max_len−1}, eos]``
    keep_eos=False (target): ``[w_1 … w_{max_len}]`` (no eos) when cut, unchanged otherwise.
    Markers with position ≥ ``marker_limit`` become ``unk`` (``marker_limit`` None: no demotion).
    """

    def __init__(self, dataset, max_len, eos, keep_eos, first_marker, marker_limit, unk):
        super().__init__(dataset)
        if max_len is not None and max_len < (2 if keep_eos else 1):
            raise ValueError(f"truncation length {max_len} leaves no token")
        self.max_len, self.eos, self.keep_eos = max_len, eos, keep_eos
        self.first_marker, self.marker_limit, self.unk = first_marker, marker_limit, unk
        sizes = np.asarray(dataset.sizes)
        self._sizes = sizes if max_len is None else np.minimum(sizes, max_len)

    def __getitem__(self, index):
        item = self.dataset[index]
        if self.max_len is not None and item.numel() > self.max_len:
            if self.keep_eos:
                item = torch.cat([item[: self.max_len - 1], item.new_tensor([self.eos])])
            else:
                item = item[: self.max_len]
        if self.marker_limit is not None:
            item = demote_markers(item, self.first_marker, self.marker_limit, self.unk)
        return item

    @property
    def sizes(self):
        return self._sizes

    def size(self, index):
        return int(self._sizes[index])

    def num_tokens(self, index):
        return int(self._sizes[index])


@dataclass
class PointerSummarizationConfig(TranslationConfig):
    truncate_target: bool = field(default=False, metadata={
        "help": "cut summaries to --max-target-positions tokens (a cut summary has no </s>)"})


@register_task("pointer_summarization", dataclass=PointerSummarizationConfig)
class PointerSummarizationTask(TranslationTask):
    cfg: PointerSummarizationConfig

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        if src_dict.symbols != tgt_dict.symbols:
            raise ValueError("pointer_summarization: source and target dictionaries differ; "
                             "binarise with the joined dict.txt of prepare_cnndm.py "
                             "(--srcdict dict.txt --tgtdict dict.txt)")
        self.first_marker, self.n_markers = marker_id_range(tgt_dict)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        paths = utils_split(self.cfg.data)
        data_path = paths[(epoch - 1) % len(paths)] if split == self.cfg.train_subset else paths[0]
        src, tgt = self.cfg.source_lang, self.cfg.target_lang
        prefix = os.path.join(data_path, f"{split}.{src}-{tgt}.")
        d = self.src_dict
        datasets = {}
        for lang in (src, tgt):
            ds = data_utils.load_indexed_dataset(prefix + lang, d, self.cfg.dataset_impl)
            if ds is None:
                raise FileNotFoundError(f"pointer_summarization: dataset not found: "
                                        f"{prefix + lang}.bin ({split}, {data_path})")
            empty = np.flatnonzero(np.asarray(ds.sizes) <= 1)
            if len(empty):
                what = "article" if lang == src else "summary"
                raise ValueError(f"{prefix + lang}.bin: empty {what} at line {int(empty[0]) + 1} "
                                 f"({len(empty)} empty line(s) in all); remove them from the text "
                                 "before fairseq-preprocess (prepare_cnndm.py refuses them)")
            datasets[lang] = ds
        if len(datasets[src]) != len(datasets[tgt]):
            raise ValueError(f"{prefix}{{{src},{tgt}}}: {len(datasets[src])} articles but "
                             f"{len(datasets[tgt])} summaries")
        limit = self.cfg.max_source_positions - 1 if self.cfg.truncate_source else None
        src_ds = PhaseTruncateDataset(
            datasets[src], self.cfg.max_source_positions if self.cfg.truncate_source else None,
            d.eos(), True, self.first_marker, limit, d.unk())
        tgt_ds = PhaseTruncateDataset(
            datasets[tgt], self.cfg.max_target_positions if self.cfg.truncate_target else None,
            d.eos(), False, self.first_marker, limit, d.unk())
        logger.info(f"{data_path} {split} {len(src_ds)} examples; source ≤ "
                    f"{self.cfg.max_source_positions if self.cfg.truncate_source else 'any'}, "
                    f"target ≤ {self.cfg.max_target_positions if self.cfg.truncate_target else 'any'}"
                    " tokens")
        self.datasets[split] = LanguagePairDataset(
            src_ds, src_ds.sizes, d, tgt_ds, tgt_ds.sizes, self.tgt_dict,
            left_pad_source=self.cfg.left_pad_source, left_pad_target=self.cfg.left_pad_target,
            num_buckets=self.cfg.num_batch_buckets, shuffle=(split != "test"),
            pad_to_multiple=self.cfg.required_seq_len_multiple)


def utils_split(data: str):
    paths = [p for p in data.split(os.pathsep) if p]
    if not paths:
        raise ValueError("pointer_summarization: no data directory given")
    return paths
