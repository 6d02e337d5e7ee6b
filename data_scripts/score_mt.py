"""Score ``fairseq-generate`` output with sacrebleu against raw references (docs/method.md §3.3 metric).

Prints (and with ``--json`` writes) two BLEU scores:

* ``bleu_detok``: sacrebleu's standard BLEU (13a tokenisation) of detokenised text. With
  ``--moses-detok LANG`` both hypotheses and references are first Moses-detokenised (and their
  ``&quot;``-style escapes undone) with sacremoses: this is for already tokenised corpora such as the
  Stanford IWSLT'15 release, whose references only exist in tokenised form. Without it the text is
  taken as is (e.g. sentencepiece output decoded by ``--remove-bpe sentencepiece``).
* ``bleu_tok``: "multi-bleu style" BLEU, ``tokenize="none"`` on the text exactly as produced (for a
  word-level tokenised corpus: tokenised hypotheses vs the tokenised references).

Hypotheses are the ``H-<id>`` lines (BPE already removed by fairseq), ordered by id; a missing or
duplicated id is an error naming the file.

Options for character-level targets (``data_scripts/prepare_multi30k_char.py``):

* ``--char-target``: the hypotheses are character sequences with a visible word boundary
  (``a ▁ b c``); they are turned back into words (``a bc``: spaces between characters removed, ``▁``
  made a space) before any score, and compared with the word-level references of ``raw/``.
* ``--chrf``: also sacreBLEU's chrF (``chrf``, character 6-grams, β = 2, no word n-grams) on the same
  text as ``bleu_detok`` (after ``--moses-detok`` where given), printed on a second line with its
  signature (``chrf_signature``).

``--against OTHER_GEN`` (another system's output on the same references, e.g. the mean-context
decode ``gen_valid_K0.txt``): also the paired bootstrap of the tokenised BLEU difference, this
output minus that one (1000 resamples of the sentences, 95 % percentile interval; Koehn 2004;
``fairseq_acvi.metrics.bleu``), printed and written as ``paired`` = {``against`` (the file's name),
``delta``, ``low``, ``high``, ``p_other_better`` (share of resamples where this output wins),
``n_resamples``}.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DataError, package_module, read_lines, run_main  # noqa: E402


def _bleu():
    """The plugin's ``fairseq_acvi.metrics.bleu`` (numpy only), without importing the package and
    fairseq (``common.package_module``; its own import of ``metrics.bootstrap`` is loaded first)."""
    package_module("fairseq_acvi.metrics.bootstrap")
    return package_module("fairseq_acvi.metrics.bleu")


def read_hypotheses(gen_path: Path, n_expected: int):
    """Hypothesis strings of a fairseq-generate log, in sample-id order (ids must be 0..n-1)."""
    hyps = {}
    for i, line in enumerate(read_lines(gen_path), start=1):
        if not line.startswith("H-"):
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            raise DataError(f"{gen_path}:{i}: malformed hypothesis line")
        sid = int(parts[0][2:])
        if sid in hyps:
            raise DataError(f"{gen_path}:{i}: second hypothesis for sample {sid} (use --nbest 1)")
        hyps[sid] = parts[2] if len(parts) == 3 else ""
    missing = sorted(set(range(n_expected)) - set(hyps))
    if missing or len(hyps) != n_expected:
        raise DataError(f"{gen_path}: {len(hyps)} hypotheses for {n_expected} references "
                        f"(missing ids, first ones: {missing[:10]}); were inputs skipped for size?")
    return [hyps[k] for k in range(n_expected)]


def chars_to_words(hyps):
    """Character-level hypotheses (``a ▁ b c``) back to words (``a bc``); see prepare_multi30k_char.py."""
    from prepare_multi30k_char import chars_to_text
    return [chars_to_text(h) for h in hyps]


def paired_against(hyps, other_hyps, refs, name, char_target=False):
    """Paired bootstrap of tokenised BLEU(hyps) − BLEU(other_hyps) (``--against``)."""
    paired_bootstrap, sentence_stats = _bleu().paired_bootstrap, _bleu().sentence_stats
    if char_target:
        other_hyps = chars_to_words(other_hyps)
    r = paired_bootstrap(sentence_stats(other_hyps, refs), sentence_stats(hyps, refs))
    return {"against": name, **{k: (round(v, 4) if isinstance(v, float) else v)
                                for k, v in r.items() if k not in ("base", "other")}}


def score(hyps, refs, moses_lang=None, chrf=False):
    import sacrebleu
    tok = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none")
    if moses_lang:
        from sacremoses import MosesDetokenizer
        md = MosesDetokenizer(lang=moses_lang)
        detok = lambda xs: [md.detokenize(x.split(), unescape=True) for x in xs]  # noqa: E731
        hyps, refs = detok(hyps), detok(refs)
    metric = sacrebleu.metrics.BLEU()
    det = metric.corpus_score(hyps, [refs])
    out = {"bleu_detok": round(det.score, 2), "bleu_tok": round(tok.score, 2),
           "detok_signature": str(det), "sacrebleu_signature": str(metric.get_signature()),
           "n": len(refs)}
    if chrf:
        chrf_metric = sacrebleu.metrics.CHRF()
        out["chrf"] = round(chrf_metric.corpus_score(hyps, [refs]).score, 2)
        out["chrf_signature"] = str(chrf_metric.get_signature())
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gen", required=True, help="fairseq-generate output")
    p.add_argument("--ref", required=True, help="raw reference text, one sentence per line")
    p.add_argument("--moses-detok", metavar="LANG", default=None,
                   help="Moses-detokenise hypotheses and references before the detokenised BLEU")
    p.add_argument("--detok-only", action="store_true",
                   help="print only the detokenised BLEU (for untokenised corpora such as WMT with sentencepiece)")
    p.add_argument("--char-target", action="store_true",
                   help="hypotheses are characters with the word boundary \u2581 (prepare_multi30k_char.py): "
                        "turn them back into words before scoring")
    p.add_argument("--chrf", action="store_true", help="also report sacreBLEU's chrF, with its signature")
    p.add_argument("--against", metavar="OTHER_GEN", default=None,
                   help="another fairseq-generate output on the same references: add the paired "
                        "bootstrap interval of this output's tokenised BLEU minus that one's")
    p.add_argument("--label", default="")
    p.add_argument("--json", default=None, help="also write the scores here")
    a = p.parse_args(argv)
    refs = read_lines(Path(a.ref))
    hyps = read_hypotheses(Path(a.gen), len(refs))
    if a.char_target:
        hyps = chars_to_words(hyps)
    s = score(hyps, refs, a.moses_detok, chrf=a.chrf)
    tok = "" if a.detok_only else f"   tokenised (multi-bleu style) = {s['bleu_tok']:.2f}"
    sig = f"   signature {s['sacrebleu_signature']}"
    if a.detok_only:
        del s["bleu_tok"]
    print(f"{a.label}BLEU detokenised (sacrebleu) = {s['bleu_detok']:.2f}{tok}   [{s['n']} sentences]{sig}")
    if a.chrf:
        print(f"{a.label}chrF (sacrebleu) = {s['chrf']:.2f}   [{s['n']} sentences]   signature {s['chrf_signature']}")
    if a.against:
        format_interval = _bleu().format_interval
        s["paired"] = paired_against(hyps, read_hypotheses(Path(a.against), len(refs)), refs,
                                     Path(a.against).name, a.char_target)
        print(f"{a.label}vs {s['paired']['against']}: tokenised BLEU {format_interval(s['paired'])}, "
              f"better in {100 * s['paired']['p_other_better']:.1f}% of "
              f"{s['paired']['n_resamples']} paired resamples")
    if a.json:
        Path(a.json).write_text(json.dumps(s) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    run_main(main)
