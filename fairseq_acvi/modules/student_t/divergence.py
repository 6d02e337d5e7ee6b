"""The t-divergence D_t(q ‖ p) in its three forms: ``seed`` (D 56), ``exact`` (quadrature) and
``tied`` (docs/method.md §4.2; the package docstring). Elementwise over (…) tensors, summed."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
from torch import Tensor

from fairseq_acvi.modules.student_t.distribution import (DIVERGENCES, escort_scale, log_psi,
                                                        log_t_density_const)


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
