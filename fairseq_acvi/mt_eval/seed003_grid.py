"""Seed 003's Table 1 beside the project's attention grid (recipes/mt_attention_grid.sh;
docs/method.md §3.6): the command is fairseq_acvi/cli/attention_grid_report.py.

The seed (``../shared/seeds/003_*.txt``, docs/method.md "Sources") reports, in its Table 1
(l. 119-135), BLEU for English→German on a WMT and a Europarl test set: a no-attention baseline
(l. 123) and its four scorers, each in three configurations (l. 124-135): "attn on encoder" = (i),
"attn on encoder and decoder" = (ii), "attn on encoder and decoder + self-attention" = (iii)
(docs/method.md §3.6: (iii) is (ii) with self-attention added). Its BLEU is NLTK's ``corpus_bleu``
(l. 117) over tokenised text (l. 101); ours closest to it is ``bleu_tok`` (sacreBLEU without its
own tokenisation, on the tokenised lower-cased Multi30K text; data_scripts/score_mt.py).

The grid's runs are named as the recipe names them (run dicts of
:func:`fairseq_acvi.mt_eval.runs.find_runs`, grouped by :func:`fairseq_acvi.mt_eval.summary.aggregate`):
``none-grid-none`` (the baseline), ``soft-<scorer>-<config>`` (the cells) and
``acvi-<scorer>-<config>`` (ACVI in a cell).

What is built (:func:`build` returns it as one JSON-able dict, :func:`markdown` writes it):

* one row per row of the seed's table: its two BLEU, then ours per split (``valid``, ``test2016``,
  ``test2017``: mean ± std over the finished seeds, n) and the validation perplexity;
* the ordering of the three configurations per scorer, the seed's (per test set) and ours (per split,
  from the means);
* the seed's claim that (iii) scores below both (i) and (ii) (its Analysis section, l. 165, is empty:
  the claim is the one its Table 1 shows), checked per scorer in the seed's numbers and in ours: the
  paired bootstrap (Koehn 2004; :func:`fairseq_acvi.metrics.bleu.paired_bootstrap`) of BLEU (iii) − (i)
  and (iii) − (ii) on each test split, from the grid seed's hypotheses, and a verdict per scorer
  (:func:`verdict`);
* whether attending to the decoder's past helps: the paired bootstrap of BLEU (ii) − (i) per scorer
  and test split, beside the seed's (ii) − (i);
* over seeds (``STAGE=seeds``): each configuration against (i) with the same scorer, tokenised BLEU
  seed by seed over the seeds both have (mean ± std of the per-seed differences), where they share
  two or more seeds;
* ACVI beside soft in the same cell, where the grid has ACVI runs: mean ± std over seeds, the
  seed-by-seed difference, and each shared seed's paired bootstrap of ACVI − soft per test split
  (:func:`seed_bootstrap`); the same against ACVI's deterministic control (``acvi-det-<cell>``)
  where it was trained.
"""
import os
from typing import Dict, List, Optional

from fairseq_acvi.metrics.bleu import paired_bootstrap
from fairseq_acvi.mt_eval.paired_decodes import Decodes, hypotheses_candidates
from fairseq_acvi.mt_eval.runs import SPLITS
from fairseq_acvi.mt_eval.summary import is_finished, paired

SOURCE = "../shared/seeds/003_*.txt, l. 119-135"
#: the scorers (``--attention-type``) in the seed's order, and the seed's name of each (l. 124-135)
SCORERS = ("additive", "multiplicative", "scaled-dot", "key-value")
SEED_SCORER_NAMES = {"additive": "additive", "multiplicative": "multiplicative",
                     "scaled-dot": "scaled dot product", "key-value": "key value"}
#: the configurations (docs/method.md §3.6) and the seed's words for each (l. 124-126)
CONFIGS = ("i", "ii", "iii")
SEED_CONFIG_NAMES = {"i": "on encoder", "ii": "on encoder and decoder",
                     "iii": "on encoder and decoder + self-attention"}
