"""experiments/input_feeding_report.py: the input-feeding page from the runs' own files: both runs
of a context side by side, the budget, and no-feed − feed per split with a paired bootstrap
interval that holds the true difference; unfinished pairs wait; a decode whose BLEU is not its
recorded one is refused."""
import importlib.util
import json
import random

import pytest

from fairseq_acvi.metrics.bleu import bleu_from_totals, sentence_stats
from test_normalizers_report import SPLITS, _record, corrupt, gen_text, references, write_refs

from conftest import REPO

spec = importlib.util.spec_from_file_location("input_feeding_report",
                                              REPO / "experiments" / "input_feeding_report.py")
R = importlib.util.module_from_spec(spec)
spec.loader.exec_module(R)


def _run(root, name, context, tag, refs, rate, seed, updates, budget=None, bleu_shift=0.0,
         epochs=(1, 2), loss_shift=0.0):
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"pair": "en_de", "context": context, "tag": tag,
                                              "seed": seed}))
    log = []
    for ep in epochs:
        loss = str(3 - ep / 10 + loss_shift)
        log += [_record("train", {"epoch": ep, "train_wps": "1000", "train_wall": str(60 * ep)}),
                _record("valid", {"epoch": ep, "valid_loss": loss, "valid_nll_loss": loss,
                                  "valid_num_updates": str(updates * ep // epochs[-1])})]
    log.append("2026-11-29 10:09:00 | INFO | fairseq_cli.train | done training in 120.0 seconds\n")
    (run / "train.log").write_text("".join(log))
    for i, split in enumerate(SPLITS):
        hyps = corrupt(refs[split], rate, seed * 10 + i)
        (run / f"gen_{split}.txt").write_text(gen_text(hyps), encoding="utf-8")
        tok = bleu_from_totals(sentence_stats(hyps, refs[split]).sum(0)) + bleu_shift
        (run / f"bleu_{split}.json").write_text(json.dumps({"bleu_tok": round(float(tok), 2)}))
    if budget:
        (run / "budget.json").write_text(json.dumps(budget))
    return run


@pytest.fixture
def runs(tmp_path):
    refs = references(random.Random(0))
    root = tmp_path / "runs"
    budget = {"ratio": 1.13, "budget_updates": 2644, "feed_updates": 2340, "batches_timed": 40}
    _run(root, "soft_seed1", "soft", "", refs, 0.30, 1, 2340)
    _run(root, "soft-nofeed_seed1", "soft", "nofeed", refs, 0.15, 1, 2644, budget)
    _run(root, "acvi_seed1", "acvi", "", refs, 0.20, 1, 2340)        # its no-feed run still training
    return {"root": root, "refs": write_refs(tmp_path / "raw", refs), "ref_lines": refs,
            "tmp": tmp_path}


def test_the_page_pairs_each_context_and_bounds_the_difference(runs, capsys):
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 0
    table = json.loads((runs["tmp"] / "page" / "input_feeding.json").read_text())
    (pair,) = table["pairs"]
    assert (pair["context"], pair["seed"]) == ("soft", 1)
    assert pair["feed"]["updates"] == 2340 and pair["nofeed"]["updates"] == 2644
    assert pair["budget"]["ratio"] == 1.13 and pair["budget"]["budget_updates"] == 2644
    for split in SPLITS:
        p = pair["paired"][split]
        true = pair["nofeed"]["bleu"][split] - pair["feed"]["bleu"][split]
        assert p["delta"] == pytest.approx(true, abs=0.011)
        assert p["low"] < p["delta"] < p["high"] and p["low"] > 0         # 0.15 vs 0.30 corrupted
    (waiting,) = table["waiting"]
    assert (waiting["context"], waiting["seed"]) == ("acvi", 1)
    assert len(waiting["unfinished"]) == 1 and waiting["unfinished"][0].endswith("acvi-nofeed_seed1")
    page = (runs["tmp"] / "page" / "input_feeding.md").read_text()
    assert "| soft | 1 | no input feeding, parallel path | 2644 |" in page
    assert "| soft | 1 | 1.130 | 2644 |" in page and "Waiting: acvi seed 1" in page
    assert page == capsys.readouterr().out


def test_a_decode_that_is_not_its_recorded_bleu_is_refused(runs, capsys):
    _run(runs["root"], "acvi-nofeed_seed1", "acvi", "nofeed", runs["ref_lines"], 0.2, 1, 2600,
         {"ratio": 1.1, "budget_updates": 2600}, bleu_shift=1.0)
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 2
    err = capsys.readouterr().err
    assert "acvi-nofeed_seed1/gen_valid.txt: BLEU" in err and "recorded" in err
    assert not (runs["tmp"] / "page").exists()


def test_a_missing_budget_is_named(runs, capsys):
    (runs["root"] / "soft-nofeed_seed1" / "budget.json").unlink()
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 2
    assert "soft-nofeed_seed1/budget.json: cannot be read" in capsys.readouterr().err


def test_the_control_with_the_no_feed_updates_gets_its_row_and_differences(runs):
    """A finished <context>-feedsameupd_seed<N> (input feeding trained on to the no-feed run's
    updates) is shown beside the pair with no-feed − control per split; without one, neither."""
    _run(runs["root"], "soft-feedsameupd_seed1", "soft", "feedsameupd", runs["ref_lines"], 0.10, 1, 2644)
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 0
    (pair,) = json.loads((runs["tmp"] / "page" / "input_feeding.json").read_text())["pairs"]
    assert pair["control"]["updates"] == 2644
    for split in SPLITS:
        p = pair["paired_control"][split]
        true = pair["nofeed"]["bleu"][split] - pair["control"]["bleu"][split]
        assert p["delta"] == pytest.approx(true, abs=0.011)
        assert p["low"] < p["delta"] < p["high"] < 0                      # 0.15 vs 0.10 corrupted
    page = (runs["tmp"] / "page" / "input_feeding.md").read_text()
    assert "| soft | 1 | input feeding to the no-feed updates (control) | 2644 |" in page
    assert "No-feed − control:" in page and "\n| soft | 1 | 2644 | " in page
    (runs["root"] / "soft-feedsameupd_seed1" / "bleu_test2017.json").unlink()     # not finished
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 0
    (pair,) = json.loads((runs["tmp"] / "page" / "input_feeding.json").read_text())["pairs"]
    assert "control" not in pair and "(control)" not in (runs["tmp"] / "page" / "input_feeding.md").read_text()


def test_the_kept_outputs_make_the_same_page_again(runs, capsys):
    """--keep-outputs keeps every run's hypotheses, scores, log lines and budget under
    OUT/outputs/en_de/; given as --runs, that folder alone gives the same tables again."""
    _run(runs["root"], "soft-feedsameupd_seed1", "soft", "feedsameupd", runs["ref_lines"], 0.10, 1, 2644)
    page = runs["tmp"] / "page"
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(page), "--keep-outputs"]) == 0
    kept = page / "outputs" / "en_de"
    assert sorted(p.name for p in kept.iterdir()) == ["soft-feedsameupd_seed1", "soft-nofeed_seed1",
                                                       "soft_seed1"]          # acvi waits: not kept
    assert (kept / "soft-nofeed_seed1" / "budget.json").is_file()
    assert (kept / "soft_seed1" / "gen_test2016.txt.gz").is_file()
    assert not (kept / "soft_seed1" / "gen_test2016.txt").exists()
    again = runs["tmp"] / "again"
    assert R.main(["--runs", str(kept), "--refs-dir", str(runs["refs"]), "--out-dir", str(again)]) == 0
    first, second = (json.loads((d / "input_feeding.json").read_text()) for d in (page, again))
    for table in (first, second):
        for pair in table["pairs"]:
            for key in ("feed", "nofeed", "control"):
                pair[key].pop("dir")
    assert second["pairs"] == first["pairs"] and second["pairs"][0]["control"]["updates"] == 2644
    assert [(w["context"], w["seed"]) for w in second["waiting"]] == [("acvi", 1)]
    (runs["root"] / "soft_seed1" / "gen_valid.txt").unlink()                 # a BLEU without its decode
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page3"), "--keep-outputs"]) == 2
    assert "soft_seed1/gen_valid.txt" in capsys.readouterr().err


@pytest.mark.parametrize("shift, best", [(0.5, ("feed", 2)), (-0.5, ("control", 4))])
def test_the_control_s_best_epoch_counts_the_epochs_before_its_resume(runs, shift, best):
    """The control resumes the input-feeding run after its epochs and logs only its own; its
    checkpoint_best.pt is the better of both runs' best epochs (fairseq carries the best loss over
    a resume), and so are its row's best epoch and perplexity."""
    _run(runs["root"], "soft-feedsameupd_seed1", "soft", "feedsameupd", runs["ref_lines"], 0.10, 1, 2644,
         epochs=(3, 4), loss_shift=shift)
    assert R.main(["--runs", str(runs["root"]), "--refs-dir", str(runs["refs"]),
                   "--out-dir", str(runs["tmp"] / "page")]) == 0
    (pair,) = json.loads((runs["tmp"] / "page" / "input_feeding.json").read_text())["pairs"]
    assert pair["control"]["epochs"] == 4
    source, epoch = best
    assert pair["control"]["best_epoch"] == epoch
    assert pair["control"]["valid_ppl"] == pytest.approx(2 ** (3 - epoch / 10 + (shift if source == "control" else 0)),
                                                         rel=1e-6)
    if source == "feed":
        assert pair["control"]["valid_ppl"] == pair["feed"]["valid_ppl"]
