"""Two runs' decodes of one split, compared sentence by sentence: the paired bootstrap interval of
their tokenised BLEU difference (Koehn 2004; :mod:`fairseq_acvi.metrics.bleu`), read from the
hypotheses the runs left, as the normaliser report of docs/method.md §3.5 needs it.

Where a run's hypotheses of ``<split>`` are looked for, first found wins (:func:`hypotheses_path`):

1. ``<run folder>/gen_<split>.txt`` (fairseq-generate's output, as recipes/mt_multi30k.sh leaves it);
2. ``<run folder>/gen_<split>.txt.gz``;
3. ``<kept>/outputs/<pair>/<variant>_seed<N>/gen_<split>.txt.gz``, the copy ``mt_report
   --keep-outputs`` keeps beside its report (:mod:`fairseq_acvi.mt_eval.kept_outputs`), when a
   report folder ``kept`` is given.

The hypotheses are the ``H-<id>`` lines in id order (ids 0 … n−1, each once); the references are
``<refs_dir>/<split>.<tgt>`` (``tgt``: the pair's second language, ``en_de`` → ``de``), the raw
references score_mt.py scores ``bleu_tok`` against. :class:`Decodes` reads each split's
references once and scores each run's decode once for a report, and lists the decodes whose
recomputed BLEU is not the one their ``bleu_<split>.json`` records. Every problem is a
:class:`~fairseq_acvi.mt_eval.logs.ReportError` naming the file.
"""
import os
from typing import Dict, List, Optional

import numpy as np

from fairseq_acvi.data.text_lines import read_text_lines
from fairseq_acvi.metrics.bleu import bleu_from_totals, paired_bootstrap, sentence_stats
from fairseq_acvi.mt_eval.kept_outputs import hypothesis_lines, run_output_dir
from fairseq_acvi.mt_eval.logs import ReportError


def target_language(pair: str) -> str:
    """``en_de`` → ``de`` (recipes/lib_mt.sh ``mt_split_pair``); ReportError if malformed."""
    src, sep, tgt = pair.rpartition("_")
    if not sep or not src or not tgt:
        raise ReportError(f"pair {pair!r} does not look like en_de: no target language")
    return tgt


def hypotheses_candidates(run: dict, split: str, kept: Optional[str] = None) -> List[str]:
    """The files :func:`hypotheses_path` tries, in order (module docstring)."""
    out = [os.path.join(run["dir"], f"gen_{split}.txt"), os.path.join(run["dir"], f"gen_{split}.txt.gz")]
    if kept:
        out.append(os.path.join(run_output_dir(kept, run), f"gen_{split}.txt.gz"))
    return out


def hypotheses_path(run: dict, split: str, kept: Optional[str] = None) -> str:
    """The first existing file of :func:`hypotheses_candidates`; ReportError naming them all."""
    tried = hypotheses_candidates(run, split, kept)
    for path in tried:
        if os.path.isfile(path):
            return path
    raise ReportError(f"{run['variant']} seed {run['seed']}: no hypotheses of {split} "
                      f"(looked for {', '.join(tried)})")


def read_hypotheses(path: str) -> List[str]:
    """The hypotheses of a fairseq-generate output (``.txt`` or ``.gz``) in id order: (n,) str.
    A malformed ``H-`` line, a repeated id or a gap in 0 … n−1 raises ReportError naming ``path``."""
    try:
        lines = hypothesis_lines(path)
    except ValueError as e:                    # not UTF-8, a damaged gzip: the message names the file
        raise ReportError(str(e)) from None
    hyps: Dict[int, str] = {}
    for line in lines:
        parts = line.split("\t")
        try:
            sid = int(parts[0][2:])
        except ValueError:
            sid = None
        if sid is None or len(parts) not in (2, 3):
            raise ReportError(f"{path}: malformed hypothesis line {line[:60]!r}")
        if sid in hyps:
            raise ReportError(f"{path}: a second hypothesis for sentence {sid} (decode with --nbest 1)")
        hyps[sid] = parts[2] if len(parts) == 3 else ""
    if sorted(hyps) != list(range(len(hyps))):
        missing = sorted(set(range(max(hyps, default=-1) + 1)) - set(hyps))
        raise ReportError(f"{path}: hypothesis ids are not 0 … {len(hyps) - 1} (missing: {missing[:10]})")
    return [hyps[i] for i in range(len(hyps))]