#: the seed's two test sets (Table 1's columns, l. 121-122)
SEED_SETS = ("wmt", "europarl")
SEED_SET_NAMES = {"wmt": "WMT", "europarl": "Europarl"}
#: seed 003's Table 1 (l. 123-135): (line, scorer or None for the baseline, config, WMT, Europarl)
SEED_TABLE1 = (
    (123, None, None, 4.60, 7.31),
    (124, "additive", "i", 10.77, 17.83),
    (125, "additive", "ii", 9.88, 17.71),
    (126, "additive", "iii", 8.39, 15.55),
    (127, "multiplicative", "i", 10.80, 17.68),
    (128, "multiplicative", "ii", 10.74, 17.70),
    (129, "multiplicative", "iii", 8.60, 15.37),
    (130, "scaled-dot", "i", 9.64, 17.32),
    (131, "scaled-dot", "ii", 9.93, 17.16),
    (132, "scaled-dot", "iii", 8.91, 15.72),
    (133, "key-value", "i", 9.64, 16.46),
    (134, "key-value", "ii", 10.59, 17.07),
    (135, "key-value", "iii", 8.22, 13.98),
)
BASELINE = "none-grid-none"
TESTS = tuple(s for s in SPLITS if s != "valid")        # test2016, test2017
VERDICTS = ("reproduced", "not reproduced", "not significant", "not run")


def variant(scorer: Optional[str], config: Optional[str], context: str = "soft") -> str:
    """The run variant of a cell (``soft-key-value-iii``), or of the baseline (``none-grid-none``);
    ``context`` ``acvi-det``: ACVI's deterministic control in the cell (the recipe's run tag
    ``det-<cell>``)."""
    return BASELINE if scorer is None else f"{context}-{scorer}-{config}"


def seed_rows() -> List[dict]:
    """The seed's Table 1 as 13 dicts: line, label (the seed's model name), scorer, config
    (None for the baseline), variant (ours), wmt, europarl (BLEU)."""
    rows = []
    for line, scorer, config, wmt, europarl in SEED_TABLE1:
        label = ("seq2seq (baseline)" if scorer is None else
                 f"seq2seq + {SEED_SCORER_NAMES[scorer]} attn {SEED_CONFIG_NAMES[config]}")
        rows.append({"line": line, "label": label, "scorer": scorer, "config": config,
                     "variant": variant(scorer, config), "wmt": wmt, "europarl": europarl})
    return rows


def order(scores: Dict[str, Optional[float]]) -> Optional[dict]:
    """{config: BLEU} -> {"order": configs best first, "text": "i > ii > iii" (``=`` for a tie at
    two decimals), "missing": configs without a score}; None when fewer than two have one."""
    have = {c: s for c, s in scores.items() if s is not None}
    if len(have) < 2:
        return None
    ranked = sorted(have, key=lambda c: (-have[c], CONFIGS.index(c)))
    text = ranked[0]
    for a, b in zip(ranked, ranked[1:]):
        text += (" = " if round(have[a], 2) == round(have[b], 2) else " > ") + b
    return {"order": ranked, "text": text, "missing": [c for c in scores if c not in have]}


def below_both(scores: Dict[str, Optional[float]]) -> Optional[bool]:
    """Whether (iii) scores below both (i) and (ii); None when one of the three is missing."""
    if any(scores.get(c) is None for c in CONFIGS):
        return None
    return scores["iii"] < scores["i"] and scores["iii"] < scores["ii"]


def seed_claim() -> Dict[str, dict]:
    """Per scorer: the seed's ordering and its claim, per test set, computed from :data:`SEED_TABLE1`:
    {scorer: {"wmt": {"order": ..., "iii_below_both": bool}, "europarl": {...}}}."""
    out: Dict[str, dict] = {}
    for scorer in SCORERS:
        for s in SEED_SETS:
            scores = {r["config"]: r[s] for r in seed_rows() if r["scorer"] == scorer}
            out.setdefault(scorer, {})[s] = {"order": order(scores), "iii_below_both": below_both(scores)}
    return out


