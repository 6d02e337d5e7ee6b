"""The translation report on tiny fake runs laid out as recipes/mt_multi30k.sh leaves them."""
import json
import math

import pytest

from fairseq_acvi import mt_eval
from fairseq_acvi.cli import mt_report


def _record(kind, rec):
    return f"2026-11-25 10:00:00 | INFO | {kind} | {json.dumps(rec)}\n"


def make_run(root, variant, seed, valid_nll, bleu, kl=None, sweep=None, ablate=None, tag="",
             finished=True):
    """One run folder: run.json, a json train.log with one valid/train record per epoch (and
    fairseq's closing line when ``finished``)."""
    run = root / "en_de" / f"{variant}{'-' + tag if tag else ''}_seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"pair": "en_de", "context": variant, "tag": tag,
                                              "seed": seed, "date": "2026-11-25",
                                              "extra_train_args": ""}))
    log = ["noise that is not a record\n",
           "2026-11-25 10:00:00 | INFO | fairseq_cli.train | num. shared model params: 7,978,931 "
           "(num. trained: 7,978,931)\n",
           _record("train_inner", {"epoch": 1, "loss": "9.0"})]   # not a per-epoch record
    for ep, nll in enumerate(valid_nll, start=1):
        v = {"epoch": ep, "valid_loss": str(nll + 0.5), "valid_nll_loss": str(nll)}
        if kl is not None:
            v.update({"valid_kl": str(kl[ep - 1] * 3), "valid_kl_mean_part": str(kl[ep - 1]),
                      "valid_kl_var_part": str(kl[ep - 1] * 2), "valid_ctx_norm2": str(2 * kl[ep - 1]),
                      "valid_ctx_var": "0.01"})
        log.append(_record("valid", v))
        log.append(_record("train", {"epoch": ep, "train_wps": str(1000 + 100 * ep),
                                     "train_wall": str(60 * ep)}))
    if finished:
        log.append("2026-11-25 10:09:00 | INFO | fairseq_cli.train | done training in 540.0 seconds\n")
    (run / "train.log").write_text("".join(log))
    for name, b in bleu.items():
        (run / f"bleu_{name}.json").write_text(json.dumps(
            {"bleu_tok": b, "bleu_detok": b - 1, "n": 10,
             "sacrebleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}))
    for k, b in (sweep or {}).items():
        (run / f"bleu_test2016_K{k}.json").write_text(json.dumps({"bleu_tok": b, "bleu_detok": b}))
    for name, nll in (ablate or {}).items():
        (run / f"validate_{name}.log").write_text(
            "INFO | fairseq_cli.validate | loading\n" + _record("valid", {"valid_loss": str(nll + 1),
                                                                          "valid_nll_loss": str(nll)}))
    return run


@pytest.fixture
def fake_runs(tmp_path):
    root = tmp_path / "runs"
    for seed, (b16, b17) in {1: (30.0, 25.0), 2: (32.0, 27.0)}.items():
        make_run(root, "soft", seed, [5.0, 3.0, 3.2], {"valid": 31.0, "test2016": b16, "test2017": b17,
                                                        "valid_ablate-zero": 1.0},
                 ablate={"valid": 3.0, "valid_ablate-zero": 6.0})
    make_run(root, "acvi", 1, [6.0, 4.0], {"valid": 20.0, "test2016": 21.0, "test2017": 18.0,
                                           "valid_ablate-zero": 19.0, "valid_ablate-shuffle": 18.5},
             kl=[7.0, 2.0], sweep={0: 20.5, 10: 21.0}, tag="beta0.1",
             ablate={"valid": 4.0, "valid_ablate-zero": 4.0})
    acvi = root / "en_de" / "acvi-beta0.1_seed1"     # ablations on the mean context (K = 0)
    (acvi / "bleu_valid_K0.json").write_text(json.dumps({"bleu_tok": 19.5, "bleu_detok": 18.5}))
    (acvi / "ablate.json").write_text(json.dumps({"base": "valid_K0", "mc_samples": 0}))
    return root


def test_train_log_keeps_last_record_of_a_repeated_epoch(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_record("valid", {"epoch": 1, "valid_nll_loss": "5"})
                 + _record("valid", {"epoch": 1, "valid_nll_loss": "4"})   # resumed run
                 + _record("valid", {"epoch": 2, "valid_nll_loss": "3"}))
    recs = mt_eval.parse_train_log(str(p))
    assert recs["valid"] == {1: {"epoch": 1.0, "nll_loss": 4.0}, 2: {"epoch": 2.0, "nll_loss": 3.0}}


def test_wall_time_is_summed_over_resumed_processes():
    """fairseq's wall clock starts again in a resumed process: 60, 120 | 30, 90 -> 120 + 90."""
    epochs = [{"train_wall": w} for w in (60.0, 120.0, 30.0, 90.0)]
    assert mt_eval.training_wall(epochs) == 210.0
    assert mt_eval.training_wall(epochs[:2]) == 120.0
    assert mt_eval.training_wall([{"epoch": 1}]) is None


def test_malformed_record_names_file_and_line(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("x\n2026 | INFO | valid | {\"epoch\": 1, oops}\n")
    with pytest.raises(mt_eval.ReportError, match=r"train.log:2: malformed valid record"):
        mt_eval.parse_train_log(str(p))


def test_read_run_best_epoch_bleu_source_use_and_sweep(fake_runs):
    run = mt_eval.read_run(str(fake_runs / "en_de" / "acvi-beta0.1_seed1"))
    assert run["variant"] == "acvi-beta0.1" and run["seed"] == 1
    assert run["best_epoch"] == 2
    assert run["valid_ppl"] == pytest.approx(2 ** 4.0)          # 2^nll_loss, not 2^loss
    assert run["end"] == {"kl": 6.0, "kl_true": 6.0, "kl_mean_part": 2.0, "kl_var_part": 4.0, "ctx_norm2": 4.0,
                          "ctx_var": 0.01}
    assert run["train_wps"] == pytest.approx(1150.0)            # median of 1100, 1200
    assert run["parameters"] == 7978931                          # fairseq-train's start-up line
    assert run["source_use"]["zero"]["bleu_drop"] == pytest.approx(0.5)    # 19.5 (K = 0) - 19
    assert run["source_use"]["zero"]["ppl_ratio"] == pytest.approx(1.0)
    assert run["source_use"]["shuffle"] == {"bleu": 18.5, "bleu_drop": pytest.approx(1.0)}
    # the run's own decode (valid, at the presets' K = 10) joins the sweep of its split
    assert run["mc_sweep"] == {"test2016": {0: 20.5, 10: 21.0}, "valid": {0: 19.5, 10: 20.0}}


def test_sweep_takes_the_default_k_from_the_training_command(fake_runs):
    acvi = fake_runs / "en_de" / "acvi-beta0.1_seed1"
    meta = json.loads((acvi / "run.json").read_text())
    meta["extra_train_args"] = "--acvi-beta 0.1 --mc-samples 5 --log-interval 25"
    (acvi / "run.json").write_text(json.dumps(meta))
    run = mt_eval.read_run(str(acvi))
    assert run["mc_sweep"]["valid"] == {0: 19.5, 5: 20.0}
    assert run["mc_sweep"]["test2016"] == {0: 20.5, 5: 21.0, 10: 21.0}
    # a deterministic context has no default K: its decodes are not a sweep point
    assert mt_eval.read_run(str(fake_runs / "en_de" / "soft_seed1"))["mc_sweep"] == {}


def test_aggregate_means_and_sample_std_over_seeds(fake_runs):
    agg = mt_eval.aggregate(mt_eval.find_runs([str(fake_runs)]))
    soft = agg["en_de"]["soft"]
    assert soft["seeds"] == [1, 2]
    assert soft["test2016_bleu_tok"]["mean"] == pytest.approx(31.0)
    assert soft["test2016_bleu_tok"]["std"] == pytest.approx(math.sqrt(2.0))   # n - 1
    assert soft["valid_ppl"]["mean"] == pytest.approx(8.0)
    assert soft["ablate_zero_bleu_drop"]["mean"] == pytest.approx(30.0)
    assert soft["ablate_zero_ppl_ratio"]["mean"] == pytest.approx(8.0)         # 2^6 / 2^3
    assert soft["end_kl"] is None and soft["mc_sweep"] == {}
    assert agg["en_de"]["acvi-beta0.1"]["mc_sweep"]["test2016"][10]["mean"] == 21.0


def test_an_unfinished_run_is_listed_but_not_averaged(fake_runs, tmp_path):
    """A run without fairseq's "done training" line (stopped part-way, or still training) would
    enter the means with its best epoch so far: it stays out of them, the pairing and the
    comparison, and is named with its epoch; its curve is still drawn."""
    make_run(fake_runs, "soft", 3, [9.0, 4.0], {"valid": 12.0}, finished=False)
    runs = mt_eval.find_runs([str(fake_runs)])
    unfinished = [r for r in runs if r["seed"] == 3]
    assert [r["finished"] for r in unfinished] == [False]
    assert all(r["finished"] for r in runs if r["seed"] != 3)
    soft = mt_eval.aggregate(runs)["en_de"]["soft"]
    assert soft["seeds"] == [1, 2] and soft["valid_ppl"]["mean"] == pytest.approx(8.0)
    assert mt_eval.aggregate(unfinished) == {}
    md = mt_eval.markdown(runs, mt_eval.aggregate(runs), "t")
    assert "Not in the means (training unfinished" in md and "soft seed 3 at epoch 2 (16.00)" in md
    assert "| soft | 3 | 7,978,931 | 2 / 2 (unfinished) | 16.00 |" in md
    assert "| soft | 2 | 8.00 ± 0.00 |" in md
    # a run merged from an earlier report that did not record it counts as finished
    merged = dict(unfinished[0], dir=None, source="x")
    del merged["finished"]
    assert mt_eval.aggregate([merged])["en_de"]["soft"]["seeds"] == [3]
    out = tmp_path / "out"
    assert mt_report.main([str(fake_runs), "--out-dir", str(out)]) == 0
    assert "seed 3 at epoch 2" in (out / "report.md").read_text()


def test_a_run_started_but_without_an_epoch_is_named_so(fake_runs):
    """A run whose first epoch has not ended yet has no epoch and no perplexity to print."""
    make_run(fake_runs, "soft", 4, [], {}, finished=False)
    runs = mt_eval.find_runs([str(fake_runs)])
    md = mt_eval.markdown(runs, mt_eval.aggregate(runs), "t")
    assert "soft seed 4 before its first epoch ended" in md
    assert "at epoch –" not in md


def test_words_per_second_are_not_averaged_across_devices(fake_runs):
    """A variant's words/s come from its CPU runs only; a variant run on a GPU alone is named."""
    seed2 = fake_runs / "en_de" / "soft_seed2" / "run.json"
    meta = json.loads(seed2.read_text())
    seed2.write_text(json.dumps(dict(meta, device="cuda")))
    runs = mt_eval.find_runs([str(fake_runs)])
    soft = mt_eval.aggregate(runs)["en_de"]["soft"]
    assert soft["train_wps_device"] == "cpu" and soft["train_wps"]["n"] == 1
    only_gpu = [r for r in runs if r["variant"] == "soft" and r["seed"] == 2]
    agg = mt_eval.aggregate(only_gpu)["en_de"]["soft"]
    assert agg["train_wps_device"] == "cuda" and agg["train_wps"]["n"] == 1
    assert "(cuda) |" in mt_eval.markdown(only_gpu, {"en_de": {"soft": agg}}, "t")


def test_cli_writes_report_json_and_charts_and_compares(fake_runs, tmp_path, capsys):
    out = tmp_path / "out"
    assert mt_report.main([str(fake_runs), "--out-dir", str(out), "--compare", "soft", "acvi-beta0.1"]) == 0
    md = (out / "report.md").read_text()
    assert "| soft | 2 | 8.00 ± 0.00 | 31.00 ± 0.00 | 31.00 ± 1.41 | 26.00 ± 1.41 |" in md
    assert "| acvi-beta0.1 | 1 | 16.00 |" in md
    assert "| acvi-beta0.1 | 1 | 7,978,931 | 2 / 2 | 16.00 | 21.00 | 18.00 |" in md   # the runs table
    assert "| acvi-beta0.1 | 6.00 | 6.00 | 2.00 | 4.00 | 4.00 | 0.0100 |" in md
    assert "nrefs:1|case:mixed" in md
    data = json.loads((out / "results.json").read_text())
    assert len(data["runs"]) == 3 and set(data["aggregate"]["en_de"]) == {"soft", "acvi-beta0.1"}
    for png in ("bleu.png", "valid_curves.png", "kl_curves.png", "mc_sweep.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "acvi-beta0.1 vs soft" in printed and "test2016 BLEU 21.00 vs 31.00 (-10.00)" in printed
    assert "valid ppl 16.00 vs 8.00 (ratio 2.000)" in printed


def test_paired_bootstrap_intervals_are_tabled_run_by_run(fake_runs, tmp_path):
    acvi = fake_runs / "en_de" / "acvi-beta0.1_seed1"
    b = json.loads((acvi / "bleu_valid.json").read_text())
    b["paired"] = {"against": "gen_valid_K0.txt", "delta": 0.5, "low": -0.25, "high": 1.125,
                   "p_other_better": 0.874, "n_resamples": 1000, "level": 0.95}
    (acvi / "bleu_valid.json").write_text(json.dumps(b))
    out = tmp_path / "out"
    assert mt_report.main([str(fake_runs), "--out-dir", str(out), "--no-charts"]) == 0
    md = (out / "report.md").read_text()
    assert ("| acvi-beta0.1 | 1 | valid | valid_K0 | +0.50 | 95%: -0.25 to +1.12 | 87.4% of 1000 |"
            in md)
    assert md.count("| valid_K0 |") == 1                  # the soft runs have no paired decode
    run = json.loads((out / "results.json").read_text())["runs"]
    assert [r["bleu"]["valid"]["paired"]["delta"] for r in run if r["context"] == "acvi"] == [0.5]


def test_seed_by_seed_table_subtracts_the_tagged_soft_variant(tmp_path, capsys):
    """The runs of the recipes carry tags (soft-e20, acvi-vnorm-e20): the seed-by-seed table
    subtracts the pair's one soft variant, whatever its tag; with two soft variants it needs
    --paired-base, and a --paired-base that is no variant is named."""
    root = tmp_path / "runs"
    for seed, (s16, a16) in {1: (30.0, 31.5), 2: (32.0, 32.5)}.items():
        make_run(root, "soft", seed, [3.0], {"valid": 30.0, "test2016": s16, "test2017": 25.0}, tag="e20")
        make_run(root, "acvi", seed, [3.0], {"valid": 31.0, "test2016": a16, "test2017": 26.0},
                 tag="vnorm-e20")
    out = tmp_path / "out"
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts"]) == 0
    md = (out / "report.md").read_text()
    assert "BLEU minus `soft-e20`'s, seed by seed" in md
    assert "| acvi-vnorm-e20 | 1, 2 | 1.00 ± 0.00 | 1.00 ± 0.71 | 1.00 ± 0.00 |" in md
    make_run(root, "soft", 1, [3.0], {"valid": 29.0, "test2016": 29.0, "test2017": 24.0}, tag="e10")
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts"]) == 0
    md = (out / "report.md").read_text()
    assert "seed by seed" not in md and "several `soft` variants (soft-e10, soft-e20)" in md
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts",
                           "--paired-base", "soft-e10"]) == 0
    md = (out / "report.md").read_text()
    assert "BLEU minus `soft-e10`'s" in md and "| soft-e20 | 1 | 1.00 | 1.00 | 1.00 |" in md
    capsys.readouterr()
    assert mt_report.main([str(root), "--out-dir", str(out), "--paired-base", "soft"]) == 2
    assert "--paired-base soft: no such variant" in capsys.readouterr().err


def test_no_runs_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert mt_report.main([str(tmp_path / "empty"), "--out-dir", str(tmp_path / "o")]) == 2
    assert "no run folder" in capsys.readouterr().err


def test_run_json_missing_key_names_the_file(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"pair": "en_de", "seed": 1}))
    with pytest.raises(mt_eval.ReportError, match=r"r/run.json: missing key 'context'"):
        mt_eval.read_run(str(run))


def test_merge_counts_runs_of_an_earlier_report_and_pairs_seeds(fake_runs, tmp_path, capsys):
    """A report's results.json stands in for run folders that are gone: seed 1 comes from the
    earlier report, seed 2 from a folder; the tables, the sweep's integer K and the per-seed
    paired difference are those of both runs read from folders."""
    first = tmp_path / "first"
    assert mt_report.main([str(fake_runs), "--out-dir", str(first), "--no-charts"]) == 0
    later = tmp_path / "later"
    make_run(later, "acvi", 2, [6.0, 3.0], {"valid": 22.0, "test2016": 25.0, "test2017": 19.0},
             tag="beta0.1")
    out = tmp_path / "out"
    capsys.readouterr()
    assert mt_report.main([str(later), "--merge", str(first / "results.json"), "--out-dir", str(out),
                           "--no-charts", "--compare", "soft", "acvi-beta0.1"]) == 0
    data = json.loads((out / "results.json").read_text())
    acvi = data["aggregate"]["en_de"]["acvi-beta0.1"]
    assert acvi["seeds"] == [1, 2]
    assert acvi["test2016_bleu_tok"]["mean"] == pytest.approx(23.0)
    assert acvi["mc_sweep"]["test2016"]["10"]["n"] == 1                  # seed 1's sweep survived
    earlier = json.loads((first / "results.json").read_text())["runs"]
    soft1 = [r["run"] for r in data["runs"] if r["seed"] == 1 and r["variant"] == "soft"]
    assert soft1 == [r["run"] for r in earlier if r["seed"] == 1 and r["variant"] == "soft"]
    md = (out / "report.md").read_text()
    assert "| acvi-beta0.1 | 1, 2 | -10.00 ± 1.41 | -8.00 ± 1.41 | -7.50 ± 0.71 |" in md
    printed = capsys.readouterr().out
    # per seed: acvi 21 - soft 30 = -9, acvi 25 - soft 32 = -7  ->  -8 ± sqrt(2)
    assert "test2016 BLEU 23.00 vs 31.00 (-8.00; paired over seeds [1, 2]: -8.00 ± 1.41)" in printed


def test_merge_rejects_a_run_present_twice_and_a_foreign_file(fake_runs, tmp_path, capsys):
    first = tmp_path / "first"
    assert mt_report.main([str(fake_runs), "--out-dir", str(first), "--no-charts"]) == 0
    assert mt_report.main([str(fake_runs), "--merge", str(first / "results.json"),
                           "--out-dir", str(tmp_path / "o")]) == 2
    assert "seed 1 appears twice" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    assert mt_report.main(["--merge", str(bad), "--out-dir", str(tmp_path / "o")]) == 2
    assert "bad.json: not an mt_report results.json" in capsys.readouterr().err


def test_character_target_runs_report_chrf_and_the_replan_share(tmp_path, capsys):
    """recipes/mt_pag.sh's runs: chrF beside BLEU in every bleu_<split>.json and replan.json
    (planning attention only): the chrF table, chrF minus soft's seed by seed, the replan share."""
    root = tmp_path / "runs"
    scores = {("soft", 1): (20.0, 50.0), ("soft", 2): (21.0, 51.0),
              ("pag", 1): (20.5, 50.25), ("pag", 2): (22.0, 52.75)}
    for (variant, seed), (bleu, chrf) in scores.items():
        run = make_run(root, variant, seed, [2.0, 1.0], {"valid": bleu, "test2016": bleu})
        for split in ("valid", "test2016"):
            path = run / f"bleu_{split}.json"
            path.write_text(json.dumps(dict(json.loads(path.read_text()), chrf=chrf)))
        if variant == "pag":
            (run / "replan.json").write_text(json.dumps(
                {"best": {"epoch": 2, "replan": 0.40 + 0.02 * seed}, "last": {"epoch": 2}}))
    out = tmp_path / "out"
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts",
                           "--compare", "soft", "pag"]) == 0
    md = (out / "report.md").read_text()
    assert "| soft | 2 | 50.50 ± 0.71 | 50.50 ± 0.71 | – | – |" in md
    assert "| pag | 2 | 51.50 ± 1.77 | 51.50 ± 1.77 | – | 43.0 ± 1.4 % |" in md
    assert "chrF minus `soft`'s, seed by seed" in md
    assert "Source use" not in md                      # no ablation decodes: no empty table
    assert "| pag | 1, 2 | 1.00 ± 1.06 | 1.00 ± 1.06 | – |" in md          # +0.25, +1.75
    assert "| pag | 1, 2 | 0.75 ± 0.35 | 0.75 ± 0.35 | – |" in md          # BLEU: +0.5, +1.0
    assert "test2016 chrF 51.50 vs 50.50 (+1.00)" in capsys.readouterr().out
    data = json.loads((out / "results.json").read_text())
    assert sorted(r["replan"] for r in data["runs"] if r["context"] == "pag") == pytest.approx([0.42, 0.44])
    bad = root / "en_de" / "pag_seed1" / "replan.json"
    bad.write_text(json.dumps({"last": {}}))
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts"]) == 2
    assert "pag_seed1/replan.json: not a replan.json" in capsys.readouterr().err


