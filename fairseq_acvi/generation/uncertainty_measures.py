"""The uncertainty study's measures, from decoded output (docs/uncertainty.md §8).

Usage (from the repository root)::

    python -m fairseq_acvi.generation.uncertainty_measures --references test2016.de \\
        --decoded soft=runs/unc/soft/generate-test.txt --decoded acvi=runs/unc/acvi/generate-test.txt \\
        --ood soft=runs/unc/soft/generate-coco.txt --ood acvi=runs/unc/acvi/generate-coco.txt \\
        --tokens soft=runs/unc/cal/tokens_soft.npz --tokens acvi=runs/unc/cal/tokens_acvi.npz \\
        --out-dir runs/unc/measures

Methods are named ``NAME=FILE``; the first one named is the base of every paired difference.

* ``--decoded``: ``fairseq_acvi.cli.generate --print-sentence-uncertainty`` output on the
  in-domain test set (the first hypothesis of every id, its ``H-`` text and ``US-`` scores),
  scored per sentence against ``--references`` (one line per sentence, in id order, the same
  tokenisation as the ``H-`` text): sentence chrF (sacreBLEU) and BLEU (sacreBLEU's, ``exp``
  smoothing, whitespace tokens; :mod:`fairseq_acvi.metrics.bleu`). Quality estimation: Pearson's
  and Spearman's correlation of each sentence score (``mean_mi``, ``max_mi``, ``entropy``,
  ``logprob``; :mod:`fairseq_acvi.generation.sentence_scores`) with each quality. An uncertainty
  should correlate negatively, ``logprob`` positively. The decoding time fairseq logs
  ("Translated … in Xs") is kept as the method's cost.
* ``--ood``: the same methods' output on an out-of-domain set: the AUROC with which each score
  ranks the out-of-domain sentences above the in-domain ones (−logprob for ``logprob``; none for a
  score that is the same for every sentence, e.g. I of soft attention).
* ``--tokens``: ``fairseq_acvi.cli.calibration --save-tokens`` arrays (teacher-forced): token ECE
  (``--bins`` equal-width bins) and the AUROC of wrong-token detection by 1 − confidence, H[p̄], I
  and the members' part of I.

Every figure comes with a 95 % percentile interval over ``--bootstrap`` resamples of the
sentences (a token's unit is its sentence; out-of-domain detection draws each set's sentences
separately), and every method's difference to the first with its interval, all methods drawn with
the same resamples (paired; :func:`fairseq_acvi.metrics.calibration.paired_bootstrap_methods`).
Outputs: ``measures.json`` and ``measures.md`` (one table per question, methods in rows).
"""
import argparse
import json
import math
import os
import re
import sys
from typing import Dict, List, Tuple

import numpy as np

from fairseq_acvi.data.text_lines import read_text_lines
from fairseq_acvi.generation.sentence_scores import SCORES
from fairseq_acvi.metrics.calibration import (auroc, bootstrap_interval,
                                              expected_calibration_error, paired_bootstrap_methods,
                                              pearson, rank_correlation)

QUALITIES = ("chrf", "bleu")
CORRELATIONS = {"pearson": pearson, "spearman": rank_correlation}
TOKEN_SCORES = ("one_minus_confidence", "entropy", "mutual_information",
                "members_mutual_information")
#: fairseq-generate's last log line, the decode's cost
TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--decoded", action="append", default=[], metavar="NAME=FILE",
                   help="a method's generate output on the in-domain test set (repeat)")
    p.add_argument("--references", help="the in-domain references, one line per sentence")
    p.add_argument("--ood", action="append", default=[], metavar="NAME=FILE",
                   help="the same method's generate output on the out-of-domain set (repeat)")
    p.add_argument("--tokens", action="append", default=[], metavar="NAME=FILE",
                   help="a method's tokens_NAME.npz from cli.calibration --save-tokens (repeat)")
    p.add_argument("--bins", type=int, default=15, help="confidence bins of the token ECE")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                   help="resamples of the sentences for every interval")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", required=True)
    return p