def cell(runs: List[dict], agg_pair: Dict[str, dict], name: str) -> dict:
    """Our numbers of one variant: {"status": "run" | "unfinished" | "not run", "seeds": [...],
    "<split>": mean/std/n of ``bleu_tok`` or None, ..., "valid_ppl": mean/std/n or None}."""
    a = agg_pair.get(name)
    if a is None:
        started = sorted(r["seed"] for r in runs if r["variant"] == name)
        return {"status": "unfinished" if started else "not run", "seeds": [], "unfinished": started,
                **{s: None for s in SPLITS}, "valid_ppl": None}
    return {"status": "run", "seeds": a["seeds"],
            **{s: a.get(f"{s}_bleu_tok") for s in SPLITS}, "valid_ppl": a["valid_ppl"]}


def _mean(ms: Optional[dict]) -> Optional[float]:
    return None if ms is None else ms["mean"]


# --- hypotheses and the paired bootstrap ---------------------------------------------------------

def decoded(run: dict, split: str) -> bool:
    """Whether the run decoded ``split``: it scored it (``bleu_<split>.json``) or its hypotheses are
    there (``gen_<split>.txt`` or a kept ``.txt.gz``; :func:`~.paired_decodes.hypotheses_path`
    names them when a scored split has none)."""
    return split in run["bleu"] or any(
        os.path.isfile(path) for path in hypotheses_candidates(run, split))


#: the paired comparisons of a scorer's configurations: {key: (base, other)}, BLEU other − base
PAIRS = {"iii-i": ("i", "iii"), "iii-ii": ("ii", "iii"), "ii-i": ("i", "ii")}


def _readable(run: dict, pair: str) -> bool:
    """A finished run of ``pair`` whose folder is known (its hypotheses can be read)."""
    return run["pair"] == pair and is_finished(run) and bool(run.get("dir"))


def grid_bootstrap(runs: List[dict], pair: str, refs_dir: str, grid_seed: int,
                   n_resamples: int = 1000, level: float = 0.95,
                   rescored: Optional[Dict[str, dict]] = None,
                   decodes: Optional[Decodes] = None) -> Dict[str, Dict[str, dict]]:
    """{scorer: {split: {"iii-i": result, "iii-ii": result, "ii-i": result}}} for the finished soft
    runs of seed ``grid_seed``: the paired bootstrap of tokenised BLEU (iii) minus (i), (iii) minus
    (ii) and (ii) minus (i) (:data:`PAIRS`) on each test split (:data:`TESTS`), resampling the
    split's sentences (``paired_bootstrap``'s dict: delta,
    low, high, p_other_better, base, other, n_resamples, level; resample seed 0). A scorer, split or
    comparison whose runs or decodes are missing is absent. ``rescored``, when given, receives
    {variant: {split: {"recorded": bleu_tok of bleu_<split>.json or None, "recomputed": BLEU of the
    hypotheses read}}} for every decode read. ``decodes``: a :class:`Decodes` of ``refs_dir`` to
    read through (and share with other comparisons), else a new one."""
    by_cell = {r["variant"]: r for r in runs if _readable(r, pair) and r["seed"] == grid_seed}
    decodes = decodes or Decodes(refs_dir, pair)
    first_read = len(decodes.rescored)

    def stats_of(run, split):
        return decodes.statistics(run, split)["stats"] if decoded(run, split) else None

    out: Dict[str, Dict[str, dict]] = {}
    for scorer in SCORERS:
        cells = {c: by_cell.get(variant(scorer, c)) for c in CONFIGS}
        for split in TESTS:
            stats = {c: stats_of(run, split) for c, run in cells.items() if run is not None}
            for key, (base, other) in PAIRS.items():
                if stats.get(base) is None or stats.get(other) is None:
                    continue
                r = paired_bootstrap(stats[base], stats[other], n_resamples=n_resamples, level=level)
                out.setdefault(scorer, {}).setdefault(split, {})[key] = r
    if rescored is not None:
        for x in decodes.rescored[first_read:]:
            rescored.setdefault(x["run"]["variant"], {})[x["split"]] = {
                "recorded": x["recorded"], "recomputed": x["recomputed"]}
    return out


