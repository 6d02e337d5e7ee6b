"""The compiled t-MEM-NN CPU kernel (fairseq_acvi/modules/student_t/posterior_step.cpp) against the Python node.

The kernel draws its own uniforms (counter-based, seeded from torch's generator);
``cpu_kernel.uniforms`` returns them, so the Python reference (:class:`_PosteriorStep`, itself
tested against autograd and quadrature in test_student_t.py) can be run on exactly the same
noise. The reference runs in float64; the kernel computes in float32 with double sums.
"""
import math
import shutil
import warnings

import numpy as np
import pytest
import torch

from fairseq_acvi.modules.student_t import cpu_kernel
from fairseq_acvi.modules import student_t as st


def _have_compiler():
    return shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")


@pytest.fixture(scope="module")
def kernel():
    if not _have_compiler():
        pytest.skip("no C++ compiler: the kernel cannot be built here (the Python node is used)")
    module = cpu_kernel.load()
    assert module is not None, f"the kernel did not build: {cpu_kernel._state['error']}"
    return module


def _posterior(n, V, d, zero_rows=(1,), seed=0, clamp=False):
    torch.manual_seed(seed)
    post = st.StudentTMatrices(n, V, d, zero_rows=zero_rows)
    with torch.no_grad():
        post.mu.normal_(0, 0.5)
        post.rho.normal_(-3, 2)
        post.rho.view(-1)[::97] = 21.0          # softplus's linear branch (rho > 20)
        post.log_nu.copy_(torch.tensor([4.6, 0.3, 1.5, 8.0][:n]))
        if clamp:                              # past the clamp at 12: ν = e¹², no gradient
            post.log_nu[-1] = 13.0
    return post


def _reference(post, u, prior, weight, W, gw):
    """The Python node in float64 on the kernel's uniforms: draw, weight·D, gradients."""
    p64 = st.StudentTMatrices(*post.mu.shape, zero_rows=()).double()
    p64.load_state_dict({k: v.double() for k, v in post.state_dict().items()}, strict=False)
    keep = post.keep.double()
    c, e = st.polar_from_uniforms(u.double().clone())
    nu3 = st._nu_from(p64.log_nu.detach()).view(-1, 1, 1)
    th, D = st._PosteriorStep.apply(p64.mu, p64.rho, p64.log_nu, keep, post.n_keep, prior, nu3,
                                    "polar", c, e)
    g = torch.autograd.grad((th * W.double()).sum() + gw * weight * D,
                            [p64.mu, p64.rho, p64.log_nu])
    return th.detach(), weight * D.item(), D.item(), g


@pytest.mark.parametrize("n,V,d", [(4, 23, 50), (3, 7, 13), (2, 40, 300), (1, 5, 16)])
@pytest.mark.parametrize("prior", [None, 10.0])
def test_kernel_equals_the_python_node(kernel, n, V, d, prior):
    """Same draw, divergence and gradients (μ, ρ, log ν) as the Python node on the same noise:
    nil rows (0 and 1 below), rows longer than a chunk (d = 300), ρ > 20, a clamped log ν."""
    post = _posterior(n, V, d, zero_rows=(0, 1) if V > 6 else (1,))
    seed, weight = 12345, 0.37
    W = torch.randn(n, V, d)
    th, wD, D, nus = cpu_kernel.posterior_step(post.mu, post.rho, post.log_nu, post.keep,
                                               post.n_keep, prior, weight, seed)
    g = torch.autograd.grad((th * W).sum() + 1.7 * wD, [post.mu, post.rho, post.log_nu])
    u = cpu_kernel.uniforms(n, V, d, seed)
    ref_th, ref_wD, ref_D, ref_g = _reference(post, u, prior, weight, W, 1.7)
    assert th.dtype == torch.float32 and wD.dtype == torch.float32 and wD.dim() == 0
    # float32 rounding of 2πU and of the terms: errors scale with σ (|zr| is O(1))
    sigma = torch.nn.functional.softplus(post.rho.detach().double()) + 1e-6
    assert ((th.double() - ref_th).abs() <= 1e-5 * (ref_th.abs() + sigma)).all()
    assert th[:, post.keep.view(-1) == 0].abs().max() == 0                  # nil rows are 0
    assert wD.item() == pytest.approx(ref_wD, rel=2e-6)
    assert D == pytest.approx(ref_D, rel=1e-6)
    assert nus == pytest.approx(post.nu_values(), rel=1e-12)
    for name, a, b in zip(("mu", "rho", "log_nu"), g, ref_g):
        scale = b.abs().max().item()
        assert torch.allclose(a.double(), b, rtol=1e-5, atol=1e-5 * scale), name
    assert g[0][:, post.keep.view(-1) == 0].abs().max() == 0


