"""recipes/captioning_msrvtt.sh end to end on a few dozen real MSR-VTT clips (data script -> fairseq-train ->
fairseq-generate -> scores against all 20 references), its resolved settings, and the evaluation reading
all 20 references of a clip (skipped without ACVI_DATA)."""
import json
import os
import shlex
import subprocess

import pytest

from conftest import REPO, fast_python
from test_msrvtt_data import msrvtt_slice  # noqa: F401  (the fixture)

import prepare_msrvtt as pm


def _recipe(env_extra, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in {"DRY_RUN", "ACVI_DATA"}}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHON=fast_python(), **env_extra)
    return subprocess.run(["bash", "recipes/captioning_msrvtt.sh"], cwd=str(REPO), env=env, capture_output=True,
                          text=True, timeout=timeout)


def _settings(stdout):
    line = next(x for x in stdout.splitlines() if x.startswith("[recipe] settings: "))
    return dict(p.split("=", 1) for p in shlex.split(line[len("[recipe] settings: "):]))


def test_dry_run_resolves_the_no_video_baseline_and_the_run_names():
    res = _recipe({"CONTEXT": "none", "DRY_RUN": "1", "SEED": "2"})
    assert res.returncode == 0, res.stderr
    s = _settings(res.stdout)
    assert s["NO_VIDEO"] == "1" and s["SAVE_DIR"] == "checkpoints/captioning_msrvtt_none_seed2"
    assert s["ARCH"] == "acvi_video_captioner_msrvtt_cpu" and s["MAX_FRAMES"] == "25" and s["BEAM"] == "5"
    s = _settings(_recipe({"CONTEXT": "soft", "DRY_RUN": "1"}).stdout)
    assert s["NO_VIDEO"] == "0" and s["SAVE_DIR"] == "checkpoints/captioning_msrvtt_soft_seed1"
    s = _settings(_recipe({"CONTEXT": "none", "NO_VIDEO": "0", "DRY_RUN": "1"}).stdout)
    assert s["SAVE_DIR"] == "checkpoints/captioning_msrvtt_none_video_seed1"
    bad = _recipe({"ABLATION": "half", "DRY_RUN": "1"})
    assert bad.returncode == 2 and "ABLATION must be" in bad.stderr
    bad = _recipe({"SPLIT_SIZES": "800 a 100", "DRY_RUN": "1"})
    assert bad.returncode == 2 and "SPLIT_SIZES must be" in bad.stderr


@pytest.mark.slow  # two recipe runs (train 4 updates, 3 decodes, scoring): ~25 s idle, ~95 s on the busy 2 cores
def test_recipe_smoke_run_on_30_real_clips(msrvtt_slice, tmp_path):  # noqa: F811
    """SMOKE=1 ACVI: the data folder is built from the slice, a few updates, both splits decoded (one caption
    per clip) and scored; a rerun with TRAIN=0 MC_SAMPLES=0 ABLATION=shuffle TAG=_x decodes again beside it."""
    src, _ = msrvtt_slice
    data, save = tmp_path / "data", tmp_path / "save"
    common = {"MSRVTT_DIR": str(src), "DATA_DIR": str(data), "SAVE_DIR": str(save), "SPLIT_SIZES": "20 5 5",
              "MIN_COUNT": "1", "SMOKE": "1", "MAX_UPDATE": "4", "METRICS": "BLEU-4 ROUGE-L CIDEr",
              "GEN_ARGS": "--max-len-b 8"}
    res = _recipe(dict(common, CONTEXT="acvi"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "train: 20 clips (video0-video19), 400 captions" in res.stdout
    assert (save / "checkpoint_best.pt").is_file() and (save / "checkpoint_last.pt").is_file()
    assert "num_updates 4" in (save / "train.log").read_text()
    for split, first in (("valid", 20), ("test", 25)):
        hyps = [x for x in (save / f"gen_{split}.txt").read_text().splitlines() if x.startswith("H-")]
        assert sorted(int(h.split("\t")[0][2:]) for h in hyps) == list(range(5))
    scores = json.loads((save / "scores.json").read_text())
    assert set(scores) == {"valid", "test"} and set(scores["test"]) == {"BLEU-4", "ROUGE-L", "CIDEr"}
    assert "never with published" in (save / "scores.txt").read_text()
    assert "SA  Structured" not in res.stdout  # the MSVD Table 3 is not printed beside these figures

    res = _recipe(dict(common, CONTEXT="acvi", TRAIN="0", MC_SAMPLES="0", ABLATION="shuffle", TAG="_k0_shuffle",
                       DECODE_SPLITS="test"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (save / "gen_test_k0_shuffle.txt").is_file()
    assert set(json.loads((save / "scores_k0_shuffle.json").read_text())) == {"test"}
    assert _settings(res.stdout)["ABLATION"] == "shuffle" and "done training" not in res.stdout


def test_evaluation_reads_all_20_references(msrvtt_slice, tmp_path):  # noqa: F811
    """A hypothesis equal to a clip's 20th (last) reference scores BLEU-4 1 and the best CIDEr-D only if all
    20 references are read; the same with the first reference scores the same, a hypothesis that is no
    reference scores less."""
    from fairseq_acvi.cli.eval_captioning import evaluate_split
    src, captions = msrvtt_slice
    out = tmp_path / "out"
    pm.prepare(src, out, sizes=(20, 5, 5))
    test_clips = (out / "test.videos").read_text().split()
    scores = {}
    for which in (0, 19):
        hyp = tmp_path / f"hyp{which}.tsv"
        hyp.write_text("".join(f"{v}\t{' '.join(captions[v][which].split())}\n" for v in test_clips))
        scores[which] = evaluate_split(str(out / "test.tsv"), str(hyp), metrics=("BLEU-4", "CIDEr"))
    assert scores[19]["BLEU-4"] == pytest.approx(1.0) and scores[0]["BLEU-4"] == pytest.approx(1.0)
    other = tmp_path / "other.tsv"   # each clip captioned with another clip's last caption
    other.write_text("".join(f"{v}\t{' '.join(captions[test_clips[(i + 1) % 5]][19].split())}\n"
                             for i, v in enumerate(test_clips)))
    worse = evaluate_split(str(out / "test.tsv"), str(other), metrics=("BLEU-4", "CIDEr"))
    assert worse["BLEU-4"] < 0.9 and worse["CIDEr"] < scores[19]["CIDEr"]
