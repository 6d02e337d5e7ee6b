"""Prepare any parallel corpus for fairseq and the plugin's recipes, checking every file first.

Usage (the files ``PREFIX.SRC`` and ``PREFIX.TGT`` of each split, one sentence per line)::

    fairseq-acvi-prepare-parallel --src en --tgt de --train my_corpus/train \\
        --valid my_corpus/valid --test my_corpus/test --dest data-bin/my_corpus \\
        [--test my_corpus/news2019 ...] [--sentencepiece 8000] [--lowercase] [--threshold N]

(or ``python -m fairseq_acvi.cli.prepare_parallel``). Every input file is read and checked before
anything is written: a missing file (all of them are named), a source/target line-count mismatch
(both files and counts), an empty file, an empty or whitespace-only line, CR line ends or invalid
UTF-8 (``FILE:LINE``) stop the command with ``error: …`` and exit code 2, and ``--dest`` is left as
it was. The output is built in a temporary folder beside ``--dest`` and moved into place only once
complete; a ``--dest`` that holds anything but an earlier output of this command is refused.

Splits: ``train``, ``valid``, and one test split per ``--test PREFIX``, named by the prefix's file
name (``my_corpus/test`` -> ``test``, ``my_corpus/news2019`` -> ``news2019``). fairseq calls the
binarised test sets ``test``, ``test1``, ...; ``splits.json`` maps each named split to its subset.

Text: taken as given (``--lowercase`` lower-cases every split, references included). Without
``--sentencepiece`` the model sees whitespace-separated words, with separate source and target
dictionaries built from train by fairseq-preprocess (``--threshold N``: words seen fewer than N
times become ``<unk>``; default 0 keeps every word; padding factor 1, so a dictionary holds exactly
its words plus fairseq's 4 specials). With ``--sentencepiece N`` a joint sentencepiece BPE model of
N pieces is trained on both sides of train (identity normalisation: the text is not NFKC-changed),
applied to every split, and its pieces (less ``<unk> <s> </s>``) become one joined dictionary of
N + 1 entries; decode with ``--remove-bpe sentencepiece`` (the recipe reads ``corpus.json`` and
does).

Output in ``--dest`` (docs/recipes/mt_parallel.md, "Data layout"): the fairseq data-bin
(``dict.SRC.txt``, ``dict.TGT.txt``, ``SUBSET.SRC-TGT.{SRC,TGT}.{bin,idx}``), ``splits.json``
(named split -> fairseq subset), ``raw/SPLIT.{SRC,TGT}`` for every split but train (the text as
given, after ``--lowercase``, before subwords: the BLEU references), ``corpus.json`` (languages,
splits, sentence counts, subword model, the ``--remove-bpe`` value decoding needs), ``spm.model``
and ``spm.vocab`` with ``--sentencepiece``, and ``PROVENANCE.txt`` (the command, every input file
with its line count and SHA-256, the options, dictionary sizes and unknown-token rates).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_acvi.data.corpus_checks import (DataError, fairseq_preprocess, log, read_parallel,
                                             require_nonempty_lines, write_lines,
                                             write_provenance)

TOOL = "fairseq-acvi-prepare-parallel"
LANG = re.compile(r"[A-Za-z0-9_-]+")
#: a test split's name: letters, digits, '_' or '-' inside; not ending like a Monte-Carlo decode
#: name of the recipes (``<split>_K<k>``), which the report would read as a K sweep
SPLIT_NAME = re.compile(r"[A-Za-z0-9]+(?:[_-][A-Za-z0-9]+)*")
SPM_SPECIALS = ("<unk>", "<s>", "</s>")
Pair = Tuple[List[str], List[str]]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=TOOL, description=__doc__.split("\n")[0])
    p.add_argument("--src", required=True, help="source language suffix of the files (PREFIX.SRC)")
    p.add_argument("--tgt", required=True, help="target language suffix of the files (PREFIX.TGT)")
    p.add_argument("--train", required=True, metavar="PREFIX", help="training files PREFIX.SRC, PREFIX.TGT")
    p.add_argument("--valid", required=True, metavar="PREFIX",
                   help="validation files (early stopping and the best checkpoint are chosen on them)")
    p.add_argument("--test", action="append", default=[], metavar="PREFIX",
                   help="a test set, named by the prefix's file name; may be given several times")
    p.add_argument("--dest", required=True, help="output folder, e.g. data-bin/my_corpus")
    p.add_argument("--sentencepiece", type=int, default=0, metavar="N",
                   help="train a joint sentencepiece BPE model of N pieces on train and apply it to "
                        "every split (default 0: words as given)")
    p.add_argument("--lowercase", action="store_true", help="lower-case every split (references too)")
    p.add_argument("--threshold", type=int, default=0, metavar="N",
                   help="word level only: words seen fewer than N times in train become <unk> (default 0)")
    p.add_argument("--workers", type=int, default=1, help="fairseq-preprocess and sentencepiece threads")
    return p


def check_options(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Option errors (argparse's exit 2, naming the option) before any file is read."""
    for opt in ("src", "tgt"):
        if not LANG.fullmatch(getattr(a, opt)):
            p.error(f"--{opt} must be letters, digits, '_' or '-' (got {getattr(a, opt)!r})")
    if a.src == a.tgt:
        p.error(f"--src and --tgt must differ (got {a.src} {a.tgt})")
    if a.sentencepiece < 0 or a.sentencepiece and a.sentencepiece < 10:
        p.error(f"--sentencepiece must be 0 (off) or at least 10 pieces (got {a.sentencepiece})")
    if a.threshold < 0:
        p.error(f"--threshold must be >= 0 (got {a.threshold})")
    if a.threshold and a.sentencepiece:
        p.error("--threshold applies to words (no --sentencepiece); sentencepiece sets its own vocabulary")
    if a.workers < 1:
        p.error(f"--workers must be >= 1 (got {a.workers})")


