"""How hard an attention is, read from its scores before the normaliser (docs/method.md §3.5).

Sparsemax's weights are exactly zero outside a support S, and inside it its Jacobian is
∂a/∂e = diag(1_S) − 1_S 1_Sᵀ / |S|: a step whose support is one source word (|S| = 1) sends **no
gradient at all** to the scores, whereas softmax's Jacobian diag(a) − a aᵀ is never exactly zero.
At uniform scores (a fresh model) sparsemax's Jacobian is N times softmax's (N source words).
These statistics say where a model sits between those two regimes:

* ``score_std``: the standard deviation of one step's scores over its real source positions
  (the scale that decides how hard both normalisers are);
* ``top_gap``: the largest score minus the second largest;
* ``sparsemax_support`` / ``support1_fraction``: the size of sparsemax's support of those scores
  and the fraction of steps with one word in it (steps that pass no gradient to the scorer);
* ``sparsemax_zero_fraction``: the fraction of real positions sparsemax gives exactly 0;
* ``softmax_max`` / ``softmax_entropy``: softmax's largest weight and its entropy (nats);
* ``top_is_last``: 1 where the largest score is at the last real source position (the text
  tasks' ``</s>``), so its mean is the fraction of steps that attend mostly to ``</s>``.

Each is computed for every (sentence, target step) row whatever normaliser the model was trained
with, so one model's scores can be read through both. Medians and means over rows.
Shapes: scores (B, T, N) or (rows, N) with −inf or any value at padding, pad_mask (B, N) or
(rows, N), True at padding.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

import torch
from torch import Tensor

from fairseq_acvi.modules.context.normalizers import last_real_position, sparse_normalize


def flatten_rows(scores: Tensor, pad_mask: Tensor) -> Tuple[Tensor, Tensor]:
    """(B, T, N) scores and (B, N) mask -> (B·T, N) float32 rows and their (B·T, N) mask; 2-D
    inputs are returned as they are (cast to float32)."""
    if scores.dim() == 3:
        B, T, N = scores.shape
        pad_mask = pad_mask.unsqueeze(1).expand(B, T, N).reshape(B * T, N)
        scores = scores.reshape(B * T, N)
    if scores.shape != pad_mask.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and pad_mask {tuple(pad_mask.shape)} differ")
    return scores.float(), pad_mask


def row_statistics(scores: Tensor, pad_mask: Tensor) -> Dict[str, Tensor]:
    """Per-row statistics (module docstring) of (rows, N) scores; rows need ≥ 1 real position.
    Both normalisers are the model's own (:func:`~fairseq_acvi.modules.context.normalizers.sparse_normalize`)."""
    real = ~pad_mask
    n_real = real.sum(-1)
    if bool((n_real == 0).any()):
        raise ValueError("a row of scores has no real source position")
    x = scores.masked_fill(pad_mask, float("-inf"))
    mean = scores.masked_fill(pad_mask, 0.0).sum(-1) / n_real
    var = ((scores - mean[:, None]).masked_fill(pad_mask, 0.0) ** 2).sum(-1) / n_real
    if x.size(-1) >= 2:
        top = x.topk(2, dim=-1).values
        gap = torch.where(n_real >= 2, top[:, 0] - top[:, 1], torch.full_like(top[:, 0], float("inf")))
    else:
        gap = torch.full((x.size(0),), float("inf"))
    sp = sparse_normalize("sparsemax", x, pad_mask)
    support = ((sp > 0) & real).sum(-1)
    sm = sparse_normalize("softmax", x, pad_mask)
    entropy = -(sm * sm.clamp_min(1e-30).log()).sum(-1)
    last = last_real_position(pad_mask).float().argmax(-1)
    return dict(score_std=var.sqrt(), top_gap=gap, sparsemax_support=support.float(),
                sparsemax_zero_fraction=((sp == 0) & real).sum(-1).float() / n_real,
                softmax_max=sm.max(-1).values, softmax_entropy=entropy,
                top_is_last=(x.argmax(-1) == last).float())


def summarize(batches: Iterable[Tuple[Tensor, Tensor]]) -> Dict[str, float]:
    """Pool the rows of (scores, pad_mask) pairs: the median and mean of each statistic,
    ``support1_fraction`` and ``rows``."""
    parts: Dict[str, list] = {}
    for scores, pad in batches:
        for key, value in row_statistics(*flatten_rows(scores, pad)).items():
            parts.setdefault(key, []).append(value)
    if not parts:
        raise ValueError("no scores to summarize")
    stats = {k: torch.cat(v) for k, v in parts.items()}
    out: Dict[str, float] = {"rows": int(stats["score_std"].numel())}
    for key, value in stats.items():
        finite = value[torch.isfinite(value)]
        out[f"{key}_median"] = float(finite.median()) if finite.numel() else float("nan")
        out[f"{key}_mean"] = float(finite.mean()) if finite.numel() else float("nan")
    out["support1_fraction"] = float((stats["sparsemax_support"] == 1).float().mean())
    return out
