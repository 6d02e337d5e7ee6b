"""Variational attention, docs/method.md §2.4: KL(q||a), the enum expectation, the REINFORCE surrogate,
the inference network over the target, decoding with the prior, and padding."""
import argparse

import pytest
import torch
import torch.nn.functional as F

from fairseq_acvi.modules.context import build_context, stack_steps
from fairseq_acvi.modules.context.variational import VariationalContext, categorical_kl
from fairseq_acvi.modules.context.scorers import Memory, masked_fill_scores

B, N, D, E, T, V = 3, 6, 8, 5, 4, 7


def make_module(**kw):
    args = argparse.Namespace(context_inference="variational", decoder_embed_dim=E, **kw)
    torch.manual_seed(0)
    return build_context(args, value_dim=D, query_dim=4, enc_final_dim=8)


def make_inputs(seed=1):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(B, N, D, generator=g)
    pad = torch.zeros(B, N, dtype=torch.bool)
    pad[1, :2] = True     # left-padded source
    pad[2, 4:] = True     # right-padded source
    mem = Memory(values, values, pad)
    scores = masked_fill_scores(torch.randn(B, T, N, generator=g) * 2, pad.unsqueeze(1))
    target_emb = torch.randn(B, T, E, generator=g)
    target_pad = torch.zeros(B, T, dtype=torch.bool)
    target_pad[2, 3:] = True
    return mem, scores, target_emb, target_pad


class FakeOutput(torch.nn.Module):
    """A stand-in output layer: log p(y | ctx) = log_softmax(W ctx)[y], float32 (B, T, S)."""

    def __init__(self, target):
        super().__init__()
        self.proj = torch.nn.Linear(D, V)
        self.target = target  # (B, T)

    def forward(self, ctx):  # ctx (B, T, S, D)
        lp = F.log_softmax(self.proj(ctx).float(), dim=-1)
        idx = self.target[:, :, None, None].expand(*ctx.shape[:3], 1)
        return lp.gather(-1, idx).squeeze(-1)


def run_steps(ctx, mem, scores, prepared):
    return stack_steps([ctx.step(scores[:, t], None, mem, prepared, t) for t in range(T)])


def test_categorical_kl_matches_direct_sum_and_has_no_nan_at_padding():
    mem, scores, _, _ = make_inputs()
    logits = torch.randn(B, N).masked_fill(mem.pad_mask, float("-inf")).requires_grad_(True)
    prior = scores[:, 0].clone().requires_grad_(True)
    log_q, log_a = F.log_softmax(logits, -1), F.log_softmax(prior, -1)
    kl = categorical_kl(log_q, log_a, mem.pad_mask)
    for b in range(B):
        keep = ~mem.pad_mask[b]
        q = torch.softmax(logits[b, keep].detach().double(), -1)
        a = torch.softmax(prior[b, keep].detach().double(), -1)
        assert torch.allclose(kl[b].double(), (q * (q / a).log()).sum(), atol=1e-6)
    assert kl.dtype == torch.float32 and (kl >= 0).all()
    kl.sum().backward()
    assert torch.isfinite(logits.grad).all() and torch.isfinite(prior.grad).all()
    assert (logits.grad[mem.pad_mask] == 0).all()
    # KL(q || q) = 0
    assert torch.allclose(categorical_kl(log_q, log_q, mem.pad_mask), torch.zeros(B), atol=1e-6)


def test_posterior_reads_whole_target_and_ignores_target_padding():
    ctx = make_module()
    mem, _, target_emb, target_pad = make_inputs()
    log_q = ctx.prepare(mem, None, target_emb, target_pad)["var_log_q"]
    assert log_q.shape == (B, T, N) and log_q.dtype == torch.float32
    assert torch.allclose(log_q.exp().sum(-1), torch.ones(B, T), atol=1e-6)
    assert (log_q.exp()[mem.pad_mask.unsqueeze(1).expand(B, T, N)] == 0).all()
    # bidirectional: changing the last target token changes q at the first step
    emb2 = target_emb.clone()
    emb2[0, T - 1] += 1.0
    log_q2 = ctx.prepare(mem, None, emb2, target_pad)["var_log_q"]
    assert not torch.allclose(log_q2[0, 0], log_q[0, 0])
    assert torch.allclose(log_q2[1:], log_q[1:])
    # packing: garbage embeddings at padded target steps do not change the real steps
    emb3 = target_emb.clone()
    emb3[2, 3:] = 100.0
    log_q3 = ctx.prepare(mem, None, emb3, target_pad)["var_log_q"]
    assert torch.allclose(log_q3[2, :3], log_q[2, :3], atol=1e-6)
    with pytest.raises(ValueError, match="right-padded"):
        ctx.prepare(mem, None, target_emb, target_pad.flip(1))


