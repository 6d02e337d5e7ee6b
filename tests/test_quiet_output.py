"""fairseq's habits with the plugin loaded, through the real CLIs on one tiny ACVI model trained for
2 updates:

* no hydra deprecation warnings, ``DEBUG:hydra`` or ``DEBUG:matplotlib`` lines (fairseq_acvi/quiet.py),
  fairseq's own INFO log kept;
* ``fairseq-generate --sacrebleu`` scores with sacreBLEU (fairseq_acvi/sacrebleu_fix.py): the line it
  prints is sacrebleu's ``corpus_bleu`` of the same hypotheses;
* ``--tensorboard-logdir`` writes event files holding the scalars of the training log, and without
  tensorboard the run stops with a message naming the extra to install (fairseq_acvi/tensorboard_check.py).
"""
import re
import sys
import warnings
from argparse import Namespace

import pytest

from conftest import REPO, USER_DIR, run_cli
from test_translation_cli import TINY, logged, reversal_bin, train

#: stderr lines that are the noise this plugin silences (hydra's deprecation warnings, DEBUG records,
#: the torch warnings fairseq's code triggers on every run)
NOISE = re.compile(r"(?i:deprecat|no longer experimental|version_base|ConfigStore schema|strict flag|"
                   r"pin_memory|torch\.cuda\.amp\.autocast)|^DEBUG:|\| DEBUG \|")


def noise(stderr: str):
    return [line for line in stderr.splitlines() if NOISE.search(line)]


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_bin(tmp_path_factory.mktemp("raw"))


@pytest.fixture(scope="module")
def trained(data_bin, tmp_path_factory):
    """ACVI, 2 updates, logged to tensorboard: (checkpoint, tensorboard folder, fairseq-train's result)."""
    save = tmp_path_factory.mktemp("acvi")
    res = train(data_bin, save, "--context-inference", "acvi", "--tensorboard-logdir", save / "tb", updates=2)
    return save / "checkpoint_best.pt", save / "tb", res


@pytest.fixture(scope="module")
def generated(data_bin, trained):
    return run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path", trained[0],
                   "--beam", "3", "--batch-size", "8", "--gen-subset", "test", "--max-len-b", "10",
                   "--sacrebleu")


def test_train_has_no_noise_and_keeps_its_log(trained):
    res = trained[2]
    assert noise(res.stderr) == [], res.stderr[-3000:]
    assert "| INFO | fairseq_cli.train |" in res.stdout
    assert len(logged(res.stdout, "nll_loss")) >= 2          # train_inner lines of both updates


def test_generate_has_no_noise_and_keeps_its_log(generated):
    assert noise(generated.stderr) == [], generated.stderr[-3000:]
    assert "fairseq_cli.generate" in generated.stderr and "Translated 12 sentences" in generated.stderr
    assert "loading model(s) from" in generated.stderr        # INFO records still pass


def test_attention_pictures_has_no_noise(data_bin, trained, tmp_path):
    res = run_cli("fairseq_acvi.cli.attention_pictures", data_bin, "--path", trained[0], "--subset", "test",
                  "--ids", "0", "--beam", "2", "--max-len-b", "10", "--out-dir", tmp_path)
    assert (tmp_path / "test_0.png").is_file()
    assert noise(res.stderr) == [], res.stderr[-3000:]
    assert "matplotlib" not in res.stderr
    assert "fairseq.tasks.translation" in res.stderr          # fairseq's INFO log kept


def test_generate_sacrebleu_flag_scores_with_sacrebleu(generated):
    import sacrebleu
    lines = generated.stdout.splitlines()

    def column(prefix, k):
        rows = {int(line.split("\t")[0][2:]): line.split("\t")[k] for line in lines if line.startswith(prefix)}
        return [rows[i] for i in sorted(rows)]

    hyps, refs = column("D-", 2), column("T-", 1)
    assert len(hyps) == len(refs) == 12
    printed = [line for line in lines if line.startswith("Generate test with beam=3: ")]
    assert len(printed) == 1, lines[-3:]
    expected = sacrebleu.corpus_bleu(hyps, [refs]).format()   # 13a, the scorer's default
    assert printed[0] == f"Generate test with beam=3: {expected}"
    assert "BLEU4" not in printed[0]                          # not fairseq's built-in token BLEU