def read_references(refs_dir: str, split: str, pair: str) -> List[str]:
    """The lines of ``<refs_dir>/<split>.<tgt>``: (n,) str; ReportError naming a missing file."""
    path = os.path.join(refs_dir, f"{split}.{target_language(pair)}")
    if not os.path.isfile(path):
        raise ReportError(f"{path}: references missing (--refs-dir is the data-bin's raw/ folder)")
    try:
        return read_text_lines(path, newline="lf")
    except ValueError as e:
        raise ReportError(str(e)) from None


def run_statistics(run: dict, split: str, refs: List[str], refs_path: str,
                   kept: Optional[str] = None) -> dict:
    """One run's decode of ``split`` against ``refs``: ``stats`` (n, N_STATS) sentence statistics,
    ``bleu`` (its corpus BLEU, tokenised), ``path`` (the hypotheses read). ReportError when the
    hypotheses are not one per reference."""
    path = hypotheses_path(run, split, kept)
    hyps = read_hypotheses(path)
    if len(hyps) != len(refs):
        raise ReportError(f"{path}: {len(hyps)} hypotheses but {refs_path} has {len(refs)} references")
    stats = sentence_stats(hyps, refs)
    return {"stats": stats, "bleu": float(bleu_from_totals(stats.sum(0))), "path": path}


def paired_interval(base: dict, other: dict, n_resamples: int = 1000, level: float = 0.95,
                    seed: int = 0) -> dict:
    """:func:`~fairseq_acvi.metrics.bleu.paired_bootstrap` of BLEU(other) − BLEU(base) from two
    :func:`run_statistics` results (the same references): ``delta``, ``low``, ``high``,
    ``p_other_better``, ``base``, ``other``, ``n_resamples``, ``level``, and the two files read."""
    r = paired_bootstrap(np.asarray(base["stats"]), np.asarray(other["stats"]), n_resamples, level, seed)
    return dict(r, base_hypotheses=base["path"], other_hypotheses=other["path"])


#: a decode's tokenised BLEU recomputed from its hypotheses differs from the ``bleu_tok`` its
#: ``bleu_<split>.json`` records (2 decimals) by rounding only; more is a mismatch
RESCORE_TOLERANCE = 0.006


class Decodes:
    """Runs' decodes scored against the references of ``refs_dir`` (``pair``'s target language):
    each split's references read once, each (run, split) scored once (:func:`run_statistics`,
    hypotheses looked for as :func:`hypotheses_path` says, ``kept`` included). ``rescored`` lists
    every decode read: {"run", "split", "path", "recomputed", "recorded" (its ``bleu_tok``, or
    None)}; :meth:`mismatches` those whose two BLEU differ by more than rounding (other
    references?)."""

    def __init__(self, refs_dir: str, pair: str, kept: Optional[str] = None):
        self.refs_dir, self.pair, self.kept = refs_dir, pair, kept
        self._refs: Dict[str, List[str]] = {}
        self._scored: Dict[tuple, dict] = {}
        self.rescored: List[dict] = []

    def refs_path(self, split: str) -> str:
        return os.path.join(self.refs_dir, f"{split}.{target_language(self.pair)}")

    def statistics(self, run: dict, split: str) -> dict:
        """:func:`run_statistics` of the run's decode of ``split``, computed once."""
        key = (run["variant"], run["seed"], split)
        if key not in self._scored:
            if split not in self._refs:
                self._refs[split] = read_references(self.refs_dir, split, self.pair)
            decode = run_statistics(run, split, self._refs[split], self.refs_path(split), self.kept)
            self._scored[key] = decode
            self.rescored.append({"run": run, "split": split, "path": decode["path"],
                                  "recomputed": decode["bleu"],
                                  "recorded": run["bleu"].get(split, {}).get("bleu_tok")})
        return self._scored[key]

    def interval(self, base: dict, other: dict, split: str, **bootstrap) -> dict:
        """:func:`paired_interval` of ``other`` − ``base`` on ``split`` (``bootstrap``: its
        ``n_resamples``, ``level``, ``seed``), each decode scored once."""
        return paired_interval(self.statistics(base, split), self.statistics(other, split), **bootstrap)

    def mismatches(self) -> List[dict]:
        return [x for x in self.rescored if x["recorded"] is not None
                and abs(x["recomputed"] - x["recorded"]) > RESCORE_TOLERANCE]

    def raise_mismatches(self) -> None:
        """ReportError naming every decode of :meth:`mismatches`, for a report whose figures would
        otherwise not be the recorded ones."""
        bad = self.mismatches()
        if bad:
            raise ReportError("; ".join(
                f"{x['path']}: BLEU {x['recomputed']:.2f} from its hypotheses, but its "
                f"bleu_{x['split']}.json records {x['recorded']:.2f} (recorded against other "
                f"references?)" for x in bad))