def test_enum_training_step_gives_exact_expectation_and_kl():
    ctx = make_module(variational_mode="enum")
    mem, scores, target_emb, target_pad = make_inputs()
    prepared = ctx.prepare(mem, None, target_emb, target_pad)
    out = run_steps(ctx, mem, scores, prepared)
    assert out.combine == "logprob"
    assert out.samples.shape == (B, T, N, D) and out.log_weights.shape == (B, T, N)
    target = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(2))
    fake = FakeOutput(target)
    lp = fake(out.samples)                                      # (B, T, N)
    # what the decoder does for combine == "logprob": Σ_s w_s log p_s
    w = out.log_weights.exp()
    expectation = (w * lp).sum(-1)
    assert torch.isfinite(expectation).all()
    for b in range(B):
        for t in range(T):
            q = prepared["var_log_q"][b, t].exp()
            by_hand = sum(q[i] * F.log_softmax(fake.proj(mem.values[b, i]), -1)[target[b, t]]
                          for i in range(N) if not mem.pad_mask[b, i])
            assert torch.allclose(expectation[b, t], by_hand, atol=1e-5)
            a = torch.softmax(scores[b, t].double(), -1)
            keep = ~mem.pad_mask[b]
            kl = (q.double()[keep] * (q.double()[keep] / a[keep]).log()).sum()
            assert torch.allclose(out.losses["kl"][b, t].double(), kl, atol=1e-5)
    # the recurrent path uses the prior mean Σ a h; the reported attention is the prior
    a = torch.softmax(scores, -1)
    assert torch.allclose(out.mean, torch.einsum("btn,bnd->btd", a, mem.values), atol=1e-5)
    assert torch.allclose(out.attn, a)
    assert ctx.sequence_losses(out, fake, target, prepared) == {}


def test_reinforce_surrogate_gradient_is_the_score_function_estimator():
    ctx = make_module(variational_mode="sample")
    mem, scores, target_emb, target_pad = make_inputs()
    logits = torch.randn(B, T, N).masked_fill(mem.pad_mask.unsqueeze(1), float("-inf"))
    logits.requires_grad_(True)
    prepared = {"var_log_q": F.log_softmax(logits, -1)}
    out = run_steps(ctx, mem, scores, prepared)
    assert out.samples.shape == (B, T, 1, D)
    z = out.aux["z"]                                            # (B, T)
    assert not mem.pad_mask.gather(1, z).any()
    assert torch.equal(out.samples[:, :, 0], mem.values.gather(1, z.unsqueeze(-1).expand(B, T, D)))
    target = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(3))
    fake = FakeOutput(target)
    losses = ctx.sequence_losses(out, fake, target, prepared)
    assert set(losses) == {"reinforce", "baseline_nll"}
    (grad,) = torch.autograd.grad(losses["reinforce"].sum(), logits, retain_graph=True)
    with torch.no_grad():
        lp_z = fake(out.samples)[..., 0]
        soft = torch.einsum("btn,bnd->btd", torch.softmax(scores, -1), mem.values)
        baseline = fake(soft.unsqueeze(2))[..., 0]
        q = prepared["var_log_q"].exp()
        onehot = F.one_hot(z, N).float()
        expected = -(lp_z - baseline).unsqueeze(-1) * (onehot - q)   # −(log p − b) ∇_logits log q(z)
    assert torch.allclose(grad, expected, atol=1e-5)
    assert torch.allclose(losses["baseline_nll"], -baseline, atol=1e-5)
    # the reward is detached: the surrogate does not train the output layer, the baseline NLL does
    g_out = torch.autograd.grad(losses["reinforce"].sum(), fake.proj.weight, retain_graph=True,
                                allow_unused=True)[0]
    assert g_out is None or (g_out == 0).all()
    assert torch.autograd.grad(losses["baseline_nll"].sum(), fake.proj.weight)[0].abs().sum() > 0


