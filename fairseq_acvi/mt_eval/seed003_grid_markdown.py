"""Markdown of seed 003's Table 1 beside the attention grid: :func:`markdown` writes the dict that
:func:`fairseq_acvi.mt_eval.seed003_grid.build` returns (grid.md of
fairseq_acvi/cli/attention_grid_report.py; docs/method.md §3.6).
"""
from typing import List, Optional, Sequence

from fairseq_acvi.metrics.bleu import format_interval
from fairseq_acvi.mt_eval.render import fmt
from fairseq_acvi.mt_eval.runs import SPLITS
from fairseq_acvi.mt_eval.seed003_grid import (SCORERS, SEED_SET_NAMES, SEED_SETS, TESTS,
                                               seed_difference)


def ms_text(ms: Optional[dict], missing: str = "not run") -> str:
    """``31.20 ± 0.40 (n=3)``; ``31.20 (n=1)``; ``missing`` for None."""
    return missing if ms is None else f"{fmt(ms)} (n={ms['n']})"


def _cell_texts(ours: dict, keys: Sequence[str]) -> List[str]:
    if ours["status"] != "run":
        text = ("unfinished (seeds " + ", ".join(map(str, ours["unfinished"])) + ")"
                if ours["status"] == "unfinished" else "not run")
        return [text] * len(keys)
    return [ms_text(ours[k], "not decoded" if k != "valid_ppl" else "–") for k in keys]


def _yes_no(b: Optional[bool]) -> str:
    return "–" if b is None else ("yes" if b else "no")


def _seed_difference_text(d: Optional[dict]) -> str:
    """``+1.20 ± 0.30 (seeds 1, 2, 3)`` of a seed-by-seed difference (:func:`paired`); – for None."""
    return "–" if d is None else f"{d['mean']:+.2f} ± {d['std']:.2f} (seeds " + ", ".join(map(str, d["seeds"])) + ")"


def _decoder_past_section(report: dict) -> List[str]:
    """Markdown: the paired (ii) − (i) per scorer and test split beside the seed's (ii) − (i)."""
    seed_n = report["grid_seed"]
    lines = ["", "## Does attending to the decoder's past help? (ii) − (i)", "",
             "The seed's Table 1 has (ii) above (i) for "
             + " and ".join(f"{sum(seed_difference(sc, 'i', 'ii')[t] > 0 for sc in SCORERS)} of 4 "
                            f"scorers on {SEED_SET_NAMES[t]}" for t in SEED_SETS)
             + f". Ours: the paired bootstrap of tokenised BLEU (ii) − (i), seed {seed_n}'s runs, as "
             "above.", "",
             "| scorer | seed WMT | seed Europarl | "
             + " | ".join(f"{s} (ii) − (i)" for s in TESTS) + " |",
             "|---|---|---|" + "---|" * len(TESTS)]
    for scorer in SCORERS:
        seed = seed_difference(scorer, "i", "ii")
        boots = [report["claim"][scorer]["bootstrap"].get(s, {}).get("ii-i") for s in TESTS]
        lines.append(f"| {scorer} | " + " | ".join(
            [f"{seed[t]:+.2f}" for t in SEED_SETS]
            + ["–" if b is None else format_interval(b) for b in boots]) + " |")
    return lines


def _acvi_section(report: dict, cols: List[str]) -> List[str]:
    """Markdown: ACVI beside soft (and its deterministic control, where trained) per cell, mean ±
    std over seeds, the seed-by-seed differences and each seed's paired bootstrap intervals."""
    lines = ["", "## ACVI beside soft in the same cell", "",
             "Tokenised BLEU and validation perplexity (mean ± std, n = seeds); the differences: seed by "
             "seed over the seeds both have (mean ± std). The control: ACVI's networks trained and "
             "decoded on the posterior mean, without the latent noise (`det-<cell>`).", "",
             "| cell | context | valid BLEU | test2016 BLEU | test2017 BLEU | valid ppl |",
             "|---|---|---|---|---|---|"]
    for a in report["acvi"]:
        name = f"{a['scorer']} ({a['config']})"
        rows = [("soft", a["soft"]), ("ACVI", a["acvi"])] + (
            [("control", a["control"])] if "control" in a else [])
        lines += [f"| {name} | {label} | " + " | ".join(_cell_texts(c, cols)) + " |" for label, c in rows]
        for label, key in (("ACVI − soft", "acvi_minus_soft"), ("ACVI − control", "acvi_minus_control")):
            if key in a:
                lines.append(f"| {name} | {label} | "
                             + " | ".join(_seed_difference_text(a[key][s]) for s in SPLITS) + " | – |")
    for a in report["acvi"]:
        boots = [(label, a[key]) for label, key in (("ACVI − soft", "bootstrap"),
                                                    ("ACVI − control", "control_bootstrap")) if a.get(key)]
        seeds = sorted({int(x) for _, boot in boots for b in boot.values() for x in b})
        if not seeds:
            continue
        lines += ["", f"{a['scorer']} ({a['config']}), each seed's decodes paired sentence by sentence "
                  f"(bootstrap, {report['n_resamples']} resamples):", "",
                  "| seed | " + " | ".join(f"{label} {s}" for label, _ in boots for s in TESTS) + " |",
                  "|---|" + "---|" * (len(boots) * len(TESTS))]
        for seed in seeds:
            lines.append(f"| {seed} | " + " | ".join(
                format_interval(boot[s][str(seed)]) if str(seed) in boot.get(s, {}) else "–"
                for _, boot in boots for s in TESTS) + " |")
    return lines