def named_files(specs: List[str], option: str) -> Dict[str, str]:
    out = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"{option} takes NAME=FILE, got {spec!r}")
        if name in out:
            raise ValueError(f"{option}: {name!r} given twice")
        out[name] = path
    return out


def read_decoded(path: str) -> Tuple[Dict[int, dict], dict]:
    """fairseq generate output -> ({id: {"hyp", "scores"}} of each id's first hypothesis (nats
    are not needed: the US- scores stay in bits), cost {"seconds", "sentences", "tokens"} or {})."""
    out, cost = {}, {}
    for lineno, line in enumerate(read_text_lines(path, newline="lf"), 1):
        m = TRANSLATED.search(line)
        if m:
            cost = {"sentences": int(m.group(1).replace(",", "")),
                    "tokens": int(m.group(2).replace(",", "")), "seconds": float(m.group(3))}
            continue
        head, _, rest = line.partition("\t")
        prefix, _, sid = head.partition("-")
        if not sid.isdigit() or prefix not in ("H", "US"):
            continue
        entry = out.setdefault(int(sid), {})
        if prefix == "H" and "hyp" not in entry:
            parts = rest.split("\t")
            entry["hyp"] = parts[1] if len(parts) > 1 else ""
        elif prefix == "US" and "scores" not in entry:
            try:
                scores = {k: float(v) for k, v in (kv.split("=") for kv in rest.split())}
            except ValueError:
                raise ValueError(f"{path}:{lineno}: a US- line of key=value pairs expected, "
                                 f"got {rest!r}") from None
            if list(scores) != list(SCORES):
                raise ValueError(f"{path}:{lineno}: US- scores {list(scores)}, expected "
                                 f"{list(SCORES)}")
            entry["scores"] = scores
    missing = [sid for sid, e in out.items() if "scores" not in e or "hyp" not in e]
    if not out or missing:
        raise ValueError(f"{path}: no hypotheses with H- and US- lines (generated with "
                         f"--print-sentence-uncertainty?)" if not out else
                         f"{path}: ids {missing[:5]} lack an H- or a US- line")
    return out, cost


def _aligned(decoded: Dict[str, Dict[int, dict]], what: str) -> List[int]:
    ids = None
    for name, d in decoded.items():
        if ids is None:
            ids = sorted(d)
        elif sorted(d) != ids:
            raise ValueError(f"{what}: {name} decoded other sentences than the first method")
    return ids


def sentence_quality(hyps: List[str], refs: List[str]) -> Dict[str, np.ndarray]:
    """Sentence chrF and BLEU (0-100) of every hypothesis against its reference."""
    from sacrebleu.metrics import CHRF

    from fairseq_acvi.metrics.bleu import bleu_from_totals, sentence_stats
    chrf = CHRF()
    return {"chrf": np.array([chrf.sentence_score(h, [r]).score for h, r in zip(hyps, refs)]),
            "bleu": bleu_from_totals(sentence_stats(hyps, refs))}


def uncertainty_of(scores: np.ndarray, name: str) -> np.ndarray:
    """A score oriented as an uncertainty (higher = less sure): −logprob, the others as they are."""
    return -scores if name == "logprob" else scores


def quality_estimation(decoded, refs: List[str], n_resamples: int, seed: int) -> dict:
    ids = _aligned(decoded, "--decoded")
    if len(refs) <= ids[-1]:
        raise ValueError(f"--references has {len(refs)} lines but the output has id {ids[-1]}")
    methods = list(decoded)
    scores = {m: {k: np.array([decoded[m][i]["scores"][k] for i in ids]) for k in SCORES}
              for m in methods}
    quality = {m: sentence_quality([decoded[m][i]["hyp"] for i in ids], [refs[i] for i in ids])
               for m in methods}
    out = {"sentences": len(ids), "quality": {m: {q: float(v.mean()) for q, v in quality[m].items()}
                                              for m in methods}}
    for k in SCORES:
        for q in QUALITIES:
            for cname, corr in CORRELATIONS.items():
                out.setdefault(k, {}).setdefault(q, {})[cname] = paired_bootstrap_methods(
                    lambda m, idx: corr(scores[m][k][idx], quality[m][q][idx]), methods,
                    len(ids), n_resamples, seed=seed)
    return out


