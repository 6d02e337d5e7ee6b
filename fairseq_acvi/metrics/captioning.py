"""Caption metrics through the COCO caption toolkit (``pycocoevalcap``): BLEU-4, METEOR 1.5, ROUGE-L, CIDEr-D.

Used for the video-captioning results of docs/method.md §3.2 / §5 (ACVI paper Table 3: ROUGE-L and CIDEr on
the MSVD valid and test videos). Each video has one hypothesis and all of its reference captions.

What each number is (all as the COCO toolkit computes them; the paper's CIDEr values are on this scale):

* ``BLEU-4``: corpus-level BLEU with up to 4-grams, brevity penalty against the reference closest in
  length (``pycocoevalcap.bleu``, option "closest").
* ``METEOR``: METEOR 1.5 (``meteor-1.5.jar -l en -norm``, run by pycocoevalcap in a Java subprocess;
  Java must be on PATH), corpus-level.
* ``ROUGE-L``: per video, LCS precision and recall against each reference, maximised separately over
  references, combined as F = (1 + β²) P R / (R + β² P) with β = 1.2; mean over videos.
* ``CIDEr``: the toolkit's ``Cider`` class, which is **CIDEr-D** (Vedantam et al. 2015): TF-IDF
  weighted n-gram vectors (n = 1..4), IDF from the references of the videos being scored, hypothesis
  counts clipped to the reference counts, Gaussian length penalty with σ = 6, times 10; mean over
  videos. IDF needs many videos: on a single video every weight is log(1) = 0 and the score is 0.

Text normalisation before scoring (the role of the toolkit's Java PTB tokenizer): lower-case, NLTK
wordpunct tokens, tokens made only of punctuation dropped, joined by single spaces. The MSVD reference
files are already lower-case without punctuation, so this changes nothing there. A ``<unk>`` printed by
fairseq-generate becomes the word ``unk``, which matches no MSVD reference (it costs precision).
"""
from __future__ import annotations

import shutil
import string
from typing import Dict, List, Mapping, Optional, Sequence

from fairseq_acvi.data.video_features import tokenize_caption
from fairseq_acvi.published import CAPTIONING_TABLE3

ALL_METRICS = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr")

#: ACVI paper Table 3 (docs/method.md §5): {method: {(metric, split): value}}
_PUNCT = set(string.punctuation)


def normalize_caption(text: str) -> str:
    """Lower-cased wordpunct tokens without punctuation-only tokens, space-joined."""
    return " ".join(t for t in tokenize_caption(text) if not all(c in _PUNCT for c in t))


def _require_pycocoevalcap():
    try:
        import pycocoevalcap  # noqa: F401
    except ImportError:
        raise ImportError("caption metrics need pycocoevalcap: pip install pycocoevalcap "
                          "(or pip install 'fairseq-acvi[eval]')") from None


def _prepare(hyps: Mapping[str, str], refs: Mapping[str, Sequence[str]]):
    missing = [k for k in refs if k not in hyps]
    extra = [k for k in hyps if k not in refs]
    if missing or extra:
        raise ValueError(f"hypotheses and references cover different videos: {len(missing)} videos without a "
                         f"hypothesis (e.g. {missing[:3]}), {len(extra)} hypotheses without references "
                         f"(e.g. {extra[:3]})")
    if not refs:
        raise ValueError("nothing to score: no videos")
    gts, res = {}, {}
    for k in refs:
        rs = [normalize_caption(r) for r in refs[k]]
        if not rs or not all(rs):
            raise ValueError(f"video {k!r}: every video needs at least one non-empty reference")
        gts[k], res[k] = rs, [normalize_caption(hyps[k])]
    return gts, res


def rouge_l(gts: Dict[str, List[str]], res: Dict[str, List[str]]) -> float:
    """Mean ROUGE-L (β = 1.2) over videos; an empty hypothesis scores 0 (the toolkit would divide by 0)."""
    from pycocoevalcap.rouge.rouge import Rouge

    scorer = Rouge()
    scores = [scorer.calc_score(res[k], gts[k]) if res[k][0] else 0.0 for k in gts]
    return float(sum(scores) / len(scores))


def score_captions(hyps: Mapping[str, str], refs: Mapping[str, Sequence[str]],
                   metrics: Sequence[str] = ALL_METRICS) -> Dict[str, float]:
    """Score one hypothesis per video against all of its references.

    Args:
        hyps: {video_id: hypothesis caption}
        refs: {video_id: [reference captions]}; the same video ids as ``hyps``.
        metrics: a subset of ``ALL_METRICS``.
    Returns: {metric name: corpus score} (values in [0, 1], CIDEr in [0, 10]).
    """
    unknown = [m for m in metrics if m not in ALL_METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {list(ALL_METRICS)}")
    _require_pycocoevalcap()
    gts, res = _prepare(hyps, refs)
    out: Dict[str, float] = {}
    if "BLEU-4" in metrics:
        from pycocoevalcap.bleu.bleu import Bleu

        bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
        out["BLEU-4"] = float(bleu[3])
    if "METEOR" in metrics:
        out["METEOR"] = meteor(gts, res)
    if "ROUGE-L" in metrics:
        out["ROUGE-L"] = rouge_l(gts, res)
    if "CIDEr" in metrics:
        from pycocoevalcap.cider.cider import Cider

        cider, _ = Cider().compute_score(gts, res)
        out["CIDEr"] = float(cider)
    return out


def meteor(gts: Dict[str, List[str]], res: Dict[str, List[str]]) -> float:
    """Corpus METEOR 1.5 through pycocoevalcap's Java wrapper (needs ``java`` on PATH)."""
    return meteor_scores(gts, res)[0]


def meteor_scores(gts: Dict[str, List[str]], res: Dict[str, List[str]]):
    """(corpus METEOR, {video: segment METEOR}); inputs as pycocoevalcap takes them (normalised text)."""
    if shutil.which("java") is None:
        raise RuntimeError("METEOR needs a Java runtime on PATH (java); leave METEOR out with --metrics")
    from pycocoevalcap.meteor.meteor import Meteor

    scorer = Meteor()
    try:
        score, per_video = scorer.compute_score(gts, res)
    finally:
        proc = scorer.meteor_p
        if proc.poll() is None:
            proc.stdin.close()
            proc.kill()
            proc.wait()
    return float(score), {k: float(v) for k, v in zip(gts.keys(), per_video)}


def format_table3(ours: Mapping[str, Mapping[str, float]], name: str = "ours",
                  extra_metrics: Sequence[str] = ("BLEU-4", "METEOR")) -> str:
    """The paper's Table 3 layout (rows: ROUGE-L / CIDEr × valid / test) with our column last.

    ``ours``: {split: {metric: value}} for splits "valid" and/or "test"; missing cells print "-".
    Rows for ``extra_metrics`` (not in the paper) show only our values.
    """
    methods = list(CAPTIONING_TABLE3)
    header = ["metric", "split", *methods, name]
    rows = []
    for metric in ("ROUGE-L", "CIDEr", *extra_metrics):
        for split in ("valid", "test"):
            pub = [CAPTIONING_TABLE3[m].get((metric, split)) for m in methods]
            mine = ours.get(split, {}).get(metric)
            if mine is None and all(p is None for p in pub):
                continue
            rows.append([metric, split, *[_fmt(p) for p in pub], _fmt(mine)])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).rjust(w) if i > 1 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header, *rows]]
    note = "published: ACVI paper Table 3 (MSVD); BLEU-4/METEOR are not in the paper"
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:], note])


def _fmt(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4f}"
