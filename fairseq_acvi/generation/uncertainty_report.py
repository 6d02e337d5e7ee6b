"""The uncertainty study's results page across seeds (docs/uncertainty.md §8): the tables and
verdicts of :mod:`fairseq_acvi.generation.uncertainty_seeds` as ``uncertainty.md`` and
``uncertainty.json``.

Usage (from the repository root; ``recipes/uncertainty_study.sh`` runs it as ``STAGE=report``)::

    python -m fairseq_acvi.generation.uncertainty_report \\
        --measures runs/uncertainty_study/seed1/measures/measures.json \\
                   runs/uncertainty_study/seed2/measures/measures.json \\
        --runs runs/multi30k/en_de --mc-samples 10 --mc-dropout 10 --out-dir REPORT_DIR

``--measures``: one :mod:`~fairseq_acvi.generation.uncertainty_measures` ``measures.json`` per
seed (the seed is read from a ``seed<N>`` folder of its path), every one with the same first
method, the base of every paired difference (the recipe's ``acvi``). ``--runs``: the folder of the
trainings (``<context>_seed<N>/run.json``, as recipes/mt_multi30k.sh writes them), to say which
model every figure is from; without it the page names the recipe's preset.

The page: the models; the verdict per baseline (``mcdrop``, ``ensemble``, ``soft``) and question,
with the cost; one table per question (token calibration, sentence quality estimation,
out-of-domain detection, cost), methods in rows, each figure's mean ± std over the seeds (n) and,
for every method but the base, in how many seeds its paired difference to the base is
significantly better / worse (the 95 % interval excludes 0). ``uncertainty.json``: the same
numbers, per seed too (no nan: null). A missing, unreadable or malformed ``measures.json`` or
``run.json``: ``error: PATH: ...`` on stderr and exit status 2.
"""
import argparse
import json
import os
import sys
from typing import Dict, List, Optional

from fairseq_acvi.generation.uncertainty_measures import CORRELATIONS, QUALITIES, SCORES
from fairseq_acvi.generation.uncertainty_seeds import RUN_KEYS, aggregate, read_runs, read_seed

#: recipes/mt_multi30k.sh's default ARCH, the preset of both contexts the study trains
RECIPE_PRESET = "acvi_lstm_multi30k"


# ---------------------------------------------------------------------------------------------
# markdown


