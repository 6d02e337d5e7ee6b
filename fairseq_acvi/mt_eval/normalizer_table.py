"""The attention normalisers compared on one translation pair (docs/method.md §3.5), from the run
folders of recipes/mt_normalizers.sh: one table of BLEU and attention statistics per normaliser,
the seed-by-seed differences from softmax with paired bootstrap intervals, and the verdicts of the
two targets, as a JSON-able dict (:func:`collect`) and a Markdown section (:func:`markdown`).

What is read, per run folder (``<context>-<normaliser>_seed<N>/``):

* the run itself (:func:`fairseq_acvi.mt_eval.runs.find_runs`: ``run.json``, ``train.log``,
  ``bleu_<split>.json``); BLEU mean ± std over the finished seeds is
  :func:`fairseq_acvi.mt_eval.summary.aggregate`'s. A run's normaliser is the
  ``--attention-normalizer`` of its training command (``extra_train_args`` of run.json), else its
  tag when that names a normaliser; other runs are listed as ignored. Unfinished runs are listed
  apart and enter no figure. A folder whose run.json has ``decode_normalizer`` (reuse_run
  ``--decode-normalizer``) is a softmax-trained model decoded with that normaliser: its row is
  marked "decoding only", compared with softmax seed by seed like the others, and never stands
  for the normaliser in the targets;
* ``attention_stats_<split>.json`` (:mod:`fairseq_acvi.metrics.attention_stats`; ``split`` the
  recipe's ``STATS_SPLIT``): ``zero_fraction`` (exactly-zero weights, pooled; shown in %),
  ``rep_per_100`` (Malaviya et al.'s REP per 100 reference words), ``drop_attn`` (% of source
  words with total attention < 0.5). Missing for a finished run: an error;
* ``aligned_drop_<split>.json`` when there (:mod:`fairseq_acvi.cli.aligned_drop`): ``drop``, Malaviya
  et al.'s DROP from an aligner that sees no model (% of the source words aligned to the reference
  that no hypothesis word is aligned to); a row shows it when all its runs have it;
* the hypotheses of every test split (every split but ``valid``) for the paired bootstrap of
  BLEU(normaliser) − BLEU(softmax), same seed (:mod:`fairseq_acvi.mt_eval.paired_decodes`);
* ``pictures/`` (recipes' ``attention_pictures``), linked when present.

Targets (their verdicts are computed from the figures, never written by hand):

* ``sparsemax`` and ``entmax15`` within :data:`BLEU_MARGIN` BLEU of softmax or better: the mean of
  the seed-by-seed differences of tokenised BLEU (``bleu_<split>.json``, the seeds both have) is
  ≥ −0.5 on every test split;
* ``csparsemax`` lowers REP and DROP against softmax: both means over the finished seeds are
  lower, DROP the aligner's when both rows have it, else DROP-attn (attention is sparser under
  sparse normalisers without their translating fewer words, so the aligner's is the fair one).

Every variant is compared with the softmax variant of its own context inference (``soft-softmax``
for ``soft-csparsemax``). Problems are :class:`~fairseq_acvi.mt_eval.logs.ReportError` naming the
file.
"""
import glob
import os
import re
from typing import Dict, List, Optional

from fairseq_acvi.data.json_numbers import read_numbers
from fairseq_acvi.metrics.bleu import format_interval
from fairseq_acvi.modules.context.normalizers import NORMALIZERS
from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.paired_decodes import Decodes, target_language
from fairseq_acvi.mt_eval.render import fmt
from fairseq_acvi.mt_eval.summary import aggregate, is_finished, mean_std, paired

#: the attention statistics the table reads from ``attention_stats_<split>.json``
STATS_KEYS = ("zero_fraction", "rep_per_100", "drop_attn")
#: DROP from an aligner, read from ``aligned_drop_<split>.json`` when a run has one
ALIGNED_KEY = "drop"
#: how far below softmax's BLEU sparsemax and 1.5-entmax may be and still meet their target
BLEU_MARGIN = 0.5
#: the normalisers of the BLEU target, and the one of the REP / DROP target
BLEU_TARGET = ("sparsemax", "entmax15")
REPETITION_TARGET = "csparsemax"
NAMES = {"softmax": "softmax", "sparsemax": "sparsemax", "entmax15": "1.5-entmax",
         "csoftmax": "csoftmax", "csparsemax": "csparsemax"}
