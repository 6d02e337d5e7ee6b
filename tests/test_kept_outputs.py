"""A result page keeps what its figures were computed from, so anyone can re-score them: the kept
test captions of the MSR-VTT captioning page (docs/results/captioning_msrvtt_2026-11-28/captions/),
scored again against the references rebuilt from the real data, give the CIDEr on the page; the
kept translations of the 3,000-pair Multi30K page give its BLEU and paired interval, and so do
seed 003's grid's (ACVI against its control); the input-feeding page, the Multi30K main table and
the normaliser comparison are made again from their kept runs; the uncertainty study's kept decodes and token arrays give its seed-1 measures; and
``mt_report --keep-outputs`` keeps exactly what re-scoring needs."""
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "data_scripts"))
import prepare_msrvtt as pm  # noqa: E402
import score_mt  # noqa: E402

from fairseq_acvi.cli import keep_runs, mt_report  # noqa: E402
from fairseq_acvi.data.text_lines import read_bytes  # noqa: E402

from fairseq_acvi.data.video_features import group_references, read_caption_file  # noqa: E402
from fairseq_acvi.generation import uncertainty_measures  # noqa: E402
from fairseq_acvi.generation.uncertainty_kept import measures_args  # noqa: E402
from fairseq_acvi.metrics.captioning import score_captions  # noqa: E402
from fairseq_acvi.mt_eval.runs import read_run  # noqa: E402

PAGE = REPO / "docs" / "results" / "captioning_msrvtt_2026-11-28"


def test_kept_captions_rescore_to_the_figure_on_their_page(shared_data, tmp_path):
    src = shared_data / "msrvtt_1k"
    if not (src / "captions.json").is_file():
        pytest.skip(f"{src} has no captions.json")
    pm.prepare(src, tmp_path / "bin", min_count=3)                 # the page's data: 800/100/100
    refs = group_references(read_caption_file(str(tmp_path / "bin" / "test.tsv")))
    lines = (PAGE / "captions" / "acvi_seed1_test.tsv").read_text(encoding="utf-8").splitlines()
    hyps = dict(line.split("\t", 1) for line in lines)
    assert sorted(hyps) == sorted(refs) and len(hyps) == 100
    cider = score_captions(hyps, refs, metrics=("CIDEr",))["CIDEr"]
    run = json.loads((PAGE / "runs" / "acvi_seed1.json").read_text(encoding="utf-8"))
    assert cider == pytest.approx(run["decodes"]["K10"]["scores"]["test"]["CIDEr"], abs=1e-9)
    page = (PAGE.parent / "captioning_msrvtt_2026-11-28.md").read_text(encoding="utf-8")
    row = re.search(r"^\| `acvi` \| K=10 \(standard decode\) \|.*$", page, re.M).group(0)
    assert f"| {cider:.3f} |" in row, (cider, row)


MT_PAGE = REPO / "docs" / "results" / "multi30k_3k_defaults_2026-11-28"


def _rescore_test2016(shared_data, tmp_path, kept, run, against):
    """Score the kept test2016 decode of ``run`` (a folder under ``kept``) again, paired against
    ``against``'s, with data_scripts/score_mt.py; its BLEU must be the one recorded beside it.
    -> score_mt's scores (with ``paired``). Skips without the Multi30K references."""
    ref = shared_data / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.de"
    if not ref.is_file():
        pytest.skip(f"{ref} is missing")
    out = tmp_path / "scores.json"
    assert score_mt.main(["--gen", str(kept / run / "gen_test2016.txt.gz"), "--ref", str(ref),
                          "--moses-detok", "de", "--json", str(out),
                          "--against", str(kept / against / "gen_test2016.txt.gz")]) == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    recorded = json.loads((kept / run / "bleu_test2016.json").read_text(encoding="utf-8"))
    assert (got["bleu_tok"], got["bleu_detok"]) == (recorded["bleu_tok"], recorded["bleu_detok"])
    return got


def test_kept_translations_rescore_to_the_figures_on_their_page(shared_data, tmp_path):
    got = _rescore_test2016(shared_data, tmp_path, MT_PAGE / "outputs" / "en_de", "acvi_seed1",
                            "soft_seed1")
    paired = json.loads((MT_PAGE / "paired_acvi_vs_soft_test2016.json").read_text(encoding="utf-8"))
    for k in ("delta", "low", "high"):
        assert got["paired"][k] == paired["paired"][k], k
    page = (MT_PAGE.parent / "multi30k_3k_defaults_2026-11-28.md").read_text(encoding="utf-8")
    row = re.search(r"^\| ACVI, the defaults \|.*$", page, re.M).group(0)
    assert f"| {got['bleu_tok']:.2f} |" in row, (got, row)


