"""Translation report: collect the runs of ``recipes/mt_multi30k.sh`` into tables and charts.

Usage (from the repository root)::

    python -m fairseq_acvi.cli.mt_report RUNS [RUNS ...] --out-dir docs/results/multi30k_DATE \\
        [--title "..."] [--compare lstm soft] [--merge docs/results/multi30k_EARLIER/results.json]

It reads only what the stock CLIs and the recipe leave in each run folder (any folder holding a
``run.json``): ``train.log`` (``fairseq-train --log-format json``: the per-epoch ``valid`` and
``train`` records), ``bleu_<name>.json`` (``data_scripts/score_mt.py``) and ``validate_<name>.log``
(``fairseq-validate``). A run is named by its variant — ``context`` or ``context-tag`` — and seed.

Per run: whether its training finished (fairseq's "done training" line; the means over seeds take
finished runs only, and the others are listed apart with their epoch so far), the best epoch
(lowest validation likelihood loss; ``nll_loss``, or ``loss`` for fairseq's ``cross_entropy``,
which logs no separate likelihood), its validation perplexity 2^nll,
the KL parts, ‖m_t‖² and mean σ² the ``elbo`` criterion logged for that epoch (ACVI; per target
token, nats), the parameter count fairseq-train logs, training words/s (median over epochs) and
wall time, BLEU per decoded split (tokenised lower-cased ``bleu_tok`` and detokenised sacreBLEU
``bleu_detok``), the Monte-Carlo sweep (``<split>_K<k>``) and source use
(``valid_ablate-<zero|shuffle>``: the BLEU and likelihood lost when the context is replaced,
against the decode ``ablate.json`` names: for ACVI the mean context, K = 0), and the paired
bootstrap intervals ``score_mt.py --against`` stored in a ``bleu_<name>.json`` (``paired``; the
recipe pairs a stochastic model's decodes with its mean-context decode ``<split>_K0``).

Outputs in ``--out-dir``: ``results.json`` (every run and the per-variant mean ± std over seeds),
``report.md`` (the tables), and PNG charts: ``bleu.png`` (test BLEU per variant, error bars = std
over seeds), ``valid_curves.png`` (validation perplexity per epoch), ``kl_curves.png`` (ACVI's KL
parts and σ² per epoch) and ``mc_sweep.png`` (BLEU against K). ``--compare A B`` prints B against
A (perplexity ratio, BLEU difference, speed ratio) — the side-by-side baseline check of
``benchmarks/multi30k_soft_vs_lstm.sh``. The report also gives every variant's BLEU minus
``soft``'s seed by seed. ``--merge`` adds the runs an earlier report recorded in its
``results.json`` (run folders are not kept, e.g. from another machine or an earlier day).
"""
import argparse
import glob
import json
import logging
import os
import re
import statistics
import sys
from typing import Dict, List, Optional

from fairseq_acvi.modules.context import DEFAULT_MC_SAMPLES

SPLITS = ("valid", "test2016", "test2017")
#: the variant every other one is compared with, seed by seed, in the report
PAIRED_BASE = "soft"
ABLATIONS = ("zero", "shuffle")
#: the latent-context diagnostics kept per run (``kl_true`` is derived from the two parts)
_LOGGED_KL = ("kl", "kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var")
_END_KL = ("kl", "kl_true") + _LOGGED_KL[1:]
_RECORD = re.compile(r"\|\s*(train|valid)\s*\|\s*(\{.*\})\s*$")


class ReportError(ValueError):
    """A run folder that cannot be read; the message names the file (and line)."""


