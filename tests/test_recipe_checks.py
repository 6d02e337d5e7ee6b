"""Every recipe checks its variables before any work and prints the settings it resolved
(recipes/lib_check.sh).

A bad value must stop the recipe with exit status 2 and ``[recipe] error: NAME must be ...`` before
anything runs: the recipes run here with a ``python`` (and ``PYTHON``) that only records that it
was started, from an empty folder, so any work would leave a trace. ``DRY_RUN=1`` prints the
``[recipe] settings:`` line and stops; the values in it are the resolved ones (defaults, values
derived from other variables, the variables given).
"""
import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from test_recipe_docs import variables

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted(p.name for p in (REPO / "recipes").glob("*.sh") if not p.name.startswith("lib_"))

#: stands for a data-bin of fairseq-acvi-prepare-parallel (corpus.json, splits.json) made in the test's folder
CORPUS = "<corpus>"
#: stands for a plan of recipes/side_by_side.sh (one command) made in the test's folder
PLAN = "<plan>"

#: per recipe, bad settings: (variables given, the variable the error must name). Each recipe has a
#: bad whole number, a bad number and (where it takes one) a bad list.
BAD = {
    "babi.sh": [({"SEEDS": "one"}, "SEEDS"), ({"EPOCHS": "ten"}, "EPOCHS"), ({"LR": "fast"}, "LR"),
                ({"MODELS": "memn2n,lstm"}, "MODELS"), ({"TASKS": "1,two"}, "TASKS")],
    "captioning_msvd.sh": [({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"LR": "1e-3x"}, "LR"),
                           ({"MC_SAMPLES": "2.5"}, "MC_SAMPLES"), ({"FEATURES": "fake"}, "FEATURES")],
    "guess_number.sh": [({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"LR": "-0.1"}, "LR"),
                        ({"SETTINGS": "0:10:many"}, "SETTINGS"), ({"MODELS": "memn2n lstm"}, "MODELS")],
    "mt_iwslt15.sh": [({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"SEED": "one"}, "SEED"),
                      ({"LR": "high"}, "LR"), ({"MC_SAMPLES": "ten"}, "MC_SAMPLES")],
    "mt_multi30k.sh": [({"SEEDS": "one"}, "SEEDS"), ({"SEEDS": "1 two 3"}, "SEEDS"),
                       ({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"LR": "0.001.1"}, "LR"),
                       ({"MC_SWEEP": "0 5 x"}, "MC_SWEEP"), ({"THREADS": "0"}, "THREADS")],
    "mt_pag.sh": [({"SEEDS": "one"}, "SEEDS"), ({"MAX_EPOCH": "ten"}, "MAX_EPOCH"),
                  ({"CLIP_NORM": "big"}, "CLIP_NORM")],
    "mt_transformer_multi30k.sh": [({"SEEDS": "one"}, "SEEDS"), ({"MAX_EPOCH": "ten"}, "MAX_EPOCH"),
                                   ({"WARMUP": "5e2"}, "WARMUP"), ({"LABEL_SMOOTHING": "x"}, "LABEL_SMOOTHING")],
    "mt_wmt16_en_ro.sh": [({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"BATCH_SIZE": "0"}, "BATCH_SIZE"),
                          ({"CONTEXT": "acvii"}, "CONTEXT")],
    "summarization_cnndm.sh": [({"SCALE": "half"}, "SCALE"), ({"SEED": "one"}, "SEED"),
                               ({"SHARDS": "0"}, "SHARDS"), ({"DECODE_PHASE": "9"}, "DECODE_PHASE")],
    "summarization_cnndm_compare.sh": [({"RUNS": "a=x", "OUT": "o", "BEFORE_PHASE": "two"}, "BEFORE_PHASE")],
    "mt_parallel.sh": [({"DATA_BIN": CORPUS, "SEEDS": "one"}, "SEEDS"),
                       ({"DATA_BIN": CORPUS, "MAX_EPOCH": "ten"}, "MAX_EPOCH"),
                       ({"DATA_BIN": CORPUS, "LR": "1e-3e"}, "LR"), ({"DATA_BIN": CORPUS, "TRAIN": "yes"}, "TRAIN")],
    "mt_normalizers.sh": [({"SEEDS": "one"}, "SEEDS"), ({"FERTILITY_VALUE": "two"}, "FERTILITY_VALUE"),
                          ({"NORMALIZERS": "softmax sparse"}, "NORMALIZERS")],
    "mt_attention_grid.sh": [({"HEADS": "two"}, "HEADS"), ({"BEST_SEEDS": "1 two"}, "BEST_SEEDS"),
                             ({"STAGE": "all"}, "STAGE"), ({"SCORERS": "dot"}, "SCORERS"),
                             ({"INPUT_FEEDING": "yes"}, "INPUT_FEEDING"),
                             ({"ATTN_STATS": "yes"}, "ATTN_STATS"), ({"STATS_SPLIT": "test"}, "STATS_SPLIT"),
                             ({"KV_INNER": "dot"}, "KV_INNER"),
                             ({"STAGE": "report", "REPORT_DIR": ""}, "REPORT_DIR"),
                             ({"STAGE": "report", "REPORT_DIR": "runs/mt_attention_grid/en_de/report"},
                              "REPORT_DIR")],
    "captioning_msrvtt.sh": [({"MAX_EPOCH": "ten"}, "MAX_EPOCH"), ({"LR": "1e-3x"}, "LR"),
                             ({"SPLIT_SIZES": "800 one 100"}, "SPLIT_SIZES"), ({"CONTEXT": "acvii"}, "CONTEXT")],
    "side_by_side.sh": [({"PLAN": PLAN, "JOBS": "0"}, "JOBS"), ({"PLAN": PLAN, "DEADLINE": "9m"}, "DEADLINE"),
                        ({"PLAN": PLAN, "DEVICE": "gpu"}, "DEVICE"), ({"PLAN": "plan.txt"}, "PLAN")],
    "uncertainty_study.sh": [({"SEEDS": "1 two"}, "SEEDS"), ({"SEEDS": "1"}, "SEEDS"),
                             ({"ENSEMBLE": "yes"}, "ENSEMBLE"),
                             ({"MC_DROPOUT": "ten"}, "MC_DROPOUT"),
                             ({"MC_DROPOUT_RATE": "high"}, "MC_DROPOUT_RATE"), ({"STAGE": "study"}, "STAGE"),
                             ({"STAGE": "report", "REPORT_DIR": ""}, "REPORT_DIR"),
                             ({"REPORT_DIR": "runs/uncertainty_study/seed1"}, "REPORT_DIR")],
}