_OPTION = re.compile(r"--attention-normalizer[= ](\S+)")


def trained_normalizer(extra_train_args: Optional[str]) -> Optional[str]:
    """The ``--attention-normalizer`` a run's extra training arguments (run.json's
    ``extra_train_args``) name, the last one if several, or None."""
    m = _OPTION.findall(extra_train_args or "")
    return m[-1] if m else None


def decoded_only(run: dict) -> bool:
    """A softmax-trained run decoded with another normaliser (run.json ``decode_normalizer``)."""
    return bool(run["meta"].get("decode_normalizer"))


def normalizer_of(run: dict) -> Optional[str]:
    """The run's attention normaliser (module docstring), or None for a run of no normaliser."""
    if decoded_only(run):
        return run["meta"]["decode_normalizer"]
    named = trained_normalizer(run["meta"].get("extra_train_args"))
    if named:
        return named
    return run["tag"] if run["tag"] in NORMALIZERS else None


def read_stats(run: dict, split: str) -> Dict[str, float]:
    """``{zero_fraction, rep_per_100, drop_attn}`` of ``attention_stats_<split>.json``, and ``drop``
    of ``aligned_drop_<split>.json`` when the run has one; ReportError naming the file when the
    first is missing, or either is not JSON or lacks a figure."""
    path = os.path.join(run["dir"], f"attention_stats_{split}.json")
    if not os.path.isfile(path):
        raise ReportError(f"{path}: missing (python -m fairseq_acvi.metrics.attention_stats writes it; "
                          f"{run['variant']} seed {run['seed']} finished training)")
    aligned = os.path.join(run["dir"], f"aligned_drop_{split}.json")
    try:
        out = read_numbers(path, STATS_KEYS, "an attention_stats file with references")
        if os.path.isfile(aligned):
            out.update(read_numbers(aligned, (ALIGNED_KEY,), "an aligned_drop file"))
        return out
    except ValueError as e:
        raise ReportError(str(e)) from None


def _order(row: dict):
    return (row["context"], NORMALIZERS.index(row["normalizer"]), row["decoded_only"], row["variant"])


def label(row: dict) -> str:
    """The normaliser's name, "(decoding only)" for a softmax model decoded with it."""
    return NAMES[row["normalizer"]] + (" (decoding only)" if row["decoded_only"] else "")


def _base_variants(rows: List[dict]) -> Dict[str, str]:
    """{context: its softmax variant}: ``<context>-softmax`` when present, else the context's only
    softmax variant; a context with none or several others has no base."""
    out = {}
    for context in {r["context"] for r in rows}:
        soft = [r["variant"] for r in rows if r["context"] == context and r["normalizer"] == "softmax"
                and not r["decoded_only"]]
        if f"{context}-softmax" in soft:
            out[context] = f"{context}-softmax"
        elif len(soft) == 1:
            out[context] = soft[0]
    return out


def _rel(path: str) -> str:
    return os.path.relpath(path)


