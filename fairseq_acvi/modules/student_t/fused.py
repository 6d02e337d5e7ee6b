"""The autograd nodes of a training step (docs/method.md §4.2): the posterior draw, the (D 56)
divergence, and both in one node (:class:`_PosteriorStep`), the Python twin of the compiled CPU
kernel (fairseq_acvi/modules/student_t/cpu_kernel.py, fairseq_acvi/modules/student_t/posterior_step.cpp)."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from fairseq_acvi.modules.student_t.distribution import _column, _nu_values, _sigma_from
from fairseq_acvi.modules.student_t.samplers import (_escort_forward, _polar_forward,
                                                    _polar_nu_weight)


def _draw_forward(mu: Tensor, sigma: Tensor, nu3: Tensor, keep: Tensor, sampler: str, noise):
    """Escort draw Θ = μ + σ·zr with nil rows zeroed, in the compute dtype; returns Θ, zr
    (= ∂Θ/∂σ) and what :func:`_draw_nu_grad` needs (``gamma``: u, α, g; ``polar``: x,
    expm1(x), ν)."""
    if sampler == "gamma":
        z, g, alpha = noise
        out, zr, u = _escort_forward(mu, sigma, nu3, z, g)
        extra = (u, alpha, g)
    else:
        c, e = noise
        out, zr, x, em = _polar_forward(mu, sigma, nu3, c, e)
        extra = (x, em, nu3)
    return out.mul_(keep), zr, extra


def _draw_nu_grad(q: Tensor, sigma: Tensor, sampler: str, extra, nu: List[float],
                  dnu: List[float]) -> List[float]:
    """dL/dlog ν per matrix of an escort draw, from q = (dL/dΘ·keep)·zr (overwritten).

    ∂Θ/∂ν = σ·zr·(1/(2ν) − m), summed per matrix; m per element from the sampler: gamma
    m = (dg/dα)/(2u) (see :func:`_escort_backward`), polar :func:`_polar_nu_weight`; times
    dν/dlog ν (``dnu``, from :func:`_nu_values`).
    """
    per_matrix = (1,) * (q.dim() - 3) + (len(nu), 1, 1)
    t = q.mul_(sigma)
    t_sum = t.sum_to_size(per_matrix).view(-1).tolist()
    if sampler == "gamma":
        u, alpha, g = extra
        m = torch._standard_gamma_grad(alpha, g).div_(u).mul_(0.5)
    else:
        x, em, nu3 = extra
        m = _polar_nu_weight(x, nu3, em)
    tm = t.mul_(m).sum_to_size(per_matrix).view(-1).tolist()
    return [(a / (2 * v) - b) * d for a, b, v, d in zip(t_sum, tm, nu, dnu)]


class _PosteriorDraw(torch.autograd.Function):
    """Escort draw of stacked posteriors from their raw parameters (μ, ρ, log ν), nil rows zeroed.

    mu, rho (n, V, d), log_nu (n,), keep (V, 1); nu3 = ν (n, 1, 1) and sigma = softplus(ρ) + 1e-6
    (values, no graph); ``sampler`` and its noise: ``gamma`` (z, g, α) from :func:`escort_noise`,
    ``polar`` (c, E) from :func:`polar_noise`, each (*S, n, V, d). Same values and gradients as
    ``sample_escort(μ, softplus(ρ)+1e-6, ν.view(-1, 1, 1), sampler=...) * keep`` with the chain
    rule through softplus and the clamped exp done by hand (dν/dlog ν from :func:`_nu_values`):
    one autograd node per draw. nu3, sigma and the noise are in the compute dtype (float32 for
    half-precision parameters); the draw is returned in μ's dtype.
    """

    @staticmethod
    def forward(ctx, mu, rho, log_nu, keep, nu3, sigma, sampler, *noise):
        out, zr, extra = _draw_forward(mu, sigma, nu3, keep, sampler, noise)
        ctx.sampler, ctx.n_noise = sampler, len(noise)
        ctx.save_for_backward(rho, log_nu, sigma, keep, zr, *extra)
        return out.to(mu.dtype)

    @staticmethod
    def backward(ctx, grad):
        rho, log_nu, sigma, keep, zr, *extra = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad = grad * keep
        shape = sigma.shape
        q = grad * zr                                                  # grad · ∂Θ/∂σ
        g_mu = grad.sum_to_size(shape) if need[0] else None
        g_rho = q.sum_to_size(shape).mul(torch.sigmoid(rho)) if need[1] else None     # dσ/dρ
        g_log_nu = None
        if need[2]:
            nu, dnu = _nu_values(log_nu)
            g_log_nu = torch.tensor(_draw_nu_grad(q, sigma, ctx.sampler, extra, nu, dnu),
                                    dtype=sigma.dtype, device=sigma.device)
        return (g_mu, g_rho, g_log_nu) + (None,) * (4 + ctx.n_noise)


def _log_c(nu: float) -> float:
    """log_t_density_const for one Python float."""
    return math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(math.pi * nu)


def _digamma(x: float) -> float:
    """ψ(x) for a Python float x > 0 (float64): the recurrence ψ(x) = ψ(x+1) − 1/x up to x ≥ 10,
    then the asymptotic series to x^−12 (error < 1e-15 there). For the per-matrix ν algebra,
    where a torch call costs more than the arithmetic."""
    r = 0.0
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    tail = f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f * (1 / 132 - f * 691 / 32760)))))
    return r + math.log(x) - 0.5 / x - tail


class _SeedTerms:
    """(D 56) over n stacked matrices, split so that a draw can share its work (σ, the backward).

    Per matrix i with a = 2/(ν+1), e = exp(−a·log c_ν), 1/(1−t) = −(1+ν)/2:
        D_i = −(1+ν)/2 · [ (1+1/ν)·e·Σ_l w_l σ_l^a − Ψ_p·(N + Σ_l w_l(σ_l² + μ_l²)/ν_p) ]
    (Ψ_ql = e·σ_l^a, N = Σ_l w_l): the same sum as :func:`t_divergence_seed`, with the ν-only
    factors computed once per matrix (Python floats, float64) instead of per element.
    ``prior_dof`` None ties ν_p = ν_q (``tied``). mu, sigma (n, V, d) values (no graph), log_nu
    (n,), keep (V, 1), n_keep = N; built by :meth:`compute`. ``grads`` gives dD/dμ, dD/dσ and dD/dlog ν by hand (digamma
    for ν).
    """

    @classmethod
    def compute(cls, mu: Tensor, sigma: Tensor, log_nu: Tensor, keep: Tensor, n_keep: float,
                prior_dof: Optional[float]) -> Tuple["_SeedTerms", Tensor, Tensor]:
        """The terms (per-matrix Python scalars and the value D; no tensors kept) and the two
        per-element tensors the backward needs, log σ and w·σ^a (for ctx.save_for_backward)."""
        self = cls()
        nu, dnu = _nu_values(log_nu)
        a = [2 / (v + 1) for v in nu]
        c = [_log_c(v) for v in nu]
        e = [math.exp(-ai * ci) for ai, ci in zip(a, c)]
        inv = [-(1 + v) / 2 for v in nu]
        B = [(1 + 1 / v) * ei for v, ei in zip(nu, e)]
        if prior_dof is None:
            P, p = e, nu
        else:
            p = [float(prior_dof)] * len(nu)
            P = [math.exp(-2 / (p[0] + 1) * _log_c(p[0]))] * len(nu)
        log_sigma = torch.log(sigma)
        pw = torch.exp(log_sigma * _column(a, sigma)).mul_(keep)                 # w·σ^a
        S1 = pw.sum((1, 2)).tolist()
        S2 = torch.addcmul(sigma * sigma, mu, mu).mul_(keep).sum((1, 2)).tolist()
        self.inner = [Bi * s1 - Pi * (n_keep + s2 / pi)
                      for Bi, s1, Pi, s2, pi in zip(B, S1, P, S2, p)]
        self.value = sum(i * x for i, x in zip(inv, self.inner))
        self.nu, self.dnu, self.a, self.c, self.e, self.inv = nu, dnu, a, c, e, inv
        self.B, self.P, self.p, self.S1, self.S2 = B, P, p, S1, S2
        self.n_keep, self.tied = n_keep, prior_dof is None
        return self, log_sigma, pw

    def grads(self, gd: float, mu: Tensor, sigma: Tensor, log_sigma: Tensor, pw: Tensor,
              keep: Tensor, need_mu: bool, need_sigma: bool, need_nu: bool):
        """gd·(dD/dμ, dD/dσ, [dD/dlog ν per matrix]); each None when not needed."""
        nu, dnu, a, c, e, inv = self.nu, self.dnu, self.a, self.c, self.e, self.inv
        B, P, p, S1, S2, inner, N = self.B, self.P, self.p, self.S1, self.S2, self.inner, self.n_keep
        g_mu = g_sigma = g_nu = None
        k_q = _column([gd * -i * Pi * 2 / pi for i, Pi, pi in zip(inv, P, p)], sigma)  # 2x/ν_p
        if need_mu:
            g_mu = (mu * keep).mul_(k_q)
        if need_sigma:
            k_s = _column([gd * i * Bi * ai for i, Bi, ai in zip(inv, B, a)], sigma)   # a·σ^{a−1}
            g_sigma = torch.addcmul((pw / sigma).mul_(k_s), sigma * keep, k_q)
        if need_nu:
            S3 = (pw * log_sigma).sum((1, 2)).tolist()                    # Σ w σ^a log σ = dS1/da
            g_nu = []
            for i in range(len(nu)):
                v, ai, ei = nu[i], a[i], e[i]
                da = -ai * ai / 2
                dc = 0.5 * (_digamma((v + 1) / 2) - _digamma(v / 2)) - 1 / (2 * v)
                de = ei * (-da * c[i] - ai * dc)
                dB = -ei / (v * v) + (1 + 1 / v) * de
                d_inner = dB * S1[i] + B[i] * S3[i] * da
                if self.tied:
                    d_inner += -de * (N + S2[i] / v) + ei * S2[i] / (v * v)
                g_nu.append(gd * (-0.5 * inner[i] + inv[i] * d_inner) * dnu[i])
        return g_mu, g_sigma, g_nu


class _SeedDivergence(torch.autograd.Function):
    """(D 56) summed over stacked matrices, from the raw parameters (μ, ρ, log ν); nil rows out
    (:class:`_SeedTerms`). mu, rho (n, V, d), log_nu (n,), keep (V, 1), n_keep = N,
    sigma = softplus(ρ) + 1e-6 (ρ's value, no graph). Returns a float32 scalar.
    """

    @staticmethod
    def forward(ctx, mu, rho, log_nu, keep, n_keep, prior_dof, sigma):
        terms, log_sigma, pw = _SeedTerms.compute(mu, sigma, log_nu, keep, n_keep, prior_dof)
        ctx.save_for_backward(mu, rho, sigma, keep, log_sigma, pw)
        ctx.terms = terms
        return torch.tensor(terms.value, dtype=torch.float32, device=mu.device)

    @staticmethod
    def backward(ctx, grad):
        mu, rho, sigma, keep, log_sigma, pw = ctx.saved_tensors
        need = ctx.needs_input_grad
        g_mu, g_sigma, g_nu = ctx.terms.grads(float(grad), mu, sigma, log_sigma, pw, keep,
                                              need[0], need[1], need[2])
        g_rho = g_sigma.mul_(torch.sigmoid(rho)) if need[1] else None             # dσ/dρ
        g_log_nu = (torch.tensor(g_nu, dtype=sigma.dtype, device=sigma.device)
                    if need[2] else None)
        return g_mu, g_rho, g_log_nu, None, None, None, None


class _PosteriorStep(torch.autograd.Function):
    """A training step's escort draw (D 61) and its (D 56) divergence in one autograd node.

    The draw and the divergence read the same σ = softplus(ρ) + 1e-6 and ν, and both gradients
    reach μ, ρ and log ν: computed together, σ, dσ/dρ and the per-matrix ν algebra are done once
    and the gradients are summed here rather than by autograd (one node instead of two, no
    gradient accumulation). Same values and gradients (to rounding) as :class:`_PosteriorDraw`
    plus :class:`_SeedDivergence` (``tests/test_student_t.py``).

    mu, rho (n, V, d), log_nu (n,) in the compute dtype; keep (V, 1); nu3 (n, 1, 1) ν values;
    noise as for :class:`_PosteriorDraw` (n, V, d). Returns Θ (n, V, d), compute dtype, and the
    divergence, a float32 scalar.
    """

    @staticmethod
    def forward(ctx, mu, rho, log_nu, keep, n_keep, prior_dof, nu3, sampler, *noise):
        sigma = _sigma_from(rho)
        out, zr, extra = _draw_forward(mu, sigma, nu3, keep, sampler, noise)
        terms, log_sigma, pw = _SeedTerms.compute(mu, sigma, log_nu, keep, n_keep, prior_dof)
        ctx.save_for_backward(mu, rho, sigma, keep, zr, log_sigma, pw, *extra)
        ctx.terms, ctx.sampler, ctx.n_noise = terms, sampler, len(noise)
        ctx.set_materialize_grads(False)
        return out, torch.tensor(terms.value, dtype=torch.float32, device=mu.device)

    @staticmethod
    def backward(ctx, grad, grad_div):
        mu, rho, sigma, keep, zr, log_sigma, pw, *extra = ctx.saved_tensors
        need = ctx.needs_input_grad
        terms = ctx.terms
        n = len(terms.nu)
        g_mu, g_sigma, g_nu = None, None, [0.0] * n
        if grad_div is not None:
            g_mu, g_sigma, g_nu_d = terms.grads(float(grad_div), mu, sigma, log_sigma, pw, keep,
                                                need[0], need[1], need[2])
            g_nu = g_nu_d or g_nu
        if grad is not None:
            gk = grad * keep
            q = gk * zr                                                 # grad · ∂Θ/∂σ
            if need[0]:
                g_mu = gk if g_mu is None else g_mu.add_(gk)
            if need[1]:
                g_sigma = q.clone() if g_sigma is None else g_sigma.add_(q)
            if need[2]:
                g_draw = _draw_nu_grad(q, sigma, ctx.sampler, extra, terms.nu, terms.dnu)
                g_nu = [x + y for x, y in zip(g_nu, g_draw)]
        g_rho = g_sigma.mul_(torch.sigmoid(rho)) if need[1] and g_sigma is not None else None
        g_log_nu = (torch.tensor(g_nu, dtype=sigma.dtype, device=sigma.device)
                    if need[2] else None)
        return (g_mu, g_rho, g_log_nu) + (None,) * (5 + ctx.n_noise)
