"""Prepare IWSLT'15 En<->Vi for fairseq, word level with the official vocabularies (docs/method.md §3.3).

Input: the Stanford NMT release (Luong & Manning 2015) ``train.{en,vi}``, ``tst2012.{en,vi}`` (valid),
``tst2013.{en,vi}`` (test), ``vocab.{en,vi}``, from ``--raw-dir`` (``IWSLT_DIR``) or downloaded
(with ``--smoke``, ``$ACVI_DATA/iwslt15_en_vi`` is used first when that folder exists). The text is already
tokenised; nothing is re-tokenised here. The vocabularies are converted to fairseq dict files
(dropping ``<unk> <s> </s>``, which fairseq adds itself) and ``fairseq-preprocess --srcdict/--tgtdict``
binarises the three splits, so the model vocabulary is exactly the official one (17,188 + 4 En,
7,706 + 4 Vi with this release's files).

``--smoke`` is NOT the paper's setting: it trains on tst2012 and validates/tests on tst2013, for
pipelines that only have the dev/test files (the shared copy of this project has no train set).

Output (``--dest``): the fairseq data-bin, ``raw/{valid,test}.{src,tgt}`` (the tokenised text used as
BLEU references) and ``PROVENANCE.txt``.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (run_main, REPO, DataError, acvi_data_dir, download, fairseq_preprocess, log,  # noqa: E402
                    read_parallel, require_files, vocab_to_fairseq_dict, write_lines, write_provenance)

URL = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi"
LANGS = ("en", "vi")
SHARED_COPY = acvi_data_dir("iwslt15_en_vi")  # $ACVI_DATA/iwslt15_en_vi; None when ACVI_DATA is unset


def needed_files(smoke: bool):
    stems = ["tst2012", "tst2013"] + ([] if smoke else ["train"])
    return [f"{s}.{l}" for s in stems for l in LANGS] + [f"vocab.{l}" for l in LANGS]


def locate_input(raw_dir, smoke: bool, download_dir: Path) -> Path:
    """Folder holding the needed files: ``raw_dir`` if given, else (``smoke`` only: it has no train
    set) ``$ACVI_DATA/iwslt15_en_vi`` if that folder exists, else a download."""
    if raw_dir:
        return Path(raw_dir)
    if smoke and SHARED_COPY is not None and SHARED_COPY.is_dir():
        log(f"SMOKE: using $ACVI_DATA/iwslt15_en_vi: {SHARED_COPY}")
        return SHARED_COPY
    try:
        for name in needed_files(smoke):
            download(f"{URL}/{name}", download_dir / name)
        return download_dir
    except DataError as e:
        raise DataError(f"{e}\nOffline? Point IWSLT_DIR at a folder with {' '.join(needed_files(smoke))}"
                        " (or set SMOKE=1 with a folder holding only the tst2012/tst2013/vocab files, or "
                        "SMOKE=1 ACVI_DATA=<data root holding iwslt15_en_vi/>).") from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", default="en", choices=LANGS)
    p.add_argument("--tgt", default="vi", choices=LANGS)
    p.add_argument("--raw-dir", default=None, help="folder with the Stanford files (default: download; with --smoke, "
                   "$ACVI_DATA/iwslt15_en_vi first if it exists)")
    p.add_argument("--dest", default=None, help="output data-bin (default data-bin/iwslt15_SRC_TGT[_smoke])")
    p.add_argument("--download-dir", default=str(REPO / "data-bin" / "raw" / "iwslt15_en_vi"))
    p.add_argument("--smoke", action="store_true", help="train on tst2012, valid/test on tst2013 (not the paper)")
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    if a.src == a.tgt:
        p.error(f"--src and --tgt must differ (got {a.src} {a.tgt})")
    dest = Path(a.dest) if a.dest else REPO / "data-bin" / f"iwslt15_{a.src}_{a.tgt}{'_smoke' if a.smoke else ''}"

    raw = locate_input(a.raw_dir, a.smoke, Path(a.download_dir))
    hint = ""
    if not a.smoke and not (raw / "train.en").is_file():
        hint = ("The IWSLT'15 training set (train.en/train.vi, 133,317 lines) is not in this folder; "
                "set IWSLT_DIR to a folder holding it, or SMOKE=1 for a smoke set (train=tst2012, "
                "valid/test=tst2013; not the paper's setting).")
    require_files(raw, needed_files(a.smoke), hint)

    split_stem = {"train": "tst2012" if a.smoke else "train", "valid": "tst2012", "test": "tst2013"}
    if a.smoke:
        split_stem["valid"] = "tst2013"
    counts = {}
    for split, stem in split_stem.items():
        src, tgt = read_parallel(raw / f"{stem}.{a.src}", raw / f"{stem}.{a.tgt}")
        counts[split] = len(src)
        if split != "train":
            write_lines(dest / "raw" / f"{split}.{a.src}", src)
            write_lines(dest / "raw" / f"{split}.{a.tgt}", tgt)
        if len(src) == 0:
            raise DataError(f"{raw / f'{stem}.{a.src}'} is empty")

    with tempfile.TemporaryDirectory() as tmp:
        dicts = {}
        sizes = {}
        for lang in (a.src, a.tgt):
            dicts[lang] = Path(tmp) / f"vocab_dict.{lang}.txt"
            sizes[lang] = vocab_to_fairseq_dict(raw / f"vocab.{lang}", dicts[lang])
        fairseq_preprocess(a.src, a.tgt, raw / split_stem["train"], raw / split_stem["valid"],
                           raw / split_stem["test"], dest, dicts[a.src], dicts[a.tgt], workers=a.workers)

    mode = ("SMOKE (NOT the paper's setting): train=tst2012, valid=test=tst2013" if a.smoke
            else "official: train=train, valid=tst2012, test=tst2013")
    write_provenance(dest, [
        f"IWSLT'15 {a.src}->{a.tgt}, word level, Stanford NMT release ({URL})",
        f"mode: {mode}",
        f"input folder: {raw.name}",
        "sentences: " + ", ".join(f"{k}={v}" for k, v in counts.items()),
        f"vocabulary (official, without fairseq's 4 specials): {a.src}={sizes[a.src]}, {a.tgt}={sizes[a.tgt]}",
    ])
    log(f"done: {dest} ({mode}); " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    run_main(main)
