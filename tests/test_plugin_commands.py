"""fairseq's commands with the plugin loaded (fairseq-acvi-train, -generate, -validate, -interactive,
-hydra-train): they add ``--user-dir`` naming the installed package when none is given, so they work
from any folder (docs/commands.md)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import USER_DIR
from fairseq_acvi import cli
from test_translation_cli import TINY, reversal_bin

PLUGIN = str(Path(USER_DIR).resolve())


def test_plugin_dir_is_the_imported_package():
    import fairseq_acvi
    assert cli.plugin_dir() == os.path.dirname(os.path.abspath(fairseq_acvi.__file__)) == PLUGIN


@pytest.mark.parametrize("argv, expected", [
    (["data", "--path", "c.pt"], ["--user-dir", PLUGIN, "data", "--path", "c.pt"]),
    (["data", "--user-dir", "mine"], ["data", "--user-dir", "mine"]),
    (["data", "--user-dir=mine"], ["data", "--user-dir=mine"]),
    ([], ["--user-dir", PLUGIN]),
])
def test_user_dir_is_added_only_when_absent(argv, expected):
    assert cli.with_user_dir(argv) == expected


@pytest.mark.parametrize("argv, expected", [
    (["task.data=d"], ["task.data=d", f"common.user_dir={PLUGIN}"]),
    (["common.user_dir=mine"], ["common.user_dir=mine"]),
    (["+common.user_dir=mine"], ["+common.user_dir=mine"]),
    (["++common.user_dir=mine", "x=1"], ["++common.user_dir=mine", "x=1"]),
])
def test_hydra_override_is_added_only_when_absent(argv, expected):
    assert cli.with_hydra_user_dir(argv) == expected


def run_command(name, *args, cwd, check=True, stdin=None, timeout=600):
    """Run the installed console command ``name`` in the folder ``cwd``; fail showing its output."""
    exe = shutil.which(name)
    assert exe, f"{name} is not on PATH: reinstall the plugin (pip install -e .)"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    res = subprocess.run([exe, *[str(a) for a in args]], capture_output=True, text=True, env=env,
                         cwd=str(cwd), input=stdin, timeout=timeout)
    if check and res.returncode != 0:
        pytest.fail(f"{name} {' '.join(map(str, args))} exited {res.returncode}\n--- stdout\n"
                    f"{res.stdout[-4000:]}\n--- stderr\n{res.stderr[-4000:]}")
    return res


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A folder outside the repository holding a tiny data-bin (``bin``); the commands run there."""
    folder = tmp_path_factory.mktemp("elsewhere")
    reversal_bin(folder)
    return folder


@pytest.fixture(scope="module")
def trained(elsewhere):
    """fairseq-acvi-train run in ``elsewhere`` without --user-dir: 4 updates of a tiny ACVI LSTM."""
    res = run_command("fairseq-acvi-train", "bin", "--task", "translation", "--arch", "acvi_lstm",
                      "--context-inference", "acvi", "--criterion", "elbo", "--optimizer", "adam",
                      "--lr", "0.005", "--max-tokens", "1500", "--max-update", "4", "--save-dir", "ckpt",
                      "--no-progress-bar", "--log-format", "simple", "--seed", "1",
                      "--no-epoch-checkpoints", *TINY, cwd=elsewhere)
    ckpt = elsewhere / "ckpt" / "checkpoint_last.pt"
    assert ckpt.is_file(), res.stderr[-2000:]
    return ckpt


def test_train_from_any_folder_records_the_installed_plugin(trained):
    from fairseq import checkpoint_utils
    state = checkpoint_utils.load_checkpoint_to_cpu(str(trained))
    assert state["cfg"]["common"]["user_dir"] == PLUGIN          # added by the command
    assert state["cfg"]["model"].context_inference == "acvi"


def test_generate_from_any_folder_without_user_dir(elsewhere, trained):
    res = run_command("fairseq-acvi-generate", "bin", "--path", trained, "--beam", "2",
                      "--gen-subset", "test", "--batch-size", "6", "--print-uncertainty",
                      cwd=elsewhere)
    hyps = [ln for ln in res.stdout.splitlines() if ln.startswith("H-")]
    u = [ln for ln in res.stdout.splitlines() if ln.startswith("U-")]
    assert len(hyps) == len(u) == 12


def test_plain_fairseq_without_user_dir_is_told_what_to_do(elsewhere, trained):
    res = run_command("fairseq-generate", "bin", "--path", trained, "--gen-subset", "test",
                      cwd=elsewhere, check=False)
    assert res.returncode != 0
    assert (f"{trained} was trained with the fairseq-acvi plugin, which this command has not "
            f"loaded: add `--user-dir {PLUGIN}` or run `fairseq-acvi-generate`") in res.stderr
    assert "weights_only` set to `False`" not in res.stderr            # torch's advice is gone