#: per recipe, variables given to a dry run and values its settings line must show (given values,
#: defaults and values the recipe derives from the others)
RESOLVED = {
    "babi.sh": ({"VARIANT": "en-10k", "SEEDS": "3"},
                {"VARIANT": "en-10k", "OUT_DIR": "runs/babi_en-10k", "SEEDS": "3", "EPOCHS": "100",
                 "BATCH_SIZE": ""}),
    "captioning_msvd.sh": ({"CONTEXT": "soft", "SMOKE": "1"},
                           {"CONTEXT": "soft", "SAVE_DIR": "checkpoints/captioning_msvd_soft_smoke",
                            "MAX_UPDATE": "30", "LOG_INTERVAL": "10", "MC_SAMPLES": "10"}),
    "guess_number.sh": ({"FULL": "1"}, {"SETTINGS": "0:10:1000 0:100:10000", "MAX_EPOCH": "100",
                                        "LR_HALVE_EPOCHS": "25", "MODELS": "memn2n t_memn2n"}),
    "mt_iwslt15.sh": ({"TGT": "en", "SRC": "vi", "SMOKE": "1"},
                      {"DATA_BIN": "data-bin/iwslt15_vi_en_smoke",
                       "SAVE_DIR": "checkpoints/mt_iwslt15_vi_en_acvi_smoke", "MAX_EPOCH": "12"}),
    "mt_multi30k.sh": ({"PAIR": "en_fr", "SEEDS": "1 2 3"},
                       {"SRC": "en", "TGT": "fr", "DATA_BIN": "data-bin/multi30k_en_fr", "SEEDS": "1 2 3",
                        "MAX_EPOCH": "12", "THREADS": "1", "EVAL_SPLITS": "valid test2016 test2017"}),
    "mt_pag.sh": ({"CONTEXT": "rpag"}, {"CONTEXT": "rpag", "DATA_BIN": "data-bin/multi30k_char_en_de",
                                        "BEAM": "5", "MAX_TOKENS": "8000"}),
    "mt_transformer_multi30k.sh": ({"SYSTEMS": "acvi", "MAX_UPDATE": "40"},
                                   {"SYSTEMS": "acvi", "MAX_UPDATE": "40", "WARMUP": "500"}),
    "mt_wmt16_en_ro.sh": ({"CONTEXT": "soft"}, {"CONTEXT": "soft", "TGT": "ro",
                                                "SAVE_DIR": "checkpoints/mt_wmt16_en_ro_en_ro_soft"}),
    "summarization_cnndm.sh": ({"SCHEDULE": "cpu", "CONTEXT": "soft"},
                               {"SAVE": "checkpoints/cnndm_soft", "DECODE_PHASE": "5",
                                "PHASES": "2000:50:20:0 4000:100:50:0 5500:200:50:0 6000:400:100:0 "
                                          "6400:400:100:1"}),
    "summarization_cnndm_compare.sh": ({"RUNS": "a=x b=y", "OUT": "o"},
                                       {"RUNS": "a=x b=y", "SCHEDULE": "cpu", "REPORT_METEOR": "none"}),
    "mt_parallel.sh": ({"DATA_BIN": CORPUS, "SEEDS": "4 5"},
                       {"SRC": "en", "TGT": "xx", "SEEDS": "4 5", "EVAL_SPLITS": "valid test", "RUNS": "runs/corpus",
                        "GEN_ARGS": "--max-len-a 2 --max-len-b 10 --remove-bpe sentencepiece", "MAX_EPOCH": "50"}),
    "mt_normalizers.sh": ({"NORMALIZERS": "csparsemax", "PAIR": "en_fr"},
                          {"NORMALIZERS": "csparsemax", "DATA_BIN": "data-bin/multi30k_en_fr", "SEEDS": "1 2 3",
                           "STATS_SPLIT": "test2016", "CNNDM": "0"}),
    "mt_attention_grid.sh": ({"STAGE": "grid", "SCORERS": "additive key-value", "CONFIGS": "i iii"},
                             {"STAGE": "grid", "SCORERS": "additive key-value", "CONFIGS": "i iii",
                              "HEADS": "2", "INPUT_FEEDING": "0", "RUNS": "runs/mt_attention_grid",
                              "BEST_SEEDS": "1 2 3", "DATA_BIN": "data-bin/multi30k_en_de", "REPORT_DIR": ""}),
    "captioning_msrvtt.sh": ({"CONTEXT": "none", "SEED": "2"},
                             {"CONTEXT": "none", "NO_VIDEO": "1", "SEED": "2", "MAX_EPOCH": "8",
                              "SAVE_DIR": "checkpoints/captioning_msrvtt_none_seed2",
                              "ARCH": "acvi_video_captioner_msrvtt_cpu"}),
    "side_by_side.sh": ({"PLAN": PLAN, "DEADLINE": "540"},
                        {"JOBS": "8", "DEADLINE": "540", "DEVICE": "cuda",
                         "LOGS": "runs/side_by_side", "RUNS_ROOT": "runs", "PACK": ""}),
    "uncertainty_study.sh": ({"STAGE": "decode", "SEEDS": "2 3", "MC_DROPOUT": "5"},
                             {"STAGE": "decode", "SEEDS": "2 3", "MC_DROPOUT": "5", "MC_SAMPLES": "10",
                              "BEAM": "10", "ENSEMBLE": "1", "OUT": "runs/uncertainty_study", "DATA_BIN": "data-bin/multi30k_en_de",
                              "MULTI30K_DIR": "data-bin/raw/multi30k", "MC_DROPOUT_RATE": "", "REPORT_DIR": ""}),
}


