"""Student-t escort sampling and the t-divergence (docs/method.md §4.2) against numerical integration."""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn

from fairseq_acvi.modules.student_t import (SAMPLERS, StudentTMatrices, _polar_forward,
                                            _polar_nu_weight, polar_noise, sample_escort,
                                            t_divergence, t_divergence_exact, t_divergence_seed)


def t_logpdf(x, mu, scale, nu):
    c = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(math.pi * nu) - math.log(scale)
    return c - (nu + 1) / 2 * np.log1p(((x - mu) / scale) ** 2 / nu)


def t_pdf(x, mu, scale, nu):
    return np.exp(t_logpdf(x, mu, scale, nu))


def divergence_by_definition(mu, sigma, nu_q, nu_p, n=400_001):
    """D_t(q‖p) = ∫ q̃ log_t q − ∫ q̃ log_t p with q̃ = q^t / ∫ q^t, all by a dense midpoint rule.

    Independent of the module: the escort is normalised numerically (not from D 60), the grid is
    x = μ + σ tan θ, and log_t is applied to the densities directly. Returns +inf when the
    integrand's tail makes the integral diverge (checked analytically).
    """
    if 2 * (nu_p + 1) / (nu_q + 1) >= nu_q + 2:
        return math.inf
    t = 1 + 2 / (1 + nu_q)
    theta = (np.arange(n) + 0.5) / n * math.pi - math.pi / 2
    x = mu + sigma * np.tan(theta)
    dx = sigma / np.cos(theta) ** 2 * (math.pi / n)
    lq = t_logpdf(x, mu, sigma, nu_q)
    lp = t_logpdf(x, 0.0, 1.0, nu_p)
    log_z = np.log(np.sum(np.exp(t * lq) * dx))
    log_esc = t * lq - log_z                                   # log q̃ (normalised numerically)
    # q̃·log_t v = q̃ (v^{1−t} − 1)/(1 − t), with q̃·v^{1−t} = exp(log q̃ + (1−t) log v): no underflow
    term = lambda lv: (np.exp(log_esc + (1 - t) * lv) - np.exp(log_esc)) / (1 - t)
    return float(np.sum((term(lq) - term(lp)) * dx))


def seed64(mu, sigma, nu_q, nu_p):
    f = lambda v: torch.tensor([float(v)], dtype=torch.float64)
    return t_divergence_seed(f(mu), f(sigma), torch.tensor(float(nu_q), dtype=torch.float64),
                             float(nu_p)).item()


def exact64(mu, sigma, nu_q, nu_p):
    f = lambda v: torch.tensor([float(v)], dtype=torch.float64)
    return t_divergence_exact(f(mu), f(sigma), torch.tensor(float(nu_q)), float(nu_p)).item()


CASES_EQUAL_NU = [(0.0, 1.0, 10), (0.5, 0.3, 10), (-1.2, 2.0, 3), (0.1, 0.05, 100), (2.0, 0.7, 1.5)]


@pytest.mark.parametrize("mu,sigma,nu", CASES_EQUAL_NU)
def test_closed_form_matches_definition_when_dofs_agree(mu, sigma, nu):
    ref = divergence_by_definition(mu, sigma, nu, nu)
    assert seed64(mu, sigma, nu, nu) == pytest.approx(ref, rel=1e-5, abs=1e-7)
    assert exact64(mu, sigma, nu, nu) == pytest.approx(ref, rel=1e-5, abs=1e-7)
    assert (ref > 1e-6) == ((mu, sigma) != (0.0, 1.0))       # zero exactly when q = p


@pytest.mark.parametrize("mu,sigma,nu_q,nu_p", [(0.0, 1.0, 100, 10), (0.2, 0.01, 50, 10),
                                                (2.0, 2.0, 4, 10), (1.0, 0.05, 100, 10),
                                                (0.3, 0.5, 20, 5)])
def test_exact_matches_definition_when_dofs_differ(mu, sigma, nu_q, nu_p):
    ref = divergence_by_definition(mu, sigma, nu_q, nu_p)
    assert exact64(mu, sigma, nu_q, nu_p) == pytest.approx(ref, rel=1e-4, abs=1e-7)
    assert ref > 0


