"""prepare_cnndm.sh → fairseq-train (phased) → fairseq-generate → restore_oov → eval, via the CLIs.

Data: a few articles of the shared CNN/DM sample (``shared_data`` fixture; skipped when absent),
a 300-word vocabulary so that the articles have OOV position markers, tiny model dimensions.
"""
import json
import os
import re
import subprocess

import pytest
import torch

from conftest import REPO, SHARED_DATA, USER_DIR, fast_python, run_cli

TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-hidden-size", "16", "--attention-dim", "16", "--decoder-out-embed-dim", "16"]
SPLITS = {"train": (0, 40), "valid": (40, 48), "test": (48, 54)}


@pytest.fixture(scope="module")
def cnndm_bin(tmp_path_factory):
    # the module-scoped twin of the ``shared_data`` fixture (same path, same clean skip)
    sample = SHARED_DATA / "cnn_dm_sample" / "summeval"
    if not (sample / "test.source").is_file():
        pytest.skip("cnn_dm_sample/summeval is not present")
    raw = tmp_path_factory.mktemp("cnndm_raw")
    src = (sample / "test.source").read_text(encoding="utf-8").splitlines()
    tgt = (sample / "test.target").read_text(encoding="utf-8").splitlines()
    args = []
    for split, (a, b) in SPLITS.items():
        (raw / f"{split}.source").write_text("\n".join(src[a:b]) + "\n", encoding="utf-8")
        (raw / f"{split}.target").write_text("\n".join(tgt[a:b]) + "\n", encoding="utf-8")
        args += [f"--{split}-source", raw / f"{split}.source", f"--{split}-target",
                 raw / f"{split}.target"]
    out = raw / "bin"
    env = dict(os.environ, OUT_DIR=str(raw / "text"), BIN_DIR=str(out), VOCAB_SIZE="300",
               MAX_SOURCE_POSITIONS="60", MAX_TARGET_POSITIONS="20", PYTHON=fast_python(),
               OMP_NUM_THREADS="1")
    res = subprocess.run(["bash", "data_scripts/prepare_cnndm.sh", *map(str, args)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def train(data, save_dir, *extra, updates=4, src_pos=61, tgt_pos=21):
    return run_cli("fairseq_cli.train", data, "--user-dir", USER_DIR,
                   "--task", "pointer_summarization", "--source-lang", "src", "--target-lang", "tgt",
                   "--arch", "acvi_pointer_generator", "--criterion", "elbo",
                   "--optimizer", "adam", "--lr", "0.005", "--batch-size", "8",
                   "--max-update", updates, "--truncate-source", "--truncate-target",
                   "--max-source-positions", src_pos, "--max-target-positions", tgt_pos,
                   "--save-dir", save_dir, "--no-progress-bar", "--log-interval", "1",
                   "--log-format", "simple", "--seed", "1", "--no-epoch-checkpoints", *TINY, *extra)


def logged(text, key):
    return [float(v) for v in re.findall(rf"\| {key} (\S+)", text)]


def assert_finite(text, keys):
    for key in keys:
        vals = logged(text, key)
        assert vals, f"no {key} logged"
        assert all(v == v and abs(v) != float("inf") for v in vals), (key, vals)


@pytest.mark.parametrize("variant", [pytest.param("soft", marks=pytest.mark.slow), "acvi"])
def test_phased_training_generate_restore_evaluate(cnndm_bin, tmp_path, variant):
    p2 = tmp_path / "phase2"
    if variant == "acvi":
        # phase 1: short sources and targets, no coverage
        p1 = tmp_path / "phase1"
        res = train(cnndm_bin, p1, "--context-inference", variant, updates=3, src_pos=11,
                    tgt_pos=6)
        text = res.stdout + res.stderr
        assert_finite(text, ("loss", "nll_loss", "kl"))
        assert "coverage" not in logged_keys(text)
        # phase 2: longer limits, coverage on; same parameter set -> optimizer state kept, the
        # update counter continues (--max-update is cumulative), the data loader restarts
        res = train(cnndm_bin, p2, "--context-inference", variant, "--coverage",
                    "--restore-file", p1 / "checkpoint_last.pt", "--reset-dataloader", updates=6)
        text = res.stdout + res.stderr
        assert re.search(r"num_updates 6\b", text)
        assert not re.search(r"num_updates [1-3]\b", text)
        assert all(v >= 0 for v in logged(text, "kl"))
    else:  # one phase with coverage (the phased resume is checked once, with acvi)
        res = train(cnndm_bin, p2, "--context-inference", variant, "--coverage", updates=3)
        text = res.stdout + res.stderr
    assert_finite(text, ("loss", "nll_loss", "coverage"))

    gen = run_cli("fairseq_cli.generate", cnndm_bin, "--user-dir", USER_DIR, "--path",
                  p2 / "checkpoint_last.pt", "--task", "pointer_summarization",
                  "--source-lang", "src", "--target-lang", "tgt", "--gen-subset", "test",
                  "--beam", "5", "--batch-size", "4", "--max-len-a", "0", "--max-len-b", "15",
                  "--min-len", "3", "--model-overrides", "{'mc_samples': 3}")
    hyps = [ln for ln in gen.stdout.splitlines() if ln.startswith("H-")]
    assert len(hyps) == 6, gen.stdout[-2000:]
    (tmp_path / "gen.out").write_text(gen.stdout)
    run_cli("data_scripts.restore_oov", "--src", cnndm_bin / "test.article",
            "--hyp", tmp_path / "gen.out", "--out", tmp_path / "hyp.txt")
    restored = (tmp_path / "hyp.txt").read_text().splitlines()
    assert len(restored) == 6 and not any("<unk-" in h for h in restored)
    run_cli("fairseq_acvi.cli.eval_summarization", "--hyp", tmp_path / "hyp.txt",
            "--ref", cnndm_bin / "test.summary", "--src", cnndm_bin / "test.article",
            "--dict", cnndm_bin / "dict.src.txt", "--meteor", "none",
            "--json", tmp_path / "scores.json")
    scores = json.loads((tmp_path / "scores.json").read_text())
    rouge = [v for k, v in scores.items() if "rouge" in k.lower() and isinstance(v, (int, float))]
    assert rouge and all(0.0 <= v <= 100.0 for v in rouge), scores


def logged_keys(text):
    return set(re.findall(r"\| (\w+) \S+", text))


def test_task_truncates_and_demotes_markers(cnndm_bin):
    from fairseq_acvi.tasks.pointer_summarization import (PointerSummarizationConfig,
                                                          PointerSummarizationTask)

    def load(src_pos, tgt_pos, truncate=True):
        cfg = PointerSummarizationConfig(data=str(cnndm_bin), source_lang="src",
                                         target_lang="tgt", max_source_positions=src_pos,
                                         max_target_positions=tgt_pos, truncate_source=truncate,
                                         truncate_target=truncate, dataset_impl="mmap")
        task = PointerSummarizationTask.setup_task(cfg)
        task.load_dataset("train")
        return task, task.datasets["train"]

    task, full = load(1024, 1024, truncate=False)
    _, cut = load(11, 6)
    d = task.target_dictionary
    first = task.first_marker
    assert full.src_sizes.max() == 61 and cut.src_sizes.max() == 11 and cut.tgt_sizes.max() == 6
    n_demoted = 0
    for i in range(len(full)):
        fs, ft = full[i]["source"], full[i]["target"]
        cs, ct = cut[i]["source"], cut[i]["target"]
        assert cs[-1] == d.eos() and len(cs) == min(len(fs), 11)
        assert torch.equal(cs[:-1], fs[: len(cs) - 1])            # markers j < 10 kept as is
        if len(ft) > 6:                                            # cut: 6 words, no </s>
            assert len(ct) == 6 and not (ct == d.eos()).any()
        else:
            assert len(ct) == len(ft) and ct[-1] == d.eos()
        beyond = (ft[: len(ct)] - first) >= 10
        n_demoted += int(beyond.sum())
        assert torch.equal(ct[beyond], torch.full_like(ct[beyond], d.unk()))
        assert torch.equal(ct[~beyond], ft[: len(ct)][~beyond])
    assert n_demoted > 0, "the sample should have target markers past source position 10"


@pytest.mark.parametrize("side,src_text,tgt_text,message", [
    ("summary", "the police said .\nthe man said .\n", "police said .\n\n",
     r"train\.src-tgt\.tgt\.bin: empty summary at line 2"),
    ("article", "\nthe man said .\n", "police said .\nman said .\n",
     r"train\.src-tgt\.src\.bin: empty article at line 1"),
])
def test_empty_line_is_a_clear_error(cnndm_bin, tmp_path, side, src_text, tgt_text, message):
    from fairseq import options
    from fairseq_cli import preprocess

    from fairseq_acvi.tasks.pointer_summarization import (PointerSummarizationConfig,
                                                          PointerSummarizationTask)

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.src").write_text(src_text)
    (raw / "train.tgt").write_text(tgt_text)
    d = str(cnndm_bin / "dict.src.txt")
    args = options.get_preprocessing_parser().parse_args(
        ["--source-lang", "src", "--target-lang", "tgt", "--trainpref", str(raw / "train"),
         "--destdir", str(raw / "bin"), "--srcdict", d, "--tgtdict", d, "--workers", "1"])
    preprocess.main(args)
    cfg = PointerSummarizationConfig(data=str(raw / "bin"), source_lang="src", target_lang="tgt",
                                     dataset_impl="mmap", truncate_source=True,
                                     truncate_target=True)
    task = PointerSummarizationTask.setup_task(cfg)
    with pytest.raises(ValueError, match=message):
        task.load_dataset("train")


def test_memory_efficient_fp16_train_step_has_no_nan(cnndm_bin, tmp_path):
    res = train(cnndm_bin, tmp_path, "--context-inference", "acvi", "--coverage",
                "--memory-efficient-fp16", "--fp16-init-scale", "8", updates=2)
    text = res.stdout + res.stderr
    assert_finite(text, ("loss", "nll_loss", "kl", "coverage"))
    assert "loss_scale" in text
