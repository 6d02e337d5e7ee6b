"""Novel-word rate and OOV-adoption rate of generated summaries (docs/method.md §5, P Table 2).

The ACVI paper (P §4.1, and the dissertation §7.4.1) describes novel words only as "words that
are not found in the source document" and OOV adoption as "the capacity to adopt OOV words"; it
gives no formula. Its values (novel 0.05…0.38, OOV adoption 1.16…1.25 for pointer-generator
models) are read here as **percentages of generated word tokens**, the unit of See et al.'s (2017)
novel n-gram statistics for the same models. Definitions used in this project:

* word tokens: a summary line normalised by :func:`fairseq_acvi.metrics.rouge.summary_tokens`
  (sentence markers removed, glued periods split), lower-cased, keeping only tokens with at least
  one letter or digit (punctuation such as ``.`` ``-`` ``£`` is not a word). The source is the
  **full** article as given (not truncated), lower-cased, ``<t>``/``<s>`` markers removed;
* unknown tokens: ``UNK``, ``<unk>``, ``[UNK]`` (case-insensitive) — a failed word, not a word;
* **novel-word rate** = 100 × #{hypothesis word tokens that are not unknown tokens and contain a
  letter/digit run that occurs nowhere in the source} / #{hypothesis word tokens}, pooled over
  the corpus (micro average). Comparing letter/digit runs (``62-year`` → ``62``, ``year``) rather
  than whole tokens keeps differences of hyphen/apostrophe tokenisation between a source file
  and a hypothesis file from counting as novel words (the REALSumm sample has such differences);
* **OOV-adoption rate** = 100 × #{hypothesis word tokens outside the model's vocabulary (a
  fairseq ``dict.txt``, markers excluded) that occur as tokens in the source} / #{hypothesis
  word tokens}, pooled over the corpus: the share of the output made of source OOV words that
  the model copied. It needs the vocabulary; without one it is not computed.

Also returned, to make the two rates readable: ``unk_rate`` (100 × unknown tokens / word
tokens) and ``oov_per_summary`` (mean count of adopted OOV tokens per summary).
"""
from __future__ import annotations

import re
from typing import Container, Dict, Optional, Sequence

from fairseq_acvi.metrics.rouge import (SENTENCE_MARKERS_CLOSE, SENTENCE_MARKERS_OPEN,
                                        summary_tokens)

UNKNOWN_TOKENS = frozenset({"unk", "<unk>", "[unk]"})
_MARKERS = SENTENCE_MARKERS_OPEN | SENTENCE_MARKERS_CLOSE
_WORD = re.compile(r"[^\W_]+")  # a run of letters/digits (Unicode-aware)


def source_tokens(text: str) -> set:
    """Lower-cased token set of one source article (sentence markers removed)."""
    return {t.lower() for t in text.split() if t not in _MARKERS}


def source_words(tokens: set) -> set:
    """Letter/digit runs of a set of tokens."""
    return {w for t in tokens for w in _WORD.findall(t)}


def novelty(hyps: Sequence[str], srcs: Sequence[str],
            vocab: Optional[Container[str]] = None) -> Dict[str, Optional[float]]:
    """Corpus-level novelty statistics (see the module docstring for the definitions).

    Args:
        hyps: n generated summaries (one line each).
        srcs: the n source articles they summarise.
        vocab: the model's real vocabulary (lower-cased words); ``None`` → no OOV figures.
    Returns:
        ``{"novel_rate", "oov_adoption", "unk_rate", "oov_per_summary", "words"}``; the OOV
        entries are ``None`` without ``vocab``.
    """
    if len(hyps) != len(srcs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(srcs)} sources")
    if not hyps:
        raise ValueError("no hypotheses to score")
    total = novel = unk = oov = 0
    for h, s in zip(hyps, srcs):
        toks = source_tokens(s)
        words = source_words(toks)
        for t in summary_tokens(h):
            t = t.lower()
            parts = _WORD.findall(t)
            if not parts and t not in UNKNOWN_TOKENS:
                continue  # punctuation
            total += 1
            if t in UNKNOWN_TOKENS:
                unk += 1
            elif any(p not in words for p in parts):
                novel += 1
            elif vocab is not None and t not in vocab and t in toks:
                oov += 1
    if total == 0:
        raise ValueError("the hypotheses contain no word tokens")
    return {
        "novel_rate": 100.0 * novel / total,
        "oov_adoption": 100.0 * oov / total if vocab is not None else None,
        "unk_rate": 100.0 * unk / total,
        "oov_per_summary": oov / len(hyps) if vocab is not None else None,
        "words": float(total),
    }
