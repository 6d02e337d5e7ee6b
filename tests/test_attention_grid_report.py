"""Seed 003's Table 1 beside the attention grid (fairseq_acvi/mt_eval/seed003_grid.py,
fairseq_acvi/cli/attention_grid_report.py) on tiny run folders laid out as
recipes/mt_attention_grid.sh leaves them: run.json, a json train.log, bleu_<split>.json and the
grid seed's fairseq-generate outputs, with references in a raw/ folder."""
import gzip
import json
import os
import random
import statistics
import subprocess
import zlib

import pytest
import sacrebleu

from conftest import REPO, fast_python
from fairseq_acvi.cli import attention_grid_report, mt_report
from fairseq_acvi.mt_eval import seed003_grid as grid
from fairseq_acvi.mt_eval.seed003_grid_markdown import markdown
from fairseq_acvi.mt_eval.runs import find_runs
from fairseq_acvi.mt_eval.summary import aggregate

N_SENT = 40
WORDS = ("ein mann eine frau zwei hunde spielen im park auf der straße mit einem ball "
         "kinder laufen am strand sitzt liest ein buch").split()


def _record(kind, rec):
    return f"2026-11-25 10:00:00 | INFO | {kind} | {json.dumps(rec)}\n"


def references(seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(10)) + " ." for _ in range(N_SENT)]


REFS = {split: references(i) for i, split in enumerate(("valid", "test2016", "test2017"))}


def degrade(refs, k, seed):
    """The references with ``k`` words of every sentence replaced by an unknown word."""
    rng = random.Random(seed)
    out = []
    for r in refs:
        words = r.split()
        for i in rng.sample(range(len(words) - 1), k):
            words[i] = "xxx"
        out.append(" ".join(words))
    return out


def tok_bleu(hyps, refs):
    return sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score


def make_run(root, context, tag, seed, bleu, nll=(3.0, 2.0), hyps=None, finished=True):
    """One run folder: run.json, a json train.log (best validation nll = min(nll); fairseq's closing
    line when ``finished``), bleu_<split>.json per ``bleu`` entry ({split: bleu_tok}) with a
    gen_<split>.txt (in batch order) of the references themselves, and for each split of ``hyps``
    ({split: hypotheses}) gen_<split>.txt of those with their bleu_tok computed."""
    run = root / "en_de" / f"{context}-{tag}_seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"pair": "en_de", "context": context, "tag": tag,
                                              "seed": seed, "extra_train_args": ""}))
    log = ["2026-11-25 10:00:00 | INFO | fairseq_cli.train | num. shared model params: 1,000 "
           "(num. trained: 1,000)\n"]
    for ep, v in enumerate(nll, start=1):
        log.append(_record("valid", {"epoch": ep, "valid_loss": str(v + 0.5), "valid_nll_loss": str(v)}))
        log.append(_record("train", {"epoch": ep, "train_wps": "1000", "train_wall": str(60 * ep)}))
    if finished:
        log.append("2026-11-25 10:09:00 | INFO | fairseq_cli.train | done training in 120.0 seconds\n")
    (run / "train.log").write_text("".join(log))
    bleu = dict(bleu)
    written = {s: REFS[s] for s in bleu}          # a decode for every score (only the grid seed's are read)
    for split, hs in {**written, **(hyps or {})}.items():
        lines = []
        for i in reversed(range(len(hs))):               # fairseq writes in batch order
            lines += [f"S-{i}\tsource {i}", f"T-{i}\t{REFS[split][i]}", f"H-{i}\t-0.5\t{hs[i]}",
                      f"D-{i}\t-0.5\t{hs[i]}", f"P-{i}\t-0.1 -0.2"]
        (run / f"gen_{split}.txt").write_text("\n".join(lines) + "\nGenerate with beam=10\n")
        if split in (hyps or {}):
            bleu[split] = round(tok_bleu(hs, REFS[split]), 2)
    for split, b in bleu.items():
        (run / f"bleu_{split}.json").write_text(json.dumps({"bleu_tok": b, "bleu_detok": b - 1}))
    return run


#: words replaced per sentence in the grid seed's hypotheses, per scorer and configuration:
#: additive (iii) worse than both (the seed's claim), multiplicative (iii) better than (i) and (ii),
#: scaled-dot all three identical, key-value without (iii)
DAMAGE = {"additive": {"i": 1, "ii": 1, "iii": 4}, "multiplicative": {"i": 4, "ii": 3, "iii": 0},
          "scaled-dot": {"i": 2, "ii": 2, "iii": 2}, "key-value": {"i": 1, "ii": 2}}


