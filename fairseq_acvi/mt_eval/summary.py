"""Runs grouped by pair and variant: mean ± std over seeds (finished runs only), and the seed-by-seed
paired differences between two variants.
"""
import statistics
from typing import Dict, List, Optional

from fairseq_acvi.mt_eval.runs import ABLATIONS, END_KL, pair_splits

#: the context inference every other variant is compared with, seed by seed, in the report
PAIRED_BASE = "soft"


def mean_std(values: List[float]) -> Optional[dict]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


def wps_device(rs: List[dict]) -> str:
    """The device whose runs give a variant's words/s: words/s of different devices do not
    average. The CPU when any run used it (the reference machine), else the most common one."""
    devices = [r["meta"].get("device", "cpu") for r in rs]
    return "cpu" if "cpu" in devices else max(sorted(set(devices)), key=devices.count)

def is_finished(run: dict) -> bool:
    """A run whose training ended (:func:`training_finished`); runs merged from a report written
    before this was recorded count as finished, as they did then."""
    return run.get("finished", True) is not False


def aggregate(runs: List[dict]) -> Dict[str, Dict[str, dict]]:
    """{pair: {variant: {metric: mean/std/n, "seeds": [...], "splits": [...]}}} over the seeds of
    a variant, of the finished runs only: a run stopped part-way would enter the means with its
    best epoch so far (the report lists it apart, and draws its curves). ``splits``: the pair's
    named splits (:func:`~fairseq_acvi.mt_eval.runs.pair_splits`); the BLEU, detok and chrF
    metrics are ``<split>_bleu_tok`` and so on for each."""
    groups: Dict[str, Dict[str, List[dict]]] = {}
    for r in filter(is_finished, runs):
        groups.setdefault(r["pair"], {}).setdefault(r["variant"], []).append(r)
    out: Dict[str, Dict[str, dict]] = {}
    for pair, variants in groups.items():
        splits = pair_splits(runs, pair)
        for variant, rs in variants.items():
            device = wps_device(rs)
            agg = {"seeds": sorted(r["seed"] for r in rs), "splits": splits,
                   "valid_ppl": mean_std([r.get("valid_ppl") for r in rs]),
                   "train_wps": mean_std([r.get("train_wps") for r in rs
                                          if r["meta"].get("device", "cpu") == device]),
                   "train_wps_device": device}
            for split in splits:
                for key in ("bleu_tok", "bleu_detok", "chrf"):
                    agg[f"{split}_{key}"] = mean_std([r["bleu"][split].get(key) for r in rs
                                                      if split in r["bleu"]])
            agg["replan"] = mean_std([r.get("replan") for r in rs])
            for ab in ABLATIONS:
                agg[f"ablate_{ab}_bleu_drop"] = mean_std(
                    [r["source_use"].get(ab, {}).get("bleu_drop") for r in rs])
                agg[f"ablate_{ab}_ppl_ratio"] = mean_std(
                    [r["source_use"].get(ab, {}).get("ppl_ratio") for r in rs])
            for k in END_KL:
                agg[f"end_{k}"] = mean_std([r.get("end", {}).get(k) for r in rs])
            ks = sorted({k for r in rs for s in r["mc_sweep"].values() for k in s})
            agg["mc_sweep"] = {s: {k: mean_std([r["mc_sweep"].get(s, {}).get(k) for r in rs])
                                   for k in ks}
                               for s in splits if any(s in r["mc_sweep"] for r in rs)}
            out.setdefault(pair, {})[variant] = agg
    return out


def base_candidates(runs: List[dict], pair: str) -> List[str]:
    """The variants of ``pair`` whose context inference is :data:`PAIRED_BASE` (``soft``,
    ``soft-e20``, …), sorted."""
    return sorted({r["variant"] for r in runs if r["pair"] == pair
                   and r.get("context", r["variant"].split("-")[0]) == PAIRED_BASE})


def paired_base(runs: List[dict], pair: str, chosen: Optional[str] = None) -> Optional[str]:
    """The variant of ``pair`` that the report's seed-by-seed table subtracts: ``chosen`` when
    given and present, else the pair's one :func:`base_candidates` variant; None when there is
    none or several (then only ``chosen`` can tell which)."""
    if chosen is not None:
        return chosen if any(r["pair"] == pair and r["variant"] == chosen for r in runs) else None
    candidates = base_candidates(runs, pair)
    return candidates[0] if len(candidates) == 1 else None


def paired(runs: List[dict], pair: str, base: str, other: str, split: str,
           key: str = "bleu_tok") -> Optional[dict]:
    """The score ``key`` (tokenised BLEU, or ``chrf``) of ``other`` minus ``base`` on ``split``,
    seed by seed over the seeds both have: mean ± std of the per-seed differences (a seed fixes
    the data order and initialisation of both, so the paired difference is less noisy than the
    difference of the means)."""
    def by_seed(variant):
        return {r["seed"]: r["bleu"][split][key] for r in filter(is_finished, runs)
                if r["pair"] == pair and r["variant"] == variant
                and r["bleu"].get(split, {}).get(key) is not None}
    a, b = by_seed(base), by_seed(other)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    return dict(mean_std([b[s] - a[s] for s in seeds]), seeds=seeds)


def compare(agg: dict, base: str, other: str, runs: Optional[List[dict]] = None) -> List[str]:
    """``other`` against ``base`` per pair: perplexity ratio, BLEU difference (and, given the
    runs, the per-seed paired difference), speed ratio."""
    lines = []
    for pair in sorted(agg):
        a, b = agg[pair].get(base), agg[pair].get(other)
        if a is None or b is None:
            continue

        def m(x, key):
            return x[key]["mean"] if x.get(key) else None
        parts = [f"[{pair}] {other} vs {base} (seeds {b['seeds']} vs {a['seeds']}):"]
        if m(a, "valid_ppl") and m(b, "valid_ppl"):
            parts.append(f"valid ppl {m(b, 'valid_ppl'):.2f} vs {m(a, 'valid_ppl'):.2f} "
                         f"(ratio {m(b, 'valid_ppl') / m(a, 'valid_ppl'):.3f})")
        for split in dict.fromkeys(a["splits"] + b["splits"]):
            ka = m(a, f"{split}_bleu_tok")
            kb = m(b, f"{split}_bleu_tok")
            if ka is not None and kb is not None:
                text = f"{split} BLEU {kb:.2f} vs {ka:.2f} ({kb - ka:+.2f}"
                d = paired(runs, pair, base, other, split) if runs else None
                if d is not None and d["n"] > 1:
                    text += f"; paired over seeds {d['seeds']}: {d['mean']:+.2f} ± {d['std']:.2f}"
                parts.append(text + ")")
            ca, cb = m(a, f"{split}_chrf"), m(b, f"{split}_chrf")
            if ca is not None and cb is not None:
                parts.append(f"{split} chrF {cb:.2f} vs {ca:.2f} ({cb - ca:+.2f})")
        if m(a, "train_wps") and m(b, "train_wps") and a["train_wps_device"] == b["train_wps_device"]:
            parts.append(f"train words/s ratio {m(b, 'train_wps') / m(a, 'train_wps'):.3f}")
        lines.append("  ".join(parts))
    return lines
