"""fairseq-preprocess → fairseq-train → checkpoint → fairseq-generate through the real CLIs."""
import json
import os
import random
import re
import socket
import subprocess
import sys

import pytest
import torch

from conftest import REPO, USER_DIR, run_cli

VARIANTS = ["none", "soft", "acvi", "structured", "variational", "ved"]
TINY = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-hidden-size", "16",
        "--decoder-hidden-size", "16", "--encoder-layers", "1", "--decoder-layers", "1",
        "--attention-dim", "16"]


def write_reversal(folder, n_train=300, n_valid=30, n_test=12, vocab=12, seed=0):
    rng = random.Random(seed)
    words = [f"t{i}" for i in range(vocab)]
    for split, n in (("train", n_train), ("valid", n_valid), ("test", n_test)):
        with open(folder / f"{split}.src", "w") as fs, open(folder / f"{split}.tgt", "w") as ft:
            for _ in range(n):
                s = [rng.choice(words) for _ in range(rng.randint(3, 7))]
                fs.write(" ".join(s) + "\n")
                ft.write(" ".join(reversed(s)) + "\n")


def reversal_bin(raw):
    """The reversal task written into the folder ``raw`` and binarised into ``raw/bin``
    (joined dictionary); returns that data-bin."""
    write_reversal(raw)
    out = raw / "bin"
    run_cli("fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
            "--trainpref", raw / "train", "--validpref", raw / "valid", "--testpref", raw / "test",
            "--destdir", out, "--joined-dictionary", "--workers", "1")
    return out


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_bin(tmp_path_factory.mktemp("raw"))


def train(data_bin, save_dir, *extra, updates=6):
    return run_cli("fairseq_cli.train", data_bin, "--user-dir", USER_DIR, "--task", "translation",
                   "--arch", "acvi_lstm", "--criterion", "elbo", "--optimizer", "adam",
                   "--lr", "0.005", "--max-tokens", "1500", "--max-update", updates,
                   "--save-dir", save_dir, "--no-progress-bar", "--log-interval", "1",
                   "--log-format", "simple", "--seed", "1", "--no-epoch-checkpoints", *TINY, *extra)


def logged(output, key):
    """All values of `key` in fairseq's train/valid log lines."""
    return [float(v) for v in re.findall(rf"\| {key} (\S+)", output)]


def check_finite_losses(res, keys=("loss", "nll_loss")):
    text = res.stdout + res.stderr
    for key in keys:
        vals = logged(text, key)
        assert vals, f"no {key} logged"
        assert all(v == v and abs(v) != float("inf") for v in vals), (key, vals)


def generate(data_bin, ckpt, *extra):
    res = run_cli("fairseq_cli.generate", data_bin, "--user-dir", USER_DIR, "--path", ckpt,
                  "--beam", "3", "--batch-size", "8", "--gen-subset", "test", *extra)
    hyps = [line for line in res.stdout.splitlines() if line.startswith("H-")]
    assert len(hyps) == 12, res.stdout[-2000:]
    return res


@pytest.mark.parametrize("variant", VARIANTS)
def test_train_checkpoint_generate_round_trip(data_bin, tmp_path, variant):
    res = train(data_bin, tmp_path, "--context-inference", variant)
    check_finite_losses(res)
    if variant in ("acvi", "variational", "ved"):
        name = "ved_kl" if variant == "ved" else "kl"
        kls = logged(res.stdout + res.stderr, name)
        assert kls and all(v >= 0 and v == v for v in kls), kls
    # ACVI decodes with the geometric combination here (the default, prob, in the other tests)
    combine = ", 'mc_combine': 'geometric'" if variant == "acvi" else ""
    generate(data_bin, tmp_path / "checkpoint_last.pt",
             "--model-overrides", "{'mc_samples': 3" + combine + "}")


