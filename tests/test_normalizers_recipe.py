"""recipes/mt_normalizers.sh (not run here): its variables are checked before any
work, a dry run prints the resolved settings, and the page documents every variable. The recipe
runs from an empty folder with a PYTHON that only records that it was started."""
import gzip
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import recording_python

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "mt_normalizers.sh"




def _run(env_extra, tmp_path, *args):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHON=str(fake), **env_extra)
    proc = subprocess.run(["bash", str(RECIPE), *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)
    return proc, marker, work


def test_dry_run_prints_the_resolved_settings(tmp_path):
    proc, marker, work = _run({"DRY_RUN": "1", "NORMALIZERS": "softmax csparsemax",
                               "FERTILITY": "predicted", "FERTILITY_VALUE": "3"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stdout.splitlines() if x.startswith("[recipe] settings:")]
    assert len(line) == 1
    assert "NORMALIZERS='softmax csparsemax'" in line[0] and "FERTILITY=predicted" in line[0]
    assert "SEEDS='1 2 3'" in line[0] and "DATA_BIN=data-bin/multi30k_en_de" in line[0]
    assert "CNNDM_RUNS='softmax:0 softmax:1 csparsemax:0'" in line[0]
    assert not marker.exists() and list(work.iterdir()) == []


@pytest.mark.parametrize("given,name", [({"NORMALIZERS": "softmax sparse"}, "NORMALIZERS"),
                                        ({"SEEDS": "1 two"}, "SEEDS"),
                                        ({"FERTILITY_VALUE": "two"}, "FERTILITY_VALUE"),
                                        ({"CONTEXT": "structured"}, "CONTEXT"),
                                        ({"NORMALIZERS": ""}, "NORMALIZERS"),
                                        ({"SKIP_DONE": "yes"}, "SKIP_DONE"),
                                        ({"CNNDM_RUNS": "csparsemax:yes"}, "CNNDM_RUNS"),
                                        ({"CNNDM_RUNS": "softmax:1 softmax:0"}, "CNNDM_RUNS")])
def test_a_bad_variable_stops_the_recipe_before_any_work(tmp_path, given, name):
    proc, marker, work = _run(given, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert re.search(rf"^\[recipe\] error: {name} must be .*, got '{re.escape(given[name])}'$",
                     proc.stderr, re.M), proc.stderr
    assert not marker.exists() and list(work.iterdir()) == []


def test_the_page_documents_every_variable():
    text = RECIPE.read_text()
    names = set(re.findall(r'^([A-Z][A-Z0-9_]*)="\$\{\1:?-', text, flags=re.M))
    assert {"NORMALIZERS", "FERTILITY", "CNNDM_RUNS", "DECODE_SWAP", "SKIP_DONE"} <= names
    doc = (REPO / "docs" / "recipes" / "mt_normalizers.md").read_text()
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", doc))
    assert names - documented == set()
    assert "`DRY_RUN`" in doc and "[recipe] settings:" in doc


# -- the report variables (REPORT_DIR, REPORT_ONLY) --------------------------------------------------
def test_report_only_runs_the_two_reports_and_nothing_else(tmp_path):
    proc, marker, work = _run({"REPORT_ONLY": "1", "REPORT_DIR": "rep"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().splitlines() == [
        "-m fairseq_acvi.cli.mt_report runs/normalizers/en_de --out-dir rep --keep-outputs",
        "-m fairseq_acvi.cli.normalizers_report runs/normalizers/en_de --refs-dir "
        "data-bin/multi30k_en_de/raw --out-dir rep --split test2016"]
    assert list(work.iterdir()) == []


def test_report_only_with_cnndm_adds_its_runs(tmp_path):
    proc, marker, _ = _run({"REPORT_ONLY": "1", "REPORT_DIR": "rep", "CNNDM": "1",
                               "RUNS": "r", "STATS_SPLIT": "test2017", "PAIR": "en_fr"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().splitlines()[-1] == (
        "-m fairseq_acvi.cli.normalizers_report r/en_fr --refs-dir data-bin/multi30k_en_fr/raw "
        "--out-dir rep --split test2017 --cnndm r/cnndm --cnndm-subset test")


def test_dry_run_shows_the_report_settings(tmp_path):
    proc, marker, _ = _run({"DRY_RUN": "1", "REPORT_DIR": "docs/results/x"}, tmp_path)
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("[recipe] settings:")]
    assert "REPORT_DIR=docs/results/x REPORT_ONLY=0" in line
    assert not marker.exists()


@pytest.mark.parametrize("given,name,value", [
    ({"REPORT_ONLY": "yes"}, "REPORT_ONLY", "yes"),
    ({"REPORT_ONLY": "1"}, "REPORT_DIR", ""),
    ({"REPORT_DIR": "runs/normalizers/en_de/report"}, "REPORT_DIR", "runs/normalizers/en_de/report")])
def test_a_bad_report_setting_stops_the_recipe_before_any_work(tmp_path, given, name, value):
    proc, marker, work = _run(given, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert re.search(rf"^\[recipe\] error: {name} must be .*, got '{re.escape(value)}'$",
                     proc.stderr, re.M), proc.stderr
    assert not marker.exists() and list(work.iterdir()) == []


# -- SOFTMAX_FROM: the results tables' soft runs as the softmax rows ---------------------------------
def test_softmax_from_reuses_the_runs_and_trains_nothing_for_softmax(tmp_path):
    (tmp_path / "sf").mkdir()
    proc, marker, _ = _run({"SOFTMAX_FROM": str(tmp_path / "sf"), "NORMALIZERS": "softmax",
                            "SEEDS": "1 2", "MAX_EPOCH": "20", "PATIENCE": "0", "DECODE_SWAP": ""},
                           tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = marker.read_text().splitlines()
    reuse = [c for c in calls if "reuse_run" in c]
    assert reuse == [f"-m fairseq_acvi.mt_eval.reuse_run {tmp_path}/sf/soft_seed{s} "
                     f"runs/normalizers/en_de/soft-softmax_seed{s} --tag softmax --context soft "
                     "--max-epoch 20 --patience 0" for s in (1, 2)]
    assert not any("fairseq_cli" in c for c in calls)                  # no training, no decode
    stats = [c for c in calls if "attention_stats" in c]
    assert len(stats) == 2 and "soft-softmax_seed2/checkpoint_best.pt" in stats[1]


def test_softmax_from_must_be_a_folder_and_refuses_extra_arguments(tmp_path):
    (tmp_path / "a").mkdir()
    proc, marker, _ = _run({"SOFTMAX_FROM": "nowhere"}, tmp_path / "a")
    assert proc.returncode == 2 and "SOFTMAX_FROM must be a folder" in proc.stderr
    assert not marker.exists()
    (tmp_path / "sf").mkdir()
    proc, marker, _ = _run({"SOFTMAX_FROM": str(tmp_path / "sf")}, tmp_path, "--dropout", "0.1")
    assert proc.returncode == 2, proc.stderr
    assert "extra arguments: --dropout 0.1" in proc.stderr
    assert not marker.exists()


def test_cnndm_args_reach_the_cnndm_trainings_only(tmp_path):
    data = tmp_path / "cnndm"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    (data / "test.article").write_text("a\n")
    proc, marker, _ = _run({"REPORT_ONLY": "0", "CNNDM": "1", "CNNDM_DATA": str(data),
                            "NORMALIZERS": "softmax", "SEEDS": "1",
                            "SOFTMAX_FROM": str(tmp_path), "CNNDM_RUNS": "csparsemax:0", "DECODE_SWAP": "",
                            "CNNDM_ARGS": "--compile-decoder-step inductor"}, tmp_path)
    calls = marker.read_text().splitlines()
    trains = [c for c in calls if c.startswith("-m fairseq_cli.train")]
    assert trains and all("--attention-normalizer csparsemax" in c
                          and c.endswith("--compile-decoder-step inductor") for c in trains), calls
    assert not any("compile-decoder-step" in c for c in calls if "reuse_run" in c)


# -- DECODE_SWAP: the softmax models decoded with another normaliser ---------------------------------
def test_decode_swap_decodes_the_softmax_models_with_overrides_and_trains_nothing(tmp_path):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    run = work / "runs" / "normalizers" / "en_de" / "soft-softmax-decoded-sparsemax_seed1"
    run.mkdir(parents=True)
    (run / "checkpoint_best.pt").write_bytes(b"w")      # what reuse_run links (not run here)
    (run.parent / "soft-softmax_seed1").mkdir()
    (run.parent / "soft-softmax_seed1" / "run.json").write_text("{}")   # seed 2 has no softmax run
    data = work / "data-bin" / "multi30k_en_de"
    data.mkdir(parents=True)
    (data / "dict.en.txt").write_text("a 1\n")
    (data / "splits.json").write_text('{"valid": "valid", "test2016": "test", "test2017": "test1"}')
    (tmp_path / "sf").mkdir()
    env = dict(os.environ, PYTHON=str(fake), SOFTMAX_FROM=str(tmp_path / "sf"), NORMALIZERS="softmax",
               SEEDS="1 2", MAX_EPOCH="20", PATIENCE="0", DECODE_SWAP="sparsemax")
    proc = subprocess.run(["bash", str(RECIPE)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    calls = marker.read_text().splitlines()
    assert not any("fairseq_cli.train" in c for c in calls)
    assert "DECODE_SWAP sparsemax: no softmax run of seed 2 in runs/normalizers/en_de: skipped" in proc.stdout
    swap = [c for c in calls if "--decode-normalizer" in c]
    assert swap == ["-m fairseq_acvi.mt_eval.reuse_run runs/normalizers/en_de/soft-softmax_seed1 "
                    "runs/normalizers/en_de/soft-softmax-decoded-sparsemax_seed1 --tag "
                    "softmax-decoded-sparsemax --decode-normalizer sparsemax --context soft "
                    "--max-epoch 20 --patience 0"]
    gens = [c for c in calls if "fairseq_cli.generate" in c]
    assert len(gens) == 3 and all("soft-softmax-decoded-sparsemax_seed1/checkpoint_best.pt" in c
                                  and c.endswith("--model-overrides {'attention_normalizer':'sparsemax'}")
                                  for c in gens), gens
    for tool in ("attention_stats", "attention_pictures"):
        used = [c for c in calls if tool in c and "decoded" in c]
        assert len(used) == 1 and "--model-overrides {'attention_normalizer': 'sparsemax'}" in used[0]


def test_a_bad_decode_swap_stops_the_recipe(tmp_path):
    proc, marker, work = _run({"DECODE_SWAP": "sparse"}, tmp_path)
    assert proc.returncode == 2 and "DECODE_SWAP must be" in proc.stderr
    assert not marker.exists()


# -- the CNN/DM runs alone, and carrying on after an interruption (SKIP_DONE) ------------------------
def test_an_empty_normalizers_with_cnndm_trains_cnndm_only(tmp_path):
    data = tmp_path / "cnndm"
    data.mkdir()
    (data / "dict.src.txt").write_text("a 1\n")
    (data / "test.article").write_text("a\n")
    proc, marker, _ = _run({"NORMALIZERS": "", "DECODE_SWAP": "", "CNNDM": "1", "CNNDM_DATA": str(data),
                            "CNNDM_RUNS": "csparsemax:0"}, tmp_path)
    calls = marker.read_text().splitlines()
    assert not any("multi30k" in c or "attention_stats" in c for c in calls), calls
    trains = [c for c in calls if c.startswith("-m fairseq_cli.train")]
    assert trains and all(str(data) in c and "--attention-normalizer csparsemax" in c for c in trains)


def _sparsemax_seeds_1_2(work, fake, **env_extra):
    """The recipe on sparsemax seeds 1 and 2 without training (TRAIN=0), over a data-bin holding
    the files it checks, in ``work``."""
    env = dict(os.environ, PYTHON=str(fake), NORMALIZERS="sparsemax", SEEDS="1 2", DECODE_SWAP="",
               TRAIN="0", DATA_BIN=str(work / "data-bin"), **env_extra)
    (work / "data-bin").mkdir()
    (work / "data-bin" / "dict.en.txt").write_text("a 1\n")
    (work / "data-bin" / "splits.json").write_text('{"valid": "valid", "test2016": "test", "test2017": "test1"}')
    return subprocess.run(["bash", str(RECIPE)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)


def _finished_run(work, seed, *, measured):
    """runs/normalizers/en_de/soft-sparsemax_seed<seed> with its three decodes after the checkpoint,
    and (measured) the attention statistics and pictures after them."""
    run = work / "runs" / "normalizers" / "en_de" / f"soft-sparsemax_seed{seed}"
    (run / "pictures").mkdir(parents=True)
    (run / "checkpoint_best.pt").write_bytes(b"w")
    (run / "checkpoint_last.pt").write_bytes(b"w")
    os.utime(run / "checkpoint_best.pt", (1e9, 1e9))
    os.utime(run / "checkpoint_last.pt", (1e9, 1e9))
    for split in ("valid", "test2016", "test2017"):
        (run / f"bleu_{split}.json").write_text('{"bleu_tok": 30.0}')
    if measured:
        (run / "attention_stats_test2016.json").write_text("{}")
        (run / "pictures" / "attention.json").write_text("{}")
    return run


@pytest.mark.parametrize("skip_done", ["0", "1"])
def test_skip_done_keeps_the_attention_statistics_made_after_the_checkpoint(tmp_path, skip_done):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    _finished_run(work, 1, measured=True)
    _finished_run(work, 2, measured=False)
    proc = _sparsemax_seeds_1_2(work, fake, SKIP_DONE=skip_done)
    assert proc.returncode == 0, proc.stderr
    calls = marker.read_text().splitlines()
    stats = [c for c in calls if "attention_stats" in c]
    gens = [c for c in calls if "fairseq_cli.generate" in c]
    if skip_done == "1":
        assert len(stats) == 1 and "soft-sparsemax_seed2/" in stats[0], stats
        assert "kept (SKIP_DONE=1): runs/normalizers/en_de/soft-sparsemax_seed1/attention_stats_test2016.json" \
            in proc.stdout
        assert gens == []                                   # the decodes are kept too
    else:
        assert len(stats) == 2 and len(gens) == 6


# -- KEEP: each finished run kept in a results page, so that it outlives the machine ---------------
def _kept_run(work, name):
    """KEEP=kept's copy of run NAME: its three scores and the attention statistics."""
    k = work / "kept" / "outputs" / "en_de" / name
    k.mkdir(parents=True)
    (k / "run.json").write_text("{}")
    for f in ("bleu_valid.json", "bleu_test2016.json", "bleu_test2017.json", "attention_stats_test2016.json"):
        (k / f).write_text("{}")
    return k


def test_keep_skips_the_kept_runs_and_keeps_each_new_one_once_measured(tmp_path):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    _kept_run(work, "soft-sparsemax_seed1")
    _finished_run(work, 2, measured=False)            # seed 2: decoded here, not measured yet
    proc = _sparsemax_seeds_1_2(work, fake, SKIP_DONE="1", KEEP="kept")
    assert proc.returncode == 0, proc.stderr
    assert "[recipe] kept in kept: soft-sparsemax_seed1" in proc.stderr
    calls = marker.read_text().splitlines()
    assert not any("seed1" in c for c in calls), calls             # nothing made again for seed 1
    stats = [i for i, c in enumerate(calls) if "attention_stats" in c]
    keeps = [i for i, c in enumerate(calls) if "keep_runs" in c]
    assert len(stats) == 1 and keeps == [len(calls) - 1] and stats[0] < keeps[0]
    assert calls[-1] == ("-m fairseq_acvi.cli.keep_runs runs/normalizers/en_de/soft-sparsemax_seed2 "
                         "--out-dir kept --pictures")


def test_report_only_reads_the_kept_runs_that_runs_does_not_hold(tmp_path):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    _kept_run(work, "soft-sparsemax_seed1")
    _kept_run(work, "soft-sparsemax_seed2")
    _finished_run(work, 2, measured=True)
    (work / "runs" / "normalizers" / "en_de" / "soft-sparsemax_seed2" / "run.json").write_text("{}")
    env = dict(os.environ, PYTHON=str(fake), REPORT_ONLY="1", REPORT_DIR="rep", KEEP="kept")
    proc = subprocess.run(["bash", str(RECIPE)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    roots = "runs/normalizers/en_de kept/outputs/en_de/soft-sparsemax_seed1"  # seed 2: the live run
    assert marker.read_text().splitlines() == [
        f"-m fairseq_acvi.cli.mt_report {roots} --out-dir rep --keep-outputs",
        f"-m fairseq_acvi.cli.normalizers_report {roots} --refs-dir data-bin/multi30k_en_de/raw "
        "--out-dir rep --split test2016"]


def test_a_new_machine_reports_from_the_kept_runs_alone(tmp_path):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    _kept_run(work, "soft-softmax_seed1")
    env = dict(os.environ, PYTHON=str(fake), REPORT_ONLY="1", REPORT_DIR="kept", KEEP="kept")
    proc = subprocess.run(["bash", str(RECIPE)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().splitlines()[0] == (
        "-m fairseq_acvi.cli.mt_report kept/outputs/en_de/soft-softmax_seed1 --out-dir kept --keep-outputs")


def test_keep_must_lie_outside_the_runs(tmp_path):
    proc, marker, work = _run({"KEEP": "runs/normalizers/en_de/k"}, tmp_path)
    assert proc.returncode == 2
    assert "[recipe] error: KEEP must be outside RUNS/PAIR (runs/normalizers/en_de), got " \
           "'runs/normalizers/en_de/k'" in proc.stderr
    assert not marker.exists() and list(work.iterdir()) == []


def _cnndm_work(tmp_path):
    """A CNN/DM data folder the recipe accepts, a fake PYTHON whose trainings leave a checkpoint
    (so that the summarization recipe decodes), and the work folder."""
    fake, marker = recording_python(tmp_path)
    fake.write_text(fake.read_text() + 'prev=""\nfor a in "$@"; do\n'
                    '  [[ "$prev" == --save-dir ]] && touch "$a/checkpoint_last.pt"; prev="$a"\ndone\n')
    work = tmp_path / "work"
    data = work / "cnndm"
    data.mkdir(parents=True)
    (data / "dict.src.txt").write_text("a 1\n")
    (data / "test.article").write_text("a\n")
    env = dict(os.environ, PYTHON=str(fake), NORMALIZERS="", DECODE_SWAP="", CNNDM="1",
               CNNDM_DATA=str(data), KEEP="kept")
    return work, env, marker


def test_keep_keeps_each_scored_cnndm_run_and_skips_the_kept_ones(tmp_path):
    work, env, marker = _cnndm_work(tmp_path)
    old = work / "kept" / "outputs" / "cnndm" / "soft-softmax-cov0"     # from an earlier machine
    old.mkdir(parents=True)
    (old / "scores_test.json").write_text('{"rouge1": 30.0}')
    live = work / "runs" / "normalizers" / "cnndm" / "soft-csparsemax-cov0"
    live.mkdir(parents=True)                     # scored here (the fake PYTHON leaves it as it is)
    (live / "scores_test.json").write_text('{"rouge1": 31.0}')
    (live / "hyp_test.txt").write_text("a summary .\n")
    proc = subprocess.run(["bash", str(RECIPE)], cwd=work, env=dict(
        env, CNNDM_RUNS="softmax:0 softmax:1 csparsemax:0", REPORT_DIR="rep"),
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "[recipe] kept in kept: soft-softmax-cov0" in proc.stderr
    calls = marker.read_text().splitlines()
    trains = [c for c in calls if c.startswith("-m fairseq_cli.train")]
    assert not any("softmax-cov0" in c and "csparsemax" not in c for c in trains), trains
    # softmax with coverage trains every phase: the run it would branch from is kept, not here
    cov1 = [c for c in trains if "soft-softmax-cov1" in c]
    assert len(cov1) == 5, trains
    kept = work / "kept" / "outputs" / "cnndm" / "soft-csparsemax-cov0"
    assert (kept / "scores_test.json").read_text() == '{"rouge1": 31.0}'
    with gzip.open(kept / "hyp_test.txt.gz", "rt") as f:
        assert f.read() == "a summary .\n"
    assert not (work / "kept" / "outputs" / "cnndm" / "soft-softmax-cov1").exists()   # not scored
    assert calls[-1].endswith("--cnndm kept/outputs/cnndm --cnndm-subset test")


# -- ALIGN_CORPUS: DROP from an aligner, per measured run ---------------------------------------------
def test_align_corpus_adds_the_aligners_drop_after_the_statistics(tmp_path):
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    _finished_run(work, 1, measured=True)
    _finished_run(work, 2, measured=False)
    work.joinpath("train.en").write_text("a\n")
    work.joinpath("train.de").write_text("b\n")
    proc = _sparsemax_seeds_1_2(work, fake, ALIGN_CORPUS="train", SKIP_DONE="1")
    assert proc.returncode == 0, proc.stderr
    assert "ALIGN_CORPUS=train" in proc.stdout
    calls = marker.read_text().splitlines()
    aligned = [i for i, c in enumerate(calls) if "aligned_drop" in c]
    stats = [i for i, c in enumerate(calls) if "attention_stats" in c and "seed2" in c]
    assert len(aligned) == 2 and stats and stats[0] < aligned[1]
    data = work / "data-bin"
    assert calls[aligned[1]] == (
        "-m fairseq_acvi.cli.aligned_drop runs/normalizers/en_de/soft-sparsemax_seed2 --split test2016 "
        f"--src {data}/raw/test2016.en --ref {data}/raw/test2016.de --corpus-src train.en "
        "--corpus-tgt train.de --skip-done")


def test_a_missing_align_corpus_stops_the_recipe_and_an_empty_one_skips_the_aligner(tmp_path):
    proc, marker, work = _run({"ALIGN_CORPUS": "nowhere/train"}, tmp_path)
    assert proc.returncode == 2 and not marker.exists()
    assert "[recipe] error: ALIGN_CORPUS must name a corpus prefix with nowhere/train.en, got 'nowhere/train'" \
        in proc.stderr
    (tmp_path / "b").mkdir()
    fake, marker = recording_python(tmp_path / "b")
    work = tmp_path / "b" / "work"
    _finished_run(work, 1, measured=False)
    _finished_run(work, 2, measured=False)
    proc = _sparsemax_seeds_1_2(work, fake, ALIGN_CORPUS="")
    assert proc.returncode == 0, proc.stderr
    assert not any("aligned_drop" in c for c in marker.read_text().splitlines())