def test_clamped_nu_has_no_gradient(kernel):
    """log ν past the clamp: ν = e¹² and no gradient to log ν, as in the Python node. At such a ν
    the divergence is a difference of nearly equal terms times (1+ν)/2, so float32 agrees with
    the float64 reference to ~1e-5 only."""
    post = _posterior(3, 7, 13, clamp=True)
    W = torch.randn(3, 7, 13)
    th, wD, D, _ = cpu_kernel.posterior_step(post.mu, post.rho, post.log_nu, post.keep,
                                             post.n_keep, None, 0.5, 77)
    g = torch.autograd.grad((th * W).sum() + wD, [post.mu, post.rho, post.log_nu])
    _, _, ref_D, ref_g = _reference(post, cpu_kernel.uniforms(3, 7, 13, 77), None, 0.5, W, 1.0)
    assert g[2][2] == 0 and ref_g[2][2] == 0 and g[2][:2].abs().min() > 0
    assert D == pytest.approx(ref_D, rel=1e-4)
    assert torch.allclose(g[2].double(), ref_g[2], rtol=1e-4, atol=1e-6)


def test_each_output_alone_and_weight_zero(kernel):
    """The draw without the divergence (its gradient absent) and the divergence alone; a zero
    weight gives the draw with no divergence gradient (what an unfused training draw uses)."""
    post = _posterior(3, 9, 20)
    u = cpu_kernel.uniforms(3, 9, 20, 5)
    W = torch.randn(3, 9, 20)
    th, wD, _, _ = cpu_kernel.posterior_step(post.mu, post.rho, post.log_nu, post.keep,
                                             post.n_keep, None, 0.5, 5)
    g_draw = torch.autograd.grad((th * W).sum(), [post.mu, post.rho, post.log_nu], retain_graph=True)
    g_div = torch.autograd.grad(wD, [post.mu, post.rho, post.log_nu])
    _, _, _, r_draw = _reference(post, u, None, 0.5, W, 0.0)
    _, _, _, r_div = _reference(post, u, None, 0.5, torch.zeros_like(W), 1.0)
    for a, b in list(zip(g_draw, r_draw)) + list(zip(g_div, r_div)):
        assert torch.allclose(a.double(), b, rtol=1e-5, atol=1e-5 * b.abs().max().item())
    th0, wD0, D0, _ = cpu_kernel.posterior_step(post.mu, post.rho, post.log_nu, post.keep,
                                                post.n_keep, None, 0.0, 5)
    assert torch.equal(th0, th) and wD0.item() == 0 and D0 > 0


def test_uniforms_are_uniform_and_independent(kernel):
    u = cpu_kernel.uniforms(4, 250, 100, 2024).view(2, -1).double()
    m = u.shape[1]
    assert u.min() >= 0 and u.max() < 1
    assert torch.equal(u * 2 ** 24, torch.floor(u * 2 ** 24))               # 24-bit grid
    for x in u:
        assert abs(x.mean().item() - 0.5) < 5 / math.sqrt(12 * m)
        assert abs(x.var().item() - 1 / 12) < 0.004
        counts = torch.histc(x, bins=20, min=0, max=1)                      # chi-square, 19 dof
        chi2 = ((counts - m / 20) ** 2 / (m / 20)).sum().item()
        assert chi2 < 43.8                                                   # p = 0.001
        lag1 = torch.corrcoef(torch.stack([x[:-1], x[1:]]))[0, 1].item()
        assert abs(lag1) < 5 / math.sqrt(m)
    assert abs(torch.corrcoef(u)[0, 1].item()) < 5 / math.sqrt(m)           # U₁ vs U₂
    other = cpu_kernel.uniforms(4, 250, 100, 2025).view(2, -1).double()
    assert abs(torch.corrcoef(torch.stack([u[0], other[0]]))[0, 1].item()) < 5 / math.sqrt(m)


