"""Word alignments from an aligner, for Malaviya et al.'s DROP (docs/method.md §3.5).

DROP needs to know which source words the reference and a hypothesis translate. Attention
cannot tell (a sparse model attends to fewer words without translating fewer), so an aligner that
sees no model decides: eflomal (Östling & Tiedemann 2017; ``pip install eflomal``), the IBM1 +
HMM + fertility model sampled by Gibbs, in place of the paper's fast_align.

:func:`forward_links` aligns a test set together with an aligner corpus (the training pairs, as
the paper trains fast_align on the training and test data concatenated) and returns the test
pairs' forward links: each target word points to at most one source word, so a source word is
translated when some target word points to it (the reverse direction would align nearly every
source word to something). :func:`aligned_drop` aligns source–reference and source–hypothesis in
one run of the aligner, so both sides of the score share one sample of its parameters; the Gibbs
sampler is random, so two runs differ in a few per cent of the links.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, List, Sequence

from fairseq_acvi.metrics.attention_stats import drop_score


def _eflomal():
    try:
        import eflomal
    except ImportError:
        raise SystemExit("DROP from an aligner needs the 'eflomal' package: pip install eflomal") from None
    return eflomal


def forward_links(src: Sequence[str], tgt: Sequence[str], corpus_src: Sequence[str],
                  corpus_tgt: Sequence[str]) -> List[str]:
    """The forward (target word → source word) Pharaoh lines ``"i-j …"`` (i source, j target
    index) of the n pairs ``src``/``tgt`` (tokenised lines), aligned with the corpus pairs
    before them; (n,) lines. An empty line on either side aligns to nothing."""
    if len(src) != len(tgt) or len(corpus_src) != len(corpus_tgt):
        raise ValueError(f"aligner: {len(src)} source lines but {len(tgt)} target lines, corpus "
                         f"{len(corpus_src)} / {len(corpus_tgt)}")
    eflomal = _eflomal()
    with tempfile.TemporaryDirectory() as tmp:
        fwd = os.path.join(tmp, "fwd")
        eflomal.Aligner().align([s.strip() + "\n" for s in (*corpus_src, *src)],
                                [t.strip() + "\n" for t in (*corpus_tgt, *tgt)],
                                links_filename_fwd=fwd)
        with open(fwd, encoding="utf-8") as f:
            links = [line.rstrip("\n") for line in f]
    if len(links) != len(corpus_src) + len(src):
        raise RuntimeError(f"aligner: {len(links)} alignment lines for {len(corpus_src) + len(src)} pairs")
    return links[len(corpus_src):]


def aligned_drop(src: Sequence[str], ref: Sequence[str], hyp: Sequence[str],
                 corpus_src: Sequence[str], corpus_tgt: Sequence[str]) -> Dict:
    """DROP (percent, :func:`fairseq_acvi.metrics.attention_stats.drop_score`) of the hypotheses
    ``hyp`` against the references ``ref`` of the sources ``src`` (n tokenised lines each), both
    aligned in one run with the corpus; also the links (``src_ref_links``, ``src_hyp_links``)."""
    if not len(src) == len(ref) == len(hyp):
        raise ValueError(f"DROP: {len(src)} sources, {len(ref)} references, {len(hyp)} hypotheses")
    links = forward_links([*src, *src], [*ref, *hyp], corpus_src, corpus_tgt)
    n = len(src)
    return {**drop_score(links[:n], links[n:]), "src_ref_links": links[:n], "src_hyp_links": links[n:]}
