"""Escort draws ε ~ t(0, 1, ν+2) and Θ = μ + √(ν/(ν+2))·σ·ε (docs/method.md §4.2; D 60-62):
the ``gamma`` and ``polar`` constructions and their pathwise gradients (the package docstring)."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from fairseq_acvi.modules.student_t.distribution import SAMPLERS


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
