"""Calibration and error-detection metrics for per-token predictions (docs/uncertainty.md).

* :func:`reliability_bins` / :func:`expected_calibration_error`: confidence (the probability of the
  predicted token) against accuracy in equal-width bins of [0, 1];
  ECE = Σ_b (n_b / n) |acc_b − conf_b| (Naeini et al. 2015; Guo et al. 2017). A confidence of
  exactly 1 falls in the last bin.
* :func:`auroc`: the area under the ROC curve of a score that should be higher for the positives
  (here: wrong tokens), = P(score of a positive > score of a negative) + ½ P(tie), computed from
  average ranks (the Mann-Whitney statistic), so ties count one half.
* :func:`rank_correlation`: Spearman's ρ (Pearson's correlation of the average ranks).
* :func:`stratified_auroc`: the AUROC of a score within quantile strata of another (e.g. of the
  mutual information within entropy deciles: what the score adds to the other), their
  count-weighted mean.
* :func:`bootstrap_interval`: a percentile interval of a statistic over groups (sentences) drawn
  with replacement, the same draws for paired models.
* :func:`pearson`: Pearson's correlation.
* :func:`paired_bootstrap_methods`: the value of one statistic for several methods on the same
  sentences, its percentile interval per method and the interval of each method's difference to
  the first, every method drawn with the same resamples of the sentences (paired; a stratum per
  set for out-of-domain detection, where in-domain and out-of-domain sentences are drawn
  separately).

Inputs are 1-D arrays (numpy or torch, any float type); computed in float64.
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np


@dataclass
class Bin:
    lo: float
    hi: float
    count: int
    confidence: float      # mean confidence of the bin (nan when empty)
    accuracy: float        # share of correct predictions in the bin (nan when empty)


def _array(x, dtype=np.float64) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x).astype(dtype).reshape(-1)
    return a


def reliability_bins(confidence, correct, n_bins: int = 15) -> List[Bin]:
    """confidence (n,) in [0, 1], correct (n,) bool -> ``n_bins`` equal-width bins."""
    conf, ok = _array(confidence), _array(correct, bool)
    if conf.shape != ok.shape:
        raise ValueError(f"confidence {conf.shape} and correct {ok.shape} differ in length")
    if conf.size and (conf.min() < 0 or conf.max() > 1):
        raise ValueError("confidences must lie in [0, 1]")
    idx = np.minimum((conf * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(idx, minlength=n_bins)
    conf_sum = np.bincount(idx, weights=conf, minlength=n_bins)
    ok_sum = np.bincount(idx, weights=ok.astype(np.float64), minlength=n_bins)
    bins = []
    for b in range(n_bins):
        c = int(count[b])
        bins.append(Bin(b / n_bins, (b + 1) / n_bins, c,
                        conf_sum[b] / c if c else float("nan"),
                        ok_sum[b] / c if c else float("nan")))
    return bins


def expected_calibration_error(confidence, correct, n_bins: int = 15) -> float:
    """Σ_b (n_b / n) |acc_b − conf_b| over equal-width bins (0 for no predictions)."""
    bins = reliability_bins(confidence, correct, n_bins)
    n = sum(b.count for b in bins)
    if n == 0:
        return 0.0
    return float(sum(b.count / n * abs(b.accuracy - b.confidence) for b in bins if b.count))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of x, ties given the mean of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # start of each run of equal values
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]
    run_rank = (starts + ends + 1) / 2.0                     # mean of ranks starts+1 .. ends
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def auroc(scores, positive) -> float:
    """Area under the ROC curve of ``scores`` (n,) for the ``positive`` (n,) bool labels;
    nan without positives or without negatives."""
    s, pos = _array(scores), _array(positive, bool)
    if s.shape != pos.shape:
        raise ValueError(f"scores {s.shape} and labels {pos.shape} differ in length")
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = _average_ranks(s)
    return float((r[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def rank_correlation(x, y) -> float:
    """Spearman's ρ of x and y (n,): the correlation of their average ranks; nan when either is
    constant."""
    a, b = _array(x), _array(y)
    if a.shape != b.shape:
        raise ValueError(f"x {a.shape} and y {b.shape} differ in length")
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def stratified_auroc(scores, positive, strata_by, n_strata: int = 10) -> float:
    """AUROC of ``scores`` for ``positive`` within ``n_strata`` quantile strata of ``strata_by``
    (n,), weighted by the strata's sizes; strata without positives or negatives are left out
    (nan if all are)."""
    s, pos, by = _array(scores), _array(positive, bool), _array(strata_by)
    edges = np.quantile(by, np.linspace(0, 1, n_strata + 1))
    idx = np.clip(np.searchsorted(edges, by, side="right") - 1, 0, n_strata - 1)
    total = weight = 0.0
    for b in range(n_strata):
        m = idx == b
        a = auroc(s[m], pos[m]) if m.any() else float("nan")
        if not math.isnan(a):
            total += a * m.sum()
            weight += m.sum()
    return total / weight if weight else float("nan")


def bootstrap_interval(statistic, groups, n_resamples: int = 1000, level: float = 0.95,
                       seed: int = 0):
    """Percentile interval of ``statistic(index)`` over resamples of whole groups.

    groups (n,): the group (e.g. sentence) of every item; each resample draws the groups with
    replacement and passes ``statistic`` the item indices (m,) of the drawn groups, repeats
    included. Returns (low, high)."""
    g = _array(groups, np.int64)
    ids, inverse = np.unique(g, return_inverse=True)
    order = np.argsort(inverse, kind="mergesort")
    starts = np.r_[0, np.cumsum(np.bincount(inverse))]
    members = [order[starts[i]:starts[i + 1]] for i in range(len(ids))]
    rng = np.random.default_rng(seed)
    values = [statistic(np.concatenate([members[i] for i in rng.integers(0, len(ids), len(ids))]))
              for _ in range(n_resamples)]
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def pearson(x, y) -> float:
    """Pearson's correlation of x and y (n,); nan when either is constant."""
    a, b = _array(x), _array(y)
    if a.shape != b.shape:
        raise ValueError(f"x {a.shape} and y {b.shape} differ in length")
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den > 0 else float("nan")