def hyps_of(scorer, config):
    k = DAMAGE[scorer][config]
    same = scorer == "scaled-dot"            # the same hypotheses in the three configurations
    return {s: degrade(REFS[s], k, 0 if same else zlib.crc32(f"{scorer} {config} {s}".encode()))
            for s in ("test2016", "test2017")}


#: words replaced per sentence in ACVI's test2016 hypotheses, per seed
ACVI_DAMAGE = {1: 2, 2: 0}


def acvi_hyps(seed):
    return degrade(REFS["test2016"], ACVI_DAMAGE[seed], 100 + seed)


@pytest.fixture
def grid_runs(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "none", "grid-none", 1, {"valid": 5.0, "test2016": 4.0, "test2017": 3.0}, nll=(4.0, 3.5))
    for scorer, configs in DAMAGE.items():
        for config in configs:
            valid = 30.0 if (scorer, config) == ("additive", "i") else 20.0
            make_run(root, "soft", f"{scorer}-{config}", 1, {"valid": valid}, hyps=hyps_of(scorer, config))
    # more seeds of additive (i): valid BLEU 30 (seed 1, above), 32, 34; seed 4 unfinished
    for seed, valid in ((2, 32.0), (3, 34.0)):
        make_run(root, "soft", "additive-i", seed, {"valid": valid, "test2016": 50.0, "test2017": 40.0},
                 nll=(3.0, 1.0 + seed / 10))
    make_run(root, "soft", "additive-i", 4, {"valid": 99.0}, finished=False)
    # ACVI in the additive (i) cell, seeds 1 and 2: valid BLEU 33 and 35 (soft: 30 and 32); their
    # test2016 hypotheses: ACVI_DAMAGE words replaced per sentence (soft: seed 1 one, seed 2 none)
    for seed, valid in ((1, 33.0), (2, 35.0)):
        make_run(root, "acvi", "additive-i", seed, {"valid": valid}, hyps={"test2016": acvi_hyps(seed)})
    refs = tmp_path / "raw"
    refs.mkdir()
    for split, lines in REFS.items():
        (refs / f"{split}.de").write_text("\n".join(lines) + "\n")
    return root, refs


def _report(root, refs, **kw):
    runs = find_runs([str(root)])
    return grid.build(runs, aggregate(runs), "en_de", str(refs), **kw)


def test_the_seed_table_is_its_thirteen_rows():
    rows = grid.seed_rows()
    assert len(rows) == 13 and [r["line"] for r in rows] == list(range(123, 136))
    assert rows[0]["variant"] == "none-grid-none" and (rows[0]["wmt"], rows[0]["europarl"]) == (4.60, 7.31)
    kv3 = rows[-1]
    assert kv3["variant"] == "soft-key-value-iii" and (kv3["wmt"], kv3["europarl"]) == (8.22, 13.98)
    assert kv3["label"] == "seq2seq + key value attn on encoder and decoder + self-attention"


def test_the_seeds_ordering_and_claim_come_from_its_numbers(monkeypatch):
    claim = grid.seed_claim()
    assert claim["additive"]["wmt"]["order"]["text"] == "i > ii > iii"
    assert claim["key-value"]["wmt"]["order"]["order"] == ["ii", "i", "iii"]       # 10.59, 9.64, 8.22
    assert claim["scaled-dot"]["wmt"]["order"]["text"] == "ii > i > iii"
    assert claim["scaled-dot"]["europarl"]["order"]["text"] == "i > ii > iii"    # 17.32, 17.16
    assert claim["multiplicative"]["europarl"]["order"]["text"] == "ii > i > iii"  # 17.70, 17.68
    assert all(claim[s][t]["iii_below_both"] for s in grid.SCORERS for t in grid.SEED_SETS)
    # computed, not written down: raise the seed's key-value (iii) on WMT above its (i)
    table = tuple(r if r[0] != 135 else (135, "key-value", "iii", 9.70, 13.98) for r in grid.SEED_TABLE1)
    monkeypatch.setattr(grid, "SEED_TABLE1", table)
    changed = grid.seed_claim()["key-value"]
    assert changed["wmt"]["iii_below_both"] is False and changed["europarl"]["iii_below_both"] is True
    assert changed["wmt"]["order"]["text"] == "ii > iii > i"