def parse_train_log(path: str) -> Dict[str, Dict[int, dict]]:
    """Per-epoch ``train`` and ``valid`` records of a fairseq json log: {"train": {epoch: rec}, ...}.

    A resumed run appends to the same log and may repeat an epoch: the last record of an epoch
    wins. Values are converted to float; a malformed record is an error naming the line.
    """
    out: Dict[str, Dict[int, dict]] = {"train": {}, "valid": {}}
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            m = _RECORD.search(line)
            if not m:
                continue
            try:
                rec = json.loads(m.group(2))
            except json.JSONDecodeError as e:
                raise ReportError(f"{path}:{lineno}: malformed {m.group(1)} record ({e})") from None
            if "epoch" not in rec:       # per-interval records of a long epoch carry no epoch key
                continue
            kind = m.group(1)
            prefix = kind + "_"
            vals = {}
            for k, v in rec.items():
                try:
                    vals[k[len(prefix):] if k.startswith(prefix) else k] = float(v)
                except (TypeError, ValueError):
                    pass
            out[kind][int(rec["epoch"])] = vals
    return out


_PARAMS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")


def model_parameters(path: str) -> Optional[int]:
    """The model's parameter count as ``fairseq-train`` logs it at start ("num. shared model params:
    9,029,555 (num. trained: …)"); the last such line of a resumed run's log; None if absent."""
    found = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PARAMS.search(line)
            if m:
                found = int(m.group(1).replace(",", ""))
    return found


_DONE = "done training in "   # fairseq-train's last line once its epochs (or early stopping) ended


