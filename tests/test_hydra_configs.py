"""The hydra configs shipped in fairseq_acvi/config: each preset picks the best checkpoint by
likelihood, and a tiny run of one through fairseq-acvi-hydra-train (from another folder, no
--config-dir, no common.user_dir) writes a checkpoint that fairseq-acvi-generate decodes."""
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from conftest import USER_DIR
from test_plugin_commands import run_command
from test_translation_cli import reversal_bin

CONFIGS = sorted((Path(USER_DIR) / "config").glob("*.yaml"))


def test_the_presets_ship_and_choose_by_likelihood():
    names = {p.stem for p in CONFIGS}
    assert {"multi30k_soft", "multi30k_acvi", "multi30k_transformer_acvi"} <= names
    for path in CONFIGS:
        cfg = OmegaConf.load(path)
        assert cfg.checkpoint.best_checkpoint_metric == "nll_loss", path.name
        assert cfg.criterion._name == "elbo" and OmegaConf.is_missing(cfg.task, "data"), path.name
    assert OmegaConf.load(Path(USER_DIR) / "config" / "multi30k_acvi.yaml").model.context_inference == "acvi"


def test_a_tiny_hydra_run_writes_a_checkpoint_that_generate_decodes(tmp_path):
    data = reversal_bin(tmp_path)
    save = tmp_path / "ckpt"
    tiny = [f"+model.{k}=16" for k in ("encoder_embed_dim", "decoder_embed_dim", "encoder_hidden_size",
                                        "decoder_hidden_size", "attention_dim")]
    run_command("fairseq-acvi-hydra-train", "--config-name", "multi30k_acvi", f"task.data={data}",
                f"checkpoint.save_dir={save}", "optimization.max_update=3",
                "checkpoint.no_epoch_checkpoints=true", f"hydra.run.dir={tmp_path / 'hydra'}", *tiny,
                cwd=tmp_path)
    from fairseq import checkpoint_utils
    state = checkpoint_utils.load_checkpoint_to_cpu(str(save / "checkpoint_best.pt"))
    assert state["cfg"]["checkpoint"]["best_checkpoint_metric"] == "nll_loss"
    assert state["cfg"]["model"]["_name"] == "acvi_lstm_multi30k"
    assert state["cfg"]["model"]["context_inference"] == "acvi"
    assert state["cfg"]["model"]["encoder_hidden_size"] == 16
    assert state["cfg"]["common"]["user_dir"] == str(Path(USER_DIR).resolve())
    assert state["optimizer_history"][-1]["num_updates"] == 3
    res = run_command("fairseq-acvi-generate", data, "--path", save / "checkpoint_best.pt",
                      "--gen-subset", "test", "--beam", "2", cwd=tmp_path)
    assert len([ln for ln in res.stdout.splitlines() if ln.startswith("H-")]) == 12
