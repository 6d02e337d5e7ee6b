"""METEOR 1.5 in exact and full mode (docs/method.md §5, P Table 1 "Exact Match" / "+ stem/syn/para").

Runs the official METEOR 1.5 jar (Denkowski & Lavie 2014) shipped inside the ``pycocoevalcap``
package, in file mode:

    java -Xmx2G -jar meteor-1.5.jar HYP REF -l en -norm [-m exact]

* ``exact``: ``-m exact`` — only exact word matches;
* ``full``: the default English modules ``exact stem synonym paraphrase`` (Snowball stemmer and
  WordNet synsets are inside the jar; the paraphrase table is ``data/paraphrase-en.gz`` next to
  the jar — pycocoevalcap 1.2 ships it, :func:`meteor_resources` checks it).

``-norm`` lower-cases and normalises punctuation. Hypotheses and references are first normalised
like ROUGE's input (:func:`fairseq_acvi.metrics.rouge.summary_tokens`: sentence markers removed,
glued periods split). The reported score is METEOR's system-level "Final score" (computed from
the corpus-level match statistics, not a mean of segment scores), times 100.
Loading the paraphrase table makes one ``full`` call take ~20-40 s; ``exact`` takes ~1 s.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, List, Sequence

from fairseq_acvi.metrics.rouge import summary_tokens

MODES = ("exact", "full")
_FINAL = re.compile(r"^Final score:\s+([0-9.eE+-]+)\s*$", re.M)
_SEGMENT = re.compile(r"^Segment (\d+) score:\s+([0-9.eE+-]+)\s*$", re.M)


def meteor_dir() -> Path:
    """Folder of ``meteor-1.5.jar`` inside the installed ``pycocoevalcap`` package."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("METEOR needs the pycocoevalcap package (it ships meteor-1.5.jar): "
                          "pip install --no-deps pycocoevalcap")
    d = Path(list(spec.submodule_search_locations)[0]) / "meteor"
    if not (d / "meteor-1.5.jar").is_file():
        raise FileNotFoundError(f"meteor-1.5.jar not found in {d}")
    return d


def meteor_resources() -> Dict[str, bool]:
    """Which resources the shipped METEOR has: the jar, the English paraphrase table, java."""
    d = meteor_dir()
    return {
        "jar": (d / "meteor-1.5.jar").is_file(),
        "paraphrase-en": (d / "data" / "paraphrase-en.gz").is_file(),
        "java": shutil.which("java") is not None,
    }


def _write_lines(path: str, texts: Sequence[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(" ".join(summary_tokens(t)) + "\n")


def meteor(hyps: Sequence[str], refs: Sequence[str], mode: str = "exact",
           java: str = "java", memory: str = "2G", timeout: float = 1800.0) -> Dict[str, object]:
    """METEOR of ``hyps`` against ``refs`` (one reference each).

    Returns ``{"score": system-level score × 100, "segments": [per-pair score × 100]}``.
    Raises ``RuntimeError`` with METEOR's output if the jar fails.
    """
    if mode not in MODES:
        raise ValueError(f"METEOR mode must be one of {MODES}, got {mode!r}")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    if not hyps:
        raise ValueError("no hypotheses to score")
    if shutil.which(java) is None:
        raise RuntimeError(f"METEOR needs Java ('{java}' not found on PATH); install a JRE "
                           "(e.g. apt-get install default-jre-headless) or skip METEOR")
    d = meteor_dir()
    if mode == "full" and not (d / "data" / "paraphrase-en.gz").is_file():
        raise FileNotFoundError(f"full METEOR needs {d / 'data' / 'paraphrase-en.gz'}")
    with tempfile.TemporaryDirectory(prefix="meteor-") as tmp:
        hyp_path, ref_path = os.path.join(tmp, "hyp"), os.path.join(tmp, "ref")
        _write_lines(hyp_path, hyps)
        _write_lines(ref_path, refs)
        cmd = [java, f"-Xmx{memory}", "-jar", str(d / "meteor-1.5.jar"), hyp_path, ref_path,
               "-l", "en", "-norm"]
        if mode == "exact":
            cmd += ["-m", "exact"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = res.stdout
    final = _FINAL.search(out)
    if res.returncode != 0 or final is None:
        raise RuntimeError(f"METEOR failed (exit {res.returncode}): {' '.join(cmd)}\n"
                           f"{out[-2000:]}\n{res.stderr[-2000:]}")
    segs: List[float] = [0.0] * len(hyps)
    for m in _SEGMENT.finditer(out):
        segs[int(m.group(1)) - 1] = 100.0 * float(m.group(2))
    return {"score": 100.0 * float(final.group(1)), "segments": segs}
