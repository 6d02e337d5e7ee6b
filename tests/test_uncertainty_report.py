"""The uncertainty study's page across seeds (fairseq_acvi/generation/uncertainty_seeds.py: the
numbers; uncertainty_report.py: the page and the command) on synthetic measures.json files of three
seeds: means, std and n, the direction of every measure in the verdict (ACVI better, worse, not
distinguishable), the ensemble counted once, the cost ratios, and errors that name the file (exit
status 2); and on the real output of uncertainty_measures."""
import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fairseq_acvi.generation import uncertainty_measures as um
from fairseq_acvi.generation import uncertainty_report as ur
from fairseq_acvi.generation import uncertainty_seeds as us
from test_calibration_measures import HYPS, LOGPROB, MEAN_MI, REFS, _generate_file

REPO = Path(__file__).resolve().parents[1]
METHODS = ["acvi", "soft", "mcdrop", "ensemble"]
SAME = (-0.01, 0.01)        # a difference whose interval holds 0
SECONDS = {"acvi": [20.0, 22.0, 24.0], "soft": [10.0, 10.0, 12.0], "mcdrop": [50.0, 55.0, 60.0],
           "ensemble": [30.0, 30.0, 30.0]}


def _fig(value, delta=None):
    """A measures.json figure; ``delta``: (lo, hi) of the difference to the first method."""
    f = {"value": value, "interval": [value - 0.02, value + 0.02]}
    if delta is not None:
        f["minus_first"] = {"value": (delta[0] + delta[1]) / 2, "interval": list(delta)}
    return f


def _measures(i: int, overrides: dict) -> dict:
    """Seed ``i``'s (0, 1, 2) measures.json with every figure 0.5 and every difference
    indistinguishable from 0, except ``overrides``: {(question path..., method): [(value, delta
    interval) per seed]}. Soft has no mutual information (None / nan, as uncertainty_measures
    writes it)."""
    def fig(path, m):
        if (*path, m) in overrides:
            v, d = overrides[(*path, m)][i]
            return _fig(v, None if m == "acvi" else d)
        if m == "soft" and ("mean_mi" in path or "max_mi" in path):
            return _fig(float("nan"), None if m == "acvi" else (float("nan"), float("nan")))
        return _fig(0.5, None if m == "acvi" else SAME)

    def tok(key, m):
        if m in ("soft", "acvi") and key in ("auroc_mutual_information",
                                             "auroc_members_mutual_information"):
            if m == "soft" or key == "auroc_members_mutual_information":
                return None
        f = fig(("tokens", key), m)
        if m != "acvi" and key == "auroc_members_mutual_information":
            f.pop("minus_first", None)          # the first method has no I_members
        return f

    rep = {"methods": METHODS, "token_methods": METHODS, "bootstrap_resamples": 100, "seed": 0,
           "cost": {m: {"sentences": 1000, "tokens": 12000, "seconds": SECONDS[m][i]}
                    for m in METHODS},
           "quality_estimation": {"sentences": 1000, "quality": {
               m: {"chrf": 60.0 + i, "bleu": 35.0 + i} for m in METHODS}},
           "ood_detection": {"in_domain": 1000, "out_of_domain": 461},
           "tokens": {"tokens": 12000}}
    for s in um.SCORES:
        rep["ood_detection"][s] = {m: fig(("ood_detection", s), m) for m in METHODS}
        for q in um.QUALITIES:
            for c in um.CORRELATIONS:
                rep["quality_estimation"].setdefault(s, {}).setdefault(q, {})[c] = {
                    m: fig(("quality_estimation", s, q, c), m) for m in METHODS}
    for key in ["ece"] + [f"auroc_{n}" for n in um.TOKEN_SCORES]:
        rep["tokens"][key] = {m: tok(key, m) for m in METHODS}
    return rep