def _num(x: Optional[float], digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _mean_cell(r: dict, digits: int = 3, one: str = "one model") -> str:
    if not r or r["mean"] is None:
        return "—"
    if r.get("shared"):
        return f"{r['mean']:.{digits}f} ({one})"
    std = "" if r["std"] is None else f" ± {r['std']:.{digits}f}"
    return f"{r['mean']:.{digits}f}{std} (n={r['n']})"


def _cell(rec: Optional[dict]) -> str:
    if rec is None:
        return "—"
    text = _mean_cell(rec)
    vs = rec.get("vs_base")
    if vs and vs["n"]:
        text += f"; better in {vs['better']} of {vs['n']}, worse in {vs['worse']} of {vs['n']}"
    return text


def _counts(f: dict) -> str:
    return f"{f['base_better']} better, {f['base_worse']} worse of {f['n']} seeds"


def _figure_parts(figs: List[dict]) -> List[str]:
    """The figures of one question and baseline grouped by verdict, with their seed counts (the
    base's side); the indistinguishable ones listed only where a seed was significant."""
    parts = []
    for word in ("better", "worse", "mixed"):
        named = [f"{f['label']} ({_counts(f)})" for f in figs if f["verdict"] == word]
        if named:
            parts.append(f"{word}: {', '.join(named)}")
    same = [f for f in figs if f["verdict"] == "not distinguishable"]
    if same:
        some = [f"{f['label']} ({_counts(f)})" for f in same
                if f["base_better"] or f["base_worse"]]
        parts.append(f"not distinguishable: {len(same)}"
                     + (f", a seed significant in {', '.join(some)}" if some else ""))
    missing = [f["label"] for f in figs if f["verdict"] == "not compared"]
    if missing:
        parts.append(f"not compared (a side without the figure): {', '.join(missing)}")
    return parts


def _ratio(r: dict) -> str:
    """A mean_std of ratios -> "2.07× (± 0.12, n=3)"."""
    if not r or r["mean"] is None:
        return "—"
    std = "" if r["std"] is None else f"± {r['std']:.2f}, "
    return f"{r['mean']:.2f}× ({std}n={r['n']})"


def _cost_words(c: dict, base: str, b: str) -> str:
    if c["verdict"] == "not compared":
        return "decode times not compared (missing in the measures)"
    text = f"{base} is {c['verdict']}: its decode takes {_ratio(c['base_over_method'])} {b}'s time"
    a, m = c["base_times_single_pass"], c["method_times_single_pass"]
    if a["n"] and m["n"]:
        text += (f"; {base} {_num(a['mean'], 2)}×, {b} {_num(m['mean'], 2)}× a single K = 1 "
                 f"pass")
    return text


def verdict_lines(report: dict) -> List[str]:
    base, lines = report["base"], []
    for b, res in report["verdict"].items():
        lines += [f"### {base} against {b}", ""]
        for q, table in report["questions"].items():
            v = res[q]
            parts = _figure_parts(v["figures"])
            link = {"better": "than", "worse": "than", "not distinguishable": "from",
                    "mixed": "against", "not compared": "with"}[v["verdict"]]
            n = sum(f["verdict"] != "not compared" for f in v["figures"])
            good = sum(f["verdict"] == "better" for f in v["figures"])
            bad = sum(f["verdict"] == "worse" for f in v["figures"])
            lines.append(f"* **{table['title']}**: {base} is **{v['verdict']}** {link} {b}, "
                         f"better on {good} and worse on {bad} of the {n} figures compared "
                         f"({'; '.join(parts)}).")
        lines += [f"* **Cost**: {_cost_words(res['cost'], base, b)}.", ""]
    return lines


def _models(report: dict, runs: Optional[Dict[str, dict]], mc_samples, mc_dropout) -> List[str]:
    base = report["base"]
    k = "K" if mc_samples is None else f"K = {mc_samples}"
    d = "K" if mc_dropout is None else f"{mc_dropout}"
    desc = {"acvi": f"ACVI of seed N, {k} context samples averaged at every step",
            "soft": "soft attention of seed N: one distribution per step (the single K = 1 pass "
                    "of the cost table)",
            "mcdrop": f"the soft model of seed N with {d} Monte-Carlo dropout masks",
            "ensemble": "the soft seeds' deep ensemble: the same members in every seed's table, so "
                        "its own figures are counted once (one model); its differences to "
                        f"{base} are one per seed, against each seed's {base}"}
    lines = ["## Models", "", "| method | model |", "|---|---|"]
    for m in report["methods"]:
        lines.append(f"| {m} | {desc.get(m, 'as named in the measures')} |")
    lines.append("")
    if runs:
        lines += ["The trainings (their `run.json`):", "",
                  "| run | " + " | ".join(RUN_KEYS) + " |", "|---" * (len(RUN_KEYS) + 1) + "|"]
        for name, rec in runs.items():
            lines.append(f"| {name} | " + " | ".join(
                "—" if rec[key] in (None, "") else str(rec[key]) for key in RUN_KEYS) + " |")
    else:
        lines.append(f"The trainings are recipes/mt_multi30k.sh's, `CONTEXT=soft` and "
                     f"`CONTEXT=acvi` with its preset `{RECIPE_PRESET}` (recipes/uncertainty_study.sh;"
                     f" their run.json was not read: `--runs` not given).")
    return lines + [""]


def markdown(report: dict, runs: Optional[Dict[str, dict]] = None, mc_samples=None,
             mc_dropout=None) -> str:
    base = report["base"]
    seeds = report["seeds"]
    lines = ["# Uncertainty study: the samples of ACVI against MC dropout and a deep ensemble", "",
             f"From {len(seeds)} seed table{'s' if len(seeds) != 1 else ''} of "
             "`python -m fairseq_acvi.generation.uncertainty_measures` ("
             + ", ".join(f"{s['label']}: `{s['path']}`" for s in seeds) + "), by "
             "`python -m fairseq_acvi.generation.uncertainty_report` (docs/uncertainty.md §8). "
             "Every cell: the mean ± sample std over the seeds (n: the seeds with the figure); "
             f"for every method but {base}, in how many seeds its paired difference to {base} "
             "(same sentences, same resamples) is significantly better / worse for the row's "
             "method, i.e. its 95 % bootstrap interval excludes 0 on that side. Better is lower "
             "for ECE, higher for an AUROC, more negative for the correlation of an uncertainty "
             "with quality and more positive for that of logprob. A figure's verdict is "
             "*better* or *worse* when more than half of the seeds say so and none the "
             "opposite, *mixed* when seeds disagree; a question's, when at least half of its "
             "figures compared say so and none the opposite, *mixed* when they disagree. The "
             "intervals are not corrected for the number of figures: among 16 correlations, one "
             "significant seed by chance is no surprise, and one figure alone makes no verdict.",
             ""]
    lines += _models(report, runs, mc_samples, mc_dropout)
    lines += ["## Verdict", ""] + verdict_lines(report)
    for i, (q, table) in enumerate(report["questions"].items(), 1):
        lines += [f"## {i}. {table['title']}", ""]
        if q == "quality_estimation":
            cols = [(f"{qq} · {c}", qq, c) for qq in QUALITIES for c in CORRELATIONS]
            figs = {f["key"]: f for f in table["figures"]}
            lines += ["Correlation of each sentence score with the sentence's chrF / BLEU (an "
                      "uncertainty should correlate negatively, logprob positively).", "",
                      "| method | score | " + " | ".join(c[0] for c in cols) + " |",
                      "|---" * (len(cols) + 2) + "|"]
            for m in table["methods"]:
                for s in SCORES:
                    lines.append(f"| {m} | {s} | " + " | ".join(
                        _cell(figs[f"{s}/{qq}/{c}"]["methods"].get(m)) for _, qq, c in cols)
                        + " |")
            lines += ["", "Mean sentence chrF / BLEU of each method's translations: " + "; ".join(
                f"{m} {_mean_cell(r['chrf'], 2)} / {_mean_cell(r['bleu'], 2)}"
                for m, r in report["quality"].items() if r["chrf"]["n"]) + "."]
        else:
            lines += ["| method | " + " | ".join(f["label"] for f in table["figures"]) + " |",
                      "|---" * (len(table["figures"]) + 1) + "|"]
            for m in table["methods"]:
                lines.append(f"| {m} | " + " | ".join(_cell(f["methods"].get(m))
                                                      for f in table["figures"]) + " |")
        lines.append("")
    lines += [f"## {len(report['questions']) + 1}. Cost", ""]
    if report["cost"]:
        lines += [f"Decode time of test2016 as fairseq logs it (wall clock: other jobs on the "
                  f"machine add noise), its ratio to the same seed's single K = 1 pass "
                  f"({report['single_pass']}), and {base}'s time over the method's.", "",
                  f"| method | decode seconds | × K = 1 pass | {base} ÷ method |",
                  "|---|---|---|---|"]
        for m, c in report["cost"].items():
            lines.append(f"| {m} | {_mean_cell(c['seconds'], 1, 'one decode')} | "
                         f"{_ratio(c['times_single_pass'])} | {_ratio(c['base_over_method'])} |")
    else:
        lines.append("No decode time in the measures.")
    lines.append("")
    if report["warnings"]:
        lines += ["## Warnings", ""] + [f"* {w}" for w in report["warnings"]] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measures", nargs="+", required=True, metavar="MEASURES_JSON",
                   help="one uncertainty_measures measures.json per seed (in a seed<N> folder)")
    p.add_argument("--out-dir", required=True, help="writes uncertainty.md and uncertainty.json")
    p.add_argument("--runs", help="the trainings' folder, <context>_seed<N>/run.json "
                                  "(recipes/mt_multi30k.sh's $RUNS/$PAIR)")
    p.add_argument("--shared", action="append", default=None, metavar="METHOD",
                   help="a method that is the same model in every seed table (default: ensemble)")
    p.add_argument("--single-pass", default="soft",
                   help="the method whose decode is the single K = 1 pass (default: soft)")
    p.add_argument("--mc-samples", type=int, help="ACVI's K, for the page's model list")
    p.add_argument("--mc-dropout", type=int, help="MC dropout's masks, for the page's model list")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        seeds = [read_seed(path, i) for i, path in enumerate(args.measures)]
        report = aggregate(seeds, args.shared or ["ensemble"], args.single_pass)
        runs = None
        if args.runs:
            missing = [s["path"] for s in seeds if s["seed"] is None]
            if missing:
                raise ValueError(f"{missing[0]}: no seed<N> folder in the path (needed by --runs)")
            runs = read_runs(args.runs, [s["seed"] for s in seeds])
            report["runs"] = runs
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report["models"] = {"mc_samples": args.mc_samples, "mc_dropout": args.mc_dropout,
                        "preset": None if runs else RECIPE_PRESET}
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "uncertainty.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, allow_nan=False)
    with open(os.path.join(args.out_dir, "uncertainty.md"), "w", encoding="utf-8") as f:
        f.write(markdown(report, runs, args.mc_samples, args.mc_dropout))
    for w in report["warnings"]:
        print(f"[uncertainty_report] warning: {w}", file=sys.stderr)
    print(f"[uncertainty_report] {len(seeds)} seeds: " + "; ".join(
        f"vs {b}: " + ", ".join(f"{q} {v[q]['verdict']}" for q in report["questions"])
        for b, v in report["verdict"].items())
        + f" -> {os.path.join(args.out_dir, 'uncertainty.md')}, uncertainty.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
