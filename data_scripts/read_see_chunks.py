#!/usr/bin/env python
"""Read See et al.'s CNN/DailyMail chunk files into line-aligned article / summary text.

The chunks are what abisee/cnn-dailymail's ``make_datafiles.py`` writes: per record an 8-byte
little-endian signed length (``struct`` format ``<q``), then that many bytes of a serialised
``tf.train.Example`` with two bytes features, ``article`` and ``abstract``. Chunk ``S_NNN.bin``
(optionally ``.xz``-compressed) holds examples NNN·1000 … NNN·1000 + 999 of split S.

No TensorFlow: the protobuf wire format is decoded here (:func:`parse_example`). The messages are

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   (entries: string key = 1; Feature value = 2)
    Feature   { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }

Output in ``--out-dir``, per split (``val`` is written as ``valid``, fairseq's name):
  ``{split}.source``  the article, one line per example, as stored (lower-cased, PTB-tokenised)
  ``{split}.target``  the abstract, one line per example, with See's ``<s> … </s>`` sentence markers
  ``{split}.ids``     ``chunk<TAB>index<TAB>story_id`` per line (story ids of val/test from
                      ``val_test_ids.tsv`` beside the chunks when present, else ``-``)
and ``read_stats.json``: records read, written and dropped per split, with the dropped records named.

Records with an empty article are dropped and counted (See's data has 67 in train; the README of
the shared copy lists them as an artifact). Everything else that is not a well-formed record stops
with an error naming the chunk file and the record index: a truncated length or body (a length
field beyond the end of the file included: it is read in bounded pieces, never allocated whole),
a .xz stream that is corrupt or cut short, a chunk file with no record, a protobuf that does not
parse, a missing feature, text that is not UTF-8, an empty abstract, or a newline inside a text
(it would break the line alignment).

    python data_scripts/read_see_chunks.py --chunks "$ACVI_DATA/cnn_dm_see_chunks/bin" \\
        --out-dir data/cnndm_see/text [--splits train val test] [--max-records N]
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import struct
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

SPLITS = ("train", "val", "test")
OUT_NAME = {"train": "train", "val": "valid", "test": "test"}
CHUNK_RE = re.compile(r"^(train|val|test)_(\d+)\.bin(\.xz)?$")


class ChunkError(ValueError):
    """A malformed record; the message names the chunk file and the record index."""


# --- protobuf wire format -------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> Tuple[int, int]:
    """Decode a base-128 varint at ``pos``; return ``(value, next position)``."""
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def iter_fields(buf: bytes) -> Iterator[Tuple[int, int, object]]:
    """Yield ``(field number, wire type, value)`` of one message; value is bytes for wire type 2."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise ValueError("truncated 64-bit field")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError(f"length-delimited field {field} says {n} bytes, {len(buf) - pos} left")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            if pos + 4 > len(buf):
                raise ValueError("truncated 32-bit field")
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire} (field {field})")
        yield field, wire, value


def parse_example(buf: bytes) -> Dict[str, List[bytes]]:
    """The bytes features of a serialised ``tf.train.Example``: ``{key: [value, …]}``.

    Float and int64 features are skipped (See's records have none); a bytes feature keeps every
    value of its list.
    """
    out: Dict[str, List[bytes]] = {}
    for field, wire, features in iter_fields(buf):
        if field != 1 or wire != 2:
            continue
        for f2, w2, entry in iter_fields(features):
            if f2 != 1 or w2 != 2:
                continue
            key, feature = None, b""
            for f3, w3, v in iter_fields(entry):
                if f3 == 1 and w3 == 2:
                    key = v.decode("utf-8")
                elif f3 == 2 and w3 == 2:
                    feature = v
            if key is None:
                raise ValueError("feature map entry without a key")
            values: List[bytes] = []
            for f4, w4, kind in iter_fields(feature):
                if f4 == 1 and w4 == 2:  # bytes_list
                    values.extend(v for f5, w5, v in iter_fields(kind) if f5 == 1 and w5 == 2)
            out[key] = values
    return out


# --- chunk files ----------------------------------------------------------------------------------

def chunk_files(folder: str, split: str) -> List[Path]:
    """The chunk files of one split in ``folder``, in chunk-number order."""
    path = Path(folder)
    if not path.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder of chunk files")
    found = []
    for p in path.iterdir():
        m = CHUNK_RE.match(p.name)
        if m and m.group(1) == split:
            found.append((int(m.group(2)), p))
    numbers = [n for n, _ in found]
    if len(set(numbers)) != len(numbers):
        raise ChunkError(f"{folder}: split {split} has a chunk both as .bin and .bin.xz")
    return [p for _, p in sorted(found)]


def _open(path: Path):
    return lzma.open(path, "rb") if path.suffix == ".xz" else open(path, "rb")


#: the largest piece read at once: a corrupt length field (up to 2^63 - 1) must give a
#: "truncated record" error, not an attempt to allocate that many bytes
_READ_PIECE = 1 << 24


def _read_upto(f, n: int) -> bytes:
    """Up to ``n`` bytes of ``f`` (fewer at the end of the file), read in bounded pieces."""
    pieces, got = [], 0
    while got < n:
        piece = f.read(min(n - got, _READ_PIECE))
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)


