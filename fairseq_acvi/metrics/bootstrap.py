"""Bootstrap over test examples: intervals of a mean and paired differences between two systems.

Each resample draws the n examples (articles, sentences) with replacement, as multinomial counts
``(n_resamples, n)``; statistics are then weighted sums, so a thousand resamples of a few thousand
examples take milliseconds. The percentile interval at ``level`` and Koehn's "B is better with
probability p" (the share of resamples where B scores higher) follow Koehn (2004), "Statistical
significance tests for machine translation evaluation".

* :func:`resample_weights`: the counts, reproducible from ``seed``;
* :func:`mean_interval`: percentile interval of a per-example score's mean (e.g. ROUGE-1 F1,
  whose corpus figure is the mean over articles);
* :func:`paired_mean_bootstrap`: mean(other) − mean(base) on the same examples;
* :func:`summarize_deltas`: the result dictionary shared with :func:`fairseq_acvi.metrics.bleu.
  paired_bootstrap` (corpus BLEU is not a mean, so it resamples sufficient statistics instead).
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import numpy as np


def resample_weights(n: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """(n_resamples, n) float64 counts: how often each example is drawn in each resample."""
    if n <= 0:
        raise ValueError("no examples to resample")
    rng = np.random.default_rng(seed)
    return rng.multinomial(n, np.full(n, 1.0 / n), size=n_resamples).astype(np.float64)


def summarize_deltas(deltas: np.ndarray, base: float, other: float, n_resamples: int,
                     level: float) -> Dict[str, float]:
    """``base``, ``other``, ``delta`` = other − base (full set), the percentile interval
    ``low``/``high`` of the resampled ``deltas`` (R,), ``p_other_better``, ``n_resamples``, ``level``."""
    lo, hi = np.quantile(deltas, [(1 - level) / 2, (1 + level) / 2])
    return {"base": float(base), "other": float(other), "delta": float(other - base),
            "low": float(lo), "high": float(hi), "p_other_better": float(np.mean(deltas > 0)),
            "n_resamples": int(n_resamples), "level": float(level)}


def _scores(x: Sequence[float], name: str) -> np.ndarray:
    a = np.asarray(x, np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: one score per example needed, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: scores must be finite")
    return a


def mean_interval(scores: Sequence[float], n_resamples: int = 1000, level: float = 0.95,
                  seed: int = 0) -> Tuple[float, float]:
    """Percentile interval (low, high) of the mean of ``scores`` (n,) over resampled examples."""
    x = _scores(scores, "scores")
    means = resample_weights(x.size, n_resamples, seed) @ x / x.size
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_mean_bootstrap(base: Sequence[float], other: Sequence[float], n_resamples: int = 1000,
                          level: float = 0.95, seed: int = 0) -> Dict[str, float]:
    """Paired bootstrap of mean(other) − mean(base); both (n,) scores of the same n examples.

    Returns :func:`summarize_deltas`' dictionary (base and other are the full-set means)."""
    b, o = _scores(base, "base"), _scores(other, "other")
    if b.shape != o.shape:
        raise ValueError(f"scores of the same examples needed: {b.size} and {o.size}")
    d = resample_weights(b.size, n_resamples, seed) @ (o - b) / b.size
    return summarize_deltas(d, b.mean(), o.mean(), n_resamples, level)
