"""Corpus BLEU from per-sentence statistics, and paired bootstrap resampling (Koehn, 2004).

Two systems decoded on the same references differ by a few tenths of BLEU; whether that is more
than the luck of which sentences are in the test set is what a paired bootstrap tells. Every
sentence contributes a row of sufficient statistics (hypothesis length, reference length, and
for n = 1..4 the clipped n-gram matches and the hypothesis n-gram count); corpus BLEU is a function
of their column sums, so a resample of the sentences is a vector of multiplicities ``c`` (n,)
and its statistics are ``c @ S`` — one matrix product for all resamples, both systems drawn with
the same ``c`` (paired).

The BLEU here is sacreBLEU's (``tokenize="none"``: whitespace tokens as given, no lower-casing,
smoothing ``exp``, one reference), the ``bleu_tok`` of ``data_scripts/score_mt.py``; the tests
check it against sacreBLEU to 1e-9.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, Sequence

import numpy as np

from fairseq_acvi.metrics.bootstrap import resample_weights, summarize_deltas

MAX_ORDER = 4
#: columns of a statistics row: hyp length, ref length, matches n=1..4, hyp n-grams n=1..4
N_STATS = 2 + 2 * MAX_ORDER


def _counts(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def sentence_stats(hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """(n, N_STATS) float64: every sentence's BLEU statistics (module docstring).
    Raises ValueError when the two lists differ in length."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    out = np.zeros((len(hyps), N_STATS))
    for i, (h, r) in enumerate(zip(hyps, refs)):
        ht, rt = h.split(), r.split()
        out[i, 0], out[i, 1] = len(ht), len(rt)
        for n in range(1, MAX_ORDER + 1):
            hc, rc = _counts(ht, n), _counts(rt, n)
            out[i, 1 + n] = sum(min(c, rc[g]) for g, c in hc.items())
            out[i, 1 + MAX_ORDER + n] = max(0, len(ht) - n + 1)
    return out


def bleu_from_totals(totals: np.ndarray) -> np.ndarray:
    """BLEU (0-100) of summed statistics: totals (..., N_STATS) -> (...). sacreBLEU's formula:
    precision p_n = matches/count, a zero match count replaced by 1/(2^k·count) for the k-th such
    order (``exp`` smoothing), orders with no hypothesis n-gram ending the product, brevity
    penalty exp(1 − r/h) when h < r."""
    totals = np.asarray(totals, dtype=np.float64)
    hyp_len, ref_len = totals[..., 0], totals[..., 1]
    log_p = np.zeros(hyp_len.shape)
    smooth = np.ones(hyp_len.shape)
    alive = np.ones(hyp_len.shape, dtype=bool)      # no earlier order without hypothesis n-grams
    for n in range(1, MAX_ORDER + 1):
        match, count = totals[..., 1 + n], totals[..., 1 + MAX_ORDER + n]
        alive &= count > 0
        smooth = np.where(alive & (match == 0), smooth * 2, smooth)
        safe = np.where(count > 0, count, 1.0)
        p = np.where(match > 0, match / safe, 1.0 / (smooth * safe))
        # an order past the first without n-grams counts as precision 0 (sacreBLEU: log 0 = -1e10)
        log_p = log_p + np.where(alive, np.log(np.where(alive, p, 1.0)), -9999999999.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(hyp_len >= ref_len, 1.0,
                      np.where(hyp_len > 0, np.exp(1.0 - ref_len / np.maximum(hyp_len, 1e-300)), 0.0))
    return 100.0 * bp * np.exp(log_p / MAX_ORDER)


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """sacreBLEU's corpus BLEU with ``tokenize="none"`` (module docstring)."""
    return float(bleu_from_totals(sentence_stats(hyps, refs).sum(0)))


def paired_bootstrap(base: np.ndarray, other: np.ndarray, n_resamples: int = 1000,
                     level: float = 0.95, seed: int = 0) -> Dict[str, float]:
    """Paired bootstrap of BLEU(other) − BLEU(base) over sentences.

    base, other: (n, N_STATS) :func:`sentence_stats` of two systems on the same n references.
    Returns ``delta`` (on the full set), ``low``/``high`` (percentile interval at ``level``),
    ``p_other_better`` (share of resamples where ``other`` scores higher; Koehn's "better with
    probability p"), ``base``/``other`` (their BLEU) and ``n_resamples``.
    """
    base, other = np.asarray(base, np.float64), np.asarray(other, np.float64)
    if base.shape != other.shape or base.ndim != 2 or base.shape[1] != N_STATS:
        raise ValueError(f"statistics of the same sentences needed: shapes {base.shape} and "
                         f"{other.shape} (expected (n, {N_STATS}) both)")
    if base.shape[0] == 0:
        raise ValueError("no sentences")
    weights = resample_weights(base.shape[0], n_resamples, seed)
    d = bleu_from_totals(weights @ other) - bleu_from_totals(weights @ base)   # (R,)
    return summarize_deltas(d, bleu_from_totals(base.sum(0)), bleu_from_totals(other.sum(0)),
                            n_resamples, level)


def format_interval(r: Dict[str, float]) -> str:
    """``+0.31 [−0.12, +0.74]`` for a :func:`paired_bootstrap` result."""
    pct = int(round(100 * r["level"]))
    return f"{r['delta']:+.2f} ({pct}% CI {r['low']:+.2f} to {r['high']:+.2f})"