def test_table_values_are_means_over_finished_seeds(grid_runs):
    root, refs = grid_runs
    rep = _report(root, refs)
    rows = {r["variant"]: r for r in rep["rows"]}
    a1 = rows["soft-additive-i"]["ours"]
    assert a1["status"] == "run" and a1["seeds"] == [1, 2, 3]        # seed 4 unfinished: not counted
    assert a1["valid"]["mean"] == pytest.approx(32.0) and a1["valid"]["std"] == pytest.approx(2.0)
    assert a1["valid"]["n"] == 3
    t16 = tok_bleu(hyps_of("additive", "i")["test2016"], REFS["test2016"])
    assert a1["test2016"]["mean"] == pytest.approx((round(t16, 2) + 100.0) / 3, abs=1e-9)
    # best validation nll of seeds 1-3: 2.0, 1.2, 1.3 -> perplexity 2^nll
    assert a1["valid_ppl"]["mean"] == pytest.approx((4 + 2 ** 1.2 + 2 ** 1.3) / 3)
    base = rows["none-grid-none"]["ours"]
    assert (base["valid"]["mean"], base["test2017"]["n"]) == (5.0, 1)
    assert base["valid_ppl"]["mean"] == pytest.approx(2 ** 3.5)
    assert rows["soft-key-value-iii"]["ours"]["status"] == "not run"
    assert rows["soft-key-value-iii"]["wmt"] == 8.22
    md = markdown(rep)
    table = md.split("\n\n")[2].splitlines()
    assert len(table) == 2 + 13
    assert "| `soft-additive-i` | 10.77 | 17.83 | 32.00 ± 2.00 (n=3) |" in md
    assert "| `none-grid-none` | 4.60 | 7.31 | 5.00 (n=1) | 4.00 (n=1) | 3.00 (n=1) | 11.31 (n=1) |" in md
    assert ("| `soft-key-value-iii` | 8.22 | 13.98 | not run | not run | not run | not run |") in md
    assert "`bleu_tok`" in md and "closest" in md and "NLTK" in md
    # every recorded test BLEU that a bootstrap reads is the hypotheses' own, but additive (i) seed
    # 2's (50, its decode the references), which the ACVI bootstrap reads
    assert [w.split(" against ")[0] for w in rep["warnings"]] == [
        "soft-additive-i seed 2 test2016: the hypotheses score 100.00"]
    assert "bleu_test2016.json records 50.00 (other references?)" in rep["warnings"][0]


def test_our_ordering_and_verdicts(grid_runs):
    root, refs = grid_runs
    rep = _report(root, refs)
    c = rep["claim"]
    assert c["additive"]["verdict"] == "reproduced"
    assert c["multiplicative"]["verdict"] == "not reproduced"          # our (iii) beats (i) and (ii)
    assert "(iii) − (i) on test2016" in c["multiplicative"]["reason"]
    assert c["multiplicative"]["ours"]["test2016"]["order"]["order"] == ["iii", "ii", "i"]
    assert c["multiplicative"]["ours"]["test2016"]["iii_below_both"] is False
    assert c["additive"]["ours"]["test2017"]["iii_below_both"] is True
    assert c["scaled-dot"]["verdict"] == "not significant"               # identical outputs
    assert c["scaled-dot"]["ours"]["test2016"]["order"]["text"] == "i = ii = iii"
    assert c["key-value"]["verdict"] == "not run"
    assert c["key-value"]["ours"]["test2016"]["order"]["missing"] == ["iii"]
    assert rep["seed_claim_holds"] == {"wmt": list(grid.SCORERS), "europarl": list(grid.SCORERS)}
    md = markdown(rep)
    assert "- multiplicative: not reproduced ((iii) significantly better:" in md
    assert "- key-value: not run (no finished run of seed 1: soft-key-value-iii)." in md
    assert "- additive: reproduced ((iii) significantly below (i) and (ii) on test2016 and test2017)." in md
    assert "for 4 of 4 scorers on WMT and 4 of 4 on Europarl" in md