def test_memory_efficient_fp16_has_no_nan(data_bin, tmp_path):
    res = train(data_bin, tmp_path, "--context-inference", "acvi", "--memory-efficient-fp16",
                "--fp16-init-scale", "8", updates=4)
    check_finite_losses(res, ("loss", "nll_loss", "kl"))
    assert "loss_scale" in res.stdout + res.stderr
    generate(data_bin, tmp_path / "checkpoint_last.pt")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_gloo_training(data_bin, tmp_path):
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    base = [sys.executable, "-m", "fairseq_cli.train", str(data_bin), "--user-dir", USER_DIR,
            "--task", "translation", "--arch", "acvi_lstm", "--criterion", "elbo",
            "--context-inference", "acvi", "--optimizer", "adam", "--lr", "0.005",
            "--max-tokens", "1500", "--max-update", "4", "--save-dir", str(tmp_path),
            "--no-progress-bar", "--log-interval", "1", "--log-format", "simple", "--seed", "1",
            "--no-epoch-checkpoints", *TINY, "--ddp-backend", "legacy_ddp",
            "--distributed-backend", "gloo", "--distributed-no-spawn", "--cpu",
            "--distributed-init-method", f"tcp://127.0.0.1:{port}",
            "--distributed-world-size", "2"]
    procs = [subprocess.Popen(base + ["--distributed-rank", str(r)], cwd=str(REPO), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs[0][-3000:] + outs[1][-3000:]
    assert "distributed init (rank 1)" in outs[0] + outs[1]
    assert re.search(r"num_updates 4\b", outs[0]), outs[0][-2000:]
    # both workers see the same averaged gradients: rank 0 saved, and the checkpoint decodes
    generate(data_bin, tmp_path / "checkpoint_last.pt")


def test_mc_samples_override_and_weights_only_loading(data_bin, tmp_path):
    from fairseq import checkpoint_utils

    import fairseq_acvi  # noqa: F401  (registers the plugin and the checkpoint allow-list)

    train(data_bin, tmp_path, "--context-inference", "acvi", updates=2)
    ckpt = str(tmp_path / "checkpoint_last.pt")
    assert torch.serialization.get_unsafe_globals_in_checkpoint(ckpt) == []  # all allow-listed
    torch.load(ckpt)  # weights-only (torch's default) succeeds with the allow-list
    models, _ = checkpoint_utils.load_model_ensemble([ckpt], arg_overrides={
        "data": str(data_bin), "mc_samples": 7})
    assert models[0].decoder.context.mc_samples == 7
    assert models[0].decoder.context.mc_combine == "prob"          # the default, recorded
    models, _ = checkpoint_utils.load_model_ensemble([ckpt], arg_overrides={
        "data": str(data_bin), "mc_combine": "geometric"})
    assert models[0].decoder.context.mc_combine == "geometric"
    assert models[0].decoder.context.antithetic                 # --mc-sampling antithetic, the default
    models, _ = checkpoint_utils.load_model_ensemble([ckpt], arg_overrides={
        "data": str(data_bin), "mc_sampling": "iid"})
    assert not models[0].decoder.context.antithetic
    # a pickle that would run code is still refused
    evil = tmp_path / "evil.pt"
    torch.save({"x": os.system}, evil)  # a global that is not allow-listed
    with pytest.raises(Exception, match="[Ww]eights only|Unsupported global"):
        torch.load(evil)


def test_a_resumed_run_trains_exactly_as_an_uninterrupted_one(data_bin, tmp_path):
    """Stopped mid-epoch and resumed from checkpoint_last.pt with the same command, an ACVI run
    (dropout, context samples, Adam's moments, the data order) ends with the parameters of the run
    that was never stopped, bit for bit: the long recipes resume instead of starting again."""
    import fairseq_acvi  # noqa: F401  (the checkpoint allow-list)

    args = ("--context-inference", "acvi", "--dropout", "0.2", "--disable-validation")
    train(data_bin, tmp_path / "whole", *args, updates=6)
    train(data_bin, tmp_path / "resumed", *args, updates=4)
    res = train(data_bin, tmp_path / "resumed", *args, updates=6)
    # 3 updates an epoch here: loaded after the first update of epoch 2
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 2 @ 4 updates\)",
                     res.stdout + res.stderr), (res.stdout + res.stderr)[-3000:]
    whole, resumed = (torch.load(tmp_path / d / "checkpoint_last.pt")["model"] for d in ("whole", "resumed"))
    assert whole.keys() == resumed.keys()
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    # the check can fail: a run of one update fewer is not the same
    train(data_bin, tmp_path / "short", *args, updates=5)
    short = torch.load(tmp_path / "short" / "checkpoint_last.pt")["model"]
    assert not all(torch.equal(whole[k], short[k]) for k in whole)


def test_preset_normalises_annotations_and_older_checkpoints_load_as_trained(data_bin, tmp_path):
    """acvi_lstm_multi30k's ACVI normalises the annotations and draws its evaluation samples in
    antithetic pairs (the configuration chosen on Multi30K validation) and the
    checkpoint records both; a checkpoint written before --acvi-value-norm / --mc-sampling existed
    (its options lack them) loads as it was trained and decoded then, not with today's preset
    defaults."""
    from fairseq import checkpoint_utils

    import fairseq_acvi  # noqa: F401

    train(data_bin, tmp_path, "--arch", "acvi_lstm_multi30k", "--context-inference", "acvi",
          updates=1)
    ckpt = tmp_path / "checkpoint_last.pt"
    state = torch.load(ckpt)
    saved = state["cfg"]["model"]
    assert (saved.acvi_value_norm, saved.acvi_beta, saved.acvi_kl_delay_updates) == \
        ("layernorm", 1e-4, 234)
    load = {"arg_overrides": {"data": str(data_bin)}}
    models, _ = checkpoint_utils.load_model_ensemble([str(ckpt)], **load)
    assert models[0].decoder.context.value_norm == "layernorm"
    assert saved.mc_sampling == "antithetic" and models[0].decoder.context.antithetic
    delattr(saved, "acvi_value_norm")                     # as written before 2026-11-26
    delattr(saved, "mc_sampling")                         # as written before 2026-11-27
    old = tmp_path / "older.pt"
    del state["acvi_sha256"]                              # nor had checkpoints a checksum then
    torch.save(state, old)
    models, _ = checkpoint_utils.load_model_ensemble([str(old)], **load)
    assert models[0].decoder.context.value_norm == "none"
    assert not models[0].decoder.context.antithetic       # decodes as it did then: iid draws
    models, _ = checkpoint_utils.load_model_ensemble([str(old)], arg_overrides={
        "data": str(data_bin), "mc_sampling": "antithetic"})
    assert models[0].decoder.context.antithetic           # unless asked otherwise
    # the papers' set-up is one option away, and an explicit option wins over the preset
    train(data_bin, tmp_path / "plain", "--arch", "acvi_lstm_multi30k", "--context-inference",
          "acvi", "--acvi-value-norm", "none", updates=1)
    plain = torch.load(tmp_path / "plain" / "checkpoint_last.pt")["cfg"]["model"]
    assert plain.acvi_value_norm == "none"


