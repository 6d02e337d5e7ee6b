"""The stock CLIs' logs of one translation run, read (fairseq_acvi/cli/mt_report.py is the command).

``fairseq-train --log-format json`` (per-epoch ``train`` / ``valid`` records, the parameter count,
the "done training" line) and ``fairseq-validate --log-format json``; every malformed record is a
:class:`ReportError` naming the file and line.
"""
import gzip
import json
import re
from typing import Dict, Iterator, List, Optional

_RECORD = re.compile(r"\|\s*(train|valid)\s*\|\s*(\{.*\})\s*$")


class ReportError(ValueError):
    """A run folder that cannot be read; the message names the file (and line)."""


def log_lines(path: str) -> Iterator[str]:
    """The lines of a log, plain or gzip-compressed (a name ending in ``.gz``: the ``train.log.gz``
    a report keeps beside its decoded outputs); undecodable bytes replaced, as logs may hold them."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        yield from f


def parse_train_log(path: str) -> Dict[str, Dict[int, dict]]:
    """Per-epoch ``train`` and ``valid`` records of a fairseq json log: {"train": {epoch: rec}, ...}.

    A resumed run appends to the same log and may repeat an epoch: the last record of an epoch
    wins. Values are converted to float; a malformed record is an error naming the line.
    """
    out: Dict[str, Dict[int, dict]] = {"train": {}, "valid": {}}
    for lineno, line in enumerate(log_lines(path), start=1):
        m = _RECORD.search(line)
        if not m:
            continue
        try:
            rec = json.loads(m.group(2))
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}:{lineno}: malformed {m.group(1)} record ({e})") from None
        if "epoch" not in rec:       # per-interval records of a long epoch carry no epoch key
            continue
        kind = m.group(1)
        prefix = kind + "_"
        vals = {}
        for k, v in rec.items():
            try:
                vals[k[len(prefix):] if k.startswith(prefix) else k] = float(v)
            except (TypeError, ValueError):
                pass
        out[kind][int(rec["epoch"])] = vals
    return out


_PARAMS = re.compile(r"num\. (?:shared )?model params: ([\d,]+)")


def model_parameters(path: str) -> Optional[int]:
    """The model's parameter count as ``fairseq-train`` logs it at start ("num. shared model params:
    9,029,555 (num. trained: …)"); the last such line of a resumed run's log; None if absent."""
    found = None
    for line in log_lines(path):
        m = _PARAMS.search(line)
        if m:
            found = int(m.group(1).replace(",", ""))
    return found


_DONE = "done training in "   # fairseq-train's last line once its epochs (or early stopping) ended


def training_finished(path: str) -> bool:
    """Whether a ``fairseq-train`` log ends its training: it holds fairseq's "done training in …"
    line, written once the last epoch or early stopping is reached (a run stopped part-way, or
    still training, has none; a resumed run's log gains it when the resumed process ends)."""
    return any(_DONE in line for line in log_lines(path))


def report_lines(path: str) -> List[str]:
    """The lines of a ``fairseq-train`` log that a report reads (:func:`parse_train_log`'s epoch
    records, :func:`model_parameters`' and :func:`training_finished`'s lines), without their
    newline: what a report keeps of the log beside the decoded outputs."""
    kept = []
    for line in log_lines(path):
        m = _RECORD.search(line)
        if (m and '"epoch"' in m.group(2)) or _PARAMS.search(line) or _DONE in line:
            kept.append(line.rstrip("\n"))
    return kept


def parse_validate_log(path: str) -> Optional[dict]:
    """The (last) validation record of a ``fairseq-validate --log-format json`` log, or None."""
    rec = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _RECORD.search(line)
            if m and m.group(1) == "valid":
                rec = {k[len("valid_"):] if k.startswith("valid_") else k: float(v)
                       for k, v in json.loads(m.group(2)).items()
                       if isinstance(v, (int, float, str)) and _is_number(v)}
    return rec


def _is_number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def likelihood_bits(rec: dict) -> Optional[float]:
    """Per-token likelihood loss in bits: ``nll_loss`` when logged (elbo), else ``loss``."""
    if rec is None:
        return None
    return rec.get("nll_loss", rec.get("loss"))


def training_wall(epochs: List[dict]) -> Optional[float]:
    """Training seconds over the epochs' ``train`` records, summed over resumes: fairseq's
    ``wall`` starts again in a resumed process (the part of an epoch a kill cut short, which
    logged no record, is not counted)."""
    walls = [e["train_wall"] for e in epochs if e.get("train_wall") is not None]
    done, prev = 0.0, 0.0
    for w in walls:
        if w < prev:
            done += prev
        prev = w
    return done + prev if walls else None
