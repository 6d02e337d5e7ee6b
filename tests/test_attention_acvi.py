"""Scorers (docs/method.md §1) and the soft / ACVI context inference (§2.1-2.2)."""
import argparse
import math

import pytest
import torch

from fairseq_acvi.mc_prediction.combination import combine_samples
from fairseq_acvi.mc_prediction.sampling import draw_gaussian
from fairseq_acvi.modules.context import CONTEXT_REGISTRY, StepOutput, build_context, stack_steps
from fairseq_acvi.modules.context.acvi import gaussian_kl_to_standard
from fairseq_acvi.modules.context.scorers import SCORERS, build_scorer, masked_softmax


def _memory(B=3, N=7, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, N, d, generator=g)
    lengths = torch.tensor([N, N - 2, 1])[:B]
    pad = torch.arange(N)[None, :] >= lengths[:, None]
    return h, pad


def _one_step(ctx, scores, query, mem, prep):
    """One decoder step as the decoder runs it (``step``, then ``finish`` on the one-step stack),
    returned without the T dim."""
    out = ctx.finish(stack_steps([ctx.step(scores, query, mem, prep, 0)]), prep)
    sq = lambda x: None if x is None else x.squeeze(1)  # noqa: E731
    return StepOutput(mean=sq(out.mean), attn=sq(out.attn), samples=sq(out.samples),
                      losses={k: sq(v) for k, v in out.losses.items()})


@pytest.mark.parametrize("name", SCORERS)
def test_scorers_mask_before_softmax(name):
    torch.manual_seed(0)
    h, pad = _memory()
    scorer = build_scorer(name, query_dim=5, key_dim=8, attn_dim=6)
    mem = scorer.prepare(h, pad)
    scores = scorer(torch.randn(3, 5), mem)
    assert scores.shape == (3, 7)
    assert torch.isinf(scores[pad]).all() and torch.isfinite(scores[~pad]).all()
    a = masked_softmax(scores)
    assert torch.all(a[pad] == 0)
    torch.testing.assert_close(a.sum(-1), torch.ones(3))
    assert a[2, 0] == 1.0  # a one-token source attends fully to it


def test_additive_scorer_formula_and_coverage():
    torch.manual_seed(0)
    h, pad = _memory()
    sc = build_scorer("additive", 5, 8, 6, coverage=True)
    with torch.no_grad():
        sc.w_k.normal_()
    mem = sc.prepare(h, pad)
    s, k = torch.randn(3, 5), torch.rand(3, 7)
    want = (torch.tanh(h @ sc.W_h.weight.T + (s @ sc.W_s.weight.T + sc.W_s.bias)[:, None]
                       + k[..., None] * sc.w_k) @ sc.v.weight.T).squeeze(-1)
    got = sc(s, mem, coverage=k)
    torch.testing.assert_close(got[~pad], want[~pad])
    assert not torch.allclose(sc(s, mem, coverage=None)[~pad], got[~pad])


def test_multiplicative_is_luong_general():
    torch.manual_seed(0)
    h, pad = _memory()
    sc = build_scorer("multiplicative", 5, 8, 0)
    s = torch.randn(3, 5)
    want = torch.einsum("bnd,ed,be->bn", h, sc.W.weight, s)
    torch.testing.assert_close(sc(s, sc.prepare(h, pad))[~pad], want[~pad])


def test_bad_scorer_options():
    with pytest.raises(ValueError, match="--attention-type"):
        build_scorer("cosine", 4, 4, 4)
    with pytest.raises(ValueError, match="coverage"):
        build_scorer("multiplicative", 4, 4, 4, coverage=True)
    with pytest.raises(ValueError, match="--context-inference"):
        build_context(argparse.Namespace(context_inference="hard"), 4, 4, 4)


