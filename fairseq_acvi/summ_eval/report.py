"""The summarization report's parts (``summ_report``): score every system of a test subset with the
one evaluator (:mod:`fairseq_acvi.summ_eval.scoring`), lead-3 and See et al.'s outputs beside
them, bootstrap intervals and paired differences (:mod:`fairseq_acvi.metrics.bootstrap`), rows of
an earlier report brought in after a check, the outputs kept, and the Markdown table.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, Optional, Sequence, Tuple

from fairseq_acvi.data.text_lines import read_aligned, read_text_lines, write_gzip_text
from fairseq_acvi.metrics.bootstrap import mean_interval, paired_mean_bootstrap
from fairseq_acvi.summ_eval.lead import lead
from fairseq_acvi.summ_eval.scoring import evaluate

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")

COLUMNS = [("n", "n", "{:.0f}"), ("rouge1", "R-1", "{:.2f}"), ("rouge1_ci", "R-1 95 % CI", "{}"),
           ("rouge2", "R-2", "{:.2f}"),
           ("rougeL", "R-L", "{:.2f}"), ("meteor_exact", "METEOR exact", "{:.2f}"),
           ("meteor_full", "METEOR full", "{:.2f}"), ("novel_2gram", "novel 2-gram %", "{:.2f}"),
           ("novel_3gram", "novel 3-gram %", "{:.2f}"), ("repeat_3gram", "repeated 3-gram %", "{:.2f}"),
           ("novel_rate", "novel words %", "{:.3f}"), ("oov_adoption", "OOV adoption %", "{:.3f}"),
           ("unk_rate", "UNK %", "{:.2f}")]


def parse_system(spec: str) -> Tuple[str, str]:
    label, sep, path = spec.partition("=")
    if not sep or not label or not path:
        raise ValueError(f"--system {spec!r}: expected LABEL=PATH (PATH may contain {{subset}})")
    return label, path


def see_systems(data: str, subset: str) -> Dict[str, str]:
    """``{label: path}`` of See et al.'s outputs stored beside a subset."""
    prefix = f"{subset}.see_"
    out = {}
    for fname in sorted(os.listdir(data)):
        if fname.startswith(prefix) and fname.endswith(".txt"):
            out[f"See et al.: {fname[len(prefix):-4]}"] = os.path.join(data, fname)
    return out


def _scored(hyps, base, vocab, meteor_modes, hyp_name):
    """evaluate()'s figures with ROUGE intervals, and the per-article ROUGE kept apart."""
    row = evaluate(hyps, base["ref"], base["src"], vocab, meteor_modes, hyp_name=hyp_name,
                   per_article=True)
    per = row.pop("per_article")
    row["ci"] = {k: list(mean_interval(per[k])) for k in ROUGE_KEYS}
    return row, per


def score_subset(data: str, subset: str, systems: Sequence[Tuple[str, str]],
                 meteor_modes: Sequence[str], vocab) -> Tuple[Dict[str, object], Dict[str, Dict]]:
    """``({"rows": {label: figures}, "missing": {label: path}}, {label: per-article ROUGE})``."""
    base = read_aligned({"ref": os.path.join(data, f"{subset}.summary"),
                         "src": os.path.join(data, f"{subset}.article")})
    rows: Dict[str, Dict] = {}
    per: Dict[str, Dict] = {}
    missing: Dict[str, str] = {}
    rows["lead-3"], per["lead-3"] = _scored([lead(a, 3) for a in base["src"]], base, vocab,
                                            meteor_modes, f"lead-3 of {subset}")
    published = see_systems(data, subset)
    candidates = list(published.items())
    candidates += [(label, path.replace("{subset}", subset)) for label, path in systems]
    for label, path in candidates:
        if not os.path.isfile(path):
            missing[label] = path
            continue
        hyp = read_aligned({"hyp": path, "ref": os.path.join(data, f"{subset}.summary")})["hyp"]
        rows[label], per[label] = _scored(hyp, base, vocab, meteor_modes, path)
        rows[label]["path"] = path
        if published.get(label) == path:
            rows[label]["published"] = True      # part of the data: --keep-outputs leaves it there
    return {"rows": rows, "missing": missing}, per