def test_bootstrap_intervals_contain_the_true_difference(grid_runs):
    root, refs = grid_runs
    rep = _report(root, refs)
    for scorer, sign in (("additive", -1), ("multiplicative", +1)):
        for split in ("test2016", "test2017"):
            for base in ("i", "ii"):
                r = rep["claim"][scorer]["bootstrap"][split][f"iii-{base}"]
                true = (tok_bleu(hyps_of(scorer, "iii")[split], REFS[split])
                        - tok_bleu(hyps_of(scorer, base)[split], REFS[split]))
                assert r["delta"] == pytest.approx(true, abs=1e-6)
                assert r["low"] <= true <= r["high"]
                assert r["n_resamples"] == 1000 and r["level"] == 0.95
                assert (r["high"] < 0) if sign < 0 else (r["low"] > 0)
    same = rep["claim"]["scaled-dot"]["bootstrap"]["test2017"]["iii-ii"]
    assert (same["delta"], same["low"], same["high"]) == (0.0, 0.0, 0.0)
    # key-value has no (iii): only (ii) − (i)
    assert {k for b in rep["claim"]["key-value"]["bootstrap"].values() for k in b} == {"ii-i"}
    md = markdown(rep)
    d = rep["claim"]["additive"]["bootstrap"]["test2016"]["iii-i"]
    assert f"{d['delta']:+.2f} (95% CI {d['low']:+.2f} to {d['high']:+.2f})" in md


def test_the_decoder_past_is_compared_with_configuration_i(grid_runs):
    """(ii) − (i) per scorer and test split: the paired bootstrap of the grid seed's hypotheses
    (the true difference inside its interval), beside the seed's own (ii) − (i)."""
    root, refs = grid_runs
    rep = _report(root, refs)
    for scorer in grid.SCORERS:
        for split in ("test2016", "test2017"):
            r = rep["claim"][scorer]["bootstrap"][split]["ii-i"]
            true = (tok_bleu(hyps_of(scorer, "ii")[split], REFS[split])
                    - tok_bleu(hyps_of(scorer, "i")[split], REFS[split]))
            assert r["delta"] == pytest.approx(true, abs=1e-6) and r["low"] <= true <= r["high"]
    assert rep["claim"]["multiplicative"]["bootstrap"]["test2016"]["ii-i"]["delta"] > 0   # 3 words vs 4
    assert rep["claim"]["key-value"]["bootstrap"]["test2016"]["ii-i"]["delta"] < 0        # 2 words vs 1
    assert grid.seed_difference("additive", "i", "ii") == {"wmt": pytest.approx(9.88 - 10.77),
                                                           "europarl": pytest.approx(17.71 - 17.83)}
    md = markdown(rep)
    assert "## Does attending to the decoder's past help? (ii) − (i)" in md
    # the seed's (ii) > (i): scaled-dot and key-value on WMT; multiplicative and key-value on Europarl
    assert "The seed's Table 1 has (ii) above (i) for 2 of 4 scorers on WMT and 2 of 4 scorers on Europarl" in md
    d = rep["claim"]["key-value"]["bootstrap"]["test2017"]["ii-i"]
    assert (f"| key-value | +0.95 | +0.61 | " in md
            and f"{d['delta']:+.2f} (95% CI {d['low']:+.2f} to {d['high']:+.2f}) |" in md)


def test_acvi_is_set_beside_soft_in_its_cell(grid_runs):
    root, refs = grid_runs
    rep = _report(root, refs)
    assert len(rep["acvi"]) == 1
    a = rep["acvi"][0]
    assert (a["scorer"], a["config"], a["acvi_variant"]) == ("additive", "i", "acvi-additive-i")
    assert a["acvi"]["valid"]["mean"] == pytest.approx(34.0) and a["acvi"]["seeds"] == [1, 2]
    d = a["acvi_minus_soft"]["valid"]
    assert (d["mean"], d["std"], d["seeds"]) == (pytest.approx(3.0), pytest.approx(0.0), [1, 2])
    assert a["acvi_minus_soft"]["test2017"] is None
    md = markdown(rep)
    assert "## ACVI beside soft in the same cell" in md
    assert "| additive (i) | ACVI − soft | +3.00 ± 0.00 (seeds 1, 2) |" in md
    # each seed's paired bootstrap, from the hypotheses: test2016 only (no ACVI decode of test2017)
    boot = a["bootstrap"]
    assert set(boot) == {"test2016"} and set(boot["test2016"]) == {"1", "2"}
    soft_hyps = {1: hyps_of("additive", "i")["test2016"], 2: REFS["test2016"]}
    for seed in (1, 2):
        r = boot["test2016"][str(seed)]
        true = tok_bleu(acvi_hyps(seed), REFS["test2016"]) - tok_bleu(soft_hyps[seed], REFS["test2016"])
        assert r["delta"] == pytest.approx(true, abs=1e-6) and r["low"] <= true <= r["high"]
    assert boot["test2016"]["1"]["high"] < 0                      # two words replaced against one
    assert (boot["test2016"]["2"]["delta"], boot["test2016"]["2"]["low"]) == (0.0, 0.0)   # the same text
    one = boot["test2016"]["1"]
    assert (f"| 1 | {one['delta']:+.2f} (95% CI {one['low']:+.2f} to {one['high']:+.2f}) | – |") in md
    assert "| 2 | +0.00 (95% CI +0.00 to +0.00) | – |" in md