def test_zero_iff_q_equals_p_and_nonnegative():
    for nu in (2.0, 10.0, 100.0):
        assert abs(seed64(0.0, 1.0, nu, nu)) < 1e-10
        assert abs(exact64(0.0, 1.0, nu, nu)) < 1e-8
    rng = np.random.RandomState(0)
    for _ in range(40):
        mu, sigma, nu = rng.randn(), math.exp(rng.randn()), math.exp(rng.uniform(0, 5))
        assert seed64(mu, sigma, nu, nu) > 0
        assert exact64(mu, sigma, nu, nu) > 0
    # q != p only through ν: the exact divergence is positive, the seed formula need not be
    assert exact64(0.0, 1.0, 100, 10) > 0


def test_seed_formula_gap_report(capsys):
    """The numbers of docs/method.md §4.2 (per element, μ = 0, σ = 1), printed next to the definition."""
    expected = {(10, 10): 0.0, (100, 10): 14.0, (3, 10): -1.79, (5, 100): -1.89}
    rows = []
    for (nu_q, nu_p), want in expected.items():
        got = seed64(0.0, 1.0, nu_q, nu_p)
        assert got == pytest.approx(want, abs=0.01)
        ref = divergence_by_definition(0.0, 1.0, nu_q, nu_p)
        ex = exact64(0.0, 1.0, nu_q, nu_p)
        if math.isfinite(ref):
            assert ex == pytest.approx(ref, rel=1e-4, abs=1e-8)
        rows.append((nu_q, nu_p, got, ex, ref))
    with capsys.disabled():
        print("\nt-divergence per element at mu=0, sigma=1 (seed = D 56 verbatim):")
        print(f"{'nu_q':>6} {'nu_p':>6} {'seed':>10} {'exact':>12} {'definition':>12} {'seed-def':>10}")
        for nu_q, nu_p, s, e, r in rows:
            print(f"{nu_q:>6} {nu_p:>6} {s:>10.4f} {e:>12.4g} {r:>12.4g} {s - r:>10.4g}")
    # the seed formula is negative for some q != p: it is not a divergence when ν_q != ν_p
    assert seed64(0.0, 1.0, 3, 10) < 0 and seed64(0.0, 1.0, 5, 100) < 0


def test_tied_and_dispatch_and_float32():
    mu = torch.randn(4, 5, dtype=torch.float16)
    sigma = torch.rand(4, 5, dtype=torch.float16) + 0.1
    nu = torch.tensor(7.0)
    for mode in ("seed", "exact", "tied"):
        assert t_divergence(mu, sigma, nu, 10.0, mode).dtype == torch.float32
    tied = t_divergence(mu.double(), sigma.double(), nu, 10.0, "tied")
    assert tied.item() == pytest.approx(t_divergence_seed(mu.double(), sigma.double(), nu, 7.0).item(),
                                        rel=1e-6)
    with pytest.raises(ValueError, match="--t-divergence"):
        t_divergence(mu, sigma, nu, 10.0, "kl")


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("nu,sigma", [(0.5, 0.7), (5.0, 0.7), (100.0, 2.0)])
def test_escort_samples_have_the_escort_distribution(nu, sigma, sampler):
    """Var of q̃ = t(μ, ν/(ν+2)σ², ν+2) is ν/(ν+2)·σ²·(ν+2)/ν = σ²; median |x−μ| as a check on shape."""
    torch.manual_seed(0)
    n = 400_000
    mu = torch.full((n,), 1.5, dtype=torch.float64)
    x = sample_escort(mu, torch.full((n,), sigma, dtype=torch.float64),
                      torch.tensor(nu, dtype=torch.float64), sampler=sampler)
    if nu + 2 > 4:     # the sample variance is a reliable estimator only with a finite 4th moment
        assert x.var().item() == pytest.approx(sigma ** 2, rel=0.03)
    # the median of |x - μ| is scale · (0.75-quantile of t(ν+2)), computed by quadrature of its pdf
    scale = math.sqrt(nu / (nu + 2)) * sigma
    grid = np.linspace(0, 10, 200_001)
    cdf = np.cumsum(t_pdf(grid, 0, 1, nu + 2)) * (grid[1] - grid[0])
    q75 = grid[np.searchsorted(cdf, 0.25)]
    assert (x - 1.5).abs().median().item() == pytest.approx(scale * q75, rel=0.02)
    assert x.mean().item() == pytest.approx(1.5, abs=0.02 * sigma)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_gradients_reach_nu_and_match_the_fourth_moment(sampler):
    """d/dν E[x⁴] for x ~ escort(0, σ=1, ν) is d/dν 3ν/(ν−2) = −6/(ν−2)²; pathwise estimate."""
    torch.manual_seed(0)
    nu = torch.tensor(12.0, dtype=torch.float64, requires_grad=True)
    n = 2_000_000
    x = sample_escort(torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64), nu,
                      sampler=sampler)
    (x ** 4).mean().backward()
    want = -6 / (12 - 2) ** 2
    assert nu.grad is not None and torch.isfinite(nu.grad)
    assert nu.grad.item() == pytest.approx(want, rel=0.15)


