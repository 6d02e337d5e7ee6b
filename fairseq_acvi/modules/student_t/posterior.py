"""The module layer: :class:`StudentTMatrices`, mean-field Student-t posteriors over stacked
matrices (docs/method.md §4.2; D 51-53), and :class:`WeightedDivergence`."""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple, Union

import torch
import torch.nn as nn
from torch import Tensor

from fairseq_acvi.modules.student_t import cpu_kernel
from fairseq_acvi.modules.student_t.distribution import SAMPLERS, _nu_from, _nu_values, _sigma_from
from fairseq_acvi.modules.student_t.divergence import t_divergence
from fairseq_acvi.modules.student_t.fused import _PosteriorDraw, _PosteriorStep, _SeedDivergence
from fairseq_acvi.modules.student_t.samplers import escort_noise, polar_noise


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
    (s None) runs in the compiled kernel of :mod:`~fairseq_acvi.modules.student_t.cpu_kernel` instead of
    :class:`_PosteriorStep` / :class:`_PosteriorDraw` (same maths, its own noise generator).
    ``sampler`` (``polar`` | ``gamma``) picks the escort construction (module docstring); it
    can be changed on a built module (``set_sampler``), e.g. to evaluate a checkpoint.

    Half precision: converting the model to float16 / bfloat16 (``model.half()``, what fairseq's
    ``--fp16`` and ``--memory-efficient-fp16`` do) leaves μ, ρ and log ν float32 and makes only the
    draws and the mean half (``out_dtype``). Their gradients then stay float32 too: the
    divergence's gradient in ν and σ grows without bound as ν → 0 under ``--t-divergence seed``
    (about 4/ν³ per element) and overflows float16 at every loss scale (the fp16 soak of
    docs/results/reliability_2026-11-26), while the likelihood's gradient, which reaches them
    through the half-precision draw, is of ordinary size.
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
        self.out_dtype = self.mu.dtype                   # the draws' dtype (see the class docstring)

    def _apply(self, fn, *args, **kwargs):
        """Every module conversion goes through here. A probe in ``out_dtype`` tells a dtype
        conversion (which sets ``out_dtype``) from a device move (which keeps it); a conversion to
        a 16-bit float type leaves the parameters (and ``keep``) float32."""
        self.out_dtype = fn(torch.zeros((), dtype=self.out_dtype, device=self.mu.device)).dtype
        if self.out_dtype in (torch.float16, torch.bfloat16):
            return super()._apply(lambda t: fn(t).float() if t.is_floating_point() else fn(t),
                                  *args, **kwargs)
        return super()._apply(fn, *args, **kwargs)

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
        """μ with the zero rows zeroed: (n, V, d), in ``out_dtype``."""
        return (self.mu * self.keep).to(self.out_dtype)

    def _sigma_value(self, rho: Optional[Tensor] = None) -> Tensor:
        """σ = softplus(ρ) + 1e-6 as a plain tensor (no graph; the fused nodes apply dσ/dρ),
        from ``rho`` (default: the parameter).

        Not cached across calls: optimizers that write ``p.data`` (fairseq's Adam) or fused
        ones do not bump ρ's version counter, so no cheap key tells a stale value apart.
        """
        with torch.no_grad():
            return _sigma_from(self.rho if rho is None else rho)

    def _compute_dtype(self) -> torch.dtype:
        """The parameters' dtype, at least float32 (a half model keeps them float32 anyway:
        :meth:`_apply`): draws and divergences are computed at least in float32."""
        return torch.promote_types(self.mu.dtype, torch.float32)

    def sample(self, s: Optional[int] = None) -> Tensor:
        """Escort draws (D 61): (n, V, d), or (s, n, V, d) when s is given, in ``out_dtype``
        (computed at least in float32)."""
        return self._draw(s, None)[0]

    def sample_with_divergence(self, prior_dof: float, mode: str,
                               weight: float = 1.0) -> Tuple[Tensor, WeightedDivergence]:
        """One training draw (n, V, d) and weight·D, the divergence to the prior t(0, I, ν_p)
        (``mode``: seed | tied | exact, docs/method.md §4.2).

        For ``seed`` and ``tied`` the draw and the divergence are one autograd node (faster; the
        same draw as :meth:`sample` for the same seed, and the same value and gradients as
        ``weight * divergence(prior_dof, mode)``): the compiled CPU kernel
        (:mod:`~fairseq_acvi.modules.student_t.cpu_kernel`) for float32 CPU parameters and the ``polar``
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
                draw = res[0].to(self.out_dtype)
                if fused is None:
                    return draw, None
                return draw, WeightedDivergence(res[1], res[2], list(res[3]))
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
            return out.to(self.out_dtype), self.weighted(div, weight)
        draw = _PosteriorDraw.apply(self.mu, self.rho, self.log_nu, self.keep, nu3,
                                    self._sigma_value(self.rho.to(dt)), self.sampler, *noise)
        return draw.to(self.out_dtype), None

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