def test_runs_of_a_users_corpus_report_their_own_splits(tmp_path, capsys):
    """recipes/mt_parallel.sh lists the splits it decoded in run.json: the tables have exactly those
    columns (no Multi30K test2016/test2017), in that order, and the heading is not Multi30K's."""
    root = tmp_path / "runs"
    for variant, seed, bleu in (("soft", 1, 20.0), ("soft", 2, 22.0), ("acvi", 1, 23.0), ("acvi", 2, 26.0)):
        run = make_run(root, variant, seed, [4.0, 3.0],
                       {"valid": bleu, "test": bleu - 1, "news2019": bleu - 2})
        meta = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps(dict(meta, splits=["valid", "test", "news2019"])))
    out = tmp_path / "out"
    assert mt_report.main([str(root), "--out-dir", str(out), "--no-charts", "--compare", "soft", "acvi"]) == 0
    md = (out / "report.md").read_text()
    assert md.startswith("# Translation\n") and "test2016" not in md and "test2017" not in md
    assert ("| variant | seeds | valid ppl | valid BLEU | test BLEU | news2019 BLEU | test detok | "
            "news2019 detok | train words/s |") in md
    assert "| acvi | 2 | 8.00 ± 0.00 | 24.50 ± 2.12 | 23.50 ± 2.12 | 22.50 ± 2.12 | 22.50 ± 2.12 | 21.50 ± 2.12 |" in md
    assert "| variant | seeds | valid | test | news2019 |" in md                 # seed by seed, acvi - soft
    assert "| acvi | 1, 2 | 3.50 ± 0.71 | 3.50 ± 0.71 | 3.50 ± 0.71 |" in md
    assert "| acvi | 2 | 7,978,931 | 2 / 2 | 8.00 | 25.00 | 24.00 | 120 |" in md    # runs: test, news2019
    assert "news2019 BLEU 22.50 vs 19.00 (+3.50" in capsys.readouterr().out
    agg = json.loads((out / "results.json").read_text())["aggregate"]["en_de"]
    assert agg["acvi"]["splits"] == ["valid", "test", "news2019"]


