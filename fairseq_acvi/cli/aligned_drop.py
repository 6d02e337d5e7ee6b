"""Malaviya et al.'s DROP of translation runs, from an aligner that sees no model
(docs/method.md §3.5; :mod:`fairseq_acvi.metrics.word_alignment`).

For each run folder, its hypotheses of ``--split`` (``gen_<split>.txt`` or ``.txt.gz``) and the
references are aligned to the sources together with the aligner corpus (the training pairs), and
the run receives ``aligned_drop_<split>.json`` (``drop`` in percent, the word counts, the aligner)
and ``aligned_drop_<split>.links.gz`` (per sentence the source–reference and source–hypothesis
links, tab-separated), from which ``--rescore`` computes the same figures again without the
aligner::

    python -m fairseq_acvi.cli.aligned_drop runs/normalizers/en_de/soft-*_seed1 --split test2016 \\
        --src data-bin/multi30k_en_de/raw/test2016.en --ref data-bin/multi30k_en_de/raw/test2016.de \\
        --corpus-src $ACVI_DATA/multi30k/tok/train.lc.norm.tok.en \\
        --corpus-tgt $ACVI_DATA/multi30k/tok/train.lc.norm.tok.de
    python -m fairseq_acvi.cli.aligned_drop docs/results/normalizers_DATE/outputs/en_de/* --split test2016 --rescore

Sources, references and corpus are tokenised text, one sentence a line, as the hypotheses are.
"""
import argparse
import json
import os
import sys
from typing import List, Optional

from fairseq_acvi.data.text_lines import read_text_lines, write_gzip_text
from fairseq_acvi.metrics.attention_stats import drop_score
from fairseq_acvi.mt_eval.logs import ReportError
from fairseq_acvi.mt_eval.paired_decodes import hypotheses_candidates, read_hypotheses

ALIGNER = "eflomal (IBM1 + HMM + fertility, 3 samplers), forward links"


def _hypotheses(run_dir: str, split: str) -> List[str]:
    """The run's hypotheses of ``split``, looked for where the reports look (no kept folder)."""
    tried = hypotheses_candidates({"dir": run_dir}, split)
    for path in tried:
        if os.path.isfile(path):
            return read_hypotheses(path)
    raise ReportError(f"{run_dir}: no hypotheses of {split} (looked for {', '.join(tried)})")


def _lines(path: str, option: str) -> List[str]:
    if not os.path.isfile(path):
        raise ReportError(f"{option} {path}: no such file")
    return read_text_lines(path)


def rescore(run_dir: str, split: str) -> dict:
    """The figures of ``aligned_drop_<split>.json`` from its kept links."""
    path = os.path.join(run_dir, f"aligned_drop_{split}.links.gz")
    if not os.path.isfile(path):
        raise ReportError(f"{path}: missing (run without --rescore first)")
    ref, hyp = [], []
    for n, line in enumerate(read_text_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise ReportError(f"{path}, line {n}: expected 'source-reference links<TAB>source-hypothesis links'")
        ref.append(parts[0])
        hyp.append(parts[1])
    try:
        return drop_score(ref, hyp)
    except ValueError as e:
        raise ReportError(f"{path}: {e}") from None


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders holding gen_<split>.txt(.gz)")
    p.add_argument("--split", default="test2016")
    p.add_argument("--src", help="the split's tokenised sources")
    p.add_argument("--ref", help="the split's tokenised references")
    p.add_argument("--corpus-src", help="the aligner corpus's sources (the training pairs)")
    p.add_argument("--corpus-tgt", help="the aligner corpus's targets")
    p.add_argument("--skip-done", action="store_true", help="leave runs that have the figures")
    p.add_argument("--rescore", action="store_true",
                   help="recompute the figures from the kept links (no aligner) and compare")
    args = p.parse_args(argv)
    try:
        if args.rescore:
            bad = 0
            for run in args.runs:
                got = rescore(run, args.split)
                with open(os.path.join(run, f"aligned_drop_{args.split}.json"), encoding="utf-8") as f:
                    saved = json.load(f)
                same = all(saved.get(k) == v for k, v in got.items())
                bad += not same
                print(f"[aligned_drop] {run}: DROP {got['drop']:.2f} % "
                      f"({'as kept' if same else 'NOT as kept: ' + str(saved.get('drop'))})")
            return 1 if bad else 0
        for opt in ("src", "ref", "corpus_src", "corpus_tgt"):
            if not getattr(args, opt):
                p.error(f"--{opt.replace('_', '-')} is needed (or --rescore)")
        src, ref = _lines(args.src, "--src"), _lines(args.ref, "--ref")
        if len(src) != len(ref):
            raise ReportError(f"--src {args.src} has {len(src)} lines, --ref {args.ref} {len(ref)}")
        corpus_src, corpus_tgt = _lines(args.corpus_src, "--corpus-src"), _lines(args.corpus_tgt, "--corpus-tgt")
        if len(corpus_src) != len(corpus_tgt):
            raise ReportError(f"--corpus-src has {len(corpus_src)} lines, --corpus-tgt {len(corpus_tgt)}")
        from fairseq_acvi.metrics.word_alignment import aligned_drop
        for run in args.runs:
            out = os.path.join(run, f"aligned_drop_{args.split}.json")
            if args.skip_done and os.path.isfile(out):
                print(f"[aligned_drop] {run}: kept (--skip-done)")
                continue
            hyp = _hypotheses(run, args.split)
            if len(hyp) != len(src):
                raise ReportError(f"{run}: {len(hyp)} hypotheses of {args.split}, {len(src)} sources")
            res = aligned_drop(src, ref, hyp, corpus_src, corpus_tgt)
            write_gzip_text(os.path.join(run, f"aligned_drop_{args.split}.links.gz"),
                            [f"{a}\t{b}" for a, b in zip(res.pop("src_ref_links"), res.pop("src_hyp_links"))])
            res.update(aligner=ALIGNER, corpus_pairs=len(corpus_src), split=args.split)
            with open(out, "w", encoding="utf-8") as f:
                f.write(json.dumps(res, indent=1, sort_keys=True) + "\n")
            print(f"[aligned_drop] {run}: DROP {res['drop']:.2f} % ({res['dropped_words']} of "
                  f"{res['reference_aligned_words']} source words)")
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
