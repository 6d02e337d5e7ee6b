"""Constrained softmax and constrained sparsemax (docs/method.md §3.5), batched over rows.

Both map scores z ∈ ℝᴺ and upper bounds u ∈ ℝᴺ (u ≥ 0, Σ_i u_i ≥ 1 over the real positions) to
a distribution α on the simplex with α ≤ u:

* **csoftmax** (Martins & Kreutzer 2017): argmin_α KL(α ‖ softmax(z)) s.t. α ∈ Δ, α ≤ u. With A the
  set of positions at their bound (the *active* set) and F the rest,

      α_i = u_i                                   (i ∈ A)
      α_i = exp(z_i) · (1 − Σ_{j∈A} u_j) / Σ_{j∈F} exp(z_j)     (i ∈ F).

  A is a prefix of the positions sorted by z_i − log u_i (descending): position i is active iff
  exp(z_i) s > u_i with s = (1 − Σ_A u) / Σ_F exp(z). :func:`csoftmax` sorts once per row and
  tests every prefix at once with cumulative sums (log-space for the free mass):
  O(N log N) per row, no loop.

* **csparsemax** (Malaviya, Ferreira & Martins 2018): argmin_α ‖α − z‖² s.t. α ∈ Δ, α ≤ u. The
  solution is α_i = clip(z_i − τ, 0, u_i) with τ the root of the non-increasing piecewise-linear
  g(τ) = Σ_i clip(z_i − τ, 0, u_i) − 1, whose breakpoints are the z_i and the z_i − u_i.
  :func:`csparsemax` sorts the 2N breakpoints of every row once, gets the slope and the value of g
  at each breakpoint by cumulative sums and interpolates τ on the segment where g reaches 1
  (Malaviya et al.'s sort-based algorithm, batched: no loop over rows or positions), then takes the
  sets F = {0 < z_i − τ < u_i}, A = {z_i − τ ≥ u_i} and recomputes τ from them:
  τ = (Σ_F z_i + Σ_A u_i − 1) / |F|. Cost O(N log N) per row (the sort of 2N values).

Gradients. Both results are written as closed forms of (z, u) with the sets (A, F) held fixed
(they are piecewise constant), so autograd gives the exact Jacobians: for csparsemax
∂α_i/∂z_j = δ_ij − 1/|F| on F × F, ∂α_i/∂u_j = δ_ij on A and −1/|F| for i ∈ F, j ∈ A (Malaviya et
al.'s backward); for csoftmax ∂α_F/∂z_F = diag(α_F) − α_F α_Fᵀ / m with m = 1 − Σ_A u, and
∂α_F/∂u_A = −α_F / m (Martins & Kreutzer's).

Padding (``pad_mask`` True) gets exactly α = 0 and no gradient. Everything is float32 (inputs are
cast; float64 stays float64). Shapes: z, u, pad_mask (..., N); result (..., N).
"""
from __future__ import annotations

import torch
from torch import Tensor

from fairseq_acvi.modules.precision import at_least_float32


def _check_feasible(u: Tensor, pad_mask: Tensor) -> None:
    total = u.masked_fill(pad_mask, 0.0).sum(-1)
    feasible = ~(total < 1.0 - 1e-4).any()
    if torch.compiler.is_compiling():  # a compiled step (compiled_step.py): checked on the device
        torch._assert_async(feasible, "constrained attention: the upper bounds of some row sum "
                            "to less than 1")
    elif not bool(feasible):
        raise ValueError("constrained attention: the upper bounds of some row sum to less than 1 "
                         f"(min {float(total.min()):.4f}), so no distribution satisfies them; the "
                         "sink position (docs/method.md §3.5) keeps every row feasible")


def csparsemax(z: Tensor, u: Tensor, pad_mask: Tensor) -> Tensor:
    """Constrained sparsemax (module docstring): z, u (..., N), pad_mask (..., N) bool -> α
    (..., N) float32 with 0 ≤ α ≤ u, Σ α = 1, α = 0 at padding."""
    z = at_least_float32(z).masked_fill(pad_mask, 0.0)
    u = u.to(z.dtype).clamp_min(0.0).masked_fill(pad_mask, 0.0)
    _check_feasible(u, pad_mask)
    with torch.no_grad():
        tau0 = _csparsemax_threshold(z, u, pad_mask)
        diff = z - tau0
        active = (diff >= u) & ~pad_mask                                   # A: at the bound
        free = (diff > 0) & ~active & ~pad_mask                            # F: strictly inside
    n_free = free.sum(-1, keepdim=True)
    tau = ((z * free).sum(-1, keepdim=True) + (u * active).sum(-1, keepdim=True) - 1.0) \
        / n_free.clamp_min(1)
    tau = torch.where(n_free > 0, tau, tau0)           # |F| = 0: every weight is at a bound or 0
    # min(·, u), max(·, 0): the recomputed τ may move a free weight past its bound by a rounding
    # error; the bounds hold exactly (the sum stays 1 up to rounding)
    inner = torch.minimum(z - tau, u).clamp_min(0.0)
    alpha = torch.where(free, inner, torch.where(active, u, torch.zeros_like(z)))
    return alpha


