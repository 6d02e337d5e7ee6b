"""The CNN/DM pointer-generator runs of recipes/mt_normalizers.sh (``CNNDM=1``): one row per run
(context, attention normaliser of docs/method.md §3.5, coverage) with ROUGE-1/2/L and the
repeated-trigram rate, and the verdict "csparsemax lowers repeated trigrams against softmax
without coverage" (:func:`collect`, :func:`markdown`).

Each run is a folder ``<root>/<context>-<normaliser>-cov<0|1>/`` left by
recipes/summarization_cnndm.sh (docs/recipes/summarization_cnndm.md, "Outputs"); its figures are
the ``scores_<subset>.json`` that recipe's ``python -m fairseq_acvi.cli.eval_summarization`` wrote
(:func:`fairseq_acvi.summ_eval.scoring.evaluate`'s figures: ``rouge1``, ``rouge2``, ``rougeL`` F1 ×
100, ``repeat_3gram`` in % of the summaries' trigrams, ``n``), read as they are, not scored again.
A run without that file (still training or decoding) is listed as not scored. The comparisons
are :func:`fairseq_acvi.summ_eval.report.coverage_change`'s (before → after, relative change).
Problems raise ``ValueError`` naming the file or folder.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

from fairseq_acvi.data.json_numbers import read_numbers
from fairseq_acvi.modules.context.normalizers import NORMALIZERS
from fairseq_acvi.summ_eval.report import ROUGE_KEYS, coverage_change

#: the figures a row shows, all in eval_summarization's JSON
SCORE_KEYS = ("n",) + ROUGE_KEYS + ("repeat_3gram",)
RUN_NAME = re.compile(r"^(?P<context>[a-z]+)-(?P<normalizer>" + "|".join(NORMALIZERS)
                      + r")-cov(?P<coverage>[01])$")
#: the normaliser that should repeat less than softmax, both without coverage
REMEDY = "csparsemax"


def read_scores(path: str) -> Dict[str, float]:
    """:data:`SCORE_KEYS` of an ``eval_summarization --json`` file; ValueError naming it."""
    return read_numbers(path, SCORE_KEYS, "not an eval_summarization --json file")


def label(run: dict) -> str:
    """``soft-csparsemax-cov0``: the run's folder name, its key in comparisons."""
    return f"{run['context']}-{run['normalizer']}-cov{run['coverage']}"


def collect(root: str, subset: str = "test") -> dict:
    """``{"root", "subset", "runs", "ignored", "verdicts"}``: ``runs`` one dict per run folder
    (``context``, ``normalizer``, ``coverage`` (0/1), ``dir``, ``scores`` or None and
    ``scores_path``), ordered by context, normaliser, coverage; ``verdicts`` (:func:`verdicts`)."""
    if not os.path.isdir(root):
        raise ValueError(f"{root}: no such folder (the CNN/DM runs of recipes/mt_normalizers.sh)")
    runs, ignored = [], []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            continue
        m = RUN_NAME.match(name)
        if not m:
            ignored.append(name)
            continue
        scores_path = os.path.join(path, f"scores_{subset}.json")
        runs.append({"context": m["context"], "normalizer": m["normalizer"],
                     "coverage": int(m["coverage"]), "dir": os.path.relpath(path),
                     "scores_path": os.path.relpath(scores_path),
                     "scores": read_scores(scores_path) if os.path.isfile(scores_path) else None})
    if not runs:
        raise ValueError(f"{root}: no run folder named <context>-<normaliser>-cov<0|1>")
    runs.sort(key=lambda r: (r["context"], NORMALIZERS.index(r["normalizer"]), r["coverage"]))
    table = {"root": os.path.relpath(root), "subset": subset, "runs": runs, "ignored": ignored}
    table["verdicts"] = verdicts(table)
    return table


def verdicts(table: dict) -> List[dict]:
    """Per context: ``target``, ``context``, ``status`` (met / not met / not measured),
    ``figures``, and ``change`` (coverage_change of softmax → csparsemax without coverage) and
    ``coverage`` (softmax without → with coverage, when both are scored)."""
    rows = {label(r): r["scores"] for r in table["runs"] if r["scores"] is not None}
    out = []
    for context in sorted({r["context"] for r in table["runs"]}):
        soft, remedy, cov = (f"{context}-softmax-cov0", f"{context}-{REMEDY}-cov0",
                             f"{context}-softmax-cov1")
        v = {"target": f"{REMEDY} lowers repeated trigrams against softmax without coverage",
             "context": context}
        change: Optional[Dict[str, float]] = coverage_change(rows, soft, remedy)
        if change is None:
            absent = " and ".join(x for x in (soft, remedy) if x not in rows)
            out.append(dict(v, status="not measured", figures=f"{absent} not scored"))
            continue
        figures = (f"repeated 3-grams {change['before']:.2f} % (softmax) → {change['after']:.2f} % "
                   f"({REMEDY}), {100 * change['relative_change']:+.0f} %")
        with_cov = coverage_change(rows, soft, cov)
        if with_cov is not None:
            figures += (f"; softmax with coverage {with_cov['after']:.2f} % "
                        f"({100 * with_cov['relative_change']:+.0f} %)")
        out.append(dict(v, status="met" if change["after"] < change["before"] else "not met",
                        figures=figures, change=change, coverage=with_cov))
    return out


def markdown(table: dict) -> str:
    """The Markdown section of :func:`collect`'s table."""
    lines = [f"## CNN/DM pointer-generator: normalisers and coverage ({table['subset']})", "",
             f"Runs under `{table['root']}`; figures from each run's `scores_{table['subset']}.json` "
             "(`eval_summarization`: ROUGE F1 × 100 with stemming, ROUGE-L summary-level; repeated "
             "3-grams in % of the summaries' 3-grams).", "",
             "| context | normaliser | coverage | n | R-1 | R-2 | R-L | repeated 3-gram % |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in table["runs"]:
        head = f"| {r['context']} | {r['normalizer']} | {'yes' if r['coverage'] else 'no'} |"
        s = r["scores"]
        if s is None:
            lines.append(head + " not scored yet | | | | |")
            continue
        lines.append(head + f" {s['n']:.0f} | {s['rouge1']:.2f} | {s['rouge2']:.2f} | "
                     f"{s['rougeL']:.2f} | {s['repeat_3gram']:.2f} |")
    lines += ["", "### Target", ""]
    for v in table["verdicts"]:
        lines.append(f"* **{v['target']}** ({v['context']}): **{v['status']}** — {v['figures']}.")
    if table["ignored"]:
        lines += ["", "Other folders (not a run of this recipe): "
                  + ", ".join(f"`{x}`" for x in table["ignored"]) + "."]
    return "\n".join(lines) + "\n"