def split_pair(pair: str, labels, option: str) -> Tuple[str, str]:
    """``A:B`` → (A, B) where both are known system labels; labels may hold ':' themselves
    ("See et al.: pointer_gen"), so the split is the one whose two sides are both labels."""
    splits = [(pair[:i], pair[i + 1:]) for i, ch in enumerate(pair) if ch == ":"]
    found = [(a, b) for a, b in splits if a in labels and b in labels]
    if len(found) != 1:
        why = "no split" if not found else "more than one split"
        raise ValueError(f"{option} {pair!r}: {why} into two system labels; labels here: "
                         + ", ".join(sorted(labels)))
    return found[0]


def paired(per: Dict[str, Dict], a: str, b: str) -> Dict[str, object]:
    """Paired bootstrap of B − A for each ROUGE figure, or why there is none."""
    absent = [x for x in (a, b) if x not in per]
    if absent:
        return {"a": a, "b": b,
                "skipped": f"summaries of {' and '.join(absent)} not scored here for this subset"}
    return dict({k: paired_mean_bootstrap(per[a][k], per[b][k]) for k in ROUGE_KEYS}, a=a, b=b)


# figures that must agree between an earlier report's lead-3 row and today's for its rows to be used
_CHECKED = ("n", "rouge1", "rouge2", "rougeL", "repeat_3gram", "novel_3gram")


def read_report(path: str) -> Dict:
    """An earlier ``results.json`` of this command; ValueError naming the file if it is not one."""
    with open(path, encoding="utf-8") as f:
        try:
            rep = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"--earlier {path}: not JSON ({e})") from None
    subsets = rep.get("subsets") if isinstance(rep, dict) else None
    if not isinstance(subsets, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("rows"), dict) for v in subsets.values()):
        raise ValueError(f"--earlier {path}: not a summ_report results.json (no subsets/rows)")
    return rep


def import_earlier(res: Dict[str, object], subset: str, path: str, earlier: Dict) -> int:
    """Add ``earlier``'s rows for ``subset`` that ``res`` does not have; returns how many.

    Raises ValueError when the earlier lead-3 row disagrees with today's (another evaluator, other
    articles or references): its rows would then not be comparable with the ones scored now.
    """
    old = earlier.get("subsets", {}).get(subset)
    if old is None:
        return 0
    then, now = old["rows"].get("lead-3"), res["rows"]["lead-3"]
    if then is None:
        raise ValueError(f"--earlier {path}: subset {subset} has no lead-3 row to check it against")
    for key in _CHECKED:
        if key in then and abs(float(then[key]) - float(now[key])) > 1e-6:
            raise ValueError(f"--earlier {path}: lead-3 of {subset} gives {key} {then[key]:.4f} there "
                             f"and {now[key]:.4f} now (other articles, references or evaluator): "
                             "its rows are not comparable")
    added = 0
    for label, row in old["rows"].items():
        if label == "lead-3" or label.startswith("See et al.: ") or label in res["rows"]:
            continue
        res["rows"][label] = dict(row, scored=earlier.get("date", "?"), report=path)
        res["missing"].pop(label, None)
        added += 1
    return added