def test_kl_closed_form_matches_monte_carlo():
    torch.manual_seed(0)
    m, v = torch.randn(4, 6) * 0.7, torch.rand(4, 6) * 2 + 0.1
    kl = gaussian_kl_to_standard(m, v)
    c = m + v.sqrt() * torch.randn(200_000, 4, 6)
    logq = torch.distributions.Normal(m, v.sqrt()).log_prob(c).sum(-1)
    logp = torch.distributions.Normal(0.0, 1.0).log_prob(c).sum(-1)
    mc = (logq - logp).mean(0)
    torch.testing.assert_close(kl, mc, atol=0.03, rtol=0.02)
    assert torch.all(kl >= 0)
    assert gaussian_kl_to_standard(torch.zeros(3), torch.ones(3)).item() == 0.0


def _acvi(**kw):
    """ACVI as the papers define it (μ(h) = h on the raw annotations, β = 1 without a schedule, iid
    samples; PAPERS_CHOICE) unless ``kw`` says otherwise: the maths these tests check against
    closed forms."""
    from fairseq_acvi.modules.context.acvi import PAPERS_CHOICE
    kw = dict(PAPERS_CHOICE, **kw)
    args = argparse.Namespace(context_inference="acvi", mc_samples=kw.pop("mc_samples", 10), **kw)
    return build_context(args, value_dim=8, query_dim=5, enc_final_dim=8)


def test_acvi_moments_and_sampling_distribution():
    torch.manual_seed(0)
    h, pad = _memory()
    ctx = _acvi(mc_samples=4000).eval()
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    scores = scorer(torch.randn(3, 5), mem)
    prep = ctx.prepare(mem, h[:, 0])
    out = _one_step(ctx, scores, None, mem, prep)
    a = masked_softmax(scores)
    m = torch.einsum("bn,bnd->bd", a, h)
    v = torch.einsum("bn,bnd->bd", a ** 2, prep["acvi_var"])
    torch.testing.assert_close(out.mean, m)               # μ(h) = h: the mean is soft attention
    assert out.samples.shape == (3, 4000, 8)
    torch.testing.assert_close(out.samples.mean(1), m, atol=0.1, rtol=0)
    torch.testing.assert_close(out.samples.var(1), v, atol=0.05, rtol=0.1)
    torch.testing.assert_close(out.losses["kl"], gaussian_kl_to_standard(m, v))
    assert torch.all(out.attn[pad] == 0)


def test_acvi_finish_forms_every_steps_variance_kl_and_samples_at_once():
    """The decoder loop asks ``step`` only for a_t and m_t; ``finish`` on the stacked steps gives
    each step's v_t = Σ a² σ², its KL and K samples, as if computed step by step (D 84-88)."""
    torch.manual_seed(0)
    h, pad = _memory()
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    T, K = 4, 3000
    for training in (True, False):
        ctx = _acvi(mc_samples=K, acvi_logvar_init=-1.0).train(training)
        prep = ctx.prepare(mem, h[:, 0])
        queries = torch.randn(T, 3, 5)
        steps = [ctx.step(scorer(queries[t], mem), None, mem, prep, t) for t in range(T)]
        assert all(s.samples is None and not s.losses for s in steps)   # nothing but a_t, m_t
        out = ctx.finish(stack_steps(steps), prep)
        a = torch.stack([masked_softmax(scorer(queries[t], mem)) for t in range(T)], 1)
        m = torch.einsum("btn,bnd->btd", a, h)
        v = torch.einsum("btn,bnd->btd", a ** 2, prep["acvi_var"])
        torch.testing.assert_close(out.mean, m)
        torch.testing.assert_close(out.losses["kl"], gaussian_kl_to_standard(m, v))
        assert out.samples.shape == (3, T, 1 if training else K, 8)
        if not training:
            torch.testing.assert_close(out.samples.mean(2), m, atol=0.1, rtol=0)
            torch.testing.assert_close(out.samples.var(2), v, atol=0.05, rtol=0.1)