def abs_mean_escort(nu: float) -> float:
    """E|x| for x ~ escort(0, σ = 1, ν) = √(ν/k)·E|t_k|, k = ν+2, E|t_k| = 2√k Γ((k+1)/2) /
    (√π (k−1) Γ(k/2))."""
    k = nu + 2
    log_e = (math.log(2) + 0.5 * math.log(k) + math.lgamma((k + 1) / 2)
             - 0.5 * math.log(math.pi) - math.log(k - 1) - math.lgamma(k / 2))
    return math.sqrt(nu / k) * math.exp(log_e)


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("nu0", [0.7, 4.0, 60.0])
def test_pathwise_nu_gradient_is_unbiased_for_the_mean_absolute_value(sampler, nu0):
    """The two samplers hold different noise fixed, so their per-draw dx/dν differ, but both
    must average to d/dν E|x| (closed form above, differentiated by central differences).
    Tolerance: 5 standard errors of the 1M-draw mean."""
    torch.manual_seed(1)
    n = 1_000_000
    nu = torch.tensor(nu0, dtype=torch.float64, requires_grad=True)
    x = sample_escort(torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64),
                      nu.expand(n), sampler=sampler)
    (g,) = torch.autograd.grad(x.abs().sum(), nu, retain_graph=False)
    # per-draw gradients for the standard error: d|x|/dν = sign(x)·dx/dν, from a second pass
    torch.manual_seed(1)
    nus = torch.full((n,), nu0, dtype=torch.float64, requires_grad=True)
    x2 = sample_escort(torch.zeros(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64),
                       nus, sampler=sampler)
    (per,) = torch.autograd.grad(x2.abs().sum(), nus)
    h = 1e-5 * nu0
    want = (abs_mean_escort(nu0 + h) - abs_mean_escort(nu0 - h)) / (2 * h)
    se = per.std().item() / math.sqrt(n)
    assert g.item() / n == pytest.approx(per.mean().item(), rel=1e-9)
    assert abs(g.item() / n - want) < 5 * se + 1e-12, (g.item() / n, want, se)
    assert abs(want) > 10 * se                          # the check has power: a zero gradient fails


def test_polar_draw_is_finite_at_the_edges():
    """E at its 1e-20 floor (a uniform draw of exactly 0), E large, ν at its floor and ceiling:
    draw, ∂Θ/∂σ and the ν weight stay finite; m → 1/(2(ν+2)) as x → 0."""
    nu = torch.tensor([1e-3, 1.0, 1.6e5], dtype=torch.float32).view(3, 1)
    e = torch.tensor([1e-20, 1.0, 17.0], dtype=torch.float32).view(1, 3)
    c = torch.ones(1, 3)
    out, zr, x, em = _polar_forward(torch.zeros(3, 3), torch.ones(3, 3), nu, c, e)
    m = _polar_nu_weight(x, nu, em)
    assert torch.equal(m, _polar_nu_weight(x, nu))
    # against the definition x / (2(ν+2)(1 − e^{−x})) in float64
    x64, nu64 = x.double(), nu.double()
    assert torch.allclose(m.double(), x64 / (2 * (nu64 + 2) * -torch.expm1(-x64)), rtol=1e-6)
    for v in (out, zr, x, m):
        assert torch.isfinite(v).all()
    assert torch.allclose(m[:, 0], 1 / (2 * (nu[:, 0] + 2)), rtol=1e-5)
    c2, e2 = polar_noise(torch.Size((1000,)), torch.float32, "cpu")
    assert c2.abs().max() <= 1 and (e2 >= 1e-20).all() and torch.isfinite(e2).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_polar_posterior_draw_in_half_precision(dtype):
    """A model converted to half (--fp16 / --memory-efficient-fp16): the posterior's parameters
    stay float32, the polar draw and the mean come out in the half dtype, the gradients float32."""
    torch.manual_seed(0)
    post = StudentTMatrices(3, 6, 4, sigma_init=0.05, zero_rows=(1,), sampler="polar").to(dtype)
    assert post.out_dtype == dtype
    assert all(p.dtype == torch.float32 for p in post.parameters()) and post.keep.dtype == torch.float32
    x = post.sample(2)
    assert x.dtype == dtype and torch.isfinite(x).all() and post.mean().dtype == dtype
    (x.float() ** 2).sum().backward()
    for p in (post.mu, post.rho, post.log_nu):
        assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
    assert (post.log_nu.grad != 0).all()


