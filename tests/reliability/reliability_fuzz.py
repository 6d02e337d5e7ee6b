"""Item 5 of the reliability suite: generated corruptions of every data reader's input.

Each case writes a valid input (seeded), corrupts one file in one way, reads it with the reader
under test and classifies what happened:

* ``loaded``: the reader returned records and the check for the corruption holds: an
  input that must read the same (CRLF, a byte-order mark, no final newline) gives exactly the
  records of the clean input; any other loaded input holds as many records as an independent
  count of the corrupted file finds (a reader that skips a line it cannot read fails here:
  ``silent_drop``);
* ``clear_error``: the reader raised its own error type (the one its command line turns into a
  one-line message) and the message names the corrupted file and the line or record; when the
  corruption sits on a known line, the message must name that line (else ``wrong_line``).

Failures: ``crash`` (another exception: a bare traceback for the user), ``unclear_error`` (the
right type without file and line), ``wrong_line``, ``hang`` (over :data:`CASE_TIMEOUT` seconds),
``silent_drop``, ``accepted_bad`` (a corruption that must be refused, e.g. a NaN feature, was
read), ``rejected_good`` (an input that must read the same was refused or read differently).

Readers: bAbI files (``fairseq_acvi.data.babi``), guess-the-number dialogues
(``fairseq_acvi.guess_number.read_babi_games``), See et al.'s chunk files (plain and .xz,
``data_scripts/read_see_chunks.py``), line-aligned summarization files and ``.story`` files
(``data_scripts/prepare_cnndm.py``), caption files and frame-feature files
(``fairseq_acvi.data.video_features``), parallel translation text (``data_scripts/common.py``, as
the Multi30K / IWSLT / WMT scripts read it).
"""
from __future__ import annotations

import io
import lzma
import random
import re
import shutil
import signal
import struct
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "data_scripts"))
sys.path.insert(0, str(REPO / "tests"))

import tf_example_encoder as _tf  # noqa: E402

CASE_TIMEOUT = 60
#: cases per corruption and reader in the full-size run (a few thousand per reader)
FULL_PER_CORRUPTION = 250
#: size of the "huge line" corruption (bytes); the benchmark raises it
HUGE = 200_000
BAD_UTF8 = [b"\xff", b"\xfe\xfe", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\x80",
            b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]
PASS = ("loaded", "clear_error")


class _Timeout(Exception):
    pass


# ------------------------------------------------------------------------------- corruptions
def _join(parts) -> bytes:
    return b"".join(parts)


def _split(data: bytes) -> List[bytes]:
    return [x for x in re.split(b"(?<=\n)", data) if x]


def c_truncate(data, rng):
    return data[:rng.randrange(1, max(2, len(data)))], None


def c_random_bytes(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b), None


def c_insert_bytes(data, rng):
    i = rng.randrange(len(data) + 1)
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[i:], None


def c_invalid_utf8(data, rng):
    lines = _split(data)
    k = rng.randrange(len(lines))
    body = lines[k].rstrip(b"\n")
    j = rng.randrange(len(body) + 1)
    lines[k] = body[:j] + rng.choice(BAD_UTF8) + body[j:] + lines[k][len(body):]
    return _join(lines), k + 1


def c_crlf(data, rng):
    return data.replace(b"\n", b"\r\n"), None


def c_lone_cr(data, rng):
    """One line ending written as a lone CR (classic Mac): the line and the next touch."""
    ends = [m.start() for m in re.finditer(b"\n", data)]
    i = rng.choice(ends)
    return data[:i] + b"\r" + data[i + 1:], data[:i].count(b"\n") + 1


def c_empty_line(data, rng):
    lines = _split(data)
    k = rng.randrange(len(lines) + 1)
    if k == len(lines) and not data.endswith(b"\n"):
        lines[-1] += b"\n"
    return _join(lines[:k] + [b"\n"] + lines[k:]), k + 1


def c_blank_line(data, rng):
    lines = _split(data)
    k = rng.randrange(len(lines))
    return _join(lines[:k] + [b" \t  \n"] + lines[k:]), k + 1


def c_delete_line(data, rng):
    lines = _split(data)
    k = rng.randrange(len(lines))
    return _join(lines[:k] + lines[k + 1:]), None


