"""Checked reading of plain-text corpora, and ``fairseq-preprocess`` run as a checked step.

Used by ``fairseq-acvi-prepare-parallel`` (fairseq_acvi/cli/prepare_parallel.py) and, through
``data_scripts/common.py``, by every data script of the repository. Everything here fails loudly: a
missing file, a ragged parallel corpus, an empty line, CR line ends or invalid UTF-8 raise
:class:`DataError` naming the file (and line), never a silent skip. Files are read as UTF-8 and
split on ``"\\n"`` only (``str.splitlines`` would also split on U+2028, U+0085, ... which occur
inside sentences and would shift the alignment of a parallel corpus).

This module imports nothing from fairseq, and of the package only the line reader
(:mod:`fairseq_acvi.data.text_lines`, which imports nothing): the data scripts load both without
the plugin's 5-second import (data_scripts/common.py says how).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

from fairseq_acvi.data.text_lines import decode_lines, read_bytes


class DataError(RuntimeError):
    """Bad or missing input data; the message names the file (and line)."""


def run_main(main) -> None:
    """Run a script's ``main()`` and exit with its code; a :class:`DataError` becomes a one-line
    ``error: …`` on stderr and exit code 2 (no traceback for bad input)."""
    try:
        sys.exit(main())
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def log(msg: str) -> None:
    """One progress line on stderr, prefixed ``[data]``."""
    print(f"[data] {msg}", file=sys.stderr, flush=True)


def read_lines(path: Path) -> List[str]:
    """Lines of a UTF-8 text file without their ``\\n`` (a final newline does not add an empty line;
    a leading byte-order mark is skipped: :func:`~fairseq_acvi.data.text_lines.decode_lines`; a
    ``.gz`` name is read decompressed: :func:`~fairseq_acvi.data.text_lines.read_bytes`).

    Raises DataError if the file is missing, uses CR line ends or is not UTF-8 (with the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing file: {path}")
    try:
        raw = read_bytes(path)
    except ValueError as e:
        raise DataError(str(e)) from None
    if b"\r" in raw:
        line = raw[: raw.index(b"\r")].count(b"\n") + 1
        raise DataError(f"{path}:{line}: carriage return found; convert the file to LF line endings")
    try:
        return decode_lines(raw, str(path), newline="lf")
    except ValueError as e:
        raise DataError(str(e)) from None


def write_lines(path: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``path`` (UTF-8, each ended by ``\\n``; parent folders made); their number."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
            n += 1
    return n


def write_provenance(destdir: Path, lines: Sequence[str]) -> None:
    """``destdir/PROVENANCE.txt``: one line per entry."""
    write_lines(Path(destdir) / "PROVENANCE.txt", lines)


def require_files(folder: Path, names: Sequence[str], hint: str = "") -> List[Path]:
    """Paths ``folder/name``; DataError naming every missing one (plus ``hint``) if any is absent."""
    paths = [Path(folder) / n for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DataError("missing file(s): " + ", ".join(missing) + (f"\n{hint}" if hint else ""))
    return paths


def read_parallel(src_path: Path, tgt_path: Path):
    """Both sides of a parallel corpus; DataError naming both files if their line counts differ
    (and the first empty line, if either file has one)."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        hint = ""
        for path, lines in ((src_path, src), (tgt_path, tgt)):
            empty = next((i for i, line in enumerate(lines, 1) if not line.split()), None)
            if empty is not None:  # the usual cause of a shift: say where it is
                hint = f"; {path}:{empty} is an empty line"
                break
        raise DataError(f"parallel files differ in length: {src_path} has {len(src)} lines, "
                        f"{tgt_path} has {len(tgt)} lines{hint}")
    return src, tgt


def require_nonempty_lines(path: Path, lines: Sequence[str]) -> None:
    """DataError ``path:line`` for the first empty (or whitespace-only) line: fairseq would binarise it
    as an empty sentence (just ``</s>``), which its encoders reject as a source."""
    for i, line in enumerate(lines, start=1):
        if not line.split():
            raise DataError(f"{path}:{i}: empty line" + (" (whitespace only)" if line else ""))


def fairseq_preprocess(src: str, tgt: str, trainpref: Path, validpref: Path,
                       testpref: Union[Path, Sequence[Path]], destdir: Path,
                       srcdict: Optional[Path] = None, tgtdict: Optional[Path] = None,
                       joined: bool = False, workers: int = 1, threshold: int = 0,
                       padding_factor: Optional[int] = None) -> List[str]:
    """Binarise with ``fairseq-preprocess`` (run as ``python -m fairseq_cli.preprocess`` by this
    interpreter, or by the one ``FAIRSEQ_ACVI_PYTHON`` names: the tests name their fork server's).

    With ``srcdict`` (and ``tgtdict`` or ``joined``) the dictionaries are fixed; without them
    fairseq builds them from the training data, dropping words seen fewer than ``threshold`` times
    (``--thresholdsrc/--thresholdtgt``) and padding their size to a multiple of ``padding_factor``
    (fairseq's default 8 when None). ``testpref`` may be a list of prefixes: fairseq names the
    binarised test sets ``test``, ``test1``, ``test2``, ...; those subset names are returned in order
    (an empty list: no test set, nothing returned).
    """
    tests = [testpref] if isinstance(testpref, (str, os.PathLike)) else list(testpref)
    for pref in [validpref, *tests]:
        if "," in str(pref):  # fairseq splits --validpref/--testpref on commas
            raise DataError(f"fairseq-preprocess cannot take a path containing a comma: {pref}")
    cmd = [os.environ.get("FAIRSEQ_ACVI_PYTHON") or sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", src, "--target-lang", tgt,
           "--trainpref", str(trainpref), "--validpref", str(validpref),
           "--destdir", str(destdir), "--workers", str(workers)]
    if tests:
        cmd += ["--testpref", ",".join(str(t) for t in tests)]
    if srcdict is not None:
        cmd += ["--srcdict", str(srcdict)]
    if joined:
        cmd.append("--joined-dictionary")
    elif tgtdict is not None:
        cmd += ["--tgtdict", str(tgtdict)]
    if threshold:
        cmd += ["--thresholdsrc", str(threshold), "--thresholdtgt", str(threshold)]
    if padding_factor is not None:
        cmd += ["--padding-factor", str(padding_factor)]
    log("running " + " ".join(cmd[1:]))
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise DataError(f"fairseq-preprocess failed (exit {res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    for line in res.stdout.splitlines() + res.stderr.splitlines():
        if "replaced by <unk>" in line or "[" in line and "sents" in line:
            log(line.split("|")[-1].strip())
    return ["test" if k == 0 else f"test{k}" for k in range(len(tests))]