def test_conversions_of_the_posterior_module():
    """Only 16-bit float conversions keep the parameters float32; float64 and back apply as
    usual, and each sets the draws' dtype."""
    post = StudentTMatrices(2, 5, 3)
    model = nn.Sequential(post, nn.Linear(3, 3)).half()
    assert model[1].weight.dtype == torch.float16 and post.mu.dtype == torch.float32
    assert post.sample().dtype == torch.float16
    model.to("cpu")                                       # a device move keeps the draws' dtype
    assert post.sample().dtype == torch.float16 and post.mu.dtype == torch.float32
    model.double()
    assert post.mu.dtype == torch.float64 and post.sample().dtype == torch.float64
    model.float()
    assert post.mu.dtype == torch.float32 and post.out_dtype == torch.float32


def test_half_model_gradients_near_the_seed_collapse_stay_float32():
    """Why the posterior stays float32 in a half model: under --t-divergence seed, ν runs to
    its floor, where the divergence's gradient (about 4/ν³ per element in ν) is beyond float16's
    largest value (65,504). With float32 parameters it is finite; fairseq's fp16 soak of
    t-MEM-NN overflowed at every loss scale before (docs/results/reliability_2026-11-26)."""
    torch.manual_seed(0)
    post = StudentTMatrices(3, 51, 20, sigma_init=0.05, zero_rows=(0,)).half()   # bAbI-sized
    with torch.no_grad():
        post.log_nu.fill_(math.log(0.003))
    x, div = post.sample_with_divergence(10.0, "seed", 1.0)
    assert x.dtype == torch.float16 and torch.isfinite(x).all()
    ((x.float() ** 2).sum() + div.weighted).backward()
    g = post.log_nu.grad
    assert g.dtype == torch.float32 and torch.isfinite(g).all()
    assert g.abs().max() > torch.finfo(torch.float16).max       # would be inf in a half gradient


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_student_t_matrices_sampling_mask_and_gradients(sampler):
    torch.manual_seed(0)
    post = StudentTMatrices(3, 6, 4, sigma_init=0.05, nu_init=100.0, zero_rows=(1,),
                            sampler=sampler)
    with pytest.raises(ValueError, match="--escort-sampler"):
        post.set_sampler("box-muller")
    assert torch.allclose(post.nu, torch.full((3,), 100.0), rtol=1e-4)
    assert torch.allclose(post.sigma, torch.full((3, 6, 4), 0.05), rtol=1e-4)
    draws = post.sample(5)
    assert draws.shape == (5, 3, 6, 4) and draws[:, :, 1].abs().max() == 0
    assert post.mean()[:, 1].abs().max() == 0
    for mode in ("seed", "exact", "tied"):
        post.zero_grad()
        (post.sample().pow(2).sum() + post.divergence(10.0, mode)).backward()
        for p in (post.mu, post.rho, post.log_nu):
            assert torch.isfinite(p.grad).all()
        assert (post.log_nu.grad != 0).all()
        assert post.mu.grad[:, 1].abs().max() == 0         # nil row: no gradient at all
    # the divergence leaves the nil row out: changing it changes nothing
    d0 = post.divergence(10.0, "seed").item()
    with torch.no_grad():
        post.mu[:, 1] += 5.0
    assert post.divergence(10.0, "seed").item() == pytest.approx(d0, rel=1e-6)