def test_reinforce_estimator_is_unbiased_on_average():
    """Averaged over many draws, the surrogate gradient equals ∇ Σ_i q_i log p(y|h_i)."""
    ctx = make_module(variational_mode="sample")
    n = 20000
    g = torch.Generator().manual_seed(4)
    values = torch.randn(1, 4, D, generator=g).expand(n, 4, D)
    mem = Memory(values, values, torch.zeros(n, 4, dtype=torch.bool))
    theta = torch.randn(4, generator=g, requires_grad=True)
    log_q = F.log_softmax(theta, -1).expand(n, 1, 4)
    scores = torch.randn(1, 4, generator=g).expand(n, 4)
    torch.manual_seed(5)
    out = stack_steps([ctx.step(scores, None, mem, {"var_log_q": log_q}, 0)])
    target = torch.full((n, 1), 2)
    fake = FakeOutput(target)
    surrogate = ctx.sequence_losses(out, fake, target, {})["reinforce"].mean()
    (g_mc,) = torch.autograd.grad(surrogate, theta)
    with torch.no_grad():
        lp_each = F.log_softmax(fake.proj(values[0]), -1)[:, 2]     # log p(y | h_i), (4,)
    exact_obj = -(F.softmax(theta, -1) * lp_each).sum()
    (g_exact,) = torch.autograd.grad(exact_obj, theta)
    assert torch.allclose(g_mc, g_exact, atol=0.01), (g_mc, g_exact)   # |g| ~ 0.1


def test_decoding_uses_the_prior_deterministically():
    mem, scores, target_emb, target_pad = make_inputs()
    for decode in ("soft", "exact"):
        ctx = make_module(variational_decode=decode, variational_mode="sample").eval()
        prepared = ctx.prepare(mem, None, None, None)
        assert prepared == {}
        o1 = ctx.step(scores[:, 0], None, mem, prepared, 0)
        o2 = ctx.step(scores[:, 0], None, mem, prepared, 0)
        a = torch.softmax(scores[:, 0], -1)
        assert torch.equal(o1.mean, o2.mean)
        assert torch.allclose(o1.mean, torch.einsum("bn,bnd->bd", a, mem.values), atol=1e-6)
        assert (o1.attn[mem.pad_mask] == 0).all() and o1.losses == {}
        if decode == "soft":
            assert o1.samples is None and o1.log_weights is None
        else:
            assert o1.combine == "prob" and torch.equal(o1.samples, mem.values)
            assert torch.allclose(o1.log_weights.exp(), a)
            assert torch.isneginf(o1.log_weights[mem.pad_mask]).all()


def test_training_without_target_is_a_clear_error():
    ctx = make_module()
    mem, scores, _, _ = make_inputs()
    assert ctx.needs_target
    with pytest.raises(RuntimeError, match="needs the target"):
        ctx.prepare(mem, None, None, None)
    with pytest.raises(RuntimeError, match="without the posterior"):
        ctx.step(scores[:, 0], None, mem, {}, 0)


def test_sampled_alignments_never_hit_padding_and_follow_q():
    ctx = make_module(variational_mode="sample")
    mem, scores, target_emb, target_pad = make_inputs()
    prepared = ctx.prepare(mem, None, target_emb, target_pad)
    k = 4000                                   # every example repeated k times in one batch
    rep = Memory(*(x.repeat_interleave(k, 0) for x in (mem.keys, mem.values, mem.pad_mask)))
    prep_rep = {"var_log_q": prepared["var_log_q"].detach().repeat_interleave(k, 0)}
    torch.manual_seed(6)
    z = ctx.step(scores[:, 0].repeat_interleave(k, 0), None, rep, prep_rep, 0).aux["z"]
    freq = torch.stack([torch.bincount(z.view(B, k)[b], minlength=N) for b in range(B)]) / k
    assert (freq[mem.pad_mask] == 0).all()
    assert torch.allclose(freq, prepared["var_log_q"][:, 0].exp().detach(), atol=0.03)


