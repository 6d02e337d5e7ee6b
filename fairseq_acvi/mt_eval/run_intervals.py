"""Paired bootstrap intervals between two variants of a report, seed by seed and split by split
(``mt_report --intervals BASE:OTHER --refs-dir DIR``): for every seed both variants finished, the
tokenised BLEU of OTHER minus BASE on each decoded split with its 95 % interval (Koehn 2004;
:meth:`fairseq_acvi.mt_eval.paired_decodes.Decodes.interval`), computed from the runs' hypotheses
(their folders' ``gen_<split>.txt``, or the ``.txt.gz`` a report kept) and the references of
``<refs_dir>/<split>.<tgt>``.

A seed fixes the data order and the initial weights of both runs, so each interval is the
sentence-level uncertainty of one paired comparison; the spread over seeds is the report's
seed-by-seed table (:func:`fairseq_acvi.mt_eval.summary.paired`). Every hypothesis file read is
scored again, and one whose BLEU is not the one its ``bleu_<split>.json`` records (other
references, an edited file) is a :class:`~fairseq_acvi.mt_eval.logs.ReportError` naming it.
"""
from typing import Dict, List, Tuple

from fairseq_acvi.metrics.bleu import format_interval
from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.paired_decodes import Decodes
from fairseq_acvi.mt_eval.runs import pair_splits
from fairseq_acvi.mt_eval.summary import is_finished

#: the figures of :func:`paired_interval` an interval row keeps
KEPT_FIGURES = ("delta", "low", "high", "p_other_better", "base", "other", "level", "n_resamples")


def parse_comparison(text: str) -> Tuple[str, str]:
    """``"soft:acvi"`` → ``("soft", "acvi")``; ReportError naming the option otherwise."""
    base, sep, other = text.partition(":")
    if not sep or not base or not other or ":" in other:
        raise ReportError(f"--intervals {text!r}: expected BASE:OTHER, two variants (e.g. soft:acvi)")
    return base, other


def intervals(runs: List[dict], comparisons: List[Tuple[str, str]], refs_dir: str) -> List[dict]:
    """One row per (pair, comparison, seed both finished, split both decoded): ``pair``, ``base``,
    ``other``, ``seed``, ``split`` and the :data:`KEPT_FIGURES` (``base``/``other`` hold the two
    BLEU, recomputed). ReportError for a variant no run has, a comparison with no seed in common,
    or a decode whose recomputed BLEU is not its recorded one."""
    variants = {r["variant"] for r in runs}
    for base, other in comparisons:
        for v in (base, other):
            if v not in variants:
                raise ReportError(f"--intervals {base}:{other}: no run of variant {v!r} "
                                  f"(there are {', '.join(sorted(variants))})")
    rows: List[dict] = []
    for pair in sorted({r["pair"] for r in runs}):
        decodes = Decodes(refs_dir, pair)
        of_pair = [r for r in runs if r["pair"] == pair and is_finished(r)]
        for base, other in comparisons:
            by_seed: Dict[str, Dict[int, dict]] = {
                v: {r["seed"]: r for r in of_pair if r["variant"] == v} for v in (base, other)}
            seeds = sorted(set(by_seed[base]) & set(by_seed[other]))
            if not seeds:
                raise ReportError(f"--intervals {base}:{other}: no finished seed of {pair} has both")
            for seed in seeds:
                a, b = by_seed[base][seed], by_seed[other][seed]
                for run in (a, b):
                    if not run.get("dir"):
                        raise ReportError(f"--intervals {base}:{other}: {run['variant']} seed {seed} "
                                          f"comes from {run.get('source', '--merge')}, without its "
                                          "hypotheses (give its run folder)")
                for split in pair_splits([a, b], pair):
                    if split not in a["bleu"] or split not in b["bleu"]:
                        continue
                    r = decodes.interval(a, b, split)
                    rows.append({"pair": pair, "base_variant": base, "other_variant": other,
                                 "seed": seed, "split": split}
                                | {k: r[k] for k in KEPT_FIGURES})
        decodes.raise_mismatches()
    return rows


def markdown(rows: List[dict]) -> List[str]:
    """The section report.md gives the intervals: per pair and comparison, a row per seed, a
    column per split (``+0.31 (95% CI −0.12 to +0.74)``)."""
    out: List[str] = []
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        groups.setdefault((r["pair"], r["base_variant"], r["other_variant"]), []).append(r)
    for (pair, base, other), rs in groups.items():
        splits = list(dict.fromkeys(r["split"] for r in rs))
        out += ["", f"{pair}: BLEU of `{other}` minus `{base}`, the same seed, paired bootstrap "
                    f"over sentences ({rs[0]['n_resamples']} resamples):", "",
                "| seed | " + " | ".join(splits) + " |", "|---|" + "---|" * len(splits)]
        for seed in sorted({r["seed"] for r in rs}):
            cells = {r["split"]: format_interval(r) for r in rs if r["seed"] == seed}
            out.append(f"| {seed} | " + " | ".join(cells.get(s, "—") for s in splits) + " |")
    return out
