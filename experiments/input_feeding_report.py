"""The page of experiments/input_feeding_multi30k.sh: Multi30K En→De, ``soft`` and ACVI with and
without input feeding (docs/method.md §3.7) at the same compute, what the parallel path buys a user.

For each context and seed it reads the input-feeding run (``<context>_seed<N>``), the run without
input feeding (``<context>-nofeed_seed<N>``) and the latter's ``budget.json``
(experiments/input_feeding_budget.py: the speed ratio timed side by side and the update budget it
gives), and writes a table of both (updates, epochs, the best validation perplexity, tokenised
BLEU of valid / test2016 / test2017 as their ``bleu_<split>.json`` record it) and, per split, the
no-feed − feed difference of tokenised BLEU with its paired bootstrap interval over sentences
(:mod:`fairseq_acvi.mt_eval.paired_decodes`, from the runs' ``gen_<split>.txt``; a decode whose
recomputed BLEU is not its recorded one is an error). A pair with a missing or unfinished run is
listed as waiting. Where the control ``<context>-feedsameupd_seed<N>`` has finished (the
input-feeding run trained on from its 20 epochs to the no-feed run's updates: the same updates,
more time; stage 3 of experiments/input_feeding_multi30k.sh), it gets a row and its own
no-feed − control differences, which separate what dropping input feeding gains from what the
extra updates give.
Writes ``input_feeding.md`` and ``input_feeding.json`` to ``--out-dir``; with ``--keep-outputs``
also every run's hypotheses, scores and log lines under ``OUT/outputs/en_de/<run>/``
(:func:`fairseq_acvi.mt_eval.keep_outputs`, and the no-feed run's ``budget.json``): that folder is
itself a ``--runs`` folder, so the page can be made again, and every BLEU on it scored again,
from the repository alone.

    python experiments/input_feeding_report.py --runs runs/multi30k/en_de \\
        --refs-dir data-bin/multi30k_en_de/raw --keep-outputs \\
        --out-dir docs/results/input_feeding_multi30k_DATE
"""
import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fairseq_acvi.data.json_numbers import read_json  # noqa: E402
from fairseq_acvi.mt_eval.kept_outputs import keep_outputs, run_output_dir  # noqa: E402
from fairseq_acvi.mt_eval.logs import ReportError, parse_train_log  # noqa: E402
from fairseq_acvi.mt_eval.paired_decodes import Decodes  # noqa: E402
from fairseq_acvi.mt_eval.runs import SPLITS, read_run  # noqa: E402

CONTEXTS = ("soft", "acvi")
#: the tag of the control run: input feeding, trained to the no-feed run's updates
CONTROL_TAG = "feedsameupd"


def _updates(run: dict) -> Optional[int]:
    """Updates at the run's last validation (its train.log), or None."""
    log = os.path.join(run["dir"], "train.log")
    if not os.path.isfile(log):
        log += ".gz"                       # a page's kept copy (--keep-outputs)
    if not os.path.isfile(log):
        return None
    valid = parse_train_log(log)["valid"]
    if not valid:
        return None
    last = valid[max(valid)]
    return int(last["num_updates"]) if "num_updates" in last else None


def _row(run: dict, resumed_from: Optional[dict] = None) -> dict:
    """The table's row of a run. A run resumed from another's checkpoint (the control, from the
    input-feeding run's) logs only its own epochs, but its ``checkpoint_best.pt`` is the best of
    all of them: fairseq carries the best validation loss over a resume and keeps the earlier
    checkpoint when no later epoch beats it. So the better of the two runs' best epochs is the
    row's best epoch and perplexity (the one its decodes come from)."""
    best_epoch, ppl = run.get("best_epoch"), run.get("valid_ppl")
    if resumed_from is not None and resumed_from.get("valid_ppl") is not None \
            and (ppl is None or resumed_from["valid_ppl"] < ppl):
        best_epoch, ppl = resumed_from.get("best_epoch"), resumed_from["valid_ppl"]
    return {"dir": os.path.relpath(run["dir"]), "updates": _updates(run),
            "epochs": run.get("epochs_trained"), "best_epoch": best_epoch,
            "valid_ppl": ppl, "train_wall_s": run.get("train_wall_s"),
            "bleu": {s: run["bleu"].get(s, {}).get("bleu_tok") for s in SPLITS}}


def _finished(run_dir: str) -> bool:
    return all(os.path.isfile(os.path.join(run_dir, f"bleu_{s}.json")) for s in SPLITS)


def _paired(decodes: Decodes, base: dict, other: dict) -> dict:
    """{split: other − base of tokenised BLEU with its paired bootstrap interval}."""
    keep = ("delta", "low", "high", "p_other_better", "level", "n_resamples")
    return {split: {k: v for k, v in decodes.interval(base, other, split).items() if k in keep}
            for split in SPLITS}