#: the scenario: per (figure, method), (value, difference interval) in seeds 1, 2, 3
SCENARIO = {
    # ECE (lower is better): mcdrop's is higher in every seed -> ACVI better
    ("tokens", "ece", "acvi"): [(0.04, None), (0.05, None), (0.06, None)],
    ("tokens", "ece", "mcdrop"): [(0.07, (0.01, 0.05))] * 3,
    # the ensemble: the same model in every seed; its AUROC H[p̄] is higher -> ACVI worse
    ("tokens", "ece", "ensemble"): [(0.03, (-0.04, -0.01))] * 3,
    ("tokens", "auroc_entropy", "ensemble"): [(0.86, (0.01, 0.03))] * 3,
    # quality estimation, an uncertainty: mcdrop's correlation is less negative -> ACVI better
    ("quality_estimation", "mean_mi", "chrf", "pearson", "acvi"): [(-0.30, None)] * 3,
    ("quality_estimation", "mean_mi", "chrf", "pearson", "mcdrop"): [(-0.20, (0.05, 0.15))] * 3,
    # logprob: the ensemble's correlation is higher (more positive) -> ACVI worse
    ("quality_estimation", "logprob", "bleu", "spearman", "ensemble"): [(0.45, (0.05, 0.1))] * 3,
    # out-of-domain AUROC: mcdrop better in two seeds, worse in one -> mixed;
    # the ensemble better in one seed only -> not distinguishable
    ("ood_detection", "entropy", "mcdrop"): [(0.6, (0.02, 0.05)), (0.6, (0.01, 0.04)),
                                             (0.4, (-0.2, -0.1))],
    ("ood_detection", "entropy", "ensemble"): [(0.6, (0.01, 0.2)), (0.6, SAME), (0.6, SAME)],
}


def _write_seeds(tmp_path: Path, scenario=SCENARIO, n=3):
    paths = []
    for i in range(n):
        d = tmp_path / "study" / f"seed{i + 1}" / "measures"
        d.mkdir(parents=True)
        (d / "measures.json").write_text(json.dumps(_measures(i, scenario)))
        (d / "measures.md").write_text("# Uncertainty measures\n")
        paths.append(str(d / "measures.json"))
    return paths


def _run_json(tmp_path: Path, n=3):
    runs = tmp_path / "runs" / "en_de"
    for s in range(1, n + 1):
        for context in ("acvi", "soft"):
            d = runs / f"{context}_seed{s}"
            d.mkdir(parents=True)
            (d / "run.json").write_text(json.dumps({
                "pair": "en_de", "context": context, "tag": "", "seed": s,
                "arch": "acvi_lstm_multi30k", "max_epoch": 20, "patience": 0, "lr": 0.001,
                "max_tokens": 4000, "device": "cpu", "extra_train_args": ""}))
    return str(runs)


def _figure(report, q, key, m):
    return next(f for f in report["questions"][q]["figures"] if f["key"] == key)["methods"][m]


def test_means_std_and_the_ensemble_counted_once(tmp_path):
    paths = _write_seeds(tmp_path)
    report = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])
    assert report["base"] == "acvi" and report["methods"] == METHODS
    assert [s["label"] for s in report["seeds"]] == ["seed1", "seed2", "seed3"]
    ece = _figure(report, "tokens", "ece", "acvi")
    assert (ece["mean"], ece["std"], ece["n"]) == (pytest.approx(0.05), pytest.approx(0.01), 3)
    assert "vs_base" not in ece
    ens = _figure(report, "tokens", "ece", "ensemble")
    assert ens["mean"] == pytest.approx(0.03) and ens["n"] == 1 and ens["std"] is None
    assert ens["vs_base"]["n"] == 3 and ens["vs_base"]["better"] == 3        # lower ECE
    mc = _figure(report, "tokens", "ece", "mcdrop")
    assert mc["vs_base"]["better"] == 0 and mc["vs_base"]["worse"] == 3
    assert mc["vs_base"]["delta"]["mean"] == pytest.approx(0.03)
    # soft has no I: nan in every seed, no figure and no comparison
    soft_mi = _figure(report, "quality_estimation", "mean_mi/chrf/pearson", "soft")
    assert soft_mi["n"] == 0 and soft_mi["mean"] is None and soft_mi["vs_base"]["n"] == 0
    assert _figure(report, "tokens", "auroc_mutual_information", "soft")["n"] == 0
    assert report["quality"]["acvi"]["chrf"]["mean"] == pytest.approx(61.0)
    assert report["warnings"] == []


