"""The uncertainty study's per-seed tables read together (docs/uncertainty.md §8): each figure's
mean ± std over the seeds, the paired differences to the base method counted per seed, and the
verdicts computed from those counts. The page that shows them:
:mod:`fairseq_acvi.generation.uncertainty_report`.

The input is :mod:`fairseq_acvi.generation.uncertainty_measures`' ``measures.json``, one per seed
(:func:`read_seed`); its first method (the study's ``acvi``) is the base of every difference. The
questions and the direction in which each of their figures is better (:data:`QUESTIONS`):

* token calibration (§4, teacher-forced): ECE, lower is better; AUROC of wrong-token detection by
  1 − confidence, H[p̄], I and I_members, higher is better;
* sentence quality estimation (§7, §8): Pearson's and Spearman's correlation of each ``US-`` score
  with sentence chrF and BLEU, stored as computed (the score as it is, not oriented): an
  uncertainty (``mean_mi``, ``max_mi``, ``entropy``) is better the more negative its correlation,
  ``logprob`` the more positive;
* out-of-domain detection (§8): AUROC of each score, stored oriented as an uncertainty (−logprob
  for ``logprob``), higher is better;
* cost (:func:`cost_table`): each method's decode time, its ratio to the same seed's single K = 1
  pass (soft attention's decode) and the base's time over the method's.

One seed's difference is significant when its 95 % interval excludes 0 (:func:`call`). On one
figure the base is *better* than a baseline when more than half of the seeds say so and none the
opposite, *worse* likewise, *mixed* when seeds disagree, else *not distinguishable*
(:func:`figure_verdict`); on a question, *better* when at least half of the figures compared are
better and none worse or mixed, *worse* likewise, *mixed* when figures disagree, else *not
distinguishable* (:func:`question_verdict`): with 16 correlations and uncorrected intervals, one
significant figure alone is no verdict. A method named ``shared`` (the ensemble of the soft seeds) is
the same model in every seed's table: its own figures count once (n = 1, no std); its differences
to the base count once per seed, against each seed's base model. Malformed input: ValueError
naming the file.
"""
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_acvi.data.json_numbers import read_json
from fairseq_acvi.generation.uncertainty_measures import (CORRELATIONS, QUALITIES, SCORES,
                                                          TOKEN_SCORES)

#: the order in which the verdict takes the baselines (others follow in the tables' order)
BASELINE_ORDER = ("mcdrop", "ensemble", "soft")
#: a shared method's figure may differ between seed tables by this much (float rounding)
SHARED_TOLERANCE = 1e-6
TOKEN_LABELS = {"one_minus_confidence": "1 − confidence", "entropy": "H[p̄]",
                "mutual_information": "I", "members_mutual_information": "I_members"}
RUN_KEYS = ("arch", "max_epoch", "patience", "lr", "max_tokens", "extra_train_args")

#: question -> (title, [(figure key, label, direction: +1 higher is better, −1 lower)])
QUESTIONS: Dict[str, Tuple[str, List[Tuple[str, str, int]]]] = {
    "tokens": ("Token calibration and wrong-token detection (teacher-forced test2016)",
               [("ece", "ECE", -1)]
               + [(f"auroc_{s}", f"AUROC {TOKEN_LABELS[s]}", +1) for s in TOKEN_SCORES]),
    "quality_estimation": (
        "Sentence quality estimation (test2016)",
        [(f"{s}/{q}/{c}", f"{s} ~ {q} ({c})", +1 if s == "logprob" else -1)
         for s in SCORES for q in QUALITIES for c in CORRELATIONS]),
    "ood_detection": ("Out-of-domain detection (test2016 against COCO)",
                      [(s, f"AUROC {s}", +1) for s in SCORES]),
}


# ---------------------------------------------------------------------------------------------
# reading


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _finite(x) -> bool:
    return _is_num(x) and math.isfinite(x)


def _walk(path: str, obj, keys: Sequence[str]):
    for i, k in enumerate(keys):
        if not isinstance(obj, dict) or k not in obj:
            raise ValueError(f"{path}: no {'.'.join(keys[:i + 1])} (an uncertainty_measures "
                             f"measures.json expected)")
        obj = obj[k]
    return obj


