"""Every option is checked where it is read, with an error naming it:
ACVI's defaults and the best checkpoint by likelihood, ranges and types, options of another
variant, unknown --model-overrides keys, checkpoints that carry a checksum, files that are not
checkpoints, an empty line in fairseq-interactive, the logged KL weight and --valid-mc-samples."""
import argparse
import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO, USER_DIR, run_cli
from toy_parallel import write_toy_corpus

from fairseq_acvi.checkpoint_integrity import CHECKSUM_KEY, CheckpointError, state_digest
from fairseq_acvi.criterions.elbo import mc_samples_of
from fairseq_acvi.models.lstm_seq2seq import acvi_lstm_multi30k, base_architecture
from fairseq_acvi.modules.context import build_context

TINY = ["--encoder-embed-dim", "16", "--encoder-hidden-size", "16", "--decoder-embed-dim", "16",
        "--decoder-hidden-size", "16", "--attention-dim", "16"]


# -- unit checks ---------------------------------------------------------------------------------
@pytest.mark.parametrize("option, value, message", [
    ("acvi_beta", -1.0, "--acvi-beta must be ≥ 0"),
    ("acvi_beta", float("nan"), "--acvi-beta must be ≥ 0"),
    ("acvi_gumbel_temperature", 0.0, "--acvi-gumbel-temperature must be > 0"),
    ("acvi_logvar_layers", 1.5, "--acvi-logvar-layers must be a whole number"),
    ("mc_samples", "10", "--mc-samples must be a whole number ≥ 0, got '10'"),
    ("mc_samples", 2.5, "--mc-samples must be a whole number ≥ 0, got 2.5"),
    ("mc_samples", True, "--mc-samples must be a whole number ≥ 0, got True"),
    ("mc_samples", -1, "--mc-samples must be a whole number ≥ 0, got -1"),
])
def test_acvi_option_ranges_and_types_are_refused_naming_the_option(option, value, message):
    args = argparse.Namespace(context_inference="acvi", **{option: value})
    with pytest.raises(ValueError) as err:
        build_context(args, value_dim=8, query_dim=5, enc_final_dim=8)
    assert message in str(err.value)


def test_mc_samples_from_a_checkpoint_override_is_checked_by_the_model():
    """--model-overrides "{'mc_samples': '10'}" reaches the model past argparse: the preset says so."""
    args = argparse.Namespace(arch="acvi_lstm_multi30k", context_inference="acvi")
    acvi_lstm_multi30k(args)                                  # filled, as a checkpoint's options
    args.mc_samples = "10"
    with pytest.raises(ValueError, match="--mc-samples must be a whole number ≥ 0, got '10'"):
        acvi_lstm_multi30k(args)


@pytest.mark.parametrize("context, given, owner", [
    ("soft", {"acvi_beta": 0.5}, "acvi"),
    ("soft", {"mc_sampling": "iid"}, "acvi"),
    ("acvi", {"ved_latent_dim": 10}, "ved"),
    ("pag", {"structured_lambda": "fixed"}, "structured"),
])
def test_an_option_of_another_variant_on_a_command_line_is_refused(context, given, owner):
    args = argparse.Namespace(context_inference=context, **given)
    flag = "--" + next(iter(given)).replace("_", "-")
    with pytest.raises(ValueError, match=f"{flag} is an option of --context-inference {owner}"):
        base_architecture(args)


def test_a_checkpoints_options_of_every_variant_are_not_refused_and_own_options_pass():
    args = argparse.Namespace(context_inference="soft")
    base_architecture(args)                # fills every variant's options, as a checkpoint holds
    assert args.acvi_beta == 1e-4 and args.ved_latent_dim == 100
    base_architecture(args)                # loading it again: no error
    mine = argparse.Namespace(context_inference="rpag", pag_plan_horizon=5)   # rpag shares pag's
    base_architecture(mine)
    assert mine.pag_plan_horizon == 5