def ood_detection(decoded, ood, n_resamples: int, seed: int) -> dict:
    if list(ood) != list(decoded):
        raise ValueError(f"--ood names {list(ood)} must be the --decoded names {list(decoded)}, "
                         f"in the same order")
    ids_in, ids_out = _aligned(decoded, "--decoded"), _aligned(ood, "--ood")
    methods = list(decoded)
    labels = np.r_[np.zeros(len(ids_in), bool), np.ones(len(ids_out), bool)]
    out = {"in_domain": len(ids_in), "out_of_domain": len(ids_out)}
    for k in SCORES:
        values = {m: uncertainty_of(np.r_[[decoded[m][i]["scores"][k] for i in ids_in],
                                          [ood[m][i]["scores"][k] for i in ids_out]], k)
                  for m in methods}
        # a score that is the same for every sentence (I of soft attention: 0) detects nothing:
        # nan ("—"), not the AUROC of its ties, 1/2
        constant = {m for m in methods if np.ptp(values[m]) == 0}
        out[k] = paired_bootstrap_methods(
            lambda m, idx: float("nan") if m in constant else auroc(values[m][idx], labels[idx]),
            methods, labels.size, n_resamples, seed=seed, strata=labels.astype(np.int64))
    return out


def token_measures(tokens: Dict[str, Dict[str, np.ndarray]], n_bins: int, n_resamples: int,
                   seed: int) -> dict:
    methods = list(tokens)
    first = tokens[methods[0]]
    for m in methods[1:]:
        if not np.array_equal(tokens[m]["sentence"], first["sentence"]):
            raise ValueError(f"--tokens: {m} read other tokens than {methods[0]}")
    groups = first["sentence"]

    def score(m, name):
        t = tokens[m]
        if name == "one_minus_confidence":
            return 1.0 - t["confidence"]
        return t.get(name, np.zeros_like(t["confidence"]))

    stats = {"ece": lambda m, idx: expected_calibration_error(tokens[m]["confidence"][idx],
                                                              tokens[m]["correct"][idx], n_bins)}
    for name in TOKEN_SCORES:
        stats[f"auroc_{name}"] = (lambda m, idx, name=name:
                                  auroc(score(m, name)[idx], ~tokens[m]["correct"][idx].astype(bool)))
    everything = np.arange(groups.size)
    out = {"tokens": int(groups.size)}
    for key, stat in stats.items():
        res = {}
        for m in methods:
            value = stat(m, everything)
            # an AUROC of a score that is 0 everywhere (I of one distribution per step) says nothing
            if key.startswith("auroc_") and not np.any(score(m, key[len("auroc_"):]) != 0):
                res[m] = None
                continue
            res[m] = {"value": float(value),
                      "interval": list(bootstrap_interval(lambda idx: stat(m, idx), groups,
                                                          n_resamples, seed=seed))}
            if m != methods[0] and res.get(methods[0]) is not None:
                res[m]["minus_first"] = {
                    "value": float(value - stat(methods[0], everything)),
                    "interval": list(bootstrap_interval(
                        lambda idx: stat(m, idx) - stat(methods[0], idx), groups, n_resamples,
                        seed=seed))}
        out[key] = res
    return out


def _cell(r) -> str:
    if r is None or (isinstance(r["value"], float) and math.isnan(r["value"])):
        return "—"
    lo, hi = r["interval"]
    text = f"{r['value']:.3f} [{lo:.3f}, {hi:.3f}]"
    if "minus_first" in r:
        d = r["minus_first"]
        text += ("; Δ —" if math.isnan(d["value"]) else
                 f"; Δ {d['value']:+.3f} [{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}]")
    return text