def collect(runs: List[dict], refs_dir: str, split: str = "test2016", kept: Optional[str] = None,
            n_resamples: int = 1000, level: float = 0.95) -> dict:
    """The table of the runs of one pair (module docstring), JSON-able.

    runs: :func:`~fairseq_acvi.mt_eval.runs.read_run` dicts; refs_dir: the raw references'
    folder (``<split>.<tgt>``); split: the attention statistics' split; kept: a report folder
    whose ``outputs/`` may hold kept hypotheses. Returns ``pair``, ``stats_split``, ``splits``,
    ``test_splits``, ``bootstrap``, ``rows`` (one per variant, softmax first within a context),
    ``runs``, ``unfinished``, ``ignored``, ``notes`` and ``verdicts`` (:func:`verdicts`)."""
    if not runs:
        raise ReportError("no runs")
    ignored = [f"{_rel(r['dir'])} ({r['variant']}: no --attention-normalizer)" for r in runs
               if normalizer_of(r) is None]
    runs = [dict(r, normalizer=normalizer_of(r)) for r in runs if normalizer_of(r) is not None]
    unknown = sorted({r["normalizer"] for r in runs} - set(NORMALIZERS))
    if unknown:
        raise ReportError(f"unknown --attention-normalizer {', '.join(unknown)} in "
                          + ", ".join(_rel(r["dir"]) for r in runs if r["normalizer"] in unknown))
    if not runs:
        raise ReportError("no run of an attention normaliser among the runs found")
    pairs = sorted({r["pair"] for r in runs})
    if len(pairs) > 1:
        raise ReportError(f"runs of several pairs ({', '.join(pairs)}): give one pair's folder")
    pair = pairs[0]
    target_language(pair)
    finished = [r for r in runs if is_finished(r)]
    unfinished = [{"variant": r["variant"], "seed": r["seed"], "dir": _rel(r["dir"]),
                   "epochs": r.get("epochs_trained")} for r in runs if not is_finished(r)]
    stats = {(r["variant"], r["seed"]): read_stats(r, split) for r in finished}
    agg = aggregate(finished).get(pair, {})
    splits = next(iter(agg.values()))["splits"] if agg else []
    test_splits = [s for s in splits if s != "valid"]
    by_variant: Dict[str, List[dict]] = {}
    for r in finished:
        by_variant.setdefault(r["variant"], []).append(r)

    rows = []
    for variant, rs in by_variant.items():
        a = agg[variant]
        row = {"variant": variant, "context": rs[0]["context"], "normalizer": rs[0]["normalizer"],
               "decoded_only": decoded_only(rs[0]), "seeds": a["seeds"], "n": len(a["seeds"]),
               "bleu": {s: {"tok": a.get(f"{s}_bleu_tok"), "detok": a.get(f"{s}_bleu_detok")}
                        for s in splits},
               "pictures": {}}
        for key in STATS_KEYS:
            row[key] = mean_std([stats[(variant, r["seed"])][key] for r in rs])
        drops = [stats[(variant, r["seed"])].get(ALIGNED_KEY) for r in rs]
        row[ALIGNED_KEY] = None if None in drops else mean_std(drops)
        for r in sorted(rs, key=lambda r: r["seed"]):
            pic = os.path.join(r["dir"], "pictures")
            if os.path.isdir(pic):
                row["pictures"][r["seed"]] = _rel(pic)
        rows.append(row)
    rows.sort(key=_order)
    bases = _base_variants(rows)

    decodes = Decodes(refs_dir, pair, kept)

    for row in rows:
        base = bases.get(row["context"])
        row["base"] = base if base != row["variant"] else None
        if row["base"] is None:
            continue
        base_runs = {r["seed"]: r for r in by_variant[base]}
        seeds = []
        for r in sorted(by_variant[row["variant"]], key=lambda r: r["seed"]):
            b = base_runs.get(r["seed"])
            if b is None:
                continue
            entry = {"seed": r["seed"], "bootstrap": {}}
            ours, theirs = stats[(row["variant"], r["seed"])], stats[(base, r["seed"])]
            for key in (*STATS_KEYS, ALIGNED_KEY):
                if key in ours and key in theirs:
                    entry[key] = ours[key] - theirs[key]
            for s in test_splits:
                if s in r["bleu"] and s in b["bleu"]:
                    iv = decodes.interval(b, r, s, n_resamples=n_resamples, level=level)
                    iv["base_hypotheses"] = _rel(iv["base_hypotheses"])
                    iv["other_hypotheses"] = _rel(iv["other_hypotheses"])
                    entry["bootstrap"][s] = iv
            seeds.append(entry)
        row["paired_seeds"] = seeds
        row["paired_mean"] = {s: paired(finished, pair, base, row["variant"], s) for s in splits}
        row["paired_mean"].update({key: mean_std([e[key] for e in seeds]) for key in STATS_KEYS})
        with_drop = [e[ALIGNED_KEY] for e in seeds if ALIGNED_KEY in e]
        row["paired_mean"][ALIGNED_KEY] = mean_std(with_drop) if with_drop else None

    table = {"pair": pair, "stats_split": split, "splits": splits, "test_splits": test_splits,
             "bootstrap": {"n_resamples": n_resamples, "level": level}, "rows": rows,
             "runs": [{"variant": r["variant"], "seed": r["seed"], "dir": _rel(r["dir"]),
                       "normalizer": r["normalizer"], "stats": stats[(r["variant"], r["seed"])]}
                      for r in sorted(finished, key=lambda r: (r["variant"], r["seed"]))],
             "unfinished": unfinished, "ignored": ignored,
             "notes": [f"{x['path']} scores {x['recomputed']:.2f} against "
                       f"{decodes.refs_path(x['split'])}, its bleu_{x['split']}.json "
                       f"{x['recorded']:.2f}: other references?" for x in decodes.mismatches()]}
    table["verdicts"] = verdicts(table)
    return table


