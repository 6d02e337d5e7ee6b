"""Shared helpers of the machine-translation data scripts (docs/method.md §3.3).

Everything here fails loudly: a missing file, a ragged parallel corpus or a malformed vocabulary raises
:class:`DataError` with the offending path (and line where there is one), never a silent skip.
Files are read as UTF-8 and split on ``"\\n"`` only (``str.splitlines`` would also split on U+2028,
U+0085, ... which occur inside sentences and would shift the alignment of a parallel corpus).

The checked readers (``read_lines``, ``read_parallel``, ``require_nonempty_lines``, ...), ``DataError``,
``run_main`` and ``fairseq_preprocess`` live in the package, ``fairseq_acvi/data/corpus_checks.py``
(``fairseq-acvi-prepare-parallel`` uses them too); they are re-exported here under the same names.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]


def package_module(name: str):
    """The plugin's module ``name`` (e.g. ``fairseq_acvi.data.corpus_checks``), loaded from this
    checkout's file without importing the package: the package's ``__init__`` imports fairseq and
    registers the plugin (about 5 s), which no data script needs. It is registered under its
    package name, so a later ``import <name>`` in the same process (or the module's own imports of
    modules loaded this way first) finds this same module. Only modules that import nothing of the
    package but other modules loaded this way can be loaded so."""
    if name not in sys.modules:
        path = REPO.joinpath(*name.split(".")).with_suffix(".py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


package_module("fairseq_acvi.data.text_lines")          # corpus_checks' one import of the package
_checks = package_module("fairseq_acvi.data.corpus_checks")
DataError = _checks.DataError
run_main = _checks.run_main
log = _checks.log
read_lines = _checks.read_lines
write_lines = _checks.write_lines
write_provenance = _checks.write_provenance
require_files = _checks.require_files
read_parallel = _checks.read_parallel
require_nonempty_lines = _checks.require_nonempty_lines
fairseq_preprocess = _checks.fairseq_preprocess

# Symbols fairseq's Dictionary adds itself (bos, pad, eos, unk); vocab files of other toolkits
# (tensorflow/nmt, sentencepiece) list their own spelling of some of them, which must not be repeated.
FAIRSEQ_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
N_FAIRSEQ_SPECIALS = len(FAIRSEQ_SPECIALS)


def acvi_data_dir(sub: str) -> Optional[Path]:
    """``$ACVI_DATA/sub``, or None when ``ACVI_DATA`` is unset or empty.

    ``ACVI_DATA`` names the root of the project's data layout (the folder holding ``babi/``,
    ``multi30k/``, ``iwslt15_en_vi/``, ``wmt16_en_ro/``, ``cnn_dm_see_chunks/``, ``msvd/``, ...); a
    script's own option or variable (``--raw-dir``, ``MULTI30K_DIR``, ...) wins over it. No path
    outside the repository is assumed when it is unset.
    """
    root = os.environ.get("ACVI_DATA", "")
    return Path(root) / sub if root else None


def vocab_to_fairseq_dict(vocab_path: Path, out_path: Path, drop=("<unk>", "<s>", "</s>")) -> int:
    """Convert a one-token-per-line vocabulary (tensorflow/nmt style) to a fairseq dict file.

    fairseq dict files hold ``token count`` lines and fairseq prepends its own 4 specials, so the
    toolkit-specific ``drop`` symbols are removed; the remaining order is kept and the pseudo-counts
    decrease with rank (so re-sorting by count keeps the order). Returns the number of tokens written.
    Raises DataError (file:line) on an empty line, a token with whitespace, a duplicate, or ``<pad>``.
    """
    lines = read_lines(vocab_path)
    seen = {}
    words = []
    for i, tok in enumerate(lines, start=1):
        if tok in drop:
            continue
        if tok == "" or tok != tok.strip() or len(tok.split()) != 1:
            raise DataError(f"{vocab_path}:{i}: vocabulary entry {tok!r} is empty or contains whitespace")
        if tok in FAIRSEQ_SPECIALS:
            raise DataError(f"{vocab_path}:{i}: vocabulary entry {tok!r} clashes with a fairseq special symbol")
        if tok in seen:
            raise DataError(f"{vocab_path}:{i}: duplicate vocabulary entry {tok!r} (first on line {seen[tok]})")
        seen[tok] = i
        words.append(tok)
    n = len(words)
    write_lines(out_path, (f"{w} {n - r}" for r, w in enumerate(words)))
    return n


def download(url: str, dest: Path) -> Path:
    """Fetch ``url`` to ``dest`` (skipped if it already exists); DataError with the URL on failure."""
    dest = Path(dest)
    if dest.is_file() and dest.stat().st_size > 0:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    log(f"downloading {url}")
    try:
        with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as f:
            shutil.copyfileobj(r, f)
    except Exception as e:  # network errors come in many classes; report them uniformly
        tmp.unlink(missing_ok=True)
        raise DataError(f"could not download {url} ({e.__class__.__name__}: {e})") from None
    os.replace(tmp, dest)
    return dest


def extract(archive: Path, into: Path) -> None:
    """Unpack a .tgz/.tar.gz/.zip archive into ``into`` (refusing members that escape it)."""
    into = Path(into).resolve()
    into.mkdir(parents=True, exist_ok=True)
    name = archive.name
    if name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for m in z.namelist():
                if not (into / m).resolve().is_relative_to(into):
                    raise DataError(f"{archive}: member {m!r} escapes the extraction folder")
            z.extractall(into)
    else:
        with tarfile.open(archive) as t:
            t.extractall(into, filter="data")