def _figure(path: str, where: str, entry) -> Optional[dict]:
    """A measures.json figure -> {"value", "interval": [lo, hi], "delta": {"value", "interval"} or
    None}, or None for a figure the measures left out (nan stays nan)."""
    if entry is None:
        return None

    def ok(e):
        return (isinstance(e, dict) and _is_num(e.get("value"))
                and isinstance(e.get("interval"), list) and len(e["interval"]) == 2
                and all(_is_num(x) for x in e["interval"]))
    if not ok(entry) or ("minus_first" in entry and not ok(entry["minus_first"])):
        raise ValueError(f"{path}: {where}: a figure {{value, interval: [lo, hi], minus_first}} "
                         f"expected, got {str(entry)[:80]!r}")
    d = entry.get("minus_first")
    return {"value": float(entry["value"]), "interval": [float(x) for x in entry["interval"]],
            "delta": None if d is None else {"value": float(d["value"]),
                                             "interval": [float(x) for x in d["interval"]]}}


def seed_label(path: str, index: int) -> Tuple[str, Optional[int]]:
    """The seed of a measures.json from the nearest ``seed<N>`` folder of its path -> ("seed<N>",
    N); ("file<index>", None) when there is none."""
    for part in reversed(os.path.normpath(os.path.abspath(path)).split(os.sep)[:-1]):
        m = re.fullmatch(r"seed(\d+)", part)
        if m:
            return part, int(m.group(1))
    return f"file{index + 1}", None


def read_seed(path: str, index: int = 0) -> dict:
    """One seed's measures.json -> {"label", "seed", "path", "methods", "base", "figures":
    {question: {figure key: {method: figure or None}}}, "seconds": {method: float},
    "quality": {method: {"chrf", "bleu"}}}. ValueError naming ``path`` when it is missing or
    malformed."""
    rep = read_json(path, "the measures of one seed")
    if not isinstance(rep, dict):
        raise ValueError(f"{path}: a JSON object expected (uncertainty_measures' measures.json)")
    methods = rep.get("methods")
    token_methods = rep.get("token_methods", methods)
    for key, names in (("methods", methods), ("token_methods", token_methods)):
        if (not isinstance(names, list) or not all(isinstance(m, str) and m for m in names)
                or len(set(names)) != len(names)):
            raise ValueError(f"{path}: {key} must be a list of distinct method names, got "
                             f"{names!r}")
    if not methods and not token_methods:
        raise ValueError(f"{path}: no methods")
    label, seed = seed_label(path, index)
    out = {"label": label, "seed": seed, "path": path, "methods": list(methods or token_methods),
           "figures": {}, "seconds": {}, "quality": {}}
    if "tokens" in rep:
        out["figures"]["tokens"] = {
            key: {m: _figure(path, f"tokens.{key}.{m}", _walk(path, rep, ["tokens", key, m]))
                  for m in token_methods}
            for key, _, _ in QUESTIONS["tokens"][1]}
    for q in ("quality_estimation", "ood_detection"):
        if q not in rep:
            continue
        figs = {}
        for key, _, _ in QUESTIONS[q][1]:
            keys = [q] + key.split("/")
            figs[key] = {m: _figure(path, ".".join(keys + [m]), _walk(path, rep, keys + [m]))
                         for m in methods}
        out["figures"][q] = figs
    for m, q in (rep.get("quality_estimation", {}).get("quality") or {}).items():
        if isinstance(q, dict) and all(_is_num(q.get(k)) for k in QUALITIES):
            out["quality"][m] = {k: float(q[k]) for k in QUALITIES}
    cost = rep.get("cost") or {}
    if not isinstance(cost, dict):
        raise ValueError(f"{path}: cost must be an object of {{method: {{seconds, ...}}}}")
    for m, c in cost.items():
        if c in ({}, None):
            continue
        if not isinstance(c, dict) or not _finite(c.get("seconds")) or c["seconds"] < 0:
            raise ValueError(f"{path}: cost.{m}: {{seconds, sentences, tokens}} expected, got "
                             f"{str(c)[:80]!r}")
        out["seconds"][m] = float(c["seconds"])
    order = out["methods"] + [m for m in token_methods if m not in out["methods"]]
    out["base"], out["methods"] = order[0], order
    return out


def read_runs(runs_dir: str, seeds: Sequence[int]) -> Dict[str, dict]:
    """{"<context>_seed<N>": run.json's fields (RUN_KEYS, "path")} for soft and acvi of every seed,
    from recipes/mt_multi30k.sh's ``runs_dir/<context>_seed<N>/run.json``. ValueError naming a
    missing or malformed one."""
    out = {}
    for s in seeds:
        for context in ("acvi", "soft"):
            path = os.path.join(runs_dir, f"{context}_seed{s}", "run.json")
            rec = read_json(path, f"the {context} training of seed {s}")
            if not isinstance(rec, dict) or not isinstance(rec.get("arch"), str):
                raise ValueError(f"{path}: a run.json with an arch expected")
            if rec.get("context", context) != context or rec.get("seed", s) != s:
                raise ValueError(f"{path}: context {rec.get('context')!r} seed "
                                 f"{rec.get('seed')!r}, expected {context} seed {s}")
            out[f"{context}_seed{s}"] = {**{k: rec.get(k) for k in RUN_KEYS}, "path": path}
    return out


