"""Score video captions and print the ACVI paper's Table 3 layout (docs/method.md §3.2, §5).

Usage (one ``--split`` per evaluated split; NAME ``valid``/``test`` fill the Table 3 rows)::

    python -m fairseq_acvi.cli.eval_captioning \\
        --split valid DATA/valid.tsv gen_valid.txt \\
        --split test  DATA/test.tsv  gen_test.txt  [--name ACVI-ours] [--json scores.json]

HYPOTHESES is either

* the output of ``fairseq-generate DATA --task video_captioning --gen-subset SPLIT ...`` (format
  ``generate``, recognised by its ``H-<id>`` lines). The ids are mapped to videos exactly as the task
  numbers its items (``fairseq_acvi.data.video_features.item_video_ids``): with ``--id-mode video``
  (the default; generate with ``--caption-eval-unique-videos``) id ``i`` is the ``i``-th distinct
  video of the captions file in order of first appearance; with ``--id-mode caption`` (generated
  without that flag) id ``i`` is the ``i``-th caption line, and each video takes the hypothesis of
  its lowest id. Of several hypotheses for one id (``--nbest``) the first printed is used; ``D-``
  (detokenised) lines are preferred to ``H-`` lines when present;
* or a file of ``VIDEO_ID<TAB>caption`` lines, one per video (format ``tsv``).

Every video of the captions file needs exactly one hypothesis and every hypothesis must belong to a
video of the file; anything else is an error. All references of a video are used.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import OrderedDict
from typing import Dict, List, Optional

from fairseq_acvi.data.video_features import group_references, item_video_ids, read_caption_file
from fairseq_acvi.metrics.captioning import ALL_METRICS, format_table3, score_captions

_GEN_LINE = re.compile(r"^([HD])-(\d+)\t([^\t]*)\t(.*)$")


def read_generate_output(path: str) -> Dict[int, str]:
    """{item id: hypothesis} from fairseq-generate output (first D- line per id, else first H- line)."""
    found: Dict[str, Dict[int, str]] = {"H": {}, "D": {}}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = _GEN_LINE.match(line.rstrip("\r\n"))
            if m:
                kind, idx, text = m.group(1), int(m.group(2)), m.group(4)
                found[kind].setdefault(idx, text)
    hyps = found["D"] or found["H"]
    if not hyps:
        raise ValueError(f"{path}: no 'H-<id>' lines of fairseq-generate output found")
    return hyps


def read_hypothesis_tsv(path: str) -> Dict[str, str]:
    """{video id: caption} from ``VIDEO_ID<TAB>caption`` lines; a repeated video id is an error."""
    hyps: Dict[str, str] = OrderedDict()
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip():
                raise ValueError(f"{path}:{line_no}: expected 'VIDEO_ID<TAB>caption'")
            vid = fields[0].strip()
            if vid in hyps:
                raise ValueError(f"{path}:{line_no}: second hypothesis for video {vid!r}")
            hyps[vid] = fields[1].strip()
    return hyps


def detect_format(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if _GEN_LINE.match(line.rstrip("\r\n")):
                return "generate"
    return "tsv"


def hypotheses_by_video(hyp_path: str, caption_path: str, hyp_format: str = "auto",
                        id_mode: str = "video") -> Dict[str, str]:
    """Map a hypothesis file onto the videos of ``caption_path``: {video id: hypothesis}."""
    records = read_caption_file(caption_path)
    fmt = detect_format(hyp_path) if hyp_format == "auto" else hyp_format
    if fmt == "tsv":
        return read_hypothesis_tsv(hyp_path)
    if fmt != "generate":
        raise ValueError(f"unknown hypothesis format {fmt!r}")
    by_id = read_generate_output(hyp_path)
    items = item_video_ids(records, unique_videos=(id_mode == "video"))
    bad = sorted(i for i in by_id if i >= len(items))
    if bad:
        raise ValueError(
            f"{hyp_path}: ids {bad[:5]} are out of range for {len(items)} items of {caption_path} "
            f"(--id-mode {id_mode}); was fairseq-generate run on this split "
            f"{'with' if id_mode == 'video' else 'without'} --caption-eval-unique-videos?")
    hyps: Dict[str, str] = {}
    for idx in sorted(by_id):
        hyps.setdefault(items[idx], by_id[idx])
    return hyps


def evaluate_split(caption_path: str, hyp_path: str, hyp_format: str = "auto", id_mode: str = "video",
                   metrics=ALL_METRICS) -> Dict[str, float]:
    refs = group_references(read_caption_file(caption_path))
    hyps = hypotheses_by_video(hyp_path, caption_path, hyp_format, id_mode)
    missing = [v for v in refs if v not in hyps]
    if missing:
        raise ValueError(f"{hyp_path}: no hypothesis for {len(missing)} of {len(refs)} videos of "
                         f"{caption_path} (e.g. {missing[:5]})")
    extra = [v for v in hyps if v not in refs]
    if extra:
        raise ValueError(f"{hyp_path}: hypotheses for videos not in {caption_path}: {extra[:5]}")
    return score_captions(hyps, refs, metrics)


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", nargs=3, action="append", required=True, metavar=("NAME", "CAPTIONS", "HYPOTHESES"),
                   help="split name (valid/test for Table 3), its captions file, the hypotheses file")
    p.add_argument("--hyp-format", choices=("auto", "generate", "tsv"), default="auto")
    p.add_argument("--id-mode", choices=("video", "caption"), default="video",
                   help="how fairseq-generate ids map to videos (see above)")
    p.add_argument("--metrics", nargs="+", choices=ALL_METRICS, default=list(ALL_METRICS))
    p.add_argument("--name", default="ours", help="column name of our results in the table")
    p.add_argument("--json", default=None, help="also write {split: {metric: value}} to this file")
    return p


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict[str, float]]:
    args = get_parser().parse_args(argv)
    results: Dict[str, Dict[str, float]] = OrderedDict()
    for name, captions, hyp_path in args.split:
        if name in results:
            raise SystemExit(f"--split {name} given twice")
        results[name] = evaluate_split(captions, hyp_path, args.hyp_format, args.id_mode, args.metrics)
        print(f"{name}: " + "  ".join(f"{m} {v:.4f}" for m, v in results[name].items()))
    print()
    print(format_table3(results, name=args.name,
                        extra_metrics=[m for m in ("BLEU-4", "METEOR") if m in args.metrics]))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as err:
        sys.exit(f"error: {err}")
