"""Binary linear-chain CRF over source positions: log-space forward-backward (docs/method.md §2.3).

The segmentation attention of Kim et al. (2017) puts a binary variable z_i ∈ {0, 1} on every real
source position i and scores an assignment z = (z_1..z_L) of the L real positions (in order) as

    score(z) = start[z_1] + Σ_i unary_i(z_i) + Σ_{i>1} trans[z_{i-1}, z_i] + end[z_L],
    unary_i(1) = e_i,  unary_i(0) = 0,      log Z = logsumexp_z score(z).

The node marginals p(z_i = 1) = exp(α_i[1] + β_i[1] − log Z) come from forward (α) and backward
(β) messages. Both are computed as prefix products of 2×2 matrices in the log semiring
(A ⊗ B)[a, c] = logsumexp_b A[a, b] + B[b, c], with a Hillis-Steele parallel scan: ⌈log₂ N⌉
vectorised steps over all positions and batch rows, no Python loop over batch or positions.

Padding may sit anywhere (fairseq pads sources on the left by default): a padded position gets
the log-semiring identity matrix, so it is skipped exactly — the real positions keep the partition
function and marginals of the unpadded chain — and its marginal is set to 0 (log-marginal −inf).

Everything runs in float32 (float64 if the unaries are float64, e.g. for gradcheck). Autograd
differentiates through the scan (no hand-written backward). "−inf" inside the matrices is a large
finite negative number so that logaddexp never sees (−inf, −inf) (its gradient would be NaN).
"""
from typing import Tuple

import torch
from torch import Tensor

#: stands for log 0 inside the scan (finite: keeps logaddexp's gradient free of NaN)
NEG = -1e9


def log_matmul_2x2(x: Tensor, y: Tensor) -> Tensor:
    """Log-semiring product of 2×2 matrices stored state-major: x, y (2, 2, ...) -> (2, 2, ...),
    (x ⊗ y)[a, c] = logaddexp(x[a, 0] + y[0, c], x[a, 1] + y[1, c]). The matrix indices lead so
    that every elementwise op runs over long contiguous rows (much faster than (..., 2, 2))."""
    z = x.unsqueeze(2) + y.unsqueeze(0)                     # (2, 2, 2, ...): [a, b, c]
    return torch.logaddexp(*z.unbind(1))


def prefix_scan(m: Tensor) -> Tensor:
    """Inclusive prefix products P_i = M_1 ⊗ … ⊗ M_i along the last dim of ``m`` (2, 2, B, N):
    Hillis-Steele scan, ⌈log₂ N⌉ vectorised steps."""
    n, d = m.size(-1), 1
    eye = torch.full((2, 2), NEG, dtype=m.dtype, device=m.device).fill_diagonal_(0.0)
    while d < n:
        # P_i <- P_{i-d} ⊗ P_i, with P_{i-d} = identity for i < d (identity ⊗ X = X: finite
        # entries exactly, since exp(NEG + …) = 0; NEG-sized ones stay NEG-sized): one
        # full-length product, no slicing of the result (fewer ops in the backward).
        shifted = torch.cat([eye.view(2, 2, 1, 1).expand(*m.shape[:-1], d), m[..., :-d]], dim=-1)
        m = log_matmul_2x2(shifted, m)
        d *= 2
    return m


def potentials(unary: Tensor, pad_mask: Tensor, trans: Tensor, start: Tensor) -> Tensor:
    """Per-position transfer matrices M_i in log space, state-major (2, 2, B, N).

    M_i[a, b] = trans[a, b] + unary_i(b) at real positions after the first real one,
    start[b] + unary_i(b) (for every a) at the first real position (the chain is entered from a
    virtual state 0, see :func:`binary_crf`), and the log identity at padded positions.
    """
    dt = unary.dtype
    real = ~pad_mask
    first = real & (real.long().cumsum(1) == 1)                              # (B, N)
    u = torch.stack([torch.zeros_like(unary), unary])                        # (2, B, N): unary(b)
    inner = trans.to(dt).view(2, 2, 1, 1) + u.unsqueeze(0)                   # (2, 2, B, N)
    entry = (start.to(dt).view(1, 2, 1, 1) + u.unsqueeze(0)).expand_as(inner)
    eye = torch.full((2, 2), NEG, dtype=dt, device=unary.device)
    eye.fill_diagonal_(0.0)
    m = torch.where(first, entry, inner)
    return torch.where(pad_mask, eye.view(2, 2, 1, 1), m)


def binary_crf(unary: Tensor, pad_mask: Tensor, trans: Tensor, start: Tensor,
               end: Tensor) -> Tuple[Tensor, Tensor]:
    """Log-marginals log p(z_i = 1) and log Z of the binary chain CRF (docs/method.md §2.3).

    unary: (B, N) scores e_i of state 1 (any value at padding, it is ignored);
    pad_mask: (B, N) bool, True at padding (anywhere in the row); trans: (2, 2) with
    trans[a, b] the score of z_{i-1} = a -> z_i = b; start, end: (2,).
    Returns ``log_p1`` (B, N) float32/64 with −inf at padding, and ``log_z`` (B,).
    A row with no real position has log Z = end[0] (the empty assignment) and no marginals.
    """
    if unary.dim() != 2 or pad_mask.shape != unary.shape:
        raise ValueError(f"binary_crf: unary {tuple(unary.shape)} and pad_mask "
                         f"{tuple(pad_mask.shape)} must both be (B, N)")
    dt = torch.float64 if unary.dtype == torch.float64 else torch.float32
    unary = unary.to(dt).masked_fill(pad_mask, 0.0)
    m = potentials(unary, pad_mask, trans, start)                            # (2, 2, B, N)
    # Rescaling: subtract each matrix's largest entry. Offsets cancel exactly in α + β − log Z,
    # so the marginals come from messages of size O(1) instead of O(Σ|e_i|) (float32 precision);
    # log Z gets them back as a plain sum. Detaching them is exact (log Z' + Σ shift has zero
    # total derivative in the shifts).
    shift = m.detach().amax(dim=(0, 1))                                      # (B, N)
    m = m - shift
    B, N = unary.shape
    # forward: P_i = M_1 ⊗ … ⊗ M_i, α_i = row 0 of P_i (the chain starts in the virtual state 0).
    # backward: Q_i = M_i ⊗ … ⊗ M_N; Q_iᵀ = M_Nᵀ ⊗ … ⊗ M_iᵀ is a prefix product of the reversed,
    # transposed sequence, so both directions run as one scan over a doubled batch.
    both = prefix_scan(torch.cat([m, m.transpose(0, 1).flip(-1)], dim=2))   # (2, 2, 2B, N)
    alpha = both[0, :, :B]                             # (2, B, N): α_i[b]
    q_t = both[:, :, B:].flip(-1)                      # (2, 2, B, N): q_t[c, a] = Q_i[a, c]
    end = end.to(dt)
    log_z_shifted = torch.logsumexp(alpha[:, :, -1] + end.view(2, 1), dim=0)   # (B,)
    # β_i[a] = logsumexp_c Q_{i+1}[a, c] + end[c]; β_N = end.
    beta_prev = torch.logsumexp(q_t + end.view(2, 1, 1, 1), dim=0)          # (2, B, N): β_{i-1}
    beta = torch.cat([beta_prev[..., 1:], end.view(2, 1, 1).expand(2, B, 1)], dim=-1)
    log_p1 = alpha[1] + beta[1] - log_z_shifted.unsqueeze(1)
    log_p1 = log_p1.masked_fill(pad_mask, float("-inf"))
    return log_p1, log_z_shifted + shift.sum(1)