GRID_PAGE = REPO / "docs" / "results" / "attention_grid_2026-11-29"


def test_kept_grid_translations_rescore_to_the_acvi_control_interval_on_their_page(shared_data, tmp_path):
    """Seed 003's grid: ACVI's kept test2016 decode (multiplicative (i), seed 1), scored again and
    paired against its deterministic control's, gives its recorded BLEU and the page's interval."""
    p = _rescore_test2016(shared_data, tmp_path, GRID_PAGE / "outputs" / "en_de",
                          "acvi-multiplicative-i_seed1", "acvi-det-multiplicative-i_seed1")["paired"]
    sign = lambda x: f"{x:+.2f}".replace("-", "−")
    interval = f"seed 1 test2016 {sign(p['delta'])} [{sign(p['low'])}, {sign(p['high'])}]"
    page = (GRID_PAGE / "README.md").read_text(encoding="utf-8")
    listing = re.search(r"paired against the control's \(bootstrap, 95 %\): (.*)$", page, re.M)
    assert listing and listing.group(1).startswith(interval + ","), (interval, listing)


IF_PAGE = REPO / "docs" / "results" / "input_feeding_multi30k_2026-11-30"


def test_the_input_feeding_page_is_made_again_from_its_kept_outputs(multi30k_refs, tmp_path):
    """experiments/input_feeding_report.py given the page's kept outputs as its runs: every decode
    scores its recorded BLEU (the report refuses one that does not) and the tables, paired
    intervals included, are the page's."""
    refs = multi30k_refs
    spec = importlib.util.spec_from_file_location("input_feeding_report",
                                                  REPO / "experiments" / "input_feeding_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    assert report.main(["--runs", str(IF_PAGE / "outputs" / "en_de"), "--refs-dir", str(refs),
                        "--out-dir", str(tmp_path / "again")]) == 0
    got, page = (json.loads((d / "input_feeding.json").read_text(encoding="utf-8"))
                 for d in (tmp_path / "again", IF_PAGE))
    for table in (got, page):
        for pair in table["pairs"]:
            for key in ("feed", "nofeed", "control"):
                pair.get(key, {}).pop("dir", None)
    # the same up to the last bits a CPU's vector width changes in a sum (AVX2 against AVX-512)
    assert _close(got["pairs"], page["pairs"]) and len(page["pairs"]) >= 1


