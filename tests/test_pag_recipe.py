"""recipes/mt_pag.sh with KEEP (not trained here): a run kept in the results page is not made again,
and each new run is kept there once decoded. The recipe runs with a PYTHON that only records how
it was started."""
import os
import subprocess
from pathlib import Path

from conftest import recording_python

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "mt_pag.sh"


def _work(tmp_path):
    """A folder with the character data's files the recipe checks, and a PYTHON that records."""
    fake, marker = recording_python(tmp_path)
    work = tmp_path / "work"
    data = work / "data-bin" / "multi30k_char_en_de"
    data.mkdir(parents=True)
    (data / "dict.en.txt").write_text("a 1\n", encoding="utf-8")
    (data / "splits.json").write_text('{"valid": "valid", "test2016": "test"}', encoding="utf-8")
    return work, dict(os.environ, PYTHON=str(fake)), marker


def _recipe(work, env):
    return subprocess.run(["bash", str(RECIPE)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=60)


def test_keep_skips_a_kept_run_and_keeps_each_new_one_once_decoded(tmp_path):
    work, env, marker = _work(tmp_path)
    kept = work / "kept" / "outputs" / "en_de" / "pag_seed1"
    kept.mkdir(parents=True)
    for split in ("valid", "test2016"):
        (kept / f"bleu_{split}.json").write_text("{}", encoding="utf-8")
    half = work / "kept" / "outputs" / "en_de" / "pag_seed3"     # one split short: made again
    half.mkdir(parents=True)
    (half / "bleu_valid.json").write_text("{}", encoding="utf-8")
    for seed in (2, 3):
        live = work / "runs" / "pag" / "en_de" / f"pag_seed{seed}"
        live.mkdir(parents=True)
        (live / "checkpoint_best.pt").write_bytes(b"")
    proc = _recipe(work, dict(env, SEEDS="1 2 3", TRAIN="0", KEEP="kept"))
    assert proc.returncode == 0, proc.stderr
    assert "[recipe] kept in kept: pag_seed1" in proc.stderr
    assert "pag_seed3" not in proc.stderr
    calls = marker.read_text(encoding="utf-8").splitlines()
    assert not any("seed1" in c or "seed 1 " in c for c in calls), calls
    keeps = [c for c in calls if "keep_runs" in c]
    assert keeps == [f"-m fairseq_acvi.cli.keep_runs runs/pag/en_de/pag_seed{s} --out-dir kept"
                     for s in (2, 3)]
    for s in (2, 3):                              # each kept after its two decodes were scored
        scores = [i for i, c in enumerate(calls) if f"pag_seed{s}/bleu_" in c]
        assert len(scores) == 2 and max(scores) < calls.index(keeps[s - 2])


def test_without_keep_nothing_is_kept(tmp_path):
    work, env, marker = _work(tmp_path)
    live = work / "runs" / "pag" / "en_de" / "pag_seed1"
    live.mkdir(parents=True)
    (live / "checkpoint_best.pt").write_bytes(b"")
    proc = _recipe(work, dict(env, TRAIN="0"))
    assert proc.returncode == 0, proc.stderr
    assert not any("keep_runs" in c for c in marker.read_text(encoding="utf-8").splitlines())


def test_keep_must_lie_outside_the_runs(tmp_path):
    work, env, marker = _work(tmp_path)
    proc = _recipe(work, dict(env, KEEP="runs/pag/en_de/page"))
    assert proc.returncode == 2
    assert ("[recipe] error: KEEP must be outside RUNS/PAIR (runs/pag/en_de), got "
            "'runs/pag/en_de/page'") in proc.stderr
    assert not marker.exists()
