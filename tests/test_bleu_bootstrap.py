"""Corpus BLEU from sentence statistics (against sacreBLEU) and the paired bootstrap."""
import random

import numpy as np
import pytest

from fairseq_acvi.metrics.bleu import (N_STATS, bleu_from_totals, corpus_bleu, format_interval,
                                       paired_bootstrap, sentence_stats)

sacrebleu = pytest.importorskip("sacrebleu")


def _corpus(rng, n, vocab=12, noise=0.3):
    """n references and a noisy copy of each (words dropped, swapped for others, lengths vary)."""
    words = [f"w{i}" for i in range(vocab)]
    refs, hyps = [], []
    for _ in range(n):
        ref = [rng.choice(words) for _ in range(rng.randint(1, 14))]
        hyp = [w if rng.random() > noise else rng.choice(words) for w in ref if rng.random() > noise / 3]
        refs.append(" ".join(ref))
        hyps.append(" ".join(hyp))
    return hyps, refs


@pytest.mark.parametrize("seed", range(6))
def test_corpus_bleu_is_sacrebleu_tokenize_none(seed):
    rng = random.Random(seed)
    hyps, refs = _corpus(rng, rng.choice([1, 3, 40]), noise=rng.choice([0.1, 0.5, 0.9]))
    want = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score
    assert corpus_bleu(hyps, refs) == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("hyps,refs", [
    (["a b c"], ["a b c d e"]),              # no 4-gram in the hypothesis: BLEU 0 as sacreBLEU
    (["a b c d e"], ["a x c y e"]),           # no matching bigram: exp smoothing
    ([""], ["a b"]),                          # empty hypothesis
    (["a b c d", "x"], ["a b c d", "y z"]),   # shorter than the reference: brevity penalty
])
def test_edge_cases_match_sacrebleu(hyps, refs):
    want = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score
    assert corpus_bleu(hyps, refs) == pytest.approx(want, abs=1e-9)


def test_sentence_stats_columns_and_length_check():
    s = sentence_stats(["a a b"], ["a b b c"])
    # hyp len, ref len, clipped matches n=1..4, hypothesis n-grams n=1..4
    assert s.shape == (1, N_STATS) and s[0].tolist() == [3, 4, 2, 1, 0, 0, 3, 2, 1, 0]
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        sentence_stats(["a", "b"], ["a"])


def test_totals_broadcast_over_resamples():
    hyps, refs = _corpus(random.Random(0), 30)
    s = sentence_stats(hyps, refs)
    both = bleu_from_totals(np.stack([s.sum(0), s[:10].sum(0)]))
    assert both[0] == pytest.approx(corpus_bleu(hyps, refs))
    assert both[1] == pytest.approx(corpus_bleu(hyps[:10], refs[:10]))


def test_paired_bootstrap_of_a_system_against_itself_is_exactly_zero():
    hyps, refs = _corpus(random.Random(1), 50)
    s = sentence_stats(hyps, refs)
    r = paired_bootstrap(s, s, n_resamples=200)
    assert r["delta"] == r["low"] == r["high"] == 0.0 and r["p_other_better"] == 0.0


def test_paired_bootstrap_sees_a_consistent_gain_and_not_a_coin_flip():
    rng = random.Random(2)
    worse, refs = _corpus(rng, 300, noise=0.5)
    better = [r if i % 3 == 0 else w for i, (w, r) in enumerate(zip(worse, refs))]   # a third fixed
    base, other = sentence_stats(worse, refs), sentence_stats(better, refs)
    r = paired_bootstrap(base, other, n_resamples=500, seed=3)
    assert r["delta"] == pytest.approx(corpus_bleu(better, refs) - corpus_bleu(worse, refs))
    assert 0 < r["low"] < r["delta"] < r["high"] and r["p_other_better"] == 1.0
    assert r == paired_bootstrap(base, other, n_resamples=500, seed=3)            # reproducible
    # two equally good systems that differ sentence by sentence (each has every other sentence
    # from a noisy copy of the references and the rest from unrelated text): an interval across 0
    a, refs2 = _corpus(random.Random(4), 300, noise=0.5)
    b, _ = _corpus(random.Random(5), 300, noise=0.5)
    mixed = [x if i % 2 else y for i, (x, y) in enumerate(zip(a, b))]
    swapped = [y if i % 2 else x for i, (x, y) in enumerate(zip(a, b))]
    r2 = paired_bootstrap(sentence_stats(mixed, refs2), sentence_stats(swapped, refs2), seed=6)
    assert r2["low"] < 0 < r2["high"] and 0.02 < r2["p_other_better"] < 0.98
    assert format_interval(r).startswith(f"{r['delta']:+.2f} (95% CI +")


def test_paired_bootstrap_rejects_statistics_of_different_sentences():
    hyps, refs = _corpus(random.Random(7), 5)
    s = sentence_stats(hyps, refs)
    with pytest.raises(ValueError, match="same sentences"):
        paired_bootstrap(s, s[:4])
    with pytest.raises(ValueError, match="no sentences"):
        paired_bootstrap(s[:0], s[:0])
