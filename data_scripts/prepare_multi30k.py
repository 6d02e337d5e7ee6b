"""Prepare Multi30K (task 1: WMT16-18 multimodal MT, text only) for fairseq, word level.

Input: the Multi30K task-1 folder of the official repository (github.com/multi30k/dataset,
``data/task1``), of which only ``tok/{train,val,test_2016_flickr,test_2017_flickr}.lc.norm.tok.LANG``
(LANG in en de fr cs) is read; from ``--raw-dir`` (``MULTI30K_DIR`` of the shell entry point), else
``$ACVI_DATA/multi30k`` when the environment variable ``ACVI_DATA`` names a data root holding that
folder, else downloaded into ``data-bin/raw/multi30k/tok``.

Text: the corpus's own ``tok/`` files (lower-cased, punctuation-normalised, Moses-tokenised by the
corpus's ``scripts/task1-tokenize.sh``), used exactly as they ship; nothing is re-tokenised,
re-cased or un-escaped (the Moses XML escapes ``&apos; &quot; &amp;`` stay tokens). Why: published
text-only Multi30K baselines train on these files and report lower-cased *tokenised* BLEU against
them, so scores computed on ``raw/`` below are comparable with those numbers; and at word level with
a frequency threshold of 2 (words seen once in train become ``<unk>``) the vocabularies stay small
(about 6k-10k types per language: en 5,917, fr 6,478, de 7,855, cs 10,396 with the full train set),
so no subword model is needed.

Splits: train = ``train`` (29,000; ``--train-lines N`` keeps only its first N lines, for smoke runs,
and PROVENANCE.txt says so), valid = ``val`` (1,014), test2016 = ``test_2016_flickr`` (1,000) and
test2017 = ``test_2017_flickr`` (1,000). Czech has no 2017 test set: a pair with cs gets test2016
only. ``test_2017_mscoco`` and ``test_2018_flickr`` are not built.
``fairseq-preprocess --testpref a,b`` calls the binarised test sets ``test`` and ``test1``; the named
split -> fairseq subset mapping is written to ``splits.json`` (e.g. ``{"train": "train", "valid":
"valid", "test2016": "test", "test2017": "test1"}``) and to PROVENANCE.txt; decode with
``--gen-subset`` set from it.

Dictionaries: separate source and target dictionaries built by fairseq-preprocess from the training
text actually used (``--thresholdsrc/--thresholdtgt THRESHOLD``, default 2), with
``--padding-factor 1``: they hold exactly the words seen at least THRESHOLD times plus fairseq's 4
specials (no ``madeupword`` fillers).

Every input file is checked before anything is written: a missing file (all are named), a src/tgt
line-count mismatch (both files and counts), an empty or whitespace-only line (file:line; fairseq's
encoders reject empty sources), CR line endings or invalid UTF-8 (file:line) raise DataError (exit 2).
Nothing is skipped.

Output (``--dest``, default ``data-bin/multi30k_SRC_TGT``): the fairseq data-bin, ``raw/{valid,
test2016,test2017}.{SRC,TGT}`` (the tok text, byte-identical lines: the BLEU references),
``splits.json`` and ``PROVENANCE.txt``.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (run_main, REPO, DataError, acvi_data_dir, download, fairseq_preprocess, log,  # noqa: E402
                    read_parallel, require_files, require_nonempty_lines, write_lines, write_provenance)

URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/tok"
LANGS = ("en", "de", "fr", "cs")
SHARED_COPY = acvi_data_dir("multi30k")  # $ACVI_DATA/multi30k; None when ACVI_DATA is unset
TOKENISATION = "tok/*.lc.norm.tok (the corpus's lower-cased, normalised, Moses-tokenised text, as shipped)"
# named split -> corpus file stem
STEMS = {"train": "train", "valid": "val", "test2016": "test_2016_flickr", "test2017": "test_2017_flickr"}
NO_TEST2017 = ("cs",)  # languages without a test_2017_flickr file


def tok_name(stem: str, lang: str) -> str:
    return f"{stem}.lc.norm.tok.{lang}"


def split_names(src: str, tgt: str):
    """Named splits built for a pair: test2017 only when neither side is Czech."""
    names = ["train", "valid", "test2016"]
    if src not in NO_TEST2017 and tgt not in NO_TEST2017:
        names.append("test2017")
    return names


def needed_files(src: str, tgt: str):
    return [tok_name(STEMS[s], l) for s in split_names(src, tgt) for l in (src, tgt)]


def locate_input(raw_dir, src: str, tgt: str, download_dir: Path) -> Path:
    """Task-1 folder holding ``tok/``: ``raw_dir`` if given, else ``$ACVI_DATA/multi30k`` if that
    folder exists, else a download."""
    if raw_dir:
        return Path(raw_dir)
    if SHARED_COPY is not None:
        if SHARED_COPY.is_dir():
            log(f"using $ACVI_DATA/multi30k: {SHARED_COPY}")
            return SHARED_COPY
        log(f"ACVI_DATA is set but {SHARED_COPY} is not a folder: downloading")
    try:
        for name in needed_files(src, tgt):
            download(f"{URL}/{name}", download_dir / "tok" / name)
        return download_dir
    except DataError as e:
        raise DataError(f"{e}\nOffline? Set MULTI30K_DIR (--raw-dir) to a Multi30K task-1 folder holding "
                        f"tok/ with {' '.join(needed_files(src, tgt))}, or ACVI_DATA to a data root "
                        f"holding multi30k/tok/") from None


def find_tok_dir(raw_dir, src: str, tgt: str, download_dir: Path):
    """(task-1 folder, its ``tok/``) as :func:`locate_input` finds them; DataError naming every file of
    the pair that ``tok/`` lacks."""
    raw = locate_input(raw_dir, src, tgt, download_dir)
    tok = raw / "tok"
    require_files(tok, needed_files(src, tgt),
                  f"MULTI30K_DIR (--raw-dir) must be a Multi30K task-1 folder with a tok/ subfolder (got {raw})")
    return raw, tok


def mmap_count(idx_path: Path) -> int:
    """Number of sentences in a fairseq ``mmap`` index file (header: magic, version, dtype, count)."""
    with open(idx_path, "rb") as f:
        head = f.read(9 + 8 + 1 + 8)
    if len(head) < 26 or head[:9] != b"MMIDIDX\x00\x00":
        raise DataError(f"{idx_path}: not a fairseq mmap index file")
    return struct.unpack("<Q", head[18:26])[0]


def read_dict_words(path: Path):
    """Words of a fairseq dict file (``word count`` lines; fairseq's 4 specials are not listed)."""
    words = set()
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line:
            words.add(line.rsplit(" ", 1)[0])
    return words


def clean_dest(dest: Path, src: str, tgt: str) -> None:
    """Remove what an earlier build of this pair left in ``dest`` (so e.g. no stale test1 survives)."""
    if not dest.is_dir():
        return
    stale = [dest / "splits.json", dest / "PROVENANCE.txt", dest / f"dict.{src}.txt", dest / f"dict.{tgt}.txt"]
    stale += list(dest.glob(f"*.{src}-{tgt}.*.bin")) + list(dest.glob(f"*.{src}-{tgt}.*.idx"))
    stale += [dest / "raw" / f"{s}.{l}" for s in STEMS if s != "train" for l in (src, tgt)]
    for p in stale:
        if p.is_file():
            p.unlink()


def add_input_args(p: argparse.ArgumentParser, dest_default: str) -> None:
    """The options of every Multi30K data script: direction, input and output folders, train prefix, workers."""
    p.add_argument("--src", default="en", choices=LANGS)
    p.add_argument("--tgt", default="de", choices=LANGS)
    p.add_argument("--raw-dir", default=None,
                   help="Multi30K task-1 folder holding tok/ (default: $ACVI_DATA/multi30k if it exists, "
                        "else download)")
    p.add_argument("--dest", default=None, help=f"output data-bin (default {dest_default})")
    p.add_argument("--download-dir", default=str(REPO / "data-bin" / "raw" / "multi30k"))
    p.add_argument("--train-lines", type=int, default=0,
                   help="use only the first N training pairs (smoke runs; 0 = all)")
    p.add_argument("--workers", type=int, default=1)


def read_splits(tok: Path, src: str, tgt: str, splits, train_lines: int = 0):
    """Read and check the tok text of ``splits``: ({split: (src lines, tgt lines)}, training pairs in the
    file). DataError (naming the file, and line) on a src/tgt line-count mismatch, an empty file or
    line, CR line ends or invalid UTF-8, or ``train_lines`` beyond the training file; ``train_lines``
    > 0 keeps only the first N training pairs."""
    text, total_train = {}, None
    for split in splits:
        paths = [tok / tok_name(STEMS[split], l) for l in (src, tgt)]
        pair = read_parallel(*paths)
        for path, lines in zip(paths, pair):
            if not lines:
                raise DataError(f"{path} is empty")
            require_nonempty_lines(path, lines)
        if split == "train":
            total_train = len(pair[0])
            if train_lines > total_train:
                raise DataError(f"--train-lines {train_lines} asks for more than the {total_train} lines of "
                                f"{paths[0]}")
            if train_lines:
                pair = tuple(side[: train_lines] for side in pair)
        text[split] = pair
    return text, total_train


def check_binarised(dest: Path, src: str, tgt: str, subsets, counts) -> None:
    """Every binarised subset (``subsets``: named split -> fairseq subset) holds ``counts[split]``
    sentences on both sides; DataError naming the index file otherwise."""
    for split, subset in subsets.items():
        for lang in (src, tgt):
            idx = dest / f"{subset}.{src}-{tgt}.{lang}.idx"
            if not idx.is_file():
                raise DataError(f"fairseq-preprocess did not write {idx}")
            n = mmap_count(idx)
            if n != counts[split]:
                raise DataError(f"{idx} holds {n} sentences, expected {counts[split]} ({split})")


def write_references(dest: Path, src: str, tgt: str, text) -> None:
    """``raw/{split}.{lang}``: the tok text of every split but train, byte-identical lines."""
    for split in text:
        if split != "train":
            for lang, lines in zip((src, tgt), text[split]):
                write_lines(dest / "raw" / f"{split}.{lang}", lines)


def provenance_head(a, level: str, raw: Path, tok: Path, splits, subsets, counts, total_train) -> list:
    """The first lines of PROVENANCE.txt, common to the word- and character-level builds:
    corpus and level, input folder, tokenisation, training pairs, splits and their sentence counts."""
    train_note = (f"train = FIRST {a.train_lines} of the {total_train} training pairs (--train-lines; a smoke "
                  f"set, NOT the full corpus)" if a.train_lines else f"train = all {total_train} training pairs")
    lines = [
        f"Multi30K task 1 {a.src}->{a.tgt}, {level} ({URL.rsplit('/tok', 1)[0]})",
        f"input folder: {raw.name} (files {tok.name}/STEM.lc.norm.tok.LANG)",
        f"tokenisation: {TOKENISATION}; not re-tokenised",
        train_note,
        "splits (named split = corpus file -> fairseq subset): "
        + ", ".join(f"{s} = {STEMS[s]} -> {subsets[s]}" for s in splits),
        "splits.json: " + json.dumps(subsets),
    ]
    if "test2017" not in splits:
        lines.append("test2017: NOT built (Multi30K has no Czech test_2017_flickr); test2016 is the only test set")
    lines.append("sentences: " + ", ".join(f"{s}={counts[s]}" for s in splits))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_input_args(p, "data-bin/multi30k_SRC_TGT")
    p.add_argument("--threshold", type=int, default=2,
                   help="words seen fewer times in train map to <unk> (fairseq --thresholdsrc/--thresholdtgt)")
    a = p.parse_args(argv)
    if a.src == a.tgt:
        p.error(f"--src and --tgt must differ (got {a.src} {a.tgt})")
    if a.threshold < 0 or a.train_lines < 0 or a.workers < 1:
        p.error("--threshold and --train-lines must be >= 0, --workers >= 1")
    dest = Path(a.dest) if a.dest else REPO / "data-bin" / f"multi30k_{a.src}_{a.tgt}"
    splits = split_names(a.src, a.tgt)

    raw, tok = find_tok_dir(a.raw_dir, a.src, a.tgt, Path(a.download_dir))

    # read and check everything before writing anything
    text, total_train = read_splits(tok, a.src, a.tgt, splits, a.train_lines)
    counts = {s: len(text[s][0]) for s in splits}

    clean_dest(dest, a.src, a.tgt)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for split in splits:
            for lang, lines in zip((a.src, a.tgt), text[split]):
                write_lines(tmp / f"{split}.{lang}", lines)
        tests = [s for s in splits if s.startswith("test")]
        test_subsets = fairseq_preprocess(a.src, a.tgt, tmp / "train", tmp / "valid", [tmp / t for t in tests],
                                          dest, workers=a.workers, threshold=a.threshold, padding_factor=1)
    subsets = {"train": "train", "valid": "valid", **dict(zip(tests, test_subsets))}

    # the binarised splits must hold exactly the checked text
    check_binarised(dest, a.src, a.tgt, subsets, counts)
    write_references(dest, a.src, a.tgt, text)

    dict_words = {l: read_dict_words(dest / f"dict.{l}.txt") for l in (a.src, a.tgt)}
    unk = {}
    for split in splits:
        for lang, lines in zip((a.src, a.tgt), text[split]):
            toks = Counter(w for line in lines for w in line.split())
            n_unk = sum(c for w, c in toks.items() if w not in dict_words[lang])
            unk[(split, lang)] = 100.0 * n_unk / sum(toks.values())

    (dest / "splits.json").write_text(json.dumps(subsets, indent=1) + "\n", encoding="utf-8")
    lines = provenance_head(a, "word level", raw, tok, splits, subsets, counts, total_train)
    lines += [
        f"dictionaries: separate, built from the train text above by fairseq-preprocess with threshold "
        f"{a.threshold} (--thresholdsrc/--thresholdtgt; words seen fewer times are <unk>), padding factor 1",
        "dictionary sizes (words + fairseq's 4 specials): "
        + ", ".join(f"{l}={len(dict_words[l])} + 4 = {len(dict_words[l]) + 4}" for l in (a.src, a.tgt)),
        "unknown-word rate (share of word tokens outside the dictionary, </s> not counted): "
        + ", ".join(f"{s}.{l}={unk[(s, l)]:.2f}%" for s in splits for l in (a.src, a.tgt)),
        "BLEU references: raw/{" + ",".join(s for s in splits if s != "train")
        + "}." + f"{{{a.src},{a.tgt}}} (the tok lines, byte-identical)",
    ]
    write_provenance(dest, lines)
    log(f"done: {dest}; " + ", ".join(f"{s}={counts[s]}" for s in splits)
        + "; dictionary words " + ", ".join(f"{l}={len(dict_words[l])}" for l in (a.src, a.tgt)))
    return 0


if __name__ == "__main__":
    run_main(main)