def training_finished(path: str) -> bool:
    """Whether a ``fairseq-train`` log ends its training: it holds fairseq's "done training in …"
    line, written once the last epoch or early stopping is reached (a run stopped part-way, or
    still training, has none; a resumed run's log gains it when the resumed process ends)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(_DONE in line for line in f)


def parse_validate_log(path: str) -> Optional[dict]:
    """The (last) validation record of a ``fairseq-validate --log-format json`` log, or None."""
    rec = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _RECORD.search(line)
            if m and m.group(1) == "valid":
                rec = {k[len("valid_"):] if k.startswith("valid_") else k: float(v)
                       for k, v in json.loads(m.group(2)).items()
                       if isinstance(v, (int, float, str)) and _is_number(v)}
    return rec


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def likelihood_bits(rec: dict) -> Optional[float]:
    """Per-token likelihood loss in bits: ``nll_loss`` when logged (elbo), else ``loss``."""
    if rec is None:
        return None
    return rec.get("nll_loss", rec.get("loss"))


def training_wall(epochs: List[dict]) -> Optional[float]:
    """Training seconds over the epochs' ``train`` records, summed over resumes: fairseq's
    ``wall`` starts again in a resumed process (the part of an epoch a kill cut short, which
    logged no record, is not counted)."""
    walls = [e["train_wall"] for e in epochs if e.get("train_wall") is not None]
    done, prev = 0.0, 0.0
    for w in walls:
        if w < prev:
            done += prev
        prev = w
    return done + prev if walls else None


def read_run(run_dir: str) -> dict:
    """Everything the report needs from one run folder (see the module docstring)."""
    meta_path = os.path.join(run_dir, "run.json")
    try:
        meta = json.load(open(meta_path, encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportError(f"{meta_path}: not valid JSON ({e})") from None
    for key in ("pair", "context", "seed"):
        if key not in meta:
            raise ReportError(f"{meta_path}: missing key {key!r}")
    tag = meta.get("tag") or ""
    run = {"dir": run_dir, "pair": meta["pair"], "context": meta["context"], "tag": tag,
           "variant": meta["context"] + (f"-{tag}" if tag else ""), "seed": int(meta["seed"]),
           "meta": meta, "epochs": [], "bleu": {}, "validate": {}}
    log_path = os.path.join(run_dir, "train.log")
    if os.path.exists(log_path):
        recs = parse_train_log(log_path)
        run["parameters"] = model_parameters(log_path)
        run["finished"] = training_finished(log_path)
        for ep in sorted(recs["valid"]):
            v = recs["valid"][ep]
            t = recs["train"].get(ep, {})
            bits = likelihood_bits(v)
            row = {"epoch": ep, "valid_ppl": 2 ** bits if bits is not None else None,
                   "train_wps": t.get("wps"), "train_wall": t.get("wall"),
                   "train_clip": t.get("clip"), "train_gnorm": t.get("gnorm")}
            for k in _LOGGED_KL:
                if k in v:
                    row[k] = v[k]
            if "kl_mean_part" in v and "kl_var_part" in v:
                # the KL itself; ``kl`` is the objective term (≥ it under --acvi-free-bits)
                row["kl_true"] = v["kl_mean_part"] + v["kl_var_part"]
            run["epochs"].append(row)
    scored = [e for e in run["epochs"] if e["valid_ppl"] is not None]
    if scored:
        best = min(scored, key=lambda e: (e["valid_ppl"], e["epoch"]))
        run["best_epoch"] = best["epoch"]
        run["valid_ppl"] = best["valid_ppl"]
        run["end"] = {k: best[k] for k in _END_KL if k in best}
        wps = [e["train_wps"] for e in run["epochs"] if e.get("train_wps")]
        run["train_wps"] = statistics.median(wps) if wps else None
        run["train_wall_s"] = training_wall(run["epochs"])
        run["epochs_trained"] = run["epochs"][-1]["epoch"]
    for path in sorted(glob.glob(os.path.join(run_dir, "bleu_*.json"))):
        name = os.path.basename(path)[len("bleu_"):-len(".json")]
        try:
            run["bleu"][name] = json.load(open(path, encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}: not valid JSON ({e})") from None
    for path in sorted(glob.glob(os.path.join(run_dir, "validate_*.log"))):
        name = os.path.basename(path)[len("validate_"):-len(".log")]
        rec = parse_validate_log(path)
        if rec is not None and likelihood_bits(rec) is not None:
            run["validate"][name] = {"ppl": 2 ** likelihood_bits(rec), **rec}
    ablate_path = os.path.join(run_dir, "ablate.json")
    if os.path.exists(ablate_path):   # the decode the ablations compare with (ACVI: valid_K0)
        with open(ablate_path, encoding="utf-8") as f:
            run["ablate_base"] = json.load(f).get("base", "valid")
    run["source_use"] = source_use(run)
    run["mc_sweep"] = mc_sweep(run)
    return run


def source_use(run: dict) -> Dict[str, dict]:
    """BLEU and likelihood lost on validation when the context is ablated (zero / shuffle)."""
    out = {}
    base = run["bleu"].get(run.get("ablate_base", "valid"))
    base_v = run["validate"].get("valid")
    for ab in ABLATIONS:
        name = f"valid_ablate-{ab}"
        entry = {}
        if base is not None and name in run["bleu"]:
            entry["bleu"] = run["bleu"][name]["bleu_tok"]
            entry["bleu_drop"] = base["bleu_tok"] - run["bleu"][name]["bleu_tok"]
        if base_v is not None and name in run["validate"]:
            entry["ppl"] = run["validate"][name]["ppl"]
            entry["ppl_ratio"] = run["validate"][name]["ppl"] / base_v["ppl"]
        if entry:
            out[ab] = entry
    return out


STOCHASTIC_CONTEXTS = ("acvi",)   # decoded by averaging K context samples (recipes/mt_multi30k.sh)


def default_mc_samples(run: dict) -> Optional[int]:
    """K of a stochastic run's own decode (``<split>``): ``--mc-samples`` of its training command,
    else the presets' default; None for a deterministic context."""
    if run["context"] not in STOCHASTIC_CONTEXTS:
        return None
    m = re.search(r"--mc-samples[= ](\d+)", run["meta"].get("extra_train_args") or "")
    return int(m.group(1)) if m else DEFAULT_MC_SAMPLES


def mc_sweep(run: dict) -> Dict[str, Dict[int, float]]:
    """{split: {K: bleu_tok}} from the ``<split>_K<k>`` decodes, plus the run's own decode
    ``<split>`` at its default K (:func:`default_mc_samples`) for every split that has a sweep."""
    out: Dict[str, Dict[int, float]] = {}
    for name, b in run["bleu"].items():
        m = re.fullmatch(r"(\w+?)_K(\d+)", name)
        if m:
            out.setdefault(m.group(1), {})[int(m.group(2))] = b["bleu_tok"]
    k_default = default_mc_samples(run)
    if k_default is not None:
        for split, by_k in out.items():
            if k_default not in by_k and split in run["bleu"]:
                by_k[k_default] = run["bleu"][split]["bleu_tok"]
    return out


