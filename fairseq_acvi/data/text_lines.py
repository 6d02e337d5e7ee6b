"""Text files as lines, with errors that name the file and the line (standard library only).

Every text reader of the package goes through :func:`read_text_lines`, so that they agree on what
a line is and on what they refuse:

* the bytes must be UTF-8; a line that is not raises ``ValueError("<file>:<line>: not UTF-8 (byte
  0x.. at column c: reason)")`` (Python's own UnicodeDecodeError names neither);
* a leading UTF-8 byte-order mark (which Windows editors write) is skipped, so it never becomes
  part of the first word;
* ``newline="any"``: LF, CRLF and a lone CR each end a line (``bytes.splitlines``; the bAbI files);
  ``newline="lf"``: only LF ends a line and a CR just before it is dropped, so a stray CR inside a
  line stays in that line instead of splitting it (line-aligned corpora, where a split line would
  shift every later pair);
* a final line ending does not add an empty line;
* a file whose name ends in ``.gz`` is read decompressed (:func:`read_bytes`).

:func:`read_lines` and :func:`read_aligned` read line-aligned files (one example per line:
summaries, references, sources), where an empty line is an error unless allowed and the files of
one set must have as many lines.
"""
from __future__ import annotations

import codecs
import gzip
import io
import os
from typing import Dict, List, Sequence

NEWLINES = ("any", "lf")


def decode_lines(data: bytes, path: str, newline: str = "any") -> List[str]:
    """The lines of ``data`` (the bytes of the file ``path``, which only names it in errors)."""
    if newline not in NEWLINES:
        raise ValueError(f"newline must be one of {NEWLINES}, got {newline!r}")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    if newline == "any":
        raw_lines = data.splitlines()
    else:
        raw_lines = data.split(b"\n")
        if raw_lines and raw_lines[-1] == b"":
            raw_lines.pop()  # the final newline
        raw_lines = [r[:-1] if r.endswith(b"\r") else r for r in raw_lines]
    lines = []
    for lineno, raw in enumerate(raw_lines, start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}:{lineno}: not UTF-8 (byte {raw[e.start]:#04x} at column "
                             f"{e.start + 1}: {e.reason})") from None
    return lines


def read_bytes(path) -> bytes:
    """The bytes of the file ``path``; a name ending in ``.gz`` is decompressed (the decoded
    outputs kept beside a result page are stored so). A damaged ``.gz`` raises ``ValueError``
    naming the file."""
    if not str(path).endswith(".gz"):
        with open(path, "rb") as f:
            return f.read()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: not a readable gzip file ({e})") from None


def write_bytes_whole(path: str, data: bytes) -> None:
    """``data`` into ``path`` through a ``.part`` file renamed over it, so that an interrupted
    write leaves no half file under ``path``."""
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_gzip_text(path: str, lines: List[str]) -> None:
    """``lines`` (one per line, LF) gzip-compressed into ``path`` with a zero timestamp, so that the
    same lines always give the same bytes (the outputs kept beside a result page), written whole
    (:func:`write_bytes_whole`)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        gz.write("".join(line + "\n" for line in lines).encode("utf-8"))
    write_bytes_whole(path, buf.getvalue())


def read_text_lines(path, newline: str = "any") -> List[str]:
    """The lines of the UTF-8 text file ``path`` (see the module docstring; ``.gz``:
    :func:`read_bytes`)."""
    return decode_lines(read_bytes(path), str(path), newline)


def read_lines(path: str, allow_empty: bool = False) -> List[str]:
    """Lines of a UTF-8 text file (no newline; LF or CRLF ends a line, a leading byte-order mark
    is skipped); an empty line, or one that is not UTF-8, raises ``ValueError`` naming file:line."""
    out = []
    for i, line in enumerate(read_text_lines(path, newline="lf"), 1):
        if not allow_empty and not line.strip():
            raise ValueError(f"{path}:{i}: empty line")
        out.append(line)
    if not out:
        raise ValueError(f"{path}: no lines")
    return out


def read_aligned(paths: Dict[str, str], allow_empty: Sequence[str] = ()) -> Dict[str, List[str]]:
    """Read several line-aligned files; a line-count mismatch raises naming both files."""
    data = {k: read_lines(p, allow_empty=k in allow_empty) for k, p in paths.items()}
    keys = list(data)
    for k in keys[1:]:
        if len(data[k]) != len(data[keys[0]]):
            raise ValueError(f"{paths[k]} has {len(data[k])} lines but {paths[keys[0]]} has "
                             f"{len(data[keys[0]])}: the files must be line-aligned")
    return data