def keep_outputs(out_dir: str, report: Dict[str, object]) -> None:
    """Keep every scored system's summaries as ``OUT_DIR/outputs/SUBSET/<label as a file
    name>.txt.gz`` (the lines as scored, gzip-compressed with a zero timestamp; the package's
    readers decompress a ``.gz`` name) and note the copy's path (relative to OUT_DIR) in its row as
    ``kept``; lead-3, rows of an earlier report and See et al.'s published outputs (data, not ours)
    are not copied, and a summary read from its kept place (a report scored again in its own
    folder) stays as it is."""
    for subset, res in report["subsets"].items():
        dest_dir = os.path.join(out_dir, "outputs", subset)
        taken: Dict[str, str] = {}
        for label, row in res["rows"].items():
            if "path" not in row or "scored" in row or row.get("published"):
                continue
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "system"
            if slug in taken:
                raise ValueError(f"--keep-outputs: labels {taken[slug]!r} and {label!r} give the same "
                                 f"file name {slug}.txt.gz")
            taken[slug] = label
            os.makedirs(dest_dir, exist_ok=True)
            dest = os.path.join(dest_dir, slug + ".txt.gz")
            if not (os.path.exists(dest) and os.path.samefile(row["path"], dest)):   # read from here: kept
                write_gzip_text(dest, read_text_lines(row["path"], newline="lf"))
            row["kept"] = os.path.join("outputs", subset, slug + ".txt.gz")


def coverage_change(rows: Dict[str, Dict], before: str, after: str) -> Optional[Dict[str, float]]:
    """Repeated-trigram rates of the two systems and the relative change; None if one is missing."""
    if before not in rows or after not in rows:
        return None
    a, b = rows[before]["repeat_3gram"], rows[after]["repeat_3gram"]
    return {"before": a, "after": b, "relative_change": (b - a) / a if a else float("nan")}


def markdown(report: Dict[str, object]) -> str:
    lines = [f"# Summarization results ({report['date']})", "",
             f"Data: `{report['data']}`. One evaluator for every row "
             "(`fairseq_acvi.cli.eval_summarization`; ROUGE = rouge-score with stemming, F1 × 100, "
             "ROUGE-L summary-level). n-gram and word rates in % of the summaries' tokens.", ""]
    for subset, res in report["subsets"].items():
        cols = [c for c in COLUMNS if any(r.get(c[0]) is not None or (c[0] == "rouge1_ci" and "ci" in r)
                                          for r in res["rows"].values())]
        lines += [f"## {subset}", "",
                  "| system | " + " | ".join(c[1] for c in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        earlier = {}
        for label, r in res["rows"].items():
            r = dict(r)
            if "ci" in r:
                r["rouge1_ci"] = "{:.2f}–{:.2f}".format(*r["ci"]["rouge1"])
            cells = [c[2].format(r[c[0]]) if r.get(c[0]) is not None else "—" for c in cols]
            mark = ""
            if "scored" in r:
                earlier.setdefault((r["scored"], r["report"]), len(earlier) + 1)
                mark = " " + "†" * earlier[(r["scored"], r["report"])]
            lines.append(f"| {label}{mark} | " + " | ".join(cells) + " |")
        for label in res["missing"]:
            # the file it looked for is in results.json ("missing"); a report quotes no absent path
            lines.append(f"| {label} | not decoded for this subset |" + " |" * (len(cols) - 1))
        for (date, path), k in earlier.items():
            lines += ["", f"{'†' * k} scored on {date} (`{path}`); its summaries are not at hand now, "
                      "its lead-3 row agrees with today's."]
        for pair, pr in res.get("paired", {}).items():
            a, b = pr["a"], pr["b"]
            if "skipped" in pr:
                lines += ["", f"Paired {b} − {a}: not computed ({pr['skipped']})."]
                continue
            n_res = pr["rouge1"]["n_resamples"]
            figs = "; ".join(f"{name} {d['delta']:+.2f} (95 % CI {d['low']:+.2f} to {d['high']:+.2f}, "
                             f"higher in {100 * d['p_other_better']:.0f} %)"
                             for name, d in zip(("R-1", "R-2", "R-L"), (pr[k] for k in ROUGE_KEYS)))
            lines += ["", f"Paired {b} − {a} ({n_res:,} resamples of the same articles): {figs}."]
        for pair, ch in res.get("coverage", {}).items():
            if ch is not None:
                lines.append("")
                lines.append(f"Coverage ({pair}): repeated 3-grams {ch['before']:.2f} % → "
                             f"{ch['after']:.2f} % ({100 * ch['relative_change']:+.0f} %).")
        lines.append("")
    return "\n".join(lines)