def split_plan(p: argparse.ArgumentParser, a: argparse.Namespace) -> Dict[str, str]:
    """{split name: file prefix}: train, valid, then the test splits named by their prefixes' file
    names (argparse error on a name that is not a word, repeats, or is train/valid)."""
    plan = {"train": a.train, "valid": a.valid}
    for prefix in a.test:
        name = Path(prefix).name
        if not SPLIT_NAME.fullmatch(name) or re.search(r"_K\d+$", name):
            p.error(f"--test {prefix}: the split is named by the file name {name!r}, which must be letters "
                    "and digits (with '_' or '-' inside, not ending in _K<number>); rename the files")
        if name in plan:
            p.error(f"--test {prefix}: a split named {name!r} exists already (the test splits are named "
                    "by their files' names, which must differ from each other and from train/valid)")
        plan[name] = prefix
    return plan


def check_dest(dest: Path) -> None:
    """DataError unless ``dest`` is absent, an empty folder, or an earlier output of this command
    (it holds ``corpus.json``): nothing else is ever overwritten."""
    if dest.exists() and not dest.is_dir():
        raise DataError(f"--dest {dest} is a file, not a folder")
    if dest.is_dir() and any(dest.iterdir()) and not (dest / "corpus.json").is_file():
        raise DataError(f"--dest {dest} is not empty and holds no corpus.json (it was not written by "
                        f"{TOOL}); choose another folder or empty it")


def read_corpus(plan: Dict[str, str], src: str, tgt: str) -> Dict[str, Pair]:
    """Read and check every split: {split: (source lines, target lines)}. DataError naming every
    missing file at once, then (file[:line]) a line-count mismatch, an empty file, an empty line,
    CR line ends or invalid UTF-8."""
    paths = {split: (Path(f"{prefix}.{src}"), Path(f"{prefix}.{tgt}")) for split, prefix in plan.items()}
    missing = [str(path) for pair in paths.values() for path in pair if not path.is_file()]
    if missing:
        raise DataError("missing file(s): " + ", ".join(missing)
                        + f" (each split is PREFIX.{src} and PREFIX.{tgt})")
    text = {}
    for split, pair_paths in paths.items():
        pair = read_parallel(*pair_paths)
        for path, lines in zip(pair_paths, pair):
            if not lines:
                raise DataError(f"{path} is empty")
            require_nonempty_lines(path, lines)
        text[split] = pair
    return text


