"""Sentence-level uncertainty of a hypothesis from its per-token numbers (docs/uncertainty.md §7).

For a hypothesis y = y_1 .. y_L (``</s>`` included, as fairseq's positional scores) with, at each
step l, the predictive distribution p̄_l it was chosen from, its entropy H_l = H[p̄_l], the mutual
information I_l (:mod:`fairseq_acvi.mc_prediction.uncertainty`) and log p̄_l(y_l):

    mean_mi   = (1/L) Σ_l I_l           the chain-rule estimate of the sequence's mutual information
                                       (knowledge uncertainty; Malinin and Gales 2021, §3-4)
    max_mi    = max_l I_l               its most uncertain token (not in Malinin and Gales)
    entropy   = (1/L) Σ_l H_l           the chain-rule estimate of the sequence's total uncertainty
                                       (Malinin and Gales 2021)
    logprob   = (1/L) Σ_l log p̄_l(y_l)   the length-normalised log-probability; −logprob is
                                       Malinin and Gales' Monte-Carlo estimate of the sequence
                                       entropy from this one hypothesis (higher logprob = surer)

All in nats (the ``US-`` line of ``fairseq_acvi.cli.generate`` writes them in bits).
"""
from typing import Dict

import torch
from torch import Tensor

from fairseq_acvi.mc_prediction.uncertainty import ENTROPY, MUTUAL_INFORMATION

#: the names, in the order the ``US-`` line writes them
SCORES = ("mean_mi", "max_mi", "entropy", "logprob")


def sentence_scores(uncertainty: Tensor, positional_scores: Tensor) -> Dict[str, float]:
    """uncertainty: (L, ≥3) per-token rows (H[p̄], E H, I, ...) of one hypothesis, nats;
    positional_scores: (L,) log p̄_l(y_l), nats -> :data:`SCORES` as floats (nats)."""
    u = torch.as_tensor(uncertainty, dtype=torch.float64)
    lp = torch.as_tensor(positional_scores, dtype=torch.float64)
    if u.dim() != 2 or u.size(-1) < 3 or lp.shape != u.shape[:1] or u.size(0) == 0:
        raise ValueError(f"one row of uncertainties (L, 3) and one score (L,) per token needed, "
                         f"got {tuple(u.shape)} and {tuple(lp.shape)}")
    mi = u[:, MUTUAL_INFORMATION]
    return {"mean_mi": float(mi.mean()), "max_mi": float(mi.max()),
            "entropy": float(u[:, ENTROPY].mean()), "logprob": float(lp.mean())}
