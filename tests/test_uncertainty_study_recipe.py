"""recipes/uncertainty_study.sh's decode stage with a python that records the commands it is given
(and prints fairseq-generate's closing line): what it decodes per seed, the ensemble only with
ENSEMBLE=1, and no decode of a training that has not finished (its checkpoint_best.pt would be
decoded and its outputs kept as if final)."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _setup(tmp_path: Path, finished=("soft", "acvi")):
    """A data-bin with splits.json, run folders of seed 1 (train.log says "done training" for the
    contexts in ``finished``), and a fake python; -> (env, the file the fake python appends to)."""
    calls = tmp_path / "CALLS"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\ncase "$1" in -m) echo "$@" >> "%s"; echo "Translated 1 sentences"; '
                    'exit 0 ;; esac\nexec "%s" "$@"\n' % (calls, sys.executable))
    fake.chmod(0o755)
    data = tmp_path / "data-bin"
    data.mkdir()
    (data / "splits.json").write_text(json.dumps({"valid": "valid", "test2016": "test",
                                                  "test2017": "test1"}))
    for context in ("soft", "acvi"):
        run = tmp_path / "runs" / "en_de" / f"{context}_seed1"
        run.mkdir(parents=True)
        (run / "checkpoint_best.pt").write_bytes(b"")
        (run / "train.log").write_text("epoch 001 | valid\n" + ("done training in 1.0 seconds\n"
                                                                if context in finished else ""))
    env = {k: v for k, v in os.environ.items() if k not in {"DRY_RUN", "ACVI_DATA"}}
    env.update(PYTHON=str(fake), DATA_BIN=str(data), RUNS=str(tmp_path / "runs"),
               OUT=str(tmp_path / "study"), STAGE="decode", SEEDS="1", ENSEMBLE="0")
    return env, calls


def _run(env, tmp_path):
    return subprocess.run(["bash", str(REPO / "recipes" / "uncertainty_study.sh")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)


def test_one_seed_without_the_ensemble_decodes_its_three_methods_on_both_sets(tmp_path):
    env, calls = _setup(tmp_path)
    proc = _run(env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert len(lines) == 6                            # soft, acvi, mcdrop × test2016, coco
    assert all(line.startswith("-m fairseq_acvi.cli.generate") for line in lines)
    assert sum("--mc-dropout 10" in line for line in lines) == 2
    assert sum("{'mc_samples': 10}" in line for line in lines) == 2
    assert not any(":" in line.split("--path ")[1].split()[0] for line in lines)   # no ensemble
    assert sorted(p.name for p in (tmp_path / "study" / "seed1").glob("*.txt")) == [
        "acvi_coco.txt", "acvi_test2016.txt", "mcdrop_coco.txt", "mcdrop_test2016.txt",
        "soft_coco.txt", "soft_test2016.txt"]


def test_an_unfinished_training_is_not_decoded(tmp_path):
    env, calls = _setup(tmp_path, finished=("soft",))
    proc = _run(env, tmp_path)
    assert proc.returncode == 2
    log = tmp_path / "runs" / "en_de" / "acvi_seed1" / "train.log"
    assert f"[recipe] error: {log}: the training of acvi seed 1 has not finished" in proc.stderr
    assert not calls.exists()


def test_one_seed_needs_the_ensemble_off(tmp_path):
    env, calls = _setup(tmp_path)
    proc = _run(dict(env, ENSEMBLE="1"), tmp_path)
    assert proc.returncode == 2
    assert "SEEDS must be at least two seeds" in proc.stderr and not calls.exists()


def test_the_report_stage_reads_every_seeds_measures_and_keeps_them_and_their_inputs(tmp_path):
    env, calls = _setup(tmp_path)
    for s in (1, 2):
        d = tmp_path / "study" / f"seed{s}" / "measures"
        d.mkdir(parents=True)
        (d / "measures.json").write_text(f'{{"seed": {s}}}')
        (d / "measures.md").write_text(f"# seed {s}\n")
    report = tmp_path / "report"
    proc = _run(dict(env, STAGE="report", SEEDS="1 2", ENSEMBLE="1", REPORT_DIR=str(report)),
                tmp_path)
    assert proc.returncode == 0, proc.stderr
    line, kept = calls.read_text().splitlines()
    study = tmp_path / "study"
    assert line == (f"-m fairseq_acvi.generation.uncertainty_report --measures "
                    f"{study}/seed1/measures/measures.json {study}/seed2/measures/measures.json "
                    f"--runs {tmp_path}/runs/en_de --mc-samples 10 --mc-dropout 10 "
                    f"--out-dir {report}")
    # then what the measures were computed from, the ensemble's once
    assert kept == (f"-m fairseq_acvi.generation.uncertainty_kept --study {study} --seeds 1 2 "
                    f"--ensemble ensemble --out-dir {report}")
    assert (report / "seed2" / "measures.json").read_text() == '{"seed": 2}'
    assert (report / "seed1" / "measures.md").read_text() == "# seed 1\n"


def test_all_without_report_dir_plans_no_report(tmp_path):
    env, _ = _setup(tmp_path)
    proc = _run(dict(env, STAGE="all", DRY_RUN="1"), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[recipe] plan: report: skipped, REPORT_DIR is empty" in proc.stdout
    proc = _run(dict(env, STAGE="all", DRY_RUN="1", REPORT_DIR="out/report"), tmp_path)
    assert "[recipe] plan: report: generation.uncertainty_report of seeds '1' -> out/report/" in proc.stdout
