#!/usr/bin/env python
"""Replace ``<unk-j>`` markers in generated summaries by the j-th source word (docs/method.md §3.1).

    python data_scripts/restore_oov.py --src DATA/test.article --hyp GEN_OUT [--out FILE]

``--hyp`` is either the output of ``fairseq-generate`` (its ``H-<id>\\t<score>\\t<tokens>`` lines
are used, ordered by id; the first hypothesis of each id when ``--nbest`` > 1) or a plain file
with one hypothesis per line, aligned with ``--src`` (auto-detected, or ``--format``).
``--src`` is the article side file written by ``prepare_cnndm.py`` (``{split}.article``: the
un-encoded source whose token j is the word behind ``<unk-j>``). The result, one summary per line
in source order, goes to ``--out`` (default stdout). ``<unk>`` (an OOV word absent from the source)
is kept unless ``--unk`` gives a replacement. Mismatches (missing ids, a line count different
from the source, a marker past the end of its source) are errors naming the file and line.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairseq_acvi.data.text_lines import read_lines  # noqa: E402
from fairseq_acvi.data.oov_markers import UNK, restore  # noqa: E402

_H_LINE = re.compile(r"^H-(\d+)\t([^\t]*)\t(.*)$")


def parse_generate(path: str, lines: List[str], n: int) -> List[str]:
    """Hypotheses of a ``fairseq-generate`` log, ordered by sample id 0..n-1."""
    hyps: Dict[int, str] = {}
    for i, line in enumerate(lines, 1):
        m = _H_LINE.match(line)
        if m:
            sid = int(m.group(1))
            if sid >= n:
                raise ValueError(f"{path}:{i}: sample id {sid} but the source has {n} lines")
            hyps.setdefault(sid, m.group(3))
    missing = [k for k in range(n) if k not in hyps]
    if missing:
        raise ValueError(f"{path}: no H- line for {len(missing)} of {n} sample ids "
                         f"(first missing: {missing[0]})")
    return [hyps[k] for k in range(n)]


def restore_lines(hyps: List[str], srcs: List[str], hyp_path: str, line_numbers: bool = True,
                  unk: Optional[str] = None) -> List[str]:
    """Restore every hypothesis; errors name ``hyp_path`` and the 1-based example number."""
    out = []
    for i, (h, s) in enumerate(zip(hyps, srcs), 1):
        try:
            toks = restore(h.split(), s.split())
        except ValueError as e:
            where = f"{hyp_path}:{i}" if line_numbers else f"{hyp_path}: sample id {i - 1}"
            raise ValueError(f"{where}: {e}") from None
        if unk is not None:
            toks = [unk if t == UNK else t for t in toks]
        out.append(" ".join(toks))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", required=True, help="the {split}.article side file")
    p.add_argument("--hyp", required=True, help="fairseq-generate output or plain hypotheses")
    p.add_argument("--format", choices=("auto", "generate", "plain"), default="auto")
    p.add_argument("--unk", help="replacement for <unk> (default: keep <unk>)")
    p.add_argument("--out", help="output file (default: stdout)")
    args = p.parse_args(argv)
    try:
        srcs = read_lines(args.src)
        # fairseq-generate may print an empty hypothesis; in a plain file that is an error
        raw = read_lines(args.hyp, allow_empty=True)
        fmt = args.format
        if fmt == "auto":
            fmt = "generate" if any(_H_LINE.match(x) for x in raw) else "plain"
        if fmt == "generate":
            hyps = parse_generate(args.hyp, raw, len(srcs))
            out = restore_lines(hyps, srcs, args.hyp, line_numbers=False, unk=args.unk)
        else:
            for i, line in enumerate(raw, 1):
                if not line.strip():
                    raise ValueError(f"{args.hyp}:{i}: empty line")
            if len(raw) != len(srcs):
                raise ValueError(f"{args.hyp} has {len(raw)} lines but {args.src} has "
                                 f"{len(srcs)}: the files must be line-aligned")
            out = restore_lines(raw, srcs, args.hyp, unk=args.unk)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    text = "".join(line + "\n" for line in out)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