def _row(table: dict, context: str, normalizer: str) -> Optional[dict]:
    """The context's trained row of ``normalizer`` (its ``<context>-<normalizer>`` variant first;
    never a decoding-only row)."""
    found = [r for r in table["rows"] if r["context"] == context and r["normalizer"] == normalizer
             and not r.get("decoded_only")]
    found.sort(key=lambda r: r["variant"] != f"{context}-{normalizer}")
    return found[0] if found else None


def verdicts(table: dict) -> List[dict]:
    """The targets' verdicts per context inference: dicts ``target``, ``context``, ``status``
    (``met``, ``not met`` or ``not measured``) and ``figures`` (the numbers behind it, in words)."""
    out = []
    for context in sorted({r["context"] for r in table["rows"]}):
        base = _row(table, context, "softmax")
        for norm in BLEU_TARGET:
            target = f"{NAMES[norm]} within {BLEU_MARGIN} BLEU of softmax or better"
            row = _row(table, context, norm)
            v = {"target": target, "context": context, "normalizer": norm}
            deltas = {s: (row or {}).get("paired_mean", {}).get(s) for s in table["test_splits"]}
            if base is None or row is None or row.get("base") is None or not deltas \
                    or any(d is None for d in deltas.values()):
                what = "softmax" if base is None else NAMES[norm]
                out.append(dict(v, status="not measured",
                                figures=f"no finished {what} run with a paired softmax seed on "
                                        f"every test split"))
                continue
            ok = all(d["mean"] >= -BLEU_MARGIN for d in deltas.values())
            figures = "; ".join(
                f"{s}: {d['mean']:+.2f} BLEU ({NAMES[norm]} {row['bleu'][s]['tok']['mean']:.2f} vs "
                f"softmax {base['bleu'][s]['tok']['mean']:.2f}; mean of the differences over seeds "
                f"{', '.join(map(str, d['seeds']))})" for s, d in deltas.items())
            out.append(dict(v, status="met" if ok else "not met", figures=figures,
                            deltas={s: d["mean"] for s, d in deltas.items()}))
        row = _row(table, context, REPETITION_TARGET)
        v = {"target": f"{REPETITION_TARGET} lowers REP and DROP against softmax",
             "context": context, "normalizer": REPETITION_TARGET}
        if base is None or row is None:
            out.append(dict(v, status="not measured",
                            figures=f"no finished {'softmax' if base is None else REPETITION_TARGET} run"))
            continue
        rep = (base["rep_per_100"]["mean"], row["rep_per_100"]["mean"])
        key = ALIGNED_KEY if base.get(ALIGNED_KEY) and row.get(ALIGNED_KEY) else "drop_attn"
        drop = (base[key]["mean"], row[key]["mean"])
        lower = [e for e in row.get("paired_seeds", [])
                 if e["rep_per_100"] < 0 and e.get(key, 0) < 0]
        name = "DROP (aligner)" if key == ALIGNED_KEY else "DROP-attn"
        figures = (f"REP per 100 words {rep[0]:.2f} → {rep[1]:.2f}, {name} {drop[0]:.2f} % → "
                   f"{drop[1]:.2f} % (means over {base['n']} softmax and {row['n']} "
                   f"{REPETITION_TARGET} seeds; both lower in {len(lower)} of "
                   f"{len(row.get('paired_seeds', []))} paired seeds)")
        out.append(dict(v, status="met" if rep[1] < rep[0] and drop[1] < drop[0] else "not met",
                        figures=figures, rep_per_100=list(rep), drop=list(drop), drop_key=key))
    return out


def _first_picture(folder: str) -> str:
    """A run's first picture (a link to a file, which every page viewer opens), else its folder."""
    pngs = sorted(glob.glob(os.path.join(folder, "*.png")))
    return pngs[0] if pngs else folder


def _pct(ms: Optional[dict]) -> Optional[dict]:
    return None if ms is None else dict(ms, mean=100 * ms["mean"], std=100 * ms["std"])


