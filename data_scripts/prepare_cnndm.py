#!/usr/bin/env python
"""Prepare CNN/DailyMail for the pointer-generator with OOV position markers (docs/method.md §3.1).

Input, per split (train / valid / test), either
  * ``--{split}-stories PATH``: the standard ``.story`` files (article lines, then ``@highlight``
    followed by one highlight sentence each), PATH being a folder of ``*.story`` files (read in
    sorted order) or a text file listing one ``.story`` path per line; or
  * ``--{split}-source FILE --{split}-target FILE``: line-aligned article / summary files (one
    example per line, as See et al.'s released files, the REALSumm copies or ``test.source`` /
    ``test.target``); ``<t> </t> <s> </s>`` sentence markers are allowed.

Text: lower-cased (``--no-lowercase`` keeps case) and **used as tokenised**: ``--tokenize none``
(the default) splits on whitespace only, so already tokenised text (See et al.'s PTB tokenisation,
the shared sample) is not changed. ``--tokenize ptb`` is for raw ``.story`` files: NLTK's
Treebank tokenizer per line plus splitting a sentence-final ``.`` off a word unless the word is an
abbreviation (a single letter, an inner ``.`` as in ``u.s.``, or a listed title such as ``mr.``).
It approximates the Stanford PTBTokenizer See et al. used (it does not rewrite brackets to
``-lrb-``). Like See et al., a story line not ending in punctuation gets a final `` .``.
Summaries: sentences as :func:`fairseq_acvi.metrics.rouge.summary_sentences` splits them (markers,
``.``/``!``/``?`` tokens, and See et al.'s glued ``.word`` split into ``. word``).

Truncation: the source keeps its first ``--max-source-positions`` tokens (default 400, the last
training phase), the target its first ``--max-target-positions`` (default 100). fairseq appends
``</s>`` to both, so train with ``--max-source-positions`` ≥ N + 1.

Vocabulary: the ``--vocab-size`` (50k) most frequent tokens of the training articles and summaries
(untruncated; ties alphabetical), written with the markers ``<unk-0>…<unk-{N-1}>`` as ``dict.txt``
(``fairseq_acvi.data.oov_markers``). ``--see-vocab FILE`` takes the first ``--vocab-size`` words of
See et al.'s ``vocab`` file instead (``word count`` per line, most frequent first, counted over the
full 287k-article training set: their 50k vocabulary even when only part of the corpus is read).
Without a train split, ``--dict`` gives an existing one.

Output in ``--out-dir`` for each split:
  ``{split}.src`` / ``{split}.tgt``  marker-encoded, truncated; for
                                     ``fairseq-preprocess --source-lang src --target-lang tgt
                                     --srcdict dict.txt --tgtdict dict.txt``
  ``{split}.article``               the full tokenised article (no markers): the side file that
                                     ``restore_oov.py`` reads (token j = the word of ``<unk-j>``)
                                     and the ``--src`` of the evaluation
  ``{split}.summary``               the full reference, one ``<t> sentence </t>`` per sentence:
                                     the ``--ref`` of the evaluation
and ``dict.txt``, ``prepare_stats.json``. Empty articles or summaries stop with an error naming
the file and line; nothing is silently dropped.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fairseq_acvi.data.text_lines import read_lines, read_text_lines  # noqa: E402
from fairseq_acvi.data.oov_markers import (DEFAULT_MAX_SOURCE_POSITIONS,  # noqa: E402
                                           DEFAULT_VOCAB_SIZE, build_vocab, dictionary_lines,
                                           encode_source, encode_target, is_reserved, read_vocab)
from fairseq_acvi.metrics.rouge import (SENTENCE_MARKERS_CLOSE,  # noqa: E402
                                        SENTENCE_MARKERS_OPEN, summary_sentences)

SPLITS = ("train", "valid", "test")
_MARKERS = SENTENCE_MARKERS_OPEN | SENTENCE_MARKERS_CLOSE
# See et al.'s END_TOKENS: a story line ending otherwise gets " ." appended
END_TOKENS = {".", "!", "?", "...", "'", "`", '"', "\u2019", "\u201d", ")", "''", "-rrb-"}
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "gen", "lt", "col", "sgt",
                 "capt", "cpl", "rep", "sen", "gov", "rev", "inc", "co", "corp", "ltd", "vs",
                 "etc", "no", "mt", "ft", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
                 "sept", "oct", "nov", "dec", "messrs", "hon", "pres", "supt", "det", "insp"}
Example = Tuple[List[str], List[List[str]], str, int]  # article, summary sents, file, line


class PTBTokenizer:
    """Treebank word tokenisation + sentence-internal period splitting (see module docstring)."""

    def __init__(self):
        from nltk.tokenize import TreebankWordTokenizer
        self._tok = TreebankWordTokenizer()

    def __call__(self, line: str) -> List[str]:
        out: List[str] = []
        for t in self._tok.tokenize(line):
            stem = t[:-1]
            if (len(t) > 1 and t.endswith(".") and "." not in stem and len(stem) > 1
                    and stem.lower() not in ABBREVIATIONS and re.search(r"[^\W_]", stem)):
                out += [stem, "."]
            else:
                out.append(t)
        return out


def _check_tokens(tokens: List[str], where: str) -> None:
    for t in tokens:
        if is_reserved(t):
            raise ValueError(f"{where}: reserved token {t!r} in the text (fairseq special or "
                             "<unk-j> marker)")


def read_story(path: str, tokenize, lowercase: bool) -> Example:
    """Article tokens and highlight sentences of one ``.story`` file (See et al.'s rules)."""
    article: List[str] = []
    sents: List[List[str]] = []
    next_is_highlight = False
    first_line = None
    for lineno, raw in enumerate(read_text_lines(path, newline="lf"), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "@highlight":
            next_is_highlight = True
            continue
        toks = tokenize(line.lower() if lowercase else line)
        if toks and toks[-1] not in END_TOKENS:
            toks.append(".")
        _check_tokens(toks, f"{path}:{lineno}")
        if next_is_highlight:
            sents.append(toks)
            next_is_highlight = False
        elif sents:
            # a non-highlight line after the highlights started: See et al. drop nothing,
            # the format has none; refuse rather than guess
            raise ValueError(f"{path}:{lineno}: text after the highlights that does not "
                             "follow an @highlight line")
        else:
            if first_line is None:
                first_line = lineno
            article += toks
    if not article:
        raise ValueError(f"{path}:1: empty article (no text before the first @highlight)")
    if not sents:
        raise ValueError(f"{path}:1: no @highlight sentences (empty summary)")
    return article, sents, path, first_line or 1


def story_paths(spec: str) -> List[str]:
    """The ``.story`` files of a folder (sorted) or of a list file (one path per line)."""
    if os.path.isdir(spec):
        paths = sorted(str(p) for p in Path(spec).glob("*.story"))
        if not paths:
            raise ValueError(f"{spec}: folder holds no .story files")
        return paths
    base = os.path.dirname(os.path.abspath(spec))
    return [p if os.path.isabs(p) else os.path.join(base, p) for p in read_lines(spec)]


def read_stories(spec: str, tokenize, lowercase: bool) -> Iterator[Example]:
    for p in story_paths(spec):
        yield read_story(p, tokenize, lowercase)


def read_line_pairs(src_path: str, tgt_path: str, tokenize, lowercase: bool) -> Iterator[Example]:
    """Examples of line-aligned article / summary files."""
    srcs, tgts = read_lines(src_path), read_lines(tgt_path)
    if len(srcs) != len(tgts):
        raise ValueError(f"{src_path} has {len(srcs)} lines but {tgt_path} has {len(tgts)}")
    for i, (s, t) in enumerate(zip(srcs, tgts), 1):
        if lowercase:
            s, t = s.lower(), t.lower()
        article = [w for w in tokenize(s) if w not in _MARKERS]
        if not article:
            raise ValueError(f"{src_path}:{i}: empty article")
        _check_tokens(article, f"{src_path}:{i}")
        sents = [tokenize(" ".join(x)) for x in summary_sentences(t)]
        sents = [x for x in sents if x]
        if not sents:
            raise ValueError(f"{tgt_path}:{i}: empty summary")
        for x in sents:
            _check_tokens(x, f"{tgt_path}:{i}")
        yield article, sents, src_path, i


def get_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for s in SPLITS:
        p.add_argument(f"--{s}-stories", help=f"{s}: folder of .story files or a list of paths")
        p.add_argument(f"--{s}-source", help=f"{s}: line-aligned articles")
        p.add_argument(f"--{s}-target", help=f"{s}: line-aligned summaries")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--dict", help="existing dict.txt with markers (instead of building one "
                                  "from the train split)")
    p.add_argument("--see-vocab", help="See et al.'s vocab file ('word count' lines, most frequent "
                                       "first): its first --vocab-size words are the vocabulary")
    p.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    p.add_argument("--max-source-positions", type=int, default=DEFAULT_MAX_SOURCE_POSITIONS,
                   help="source truncation length N = number of <unk-j> markers (default 400)")
    p.add_argument("--max-target-positions", type=int, default=100,
                   help="target truncation length (default 100)")
    p.add_argument("--tokenize", choices=("none", "ptb"), default="none",
                   help="none: text is already tokenised (default); ptb: raw .story text")
    p.add_argument("--no-lowercase", action="store_true")
    return p


def read_see_vocab(path: str, size: int) -> Tuple[List[str], Counter, List[str]]:
    """The first ``size`` usable words of See et al.'s vocab file, their counts, and the words left out.

    See's files were split on ASCII spaces only, so a few vocabulary words hold a no-break space
    (``'2\\xa01/2'``; 5 among the first 50k). Python's ``str.split`` and fairseq's tokenizer split
    text there, so such a word can never be a token here: it is left out (returned as the third
    element, and counted in ``prepare_stats.json``) and the next word takes its place. See's own
    loader refuses the file when a word is one of its special tokens; here a word that is reserved
    (fairseq's specials, the ``<unk-j>`` markers), a repeated word, a line that is not
    ``word count`` or counts that increase stop with an error naming the line.
    """
    if size <= 0:
        raise ValueError(f"--vocab-size must be positive, got {size}")
    words: List[str] = []
    counts: Counter = Counter()
    skipped: List[str] = []
    last = None
    for lineno, line in enumerate(read_text_lines(path, newline="lf"), 1):
        if len(words) == size:
            break
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
            raise ValueError(f"{path}:{lineno}: expected 'word count', got {line!r}")
        w, c = parts[0], int(parts[1])
        if last is not None and c > last:
            raise ValueError(f"{path}:{lineno}: counts must not increase ({c} after {last})")
        last = c
        if len(w.split()) != 1:
            skipped.append(w)
            continue
        if is_reserved(w) or w in ("[UNK]", "[PAD]", "[START]", "[STOP]"):
            raise ValueError(f"{path}:{lineno}: reserved token {w!r} in the vocabulary")
        if w in counts:
            raise ValueError(f"{path}:{lineno}: {w!r} repeated")
        words.append(w)
        counts[w] = c
    if len(words) < size:
        raise ValueError(f"{path}: {len(words)} usable words, fewer than --vocab-size {size}")
    return words, counts, skipped


def load_split(args, split: str, tokenize) -> Optional[List[Example]]:
    stories = getattr(args, f"{split}_stories")
    src, tgt = getattr(args, f"{split}_source"), getattr(args, f"{split}_target")
    lower = not args.no_lowercase
    if stories and (src or tgt):
        raise ValueError(f"--{split}-stories and --{split}-source/--{split}-target exclude "
                         "each other")
    if stories:
        return list(read_stories(stories, tokenize, lower))
    if src or tgt:
        if not (src and tgt):
            raise ValueError(f"--{split}-source and --{split}-target go together")
        return list(read_line_pairs(src, tgt, tokenize, lower))
    return None


def write_split(out_dir: str, split: str, examples: List[Example], vocab: set, n_src: int,
                n_tgt: int) -> dict:
    """Write the four files of one split; return its statistics."""
    st = Counter()
    paths = {k: os.path.join(out_dir, f"{split}.{k}") for k in ("src", "tgt", "article",
                                                                "summary")}
    files = {k: open(p, "w", encoding="utf-8") for k, p in paths.items()}
    try:
        for article, sents, _, _ in examples:
            target = [w for s in sents for w in s]
            src_t, tgt_t = article[:n_src], target[:n_tgt]
            st["src_truncated"] += len(article) > n_src
            st["tgt_truncated"] += len(target) > n_tgt
            enc_src, first = encode_source(src_t, vocab)
            enc_tgt = encode_target(tgt_t, vocab, first)
            st["src_tokens"] += len(src_t)
            st["src_oov_tokens"] += sum(w not in vocab for w in src_t)
            st["tgt_tokens"] += len(tgt_t)
            st["tgt_marker_tokens"] += sum(t.startswith("<unk-") for t in enc_tgt)
            st["tgt_unk_tokens"] += sum(t == "<unk>" for t in enc_tgt)
            files["src"].write(" ".join(enc_src) + "\n")
            files["tgt"].write(" ".join(enc_tgt) + "\n")
            files["article"].write(" ".join(article) + "\n")
            files["summary"].write(" ".join(f"<t> {' '.join(s)} </t>" for s in sents) + "\n")
    finally:
        for f in files.values():
            f.close()
    st["examples"] = len(examples)
    return dict(st)


def main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    if args.max_source_positions <= 0 or args.max_target_positions <= 0:
        print("error: --max-source-positions and --max-target-positions must be positive",
              file=sys.stderr)
        return 2
    tokenize = PTBTokenizer() if args.tokenize == "ptb" else str.split
    see_skipped: List[str] = []
    try:
        data = {s: load_split(args, s, tokenize) for s in SPLITS}
        data = {s: ex for s, ex in data.items() if ex is not None}
        if not data:
            raise ValueError("no split given (use --{train,valid,test}-stories or -source/-target)")
        os.makedirs(args.out_dir, exist_ok=True)
        dict_out = os.path.join(args.out_dir, "dict.txt")
        if args.dict and args.see_vocab:
            raise ValueError("--dict and --see-vocab exclude each other")
        counts = None   # set when this run builds the dictionary (written below)
        if args.see_vocab:
            words, counts, see_skipped = read_see_vocab(args.see_vocab, args.vocab_size)
            if see_skipped:
                print(f"{args.see_vocab}: {len(see_skipped)} words holding a no-break space left out "
                      f"(never a token after whitespace splitting): {see_skipped}")
        elif args.dict:
            words, n_markers = read_vocab(args.dict)
            if n_markers < args.max_source_positions:
                raise ValueError(f"{args.dict}: {n_markers} markers < --max-source-positions "
                                 f"{args.max_source_positions}")
            if os.path.abspath(args.dict) != os.path.abspath(dict_out):
                with open(args.dict, encoding="utf-8") as f, open(dict_out, "w",
                                                                  encoding="utf-8") as g:
                    g.write(f.read())
        elif "train" in data:
            counts = Counter()
            for article, sents, _, _ in data["train"]:
                counts.update(article)
                for s in sents:
                    counts.update(s)
            words = build_vocab(counts, args.vocab_size)
        else:
            raise ValueError("no train split to build the vocabulary from: pass --dict")
        if counts is not None:
            with open(dict_out, "w", encoding="utf-8") as f:
                for line in dictionary_lines(words, counts, args.max_source_positions):
                    f.write(line + "\n")
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    vocab = set(words)
    vocab_from = "see_vocab" if args.see_vocab else "dict" if args.dict else "train"
    stats = {"vocab_size": len(words), "vocab_from": vocab_from,
             "see_vocab_words_left_out": see_skipped, "markers": args.max_source_positions,
             "max_source_positions": args.max_source_positions,
             "max_target_positions": args.max_target_positions}
    for split, examples in data.items():
        stats[split] = write_split(args.out_dir, split, examples, vocab,
                                   args.max_source_positions, args.max_target_positions)
        s = stats[split]
        print(f"{split}: {s['examples']} examples, source OOV "
              f"{100.0 * s['src_oov_tokens'] / max(s['src_tokens'], 1):.2f}% of tokens, "
              f"{s['src_truncated']} sources and {s['tgt_truncated']} targets truncated, "
              f"target tokens as markers {s['tgt_marker_tokens']}, as <unk> "
              f"{s['tgt_unk_tokens']}")
    with open(os.path.join(args.out_dir, "prepare_stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
