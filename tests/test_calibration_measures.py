"""The uncertainty study's measures from decoded output (fairseq_acvi/generation/uncertainty_measures.py,
metrics/calibration.py ``pearson`` / ``paired_bootstrap_methods``) on hand-made inputs."""
import json

import numpy as np
import pytest
from scipy import stats as sps

from fairseq_acvi.generation import uncertainty_measures as um
from fairseq_acvi.metrics.calibration import paired_bootstrap_methods, pearson, resample_indices

REFS = ["a b c d e", "f g h i j", "k l m n o", "p q r s t", "u v w x y", "a c e g i"]
#: three exact translations (chrF = BLEU = 100), three with no character in common (0)
HYPS = ["a b c d e", "f g h i j", "k l m n o", "1 2 3", "4 5 6", "7 8 9"]
MEAN_MI = [0.1, 0.2, 0.1, 0.5, 0.6, 0.4]
LOGPROB = [-0.5, -0.4, -0.6, -2.0, -1.5, -1.0]


def _generate_file(path, hyps, mean_mi, logprob, seconds=None, order=None):
    lines = []
    for i in order or range(len(hyps)):
        lines += [f"S-{i}\tsource {i}", f"H-{i}\t{logprob[i]}\t{hyps[i]}",
                  f"P-{i}\t-0.1 -0.2", f"U-{i}\t0.1 0.2",
                  f"US-{i}\tmean_mi={mean_mi[i]} max_mi={2 * mean_mi[i]} entropy=1.0 "
                  f"logprob={logprob[i]}",
                  f"H-{i}\t-9.0\tsecond best"]              # nbest 2: only the first one counts
    if seconds:
        lines.append(f"2026-11-29 | INFO | fairseq_cli.generate | Translated {len(hyps)} "
                     f"sentences (30 tokens) in {seconds}s (3.00 sentences/s, 15.00 tokens/s)")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_pearson_and_stratified_resamples():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    x, y = np.random.default_rng(0).normal(size=(2, 50))
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert np.isnan(pearson([1, 1, 1], [1, 2, 3]))
    idx = resample_indices([0, 0, 0, 1, 1], 200, seed=0)
    assert idx.shape == (200, 5)
    assert np.isin(idx[:, :3], [0, 1, 2]).all() and np.isin(idx[:, 3:], [3, 4]).all()


def test_paired_bootstrap_of_equal_methods_differs_by_zero():
    x = np.arange(10.0)
    res = paired_bootstrap_methods(lambda m, idx: x[idx].mean() + (m == "b"), ["a", "b"], 10,
                                   n_resamples=100)
    assert res["a"]["value"] == pytest.approx(4.5) and "minus_first" not in res["a"]
    lo, hi = res["a"]["interval"]
    assert lo < 4.5 < hi
    assert res["b"]["minus_first"] == {"value": 1.0, "interval": pytest.approx([1.0, 1.0])}