def test_the_verdict_follows_each_measures_direction(tmp_path):
    paths = _write_seeds(tmp_path)
    v = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])["verdict"]
    assert list(v) == ["mcdrop", "ensemble", "soft"]

    def fig(b, q, label):
        return next(f for f in v[b][q]["figures"] if f["label"] == label)

    # ECE, lower is better: mcdrop higher -> ACVI better; the ensemble lower -> ACVI worse
    assert fig("mcdrop", "tokens", "ECE")["verdict"] == "better"
    assert fig("ensemble", "tokens", "ECE")["verdict"] == "worse"
    # AUROC, higher is better: the ensemble higher -> ACVI worse
    assert fig("ensemble", "tokens", "AUROC H[p̄]")["verdict"] == "worse"
    assert v["mcdrop"]["tokens"]["verdict"] == "not distinguishable"
    assert v["ensemble"]["tokens"]["verdict"] == "worse"      # 2 of 4 figures
    assert v["soft"]["tokens"]["verdict"] == "not distinguishable"
    assert fig("soft", "tokens", "AUROC I")["verdict"] == "not compared"
    # an uncertainty's correlation, more negative is better; logprob's, more positive is better
    assert fig("mcdrop", "quality_estimation", "mean_mi ~ chrf (pearson)")["verdict"] == "better"
    assert fig("ensemble", "quality_estimation", "logprob ~ bleu (spearman)")["verdict"] == "worse"
    assert v["mcdrop"]["quality_estimation"]["verdict"] == "not distinguishable"
    assert v["ensemble"]["quality_estimation"]["verdict"] == "not distinguishable"
    assert v["soft"]["quality_estimation"]["verdict"] == "not distinguishable"
    # out of domain: two seeds one way and one the other -> mixed; one seed of three -> not
    # distinguishable
    assert fig("mcdrop", "ood_detection", "AUROC entropy") == {
        "label": "AUROC entropy", "n": 3, "base_better": 1, "base_worse": 2, "verdict": "mixed"}
    assert fig("ensemble", "ood_detection", "AUROC entropy")["verdict"] == "not distinguishable"
    assert v["mcdrop"]["ood_detection"]["verdict"] == "mixed"
    assert v["ensemble"]["ood_detection"]["verdict"] == "not distinguishable"


def test_the_same_numbers_flipped_flip_the_verdict(tmp_path):
    """The scenario with every difference's sign flipped: the verdicts turn around (nothing in
    them is fixed)."""
    flipped = {k: [(val, None if d is None else (-d[1], -d[0])) for val, d in seeds]
               for k, seeds in SCENARIO.items()}
    paths = _write_seeds(tmp_path, flipped)
    v = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])["verdict"]
    assert v["mcdrop"]["tokens"]["verdict"] == "not distinguishable"
    assert v["ensemble"]["tokens"]["verdict"] == "better"
    assert v["mcdrop"]["quality_estimation"]["verdict"] == "not distinguishable"
    assert v["ensemble"]["quality_estimation"]["verdict"] == "not distinguishable"


def test_cost_ratios(tmp_path):
    paths = _write_seeds(tmp_path)
    report = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])
    c = report["cost"]
    assert c["acvi"]["times_single_pass"]["mean"] == pytest.approx((2.0 + 2.2 + 2.0) / 3)
    assert c["mcdrop"]["times_single_pass"]["mean"] == pytest.approx((5.0 + 5.5 + 5.0) / 3)
    assert c["soft"]["times_single_pass"]["mean"] == pytest.approx(1.0)
    assert c["mcdrop"]["base_over_method"]["mean"] == pytest.approx(0.4)
    assert c["mcdrop"]["base_over_method"]["std"] == pytest.approx(0.0)
    # the ensemble: one decode (counted once), against each seed's soft and ACVI
    assert c["ensemble"]["seconds"] == {"mean": 30.0, "std": None, "n": 1, "shared": True}
    assert c["ensemble"]["base_over_method"]["mean"] == pytest.approx((20 + 22 + 24) / 90)
    v = report["verdict"]
    assert v["mcdrop"]["cost"]["verdict"] == "cheaper"
    assert v["soft"]["cost"]["verdict"] == "dearer"
    assert v["soft"]["cost"]["base_over_method"]["mean"] == pytest.approx((2.0 + 2.2 + 2.0) / 3)


def test_page_and_json_from_the_command(tmp_path):
    paths = _write_seeds(tmp_path)
    out = tmp_path / "report"
    assert ur.main(["--measures", *paths, "--runs", _run_json(tmp_path), "--mc-samples", "10",
                    "--mc-dropout", "10", "--out-dir", str(out)]) == 0
    rep = json.loads((out / "uncertainty.json").read_text())
    assert rep["verdict"]["mcdrop"]["tokens"]["verdict"] == "not distinguishable"
    assert rep["runs"]["acvi_seed2"]["arch"] == "acvi_lstm_multi30k"
    md = (out / "uncertainty.md").read_text()
    assert "| acvi | 0.050 ± 0.010 (n=3) |" in md
    assert "| ensemble | 0.030 (one model); better in 3 of 3, worse in 0 of 3 |" in md
    assert "| mcdrop | 0.070 ± 0.000 (n=3); better in 0 of 3, worse in 3 of 3 |" in md
    assert ("* **Token calibration and wrong-token detection (teacher-forced test2016)**: acvi is "
            "**not distinguishable** from mcdrop, better on 1 and worse on 0 of the 4 figures compared "
            "(better: ECE (3 better, 0 worse of 3 seeds); not distinguishable: 3; not compared (a "
            "side without the figure): AUROC I_members).") in md
    assert ("* **Out-of-domain detection (test2016 against COCO)**: acvi is **not distinguishable** "
            "from ensemble, better on 0 and worse on 0 of the 4 figures compared (not "
            "distinguishable: 4, a seed significant in AUROC entropy (0 better, 1 worse of 3 "
            "seeds)).") in md
    assert "| ensemble | 30.0 (one decode) | 2.83× (± 0.29, n=3) | 0.73× (± 0.07, n=3) |" in md
    assert ("* **Cost**: acvi is cheaper: its decode takes 0.40× (± 0.00, n=3) mcdrop's time; "
            "acvi 2.07×, mcdrop 5.17× a single K = 1 pass.") in md
    assert "| mcdrop | 55.0 ± 5.0 (n=3) | 5.17× (± 0.29, n=3) | 0.40× (± 0.00, n=3) |" in md
    assert "| acvi_seed1 | acvi_lstm_multi30k | 20 | 0 | 0.001 | 4000 | — |" in md
    assert "K = 10 context samples" in md
    assert "nan" not in md.lower()