@pytest.mark.parametrize("nu,sigma", [(0.5, 0.7), (5.0, 0.7), (100.0, 2.0)])
def test_kernel_draws_have_the_escort_distribution(kernel, nu, sigma):
    """As for the Python samplers: variance σ² (when the 4th moment is finite), the median of
    |Θ − μ| from the t(ν+2) quantile, mean μ."""
    torch.manual_seed(0)
    V, d = 2000, 100
    post = st.StudentTMatrices(1, V, d, sigma_init=sigma, nu_init=nu)
    with torch.no_grad():
        post.mu.fill_(1.5)
    th = cpu_kernel.posterior_step(post.mu, post.rho, post.log_nu, post.keep, post.n_keep,
                                   None, 0.0)[0].detach().double().view(-1)
    if nu + 2 > 4:
        assert th.var().item() == pytest.approx(sigma ** 2, rel=0.03)
    scale = math.sqrt(nu / (nu + 2)) * sigma
    grid = np.linspace(0, 10, 200_001)
    pdf = np.exp(math.lgamma((nu + 3) / 2) - math.lgamma((nu + 2) / 2)
                 - 0.5 * math.log(math.pi * (nu + 2)) - (nu + 3) / 2 * np.log1p(grid ** 2 / (nu + 2)))
    q75 = grid[np.searchsorted(np.cumsum(pdf) * (grid[1] - grid[0]), 0.25)]
    assert (th - 1.5).abs().median().item() == pytest.approx(scale * q75, rel=0.02)
    assert th.mean().item() == pytest.approx(1.5, abs=0.02 * sigma)


def test_seeding_and_the_training_draw(kernel):
    """torch.manual_seed fixes the kernel's draw; a fused and an unfused training draw agree;
    S-draw (evaluation) sampling and float64 parameters stay on the Python nodes."""
    post = _posterior(3, 8, 12)
    torch.manual_seed(1)
    a = post.sample()
    torch.manual_seed(1)
    b, div = post.sample_with_divergence(10.0, "tied", weight=0.25)
    torch.manual_seed(2)
    c = post.sample()
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert "PosteriorStep" in b.grad_fn.name() and "_PosteriorStepBackward" != b.grad_fn.name()
    assert div.weighted.item() == pytest.approx(0.25 * post.divergence(10.0, "tied").item(), rel=1e-5)
    assert div.value == pytest.approx(post.divergence(10.0, "tied").item(), rel=1e-5)
    assert div.nus == pytest.approx(post.nu_values())
    assert post.sample(3).grad_fn.name() == "_PosteriorDrawBackward"
    post64 = _posterior(3, 8, 12).double()
    assert post64.sample_with_divergence(10.0, "tied")[0].grad_fn.name() == "_PosteriorStepBackward"


def test_switched_off_or_unbuildable_falls_back_to_python(monkeypatch):
    post = _posterior(2, 6, 8)
    monkeypatch.setattr(cpu_kernel, "ENABLED", False)
    assert post.sample_with_divergence(10.0, "tied")[0].grad_fn.name() == "_PosteriorStepBackward"
    monkeypatch.setattr(cpu_kernel, "ENABLED", True)
    monkeypatch.setattr(cpu_kernel, "_state", {"module": None, "tried": False, "error": None})

    def broken(**kwargs):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr("torch.utils.cpp_extension.load", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, div = post.sample_with_divergence(10.0, "tied")
    assert x.grad_fn.name() == "_PosteriorStepBackward" and div.weighted.dim() == 0
    assert any("could not build the t-MEM-NN CPU kernel" in str(w.message)
               and "no compiler here" in str(w.message) for w in caught)


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["default", "avx2"])
def test_other_instruction_sets_give_the_same_step(kernel, isa):
    """The portable build (ATen's generic vectors, what non-x86 CPUs get) and the AVX2 build
    compute what the build for this CPU computes."""
    if isa == "avx2" and torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("this CPU has no AVX2")
    other = cpu_kernel.build(isa)
    post = _posterior(3, 11, 37)
    W = torch.randn(3, 11, 37)
    outs = []
    for module in (kernel, other):
        th, wD, D, _ = module.posterior_step(post.mu, post.rho, post.log_nu, post.keep,
                                             post.n_keep, 10.0, 0.3, 99)
        g = torch.autograd.grad((th * W).sum() + wD, [post.mu, post.rho, post.log_nu])
        outs.append((th, wD, g))
    (a, wa, ga), (b, wb, gb) = outs
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6) and wa.item() == pytest.approx(wb.item(), rel=1e-5)
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-5 * y.abs().max().item())
