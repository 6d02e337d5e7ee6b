"""The Student-t quantities the posteriors need (docs/method.md §4.2; D 48-59): the density's
log-normaliser, Ψ, the escort scale, and the parameterisation of σ = softplus(ρ) and ν = exp(log ν).
Shapes: elementwise."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


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
