"""Lead-k extractive baseline: the first k sentences of each article (lead-3 for CNN/DailyMail).

    python -m fairseq_acvi.cli.lead_baseline --src test.article --out lead3.txt [-k 3]

The baseline every CNN/DailyMail paper reports (See et al. 2017, Table 1: lead-3 40.34 ROUGE-1
on the full test set). It is scored with the same evaluator as the models
(``fairseq_acvi.cli.eval_summarization``) on the same articles.

Sentences of a tokenised article (See et al.'s preprocessing: lower-cased, PTB tokens): sentence
markers ``<s> </s> <t> </t>`` are boundaries and are removed; otherwise a sentence ends after a
``.``, ``!`` or ``?`` token together with the closing quotes or brackets that follow it
(``'' ' ) -rrb-``). An article with fewer than k sentences is output whole. The output is one line
per article, the k sentences joined by spaces (the format of the decoded summaries); an empty
article line is an error naming the file and line.
"""
from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from fairseq_acvi.summ_eval.lead import lead

def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", required=True, help="articles, one per line (tokenised)")
    p.add_argument("--out", required=True, help="output: the lead-k summary of each article")
    p.add_argument("-k", type=int, default=3, help="sentences per summary (default 3)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from fairseq_acvi.data.text_lines import read_lines

    args = get_parser().parse_args(argv)
    if args.k < 1:
        print(f"error: -k must be >= 1, got {args.k}", file=sys.stderr)
        return 2
    try:
        articles = read_lines(args.src)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with open(args.out, "w", encoding="utf-8") as f:
        for a in articles:
            f.write(lead(a, args.k) + "\n")
    print(f"[lead] {len(articles)} lead-{args.k} summaries -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
