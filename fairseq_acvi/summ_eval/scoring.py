"""One evaluator for summaries (docs/method.md §5, P Tables 1-2): ROUGE-1/2/L (rouge-score with
stemming, F1 × 100, ROUGE-L summary-level), METEOR exact / full, novel-word and OOV-adoption rates
(:mod:`fairseq_acvi.metrics.novelty`), novel and repeated n-gram rates (See et al. 2017 §7;
:mod:`fairseq_acvi.metrics.ngrams`). The ``eval_summarization`` and ``summ_report`` commands both
score with it, so that every row of every table is scored the same way.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from fairseq_acvi.data.oov_markers import FAIRSEQ_SPECIALS, marker_position


def vocab_from_dict(path: str) -> set:
    """Lower-cased real vocabulary of a fairseq ``dict.txt`` (markers and specials left out)."""
    words = set()
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            w = line.split(" ")[0].strip()
            if not w:
                raise ValueError(f"{path}:{i}: expected 'word count', got {line!r}")
            if marker_position(w) < 0 and w not in FAIRSEQ_SPECIALS:
                words.add(w.lower())
    return words


def evaluate(hyps: List[str], refs: List[str], srcs: Optional[List[str]] = None,
             vocab: Optional[set] = None, meteor_modes: Sequence[str] = ("exact", "full"),
             hyp_name: str = "hyp", per_article: bool = False) -> Dict[str, object]:
    """All figures for one system; keys as in the JSON output (scores × 100).

    ``per_article``: also return ``per_article = {"rouge1", "rouge2", "rougeL"}``, each a list of
    the n articles' F1 × 100 (their means are the corpus figures), for bootstrap intervals."""
    from fairseq_acvi.metrics.meteor import meteor
    from fairseq_acvi.metrics.ngrams import ngram_statistics
    from fairseq_acvi.metrics.novelty import novelty
    from fairseq_acvi.metrics.rouge import rouge_means, rouge_per_pair

    for i, h in enumerate(hyps, 1):
        for t in h.split():
            if marker_position(t) >= 0:
                raise ValueError(f"{hyp_name}:{i}: unrestored OOV marker {t}; run "
                                 "data_scripts/restore_oov.py first")
    res: Dict[str, object] = {"n": len(hyps)}
    if not hyps:
        raise ValueError(f"{hyp_name}: no summaries to score")
    per = rouge_per_pair(hyps, refs)
    per = {"rouge1": per["rouge1"], "rouge2": per["rouge2"], "rougeL": per["rougeLsum"]}
    res.update(rouge_means(per))
    for mode in meteor_modes:
        res[f"meteor_{mode}"] = meteor(hyps, refs, mode=mode)["score"]
    if srcs is not None:
        res.update(novelty(hyps, srcs, vocab))
    res.update(ngram_statistics(hyps, srcs))
    if per_article:
        res["per_article"] = per
    return res
