"""The calibration report's Markdown table and pictures (reliability diagram, mutual information of
right and wrong tokens) from :mod:`fairseq_acvi.calibration_eval.measure`'s results.
"""
import math
import os
from typing import Dict, List, Optional

import numpy as np

from fairseq_acvi.charts import save_chart


def fmt(x, digits=3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _diff(d: Optional[dict]) -> str:
    if d is None:
        return "—"
    lo, hi = d["interval_95"]
    return f"{d['value']:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def markdown(results: Dict[str, dict], args) -> str:
    lines = [f"# Token-level calibration: {args.subset} of `{args.data}`", "",
             "Teacher-forced on the reference; a token is right when the argmax of p̄ is the "
             f"reference token. ECE over {args.bins} equal-width confidence bins. AUROC: how well "
             "the score ranks wrong tokens above right ones (0.5 = chance). I = mutual information "
             "(nats), shown only for models that average samples (K: samples averaged; 1: one "
             "distribution per step); \"within H deciles\": the AUROC of I among tokens of "
             "similar predictive entropy (what I adds to H[p̄]; 0.5 = nothing); ρ(H[p̄], I): "
             "Spearman's rank correlation of the two over the tokens. ECE − first: the "
             f"difference to the first model's ECE, with a 95 % interval over {args.bootstrap} "
             "resamples of the sentences (paired). Produced by "
             "`python -m fairseq_acvi.cli.calibration` (fairseq_acvi/cli/calibration.py).", "",
             "| model | K | tokens | accuracy | NLL/token | mean conf. | ECE | ECE − first [95 %] "
             "| AUROC 1−conf | AUROC H[p̄] | AUROC I | AUROC I within H deciles | mean I right "
             "| mean I wrong | ρ(H[p̄], I) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        a = r["auroc_wrong"]
        mi_ok = r["averages_samples"]
        lines.append(
            f"| {name} | {r['samples']} | {r['tokens']} | {r['accuracy']:.4f} | "
            f"{r['nll_per_token']:.4f} | {r['mean_confidence']:.4f} | {r['ece']:.4f} | "
            f"{_diff(r.get('ece_minus_first'))} | "
            f"{fmt(a['one_minus_confidence'])} | {fmt(a['entropy'])} | "
            f"{fmt(a['mutual_information'])} | "
            f"{fmt(a['mutual_information_within_entropy_deciles'])} | "
            f"{fmt(r['mean_mutual_information']['right'], 4) if mi_ok else '—'} | "
            f"{fmt(r['mean_mutual_information']['wrong'], 4) if mi_ok else '—'} | "
            f"{fmt(r['rank_correlation_entropy_mi'])} |")
    lines += ["", "![reliability diagram](reliability.png)", ""]
    if any(r["averages_samples"] for r in results.values()):
        lines += ["![mutual information of right and wrong tokens](mutual_information.png)", ""]
    lines.append("Models: " + ", ".join(f"{n} = `{p}`" for n, p in args.models) + ".")
    return "\n".join(lines) + "\n"


def plots(results: Dict[str, dict], stats: Dict[str, Dict[str, np.ndarray]], out_dir: str,
          title: str) -> List[str]:
    import logging
    logging.getLogger("matplotlib").setLevel(logging.WARNING)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, (ax, hx) = plt.subplots(2, 1, figsize=(5.5, 6.5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="perfect calibration")
    for name, r in results.items():
        bins = [b for b in r["bins"] if b["count"]]
        ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o",
                markersize=4, label=f"{name} (ECE {r['ece']:.3f})")
        centers = [(b["lo"] + b["hi"]) / 2 for b in r["bins"]]
        hx.plot(centers, [b["count"] / r["tokens"] for b in r["bins"]], marker=".", label=name)
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    hx.set_xlabel("confidence max_v p̄(v)")
    hx.set_ylabel("share of tokens")
    fig.tight_layout()
    path = save_chart(fig, os.path.join(out_dir, "reliability.png"), dpi=120)
    plt.close(fig)
    written.append(path)

    sampled = [n for n, r in results.items() if r["averages_samples"]]
    if sampled:
        fig, axes = plt.subplots(1, len(sampled), figsize=(5.5 * len(sampled), 3.8), squeeze=False)
        for ax, name in zip(axes[0], sampled):
            s = stats[name]
            ok = s["correct"].astype(bool)
            mi = np.maximum(s["mutual_information"], 1e-6)
            edges = np.logspace(-6, np.log10(mi.max() * 1.01), 40)
            for sel, label in ((ok, "right"), (~ok, "wrong")):
                ax.hist(mi[sel], bins=edges, alpha=0.6, weights=np.full(sel.sum(), 1 / sel.sum()),
                        label=f"{label} ({sel.sum()} tokens)")
            ax.set_xscale("log")
            a = results[name]["auroc_wrong"]["mutual_information"]
            ax.set_title(f"{name}: mutual information per token (AUROC {a:.3f})")
            ax.set_xlabel("I = H[p̄] − E_k H[p_k] (nats; below 1e-6 drawn at the left edge)")
            ax.set_ylabel("share of the right / wrong tokens")
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = save_chart(fig, os.path.join(out_dir, "mutual_information.png"), dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def write_outputs(results: Dict[str, dict], stats: Dict[str, Dict[str, np.ndarray]], args):
    with open(os.path.join(args.out_dir, "calibration.md"), "w") as f:
        f.write(markdown(results, args))
    for path in plots(results, stats, args.out_dir, f"{args.subset}: token-level reliability"):
        print("wrote", path)
    print("wrote", os.path.join(args.out_dir, "calibration.md"))
