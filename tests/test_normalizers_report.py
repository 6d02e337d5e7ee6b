"""The attention normalisers report (fairseq_acvi/cli/normalizers_report.py; docs/method.md §3.5)
on tiny fake run folders laid out as recipes/mt_normalizers.sh leaves them (the recipe's report
variables: tests/test_normalizers_recipe.py)."""
import gzip
import json
import os
import random
import re
import shutil

import pytest
import sacrebleu

from fairseq_acvi.cli import normalizers_report
from fairseq_acvi.cli import keep_runs
from fairseq_acvi.mt_eval.kept_outputs import keep_outputs
from fairseq_acvi.mt_eval.normalizer_table import collect, markdown
from fairseq_acvi.mt_eval.runs import find_runs

SPLITS = ("valid", "test2016", "test2017")
N_SENT = 60


def _record(kind, rec):
    return f"2026-11-25 10:00:00 | INFO | {kind} | {json.dumps(rec)}\n"


def _words(rng, n):
    vocab = [f"w{i}" for i in range(40)]
    return " ".join(rng.choice(vocab) for _ in range(n))


def references(rng):
    """{split: N_SENT reference lines} of random 8-14-word sentences."""
    return {s: [_words(rng, rng.randint(8, 14)) for _ in range(N_SENT)] for s in SPLITS}


def corrupt(refs, rate, seed):
    """Hypotheses: each reference with every word replaced at ``rate`` (a system's quality)."""
    rng = random.Random(seed)
    return [" ".join(w if rng.random() > rate else "zz" for w in r.split()) for r in refs]


def gen_text(hyps):
    """fairseq-generate's output of ``hyps``, in batch order (reversed), with its other lines."""
    lines = []
    for i, h in reversed(list(enumerate(hyps))):
        lines += [f"S-{i}\tsource {i}", f"T-{i}\t{h}", f"H-{i}\t-0.5\t{h}", f"D-{i}\t-0.5\t{h}",
                  f"P-{i}\t-0.1"]
    return "\n".join(lines + ["Generate test with beam=5"]) + "\n"


def make_run(root, norm, seed, bleu, stats, hyps=None, finished=True, pictures=False, context="soft"):
    """One run folder: run.json (the recipe's tag and training options), a json train.log,
    bleu_<split>.json {split: (tok, detok)}, attention_stats_test2016.json (when ``stats``),
    gen_<split>.txt {split: hypotheses}, pictures/."""
    run = root / "en_de" / f"{context}-{norm}_seed{seed}"
    run.mkdir(parents=True)
    extra = f"--attention-normalizer {norm} --max-epoch 2"
    (run / "run.json").write_text(json.dumps({"pair": "en_de", "context": context, "tag": norm,
                                              "seed": seed, "extra_train_args": extra}))
    log = [_record("valid", {"epoch": 1, "valid_loss": "4.5", "valid_nll_loss": "4.0"}),
           _record("train", {"epoch": 1, "train_wps": "1000", "train_wall": "60"})]
    if finished:
        log.append("2026-11-25 10:09:00 | INFO | fairseq_cli.train | done training in 540.0 seconds\n")
    (run / "train.log").write_text("".join(log))
    for split, (tok, detok) in bleu.items():
        (run / f"bleu_{split}.json").write_text(json.dumps({"bleu_tok": tok, "bleu_detok": detok,
                                                            "n": N_SENT}))
    if stats is not None:
        zero, rep, drop = stats
        (run / "attention_stats_test2016.json").write_text(json.dumps(
            {"zero_fraction": zero, "rep": rep * 3, "rep_per_100": rep, "drop_attn": drop,
             "sentences": N_SENT, "drop_attn_threshold": 0.5}))
    for split, h in (hyps or {}).items():
        (run / f"gen_{split}.txt").write_text(gen_text(h), encoding="utf-8")
    if pictures:
        (run / "pictures").mkdir()
        (run / "pictures" / "sentence_0.png").write_bytes(b"png")
    return run


