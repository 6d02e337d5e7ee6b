"""Attention normalisers report: the runs of recipes/mt_normalizers.sh in one table (docs/method.md §3.5).

Usage::

    python -m fairseq_acvi.cli.normalizers_report runs/normalizers/en_de [KEPT_RUN ...] \\
        --refs-dir data-bin/multi30k_en_de/raw --out-dir docs/results/normalizers_DATE \\
        [--split test2016] [--cnndm runs/normalizers/cnndm]

Per normaliser (softmax first): BLEU (tokenised and detokenised) on every decoded split, the
fraction of exactly-zero attention weights, REP per 100 reference words and DROP-attn on
``--split`` (each run's ``attention_stats_<split>.json``), mean ± std over the finished seeds;
every normaliser minus softmax seed by seed, with the paired bootstrap interval of the test
splits' BLEU from the runs' hypotheses (``gen_<split>.txt``, a ``.gz`` copy in the run folder, or
the copy ``mt_report --keep-outputs`` kept in ``OUT/outputs/``) against ``<refs-dir>/<split>.<tgt>``;
the verdicts of the targets (sparsemax and 1.5-entmax within 0.5 BLEU of softmax or better;
csparsemax lowers REP and DROP-attn); links to each run's ``pictures/``. With ``--cnndm``, the
CNN/DM runs' ROUGE and repeated-trigram rates and the verdict "csparsemax lowers repeated
trigrams against softmax without coverage". The tables: :mod:`fairseq_acvi.mt_eval.normalizer_table`
and :mod:`fairseq_acvi.summ_eval.normalizer_runs`.

Writes ``OUT/normalizers.md`` and ``OUT/normalizers.json``. A finished run without its
statistics file, a missing references file, hypotheses that are not one per reference, an
unreadable file: an error naming the file, exit status 2.
"""
import argparse
import json
import os
import sys

from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.normalizer_table import collect, markdown
from fairseq_acvi.mt_eval.runs import find_runs
from fairseq_acvi.summ_eval import normalizer_runs


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+",
                   help="one pair's run folders (RUNS/<pair> of recipes/mt_normalizers.sh, and runs "
                        "kept in a results page's outputs/<pair>/), searched recursively")
    p.add_argument("--refs-dir", required=True,
                   help="the raw references, <split>.<tgt> (the data-bin's raw/ folder)")
    p.add_argument("--out-dir", required=True, help="writes normalizers.md and normalizers.json here")
    p.add_argument("--split", default="test2016",
                   help="split of the attention statistics (attention_stats_<split>.json; "
                        "default test2016)")
    p.add_argument("--cnndm", default=None,
                   help="the CNN/DM runs' folder (RUNS/cnndm): adds their table and verdict")
    p.add_argument("--cnndm-subset", default="test",
                   help="the CNN/DM runs' decoded subset (scores_<subset>.json; default test)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    return p


def _under(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def _runs(roots, out_dir):
    """The runs under ``roots``. The copies that this report keeps in ``OUT/outputs/`` are not runs
    of their own when found by walking a folder above them (OUT under RUNS); a root inside
    ``OUT/outputs/`` names kept runs, which count."""
    kept = os.path.join(out_dir, "outputs")
    return [r for root in roots for r in find_runs([root])
            if _under(root, kept) or not _under(r["dir"], kept)]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.resamples < 1 or not 0 < args.level < 1:
            raise ReportError("--resamples must be >= 1 and --level between 0 and 1")
        runs = _runs(args.runs, args.out_dir)
        table = collect(runs, args.refs_dir, args.split, kept=args.out_dir,
                        n_resamples=args.resamples, level=args.level)
        cnndm = (normalizer_runs.collect(args.cnndm, args.cnndm_subset) if args.cnndm else None)
    except (ReportError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    text = f"# Sparse and constrained attention: {table['pair']}\n\n" + markdown(table, args.out_dir)
    result = {"mt": table}
    if cnndm is not None:
        text += "\n" + normalizer_runs.markdown(cnndm)
        result["cnndm"] = cnndm
    with open(os.path.join(args.out_dir, "normalizers.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    with open(os.path.join(args.out_dir, "normalizers.md"), "w", encoding="utf-8") as f:
        f.write(text)
    verdicts = table["verdicts"] + (cnndm["verdicts"] if cnndm else [])
    print(f"[normalizers_report] {len(table['runs'])} finished runs -> {args.out_dir}/normalizers.md, "
          "normalizers.json")
    for v in verdicts:
        print(f"[normalizers_report] {v['target']} ({v['context']}): {v['status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
