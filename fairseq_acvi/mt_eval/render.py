"""The translation report's outputs: ``report.md`` (the tables) and the PNG charts."""
import logging
import os
import re
import sys
from typing import Dict, List, Optional

from fairseq_acvi.charts import save_chart
from fairseq_acvi.mt_eval.runs import ABLATIONS, pair_splits
from fairseq_acvi.mt_eval.summary import (PAIRED_BASE, base_candidates, is_finished, paired,
                                           paired_base)


def fmt(ms: Optional[dict], digits: int = 2) -> str:
    if ms is None:
        return "–"
    if ms["n"] == 1:
        return f"{ms['mean']:.{digits}f}"
    return f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def _num(v, digits=2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def variant_order(variants) -> List[str]:
    rank = {"lstm": 0, "none": 1, "soft": 2, "acvi": 3, "structured": 4, "variational": 5, "ved": 6,
            "pag": 7, "rpag": 8}
    return sorted(variants, key=lambda v: (rank.get(v.split("-")[0], 9), v))


def _decode_name(gen_file: str) -> str:
    """``gen_valid_K0.txt`` -> ``valid_K0`` (the recipe's decode names); other names as given."""
    m = re.fullmatch(r"gen_(.+)\.txt", os.path.basename(gen_file))
    return m.group(1) if m else gen_file


def own_corpus(runs: List[dict]) -> bool:
    """Whether any run names its own splits (recipes/mt_parallel.sh on a user's corpus) rather
    than being a Multi30K run (recipes/mt_multi30k.sh, whose run.json lists none)."""
    return any(r["meta"].get("splits") for r in runs)


def default_title(runs: List[dict]) -> str:
    """``Multi30K translation`` for Multi30K runs, ``Translation`` once any run is of another corpus."""
    return "Translation" if own_corpus(runs) else "Multi30K translation"


def markdown(runs: List[dict], agg: dict, title: str, base: Optional[str] = None) -> str:
    """The report's tables. ``base``: the variant subtracted seed by seed (``--paired-base``;
    default: the pair's one ``soft`` variant, :func:`~fairseq_acvi.mt_eval.summary.paired_base`).
    Each pair's columns are its named splits (:func:`~fairseq_acvi.mt_eval.runs.pair_splits`)."""
    bleu_text = ("BLEU: sacreBLEU without tokenisation (`tokenize=none`) on the output as written, "
                 "against the data's `raw/` references; detok: sacreBLEU's standard 13a tokenisation of "
                 "the same text (Moses-detokenised first where the recipe's MOSES_DETOK asked)."
                 if own_corpus(runs) else
                 "BLEU: tokenised, lower-cased (as published Multi30K baselines); detok: sacreBLEU on "
                 "Moses-detokenised text.")
    lines = [f"# {title}", "",
             bleu_text + " Valid ppl: 2^(likelihood loss) of the best epoch (ACVI: the "
             "likelihood term only, averaged over the run's --mc-samples K, 10 by default). Mean ± "
             "std over seeds (n = seeds). Train words/s: a run's median over epochs, averaged over "
             "the variant's CPU runs only (the device is named when a variant has none).", ""]
    for pair in sorted(agg):
        splits = pair_splits(runs, pair)
        tests = [s for s in splits if s != "valid"]
        columns = ["valid ppl"] + [f"{s} BLEU" for s in splits] + [f"{s} detok" for s in tests]
        lines += [f"## {pair}", "",
                  "| variant | seeds | " + " | ".join(columns) + " | train words/s |",
                  "|---|---|" + "---|" * (len(columns) + 1)]
        for v in variant_order(agg[pair]):
            a = agg[pair][v]
            cells = ([fmt(a["valid_ppl"])] + [fmt(a.get(f"{s}_bleu_tok")) for s in splits]
                     + [fmt(a.get(f"{s}_bleu_detok")) for s in tests])
            lines.append(f"| {v} | {len(a['seeds'])} | " + " | ".join(cells) + f" | {fmt(a['train_wps'], 0)}"
                         f"{'' if a['train_wps_device'] == 'cpu' else ' (' + a['train_wps_device'] + ')'} |")
        lines += _chrf_and_planning(agg[pair], splits)
        stopped = [r for r in runs if r["pair"] == pair and not is_finished(r)]
        if stopped:
            lines += ["", "Not in the means (training unfinished: stopped part-way or still running; "
                      "best validation perplexity so far): " + "; ".join(
                          _unfinished(r) for r in sorted(stopped, key=lambda r: (r["variant"], r["seed"])))
                      + "."]
        ablated = [v for v in variant_order(agg[pair])
                   if any(agg[pair][v][f"ablate_{ab}_{m}"] is not None
                          for ab in ABLATIONS for m in ("bleu_drop", "ppl_ratio"))]
        if ablated:
            lines += ["", "Source use (validation; the context replaced by zeros / by another "
                      "sentence's): BLEU lost and perplexity ratio.", "",
                      "| variant | BLEU lost (zero) | BLEU lost (shuffle) | ppl × (zero) | ppl × (shuffle) |",
                      "|---|---|---|---|---|"]
        for v in ablated:
            a = agg[pair][v]
            lines.append(f"| {v} | {fmt(a['ablate_zero_bleu_drop'])} | "
                         f"{fmt(a['ablate_shuffle_bleu_drop'])} | {fmt(a['ablate_zero_ppl_ratio'])} | "
                         f"{fmt(a['ablate_shuffle_ppl_ratio'])} |")
        kl_rows = [v for v in variant_order(agg[pair]) if agg[pair][v]["end_kl"] is not None]
        if kl_rows:
            lines += ["", "Latent context at the best epoch (validation, per target token, nats): "
                      "KL = mean part ½‖m‖² + variance part ½Σ(v − 1 − log v); v = Σᵢ aᵢ²σ²(hᵢ), "
                      "the variance of the context's posterior, averaged over its dimensions.", "",
                      "KL objective: the term in the loss (before β), ≥ KL under free bits.", "",
                      "| variant | KL | KL objective | mean part | variance part | ‖m‖² | mean v |",
                      "|---|---|---|---|---|---|---|"]
            for v in kl_rows:
                a = agg[pair][v]
                lines.append(f"| {v} | {fmt(a['end_kl_true'])} | {fmt(a['end_kl'])} | "
                             f"{fmt(a['end_kl_mean_part'])} | "
                             f"{fmt(a['end_kl_var_part'])} | {fmt(a['end_ctx_norm2'])} | "
                             f"{fmt(a['end_ctx_var'], 4)} |")
        sweep_rows = [v for v in variant_order(agg[pair]) if agg[pair][v]["mc_sweep"]]
        if sweep_rows:
            lines += ["", "Monte-Carlo sweep (BLEU against the number K of context samples "
                      "averaged at decoding; K = 0: the mean context).", ""]
            for v in sweep_rows:
                for split, by_k in agg[pair][v]["mc_sweep"].items():
                    ks = sorted(by_k)
                    lines += [f"| {v} {split} | " + " | ".join(f"K={k}" for k in ks) + " |",
                              "|---|" + "---|" * len(ks),
                              "| BLEU | " + " | ".join(fmt(by_k[k]) for k in ks) + " |", ""]
        boot = [(r, name, b["paired"]) for r in sorted(
                    (r for r in runs if r["pair"] == pair),
                    key=lambda r: (variant_order([r["variant"]])[0], r["variant"], r["seed"]))
                for name, b in sorted(r["bleu"].items()) if isinstance(b.get("paired"), dict)]
        if boot:
            lines += ["", "Paired bootstrap, run by run (`score_mt.py --against`): a decode's "
                      "tokenised BLEU minus another decode's of the same model on the same sentences, "
                      "the sentences resampled with replacement; interval: percentiles; better in: "
                      "the share of resamples where the decode wins.", "",
                      "| variant | seed | decode | against | BLEU difference | interval | better in |",
                      "|---|---|---|---|---|---|---|"]
            for r, name, d in boot:
                lines.append(f"| {r['variant']} | {r['seed']} | {name} | "
                             f"{_decode_name(d.get('against', '?'))} | {d['delta']:+.2f} | "
                             f"{100 * d.get('level', 0.95):.0f}%: {d['low']:+.2f} to {d['high']:+.2f} | "
                             f"{100 * d['p_other_better']:.1f}% of {d['n_resamples']} |")
        pb = paired_base(runs, pair, base)
        any_paired = False
        for key, name in (("bleu_tok", "BLEU"), ("chrf", "chrF")):
            paired_rows = _paired_rows(runs, agg[pair], pair, pb, key, splits)
            if paired_rows:
                any_paired = True
                lines += ["", f"{name} minus `{pb}`'s, seed by seed (a seed fixes the data order, "
                          "and the plugin's variants also start from the same weights), mean ± std over "
                          "the seeds both have:", "",
                          "| variant | seeds | " + " | ".join(splits) + " |", "|---|---|" + "---|" * len(splits)]
                lines += paired_rows
        if not any_paired and base is None and len(candidates := base_candidates(runs, pair)) > 1:
            lines += ["", f"(No seed-by-seed table: several `{PAIRED_BASE}` variants "
                      f"({', '.join(candidates)}); `--paired-base` chooses one.)"]
        lines += ["", "Runs:", "",
                  "| variant | seed | parameters | best epoch / trained | valid ppl | "
                  + "".join(f"{s} | " for s in tests) + "wall (s) | device | date | extra train args |",
                  "|---|---|---|---|---|" + "---|" * len(tests) + "---|---|---|---|"]
        for r in sorted((r for r in runs if r["pair"] == pair),
                        key=lambda r: (variant_order([r["variant"]])[0], r["variant"], r["seed"])):
            b = r["bleu"]
            lines.append(
                f"| {r['variant']} | {r['seed']} | "
                f"{'–' if r.get('parameters') is None else format(r['parameters'], ',')} | "
                f"{r.get('best_epoch', '–')} / "
                f"{r.get('epochs_trained', '–')}{'' if is_finished(r) else ' (unfinished)'} | "
                f"{_num(r.get('valid_ppl'))} | "
                + "".join(f"{_num(b.get(s, {}).get('bleu_tok'))} | " for s in tests) +
                f"{_num(r.get('train_wall_s'), 0)} | {r['meta'].get('device', 'cpu')} | "
                f"{r['meta'].get('date', '–')} | "
                f"`{r['meta'].get('extra_train_args', '') or '–'}` |")
        sigs = sorted({b["sacrebleu_signature"] for r in runs if r["pair"] == pair
                       for b in r["bleu"].values() if "sacrebleu_signature" in b})
        if sigs:
            lines += ["", "sacreBLEU signature(s): " + ", ".join(f"`{s}`" for s in sigs)]
        lines.append("")
    return "\n".join(lines) + "\n"


def _chrf_and_planning(by_variant: Dict[str, dict], splits: List[str]) -> List[str]:
    """The chrF table (character targets, recipes/mt_pag.sh) with the share of validation steps
    whose plan was recomputed (PAG / rPAG), a column per split; nothing when no variant has either."""
    rows = [v for v in variant_order(by_variant)
            if by_variant[v]["replan"] is not None
            or any(by_variant[v].get(f"{s}_chrf") is not None for s in splits)]
    if not rows:
        return []
    lines = ["", "chrF (sacreBLEU, character 6-grams, β = 2, on the output turned back into words) "
             "and the plan recomputed: the share of validation decoder steps (teacher-forced, the "
             "switch by argmax) whose alignment plan was recomputed, at the best epoch (PAG / rPAG).", "",
             "| variant | seeds | " + "".join(f"{s} chrF | " for s in splits) + "plan recomputed |",
             "|---|---|" + "---|" * (len(splits) + 1)]
    for v in rows:
        a = by_variant[v]
        replan = a["replan"]
        replan_text = "–" if replan is None else fmt(
            {**replan, "mean": 100 * replan["mean"], "std": 100 * replan["std"]}, 1) + " %"
        lines.append(f"| {v} | {len(a['seeds'])} | " + "".join(f"{fmt(a.get(f'{s}_chrf'))} | " for s in splits)
                     + f"{replan_text} |")
    return lines


def _paired_rows(runs: List[dict], by_variant: Dict[str, dict], pair: str, pb: Optional[str],
                 key: str, splits: List[str]) -> List[str]:
    """Rows of the seed-by-seed table of score ``key`` minus the base variant ``pb``'s, a column per split."""
    rows = []
    for v in variant_order(by_variant) if pb in by_variant else []:
        if v == pb:
            continue
        diffs = {split: paired(runs, pair, pb, v, split, key) for split in splits}
        if any(d is not None for d in diffs.values()):
            seeds = sorted({s for d in diffs.values() if d for s in d["seeds"]})
            rows.append(f"| {v} | {', '.join(map(str, seeds))} | "
                        + " | ".join(fmt(diffs[s]) for s in splits) + " |")
    return rows


def charts(runs: List[dict], agg: dict, out_dir: str) -> List[str]:
    try:
        logging.getLogger("matplotlib").setLevel(logging.WARNING)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("[mt_report] matplotlib missing: no charts", file=sys.stderr)
        return []
    written = []
    pairs = sorted(agg)

    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 3.6), squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        vs = variant_order(agg[pair])
        tests = [s for s in pair_splits(runs, pair) if s != "valid"] or ["valid"]
        width = 0.8 / len(tests)
        for j, split in enumerate(tests):
            ys = [agg[pair][v].get(f"{split}_bleu_tok") for v in vs]
            ax.bar([i + width * j for i in range(len(vs))], [y["mean"] if y else 0 for y in ys],
                   width, yerr=[y["std"] if y else 0 for y in ys], capsize=3, label=split)
        ax.set_xticks([i + width * (len(tests) - 1) / 2 for i in range(len(vs))], vs, rotation=30,
                      ha="right", fontsize=8)
        ax.set_ylabel("BLEU (tok., lower-cased)")
        ax.set_title(pair)
        ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, out_dir, "bleu.png", plt))

    fig, axes = plt.subplots(1, len(pairs), figsize=(5 * len(pairs), 3.6), squeeze=False)
    for ax, pair in zip(axes[0], pairs):
        for r in sorted((r for r in runs if r["pair"] == pair), key=lambda r: (r["variant"], r["seed"])):
            pts = [(e["epoch"], e["valid_ppl"]) for e in r["epochs"] if e["valid_ppl"]]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=f"{r['variant']} s{r['seed']}")
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation perplexity")
        ax.set_title(pair)
        ax.legend(fontsize=6)
    fig.tight_layout()
    written.append(_save(fig, out_dir, "valid_curves.png", plt))

    acvi = [r for r in runs if any("kl" in e for e in r["epochs"])]
    if acvi:
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
        for r in sorted(acvi, key=lambda r: (r["pair"], r["variant"], r["seed"])):
            label = f"{r['pair']} {r['variant']} s{r['seed']}"
            ep = [e["epoch"] for e in r["epochs"] if "kl" in e]
            axes[0].plot(ep, [e["kl_mean_part"] for e in r["epochs"] if "kl" in e], marker=".", label=label)
            axes[1].plot(ep, [e["kl_var_part"] for e in r["epochs"] if "kl" in e], marker=".", label=label)
            axes[2].plot(ep, [e["ctx_var"] for e in r["epochs"] if "kl" in e], marker=".", label=label)
        for ax, name in zip(axes, ("KL mean part ½‖m‖² (nats/token)", "KL variance part (nats/token)",
                                   "mean posterior variance v")):
            ax.set_xlabel("epoch")
            ax.set_ylabel(name)
            ax.set_yscale("log")
        axes[0].legend(fontsize=6)
        fig.tight_layout()
        written.append(_save(fig, out_dir, "kl_curves.png", plt))

    sweep = [(pair, v) for pair in pairs for v in variant_order(agg[pair]) if agg[pair][v]["mc_sweep"]]
    if sweep:
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for pair, v in sweep:
            for split, by_k in agg[pair][v]["mc_sweep"].items():
                ks = sorted(k for k in by_k if by_k[k])
                ax.errorbar(ks, [by_k[k]["mean"] for k in ks], yerr=[by_k[k]["std"] for k in ks],
                            marker="o", capsize=3, label=f"{pair} {v} {split}")
        ax.set_xlabel("K (context samples at decoding)")
        ax.set_ylabel("BLEU")
        ax.legend(fontsize=6)
        fig.tight_layout()
        written.append(_save(fig, out_dir, "mc_sweep.png", plt))
    return written


def _save(fig, out_dir, name, plt) -> str:
    path = os.path.join(out_dir, name)
    save_chart(fig, path, dpi=110)
    plt.close(fig)
    return path


def _unfinished(r: Dict) -> str:
    """'VARIANT seed S at epoch E (PPL)' of an unfinished run, or '… before its first epoch ended'."""
    if not r.get("epochs_trained"):
        return f"{r['variant']} seed {r['seed']} before its first epoch ended"
    return f"{r['variant']} seed {r['seed']} at epoch {r['epochs_trained']} ({_num(r.get('valid_ppl'))})"