def test_acvi_is_set_beside_its_deterministic_control(grid_runs, tmp_path):
    """The control (run tag det-<cell>): its row, ACVI − control seed by seed and each seed's paired
    bootstrap; the recipe plans it beside ACVI with ACVI_VARIANTS and names a wrong value."""
    root, refs = grid_runs
    control_hyps = {1: degrade(REFS["test2016"], 1, 201), 2: degrade(REFS["test2016"], 3, 202)}
    for seed, valid in ((1, 32.0), (2, 36.0)):
        make_run(root, "acvi", "det-additive-i", seed, {"valid": valid}, hyps={"test2016": control_hyps[seed]})
    rep = _report(root, refs)
    a = rep["acvi"][0]
    assert a["control_variant"] == "acvi-det-additive-i" and a["control"]["seeds"] == [1, 2]
    d = a["acvi_minus_control"]["valid"]                      # 33 − 32, 35 − 36
    assert (d["mean"], d["seeds"]) == (pytest.approx(0.0), [1, 2]) and d["std"] == pytest.approx(2 ** 0.5)
    for seed in (1, 2):
        r = a["control_bootstrap"]["test2016"][str(seed)]
        true = tok_bleu(acvi_hyps(seed), REFS["test2016"]) - tok_bleu(control_hyps[seed], REFS["test2016"])
        assert r["delta"] == pytest.approx(true, abs=1e-6) and r["low"] <= true <= r["high"]
    assert a["control_bootstrap"]["test2016"]["2"]["low"] > 0          # the references against 3 words off
    md = markdown(rep)
    assert "| additive (i) | control | 34.00 ± 2.83 (n=2) |" in md
    assert f"| additive (i) | ACVI − control | +0.00 ± {2 ** 0.5:.2f} (seeds 1, 2) |" in md
    assert "| seed | ACVI − soft test2016 | ACVI − soft test2017 | ACVI − control test2016 | ACVI − control test2017 |" in md
    env = {"STAGE": "acvi", "RUNS": str(root), "DATA_BIN": str(refs.parent), "DRY_RUN": "1",
           "ACVI_VARIANTS": "acvi control", "ACVI_SEEDS": "1 2", "CONFIGS": "i ii"}   # key-value: no (iii)
    proc = _recipe(env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plans = [x for x in proc.stdout.splitlines() if x.startswith("[recipe] plan: acvi ")]
    assert plans == ["[recipe] plan: acvi additive-i '1 2' --input-feeding 0 --attention-type additive",
                     "[recipe] plan: acvi det-additive-i '1 2' --input-feeding 0 --attention-type additive "
                     "--acvi-train-samples 0 --mc-samples 0"]
    proc = _recipe({**env, "ACVI_VARIANTS": "acvi deterministic"}, tmp_path)
    assert proc.returncode == 2 and "ACVI_VARIANTS" in proc.stderr


def test_more_seeds_compare_each_configuration_with_i_seed_by_seed(grid_runs):
    root, refs = grid_runs
    assert _report(root, refs)["over_seeds"] == []          # one seed of every (ii) and (iii) cell
    # additive (ii), seeds 2 and 3: valid 31 and 37 (additive (i): 32 and 34; seed 1: 20 and 30)
    for seed, valid in ((2, 31.0), (3, 37.0)):
        make_run(root, "soft", "additive-ii", seed, {"valid": valid, "test2016": 49.0})
    rep = _report(root, refs)
    assert [(o["scorer"], o["config"]) for o in rep["over_seeds"]] == [("additive", "ii")]
    d = rep["over_seeds"][0]["minus_i"]
    assert d["valid"]["seeds"] == [1, 2, 3]
    assert d["valid"]["mean"] == pytest.approx((-10 - 1 + 3) / 3)
    assert d["valid"]["std"] == pytest.approx(statistics.stdev([-10.0, -1.0, 3.0]))
    first = [round(tok_bleu(hyps_of("additive", c)["test2016"], REFS["test2016"]), 2) for c in ("i", "ii")]
    assert d["test2016"]["seeds"] == [1, 2, 3]       # seed 1's decodes; 49 − 50 for seeds 2 and 3
    assert d["test2016"]["mean"] == pytest.approx((first[1] - first[0] - 2.0) / 3)
    md = markdown(rep)
    assert "## Over seeds: each configuration against (i) with its scorer" in md
    assert f"| additive | (ii) | −2.67 ± {statistics.stdev([-10.0, -1.0, 3.0]):.2f} (seeds 1, 2, 3) |".replace("−", "-") in md


def test_the_command_writes_grid_md_and_json(grid_runs, tmp_path, capsys):
    root, refs = grid_runs
    out = tmp_path / "report"
    argv = [str(root / "en_de"), "--refs-dir", str(refs), "--out-dir", str(out)]
    assert attention_grid_report.main(argv) == 0
    saved = json.loads((out / "grid.json").read_text(encoding="utf-8"))
    assert saved["claim"]["additive"]["verdict"] == "reproduced" and saved["grid_seed"] == 1
    assert len(saved["rows"]) == 13
    assert (out / "grid.md").read_text(encoding="utf-8").startswith("# Seed 003's Table 1 beside")
    assert "multiplicative not reproduced" in capsys.readouterr().out


def test_kept_gz_hypotheses_give_the_same_intervals(grid_runs, tmp_path):
    root, refs = grid_runs
    kept = tmp_path / "kept"
    assert mt_report.main([str(root), "--out-dir", str(kept), "--no-charts", "--keep-outputs"]) == 0
    folder = kept / "outputs" / "en_de" / "soft-additive-iii_seed1"
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("gen_")) == [
        "gen_test2016.txt.gz", "gen_test2017.txt.gz", "gen_valid.txt.gz"]
    with gzip.open(folder / "gen_test2016.txt.gz", "rt", encoding="utf-8") as f:
        assert all(line.startswith("H-") for line in f)
    from_kept = _report(kept / "outputs", refs)
    from_runs = _report(root, refs)
    for scorer in ("additive", "multiplicative", "scaled-dot"):
        assert from_kept["claim"][scorer]["bootstrap"] == from_runs["claim"][scorer]["bootstrap"]
        assert from_kept["claim"][scorer]["verdict"] == from_runs["claim"][scorer]["verdict"]
    assert from_kept["acvi"][0]["bootstrap"] == from_runs["acvi"][0]["bootstrap"] != {}
    strip = lambda ws: [w.split(" against ")[0] for w in ws]             # the references' folder differs
    assert strip(from_kept["warnings"]) == strip(from_runs["warnings"]) != []   # test_table_values_…