def markdown(table: dict, out_dir: str = ".") -> str:
    """The Markdown section of :func:`collect`'s table; links (pictures) relative to ``out_dir``."""
    splits, tests = table["splits"], table["test_splits"]
    level = int(round(100 * table["bootstrap"]["level"]))
    lines = [f"## Attention normalisers on {table['pair']} (docs/method.md §3.5)", "",
             "Mean ± std over the finished seeds (n); BLEU tokenised (`bleu_tok`) and detokenised "
             "(sacreBLEU, `bleu_detok`) from each run's `bleu_<split>.json`.", "",
             "| normaliser | variant | seeds (n) | "
             + " | ".join(f"{s} BLEU | {s} detok" for s in splits) + " |",
             "|---|---|---|" + "---:|---:|" * len(splits)]
    for r in table["rows"]:
        cells = []
        for s in splits:
            cells += [fmt(r["bleu"][s]["tok"]), fmt(r["bleu"][s]["detok"])]
        lines.append(f"| {label(r)} | {r['variant']} | "
                     f"{', '.join(map(str, r['seeds']))} ({r['n']}) | " + " | ".join(cells) + " |")
    lines += ["", f"Attention on {table['stats_split']} (`attention_stats_{table['stats_split']}.json`): "
              "exactly-zero weights (% of the weights over real source positions, pooled), REP "
              "(repeated bigrams and doubled words per 100 reference words), DROP-attn (% of source "
              "words whose total attention is below 0.5), DROP (`aligned_drop_"
              f"{table['stats_split']}.json`: % of the source words aligned to the reference that no "
              "hypothesis word is aligned to, by an aligner that sees no model; – where not measured).", "",
              "| normaliser | variant | n | zero weights % | REP / 100 words | DROP-attn % | DROP % (aligner) "
              "| pictures |",
              "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in table["rows"]:
        pics = ", ".join(f"[seed {seed}]({os.path.relpath(_first_picture(p), out_dir)})"
                         for seed, p in r["pictures"].items()) or "–"
        lines.append(f"| {label(r)} | {r['variant']} | {r['n']} | "
                     f"{fmt(_pct(r['zero_fraction']))} | {fmt(r['rep_per_100'])} | "
                     f"{fmt(r['drop_attn'])} | {fmt(r.get(ALIGNED_KEY))} | {pics} |")
    compared = [r for r in table["rows"] if r.get("base")]
    if compared:
        n_res = table["bootstrap"]["n_resamples"]
        lines += ["", "Against softmax, seed by seed (same seed): tokenised BLEU difference on the "
                  f"test splits with its paired bootstrap interval ({n_res:,} resamples of the "
                  f"sentences, {level} %), and the differences of the attention figures. The "
                  "last row of a normaliser: mean ± std of its seeds' differences (BLEU from the runs' "
                  "`bleu_<split>.json`, as in the targets).", "",
                  "| normaliser | seed | " + " | ".join(f"Δ {s} BLEU" for s in tests)
                  + " | Δ zero % | Δ REP / 100 | Δ DROP-attn | Δ DROP |",
                  "|---|---|" + "---:|" * (len(tests) + 4)]
        for r in compared:
            for e in r["paired_seeds"]:
                cells = [format_interval(e["bootstrap"][s]) if s in e["bootstrap"] else "–"
                         for s in tests]
                cells += [f"{100 * e['zero_fraction']:+.2f}", f"{e['rep_per_100']:+.2f}",
                          f"{e['drop_attn']:+.2f}",
                          f"{e[ALIGNED_KEY]:+.2f}" if ALIGNED_KEY in e else "–"]
                lines.append(f"| {label(r)} | {e['seed']} | " + " | ".join(cells) + " |")
            pm = r["paired_mean"]
            cells = [fmt(pm.get(s)) for s in tests]
            cells += [fmt(_pct(pm["zero_fraction"])), fmt(pm["rep_per_100"]), fmt(pm["drop_attn"]),
                      fmt(pm.get(ALIGNED_KEY))]
            lines.append(f"| {label(r)} | mean | " + " | ".join(cells) + " |")
    lines += ["", "### Targets", ""]
    for v in table["verdicts"]:
        lines.append(f"* **{v['target']}** ({v['context']}): **{v['status']}** — {v['figures']}.")
    for title, items in (("Not finished (in no figure)", [f"{u['variant']} seed {u['seed']} "
                                                          f"({u['dir']})" for u in table["unfinished"]]),
                         ("Ignored (no attention normaliser)", table["ignored"]),
                         ("Notes", table["notes"])):
        if items:
            lines += ["", f"{title}:", ""] + [f"* {x}" for x in items]
    return "\n".join(lines) + "\n"
