"""ROUGE-1/2/L for CNN/DailyMail summaries (docs/method.md §5, P Table 1) and summary text normalisation.

One fixed configuration, used everywhere in the project:

* Google's ``rouge-score`` package, ``RougeScorer(["rouge1", "rouge2", "rougeLsum"],
  use_stemmer=True)``: its tokenizer lower-cases, turns every non ``[a-z0-9]`` character into a
  space (punctuation is dropped) and applies the Porter stemmer, as ROUGE-1.5.5 ``-m``.
* ROUGE-L is the **summary-level** LCS (``rougeLsum``, the union-LCS of ROUGE-1.5.5 that
  pyrouge reports as ROUGE-L); sentences are split by :func:`summary_sentences`.
* Each score is the F1 of one (hypothesis, reference) pair; the reported figure is the mean over
  pairs (macro average, as ROUGE-1.5.5 ``-a``), times 100. One reference per hypothesis.

Summary text normalisation (:func:`summary_sentences`), shared by ROUGE, METEOR and novelty:

* sentence markers ``<s> </s> <t> </t>`` are removed and act as sentence boundaries;
* See et al.'s decoded files and the REALSumm copies of the references glue sentences as
  ``"... year .the public ..."``: a token that starts with ``.`` followed by a non-dot character is
  split into ``.`` and the rest, except for a bare decimal such as ``.375`` (a real token);
* a sentence also ends after each ``.``, ``!`` or ``?`` token (See et al. split decoded text
  on ``.`` before running pyrouge). Text is otherwise used as given (already tokenised).
"""
from __future__ import annotations

import re
from typing import Dict, List, Sequence

SENTENCE_MARKERS_OPEN = frozenset({"<s>", "<t>"})
SENTENCE_MARKERS_CLOSE = frozenset({"</s>", "</t>"})
SENTENCE_END = frozenset({".", "!", "?"})
# "." at a token start, followed by a non-space non-dot, but not a bare decimal like ".375"
_GLUED_PERIOD = re.compile(r"(?<!\S)\.(?=[^\s.])(?!\d+(?!\S))")

ROUGE_TYPES = ("rouge1", "rouge2", "rougeLsum")
#: names used in tables / JSON for the three ROUGE types
ROUGE_NAMES = {"rouge1": "ROUGE-1", "rouge2": "ROUGE-2", "rougeLsum": "ROUGE-L"}


def unglue_periods(text: str) -> str:
    """Split ``.word`` into ``. word`` (sentence glue of See et al.'s files); keeps ``.375``."""
    return _GLUED_PERIOD.sub(". ", text)


def summary_sentences(text: str) -> List[List[str]]:
    """Sentences (lists of tokens) of one summary line, after the normalisation above.

    Returns an empty list for a text with no tokens.
    """
    sents: List[List[str]] = []
    cur: List[str] = []
    for tok in unglue_periods(text).split():
        if tok in SENTENCE_MARKERS_OPEN or tok in SENTENCE_MARKERS_CLOSE:
            if cur:
                sents.append(cur)
            cur = []
            continue
        cur.append(tok)
        if tok in SENTENCE_END:
            sents.append(cur)
            cur = []
    if cur:
        sents.append(cur)
    return sents


def summary_tokens(text: str) -> List[str]:
    """All tokens of a summary line, sentence markers removed, periods unglued."""
    return [t for s in summary_sentences(text) for t in s]


def _rouge_text(text: str) -> str:
    """One sentence per line, the input format of ``rougeLsum``."""
    return "\n".join(" ".join(s) for s in summary_sentences(text))


def make_scorer():
    """The project's one ROUGE configuration (see the module docstring)."""
    try:
        from rouge_score import rouge_scorer
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("ROUGE needs the rouge-score package: pip install rouge-score") from e
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def rouge_per_pair(hyps: Sequence[str], refs: Sequence[str]) -> Dict[str, List[float]]:
    """F1 × 100 of each pair for ``rouge1``, ``rouge2``, ``rougeLsum`` (lists of length n)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    scorer = make_scorer()
    out: Dict[str, List[float]] = {k: [] for k in ROUGE_TYPES}
    for h, r in zip(hyps, refs):
        s = scorer.score(_rouge_text(r), _rouge_text(h))  # score(target, prediction)
        for k in ROUGE_TYPES:
            out[k].append(100.0 * s[k].fmeasure)
    return out


def rouge_means(per: Dict[str, List[float]]) -> Dict[str, float]:
    """Corpus figures from :func:`rouge_per_pair`'s lists: the mean over pairs of each."""
    if not any(per.values()):
        raise ValueError("no hypotheses to score")
    return {k: sum(v) / len(v) for k, v in per.items()}


def rouge(hyps: Sequence[str], refs: Sequence[str]) -> Dict[str, float]:
    """Mean F1 × 100 over pairs: ``{"rouge1", "rouge2", "rougeLsum"}`` (no pairs: ValueError)."""
    return rouge_means(rouge_per_pair(hyps, refs))