def resample_indices(strata: Sequence[int], n_resamples: int, seed: int) -> np.ndarray:
    """(n_resamples, n) item indices: each resample draws, within every stratum (strata (n,)
    labels), as many items as it holds, with replacement."""
    labels = _array(strata, np.int64)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, labels.size), dtype=np.int64)
    for lab in np.unique(labels):
        members = np.flatnonzero(labels == lab)
        out[:, members] = members[rng.integers(0, members.size, (n_resamples, members.size))]
    return out


def paired_bootstrap_methods(statistic: Callable[[str, np.ndarray], float], methods: List[str],
                             n: int, n_resamples: int = 1000, level: float = 0.95, seed: int = 0,
                             strata: Optional[Sequence[int]] = None) -> Dict[str, dict]:
    """``statistic(method, idx)`` of every method on the items ``idx`` (m,) of n shared items
    (sentences), on all of them and on ``n_resamples`` resamples (:func:`resample_indices`, one
    stratum unless ``strata`` (n,)), the same resamples for every method. Returns per method
    ``{"value", "interval": [lo, hi], "minus_first": {"value", "interval"}}`` (the difference to
    the first method, absent for the first itself); nan resamples are left out."""
    if not methods:
        raise ValueError("no methods")
    idx = resample_indices(np.zeros(n, np.int64) if strata is None else strata, n_resamples, seed)
    everything = np.arange(n)
    q = [(1 - level) / 2, (1 + level) / 2]

    def interval(values):
        v = np.asarray(values, np.float64)
        v = v[~np.isnan(v)]
        return [float(x) for x in np.quantile(v, q)] if v.size else [float("nan")] * 2

    values = {m: np.array([statistic(m, i) for i in idx]) for m in methods}
    out = {}
    for m in methods:
        out[m] = {"value": float(statistic(m, everything)), "interval": interval(values[m])}
        if m != methods[0]:
            out[m]["minus_first"] = {
                "value": out[m]["value"] - float(statistic(methods[0], everything)),
                "interval": interval(values[m] - values[methods[0]])}
    return out
