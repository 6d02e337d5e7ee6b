"""fairseq_acvi.metrics.bootstrap: intervals of a mean and paired differences over examples."""
import numpy as np
import pytest

from fairseq_acvi.metrics.bootstrap import mean_interval, paired_mean_bootstrap, resample_weights


def test_resample_weights_draw_n_examples_per_resample_reproducibly():
    w = resample_weights(7, n_resamples=50, seed=4)
    assert w.shape == (50, 7) and np.all(w.sum(1) == 7) and np.all(w >= 0)
    assert np.array_equal(w, resample_weights(7, n_resamples=50, seed=4))
    assert not np.array_equal(w, resample_weights(7, n_resamples=50, seed=5))
    with pytest.raises(ValueError, match="no examples"):
        resample_weights(0)


def test_mean_interval_two_examples_is_their_range():
    # resampled means of two values: a (1/4), (a+b)/2 (1/2), b (1/4): the 2.5/97.5 % points are a, b
    assert mean_interval([10.0, 30.0], n_resamples=2000) == (10.0, 30.0)
    assert mean_interval([5.0] * 9) == (5.0, 5.0)


def test_mean_interval_covers_the_mean_and_narrows_like_one_over_root_n():
    rng = np.random.default_rng(0)
    small, big = rng.normal(40, 10, 100), rng.normal(40, 10, 1600)
    lo_s, hi_s = mean_interval(small)
    lo_b, hi_b = mean_interval(big)
    assert lo_s < small.mean() < hi_s and lo_b < big.mean() < hi_b
    # the normal-theory width 2 * 1.96 * sd / sqrt(n), within 15 %; 4x the width at 1/16 the n
    for x, (lo, hi) in ((small, (lo_s, hi_s)), (big, (lo_b, hi_b))):
        assert hi - lo == pytest.approx(2 * 1.96 * x.std() / np.sqrt(x.size), rel=0.15)
    assert (hi_s - lo_s) / (hi_b - lo_b) == pytest.approx(4, rel=0.25)


def test_paired_bootstrap_against_itself_is_zero_and_a_steady_gain_is_certain():
    x = np.arange(20, dtype=float)
    r = paired_mean_bootstrap(x, x)
    assert (r["delta"], r["low"], r["high"], r["p_other_better"]) == (0, 0, 0, 0)
    r = paired_mean_bootstrap(x, x + 0.5 + 0.01 * np.sin(x))
    assert r["delta"] == pytest.approx(0.5 + 0.01 * np.sin(x).mean())
    assert r["p_other_better"] == 1.0 and 0.49 < r["low"] <= r["delta"] <= r["high"] < 0.51
    # pairing matters: a gain of 1 on noisy scores is certain paired, uncertain unpaired
    rng = np.random.default_rng(1)
    base = rng.normal(35, 15, 200)
    other = base + 1 + rng.normal(0, 0.5, 200)
    r = paired_mean_bootstrap(base, other, seed=2)
    assert r["p_other_better"] == 1.0 and r["low"] > 0.8
    lo_a, hi_a = mean_interval(base)
    lo_b, hi_b = mean_interval(other)
    assert lo_b < hi_a                            # the two unpaired intervals overlap


def test_paired_bootstrap_rejects_mismatched_or_bad_scores():
    with pytest.raises(ValueError, match="same examples"):
        paired_mean_bootstrap([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        paired_mean_bootstrap([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="one score per example"):
        mean_interval([])