def _close(a, b, path="") -> bool:
    """``a == b`` for nested JSON, floats to a relative 1e-9; a difference raises naming its path."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        return all(_close(a[k], b[k], f"{path}/{k}") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{path}: {len(a)} items != {len(b)}"
        return all(_close(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12), f"{path}: {a} != {b}"
        return True
    assert a == b, f"{path}: {a!r} != {b!r}"
    return True


MAIN_PAGE = REPO / "docs" / "results" / "multi30k_2026-12-01"


def test_the_main_table_page_is_made_again_from_its_kept_outputs(multi30k_refs, tmp_path):
    """The Multi30K main table (experiments/multi30k_main_table.sh): mt_report given the page's kept
    runs, with the comparisons its intervals.json holds, writes the page's per-variant means and
    the same paired intervals (each decode scored again against its recorded BLEU on the way)."""
    page_rows = json.loads((MAIN_PAGE / "intervals.json").read_text(encoding="utf-8"))["intervals"]
    pairs = list(dict.fromkeys(f"{r['base_variant']}:{r['other_variant']}" for r in page_rows))
    out = tmp_path / "again"
    assert mt_report.main([str(MAIN_PAGE / "outputs" / "en_de"), "--out-dir", str(out), "--no-charts",
                           "--intervals", *pairs, "--refs-dir", str(multi30k_refs)]) == 0
    got_rows = json.loads((out / "intervals.json").read_text(encoding="utf-8"))["intervals"]
    # the same up to the last bits a CPU's vector width changes in a sum
    assert _close(got_rows, page_rows) and len(page_rows) >= 3
    got, page = (json.loads((d / "results.json").read_text(encoding="utf-8"))["aggregate"]
                 for d in (out, MAIN_PAGE))
    assert _close(got, page)


NORM_PAGE = REPO / "docs" / "results" / "normalizers_2026-12-01"


def test_the_normalizers_page_is_made_again_from_its_kept_runs(multi30k_refs, tmp_path):
    """The normaliser comparison (recipes/mt_normalizers.sh with KEEP): normalizers_report given the
    page's kept runs scores every test decode again (a BLEU unlike its bleu_<split>.json would be a
    note), and gives the page's means, paired intervals, attention figures and verdicts."""
    from fairseq_acvi.cli import normalizers_report
    runs = sorted(str(p) for p in (NORM_PAGE / "outputs" / "en_de").iterdir())
    out = tmp_path / "again"
    assert normalizers_report.main([*runs, "--refs-dir", str(multi30k_refs), "--out-dir", str(out),
                                    "--split", "test2016"]) == 0
    got, page = (json.loads((d / "normalizers.json").read_text(encoding="utf-8"))["mt"] for d in (out, NORM_PAGE))
    assert got["notes"] == [] and len(got["rows"]) == len(page["rows"]) >= 4

    def figures(table):
        keep = ("variant", "seeds", "bleu", "zero_fraction", "rep_per_100", "drop_attn", "drop", "paired_mean")
        rows = [{k: r.get(k) for k in keep} for r in table["rows"]]
        for r, full in zip(rows, table["rows"]):
            r["intervals"] = [[e["seed"], s, iv["delta"], iv["low"], iv["high"]]
                              for e in full.get("paired_seeds", []) for s, iv in sorted(e["bootstrap"].items())]
        return [rows, [[v["target"], v["status"]] for v in table["verdicts"]]]
    assert _close(figures(got), figures(page))


UNC_PAGE = REPO / "docs" / "results" / "uncertainty_study_2026-11-29"


def _values(node, path=""):
    """{path: value} of every point estimate ("value") in a measures.json tree (not the intervals,
    which depend on the number of resamples)."""
    out = {}
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "value":
                out[path] = v
            elif k != "interval":
                out.update(_values(v, f"{path}/{k}"))
    return out


def test_the_main_table_script_keeps_each_run_once_decoded(tmp_path):
    """experiments/multi30k_main_table.sh with KEEP: a run decoded on every split is kept in the page
    at once (its hypotheses gzipped, its scores byte for byte), and a second pass finds it there
    and leaves the recipe alone; KEEP inside the runs is refused."""
    script = str(REPO / "experiments" / "multi30k_main_table.sh")
    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "dict.en.txt").write_text("", encoding="utf-8")
    (data / "splits.json").write_text('{"valid": "valid", "test2016": "test", "test2017": "test1"}',
                                      encoding="utf-8")
    live = tmp_path / "runs" / "en_de" / "soft_seed2"
    _run_folder(live)
    meta = json.loads((live / "run.json").read_text(encoding="utf-8"))
    (live / "run.json").write_text(json.dumps(dict(meta, context="soft")), encoding="utf-8")
    (live / "checkpoint_best.pt").write_bytes(b"")
    os.utime(live / "checkpoint_best.pt", (1, 1))               # the decodes are newer: SKIP_DONE
    for split in ("test2016", "test2017"):
        shutil.copyfile(live / "gen_valid.txt", live / f"gen_{split}.txt")
        shutil.copyfile(live / "bleu_valid.json", live / f"bleu_{split}.json")
    env = dict(os.environ, PYTHON=sys.executable, RUNS=str(tmp_path / "runs"), KEEP=str(tmp_path / "page"),
               VARIANTS="soft", SEEDS="2", DATA_BIN=str(data), TRAIN="0")

    def run(**extra):
        return subprocess.run(["bash", script], capture_output=True, text=True, cwd=str(REPO),
                              env=dict(env, **extra), timeout=300)

    res = run()
    assert res.returncode == 0, res.stderr[-2000:]
    kept = tmp_path / "page" / "outputs" / "en_de" / "soft_seed2"
    assert f"[keep_runs] {kept}" in res.stdout
    for split in ("valid", "test2016", "test2017"):
        assert (kept / f"bleu_{split}.json").read_bytes() == (live / f"bleu_{split}.json").read_bytes()
        assert (kept / f"gen_{split}.txt.gz").is_file()
    res = run()
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"soft seed 2: kept in {kept}" in res.stdout and "[keep_runs]" not in res.stdout
    res = run(KEEP=str(tmp_path / "runs" / "en_de" / "page"))
    assert res.returncode == 2 and "KEEP must be outside RUNS/PAIR" in res.stderr