def test_run_json_with_malformed_splits_names_the_file(tmp_path):
    run = make_run(tmp_path / "runs", "soft", 1, [3.0], {"valid": 1.0})
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(meta, splits="valid test")))
    with pytest.raises(mt_eval.ReportError, match=r"run\.json: 'splits' must be a non-empty list"):
        mt_eval.read_run(str(run))


def test_multi30k_runs_keep_their_heading_and_columns(fake_runs, tmp_path):
    out = tmp_path / "out"
    assert mt_report.main([str(fake_runs), "--out-dir", str(out), "--no-charts"]) == 0
    md = (out / "report.md").read_text()
    assert md.startswith("# Multi30K translation\n")
    assert ("| variant | seeds | valid ppl | valid BLEU | test2016 BLEU | test2017 BLEU | test2016 detok "
            "| test2017 detok | train words/s |") in md


def test_a_kept_run_folder_reads_as_the_run(tmp_path):
    """``keep_outputs`` keeps the report's lines of train.log (gzipped) beside the hypotheses, so a
    later report given the kept folder finds the same run: perplexity, best epoch, parameters,
    end of training, speed and scores (runs of several machines in one table)."""
    import gzip
    run = make_run(tmp_path / "runs", "acvi", 3, [6.0, 4.0, 4.5], {"valid": 20.0, "test2016": 21.0},
                   kl=[7.0, 2.0, 1.0])
    for split in ("valid", "test2016"):
        (run / f"gen_{split}.txt").write_text("S-0\tx\nH-0\t-0.5\tein hund .\n")
    original = mt_eval.find_runs([str(tmp_path / "runs")])
    mt_eval.keep_outputs(original, str(tmp_path / "report"))
    kept_dir = tmp_path / "report" / "outputs" / "en_de" / "acvi_seed3"
    with gzip.open(kept_dir / "train.log.gz", "rt", encoding="utf-8") as f:
        kept_log = f.read()
    assert "noise that is not a record" not in kept_log and '"loss": "9.0"' not in kept_log
    assert kept_log.count("| valid |") == 3 and "done training in" in kept_log
    [kept] = mt_eval.find_runs([str(tmp_path / "report" / "outputs")])
    [orig] = original
    for key in ("pair", "variant", "seed", "valid_ppl", "best_epoch", "parameters", "finished",
                "epochs_trained", "train_wps", "train_wall_s", "end", "bleu", "epochs"):
        assert kept[key] == orig[key], key
    assert orig["valid_ppl"] == pytest.approx(2 ** 4.0) and orig["parameters"] == 7978931


def test_a_kept_folder_is_kept_again_as_it_was(tmp_path):
    """A report over an earlier report's kept folders (runs trained elsewhere) keeps them byte
    for byte, and a report written into the folder it reads leaves it alone."""
    run = make_run(tmp_path / "runs", "soft", 1, [5.0, 4.0], {"valid": 30.0})
    (run / "gen_valid.txt").write_text("S-0\tx\nH-0\t-0.5\tein hund .\n")
    first = tmp_path / "first"
    mt_eval.keep_outputs(mt_eval.find_runs([str(tmp_path / "runs")]), str(first))
    kept = first / "outputs" / "en_de" / "soft_seed1"
    before = {p.name: p.read_bytes() for p in kept.iterdir()}
    assert sorted(before) == ["bleu_valid.json", "gen_valid.txt.gz", "run.json", "train.log.gz"]
    again = tmp_path / "again"
    mt_eval.keep_outputs(mt_eval.find_runs([str(first / "outputs")]), str(again))
    assert {p.name: p.read_bytes() for p in (again / "outputs/en_de/soft_seed1").iterdir()} == before
    mt_eval.keep_outputs(mt_eval.find_runs([str(first / "outputs")]), str(first))
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before