def test_options():
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    VariationalContext.add_args(parser)
    args = parser.parse_args(["--variational-mode", "sample", "--variational-decode", "exact",
                              "--variational-inference-dim", "6"])
    assert (args.variational_mode, args.variational_decode) == ("sample", "exact")
    ctx = make_module(variational_inference_dim=6)
    assert ctx.inference_rnn.hidden_size == 3 and ctx.context_dim == D
    assert ctx.loss_weight("kl") == 1.0 and make_module(variational_beta=0.5).loss_weight("kl") == 0.5
    with pytest.raises(ValueError, match="--variational-mode"):
        make_module(variational_mode="gumbel")
    with pytest.raises(ValueError, match="decoder_embed_dim"):
        build_context(argparse.Namespace(context_inference="variational"), D, 4, 8)


# -- memory: the enumeration over source positions in chunks, recomputed in the backward pass ---
def _variational_model(dropout, vocab=12):
    from tests.test_seq2seq_model import _batch, _dictionary, build_model
    torch.manual_seed(0)
    model, d = build_model("variational", dictionary=_dictionary(vocab), dropout=dropout,
                           variational_mode="enum")
    model.train()
    src, lengths, prev = _batch(d, N=6, T=5)
    target = torch.cat([prev[:, 1:], torch.full_like(prev[:, :1], d.eos())], dim=1)
    target[prev.eq(d.pad())] = d.pad()
    return model, d, src, lengths, prev, target


def _enum_loss_and_grads(model, src, lengths, prev, target, seed=5):
    model.zero_grad()
    torch.manual_seed(seed)
    enc = model.encoder(src, lengths)
    lprobs, extra = model.decoder(prev, enc, target=target)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (nll * prev.ne(1)).sum() + extra["losses"]["kl"][0]
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                           if p.grad is not None}


def _saved_bytes(model, src, lengths, prev, target):
    """Bytes of the tensors autograd keeps for the backward pass of one training forward."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        enc = model.encoder(src, lengths)
        model.decoder(prev, enc, target=target)
    return total[0]


def test_enum_in_chunks_gives_the_same_loss_and_gradients(monkeypatch):
    """Chunked (one source position at a time, checkpointed) = all N positions at once."""
    from fairseq_acvi.mc_prediction import averaging
    model, d, src, lengths, prev, target = _variational_model(dropout=0.0)
    loss, grads = _enum_loss_and_grads(model, src, lengths, prev, target)
    monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 1)
    loss_c, grads_c = _enum_loss_and_grads(model, src, lengths, prev, target)
    torch.testing.assert_close(loss_c, loss, atol=1e-5, rtol=1e-6)
    assert grads.keys() == grads_c.keys() and len(grads) > 5
    for name in grads:
        torch.testing.assert_close(grads_c[name], grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_recomputed_chunks_replay_the_same_dropout(monkeypatch):
    """With dropout, the recomputation in the backward pass draws the forward pass's masks: the
    gradients equal those of the same chunks kept in memory."""
    from fairseq_acvi.mc_prediction import averaging
    model, d, src, lengths, prev, target = _variational_model(dropout=0.3)
    monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 1)
    loss, grads = _enum_loss_and_grads(model, src, lengths, prev, target)
    monkeypatch.setattr(averaging, "checkpoint",
                        lambda fn, *a, use_reentrant: fn(*a))           # keep every chunk
    loss_k, grads_k = _enum_loss_and_grads(model, src, lengths, prev, target)
    torch.testing.assert_close(loss, loss_k)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_k[name], msg=name)


def test_enum_keeps_one_chunk_of_logits_not_n(monkeypatch):
    """Memory: with a vocabulary large enough for the output layer to dominate, chunked and
    checkpointed, the tensors kept for the backward pass shrink by more than half with N = 6
    source positions (chunked without recomputation, they do not shrink)."""
    from fairseq_acvi.mc_prediction import averaging
    model, d, src, lengths, prev, target = _variational_model(dropout=0.0, vocab=3000)
    whole = _saved_bytes(model, src, lengths, prev, target)
    monkeypatch.setattr(averaging, "MC_CHUNK_ELEMENTS", 1)
    chunked = _saved_bytes(model, src, lengths, prev, target)
    monkeypatch.setattr(averaging, "checkpoint", lambda fn, *a, use_reentrant: fn(*a))
    kept = _saved_bytes(model, src, lengths, prev, target)
    assert kept > 0.9 * whole
    assert chunked < 0.5 * whole, (chunked, whole)
