"""Lead-k, the extractive baseline: the first k sentences of an article (lead-3 for CNN/DailyMail;
See et al. 2017, Table 1).

Sentences of a tokenised article (See et al.'s preprocessing: lower-cased, PTB tokens): sentence
markers ``<s> </s> <t> </t>`` are boundaries and are removed; otherwise a sentence ends after a
``.``, ``!`` or ``?`` token together with the closing quotes or brackets that follow it
(``'' ' ) -rrb-``). An article with fewer than k sentences is output whole, its sentences joined
by spaces (the format of the decoded summaries).
"""
from __future__ import annotations

from typing import List

from fairseq_acvi.metrics.rouge import SENTENCE_END, SENTENCE_MARKERS_CLOSE, SENTENCE_MARKERS_OPEN

CLOSERS = frozenset({"''", "'", ")", "-rrb-", '"'})
_MARKERS = SENTENCE_MARKERS_OPEN | SENTENCE_MARKERS_CLOSE


def article_sentences(article: str) -> List[List[str]]:
    """Sentences (token lists) of one tokenised article (module docstring)."""
    sents: List[List[str]] = []
    cur: List[str] = []
    ended = False
    for tok in article.split():
        if tok in _MARKERS:
            if cur:
                sents.append(cur)
            cur, ended = [], False
            continue
        if ended and tok not in CLOSERS:
            sents.append(cur)
            cur, ended = [], False
        cur.append(tok)
        if tok in SENTENCE_END:
            ended = True
    if cur:
        sents.append(cur)
    return sents


def lead(article: str, k: int = 3) -> str:
    """The first k sentences of ``article`` joined by spaces."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return " ".join(t for s in article_sentences(article)[:k] for t in s)