def test_a_missing_reference_file_is_named(grid_runs, tmp_path, capsys):
    root, refs = grid_runs
    (refs / "test2017.de").unlink()
    argv = [str(root), "--refs-dir", str(refs), "--out-dir", str(tmp_path / "o")]
    assert attention_grid_report.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{refs / 'test2017.de'}: references missing" in err
    assert not (tmp_path / "o").exists()


def test_hypotheses_that_do_not_match_the_references_are_named(grid_runs, tmp_path, capsys):
    root, refs = grid_runs
    gen = root / "en_de" / "soft-additive-ii_seed1" / "gen_test2016.txt"
    lines = gen.read_text().splitlines()
    gen.write_text("\n".join(x for x in lines if not x.startswith("H-0\t")) + "\n")
    argv = [str(root), "--refs-dir", str(refs), "--out-dir", str(tmp_path / "o")]
    assert attention_grid_report.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{gen}: hypothesis ids are not 0 … {N_SENT - 2} (missing: [0])" in err


def test_references_of_another_length_are_named(grid_runs, tmp_path, capsys):
    root, refs = grid_runs
    (refs / "test2016.de").write_text("\n".join(REFS["test2016"] + ["one more ."]) + "\n")
    argv = [str(root), "--refs-dir", str(refs), "--out-dir", str(tmp_path / "o")]
    assert attention_grid_report.main(argv) == 2
    assert (f"{N_SENT} hypotheses but {refs / 'test2016.de'} has {N_SENT + 1} references"
            in capsys.readouterr().err)