def test_kept_uncertainty_outputs_rescore_to_the_measures_on_their_page(shared_data, tmp_path):
    ref = shared_data / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.de"
    if not ref.is_file():
        pytest.skip(f"{ref} is missing")
    args = measures_args(str(UNC_PAGE / "outputs"), 1, ["acvi", "soft", "mcdrop"], "ensemble")
    got = uncertainty_measures.main(args + ["--references", str(ref), "--bootstrap", "2",
                                            "--out-dir", str(tmp_path)])
    page = json.loads((UNC_PAGE / "seed1" / "measures.json").read_text(encoding="utf-8"))
    got_values, page_values = _values(got), _values(page)
    assert len(page_values) > 100 and got_values.keys() == page_values.keys()
    # the same up to the last digits a CPU's vector width changes in a sum (AVX2 against AVX-512
    # moved a Spearman correlation by 4e-6); the page prints three decimals
    for k, v in page_values.items():
        assert got_values[k] == pytest.approx(v, rel=1e-5, abs=1e-5, nan_ok=True), k
    assert got["cost"] == page["cost"]


def _run_folder(folder, with_gen=True):
    """A recipe run folder: run.json, one decode's fairseq-generate output and its bleu json."""
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"pair": "en_de", "context": "acvi", "tag": "",
                                                 "seed": 2}), encoding="utf-8")
    hyps = ["ein hund läuft .", "zwei männer sitzen auf einer bank .", "eine frau liest ."]
    lines = []
    for i, h in reversed(list(enumerate(hyps))):     # fairseq writes in batch order
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{h}", f"H-{i}\t-0.5\t{h}", f"D-{i}\t-0.5\t{h}",
                  f"P-{i}\t-0.1 -0.2 -0.3"]
    if with_gen:
        (folder / "gen_valid.txt").write_text("\n".join(lines + ["Generate valid with beam=2"]) + "\n",
                                               encoding="utf-8")
    (folder / "bleu_valid.json").write_text('{"bleu_tok": 100.0}', encoding="utf-8")
    return lines


def test_mt_report_keeps_the_hypotheses_of_every_decode(tmp_path, capsys):
    lines = _run_folder(tmp_path / "runs" / "acvi_seed2")
    stats = '{"entropy": 0.5, "max_weight": 0.8}'
    (tmp_path / "runs" / "acvi_seed2" / "attention_stats_valid.json").write_text(stats, encoding="utf-8")
    ref = tmp_path / "valid.de"
    ref.write_text("ein hund läuft .\nzwei männer sitzen auf einer bank .\neine frau liest .\n",
                   encoding="utf-8")
    out = tmp_path / "report"
    argv = [str(tmp_path / "runs"), "--out-dir", str(out), "--no-charts", "--keep-outputs"]
    assert mt_report.main(argv) == 0
    kept = out / "outputs" / "en_de" / "acvi_seed2"
    assert sorted(p.name for p in kept.iterdir()) == ["attention_stats_valid.json", "bleu_valid.json",
                                                      "gen_valid.txt.gz", "run.json"]
    assert (kept / "attention_stats_valid.json").read_text(encoding="utf-8") == stats
    assert "Decoded outputs of 1 run (hypotheses" in (out / "report.md").read_text(encoding="utf-8")
    with gzip.open(kept / "gen_valid.txt.gz", "rt", encoding="utf-8") as f:
        assert f.read().splitlines() == [x for x in lines if x.startswith("H-")]
    first = (kept / "gen_valid.txt.gz").read_bytes()
    assert mt_report.main(argv) == 0                       # the same outputs, the same bytes
    assert (kept / "gen_valid.txt.gz").read_bytes() == first
    scores = tmp_path / "s.json"
    assert score_mt.main(["--gen", str(kept / "gen_valid.txt.gz"), "--ref", str(ref),
                          "--json", str(scores)]) == 0
    assert json.loads(scores.read_text(encoding="utf-8"))["bleu_tok"] == 100.0


