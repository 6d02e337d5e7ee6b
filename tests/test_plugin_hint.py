"""fairseq_acvi/plugin_hint.py: plain fairseq loading a fairseq-acvi checkpoint without --user-dir
is told to add --user-dir or use the fairseq-acvi-* command, never to turn weights-only loading off;
the start-up hook costs no torch import (docs/commands.md)."""
import importlib.util
import pickle
import subprocess
import sys
import types

import pytest
import torch

from conftest import USER_DIR

spec = importlib.util.spec_from_file_location("plugin_hint_under_test", f"{USER_DIR}/plugin_hint.py")
hint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hint)

TORCH_ERROR = ("Weights only load failed ... Re-running `torch.load` with `weights_only` set to "
               "`False` will likely succeed, but it can result in arbitrary code execution.")


def checkpoint(path, user_dir):
    torch.save({"cfg": {"common": {"user_dir": user_dir}, "model": {"_name": "x"}}}, path)
    return path


def test_a_checkpoint_names_the_plugin_by_its_user_dir(tmp_path):
    assert hint.trained_with_plugin(str(checkpoint(tmp_path / "a.pt", "fairseq_acvi")))
    assert hint.trained_with_plugin(str(checkpoint(tmp_path / "b.pt", "/x/y/fairseq_acvi/")))
    assert not hint.trained_with_plugin(str(checkpoint(tmp_path / "c.pt", None)))
    assert not hint.trained_with_plugin(str(checkpoint(tmp_path / "d.pt", "/x/fairseq_acvi_old")))
    (tmp_path / "t.txt").write_text("not a checkpoint\n")
    assert not hint.trained_with_plugin(str(tmp_path / "t.txt"))


def fake_checkpoint_utils(error):
    def load_checkpoint_to_cpu(path, arg_overrides=None):
        raise error
    return types.SimpleNamespace(load_checkpoint_to_cpu=load_checkpoint_to_cpu)


def test_only_the_weights_only_error_of_a_plugin_checkpoint_is_rewritten(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "fairseq_acvi", raising=False)    # plain fairseq
    monkeypatch.setattr(sys, "argv", ["/venv/bin/fairseq-validate", "data"])
    ours, other = checkpoint(tmp_path / "a.pt", "fairseq_acvi"), checkpoint(tmp_path / "b.pt", None)
    utils = fake_checkpoint_utils(pickle.UnpicklingError(TORCH_ERROR))
    hint.wrap(utils)
    hint.wrap(utils)                                                   # idempotent
    assert utils.load_checkpoint_to_cpu.__wrapped__.__name__ == "load_checkpoint_to_cpu"
    assert not hasattr(utils.load_checkpoint_to_cpu.__wrapped__, "__wrapped__")
    with pytest.raises(pickle.UnpicklingError) as err:
        utils.load_checkpoint_to_cpu(str(ours))
    msg = str(err.value)
    assert msg.startswith(f"{ours} was trained with the fairseq-acvi plugin")
    assert f"--user-dir {hint.PLUGIN_DIR}" in msg and "`fairseq-acvi-validate`" in msg
    assert "`False`" not in msg and err.value.__suppress_context__     # no torch advice
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        utils.load_checkpoint_to_cpu(str(other))                        # not ours: unchanged
    utils = fake_checkpoint_utils(FileNotFoundError("gone.pt"))
    hint.wrap(utils)
    with pytest.raises(FileNotFoundError, match="gone.pt"):
        utils.load_checkpoint_to_cpu(str(ours))                         # another error: unchanged
    monkeypatch.setitem(sys.modules, "fairseq_acvi", types.ModuleType("fairseq_acvi"))
    utils = fake_checkpoint_utils(pickle.UnpicklingError(TORCH_ERROR))
    hint.wrap(utils)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        utils.load_checkpoint_to_cpu(str(ours))                         # plugin loaded: not ours


def test_the_start_up_hook_is_installed_and_imports_nothing_heavy(tmp_path):
    code = ("import sys; print(any(getattr(f, '_fairseq_acvi_hint', False) for f in sys.meta_path),"
            " 'torch' in sys.modules, 'fairseq' in sys.modules, 'fairseq_acvi' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         check=True).stdout.split()
    assert out == ["True", "False", "False", "False"], (
        "the .pth hook is missing: reinstall the plugin (pip install -e .)" if out[0] == "False"
        else out)
    code = ("import fairseq.checkpoint_utils as c; print(getattr(c.load_checkpoint_to_cpu, "
            "'_fairseq_acvi_hint', False), 'fairseq_acvi' in __import__('sys').modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         check=True).stdout.split()
    assert out == ["True", "False"]
