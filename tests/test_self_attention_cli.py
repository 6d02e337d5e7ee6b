"""Seed 003's configurations (ii) ``--attend-decoder-past`` and (iii) ``--self-attention-heads``
through the real CLIs (docs/method.md §3.6): fairseq-train with half parameters
(``--memory-efficient-fp16 --cpu``) → checkpoint → fairseq-generate, with soft attention and
ACVI; and a checkpoint written before the options existed loads and decodes as it did."""
import pytest
import torch

from conftest import run_cli  # noqa: F401  (the CLI runner the helpers below use)
from test_translation_cli import check_finite_losses, generate, reversal_bin, train

CONFIGS = {"ii": ["--attend-decoder-past"],
           "iii": ["--self-attention-heads", "2"],
           "ii+iii": ["--attend-decoder-past", "--self-attention-heads", "2"]}


@pytest.fixture(scope="module")
def data_bin(tmp_path_factory):
    return reversal_bin(tmp_path_factory.mktemp("raw"))


def hypotheses(res):
    return sorted(line for line in res.stdout.splitlines() if line.startswith(("H-", "P-")))


#: every pair runs; three (each option once with soft, both with ACVI; ~11 s each) in the quick suite
PAIRS = [pytest.param(v, c, marks=() if (v, c) in {("soft", "ii"), ("soft", "iii"), ("acvi", "ii+iii")}
                      else pytest.mark.slow, id=f"{v}-{c}")
         for v in ("soft", "acvi") for c in sorted(CONFIGS)]


@pytest.mark.parametrize("variant,config", PAIRS)
def test_memory_efficient_fp16_round_trip_through_the_clis(data_bin, tmp_path, variant, config):
    """Half parameters on a CPU: finite losses (and ACVI's KL), the loss scale logged, the
    checkpoint records the options and holds the new parameters (fairseq saves them as float32),
    and fairseq-generate (beam 3, the incremental state reordered) writes all 12 hypotheses."""
    res = train(data_bin, tmp_path, "--context-inference", variant, *CONFIGS[config],
                "--memory-efficient-fp16", "--fp16-init-scale", "8", "--cpu", updates=4)
    check_finite_losses(res, ("loss", "nll_loss") + (("kl",) if variant == "acvi" else ()))
    assert "loss_scale" in res.stdout + res.stderr
    ckpt = tmp_path / "checkpoint_last.pt"
    state = torch.load(ckpt, weights_only=True)
    saved = state["cfg"]["model"]
    assert saved.attend_decoder_past == ("ii" in config.split("+"))
    assert saved.self_attention_heads == (2 if "iii" in config else 0)
    new = [k for k in state["model"] if "past_attn" in k or "self_attn" in k
           or "self_attention" in k]
    assert new and all(torch.isfinite(state["model"][k]).all() for k in new)
    assert any(k.startswith("encoder.self_attention.") for k in new) == ("iii" in config)
    generate(data_bin, ckpt, "--cpu", "--fp16", "--model-overrides", "{'mc_samples': 2}")


def test_checkpoints_without_the_options_load_and_decode_as_before(data_bin, tmp_path):
    """A checkpoint whose options predate --attend-decoder-past / --self-attention-heads (both
    keys removed from its saved options, and its checksum, as such a file has none) loads with
    both off and decodes exactly as the same checkpoint with them present."""
    train(data_bin, tmp_path, "--context-inference", "soft", updates=3)
    ckpt = tmp_path / "checkpoint_last.pt"
    state = torch.load(ckpt, weights_only=True)
    saved = state["cfg"]["model"]
    assert (saved.attend_decoder_past, saved.self_attention_heads) == (False, 0)
    delattr(saved, "attend_decoder_past")
    delattr(saved, "self_attention_heads")
    state.pop("acvi_sha256", None)
    old = tmp_path / "older.pt"
    torch.save(state, old)
    now = generate(data_bin, ckpt, "--cpu")
    before = generate(data_bin, old, "--cpu")
    assert hypotheses(now) == hypotheses(before) and len(hypotheses(now)) == 24