def c_duplicate_line(data, rng):
    lines = _split(data)
    k = rng.randrange(len(lines))
    line = lines[k] if lines[k].endswith(b"\n") else lines[k] + b"\n"
    return _join(lines[:k] + [line] + lines[k:]), None


def c_bom(data, rng):
    return b"\xef\xbb\xbf" + data, None


def c_no_final_newline(data, rng):
    return data.rstrip(b"\n"), None


def c_nul(data, rng):
    i = rng.randrange(len(data))
    return data[:i] + b"\x00" + data[i:], None


def c_huge_word_line(data, rng):
    """One line made huge by repeating its last word (the line keeps its shape)."""
    lines = _split(data)
    k = rng.randrange(len(lines))
    body = lines[k].rstrip(b"\n")
    words = body.split(b" ")
    word = words[-1] if words[-1] else b"x"
    n = max(1, HUGE // (len(word) + 1))
    lines[k] = body + (b" " + word) * n + lines[k][len(body):]
    return _join(lines), None


TEXT_CORRUPTIONS: Dict[str, Callable] = {
    "truncate": c_truncate, "random_bytes": c_random_bytes, "insert_bytes": c_insert_bytes,
    "invalid_utf8": c_invalid_utf8, "crlf": c_crlf, "lone_cr": c_lone_cr,
    "empty_line": c_empty_line, "blank_line": c_blank_line, "delete_line": c_delete_line,
    "duplicate_line": c_duplicate_line, "bom": c_bom, "no_final_newline": c_no_final_newline,
    "nul_byte": c_nul, "huge_line": c_huge_word_line,
}


# ------------------------------------------------------------------------------------ readers
@dataclass
class Reader:
    """One data path under test.

    make(folder, rng) writes a clean input and returns (the files, the file to corrupt);
    load(files) reads it with the code under test; count(files) counts the records of the
    (corrupted) input independently, or returns None when the input cannot hold a whole record
    sequence (then loading it is ``accepted_bad``); expect maps a corruption to "same" (must read
    as the clean input), "error" (must be refused) or "either".
    """

    name: str
    make: Callable
    load: Callable
    count: Callable
    errors: Tuple[type, ...]
    corruptions: Dict[str, Callable]
    expect: Dict[str, str]
    located: bool = True   # errors name a line or record (not only the file)
    line_checked: Tuple[str, ...] = ()  # corruptions whose error must name their own line


def _text(files, name):
    return files[name].read_bytes()


def _decoded_lines(data: bytes, newline="any") -> List[str]:
    """An independent splitter: UTF-8 (raises on bad bytes), BOM dropped."""
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    if newline == "any":
        parts = re.split(r"\r\n|\r|\n", text)
    else:
        parts = [p[:-1] if p.endswith("\r") else p for p in text.split("\n")]
    if parts and parts[-1] == "":
        parts.pop()
    return parts


# --- bAbI
def _babi_make(folder: Path, rng):
    from reliability_harness import babi_lines
    p = folder / "qa1_fuzz_train.txt"
    p.write_text("\n".join(babi_lines(rng.randint(6, 14), rng.randrange(10 ** 6))) + "\n",
                 encoding="utf-8")
    return {"babi": p}, "babi"


def _babi_load(files):
    from fairseq_acvi.data.babi import parse_babi_file
    return [(e.story, e.query, e.answer, e.supports) for e in parse_babi_file(str(files["babi"]))]


def _babi_count(files):
    try:
        return sum("\t" in line for line in _decoded_lines(files["babi"].read_bytes()))
    except UnicodeDecodeError:
        return None


# --- guess the number
def _guess_make(folder: Path, rng):
    from fairseq_acvi import guess_number as gn
    style = rng.choice(gn.STYLES)
    high = rng.choice([10, 100])
    targets = [rng.randint(0, high) for _ in range(rng.randint(3, 8))]
    recs = gn.play_games(gn.RandomPlayer(rng), targets, 0, high)
    p = folder / "qa1_guess-number_train.txt"
    gn.write_babi(recs, p, style)
    return {"games": p, "style": style}, "games"


def _guess_load(files):
    from fairseq_acvi.guess_number import read_babi_games
    games = read_babi_games(files["games"], style=files["style"])
    return [(q.answer, q.support, q.lineno) for g in games for q in g]


def _guess_count(files):
    try:
        return sum("\t" in line for line in _decoded_lines(files["games"].read_bytes()))
    except UnicodeDecodeError:
        return None


# --- See et al.'s chunk files
_ld = _tf.length_delimited


def tf_example(**features) -> bytes:
    """A serialised tf.train.Example with bytes features (independent of the decoder)."""
    return _tf.example(int_feature=False, **features)


WORDS = "the a cat dog sat on mat ran far away police said tuesday city new man woman".split()


def _sentence(rng, n=None):
    return " ".join(rng.choice(WORDS) for _ in range(n or rng.randint(4, 12)))


def _chunk_records(rng, n):
    return [tf_example(article=_sentence(rng, rng.randint(10, 40)),
                       abstract=f"<s> {_sentence(rng)} . </s> <s> {_sentence(rng)} . </s>")
            for _ in range(n)]


_frame = _tf.frame


def _chunks_make_factory(xz: bool):
    def make(folder: Path, rng):
        files = {}
        for c in range(2):
            data = _frame(_chunk_records(rng, rng.randint(3, 8)))
            name = f"train_{c:03d}.bin" + (".xz" if xz else "")
            p = folder / name
            p.write_bytes(lzma.compress(data) if xz else data)
            files[name] = p
        return files, rng.choice(sorted(files))
    return make


def _chunks_load(files):
    import read_see_chunks as rsc
    folder = next(iter(files.values())).parent
    return list(rsc.read_split(str(folder), "train"))


def _unframe(data: bytes) -> Optional[int]:
    """Records in a chunk's bytes by its framing alone, None when the framing is broken."""
    n, pos = 0, 0
    if not data:
        return None
    while pos < len(data):
        if pos + 8 > len(data):
            return None
        (k,) = struct.unpack("<q", data[pos:pos + 8])
        if k < 0 or pos + 8 + k > len(data):
            return None
        pos += 8 + k
        n += 1
    return n


def _chunks_count(files):
    total = 0
    for p in files.values():
        data = p.read_bytes()
        if p.suffix == ".xz":
            try:
                data = lzma.decompress(data)
            except (lzma.LZMAError, EOFError):
                return None
        k = _unframe(data)
        if k is None:
            return None
        total += k
    return total


def _raw_chunk(fn):
    """A corruption of the uncompressed record stream (re-compressed for .xz files)."""
    def corrupt(data, rng, xz=False):
        raw = lzma.decompress(data) if xz else data
        out, where = fn(raw, rng)
        return (lzma.compress(out) if xz else out), where
    corrupt.raw = True
    return corrupt


def _records_of(raw: bytes) -> List[bytes]:
    out, pos = [], 0
    while pos < len(raw):
        (k,) = struct.unpack("<q", raw[pos:pos + 8])
        out.append(raw[pos + 8:pos + 8 + k])
        pos += 8 + k
    return out


def cc_length(raw, rng):
    recs = _records_of(raw)
    k = rng.randrange(len(recs))
    bad = rng.choice([2 ** 62, 2 ** 40, 2 ** 33, -1, -(2 ** 63), len(recs[k]) + 1000])
    pos = sum(8 + len(r) for r in recs[:k])
    return raw[:pos] + struct.pack("<q", bad) + raw[pos + 8:], k


def _replace_record(raw, rng, make_body):
    recs = _records_of(raw)
    k = rng.randrange(len(recs))
    recs[k] = make_body(rng)
    return _frame(recs), k


def cc_article_not_utf8(raw, rng):
    return _replace_record(raw, rng, lambda r: _ld(1, _ld(1, _ld(1, b"article") + _ld(
        2, _ld(1, _ld(1, b"caf\xe9 au lait")))) + _ld(1, _ld(1, b"abstract") + _ld(
            2, _ld(1, _ld(1, b"<s> x . </s>"))))))


def cc_line_break(raw, rng):
    return _replace_record(raw, rng, lambda r: tf_example(article="one line\nand another",
                                                          abstract="<s> x . </s>"))


def cc_missing_abstract(raw, rng):
    return _replace_record(raw, rng, lambda r: tf_example(article=_sentence(r)))


def cc_empty_abstract(raw, rng):
    return _replace_record(raw, rng, lambda r: tf_example(article=_sentence(r),
                                                          abstract="<s> </s>"))


def cc_garbage_record(raw, rng):
    return _replace_record(raw, rng, lambda r: bytes([0x0A, 0xFF, 0xFF]) +
                           bytes(r.randrange(256) for _ in range(r.randint(0, 30))))


def cc_empty_article(raw, rng):
    """See's data has such records: read, kept as '' by read_split, dropped and counted by
    convert (not silently)."""
    return _replace_record(raw, rng, lambda r: tf_example(article="",
                                                          abstract="<s> x . </s>"))[0], None


def cc_empty_file(raw, rng):
    return b"", None


CHUNK_CORRUPTIONS = {
    "truncate": c_truncate, "random_bytes": c_random_bytes, "insert_bytes": c_insert_bytes,
    "bad_length": _raw_chunk(cc_length), "article_not_utf8": _raw_chunk(cc_article_not_utf8),
    "line_break_in_text": _raw_chunk(cc_line_break),
    "missing_feature": _raw_chunk(cc_missing_abstract),
    "empty_abstract": _raw_chunk(cc_empty_abstract),
    "garbage_record": _raw_chunk(cc_garbage_record),
    "empty_article": _raw_chunk(cc_empty_article), "empty_file": _raw_chunk(cc_empty_file),
    "truncate_records": _raw_chunk(c_truncate),
}
CHUNK_EXPECT = {"bad_length": "error", "article_not_utf8": "error", "line_break_in_text": "error",
                "missing_feature": "error", "empty_abstract": "error",
                "garbage_record": "error", "empty_file": "error", "empty_article": "either"}


# --- line-aligned summarization files and .story files
def _lines_make(folder: Path, rng):
    n = rng.randint(4, 10)
    src = [_sentence(rng, rng.randint(8, 30)) for _ in range(n)]
    tgt = [f"<s> {_sentence(rng)} . </s> <s> {_sentence(rng)} . </s>" for _ in range(n)]
    files = {"train.source": folder / "train.source", "train.target": folder / "train.target"}
    files["train.source"].write_text("\n".join(src) + "\n", encoding="utf-8")
    files["train.target"].write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return files, rng.choice(sorted(files))


def _lines_load(files):
    import prepare_cnndm
    return list(prepare_cnndm.read_line_pairs(str(files["train.source"]),
                                              str(files["train.target"]), str.split, True))


def _lines_count(files):
    try:
        counts = {len(_decoded_lines(p.read_bytes(), "lf")) for p in files.values()}
    except UnicodeDecodeError:
        return None
    return counts.pop() if len(counts) == 1 else None


def _stories_make(folder: Path, rng):
    files = {}
    for i in range(3):
        body = "\n\n".join(_sentence(rng) + " ." for _ in range(rng.randint(2, 5)))
        hl = "\n\n".join(f"@highlight\n\n{_sentence(rng)}" for _ in range(rng.randint(1, 3)))
        p = folder / f"s{i}.story"
        p.write_text(body + "\n\n" + hl + "\n", encoding="utf-8")
        files[p.name] = p
    return files, rng.choice(sorted(files))


def _stories_load(files):
    import prepare_cnndm
    folder = next(iter(files.values())).parent
    return [(a, s) for a, s, _, _ in prepare_cnndm.read_stories(str(folder), str.split, True)]


def _stories_count(files):
    for p in files.values():
        try:
            _decoded_lines(p.read_bytes(), "lf")
        except UnicodeDecodeError:
            return None
    return len(files)


# --- captions and feature files
D = 8


def _captions_make(folder: Path, rng):
    p = folder / "train.tsv"
    p.write_text("".join(f"vid{rng.randrange(6)}\t{_sentence(rng)}\n"
                         for _ in range(rng.randint(5, 15))), encoding="utf-8")
    return {"train.tsv": p}, "train.tsv"


def _captions_load(files):
    from fairseq_acvi.data.video_features import read_caption_file
    return [(r.video_id, r.caption, r.line_no) for r in read_caption_file(str(files["train.tsv"]))]


def _captions_count(files):
    data = files["train.tsv"].read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    try:
        for line in lines:
            line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return len(lines)


def _features_make(folder: Path, rng):
    fdir = folder / "features"
    fdir.mkdir(exist_ok=True)
    files = {}
    for v in range(4):
        # multiples of 1/8 in [-4, 4]: exact in float16, float32 and float64 alike; at most
        # MAX_FRAMES rows, so that every row is read (a longer file is read at MAX_FRAMES equally
        # spaced rows: a NaN in a row never read is never trained on)
        state = np.random.RandomState(rng.randrange(10 ** 6))
        arr = (state.randint(-32, 33, (rng.randint(3, MAX_FRAMES), D)) / 8.0).astype(np.float32)
        p = fdir / f"vid{v}.npy"
        np.save(p, arr)
        files[p.name] = p
    return files, rng.choice(sorted(files))


MAX_FRAMES = 24


def _features_load(files):
    from fairseq_acvi.data.video_features import VideoFeatureStore
    folder = next(iter(files.values())).parent
    vids = sorted(p.stem for p in files.values())
    store = VideoFeatureStore(str(folder), vids, D, MAX_FRAMES)
    return [store.load(v).numpy() for v in vids]


def _features_count(files):
    return len(files)


def _npy_rewrite(fn):
    def corrupt(data, rng):
        arr = np.load(io.BytesIO(data))
        out, where = fn(arr, rng)
        if isinstance(out, bytes):
            return out, where
        buf = io.BytesIO()
        np.save(buf, out, allow_pickle=True)
        return buf.getvalue(), where
    return corrupt


def _poke(value):
    def fn(arr, rng):
        arr = arr.copy()
        arr[rng.randrange(arr.shape[0]), rng.randrange(arr.shape[1])] = value
        return arr, None
    return fn


FEATURE_CORRUPTIONS = {
    "nan": _npy_rewrite(_poke(np.nan)), "inf": _npy_rewrite(_poke(np.inf)),
    "neg_inf": _npy_rewrite(_poke(-np.inf)),
    "overflow_f64": _npy_rewrite(lambda a, r: (_poke(1e300)(a.astype(np.float64), r)[0], None)),
    "wrong_dim": _npy_rewrite(lambda a, r: (np.zeros((a.shape[0], D + r.choice([-1, 1, 5])),
                                                     np.float32), None)),
    "one_d": _npy_rewrite(lambda a, r: (a.reshape(-1), None)),
    "three_d": _npy_rewrite(lambda a, r: (a[None], None)),
    "zero_frames": _npy_rewrite(lambda a, r: (a[:0], None)),
    "int_dtype": _npy_rewrite(lambda a, r: (a.astype(np.int64), None)),
    "object_dtype": _npy_rewrite(lambda a, r: (np.array([[object()] * D], dtype=object), None)),
    "complex_dtype": _npy_rewrite(lambda a, r: (a.astype(np.complex64), None)),
    "float64": _npy_rewrite(lambda a, r: (a.astype(np.float64), None)),
    "float16": _npy_rewrite(lambda a, r: (a.astype(np.float16), None)),
    "fortran_order": _npy_rewrite(lambda a, r: (np.asfortranarray(a), None)),
    "many_frames": _npy_rewrite(lambda a, r: (np.tile(a, (20, 1)), None)),
    "truncate": c_truncate, "random_bytes": c_random_bytes, "insert_bytes": c_insert_bytes,
    "empty_file": lambda d, r: (b"", None),
    "header_bytes": lambda d, r: (d[:8] + bytes(r.randrange(256) for _ in range(8)) + d[16:],
                                  None),
}
FEATURE_EXPECT = {"nan": "error", "inf": "error", "neg_inf": "error", "overflow_f64": "error",
                  "wrong_dim": "error", "one_d": "error", "three_d": "error",
                  "zero_frames": "error", "int_dtype": "error", "object_dtype": "error",
                  "complex_dtype": "error", "float64": "same", "float16": "same",
                  "fortran_order": "same", "empty_file": "error", "many_frames": "either"}


# --- parallel translation text
def _mt_make(folder: Path, rng):
    n = rng.randint(4, 12)
    src = [_sentence(rng) for _ in range(n)]
    files = {"train.en": folder / "train.en", "train.de": folder / "train.de"}
    files["train.en"].write_text("\n".join(src) + "\n", encoding="utf-8")
    files["train.de"].write_text("\n".join(" ".join(reversed(s.split())) for s in src) + "\n",
                                 encoding="utf-8")
    return files, rng.choice(sorted(files))


def _mt_load(files):
    from common import read_parallel, require_nonempty_lines
    src, tgt = read_parallel(files["train.en"], files["train.de"])
    for p, lines in ((files["train.en"], src), (files["train.de"], tgt)):
        if not lines:
            from common import DataError
            raise DataError(f"{p} is empty")
        require_nonempty_lines(p, lines)
    return list(zip(src, tgt))


def _mt_count(files):
    try:
        counts = {len(_decoded_lines(p.read_bytes(), "lf")) for p in files.values()}
    except UnicodeDecodeError:
        return None
    return counts.pop() if len(counts) == 1 else None


def _common_errors():
    from common import DataError
    return (DataError,)


TEXT_EXPECT_STRICT = {"invalid_utf8": "error", "empty_line": "error", "blank_line": "error",
                      "crlf": "same", "bom": "same", "no_final_newline": "same"}


def readers() -> Dict[str, Reader]:
    import read_see_chunks as rsc
    return {
        "babi": Reader(
            "bAbI", _babi_make, _babi_load, _babi_count, (ValueError,),
            dict(TEXT_CORRUPTIONS, field_count=c_field_count),
            dict(TEXT_EXPECT_STRICT, lone_cr="same", field_count="error"),
            line_checked=("invalid_utf8", "empty_line", "blank_line", "field_count")),
        "guess_number": Reader(
            "guess-the-number", _guess_make, _guess_load, _guess_count, (ValueError,),
            dict(TEXT_CORRUPTIONS, field_count=c_field_count),
            dict(TEXT_EXPECT_STRICT, lone_cr="same", field_count="error"),
            line_checked=("invalid_utf8", "empty_line", "blank_line", "field_count")),
        "chunks": Reader(
            "summarization chunks (.bin)", _chunks_make_factory(False), _chunks_load,
            _chunks_count, (rsc.ChunkError, FileNotFoundError), CHUNK_CORRUPTIONS, CHUNK_EXPECT,
            line_checked=("bad_length", "article_not_utf8", "line_break_in_text",
                          "missing_feature", "empty_abstract", "garbage_record", "empty_file")),
        "chunks_xz": Reader(
            "summarization chunks (.bin.xz)", _chunks_make_factory(True), _chunks_load,
            _chunks_count, (rsc.ChunkError, FileNotFoundError), CHUNK_CORRUPTIONS, CHUNK_EXPECT,
            line_checked=("bad_length", "article_not_utf8", "line_break_in_text",
                          "missing_feature", "empty_abstract", "garbage_record", "empty_file")),
        "summ_lines": Reader(
            "summarization lines", _lines_make, _lines_load, _lines_count,
            (ValueError, FileNotFoundError), TEXT_CORRUPTIONS,
            dict(TEXT_EXPECT_STRICT, delete_line="error", duplicate_line="error"),
            line_checked=("invalid_utf8", "empty_line", "blank_line")),
        "stories": Reader(
            "summarization .story files", _stories_make, _stories_load, _stories_count,
            (ValueError, FileNotFoundError), TEXT_CORRUPTIONS,
            {"invalid_utf8": "error", "crlf": "same", "bom": "same", "no_final_newline": "same",
             "empty_line": "same", "blank_line": "same"},
            line_checked=("invalid_utf8",)),
        "captions": Reader(
            "captions", _captions_make, _captions_load, _captions_count,
            (ValueError, FileNotFoundError), dict(TEXT_CORRUPTIONS, field_count=c_field_count),
            dict(TEXT_EXPECT_STRICT, field_count="error"),
            line_checked=("invalid_utf8", "empty_line", "blank_line", "field_count")),
        "features": Reader(
            "frame-feature files", _features_make, _features_load, _features_count,
            (ValueError, FileNotFoundError), FEATURE_CORRUPTIONS, FEATURE_EXPECT,
            located=False),
        "translation": Reader(
            "translation text", _mt_make, _mt_load, _mt_count, _common_errors(),
            TEXT_CORRUPTIONS,
            dict(TEXT_EXPECT_STRICT, crlf="error", lone_cr="error", delete_line="error",
                 duplicate_line="error"),
            line_checked=("invalid_utf8", "empty_line", "blank_line", "lone_cr")),
    }


def c_field_count(data, rng):
    """A tab added to or removed from one line (a field too many or too few)."""
    lines = _split(data)
    k = rng.randrange(len(lines))
    body = lines[k].rstrip(b"\n")
    end = lines[k][len(body):]
    if b"\t" in body and rng.random() < 0.5:
        i = body.index(b"\t")
        body = body[:i] + b" " + body[i + 1:]
    else:
        j = rng.randrange(1, len(body) + 1) if body else 0
        body = body[:j] + b"\t" + body[j:]
    lines[k] = body + end
    return _join(lines), k + 1


# ---------------------------------------------------------------------------------- the cases
def _alarm(signum, frame):
    raise _Timeout()


#: words of a message about the whole file (no line to name: empty, cut short, line counts differ)
_FILE_LEVEL = ("empty chunk file", "no lines", "no games", "no captions", "empty file",
               "file ends", "is empty", " lines but ", "differ in length")


def _names_place(msg: str, name: str, located: bool) -> bool:
    """The message names the file ``name`` and, for a ``located`` reader, the line or record
    (or says what is wrong with the file as a whole)."""
    if name not in msg:
        return False
    if not located:
        return True
    return bool(re.search(re.escape(name) + r"(:\d+|: record \d+)", msg)) or \
        any(w in msg for w in _FILE_LEVEL)


def _names_line(msg: str, name: str, where: int) -> bool:
    return bool(re.search(re.escape(name) + rf"(:{where}\b|: record {where}\b)", msg))


def run_case(reader: Reader, corruption: str, seed: int, workdir: Path) -> dict:
    """One fuzz case (see the module docstring); returns {"outcome", "detail", ...}."""
    rng = random.Random(seed)
    folder = Path(workdir) / f"{corruption}-{seed}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    files, target = reader.make(folder, rng)
    clean = reader.load(files)
    fn = reader.corruptions[corruption]
    data = files[target].read_bytes()
    if getattr(fn, "raw", False):
        new, where = fn(data, rng, xz=files[target].suffix == ".xz")
    else:
        new, where = fn(data, rng)
    files[target].write_bytes(new)
    expect = reader.expect.get(corruption, "either")
    name = files[target].name
    res = {"reader": reader.name, "corruption": corruption, "seed": seed, "expect": expect,
           "file": str(files[target])}
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT)
    try:
        records = reader.load(files)
    except _Timeout:
        res.update(outcome="hang")
        return res
    except reader.errors as e:
        signal.alarm(0)
        msg = str(e)
        res["detail"] = f"{type(e).__name__}: {msg[:300]}"
        if expect == "same":
            res["outcome"] = "rejected_good"
        elif not _names_place(msg, name, reader.located):
            res["outcome"] = "unclear_error"
        elif (where is not None and corruption in reader.line_checked
              and not _names_line(msg, name, where)):
            res["outcome"] = "wrong_line"
            res["detail"] += f" (corruption at {where})"
        else:
            res["outcome"] = "clear_error"
        return res
    except BaseException as e:  # noqa: BLE001 - this is what the suite counts
        signal.alarm(0)
        res.update(outcome="crash", detail=f"{type(e).__name__}: {str(e)[:300]}")
        return res
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if expect == "error":
        res["outcome"] = "accepted_bad"
    elif expect == "same":
        res["outcome"] = "loaded" if _same(records, clean) else "rejected_good"
        if res["outcome"] != "loaded":
            res["detail"] = "read differently from the clean input"
    else:
        n = reader.count(files)
        if n is None:
            res.update(outcome="accepted_bad", detail="input with broken framing or bytes was read")
        elif n != len(records):
            res.update(outcome="silent_drop",
                       detail=f"{len(records)} records read, {n} in the file")
        else:
            res["outcome"] = "loaded"
    return res


def _same(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (np.shape(x) == np.shape(y) and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def campaign(per_corruption: int, workdir: Path, names=None, seed: int = 0) -> Dict[str, dict]:
    """``per_corruption`` cases for every corruption of every reader (``names``: a subset).
    Returns per reader: cases, outcome counts and the failing cases."""
    out = {}
    for key, reader in readers().items():
        if names and key not in names:
            continue
        counts: Counter = Counter()
        failures = []
        for corruption in reader.corruptions:
            for i in range(per_corruption):
                r = run_case(reader, corruption, seed * 1_000_003 + i, Path(workdir) / key)
                counts[r["outcome"]] += 1
                if r["outcome"] not in PASS:
                    failures.append(r)
            shutil.rmtree(Path(workdir) / key, ignore_errors=True)
        out[key] = {"reader": reader.name, "cases": sum(counts.values()),
                    "loaded": counts["loaded"], "clear_error": counts["clear_error"],
                    "failures": failures, "outcomes": dict(counts)}
    return out
