"""``--optimizer torch_adam``: fairseq's Adam update on torch's fused / foreach AdamW kernels."""
import re

import pytest
import torch
from fairseq.optim.adam import Adam as FairseqAdamLoop
from omegaconf import OmegaConf

from fairseq_acvi.optim.torch_adam import TorchAdam, TorchAdamConfig, parse_betas
from tests.conftest import USER_DIR, run_cli


def _params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(7, 5, generator=g)),
            torch.nn.Parameter(torch.randn(11, generator=g))]


def _cfg(**kw):
    base = dict(adam_betas="(0.9, 0.98)", adam_eps=1e-8, weight_decay=0.05, amsgrad=False,
                adam_impl="auto", lr=[0.01])
    base.update(kw)
    return OmegaConf.structured(TorchAdamConfig(**base))


@pytest.mark.parametrize("impl", ["auto", "fused", "foreach"])
def test_same_trajectory_as_fairseq_adam(impl):
    """30 steps on the same gradients: the parameters agree with fairseq's own Adam loop
    (decoupled weight decay) to float32 rounding (the ε placement differs by a factor
    √(1 − β₂ᵗ) on ε only)."""
    ours_p, ref_p = _params(), _params()
    ours = TorchAdam(_cfg(adam_impl=impl), ours_p)
    assert ours.implementation == ("foreach" if impl == "foreach" else "fused")
    ref = FairseqAdamLoop(ref_p, lr=0.01, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.05)
    g = torch.Generator().manual_seed(1)
    start = [p.detach().clone() for p in ours_p]
    for _ in range(30):
        grads = [torch.randn(p.shape, generator=g) for p in ours_p]
        for p, q, gr in zip(ours_p, ref_p, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        ours.step()
        ref.step()
    for p, q, s in zip(ours_p, ref_p, start):
        assert (p - s).abs().max() > 0.05                     # it moved ...
        torch.testing.assert_close(p, q, atol=2e-6, rtol=1e-5)  # ... exactly as fairseq's adam
    # the lr the scheduler sets is the one used
    ours.set_lr(0.5)
    assert ours.get_lr() == 0.5


def test_betas_are_parsed_without_eval_and_checked():
    assert parse_betas("(0.9, 0.98)") == (0.9, 0.98)
    assert parse_betas([0.8, 0.9]) == (0.8, 0.9)
    for bad in ("(0.9,)", "__import__('os')", "(0.9, 1.5)", "0.9"):
        with pytest.raises(ValueError, match="--adam-betas"):
            parse_betas(bad)


def test_cli_train_resume_and_fp16_refusal(tmp_path, shared_data):
    """fairseq-train --optimizer torch_adam trains, saves the optimizer state and resumes from
    it; --memory-efficient-fp16 is refused with fairseq's message (fp16 moments)."""
    folder = shared_data / "babi" / "tasks_1-20_v1-2" / "en"
    save = tmp_path / "ck"
    common = [folder, "--user-dir", USER_DIR, "--task", "babi_qa", "--babi-tasks", "1",
              "--arch", "memn2n", "--criterion", "qa_cross_entropy", "--optimizer", "torch_adam",
              "--lr", "0.01", "--clip-norm", "40", "--batch-size", "29",
              "--required-batch-size-multiple", "1", "--save-dir", save, "--no-epoch-checkpoints",
              "--num-workers", "0", "--seed", "1", "--cpu", "--log-format", "simple"]
    first = run_cli("fairseq_cli.train", *common, "--max-epoch", "2")
    out = first.stdout + first.stderr
    assert "torch_adam: torch.optim.AdamW (fused)" in out
    state = torch.load(save / "checkpoint_last.pt", weights_only=True)
    # fairseq stores the optimizer's state dict; AdamW's moments are there for every parameter
    moments = state["last_optimizer_state"]["state"]
    assert len(moments) > 0 and all("exp_avg_sq" in v for v in moments.values())
    second = run_cli("fairseq_cli.train", *common, "--max-epoch", "3")
    out2 = second.stdout + second.stderr
    assert re.search(r"Loaded checkpoint .*checkpoint_last\.pt \(epoch 3 @ 64 updates\)", out2), out2[-3000:]
    accs = [float(a) for a in re.findall(r"valid on 'valid' subset \| .*?accuracy ([0-9.]+)", out + out2)]
    assert len(accs) == 3 and accs[-1] > 30.0
    bad = run_cli("fairseq_cli.train", *common, "--max-epoch", "1", "--memory-efficient-fp16",
                  check=False)
    assert bad.returncode != 0
    assert "memory-efficient" in (bad.stdout + bad.stderr).lower() or \
        "memory_efficient" in (bad.stdout + bad.stderr).lower()
