"""VED, docs/method.md §2.5: the sentence latent, its KL (closed form vs Monte Carlo), the annealing
schedules, deterministic decoding with z = μ, and the [c ; z] context."""
import argparse
import math

import pytest
import torch

from fairseq_acvi.modules.context import build_context
from fairseq_acvi.modules.context.ved import VEDContext
from fairseq_acvi.modules.context.scorers import Memory, masked_fill_scores

B, N, D, H, Z = 3, 6, 8, 10, 5


def make_module(**kw):
    args = argparse.Namespace(context_inference="ved", ved_latent_dim=Z, **kw)
    torch.manual_seed(0)
    return build_context(args, value_dim=D, query_dim=4, enc_final_dim=H)


def make_inputs(seed=1):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(B, N, D, generator=g)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, :2] = True
    pad[2, 4:] = True
    scores = masked_fill_scores(torch.randn(B, N, generator=g), pad)
    return Memory(values, values, pad), scores, torch.randn(B, H, generator=g)


def test_kl_closed_form_matches_monte_carlo():
    ctx = make_module()
    mem, _, enc_final = make_inputs()
    prep = ctx.eval().prepare(mem, enc_final)
    kl = ctx.sentence_losses(prep)["ved_kl"]
    assert kl.shape == (B,) and kl.dtype == torch.float32
    mu, var = prep["ved_mu"].double(), prep["ved_var"].double()
    q = torch.distributions.Normal(mu, var.sqrt())
    p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    torch.manual_seed(2)
    z = q.sample((200000,))
    mc = (q.log_prob(z) - p.log_prob(z)).sum(-1).mean(0)       # E_q[log q − log p]
    assert torch.allclose(kl.double(), mc, rtol=0.02, atol=0.02), (kl, mc)
    # and the exact closed form ½ Σ (μ² + σ² − 1 − log σ²)
    assert torch.allclose(kl.double(), 0.5 * (mu ** 2 + var - 1 - var.log()).sum(-1), atol=1e-5)
    # gradients reach both heads
    ctx.train()
    prep = ctx.prepare(mem, enc_final)
    ctx.sentence_losses(prep)["ved_kl"].sum().backward()
    assert ctx.mu_net.weight.grad.abs().sum() > 0 and ctx.logvar_net.weight.grad.abs().sum() > 0


def test_training_samples_z_and_eval_uses_the_mean():
    ctx = make_module()
    mem, _, enc_final = make_inputs()
    ctx.eval()
    p1, p2 = ctx.prepare(mem, enc_final), ctx.prepare(mem, enc_final)
    assert torch.equal(p1["ved_z"], p2["ved_z"])
    assert torch.allclose(p1["ved_z"], ctx.mu_net(enc_final))
    ctx.train()
    torch.manual_seed(3)
    big = enc_final[:1].expand(20000, H)
    prep = ctx.prepare(None, big)
    z = prep["ved_z"]
    assert torch.allclose(z.mean(0), prep["ved_mu"][0], atol=0.05 * float(prep["ved_var"][0].sqrt().max()))
    assert torch.allclose(z.var(0), prep["ved_var"][0], rtol=0.05)


def test_step_context_is_soft_attention_and_z_with_zero_weight_at_padding():
    ctx = make_module()
    mem, scores, enc_final = make_inputs()
    ctx.eval()
    prep = ctx.prepare(mem, enc_final)
    assert ctx.context_dim == D + Z and ctx.decoder_input_dim == Z
    assert torch.equal(ctx.decoder_input(prep), prep["ved_z"])
    o1 = ctx.step(scores, None, mem, prep, 0)
    o2 = ctx.step(scores, None, mem, prep, 1)
    a = torch.softmax(scores, -1)
    ref = torch.cat([torch.einsum("bn,bnd->bd", a, mem.values), prep["ved_z"]], -1)
    assert o1.mean.shape == (B, D + Z) and torch.allclose(o1.mean, ref, atol=1e-6)
    assert torch.equal(o1.mean, o2.mean) and o1.samples is None and o1.losses == {}
    assert (o1.attn[mem.pad_mask] == 0).all()
    vals = mem.values.clone()
    vals[mem.pad_mask] = 1e4
    o3 = ctx.step(scores, None, Memory(vals, vals, mem.pad_mask), prep, 0)
    assert torch.allclose(o3.mean, o1.mean)


def test_sigmoid_schedule_values():
    ctx = make_module(ved_kl_anneal_rate=0.01, ved_kl_anneal_midpoint=1000, ved_beta=2.0)
    assert ctx.anneal == "sigmoid"                     # default
    assert ctx.kl_weight(1000) == pytest.approx(1.0)   # β/2 at the midpoint
    assert ctx.kl_weight(1000 + math.log(3) / 0.01) == pytest.approx(1.5)
    assert ctx.kl_weight(0) == pytest.approx(2.0 / (1 + math.exp(10)))
    assert ctx.kl_weight(10 ** 9) == pytest.approx(2.0)   # no overflow either way
    assert ctx.kl_weight(-(10 ** 9)) == 0.0
    ctx.set_num_updates(1000)
    assert ctx.loss_weight("ved_kl") == pytest.approx(1.0) and ctx.loss_weight("other") == 1.0
    default = make_module()
    assert default.kl_weight(2500) == pytest.approx(0.5)
    assert default.kl_weight(0) == pytest.approx(1 / (1 + math.exp(6.25)))


def test_linear_and_no_anneal():
    lin = make_module(ved_kl_anneal="linear", ved_kl_anneal_midpoint=100)
    assert [lin.kl_weight(n) for n in (0, 100, 150, 200, 1000)] == pytest.approx([0, .5, .75, 1, 1])
    none = make_module(ved_kl_anneal="none", ved_beta=0.3)
    assert none.kl_weight(0) == pytest.approx(0.3)


def test_options_and_word_keep():
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    VEDContext.add_args(parser)
    args = parser.parse_args(["--ved-latent-dim", "128", "--ved-kl-anneal", "linear",
                              "--ved-word-keep", "0.5"])
    assert (args.ved_latent_dim, args.ved_kl_anneal, args.ved_word_keep) == (128, "linear", 0.5)
    assert make_module().word_keep == 0.75
    ctx = build_context(argparse.Namespace(context_inference="ved"), D, 4, H)
    assert ctx.latent_dim == 100 and ctx.context_dim == D + 100
    with pytest.raises(ValueError, match="--ved-word-keep"):
        make_module(ved_word_keep=0.0)
    with pytest.raises(ValueError, match="--ved-kl-anneal"):
        make_module(ved_kl_anneal="cosine")