def markdown(report: dict) -> str:
    lines = ["# Uncertainty measures", "",
             "Every cell: value [95 % interval] over resamples of the sentences; Δ: the method "
             "minus the first one, paired. Produced by "
             "`python -m fairseq_acvi.generation.uncertainty_measures`.", ""]
    methods = report["methods"]
    if "tokens" in report:
        t = report["tokens"]
        keys = ["ece"] + [f"auroc_{n}" for n in TOKEN_SCORES]
        lines += [f"## Token level (teacher-forced, {t['tokens']} tokens)", "",
                  "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
        for m in report["token_methods"]:
            lines.append(f"| {m} | " + " | ".join(_cell(t[k].get(m)) for k in keys) + " |")
        lines.append("")
    if "quality_estimation" in report:
        qe = report["quality_estimation"]
        lines += [f"## Sentence-level quality estimation ({qe['sentences']} sentences)", "",
                  "Correlation of each score with the sentence's chrF / BLEU (an uncertainty "
                  "should correlate negatively, logprob positively). Corpus means: "
                  + "; ".join(f"{m} chrF {qe['quality'][m]['chrf']:.2f}, BLEU "
                              f"{qe['quality'][m]['bleu']:.2f}" for m in methods) + ".", ""]
        for q in QUALITIES:
            for c in CORRELATIONS:
                lines += [f"### {c.capitalize()} with sentence {q}", "",
                          "| method | " + " | ".join(SCORES) + " |",
                          "|---" * (len(SCORES) + 1) + "|"]
                for m in methods:
                    lines.append(f"| {m} | " + " | ".join(_cell(qe[k][q][c][m]) for k in SCORES)
                                 + " |")
                lines.append("")
    if "ood_detection" in report:
        od = report["ood_detection"]
        lines += [f"## Out-of-domain detection ({od['in_domain']} in-domain, "
                  f"{od['out_of_domain']} out-of-domain sentences)", "",
                  "AUROC of each score (−logprob for logprob) ranking out-of-domain sentences "
                  "above in-domain ones.", "",
                  "| method | " + " | ".join(SCORES) + " |", "|---" * (len(SCORES) + 1) + "|"]
        for m in methods:
            lines.append(f"| {m} | " + " | ".join(_cell(od[k][m]) for k in SCORES) + " |")
        lines.append("")
    if report.get("cost"):
        base = report["cost"].get(methods[0], {}).get("seconds") if methods else None
        lines += ["## Cost", "", "| method | decode seconds | sentences/s | × first |",
                  "|---|---|---|---|"]
        for m, c in report["cost"].items():
            if not c:
                lines.append(f"| {m} | — | — | — |")
                continue
            ratio = f"{c['seconds'] / base:.2f}" if base else "—"
            speed = f"{c['sentences'] / c['seconds']:.1f}" if c["seconds"] else "—"
            lines.append(f"| {m} | {c['seconds']:.1f} | {speed} | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    args = build_parser().parse_args(argv)
    decoded_files = named_files(args.decoded, "--decoded")
    ood_files = named_files(args.ood, "--ood")
    token_files = named_files(args.tokens, "--tokens")
    if not decoded_files and not token_files:
        raise SystemExit("give --decoded (with --references) and/or --tokens")
    if decoded_files and not args.references:
        raise SystemExit("--decoded needs --references")
    if ood_files and not decoded_files:
        raise SystemExit("--ood needs the in-domain --decoded output of the same methods")
    report = {"methods": list(decoded_files), "bootstrap_resamples": args.bootstrap,
              "seed": args.seed}
    if decoded_files:
        decoded, cost = {}, {}
        for name, path in decoded_files.items():
            decoded[name], cost[name] = read_decoded(path)
        refs = read_text_lines(args.references, newline="lf")
        report["cost"] = cost
        report["quality_estimation"] = quality_estimation(decoded, refs, args.bootstrap, args.seed)
        if ood_files:
            ood = {name: read_decoded(path)[0] for name, path in ood_files.items()}
            report["ood_detection"] = ood_detection(decoded, ood, args.bootstrap, args.seed)
    if token_files:
        tokens = {}
        for name, path in token_files.items():
            with np.load(path) as z:
                tokens[name] = {k: z[k] for k in z.files}
        report["token_methods"] = list(tokens)
        report["tokens"] = token_measures(tokens, args.bins, args.bootstrap, args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "measures.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out_dir, "measures.md"), "w") as f:
        f.write(markdown(report))
    print("wrote", os.path.join(args.out_dir, "measures.md"))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