# ---------------------------------------------------------------------------------------------
# numbers


def mean_std(values: Sequence[float]) -> dict:
    """{"mean", "std" (sample std, None for n < 2), "n"} of the finite values (mean None if none)."""
    v = [x for x in values if _finite(x)]
    n = len(v)
    if not n:
        return {"mean": None, "std": None, "n": 0}
    mean = sum(v) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n}


def call(delta: Optional[dict], direction: int) -> Optional[str]:
    """One seed's paired difference (a method minus the base) -> "better" (the method is better
    than the base: the 95 % interval excludes 0 on the side ``direction`` favours), "worse", "same"
    (the interval holds 0), or None when there is no finite difference."""
    if delta is None or not all(_finite(x) for x in [delta["value"]] + delta["interval"]):
        return None
    lo, hi = delta["interval"]
    if lo > 0 or hi < 0:
        return "better" if (lo > 0) == (direction > 0) else "worse"
    return "same"


def _own_figure(values: List[Tuple[str, float]], shared: bool, warnings: List[str], what: str):
    finite = [v for _, v in values if _finite(v)]
    if not shared:
        return mean_std(finite)
    if finite and max(finite) - min(finite) > SHARED_TOLERANCE:
        warnings.append(f"{what}: the shared model's figure differs between the seed tables "
                        f"({', '.join(f'{s} {v:.6g}' for s, v in values)}); their mean is shown")
    return {**mean_std(finite), "std": None, "n": 1 if finite else 0, "shared": True}


def aggregate(seeds: List[dict], shared: Sequence[str] = ("ensemble",),
              single_pass: str = "soft") -> dict:
    """The seed tables (:func:`read_seed`) -> the report as a JSON-able dict (no nan: None)."""
    base = seeds[0]["base"]
    for s in seeds:
        if s["base"] != base:
            raise ValueError(f"{s['path']}: first method {s['base']!r}, but {seeds[0]['path']}'s "
                             f"is {base!r} (the base of every difference must be the same)")
    labels = [s["label"] for s in seeds]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise ValueError(f"--measures: {', '.join(dup)} given twice "
                         f"({', '.join(s['path'] for s in seeds if s['label'] in dup)})")
    methods = []
    for s in seeds:
        methods += [m for m in s["methods"] if m not in methods]
    warnings: List[str] = []
    questions = {}
    for q, (title, figs) in QUESTIONS.items():
        have = [s for s in seeds if q in s["figures"]]
        if not have:
            continue
        rows = [m for m in methods if any(m in s["figures"][q][figs[0][0]] for s in have)]
        out_figs = []
        for key, label, direction in figs:
            per_method = {}
            for m in rows:
                entries = [(s["label"], s["figures"][q][key].get(m)) for s in have
                           if m in s["figures"][q][key]]
                own = _own_figure([(lab, e["value"]) for lab, e in entries if e is not None],
                                  m in shared, warnings, f"{q} {label} of {m}")
                rec = {**own, "seeds": {lab: (e["value"] if e and _finite(e["value"]) else None)
                                        for lab, e in entries}}
                if m != base:
                    per_seed = {lab: (None if e is None or e["delta"] is None else
                                      {"value": _none_nan(e["delta"]["value"]),
                                       "interval": [_none_nan(x) for x in e["delta"]["interval"]],
                                       "call": call(e["delta"], direction)})
                                for lab, e in entries}
                    calls = [d["call"] for d in per_seed.values() if d and d["call"]]
                    rec["vs_base"] = {"n": len(calls), "better": calls.count("better"),
                                      "worse": calls.count("worse"),
                                      "delta": mean_std([d["value"] for d in per_seed.values()
                                                         if d and d["value"] is not None]),
                                      "seeds": per_seed}
                per_method[m] = rec
            out_figs.append({"key": key, "label": label, "direction": direction,
                             "methods": per_method})
        questions[q] = {"title": title, "seeds": [s["label"] for s in have], "methods": rows,
                        "figures": out_figs}
    cost = cost_table(seeds, methods, base, shared, single_pass, warnings)
    quality = {m: {k: mean_std([s["quality"][m][k] for s in seeds if m in s["quality"]])
                   for k in QUALITIES} for m in methods}
    report = {"base": base, "methods": methods, "shared": [m for m in shared if m in methods],
              "single_pass": single_pass,
              "seeds": [{"label": s["label"], "seed": s["seed"], "path": s["path"],
                         "methods": s["methods"]} for s in seeds],
              "questions": questions, "cost": cost, "quality": quality, "warnings": warnings}
    report["verdict"] = verdicts(report)
    return report