def test_a_kept_planning_run_reports_its_replan_share(tmp_path):
    """A kept folder is a run folder: planning attention's replan.json (and the ablations'
    ablate.json) travel with the hypotheses, so a report made from the kept run alone has the
    'plan recomputed' column of the live one."""
    run = tmp_path / "runs" / "acvi_seed2"
    _run_folder(run)
    (run / "replan.json").write_text('{"best": {"replan": 0.79}, "last": {"replan": 0.8}}', encoding="utf-8")
    (run / "ablate.json").write_text('{"base": "valid_K0"}', encoding="utf-8")
    assert keep_runs.main([str(run), "--out-dir", str(tmp_path / "page")]) == 0
    kept = tmp_path / "page" / "outputs" / "en_de" / "acvi_seed2"
    assert (kept / "replan.json").read_bytes() == (run / "replan.json").read_bytes()
    assert read_run(str(kept))["replan"] == read_run(str(run))["replan"] == 0.79
    assert read_run(str(kept))["ablate_base"] == "valid_K0"


def test_keep_outputs_refuses_a_score_without_its_hypotheses(tmp_path, capsys):
    _run_folder(tmp_path / "runs" / "acvi_seed2", with_gen=False)
    argv = [str(tmp_path / "runs"), "--out-dir", str(tmp_path / "r"), "--no-charts", "--keep-outputs"]
    assert mt_report.main(argv) == 2
    err = capsys.readouterr().err
    assert "bleu_valid.json" in err and "gen_valid.txt" in err and "are missing" in err


def test_a_damaged_gzip_is_named(tmp_path):
    bad = tmp_path / "gen_valid.txt.gz"
    bad.write_bytes(b"\x1f\x8b\x08not really gzip")
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        read_bytes(bad)
    with pytest.raises(score_mt.DataError, match=re.escape(str(bad))):
        score_mt.read_hypotheses(bad, 1)


def test_the_main_table_script_reads_kept_runs_instead_of_training_them(tmp_path):
    """experiments/multi30k_main_table.sh: a run kept by an earlier report (KEPT) is neither trained
    again nor missing from the report, which keeps it byte for byte beside the new table; a run
    found nowhere, or a variant the table does not have, stops it with exit 2 naming it."""
    script = str(REPO / "experiments" / "multi30k_main_table.sh")
    kept = IF_PAGE / "outputs" / "en_de"
    nodata = tmp_path / "data-bin"                  # a training would stop at once: no splits.json
    nodata.mkdir()
    (nodata / "dict.en.txt").write_text("", encoding="utf-8")
    env = dict(os.environ, PYTHON=sys.executable, RUNS=str(tmp_path / "runs"), KEPT=str(kept),
               VARIANTS="soft", SEEDS="1", DATA_BIN=str(nodata))

    def run(**extra):
        return subprocess.run(["bash", script], capture_output=True, text=True, cwd=str(REPO),
                              env=dict(env, **extra), timeout=300)

    res = run(STAGE="train")                        # nothing to train
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"soft seed 1: kept in {kept}/soft_seed1" in res.stdout and not (tmp_path / "runs").exists()
    out = tmp_path / "table"
    res = run(STAGE="report", OUT=str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    (soft,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["runs"]
    page = json.loads((kept / "soft_seed1" / "bleu_test2016.json").read_text(encoding="utf-8"))
    assert soft["variant"] == "soft" and soft["bleu"]["test2016"]["bleu_tok"] == page["bleu_tok"]
    for name in ("gen_test2016.txt.gz", "bleu_test2017.json", "train.log.gz"):
        assert (out / "outputs" / "en_de" / "soft_seed1" / name).read_bytes() == \
            (kept / "soft_seed1" / name).read_bytes()
    res = run(STAGE="report", OUT=str(out), VARIANTS="soft acvi-det")
    assert res.returncode == 2
    assert "acvi-det seed 1: neither" in res.stderr and "holds its three decodes" in res.stderr
    res = run(VARIANTS="soft sparsemax")
    assert res.returncode == 2 and "VARIANTS: 'sparsemax' is not one of soft acvi" in res.stderr
    res = run(PAIR="de_en")
    assert res.returncode == 2 and "PAIR=de_en: en_de or en_fr" in res.stderr
    res = run(STAGE="report")
    assert res.returncode == 2 and "OUT: the report's folder is needed" in res.stderr
