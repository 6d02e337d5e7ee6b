"""N-gram statistics of generated summaries: novel n-grams and repeated n-grams (See et al. 2017).

See et al. (2017) describe their models' outputs with two corpus statistics that this module
computes (they give no formula; these are the definitions used in this project):

* **novel n-gram rate** (their §7 figure of novel n-grams): 100 × #{n-gram occurrences of the
  summaries that occur nowhere in their source article} / #{n-gram occurrences of the
  summaries}, pooled over the corpus (micro average);
* **repeated n-gram rate** (their §7 figure of duplicated n-grams): 100 × #{n-gram occurrences that
  repeat an n-gram seen earlier in the same summary} / #{n-gram occurrences}, pooled. Coverage
  is the remedy for repetition; the issue's target compares this rate for n = 3 before and after
  the coverage phase.

Tokens: a summary line is split into sentences by :func:`fairseq_acvi.metrics.rouge.summary_sentences`
(sentence markers removed, glued periods split, a sentence ends after ``.``/``!``/``?``) and
lower-cased; n-grams are taken **within** sentences, punctuation included — as the tokens of the
decoded files are. (An n-gram across a sentence boundary would count two copied sentences put side
by side as "novel".) The source is the whole article as given (not truncated to the model's input length),
lower-cased, sentence markers removed. Unknown tokens (``UNK``/``<unk>``) count as tokens: an
n-gram containing one is novel unless the source contains the same unknown token.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Sequence, Tuple

from fairseq_acvi.metrics.rouge import (SENTENCE_MARKERS_CLOSE, SENTENCE_MARKERS_OPEN,
                                        summary_sentences)

_MARKERS = SENTENCE_MARKERS_OPEN | SENTENCE_MARKERS_CLOSE


def ngrams(tokens: Sequence[str], n: int) -> List[Tuple[str, ...]]:
    """The n-gram occurrences of a token list, in order (empty when it is shorter than n)."""
    if n < 1:
        raise ValueError(f"n-gram order must be >= 1, got {n}")
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def summary_ngrams(text: str, n: int) -> List[Tuple[str, ...]]:
    """The n-gram occurrences of one summary line, sentence by sentence, lower-cased."""
    return [g for sent in summary_sentences(text) for g in ngrams([t.lower() for t in sent], n)]


def novel_ngram_rates(hyps: Sequence[str], srcs: Sequence[str],
                      orders: Sequence[int] = (1, 2, 3, 4)) -> Dict[int, float]:
    """``{n: % of the summaries' n-gram occurrences not in their article}`` (module docstring).

    Args:
        hyps: n summaries, one line each; srcs: the n articles they summarise.
        orders: the n-gram orders to report.
    Raises ValueError on a count mismatch or when no summary has an n-gram of some order.
    """
    if len(hyps) != len(srcs):
        raise ValueError(f"{len(hyps)} summaries but {len(srcs)} sources")
    novel = Counter()
    total = Counter()
    for h, s in zip(hyps, srcs):
        src = [t.lower() for t in s.split() if t not in _MARKERS]
        for n in orders:
            seen = set(ngrams(src, n))
            grams = summary_ngrams(h, n)
            total[n] += len(grams)
            novel[n] += sum(g not in seen for g in grams)
    for n in orders:
        if total[n] == 0:
            raise ValueError(f"no summary has a {n}-gram")
    return {n: 100.0 * novel[n] / total[n] for n in orders}


def repeated_ngram_rate(hyps: Sequence[str], n: int = 3) -> float:
    """% of the summaries' n-gram occurrences that repeat an earlier n-gram of the same summary.

    A summary "a b c a b c" has 4 trigrams of which 1 ("a b c", the second time) is repeated:
    25 %. Raises ValueError when no summary has an n-gram.
    """
    dup = total = 0
    for h in hyps:
        seen = set()
        for g in summary_ngrams(h, n):
            total += 1
            if g in seen:
                dup += 1
            seen.add(g)
    if total == 0:
        raise ValueError(f"no summary has a {n}-gram")
    return 100.0 * dup / total


def ngram_statistics(hyps: Sequence[str], srcs: Sequence[str] = None) -> Dict[str, float]:
    """The figures eval_summarization reports: ``repeat_3gram`` and, with sources,
    ``novel_1gram`` … ``novel_4gram`` (all in %)."""
    res = {"repeat_3gram": repeated_ngram_rate(hyps, 3)}
    if srcs is not None:
        res.update({f"novel_{n}gram": v for n, v in novel_ngram_rates(hyps, srcs).items()})
    return res
