"""Prepare WMT'16 En<->Ro for fairseq with a joint sentencepiece BPE vocabulary (docs/method.md §3.3).

Input (``--raw-dir`` (``WMT_DIR``) or downloaded from statmt.org / OPUS; with ``--smoke``,
``$ACVI_DATA/wmt16_en_ro`` is used first when that folder exists):
  train  every parallel corpus found of: Europarl v8 ``europarl-v8.ro-en.{en,ro}``, SETIMES2
         ``SETIMES.en-ro.{en,ro}`` (or ``SETIMES2.en-ro.*``), News Commentary ``news-commentary-*.ro-en.*``,
         or a generic ``train.{en,ro}``; concatenated, pairs with an empty side dropped (and counted).
  valid  newsdev2016, test newstest2016: plain ``newsdev2016.{en,ro}`` or the WMT ``.sgm`` files
         (``newsdev2016-enro-src.en.sgm`` / ``-ref.ro.sgm``, also under ``dev/`` and ``test/``).
Romanian cedilla letters (ş ţ Ş Ţ, as in Europarl) are mapped to the comma-below letters (ș ț Ș Ț, as
in the news sets) in the model's input text; the BLEU references in ``raw/`` are kept verbatim.

A joint sentencepiece BPE model (``spm.model``, ``--vocab-size``, default 32000, 4000 with ``--smoke``;
the paper reports 31.7k) is trained on both sides of train, applied to all splits, and its pieces (minus ``<unk> <s> </s>``)
become the fairseq joined dictionary: ``len(dict) == spm pieces - 3 + 4``.

``--smoke`` is NOT the paper's setting: it uses only newsdev2016 (the shared copy of this project has
nothing else), split into train (first N-400 lines), valid (next 200) and test (last 200), and lets
sentencepiece stop below ``--vocab-size`` when the small corpus cannot support that many pieces.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (run_main, REPO, DataError, acvi_data_dir, download, extract, fairseq_preprocess,  # noqa: E402
                    log, read_lines, read_parallel, write_lines, write_provenance)

LANGS = ("en", "ro")
SHARED_COPY = acvi_data_dir("wmt16_en_ro")  # $ACVI_DATA/wmt16_en_ro; None when ACVI_DATA is unset
DOWNLOADS = [
    ("training-parallel-ep-v8.tgz", "https://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz"),
    ("SETIMES2.en-ro.txt.zip", "https://object.pouta.csc.fi/OPUS-SETIMES/v2/moses/en-ro.txt.zip"),
    ("dev.tgz", "https://data.statmt.org/wmt16/translation-task/dev.tgz"),
    ("test.tgz", "https://data.statmt.org/wmt16/translation-task/test.tgz"),
]
TRAIN_CORPORA = [  # (glob of the English side, how to get the Romanian side from it)
    "europarl-v8.ro-en.en", "SETIMES.en-ro.en", "SETIMES2.en-ro.en", "news-commentary-*.ro-en.en", "train.en",
]
SMOKE_HELD_OUT = 200
VOCAB_DEFAULT, VOCAB_DEFAULT_SMOKE = 32000, 4000
RO_CEDILLA = str.maketrans({"ş": "ș", "ţ": "ț", "Ş": "Ș", "Ţ": "Ț"})
SPM_SPECIALS = ("<unk>", "<s>", "</s>")


def find(raw: Path, name: str):
    """``raw/name`` or the first match one level down (archives unpack into sub-folders)."""
    hits = sorted(raw.glob(name)) or sorted(raw.glob(f"*/{name}"))
    return hits


def read_sgm(path: Path):
    """Segments of a WMT .sgm file in document order, text kept verbatim (like sacrebleu's reader).

    DataError (file:line) on a <seg> line that does not close on the same line.
    """
    segs = []
    for i, line in enumerate(read_lines(path), start=1):
        if "<seg" not in line:
            continue
        m = re.fullmatch(r'\s*<seg[^>]*>(.*)</seg>\s*', line)
        if not m:
            raise DataError(f"{path}:{i}: malformed <seg> line")
        segs.append(m.group(1).strip())  # verbatim, as sacrebleu reads WMT .sgm (no entity decoding)
    if not segs:
        raise DataError(f"{path}: no <seg> lines")
    return segs


def read_eval_set(raw: Path, name: str, src: str, tgt: str):
    """(src, tgt) lines of newsdev2016/newstest2016 from plain text or .sgm files."""
    plain = [raw / f"{name}.{src}", raw / f"{name}.{tgt}"]
    if all(p.is_file() for p in plain):
        return read_parallel(*plain)
    for a, b in ((src, tgt), (tgt, src)):  # prefer the sgm of this direction, accept the reverse one
        s = find(raw, f"{name}-{a}{b}-src.{a}.sgm")
        r = find(raw, f"{name}-{a}{b}-ref.{b}.sgm")
        if s and r:
            x, y = read_sgm(s[0]), read_sgm(r[0])
            if len(x) != len(y):
                raise DataError(f"{s[0]} has {len(x)} segments but {r[0]} has {len(y)}")
            return (x, y) if a == src else (y, x)
    raise DataError(f"missing {name}: neither {plain[0]} + {plain[1]} nor "
                    f"{name}-{src}{tgt}-src.{src}.sgm / -ref.{tgt}.sgm under {raw}")


def read_train(raw: Path, src: str, tgt: str):
    """Concatenated training corpora found under ``raw``; DataError listing the expected names if none."""
    xs, ys, used = [], [], []
    for pattern in TRAIN_CORPORA:
        for en_path in find(raw, pattern):
            ro_path = en_path.with_name(en_path.name[:-3] + ".ro")
            en, ro = read_parallel(en_path, ro_path)
            pair = {"en": en, "ro": ro}
            xs += pair[src]
            ys += pair[tgt]
            used.append(f"{en_path.relative_to(raw)} ({len(en)})")
    if not used:
        raise DataError(f"no training corpus under {raw}: expected one of {', '.join(TRAIN_CORPORA)} "
                        "(with the matching .ro file); set SMOKE=1 to build a smoke set from newsdev2016 only")
    return xs, ys, used


def normalise(lines, lang):
    return [l.translate(RO_CEDILLA) for l in lines] if lang == "ro" else list(lines)


def train_spm(train_text: Path, prefix: Path, vocab_size: int, smoke: bool, threads: int):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(
        input=str(train_text), model_prefix=str(prefix), model_type="bpe", vocab_size=vocab_size,
        character_coverage=1.0, input_sentence_size=2_000_000, shuffle_input_sentence=True,
        hard_vocab_limit=not smoke, num_threads=threads, minloglevel=2,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    return spm.SentencePieceProcessor(model_file=str(prefix) + ".model")


def spm_to_fairseq_dict(sp, out: Path) -> int:
    """Pieces of ``sp`` except its <unk>/<s>/</s>, in id order, as fairseq ``piece count`` lines."""
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    pieces = [p for p in pieces if p not in SPM_SPECIALS]
    n = len(pieces)
    write_lines(out, (f"{p} {n - r}" for r, p in enumerate(pieces)))
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--src", default="en", choices=LANGS)
    p.add_argument("--tgt", default="ro", choices=LANGS)
    p.add_argument("--raw-dir", default=None, help="folder with the WMT'16 files (default: download; with --smoke, "
                   "$ACVI_DATA/wmt16_en_ro first if it exists)")
    p.add_argument("--dest", default=None, help="output data-bin (default data-bin/wmt16_en_ro_SRC_TGT[_smoke])")
    p.add_argument("--download-dir", default=str(REPO / "data-bin" / "raw" / "wmt16_en_ro"))
    p.add_argument("--vocab-size", type=int, default=None,
                   help=f"sentencepiece pieces (default {VOCAB_DEFAULT}, {VOCAB_DEFAULT_SMOKE} with --smoke)")
    p.add_argument("--smoke", action="store_true", help="newsdev2016 only, split 3 ways (not the paper)")
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args(argv)
    if a.src == a.tgt:
        p.error(f"--src and --tgt must differ (got {a.src} {a.tgt})")
    if a.vocab_size is None:
        a.vocab_size = VOCAB_DEFAULT_SMOKE if a.smoke else VOCAB_DEFAULT
    if a.vocab_size < 100:
        p.error(f"--vocab-size must be at least 100 (got {a.vocab_size})")
    dest = Path(a.dest) if a.dest else REPO / "data-bin" / f"wmt16_en_ro_{a.src}_{a.tgt}{'_smoke' if a.smoke else ''}"

    if a.raw_dir:
        raw = Path(a.raw_dir)
        if not raw.is_dir():
            raise DataError(f"WMT_DIR {raw} is not a folder")
    elif a.smoke and SHARED_COPY is not None and SHARED_COPY.is_dir():
        raw = SHARED_COPY
        log(f"SMOKE: using $ACVI_DATA/wmt16_en_ro: {SHARED_COPY}")
    else:
        raw = Path(a.download_dir)
        try:
            for name, url in DOWNLOADS:
                extract(download(url, raw / name), raw)
        except DataError as e:
            raise DataError(f"{e}\nOffline? Point WMT_DIR at a folder with the WMT'16 files, "
                            "or SMOKE=1 WMT_DIR=<folder with newsdev2016.{en,ro}>, or SMOKE=1 "
                            "ACVI_DATA=<data root holding wmt16_en_ro/>.") from None

    if a.smoke:
        xs, ys = read_eval_set(raw, "newsdev2016", a.src, a.tgt)
        n = len(xs)
        if n < 3 * SMOKE_HELD_OUT:
            raise DataError(f"SMOKE needs at least {3 * SMOKE_HELD_OUT} newsdev2016 lines under {raw}, found {n}")
        cut = n - 2 * SMOKE_HELD_OUT
        splits = {"train": (xs[:cut], ys[:cut]), "valid": (xs[cut:cut + SMOKE_HELD_OUT], ys[cut:cut + SMOKE_HELD_OUT]),
                  "test": (xs[cut + SMOKE_HELD_OUT:], ys[cut + SMOKE_HELD_OUT:])}
        used = [f"newsdev2016 lines 1-{cut} (train), {cut + 1}-{cut + SMOKE_HELD_OUT} (valid), "
                f"{cut + SMOKE_HELD_OUT + 1}-{n} (test)"]
        mode = "SMOKE (NOT the paper's setting): newsdev2016 split into train/valid/test"
    else:
        xs, ys, used = read_train(raw, a.src, a.tgt)
        splits = {"train": (xs, ys), "valid": read_eval_set(raw, "newsdev2016", a.src, a.tgt),
                  "test": read_eval_set(raw, "newstest2016", a.src, a.tgt)}
        mode = "official: train=Europarl v8 + SETIMES2 (as found), valid=newsdev2016, test=newstest2016"

    # Training pairs with an empty side carry no signal; drop them, counting (eval sets are kept whole).
    tx, ty = splits["train"]
    keep = [i for i in range(len(tx)) if tx[i].strip() and ty[i].strip()]
    dropped = len(tx) - len(keep)
    if dropped:
        log(f"train: dropped {dropped} pairs with an empty side")
    splits["train"] = ([tx[i] for i in keep], [ty[i] for i in keep])
    for split, (x, y) in splits.items():
        if not x:
            raise DataError(f"{split} split is empty (input {raw})")
        if split != "train":
            write_lines(dest / "raw" / f"{split}.{a.src}", x)
            write_lines(dest / "raw" / f"{split}.{a.tgt}", y)

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = {s: {a.src: normalise(x, a.src), a.tgt: normalise(y, a.tgt)} for s, (x, y) in splits.items()}
        write_lines(tmp / "spm_train.txt", text["train"][a.src] + text["train"][a.tgt])
        sp = train_spm(tmp / "spm_train.txt", dest / "spm", a.vocab_size, a.smoke, max(1, a.workers))
        for s in text:
            for lang in (a.src, a.tgt):
                write_lines(tmp / f"{s}.{lang}", (" ".join(sp.encode(l, out_type=str)) for l in text[s][lang]))
        n_dict = spm_to_fairseq_dict(sp, tmp / "dict.txt")
        fairseq_preprocess(a.src, a.tgt, tmp / "train", tmp / "valid", tmp / "test", dest, tmp / "dict.txt",
                           joined=True, workers=a.workers)

    write_provenance(dest, [
        f"WMT'16 {a.src}->{a.tgt}, joint sentencepiece BPE (spm.model)",
        f"mode: {mode}",
        f"input folder: {raw.name}; corpora: {'; '.join(used)}",
        "sentences: " + ", ".join(f"{k}={len(v[0])}" for k, v in splits.items())
        + (f" (train: {dropped} pairs with an empty side dropped)" if dropped else ""),
        f"sentencepiece pieces: {sp.get_piece_size()} (requested {a.vocab_size}); "
        f"fairseq dictionary without its 4 specials: {n_dict}",
    ])
    log(f"done: {dest} ({mode}); spm pieces {sp.get_piece_size()}")
    return 0


if __name__ == "__main__":
    run_main(main)
