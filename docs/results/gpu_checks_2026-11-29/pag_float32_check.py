"""The float32 CPU check of docs/results/gpu_checks_2026-11-29/README.md: PAG's training pass, eager
against TorchInductor's generated kernels with the eager random numbers, on the tests' tiny model.
From the repository root: PYTHONPATH=tests python docs/results/gpu_checks_2026-11-29/pag_float32_check.py"""
import torch, torch._inductor.config as ic
from test_compiled_step import _train_pass
from test_seq2seq_model import _batch, build_model
from fairseq_acvi.modules.seq2seq import compiled_step
torch.manual_seed(0)
model, d = build_model("pag", dropout=0.3, mc_samples=0)
model.train()
with ic.patch(fallback_random=True):
    for B, seed in ((3, 0), (2, 1), (3, 0)):
        src, lengths, prev = _batch(d, B=B, seed=seed)
        e = _train_pass(model, src, lengths, prev, d.pad(), "none")
        c = _train_pass(model, src, lengths, prev, d.pad(), "inductor")
        nonpad = prev.ne(d.pad())
        print(B, seed, "lprobs maxdiff", (e[0][nonpad]-c[0][nonpad]).abs().max().item(),
              {k: (e[1][k].item(), c[1][k].item()) for k in e[1]})