def collect(runs_dir: str, refs_dir: str, seeds: List[int],
            pair: str = "en_de") -> Tuple[dict, List[dict]]:
    """(``{"pairs": [...], "waiting": [...]}``: one entry per context and seed whose two runs are
    finished (rows, budget, paired differences per split), the others listed as waiting; the run
    records (:func:`read_run`) the pairs were made from)."""
    decodes = Decodes(refs_dir, pair)
    out, runs = {"runs_dir": os.path.relpath(runs_dir), "pairs": [], "waiting": []}, []
    for context in CONTEXTS:
        for seed in seeds:
            feed_dir = os.path.join(runs_dir, f"{context}_seed{seed}")
            nofeed_dir = os.path.join(runs_dir, f"{context}-nofeed_seed{seed}")
            missing = [d for d in (feed_dir, nofeed_dir) if not _finished(d)]
            if missing:
                out["waiting"].append({"context": context, "seed": seed,
                                       "unfinished": [os.path.relpath(d) for d in missing]})
                continue
            feed, nofeed = read_run(feed_dir), read_run(nofeed_dir)
            runs += [feed, nofeed]
            budget_path = os.path.join(nofeed_dir, "budget.json")
            try:
                budget = read_json(budget_path, "experiments/input_feeding_budget.py writes it")
            except ValueError as e:
                raise ReportError(str(e)) from None
            entry = {"context": context, "seed": seed, "feed": _row(feed), "nofeed": _row(nofeed),
                     "budget": {k: budget.get(k) for k in ("ratio", "budget_updates",
                                                           "feed_updates", "batches_timed")},
                     "paired": _paired(decodes, feed, nofeed)}
            control_dir = os.path.join(runs_dir, f"{context}-{CONTROL_TAG}_seed{seed}")
            if _finished(control_dir):
                control = read_run(control_dir)
                runs.append(control)
                entry["control"] = _row(control, resumed_from=feed)
                entry["paired_control"] = _paired(decodes, control, nofeed)
            out["pairs"].append(entry)
    decodes.raise_mismatches()
    return out, runs


def _f(x, fmt="{:.2f}"):
    return "–" if x is None else fmt.format(x)


def markdown(table: dict) -> str:
    lines = ["# Input feeding or not, at the same compute: Multi30K En→De", "",
             f"Runs under `{table['runs_dir']}`: the input-feeding model trained 20 epochs; the model "
             "without input feeding for the updates those take in the same time on one core "
             "(`budget.json`: the two models' training steps timed side by side on real batches). "
             "Tokenised BLEU, beam 10; differences no-feed − feed with 95 % paired bootstrap "
             "intervals over sentences.", ""]
    if table["pairs"]:
        lines += ["| context | seed | decoder | updates | epochs | best epoch | valid ppl | valid BLEU "
                  "| test2016 | test2017 |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for e in table["pairs"]:
            for name, key in (("input feeding", "feed"), ("no input feeding, parallel path", "nofeed"),
                              ("input feeding to the no-feed updates (control)", "control")):
                if key not in e:
                    continue
                r = e[key]
                lines.append(f"| {e['context']} | {e['seed']} | {name} | {_f(r['updates'], '{:d}')} | "
                             f"{_f(r['epochs'], '{:.0f}')} | {_f(r['best_epoch'], '{:.0f}')} | "
                             f"{_f(r['valid_ppl'])} | "
                             + " | ".join(_f(r["bleu"][s]) for s in SPLITS) + " |")
        lines += ["", "| context | seed | speed ratio (no-feed / feed) | budget (updates) | "
                  + " | ".join(f"Δ {s} [95 %]" for s in SPLITS) + " |",
                  "|---|---|---:|---:|" + "---|" * len(SPLITS)]
        for e in table["pairs"]:
            b = e["budget"]
            cells = [f"{p['delta']:+.2f} [{p['low']:+.2f}, {p['high']:+.2f}]"
                     for p in (e["paired"][s] for s in SPLITS)]
            lines.append(f"| {e['context']} | {e['seed']} | {_f(b['ratio'], '{:.3f}')} | "
                         f"{_f(b['budget_updates'], '{:d}')} | " + " | ".join(cells) + " |")
    controls = [e for e in table["pairs"] if "control" in e]
    if controls:
        lines += ["", "The control: the input-feeding model trained on to the no-feed model's updates "
                  "(the same updates, more time). No-feed − control:", "",
                  "| context | seed | updates | " + " | ".join(f"Δ {s} [95 %]" for s in SPLITS) + " |",
                  "|---|---|---:|" + "---|" * len(SPLITS)]
        for e in controls:
            cells = [f"{p['delta']:+.2f} [{p['low']:+.2f}, {p['high']:+.2f}]"
                     for p in (e["paired_control"][s] for s in SPLITS)]
            lines.append(f"| {e['context']} | {e['seed']} | {_f(e['control']['updates'], '{:d}')} | "
                         + " | ".join(cells) + " |")
    for w in table["waiting"]:
        lines += ["", f"Waiting: {w['context']} seed {w['seed']} ({', '.join(w['unfinished'])} "
                  "not finished)."]
    return "\n".join(lines) + "\n"


def _keep(runs: List[dict], out_dir: str) -> None:
    """The runs' outputs under ``OUT/outputs/<pair>/<run>/`` with each ``budget.json``."""
    keep_outputs(runs, out_dir)
    for run in runs:
        budget = os.path.join(run["dir"], "budget.json")
        dest = os.path.join(run_output_dir(out_dir, run), "budget.json")
        if os.path.isfile(budget) and os.path.realpath(budget) != os.path.realpath(dest):
            shutil.copyfile(budget, dest)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", required=True, help="the folder of <context>[-nofeed|-feedsameupd]_seed<N> runs")
    p.add_argument("--refs-dir", required=True, help="the data-bin's raw/ (references)")
    p.add_argument("--seeds", default="1")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--keep-outputs", action="store_true",
                   help="keep every run's hypotheses, scores and log lines under OUT/outputs/")
    a = p.parse_args(argv)
    try:
        table, runs = collect(a.runs, a.refs_dir, [int(s) for s in a.seeds.split(",") if s])
        if a.keep_outputs:
            _keep(runs, a.out_dir)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "input_feeding.json"), "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    text = markdown(table)
    with open(os.path.join(a.out_dir, "input_feeding.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
