"""Student's-t posteriors, escort sampling and the t-divergence (docs/method.md §4.2; D 48-62).

Univariate notation per element l of a matrix Θ (all functions are elementwise and summed):

* posterior  q = t(μ, σ², ν_q), prior p = t(0, 1, ν_p), t = 1 + 2/(1 + ν_q)          (D 51, 48, 59)
* escort     q̃ = t(μ, ν_q/(ν_q+2)·σ², ν_q+2); its variance is σ² (ν_q > 0)           (D 60)
* sample     Θ = μ + √(ν_q/(ν_q+2))·σ·ε,  ε ~ t(0, 1, ν_q+2)  (reparameterised, gradients
  reach ν_q)                                                                          (D 61-62)
* D_t(q‖p) = ∫ q̃ log_t q − ∫ q̃ log_t p,  log_t(x) = (x^{1−t} − 1)/(1 − t)            (D 46)

Two exact samplers of ε (``--escort-sampler``); they draw from the same distribution and give
unbiased pathwise gradients, differing only in which noise is held fixed when ν moves:

``gamma``  ε = z/√(u/k), z ~ N(0, 1), u = 2g, g ~ Gamma(k/2, 1), k = ν+2: the chi-square
           construction of ``torch.distributions.StudentT.rsample`` (same draws for a seed),
           dε/dν through the Gamma's implicit reparameterisation gradient.
``polar``  ε = cos(2πU)·√(k·expm1(2E/k)), U ~ U(0, 1), E ~ Exp(1): Bailey's (1994) polar
           method for the t distribution with its accepted point written in polar form (its
           squared radius is e^{−E}), so no rejection and no Gamma draw; dε/dν is an
           elementwise closed form. Much cheaper than the Gamma on CPU (a serial rejection
           sampler plus a series for its gradient): see ``benchmarks/bench_babi.py``.

Three forms of the divergence (``--t-divergence``):

``seed``   (D 56) verbatim:  Σ_l [Ψ_ql(1 + 1/ν_q) − Ψ_p(1 + (σ_l² + μ_l²)/ν_p)] / (1 − t).
           Exact only when ν_q = ν_p (Ding et al. 2011); otherwise not a divergence (can be < 0).
``exact``  the definition: the first term in closed form, Ψ_q(1 + 1/ν_q) − 1 over (1 − t), and
           ∫ q̃ log_t p = (E_q̃[p^{1−t}] − 1)/(1 − t) with the expectation by fixed-node
           Gauss-Legendre quadrature (z = tan θ substitution, computed in float64). The
           expectation is infinite when 2(ν_p+1)/(ν_q+1) ≥ ν_q+2 (a posterior with much heavier
           tails than the prior); the fixed nodes then return a large finite value that keeps
           growing as ν_q falls, i.e. a barrier, not the (infinite) true value.
``tied``   the prior's ν is tied to ν_q, so (D 56) is exact.

Ψ_q = (Γ((ν_q+1)/2) / (Γ(ν_q/2)(πν_q)^{1/2} σ))^{−2/(ν_q+1)},  Ψ_p the same with ν_p, σ = 1
(D 57-58), evaluated in log space with lgamma.
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from fairseq_acvi.modules import cpu_kernel

DIVERGENCES = ("seed", "exact", "tied")
SAMPLERS = ("gamma", "polar")


def log_t_density_const(nu: Tensor) -> Tensor:
    """log of Γ((ν+1)/2) / (Γ(ν/2) (πν)^{1/2}), the standard-t normaliser (elementwise)."""
    return torch.lgamma((nu + 1) / 2) - torch.lgamma(nu / 2) - 0.5 * torch.log(math.pi * nu)


def log_psi(nu: Tensor, sigma: Optional[Tensor] = None) -> Tensor:
    """log Ψ of (D 57) (with σ) or (D 58) (σ = 1): −2/(ν+1) · (log c_ν − log σ)."""
    c = log_t_density_const(nu)
    if sigma is not None:
        c = c - torch.log(sigma)
    return -2.0 / (nu + 1) * c


def escort_scale(sigma: Tensor, nu: Tensor) -> Tensor:
    """Scale of the escort q̃ (D 60): √(ν/(ν+2))·σ; its degrees of freedom are ν + 2."""
    return torch.sqrt(nu / (nu + 2)) * sigma


def escort_noise(nu: Tensor, shape: torch.Size) -> Tuple[Tensor, Tensor, Tensor]:
    """The random numbers of one escort draw of ``shape``: z ~ N(0, 1) and g ~ Gamma(α, 1) with
    α = (ν+2)/2, drawn in the order torch.distributions.StudentT.rsample draws them (normal first,
    then the Gamma), so a seed gives the same draws as ``StudentT(ν+2).rsample()``.

    nu: broadcastable to ``shape`` (detached here). Returns z, g (``shape``, nu's dtype) and α
    expanded to ``shape`` (needed for dg/dα).
    """
    z = torch.empty(shape, dtype=nu.dtype, device=nu.device).normal_()
    alpha = ((nu.detach() + 2) * 0.5).expand(shape)
    return z, torch._standard_gamma(alpha), alpha


def _escort_forward(mu: Tensor, sigma: Tensor, nu: Tensor, z: Tensor, g: Tensor):
    """Θ = μ + σ·z·√(ν/u), u = 2g clamped to the smallest normal (StudentT's χ² draw).

    This is (D 61) rearranged: √(ν/(ν+2))·σ·ε with ε = z/√(u/(ν+2)). Returns Θ, z·√(ν/u), u.
    """
    u = (g * 2).clamp_(min=torch.finfo(g.dtype).tiny)
    zr = torch.sqrt(nu / u).mul_(z)
    return torch.addcmul(mu, sigma, zr), zr, u


def polar_noise(shape: torch.Size, dtype: torch.dtype, device) -> Tuple[Tensor, Tensor]:
    """The random numbers of one ``polar`` escort draw of ``shape``: c = cos(2πU₁) and
    E = −log(1 − U₂) ~ Exp(1), floored at 1e-20 (so every later quantity is finite), from one
    ``torch.rand`` call. dtype: float32 or wider (the caller's compute dtype)."""
    return polar_from_uniforms(torch.rand((2,) + tuple(shape), dtype=dtype, device=device))


def polar_from_uniforms(u: Tensor) -> Tuple[Tensor, Tensor]:
    """c = cos(2πU₁), E = max(−log(1 − U₂), 1e-20) from ``u`` = (U₁, U₂) stacked, (2, *shape)
    (overwritten): the transform of :func:`polar_noise`, which the CPU kernel does inside."""
    c = torch.cos(u[0].mul_(2 * math.pi))
    e = torch.log1p(u[1].neg_()).neg_().clamp_(min=1e-20)
    return c, e


def _polar_forward(mu: Tensor, sigma: Tensor, nu: Tensor, c: Tensor, e: Tensor):
    """Θ = μ + σ·c·√(ν·expm1(x)), x = 2E/(ν+2): (D 61) with ε = c·√(k·expm1(2E/k)), k = ν+2,
    so √(ν/k)·ε = c·√(ν·expm1(x)). Returns Θ, zr = c·√(ν·expm1(x)) (= ∂Θ/∂σ), x and expm1(x)
    (kept for :func:`_polar_nu_weight`)."""
    x = e * (2 / (nu + 2))
    em = torch.expm1(x)
    zr = (em * nu).sqrt_().mul_(c)
    return torch.addcmul(mu, sigma, zr), zr, x, em


def _polar_nu_weight(x: Tensor, nu: Tensor, em: Optional[Tensor] = None) -> Tensor:
    """m in ∂Θ/∂ν = σ·zr·(1/(2ν) − m) for the polar draw: m = x / (2(ν+2)(1 − e^{−x})).

    From d log zr/dν = 1/(2ν) + e^x/(2 expm1(x))·dx/dν and dx/dν = −x/(ν+2). Evaluated as
    (x/expm1(x))·(expm1(x) + 1)/(2(ν+2)), accurate (→ 1/(2(ν+2))) as x → 0; ``em`` = expm1(x)
    from the draw saves recomputing it.
    """
    if em is None:
        em = torch.expm1(x)
    return (x / em).mul_(em + 1).div_(2 * (nu + 2))


def _escort_backward(grad: Tensor, sigma: Tensor, nu: Tensor, zr: Tensor, u: Tensor,
                     alpha: Tensor, g: Tensor, need_nu: bool):
    """dL/dΘ -> (Σ dL/dΘ, Σ dL/dΘ·∂Θ/∂σ, Σ dL/dΘ·∂Θ/∂ν) before reduction to the inputs' shapes.

    ∂Θ/∂σ = z·r, r = √(ν/u);  ∂Θ/∂ν = σ·z·r·(1/(2ν) − (du/dν)/(2u)), du/dν = dg/dα (u = 2g,
    α = (ν+2)/2), and dg/dα is the implicit reparameterisation gradient of the Gamma draw
    (``torch._standard_gamma_grad``, what StudentT.rsample's backward uses).
    """
    q = grad * zr                                                      # grad · ∂Θ/∂σ
    g_nu = None
    if need_nu:
        dgda = torch._standard_gamma_grad(alpha, g)
        t = q * sigma
        g_nu = (t / (2 * nu)).sub_(t * dgda / (2 * u))
    return grad, q, g_nu


class _EscortDraw(torch.autograd.Function):
    """Θ = μ + √(ν/(ν+2))·σ·ε for given noise (z, g); exact gradients to μ, σ, ν (D 61-62)."""

    @staticmethod
    def forward(ctx, mu, sigma, nu, z, g, alpha):
        out, zr, u = _escort_forward(mu, sigma, nu, z, g)
        ctx.save_for_backward(sigma, nu, zr, u, alpha, g)
        ctx.shapes = (mu.shape, sigma.shape, nu.shape)
        return out

    @staticmethod
    def backward(ctx, grad):
        sigma, nu, zr, u, alpha, g = ctx.saved_tensors
        s_mu, s_sigma, s_nu = ctx.shapes
        need = ctx.needs_input_grad
        g_mu, g_sigma, g_nu = _escort_backward(grad, sigma, nu, zr, u, alpha, g, need[2])
        return (g_mu.sum_to_size(s_mu) if need[0] else None,
                g_sigma.sum_to_size(s_sigma) if need[1] else None,
                g_nu.sum_to_size(s_nu) if need[2] else None, None, None, None)


def sample_escort(mu: Tensor, sigma: Tensor, nu: Tensor, n: Optional[int] = None,
                  sampler: str = "gamma") -> Tensor:
    """Reparameterised draws Θ = μ + √(ν/(ν+2)) σ ε, ε ~ t(0, 1, ν+2) (D 61-62).

    mu, sigma: (*shape); nu: a tensor broadcastable to (*shape). Returns (*shape), or
    (n, *shape) when n is given. Differentiable w.r.t. mu, sigma and nu.
    ``gamma``: the same draws and gradients as ``μ + √(ν/(ν+2))·σ·StudentT(ν+2).rsample()``,
    in one fused autograd node. ``polar``: the polar construction (module docstring) in plain
    torch ops, autograd giving the gradients: the reference the fused posterior draw
    (:class:`StudentTMatrices`) is tested against.
    """
    nu = torch.as_tensor(nu, dtype=mu.dtype, device=mu.device)
    shape = torch.broadcast_shapes(mu.shape, sigma.shape, nu.shape)
    if n is not None:
        shape = torch.Size((n,)) + shape
    if sampler == "polar":
        c, e = polar_noise(shape, torch.promote_types(mu.dtype, torch.float32), mu.device)
        return mu + sigma * c * torch.sqrt(nu * torch.expm1(e * 2 / (nu + 2)))
    if sampler != "gamma":
        raise ValueError(f"--escort-sampler must be one of {SAMPLERS}, got {sampler!r}")
    z, g, alpha = escort_noise(nu, shape)
    return _EscortDraw.apply(mu, sigma, nu, z, g, alpha)


def t_divergence_seed(mu: Tensor, sigma: Tensor, nu_q: Tensor, nu_p: Tensor,
                      weight: Optional[Tensor] = None) -> Tensor:
    """(D 56) summed over elements: Σ_l [Ψ_ql(1+1/ν_q) − Ψ_p(1+(σ_l²+μ_l²)/ν_p)] / (1−t).

    mu, sigma: (*shape); nu_q, nu_p: tensors or numbers broadcastable to it (e.g. (n, 1, 1) for
    n stacked matrices); weight: optional 0/1 mask broadcastable to (*shape) (elements with 0 are
    left out). Returns a scalar, float32 or wider.
    """
    dt = torch.promote_types(mu.dtype, torch.float32)
    if mu.dtype != dt:
        mu, sigma = mu.to(dt), sigma.to(dt)
    nu_q = torch.as_tensor(nu_q, dtype=dt, device=mu.device)
    nu_p = torch.as_tensor(nu_p, dtype=dt, device=mu.device)
    inv_one_minus_t = -(1 + nu_q) / 2                       # 1/(1−t), t = 1 + 2/(1+ν_q)
    psi_q = torch.exp(log_psi(nu_q, sigma))
    psi_p = torch.exp(log_psi(nu_p))
    terms = inv_one_minus_t * (psi_q * (1 + 1 / nu_q) - psi_p * (1 + (sigma ** 2 + mu ** 2) / nu_p))
    return (terms if weight is None else terms * weight).sum()


class EscortQuadrature(nn.Module):
    """E_q̃[f(x)] for q̃ = t(μ, s², ν') with fixed Gauss-Legendre nodes in θ, x = μ + s·tan θ.

    With z = tan θ the standard-t weight becomes c_ν'(1 + tan²θ/ν')^{−(ν'+1)/2} sec²θ on
    (−π/2, π/2): smooth and O(1) wide for every ν', so one fixed node set serves all elements.
    """

    def __init__(self, nodes: int = 64):
        super().__init__()
        x, w = np.polynomial.legendre.leggauss(nodes)
        theta = x * (math.pi / 2)
        self.register_buffer("tan", torch.tensor(np.tan(theta)), persistent=False)
        self.register_buffer("log_w", torch.tensor(np.log(w * math.pi / 2)
                                                   - 2 * np.log(np.cos(theta))), persistent=False)

    def log_expect(self, log_f, mu: Tensor, scale: Tensor, df: Tensor) -> Tensor:
        """log E[f(x)], log_f: x (E, n) -> (E, n) log values; mu, scale (E,), df (E, 1) or scalar."""
        z = self.tan.to(mu.dtype)                                   # (n,)
        x = mu[:, None] + scale[:, None] * z                        # (E, n)
        log_dens = log_t_density_const(df) - (df + 1) / 2 * torch.log1p(z ** 2 / df)  # (n,)
        return torch.logsumexp(log_f(x) + (log_dens + self.log_w.to(mu.dtype)), dim=-1)


_QUAD_CACHE = {}


def _quadrature(nodes: int, device) -> EscortQuadrature:
    key = (nodes, str(device))
    if key not in _QUAD_CACHE:
        _QUAD_CACHE[key] = EscortQuadrature(nodes).to(device)
    return _QUAD_CACHE[key]


def t_divergence_exact(mu: Tensor, sigma: Tensor, nu_q: Tensor, nu_p, nodes: int = 64,
                       dtype: torch.dtype = torch.float64,
                       weight: Optional[Tensor] = None) -> Tensor:
    """D_t(q‖p) by its definition (D 46), t = 1 + 2/(1+ν_q), summed over elements.

    = [Ψ_q(1 + 1/ν_q) − E_q̃[p^{1−t}]] / (1−t), with
    p^{1−t}(x) = c_p^{1−t} (1 + x²/ν_p)^{(ν_p+1)/(ν_q+1)} and the expectation by quadrature.
    mu, sigma: (*shape); nu_q, nu_p, weight: broadcastable to it. Returns a scalar in ``dtype``.
    """
    shape = mu.shape
    mu, sigma = mu.reshape(-1).to(dtype), sigma.reshape(-1).to(dtype)
    nu_q = torch.as_tensor(nu_q, device=mu.device).to(dtype).expand(shape).reshape(-1, 1)
    nu_p = torch.as_tensor(nu_p, device=mu.device).to(dtype).expand(shape).reshape(-1, 1)
    one_minus_t = (-2 / (1 + nu_q)).view(-1)
    psi_q = torch.exp(log_psi(nu_q.view(-1), sigma))
    a = (nu_p + 1) / (nu_q + 1)                                           # (E, 1)
    quad = _quadrature(nodes, mu.device)
    log_e = quad.log_expect(lambda x: a * torch.log1p(x ** 2 / nu_p),
                            mu, escort_scale(sigma, nu_q.view(-1)), nu_q + 2)
    e_p = torch.exp(one_minus_t * log_t_density_const(nu_p.view(-1)) + log_e)   # E_q̃[p^{1−t}]
    terms = (psi_q * (1 + 1 / nu_q.view(-1)) - e_p) / one_minus_t
    if weight is not None:
        terms = terms * weight.to(dtype).expand(shape).reshape(-1)
    return terms.sum()


def t_divergence(mu: Tensor, sigma: Tensor, nu_q: Tensor, nu_p, mode: str = "seed",
                 weight: Optional[Tensor] = None) -> Tensor:
    """Dispatch on ``--t-divergence`` (seed | exact | tied); scalar float32 (exact: computed in
    float64, returned as float32). Arguments as in :func:`t_divergence_seed`."""
    if mode == "seed":
        return t_divergence_seed(mu, sigma, nu_q, nu_p, weight).float()
    if mode == "tied":
        return t_divergence_seed(mu, sigma, nu_q, nu_q, weight).float()
    if mode == "exact":
        return t_divergence_exact(mu, sigma, nu_q, nu_p, weight=weight).float()
    raise ValueError(f"--t-divergence must be one of {DIVERGENCES}, got {mode!r}")


_LOG_NU_MIN, _LOG_NU_MAX, _NU_FLOOR, _SIGMA_FLOOR = -7.0, 12.0, 1e-3, 1e-6


def _nu_values(log_nu: Tensor) -> Tuple[List[float], List[float]]:
    """ν = exp(clamp(log ν, −7, 12)) + 1e-3 for the n matrices as Python floats (float64), and
    dν/dlog ν (0 where the clamp is active, as autograd's clamp backward gives).

    The fused nodes below do their O(n) ν-only algebra on these floats: a handful of scalars
    per step would otherwise cost a dozen tiny tensor ops each (one sync on a GPU instead).
    """
    nu, dnu = [], []
    for x in log_nu.detach().tolist():
        e = math.exp(min(max(x, _LOG_NU_MIN), _LOG_NU_MAX))
        nu.append(e + _NU_FLOOR)
        dnu.append(e if _LOG_NU_MIN <= x <= _LOG_NU_MAX else 0.0)
    return nu, dnu


def _nu_from(log_nu: Tensor) -> Tensor:
    """ν = exp(clamp(log ν, −7, 12)) + 1e-3, elementwise (the tensor form of :func:`_nu_values`)."""
    return torch.exp(log_nu.clamp(_LOG_NU_MIN, _LOG_NU_MAX)) + _NU_FLOOR


def _sigma_from(rho: Tensor) -> Tensor:
    """σ = softplus(ρ) + 1e-6, elementwise."""
    return F.softplus(rho) + _SIGMA_FLOOR


def _column(values: List[float], like: Tensor) -> Tensor:
    """Python floats -> (n, 1, 1) tensor with ``like``'s dtype and device."""
    return torch.tensor(values, dtype=like.dtype, device=like.device).view(-1, 1, 1)


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


class WeightedDivergence(NamedTuple):
    """A divergence term as :meth:`StudentTMatrices.sample_with_divergence` returns it.

    ``weighted``: weight·D, float32 scalar in the graph (D = Σ over the matrices of
    D_t(q ‖ prior), what :meth:`StudentTMatrices.divergence` gives); ``value``: D for logging (a
    Python float on the CPU, a detached tensor elsewhere); ``nus``: the n degrees of freedom as
    Python floats.
    """

    weighted: Tensor
    value: Union[float, Tensor]
    nus: List[float]


class StudentTMatrices(nn.Module):
    """Mean-field Student-t posteriors over n stacked (V, d) matrices (D 51-53), one ν each.

    Parameters: mu (n, V, d) ~ N(0, init_std²); rho (n, V, d) with σ = softplus(rho) (initial
    σ = sigma_init); log_nu (n,), ν = exp(log_nu) + 1e-3 with log_nu clamped to [−7, 12]
    (positive; initial ν = nu_init). Stacking the matrices makes one draw and one divergence
    call serve all of them. Rows in ``zero_rows`` (the nil word) are 0 in every draw and in the
    mean, and are left out of the divergence.

    ``sample`` and the ``seed`` / ``tied`` divergences run as single fused autograd nodes
    (:class:`_PosteriorDraw`, :class:`_SeedDivergence`), and a training step's draw and
    divergence as one node (:meth:`sample_with_divergence`, :class:`_PosteriorStep`); ``exact`` uses
    the generic path. For float32 CPU parameters and the ``polar`` sampler, every single draw
    (s None) runs in the compiled kernel of :mod:`~fairseq_acvi.modules.cpu_kernel` instead of
    :class:`_PosteriorStep` / :class:`_PosteriorDraw` (same maths, its own noise generator).
    ``sampler`` (``polar`` | ``gamma``) picks the escort construction (module docstring); it
    can be changed on a built module (``set_sampler``), e.g. to evaluate a checkpoint.
    """

    def __init__(self, n: int, rows: int, dim: int, init_std: float = 0.1,
                 sigma_init: float = 0.01, nu_init: float = 100.0, zero_rows: Tuple[int, ...] = (),
                 sampler: str = "polar"):
        super().__init__()
        self.set_sampler(sampler)
        self.mu = nn.Parameter(torch.randn(n, rows, dim) * init_std)
        self.rho = nn.Parameter(torch.full((n, rows, dim), math.log(math.expm1(sigma_init))))
        self.log_nu = nn.Parameter(torch.full((n,), math.log(nu_init)))
        keep = torch.ones(rows, 1)
        for r in zero_rows:
            keep[r] = 0.0
        self.register_buffer("keep", keep, persistent=False)
        self.n_keep = float(keep.sum()) * dim            # N: elements per matrix in the divergence

    def set_sampler(self, sampler: str):
        if sampler not in SAMPLERS:
            raise ValueError(f"--escort-sampler must be one of {SAMPLERS}, got {sampler!r}")
        self.sampler = sampler

    @property
    def nu(self) -> Tensor:
        """(n,) degrees of freedom."""
        return _nu_from(self.log_nu)

    @property
    def sigma(self) -> Tensor:
        return _sigma_from(self.rho)

    def mean(self) -> Tensor:
        """μ with the zero rows zeroed: (n, V, d)."""
        return self.mu * self.keep

    def _sigma_value(self, rho: Optional[Tensor] = None) -> Tensor:
        """σ = softplus(ρ) + 1e-6 as a plain tensor (no graph; the fused nodes apply dσ/dρ),
        from ``rho`` (default: the parameter).

        Not cached across calls: optimizers that write ``p.data`` (fairseq's Adam) or fused
        ones do not bump ρ's version counter, so no cheap key tells a stale value apart.
        """
        with torch.no_grad():
            return _sigma_from(self.rho if rho is None else rho)

    def _compute_dtype(self) -> torch.dtype:
        """float32 for half-precision parameters (--fp16, --memory-efficient-fp16), else their
        dtype: draws and divergences are computed at least in float32."""
        return torch.promote_types(self.mu.dtype, torch.float32)

    def sample(self, s: Optional[int] = None) -> Tensor:
        """Escort draws (D 61): (n, V, d), or (s, n, V, d) when s is given, in μ's dtype
        (computed in float32 when the parameters are half precision)."""
        return self._draw(s, None)[0]

    def sample_with_divergence(self, prior_dof: float, mode: str,
                               weight: float = 1.0) -> Tuple[Tensor, WeightedDivergence]:
        """One training draw (n, V, d) and weight·D, the divergence to the prior t(0, I, ν_p)
        (``mode``: seed | tied | exact, docs/method.md §4.2).

        For ``seed`` and ``tied`` the draw and the divergence are one autograd node (faster; the
        same draw as :meth:`sample` for the same seed, and the same value and gradients as
        ``weight * divergence(prior_dof, mode)``): the compiled CPU kernel
        (:mod:`~fairseq_acvi.modules.cpu_kernel`) for float32 CPU parameters and the ``polar``
        sampler, else :class:`_PosteriorStep`. ``exact`` has no fused form: a draw, then
        :meth:`divergence`.
        """
        if mode not in ("seed", "tied"):
            draw, div = self.sample(), self.divergence(prior_dof, mode)
            return draw, self.weighted(div, weight)
        draw, fused = self._draw(None, (None if mode == "tied" else float(prior_dof), float(weight)))
        return draw, fused

    def weighted(self, div: Tensor, weight: float) -> WeightedDivergence:
        """A divergence D (float32 scalar) computed by :meth:`divergence` as a
        :class:`WeightedDivergence`."""
        return WeightedDivergence(weight * div, div.item() if div.device.type == "cpu"
                                  else div.detach(), self.nu_values())

    def _draw(self, s: Optional[int], fused: Optional[Tuple[Optional[float], float]]):
        """(draws, WeightedDivergence or None); ``fused`` = (prior ν or None for tied, weight)
        asks for the divergence in the node of a single draw (s None)."""
        if s is None and self.sampler == "polar" and cpu_kernel.usable(self.mu, self.rho):
            # every single draw goes through the kernel (with the divergence weighted by 0 when
            # not asked for), so a seed gives the same draw with or without the divergence
            res = cpu_kernel.posterior_step(self.mu, self.rho, self.log_nu, self.keep,
                                            self.n_keep, fused[0] if fused else None,
                                            fused[1] if fused else 0.0)
            if res is not None:
                if fused is None:
                    return res[0], None
                return res[0], WeightedDivergence(res[1], res[2], list(res[3]))
        shape = self.mu.shape if s is None else torch.Size((s,)) + self.mu.shape
        dt = self._compute_dtype()
        with torch.no_grad():
            nu3 = _nu_from(self.log_nu.to(dt)).view(-1, 1, 1)
        if self.sampler == "gamma":
            noise = escort_noise(nu3, shape)
        else:
            noise = polar_noise(shape, dt, self.mu.device)
        if fused is not None:
            prior, weight = fused
            out, div = _PosteriorStep.apply(self.mu.to(dt), self.rho.to(dt), self.log_nu.to(dt),
                                            self.keep, self.n_keep, prior, nu3,
                                            self.sampler, *noise)
            return out.to(self.mu.dtype), self.weighted(div, weight)
        return _PosteriorDraw.apply(self.mu, self.rho, self.log_nu, self.keep, nu3,
                                    self._sigma_value(self.rho.to(dt)), self.sampler, *noise), None

    def divergence(self, prior_dof: float, mode: str) -> Tensor:
        """Σ over the n matrices of D_t(q(Θ) ‖ t(0, I, prior_dof)), nil rows left out; float32
        (half-precision parameters are upcast first)."""
        dt = self._compute_dtype()
        mu, rho, log_nu = self.mu.to(dt), self.rho.to(dt), self.log_nu.to(dt)
        if mode in ("seed", "tied"):
            return _SeedDivergence.apply(mu, rho, log_nu, self.keep, self.n_keep,
                                         prior_dof if mode == "seed" else None,
                                         self._sigma_value(rho))
        return t_divergence(mu, _sigma_from(rho), _nu_from(log_nu).view(-1, 1, 1), prior_dof,
                            mode, weight=self.keep)

    def nu_values(self) -> List[float]:
        """The n degrees of freedom as Python floats (for logging; no graph)."""
        return _nu_values(self.log_nu)[0]