def test_cyclical_annealing_replaces_the_default_warmup_but_both_given_is_an_error():
    args = argparse.Namespace(context_inference="acvi", acvi_kl_cycle_updates=100)
    base_architecture(args)
    assert (args.acvi_kl_warmup_updates, args.acvi_kl_cycle_updates) == (0, 100)
    both = argparse.Namespace(context_inference="acvi", acvi_kl_cycle_updates=100,
                              acvi_kl_warmup_updates=10)
    with pytest.raises(ValueError, match="at most one of them"):
        build_context(both, value_dim=8, query_dim=5, enc_final_dim=8)


def test_mc_samples_of_sets_every_acvi_module_and_restores_it():
    ctx = build_context(argparse.Namespace(context_inference="acvi"), 8, 5, 8)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), ctx)
    with mc_samples_of(model, 0):
        assert ctx.mc_samples == 0
    assert ctx.mc_samples == 10
    with mc_samples_of(model, None):
        assert ctx.mc_samples == 10


def test_the_digest_covers_every_tensor_byte_and_value():
    state = {"model": {"w": torch.arange(6, dtype=torch.float32)}, "cfg": {"lr": [0.001]},
             "args": argparse.Namespace(a=1)}
    digest = state_digest(state)
    assert digest == state_digest(dict(state, **{CHECKSUM_KEY: "anything"}))
    flipped = {"model": {"w": torch.arange(6, dtype=torch.float32)}, "cfg": {"lr": [0.001]},
               "args": argparse.Namespace(a=1)}
    flipped["model"]["w"].view(torch.uint8)[5] ^= 1
    assert state_digest(flipped) != digest
    assert state_digest(dict(state, cfg={"lr": [0.01]})) != digest
    assert state_digest(dict(state, args=argparse.Namespace(a=2))) != digest


def test_best_checkpoint_metric_defaults_to_nll_loss_with_elbo_and_a_choice_wins():
    from fairseq import options
    import fairseq_acvi  # noqa: F401

    def parse(*extra):
        parser = options.get_training_parser()
        return options.parse_args_and_arch(parser, [
            "data", "--user-dir", USER_DIR, "--task", "translation", "--arch", "acvi_lstm",
            *extra])
    assert parse("--criterion", "elbo").best_checkpoint_metric == "nll_loss"
    assert parse("--criterion", "elbo", "--best-checkpoint-metric", "loss").best_checkpoint_metric \
        == "loss"
    assert parse("--criterion", "cross_entropy").best_checkpoint_metric == "loss"


# -- through the real CLIs, on one tiny trained model -----------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A toy corpus, its data-bin and a tiny ACVI model trained 6 updates (checkpoint_last.pt)."""
    root = tmp_path_factory.mktemp("option_checks")
    corpus = write_toy_corpus(root / "corpus", {"train": 120, "valid": 24, "test": 8})
    run_cli("fairseq_cli.preprocess", "--source-lang", "en", "--target-lang", "de",
            "--trainpref", corpus / "train", "--validpref", corpus / "valid",
            "--testpref", corpus / "test", "--destdir", root / "bin", "--workers", "1")
    res = run_cli("fairseq_cli.train", root / "bin", "--user-dir", USER_DIR, "--task", "translation",
                  "--arch", "acvi_lstm_multi30k", "--context-inference", "acvi", "--criterion", "elbo",
                  *TINY, "--acvi-kl-delay-updates", "2", "--acvi-kl-warmup-updates", "2",
                  "--valid-mc-samples", "0", "--optimizer", "adam", "--lr", "0.01",
                  "--max-tokens", "600", "--max-update", "6", "--save-dir", root / "ck", "--cpu",
                  "--log-format", "json", "--log-interval", "1", "--num-workers", "0")
    return {"root": root, "bin": root / "bin", "ckpt": root / "ck" / "checkpoint_last.pt",
            "log": res.stdout + res.stderr}


def _train_inner(log):
    return [json.loads(line.split("train_inner | ", 1)[1]) for line in log.splitlines()
            if "train_inner | {" in line]


def test_the_kl_weight_of_the_schedule_is_logged(trained):
    weights = [float(r["kl_weight"]) for r in _train_inner(trained["log"])]
    # delay 2, warm-up 2, β 1e-4: updates 1..6 use num_updates 0..5 -> 0, 0, 0, 0.5β, β, β
    assert weights == pytest.approx([0, 0, 0, 5e-5, 1e-4, 1e-4], abs=1e-9)
    state = torch.load(trained["ckpt"], weights_only=True)
    assert state["cfg"]["checkpoint"]["best_checkpoint_metric"] == "nll_loss"
    assert state["cfg"]["criterion"]["valid_mc_samples"] == 0