def find_runs(roots: List[str]) -> List[dict]:
    dirs = []
    for root in roots:
        if not os.path.isdir(root):
            raise ReportError(f"{root}: no such folder")
        for dirpath, _, files in os.walk(root):
            if "run.json" in files:
                dirs.append(dirpath)
    if not dirs:
        raise ReportError(f"no run folder (with a run.json) under {', '.join(roots)}")
    return [read_run(d) for d in sorted(dirs)]


def load_merged(paths: List[str]) -> List[dict]:
    """Runs recorded in earlier reports' ``results.json`` (``--merge``): a run whose folder is
    gone (e.g. trained on another machine) still counts in the tables, exactly as reported then."""
    runs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                recorded = json.load(f)
        except FileNotFoundError:
            raise ReportError(f"{path}: no such file (--merge takes results.json files)") from None
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(recorded, dict) or not isinstance(recorded.get("runs"), list):
            raise ReportError(f"{path}: not an mt_report results.json (no 'runs' list)")
        for i, r in enumerate(recorded["runs"]):
            missing = [k for k in ("pair", "variant", "seed", "meta", "bleu") if k not in r]
            if missing:
                raise ReportError(f"{path}: run {i} lacks {', '.join(missing)}")
            r = dict(r, dir=None, source=path)
            r.setdefault("validate", {})
            r.setdefault("source_use", {})
            # JSON turned the integer K of the Monte-Carlo sweep into strings
            r["mc_sweep"] = {s: {int(k): b for k, b in by_k.items()}
                             for s, by_k in (r.get("mc_sweep") or {}).items()}
            runs.append(r)
    return runs


def combine_runs(found: List[dict], merged: List[dict]) -> List[dict]:
    """Runs found in folders plus merged ones; one (pair, variant, seed) may appear only once."""
    seen: Dict[tuple, str] = {}
    for r in found + merged:
        key = (r["pair"], r["variant"], r["seed"])
        where = r["dir"] or f"{r['source']} ({r.get('run', '?')})"
        if key in seen:
            raise ReportError(f"{key[0]} {key[1]} seed {key[2]} appears twice: in {seen[key]} "
                              f"and in {where}")
        seen[key] = where
    return found + merged


def mean_std(values: List[float]) -> Optional[dict]:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "n": len(values)}


def wps_device(rs: List[dict]) -> str:
    """The device whose runs give a variant's words/s: words/s of different devices do not
    average. The CPU when any run used it (the reference machine), else the most common one."""
    devices = [r["meta"].get("device", "cpu") for r in rs]
    return "cpu" if "cpu" in devices else max(sorted(set(devices)), key=devices.count)


def _unfinished(r: Dict) -> str:
    """'VARIANT seed S at epoch E (PPL)' of an unfinished run, or '… before its first epoch ended'."""
    if not r.get("epochs_trained"):
        return f"{r['variant']} seed {r['seed']} before its first epoch ended"
    return f"{r['variant']} seed {r['seed']} at epoch {r['epochs_trained']} ({_num(r.get('valid_ppl'))})"


def is_finished(run: dict) -> bool:
    """A run whose training ended (:func:`training_finished`); runs merged from a report written
    before this was recorded count as finished, as they did then."""
    return run.get("finished", True) is not False


