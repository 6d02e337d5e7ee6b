"""Translation report: collect the runs of ``recipes/mt_multi30k.sh`` and ``recipes/mt_parallel.sh``
into tables and charts.

Usage (``fairseq-acvi-mt-report``, or ``python -m fairseq_acvi.cli.mt_report``)::

    fairseq-acvi-mt-report RUNS [RUNS ...] --out-dir docs/results/multi30k_DATE \\
        [--title "..."] [--compare lstm soft] [--merge docs/results/multi30k_EARLIER/results.json]

Splits: the tables have a column per named split a run decoded: those its ``run.json`` lists under
``splits`` (recipes/mt_parallel.sh writes the corpus's own, e.g. ``valid`` and ``test``), or
Multi30K's ``valid``, ``test2016`` and ``test2017`` when it lists none (recipes/mt_multi30k.sh).

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
recipe pairs a stochastic model's decodes with its mean-context decode ``<split>_K0``). Runs of
``recipes/mt_pag.sh`` (character targets) add chrF (``chrf`` in ``bleu_<split>.json``) and
``replan.json`` (planning attention: the share of validation steps whose plan was recomputed):
a chrF table with that share, and chrF minus ``soft``'s seed by seed beside BLEU's.

Outputs in ``--out-dir``: ``results.json`` (every run and the per-variant mean ± std over seeds),
``report.md`` (the tables), and PNG charts: ``bleu.png`` (test BLEU per variant, error bars = std
over seeds), ``valid_curves.png`` (validation perplexity per epoch), ``kl_curves.png`` (ACVI's KL
parts and σ² per epoch) and ``mc_sweep.png`` (BLEU against K). ``--compare A B`` prints B against
A (perplexity ratio, BLEU difference, speed ratio) — the side-by-side baseline check of
``experiments/multi30k_soft_vs_lstm.sh``. The report also gives every variant's BLEU minus
``soft``'s seed by seed (the pair's one ``soft`` variant, whatever its tag, or the variant
``--paired-base`` names). ``--merge`` adds the runs an earlier report recorded in its
``results.json`` (run folders are not kept, e.g. from another machine or an earlier day).
``--keep-outputs`` keeps beside the report what each BLEU was computed from: every run folder's
hypotheses (gzipped ``H-`` lines), ``bleu_*.json`` and ``run.json`` in
``OUT/outputs/<pair>/<variant>_seed<N>/`` (:mod:`fairseq_acvi.mt_eval.kept_outputs`).
``--intervals BASE:OTHER … --refs-dir DIR`` adds, seed by seed and split by split, the paired
bootstrap interval of OTHER's BLEU minus BASE's from the runs' hypotheses (``intervals.json`` and a
section of report.md; :mod:`fairseq_acvi.mt_eval.run_intervals`).
"""
import argparse
import json
import os
import sys

from fairseq_acvi.mt_eval import (
    ReportError, aggregate, charts, combine_runs, compare, default_title, find_runs, keep_outputs,
    load_merged, markdown)
from fairseq_acvi.mt_eval.run_intervals import intervals, parse_comparison
from fairseq_acvi.mt_eval.run_intervals import markdown as interval_markdown


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", help="folders holding run folders (searched recursively)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--title", default=None,
                   help="the report's heading (default: 'Multi30K translation' for Multi30K runs, "
                        "'Translation' once a run of another corpus is among them)")
    p.add_argument("--compare", nargs=2, metavar=("BASE", "OTHER"),
                   help="print variant OTHER against BASE (e.g. lstm soft)")
    p.add_argument("--paired-base", metavar="VARIANT",
                   help="the variant the seed-by-seed table subtracts (default: the pair's one "
                        "soft variant, e.g. soft-e20; none when there are several)")
    p.add_argument("--merge", nargs="+", default=[], metavar="RESULTS_JSON",
                   help="also count the runs recorded in these earlier reports' results.json "
                        "(their run folders need not exist any more)")
    p.add_argument("--intervals", nargs="+", default=[], metavar="BASE:OTHER",
                   help="also the paired bootstrap interval of BLEU(OTHER) − BLEU(BASE), seed by "
                        "seed and split by split, from the runs' hypotheses (needs --refs-dir; "
                        "fairseq_acvi/mt_eval/run_intervals.py); written to intervals.json")
    p.add_argument("--refs-dir", metavar="DIR",
                   help="the references <split>.<tgt> of --intervals (the data-bin's raw/ folder)")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--keep-outputs", action="store_true",
                   help="also keep, in OUT/outputs/<pair>/<variant>_seed<N>/, every run folder's "
                        "hypotheses (the H- lines of gen_<decode>.txt, gzipped), bleu_*.json and "
                        "run.json, so that each BLEU can be scored again "
                        "(fairseq_acvi/mt_eval/kept_outputs.py)")
    args = p.parse_args(argv)
    try:
        found = find_runs(args.runs) if args.runs else []
        runs = combine_runs(found, load_merged(args.merge))
        if not runs:
            raise ReportError("no runs: give run folders and/or --merge results.json")
        if args.paired_base and all(r["variant"] != args.paired_base for r in runs):
            raise ReportError(f"--paired-base {args.paired_base}: no such variant among the runs ("
                              + ", ".join(sorted({r['variant'] for r in runs})) + ")")
        comparisons = [parse_comparison(c) for c in args.intervals]
        if comparisons and not args.refs_dir:
            raise ReportError("--intervals needs --refs-dir (the references the decodes were scored against)")
        rows = intervals(runs, comparisons, args.refs_dir)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    agg = aggregate(runs)
    os.makedirs(args.out_dir, exist_ok=True)
    kept = []
    if args.keep_outputs:
        try:
            kept = keep_outputs(runs, args.out_dir)
        except ReportError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    public = [{k: v for k, v in r.items() if k not in ("dir", "source")}
              | {"run": os.path.relpath(r["dir"]) if r["dir"] else r.get("run")} for r in runs]
    with open(os.path.join(args.out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"runs": public, "aggregate": agg}, f, indent=1, default=str)
    with open(os.path.join(args.out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(runs, agg, args.title or default_title(runs), base=args.paired_base))
        if kept:
            f.write(f"\nDecoded outputs of {len(kept)} run{'s' if len(kept) != 1 else ''} (hypotheses, `bleu_*.json`, `run.json`): "
                    "`outputs/<pair>/<variant>_seed<N>/`; `data_scripts/score_mt.py --gen "
                    "outputs/<pair>/<run>/gen_<split>.txt.gz --ref REFERENCE` scores one again.\n")
        if rows:
            f.write("\n".join(interval_markdown(rows)) + "\n")
    if rows:
        with open(os.path.join(args.out_dir, "intervals.json"), "w", encoding="utf-8") as f:
            json.dump({"intervals": rows}, f, indent=1)
    written = [] if args.no_charts else charts(runs, agg, args.out_dir)
    print(f"[mt_report] {len(runs)} runs -> {args.out_dir}/report.md, results.json"
          + (", " + ", ".join(os.path.basename(w) for w in written) if written else "")
          + (f"; the decoded outputs of {len(kept)} runs in {args.out_dir}/outputs/" if kept else ""))
    if args.compare:
        for line in compare(agg, *args.compare, runs=runs):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
