"""Token-level calibration measured on reference translations (docs/uncertainty.md §4): every
model (or the equal-weight average of several) reads the references teacher-forced, and per
token the confidence, the uncertainty decomposition and whether the argmax is right are kept
(:func:`token_statistics`); :func:`summarize` turns them into accuracy, NLL, ECE with its
reliability bins, AUROCs of wrong-token detection and the mutual information's share;
:func:`ece_difference` is a model's ECE minus another's with a paired bootstrap interval.
"""
from typing import Dict, Optional, Tuple

import numpy as np
import torch

from fairseq_acvi.mc_prediction.combination import average_members
from fairseq_acvi.mc_prediction.uncertainty import (ENTROPY, EXPECTED_ENTROPY,
                                                    MEMBERS_MUTUAL_INFORMATION, MUTUAL_INFORMATION,
                                                    combine_members)
from fairseq_acvi.metrics.calibration import (auroc, bootstrap_interval,
                                              expected_calibration_error, rank_correlation,
                                              reliability_bins, stratified_auroc)


def predict(models, net_input: Dict) -> Tuple[torch.Tensor, torch.Tensor]:
    """Teacher-forced prediction of one model or the equal-weight average of several (their
    decoders recording their uncertainty): (log p̄ (B, T, V) float32, uncertainty (B, T, 3 or 4)),
    the 4th column being the members' part of I (:func:`combine_members`)."""
    outs = [m(**net_input) for m in models]
    if len(outs) == 1:
        return outs[0][0].float(), outs[0][1]["uncertainty"]
    lp = torch.stack([o[0].float() for o in outs], dim=-2)                   # (B, T, M, V)
    mean = average_members(lp)
    rows = [o[1]["uncertainty"] for o in outs]
    width = max(r.size(-1) for r in rows)
    rows = [torch.nn.functional.pad(r, (0, width - r.size(-1))) for r in rows]
    return mean, combine_members(lp, mean, torch.stack(rows, dim=-2))


def token_statistics(model, task, subset: str, batch_size: int,
                     max_sentences: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Teacher-forced per-token statistics of ``subset``: arrays over the n reference tokens
    (``</s>`` included, padding left out): sentence (its index in the subset), confidence,
    correct, gold_logprob, entropy, expected_entropy, mutual_information,
    members_mutual_information (nats; 0 for one model without MC dropout). ``model``: a model or
    a list of them (an ensemble)."""
    models = model if isinstance(model, (list, tuple)) else [model]
    dataset = task.dataset(subset)
    n = len(dataset) if max_sentences is None else min(max_sentences, len(dataset))
    cols = {k: [] for k in ("sentence", "confidence", "correct", "gold_logprob", "entropy",
                            "expected_entropy", "mutual_information",
                            "members_mutual_information")}
    pad = task.target_dictionary.pad()
    for m in models:
        m.eval()
        m.decoder.record_uncertainty = True
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                sample = dataset.collater([dataset[i] for i in range(start, min(n, start + batch_size))])
                lprobs, u = predict(models, sample["net_input"])
                target = sample["target"]
                keep = target.ne(pad)                                     # (B, T)
                lp = lprobs[keep]                                         # (n_tok, V)
                tgt = target[keep]
                top_lp, top = lp.max(-1)
                u = u[keep]                                               # (n_tok, 3 or 4)
                cols["sentence"].append(sample["id"][:, None].expand_as(target)[keep])
                cols["confidence"].append(top_lp.exp())
                cols["correct"].append(top.eq(tgt))
                cols["gold_logprob"].append(lp.gather(-1, tgt[:, None]).squeeze(-1))
                cols["entropy"].append(u[:, ENTROPY])
                cols["expected_entropy"].append(u[:, EXPECTED_ENTROPY])
                cols["mutual_information"].append(u[:, MUTUAL_INFORMATION])
                cols["members_mutual_information"].append(
                    u[:, MEMBERS_MUTUAL_INFORMATION] if u.size(-1) > MEMBERS_MUTUAL_INFORMATION
                    else torch.zeros_like(u[:, 0]))
    finally:
        for m in models:
            m.decoder.record_uncertainty = False
    return {k: torch.cat(v).numpy() for k, v in cols.items()}


def summarize(stats: Dict[str, np.ndarray], n_bins: int, samples: int) -> dict:
    """The report of one model (module docstring) from :func:`token_statistics`."""
    ok = stats["correct"].astype(bool)
    wrong = ~ok
    mi = stats["mutual_information"]
    has_samples = bool((mi > 0).any())          # one distribution per step: I = 0 everywhere
    bins = reliability_bins(stats["confidence"], ok, n_bins)
    return {
        "samples": samples,
        "averages_samples": has_samples,
        "tokens": int(ok.size),
        "accuracy": float(ok.mean()),
        "nll_per_token": float(-stats["gold_logprob"].mean()),
        "mean_confidence": float(stats["confidence"].mean()),
        "ece": expected_calibration_error(stats["confidence"], ok, n_bins),
        "auroc_wrong": {
            "one_minus_confidence": auroc(1.0 - stats["confidence"], wrong),
            "entropy": auroc(stats["entropy"], wrong),
            "expected_entropy": auroc(stats["expected_entropy"], wrong) if has_samples else None,
            "mutual_information": auroc(mi, wrong) if has_samples else None,
            "members_mutual_information": (
                auroc(stats["members_mutual_information"], wrong)
                if "members_mutual_information" in stats
                and bool((stats["members_mutual_information"] > 0).any()) else None),
            # what I adds to H[p̄]: its AUROC within the deciles of H[p̄] (0.5: nothing)
            "mutual_information_within_entropy_deciles": (
                stratified_auroc(mi, wrong, stats["entropy"], 10) if has_samples else None),
        },
        "mean_entropy": {"right": float(stats["entropy"][ok].mean()),
                         "wrong": float(stats["entropy"][wrong].mean())},
        "mean_mutual_information": {"right": float(mi[ok].mean()), "wrong": float(mi[wrong].mean())},
        # does I say something H[p̄] does not? (Spearman's ρ over the tokens)
        "rank_correlation_entropy_mi": (rank_correlation(stats["entropy"], mi)
                                        if has_samples else None),
        "bins": [b.__dict__ for b in bins],
    }


def ece_difference(stats: Dict[str, np.ndarray], first: Dict[str, np.ndarray], n_bins: int,
                   n_resamples: int, seed: int) -> dict:
    """ECE of a model minus that of the first model on the same tokens, and its 95 % interval
    over sentences drawn with replacement (paired: the same draws for both)."""
    if not np.array_equal(stats["sentence"], first["sentence"]):
        raise ValueError("the models did not read the same tokens")

    def diff(idx):
        return (expected_calibration_error(stats["confidence"][idx], stats["correct"][idx], n_bins)
                - expected_calibration_error(first["confidence"][idx], first["correct"][idx],
                                             n_bins))
    everything = np.arange(len(stats["sentence"]))
    lo, hi = bootstrap_interval(diff, stats["sentence"], n_resamples, seed=seed)
    return {"value": float(diff(everything)), "interval_95": [lo, hi]}
