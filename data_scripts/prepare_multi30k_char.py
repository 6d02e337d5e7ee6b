"""Prepare Multi30K (task 1, text only) for fairseq with a BPE source and a character-level target.

The set-up of planning attention (seed 001, docs/method.md §3.4): "byte-pair encoding (BPE) for the
source sequence and character representation for the target", as in Chung et al. (2016).

Input and checks: the word-level path's (``prepare_multi30k.py``, whose reading code this reuses):
the corpus's lower-cased Moses-tokenised ``tok/`` files, the same splits (train, valid, test2016,
test2017 but with Czech), the same errors naming the file (and line): a missing file, a src/tgt
line-count mismatch, an empty line, CR line ends or invalid UTF-8 (exit 2, nothing written). Also an
error: a line already holding the boundary symbol ``▁`` (U+2581), which would not survive the round
trip below.

Source: a sentencepiece BPE model (``spm.model``) trained on the training source only (the lines used,
after ``--train-lines``), identity normalisation (pieces concatenate back to the tok text), all
characters covered, ``--vocab-size`` pieces (default 8000; sentencepiece may stop below it when the
text cannot support that many, PROVENANCE.txt gives both). Its pieces but ``<unk> <s> </s>`` are
the fairseq source dictionary (``len(dict) == pieces - 3 + 4``).

Target: characters with a visible word boundary: ``a b`` -> ``a ▁ b`` (each character one fairseq
token, ``▁`` between words; :func:`text_to_chars`); :func:`chars_to_text` turns a generated
character sequence back into the words (``data_scripts/score_mt.py --char-target``). The character
dictionary is built by fairseq-preprocess from the training target with threshold 0 and padding
factor 1 (every character seen in train, nothing else).

Output (``--dest``, default ``data-bin/multi30k_char_SRC_TGT``): the data-bin, ``spm.model`` /
``spm.vocab``, ``raw/{valid,test2016,test2017}.{SRC,TGT}`` (the tok word text, byte-identical: the
BLEU / chrF references), ``splits.json`` and ``PROVENANCE.txt``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, DataError, fairseq_preprocess, log, run_main, write_lines, write_provenance  # noqa: E402
from prepare_multi30k import (STEMS, add_input_args, check_binarised, clean_dest,  # noqa: E402
                              find_tok_dir, provenance_head, read_dict_words, read_splits,
                              split_names, write_references)
from prepare_wmt16_en_ro import spm_to_fairseq_dict  # noqa: E402

BOUNDARY = "\u2581"   # ▁, sentencepiece's word-boundary symbol
VOCAB_DEFAULT = 8000


def text_to_chars(line: str) -> str:
    """``"a bc"`` -> ``"a ▁ b c"``: one token per character, ``▁`` between words."""
    return f" {BOUNDARY} ".join(" ".join(word) for word in line.split())


def chars_to_text(line: str) -> str:
    """Inverse of :func:`text_to_chars` on a generated sequence: drop the spaces between tokens and
    turn ``▁`` into a space (repeated, leading or trailing boundaries leave no empty word)."""
    return " ".join(w for w in "".join(line.split()).split(BOUNDARY) if w)


def require_no_boundary(path: Path, lines) -> None:
    for i, line in enumerate(lines, start=1):
        if BOUNDARY in line:
            raise DataError(f"{path}:{i}: holds the word-boundary symbol {BOUNDARY!r} (U+2581), "
                            "which the character target reserves")


def train_source_bpe(train_src: Path, prefix: Path, vocab_size: int, threads: int):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=str(train_src), model_prefix=str(prefix), model_type="bpe", vocab_size=vocab_size,
        character_coverage=1.0, normalization_rule_name="identity", hard_vocab_limit=False,
        num_threads=threads, minloglevel=2, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    return spm.SentencePieceProcessor(model_file=str(prefix) + ".model")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_input_args(p, "data-bin/multi30k_char_SRC_TGT")
    p.add_argument("--vocab-size", type=int, default=VOCAB_DEFAULT,
                   help=f"source BPE pieces (sentencepiece; default {VOCAB_DEFAULT})")
    a = p.parse_args(argv)
    if a.src == a.tgt:
        p.error(f"--src and --tgt must differ (got {a.src} {a.tgt})")
    if a.vocab_size < 100 or a.train_lines < 0 or a.workers < 1:
        p.error("--vocab-size must be >= 100, --train-lines >= 0, --workers >= 1")
    dest = Path(a.dest) if a.dest else REPO / "data-bin" / f"multi30k_char_{a.src}_{a.tgt}"
    splits = split_names(a.src, a.tgt)

    # read and check everything before writing anything
    raw, tok = find_tok_dir(a.raw_dir, a.src, a.tgt, Path(a.download_dir))
    text, total_train = read_splits(tok, a.src, a.tgt, splits, a.train_lines)
    for split in splits:
        for lang, lines in zip((a.src, a.tgt), text[split]):
            require_no_boundary(tok / f"{STEMS[split]}.lc.norm.tok.{lang}", lines)
    counts = {s: len(text[s][0]) for s in splits}

    clean_dest(dest, a.src, a.tgt)
    for name in ("spm.model", "spm.vocab"):
        (dest / name).unlink(missing_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_lines(tmp / "spm_train.txt", text["train"][0])
        sp = train_source_bpe(tmp / "spm_train.txt", tmp / "spm", a.vocab_size, a.workers)
        for ext in ("model", "vocab"):
            shutil.copy(tmp / f"spm.{ext}", dest / f"spm.{ext}")
        n_src = spm_to_fairseq_dict(sp, tmp / "dict.src.txt")
        for split in splits:
            src_lines, tgt_lines = text[split]
            write_lines(tmp / f"{split}.{a.src}", (" ".join(sp.encode(l, out_type=str)) for l in src_lines))
            write_lines(tmp / f"{split}.{a.tgt}", (text_to_chars(l) for l in tgt_lines))
        tests = [s for s in splits if s.startswith("test")]
        test_subsets = fairseq_preprocess(a.src, a.tgt, tmp / "train", tmp / "valid", [tmp / t for t in tests],
                                          dest, srcdict=tmp / "dict.src.txt", workers=a.workers, threshold=0,
                                          padding_factor=1)
    subsets = {"train": "train", "valid": "valid", **dict(zip(tests, test_subsets))}
    check_binarised(dest, a.src, a.tgt, subsets, counts)
    write_references(dest, a.src, a.tgt, text)

    chars = read_dict_words(dest / f"dict.{a.tgt}.txt")
    stats = {}
    for split in splits:
        src_lines, tgt_lines = text[split]
        pieces = [sp.encode(l, out_type=str) for l in src_lines]
        n_pieces = sum(len(x) for x in pieces)
        n_src_unk = sum(sp.piece_to_id(x) == sp.unk_id() for ps in pieces for x in ps)
        toks = [text_to_chars(l).split() for l in tgt_lines]
        n_chars = sum(len(t) for t in toks)
        n_tgt_unk = sum(c not in chars for t in toks for c in t)
        stats[split] = (n_pieces / len(src_lines), max(len(t) for t in toks) + 1, n_chars / len(toks),
                        100.0 * n_src_unk / n_pieces, 100.0 * n_tgt_unk / n_chars)

    (dest / "splits.json").write_text(json.dumps(subsets, indent=1) + "\n", encoding="utf-8")
    lines = provenance_head(a, "source BPE, target characters", raw, tok, splits, subsets, counts,
                            total_train)
    lines += [
        f"source: sentencepiece BPE (spm.model) trained on the {counts['train']} training source lines only, "
        f"identity normalisation, character coverage 1.0; pieces {sp.get_piece_size()} (requested "
        f"{a.vocab_size}); fairseq dictionary {n_src} pieces + 4 specials = {n_src + 4}",
        f"target: characters, word boundary {BOUNDARY!r} (U+2581) between words ('a b' -> 'a {BOUNDARY} b'); "
        f"dictionary from train by fairseq-preprocess, threshold 0, padding factor 1: {len(chars)} symbols "
        f"+ 4 specials = {len(chars) + 4}",
        "source pieces / sentence: " + ", ".join(f"{s}={stats[s][0]:.2f}" for s in splits),
        "target characters / sentence (with boundaries, without </s>): "
        + ", ".join(f"{s}={stats[s][2]:.2f}" for s in splits),
        "longest target (tokens with </s>): " + ", ".join(f"{s}={stats[s][1]}" for s in splits),
        "unknown rate (source pieces outside spm / target characters outside the dictionary): "
        + ", ".join(f"{s}={stats[s][3]:.2f}%/{stats[s][4]:.2f}%" for s in splits),
        "references: raw/{" + ",".join(s for s in splits if s != "train")
        + "}." + f"{{{a.src},{a.tgt}}} (the tok word text, byte-identical); score with "
        "data_scripts/score_mt.py --char-target",
    ]
    write_provenance(dest, lines)
    log(f"done: {dest}; " + ", ".join(f"{s}={counts[s]}" for s in splits)
        + f"; source pieces {sp.get_piece_size()}, target characters {len(chars)}")
    return 0


if __name__ == "__main__":
    run_main(main)