def train_sentencepiece(train: Pair, pieces: int, workdir: Path, threads: int):
    """A joint sentencepiece BPE model of exactly ``pieces`` pieces trained on both sides of train
    (``workdir/spm.model``, ``spm.vocab``); DataError naming ``--sentencepiece`` when the corpus
    cannot give that many."""
    import sentencepiece as spm
    text = workdir / "spm_train.txt"
    write_lines(text, train[0] + train[1])
    try:
        spm.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(workdir / "spm"), model_type="bpe", vocab_size=pieces,
            character_coverage=1.0, normalization_rule_name="identity", num_threads=threads,
            minloglevel=2, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    except RuntimeError as e:
        raise DataError(f"--sentencepiece {pieces}: sentencepiece could not train on the training text "
                        f"({e})") from None
    text.unlink()
    return spm.SentencePieceProcessor(model_file=str(workdir / "spm.model"))


def spm_dictionary(sp, out: Path) -> int:
    """The fairseq dict file of a sentencepiece model: its pieces but ``<unk> <s> </s>`` (fairseq adds
    its own), in id order, with counts falling by rank; the number of pieces written."""
    listed = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    listed = [piece for piece in listed if piece not in SPM_SPECIALS]
    return write_lines(out, (f"{piece} {len(listed) - r}" for r, piece in enumerate(listed)))