def _fake_python(folder: Path) -> Path:
    """A ``python`` that writes a marker and fails when asked to run a tool (``-m MODULE``) or a
    script (``FILE.py``): a recipe that starts any leaves the marker. Inline code (``-c``, ``-``:
    a recipe reading its data folder's records) runs in the real interpreter."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text(f'#!/bin/sh\ncase "$1" in -m|*.py) echo "$@" >> "{folder}/STARTED"; exit 97 ;; esac\n'
                    f'exec "{sys.executable}" "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    for name in ("python3", "fairseq-train", "fairseq-generate"):
        (bin_dir / name).symlink_to(fake)
    return fake


def _corpus(folder: Path) -> str:
    """A data-bin as fairseq-acvi-prepare-parallel describes it (en -> xx, sentencepiece)."""
    folder.mkdir()
    (folder / "corpus.json").write_text(json.dumps({"src": "en", "tgt": "xx", "remove_bpe": "sentencepiece"}))
    (folder / "splits.json").write_text(json.dumps({"train": "train", "valid": "valid", "test": "test"}))
    return str(folder)


def _run(recipe: str, env_extra: dict, tmp_path: Path):
    fake = _fake_python(tmp_path)
    env_extra = {k: (_corpus(tmp_path / "corpus") if v == CORPUS else v) for k, v in env_extra.items()}
    if env_extra.get("PLAN") == PLAN:
        (tmp_path / "plan.txt").write_text("# a plan\ntrue\n")
        env_extra["PLAN"] = str(tmp_path / "plan.txt")
    work = tmp_path / "cwd"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DRY_RUN", "ACVI_DATA"}}
    env.update(PATH=f"{fake.parent}{os.pathsep}{env['PATH']}", PYTHON=str(fake), **env_extra)
    proc = subprocess.run(["bash", str(REPO / "recipes" / recipe)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60)
    return proc, work


def settings(stdout: str) -> dict:
    """The ``[recipe] settings:`` line of a recipe's output as {NAME: value}."""
    lines = [line for line in stdout.splitlines() if line.startswith("[recipe] settings: ")]
    assert len(lines) == 1, stdout
    pairs = shlex.split(lines[0][len("[recipe] settings: "):])
    return dict(pair.split("=", 1) for pair in pairs)


