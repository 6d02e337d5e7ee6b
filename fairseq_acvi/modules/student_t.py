"""Student's-t posteriors, escort sampling and the t-divergence (METHOD.md §4.2; D 48-62).

Univariate notation per element l of a matrix Θ (all functions are elementwise and summed):

* posterior  q = t(μ, σ², ν_q), prior p = t(0, 1, ν_p), t = 1 + 2/(1 + ν_q)          (D 51, 48, 59)
* escort     q̃ = t(μ, ν_q/(ν_q+2)·σ², ν_q+2); its variance is σ² (ν_q > 0)           (D 60)
* sample     Θ = μ + √(ν_q/(ν_q+2))·σ·ε,  ε ~ t(0, 1, ν_q+2)  (reparameterised; gradients reach
  ν_q through torch's Gamma/chi-square reparameterisation)                            (D 61-62)
* D_t(q‖p) = ∫ q̃ log_t q − ∫ q̃ log_t p,  log_t(x) = (x^{1−t} − 1)/(1 − t)            (D 46)

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
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

DIVERGENCES = ("seed", "exact", "tied")


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


def sample_escort(mu: Tensor, sigma: Tensor, nu: Tensor, n: Optional[int] = None) -> Tensor:
    """Reparameterised draws Θ = μ + √(ν/(ν+2)) σ ε, ε ~ t(0, 1, ν+2) (D 61-62).

    mu, sigma: (*shape); nu: a tensor broadcastable to (*shape). Returns (*shape), or
    (n, *shape) when n is given. Differentiable w.r.t. mu, sigma and nu (StudentT.rsample
    reparameterises its Gamma draw).
    """
    df = (nu + 2).expand(mu.shape)
    eps = torch.distributions.StudentT(df, validate_args=False).rsample(
        torch.Size() if n is None else torch.Size((n,)))
    return mu + escort_scale(sigma, nu) * eps


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


class StudentTMatrices(nn.Module):
    """Mean-field Student-t posteriors over n stacked (V, d) matrices (D 51-53), one ν each.

    Parameters: mu (n, V, d) ~ N(0, init_std²); rho (n, V, d) with σ = softplus(rho) (initial
    σ = sigma_init); log_nu (n,), ν = exp(log_nu) + 1e-3 with log_nu clamped to [−7, 12]
    (positive; initial ν = nu_init). Stacking the matrices makes one draw and one divergence
    call serve all of them. Rows in ``zero_rows`` (the nil word) are 0 in every draw and in the
    mean, and are left out of the divergence.
    """

    def __init__(self, n: int, rows: int, dim: int, init_std: float = 0.1,
                 sigma_init: float = 0.01, nu_init: float = 100.0, zero_rows: Tuple[int, ...] = ()):
        super().__init__()
        self.mu = nn.Parameter(torch.randn(n, rows, dim) * init_std)
        self.rho = nn.Parameter(torch.full((n, rows, dim), math.log(math.expm1(sigma_init))))
        self.log_nu = nn.Parameter(torch.full((n,), math.log(nu_init)))
        keep = torch.ones(rows, 1)
        for r in zero_rows:
            keep[r] = 0.0
        self.register_buffer("keep", keep, persistent=False)

    @property
    def nu(self) -> Tensor:
        """(n,) degrees of freedom."""
        return torch.exp(self.log_nu.clamp(-7.0, 12.0)) + 1e-3

    @property
    def sigma(self) -> Tensor:
        return F.softplus(self.rho) + 1e-6

    def mean(self) -> Tensor:
        """μ with the zero rows zeroed: (n, V, d)."""
        return self.mu * self.keep

    def sample(self, s: Optional[int] = None) -> Tensor:
        """Escort draws (D 61): (n, V, d), or (s, n, V, d) when s is given."""
        return sample_escort(self.mu, self.sigma, self.nu.view(-1, 1, 1), s) * self.keep

    def divergence(self, prior_dof: float, mode: str) -> Tensor:
        """Σ over the n matrices of D_t(q(Θ) ‖ t(0, I, prior_dof)), nil rows left out; float32."""
        return t_divergence(self.mu, self.sigma, self.nu.view(-1, 1, 1), prior_dof, mode,
                            weight=self.keep)
