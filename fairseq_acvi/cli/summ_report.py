"""Collect summarization systems into one table per test subset: ours, lead-3 and See et al.'s outputs.

    python -m fairseq_acvi.cli.summ_report --data data-bin/cnndm_see \
        --subset test_every5 --subset test_realsumm --subset test_summeval \
        --system "soft=checkpoints/cnndm_see_cpu/soft_seed1/hyp_{subset}_phase4.txt" \
        --system "soft+cov=checkpoints/cnndm_see_cpu/soft_seed1/hyp_{subset}.txt" \
        --coverage-pair soft:soft+cov --out-dir docs/results/cnndm_DATE

For every subset (a split written by ``data_scripts/cnndm_subset.py``: ``NAME.article``,
``NAME.summary``), rows are scored by one evaluator on the same articles and references
(:func:`fairseq_acvi.summ_eval.scoring.evaluate`: ROUGE-1/2/L, novel-word and OOV-adoption
rates, novel and repeated n-grams; METEOR with ``--meteor``):

* ``lead-3``: the first three sentences of each article (:mod:`fairseq_acvi.summ_eval.lead`);
* ``See et al.: <system>``: every ``NAME.see_<system>.txt`` beside the subset (their published
  outputs for the same articles);
* each ``--system LABEL=PATH``: ``{subset}`` in PATH is replaced by the subset name; a system
  whose file does not exist for a subset is listed as not decoded (never silently dropped).

``--coverage-pair A:B`` adds the relative change of the repeated-trigram rate from system A
(before the coverage phase) to B (after it): the See et al. observation that coverage removes
repetition. Outputs ``results.json`` and ``results.md`` in ``--out-dir``.

Every row scored here gets 95 % bootstrap intervals of its ROUGE figures (1,000 resamples of the
articles; :mod:`fairseq_acvi.metrics.bootstrap`), and ``--paired A:B`` adds the paired bootstrap
of B − A on the same articles (difference, interval, share of resamples where B is higher) — the
honest way to say whether two systems differ on one test set.

``--keep-outputs`` copies every scored system's summaries into ``OUT_DIR/outputs/SUBSET/`` so a
report keeps the files its figures came from (checkpoint folders do not always survive); See et
al.'s outputs are part of the data beside the subset and are not copied.
``--earlier REPORT.json`` brings in the rows of an earlier report whose summaries are no longer at
hand, only after checking that the evaluator and the articles still give that report's lead-3
figures (otherwise the rows are not comparable and the command fails); such rows are marked with
the earlier report's date.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from typing import Dict, Optional, Sequence

from fairseq_acvi.summ_eval.report import (coverage_change, import_earlier, keep_outputs, markdown,
                                           paired, parse_system, read_report, score_subset,
                                           split_pair)
from fairseq_acvi.summ_eval.scoring import vocab_from_dict

def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="prepared folder holding the subsets")
    p.add_argument("--subset", action="append", required=True,
                   help="subset name (repeatable): test_every5, test_realsumm, ...")
    p.add_argument("--system", action="append", default=[],
                   help="LABEL=PATH of a system's restored summaries; {subset} in PATH is "
                        "replaced by the subset name (repeatable)")
    p.add_argument("--coverage-pair", action="append", default=[],
                   help="BEFORE:AFTER labels: report the change of the repeated-trigram rate")
    p.add_argument("--meteor", default="none", help="METEOR modes (exact,full) or none (default)")
    p.add_argument("--dict", help="dict.txt for the OOV-adoption rate (default: DATA/dict.src.txt)")
    p.add_argument("--paired", action="append", default=[],
                   help="A:B labels: paired bootstrap of B - A's ROUGE on the same articles "
                        "(both scored in this report; repeatable)")
    p.add_argument("--earlier", action="append", default=[],
                   help="results.json of an earlier report: its system rows that are not scored "
                        "now are added, marked with its date (repeatable)")
    p.add_argument("--keep-outputs", action="store_true",
                   help="copy each scored system's summaries into OUT_DIR/outputs/SUBSET/")
    p.add_argument("--out-dir", required=True)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    modes = [] if args.meteor == "none" else [m for m in args.meteor.split(",") if m]
    try:
        systems = [parse_system(s) for s in args.system]
        dict_path = args.dict or os.path.join(args.data, "dict.src.txt")
        vocab = vocab_from_dict(dict_path) if os.path.isfile(dict_path) else None
        earlier = []
        for path in args.earlier:
            earlier.append((path, read_report(path)))
        report = {"date": datetime.date.today().isoformat(), "data": args.data, "subsets": {}}
        pers: Dict[str, Dict] = {}
        for subset in args.subset:
            res, per = score_subset(args.data, subset, systems, modes, vocab)
            n_earlier = sum(import_earlier(res, subset, path, rep) for path, rep in earlier)
            report["subsets"][subset] = res
            pers[subset] = per
            print(f"[summ_report] {subset}: {len(res['rows'])} rows ({n_earlier} from earlier "
                  f"reports), {len(res['missing'])} not decoded", file=sys.stderr)
        # a pair names labels of some subset (See et al.'s differ from subset to subset); it is
        # reported for the subsets that have both systems (as rows scored now, earlier or missing)
        labels = {label for res in report["subsets"].values() for label in [*res["rows"], *res["missing"]]}
        pairs = [split_pair(p, labels, "--paired") for p in args.paired]
        cov_pairs = [split_pair(p, labels, "--coverage-pair") for p in args.coverage_pair]
        for subset, res in report["subsets"].items():
            here = {*res["rows"], *res["missing"]}
            res["paired"] = {p: paired(pers[subset], *ab) for p, ab in zip(args.paired, pairs)
                             if set(ab) <= here}
            res["coverage"] = {p: coverage_change(res["rows"], *ab)
                               for p, ab in zip(args.coverage_pair, cov_pairs)}
        os.makedirs(args.out_dir, exist_ok=True)
        if args.keep_outputs:
            keep_outputs(args.out_dir, report)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with open(os.path.join(args.out_dir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    md = markdown(report)
    with open(os.path.join(args.out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