def seed_bootstrap(runs: List[dict], pair: str, decodes: Decodes, base: str, other: str,
                   n_resamples: int = 1000, level: float = 0.95) -> Dict[str, Dict[str, dict]]:
    """{split: {seed (str): result}}: the paired bootstrap of tokenised BLEU ``other`` − ``base``
    (ACVI − soft, ACVI − its control), seed by seed (a seed's two runs share its data order), on
    each test split (:data:`TESTS`) both runs of the seed decoded (``paired_bootstrap``'s dict,
    resample seed 0). Unfinished runs and undecoded splits are absent."""
    def by_seed(name):
        return {r["seed"]: r for r in runs if _readable(r, pair) and r["variant"] == name}
    a, b = by_seed(base), by_seed(other)
    out: Dict[str, Dict[str, dict]] = {}
    for seed in sorted(set(a) & set(b)):
        for split in TESTS:
            if decoded(a[seed], split) and decoded(b[seed], split):
                x, y = (decodes.statistics(r, split)["stats"] for r in (a[seed], b[seed]))
                out.setdefault(split, {})[str(seed)] = paired_bootstrap(x, y, n_resamples=n_resamples,
                                                                        level=level)
    return out


COMPARISONS = {"iii-i": "(iii) − (i)", "iii-ii": "(iii) − (ii)"}


def verdict(boot: Dict[str, dict]) -> dict:
    """The seed's claim in our runs for one scorer, from ``boot`` = {split: {"iii-i": r, "iii-ii": r}}
    (:func:`grid_bootstrap`): "reproduced" when every interval of (iii) − (i) and (iii) − (ii), on
    both test splits (:data:`TESTS`), lies below 0; "not reproduced" when one lies above 0 ((iii)
    significantly better than (i) or (ii) on a split); "not significant" otherwise; "not run" when a
    comparison is missing. Returns {"verdict": one of :data:`VERDICTS`, "reason": text}."""
    needed = [(s, k) for s in TESTS for k in COMPARISONS]
    named = {(s, k): f"{COMPARISONS[k]} on {s}" for s, k in needed}
    missing = [named[n] for n in needed if n[1] not in boot.get(n[0], {})]
    if missing:
        return {"verdict": "not run", "reason": "no paired comparison " + ", ".join(missing)}
    above = [named[n] for n in needed if boot[n[0]][n[1]]["low"] > 0]
    unsure = [named[n] for n in needed if boot[n[0]][n[1]]["high"] >= 0 and boot[n[0]][n[1]]["low"] <= 0]
    if above:
        return {"verdict": "not reproduced", "reason": "(iii) significantly better: " + ", ".join(above)}
    if not unsure:
        return {"verdict": "reproduced",
                "reason": "(iii) significantly below (i) and (ii) on " + " and ".join(TESTS)}
    return {"verdict": "not significant", "reason": "the interval includes 0: " + ", ".join(unsure)}


# --- the whole comparison ------------------------------------------------------------------------

def grid_pairs(runs: List[dict]) -> List[str]:
    """The pairs that have a run of the grid (the baseline or a soft or ACVI cell)."""
    names = {variant(s, c, x) for s in SCORERS for c in CONFIGS for x in ("soft", "acvi", "acvi-det")} | {BASELINE}
    return sorted({r["pair"] for r in runs if r["variant"] in names})


