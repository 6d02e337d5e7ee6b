"""``mt_report --intervals BASE:OTHER --refs-dir DIR`` (fairseq_acvi/mt_eval/run_intervals.py): the
paired bootstrap interval of two variants' BLEU, seed by seed and split by split, from the runs'
hypotheses. On the input-feeding page's kept runs it gives the intervals that page's own report
computed; on small run folders, the interval of identical decodes is exactly zero, a better
decode's is positive, and every misuse (no references, a malformed comparison, an unknown
variant, a decode whose recorded BLEU its hypotheses do not give) stops it naming the cause."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

from fairseq_acvi.cli import mt_report

IF_PAGE = REPO / "docs" / "results" / "input_feeding_multi30k_2026-11-30"
REFS = ["ein hund läuft über die wiese .", "zwei männer sitzen auf einer bank im park .",
        "eine frau liest ein buch .", "ein kind spielt mit einem ball .",
        "drei leute stehen vor einem haus ."]


def test_intervals_of_the_kept_input_feeding_runs_are_the_page_s(multi30k_refs, tmp_path):
    refs = multi30k_refs
    out = tmp_path / "report"
    assert mt_report.main([str(IF_PAGE / "outputs" / "en_de"), "--out-dir", str(out), "--no-charts",
                           "--intervals", "soft:soft-nofeed", "acvi:acvi-nofeed",
                           "--refs-dir", str(refs)]) == 0
    rows = json.loads((out / "intervals.json").read_text(encoding="utf-8"))["intervals"]
    page = json.loads((IF_PAGE / "input_feeding.json").read_text(encoding="utf-8"))["pairs"]
    expected = {(p["context"], s): v for p in page for s, v in p["paired"].items()}
    got = {(r["base_variant"], r["split"]): r for r in rows}
    assert len(expected) == 6 and set(got) == set(expected)
    for key, want in expected.items():
        assert got[key]["other_variant"] == key[0] + "-nofeed" and got[key]["seed"] == 1
        for k in ("delta", "low", "high", "p_other_better"):
            assert got[key][k] == pytest.approx(want[k], abs=1e-12), (key, k)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "BLEU of `acvi-nofeed` minus `acvi`" in report and "| 1 | -0.95 (95% CI -1.86 to -0.06)" in report


def test_the_main_table_script_pairs_the_variants_it_holds(multi30k_refs, tmp_path):
    """experiments/multi30k_main_table.sh STAGE=report with fairseq's `lstm`, `soft` and ACVI pairs
    ACVI with `soft` and `soft` with `lstm` on the three splits, and nothing else; each interval's
    delta is the difference of the two recorded BLEU (to their rounding). The `lstm` run here is the
    input-feeding page's `soft` without input feeding, kept under that name (a stand-in: what is
    checked is the pairing)."""
    kept = IF_PAGE / "outputs" / "en_de"
    stand_in = tmp_path / "kept"
    shutil.copytree(kept / "soft-nofeed_seed1", stand_in / "lstm_seed1")
    meta = json.loads((stand_in / "lstm_seed1" / "run.json").read_text(encoding="utf-8"))
    meta.update(context="lstm", tag="", arch="lstm")
    (stand_in / "lstm_seed1" / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    out = tmp_path / "table"
    env = dict(os.environ, PYTHON=sys.executable, RUNS=str(tmp_path / "runs"),
               KEPT=f"{kept} {stand_in}", VARIANTS="lstm soft acvi", SEEDS="1", STAGE="report",
               OUT=str(out), REFS_DIR=str(multi30k_refs))
    res = subprocess.run(["bash", str(REPO / "experiments" / "multi30k_main_table.sh")], env=env,
                         capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads((out / "intervals.json").read_text(encoding="utf-8"))["intervals"]
    pairs = [("soft", "acvi"), ("lstm", "soft")]
    assert sorted((r["base_variant"], r["other_variant"], r["split"]) for r in rows) == \
        sorted((a, b, s) for a, b in pairs for s in ("valid", "test2016", "test2017"))
    folders = {"soft": kept / "soft_seed1", "acvi": kept / "acvi_seed1",
               "lstm": stand_in / "lstm_seed1"}
    for r in rows:
        a, b = (json.loads((folders[v] / f"bleu_{r['split']}.json").read_text(encoding="utf-8"))
                for v in (r["base_variant"], r["other_variant"]))
        assert r["delta"] == pytest.approx(b["bleu_tok"] - a["bleu_tok"], abs=0.011)


def _runs(tmp_path, hyps_by_variant, recorded=None):
    """Run folders (seed 1, one decode of valid) with these hypotheses; refs in tmp_path/raw."""
    from fairseq_acvi.metrics.bleu import bleu_from_totals, sentence_stats
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "valid.de").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    for variant, hyps in hyps_by_variant.items():
        d = tmp_path / "runs" / f"{variant}_seed1"
        d.mkdir(parents=True)
        context, _, tag = variant.partition("-")
        (d / "run.json").write_text(json.dumps({"pair": "en_de", "context": context, "tag": tag,
                                                "seed": 1, "splits": ["valid"]}), encoding="utf-8")
        lines = [f"H-{i}\t-0.5\t{h}" for i, h in enumerate(hyps)]
        (d / "gen_valid.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        bleu = round(float(bleu_from_totals(sentence_stats(hyps, REFS).sum(0))), 2)
        bleu = (recorded or {}).get(variant, bleu)
        (d / "bleu_valid.json").write_text(json.dumps({"bleu_tok": bleu}), encoding="utf-8")
    return ["--no-charts", "--refs-dir", str(tmp_path / "raw")]


def test_identical_decodes_differ_by_exactly_zero_and_a_better_one_by_more(tmp_path):
    worse = [r.replace("ein ", "der ") for r in REFS]
    args = _runs(tmp_path, {"soft": worse, "acvi": REFS, "acvi-det": worse})
    out = tmp_path / "report"
    assert mt_report.main([str(tmp_path / "runs"), "--out-dir", str(out), *args,
                           "--intervals", "soft:acvi-det", "soft:acvi"]) == 0
    rows = {r["other_variant"]: r for r in
            json.loads((out / "intervals.json").read_text(encoding="utf-8"))["intervals"]}
    same, better = rows["acvi-det"], rows["acvi"]
    assert (same["delta"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    assert better["delta"] > 0 and better["other"] == pytest.approx(100.0) and better["base"] < 100.0
    assert better["low"] <= better["delta"] <= better["high"]


@pytest.mark.parametrize("extra, message", [
    (["--intervals", "soft:acvi"], "--intervals needs --refs-dir"),
    (["--intervals", "soft-acvi", "--refs-dir", "x"], "expected BASE:OTHER"),
    (["--intervals", "soft:pag", "--refs-dir", "x"], "no run of variant 'pag'"),
])
def test_a_misused_option_is_named(tmp_path, capsys, extra, message):
    _runs(tmp_path, {"soft": REFS, "acvi": REFS})
    assert mt_report.main([str(tmp_path / "runs"), "--out-dir", str(tmp_path / "r"), "--no-charts",
                           *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()              # nothing written


def test_a_decode_its_hypotheses_do_not_score_is_named(tmp_path, capsys):
    args = _runs(tmp_path, {"soft": REFS, "acvi": REFS}, recorded={"acvi": 37.5})
    assert mt_report.main([str(tmp_path / "runs"), "--out-dir", str(tmp_path / "r"), *args,
                           "--intervals", "soft:acvi"]) == 2
    err = capsys.readouterr().err
    assert "acvi_seed1" in err and "gen_valid.txt" in err and "records 37.50" in err