def _none_nan(x: float) -> Optional[float]:
    return x if _finite(x) else None


def cost_table(seeds, methods, base, shared, single_pass, warnings) -> dict:
    """{method: {"seconds", "times_single_pass", "base_over_method": mean_std dicts}}: decode
    seconds, their ratio to the same seed's single K = 1 pass, and the base's time over the
    method's, per seed (a shared method's seconds counted once)."""
    out = {}
    for m in methods:
        secs = [(s["label"], s["seconds"][m]) for s in seeds if m in s["seconds"]]
        if not secs:
            continue
        ratio = [s["seconds"][m] / s["seconds"][single_pass] for s in seeds
                 if m in s["seconds"] and s["seconds"].get(single_pass)]
        over = [s["seconds"][base] / s["seconds"][m] for s in seeds
                if m in s["seconds"] and base in s["seconds"] and s["seconds"][m]]
        out[m] = {"seconds": _own_figure(secs, m in shared, warnings, f"decode seconds of {m}"),
                  "times_single_pass": mean_std(ratio),
                  "base_over_method": mean_std(over), "per_seed": dict(secs)}
    return out


# ---------------------------------------------------------------------------------------------
# verdict


def figure_verdict(n: int, base_better: int, base_worse: int) -> str:
    """The base against one baseline on one figure over n seeds: "better" when the base is
    significantly better in more than half of them and worse in none, "worse" likewise, "mixed"
    when both occur, else "not distinguishable"; "not compared" when n is 0."""
    if n == 0:
        return "not compared"
    if base_better and base_worse:
        return "mixed"
    if base_better > n / 2:
        return "better"
    if base_worse > n / 2:
        return "worse"
    return "not distinguishable"


def question_verdict(calls: Sequence[str]) -> str:
    """The figures' verdicts of one question -> "better" (at least half of the figures compared
    better, none worse or mixed), "worse" likewise, "mixed" (figures disagree), "not
    distinguishable" (otherwise) or "not compared" (no figure compared)."""
    compared = [c for c in calls if c != "not compared"]
    if not compared:
        return "not compared"
    good, bad = compared.count("better"), compared.count("worse")
    if (good and bad) or "mixed" in compared:
        return "mixed"
    if good and 2 * good >= len(compared):
        return "better"
    if bad and 2 * bad >= len(compared):
        return "worse"
    return "not distinguishable"


def baselines(methods: Sequence[str], base: str) -> List[str]:
    others = [m for m in methods if m != base]
    return [m for m in BASELINE_ORDER if m in others] + [m for m in others
                                                        if m not in BASELINE_ORDER]


def verdicts(report: dict) -> Dict[str, dict]:
    """{baseline: {question: {"verdict", "figures": [{"label", "verdict", "n", "base_better",
    "base_worse"}]}, "cost": {...}}}, from the base's side (the counts of the tables are from the
    row's side: the base is better where the baseline is worse)."""
    base, out = report["base"], {}
    for b in baselines(report["methods"], base):
        res = {}
        for q, table in report["questions"].items():
            figs = []
            for f in table["figures"]:
                vs = f["methods"].get(b, {}).get("vs_base") or {"n": 0, "better": 0, "worse": 0}
                figs.append({"label": f["label"], "n": vs["n"], "base_better": vs["worse"],
                             "base_worse": vs["better"],
                             "verdict": figure_verdict(vs["n"], vs["worse"], vs["better"])})
            res[q] = {"verdict": question_verdict([f["verdict"] for f in figs]), "figures": figs}
        c_base, c_b = report["cost"].get(base), report["cost"].get(b)
        if c_base and c_b and c_b["base_over_method"]["n"]:
            over = c_b["base_over_method"]
            per_seed = [report["cost"][base]["per_seed"][lab] / c_b["per_seed"][lab]
                        for lab in c_b["per_seed"] if lab in c_base["per_seed"]
                        and c_b["per_seed"][lab]]
            word = ("cheaper" if all(r < 1 for r in per_seed) else
                    "dearer" if all(r > 1 for r in per_seed) else "about as costly")
            res["cost"] = {"verdict": word, "base_over_method": over,
                           "base_times_single_pass": c_base["times_single_pass"],
                           "method_times_single_pass": c_b["times_single_pass"]}
        else:
            res["cost"] = {"verdict": "not compared"}
        out[b] = res
    return out