@pytest.mark.parametrize("K", [1, 2, 5, 6])
def test_antithetic_draws_are_pairs_with_the_gaussian_marginal(K):
    """``--mc-sampling antithetic`` (§2.2): the samples come in pairs m ± √v ε — their mean is m
    exactly for even K (odd K: one unpaired sample) — and each one is still N(m, v)."""
    torch.manual_seed(0)
    m, v = torch.randn(4, 3, 5), torch.rand(4, 3, 5) + 0.1
    c = draw_gaussian(m, v, K, torch.float32, antithetic=True)            # (4, 3, K, 5)
    assert c.shape == (4, 3, K, 5)
    eps = (c - m.unsqueeze(-2)) / v.sqrt().unsqueeze(-2)
    half = K // 2
    torch.testing.assert_close(eps[..., (K + 1) // 2:, :], -eps[..., :half, :])
    if K % 2 == 0:
        torch.testing.assert_close(c.mean(-2), m)
    assert not torch.allclose(eps[..., 0, :], eps[..., -1, :]) or K == 1   # not the mean itself
    # the marginal of every sample: N(m, v) — 20,000 draws of one (m, v)
    m1, v1 = torch.tensor([[0.5, -1.0]]), torch.tensor([[0.25, 4.0]])
    big = draw_gaussian(m1.expand(20000, 2), v1.expand(20000, 2), K, torch.float32, antithetic=True)
    for k in range(K):
        torch.testing.assert_close(big[:, k].mean(0), m1[0], atol=0.05, rtol=0)
        torch.testing.assert_close(big[:, k].var(0), v1[0], atol=0.0, rtol=0.05)


def test_antithetic_sampling_is_an_evaluation_option_checked_by_name():
    """Training keeps one sample either way; at evaluation ``finish`` draws ± pairs; a wrong value
    (e.g. from --model-overrides) is refused naming the option."""
    torch.manual_seed(0)
    h, pad = _memory()
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    ctx = _acvi(mc_samples=4, mc_sampling="antithetic", acvi_logvar_init=-1.0)
    scores = scorer(torch.randn(3, 5), mem)
    out = _one_step(ctx.eval(), scores, None, mem, ctx.prepare(mem, h[:, 0]))
    torch.testing.assert_close(out.samples.mean(1), out.mean)             # (B, K, d): exact
    torch.testing.assert_close(out.samples[:, 2:] - out.mean[:, None], -(out.samples[:, :2] - out.mean[:, None]))
    assert _one_step(ctx.train(), scores, None, mem, ctx.prepare(mem, h[:, 0])).samples.shape[1] == 1
    iid = _acvi(mc_samples=4, acvi_logvar_init=-1.0).eval()
    assert not iid.antithetic                                            # the default: iid
    out = _one_step(iid, scores, None, mem, iid.prepare(mem, h[:, 0]))
    assert not torch.allclose(out.samples.mean(1), out.mean, atol=1e-3)
    with pytest.raises(ValueError, match="--mc-sampling must be one of iid, antithetic, got 'sobol'"):
        _acvi(mc_sampling="sobol")


def test_acvi_equals_soft_attention_when_sigma_to_zero():
    torch.manual_seed(0)
    h, pad = _memory()
    acvi = _acvi(mc_samples=3)
    soft = build_context(argparse.Namespace(context_inference="soft"), 8, 5, 8)
    with torch.no_grad():
        acvi.logvar_net[-1].weight.zero_()
        acvi.logvar_net[-1].bias.fill_(-40.0)             # σ² → e^-20 after clamping
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    scores = scorer(torch.randn(3, 5), mem)
    ref = _one_step(soft, scores, None, mem, {}).mean
    for mode in (acvi.train(), acvi.eval()):
        out = _one_step(mode, scores, None, mem, mode.prepare(mem, h[:, 0]))
        torch.testing.assert_close(out.samples, ref[:, None].expand_as(out.samples),
                                   atol=1e-3, rtol=0)
    zero = _acvi(mc_samples=0).eval()
    out = _one_step(zero, scores, None, mem, zero.prepare(mem, h[:, 0]))
    assert out.samples is None
    torch.testing.assert_close(out.mean, ref)


def test_acvi_gradients_and_kl_warmup():
    torch.manual_seed(0)
    h, pad = _memory()
    h.requires_grad_(True)
    acvi = _acvi(acvi_kl_warmup_updates=100, acvi_beta=0.5, acvi_mean="mlp", acvi_logvar_layers=2)
    scorer = build_scorer("additive", 5, 8, 6)
    mem = scorer.prepare(h, pad)
    out = _one_step(acvi.train(), scorer(torch.randn(3, 5), mem), None, mem, acvi.prepare(mem, h[:, 0]))
    (out.samples.sum() + out.losses["kl"].sum()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in acvi.parameters())
    assert h.grad[~pad].abs().sum() > 0 and torch.all(h.grad[pad] == 0)
    assert acvi.loss_weight("kl") == 0.0
    acvi.set_num_updates(50)
    assert acvi.loss_weight("kl") == pytest.approx(0.25)
    acvi.set_num_updates(1000)
    assert acvi.loss_weight("kl") == pytest.approx(0.5)


def test_acvi_cyclical_kl_annealing():
    acvi = _acvi(acvi_kl_cycle_updates=100, acvi_beta=0.4)
    weights = {}
    for n in (0, 25, 50, 99, 100, 125, 260):
        acvi.set_num_updates(n)
        weights[n] = acvi.loss_weight("kl")
    assert weights == pytest.approx({0: 0.0, 25: 0.2, 50: 0.4, 99: 0.4, 100: 0.0, 125: 0.2, 260: 0.4})
    assert acvi.loss_weight("kl_mean_part") == 0.0       # diagnostics never enter the loss
    with pytest.raises(ValueError, match="at most one of them"):
        _acvi(acvi_kl_cycle_updates=100, acvi_kl_warmup_updates=10)
    with pytest.raises(ValueError, match="must be ≥ 0"):
        _acvi(acvi_kl_cycle_updates=-1)


def test_acvi_kl_delay_then_warmup_or_cycle():
    """--acvi-kl-delay-updates: weight 0 for the first N updates, then the schedule starts."""
    weights = {}
    acvi = _acvi(acvi_kl_delay_updates=200, acvi_kl_warmup_updates=100, acvi_beta=0.002)
    for n in (0, 199, 200, 250, 300, 5000):
        acvi.set_num_updates(n)
        weights[n] = acvi.loss_weight("kl")
    assert weights == pytest.approx({0: 0.0, 199: 0.0, 200: 0.0, 250: 0.001, 300: 0.002,
                                     5000: 0.002})
    cyc = _acvi(acvi_kl_delay_updates=10, acvi_kl_cycle_updates=100, acvi_beta=1.0)
    cyc.set_num_updates(9)
    assert cyc.loss_weight("kl") == 0.0
    cyc.set_num_updates(35)
    assert cyc.loss_weight("kl") == pytest.approx(0.5)
    plain = _acvi(acvi_kl_delay_updates=10, acvi_beta=0.3)
    plain.set_num_updates(9)
    assert plain.loss_weight("kl") == 0.0
    plain.set_num_updates(10)
    assert plain.loss_weight("kl") == pytest.approx(0.3)
    with pytest.raises(ValueError, match="delay-updates must be ≥ 0"):
        _acvi(acvi_kl_delay_updates=-1)


def test_acvi_gumbel_sampler_is_a_mixture_member():
    torch.manual_seed(0)
    h, pad = _memory()
    acvi = _acvi(acvi_sampler="gumbel", acvi_gumbel_temperature=0.01).train()
    with torch.no_grad():
        acvi.logvar_net[-1].bias.fill_(-40.0)
        acvi.logvar_net[-1].weight.zero_()
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    out = _one_step(acvi, scorer(torch.randn(3, 5), mem), None, mem, acvi.prepare(mem, h[:, 0]))
    # with τ → 0 and σ → 0 a sample is (almost) one of the real, non-padded h_i
    d = (out.samples[:, 0, None, :] - h).norm(dim=-1).masked_fill(pad, float("inf"))
    assert torch.all(d.min(-1).values < 0.05)


def test_combine_samples_prob_and_logprob():
    lp = torch.log_softmax(torch.randn(2, 3, 4, 5), -1)
    lw = torch.log_softmax(torch.randn(2, 3, 4), -1)
    mix = combine_samples(lp, lw, "prob")
    torch.testing.assert_close(mix.exp(), (lp.exp() * lw.exp()[..., None]).sum(2))
    torch.testing.assert_close(mix.exp().sum(-1), torch.ones(2, 3))
    torch.testing.assert_close(combine_samples(lp, lw, "logprob"), (lp * lw.exp()[..., None]).sum(2))
    uni = combine_samples(lp, None, "prob")
    torch.testing.assert_close(uni.exp(), lp.exp().mean(2))
    geo = combine_samples(lp, lw, "geometric")                   # --mc-combine geometric
    torch.testing.assert_close(geo, torch.log_softmax((lp * lw.exp()[..., None]).sum(2), -1))
    torch.testing.assert_close(geo.exp().sum(-1), torch.ones(2, 3))
    torch.testing.assert_close(combine_samples(lp[:, :, :1], None, "geometric"), lp[:, :, 0])


def test_registry_has_the_five_variants_or_reports_missing():
    assert {"soft", "acvi"} <= set(CONTEXT_REGISTRY)


def test_kl_parts_sum_to_the_kl_and_match_monte_carlo():
    """½‖m‖² and ½Σ(v − 1 − log v) split the KL of N(m, v) to N(0, I) into the price of the mean
    and of the variance: they sum to the closed form, and each matches a Monte-Carlo estimate."""
    from fairseq_acvi.modules.context.acvi import gaussian_kl_parts

    torch.manual_seed(0)
    m, v = torch.randn(4, 6) * 0.7, torch.rand(4, 6) * 2 + 0.1
    mean_part, var_part = gaussian_kl_parts(m, v)
    torch.testing.assert_close((mean_part + var_part).sum(-1), gaussian_kl_to_standard(m, v))
    # Monte Carlo: KL(N(0, v) || N(0, 1)) is the variance part alone (its mean part is 0) ...
    c0 = v.sqrt() * torch.randn(200_000, 4, 6)
    mc_var = (torch.distributions.Normal(0.0, v.sqrt()).log_prob(c0)
              - torch.distributions.Normal(0.0, 1.0).log_prob(c0)).mean(0)
    torch.testing.assert_close(var_part, mc_var, atol=0.02, rtol=0.03)
    # ... and E_q[log N(c; 0, 1)] differs between N(m, v) and N(0, v) by exactly −½ m²
    c = m + c0
    shift = (torch.distributions.Normal(0.0, 1.0).log_prob(c0)
             - torch.distributions.Normal(0.0, 1.0).log_prob(c)).mean(0)
    torch.testing.assert_close(mean_part, shift, atol=0.02, rtol=0.03)
    assert torch.all(var_part >= 0) and torch.all(mean_part >= 0)


def test_acvi_logs_kl_parts_and_free_bits_floor_the_objective():
    torch.manual_seed(0)
    h, pad = _memory()
    scores = torch.randn(3, 7).masked_fill(pad, float("-inf"))
    outs = {}
    for fb in (0.0, 0.5):
        torch.manual_seed(1)
        ctx = _acvi(acvi_free_bits=fb, acvi_logvar_init=0.0)
        ctx.train()
        mem = build_scorer("multiplicative", 5, 8, 0).prepare(h, pad)
        out = _one_step(ctx, scores, torch.randn(3, 5), mem, ctx.prepare(mem, None))
        outs[fb] = out
        parts = out.losses["kl_mean_part"] + out.losses["kl_var_part"]
        attn = masked_softmax(scores)
        m = attn.unsqueeze(1).bmm(h).squeeze(1)
        torch.testing.assert_close(out.losses["ctx_norm2"], m.pow(2).sum(-1))
        assert out.losses["ctx_var"].shape == (3,) and torch.all(out.losses["ctx_var"] > 0)
        for name in ("kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var"):
            assert ctx.loss_weight(name) == 0.0 and not out.losses[name].requires_grad
        if fb == 0.0:
            torch.testing.assert_close(out.losses["kl"], parts)
        else:  # Σ_d max(λ, KL_d) ≥ KL and ≥ d·λ
            assert torch.all(out.losses["kl"] >= parts - 1e-6)
            assert torch.all(out.losses["kl"] >= 8 * fb - 1e-6)
    # below the floor a dimension gets no gradient
    ctx = _acvi(acvi_free_bits=1e6)
    ctx.train()
    mem = build_scorer("multiplicative", 5, 8, 0).prepare(h.requires_grad_(), pad)
    out = _one_step(ctx, scores, torch.randn(3, 5), mem, ctx.prepare(mem, None))
    out.losses["kl"].sum().backward()
    assert h.grad is None or torch.all(h.grad == 0)
    with pytest.raises(ValueError, match="free-bits"):
        _acvi(acvi_free_bits=-1.0)


def test_acvi_logvar_bound_caps_sigma_smoothly():
    """``--acvi-logvar-bound X``: log σ² = X − softplus(X − raw) < X, ≈ raw well below X, and the
    log σ² network keeps a gradient above the bound (a hard clamp would give it none)."""
    h, pad = _memory()
    for bound in (None, -3.0):
        ctx = _acvi(acvi_logvar_bound=bound, acvi_logvar_init=5.0)
        mu, var = ctx.value_moments(h)
        if bound is None:
            torch.testing.assert_close(var.log().mean(), torch.tensor(5.0), atol=0.5, rtol=0)
            continue
        assert torch.all(var < math.exp(bound))
        assert torch.all(var > 0.95 * math.exp(bound))        # raw ≈ 5 is far above the bound
        var.log().sum().backward()
        assert ctx.logvar_net[-1].bias.grad.abs().min() > 0
    low = _acvi(acvi_logvar_bound=-3.0, acvi_logvar_init=-12.0)
    torch.testing.assert_close(low.value_moments(h)[1].log().mean(), torch.tensor(-12.0),
                               atol=0.5, rtol=0)                # far below: unchanged
    for bad in (-20.0, 11.0):
        with pytest.raises(ValueError, match="--acvi-logvar-bound"):
            _acvi(acvi_logvar_bound=bad)


def test_acvi_value_norm_puts_the_context_on_the_prior_scale():
    """``--acvi-value-norm layernorm``: μ and σ² read each annotation normalised over its d dimensions
    (no parameters), so ‖μ(h_i)‖² = d whatever the encoder's scale; the mean context is Σ a_i LN(h_i)."""
    h, pad = _memory()
    h = 0.5 * h + 0.3                                        # an encoder's shifted, smaller annotations
    ctx = _acvi(acvi_value_norm="layernorm", mc_samples=0).eval()
    mu, var = ctx.value_moments(h)
    torch.testing.assert_close(mu.mean(-1), torch.zeros(3, 7), atol=1e-5, rtol=0)
    torch.testing.assert_close(mu.pow(2).sum(-1), torch.full((3, 7), 8.0), atol=0, rtol=1e-3)   # eps 1e-5
    plain_mu, plain_var = _acvi(mc_samples=0).value_moments(h)
    torch.testing.assert_close(plain_mu, h)                  # off by default: μ(h) = h
    scorer = build_scorer("multiplicative", 5, 8, 0)
    mem = scorer.prepare(h, pad)
    scores = scorer(torch.randn(3, 5), mem)
    out = _one_step(ctx, scores, None, mem, ctx.prepare(mem, None))
    torch.testing.assert_close(out.mean, torch.einsum("bn,bnd->bd", masked_softmax(scores), mu))
    with pytest.raises(ValueError, match="--acvi-value-norm"):
        _acvi(acvi_value_norm="batchnorm")
