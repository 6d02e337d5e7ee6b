#!/usr/bin/env python
"""Write a named subset of a prepared CNN/DailyMail split, binarised and as text, for decoding.

Decoding all 4,490 test articles of See et al.'s chunks with beam 5 takes hours on a CPU, so the
summarization results are reported on fixed, documented subsets of the test split. This script
cuts one out of a folder written by ``prepare_cnndm_see.sh`` / ``prepare_cnndm.py``::

    # every K-th record of the split (records 0, K, 2K, ...): CNN and DailyMail in the split's
    # proportions (the chunks hold CNN stories first: the first 1,093 test records are all CNN)
    python data_scripts/cnndm_subset.py --data data-bin/cnndm_see --split test --every 5
        -> split test_every5 (898 records)
    # the first N records (--first N -> test_firstN)
    # the test records that See et al.'s published outputs cover (shared cnn_dm_sample)
    python data_scripts/cnndm_subset.py --data data-bin/cnndm_see --split test \
        --see-sample "$ACVI_DATA/cnn_dm_sample"
        -> splits test_realsumm (REALSumm: See's baseline, pointer-gen, pointer-gen + coverage)
           and test_summeval (SummEval M8: See's pointer-gen)

Each subset NAME gets, in ``--data``: ``NAME.src-tgt.{src,tgt}.{bin,idx}`` (the parent split's
binarised records, copied item by item: the same token ids and OOV markers, so fairseq-generate
``--gen-subset NAME`` decodes exactly those records), ``NAME.article`` / ``NAME.summary`` /
``NAME.ids`` (the parent's text lines) and ``NAME.index`` (0-based line of each record in the
parent split). A ``--see-sample`` subset also gets ``NAME.see_<system>.txt``, See et al.'s output
for the same records in the same order.

Matching See's outputs to records: SummEval records carry a story id (``dm-test-<sha1>``) that is
the third column of ``test.ids``; REALSumm records carry none and are matched on their text (the
first 200 letters/digits of the article, ``<t>`` markers removed), as the data README verified
(12 of 100). A sample record that matches no record of the split is left out (counted, printed);
one that matches two is an error.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import DataError, log, read_lines, run_main, write_lines  # noqa: E402

SRC, TGT = "src", "tgt"
REALSUMM_SYSTEMS = {"baseline": "out_baseline.txt", "pointer_gen": "out_pointer_gen.txt",
                    "pointer_gen_cov": "out_pointer_gen_cov.txt"}
SUMMEVAL_SYSTEMS = {"pointer_gen_m8": "test.pointer_generator_M8.txt"}
_ALNUM = re.compile(r"[^0-9a-z]+")


def text_key(article: str, n: int = 200) -> str:
    """The first n lower-case letters/digits of an article, sentence markers removed."""
    words = [t for t in article.split() if t not in ("<t>", "</t>", "<s>", "</s>")]
    return _ALNUM.sub("", " ".join(words).lower())[:n]


def read_split_text(data: Path, split: str) -> Dict[str, List[str]]:
    """``{article, summary[, ids]}`` lines of a split (``ids``: written by prepare_cnndm_see.sh
    only); counts must agree."""
    out = {k: read_lines(data / f"{split}.{k}") for k in ("article", "summary")}
    if (data / f"{split}.ids").is_file():
        out["ids"] = read_lines(data / f"{split}.ids")
    n = len(out["article"])
    for k, v in out.items():
        if len(v) != n:
            raise DataError(f"{data / f'{split}.{k}'} has {len(v)} lines but "
                            f"{data / f'{split}.article'} has {n}")
    return out


def story_ids(ids_lines: Sequence[str], path: Path) -> List[str]:
    """Third tab-separated column of ``<split>.ids`` (the story sha1)."""
    out = []
    for i, line in enumerate(ids_lines, 1):
        cols = line.split("\t")
        if len(cols) != 3:
            raise DataError(f"{path}:{i}: expected 'chunk<TAB>index<TAB>story_sha1', got {line!r}")
        out.append(cols[2])
    return out


def copy_binarised(data: Path, split: str, name: str, index: Sequence[int]) -> None:
    """Copy records ``index`` of ``split``'s binarised source and target into split ``name``."""
    from fairseq.data import Dictionary, data_utils, indexed_dataset

    for lang in (SRC, TGT):
        dict_path = data / f"dict.{lang}.txt"
        if not dict_path.is_file():
            raise DataError(f"missing file: {dict_path}")
        d = Dictionary.load(str(dict_path))
        prefix = data / f"{split}.{SRC}-{TGT}.{lang}"
        ds = data_utils.load_indexed_dataset(str(prefix), d, "mmap")
        if ds is None:
            raise DataError(f"missing binarised split: {prefix}.bin/.idx")
        out = data / f"{name}.{SRC}-{TGT}.{lang}"
        builder = indexed_dataset.make_builder(f"{out}.bin", impl="mmap", vocab_size=len(d))
        for i in index:
            if i >= len(ds):
                raise DataError(f"{prefix}.bin has {len(ds)} records; record {i} asked for")
            builder.add_item(ds[i])
        builder.finalize(f"{out}.idx")


