"""Predictive uncertainty of a Monte-Carlo average (docs/uncertainty.md; docs/method.md §2.2, §4.2).

ACVI decoding (D 88) and t-MEM-NN inference average S sampled distributions p_1..p_S with weights
w_s (uniform 1/S unless the context inference gives log-weights):

    p̄ = Σ_s w_s p_s
    H[p̄]              predictive (total) entropy
    E_s H[p_s]        = Σ_s w_s H[p_s], expected entropy (the aleatoric part)
    I = H[p̄] − E_s H[p_s] = Σ_s w_s KL(p_s ‖ p̄) ≥ 0    mutual information (the epistemic part)

(the decomposition of Houlsby et al. 2011 and Depeweg et al. 2018). Everything is computed in
float32 and in nats from log-probabilities; ``I`` is taken from its KL form (per sample, against
the p̄ the decoder already formed), clamped at 0 against rounding, and the entropy is reported as
E_s H[p_s] + I, so that H[p̄] ≥ E_s H[p_s] holds exactly. A single distribution (S = 1, soft
attention, K = 0) has I = 0 and H[p̄] = E H.

The three numbers are stacked on a last dimension of size 3 in the order of :data:`FIELDS`. They
are diagnostics: computed from detached inputs, no gradient flows through them.

Members (docs/uncertainty.md §6): a prediction that averages M members with equal weights (the
checkpoints of an ensemble, the chains of MC dropout), each of which may itself average S context
samples, is the average of all M × S distributions, p̄ = (1/M) Σ_m p̄_m, p̄_m = Σ_s w_s p_ms.
:func:`combine_members` gives its decomposition over all M × S from the members' own rows (the
mutual information splits as I = I_members + E_m I_m, with I_members = H[p̄] − E_m H[p̄_m] the
members' disagreement and I_m the mutual information of member m's samples) and adds I_members as
a fourth number (:data:`MEMBERS_MUTUAL_INFORMATION`).
"""
import math
from typing import Optional

import torch
from torch import Tensor

from fairseq_acvi.mc_prediction.combination import row_block

#: the order of the last dimension of every result of this module
FIELDS = ("entropy", "expected_entropy", "mutual_information")
ENTROPY, EXPECTED_ENTROPY, MUTUAL_INFORMATION = range(3)
#: the fourth number of a prediction that averages members (:func:`combine_members`): their part of I
MEMBERS_MUTUAL_INFORMATION = 3


def _row_sums(lp: Tensor, lp_mean: Optional[Tensor] = None, clamp: bool = False):
    """Σ_v p_s log p_s (= −H[p_s]) and, with ``lp_mean``, Σ_v p_s log p̄, per row and sample.

    lp: (n, S, V) float32 log p_s; lp_mean: (n, 1, V) log p̄ or None -> ((n, S), (n, S) or None).
    ``clamp``: −inf in ``lp`` is first raised to the lowest float, so that 0 · log 0 counts 0.
    Taken a block of rows at a time (:func:`~fairseq_acvi.mc_prediction.combination.row_block`; a
    loop over rows of the batch, not over the samples): one exp(lp) block in a reused buffer, read
    twice while it is in the cache (the clamp too is a block's, not a copy of the whole of lp).
    """
    n, S, V = lp.shape
    step = row_block(n, S * V, lp.is_cuda)
    neg_h = lp.new_empty(n, S)
    cross = lp.new_empty(n, S) if lp_mean is not None else None
    buf = lp.new_empty(min(step, n), S, V)
    for i in range(0, n, step):
        j = min(n, i + step)
        block = lp[i:j].clamp_min(torch.finfo(lp.dtype).min) if clamp else lp[i:j]
        p = torch.exp(block, out=buf[: j - i])
        torch.linalg.vecdot(p, block, out=neg_h[i:j])
        if cross is not None:
            torch.linalg.vecdot(p, lp_mean[i:j], out=cross[i:j])
    return neg_h, cross