def test_measures_on_hand_made_output(tmp_path):
    refs = tmp_path / "ref.txt"
    refs.write_text("\n".join(REFS) + "\n")
    a = _generate_file(tmp_path / "a.txt", HYPS, MEAN_MI, LOGPROB, seconds=2.0)
    # b: the same translations and scores, written in another order
    b = _generate_file(tmp_path / "b.txt", HYPS, MEAN_MI, LOGPROB, seconds=5.0,
                       order=[3, 0, 5, 1, 4, 2])
    # out-of-domain: lower log-probabilities everywhere, the same mutual information
    ood_a = _generate_file(tmp_path / "oa.txt", HYPS[:4], MEAN_MI[:4], [-5.0] * 4)
    ood_b = _generate_file(tmp_path / "ob.txt", HYPS[:4], [0.3] * 4, [-5.0] * 4)
    # tokens: 4 sentences of 2 tokens, confidence 0.9 everywhere, half of them right
    conf = np.full(8, 0.9)
    correct = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)
    entropy = np.where(correct, 0.5, 2.0)                      # separates them perfectly
    tok = dict(sentence=np.repeat(np.arange(4), 2), confidence=conf, correct=correct,
               entropy=entropy, mutual_information=np.zeros(8),
               members_mutual_information=np.zeros(8))
    np.savez(tmp_path / "ta.npz", **tok)
    np.savez(tmp_path / "tb.npz", **dict(tok, confidence=np.full(8, 0.5)))
    out = tmp_path / "out"
    rep = um.main(["--decoded", f"a={a}", "--decoded", f"b={b}", "--references", str(refs),
                   "--ood", f"a={ood_a}", "--ood", f"b={ood_b}", "--tokens",
                   f"a={tmp_path / 'ta.npz'}", "--tokens", f"b={tmp_path / 'tb.npz'}",
                   "--bootstrap", "200", "--out-dir", str(out)])
    # (entropy is 1.0 for every sentence: its correlations are nan, written as NaN)
    assert json.dumps(rep, sort_keys=True) == json.dumps(
        json.loads((out / "measures.json").read_text()), sort_keys=True)
    assert np.isnan(rep["quality_estimation"]["entropy"]["chrf"]["pearson"]["a"]["value"])
    qe = rep["quality_estimation"]
    assert qe["sentences"] == 6
    assert qe["quality"]["a"] == {"chrf": pytest.approx(50.0), "bleu": pytest.approx(50.0)}
    chrf = np.array([100, 100, 100, 0, 0, 0.0])
    for score, values in (("mean_mi", MEAN_MI), ("logprob", LOGPROB)):
        r = qe[score]["chrf"]
        assert r["pearson"]["a"]["value"] == pytest.approx(np.corrcoef(values, chrf)[0, 1])
        assert r["spearman"]["a"]["value"] == pytest.approx(sps.spearmanr(values, chrf)[0])
        lo, hi = r["pearson"]["a"]["interval"]
        assert -1 <= lo <= hi <= 1
        # the same translations and scores in another order: the same figures, Δ 0 [0, 0]
        assert r["pearson"]["b"]["value"] == pytest.approx(r["pearson"]["a"]["value"])
        assert r["pearson"]["b"]["minus_first"]["value"] == pytest.approx(0.0)
        assert r["pearson"]["b"]["minus_first"]["interval"] == pytest.approx([0.0, 0.0])
    assert qe["mean_mi"]["chrf"]["pearson"]["a"]["value"] < -0.9     # unsure = worse
    assert qe["logprob"]["bleu"]["spearman"]["a"]["value"] > 0.8     # surer = better
    od = rep["ood_detection"]
    assert (od["in_domain"], od["out_of_domain"]) == (6, 4)
    # −logprob: every out-of-domain sentence above every in-domain one, in every resample
    assert od["logprob"]["a"]["value"] == 1.0 and od["logprob"]["a"]["interval"] == [1.0, 1.0]
    ref_auc = np.mean([(o > i) + 0.5 * (o == i) for o in MEAN_MI[:4] for i in MEAN_MI])
    assert od["mean_mi"]["a"]["value"] == pytest.approx(ref_auc)
    ref_b = np.mean([(0.3 > i) + 0.5 * (0.3 == i) for i in MEAN_MI])
    assert od["mean_mi"]["b"]["minus_first"]["value"] == pytest.approx(ref_b - ref_auc)
    t = rep["tokens"]
    assert t["tokens"] == 8
    assert t["ece"]["a"]["value"] == pytest.approx(0.4)                # |0.5 − 0.9|
    assert t["ece"]["b"]["value"] == pytest.approx(0.0)
    assert t["ece"]["b"]["minus_first"]["value"] == pytest.approx(-0.4)
    assert t["auroc_entropy"]["a"]["value"] == 1.0
    assert t["auroc_entropy"]["a"]["interval"] == [1.0, 1.0]
    assert t["auroc_mutual_information"]["a"] is None                   # 0 everywhere
    assert rep["cost"] == {"a": {"sentences": 6, "tokens": 30, "seconds": 2.0},
                           "b": {"sentences": 6, "tokens": 30, "seconds": 5.0}}
    md = (out / "measures.md").read_text()
    assert "## Out-of-domain detection (6 in-domain, 4 out-of-domain sentences)" in md
    assert "| b | 5.0 | 1.2 | 2.50 |" in md


def test_bad_input_is_named(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("H-0\t-1.0\ta b\nP-0\t-0.5\n")
    with pytest.raises(ValueError, match=r"bad.txt: ids \[0\] lack"):
        um.read_decoded(str(bad))
    bad.write_text("H-0\t-1.0\ta b\nUS-0\tmean_mi=0.1 entropy=2\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: US- scores"):
        um.read_decoded(str(bad))
    a = _generate_file(tmp_path / "a.txt", HYPS, MEAN_MI, LOGPROB)
    short = _generate_file(tmp_path / "s.txt", HYPS[:5], MEAN_MI, LOGPROB)
    refs = tmp_path / "r.txt"
    refs.write_text("\n".join(REFS) + "\n")
    with pytest.raises(ValueError, match="other sentences"):
        um.main(["--decoded", f"a={a}", "--decoded", f"b={short}", "--references", str(refs),
                 "--out-dir", str(tmp_path / "o")])