def write_subset(data: Path, split: str, name: str, index: Sequence[int],
                 text: Dict[str, List[str]], extra: Dict[str, List[str]] = None) -> None:
    copy_binarised(data, split, name, index)
    for k in text:
        write_lines(data / f"{name}.{k}", [text[k][i] for i in index])
    write_lines(data / f"{name}.index", [str(i) for i in index])
    for system, lines in (extra or {}).items():
        write_lines(data / f"{name}.see_{system}.txt", lines)
    log(f"{data / name}: {len(index)} records of {split}"
        + (f" with See et al.'s {', '.join(extra)}" if extra else ""))


def match_realsumm(sample: Path, text: Dict[str, List[str]]):
    """(records of the split, row of the sample) for the REALSumm articles found in the split."""
    folder = sample / "realsumm_ptrgen"
    keys: Dict[str, List[int]] = {}
    for i, a in enumerate(text["article"]):
        keys.setdefault(text_key(a), []).append(i)
    index, rows = [], []
    for r, article in enumerate(read_lines(folder / "src.txt")):
        hits = keys.get(text_key(article), [])
        if len(hits) > 1:
            raise DataError(f"{folder / 'src.txt'}:{r + 1}: matches records {hits} of the split")
        if hits:
            index.append(hits[0])
            rows.append(r)
    return index, rows


def match_summeval(sample: Path, ids: List[str]):
    folder = sample / "summeval"
    where = {sha: i for i, sha in enumerate(ids)}
    index, rows = [], []
    for r, line in enumerate(read_lines(folder / "test.ids")):
        sha = line.strip().rsplit("-", 1)[-1]
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            raise DataError(f"{folder / 'test.ids'}:{r + 1}: expected '<source>-test-<sha1>', "
                            f"got {line!r}")
        if sha in where:
            index.append(where[sha])
            rows.append(r)
    return index, rows


def see_outputs(folder: Path, systems: Dict[str, str], rows: Sequence[int]) -> Dict[str, List[str]]:
    out = {}
    for system, fname in systems.items():
        lines = read_lines(folder / fname)
        out[system] = [lines[r] for r in rows]
    return out


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, type=Path, help="prepared folder (data-bin/cnndm_see)")
    p.add_argument("--split", default="test", help="parent split (default: test)")
    p.add_argument("--every", type=int, help="every K-th record (0, K, 2K, ...): split <split>_everyK")
    p.add_argument("--first", type=int, help="the first N records: split <split>_firstN")
    p.add_argument("--see-sample", type=Path,
                   help="cnn_dm_sample folder: subsets <split>_realsumm and <split>_summeval")
    return p


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    if args.first is None and args.every is None and args.see_sample is None:
        raise DataError("nothing to do: give --every K, --first N and/or --see-sample FOLDER")
    text = read_split_text(args.data, args.split)
    n = len(text["article"])
    if args.first is not None:
        if not 1 <= args.first <= n:
            raise DataError(f"--first {args.first}: the split {args.split} has {n} records")
        write_subset(args.data, args.split, f"{args.split}_first{args.first}", range(args.first), text)
    if args.every is not None:
        if not 1 <= args.every <= n:
            raise DataError(f"--every {args.every}: the split {args.split} has {n} records")
        write_subset(args.data, args.split, f"{args.split}_every{args.every}",
                     range(0, n, args.every), text)
    if args.see_sample is not None:
        if "ids" not in text:
            raise DataError(f"missing file: {args.data / args.split}.ids (story ids, written by "
                            "data_scripts/prepare_cnndm_see.sh): needed to match SummEval records")
        ids = story_ids(text["ids"], args.data / f"{args.split}.ids")
        for name, (index, rows), folder, systems, total in (
                ("realsumm", match_realsumm(args.see_sample, text), "realsumm_ptrgen",
                 REALSUMM_SYSTEMS, 100),
                ("summeval", match_summeval(args.see_sample, ids), "summeval", SUMMEVAL_SYSTEMS, 100)):
            if not index:
                raise DataError(f"none of {args.see_sample / folder}'s articles is in "
                                f"{args.data / args.split}.article")
            log(f"{folder}: {len(index)} of its articles are in {args.split} "
                f"({total - len(index)} are not: See's chunks hold part of the test set)")
            write_subset(args.data, args.split, f"{args.split}_{name}", index, text,
                         see_outputs(args.see_sample / folder, systems, rows))
    return 0


if __name__ == "__main__":
    run_main(main)
