"""Seed 003's Table 1 beside the attention grid of ``recipes/mt_attention_grid.sh`` (docs/method.md
§3.6; the library: fairseq_acvi/mt_eval/seed003_grid.py, its page seed003_grid_markdown.py).

Usage (``python -m fairseq_acvi.cli.attention_grid_report``)::

    python -m fairseq_acvi.cli.attention_grid_report RUNS [RUNS ...] --refs-dir DATA_BIN/raw \\
        --out-dir OUT [--grid-seed 1] [--pair en_de]

``RUNS``: folders holding run folders (searched for ``run.json``, as ``mt_report`` does): the
recipe's ``$RUNS/$PAIR``, or the ``outputs/`` folder a report kept with ``mt_report --keep-outputs``
(whose hypotheses are ``gen_<split>.txt.gz``). ``--refs-dir``: the references the runs were scored
against, ``<split>.<target language>`` (recipes/mt_multi30k.sh: ``$DATA_BIN/raw``).

Writes ``OUT/grid.md`` (the seed's 13 rows with our tokenised BLEU per split and validation
perplexity, mean ± std over finished seeds; the ordering of the configurations per scorer; whether
(iii) is below (i) and (ii), in the seed and in ours, with the paired bootstrap intervals of the
grid seed's runs on test2016 and test2017 and a verdict per scorer; ACVI beside soft where run,
with each seed's paired bootstrap of ACVI − soft on the test splits) and
``OUT/grid.json`` (the same as data). A missing reference file, hypotheses that do not match the
references, or no run of the grid: a line naming the file on stderr and exit status 2.
"""
import argparse
import json
import os
import sys

from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.runs import combine_runs, find_runs
from fairseq_acvi.mt_eval.seed003_grid import build, grid_pairs
from fairseq_acvi.mt_eval.seed003_grid_markdown import markdown
from fairseq_acvi.mt_eval.summary import aggregate


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="folders holding run folders (searched recursively)")
    p.add_argument("--refs-dir", required=True,
                   help="the references, <split>.<target language> (the data-bin's raw/ folder)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--grid-seed", type=int, default=1,
                   help="the seed of the grid's runs, whose hypotheses the bootstrap compares (default 1)")
    p.add_argument("--pair", default=None,
                   help="the pair to report (default: the one pair with runs of the grid)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    args = p.parse_args(argv)
    try:
        runs = combine_runs(find_runs(args.runs), [])
        pairs = grid_pairs(runs)
        if not pairs:
            raise ReportError(f"no run of the attention grid (none-grid-none, soft-<scorer>-<config>, "
                              f"acvi-<scorer>-<config>) under {', '.join(args.runs)}")
        if args.pair is None and len(pairs) > 1:
            raise ReportError(f"grid runs of several pairs ({', '.join(pairs)}): --pair chooses one")
        pair = args.pair or pairs[0]
        if pair not in pairs:
            raise ReportError(f"--pair {pair}: no grid run of that pair (there are: {', '.join(pairs)})")
        report = build(runs, aggregate(runs), pair, args.refs_dir, args.grid_seed, args.resamples)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "grid.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out_dir, "grid.md"), "w", encoding="utf-8") as f:
        f.write(markdown(report))
    for w in report["warnings"]:
        print(f"[attention_grid_report] warning: {w}", file=sys.stderr)
    print(f"[attention_grid_report] {pair}: " + "; ".join(
        f"{s} {c['verdict']}" for s, c in report["claim"].items())
        + f" -> {args.out_dir}/grid.md, grid.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
