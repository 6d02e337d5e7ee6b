"""Token-level calibration and error detection on reference translations (docs/uncertainty.md).

Usage (from the repository root)::

    python -m fairseq_acvi.cli.calibration --data data-bin/multi30k_en_de --subset valid \\
        --model soft=runs/multi30k/en_de/soft-e20_seed2/checkpoint_best.pt \\
        --model acvi=runs/multi30k/en_de/acvi-b1e-4-d234-wu117-e20_seed2/checkpoint_best.pt \\
        --mc-samples 10 --out-dir runs/calibration/valid

Every model reads the reference translations of ``--subset`` teacher-forced (one pass, no beam
search): at every target position t it predicts p̄_t (the K-sample average for ACVI, D 88), and
the position counts as *right* when argmax p̄_t is the reference token. Per token the command keeps
the confidence max_v p̄_t(v), H[p̄_t], E_k H[p_t^(k)] and the mutual information I_t (the decoder's
``extra["uncertainty"]``, :mod:`fairseq_acvi.mc_prediction.uncertainty`). It reports per model:

* accuracy, NLL of the reference per token, mean confidence;
* ECE over ``--bins`` equal-width confidence bins, and the reliability diagram of all models
  (``reliability.png``);
* each model's ECE minus the first model's, with a 95 % interval over resamples of the sentences
  (``--bootstrap``, paired);
* AUROC of "this score flags a wrong token" for 1 − confidence, H[p̄] and I (I only for models
  that average samples; with one distribution per step I = 0 carries no signal), the AUROC of I
  within the deciles of H[p̄] (what I adds to the entropy), the mean I over right and over wrong
  tokens and Spearman's ρ between H[p̄] and I; ``mutual_information.png`` shows I for right and
  wrong tokens.

Ensembles and Monte-Carlo dropout (docs/uncertainty.md §6): ``--model NAME=a.pt:b.pt`` averages
the checkpoints' distributions in probability space (as ``fairseq-generate --path a.pt:b.pt``)
and ``--mc-dropout NAME=K`` gives the model NAME K dropout chains (``--mc-dropout-rate P``: their
dropout probability instead of the model's own); their numbers are over all members × context
samples, and the members' part of I (``members_mutual_information``) is kept beside them.

Outputs in ``--out-dir``: ``calibration.json`` (everything above, with the bins), ``calibration.md``
(the table) and the two PNGs (matplotlib, ``pip install -e .[eval]``); with ``--save-tokens`` the
per-token arrays (``tokens_NAME.npz``), from which ``--render-only`` redraws the table and PNGs.
"""
import argparse
import json
import math
import os
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from fairseq_acvi.metrics.calibration import (auroc, bootstrap_interval,
                                              expected_calibration_error, rank_correlation,
                                              reliability_bins, stratified_auroc)