def test_bad_option_values_give_clear_errors(data_bin, tmp_path):
    res = run_cli("fairseq_cli.train", data_bin, "--user-dir", USER_DIR, "--task", "translation",
                  "--arch", "acvi_lstm", "--criterion", "elbo", "--context-inference", "hard",
                  "--save-dir", tmp_path, check=False)
    assert res.returncode != 0 and "--context-inference" in res.stderr and "hard" in res.stderr
    res = run_cli("fairseq_cli.train", data_bin, "--user-dir", USER_DIR, "--task", "translation",
                  "--arch", "acvi_lstm", "--criterion", "elbo", "--mc-samples", "-1",
                  "--save-dir", tmp_path, "--max-update", "1", check=False)
    assert res.returncode != 0 and "--mc-samples" in res.stderr


def test_empty_source_line_and_mismatched_dictionary(data_bin, tmp_path):
    train(data_bin, tmp_path, "--context-inference", "soft", updates=2)
    ckpt = tmp_path / "checkpoint_last.pt"
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "test.src").write_text("t1 t2 t3\n\nt4 t5\n")
    (raw / "test.tgt").write_text("t3 t2 t1\nt1\nt5 t4\n")
    d = data_bin / "dict.src.txt"
    run_cli("fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
            "--testpref", raw / "test", "--destdir", raw / "bin", "--srcdict", d, "--tgtdict", d,
            "--workers", "1")
    res = run_cli("fairseq_cli.generate", raw / "bin", "--user-dir", USER_DIR, "--path", ckpt,
                  "--beam", "2", "--gen-subset", "test", check=False)
    assert res.returncode != 0 and "empty source sentence" in res.stderr, res.stderr[-2000:]

    other = tmp_path / "other"
    other.mkdir()
    write_reversal(other, vocab=15, seed=3)
    run_cli("fairseq_cli.preprocess", "--source-lang", "src", "--target-lang", "tgt",
            "--trainpref", other / "train", "--testpref", other / "test",
            "--destdir", other / "bin", "--joined-dictionary",
            "--workers", "1")
    res = run_cli("fairseq_cli.generate", other / "bin", "--user-dir", USER_DIR, "--path", ckpt,
                  "--beam", "2", "--gen-subset", "test", check=False)
    assert res.returncode != 0 and "mismatched source dictionary" in res.stderr, res.stderr[-2000:]


def test_antithetic_draws_bring_the_sample_average_closer_to_its_limit(data_bin, tmp_path):
    """experiments/mc_estimator_error.py on a trained ACVI checkpoint with a wide posterior
    (log σ² starts at 0): at the same K the antithetic average's gold-token log-probability is
    nearer the K = 400 reference than the iid one's, and the report names every setting."""
    sys.path.insert(0, str(REPO / "experiments"))
    import mc_estimator_error as mce

    train(data_bin, tmp_path, "--context-inference", "acvi", "--acvi-logvar-init", "0", updates=8)
    out = tmp_path / "mce.json"
    res = mce.main(["--data", str(data_bin), "--path", str(tmp_path / "checkpoint_last.pt"),
                    "--ks", "2", "8", "--repeats", "10", "--reference-k", "400",
                    "--max-sentences", "30", "--json", str(out)])
    s = res["settings"]
    assert set(s) == {"K0", "K2-iid", "K2-antithetic", "K8-iid", "K8-antithetic"}
    assert res["tokens"] > 100 and json.loads(out.read_text())["settings"] == s
    for k in (2, 8):
        assert s[f"K{k}-antithetic"]["mse_ratio"] < 0.8, s
        assert 0.0 < s[f"K{k}-antithetic"]["gold_mse"] < s[f"K{k}-iid"]["gold_mse"]
    assert s["K8-iid"]["gold_mse"] < s["K2-iid"]["gold_mse"]          # more samples, nearer
    with pytest.raises(SystemExit, match="not an ACVI model"):
        soft = tmp_path / "soft"
        train(data_bin, soft, "--context-inference", "soft", updates=1)
        mce.main(["--data", str(data_bin), "--path", str(soft / "checkpoint_last.pt"), "--ks", "2"])