def test_every_recipe_is_covered():
    assert sorted(BAD) == RECIPES
    assert sorted(RESOLVED) == RECIPES


@pytest.mark.parametrize("recipe,given,name",
                         [(r, g, n) for r in sorted(BAD) for g, n in BAD[r]],
                         ids=lambda x: x if isinstance(x, str) else None)
def test_a_bad_variable_stops_the_recipe_before_any_work(recipe, given, name, tmp_path):
    proc, work = _run(recipe, given, tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    value = given[name]
    assert re.search(rf"^\[recipe\] error: {name} must be .*, got '{re.escape(value)}'$", proc.stderr, re.M), \
        proc.stderr
    assert not (tmp_path / "STARTED").exists(), (tmp_path / "STARTED").read_text()
    assert list(work.iterdir()) == [], "the recipe made files before stopping"
    assert "[recipe] settings:" not in proc.stdout


@pytest.mark.parametrize("recipe", sorted(RESOLVED))
def test_a_dry_run_prints_the_resolved_settings_and_stops(recipe, tmp_path):
    given, expected = RESOLVED[recipe]
    proc, work = _run(recipe, {**given, "DRY_RUN": "1"}, tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    shown = settings(proc.stdout)
    for name, value in expected.items():
        assert shown.get(name) == value, (name, shown)
    # every variable the recipe reads from the environment is in the line
    assert variables(REPO / "recipes" / recipe) - set(shown) == set()
    assert not (tmp_path / "STARTED").exists()
    assert list(work.iterdir()) == []


def test_dry_run_itself_is_checked(tmp_path):
    proc, _ = _run("mt_multi30k.sh", {"DRY_RUN": "yes"}, tmp_path)
    assert proc.returncode == 2
    assert "[recipe] error: DRY_RUN must be 0|1, got 'yes'" in proc.stderr


@pytest.mark.parametrize("recipe", RECIPES)
def test_the_recipe_page_documents_the_checks(recipe):
    text = (REPO / "recipes" / recipe).read_text()
    page = re.findall(r"docs/recipes/[\w.]+\.md", text)[0]
    doc = (REPO / page).read_text()
    assert "`DRY_RUN`" in doc and "[recipe] settings:" in doc, page