def test_a_shared_model_that_differs_between_seeds_is_warned(tmp_path):
    scenario = dict(SCENARIO)
    scenario[("tokens", "ece", "ensemble")] = [(0.03, SAME), (0.03, SAME), (0.04, SAME)]
    paths = _write_seeds(tmp_path, scenario)
    report = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])
    assert len(report["warnings"]) == 1 and "ECE of ensemble" in report["warnings"][0]
    assert _figure(report, "tokens", "ece", "ensemble")["mean"] == pytest.approx(0.1 / 3)


def test_one_seed_without_the_ensemble(tmp_path):
    """SEEDS=1 ENSEMBLE=0: n = 1, no std, no ensemble row."""
    rep = _measures(0, SCENARIO)
    rep["methods"] = rep["token_methods"] = ["acvi", "soft", "mcdrop"]
    d = tmp_path / "seed1" / "measures"
    d.mkdir(parents=True)
    (d / "measures.json").write_text(json.dumps(rep))
    report = us.aggregate([us.read_seed(str(d / "measures.json"))])
    assert list(report["verdict"]) == ["mcdrop", "soft"]
    ece = _figure(report, "tokens", "ece", "acvi")
    assert (ece["mean"], ece["std"], ece["n"]) == (pytest.approx(0.04), None, 1)
    assert report["verdict"]["mcdrop"]["tokens"]["verdict"] == "not distinguishable"  # 1 figure of 4
    assert "| acvi | 0.040 (n=1) |" in ur.markdown(report)


def test_the_real_measures_of_two_seeds(tmp_path):
    """uncertainty_measures' own output (hand-made decodes, tests/test_calibration_measures.py)
    of two seeds is read as written."""
    refs = tmp_path / "ref.txt"
    refs.write_text("\n".join(REFS) + "\n")
    paths = []
    for seed, shift in ((1, 0.0), (2, 0.1)):
        d = tmp_path / f"seed{seed}"
        d.mkdir()
        mi = [x + shift for x in MEAN_MI]
        a = _generate_file(d / "a.txt", HYPS, mi, LOGPROB, seconds=2.0 + seed)
        b = _generate_file(d / "b.txt", HYPS, MEAN_MI, LOGPROB, seconds=5.0)
        oa = _generate_file(d / "oa.txt", HYPS[:4], mi[:4], [-5.0] * 4)
        ob = _generate_file(d / "ob.txt", HYPS[:4], [0.3] * 4, [-5.0] * 4)
        conf = np.full(8, 0.9)
        correct = np.array([1, 0, 1, 0, 1, 0, 1, 0], bool)
        tok = dict(sentence=np.repeat(np.arange(4), 2), confidence=conf, correct=correct,
                   entropy=np.where(correct, 0.5, 2.0), mutual_information=np.zeros(8),
                   members_mutual_information=np.zeros(8))
        np.savez(d / "ta.npz", **tok)
        np.savez(d / "tb.npz", **dict(tok, confidence=np.full(8, 0.5 + 0.1 * seed)))
        um.main(["--decoded", f"acvi={a}", "--decoded", f"soft={b}", "--references", str(refs),
                 "--ood", f"acvi={oa}", "--ood", f"soft={ob}", "--tokens", f"acvi={d / 'ta.npz'}",
                 "--tokens", f"soft={d / 'tb.npz'}", "--bootstrap", "50",
                 "--out-dir", str(d / "measures")])
        paths.append(str(d / "measures" / "measures.json"))
    report = us.aggregate([us.read_seed(p, i) for i, p in enumerate(paths)])
    ece = _figure(report, "tokens", "ece", "soft")
    assert ece["mean"] == pytest.approx(0.15) and ece["n"] == 2     # |0.5 − 0.6|, |0.5 − 0.7|
    assert ece["std"] == pytest.approx(math.sqrt(0.005))
    assert _figure(report, "tokens", "ece", "acvi")["mean"] == pytest.approx(0.4)
    # soft's ECE is lower than ACVI's 0.4 in every resample of both seeds: ACVI worse
    assert report["verdict"]["soft"]["tokens"]["figures"][0]["verdict"] == "worse"
    assert _figure(report, "tokens", "auroc_mutual_information", "acvi")["n"] == 0   # None
    assert report["cost"]["acvi"]["times_single_pass"]["mean"] == pytest.approx((3 / 5 + 4 / 5) / 2)
    json.dumps(report, allow_nan=False)