# ----------------------------------------------------------------------------------------------
# The fused fast path (one autograd node per draw / divergence) against the generic torch path.

def reference_escort(mu, sigma, nu, n=None):
    """μ + √(ν/(ν+2))·σ·StudentT(ν+2).rsample(): torch.distributions' draw and gradients."""
    df = (nu + 2).expand(mu.shape)
    eps = torch.distributions.StudentT(df, validate_args=False).rsample(
        torch.Size() if n is None else torch.Size((n,)))
    return mu + torch.sqrt(nu / (nu + 2)) * sigma * eps


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("n", [None, 4])
def test_fused_escort_draw_equals_torch_distributions(dtype, tol, n):
    """Same seed -> the same draws, and the same gradients to μ, σ and ν (through the Gamma)."""
    torch.manual_seed(0)
    mu = torch.randn(3, 5, 4, dtype=dtype, requires_grad=True)
    sigma = (torch.rand(3, 5, 4, dtype=dtype) + 0.1).requires_grad_()
    nu = torch.tensor([0.3, 5.0, 80.0], dtype=dtype).view(3, 1, 1).requires_grad_()
    w = torch.randn((n, 3, 5, 4) if n else (3, 5, 4), dtype=dtype)
    torch.manual_seed(5)
    ref = reference_escort(mu, sigma, nu, n)
    g_ref = torch.autograd.grad((ref * w).sum(), [mu, sigma, nu])
    torch.manual_seed(5)
    got = sample_escort(mu, sigma, nu, n)
    g_got = torch.autograd.grad((got * w).sum(), [mu, sigma, nu])
    assert got.shape == ref.shape
    assert torch.allclose(got, ref, rtol=tol, atol=tol)
    for a, b in zip(g_got, g_ref):
        assert a.shape == b.shape
        assert torch.allclose(a, b, rtol=tol, atol=tol * b.abs().max().item())
    assert g_ref[2].abs().min() > 0                    # ν really gets a gradient