def build(runs: List[dict], agg: Dict[str, Dict[str, dict]], pair: str, refs_dir: str,
          grid_seed: int = 1, n_resamples: int = 1000, level: float = 0.95) -> dict:
    """Everything of the comparison for ``pair`` as one JSON-able dict (the module docstring):
    ``rows`` (13: the seed's row and ``ours`` = :func:`cell`), ``claim`` per scorer (the seed's
    orderings and claim per test set, our orderings and claim from the means per split, the
    bootstrap per test split, the verdict), ``seed_claim_holds`` ({set: scorers where it holds}),
    ``acvi`` (ACVI beside soft per cell that has ACVI runs), ``rescored`` (:func:`grid_bootstrap`)
    and ``warnings`` (a decode whose recomputed BLEU differs from its recorded one). Reads the grid
    seed's hypotheses and the references (:func:`grid_bootstrap`); raises :class:`ReportError`
    naming a bad file."""
    pair_runs = [r for r in runs if r["pair"] == pair]
    agg_pair = agg.get(pair, {})
    rows = [dict(r, ours=cell(pair_runs, agg_pair, r["variant"])) for r in seed_rows()]
    seed = seed_claim()
    rescored: Dict[str, dict] = {}
    decodes = Decodes(refs_dir, pair)       # each decode read and scored once for the whole report
    boot = grid_bootstrap(pair_runs, pair, refs_dir, grid_seed, n_resamples, level, rescored, decodes)
    claim = {}
    for scorer in SCORERS:
        ours = {c: cell(pair_runs, agg_pair, variant(scorer, c)) for c in CONFIGS}
        by_split = {s: {c: _mean(ours[c][s]) for c in CONFIGS} for s in SPLITS}
        claim[scorer] = {
            "seed": seed[scorer],
            "ours": {s: {"order": order(by_split[s]), "iii_below_both": below_both(by_split[s])}
                     for s in SPLITS},
            "bootstrap": boot.get(scorer, {}),
            **verdict(boot.get(scorer, {}))}
        absent = [variant(scorer, c) for c in CONFIGS
                  if not any(r["variant"] == variant(scorer, c) and r["seed"] == grid_seed
                             and is_finished(r) for r in pair_runs)]
        if claim[scorer]["verdict"] == "not run" and absent:
            claim[scorer]["reason"] = f"no finished run of seed {grid_seed}: " + ", ".join(absent)
    over_seeds = []
    for scorer in SCORERS:
        for c in CONFIGS[1:]:
            diffs = {s: paired(pair_runs, pair, variant(scorer, "i"), variant(scorer, c), s) for s in SPLITS}
            if any(d is not None and len(d["seeds"]) >= 2 for d in diffs.values()):
                over_seeds.append({"scorer": scorer, "config": c, "minus_i": diffs})
    acvi = []
    for scorer in SCORERS:
        for c in CONFIGS:
            name, ctl, soft_name = (variant(scorer, c, x) for x in ("acvi", "acvi-det", "soft"))
            if not any(r["variant"] in (name, ctl) for r in pair_runs):
                continue
            entry = {"scorer": scorer, "config": c, "soft_variant": soft_name, "acvi_variant": name,
                     "soft": cell(pair_runs, agg_pair, soft_name), "acvi": cell(pair_runs, agg_pair, name),
                     "acvi_minus_soft": {s: paired(pair_runs, pair, soft_name, name, s) for s in SPLITS},
                     "bootstrap": seed_bootstrap(pair_runs, pair, decodes, soft_name, name,
                                                 n_resamples, level)}
            if any(r["variant"] == ctl for r in pair_runs):
                entry.update({"control_variant": ctl, "control": cell(pair_runs, agg_pair, ctl),
                              "acvi_minus_control": {s: paired(pair_runs, pair, ctl, name, s) for s in SPLITS},
                              "control_bootstrap": seed_bootstrap(pair_runs, pair, decodes, ctl, name,
                                                                  n_resamples, level)})
            acvi.append(entry)
    warnings = [f"{x['run']['variant']} seed {x['run']['seed']} {x['split']}: the hypotheses score "
                f"{x['recomputed']:.2f} against {refs_dir}, bleu_{x['split']}.json records {x['recorded']:.2f} "
                "(other references?)"
                for x in sorted(decodes.mismatches(),
                                key=lambda x: (x["run"]["variant"], x["run"]["seed"], SPLITS.index(x["split"])))]
    return {"pair": pair, "source": SOURCE, "grid_seed": grid_seed, "refs_dir": refs_dir,
            "bleu": "bleu_tok", "n_resamples": n_resamples, "level": level, "rows": rows,
            "claim": claim,
            "seed_claim_holds": {s: [sc for sc in SCORERS if seed[sc][s]["iii_below_both"]]
                                 for s in SEED_SETS},
            "over_seeds": over_seeds, "acvi": acvi, "rescored": rescored, "warnings": warnings}


def seed_difference(scorer: str, base: str, other: str) -> Dict[str, float]:
    """The seed's BLEU ``other`` − ``base`` for ``scorer`` per test set ({"wmt": …, "europarl": …})."""
    by = {r["config"]: r for r in seed_rows() if r["scorer"] == scorer}
    return {t: by[other][t] - by[base][t] for t in SEED_SETS}