def _csparsemax_threshold(z: Tensor, u: Tensor, pad_mask: Tensor) -> Tensor:
    """τ with Σ_i clip(z_i − τ, 0, u_i) = 1 (..., 1), exactly up to rounding: g(τ) is piecewise
    linear with breakpoints z_i (position i starts to count, slope −1 more) and z_i − u_i (it
    reaches its bound); the 2N breakpoints sorted in descending order, the number of positions
    strictly inside their interval on each segment and g at each breakpoint are cumulative sums,
    and τ is interpolated on the first segment where g reaches 1. Padding takes no part."""
    real = ~pad_mask
    enter, leave = z, z - u
    low = leave.masked_fill(pad_mask, float("inf")).amin(-1, keepdim=True) - 1.0
    points = torch.cat([torch.where(real, enter, low.expand_as(enter)),
                        torch.where(real, leave, low.expand_as(leave))], -1)       # (..., 2N)
    step = torch.cat([real.to(z.dtype), -real.to(z.dtype)], -1)        # +1 enters, −1 leaves
    p, order = points.sort(-1, descending=True)
    inside = torch.cumsum(step.gather(-1, order), -1)                  # on the segment below p_k
    seg = torch.cat([p[..., :-1] - p[..., 1:], torch.zeros_like(p[..., :1])], -1)
    g_next = torch.cumsum(inside * seg, -1)                            # g(p_{k+1})
    g_here = g_next - inside * seg                                     # g(p_k)
    # the first segment reaching 1 (or g's last value, should rounding keep Σ u just under 1)
    target = torch.minimum(g_next[..., -1:], torch.ones_like(g_next[..., -1:]))
    k = (g_next >= target).float().argmax(-1, keepdim=True)
    n_k = inside.gather(-1, k).clamp_min(1.0)
    return p.gather(-1, k) - (1.0 - g_here.gather(-1, k)) / n_k


def csoftmax(z: Tensor, u: Tensor, pad_mask: Tensor) -> Tensor:
    """Constrained softmax (module docstring): z, u (..., N), pad_mask (..., N) bool -> α
    (..., N) float32 with 0 ≤ α ≤ u, Σ α = 1, α = 0 at padding."""
    z = at_least_float32(z).masked_fill(pad_mask, 0.0)
    u = u.to(z.dtype).clamp_min(0.0).masked_fill(pad_mask, 0.0)
    _check_feasible(u, pad_mask)
    N = z.size(-1)
    with torch.no_grad():
        # order: z_i − log u_i descending (u_i = 0 first: a zero bound is always active);
        # padding last, never active
        key = (z - u.log()).masked_fill(pad_mask, float("-inf"))
        order = key.argsort(dim=-1, descending=True)
        zs, us = z.gather(-1, order), u.gather(-1, order)
        pads = pad_mask.gather(-1, order)
        # prefix k active (k = 0..N-1): used mass c_k = Σ_{<k} u, free log-mass L_k = LSE_{≥k} z
        used = torch.cumsum(us, -1) - us                                    # (.., N) Σ_{j<k} u_j
        zf = zs.masked_fill(pads, float("-inf"))
        rest = torch.logcumsumexp(zf.flip(-1), -1).flip(-1)                 # LSE_{j≥k} z_j
        # with prefix k active, position k (the first free one) must fit under its bound:
        # exp(z_k) (1 − c_k) / exp(L_k) ≤ u_k; the smallest such k is the active set's size
        mass = (1.0 - used).clamp_min(0.0)
        fits = (zs + mass.log() - rest <= us.log() + 1e-6) | pads
        k = torch.where(fits.any(-1, keepdim=True),
                        fits.float().argmax(-1, keepdim=True),               # first True
                        torch.full_like(fits[..., :1], N - 1, dtype=torch.long))
        rank = torch.empty_like(order).scatter_(-1, order, torch.arange(N, device=z.device)
                                                .expand_as(order).contiguous())
        active = (rank < k) & ~pad_mask
        free = ~active & ~pad_mask
    m = 1.0 - (u * active).sum(-1, keepdim=True)                            # free mass
    # (a row with no free position, Σ_A u = 1, would make the softmax 0/0: any finite logits)
    logits = torch.where(free.any(-1, keepdim=True), z.masked_fill(~free, float("-inf")),
                         torch.zeros_like(z))
    p = torch.softmax(logits, -1).masked_fill(~free, 0.0)                   # (.., N), 0 off F
    alpha = torch.where(active, u, torch.minimum(p * m, u))     # ≤ u exactly (rounding)
    return alpha
