"""Keep finished translation runs in a results page, so that they outlive the machine they were
trained on: their hypotheses (gzipped), scores, ``run.json``, attention statistics, the lines of
``train.log`` a report reads and, with ``--pictures``, ``pictures/``, in
``OUT/outputs/<pair>/<variant>_seed<N>/`` (:mod:`fairseq_acvi.mt_eval.kept_outputs`). A kept folder
is a run folder for ``mt_report`` and ``normalizers_report``.

Usage::

    python -m fairseq_acvi.cli.keep_runs runs/normalizers/en_de/soft-entmax15_seed1 \\
        --out-dir docs/results/normalizers_DATE --pictures
"""
import argparse
import sys
from typing import List, Optional

from fairseq_acvi.mt_eval.kept_outputs import keep_outputs
from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.runs import find_runs


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders (or folders holding them)")
    p.add_argument("--out-dir", required=True, help="the results page the runs are kept in")
    p.add_argument("--pictures", action="store_true", help="also keep each run's pictures/")
    args = p.parse_args(argv)
    try:
        written = keep_outputs(find_runs(args.runs), args.out_dir, pictures=args.pictures)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for dest in written:
        print(f"[keep_runs] {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