def test_route_keeps_a_chosen_scorer():
    from fairseq_acvi.sacrebleu_fix import route_sacrebleu_flag
    chosen = Namespace(sacrebleu=True, scoring="chrf")
    assert not route_sacrebleu_flag(chosen) and chosen.scoring == "chrf"
    plain = Namespace(sacrebleu=False, scoring="bleu")
    assert not route_sacrebleu_flag(plain) and plain.scoring == "bleu"
    flag = Namespace(sacrebleu=True, scoring="bleu")
    assert route_sacrebleu_flag(flag)
    assert (flag.scoring, flag.sacrebleu_tokenizer, flag.sacrebleu_lowercase) == ("sacrebleu", "13a", False)


def test_quiet_filters_only_fairseqs_noise():
    from fairseq_acvi import quiet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet.ignore_fairseq_warnings()
        warnings.warn("hydra.experimental.compose() is no longer experimental. Use hydra.compose()")
        warnings.warn("\nThe strict flag in the compose API is deprecated.\n")
        warnings.warn("the KL weight is negative: check --acvi-beta")   # a warning about the run
        warnings.warn("some FutureWarning of the user's code", FutureWarning)
    assert [str(w.message) for w in caught] == ["the KL weight is negative: check --acvi-beta",
                                                "some FutureWarning of the user's code"]


def test_tensorboard_event_files_hold_the_logged_scalars(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    _, logdir, res = trained
    acc = EventAccumulator(str(logdir / "train_inner"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"loss", "nll_loss", "kl", "kl_weight"} <= tags, tags
    for key in ("loss", "nll_loss", "kl"):
        events = acc.Scalars(key)
        assert [e.step for e in events] == [1, 2]
        inner = [line for line in res.stdout.splitlines() if "| train_inner |" in line]
        printed = [float(re.search(rf"\b{key}=([^,\s]+)", line).group(1)) for line in inner]
        assert [round(e.value, 3) for e in events] == pytest.approx(printed, abs=1.5e-3), key
    valid = EventAccumulator(str(logdir / "valid"))
    valid.Reload()
    assert {"loss", "nll_loss", "kl"} <= set(valid.Tags()["scalars"])


def test_tensorboard_missing_stops_naming_the_extra(data_bin, tmp_path):
    """The writer's imports made to fail: fairseq-train stops before the first update, naming the
    option, the folder and the package, and writes neither the folder nor a checkpoint."""
    block = ("import sys; sys.modules['torch.utils.tensorboard'] = None; sys.modules['tensorboardX'] = None; "
             "from fairseq_cli.train import cli_main; sys.argv[0] = 'fairseq-train'; cli_main()")
    logdir = tmp_path / "tb"
    args = [str(data_bin), "--user-dir", USER_DIR, "--task", "translation", "--arch", "acvi_lstm",
            "--criterion", "elbo", "--optimizer", "adam", "--lr", "0.005", "--max-tokens", "1500",
            "--max-update", "2", "--save-dir", str(tmp_path / "ckpt"), "--no-progress-bar",
            "--tensorboard-logdir", str(logdir), "--no-epoch-checkpoints", *TINY]
    import os
    import subprocess
    res = subprocess.run([sys.executable, "-c", block, *args], capture_output=True, text=True, cwd=str(REPO),
                         env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
    assert res.returncode != 0
    assert (f"--tensorboard-logdir {logdir}: tensorboard is not installed" in res.stderr
            and "pip install 'fairseq-acvi[tensorboard]'" in res.stderr), res.stderr[-2000:]
    assert not logdir.exists()
    assert not list((tmp_path / "ckpt").glob("*.pt"))