def aggregate(runs: List[dict]) -> Dict[str, Dict[str, dict]]:
    """{pair: {variant: {metric: mean/std/n, "seeds": [...]}}} over the seeds of a variant, of
    the finished runs only: a run stopped part-way would enter the means with its best epoch so
    far (the report lists it apart, and draws its curves)."""
    groups: Dict[str, Dict[str, List[dict]]] = {}
    for r in filter(is_finished, runs):
        groups.setdefault(r["pair"], {}).setdefault(r["variant"], []).append(r)
    out: Dict[str, Dict[str, dict]] = {}
    for pair, variants in groups.items():
        for variant, rs in variants.items():
            device = wps_device(rs)
            agg = {"seeds": sorted(r["seed"] for r in rs),
                   "valid_ppl": mean_std([r.get("valid_ppl") for r in rs]),
                   "train_wps": mean_std([r.get("train_wps") for r in rs
                                          if r["meta"].get("device", "cpu") == device]),
                   "train_wps_device": device}
            for split in SPLITS:
                for key in ("bleu_tok", "bleu_detok"):
                    agg[f"{split}_{key}"] = mean_std([r["bleu"][split][key] for r in rs
                                                      if split in r["bleu"]])
            for ab in ABLATIONS:
                agg[f"ablate_{ab}_bleu_drop"] = mean_std(
                    [r["source_use"].get(ab, {}).get("bleu_drop") for r in rs])
                agg[f"ablate_{ab}_ppl_ratio"] = mean_std(
                    [r["source_use"].get(ab, {}).get("ppl_ratio") for r in rs])
            for k in _END_KL:
                agg[f"end_{k}"] = mean_std([r.get("end", {}).get(k) for r in rs])
            ks = sorted({k for r in rs for s in r["mc_sweep"].values() for k in s})
            agg["mc_sweep"] = {s: {k: mean_std([r["mc_sweep"].get(s, {}).get(k) for r in rs])
                                   for k in ks}
                               for s in SPLITS if any(s in r["mc_sweep"] for r in rs)}
            out.setdefault(pair, {})[variant] = agg
    return out


def fmt(ms: Optional[dict], digits: int = 2) -> str:
    if ms is None:
        return "–"
    if ms["n"] == 1:
        return f"{ms['mean']:.{digits}f}"
    return f"{ms['mean']:.{digits}f} ± {ms['std']:.{digits}f}"


