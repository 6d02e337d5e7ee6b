"""ECE, reliability bins and AUROC (fairseq_acvi/metrics/calibration.py) on hand-computed cases."""
import math

import numpy as np
import pytest
import torch

from fairseq_acvi.metrics.calibration import (auroc, bootstrap_interval,
                                              expected_calibration_error, rank_correlation,
                                              reliability_bins, stratified_auroc)


def test_ece_by_hand():
    # 2 bins: [0, .5) holds 0.2, 0.4 (one right): conf .3, acc .5;  [.5, 1] holds .6, .8, 1.0
    # (all right): conf .8, acc 1.  ECE = 2/5 · |.5 − .3| + 3/5 · |1 − .8| = .08 + .12 = .20
    conf = [0.2, 0.4, 0.6, 0.8, 1.0]
    ok = [True, False, True, True, True]
    bins = reliability_bins(conf, ok, n_bins=2)
    assert [b.count for b in bins] == [2, 3]
    assert bins[0].confidence == pytest.approx(0.3) and bins[0].accuracy == pytest.approx(0.5)
    assert bins[1].confidence == pytest.approx(0.8) and bins[1].accuracy == pytest.approx(1.0)
    assert expected_calibration_error(conf, ok, n_bins=2) == pytest.approx(0.20)
    # torch inputs give the same
    assert expected_calibration_error(torch.tensor(conf), torch.tensor(ok), 2) == pytest.approx(0.20)


def test_ece_is_zero_when_calibrated_and_empty_bins_are_skipped():
    conf = np.array([0.25] * 4 + [0.75] * 4)
    ok = np.array([1, 0, 0, 0, 1, 1, 1, 0], bool)
    assert expected_calibration_error(conf, ok, n_bins=10) == pytest.approx(0.0)
    bins = reliability_bins(conf, ok, n_bins=10)
    assert sum(b.count for b in bins) == 8 and math.isnan(bins[0].accuracy)
    # an over-confident model: all at 0.9, half right -> ECE 0.4
    assert expected_calibration_error([0.9] * 4, [1, 0, 1, 0]) == pytest.approx(0.4)


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="differ"):
        expected_calibration_error([0.5, 0.5], [True])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_calibration_error([1.5], [True])


def test_auroc_by_hand():
    # positives score 0.8, 0.4; negatives 0.6, 0.2, 0.4:
    # pairs (pos > neg): 0.8 beats all 3; 0.4 beats 0.2, ties 0.4 (½), loses to 0.6 -> 4.5 / 6
    scores = [0.8, 0.4, 0.6, 0.2, 0.4]
    pos = [True, True, False, False, False]
    assert auroc(scores, pos) == pytest.approx(4.5 / 6)
    assert auroc([1, 2, 3], [False, False, True]) == pytest.approx(1.0)
    assert auroc([1, 2, 3], [True, False, False]) == pytest.approx(0.0)
    assert auroc([0.0] * 6, [True, False] * 3) == pytest.approx(0.5)   # a constant score
    assert math.isnan(auroc([1, 2], [True, True]))


def test_auroc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 300).astype(float)                # many ties
    pos = rng.random(300) < 0.3
    p, n = s[pos], s[~pos]
    pairwise = ((p[:, None] > n[None]).sum() + 0.5 * (p[:, None] == n[None]).sum()) / (p.size * n.size)
    assert auroc(s, pos) == pytest.approx(pairwise)


def test_rank_correlation_by_hand():
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert rank_correlation([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks x: 1 2 3, y: 1 3 2 -> centred (−1, 0, 1), (−1, 1, 0): ρ = 1 / 2
    assert rank_correlation([0.1, 0.5, 0.9], [5, 9, 7]) == pytest.approx(0.5)
    assert rank_correlation([1, 2, 3], [1e-9, 1e-3, 1.0]) == pytest.approx(1.0)   # monotone
    assert math.isnan(rank_correlation([1, 1, 1], [1, 2, 3]))


def test_stratified_auroc_removes_what_the_strata_explain():
    rng = np.random.default_rng(1)
    h = rng.integers(0, 10, 4000) / 10.0               # ten levels, one per stratum
    wrong = rng.random(4000) < h + 0.05                # errors follow h ...
    follows_h = h + 1e-3 * rng.random(4000)            # ... a score that only copies h
    assert auroc(follows_h, wrong) > 0.7
    assert stratified_auroc(follows_h, wrong, h, 10) == pytest.approx(0.5, abs=0.05)
    # a score that knows the errors keeps its AUROC within the strata
    informed = wrong + 0.1 * rng.random(4000)
    assert stratified_auroc(informed, wrong, h, 10) == pytest.approx(1.0)
    # by hand, 2 strata of equal size: AUROC 1 in the first, 0 in the second -> 0.5
    assert stratified_auroc([1, 0, 0, 1], [True, False, True, False], [0, 0, 1, 1], 2) == \
        pytest.approx(0.5)


def test_bootstrap_interval_draws_whole_groups():
    x = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    groups = [0, 0, 1, 1, 1, 1]                        # two sentences: means 0 and 1
    seen = set()

    def stat(idx):
        # a drawn group brings all its items: counts per group are multiples of 2 and 4
        seen.add(tuple(np.bincount(np.asarray(groups)[idx], minlength=2)))
        return x[idx].mean()
    lo, hi = bootstrap_interval(stat, groups, n_resamples=200)
    assert seen <= {(4, 0), (2, 4), (0, 8)} and len(seen) == 3
    assert lo == pytest.approx(0.0) and hi == pytest.approx(1.0)
    assert bootstrap_interval(lambda i: 0.5, groups, 50) == (0.5, 0.5)