def _main_error(capsys, argv):
    rc = ur.main(argv)
    return rc, capsys.readouterr().err


def test_missing_or_malformed_files_are_named(tmp_path, capsys):
    paths = _write_seeds(tmp_path)
    out = str(tmp_path / "out")
    missing = str(tmp_path / "study" / "seed4" / "measures" / "measures.json")
    rc, err = _main_error(capsys, ["--measures", *paths, missing, "--out-dir", out])
    assert rc == 2 and f"error: {missing}: cannot be read" in err
    Path(paths[1]).write_text("{not json")
    rc, err = _main_error(capsys, ["--measures", *paths, "--out-dir", out])
    assert rc == 2 and f"error: {paths[1]}: not valid JSON" in err
    broken = _measures(1, SCENARIO)
    broken["tokens"]["ece"]["mcdrop"] = {"value": 0.1}
    Path(paths[1]).write_text(json.dumps(broken))
    rc, err = _main_error(capsys, ["--measures", *paths, "--out-dir", out])
    assert rc == 2 and f"error: {paths[1]}: tokens.ece.mcdrop: a figure" in err
    broken = _measures(1, SCENARIO)
    del broken["ood_detection"]["logprob"]["soft"]
    Path(paths[1]).write_text(json.dumps(broken))
    rc, err = _main_error(capsys, ["--measures", *paths, "--out-dir", out])
    assert rc == 2 and f"error: {paths[1]}: no ood_detection.logprob.soft" in err
    reordered = copy.deepcopy(_measures(1, SCENARIO))
    reordered["methods"] = reordered["token_methods"] = ["soft", "acvi", "mcdrop", "ensemble"]
    Path(paths[1]).write_text(json.dumps(reordered))
    rc, err = _main_error(capsys, ["--measures", *paths, "--out-dir", out])
    assert rc == 2 and f"error: {paths[1]}: first method 'soft'" in err
    Path(paths[1]).write_text(json.dumps(_measures(1, SCENARIO)))
    rc, err = _main_error(capsys, ["--measures", paths[0], paths[0], "--out-dir", out])
    assert rc == 2 and "seed1 given twice" in err
    runs = _run_json(tmp_path, n=2)
    rc, err = _main_error(capsys, ["--measures", *paths, "--runs", runs, "--out-dir", out])
    assert rc == 2 and os.path.join(runs, "acvi_seed3", "run.json") + ": cannot be read" in err
    assert not os.path.exists(out)


def test_the_module_exits_2_naming_the_file(tmp_path):
    paths = _write_seeds(tmp_path, n=1)
    Path(paths[0]).write_text("[]")
    proc = subprocess.run([sys.executable, "-m", "fairseq_acvi.generation.uncertainty_report",
                           "--measures", paths[0], "--out-dir", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 2, proc.stderr
    assert f"error: {paths[0]}: a JSON object expected" in proc.stderr


@pytest.mark.parametrize("calls,expected", [
    (["better", "better", "not distinguishable", "not distinguishable"], "better"),
    (["better", "not distinguishable", "not distinguishable", "not compared"], "not distinguishable"),
    (["better"] + ["not distinguishable"] * 15, "not distinguishable"),      # one of 16: no verdict
    (["worse"] * 8 + ["not distinguishable"] * 8, "worse"),
    (["better", "worse", "not distinguishable"], "mixed"),
    (["better", "better", "mixed"], "mixed"),
    (["not compared", "not compared"], "not compared"),
])
def test_a_question_needs_half_of_its_figures(calls, expected):
    """A question's verdict: at least half of the figures compared on one side and none on the
    other; one significant figure among many is no verdict (uncorrected intervals)."""
    assert us.question_verdict(calls) == expected