def write_refs(folder, refs):
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in refs.items():
        (folder / f"{split}.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


#: corruption rate per normaliser: softmax worst, csparsemax best
RATES = {"softmax": 0.30, "sparsemax": 0.28, "entmax15": 0.40, "csparsemax": 0.15}
#: (zero fraction, REP per 100, DROP-attn) per normaliser and seed
STATS = {"softmax": [(0.0, 4.0, 10.0), (0.0, 5.0, 12.0), (0.0, 6.0, 14.0)],
         "sparsemax": [(0.6, 4.5, 11.0), (0.7, 5.5, 12.0), (0.8, 4.0, 13.0)],
         "entmax15": [(0.5, 5.0, 11.0), (0.4, 5.0, 12.0), (0.6, 5.0, 13.0)],
         "csparsemax": [(0.5, 2.0, 6.0), (0.6, 3.0, 7.0), (0.7, 1.0, 8.0)]}
#: test2016 BLEU (tokenised) per normaliser and seed; test2017 is 2 lower, detok 1 lower
BLEU16 = {"softmax": [30.0, 31.0, 32.0], "sparsemax": [30.0, 30.5, 31.0],
          "entmax15": [29.0, 30.5, 31.0], "csparsemax": [31.0, 31.0, 31.0]}


@pytest.fixture
def fake(tmp_path):
    """Four normalisers × 3 seeds with every file, sparsemax seed 4 still training."""
    rng = random.Random(0)
    refs = references(rng)
    root = tmp_path / "runs"
    for norm, rate in RATES.items():
        for seed in (1, 2, 3):
            hyps = {s: corrupt(refs[s], rate, seed * 10 + i) for i, s in enumerate(SPLITS)}
            b = BLEU16[norm][seed - 1]
            make_run(root, norm, seed, {"valid": (b + 1, b), "test2016": (b, b - 1),
                                        "test2017": (b - 2, b - 3)},
                     STATS[norm][seed - 1], hyps, pictures=(seed == 1))
    make_run(root, "sparsemax", 4, {"test2016": (99.0, 99.0)}, None, finished=False)
    return {"root": root / "en_de", "refs": write_refs(tmp_path / "raw", refs), "ref_lines": refs,
            "tmp": tmp_path}


def _table(fake, **kw):
    return collect(find_runs([str(fake["root"])]), str(fake["refs"]), "test2016", **kw)


def _row(table, norm):
    return next(r for r in table["rows"] if r["normalizer"] == norm)


def test_means_std_and_n_over_finished_seeds_softmax_first(fake):
    table = _table(fake)
    assert [r["normalizer"] for r in table["rows"]] == ["softmax", "sparsemax", "entmax15", "csparsemax"]
    soft = _row(table, "softmax")
    assert soft["n"] == 3 and soft["seeds"] == [1, 2, 3]
    assert soft["bleu"]["test2016"]["tok"]["mean"] == pytest.approx(31.0)
    assert soft["bleu"]["test2016"]["tok"]["std"] == pytest.approx(1.0)
    assert soft["bleu"]["test2017"]["detok"]["mean"] == pytest.approx(28.0)
    assert soft["bleu"]["valid"]["tok"]["mean"] == pytest.approx(32.0)
    sparse = _row(table, "sparsemax")                  # seed 4 unfinished: in no figure
    assert sparse["n"] == 3 and sparse["bleu"]["test2016"]["tok"]["mean"] == pytest.approx(30.5)
    assert [(u["variant"], u["seed"]) for u in table["unfinished"]] == [("soft-sparsemax", 4)]
    assert sparse["zero_fraction"]["mean"] == pytest.approx(0.7)
    assert sparse["zero_fraction"]["std"] == pytest.approx(0.1)
    c = _row(table, "csparsemax")
    assert c["rep_per_100"]["mean"] == pytest.approx(2.0) and c["drop_attn"]["mean"] == pytest.approx(7.0)
    assert c["rep_per_100"]["n"] == 3
    # seed by seed against softmax: the attention figures' differences, and their mean
    e1 = c["paired_seeds"][0]
    assert e1["seed"] == 1 and e1["rep_per_100"] == pytest.approx(-2.0)
    assert e1["drop_attn"] == pytest.approx(-4.0) and e1["zero_fraction"] == pytest.approx(0.5)
    assert c["paired_mean"]["test2016"]["mean"] == pytest.approx(0.0)    # 31 − (30, 31, 32)
    assert c["paired_mean"]["test2016"]["std"] == pytest.approx(1.0)
    assert c["paired_mean"]["drop_attn"]["mean"] == pytest.approx(-5.0)
    assert _row(table, "softmax")["base"] is None and c["base"] == "soft-softmax"
    json.dumps(table)                                       # JSON-able
    text = markdown(table, str(fake["tmp"] / "out"))
    assert "| softmax | soft-softmax | 1, 2, 3 (3) | 32.00 ± 1.00 | 31.00 ± 1.00 | 31.00 ± 1.00 |" in text
    assert "| csparsemax | soft-csparsemax | 3 | 60.00 ± 10.00 | 2.00 ± 1.00 | 7.00 ± 1.00 |" in text
    assert "[seed 1](../runs/en_de/soft-csparsemax_seed1/pictures/sentence_0.png)" in text
    assert "soft-sparsemax seed 4" in text


def test_verdicts_met_and_not_met(fake):
    verdicts = {v["normalizer"]: v for v in _table(fake)["verdicts"]}
    # sparsemax: 30.5 − 31 = −0.5 on both test splits: within 0.5, met
    assert verdicts["sparsemax"]["status"] == "met"
    assert verdicts["sparsemax"]["deltas"] == {"test2016": pytest.approx(-0.5),
                                               "test2017": pytest.approx(-0.5)}
    # 1.5-entmax: (−1, −0.5, −1) → −0.83: not met
    assert verdicts["entmax15"]["status"] == "not met"
    assert verdicts["entmax15"]["deltas"]["test2016"] == pytest.approx(-2.5 / 3)
    assert "-0.83 BLEU" in verdicts["entmax15"]["figures"]
    # csparsemax: REP 5 → 2 and DROP-attn 12 → 7: met, lower in all three seeds
    assert verdicts["csparsemax"]["status"] == "met"
    assert verdicts["csparsemax"]["rep_per_100"] == [pytest.approx(5.0), pytest.approx(2.0)]
    assert "both lower in 3 of 3 paired seeds" in verdicts["csparsemax"]["figures"]


def test_repetition_target_not_met_and_a_missing_normaliser_not_measured(fake):
    for seed in (1, 2, 3):          # csparsemax drops more words than softmax: not met
        p = fake["root"] / f"soft-csparsemax_seed{seed}" / "attention_stats_test2016.json"
        stats = json.loads(p.read_text())
        p.write_text(json.dumps(dict(stats, drop_attn=20.0)))
    for seed in (1, 2, 3):
        shutil.rmtree(fake["root"] / f"soft-entmax15_seed{seed}")
    verdicts = {v["normalizer"]: v for v in _table(fake)["verdicts"]}
    assert verdicts["csparsemax"]["status"] == "not met"
    assert verdicts["csparsemax"]["drop_key"] == "drop_attn"
    assert verdicts["csparsemax"]["drop"] == [pytest.approx(12.0), pytest.approx(20.0)]
    assert verdicts["entmax15"]["status"] == "not measured"
    assert verdicts["sparsemax"]["status"] == "met"


def _aligned(fake, norm, drops):
    for seed, drop in zip((1, 2, 3), drops):
        (fake["root"] / f"soft-{norm}_seed{seed}" / "aligned_drop_test2016.json").write_text(
            json.dumps({"drop": drop, "dropped_words": 1, "reference_aligned_words": 10}))


def test_the_aligners_drop_decides_the_target_when_both_rows_have_it(fake):
    # DROP-attn says csparsemax drops fewer (12 → 7, met above); the aligner says more: not met
    _aligned(fake, "softmax", [9.0, 10.0, 11.0])
    _aligned(fake, "csparsemax", [12.0, 12.0, 13.5])
    table = _table(fake)
    v = {v["normalizer"]: v for v in table["verdicts"]}["csparsemax"]
    assert v["status"] == "not met" and v["drop_key"] == "drop"
    assert v["drop"] == [pytest.approx(10.0), pytest.approx(12.5)]
    assert "DROP (aligner) 10.00 % → 12.50 %" in v["figures"]
    c = _row(table, "csparsemax")
    assert c["drop"]["mean"] == pytest.approx(12.5)
    assert [e["drop"] for e in c["paired_seeds"]] == [pytest.approx(3.0), pytest.approx(2.0),
                                                      pytest.approx(2.5)]
    assert c["paired_mean"]["drop"]["mean"] == pytest.approx(2.5)
    assert _row(table, "sparsemax")["drop"] is None           # no aligner figures: "–"
    text = markdown(table)
    assert "| 12.50 ± 0.87 |" in text and "| +3.00 |" in text
    # one csparsemax seed without the aligner's figure: the row has none, DROP-attn decides
    (fake["root"] / "soft-csparsemax_seed3" / "aligned_drop_test2016.json").unlink()
    v = {v["normalizer"]: v for v in _table(fake)["verdicts"]}["csparsemax"]
    assert v["drop_key"] == "drop_attn" and v["status"] == "met"


def _sacre(hyps, refs):
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score


def test_bootstrap_intervals_contain_the_true_difference(fake):
    table = _table(fake, n_resamples=1000)
    refs = fake["ref_lines"]
    for norm in ("sparsemax", "entmax15", "csparsemax"):
        for e in _row(table, norm)["paired_seeds"]:
            for i, split in enumerate(SPLITS[1:], start=1):
                seed = e["seed"]
                base = corrupt(refs[split], RATES["softmax"], seed * 10 + i)
                other = corrupt(refs[split], RATES[norm], seed * 10 + i)
                true = _sacre(other, refs[split]) - _sacre(base, refs[split])
                iv = e["bootstrap"][split]
                assert iv["delta"] == pytest.approx(true, abs=1e-9)
                assert iv["low"] <= true <= iv["high"] and iv["low"] < iv["high"]
                assert iv["n_resamples"] == 1000 and iv["level"] == 0.95
    # csparsemax (15 % of the words corrupted) against softmax (30 %): clearly better
    for e in _row(table, "csparsemax")["paired_seeds"]:
        assert e["bootstrap"]["test2016"]["low"] > 0 and e["bootstrap"]["test2016"]["p_other_better"] > 0.99
    # the bleu_*.json of the fake runs are not the hypotheses' BLEU: each mismatch is a note
    assert any("other references?" in n for n in table["notes"])


def test_kept_gz_hypotheses_give_the_same_intervals(fake):
    before = _row(_table(fake), "csparsemax")["paired_seeds"]
    # softmax seed 1: a gzip of the H- lines in its folder
    run = fake["root"] / "soft-softmax_seed1"
    for split in SPLITS:
        gen = run / f"gen_{split}.txt"
        with gzip.open(str(gen) + ".gz", "wt", encoding="utf-8") as f:
            f.write(gen.read_text(encoding="utf-8"))
        gen.unlink()
    # csparsemax seed 2: the copy mt_report --keep-outputs keeps in the report folder
    out = fake["tmp"] / "report"
    kept_run = [r for r in find_runs([str(fake["root"])]) if r["variant"] == "soft-csparsemax"
                and r["seed"] == 2]
    keep_outputs(kept_run, str(out))
    for split in SPLITS:
        (fake["root"] / "soft-csparsemax_seed2" / f"gen_{split}.txt").unlink()
    after = _row(_table(fake, kept=str(out)), "csparsemax")["paired_seeds"]
    for a, b in zip(before, after):
        for split in ("test2016", "test2017"):
            for k in ("delta", "low", "high", "p_other_better"):
                assert a["bootstrap"][split][k] == b["bootstrap"][split][k]
    assert after[0]["bootstrap"]["test2016"]["base_hypotheses"].endswith("gen_test2016.txt.gz")
    assert os.path.join("outputs", "en_de", "soft-csparsemax_seed2") in \
        after[1]["bootstrap"]["test2016"]["other_hypotheses"]


def test_copies_kept_in_the_report_folder_are_not_runs(fake):
    """A report folder under RUNS/<pair>: its outputs/ copies (run.json, no statistics) are
    skipped, not read as second runs of the same seeds."""
    out = fake["root"] / "report"
    keep_outputs([r for r in find_runs([str(fake["root"])]) if r["seed"] != 4], str(out))
    assert normalizers_report.main([str(fake["root"]), "--refs-dir", str(fake["refs"]),
                                    "--out-dir", str(out), "--resamples", "10"]) == 0
    res = json.loads((out / "normalizers.json").read_text(encoding="utf-8"))["mt"]
    assert [r["n"] for r in res["rows"]] == [3, 3, 3, 3] and len(res["runs"]) == 12


def test_runs_kept_by_the_recipe_give_the_same_report_on_a_new_machine(fake):
    """Every finished run kept as recipes/mt_normalizers.sh KEEP keeps it (keep_runs --pictures),
    the run folders gone: the kept runs, given as roots, make the same table, pictures linked."""
    live = fake["tmp"] / "live"
    assert normalizers_report.main([str(fake["root"]), "--refs-dir", str(fake["refs"]),
                                    "--out-dir", str(live), "--resamples", "50"]) == 0
    page = fake["tmp"] / "page"
    finished = [str(fake["root"] / f"soft-{n}_seed{s}") for n in RATES for s in (1, 2, 3)]
    assert keep_runs.main([*finished, "--out-dir", str(page), "--pictures"]) == 0
    shutil.rmtree(fake["root"])
    kept = sorted(str(p) for p in (page / "outputs" / "en_de").iterdir())
    assert len(kept) == 12
    assert normalizers_report.main([*kept, "--refs-dir", str(fake["refs"]), "--out-dir", str(page),
                                    "--resamples", "50"]) == 0
    before = json.loads((live / "normalizers.json").read_text(encoding="utf-8"))["mt"]
    after = json.loads((page / "normalizers.json").read_text(encoding="utf-8"))["mt"]
    assert [r["n"] for r in after["rows"]] == [3, 3, 3, 3]
    for b, a in zip(before["rows"], after["rows"]):
        assert (a["normalizer"], a["bleu"], a["rep_per_100"]) == (b["normalizer"], b["bleu"], b["rep_per_100"])
        for sb, sa in zip(b.get("paired_seeds", []), a.get("paired_seeds", [])):
            assert sa["bootstrap"]["test2016"]["low"] == sb["bootstrap"]["test2016"]["low"]
    assert (page / "outputs" / "en_de" / "soft-softmax_seed1" / "pictures" / "sentence_0.png").is_file()
    assert "outputs/en_de/soft-softmax_seed1/pictures" in (page / "normalizers.md").read_text(encoding="utf-8")


def _cnndm(root, runs):
    """CNN/DM run folders {name: (R-1, R-2, R-L, repeated 3-grams) or None (not scored)}."""
    for name, s in runs.items():
        (root / name / "phase1").mkdir(parents=True)
        if s is not None:
            (root / name / "scores_test.json").write_text(json.dumps(
                {"n": 100, "rouge1": s[0], "rouge2": s[1], "rougeL": s[2], "repeat_3gram": s[3],
                 "meteor_exact": 20.0}))
    return root


def test_command_writes_both_tables_with_the_cnndm_verdict(fake, capsys):
    cnndm = _cnndm(fake["tmp"] / "cnndm", {"soft-softmax-cov0": (35.0, 14.0, 32.0, 12.0),
                                           "soft-softmax-cov1": (36.0, 15.0, 33.0, 2.0),
                                           "soft-csparsemax-cov0": (35.5, 14.5, 32.5, 6.0),
                                           "soft-entmax15-cov0": None, "notes": None})
    out = fake["tmp"] / "out"
    assert normalizers_report.main([str(fake["root"]), "--refs-dir", str(fake["refs"]),
                                    "--out-dir", str(out), "--cnndm", str(cnndm),
                                    "--resamples", "200"]) == 0
    res = json.loads((out / "normalizers.json").read_text(encoding="utf-8"))
    assert res["mt"]["bootstrap"]["n_resamples"] == 200
    rows = {(r["normalizer"], r["coverage"]): r for r in res["cnndm"]["runs"]}
    assert rows[("csparsemax", 0)]["scores"]["repeat_3gram"] == 6.0
    assert rows[("entmax15", 0)]["scores"] is None and res["cnndm"]["ignored"] == ["notes"]
    (v,) = res["cnndm"]["verdicts"]
    assert v["status"] == "met" and v["change"]["relative_change"] == pytest.approx(-0.5)
    assert v["coverage"]["after"] == 2.0
    text = (out / "normalizers.md").read_text(encoding="utf-8")
    assert "| soft | csparsemax | no | 100 | 35.50 | 14.50 | 32.50 | 6.00 |" in text
    assert "| soft | entmax15 | no | not scored yet |" in text
    assert "repeated 3-grams 12.00 % (softmax) → 6.00 % (csparsemax), -50 %" in text
    assert "softmax with coverage 2.00 % (-83 %)" in text
    assert re.search(r"1\.5-entmax within 0\.5 BLEU of softmax or better\*\* \(soft\): \*\*not met\*\*", text)
    printed = capsys.readouterr().out
    assert "csparsemax lowers repeated trigrams against softmax without coverage (soft): met" in printed


def test_cnndm_repetition_not_met(fake):
    cnndm = _cnndm(fake["tmp"] / "cnndm", {"soft-softmax-cov0": (35.0, 14.0, 32.0, 5.0),
                                           "soft-csparsemax-cov0": (35.5, 14.5, 32.5, 6.0)})
    out = fake["tmp"] / "out"
    assert normalizers_report.main([str(fake["root"]), "--refs-dir", str(fake["refs"]),
                                    "--out-dir", str(out), "--cnndm", str(cnndm)]) == 0
    (v,) = json.loads((out / "normalizers.json").read_text(encoding="utf-8"))["cnndm"]["verdicts"]
    assert v["status"] == "not met" and v["coverage"] is None


def _fails(fake, capsys, *extra):
    argv = [str(fake["root"]), "--refs-dir", str(fake["refs"]), "--out-dir",
            str(fake["tmp"] / "out"), *extra]
    assert normalizers_report.main(argv) == 2
    assert not (fake["tmp"] / "out" / "normalizers.md").exists()
    return capsys.readouterr().err


def test_a_finished_run_without_statistics_is_an_error(fake, capsys):
    path = fake["root"] / "soft-entmax15_seed2" / "attention_stats_test2016.json"
    path.unlink()
    err = _fails(fake, capsys)
    assert str(path) in err and "missing" in err


def test_statistics_without_a_figure_are_an_error(fake, capsys):
    path = fake["root"] / "soft-softmax_seed3" / "attention_stats_test2016.json"
    path.write_text(json.dumps({"zero_fraction": 0.0, "drop_attn": 1.0}))
    err = _fails(fake, capsys)
    assert str(path) in err and "rep_per_100" in err


def test_missing_references_are_an_error(fake, capsys):
    (fake["refs"] / "test2017.de").unlink()
    err = _fails(fake, capsys)
    assert str(fake["refs"] / "test2017.de") in err and "references missing" in err


def test_hypotheses_not_one_per_reference_are_an_error(fake, capsys):
    gen = fake["root"] / "soft-csparsemax_seed3" / "gen_test2016.txt"
    gen.write_text(gen_text(corrupt(fake["ref_lines"]["test2016"][:-1], 0.1, 0)), encoding="utf-8")
    err = _fails(fake, capsys)
    assert str(gen) in err and f"{N_SENT - 1} hypotheses" in err and str(fake["refs"] / "test2016.de") in err


def test_missing_hypotheses_are_an_error(fake, capsys):
    gen = fake["root"] / "soft-sparsemax_seed1" / "gen_test2017.txt"
    gen.unlink()
    err = _fails(fake, capsys)
    assert str(gen) in err and "no hypotheses of test2017" in err


def test_a_malformed_cnndm_scores_file_is_an_error(fake, capsys):
    cnndm = _cnndm(fake["tmp"] / "cnndm", {"soft-softmax-cov0": (35.0, 14.0, 32.0, 5.0)})
    bad = cnndm / "soft-softmax-cov0" / "scores_test.json"
    bad.write_text('{"rouge1": 30')
    err = _fails(fake, capsys, "--cnndm", str(cnndm))
    assert str(bad) in err and "not valid JSON" in err


def test_decoding_only_rows_are_compared_but_never_stand_for_the_normaliser(fake):
    """A softmax model decoded with entmax15 (run.json decode_normalizer) gets its own row, after
    the trained entmax15 row, marked "decoding only" and paired with softmax; the entmax15 target
    still reads the trained runs, and with those gone it is not measured rather than met."""
    rng = random.Random(5)
    refs = fake["ref_lines"]
    for seed in (1, 2, 3):
        hyps = {s: corrupt(refs[s], RATES["softmax"], seed * 10 + i) for i, s in enumerate(SPLITS)}
        b = BLEU16["softmax"][seed - 1]     # the softmax model's BLEU: within 0.5 of softmax
        run = make_run(fake["root"].parent, "softmax-decoded-entmax15", seed,
                       {"valid": (b + 1, b), "test2016": (b, b - 1), "test2017": (b - 2, b - 3)},
                       (0.9, 4.0 + rng.random(), 10.0), hyps)
        meta = json.loads((run / "run.json").read_text())
        meta.update(extra_train_args="", decode_normalizer="entmax15")
        (run / "run.json").write_text(json.dumps(meta))
    table = _table(fake)
    labels = [(r["normalizer"], r["decoded_only"]) for r in table["rows"]]
    assert labels == [("softmax", False), ("sparsemax", False), ("entmax15", False),
                      ("entmax15", True), ("csparsemax", False)]
    swap = table["rows"][3]
    assert swap["variant"] == "soft-softmax-decoded-entmax15" and swap["base"] == "soft-softmax"
    assert swap["paired_mean"]["test2016"]["mean"] == pytest.approx(0.0)
    assert swap["paired_mean"]["zero_fraction"]["mean"] == pytest.approx(0.9)
    verdicts = {v["normalizer"]: v for v in table["verdicts"]}
    assert verdicts["entmax15"]["status"] == "not met"          # the trained runs, as before
    text = markdown(table)
    assert "| 1.5-entmax (decoding only) | soft-softmax-decoded-entmax15 | 1, 2, 3 (3) |" in text
    for seed in (1, 2, 3):
        shutil.rmtree(fake["root"] / f"soft-entmax15_seed{seed}")
    verdicts = {v["normalizer"]: v for v in _table(fake)["verdicts"]}
    assert verdicts["entmax15"]["status"] == "not measured"