def markdown(report: dict) -> str:
    """The comparison of :func:`build` as a markdown page."""
    pair, seed_n = report["pair"], report["grid_seed"]
    cols = list(SPLITS) + ["valid_ppl"]
    lines = [f"# Seed 003's Table 1 beside the attention grid ({pair})", "",
             f"Seed 003's Table 1 ({report['source']}; docs/method.md §3.6): BLEU, English→German, on "
             "a WMT and a Europarl test set, NLTK's `corpus_bleu` (its l. 117) on tokenised text "
             "(l. 101). Ours: the runs of `recipes/mt_attention_grid.sh` (Multi30K, "
             f"{pair}), tokenised BLEU (`bleu_tok`: sacreBLEU on the tokenised, lower-cased text "
             "without a tokenisation of its own, data_scripts/score_mt.py), the closest of our scores "
             "to the seed's NLTK corpus BLEU on tokenised text; mean ± std over the finished seeds "
             "(n = seeds); valid ppl: 2^(likelihood loss) at the best epoch. Configurations: (i) "
             "attention on the encoder, (ii) + on the decoder's past, (iii) (ii) + self-attention. The "
             "corpora differ: compare the orderings, not the values.", "",
             "| seed 003's row | our variant | seed WMT | seed Europarl | valid BLEU | "
             "test2016 BLEU | test2017 BLEU | valid ppl |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['label']} (l. {r['line']}) | `{r['variant']}` | {r['wmt']:.2f} | "
                     f"{r['europarl']:.2f} | " + " | ".join(_cell_texts(r["ours"], cols)) + " |")
    lines += ["", "## The three configurations per scorer", "",
              "Best first, by BLEU (ours: the means above).", "",
              "| scorer | seed WMT | seed Europarl | ours valid | ours test2016 | ours test2017 |",
              "|---|---|---|---|---|---|"]
    for scorer in SCORERS:
        c = report["claim"][scorer]
        texts = [c["seed"][s]["order"]["text"] for s in SEED_SETS]
        for s in SPLITS:
            o = c["ours"][s]["order"]
            texts.append("not run" if o is None else
                         o["text"] + ("" if not o["missing"] else
                                      " (" + ", ".join(o["missing"]) + ": not run)"))
        lines.append(f"| {scorer} | " + " | ".join(texts) + " |")
    holds = report["seed_claim_holds"]
    lines += ["", "## Is (iii) below both (i) and (ii)?", "",
              "The seed's Table 1 shows (iii), the self-attention configuration, below both (i) and (ii) "
              f"for {len(holds['wmt'])} of 4 scorers on WMT and {len(holds['europarl'])} of 4 on "
              "Europarl (computed from its numbers above; its Analysis section, l. 165, is empty). Ours: "
              "per split from the means, and the paired bootstrap of tokenised BLEU (iii) − (i) and "
              f"(iii) − (ii) on the test splits, seed {seed_n}'s runs, the sentences resampled "
              f"{report['n_resamples']} times ({100 * report['level']:.0f} % percentile interval); "
              "verdict: reproduced when every interval is below 0, not reproduced when one is above 0, "
              "not significant otherwise.", "",
              "| scorer | seed WMT | seed Europarl | ours valid | ours test2016 | ours test2017 | "
              + " | ".join(f"{s} {k}" for s in TESTS for k in ("(iii) − (i)", "(iii) − (ii)"))
              + " | verdict |",
              "|---|---|---|---|---|---|" + "---|" * (2 * len(TESTS)) + "---|"]
    for scorer in SCORERS:
        c = report["claim"][scorer]
        boots = [c["bootstrap"].get(s, {}).get(k) for s in TESTS for k in ("iii-i", "iii-ii")]
        lines.append(f"| {scorer} | " + " | ".join(
            [_yes_no(c["seed"][s]["iii_below_both"]) for s in SEED_SETS]
            + [_yes_no(c["ours"][s]["iii_below_both"]) for s in SPLITS]
            + ["–" if b is None else format_interval(b) for b in boots]) + f" | {c['verdict']} |")
    lines += [""] + [f"- {scorer}: {report['claim'][scorer]['verdict']} ({report['claim'][scorer]['reason']})."
                     for scorer in SCORERS]
    lines += _decoder_past_section(report)
    if report.get("over_seeds"):
        lines += ["", "## Over seeds: each configuration against (i) with its scorer", "",
                  "Tokenised BLEU of the configuration minus (i), seed by seed over the seeds both have "
                  "(mean ± std of the per-seed differences; the seeds in brackets).", "",
                  "| scorer | configuration | " + " | ".join(f"{s} − (i)" for s in SPLITS) + " |",
                  "|---|---|" + "---|" * len(SPLITS)]
        for o in report["over_seeds"]:
            lines.append(f"| {o['scorer']} | ({o['config']}) | "
                         + " | ".join(_seed_difference_text(o["minus_i"][s]) for s in SPLITS) + " |")
    if report["acvi"]:
        lines += _acvi_section(report, cols)
    if report["warnings"]:
        lines += ["", "Warnings:", ""] + [f"- {w}" for w in report["warnings"]]
    lines.append("")
    return "\n".join(lines)