def decompose(lp: Tensor, lp_mean: Tensor, log_weights: Optional[Tensor] = None) -> Tensor:
    """The decomposition of S per-sample distributions.

    lp: (..., S, V) log p_s, finite; lp_mean: (..., V) log p̄ (``combine_samples(lp, log_weights,
    "prob")``, already formed by the decoder); log_weights: (..., S) log w_s or None (uniform).
    Returns (..., 3) float32: H[p̄], E_s H[p_s], I (nats; :data:`FIELDS`).
    """
    lp, lp_mean = lp.detach().float(), lp_mean.detach().float()
    lead, (S, V) = lp.shape[:-2], lp.shape[-2:]
    neg_h, cross = _row_sums(lp.reshape(-1, S, V), lp_mean.reshape(-1, 1, V))
    neg_h, cross = neg_h.view(*lead, S), cross.view(*lead, S)
    if log_weights is None:
        w = lp.new_full(neg_h.shape, 1.0 / S)
    else:
        w = log_weights.detach().float().exp()
    expected = -(w * neg_h).sum(-1)
    # KL(p_s ‖ p̄) = Σ_v p_s log p_s − Σ_v p_s log p̄: float32 error ~1e-7 nats per row at V = 8k
    # (against float64, for I ~ 1e-5)
    mi = (w * (neg_h - cross)).sum(-1).clamp_min(0.0)
    return torch.stack([expected + mi, expected, mi], dim=-1)


def single(lp: Tensor) -> Tensor:
    """One distribution per row (no samples): lp (..., V) log p, may hold −inf ->
    (..., 3) float32 (H, H, 0)."""
    lp = lp.detach().float()
    h = -_row_sums(lp.reshape(-1, 1, lp.size(-1)), clamp=True)[0].view(lp.shape[:-1])
    return torch.stack([h, h, torch.zeros_like(h)], dim=-1)


class SampleAccumulator:
    """The decomposition accumulated sample by sample (the decoder's chunked path, large batches).

    ``add(lp_s, log_w_s)`` for each sample s (lp_s (..., V), log_w_s (...) or a float), then
    ``result(lp_mean)`` with the final log p̄ (..., V) -> (..., 3). Uses I = H[p̄] − E H[p_s]
    (the KL form needs p̄ before the first sample), clamped at 0.
    """

    def __init__(self):
        self.expected = None

    def add(self, lp_s: Tensor, log_w_s) -> None:
        lp_s = lp_s.detach().float()
        w = log_w_s.detach().float().exp() if torch.is_tensor(log_w_s) else math.exp(log_w_s)
        neg_h = _row_sums(lp_s.reshape(-1, 1, lp_s.size(-1)))[0].view(lp_s.shape[:-1])
        term = -w * neg_h
        self.expected = term if self.expected is None else self.expected + term

    def result(self, lp_mean: Tensor) -> Tensor:
        h = single(lp_mean)[..., ENTROPY]
        mi = (h - self.expected).clamp_min(0.0)
        return torch.stack([self.expected + mi, self.expected, mi], dim=-1)


def combine_members(lp: Tensor, lp_mean: Tensor, u: Tensor) -> Tensor:
    """The decomposition of an equal-weight average of M members (module docstring).

    lp: (..., M, V) log p̄_m, each member's own prediction; lp_mean: (..., V) log (1/M) Σ_m p̄_m;
    u: (..., M, 3 or 4) the members' own rows (H[p̄_m], E_s H[p_ms], I_m [, I_members of m when
    the member itself averages members]). Returns (..., 4) float32, nats: H[p̄], E_{m,s} H[p_ms],
    I over all M × S distributions, and I_members (the part of I that the members' predictions
    disagree about, plus the members' own I_members; 0 for identical members).
    E H is the mean of the members' E H; I = (H[p̄] − E_m H[p̄_m]) + E_m I_m, H[p̄] = E H + I, so
    that H[p̄] ≥ E H ≥ 0 and I ≥ I_members ≥ 0 hold exactly.
    """
    between = decompose(lp, lp_mean)[..., MUTUAL_INFORMATION]       # H[p̄] − E_m H[p̄_m] ≥ 0
    u = u.detach().float()
    expected = u[..., EXPECTED_ENTROPY].mean(-1)
    mi = between + u[..., MUTUAL_INFORMATION].mean(-1)
    inner = (u[..., MEMBERS_MUTUAL_INFORMATION].mean(-1) if u.size(-1) > MEMBERS_MUTUAL_INFORMATION
             else torch.zeros_like(between))
    return torch.stack([expected + mi, expected, mi, between + inner], dim=-1)