def _random_posterior(dtype=torch.float64):
    torch.manual_seed(0)
    post = StudentTMatrices(3, 6, 4, sigma_init=0.05, nu_init=100.0, zero_rows=(1,)).to(dtype)
    with torch.no_grad():
        post.mu.add_(torch.randn_like(post.mu))
        post.rho.add_(torch.randn_like(post.rho))
        post.log_nu.copy_(torch.tensor([1.0, 3.0, -8.0]))   # the last one below the clamp
    return post


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("s", [None, 3])
def test_posterior_fused_draw_equals_generic_path(s, sampler):
    """gamma: against torch.distributions.StudentT; polar: against the same construction in
    plain torch ops with autograd's gradients (sample_escort(..., sampler='polar'))."""
    post = _random_posterior()
    post.set_sampler(sampler)
    params = [post.mu, post.rho, post.log_nu]
    w = torch.randn((s, 3, 6, 4) if s else (3, 6, 4), dtype=torch.float64)
    torch.manual_seed(2)
    if sampler == "gamma":
        ref = reference_escort(post.mu, post.sigma, post.nu.view(-1, 1, 1), s) * post.keep
    else:
        ref = sample_escort(post.mu, post.sigma, post.nu.view(-1, 1, 1), s, "polar") * post.keep
    g_ref = torch.autograd.grad((ref * w).sum(), params)
    torch.manual_seed(2)
    got = post.sample(s)
    g_got = torch.autograd.grad((got * w).sum(), params)
    assert torch.allclose(got, ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(g_got, g_ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert g_got[2][2] == 0 and g_got[2][:2].abs().min() > 0    # clamped log ν: no gradient


@pytest.mark.parametrize("mode", ["seed", "tied"])
def test_posterior_fused_divergence_equals_generic_path(mode):
    post = _random_posterior()
    params = [post.mu, post.rho, post.log_nu]
    for p in (10.0, 3.0):
        ref = t_divergence(post.mu, post.sigma, post.nu.view(-1, 1, 1), p, mode, weight=post.keep)
        g_ref = torch.autograd.grad(ref, params)
        got = post.divergence(p, mode)
        g_got = torch.autograd.grad(got, params)
        assert got.dtype == torch.float32
        assert got.item() == pytest.approx(ref.item(), rel=1e-6)
        for a, b in zip(g_got, g_ref):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * b.abs().max().item())
        assert g_got[0][:, 1].abs().max() == 0 and g_got[2][:2].abs().min() > 0


@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("mode,prior", [("seed", 10.0), ("seed", 3.0), ("tied", 10.0)])
def test_draw_and_divergence_in_one_node_equal_the_two_nodes(sampler, mode, prior):
    """The training step's fused node (draw + divergence, StudentTMatrices.sample_with_divergence)
    gives the values and summed gradients of the separate draw and divergence nodes, for any
    weighting of the two outputs, and each output alone."""
    post = _random_posterior()
    post.set_sampler(sampler)
    params = [post.mu, post.rho, post.log_nu]
    w = torch.randn(3, 6, 4, dtype=torch.float64)
    for a, b in [(1.0, 0.37), (1.0, 0.0), (0.0, 1.0)]:
        torch.manual_seed(7)
        ref_draw = post.sample()
        ref_div = post.divergence(prior, mode)
        g_ref = torch.autograd.grad(a * (ref_draw * w).sum() + b * ref_div, params,
                                    allow_unused=True)
        torch.manual_seed(7)
        draw, fused = post.sample_with_divergence(prior, mode)
        assert post.sample().grad_fn.name() == "_PosteriorDrawBackward"   # a plain draw after it
        div = fused.weighted
        assert fused.value == pytest.approx(div.item()) and fused.nus == post.nu_values()
        assert draw.grad_fn.name() == "_PosteriorStepBackward"
        assert torch.equal(draw, ref_draw) and div.dtype == torch.float32
        assert div.item() == pytest.approx(ref_div.item(), rel=1e-7)
        terms = ([a * (draw * w).sum()] if a else []) + ([b * div] if b else [])
        g = torch.autograd.grad(sum(terms), params, allow_unused=True)
        for x, y in zip(g, g_ref):
            assert torch.allclose(x, y, rtol=1e-6, atol=1e-9 * max(1.0, y.abs().max().item()))
        assert g[2][2] == 0 and g[2][:2].abs().min() > 0         # clamped log ν: no gradient


def test_exact_mode_draws_then_computes_the_divergence_separately():
    """``exact`` has no fused node: the same draw as sample() and weight·divergence()."""
    post = _random_posterior()
    torch.manual_seed(3)
    ref_draw, ref_div = post.sample(), post.divergence(10.0, "exact")
    torch.manual_seed(3)
    draw, div = post.sample_with_divergence(10.0, "exact", weight=0.5)
    assert draw.grad_fn.name() == "_PosteriorDrawBackward" and torch.equal(draw, ref_draw)
    assert div.weighted.item() == pytest.approx(0.5 * ref_div.item(), rel=1e-12)
    assert div.value == pytest.approx(ref_div.item(), rel=1e-12)


def test_python_digamma_matches_torch():
    from fairseq_acvi.modules.student_t import _digamma
    xs = [1e-3, 0.05, 0.5, 1.0, 2.5, 9.99, 10.0, 57.0, 1e4]
    ref = torch.digamma(torch.tensor(xs, dtype=torch.float64)).tolist()
    for x, r in zip(xs, ref):
        assert _digamma(x) == pytest.approx(r, rel=1e-13, abs=1e-13)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_fused_step_in_half_precision(sampler):
    """A half model (--fp16 / --memory-efficient-fp16): the fused draw + divergence computes
    in float32, returns the draw in half and a float32 divergence, and float32 gradients."""
    torch.manual_seed(0)
    post = StudentTMatrices(3, 6, 4, sigma_init=0.05, zero_rows=(1,), sampler=sampler).half()
    x, div = post.sample_with_divergence(10.0, "tied")
    assert x.dtype == torch.float16 and div.weighted.dtype == torch.float32
    ref = StudentTMatrices(3, 6, 4, zero_rows=(1,)).to(torch.float32)
    ref.load_state_dict({k: v.float() for k, v in post.state_dict().items()})
    assert div.weighted.item() == pytest.approx(ref.divergence(10.0, "tied").item(), rel=1e-5)
    ((x.float() ** 2).sum() + div.weighted * 1e-3).backward()
    for p in (post.mu, post.rho, post.log_nu):
        assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad).all()
    assert (post.log_nu.grad != 0).all() and post.mu.grad[:, 1].abs().max() == 0