def test_a_scored_decode_without_its_hypotheses_is_named(grid_runs, tmp_path, capsys):
    root, refs = grid_runs
    run = root / "en_de" / "soft-scaled-dot-i_seed1"
    (run / "gen_test2017.txt").unlink()
    argv = [str(root), "--refs-dir", str(refs), "--out-dir", str(tmp_path / "o")]
    assert attention_grid_report.main(argv) == 2
    err = capsys.readouterr().err
    assert f"no hypotheses of test2017 (looked for {run / 'gen_test2017.txt'}, " in err


def test_no_grid_runs_is_a_clear_error(tmp_path, capsys):
    make_run(tmp_path / "runs", "soft", "e20", 1, {"valid": 20.0})
    argv = [str(tmp_path / "runs"), "--refs-dir", str(tmp_path), "--out-dir", str(tmp_path / "o")]
    assert attention_grid_report.main(argv) == 2
    err = capsys.readouterr().err
    assert "no run of the attention grid" in err and str(tmp_path / "runs") in err
    assert attention_grid_report.main([str(tmp_path / "nowhere"), "--refs-dir", str(tmp_path),
                                       "--out-dir", str(tmp_path / "o")]) == 2
    assert "nowhere: no such folder" in capsys.readouterr().err


def _recipe(env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in {"DRY_RUN", "REPORT_DIR", "DATA_BIN", "RUNS"}}
    env.update({"PYTHON": fast_python(), **env_extra})
    return subprocess.run(["bash", str(REPO / "recipes" / "mt_attention_grid.sh")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_recipes_report_stage_writes_both_reports(grid_runs, tmp_path):
    root, refs = grid_runs
    out = tmp_path / "report"
    env = {"STAGE": "report", "RUNS": str(root), "DATA_BIN": str(refs.parent), "REPORT_DIR": str(out)}
    dry = _recipe({**env, "DRY_RUN": "1"}, tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert f"[recipe] plan: report {root}/en_de -> {out} (" in dry.stdout and not out.exists()
    proc = _recipe(env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {"report.md", "results.json", "grid.md", "grid.json", "outputs"} <= {p.name for p in out.iterdir()}
    assert (out / "outputs" / "en_de" / "soft-additive-iii_seed1" / "gen_test2016.txt.gz").is_file()
    saved = json.loads((out / "grid.json").read_text(encoding="utf-8"))
    assert saved["claim"]["multiplicative"]["verdict"] == "not reproduced"
    assert saved["refs_dir"] == f"{refs.parent}/raw"


def test_a_grid_trained_in_two_parts_reports_as_one(grid_runs, tmp_path):
    """KEPT: the cells of a first part, trained and kept (its report's outputs/), count in the second
    part's report as if trained there: the same grid, perplexities and intervals; a cell
    decoded there is not trained again."""
    import shutil
    root, refs = grid_runs
    whole = _recipe({"STAGE": "report", "RUNS": str(root), "DATA_BIN": str(refs.parent),
                     "REPORT_DIR": str(tmp_path / "whole")}, tmp_path)
    assert whole.returncode == 0, whole.stderr[-3000:]
    first, second = tmp_path / "first" / "en_de", tmp_path / "second" / "en_de"
    for i, run in enumerate(sorted((root / "en_de").iterdir())):
        shutil.copytree(run, (first if i % 2 else second) / run.name)
    first_report = tmp_path / "first_report"
    proc = _recipe({"STAGE": "report", "RUNS": str(first.parent), "DATA_BIN": str(refs.parent),
                    "REPORT_DIR": str(first_report)}, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kept = first_report / "outputs" / "en_de"
    env = {"RUNS": str(second.parent), "DATA_BIN": str(refs.parent), "KEPT": str(kept)}
    proc = _recipe({**env, "STAGE": "report", "REPORT_DIR": str(tmp_path / "both")}, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = json.loads((tmp_path / "whole" / "grid.json").read_text(encoding="utf-8"))
    got = json.loads((tmp_path / "both" / "grid.json").read_text(encoding="utf-8"))
    assert got["rows"] == want["rows"] and got["claim"] == want["claim"]
    assert any(r["ours"]["valid_ppl"] for r in got["rows"] if r["variant"] == "soft-additive-i")
    # a cell kept from the first part is not trained again (the trained ones are all kept:
    # nothing is trained); a KEPT that is not a folder is refused naming it
    grid_cells = {"STAGE": "grid", "SCORERS": "additive multiplicative", "CONFIGS": "i ii iii"}
    both_kept = f"{kept} {tmp_path / 'both' / 'outputs' / 'en_de'}"
    proc = _recipe({**env, **grid_cells, "KEPT": both_kept}, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("[recipe] kept: ") == 7 and "[recipe] done: STAGE=grid" in proc.stdout
    proc = _recipe({**env, **grid_cells, "KEPT": str(tmp_path / "nowhere")}, tmp_path)
    assert proc.returncode == 2 and "[recipe] error: KEPT must be" in proc.stderr


def test_the_grid_stage_measures_the_attention_of_each_trained_cell(grid_runs, tmp_path):
    """ATTN_STATS=1 (the default): every cell of the plan with a best checkpoint here and no
    statistics yet gets attention_stats over STATS_SPLIT with the recipe's beam; a cell without a
    checkpoint (kept elsewhere), the no-attention baseline and a measured cell are left alone."""
    root, refs = grid_runs
    cell = root / "en_de" / "soft-additive-i_seed1"
    for run in (cell, root / "en_de" / "none-grid-none_seed1"):
        (run / "checkpoint_best.pt").write_bytes(b"")
    stub = tmp_path / "python"          # records its arguments and writes the --out file
    stub.write_text('#!/usr/bin/env bash\necho "$*" >> "$(dirname "$0")/calls.log"\n'
                    'while [[ $# -gt 0 ]]; do [[ "$1" == --out ]] && echo \'{"entropy": 0.5}\' > "$2"; '
                    'shift; done\n')
    stub.chmod(0o755)
    env = {"STAGE": "grid", "RUNS": str(root), "DATA_BIN": str(refs.parent), "SCORERS": "additive",
           "CONFIGS": "i ii", "PYTHON": str(stub)}
    proc = _recipe(env, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert len(calls) == 1, calls
    assert calls[0].startswith("-m fairseq_acvi.metrics.attention_stats --data ")
    assert f"--path {cell}/checkpoint_best.pt --subset valid --beam 10 " in calls[0]
    out = cell / "attention_stats_valid.json"
    assert json.loads(out.read_text()) == {"entropy": 0.5} and not out.with_suffix(".json.tmp").exists()
    assert f"[recipe] attention statistics: {out}" in proc.stdout
    assert _recipe(env, tmp_path).returncode == 0                  # measured: not again
    out.unlink()
    assert _recipe({**env, "ATTN_STATS": "0"}, tmp_path).returncode == 0
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 1 and not out.exists()
    proc = _recipe({**env, "STATS_SPLIT": "test2016", "BEAM": "4"}, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--subset test2016 --beam 4 " in (tmp_path / "calls.log").read_text().splitlines()[-1]
    assert (cell / "attention_stats_test2016.json").is_file()


def test_a_key_value_control_is_a_cell_of_its_own(tmp_path):
    """KV_INNER: the key-value cells with another scorer of their keys, in run folders of their own
    (seed 003's cells keep their names); the other scorers' cells are unchanged; grid stage only."""
    env = {"DRY_RUN": "1", "STAGE": "grid", "SCORERS": "additive key-value", "CONFIGS": "i",
           "BASELINE": "0", "KV_INNER": "scaled-dot"}
    proc = _recipe(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = [line for line in proc.stdout.splitlines() if line.startswith("[recipe] plan: ")]
    assert plan == ["[recipe] plan: soft additive-i '1' --input-feeding 0 --attention-type additive",
                    "[recipe] plan: soft key-value-scaled-dot-i '1' --input-feeding 0 --attention-type "
                    "key-value --key-value-inner scaled-dot"]
    proc = _recipe({**env, "KV_INNER": "multiplicative"}, tmp_path)
    assert "[recipe] plan: soft key-value-i '1' --input-feeding 0 --attention-type key-value\n" in proc.stdout
    proc = _recipe({**env, "STAGE": "seeds"}, tmp_path)
    assert proc.returncode == 2 and "KV_INNER must be multiplicative" in proc.stderr