def _num(v, digits=2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def variant_order(variants) -> List[str]:
    rank = {"lstm": 0, "none": 1, "soft": 2, "acvi": 3, "structured": 4, "variational": 5, "ved": 6}
    return sorted(variants, key=lambda v: (rank.get(v.split("-")[0], 9), v))


def _decode_name(gen_file: str) -> str:
    """``gen_valid_K0.txt`` -> ``valid_K0`` (the recipe's decode names); other names as given."""
    m = re.fullmatch(r"gen_(.+)\.txt", os.path.basename(gen_file))
    return m.group(1) if m else gen_file


def markdown(runs: List[dict], agg: dict, title: str) -> str:
    lines = [f"# {title}", "",
             "BLEU: tokenised, lower-cased (as published Multi30K baselines); detok: sacreBLEU on "
             "Moses-detokenised text. Valid ppl: 2^(likelihood loss) of the best epoch (ACVI: the "
             "likelihood term only, averaged over the run's --mc-samples K, 10 by default). Mean ± "
             "std over seeds (n = seeds). Train words/s: a run's median over epochs, averaged over "
             "the variant's CPU runs only (the device is named when a variant has none).", ""]
    for pair in sorted(agg):
        lines += [f"## {pair}", "",
                  "| variant | seeds | valid ppl | valid BLEU | test2016 BLEU | test2017 BLEU "
                  "| test2016 detok | test2017 detok | train words/s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for v in variant_order(agg[pair]):
            a = agg[pair][v]
            lines.append(f"| {v} | {len(a['seeds'])} | {fmt(a['valid_ppl'])} | "
                         f"{fmt(a['valid_bleu_tok'])} | {fmt(a['test2016_bleu_tok'])} | "
                         f"{fmt(a['test2017_bleu_tok'])} | {fmt(a['test2016_bleu_detok'])} | "
                         f"{fmt(a['test2017_bleu_detok'])} | {fmt(a['train_wps'], 0)}"
                         f"{'' if a['train_wps_device'] == 'cpu' else ' (' + a['train_wps_device'] + ')'} |")
        stopped = [r for r in runs if r["pair"] == pair and not is_finished(r)]
        if stopped:
            lines += ["", "Not in the means (training unfinished: stopped part-way or still running; "
                      "best validation perplexity so far): " + "; ".join(
                          _unfinished(r) for r in sorted(stopped, key=lambda r: (r["variant"], r["seed"])))
                      + "."]
        lines += ["", "Source use (validation; the context replaced by zeros / by another "
                  "sentence's): BLEU lost and perplexity ratio.", "",
                  "| variant | BLEU lost (zero) | BLEU lost (shuffle) | ppl × (zero) | ppl × (shuffle) |",
                  "|---|---|---|---|---|"]
        for v in variant_order(agg[pair]):
            a = agg[pair][v]
            if all(a[f"ablate_{ab}_bleu_drop"] is None for ab in ABLATIONS):
                continue
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
        paired_rows = []
        for v in variant_order(agg[pair]):
            if v == PAIRED_BASE or PAIRED_BASE not in agg[pair]:
                continue
            diffs = {split: paired(runs, pair, PAIRED_BASE, v, split) for split in SPLITS}
            if any(d is not None for d in diffs.values()):
                seeds = sorted({s for d in diffs.values() if d for s in d["seeds"]})
                paired_rows.append(f"| {v} | {', '.join(map(str, seeds))} | "
                                   + " | ".join(fmt(diffs[s]) for s in SPLITS) + " |")
        if paired_rows:
            lines += ["", f"BLEU minus `{PAIRED_BASE}`'s, seed by seed (a seed fixes the data order, "
                      "and the plugin's variants also start from the same weights), mean ± std over the "
                      "seeds both have:", "",
                      "| variant | seeds | valid | test2016 | test2017 |", "|---|---|---|---|---|"]
            lines += paired_rows
        lines += ["", "Runs:", "",
                  "| variant | seed | parameters | best epoch / trained | valid ppl | test2016 | test2017 | "
                  "wall (s) | device | date | extra train args |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted((r for r in runs if r["pair"] == pair),
                        key=lambda r: (variant_order([r["variant"]])[0], r["variant"], r["seed"])):
            b = r["bleu"]
            lines.append(
                f"| {r['variant']} | {r['seed']} | "
                f"{'–' if r.get('parameters') is None else format(r['parameters'], ',')} | "
                f"{r.get('best_epoch', '–')} / "
                f"{r.get('epochs_trained', '–')}{'' if is_finished(r) else ' (unfinished)'} | "
                f"{_num(r.get('valid_ppl'))} | "
                f"{_num(b.get('test2016', {}).get('bleu_tok'))} | "
                f"{_num(b.get('test2017', {}).get('bleu_tok'))} | "
                f"{_num(r.get('train_wall_s'), 0)} | {r['meta'].get('device', 'cpu')} | "
                f"{r['meta'].get('date', '–')} | "
                f"`{r['meta'].get('extra_train_args', '') or '–'}` |")
        sigs = sorted({b["sacrebleu_signature"] for r in runs if r["pair"] == pair
                       for b in r["bleu"].values() if "sacrebleu_signature" in b})
        if sigs:
            lines += ["", "sacreBLEU signature(s): " + ", ".join(f"`{s}`" for s in sigs)]
        lines.append("")
    return "\n".join(lines) + "\n"


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
        for j, split in enumerate(("test2016", "test2017")):
            ys = [agg[pair][v][f"{split}_bleu_tok"] for v in vs]
            ax.bar([i + 0.4 * j for i in range(len(vs))], [y["mean"] if y else 0 for y in ys],
                   0.4, yerr=[y["std"] if y else 0 for y in ys], capsize=3, label=split)
        ax.set_xticks([i + 0.2 for i in range(len(vs))], vs, rotation=30, ha="right", fontsize=8)
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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def paired(runs: List[dict], pair: str, base: str, other: str, split: str) -> Optional[dict]:
    """BLEU of ``other`` minus ``base`` on ``split``, seed by seed over the seeds both have:
    mean ± std of the per-seed differences (a seed fixes the data order and initialisation of
    both, so the paired difference is less noisy than the difference of the means)."""
    def by_seed(variant):
        return {r["seed"]: r["bleu"][split]["bleu_tok"] for r in filter(is_finished, runs)
                if r["pair"] == pair and r["variant"] == variant and split in r["bleu"]}
    a, b = by_seed(base), by_seed(other)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    return dict(mean_std([b[s] - a[s] for s in seeds]), seeds=seeds)


def compare(agg: dict, base: str, other: str, runs: Optional[List[dict]] = None) -> List[str]:
    """``other`` against ``base`` per pair: perplexity ratio, BLEU difference (and, given the
    runs, the per-seed paired difference), speed ratio."""
    lines = []
    for pair in sorted(agg):
        a, b = agg[pair].get(base), agg[pair].get(other)
        if a is None or b is None:
            continue

        def m(x, key):
            return x[key]["mean"] if x.get(key) else None
        parts = [f"[{pair}] {other} vs {base} (seeds {b['seeds']} vs {a['seeds']}):"]
        if m(a, "valid_ppl") and m(b, "valid_ppl"):
            parts.append(f"valid ppl {m(b, 'valid_ppl'):.2f} vs {m(a, 'valid_ppl'):.2f} "
                         f"(ratio {m(b, 'valid_ppl') / m(a, 'valid_ppl'):.3f})")
        for split in SPLITS:
            ka = m(a, f"{split}_bleu_tok")
            kb = m(b, f"{split}_bleu_tok")
            if ka is not None and kb is not None:
                text = f"{split} BLEU {kb:.2f} vs {ka:.2f} ({kb - ka:+.2f}"
                d = paired(runs, pair, base, other, split) if runs else None
                if d is not None and d["n"] > 1:
                    text += f"; paired over seeds {d['seeds']}: {d['mean']:+.2f} ± {d['std']:.2f}"
                parts.append(text + ")")
        if m(a, "train_wps") and m(b, "train_wps") and a["train_wps_device"] == b["train_wps_device"]:
            parts.append(f"train words/s ratio {m(b, 'train_wps') / m(a, 'train_wps'):.3f}")
        lines.append("  ".join(parts))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", help="folders holding run folders (searched recursively)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--title", default="Multi30K translation")
    p.add_argument("--compare", nargs=2, metavar=("BASE", "OTHER"),
                   help="print variant OTHER against BASE (e.g. lstm soft)")
    p.add_argument("--merge", nargs="+", default=[], metavar="RESULTS_JSON",
                   help="also count the runs recorded in these earlier reports' results.json "
                        "(their run folders need not exist any more)")
    p.add_argument("--no-charts", action="store_true")
    args = p.parse_args(argv)
    try:
        found = find_runs(args.runs) if args.runs else []
        runs = combine_runs(found, load_merged(args.merge))
        if not runs:
            raise ReportError("no runs: give run folders and/or --merge results.json")
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    agg = aggregate(runs)
    os.makedirs(args.out_dir, exist_ok=True)
    public = [{k: v for k, v in r.items() if k not in ("dir", "source")}
              | {"run": os.path.relpath(r["dir"]) if r["dir"] else r.get("run")} for r in runs]
    with open(os.path.join(args.out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"runs": public, "aggregate": agg}, f, indent=1, default=str)
    with open(os.path.join(args.out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(runs, agg, args.title))
    written = [] if args.no_charts else charts(runs, agg, args.out_dir)
    print(f"[mt_report] {len(runs)} runs -> {args.out_dir}/report.md, results.json"
          + (", " + ", ".join(os.path.basename(w) for w in written) if written else ""))
    if args.compare:
        for line in compare(agg, *args.compare, runs=runs):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