from fairseq_acvi.modules.seq2seq.mc_dropout import check_members, check_rate, wrap_mc_dropout
from fairseq_acvi.mc_prediction.combination import average_members
from fairseq_acvi.mc_prediction.uncertainty import (ENTROPY, EXPECTED_ENTROPY,
                                              MEMBERS_MUTUAL_INFORMATION, MUTUAL_INFORMATION,
                                              combine_members)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="data-bin folder the models were trained on")
    p.add_argument("--subset", default="valid", help="fairseq subset name (valid, test, test1)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=CHECKPOINT[:CHECKPOINT…]",
                   help="a model to evaluate (repeat the option for each); several checkpoints "
                        "joined by ':' are an ensemble")
    p.add_argument("--mc-samples", type=int, default=10, help="K for models that sample (ACVI)")
    p.add_argument("--mc-dropout", action="append", default=[], metavar="NAME=K",
                   help="Monte-Carlo dropout for the model NAME: K dropout chains averaged "
                        "(docs/uncertainty.md §6; repeat for each model)")
    p.add_argument("--mc-dropout-rate", type=float, default=None, metavar="P",
                   help="the dropout probability of the --mc-dropout chains (default: each "
                        "model's own)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    p.add_argument("--max-sentences", type=int, default=None, help="only the first N sentences")
    p.add_argument("--bins", type=int, default=15, help="confidence bins of the ECE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="sentence resamples for the interval of each model's ECE minus the first "
                        "model's")
    p.add_argument("--render-only", action="store_true",
                   help="redo calibration.md and the PNGs from --out-dir's calibration.json and "
                        "tokens_NAME.npz (written with --save-tokens); no model is run")
    p.add_argument("--save-tokens", action="store_true",
                   help="also write the per-token arrays of every model (tokens_NAME.npz)")
    return p


def parse_models(specs: List[str]) -> List[Tuple[str, str]]:
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--model takes NAME=CHECKPOINT, got {spec!r}")
        out.append((name, path))
    if len({n for n, _ in out}) != len(out):
        raise ValueError("--model names must be distinct")
    return out


def parse_mc_dropout(specs: List[str], names: List[str]) -> Dict[str, int]:
    """``--mc-dropout NAME=K`` options -> {NAME: K}, NAME one of the ``--model`` names."""
    out = {}
    for spec in specs:
        name, sep, k = spec.partition("=")
        if not sep or name not in names or not k.isdigit():
            raise ValueError(f"--mc-dropout takes NAME=K with NAME one of the --model names "
                             f"({', '.join(names)}) and K a whole number, got {spec!r}")
        out[name] = check_members(int(k))
    return out


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


def _fmt(x, digits=3) -> str:
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
            f"{_fmt(a['one_minus_confidence'])} | {_fmt(a['entropy'])} | "
            f"{_fmt(a['mutual_information'])} | "
            f"{_fmt(a['mutual_information_within_entropy_deciles'])} | "
            f"{_fmt(r['mean_mutual_information']['right'], 4) if mi_ok else '—'} | "
            f"{_fmt(r['mean_mutual_information']['wrong'], 4) if mi_ok else '—'} | "
            f"{_fmt(r['rank_correlation_entropy_mi'])} |")
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
    path = os.path.join(out_dir, "reliability.png")
    fig.savefig(path, dpi=120)
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
        path = os.path.join(out_dir, "mutual_information.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def write_outputs(results: Dict[str, dict], stats: Dict[str, Dict[str, np.ndarray]], args):
    with open(os.path.join(args.out_dir, "calibration.md"), "w") as f:
        f.write(markdown(results, args))
    for path in plots(results, stats, args.out_dir, f"{args.subset}: token-level reliability"):
        print("wrote", path)
    print("wrote", os.path.join(args.out_dir, "calibration.md"))


def render_only(args):
    with open(os.path.join(args.out_dir, "calibration.json")) as f:
        report = json.load(f)
    args.data, args.subset, args.bins = report["data"], report["subset"], report["bins"]
    args.bootstrap = report.get("bootstrap_resamples", args.bootstrap)
    args.models = [(n, r["checkpoint"]) for n, r in report["models"].items()]
    stats = {}
    for name in report["models"]:
        with np.load(os.path.join(args.out_dir, f"tokens_{name}.npz")) as z:
            stats[name] = {k: z[k] for k in z.files}
    write_outputs(report["models"], stats, args)
    return report


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.render_only:
        return render_only(args)
    if not args.data or not args.model:
        raise SystemExit("--data and at least one --model are required (or --render-only)")
    args.models = parse_models(args.model)
    mc = parse_mc_dropout(args.mc_dropout, [n for n, _ in args.models])
    rate = check_rate(args.mc_dropout_rate)
    torch.set_num_threads(args.threads)
    import fairseq_acvi  # noqa: F401  (registers the models)
    from fairseq import checkpoint_utils

    os.makedirs(args.out_dir, exist_ok=True)
    results, stats = {}, {}
    for name, path in args.models:
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
            path.split(":"), arg_overrides={"data": args.data, "mc_samples": args.mc_samples})
        task.load_dataset(args.subset)
        # K where the context inference samples (ACVI), else 1 (one distribution per step), times
        # the members: the checkpoints and the dropout chains
        samples = len(models) * mc.get(name, 1) * (
            getattr(getattr(models[0].decoder, "context", None), "mc_samples", None) or 1)
        if name in mc:
            models = [wrap_mc_dropout(m, mc[name], rate) for m in models]
        torch.manual_seed(args.seed)
        stats[name] = token_statistics(models, task, args.subset, args.batch_size,
                                       args.max_sentences)
        results[name] = summarize(stats[name], args.bins, samples)
        if args.save_tokens:
            np.savez_compressed(os.path.join(args.out_dir, f"tokens_{name}.npz"), **stats[name])
        r = results[name]
        print(f"{name}: {r['tokens']} tokens, accuracy {r['accuracy']:.4f}, ECE {r['ece']:.4f}, "
              f"AUROC H {_fmt(r['auroc_wrong']['entropy'])}, "
              f"AUROC I {_fmt(r['auroc_wrong']['mutual_information'])}", flush=True)
    base = args.models[0][0]
    for name, _ in args.models[1:]:
        results[name]["ece_minus_first"] = ece_difference(stats[name], stats[base], args.bins,
                                                          args.bootstrap, args.seed)
    report = {"data": args.data, "subset": args.subset, "bins": args.bins, "seed": args.seed,
              "mc_dropout": mc, "mc_dropout_rate": rate,
              "max_sentences": args.max_sentences, "bootstrap_resamples": args.bootstrap,
              "models": {n: dict(results[n], checkpoint=p) for n, p in args.models}}
    with open(os.path.join(args.out_dir, "calibration.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_outputs(results, stats, args)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