def binarised_count(dest: Path, subset: str, src: str, tgt: str, lang: str) -> int:
    """Sentences in a binarised subset, as fairseq reads them."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset
    return len(MMapIndexedDataset(str(dest / f"{subset}.{src}-{tgt}.{lang}")))


def dictionary_words(path: Path) -> set:
    """Entries of a fairseq dict file (``entry count`` lines; fairseq's 4 specials not listed)."""
    return {line.rsplit(" ", 1)[0] for line in path.read_text(encoding="utf-8").split("\n") if line}


def unknown_rate(lines: Sequence[str], known: set) -> float:
    """Percentage of the whitespace-separated tokens of ``lines`` outside ``known`` (``</s>`` not counted)."""
    tokens = Counter(t for line in lines for t in line.split())
    return 100.0 * sum(c for t, c in tokens.items() if t not in known) / sum(tokens.values())


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build(a: argparse.Namespace, plan: Dict[str, str], text: Dict[str, Pair], out: Path) -> dict:
    """Write the whole output into the (empty) folder ``out``; the corpus record (corpus.json)."""
    src, tgt = a.src, a.tgt
    model_text = text
    sp = None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if a.sentencepiece:
            sp = train_sentencepiece(text["train"], a.sentencepiece, tmp, a.workers)
            model_text = {split: tuple([" ".join(sp.encode(line, out_type=str)) for line in side]
                                       for side in pair) for split, pair in text.items()}
            for name in ("spm.model", "spm.vocab"):
                shutil.copy(tmp / name, out / name)
            spm_dictionary(sp, tmp / "dict.txt")
        for split, pair in model_text.items():
            for lang, lines in zip((src, tgt), pair):
                write_lines(tmp / "text" / f"{split}.{lang}", lines)
        tests = list(plan)[2:]
        subsets = fairseq_preprocess(
            src, tgt, tmp / "text" / "train", tmp / "text" / "valid", [tmp / "text" / t for t in tests], out,
            srcdict=tmp / "dict.txt" if sp else None, joined=bool(sp), workers=a.workers,
            threshold=a.threshold, padding_factor=1)
    splits = {"train": "train", "valid": "valid", **dict(zip(tests, subsets))}
    counts = {split: len(pair[0]) for split, pair in text.items()}
    for split, subset in splits.items():
        for lang in (src, tgt):
            n = binarised_count(out, subset, src, tgt, lang)
            if n != counts[split]:
                raise DataError(f"{out / f'{subset}.{src}-{tgt}.{lang}.idx'} holds {n} sentences, expected "
                                f"{counts[split]} ({split}): fairseq-preprocess lost sentences")
    for split, pair in text.items():
        if split != "train":
            for lang, lines in zip((src, tgt), pair):
                write_lines(out / "raw" / f"{split}.{lang}", lines)
    known = {lang: dictionary_words(out / f"dict.{lang}.txt") for lang in (src, tgt)}
    unk = {f"{split}.{lang}": round(unknown_rate(lines, known[lang]), 2)
           for split, pair in model_text.items() for lang, lines in zip((src, tgt), pair)}
    record = {
        "tool": TOOL, "src": src, "tgt": tgt, "splits": splits, "sentences": counts,
        "inputs": {split: [f"{prefix}.{src}", f"{prefix}.{tgt}"] for split, prefix in plan.items()},
        "lowercase": a.lowercase,
        "subwords": ({"type": "sentencepiece", "model": "spm.model", "pieces": a.sentencepiece}
                     if sp else None),
        "remove_bpe": "sentencepiece" if sp else None,
        "threshold": a.threshold,
        "dictionary_sizes": {lang: len(known[lang]) + 4 for lang in (src, tgt)},
        "unknown_token_percent": unk,
    }
    (out / "splits.json").write_text(json.dumps(splits, indent=1) + "\n", encoding="utf-8")
    (out / "corpus.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    write_provenance(out, provenance(a, plan, text, record))
    return record


def provenance(a: argparse.Namespace, plan: Dict[str, str], text: Dict[str, Pair], record: dict) -> List[str]:
    """PROVENANCE.txt: the command, the inputs (lines, SHA-256), the text's treatment, the splits."""
    lines = [f"{TOOL} ({datetime.date.today().isoformat()}): {a.src}->{a.tgt}",
             "command: " + " ".join(shlex.quote(x) for x in [TOOL, *a.argv])]
    for split, prefix in plan.items():
        for lang, side in zip((a.src, a.tgt), text[split]):
            path = f"{prefix}.{lang}"
            lines.append(f"input {split}.{lang}: {path} ({len(side)} lines, sha256 {sha256(Path(path))})")
    lines.append("text: " + ("lower-cased (--lowercase)" if a.lowercase else "as given (not re-cased)")
                 + "; not re-tokenised; every line checked (UTF-8, LF line ends, no empty line, "
                   "source and target line counts equal)")
    if record["subwords"]:
        lines.append(f"subwords: joint sentencepiece BPE, {a.sentencepiece} pieces, trained on both sides of "
                     "train (identity normalisation, character coverage 1.0): spm.model; decode with "
                     "--remove-bpe sentencepiece")
        lines.append(f"dictionary: joined, the sentencepiece pieces less <unk> <s> </s>, plus fairseq's 4 "
                     f"specials = {record['dictionary_sizes'][a.src]} entries")
    else:
        lines.append(f"subwords: none (whitespace-separated words); dictionaries separate, built from train "
                     f"by fairseq-preprocess, threshold {a.threshold}, padding factor 1")
        lines.append("dictionary sizes (words + fairseq's 4 specials): "
                     + ", ".join(f"{lang}={n}" for lang, n in record["dictionary_sizes"].items()))
    lines.append("unknown-token rate (tokens the model sees outside its dictionary, </s> not counted): "
                 + ", ".join(f"{k}={v:.2f}%" for k, v in record["unknown_token_percent"].items()))
    lines.append("splits (named split -> fairseq subset): "
                 + ", ".join(f"{s} -> {sub}" for s, sub in record["splits"].items()))
    lines.append("sentences: " + ", ".join(f"{s}={n}" for s, n in record["sentences"].items()))
    lines.append("BLEU references: raw/SPLIT.LANG for every split but train (the text above, before subwords)")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command: 0 on success; bad input prints ``error: FILE[:LINE]: …`` on stderr and gives 2
    (an option error: argparse's usage message and exit 2)."""
    try:
        return prepare(argv)
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def prepare(argv: Optional[Sequence[str]] = None) -> int:
    """Check the corpus, build the output beside ``--dest``, move it into place; 0 on success,
    :class:`DataError` on bad input (nothing written)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    p = build_parser()
    a = p.parse_args(argv)
    a.argv = argv                                    # for PROVENANCE.txt
    check_options(p, a)
    plan = split_plan(p, a)
    dest = Path(a.dest)
    check_dest(dest)
    text = read_corpus(plan, a.src, a.tgt)          # every check before anything is written
    if a.lowercase:
        text = {split: tuple([line.lower() for line in side] for side in pair) for split, pair in text.items()}
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
    try:
        record = build(a, plan, text, work)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(work, 0o777 & ~umask)               # mkdtemp made it private
        if dest.is_dir():
            shutil.rmtree(dest)                      # empty, or an earlier output (check_dest)
        work.rename(dest)
    finally:
        if work.exists():
            shutil.rmtree(work)
    log(f"done: {dest}; sentences " + ", ".join(f"{s}={n}" for s, n in record["sentences"].items())
        + "; dictionary sizes " + ", ".join(f"{l}={n}" for l, n in record["dictionary_sizes"].items())
        + (f"; sentencepiece {a.sentencepiece} pieces" if a.sentencepiece else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
