"""Evaluate generated summaries: ROUGE-1/2/L, METEOR exact/full, novel-word and OOV-adoption rates,
novel and repeated n-gram rates.

    python -m fairseq_acvi.cli.eval_summarization --hyp H --ref R [--src S] [--dict D] \
        [--meteor exact,full|none] [--json OUT]

H, R (and S) are line-aligned: line i of each is example i (a last line without a trailing
newline is fine). Empty lines are an error naming the file and line (``--allow-empty-hyp`` scores
an empty hypothesis as an empty summary instead). Metric definitions: ROUGE in
:mod:`fairseq_acvi.metrics.rouge`, METEOR in :mod:`fairseq_acvi.metrics.meteor`, novelty in
:mod:`fairseq_acvi.metrics.novelty` (docs/method.md §5, P Tables 1-2), n-gram novelty and
repetition in :mod:`fairseq_acvi.metrics.ngrams` (See et al. 2017 §7: their repetition and
novel n-gram figures). Hypotheses must already have their ``<unk-j>`` markers restored
(``data_scripts/restore_oov.py``); a left-over marker is an error.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, Optional, Sequence

from fairseq_acvi.summ_eval.scoring import evaluate, vocab_from_dict
from fairseq_acvi.data.text_lines import read_aligned


ROWS = [("n", "examples", "{:.0f}"), ("rouge1", "ROUGE-1 F1", "{:.2f}"),
        ("rouge2", "ROUGE-2 F1", "{:.2f}"), ("rougeL", "ROUGE-L F1 (summary-level)", "{:.2f}"),
        ("meteor_exact", "METEOR exact", "{:.2f}"), ("meteor_full", "METEOR full", "{:.2f}"),
        ("novel_rate", "novel-word rate (% tokens)", "{:.3f}"),
        ("oov_adoption", "OOV-adoption rate (% tokens)", "{:.3f}"),
        ("unk_rate", "unknown-token rate (% tokens)", "{:.3f}"),
        ("oov_per_summary", "adopted OOV tokens / summary", "{:.3f}"),
        ("novel_1gram", "novel 1-grams (% of 1-grams)", "{:.2f}"),
        ("novel_2gram", "novel 2-grams (% of 2-grams)", "{:.2f}"),
        ("novel_3gram", "novel 3-grams (% of 3-grams)", "{:.2f}"),
        ("novel_4gram", "novel 4-grams (% of 4-grams)", "{:.2f}"),
        ("repeat_3gram", "repeated 3-grams (% of 3-grams)", "{:.2f}")]


def format_table(res: Dict[str, object]) -> str:
    lines = []
    for key, label, fmt in ROWS:
        if key in res and res[key] is not None:
            lines.append(f"{label:<32} {fmt.format(res[key])}")
    return "\n".join(lines)


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hyp", required=True, help="generated summaries, one per line")
    p.add_argument("--ref", required=True, help="reference summaries, line-aligned with --hyp")
    p.add_argument("--src", help="source articles, line-aligned (enables the novelty figures)")
    p.add_argument("--dict", help="the model's dict.txt (enables the OOV-adoption rate; "
                                  "needs --src)")
    p.add_argument("--meteor", default="exact,full",
                   help="comma-separated METEOR modes among exact,full, or 'none' "
                        "(default: exact,full)")
    p.add_argument("--allow-empty-hyp", action="store_true",
                   help="score empty hypothesis lines instead of failing")
    p.add_argument("--json", help="also write the figures to this JSON file")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    modes = [] if args.meteor == "none" else [m for m in args.meteor.split(",") if m]
    bad = [m for m in modes if m not in ("exact", "full")]
    if bad:
        print(f"error: --meteor: unknown mode(s) {bad}; use exact,full or none", file=sys.stderr)
        return 2
    if args.dict and not args.src:
        print("error: --dict needs --src (OOV adoption counts source words)", file=sys.stderr)
        return 2
    paths = {"hyp": args.hyp, "ref": args.ref}
    if args.src:
        paths["src"] = args.src
    try:
        data = read_aligned(paths, allow_empty=("hyp",) if args.allow_empty_hyp else ())
        vocab = vocab_from_dict(args.dict) if args.dict else None
        res = evaluate(data["hyp"], data["ref"], data.get("src"), vocab, modes,
                       hyp_name=args.hyp)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    res["config"] = {
        "rouge": "rouge-score, use_stemmer=True, F1 mean over pairs x100; ROUGE-L = rougeLsum "
                 "(sentences split on <s>/<t> markers and . ! ? tokens)",
        "meteor": "meteor-1.5.jar -l en -norm; exact = -m exact; full = exact stem synonym "
                  "paraphrase; system-level Final score x100",
        "novelty": "% of hypothesis tokens; novel = not in the source (UNK excluded); "
                   "OOV adoption = outside --dict vocabulary and in the source",
        "ngrams": "% of hypothesis n-gram occurrences (lower-cased tokens, markers removed); "
                  "novel = not in the source article; repeated = seen earlier in the same summary",
    }
    print(format_table(res))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