def read_records(path: Path) -> Iterator[Tuple[int, bytes]]:
    """Yield ``(record index, serialised Example)`` of one chunk file.

    A file with no record, a truncated length or body, a negative length, or (``.xz``) a
    compressed stream that is corrupt or cut short raises :class:`ChunkError` naming the file and
    the record where reading stopped."""
    index = 0
    try:
        with _open(path) as f:
            while True:
                head = f.read(8)
                if not head:
                    if index == 0:
                        raise ChunkError(f"{path.name}: empty chunk file (no records)")
                    return
                if len(head) < 8:
                    raise ChunkError(f"{path.name}: record {index}: truncated length ({len(head)} of 8 bytes)")
                (n,) = struct.unpack("<q", head)
                if n < 0:
                    raise ChunkError(f"{path.name}: record {index}: negative length {n}")
                body = _read_upto(f, n)
                if len(body) < n:
                    raise ChunkError(f"{path.name}: record {index}: truncated record "
                                     f"({len(body)} of {n} bytes)")
                yield index, body
                index += 1
    except lzma.LZMAError as e:
        raise ChunkError(f"{path.name}: record {index}: not a valid .xz file ({e})") from e
    except EOFError as e:  # lzma: the compressed stream ends before its end-of-stream marker
        raise ChunkError(f"{path.name}: record {index}: truncated .xz file ({e})") from e


def _text(values: Optional[List[bytes]], name: str, where: str) -> str:
    if values is None:
        raise ChunkError(f"{where}: no '{name}' feature")
    try:
        text = b" ".join(values).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ChunkError(f"{where}: '{name}' is not UTF-8 ({e})") from e
    if "\n" in text or "\r" in text:
        raise ChunkError(f"{where}: '{name}' contains a line break")
    return " ".join(text.split())


def read_split(folder: str, split: str, max_records: Optional[int] = None
               ) -> Iterator[Tuple[str, int, str, str]]:
    """Yield ``(chunk name, record index, article, abstract)``; empty articles included (article '')."""
    count = 0
    for path in chunk_files(folder, split):
        for index, body in read_records(path):
            if max_records is not None and count >= max_records:
                return
            where = f"{path.name}: record {index}"
            try:
                feats = parse_example(body)
            except (ValueError, UnicodeDecodeError) as e:
                raise ChunkError(f"{where}: not a tf.train.Example ({e})") from e
            article = _text(feats.get("article"), "article", where)
            abstract = _text(feats.get("abstract"), "abstract", where)
            if not abstract.replace("<s>", "").replace("</s>", "").strip():
                raise ChunkError(f"{where}: empty abstract")
            count += 1
            yield path.name.replace(".xz", ""), index, article, abstract


def story_ids(folder: str) -> Dict[Tuple[str, int], str]:
    """``(chunk, index) → story id`` from ``val_test_ids.tsv`` next to (or in) the chunk folder."""
    for cand in (Path(folder) / "val_test_ids.tsv", Path(folder).parent / "val_test_ids.tsv"):
        if cand.is_file():
            ids = {}
            with open(cand, encoding="utf-8") as f:
                next(f, None)
                for lineno, line in enumerate(f, 2):
                    parts = line.rstrip("\n").split("\t")
                    if len(parts) != 4 or not parts[1].isdigit():
                        raise ValueError(f"{cand}:{lineno}: expected 4 tab-separated fields "
                                         "(chunk, record index, split, story id)")
                    ids[(parts[0], int(parts[1]))] = parts[3]
            return ids
    return {}


def convert(folder: str, out_dir: str, splits=SPLITS, max_records: Optional[int] = None) -> dict:
    """Write the text files of ``splits``; return the statistics written to read_stats.json."""
    os.makedirs(out_dir, exist_ok=True)
    ids = story_ids(folder)
    stats = {"chunks": str(folder), "splits": {}}
    for split in splits:
        files = chunk_files(folder, split)
        if not files:
            raise FileNotFoundError(f"{folder}: no chunk files {split}_NNN.bin[.xz]")
        name = OUT_NAME[split]
        st = {"chunk_files": [p.name for p in files], "records": 0, "written": 0,
              "dropped_empty_article": []}
        paths = [os.path.join(out_dir, f"{name}.{ext}") for ext in ("source", "target", "ids")]
        with open(paths[0], "w", encoding="utf-8") as fs, open(paths[1], "w", encoding="utf-8") as ft, \
                open(paths[2], "w", encoding="utf-8") as fi:
            for chunk, index, article, abstract in read_split(folder, split, max_records):
                st["records"] += 1
                if not article:
                    st["dropped_empty_article"].append(f"{chunk}:{index}")
                    continue
                fs.write(article + "\n")
                ft.write(abstract + "\n")
                fi.write(f"{chunk}\t{index}\t{ids.get((chunk, index), '-')}\n")
                st["written"] += 1
        stats["splits"][name] = st
        print(f"[read_see_chunks] {name}: {st['records']} records in {len(files)} chunks, "
              f"{st['written']} written, {len(st['dropped_empty_article'])} dropped (empty article)")
    with open(os.path.join(out_dir, "read_stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    return stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", required=True, help="folder of {train,val,test}_NNN.bin[.xz]")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    p.add_argument("--max-records", type=int, default=None,
                   help="read at most N records per split (before dropping empty articles)")
    args = p.parse_args(argv)
    try:
        convert(args.chunks, args.out_dir, args.splits, args.max_records)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
