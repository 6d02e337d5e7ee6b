"""One translation run folder (``recipes/mt_multi30k.sh``, ``recipes/mt_parallel.sh``), read into a
dict, and the runs of earlier reports (``--merge``). What each file holds: the docstring of
fairseq_acvi/cli/mt_report.py.
"""
import glob
import json
import os
import re
import statistics
from typing import Dict, List, Optional

from fairseq_acvi.modules.context import DEFAULT_MC_SAMPLES
from fairseq_acvi.mt_eval.logs import (
    ReportError, likelihood_bits, model_parameters, parse_train_log, parse_validate_log,
    training_finished, training_wall)

#: the named splits of a run whose run.json lists none (recipes/mt_multi30k.sh: Multi30K's)
SPLITS = ("valid", "test2016", "test2017")
ABLATIONS = ("zero", "shuffle")
#: the latent-context diagnostics logged per epoch, and those kept for the best epoch
#: (``kl_true`` is derived from the two parts)
LOGGED_KL = ("kl", "kl_mean_part", "kl_var_part", "ctx_norm2", "ctx_var")
END_KL = ("kl", "kl_true") + LOGGED_KL[1:]


def read_run(run_dir: str) -> dict:
    """Everything the report needs from one run folder (the files: fairseq_acvi/cli/mt_report.py)."""
    meta_path = os.path.join(run_dir, "run.json")
    try:
        meta = json.load(open(meta_path, encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ReportError(f"{meta_path}: not valid JSON ({e})") from None
    for key in ("pair", "context", "seed"):
        if key not in meta:
            raise ReportError(f"{meta_path}: missing key {key!r}")
    splits = meta.get("splits")
    if splits is not None and (not isinstance(splits, list) or not splits
                               or not all(isinstance(x, str) and x for x in splits)):
        raise ReportError(f"{meta_path}: 'splits' must be a non-empty list of split names, got {splits!r}")
    tag = meta.get("tag") or ""
    run = {"dir": run_dir, "pair": meta["pair"], "context": meta["context"], "tag": tag,
           "variant": meta["context"] + (f"-{tag}" if tag else ""), "seed": int(meta["seed"]),
           "meta": meta, "epochs": [], "bleu": {}, "validate": {}}
    log_path = os.path.join(run_dir, "train.log")
    if not os.path.exists(log_path):                 # a report's kept copy (kept_outputs)
        log_path += ".gz"
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
            for k in LOGGED_KL:
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
        run["end"] = {k: best[k] for k in END_KL if k in best}
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
    run["replan"] = read_replan(run_dir)
    run["source_use"] = source_use(run)
    run["mc_sweep"] = mc_sweep(run)
    return run


def run_splits(run: dict) -> List[str]:
    """The named splits a run decoded: ``splits`` of its run.json (recipes/mt_parallel.sh writes
    the data's own, e.g. ``["valid", "test"]``), else Multi30K's :data:`SPLITS`."""
    return list(run["meta"].get("splits") or SPLITS)


def pair_splits(runs: List[dict], pair: str) -> List[str]:
    """The splits of ``pair`` the report tables: every split of its runs (:func:`run_splits`),
    ``valid`` first, the others in the order the runs list them."""
    names: Dict[str, None] = {}
    for r in runs:
        if r["pair"] == pair:
            names.update(dict.fromkeys(run_splits(r)))
    return sorted(names, key=lambda s: s != "valid")


def read_replan(run_dir: str) -> Optional[float]:
    """Planning attention's validation replan fraction at the best epoch (``replan.json``, written
    by recipes/mt_pag.sh: the share of decoder steps whose plan was recomputed); None when the run
    has no such file or its model logs none (soft)."""
    path = os.path.join(run_dir, "replan.json")
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            best = json.load(f)["best"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ReportError(f"{path}: not a replan.json with a 'best' record ({e!r})") from None
    return best.get("replan")


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