def _generate(trained, *extra, path=None, check=True):
    return run_cli("fairseq_cli.generate", trained["bin"], "--user-dir", USER_DIR, "--path",
                   path or trained["ckpt"], "--gen-subset", "test", "--beam", "2", "--cpu",
                   "--batch-size", "8", *extra, check=check)


def test_a_misspelt_override_key_is_refused_naming_it_and_the_option_meant(trained):
    res = _generate(trained, "--model-overrides", "{'mc_sample': 0}", check=False)
    assert res.returncode != 0
    assert "'mc_sample' (did you mean 'mc_samples'?) is not an option of the model in" in res.stderr
    assert str(trained["ckpt"]) in res.stderr
    ok = _generate(trained, "--model-overrides", "{'mc_samples': 0}")
    assert ok.stdout.count("\nH-") + ok.stdout.startswith("H-") == 8


def test_a_string_mc_samples_override_is_refused_naming_the_option(trained):
    res = _generate(trained, "--model-overrides", "{'mc_samples': '10'}", check=False)
    assert res.returncode != 0 and "--mc-samples must be a whole number ≥ 0, got '10'" in res.stderr


def test_a_corrupted_checkpoint_is_refused_with_its_name(trained, tmp_path):
    data = bytearray(trained["ckpt"].read_bytes())
    assert torch.load(trained["ckpt"], weights_only=True)[CHECKSUM_KEY]
    # flip 200 bytes inside the largest record (the tensors' storage), away from the zip headers
    start = len(data) // 3
    for i in range(start, start + 200):
        data[i] ^= 0x55
    bad = tmp_path / "checkpoint_flipped.pt"
    bad.write_bytes(bytes(data))
    res = _generate(trained, path=bad, check=False)
    assert res.returncode != 0
    assert f"{bad}: " in res.stderr and ("corrupted" in res.stderr or "not a readable" in res.stderr)
    assert "\nH-" not in "\n" + res.stdout


def test_a_text_file_as_path_is_refused_with_its_name(trained, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("this is not a checkpoint\n" * 20, encoding="utf-8")
    res = _generate(trained, path=text, check=False)
    assert res.returncode != 0
    assert f"{text}: not a readable PyTorch checkpoint" in res.stderr
    assert "KeyError: 101" not in res.stderr.splitlines()[-1]


def test_an_empty_line_in_fairseq_interactive_is_answered_and_the_session_goes_on(trained):
    words = (trained["root"] / "corpus" / "test.en").read_text(encoding="utf-8").splitlines()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    res = subprocess.run(
        [sys.executable, "-m", "fairseq_cli.interactive", str(trained["bin"]), "--user-dir", USER_DIR,
         "--path", str(trained["ckpt"]), "-s", "en", "-t", "de", "--beam", "2", "--cpu"],
        input=f"{words[0]}\n\n   \n{words[1]}\n", capture_output=True, text=True, env=env,
        cwd=str(REPO), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    hyps = [line for line in res.stdout.splitlines() if line.startswith("H-")]
    assert len(hyps) == 2                                   # both real lines were translated
    assert res.stderr.count("empty input: nothing to translate") == 2


def test_valid_mc_samples_scores_validation_with_its_own_k(trained):
    """fairseq-validate with the elbo criterion: --valid-mc-samples 0 (stored in the checkpoint)
    gives the likelihood of the mean context, the same as the model with mc_samples 0."""
    def nll(*extra):
        res = run_cli("fairseq_cli.validate", trained["bin"], "--user-dir", USER_DIR, "--task",
                      "translation", "--path",
                      trained["ckpt"], "--cpu", "--max-tokens", "600", *extra)
        line = [x for x in (res.stdout + res.stderr).splitlines() if "| valid on" in x][-1]
        return float(line.split("nll_loss ")[1].split()[0])
    mean_context = nll("--model-overrides", "{'mc_samples': 0}")
    assert nll() == mean_context                         # the checkpoint's --valid-mc-samples 0
